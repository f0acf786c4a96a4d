//! kafka_exporter's metric families, for the dashboards and alerts users already run on
//! them (Strimzi's, Grafana's Kafka Exporter Overview, kafka_exporter's own): shown when a
//! cluster sets `compat = ["kafka_exporter"]`, rendered from the same snapshot as
//! everything else, with no request of their own.
//!
//! Names, label names and meanings are kafka_exporter's (danielqsj/kafka_exporter), with
//! the cluster in `kafka_cluster` so that one exporter can serve several clusters. They
//! are per partition whatever the granularity: what those dashboards query.
//! Where the meanings differ, the difference is on purpose and in docs/metrics.md:
//! `kafka_consumergroup_lag` does not count commit/abort markers (an exactly-once
//! consumer at rest has lag 0, not 1 per partition). `kafka_consumergroup_members` is
//! also a family of ours; the collector adds `consumergroup` to it.

use prometheus_client::metrics::MetricType;

use super::visit::{gauge, Labels, Owner, Shown, Visitor, CLUSTER_LABEL};
use crate::derive::PartitionState;
use crate::kafka::Replication;

/// Writes the families of every cluster that asked for them.
pub(super) fn visit(out: &mut dyn Visitor, shown: &[Shown]) {
    let shown: Vec<&Shown> = shown
        .iter()
        .filter(|c| c.snapshot.exposition.kafka_exporter)
        .collect();
    if shown.is_empty() {
        return;
    }

    // Both from the last cycle's metadata; absent while the cluster is down.
    out.family(
        "kafka_brokers",
        "Number of Brokers in the Kafka Cluster.",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown.iter().filter(|c| c.snapshot.up) {
                let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
                emit(
                    Owner::Cluster,
                    &labels,
                    gauge(cluster.snapshot.brokers.len() as i64),
                );
            }
        },
    );
    out.family(
        "kafka_broker_info",
        "Information about the Kafka Broker.",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown.iter().filter(|c| c.snapshot.up) {
                for (id, address) in &cluster.snapshot.brokers {
                    let id = id.to_string();
                    let labels: &Labels = &[
                        (CLUSTER_LABEL, cluster.cluster()),
                        ("id", &id),
                        ("address", address),
                    ];
                    emit(Owner::Cluster, &labels, gauge(1));
                }
            }
        },
    );
    // kafka_topic_partitions is a family of ours with the same name and meaning.

    type PartitionValue = fn(&PartitionState) -> Option<i64>;
    let partition_families: [(&str, &str, PartitionValue); 7] = [
        (
            "kafka_topic_partition_current_offset",
            "Current Offset of a Broker at Topic/Partition",
            |p| p.high_watermark,
        ),
        (
            "kafka_topic_partition_oldest_offset",
            "Oldest Offset of a Broker at Topic/Partition",
            |p| p.log_start_offset,
        ),
        (
            "kafka_topic_partition_leader",
            "Leader Broker ID of this Topic/Partition",
            |p| p.replication.map(|r| i64::from(r.leader)),
        ),
        (
            "kafka_topic_partition_replicas",
            "Number of Replicas for this Topic/Partition",
            |p| p.replication.map(|r| i64::from(r.replicas)),
        ),
        (
            "kafka_topic_partition_in_sync_replica",
            "Number of In-Sync Replicas for this Topic/Partition",
            |p| p.replication.map(|r| i64::from(r.in_sync_replicas)),
        ),
        (
            "kafka_topic_partition_leader_is_preferred",
            "1 if Topic/Partition is using the Preferred Broker",
            |p| {
                p.replication.map(|r: Replication| {
                    i64::from(r.leader >= 0 && r.leader == r.preferred_leader)
                })
            },
        ),
        (
            "kafka_topic_partition_under_replicated_partition",
            "1 if Topic/Partition is under Replicated",
            |p| {
                p.replication
                    .map(|r| i64::from(r.in_sync_replicas < r.replicas))
            },
        ),
    ];
    for (name, help, value) in partition_families {
        out.family(name, help, MetricType::Gauge, &mut |emit| {
            for cluster in &shown {
                for p in &cluster.snapshot.partitions {
                    if let Some(v) = value(p) {
                        let labels: &Labels =
                            &[(CLUSTER_LABEL, cluster.cluster()), ("topic", &p.topic)];
                        emit(
                            Owner::Cluster,
                            &(labels, [("partition", p.partition)]),
                            gauge(v),
                        );
                    }
                }
            }
        });
    }

    type OffsetValue = fn(&crate::derive::GroupPartitionState) -> Option<i64>;
    let group_partition_families: [(&str, &str, OffsetValue); 2] = [
        ("kafka_consumergroup_current_offset", "Current Offset of a ConsumerGroup at Topic/Partition", |o| {
            Some(o.committed_offset)
        }),
        ("kafka_consumergroup_lag", "Current Approximate Lag of a ConsumerGroup at Topic/Partition (records up to the high watermark; commit/abort markers not counted)", |o| {
            o.lag.map(|l| l.hw_lag)
        }),
    ];
    for (name, help, value) in group_partition_families {
        out.family(name, help, MetricType::Gauge, &mut |emit| {
            for cluster in &shown {
                for group in cluster
                    .snapshot
                    .groups
                    .iter()
                    .filter(|g| g.group_type != "share")
                {
                    for o in group.offsets.iter().flatten() {
                        if cluster.hides(o) {
                            continue;
                        }
                        if let Some(v) = value(o) {
                            let labels: &Labels = &[
                                (CLUSTER_LABEL, cluster.cluster()),
                                ("consumergroup", &group.name),
                                ("topic", &o.topic),
                            ];
                            emit(
                                cluster.offsets_of(&group.name),
                                &(labels, [("partition", o.partition)]),
                                gauge(v),
                            );
                        }
                    }
                }
            }
        });
    }

    type TopicValue = fn(&crate::derive::series::GroupTopicAggregate) -> Option<i64>;
    let group_topic_families: [(&str, &str, TopicValue); 2] = [
        (
            "kafka_consumergroup_current_offset_sum",
            "Current Offset of a ConsumerGroup at Topic for all partitions",
            |t| t.committed_offset_sum,
        ),
        (
            "kafka_consumergroup_lag_sum",
            "Current Approximate Lag of a ConsumerGroup at Topic for all partitions",
            |t| t.hw_lag,
        ),
    ];
    for (name, help, value) in group_topic_families {
        out.family(name, help, MetricType::Gauge, &mut |emit| {
            for cluster in &shown {
                for (group, topics) in cluster.snapshot.groups.iter().zip(&cluster.group_topics) {
                    if group.group_type == "share" {
                        continue;
                    }
                    for t in topics {
                        if let Some(v) = value(t) {
                            let labels: &Labels = &[
                                (CLUSTER_LABEL, cluster.cluster()),
                                ("consumergroup", &group.name),
                                ("topic", &t.topic),
                            ];
                            emit(cluster.offsets_of(&group.name), &labels, gauge(v));
                        }
                    }
                }
            }
        });
    }
}
