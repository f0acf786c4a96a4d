//! Every open transaction of the cluster (pure code): from what the coordinators listed
//! and described in one cycle ([`TransactionList`]) to counts by state, the oldest in
//! detail, the ones that pin no exported partition, and two-phase ones; and, across
//! cycles ([`TransactionWatch`], held by the scheduler like the stuck clock), fencings and
//! coordinator moves per transactional id.
//!
//! **Fencing.** A producer instance is fenced when another one initialises the same
//! transactional id (InitProducerId): the coordinator bumps the epoch, aborts the open
//! transaction if there is one, and the old instance's next request fails with
//! PRODUCER_FENCED. Under transaction version 2 (KIP-890, Java clients 4.x on Kafka 4.x)
//! the coordinator also bumps the epoch at the end of *every* transaction, so "the epoch
//! went up" says nothing. What a healthy producer never shows is the state an
//! InitProducerId leaves behind: a transactional id the exporter saw `Ongoing` that is next
//! seen `Empty` (only the abort states, PrepareAbort or CompleteAbort, may be seen in
//! between) or `PrepareEpochFence`, with another producer id or epoch, counts one
//! ([`is_fencing`]). That is "the open transaction was ended by a new producer
//! initialisation": a new instance fenced it, or the application ended it and restarted
//! between two observations (a rolling deploy of an idle exactly-once application). The
//! coordinator's states do not tell the two apart: a fence passes through
//! PrepareEpochFence, PrepareAbort and CompleteAbort within a second, and a commit
//! followed by a restart under transaction version 2 leaves the same `Empty` two epochs up.
//! Only the one case that cannot be a fence is left out: the same producer id exactly one
//! epoch up (transaction version 1: the producer ended the transaction itself, which
//! keeps the epoch, and a restart bumped it once; a fence bumps it once to abort and once
//! more for the new instance). A new instance that already began a transaction of its own
//! by the next cycle is indistinguishable from a healthy producer that committed twice,
//! and is not counted.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime};

use super::state::PartitionState;
use crate::kafka::{CoordinatorTransaction, CoordinatorView, RawSample, TransactionList};

/// The transaction timeout the coordinator gives a two-phase (KIP-939) producer: it never
/// times its transactions out.
pub const TWO_PHASE_TIMEOUT_MS: i32 = i32::MAX;

/// Transactional ids not observed for this long are forgotten with their counters.
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// At most this many transactional ids are remembered; the least recently seen go first.
pub const MAX_WATCHED: usize = 1000;
/// Fencings shown on `/` and `/api/v1/stuck`, the latest first.
pub const RECENT_FENCINGS: usize = 10;

/// What a snapshot shows of the cluster's transactions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TransactionsView {
    /// `None` when the inventory is off (`transaction_list = false`) or was not taken in
    /// the cycle; when a broker did not answer, an inventory that is not `complete`.
    pub inventory: Option<TransactionInventory>,
    /// Transactional ids with a fencing or a coordinator move, sorted by id.
    pub counters: Vec<WatchCounters>,
    /// The latest fencings, newest first.
    pub recent_fencings: Vec<Fencing>,
}

/// What a cycle learned of the cluster's transactions, taken out of the raw sample.
#[derive(Debug, Default)]
pub struct Input {
    list: Option<TransactionList>,
    /// What forensics' DescribeTransactions said in the cycle.
    named: Vec<CoordinatorTransaction>,
}

impl Input {
    pub fn take(raw: &mut RawSample) -> Input {
        let mut named: Vec<CoordinatorTransaction> = Vec::new();
        for p in &raw.partitions {
            for t in p.open_transactions.iter().flatten() {
                if let CoordinatorView::Found(found) = &t.coordinator {
                    named.push(found.clone());
                }
            }
        }
        Input {
            list: raw.transaction_list.take(),
            named,
        }
    }
}

/// The cluster's open transactions in one cycle.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TransactionInventory {
    /// Every broker answered: the counts are the cluster's.
    pub complete: bool,
    /// Some broker lacks the duration filter; its transactions were filtered here.
    pub filtered_here: bool,
    /// Open transactions by coordinator state.
    pub by_state: BTreeMap<String, u64>,
    /// Of those, the described ones that pin no exported partition (a lower bound: one
    /// that could not be described, or writes to a partition whose holder is unknown in
    /// the cycle, is not counted).
    pub unpinning: u64,
    /// Two-phase (KIP-939) transactions; `None` where no broker speaks KIP-939.
    pub prepared: Option<u64>,
    /// The oldest, oldest first, at most `transaction_list_detail`.
    pub oldest: Vec<DetailedTransaction>,
}

/// One of the oldest open transactions.
#[derive(Debug, Clone, PartialEq)]
pub struct DetailedTransaction {
    pub transactional_id: String,
    pub producer_id: i64,
    /// -1 when it could not be described.
    pub producer_epoch: i16,
    pub state: String,
    pub coordinator: i32,
    /// Since the coordinator's start time; `None` when not described.
    pub age_seconds: Option<f64>,
    /// Timeout minus age, at least 0; `None` when not described or when the coordinator
    /// does not time it out (two-phase, or already being committed or aborted).
    pub timeout_left_seconds: Option<f64>,
    pub timeout_ms: Option<i32>,
    /// The partitions it wrote to, as its coordinator lists them.
    pub partitions: Vec<(String, i32)>,
    pub described: bool,
    /// It holds (or, where the holder is unknown, may hold) the LSO of an exported
    /// partition; `false` when not described.
    pub pins: bool,
    /// A two-phase (KIP-939) transaction: only its producer or an operator ends it.
    pub two_phase: bool,
    pub fencings: u64,
    pub coordinator_moves: u64,
}

/// A coordinator's view of a transactional id, kept between cycles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: String,
    pub coordinator: i32,
}

impl From<&CoordinatorTransaction> for Seen {
    fn from(t: &CoordinatorTransaction) -> Seen {
        Seen {
            producer_id: t.producer_id,
            producer_epoch: t.producer_epoch,
            state: t.state.clone(),
            coordinator: t.coordinator,
        }
    }
}

/// `true` when `now` shows that a new producer initialisation ended the transaction that
/// `before` showed open (see the module docs): a new instance fenced it, or the
/// application restarted. A healthy producer, whatever its transaction version, never goes
/// from `Ongoing` to `Empty` or `PrepareEpochFence`.
pub fn is_fencing(before: &Seen, now: &Seen) -> bool {
    let restart_after_own_end = now.state == "Empty"
        && now.producer_id == before.producer_id
        && i32::from(now.producer_epoch) == i32::from(before.producer_epoch) + 1;
    before.state == "Ongoing"
        && matches!(now.state.as_str(), "Empty" | "PrepareEpochFence")
        && (now.producer_id != before.producer_id || now.producer_epoch != before.producer_epoch)
        && !restart_after_own_end
}

/// A fencing the exporter saw: the id, the epoch it had, and the producer it has now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fencing {
    pub transactional_id: String,
    pub fenced_producer_id: i64,
    pub fenced_epoch: i16,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub at: SystemTime,
}

/// Per transactional id: its events so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchCounters {
    pub transactional_id: String,
    pub fencings: u64,
    pub coordinator_moves: u64,
}

#[derive(Debug, Clone)]
struct Watched {
    last: Seen,
    /// The last `Ongoing` view while only the way to an abort was seen since: a fence
    /// passes through PrepareEpochFence, PrepareAbort and CompleteAbort before the new
    /// instance's InitProducerId leaves the id `Empty`.
    open: Option<Seen>,
    fencings: u64,
    moves: u64,
    seen_at: Instant,
}

/// Fencings and coordinator moves per transactional id, across cycles; bounded by
/// [`MAX_WATCHED`] and [`FORGET_AFTER`].
#[derive(Debug, Default)]
pub struct TransactionWatch {
    ids: HashMap<String, Watched>,
    recent: Vec<Fencing>,
    /// Changes at every [`TransactionWatch::forget`]: ties among the ids to forget are
    /// broken differently each time.
    rotation: u64,
}

impl TransactionWatch {
    /// Compares what a coordinator says now of a transactional id with what was seen
    /// before, counting a fencing or a coordinator move.
    pub fn observe(&mut self, t: &CoordinatorTransaction, now: Instant, wall: SystemTime) {
        let seen = Seen::from(t);
        match self.ids.get_mut(&t.transactional_id) {
            Some(watched) => {
                let fenced = watched
                    .open
                    .as_ref()
                    .is_some_and(|open| is_fencing(open, &seen));
                if fenced {
                    watched.fencings += 1;
                    self.recent.insert(
                        0,
                        Fencing {
                            transactional_id: t.transactional_id.clone(),
                            fenced_producer_id: watched.open.as_ref().map_or(-1, |o| o.producer_id),
                            fenced_epoch: watched.open.as_ref().map_or(-1, |o| o.producer_epoch),
                            producer_id: seen.producer_id,
                            producer_epoch: seen.producer_epoch,
                            at: wall,
                        },
                    );
                    self.recent.truncate(RECENT_FENCINGS);
                }
                if watched.last.coordinator != seen.coordinator {
                    watched.moves += 1;
                }
                watched.open = match seen.state.as_str() {
                    "Ongoing" => Some(seen.clone()),
                    "PrepareAbort" | "CompleteAbort" if !fenced => watched.open.take(),
                    _ => None,
                };
                watched.last = seen;
                watched.seen_at = now;
            }
            None => {
                self.ids.insert(
                    t.transactional_id.clone(),
                    Watched {
                        open: (seen.state == "Ongoing").then(|| seen.clone()),
                        last: seen,
                        fencings: 0,
                        moves: 0,
                        seen_at: now,
                    },
                );
            }
        }
    }

    /// Forgets ids not observed for [`FORGET_AFTER`], then, beyond [`MAX_WATCHED`], ids
    /// without events before ids with events, the least recently observed first, ties
    /// broken differently in every call (not always the same ids).
    pub fn forget(&mut self, now: Instant) {
        self.ids
            .retain(|_, w| now.saturating_duration_since(w.seen_at) < FORGET_AFTER);
        self.rotation = self.rotation.wrapping_add(1);
        if self.ids.len() > MAX_WATCHED {
            let rotation = self.rotation;
            let tie = |id: &str| {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                (rotation, id).hash(&mut h);
                h.finish()
            };
            let mut by_age: Vec<(bool, Instant, u64, String)> = self
                .ids
                .iter()
                .map(|(id, w)| {
                    (
                        w.fencings > 0 || w.moves > 0,
                        w.seen_at,
                        tie(id),
                        id.clone(),
                    )
                })
                .collect();
            by_age.sort();
            let excess = self.ids.len() - MAX_WATCHED;
            for (_, _, _, id) in by_age.into_iter().take(excess) {
                self.ids.remove(&id);
            }
        }
        let ids = &self.ids;
        self.recent
            .retain(|f| ids.contains_key(&f.transactional_id));
    }

    /// Fencings and coordinator moves of one id (0, 0 when none or not watched).
    pub fn events(&self, transactional_id: &str) -> (u64, u64) {
        self.ids
            .get(transactional_id)
            .map_or((0, 0), |w| (w.fencings, w.moves))
    }

    /// Every remembered id with at least one event, sorted by id.
    pub fn counters(&self) -> Vec<WatchCounters> {
        let mut counters: Vec<WatchCounters> = self
            .ids
            .iter()
            .filter(|(_, w)| w.fencings > 0 || w.moves > 0)
            .map(|(id, w)| WatchCounters {
                transactional_id: id.clone(),
                fencings: w.fencings,
                coordinator_moves: w.moves,
            })
            .collect();
        counters.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        counters
    }

    /// The latest fencings, newest first.
    pub fn recent(&self) -> &[Fencing] {
        &self.recent
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

fn is_open(state: &str) -> bool {
    crate::kafka::OPEN_TRANSACTION_STATES.contains(&state)
}

/// Derives the cycle's inventory from `input` and the cycle's derived `partitions`,
/// feeding `watch` with the detailed ids, those forensics named and those followed up.
/// `None` when the inventory is off or no broker answered.
pub fn derive(
    input: Input,
    partitions: &[PartitionState],
    watch: &mut TransactionWatch,
    detail: usize,
    now: Instant,
    wall: SystemTime,
) -> Option<TransactionInventory> {
    let now_ms = wall
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let Input { list, named } = input;
    let mut observed: HashSet<String> = HashSet::new();
    let mut observe = |watch: &mut TransactionWatch, t: &CoordinatorTransaction| {
        if observed.insert(t.transactional_id.clone()) {
            watch.observe(t, now, wall);
        }
    };
    let Some(list) = list else {
        for t in &named {
            observe(watch, t);
        }
        watch.forget(now);
        return None;
    };

    // Producers that hold the LSO of an exported partition, as forensics saw them, and
    // partitions whose holder is unknown this cycle (withheld but not named, or HW or LSO
    // unknown: their leader did not answer).
    let mut pinning: HashSet<i64> = HashSet::new();
    let mut unknown: HashSet<(&str, i32)> = HashSet::new();
    for p in partitions {
        let (Some(hw), Some(lso)) = (p.high_watermark, p.last_stable_offset) else {
            unknown.insert((&p.topic, p.partition));
            continue;
        };
        if hw <= lso {
            continue;
        }
        match &p.transactions {
            Some(open) => pinning.extend(
                open.iter()
                    .filter(|t| Some(t.start_offset) == p.last_stable_offset)
                    .map(|t| t.producer_id),
            ),
            None => {
                unknown.insert((&p.topic, p.partition));
            }
        }
    }

    // One entry per transactional id: while a `__transaction_state` partition moves, two
    // coordinators may list the same id in one cycle. The list is sorted with the
    // described ones first, so the first kept is the best known.
    let mut ids: HashSet<&str> = HashSet::new();
    let open: Vec<_> = list
        .open
        .iter()
        .filter(|t| is_open(&t.transaction.state))
        .filter(|t| ids.insert(t.transaction.transactional_id.as_str()))
        .collect();
    let mut inventory = TransactionInventory {
        complete: list.complete,
        filtered_here: list.filtered_here,
        ..TransactionInventory::default()
    };
    let mut prepared = 0u64;
    for (rank, listed) in open.iter().enumerate() {
        let t = &listed.transaction;
        *inventory.by_state.entry(t.state.clone()).or_default() += 1;
        // Not described: its partitions are unknown, so it is not counted as unpinning
        // (the count is a lower bound).
        let pins = !listed.described
            || pinning.contains(&t.producer_id)
            || listed
                .partitions
                .iter()
                .any(|(topic, partition)| unknown.contains(&(topic.as_str(), *partition)));
        if !pins {
            inventory.unpinning += 1;
        }
        let two_phase =
            list.two_phase_commit && listed.described && t.timeout_ms == TWO_PHASE_TIMEOUT_MS;
        prepared += u64::from(two_phase);
        if rank < detail {
            if listed.described {
                observe(watch, t);
            }
            let age_seconds = (listed.described && t.start_time_ms >= 0)
                .then(|| (now_ms - t.start_time_ms).max(0) as f64 / 1000.0);
            // Only an `Ongoing` transaction is timed out: the coordinator completes one
            // that is being committed or aborted on its own.
            let timeout_left_seconds = age_seconds
                .filter(|_| !two_phase && t.timeout_ms >= 0 && t.state == "Ongoing")
                .map(|age| (f64::from(t.timeout_ms) / 1000.0 - age).max(0.0));
            inventory.oldest.push(DetailedTransaction {
                transactional_id: t.transactional_id.clone(),
                producer_id: t.producer_id,
                producer_epoch: t.producer_epoch,
                state: t.state.clone(),
                coordinator: t.coordinator,
                age_seconds,
                timeout_left_seconds,
                timeout_ms: listed.described.then_some(t.timeout_ms),
                partitions: listed.partitions.clone(),
                described: listed.described,
                pins: listed.described && pins,
                two_phase,
                fencings: 0,
                coordinator_moves: 0,
            });
        }
    }
    inventory.prepared = list.two_phase_commit.then_some(prepared);
    for t in list.followed.iter().chain(&named) {
        observe(watch, t);
    }
    watch.forget(now);
    for t in &mut inventory.oldest {
        (t.fencings, t.coordinator_moves) = watch.events(&t.transactional_id);
    }
    Some(inventory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::ListedTransaction;

    fn seen(producer_id: i64, producer_epoch: i16, state: &str) -> Seen {
        Seen {
            producer_id,
            producer_epoch,
            state: state.into(),
            coordinator: 1,
        }
    }

    fn described(
        id: &str,
        state: &str,
        producer_epoch: i16,
        start_time_ms: i64,
        timeout_ms: i32,
        coordinator: i32,
    ) -> CoordinatorTransaction {
        CoordinatorTransaction {
            transactional_id: id.into(),
            coordinator,
            state: state.into(),
            producer_id: 7,
            producer_epoch,
            start_time_ms,
            timeout_ms,
            includes_partition: false,
        }
    }

    #[test]
    fn fencing_is_a_new_instance_never_a_healthy_commit() {
        // Transaction version 2: every commit bumps the epoch; none is a fencing.
        let mut before = seen(7, 3, "Ongoing");
        for epoch in 4..20 {
            for state in [
                "CompleteCommit",
                "Ongoing",
                "PrepareCommit",
                "CompleteAbort",
            ] {
                let now = seen(7, epoch, state);
                assert!(!is_fencing(&before, &now), "{before:?} -> {now:?}");
                before = now;
            }
            before = seen(7, epoch, "Ongoing");
        }
        // Epoch exhausted: a new producer id with a completed transaction.
        assert!(!is_fencing(
            &seen(7, 32766, "Ongoing"),
            &seen(8, 0, "CompleteCommit")
        ));
        // Transaction version 1: commits keep the epoch.
        assert!(!is_fencing(
            &seen(7, 3, "Ongoing"),
            &seen(7, 3, "CompleteCommit")
        ));
        // The coordinator's timeout abort bumps the epoch, but leaves CompleteAbort.
        assert!(!is_fencing(
            &seen(7, 3, "Ongoing"),
            &seen(7, 4, "CompleteAbort")
        ));
        // A new instance: observed on Kafka 4.4 with Java clients (epoch 0 -> 2, Empty).
        assert!(is_fencing(&seen(7, 0, "Ongoing"), &seen(7, 2, "Empty")));
        // One epoch up is a transaction-version-1 producer that ended its transaction
        // itself (same epoch), then restarted (one bump): a fence bumps twice.
        assert!(!is_fencing(&seen(7, 0, "Ongoing"), &seen(7, 1, "Empty")));
        assert!(is_fencing(
            &seen(7, 0, "Ongoing"),
            &seen(7, 1, "PrepareEpochFence")
        ));
        assert!(is_fencing(&seen(7, 5, "Ongoing"), &seen(9, 0, "Empty")));
        // Only from a transaction seen open, and only once.
        assert!(!is_fencing(
            &seen(7, 1, "PrepareEpochFence"),
            &seen(7, 2, "Empty")
        ));
        assert!(!is_fencing(&seen(7, 2, "Empty"), &seen(7, 2, "Empty")));
        assert!(!is_fencing(
            &seen(7, 2, "CompleteCommit"),
            &seen(7, 3, "Empty")
        ));
    }

    #[test]
    fn the_watch_counts_fencings_and_moves_once_each() {
        let mut watch = TransactionWatch::default();
        let t0 = Instant::now();
        let wall = SystemTime::now();
        watch.observe(&described("etl", "Ongoing", 0, 1, 60_000, 1), t0, wall);
        watch.observe(&described("etl", "Ongoing", 0, 1, 60_000, 1), t0, wall);
        assert_eq!(watch.events("etl"), (0, 0));
        watch.observe(
            &described("etl", "PrepareEpochFence", 1, 1, 60_000, 1),
            t0,
            wall,
        );
        watch.observe(&described("etl", "Empty", 2, -1, 60_000, 1), t0, wall);
        assert_eq!(watch.events("etl"), (1, 0));
        assert_eq!(watch.recent()[0].fenced_epoch, 0);
        assert_eq!(watch.recent()[0].producer_epoch, 1);
        // A fence seen half way: the abort it forces, then the new instance's Empty.
        watch.observe(&described("etl", "Ongoing", 2, 3, 60_000, 1), t0, wall);
        watch.observe(
            &described("etl", "CompleteAbort", 3, 3, 60_000, 1),
            t0,
            wall,
        );
        watch.observe(&described("etl", "Empty", 4, -1, 60_000, 1), t0, wall);
        assert_eq!(watch.events("etl"), (2, 0));
        assert_eq!(watch.recent()[0].fenced_epoch, 2);
        // A healthy transaction-version-2 producer aborting, then going on: no fencing;
        // nor does a later Empty after a commit count.
        watch.observe(&described("etl", "Ongoing", 4, 5, 60_000, 1), t0, wall);
        watch.observe(
            &described("etl", "CompleteAbort", 5, 5, 60_000, 1),
            t0,
            wall,
        );
        watch.observe(&described("etl", "Ongoing", 5, 6, 60_000, 1), t0, wall);
        watch.observe(
            &described("etl", "CompleteCommit", 6, 6, 60_000, 1),
            t0,
            wall,
        );
        watch.observe(&described("etl", "Empty", 7, -1, 60_000, 1), t0, wall);
        assert_eq!(watch.events("etl"), (2, 0));
        watch.observe(&described("etl", "Ongoing", 7, 8, 60_000, 2), t0, wall);
        watch.observe(&described("etl", "Ongoing", 7, 8, 60_000, 2), t0, wall);
        assert_eq!(watch.events("etl"), (2, 1));
        assert_eq!(
            watch.counters(),
            vec![WatchCounters {
                transactional_id: "etl".into(),
                fencings: 2,
                coordinator_moves: 1
            }]
        );
    }

    #[test]
    fn commit_then_restart_between_two_cycles() {
        let t0 = Instant::now();
        let wall = SystemTime::now();
        // Transaction version 1: commit at epoch 3 (CompleteCommit 3), then the new
        // instance's InitProducerId (Empty 4), no cycle in between: not counted.
        let mut watch = TransactionWatch::default();
        watch.observe(&described("app", "Ongoing", 3, 1, 60_000, 1), t0, wall);
        watch.observe(&described("app", "Empty", 4, -1, 60_000, 1), t0, wall);
        assert_eq!(watch.events("app"), (0, 0));
        // Transaction version 2: the commit bumps to 4, InitProducerId to 5; the same
        // Empty two epochs up as a fence leaves. Counted: the open transaction was ended
        // by a new producer initialisation (a fence or a restart; nothing tells them
        // apart), which the HELP text, the docs and `/` say.
        let mut watch = TransactionWatch::default();
        watch.observe(&described("app", "Ongoing", 3, 1, 60_000, 1), t0, wall);
        watch.observe(&described("app", "Empty", 5, -1, 60_000, 1), t0, wall);
        assert_eq!(watch.events("app"), (1, 0));
        // A cycle saw the commit: never counted, whatever the version.
        for (commit_epoch, init_epoch) in [(3, 4), (4, 5)] {
            let mut watch = TransactionWatch::default();
            watch.observe(&described("app", "Ongoing", 3, 1, 60_000, 1), t0, wall);
            watch.observe(
                &described("app", "CompleteCommit", commit_epoch, 1, 60_000, 1),
                t0,
                wall,
            );
            watch.observe(
                &described("app", "Empty", init_epoch, -1, 60_000, 1),
                t0,
                wall,
            );
            assert_eq!(watch.events("app"), (0, 0));
        }
        // Healthy producers committing, seen in every cycle or only while open: never.
        for bump in [0i16, 1] {
            let mut watch = TransactionWatch::default();
            let mut epoch = 3i16;
            for start in 0..50 {
                watch.observe(
                    &described("app", "Ongoing", epoch, start, 60_000, 1),
                    t0,
                    wall,
                );
                if start % 2 == 0 {
                    watch.observe(
                        &described("app", "CompleteCommit", epoch + bump, start, 60_000, 1),
                        t0,
                        wall,
                    );
                }
                epoch += bump;
            }
            assert_eq!(watch.events("app"), (0, 0), "bump {bump}");
        }
    }

    #[test]
    fn the_watch_keeps_ids_with_events_and_evicts_fairly() {
        let t0 = Instant::now();
        let wall = SystemTime::now();
        let mut watch = TransactionWatch::default();
        // One id with a coordinator move, seen first (the least recently).
        watch.observe(&described("moved", "Ongoing", 0, 1, 60_000, 1), t0, wall);
        watch.observe(&described("moved", "Ongoing", 0, 1, 60_000, 2), t0, wall);
        // Then more than can be kept, all at the same instant.
        let at = t0 + Duration::from_millis(1);
        for i in 0..MAX_WATCHED + 10 {
            watch.observe(
                &described(&format!("id-{i}"), "Ongoing", 0, 1, 60_000, 1),
                at,
                wall,
            );
        }
        watch.forget(at);
        assert_eq!(watch.len(), MAX_WATCHED);
        assert_eq!(watch.events("moved"), (0, 1), "ids with events go last");
        // Ties are broken differently from one cycle to the next.
        let mut evicted: Vec<HashSet<String>> = Vec::new();
        for _ in 0..3 {
            let before: HashSet<String> = watch.ids.keys().cloned().collect();
            for i in 0..MAX_WATCHED + 10 {
                watch.observe(
                    &described(&format!("id-{i}"), "Ongoing", 0, 1, 60_000, 1),
                    at,
                    wall,
                );
            }
            let all: HashSet<String> = watch.ids.keys().cloned().collect();
            watch.forget(at);
            let kept: HashSet<String> = watch.ids.keys().cloned().collect();
            assert!(kept.contains("moved"));
            evicted.push(all.difference(&kept).cloned().collect());
            let _ = before;
        }
        assert!(
            evicted[0] != evicted[1] || evicted[1] != evicted[2],
            "the same ids evicted every cycle: {evicted:?}"
        );
    }

    #[test]
    fn the_watch_is_bounded() {
        let mut watch = TransactionWatch::default();
        let t0 = Instant::now();
        let wall = SystemTime::now();
        for i in 0..MAX_WATCHED + 50 {
            let at = t0 + Duration::from_millis(i as u64);
            watch.observe(
                &described(&format!("id-{i}"), "Ongoing", 0, 1, 60_000, 1),
                at,
                wall,
            );
        }
        watch.forget(t0 + Duration::from_secs(1));
        assert_eq!(watch.len(), MAX_WATCHED);
        assert_eq!(watch.events("id-0"), (0, 0));
        assert!(watch.ids.contains_key(&format!("id-{}", MAX_WATCHED + 49)));
        watch.forget(t0 + FORGET_AFTER + Duration::from_secs(2));
        assert!(watch.is_empty());
    }

    fn listed(
        t: CoordinatorTransaction,
        partitions: &[(&str, i32)],
        described: bool,
    ) -> ListedTransaction {
        ListedTransaction {
            transaction: t,
            partitions: partitions
                .iter()
                .map(|(t, p)| (t.to_string(), *p))
                .collect(),
            described,
        }
    }

    #[test]
    fn counts_by_state_details_the_oldest_and_finds_the_unpinning() {
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let mut pinned = described("pins", "Ongoing", 0, 900_000, 60_000, 1);
        pinned.producer_id = 41;
        let mut elsewhere = described("elsewhere", "Ongoing", 3, 940_000, 60_000, 2);
        elsewhere.producer_id = 42;
        let mut two_phase = described("xa", "Ongoing", 1, 950_000, TWO_PHASE_TIMEOUT_MS, 1);
        two_phase.producer_id = 43;
        let mut committing = described("committing", "PrepareCommit", 1, 960_000, 60_000, 1);
        committing.producer_id = 44;
        let mut ended = described("ended", "CompleteCommit", 2, 970_000, 60_000, 1);
        ended.producer_id = 45;
        let mut unknown = described("undescribed", "Ongoing", -1, -1, -1, 3);
        unknown.producer_id = 46;
        let mut leaderless = described("leaderless", "Ongoing", 0, 980_000, 60_000, 1);
        leaderless.producer_id = 47;
        // Listed by two coordinators in one cycle (its log partition is moving).
        let mut twice = described("twice", "Ongoing", 0, 985_000, 60_000, 1);
        twice.producer_id = 48;
        let mut twice_elsewhere = twice.clone();
        twice_elsewhere.coordinator = 2;
        let list = TransactionList {
            complete: true,
            filtered_here: false,
            two_phase_commit: true,
            open: vec![
                listed(pinned, &[("orders", 0), ("unexported", 0)], true),
                listed(elsewhere, &[("unexported", 1)], true),
                listed(two_phase, &[], true),
                listed(committing, &[("orders", 1)], true),
                listed(ended, &[], true),
                listed(leaderless, &[("orders", 2)], true),
                listed(twice, &[("unexported", 2)], true),
                listed(twice_elsewhere, &[("unexported", 2)], true),
                listed(unknown, &[], false),
            ],
            followed: Vec::new(),
        };
        let partition = |p: i32, lso: i64, holder: Option<i64>| PartitionState {
            topic: "orders".into(),
            partition: p,
            log_start_offset: Some(0),
            high_watermark: Some(900_000),
            last_stable_offset: Some(lso),
            visibility: None,
            withheld_age_seconds: None,
            transactions: holder.map(|producer_id| {
                vec![crate::derive::OpenTransaction {
                    producer_id,
                    producer_epoch: 0,
                    start_offset: lso,
                    transactional_id: String::new(),
                    state: None,
                    age_seconds: None,
                    age_clock: None,
                    timeout_ms: None,
                    coordinator: crate::derive::CoordinatorStatus::Unknown,
                    coordinator_broker: None,
                    hanging: false,
                }]
            }),
            replication: None,
        };
        // orders/0 held by "pins"; orders/1's holder is unknown this cycle; orders/2's
        // leader did not answer (HW and LSO unknown).
        let mut down = partition(2, 0, None);
        (down.high_watermark, down.last_stable_offset) = (None, None);
        let partitions = vec![
            partition(0, 880_000, Some(41)),
            partition(1, 890_000, None),
            down,
        ];
        let list_again = list.clone();
        let input = Input {
            list: Some(list),
            named: Vec::new(),
        };
        let mut watch = TransactionWatch::default();
        let inventory = derive(input, &partitions, &mut watch, 3, Instant::now(), wall).unwrap();
        assert_eq!(
            inventory.by_state,
            BTreeMap::from([("Ongoing".into(), 6), ("PrepareCommit".into(), 1)]),
            "one entry per transactional id"
        );
        // "elsewhere", "xa" and "twice" (once) pin nothing exported; "committing" may
        // hold orders/1, whose holder is unknown, and "leaderless" orders/2, whose HW
        // and LSO are unknown; the undescribed one's partitions are unknown.
        assert_eq!(inventory.unpinning, 3);
        assert_eq!(inventory.prepared, Some(1));
        let ids: Vec<&str> = inventory
            .oldest
            .iter()
            .map(|t| t.transactional_id.as_str())
            .collect();
        assert_eq!(ids, ["pins", "elsewhere", "xa"]);
        let oldest = &inventory.oldest[0];
        assert_eq!(oldest.age_seconds, Some(100.0));
        assert_eq!(
            oldest.timeout_left_seconds,
            Some(0.0),
            "overdue: nothing left"
        );
        assert!(oldest.pins);
        assert_eq!(inventory.oldest[1].age_seconds, Some(60.0));
        assert_eq!(inventory.oldest[1].timeout_left_seconds, Some(0.0));
        assert_eq!(
            inventory.oldest[2].timeout_left_seconds, None,
            "never timed out"
        );
        assert!(inventory.oldest[2].two_phase);
        assert_eq!(watch.len(), 3, "the detailed ones are watched");

        // All detailed: one entry for "twice"; no time left for PrepareCommit, which the
        // coordinator completes on its own; the undescribed one not shown unpinning.
        let input = Input {
            list: Some(list_again.clone()),
            named: Vec::new(),
        };
        let inventory = derive(input, &partitions, &mut watch, 100, Instant::now(), wall).unwrap();
        let ids: Vec<&str> = inventory
            .oldest
            .iter()
            .map(|t| t.transactional_id.as_str())
            .collect();
        assert_eq!(
            ids,
            [
                "pins",
                "elsewhere",
                "xa",
                "committing",
                "leaderless",
                "twice",
                "undescribed"
            ]
        );
        assert_eq!(inventory.oldest[3].state, "PrepareCommit");
        assert_eq!(inventory.oldest[3].age_seconds, Some(40.0));
        assert_eq!(inventory.oldest[3].timeout_left_seconds, None);
        assert!(inventory.oldest[4].pins, "HW and LSO unknown: may pin");
        assert_eq!(inventory.oldest[5].coordinator, 1);
        assert!(!inventory.oldest[6].described);

        // Brokers without KIP-939: a timeout of i32::MAX is not two-phase.
        let mut no_kip939 = list_again;
        no_kip939.two_phase_commit = false;
        let input = Input {
            list: Some(no_kip939),
            named: Vec::new(),
        };
        let inventory = derive(input, &partitions, &mut watch, 100, Instant::now(), wall).unwrap();
        assert_eq!(inventory.prepared, None);
        assert!(!inventory.oldest[2].two_phase);
        assert!(inventory.oldest[2]
            .timeout_left_seconds
            .is_some_and(|left| left > 2_000_000.0));

        // Without KIP-939 on any broker, no prepared count.
        let input = Input {
            list: Some(TransactionList::default()),
            named: Vec::new(),
        };
        let inventory = derive(input, &[], &mut watch, 3, Instant::now(), wall).unwrap();
        assert_eq!(inventory.prepared, None);
        assert!(inventory.by_state.is_empty());
    }
}
