//! Pure derivations: from what the broker reported ([`RawSample`]) to what `/metrics`
//! shows ([`ClusterSnapshot`]). No I/O here; every rule of SPEC §1–§3 that turns offsets
//! into gaps, lags and durations is a function in this module.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::kafka::{RawSample, Stage, StageFailure};

/// What one cycle learned about one cluster; immutable once published.
#[derive(Debug, Clone)]
pub struct ClusterSnapshot {
    pub cluster: String,
    /// The last cycle reached the cluster.
    pub up: bool,
    /// End of this cycle.
    pub taken_at: SystemTime,
    /// End of the last cycle that reached the cluster (this one, if `up`).
    pub last_success: Option<SystemTime>,
    pub partitions: Vec<PartitionState>,
    pub groups: Vec<GroupState>,
}

/// One partition's offsets and what they imply.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionState {
    pub topic: Arc<str>,
    pub partition: i32,
    pub log_start_offset: Option<i64>,
    pub high_watermark: Option<i64>,
    pub last_stable_offset: Option<i64>,
    /// Present when both the HW and the LSO were sampled in this cycle.
    pub visibility: Option<Visibility>,
}

/// The transaction gap of a partition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Visibility {
    /// HW - LSO: records withheld from read_committed consumers by open transactions.
    pub hw_minus_lso: i64,
    /// Seconds the LSO has stood still while behind the HW; 0 when HW == LSO.
    pub lso_stuck_seconds: f64,
}

/// One consumer group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupState {
    pub name: String,
    pub state: String,
    pub members: usize,
    /// Absent when the group's offsets could not be fetched in this cycle.
    pub offsets: Option<Vec<GroupPartitionState>>,
}

/// A group's position on one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupPartitionState {
    pub topic: Arc<str>,
    pub partition: i32,
    pub committed_offset: i64,
    /// Present when the partition's HW and LSO were sampled in this cycle.
    pub lag: Option<Lag>,
}

/// Lag of a committed offset against both bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lag {
    /// max(0, HW - committed).
    pub hw_lag: i64,
    /// max(0, LSO - committed): what a read_committed consumer can still read now.
    pub lso_lag: i64,
    /// max(0, committed - LSO): records read before their transaction was decided.
    pub committed_beyond_lso: i64,
}

/// An impossible value that was clamped to 0; the `kind` label of
/// `kafka_lso_exporter_anomalies_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Anomaly {
    /// LSO > HW (e.g. a leader change between the two requests).
    LsoAboveHighWatermark,
    /// Committed offset > HW (e.g. log truncation, or offsets reset past the end).
    CommittedBeyondHighWatermark,
}

impl Anomaly {
    pub fn as_str(self) -> &'static str {
        match self {
            Anomaly::LsoAboveHighWatermark => "lso_above_high_watermark",
            Anomaly::CommittedBeyondHighWatermark => "committed_beyond_high_watermark",
        }
    }
}

/// HW - LSO, clamped at 0.
pub fn hw_minus_lso(high_watermark: i64, last_stable_offset: i64) -> (i64, Option<Anomaly>) {
    let gap = high_watermark - last_stable_offset;
    if gap < 0 {
        (0, Some(Anomaly::LsoAboveHighWatermark))
    } else {
        (gap, None)
    }
}

/// Both lags and the beyond-LSO distance of a committed offset. A committed offset above
/// the LSO is normal for a read_uncommitted consumer; above the HW it is an anomaly.
pub fn lag(committed: i64, high_watermark: i64, last_stable_offset: i64) -> (Lag, Option<Anomaly>) {
    let hw_lag = high_watermark - committed;
    let lag = Lag {
        hw_lag: hw_lag.max(0),
        lso_lag: (last_stable_offset - committed).max(0),
        committed_beyond_lso: (committed - last_stable_offset).max(0),
    };
    let anomaly = (hw_lag < 0).then_some(Anomaly::CommittedBeyondHighWatermark);
    (lag, anomaly)
}

/// Per partition, when the LSO was first seen standing at its current value behind the
/// HW. The clock starts at the first cycle that sees HW > LSO for an LSO value, resets
/// when the LSO moves, and stops (reads 0) when HW == LSO. It lives in the exporter's
/// memory: a restart restarts every clock.
#[derive(Debug, Default)]
pub struct StuckClock {
    pinned: HashMap<(Arc<str>, i32), Pinned>,
}

#[derive(Debug, Clone, Copy)]
struct Pinned {
    last_stable_offset: i64,
    since: Instant,
}

impl StuckClock {
    /// Records one observation and returns the stuck duration at `now`.
    pub fn observe(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        high_watermark: i64,
        last_stable_offset: i64,
        now: Instant,
    ) -> Duration {
        let key = (topic.clone(), partition);
        if high_watermark <= last_stable_offset {
            self.pinned.remove(&key);
            return Duration::ZERO;
        }
        let entry = self.pinned.entry(key).or_insert(Pinned {
            last_stable_offset,
            since: now,
        });
        if entry.last_stable_offset != last_stable_offset {
            *entry = Pinned {
                last_stable_offset,
                since: now,
            };
        }
        now.saturating_duration_since(entry.since)
    }

    /// Forgets partitions that no longer exist.
    pub fn retain(&mut self, exists: impl Fn(&Arc<str>, i32) -> bool) {
        self.pinned
            .retain(|(topic, partition), _| exists(topic, *partition));
    }

    pub fn len(&self) -> usize {
        self.pinned.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pinned.is_empty()
    }
}

/// The result of deriving one cycle.
#[derive(Debug)]
pub struct Derived {
    pub partitions: Vec<PartitionState>,
    pub groups: Vec<GroupState>,
    pub anomalies: Vec<Anomaly>,
    pub failures: Vec<(Stage, StageFailure)>,
}

/// Turns a raw sample into metric values, advancing the stuck clock.
///
/// `now` is the time the sample was taken. Only partitions whose topic passed the filter
/// appear in the raw sample, and group offsets on other topics are dropped here.
pub fn derive(raw: RawSample, clock: &mut StuckClock, now: Instant) -> Derived {
    let mut anomalies = Vec::new();
    let partitions: Vec<PartitionState> = raw
        .partitions
        .into_iter()
        .map(|p| {
            let visibility = match (p.high_watermark, p.last_stable_offset) {
                (Some(hw), Some(lso)) => {
                    let (gap, anomaly) = hw_minus_lso(hw, lso);
                    anomalies.extend(anomaly);
                    let stuck = clock.observe(&p.topic, p.partition, hw, lso, now);
                    Some(Visibility {
                        hw_minus_lso: gap,
                        lso_stuck_seconds: stuck.as_secs_f64(),
                    })
                }
                _ => None,
            };
            PartitionState {
                topic: p.topic,
                partition: p.partition,
                log_start_offset: p.log_start_offset,
                high_watermark: p.high_watermark,
                last_stable_offset: p.last_stable_offset,
                visibility,
            }
        })
        .collect();

    if raw.reached {
        let present: HashSet<(&str, i32)> = partitions
            .iter()
            .map(|p| (&*p.topic, p.partition))
            .collect();
        clock.retain(|topic, partition| present.contains(&(&**topic, partition)));
    }

    let index: HashMap<(&str, i32), &PartitionState> = partitions
        .iter()
        .map(|p| ((&*p.topic, p.partition), p))
        .collect();
    let groups = raw
        .groups
        .into_iter()
        .map(|g| {
            let offsets = g.committed.map(|committed| {
                let mut offsets: Vec<GroupPartitionState> = committed
                    .into_iter()
                    .filter_map(|c| {
                        let partition = index.get(&(c.topic.as_str(), c.partition))?;
                        let lag = match (partition.high_watermark, partition.last_stable_offset) {
                            (Some(hw), Some(lso)) => {
                                let (lag, anomaly) = lag(c.offset, hw, lso);
                                anomalies.extend(anomaly);
                                Some(lag)
                            }
                            _ => None,
                        };
                        Some(GroupPartitionState {
                            topic: partition.topic.clone(),
                            partition: c.partition,
                            committed_offset: c.offset,
                            lag,
                        })
                    })
                    .collect();
                offsets.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
                offsets
            });
            GroupState {
                name: g.name,
                state: g.state,
                members: g.members,
                offsets,
            }
        })
        .collect();

    Derived {
        partitions,
        groups,
        anomalies,
        failures: raw.failures.into_iter().collect(),
    }
}
