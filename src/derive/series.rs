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
//! The renderer in [`crate::expose`] reads the decisions from here, and so does the
//! cardinality guard that counts what it renders.

use std::collections::HashSet;
use std::sync::Arc;

use super::state::{GroupState, PartitionState, TimeLag};
pub use crate::config::Granularity;

/// How a cluster's snapshot is shown on `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Exposition {
    /// Granularity of the cluster's partition series, and of groups without their own.
    pub granularity: Granularity,
    /// Also show kafka_exporter's metric families (`compat = ["kafka_exporter"]`).
    pub kafka_exporter: bool,
    /// Abandoned partitions get no offset series (`groups.assigned_only`).
    pub assigned_only: bool,
    /// Owned group-partitions get an owner series (`groups.owner_labels`).
    pub owner_labels: bool,
}

/// A transaction pins the partition's LSO: HW > LSO, and the LSO has stood still since
/// the previous cycle (or, after a restart, since a transaction the coordinator
/// reports), or did at its previous value right before it moved on to another open
/// transaction ([`crate::derive::StuckClock::pinned`]).
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
/// With `assigned_only`, abandoned partitions are left out.
pub fn group_topic_aggregates(group: &GroupState, assigned_only: bool) -> Vec<GroupTopicAggregate> {
    let Some(offsets) = group.offsets.as_deref() else {
        return Vec::new();
    };
    let kept: Vec<super::state::GroupPartitionState>;
    let offsets = if assigned_only && offsets.iter().any(|o| o.abandoned) {
        kept = offsets.iter().filter(|o| !o.abandoned).cloned().collect();
        &kept[..]
    } else {
        offsets
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
            let lags = |f: fn(&super::state::Lag) -> i64| {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive::tests::raw_transaction;
    use crate::derive::{GroupPartitionState, Lag, OpenTransaction, Visibility};

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
            detail: None,
            rebalance: None,
            rates: Vec::new(),
            ruler: Default::default(),
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
                        owner: Default::default(),
                        abandoned: false,
                    })
                    .collect(),
            ),
            granularity,
            status: None,
        }
    }

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
        let topics = group_topic_aggregates(&g, false);
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
        let topics = group_topic_aggregates(&g, false);
        assert_eq!(topics[0].hw_lag, Some(1 + 2));
        assert_eq!(topics[0].max_hw_lag_seconds, Some(2.0));
    }
}
