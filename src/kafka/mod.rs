//! Everything that talks to Kafka lives here, behind the [`Sampler`] trait.
//!
//! - [`cycle`]: one asynchronous sampling cycle ([`KafkaSampler`]), in the order SPEC §2
//!   requires; librdkafka (metadata, ListOffsets by isolation level) runs on blocking
//!   threads where it is called ([`native`] holds the librdkafka calls the crate lacks).
//! - [`ask`]: what a cycle asks of the brokers through the exporter's own client, each
//!   request planned per broker or coordinator: committed offsets, groups by protocol,
//!   open transactions, record-batch reads.
//! - [`wire`]: the plumbing of the exporter's own client: connections, the pool, TLS,
//!   SASL/SCRAM, version negotiation, and the messages it encodes itself.
//! - [`records`]: record-batch headers and what they say about lag (pure code).
//!
//! - [`coordination`]: replicas that share the work through a group of Kafka's group
//!   protocol (`[ha]`), and what this replica may serve ([`coordination::Ownership`]).
//! - [`capability`]: one mechanism for what the own client may turn out not to be able
//!   to do on a cluster (off for a while with the reason, then tried again).
//! - [`features`]: what the exporter can see of a cluster, feature by feature, and which
//!   request each sends with which permission.
//! - [`visibility`]: the topics it expects to sample and does not see, and why.
//!
//! A sampler returns a [`RawSample`]: the offsets exactly as the broker reported them,
//! with failures recorded per stage. Turning that into metric values (gaps, lags, the
//! stuck clock) is pure code in [`crate::derive`], tested without a broker. This module
//! imports only [`crate::config`]; the derivation imports its plain types (this file),
//! the scheduler its [`Sampler`].

mod ask;
pub mod capability;
pub mod coordination;
mod cycle;
pub mod features;
mod native;
pub mod records;
pub mod visibility;
pub mod wire;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

pub use ask::forensics::DEFAULT_MAX_TIMEOUT_MS;
pub use cycle::{check_client, KafkaSampler};
/// For tests/offsets_fallback.rs, which drives librdkafka's ListConsumerGroupOffsets the
/// way a cycle does; not an API.
#[doc(hidden)]
pub use native::list_consumer_group_offsets;
pub use native::{CommittedOffset, GroupOffsetsError};

/// Takes one sample of a cluster: one asynchronous cycle. Calls into librdkafka, which
/// block, run on the runtime's blocking threads where they are made.
pub trait Sampler: Send + Sync + 'static {
    /// Samples everything once; every request is bounded by `deadline`.
    fn sample(&self, deadline: Instant) -> futures_util::future::BoxFuture<'_, RawSample>;
}

/// The coordinator states of an open transaction (ListTransactions' state filter).
pub const OPEN_TRANSACTION_STATES: [&str; 4] = [
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "PrepareEpochFence",
];

/// The steps of a sampling cycle, in order; also the `stage` label of
/// `kafka_lso_exporter_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    Metadata,
    LogStartOffset,
    ListGroups,
    DescribeGroups,
    GroupOffsets,
    ShareGroupOffsets,
    LastStableOffset,
    HighWatermark,
    DescribeProducers,
    DescribeTransactions,
    ListTransactions,
    ReadRecords,
    TopicConfigs,
}

impl Stage {
    /// Every stage: each cluster's `errors_total` shows all of them from the start.
    pub const ALL: [Stage; 13] = [
        Stage::Metadata,
        Stage::LogStartOffset,
        Stage::ListGroups,
        Stage::DescribeGroups,
        Stage::GroupOffsets,
        Stage::ShareGroupOffsets,
        Stage::LastStableOffset,
        Stage::HighWatermark,
        Stage::DescribeProducers,
        Stage::DescribeTransactions,
        Stage::ListTransactions,
        Stage::ReadRecords,
        Stage::TopicConfigs,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Metadata => "metadata",
            Stage::LogStartOffset => "log_start_offset",
            Stage::ListGroups => "list_groups",
            Stage::GroupOffsets => "group_offsets",
            Stage::LastStableOffset => "last_stable_offset",
            Stage::HighWatermark => "high_watermark",
            Stage::DescribeProducers => "describe_producers",
            Stage::DescribeTransactions => "describe_transactions",
            Stage::ListTransactions => "list_transactions",
            Stage::ReadRecords => "read_records",
            Stage::DescribeGroups => "describe_groups",
            Stage::ShareGroupOffsets => "share_group_offsets",
            Stage::TopicConfigs => "topic_configs",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A partition's place in the request plan: its index in the sample and its leader.
struct Planned {
    index: usize,
    leader: i32,
}

/// A partition as the broker reported it in one cycle. `None` means the request for that
/// value failed in this cycle (the failure is in [`RawSample::failures`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawPartition {
    pub topic: Arc<str>,
    pub partition: i32,
    pub log_start_offset: Option<i64>,
    pub last_stable_offset: Option<i64>,
    pub high_watermark: Option<i64>,
    /// The open transactions: `Some(empty)` when HW == LSO (none can be open), `None`
    /// when transaction forensics is off or its requests failed in this cycle.
    pub open_transactions: Option<Vec<RawTransaction>>,
    /// What was read of the partition's log (record-batch headers); `None` when record
    /// reads are off for the cluster.
    pub log: Option<PartitionLog>,
    /// Leader and replicas as the cycle's metadata names them.
    pub replication: Option<Replication>,
}

/// A partition's leader and replicas as the metadata names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replication {
    /// The leader's broker id; -1 when the partition has none.
    pub leader: i32,
    /// The first replica, which leads when leadership is balanced; -1 without replicas.
    pub preferred_leader: i32,
    pub replicas: u32,
    pub in_sync_replicas: u32,
}

/// The parts of one partition's log the exporter has read ([`reads`]): the window below
/// the HW, and short reads at single offsets further down.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionLog {
    /// Read continuously from some offset up to (at most) the HW.
    pub window: Option<Arc<records::LogExtent>>,
    /// Short reads at committed offsets outside the window (and at the LSO): read_committed
    /// below the LSO, read_uncommitted at or above it.
    pub positions: Vec<(i64, Arc<records::LogExtent>)>,
}

impl PartitionLog {
    /// The extent that starts no later than `offset`: the window if it covers it, else the
    /// read made at exactly that offset.
    pub fn extent_at(&self, offset: i64) -> Option<&records::LogExtent> {
        self.window
            .as_deref()
            .filter(|w| w.from() <= offset)
            .or_else(|| {
                self.positions
                    .iter()
                    .find(|(at, _)| *at == offset)
                    .map(|(_, extent)| &**extent)
            })
    }
}

/// An open transaction in one partition as its leader reported it (DescribeProducers),
/// with what its coordinator said about it (ListTransactions, DescribeTransactions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawTransaction {
    pub producer_id: i64,
    pub producer_epoch: i32,
    /// The offset of the transaction's first record in this partition.
    pub start_offset: i64,
    /// DescribeProducers' `lastTimestamp`: the largest timestamp of the producer's last
    /// batch to this partition, as the producer wrote it (CreateTime; event time for
    /// Streams, Connect or Flink). Dates only a transaction no coordinator knows whose
    /// first record was not read ([`crate::derive::AgeClock::LastTimestamp`]).
    pub last_timestamp_ms: i64,
    pub coordinator: CoordinatorView,
}

/// What the transaction coordinators know of a producer id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoordinatorView {
    /// The lookup failed in this cycle.
    Unknown,
    /// No coordinator lists a transactional id for this producer id.
    NotFound,
    /// No coordinator listed it while this broker was loading transaction-log partitions
    /// (COORDINATOR_LOAD_IN_PROGRESS): a coordinator moved there and has not finished
    /// reading `__transaction_state`; until it has, open transactions cannot end.
    Loading {
        broker: i32,
    },
    /// No coordinator listed it while some broker could not be asked (down, unreachable,
    /// or answering COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR): its coordinator may be
    /// the broker that did not answer.
    Unavailable,
    Found(CoordinatorTransaction),
}

/// DescribeTransactions' answer for one transactional id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CoordinatorTransaction {
    pub transactional_id: String,
    /// The broker that coordinates it (answered DescribeTransactions).
    pub coordinator: i32,
    /// Ongoing, PrepareCommit, CompleteAbort, Empty, ...
    pub state: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Coordinator time the current transaction started (-1 when none is open).
    pub start_time_ms: i64,
    pub timeout_ms: i32,
    /// The coordinator lists this partition in the current transaction.
    pub includes_partition: bool,
}

/// A consumer group as listed by the cluster, with its committed offsets, or `None` when
/// fetching them failed in this cycle.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawGroup {
    pub name: String,
    /// classic, consumer (KIP-848), share (KIP-932) or streams (KIP-1071), as ListGroups
    /// names it; classic where the brokers do not name types.
    pub group_type: String,
    /// The protocol type the group's members use (`consumer`, `connect`, ...), empty
    /// when the broker reports none.
    pub protocol: String,
    /// The state in the group's own protocol's names.
    pub state: String,
    /// Live members; `None` when the group could not be described in this cycle.
    pub members: Option<usize>,
    /// What a share group's consumers may read (`share.isolation.level`); `None` for
    /// other groups (their consumers choose), or when it could not be read.
    pub isolation: Option<Isolation>,
    /// A share group's lag per share-partition as its broker computes it (KIP-1226):
    /// records not yet acknowledged, also those acknowledged past the start offset.
    pub broker_lags: Vec<BrokerLag>,
    pub committed: Option<Vec<CommittedOffset>>,
    /// The broker that listed the group (its coordinator), `host:port`; `None` where the
    /// cluster's groups were listed as a whole (librdkafka's classic list).
    pub coordinator: Option<String>,
    /// Its members and generation, as its describe answer gave them; `None` when the
    /// group could not be described in this cycle.
    pub detail: Option<GroupDetail>,
}

/// What a group's describe answer says of its members and its generation.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupDetail {
    /// The group's epoch (KIP-848, share and streams groups: it goes up by one at every
    /// change of members, subscriptions or topology) or, for a classic group, its
    /// generation where the members' subscriptions carry the generation they were in
    /// when they last joined (KIP-792; the group's is one more than the largest). `None`
    /// where neither is known.
    pub epoch: Option<i64>,
    /// KIP-848 and share groups: the epoch of the target assignment; the group has
    /// reconciled when every member's epoch has reached it.
    pub assignment_epoch: Option<i64>,
    pub members: Vec<RawMember>,
}

/// Partitions per topic, topics sorted.
pub type TopicPartitions = Vec<(String, Vec<i32>)>;

/// One member of a group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawMember {
    pub member_id: String,
    /// Static membership (`group.instance.id`), when set.
    pub instance_id: Option<String>,
    pub client_id: String,
    /// The address the member connected from, as the coordinator saw it (`/10.0.0.7`).
    pub client_host: String,
    /// The partitions it owns, per topic; `None` where the assignment cannot be read (a
    /// classic group whose protocol type is not `consumer`, a streams group's tasks).
    pub assigned: Option<TopicPartitions>,
    /// KIP-848: the partitions the group's assignor wants it to own (it has reconciled
    /// when they equal `assigned`); `None` for other protocols.
    pub target: Option<TopicPartitions>,
    /// KIP-848, share and streams: the member's epoch.
    pub member_epoch: Option<i32>,
}

/// The brokers' clock against the exporter's ([`ask::clock`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockSkew {
    /// The broker's time minus the exporter's: positive when the broker is ahead.
    pub seconds: f64,
    /// Half the round trip of the measurement: the skew is within this of the truth.
    pub uncertainty_seconds: f64,
}

/// How much of the cluster's group list a cycle saw: a group missing from it is gone only
/// where the broker that coordinated it answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum GroupListing {
    /// No list (the cycle did not reach the cluster, or every broker failed ListGroups).
    #[default]
    Unknown,
    /// Every broker listed its groups.
    Complete,
    /// These brokers (`host:port`) failed ListGroups; the others listed theirs.
    Partial(Vec<String>),
}

impl GroupListing {
    /// A group last listed by `coordinator` and missing now is gone from the cluster (or
    /// the filters), not merely unlisted this cycle.
    pub fn gone(&self, coordinator: Option<&str>) -> bool {
        match self {
            GroupListing::Unknown => false,
            GroupListing::Complete => true,
            GroupListing::Partial(failed) => {
                coordinator.is_some_and(|c| !failed.iter().any(|f| f == c))
            }
        }
    }
}

/// The lag a broker reports for one share-partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerLag {
    pub topic: String,
    pub partition: i32,
    pub lag: i64,
}

/// A consumer's isolation level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    ReadUncommitted,
    ReadCommitted,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::ReadUncommitted => "read_uncommitted",
            Isolation::ReadCommitted => "read_committed",
        }
    }
}

/// How often one stage failed in a cycle, and the first error seen, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageFailure {
    pub count: u64,
    pub first_error: String,
    /// Of `count`, the refusals: by an ACL, for an API a broker lacks, of the credentials
    /// (the rest are passing failures: timeouts, brokers down).
    pub refused: Refusals,
    /// The first error of the brokers refusing the credentials, when one did (it need not
    /// be the stage's first error; see [`features::refused_by_brokers`]).
    pub refused_credentials: Option<String>,
}

/// Failures counted by the cause that a configuration or a grant must change, apart from
/// those the next cycle may not meet again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refusals {
    pub denied: u64,
    pub unsupported: u64,
    pub authentication: u64,
}

impl Refusals {
    /// The `cause` label of each count.
    pub fn by_cause(self) -> [(&'static str, u64); 3] {
        [
            ("denied", self.denied),
            ("unsupported", self.unsupported),
            ("authentication", self.authentication),
        ]
    }

    /// Every `cause` label value.
    pub const CAUSES: [&'static str; 3] = ["denied", "unsupported", "authentication"];
}

/// Everything one cycle learned about a cluster.
#[derive(Debug, Clone, Default)]
pub struct RawSample {
    /// The cluster answered the metadata request: `kafka_lso_exporter_up`.
    pub reached: bool,
    /// Partitions of the selected topics, sorted by topic and partition.
    pub partitions: Vec<RawPartition>,
    /// Selected consumer groups, sorted by name. For a share group, `committed` holds its
    /// share-partition start offsets.
    pub groups: Vec<RawGroup>,
    /// How far `groups` is the cluster's whole list.
    pub group_listing: GroupListing,
    /// The brokers' clock against the exporter's, when measured recently.
    pub clock_skew: Option<ClockSkew>,
    pub failures: BTreeMap<Stage, StageFailure>,
    /// The brokers' `transaction.max.timeout.ms`, when forensics could read it.
    pub transaction_max_timeout_ms: Option<i64>,
    /// Brokers the cycle's metadata lists: id and address (host:port).
    pub brokers: Vec<(i32, String)>,
    /// The sampled topics' `retention.ms` (-1: unlimited), where it could be read.
    pub retention_ms: HashMap<Arc<str>, i64>,
    /// Per topic, the cost of exactly-once in the windows read so far (over the life of
    /// the process): topics of which no window was read are absent.
    pub eos_cost: BTreeMap<Arc<str>, records::EosCost>,
    /// Transactions whose abort marker the windows read in this cycle, by topic and
    /// partition, in the order they were read.
    pub aborted: Vec<(Arc<str>, i32, records::AbortedTransaction)>,
    /// Every open transaction the coordinators list; `None` when the inventory is off
    /// for the cluster or could not be taken in this cycle.
    pub transaction_list: Option<TransactionList>,
    /// What forensics' DescribeTransactions answered in this cycle, with each
    /// transaction's partitions: the inventory does not ask for them again.
    pub described_transactions: Vec<ListedTransaction>,
    /// What the cycle knows of a feature better than its failures and data tell
    /// ([`crate::derive::features`]): turned off by the configuration, a capability off
    /// for a while, a refusal answered per resource.
    pub features: BTreeMap<features::Feature, features::FeatureState>,
    /// Topics the exporter expected and the metadata left out, sorted by name, with why
    /// ([`visibility`]): refused by an ACL, deleted, or not confirmed either way.
    pub unseen_topics: Vec<visibility::UnseenTopic>,
}

/// The cluster's open transactions as the coordinators list them (ListTransactions on
/// every broker), each described by its coordinator (DescribeTransactions).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransactionList {
    /// Every broker answered ListTransactions: the counts are the cluster's.
    pub complete: bool,
    /// Some broker lacks ListTransactions v1 (KIP-994, Kafka 3.8): its transactions were
    /// listed without the duration filter and filtered by the exporter on their start time.
    pub filtered_here: bool,
    /// Some broker advertises InitProducerId v6 (KIP-939): producers can open two-phase
    /// transactions, which the coordinator never times out.
    pub two_phase_commit: bool,
    /// Open transactions listed at least `transaction_list_min_age` old.
    pub open: Vec<ListedTransaction>,
    /// What the coordinators said of transactional ids the exporter watched in the
    /// previous cycle and which are no longer listed open (how they ended).
    pub followed: Vec<CoordinatorTransaction>,
}

/// One listed open transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTransaction {
    /// DescribeTransactions' answer; where describing it failed, what ListTransactions
    /// said (id, producer id, state, coordinator) with start time and timeout -1.
    pub transaction: CoordinatorTransaction,
    /// The partitions of the current transaction (empty when not described).
    pub partitions: Vec<(String, i32)>,
    /// DescribeTransactions answered for it.
    pub described: bool,
}

/// Failures of one stage gathered over several answers, by cause: each cause's count and
/// first message, so that a denial among timeouts counts as one refusal and the timeouts
/// as failures ([`RawSample::fail_all`]).
#[derive(Debug, Default)]
pub struct Failures(Vec<(features::Cause, u64, String)>);

impl Failures {
    /// `count` failures with the error `error`, its words telling the cause (where a name
    /// comes before the error, a topic's that may say anything, use [`Failures::add_as`]).
    pub fn add(&mut self, count: u64, error: impl Into<String>) {
        let error = error.into();
        let cause = features::cause_of(&error);
        self.add_as(cause, count, || error);
    }

    /// Adds what `other` gathered.
    pub fn merge(&mut self, other: Failures) {
        for (cause, count, message) in other.0 {
            self.add_as(cause, count, || message);
        }
    }

    /// `count` failures of `cause`; `message` is asked for only if it is the first.
    pub fn add_as(&mut self, cause: features::Cause, count: u64, message: impl FnOnce() -> String) {
        match self.0.iter_mut().find(|(c, _, _)| *c == cause) {
            Some((_, n, _)) => *n += count,
            None => self.0.push((cause, count, message())),
        }
    }
}

impl RawSample {
    /// Records `count` failures of `stage` that share one cause (one answer's error),
    /// keeping the first error message.
    pub fn fail(&mut self, stage: Stage, count: u64, error: impl fmt::Display) {
        let error = error.to_string();
        let cause = features::cause_of(&error);
        self.failed(stage, count, cause, || error);
    }

    /// Records one failure of `stage` per error, each refusal told by its own words (a
    /// denied request among timeouts counts one refusal, not all), keeping the first
    /// error message.
    pub fn fail_each<E: fmt::Display>(
        &mut self,
        stage: Stage,
        errors: impl IntoIterator<Item = E>,
    ) {
        let mut failures = Failures::default();
        for error in errors {
            failures.add(1, error.to_string());
        }
        self.fail_all(stage, failures);
    }

    /// Records what `failures` gathered for `stage`.
    pub fn fail_all(&mut self, stage: Stage, failures: Failures) {
        for (cause, count, error) in failures.0 {
            self.failed(stage, count, cause, || error);
        }
    }

    fn failed(
        &mut self,
        stage: Stage,
        count: u64,
        cause: features::Cause,
        error: impl FnOnce() -> String,
    ) {
        let wanted = cause == features::Cause::Authentication
            && self
                .failures
                .get(&stage)
                .is_none_or(|f| f.refused_credentials.is_none());
        let first = !self.failures.contains_key(&stage);
        let message = (first || wanted).then(error);
        let credentials = wanted && message.as_deref().is_some_and(features::refused_by_brokers);
        let entry = self.failures.entry(stage).or_insert_with(|| StageFailure {
            count: 0,
            first_error: message.clone().unwrap_or_default(),
            refused: Refusals::default(),
            refused_credentials: None,
        });
        if credentials {
            entry.refused_credentials = message;
        }
        entry.count += count;
        match cause {
            features::Cause::Denied => entry.refused.denied += count,
            features::Cause::Unsupported => entry.refused.unsupported += count,
            features::Cause::Authentication => entry.refused.authentication += count,
            features::Cause::Failed => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Stage::ALL` holds every stage (the match fails to compile when one is added
    /// and not listed here), once, in the order of the enum: each cluster's errors_total
    /// shows every stage at 0 from the start, and the alerts' health test relies on it.
    #[test]
    fn every_stage_is_in_all() {
        let index = |stage: Stage| match stage {
            Stage::Metadata => 0,
            Stage::LogStartOffset => 1,
            Stage::ListGroups => 2,
            Stage::DescribeGroups => 3,
            Stage::GroupOffsets => 4,
            Stage::ShareGroupOffsets => 5,
            Stage::LastStableOffset => 6,
            Stage::HighWatermark => 7,
            Stage::DescribeProducers => 8,
            Stage::DescribeTransactions => 9,
            Stage::ListTransactions => 10,
            Stage::ReadRecords => 11,
            Stage::TopicConfigs => 12,
        };
        for (i, stage) in Stage::ALL.into_iter().enumerate() {
            assert_eq!(index(stage), i, "{stage}");
        }
    }
}
