//! Where the exporter's memory goes (`bench/run memory`).
//!
//! Workload (bench/workload.rs): 2,000 partitions and 540 groups x 40 committed partitions
//! by default, 10,000 and 2,500 with `BENCH_WORKLOAD=10k`, 20,000 and 5,000 with
//! `BENCH_WORKLOAD=fleet` (three brokers); one transaction held open on 5 partitions. The
//! release binary samples it every `MEMORY_INTERVAL` (15s) for `MEMORY_SECONDS` (150), and
//! is scraped once per interval as Prometheus scrapes it (OpenMetrics, gzip), once in each
//! granularity. Printed per run: series, peak RSS (VmHWM), RSS at the end, its anonymous
//! part, threads, CPU seconds.
//!
//! `MEMORY_AGAINST=PATH` also runs the binary at PATH (another revision's release build)
//! on the same workload, alternating with this one, and prints the ratio of their peak
//! RSS: `bench/run memory-against REV` builds REV in a worktree of its own and does that.
//!
//! Built with `--features dhat-heap` (`bench/run memory-profile`), the exporter keeps a
//! heap profile of its Rust allocations and writes it after `MEMORY_SECONDS` (while it still
//! runs, so the profile is a steady cycle's): the bench prints the bytes live then and at
//! the peak by owner (the code that allocated them: connections, record reads, the
//! snapshot and the history kept between cycles, the render, the runtime), and what the C
//! side (librdkafka, OpenSSL) holds, from the process's allocator statistics.

#[path = "../tests/common/mod.rs"]
mod common;
mod process;
mod workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use process::{cpu_seconds, rss_kib};
use rdkafka::producer::Producer;
use workload::{groups, setup, topic, topics, GROUP_PARTITIONS, PARTITIONS};

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

struct Figures {
    label: String,
    series: usize,
    peak_kib: u64,
    end_kib: u64,
    anonymous_kib: u64,
    threads: u64,
    cpu: f64,
    /// RSS at each scrape, KiB.
    rss_by_scrape: Vec<u64>,
    profile: Option<PathBuf>,
}

/// A field of /proc/PID/<file> in kB.
fn proc_kib(pid: u32, file: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// What an older build understands: its listen flag (`--listen` before the
/// exporter-toolkit's names), and whether it has `granularity` (before it, every series
/// was per partition).
fn dialect(binary: &Path) -> (&'static str, bool) {
    let help = Command::new(binary)
        .arg("--help")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let listen = if help.contains("--web.listen-address") {
        "--web.listen-address"
    } else {
        "--listen"
    };
    let granularity = Command::new(binary)
        .args(["--bootstrap-servers", "127.0.0.1:9", "--check-config"])
        .env("KAFKA_LSO_EXPORTER_CLUSTERS__0__GRANULARITY", "topic")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    (listen, granularity)
}

async fn run(binary: &Path, label: &str, granularity: &str, port: u16) -> Figures {
    let seconds: u64 = env_or("MEMORY_SECONDS", "150")
        .parse()
        .expect("MEMORY_SECONDS");
    let interval = env_or("MEMORY_INTERVAL", "15s");
    let every = humantime_seconds(&interval);
    let dir = std::env::temp_dir().join(unique("memory"));
    std::fs::create_dir_all(&dir).unwrap();
    let (listen, has_granularity) = dialect(binary);
    let mut command = Command::new(binary);
    command
        .args([
            "--bootstrap-servers",
            &bootstrap(),
            "--cluster-name",
            "bench",
        ])
        .args(["--interval", &interval])
        .args([listen, &format!("127.0.0.1:{port}")])
        .env(
            "KAFKA_LSO_EXPORTER_CLUSTERS__0__TOPICS__INCLUDE",
            "[\"^bench-t\"]",
        )
        .env(
            "KAFKA_LSO_EXPORTER_CLUSTERS__0__GROUPS__INCLUDE",
            "[\"^bench-g\"]",
        )
        .env("DHAT_HEAP_SECONDS", seconds.to_string())
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(dir.join("exporter.log")).unwrap(),
        ));
    let label = if has_granularity {
        command.env("KAFKA_LSO_EXPORTER_CLUSTERS__0__GRANULARITY", granularity);
        label.to_string()
    } else {
        format!("{label} (per partition: its only granularity)")
    };
    let mut child = command.spawn().expect("the exporter");
    let pid = child.id();
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let started = Instant::now();
    let mut series = 0;
    let mut rss_by_scrape = Vec::new();
    let mut next_scrape = started + Duration::from_secs(1);
    while started.elapsed() < Duration::from_secs(seconds) {
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "{} exited ({status}) after {:?}:\n{}",
                binary.display(),
                started.elapsed(),
                std::fs::read_to_string(dir.join("exporter.log")).unwrap_or_default()
            );
        }
        if Instant::now() >= next_scrape {
            next_scrape += Duration::from_secs_f64(every);
            // As Prometheus asks: OpenMetrics, gzip (reqwest decompresses).
            if let Ok(response) = http
                .get(&url)
                .header(
                    "accept",
                    "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
                )
                .send()
                .await
            {
                if let Ok(text) = response.text().await {
                    series = text.lines().filter(|l| !l.starts_with('#')).count();
                }
            }
            rss_by_scrape.push(rss_kib(pid).0);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The heap profile is written once MEMORY_SECONDS have passed (dhat-heap builds).
    let profile = dir.join("dhat-heap.json");
    if cfg!(feature = "dhat-heap") {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !profile.exists() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // Written in one go; give it a moment to finish.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let (end_kib, peak_kib) = rss_kib(pid);
    let figures = Figures {
        label: format!("{label}, {granularity}"),
        series,
        peak_kib,
        end_kib,
        anonymous_kib: proc_kib(pid, "smaps_rollup", "Anonymous:"),
        threads: proc_kib(pid, "status", "Threads:"),
        cpu: cpu_seconds(pid),
        rss_by_scrape,
        profile: profile.exists().then_some(profile),
    };
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = child.wait();
    figures
}

/// "15s", "500ms", "1m" in seconds.
fn humantime_seconds(text: &str) -> f64 {
    let (number, unit) = text.split_at(text.find(|c: char| c.is_ascii_alphabetic()).unwrap());
    let n: f64 = number.parse().expect("an interval such as 15s");
    n * match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        other => panic!("interval unit {other}"),
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn print(figures: &[Figures]) {
    println!(
        "\n| run | series | peak RSS (MiB) | RSS at the end (MiB) | of it anonymous (MiB) | threads | CPU-s |"
    );
    println!("|---|---|---|---|---|---|---|");
    for f in figures {
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {} | {:.2} |",
            f.label,
            f.series,
            mib(f.peak_kib),
            mib(f.end_kib),
            mib(f.anonymous_kib),
            f.threads,
            f.cpu
        );
    }
    for f in figures {
        let rss: Vec<String> = f
            .rss_by_scrape
            .iter()
            .map(|k| format!("{:.1}", mib(*k)))
            .collect();
        println!("RSS at each scrape (MiB), {}: {}", f.label, rss.join(" "));
    }
}

/// The owner of an allocation: the first frame of the exporter's own code (or of a
/// library it names) on its stack, by module.
const OWNERS: &[(&str, &str)] = &[
    ("kafka_lso_exporter::kafka::wire::tls", "connections: TLS"),
    (
        "kafka_lso_exporter::kafka::wire::scram",
        "connections: SASL",
    ),
    (
        "kafka_lso_exporter::kafka::wire::oauth",
        "connections: SASL",
    ),
    (
        "kafka_lso_exporter::kafka::wire::msk_iam",
        "connections: SASL",
    ),
    (
        "kafka_lso_exporter::kafka::wire::gssapi",
        "connections: SASL",
    ),
    (
        "kafka_lso_exporter::kafka::wire",
        "connections: pools and lanes",
    ),
    ("kafka_lso_exporter::kafka::records", "record reads"),
    ("kafka_lso_exporter::kafka::ask::reads", "record reads"),
    (
        "kafka_lso_exporter::kafka::ask::inventory",
        "transaction inventory (asked)",
    ),
    (
        "kafka_lso_exporter::kafka::ask::forensics",
        "transaction forensics (asked)",
    ),
    (
        "kafka_lso_exporter::kafka::ask::topic_configs",
        "topic configs",
    ),
    (
        "kafka_lso_exporter::kafka::ask::offsets",
        "the cycle's answers: committed offsets",
    ),
    (
        "kafka_lso_exporter::kafka::ask::groups",
        "the cycle's answers: groups",
    ),
    (
        "kafka_lso_exporter::kafka::ask::log_offsets",
        "the cycle's answers: partition offsets",
    ),
    (
        "kafka_lso_exporter::kafka::ask::metadata",
        "the cycle's answers: metadata",
    ),
    ("kafka_lso_exporter::kafka::ask", "the cycle's answers"),
    ("kafka_lso_exporter::kafka::cycle", "the cycle's answers"),
    ("kafka_lso_exporter::kafka::native", "the cycle's answers"),
    (
        "kafka_lso_exporter::kafka::coordination",
        "[ha] coordination",
    ),
    (
        "kafka_lso_exporter::derive::progress",
        "history: commit watch",
    ),
    ("kafka_lso_exporter::derive::stuck", "history: stuck clocks"),
    (
        "kafka_lso_exporter::derive::inventory",
        "history: transaction inventory, fencing watch",
    ),
    (
        "kafka_lso_exporter::derive::rebalance",
        "history: rebalance watch",
    ),
    ("kafka_lso_exporter::derive::rates", "history: rate windows"),
    (
        "kafka_lso_exporter::derive::offsets",
        "the snapshot: offsets and lags",
    ),
    ("kafka_lso_exporter::derive", "the snapshot"),
    ("kafka_lso_exporter::expose::body", "rendered bodies"),
    ("kafka_lso_exporter::expose", "rendered bodies"),
    ("kafka_lso_exporter::serve", "HTTP"),
    ("kafka_lso_exporter::scheduler", "the snapshot"),
    ("rdkafka::", "librdkafka (Rust side)"),
    ("kafka_protocol::", "the cycle's answers"),
    ("tracing", "logging"),
    ("hyper::", "HTTP"),
    ("axum::", "HTTP"),
    ("tokio::", "the runtime"),
    ("regex", "configuration"),
    ("kafka_lso_exporter::config", "configuration"),
];

/// Bytes live at the end and at the peak of a dhat heap profile, by owner.
fn profile_by_owner(path: &Path) -> BTreeMap<&'static str, (u64, u64)> {
    let profile: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("profile")).expect("JSON");
    let frames: Vec<&str> = profile["ftbl"]
        .as_array()
        .expect("ftbl")
        .iter()
        .map(|f| f.as_str().unwrap_or(""))
        .collect();
    let mut out: BTreeMap<&'static str, (u64, u64)> = BTreeMap::new();
    for pp in profile["pps"].as_array().expect("pps") {
        let stack: Vec<&str> = pp["fs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| frames.get(i.as_u64()? as usize).copied())
            .collect();
        let owner = stack
            .iter()
            .find_map(|frame| {
                OWNERS
                    .iter()
                    .find(|(module, _)| frame.contains(module))
                    .map(|(_, owner)| *owner)
            })
            .unwrap_or("other");
        let entry = out.entry(owner).or_default();
        entry.0 += pp["eb"].as_u64().unwrap_or(0);
        entry.1 += pp["gb"].as_u64().unwrap_or(0);
    }
    out
}

fn print_profile(label: &str, path: &Path) {
    let by_owner = profile_by_owner(path);
    let (live, peak): (u64, u64) = by_owner
        .values()
        .fold((0, 0), |(l, p), (el, ep)| (l + el, p + ep));
    println!("\nheap of the Rust side by owner, {label} (dhat: live at the end of the run, and at the heap's peak):");
    println!("| owner | live (KiB) | at the peak (KiB) |");
    println!("|---|---|---|");
    let mut rows: Vec<_> = by_owner.into_iter().collect();
    rows.sort_by_key(|(_, (l, p))| std::cmp::Reverse(l.max(p).to_owned()));
    for (owner, (l, p)) in rows {
        println!("| {owner} | {} | {} |", l / 1024, p / 1024);
    }
    println!("| all | {} | {} |", live / 1024, peak / 1024);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    require_kafka();
    setup().await;
    let held: Producer_ = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("transactional.id", "bench-memory-held-transaction")
        .set("transaction.timeout.ms", "900000")
        .create()
        .expect("transactional producer");
    held.init_transactions(Duration::from_secs(30)).unwrap();
    held.begin_transaction().unwrap();
    for p in 0..5 {
        send(&held, &topic(0), p, 1);
    }
    println!(
        "\nworkload: {} topics x {PARTITIONS} partitions, {} groups x {GROUP_PARTITIONS} committed partitions, 5 partitions pinned, interval {}, {} s per run, a gzip OpenMetrics scrape per interval",
        topics(),
        groups(),
        env_or("MEMORY_INTERVAL", "15s"),
        env_or("MEMORY_SECONDS", "150"),
    );
    let this = PathBuf::from(env!("CARGO_BIN_EXE_kafka-lso-exporter"));
    let against = std::env::var("MEMORY_AGAINST").ok().map(PathBuf::from);
    let mut figures = Vec::new();
    let mut ratios = Vec::new();
    for (i, granularity) in ["topic", "partition"].into_iter().enumerate() {
        let ours = run(&this, "this build", granularity, 19760 + i as u16).await;
        if let Some(other) = &against {
            let theirs = run(
                other,
                &other.display().to_string(),
                granularity,
                19770 + i as u16,
            )
            .await;
            ratios.push((
                granularity,
                ours.peak_kib as f64 / theirs.peak_kib.max(1) as f64,
            ));
            figures.push(theirs);
        }
        figures.push(ours);
    }
    print(&figures);
    for (granularity, ratio) in ratios {
        println!("peak RSS of this build / the other, {granularity}: {ratio:.2}");
    }
    for f in &figures {
        if let Some(path) = &f.profile {
            print_profile(&f.label, path);
        }
    }
    if cfg!(feature = "dhat-heap") {
        println!(
            "\n(a dhat build: RSS figures above include the profiler's own bookkeeping; \
             the C side's heap is RSS less the Rust heap, the binary and the stacks)"
        );
    }
    let _ = held.abort_transaction(Duration::from_secs(30));
}
