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

use std::collections::BTreeMap;
use std::time::Instant;

use futures_util::future::join_all;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, DescribeConfigsRequest, DescribeGroupsRequest, GroupId,
    ListGroupsRequest, ShareGroupDescribeRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::kafka::wire::share_offsets::DescribeShareGroupOffsets;
use crate::kafka::wire::streams_describe::StreamsGroupDescribe;
use crate::kafka::wire::{Pool, WireError};
use crate::kafka::{BrokerLag, CommittedOffset, RawGroup};

/// DescribeConfigs resource type of a group (KIP-848 group configs).
const GROUP_RESOURCE: i8 = 32;
/// The group config that says what a share group's consumers may read.
const SHARE_ISOLATION_LEVEL: &str = "share.isolation.level";

/// ListGroups v5 names each group's type (Kafka 3.8 and later).
const LIST_GROUPS_WITH_TYPES: i16 = 5;

/// What [`list`] learned.
pub struct Listed {
    /// Selected groups, sorted by name, without committed offsets yet.
    pub groups: Vec<RawGroup>,
    /// One message per broker whose ListGroups failed (its groups are absent).
    pub list_failures: Vec<String>,
    /// One message per describe request that failed (its groups have no member count).
    pub describe_failures: Vec<String>,
    /// One message per share group whose progress could not be read.
    pub share_failures: Vec<String>,
}

/// A group as ListGroups reported it, with the broker that coordinates it.
struct Listing {
    name: String,
    group_type: String,
    protocol: String,
    state: String,
    coordinator: String,
}

/// Lists and describes the groups `accepts` selects. `Err` when some broker does not
/// name group types (older than Kafka 3.8): the caller then keeps the classic path.
pub async fn list(
    pool: &Pool,
    brokers: &BTreeMap<i32, String>,
    accepts: impl Fn(&str) -> bool,
    deadline: Instant,
) -> Result<Listed, String> {
    let answers = join_all(brokers.values().map(|addr| async move {
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
        (addr, answer)
    }))
    .await;

    let mut listings: BTreeMap<String, Listing> = BTreeMap::new();
    let mut list_failures = Vec::new();
    for (addr, answer) in answers {
        let response = match answer {
            Ok(Ok(response)) => response,
            Ok(Err(unusable)) => return Err(unusable),
            Err(error) => {
                list_failures.push(error.to_string());
                continue;
            }
        };
        if let Some(error) = ResponseError::try_from_code(response.error_code) {
            list_failures.push(format!("{addr}: ListGroups: {error:?}"));
            continue;
        }
        for g in response.groups {
            let name = g.group_id.0.to_string();
            if !accepts(&name) {
                continue;
            }
            // A group moving between coordinators may be listed twice: keep one.
            listings.entry(name.clone()).or_insert(Listing {
                name,
                group_type: normalize_type(&g.group_type),
                protocol: g.protocol_type.to_string(),
                state: g.group_state.to_string(),
                coordinator: addr.clone(),
            });
        }
    }

    // Describe each group by its protocol, one request per coordinator and protocol.
    let mut batches: BTreeMap<(&str, &str), Vec<&str>> = BTreeMap::new();
    for l in listings.values() {
        if matches!(
            l.group_type.as_str(),
            "classic" | "consumer" | "share" | "streams"
        ) {
            batches
                .entry((l.coordinator.as_str(), l.group_type.as_str()))
                .or_default()
                .push(&l.name);
        }
    }
    let described = join_all(
        batches
            .into_iter()
            .map(|((addr, group_type), names)| describe(pool, addr, group_type, names, deadline)),
    )
    .await;
    let mut found: BTreeMap<String, Option<Described>> = BTreeMap::new();
    let mut describe_failures = Vec::new();
    for result in described {
        match result {
            Ok((groups, failure)) => {
                found.extend(groups);
                describe_failures.extend(failure);
            }
            Err(error) => describe_failures.push(error),
        }
    }

    // Share groups: their progress (share-partition start offsets) and isolation level.
    let mut share_batches: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for l in listings.values().filter(|l| l.group_type == "share") {
        share_batches
            .entry(l.coordinator.as_str())
            .or_default()
            .push(&l.name);
    }
    // A share coordinator can take seconds to answer (seen on Kafka 4.4 with share groups
    // of deleted topics): their progress gets a quarter of the time left, so that it never
    // holds up the offsets that matter to every group. What is not read in time is absent.
    let share_deadline = Instant::now() + deadline.saturating_duration_since(Instant::now()) / 4;
    let mut progress: BTreeMap<String, ShareProgress> = BTreeMap::new();
    let mut share_failures = Vec::new();
    for result in join_all(
        share_batches
            .into_iter()
            .map(|(addr, names)| share_progress(pool, addr, names, share_deadline)),
    )
    .await
    {
        match result {
            Ok((groups, failures)) => {
                progress.extend(groups);
                share_failures.extend(failures);
            }
            Err(error) => share_failures.push(error),
        }
    }

    let groups = listings
        .into_values()
        .filter_map(|l| {
            let described = found.remove(&l.name);
            // Described as gone (deleted between the list and the describe): absent.
            if let Some(None) = described {
                return None;
            }
            let described = described.flatten();
            let share = progress.remove(&l.name);
            Some(RawGroup {
                state: described.as_ref().map_or(l.state, |d| d.state.clone()),
                members: described.map(|d| d.members),
                isolation: share.as_ref().and_then(|p| p.isolation),
                broker_lags: share
                    .as_ref()
                    .map(|p| p.broker_lags.clone())
                    .unwrap_or_default(),
                committed: share.and_then(|p| p.start_offsets),
                name: l.name,
                group_type: l.group_type,
                protocol: l.protocol,
            })
        })
        .collect();
    Ok(Listed {
        groups,
        list_failures,
        describe_failures,
        share_failures,
    })
}

/// What a share group has delivered, and what it may deliver.
struct ShareProgress {
    /// The share-partition start offsets: every record below has been delivered and
    /// acknowledged (or archived). `None` when they could not be read.
    start_offsets: Option<Vec<CommittedOffset>>,
    /// The lag the broker reports per share-partition (KIP-1226, Kafka 4.2 and later).
    broker_lags: Vec<BrokerLag>,
    /// `share.isolation.level`; `None` when it could not be read.
    isolation: Option<crate::kafka::Isolation>,
}

/// DescribeShareGroupOffsets for `names` at their coordinator, and their
/// `share.isolation.level` (DescribeConfigs on the same broker).
async fn share_progress(
    pool: &Pool,
    addr: &str,
    names: Vec<&str>,
    deadline: Instant,
) -> Result<(Vec<(String, ShareProgress)>, Vec<String>), String> {
    // Every partition the group has started on.
    let offsets_request = DescribeShareGroupOffsets {
        groups: names.iter().map(|n| n.to_string()).collect(),
    };
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
    let (offsets, configs) = tokio::join!(
        pool.send(
            addr,
            &offsets_request,
            "DescribeShareGroupOffsets",
            deadline
        ),
        pool.send(addr, &configs_request, "DescribeConfigs", deadline),
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
    let mut starts: BTreeMap<String, (Vec<CommittedOffset>, Vec<BrokerLag>)> = BTreeMap::new();
    match offsets {
        Ok(response) => {
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
                        topic: p.topic,
                        partition: p.partition,
                        offset: p.start_offset,
                    });
                }
                starts.insert(group.group, (offsets, lags));
            }
        }
        Err(error) => failures.push(error.to_string()),
    }
    let groups = names
        .into_iter()
        .map(|n| {
            let (start_offsets, broker_lags) = match starts.remove(n) {
                Some((offsets, lags)) => (Some(offsets), lags),
                None => (None, Vec::new()),
            };
            (
                n.to_string(),
                ShareProgress {
                    start_offsets,
                    broker_lags,
                    isolation: isolation.remove(n),
                },
            )
        })
        .collect();
    Ok((groups, failures))
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
    members: usize,
}

/// Per group of one describe answer: its state and live members, or `None` when the
/// coordinator no longer knows it; and the first error of a group that failed (that group
/// keeps its listed state, without a member count).
type DescribeAnswer = (Vec<(String, Option<Described>)>, Option<String>);

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
    // The four describe answers have the same shape; per group: id, error code, state,
    // member count.
    macro_rules! describe_with {
        ($request:expr, $api:literal) => {
            pool.send(addr, &$request, $api, deadline)
                .await
                .map_err(|e| e.to_string())?
                .groups
                .into_iter()
                .map(|g| {
                    (
                        g.group_id.0.to_string(),
                        g.error_code,
                        g.group_state.to_string(),
                        g.members.len(),
                    )
                })
                .collect()
        };
    }
    let answers: Vec<(String, i16, String, usize)> = match group_type {
        "classic" => {
            let mut request = DescribeGroupsRequest::default();
            request.groups = ids;
            describe_with!(request, "DescribeGroups")
        }
        "consumer" => {
            let mut request = ConsumerGroupDescribeRequest::default();
            request.group_ids = ids;
            describe_with!(request, "ConsumerGroupDescribe")
        }
        "share" => {
            let mut request = ShareGroupDescribeRequest::default();
            request.group_ids = ids;
            describe_with!(request, "ShareGroupDescribe")
        }
        _ => {
            // Not an error: the broker predates the API (its streams groups keep their
            // listed state).
            let version = pool.version::<StreamsGroupDescribe>(addr, deadline).await;
            if version.map_err(|e| e.to_string())?.is_none() {
                return Ok((Vec::new(), None));
            }
            let request = StreamsGroupDescribe { group_ids: ids };
            describe_with!(request, "StreamsGroupDescribe")
        }
    };
    let mut out = Vec::new();
    let mut failed = None;
    for (name, error_code, state, members) in answers {
        match ResponseError::try_from_code(error_code) {
            None => out.push((name, Some(Described { state, members }))),
            Some(ResponseError::GroupIdNotFound) => out.push((name, None)),
            Some(error) => {
                failed
                    .get_or_insert_with(|| format!("{addr}: describing group {name:?}: {error:?}"));
            }
        }
    }
    Ok((out, failed))
}
