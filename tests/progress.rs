//! Commit progress and retention risk against a real broker (scripts/kafka-local):
//! - a consumer that stops committing while records arrive: its stall clock within one
//!   interval of the truth, its status `stopped`; committing again: back to 0 and `ok`;
//! - a read_committed group blocked behind an open transaction on a topic with a short
//!   `retention.ms` and `segment.ms`: the retention margin falls below a quarter of the
//!   retention before anything is lost, and once retention passed the committed offset the
//!   lost count equals the records deleted below it, as the broker's log start says.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

/// The exporter's sampling interval in these tests.
const INTERVAL: f64 = 1.0;

/// Commits `offset` on partition 0 of `topic` for `group`, as a consumer that assigned
/// the partition itself (no group membership).
fn commit(consumer: &BaseConsumer, topic: &str, offset: i64) {
    let mut list = TopicPartitionList::new();
    list.add_partition_offset(topic, 0, Offset::Offset(offset))
        .unwrap();
    consumer.commit(&list, CommitMode::Sync).expect("commit");
}

fn committer(group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer")
}

/// A producer thread writing one record every `every` to partition 0 of `topic` until
/// the returned flag is set.
fn keep_producing(topic: &str, every: Duration) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let (flag, topic) = (stop.clone(), topic.to_string());
    let thread = std::thread::spawn(move || {
        let producer = plain_producer();
        while !flag.load(Ordering::SeqCst) {
            send(&producer, &topic, 0, 1);
            std::thread::sleep(every);
        }
    });
    (stop, thread)
}

fn wall_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn status(scrape: &Scrape, group: &str) -> Option<String> {
    scrape
        .series("kafka_consumergroup_status", &[("group", group)])
        .into_iter()
        .find(|(_, value)| *value == 1.0)
        .and_then(|(labels, _)| labels.get("status").cloned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_consumer_that_stops_committing_stalls_and_recovers() {
    require_kafka();
    let topic = unique("stall");
    let group = unique("stall-group");
    create_topic(&topic, 1).await;
    let (stop, producing) = keep_producing(&topic, Duration::from_millis(200));
    let exporter = Exporter::start(
        &topic,
        &group,
        &[("KAFKA_LSO_EXPORTER_CLUSTERS__0__STALL_AFTER", "3s")],
    )
    .await;
    let stall = |s: &Scrape| {
        s.value(
            "kafka_consumergroup_topic_max_commit_stall_seconds",
            &[("group", group.as_str()), ("topic", topic.as_str())],
        )
    };

    // A consumer that keeps up: it commits the HW three times a second.
    let consumer = committer(&group);
    let keeping_up = Instant::now();
    let mut seen = 0;
    while keeping_up.elapsed() < Duration::from_secs(5) {
        commit(&consumer, &topic, high_watermark(&topic, 0));
        let scrape = exporter.scrape().await;
        if let Some(value) = stall(&scrape) {
            seen += 1;
            assert!(
                value <= INTERVAL + 0.5,
                "a committing group stalls {value} s"
            );
            assert_ne!(status(&scrape, &group).as_deref(), Some("stalled"));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(seen > 0, "no commit stall series for {group}");

    // It stops committing; records keep arriving.
    commit(&consumer, &topic, high_watermark(&topic, 0));
    let last_commit = wall_seconds();
    let mut checked = 0;
    while wall_seconds() - last_commit < 7.0 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let scrape = exporter.scrape().await;
        let (Some(value), Some(taken_at)) = (
            stall(&scrape),
            scrape.value("kafka_lso_exporter_last_success_timestamp_seconds", &[]),
        ) else {
            continue;
        };
        // The truth when the cycle was taken: its clock can read up to one interval
        // (and a cycle's duration) less, never more.
        let truth = taken_at - last_commit;
        if truth < 1.0 {
            // The cycle may have fetched the offsets before the last commit.
            continue;
        }
        assert!(
            value <= truth + 0.1 && value >= truth - INTERVAL - 0.6,
            "stall clock {value} s, truth {truth:.2} s"
        );
        checked += 1;
        if truth > 3.0 + INTERVAL + 0.6 {
            assert_eq!(
                status(&scrape, &group).as_deref(),
                Some("stopped"),
                "no commit for {truth:.1} s while its lag grows"
            );
        }
    }
    assert!(checked >= 5, "only {checked} scrapes had a stall clock");
    let (_, body) = exporter.get("/api/v1/stuck").await;
    let report: serde_json::Value = serde_json::from_str(&body).unwrap();
    let listed = report["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == group.as_str())
        .unwrap_or_else(|| panic!("{group} not in /api/v1/stuck: {body}"));
    assert_eq!(listed["status"], "stopped");
    assert!(listed["commit_stall_seconds"].as_f64().unwrap() > 3.0);

    // It commits again: back to 0, and ok.
    let resumed = Instant::now();
    let recovered = loop {
        commit(&consumer, &topic, high_watermark(&topic, 0));
        let scrape = exporter.scrape().await;
        if stall(&scrape) == Some(0.0) && status(&scrape, &group).as_deref() == Some("ok") {
            break true;
        }
        // Generous: on a machine running the other suites, a cycle or a commit can be
        // slow (this only bounds how long a failure takes to show).
        if resumed.elapsed() > Duration::from_secs(25) {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    stop.store(true, Ordering::SeqCst);
    producing.join().unwrap();
    exporter.stop().await;
    assert!(
        recovered,
        "the stall clock did not return to 0 after commits resumed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn retention_passes_a_group_blocked_behind_an_open_transaction() {
    require_kafka();
    let topic = unique("retention");
    let group = unique("retention-group");
    let retention_ms = 15_000;
    create_topic_with(
        &topic,
        1,
        &[("retention.ms", "15000"), ("segment.ms", "1000")],
    )
    .await;

    // Ten committed records, then a transaction left open at offset 10: the LSO stays 10.
    let plain = plain_producer();
    send(&plain, &topic, 0, 10);
    let transactional: Producer_ = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("transactional.id", unique("retention-tx"))
        .set("transaction.timeout.ms", "300000")
        .set("linger.ms", "0")
        .create()
        .expect("transactional producer");
    transactional
        .init_transactions(Duration::from_secs(30))
        .expect("init_transactions");
    transactional.begin_transaction().expect("begin");
    send(&transactional, &topic, 0, 3);
    // A read_committed group that read everything it may: committed at the LSO.
    commit(&committer(&group), &topic, 10);
    // Records keep arriving for a few seconds (new segments every second), then stop.
    let (stop, producing) = keep_producing(&topic, Duration::from_millis(300));

    // A compacted topic deletes nothing by age: no retention to count down.
    let compacted = unique("compacted");
    create_topic_with(&compacted, 1, &[("cleanup.policy", "compact")]).await;

    let exporter = Exporter::start(&format!("^({topic}|{compacted})$"), &group, &[]).await;
    let labels = group_labels(&group, &topic, "0");
    let margin = |s: &Scrape| s.value("kafka_consumergroup_retention_margin_seconds", &labels);
    let retention = exporter
        .wait_for("the topic's retention", Duration::from_secs(20), |s| {
            s.value(
                "kafka_topic_retention_seconds",
                &[("topic", topic.as_str())],
            )
        })
        .await;
    assert_eq!(retention, retention_ms as f64 / 1000.0);
    let scrape = exporter.scrape().await;
    assert!(
        scrape
            .value("kafka_topic_partitions", &[("topic", compacted.as_str())])
            .is_some()
            && scrape
                .value(
                    "kafka_topic_retention_seconds",
                    &[("topic", compacted.as_str())]
                )
                .is_none(),
        "a compacted topic is sampled and has no time retention"
    );
    let first = exporter
        .wait_for("a retention margin", Duration::from_secs(20), margin)
        .await;
    assert!(first <= retention && first > 0.0, "margin {first} s");
    assert_eq!(
        exporter
            .scrape()
            .await
            .value("kafka_consumergroup_retention_margin", &labels),
        Some(10.0),
        "committed 10 above log start 0"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::SeqCst);
    producing.join().unwrap();

    // The margin falls with the age of the record at the committed offset, and goes below
    // a quarter of the retention while nothing is lost yet: the early warning's window.
    let early = exporter
        .wait_for(
            "the margin below a quarter of the retention, nothing lost yet",
            Duration::from_secs(30),
            |s| {
                let value = margin(s)?;
                let lost = s.value(
                    "kafka_consumergroup_topic_lost_records",
                    &[("group", group.as_str()), ("topic", topic.as_str())],
                )?;
                (value < retention / 4.0 && value > 0.0 && lost == 0.0).then_some(value)
            },
        )
        .await;
    assert!(
        early < first,
        "the margin did not fall: {first} s then {early} s"
    );

    // Retention passes the committed offset: every record below the broker's log start
    // that the group had not consumed is lost.
    let consumer = committer(&unique("watermarks"));
    let (lost, log_start) = exporter
        .wait_for(
            "records lost to retention, agreeing with the broker's log start",
            Duration::from_secs(60),
            |s| {
                let lost = s.value(
                    "kafka_consumergroup_topic_lost_records",
                    &[("group", group.as_str()), ("topic", topic.as_str())],
                )?;
                let (log_start, _) = consumer
                    .fetch_watermarks(&topic, 0, Duration::from_secs(5))
                    .ok()?;
                (lost > 0.0 && lost == (log_start - 10) as f64).then_some((lost, log_start))
            },
        )
        .await;
    assert!(log_start > 10, "log start {log_start}");
    assert!(
        lost >= 3.0,
        "the open transaction's records are gone too: {lost}"
    );
    transactional
        .abort_transaction(Duration::from_secs(30))
        .expect("abort");
    exporter.stop().await;
}
