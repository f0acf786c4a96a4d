//! The `process_*` families of the Prometheus client libraries (resident and virtual
//! memory, CPU time, start time, file descriptors), read from `/proc/self` whenever a
//! body is rendered (once per cycle): the health dashboard shows memory against the pod's
//! limit. Absent where `/proc` is not (not Linux).

use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Linux reports times in `/proc` in USER_HZ, 100 on every architecture it runs on.
const TICKS_PER_SECOND: f64 = 100.0;

#[derive(Debug, Default)]
pub(super) struct ProcessMetrics {
    cpu_seconds: Counter<f64, AtomicU64>,
    resident_bytes: Gauge,
    virtual_bytes: Gauge,
    start_time_seconds: Gauge<f64, AtomicU64>,
    open_fds: Gauge,
    max_fds: Gauge,
}

/// What `/proc/self` says now.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Reading {
    pub cpu_seconds: f64,
    pub resident_bytes: i64,
    pub virtual_bytes: i64,
    pub start_time_seconds: f64,
    pub open_fds: i64,
    pub max_fds: i64,
}

impl ProcessMetrics {
    /// Registers the families when `/proc/self` can be read; `None` elsewhere.
    pub(super) fn register(registry: &mut Registry) -> Option<ProcessMetrics> {
        read()?;
        let metrics = ProcessMetrics::default();
        registry.register(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            metrics.cpu_seconds.clone(),
        );
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory size in bytes",
            metrics.resident_bytes.clone(),
        );
        registry.register(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes",
            metrics.virtual_bytes.clone(),
        );
        registry.register(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            metrics.start_time_seconds.clone(),
        );
        registry.register(
            "process_open_fds",
            "Number of open file descriptors",
            metrics.open_fds.clone(),
        );
        registry.register(
            "process_max_fds",
            "Maximum number of open file descriptors",
            metrics.max_fds.clone(),
        );
        metrics.refresh();
        Some(metrics)
    }

    pub(super) fn refresh(&self) {
        let Some(now) = read() else { return };
        let counted = self.cpu_seconds.get();
        if now.cpu_seconds > counted {
            self.cpu_seconds.inc_by(now.cpu_seconds - counted);
        }
        self.resident_bytes.set(now.resident_bytes);
        self.virtual_bytes.set(now.virtual_bytes);
        self.start_time_seconds.set(now.start_time_seconds);
        self.open_fds.set(now.open_fds);
        self.max_fds.set(now.max_fds);
    }
}

/// Reads `/proc/self/stat`, `/proc/self/status`, `/proc/self/fd`, `/proc/self/limits` and
/// the boot time from `/proc/stat`.
pub(super) fn read() -> Option<Reading> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as i64;
    parse(&stat, &status, &boot, &limits, open_fds)
}

fn parse(stat: &str, status: &str, boot: &str, limits: &str, open_fds: i64) -> Option<Reading> {
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // stat(5): utime 14, stime 15, starttime 22 (1-based, counting pid and comm).
    let field = |n: usize| fields.get(n - 3)?.parse::<f64>().ok();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))?
            .split_whitespace()
            .next()?
            .parse::<i64>()
            .ok()
            .map(|k| k * 1024)
    };
    let btime = boot
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse::<f64>()
        .ok()?;
    let max_fds = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))?
        .split_whitespace()
        .nth(3)?
        .parse::<i64>()
        .ok()?;
    Some(Reading {
        cpu_seconds: (field(14)? + field(15)?) / TICKS_PER_SECOND,
        resident_bytes: kib("VmRSS:")?,
        virtual_bytes: kib("VmSize:")?,
        start_time_seconds: btime + field(22)? / TICKS_PER_SECOND,
        open_fds,
        max_fds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_procfs_as_linux_writes_it() {
        let stat = "4242 (kafka-lso (x)) S 1 4242 4242 0 -1 4194560 5153 0 0 0 250 75 0 0 20 0 9 0 123456 1000000 2000 18446744073709551615";
        let status = "Name:\tkafka-lso\nVmSize:\t  204800 kB\nVmRSS:\t   30720 kB\n";
        let boot = "cpu  1 2 3\nbtime 1764800000\nprocesses 10\n";
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\n";
        let reading = parse(stat, status, boot, limits, 17).unwrap();
        assert_eq!(
            reading,
            Reading {
                cpu_seconds: 3.25,
                resident_bytes: 30720 * 1024,
                virtual_bytes: 204800 * 1024,
                start_time_seconds: 1764800000.0 + 1234.56,
                open_fds: 17,
                max_fds: 1048576,
            }
        );
    }

    #[test]
    fn this_process_reads() {
        let reading = read().expect("/proc/self");
        assert!(reading.resident_bytes > 0 && reading.open_fds > 0 && reading.max_fds > 0);
    }
}
