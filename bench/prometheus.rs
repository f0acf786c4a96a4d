//! What the exporter costs a real Prometheus, in each granularity, side by side.
//!
//! Workload (bench/workload.rs): the default 2,000 partitions and 540 groups x 40
//! partitions, or with `BENCH_WORKLOAD=fleet` 20,000 partitions and 5,000 groups x 40
//! partitions (three brokers), with one transaction held open across 5 partitions. Two
//! release exporters sample it every 15 s, one in `topic` granularity and one in
//! `partition` granularity; two real Prometheus servers (Debian's package), one for each,
//! scrape them every 15 s and evaluate the shipped alert rules every 15 s, for
//! `BENCH_MINUTES` (10 by default). Then each Prometheus is asked about itself: series in
//! its head block, its resident memory (largest over the run), the exporter's scrape
//! duration and samples, and the rule groups' evaluation time.
//!
//! `bench/run prometheus`, or on three brokers:
//! `KAFKA_BROKERS=3 KAFKA_LOCAL_PORT=19200 KAFKA_HEAP=1g BENCH_WORKLOAD=fleet bench/run prometheus`.

#[path = "../tests/common/mod.rs"]
mod common;
mod process;
mod workload;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use process::{exporter, rss_kib};
use rdkafka::producer::Producer;
use serde_json::Value;
use workload::{groups, setup, topic, topics, GROUP_PARTITIONS, PARTITIONS};

/// A child process killed when the benchmark ends.
struct Service(Child);

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One granularity under test: its exporter and the Prometheus that scrapes it.
struct Side {
    granularity: &'static str,
    exporter: Service,
    /// Runs until the side is dropped.
    _prometheus: Service,
    base: String,
}

fn start_side(granularity: &'static str, dir: &Path, rules: &Path) -> Side {
    let exporter_port = free_port();
    let mut command = exporter(
        &bootstrap(),
        "bench",
        "15s",
        exporter_port,
        "^bench-t",
        "^bench-g",
    );
    command.env("KAFKA_LSO_EXPORTER_CLUSTERS__0__GRANULARITY", granularity);
    command.stderr(Stdio::null());
    let exporter = Service(command.spawn().expect("start the exporter"));

    let prometheus_port = free_port();
    let dir = dir.join(granularity);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 15s\n  evaluation_interval: 15s\n\
             rule_files: [{rules}]\n\
             scrape_configs:\n\
             \x20 - job_name: kafka-lso-exporter\n    scrape_timeout: 14s\n    static_configs:\n      - targets: ['127.0.0.1:{exporter_port}']\n\
             \x20 - job_name: prometheus\n    static_configs:\n      - targets: ['127.0.0.1:{prometheus_port}']\n",
            rules = rules.display(),
        ),
    )
    .unwrap();
    let prometheus = Service(
        Command::new("prometheus")
            .args([
                format!("--config.file={}", config.display()),
                format!("--storage.tsdb.path={}", dir.join("data").display()),
                format!("--web.listen-address=127.0.0.1:{prometheus_port}"),
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("start prometheus (Debian package prometheus; scripts/test installs it)"),
    );
    Side {
        granularity,
        exporter,
        _prometheus: prometheus,
        base: format!("http://127.0.0.1:{prometheus_port}"),
    }
}

/// The value of a PromQL expression that returns one series, if it does.
async fn query(http: &reqwest::Client, base: &str, expr: &str) -> Option<f64> {
    let response: Value = http
        .get(format!("{base}/api/v1/query"))
        .query(&[("query", expr)])
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    let result = response["data"]["result"].as_array()?;
    result.first()?["value"][1].as_str()?.parse().ok()
}

fn mib(bytes: f64) -> String {
    format!("{:.0} MiB", bytes / 1024.0 / 1024.0)
}

fn ms(seconds: f64) -> String {
    format!("{:.1} ms", seconds * 1000.0)
}

#[tokio::main]
async fn main() {
    require_kafka();
    setup().await;
    // Partitions withheld by an open transaction: the per-partition detail `topic` mode
    // keeps, and what the alert rules evaluate. The broker caps transaction.timeout.ms at
    // 15 minutes; a longer run sees it aborted after that.
    let held: Producer_ = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("transactional.id", "bench-prometheus-held")
        .set("transaction.timeout.ms", "900000")
        .create()
        .expect("transactional producer");
    held.init_transactions(Duration::from_secs(30)).unwrap();
    held.begin_transaction().unwrap();
    for p in 0..5 {
        send(&held, &topic(0), p, 1);
    }

    let minutes: u64 = std::env::var("BENCH_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(10);
    let brokers = bootstrap().split(',').count();
    println!(
        "\nworkload: {} topics x {PARTITIONS} partitions, {} groups x {GROUP_PARTITIONS} committed partitions, 5 partitions withheld, {brokers} broker(s); exporter interval 15 s, scrape and rule evaluation every 15 s, {minutes} min",
        topics(),
        groups()
    );
    let dir: PathBuf = std::env::temp_dir().join(unique("kle-prometheus-bench"));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = repo_root().join("alerts/kafka-lso-exporter.rules.yml");
    let sides = [
        start_side("topic", &dir, &rules),
        start_side("partition", &dir, &rules),
    ];
    let started = Instant::now();
    let mut exporter_rss = [0u64; 2];
    while started.elapsed() < Duration::from_secs(minutes * 60) {
        tokio::time::sleep(Duration::from_secs(15)).await;
        for (side, peak) in sides.iter().zip(exporter_rss.iter_mut()) {
            *peak = (*peak).max(rss_kib(side.exporter.0.id()).0);
        }
    }

    let http = reqwest::Client::new();
    let range = format!("{minutes}m");
    println!(
        "\n| granularity | series in the head block | samples per scrape | Prometheus RSS, largest | scrape duration, mean / largest | rule groups' evaluation, mean / largest | exporter RSS, largest |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut series = Vec::new();
    for (side, exporter_rss) in sides.iter().zip(exporter_rss) {
        let base = side.base.as_str();
        let q = |expr: String| {
            let http = http.clone();
            async move { query(&http, base, &expr).await.unwrap_or(f64::NAN) }
        };
        let head = q("prometheus_tsdb_head_series".into()).await;
        let samples = q("scrape_samples_scraped{job=\"kafka-lso-exporter\"}".into()).await;
        let rss = q(format!(
            "max_over_time(process_resident_memory_bytes{{job=\"prometheus\"}}[{range}])"
        ))
        .await;
        let scrape_mean = q(format!(
            "avg_over_time(scrape_duration_seconds{{job=\"kafka-lso-exporter\"}}[{range}])"
        ))
        .await;
        let scrape_max = q(format!(
            "max_over_time(scrape_duration_seconds{{job=\"kafka-lso-exporter\"}}[{range}])"
        ))
        .await;
        let rules_mean = q(format!(
            "sum(avg_over_time(prometheus_rule_group_last_duration_seconds[{range}]))"
        ))
        .await;
        let rules_max = q(format!(
            "sum(max_over_time(prometheus_rule_group_last_duration_seconds[{range}]))"
        ))
        .await;
        series.push(head);
        println!(
            "| {} | {head:.0} | {samples:.0} | {} | {} / {} | {} / {} | {} |",
            side.granularity,
            mib(rss),
            ms(scrape_mean),
            ms(scrape_max),
            ms(rules_mean),
            ms(rules_max),
            mib(exporter_rss as f64 * 1024.0),
        );
    }
    println!(
        "\n`topic` granularity: {:.1}% of `partition` granularity's series in the head block",
        100.0 * series[0] / series[1]
    );
    drop(sides);
    held.abort_transaction(Duration::from_secs(30)).ok();
    let _ = std::fs::remove_dir_all(&dir);
}
