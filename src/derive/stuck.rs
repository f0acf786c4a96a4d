//! How long each pinned LSO has stood still, and since when the exporter has seen each
//! open transaction ([`StuckClock`]): state that lives across cycles.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::kafka::RawTransaction;

/// Per partition, when the LSO was first seen standing at its current value behind the
/// HW. The clock starts at the first cycle that sees HW > LSO for an LSO value, resets
/// when the LSO moves, and stops (reads 0) when HW == LSO. It lives in the exporter's
/// memory: a restart restarts every clock, unless what the brokers still say of the
/// transaction at the LSO dates it (`open_for` in [`StuckClock::observe`]). It also
/// remembers when the exporter first saw each open transaction ([`StuckClock::watch`]),
/// the last resort for dating one, and whether it saw the transaction begin.
#[derive(Debug, Default)]
pub struct StuckClock {
    pinned: HashMap<(Arc<str>, i32), Pinned>,
    /// Partitions observed in an earlier cycle.
    known: HashSet<(Arc<str>, i32)>,
    /// Per partition, the open transactions of the last cycle that could list them
    /// (producer id, epoch, start offset) and when each was first seen.
    watched: HashMap<(Arc<str>, i32), Vec<FirstSight>>,
    /// Partitions whose open transactions some cycle listed (none open included): a
    /// transaction a later listing names first began after that one.
    listed: HashSet<(Arc<str>, i32)>,
}

/// An open transaction of a partition (producer id, epoch, start offset), when the
/// exporter first saw it, and whether it was open at the exporter's first listing of the
/// partition ([`Sighting::opened_unseen`]).
type FirstSight = ((i64, i32, i64), Instant, bool);

/// What the exporter has seen of one open transaction ([`StuckClock::watch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sighting {
    /// How long the exporter has seen it open; `None` at first sight.
    pub watched_for: Option<Duration>,
    /// It was already open at the exporter's first listing of the partition's open
    /// transactions (after a start, or a hand-over from another replica): nothing the
    /// exporter saw bounds its age. A transaction that a later listing names first began
    /// after the listing before, so the exporter's own clock bounds it.
    pub opened_unseen: bool,
}

#[derive(Debug, Clone, Copy)]
struct Pinned {
    last_stable_offset: i64,
    since: Instant,
    /// The clock saw the LSO arrive at its value (it was observed before at another
    /// value, or unpinned); otherwise it started at the exporter's first sight.
    saw_arrival: bool,
    /// The LSO had stood still at the last observation.
    stood_still: bool,
    /// The LSO had stood still at its previous value, right before it moved here: it went
    /// from one long-open transaction to the next.
    stood_still_before: bool,
}

impl StuckClock {
    /// Records one observation and returns the stuck duration at `now`.
    ///
    /// `open_for` is how long the transaction starting at the LSO has been open, by the
    /// best evidence the brokers still hold (its coordinator's start time, else the
    /// LogAppendTime of the record at the LSO, else, for a transaction no coordinator
    /// knows, its first write by the producer's clock: [`crate::derive::AgeClock`]). The
    /// LSO cannot have stood longer than that; when the clock did not see the LSO arrive
    /// (the exporter started, or took the cluster over, while it was pinned), it is the
    /// better answer, so a restart does not reset what the dashboards show.
    pub fn observe(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        high_watermark: i64,
        last_stable_offset: i64,
        now: Instant,
        open_for: Option<Duration>,
    ) -> Duration {
        let key = (topic.clone(), partition);
        let known = !self.known.insert(key.clone());
        if high_watermark <= last_stable_offset {
            self.pinned.remove(&key);
            return Duration::ZERO;
        }
        let entry = self.pinned.entry(key).or_insert(Pinned {
            last_stable_offset,
            since: now,
            saw_arrival: known,
            stood_still: false,
            stood_still_before: false,
        });
        if entry.last_stable_offset != last_stable_offset {
            *entry = Pinned {
                last_stable_offset,
                since: now,
                saw_arrival: true,
                stood_still: false,
                stood_still_before: entry.stood_still,
            };
        }
        let stuck = now.saturating_duration_since(entry.since);
        let stuck = match open_for {
            Some(open_for) if !entry.saw_arrival => stuck.max(open_for),
            _ => stuck,
        };
        entry.stood_still = stuck > Duration::ZERO;
        stuck
    }

    /// Records the open transactions of a partition as listed in this cycle, and returns
    /// for each what the exporter has seen of it ([`Sighting`]). A transaction no longer
    /// listed is forgotten.
    pub fn watch(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        open: &[RawTransaction],
        now: Instant,
    ) -> Vec<Sighting> {
        let key = (topic.clone(), partition);
        let earlier = self.watched.remove(&key).unwrap_or_default();
        let first_listing = self.listed.insert(key.clone());
        let mut current = Vec::with_capacity(open.len());
        let sightings = open
            .iter()
            .map(|t| {
                let id = (t.producer_id, t.producer_epoch, t.start_offset);
                let seen = earlier.iter().find(|(k, _, _)| *k == id);
                let (first_seen, opened_unseen) =
                    seen.map_or((now, first_listing), |&(_, at, unseen)| (at, unseen));
                current.push((id, first_seen, opened_unseen));
                Sighting {
                    watched_for: seen.map(|_| now.saturating_duration_since(first_seen)),
                    opened_unseen,
                }
            })
            .collect();
        if !current.is_empty() {
            self.watched.insert(key, current);
        }
        sightings
    }

    /// A transaction pins the partition's LSO: at the last observation the LSO was behind
    /// the HW and had stood still since the observation before (or had at its previous
    /// value, right before it moved on to another open transaction). A busy exactly-once
    /// partition, whose LSO moves at every observation, is not pinned.
    pub fn pinned(&self, topic: &Arc<str>, partition: i32) -> bool {
        self.pinned
            .get(&(topic.clone(), partition))
            .is_some_and(|p| p.stood_still || p.stood_still_before)
    }

    /// Forgets partitions that no longer exist.
    pub fn retain(&mut self, exists: impl Fn(&Arc<str>, i32) -> bool) {
        self.pinned
            .retain(|(topic, partition), _| exists(topic, *partition));
        self.known
            .retain(|(topic, partition)| exists(topic, *partition));
        self.watched
            .retain(|(topic, partition), _| exists(topic, *partition));
        self.listed
            .retain(|(topic, partition)| exists(topic, *partition));
    }

    pub fn len(&self) -> usize {
        self.pinned.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pinned.is_empty()
    }
}
