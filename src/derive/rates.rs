//! How fast each group closes its lag on each topic, from the exporter's own samples
//! ([`RateWatch`]): the consumption rate (its committed offsets' sum over the topic's
//! partitions, per second), the production rate (the sum of the bound it reads up to: the
//! LSO for a group that reads committed, the HW for one that committed past the LSO), both
//! over the cluster's `groups.rate_window`, and a catch-up estimate: lag ÷ (consume −
//! produce), in offsets like the rates (markers and aborted records count in both).
//!
//! The estimate is a number only where it closes: `NotClosing` where the group consumes
//! no faster than records arrive, `WaitsForTransaction` where a read_committed group has
//! read everything up to the LSOs and an open transaction pins one of them (it can only
//! wait, however fast it reads; behind on other partitions, it reads on and gets an
//! estimate), `CaughtUp` at lag 0, `KeepsUp` where it reads at the pace records arrive
//! with a standing lag it reads in moments (a consumer committing in batches). A window
//! starts again when the partitions the sums run over change (a partition added, a group
//! shown to start or stop reading uncommitted), and the rates need two samples at least
//! half a window apart. A group that stood past the LSO keeps the HW as its bound while
//! it is below the LSO again, until it is shown to read committed: crossing the LSO on a
//! busy exactly-once topic is no change of level.
//! Share groups have no committed offsets: none of this applies to them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::series::pinned;
use super::state::{
    Catchup, GroupPartitionState, GroupState, Owner, PartitionState, Ruler, RulerLevel, TopicRate,
    KEEPS_UP_SECONDS, KEEPS_UP_WITHIN,
};
use crate::kafka::Isolation;

#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    committed: i64,
    bound: i64,
}

#[derive(Debug)]
struct Entry {
    topic: Arc<str>,
    /// What the sums run over: the partitions, and whether the bound is the HW.
    partitions: Vec<i32>,
    uncommitted: bool,
    samples: VecDeque<Sample>,
    /// The cycle that last sampled it.
    seen: u64,
}

/// Per group and topic, the samples within the rate window. Keyed by group, then its
/// topics sorted by name (as a group's offsets are), so that a cycle looks entries up
/// without copying a name.
#[derive(Debug, Default)]
pub struct RateWatch {
    entries: HashMap<String, Vec<Entry>>,
    /// Cycles applied so far.
    cycle: u64,
}

impl RateWatch {
    /// Group-topics remembered.
    pub fn len(&self) -> usize {
        self.entries.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The partitions of `topic` among `partitions`, which are sorted by topic and partition.
fn topic_partitions<'p>(partitions: &'p [PartitionState], topic: &str) -> &'p [PartitionState] {
    let start = partitions.partition_point(|p| &*p.topic < topic);
    let len = partitions[start..].partition_point(|p| &*p.topic == topic);
    &partitions[start..start + len]
}

/// Partition `partition` of one topic's sorted partitions: where they run 0, 1, 2, ...
/// (as a topic's do, unless one is missing from this cycle) at its own index.
fn find(partitions: &[PartitionState], partition: i32) -> Option<&PartitionState> {
    match usize::try_from(partition)
        .ok()
        .and_then(|i| partitions.get(i))
    {
        Some(p) if p.partition == partition => Some(p),
        _ => partitions
            .binary_search_by_key(&partition, |p| p.partition)
            .ok()
            .map(|i| &partitions[i]),
    }
}

/// What the group has been shown to read with on this partition, whatever its position
/// now: the owner's own level, else the group's, as [`Ruler::reads_uncommitted_at`]
/// weighs them (`Some(true)`: read_uncommitted); `None` where nothing showed it.
fn shown_level(ruler: &Ruler, offset: &GroupPartitionState) -> Option<bool> {
    let own = match offset.owner {
        Owner::Member(i) => ruler.member(i),
        _ => None,
    };
    if let Some(isolation) = own {
        return Some(isolation == Isolation::ReadUncommitted);
    }
    let level = match offset.owner {
        Owner::Member(_) => ruler.unattributed,
        _ => ruler.level,
    };
    match level {
        RulerLevel::ReadUncommitted => Some(true),
        RulerLevel::ReadCommitted => Some(false),
        RulerLevel::Unknown | RulerLevel::Mixed => None,
    }
}

/// Fills each group's [`GroupState::rates`] and advances `watch` to `now`. Groups whose
/// offsets are not known in this cycle keep their samples; the others' topics not seen
/// now are forgotten. `partitions` are sorted by topic and partition, as a cycle's are.
pub fn apply(
    groups: &mut [GroupState],
    partitions: &[PartitionState],
    watch: &mut RateWatch,
    now: Instant,
    window: Duration,
) {
    debug_assert!(
        partitions.is_sorted_by(|a, b| (&a.topic, a.partition) <= (&b.topic, b.partition))
    );
    watch.cycle += 1;
    let cycle = watch.cycle;
    let mut kept: HashSet<&str> = HashSet::new();
    for group in groups.iter_mut() {
        if group.group_type == "share" {
            continue;
        }
        let Some(offsets) = group.offsets.as_ref() else {
            kept.insert(&group.name);
            continue;
        };
        let mut rates = Vec::with_capacity(1);
        for run in offsets.chunk_by(|a, b| a.topic == b.topic) {
            let topic = run[0].topic.clone();
            let of_topic = topic_partitions(partitions, &topic);
            // Every partition's lag and bound known, or no sample this cycle.
            let mut committed = 0i64;
            let mut bound = 0i64;
            let mut lag = 0i64;
            let mut complete = true;
            // By the level the group was shown to read with where known, not only by
            // where it stands now: a read_uncommitted group at the LSO does not wait for
            // the transaction, and its window does not restart each time it crosses it.
            // Once it stood past the LSO, the HW stays its bound until the group is shown
            // to read committed there: on a busy exactly-once topic a read_uncommitted
            // consumer is past the LSO at one cycle and below it at the next.
            let before = watch
                .entries
                .get(group.name.as_str())
                .and_then(|topics| {
                    topics
                        .binary_search_by(|e| e.topic.cmp(&topic))
                        .ok()
                        .map(|i| topics[i].uncommitted)
                })
                .unwrap_or(false);
            let uncommitted = run.iter().any(|o| group.ruler.reads_uncommitted_at(o))
                || (before && run.iter().all(|o| shown_level(&group.ruler, o).is_none()));
            // An open transaction holds back records the group would read next.
            let mut withheld = false;
            for o in run {
                let (Some(l), Some(p)) = (o.lag, find(of_topic, o.partition)) else {
                    complete = false;
                    break;
                };
                let b = if uncommitted {
                    p.high_watermark
                } else {
                    p.last_stable_offset
                };
                let Some(b) = b else {
                    complete = false;
                    break;
                };
                committed = committed.saturating_add(o.committed_offset);
                bound = bound.saturating_add(b);
                lag = lag.saturating_add(if uncommitted { l.hw_lag } else { l.lso_lag });
                withheld |= !uncommitted && pinned(p);
            }
            if !complete {
                // No sample this cycle, but the window stays: one partition unread for a
                // cycle (a leader moving) must not restart every group's rates.
                if let Some(topics) = watch.entries.get_mut(group.name.as_str()) {
                    if let Ok(i) = topics.binary_search_by(|e| e.topic.cmp(&topic)) {
                        topics[i].seen = cycle;
                    }
                }
                continue;
            }
            let topics = match watch.entries.get_mut(group.name.as_str()) {
                Some(topics) => topics,
                None => watch.entries.entry(group.name.clone()).or_default(),
            };
            let i = match topics.binary_search_by(|e| e.topic.cmp(&topic)) {
                Ok(i) => i,
                Err(i) => {
                    topics.insert(
                        i,
                        Entry {
                            topic: topic.clone(),
                            partitions: run.iter().map(|o| o.partition).collect(),
                            uncommitted,
                            samples: VecDeque::new(),
                            seen: cycle,
                        },
                    );
                    i
                }
            };
            let entry = &mut topics[i];
            entry.seen = cycle;
            // A bound or a committed offset that went back (a leader change that truncated
            // the log, an offset reset) starts the window again: a rate across it would
            // be no rate of anything.
            let went_back = entry
                .samples
                .back()
                .is_some_and(|last| bound < last.bound || committed < last.committed);
            // Compared in place: no copy unless the partitions changed.
            let same_partitions = entry.partitions.iter().eq(run.iter().map(|o| &o.partition));
            if !same_partitions || entry.uncommitted != uncommitted || went_back {
                if !same_partitions {
                    entry.partitions.clear();
                    entry.partitions.extend(run.iter().map(|o| o.partition));
                }
                entry.uncommitted = uncommitted;
                entry.samples.clear();
            }
            entry.samples.push_back(Sample {
                at: now,
                committed,
                bound,
            });
            // The oldest sample kept is the last one at least a window old: the rates
            // span the whole window once it has passed.
            while entry.samples.len() > 2
                && now.saturating_duration_since(entry.samples[1].at) >= window
            {
                entry.samples.pop_front();
            }
            let first = entry.samples[0];
            let span = now.saturating_duration_since(first.at).as_secs_f64();
            let (consume, produce) = if span > 0.0 && span >= window.as_secs_f64() / 2.0 {
                (
                    Some((committed - first.committed) as f64 / span),
                    Some((bound - first.bound) as f64 / span),
                )
            } else {
                (None, None)
            };
            // The distance left in offsets, as the rates are: lag in records leaves the
            // commit/abort markers and aborted records out, which the offsets still
            // cross.
            let distance = bound.saturating_sub(committed).max(0);
            // It waits for the transaction only once nothing is left to read below the
            // LSOs: a group behind on the topic's other partitions (or below the pinned
            // LSO) reads on, and the estimate is for what it can read.
            let catchup = if lag == 0 && withheld {
                Catchup::WaitsForTransaction
            } else if lag == 0 {
                Catchup::CaughtUp
            } else {
                match (consume, produce) {
                    // One pace, a lag read in moments: current within its commit batches
                    // (an estimate of lag / (c - p) would read hours, and flap).
                    (Some(c), Some(p))
                        if c > 0.0
                            && (c - p).abs() <= KEEPS_UP_WITHIN * c
                            && (distance as f64) <= KEEPS_UP_SECONDS * c =>
                    {
                        Catchup::KeepsUp
                    }
                    (Some(c), Some(p)) if c > 0.0 && c - p > 0.0 => {
                        Catchup::Seconds(distance as f64 / (c - p))
                    }
                    (Some(_), Some(_)) => Catchup::NotClosing,
                    _ => Catchup::Unknown,
                }
            };
            rates.push(TopicRate {
                topic,
                consume_rate: consume.map(|c| c.max(0.0)),
                produce_rate: produce.map(|p| p.max(0.0)),
                catchup,
            });
        }
        group.rates = rates;
    }
    watch.entries.retain(|group, topics| {
        if !kept.contains(group.as_str()) {
            topics.retain(|entry| entry.seen == cycle);
        }
        !topics.is_empty()
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive::{GroupPartitionState, Visibility};

    fn partition(hw: i64, lso: i64, pinned: bool) -> PartitionState {
        PartitionState {
            topic: Arc::from("orders"),
            partition: 0,
            log_start_offset: Some(0),
            high_watermark: Some(hw),
            last_stable_offset: Some(lso),
            visibility: Some(Visibility {
                hw_minus_lso: hw - lso,
                lso_stuck_seconds: 0.0,
                pinned,
            }),
            withheld_age_seconds: None,
            transactions: None,
            replication: None,
        }
    }

    fn group(committed: i64, hw: i64, lso: i64) -> GroupState {
        let (lag, _) = crate::derive::lag(committed, hw, lso, None);
        GroupState {
            name: "billing".into(),
            coordinator: None,
            group_type: "classic".into(),
            protocol: "consumer".into(),
            state: "Stable".into(),
            members: Some(1),
            isolation: None,
            broker_lags: Vec::new(),
            offsets: Some(vec![GroupPartitionState {
                topic: Arc::from("orders"),
                partition: 0,
                committed_offset: committed,
                lag: Some(lag),
                hw_time_lag: None,
                lso_time_lag: None,
                commit_stall_seconds: None,
                retention_margin: None,
                retention_margin_seconds: None,
                lost_records: None,
                owner: Default::default(),
                abandoned: false,
            }]),
            granularity: Default::default(),
            status: None,
            detail: None,
            rebalance: None,
            rates: Vec::new(),
            ruler: Default::default(),
        }
    }

    fn step(
        watch: &mut RateWatch,
        at: Instant,
        committed: i64,
        hw: i64,
        lso: i64,
        pin: bool,
    ) -> TopicRate {
        let mut groups = vec![group(committed, hw, lso)];
        apply(
            &mut groups,
            &[partition(hw, lso, pin)],
            watch,
            at,
            Duration::from_secs(10),
        );
        groups[0].rates.pop().unwrap()
    }

    /// Records arrive at 100/s. Read at 50/s the lag never closes; read at 200/s it
    /// closes at 100/s, and the estimate is the lag over that.
    #[test]
    fn the_estimate_is_the_lag_over_how_fast_it_closes() {
        let t0 = Instant::now();
        let mut watch = RateWatch::default();
        let mut last = None;
        for s in 0..=20 {
            let at = t0 + Duration::from_secs(s);
            let hw = 1000 + 100 * s as i64;
            last = Some(step(&mut watch, at, 500 + 50 * s as i64, hw, hw, false));
            if s < 5 {
                assert_eq!(last.as_ref().unwrap().catchup, Catchup::Unknown, "s={s}");
            }
        }
        let slow = last.unwrap();
        assert_eq!(slow.consume_rate, Some(50.0));
        assert_eq!(slow.produce_rate, Some(100.0));
        assert_eq!(slow.catchup, Catchup::NotClosing);
        // From 20 s on it reads at 200/s: lag 1000 at 20 s.
        let mut fast = None;
        for s in 21..=30 {
            let at = t0 + Duration::from_secs(s);
            let hw = 1000 + 100 * s as i64;
            let committed = 2000 + 200 * (s as i64 - 20);
            fast = Some(step(&mut watch, at, committed, hw, hw, false));
        }
        // At 30 s it has read everything: committed 4000, HW 4000.
        let fast = fast.unwrap();
        assert_eq!(fast.catchup, Catchup::CaughtUp);
        let mut watch = RateWatch::default();
        let mut estimate = None;
        for s in 0..=10 {
            let at = t0 + Duration::from_secs(s);
            let hw = 3000 + 100 * s as i64;
            estimate = Some(step(&mut watch, at, 1000 + 200 * s as i64, hw, hw, false).catchup);
        }
        // At 10 s: lag 4000 - 3000 = 1000, closing at 100/s.
        match estimate.unwrap() {
            Catchup::Seconds(s) => assert!((s - 10.0).abs() < 1e-9, "{s}"),
            other => panic!("{other:?}"),
        }
    }

    /// A consumer that commits in batches keeps a standing lag at the produce rate: it
    /// keeps up, not "hours to catch up".
    #[test]
    fn a_standing_lag_at_the_produce_pace_keeps_up() {
        let t0 = Instant::now();
        let mut watch = RateWatch::default();
        let mut rate = None;
        for s in 0..=10 {
            let at = t0 + Duration::from_secs(s);
            let hw = 1000 + 100 * s as i64;
            // 80 behind, every cycle; one record more read over the window.
            let committed = hw - 80 + i64::from(s == 10);
            rate = Some(step(&mut watch, at, committed, hw, hw, false));
        }
        assert_eq!(rate.unwrap().catchup, Catchup::KeepsUp);
    }

    /// A partition joining the sums (partition 0 committed for the first time) starts the
    /// window again: a rate across it would count its whole offset as progress.
    #[test]
    fn a_partition_joining_the_sums_starts_the_window_again() {
        let t0 = Instant::now();
        let mut watch = RateWatch::default();
        let mut apply_at = |s: u64, committed: &[(i32, i64)]| {
            let mut g = group(0, 0, 0);
            let template = g.offsets.as_ref().unwrap()[0].clone();
            let hw = 1000 + 10 * s as i64;
            g.offsets = Some(
                committed
                    .iter()
                    .map(|&(p, c)| {
                        let (lag, _) = crate::derive::lag(c, hw, hw, None);
                        GroupPartitionState {
                            partition: p,
                            committed_offset: c,
                            lag: Some(lag),
                            ..template.clone()
                        }
                    })
                    .collect(),
            );
            let partitions: Vec<PartitionState> = (0..2)
                .map(|p| PartitionState {
                    partition: p,
                    ..partition(hw, hw, false)
                })
                .collect();
            let mut groups = vec![g];
            apply(
                &mut groups,
                &partitions,
                &mut watch,
                t0 + Duration::from_secs(s),
                Duration::from_secs(10),
            );
            groups[0].rates.pop().unwrap()
        };
        for s in 0..=10 {
            apply_at(s, &[(1, 900 + 10 * s as i64)]);
        }
        assert_eq!(apply_at(11, &[(1, 1010)]).consume_rate, Some(10.0));
        // Partition 0 joins at offset 1000: no rate until the window has two samples of
        // the new sums, rather than 1,000 offsets in a second.
        assert_eq!(apply_at(12, &[(0, 1000), (1, 1020)]).consume_rate, None);
    }

    /// A cycle in which a partition's bound is unknown (a leader moving) takes no sample
    /// and keeps the window: the rates come back at the next cycle, not a window later.
    #[test]
    fn one_cycle_without_a_bound_keeps_the_window() {
        let t0 = Instant::now();
        let mut watch = RateWatch::default();
        for s in 0..=10 {
            let at = t0 + Duration::from_secs(s);
            let hw = 1000 + 100 * s as i64;
            step(&mut watch, at, 500 + 50 * s as i64, hw, hw, false);
        }
        let mut groups = vec![group(1050, 2100, 2100)];
        let mut unknown = partition(2100, 2100, false);
        unknown.last_stable_offset = None;
        unknown.high_watermark = None;
        apply(
            &mut groups,
            &[unknown],
            &mut watch,
            t0 + Duration::from_secs(11),
            Duration::from_secs(10),
        );
        assert!(groups[0].rates.is_empty(), "no sample without the bound");
        let back = step(
            &mut watch,
            t0 + Duration::from_secs(12),
            1100,
            2200,
            2200,
            false,
        );
        assert_eq!(back.consume_rate, Some(50.0));
        assert_eq!(back.produce_rate, Some(100.0));
    }

    /// One cycle of a group on a two-partition topic: (committed, HW, LSO, pinned) per
    /// partition.
    fn two_partitions(
        watch: &mut RateWatch,
        at: Instant,
        partitions: [(i64, i64, i64, bool); 2],
    ) -> TopicRate {
        let mut g = group(0, 0, 0);
        let template = g.offsets.as_ref().unwrap()[0].clone();
        g.offsets = Some(
            (0..2)
                .map(|i| {
                    let (committed, hw, lso, _) = partitions[i];
                    let (lag, _) = crate::derive::lag(committed, hw, lso, None);
                    GroupPartitionState {
                        partition: i as i32,
                        committed_offset: committed,
                        lag: Some(lag),
                        ..template.clone()
                    }
                })
                .collect(),
        );
        let states: Vec<PartitionState> = (0..2)
            .map(|i| {
                let (_, hw, lso, pin) = partitions[i];
                PartitionState {
                    partition: i as i32,
                    ..partition(hw, lso, pin)
                }
            })
            .collect();
        let mut groups = vec![g];
        apply(&mut groups, &states, watch, at, Duration::from_secs(10));
        groups[0].rates.pop().unwrap()
    }

    /// Partition 0 pinned (the group stands at its LSO), partition 1 a million records
    /// behind and closing at 100/s: the group does not wait for the transaction, it reads
    /// partition 1, and the estimate is that lag over how fast it closes.
    #[test]
    fn a_pinned_partition_does_not_hold_a_group_that_is_behind_elsewhere() {
        let t0 = Instant::now();
        let mut watch = RateWatch::default();
        let mut rate = None;
        for s in 0..=10 {
            let at = t0 + Duration::from_secs(s);
            let s = s as i64;
            let hw = 2_000_000 + 100 * s;
            rate = Some(two_partitions(
                &mut watch,
                at,
                [
                    (800, 1000 + 10 * s, 800, true),
                    (1_000_000 + 200 * s, hw, hw, false),
                ],
            ));
        }
        let rate = rate.unwrap();
        assert_eq!(rate.consume_rate, Some(200.0));
        match rate.catchup {
            // 999,000 left to read at 10 s, closing at 100/s.
            Catchup::Seconds(s) => assert!((s - 9_990.0).abs() < 1e-6, "{s}"),
            other => panic!("behind elsewhere, not waiting: {other:?}"),
        }

        // Caught up on partition 1 too: now it only waits.
        let at = t0 + Duration::from_secs(11);
        let waiting = two_partitions(
            &mut watch,
            at,
            [
                (800, 1110, 800, true),
                (2_001_100, 2_001_100, 2_001_100, false),
            ],
        );
        assert_eq!(waiting.catchup, Catchup::WaitsForTransaction);
    }

    /// A read_uncommitted group not yet shown to be one (no evidence on its ruler) on a
    /// busy exactly-once topic: its committed offset is past the LSO at one cycle and at
    /// or below it at the next, as the LSO moves past it. The window does not start again
    /// at each crossing: the rates come as for any group, half a window on.
    #[test]
    fn a_group_crossing_the_lso_keeps_its_window() {
        let t0 = Instant::now();
        let mut watch = RateWatch::default();
        let mut rates = Vec::new();
        for s in 0..=10 {
            let at = t0 + Duration::from_secs(s);
            let s = s as i64;
            let hw = 10_000 + 100 * s;
            // The LSO trails the HW by 50 (transactions of about 50 records commit in
            // turn); the group reads at the HW's pace, 30 behind it at even seconds
            // (past the LSO) and 70 behind at odd ones (below it).
            let lso = hw - 50;
            let committed = if s % 2 == 0 { hw - 30 } else { hw - 70 };
            rates.push(step(&mut watch, at, committed, hw, lso, false));
        }
        let last = rates.last().unwrap();
        assert!(
            last.consume_rate.is_some() && last.produce_rate == Some(100.0),
            "{rates:#?}"
        );
        assert_eq!(last.catchup, Catchup::KeepsUp, "{rates:#?}");

        // Shown to read committed (it stood at a pinned LSO): the LSO is its bound from
        // now on, a change of level that starts the window again.
        let mut groups = vec![group(11_030, 11_100, 11_050)];
        groups[0].ruler.level = RulerLevel::ReadCommitted;
        apply(
            &mut groups,
            &[partition(11_100, 11_050, false)],
            &mut watch,
            t0 + Duration::from_secs(11),
            Duration::from_secs(10),
        );
        let committed = groups[0].rates.pop().unwrap();
        assert_eq!(committed.consume_rate, None, "{committed:?}");
    }

    /// A read_committed group that has read up to the LSO a transaction pins waits for
    /// it; below that LSO it still has records to read, and reads them at 20/s.
    #[test]
    fn a_group_at_a_pinned_bound_waits_for_the_transaction() {
        let t0 = Instant::now();
        let mut watch = RateWatch::default();
        let mut rate = None;
        for s in 0..=10 {
            let at = t0 + Duration::from_secs(s);
            let committed = 500 + 20 * s as i64;
            rate = Some(step(
                &mut watch,
                at,
                committed,
                1000 + 10 * s as i64,
                800,
                true,
            ));
        }
        // At 10 s: 100 left below the LSO, read at 20/s.
        match rate.unwrap().catchup {
            Catchup::Seconds(s) => assert!((s - 5.0).abs() < 1e-9, "{s}"),
            other => panic!("records left below the LSO: {other:?}"),
        }
        let waiting = step(
            &mut watch,
            t0 + Duration::from_secs(11),
            800,
            1110,
            800,
            true,
        );
        assert_eq!(waiting.catchup, Catchup::WaitsForTransaction);
        assert_eq!(waiting.produce_rate, Some(0.0), "the LSO does not move");
    }
}
