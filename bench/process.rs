//! What the benchmarks read of a process, and the exporter as a child process.

// Each benchmark uses part of this.
#![allow(dead_code)]

use std::process::{Command, Stdio};

/// The release binary sampling the local cluster (`bootstrap`) every `interval` and
/// serving on `port`, keeping the topics and groups the regexes `topics` and `groups`
/// match. Its log (stderr) is piped, stdout discarded; add environment as needed.
/// `BENCH_EXPORTER=PATH` runs the binary at PATH instead (another revision's release
/// build, for a before-and-after on the same workload: `bench/run cycle-against=REV`).
pub fn exporter(
    bootstrap: &str,
    cluster: &str,
    interval: &str,
    port: u16,
    topics: &str,
    groups: &str,
) -> Command {
    let binary = std::env::var_os("BENCH_EXPORTER")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_kafka-lso-exporter").into());
    let mut command = Command::new(binary);
    command
        .args(["--bootstrap-servers", bootstrap, "--cluster-name", cluster])
        .args([
            "--interval",
            interval,
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
        ])
        .env(
            "KAFKA_LSO_EXPORTER_CLUSTERS__0__TOPICS__INCLUDE",
            format!("[{topics:?}]"),
        )
        .env(
            "KAFKA_LSO_EXPORTER_CLUSTERS__0__GROUPS__INCLUDE",
            format!("[{groups:?}]"),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// CPU-seconds (user + system) process `pid` has used so far.
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces): utime and stime are the
    // 12th and 13th of them, in clock ticks (100 per second on Linux).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// Resident memory of process `pid` ("self" for this one) in KiB: (now, peak).
pub fn rss_kib(pid: impl std::fmt::Display) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}
