//! The exporter's own part at a million series, without a broker.
//!
//! No local broker holds 100,000 partitions and 10,000 groups, so this bench feeds the
//! exporter's pure stages with samples of that size, exactly as a cycle hands them on:
//! derive (offsets into gaps, lags and the stuck clock), publish, render OpenMetrics and
//! its gzip (what Prometheus asks for), the Prometheus text format (what curl asks for),
//! and `/metrics` served over HTTP to 10 concurrent uncompressed scrapers. What the Kafka
//! requests of a cycle cost at that size is not measured here (bench/cycle.rs measures
//! them on real brokers).
//!
//! Workload at full size: 1,000 topics x 100 partitions, 1% of them pinned by an open
//! transaction (HW > LSO), every other partition HW == LSO with forensics on; 10,000
//! groups (80% classic, 10% KIP-848 consumer, 10% share, half of those read_committed),
//! each with offsets on 10 partitions of one topic. Each size runs in a child process of
//! its own, so that its resident memory is its own; the partitions and groups axes are
//! measured at three sizes each and the slope between the two largest is printed.
//!
//! `cargo bench --bench scale` (no broker needed); SCALE_CYCLES sets cycles per size (8:
//! the cycles are a minute apart on the exporter's clock, so that the rates and catch-up
//! estimates exist from the fourth on; the members rejoin every fourth cycle, new member
//! ids each time, a rebalance counted); SCALE_CHILD=PARTITIONS,GROUPS runs one size alone;
//! SCALE_MEMBERS=0 leaves the groups' members out, and rebalance tracking and rates with
//! them (what the consumer's side costs); SCALE_TRACKING=0 keeps the members and leaves
//! out the rebalance count and the rates only; SCALE_OWNER_LABELS=1 adds the owner series
//! (`groups.owner_labels`).

mod process;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use kafka_lso_exporter::derive::series::{Exposition, Granularity};
use kafka_lso_exporter::derive::{derive, ClusterSnapshot, StuckClock};
use kafka_lso_exporter::expose::Metrics;
use kafka_lso_exporter::kafka::{
    CommittedOffset, CoordinatorTransaction, CoordinatorView, Isolation, RawGroup, RawPartition,
    RawSample, RawTransaction,
};
use kafka_lso_exporter::serve::{router, AppState};
use process::rss_kib;
use tokio::sync::watch;

const PARTITIONS_PER_TOPIC: usize = 100;
const GROUP_PARTITIONS: usize = 10;
const SCRAPERS: usize = 10;

/// (partitions, groups) per child run: the partitions axis at 10,000 groups, then the
/// groups axis at 100,000 partitions (the full size is shared).
const SIZES: [(usize, usize); 5] = [
    (25_000, 10_000),
    (50_000, 10_000),
    (100_000, 10_000),
    (100_000, 2_500),
    (100_000, 5_000),
];

/// Groups carry their members and assignment (three members each), as every describe
/// answer does, and the rebalance count and the rates are derived; SCALE_MEMBERS=0 leaves
/// all three out, to measure what the consumer's side costs.
fn members() -> bool {
    std::env::var("SCALE_MEMBERS").map_or(true, |v| v != "0")
}

/// SCALE_TRACKING=0 keeps the members but derives neither the rebalance count nor the
/// rates: what tracking them costs beside the members' own series.
fn tracking() -> bool {
    members() && std::env::var("SCALE_TRACKING").map_or(true, |v| v != "0")
}

/// SCALE_OWNER_LABELS=1: the owner of every group-partition as a series of its own
/// (`groups.owner_labels`).
fn owner_labels() -> bool {
    members() && std::env::var("SCALE_OWNER_LABELS").is_ok_and(|v| v == "1")
}

fn topic(i: usize) -> String {
    format!("scale-t{i:04}")
}

/// One cycle's raw sample: offsets advance with `cycle`, as they do on a live cluster.
fn sample(partitions: usize, groups: usize, cycle: i64) -> RawSample {
    let now_ms = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let topics: Vec<Arc<str>> = (0..partitions.div_ceil(PARTITIONS_PER_TOPIC))
        .map(|t| Arc::from(topic(t)))
        .collect();
    let partitions: Vec<RawPartition> = (0..partitions)
        .map(|i| {
            let pinned = i % 100 == 7;
            let hw = 1_000 + 10 * cycle + (i % 13) as i64;
            let lso = if pinned { 1_000 } else { hw };
            let open_transactions = if pinned {
                vec![RawTransaction {
                    producer_id: i as i64,
                    producer_epoch: 0,
                    start_offset: lso,
                    last_timestamp_ms: now_ms - 5_000,
                    coordinator: CoordinatorView::Found(CoordinatorTransaction {
                        transactional_id: format!("etl-{i}"),
                        coordinator: (i % 3) as i32 + 1,
                        state: "Ongoing".into(),
                        producer_id: i as i64,
                        producer_epoch: 0,
                        start_time_ms: now_ms - 60_000,
                        timeout_ms: 60_000,
                        includes_partition: true,
                    }),
                }]
            } else {
                Vec::new()
            };
            RawPartition {
                topic: topics[i / PARTITIONS_PER_TOPIC].clone(),
                partition: (i % PARTITIONS_PER_TOPIC) as i32,
                log_start_offset: Some(0),
                last_stable_offset: Some(lso),
                high_watermark: Some(hw),
                open_transactions: Some(open_transactions),
                log: None,
                replication: None,
            }
        })
        .collect();
    let groups = (0..groups)
        .map(|g| {
            let (group_type, state, isolation) = match g % 10 {
                0 => ("consumer", "Stable", None),
                1 => (
                    "share",
                    "Stable",
                    Some(if g % 20 == 1 {
                        Isolation::ReadCommitted
                    } else {
                        Isolation::ReadUncommitted
                    }),
                ),
                _ => ("classic", "Stable", None),
            };
            let t = g % topics.len();
            let committed = (0..GROUP_PARTITIONS)
                .map(|p| CommittedOffset {
                    topic: topics[t].clone(),
                    partition: ((g / topics.len()) * GROUP_PARTITIONS + p) as i32
                        % PARTITIONS_PER_TOPIC as i32,
                    offset: 990 + 10 * cycle,
                })
                .collect::<Vec<CommittedOffset>>();
            // Three members, each owning a third of the group's partitions.
            let detail = kafka_lso_exporter::kafka::GroupDetail {
                epoch: Some(cycle / 4),
                assignment_epoch: Some(cycle / 4),
                members: (0..3)
                    .map(|m| kafka_lso_exporter::kafka::RawMember {
                        member_id: format!("scale-g{g:05}-m{m}-{}", cycle / 4),
                        client_id: format!("scale-g{g:05}-{m}"),
                        client_host: format!("/10.0.{}.{}", g % 250, m),
                        assigned: Some(vec![(
                            topics[t].to_string(),
                            committed
                                .iter()
                                .skip(m)
                                .step_by(3)
                                .map(|c| c.partition)
                                .collect(),
                        )]),
                        ..Default::default()
                    })
                    .collect(),
            };
            RawGroup {
                coordinator: None,
                detail: members().then_some(detail),
                name: format!("scale-g{g:05}"),
                group_type: group_type.into(),
                protocol: if group_type == "share" {
                    "share"
                } else {
                    "consumer"
                }
                .into(),
                state: state.into(),
                members: Some(3),
                isolation,
                broker_lags: Vec::new(),
                committed: Some(committed),
            }
        })
        .collect();
    RawSample {
        reached: true,
        partitions,
        groups,
        ..RawSample::default()
    }
}

/// Resets VmHWM to the current RSS, so that a later VmHWM is the peak since now.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// One size, in this process: prints one line of `key=value` figures.
async fn child(partitions: usize, groups: usize, cycles: usize) {
    let (tx, rx) = watch::channel(None);
    let metrics = Arc::new(Metrics::new(vec![rx.clone()]));
    metrics.init_cluster("scale");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let app = router(AppState {
        metrics: metrics.clone(),
        clusters: Arc::new(vec![("scale".into(), rx)]),
        bootstrap: Arc::new(Default::default()),
        interval: Duration::from_secs(30),
        telemetry_path: Arc::from("/metrics"),
        ownership: kafka_lso_exporter::kafka::coordination::Ownership::everything(vec![
            "scale".into()
        ]),
    });
    tokio::spawn(async move { axum::serve(listener, app).await });

    let mut clock = StuckClock::default();
    let mut watch = kafka_lso_exporter::derive::progress::CommitWatch::default();
    let mut rebalances = kafka_lso_exporter::derive::rebalance::RebalanceWatch::default();
    let mut rates = kafka_lso_exporter::derive::rates::RateWatch::default();
    let (mut gen_s, mut derive_s, mut render_s, mut text_s) = (vec![], vec![], vec![], vec![]);
    // The parts of derive_s: derive itself, rebalance tracking, rates, the commit watch,
    // and counting the series.
    let mut stages: [Vec<f64>; 5] = Default::default();
    let (mut series, mut body_bytes, mut gzip_bytes) = (0, 0, 0);
    let started_all = Instant::now();
    // The cycles a minute apart on the exporter's clock: the rates' window (5 min) spans
    // half of it from the fourth cycle on, so that rates and catch-up estimates are derived
    // and rendered as on a live cluster.
    let epoch = Instant::now();
    for cycle in 0..cycles as i64 {
        let t = Instant::now();
        let raw = sample(partitions, groups, cycle);
        gen_s.push(t.elapsed().as_secs_f64());

        // What the scheduler does with a sample: derive, publish, prerender.
        let t = Instant::now();
        let now = epoch + Duration::from_secs(60 * cycle as u64);
        let mut derived = derive(
            raw,
            &mut clock,
            now,
            SystemTime::now(),
            Duration::from_secs(300),
        );
        stages[0].push(t.elapsed().as_secs_f64());
        let stage = Instant::now();
        if tracking() {
            kafka_lso_exporter::derive::rebalance::apply(
                &mut derived.groups,
                &mut rebalances,
                SystemTime::now(),
                Duration::from_secs(300),
                |_| true,
            );
            stages[1].push(stage.elapsed().as_secs_f64());
            let stage = Instant::now();
            kafka_lso_exporter::derive::rates::apply(
                &mut derived.groups,
                &derived.partitions,
                &mut rates,
                now,
                Duration::from_secs(300),
            );
            stages[2].push(stage.elapsed().as_secs_f64());
        }
        let stage = Instant::now();
        kafka_lso_exporter::derive::progress::apply(
            &mut derived,
            &mut watch,
            now,
            kafka_lso_exporter::derive::progress::Settings {
                stall_after: Duration::from_secs(300),
                abandon_after: Duration::from_secs(86_400),
            },
            true,
        );
        stages[3].push(stage.elapsed().as_secs_f64());
        // Every per-partition series: the largest body the exporter renders.
        for group in &mut derived.groups {
            group.granularity = Granularity::Partition;
        }
        let exposition = Exposition {
            granularity: Granularity::Partition,
            kafka_exporter: false,
            assigned_only: false,
            owner_labels: owner_labels(),
        };
        let mut snapshot = ClusterSnapshot {
            clock_skew: None,
            cluster: "scale".into(),
            up: true,
            taken_at: SystemTime::now(),
            last_success: Some(SystemTime::now()),
            partitions: derived.partitions,
            groups: derived.groups,
            series_dropped: 0,
            left_out_groups: Default::default(),
            series: 0,
            eos_cost: Default::default(),
            features: Default::default(),
            exposition,
            brokers: Vec::new(),
            retention_ms: derived.retention_ms,
            transactions: Default::default(),
        };
        // Counted as the cardinality guard counts, every cycle.
        let stage = Instant::now();
        snapshot.series = kafka_lso_exporter::expose::series_count(&snapshot);
        stages[4].push(stage.elapsed().as_secs_f64());
        series = snapshot.series;
        tx.send_replace(Some(Arc::new(snapshot)));
        derive_s.push(t.elapsed().as_secs_f64());

        let m = metrics.clone();
        let t = Instant::now();
        tokio::task::spawn_blocking(move || m.cycle_finished_and_rendered())
            .await
            .unwrap();
        render_s.push(t.elapsed().as_secs_f64());

        // The body curl gets (Prometheus text, uncompressed): rendered once per cycle.
        let m = metrics.clone();
        let t = Instant::now();
        let (plain, gz) = tokio::task::spawn_blocking(move || {
            let (_, _, plain) = m.encode_for(None, false);
            let (_, _, gz) = m.encode_for(Some("application/openmetrics-text;version=1.0.0"), true);
            (plain.len(), gz.len())
        })
        .await
        .unwrap();
        text_s.push(t.elapsed().as_secs_f64());
        body_bytes = plain;
        gzip_bytes = gz;
    }
    let per_cycle = started_all.elapsed().as_secs_f64() / cycles as f64;
    let (rss_steady, _) = rss_kib("self");

    // 10 concurrent uncompressed scrapes of the cached body, three rounds.
    let client = reqwest::Client::builder().no_gzip().build().unwrap();
    let url = format!("http://127.0.0.1:{port}/metrics");
    reset_peak();
    let mut scrape_s = Vec::new();
    for _ in 0..3 {
        let mut handles = Vec::new();
        for _ in 0..SCRAPERS {
            let (client, url) = (client.clone(), url.clone());
            handles.push(tokio::spawn(async move {
                let t = Instant::now();
                // Read as a scraper far away would, chunk by chunk, and dropped: the
                // figure is the server's memory, not ten buffered copies in this process.
                let mut response = client.get(&url).send().await.unwrap();
                let mut received = 0;
                while let Some(chunk) = response.chunk().await.unwrap() {
                    received += chunk.len();
                }
                assert!(received > 1_000_000, "a body of {received} bytes");
                t.elapsed().as_secs_f64()
            }));
        }
        for h in handles {
            scrape_s.push(h.await.unwrap());
        }
    }
    let (_, rss_peak_scrapes) = rss_kib("self");

    println!(
        "partitions={partitions} groups={groups} group_partitions={} series={series} \
         sample_s={:.3} derive_s={:.3} derive_max_s={:.3} {} render_s={:.3} render_max_s={:.3} \
         text_s={:.3} cycle_s={:.3} openmetrics_mb={:.1} gzip_mb={:.1} rss_mib={} \
         rss_peak_scrapes_mib={} scrape_p50_s={:.3} scrape_max_s={:.3}",
        groups * GROUP_PARTITIONS,
        median(gen_s),
        median(derive_s.clone()),
        max(&derive_s),
        ["derive", "rebalances", "rates", "commit_watch", "count"]
            .iter()
            .zip(stages)
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| format!("stage_{k}_s={:.4}", median(v)))
            .collect::<Vec<_>>()
            .join(" "),
        median(render_s.clone()),
        max(&render_s),
        median(text_s),
        per_cycle,
        body_bytes as f64 / 1e6,
        gzip_bytes as f64 / 1e6,
        rss_steady / 1024,
        rss_peak_scrapes / 1024,
        median(scrape_s.clone()),
        max(&scrape_s),
    );
}

fn field(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

fn main() {
    let cycles: usize = std::env::var("SCALE_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    if let Ok(size) = std::env::var("SCALE_CHILD") {
        let (p, g) = size.split_once(',').unwrap();
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(child(p.parse().unwrap(), g.parse().unwrap(), cycles));
        return;
    }

    println!(
        "workload: topics of {PARTITIONS_PER_TOPIC} partitions (1% pinned by an open transaction), \
         groups of {GROUP_PARTITIONS} committed partitions; {cycles} cycles per size; \
         {SCRAPERS} concurrent uncompressed scrapes x 3; no broker (bench/cycle.rs measures the requests)\n"
    );
    let exe = std::env::current_exe().unwrap();
    let mut lines = Vec::new();
    for (p, g) in SIZES {
        let out = Command::new(&exe)
            .env("SCALE_CHILD", format!("{p},{g}"))
            .env("SCALE_CYCLES", cycles.to_string())
            .output()
            .expect("run one size");
        let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(
            out.status.success(),
            "size {p},{g} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        println!("{line}");
        lines.push(line);
    }

    let at = |p: f64, g: f64| {
        lines
            .iter()
            .find(|l| field(l, "partitions") == p && field(l, "groups") == g)
            .unwrap()
    };
    println!("\nslopes between the two largest sizes of each axis (ratio of cost / ratio of size; 1.0 is linear):");
    for (axis, small, large) in [
        (
            "partitions 50k -> 100k",
            at(50_000.0, 10_000.0),
            at(100_000.0, 10_000.0),
        ),
        (
            "groups 5k -> 10k",
            at(100_000.0, 5_000.0),
            at(100_000.0, 10_000.0),
        ),
    ] {
        let size = field(large, "series") / field(small, "series");
        let ratio = |key: &str| (field(large, key) / field(small, key)).ln() / size.ln();
        println!(
            "  {axis} (series x{size:.2}): derive {:.2}, render {:.2}, text {:.2}, RSS {:.2}",
            ratio("derive_s"),
            ratio("render_s"),
            ratio("text_s"),
            ratio("rss_mib"),
        );
    }
    let full = at(100_000.0, 10_000.0);
    println!(
        "\nfull size ({} series): cycle (derive + render) {:.2} s [target < 3 s], render {:.2} s [target < 0.5 s], \
         RSS {} MiB [target < 512], peak under {SCRAPERS} concurrent scrapes {} MiB",
        field(full, "series"),
        field(full, "derive_s") + field(full, "render_s"),
        field(full, "render_s"),
        field(full, "rss_mib"),
        field(full, "rss_peak_scrapes_mib"),
    );
}
