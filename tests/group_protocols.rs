//! Consumer groups of the new protocol (KIP-848, `group.protocol=consumer`) beside a
//! classic group, against a real broker: one live member through librdkafka and one Java
//! consumer from kafka-clients. Their type, state in the protocol's own names, live
//! members and lag are right, and they fall back to Empty with 0 members when both leave.

mod common;

use std::time::Duration;

use common::java::JavaMember;
use common::members::RdkafkaMember;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kip_848_groups_beside_a_classic_group() {
    require_kafka();
    let topic = unique("kip848");
    let modern = unique("kip848-consumer-protocol");
    let classic = unique("kip848-classic");
    create_topic(&topic, 2).await;
    let producer = plain_producer();
    send(&producer, &topic, 0, 10);
    send(&producer, &topic, 1, 10);

    let java = JavaMember::join(&topic, &modern, "consumer");
    // librdkafka speaks the protocol as Kafka 4.0 made it generally available
    // (ConsumerGroupHeartbeat v1); a 3.x broker has only the preview (v0), which the 3.x
    // Java client speaks: there the second member is a Java one too.
    let (second_rdkafka, second_java) = if kafka_version() >= (4, 0) {
        (Some(RdkafkaMember::join(&topic, &modern, "consumer")), None)
    } else {
        (None, Some(JavaMember::join(&topic, &modern, "consumer")))
    };
    let classic_member = RdkafkaMember::join(&topic, &classic, "classic");

    let groups = format!("{}|{}", anchored(&modern), anchored(&classic));
    let exporter = Exporter::start(&anchored(&topic), &groups, &[]).await;
    fn group(name: &str) -> [(&str, &str); 2] {
        [("kafka_cluster", "test"), ("group", name)]
    }
    fn state<'a>(name: &'a str, group: &'a str) -> [(&'a str, &'a str); 3] {
        [("kafka_cluster", "test"), ("group", group), ("state", name)]
    }
    let modern_name = modern.as_str();
    let classic_name = classic.as_str();
    exporter
        .wait_for(
            "the KIP-848 group Stable with 2 members, its lag 0",
            Duration::from_secs(60),
            |s| {
                let stable = s.value("kafka_consumergroup_state", &state("Stable", modern_name))?;
                let members = s.value("kafka_consumergroup_members", &group(modern_name))?;
                let lag: f64 = ["0", "1"]
                    .iter()
                    .map(|p| {
                        s.value(
                            "kafka_consumergroup_hw_lag",
                            &group_labels(modern_name, &topic, p),
                        )
                    })
                    .sum::<Option<f64>>()?;
                (stable == 1.0 && members == 2.0 && lag == 0.0).then_some(())
            },
        )
        .await;
    let s = exporter.scrape().await;
    assert_eq!(
        s.value(
            "kafka_consumergroup_info",
            &[
                ("kafka_cluster", "test"),
                ("group", modern_name),
                ("group_type", "consumer"),
                ("protocol", "consumer"),
            ]
        ),
        Some(1.0)
    );
    // The consumer protocol's own states; none of the classic ones.
    for name in ["Empty", "Assigning", "Reconciling"] {
        assert_eq!(
            s.value("kafka_consumergroup_state", &state(name, modern_name)),
            Some(0.0),
            "{name}"
        );
    }
    // Dead only while it is the state.
    assert_eq!(
        s.value("kafka_consumergroup_state", &state("Dead", modern_name)),
        None
    );
    assert_eq!(
        s.value(
            "kafka_consumergroup_state",
            &state("PreparingRebalance", modern_name)
        ),
        None
    );
    // The classic group beside it.
    exporter
        .wait_for(
            "the classic group Stable with 1 member",
            Duration::from_secs(30),
            |s| {
                (s.value("kafka_consumergroup_state", &state("Stable", classic_name))? == 1.0
                    && s.value("kafka_consumergroup_members", &group(classic_name))? == 1.0)
                    .then_some(())
            },
        )
        .await;
    let s = exporter.scrape().await;
    assert_eq!(
        s.value(
            "kafka_consumergroup_info",
            &[
                ("kafka_cluster", "test"),
                ("group", classic_name),
                ("group_type", "classic"),
                ("protocol", "consumer"),
            ]
        ),
        Some(1.0)
    );

    // Both members of the KIP-848 group leave: Empty, no members.
    drop(second_rdkafka);
    if let Some(member) = second_java {
        member.leave();
    }
    java.leave();
    exporter
        .wait_for(
            "the KIP-848 group Empty with 0 members",
            Duration::from_secs(30),
            |s| {
                (s.value("kafka_consumergroup_state", &state("Empty", modern_name))? == 1.0
                    && s.value("kafka_consumergroup_members", &group(modern_name))? == 0.0)
                    .then_some(())
            },
        )
        .await;
    drop(classic_member);
    exporter.stop().await;
}
