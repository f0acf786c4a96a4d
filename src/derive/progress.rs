//! Is each group still committing, and will its unread records still be there? Pure
//! derivations over the cycles the exporter saw ([`CommitWatch`] holds what they need), run
//! after [`crate::derive::derive`]:
//!
//! - the **commit stall** of a group on a partition: seconds since its committed offset
//!   last moved while it had something to read (0 when it has nothing to read);
//! - the group's **status** ([`GroupStatus`]), in the spirit of Burrow's evaluation rules;
//! - the **retention margin**: how far the committed offset is above the log start offset,
//!   in offsets and in seconds before time retention may delete the first record the group
//!   has not consumed, and the records it lost once the log start passed it.
//!
//! Share groups have no committed offset (their members acknowledge records one by one):
//! none of this applies to them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use super::state::GroupStatus;
use super::state::{Derived, GroupPartitionState, PartitionState, TimeLag};

/// An instant in eight bytes, for the entries kept per group-partition: milliseconds from
/// the watch's origin (negative before it), or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp(i64);

impl Stamp {
    const NONE: Stamp = Stamp(i64::MIN);

    fn of(at: Instant, origin: Instant) -> Stamp {
        let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        match at.checked_duration_since(origin) {
            Some(after) => Stamp(millis(after)),
            None => Stamp(-millis(origin.duration_since(at))),
        }
    }

    fn get(self, origin: Instant) -> Option<Instant> {
        match self.0 {
            i64::MIN => None,
            ms if ms >= 0 => Some(origin + Duration::from_millis(ms as u64)),
            ms => origin.checked_sub(Duration::from_millis(ms.unsigned_abs())),
        }
    }

    fn is_none(self) -> bool {
        self == Stamp::NONE
    }

    /// How long ago, at `now`; `None` for none.
    fn elapsed(self, now: Instant, origin: Instant) -> Option<Duration> {
        self.get(origin).map(|at| now.saturating_duration_since(at))
    }
}

/// What one group-partition looked like over the cycles seen.
#[derive(Debug, Clone)]
struct Entry {
    committed: i64,
    /// Since when the group has had something to read here without its committed offset
    /// moving; none while it has nothing to read.
    stalled_since: Stamp,
    /// The lag when `stalled_since` was set.
    lag_then: i64,
    /// The lag in the previous cycle.
    lag_before: i64,
    /// Since when the lag has grown or held without shrinking (while above 0), and the
    /// lag then.
    growing_since: Stamp,
    growing_from: i64,
    /// When the committed offset last went back.
    rewound_at: Stamp,
    /// When last seen inside the log, nothing was left up to the HW that it would
    /// receive (caught up, or only commit/abort markers).
    nothing_up_to_hw: bool,
    /// The committed offset was below the log start.
    below_log_start: bool,
    /// Since when the group is missing from the lists of the brokers that answered
    /// while another failed.
    missing_since: Stamp,
    /// The cycle that last saw it.
    seen: u64,
    /// When a member last owned the partition or the committed offset last moved (first
    /// seen, at the latest): the abandonment clock.
    attended_at: Stamp,
    /// Whether the partition was abandoned when last seen with its owner known.
    abandoned: bool,
}

/// Per group and partition, what the commit stall and the status need from earlier
/// cycles. It lives in the exporter's memory; a group-partition seen for the first time
/// (the exporter started, or took the cluster over from another replica) dates its
/// commit stall by the first record the group has to read (see [`first_unread_age`]).
#[derive(Debug, Default)]
pub struct CommitWatch {
    /// Per group: its partitions, keyed by topic and partition, so that a cycle copies
    /// no group name per partition.
    groups: HashMap<String, GroupEntries>,
    /// Cycles applied so far.
    cycle: u64,
    /// The instant the entries' stamps count from: the first cycle's.
    origin: Option<Instant>,
}

#[derive(Debug, Default)]
struct GroupEntries {
    /// The broker that last listed the group: whether its absence means it is gone.
    coordinator: Option<String>,
    /// The last cycle in which its offsets were not known (what was learned stays).
    kept: u64,
    /// Sorted by topic and partition (the order of a group's offsets): exactly as many as
    /// it has, where a map would keep up to twice the room.
    partitions: Vec<(Arc<str>, i32, Entry)>,
}

impl CommitWatch {
    /// Group-partitions remembered.
    pub fn len(&self) -> usize {
        self.groups.values().map(|g| g.partitions.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.values().all(|g| g.partitions.is_empty())
    }

    /// The group's committed offset on the partition as the last cycle that knew it saw
    /// it; `None` before the first.
    pub fn committed(&self, group: &str, topic: &str, partition: i32) -> Option<i64> {
        let entries = self.groups.get(group)?;
        let i = entries
            .partitions
            .binary_search_by(|(t, p, _)| (&**t, *p).cmp(&(topic, partition)))
            .ok()?;
        Some(entries.partitions[i].2.committed)
    }
}

/// Records a group has to read on a partition: up to the HW when it reads uncommitted
/// there (`uncommitted`: it committed past the LSO, or is shown to read uncommitted by
/// [`crate::derive::isolation`]), else up to the LSO (what a read_committed consumer may
/// read now); 0 where the read at its committed offset found nothing it would receive
/// there (only commit/abort markers: the lag counts them where the log was not read in
/// full); and, below the log start, only what is still in the log. `None` while the lag
/// is unknown.
fn readable(g: &GroupPartitionState, log_start: Option<i64>, uncommitted: bool) -> Option<i64> {
    let lag = g.lag?;
    let (lag, time_lag) = if uncommitted {
        (lag.hw_lag, g.hw_time_lag)
    } else {
        (lag.lso_lag, g.lso_time_lag)
    };
    let nothing_there = time_lag.is_some_and(TimeLag::nothing_left);
    if nothing_there {
        return Some(0);
    }
    let deleted = log_start.map_or(0, |l| l.saturating_sub(g.committed_offset).max(0));
    Some(lag.saturating_sub(deleted).max(0))
}

/// Seconds since the first record the group has to read on this partition was written
/// (its time lag against the bound it reads to), where a record read found one. A group
/// whose committed offset has not moved has not moved since that record was written at
/// the latest, unless it committed that same offset later: the commit stall of a
/// group-partition seen for the first time starts there, so that it goes on across an
/// exporter restart or a hand-over to another replica instead of starting at 0. It is an
/// upper bound; a consumer that still commits resets it at its next commit.
fn first_unread_age(g: &GroupPartitionState, uncommitted: bool) -> Option<f64> {
    g.lag?;
    let time_lag = if uncommitted {
        g.hw_time_lag
    } else {
        g.lso_time_lag
    }?;
    match time_lag {
        TimeLag::Since(seconds) if seconds.is_finite() && seconds > 0.0 => Some(seconds),
        _ => None,
    }
}

/// The cluster's settings the status depends on.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// See `clusters[].stall_after`.
    pub stall_after: Duration,
    /// See `clusters[].groups.abandon_after`.
    pub abandon_after: Duration,
}

/// Fills the commit stall, the status and the retention margin of every group that is
/// not a share group, advancing `watch` to `now`. `reached`: the cycle reached the
/// cluster (entries of groups it no longer lists are forgotten only then, and only when
/// every broker listed its groups).
///
/// A partition that none of a live group's members owns, and whose committed offset has
/// not moved for `abandon_after`, is abandoned: offsets a group left behind (it stopped
/// reading the topic), not a consumer that stopped. A group without members is never
/// abandoned: that is an outage (every consumer down), or a job that assigns partitions
/// itself. It does not count in the group's
/// status, which is `abandoned` only when every partition is. A group that is
/// rebalancing is `rebalancing` unless a worse status holds.
pub fn apply(
    derived: &mut Derived,
    watch: &mut CommitWatch,
    now: Instant,
    settings: Settings,
    reached: bool,
) {
    let Settings {
        stall_after,
        abandon_after,
    } = settings;
    let partitions: HashMap<(&str, i32), &PartitionState> = derived
        .partitions
        .iter()
        .map(|p| ((&*p.topic, p.partition), p))
        .collect();
    let retention_ms = &derived.retention_ms;
    watch.cycle += 1;
    let cycle = watch.cycle;
    let origin = *watch.origin.get_or_insert(now);
    let stamp = |at: Instant| Stamp::of(at, origin);
    for group in &mut derived.groups {
        if group.group_type == "share" {
            continue;
        }
        let entries = match watch.groups.get_mut(group.name.as_str()) {
            Some(entries) => entries,
            None => watch.groups.entry(group.name.clone()).or_default(),
        };
        let Some(offsets) = group.offsets.as_mut() else {
            // Offsets unknown in this cycle: what was learned of them stays.
            entries.kept = cycle;
            continue;
        };
        if entries.coordinator != group.coordinator {
            entries.coordinator.clone_from(&group.coordinator);
        }
        if entries.partitions.is_empty() {
            // First seen: room for exactly its partitions.
            entries.partitions.reserve_exact(offsets.len());
        }
        let mut status: Option<GroupStatus> = None;
        let mut abandoned = 0usize;
        let live = group.members.is_some_and(|m| m > 0);
        for g in offsets.iter_mut() {
            let partition = partitions.get(&(&*g.topic, g.partition)).copied();
            let log_start = partition.and_then(|p| p.log_start_offset);
            let slot = entries
                .partitions
                .binary_search_by(|(t, p, _)| (&**t, *p).cmp(&(&*g.topic, g.partition)));
            let previous = slot.ok().map(|i| &entries.partitions[i].2);
            let retention_seconds = retention_ms
                .get(&g.topic)
                .filter(|ms| **ms >= 0)
                .map(|ms| *ms as f64 / 1000.0);
            retention(g, log_start, retention_seconds, previous);
            let uncommitted = group.ruler.reads_uncommitted_at(g);
            let pinned = partition
                .and_then(|p| p.visibility)
                .is_some_and(|v| v.hw_minus_lso > 0);
            let Some(behind) = readable(g, log_start, uncommitted) else {
                // Its bounds unknown in this cycle (a leader moving): what was learned
                // of it stays, as for a group whose offsets are unknown.
                if let Ok(i) = slot {
                    let entry = &mut entries.partitions[i].2;
                    entry.seen = cycle;
                    entry.missing_since = Stamp::NONE;
                    g.abandoned = entry.abandoned && entry.committed == g.committed_offset;
                }
                continue;
            };
            let moved = previous.is_some_and(|e| e.committed != g.committed_offset);
            let mut entry = previous.cloned().unwrap_or(Entry {
                committed: g.committed_offset,
                stalled_since: Stamp::NONE,
                lag_then: behind,
                lag_before: behind,
                growing_since: Stamp::NONE,
                growing_from: 0,
                rewound_at: Stamp::NONE,
                nothing_up_to_hw: false,
                below_log_start: false,
                missing_since: Stamp::NONE,
                seen: cycle,
                attended_at: stamp(now),
                abandoned: false,
            });
            entry.seen = cycle;
            entry.missing_since = Stamp::NONE;
            // Left behind by a group that lives: it has members, none of which owns
            // the partition. A group without members (its consumers all down, or a job
            // that assigns partitions itself) is an outage, never abandoned.
            // An owner not known in this cycle (a classic group rebalancing, a describe
            // that failed) neither restarts nor advances the abandonment clock: what was
            // decided stays until the owner is known again.
            let owner_known = g.owner != super::state::Owner::Unknown && group.members.is_some();
            let left_behind = g.owner == super::state::Owner::Nobody && live;
            if moved || (owner_known && !left_behind) {
                entry.attended_at = stamp(now);
            }
            g.abandoned = if moved {
                false
            } else if owner_known {
                left_behind
                    && entry
                        .attended_at
                        .elapsed(now, origin)
                        .is_some_and(|d| d >= abandon_after)
            } else {
                entry.abandoned
            };
            entry.abandoned = g.abandoned;
            if previous.is_some_and(|e| g.committed_offset < e.committed) {
                entry.rewound_at = stamp(now);
            }
            entry.committed = g.committed_offset;
            entry.below_log_start = log_start.is_some_and(|l| g.committed_offset < l);
            if !entry.below_log_start {
                entry.nothing_up_to_hw = g.lag.is_some_and(|l| l.hw_lag == 0)
                    || g.hw_time_lag.is_some_and(TimeLag::nothing_left);
            }
            if behind == 0 {
                entry.stalled_since = Stamp::NONE;
                entry.growing_since = Stamp::NONE;
            } else {
                if moved || entry.stalled_since.is_none() {
                    let rebuilt = previous
                        .is_none()
                        .then(|| first_unread_age(g, uncommitted))
                        .flatten()
                        .and_then(|age| now.checked_sub(Duration::from_secs_f64(age)));
                    entry.stalled_since = stamp(rebuilt.unwrap_or(now));
                    entry.lag_then = behind;
                }
                if behind < entry.lag_before {
                    entry.growing_since = Stamp::NONE;
                }
                if entry.growing_since.is_none() {
                    (entry.growing_since, entry.growing_from) = (stamp(now), behind);
                }
            }
            entry.lag_before = behind;
            let stall = entry
                .stalled_since
                .elapsed(now, origin)
                .unwrap_or(Duration::ZERO);
            g.commit_stall_seconds = Some(stall.as_secs_f64());
            // Nothing to read below the LSO of a pinned partition, and not reading past it.
            let blocked = pinned && !uncommitted && behind == 0;
            let here = if stall >= stall_after && behind > entry.lag_then {
                GroupStatus::Stopped
            } else if stall >= stall_after {
                GroupStatus::Stalled
            } else if entry
                .rewound_at
                .elapsed(now, origin)
                .is_some_and(|d| d < stall_after)
            {
                GroupStatus::Rewinding
            } else if blocked {
                GroupStatus::Blocked
            } else if entry
                .growing_since
                .elapsed(now, origin)
                .is_some_and(|d| d >= stall_after && behind > entry.growing_from)
            {
                GroupStatus::Lagging
            } else {
                GroupStatus::Ok
            };
            if g.abandoned {
                abandoned += 1;
            } else {
                status = status.max(Some(here));
            }
            match slot {
                Ok(i) => entries.partitions[i].2 = entry,
                Err(i) => entries
                    .partitions
                    .insert(i, (g.topic.clone(), g.partition, entry)),
            }
        }
        if status.is_none() && abandoned > 0 {
            status = Some(GroupStatus::Abandoned);
        }
        if group.rebalance.is_some_and(|r| r.rebalancing) && status.is_some() {
            status = status.max(Some(GroupStatus::Rebalancing));
        }
        group.status = status;
    }
    if reached {
        // Groups and partitions gone from the cluster (or the filters) are forgotten: a
        // group whose offsets could not be fetched keeps its entries, and so does a group
        // last listed by a broker that could not list its groups now; what the brokers
        // that answered no longer list goes, however long another broker keeps failing.
        //
        // While some broker fails, a group missing from the others' lists may also have
        // moved to the failing broker (a restarted broker takes coordination back and
        // answers loading at first): it is forgotten only once missing for `stall_after`,
        // so that a rolling restart restarts no clock; when every broker answered, at
        // once.
        //
        // A topic missing from the cycle and not known to be gone (an ACL hides it, a
        // metadata race) keeps its entries: its offsets are missing, not its group.
        let listing = &derived.group_listing;
        let complete = *listing == crate::kafka::GroupListing::Complete;
        let hidden = super::offsets::hidden_topics(&derived.unseen_topics);
        watch.groups.retain(|_, entries| {
            let kept = entries.kept == cycle;
            let gone = listing.gone(entries.coordinator.as_deref());
            entries.partitions.retain_mut(|(topic, _, entry)| {
                if kept || entry.seen == cycle {
                    entry.missing_since = Stamp::NONE;
                    return true;
                }
                if !gone || hidden.contains(&**topic) {
                    return true;
                }
                if entry.missing_since.is_none() {
                    entry.missing_since = stamp(now);
                }
                let missing = entry.missing_since.elapsed(now, origin).unwrap_or_default();
                !complete && missing < stall_after
            });
            if entries.partitions.capacity() > entries.partitions.len() + 8 {
                entries.partitions.shrink_to_fit();
            }
            !entries.partitions.is_empty()
        });
    }
}

/// The retention margin of one group-partition (see [`GroupPartitionState`]).
///
/// A committed offset below the log start counts as lost only once a second cycle saw it
/// there (committed offsets are read before the log start in a cycle: a consumer that
/// committed and deleted the records below, as Kafka Streams purges its repartition
/// topics, would otherwise look as if it lost them for one cycle), and only when the
/// group had something left up to the HW when it was last seen inside the log (an
/// exactly-once group caught up at a commit marker loses nothing when retention deletes
/// the marker). Until a second cycle confirms it, the lost count and the seconds are
/// absent.
fn retention(
    g: &mut GroupPartitionState,
    log_start: Option<i64>,
    retention_seconds: Option<f64>,
    previous: Option<&Entry>,
) {
    let Some(log_start) = log_start else {
        return;
    };
    let margin = g.committed_offset.saturating_sub(log_start);
    g.retention_margin = Some(margin.max(0));
    if margin >= 0 {
        g.lost_records = Some(0);
        g.retention_margin_seconds = retention_seconds
            .zip(g.hw_time_lag)
            .map(|(retention, age)| retention - age.seconds());
        return;
    }
    let Some(previous) =
        previous.filter(|e| e.committed == g.committed_offset && e.below_log_start)
    else {
        return;
    };
    if previous.nothing_up_to_hw {
        // Nothing it had to read was deleted: as if caught up.
        g.lost_records = Some(0);
        g.retention_margin_seconds = retention_seconds;
    } else {
        g.lost_records = Some(margin.saturating_neg());
        g.retention_margin_seconds = retention_seconds.map(|_| 0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive::{GroupState, Owner, Visibility};
    use crate::kafka::GroupListing;

    fn settings() -> Settings {
        Settings {
            stall_after: Duration::from_secs(60),
            abandon_after: Duration::from_secs(600),
        }
    }

    fn partition(topic: &str, log_start: i64, hw: i64, lso: i64) -> PartitionState {
        PartitionState {
            topic: Arc::from(topic),
            partition: 0,
            log_start_offset: Some(log_start),
            high_watermark: Some(hw),
            last_stable_offset: Some(lso),
            visibility: Some(Visibility {
                hw_minus_lso: hw - lso,
                lso_stuck_seconds: 0.0,
                pinned: hw > lso,
            }),
            withheld_age_seconds: None,
            transactions: None,
            replication: None,
        }
    }

    fn offset(
        topic: &str,
        committed: i64,
        hw: i64,
        lso: i64,
        age: Option<TimeLag>,
    ) -> GroupPartitionState {
        let (lag, _) = crate::derive::lag(committed, hw, lso, None);
        GroupPartitionState {
            topic: Arc::from(topic),
            partition: 0,
            committed_offset: committed,
            lag: Some(lag),
            hw_time_lag: age,
            lso_time_lag: age,
            commit_stall_seconds: None,
            retention_margin: None,
            retention_margin_seconds: None,
            lost_records: None,
            owner: Default::default(),
            abandoned: false,
        }
    }

    fn cycle(
        watch: &mut CommitWatch,
        at: Instant,
        group_type: &str,
        p: PartitionState,
        g: GroupPartitionState,
    ) -> (GroupPartitionState, Option<GroupStatus>) {
        cycle_with_members(watch, at, group_type, p, g, 1)
    }

    /// The classic group `billing` of one member, with offsets on `g`.
    fn group_of(g: GroupPartitionState) -> GroupState {
        GroupState {
            coordinator: None,
            name: "billing".into(),
            group_type: "classic".into(),
            protocol: "consumer".into(),
            state: "Stable".into(),
            members: Some(1),
            isolation: None,
            broker_lags: Vec::new(),
            offsets: Some(vec![g]),
            granularity: Default::default(),
            status: None,
            detail: None,
            rebalance: None,
            rates: Vec::new(),
            ruler: Default::default(),
        }
    }

    fn cycle_with_members(
        watch: &mut CommitWatch,
        at: Instant,
        group_type: &str,
        p: PartitionState,
        g: GroupPartitionState,
        members: usize,
    ) -> (GroupPartitionState, Option<GroupStatus>) {
        let mut group = group_of(g);
        group.group_type = group_type.into();
        group.members = Some(members);
        let mut derived = Derived {
            partitions: vec![p],
            groups: vec![group],
            retention_ms: HashMap::from([(Arc::from("orders"), 60_000)]),
            ..Default::default()
        };
        apply(&mut derived, watch, at, settings(), true);
        let group = derived.groups.remove(0);
        (group.offsets.unwrap().remove(0), group.status)
    }

    /// A group-partition seen for the first time (an exporter that started, or one that
    /// took the cluster over from another replica) dates its stall by the first record it
    /// has to read, not by the first cycle: the clock goes on across a hand-over.
    #[test]
    fn a_stall_seen_first_is_dated_by_the_first_record_left_to_read() {
        let t0 = Instant::now() + Duration::from_secs(3600);
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut watch = CommitWatch::default();
        let left = Some(TimeLag::Since(400.0));
        let (g, status) = cycle(
            &mut watch,
            at(0),
            "classic",
            partition("orders", 0, 110, 110),
            offset("orders", 100, 110, 110, left),
        );
        assert_eq!(g.commit_stall_seconds, Some(400.0));
        assert_eq!(status, Some(GroupStatus::Stalled));
        // It goes on from there while the offset does not move ...
        let left = Some(TimeLag::Since(415.0));
        let (g, _) = cycle(
            &mut watch,
            at(15),
            "classic",
            partition("orders", 0, 120, 120),
            offset("orders", 100, 120, 120, left),
        );
        assert_eq!(g.commit_stall_seconds, Some(415.0));
        // ... and a commit resets it.
        let left = Some(TimeLag::Since(2.0));
        let (g, status) = cycle(
            &mut watch,
            at(30),
            "classic",
            partition("orders", 0, 130, 130),
            offset("orders", 125, 130, 130, left),
        );
        assert_eq!(g.commit_stall_seconds, Some(0.0));
        assert_eq!(status, Some(GroupStatus::Ok));

        // Where no record was read (the age unknown), the clock starts at the first sight.
        let mut watch = CommitWatch::default();
        let (g, _) = cycle(
            &mut watch,
            at(0),
            "classic",
            partition("orders", 0, 110, 110),
            offset("orders", 100, 110, 110, None),
        );
        assert_eq!(g.commit_stall_seconds, Some(0.0));
        // Nothing left to read: no stall, whatever the age.
        let mut watch = CommitWatch::default();
        let (g, _) = cycle(
            &mut watch,
            at(0),
            "classic",
            partition("orders", 0, 110, 110),
            offset("orders", 110, 110, 110, Some(TimeLag::NothingLeft)),
        );
        assert_eq!(g.commit_stall_seconds, Some(0.0));
    }

    /// A cycle in which a partition's bounds are unknown (its leader moving) forgets
    /// nothing: the stall clock goes on, it does not start again as at a first sight.
    #[test]
    fn a_cycle_without_the_bounds_keeps_the_clock() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut watch = CommitWatch::default();
        let age = Some(TimeLag::Since(1.0));
        let listed = |watch: &mut CommitWatch, at: Instant, g: GroupPartitionState| {
            let mut derived = Derived {
                partitions: vec![partition("orders", 0, 110, 110)],
                groups: vec![group_of(g)],
                group_listing: GroupListing::Complete,
                ..Default::default()
            };
            apply(&mut derived, watch, at, settings(), true);
            let group = derived.groups.remove(0);
            (group.offsets.unwrap().remove(0), group.status)
        };
        for (t, known, stall) in [
            (0, true, Some(1.0)),
            (70, true, Some(71.0)),
            (80, false, None),
            (90, true, Some(91.0)),
        ] {
            let mut g = offset("orders", 100, 110, 110, age);
            if !known {
                g.lag = None;
            }
            let (g, status) = listed(&mut watch, at(t), g);
            assert_eq!(g.commit_stall_seconds, stall, "t={t}");
            if t == 90 {
                assert_eq!(status, Some(GroupStatus::Stalled));
            }
        }
    }

    #[test]
    fn the_stall_clock_runs_while_there_is_something_to_read_and_no_commit() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut watch = CommitWatch::default();
        // (time, committed, hw, expected stall seconds, status)
        let steps = [
            (0, 100, 100, 0, GroupStatus::Ok),          // caught up
            (10, 100, 100, 0, GroupStatus::Ok),         // nothing to read: no stall
            (20, 100, 110, 0, GroupStatus::Ok),         // records arrived: the clock starts
            (30, 110, 120, 0, GroupStatus::Ok),         // it committed: back to 0
            (40, 110, 120, 10, GroupStatus::Ok),        // no commit since 30
            (90, 110, 120, 60, GroupStatus::Stalled),   // stall_after reached, lag as at 30
            (100, 110, 150, 70, GroupStatus::Stopped),  // and the lag grows: stopped
            (110, 150, 150, 0, GroupStatus::Ok),        // it commits everything: caught up
            (120, 140, 150, 0, GroupStatus::Rewinding), // the offset went back
            (190, 140, 150, 70, GroupStatus::Stalled),  // and then never moved
        ];
        for (t, committed, hw, stall, status) in steps {
            let (g, got) = cycle(
                &mut watch,
                at(t),
                "classic",
                partition("orders", 0, hw, hw),
                offset("orders", committed, hw, hw, Some(TimeLag::Since(1.0))),
            );
            assert_eq!(g.commit_stall_seconds, Some(stall as f64), "t={t}");
            assert_eq!(got, Some(status), "t={t}");
        }
    }

    /// A partition no member owns and whose offset does not move is stalled until
    /// abandon_after (600 s here), then abandoned, and the group with it; a member that
    /// takes it again, or a commit, restarts the abandonment clock.
    #[test]
    fn offsets_nobody_owns_are_abandoned_not_stalled() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut watch = CommitWatch::default();
        let owned = |owner| {
            let mut g = offset("orders", 100, 150, 150, Some(TimeLag::Since(5.0)));
            g.owner = owner;
            g
        };
        let steps = [
            (0, Owner::Nobody, false, GroupStatus::Ok),
            (60, Owner::Nobody, false, GroupStatus::Stalled),
            (599, Owner::Nobody, false, GroupStatus::Stalled),
            (600, Owner::Nobody, true, GroupStatus::Abandoned),
            (900, Owner::Member(0), false, GroupStatus::Stalled),
            (1000, Owner::Nobody, false, GroupStatus::Stalled),
            // Not known who owns it in one cycle (a classic group rebalancing, a describe
            // that failed): the clock goes on, neither restarted nor advanced ...
            (1200, Owner::Unknown, false, GroupStatus::Stalled),
            (1600, Owner::Nobody, true, GroupStatus::Abandoned),
            // ... and what was decided stays: no page for a rebalance of the group.
            (1700, Owner::Unknown, true, GroupStatus::Abandoned),
            (1800, Owner::Nobody, true, GroupStatus::Abandoned),
        ];
        for (t, owner, abandoned, status) in steps {
            let (g, got) = cycle(
                &mut watch,
                at(t),
                "classic",
                partition("orders", 0, 150, 150),
                owned(owner),
            );
            assert_eq!(g.abandoned, abandoned, "t={t}");
            assert_eq!(got, Some(status), "t={t}");
        }
        // A group without members (every consumer down) is an outage, never abandoned:
        // stalled for good.
        let mut watch = CommitWatch::default();
        for t in [0, 60, 600, 5000] {
            let (g, got) = cycle_with_members(
                &mut watch,
                at(t),
                "classic",
                partition("orders", 0, 150, 150),
                owned(Owner::Nobody),
                0,
            );
            assert!(!g.abandoned, "t={t}");
            assert_eq!(
                got,
                Some(if t == 0 {
                    GroupStatus::Ok
                } else {
                    GroupStatus::Stalled
                }),
                "t={t}"
            );
        }
    }

    #[test]
    fn a_record_that_reads_zero_seconds_old_is_still_something_to_read() {
        // The producer's clock runs ahead of the exporter's (or CreateTime is set in the
        // future): the first record left reads 0 s old. The group has stopped: stalled,
        // then stopped, never ok; and once retention passes its committed offset, the
        // records deleted are lost, not "nothing was there".
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut watch = CommitWatch::default();
        let ahead = Some(TimeLag::Since(0.0));
        let steps = [
            (0, 0, 120, GroupStatus::Ok),
            (60, 0, 120, GroupStatus::Stalled),
            (70, 0, 130, GroupStatus::Stopped),
        ];
        for (t, log_start, hw, status) in steps {
            let (g, got) = cycle(
                &mut watch,
                at(t),
                "classic",
                partition("orders", log_start, hw, hw),
                offset("orders", 100, hw, hw, ahead),
            );
            assert_eq!(got, Some(status), "t={t}");
            assert_eq!(g.retention_margin_seconds, Some(60.0), "t={t}");
        }
        for t in [80, 90] {
            let (g, _) = cycle(
                &mut watch,
                at(t),
                "classic",
                partition("orders", 110, 130, 130),
                offset("orders", 100, 130, 130, None),
            );
            if t == 90 {
                assert_eq!(
                    g.lost_records,
                    Some(10),
                    "the records it had left were deleted"
                );
            }
        }
    }

    #[test]
    fn a_group_that_commits_but_never_catches_up_is_lagging_and_a_pinned_one_blocked() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut watch = CommitWatch::default();
        // It commits every cycle, but the producer writes faster: 50, 60, 70, 80 behind.
        for (i, t) in [0u64, 20, 40, 60].into_iter().enumerate() {
            let committed = 100 + 10 * i as i64;
            let hw = committed + 50 + 10 * i as i64;
            let (g, status) = cycle(
                &mut watch,
                at(t),
                "consumer",
                partition("orders", 0, hw, hw),
                offset("orders", committed, hw, hw, Some(TimeLag::Since(3.0))),
            );
            // First seen, the stall is dated by the first record left (3 s old); every
            // commit after resets it.
            let stall = if t == 0 { 3.0 } else { 0.0 };
            assert_eq!(g.commit_stall_seconds, Some(stall));
            let expected = if t >= 60 {
                GroupStatus::Lagging
            } else {
                GroupStatus::Ok
            };
            assert_eq!(status, Some(expected), "t={t}");
        }
        // A healthy consumer of a busy topic: some lag at every sample, but it shrinks
        // now and then. Never lagging.
        let mut watch = CommitWatch::default();
        for (i, t) in (0u64..200).step_by(10).enumerate() {
            let committed = 1000 * i as i64;
            let hw = committed + [5, 40, 12][i % 3];
            let (_, status) = cycle(
                &mut watch,
                at(t),
                "consumer",
                partition("orders", 0, hw, hw),
                offset("orders", committed, hw, hw, Some(TimeLag::Since(0.1))),
            );
            assert_eq!(status, Some(GroupStatus::Ok), "t={t}");
        }
        // Read everything below the LSO of a pinned partition: blocked, no stall however
        // long it waits.
        let mut watch = CommitWatch::default();
        for t in [0u64, 100, 200] {
            let (g, status) = cycle(
                &mut watch,
                at(t),
                "classic",
                partition("orders", 0, 120, 100),
                offset("orders", 100, 120, 100, Some(TimeLag::Since(30.0))),
            );
            assert_eq!(g.commit_stall_seconds, Some(0.0));
            assert_eq!(status, Some(GroupStatus::Blocked), "t={t}");
        }
    }

    #[test]
    fn retention_margin_and_lost_records() {
        let t0 = Instant::now();
        let mut watch = CommitWatch::default();
        // Committed 100, log start 40: 60 offsets of margin; the next record the group
        // would receive is 45 s old against a 60 s retention: 15 s left at least.
        let (g, _) = cycle(
            &mut watch,
            t0,
            "classic",
            partition("orders", 40, 120, 100),
            offset("orders", 100, 120, 100, Some(TimeLag::Since(45.0))),
        );
        assert_eq!(g.retention_margin, Some(60));
        assert_eq!(g.lost_records, Some(0));
        assert_eq!(g.retention_margin_seconds, Some(15.0));
        // The log start passed the committed offset: once a second cycle sees it there,
        // 30 records lost, no margin left.
        for confirmed in [false, true] {
            let (g, _) = cycle(
                &mut watch,
                t0,
                "classic",
                partition("orders", 130, 150, 140),
                offset("orders", 100, 150, 140, None),
            );
            assert_eq!(g.lost_records.is_some(), confirmed);
        }
        let (g, status) = cycle(
            &mut watch,
            t0,
            "classic",
            partition("orders", 130, 150, 140),
            offset("orders", 100, 150, 140, None),
        );
        // What is left to read: from the log start to the LSO.
        assert_eq!(status, Some(GroupStatus::Ok));
        assert_eq!(g.retention_margin, Some(0));
        assert_eq!(g.lost_records, Some(30));
        assert_eq!(g.retention_margin_seconds, Some(0.0));
        // A caught-up group keeps the whole retention; unknown age: absent.
        let (g, _) = cycle(
            &mut watch,
            t0,
            "classic",
            partition("orders", 0, 150, 150),
            offset("orders", 150, 150, 150, Some(TimeLag::NothingLeft)),
        );
        assert_eq!(g.retention_margin_seconds, Some(60.0));
        let (g, _) = cycle(
            &mut watch,
            t0,
            "classic",
            partition("orders", 0, 150, 150),
            offset("orders", 120, 150, 150, None),
        );
        assert_eq!(g.retention_margin_seconds, None);
        assert_eq!(g.retention_margin, Some(120));
    }

    #[test]
    fn a_loss_counts_only_when_a_second_cycle_confirms_it_and_something_was_left() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        // Kafka Streams commits 200 and purges its repartition topic up to it between the
        // exporter's two reads: one cycle sees committed 150 below log start 200.
        let mut watch = CommitWatch::default();
        cycle(
            &mut watch,
            at(0),
            "classic",
            partition("orders", 100, 260, 260),
            offset("orders", 150, 260, 260, Some(TimeLag::Since(2.0))),
        );
        let (g, _) = cycle(
            &mut watch,
            at(10),
            "classic",
            partition("orders", 200, 270, 270),
            offset("orders", 150, 270, 270, Some(TimeLag::Since(2.0))),
        );
        assert_eq!(
            (g.lost_records, g.retention_margin_seconds),
            (None, None),
            "not confirmed yet"
        );
        let (g, _) = cycle(
            &mut watch,
            at(20),
            "classic",
            partition("orders", 200, 280, 280),
            offset("orders", 200, 280, 280, Some(TimeLag::Since(2.0))),
        );
        assert_eq!(
            g.lost_records,
            Some(0),
            "it had committed 200: nothing lost"
        );

        // An exactly-once group caught up at a commit marker (lag 1, nothing to receive):
        // not stalled however long, and retention deleting the marker loses nothing.
        let mut watch = CommitWatch::default();
        let marker_only = |log_start: i64| {
            let mut o = offset("orders", 99, 100, 100, Some(TimeLag::NothingLeft));
            if log_start > 99 {
                o.lso_time_lag = None;
                o.hw_time_lag = None;
            }
            (partition("orders", log_start, 100, 100), o)
        };
        for t in [0u64, 100, 200, 300, 400] {
            let log_start = if t < 300 { 0 } else { 100 };
            let (p, o) = marker_only(log_start);
            let (g, status) = cycle(&mut watch, at(t), "classic", p, o);
            assert_eq!(status, Some(GroupStatus::Ok), "t={t}");
            assert_eq!(g.commit_stall_seconds, Some(0.0), "t={t}");
            if t == 400 {
                assert_eq!(g.lost_records, Some(0));
                assert_eq!(g.retention_margin_seconds, Some(60.0));
            }
        }
    }

    /// One broker keeps failing ListGroups while groups come and go on the others (one
    /// console consumer after another): what the answering brokers no longer list is
    /// forgotten, so the watch stays flat; the groups last listed by the failing broker
    /// keep their clocks until it answers.
    #[test]
    fn the_watch_forgets_what_answering_brokers_no_longer_list() {
        use crate::kafka::GroupListing;
        let t0 = Instant::now();
        let mut watch = CommitWatch::default();
        let group = |name: &str, coordinator: &str| GroupState {
            name: name.into(),
            coordinator: Some(coordinator.into()),
            group_type: "classic".into(),
            protocol: "consumer".into(),
            state: "Stable".into(),
            members: Some(1),
            isolation: None,
            broker_lags: Vec::new(),
            offsets: Some(vec![offset(
                "orders",
                100,
                150,
                150,
                Some(TimeLag::Since(1.0)),
            )]),
            granularity: Default::default(),
            status: None,
            detail: None,
            rebalance: None,
            rates: Vec::new(),
            ruler: Default::default(),
        };
        let step =
            |watch: &mut CommitWatch, t: u64, groups: Vec<GroupState>, listing: GroupListing| {
                let mut derived = Derived {
                    partitions: vec![partition("orders", 0, 150, 150)],
                    groups,
                    group_listing: listing,
                    ..Default::default()
                };
                apply(
                    &mut derived,
                    watch,
                    t0 + Duration::from_secs(t),
                    settings(),
                    true,
                );
            };
        step(
            &mut watch,
            0,
            vec![group("on-b", "b:9092"), group("console-0", "a:9092")],
            GroupListing::Complete,
        );
        // A new group every 10 s for 500 s; each is gone the cycle after.
        for i in 1..=50u64 {
            let churning = format!("console-{i}");
            step(
                &mut watch,
                10 * i,
                vec![group(&churning, "a:9092")],
                GroupListing::Partial(vec!["b:9092".into()]),
            );
        }
        // Bounded: the group of this cycle, those missing for less than stall_after
        // (60 s: the last six), and the one of the failing broker.
        let mut names: Vec<&str> = watch.groups.keys().map(String::as_str).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "console-44",
                "console-45",
                "console-46",
                "console-47",
                "console-48",
                "console-49",
                "console-50",
                "on-b"
            ]
        );
        // Every broker answers again and "on-b" is not listed: it is gone, at once.
        step(
            &mut watch,
            510,
            vec![group("console-50", "a:9092")],
            GroupListing::Complete,
        );
        assert_eq!(watch.len(), 1);

        // A group whose coordination moves to the failing broker (a rolling restart:
        // the restarted broker takes it back and answers loading) keeps its clock while
        // it is missing for less than stall_after.
        let mut watch = CommitWatch::default();
        let moving = |t: u64, committed: i64| {
            let mut g = group("etl", "a:9092");
            g.offsets.as_mut().unwrap()[0].committed_offset = committed;
            (t, g)
        };
        let (t, g) = moving(0, 100);
        step(&mut watch, t, vec![g], GroupListing::Complete);
        for t in [10, 20, 30] {
            step(
                &mut watch,
                t,
                Vec::new(),
                GroupListing::Partial(vec!["b:9092".into()]),
            );
        }
        assert_eq!(watch.len(), 1, "kept while it may have moved");
        let mut derived = Derived {
            partitions: vec![partition("orders", 0, 150, 150)],
            groups: vec![moving(40, 100).1],
            group_listing: GroupListing::Complete,
            ..Default::default()
        };
        apply(
            &mut derived,
            &mut watch,
            t0 + Duration::from_secs(40),
            settings(),
            true,
        );
        let stall = derived.groups[0].offsets.as_ref().unwrap()[0].commit_stall_seconds;
        // 40 s since the first sight, which dated it by its first record left (1 s old).
        assert_eq!(stall, Some(41.0), "the stall clock went on across the move");

        // Nothing listed at all (every broker failed): nothing is forgotten.
        step(&mut watch, 1000, Vec::new(), GroupListing::Unknown);
        assert_eq!(watch.len(), 1);
    }

    #[test]
    fn share_groups_and_unknown_lags_are_left_alone() {
        let t0 = Instant::now();
        let mut watch = CommitWatch::default();
        let (g, status) = cycle(
            &mut watch,
            t0,
            "share",
            partition("orders", 0, 150, 150),
            offset("orders", 100, 150, 150, Some(TimeLag::Since(1.0))),
        );
        assert_eq!((g.commit_stall_seconds, status), (None, None));
        assert!(watch.is_empty());
        let mut unknown = offset("orders", 100, 150, 150, None);
        unknown.lag = None;
        let (g, status) = cycle(
            &mut watch,
            t0,
            "classic",
            partition("orders", 0, 150, 150),
            unknown,
        );
        assert_eq!((g.commit_stall_seconds, status), (None, None));
    }
}
