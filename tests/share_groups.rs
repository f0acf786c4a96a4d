//! Share groups (KIP-932) against a real broker: a Java `KafkaShareConsumer` acknowledges
//! part of a topic; its start offset, its lag and the broker's own lag (KIP-1226) are
//! right, and a read_committed share group that has delivered everything below an open
//! transaction is shown as blocked by it, with no lag.
//!
//! Share groups need Kafka 4.1 (where they are a preview, switched on here with the
//! `share.version` feature); the broker reports its own lag from Kafka 4.2, and the
//! exporter derives the group's lag from it; before, the lag counts from the start
//! offset, an upper bound.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::java::{configure_group, ShareMember};
use common::*;
use rdkafka::producer::Producer;

/// The broker reports a share group's lag (KIP-1226, DescribeShareGroupOffsets v1).
fn broker_reports_lag() -> bool {
    kafka_version() >= (4, 2)
}

/// Share groups on the broker under test: a preview on Kafka 4.1 to switch on with the
/// `share.version` feature, on by default from 4.2.
fn share_groups_on() {
    let version = kafka_version();
    assert!(
        version >= (4, 1),
        "share groups need Kafka 4.1 or later, the broker is {version:?}"
    );
    if version >= (4, 2) {
        return;
    }
    let output = Command::new(repo_root().join("scripts/kafka-local"))
        .args(["tool", "org.apache.kafka.tools.FeatureCommand"])
        .args(["--bootstrap-server", &bootstrap()])
        .args(["upgrade", "--feature", "share.version=1"])
        .output()
        .expect("run kafka-features");
    assert!(
        output.status.success(),
        "kafka-features upgrade share.version=1 failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn share_groups_progress_lag_and_blocked() {
    require_kafka();
    share_groups_on();
    let topic = unique("share");
    let partial = unique("share-partial");
    let drained = unique("share-drained");
    create_topic(&topic, 1).await;
    send(&plain_producer(), &topic, 0, 10);
    for group in [&partial, &drained] {
        configure_group(
            group,
            "share.auto.offset.reset=earliest,share.isolation.level=read_committed",
        );
    }

    // Acknowledges 4 of 10 records, then stops taking more.
    let partial_member = ShareMember::start(&topic, &partial, 4);
    partial_member.wait_acknowledged(4);

    let groups = format!("{}|{}", anchored(&partial), anchored(&drained));
    let exporter = Exporter::start(&anchored(&topic), &groups, &[]).await;
    let p = group_labels(&partial, &topic, "0");
    // The start offset moves only past whole acquired batches: it is 0 or up to 4,
    // depending on how the producer batched the records. The broker's lag (KIP-1226)
    // counts exactly the 6 records not acknowledged, and so does ours where there is
    // one; before Kafka 4.2 ours counts from the start offset.
    let start = if broker_reports_lag() {
        exporter
            .wait_for("the broker's lag 6", Duration::from_secs(30), |s| {
                (s.value("kafka_sharegroup_broker_lag", &p)? == 6.0)
                    .then(|| s.value("kafka_sharegroup_start_offset", &p))
                    .flatten()
            })
            .await
    } else {
        exporter
            .wait_for("the start offset", Duration::from_secs(30), |s| {
                s.value("kafka_sharegroup_start_offset", &p)
            })
            .await
    };
    assert!((0.0..=4.0).contains(&start), "start offset {start}");
    let s = exporter.scrape().await;
    let expected = if broker_reports_lag() {
        6.0
    } else {
        10.0 - start
    };
    assert_eq!(s.value("kafka_sharegroup_lag", &p), Some(expected));
    let s = exporter.scrape().await;
    assert_eq!(
        s.value(
            "kafka_sharegroup_isolation_level",
            &[
                ("kafka_cluster", "test"),
                ("group", &partial),
                ("isolation_level", "read_committed")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        s.value(
            "kafka_consumergroup_info",
            &[
                ("kafka_cluster", "test"),
                ("group", &partial),
                ("group_type", "share"),
                ("protocol", "share")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(s.value("kafka_consumergroup_committed_offset", &p), None);

    // An open transaction at 10, then 3 plain records: HW 14, LSO 10. A second share
    // group delivers everything it may (0..10) and waits at the LSO: blocked.
    let transaction = transactional_producer(&unique("share-t"));
    transaction.begin_transaction().unwrap();
    send(&transaction, &topic, 0, 1);
    send(&plain_producer(), &topic, 0, 3);
    wait_high_watermark(&topic, 0, 14);
    let drained_member = ShareMember::start(&topic, &drained, 1_000);
    let d = group_labels(&drained, &topic, "0");
    // It acknowledged all 10 records below the LSO: the broker's lag is what the
    // transaction withholds (HW 14 - LSO 10), whatever its start offset says, and it is
    // blocked, with no lag. Before Kafka 4.2 only the start offset tells: the lag counts
    // from it (an upper bound), and the group is blocked once it reaches the LSO.
    if broker_reports_lag() {
        exporter
            .wait_for(
                "the drained share group waiting at the LSO",
                Duration::from_secs(60),
                |s| (s.value("kafka_sharegroup_broker_lag", &d)? == 4.0).then_some(()),
            )
            .await;
        let s = exporter.scrape().await;
        assert_eq!(s.value("kafka_sharegroup_lag", &d), Some(0.0));
        assert_eq!(s.value("kafka_sharegroup_lag_seconds", &d), Some(0.0));
        let (_, body) = exporter.get("/api/v1/stuck").await;
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        let entry = json["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["topic"] == topic.as_str())
            .unwrap_or_else(|| panic!("{topic} not pinned in /api/v1/stuck: {body}"));
        assert_eq!(
            entry["blocked_groups"],
            serde_json::json!([drained]),
            "the drained read_committed share group is blocked, the one with 6 records left is not"
        );
        let (_, page) = exporter.get("/").await;
        assert!(page.contains(&drained), "blocked share group not on /");
    } else {
        let start = exporter
            .wait_for(
                "the drained share group's start offset",
                Duration::from_secs(30),
                |s| s.value("kafka_sharegroup_start_offset", &d),
            )
            .await;
        let s = exporter.scrape().await;
        if s.value("kafka_sharegroup_start_offset", &d) == Some(start) {
            assert_eq!(s.value("kafka_sharegroup_lag", &d), Some(10.0 - start));
        }
    }
    let s = exporter.scrape().await;
    let broker_lag = broker_reports_lag().then_some(10.0);
    assert_eq!(s.value("kafka_sharegroup_broker_lag", &p), broker_lag);

    // Both groups' progress in every cycle: a share coordinator can take seconds to
    // answer DescribeShareGroupOffsets, and the last progress read stands in meanwhile.
    let mut present: std::collections::BTreeMap<u64, bool> = Default::default();
    let watched = std::time::Instant::now();
    while watched.elapsed() < Duration::from_secs(10) {
        let s = exporter.scrape().await;
        let cycle = s
            .value(
                "kafka_lso_exporter_cycle_duration_seconds_count",
                &[("kafka_cluster", "test")],
            )
            .expect("cycle count") as u64;
        let both = s.value("kafka_sharegroup_start_offset", &p).is_some()
            && s.value("kafka_sharegroup_start_offset", &d).is_some();
        *present.entry(cycle).or_default() |= both;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let absent: Vec<u64> = present
        .iter()
        .filter(|(_, both)| !**both)
        .map(|(cycle, _)| *cycle)
        .collect();
    assert!(present.len() >= 6, "only {} cycles in 10 s", present.len());
    assert!(
        absent.is_empty(),
        "share-group progress absent in cycles {absent:?} of {}",
        present.len()
    );

    transaction
        .abort_transaction(Duration::from_secs(30))
        .unwrap();
    drop(drained_member);
    drop(partial_member);
    exporter.stop().await;
}

/// Sends `count` records to partition 0 with the given CreateTime.
fn send_at(producer: &Producer_, topic: &str, count: usize, timestamp_ms: i64) {
    send_with_timestamp(producer, topic, 0, count, Some(timestamp_ms));
}

/// The case: behind an open transaction, a read_committed share group that
/// acknowledged every record it may read has no lag, though its start offset may stand
/// below records it acknowledged; one that acknowledged only some has the others left,
/// the oldest of them as old as it is. Markers and aborted records are never lag.
///
/// The log: T1 commits 3 records written 120 s ago (0..3, marker 3), T2 aborts 2 (4, 5,
/// marker 6), 2 plain records written 60 s ago (7, 8), T3 opens at 9, 3 plain records
/// (10..13): HW 13, LSO 9. A read_committed group may read 0, 1, 2, 7 and 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn share_lag_behind_an_open_transaction_counts_only_what_is_left() {
    require_kafka();
    share_groups_on();
    let started = Instant::now();
    let topic = unique("share-eos");
    let drained = unique("share-eos-drained");
    let partial = unique("share-eos-partial");
    create_topic(&topic, 1).await;
    for group in [&drained, &partial] {
        configure_group(
            group,
            "share.auto.offset.reset=earliest,share.isolation.level=read_committed",
        );
    }
    let now = now_ms();
    let (oldest_ms, plain_ms) = (now - 120_000, now - 60_000);
    let producer = transactional_producer(&unique("share-eos-t"));
    producer.begin_transaction().unwrap();
    send_at(&producer, &topic, 3, oldest_ms);
    producer
        .commit_transaction(Duration::from_secs(30))
        .unwrap();
    producer.begin_transaction().unwrap();
    send_at(&producer, &topic, 2, now - 90_000);
    producer.abort_transaction(Duration::from_secs(30)).unwrap();
    send_at(&plain_producer(), &topic, 2, plain_ms);
    producer.begin_transaction().unwrap();
    send(&producer, &topic, 0, 1);
    send(&plain_producer(), &topic, 0, 3);
    wait_high_watermark(&topic, 0, 13);
    let (hw, lso) = (13.0, 9.0);
    // The offsets of the records a read_committed consumer may read, with their times.
    let readable = [
        (0.0, oldest_ms),
        (1.0, oldest_ms),
        (2.0, oldest_ms),
        (7.0, plain_ms),
        (8.0, plain_ms),
    ];
    let acknowledged = 2;

    let _drained_member = ShareMember::start(&topic, &drained, 1_000);
    let partial_member = ShareMember::start(&topic, &partial, acknowledged);
    partial_member.wait_acknowledged(acknowledged);
    let groups = format!("{}|{}", anchored(&drained), anchored(&partial));
    let exporter = Exporter::start(&anchored(&topic), &groups, &[]).await;
    let d = group_labels(&drained, &topic, "0");
    let p = group_labels(&partial, &topic, "0");
    let left = &readable[acknowledged..];
    let age = |written_ms: i64| (now_ms() - written_ms) as f64 / 1000.0;

    if broker_reports_lag() {
        // The broker counts every offset it has not seen acknowledged up to the HW:
        // what T3 withholds for the drained group; for the other one also the marker,
        // T2's aborted records and the records it has not passed.
        exporter
            .wait_for(
                "the drained group's broker lag",
                Duration::from_secs(30),
                |s| (s.value("kafka_sharegroup_broker_lag", &d)? == hw - lso).then_some(()),
            )
            .await;
        exporter
            .wait_for(
                "the partial group's broker lag",
                Duration::from_secs(30),
                |s| {
                    (s.value("kafka_sharegroup_broker_lag", &p)? == hw - acknowledged as f64)
                        .then_some(())
                },
            )
            .await;
        let s = exporter.scrape().await;
        let start = s.value("kafka_sharegroup_start_offset", &d).unwrap();
        eprintln!("drained group's start offset {start} (LSO {lso})");
        assert_eq!(s.value("kafka_sharegroup_lag", &d), Some(0.0));
        assert_eq!(s.value("kafka_sharegroup_lag_seconds", &d), Some(0.0));
        assert_eq!(s.value("kafka_sharegroup_lag", &p), Some(left.len() as f64));
        let seconds = s.value("kafka_sharegroup_lag_seconds", &p).unwrap();
        let oldest_left = left[0].1;
        assert!(
            seconds <= age(oldest_left) && seconds >= age(oldest_left) - 5.0,
            "oldest record left {seconds} s old, written {} s ago",
            age(oldest_left)
        );
    } else {
        // Without the broker's lag: from the start offset, an upper bound.
        exporter
            .wait_for("the start offsets", Duration::from_secs(30), |s| {
                s.value("kafka_sharegroup_start_offset", &p)?;
                s.value("kafka_sharegroup_start_offset", &d)
            })
            .await;
        let s = exporter.scrape().await;
        for labels in [&d, &p] {
            let start = s.value("kafka_sharegroup_start_offset", labels).unwrap();
            let from_start = readable.iter().filter(|(o, _)| *o >= start).count();
            assert_eq!(
                s.value("kafka_sharegroup_lag", labels),
                Some(from_start as f64),
                "{labels:?} from start offset {start}"
            );
        }
    }

    // T3 aborts (marker 13, HW = LSO = 14): the partial group has T3's 3 plain records
    // left too, not its aborted one nor the marker.
    producer.abort_transaction(Duration::from_secs(30)).unwrap();
    if broker_reports_lag() {
        let more = 3.0;
        exporter
            .wait_for("the lags after T3 aborted", Duration::from_secs(30), |s| {
                (s.value("kafka_sharegroup_lag", &p)? == left.len() as f64 + more
                    && s.value("kafka_sharegroup_lag", &d)? == 0.0)
                    .then_some(())
            })
            .await;
    }
    exporter.stop().await;
    eprintln!(
        "share lag behind an open transaction: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
