//! Pure derivations: from what the broker reported ([`RawSample`]) to what `/metrics`
//! shows ([`ClusterSnapshot`]). No I/O here; every rule of SPEC §1–§3 that turns offsets
//! into gaps, lags and durations is a function in this module.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::kafka::records::FirstRecord;
use crate::kafka::{CoordinatorView, PartitionLog, RawSample, RawTransaction, Stage, StageFailure};

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
    /// Series left out by the cardinality guard in this cycle.
    pub series_dropped: usize,
    /// Groups whose offset series the guard leaves out of `/metrics` in this cycle; the
    /// status page and the JSON API show them whole.
    pub left_out_groups: std::collections::HashSet<String>,
    /// Series `/metrics` shows for the cluster ([`crate::expose::series_count`]), 0 when
    /// not counted (no `max_series`).
    pub series: usize,
    /// Per topic, the cost of exactly-once counted so far ([`RawSample::eos_cost`]).
    pub eos_cost: std::collections::BTreeMap<Arc<str>, crate::kafka::records::EosCost>,
    /// How `/metrics` shows it: granularity, compatibility families.
    pub exposition: crate::series::Exposition,
    /// Brokers the last cycle's metadata listed: id and address (host:port).
    pub brokers: Vec<(i32, String)>,
    /// The sampled topics' `retention.ms` (-1: unlimited), where it could be read.
    pub retention_ms: HashMap<Arc<str>, i64>,
    /// Every open transaction of the cluster, fencings and coordinator moves.
    pub transactions: crate::inventory::TransactionsView,
    /// The brokers' clock against the exporter's, when measured recently.
    pub clock_skew: Option<crate::kafka::ClockSkew>,
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
    /// Age of the record at the LSO (the oldest one withheld from read_committed
    /// consumers) while HW > LSO, 0 when they are equal; absent when it was not read.
    pub withheld_age_seconds: Option<f64>,
    /// The open transactions, oldest first: empty when HW == LSO, absent when forensics
    /// is off for the cluster or failed for this partition in this cycle.
    pub transactions: Option<Vec<OpenTransaction>>,
    /// Leader and replicas as the cycle's metadata names them.
    pub replication: Option<crate::kafka::Replication>,
}

impl PartitionState {
    /// Age of the oldest open transaction whose age is known; 0 when none is open,
    /// `None` when none was listed or no open one can be dated.
    pub fn oldest_transaction_age(&self) -> Option<f64> {
        let open = self.transactions.as_ref()?;
        if open.is_empty() {
            return Some(0.0);
        }
        open.iter().filter_map(|t| t.age_seconds).reduce(f64::max)
    }
}

/// An open transaction holding a partition's LSO, as leader and coordinator report it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenTransaction {
    pub producer_id: i64,
    pub producer_epoch: i32,
    /// Offset of the transaction's first record in this partition; the oldest one's is
    /// the partition's LSO.
    pub start_offset: i64,
    /// Empty when no coordinator knows the producer id (or could not be asked).
    pub transactional_id: String,
    /// The coordinator's state of the transactional id (Ongoing, PrepareCommit, ...), or
    /// `None` when it could not be asked or does not know the producer id.
    pub state: Option<String>,
    /// How long the transaction has been open, by a broker's clock or the exporter's
    /// own ([`AgeClock`]); `None` when none of them dates it. Never from a timestamp the
    /// producer wrote (DescribeProducers' last timestamp, a record's CreateTime): for
    /// Kafka Streams, Connect or Flink that is event time, often hours old.
    pub age_seconds: Option<f64>,
    /// Which clock [`OpenTransaction::age_seconds`] comes from.
    pub age_clock: Option<AgeClock>,
    pub timeout_ms: Option<i32>,
    pub coordinator: CoordinatorStatus,
    /// The broker that coordinates the transaction, when one answered for it (or is
    /// loading the transaction log it is in).
    pub coordinator_broker: Option<i32>,
    /// KIP-664: open longer than transaction.max.timeout.ms + margin (see
    /// [`OpenTransaction::derive`]).
    pub hanging: bool,
}

/// The clock a transaction's age is read from; none of them is the producer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgeClock {
    /// The coordinator's start time of the transaction (DescribeTransactions), which it
    /// reports as open in this partition.
    Coordinator,
    /// The LogAppendTime of the transaction's first record in the partition: the
    /// leader's clock, on topics with `message.timestamp.type=LogAppendTime`.
    LogAppendTime,
    /// Since an earlier cycle of this exporter first saw it open: a lower bound that
    /// starts over when the exporter restarts.
    FirstSight,
}

impl AgeClock {
    pub fn as_str(self) -> &'static str {
        match self {
            AgeClock::Coordinator => "coordinator",
            AgeClock::LogAppendTime => "log_append_time",
            AgeClock::FirstSight => "first_sight",
        }
    }
}

/// What dates an open transaction besides its coordinator: the broker's clock in the log,
/// and the exporter's own observation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Witness {
    /// LogAppendTime (ms since the epoch) of the transaction's first record in the
    /// partition, when the exporter read it and the topic uses LogAppendTime.
    pub append_time_ms: Option<i64>,
    /// How long the exporter has seen the transaction open; `None` at first sight.
    pub watched_for: Option<Duration>,
}

impl OpenTransaction {
    /// `true` when the coordinator reports this producer as the open transaction of the
    /// partition (or as one being completed right now).
    fn coordinator_agrees(view: &CoordinatorView, producer_id: i64, producer_epoch: i32) -> bool {
        let CoordinatorView::Found(t) = view else {
            return false;
        };
        if t.producer_id != producer_id {
            return false;
        }
        match t.state.as_str() {
            "Ongoing" => i32::from(t.producer_epoch) == producer_epoch && t.includes_partition,
            // Markers are being written; the epoch may already be bumped (KIP-890).
            "PrepareCommit" | "PrepareAbort" | "CompleteCommit" | "CompleteAbort"
            | "PrepareEpochFence" => true,
            _ => false,
        }
    }

    /// Ages and classifies one raw transaction at wall-clock time `now_ms`.
    ///
    /// The age counts from the coordinator's start time when the coordinator reports the
    /// transaction as open here; otherwise from the older of the LogAppendTime of its
    /// first record and the exporter's first sight of it (`witness`); otherwise it is
    /// unknown, and an unknown age never makes a transaction hanging. As Kafka's own `kafka-transactions.sh find-hanging` does, a transaction
    /// is hanging only once it is older than the longest transaction the broker allows
    /// (`max_timeout_ms`, or the transaction's own longer timeout) plus `margin_ms`:
    /// a young transaction the coordinator does not confirm is far more often a race with
    /// its commit, or a transactional id the exporter may not describe, than a hang. A
    /// failed coordinator lookup never makes a transaction hanging.
    pub fn derive(
        raw: &RawTransaction,
        now_ms: i64,
        max_timeout_ms: i64,
        margin_ms: i64,
        witness: Witness,
    ) -> OpenTransaction {
        let agrees =
            Self::coordinator_agrees(&raw.coordinator, raw.producer_id, raw.producer_epoch);
        let found = match &raw.coordinator {
            CoordinatorView::Found(t) if t.producer_id == raw.producer_id => Some(t),
            _ => None,
        };
        // Times come from brokers: saturating, so that no value a broker sends overflows.
        let since = |started_ms: i64| now_ms.saturating_sub(started_ms).max(0);
        let (age_ms, age_clock) = match found {
            Some(t) if agrees && t.start_time_ms >= 0 => {
                (Some(since(t.start_time_ms)), Some(AgeClock::Coordinator))
            }
            _ => {
                let appended = witness
                    .append_time_ms
                    .map(|at| (since(at), AgeClock::LogAppendTime));
                let watched = witness.watched_for.map(|d| {
                    let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
                    (ms, AgeClock::FirstSight)
                });
                match appended
                    .into_iter()
                    .chain(watched)
                    .max_by_key(|(ms, _)| *ms)
                {
                    Some((ms, clock)) => (Some(ms), Some(clock)),
                    None => (None, None),
                }
            }
        };
        let limit_ms = max_timeout_ms
            .max(found.map_or(0, |t| i64::from(t.timeout_ms)))
            .saturating_add(margin_ms);
        let coordinator = match (&raw.coordinator, agrees) {
            (CoordinatorView::Unknown, _) => CoordinatorStatus::Unknown,
            (CoordinatorView::Loading { .. }, _) => CoordinatorStatus::Loading,
            (CoordinatorView::Unavailable, _) => CoordinatorStatus::Unavailable,
            (_, true) => CoordinatorStatus::Open,
            (CoordinatorView::NotFound, _) => CoordinatorStatus::NotFound,
            (CoordinatorView::Found(_), false) => CoordinatorStatus::Disagrees,
        };
        let coordinator_broker = match &raw.coordinator {
            CoordinatorView::Found(t) => Some(t.coordinator),
            CoordinatorView::Loading { broker } => Some(*broker),
            _ => None,
        };
        OpenTransaction {
            producer_id: raw.producer_id,
            producer_epoch: raw.producer_epoch,
            start_offset: raw.start_offset,
            transactional_id: found
                .map(|t| t.transactional_id.clone())
                .unwrap_or_default(),
            state: found.map(|t| t.state.clone()),
            age_seconds: age_ms.map(|ms| ms as f64 / 1000.0),
            age_clock,
            timeout_ms: found.map(|t| t.timeout_ms),
            coordinator,
            coordinator_broker,
            // A coordinator that could not say (lookup failed, loading, unavailable), or an
            // age no clock can tell, never makes a transaction hanging.
            hanging: coordinator.answered() && age_ms.is_some_and(|age| age > limit_ms),
        }
    }
}

/// What the transaction coordinators said of an open transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordinatorStatus {
    /// Reported as the producer's open (or just ending) transaction in this partition.
    Open,
    /// The coordinator knows the transactional id, but not as open here with this
    /// producer id and epoch (fenced, or already ended).
    Disagrees,
    /// Every coordinator answered and none lists the producer id (or the exporter may not
    /// describe its transactional id).
    NotFound,
    /// The lookup failed in this cycle.
    Unknown,
    /// A broker is loading the transaction log after a coordinator move; the transaction
    /// cannot end before it has.
    Loading,
    /// A broker that may coordinate it could not be asked (down or unreachable).
    Unavailable,
}

impl CoordinatorStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CoordinatorStatus::Open => "open",
            CoordinatorStatus::Disagrees => "disagrees",
            CoordinatorStatus::NotFound => "not_found",
            CoordinatorStatus::Unknown => "unknown",
            CoordinatorStatus::Loading => "loading",
            CoordinatorStatus::Unavailable => "unavailable",
        }
    }

    /// The coordinators answered for the transaction (whatever they said).
    pub fn answered(self) -> bool {
        matches!(
            self,
            CoordinatorStatus::Open | CoordinatorStatus::Disagrees | CoordinatorStatus::NotFound
        )
    }
}

/// The transaction gap of a partition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Visibility {
    /// HW - LSO: records withheld from read_committed consumers by open transactions.
    pub hw_minus_lso: i64,
    /// Seconds the LSO has stood still while behind the HW; 0 when HW == LSO.
    pub lso_stuck_seconds: f64,
    /// A transaction pins the LSO ([`StuckClock::pinned`]).
    pub pinned: bool,
}

/// One consumer group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupState {
    pub name: String,
    /// The broker that listed the group (see [`crate::kafka::RawGroup::coordinator`]).
    pub coordinator: Option<String>,
    /// classic, consumer, share or streams.
    pub group_type: String,
    /// The members' protocol type (`consumer`, `connect`, ...).
    pub protocol: String,
    /// In the names of the group's own protocol ([`group_states`]).
    pub state: String,
    /// Live members; absent when the group could not be described in this cycle.
    pub members: Option<usize>,
    /// A share group's `share.isolation.level`; `None` for other groups.
    pub isolation: Option<crate::kafka::Isolation>,
    /// A share group's lag per share-partition as its broker reports it (KIP-1226).
    pub broker_lags: Vec<crate::kafka::BrokerLag>,
    /// Absent when the group's offsets could not be fetched in this cycle.
    pub offsets: Option<Vec<GroupPartitionState>>,
    /// Whether `/metrics` shows the group's series per partition or per topic.
    pub granularity: crate::config::Granularity,
    /// The worst status of its partitions ([`crate::progress`]); `None` for share groups
    /// and while no partition's lag is known.
    pub status: Option<crate::progress::GroupStatus>,
}

/// A group's position on one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupPartitionState {
    pub topic: Arc<str>,
    pub partition: i32,
    pub committed_offset: i64,
    /// Present when the partition's HW and LSO were sampled in this cycle.
    pub lag: Option<Lag>,
    /// How long ago the first record the group would still receive up to the HW was
    /// written, or that there is none; absent when it could not be read.
    pub hw_time_lag: Option<TimeLag>,
    /// The same up to the LSO, for what a read_committed consumer can read now.
    pub lso_time_lag: Option<TimeLag>,
    /// Seconds since the committed offset last moved while the group had something to
    /// read; 0 when it has nothing to read ([`crate::progress`]).
    pub commit_stall_seconds: Option<f64>,
    /// committed - log start offset, at least 0: offsets retention may delete before
    /// the group's next unread record goes.
    pub retention_margin: Option<i64>,
    /// The topic's retention less the age of the first record the group has not
    /// consumed: a lower bound of the seconds before time retention may delete it.
    pub retention_margin_seconds: Option<f64>,
    /// max(0, log start - committed): records deleted before the group consumed them.
    pub lost_records: Option<i64>,
}

/// Lag of a committed offset against both bounds, in records a consumer would receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lag {
    /// Records a read_uncommitted consumer at the committed offset would still receive
    /// up to the HW: max(0, HW - committed) less the commit/abort markers in that range.
    pub hw_lag: i64,
    /// Records a read_committed consumer can still read now: up to the LSO, less markers
    /// and records of aborted transactions.
    pub lso_lag: i64,
    /// max(0, committed - LSO): records read before their transaction was decided.
    pub committed_beyond_lso: i64,
}

impl Lag {
    /// The group has read everything a read_committed consumer may read and has not
    /// read past the LSO: where the partition's HW > LSO it is held by the transaction
    /// at the LSO, not slow (SPEC §3 "blocked"). A group committed past the LSO reads
    /// uncommitted and is never held. An exactly-once group whose committed offset sits
    /// below a commit marker that precedes the LSO is held too: it has nothing to read.
    pub fn waits_at_lso(&self) -> bool {
        self.lso_lag == 0 && self.committed_beyond_lso == 0
    }
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
    let gap = high_watermark.saturating_sub(last_stable_offset);
    if gap < 0 {
        (0, Some(Anomaly::LsoAboveHighWatermark))
    } else {
        (gap, None)
    }
}

/// Both lags and the beyond-LSO distance of a committed offset. A committed offset above
/// the LSO is normal for a read_uncommitted consumer; above the HW it is an anomaly.
///
/// Without `log` the lags are offset differences. With it, offsets the exporter has read
/// count only if a consumer would receive them: never a commit/abort marker, and for
/// the LSO lag never a record of an aborted transaction. Offsets it has not read still
/// count one each, so the lag is exact where the log was read and an upper bound
/// elsewhere.
pub fn lag(
    committed: i64,
    high_watermark: i64,
    last_stable_offset: i64,
    log: Option<&PartitionLog>,
) -> (Lag, Option<Anomaly>) {
    // Offsets come from brokers: saturating, so that no value a broker sends overflows.
    let hw_gap = high_watermark.saturating_sub(committed);
    let window = log.and_then(|l| l.window.as_deref());
    let count = |bound: i64, committed_only: bool| match window {
        Some(w) if committed < bound => w.receivable(committed, bound, committed_only).0,
        _ => bound.saturating_sub(committed).max(0),
    };
    let lag = Lag {
        hw_lag: count(high_watermark, false),
        lso_lag: count(last_stable_offset, true),
        committed_beyond_lso: committed.saturating_sub(last_stable_offset).max(0),
    };
    let anomaly = (hw_gap < 0).then_some(Anomaly::CommittedBeyondHighWatermark);
    (lag, anomaly)
}

/// Seconds since `written_ms`, never negative (a producer's clock may run ahead).
fn age_seconds(now_ms: i64, written_ms: i64) -> f64 {
    now_ms.saturating_sub(written_ms).max(0) as f64 / 1000.0
}

/// A time lag: how long ago the first record a consumer would still receive was written,
/// or that there is none. Kept apart from a number, because a record can be there and
/// read 0 s old (a producer's clock ahead of the exporter's, a future-dated CreateTime):
/// that consumer still has something to read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimeLag {
    /// Nothing left to receive below the bound (caught up, or only commit/abort markers
    /// and, for read_committed, aborted records).
    NothingLeft,
    /// A record is left; seconds since it was written, at least 0.
    Since(f64),
}

impl TimeLag {
    /// The value `/metrics` shows: 0 when nothing is left.
    pub fn seconds(self) -> f64 {
        match self {
            TimeLag::NothingLeft => 0.0,
            TimeLag::Since(seconds) => seconds,
        }
    }

    pub fn nothing_left(self) -> bool {
        self == TimeLag::NothingLeft
    }
}

/// How long ago the first record a consumer at `from` would receive below `bound` was
/// written, or that there is none; `None` when the log read does not say.
fn first_record_age(
    log: Option<&PartitionLog>,
    from: i64,
    bound: i64,
    committed_only: bool,
    now_ms: i64,
) -> Option<TimeLag> {
    if from >= bound {
        return Some(TimeLag::NothingLeft);
    }
    match log?
        .extent_at(from)?
        .first_receivable(from, bound, committed_only)
    {
        FirstRecord::At(written_ms) => Some(TimeLag::Since(age_seconds(now_ms, written_ms))),
        FirstRecord::None => Some(TimeLag::NothingLeft),
        FirstRecord::Unknown => None,
    }
}

/// Time lag of a committed offset against the HW and against the LSO (see
/// [`GroupPartitionState::hw_time_lag`]).
pub fn time_lag(
    committed: i64,
    high_watermark: i64,
    last_stable_offset: i64,
    log: Option<&PartitionLog>,
    now_ms: i64,
) -> (Option<TimeLag>, Option<TimeLag>) {
    (
        first_record_age(log, committed, high_watermark, false, now_ms),
        first_record_age(log, committed, last_stable_offset, true, now_ms),
    )
}

/// A share group's lag and time lag on one partition from the lag its broker reports
/// (KIP-1226: offsets from the start offset up to the HW not yet acknowledged), rather
/// than from its start offset, which moves only past whole batches and so stands below
/// records the group already acknowledged.
///
/// The broker counts, among the offsets not acknowledged, the commit/abort markers and
/// aborted records the group has not passed yet (not those it passed), and everything
/// above the LSO, which a read_committed group cannot acquire (as Kafka 4.4 does:
/// tests/share_groups.rs). Which offsets are left is not reported,
/// only how many: the estimate takes them to be the last ones, as for a group that
/// acknowledges in order, so the first one left is `HW - broker lag` (never below the
/// start offset). From there the lags are counted as for any consumer: up to the LSO
/// less markers and aborted records, up to the HW less markers. A group that left a
/// record behind (released, redelivered) has records older than that: the lag is then
/// right in number only where the offsets it skips hold no markers, and the time lag is
/// a lower bound. The HW is this cycle's, sampled after the broker computed its lag:
/// records written in between make the lag look smaller by their number.
///
/// Neither lag exceeds the start offset's ([`lag`], [`time_lag`]), both upper bounds;
/// where the log at the first offset left was not read, the time lag is the start
/// offset's.
pub fn share_lag_from_broker(
    start_offset: i64,
    broker_lag: i64,
    high_watermark: i64,
    last_stable_offset: i64,
    log: Option<&PartitionLog>,
    now_ms: i64,
) -> (Lag, (Option<TimeLag>, Option<TimeLag>)) {
    let (from_start, _) = lag(start_offset, high_watermark, last_stable_offset, log);
    let start_times = time_lag(
        start_offset,
        high_watermark,
        last_stable_offset,
        log,
        now_ms,
    );
    let first_left = high_watermark
        .saturating_sub(broker_lag.max(0))
        .max(start_offset);
    let (left, _) = lag(first_left, high_watermark, last_stable_offset, log);
    let (hw_seconds, lso_seconds) =
        time_lag(first_left, high_watermark, last_stable_offset, log, now_ms);
    let lags = Lag {
        hw_lag: left.hw_lag.min(from_start.hw_lag),
        lso_lag: left.lso_lag.min(from_start.lso_lag),
        committed_beyond_lso: from_start.committed_beyond_lso,
    };
    (
        lags,
        (hw_seconds.or(start_times.0), lso_seconds.or(start_times.1)),
    )
}

/// Age of the record at the LSO while HW > LSO; 0 when they are equal.
pub fn withheld_age(
    high_watermark: i64,
    last_stable_offset: i64,
    log: Option<&PartitionLog>,
    now_ms: i64,
) -> Option<f64> {
    first_record_age(log, last_stable_offset, high_watermark, false, now_ms).map(TimeLag::seconds)
}

/// Per partition, when the LSO was first seen standing at its current value behind the
/// HW. The clock starts at the first cycle that sees HW > LSO for an LSO value, resets
/// when the LSO moves, and stops (reads 0) when HW == LSO. It lives in the exporter's
/// memory: a restart restarts every clock. It also remembers when the exporter first saw
/// each open transaction ([`StuckClock::watch`]), the last resort for dating one.
#[derive(Debug, Default)]
pub struct StuckClock {
    pinned: HashMap<(Arc<str>, i32), Pinned>,
    /// Partitions observed in an earlier cycle.
    known: HashSet<(Arc<str>, i32)>,
    /// Per partition, the open transactions of the last cycle that could list them
    /// (producer id, epoch, start offset) and when each was first seen.
    watched: HashMap<(Arc<str>, i32), Vec<FirstSight>>,
}

/// An open transaction of a partition (producer id, epoch, start offset) and when the
/// exporter first saw it.
type FirstSight = ((i64, i32, i64), Instant);

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
    /// `open_for` is how long the transaction starting at the LSO has been open, by its
    /// coordinator's clock. The LSO cannot have stood longer than that; when the clock did
    /// not see the LSO arrive (the exporter started while it was pinned), it is the
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
    /// for each how long the exporter has seen it open: `None` at first sight. A
    /// transaction no longer listed is forgotten.
    pub fn watch(
        &mut self,
        topic: &Arc<str>,
        partition: i32,
        open: &[RawTransaction],
        now: Instant,
    ) -> Vec<Option<Duration>> {
        let earlier = self
            .watched
            .remove(&(topic.clone(), partition))
            .unwrap_or_default();
        let mut current = Vec::with_capacity(open.len());
        let watched_for = open
            .iter()
            .map(|t| {
                let key = (t.producer_id, t.producer_epoch, t.start_offset);
                let first_seen = earlier.iter().find(|(k, _)| *k == key).map(|(_, at)| *at);
                current.push((key, first_seen.unwrap_or(now)));
                first_seen.map(|at| now.saturating_duration_since(at))
            })
            .collect();
        if !current.is_empty() {
            self.watched.insert((topic.clone(), partition), current);
        }
        watched_for
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
    }

    pub fn len(&self) -> usize {
        self.pinned.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pinned.is_empty()
    }
}

/// The states a live classic group moves between; each group gets one series per state
/// of its protocol, 1 for the current one. Any other state (`Dead` while a group is
/// deleted, `Unknown`, or one a newer broker names) is added as its own series while it is
/// the current one: a 0 for every group in states it is almost never in would cost one
/// series per group each and say nothing.
pub const GROUP_STATES: &[&str] = &[
    "Stable",
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
];
/// States of a consumer group of the KIP-848 protocol.
pub const CONSUMER_GROUP_STATES: &[&str] = &["Stable", "Empty", "Assigning", "Reconciling"];
/// States of a share group (KIP-932).
pub const SHARE_GROUP_STATES: &[&str] = &["Stable", "Empty"];
/// States of a streams group (KIP-1071).
pub const STREAMS_GROUP_STATES: &[&str] =
    &["Stable", "Empty", "NotReady", "Assigning", "Reconciling"];

/// The states a live group of `group_type` moves between, in its protocol's own names.
pub fn group_states(group_type: &str) -> &'static [&'static str] {
    match group_type {
        "consumer" => CONSUMER_GROUP_STATES,
        "share" => SHARE_GROUP_STATES,
        "streams" => STREAMS_GROUP_STATES,
        _ => GROUP_STATES,
    }
}

impl GroupState {
    /// A share group's lag on one partition: against the LSO when it reads committed,
    /// the HW otherwise; `None` for other groups or an unknown isolation level. Derived
    /// from the broker's own lag where it reports one ([`share_lag_from_broker`]), else
    /// counted from the start offset (an upper bound).
    pub fn share_lag(&self, offset: &GroupPartitionState) -> Option<i64> {
        let lag = offset.lag?;
        match self.isolation? {
            crate::kafka::Isolation::ReadCommitted => Some(lag.lso_lag),
            crate::kafka::Isolation::ReadUncommitted => Some(lag.hw_lag),
        }
    }

    /// The same, in seconds since the first record it may still deliver was written.
    pub fn share_lag_seconds(&self, offset: &GroupPartitionState) -> Option<f64> {
        let lag = match self.isolation? {
            crate::kafka::Isolation::ReadCommitted => offset.lso_time_lag,
            crate::kafka::Isolation::ReadUncommitted => offset.hw_time_lag,
        };
        lag.map(TimeLag::seconds)
    }

    /// Held by the transaction at the LSO on this partition (see [`Lag::waits_at_lso`]):
    /// any group with a committed offset, whose consumers may read committed; a share
    /// group only when its `share.isolation.level` is read_committed. A share group's
    /// start offset advances only past whole acquired batches, so it can stand below the
    /// LSO after everything there was acknowledged: where its broker reports the lag
    /// (KIP-1226: records up to the HW not yet acknowledged), the group waits when that
    /// lag is no more than what the transaction withholds (HW - LSO). Its lag is then
    /// derived from the broker's ([`share_lag_from_broker`]) and reads 0 as well; it also
    /// reads 0, and the group waits, when all that is left below the LSO is markers or
    /// aborted records.
    pub fn waits_at_lso(&self, offset: &GroupPartitionState, partition: &PartitionState) -> bool {
        let lag_says = offset.lag.is_some_and(|l| l.waits_at_lso());
        if self.group_type != "share" {
            return lag_says;
        }
        if self.isolation != Some(crate::kafka::Isolation::ReadCommitted) {
            return false;
        }
        let withheld = partition.visibility.map(|v| v.hw_minus_lso);
        let broker_says = self
            .broker_lags
            .iter()
            .find(|l| *l.topic == *offset.topic && l.partition == offset.partition)
            .zip(withheld)
            .is_some_and(|(l, withheld)| l.lag <= withheld);
        lag_says || broker_says
    }
}

/// The result of deriving one cycle.
#[derive(Debug, Default)]
pub struct Derived {
    pub partitions: Vec<PartitionState>,
    pub groups: Vec<GroupState>,
    /// How far `groups` is the cluster's whole list ([`RawSample::group_listing`]).
    pub group_listing: crate::kafka::GroupListing,
    /// Brokers the cycle's metadata listed: id and address (host:port).
    pub brokers: Vec<(i32, String)>,
    pub anomalies: Vec<Anomaly>,
    pub failures: Vec<(Stage, StageFailure)>,
    /// The topics' `retention.ms` (-1: unlimited), where it could be read.
    pub retention_ms: HashMap<Arc<str>, i64>,
    /// Per topic, the cost of exactly-once counted so far ([`RawSample::eos_cost`]).
    pub eos_cost: std::collections::BTreeMap<Arc<str>, crate::kafka::records::EosCost>,
    /// Filled by the scheduler from [`crate::inventory::derive`].
    pub transactions: crate::inventory::TransactionsView,
    /// The brokers' clock against the exporter's ([`RawSample::clock_skew`]).
    pub clock_skew: Option<crate::kafka::ClockSkew>,
}

/// Turns a raw sample into metric values, advancing the stuck clock.
///
/// `now` is the time the sample was taken. Only partitions whose topic passed the filter
/// appear in the raw sample, and group offsets on other topics are dropped here.
pub fn derive(
    raw: RawSample,
    clock: &mut StuckClock,
    now: Instant,
    wall: SystemTime,
    hanging_margin: Duration,
) -> Derived {
    let mut anomalies = Vec::new();
    let now_ms = wall
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let max_timeout_ms = raw
        .transaction_max_timeout_ms
        .unwrap_or(crate::kafka::DEFAULT_MAX_TIMEOUT_MS);
    let margin_ms = i64::try_from(hanging_margin.as_millis()).unwrap_or(i64::MAX);
    let mut raw = raw;
    // What was read of each partition's log, by the partition's index.
    let logs: Vec<Option<PartitionLog>> = raw.partitions.iter_mut().map(|p| p.log.take()).collect();
    let partitions: Vec<PartitionState> = raw
        .partitions
        .into_iter()
        .zip(&logs)
        .map(|(p, log)| {
            // The broker's LogAppendTime of the record at `offset`, when it was read.
            let append_time_at = |offset: i64| {
                log.as_ref()
                    .and_then(|l| l.extent_at(offset))
                    .and_then(|e| e.append_time_at(offset))
            };
            let transactions: Option<Vec<OpenTransaction>> =
                p.open_transactions.as_ref().map(|open| {
                    let watched = clock.watch(&p.topic, p.partition, open, now);
                    open.iter()
                        .zip(watched)
                        .map(|(t, watched_for)| {
                            let witness = Witness {
                                append_time_ms: append_time_at(t.start_offset),
                                watched_for,
                            };
                            OpenTransaction::derive(t, now_ms, max_timeout_ms, margin_ms, witness)
                        })
                        .collect()
                });
            let mut withheld_age_seconds = None;
            let visibility = match (p.high_watermark, p.last_stable_offset) {
                (Some(hw), Some(lso)) => {
                    let (gap, anomaly) = hw_minus_lso(hw, lso);
                    anomalies.extend(anomaly);
                    withheld_age_seconds = withheld_age(hw, lso, log.as_ref(), now_ms);
                    // How long the LSO can have stood at most, by a broker's clock: the
                    // coordinator's age of the transaction the LSO stands at, or else
                    // the LogAppendTime of the record at the LSO (it cannot have arrived
                    // there before that was written). Never the record's CreateTime:
                    // the producer's (event) time would restart the clock hours back.
                    let coordinator_age = transactions.iter().flatten().find_map(|t| {
                        (t.start_offset == lso
                            && t.state.as_deref() == Some("Ongoing")
                            && t.age_clock == Some(AgeClock::Coordinator))
                        .then_some(t.age_seconds)
                        .flatten()
                    });
                    let appended_age = append_time_at(lso)
                        .filter(|_| gap > 0)
                        .map(|at| age_seconds(now_ms, at));
                    let open_for = coordinator_age
                        .or(appended_age)
                        .map(Duration::from_secs_f64);
                    let stuck = clock.observe(&p.topic, p.partition, hw, lso, now, open_for);
                    Some(Visibility {
                        hw_minus_lso: gap,
                        lso_stuck_seconds: stuck.as_secs_f64(),
                        pinned: gap > 0 && clock.pinned(&p.topic, p.partition),
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
                withheld_age_seconds,
                transactions,
                replication: p.replication,
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

    let index: HashMap<(&str, i32), (&PartitionState, Option<&PartitionLog>)> = partitions
        .iter()
        .zip(&logs)
        .map(|(p, log)| ((&*p.topic, p.partition), (p, log.as_ref())))
        .collect();
    let groups = raw
        .groups
        .into_iter()
        .map(|g| {
            let broker_lags: HashMap<(&str, i32), i64> = g
                .broker_lags
                .iter()
                .map(|l| ((l.topic.as_str(), l.partition), l.lag))
                .collect();
            let offsets = g.committed.map(|committed| {
                let mut offsets: Vec<GroupPartitionState> = committed
                    .into_iter()
                    .filter_map(|c| {
                        let &(partition, log) = index.get(&(c.topic.as_str(), c.partition))?;
                        let mut state = GroupPartitionState {
                            topic: partition.topic.clone(),
                            partition: c.partition,
                            committed_offset: c.offset,
                            lag: None,
                            hw_time_lag: None,
                            lso_time_lag: None,
                            commit_stall_seconds: None,
                            retention_margin: None,
                            retention_margin_seconds: None,
                            lost_records: None,
                        };
                        if let (Some(hw), Some(lso)) =
                            (partition.high_watermark, partition.last_stable_offset)
                        {
                            let (lag, anomaly) = lag(c.offset, hw, lso, log);
                            anomalies.extend(anomaly);
                            state.lag = Some(lag);
                            (state.hw_time_lag, state.lso_time_lag) =
                                time_lag(c.offset, hw, lso, log, now_ms);
                            // A share group's start offset (its `committed`) stands
                            // below records it acknowledged: where the broker reports
                            // its own lag, the lags are derived from that.
                            let broker_lag = broker_lags.get(&(c.topic.as_str(), c.partition));
                            if let Some(&broker_lag) =
                                broker_lag.filter(|_| g.group_type == "share")
                            {
                                let (lag, times) = share_lag_from_broker(
                                    c.offset, broker_lag, hw, lso, log, now_ms,
                                );
                                state.lag = Some(lag);
                                (state.hw_time_lag, state.lso_time_lag) = times;
                            }
                        }
                        Some(state)
                    })
                    .collect();
                offsets.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
                // One series per partition, whatever a broker answered twice.
                offsets.dedup_by(|a, b| a.topic == b.topic && a.partition == b.partition);
                offsets
            });
            GroupState {
                coordinator: g.coordinator,
                name: g.name,
                group_type: g.group_type,
                protocol: g.protocol,
                state: g.state,
                members: g.members,
                isolation: g.isolation,
                // Only the partitions sampled: the topic filter applies to them too.
                broker_lags: g
                    .broker_lags
                    .into_iter()
                    .filter(|l| index.contains_key(&(l.topic.as_str(), l.partition)))
                    .collect(),
                offsets,
                granularity: Default::default(),
                status: None,
            }
        })
        .collect();

    Derived {
        partitions,
        groups,
        group_listing: raw.group_listing,
        brokers: raw.brokers,
        anomalies,
        failures: raw.failures.into_iter().collect(),
        retention_ms: raw.retention_ms,
        eos_cost: raw.eos_cost,
        transactions: Default::default(),
        clock_skew: raw.clock_skew,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::kafka::{CommittedOffset, RawGroup, RawPartition};

    #[test]
    fn hw_minus_lso_table() {
        // (high watermark, last stable offset, expected gap, anomaly)
        let cases = [
            (900_000, 880_000, 20_000, None),
            (900, 880, 20, None),
            (901, 901, 0, None),
            (0, 0, 0, None),
            (10, 12, 0, Some(Anomaly::LsoAboveHighWatermark)),
        ];
        for (hw, lso, gap, anomaly) in cases {
            assert_eq!(hw_minus_lso(hw, lso), (gap, anomaly), "hw {hw} lso {lso}");
        }
    }

    #[test]
    fn offsets_at_the_ends_of_the_range_saturate() {
        // What a broken or hostile broker could send: no overflow, only clamped values.
        assert_eq!(
            hw_minus_lso(i64::MIN, i64::MAX),
            (0, Some(Anomaly::LsoAboveHighWatermark))
        );
        assert_eq!(hw_minus_lso(i64::MAX, i64::MIN), (i64::MAX, None));
        let (lag_max, anomaly) = lag(i64::MIN, i64::MAX, i64::MAX, None);
        assert_eq!((lag_max.hw_lag, lag_max.lso_lag), (i64::MAX, i64::MAX));
        assert_eq!((lag_max.committed_beyond_lso, anomaly), (0, None));
        let (lag_min, anomaly) = lag(i64::MAX, i64::MIN, i64::MIN, None);
        assert_eq!((lag_min.hw_lag, lag_min.lso_lag), (0, 0));
        assert_eq!(lag_min.committed_beyond_lso, i64::MAX);
        assert_eq!(anomaly, Some(Anomaly::CommittedBeyondHighWatermark));
        assert_eq!(age_seconds(i64::MAX, i64::MIN), i64::MAX as f64 / 1000.0);
        assert_eq!(age_seconds(i64::MIN, i64::MAX), 0.0);
    }

    #[test]
    fn lag_table() {
        // (committed, HW, LSO) -> (hw_lag, lso_lag, beyond_lso, anomaly)
        let cases = [
            // A read_committed group caught up behind an open transaction (the worked example).
            (880_000, 900_000, 880_000, (20_000, 0, 0, None)),
            (880, 900, 880, (20, 0, 0, None)),
            // The transaction committed: the whole backlog is visible at once.
            (880, 901, 901, (21, 21, 0, None)),
            // A read_uncommitted group past the LSO.
            (20, 20, 10, (0, 0, 10, None)),
            // Caught up on a topic without open transactions; the committed offset can
            // equal the HW although the last delivered record is HW - 2 (a marker follows it).
            (3, 3, 3, (0, 0, 0, None)),
            (100, 150, 150, (50, 50, 0, None)),
            // Committed beyond the HW (truncation): clamped and counted.
            (
                12,
                10,
                10,
                (0, 0, 2, Some(Anomaly::CommittedBeyondHighWatermark)),
            ),
        ];
        for (committed, hw, lso, (hw_lag, lso_lag, beyond, anomaly)) in cases {
            let expected = Lag {
                hw_lag,
                lso_lag,
                committed_beyond_lso: beyond,
            };
            assert_eq!(
                lag(committed, hw, lso, None),
                (expected, anomaly),
                "committed {committed} hw {hw} lso {lso}"
            );
        }
    }

    #[test]
    fn stuck_clock_runs_while_pinned_and_resets() {
        let topic: Arc<str> = Arc::from("orders");
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut clock = StuckClock::default();
        // (time, hw, lso, expected stuck seconds, pinned)
        let steps = [
            (0, 880, 880, 0, false),  // nothing open
            (15, 900, 880, 0, false), // first seen pinned: the clock starts now
            (30, 950, 880, 15, true), // still pinned at 880
            (45, 990, 880, 30, true),
            // The LSO moved on to another open transaction: the clock restarts, and the
            // partition stays pinned (it stood still right before).
            (60, 995, 990, 0, true),
            (75, 999, 990, 15, true),
            (90, 1001, 1001, 0, false), // all decided
            (105, 1010, 1001, 0, false),
            (120, 1020, 1001, 15, true),
            // A busy exactly-once partition from here: some transaction is always open,
            // the LSO moves every time. Pinned once more (it stood still before), then not.
            (135, 1030, 1025, 0, true),
            (150, 1040, 1035, 0, false),
            (165, 1050, 1045, 0, false),
        ];
        for (t, hw, lso, expected, pinned) in steps {
            let stuck = clock.observe(&topic, 0, hw, lso, at(t), None);
            assert_eq!(clock.pinned(&topic, 0), pinned, "pinned at t={t}s");
            assert_eq!(
                stuck,
                Duration::from_secs(expected),
                "t={t} hw={hw} lso={lso}"
            );
        }
    }

    #[test]
    fn stuck_clock_takes_the_coordinators_age_only_when_it_missed_the_arrival() {
        let topic: Arc<str> = Arc::from("orders");
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let open = |s: u64| Some(Duration::from_secs(s));

        // Started while pinned: the transaction at the LSO has been open for 600 s.
        let mut clock = StuckClock::default();
        assert_eq!(
            clock.observe(&topic, 0, 900, 880, at(0), open(600)),
            Duration::from_secs(600)
        );
        assert_eq!(
            clock.observe(&topic, 0, 950, 880, at(15), open(615)),
            Duration::from_secs(615)
        );
        // Without forensics, the clock's own count.
        assert_eq!(
            clock.observe(&topic, 0, 950, 880, at(30), None),
            Duration::from_secs(30)
        );

        // Seen unpinned first: the LSO arrived while watched, the clock is exact; an older
        // transaction start (an earlier one held the LSO before) does not count.
        let mut clock = StuckClock::default();
        clock.observe(&topic, 1, 880, 880, at(0), None);
        clock.observe(&topic, 1, 900, 880, at(15), open(400));
        assert_eq!(
            clock.observe(&topic, 1, 950, 880, at(30), open(415)),
            Duration::from_secs(15)
        );

        // Seen pinned at another LSO first: the move to 890 was watched.
        let mut clock = StuckClock::default();
        clock.observe(&topic, 2, 900, 880, at(0), open(100));
        assert_eq!(
            clock.observe(&topic, 2, 950, 890, at(15), open(500)),
            Duration::ZERO
        );
        assert_eq!(
            clock.observe(&topic, 2, 960, 890, at(30), open(515)),
            Duration::from_secs(15)
        );
    }

    pub(crate) fn raw_transaction(
        state: &str,
        producer_id: i64,
        coordinator_epoch: i16,
        includes: bool,
    ) -> RawTransaction {
        RawTransaction {
            producer_id: 4001,
            producer_epoch: 3,
            start_offset: 880,
            last_timestamp_ms: 1_000_000,
            coordinator: CoordinatorView::Found(crate::kafka::CoordinatorTransaction {
                coordinator: 2,
                transactional_id: "etl".into(),
                state: state.into(),
                producer_id,
                producer_epoch: coordinator_epoch,
                start_time_ms: 990_000,
                timeout_ms: 60_000,
                includes_partition: includes,
            }),
        }
    }

    #[test]
    fn open_transaction_age_and_hanging_rule() {
        use CoordinatorStatus::*;
        // The coordinator started the transaction at 990 s, the producer last wrote at
        // 1,000 s (by its own clock, which dates nothing); the broker allows 900 s, the
        // margin is 60 s.
        let (max_ms, margin_ms) = (900_000, 60_000);
        let young = 1_010_000;
        // (raw, transactional id, state, coordinator status, age at `young`)
        let cases = [
            (
                raw_transaction("Ongoing", 4001, 3, true),
                "etl",
                Some("Ongoing"),
                Open,
                Some(20.0),
            ),
            // The coordinator's epoch moved on (fenced): not this partition's transaction.
            (
                raw_transaction("Ongoing", 4001, 4, true),
                "etl",
                Some("Ongoing"),
                Disagrees,
                None,
            ),
            // The coordinator's transaction does not include this partition.
            (
                raw_transaction("Ongoing", 4001, 3, false),
                "etl",
                Some("Ongoing"),
                Disagrees,
                None,
            ),
            // Markers being written: open, whatever the epoch (KIP-890 bumps it).
            (
                raw_transaction("PrepareCommit", 4001, 4, true),
                "etl",
                Some("PrepareCommit"),
                Open,
                Some(20.0),
            ),
            (
                raw_transaction("CompleteAbort", 4001, 4, false),
                "etl",
                Some("CompleteAbort"),
                Open,
                Some(20.0),
            ),
            // The coordinator holds nothing open for this producer.
            (
                raw_transaction("Empty", 4001, 3, false),
                "etl",
                Some("Empty"),
                Disagrees,
                None,
            ),
            // The transactional id now belongs to another producer id.
            (
                raw_transaction("Ongoing", 5000, 0, true),
                "",
                None,
                Disagrees,
                None,
            ),
        ];
        let none = Witness::default();
        let derive = |raw: &RawTransaction, now_ms: i64, witness: Witness| {
            OpenTransaction::derive(raw, now_ms, max_ms, margin_ms, witness)
        };
        for (raw, id, state, status, age) in cases {
            let t = derive(&raw, young, none);
            assert_eq!(
                (
                    t.transactional_id.as_str(),
                    t.state.as_deref(),
                    t.coordinator,
                    t.age_seconds,
                    t.hanging
                ),
                (id, state, status, age, false),
                "young is never hanging: {raw:?}"
            );
            let Some(age) = age else {
                // Not confirmed by its coordinator: the producer's last write an hour back
                // dates nothing, the age is unknown and the transaction is not hanging.
                let t = derive(&raw, 1_000_000 + 3_600_000, none);
                assert_eq!((t.age_seconds, t.hanging), (None, false), "{raw:?}");
                // Watched by the exporter for longer than the limit, it is.
                let watched = |ms: i64| Witness {
                    watched_for: Some(Duration::from_millis(ms as u64)),
                    append_time_ms: None,
                };
                let t = derive(&raw, young, watched(max_ms + margin_ms));
                assert_eq!(
                    (t.age_clock, t.hanging),
                    (Some(AgeClock::FirstSight), false)
                );
                let t = derive(&raw, young, watched(max_ms + margin_ms + 1));
                assert_eq!((t.age_clock, t.hanging), (Some(AgeClock::FirstSight), true));
                continue;
            };
            // Hanging once older than the limit, by the same clock as the age.
            let started_ms = young - (age * 1000.0) as i64;
            let at_limit = started_ms + max_ms + margin_ms;
            assert!(!derive(&raw, at_limit, none).hanging, "{raw:?}");
            assert!(derive(&raw, at_limit + 1, none).hanging, "{raw:?}");
            // The coordinator's clock wins over the exporter's and the log's.
            let t = derive(
                &raw,
                young,
                Witness {
                    append_time_ms: Some(0),
                    watched_for: Some(Duration::from_secs(5_000)),
                },
            );
            assert_eq!(
                (t.age_clock, t.age_seconds),
                (Some(AgeClock::Coordinator), Some(age))
            );
        }

        // A failed lookup is never evidence, however old the last write.
        let mut unknown = raw_transaction("Ongoing", 4001, 3, true);
        unknown.coordinator = CoordinatorView::Unknown;
        let t = derive(&unknown, 10_000_000, none);
        assert_eq!(
            (t.coordinator, t.hanging, t.transactional_id.as_str()),
            (Unknown, false, "")
        );
        // A coordinator that moved and is loading the transaction log, or one that is
        // down, never makes an old transaction hanging; the loading broker is named.
        unknown.coordinator = CoordinatorView::Loading { broker: 3 };
        let t = derive(&unknown, 10_000_000, none);
        assert_eq!(
            (t.coordinator, t.coordinator_broker, t.hanging),
            (Loading, Some(3), false)
        );
        unknown.coordinator = CoordinatorView::Unavailable;
        let t = derive(&unknown, 10_000_000, none);
        assert_eq!(
            (t.coordinator, t.coordinator_broker, t.hanging),
            (Unavailable, None, false)
        );
        // Not listed by any coordinator: hanging only when old by a broker's clock (the
        // LogAppendTime of its first record) or the exporter's.
        unknown.coordinator = CoordinatorView::NotFound;
        let t = derive(&unknown, 10_000_000, none);
        assert_eq!(
            (t.coordinator, t.age_seconds, t.hanging),
            (NotFound, None, false)
        );
        let appended = Witness {
            append_time_ms: Some(1_000_000),
            watched_for: Some(Duration::from_secs(30)),
        };
        assert!(!derive(&unknown, young, appended).hanging);
        let t = derive(&unknown, 1_000_000 + max_ms + margin_ms + 1, appended);
        assert_eq!(
            (t.coordinator, t.age_clock, t.hanging),
            (NotFound, Some(AgeClock::LogAppendTime), true)
        );
        // A transaction allowed a longer timeout than the broker's cap reported (an
        // unreadable cap falls back to 15 min) is measured against its own.
        let mut long = raw_transaction("Ongoing", 4001, 3, true);
        if let CoordinatorView::Found(t) = &mut long.coordinator {
            t.timeout_ms = 3_600_000;
        }
        assert!(!derive(&long, 990_000 + 3_600_000, none).hanging);
        assert!(derive(&long, 990_000 + 3_660_001, none).hanging);
    }

    #[test]
    fn stuck_clock_is_per_partition_and_forgets_deleted_partitions() {
        let topic: Arc<str> = Arc::from("orders");
        let t0 = Instant::now();
        let mut clock = StuckClock::default();
        for partition in 0..24 {
            let lso = if partition == 7 { 100 } else { 120 };
            clock.observe(&topic, partition, 120, lso, t0, None);
        }
        assert_eq!(clock.len(), 1, "only the pinned partition has a clock");
        let later = t0 + Duration::from_secs(10);
        assert_eq!(
            clock.observe(&topic, 7, 125, 100, later, None),
            Duration::from_secs(10)
        );
        assert_eq!(
            clock.observe(&topic, 3, 125, 125, later, None),
            Duration::ZERO
        );
        clock.retain(|_, partition| partition != 7);
        assert!(clock.is_empty());
    }

    fn partition(topic: &str, partition: i32, hw: Option<i64>, lso: Option<i64>) -> RawPartition {
        RawPartition {
            open_transactions: None,
            topic: Arc::from(topic),
            partition,
            log_start_offset: Some(0),
            last_stable_offset: lso,
            high_watermark: hw,
            log: None,
            replication: None,
        }
    }

    fn committed(topic: &str, partition: i32, offset: i64) -> CommittedOffset {
        CommittedOffset {
            topic: topic.into(),
            partition,
            offset,
        }
    }

    /// A share group's log: T1 commits 3 records (0..3, written at 10 s, marker 3), T2
    /// aborts 2 (4..6, marker 6), 2 plain at 30 s (7, 8), T3 opens at 9 (40 s), 3 plain
    /// at 50 s. HW 13, LSO 9; read from `from`.
    fn share_log(from: i64) -> PartitionLog {
        use crate::kafka::records::tests::{data, marker, txn};
        use crate::kafka::records::{LogExtent, Marker};
        let batches = [
            txn(0, 3, 10_000, 1),
            marker(3, 1, Marker::Commit),
            txn(4, 2, 20_000, 2),
            marker(6, 2, Marker::Abort),
            data(7, 2, 30_000),
            txn(9, 1, 40_000, 3),
            data(10, 3, 50_000),
        ];
        let mut window = LogExtent::new(from);
        let read: Vec<_> = batches
            .into_iter()
            .filter(|b| b.last_offset >= from)
            .collect();
        window.append(&read, 13, None);
        PartitionLog {
            window: Some(Arc::new(window)),
            positions: Vec::new(),
        }
    }

    /// What Kafka 4.4 reports for such groups: the broker's lag counts every offset up to
    /// the HW not acknowledged, markers and aborted records the group has not passed
    /// included, and none it passed.
    #[test]
    fn share_lag_from_the_brokers_lag_table() {
        let now_ms = 100_000;
        let log = share_log(0);
        // (start offset, broker's lag) -> (lso lag, its seconds, hw lag, its seconds)
        use TimeLag::{NothingLeft, Since};
        let cases = [
            // Acknowledged all 5 records it may read (start still at 7): nothing left.
            ((7, 4), (0, Some(NothingLeft), 4, Some(Since(60.0)))),
            // Acknowledged 0 and 1 of T1's batch (start 0): 2, 7 and 8 are left, the
            // oldest written at 10.02 s; up to the HW also T2's and T3's records.
            ((0, 11), (3, Some(Since(89.98)), 9, Some(Since(89.98)))),
            // Nothing acknowledged: the start offset's figures.
            ((0, 13), (5, Some(Since(90.0)), 11, Some(Since(90.0)))),
            // A broker lag older than the start offset: the start offset's figures.
            ((7, 20), (2, Some(Since(70.0)), 6, Some(Since(70.0)))),
            // Caught up to the HW (a read_uncommitted group).
            ((12, 0), (0, Some(NothingLeft), 0, Some(NothingLeft))),
        ];
        for ((start, broker_lag), (lso_lag, lso_seconds, hw_lag, hw_seconds)) in cases {
            let (lag, (hw_time, lso_time)) =
                share_lag_from_broker(start, broker_lag, 13, 9, Some(&log), now_ms);
            let what = format!("start {start}, broker lag {broker_lag}");
            assert_eq!((lag.lso_lag, lag.hw_lag), (lso_lag, hw_lag), "{what}");
            assert_eq!((lso_time, hw_time), (lso_seconds, hw_seconds), "{what}");
        }
        // The log read only from 8: offsets not read count, as for any lag; the first
        // record left (2) was not read, so the time lag is the start offset's (unknown).
        let log = share_log(8);
        let (lag, (hw_time, lso_time)) = share_lag_from_broker(0, 11, 13, 9, Some(&log), now_ms);
        assert_eq!((lag.lso_lag, lag.hw_lag), (7, 11));
        assert_eq!((lso_time, hw_time), (None, None));
        // Without any read: offset differences from the first offset left.
        let (lag, times) = share_lag_from_broker(0, 11, 13, 9, None, now_ms);
        assert_eq!((lag.lso_lag, lag.hw_lag), (7, 11));
        assert_eq!(times, (None, None));
    }

    /// In a cycle: a share group with a broker's lag gets lags derived from it; one
    /// without (brokers before Kafka 4.2) keeps the start offset's, an upper bound. A
    /// read_committed one that acknowledged everything it may read waits at the LSO.
    #[test]
    fn derive_takes_a_share_groups_lag_from_its_broker_where_there_is_one() {
        let share = |name: &str, broker_lags: Vec<crate::kafka::BrokerLag>| RawGroup {
            coordinator: None,
            name: name.into(),
            state: "Stable".into(),
            members: Some(1),
            group_type: "share".into(),
            protocol: "share".into(),
            isolation: Some(crate::kafka::Isolation::ReadCommitted),
            broker_lags,
            committed: Some(vec![CommittedOffset {
                topic: "queue".into(),
                partition: 0,
                offset: 7,
            }]),
        };
        let broker_lag = |lag| {
            vec![crate::kafka::BrokerLag {
                topic: "queue".into(),
                partition: 0,
                lag,
            }]
        };
        let mut partition = partition("queue", 0, Some(13), Some(9));
        partition.log = Some(share_log(0));
        let raw = RawSample {
            reached: true,
            partitions: vec![partition],
            groups: vec![
                share("drained", broker_lag(4)),
                share("older-broker", Vec::new()),
            ],
            ..Default::default()
        };
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let derived = derive(
            raw,
            &mut StuckClock::default(),
            Instant::now(),
            wall,
            Duration::ZERO,
        );
        let p = &derived.partitions[0];
        let shown = |g: &GroupState| {
            let o = &g.offsets.as_ref().unwrap()[0];
            (g.share_lag(o), g.share_lag_seconds(o), g.waits_at_lso(o, p))
        };
        assert_eq!(shown(&derived.groups[0]), (Some(0), Some(0.0), true));
        assert_eq!(shown(&derived.groups[1]), (Some(2), Some(70.0), false));
    }

    /// The log as read: SPEC §1's worked example at 1/1000 scale, with timestamps. Plain
    /// records 870..880 written at 100 s; T1 (producer 1) opens at 880 at 200 s; 4 plain
    /// at 300 s; T2 writes 5 at 400 s and commits (marker 890); 9 plain at 500 s. HW 900,
    /// LSO 880.
    fn worked_example_log() -> PartitionLog {
        use crate::kafka::records::tests::{data, marker, txn};
        use crate::kafka::records::{LogExtent, Marker};
        let mut window = LogExtent::new(870);
        window.append(
            &[
                data(870, 10, 100_000),
                txn(880, 1, 200_000, 1),
                data(881, 4, 300_000),
                txn(885, 5, 400_000, 2),
                marker(890, 2, Marker::Commit),
                data(891, 9, 500_000),
            ],
            900,
            None,
        );
        PartitionLog {
            window: Some(Arc::new(window)),
            positions: Vec::new(),
        }
    }

    #[test]
    fn lags_from_the_log_never_count_markers() {
        let log = worked_example_log();
        let now_ms = 1_000_000;
        // (committed, hw_lag, lso_lag, hw_time_lag, lso_time_lag)
        use TimeLag::{NothingLeft, Since};
        let cases = [
            // Blocked at the LSO: 19 records behind the HW (the marker at 890 is not
            // one), nothing to read, and the record at the LSO was written at 200 s.
            (880, 19, 0, Some(Since(800.0)), Some(NothingLeft)),
            // Five plain records before the LSO; the batch 870..879 spans 100.00 s to
            // 100.09 s, so the record at 875 is taken as written at 100.05 s.
            (875, 24, 5, Some(Since(899.95)), Some(Since(899.95))),
            // A read_uncommitted group between the LSO and the HW.
            (891, 9, 0, Some(Since(500.0)), Some(NothingLeft)),
            // Caught up.
            (900, 0, 0, Some(NothingLeft), Some(NothingLeft)),
            // Below the window: the unread part counts every offset; no time known.
            (860, 39, 20, None, None),
        ];
        for (committed, hw_lag, lso_lag, hw_seconds, lso_seconds) in cases {
            let (l, _) = lag(committed, 900, 880, Some(&log));
            assert_eq!(
                (l.hw_lag, l.lso_lag),
                (hw_lag, lso_lag),
                "committed {committed}"
            );
            assert_eq!(
                time_lag(committed, 900, 880, Some(&log), now_ms),
                (hw_seconds, lso_seconds),
                "committed {committed}"
            );
        }
        assert_eq!(withheld_age(900, 880, Some(&log), now_ms), Some(800.0));
        assert_eq!(withheld_age(900, 900, None, now_ms), Some(0.0));
        assert_eq!(withheld_age(900, 880, None, now_ms), None);
        // Without reads, nothing is guessed: offset differences, and time only where
        // there is nothing to read.
        assert_eq!(lag(880, 900, 880, None).0.hw_lag, 20);
        assert_eq!(
            time_lag(880, 900, 880, None, now_ms),
            (None, Some(TimeLag::NothingLeft))
        );
        // A record written after the exporter's now (a producer's clock ahead): 0 s old,
        // but still something to read.
        assert_eq!(
            time_lag(875, 900, 880, Some(&log), 50_000),
            (Some(TimeLag::Since(0.0)), Some(TimeLag::Since(0.0)))
        );
    }

    #[test]
    fn blocked_means_nothing_to_read_and_not_past_the_lso() {
        let log = worked_example_log();
        let waits = |committed| lag(committed, 900, 880, Some(&log)).0.waits_at_lso();
        assert!(waits(880), "read_committed at the LSO");
        assert!(!waits(891), "read_uncommitted between LSO and HW");
        assert!(!waits(875), "records left to read");
        // An exactly-once group committed below a commit marker that precedes the LSO.
        let mut window = crate::kafka::records::LogExtent::new(0);
        use crate::kafka::records::tests::{marker, txn};
        window.append(
            &[
                txn(0, 10, 0, 1),
                marker(10, 1, crate::kafka::records::Marker::Commit),
                txn(11, 1, 0, 2),
            ],
            12,
            None,
        );
        let log = PartitionLog {
            window: Some(Arc::new(window)),
            positions: Vec::new(),
        };
        assert!(lag(10, 12, 11, Some(&log)).0.waits_at_lso());
    }

    #[test]
    fn derive_joins_groups_to_partitions_and_drops_what_failed() {
        let raw = RawSample {
            reached: true,
            group_listing: crate::kafka::GroupListing::Complete,
            clock_skew: None,
            brokers: Vec::new(),
            retention_ms: Default::default(),
            eos_cost: Default::default(),
            transaction_list: None,
            described_transactions: Vec::new(),
            partitions: vec![
                partition("orders", 0, Some(900), Some(880)),
                partition("orders", 1, None, Some(50)), // HW request failed
            ],
            groups: vec![
                RawGroup {
                    coordinator: None,
                    name: "billing".into(),
                    state: "Stable".into(),
                    members: Some(2),
                    group_type: "classic".into(),
                    protocol: "consumer".into(),
                    isolation: None,
                    broker_lags: Vec::new(),
                    committed: Some(vec![
                        committed("orders", 0, 880),
                        committed("orders", 1, 40),
                        committed("excluded-topic", 0, 5),
                    ]),
                },
                RawGroup {
                    coordinator: None,
                    name: "audit".into(),
                    state: "Empty".into(),
                    members: Some(0),
                    group_type: "classic".into(),
                    protocol: "consumer".into(),
                    isolation: None,
                    broker_lags: Vec::new(),
                    committed: None, // offset fetch failed
                },
            ],
            failures: Default::default(),
            transaction_max_timeout_ms: None,
        };
        let mut clock = StuckClock::default();
        let derived = derive(
            raw,
            &mut clock,
            Instant::now(),
            SystemTime::now(),
            Duration::ZERO,
        );
        assert_eq!(
            derived.partitions[0].visibility.map(|v| v.hw_minus_lso),
            Some(20)
        );
        assert_eq!(derived.partitions[1].visibility, None);
        let billing = derived.groups[0].offsets.as_ref().unwrap();
        assert_eq!(billing.len(), 2, "offsets on unselected topics are dropped");
        assert_eq!(
            billing[0].lag,
            Some(Lag {
                hw_lag: 20,
                lso_lag: 0,
                committed_beyond_lso: 0
            })
        );
        assert_eq!(billing[1].committed_offset, 40);
        assert_eq!(billing[1].lag, None, "no lag without a sampled HW");
        assert_eq!(derived.groups[1].offsets, None);
        assert!(derived.anomalies.is_empty());
    }

    #[test]
    fn derive_counts_anomalies() {
        let raw = RawSample {
            reached: true,
            group_listing: crate::kafka::GroupListing::Complete,
            clock_skew: None,
            brokers: Vec::new(),
            retention_ms: Default::default(),
            eos_cost: Default::default(),
            transaction_list: None,
            described_transactions: Vec::new(),
            partitions: vec![partition("t", 0, Some(10), Some(12))],
            groups: vec![RawGroup {
                coordinator: None,
                name: "g".into(),
                state: "Empty".into(),
                members: Some(0),
                group_type: "classic".into(),
                protocol: "consumer".into(),
                isolation: None,
                broker_lags: Vec::new(),
                committed: Some(vec![committed("t", 0, 15)]),
            }],
            failures: Default::default(),
            transaction_max_timeout_ms: None,
        };
        let derived = derive(
            raw,
            &mut StuckClock::default(),
            Instant::now(),
            SystemTime::now(),
            Duration::ZERO,
        );
        assert_eq!(
            derived.anomalies,
            vec![
                Anomaly::LsoAboveHighWatermark,
                Anomaly::CommittedBeyondHighWatermark
            ]
        );
        let lag = derived.groups[0].offsets.as_ref().unwrap()[0].lag.unwrap();
        assert_eq!(
            (lag.hw_lag, lag.lso_lag, lag.committed_beyond_lso),
            (0, 0, 3)
        );
    }

    #[test]
    fn an_unreachable_cluster_keeps_its_clocks() {
        let topic: Arc<str> = Arc::from("t");
        let t0 = Instant::now();
        let mut clock = StuckClock::default();
        clock.observe(&topic, 0, 10, 5, t0, None);
        let derived = derive(
            RawSample::default(),
            &mut clock,
            t0 + Duration::from_secs(1),
            SystemTime::now(),
            Duration::ZERO,
        );
        assert!(derived.partitions.is_empty());
        assert_eq!(
            clock.len(),
            1,
            "a failed cycle does not restart the stuck clock"
        );
        assert_eq!(
            clock.observe(&topic, 0, 11, 5, t0 + Duration::from_secs(2), None),
            Duration::from_secs(2)
        );
    }

    /// A partition held at LSO 880 (HW 900) by producer 4001's open transaction, whose
    /// first record, like DescribeProducers' last timestamp, carries `record_ms`; with
    /// `log_append_time` the broker wrote that time, otherwise the producer did.
    fn held_an_hour(
        record_ms: i64,
        log_append_time: bool,
        coordinator: CoordinatorView,
    ) -> RawSample {
        use crate::kafka::records::tests::{data, txn};
        use crate::kafka::records::{Batch, LogExtent};
        let mut window = LogExtent::new(870);
        let first = Batch {
            log_append_time,
            max_timestamp: record_ms,
            ..txn(880, 1, record_ms, 4001)
        };
        window.append(&[data(870, 10, record_ms - 1_000), first], 881, None);
        let mut held = partition("orders", 0, Some(900), Some(880));
        held.log = Some(PartitionLog {
            window: Some(Arc::new(window)),
            positions: Vec::new(),
        });
        let mut transaction = raw_transaction("Ongoing", 4001, 3, true);
        transaction.last_timestamp_ms = record_ms;
        transaction.coordinator = coordinator;
        held.open_transactions = Some(vec![transaction]);
        RawSample {
            reached: true,
            partitions: vec![held],
            groups: vec![RawGroup {
                coordinator: None,
                name: "billing".into(),
                state: "Stable".into(),
                members: Some(1),
                group_type: "classic".into(),
                protocol: "consumer".into(),
                isolation: None,
                broker_lags: Vec::new(),
                committed: Some(vec![committed("orders", 0, 875)]),
            }],
            transaction_max_timeout_ms: Some(900_000),
            ..RawSample::default()
        }
    }

    /// (stuck seconds, the transaction's age, its clock, hanging) after one cycle.
    fn held_state(derived: &Derived) -> (f64, Option<f64>, Option<AgeClock>, bool) {
        let p = &derived.partitions[0];
        let t = &p.transactions.as_ref().unwrap()[0];
        (
            p.visibility.unwrap().lso_stuck_seconds,
            t.age_seconds,
            t.age_clock,
            t.hanging,
        )
    }

    #[test]
    fn producer_timestamps_an_hour_old_neither_hang_nor_move_the_stuck_clock() {
        let t0 = Instant::now();
        let wall0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
        let hour_ago_ms = 100_000_000 - 3_600_000;
        let cycle = |clock: &mut StuckClock, s: u64, coordinator: CoordinatorView| {
            derive(
                held_an_hour(hour_ago_ms, false, coordinator),
                clock,
                t0 + Duration::from_secs(s),
                wall0 + Duration::from_secs(s),
                Duration::from_secs(60),
            )
        };
        // Event time an hour old (Streams, Connect, Flink), and no coordinator confirms
        // the transaction: not listed, one that now disagrees, or a failed lookup.
        for coordinator in [
            CoordinatorView::NotFound,
            raw_transaction("Empty", 4001, 3, false).coordinator,
            CoordinatorView::Unknown,
        ] {
            let mut clock = StuckClock::default();
            let first = cycle(&mut clock, 0, coordinator.clone());
            assert_eq!(
                held_state(&first),
                (0.0, None, None, false),
                "{coordinator:?}"
            );
            let second = cycle(&mut clock, 15, coordinator.clone());
            // Seen by an earlier cycle: dated by the exporter's own clock.
            assert_eq!(
                held_state(&second),
                (15.0, Some(15.0), Some(AgeClock::FirstSight), false),
                "{coordinator:?}"
            );
            // Time lag and the withheld age keep the record timestamps: that is what
            // users mean by them.
            assert_eq!(second.partitions[0].withheld_age_seconds, Some(3615.0));
            let billing = &second.groups[0].offsets.as_ref().unwrap()[0];
            assert!(
                billing.hw_time_lag.unwrap().seconds() > 3600.0,
                "{billing:?}"
            );
            // The exporter restarts: the first cycle after it knows no age either.
            let mut restarted = StuckClock::default();
            let after = cycle(&mut restarted, 600, coordinator.clone());
            assert_eq!(
                held_state(&after),
                (0.0, None, None, false),
                "{coordinator:?}"
            );
            // Watched for longer than transaction.max.timeout.ms + margin: hanging,
            // unless the coordinator lookup failed.
            let late = cycle(&mut restarted, 600 + 961, coordinator.clone());
            assert_eq!(
                held_state(&late).3,
                coordinator != CoordinatorView::Unknown,
                "{coordinator:?}"
            );
        }
    }

    #[test]
    fn broker_clocks_an_hour_old_count_from_the_first_cycle() {
        let t0 = Instant::now();
        let wall0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
        let hour_ago_ms = 100_000_000 - 3_600_000;
        // The coordinator started the transaction an hour ago: real, right after a restart.
        let mut confirmed = raw_transaction("Ongoing", 4001, 3, true).coordinator;
        if let CoordinatorView::Found(t) = &mut confirmed {
            t.start_time_ms = hour_ago_ms;
        }
        let mut clock = StuckClock::default();
        let derived = derive(
            held_an_hour(100_000_000 - 5_000, false, confirmed),
            &mut clock,
            t0,
            wall0,
            Duration::from_secs(60),
        );
        assert_eq!(
            held_state(&derived),
            (3600.0, Some(3600.0), Some(AgeClock::Coordinator), true)
        );
        // A LogAppendTime topic: the leader wrote the time of the record at the LSO.
        let mut clock = StuckClock::default();
        let derived = derive(
            held_an_hour(hour_ago_ms, true, CoordinatorView::NotFound),
            &mut clock,
            t0,
            wall0,
            Duration::from_secs(60),
        );
        assert_eq!(
            held_state(&derived),
            (3600.0, Some(3600.0), Some(AgeClock::LogAppendTime), true)
        );
    }

    #[test]
    fn the_exporter_forgets_transactions_that_ended() {
        let topic: Arc<str> = Arc::from("orders");
        let t0 = Instant::now();
        let mut clock = StuckClock::default();
        let open = [raw_transaction("Ongoing", 4001, 3, true)];
        assert_eq!(clock.watch(&topic, 0, &open, t0), vec![None]);
        let later = t0 + Duration::from_secs(15);
        assert_eq!(
            clock.watch(&topic, 0, &open, later),
            vec![Some(Duration::from_secs(15))]
        );
        // It ended; a new one of the same producer opens at another offset.
        clock.watch(&topic, 0, &[], later);
        let mut next = open[0].clone();
        next.start_offset = 990;
        assert_eq!(clock.watch(&topic, 0, &[next], later), vec![None]);
        clock.retain(|_, _| false);
        assert_eq!(clock.watch(&topic, 0, &open, later), vec![None]);
    }
}
