//! Streams groups (KIP-1071) against a real broker: two instances of a Kafka Streams
//! application with `group.protocol=streams` (tests/java/StreamsApp.java) copy a topic of
//! two partitions. The exporter describes the group with StreamsGroupDescribe: its type,
//! its state in the streams protocol's own names, its live members and its committed
//! offsets and lag are right, each member owns the input partitions of its active tasks,
//! and it falls back to Empty with 0 members when both instances leave.

mod common;

use std::time::Duration;

use common::java::StreamsApp;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_streams_group_described_by_its_own_protocol() {
    require_kafka();
    let input = unique("streams-in");
    let output = unique("streams-out");
    let app = unique("streams-app");
    create_topic(&input, 2).await;
    create_topic(&output, 2).await;
    let producer = plain_producer();
    send(&producer, &input, 0, 10);
    send(&producer, &input, 1, 10);

    let first = StreamsApp::start(&input, &output, &app);
    let second = StreamsApp::start(&input, &output, &app);

    let topics = format!("{}|{}", anchored(&input), anchored(&output));
    let exporter = Exporter::start(&topics, &anchored(&app), &[]).await;
    let group = [("kafka_cluster", "test"), ("group", app.as_str())];
    let state = |name: &'static str| {
        [
            ("kafka_cluster", "test"),
            ("group", app.as_str()),
            ("state", name),
        ]
    };
    exporter
        .wait_for(
            "the streams group Stable with 2 members, all 20 records committed",
            Duration::from_secs(90),
            |s| {
                let stable = s.value("kafka_consumergroup_state", &state("Stable"))?;
                let members = s.value("kafka_consumergroup_members", &group)?;
                let committed: f64 = ["0", "1"]
                    .iter()
                    .map(|p| {
                        s.value(
                            "kafka_consumergroup_committed_offset",
                            &group_labels(&app, &input, p),
                        )
                    })
                    .sum::<Option<f64>>()?;
                (stable == 1.0 && members == 2.0 && committed == 20.0).then_some(())
            },
        )
        .await;
    let s = exporter.scrape().await;
    assert_eq!(
        s.value(
            "kafka_consumergroup_info",
            &[
                ("kafka_cluster", "test"),
                ("group", &app),
                ("group_type", "streams"),
                ("protocol", "streams"),
            ]
        ),
        Some(1.0)
    );
    for p in ["0", "1"] {
        let labels = group_labels(&app, &input, p);
        assert_eq!(
            s.value("kafka_consumergroup_committed_offset", &labels),
            Some(10.0),
            "partition {p}"
        );
        assert_eq!(s.value("kafka_consumergroup_hw_lag", &labels), Some(0.0));
        assert_eq!(s.value("kafka_consumergroup_lso_lag", &labels), Some(0.0));
    }
    // Described without an error.
    assert_eq!(
        s.value(
            "kafka_lso_exporter_errors_total",
            &[("kafka_cluster", "test"), ("stage", "describe_groups")]
        )
        .unwrap_or(0.0),
        0.0
    );
    // Who owns each partition: the members' active tasks, read through the topology
    // (subtopology 0 reads the input topic): the two partitions between the two members.
    let owned = exporter
        .wait_for(
            "the streams members owning the input's partitions",
            Duration::from_secs(30),
            |s| {
                let per_member: Vec<f64> = s
                    .series("kafka_consumergroup_member_assigned_partitions", &group)
                    .map(|(_, v)| v)
                    .collect();
                (per_member.len() == 2 && per_member.iter().sum::<f64>() == 2.0)
                    .then_some(per_member)
            },
        )
        .await;
    assert!(
        owned.iter().all(|n| *n == 1.0),
        "one partition each: {owned:?}"
    );
    // The application reads its input only: nothing committed on its output.
    assert_eq!(
        s.value(
            "kafka_consumergroup_committed_offset",
            &group_labels(&app, &output, "0")
        ),
        None
    );
    // The streams protocol's own states; none of the classic ones.
    for name in ["Empty", "NotReady", "Assigning", "Reconciling"] {
        assert_eq!(
            s.value("kafka_consumergroup_state", &state(name)),
            Some(0.0),
            "{name}"
        );
    }
    assert_eq!(
        s.value("kafka_consumergroup_state", &state("PreparingRebalance")),
        None
    );

    // Both instances leave: Empty, no members, the committed offsets kept.
    first.stop();
    second.stop();
    exporter
        .wait_for(
            "the streams group Empty with 0 members",
            Duration::from_secs(30),
            |s| {
                (s.value("kafka_consumergroup_state", &state("Empty"))? == 1.0
                    && s.value("kafka_consumergroup_members", &group)? == 0.0)
                    .then_some(())
            },
        )
        .await;
    // Records written while nobody runs are the group's lag.
    send(&producer, &input, 0, 5);
    let p0 = group_labels(&app, &input, "0");
    exporter
        .wait_for("a lag of 5 on partition 0", Duration::from_secs(30), |s| {
            (s.value("kafka_consumergroup_hw_lag", &p0)? == 5.0).then_some(())
        })
        .await;
    let s = exporter.scrape().await;
    assert_eq!(
        s.value("kafka_consumergroup_committed_offset", &p0),
        Some(10.0)
    );
    assert_eq!(
        s.value(
            "kafka_consumergroup_hw_lag",
            &group_labels(&app, &input, "1")
        ),
        Some(0.0)
    );
    assert_eq!(s.value("kafka_consumergroup_members", &group), Some(0.0));
    exporter.stop().await;
}
