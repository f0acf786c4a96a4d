//! Every open transaction of the cluster (pure code): from what the coordinators listed
//! and described in one cycle ([`TransactionList`]) to counts by state, the oldest in
//! detail, the ones that pin no exported partition, and two-phase ones; and, across
//! cycles ([`TransactionWatch`], held by the scheduler like the stuck clock), fencings and
//! coordinator moves per transactional id.
//!
//! **Fencing.** A producer instance is fenced when another one initialises the same
//! transactional id (InitProducerId) while it has a transaction open: the old instance's
//! next request fails with PRODUCER_FENCED. What the coordinator's states show of each
//! event (Kafka's TransactionCoordinator.scala and TransactionMetadata, and as observed on
//! Kafka 4.4 and 3.9 with DescribeTransactions polled every few milliseconds), from an
//! `Ongoing` transaction at epoch e:
//!
//! | event | transaction version 1 | transaction version 2 (KIP-890) |
//! |---|---|---|
//! | the producer commits | `PrepareCommit`, `CompleteCommit` at e | the same at e+1 |
//! | the producer aborts | `PrepareAbort`, `CompleteAbort` at e | the same at e+1 |
//! | ... then restarts (InitProducerId) | `Empty` e+1 | `Empty` e+2 |
//! | the coordinator's timeout abort | `CompleteAbort` e+1 | `CompleteAbort` e+1 |
//! | ... then the application re-creates its producer | `Empty` e+2 | `Empty` e+2 |
//! | a new instance fences it | `PrepareAbort`, `CompleteAbort` e+1 for ~100 ms, then `Empty` e+2 | the same |
//!
//! Version 2 is what Java clients 4.x use on Kafka 4.x; librdkafka and Java clients on
//! Kafka 3.x use version 1. At the last epoch (32766) a version-2 commit or abort rotates
//! the producer id: the end states show a new producer id at epoch 0. A fence and the
//! timeout abort both bump the epoch through `PrepareEpochFence`, which the coordinator
//! keeps as a pending state only: DescribeTransactions and ListTransactions never report
//! it. (Kafka 4.0 without KAFKA-19367 bumped a version-2 fence's abort twice: e+2, then
//! `Empty` e+3.)
//!
//! So the states alone cannot tell a fence from a version-2 abort followed by a restart,
//! nor from a timeout abort followed by a re-initialisation: all go from `Ongoing` e to an
//! abort at e+1 to `Empty` e+2. The rule ([`verdict`]), for an id the watch last saw
//! `Ongoing`:
//!
//! - next seen `Empty` under another producer id or epoch, except exactly one epoch up
//!   (version 1: the producer ended its transaction itself, then restarted), with no end
//!   of the transaction seen in between: **counted**, as "the open transaction was ended by
//!   a new producer initialisation". A fence, or the application ended the transaction (or
//!   the coordinator timed it out) and the producer was initialised again between two
//!   observations (a rolling deploy of an idle exactly-once application): nothing tells
//!   them apart.
//! - the abort seen first (`PrepareAbort` or `CompleteAbort` at e or e+1, or at epoch 0 of
//!   a new producer id): the transaction ended by an abort the watch saw, and whatever
//!   initialises the id next is **not counted**, although a fence caught in its ~100 ms
//!   abort looks the same. A version-2 producer's own abort, and the coordinator's timeout
//!   abort, leave exactly that, and they are far more common than a fence caught in the
//!   act. Two exceptions, where only a fence fits: the abort (or `PrepareEpochFence`, were
//!   it ever reported) one epoch up, seen before the transaction could have timed out
//!   ([`TIMEOUT_SLACK`] before its start time plus its timeout), of a producer known to use
//!   version 1 (an earlier transaction of the same producer id and epoch was seen to end,
//!   or a later one to begin, without a bump): counted at once. An abort further up (the
//!   Kafka 4.0 version-2 fence) leaves the transaction watched: the `Empty` after it counts.
//! - a commit, or another transaction of the same instance (`Ongoing` under another epoch,
//!   or the same epoch and another start time): ended healthily, never counted. A new
//!   instance that already began a transaction of its own by the next observation looks
//!   like a healthy version-2 producer that committed twice, and is not counted.

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
    /// The coordinator's start time of the transaction (ms since the epoch; -1 when none).
    pub start_time_ms: i64,
    pub timeout_ms: i32,
}

impl From<&CoordinatorTransaction> for Seen {
    fn from(t: &CoordinatorTransaction) -> Seen {
        Seen {
            producer_id: t.producer_id,
            producer_epoch: t.producer_epoch,
            state: t.state.clone(),
            coordinator: t.coordinator,
            start_time_ms: t.start_time_ms,
            timeout_ms: t.timeout_ms,
        }
    }
}

/// An abort (or the coordinator's epoch fence) seen earlier than this before the open
/// transaction's start time plus its timeout cannot be the coordinator's timeout abort
/// (room for the coordinator's clock to differ from the exporter's).
pub const TIMEOUT_SLACK: Duration = Duration::from_secs(2);

/// What an observation says of the transaction a watch last saw `Ongoing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Still open, or on the way to an abort that may yet turn out a fence's: watched on.
    Open,
    /// Ended without a fencing: committed, aborted (by its producer, by the coordinator's
    /// timeout, or by a fence that looks the same: see the module docs), or followed by
    /// another transaction of the same instance. `version_1`: it ended without an epoch
    /// bump, which only transaction version 1 does.
    Ended { version_1: bool },
    /// Ended by a new producer initialisation: a fence, or a restart between two
    /// observations that nothing tells from one.
    Fenced,
}

/// How `now`, seen at `at_ms` (wall clock, ms since the epoch), relates to the transaction
/// `open` (seen `Ongoing`); `version_1`: its producer is known to use transaction version
/// 1 (see the module docs).
pub fn verdict(open: &Seen, now: &Seen, version_1: bool, at_ms: i64) -> Verdict {
    let same_id = now.producer_id == open.producer_id;
    let (was, is) = (
        i32::from(open.producer_epoch),
        i32::from(now.producer_epoch),
    );
    let bumped = |by: i32| same_id && is == was + by;
    // Only the coordinator's timeout abort and a new instance's InitProducerId fence an
    // open transaction's epoch; the first cannot have happened yet.
    let before_timeout = open.start_time_ms >= 0
        && open.timeout_ms >= 0
        && at_ms.saturating_add(TIMEOUT_SLACK.as_millis() as i64)
            < open
                .start_time_ms
                .saturating_add(i64::from(open.timeout_ms));
    match now.state.as_str() {
        "Ongoing" if bumped(0) => {
            let another = open.start_time_ms >= 0
                && now.start_time_ms >= 0
                && now.start_time_ms != open.start_time_ms;
            if another {
                Verdict::Ended { version_1: true }
            } else {
                Verdict::Open
            }
        }
        // Another transaction: version 2's next epoch, a rotated producer id, or a new
        // instance's first one (not told apart from two commits).
        "Ongoing" => Verdict::Ended { version_1: false },
        "PrepareCommit" | "CompleteCommit" => Verdict::Ended {
            version_1: bumped(0),
        },
        "PrepareAbort" | "CompleteAbort" | "PrepareEpochFence" => {
            let fence_state = now.state == "PrepareEpochFence";
            if bumped(0) {
                Verdict::Ended { version_1: true }
            } else if bumped(1) {
                if before_timeout && (version_1 || fence_state) {
                    Verdict::Fenced
                } else {
                    Verdict::Ended { version_1: false }
                }
            } else if !same_id && now.producer_epoch == 0 {
                // Version 2 at the last epoch: the abort rotated the producer id.
                Verdict::Ended { version_1: false }
            } else {
                Verdict::Open
            }
        }
        "Empty" if bumped(1) => Verdict::Ended { version_1: true },
        "Empty" if bumped(0) => Verdict::Open,
        "Empty" => Verdict::Fenced,
        // Dead (expired) or a state this exporter does not know.
        _ => Verdict::Ended { version_1: false },
    }
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
    /// The last `Ongoing` view, while nothing seen since ended that transaction (see
    /// [`verdict`]).
    open: Option<Seen>,
    /// A producer id and epoch seen to end a transaction without an epoch bump: that
    /// instance uses transaction version 1.
    version_1: Option<(i64, i16)>,
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
        let at_ms = wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let ongoing = (seen.state == "Ongoing").then(|| seen.clone());
        match self.ids.get_mut(&t.transactional_id) {
            Some(watched) => {
                if let Some(open) = watched.open.take() {
                    let version_1 =
                        watched.version_1 == Some((open.producer_id, open.producer_epoch));
                    watched.open = match verdict(&open, &seen, version_1, at_ms) {
                        // The same transaction again, or on the way to an abort.
                        Verdict::Open => ongoing.or(Some(open)),
                        Verdict::Ended { version_1 } => {
                            if version_1 {
                                watched.version_1 = Some((open.producer_id, open.producer_epoch));
                            }
                            ongoing
                        }
                        Verdict::Fenced => {
                            watched.fencings += 1;
                            self.recent.insert(
                                0,
                                Fencing {
                                    transactional_id: t.transactional_id.clone(),
                                    fenced_producer_id: open.producer_id,
                                    fenced_epoch: open.producer_epoch,
                                    producer_id: seen.producer_id,
                                    producer_epoch: seen.producer_epoch,
                                    at: wall,
                                },
                            );
                            self.recent.truncate(RECENT_FENCINGS);
                            ongoing
                        }
                    };
                } else {
                    watched.open = ongoing;
                }
                if watched.last.coordinator != seen.coordinator {
                    watched.moves += 1;
                }
                watched.last = seen;
                watched.seen_at = now;
            }
            None => {
                self.ids.insert(
                    t.transactional_id.clone(),
                    Watched {
                        open: ongoing,
                        last: seen,
                        version_1: None,
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

    /// A view of a transaction started at 100 s (wall clock) with a 60 s timeout.
    fn seen(producer_id: i64, producer_epoch: i16, state: &str) -> Seen {
        Seen {
            producer_id,
            producer_epoch,
            state: state.into(),
            coordinator: 1,
            start_time_ms: 100_000,
            timeout_ms: 60_000,
        }
    }

    /// The verdict at 101 s, long before the timeout, of a producer whose transaction
    /// version is not known.
    fn judge(before: &Seen, now: &Seen) -> Verdict {
        verdict(before, now, false, 101_000)
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
    fn verdicts_follow_kafkas_epochs() {
        use Verdict::*;
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
                assert_ne!(judge(&before, &now), Fenced, "{before:?} -> {now:?}");
                before = now;
            }
            before = seen(7, epoch, "Ongoing");
        }
        // Epoch exhausted: the end of the transaction rotates the producer id.
        for state in ["CompleteCommit", "PrepareAbort", "CompleteAbort", "Ongoing"] {
            assert_eq!(
                judge(&seen(7, 32766, "Ongoing"), &seen(8, 0, state)),
                Ended { version_1: false },
                "{state}"
            );
        }
        // Transaction version 1: commits and aborts keep the epoch.
        for state in [
            "PrepareCommit",
            "CompleteCommit",
            "PrepareAbort",
            "CompleteAbort",
        ] {
            assert_eq!(
                judge(&seen(7, 3, "Ongoing"), &seen(7, 3, state)),
                Ended { version_1: true },
                "{state}"
            );
        }
        // The next transaction at the same epoch (version 1), or the same one again.
        let mut later = seen(7, 3, "Ongoing");
        later.start_time_ms += 5_000;
        assert_eq!(
            judge(&seen(7, 3, "Ongoing"), &later),
            Ended { version_1: true }
        );
        assert_eq!(judge(&seen(7, 3, "Ongoing"), &seen(7, 3, "Ongoing")), Open);
        // An abort one epoch up: a version-2 producer's own, the coordinator's timeout
        // abort, or a fence caught in the act; told apart only for a producer known to use
        // version 1, before the timeout.
        for state in ["PrepareAbort", "CompleteAbort"] {
            let (open, now) = (seen(7, 3, "Ongoing"), seen(7, 4, state));
            assert_eq!(judge(&open, &now), Ended { version_1: false });
            assert_eq!(verdict(&open, &now, true, 101_000), Fenced);
            assert_eq!(verdict(&open, &now, true, 157_999), Fenced);
            assert_eq!(
                verdict(&open, &now, true, 158_000),
                Ended { version_1: false }
            );
            assert_eq!(
                verdict(&open, &now, true, 170_000),
                Ended { version_1: false }
            );
        }
        // The coordinator's fencing state (pending only: never reported by Kafka).
        let (open, fencing) = (seen(7, 3, "Ongoing"), seen(7, 4, "PrepareEpochFence"));
        assert_eq!(judge(&open, &fencing), Fenced);
        assert_eq!(
            verdict(&open, &fencing, false, 170_000),
            Ended { version_1: false }
        );
        // A start time or timeout not known: it may have timed out.
        let mut unknown = seen(7, 3, "Ongoing");
        unknown.start_time_ms = -1;
        assert_eq!(
            verdict(&unknown, &seen(7, 4, "CompleteAbort"), true, 101_000),
            Ended { version_1: false }
        );
        // A two-phase (KIP-939) transaction is never timed out.
        let mut two_phase = seen(7, 3, "Ongoing");
        two_phase.timeout_ms = TWO_PHASE_TIMEOUT_MS;
        assert_eq!(
            verdict(
                &two_phase,
                &seen(7, 4, "CompleteAbort"),
                true,
                i64::from(i32::MAX)
            ),
            Fenced
        );
        // An abort further up (Kafka 4.0's version-2 fence): watched on.
        assert_eq!(
            judge(&seen(7, 3, "Ongoing"), &seen(7, 5, "PrepareAbort")),
            Open
        );
        // A new initialisation straight after the open transaction: observed on Kafka 4.4
        // and 3.9 as epoch 0 `Ongoing`, then epoch 2 `Empty`.
        assert_eq!(judge(&seen(7, 0, "Ongoing"), &seen(7, 2, "Empty")), Fenced);
        assert_eq!(judge(&seen(7, 5, "Ongoing"), &seen(9, 0, "Empty")), Fenced);
        // One epoch up is a version-1 producer that ended its transaction itself (same
        // epoch), then restarted (one bump): a fence bumps twice.
        assert_eq!(
            judge(&seen(7, 0, "Ongoing"), &seen(7, 1, "Empty")),
            Ended { version_1: true }
        );
        // An id expired by its coordinator.
        assert_eq!(
            judge(&seen(7, 0, "Ongoing"), &seen(7, 0, "Dead")),
            Ended { version_1: false }
        );
    }

    #[test]
    fn the_watch_counts_fencings_and_moves_once_each() {
        let mut watch = TransactionWatch::default();
        let t0 = Instant::now();
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let start = 999_000;
        watch.observe(&described("etl", "Ongoing", 0, start, 60_000, 1), t0, wall);
        watch.observe(&described("etl", "Ongoing", 0, start, 60_000, 1), t0, wall);
        assert_eq!(watch.events("etl"), (0, 0));
        // A new instance between two cycles: Empty two epochs up.
        watch.observe(&described("etl", "Empty", 2, -1, 60_000, 1), t0, wall);
        assert_eq!(watch.events("etl"), (1, 0));
        assert_eq!(watch.recent()[0].fenced_epoch, 0);
        assert_eq!(watch.recent()[0].producer_epoch, 2);
        // Once only.
        watch.observe(&described("etl", "Empty", 2, -1, 60_000, 1), t0, wall);
        assert_eq!(watch.events("etl"), (1, 0));
        // A version-1 producer (two transactions at epoch 2) fenced, caught half way: the
        // abort the fence forces, one epoch up, long before the timeout; then the new
        // instance's Empty, not counted again.
        watch.observe(&described("etl", "Ongoing", 2, start, 60_000, 1), t0, wall);
        watch.observe(
            &described("etl", "CompleteCommit", 2, start, 60_000, 1),
            t0,
            wall,
        );
        watch.observe(
            &described("etl", "Ongoing", 2, start + 500, 60_000, 1),
            t0,
            wall,
        );
        watch.observe(
            &described("etl", "CompleteAbort", 3, start + 500, 60_000, 1),
            t0,
            wall,
        );
        assert_eq!(watch.events("etl"), (2, 0));
        assert_eq!(watch.recent()[0].fenced_epoch, 2);
        assert_eq!(watch.recent()[0].producer_epoch, 3);
        watch.observe(&described("etl", "Empty", 4, -1, 60_000, 1), t0, wall);
        assert_eq!(watch.events("etl"), (2, 0));
        // A healthy transaction-version-2 producer aborting, then going on: no fencing;
        // nor does a later Empty after a commit count.
        watch.observe(&described("etl", "Ongoing", 4, start, 60_000, 1), t0, wall);
        watch.observe(
            &described("etl", "CompleteAbort", 5, start, 60_000, 1),
            t0,
            wall,
        );
        watch.observe(&described("etl", "Ongoing", 5, start, 60_000, 1), t0, wall);
        watch.observe(
            &described("etl", "CompleteCommit", 6, start, 60_000, 1),
            t0,
            wall,
        );
        watch.observe(&described("etl", "Empty", 7, -1, 60_000, 1), t0, wall);
        assert_eq!(watch.events("etl"), (2, 0));
        watch.observe(&described("etl", "Ongoing", 7, start, 60_000, 2), t0, wall);
        watch.observe(&described("etl", "Ongoing", 7, start, 60_000, 2), t0, wall);
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
        // Transaction version 2: the commit (or abort) bumps to 4, InitProducerId to 5;
        // with no cycle in between, the very Empty two epochs up that a fence leaves (Kafka
        // 4.4: Ongoing 0, Empty 2). Counted: the open transaction was ended by a new
        // producer initialisation (a fence or a restart; nothing tells them apart), which
        // the HELP text, the docs and `/` say.
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

    /// Feeds `watch` one id's observations `(state, producer id, epoch, start time)` of a
    /// transaction with a 60 s timeout, one cycle a second from `t0_ms` (wall clock);
    /// returns its fencings.
    fn fencings_after(
        watch: &mut TransactionWatch,
        seen: &[(&str, i64, i16, i64)],
        t0_ms: u64,
    ) -> u64 {
        let t0 = Instant::now();
        for (i, (state, producer_id, epoch, start)) in seen.iter().enumerate() {
            let mut t = described("app", state, *epoch, *start, 60_000, 1);
            t.producer_id = *producer_id;
            let at = SystemTime::UNIX_EPOCH + Duration::from_millis(t0_ms + 1_000 * i as u64);
            watch.observe(&t, t0 + Duration::from_secs(i as u64), at);
        }
        watch.events("app").0
    }

    #[test]
    fn an_abort_the_watch_saw_then_a_restart_is_no_fencing() {
        // (a) Transaction version 2, as Kafka 4.4 with a Java 4.4 producer does it: the
        // abort bumps the epoch (PrepareAbort and CompleteAbort one up), the restart's
        // InitProducerId once more: Empty two epochs up, what a fence leaves too. The watch
        // saw the abort complete first: the application's own abort, not counted.
        for abort in [
            vec![("PrepareAbort", 7, 3, 100_000)],
            vec![("CompleteAbort", 7, 3, 100_000)],
            vec![
                ("PrepareAbort", 7, 3, 100_000),
                ("CompleteAbort", 7, 3, 100_000),
            ],
        ] {
            let mut seen = vec![("Ongoing", 7, 2, 100_000)];
            seen.extend(abort.iter().copied());
            seen.push(("Empty", 7, 4, -1));
            let mut watch = TransactionWatch::default();
            assert_eq!(fencings_after(&mut watch, &seen, 101_000), 0, "{seen:?}");
            // ... and the restarted instance goes on healthily.
            let more = [
                ("Ongoing", 7, 4, 110_000),
                ("CompleteCommit", 7, 5, 110_000),
                ("Ongoing", 7, 5, 111_000),
                ("CompleteAbort", 7, 6, 111_000),
                ("Empty", 7, 7, -1),
            ];
            assert_eq!(fencings_after(&mut watch, &more, 110_000), 0, "{seen:?}");
        }
        // Transaction version 1 (librdkafka; Java on Kafka 3.x): the abort keeps the epoch,
        // the restart bumps it once.
        let seen = [
            ("Ongoing", 7, 2, 100_000),
            ("CompleteAbort", 7, 2, 100_000),
            ("Empty", 7, 3, -1),
        ];
        assert_eq!(
            fencings_after(&mut TransactionWatch::default(), &seen, 101_000),
            0
        );
        // Transaction version 2 at the last epoch: the abort rotates the producer id (epoch
        // 0 of a new one), the restart bumps that.
        let seen = [
            ("Ongoing", 7, 32766, 100_000),
            ("CompleteAbort", 8, 0, 100_000),
            ("Empty", 8, 1, -1),
        ];
        assert_eq!(
            fencings_after(&mut TransactionWatch::default(), &seen, 101_000),
            0
        );
    }

    #[test]
    fn a_timeout_abort_then_reinitialisation_is_no_fencing() {
        // (b) The coordinator aborts a transaction older than its timeout (60 s here) and
        // bumps the epoch to do so (it fences the epoch, then aborts), under either
        // transaction version; the producer's next call fails and the application creates
        // a new producer, whose InitProducerId bumps once more. Seen on Kafka 4.4: Ongoing
        // 0, CompleteAbort 1, Empty 2.
        let seen = [
            ("Ongoing", 7, 0, 100_000),
            ("Ongoing", 7, 0, 100_000),
            ("CompleteAbort", 7, 1, 100_000),
            ("CompleteAbort", 7, 1, 100_000),
            ("Empty", 7, 2, -1),
        ];
        assert_eq!(
            fencings_after(&mut TransactionWatch::default(), &seen, 159_000),
            0
        );
        // The same for a producer known to use transaction version 1 (an earlier
        // transaction ended at the same epoch): an abort one epoch up after the timeout is
        // the coordinator's.
        let seen = [
            ("Ongoing", 7, 0, 90_000),
            ("CompleteCommit", 7, 0, 90_000),
            ("Ongoing", 7, 0, 100_000),
            ("PrepareAbort", 7, 1, 100_000),
            ("Empty", 7, 2, -1),
        ];
        assert_eq!(
            fencings_after(&mut TransactionWatch::default(), &seen, 157_000),
            0
        );
        // The coordinator's state while it fences the epoch (Kafka never reports it: it is
        // pending only, but were it seen): after the timeout, the coordinator's own.
        let seen = [
            ("Ongoing", 7, 0, 100_000),
            ("PrepareEpochFence", 7, 1, 100_000),
            ("Empty", 7, 2, -1),
        ];
        assert_eq!(
            fencings_after(&mut TransactionWatch::default(), &seen, 159_000),
            0
        );
    }

    #[test]
    fn true_fencings_stay_counted() {
        // A second instance initialises while the first has a transaction open: seen on
        // Kafka 4.4 as Ongoing 0, PrepareAbort 1, CompleteAbort 1 (about 100 ms, the new
        // instance's retry backoff), Empty 2; a cycle sees Ongoing, then Empty.
        for epochs in [(0, 2), (5, 7)] {
            let seen = [
                ("Ongoing", 7, epochs.0, 100_000),
                ("Empty", 7, epochs.1, -1),
            ];
            let mut watch = TransactionWatch::default();
            assert_eq!(fencings_after(&mut watch, &seen, 101_000), 1);
            assert_eq!(watch.recent()[0].fenced_epoch, epochs.0);
            assert_eq!(watch.recent()[0].producer_epoch, epochs.1);
        }
        // At the last epoch the new instance gets a new producer id.
        let seen = [("Ongoing", 7, 32766, 100_000), ("Empty", 9, 0, -1)];
        assert_eq!(
            fencings_after(&mut TransactionWatch::default(), &seen, 101_000),
            1
        );
        // A fence caught half way, for a producer known to use transaction version 1 (an
        // earlier transaction of the same epoch ended without a bump), long before its
        // timeout: its own abort keeps the epoch, only a fence bumps it. Counted once.
        for earlier in ["CompleteCommit", "CompleteAbort", "Ongoing"] {
            let seen = [
                ("Ongoing", 7, 4, 90_000),
                (earlier, 7, 4, 90_000),
                ("Ongoing", 7, 4, 100_000),
                ("CompleteAbort", 7, 5, 100_000),
                ("Empty", 7, 6, -1),
                ("Ongoing", 7, 6, 104_000),
            ];
            let seen = if earlier == "Ongoing" {
                vec![seen[0], seen[2], seen[3], seen[4], seen[5]]
            } else {
                seen.to_vec()
            };
            assert_eq!(
                fencings_after(&mut TransactionWatch::default(), &seen, 101_000),
                1,
                "{seen:?}"
            );
        }
        // A fence on a broker whose transaction-version-2 fence aborts one epoch further
        // up (Kafka 4.0 before KAFKA-19367): PrepareAbort two up, Empty three up.
        let seen = [
            ("Ongoing", 7, 3, 100_000),
            ("PrepareAbort", 7, 5, 100_000),
            ("Empty", 7, 6, -1),
        ];
        assert_eq!(
            fencings_after(&mut TransactionWatch::default(), &seen, 101_000),
            1
        );
        // The coordinator's fencing state, were it reported, before the timeout: only an
        // InitProducerId puts an open transaction there.
        let seen = [
            ("Ongoing", 7, 0, 100_000),
            ("PrepareEpochFence", 7, 1, 100_000),
            ("Empty", 7, 2, -1),
        ];
        assert_eq!(
            fencings_after(&mut TransactionWatch::default(), &seen, 101_000),
            1
        );
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
