//! The derivation's plain types: what a cycle makes of one cluster's partitions and
//! groups ([`Derived`]), per partition ([`PartitionState`]), per open transaction
//! ([`OpenTransaction`]) and per group and partition ([`GroupState`],
//! [`GroupPartitionState`]). The leaf of the derivation: every other file of
//! [`crate::derive`] imports these, and this imports none of them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::kafka::{CoordinatorView, RawTransaction, Stage, StageFailure};

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
    /// own ([`AgeClock`]); `None` when none of them dates it. A timestamp the producer
    /// wrote (a record's CreateTime, DescribeProducers' last timestamp; for Kafka Streams,
    /// Connect or Flink event time, often hours old) dates only a transaction that no
    /// coordinator knows and that was open before the exporter first looked (see
    /// [`OpenTransaction::derive`]).
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

/// The clock a transaction's age is read from: a broker's, the exporter's own, or, for a
/// transaction no coordinator knows (KIP-664's hanging one), the producer's.
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
    /// The CreateTime of the transaction's first record in the partition (the batch at
    /// its start offset): the producer's clock. Off by the producer's clock skew, and by
    /// hours where the producer writes event time.
    CreateTime,
    /// DescribeProducers' `lastTimestamp`: the largest timestamp of the producer's last
    /// write to the partition, by the producer's clock (the broker's on a LogAppendTime
    /// topic). A lower bound of the transaction's age, as Kafka's own `kafka-transactions.sh
    /// find-hanging` reads it; used where its first record was not read.
    LastTimestamp,
}

impl AgeClock {
    pub fn as_str(self) -> &'static str {
        match self {
            AgeClock::Coordinator => "coordinator",
            AgeClock::LogAppendTime => "log_append_time",
            AgeClock::FirstSight => "first_sight",
            AgeClock::CreateTime => "create_time",
            AgeClock::LastTimestamp => "last_timestamp",
        }
    }
}

/// What dates an open transaction besides its coordinator: the log (the broker's clock,
/// or the producer's), and the exporter's own observation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Witness {
    /// LogAppendTime (ms since the epoch) of the transaction's first record in the
    /// partition, when the exporter read it and the topic uses LogAppendTime.
    pub append_time_ms: Option<i64>,
    /// CreateTime (ms since the epoch) of the transaction's first record in the
    /// partition, when the exporter read it and the topic uses CreateTime.
    pub create_time_ms: Option<i64>,
    /// How long the exporter has seen the transaction open; `None` at first sight.
    pub watched_for: Option<Duration>,
    /// It was open at the exporter's first listing of the partition: the exporter did
    /// not see it begin, so nothing it saw bounds the age
    /// ([`crate::derive::StuckClock::watch`]).
    pub opened_unseen: bool,
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
    /// unknown, and an unknown age never makes a transaction hanging.
    ///
    /// One case has no broker clock and must survive the exporter's restarts: KIP-664's
    /// hanging transaction, which no coordinator knows any more, on a CreateTime topic.
    /// When every coordinator answered and none lists the producer id, and the exporter
    /// did not see the transaction begin (`opened_unseen`: open at its first look, after
    /// a start or a hand-over), the producer's own timestamps date it: the CreateTime of
    /// its first record in the partition, else DescribeProducers' last timestamp (its last
    /// write, a lower bound), never in the future, and the older of that and the
    /// exporter's first sight. Not for a coordinator that knows the id and disagrees:
    /// with transactions version 2 a busy producer's next transaction (its epoch bumped)
    /// is often described while the leader still lists the one just committed, and event
    /// time would make that one hours old. Not for a transaction the exporter saw begin:
    /// its own clock bounds that one, event time or not.
    ///
    /// As Kafka's own `kafka-transactions.sh find-hanging` does, a transaction is hanging
    /// only once it is older than the longest transaction the broker allows
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
                // KIP-664's case (above): the producer's clock, its first write else its
                // last.
                let first_write = witness
                    .create_time_ms
                    .map(|at| (since(at), AgeClock::CreateTime));
                let last_write = (raw.last_timestamp_ms > 0)
                    .then(|| (since(raw.last_timestamp_ms), AgeClock::LastTimestamp));
                let written = first_write.or(last_write).filter(|_| {
                    appended.is_none()
                        && raw.coordinator == CoordinatorView::NotFound
                        && witness.opened_unseen
                });
                let watched = witness.watched_for.map(|d| {
                    let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
                    (ms, AgeClock::FirstSight)
                });
                match appended
                    .into_iter()
                    .chain(written)
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
    /// A transaction pins the LSO ([`crate::derive::StuckClock::pinned`]).
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
    /// The worst status of its partitions ([`crate::derive::progress`]); `None` for share groups
    /// and while no partition's lag is known.
    pub status: Option<GroupStatus>,
    /// Its members and epoch as described in this cycle; `None` when it could not be.
    pub detail: Option<crate::kafka::GroupDetail>,
    /// Rebalances counted over the cycles seen ([`crate::derive::rebalance`]); `None`
    /// until the group was first described.
    pub rebalance: Option<Rebalances>,
    /// Per topic (sorted), how fast it consumes and closes its lag
    /// ([`crate::derive::rates`]); empty for share groups.
    pub rates: Vec<TopicRate>,
    /// The isolation level it reads with, as far as its offsets have shown it, and the
    /// records of aborted transactions it read ([`crate::derive::isolation`]).
    pub ruler: Ruler,
}

/// The isolation level a group reads with, from what its offsets showed over the cycles
/// ([`crate::derive::isolation`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub enum RulerLevel {
    /// Nothing has shown it yet.
    #[default]
    Unknown,
    ReadCommitted,
    ReadUncommitted,
    /// Its members disagree: some read uncommitted, some committed.
    Mixed,
}

impl RulerLevel {
    /// Every level: the values of the `isolation` label.
    pub const ALL: [RulerLevel; 4] = [
        RulerLevel::ReadCommitted,
        RulerLevel::ReadUncommitted,
        RulerLevel::Mixed,
        RulerLevel::Unknown,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RulerLevel::Unknown => "unknown",
            RulerLevel::ReadCommitted => "read_committed",
            RulerLevel::ReadUncommitted => "read_uncommitted",
            RulerLevel::Mixed => "mixed",
        }
    }

    /// Records past the LSO reach it: it reads uncommitted, wholly or in part.
    pub fn reads_uncommitted(self) -> bool {
        matches!(self, RulerLevel::ReadUncommitted | RulerLevel::Mixed)
    }
}

impl From<crate::kafka::Isolation> for RulerLevel {
    fn from(isolation: crate::kafka::Isolation) -> RulerLevel {
        match isolation {
            crate::kafka::Isolation::ReadCommitted => RulerLevel::ReadCommitted,
            crate::kafka::Isolation::ReadUncommitted => RulerLevel::ReadUncommitted,
        }
    }
}

/// A member of a group as it was when something about it was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenMember {
    pub member_id: String,
    pub client_id: String,
    pub client_host: String,
    pub instance_id: Option<String>,
}

impl SeenMember {
    pub fn of(member: &crate::kafka::RawMember) -> SeenMember {
        SeenMember {
            member_id: member.member_id.clone(),
            client_id: member.client_id.clone(),
            client_host: member.client_host.clone(),
            instance_id: member.instance_id.clone(),
        }
    }
}

/// What showed a group's (or one member's) isolation level, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// read_uncommitted: its committed offset advanced past the LSO while it had live
    /// members (proof). read_committed: it stood at a pinned LSO with records above it,
    /// with live members, for [`crate::derive::isolation::HOLD_FOR`] (an inference).
    pub isolation: crate::kafka::Isolation,
    pub topic: Arc<str>,
    pub partition: i32,
    pub committed_offset: i64,
    pub last_stable_offset: i64,
    pub high_watermark: i64,
    /// When it was last seen.
    pub seen_at: SystemTime,
    /// The member that owned the partition; `None` where the owner was not known.
    pub member: Option<SeenMember>,
}

/// Records of aborted transactions a group read on one topic, over the cycles the
/// exporter watched it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AbortedRead {
    pub records: u64,
    pub transactions: u64,
}

/// How a count relates to the truth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Every record was seen.
    Exact,
    /// Offsets not read count as records: the truth is at most this.
    AtMost,
    /// Only what was read counts: the truth is at least this.
    AtLeast,
}

impl Bound {
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Exact => "exact",
            Bound::AtMost => "at_most",
            Bound::AtLeast => "at_least",
        }
    }
}

/// One aborted transaction a group read records of: what its downstream must compensate.
#[derive(Debug, Clone, PartialEq)]
pub struct AbortedTransactionRead {
    pub topic: Arc<str>,
    pub partition: i32,
    /// Empty when the exporter never saw the transaction open (nor its id).
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Offsets of its first and last record in the partition.
    pub first_offset: i64,
    pub last_offset: i64,
    /// Its records the group read (its committed offset passed them).
    pub records: i64,
    /// How `records` relates to the truth.
    pub bound: Bound,
    /// When its abort marker was written (the marker's timestamp).
    pub aborted_at: SystemTime,
    /// The member that owned the partition when the group passed them, where known.
    pub member: Option<SeenMember>,
}

/// A group's isolation level and what it read of aborted transactions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ruler {
    pub level: RulerLevel,
    /// The level of the evidence no member is named in (the assignment was not known):
    /// what a member that has not shown its own level is taken to read with.
    pub unattributed: RulerLevel,
    /// What showed it, newest first: one per isolation level and member at most.
    pub evidence: Vec<Evidence>,
    /// Per member of the group's description, by index: what it is shown to read with.
    pub members: Vec<Option<crate::kafka::Isolation>>,
    /// Per topic (sorted), what it read of aborted transactions: every topic it has
    /// offsets on while it reads uncommitted, and any where it read some.
    pub aborted: Vec<(Arc<str>, AbortedRead)>,
    /// The latest aborted transactions it read, newest first.
    pub aborted_transactions: Vec<AbortedTransactionRead>,
}

impl Ruler {
    /// What the member at `index` of the group's description reads with, where shown.
    pub fn member(&self, index: usize) -> Option<crate::kafka::Isolation> {
        self.members.get(index).copied().flatten()
    }

    /// See [`GroupState::reads_uncommitted_at`].
    pub fn reads_uncommitted_at(&self, offset: &GroupPartitionState) -> bool {
        // The owner's own evidence first: a read_committed member can stand past the LSO
        // where an earlier owner (reading uncommitted) committed, waiting there.
        let own = match offset.owner {
            Owner::Member(i) => self.member(i),
            _ => None,
        };
        if let Some(isolation) = own {
            return isolation == crate::kafka::Isolation::ReadUncommitted;
        }
        if offset.lag.is_some_and(|l| l.committed_beyond_lso > 0) {
            return true;
        }
        match offset.owner {
            // A member that has shown no level of its own (a new member: a redeploy may
            // have changed the setting) is judged by the group's evidence that names no
            // member, never by members that have left.
            Owner::Member(_) => self.unattributed == RulerLevel::ReadUncommitted,
            _ => self.level == RulerLevel::ReadUncommitted,
        }
    }
}

/// How fast a group reads one topic, from the exporter's samples over the rate window.
#[derive(Debug, Clone, PartialEq)]
pub struct TopicRate {
    pub topic: Arc<str>,
    /// Its committed offsets' sum over the topic's partitions, per second; `None` until
    /// two samples half a window apart exist.
    pub consume_rate: Option<f64>,
    /// The sum of the bound it reads up to (LSO, or HW for a group that committed past
    /// the LSO), per second.
    pub produce_rate: Option<f64>,
    pub catchup: Catchup,
}

/// Consume and produce rates this close (a share of the consume rate) are one pace.
pub const KEEPS_UP_WITHIN: f64 = 0.05;
/// A standing lag read in fewer seconds than this, at the group's own pace, is batching.
pub const KEEPS_UP_SECONDS: f64 = 60.0;

/// When a group will have caught up on a topic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Catchup {
    /// No rates yet (fewer than two samples half a window apart).
    Unknown,
    /// Nothing to read.
    CaughtUp,
    /// It reads as fast as records arrive (within [`KEEPS_UP_WITHIN`]) with a standing lag
    /// it reads in under [`KEEPS_UP_SECONDS`] at its own pace: a consumer that commits in
    /// batches, current within them, not one catching up.
    KeepsUp,
    /// Seconds until its lag is 0 at the current rates: lag ÷ (consume − produce).
    Seconds(f64),
    /// It consumes no faster than records arrive: the lag does not close.
    NotClosing,
    /// A read_committed group that has read everything up to the LSOs, one of which an
    /// open transaction pins: it waits for the transaction, however fast it reads.
    WaitsForTransaction,
}

impl Catchup {
    pub fn as_str(self) -> &'static str {
        match self {
            Catchup::Unknown => "unknown",
            Catchup::CaughtUp => "caught_up",
            Catchup::KeepsUp => "keeps_up",
            Catchup::Seconds(_) => "closing",
            Catchup::NotClosing => "not_closing",
            Catchup::WaitsForTransaction => "waits_for_transaction",
        }
    }
}

/// A group's rebalances over the cycles the exporter saw ([`crate::derive::rebalance`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Rebalances {
    /// Rebalances counted since the exporter first described the group: epoch (or
    /// generation) steps where the group has one, else rebalances observed.
    pub total: u64,
    /// Members that joined and left, counted by member id between two descriptions.
    pub joined: u64,
    pub left: u64,
    /// When the last rebalance counted was first seen; `None` when none was.
    pub last_at: Option<SystemTime>,
    /// The group is rebalancing now (its state, or a KIP-848 member not yet at its target
    /// assignment).
    pub rebalancing: bool,
    /// KIP-848: partitions of the target assignment their member does not own yet;
    /// `None` for other protocols.
    pub unreconciled: Option<u64>,
}

/// Who owns a group's partition, from the group's description.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Owner {
    /// Not known: the group could not be described, or its assignment cannot be read
    /// (a classic group of another protocol than `consumer` or one that is rebalancing,
    /// a streams group without its topology).
    #[default]
    Unknown,
    /// No member owns it.
    Nobody,
    /// The member at this index of the group's [`crate::kafka::GroupDetail::members`].
    Member(usize),
    /// Several members read it at once (a share group's partitions): how many.
    Shared(usize),
    /// KIP-848 and streams groups: a member's target assignment gives it, and no member's
    /// current assignment names it yet: on its way to that member (released by the member
    /// that had it, taken at the new one's next heartbeat). Not left behind.
    Assigning,
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
    /// read; 0 when it has nothing to read ([`crate::derive::progress`]).
    pub commit_stall_seconds: Option<f64>,
    /// committed - log start offset, at least 0: offsets retention may delete before
    /// the group's next unread record goes.
    pub retention_margin: Option<i64>,
    /// The topic's retention less the age of the first record the group has not
    /// consumed: a lower bound of the seconds before time retention may delete it.
    pub retention_margin_seconds: Option<f64>,
    /// max(0, log start - committed): records deleted before the group consumed them.
    pub lost_records: Option<i64>,
    /// The member that owns the partition now.
    pub owner: Owner,
    /// No member has owned the partition and its committed offset has not moved for the
    /// cluster's `groups.abandon_after` ([`crate::derive::progress`]).
    pub abandoned: bool,
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
    /// Every kind, for counters that exist at 0 from the start.
    pub const ALL: [Anomaly; 2] = [
        Anomaly::LsoAboveHighWatermark,
        Anomaly::CommittedBeyondHighWatermark,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Anomaly::LsoAboveHighWatermark => "lso_above_high_watermark",
            Anomaly::CommittedBeyondHighWatermark => "committed_beyond_high_watermark",
        }
    }
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
    /// Whether the group reads uncommitted on this partition: it committed past the LSO,
    /// or the member that owns the partition is shown to read uncommitted, or (where the
    /// owner's own level is not known) the whole group is
    /// ([`crate::derive::isolation`]).
    pub fn reads_uncommitted_at(&self, offset: &GroupPartitionState) -> bool {
        self.ruler.reads_uncommitted_at(offset)
    }

    /// A share group's lag on one partition: against the LSO when it reads committed,
    /// the HW otherwise; `None` for other groups or an unknown isolation level. Derived
    /// from the broker's own lag where it reports one ([`crate::derive::share_lag_from_broker`]), else
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
    /// derived from the broker's ([`crate::derive::share_lag_from_broker`]) and reads 0 as well; it also
    /// reads 0, and the group waits, when all that is left below the LSO is markers or
    /// aborted records.
    ///
    /// A group shown to read uncommitted there ([`GroupState::reads_uncommitted_at`]) is
    /// never held: records past the LSO reach it. A group without live members is held as
    /// any other: jobs that assign partitions themselves (Flink, Spark) commit without ever
    /// joining, and a read_committed consumer that is down could read nothing more either
    /// until the transaction ends; then its commit stall starts at once, dated by the first
    /// record it has left.
    pub fn waits_at_lso(&self, offset: &GroupPartitionState, partition: &PartitionState) -> bool {
        let lag_says = offset.lag.is_some_and(|l| l.waits_at_lso());
        if self.group_type != "share" {
            // Nothing left below the LSO (at it, or past it where an earlier owner
            // committed), and not reading past it.
            let nothing_below = offset.lag.is_some_and(|l| l.lso_lag == 0);
            return nothing_below && !self.reads_uncommitted_at(offset);
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
    /// How far `groups` is the cluster's whole list ([`crate::kafka::RawSample::group_listing`]).
    pub group_listing: crate::kafka::GroupListing,
    /// Brokers the cycle's metadata listed: id and address (host:port).
    pub brokers: Vec<(i32, String)>,
    pub anomalies: Vec<Anomaly>,
    pub failures: Vec<(Stage, StageFailure)>,
    /// The topics' `retention.ms` (-1: unlimited), where it could be read.
    pub retention_ms: HashMap<Arc<str>, i64>,
    /// Per topic, the cost of exactly-once counted so far ([`crate::kafka::RawSample::eos_cost`]).
    pub eos_cost: std::collections::BTreeMap<Arc<str>, crate::kafka::records::EosCost>,
    /// The brokers' clock against the exporter's ([`crate::kafka::RawSample::clock_skew`]).
    pub clock_skew: Option<crate::kafka::ClockSkew>,
    /// Topics expected and not seen ([`crate::kafka::RawSample::unseen_topics`]).
    pub unseen_topics: Vec<crate::kafka::visibility::UnseenTopic>,
}

/// A group's status, worst of its partitions (the order of [`GroupStatus::ALL`] from the
/// last: stopped is the worst).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GroupStatus {
    /// Nothing to read, or reading and committing with lag that comes and goes.
    Ok,
    /// Every topic it has offsets on is owned by none of its members and its offsets have not moved
    /// for `groups.abandon_after`: offsets left behind, not a consumer that stopped.
    Abandoned,
    /// The group is rebalancing (its state says so); any other status wins.
    Rebalancing,
    /// Committing, but its lag has grown without ever shrinking for `stall_after`: it
    /// does not keep up.
    Lagging,
    /// Nothing to read below the LSO of a partition a transaction pins (as on `/`).
    Blocked,
    /// The committed offset went back within the last `stall_after` (an offset reset).
    Rewinding,
    /// Something to read, no commit for `stall_after`, lag not growing.
    Stalled,
    /// Something to read, no commit for `stall_after`, and the lag grew meanwhile.
    Stopped,
}

impl GroupStatus {
    /// Every status: one series each per group.
    pub const ALL: [GroupStatus; 8] = [
        GroupStatus::Ok,
        GroupStatus::Abandoned,
        GroupStatus::Rebalancing,
        GroupStatus::Lagging,
        GroupStatus::Blocked,
        GroupStatus::Rewinding,
        GroupStatus::Stalled,
        GroupStatus::Stopped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            GroupStatus::Ok => "ok",
            GroupStatus::Abandoned => "abandoned",
            GroupStatus::Rebalancing => "rebalancing",
            GroupStatus::Lagging => "lagging",
            GroupStatus::Blocked => "blocked",
            GroupStatus::Rewinding => "rewinding",
            GroupStatus::Stalled => "stalled",
            GroupStatus::Stopped => "stopped",
        }
    }
}
