//! How the process's allocator holds memory. The exporter's heap rises and falls with each
//! cycle: a cycle builds the next snapshot while the last one is still served, then frees
//! the last one. With glibc's defaults that freed memory mostly stays resident: every
//! thread that allocates gets an arena of its own (up to eight per core: the runtime's
//! workers, its blocking threads, librdkafka's threads), each keeping what it freed for its
//! own next allocations, and the threshold above which a block is mapped (and unmapped
//! when freed) rises to the largest block freed, so that a large render buffer once freed
//! is kept in an arena for good. Resident memory then climbs for minutes towards the sum of
//! every arena's peak.
//!
//! [`tune`] (at start) limits the arenas to one and fixes the mapping threshold, and
//! [`release_freed`] (after each cycle) hands what is free back to the system. Other C
//! libraries (musl) have none of this: both are then nothing.

/// Tunes glibc's allocator for a process whose heap comes and goes with each cycle. Call
/// first thing, before other threads start. A setting given in glibc's own environment
/// variable (`MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`) is
/// left as given, and `GLIBC_TUNABLES` with any `glibc.malloc.` tunable leaves all three.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc.")) {
            return;
        }
        let set = |variable: &str, parameter: libc::c_int, value: libc::c_int| {
            if std::env::var_os(variable).is_none() {
                // SAFETY: mallopt only changes the allocator's parameters; called before
                // other threads allocate.
                unsafe {
                    libc::mallopt(parameter, value);
                }
            }
        };
        // One arena: each freed block is found again by the next cycle, whichever thread
        // runs it. The exporter's threads allocate little at once (a cycle, a scrape);
        // on 2 cores at 2,000 partitions peak RSS fell from 33-34 to 30-32 MiB against
        // two arenas (bench/memory.rs, one run each; CPU seconds 0.59 and 0.99 against
        // 0.54 and 0.96, measured while another bench shared the machine).
        set("MALLOC_ARENA_MAX", libc::M_ARENA_MAX, 1);
        // Blocks from 64 KiB up (render buffers, answers, the snapshot's larger lists)
        // are mapped on their own and unmapped when freed, so that a cycle's transient
        // blocks leave no holes in the arena; a fixed value stops glibc from raising it.
        set("MALLOC_MMAP_THRESHOLD_", libc::M_MMAP_THRESHOLD, 64 * 1024);
        // Free memory at the top of an arena above 1 MiB goes back at once.
        set(
            "MALLOC_TRIM_THRESHOLD_",
            libc::M_TRIM_THRESHOLD,
            1024 * 1024,
        );
    }
}

/// Gives the pages of free memory in every arena back to the system (they stay reserved
/// and come back on use). Costs a walk of the allocator's free lists: once per cycle.
pub fn release_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free pages; safe from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}
