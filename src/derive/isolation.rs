//! Two rulers on one topic: which isolation level each group reads with, and the records
//! of aborted transactions the groups that read uncommitted delivered. Pure derivations
//! over the cycles the exporter saw ([`IsolationWatch`] holds what they need), run after
//! [`crate::derive::derive`] and before [`crate::derive::progress`], whose statuses
//! follow what is found here.
//!
//! No broker API tells a consumer's `isolation.level`; its offsets show it:
//!
//! - **read_uncommitted, proven**: the group's committed offset on a partition advanced,
//!   between two cycles, to a position past that cycle's LSO (and not past the HW), while
//!   the group had live members. A cycle samples committed offsets before the LSO, and the
//!   LSO only grows, so the offset was past the LSO when it was committed: a
//!   read_committed consumer is never given a record there. An offset reset is no
//!   evidence (Kafka resets only the offsets of a group without members, and the offset
//!   does not advance after it until the members read).
//! - **read_committed, inferred**: the committed offset stands at a pinned LSO (HW > LSO)
//!   with records above it to read, unmoved, while the group has live members, for
//!   [`HOLD_FOR`]: longer than the default session timeout of both clients (45 s), so a
//!   consumer that died has left the group by then. A live read_uncommitted consumer would
//!   have read on. It is an inference: a consumer stuck in processing for that long looks
//!   the same, so it never overrides a proof of read_uncommitted for the same member
//!   (`isolation.level` is fixed for a consumer's life).
//! - share groups: their `share.isolation.level`, read from the broker.
//!
//! Each piece of evidence names the member that owned the partition where the assignment
//! is known (classic `consumer` protocol, KIP-848, streams), so that a group whose members
//! disagree is **mixed**, with the members on each side. Evidence is remembered across
//! cycles and forgotten once every member id of the group when it was seen has left (a
//! redeploy may have changed the setting); a group without members keeps it until members
//! return. The exporter's own restart forgets it: the alert rules carry it across with
//! `max_over_time` over `kafka_consumergroup_isolation`.
//!
//! **Aborted records read.** When a window reads an abort marker
//! ([`crate::kafka::records::CostTally`]), the transaction's record batches are known. A
//! group that reads uncommitted has delivered every record of it its committed offset has
//! passed (the highest committed offset seen: a consumer that seeks back and reads them
//! again is counted once), and every record it passes later: both are counted per group
//! and topic. Records below the log start were never delivered and count nowhere; a group
//! that commits past the HW counts nothing there. Exact where every batch of the
//! transaction was read; where the reading began inside it, the offsets from the
//! transaction's first record (as DescribeProducers gave it while it was open) to where
//! the reading began are counted as records: an upper bound, marked so.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::state::{
    AbortedRead, AbortedTransactionRead, Derived, Evidence, GroupState, Owner, PartitionState,
    Ruler, RulerLevel, SeenMember,
};
use crate::kafka::records::{AbortedTransaction, Span};
use crate::kafka::{GroupListing, Isolation};

/// How long a group must stand at a pinned LSO with records above it, with live members,
/// to be taken as reading committed: longer than the default `session.timeout.ms` of the
/// Java client and librdkafka (45 s), so that a consumer that died has left the group.
pub const HOLD_FOR: Duration = Duration::from_secs(60);
/// Aborted transactions a group lists at most (newest first).
const RECENT: usize = 20;
/// Aborted transactions remembered per partition at most.
const HISTORY: usize = 32;
/// Cycles a group missing from the lists is remembered at most while some broker fails
/// to list its groups.
const MISSING_CYCLES: u64 = 40;

/// What the isolation of every group and the aborted transactions need from earlier
/// cycles.
#[derive(Debug, Default)]
pub struct IsolationWatch {
    groups: HashMap<String, Remembered>,
    /// Partitions with aborted transactions, oldest first.
    aborts: HashMap<(Arc<str>, i32), Vec<Learned>>,
    /// The open transactions of the last cycle that listed them, per partition.
    open: HashMap<(Arc<str>, i32), Vec<SeenOpen>>,
    cycle: u64,
}

impl IsolationWatch {
    /// Groups remembered.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

/// An open transaction as a cycle listed it.
#[derive(Debug)]
struct SeenOpen {
    producer_id: i64,
    transactional_id: String,
    start_offset: i64,
}

/// An aborted transaction and the cycle that learned of it.
#[derive(Debug)]
struct Learned {
    transaction: AbortedTransaction,
    transactional_id: String,
    cycle: u64,
}

/// One piece of evidence and who was in the group when it was seen.
#[derive(Debug)]
struct Kept {
    evidence: Evidence,
    /// Hashes of the member ids in the group then: it is forgotten once none is left.
    witnesses: Vec<u64>,
}

/// A group's position on a pinned partition in the last cycle.
#[derive(Debug)]
struct Position {
    topic: Arc<str>,
    partition: i32,
    committed: i64,
    /// Since when it has stood at the LSO with records above it and live members.
    held_since: Option<Instant>,
}

#[derive(Debug, Default)]
struct Remembered {
    evidence: Vec<Kept>,
    /// Its positions on pinned partitions, sorted by topic and partition.
    positions: Vec<Position>,
    /// Per topic, what it read of aborted transactions.
    aborted: BTreeMap<Arc<str>, AbortedRead>,
    recent: VecDeque<AbortedTransactionRead>,
    /// The highest committed offset seen on each partition that has aborted transactions.
    passed: HashMap<(Arc<str>, i32), i64>,
    coordinator: Option<String>,
    seen: u64,
}

/// Abort markers of one producer and epoch this close in time end one transaction.
const SAME_ABORT_MS: u64 = 5_000;

fn unix_ms(at: SystemTime) -> i64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Remembered {
    /// Nothing to remember: no evidence, no position on a pinned partition, nothing read
    /// of aborted transactions.
    fn is_empty(&self) -> bool {
        self.evidence.is_empty()
            && self.positions.is_empty()
            && self.aborted.is_empty()
            && self.recent.is_empty()
            && self.passed.is_empty()
    }
}

fn id_hash(member_id: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    member_id.hash(&mut hasher);
    hasher.finish()
}

/// What one cycle gives [`apply`] besides its groups and partitions.
pub struct Cycle<'a> {
    /// What the cycle's windows read of abort markers ([`crate::kafka::RawSample::aborted`]).
    pub aborted: Vec<(Arc<str>, i32, AbortedTransaction)>,
    /// A group's committed offset on a partition in the cycle before (group, topic,
    /// partition), as the commit watch remembers it ([`super::progress::CommitWatch`]).
    pub committed_before: &'a dyn Fn(&str, &str, i32) -> Option<i64>,
    pub now: Instant,
    pub wall: SystemTime,
    /// The cycle reached the cluster: groups it no longer lists are forgotten only then.
    pub reached: bool,
}

/// Fills every group's [`Ruler`], advancing `watch`.
pub fn apply(derived: &mut Derived, watch: &mut IsolationWatch, cycle: Cycle) {
    let Cycle {
        aborted,
        committed_before,
        now,
        wall,
        reached,
    } = cycle;
    watch.cycle += 1;
    let cycle = watch.cycle;
    learn_aborts(watch, aborted, &derived.partitions, cycle);
    let partitions: HashMap<(&str, i32), &PartitionState> = derived
        .partitions
        .iter()
        .map(|p| ((&*p.topic, p.partition), p))
        .collect();
    for group in &mut derived.groups {
        if group.group_type == "share" {
            group.ruler.level = group
                .isolation
                .map_or(RulerLevel::Unknown, RulerLevel::from);
            continue;
        }
        // Only groups with something to remember are kept: most groups never show their
        // isolation, and cost nothing here.
        let mut fresh = Remembered::default();
        let existing = watch.groups.get_mut(group.name.as_str());
        let new = existing.is_none();
        let remembered = existing.unwrap_or(&mut fresh);
        remembered.seen = cycle;
        if remembered.coordinator != group.coordinator {
            remembered.coordinator.clone_from(&group.coordinator);
        }
        forget_departed(remembered, group);
        observe(
            remembered,
            group,
            &partitions,
            committed_before,
            (now, wall),
        );
        group.ruler = ruler_of(remembered, group);
        count_aborted(remembered, group, &watch.aborts, &partitions, cycle);
        group.ruler.aborted = remembered
            .aborted
            .iter()
            .map(|(topic, read)| (topic.clone(), *read))
            .collect();
        group.ruler.aborted_transactions = remembered.recent.iter().cloned().collect();
        let keep = !remembered.is_empty();
        if new && keep {
            watch.groups.insert(group.name.clone(), fresh);
        } else if !new && !keep {
            watch.groups.remove(group.name.as_str());
        }
    }
    if reached {
        let listing = &derived.group_listing;
        let complete = *listing == GroupListing::Complete;
        watch.groups.retain(|_, r| {
            r.seen == cycle
                || (!complete
                    && !listing.gone(r.coordinator.as_deref())
                    && cycle - r.seen < MISSING_CYCLES)
        });
    }
}

/// Takes this cycle's aborted transactions into each partition's history, with the
/// transactional id and first offset the last cycle's open transactions gave them; then
/// remembers this cycle's open transactions and forgets what the log no longer holds.
fn learn_aborts(
    watch: &mut IsolationWatch,
    aborted: Vec<(Arc<str>, i32, AbortedTransaction)>,
    partitions: &[PartitionState],
    cycle: u64,
) {
    for (topic, partition, mut transaction) in aborted {
        let key = (topic, partition);
        let seen_open = watch.open.get(&key).and_then(|open| {
            open.iter()
                .find(|o| o.producer_id == transaction.producer_id)
        });
        let mut transactional_id = String::new();
        if let Some(seen) = seen_open {
            transactional_id.clone_from(&seen.transactional_id);
            let start = &seen.start_offset;
            let first = transaction.first_offset();
            if *start == first {
                // Read from its very first record.
                transaction.exact = true;
            } else if *start < first && !transaction.exact {
                // Its records before the reading began: at most every offset there.
                transaction.spans.insert(
                    0,
                    Span {
                        base_offset: *start,
                        last_offset: first - 1,
                        records: first - start,
                    },
                );
            }
        }
        let history = watch.aborts.entry(key).or_default();
        let marker = transaction.marker_offset;
        if history.iter().any(|l| {
            l.transaction.marker_offset == marker
                && l.transaction.producer_id == transaction.producer_id
        }) {
            continue;
        }
        history.push(Learned {
            transaction,
            transactional_id,
            cycle,
        });
        if history.len() > HISTORY {
            history.remove(0);
        }
    }
    let present: HashMap<(&str, i32), &PartitionState> = partitions
        .iter()
        .map(|p| ((&*p.topic, p.partition), p))
        .collect();
    watch.aborts.retain(|(topic, partition), history| {
        let Some(p) = present.get(&(&**topic, *partition)) else {
            return false;
        };
        if let Some(log_start) = p.log_start_offset {
            history.retain(|l| l.transaction.last_offset() >= log_start);
        }
        !history.is_empty()
    });
    for p in partitions {
        let key = (p.topic.clone(), p.partition);
        match &p.transactions {
            Some(open) if !open.is_empty() => {
                let listed = open
                    .iter()
                    .map(|t| SeenOpen {
                        producer_id: t.producer_id,
                        transactional_id: t.transactional_id.clone(),
                        start_offset: t.start_offset,
                    })
                    .collect();
                watch.open.insert(key, listed);
            }
            Some(_) => {
                watch.open.remove(&key);
            }
            // Not asked in this cycle: what the last one listed stays.
            None => {}
        }
    }
    watch
        .open
        .retain(|(topic, partition), _| present.contains_key(&(&**topic, *partition)));
}

/// Forgets the evidence seen while only members that have all left were in the group
/// (judged on a description with members: one without keeps everything).
fn forget_departed(remembered: &mut Remembered, group: &GroupState) {
    let Some(detail) = group.detail.as_ref().filter(|d| !d.members.is_empty()) else {
        return;
    };
    let present: HashSet<u64> = detail
        .members
        .iter()
        .map(|m| id_hash(&m.member_id))
        .collect();
    remembered
        .evidence
        .retain(|kept| kept.witnesses.iter().any(|w| present.contains(w)));
}

/// Looks for evidence in this cycle's offsets and remembers the group's positions on
/// pinned partitions.
fn observe(
    remembered: &mut Remembered,
    group: &GroupState,
    partitions: &HashMap<(&str, i32), &PartitionState>,
    committed_before: &dyn Fn(&str, &str, i32) -> Option<i64>,
    (now, wall): (Instant, SystemTime),
) {
    let Some(offsets) = group.offsets.as_ref() else {
        return; // unknown in this cycle: the positions stay
    };
    let live = group.members.is_some_and(|m| m > 0);
    let members = group.detail.as_ref().map(|d| &d.members[..]).unwrap_or(&[]);
    let witnesses: Vec<u64> = members.iter().map(|m| id_hash(&m.member_id)).collect();
    let mut positions = Vec::new();
    for g in offsets {
        let Some(p) = partitions.get(&(&*g.topic, g.partition)) else {
            continue;
        };
        let (Some(hw), Some(lso)) = (p.high_watermark, p.last_stable_offset) else {
            // Bounds unknown in this cycle: the position stays as it was.
            if let Ok(i) = find(&remembered.positions, &g.topic, g.partition) {
                positions.push(std::mem::replace(
                    &mut remembered.positions[i],
                    Position {
                        topic: g.topic.clone(),
                        partition: g.partition,
                        committed: g.committed_offset,
                        held_since: None,
                    },
                ));
            }
            continue;
        };
        if hw <= lso {
            continue;
        }
        let before = find(&remembered.positions, &g.topic, g.partition)
            .ok()
            .map(|i| {
                (
                    remembered.positions[i].committed,
                    remembered.positions[i].held_since,
                )
            });
        // The member that owns the partition, where the assignment is known; evidence on a
        // partition no member owns (offsets left behind, or moving) says nothing.
        let (attributable, owner) = match g.owner {
            Owner::Member(i) => (true, members.get(i)),
            Owner::Unknown => (true, None),
            Owner::Nobody | Owner::Shared(_) | Owner::Assigning => (false, None),
        };
        let seen = |isolation| Evidence {
            isolation,
            topic: g.topic.clone(),
            partition: g.partition,
            committed_offset: g.committed_offset,
            last_stable_offset: lso,
            high_watermark: hw,
            seen_at: wall,
            member: owner.map(SeenMember::of),
        };
        // Advanced since the cycle before, wherever it stood then (the partition need not
        // have been pinned: a consumer that read through a transaction opened between two
        // cycles).
        let advanced = committed_before(&group.name, &g.topic, g.partition)
            .or(before.map(|(committed, _)| committed))
            .is_some_and(|committed| committed < g.committed_offset);
        if live && attributable && advanced && g.committed_offset > lso && g.committed_offset <= hw
        {
            record(remembered, seen(Isolation::ReadUncommitted), &witnesses);
        }
        let at_lso = g.committed_offset == lso && g.lag.is_some_and(|l| l.hw_lag > 0);
        let held_since = if live && attributable && at_lso {
            Some(
                before
                    .filter(|(committed, _)| *committed == g.committed_offset)
                    .and_then(|(_, held_since)| held_since)
                    .unwrap_or(now),
            )
        } else {
            None
        };
        if held_since.is_some_and(|since| now.saturating_duration_since(since) >= HOLD_FOR) {
            record(remembered, seen(Isolation::ReadCommitted), &witnesses);
        }
        positions.push(Position {
            topic: g.topic.clone(),
            partition: g.partition,
            committed: g.committed_offset,
            held_since,
        });
    }
    remembered.positions = positions;
}

fn find(positions: &[Position], topic: &str, partition: i32) -> Result<usize, usize> {
    positions.binary_search_by(|p| (&*p.topic, p.partition).cmp(&(topic, partition)))
}

/// Keeps one piece of evidence per isolation level and member (or group, where the
/// member is unknown), the latest. A proof of read_uncommitted replaces the inference of
/// read_committed for the same member; the inference never replaces the proof.
fn record(remembered: &mut Remembered, evidence: Evidence, witnesses: &[u64]) {
    let member_id = |e: &Evidence| e.member.as_ref().map(|m| m.member_id.clone());
    let who = member_id(&evidence);
    if evidence.isolation == Isolation::ReadCommitted
        && remembered.evidence.iter().any(|k| {
            k.evidence.isolation == Isolation::ReadUncommitted && member_id(&k.evidence) == who
        })
    {
        return;
    }
    remembered.evidence.retain(|k| {
        member_id(&k.evidence) != who
            || (k.evidence.isolation != evidence.isolation
                && evidence.isolation == Isolation::ReadCommitted)
    });
    remembered.evidence.insert(
        0,
        Kept {
            evidence,
            witnesses: witnesses.to_vec(),
        },
    );
}

/// The group's level from what is remembered: its current members' evidence decides
/// (both sides among them: mixed); where none of them has shown theirs, the group's
/// remembered evidence does.
fn ruler_of(remembered: &Remembered, group: &GroupState) -> Ruler {
    let members: Vec<Option<Isolation>> = group
        .detail
        .as_ref()
        .map(|d| {
            d.members
                .iter()
                .map(|m| member_isolation(remembered, &m.member_id))
                .collect()
        })
        .unwrap_or_default();
    let sides = |isolations: &mut dyn Iterator<Item = Isolation>| {
        let (mut uncommitted, mut committed) = (false, false);
        for isolation in isolations {
            match isolation {
                Isolation::ReadUncommitted => uncommitted = true,
                Isolation::ReadCommitted => committed = true,
            }
        }
        match (uncommitted, committed) {
            (true, true) => RulerLevel::Mixed,
            (true, false) => RulerLevel::ReadUncommitted,
            (false, true) => RulerLevel::ReadCommitted,
            (false, false) => RulerLevel::Unknown,
        }
    };
    let level = match sides(&mut members.iter().flatten().copied()) {
        RulerLevel::Unknown => sides(&mut remembered.evidence.iter().map(|k| k.evidence.isolation)),
        level => level,
    };
    Ruler {
        level,
        evidence: remembered
            .evidence
            .iter()
            .map(|k| k.evidence.clone())
            .collect(),
        members,
        aborted: Vec::new(),
        aborted_transactions: Vec::new(),
    }
}

/// What one member is shown to read with: proof first, then inference.
fn member_isolation(remembered: &Remembered, member_id: &str) -> Option<Isolation> {
    let of = |isolation| {
        remembered.evidence.iter().any(|k| {
            k.evidence.isolation == isolation
                && k.evidence
                    .member
                    .as_ref()
                    .is_some_and(|m| m.member_id == member_id)
        })
    };
    if of(Isolation::ReadUncommitted) {
        Some(Isolation::ReadUncommitted)
    } else if of(Isolation::ReadCommitted) {
        Some(Isolation::ReadCommitted)
    } else {
        None
    }
}

/// Counts the records of aborted transactions the group passed in this cycle on each
/// partition that has some, where the group (or the member that owns the partition)
/// reads uncommitted; and keeps the topics it has offsets on at 0 while it does.
fn count_aborted(
    remembered: &mut Remembered,
    group: &GroupState,
    aborts: &HashMap<(Arc<str>, i32), Vec<Learned>>,
    partitions: &HashMap<(&str, i32), &PartitionState>,
    cycle: u64,
) {
    let Some(offsets) = group.offsets.as_ref() else {
        return;
    };
    let level = group.ruler.level;
    let members = group.detail.as_ref().map(|d| &d.members[..]).unwrap_or(&[]);
    if level.reads_uncommitted() {
        for g in offsets {
            remembered.aborted.entry(g.topic.clone()).or_default();
        }
    }
    let mut kept = HashSet::new();
    for g in offsets {
        let key = (g.topic.clone(), g.partition);
        let Some(history) = aborts.get(&key) else {
            continue;
        };
        kept.insert(key.clone());
        let Some(p) = partitions.get(&(&*g.topic, g.partition)) else {
            continue;
        };
        // A committed offset past the HW (set by hand, or a log truncated under it)
        // passed nothing that was delivered.
        if p.high_watermark.is_none_or(|hw| g.committed_offset > hw) {
            continue;
        }
        let log_start = p.log_start_offset.unwrap_or(0);
        let before = remembered.passed.get(&key).copied();
        let passed = before.map_or(g.committed_offset, |b| b.max(g.committed_offset));
        remembered.passed.insert(key, passed);
        let (reads_uncommitted, member) = match g.owner {
            Owner::Member(i) => (
                match group.ruler.member(i) {
                    Some(isolation) => isolation == Isolation::ReadUncommitted,
                    None => level == RulerLevel::ReadUncommitted,
                },
                members.get(i),
            ),
            _ => (level == RulerLevel::ReadUncommitted, None),
        };
        if !reads_uncommitted {
            continue;
        }
        for learned in history {
            let transaction = &learned.transaction;
            // Newly learned: everything below its position; else what it passed since.
            let from = if learned.cycle == cycle {
                log_start
            } else if let Some(before) = before {
                before.max(log_start)
            } else {
                continue;
            };
            let (records, exact) = transaction.records_in(from, passed);
            if records <= 0 {
                continue;
            }
            // A transaction across several partitions of the topic is one: its markers
            // carry the same producer and epoch, written within a moment of each other.
            let aborted_at_ms = transaction.aborted_at_ms;
            let elsewhere = remembered.recent.iter().any(|r| {
                *r.topic == *g.topic
                    && r.partition != g.partition
                    && r.producer_id == transaction.producer_id
                    && r.producer_epoch == transaction.producer_epoch
                    && unix_ms(r.aborted_at).abs_diff(aborted_at_ms) <= SAME_ABORT_MS
            });
            let first_time = !elsewhere
                && (learned.cycle == cycle || transaction.records_in(log_start, from).0 == 0);
            let read = remembered.aborted.entry(g.topic.clone()).or_default();
            read.records = read.records.saturating_add(records as u64);
            read.transactions += u64::from(first_time);
            let same = |r: &AbortedTransactionRead| {
                *r.topic == *g.topic
                    && r.partition == g.partition
                    && r.producer_id == transaction.producer_id
                    && r.last_offset == transaction.last_offset()
            };
            match remembered.recent.iter().position(same) {
                Some(i) => {
                    let mut entry = remembered.recent.remove(i).expect("found above");
                    entry.records = entry.records.saturating_add(records);
                    entry.exact &= exact;
                    remembered.recent.push_front(entry);
                }
                None => remembered.recent.push_front(AbortedTransactionRead {
                    topic: g.topic.clone(),
                    partition: g.partition,
                    transactional_id: learned.transactional_id.clone(),
                    producer_id: transaction.producer_id,
                    producer_epoch: transaction.producer_epoch,
                    first_offset: transaction.first_offset(),
                    last_offset: transaction.last_offset(),
                    records,
                    exact,
                    aborted_at: SystemTime::UNIX_EPOCH
                        + Duration::from_millis(transaction.aborted_at_ms.max(0) as u64),
                    member: member.map(SeenMember::of),
                }),
            }
            remembered.recent.truncate(RECENT);
        }
    }
    remembered.passed.retain(|key, _| kept.contains(key));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive::{GroupPartitionState, Visibility};
    use crate::kafka::{GroupDetail, RawMember};

    fn partition(topic: &str, p: i32, log_start: i64, hw: i64, lso: i64) -> PartitionState {
        PartitionState {
            topic: Arc::from(topic),
            partition: p,
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

    fn member(id: &str, client: &str) -> RawMember {
        RawMember {
            member_id: id.into(),
            client_id: client.into(),
            client_host: "/10.0.0.7".into(),
            ..Default::default()
        }
    }

    /// A group whose member `owner` (an index of `members`) owns each offset's partition;
    /// `None`: the owner is not known.
    fn group(
        members: &[RawMember],
        offsets: &[(&PartitionState, i64, Option<usize>)],
    ) -> GroupState {
        let offsets = offsets
            .iter()
            .map(|(p, committed, owner)| GroupPartitionState {
                topic: p.topic.clone(),
                partition: p.partition,
                committed_offset: *committed,
                lag: Some(
                    crate::derive::lag(
                        *committed,
                        p.high_watermark.unwrap(),
                        p.last_stable_offset.unwrap(),
                        None,
                    )
                    .0,
                ),
                hw_time_lag: None,
                lso_time_lag: None,
                commit_stall_seconds: None,
                retention_margin: None,
                retention_margin_seconds: None,
                lost_records: None,
                owner: owner.map_or(Owner::Unknown, Owner::Member),
                abandoned: false,
            })
            .collect();
        GroupState {
            name: "g".into(),
            coordinator: Some("a:9092".into()),
            group_type: "classic".into(),
            protocol: "consumer".into(),
            state: "Stable".into(),
            members: Some(members.len()),
            isolation: None,
            broker_lags: Vec::new(),
            offsets: Some(offsets),
            granularity: Default::default(),
            status: None,
            detail: Some(GroupDetail {
                epoch: None,
                assignment_epoch: None,
                members: members.to_vec(),
            }),
            rebalance: None,
            rates: Vec::new(),
            ruler: Default::default(),
        }
    }

    struct Run {
        watch: IsolationWatch,
        t0: Instant,
    }

    impl Run {
        fn new() -> Run {
            Run {
                watch: IsolationWatch::default(),
                t0: Instant::now(),
            }
        }

        fn cycle(
            &mut self,
            at: u64,
            partitions: Vec<PartitionState>,
            group: GroupState,
            aborted: Vec<(Arc<str>, i32, AbortedTransaction)>,
        ) -> GroupState {
            let mut derived = Derived {
                partitions,
                groups: vec![group],
                group_listing: GroupListing::Complete,
                ..Default::default()
            };
            let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000 + at);
            apply(
                &mut derived,
                &mut self.watch,
                Cycle {
                    aborted,
                    committed_before: &|_, _, _| None,
                    now: self.t0 + Duration::from_secs(at),
                    wall,
                    reached: true,
                },
            );
            derived.groups.pop().unwrap()
        }
    }

    #[test]
    fn a_group_that_advances_past_the_lso_with_members_reads_uncommitted() {
        let mut run = Run::new();
        let java = [member("m-1", "java-consumer")];
        // First sight, already past the LSO: no movement seen yet, nothing shown.
        let p = partition("orders", 0, 0, 900_000, 880_000);
        let g = run.cycle(
            0,
            vec![p.clone()],
            group(&java, &[(&p, 885_000, Some(0))]),
            vec![],
        );
        assert_eq!(g.ruler.level, RulerLevel::Unknown);
        // It reads on past the open transaction: proof.
        let p = partition("orders", 0, 0, 905_000, 880_000);
        let g = run.cycle(
            15,
            vec![p.clone()],
            group(&java, &[(&p, 899_000, Some(0))]),
            vec![],
        );
        assert_eq!(g.ruler.level, RulerLevel::ReadUncommitted);
        assert_eq!(g.ruler.members, [Some(Isolation::ReadUncommitted)]);
        let e = &g.ruler.evidence[0];
        assert_eq!(
            (e.committed_offset, e.last_stable_offset, e.high_watermark),
            (899_000, 880_000, 905_000)
        );
        assert_eq!(e.member.as_ref().unwrap().client_id, "java-consumer");
        // Remembered while it stands at the LSO of the next transaction, on a partition
        // where nothing is pinned, and never blocked there.
        let p = partition("orders", 0, 0, 960_000, 950_000);
        let g = run.cycle(
            30,
            vec![p.clone()],
            group(&java, &[(&p, 950_000, Some(0))]),
            vec![],
        );
        assert_eq!(g.ruler.level, RulerLevel::ReadUncommitted);
        assert!(!g.waits_at_lso(&g.offsets.as_ref().unwrap()[0], &p));
        // ... however long it stands there: the inference never beats the proof.
        let g = run.cycle(
            200,
            vec![p.clone()],
            group(&java, &[(&p, 950_000, Some(0))]),
            vec![],
        );
        assert_eq!(g.ruler.level, RulerLevel::ReadUncommitted);
        assert_eq!(g.ruler.evidence.len(), 1);
    }

    #[test]
    fn an_offset_reset_or_a_commit_past_the_hw_is_no_evidence() {
        let mut run = Run::new();
        let p = partition("orders", 0, 0, 900, 880);
        // Reset to the HW while the group is empty, then a member joins and commits the
        // same offset: it never advanced past the LSO with members.
        run.cycle(0, vec![p.clone()], group(&[], &[(&p, 800, None)]), vec![]);
        let g = run.cycle(15, vec![p.clone()], group(&[], &[(&p, 900, None)]), vec![]);
        assert_eq!(g.ruler.level, RulerLevel::Unknown);
        let one = [member("m-1", "rdkafka")];
        let g = run.cycle(
            30,
            vec![p.clone()],
            group(&one, &[(&p, 900, Some(0))]),
            vec![],
        );
        assert_eq!(g.ruler.level, RulerLevel::Unknown);
        // Committed by hand far past the HW: no evidence either.
        let g = run.cycle(
            45,
            vec![p.clone()],
            group(&one, &[(&p, 5_000, Some(0))]),
            vec![],
        );
        assert_eq!(g.ruler.level, RulerLevel::Unknown);
    }

    #[test]
    fn a_group_held_at_a_pinned_lso_for_a_minute_reads_committed() {
        let mut run = Run::new();
        let librdkafka = [member("m-1", "rdkafka")];
        for (at, level) in [
            (0, RulerLevel::Unknown),
            (30, RulerLevel::Unknown),
            (59, RulerLevel::Unknown),
            (60, RulerLevel::ReadCommitted),
        ] {
            let p = partition("orders", 0, 0, 900 + at as i64, 880);
            let g = run.cycle(
                at,
                vec![p.clone()],
                group(&librdkafka, &[(&p, 880, Some(0))]),
                vec![],
            );
            assert_eq!(g.ruler.level, level, "at {at}");
        }
        // Without members, no hold counts: the consumer may have died there.
        let mut run = Run::new();
        for at in [0, 30, 90] {
            let p = partition("orders", 0, 0, 900, 880);
            let g = run.cycle(at, vec![p.clone()], group(&[], &[(&p, 880, None)]), vec![]);
            assert_eq!(g.ruler.level, RulerLevel::Unknown, "at {at}");
            assert!(
                g.waits_at_lso(&g.offsets.as_ref().unwrap()[0], &p),
                "no members, not known to read uncommitted: held as any other"
            );
        }
    }

    #[test]
    fn members_that_disagree_make_the_group_mixed() {
        let mut run = Run::new();
        let both = [member("m-java", "java"), member("m-rdkafka", "rdkafka")];
        let mut g = None;
        for at in [0u64, 15, 30, 45, 60, 75] {
            let p0 = partition("orders", 0, 0, 1_000 + 10 * at as i64, 500);
            let p1 = partition("orders", 1, 0, 1_000 + 10 * at as i64, 700);
            g = Some(run.cycle(
                at,
                vec![p0.clone(), p1.clone()],
                group(
                    &both,
                    &[(&p0, 900 + at as i64, Some(0)), (&p1, 700, Some(1))],
                ),
                vec![],
            ));
        }
        let g = g.unwrap();
        assert_eq!(g.ruler.level, RulerLevel::Mixed);
        assert_eq!(
            g.ruler.members,
            [
                Some(Isolation::ReadUncommitted),
                Some(Isolation::ReadCommitted)
            ]
        );
        // The read_committed member's partition is held by the transaction; the other's
        // is not.
        let offsets = g.offsets.as_ref().unwrap();
        assert!(g.reads_uncommitted_at(&offsets[0]));
        assert!(!g.reads_uncommitted_at(&offsets[1]));
    }

    #[test]
    fn evidence_is_forgotten_once_every_member_it_was_seen_with_has_left() {
        let mut run = Run::new();
        let before = [member("a", "java"), member("b", "java")];
        let p = partition("orders", 0, 0, 900, 800);
        run.cycle(
            0,
            vec![p.clone()],
            group(&before, &[(&p, 810, Some(0))]),
            vec![],
        );
        let g = run.cycle(
            15,
            vec![p.clone()],
            group(&before, &[(&p, 850, Some(0))]),
            vec![],
        );
        assert_eq!(g.ruler.level, RulerLevel::ReadUncommitted);
        // A rolling restart: "a" is replaced, "b" stays: remembered (the group's).
        let rolling = [member("c", "java"), member("b", "java")];
        let g = run.cycle(
            30,
            vec![p.clone()],
            group(&rolling, &[(&p, 850, Some(0))]),
            vec![],
        );
        assert_eq!(g.ruler.level, RulerLevel::ReadUncommitted);
        assert_eq!(
            g.ruler.members,
            [None, None],
            "neither member showed its own"
        );
        // Every consumer down: kept until members return.
        let g = run.cycle(45, vec![p.clone()], group(&[], &[(&p, 850, None)]), vec![]);
        assert_eq!(g.ruler.level, RulerLevel::ReadUncommitted);
        // All of them new: a redeploy may have changed the setting.
        let redeployed = [member("d", "java"), member("e", "java")];
        let g = run.cycle(
            60,
            vec![p.clone()],
            group(&redeployed, &[(&p, 850, Some(0))]),
            vec![],
        );
        assert_eq!(g.ruler.level, RulerLevel::Unknown);
    }

    fn aborted(
        producer_id: i64,
        spans: &[(i64, i64, i64)],
        marker: i64,
        exact: bool,
    ) -> AbortedTransaction {
        AbortedTransaction {
            producer_id,
            producer_epoch: 3,
            spans: spans
                .iter()
                .map(|&(base_offset, last_offset, records)| Span {
                    base_offset,
                    last_offset,
                    records,
                })
                .collect(),
            marker_offset: marker,
            aborted_at_ms: 1_790_000_100_000,
            exact,
        }
    }

    fn read(g: &GroupState) -> (u64, u64) {
        g.ruler
            .aborted
            .iter()
            .find(|(t, _)| &**t == "orders")
            .map_or((0, 0), |(_, r)| (r.records, r.transactions))
    }

    #[test]
    fn a_read_uncommitted_group_counts_the_aborted_records_it_passed_once() {
        let mut run = Run::new();
        let java = [member("m-1", "java")];
        // A transaction of producer 7 holds the LSO at 100; its records interleave with
        // plain ones: 100..=109 (10), 120..=124 (5), 140..=146 (7); the group reads past.
        let pinned = |hw| partition("orders", 0, 0, hw, 100);
        let p = pinned(130);
        run.cycle(
            0,
            vec![p.clone()],
            group(&java, &[(&p, 105, Some(0))]),
            vec![],
        );
        let p = pinned(150);
        let g = run.cycle(
            15,
            vec![p.clone()],
            group(&java, &[(&p, 130, Some(0))]),
            vec![],
        );
        assert_eq!(g.ruler.level, RulerLevel::ReadUncommitted);
        assert_eq!(read(&g), (0, 0), "present at 0 while it reads uncommitted");
        // The abort marker at 150 is read; the group stands at 130: 15 records passed.
        let p = partition("orders", 0, 0, 160, 160);
        let t = aborted(
            7,
            &[(100, 109, 10), (120, 124, 5), (140, 146, 7)],
            150,
            true,
        );
        let g = run.cycle(
            30,
            vec![p.clone()],
            group(&java, &[(&p, 130, Some(0))]),
            vec![(p.topic.clone(), 0, t)],
        );
        assert_eq!(read(&g), (15, 1));
        let listed = &g.ruler.aborted_transactions[0];
        assert_eq!(
            (
                listed.first_offset,
                listed.last_offset,
                listed.records,
                listed.exact
            ),
            (100, 146, 15, true)
        );
        assert_eq!(listed.member.as_ref().unwrap().client_id, "java");
        // It reads on past the rest: the other 7, the same transaction.
        let g = run.cycle(
            45,
            vec![p.clone()],
            group(&java, &[(&p, 160, Some(0))]),
            vec![],
        );
        assert_eq!(read(&g), (22, 1));
        assert_eq!(g.ruler.aborted_transactions[0].records, 22);
        // It seeks back and reads them again: counted once.
        run.cycle(
            60,
            vec![p.clone()],
            group(&java, &[(&p, 100, Some(0))]),
            vec![],
        );
        let g = run.cycle(
            75,
            vec![p.clone()],
            group(&java, &[(&p, 160, Some(0))]),
            vec![],
        );
        assert_eq!(read(&g), (22, 1));
        // Committed by hand far past the HW: nothing more.
        let g = run.cycle(
            90,
            vec![p.clone()],
            group(&java, &[(&p, 10_000, Some(0))]),
            vec![],
        );
        assert_eq!(read(&g), (22, 1));
    }

    #[test]
    fn a_read_committed_group_and_deleted_records_count_nothing() {
        let mut run = Run::new();
        let rdkafka = [member("m-1", "rdkafka")];
        for at in [0u64, 30, 60] {
            let p = partition("orders", 0, 0, 150, 100);
            run.cycle(
                at,
                vec![p.clone()],
                group(&rdkafka, &[(&p, 100, Some(0))]),
                vec![],
            );
        }
        let p = partition("orders", 0, 0, 160, 160);
        let t = aborted(7, &[(100, 139, 40)], 150, true);
        let g = run.cycle(
            75,
            vec![p.clone()],
            group(&rdkafka, &[(&p, 160, Some(0))]),
            vec![(p.topic.clone(), 0, t)],
        );
        assert_eq!(g.ruler.level, RulerLevel::ReadCommitted);
        assert_eq!(read(&g), (0, 0));
        assert!(g.ruler.aborted_transactions.is_empty());

        // A read_uncommitted group learns of a transaction whose first records were
        // deleted below the log start: those were never delivered.
        let mut run = Run::new();
        let java = [member("m-1", "java")];
        let p = partition("orders", 0, 0, 150, 100);
        run.cycle(
            0,
            vec![p.clone()],
            group(&java, &[(&p, 101, Some(0))]),
            vec![],
        );
        run.cycle(
            15,
            vec![p.clone()],
            group(&java, &[(&p, 140, Some(0))]),
            vec![],
        );
        let p = partition("orders", 0, 120, 160, 160);
        let t = aborted(7, &[(100, 139, 40)], 150, true);
        let g = run.cycle(
            30,
            vec![p.clone()],
            group(&java, &[(&p, 160, Some(0))]),
            vec![(p.topic.clone(), 0, t)],
        );
        assert_eq!(read(&g), (20, 1));
    }

    #[test]
    fn a_transaction_seen_open_gives_its_id_and_its_first_offset() {
        let mut run = Run::new();
        let java = [member("m-1", "java")];
        let open = |p: &mut PartitionState, start: i64| {
            p.transactions = Some(vec![crate::derive::OpenTransaction {
                producer_id: 7,
                producer_epoch: 3,
                start_offset: start,
                transactional_id: "payments-tx".into(),
                state: Some("Ongoing".into()),
                age_seconds: Some(1.0),
                age_clock: None,
                timeout_ms: None,
                coordinator: crate::derive::CoordinatorStatus::Open,
                coordinator_broker: None,
                hanging: false,
            }]);
        };
        let mut p = partition("orders", 0, 0, 150, 100);
        open(&mut p, 100);
        run.cycle(
            0,
            vec![p.clone()],
            group(&java, &[(&p, 101, Some(0))]),
            vec![],
        );
        run.cycle(
            15,
            vec![p.clone()],
            group(&java, &[(&p, 150, Some(0))]),
            vec![],
        );
        // The window began at 120, inside the transaction: what it read is known, the
        // offsets 100..120 before it at most records.
        let p = partition("orders", 0, 0, 160, 160);
        let t = aborted(7, &[(120, 139, 20)], 150, false);
        let g = run.cycle(
            30,
            vec![p.clone()],
            group(&java, &[(&p, 160, Some(0))]),
            vec![(p.topic.clone(), 0, t)],
        );
        let listed = &g.ruler.aborted_transactions[0];
        assert_eq!(listed.transactional_id, "payments-tx");
        assert_eq!(
            (listed.first_offset, listed.records, listed.exact),
            (100, 40, false)
        );
    }

    #[test]
    fn read_through_between_two_cycles_is_proof_and_one_transaction_counts_once_per_topic() {
        // The cycle before saw it at 4 with nothing pinned (the commit watch remembers
        // that); now the LSO stands at 4 and it committed 9.
        let mut watch = IsolationWatch::default();
        let java = [member("m-1", "java")];
        let p0 = partition("orders", 0, 0, 9, 4);
        let p1 = partition("orders", 1, 0, 7, 2);
        let mut derived = Derived {
            partitions: vec![p0.clone(), p1.clone()],
            groups: vec![group(&java, &[(&p0, 9, Some(0)), (&p1, 7, Some(0))])],
            group_listing: GroupListing::Complete,
            ..Default::default()
        };
        let before = |_: &str, _: &str, partition: i32| Some(if partition == 0 { 4 } else { 2 });
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000);
        apply(
            &mut derived,
            &mut watch,
            Cycle {
                aborted: Vec::new(),
                committed_before: &before,
                now: Instant::now(),
                wall,
                reached: true,
            },
        );
        assert_eq!(derived.groups[0].ruler.level, RulerLevel::ReadUncommitted);
        // One transaction on both partitions aborts: two markers, one transaction.
        let (p0, p1) = (
            partition("orders", 0, 0, 10, 10),
            partition("orders", 1, 0, 8, 8),
        );
        let marker = |t: &mut AbortedTransaction, ms: i64| t.aborted_at_ms = ms;
        let mut t0 = aborted(7, &[(4, 8, 5)], 9, true);
        let mut t1 = aborted(7, &[(2, 6, 5)], 7, true);
        marker(&mut t0, 1_790_000_001_000);
        marker(&mut t1, 1_790_000_001_004);
        let mut derived = Derived {
            partitions: vec![p0.clone(), p1.clone()],
            groups: vec![group(&java, &[(&p0, 10, Some(0)), (&p1, 8, Some(0))])],
            group_listing: GroupListing::Complete,
            ..Default::default()
        };
        apply(
            &mut derived,
            &mut watch,
            Cycle {
                aborted: vec![(p0.topic.clone(), 0, t0), (p1.topic.clone(), 1, t1)],
                committed_before: &|_, _, _| None,
                now: Instant::now(),
                wall,
                reached: true,
            },
        );
        assert_eq!(read(&derived.groups[0]), (10, 1));
        assert_eq!(
            derived.groups[0].ruler.aborted_transactions.len(),
            2,
            "one per partition"
        );
    }
}
