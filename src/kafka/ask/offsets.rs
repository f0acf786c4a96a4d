//! Committed offsets of many consumer groups in few requests: one OffsetFetch (v8+, many
//! groups per request) per coordinator. 500 groups on 3 brokers cost about 3 requests
//! instead of 1,000.
//!
//! Each group's coordinator comes from [`Coordinators`], a cache kept between cycles and
//! filled by ListGroups answers (the broker that lists a group coordinates it) and by
//! FindCoordinator. A group whose coordinator is not known is looked up with one batched
//! FindCoordinator sent to a few brokers at once, the first answer winning: a broker that
//! does not answer holds up no lookup.
//!
//! A coordinator that is loading, moving or not available is asked again (backoff 50 ms,
//! doubling to 500 ms) while the deadline allows; a group still failing then is reported
//! with its last error.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::future::{join_all, select_ok};
use futures_util::FutureExt as _;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{FindCoordinatorRequest, GroupId, OffsetFetchRequest};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::kafka::wire::{Pool, WireError};
use crate::kafka::CommittedOffset;

/// Groups per OffsetFetch request; keeps one answer to a few MiB.
const GROUPS_PER_REQUEST: usize = 200;
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_millis(500);
/// Brokers asked at once to find coordinators.
const FIND_FANOUT: usize = 3;

/// Where each group's coordinator is, as last learned; kept between cycles.
#[derive(Default)]
pub struct Coordinators {
    by_group: Mutex<HashMap<String, String>>,
    /// Where the next FindCoordinator starts among the brokers (rotates).
    next: AtomicUsize,
}

impl Coordinators {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.by_group.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `addr` coordinates `group` (it listed the group, or FindCoordinator said so).
    pub fn learn(&self, group: &str, addr: &str) {
        let mut map = self.lock();
        match map.get_mut(group) {
            Some(known) if known == addr => {}
            Some(known) => *known = addr.to_string(),
            None => {
                map.insert(group.to_string(), addr.to_string());
            }
        }
    }

    fn get(&self, group: &str) -> Option<String> {
        self.lock().get(group).cloned()
    }

    fn forget(&self, group: &str) {
        self.lock().remove(group);
    }

    /// Forgets groups that were not selected in this cycle.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        self.lock().retain(|group, _| keep(group));
    }

    /// Up to [`FIND_FANOUT`] of `brokers`, starting where the last lookup did not.
    fn pick<'a>(&self, brokers: &'a [String]) -> Vec<&'a str> {
        if brokers.is_empty() {
            return Vec::new();
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        (0..brokers.len().min(FIND_FANOUT))
            .map(|k| brokers[(start + k) % brokers.len()].as_str())
            .collect()
    }
}

/// What to do about a group after an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// Ask the same coordinator again.
    Retry,
    /// Find the coordinator again, then ask it.
    Rediscover,
    /// Give up on this group for this cycle.
    Fail,
}

fn next_step(error: ResponseError) -> Next {
    match error {
        ResponseError::CoordinatorLoadInProgress => Next::Retry,
        ResponseError::CoordinatorNotAvailable | ResponseError::NotCoordinator => Next::Rediscover,
        _ => Next::Fail,
    }
}

/// What [`fetch`] learned.
pub struct Fetched {
    /// The committed offsets of each group, in order, or why they are missing.
    pub results: Vec<Result<Vec<CommittedOffset>, String>>,
    /// This client cannot fetch offsets from this cluster at all (a broker without
    /// OffsetFetch v8, a TLS or SASL setting only librdkafka understands).
    pub unusable: Option<String>,
}

/// The committed offsets of each of `groups`, in order. Coordinators come from
/// `coordinators` (what it does not know is found through `brokers`, any broker can
/// answer) and what is learned is kept there.
pub async fn fetch(
    pool: &Pool,
    groups: &[String],
    brokers: &[String],
    coordinators: &Coordinators,
    deadline: Instant,
) -> Fetched {
    let mut unusable: Option<String> = None;
    let mut results: Vec<Result<Vec<CommittedOffset>, String>> =
        vec![Err("no answer before the cycle's deadline".into()); groups.len()];
    let mut pending: Vec<usize> = (0..groups.len()).collect();
    let mut coordinator: Vec<Option<String>> = groups.iter().map(|g| coordinators.get(g)).collect();
    let mut backoff = FIRST_BACKOFF;

    while !pending.is_empty() {
        // Coordinators of the groups that have none yet, in one request to a few brokers.
        let unknown: Vec<usize> = pending
            .iter()
            .copied()
            .filter(|&i| coordinator[i].is_none())
            .collect();
        if !unknown.is_empty() && !brokers.is_empty() {
            let names: Vec<&str> = unknown.iter().map(|&i| groups[i].as_str()).collect();
            let asked = coordinators.pick(brokers);
            let raced = select_ok(asked.iter().map(|addr| {
                find_coordinators(pool, addr, &names, deadline)
                    .map(|answer| match answer {
                        // An answer where every group failed is no better than the next.
                        Ok(found) if found.iter().all(Result::is_err) && asked.len() > 1 => {
                            Err(Ok(found))
                        }
                        Ok(found) => Ok(found),
                        Err(error) => Err(Err(error)),
                    })
                    .boxed()
            }))
            .await;
            let found = match raced {
                Ok((found, _)) => Ok(found),
                Err(Ok(found)) => Ok(found),
                Err(Err(error)) => {
                    if error.is_permanent() {
                        unusable.get_or_insert_with(|| error.to_string());
                    }
                    Err(format!("FindCoordinator: {error}"))
                }
            };
            match found {
                Ok(found) => {
                    for (&i, answer) in unknown.iter().zip(found) {
                        match answer {
                            Ok(addr) => {
                                coordinators.learn(&groups[i], &addr);
                                coordinator[i] = Some(addr);
                            }
                            Err((next, message)) => {
                                results[i] = Err(message);
                                if next == Next::Fail {
                                    pending.retain(|&p| p != i);
                                }
                            }
                        }
                    }
                }
                Err(message) => {
                    for &i in &unknown {
                        results[i] = Err(message.clone());
                    }
                }
            }
        }

        // One OffsetFetch per coordinator (per batch of groups), all at once.
        let mut by_coordinator: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for &i in &pending {
            if let Some(addr) = &coordinator[i] {
                by_coordinator.entry(addr).or_default().push(i);
            }
        }
        let batches: Vec<(&str, &[usize])> = by_coordinator
            .iter()
            .flat_map(|(addr, indices)| {
                indices
                    .chunks(GROUPS_PER_REQUEST)
                    .map(move |chunk| (*addr, chunk))
            })
            .collect();
        let answers: Vec<_> = join_all(
            batches
                .iter()
                .map(|(addr, indices)| offset_fetch(pool, addr, groups, indices, deadline)),
        )
        .await
        .into_iter()
        .map(|answer| {
            answer.map_err(|e| {
                if e.is_permanent() {
                    unusable.get_or_insert_with(|| e.to_string());
                }
                format!("OffsetFetch: {e}")
            })
        })
        .collect();
        let mut rediscover = Vec::new();
        for ((_, indices), answer) in batches.iter().zip(answers) {
            match answer {
                Ok(per_group) => {
                    for (&i, result) in indices.iter().zip(per_group) {
                        match result {
                            Ok(offsets) => {
                                results[i] = Ok(offsets);
                                pending.retain(|&p| p != i);
                            }
                            Err((next, message)) => {
                                results[i] = Err(message);
                                match next {
                                    Next::Retry => {}
                                    Next::Rediscover => rediscover.push(i),
                                    Next::Fail => pending.retain(|&p| p != i),
                                }
                            }
                        }
                    }
                }
                Err(message) => {
                    // The coordinator did not answer: it may have moved. (A broker that
                    // lists the group names it again next cycle.)
                    for &i in indices.iter() {
                        results[i] = Err(message.clone());
                        rediscover.push(i);
                    }
                }
            }
        }
        for i in rediscover {
            coordinators.forget(&groups[i]);
            coordinator[i] = None;
        }

        if pending.is_empty() || unusable.is_some() || Instant::now() + backoff >= deadline {
            break;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    Fetched { results, unusable }
}

type GroupAnswer<T> = Result<T, (Next, String)>;

/// The coordinator address of each group: one FindCoordinator (v4+ takes many keys), or
/// one per group from brokers older than 2.8.
async fn find_coordinators(
    pool: &Pool,
    addr: &str,
    groups: &[&str],
    deadline: Instant,
) -> Result<Vec<GroupAnswer<String>>, WireError> {
    let version = pool
        .version::<FindCoordinatorRequest>(addr, deadline)
        .await?;
    let answer_of = |error_code: i16, message: Option<&StrBytes>, host: &str, port: i32| {
        match ResponseError::try_from_code(error_code) {
            None => Ok(crate::kafka::wire::broker_address(host, port)),
            Some(error) => Err((
                match next_step(error) {
                    Next::Fail => Next::Fail,
                    _ => Next::Rediscover,
                },
                format!(
                    "FindCoordinator: {error}{}",
                    message.map(|m| format!(" ({m})")).unwrap_or_default()
                ),
            )),
        }
    };
    if version.unwrap_or(0) >= 4 {
        let mut request = FindCoordinatorRequest::default();
        request.key_type = 0; // group
        request.coordinator_keys = groups
            .iter()
            .map(|g| StrBytes::from_string(g.to_string()))
            .collect();
        let answer = pool
            .send(addr, &request, "FindCoordinator", deadline)
            .await?;
        let mut by_key: BTreeMap<&str, GroupAnswer<String>> = BTreeMap::new();
        for c in &answer.coordinators {
            by_key.insert(
                c.key.as_str(),
                answer_of(c.error_code, c.error_message.as_ref(), &c.host, c.port),
            );
        }
        return Ok(groups
            .iter()
            .map(|g| {
                by_key.remove(g).unwrap_or_else(|| {
                    Err((
                        Next::Rediscover,
                        "FindCoordinator: group missing from the answer".into(),
                    ))
                })
            })
            .collect());
    }
    let mut found = Vec::with_capacity(groups.len());
    for group in groups {
        let mut request = FindCoordinatorRequest::default();
        request.key = StrBytes::from_string(group.to_string());
        let answer = pool
            .send(addr, &request, "FindCoordinator", deadline)
            .await?;
        found.push(answer_of(
            answer.error_code,
            answer.error_message.as_ref(),
            &answer.host,
            answer.port,
        ));
    }
    Ok(found)
}

/// One OffsetFetch for `indices` of `groups` at their coordinator `addr`.
async fn offset_fetch(
    pool: &Pool,
    addr: &str,
    groups: &[String],
    indices: &[usize],
    deadline: Instant,
) -> Result<Vec<GroupAnswer<Vec<CommittedOffset>>>, WireError> {
    let mut request = OffsetFetchRequest::default();
    request.groups = indices
        .iter()
        .map(|&i| {
            let mut group = OffsetFetchRequestGroup::default();
            group.group_id = GroupId(StrBytes::from_string(groups[i].clone()));
            group.topics = None; // every partition the group committed
            group
        })
        .collect();
    let answer = pool.send(addr, &request, "OffsetFetch", deadline).await?;
    let mut by_group: BTreeMap<&str, GroupAnswer<Vec<CommittedOffset>>> = BTreeMap::new();
    for group in &answer.groups {
        let result = match ResponseError::try_from_code(group.error_code) {
            Some(error) => Err((next_step(error), format!("OffsetFetch: {error}"))),
            None => Ok(group
                .topics
                .iter()
                .flat_map(|t| {
                    let name: std::sync::Arc<str> = std::sync::Arc::from(t.name.0.as_str());
                    t.partitions
                        .iter()
                        // -1: nothing committed; a partition-level error: not readable now.
                        .filter(|p| p.error_code == 0 && p.committed_offset >= 0)
                        .map(move |p| CommittedOffset {
                            topic: name.clone(),
                            partition: p.partition_index,
                            offset: p.committed_offset,
                        })
                })
                .collect()),
        };
        by_group.insert(group.group_id.0.as_str(), result);
    }
    Ok(indices
        .iter()
        .map(|&i| {
            by_group.remove(groups[i].as_str()).unwrap_or_else(|| {
                Err((
                    Next::Rediscover,
                    "OffsetFetch: group missing from the answer".into(),
                ))
            })
        })
        .collect())
}
