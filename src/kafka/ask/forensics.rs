//! Transaction forensics: which transactions hold each pinned partition's LSO.
//!
//! Only partitions with HW > LSO are asked about, so the cost grows with the number of
//! pinned partitions, not with the cluster:
//! 1. DescribeProducers, one request per leader of a pinned partition: the producers with
//!    an open transaction there and the offset each one started at;
//! 2. ListTransactions filtered by those producer ids, one request per broker (each
//!    broker answers for the transaction-log partitions it coordinates): which
//!    transactional id each producer id belongs to, and which broker coordinates it;
//! 3. DescribeTransactions, one request per coordinator: state, start time, timeout and
//!    the partitions of the current transaction.
//!
//! `transaction.max.timeout.ms` is read once (DescribeConfigs) for the hanging rule.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use futures_util::FutureExt as _;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{
    DescribeConfigsRequest, DescribeTransactionsRequest, ListTransactionsRequest, ProducerId,
    TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::config::ClusterConfig;
use crate::kafka::capability::Capability;
use crate::kafka::features::{cause_of, Feature, FeatureState, Status};
use crate::kafka::wire::{WireClient, WireError};
use crate::kafka::{
    CoordinatorTransaction, CoordinatorView, Failures, ListedTransaction, Planned, RawSample,
    RawTransaction, Stage,
};

/// The forensics client of one cluster.
pub struct Forensics {
    cluster: String,
    wire: Arc<WireClient>,
    /// Off for a while when a broker lacks DescribeProducers (older than Kafka 3.0, or
    /// mid rolling upgrade).
    capability: Capability,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    max_timeout_ms: Option<i64>,
    /// `max_timeout_ms` is the default, not the broker's: read it again then.
    max_timeout_retry: Option<Instant>,
    /// Why it could not be read, while the default stands in.
    max_timeout_failure: Option<String>,
    /// Producer ids a coordinator listed, and when it last did.
    listed_at: HashMap<i64, Instant>,
}

/// How long a producer id that a coordinator listed counts as unavailable, not as
/// unknown to every coordinator, once none lists it while its transaction is still open:
/// a broker that just took over a transaction-log partition can answer ListTransactions
/// before it has started loading it.
const MOVING: Duration = Duration::from_secs(30);

/// How long forensics stays off after a broker turned out to lack an API, and how long a
/// defaulted `transaction.max.timeout.ms` is used before it is read again.
const RECHECK: Duration = Duration::from_secs(600);

impl Forensics {
    /// `None` when the cluster's settings turn forensics off.
    pub fn new(config: &ClusterConfig, wire: Arc<WireClient>) -> Option<Forensics> {
        if !config.transactions {
            tracing::info!(cluster = %config.name, "transaction forensics is off (transactions = false)");
            return None;
        }
        Some(Forensics {
            cluster: config.name.clone(),
            wire,
            capability: Capability::new(RECHECK),
            state: Mutex::default(),
        })
    }

    /// Fills `open_transactions` of every partition of `sample` whose HW and LSO were
    /// sampled: empty where HW == LSO, asked for where HW > LSO (`targets`, with their
    /// leaders). Failures are recorded by stage; their partitions stay `None`.
    pub async fn describe(
        &self,
        sample: &mut RawSample,
        targets: &[&Planned],
        brokers: &BTreeMap<i32, String>,
        deadline: Instant,
    ) {
        if !self.capability.usable() {
            if let Some(reason) = self.capability.off_reason() {
                let off = FeatureState::off(Status::Unsupported, reason);
                sample.features.insert(Feature::TransactionForensics, off);
            }
            return;
        }
        for p in &mut sample.partitions {
            if let (Some(hw), Some(lso)) = (p.high_watermark, p.last_stable_offset) {
                if hw <= lso {
                    p.open_transactions = Some(Vec::new());
                }
            }
        }
        self.describe_pinned(sample, targets, brokers, deadline)
            .await;
        let state = self.lock();
        sample.transaction_max_timeout_ms = state.max_timeout_ms;
        let timeout = match (&state.max_timeout_failure, state.max_timeout_ms) {
            (Some(reason), _) => {
                FeatureState::from_error(Feature::TransactionTimeout, "DescribeConfigs", reason)
            }
            (None, Some(_)) => Some(FeatureState::ok()),
            (None, None) => None,
        };
        if let Some(timeout) = timeout {
            sample.features.insert(Feature::TransactionTimeout, timeout);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn describe_pinned(
        &self,
        sample: &mut RawSample,
        targets: &[&Planned],
        brokers: &BTreeMap<i32, String>,
        deadline: Instant,
    ) {
        if targets.is_empty() {
            return;
        }
        // DescribeProducers gets half of the time, the coordinators the other half: a
        // leader that does not answer leaves the transactions of the others time to be
        // named.
        let producers_deadline =
            Instant::now() + deadline.saturating_duration_since(Instant::now()) / 2;
        let read_max_timeout = async {
            let due = {
                let state = self.lock();
                state.max_timeout_ms.is_none()
                    || state
                        .max_timeout_retry
                        .is_some_and(|at| Instant::now() >= at)
            };
            if due {
                self.read_max_timeout(brokers, producers_deadline).await;
            }
        };

        // 1. DescribeProducers per leader (while the broker's timeout cap is read).
        let mut by_leader: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
        for target in targets {
            by_leader
                .entry(target.leader)
                .or_default()
                .push(target.index);
        }
        let requests = by_leader.iter().map(|(leader, indices)| {
            let partitions = &sample.partitions;
            async move {
                let Some(addr) = brokers.get(leader) else {
                    return Err(format!("leader {leader} is not in the metadata"));
                };
                let request = super::describe_producers_request(partitions, indices);
                self.wire
                    .pool
                    .send(addr, &request, "DescribeProducers", producers_deadline)
                    .await
                    .map_err(|e| self.unsupported(e))
            }
        });
        let (answers, ()) = tokio::join!(join_all(requests), read_max_timeout);

        let mut found: HashMap<usize, Vec<RawTransaction>> = HashMap::new();
        let mut failures = Failures::default();
        for ((_, indices), answer) in by_leader.iter().zip(answers) {
            let answer = match answer {
                Ok(answer) => answer,
                Err(error) => {
                    failures.add(indices.len() as u64, error);
                    continue;
                }
            };
            let mut by_name: HashMap<(&str, i32), usize> = HashMap::new();
            for &i in indices {
                let p = &sample.partitions[i];
                by_name.insert((&p.topic, p.partition), i);
            }
            let mut answered: HashSet<usize> = HashSet::new();
            for topic in &answer.topics {
                for partition in &topic.partitions {
                    let Some(&index) =
                        by_name.get(&(topic.name.0.as_str(), partition.partition_index))
                    else {
                        continue;
                    };
                    answered.insert(index);
                    if let Some(error) = ResponseError::try_from_code(partition.error_code) {
                        let cause = cause_of(&error.to_string());
                        failures.add_as(cause, 1, || {
                            format!(
                                "{}/{}: {error}",
                                topic.name.0.as_str(),
                                partition.partition_index
                            )
                        });
                        continue;
                    }
                    let open = partition
                        .active_producers
                        .iter()
                        .filter(|p| p.current_txn_start_offset >= 0)
                        .map(|p| RawTransaction {
                            producer_id: p.producer_id.0,
                            producer_epoch: p.producer_epoch,
                            start_offset: p.current_txn_start_offset,
                            last_timestamp_ms: p.last_timestamp,
                            coordinator: CoordinatorView::Unknown,
                        })
                        .collect();
                    found.insert(index, open);
                }
            }
            let missing = indices.iter().filter(|i| !answered.contains(i)).count();
            if missing > 0 {
                failures.add(missing as u64, "partition missing from the answer");
            }
        }
        sample.fail_all(Stage::DescribeProducers, failures);

        // 2. and 3. The coordinators' view of every producer id found.
        let producer_ids: HashSet<i64> = found.values().flatten().map(|t| t.producer_id).collect();
        if !producer_ids.is_empty() {
            let views = self
                .coordinators(sample, &producer_ids, brokers, deadline)
                .await;
            for (&index, open) in found.iter_mut() {
                let p = &sample.partitions[index];
                for transaction in open.iter_mut() {
                    transaction.coordinator = match views.get(&transaction.producer_id) {
                        Some(Lookup::Found(described)) => {
                            let mut found = described.transaction.clone();
                            found.includes_partition = described
                                .partitions
                                .contains(&(p.topic.to_string(), p.partition));
                            CoordinatorView::Found(found)
                        }
                        Some(Lookup::NotFound) => CoordinatorView::NotFound,
                        Some(Lookup::Loading(broker)) => {
                            CoordinatorView::Loading { broker: *broker }
                        }
                        Some(Lookup::Unavailable) => CoordinatorView::Unavailable,
                        None => CoordinatorView::Unknown,
                    };
                }
            }
        }
        for (index, mut open) in found {
            open.sort_by_key(|t| (t.start_offset, t.producer_id));
            sample.partitions[index].open_transactions = Some(open);
        }
    }

    /// ListTransactions on every broker, and on each broker that listed some of the
    /// producer ids, right after its answer, DescribeTransactions: every broker a
    /// pipeline of its own, so one that does not answer holds up only the transactions it
    /// coordinates.
    async fn coordinators(
        &self,
        sample: &mut RawSample,
        producer_ids: &HashSet<i64>,
        brokers: &BTreeMap<i32, String>,
        deadline: Instant,
    ) -> HashMap<i64, Lookup> {
        let mut request = ListTransactionsRequest::default();
        request.producer_id_filters = producer_ids.iter().map(|&id| ProducerId(id)).collect();
        let answers = join_all(brokers.iter().map(|(&id, addr)| {
            let request = &request;
            async move {
                let listed = self
                    .wire
                    .pool
                    .send(addr, request, "ListTransactions", deadline)
                    .await;
                let ids: Vec<String> = match &listed {
                    Ok(answer) if answer.error_code == 0 => answer
                        .transaction_states
                        .iter()
                        .filter(|s| producer_ids.contains(&s.producer_id.0))
                        .map(|s| s.transactional_id.0.to_string())
                        .collect(),
                    _ => Vec::new(),
                };
                let described = if ids.is_empty() {
                    None
                } else {
                    let mut describe = DescribeTransactionsRequest::default();
                    describe.transactional_ids = ids
                        .iter()
                        .map(|id| TransactionalId(StrBytes::from_string(id.clone())))
                        .collect();
                    Some(
                        self.wire
                            .pool
                            .send(addr, &describe, "DescribeTransactions", deadline)
                            .await,
                    )
                };
                (id, addr, listed, ids, described)
            }
        }))
        .await;

        let mut complete = true;
        // ListTransactions and DescribeTransactions failures, each under its own stage.
        let mut list_failures = Failures::default();
        let mut failures = Failures::default();
        // Per coordinator that listed some: its id, the transactional ids, their answer.
        let mut described = Vec::new();
        // Producer ids some coordinator listed: if describing them fails, they are
        // unknown, not missing.
        let mut listed_ids: HashSet<i64> = HashSet::new();
        // Transactional id -> producer id, for errors DescribeTransactions answers per id.
        let mut producer_of: HashMap<String, i64> = HashMap::new();
        // A broker loading transaction-log partitions; brokers that could not be asked.
        let mut loading: Option<i32> = None;
        let mut unavailable = false;
        for (broker, addr, answer, ids, answer_described) in answers {
            match answer {
                Ok(answer) if answer.error_code == 0 => {
                    for state in answer.transaction_states {
                        if producer_ids.contains(&state.producer_id.0) {
                            listed_ids.insert(state.producer_id.0);
                            producer_of
                                .insert(state.transactional_id.0.to_string(), state.producer_id.0);
                        }
                    }
                    if let Some(answer_described) = answer_described {
                        described.push((broker, ids, answer_described));
                    }
                }
                Ok(answer) => {
                    complete = false;
                    match ResponseError::try_from_code(answer.error_code) {
                        Some(ResponseError::CoordinatorLoadInProgress) => {
                            loading.get_or_insert(broker);
                        }
                        Some(
                            ResponseError::CoordinatorNotAvailable | ResponseError::NotCoordinator,
                        ) => unavailable = true,
                        _ => {}
                    }
                    let error = ResponseError::try_from_code(answer.error_code)
                        .map(|e| e.to_string())
                        .unwrap_or_default();
                    list_failures.add(1, format!("ListTransactions on {addr}: {error}"));
                }
                Err(error) => {
                    complete = false;
                    // Down, unreachable or timed out: it may coordinate the transaction.
                    unavailable |= !error.is_unsupported();
                    list_failures.add(1, format!("ListTransactions: {error}"));
                }
            }
        }

        let mut views: HashMap<i64, Lookup> = HashMap::new();
        for (broker, listed, answer) in described {
            match answer {
                Ok(answer) => {
                    for state in answer.transaction_states {
                        if let Some(error) = ResponseError::try_from_code(state.error_code) {
                            if let Some(&producer) =
                                producer_of.get(state.transactional_id.0.as_str())
                            {
                                match error {
                                    ResponseError::CoordinatorLoadInProgress => {
                                        views.insert(producer, Lookup::Loading(broker));
                                    }
                                    ResponseError::CoordinatorNotAvailable
                                    | ResponseError::NotCoordinator => {
                                        views.insert(producer, Lookup::Unavailable);
                                    }
                                    _ => {}
                                }
                            }
                            let cause = cause_of(&error.to_string());
                            failures.add_as(cause, 1, || {
                                format!(
                                    "DescribeTransactions {:?}: {error}",
                                    state.transactional_id.0.as_str()
                                )
                            });
                            continue;
                        }
                        let (transaction, listed) = super::described_transaction(&state, broker);
                        let partitions: HashSet<(String, i32)> = listed.iter().cloned().collect();
                        sample.described_transactions.push(ListedTransaction {
                            transaction: transaction.clone(),
                            partitions: listed,
                            described: true,
                        });
                        views.insert(
                            state.producer_id.0,
                            Lookup::Found(Described {
                                transaction,
                                partitions,
                            }),
                        );
                    }
                }
                Err(error) => {
                    // The coordinator that listed them could not be asked again.
                    if !error.is_unsupported() {
                        for id in &listed {
                            if let Some(&producer) = producer_of.get(id) {
                                views.insert(producer, Lookup::Unavailable);
                            }
                        }
                    }
                    failures.add(1, format!("DescribeTransactions: {error}"));
                }
            }
        }
        // Producer ids no coordinator listed while one was loading or could not be asked:
        // say so rather than "unknown".
        for &id in producer_ids {
            if !listed_ids.contains(&id) {
                if let Some(broker) = loading {
                    views.entry(id).or_insert(Lookup::Loading(broker));
                } else if unavailable {
                    views.entry(id).or_insert(Lookup::Unavailable);
                }
            }
        }
        let now = Instant::now();
        let mut state = self.lock();
        state
            .listed_at
            .retain(|_, at| now.saturating_duration_since(*at) < MOVING);
        for &id in &listed_ids {
            state.listed_at.insert(id, now);
        }
        if complete {
            // Every coordinator answered: a producer id none of them listed has no
            // transactional id behind it any more (or one this principal may not describe),
            // unless a coordinator listed it a moment ago: then it is moving to another.
            for &id in producer_ids {
                if !listed_ids.contains(&id) {
                    let moving = state.listed_at.contains_key(&id);
                    views.entry(id).or_insert(if moving {
                        Lookup::Unavailable
                    } else {
                        Lookup::NotFound
                    });
                }
            }
        }
        drop(state);
        sample.fail_all(Stage::ListTransactions, list_failures);
        sample.fail_all(Stage::DescribeTransactions, failures);
        views
    }

    /// DescribeConfigs for `transaction.max.timeout.ms`, asked of every broker at once
    /// (each for its own setting), the first answer winning; kept once read. When it
    /// cannot be read (no DescribeConfigs permission, an error), the broker default is
    /// used and the value is asked for again after [`RECHECK`].
    async fn read_max_timeout(&self, brokers: &BTreeMap<i32, String>, deadline: Instant) {
        if brokers.is_empty() {
            return;
        }
        let asks = brokers.iter().map(|(id, addr)| {
            let mut resource = DescribeConfigsResource::default();
            resource.resource_type = 4; // BROKER
            resource.resource_name = StrBytes::from_string(id.to_string());
            resource.configuration_keys = Some(vec![StrBytes::from_static_str(
                "transaction.max.timeout.ms",
            )]);
            let mut request = DescribeConfigsRequest::default();
            request.resources = vec![resource];
            async move {
                let answer = self
                    .wire
                    .pool
                    .send(addr, &request, "DescribeConfigs", deadline)
                    .await
                    .map_err(|e| e.to_string())?;
                answer
                    .results
                    .iter()
                    .find_map(|r| match ResponseError::try_from_code(r.error_code) {
                        Some(error) => Some(Err(error.to_string())),
                        None => r
                            .configs
                            .iter()
                            .find(|c| c.name.as_str() == "transaction.max.timeout.ms")
                            .and_then(|c| c.value.as_ref()?.as_str().parse::<i64>().ok())
                            .map(Ok),
                    })
                    .unwrap_or_else(|| Err("not in the answer".into()))
            }
            .boxed()
        });
        let value = futures_util::future::select_ok(asks)
            .await
            .map(|(value, _)| value);
        let mut state = self.lock();
        match value {
            Ok(value) => {
                state.max_timeout_ms = Some(value);
                state.max_timeout_retry = None;
                state.max_timeout_failure = None;
            }
            Err(reason) => {
                if state.max_timeout_ms.is_none() {
                    tracing::warn!(
                        cluster = %self.cluster,
                        "cannot read the brokers' transaction.max.timeout.ms ({reason}); the hanging rule \
                         assumes Kafka's default, 15 min, and asks again in 10 min (needs DescribeConfigs on the cluster)"
                    );
                }
                state.max_timeout_ms = Some(state.max_timeout_ms.unwrap_or(DEFAULT_MAX_TIMEOUT_MS));
                state.max_timeout_retry = Some(Instant::now() + RECHECK);
                state.max_timeout_failure = Some(reason);
            }
        }
    }

    /// Turns forensics off for a while when a broker lacks the APIs (older than Kafka
    /// 3.0, or not yet upgraded in a rolling upgrade); passes other errors through.
    fn unsupported(&self, error: WireError) -> String {
        if error.is_unsupported() {
            let reason = format!("{error} (Kafka 3.0 or later is needed)");
            if self.capability.turn_off(reason.clone()) {
                tracing::warn!(
                    cluster = %self.cluster,
                    "transaction forensics is off for this cluster: {reason}; every other metric is still \
                     sampled; asked again in {} min",
                    RECHECK.as_secs() / 60
                );
            }
            return reason;
        }
        error.to_string()
    }
}

/// Kafka's default `transaction.max.timeout.ms`.
pub const DEFAULT_MAX_TIMEOUT_MS: i64 = 15 * 60 * 1000;

/// What the coordinators said of one producer id.
enum Lookup {
    NotFound,
    /// Not listed while this broker was loading the transaction log.
    Loading(i32),
    /// Not listed, or listed but not described, while its coordinator could not be asked.
    Unavailable,
    Found(Described),
}

/// DescribeTransactions' answer with the partitions of the current transaction.
struct Described {
    transaction: CoordinatorTransaction,
    partitions: HashSet<(String, i32)>,
}
