//! Which series a snapshot shows, and the per-topic aggregates (pure code).
//!
//! A cluster's granularity ([`Granularity`]) decides how finely `/metrics` breaks its
//! values down. Per-topic aggregates are always shown: they are one series per topic (and
//! per group and topic), so dashboards and alerts that read them work in either mode.
//! Per-partition series are shown for every partition in `partition` mode, and in `topic`
//! mode only where a transaction pins the LSO — HW > LSO, and the LSO has not moved since
//! the previous cycle (its stuck clock runs) — together with every group's position on
//! such a partition. That is where the stuck table, forensics and the blocked-group alert
//! look; a busy exactly-once partition, whose LSO moves every cycle although some
//! transaction is always open, keeps to its topic's series instead of appearing and
//! vanishing cycle after cycle. A group's own granularity (`group_granularity`) can ask
//! for its per-partition series either way.
//!
//! [`series_count`] counts what the renderer in [`crate::metrics`] writes, for the
//! cardinality guard; both read the decisions from here, so they cannot disagree.

use std::collections::HashSet;
use std::sync::Arc;

pub use crate::config::Granularity;
use crate::snapshot::{group_states, GroupPartitionState, GroupState, PartitionState, TimeLag};

/// How a cluster's snapshot is shown on `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Exposition {
    /// Granularity of the cluster's partition series, and of groups without their own.
    pub granularity: Granularity,
    /// Also show kafka_exporter's metric families (`compat = ["kafka_exporter"]`).
    pub kafka_exporter: bool,
}

/// A transaction pins the partition's LSO: HW > LSO, and the LSO has stood still since
/// the previous cycle (or, after a restart, since a transaction the coordinator
/// reports), or did at its previous value right before it moved on to another open
/// transaction ([`crate::snapshot::StuckClock::pinned`]).
pub fn pinned(partition: &PartitionState) -> bool {
    partition
        .visibility
        .is_some_and(|v| v.hw_minus_lso > 0 && v.pinned)
}

/// The [`pinned`] partitions, by (topic, partition).
pub fn pinned_partitions(partitions: &[PartitionState]) -> HashSet<(&str, i32)> {
    partitions
        .iter()
        .filter(|p| pinned(p))
        .map(|p| (&*p.topic, p.partition))
        .collect()
}

impl Exposition {
    /// The partition's own series (`kafka_partition_*`, `kafka_transaction_open_*`) are
    /// shown.
    pub fn partition_detail(&self, partition: &PartitionState) -> bool {
        self.granularity == Granularity::Partition || pinned(partition)
    }
}

/// The group's series on one partition are shown: the group wants them, or a transaction
/// pins the partition (`pinned` from [`pinned_partitions`]).
pub fn group_partition_detail(
    group: &GroupState,
    topic: &str,
    partition: i32,
    pinned: &HashSet<(&str, i32)>,
) -> bool {
    group.granularity == Granularity::Partition || pinned.contains(&(topic, partition))
}

/// One topic's partitions, summed up, over the partitions whose value is known in this
/// cycle. The sums of offsets are the exception: they are absent when any partition's
/// offset is unknown, since a sum over part of a topic would jump and its `rate()` read a
/// reset. Counts and maxima over the known partitions are lower bounds: an alert on them
/// cannot fire wrongly and keeps firing while one partition is unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicAggregate {
    pub topic: Arc<str>,
    /// Partitions sampled.
    pub partitions: i64,
    /// Partitions whose HW is ahead of their LSO.
    pub withheld_partitions: Option<i64>,
    pub log_start_offset_sum: Option<i64>,
    pub high_watermark_sum: Option<i64>,
    pub last_stable_offset_sum: Option<i64>,
    pub max_hw_minus_lso: Option<i64>,
    pub max_lso_stuck_seconds: Option<f64>,
    pub max_withheld_age_seconds: Option<f64>,
    pub open_transactions: Option<i64>,
    pub hanging_transactions: Option<i64>,
}

/// Per-topic aggregates of partitions sorted by topic (as a [`crate::kafka::RawSample`]
/// lists them), in that order.
pub fn topic_aggregates(partitions: &[PartitionState]) -> Vec<TopicAggregate> {
    partitions
        .chunk_by(|a, b| a.topic == b.topic)
        .map(|run| TopicAggregate {
            topic: run[0].topic.clone(),
            partitions: run.len() as i64,
            withheld_partitions: sum_known(
                run.iter()
                    .map(|p| p.visibility.map(|v| i64::from(v.hw_minus_lso > 0))),
            ),
            log_start_offset_sum: sum_all(run.iter().map(|p| p.log_start_offset)),
            high_watermark_sum: sum_all(run.iter().map(|p| p.high_watermark)),
            last_stable_offset_sum: sum_all(run.iter().map(|p| p.last_stable_offset)),
            max_hw_minus_lso: max_known(run.iter().map(|p| p.visibility.map(|v| v.hw_minus_lso))),
            max_lso_stuck_seconds: max_known(
                run.iter()
                    .map(|p| p.visibility.map(|v| v.lso_stuck_seconds)),
            ),
            max_withheld_age_seconds: max_known(run.iter().map(|p| p.withheld_age_seconds)),
            open_transactions: sum_known(
                run.iter()
                    .map(|p| p.transactions.as_ref().map(|t| t.len() as i64)),
            ),
            hanging_transactions: sum_known(run.iter().map(|p| {
                p.transactions
                    .as_ref()
                    .map(|t| t.iter().filter(|t| t.hanging).count() as i64)
            })),
        })
        .collect()
}

/// One group's positions on one topic, summed up over the partitions whose value is known
/// (lags and time lags are lower bounds while one is unknown); the committed offsets are
/// all known, or the group has none in this cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupTopicAggregate {
    pub topic: Arc<str>,
    pub committed_offset_sum: Option<i64>,
    pub hw_lag: Option<i64>,
    pub lso_lag: Option<i64>,
    pub committed_beyond_lso: Option<i64>,
    pub max_hw_lag_seconds: Option<f64>,
    pub max_lso_lag_seconds: Option<f64>,
    /// A share group's lag against its bound ([`GroupState::share_lag`]).
    pub share_lag: Option<i64>,
    pub max_share_lag_seconds: Option<f64>,
    /// A share group's lag as its brokers compute it (KIP-1226), summed over the
    /// partitions they reported.
    pub broker_lag: Option<i64>,
    /// The longest commit stall of the group's partitions of the topic.
    pub max_commit_stall_seconds: Option<f64>,
    /// The smallest retention margin in seconds of its partitions of the topic.
    pub min_retention_margin_seconds: Option<f64>,
    /// Records deleted before the group consumed them, summed over the partitions.
    pub lost_records: Option<i64>,
}

/// Per-topic aggregates of a group's committed offsets (sorted by topic), in that order.
pub fn group_topic_aggregates(group: &GroupState) -> Vec<GroupTopicAggregate> {
    let Some(offsets) = group.offsets.as_deref() else {
        return Vec::new();
    };
    // A share group's broker lags by topic, once (they are few, but a group may read many
    // topics).
    let mut broker_lags: std::collections::HashMap<&str, Option<i64>> = Default::default();
    for lag in &group.broker_lags {
        let total = broker_lags.entry(lag.topic.as_str()).or_insert(Some(0));
        *total = total.and_then(|t| t.checked_add(lag.lag));
    }
    offsets
        .chunk_by(|a, b| a.topic == b.topic)
        .map(|run| {
            let topic = run[0].topic.clone();
            let lags = |f: fn(&crate::snapshot::Lag) -> i64| {
                sum_known(run.iter().map(|o| o.lag.as_ref().map(f)))
            };
            GroupTopicAggregate {
                committed_offset_sum: sum_all(run.iter().map(|o| Some(o.committed_offset))),
                hw_lag: lags(|l| l.hw_lag),
                lso_lag: lags(|l| l.lso_lag),
                committed_beyond_lso: lags(|l| l.committed_beyond_lso),
                max_hw_lag_seconds: max_known(
                    run.iter().map(|o| o.hw_time_lag.map(TimeLag::seconds)),
                ),
                max_lso_lag_seconds: max_known(
                    run.iter().map(|o| o.lso_time_lag.map(TimeLag::seconds)),
                ),
                share_lag: sum_known(run.iter().map(|o| group.share_lag(o))),
                max_share_lag_seconds: max_known(run.iter().map(|o| group.share_lag_seconds(o))),
                broker_lag: broker_lags.get(&*topic).copied().flatten(),
                max_commit_stall_seconds: max_known(run.iter().map(|o| o.commit_stall_seconds)),
                min_retention_margin_seconds: min_known(
                    run.iter().map(|o| o.retention_margin_seconds),
                ),
                lost_records: sum_known(run.iter().map(|o| o.lost_records)),
                topic,
            }
        })
        .collect()
}

/// The sum, or `None` when any value is absent or the sum overflows.
fn sum_all(mut values: impl Iterator<Item = Option<i64>>) -> Option<i64> {
    values.try_fold(0i64, |total, v| total.checked_add(v?))
}

/// The sum of the known values, or `None` when none is known or the sum overflows.
fn sum_known(values: impl Iterator<Item = Option<i64>>) -> Option<i64> {
    let mut known = values.flatten().peekable();
    known.peek()?;
    known.try_fold(0i64, |total, v| total.checked_add(v))
}

/// The largest known value, or `None` when none is known.
fn max_known<T: PartialOrd + Copy>(values: impl Iterator<Item = Option<T>>) -> Option<T> {
    values.flatten().fold(None, |largest, v| match largest {
        Some(l) if l >= v => Some(l),
        _ => Some(v),
    })
}

/// The smallest known value, or `None` when none is known.
fn min_known<T: PartialOrd + Copy>(values: impl Iterator<Item = Option<T>>) -> Option<T> {
    values.flatten().fold(None, |smallest, v| match smallest {
        Some(s) if s <= v => Some(s),
        _ => Some(v),
    })
}

/// How many series `/metrics` renders for these partitions and groups of one cluster.
pub fn series_count(
    partitions: &[PartitionState],
    groups: &[GroupState],
    exposition: Exposition,
) -> usize {
    let pinned = pinned_partitions(partitions);
    partition_series(partitions, exposition)
        + groups
            .iter()
            .map(|g| group_series(g, &pinned, exposition))
            .sum::<usize>()
}

/// Series of the partitions and their topics.
fn partition_series(partitions: &[PartitionState], exposition: Exposition) -> usize {
    let compat = usize::from(exposition.kafka_exporter);
    let own: usize = partitions
        .iter()
        .map(|p| {
            let own = if exposition.partition_detail(p) {
                usize::from(p.log_start_offset.is_some())
                    + usize::from(p.high_watermark.is_some())
                    + usize::from(p.last_stable_offset.is_some())
                    + 2 * usize::from(p.visibility.is_some())
                    + usize::from(p.withheld_age_seconds.is_some())
                    + usize::from(p.oldest_transaction_age().is_some())
                    + p.transactions.as_ref().map_or(0, |t| {
                        2 + t.len() + t.iter().filter(|t| t.age_seconds.is_some()).count()
                    })
            } else {
                0
            };
            // kafka_exporter's current and oldest offset, leader, replicas, in-sync
            // replicas, preferred leader, under-replicated.
            own + compat
                * (usize::from(p.high_watermark.is_some())
                    + usize::from(p.log_start_offset.is_some())
                    + p.replication.map_or(0, |_| 5))
        })
        .sum();
    let topics: usize = topic_aggregates(partitions)
        .iter()
        .map(|t| {
            let counts = [
                t.withheld_partitions,
                t.log_start_offset_sum,
                t.high_watermark_sum,
                t.last_stable_offset_sum,
                t.max_hw_minus_lso,
                t.open_transactions,
                t.hanging_transactions,
            ];
            1 + counts.iter().filter(|v| v.is_some()).count()
                + usize::from(t.max_lso_stuck_seconds.is_some())
                + usize::from(t.max_withheld_age_seconds.is_some())
        })
        .sum();
    own + topics
}

/// Series of one group: kafka_consumergroup_info, members, a share group's isolation
/// level, the states, the offsets and their per-topic aggregates.
fn group_series(g: &GroupState, pinned: &HashSet<(&str, i32)>, exposition: Exposition) -> usize {
    // kafka_exporter's group families cover the groups that commit offsets.
    let compat = usize::from(exposition.kafka_exporter && g.group_type != "share");
    let offsets: usize = g
        .offsets
        .iter()
        .flatten()
        .map(|o| {
            let detail = group_partition_detail(g, &o.topic, o.partition, pinned);
            usize::from(detail) * offset_series(g, o) + compat * (1 + usize::from(o.lag.is_some()))
        })
        .sum();
    let topics: usize = group_topic_aggregates(g)
        .iter()
        .map(|t| {
            group_topic_series(g, t)
                + compat
                    * (usize::from(t.committed_offset_sum.is_some())
                        + usize::from(t.hw_lag.is_some()))
        })
        .sum();
    1 + usize::from(g.members.is_some())
        + usize::from(g.isolation.is_some())
        + g.broker_lags
            .iter()
            .filter(|l| group_partition_detail(g, &l.topic, l.partition, pinned))
            .count()
        + state_series(g)
        + offsets
        + topics
}

/// Series a group's state renders: one per state of its protocol (plus its own if
/// unknown).
fn state_series(group: &GroupState) -> usize {
    let states = group_states(&group.group_type);
    states.len()
        + usize::from(!states.contains(&group.state.as_str()))
        + group
            .status
            .map_or(0, |_| crate::progress::GroupStatus::ALL.len())
}

/// Series one group-partition renders: the committed offset, the three lags when the
/// partition's offsets were sampled, and the time lags when they are known. A share
/// group renders its start offset, and its lag and time lag against its bound.
pub(crate) fn offset_series(group: &GroupState, offset: &GroupPartitionState) -> usize {
    if group.group_type == "share" {
        return 1
            + usize::from(group.share_lag(offset).is_some())
            + usize::from(group.share_lag_seconds(offset).is_some());
    }
    1 + 3 * usize::from(offset.lag.is_some())
        + usize::from(offset.hw_time_lag.is_some())
        + usize::from(offset.lso_time_lag.is_some())
        + usize::from(offset.commit_stall_seconds.is_some())
        + usize::from(offset.retention_margin.is_some())
        + usize::from(offset.retention_margin_seconds.is_some())
        + usize::from(offset.lost_records.is_some_and(|n| n > 0))
}

/// Series one group-topic aggregate renders.
fn group_topic_series(group: &GroupState, t: &GroupTopicAggregate) -> usize {
    if group.group_type == "share" {
        return usize::from(t.share_lag.is_some())
            + usize::from(t.max_share_lag_seconds.is_some())
            + usize::from(t.broker_lag.is_some());
    }
    usize::from(t.committed_offset_sum.is_some())
        + 3 * usize::from(t.hw_lag.is_some())
        + usize::from(t.max_hw_lag_seconds.is_some())
        + usize::from(t.max_lso_lag_seconds.is_some())
        + usize::from(t.max_commit_stall_seconds.is_some())
        + usize::from(t.min_retention_margin_seconds.is_some())
        + usize::from(t.lost_records.is_some())
}

/// Series of the cluster and its topics that neither partitions nor groups render
/// (`kafka_topic_retention_seconds`): counted against `max_series`, never dropped.
pub fn fixed_series(retention_ms: &std::collections::HashMap<Arc<str>, i64>) -> usize {
    retention_ms.values().filter(|ms| **ms >= 0).count()
}

/// The cardinality guard: while the cluster renders more than `max_series` series, drops
/// the offsets and broker lags (and so every group-partition and group-topic series, and
/// kafka_exporter's for the group) of groups that
/// `is_priority` does not keep, one whole group at a time in reverse name order (so the
/// same groups go every cycle). Partition and topic series, group state and members are
/// always kept. Returns how many series were dropped.
pub fn enforce_series_limit(
    partitions: &[PartitionState],
    groups: &mut [GroupState],
    exposition: Exposition,
    max_series: usize,
    is_priority: impl Fn(&str) -> bool,
) -> usize {
    let pinned = pinned_partitions(partitions);
    let mut total = series_count(partitions, groups, exposition);
    let mut dropped = 0;
    for group in groups.iter_mut().rev() {
        if total <= max_series {
            break;
        }
        if is_priority(&group.name) || group.offsets.is_none() {
            continue;
        }
        let with = group_series(group, &pinned, exposition);
        if let Some(offsets) = group.offsets.as_mut() {
            offsets.clear();
        }
        group.broker_lags.clear();
        let series = with - group_series(group, &pinned, exposition);
        total -= series;
        dropped += series;
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::tests::raw_transaction;
    use crate::snapshot::{Lag, OpenTransaction, Visibility};

    fn partition(topic: &str, partition: i32, hw: i64, lso: i64, stuck: f64) -> PartitionState {
        PartitionState {
            topic: Arc::from(topic),
            partition,
            log_start_offset: Some(0),
            high_watermark: Some(hw),
            last_stable_offset: Some(lso),
            visibility: Some(Visibility {
                hw_minus_lso: hw - lso,
                lso_stuck_seconds: stuck,
                pinned: hw > lso && stuck > 0.0,
            }),
            withheld_age_seconds: None,
            transactions: None,
            replication: None,
        }
    }

    fn group(name: &str, topic: &str, partitions: i32, granularity: Granularity) -> GroupState {
        GroupState {
            coordinator: None,
            name: name.into(),
            state: "Stable".into(),
            members: Some(1),
            group_type: "classic".into(),
            protocol: "consumer".into(),
            isolation: None,
            broker_lags: Vec::new(),
            offsets: Some(
                (0..partitions)
                    .map(|p| GroupPartitionState {
                        topic: Arc::from(topic),
                        partition: p,
                        committed_offset: 100 + i64::from(p),
                        lag: Some(Lag {
                            hw_lag: i64::from(p),
                            lso_lag: 0,
                            committed_beyond_lso: 0,
                        }),
                        hw_time_lag: Some(TimeLag::Since(f64::from(p))),
                        lso_time_lag: None,
                        commit_stall_seconds: None,
                        retention_margin: None,
                        retention_margin_seconds: None,
                        lost_records: None,
                    })
                    .collect(),
            ),
            granularity,
            status: None,
        }
    }

    const PARTITION: Exposition = Exposition {
        granularity: Granularity::Partition,
        kafka_exporter: false,
    };
    const TOPIC: Exposition = Exposition {
        granularity: Granularity::Topic,
        kafka_exporter: false,
    };

    #[test]
    fn topic_aggregates_over_the_known_partitions_and_offset_sums_only_when_all_are_known() {
        // The seed example on partition 0: LSO 880,000 behind an open transaction while
        // the HW is 900,000.
        let mut partitions = vec![
            partition("orders", 0, 900_000, 880_000, 184.5),
            partition("orders", 1, 1_000, 1_000, 0.0),
            partition("payments", 0, 7, 7, 0.0),
        ];
        let topics = topic_aggregates(&partitions);
        assert_eq!(topics.len(), 2);
        let orders = &topics[0];
        assert_eq!(&*orders.topic, "orders");
        assert_eq!(orders.partitions, 2);
        assert_eq!(orders.withheld_partitions, Some(1));
        assert_eq!(orders.high_watermark_sum, Some(901_000));
        assert_eq!(orders.last_stable_offset_sum, Some(881_000));
        assert_eq!(orders.max_hw_minus_lso, Some(20_000));
        assert_eq!(orders.max_lso_stuck_seconds, Some(184.5));
        assert_eq!(orders.open_transactions, None, "forensics off");
        assert_eq!(topics[1].withheld_partitions, Some(0));

        // A failed HW: the sum of HWs is absent (its rate() would read a reset), counts
        // and maxima are over the partitions known (lower bounds).
        partitions[1].high_watermark = None;
        partitions[1].visibility = None;
        let orders = &topic_aggregates(&partitions)[0];
        assert_eq!(orders.partitions, 2);
        assert_eq!(orders.high_watermark_sum, None);
        assert_eq!(orders.max_hw_minus_lso, Some(20_000));
        assert_eq!(orders.withheld_partitions, Some(1));
        assert_eq!(orders.last_stable_offset_sum, Some(881_000));
        // Nothing known: absent, not 0.
        partitions[0].visibility = None;
        let orders = &topic_aggregates(&partitions)[0];
        assert_eq!(
            (orders.withheld_partitions, orders.max_hw_minus_lso),
            (None, None)
        );
        // A sum that would overflow is absent, not wrong.
        partitions[2].high_watermark = Some(i64::MAX);
        partitions.push(partition("payments", 1, i64::MAX, 1, 0.0));
        assert_eq!(topic_aggregates(&partitions)[1].high_watermark_sum, None);

        // Open and hanging transactions count per partition.
        let raw = raw_transaction("Ongoing", 4001, 3, true);
        partitions[0].transactions = Some(vec![OpenTransaction::derive(
            &raw,
            2_000_000_000,
            0,
            0,
            Default::default(),
        )]);
        partitions[1].transactions = Some(Vec::new());
        let orders = &topic_aggregates(&partitions)[0];
        assert_eq!(orders.open_transactions, Some(1));
        assert_eq!(orders.hanging_transactions, Some(1));
    }

    #[test]
    fn group_topic_aggregates_sum_lags_and_take_the_longest_time_lag() {
        let g = group("g", "orders", 4, Granularity::Topic);
        let topics = group_topic_aggregates(&g);
        assert_eq!(topics.len(), 1);
        assert_eq!(topics[0].committed_offset_sum, Some(100 + 101 + 102 + 103));
        assert_eq!(topics[0].hw_lag, Some(1 + 2 + 3));
        assert_eq!(topics[0].lso_lag, Some(0));
        assert_eq!(topics[0].max_hw_lag_seconds, Some(3.0));
        assert_eq!(topics[0].max_lso_lag_seconds, None, "none known");
        assert_eq!(topics[0].share_lag, None, "not a share group");
        // A partition whose lag is unknown: the sum of the others, a lower bound.
        let mut g = g;
        g.offsets.as_mut().unwrap()[3].lag = None;
        g.offsets.as_mut().unwrap()[3].hw_time_lag = None;
        let topics = group_topic_aggregates(&g);
        assert_eq!(topics[0].hw_lag, Some(1 + 2));
        assert_eq!(topics[0].max_hw_lag_seconds, Some(2.0));
    }

    #[test]
    fn topic_granularity_counts_partition_series_only_where_the_lso_is_pinned() {
        let mut partitions = vec![
            partition("t", 0, 900, 880, 10.0),
            partition("t", 1, 5, 5, 0.0),
            partition("t", 2, 5, 5, 0.0),
        ];
        let groups = vec![group("g", "t", 3, Granularity::Partition)];
        // Partition series: 3 x (log start, HW, LSO, gap, stuck) = 15; the topic: count,
        // withheld, three sums, largest gap, largest stuck = 7 (no withheld age, no
        // forensics). The group: info, members, 4 states; 3 partitions x (committed, 3
        // lags, hw time lag) = 15; the topic: committed sum, 3 lag sums, largest hw time
        // lag = 5.
        assert_eq!(
            series_count(&partitions, &groups, PARTITION),
            15 + 7 + 6 + 15 + 5
        );
        // `topic`: only partition 0's series, but the group asked for every partition.
        assert_eq!(
            series_count(&partitions, &groups, TOPIC),
            5 + 7 + 6 + 15 + 5
        );
        // A group of `topic` granularity: its position on partition 0 only.
        let groups = vec![group("g", "t", 3, Granularity::Topic)];
        assert_eq!(series_count(&partitions, &groups, TOPIC), 5 + 7 + 6 + 5 + 5);
        // kafka_exporter's families: current and oldest offset per partition (no
        // replication known here), and per group-partition and group-topic two each.
        let compat = Exposition {
            kafka_exporter: true,
            ..TOPIC
        };
        assert_eq!(
            series_count(&partitions, &groups, compat),
            5 + 7 + 6 + 5 + 5 + 3 * 2 + 3 * 2 + 2
        );
        // A transaction open on partition 2 whose LSO moved since the last cycle (a busy
        // exactly-once partition): withheld, not pinned, no partition series.
        partitions[2] = partition("t", 2, 9, 7, 0.0);
        assert!(!pinned(&partitions[2]));
        assert_eq!(
            topic_aggregates(&partitions)[0].withheld_partitions,
            Some(2)
        );
        assert_eq!(series_count(&partitions, &groups, TOPIC), 5 + 7 + 6 + 5 + 5);
    }

    #[test]
    fn series_limit_drops_whole_groups_outside_the_priority_list() {
        let partitions: Vec<PartitionState> =
            (0..10).map(|p| partition("t", p, 5, 5, 0.0)).collect();
        let mut groups: Vec<GroupState> = ["a-critical", "b", "c"]
            .iter()
            .map(|name| group(name, "t", 10, Granularity::Partition))
            .collect();
        // 10 x 5 + 7 for the topic; per group 6 + 10 x 5 + 5 = 61.
        assert_eq!(series_count(&partitions, &groups, PARTITION), 57 + 3 * 61);
        assert_eq!(
            enforce_series_limit(&partitions, &mut groups, PARTITION, 1000, |_| false),
            0
        );

        let dropped =
            enforce_series_limit(&partitions, &mut groups, PARTITION, 57 + 2 * 61 + 6, |g| {
                g.ends_with("critical")
            });
        assert_eq!(dropped, 55, "one group (the last by name) is enough");
        assert!(groups[2].offsets.as_ref().unwrap().is_empty());
        assert_eq!(groups[1].offsets.as_ref().unwrap().len(), 10);

        let dropped = enforce_series_limit(&partitions, &mut groups, PARTITION, 60, |g| {
            g.ends_with("critical")
        });
        assert_eq!(
            dropped, 55,
            "the priority group is kept even over the limit"
        );
        assert_eq!(groups[0].offsets.as_ref().unwrap().len(), 10);
        assert_eq!(
            series_count(&partitions, &groups, PARTITION),
            57 + 61 + 2 * 6
        );

        // In `topic` granularity the same groups cost far less.
        let groups: Vec<GroupState> = ["a", "b", "c"]
            .iter()
            .map(|name| group(name, "t", 10, Granularity::Topic))
            .collect();
        assert_eq!(series_count(&partitions, &groups, TOPIC), 7 + 3 * (6 + 5));
    }

    #[test]
    fn kafka_exporter_families_skip_share_groups() {
        let partitions = vec![partition("t", 0, 5, 5, 0.0)];
        let mut share = group("q", "t", 1, Granularity::Partition);
        share.group_type = "share".into();
        share.isolation = Some(crate::kafka::Isolation::ReadCommitted);
        let compat = Exposition {
            kafka_exporter: true,
            ..PARTITION
        };
        // The same count with and without compat: a share group commits no offsets.
        assert_eq!(
            series_count(&partitions, std::slice::from_ref(&share), compat)
                - series_count(&partitions, &[], compat),
            series_count(&partitions, std::slice::from_ref(&share), PARTITION)
                - series_count(&partitions, &[], PARTITION)
        );
    }
}
