//! Every open transaction of the cluster, from its coordinators, at a cost that does not
//! grow with the number of transactional ids:
//! 1. ListTransactions on every broker (each answers for the transaction-log partitions
//!    it coordinates), filtered by state (the open ones) and, from ListTransactions v1
//!    (KIP-994, Kafka 3.8), by duration: only transactions open at least
//!    `transaction_list_min_age` come back. At rest that is one small answer per broker.
//!    A broker without v1 lists its open transactions of every age, and the exporter
//!    drops the young ones once described.
//! 2. DescribeTransactions, one request per coordinator that listed some, for at most
//!    `transaction_list_detail` + [`DESCRIBE_MARGIN`] of what it listed (start time,
//!    timeout, epoch, partitions; those detailed in the previous cycle first, known to be
//!    old, then in the broker's order), and for the detailed transactional ids seen
//!    `Ongoing` in the previous cycle that are no longer listed open: how they ended
//!    (committed, aborted, or ended by a new producer initialisation). What forensics
//!    already described in the cycle (the transactions that pin exported partitions) is
//!    not asked again: a coordinator whose long transactions all pin costs no second
//!    request. A broker without the duration filter has every listed one described: their
//!    age decides whether they count.
//!
//! Every broker is a pipeline of its own, bounded by the stage's deadline: one that does
//! not answer costs only the transactions it coordinates.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures_util::future::join_all;
use kafka_protocol::messages::{
    DescribeTransactionsRequest, ListTransactionsRequest, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::config::ClusterConfig;
use crate::kafka::features::cause_of;
use crate::kafka::wire::WireClient;
use crate::kafka::{
    CoordinatorTransaction, Failures, ListedTransaction, RawSample, Stage, TransactionList,
    OPEN_TRANSACTION_STATES,
};

/// InitProducerId's API key.
const INIT_PRODUCER_ID: i16 = 22;

/// The inventory client of one cluster.
pub struct Inventory {
    wire: Arc<WireClient>,
    min_age: Duration,
    detail: usize,
    /// Transactional ids detailed and seen `Ongoing` in the previous cycle, with the broker
    /// that coordinated them: asked again when no longer listed.
    /// With each, how many more cycles it is followed once no longer open.
    watched: Mutex<HashMap<String, (i32, u32)>>,
}

/// Cycles an id is followed after it stopped being open, while its coordinator shows it
/// on the way to an abort (PrepareAbort, CompleteAbort): a new producer instance fencing
/// it initialises only once the abort is complete.
const FOLLOW_CYCLES: u32 = 3;

/// At most this many ids are followed up in one cycle.
const MAX_FOLLOWED: usize = 1000;

/// Listed transactions a coordinator describes beyond `transaction_list_detail`: the
/// oldest are known only once described.
pub const DESCRIBE_MARGIN: usize = 10;

/// Answers to a DescribeTransactions of one id that say its coordinator moved (or is
/// loading): not a failure; the id stays watched.
fn moved(error: ResponseError) -> bool {
    matches!(
        error,
        ResponseError::NotCoordinator
            | ResponseError::CoordinatorNotAvailable
            | ResponseError::CoordinatorLoadInProgress
            | ResponseError::TransactionalIdNotFound
    )
}

impl Inventory {
    /// `None` when the cluster's settings turn the inventory off.
    pub fn new(config: &ClusterConfig, wire: Arc<WireClient>) -> Option<Inventory> {
        if !(config.transactions && config.transaction_list) {
            return None;
        }
        Some(Inventory {
            wire,
            min_age: config.transaction_list_min_age,
            detail: config.transaction_list_detail,
            watched: Mutex::default(),
        })
    }

    /// Fills `sample.transaction_list`; failures are recorded by stage.
    pub async fn list(
        &self,
        sample: &mut RawSample,
        brokers: &BTreeMap<i32, String>,
        deadline: std::time::Instant,
    ) {
        let min_age_ms = i64::try_from(self.min_age.as_millis()).unwrap_or(i64::MAX);
        // Forensics' DescribeTransactions of this cycle: not asked again.
        let shared: HashMap<String, ListedTransaction> = sample
            .described_transactions
            .iter()
            .map(|t| (t.transaction.transactional_id.clone(), t.clone()))
            .collect();
        let watched: HashMap<String, (i32, u32)> = self
            .watched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();

        let mut request = ListTransactionsRequest::default();
        request.state_filters = OPEN_TRANSACTION_STATES
            .iter()
            .map(|s| StrBytes::from_static_str(s))
            .collect();
        let answers = join_all(brokers.iter().map(|(&broker, addr)| {
            let (request, watched, shared) = (&request, &watched, &shared);
            async move {
                let version = self
                    .wire
                    .pool
                    .version::<ListTransactionsRequest>(addr, deadline)
                    .await;
                let filtered_here = !matches!(version, Ok(Some(v)) if v >= 1);
                // InitProducerId v6 carries two-phase commit (KIP-939).
                let two_phase = matches!(
                    self.wire.pool.advertised(addr, INIT_PRODUCER_ID, deadline).await,
                    Ok(Some(v)) if v >= 6
                );
                let mut request = request.clone();
                if !filtered_here {
                    request.duration_filter = min_age_ms;
                }
                let listed = match version {
                    Err(error) => Err(error.to_string()),
                    Ok(None) => Err(format!("{addr} does not support ListTransactions")),
                    Ok(Some(_)) => self
                        .wire
                        .pool
                        .send(addr, &request, "ListTransactions", deadline)
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(
                            |answer| match ResponseError::try_from_code(answer.error_code) {
                                Some(error) => Err(format!("ListTransactions on {addr}: {error}")),
                                None => Ok(answer.transaction_states),
                            },
                        ),
                };
                let listed: Vec<CoordinatorTransaction> = match listed {
                    Ok(states) => states
                        .into_iter()
                        .map(|s| CoordinatorTransaction {
                            transactional_id: s.transactional_id.0.to_string(),
                            coordinator: broker,
                            state: s.transaction_state.to_string(),
                            producer_id: s.producer_id.0,
                            producer_epoch: -1,
                            start_time_ms: -1,
                            timeout_ms: -1,
                            includes_partition: false,
                        })
                        .collect(),
                    Err(error) => return (broker, filtered_here, two_phase, Err(error)),
                };
                // Listed here, and ids watched on this coordinator that it no longer
                // lists open (how they ended).
                let listed_ids: HashSet<&str> =
                    listed.iter().map(|t| t.transactional_id.as_str()).collect();
                // At most detail + margin of the listed ones, those detailed before first
                // (known old); all of them where the broker does not filter by age.
                let cap = if filtered_here {
                    usize::MAX
                } else {
                    self.detail + DESCRIBE_MARGIN
                };
                let mut candidates: Vec<&str> = listed
                    .iter()
                    .map(|t| t.transactional_id.as_str())
                    .filter(|id| !shared.contains_key(*id))
                    .collect();
                candidates.dedup();
                candidates.sort_by_key(|id| !watched.contains_key(*id));
                let mut ask: Vec<String> = candidates
                    .into_iter()
                    .take(cap)
                    .map(str::to_string)
                    .collect();
                ask.extend(
                    watched
                        .iter()
                        .filter(|(id, &(at, _))| {
                            at == broker
                                && !listed_ids.contains(id.as_str())
                                && !shared.contains_key(id.as_str())
                        })
                        .map(|(id, _)| id.clone())
                        .take(MAX_FOLLOWED),
                );
                ask.sort();
                let described = if ask.is_empty() {
                    Ok(Vec::new())
                } else {
                    let mut describe = DescribeTransactionsRequest::default();
                    describe.transactional_ids = ask
                        .iter()
                        .map(|id| TransactionalId(StrBytes::from_string(id.clone())))
                        .collect();
                    self.wire
                        .pool
                        .send(addr, &describe, "DescribeTransactions", deadline)
                        .await
                        .map(|answer| answer.transaction_states)
                        .map_err(|e| format!("DescribeTransactions on {addr}: {e}"))
                };
                (broker, filtered_here, two_phase, Ok((listed, described)))
            }
        }))
        .await;

        let now_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let mut list = TransactionList {
            complete: true,
            ..TransactionList::default()
        };
        let mut list_failures = Failures::default();
        let mut describe_failures = Failures::default();
        let mut unanswered: HashSet<i32> = HashSet::new();
        // Asked ids whose coordinator moved (or is loading) since it listed them.
        let mut moved_ids: HashMap<String, i32> = HashMap::new();
        for (broker, filtered_here, two_phase, answer) in answers {
            let (listed, described) = match answer {
                Ok(answer) => answer,
                Err(error) => {
                    unanswered.insert(broker);
                    list.complete = false;
                    list_failures.add(1, error);
                    continue;
                }
            };
            list.filtered_here |= filtered_here;
            list.two_phase_commit |= two_phase;
            let mut by_id: HashMap<String, (CoordinatorTransaction, Vec<(String, i32)>)> =
                HashMap::new();
            match described {
                Ok(states) => {
                    for state in states {
                        if let Some(error) = ResponseError::try_from_code(state.error_code) {
                            if moved(error) {
                                moved_ids.insert(state.transactional_id.0.to_string(), broker);
                                continue;
                            }
                            let cause = cause_of(&error.to_string());
                            describe_failures.add_as(cause, 1, || {
                                format!(
                                    "DescribeTransactions {:?}: {error}",
                                    state.transactional_id.0.as_str()
                                )
                            });
                            continue;
                        }
                        let (found, partitions) = super::described_transaction(&state, broker);
                        by_id.insert(found.transactional_id.clone(), (found, partitions));
                    }
                }
                Err(error) => describe_failures.add(1, error),
            }
            let listed_ids: HashSet<String> =
                listed.iter().map(|t| t.transactional_id.clone()).collect();
            for from_list in listed {
                let id = from_list.transactional_id.clone();
                let entry = match by_id.remove(&id) {
                    Some((transaction, partitions)) => ListedTransaction {
                        transaction,
                        partitions,
                        described: true,
                    },
                    None if shared.contains_key(&id) => shared[&id].clone(),
                    None => ListedTransaction {
                        transaction: from_list,
                        partitions: Vec::new(),
                        described: false,
                    },
                };
                // Young ones are dropped here: without the duration filter they are
                // listed, and a transaction that ended and began anew between
                // ListTransactions and DescribeTransactions is described young (an
                // undescribed one is kept: its age is unknown).
                let young = entry.described
                    && entry.transaction.start_time_ms >= 0
                    && now_ms - entry.transaction.start_time_ms < min_age_ms;
                if !young {
                    list.open.push(entry);
                }
            }
            // What is left was asked as a follow-up of a watched id.
            for (id, (found, _)) in by_id {
                if !listed_ids.contains(&id) {
                    list.followed.push(found);
                }
            }
        }
        sample.fail_all(Stage::ListTransactions, list_failures);
        sample.fail_all(Stage::DescribeTransactions, describe_failures);
        list.open.sort_by(|a, b| {
            start_key(&a.transaction)
                .cmp(&start_key(&b.transaction))
                .then_with(|| {
                    a.transaction
                        .transactional_id
                        .cmp(&b.transaction.transactional_id)
                })
        });
        list.followed
            .sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));

        // Watched next cycle: the detailed ones (the first `detail` distinct ids, as
        // derived), described and `Ongoing`.
        let mut next: HashMap<String, (i32, u32)> = HashMap::new();
        let mut detailed: HashSet<&str> = HashSet::new();
        for t in &list.open {
            if !OPEN_TRANSACTION_STATES.contains(&t.transaction.state.as_str()) {
                continue;
            }
            if detailed.len() >= self.detail {
                break;
            }
            if !detailed.insert(t.transaction.transactional_id.as_str()) {
                continue;
            }
            if t.described && t.transaction.state == "Ongoing" {
                next.insert(
                    t.transaction.transactional_id.clone(),
                    (t.transaction.coordinator, FOLLOW_CYCLES),
                );
            }
        }
        // Its coordinator moved: asked again (of the broker that had it) for a few cycles
        // more, until it is listed where it is now.
        for (id, at) in moved_ids {
            if let Some(&(_, left)) = watched.get(&id) {
                if left > 1 {
                    next.entry(id).or_insert((at, left - 1));
                }
            }
        }
        // Followed a few cycles more while on the way to an abort.
        for found in &list.followed {
            let left = watched.get(&found.transactional_id).map_or(0, |w| w.1);
            let aborting = matches!(found.state.as_str(), "PrepareAbort" | "CompleteAbort");
            if aborting && left > 1 {
                next.entry(found.transactional_id.clone())
                    .or_insert((found.coordinator, left - 1));
            }
        }
        // A broker that did not answer may still coordinate what was watched there.
        for (id, &(at, left)) in &watched {
            if unanswered.contains(&at) {
                next.entry(id.clone()).or_insert((at, left));
            }
        }
        if next.len() > MAX_FOLLOWED {
            let mut ids: Vec<String> = next.keys().cloned().collect();
            ids.sort();
            for id in ids.into_iter().skip(MAX_FOLLOWED) {
                next.remove(&id);
            }
        }
        *self.watched.lock().unwrap_or_else(|p| p.into_inner()) = next;
        sample.transaction_list = Some(list);
    }
}

/// Oldest first; transactions without a known start time last.
fn start_key(t: &CoordinatorTransaction) -> (bool, i64) {
    (t.start_time_ms < 0, t.start_time_ms)
}
