//! Share groups (KIP-932) against a real broker: a Java `KafkaShareConsumer` acknowledges
//! part of a topic; its start offset, its lag and the broker's own lag (KIP-1226) are
//! right, and a read_committed share group that has delivered everything below an open
//! transaction is shown as blocked by it.

mod common;

use std::time::Duration;

use common::java::{configure_group, ShareMember};
use common::*;
use rdkafka::producer::Producer;

fn anchored(name: &str) -> String {
    format!("^{}$", name.replace('.', "\\."))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn share_groups_progress_lag_and_blocked() {
    require_kafka();
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
    // counts exactly the 6 records not acknowledged; ours counts from the start offset.
    let start = exporter
        .wait_for("the broker's lag 6", Duration::from_secs(30), |s| {
            (s.value("kafka_sharegroup_broker_lag", &p)? == 6.0)
                .then(|| s.value("kafka_sharegroup_start_offset", &p))
                .flatten()
        })
        .await;
    assert!((0.0..=4.0).contains(&start), "start offset {start}");
    let s = exporter.scrape().await;
    assert_eq!(s.value("kafka_sharegroup_lag", &p), Some(10.0 - start));
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
    // transaction withholds (HW 14 - LSO 10), whatever its start offset says.
    exporter
        .wait_for(
            "the drained share group waiting at the LSO",
            Duration::from_secs(60),
            |s| (s.value("kafka_sharegroup_broker_lag", &d)? == 4.0).then_some(()),
        )
        .await;
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
    let s = exporter.scrape().await;
    assert_eq!(s.value("kafka_sharegroup_broker_lag", &p), Some(10.0));

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
