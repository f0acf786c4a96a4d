//! The exporter's own families, each declared once with its name, help and value, by the
//! part of the snapshot it reads: partitions (every one in `partition` granularity,
//! pinned ones in `topic` granularity), topics, groups per partition and per topic, the
//! cluster's transactions, the cost of exactly-once, and the exporter's own per-cluster
//! state. Each is walked by a [`Visitor`] ([`super::visit`]): the same code renders them
//! and counts them for the cardinality guard.

use std::time::UNIX_EPOCH;

use prometheus_client::metrics::MetricType;

use super::visit::{gauge, Labels, Owner, Sample, Shown, Value, Visitor, CLUSTER_LABEL};
use crate::derive::series::{GroupTopicAggregate, TopicAggregate};
use crate::derive::{group_states, GroupState};
use crate::kafka::features::Status;

/// Every family of ours, in the order `/metrics` shows them.
pub(super) fn visit(out: &mut dyn Visitor, shown: &[Shown]) {
    visit_partitions(out, shown);
    visit_topics(out, shown);
    visit_groups(out, shown);
    visit_group_isolation(out, shown);
    visit_cluster_transactions(out, shown);
    visit_eos_cost(out, shown);
    visit_exporter(out, shown);
}

/// Per-partition series: every partition in `partition` granularity, pinned ones in
/// `topic` granularity.
fn visit_partitions(out: &mut dyn Visitor, shown: &[Shown]) {
    type PartitionValue = fn(&crate::derive::PartitionState) -> Option<Value>;
    let partition_families: [(&str, &str, PartitionValue); 9] = [
        ("kafka_partition_log_start_offset", "Earliest offset of the partition", |p| {
            p.log_start_offset.map(Value::Count)
        }),
        ("kafka_partition_high_watermark", "High watermark: the latest offset under read_uncommitted", |p| {
            p.high_watermark.map(Value::Count)
        }),
        ("kafka_partition_last_stable_offset", "Last stable offset: the latest offset under read_committed", |p| {
            p.last_stable_offset.map(Value::Count)
        }),
        ("kafka_partition_hw_minus_lso", "High watermark minus last stable offset: records withheld from read_committed consumers by open transactions", |p| {
            p.visibility.map(|v| Value::Count(v.hw_minus_lso))
        }),
        ("kafka_partition_lso_stuck_seconds", "Seconds the last stable offset has not moved while behind the high watermark; 0 when they are equal", |p| {
            p.visibility.map(|v| Value::Seconds(v.lso_stuck_seconds))
        }),
        ("kafka_partition_withheld_age_seconds", "Age of the oldest record withheld from read_committed consumers (the record at the last stable offset), from its timestamp; 0 when the high watermark equals the last stable offset", |p| {
            p.withheld_age_seconds.map(Value::Seconds)
        }),
        ("kafka_partition_open_transactions", "Open transactions in the partition (asked of the leader only while HW > LSO; 0 when they are equal)", |p| {
            p.transactions.as_ref().map(|t| Value::Count(t.len() as i64))
        }),
        ("kafka_partition_oldest_transaction_age_seconds", "Age of the oldest open transaction in the partition whose age is known (see kafka_transaction_open_age_seconds); 0 when none is open, absent when none can be dated", |p| {
            p.oldest_transaction_age().map(Value::Seconds)
        }),
        ("kafka_partition_hanging_transactions", "Open transactions in the partition older than transaction.max.timeout.ms plus hanging_margin (KIP-664), by the age of kafka_transaction_open_age_seconds; one of unknown age is never counted", |p| {
            p.transactions.as_ref().map(|t| Value::Count(t.iter().filter(|t| t.hanging).count() as i64))
        }),
    ];
    for (name, help, value) in partition_families {
        out.family(name, help, MetricType::Gauge, &mut |emit| {
            for cluster in shown {
                let exposition = cluster.snapshot.exposition;
                for p in cluster
                    .snapshot
                    .partitions
                    .iter()
                    .filter(|p| exposition.partition_detail(p))
                {
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

    type TransactionValue = fn(&crate::derive::OpenTransaction) -> Option<Value>;
    let transaction_families: [(&str, &str, TransactionValue); 2] = [
        ("kafka_transaction_open_info", "An open transaction holding records of the partition back from read_committed consumers; always 1 (its age: kafka_transaction_open_age_seconds)", |_| {
            Some(Value::Count(1))
        }),
        ("kafka_transaction_open_age_seconds", "Age of an open transaction in the partition: from its coordinator's start time when the coordinator reports it open there, else the oldest of the LogAppendTime of its first record, the time since the exporter first saw it and, for a transaction no coordinator knows that was open before the exporter first looked, the producer's clock (its first record's CreateTime, else its last write); absent when none applies", |t| {
            t.age_seconds.map(Value::Seconds)
        }),
    ];
    for (name, help, value) in transaction_families {
        out.family(name, help, MetricType::Gauge, &mut |emit| {
            for cluster in shown {
                let exposition = cluster.snapshot.exposition;
                for p in cluster
                    .snapshot
                    .partitions
                    .iter()
                    .filter(|p| exposition.partition_detail(p))
                {
                    for t in p.transactions.iter().flatten() {
                        let producer_id = t.producer_id.to_string();
                        let producer_epoch = t.producer_epoch.to_string();
                        let start_offset = t.start_offset.to_string();
                        let labels: &Labels = &[
                            (CLUSTER_LABEL, cluster.cluster()),
                            ("topic", &p.topic),
                            ("partition", &p.partition.to_string()),
                            ("transactional_id", &t.transactional_id),
                            ("producer_id", &producer_id),
                            ("producer_epoch", &producer_epoch),
                            ("start_offset", &start_offset),
                        ];
                        if let Some(v) = value(t) {
                            emit(Owner::Cluster, &labels, gauge(v));
                        }
                    }
                }
            }
        });
    }
}

/// Per-topic aggregates of the partitions, in every granularity.
fn visit_topics(out: &mut dyn Visitor, shown: &[Shown]) {
    type TopicValue = fn(&TopicAggregate) -> Option<Value>;
    let topic_families: [(&str, &str, TopicValue); 10] = [
        ("kafka_topic_partitions", "Partitions of the topic sampled in the last cycle", |t| {
            Some(Value::Count(t.partitions))
        }),
        ("kafka_topic_withheld_partitions", "Partitions of the topic whose high watermark is ahead of their last stable offset: an open transaction withholds records there", |t| {
            t.withheld_partitions.map(Value::Count)
        }),
        ("kafka_topic_log_start_offset", "Sum of the log start offsets of the topic's partitions", |t| {
            t.log_start_offset_sum.map(Value::Count)
        }),
        ("kafka_topic_high_watermark", "Sum of the high watermarks of the topic's partitions; its rate is the records (and markers) written per second", |t| {
            t.high_watermark_sum.map(Value::Count)
        }),
        ("kafka_topic_last_stable_offset", "Sum of the last stable offsets of the topic's partitions; its rate is what becomes visible to read_committed consumers per second", |t| {
            t.last_stable_offset_sum.map(Value::Count)
        }),
        ("kafka_topic_max_hw_minus_lso", "Largest high watermark minus last stable offset of the topic's partitions", |t| {
            t.max_hw_minus_lso.map(Value::Count)
        }),
        ("kafka_topic_max_lso_stuck_seconds", "Longest time a last stable offset of the topic has not moved while behind its high watermark", |t| {
            t.max_lso_stuck_seconds.map(Value::Seconds)
        }),
        ("kafka_topic_max_withheld_age_seconds", "Age of the oldest record of the topic withheld from read_committed consumers, from its timestamp", |t| {
            t.max_withheld_age_seconds.map(Value::Seconds)
        }),
        ("kafka_topic_open_transactions", "Open transactions in the topic's partitions, counted once per partition they write to", |t| {
            t.open_transactions.map(Value::Count)
        }),
        ("kafka_topic_hanging_transactions", "Hanging transactions in the topic's partitions, counted once per partition they hold", |t| {
            t.hanging_transactions.map(Value::Count)
        }),
    ];
    for (name, help, value) in topic_families {
        out.family(name, help, MetricType::Gauge, &mut |emit| {
            for cluster in shown {
                for t in &cluster.topics {
                    if let Some(v) = value(t) {
                        let labels: &Labels =
                            &[(CLUSTER_LABEL, cluster.cluster()), ("topic", &t.topic)];
                        emit(Owner::Cluster, &labels, gauge(v));
                    }
                }
            }
        });
    }

    out.family("kafka_topic_retention_seconds",
        "The topic's retention.ms in seconds (DescribeConfigs, read again every 10 min); absent when retention is unlimited or could not be read",
        MetricType::Gauge, &mut |emit| {
    for cluster in shown {
        for t in &cluster.topics {
            let Some(&ms) = cluster.snapshot.retention_ms.get(&t.topic) else {
                continue;
            };
            if ms >= 0 {
                let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster()), ("topic", &t.topic)];
                emit(Owner::Cluster, &labels, gauge(Value::Seconds(ms as f64 / 1000.0)));
            }
        }
    }
});
}

fn visit_groups(out: &mut dyn Visitor, shown: &[Shown]) {
    type LagValue = fn(&crate::derive::GroupPartitionState) -> Option<Value>;
    let group_partition_families: [(&str, &str, LagValue); 10] = [
        ("kafka_consumergroup_committed_offset", "Committed offset of the group", |g| {
            Some(Value::Count(g.committed_offset))
        }),
        ("kafka_consumergroup_hw_lag", "Records a consumer at the committed offset would still receive up to the high watermark: max(0, high watermark - committed offset) less the commit/abort markers in that range", |g| {
            g.lag.map(|l| Value::Count(l.hw_lag))
        }),
        ("kafka_consumergroup_lso_lag", "Records a read_committed consumer at the committed offset can still read now: up to the last stable offset, less commit/abort markers and records of aborted transactions", |g| {
            g.lag.map(|l| Value::Count(l.lso_lag))
        }),
        ("kafka_consumergroup_committed_beyond_lso", "max(0, committed offset - last stable offset): records read before their transaction was decided", |g| {
            g.lag.map(|l| Value::Count(l.committed_beyond_lso))
        }),
        ("kafka_consumergroup_hw_lag_seconds", "Seconds since the first record the group would still receive up to the high watermark was written; 0 when there is none", |g| {
            g.hw_time_lag.map(|t| Value::Seconds(t.seconds()))
        }),
        ("kafka_consumergroup_lso_lag_seconds", "Seconds since the first record a read_committed consumer at the committed offset could read now was written; 0 when there is none", |g| {
            g.lso_time_lag.map(|t| Value::Seconds(t.seconds()))
        }),
        ("kafka_consumergroup_commit_stall_seconds", "Seconds since the group's committed offset last moved while it had something to read (a clock of the exporter's; where it first sees the group-partition, dated by the first record left to read); 0 when it has nothing to read", |g| {
            g.commit_stall_seconds.map(Value::Seconds)
        }),
        ("kafka_consumergroup_retention_margin", "Committed offset minus the log start offset, at least 0: offsets retention can delete before it reaches the group's next unread record", |g| {
            g.retention_margin.map(Value::Count)
        }),
        ("kafka_consumergroup_retention_margin_seconds", "The topic's retention.ms less the age of the first record the group has not consumed (the whole retention when there is none): at least this many seconds before time retention can delete it; 0 once it is gone", |g| {
            g.retention_margin_seconds.map(Value::Seconds)
        }),
        ("kafka_consumergroup_lost_records", "Offsets between the committed offset and the log start offset once retention passed the committed offset: records deleted before the group consumed them (only while above 0)", |g| {
            g.lost_records.filter(|n| *n > 0).map(Value::Count)
        }),
    ];
    for (name, help, value) in group_partition_families {
        out.family(name, help, MetricType::Gauge, &mut |emit| {
            for cluster in shown {
                for group in cluster
                    .snapshot
                    .groups
                    .iter()
                    .filter(|g| g.group_type != "share")
                {
                    for g in group.offsets.iter().flatten() {
                        if !cluster.group_partition_detail(group, &g.topic, g.partition)
                            || cluster.hides(g)
                        {
                            continue;
                        }
                        if let Some(v) = value(g) {
                            let labels: &Labels = &[
                                (CLUSTER_LABEL, cluster.cluster()),
                                ("group", &group.name),
                                ("topic", &g.topic),
                            ];
                            emit(
                                cluster.offsets_of(&group.name),
                                &(labels, [("partition", g.partition)]),
                                gauge(v),
                            );
                        }
                    }
                }
            }
        });
    }

    type GroupTopicValue = fn(&GroupTopicAggregate) -> Option<Value>;
    let group_topic_families: [(&str, &str, GroupTopicValue); 9] = [
        ("kafka_consumergroup_topic_committed_offset", "Sum of the group's committed offsets on the topic; its rate is the group's progress in offsets per second", |t| {
            t.committed_offset_sum.map(Value::Count)
        }),
        ("kafka_consumergroup_topic_hw_lag", "Sum over the topic's partitions of kafka_consumergroup_hw_lag", |t| {
            t.hw_lag.map(Value::Count)
        }),
        ("kafka_consumergroup_topic_lso_lag", "Sum over the topic's partitions of kafka_consumergroup_lso_lag", |t| {
            t.lso_lag.map(Value::Count)
        }),
        ("kafka_consumergroup_topic_committed_beyond_lso", "Sum over the topic's partitions of kafka_consumergroup_committed_beyond_lso", |t| {
            t.committed_beyond_lso.map(Value::Count)
        }),
        ("kafka_consumergroup_topic_max_hw_lag_seconds", "Largest kafka_consumergroup_hw_lag_seconds of the group's partitions of the topic", |t| {
            t.max_hw_lag_seconds.map(Value::Seconds)
        }),
        ("kafka_consumergroup_topic_max_lso_lag_seconds", "Largest kafka_consumergroup_lso_lag_seconds of the group's partitions of the topic", |t| {
            t.max_lso_lag_seconds.map(Value::Seconds)
        }),
        ("kafka_consumergroup_topic_max_commit_stall_seconds", "Longest kafka_consumergroup_commit_stall_seconds of the group's partitions of the topic", |t| {
            t.max_commit_stall_seconds.map(Value::Seconds)
        }),
        ("kafka_consumergroup_topic_min_retention_margin_seconds", "Smallest kafka_consumergroup_retention_margin_seconds of the group's partitions of the topic", |t| {
            t.min_retention_margin_seconds.map(Value::Seconds)
        }),
        ("kafka_consumergroup_topic_lost_records", "Sum over the topic's partitions of kafka_consumergroup_lost_records (0 when none was lost)", |t| {
            t.lost_records.map(Value::Count)
        }),
    ];
    for (name, help, value) in group_topic_families {
        visit_group_topics(out, shown, name, help, false, value);
    }

    type RateValue = fn(&crate::derive::TopicRate) -> Option<Value>;
    let rate_families: [(&str, &str, RateValue); 3] = [
        ("kafka_consumergroup_topic_consume_rate", "Offsets per second the group's committed offsets on the topic advanced over the cluster's groups.rate_window, from the exporter's own samples (absent until two samples half a window apart)", |r| {
            r.consume_rate.map(Value::Seconds)
        }),
        ("kafka_consumergroup_topic_produce_rate", "Offsets per second the bound the group reads up to advanced over groups.rate_window, summed over the topic's partitions: the LSO for a group that reads committed, the HW for one that committed past the LSO", |r| {
            r.produce_rate.map(Value::Seconds)
        }),
        ("kafka_consumergroup_topic_catchup_seconds", "Seconds until the group has read everything on the topic at its current rates: the offsets left to its bound / (consume rate - produce rate); 0 when caught up, or when it reads at the pace records arrive with a standing lag it reads in under a minute (commits in batches); absent when it does not close, while an open transaction pins the LSO a read_committed group waits at (it waits for the transaction), or before the rates are known", |r| {
            match r.catchup {
                crate::derive::Catchup::Seconds(s) => Some(Value::Seconds(s)),
                crate::derive::Catchup::CaughtUp | crate::derive::Catchup::KeepsUp => {
                    Some(Value::Seconds(0.0))
                }
                _ => None,
            }
        }),
    ];
    for (name, help, value) in rate_families {
        out.family(name, help, MetricType::Gauge, &mut |emit| {
            for cluster in shown {
                for group in &cluster.snapshot.groups {
                    for r in &group.rates {
                        if cluster.hides_topic(group, &r.topic) {
                            continue;
                        }
                        if let Some(v) = value(r) {
                            let labels: &Labels = &[
                                (CLUSTER_LABEL, cluster.cluster()),
                                ("group", &group.name),
                                ("topic", &r.topic),
                            ];
                            emit(cluster.offsets_of(&group.name), &labels, gauge(v));
                        }
                    }
                }
            }
        });
    }

    type ShareValue = fn(&GroupState, &crate::derive::GroupPartitionState) -> Option<Value>;
    let share_families: [(&str, &str, ShareValue); 3] = [
        ("kafka_sharegroup_start_offset", "Share-partition start offset of the share group: every record below it has been delivered and acknowledged", |_, g| {
            Some(Value::Count(g.committed_offset))
        }),
        ("kafka_sharegroup_lag", "Records the share group may still deliver from its start offset: up to the last stable offset with share.isolation.level=read_committed, up to the high watermark otherwise; never commit/abort markers", |group, g| {
            group.share_lag(g).map(Value::Count)
        }),
        ("kafka_sharegroup_lag_seconds", "Seconds since the first record the share group may still deliver was written; 0 when there is none", |group, g| {
            group.share_lag_seconds(g).map(Value::Seconds)
        }),
    ];
    for (name, help, value) in share_families {
        out.family(name, help, MetricType::Gauge, &mut |emit| {
            for cluster in shown {
                for group in cluster
                    .snapshot
                    .groups
                    .iter()
                    .filter(|g| g.group_type == "share")
                {
                    for g in group.offsets.iter().flatten() {
                        if !cluster.group_partition_detail(group, &g.topic, g.partition)
                            || cluster.hides(g)
                        {
                            continue;
                        }
                        if let Some(v) = value(group, g) {
                            let labels: &Labels = &[
                                (CLUSTER_LABEL, cluster.cluster()),
                                ("group", &group.name),
                                ("topic", &g.topic),
                            ];
                            emit(
                                cluster.offsets_of(&group.name),
                                &(labels, [("partition", g.partition)]),
                                gauge(v),
                            );
                        }
                    }
                }
            }
        });
    }

    out.family("kafka_sharegroup_broker_lag",
        "The share group's lag on the partition as its broker computes it (KIP-1226, Kafka 4.2 and later): records past the start offset not yet acknowledged",
        MetricType::Gauge, &mut |emit| {
    for cluster in shown {
        for group in &cluster.snapshot.groups {
            for lag in &group.broker_lags {
                if !cluster.group_partition_detail(group, &lag.topic, lag.partition) {
                    continue;
                }
                let labels: &Labels = &[
                    (CLUSTER_LABEL, cluster.cluster()),
                    ("group", &group.name),
                    ("topic", &lag.topic),
                ];
                emit(
                    cluster.offsets_of(&group.name),
                    &(labels, [("partition", lag.partition)]),
                    gauge(lag.lag),
                );
            }
        }
    }
});

    let share_topic_families: [(&str, &str, GroupTopicValue); 3] = [
        ("kafka_sharegroup_topic_lag", "Sum over the topic's partitions of kafka_sharegroup_lag", |t| {
            t.share_lag.map(Value::Count)
        }),
        ("kafka_sharegroup_topic_max_lag_seconds", "Largest kafka_sharegroup_lag_seconds of the share group's partitions of the topic", |t| {
            t.max_share_lag_seconds.map(Value::Seconds)
        }),
        ("kafka_sharegroup_topic_broker_lag", "Sum over the partitions of the topic its brokers reported of kafka_sharegroup_broker_lag", |t| {
            t.broker_lag.map(Value::Count)
        }),
    ];
    for (name, help, value) in share_topic_families {
        visit_group_topics(out, shown, name, help, true, value);
    }

    out.family(
        "kafka_sharegroup_isolation_level",
        "The share group's share.isolation.level; always 1",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                for group in &cluster.snapshot.groups {
                    if let Some(isolation) = group.isolation {
                        let labels: &Labels = &[
                            (CLUSTER_LABEL, cluster.cluster()),
                            ("group", &group.name),
                            ("isolation_level", isolation.as_str()),
                        ];
                        emit(Owner::Cluster, &labels, gauge(1));
                    }
                }
            }
        },
    );

    out.family("kafka_consumergroup_info",
        "The group's type (classic, consumer, share, streams) and its members' protocol type; always 1",
        MetricType::Gauge, &mut |emit| {
    for cluster in shown {
        for group in &cluster.snapshot.groups {
            let labels: &Labels = &[
                (CLUSTER_LABEL, cluster.cluster()),
                ("group", &group.name),
                ("group_type", &group.group_type),
                ("protocol", &group.protocol),
            ];
            emit(Owner::Cluster, &labels, gauge(1));
        }
    }
});

    out.family(
        "kafka_consumergroup_members",
        "Live members of the consumer group (absent when it could not be described)",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                for group in &cluster.snapshot.groups {
                    let Some(members) = group.members else {
                        continue;
                    };
                    if cluster.snapshot.exposition.kafka_exporter {
                        // kafka_exporter's family of the same name labels the group
                        // `consumergroup`: one series answers both.
                        let labels: &Labels = &[
                            (CLUSTER_LABEL, cluster.cluster()),
                            ("group", &group.name),
                            ("consumergroup", &group.name),
                        ];
                        emit(Owner::Cluster, &labels, gauge(members as i64));
                    } else {
                        let labels: &Labels =
                            &[(CLUSTER_LABEL, cluster.cluster()), ("group", &group.name)];
                        emit(Owner::Cluster, &labels, gauge(members as i64));
                    }
                }
            }
        },
    );

    out.family(
        "kafka_consumergroup_state",
        "State of the consumer group: 1 for the current state, 0 for the others",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                for group in &cluster.snapshot.groups {
                    let states = group_states(&group.group_type);
                    let known = states.contains(&group.state.as_str());
                    let extra = (!known).then_some(group.state.as_str());
                    for state in states.iter().copied().chain(extra) {
                        let labels: &Labels = &[
                            (CLUSTER_LABEL, cluster.cluster()),
                            ("group", &group.name),
                            ("state", state),
                        ];
                        emit(
                            Owner::Cluster,
                            &labels,
                            gauge(i64::from(group.state == state)),
                        );
                    }
                }
            }
        },
    );

    out.family(
        "kafka_consumergroup_member_info",
        "One series per live member of the group, as its coordinator describes it: member id, client id and the host it connected from, and its static instance id where it has one; always 1",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                for group in &cluster.snapshot.groups {
                    for m in group.detail.iter().flat_map(|d| &d.members) {
                        let labels: &Labels = &[
                            (CLUSTER_LABEL, cluster.cluster()),
                            ("group", &group.name),
                            ("member_id", &m.member_id),
                            ("client_id", &m.client_id),
                            ("client_host", &m.client_host),
                            ("group_instance_id", m.instance_id.as_deref().unwrap_or("")),
                        ];
                        emit(cluster.offsets_of(&group.name), &labels, gauge(1));
                    }
                }
            }
        },
    );

    out.family(
        "kafka_consumergroup_member_assigned_partitions",
        "Partitions the member owns now (absent where the group's assignment cannot be read: a classic group of another protocol type than consumer, a streams group's tasks)",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                for group in &cluster.snapshot.groups {
                    for m in group.detail.iter().flat_map(|d| &d.members) {
                        let Some(assigned) = &m.assigned else { continue };
                        let owned: usize = assigned.iter().map(|(_, p)| p.len()).sum();
                        let labels: &Labels = &[
                            (CLUSTER_LABEL, cluster.cluster()),
                            ("group", &group.name),
                            ("member_id", &m.member_id),
                        ];
                        emit(cluster.offsets_of(&group.name), &labels, gauge(owned as i64));
                    }
                }
            }
        },
    );

    out.family(
        "kafka_consumergroup_partition_owner_info",
        "The member that owns the group's partition, with its client id and host; only where the cluster's groups.owner_labels is on, and for the group-partitions that have their own series (granularity); a new series whenever a rebalance moves it; always 1",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                if !cluster.snapshot.exposition.owner_labels {
                    continue;
                }
                for group in &cluster.snapshot.groups {
                    let members = group.detail.as_ref().map_or(&[][..], |d| &d.members[..]);
                    for g in group.offsets.iter().flatten() {
                        let crate::derive::Owner::Member(i) = g.owner else { continue };
                        let Some(m) = members.get(i) else { continue };
                        if cluster.hides(g)
                            || !cluster.group_partition_detail(group, &g.topic, g.partition)
                        {
                            continue;
                        }
                        let labels: &Labels = &[
                            (CLUSTER_LABEL, cluster.cluster()),
                            ("group", &group.name),
                            ("topic", &g.topic),
                        ];
                        let owner: &Labels = &[
                            ("member_id", &m.member_id),
                            ("client_id", &m.client_id),
                            ("client_host", &m.client_host),
                        ];
                        emit(
                            cluster.offsets_of(&group.name),
                            &(labels, ([("partition", g.partition)], owner)),
                            gauge(1),
                        );
                    }
                }
            }
        },
    );

    type RebalanceCount = fn(&crate::derive::Rebalances) -> u64;
    let rebalance_counters: [(&str, &str, RebalanceCount); 3] = [
        ("kafka_consumergroup_rebalances", "Rebalances of the group since the exporter first described it: every step of its epoch (KIP-848, share, streams) or generation (classic, where the members' subscriptions carry it), else each rebalance a cycle saw (docs/metrics.md, Rebalances)", |r| r.total),
        ("kafka_consumergroup_members_joined", "Members that joined the group (new member ids) between two cycles that described it", |r| r.joined),
        ("kafka_consumergroup_members_left", "Members that left the group (member ids gone) between two cycles that described it", |r| r.left),
    ];
    for (name, help, count) in rebalance_counters {
        out.family(name, help, MetricType::Counter, &mut |emit| {
            for cluster in shown {
                for group in &cluster.snapshot.groups {
                    let Some(r) = &group.rebalance else { continue };
                    let labels: &Labels =
                        &[(CLUSTER_LABEL, cluster.cluster()), ("group", &group.name)];
                    emit(Owner::Cluster, &labels, Sample::Counter(count(r)));
                }
            }
        });
    }

    out.family(
        "kafka_consumergroup_last_rebalance_timestamp_seconds",
        "Unix time of the cycle that counted the group's last rebalance (absent until one was counted)",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                for group in &cluster.snapshot.groups {
                    let Some(at) = group.rebalance.and_then(|r| r.last_at) else { continue };
                    let unix = at
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default()
                        .as_secs_f64();
                    let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster()), ("group", &group.name)];
                    emit(Owner::Cluster, &labels, gauge(unix));
                }
            }
        },
    );

    out.family(
        "kafka_consumergroup_unreconciled_partitions",
        "KIP-848 groups: partitions of the target assignment their member does not own yet (0 once every member has reconciled)",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                for group in &cluster.snapshot.groups {
                    let Some(n) = group.rebalance.and_then(|r| r.unreconciled) else { continue };
                    let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster()), ("group", &group.name)];
                    emit(Owner::Cluster, &labels, gauge(n as i64));
                }
            }
        },
    );

    out.family("kafka_consumergroup_status",
        "The group's commit progress, worst of its partitions: ok, abandoned (every partition it has offsets on owned by no member, its offsets unmoved for groups.abandon_after), lagging (commits but has not caught up for stall_after), blocked (by an open transaction), rebalancing (its state says so, unless a worse status holds), rewinding (its committed offset went back), stalled (something to read, no commit for stall_after), stopped (stalled while its lag grows); 1 for the current status, 0 for the others",
        MetricType::Gauge, &mut |emit| {
    for cluster in shown {
        for group in &cluster.snapshot.groups {
            let Some(current) = group.status else {
                continue;
            };
            for status in crate::derive::progress::GroupStatus::ALL {
                let labels: &Labels = &[
                    (CLUSTER_LABEL, cluster.cluster()),
                    ("group", &group.name),
                    ("status", status.as_str()),
                ];
                emit(Owner::Cluster, &labels, gauge(i64::from(status == current)));
            }
        }
    }
});
}

/// Which isolation level each group reads with, and the records of aborted transactions
/// those that read uncommitted delivered ([`crate::derive::isolation`]).
fn visit_group_isolation(out: &mut dyn Visitor, shown: &[Shown]) {
    use crate::derive::RulerLevel;
    out.family(
        "kafka_consumergroup_isolation_level",
        "The isolation level the group reads with, as its offsets showed it: read_uncommitted (committed past the last stable offset while it had members), read_committed (held at a pinned last stable offset with records above it and live members for a minute), mixed (its members disagree), unknown (nothing showed it yet); a share group's share.isolation.level; always 1",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                for group in &cluster.snapshot.groups {
                    let labels: &Labels = &[
                        (CLUSTER_LABEL, cluster.cluster()),
                        ("group", &group.name),
                        ("isolation_level", group.ruler.level.as_str()),
                    ];
                    emit(Owner::Cluster, &labels, gauge(1));
                }
            }
        },
    );
    out.family(
        "kafka_consumergroup_isolation_level_members",
        "Live members of the group by the isolation level each was shown to read with (unknown: not shown yet); for groups whose level is known and whose members were described",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                for group in &cluster.snapshot.groups {
                    let ruler = &group.ruler;
                    let Some(detail) = &group.detail else { continue };
                    if ruler.level == RulerLevel::Unknown || group.group_type == "share" {
                        continue;
                    }
                    let count = |level: Option<crate::kafka::Isolation>| {
                        (0..detail.members.len())
                            .filter(|i| ruler.member(*i) == level)
                            .count() as i64
                    };
                    for (name, level) in [
                        ("read_committed", Some(crate::kafka::Isolation::ReadCommitted)),
                        ("read_uncommitted", Some(crate::kafka::Isolation::ReadUncommitted)),
                        ("unknown", None),
                    ] {
                        let labels: &Labels = &[
                            (CLUSTER_LABEL, cluster.cluster()),
                            ("group", &group.name),
                            ("isolation_level", name),
                        ];
                        emit(Owner::Cluster, &labels, gauge(count(level)));
                    }
                }
            }
        },
    );
    type AbortedCount = fn(&crate::derive::AbortedRead) -> u64;
    let aborted_counters: [(&str, &str, AbortedCount); 2] = [
        ("kafka_consumergroup_aborted_records_read", "Records of aborted transactions the group delivered: its committed offset passed them while it (or the member owning the partition) reads uncommitted, counted once each since the exporter watches it; exact where the exporter read every batch of the transaction, else an upper bound (/api/v1/stuck says which); present at 0 for every topic of a group that reads uncommitted", |r| r.records),
        ("kafka_consumergroup_aborted_transactions_read", "Aborted transactions of which the group delivered at least one record (see kafka_consumergroup_aborted_records_read_total)", |r| r.transactions),
    ];
    for (name, help, count) in aborted_counters {
        out.family(name, help, MetricType::Counter, &mut |emit| {
            for cluster in shown {
                for group in &cluster.snapshot.groups {
                    for (topic, read) in &group.ruler.aborted {
                        let labels: &Labels = &[
                            (CLUSTER_LABEL, cluster.cluster()),
                            ("group", &group.name),
                            ("topic", topic),
                        ];
                        emit(
                            cluster.offsets_of(&group.name),
                            &labels,
                            Sample::Counter(count(read)),
                        );
                    }
                }
            }
        });
    }
}

/// One family of per-group, per-topic aggregates: of share groups when `share`, of the
/// other groups otherwise.
fn visit_group_topics(
    out: &mut dyn Visitor,
    shown: &[Shown],
    name: &str,
    help: &str,
    share: bool,
    value: fn(&GroupTopicAggregate) -> Option<Value>,
) {
    out.family(name, help, MetricType::Gauge, &mut |emit| {
        for cluster in shown {
            for (group, topics) in cluster.snapshot.groups.iter().zip(&cluster.group_topics) {
                if (group.group_type == "share") != share {
                    continue;
                }
                for t in topics {
                    if let Some(v) = value(t) {
                        let labels: &Labels = &[
                            (CLUSTER_LABEL, cluster.cluster()),
                            ("group", &group.name),
                            ("topic", &t.topic),
                        ];
                        emit(cluster.offsets_of(&group.name), &labels, gauge(v));
                    }
                }
            }
        }
    });
}

/// Every open transaction of the cluster (the coordinators' inventory), fencings and
/// coordinator moves.
fn visit_cluster_transactions(out: &mut dyn Visitor, shown: &[Shown]) {
    out.family("kafka_cluster_open_transactions",
        "Transactions the coordinators list open longer than transaction_list_min_age, by coordinator state; a lower bound while a broker does not answer (kafka_lso_exporter_errors_total{stage=\"list_transactions\"})",
        MetricType::Gauge, &mut |emit| {
    for cluster in shown {
        let Some(inventory) = inventory(cluster) else {
            continue;
        };
        for state in crate::kafka::OPEN_TRANSACTION_STATES
            .iter()
            .map(|s| s.to_string())
            .chain(
                inventory
                    .by_state
                    .keys()
                    .filter(|s| !crate::kafka::OPEN_TRANSACTION_STATES.contains(&s.as_str()))
                    .cloned(),
            )
        {
            let count = inventory.by_state.get(&state).copied().unwrap_or(0);
            let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster()), ("state", &state)];
            emit(Owner::Cluster, &labels, gauge(count as i64));
        }
    }
});

    out.family("kafka_cluster_unpinning_open_transactions",
        "Of kafka_cluster_open_transactions, those described that hold the last stable offset of no exported partition (they write only to unsampled topics, sit behind an older transaction, or wrote nowhere yet); a lower bound: one not described in the cycle, or writing to a partition whose holder or LSO is unknown, or listed by a broker that did not answer, is not counted",
        MetricType::Gauge, &mut |emit| {
    for cluster in shown {
        if let Some(inventory) = inventory(cluster) {
            let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
            emit(Owner::Cluster, &labels, gauge(inventory.unpinning as i64));
        }
    }
});

    out.family("kafka_cluster_prepared_transactions",
        "Open two-phase (KIP-939) transactions (timeout 2147483647 ms where a broker advertises KIP-939): the coordinator never times them out, only their producer or an operator ends them; a lower bound while a broker does not answer; absent where no broker speaks KIP-939",
        MetricType::Gauge, &mut |emit| {
    for cluster in shown {
        if let Some(prepared) = inventory(cluster).and_then(|i| i.prepared) {
            let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
            emit(Owner::Cluster, &labels, gauge(prepared as i64));
        }
    }
});

    type DetailValue = fn(&crate::derive::inventory::DetailedTransaction) -> Option<Value>;
    let detail_families: [(&str, &str, DetailValue); 4] = [
        ("kafka_coordinator_transaction_age_seconds", "Age of one of the transaction_list_detail oldest open transactions of the cluster, from its coordinator's start time", |t| {
            t.age_seconds.map(Value::Seconds)
        }),
        ("kafka_coordinator_transaction_timeout_left_seconds", "Seconds before the coordinator aborts the transaction (its timeout minus its age, at least 0); absent when the coordinator does not time it out (two-phase, or already being committed or aborted)", |t| {
            t.timeout_left_seconds.map(Value::Seconds)
        }),
        ("kafka_coordinator_transaction_partitions", "Partitions the transaction wrote to, as its coordinator lists them", |t| {
            t.described.then_some(Value::Count(t.partitions.len() as i64))
        }),
        ("kafka_coordinator_transaction_two_phase", "1 for a two-phase (KIP-939) transaction, which its coordinator never times out (only its producer or an operator ends it), 0 for any other; absent when the transaction was not described", |t| {
            t.described.then_some(Value::Count(i64::from(t.two_phase)))
        }),
    ];
    for (name, help, value) in detail_families {
        out.family(name, help, MetricType::Gauge, &mut |emit| {
            for cluster in shown {
                let Some(inventory) = &cluster.snapshot.transactions.inventory else {
                    continue;
                };
                for t in &inventory.oldest {
                    let Some(v) = value(t) else { continue };
                    let producer_id = t.producer_id.to_string();
                    let producer_epoch = t.producer_epoch.to_string();
                    let coordinator = t.coordinator.to_string();
                    let labels: &Labels = &[
                        (CLUSTER_LABEL, cluster.cluster()),
                        ("transactional_id", &t.transactional_id),
                        ("producer_id", &producer_id),
                        ("producer_epoch", &producer_epoch),
                        ("state", &t.state),
                        ("coordinator", &coordinator),
                    ];
                    emit(Owner::Cluster, &labels, gauge(v));
                }
            }
        });
    }

    type EventCount = fn(&crate::derive::inventory::WatchCounters) -> u64;
    let event_families: [(&str, &str, EventCount); 2] = [
        ("kafka_transaction_fencings", "Times the id's open transaction was ended by a new producer initialisation: seen Ongoing, then Empty under another producer id or epoch with no end of the transaction seen in between (a new instance fenced it, or the application committed or aborted and restarted between two observations: under transaction version 2 nothing tells these apart); a commit or an abort the exporter saw before the new initialisation is never counted", |c| c.fencings),
        ("kafka_transaction_coordinator_moves", "Times the transactional id's coordinator changed between two cycles that saw it", |c| c.coordinator_moves),
    ];
    for (name, help, count) in event_families {
        out.family(name, help, MetricType::Counter, &mut |emit| {
            for cluster in shown {
                for c in &cluster.snapshot.transactions.counters {
                    let labels: &Labels = &[
                        (CLUSTER_LABEL, cluster.cluster()),
                        ("transactional_id", &c.transactional_id),
                    ];
                    emit(Owner::Cluster, &labels, Sample::Counter(count(c)));
                }
            }
        });
    }
}

/// The cluster's inventory, also when a broker did not answer: its counts are then lower
/// bounds, and an alert on them can still fire (a broker down is when transactions get
/// stuck).
fn inventory<'a>(
    cluster: &Shown<'a>,
) -> Option<&'a crate::derive::inventory::TransactionInventory> {
    cluster.snapshot.transactions.inventory.as_ref()
}

/// The cost of exactly-once per topic: counters of what the cluster's record reader
/// counted so far (it keeps the totals; a total that falls, as when a topic is recreated,
/// reads as a counter reset).
fn visit_eos_cost(out: &mut dyn Visitor, shown: &[Shown]) {
    out.family(
        "kafka_topic_transaction_markers",
        "Commit and abort markers (control records) the exporter read in the topic's logs, by marker (commit, abort), each counted once; only the parts of the logs it reads (docs/metrics.md, The cost of exactly-once)",
        MetricType::Counter,
        &mut |emit| {
            for cluster in shown {
                for (topic, cost) in &cluster.snapshot.eos_cost {
                    for (marker, total) in [("commit", cost.commit_markers), ("abort", cost.abort_markers)] {
                        let labels: &Labels =
                            &[(CLUSTER_LABEL, cluster.cluster()), ("topic", topic), ("marker", marker)];
                        emit(Owner::Cluster, &labels, Sample::Counter(total));
                    }
                }
            }
        },
    );
    type CostValue = fn(&crate::kafka::records::EosCost) -> u64;
    let cost_families: [(&str, &str, CostValue); 2] = [
        ("kafka_topic_aborted_records", "Records of aborted transactions the exporter read in the topic's logs, counted once their abort marker was read", |c| c.aborted_records),
        ("kafka_topic_scanned_offsets", "Offsets of the topic whose record-batch headers the exporter read, each counted once: the denominator of the markers' share", |c| c.scanned_offsets),
    ];
    for (name, help, value) in cost_families {
        out.family(name, help, MetricType::Counter, &mut |emit| {
            for cluster in shown {
                for (topic, cost) in &cluster.snapshot.eos_cost {
                    let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster()), ("topic", topic)];
                    emit(Owner::Cluster, &labels, Sample::Counter(value(cost)));
                }
            }
        });
    }
}

/// The exporter's own per-cluster state.
fn visit_exporter(out: &mut dyn Visitor, shown: &[Shown]) {
    out.family(
        "kafka_lso_exporter_up",
        "1 if the last sampling cycle reached the cluster",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
                emit(
                    Owner::Cluster,
                    &labels,
                    gauge(i64::from(cluster.snapshot.up)),
                );
            }
        },
    );

    out.family("kafka_lso_exporter_series_dropped",
        "Series left out in the last cycle because the cluster exceeded max_series: the offset series of whole groups outside priority_groups",
        MetricType::Gauge, &mut |emit| {
    for cluster in shown {
        let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
        emit(Owner::Cluster, &labels, gauge(cluster.snapshot.series_dropped as i64));
    }
});

    out.family("kafka_lso_exporter_series",
        "Series /metrics shows for the cluster from its last cycle, this one included (what max_series limits; the exporter's own counters and cycle histogram are not counted)",
        MetricType::Gauge, &mut |emit| {
    for cluster in shown {
        let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
        emit(Owner::Cluster, &labels, gauge(cluster.snapshot.series as i64));
    }
});

    out.family(
        "kafka_lso_exporter_last_success_timestamp_seconds",
        "Unix time at which the last cycle that reached the cluster ended",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                if let Some(at) = cluster.snapshot.last_success {
                    let seconds = at
                        .duration_since(UNIX_EPOCH)
                        .unwrap_or_default()
                        .as_secs_f64();
                    let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
                    emit(Owner::Cluster, &labels, gauge(seconds));
                }
            }
        },
    );

    out.family(
        "kafka_lso_exporter_feature_up",
        "1 if the feature works on the cluster, 0 if it does not (an ACL refuses a request it needs, a broker lacks the API, the brokers refuse the credentials); absent while not known (before the first cycle, and while the cluster is down unless it is known not to work) and when the configuration turns it off. Why: kafka_lso_exporter_feature_info",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                for (feature, state) in cluster.snapshot.known_features() {
                    if state.status == Status::Disabled {
                        continue;
                    }
                    let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster()), ("feature", feature.as_str())];
                    emit(Owner::Cluster, &labels, gauge(i64::from(state.status.works())));
                }
            }
        },
    );
    out.family(
        "kafka_lso_exporter_feature_info",
        "1 per feature of the cluster, with its status (ok, denied, unsupported, failed, disabled) and, unless ok, the reason in words: which ACL on which resource, which API a broker lacks, which setting turned it off",
        MetricType::Gauge,
        &mut |emit| {
            for cluster in shown {
                for (feature, state) in cluster.snapshot.known_features() {
                    let labels: &Labels = &[
                        (CLUSTER_LABEL, cluster.cluster()),
                        ("feature", feature.as_str()),
                        ("status", state.status.as_str()),
                        ("reason", &state.reason),
                    ];
                    emit(Owner::Cluster, &labels, gauge(1i64));
                }
            }
        },
    );

    type SkewValue = fn(&crate::kafka::ClockSkew) -> f64;
    let skew_families: [(&str, &str, SkewValue); 2] = [
        ("kafka_lso_exporter_clock_skew_seconds", "The brokers' clock (the KRaft quorum leader's, by DescribeQuorum, read every minute) minus the exporter's: positive when the brokers are ahead. Ages from broker timestamps (transaction start times, LogAppendTime) read this much too low (too high when negative); absent when it cannot be read (DESCRIBE on the cluster, KRaft)", |s| s.seconds),
        ("kafka_lso_exporter_clock_skew_uncertainty_seconds", "Half the round trip of the clock skew's measurement: kafka_lso_exporter_clock_skew_seconds is within this of the truth", |s| s.uncertainty_seconds),
    ];
    for (name, help, value) in skew_families {
        out.family(name, help, MetricType::Gauge, &mut |emit| {
            for cluster in shown {
                if let Some(skew) = &cluster.snapshot.clock_skew {
                    let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
                    emit(Owner::Cluster, &labels, gauge(Value::Seconds(value(skew))));
                }
            }
        });
    }
}
