//! Golden `/metrics` output for a fixed snapshot (the worked example: LSO 880 behind an
//! open transaction while HW is 900), checked by `promtool check metrics`.
//! Refresh after an intended change with `UPDATE_GOLDEN=1 cargo test --test golden`.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kafka_lso_exporter::derive::inventory::{
    DetailedTransaction, Fencing, TransactionInventory, TransactionsView, WatchCounters,
};

use kafka_lso_exporter::derive::series::{Exposition, Granularity};
use kafka_lso_exporter::derive::{
    AbortedRead, AgeClock, Anomaly, Catchup, ClusterSnapshot, CoordinatorStatus,
    GroupPartitionState, GroupState, Lag, OpenTransaction, Owner, PartitionState, Rebalances,
    Ruler, RulerLevel, TimeLag, TopicRate, Visibility,
};
use kafka_lso_exporter::expose::{guard, series_count};
use kafka_lso_exporter::expose::{to_prometheus_text, Metrics};
use kafka_lso_exporter::kafka::features::{Feature, FeatureState, Status};
use kafka_lso_exporter::kafka::{ClockSkew, GroupDetail, RawMember, Replication, Stage};
use tokio::sync::watch;

/// A member of a classic or KIP-848 group owning these partitions of `orders`.
fn member(id: &str, client_id: &str, host: &str, owns: Option<Vec<i32>>) -> RawMember {
    RawMember {
        member_id: id.into(),
        instance_id: None,
        client_id: client_id.into(),
        client_host: host.into(),
        assigned: owns.map(|p| vec![("orders".to_string(), p)]),
        target: None,
        member_epoch: None,
    }
}

fn fixed_snapshot(exposition: Exposition) -> ClusterSnapshot {
    let topic: Arc<str> = Arc::from("orders");
    let at = UNIX_EPOCH + Duration::from_secs(1_790_000_000);
    let granularity = exposition.granularity;
    let replication = |leader, preferred_leader, in_sync_replicas| {
        Some(Replication {
            leader,
            preferred_leader,
            replicas: 3,
            in_sync_replicas,
        })
    };
    ClusterSnapshot {
        clock_skew: Some(ClockSkew {
            seconds: -0.25,
            uncertainty_seconds: 0.002,
        }),
        cluster: "prod".into(),
        up: true,
        taken_at: at,
        last_success: Some(at),
        partitions: vec![
            PartitionState {
                topic: topic.clone(),
                partition: 0,
                log_start_offset: Some(0),
                high_watermark: Some(900),
                last_stable_offset: Some(880),
                visibility: Some(Visibility {
                    hw_minus_lso: 20,
                    lso_stuck_seconds: 184.5,
                    pinned: true,
                }),
                withheld_age_seconds: Some(186.75),
                transactions: Some(vec![OpenTransaction {
                    producer_id: 4001,
                    producer_epoch: 7,
                    start_offset: 880,
                    transactional_id: "etl-orders \"7\"".into(),
                    state: Some("Ongoing".into()),
                    age_seconds: Some(190.25),
                    age_clock: Some(AgeClock::Coordinator),
                    timeout_ms: Some(60_000),
                    coordinator: CoordinatorStatus::Open,
                    coordinator_broker: Some(1),
                    hanging: false,
                }]),
                replication: replication(1, 1, 3),
            },
            PartitionState {
                topic: topic.clone(),
                partition: 1,
                log_start_offset: Some(12),
                high_watermark: Some(1000),
                last_stable_offset: Some(1000),
                visibility: Some(Visibility {
                    hw_minus_lso: 0,
                    lso_stuck_seconds: 0.0,
                    pinned: false,
                }),
                withheld_age_seconds: Some(0.0),
                transactions: Some(Vec::new()),
                replication: replication(2, 3, 2),
            },
            // HW request failed this cycle: only what was sampled is shown.
            PartitionState {
                topic: topic.clone(),
                partition: 2,
                log_start_offset: Some(0),
                high_watermark: None,
                last_stable_offset: Some(77),
                visibility: None,
                withheld_age_seconds: None,
                transactions: None,
                replication: replication(3, 3, 3),
            },
            // A topic whose partitions were all sampled: its per-topic series are shown.
            PartitionState {
                topic: Arc::from("payments"),
                partition: 0,
                log_start_offset: Some(5),
                high_watermark: Some(50),
                last_stable_offset: Some(40),
                visibility: Some(Visibility {
                    hw_minus_lso: 10,
                    lso_stuck_seconds: 30.5,
                    pinned: true,
                }),
                withheld_age_seconds: Some(31.0),
                transactions: Some(Vec::new()),
                replication: replication(1, 1, 3),
            },
            PartitionState {
                topic: Arc::from("payments"),
                partition: 1,
                log_start_offset: Some(0),
                high_watermark: Some(10),
                last_stable_offset: Some(10),
                visibility: Some(Visibility {
                    hw_minus_lso: 0,
                    lso_stuck_seconds: 0.0,
                    pinned: false,
                }),
                withheld_age_seconds: Some(0.0),
                transactions: Some(Vec::new()),
                replication: replication(2, 2, 3),
            },
            // A busy exactly-once partition: a transaction is open, but the LSO moved
            // since the last cycle. Withheld, not pinned: no per-partition series in
            // `topic` granularity.
            PartitionState {
                topic: Arc::from("payments"),
                partition: 2,
                log_start_offset: Some(0),
                high_watermark: Some(20),
                last_stable_offset: Some(15),
                visibility: Some(Visibility {
                    hw_minus_lso: 5,
                    lso_stuck_seconds: 0.0,
                    pinned: false,
                }),
                withheld_age_seconds: Some(0.1),
                transactions: Some(vec![OpenTransaction {
                    producer_id: 5001,
                    producer_epoch: 2,
                    start_offset: 15,
                    transactional_id: "payments-eos-0".into(),
                    state: Some("Ongoing".into()),
                    age_seconds: Some(0.25),
                    age_clock: Some(AgeClock::Coordinator),
                    timeout_ms: Some(60_000),
                    coordinator: CoordinatorStatus::Open,
                    coordinator_broker: Some(2),
                    hanging: false,
                }]),
                replication: replication(3, 3, 3),
            },
        ],
        groups: vec![
            // A read_committed share group waiting at the LSO (KIP-932).
            GroupState {
                coordinator: None,
                name: "orders-queue".into(),
                state: "Stable".into(),
                members: Some(2),
                group_type: "share".into(),
                protocol: "share".into(),
                isolation: Some(kafka_lso_exporter::kafka::Isolation::ReadCommitted),
                broker_lags: vec![kafka_lso_exporter::kafka::BrokerLag {
                    topic: "orders".into(),
                    partition: 0,
                    lag: 0,
                }],
                offsets: Some(vec![GroupPartitionState {
                    topic: topic.clone(),
                    partition: 0,
                    committed_offset: 880,
                    lag: Some(Lag {
                        hw_lag: 19,
                        lso_lag: 0,
                        committed_beyond_lso: 0,
                    }),
                    hw_time_lag: Some(TimeLag::Since(186.75)),
                    lso_time_lag: Some(TimeLag::NothingLeft),
                    commit_stall_seconds: None,
                    retention_margin: None,
                    retention_margin_seconds: None,
                    lost_records: None,
                    owner: Owner::Unknown,
                    abandoned: false,
                }]),
                granularity,
                status: None,
                detail: None,
                rebalance: None,
                rates: Vec::new(),
                ruler: Default::default(),
            },
            GroupState {
                coordinator: None,
                name: "billing-read-committed".into(),
                state: "Stable".into(),
                members: Some(3),
                group_type: "classic".into(),
                protocol: "consumer".into(),
                isolation: None,
                broker_lags: Vec::new(),
                offsets: Some(vec![
                    GroupPartitionState {
                        topic: topic.clone(),
                        partition: 0,
                        committed_offset: 880,
                        lag: Some(Lag {
                            hw_lag: 19,
                            lso_lag: 0,
                            committed_beyond_lso: 0,
                        }),
                        hw_time_lag: Some(TimeLag::Since(186.75)),
                        lso_time_lag: Some(TimeLag::NothingLeft),
                        commit_stall_seconds: Some(0.0),
                        retention_margin: Some(880),
                        retention_margin_seconds: Some(604_800.0 - 186.75),
                        lost_records: Some(0),
                        owner: Owner::Member(0),
                        abandoned: false,
                    },
                    // Caught up on a partition without an open transaction: only in
                    // `partition` granularity, and in the per-topic sums.
                    GroupPartitionState {
                        topic: topic.clone(),
                        partition: 1,
                        committed_offset: 1000,
                        lag: Some(Lag {
                            hw_lag: 0,
                            lso_lag: 0,
                            committed_beyond_lso: 0,
                        }),
                        hw_time_lag: Some(TimeLag::NothingLeft),
                        lso_time_lag: Some(TimeLag::NothingLeft),
                        commit_stall_seconds: Some(0.0),
                        retention_margin: Some(1000),
                        retention_margin_seconds: Some(604_800.0),
                        lost_records: Some(0),
                        owner: Owner::Member(1),
                        abandoned: false,
                    },
                ]),
                granularity,
                status: Some(kafka_lso_exporter::derive::progress::GroupStatus::Blocked),
                // Three consumers, one idle; one rebalance seen 40 s before the sample.
                detail: Some(GroupDetail {
                    epoch: Some(7),
                    assignment_epoch: None,
                    members: vec![
                        member(
                            "consumer-billing-1-3f2a",
                            "billing-1",
                            "/10.0.0.11",
                            Some(vec![0]),
                        ),
                        member(
                            "consumer-billing-2-77c1",
                            "billing-2",
                            "/10.0.0.12",
                            Some(vec![1]),
                        ),
                        member(
                            "consumer-billing-3-0b9e",
                            "billing-3",
                            "/10.0.0.13",
                            Some(vec![]),
                        ),
                    ],
                }),
                rebalance: Some(Rebalances {
                    total: 2,
                    joined: 3,
                    left: 1,
                    last_at: Some(at - Duration::from_secs(40)),
                    rebalancing: false,
                    unreconciled: None,
                }),
                // Caught up below a pinned LSO: it waits for the transaction.
                rates: vec![TopicRate {
                    topic: "orders".into(),
                    consume_rate: Some(0.0),
                    produce_rate: Some(0.0),
                    catchup: Catchup::WaitsForTransaction,
                }],
                ruler: Ruler {
                    level: RulerLevel::ReadCommitted,
                    ..Default::default()
                },
            },
            GroupState {
                coordinator: None,
                name: "audit \"legacy\"\\ <read_uncommitted>\nç".into(),
                state: "Reconciling".into(),
                members: Some(2),
                group_type: "consumer".into(),
                protocol: "consumer".into(),
                isolation: None,
                broker_lags: Vec::new(),
                offsets: Some(vec![GroupPartitionState {
                    topic,
                    partition: 0,
                    committed_offset: 900,
                    lag: Some(Lag {
                        hw_lag: 0,
                        lso_lag: 0,
                        committed_beyond_lso: 20,
                    }),
                    hw_time_lag: Some(TimeLag::NothingLeft),
                    lso_time_lag: Some(TimeLag::NothingLeft),
                    // Its consumer stopped, and retention passed its offset.
                    commit_stall_seconds: Some(420.0),
                    retention_margin: Some(0),
                    retention_margin_seconds: Some(0.0),
                    lost_records: Some(35),
                    owner: Owner::Nobody,
                    abandoned: false,
                }]),
                granularity,
                status: Some(kafka_lso_exporter::derive::progress::GroupStatus::Stopped),
                // KIP-848: one member short of its target assignment.
                detail: Some(GroupDetail {
                    epoch: Some(12),
                    assignment_epoch: Some(12),
                    members: vec![
                        RawMember {
                            target: Some(vec![("orders".into(), vec![0])]),
                            member_epoch: Some(11),
                            ..member(
                                "Qm9vAAAAAAAAAAAAAAAAAA",
                                "audit",
                                "/10.0.0.21",
                                Some(vec![]),
                            )
                        },
                        RawMember {
                            target: Some(vec![]),
                            member_epoch: Some(12),
                            ..member(
                                "Qm9vAAAAAAAAAAAAAAAAAB",
                                "audit",
                                "/10.0.0.22",
                                Some(vec![]),
                            )
                        },
                    ],
                }),
                rebalance: Some(Rebalances {
                    total: 5,
                    joined: 2,
                    left: 2,
                    last_at: Some(at - Duration::from_secs(10)),
                    rebalancing: true,
                    unreconciled: Some(1),
                }),
                rates: vec![TopicRate {
                    topic: "orders".into(),
                    consume_rate: Some(12.5),
                    produce_rate: Some(10.0),
                    catchup: Catchup::Seconds(8.0),
                }],
                // Shown to read uncommitted; it delivered 27 records of 3 aborted
                // transactions.
                ruler: Ruler {
                    level: RulerLevel::ReadUncommitted,
                    members: vec![
                        Some(kafka_lso_exporter::kafka::Isolation::ReadUncommitted),
                        None,
                    ],
                    aborted: vec![(
                        Arc::from("orders"),
                        AbortedRead {
                            records: 27,
                            transactions: 3,
                        },
                    )],
                    ..Default::default()
                },
            },
        ],
        series_dropped: 0,
        left_out_groups: Default::default(),
        series: 0,
        // The cost of exactly-once on the topic whose windows were read.
        eos_cost: [(
            Arc::from("orders"),
            kafka_lso_exporter::kafka::records::EosCost {
                commit_markers: 120,
                abort_markers: 3,
                aborted_records: 27,
                scanned_offsets: 2_460,
            },
        )]
        .into_iter()
        .collect(),
        exposition,
        brokers: vec![
            (1, "kafka-0:9092".into()),
            (2, "kafka-1:9092".into()),
            (3, "kafka-2:9092".into()),
        ],
        retention_ms: [(Arc::from("orders"), 604_800_000)].into_iter().collect(),
        transactions: cluster_transactions(at),
        // What works: offsets; the retention read refused by an ACL; record reads off.
        features: [
            (Feature::Offsets, FeatureState::ok()),
            (
                Feature::RetentionConfigs,
                FeatureState::off(
                    Status::Denied,
                    "DescribeConfigs refused by an ACL; grant DescribeConfigs on the topics",
                ),
            ),
            (
                Feature::RecordReads,
                FeatureState::off(Status::Disabled, "read_records = false"),
            ),
        ]
        .into_iter()
        .collect(),
    }
}

/// The cluster's open transactions: two Ongoing (one of them two-phase), one committing;
/// the oldest two in detail; one id fenced once, another whose coordinator moved.
fn cluster_transactions(at: SystemTime) -> TransactionsView {
    let detailed = |id: &str, epoch: i16, age: f64, left: Option<f64>, partitions: usize| {
        DetailedTransaction {
            transactional_id: id.into(),
            producer_id: 4001,
            producer_epoch: epoch,
            state: "Ongoing".into(),
            coordinator: 2,
            age_seconds: Some(age),
            timeout_left_seconds: left,
            timeout_ms: Some(if left.is_some() { 60_000 } else { i32::MAX }),
            partitions: (0..partitions as i32)
                .map(|p| ("orders".into(), p))
                .collect(),
            described: true,
            pins: true,
            two_phase: left.is_none(),
            fencings: 0,
            coordinator_moves: 0,
        }
    };
    TransactionsView {
        inventory: Some(TransactionInventory {
            complete: true,
            filtered_here: false,
            by_state: [("Ongoing".to_string(), 2), ("PrepareCommit".to_string(), 1)].into(),
            unpinning: 1,
            prepared: Some(1),
            oldest: vec![
                detailed("etl-orders \"7\"", 7, 190.25, Some(0.0), 2),
                detailed("xa-ledger", 0, 45.5, None, 1),
            ],
        }),
        counters: vec![
            WatchCounters {
                transactional_id: "etl-orders \"7\"".into(),
                fencings: 1,
                coordinator_moves: 0,
            },
            WatchCounters {
                transactional_id: "xa-ledger".into(),
                fencings: 0,
                coordinator_moves: 2,
            },
        ],
        recent_fencings: vec![Fencing {
            transactional_id: "etl-orders \"7\"".into(),
            fenced_producer_id: 4001,
            fenced_epoch: 5,
            producer_id: 4001,
            producer_epoch: 7,
            at,
        }],
    }
}

/// Every series in `partition` granularity with kafka_exporter's families and the owner
/// series.
const FULL: Exposition = Exposition {
    granularity: Granularity::Partition,
    kafka_exporter: true,
    assigned_only: false,
    owner_labels: true,
};
/// The default: `topic` granularity, no compatibility families.
const TOPIC: Exposition = Exposition {
    granularity: Granularity::Topic,
    kafka_exporter: false,
    assigned_only: false,
    owner_labels: false,
};

fn render(exposition: Exposition) -> (String, String) {
    render_of(fixed_snapshot(exposition))
}

fn render_of(snapshot: ClusterSnapshot) -> (String, String) {
    let (_tx, rx) = watch::channel(Some(Arc::new(snapshot)));
    let metrics = Metrics::new(vec![rx]);
    metrics.init_cluster("prod");
    metrics.count_errors("prod", Stage::HighWatermark, 1);
    metrics.count_anomaly("prod", Anomaly::LsoAboveHighWatermark);
    metrics.observe_cycle("prod", 0.042);
    let openmetrics = metrics
        .encode_openmetrics()
        .replace(kafka_lso_exporter::REVISION, "REVISION")
        .replace(kafka_lso_exporter::VERSION, "VERSION");
    let prometheus = to_prometheus_text(&openmetrics);
    (openmetrics, prometheus)
}

/// prometheus-client keeps a family's series in a hash map, so their order varies
/// between runs; families keep their order. Sort the samples inside each family.
fn normalize(text: &str) -> String {
    let mut out = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') {
            block.sort_unstable();
            out.append(&mut block);
            out.push(line);
        } else {
            block.push(line);
        }
    }
    block.sort_unstable();
    out.append(&mut block);
    out.join("\n") + "\n"
}

fn check_golden(name: &str, actual: &str) {
    let actual = &normalize(actual);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; create it with UPDATE_GOLDEN=1", path.display()));
    for (number, (a, e)) in actual.lines().zip(expected.lines()).enumerate() {
        assert_eq!(
            a,
            e,
            "{name} line {} differs; if intended, refresh with UPDATE_GOLDEN=1",
            number + 1
        );
    }
    assert_eq!(
        actual.lines().count(),
        expected.lines().count(),
        "{name}: line count differs"
    );
}

/// kafka_exporter's names, which its users' dashboards query: `promtool check metrics`
/// objects to `_sum` on a gauge, and these are the only findings it may report.
const KAFKA_EXPORTER_NAMES: &[&str] = &[
    "kafka_consumergroup_current_offset_sum non-histogram and non-summary metrics should not have \"_sum\" suffix",
    "kafka_consumergroup_lag_sum non-histogram and non-summary metrics should not have \"_sum\" suffix",
];

fn promtool_check(text: &str, allowed: &[&str]) {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool is required (Debian package prometheus; scripts/test installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let findings: Vec<&str> = report
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !allowed.contains(l))
        .collect();
    assert!(
        findings.is_empty(),
        "promtool check metrics reported problems:\n{report}"
    );
    assert!(
        output.status.success() || !allowed.is_empty(),
        "promtool check metrics failed:\n{report}"
    );
}

#[test]
fn golden_prometheus_text() {
    let (_, prometheus) = render(FULL);
    check_golden("metrics.prom", &prometheus);
    promtool_check(&prometheus, KAFKA_EXPORTER_NAMES);
    let (_, topic) = render(TOPIC);
    check_golden("metrics-topic.prom", &topic);
    promtool_check(&topic, &[]);
}

#[test]
fn golden_openmetrics_text() {
    let (openmetrics, _) = render(FULL);
    assert!(openmetrics.ends_with("# EOF\n"));
    // promtool check metrics reads only the Prometheus text format; the OpenMetrics body
    // is what the real Prometheus of tests/ops_e2e.rs scrapes.
    check_golden("metrics.openmetrics", &openmetrics);
}

/// The exporter's own families, outside what the cardinality guard counts.
fn exporter_own(line: &str) -> bool {
    [
        "kafka_lso_exporter_errors_total",
        "kafka_lso_exporter_request_refusals_total",
        "kafka_lso_exporter_anomalies_total",
        "kafka_lso_exporter_cycle_duration_seconds",
        "kafka_lso_exporter_build_info",
    ]
    .iter()
    .any(|name| line.starts_with(name))
}

/// The cardinality guard counts exactly what is rendered, in either granularity, every
/// family of the cluster's snapshot included (transactions, the cost of exactly-once,
/// kafka_exporter's brokers); and what it leaves out is what the render leaves out.
#[test]
fn series_count_matches_the_render() {
    for exposition in [FULL, TOPIC] {
        let snapshot = fixed_snapshot(exposition);
        let counted = series_count(&snapshot);
        let (_, text) = render_of(snapshot.clone());
        let sampled = text
            .lines()
            .filter(|l| !l.starts_with('#') && !exporter_own(l))
            .count();
        assert_eq!(counted, sampled, "{exposition:?}");

        // Just under the whole: the last group outside the priority list goes, and the
        // render shows what the guard says it shows.
        let trimmed = guard(&snapshot, Some(counted - 1), |g| g.starts_with("billing"));
        assert!(
            trimmed.dropped > 0 && trimmed.shown < counted,
            "{trimmed:?}"
        );
        assert!(!trimmed.groups.iter().any(|g| g.starts_with("billing")));
        let mut guarded = snapshot.clone();
        guarded.left_out_groups = trimmed.groups.clone();
        guarded.series_dropped = trimmed.dropped;
        let (_, text) = render_of(guarded);
        let sampled = text
            .lines()
            .filter(|l| !l.starts_with('#') && !exporter_own(l))
            .count();
        assert_eq!(trimmed.shown, sampled, "{exposition:?}");
    }
}

/// `topic` granularity: per-topic series for everything, per-partition series only where
/// a transaction withholds records, with every group's position there.
#[test]
fn topic_granularity_keeps_partition_detail_only_where_records_are_withheld() {
    let (_, text) = render(TOPIC);
    let has = |line: &str| text.lines().any(|l| l.starts_with(line));
    for line in [
        "kafka_partition_hw_minus_lso{kafka_cluster=\"prod\",topic=\"orders\",partition=\"0\"} 20",
        "kafka_partition_high_watermark{kafka_cluster=\"prod\",topic=\"orders\",partition=\"0\"} 900",
        "kafka_transaction_open_info{kafka_cluster=\"prod\",topic=\"orders\",partition=\"0\"",
        "kafka_consumergroup_lso_lag{kafka_cluster=\"prod\",group=\"billing-read-committed\",topic=\"orders\",partition=\"0\"} 0",
        "kafka_consumergroup_committed_beyond_lso{kafka_cluster=\"prod\",group=\"audit",
        "kafka_sharegroup_lag{kafka_cluster=\"prod\",group=\"orders-queue\",topic=\"orders\",partition=\"0\"} 0",
        "kafka_topic_partitions{kafka_cluster=\"prod\",topic=\"orders\"} 3",
        "kafka_consumergroup_members{kafka_cluster=\"prod\",group=\"billing-read-committed\"} 3",
        "kafka_topic_max_lso_stuck_seconds{kafka_cluster=\"prod\",topic=\"payments\"} 30.5",
        "kafka_topic_max_hw_minus_lso{kafka_cluster=\"prod\",topic=\"payments\"} 10",
        "kafka_topic_high_watermark{kafka_cluster=\"prod\",topic=\"payments\"} 80",
        "kafka_topic_withheld_partitions{kafka_cluster=\"prod\",topic=\"payments\"} 2",
        "kafka_topic_open_transactions{kafka_cluster=\"prod\",topic=\"payments\"} 1",
        // Over the partitions known: partition 2's HW failed, partition 0 is pinned.
        "kafka_topic_max_lso_stuck_seconds{kafka_cluster=\"prod\",topic=\"orders\"} 184.5",
        "kafka_topic_last_stable_offset{kafka_cluster=\"prod\",topic=\"payments\"} 65",
        "kafka_topic_max_withheld_age_seconds{kafka_cluster=\"prod\",topic=\"payments\"} 31.0",
        "kafka_partition_hw_minus_lso{kafka_cluster=\"prod\",topic=\"payments\",partition=\"0\"} 10",
        "kafka_consumergroup_topic_committed_offset{kafka_cluster=\"prod\",group=\"billing-read-committed\",topic=\"orders\"} 1880",
        "kafka_consumergroup_topic_hw_lag{kafka_cluster=\"prod\",group=\"billing-read-committed\",topic=\"orders\"} 19",
        "kafka_consumergroup_topic_max_hw_lag_seconds{kafka_cluster=\"prod\",group=\"billing-read-committed\",topic=\"orders\"} 186.75",
        "kafka_sharegroup_topic_lag{kafka_cluster=\"prod\",group=\"orders-queue\",topic=\"orders\"} 0",
    ] {
        assert!(has(line), "{line} should be present in topic granularity");
    }
    for line in [
        // Partition 1: HW == LSO, nothing withheld.
        "kafka_partition_high_watermark{kafka_cluster=\"prod\",topic=\"orders\",partition=\"1\"}",
        "kafka_partition_hw_minus_lso{kafka_cluster=\"prod\",topic=\"orders\",partition=\"1\"}",
        "kafka_consumergroup_committed_offset{kafka_cluster=\"prod\",group=\"billing-read-committed\",topic=\"orders\",partition=\"1\"}",
        // Partition 2: not known to be withheld (its HW failed).
        "kafka_partition_last_stable_offset{kafka_cluster=\"prod\",topic=\"orders\",partition=\"2\"}",
        // A sum over part of a topic would be wrong: partition 2's HW is unknown.
        "kafka_topic_high_watermark{kafka_cluster=\"prod\",topic=\"orders\"}",
        "kafka_partition_hw_minus_lso{kafka_cluster=\"prod\",topic=\"payments\",partition=\"1\"}",
        // Withheld but not pinned: neither its own series nor its transaction's.
        "kafka_partition_hw_minus_lso{kafka_cluster=\"prod\",topic=\"payments\",partition=\"2\"}",
        "kafka_transaction_open_info{kafka_cluster=\"prod\",topic=\"payments\"",
        "kafka_transaction_open_age_seconds{kafka_cluster=\"prod\",topic=\"payments\"",
        // No compatibility families unless asked for.
        "kafka_consumergroup_lag{",
        "kafka_topic_partition_current_offset{",
    ] {
        assert!(!has(line), "{line} should be absent in topic granularity");
    }
}

#[test]
fn every_catalog_metric_is_present_with_its_labels() {
    let (_, text) = render(FULL);
    let catalog = [
        ("kafka_partition_log_start_offset{kafka_cluster=\"prod\",topic=\"orders\",partition=\"0\"} 0", true),
        ("kafka_partition_high_watermark{kafka_cluster=\"prod\",topic=\"orders\",partition=\"0\"} 900", true),
        ("kafka_partition_last_stable_offset{kafka_cluster=\"prod\",topic=\"orders\",partition=\"0\"} 880", true),
        ("kafka_partition_hw_minus_lso{kafka_cluster=\"prod\",topic=\"orders\",partition=\"0\"} 20", true),
        ("kafka_partition_lso_stuck_seconds{kafka_cluster=\"prod\",topic=\"orders\",partition=\"0\"} 184.5", true),
        ("kafka_consumergroup_committed_offset{kafka_cluster=\"prod\",group=\"billing-read-committed\",topic=\"orders\",partition=\"0\"} 880", true),
        ("kafka_consumergroup_hw_lag{kafka_cluster=\"prod\",group=\"billing-read-committed\",topic=\"orders\",partition=\"0\"} 19", true),
        ("kafka_consumergroup_lso_lag{kafka_cluster=\"prod\",group=\"billing-read-committed\",topic=\"orders\",partition=\"0\"} 0", true),
        ("kafka_consumergroup_committed_beyond_lso{kafka_cluster=\"prod\",group=\"audit \\\"legacy\\\"\\\\ <read_uncommitted>\\nç\",topic=\"orders\",partition=\"0\"} 20", true),
        ("kafka_consumergroup_hw_lag_seconds{kafka_cluster=\"prod\",group=\"billing-read-committed\",topic=\"orders\",partition=\"0\"} 186.75", true),
        ("kafka_consumergroup_lso_lag_seconds{kafka_cluster=\"prod\",group=\"billing-read-committed\",topic=\"orders\",partition=\"0\"} 0.0", true),
        ("kafka_partition_withheld_age_seconds{kafka_cluster=\"prod\",topic=\"orders\",partition=\"0\"} 186.75", true),
        ("kafka_partition_withheld_age_seconds{kafka_cluster=\"prod\",topic=\"orders\",partition=\"2\"}", false),
        ("kafka_consumergroup_info{kafka_cluster=\"prod\",group=\"billing-read-committed\",group_type=\"classic\",protocol=\"consumer\"} 1", true),
        // A share group: its start offset and lag against the LSO (it reads committed),
        // under its own names, not as a consumer group's committed offset.
        ("kafka_sharegroup_start_offset{kafka_cluster=\"prod\",group=\"orders-queue\",topic=\"orders\",partition=\"0\"} 880", true),
        ("kafka_sharegroup_lag{kafka_cluster=\"prod\",group=\"orders-queue\",topic=\"orders\",partition=\"0\"} 0", true),
        ("kafka_sharegroup_lag_seconds{kafka_cluster=\"prod\",group=\"orders-queue\",topic=\"orders\",partition=\"0\"} 0.0", true),
        ("kafka_sharegroup_broker_lag{kafka_cluster=\"prod\",group=\"orders-queue\",topic=\"orders\",partition=\"0\"} 0", true),
        ("kafka_sharegroup_isolation_level{kafka_cluster=\"prod\",group=\"orders-queue\",isolation_level=\"read_committed\"} 1", true),
        ("kafka_consumergroup_state{kafka_cluster=\"prod\",group=\"orders-queue\",state=\"Stable\"} 1", true),
        ("kafka_consumergroup_committed_offset{kafka_cluster=\"prod\",group=\"orders-queue\"", false),
        // A KIP-848 group: its own protocol's states, not the classic ones.
        ("kafka_consumergroup_state{kafka_cluster=\"prod\",group=\"audit \\\"legacy\\\"\\\\ <read_uncommitted>\\nç\",state=\"Reconciling\"} 1", true),
        ("kafka_consumergroup_state{kafka_cluster=\"prod\",group=\"audit \\\"legacy\\\"\\\\ <read_uncommitted>\\nç\",state=\"PreparingRebalance\"}", false),
        ("kafka_consumergroup_state{kafka_cluster=\"prod\",group=\"billing-read-committed\",state=\"Stable\"} 1", true),
        ("kafka_consumergroup_state{kafka_cluster=\"prod\",group=\"billing-read-committed\",state=\"Empty\"} 0", true),
        // The cost of exactly-once per topic: counters.
        ("kafka_topic_transaction_markers_total{kafka_cluster=\"prod\",topic=\"orders\",marker=\"commit\"} 120", true),
        ("kafka_topic_transaction_markers_total{kafka_cluster=\"prod\",topic=\"orders\",marker=\"abort\"} 3", true),
        ("kafka_topic_aborted_records_total{kafka_cluster=\"prod\",topic=\"orders\"} 27", true),
        ("kafka_topic_scanned_offsets_total{kafka_cluster=\"prod\",topic=\"orders\"} 2460", true),
        ("kafka_lso_exporter_up{kafka_cluster=\"prod\"} 1", true),
        ("kafka_lso_exporter_last_success_timestamp_seconds{kafka_cluster=\"prod\"} 1790000000", true),
        ("kafka_lso_exporter_errors_total{kafka_cluster=\"prod\",stage=\"high_watermark\"} 1", true),
        ("kafka_lso_exporter_anomalies_total{kafka_cluster=\"prod\",kind=\"lso_above_high_watermark\"} 1", true),
        ("kafka_lso_exporter_cycle_duration_seconds_count{kafka_cluster=\"prod\"} 1", true),
        ("kafka_lso_exporter_build_info{version=\"VERSION\",revision=\"REVISION\"} 1", true),
        // Every transaction in the cluster, from the coordinators.
        ("kafka_cluster_open_transactions{kafka_cluster=\"prod\",state=\"Ongoing\"} 2", true),
        ("kafka_cluster_open_transactions{kafka_cluster=\"prod\",state=\"PrepareEpochFence\"} 0", true),
        ("kafka_cluster_unpinning_open_transactions{kafka_cluster=\"prod\"} 1", true),
        ("kafka_cluster_prepared_transactions{kafka_cluster=\"prod\"} 1", true),
        ("kafka_coordinator_transaction_age_seconds{kafka_cluster=\"prod\",transactional_id=\"xa-ledger\",producer_id=\"4001\",producer_epoch=\"0\",state=\"Ongoing\",coordinator=\"2\"} 45.5", true),
        ("kafka_coordinator_transaction_timeout_left_seconds{kafka_cluster=\"prod\",transactional_id=\"xa-ledger\"", false),
        // Two-phase is said, not read from an absent time left.
        ("kafka_coordinator_transaction_two_phase{kafka_cluster=\"prod\",transactional_id=\"xa-ledger\",producer_id=\"4001\",producer_epoch=\"0\",state=\"Ongoing\",coordinator=\"2\"} 1", true),
        ("kafka_coordinator_transaction_two_phase{kafka_cluster=\"prod\",transactional_id=\"etl-orders \\\"7\\\"\",producer_id=\"4001\",producer_epoch=\"7\",state=\"Ongoing\",coordinator=\"2\"} 0", true),
        ("kafka_coordinator_transaction_partitions{kafka_cluster=\"prod\",transactional_id=\"etl-orders \\\"7\\\"\",producer_id=\"4001\",producer_epoch=\"7\",state=\"Ongoing\",coordinator=\"2\"} 2", true),
        ("kafka_transaction_fencings_total{kafka_cluster=\"prod\",transactional_id=\"etl-orders \\\"7\\\"\"} 1", true),
        ("kafka_transaction_coordinator_moves_total{kafka_cluster=\"prod\",transactional_id=\"xa-ledger\"} 2", true),
        ("kafka_lso_exporter_errors_total{kafka_cluster=\"prod\",stage=\"list_transactions\"} 0", true),
        // An open transaction: identity in the info series (always 1), age on its own.
        ("kafka_transaction_open_info{kafka_cluster=\"prod\",topic=\"orders\",partition=\"0\",transactional_id=\"etl-orders \\\"7\\\"\",producer_id=\"4001\",producer_epoch=\"7\",start_offset=\"880\"} 1", true),
        ("kafka_transaction_open_age_seconds{kafka_cluster=\"prod\",topic=\"orders\",partition=\"0\",transactional_id=\"etl-orders \\\"7\\\"\",producer_id=\"4001\",producer_epoch=\"7\",start_offset=\"880\"} 190.25", true),
        // kafka_exporter's families (compat), from the same snapshot.
        ("kafka_consumergroup_lag{kafka_cluster=\"prod\",consumergroup=\"billing-read-committed\",topic=\"orders\",partition=\"0\"} 19", true),
        ("kafka_consumergroup_current_offset{kafka_cluster=\"prod\",consumergroup=\"billing-read-committed\",topic=\"orders\",partition=\"1\"} 1000", true),
        ("kafka_consumergroup_current_offset_sum{kafka_cluster=\"prod\",consumergroup=\"billing-read-committed\",topic=\"orders\"} 1880", true),
        ("kafka_consumergroup_lag_sum{kafka_cluster=\"prod\",consumergroup=\"billing-read-committed\",topic=\"orders\"} 19", true),
        ("kafka_consumergroup_lag{kafka_cluster=\"prod\",consumergroup=\"orders-queue\"", false),
        ("kafka_consumergroup_members{kafka_cluster=\"prod\",group=\"billing-read-committed\",consumergroup=\"billing-read-committed\"} 3", true),
        ("kafka_topic_partitions{kafka_cluster=\"prod\",topic=\"orders\"} 3", true),
        ("kafka_topic_partition_current_offset{kafka_cluster=\"prod\",topic=\"orders\",partition=\"1\"} 1000", true),
        ("kafka_topic_partition_oldest_offset{kafka_cluster=\"prod\",topic=\"orders\",partition=\"1\"} 12", true),
        ("kafka_topic_partition_leader{kafka_cluster=\"prod\",topic=\"orders\",partition=\"1\"} 2", true),
        ("kafka_topic_partition_leader_is_preferred{kafka_cluster=\"prod\",topic=\"orders\",partition=\"1\"} 0", true),
        ("kafka_topic_partition_leader_is_preferred{kafka_cluster=\"prod\",topic=\"orders\",partition=\"0\"} 1", true),
        ("kafka_topic_partition_under_replicated_partition{kafka_cluster=\"prod\",topic=\"orders\",partition=\"1\"} 1", true),
        ("kafka_topic_partition_in_sync_replica{kafka_cluster=\"prod\",topic=\"orders\",partition=\"1\"} 2", true),
        ("kafka_topic_partition_replicas{kafka_cluster=\"prod\",topic=\"orders\",partition=\"1\"} 3", true),
        ("kafka_brokers{kafka_cluster=\"prod\"} 3", true),
        ("kafka_broker_info{kafka_cluster=\"prod\",id=\"2\",address=\"kafka-1:9092\"} 1", true),
        // Partition 2's HW failed: no HW, no gap, no stuck clock; its LSO is still shown.
        ("kafka_partition_high_watermark{kafka_cluster=\"prod\",topic=\"orders\",partition=\"2\"}", false),
        ("kafka_partition_hw_minus_lso{kafka_cluster=\"prod\",topic=\"orders\",partition=\"2\"}", false),
        ("kafka_partition_last_stable_offset{kafka_cluster=\"prod\",topic=\"orders\",partition=\"2\"} 77", true),
    ];
    for (line, present) in catalog {
        let found = text.lines().any(|l| l.starts_with(line));
        assert_eq!(
            found,
            present,
            "{line} should be {}",
            if present { "present" } else { "absent" }
        );
    }
}

/// A broker that does not answer ListTransactions leaves the inventory incomplete: its
/// counts are still shown, as lower bounds, so that the alerts on them can fire while a
/// broker is down.
#[test]
fn an_incomplete_transaction_inventory_still_shows_its_counts() {
    let mut snapshot = fixed_snapshot(TOPIC);
    snapshot.transactions.inventory.as_mut().unwrap().complete = false;
    let (_, text) = render_of(snapshot);
    for line in [
        "kafka_cluster_open_transactions{kafka_cluster=\"prod\",state=\"Ongoing\"} 2",
        "kafka_cluster_unpinning_open_transactions{kafka_cluster=\"prod\"} 1",
        "kafka_cluster_prepared_transactions{kafka_cluster=\"prod\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
    }
}

#[test]
fn a_rendered_body_is_served_until_the_next_cycle() {
    let (_tx, rx) = watch::channel(Some(Arc::new(fixed_snapshot(TOPIC))));
    let metrics = Metrics::new(vec![rx]);
    assert!(metrics.cached(None, true).is_none(), "nothing rendered yet");
    let (content_type, gzipped, body) = metrics.encode_for(None, true);
    assert!(content_type.starts_with("text/plain") && gzipped);
    let (_, _, cached) = metrics.cached(None, true).expect("rendered body");
    assert_eq!(cached, body);
    assert!(
        metrics
            .cached(Some("application/openmetrics-text"), false)
            .is_none(),
        "each format is rendered on demand"
    );
    metrics.count_errors("prod", Stage::Metadata, 1);
    metrics.cycle_finished();
    assert!(
        metrics.cached(None, true).is_none(),
        "a finished cycle outdates the body"
    );
    let (_, _, fresh) = metrics.encode_for(None, false);
    assert!(String::from_utf8_lossy(&fresh)
        .contains("kafka_lso_exporter_errors_total{kafka_cluster=\"prod\",stage=\"metadata\"} 1"));

    // What the scheduler does after each cycle: the body Prometheus asks for is rendered
    // before it replaces the previous one, which is served meanwhile.
    let openmetrics = Some("application/openmetrics-text;version=1.0.0");
    let (_, _, previous) = metrics.encode_for(openmetrics, true);
    metrics.count_errors("prod", Stage::Metadata, 1);
    assert_eq!(metrics.cached(openmetrics, true).unwrap().2, previous);
    metrics.cycle_finished_and_rendered();
    let (content_type, gzipped, next) = metrics
        .cached(openmetrics, true)
        .expect("rendered with the cycle");
    assert!(content_type.starts_with("application/openmetrics-text") && gzipped);
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&next[..]), &mut text).unwrap();
    assert!(text.ends_with("# EOF\n"));
    assert!(text
        .contains("kafka_lso_exporter_errors_total{kafka_cluster=\"prod\",stage=\"metadata\"} 2"));
    assert!(
        metrics.cached(None, false).is_none(),
        "the other formats wait for their first scrape"
    );
}

/// A replica that runs no cycle (one standing by under `[ha]`) still serves its own
/// series as they are now: a body older than the interval is rendered again.
#[test]
fn a_body_older_than_the_interval_is_rendered_again_without_a_cycle() {
    let (_tx, rx) = watch::channel(Some(Arc::new(fixed_snapshot(TOPIC))));
    let metrics = Metrics::new(vec![rx]).with_max_age(std::time::Duration::from_millis(300));
    let (_, _, first) = metrics.encode_for(None, false);
    metrics.count_errors("prod", Stage::Metadata, 1);
    assert_eq!(
        metrics.cached(None, false).expect("young body").2,
        first,
        "a young body is served as it is"
    );
    std::thread::sleep(std::time::Duration::from_millis(350));
    assert!(
        metrics.cached(None, false).is_none(),
        "an old body is not served from the cache"
    );
    let (_, _, again) = metrics.encode_for(None, false);
    assert!(String::from_utf8_lossy(&again)
        .contains("kafka_lso_exporter_errors_total{kafka_cluster=\"prod\",stage=\"metadata\"} 1"));
}
