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
//! - **read_committed, inferred**: the committed offset stands at a pinned LSO (HW > LSO),
//!   or past it where an earlier owner committed, with records above it to read, unmoved,
//!   while the group has live members, for
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
//! `max_over_time` over `kafka_consumergroup_isolation_level`.
//!
//! **Aborted records read.** While a partition is pinned or has aborted transactions, the
//! exporter keeps, per group, the offset ranges the group delivered there: each advance
//! of its highest committed offset, made while it had live members in this cycle and the
//! one before, and while it (or the member owning the partition) reads uncommitted. An
//! advance without members (an offset reset), past the HW (a commit by hand), or across
//! records below the log start (deleted before it read them) delivered nothing there; a
//! consumer that seeks back and reads again adds nothing. When a window reads an abort
//! marker ([`crate::kafka::records::CostTally`]), the transaction's record batches are
//! known: its records within the delivered ranges are what the group delivered, counted
//! per group and topic, each once, also those it passes later. The count is exact where
//! every batch of the transaction was read; where the reading began inside it, the
//! offsets from its first record (as DescribeProducers gave it while it was open) to where
//! the reading began count as records (at most); where neither tells where it began, what
//! was read counts (at least). A transaction that begins and aborts between two cycles in
//! a part of the log no window read is not seen at all.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::state::{
    AbortedRead, AbortedTransactionRead, Bound, Derived, Evidence, GroupState, Owner,
    PartitionState, Ruler, RulerLevel, SeenMember,
};
use crate::kafka::records::{AbortedTransaction, Span};
use crate::kafka::{GroupListing, Isolation};

/// How long a group must stand at a pinned LSO with records above it, with live members,
/// to be taken as reading committed: longer than the default `session.timeout.ms` of the
/// Java client and librdkafka (45 s), so that a consumer that died has left the group.
pub const HOLD_FOR: Duration = Duration::from_secs(60);
/// Aborted transactions a group lists at most (newest first).
pub const RECENT: usize = 20;
/// Aborted transactions remembered per partition at most.
const HISTORY: usize = 256;
/// Pieces of evidence a group keeps at most (the newest).
const EVIDENCE: usize = 16;
/// Offset ranges a group is remembered to have delivered per partition at most.
const RANGES: usize = 16;
/// Aborted transactions a group remembers having counted, to count one over several
/// partitions of a topic once.
const COUNTED_TRANSACTIONS: usize = 1024;
/// Abort markers of one producer and epoch this close in time end one transaction (the
/// coordinator writes them at once; the leaders' clocks differ a little).
const SAME_ABORT_MS: u64 = 1_000;
/// Cycles a group missing from the lists is remembered at most while some broker fails
/// to list its groups.
const MISSING_CYCLES: u64 = 40;

/// What the isolation of every group and the aborted transactions need from earlier
/// cycles.
#[derive(Debug, Default)]
pub struct IsolationWatch {
    groups: HashMap<String, Remembered>,
    /// Partitions with aborted transactions.
    aborts: HashMap<(Arc<str>, i32), History>,
    /// The open transactions of the last cycle that listed them, per partition.
    open: HashMap<(Arc<str>, i32), Vec<SeenOpen>>,
    /// Hashes of the groups that had live members in the last cycle that described them,
    /// and of every group the last cycle listed.
    live: HashSet<u64>,
    listed: HashSet<u64>,
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
    /// The cycle that listed it.
    cycle: u64,
    producer_id: i64,
    producer_epoch: i32,
    transactional_id: String,
    start_offset: i64,
}

/// A partition's aborted transactions, oldest first, and how far markers were learned.
#[derive(Debug, Default)]
struct History {
    learned: Vec<Learned>,
    /// The highest marker offset learned: a marker read again (a window read anew after
    /// its tally was dropped) is not learned twice.
    learned_to: i64,
}

/// An aborted transaction and the cycle that learned of it.
#[derive(Debug)]
struct Learned {
    transaction: AbortedTransaction,
    transactional_id: String,
    bound: Bound,
}

/// One piece of evidence and who was in the group when it was seen.
#[derive(Debug)]
struct Kept {
    evidence: Evidence,
    /// Hashes of the member ids in the group then: it is forgotten once none is left.
    witnesses: Vec<u64>,
}

/// A group on a partition that is pinned or has aborted transactions.
#[derive(Debug, Default)]
struct Track {
    /// Its committed offset in the last cycle that knew it.
    committed: i64,
    /// Since when it has stood at a pinned LSO with records above it and live members.
    held_since: Option<Instant>,
    /// Its highest committed offset seen.
    passed: i64,
    /// Its committed offset when it was first watched here: what it read below is not
    /// known.
    since: i64,
    /// Offset ranges `[from, to)` it delivered while reading uncommitted, sorted, apart.
    delivered: Vec<(i64, i64)>,
    /// Per aborted transaction (its marker offset), its records counted so far.
    counted: Vec<(i64, i64)>,
    /// Cycles since the partition was last pinned, had aborted transactions and the
    /// group's offsets on it: the track is kept a few, for a marker read late.
    idle: u8,
}

/// Cycles a track with delivered ranges is kept after its partition went quiet: a marker
/// the reads could not reach at once (their byte caps, a failed fetch) is still counted.
const IDLE_CYCLES: u8 = 8;

#[derive(Debug, Default)]
struct Remembered {
    evidence: Vec<Kept>,
    tracks: HashMap<(Arc<str>, i32), Track>,
    /// Per topic, what it read of aborted transactions.
    aborted: BTreeMap<Arc<str>, AbortedRead>,
    recent: VecDeque<AbortedTransactionRead>,
    /// The aborted transactions counted (topic, producer id, epoch, abort time in ms).
    counted: VecDeque<(Arc<str>, i64, i16, i64)>,
    /// The level of the last cycle that described the group's members.
    level: RulerLevel,
    coordinator: Option<String>,
    seen: u64,
}

impl Remembered {
    /// Nothing to remember: no evidence, no partition watched, nothing read of aborted
    /// transactions.
    fn is_empty(&self) -> bool {
        self.evidence.is_empty()
            && self.tracks.is_empty()
            && self.aborted.is_empty()
            && self.recent.is_empty()
    }
}

fn id_hash(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    text.hash(&mut hasher);
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
    /// The cycle reached the cluster: what it no longer lists is forgotten only then.
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
    learn_aborts(watch, aborted, &derived.partitions);
    let partitions: HashMap<(&str, i32), &PartitionState> = derived
        .partitions
        .iter()
        .map(|p| ((&*p.topic, p.partition), p))
        .collect();
    let mut live = HashSet::new();
    let mut listed = HashSet::new();
    for group in &mut derived.groups {
        if group.group_type == "share" {
            group.ruler.level = group
                .isolation
                .map_or(RulerLevel::Unknown, RulerLevel::from);
            continue;
        }
        let name = id_hash(&group.name);
        listed.insert(name);
        // A group the last cycle did not list is new (or the exporter is): taken as live
        // before, so that a new consumer's first cycle counts. One the last cycle listed
        // without members was reset or restarted since.
        let live_before = watch.live.contains(&name) || !watch.listed.contains(&name);
        let live_now = group.members.map_or(live_before, |m| m > 0);
        if live_now {
            live.insert(name);
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
        let observed = Observed {
            partitions: &partitions,
            aborts: &watch.aborts,
            committed_before,
            now,
            wall,
            live: (live_before, live_now),
        };
        observe(remembered, group, &observed);
        group.ruler = ruler_of(remembered, group);
        deliver_and_count(remembered, group, &observed);
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
        watch.live = live;
        watch.listed = listed;
        forget(watch, derived, cycle);
    } else {
        watch.live.extend(live);
        watch.listed.extend(listed);
    }
}

/// Takes this cycle's aborted transactions into each partition's history, with the
/// transactional id and first offset the last cycle's open transactions gave them.
fn learn_aborts(
    watch: &mut IsolationWatch,
    aborted: Vec<(Arc<str>, i32, AbortedTransaction)>,
    partitions: &[PartitionState],
) {
    for (topic, partition, mut transaction) in aborted {
        let key = (topic, partition);
        let history = watch.aborts.entry(key.clone()).or_default();
        // A log truncated or recreated below what was learned starts over, before the
        // markers read in it are taken for ones learned already.
        let hw = partitions
            .iter()
            .find(|p| p.topic == key.0 && p.partition == key.1)
            .and_then(|p| p.high_watermark);
        if hw.is_some_and(|hw| hw <= history.learned_to) {
            *history = History::default();
        }
        if !history.learned.is_empty() && transaction.marker_offset <= history.learned_to {
            continue;
        }
        history.learned_to = transaction.marker_offset;
        let first = transaction.first_offset();
        // The same producer and epoch listed open, and no marker of the producer between
        // its first offset then and what was read: this transaction.
        let seen_open = watch.open.get(&key).and_then(|open| {
            open.iter().find(|o| {
                o.producer_id == transaction.producer_id
                    && o.producer_epoch == i32::from(transaction.producer_epoch)
                    && o.start_offset <= first
                    && transaction.after_marker.is_none_or(|m| m < o.start_offset)
            })
        });
        let mut transactional_id = String::new();
        let mut bound = if transaction.exact {
            Bound::Exact
        } else {
            Bound::AtLeast
        };
        if let Some(seen) = seen_open {
            transactional_id.clone_from(&seen.transactional_id);
            if seen.start_offset == first {
                // Read from its very first record.
                transaction.exact = true;
                bound = Bound::Exact;
            } else {
                // Its records before the reading began: at most every offset there.
                transaction.exact = false;
                bound = Bound::AtMost;
                transaction.spans.insert(
                    0,
                    Span {
                        base_offset: seen.start_offset,
                        last_offset: first.saturating_sub(1),
                        records: first.saturating_sub(seen.start_offset),
                    },
                );
            }
        }
        history.learned.push(Learned {
            transaction,
            transactional_id,
            bound,
        });
    }
}

/// After the groups counted: forgets what the log and the cluster no longer hold, and
/// remembers this cycle's open transactions. Only for a cycle that reached the cluster.
fn forget(watch: &mut IsolationWatch, derived: &Derived, cycle: u64) {
    let present: HashMap<(&str, i32), &PartitionState> = derived
        .partitions
        .iter()
        .map(|p| ((&*p.topic, p.partition), p))
        .collect();
    watch.aborts.retain(|(topic, partition), history| {
        let Some(p) = present.get(&(&**topic, *partition)) else {
            return false;
        };
        // A log truncated or recreated below what was learned starts over.
        if p.high_watermark.is_some_and(|hw| hw <= history.learned_to) {
            return false;
        }
        if let Some(log_start) = p.log_start_offset {
            history
                .learned
                .retain(|l| l.transaction.last_offset() >= log_start);
        }
        let excess = history.learned.len().saturating_sub(HISTORY);
        history.learned.drain(..excess);
        !history.learned.is_empty()
    });
    for p in &derived.partitions {
        let key = (p.topic.clone(), p.partition);
        match &p.transactions {
            Some(open) if !open.is_empty() => {
                let listed = open
                    .iter()
                    .map(|t| SeenOpen {
                        cycle,
                        producer_id: t.producer_id,
                        producer_epoch: t.producer_epoch,
                        transactional_id: t.transactional_id.clone(),
                        start_offset: t.start_offset,
                    })
                    .collect();
                watch.open.insert(key, listed);
            }
            Some(_) => {
                watch.open.remove(&key);
            }
            // Not asked in this cycle: what the last one listed stays, a cycle more.
            None => {}
        }
    }
    // Under transaction version 1 a producer keeps its id and epoch across transactions:
    // an old listing could pass for a later transaction's start.
    watch.open.retain(|(topic, partition), listed| {
        present.contains_key(&(&**topic, *partition))
            && listed.iter().any(|o| cycle.saturating_sub(o.cycle) <= 2)
    });
    let topics: HashSet<&str> = derived.partitions.iter().map(|p| &*p.topic).collect();
    for remembered in watch.groups.values_mut() {
        // A deleted topic's counters go with it.
        remembered
            .aborted
            .retain(|topic, _| topics.contains(&**topic));
    }
    let listing = &derived.group_listing;
    let complete = *listing == GroupListing::Complete;
    watch.groups.retain(|_, r| {
        r.seen == cycle
            || (!complete
                && !listing.gone(r.coordinator.as_deref())
                && cycle - r.seen < MISSING_CYCLES)
    });
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

/// What one group's cycle reads besides the group.
struct Observed<'a> {
    partitions: &'a HashMap<(&'a str, i32), &'a PartitionState>,
    aborts: &'a HashMap<(Arc<str>, i32), History>,
    committed_before: &'a dyn Fn(&str, &str, i32) -> Option<i64>,
    now: Instant,
    wall: SystemTime,
    /// Live members in the cycle before, and now.
    live: (bool, bool),
}

/// Looks for evidence in this cycle's offsets, on the partitions that are pinned or have
/// aborted transactions (the group's [`Track`]s).
fn observe(remembered: &mut Remembered, group: &GroupState, o: &Observed) {
    let Some(offsets) = group.offsets.as_ref() else {
        return; // unknown in this cycle: the tracks stay
    };
    let (live_before, live) = o.live;
    let members = group.detail.as_ref().map(|d| &d.members[..]).unwrap_or(&[]);
    let witnesses: Vec<u64> = members.iter().map(|m| id_hash(&m.member_id)).collect();
    let mut present = HashSet::new();
    for g in offsets {
        let key = (g.topic.clone(), g.partition);
        let Some(p) = o.partitions.get(&(&*g.topic, g.partition)) else {
            continue;
        };
        let (Some(hw), Some(lso)) = (p.high_watermark, p.last_stable_offset) else {
            // Bounds unknown in this cycle: the track stays as it was.
            present.insert(key);
            continue;
        };
        if hw <= lso && !o.aborts.contains_key(&key) {
            // Quiet: kept a few cycles if it delivered something (below).
            if let Some(track) = remembered.tracks.get_mut(&key) {
                track.committed = g.committed_offset;
            }
            continue;
        }
        present.insert(key.clone());
        // Advanced since the cycle before, wherever it stood then (the partition need not
        // have been pinned: a consumer that read through a transaction opened between two
        // cycles).
        let before = (o.committed_before)(&group.name, &g.topic, g.partition)
            .or(remembered.tracks.get(&key).map(|t| t.committed));
        let track = remembered.tracks.entry(key).or_insert_with(|| Track {
            committed: before.unwrap_or(g.committed_offset),
            passed: before.unwrap_or(g.committed_offset),
            since: before.unwrap_or(g.committed_offset),
            ..Default::default()
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
            seen_at: o.wall,
            member: owner.map(SeenMember::of),
        };
        let advanced = before.is_some_and(|b| b < g.committed_offset);
        // With members in both cycles: an offset reset and a restart within one interval
        // is no consumer reading.
        let proof = live_before
            && live
            && attributable
            && advanced
            && g.committed_offset > lso
            && g.committed_offset <= hw;
        // At the LSO, or past it where an earlier owner (reading uncommitted) committed
        // before the partition moved to this member: a read_committed consumer is given
        // nothing there while the transaction is open.
        let at_lso = hw > lso && g.committed_offset >= lso && g.lag.is_some_and(|l| l.hw_lag > 0);
        track.held_since = if live && attributable && at_lso {
            Some(
                track
                    .held_since
                    .filter(|_| track.committed == g.committed_offset)
                    .unwrap_or(o.now),
            )
        } else {
            None
        };
        let held = track
            .held_since
            .is_some_and(|since| o.now.saturating_duration_since(since) >= HOLD_FOR);
        if proof {
            record(remembered, seen(Isolation::ReadUncommitted), &witnesses);
        } else if held {
            record(remembered, seen(Isolation::ReadCommitted), &witnesses);
        }
    }
    // Partitions no longer pinned and without aborted transactions, or whose offsets the
    // group no longer has: nothing to watch there, once what it delivered had its chance
    // to meet a marker read late.
    remembered.tracks.retain(|key, track| {
        if present.contains(key) {
            track.idle = 0;
            return true;
        }
        track.idle = track.idle.saturating_add(1);
        !track.delivered.is_empty() && track.idle <= IDLE_CYCLES
    });
}

/// Keeps one piece of evidence per isolation level and member (or group, where the
/// member is unknown), the latest, and the newest [`EVIDENCE`] in all. A proof of
/// read_uncommitted replaces the inference of read_committed for the same member; the
/// inference never replaces the proof.
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
    remembered.evidence.truncate(EVIDENCE);
}

/// Which level a set of isolations makes.
fn sides(isolations: impl Iterator<Item = Isolation>) -> RulerLevel {
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
}

/// The group's level from what is remembered: its current members' evidence decides
/// (both sides among them: mixed); where none of them has shown theirs, the group's
/// remembered evidence does. A cycle that could not describe the members keeps the last
/// level.
fn ruler_of(remembered: &mut Remembered, group: &GroupState) -> Ruler {
    let unattributed = sides(
        remembered
            .evidence
            .iter()
            .filter(|k| k.evidence.member.is_none())
            .map(|k| k.evidence.isolation),
    );
    let Some(detail) = group.detail.as_ref() else {
        return Ruler {
            level: remembered.level,
            unattributed,
            evidence: remembered
                .evidence
                .iter()
                .map(|k| k.evidence.clone())
                .collect(),
            ..Default::default()
        };
    };
    let members: Vec<Option<Isolation>> = detail
        .members
        .iter()
        .map(|m| member_isolation(remembered, &m.member_id))
        .collect();
    let level = match sides(members.iter().flatten().copied()) {
        RulerLevel::Unknown => sides(remembered.evidence.iter().map(|k| k.evidence.isolation)),
        level => level,
    };
    remembered.level = level;
    Ruler {
        level,
        unattributed,
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

/// Adds `[from, to)` to sorted, disjoint ranges, merging what touches; beyond [`RANGES`]
/// the two closest merge (a bound: the gap between them counts as delivered).
fn add_range(ranges: &mut Vec<(i64, i64)>, from: i64, to: i64) {
    if from >= to {
        return;
    }
    ranges.push((from, to));
    ranges.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(ranges.len());
    for &(a, b) in ranges.iter() {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    while merged.len() > RANGES {
        let i = (1..merged.len())
            .min_by_key(|&i| merged[i].0 - merged[i - 1].1)
            .expect("more than one range");
        merged[i - 1].1 = merged[i].1;
        merged.remove(i);
    }
    *ranges = merged;
}

/// Where a group's counts of aborted records go.
struct Tally<'a> {
    read: &'a mut BTreeMap<Arc<str>, AbortedRead>,
    counted: &'a mut VecDeque<(Arc<str>, i64, i16, i64)>,
    recent: &'a mut VecDeque<AbortedTransactionRead>,
}

impl Tally<'_> {
    /// Adds what the group read of one aborted transaction on one partition: `before`
    /// records were counted already, `records` are now.
    fn add(
        self,
        g: &super::state::GroupPartitionState,
        learned: &Learned,
        (before, records): (i64, i64),
        bound: Bound,
        member: Option<&crate::kafka::RawMember>,
    ) {
        let transaction = &learned.transaction;
        let read = self.read.entry(g.topic.clone()).or_default();
        read.records = read.records.saturating_add((records - before) as u64);
        if before == 0 {
            // A transaction over several partitions of the topic counts once: its markers
            // carry the same producer and epoch, written at one moment.
            let at = transaction.aborted_at_ms;
            let same = self.counted.iter().any(|(topic, producer, epoch, ms)| {
                **topic == *g.topic
                    && *producer == transaction.producer_id
                    && *epoch == transaction.producer_epoch
                    && ms.abs_diff(at) <= SAME_ABORT_MS
            });
            if !same {
                read.transactions += 1;
                self.counted.push_back((
                    g.topic.clone(),
                    transaction.producer_id,
                    transaction.producer_epoch,
                    at,
                ));
                if self.counted.len() > COUNTED_TRANSACTIONS {
                    self.counted.pop_front();
                }
            }
        }
        let same = |r: &AbortedTransactionRead| {
            *r.topic == *g.topic
                && r.partition == g.partition
                && r.producer_id == transaction.producer_id
                && r.last_offset == transaction.last_offset()
        };
        match self.recent.iter().position(same) {
            Some(i) => {
                let mut entry = self.recent.remove(i).expect("found above");
                entry.records = records;
                entry.bound = bound;
                self.recent.push_front(entry);
            }
            None => self.recent.push_front(AbortedTransactionRead {
                topic: g.topic.clone(),
                partition: g.partition,
                transactional_id: learned.transactional_id.clone(),
                producer_id: transaction.producer_id,
                producer_epoch: transaction.producer_epoch,
                first_offset: transaction.first_offset(),
                last_offset: transaction.last_offset(),
                records,
                bound,
                aborted_at: SystemTime::UNIX_EPOCH
                    + Duration::from_millis(transaction.aborted_at_ms.clamp(0, MAX_UNIX_MS) as u64),
                member: member.map(SeenMember::of),
            }),
        }
        self.recent.truncate(RECENT);
    }
}

/// The latest time shown (the end of year 9999): a broker's clock or a corrupt batch can
/// say anything.
const MAX_UNIX_MS: i64 = 253_402_300_799_000;

/// Records what the group delivered on each watched partition in this cycle, and counts
/// the records of aborted transactions within what it delivered; keeps the topics it has
/// offsets on at 0 while it reads uncommitted.
fn deliver_and_count(remembered: &mut Remembered, group: &GroupState, o: &Observed) {
    let Some(offsets) = group.offsets.as_ref() else {
        return;
    };
    let (live_before, live) = o.live;
    let level = group.ruler.level;
    let members = group.detail.as_ref().map(|d| &d.members[..]).unwrap_or(&[]);
    if level.reads_uncommitted() {
        for g in offsets {
            remembered.aborted.entry(g.topic.clone()).or_default();
        }
    }
    let with_offsets: HashSet<&str> = offsets.iter().map(|g| &*g.topic).collect();
    remembered
        .aborted
        .retain(|topic, read| read.records > 0 || with_offsets.contains(&**topic));
    for g in offsets {
        let key = (g.topic.clone(), g.partition);
        let Some(track) = remembered.tracks.get_mut(&key) else {
            continue;
        };
        let Some(p) = o.partitions.get(&(&*g.topic, g.partition)) else {
            continue;
        };
        let (Some(hw), true) = (p.high_watermark, group.members.is_some()) else {
            // The bounds or the members unknown: the advance is judged once they are.
            continue;
        };
        let committed = g.committed_offset;
        track.committed = committed;
        if committed > track.passed {
            let reads_uncommitted = group.ruler.reads_uncommitted_at(g);
            if committed <= hw && live && live_before && reads_uncommitted {
                let log_start = p.log_start_offset.unwrap_or(0);
                add_range(&mut track.delivered, track.passed.max(log_start), committed);
            }
            // Past the HW (by hand), without members (a reset), or read committed: the
            // offsets passed were not delivered uncommitted.
            track.passed = committed;
        }
        let Some(history) = o.aborts.get(&key) else {
            continue;
        };
        let member = match g.owner {
            Owner::Member(i) => members.get(i),
            _ => None,
        };
        for learned in &history.learned {
            let transaction = &learned.transaction;
            let (mut records, mut exact) = (0i64, true);
            for &(from, to) in &track.delivered {
                let (n, n_exact) = transaction.records_in(from, to);
                records = records.saturating_add(n);
                exact &= n_exact || n == 0;
            }
            let marker = transaction.marker_offset;
            let slot = track.counted.iter().position(|(m, _)| *m == marker);
            let before = slot.map_or(0, |i| track.counted[i].1);
            if records <= before {
                continue;
            }
            match slot {
                Some(i) => track.counted[i].1 = records,
                None => track.counted.push((marker, records)),
            }
            // Offsets within merged spans count as records: at most. A group first seen
            // past the transaction's first record may have read some before: at least.
            let bound = match learned.bound {
                Bound::Exact if !exact => Bound::AtMost,
                _ if track.since > transaction.first_offset() => Bound::AtLeast,
                bound => bound,
            };
            let tally = Tally {
                read: &mut remembered.aborted,
                counted: &mut remembered.counted,
                recent: &mut remembered.recent,
            };
            tally.add(g, learned, (before, records), bound, member);
        }
        let kept: HashSet<i64> = history
            .learned
            .iter()
            .map(|l| l.transaction.marker_offset)
            .collect();
        track.counted.retain(|(m, _)| kept.contains(m));
    }
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
            after_marker: None,
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
        // plain ones: 100..=109 (10), 120..=124 (5), 140..=146 (7). The group stood at 95
        // when the exporter first saw it there, and reads past.
        let pinned = |hw| partition("orders", 0, 0, hw, 100);
        let p = pinned(130);
        run.cycle(
            0,
            vec![p.clone()],
            group(&java, &[(&p, 95, Some(0))]),
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
                listed.bound
            ),
            (100, 146, 15, Bound::Exact)
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
        // Committed by hand far past the HW: nothing more, not even once the HW is there.
        let g = run.cycle(
            90,
            vec![p.clone()],
            group(&java, &[(&p, 10_000, Some(0))]),
            vec![],
        );
        assert_eq!(read(&g), (22, 1));
        // The same marker read again (a window read anew): not learned twice.
        let again = aborted(
            7,
            &[(100, 109, 10), (120, 124, 5), (140, 146, 7)],
            150,
            true,
        );
        let g = run.cycle(
            105,
            vec![p.clone()],
            group(&java, &[(&p, 10_000, Some(0))]),
            vec![(p.topic.clone(), 0, again)],
        );
        assert_eq!(read(&g), (22, 1));
    }

    #[test]
    fn a_group_first_seen_inside_a_transaction_counts_at_least() {
        let mut run = Run::new();
        let java = [member("m-1", "java")];
        let pinned = |hw| partition("orders", 0, 0, hw, 100);
        run.cycle(
            0,
            vec![pinned(130)],
            group(&java, &[(&pinned(130), 105, Some(0))]),
            vec![],
        );
        run.cycle(
            15,
            vec![pinned(150)],
            group(&java, &[(&pinned(150), 130, Some(0))]),
            vec![],
        );
        let p = partition("orders", 0, 0, 160, 160);
        let t = aborted(7, &[(100, 109, 10), (120, 124, 5)], 150, true);
        let g = run.cycle(
            30,
            vec![p.clone()],
            group(&java, &[(&p, 130, Some(0))]),
            vec![(p.topic.clone(), 0, t)],
        );
        // 105..=109 and 120..=124 seen passed; what it read before 105 is not known.
        assert_eq!(read(&g), (10, 1));
        assert_eq!(g.ruler.aborted_transactions[0].bound, Bound::AtLeast);
    }

    #[test]
    fn a_read_committed_group_an_offset_reset_and_deleted_records_count_nothing() {
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

        // A read_uncommitted group stops at 95, retention deletes up to 120, and its
        // consumer resets to the log start and reads on to 160: of the transaction's
        // records 100..=139 it delivered only those from 120.
        let mut run = Run::new();
        let java = [member("m-1", "java")];
        let p = partition("orders", 0, 0, 150, 100);
        run.cycle(
            0,
            vec![p.clone()],
            group(&java, &[(&p, 90, Some(0))]),
            vec![],
        );
        let g = run.cycle(
            15,
            vec![p.clone()],
            group(&java, &[(&p, 95, Some(0))]),
            vec![],
        );
        assert_eq!(g.ruler.level, RulerLevel::Unknown, "not past the LSO yet");
        // Shown read_uncommitted on another partition meanwhile.
        let q = |hw| partition("orders", 1, 0, hw, 10);
        run.cycle(
            30,
            vec![partition("orders", 0, 120, 150, 100), q(50)],
            group(&java, &[(&p, 95, Some(0)), (&q(50), 20, Some(0))]),
            vec![],
        );
        run.cycle(
            45,
            vec![partition("orders", 0, 120, 150, 100), q(60)],
            group(&java, &[(&p, 95, Some(0)), (&q(60), 40, Some(0))]),
            vec![],
        );
        let p = partition("orders", 0, 120, 170, 170);
        let t = aborted(7, &[(100, 139, 40)], 150, true);
        let g = run.cycle(
            60,
            vec![p.clone(), q(60)],
            group(&java, &[(&p, 160, Some(0)), (&q(60), 40, Some(0))]),
            vec![(p.topic.clone(), 0, t)],
        );
        assert_eq!(g.ruler.level, RulerLevel::ReadUncommitted);
        assert_eq!(read(&g), (20, 1));

        // An empty group whose offset is reset past a transaction, then read on by its
        // members: the reset delivered nothing.
        let mut run = Run::new();
        let java = [member("m-1", "java")];
        let p = partition("orders", 0, 0, 150, 100);
        run.cycle(
            0,
            vec![p.clone()],
            group(&java, &[(&p, 95, Some(0))]),
            vec![],
        );
        run.cycle(
            15,
            vec![p.clone()],
            group(&java, &[(&p, 120, Some(0))]),
            vec![],
        );
        run.cycle(30, vec![p.clone()], group(&[], &[(&p, 120, None)]), vec![]);
        run.cycle(45, vec![p.clone()], group(&[], &[(&p, 145, None)]), vec![]);
        let p = partition("orders", 0, 0, 160, 160);
        let t = aborted(7, &[(100, 109, 10), (130, 139, 10)], 150, true);
        let g = run.cycle(
            60,
            vec![p.clone()],
            group(&java, &[(&p, 160, Some(0))]),
            vec![(p.topic.clone(), 0, t)],
        );
        // 100..=109 delivered (95 -> 120 with members); 130..=139 jumped by the reset.
        assert_eq!(read(&g), (10, 1));
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
            group(&java, &[(&p, 95, Some(0))]),
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
            (listed.first_offset, listed.records, listed.bound),
            (100, 40, Bound::AtMost)
        );
        // Another transaction of the same producer id and epoch (transaction version 1),
        // after a commit marker of the producer: the first offset listed open earlier is
        // not this one's.
        let mut p = partition("orders", 0, 0, 200, 170);
        open(&mut p, 170);
        run.cycle(
            45,
            vec![p.clone()],
            group(&java, &[(&p, 200, Some(0))]),
            vec![],
        );
        let p = partition("orders", 0, 0, 260, 260);
        let mut t = aborted(7, &[(230, 239, 10)], 250, false);
        t.after_marker = Some(210);
        let g = run.cycle(
            60,
            vec![p.clone()],
            group(&java, &[(&p, 260, Some(0))]),
            vec![(p.topic.clone(), 0, t)],
        );
        let listed = &g.ruler.aborted_transactions[0];
        assert_eq!(listed.transactional_id, "");
        assert_eq!(
            (listed.first_offset, listed.records, listed.bound),
            (230, 10, Bound::AtLeast)
        );
    }

    #[test]
    fn read_through_between_two_cycles_is_proof_and_one_transaction_counts_once_per_topic() {
        let mut watch = IsolationWatch::default();
        let java = [member("m-1", "java")];
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000);
        let step = |watch: &mut IsolationWatch,
                    partitions: Vec<PartitionState>,
                    committed: [i64; 2],
                    before: [i64; 2],
                    aborted: Vec<(Arc<str>, i32, AbortedTransaction)>| {
            let mut derived = Derived {
                groups: vec![group(
                    &java,
                    &[
                        (&partitions[0], committed[0], Some(0)),
                        (&partitions[1], committed[1], Some(0)),
                    ],
                )],
                partitions,
                group_listing: GroupListing::Complete,
                ..Default::default()
            };
            let before = move |_: &str, _: &str, partition: i32| Some(before[partition as usize]);
            apply(
                &mut derived,
                watch,
                Cycle {
                    aborted,
                    committed_before: &before,
                    now: Instant::now(),
                    wall,
                    reached: true,
                },
            );
            derived.groups.pop().unwrap()
        };
        // The cycle before saw it at 4 and 2 with nothing pinned (the commit watch
        // remembers that); now the LSOs stand there and it committed 9 and 7.
        let quiet = vec![
            partition("orders", 0, 0, 4, 4),
            partition("orders", 1, 0, 2, 2),
        ];
        step(&mut watch, quiet, [4, 2], [4, 2], vec![]);
        let pinned = vec![
            partition("orders", 0, 0, 9, 4),
            partition("orders", 1, 0, 7, 2),
        ];
        let g = step(&mut watch, pinned, [9, 7], [4, 2], vec![]);
        assert_eq!(g.ruler.level, RulerLevel::ReadUncommitted);
        // One transaction on both partitions aborts: two markers, one transaction.
        let mut t0 = aborted(7, &[(4, 8, 5)], 9, true);
        let mut t1 = aborted(7, &[(2, 6, 5)], 7, true);
        t0.aborted_at_ms = 1_790_000_001_000;
        t1.aborted_at_ms = 1_790_000_001_004;
        let done = vec![
            partition("orders", 0, 0, 10, 10),
            partition("orders", 1, 0, 8, 8),
        ];
        let topic: Arc<str> = Arc::from("orders");
        let g = step(
            &mut watch,
            done,
            [10, 8],
            [9, 7],
            vec![(topic.clone(), 0, t0), (topic, 1, t1)],
        );
        assert_eq!(read(&g), (10, 1));
        assert_eq!(g.ruler.aborted_transactions.len(), 2, "one per partition");
    }

    #[test]
    fn a_cycle_that_misses_the_cluster_or_the_members_keeps_what_was_learned() {
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
        assert_eq!(g.unwrap().ruler.level, RulerLevel::Mixed);
        // The members could not be described: the level stays, not every evidence at
        // once.
        let p0 = partition("orders", 0, 0, 2_000, 500);
        let p1 = partition("orders", 1, 0, 2_000, 700);
        let mut undescribed = group(&both, &[(&p0, 990, None), (&p1, 700, None)]);
        undescribed.detail = None;
        undescribed.members = None;
        let g = run.cycle(90, vec![p0.clone(), p1.clone()], undescribed, vec![]);
        assert_eq!(g.ruler.level, RulerLevel::Mixed);
        // A cycle that did not reach the cluster forgets nothing.
        let mut derived = Derived::default();
        apply(
            &mut derived,
            &mut run.watch,
            Cycle {
                aborted: Vec::new(),
                committed_before: &|_, _, _| None,
                now: run.t0 + Duration::from_secs(105),
                wall: SystemTime::UNIX_EPOCH,
                reached: false,
            },
        );
        assert_eq!(run.watch.len(), 1);
    }

    #[test]
    fn a_new_member_is_judged_by_its_own_evidence_not_by_members_that_left() {
        let mut run = Run::new();
        let old = [member("old", "java"), member("stays", "java")];
        let p = partition("orders", 0, 0, 900, 800);
        run.cycle(
            0,
            vec![p.clone()],
            group(&old, &[(&p, 810, Some(0))]),
            vec![],
        );
        let g = run.cycle(
            15,
            vec![p.clone()],
            group(&old, &[(&p, 850, Some(0))]),
            vec![],
        );
        assert_eq!(g.ruler.level, RulerLevel::ReadUncommitted);
        // "old" is replaced by "new", which owns the partition now, at the LSO.
        let now = [member("new", "java"), member("stays", "java")];
        let p = partition("orders", 0, 0, 900, 850);
        let g = run.cycle(
            30,
            vec![p.clone()],
            group(&now, &[(&p, 850, Some(0))]),
            vec![],
        );
        assert_eq!(
            g.ruler.level,
            RulerLevel::ReadUncommitted,
            "the group remembers"
        );
        let offset = &g.offsets.as_ref().unwrap()[0];
        assert!(
            !g.reads_uncommitted_at(offset),
            "the new member has shown nothing"
        );
        assert!(g.waits_at_lso(offset, &p));
    }

    #[test]
    fn a_read_committed_member_past_the_lso_an_earlier_owner_committed_waits_there() {
        // The Java member read partition 1 past the LSO (81) to 120, then a rebalance gave
        // it to the librdkafka member, which is given nothing past the LSO: it stands at
        // 120 while records arrive above.
        let mut run = Run::new();
        let both = [member("m-java", "java"), member("m-rdkafka", "rdkafka")];
        let mut g = None;
        for at in [0u64, 15, 30, 45, 60, 75] {
            let p0 = partition("orders", 0, 0, 1_000 + 10 * at as i64, 500);
            let p1 = partition("orders", 1, 0, 200 + 10 * at as i64, 81);
            g = Some(run.cycle(
                at,
                vec![p0.clone(), p1.clone()],
                group(
                    &both,
                    &[(&p0, 900 + at as i64, Some(0)), (&p1, 120, Some(1))],
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
        let offsets = g.offsets.as_ref().unwrap();
        assert!(!g.reads_uncommitted_at(&offsets[1]));
        let p1 = partition("orders", 1, 0, 950, 81);
        assert!(
            g.waits_at_lso(&offsets[1], &p1),
            "it waits for the transaction"
        );
    }

    #[test]
    fn a_marker_read_late_still_meets_what_the_group_delivered() {
        let mut run = Run::new();
        let java = [member("m-1", "java")];
        let pinned = |hw| partition("orders", 0, 0, hw, 100);
        run.cycle(
            0,
            vec![pinned(130)],
            group(&java, &[(&pinned(130), 95, Some(0))]),
            vec![],
        );
        run.cycle(
            15,
            vec![pinned(150)],
            group(&java, &[(&pinned(150), 130, Some(0))]),
            vec![],
        );
        // The transaction aborted; the reads did not reach its marker in this cycle: the
        // partition is quiet, with nothing learned yet.
        let quiet = partition("orders", 0, 0, 160, 160);
        run.cycle(
            30,
            vec![quiet.clone()],
            group(&java, &[(&quiet, 160, Some(0))]),
            vec![],
        );
        let t = aborted(7, &[(100, 109, 10), (140, 146, 7)], 150, true);
        let g = run.cycle(
            45,
            vec![quiet.clone()],
            group(&java, &[(&quiet, 160, Some(0))]),
            vec![(quiet.topic.clone(), 0, t)],
        );
        assert_eq!(read(&g), (17, 1));
    }

    #[test]
    fn a_recreated_topic_learns_its_markers_afresh() {
        let mut run = Run::new();
        let java = [member("m-1", "java")];
        let pinned = |hw| partition("orders", 0, 0, hw, 100);
        run.cycle(
            0,
            vec![pinned(130)],
            group(&java, &[(&pinned(130), 95, Some(0))]),
            vec![],
        );
        run.cycle(
            15,
            vec![pinned(150)],
            group(&java, &[(&pinned(150), 130, Some(0))]),
            vec![],
        );
        let done = partition("orders", 0, 0, 160, 160);
        let t = aborted(7, &[(100, 109, 10)], 150, true);
        let g = run.cycle(
            30,
            vec![done.clone()],
            group(&java, &[(&done, 160, Some(0))]),
            vec![(done.topic.clone(), 0, t)],
        );
        assert_eq!(read(&g), (10, 1));
        // Deleted and created again: its log starts over below what was learned, and a
        // marker at 50 is new.
        let again = partition("orders", 0, 0, 60, 60);
        let t = aborted(9, &[(40, 44, 5)], 50, true);
        run.cycle(
            45,
            vec![again.clone()],
            group(&java, &[(&again, 60, Some(0))]),
            vec![(again.topic.clone(), 0, t)],
        );
        let history = &run.watch.aborts[&(Arc::from("orders"), 0)];
        assert_eq!(history.learned.len(), 1);
        assert_eq!(history.learned[0].transaction.marker_offset, 50);
    }
}
