//! Two rulers on one topic, against a real broker and real consumers: which isolation level
//! each group reads at, learnt from evidence (a committed offset that advanced past the
//! LSO proves read_uncommitted; one standing at a pinned LSO for 60 s with records above
//! infers read_committed), a group whose members read at both defaults (the Java client's
//! read_uncommitted, librdkafka's read_committed) named `mixed`, the records of aborted
//! transactions a read_uncommitted group read (counted exactly, once, never for a
//! read_committed group nor from a bad commit), and `blocked` never for a group known to
//! read uncommitted (one without live members stays blocked until the transaction ends).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::java::JavaMember;
use common::members::RdkafkaMember;
use common::*;
use rdkafka::admin::AdminOptions;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

const CYCLE: Duration = Duration::from_secs(1);
/// How long the contract's read_committed inference waits at a pinned LSO.
const INFERENCE: Duration = Duration::from_secs(60);
/// The key of every record written inside a transaction under test, so that a consumer
/// can count what it delivered of it.
const TX_KEY: &str = "two-rulers-tx";

// -- producers ------------------------------------------------------------------------

/// A transactional producer whose transaction may stay open for five minutes (the
/// client's default, 60 s, would let the coordinator abort it during the read_committed
/// inference).
fn long_transaction(transactional_id: &str) -> Producer_ {
    let producer: Producer_ = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("transactional.id", transactional_id)
        .set("transaction.timeout.ms", "300000")
        .set("linger.ms", "0")
        .create()
        .expect("transactional producer");
    producer
        .init_transactions(Duration::from_secs(30))
        .expect("init_transactions");
    producer
}

/// Sends `count` records keyed `key` to one partition and waits for them.
fn send_keyed(producer: &Producer_, topic: &str, partition: i32, count: usize, key: &str) {
    for i in 0..count {
        let payload = format!("{key}-{partition}-{i}");
        producer
            .send(
                BaseRecord::to(topic)
                    .partition(partition)
                    .key(key)
                    .payload(&payload),
            )
            .unwrap_or_else(|(e, _)| panic!("send to {topic}/{partition}: {e}"));
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

/// Sends `count` plain records to one partition, one every 1.2 s (more than a cycle): a
/// consumer reading them advances in several cycles.
fn drip(producer: &Producer_, topic: &str, partition: i32, count: usize) {
    for _ in 0..count {
        std::thread::sleep(Duration::from_millis(1200));
        send(producer, topic, partition, 1);
    }
}

/// The open transaction's producer id and epoch on a partition, from Kafka's own
/// `kafka-transactions.sh describe-producers`.
fn open_producer(topic: &str, partition: i32) -> (i64, i64) {
    let producers = describe_producers(topic, partition);
    let open: Vec<_> = producers
        .iter()
        .filter(|p| p.get("CurrentTransactionStartOffset").map(String::as_str) != Some("-1"))
        .collect();
    assert_eq!(
        open.len(),
        1,
        "describe-producers {topic}/{partition}: {producers:?}"
    );
    (
        open[0]["ProducerId"].parse().unwrap(),
        open[0]["ProducerEpoch"].parse().unwrap(),
    )
}

/// A plain producer writing one record to every partition of `topic` every 300 ms until
/// dropped: records keep arriving above a pinned LSO.
struct Trickle {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<usize>>,
}

impl Trickle {
    fn start(topic: &str, partitions: i32) -> Trickle {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let topic = topic.to_string();
        let thread = std::thread::spawn(move || {
            let producer = plain_producer();
            let mut sent = 0;
            while !flag.load(Ordering::Relaxed) {
                for p in 0..partitions {
                    send_keyed(&producer, &topic, p, 1, "trickle");
                    sent += 1;
                }
                std::thread::sleep(Duration::from_millis(300));
            }
            sent
        });
        Trickle {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Trickle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

// -- a consumer that counts what it delivered ------------------------------------------

/// One record a [`Reader`] delivered to its application.
#[derive(Clone, Debug)]
struct Delivered {
    partition: i32,
    offset: i64,
    key: String,
}

#[derive(Default)]
struct ReaderState {
    delivered: Vec<Delivered>,
    errors: Vec<String>,
}

enum Command {
    Pause(bool),
    Commit(Vec<(i32, i64)>, mpsc::Sender<Result<(), String>>),
    Seek(i32, i64, mpsc::Sender<Result<(), String>>),
}

/// A librdkafka member of a classic group, subscribed to one topic and polling in a thread
/// of its own, at a given isolation level. It commits each record it delivers (the offset
/// after it, synchronously), one every `pace`, and remembers every delivery, so that a
/// test knows exactly what the application saw. Commands commit by hand, seek, or pause
/// (librdkafka's own pause: it stops fetching, and what it had fetched is dropped).
struct Reader {
    topic: String,
    state: Arc<Mutex<ReaderState>>,
    commands: mpsc::Sender<Command>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reader {
    fn join(
        topic: &str,
        group: &str,
        client_id: &str,
        isolation: &str,
        commit_each: bool,
        pace: Duration,
    ) -> Reader {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap())
            .set("group.id", group)
            .set("group.protocol", "classic")
            .set("client.id", client_id)
            .set("isolation.level", isolation)
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .create()
            .expect("consumer");
        consumer.subscribe(&[topic]).expect("subscribe");
        let state = Arc::new(Mutex::new(ReaderState::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (commands, received) = mpsc::channel::<Command>();
        let (shared, flag, name) = (state.clone(), stop.clone(), topic.to_string());
        let thread = std::thread::spawn(move || {
            let mut paused = false;
            while !flag.load(Ordering::Relaxed) {
                while let Ok(command) = received.try_recv() {
                    match command {
                        Command::Pause(pause) => {
                            let assignment = consumer.assignment().expect("assignment");
                            if pause {
                                consumer.pause(&assignment).expect("pause");
                            } else {
                                consumer.resume(&assignment).expect("resume");
                            }
                            paused = pause;
                        }
                        Command::Commit(offsets, done) => {
                            let mut list = TopicPartitionList::new();
                            for (p, o) in offsets {
                                list.add_partition_offset(&name, p, Offset::Offset(o))
                                    .unwrap();
                            }
                            let result = consumer
                                .commit(&list, CommitMode::Sync)
                                .map_err(|e| e.to_string());
                            let _ = done.send(result);
                        }
                        Command::Seek(p, o, done) => {
                            let result = consumer
                                .seek(&name, p, Offset::Offset(o), Duration::from_secs(10))
                                .map_err(|e| e.to_string());
                            let _ = done.send(result);
                        }
                    }
                }
                if paused {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                match consumer.poll(Duration::from_millis(100)) {
                    Some(Ok(message)) => {
                        let key = message
                            .key()
                            .map(|k| String::from_utf8_lossy(k).to_string())
                            .unwrap_or_default();
                        shared.lock().unwrap().delivered.push(Delivered {
                            partition: message.partition(),
                            offset: message.offset(),
                            key,
                        });
                        if commit_each {
                            if let Err(e) = consumer.commit_message(&message, CommitMode::Sync) {
                                shared.lock().unwrap().errors.push(format!("commit: {e}"));
                            }
                        }
                        drop(message);
                        std::thread::sleep(pace);
                    }
                    Some(Err(e)) => shared.lock().unwrap().errors.push(e.to_string()),
                    None => {}
                }
            }
            consumer.unsubscribe();
        });
        Reader {
            topic: topic.to_string(),
            state,
            commands,
            stop,
            thread: Some(thread),
        }
    }

    fn delivered(&self) -> Vec<Delivered> {
        self.state.lock().unwrap().delivered.clone()
    }

    /// Every delivery of a record keyed `key`: (partition, offset), repeats included.
    fn delivered_keyed(&self, key: &str) -> Vec<(i32, i64)> {
        self.delivered()
            .into_iter()
            .filter(|d| d.key == key)
            .map(|d| (d.partition, d.offset))
            .collect()
    }

    /// Waits until it has delivered `count` records in all, or fails the test.
    fn wait_delivered(&self, count: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let n = self.delivered().len();
            if n >= count {
                assert_eq!(
                    n, count,
                    "{}: delivered more records than written",
                    self.topic
                );
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{}: delivered {n} records of {count} in {timeout:?}; errors: {:?}",
                self.topic,
                self.state.lock().unwrap().errors
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn pause(&self, paused: bool) {
        self.commands.send(Command::Pause(paused)).unwrap();
        // The command is served within one poll (100 ms).
        std::thread::sleep(Duration::from_millis(500));
    }

    fn commit(&self, offsets: &[(i32, i64)]) {
        let (done, result) = mpsc::channel();
        self.commands
            .send(Command::Commit(offsets.to_vec(), done))
            .unwrap();
        result
            .recv_timeout(Duration::from_secs(30))
            .expect("commit served")
            .unwrap_or_else(|e| panic!("commit {offsets:?}: {e}"));
    }

    fn seek(&self, partition: i32, offset: i64) {
        let (done, result) = mpsc::channel();
        self.commands
            .send(Command::Seek(partition, offset, done))
            .unwrap();
        result
            .recv_timeout(Duration::from_secs(30))
            .expect("seek served")
            .unwrap_or_else(|e| panic!("seek {partition} to {offset}: {e}"));
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

// -- what the exporter says -------------------------------------------------------------

async fn stuck_json(exporter: &Exporter) -> Value {
    let (status, body) = exporter.get("/api/v1/stuck").await;
    assert_eq!(status, 200, "/api/v1/stuck answered {status}: {body}");
    serde_json::from_str(&body).expect("/api/v1/stuck is JSON")
}

/// The group's entry in the JSON `isolation` array.
fn isolation_entry<'a>(json: &'a Value, group: &str) -> Option<&'a Value> {
    json["isolation"]
        .as_array()?
        .iter()
        .find(|e| e["group"] == group && e["cluster"] == "test")
}

/// The group's isolation level on `/metrics`: the label of its one
/// `kafka_consumergroup_isolation_level` series at 1.
fn isolation_metric(s: &Scrape, group: &str) -> Option<String> {
    let on: Vec<String> = s
        .series(
            "kafka_consumergroup_isolation_level",
            &[("kafka_cluster", "test"), ("group", group)],
        )
        .filter(|(_, v)| *v == 1.0)
        .map(|(l, _)| l["isolation_level"].clone())
        .collect();
    assert!(
        on.len() <= 1,
        "{group}: more than one isolation at 1: {on:?}"
    );
    on.into_iter().next()
}

/// Sum of a per-topic counter of the group over `topic`; `None` when it has no series.
fn group_topic_sum(s: &Scrape, name: &str, group: &str, topic: &str) -> Option<f64> {
    let values: Vec<f64> = s
        .series(
            name,
            &[
                ("kafka_cluster", "test"),
                ("group", group),
                ("topic", topic),
            ],
        )
        .map(|(_, v)| v)
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

fn aborted_records(s: &Scrape, group: &str, topic: &str) -> Option<f64> {
    group_topic_sum(
        s,
        "kafka_consumergroup_aborted_records_read_total",
        group,
        topic,
    )
}

fn aborted_transactions(s: &Scrape, group: &str, topic: &str) -> Option<f64> {
    group_topic_sum(
        s,
        "kafka_consumergroup_aborted_transactions_read_total",
        group,
        topic,
    )
}

fn committed(s: &Scrape, group: &str, topic: &str, partition: i32) -> Option<f64> {
    let partition = partition.to_string();
    s.value(
        "kafka_consumergroup_committed_offset",
        &group_labels(group, topic, &partition),
    )
}

fn blocked_status(s: &Scrape, group: &str) -> Option<f64> {
    s.value(
        "kafka_consumergroup_status",
        &[
            ("kafka_cluster", "test"),
            ("group", group),
            ("status", "blocked"),
        ],
    )
}

/// The groups the JSON lists as blocked on one partition (empty when it is not stuck).
fn blocked_groups(json: &Value, topic: &str, partition: i64) -> Vec<String> {
    json["partitions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["topic"] == topic && p["partition"] == partition)
        .flat_map(|p| p["blocked_groups"].as_array().cloned().unwrap_or_default())
        .filter_map(|g| g.as_str().map(str::to_string))
        .collect()
}

/// Per member's client id: the partitions it owns, from `/metrics`.
fn owners(s: &Scrape, group: &str) -> BTreeMap<String, f64> {
    let labels = [("kafka_cluster", "test"), ("group", group)];
    let ids: BTreeMap<String, String> = s
        .series("kafka_consumergroup_member_info", &labels)
        .map(|(l, _)| (l["member_id"].clone(), l["client_id"].clone()))
        .collect();
    s.series("kafka_consumergroup_member_assigned_partitions", &labels)
        .filter_map(|(l, v)| Some((ids.get(&l["member_id"])?.clone(), v)))
        .collect()
}

/// Polls the JSON until `check` returns Some, or fails the test with the last JSON.
async fn wait_json<T>(
    exporter: &Exporter,
    what: &str,
    timeout: Duration,
    check: impl Fn(&Value) -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        let json = stuck_json(exporter).await;
        if let Some(value) = check(&json) {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}; last /api/v1/stuck:\n{json:#}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The text of `/` with tags removed and whitespace collapsed, from the heading that
/// starts with `heading` to the next heading.
fn page_section(page: &str, heading: &str) -> String {
    let start = page
        .find(heading)
        .unwrap_or_else(|| panic!("no section {heading:?} on /:\n{page}"));
    let rest = &page[start..];
    let end = rest[1..].find("<h2").map_or(rest.len(), |i| i + 1);
    let mut text = String::new();
    let mut in_tag = false;
    for c in rest[..end].chars() {
        match c {
            '<' => {
                in_tag = true;
                text.push(' ');
            }
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The whole numbers in `text` (so that "10–38" or "10..38" both give 10 and 38).
fn numbers(text: &str) -> BTreeSet<i64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

// -- the tests --------------------------------------------------------------------------

/// A Java consumer (isolation.level left at the Java default, read_uncommitted: see
/// tests/java/GroupMember.java, which sets none) and a librdkafka consumer (default
/// read_committed) in one classic group, each owning pinned partitions of a topic whose
/// every partition an open transaction holds while plain records keep arriving: the Java
/// member reads through (proof), the librdkafka member stands at the LSO (inferred after
/// 60 s), and the group is `mixed`, each member named on its side.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_whose_members_read_with_both_defaults_is_mixed() {
    require_kafka();
    let started = Instant::now();
    let topic = unique("tr-mixed");
    let group = unique("tr-mixed-group");
    let transactional_id = unique("tr-mixed-tx");
    let partitions = 4;
    create_topic(&topic, partitions).await;
    let plain = plain_producer();
    for p in 0..partitions {
        send(&plain, &topic, p, 7);
    }
    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;

    let (rdkafka_id, java_id) = (format!("{group}-librdkafka"), format!("{group}-java"));
    let rdkafka =
        RdkafkaMember::join_with(&topic, &group, "classic", &[("client.id", &rdkafka_id)]);
    let java = JavaMember::join_as(&topic, &group, "classic", &java_id);
    // Both own partitions (the range assignor, common to both clients, gives two each),
    // and everything written so far is read and committed.
    exporter
        .wait_for(
            "both members owning partitions, every partition committed at 7",
            Duration::from_secs(60),
            |s| {
                let owned = owners(s, &group);
                let both = owned.len() == 2
                    && owned.get(&rdkafka_id).is_some_and(|n| *n >= 1.0)
                    && owned.get(&java_id).is_some_and(|n| *n >= 1.0)
                    && owned.values().sum::<f64>() == partitions as f64;
                let all_read =
                    (0..partitions).all(|p| committed(s, &group, &topic, p) == Some(7.0));
                (both && all_read).then_some(())
            },
        )
        .await;

    // The transaction holds every partition at 7; plain records keep arriving above.
    let held = long_transaction(&transactional_id);
    held.begin_transaction().unwrap();
    for p in 0..partitions {
        send_keyed(&held, &topic, p, 2, TX_KEY);
    }
    let trickle = Trickle::start(&topic, partitions);
    let pinned_at = Instant::now();

    // What each member does, from the existing series: the Java member's partitions are
    // committed past the LSO, the librdkafka member's stand at it with records above.
    let (past, at) = exporter
        .wait_for(
            "the Java member past the LSO, the librdkafka member at it",
            Duration::from_secs(30),
            |s| {
                let mut past = 0;
                let mut at = 0;
                for p in 0..partitions {
                    let ps = p.to_string();
                    let g = group_labels(&group, &topic, &ps);
                    let lso = s.value(
                        "kafka_partition_last_stable_offset",
                        &partition_labels(&topic, &ps),
                    )?;
                    let offset = committed(s, &group, &topic, p)?;
                    let hw_lag = s.value("kafka_consumergroup_hw_lag", &g)?;
                    if lso != 7.0 {
                        return None;
                    }
                    if offset > lso {
                        past += 1;
                    } else if offset == lso && hw_lag > 0.0 {
                        at += 1;
                    }
                }
                (past >= 1 && at >= 1 && past + at == partitions).then_some((past, at))
            },
        )
        .await;
    eprintln!("{past} partitions read past the LSO, {at} held at it");

    // Mixed, on /metrics and in the JSON, within the inference's 60 s and a few cycles.
    let budget = INFERENCE + Duration::from_secs(25);
    exporter
        .wait_for(
            "the group mixed on /metrics",
            budget.saturating_sub(pinned_at.elapsed()),
            |s| (isolation_metric(s, &group).as_deref() == Some("mixed")).then_some(()),
        )
        .await;
    eprintln!(
        "mixed {:.1} s after the LSO was pinned",
        pinned_at.elapsed().as_secs_f64()
    );
    let s = exporter.scrape().await;
    for (isolation, expected) in [
        ("read_committed", 1.0),
        ("read_uncommitted", 1.0),
        ("unknown", 0.0),
    ] {
        assert_eq!(
            s.value(
                "kafka_consumergroup_isolation_level_members",
                &[
                    ("kafka_cluster", "test"),
                    ("group", &group),
                    ("isolation_level", isolation)
                ],
            ),
            Some(expected),
            "{isolation} members of {group}"
        );
    }
    // A mixed group reads uncommitted too: its counters are there, at 0 (nothing aborted).
    assert_eq!(aborted_records(&s, &group, &topic), Some(0.0));
    assert_eq!(aborted_transactions(&s, &group, &topic), Some(0.0));
    let entry = wait_json(
        &exporter,
        "the mixed group in the JSON",
        Duration::from_secs(10),
        |json| {
            let entry = isolation_entry(json, &group)?;
            (entry["isolation"] == "mixed").then(|| entry.clone())
        },
    )
    .await;
    let sides: BTreeMap<String, String> = entry["members"]
        .as_array()
        .unwrap_or_else(|| panic!("no members: {entry:#}"))
        .iter()
        .map(|m| {
            (
                m["client_id"].as_str().unwrap_or_default().to_string(),
                m["isolation"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        sides,
        BTreeMap::from([
            (java_id.clone(), "read_uncommitted".to_string()),
            (rdkafka_id.clone(), "read_committed".to_string()),
        ]),
        "{entry:#}"
    );
    for m in entry["members"].as_array().unwrap() {
        assert!(
            m["client_host"]
                .as_str()
                .is_some_and(|h| h.contains("127.0.0.1")),
            "{m:#}"
        );
    }
    let evidence: BTreeSet<String> = entry["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["isolation"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        evidence,
        BTreeSet::from(["read_committed".to_string(), "read_uncommitted".to_string()]),
        "{entry:#}"
    );
    let (_, page) = exporter.get("/").await;
    let section = page_section(&page, "Isolation: groups that read uncommitted");
    for name in [&group, &java_id, &rdkafka_id] {
        assert!(section.contains(name.as_str()), "{name} not in: {section}");
    }

    drop(trickle);
    held.abort_transaction(Duration::from_secs(30)).unwrap();
    java.leave();
    drop(rdkafka);
    exporter.stop().await;
    eprintln!("mixed test: {:.1} s", started.elapsed().as_secs_f64());
}

/// The incident: plain records, a transaction on two partitions (29 and 17 records) held
/// open, plain records after it; group U reads uncommitted through everything and
/// commits, group C reads committed and stops at the LSO; the transaction aborts. U read
/// exactly what it delivered of it, C nothing; the JSON and `/` name the transaction, its
/// producer and its range on each partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_incident_replayed() {
    require_kafka();
    let started = Instant::now();
    let topic = unique("tr-incident");
    let (u, c) = (unique("tr-incident-u"), unique("tr-incident-c"));
    let transactional_id = unique("tr-incident-tx");
    create_topic(&topic, 2).await;
    // (before, in the transaction, after) per partition.
    let counts = [(9usize, 29usize, 6usize), (5, 17, 4)];
    let plain = plain_producer();
    for (p, (before, _, _)) in counts.iter().enumerate() {
        send(&plain, &topic, p as i32, *before);
        wait_high_watermark(&topic, p as i32, *before as i64);
    }

    // Both groups run, and the exporter watches them, before the transaction begins: as
    // in the incident, long-lived groups on a topic with a transactional producer.
    let groups = format!("{}|{}", anchored(&u), anchored(&c));
    let exporter = Exporter::start(&anchored(&topic), &groups, &[]).await;
    // U reads slowly (a record every 40 ms, each committed), so that the exporter sees
    // its offset advance past the LSO while it is a member.
    let u_id = format!("{u}-reader");
    let reader = Reader::join(
        &topic,
        &u,
        &u_id,
        "read_uncommitted",
        true,
        Duration::from_millis(40),
    );
    let c_member = RdkafkaMember::join_with(
        &topic,
        &c,
        "classic",
        &[("client.id", &format!("{c}-reader"))],
    );
    let before_total: usize = counts.iter().map(|(b, _, _)| b).sum();
    reader.wait_delivered(before_total, Duration::from_secs(60));
    exporter
        .wait_for(
            "U and C caught up on the plain records, with members",
            Duration::from_secs(60),
            |s| {
                let members = |g: &str| {
                    s.value(
                        "kafka_consumergroup_members",
                        &[("kafka_cluster", "test"), ("group", g)],
                    )
                };
                (members(&u).is_some_and(|m| m >= 1.0)
                    && members(&c).is_some_and(|m| m >= 1.0)
                    && counts.iter().enumerate().all(|(p, (before, _, _))| {
                        committed(s, &u, &topic, p as i32) == Some(*before as f64)
                            && committed(s, &c, &topic, p as i32) == Some(*before as f64)
                    }))
                .then_some(())
            },
        )
        .await;
    // Two cycles more with both groups live.
    tokio::time::sleep(CYCLE * 2).await;

    let held = long_transaction(&transactional_id);
    held.begin_transaction().unwrap();
    for (p, (_, inside, _)) in counts.iter().enumerate() {
        send_keyed(&held, &topic, p as i32, *inside, TX_KEY);
    }
    for (p, (_, _, after)) in counts.iter().enumerate() {
        send(&plain, &topic, p as i32, *after);
    }
    for (p, (before, inside, after)) in counts.iter().enumerate() {
        wait_high_watermark(&topic, p as i32, (before + inside + after) as i64);
    }
    let producers: Vec<(i64, i64)> = (0..2).map(|p| open_producer(&topic, p)).collect();
    assert_eq!(
        producers[0], producers[1],
        "one producer writes both partitions"
    );
    let (producer_id, producer_epoch) = producers[0];
    let total: usize = counts.iter().map(|(b, i, a)| b + i + a).sum();
    reader.wait_delivered(total, Duration::from_secs(60));

    // What U delivered of the transaction: every record of it, once, at the offsets the
    // broker gave them.
    let tx_delivered = reader.delivered_keyed(TX_KEY);
    let mut expected = Vec::new();
    for (p, (before, inside, _)) in counts.iter().enumerate() {
        for o in *before..before + inside {
            expected.push((p as i32, o as i64));
        }
    }
    let mut got = tx_delivered.clone();
    got.sort();
    assert_eq!(got, expected, "U delivered the transaction's records");
    let delivered_of_tx = tx_delivered.len();
    assert_eq!(delivered_of_tx, 29 + 17);

    exporter
        .wait_for(
            "U committed at the HW, C at the LSO",
            Duration::from_secs(30),
            |s| {
                counts
                    .iter()
                    .enumerate()
                    .all(|(p, (before, inside, after))| {
                        let p = p as i32;
                        committed(s, &u, &topic, p) == Some((before + inside + after) as f64)
                            && committed(s, &c, &topic, p) == Some(*before as f64)
                    })
                    .then_some(())
            },
        )
        .await;
    // U is proven read_uncommitted before anything aborts.
    exporter
        .wait_for(
            "U read_uncommitted on /metrics",
            Duration::from_secs(10),
            |s| {
                [&u].iter()
                    .all(|g| isolation_metric(s, g).as_deref() == Some("read_uncommitted"))
                    .then_some(())
            },
        )
        .await;
    wait_json(
        &exporter,
        "U read_uncommitted",
        Duration::from_secs(10),
        |json| (isolation_entry(json, &u)?["isolation"] == "read_uncommitted").then_some(()),
    )
    .await;

    held.abort_transaction(Duration::from_secs(30)).unwrap();
    let aborted_at = now_ms() as f64 / 1000.0;
    for (p, (before, inside, after)) in counts.iter().enumerate() {
        wait_high_watermark(&topic, p as i32, (before + inside + after + 1) as i64);
    }
    // C now reads the plain records after the aborted ones (never those).
    let s = exporter
        .wait_for(
            "U's aborted records counted, C past the aborted transaction",
            Duration::from_secs(30),
            |s| {
                // librdkafka commits after the last record, or after the abort marker
                // where its position passed it.
                let c_done = counts.iter().enumerate().all(|(p, (b, i, a))| {
                    committed(s, &c, &topic, p as i32)
                        .is_some_and(|o| o == (b + i + a) as f64 || o == (b + i + a + 1) as f64)
                });
                (c_done && aborted_records(s, &u, &topic) == Some(delivered_of_tx as f64))
                    .then(|| s.clone())
            },
        )
        .await;
    assert_eq!(
        aborted_transactions(&s, &u, &topic),
        Some(1.0),
        "one transaction, two partitions"
    );
    // A few cycles more: nothing counted twice, nothing for C.
    tokio::time::sleep(CYCLE * 3).await;
    let s = exporter.scrape().await;
    assert_eq!(
        aborted_records(&s, &u, &topic),
        Some(delivered_of_tx as f64)
    );
    assert_eq!(aborted_transactions(&s, &u, &topic), Some(1.0));
    assert!(
        matches!(aborted_records(&s, &c, &topic), None | Some(0.0)),
        "C read committed: {:?}",
        aborted_records(&s, &c, &topic)
    );
    assert!(matches!(
        aborted_transactions(&s, &c, &topic),
        None | Some(0.0)
    ));
    assert_eq!(
        isolation_metric(&s, &u).as_deref(),
        Some("read_uncommitted")
    );

    let json = stuck_json(&exporter).await;
    let entry =
        isolation_entry(&json, &u).unwrap_or_else(|| panic!("U not in isolation: {json:#}"));
    assert_eq!(entry["isolation"], "read_uncommitted", "{entry:#}");
    assert_eq!(
        entry["aborted_records_read"],
        serde_json::json!([{"topic": topic, "records": delivered_of_tx, "transactions": 1}]),
        "{entry:#}"
    );
    let aborted = entry["aborted_read"]
        .as_array()
        .unwrap_or_else(|| panic!("{entry:#}"));
    assert_eq!(aborted.len(), 2, "one per partition: {entry:#}");
    for (p, (before, inside, _)) in counts.iter().enumerate() {
        let a = aborted
            .iter()
            .find(|a| a["topic"] == topic.as_str() && a["partition"] == p as i64)
            .unwrap_or_else(|| panic!("partition {p} not in aborted_read: {entry:#}"));
        assert_eq!(a["transactional_id"], transactional_id.as_str(), "{a:#}");
        assert_eq!(a["producer_id"], producer_id, "{a:#}");
        // The records' epoch; a broker with transactions v2 (KIP-890) writes the abort
        // marker with the next one.
        let epoch = a["producer_epoch"].as_i64().unwrap_or(-1);
        assert!(
            epoch == producer_epoch || epoch == producer_epoch + 1,
            "epoch {epoch}, the records' {producer_epoch}: {a:#}"
        );
        assert_eq!(a["first_offset"], *before as i64, "{a:#}");
        assert_eq!(a["last_offset"], (before + inside - 1) as i64, "{a:#}");
        assert_eq!(a["records"], *inside as i64, "{a:#}");
        assert_eq!(a["exact"], true, "{a:#}");
        let at = a["aborted_at"].as_f64().unwrap_or_else(|| panic!("{a:#}"));
        assert!(
            (at - aborted_at).abs() < 10.0,
            "aborted_at {at}, aborted at {aborted_at}"
        );
        assert_eq!(a["member"]["client_id"], u_id.as_str(), "{a:#}");
    }
    assert!(
        isolation_entry(&json, &c).is_none_or(|e| {
            e["aborted_read"].as_array().is_none_or(|a| a.is_empty())
                && e["isolation"] != "read_uncommitted"
                && e["isolation"] != "mixed"
        }),
        "C: {json:#}"
    );

    let (_, page) = exporter.get("/").await;
    let section = page_section(&page, "Isolation: groups that read uncommitted");
    assert!(section.contains(u.as_str()), "U not in: {section}");
    assert!(
        section.contains(transactional_id.as_str()),
        "the transaction not in: {section}"
    );
    let shown = numbers(&section);
    for (before, inside, _) in counts {
        for offset in [before, before + inside - 1] {
            assert!(
                shown.contains(&(offset as i64)),
                "offset {offset} not in: {section}"
            );
        }
    }
    assert!(
        !section.contains(c.as_str()),
        "C listed as reading uncommitted: {section}"
    );

    drop((reader, c_member));
    exporter.stop().await;
    eprintln!("incident test: {:.1} s", started.elapsed().as_secs_f64());
}

/// A group proven read_uncommitted (it read through an open transaction), then standing
/// exactly at a pinned LSO with a live member that does not poll while a new transaction
/// holds the partition and records arrive above: never blocked, still read_uncommitted.
/// A read_committed group at the same LSO is, which shows the partition does block.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_read_uncommitted_group_at_the_lso_is_never_blocked() {
    require_kafka();
    let topic = unique("tr-ru-at-lso");
    let (ru, rc) = (unique("tr-ru"), unique("tr-rc"));
    create_topic(&topic, 1).await;
    let plain = plain_producer();
    send(&plain, &topic, 0, 4);
    let groups = format!("{}|{}", anchored(&ru), anchored(&rc));
    let exporter = Exporter::start(&anchored(&topic), &groups, &[]).await;
    let ru_member = RdkafkaMember::join_with(
        &topic,
        &ru,
        "classic",
        &[
            ("client.id", &format!("{ru}-m")),
            ("isolation.level", "read_uncommitted"),
        ],
    );
    let rc_member =
        RdkafkaMember::join_with(&topic, &rc, "classic", &[("client.id", &format!("{rc}-m"))]);
    let at = |offset: f64, both: bool| {
        let (ru, rc, topic) = (ru.clone(), rc.clone(), topic.clone());
        move |s: &Scrape| {
            (committed(s, &ru, &topic, 0) == Some(offset)
                && (!both || committed(s, &rc, &topic, 0) == Some(offset)))
            .then_some(())
        }
    };
    exporter
        .wait_for("both groups at 4", Duration::from_secs(60), at(4.0, true))
        .await;

    // The proof: an open transaction (4..=6), plain records above it (7, 8, 9) one a
    // cycle; RU reads through, advancing past the LSO from cycle to cycle.
    let first = long_transaction(&unique("tr-ru-first"));
    first.begin_transaction().unwrap();
    send_keyed(&first, &topic, 0, 3, TX_KEY);
    drip(&plain, &topic, 0, 3);
    wait_high_watermark(&topic, 0, 10);
    exporter
        .wait_for(
            "RU committed at 10, past the LSO 4",
            Duration::from_secs(30),
            at(10.0, false),
        )
        .await;
    exporter
        .wait_for(
            "RU proven read_uncommitted on /metrics",
            Duration::from_secs(10),
            |s| {
                [&ru]
                    .iter()
                    .all(|g| isolation_metric(s, g).as_deref() == Some("read_uncommitted"))
                    .then_some(())
            },
        )
        .await;
    wait_json(
        &exporter,
        "RU proven read_uncommitted",
        Duration::from_secs(10),
        |json| (isolation_entry(json, &ru)?["isolation"] == "read_uncommitted").then_some(()),
    )
    .await;
    // Committed (marker at 10), one plain record (11): both groups at 12.
    first.commit_transaction(Duration::from_secs(30)).unwrap();
    wait_high_watermark(&topic, 0, 11);
    send(&plain, &topic, 0, 1);
    exporter
        .wait_for("both groups at 12", Duration::from_secs(30), at(12.0, true))
        .await;

    // RU's member stops polling; a new transaction pins the LSO at 12 (12, 13), plain
    // records above (14..=16).
    ru_member.pause(true);
    std::thread::sleep(Duration::from_millis(500));
    let second = long_transaction(&unique("tr-ru-second"));
    second.begin_transaction().unwrap();
    send_keyed(&second, &topic, 0, 2, TX_KEY);
    send(&plain, &topic, 0, 3);
    wait_high_watermark(&topic, 0, 17);
    // The read_committed group at the same LSO is blocked: the partition does block.
    wait_json(
        &exporter,
        "RC blocked at the LSO 12",
        Duration::from_secs(30),
        |json| blocked_groups(json, &topic, 0).contains(&rc).then_some(()),
    )
    .await;
    for cycle in 0..12 {
        let s = exporter.scrape().await;
        assert_eq!(
            committed(&s, &ru, &topic, 0),
            Some(12.0),
            "RU stands at the LSO"
        );
        assert_eq!(
            s.value(
                "kafka_partition_last_stable_offset",
                &partition_labels(&topic, "0")
            ),
            Some(12.0)
        );
        assert_ne!(
            blocked_status(&s, &ru),
            Some(1.0),
            "cycle {cycle}: RU blocked:\n{}",
            s.text
        );
        assert_eq!(
            isolation_metric(&s, &ru).as_deref(),
            Some("read_uncommitted"),
            "cycle {cycle}"
        );
        assert!(
            s.value(
                "kafka_consumergroup_members",
                &[("kafka_cluster", "test"), ("group", &ru)]
            )
            .is_some_and(|n| n >= 1.0),
            "RU has a live member"
        );
        let json = stuck_json(&exporter).await;
        let blocked = blocked_groups(&json, &topic, 0);
        assert!(
            !blocked.contains(&ru),
            "cycle {cycle}: RU in blocked_groups: {json:#}"
        );
        assert!(
            blocked.contains(&rc),
            "cycle {cycle}: RC left blocked_groups: {json:#}"
        );
        assert_eq!(
            isolation_entry(&json, &ru).map(|e| e["isolation"].clone()),
            Some(Value::from("read_uncommitted")),
            "cycle {cycle}"
        );
        tokio::time::sleep(CYCLE).await;
    }
    second.abort_transaction(Duration::from_secs(30)).unwrap();
    drop((ru_member, rc_member));
    exporter.stop().await;
}

/// The exporter sees a group at 4 on a partition nothing pins; within the next cycle a
/// transaction opens (4..=6), plain records land above it (7, 8) and the group's member
/// (read_uncommitted) commits 9 at once, and then nothing more arrives: its offset advanced
/// between two cycles past that cycle's LSO, not past the HW, with a live member: proof.
/// When the transaction aborts, its three records count as read.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transaction_read_through_between_two_cycles_is_proof() {
    require_kafka();
    let topic = unique("tr-one-cycle");
    let group = unique("tr-one-cycle-group");
    create_topic(&topic, 1).await;
    let plain = plain_producer();
    send(&plain, &topic, 0, 4);
    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;
    let reader = Reader::join(
        &topic,
        &group,
        &format!("{group}-m"),
        "read_uncommitted",
        false,
        Duration::ZERO,
    );
    reader.wait_delivered(4, Duration::from_secs(60));
    reader.commit(&[(0, 4)]);
    let p0 = partition_labels(&topic, "0");
    exporter
        .wait_for(
            "the group at 4, nothing pinned",
            Duration::from_secs(15),
            |s| {
                (committed(s, &group, &topic, 0) == Some(4.0)
                    && s.value("kafka_partition_hw_minus_lso", &p0) == Some(0.0))
                .then_some(())
            },
        )
        .await;
    let tx = long_transaction(&unique("tr-one-cycle-tx"));
    tx.begin_transaction().unwrap();
    send_keyed(&tx, &topic, 0, 3, TX_KEY);
    send(&plain, &topic, 0, 2);
    wait_high_watermark(&topic, 0, 9);
    reader.wait_delivered(9, Duration::from_secs(15));
    assert_eq!(reader.delivered_keyed(TX_KEY), vec![(0, 4), (0, 5), (0, 6)]);
    reader.commit(&[(0, 9)]);
    exporter
        .wait_for(
            "the group at 9, the LSO at 4",
            Duration::from_secs(15),
            |s| {
                (committed(s, &group, &topic, 0) == Some(9.0)
                    && s.value("kafka_partition_last_stable_offset", &p0) == Some(4.0))
                .then_some(())
            },
        )
        .await;
    exporter
        .wait_for("read_uncommitted within a few cycles", CYCLE * 5, |s| {
            (isolation_metric(s, &group).as_deref() == Some("read_uncommitted")).then_some(())
        })
        .await;
    tx.abort_transaction(Duration::from_secs(30)).unwrap();
    wait_high_watermark(&topic, 0, 10);
    exporter
        .wait_for("its 3 aborted records read", CYCLE * 5, |s| {
            (aborted_records(s, &group, &topic) == Some(3.0)
                && aborted_transactions(s, &group, &topic) == Some(1.0))
            .then_some(())
        })
        .await;
    drop(reader);
    exporter.stop().await;
}

/// A read_committed group blocked at a pinned LSO while its member is live; the member
/// closes: the group has no members and stays blocked (jobs that assign partitions
/// themselves commit without members, and a consumer that is down could read nothing
/// more either), until the transaction ends: then it has records to read, and is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_group_without_members_at_the_lso_stays_blocked_until_the_transaction_ends() {
    require_kafka();
    let topic = unique("tr-memberless");
    let group = unique("tr-memberless-group");
    create_topic(&topic, 1).await;
    let plain = plain_producer();
    send(&plain, &topic, 0, 3);
    let held = long_transaction(&unique("tr-memberless-tx"));
    held.begin_transaction().unwrap();
    send_keyed(&held, &topic, 0, 2, TX_KEY);
    send(&plain, &topic, 0, 2);
    wait_high_watermark(&topic, 0, 7);
    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;
    let member = RdkafkaMember::join_with(
        &topic,
        &group,
        "classic",
        &[("client.id", &format!("{group}-m"))],
    );
    let members = |s: &Scrape| {
        s.value(
            "kafka_consumergroup_members",
            &[("kafka_cluster", "test"), ("group", &group)],
        )
    };
    exporter
        .wait_for(
            "the live group blocked at 3",
            Duration::from_secs(60),
            |s| {
                (committed(s, &group, &topic, 0) == Some(3.0)
                    && members(s) == Some(1.0)
                    && blocked_status(s, &group) == Some(1.0))
                .then_some(())
            },
        )
        .await;
    drop(member);
    exporter
        .wait_for("no members", Duration::from_secs(15), |s| {
            (members(s) == Some(0.0)).then_some(())
        })
        .await;
    for cycle in 0..4 {
        let s = exporter.scrape().await;
        assert_eq!(members(&s), Some(0.0));
        assert_eq!(
            blocked_status(&s, &group),
            Some(1.0),
            "cycle {cycle}:\n{}",
            s.text
        );
        let json = stuck_json(&exporter).await;
        assert!(
            blocked_groups(&json, &topic, 0).contains(&group),
            "cycle {cycle}: {json:#}"
        );
        tokio::time::sleep(CYCLE).await;
    }
    held.abort_transaction(Duration::from_secs(30)).unwrap();
    exporter
        .wait_for(
            "the transaction ended: something to read, not blocked",
            Duration::from_secs(15),
            |s| (blocked_status(s, &group) == Some(0.0)).then_some(()),
        )
        .await;
    exporter.stop().await;
}

/// A live member commits by hand an offset 1000 past the HW, on a topic with an aborted
/// transaction below and an open one: past the LSO, yet no proof of read_uncommitted (it
/// is past the HW too), and no aborted record counted, before or after the open one aborts.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_commit_beyond_the_high_watermark_proves_and_counts_nothing() {
    require_kafka();
    let topic = unique("tr-beyond");
    let group = unique("tr-beyond-group");
    create_topic(&topic, 1).await;
    let plain = plain_producer();
    send(&plain, &topic, 0, 4);
    let tx = long_transaction(&unique("tr-beyond-tx"));
    tx.begin_transaction().unwrap();
    send_keyed(&tx, &topic, 0, 6, TX_KEY);
    tx.abort_transaction(Duration::from_secs(30)).unwrap();
    wait_high_watermark(&topic, 0, 11);
    send(&plain, &topic, 0, 3);
    tx.begin_transaction().unwrap();
    send_keyed(&tx, &topic, 0, 2, TX_KEY);
    send(&plain, &topic, 0, 2);
    wait_high_watermark(&topic, 0, 18);
    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;
    let member = Reader::join(
        &topic,
        &group,
        &format!("{group}-m"),
        "read_committed",
        false,
        Duration::ZERO,
    );
    // A live member, committed at 2 first.
    exporter
        .wait_for("a live member", Duration::from_secs(60), |s| {
            (owners(s, &group).values().sum::<f64>() == 1.0).then_some(())
        })
        .await;
    member.commit(&[(0, 2)]);
    exporter
        .wait_for("committed at 2", Duration::from_secs(15), |s| {
            (committed(s, &group, &topic, 0) == Some(2.0)).then_some(())
        })
        .await;
    let beyond = high_watermark(&topic, 0) + 1000;
    member.commit(&[(0, beyond)]);
    exporter
        .wait_for(
            "committed far beyond the HW",
            Duration::from_secs(15),
            |s| (committed(s, &group, &topic, 0) == Some(beyond as f64)).then_some(()),
        )
        .await;
    let check = |s: &Scrape, json: &Value, when: &str| {
        assert!(
            matches!(aborted_records(s, &group, &topic), None | Some(0.0)),
            "{when}: aborted records counted for a commit beyond the HW:\n{}",
            s.text
        );
        assert!(
            matches!(aborted_transactions(s, &group, &topic), None | Some(0.0)),
            "{when}"
        );
        assert!(
            !matches!(
                isolation_metric(s, &group).as_deref(),
                Some("read_uncommitted" | "mixed")
            ),
            "{when}: proven read_uncommitted by a commit beyond the HW"
        );
        if let Some(entry) = isolation_entry(json, &group) {
            assert!(
                entry["isolation"] != "read_uncommitted" && entry["isolation"] != "mixed",
                "{when}: {entry:#}"
            );
            let proofs = entry["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| e["isolation"] == "read_uncommitted")
                .count();
            assert_eq!(proofs, 0, "{when}: {entry:#}");
            assert!(
                entry["aborted_read"]
                    .as_array()
                    .is_none_or(|a| a.is_empty()),
                "{when}: {entry:#}"
            );
        }
    };
    for cycle in 0..4 {
        tokio::time::sleep(CYCLE).await;
        check(
            &exporter.scrape().await,
            &stuck_json(&exporter).await,
            &format!("open, cycle {cycle}"),
        );
    }
    tx.abort_transaction(Duration::from_secs(30)).unwrap();
    wait_high_watermark(&topic, 0, 19);
    for cycle in 0..4 {
        tokio::time::sleep(CYCLE).await;
        check(
            &exporter.scrape().await,
            &stuck_json(&exporter).await,
            &format!("aborted, cycle {cycle}"),
        );
    }
    drop(member);
    exporter.stop().await;
}

/// A read_uncommitted consumer reads through an open transaction that then aborts; it
/// seeks back before it and reads it again, committing as it goes: counted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_aborted_transaction_read_twice_is_counted_once() {
    require_kafka();
    let topic = unique("tr-reread");
    let group = unique("tr-reread-group");
    create_topic(&topic, 1).await;
    let plain = plain_producer();
    send(&plain, &topic, 0, 5);
    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;
    let reader = Reader::join(
        &topic,
        &group,
        &format!("{group}-m"),
        "read_uncommitted",
        true,
        Duration::from_millis(100),
    );
    reader.wait_delivered(5, Duration::from_secs(60));
    exporter
        .wait_for("committed at 5", Duration::from_secs(15), |s| {
            (committed(s, &group, &topic, 0) == Some(5.0)).then_some(())
        })
        .await;
    // 13 records in the transaction (5..=17), 4 plain above (18..=21).
    let tx = long_transaction(&unique("tr-reread-tx"));
    tx.begin_transaction().unwrap();
    send_keyed(&tx, &topic, 0, 13, TX_KEY);
    send(&plain, &topic, 0, 4);
    wait_high_watermark(&topic, 0, 22);
    reader.wait_delivered(22, Duration::from_secs(30));
    assert_eq!(
        reader.delivered_keyed(TX_KEY),
        (5..18).map(|o| (0, o)).collect::<Vec<_>>()
    );
    exporter
        .wait_for("committed at 22", Duration::from_secs(15), |s| {
            (committed(s, &group, &topic, 0) == Some(22.0)).then_some(())
        })
        .await;
    tx.abort_transaction(Duration::from_secs(30)).unwrap();
    wait_high_watermark(&topic, 0, 23);
    exporter
        .wait_for("13 aborted records read", Duration::from_secs(15), |s| {
            (aborted_records(s, &group, &topic) == Some(13.0)).then_some(())
        })
        .await;

    // Back to 3 (committed there, so that the exporter sees it), then all again.
    reader.commit(&[(0, 3)]);
    exporter
        .wait_for("committed back at 3", Duration::from_secs(15), |s| {
            (committed(s, &group, &topic, 0) == Some(3.0)).then_some(())
        })
        .await;
    reader.seek(0, 3);
    reader.wait_delivered(22 + 19, Duration::from_secs(30));
    let tx_deliveries = reader.delivered_keyed(TX_KEY);
    assert_eq!(
        tx_deliveries.len(),
        26,
        "the aborted records delivered twice"
    );
    assert_eq!(tx_deliveries.iter().collect::<BTreeSet<_>>().len(), 13);
    exporter
        .wait_for("committed at 22 again", Duration::from_secs(15), |s| {
            (committed(s, &group, &topic, 0) == Some(22.0)).then_some(())
        })
        .await;
    for cycle in 0..4 {
        tokio::time::sleep(CYCLE).await;
        let s = exporter.scrape().await;
        assert_eq!(
            aborted_records(&s, &group, &topic),
            Some(13.0),
            "cycle {cycle}"
        );
        assert_eq!(
            aborted_transactions(&s, &group, &topic),
            Some(1.0),
            "cycle {cycle}"
        );
    }
    let json = stuck_json(&exporter).await;
    let entry = isolation_entry(&json, &group).unwrap_or_else(|| panic!("{json:#}"));
    assert_eq!(
        entry["aborted_read"].as_array().map(Vec::len),
        Some(1),
        "{entry:#}"
    );
    assert_eq!(entry["aborted_read"][0]["records"], 13, "{entry:#}");
    drop(reader);
    exporter.stop().await;
}

/// A transaction aborts, then DeleteRecords moves the log start past it. Group U read it
/// while it was open: counted, and still so after the deletion. Group V, proven
/// read_uncommitted on an earlier transaction, was behind it (its member paused) and,
/// once resumed, resets to the log start, past the aborted records it never delivered:
/// nothing counted for V.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn aborted_records_deleted_before_a_group_read_them_are_not_counted() {
    require_kafka();
    let topic = unique("tr-deleted");
    let (u, v) = (unique("tr-deleted-u"), unique("tr-deleted-v"));
    create_topic(&topic, 1).await;
    let plain = plain_producer();
    send(&plain, &topic, 0, 3);
    let groups = format!("{}|{}", anchored(&u), anchored(&v));
    let exporter = Exporter::start(&anchored(&topic), &groups, &[]).await;
    let pace = Duration::from_millis(50);
    let u_reader = Reader::join(
        &topic,
        &u,
        &format!("{u}-m"),
        "read_uncommitted",
        true,
        pace,
    );
    let v_reader = Reader::join(
        &topic,
        &v,
        &format!("{v}-m"),
        "read_uncommitted",
        true,
        pace,
    );
    let both_at = |offset: f64| {
        let (u, v, topic) = (u.clone(), v.clone(), topic.clone());
        move |s: &Scrape| {
            (committed(s, &u, &topic, 0) == Some(offset)
                && committed(s, &v, &topic, 0) == Some(offset))
            .then_some(())
        }
    };
    exporter
        .wait_for("both at 3", Duration::from_secs(60), both_at(3.0))
        .await;
    // Both read through an open transaction (3, 4; plain 5, 6): proven read_uncommitted.
    let earlier = long_transaction(&unique("tr-deleted-earlier"));
    earlier.begin_transaction().unwrap();
    send(&earlier, &topic, 0, 2);
    drip(&plain, &topic, 0, 2);
    wait_high_watermark(&topic, 0, 7);
    exporter
        .wait_for(
            "both at 7, past the LSO 3",
            Duration::from_secs(30),
            both_at(7.0),
        )
        .await;
    earlier.commit_transaction(Duration::from_secs(30)).unwrap();
    wait_high_watermark(&topic, 0, 8);
    exporter
        .wait_for(
            "both proven read_uncommitted on /metrics",
            Duration::from_secs(10),
            |s| {
                [&u, &v]
                    .iter()
                    .all(|g| isolation_metric(s, g).as_deref() == Some("read_uncommitted"))
                    .then_some(())
            },
        )
        .await;
    wait_json(
        &exporter,
        "both proven read_uncommitted",
        Duration::from_secs(10),
        |json| {
            [&u, &v]
                .iter()
                .all(|g| {
                    isolation_entry(json, g).is_some_and(|e| e["isolation"] == "read_uncommitted")
                })
                .then_some(())
        },
    )
    .await;

    // V stops fetching at 7. U reads a transaction of 11 records (8..=18) while it is open,
    // and the plain records above (19, 20); it aborts (marker 21); two plain records more.
    v_reader.pause(true);
    let tx = long_transaction(&unique("tr-deleted-tx"));
    tx.begin_transaction().unwrap();
    send_keyed(&tx, &topic, 0, 11, TX_KEY);
    send(&plain, &topic, 0, 2);
    wait_high_watermark(&topic, 0, 21);
    u_reader.wait_delivered(3 + 4 + 11 + 2, Duration::from_secs(30));
    assert_eq!(u_reader.delivered_keyed(TX_KEY).len(), 11);
    exporter
        .wait_for("U at 21", Duration::from_secs(15), |s| {
            (committed(s, &u, &topic, 0) == Some(21.0)).then_some(())
        })
        .await;
    tx.abort_transaction(Duration::from_secs(30)).unwrap();
    wait_high_watermark(&topic, 0, 22);
    send(&plain, &topic, 0, 2);
    wait_high_watermark(&topic, 0, 24);
    exporter
        .wait_for(
            "U's 11 aborted records counted",
            Duration::from_secs(15),
            |s| (aborted_records(s, &u, &topic) == Some(11.0)).then_some(()),
        )
        .await;

    // Everything below 22 deleted: the aborted transaction and its marker are gone.
    let mut below = TopicPartitionList::new();
    below
        .add_partition_offset(&topic, 0, Offset::Offset(22))
        .unwrap();
    let result = admin()
        .delete_records(
            &below,
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await
        .expect("DeleteRecords");
    let start = result
        .find_partition(&topic, 0)
        .expect("the partition in the result");
    assert!(start.error().is_ok(), "DeleteRecords: {:?}", start.error());
    assert_eq!(start.offset(), Offset::Offset(22), "the new log start");

    // V resumes: 7 is out of range, it resets to the log start and reads 22, 23.
    v_reader.pause(false);
    let v_before = 3 + 2 + 2;
    v_reader.wait_delivered(v_before + 2, Duration::from_secs(30));
    let v_after: Vec<(i32, i64)> = v_reader.delivered()[v_before..]
        .iter()
        .map(|d| (d.partition, d.offset))
        .collect();
    assert_eq!(v_after, vec![(0, 22), (0, 23)], "V reset to the log start");
    assert!(
        v_reader.delivered_keyed(TX_KEY).is_empty(),
        "V never delivered the aborted records"
    );
    u_reader.wait_delivered(3 + 4 + 11 + 2 + 2, Duration::from_secs(30));
    exporter
        .wait_for("both at 24", Duration::from_secs(15), both_at(24.0))
        .await;
    for cycle in 0..4 {
        tokio::time::sleep(CYCLE).await;
        let s = exporter.scrape().await;
        assert_eq!(
            aborted_records(&s, &u, &topic),
            Some(11.0),
            "cycle {cycle}: U"
        );
        assert!(
            matches!(aborted_records(&s, &v, &topic), None | Some(0.0)),
            "cycle {cycle}: V counted records deleted before it read them:\n{}",
            s.text
        );
        assert!(
            matches!(aborted_transactions(&s, &v, &topic), None | Some(0.0)),
            "cycle {cycle}: V"
        );
    }
    drop((u_reader, v_reader));
    exporter.stop().await;
}

/// The same with the new consumer protocol (KIP-848, `group.protocol=consumer`) on both
/// sides and librdkafka through Confluent's Python client: a Java consumer
/// (tests/java/GroupMember.java, read_uncommitted by default) and a confluent-kafka one
/// (tests/python/group_member.py, read_committed by default), neither setting
/// isolation.level, each owning pinned partitions of a topic an open transaction holds
/// while plain records keep arriving: the group is `mixed`, each member named on its
/// side. librdkafka speaks KIP-848 from Kafka 4.0 (ConsumerGroupHeartbeat v1): before
/// 4.0 both members join a classic group, and the same must hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kip848_group_of_a_java_and_a_confluent_kafka_member_is_mixed() {
    use common::python::{venv_python, ConfluentMember};

    require_kafka();
    // The venv and its client first (made once per checkout): nothing below waits on it.
    venv_python();
    let started = Instant::now();
    let protocol = if kafka_version() >= (4, 0) {
        "consumer"
    } else {
        "classic"
    };
    eprintln!("Kafka {:?}: group.protocol={protocol}", kafka_version());
    let topic = unique("tr-mixed848");
    let group = unique("tr-mixed848-group");
    let transactional_id = unique("tr-mixed848-tx");
    let partitions = 4;
    create_topic(&topic, partitions).await;
    let plain = plain_producer();
    for p in 0..partitions {
        send(&plain, &topic, p, 7);
    }
    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;

    let (confluent_id, java_id) = (format!("{group}-confluent"), format!("{group}-java"));
    let confluent = ConfluentMember::join(&topic, &group, protocol, &confluent_id);
    let java = JavaMember::join_as(&topic, &group, protocol, &java_id);
    // Both own partitions (two each: KIP-848's uniform assignor on the broker, or the
    // classic range assignor common to both clients), and everything written so far is
    // read and committed (confluent-kafka commits automatically, every 5 s).
    exporter
        .wait_for(
            "both members owning partitions, every partition committed at 7",
            Duration::from_secs(60),
            |s| {
                let owned = owners(s, &group);
                let both = owned.len() == 2
                    && owned.get(&confluent_id).is_some_and(|n| *n >= 1.0)
                    && owned.get(&java_id).is_some_and(|n| *n >= 1.0)
                    && owned.values().sum::<f64>() == partitions as f64;
                let all_read =
                    (0..partitions).all(|p| committed(s, &group, &topic, p) == Some(7.0));
                (both && all_read).then_some(())
            },
        )
        .await;
    // The group is of the protocol its members joined with (a KIP-848 group is of type
    // `consumer`).
    let s = exporter.scrape().await;
    let types: Vec<String> = s
        .series(
            "kafka_consumergroup_info",
            &[("kafka_cluster", "test"), ("group", &group)],
        )
        .map(|(l, _)| l["group_type"].clone())
        .collect();
    assert_eq!(types, vec![protocol.to_string()], "{group}'s type");

    // The transaction holds every partition at 7; plain records keep arriving above.
    let held = long_transaction(&transactional_id);
    held.begin_transaction().unwrap();
    for p in 0..partitions {
        send_keyed(&held, &topic, p, 2, TX_KEY);
    }
    let trickle = Trickle::start(&topic, partitions);
    let pinned_at = Instant::now();

    // The Java member's partitions are committed past the LSO, the confluent-kafka
    // member's stand at it with records above.
    let (past, at) = exporter
        .wait_for(
            "the Java member past the LSO, the confluent-kafka member at it",
            Duration::from_secs(30),
            |s| {
                let mut past = 0;
                let mut at = 0;
                for p in 0..partitions {
                    let ps = p.to_string();
                    let g = group_labels(&group, &topic, &ps);
                    let lso = s.value(
                        "kafka_partition_last_stable_offset",
                        &partition_labels(&topic, &ps),
                    )?;
                    let offset = committed(s, &group, &topic, p)?;
                    let hw_lag = s.value("kafka_consumergroup_hw_lag", &g)?;
                    if lso != 7.0 {
                        return None;
                    }
                    if offset > lso {
                        past += 1;
                    } else if offset == lso && hw_lag > 0.0 {
                        at += 1;
                    }
                }
                (past >= 1 && at >= 1 && past + at == partitions).then_some((past, at))
            },
        )
        .await;
    eprintln!("{past} partitions read past the LSO, {at} held at it");

    // Mixed, on /metrics and in the JSON, within the inference's 60 s and a few cycles.
    let budget = INFERENCE + Duration::from_secs(25);
    exporter
        .wait_for(
            "the group mixed on /metrics",
            budget.saturating_sub(pinned_at.elapsed()),
            |s| (isolation_metric(s, &group).as_deref() == Some("mixed")).then_some(()),
        )
        .await;
    eprintln!(
        "mixed {:.1} s after the LSO was pinned",
        pinned_at.elapsed().as_secs_f64()
    );
    let s = exporter.scrape().await;
    assert_eq!(
        s.value(
            "kafka_consumergroup_isolation_level",
            &[
                ("kafka_cluster", "test"),
                ("group", &group),
                ("isolation_level", "mixed")
            ],
        ),
        Some(1.0),
        "{group} mixed"
    );
    for (isolation, expected) in [
        ("read_committed", 1.0),
        ("read_uncommitted", 1.0),
        ("unknown", 0.0),
    ] {
        assert_eq!(
            s.value(
                "kafka_consumergroup_isolation_level_members",
                &[
                    ("kafka_cluster", "test"),
                    ("group", &group),
                    ("isolation_level", isolation)
                ],
            ),
            Some(expected),
            "{isolation} members of {group}"
        );
    }
    let entry = wait_json(
        &exporter,
        "the mixed group in the JSON",
        Duration::from_secs(10),
        |json| {
            let entry = isolation_entry(json, &group)?;
            (entry["isolation"] == "mixed").then(|| entry.clone())
        },
    )
    .await;
    let sides: BTreeMap<String, String> = entry["members"]
        .as_array()
        .unwrap_or_else(|| panic!("no members: {entry:#}"))
        .iter()
        .map(|m| {
            (
                m["client_id"].as_str().unwrap_or_default().to_string(),
                m["isolation"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(
        sides,
        BTreeMap::from([
            (java_id.clone(), "read_uncommitted".to_string()),
            (confluent_id.clone(), "read_committed".to_string()),
        ]),
        "{entry:#}"
    );
    let evidence: BTreeSet<String> = entry["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["isolation"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        evidence,
        BTreeSet::from(["read_committed".to_string(), "read_uncommitted".to_string()]),
        "{entry:#}"
    );
    let (_, page) = exporter.get("/").await;
    let section = page_section(&page, "Isolation: groups that read uncommitted");
    for name in [&group, &java_id, &confluent_id] {
        assert!(section.contains(name.as_str()), "{name} not in: {section}");
    }

    drop(trickle);
    held.abort_transaction(Duration::from_secs(30)).unwrap();
    java.leave();
    confluent.leave();
    exporter.stop().await;
    eprintln!(
        "mixed KIP-848 test ({protocol}): {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
