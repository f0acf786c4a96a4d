//! Consumer groups of every protocol: classic, consumer (KIP-848), share (KIP-932) and
//! streams (KIP-1071).
//!
//! ListGroups v5 goes to every broker (each answers for the groups it coordinates) and
//! names each group's type and state. Each group is then described by its own protocol's
//! API, batched per coordinator: DescribeGroups for classic groups, ConsumerGroupDescribe
//! for consumer groups, ShareGroupDescribe for share groups, StreamsGroupDescribe for
//! streams groups. The classic API does not know the others (it reports a KIP-848 group
//! with live members as Dead with none). A coordinator without StreamsGroupDescribe
//! leaves its streams groups with the state ListGroups reports and no member count.
//!
//! The broker that lists a group coordinates it, so its committed offsets are fetched
//! from that broker right after the list, without FindCoordinator. Each broker's part
//! runs on its own ([`list`]): one that hangs blanks only the groups it coordinates.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use futures_util::future::{join_all, try_join_all};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_groups_response::DescribedGroupMember;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerProtocolAssignment, ConsumerProtocolSubscription,
    DescribeConfigsRequest, DescribeGroupsRequest, GroupId, ListGroupsRequest,
    ShareGroupDescribeRequest,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::ResponseError;

use super::offsets::Coordinators;
use crate::kafka::features::cause_of;
use crate::kafka::wire::share_offsets::DescribeShareGroupOffsets;
use crate::kafka::wire::streams_describe::StreamsGroupDescribe;
use crate::kafka::wire::{Lane, Pool, WireClient, WireError};
use crate::kafka::{BrokerLag, CommittedOffset, Failures, GroupDetail, RawGroup, RawMember};

/// DescribeConfigs resource type of a group (KIP-848 group configs).
const GROUP_RESOURCE: i8 = 32;
/// The group config that says what a share group's consumers may read.
const SHARE_ISOLATION_LEVEL: &str = "share.isolation.level";

/// ListGroups v5 names each group's type (Kafka 3.8 and later).
const LIST_GROUPS_WITH_TYPES: i16 = 5;

/// What [`list`] learned.
pub struct Listed {
    /// Selected groups, sorted by name; with their committed offsets when asked for.
    pub groups: Vec<RawGroup>,
    /// Per broker whose ListGroups failed (its groups are absent).
    pub list_failures: Vec<ListFailure>,
    /// One message per describe request that failed (its groups have no member count).
    pub describe_failures: Vec<String>,
    /// One message per share group whose progress could not be read.
    pub share_failures: Vec<String>,
    /// The groups whose committed offsets could not be fetched, by the cause their
    /// error tells (not their names).
    pub offset_failures: Failures,
    /// The own client cannot fetch committed offsets here (see [`offsets::Fetched`]).
    pub offsets_unusable: Option<String>,
    /// A broker that lists streams groups lacks StreamsGroupDescribe: which, and why.
    pub streams_unsupported: Option<String>,
}

/// A broker whose ListGroups failed.
pub struct ListFailure {
    pub addr: String,
    pub reason: String,
    /// It refused this client's TLS ([`WireError::Tls`]): another client may still list
    /// its groups.
    pub refused: bool,
}

/// A group as ListGroups reported it, with the broker that coordinates it.
struct Listing {
    name: String,
    group_type: String,
    protocol: String,
    state: String,
}

/// What one broker said of the groups it coordinates.
#[derive(Default)]
struct AtBroker {
    groups: Vec<RawGroup>,
    list_failure: Option<ListFailure>,
    describe_failures: Vec<String>,
    share_failures: Vec<String>,
    offset_failures: Failures,
    offsets_unusable: Option<String>,
    streams_unsupported: Option<String>,
}

/// Lists and describes the groups `accepts` selects and, with `offsets`, fetches their
/// committed offsets. `Err` when some broker does not name group types (older than
/// Kafka 3.8): the caller then keeps the classic path.
///
/// Every broker is a pipeline of its own, all at once: its ListGroups, then the describe
/// requests and the OffsetFetch for the groups it listed (it coordinates them), and the
/// share groups' progress on a connection of its own. A broker that does not answer, or
/// answers slowly, holds up only the groups it coordinates.
pub async fn list(
    wire: &Arc<WireClient>,
    shares: &ShareReader,
    brokers: &BTreeMap<i32, String>,
    accepts: impl Fn(&str) -> bool,
    offsets: Option<&Coordinators>,
    deadline: Instant,
) -> Result<Listed, String> {
    let servers: Vec<String> = brokers.values().cloned().collect();
    // The first broker that does not name group types ends every pipeline at once: the
    // caller's classic path gets the time left.
    let answers = try_join_all(
        brokers
            .values()
            .map(|addr| at_broker(wire, shares, addr, &servers, &accepts, offsets, deadline)),
    )
    .await?;
    let mut listed = Listed {
        groups: Vec::new(),
        list_failures: Vec::new(),
        describe_failures: Vec::new(),
        share_failures: Vec::new(),
        offset_failures: Failures::default(),
        offsets_unusable: None,
        streams_unsupported: None,
    };
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for at in answers {
        listed.list_failures.extend(at.list_failure);
        listed.describe_failures.extend(at.describe_failures);
        listed.share_failures.extend(at.share_failures);
        listed.offset_failures.merge(at.offset_failures);
        if listed.offsets_unusable.is_none() {
            listed.offsets_unusable = at.offsets_unusable;
        }
        if listed.streams_unsupported.is_none() {
            listed.streams_unsupported = at.streams_unsupported;
        }
        // A group moving between coordinators may be listed twice: keep one, the one
        // with committed offsets and a member count if only one has them.
        for group in at.groups {
            let worth = |g: &RawGroup| (g.committed.is_some(), g.members.is_some());
            match seen.get(&group.name) {
                Some(&kept) if worth(&listed.groups[kept]) >= worth(&group) => {}
                Some(&kept) => listed.groups[kept] = group,
                None => {
                    seen.insert(group.name.clone(), listed.groups.len());
                    listed.groups.push(group);
                }
            }
        }
    }
    listed.groups.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(listed)
}

/// One broker's pipeline (see [`list`]). `Err` when the broker does not name group types.
async fn at_broker(
    wire: &Arc<WireClient>,
    shares: &ShareReader,
    addr: &str,
    servers: &[String],
    accepts: &impl Fn(&str) -> bool,
    offsets: Option<&Coordinators>,
    deadline: Instant,
) -> Result<AtBroker, String> {
    let pool = &wire.pool;
    let mut at = AtBroker::default();
    let listings = match list_at(pool, addr, accepts, deadline).await {
        Ok(Ok(listings)) => listings,
        Ok(Err(unusable)) => return Err(unusable),
        Err((reason, refused)) => {
            at.list_failure = Some(ListFailure {
                addr: addr.to_string(),
                reason,
                refused,
            });
            return Ok(at);
        }
    };

    // Describe each group by its protocol, one request per type.
    let mut batches: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for l in listings.values() {
        if matches!(
            l.group_type.as_str(),
            "classic" | "consumer" | "share" | "streams"
        ) {
            batches
                .entry(l.group_type.as_str())
                .or_default()
                .push(&l.name);
        }
    }
    let describing = join_all(
        batches
            .into_iter()
            .map(|(group_type, names)| describe(pool, addr, group_type, names, deadline)),
    );

    // Committed offsets of the groups it coordinates (a share group has none: its
    // members acknowledge records one by one).
    let committing: Vec<String> = listings
        .values()
        .filter(|l| l.group_type != "share")
        .map(|l| l.name.clone())
        .collect();
    let fetching = async {
        let coordinators = offsets?;
        if committing.is_empty() {
            return None;
        }
        for name in &committing {
            coordinators.learn(name, addr);
        }
        Some(super::offsets::fetch(pool, &committing, servers, coordinators, deadline).await)
    };

    // Share groups: their progress and isolation level ([`ShareReader`]).
    let sharing: Vec<String> = listings
        .values()
        .filter(|l| l.group_type == "share")
        .map(|l| l.name.clone())
        .collect();
    let progressing = async {
        if sharing.is_empty() {
            return (Vec::new(), Vec::new());
        }
        shares.read(wire, addr, sharing, deadline).await
    };

    let (described, fetched, progress) = tokio::join!(describing, fetching, progressing);
    let mut found: BTreeMap<String, Option<Described>> = BTreeMap::new();
    for result in described {
        match result {
            Ok((groups, failure)) => {
                found.extend(groups);
                match failure {
                    Some(Refusal::Failed(error)) => at.describe_failures.push(error),
                    Some(Refusal::StreamsUnsupported) => {
                        at.streams_unsupported = Some(format!(
                            "{addr} lists streams groups but lacks StreamsGroupDescribe (Kafka 4.1 or later \
                             describes them): their members, owners and rebalances are unknown"
                        ))
                    }
                    None => {}
                }
            }
            Err(error) => at.describe_failures.push(error),
        }
    }
    let mut committed: BTreeMap<String, Vec<CommittedOffset>> = BTreeMap::new();
    if let Some(fetched) = fetched {
        at.offsets_unusable = fetched.unusable;
        for (name, result) in committing.iter().zip(fetched.results) {
            match result {
                Ok(offsets) => {
                    committed.insert(name.clone(), offsets);
                }
                Err(error) => {
                    let cause = cause_of(&error.to_string());
                    at.offset_failures
                        .add_as(cause, 1, || format!("group {name:?}: {error}"));
                }
            }
        }
    }
    let (progress, share_failures) = progress;
    at.share_failures.extend(share_failures);
    let mut progress: BTreeMap<String, ShareProgress> = progress.into_iter().collect();

    at.groups = listings
        .into_values()
        .filter_map(|l| {
            let described = found.remove(&l.name);
            // Described as gone (deleted between the list and the describe): absent.
            if let Some(None) = described {
                return None;
            }
            let described = described.flatten();
            let share = progress.remove(&l.name);
            let committed = match share.as_ref() {
                Some(p) => p.start_offsets.clone(),
                None => committed.remove(&l.name),
            };
            Some(RawGroup {
                coordinator: Some(addr.to_string()),
                state: described.as_ref().map_or(l.state, |d| d.state.clone()),
                members: described.as_ref().map(|d| d.detail.members.len()),
                detail: described.map(|d| d.detail),
                isolation: share.as_ref().and_then(|p| p.isolation),
                broker_lags: share.map(|p| p.broker_lags).unwrap_or_default(),
                committed,
                name: l.name,
                group_type: l.group_type,
                protocol: l.protocol,
            })
        })
        .collect();
    Ok(at)
}

/// ListGroups at one broker: the selected groups it coordinates, by name. The inner
/// `Err` when it does not name group types; the outer one says why it failed and whether
/// the broker refused this client's TLS.
async fn list_at(
    pool: &Pool,
    addr: &str,
    accepts: &impl Fn(&str) -> bool,
    deadline: Instant,
) -> Result<Result<BTreeMap<String, Listing>, String>, (String, bool)> {
    let answer = async {
        match pool.version::<ListGroupsRequest>(addr, deadline).await? {
            Some(v) if v >= LIST_GROUPS_WITH_TYPES => {}
            _ => {
                return Ok(Err(format!(
                    "{addr} does not list group types (ListGroups v5, Kafka 3.8)"
                )))
            }
        }
        let request = ListGroupsRequest::default();
        let response = pool.send(addr, &request, "ListGroups", deadline).await?;
        Ok::<_, WireError>(Ok(response))
    }
    .await;
    let response = match answer {
        Ok(Ok(response)) => response,
        Ok(Err(unusable)) => return Ok(Err(unusable)),
        Err(error) => return Err((error.to_string(), matches!(error, WireError::Tls { .. }))),
    };
    if let Some(error) = ResponseError::try_from_code(response.error_code) {
        return Err((format!("{addr}: ListGroups: {error:?}"), false));
    }
    let mut listings = BTreeMap::new();
    for g in response.groups {
        let name = g.group_id.0.to_string();
        // The replicas' own coordination group is no consumer group.
        if !accepts(&name) || g.protocol_type.as_str() == crate::kafka::coordination::PROTOCOL_TYPE
        {
            continue;
        }
        listings.insert(
            name.clone(),
            Listing {
                name,
                group_type: normalize_type(&g.group_type),
                protocol: g.protocol_type.to_string(),
                state: g.group_state.to_string(),
            },
        );
    }
    Ok(Ok(listings))
}

/// Share groups' progress, read per coordinator in the background of the cycles.
///
/// A share coordinator answers DescribeShareGroupOffsets by asking the partitions' latest
/// offsets of itself (for the lag, in every version), and on Kafka 4.x that internal
/// request fails at once and is retried about 2 s later whenever two of them meet, or on
/// the first after a restart (its send thread expires a request it did not send at once,
/// comparing two different clocks). One answer can thus take 2–5 s. So each group is asked
/// alone, one after the other as Kafka's own tools do (that makes the stall rare), the
/// groups read longest ago first, on a connection of its own, with [`SHARE_BUDGET`] of its
/// own: a cycle waits for it until the group stage's deadline (only [`SHARE_GRACE`] when
/// it has a recent read of every group) and otherwise takes the last progress read, if
/// younger than [`SHARE_MAX_AGE`]; the next read starts once the one under way is done.
#[derive(Default)]
pub struct ShareReader {
    brokers: std::sync::Mutex<HashMap<String, Arc<BrokerShares>>>,
}

/// How long one broker's share progress may take to read, whatever the cycle's deadline.
const SHARE_BUDGET: Duration = Duration::from_secs(15);
/// Progress older than this is not shown.
const SHARE_MAX_AGE: Duration = Duration::from_secs(30);
/// How long a cycle waits for a fresher read when it has a recent one.
const SHARE_GRACE: Duration = Duration::from_millis(300);

/// Marks a broker's read as done when dropped, also when the read panicked.
struct Finished(Arc<BrokerShares>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.in_flight.store(false, Ordering::SeqCst);
        self.0.done.notify_waiters();
    }
}

#[derive(Default)]
struct BrokerShares {
    in_flight: AtomicBool,
    done: tokio::sync::Notify,
    /// Group -> when its progress was read, and what it was.
    last: std::sync::Mutex<HashMap<String, (Instant, ShareProgress)>>,
    /// What failed in the last read.
    failures: std::sync::Mutex<Vec<String>>,
}

impl ShareReader {
    fn broker(&self, addr: &str) -> Arc<BrokerShares> {
        let mut brokers = self.brokers.lock().unwrap_or_else(|p| p.into_inner());
        brokers.entry(addr.to_string()).or_default().clone()
    }

    /// The progress of `names`, coordinated by `addr`: read now if it can be before
    /// `deadline`, else as last read. The second list says what is missing and why.
    async fn read(
        &self,
        wire: &Arc<WireClient>,
        addr: &str,
        names: Vec<String>,
        deadline: Instant,
    ) -> (Vec<(String, ShareProgress)>, Vec<String>) {
        let broker = self.broker(addr);
        let done = broker.done.notified();
        tokio::pin!(done);
        done.as_mut().enable();
        // Every group known, and recent enough: a short wait for a fresher read will do,
        // so that a stalling share coordinator does not use up the stage every cycle.
        let known = {
            let last = broker.last.lock().unwrap_or_else(|p| p.into_inner());
            names.iter().all(|n| {
                last.get(n)
                    .is_some_and(|(at, _)| at.elapsed() < SHARE_MAX_AGE / 2)
            })
        };
        if !broker.in_flight.swap(true, Ordering::SeqCst) {
            let (wire, addr, broker, mut names) = (
                wire.clone(),
                addr.to_string(),
                broker.clone(),
                names.clone(),
            );
            // The groups read longest ago first: a coordinator that stalls within the
            // budget still gets round to every group.
            {
                let last = broker.last.lock().unwrap_or_else(|p| p.into_inner());
                names.sort_by_key(|n| last.get(n).map(|(at, _)| *at));
            }
            tokio::spawn(async move {
                // Whatever happens to this task, the next cycle may start another.
                let _done = Finished(broker.clone());
                let until = Instant::now() + SHARE_BUDGET;
                let (groups, failures) = share_progress(&wire.pool, &addr, &names, until).await;
                {
                    let mut last = broker.last.lock().unwrap_or_else(|p| p.into_inner());
                    let now = Instant::now();
                    last.retain(|_, (at, _)| now.duration_since(*at) < SHARE_MAX_AGE);
                    // Each group as old as its own answer.
                    for (name, read_at, progress) in groups {
                        last.insert(name, (read_at, progress));
                    }
                }
                *broker.failures.lock().unwrap_or_else(|p| p.into_inner()) = failures;
            });
        }
        let wait = if known {
            deadline.min(Instant::now() + SHARE_GRACE)
        } else {
            deadline
        };
        let _ = tokio::time::timeout_at(tokio::time::Instant::from_std(wait), done).await;
        let last = broker.last.lock().unwrap_or_else(|p| p.into_inner());
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for name in names {
            match last.get(&name) {
                Some((at, progress)) if at.elapsed() < SHARE_MAX_AGE => {
                    found.push((name, progress.clone()))
                }
                _ => missing.push(name),
            }
        }
        // A read's failures are reported once.
        let mut failures =
            std::mem::take(&mut *broker.failures.lock().unwrap_or_else(|p| p.into_inner()));
        if !missing.is_empty() && failures.is_empty() {
            failures.push(format!(
                "{addr}: progress of share group {:?} not read yet",
                missing[0]
            ));
        }
        (found, failures)
    }
}

/// What a share group has delivered, and what it may deliver.
#[derive(Clone)]
struct ShareProgress {
    /// The share-partition start offsets: every record below has been delivered and
    /// acknowledged (or archived).
    start_offsets: Option<Vec<CommittedOffset>>,
    /// The lag the broker reports per share-partition (KIP-1226, Kafka 4.2 and later).
    broker_lags: Vec<BrokerLag>,
    /// `share.isolation.level`; `None` when it could not be read.
    isolation: Option<crate::kafka::Isolation>,
}

/// DescribeShareGroupOffsets for each of `names` at their coordinator, one after the
/// other, on the share connection; and their `share.isolation.level` (DescribeConfigs on
/// the same broker). Groups whose offsets could not be read are left out.
async fn share_progress(
    pool: &Pool,
    addr: &str,
    names: &[String],
    deadline: Instant,
) -> (Vec<(String, Instant, ShareProgress)>, Vec<String>) {
    let mut configs_request = DescribeConfigsRequest::default();
    configs_request.resources = names
        .iter()
        .map(|n| {
            let mut resource = DescribeConfigsResource::default();
            resource.resource_type = GROUP_RESOURCE;
            resource.resource_name = StrBytes::from_string(n.to_string());
            resource.configuration_keys =
                Some(vec![StrBytes::from_static_str(SHARE_ISOLATION_LEVEL)]);
            resource
        })
        .collect();
    let offsets = one_by_one(names, |name| async move {
        let request = DescribeShareGroupOffsets {
            groups: vec![name.clone()],
        };
        pool.send_via(
            Lane::Share,
            addr,
            &request,
            "DescribeShareGroupOffsets",
            deadline,
        )
        .await
    });
    let (offsets, configs) = tokio::join!(
        offsets,
        pool.send_via(
            Lane::Share,
            addr,
            &configs_request,
            "DescribeConfigs",
            deadline
        ),
    );
    let mut failures = Vec::new();
    let mut isolation: BTreeMap<String, crate::kafka::Isolation> = BTreeMap::new();
    match configs {
        Ok(response) => {
            for result in response.results {
                let name = result.resource_name.to_string();
                if let Some(error) = ResponseError::try_from_code(result.error_code) {
                    failures.push(format!(
                        "{addr}: share.isolation.level of {name:?}: {error:?}"
                    ));
                    continue;
                }
                // Not set: the broker's default, read_uncommitted.
                let level = result
                    .configs
                    .iter()
                    .find(|c| &*c.name == SHARE_ISOLATION_LEVEL)
                    .and_then(|c| c.value.as_deref().map(str::to_string))
                    .unwrap_or_default();
                let level = if level.eq_ignore_ascii_case("read_committed") {
                    crate::kafka::Isolation::ReadCommitted
                } else {
                    crate::kafka::Isolation::ReadUncommitted
                };
                isolation.insert(name, level);
            }
        }
        Err(error) => failures.push(error.to_string()),
    }
    let mut groups = Vec::new();
    for (read_at, answer) in offsets {
        let response = match answer {
            Ok(response) => response,
            Err(error) => {
                failures.push(error.to_string());
                continue;
            }
        };
        for group in response.groups {
            if let Some(error) = ResponseError::try_from_code(group.error_code) {
                failures.push(format!(
                    "{addr}: share group {:?} offsets: {error:?}",
                    group.group
                ));
                continue;
            }
            let mut offsets = Vec::new();
            let mut lags = Vec::new();
            for p in group.partitions {
                // -1: the share-partition is not initialized yet.
                if p.error_code != 0 || p.start_offset < 0 {
                    continue;
                }
                if let Some(lag) = p.lag.filter(|l| *l >= 0) {
                    lags.push(BrokerLag {
                        topic: p.topic.clone(),
                        partition: p.partition,
                        lag,
                    });
                }
                offsets.push(CommittedOffset {
                    topic: p.topic.into(),
                    partition: p.partition,
                    offset: p.start_offset,
                });
            }
            let progress = ShareProgress {
                start_offsets: Some(offsets),
                broker_lags: lags,
                isolation: isolation.get(&group.group).copied(),
            };
            groups.push((group.group, read_at, progress));
        }
    }
    (groups, failures)
}

/// `send` for each of `names`, one after the other, each answer with the moment it
/// arrived: a group read first is as old as its own answer, not as the last one's.
async fn one_by_one<'a, T, F, Fut>(names: &'a [String], send: F) -> Vec<(Instant, T)>
where
    F: Fn(&'a String) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut answers = Vec::with_capacity(names.len());
    for name in names {
        let answer = send(name).await;
        answers.push((Instant::now(), answer));
    }
    answers
}

/// A group's type as the metrics name it: lower case, as Kafka's tools print it.
fn normalize_type(group_type: &str) -> String {
    if group_type.is_empty() {
        // Brokers before KIP-848 list only classic groups.
        "classic".to_string()
    } else {
        group_type.to_ascii_lowercase()
    }
}

struct Described {
    state: String,
    detail: GroupDetail,
}

/// Per group of one describe answer: its state, members and epoch, or `None` when the
/// coordinator no longer knows it; and the first error of a group that failed (that group
/// keeps its listed state, without a member count).
type DescribeAnswer = (Vec<(String, Option<Described>)>, Option<Refusal>);

/// Why a describe request left its groups undescribed.
enum Refusal {
    /// It failed (counted under `describe_groups`).
    Failed(String),
    /// The broker predates StreamsGroupDescribe: not an error, a feature it lacks.
    StreamsUnsupported,
}

/// One describe request for `names` of one type at their coordinator.
async fn describe(
    pool: &Pool,
    addr: &str,
    group_type: &str,
    names: Vec<&str>,
    deadline: Instant,
) -> Result<DescribeAnswer, String> {
    let ids: Vec<GroupId> = names
        .iter()
        .map(|n| GroupId(StrBytes::from_string(n.to_string())))
        .collect();
    // Per group: id, error code, state, members and epoch.
    // The four describe answers have the same shape; per group: id, error code, state,
    // and its members and epoch, read by `detail` from the group of that answer.
    macro_rules! describe_with {
        ($request:expr, $api:literal, |$g:ident| $detail:expr) => {
            pool.send(addr, &$request, $api, deadline)
                .await
                .map_err(|e| e.to_string())?
                .groups
                .into_iter()
                .map(|$g| {
                    // The detail takes the members out of the group it reads.
                    #[allow(unused_mut)]
                    let mut $g = $g;
                    let detail = $detail;
                    (
                        $g.group_id.0.to_string(),
                        $g.error_code,
                        $g.group_state.to_string(),
                        detail,
                    )
                })
                .collect()
        };
    }
    // A KIP-848 or share assignment: partitions per topic, by name.
    macro_rules! assigned {
        ($assignment:expr) => {
            Some(named_partitions(
                $assignment
                    .topic_partitions
                    .into_iter()
                    .map(|t| (t.topic_name.0.to_string(), t.partitions)),
            ))
        };
    }
    let answers: Vec<(String, i16, String, GroupDetail)> = match group_type {
        "classic" => {
            let mut request = DescribeGroupsRequest::default();
            request.groups = ids;
            describe_with!(request, "DescribeGroups", |g| classic_detail(
                g.protocol_type.as_str(),
                g.group_state.as_str(),
                &g.members,
            ))
        }
        "consumer" => {
            let mut request = ConsumerGroupDescribeRequest::default();
            request.group_ids = ids;
            describe_with!(request, "ConsumerGroupDescribe", |g| epoch_detail(
                g.group_epoch,
                g.assignment_epoch,
                std::mem::take(&mut g.members)
                    .into_iter()
                    .map(|m| RawMember {
                        member_id: m.member_id.to_string(),
                        instance_id: m.instance_id.map(|i| i.to_string()),
                        client_id: m.client_id.to_string(),
                        client_host: m.client_host.to_string(),
                        assigned: assigned!(m.assignment),
                        target: assigned!(m.target_assignment),
                        member_epoch: Some(m.member_epoch),
                    }),
            ))
        }
        "share" => {
            let mut request = ShareGroupDescribeRequest::default();
            request.group_ids = ids;
            describe_with!(request, "ShareGroupDescribe", |g| epoch_detail(
                g.group_epoch,
                g.assignment_epoch,
                std::mem::take(&mut g.members)
                    .into_iter()
                    .map(|m| RawMember {
                        member_id: m.member_id.to_string(),
                        instance_id: None,
                        client_id: m.client_id.to_string(),
                        client_host: m.client_host.to_string(),
                        assigned: assigned!(m.assignment),
                        target: None,
                        member_epoch: Some(m.member_epoch),
                    }),
            ))
        }
        _ => {
            // Not an error: the broker predates the API (its streams groups keep their
            // listed state).
            let version = pool.version::<StreamsGroupDescribe>(addr, deadline).await;
            if version.map_err(|e| e.to_string())?.is_none() {
                return Ok((Vec::new(), Some(Refusal::StreamsUnsupported)));
            }
            let request = StreamsGroupDescribe { group_ids: ids };
            // A member's partitions are those its active tasks read, by the topology.
            describe_with!(request, "StreamsGroupDescribe", |g| {
                let members: Vec<RawMember> = std::mem::take(&mut g.members)
                    .into_iter()
                    .map(|m| RawMember {
                        assigned: g.partitions_of(&m.active),
                        target: g.partitions_of(&m.target_active),
                        member_id: m.member_id,
                        instance_id: m.instance_id,
                        client_id: m.client_id,
                        client_host: m.client_host,
                        member_epoch: Some(m.member_epoch),
                    })
                    .collect();
                epoch_detail(g.group_epoch, g.assignment_epoch, members.into_iter())
            })
        }
    };
    let mut out = Vec::new();
    let mut failed = None;
    for (name, error_code, state, detail) in answers {
        match ResponseError::try_from_code(error_code) {
            None => out.push((name, Some(Described { state, detail }))),
            Some(ResponseError::GroupIdNotFound) => out.push((name, None)),
            Some(error) => {
                failed
                    .get_or_insert_with(|| format!("{addr}: describing group {name:?}: {error:?}"));
            }
        }
    }
    Ok((out, failed.map(Refusal::Failed)))
}

/// The members and epochs of a group whose protocol has epochs (KIP-848, share, streams).
fn epoch_detail(
    group_epoch: i32,
    assignment_epoch: i32,
    members: impl Iterator<Item = RawMember>,
) -> GroupDetail {
    GroupDetail {
        epoch: Some(i64::from(group_epoch)),
        assignment_epoch: Some(i64::from(assignment_epoch)),
        members: members.collect(),
    }
}

/// Partitions per topic, sorted, topics merged (an answer may name a topic twice).
fn named_partitions(topics: impl Iterator<Item = (String, Vec<i32>)>) -> Vec<(String, Vec<i32>)> {
    let mut merged: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (topic, partitions) in topics {
        merged.entry(topic).or_default().extend(partitions);
    }
    merged
        .into_iter()
        .map(|(topic, mut partitions)| {
            partitions.sort_unstable();
            partitions.dedup();
            (topic, partitions)
        })
        .collect()
}

/// A classic group's members as DescribeGroups gives them.
fn classic_detail(
    protocol_type: &str,
    state: &str,
    members: &[DescribedGroupMember],
) -> GroupDetail {
    classic_members(
        protocol_type,
        state,
        members.iter().map(|m| ClassicMember {
            member_id: m.member_id.as_str(),
            instance_id: m.group_instance_id.as_ref().map(|i| i.as_str()),
            client_id: m.client_id.as_str(),
            client_host: m.client_host.as_str(),
            metadata: &m.member_metadata,
            assignment: &m.member_assignment,
        }),
    )
}

/// One member of a classic group, as DescribeGroups (or librdkafka's list) gives it.
pub struct ClassicMember<'a> {
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
    pub client_id: &'a str,
    pub client_host: &'a str,
    pub metadata: &'a [u8],
    pub assignment: &'a [u8],
}

/// A classic group's members and generation. The assignment and the subscription are
/// opaque bytes of the members' protocol; for protocol type `consumer` (Kafka's
/// consumers, librdkafka's and every client of the consumer protocol) they are
/// ConsumerProtocolAssignment and ConsumerProtocolSubscription, read here: the partitions
/// each member owns, and the generation it was in when it last joined (subscription v2
/// and later, KIP-792). Bytes that do not decode leave the assignment unknown, and so does
/// a group that is not `Stable`: its coordinator then describes members without their
/// assignment and metadata (while cooperative consumers still own and read partitions).
pub fn classic_members<'a>(
    protocol_type: &str,
    state: &str,
    members: impl Iterator<Item = ClassicMember<'a>>,
) -> GroupDetail {
    let consumer = protocol_type == "consumer" && state == "Stable";
    let mut generation: Option<i64> = None;
    let members = members
        .map(|m| {
            let (assigned, joined_in) = if consumer {
                (
                    decode_assignment(m.assignment),
                    decode_generation(m.metadata),
                )
            } else {
                (None, None)
            };
            if let Some(g) = joined_in.filter(|g| *g >= 0) {
                generation = Some(generation.map_or(g + 1, |known| known.max(g + 1)));
            }
            RawMember {
                member_id: m.member_id.to_string(),
                instance_id: m.instance_id.map(str::to_string),
                client_id: m.client_id.to_string(),
                client_host: m.client_host.to_string(),
                assigned,
                target: None,
                member_epoch: None,
            }
        })
        .collect();
    GroupDetail {
        epoch: generation,
        assignment_epoch: None,
        members,
    }
}

/// A ConsumerProtocolAssignment: its version, then the assignment. Empty bytes: the
/// member has no assignment yet (the group is rebalancing): it owns nothing.
fn decode_assignment(bytes: &[u8]) -> Option<Vec<(String, Vec<i32>)>> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    let mut buf = Bytes::copy_from_slice(bytes);
    if buf.remaining() < 2 {
        return None;
    }
    let version = buf.get_i16().clamp(0, 3);
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version).ok()?;
    Some(named_partitions(
        assignment
            .assigned_partitions
            .into_iter()
            .map(|t| (t.topic.0.to_string(), t.partitions)),
    ))
}

/// The generation in a ConsumerProtocolSubscription (version 2 and later); `None` in
/// older versions, and -1 where the client sends none.
fn decode_generation(bytes: &[u8]) -> Option<i64> {
    let mut buf = Bytes::copy_from_slice(bytes);
    if buf.remaining() < 2 {
        return None;
    }
    let version = buf.get_i16();
    if version < 2 {
        return None;
    }
    let subscription = ConsumerProtocolSubscription::decode(&mut buf, version.min(3)).ok()?;
    Some(i64::from(subscription.generation_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Stable classic group's members own what their assignment bytes say; while it
    /// rebalances its coordinator sends no assignment, and ownership is unknown, not none.
    #[test]
    fn classic_owners_are_read_only_from_a_stable_group() {
        use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
        use kafka_protocol::protocol::Encodable;
        let mut assignment = ConsumerProtocolAssignment::default();
        let mut tp = TopicPartition::default();
        tp.topic = kafka_protocol::messages::TopicName(StrBytes::from_static_str("orders"));
        tp.partitions = vec![2, 0];
        assignment.assigned_partitions = vec![tp];
        let mut bytes = bytes::BytesMut::new();
        bytes::BufMut::put_i16(&mut bytes, 0);
        assignment.encode(&mut bytes, 0).unwrap();
        fn member(assignment: &[u8]) -> ClassicMember<'_> {
            ClassicMember {
                member_id: "m1",
                instance_id: None,
                client_id: "c1",
                client_host: "/10.0.0.1",
                metadata: &[],
                assignment,
            }
        }
        let bytes = bytes.to_vec();
        let bytes = &bytes[..];
        let stable = classic_members("consumer", "Stable", [member(bytes)].into_iter());
        assert_eq!(
            stable.members[0].assigned,
            Some(vec![("orders".to_string(), vec![0, 2])])
        );
        let rebalancing =
            classic_members("consumer", "PreparingRebalance", [member(&[])].into_iter());
        assert_eq!(rebalancing.members[0].assigned, None);
        // Another protocol's bytes are not read.
        let connect = classic_members("connect", "Stable", [member(bytes)].into_iter());
        assert_eq!(connect.members[0].assigned, None);
        // Bytes that do not decode leave it unknown, never panic.
        let broken = classic_members("consumer", "Stable", [member(&[0, 0, 0xff])].into_iter());
        assert_eq!(broken.members[0].assigned, None);
    }

    /// Share groups are read one after the other, and a coordinator can take seconds for
    /// each: each group's progress is dated by its own answer, so the first one read
    /// ages out of [`SHARE_MAX_AGE`] on time rather than one batch late.
    #[tokio::test]
    async fn each_share_group_is_dated_by_its_own_answer() {
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let started = Instant::now();
        let answers = one_by_one(&names, |name| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            name.clone()
        })
        .await;
        let order: Vec<&str> = answers.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(order, ["a", "b", "c"]);
        // Each answer at least one pause after the one before (a loaded machine may add
        // to it, never take from it).
        let mut previous = started;
        for (at, name) in &answers {
            assert!(
                at.duration_since(previous) >= Duration::from_millis(100),
                "{name} dated {:?} after the answer before",
                at.duration_since(previous)
            );
            previous = *at;
        }
    }
}
