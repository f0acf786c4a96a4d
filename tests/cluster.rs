//! Three brokers (`KAFKA_BROKERS=3 scripts/kafka-local`: replication factor 3, min ISR 2),
//! the exporter sampling every second. The request plan follows the leaders and the
//! coordinators; a leader, a transaction coordinator or a group coordinator killed
//! (SIGKILL), a rolling restart and a blackholed broker never make a value wrong (absent
//! is allowed), and what each costs in absent cycles and recovery time is printed.
//!
//! `scripts/test` starts the cluster and points `KAFKA_BOOTSTRAP` at it; without three
//! brokers every test here fails (the single-broker stage skips them by their
//! `three_brokers_` prefix). The tests take turns: each kills brokers.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::binary::Binary;
use common::proxy::{Mode, Proxy};
use common::*;
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::Producer;

const BROKERS: i32 = 3;
/// `offsets.topic.num.partitions` and `transaction.state.log.num.partitions` of
/// `scripts/kafka-local`.
const INTERNAL_PARTITIONS: i32 = 8;

/// One test at a time: they kill and restart brokers.
async fn exclusive() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

fn first_port() -> u16 {
    listener(0)
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .expect("bootstrap port")
}

/// `scripts/kafka-local ARGS` for the cluster under test.
fn kafka_local(args: &[&str]) {
    let status = Command::new(repo_root().join("scripts/kafka-local"))
        .args(args)
        .env("KAFKA_BROKERS", BROKERS.to_string())
        .env("KAFKA_LOCAL_PORT", first_port().to_string())
        .status()
        .expect("scripts/kafka-local");
    assert!(status.success(), "scripts/kafka-local {args:?} failed");
}

fn metadata_client() -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("topic.metadata.refresh.interval.ms", "200")
        .create()
        .expect("metadata client")
}

/// Broker ids in the cluster's metadata (fenced brokers leave it).
fn live_brokers() -> BTreeSet<i32> {
    metadata_client()
        .fetch_metadata(None, Duration::from_secs(10))
        .map(|m| m.brokers().iter().map(|b| b.id()).collect())
        .unwrap_or_default()
}

fn leader(topic: &str, partition: i32) -> Option<i32> {
    let metadata = metadata_client()
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .ok()?;
    let t = metadata.topics().first()?;
    let p = t.partitions().iter().find(|p| p.id() == partition)?;
    (p.leader() >= 0 && p.error().is_none()).then_some(p.leader())
}

/// Fails unless three brokers run; starts any that is down (a previous test failed
/// midway), and waits until all three are in the metadata.
fn require_three_brokers() {
    assert_eq!(
        bootstrap().split(',').count(),
        BROKERS as usize,
        "these tests need the three-broker cluster: KAFKA_BOOTSTRAP={:?} must list its three \
         brokers (`KAFKA_BROKERS=3 KAFKA_LOCAL_PORT=19200 scripts/kafka-local start`, then \
         `bootstrap`; scripts/test does both)",
        bootstrap()
    );
    require_kafka();
    kafka_local(&["start"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let brokers = live_brokers();
        if brokers.len() == BROKERS as usize {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "these tests need the three-broker cluster at KAFKA_BOOTSTRAP ({}): \
             `KAFKA_BROKERS=3 KAFKA_LOCAL_PORT=... scripts/kafka-local start` (scripts/test starts it); \
             brokers in the metadata: {brokers:?}",
            bootstrap()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The partition of `__consumer_offsets` or `__transaction_state` that holds a group or
/// transactional id: Kafka's `Utils.abs(id.hashCode()) % partitions`.
fn internal_partition(id: &str) -> i32 {
    let hash = id
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    // Utils.abs: Integer.MIN_VALUE is 0.
    hash.checked_abs().unwrap_or(0) % INTERNAL_PARTITIONS
}

fn coordinator(internal_topic: &str, key: &str) -> Option<i32> {
    leader(internal_topic, internal_partition(key))
}

/// A fresh id whose coordinator (the leader of its partition of `internal_topic`) is
/// `broker`.
fn id_coordinated_by(internal_topic: &str, prefix: &str, broker: i32) -> String {
    let base = unique(prefix);
    (0..10_000)
        .map(|n| format!("{base}-{n}"))
        .find(|id| coordinator(internal_topic, id) == Some(broker))
        .unwrap_or_else(|| panic!("no id of {internal_topic} lands on broker {broker}"))
}

/// Creates `__transaction_state` and `__consumer_offsets` if this cluster has neither yet
/// and waits until their leaders are spread over the brokers.
async fn ensure_internal_topics() {
    let topic = unique("cluster-warmup");
    create_replicated_topic(&topic, &[1]).await;
    tokio::task::block_in_place(|| {
        drop(transactional_producer(&unique("cluster-warmup")));
        send(&plain_producer(), &topic, 0, 1);
        consume_all_and_commit(&unique("cluster-warmup"), &topic, 1, "read_committed");
        wait_spread_leaders();
    });
}

fn wait_spread_leaders() {
    for internal in ["__transaction_state", "__consumer_offsets"] {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let leaders: BTreeSet<i32> = (0..INTERNAL_PARTITIONS)
                .filter_map(|p| leader(internal, p))
                .collect();
            if leaders.len() == BROKERS as usize {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{internal} leaders {leaders:?}: not spread over {BROKERS} brokers"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// A topic with replication factor 3 whose partition `p` is led by `leaders[p]`.
async fn create_replicated_topic(name: &str, leaders: &[i32]) {
    let assignment: Vec<Vec<i32>> = leaders
        .iter()
        .map(|&l| (0..BROKERS).map(|k| (l - 1 + k) % BROKERS + 1).collect())
        .collect();
    let replicas: Vec<&[i32]> = assignment.iter().map(Vec::as_slice).collect();
    let topic = NewTopic::new(
        name,
        leaders.len() as i32,
        TopicReplication::Variable(&replicas),
    );
    for r in admin()
        .create_topics(
            [&topic],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await
        .expect("create_topics")
    {
        r.unwrap_or_else(|(t, e)| panic!("creating {t}: {e}"));
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for (p, &l) in leaders.iter().enumerate() {
        while leader(name, p as i32) != Some(l) || high_watermark_of(name, p as i32).is_none() {
            assert!(Instant::now() < deadline, "{name}/{p} never got leader {l}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn high_watermark_of(topic: &str, partition: i32) -> Option<i64> {
    metadata_client()
        .fetch_watermarks(topic, partition, Duration::from_secs(5))
        .ok()
        .map(|(_, hw)| hw)
}

/// Waits until the metadata names a leader of `topic`/`partition` other than `old`;
/// returns it and when it was seen.
fn wait_new_leader(topic: &str, partition: i32, old: i32) -> (i32, Instant) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(l) = leader(topic, partition).filter(|&l| l != old) {
            return (l, Instant::now());
        }
        assert!(
            Instant::now() < deadline,
            "{topic}/{partition}: no leader but {old} within 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Scrapes the exporter every 200 ms in the background, keeping the lines of one
/// topic and group and the cycle counter.
struct Watch {
    scrapes: Arc<Mutex<Vec<(Instant, Scrape)>>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Watch {
    fn start(addr: SocketAddr, keep: Vec<String>) -> Watch {
        let scrapes = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let task = {
            let (scrapes, stop) = (scrapes.clone(), stop.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(r) = client.get(format!("http://{addr}/metrics")).send().await {
                        if let Ok(body) = r.text().await {
                            let kept: String = body
                                .lines()
                                .filter(|l| {
                                    l.starts_with("kafka_lso_exporter_cycle_duration_seconds")
                                        || keep.iter().any(|k| l.contains(k.as_str()))
                                })
                                .map(|l| format!("{l}\n"))
                                .collect();
                            scrapes
                                .lock()
                                .unwrap()
                                .push((Instant::now(), Scrape::parse(&kept)));
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            })
        };
        Watch {
            scrapes,
            stop,
            task,
        }
    }

    async fn finish(self) -> Vec<(Instant, Scrape)> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("watch task");
        Arc::try_unwrap(self.scrapes)
            .ok()
            .expect("watch ended")
            .into_inner()
            .unwrap()
    }
}

/// The cycle a scrape shows (the exporter's completed-cycle count).
fn cycle_of(s: &Scrape) -> Option<u64> {
    s.value(
        "kafka_lso_exporter_cycle_duration_seconds_count",
        &[("kafka_cluster", "test")],
    )
    .map(|v| v as u64)
}

/// Cycles (by the exporter's count) in which `present` was false in every scrape.
fn absent_cycles(scrapes: &[(Instant, Scrape)], present: impl Fn(&Scrape) -> bool) -> usize {
    let mut by_cycle: BTreeMap<u64, bool> = BTreeMap::new();
    for (_, s) in scrapes {
        if let Some(c) = cycle_of(s) {
            *by_cycle.entry(c).or_default() |= present(s);
        }
    }
    by_cycle.values().filter(|present| !**present).count()
}

/// Every value of `topic`'s partitions in every scrape is one the cluster really had:
/// HW in `hw_range`, the LSO never above the HW nor outside `lso_range`, no negative gap
/// or lag, nothing ever moving backwards.
fn assert_never_wrong(
    scrapes: &[(Instant, Scrape)],
    topic: &str,
    partitions: i32,
    hw_range: (i64, i64),
    lso_range: (i64, i64),
) {
    for p in 0..partitions {
        let p = p.to_string();
        let labels = partition_labels(topic, &p);
        let (mut last_hw, mut last_lso) = (i64::MIN, i64::MIN);
        for (at, s) in scrapes {
            let hw = s.value("kafka_partition_high_watermark", &labels);
            let lso = s.value("kafka_partition_last_stable_offset", &labels);
            if let Some(hw) = hw {
                let hw = hw as i64;
                assert!(
                    (hw_range.0..=hw_range.1).contains(&hw) && hw >= last_hw,
                    "{topic}/{p} at {at:?}: HW {hw}, expected within {hw_range:?}, after {last_hw}"
                );
                last_hw = hw;
            }
            if let Some(lso) = lso {
                let lso = lso as i64;
                assert!(
                    (lso_range.0..=lso_range.1).contains(&lso) && lso >= last_lso,
                    "{topic}/{p}: LSO {lso}, expected within {lso_range:?}, after {last_lso}"
                );
                last_lso = lso;
            }
            if let (Some(hw), Some(lso)) = (hw, lso) {
                assert!(hw >= lso, "{topic}/{p}: HW {hw} < LSO {lso}");
                if let Some(gap) = s.value("kafka_partition_hw_minus_lso", &labels) {
                    assert_eq!(gap, hw - lso, "{topic}/{p}: HW - LSO");
                }
            }
            for (labels, v) in s.series("kafka_consumergroup_hw_lag", &[("topic", topic)]) {
                assert!(v >= 0.0, "negative lag {labels:?} {v}");
            }
            for (labels, v) in s.series("kafka_consumergroup_lso_lag", &[("topic", topic)]) {
                assert!(v >= 0.0, "negative lag {labels:?} {v}");
            }
        }
    }
}

/// No cycle ran past its deadline (1 s) by more than the derivation that follows it:
/// every cycle took at most 2.5 s.
fn assert_cycles_within_deadline(s: &Scrape) {
    let count = |le: &str| {
        s.value(
            "kafka_lso_exporter_cycle_duration_seconds_bucket",
            &[("kafka_cluster", "test"), ("le", le)],
        )
        .expect("cycle histogram")
    };
    assert_eq!(
        count("2.5"),
        count("+Inf"),
        "a cycle overran its 1 s deadline"
    );
}

/// A transaction left open in `topic`/`partition` after one record, then `plain`
/// records written after it by another producer: HW - LSO = `plain` + 1, the LSO
/// pinned at the transaction's first offset.
fn pin(topic: &str, partition: i32, transactional_id: &str, plain: usize) -> Producer_ {
    let producer = transactional_producer(transactional_id);
    producer.begin_transaction().expect("begin");
    send(&producer, topic, partition, 1);
    send(&plain_producer(), topic, partition, plain);
    producer
}

fn commit(producer: Producer_) {
    producer
        .commit_transaction(Duration::from_secs(60))
        .expect("commit after the failover");
}

fn stuck_transactions(report: &serde_json::Value, topic: &str) -> Vec<serde_json::Value> {
    report["partitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["topic"] == topic)
        .flat_map(|p| p["transactions"].as_array().cloned().unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_brokers_request_plan_follows_leaders_and_coordinators() {
    let _turn = exclusive().await;
    require_three_brokers();
    ensure_internal_topics().await;
    // Three partitions on three leaders; two pinned, on leaders 1 and 2, by transactions
    // coordinated by brokers 2 and 3; three groups on coordinators 1, 2 and 3.
    let topic = unique("plan");
    create_replicated_topic(&topic, &[1, 2, 3]).await;
    let held: Vec<Producer_> = tokio::task::block_in_place(|| {
        send(&plain_producer(), &topic, 2, 1);
        [(0, 2), (1, 3)]
            .iter()
            .map(|&(partition, coordinator)| {
                let id = id_coordinated_by("__transaction_state", "plan-tx", coordinator);
                pin(&topic, partition, &id, 2)
            })
            .collect()
    });
    let groups: Vec<String> = tokio::task::block_in_place(|| {
        (1..=BROKERS)
            .map(|b| {
                let g = id_coordinated_by("__consumer_offsets", "plan-group", b);
                consume_all_and_commit(&g, &topic, 3, "read_uncommitted");
                g
            })
            .collect()
    });
    let group_regex = groups
        .iter()
        .map(|g| format!("^{g}$"))
        .collect::<Vec<_>>()
        .join("|");

    // The binary with the request log of both clients (librdkafka's protocol debug for
    // ListOffsets and metadata, the own client's for the rest).
    let exporter = Binary::start(
        &[],
        &[
            ("RUST_LOG", "kafka_lso_exporter=debug,librdkafka=debug"),
            ("KAFKA_LSO_EXPORTER_INTERVAL", "1s"),
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__NAME", "test"),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__BOOTSTRAP_SERVERS",
                &bootstrap(),
            ),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TOPICS__INCLUDE",
                &format!("[\"^{topic}$\"]"),
            ),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__GROUPS__INCLUDE",
                &format!("[{group_regex:?}]"),
            ),
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__CLIENT__DEBUG", "protocol"),
        ],
    );
    exporter
        .wait_for(
            "both pinned partitions named by their transaction",
            Duration::from_secs(60),
            |s| {
                (s.series("kafka_transaction_open_info", &[("topic", topic.as_str())])
                    .count()
                    == 2)
                    .then_some(())
            },
        )
        .await;
    tokio::time::sleep(Duration::from_secs(4)).await;
    let log = exporter.log();
    // Requests of the last full cycles, by API and broker port.
    let ends: Vec<usize> = log.match_indices("cycle done").map(|(i, _)| i).collect();
    assert!(ends.len() >= 4, "fewer than 4 cycles logged");
    let cycle = &log[ends[ends.len() - 3]..ends[ends.len() - 2]];
    // librdkafka: "127.0.0.1:PORT/ID: Sent XRequest"; the own client: "Sent XRequest (vN)
    // broker=127.0.0.1:PORT".
    let sent = regex::Regex::new(r"Sent (\w+)Request").unwrap();
    let own = regex::Regex::new(r"broker=127\.0\.0\.1:(\d+)").unwrap();
    let librdkafka = regex::Regex::new(r"127\.0\.0\.1:(\d+)/\d+: Sent").unwrap();
    let mut plan: BTreeMap<(String, i32), u32> = BTreeMap::new();
    let port_of = |b: i32| i32::from(first_port()) + 10 * (b - 1);
    for line in cycle.lines() {
        let Some(api) = sent.captures(line) else {
            continue;
        };
        let Some(port) = own.captures(line).or_else(|| librdkafka.captures(line)) else {
            continue;
        };
        let port: i32 = port[1].parse().unwrap();
        let broker = (1..=BROKERS).find(|&b| port_of(b) == port).unwrap_or(0);
        *plan.entry((api[1].to_string(), broker)).or_default() += 1;
    }
    eprintln!("requests in one cycle, by API and broker: {plan:?}");
    let on = |api: &str| -> BTreeMap<i32, u32> {
        plan.iter()
            .filter(|((a, _), _)| a == api)
            .map(|((_, b), n)| (*b, *n))
            .collect()
    };
    // ListOffsets: the same number on each of the three leaders (one per offset kind and
    // isolation level), none elsewhere.
    let list_offsets = on("ListOffsets");
    assert_eq!(
        list_offsets.keys().copied().collect::<Vec<_>>(),
        vec![1, 2, 3],
        "{plan:?}"
    );
    let per_leader: BTreeSet<u32> = list_offsets.values().copied().collect();
    assert_eq!(per_leader.len(), 1, "uneven ListOffsets {list_offsets:?}");
    // One OffsetFetch per coordinator, for three groups on three coordinators, to the
    // broker that listed them: no FindCoordinator. One Metadata request.
    assert_eq!(on("OffsetFetch"), BTreeMap::from([(1, 1), (2, 1), (3, 1)]));
    assert_eq!(on("FindCoordinator"), BTreeMap::new(), "{plan:?}");
    assert_eq!(on("Metadata").values().sum::<u32>(), 1, "{plan:?}");
    // Forensics: DescribeProducers on the two leaders of pinned partitions only,
    // DescribeTransactions on the two coordinators only.
    assert_eq!(on("DescribeProducers"), BTreeMap::from([(1, 1), (2, 1)]));
    assert_eq!(on("DescribeTransactions"), BTreeMap::from([(2, 1), (3, 1)]));
    drop(exporter);
    tokio::task::block_in_place(|| held.into_iter().for_each(commit));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_brokers_leader_failover_mid_transaction() {
    let _turn = exclusive().await;
    require_three_brokers();
    ensure_internal_topics().await;
    // The pinned partition is led by broker 1; its transaction is coordinated by 2.
    let topic = unique("failover-leader");
    create_replicated_topic(&topic, &[1]).await;
    let id = tokio::task::block_in_place(|| {
        id_coordinated_by("__transaction_state", "failover-leader-tx", 2)
    });
    let producer = tokio::task::block_in_place(|| pin(&topic, 0, &id, 4));
    let pinned_at = Instant::now();
    let exporter = Exporter::start(&format!("^{topic}$"), "^$", &[]).await;
    let labels = partition_labels(&topic, "0");
    exporter
        .wait_for(
            "the partition pinned by its transaction",
            Duration::from_secs(30),
            |s| {
                (s.value("kafka_partition_hw_minus_lso", &labels)? == 5.0
                    && s.value("kafka_partition_open_transactions", &labels)? == 1.0)
                    .then_some(())
            },
        )
        .await;
    let watch = Watch::start(exporter.addr, vec![topic.clone()]);

    tokio::task::block_in_place(|| kafka_local(&["kill", "1"]));
    let killed = Instant::now();
    let (new_leader, elected) = tokio::task::block_in_place(|| wait_new_leader(&topic, 0, 1));
    // Records written to the new leader after the election.
    tokio::task::block_in_place(|| send(&plain_producer(), &topic, 0, 3));
    let back = exporter
        .wait_for(
            "the new leader's HW and LSO, the transaction still named",
            Duration::from_secs(30),
            |s| {
                (s.value("kafka_partition_high_watermark", &labels)? == 8.0
                    && s.value("kafka_partition_last_stable_offset", &labels)? == 0.0
                    && s.series("kafka_transaction_open_info", &labels)
                        .any(|(l, _)| l["transactional_id"] == id))
                .then(Instant::now)
            },
        )
        .await;
    let s = exporter.scrape().await;
    let stuck = s
        .value("kafka_partition_lso_stuck_seconds", &labels)
        .expect("stuck seconds");
    // The clock still counts from the original pin (it started within a cycle or two
    // of it): a leader change is not an LSO move.
    let since_pin = pinned_at.elapsed().as_secs_f64();
    assert!(
        stuck >= since_pin - 4.0 && stuck <= since_pin + 1.0,
        "stuck {stuck} s, pinned {since_pin:.1} s ago"
    );
    let scrapes = watch.finish().await;
    assert_never_wrong(&scrapes, &topic, 1, (5, 8), (0, 0));
    let absent = absent_cycles(&scrapes, |s| {
        s.value("kafka_partition_last_stable_offset", &labels)
            .is_some()
    });
    let recovery = back.saturating_duration_since(elected);
    eprintln!(
        "leader failover: broker 1 killed, broker {new_leader} elected after {:.1} s; \
         exporter right again {:.1} s after the election (new writes included); {absent} absent cycles",
        elected.duration_since(killed).as_secs_f64(),
        recovery.as_secs_f64()
    );
    assert!(
        recovery <= Duration::from_secs(3),
        "values back {recovery:?} after the election (2 cycles + the writes)"
    );
    assert_cycles_within_deadline(&exporter.scrape().await);

    tokio::task::block_in_place(|| {
        commit(producer);
        kafka_local(&["start", "1"]);
    });
    exporter
        .wait_for("HW = LSO after the commit", Duration::from_secs(30), |s| {
            (s.value("kafka_partition_hw_minus_lso", &labels)? == 0.0).then_some(())
        })
        .await;
    exporter.stop().await;
}

/// `kafka-transactions.sh list` (with `extra` arguments) on the cluster: the ids starting
/// with `prefix` in an open state -> (state, producer id, coordinator).
fn tool_open_transactions(
    prefix: &str,
    extra: &[&str],
) -> BTreeMap<String, (String, String, String)> {
    let output = Command::new(repo_root().join("scripts/kafka-local"))
        .args(["transactions", "list"])
        .args(extra)
        .env("KAFKA_BROKERS", BROKERS.to_string())
        .env("KAFKA_LOCAL_PORT", first_port().to_string())
        .output()
        .expect("kafka-transactions.sh list");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "kafka-transactions.sh list: {text}"
    );
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|row| row.len() == 4 && row[0].starts_with(prefix))
        .filter(|row| row[3] == "Ongoing" || row[3].starts_with("Prepare"))
        .map(|row| {
            (
                row[0].to_string(),
                (row[3].to_string(), row[2].to_string(), row[1].to_string()),
            )
        })
        .collect()
}

/// Transactional ids coordinated by each of the three brokers, long open, one idle and
/// one young: the exporter's list of the cluster equals `kafka-transactions.sh list`
/// restricted to the open states and with its duration filter, coordinator by
/// coordinator.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_brokers_transaction_list_equals_kafka_transactions_list() {
    let _turn = exclusive().await;
    require_three_brokers();
    ensure_internal_topics().await;
    let prefix = unique("inventory");
    let topic = format!("{prefix}-t");
    create_replicated_topic(&topic, &[1, 2, 3]).await;
    let (held, _idle) = tokio::task::block_in_place(|| {
        let held: Vec<(String, Producer_)> = (1..=BROKERS)
            .map(|b| {
                let id = id_coordinated_by("__transaction_state", &format!("{prefix}-long"), b);
                let producer = pin(&topic, b - 1, &id, 0);
                (id, producer)
            })
            .collect();
        let idle = transactional_producer(&format!("{prefix}-idle"));
        idle.begin_transaction().unwrap();
        send(&idle, &topic, 0, 1);
        idle.commit_transaction(Duration::from_secs(30)).unwrap();
        (held, idle)
    });
    // Long enough that the young one stays younger while the tools run.
    let exporter = Exporter::start(
        &format!("^{topic}$"),
        "^$",
        &[
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTION_LIST_MIN_AGE",
                "8s",
            ),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTION_LIST_DETAIL",
                "1000",
            ),
        ],
    )
    .await;
    let shown = || async {
        let (status, body) = exporter.get("/api/v1/stuck").await;
        assert_eq!(status, 200);
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        json["transactions"][0]["oldest"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t["transactional_id"].as_str().unwrap().starts_with(&prefix))
            .map(|t| {
                (
                    t["transactional_id"].as_str().unwrap().to_string(),
                    (
                        t["state"].as_str().unwrap().to_string(),
                        t["producer_id"].to_string(),
                        t["coordinator"].to_string(),
                    ),
                )
            })
            .collect::<BTreeMap<_, _>>()
    };
    let deadline = Instant::now() + Duration::from_secs(40);
    while shown().await.len() < held.len() {
        assert!(
            Instant::now() < deadline,
            "the long ones never listed: {:?}",
            shown().await
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let young_id = format!("{prefix}-young");
    let (young, young_opened) = tokio::task::block_in_place(|| {
        let young = transactional_producer(&young_id);
        young.begin_transaction().unwrap();
        let opened = Instant::now();
        send(&young, &topic, 0, 1);
        (young, opened)
    });
    let before = shown().await;
    assert!(!before.contains_key(&young_id), "{before:?}");
    let (all, old) = tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            let all = scope.spawn(|| tool_open_transactions(&prefix, &[]));
            let old = tool_open_transactions(&prefix, &["--duration-filter", "8000"]);
            (all.join().unwrap(), old)
        })
    });
    // The young one is compared only while surely younger than the minimum age (the
    // tools' JVMs take seconds).
    let tools_done = young_opened.elapsed();
    let mut after = shown().await;
    let mut old = old;
    if tools_done < Duration::from_secs(8) {
        assert!(!old.contains_key(&young_id), "{old:?}");
    }
    if young_opened.elapsed() < Duration::from_secs(7) {
        assert!(!after.contains_key(&young_id), "{after:?}");
    }
    old.remove(&young_id);
    after.remove(&young_id);
    assert_eq!(before, old, "the exporter before the tool");
    assert_eq!(after, old, "the exporter after the tool");
    let coordinators: BTreeSet<&str> = old.values().map(|(_, _, c)| c.as_str()).collect();
    assert_eq!(coordinators, ["1", "2", "3"].into(), "{old:?}");
    assert_eq!(
        all.len(),
        held.len() + 1,
        "plus the young one, not the idle one: {all:?}"
    );
    assert!(all.contains_key(&young_id));
    let s = exporter.scrape().await;
    assert!(
        s.value(
            "kafka_cluster_open_transactions",
            &[("kafka_cluster", "test"), ("state", "Ongoing")]
        )
        .unwrap()
            >= held.len() as f64
    );
    tokio::task::block_in_place(|| {
        young.abort_transaction(Duration::from_secs(30)).unwrap();
        for (_, producer) in held {
            commit(producer);
        }
    });
    exporter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_brokers_transaction_coordinator_failover() {
    let _turn = exclusive().await;
    require_three_brokers();
    ensure_internal_topics().await;
    // The pinned partition is led by broker 1; its transaction is coordinated by 3.
    let topic = unique("failover-coordinator");
    create_replicated_topic(&topic, &[1]).await;
    let id = tokio::task::block_in_place(|| {
        id_coordinated_by("__transaction_state", "failover-coordinator-tx", 3)
    });
    let producer = tokio::task::block_in_place(|| pin(&topic, 0, &id, 2));
    let exporter = Exporter::start(&format!("^{topic}$"), "^$", &[]).await;
    let labels = partition_labels(&topic, "0");
    let coordinator_of = |report: &serde_json::Value| {
        stuck_transactions(report, &topic)
            .first()
            .map(|t| (t["coordinator"].clone(), t["coordinator_broker"].clone()))
    };
    let stuck = || async {
        let (status, body) = exporter.get("/api/v1/stuck").await;
        assert_eq!(status, 200);
        serde_json::from_str::<serde_json::Value>(&body).unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if coordinator_of(&stuck().await) == Some((serde_json::json!("open"), serde_json::json!(3)))
        {
            break;
        }
        assert!(Instant::now() < deadline, "coordinator 3 never named");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let watch = Watch::start(exporter.addr, vec![topic.clone()]);

    tokio::task::block_in_place(|| kafka_local(&["kill", "3"]));
    let killed = Instant::now();
    // What the stuck report says until another broker coordinates the transaction.
    let mut said: Vec<(f64, String)> = Vec::new();
    let moved_to = loop {
        let report = stuck().await;
        let (status, broker) = coordinator_of(&report).unwrap_or_default();
        let status = status.as_str().unwrap_or("absent").to_string();
        if said.last().map(|(_, s)| s) != Some(&status) {
            said.push((killed.elapsed().as_secs_f64(), status.clone()));
        }
        if status == "open" && broker != serde_json::json!(3) {
            break broker.as_i64().unwrap();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(90),
            "the transaction never reported open on a new coordinator: {said:?}"
        );
        // Still withheld the whole time: the transaction cannot end without a coordinator.
        let s = exporter.scrape().await;
        if let Some(gap) = s.value("kafka_partition_hw_minus_lso", &labels) {
            assert_eq!(gap, 3.0, "the partition stopped being withheld");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    eprintln!(
        "transaction coordinator failover: broker 3 killed; the stuck report said {said:?} \
         (seconds after the kill); broker {moved_to} coordinates it {:.1} s after the kill",
        killed.elapsed().as_secs_f64()
    );
    assert!(
        said.iter()
            .any(|(_, s)| s == "unavailable" || s == "loading"),
        "the outage was never reported: {said:?}"
    );
    assert!(
        !said
            .iter()
            .any(|(_, s)| s == "not_found" || s == "disagrees"),
        "a dead coordinator made the transaction look orphaned: {said:?}"
    );
    // Forensics named it on broker 3, then on its new coordinator: one move.
    exporter
        .wait_for(
            "the coordinator move counted",
            Duration::from_secs(5),
            |s| {
                (s.value(
                    "kafka_transaction_coordinator_moves_total",
                    &[("transactional_id", id.as_str())],
                ) == Some(1.0))
                .then_some(())
            },
        )
        .await;
    let s = exporter.scrape().await;
    assert_eq!(s.value("kafka_partition_hw_minus_lso", &labels), Some(3.0));
    assert_eq!(
        s.value("kafka_partition_hanging_transactions", &labels),
        Some(0.0)
    );
    tokio::task::block_in_place(|| commit(producer));
    exporter
        .wait_for("HW = LSO after the commit", Duration::from_secs(30), |s| {
            (s.value("kafka_partition_hw_minus_lso", &labels)? == 0.0
                && s.value("kafka_partition_open_transactions", &labels)? == 0.0)
                .then_some(())
        })
        .await;
    let scrapes = watch.finish().await;
    assert_never_wrong(&scrapes, &topic, 1, (3, 4), (0, 4));
    tokio::task::block_in_place(|| kafka_local(&["start", "3"]));
    exporter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_brokers_group_coordinator_failover() {
    let _turn = exclusive().await;
    require_three_brokers();
    ensure_internal_topics().await;
    // The topic is led by broker 1; the group is coordinated by broker 2.
    let topic = unique("failover-group");
    create_replicated_topic(&topic, &[1]).await;
    tokio::task::block_in_place(|| send(&plain_producer(), &topic, 0, 5));
    let group = tokio::task::block_in_place(|| {
        let g = id_coordinated_by("__consumer_offsets", "failover-group", 2);
        consume_all_and_commit(&g, &topic, 1, "read_committed");
        g
    });
    let exporter = Exporter::start(&format!("^{topic}$"), &format!("^{group}$"), &[]).await;
    let labels = group_labels(&group, &topic, "0");
    exporter
        .wait_for("the committed offset", Duration::from_secs(30), |s| {
            (s.value("kafka_consumergroup_committed_offset", &labels)? == 5.0).then_some(())
        })
        .await;
    let watch = Watch::start(exporter.addr, vec![group.clone()]);
    let partition = internal_partition(&group);
    tokio::task::block_in_place(|| kafka_local(&["kill", "2"]));
    let killed = Instant::now();
    let (new_coordinator, elected) =
        tokio::task::block_in_place(|| wait_new_leader("__consumer_offsets", partition, 2));
    // The new coordinator serves the offsets once it has loaded its partition of
    // __consumer_offsets: when a client of its own first reads them.
    let serving = tokio::task::block_in_place(|| {
        let client: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap())
            .set("group.id", &group)
            .create()
            .expect("client");
        let mut partitions = rdkafka::TopicPartitionList::new();
        partitions.add_partition(&topic, 0);
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let committed = client
                .committed_offsets(partitions.clone(), Duration::from_secs(1))
                .ok()
                .and_then(|l| l.find_partition(&topic, 0).map(|p| p.offset()));
            if committed == Some(rdkafka::Offset::Offset(5)) {
                return Instant::now();
            }
            assert!(
                Instant::now() < deadline,
                "the new coordinator never served"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let back = exporter
        .wait_for(
            "the committed offset from the new coordinator",
            Duration::from_secs(30),
            |s| {
                (s.value("kafka_consumergroup_committed_offset", &labels)? == 5.0)
                    .then(Instant::now)
            },
        )
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let scrapes = watch.finish().await;
    for (_, s) in &scrapes {
        if let Some(v) = s.value("kafka_consumergroup_committed_offset", &labels) {
            assert_eq!(v, 5.0, "a wrong committed offset");
        }
        if let Some(v) = s.value("kafka_consumergroup_hw_lag", &labels) {
            assert_eq!(v, 0.0, "a wrong lag");
        }
    }
    let present = |s: &Scrape| {
        s.value("kafka_consumergroup_committed_offset", &labels)
            .is_some()
    };
    let since = |from: Instant| -> Vec<(Instant, Scrape)> {
        scrapes
            .iter()
            .filter(|(at, _)| *at >= from)
            .map(|(at, s)| (*at, Scrape::parse(&s.text)))
            .collect()
    };
    let absent_in_all = absent_cycles(&scrapes, present);
    let absent_after_election = absent_cycles(&since(elected), present);
    let absent_after_serving = absent_cycles(&since(serving), present);
    eprintln!(
        "group coordinator failover: broker 2 killed, broker {new_coordinator} leads the group's \
         offsets partition after {:.1} s and serves them {:.1} s after that; the exporter has \
         them back {:.1} s after the election, {:.1} s after the coordinator serves; absent \
         cycles: {absent_in_all} in all, {absent_after_election} after the election, \
         {absent_after_serving} once the coordinator serves",
        elected.duration_since(killed).as_secs_f64(),
        serving.saturating_duration_since(elected).as_secs_f64(),
        back.saturating_duration_since(elected).as_secs_f64(),
        back.saturating_duration_since(serving).as_secs_f64(),
    );
    assert!(
        absent_after_serving <= 1,
        "{absent_after_serving} absent cycles once the new coordinator served"
    );
    tokio::task::block_in_place(|| kafka_local(&["start", "2"]));
    exporter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_brokers_rolling_restart_under_sampling() {
    let _turn = exclusive().await;
    require_three_brokers();
    ensure_internal_topics().await;
    let topic = unique("rolling");
    create_replicated_topic(&topic, &[1, 2, 3]).await;
    let group = tokio::task::block_in_place(|| {
        for p in 0..3 {
            send(&plain_producer(), &topic, p, 4);
        }
        let g = unique("rolling-group");
        consume_all_and_commit(&g, &topic, 3, "read_committed");
        g
    });
    let exporter = Exporter::start(&format!("^{topic}$"), &format!("^{group}$"), &[]).await;
    exporter
        .wait_for("every partition sampled", Duration::from_secs(30), |s| {
            (s.series(
                "kafka_consumergroup_committed_offset",
                &[("topic", topic.as_str())],
            )
            .count()
                == 3)
                .then_some(())
        })
        .await;
    let watch = Watch::start(exporter.addr, vec![topic.clone()]);
    let mut recoveries = Vec::new();
    for broker in 1..=BROKERS {
        let b = broker.to_string();
        tokio::task::block_in_place(|| kafka_local(&["restart", &b]));
        let returned = Instant::now();
        // Back within 2 cycles of its return: every partition's offsets and the group.
        let back = exporter
            .wait_for(
                "every partition and the group back",
                Duration::from_secs(30),
                |s| {
                    let all = (0..3).all(|p| {
                        let p = p.to_string();
                        s.value(
                            "kafka_partition_high_watermark",
                            &partition_labels(&topic, &p),
                        ) == Some(4.0)
                            && s.value(
                                "kafka_consumergroup_committed_offset",
                                &group_labels(&group, &topic, &p),
                            ) == Some(4.0)
                    });
                    all.then(Instant::now)
                },
            )
            .await;
        recoveries.push((broker, back.saturating_duration_since(returned)));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let scrapes = watch.finish().await;
    assert_never_wrong(&scrapes, &topic, 3, (4, 4), (4, 4));
    let absent: Vec<usize> = (0..3)
        .map(|p| {
            let p = p.to_string();
            absent_cycles(&scrapes, |s| {
                s.value(
                    "kafka_partition_high_watermark",
                    &partition_labels(&topic, &p),
                )
                .is_some()
            })
        })
        .collect();
    let absent_group = absent_cycles(&scrapes, |s| {
        (0..3).all(|p| {
            s.value(
                "kafka_consumergroup_committed_offset",
                &group_labels(&group, &topic, &p.to_string()),
            )
            .is_some()
        })
    });
    let cycles = scrapes
        .iter()
        .filter_map(|(_, s)| cycle_of(s))
        .collect::<BTreeSet<_>>()
        .len();
    eprintln!(
        "rolling restart: {cycles} cycles; absent cycles per partition {absent:?}, of the \
         group's offsets {absent_group}; back after each broker's return: {recoveries:?}"
    );
    for (broker, took) in &recoveries {
        assert!(
            *took <= Duration::from_secs(2) + Duration::from_millis(500),
            "broker {broker}'s partitions back {took:?} after its return"
        );
    }
    assert_cycles_within_deadline(&exporter.scrape().await);
    exporter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_brokers_blackholed_broker_fails_only_its_partitions() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("kafka_lso_exporter=warn")
        .try_init();
    let _turn = exclusive().await;
    require_three_brokers();
    let topic = unique("blackhole");
    create_replicated_topic(&topic, &[1, 2, 3]).await;
    tokio::task::block_in_place(|| {
        for p in 0..3 {
            send(&plain_producer(), &topic, p, 3);
        }
    });
    // Every broker advertises its PROXIED listener on port + 5, forwarded by a proxy of
    // this test to port + 4; broker 3's proxy blackholes.
    let mut proxies = Vec::new();
    for b in 1..=BROKERS {
        let base = first_port() + 10 * (b as u16 - 1);
        let listen: SocketAddr = format!("127.0.0.1:{}", base + 5).parse().unwrap();
        let upstream: SocketAddr = format!("127.0.0.1:{}", base + 4).parse().unwrap();
        let proxy = Proxy::start_beside(listen, upstream).await;
        proxy.set_mode(Mode::Forward);
        proxies.push(proxy);
    }
    let proxied = (1..=BROKERS)
        .map(|b| format!("127.0.0.1:{}", first_port() + 10 * (b as u16 - 1) + 5))
        .collect::<Vec<_>>()
        .join(",");
    let exporter = Exporter::start(
        &format!("^{topic}$"),
        "^$",
        &[(
            "KAFKA_LSO_EXPORTER_CLUSTERS__0__BOOTSTRAP_SERVERS",
            &proxied,
        )],
    )
    .await;
    const PARTITIONS: [&str; 3] = ["0", "1", "2"];
    let hw = |p: usize| partition_labels(&topic, PARTITIONS[p]);
    exporter
        .wait_for("every partition sampled", Duration::from_secs(30), |s| {
            (0..3)
                .all(|p| s.value("kafka_partition_high_watermark", &hw(p)) == Some(3.0))
                .then_some(())
        })
        .await;
    proxies[2].set_mode(Mode::Blackhole);
    proxies[2].cut_all();
    let blackholed = Instant::now();
    // New records on the partitions of the healthy brokers: fresh values must follow.
    tokio::task::block_in_place(|| {
        send(&plain_producer(), &topic, 0, 2);
        send(&plain_producer(), &topic, 1, 2);
    });
    let fresh = exporter
        .wait_for(
            "the healthy brokers' partitions fresh while broker 3 is blackholed",
            Duration::from_secs(20),
            |s| {
                (s.value("kafka_partition_high_watermark", &hw(0)) == Some(5.0)
                    && s.value("kafka_partition_high_watermark", &hw(1)) == Some(5.0))
                .then(Instant::now)
            },
        )
        .await;
    // And they stay fresh cycle after cycle.
    let watch = Watch::start(exporter.addr, vec![topic.clone()]);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let scrapes = watch.finish().await;
    let absent: Vec<usize> = (0..2)
        .map(|p| {
            absent_cycles(&scrapes, |s| {
                s.value("kafka_partition_high_watermark", &hw(p)).is_some()
            })
        })
        .collect();
    eprintln!(
        "blackholed broker 3: partitions of brokers 1 and 2 fresh {:.1} s after, absent cycles \
         since {absent:?}",
        fresh.duration_since(blackholed).as_secs_f64()
    );
    assert_eq!(absent, vec![0, 0], "healthy partitions went absent");
    for (_, s) in &scrapes {
        if let Some(v) = s.value("kafka_partition_high_watermark", &hw(2)) {
            assert_eq!(v, 3.0, "a wrong HW for the blackholed broker's partition");
        }
    }
    assert_cycles_within_deadline(&exporter.scrape().await);
    exporter.stop().await;
    drop(proxies);
}

/// The lowest broker id hangs (connections accepted, nothing answered), then answers
/// slowly (over a second per request), while it leads a partition, coordinates a group
/// and a transaction: every value that lives on the two other brokers — committed
/// offsets, lags, time lags, member counts, the transactions named — stays present and
/// right in every cycle.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_brokers_hung_lowest_broker_holds_up_only_its_own() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("kafka_lso_exporter=warn")
        .try_init();
    let _turn = exclusive().await;
    require_three_brokers();
    ensure_internal_topics().await;
    let topic = unique("hung");
    create_replicated_topic(&topic, &[1, 2, 3]).await;
    // Per broker b: a group it coordinates, committed at 5 on every partition, and a
    // transaction it coordinates, open on the partition b leads. Every partition: 5
    // records, 3 more, the open transaction's record at 8, 2 more: HW 11, LSO 8; every
    // group's lag 6 against the HW, 3 against the LSO.
    let (groups, transactions, held) = tokio::task::block_in_place(|| {
        for p in 0..3 {
            send(&plain_producer(), &topic, p, 5);
        }
        let groups: Vec<String> = (1..=BROKERS)
            .map(|b| {
                let g = id_coordinated_by("__consumer_offsets", "hung-group", b);
                assert_eq!(
                    consume_all_and_commit(&g, &topic, 3, "read_committed"),
                    [5; 3]
                );
                g
            })
            .collect();
        for p in 0..3 {
            send(&plain_producer(), &topic, p, 3);
        }
        let transactions: Vec<String> = (1..=BROKERS)
            .map(|b| id_coordinated_by("__transaction_state", "hung-tx", b))
            .collect();
        let held: Vec<Producer_> = transactions
            .iter()
            .enumerate()
            .map(|(p, id)| pin(&topic, p as i32, id, 2))
            .collect();
        (groups, transactions, held)
    });
    let mut proxies = Vec::new();
    for b in 1..=BROKERS {
        let base = first_port() + 10 * (b as u16 - 1);
        let listen: SocketAddr = format!("127.0.0.1:{}", base + 5).parse().unwrap();
        let upstream: SocketAddr = format!("127.0.0.1:{}", base + 4).parse().unwrap();
        let proxy = Proxy::start_beside(listen, upstream).await;
        proxy.set_mode(Mode::Forward);
        proxies.push(proxy);
    }
    let proxied = (1..=BROKERS)
        .map(|b| format!("127.0.0.1:{}", first_port() + 10 * (b as u16 - 1) + 5))
        .collect::<Vec<_>>()
        .join(",");
    let group_regex = groups
        .iter()
        .map(|g| format!("^{g}$"))
        .collect::<Vec<_>>()
        .join("|");
    let exporter = Exporter::start(
        &format!("^{topic}$"),
        &group_regex,
        &[(
            "KAFKA_LSO_EXPORTER_CLUSTERS__0__BOOTSTRAP_SERVERS",
            &proxied,
        )],
    )
    .await;

    // What lives on brokers 2 and 3: their groups on the partitions they lead (0 is
    // broker 1's), their transactions.
    let healthy: Vec<(&str, i32)> = [(2, 1), (2, 2), (3, 1), (3, 2)]
        .iter()
        .map(|&(b, p)| (groups[b - 1].as_str(), p))
        .collect();
    let all_present = |s: &Scrape| -> Result<(), String> {
        for &(g, p) in &healthy {
            let p = p.to_string();
            let labels = group_labels(g, &topic, &p);
            for (name, expected) in [
                ("kafka_consumergroup_committed_offset", Some(5.0)),
                ("kafka_consumergroup_hw_lag", Some(6.0)),
                ("kafka_consumergroup_lso_lag", Some(3.0)),
                ("kafka_consumergroup_hw_lag_seconds", None),
                ("kafka_consumergroup_lso_lag_seconds", None),
            ] {
                match (s.value(name, &labels), expected) {
                    (None, _) => return Err(format!("{name} of {g} on {p} absent")),
                    (Some(v), Some(e)) if v != e => {
                        panic!("{name} of {g} on {p}: {v}, expected {e}")
                    }
                    _ => {}
                }
            }
        }
        for g in &groups[1..] {
            if s.value(
                "kafka_consumergroup_members",
                &[("kafka_cluster", "test"), ("group", g.as_str())],
            )
            .is_none()
            {
                return Err(format!("members of {g} absent"));
            }
        }
        for (p, id) in transactions.iter().enumerate().skip(1) {
            let named = s
                .series("kafka_transaction_open_info", &[("topic", topic.as_str())])
                .any(|(labels, _)| {
                    labels.get("transactional_id").map(String::as_str) == Some(id.as_str())
                        && labels.get("partition").map(String::as_str)
                            == Some(p.to_string().as_str())
                });
            if !named {
                return Err(format!("transaction {id} on partition {p} not named"));
            }
        }
        Ok(())
    };
    exporter
        .wait_for(
            "every value of brokers 2 and 3, and broker 1's transaction named",
            Duration::from_secs(60),
            |s| {
                let theirs = s
                    .series("kafka_transaction_open_info", &[("topic", topic.as_str())])
                    .any(|(labels, _)| {
                        labels.get("transactional_id").map(String::as_str)
                            == Some(transactions[0].as_str())
                    });
                (all_present(s).is_ok() && theirs).then_some(())
            },
        )
        .await;

    let mut keep = vec![topic.clone()];
    keep.extend(groups.iter().cloned());
    for (fault, mode) in [
        ("hangs", Mode::Blackhole),
        (
            "answers in over a second",
            Mode::Delay(Duration::from_millis(600)),
        ),
    ] {
        let watch = Watch::start(exporter.addr, keep.clone());
        proxies[0].set_mode(mode);
        proxies[0].cut_all();
        tokio::time::sleep(Duration::from_secs(8)).await;
        let scrapes = watch.finish().await;
        let cycles: BTreeSet<u64> = scrapes.iter().filter_map(|(_, s)| cycle_of(s)).collect();
        let absent = absent_cycles(&scrapes, |s| all_present(s).is_ok());
        let first_missing = scrapes
            .iter()
            .find_map(|(_, s)| all_present(s).err())
            .unwrap_or_default();
        eprintln!(
            "broker 1 {fault}: {} cycles watched, {absent} without every value of brokers 2 \
             and 3 {first_missing}",
            cycles.len()
        );
        assert!(cycles.len() >= 4, "only {} cycles in 8 s", cycles.len());
        assert_eq!(
            absent, 0,
            "broker 1 {fault}: values of brokers 2 and 3 went absent ({first_missing})"
        );
        assert_cycles_within_deadline(&exporter.scrape().await);
        if mode == Mode::Blackhole {
            // An exporter that starts while the broker hangs: everything of the others
            // from its first cycles on, and in every cycle after.
            // On 2 s cycles: its first cycles also open its connections to brokers 2
            // and 3, which on a loaded machine (scripts/test's four lanes on two cores)
            // can run past a 1 s deadline while broker 1 holds every request to it.
            let fresh = Exporter::start(
                &format!("^{topic}$"),
                &group_regex,
                &[
                    (
                        "KAFKA_LSO_EXPORTER_CLUSTERS__0__BOOTSTRAP_SERVERS",
                        &proxied,
                    ),
                    ("KAFKA_LSO_EXPORTER_INTERVAL", "2s"),
                ],
            )
            .await;
            let started = Instant::now();
            fresh
                .wait_for(
                    "every value of brokers 2 and 3 from an exporter started while broker 1 hangs",
                    Duration::from_secs(15),
                    |s| all_present(s).ok(),
                )
                .await;
            let ready = started.elapsed();
            let watch = Watch::start(fresh.addr, keep.clone());
            tokio::time::sleep(Duration::from_secs(5)).await;
            let scrapes = watch.finish().await;
            let absent = absent_cycles(&scrapes, |s| all_present(s).is_ok());
            eprintln!(
                "exporter started while broker 1 hangs: every value of brokers 2 and 3 after \
                 {:.1} s, then {absent} absent cycles",
                ready.as_secs_f64()
            );
            assert_eq!(
                absent, 0,
                "values went absent on the exporter started during the hang"
            );
            fresh.stop().await;
        }
        proxies[0].set_mode(Mode::Forward);
        proxies[0].cut_all();
    }
    exporter.stop().await;
    drop(proxies);
    tokio::task::block_in_place(|| held.into_iter().for_each(commit));
}

/// Which of `replicas` serve `up` of `cluster` in one round of scrapes (a replica that
/// does not answer within a second serves nothing).
async fn serving_up(replicas: &[&Binary], cluster: &str) -> Vec<usize> {
    let mut serving = Vec::new();
    for (i, replica) in replicas.iter().enumerate() {
        let up = replica
            .scrape_within(Duration::from_secs(1))
            .await
            .and_then(|s| s.value("kafka_lso_exporter_up", &[("kafka_cluster", cluster)]));
        if up == Some(1.0) {
            serving.push(i);
        }
    }
    serving
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_brokers_replicas_survive_their_coordination_groups_coordinator_failing_over() {
    let _turn = exclusive().await;
    require_three_brokers();
    ensure_internal_topics().await;
    let topic = unique("ha-failover");
    create_replicated_topic(&topic, &[1]).await;
    // The coordination group is coordinated by broker 2.
    let group =
        tokio::task::block_in_place(|| id_coordinated_by("__consumer_offsets", "ha-failover", 2));
    let mut env = cluster_env(0, "c", &bootstrap(), &topic, &[]);
    env.extend([
        ("KAFKA_LSO_EXPORTER_HA__GROUP".to_string(), group.clone()),
        (
            "KAFKA_LSO_EXPORTER_HA__SESSION_TIMEOUT".to_string(),
            "6s".to_string(),
        ),
        (
            "KAFKA_LSO_EXPORTER_HA__HEARTBEAT_INTERVAL".to_string(),
            "1s".to_string(),
        ),
    ]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let config = repo_root().join("tests/empty.toml");
    let args = ["--config", config.to_str().unwrap(), "--interval", "1s"];
    let (r1, r2) = (Binary::start(&args, &env), Binary::start(&args, &env));
    let replicas = [&r1, &r2];
    let started = Instant::now();
    while serving_up(&replicas, "c").await.len() != 1 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no single replica serves the cluster:\n{}\n{}",
            r1.log(),
            r2.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    tokio::task::block_in_place(|| kafka_local(&["kill", "2"]));
    let killed = Instant::now();
    let (mut uncovered, mut last, mut covered_again) = (Duration::ZERO, Instant::now(), None);
    while killed.elapsed() < Duration::from_secs(45) {
        let serving = serving_up(&replicas, "c").await;
        assert!(
            serving.len() <= 1,
            "both replicas serve the cluster during the coordinator's failover"
        );
        let now = Instant::now();
        if serving.is_empty() {
            uncovered += now - last;
            covered_again = None;
        } else if covered_again.is_none() {
            covered_again = Some(now);
        }
        last = now;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(r1.alive() && r2.alive(), "a replica exited");
    let covered_again = covered_again.unwrap_or_else(|| {
        panic!(
            "the cluster is not served at the end of the failover:\n{}\n{}",
            r1.log(),
            r2.log()
        )
    });
    eprintln!(
        "coordination group's coordinator (broker 2) killed: {:.1} s without a replica serving \
         the cluster in all; served by one replica again from {:.1} s after the kill on",
        uncovered.as_secs_f64(),
        covered_again.duration_since(killed).as_secs_f64()
    );
    tokio::task::block_in_place(|| kafka_local(&["start", "2"]));
    r1.stop();
    r2.stop();
}
