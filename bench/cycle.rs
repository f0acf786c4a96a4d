//! Sampling benchmark against the local broker (`bench/run` starts it).
//!
//! Workload (bench/workload.rs): 20 topics x 100 partitions (2,000 partitions), 540 consumer
//! groups each with committed offsets on 40 partitions (21,600 group-partition series), one
//! transaction held open across 5 partitions. The release binary runs as a child process, sampling
//! every 2 s; the harness reports, for 200 and 2,000 partitions sampled with 5 of them
//! pinned (at rest), 2,000 under churn (every committed partition receiving records and
//! transactions committing, so the record-batch reads extend each cycle), and 2,000 with
//! none pinned (the transaction aborted): cycle time (median, max
//! over 20 cycles), Kafka requests per cycle by API (counted from librdkafka's protocol
//! debug log and the exporter's own client's debug log, in a separate run), exporter RSS,
//! and /metrics latency.
//!
//! `BENCH_AUTH=oauthbearer`, `oidc` or `gssapi` (a build with `--features gssapi`) connects the exporter through that listener of
//! `scripts/kafka-local` (with the properties of `scripts/kafka-local client-config`)
//! instead of PLAINTEXT; `BENCH_SCENARIO=200` runs only the scenarios whose label holds
//! that text. Those listeners end SASL sessions every 10 s, so connection set-up
//! (ApiVersions, SaslHandshake, SaslAuthenticate) is counted apart.

#[path = "../tests/common/mod.rs"]
mod common;
mod process;
mod workload;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use process::{cpu_seconds, exporter, rss_kib};
use rdkafka::producer::Producer;
use workload::{fleet, groups, setup, topic, topics, GROUP_PARTITIONS, PARTITIONS};

const CYCLES: usize = 20;
const INTERVAL: &str = "2s";

struct Run {
    child: Child,
    lines: mpsc::Receiver<String>,
    port: u16,
}

/// The listener of `BENCH_AUTH` (PLAINTEXT when unset) and its client properties.
fn auth() -> (String, String, Vec<(String, String)>) {
    let name = std::env::var("BENCH_AUTH").unwrap_or_else(|_| "plaintext".into());
    if name == "plaintext" {
        return (name, bootstrap(), Vec::new());
    }
    let run = |args: &[&str]| {
        let out = std::process::Command::new(repo_root().join("scripts/kafka-local"))
            .args(args)
            .output()
            .expect("scripts/kafka-local");
        assert!(out.status.success(), "scripts/kafka-local {args:?} failed");
        String::from_utf8(out.stdout).unwrap()
    };
    let bootstrap = run(&["bootstrap", &name]).trim().to_string();
    let printed = run(&["client-config", &name]);
    // GSSAPI: the realm's krb5.conf, for the exporter the bench starts.
    if let Some(krb5_conf) = printed
        .lines()
        .find_map(|l| l.strip_prefix("# KRB5_CONFIG="))
    {
        std::env::set_var("KRB5_CONFIG", krb5_conf);
    }
    let properties = printed
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (name, bootstrap, properties)
}

fn start_exporter(topics: &str, port: u16, protocol_debug: bool) -> Run {
    let (_, bootstrap, properties) = auth();
    let mut command = exporter(&bootstrap, "bench", INTERVAL, port, topics, "^bench-g");
    for (property, value) in properties {
        command.env(
            format!("KAFKA_LSO_EXPORTER_CLUSTERS__0__CLIENT__{property}"),
            value,
        );
    }
    command.env("RUST_LOG", "kafka_lso_exporter=debug,librdkafka=debug");
    if protocol_debug {
        command.env("KAFKA_LSO_EXPORTER_CLUSTERS__0__CLIENT__debug", "protocol");
    }
    let mut child = command.spawn().expect("start the exporter");
    let stderr = child.stderr.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        // Not `lines()`: a librdkafka debug line may carry bytes that are not UTF-8.
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            if tx
                .send(String::from_utf8_lossy(&line).into_owned())
                .is_err()
            {
                break;
            }
            line.clear();
        }
    });
    Run { child, lines, port }
}

/// Waits for `n` "cycle done" lines; returns the per-cycle durations and the requests
/// logged between consecutive cycle ends, by API.
fn observe_cycles(run: &Run, n: usize) -> (Vec<f64>, Vec<BTreeMap<String, u32>>) {
    let sent = regex::Regex::new(r"Sent (\w+)Request").unwrap();
    // The broker: the own client logs "broker=HOST:PORT", librdkafka "HOST:PORT/ID: Sent".
    let own = regex::Regex::new(r"broker=(\S+)").unwrap();
    let librdkafka = regex::Regex::new(r"(\S+:\d+)/\d+: Sent").unwrap();
    let seconds = regex::Regex::new(r"seconds=([0-9.]+)").unwrap();
    let mut durations = Vec::new();
    let mut requests = Vec::new();
    let mut current: BTreeMap<String, u32> = BTreeMap::new();
    let mut first = true;
    let deadline = Instant::now() + Duration::from_secs(300);
    while durations.len() < n {
        let line = run
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("exporter log ended before enough cycles");
        if let Some(c) = sent.captures(&line) {
            *current.entry(c[1].to_string()).or_default() += 1;
            // Counted by broker too, under "@HOST:PORT".
            if let Some(b) = own.captures(&line).or_else(|| librdkafka.captures(&line)) {
                *current.entry(format!("@{}", &b[1])).or_default() += 1;
            }
        } else if line.contains("cycle done") {
            // The first cycle also connects and negotiates: measure steady state.
            if !first {
                let s: f64 = seconds
                    .captures(&line)
                    .map(|c| c[1].parse().unwrap())
                    .unwrap_or(f64::NAN);
                durations.push(s);
                requests.push(std::mem::take(&mut current));
            }
            current.clear();
            first = false;
        } else if line.contains(" level=WARN ") {
            eprintln!("exporter: {line}");
        }
    }
    (durations, requests)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

/// 50 scrapes, 100 ms apart, so that they span several cycles: the first scrape after a
/// cycle renders the new snapshot, the others are served from the rendered body. The time
/// is until the last byte arrives, as a scraper sees it; the body is not decompressed or
/// decoded on this side (that is the scraper's own CPU).
async fn scrape_latency(port: u16, gzip: bool) -> (Vec<f64>, usize, usize) {
    let client = reqwest::Client::builder().no_gzip().build().unwrap();
    let encoding = if gzip { "gzip" } else { "identity" };
    let mut times = Vec::new();
    let mut bytes = 0;
    let mut series = 0;
    // The gzip run asks exactly as Prometheus does: OpenMetrics first, gzip.
    let accept = if gzip {
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    } else {
        "*/*"
    };
    for _ in 0..50 {
        let started = Instant::now();
        let body = client
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .header("Accept-Encoding", encoding)
            .header("Accept", accept)
            .send()
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        bytes = body.len();
        if !gzip {
            series = body
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty() && l[0] != b'#')
                .count();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    times.sort_by(f64::total_cmp);
    (times, bytes, series)
}

/// Writes while it lives: one record a second to each of the 800 partitions the groups
/// have committed offsets on (so that every group's read window grows), and one committed
/// transaction a second across 10 of them (markers to step over).
struct Churn {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Churn {
    fn start() -> Churn {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let plain = plain_producer();
            let transactional = transactional_producer("bench-churn");
            while !flag.load(Ordering::Relaxed) {
                let second = Instant::now();
                for t in 0..topics() {
                    for p in 0..workload::GROUP_PARTITIONS {
                        workload::send_no_flush(&plain, &topic(t), p, 1);
                    }
                }
                plain.flush(Duration::from_secs(30)).unwrap();
                transactional.begin_transaction().unwrap();
                for p in 0..10 {
                    send(&transactional, &topic(1), p, 1);
                }
                transactional
                    .commit_transaction(Duration::from_secs(30))
                    .unwrap();
                std::thread::sleep(Duration::from_secs(1).saturating_sub(second.elapsed()));
            }
        });
        Churn {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn median_requests(requests: &[BTreeMap<String, u32>]) -> BTreeMap<String, u32> {
    let mut apis: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for cycle in requests {
        for (api, count) in cycle {
            apis.entry(api.clone()).or_default().push(*count);
        }
    }
    apis.into_iter()
        .map(|(api, mut counts)| {
            counts.resize(requests.len(), 0);
            counts.sort_unstable();
            (api, counts[counts.len() / 2])
        })
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    require_kafka();
    setup().await;
    // One transaction held open across 5 partitions, until the last run (which measures
    // what forensics costs when nothing is pinned). The broker's cap on
    // transaction.timeout.ms is 15 min: long enough for the pinned runs.
    let held: Producer_ = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("transactional.id", "bench-held-transaction")
        .set("transaction.timeout.ms", "900000")
        .create()
        .expect("transactional producer");
    held.init_transactions(Duration::from_secs(30)).unwrap();
    held.begin_transaction().unwrap();
    for p in 0..5 {
        send(&held, &topic(0), p, 1);
    }

    let brokers = bootstrap().split(',').count();
    println!(
        "\nworkload: {} topics x {PARTITIONS} partitions, {} groups x {GROUP_PARTITIONS} committed partitions, interval {INTERVAL}, {brokers} broker(s), listener {}",
        topics(),
        groups(),
        auth().0
    );
    let only = std::env::var("BENCH_SCENARIO").unwrap_or_default();
    let fleet_scenarios = [("20000 partitions (5 pinned, at rest)", "^bench-t", 19749u16)];
    let default_scenarios = [
        (
            "200 partitions (5 pinned, at rest)",
            "^bench-t0[01]$",
            19745u16,
        ),
        ("2000 partitions (5 pinned, at rest)", "^bench-t", 19746u16),
        (
            "2000 partitions (5 pinned, under churn)",
            "^bench-t",
            19748u16,
        ),
        (
            "2000 partitions (none pinned, at rest)",
            "^bench-t",
            19747u16,
        ),
    ];
    let scenarios: &[(&str, &str, u16)] = if fleet() {
        &fleet_scenarios
    } else {
        &default_scenarios
    };
    for &(label, topics, port) in scenarios.iter().filter(|s| s.0.contains(&only)) {
        if label.contains("none pinned") {
            held.abort_transaction(Duration::from_secs(30)).unwrap();
        }
        let churn = label.contains("churn").then(Churn::start);
        // Requests per cycle, counted from librdkafka's protocol log.
        let run = start_exporter(topics, port, true);
        let (_, requests) = observe_cycles(&run, 5);
        let mut child = run.child;
        let _ = child.kill();
        let _ = child.wait();
        let (per_broker, per_api): (BTreeMap<String, u32>, BTreeMap<String, u32>) =
            median_requests(&requests)
                .into_iter()
                .partition(|(key, _)| key.starts_with('@'));
        let set_up = ["ApiVersions", "SaslHandshake", "SaslAuthenticate"];
        let (connecting, per_api): (BTreeMap<String, u32>, BTreeMap<String, u32>) = per_api
            .into_iter()
            .partition(|(api, _)| set_up.contains(&api.as_str()));
        let total: u32 = per_api.values().sum();

        // Timing, memory and /metrics latency without protocol logging.
        let run = start_exporter(topics, port, false);
        let (_, _) = observe_cycles(&run, 1);
        let cpu_before = cpu_seconds(run.child.id());
        let (mut durations, _) = observe_cycles(&run, CYCLES);
        let cpu_per_cycle = (cpu_seconds(run.child.id()) - cpu_before) / CYCLES as f64;
        durations.sort_by(f64::total_cmp);
        let (latency, bytes, series) = scrape_latency(run.port, false).await;
        let (latency_gzip, gzip_bytes, _) = scrape_latency(run.port, true).await;
        let (rss, hwm) = rss_kib(run.child.id());
        let mut child = run.child;
        let _ = child.kill();
        let _ = child.wait();
        drop(churn);

        println!(
            "\n## {label} sampled ({series} series on /metrics, {} KiB, {} KiB gzipped)",
            bytes / 1024,
            gzip_bytes / 1024
        );
        println!(
            "cycle time over {CYCLES} cycles: median {:.3}s, max {:.3}s; CPU {cpu_per_cycle:.3} s per cycle",
            percentile(&durations, 0.5),
            durations.last().unwrap()
        );
        println!(
            "Kafka requests per cycle (median of 5 cycles): {total} in all: {}",
            per_api
                .iter()
                .map(|(api, n)| format!("{api} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "connection set-up per cycle (median of 5 cycles): {}",
            if connecting.is_empty() {
                "none".to_string()
            } else {
                connecting
                    .iter()
                    .map(|(api, n)| format!("{api} {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
        println!(
            "by broker, set-up included (median of 5 cycles): {}",
            per_broker
                .iter()
                .map(|(broker, n)| format!("{} {n}", &broker[1..]))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "exporter RSS: {:.1} MiB now, {:.1} MiB peak",
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0
        );
        for (encoding, latency) in [
            ("identity", &latency),
            ("OpenMetrics + gzip, as Prometheus asks", &latency_gzip),
        ] {
            println!(
                "/metrics latency over 50 scrapes ({encoding}): median {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                percentile(latency, 0.5),
                percentile(latency, 0.99),
                latency.last().unwrap()
            );
        }
    }
}
