//! Record reads for lag that never counts markers: which parts of which partitions'
//! logs a cycle reads (Fetch, batch headers only), and what it remembers between cycles.
//!
//! Reads cost a bounded share of what is produced. Only markers make `HW - committed`
//! wrong, and only transactional producers write markers, so a partition is first
//! classified: a partition where a group sits within `read_window` of the HW is asked
//! about with DescribeProducers (one request per leader, again every ten minutes); a
//! producer with a transaction open or a coordinator epoch set is transactional. An
//! open transaction (forensics) or a transactional batch in any read also marks it.
//! Where the brokers cannot tell, markers are assumed.
//!
//! Two kinds of read, both planned per partition leader:
//! - **Windows**, on transactional partitions only. Where some group sits at most
//!   `read_window` records below the HW, the log is read from the lowest such offset up
//!   to the HW (read_uncommitted) and kept as a [`LogExtent`]; on a partition an open
//!   transaction pins, from the LSO where that is as near the HW, so that every batch of
//!   the open transactions is read before their markers. The next cycle extends it
//!   while its end is at most `read_window` below that group (a caught-up group moves
//!   past the end every cycle: reading on from the end leaves no transaction between
//!   two cycles unread, so every abort marker is seen with its batches); once the group
//!   is further ahead, reading afresh from the group is smaller than catching up, and
//!   the window starts over there, the gap unread. A window's reads are capped per
//!   partition and per leader and cycle, the leader's windows taking turns first; one
//!   that is not complete counts its unread offsets (an upper bound), and one the log
//!   moved away from (OFFSET_OUT_OF_RANGE) is dropped and started over. A cluster at
//!   rest costs no Fetch at all.
//! - **Positions.** For every other group (on a plain partition, any group: there its
//!   lag `HW - committed` is exact already) and for the record at the LSO outside a
//!   window, one short read at the offset gives the write time of the first record not
//!   read: read_committed below the LSO (the answer lists the aborted transactions),
//!   read_uncommitted at or above it. A broker answers with at least the whole record
//!   batch at the offset, so a position costs one batch; the record at an offset never
//!   changes, so each is read once and kept while it is asked for.
//!
//! What the windows read is also counted, each offset once over the life of the
//! process, into the cost of exactly-once per topic ([`EosCost`]: markers by type,
//! aborted records, offsets scanned); positions are not. Gaps between windows count
//! nowhere, so the totals are a sample of each log, not its production.
//!
//! Each round sends at most one Fetch per leader and isolation level (a partition may
//! appear once in a Fetch), and a cycle makes at most [`ROUNDS`] rounds: requests per
//! cycle grow with brokers, not with partitions or groups. Each round but the last gets
//! half of the time left, and the classification a third: a leader that does not answer
//! fails its own partitions once, and the other leaders' rounds go on. What is not read
//! in time is absent (time lag) or counted as every offset (lag), never guessed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::config::ClusterConfig;
use crate::kafka::records::{parse_batches, CostTally, EosCost, LogExtent, Sampled};
use crate::kafka::wire::WireClient;
use crate::kafka::{PartitionLog, Planned, RawSample, Stage};

/// Rounds of Fetch requests per cycle at most.
const ROUNDS: usize = 4;
/// Bytes one window read may bring per partition and round.
const WINDOW_BYTES: i32 = 1024 * 1024;
/// Bytes the window reads of one partition may bring in one cycle.
const PARTITION_CYCLE_BYTES: i64 = 4 * 1024 * 1024;
/// Bytes the window reads from one leader may bring in one cycle.
const LEADER_CYCLE_BYTES: i64 = 16 * 1024 * 1024;
/// Bytes one position read brings: a few batch headers are all it needs (a batch cut
/// short still has its header).
const POSITION_BYTES: i32 = 4 * 1024;
/// Bytes one Fetch answer may hold in all.
const REQUEST_BYTES: i32 = 32 * 1024 * 1024;
/// How long what DescribeProducers said of a partition is trusted.
const RECLASSIFY: Duration = Duration::from_secs(10 * 60);

type PartitionKey = (Arc<str>, i32);

/// A short read at one offset, under one isolation level.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct PositionKey {
    topic: Arc<str>,
    partition: i32,
    offset: i64,
    read_committed: bool,
}

/// The record reader of one cluster.
pub struct Reads {
    cluster: String,
    wire: Arc<WireClient>,
    window: i64,
    state: Mutex<State>,
    /// Apart from `state`, which a cycle takes for its duration: a cycle that panics
    /// loses what it read, and must not lose what was counted (offsets would count twice).
    counted: Mutex<Counted>,
}

/// The cost of exactly-once counted from the windows ([`EosCost`]).
#[derive(Default)]
struct Counted {
    /// Per partition, how far it was counted.
    tallies: HashMap<PartitionKey, CostTally>,
    /// Per topic, over the life of the process.
    cost: BTreeMap<Arc<str>, EosCost>,
}

#[derive(Default)]
struct State {
    windows: HashMap<PartitionKey, Arc<LogExtent>>,
    positions: HashMap<PositionKey, Arc<LogExtent>>,
    /// Whether a partition may hold commit/abort markers, and since when that is known.
    producers: HashMap<PartitionKey, Producers>,
    /// The largest record batch read of each topic lately: a position read asks for that
    /// much, since a broker sends nothing for a partition whose batch at the offset is
    /// larger than asked (except for the first partition of an answer, which gets its
    /// whole batch whatever its size).
    batch_bytes: HashMap<Arc<str>, i32>,
    /// Cycles so far: rotates which windows go first when a leader's budget runs out.
    cycle: usize,
    /// A missing Read ACL is logged once, not every cycle.
    warned_unauthorized: bool,
}

/// What is known of the producers that write to a partition.
#[derive(Debug, Clone, Copy)]
struct Producers {
    /// A transactional producer writes there (or it could not be told): markers may lie
    /// anywhere above a committed offset.
    transactional: bool,
    checked: Instant,
}

/// What one partition needs read in this cycle.
#[derive(Debug, Default)]
struct Need {
    /// Read the log from here to the HW (the window).
    window_from: Option<i64>,
    positions: Vec<PositionKey>,
}

/// One partition's part of one Fetch.
struct Item {
    index: usize,
    offset: i64,
    bytes: i32,
    /// `None`: extends the window; `Some`: a position read.
    position: Option<PositionKey>,
}

/// Why one partition's part of a Fetch failed.
struct ReadError {
    message: String,
    /// The offset is no longer (or not yet) in the log: the window starts over.
    out_of_range: bool,
}

impl From<String> for ReadError {
    fn from(message: String) -> ReadError {
        ReadError {
            message,
            out_of_range: false,
        }
    }
}

impl Reads {
    /// `None` when the cluster's settings turn record reads off.
    pub fn new(config: &ClusterConfig, wire: Arc<WireClient>) -> Option<Reads> {
        if !config.read_records {
            tracing::info!(cluster = %config.name, "record reads are off (read_records = false): lags count commit/abort markers and time lags are not exported");
            return None;
        }
        Some(Reads {
            cluster: config.name.clone(),
            wire,
            window: config.read_window as i64,
            state: Mutex::default(),
            counted: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads what this cycle needs and attaches it to each partition of `sample` as
    /// [`PartitionLog`]. Call after the HW is sampled, with the groups' committed offsets
    /// in `sample`.
    pub async fn read(
        &self,
        sample: &mut RawSample,
        planned: &[Planned],
        brokers: &BTreeMap<i32, String>,
        deadline: Instant,
    ) {
        let mut state = std::mem::take(&mut *self.lock());
        state.cycle = state.cycle.wrapping_add(1);
        let now = Instant::now();
        let leaders: HashMap<usize, i32> = planned.iter().map(|p| (p.index, p.leader)).collect();

        // Which partitions may hold markers. An open transaction (forensics) or a
        // transactional batch read proves it; where a window would be read,
        // DescribeProducers says whether any producer is transactional.
        let present: HashSet<PartitionKey> = sample
            .partitions
            .iter()
            .map(|p| (p.topic.clone(), p.partition))
            .collect();
        state.producers.retain(|key, _| present.contains(key));
        // A deleted topic's cost goes with it; a log truncated or recreated below what was
        // counted is counted afresh.
        {
            let mut counted = self.counted.lock().unwrap_or_else(|p| p.into_inner());
            let high_watermarks: HashMap<PartitionKey, Option<i64>> = sample
                .partitions
                .iter()
                .map(|p| ((p.topic.clone(), p.partition), p.high_watermark))
                .collect();
            counted
                .tallies
                .retain(|key, tally| match high_watermarks.get(key) {
                    None => false,
                    Some(hw) => {
                        !matches!((hw, tally.counted_to()), (Some(hw), Some(to)) if *hw < to)
                    }
                });
            let topics: HashSet<&Arc<str>> = present.iter().map(|(topic, _)| topic).collect();
            counted.cost.retain(|topic, _| topics.contains(topic));
        }
        let mut failures: BTreeMap<usize, String> = BTreeMap::new();
        let mut aborted = Vec::new();
        // Batch sizes are learned afresh now and then: producers change their settings.
        if state.cycle.is_multiple_of(100) {
            state.batch_bytes.clear();
        }
        for p in &sample.partitions {
            // Not HW > LSO alone: on a busy partition the HW, sampled after the LSO, is
            // ahead of it without any transaction.
            if p.open_transactions.as_ref().is_some_and(|t| !t.is_empty()) {
                {
                    state.producers.insert(
                        (p.topic.clone(), p.partition),
                        Producers {
                            transactional: true,
                            checked: now,
                        },
                    );
                }
            }
        }
        let unclassified: Vec<usize> = near_end(sample, self.window)
            .into_iter()
            .filter(|&i| {
                let p = &sample.partitions[i];
                state
                    .producers
                    .get(&(p.topic.clone(), p.partition))
                    .is_none_or(|k| now.duration_since(k.checked) >= RECLASSIFY)
            })
            .collect();
        if !unclassified.is_empty() {
            // A third of the time at most: a leader that does not answer leaves the
            // others' reads time of their own.
            let classify_deadline =
                Instant::now() + deadline.saturating_duration_since(Instant::now()) / 3;
            let (found, unreachable) = self
                .describe_producers(sample, &unclassified, &leaders, brokers, classify_deadline)
                .await;
            failures.extend(unreachable);
            for index in unclassified {
                let p = &sample.partitions[index];
                let key = (p.topic.clone(), p.partition);
                // Not told: assume markers, as before anything was known. Once seen
                // transactional, a partition stays so: a producer's state expires on the
                // broker (producer.id.expiration.ms) while its markers stay in the log.
                let was = state.producers.get(&key).is_some_and(|k| k.transactional);
                let transactional = was || found.get(&index).copied().unwrap_or(true);
                state.producers.insert(
                    (p.topic.clone(), p.partition),
                    Producers {
                        transactional,
                        checked: now,
                    },
                );
            }
        }
        let may_hold_markers: Vec<bool> = sample
            .partitions
            .iter()
            .map(|p| {
                state
                    .producers
                    .get(&(p.topic.clone(), p.partition))
                    .is_none_or(|k| k.transactional)
            })
            .collect();
        let needs = plan(sample, self.window, &may_hold_markers);

        // Windows: extend what is still useful, start over where a fresh read is
        // smaller, forget what is not needed.
        let mut window_keys: HashMap<PartitionKey, usize> = HashMap::new();
        for (index, need) in needs.iter().enumerate() {
            let p = &sample.partitions[index];
            let key = (p.topic.clone(), p.partition);
            let (Some(from), Some(hw)) = (need.window_from, p.high_watermark) else {
                continue;
            };
            let existing = state.windows.get(&key).map(|w| (w.from(), w.to()));
            if keeps_window(existing, from, hw, self.window) {
                let window = state.windows.get_mut(&key).expect("checked above");
                Arc::make_mut(window).trim_before(from);
            } else {
                state
                    .windows
                    .insert(key.clone(), Arc::new(LogExtent::new(from)));
            }
            window_keys.insert(key, index);
        }
        state.windows.retain(|key, _| window_keys.contains_key(key));
        let wanted: HashSet<&PositionKey> = needs.iter().flat_map(|n| n.positions.iter()).collect();
        state.positions.retain(|key, _| wanted.contains(key));

        let mut partition_spent: HashMap<usize, i64> = HashMap::new();
        let mut leader_spent: HashMap<i32, i64> = HashMap::new();
        for round in 0..ROUNDS {
            // Each round but the last gets half of the time left: a leader that does not
            // answer fails its partitions in one round, and the others still have the
            // time for theirs.
            let round_deadline = if round + 1 < ROUNDS {
                Instant::now() + deadline.saturating_duration_since(Instant::now()) / 2
            } else {
                deadline
            };
            // At most one item per partition and isolation level in a round; positions
            // first, then windows in an order that rotates each cycle.
            let mut uncommitted: BTreeMap<i32, Vec<Item>> = BTreeMap::new();
            let mut committed: BTreeMap<i32, Vec<Item>> = BTreeMap::new();
            let mut windows: BTreeMap<i32, Vec<Item>> = BTreeMap::new();
            for (index, need) in needs.iter().enumerate() {
                if failures.contains_key(&index) {
                    continue;
                }
                let Some(&leader) = leaders.get(&index) else {
                    continue;
                };
                let p = &sample.partitions[index];
                let hw = p.high_watermark.unwrap_or(0);
                let key = (p.topic.clone(), p.partition);
                let mut busy_uncommitted = false;
                let budget = (PARTITION_CYCLE_BYTES
                    - partition_spent.get(&index).copied().unwrap_or(0))
                .min(LEADER_CYCLE_BYTES - leader_spent.get(&leader).copied().unwrap_or(0));
                if let Some(window) = state.windows.get(&key).filter(|w| w.to() < hw) {
                    if budget > 0 {
                        windows.entry(leader).or_default().push(Item {
                            index,
                            offset: window.to(),
                            bytes: budget.min(i64::from(WINDOW_BYTES)) as i32,
                            position: None,
                        });
                    }
                    busy_uncommitted = true;
                }
                let mut busy_committed = false;
                for position in &need.positions {
                    if state.positions.contains_key(position) {
                        continue;
                    }
                    let (busy, queue) = if position.read_committed {
                        (&mut busy_committed, &mut committed)
                    } else {
                        (&mut busy_uncommitted, &mut uncommitted)
                    };
                    if *busy {
                        continue;
                    }
                    *busy = true;
                    let bytes = state
                        .batch_bytes
                        .get(&p.topic)
                        .copied()
                        .unwrap_or(POSITION_BYTES)
                        .clamp(POSITION_BYTES, WINDOW_BYTES);
                    queue.entry(leader).or_default().push(Item {
                        index,
                        offset: position.offset,
                        bytes,
                        position: Some(position.clone()),
                    });
                }
            }
            for (leader, mut items) in windows {
                let turn = state.cycle % items.len();
                items.rotate_left(turn);
                uncommitted.entry(leader).or_default().extend(items);
            }
            if uncommitted.is_empty() && committed.is_empty() || Instant::now() >= deadline {
                break;
            }
            let requests = uncommitted
                .into_iter()
                .map(|(leader, items)| (leader, false, items))
                .chain(
                    committed
                        .into_iter()
                        .map(|(leader, items)| (leader, true, items)),
                );
            let partitions = &sample.partitions;
            let leader_spent_now = &leader_spent;
            let answers = join_all(requests.map(|(leader, read_committed, items)| async move {
                // The leader's window budget bounds the whole answer, positions aside.
                let positions: i64 = items
                    .iter()
                    .filter(|i| i.position.is_some())
                    .map(|i| i64::from(i.bytes))
                    .sum();
                let windows_left =
                    LEADER_CYCLE_BYTES - leader_spent_now.get(&leader).copied().unwrap_or(0);
                let max_bytes = (positions + windows_left.max(0))
                    .clamp(i64::from(POSITION_BYTES), i64::from(REQUEST_BYTES))
                    as i32;
                let answer = match brokers.get(&leader) {
                    Some(addr) => self
                        .fetch(
                            addr,
                            partitions,
                            &items,
                            read_committed,
                            max_bytes,
                            round_deadline,
                        )
                        .await
                        .map_err(|e| e.to_string()),
                    None => Err(format!("leader {leader} is not in the metadata")),
                };
                (leader, items, answer)
            }))
            .await;
            let mut progress = false;
            for (leader, items, answer) in answers {
                let answer = match answer {
                    Ok(answer) => answer,
                    Err(error) => {
                        for item in &items {
                            failures.entry(item.index).or_insert_with(|| error.clone());
                        }
                        continue;
                    }
                };
                for (item, result) in items.into_iter().zip(answer) {
                    let p = &sample.partitions[item.index];
                    let key = (p.topic.clone(), p.partition);
                    if item.position.is_none() {
                        let bytes = result.as_ref().map_or(0, |read| read.records.len() as i64);
                        *partition_spent.entry(item.index).or_default() += bytes;
                        *leader_spent.entry(leader).or_default() += bytes;
                    }
                    match result.and_then(|read| {
                        parse_batches(&read.records)
                            .map(|batches| (read, batches))
                            .map_err(|e| format!("{}/{}: {e}", p.topic, p.partition).into())
                    }) {
                        Ok((read, batches)) => {
                            if let Some(size) = first_batch_bytes(&read.records) {
                                let hint = state.batch_bytes.entry(p.topic.clone()).or_default();
                                *hint = (*hint).max(size);
                            }
                            // A transactional batch anywhere: this partition has markers.
                            if batches.iter().any(|b| b.transactional) {
                                state.producers.insert(
                                    key.clone(),
                                    Producers {
                                        transactional: true,
                                        checked: now,
                                    },
                                );
                            }
                            // An empty answer below the broker's bound was not served
                            // (the answer's byte budget ran out): asked again next round.
                            let bound = match &item.position {
                                Some(k) if k.read_committed => read.last_stable_offset,
                                _ => read.high_watermark,
                            };
                            if batches.is_empty() && item.offset < bound {
                                continue;
                            }
                            progress = true;
                            let end = batches
                                .last()
                                .map_or(item.offset.max(bound), |b| b.last_offset + 1);
                            match item.position {
                                None => {
                                    if let Some(window) = state.windows.get_mut(&key) {
                                        Arc::make_mut(window).append(&batches, end, None);
                                        let mut counted =
                                            self.counted.lock().unwrap_or_else(|p| p.into_inner());
                                        let sampled = Sampled {
                                            last_stable_offset: p.last_stable_offset,
                                            high_watermark: p.high_watermark,
                                        };
                                        let tally = counted.tallies.entry(key.clone()).or_default();
                                        let cost = tally.count(&batches, item.offset, end, sampled);
                                        aborted.extend(
                                            tally
                                                .take_aborted()
                                                .into_iter()
                                                .map(|t| (key.0.clone(), key.1, t)),
                                        );
                                        *counted.cost.entry(key.0.clone()).or_default() += cost;
                                    }
                                }
                                Some(key) => {
                                    let mut extent = LogExtent::new(key.offset);
                                    let aborted = read.aborted;
                                    let committed =
                                        key.read_committed.then_some((&aborted[..], bound));
                                    extent.append(&batches, end, committed);
                                    state.positions.insert(key, Arc::new(extent));
                                }
                            }
                        }
                        Err(error) => {
                            // The log moved on under the window (retention): forget it,
                            // the next cycle starts a new one at the groups' offsets.
                            if error.out_of_range && item.position.is_none() {
                                state.windows.remove(&key);
                            }
                            failures.entry(item.index).or_insert(error.message);
                        }
                    }
                }
            }
            if !progress {
                break;
            }
        }

        if let Some(first) = failures.values().next() {
            if first.contains("TopicAuthorization") && !state.warned_unauthorized {
                state.warned_unauthorized = true;
                tracing::warn!(cluster = %self.cluster, "reading record headers needs the Read permission on the topics ({first}); without it lags count commit/abort markers and time lags are not exported");
            }
            sample.fail_each(Stage::ReadRecords, failures.values());
        }
        for (index, need) in needs.iter().enumerate() {
            let p = &mut sample.partitions[index];
            let key = (p.topic.clone(), p.partition);
            let window = state.windows.get(&key).cloned();
            let positions: Vec<_> = need
                .positions
                .iter()
                .filter_map(|k| {
                    let extent = state.positions.get(k)?;
                    Some((k.offset, extent.clone()))
                })
                .collect();
            if window.is_some() || !positions.is_empty() || p.high_watermark.is_some() {
                p.log = Some(PartitionLog { window, positions });
            }
        }
        sample.aborted = aborted;
        sample.eos_cost = self
            .counted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .cost
            .clone();
        *self.lock() = state;
    }

    /// Asks the leaders of `indices` which partitions have a transactional producer (one
    /// with a transaction open, or that has written a marker: coordinator epoch set).
    /// Partitions whose answer failed are left out.
    async fn describe_producers(
        &self,
        sample: &RawSample,
        indices: &[usize],
        leaders: &HashMap<usize, i32>,
        brokers: &BTreeMap<i32, String>,
        deadline: Instant,
    ) -> (HashMap<usize, bool>, Vec<(usize, String)>) {
        let mut by_leader: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
        for &index in indices {
            if let Some(&leader) = leaders.get(&index) {
                by_leader.entry(leader).or_default().push(index);
            }
        }
        let requests = by_leader.into_iter().map(|(leader, indices)| async move {
            let Some(addr) = brokers.get(&leader) else {
                return Ok((indices, None));
            };
            let request = super::describe_producers_request(&sample.partitions, &indices);
            match self
                .wire
                .pool
                .send(addr, &request, "DescribeProducers", deadline)
                .await
            {
                Ok(answer) => Ok((indices, Some(answer))),
                Err(error) => {
                    tracing::debug!(cluster = %self.cluster, broker = %addr, %error, "DescribeProducers failed: record reads assume markers");
                    Err((indices, error))
                }
            }
        });
        let mut found = HashMap::new();
        let mut unreachable = Vec::new();
        for answer in join_all(requests).await {
            let (indices, answer) = match answer {
                Ok((indices, Some(answer))) => (indices, answer),
                Ok((_, None)) => continue,
                Err((indices, error)) => {
                    // A leader that did not answer in time is not asked again this cycle.
                    if matches!(error, crate::kafka::wire::WireError::Deadline) {
                        let message = format!("DescribeProducers: {error}");
                        unreachable.extend(indices.into_iter().map(|i| (i, message.clone())));
                    }
                    continue;
                }
            };
            let by_name: HashMap<(&str, i32), usize> = indices
                .iter()
                .map(|&i| {
                    let p = &sample.partitions[i];
                    ((&*p.topic, p.partition), i)
                })
                .collect();
            for topic in &answer.topics {
                for partition in &topic.partitions {
                    let Some(&index) =
                        by_name.get(&(topic.name.0.as_str(), partition.partition_index))
                    else {
                        continue;
                    };
                    if partition.error_code != 0 {
                        continue;
                    }
                    let transactional = partition
                        .active_producers
                        .iter()
                        .any(|p| p.current_txn_start_offset >= 0 || p.coordinator_epoch >= 0);
                    found.insert(index, transactional);
                }
            }
        }
        (found, unreachable)
    }

    /// One Fetch to one leader for `items`: the answer for each item, in order.
    async fn fetch(
        &self,
        addr: &str,
        partitions: &[crate::kafka::RawPartition],
        items: &[Item],
        read_committed: bool,
        max_bytes: i32,
        deadline: Instant,
    ) -> Result<Vec<Result<Read, ReadError>>, crate::kafka::wire::WireError> {
        let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
        for item in items {
            let p = &partitions[item.index];
            let mut partition = FetchPartition::default();
            partition.partition = p.partition;
            partition.current_leader_epoch = -1;
            partition.fetch_offset = item.offset;
            partition.last_fetched_epoch = -1;
            partition.log_start_offset = -1;
            partition.partition_max_bytes = item.bytes;
            topics.entry(&p.topic).or_default().push(partition);
        }
        let mut request = FetchRequest::default();
        request.replica_id = (-1).into();
        request.max_wait_ms = 0;
        request.min_bytes = 0;
        request.max_bytes = max_bytes;
        request.isolation_level = i8::from(read_committed);
        request.session_id = 0;
        request.session_epoch = -1;
        request.topics = topics
            .into_iter()
            .map(|(topic, partitions)| {
                let mut t = FetchTopic::default();
                t.topic = TopicName(StrBytes::from_string(topic.to_string()));
                t.partitions = partitions;
                t
            })
            .collect();
        let response = self
            .wire
            .pool
            .send(addr, &request, "Fetch", deadline)
            .await?;
        // What record reads cost the brokers: the bench (bench/reads.rs) sums these.
        let record_bytes: usize = response
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .filter_map(|p| p.records.as_ref().map(|r| r.len()))
            .sum();
        tracing::debug!(broker = %addr, partitions = items.len(), record_bytes, "Fetch answer");
        if let Some(error) = ResponseError::try_from_code(response.error_code) {
            let message = format!("{addr}: Fetch: {error:?}");
            return Ok(items.iter().map(|_| Err(message.clone().into())).collect());
        }
        let mut answers: Vec<Option<Result<Read, ReadError>>> =
            items.iter().map(|_| None).collect();
        let position: HashMap<(&str, i32), usize> = items
            .iter()
            .enumerate()
            .map(|(at, item)| {
                let p = &partitions[item.index];
                ((&*p.topic, p.partition), at)
            })
            .collect();
        for topic in &response.responses {
            for partition in &topic.partitions {
                let Some(&at) = position.get(&(&*topic.topic.0, partition.partition_index)) else {
                    continue;
                };
                answers[at] = Some(match ResponseError::try_from_code(partition.error_code) {
                    Some(error) => Err(ReadError {
                        message: format!(
                            "{}/{}: {error:?}",
                            topic.topic.0, partition.partition_index
                        ),
                        out_of_range: error == ResponseError::OffsetOutOfRange,
                    }),
                    None => Ok(Read {
                        records: partition.records.clone().unwrap_or_default(),
                        high_watermark: partition.high_watermark,
                        last_stable_offset: partition.last_stable_offset,
                        aborted: partition
                            .aborted_transactions
                            .iter()
                            .flatten()
                            .map(|a| (a.producer_id.0, a.first_offset))
                            .collect(),
                    }),
                });
            }
        }
        Ok(items
            .iter()
            .zip(answers)
            .map(|(item, answer)| {
                answer.unwrap_or_else(|| {
                    let p = &partitions[item.index];
                    Err(
                        format!("{}/{}: missing from the Fetch answer", p.topic, p.partition)
                            .into(),
                    )
                })
            })
            .collect())
    }
}

/// The size of the first record batch in a Fetch answer's records, when whole.
fn first_batch_bytes(records: &[u8]) -> Option<i32> {
    let length = i32::from_be_bytes(records.get(8..12)?.try_into().ok()?);
    let size = length.checked_add(12)?;
    (size > 0 && records.len() >= size as usize).then_some(size)
}

/// The committed offsets of the sample's groups, by partition index.
fn committed_offsets(sample: &RawSample) -> Vec<Vec<i64>> {
    let index: HashMap<(&str, i32), usize> = sample
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| ((&*p.topic, p.partition), i))
        .collect();
    let mut committed: Vec<Vec<i64>> = vec![Vec::new(); sample.partitions.len()];
    for group in &sample.groups {
        for c in group.committed.iter().flatten() {
            if let Some(&i) = index.get(&(&*c.topic, c.partition)) {
                committed[i].push(c.offset);
            }
        }
    }
    committed
}

/// Where a window would be read if the partition may hold markers: the lowest committed
/// offset at most `window` below the HW, or at it (and in the log); and on a pinned
/// partition, from
/// the LSO where it is that near the HW and some group is too (at the HW included), so
/// that every batch of the open transactions is read: when one aborts, its marker finds
/// them all (the records a read_uncommitted group delivered,
/// [`crate::derive::isolation`]), also those a group read past before a window began.
fn window_start(p: &crate::kafka::RawPartition, offsets: &[i64], window: i64) -> Option<i64> {
    let hw = p.high_watermark?;
    let log_start = p.log_start_offset.unwrap_or(0);
    let near = |o: i64| o >= log_start && o <= hw && hw - o <= window;
    // A group at the HW too: its window reads nothing now (no Fetch at all while the
    // partition is at rest), and goes on from there when records arrive, so that a
    // transaction that opens and aborts before the next cycle is read.
    let lowest = offsets.iter().copied().filter(|&o| near(o)).min();
    let pinned = p
        .last_stable_offset
        .filter(|&lso| lso < hw && near(lso) && offsets.iter().any(|&o| near(o)));
    lowest.into_iter().chain(pinned).min()
}

/// Partitions where some group sits within `window` of the HW.
fn near_end(sample: &RawSample, window: i64) -> Vec<usize> {
    sample
        .partitions
        .iter()
        .zip(committed_offsets(sample))
        .enumerate()
        .filter(|(_, (p, offsets))| window_start(p, offsets, window).is_some())
        .map(|(i, _)| i)
        .collect()
}

/// Whether a window `(from, to)` read so far serves a window wanted from `from` up to
/// `hw`: it starts low enough, ends no later than the HW (a truncated log starts over),
/// and its end is at most `window` offsets below the lowest group. A group that moved
/// past the end (a caught-up group commits what arrived since) leaves the offsets between
/// unread by a fresh read from the group: the window goes on from its end instead, so
/// that every batch of a transaction that opened and aborted in between is read (the
/// records a read_uncommitted group delivered, [`crate::derive::isolation`]). Further
/// than `window` below the group, a fresh read is cheaper, and the gap is not read.
fn keeps_window(existing: Option<(i64, i64)>, from: i64, hw: i64, window: i64) -> bool {
    existing.is_some_and(|(start, end)| {
        start <= from && from <= end.saturating_add(window) && end <= hw
    })
}

/// What each partition needs read (see the module docs). `may_hold_markers` says, by
/// partition index, whether a transactional producer writes there: elsewhere `HW -
/// committed` is already exact and only positions are read, for the time lag.
fn plan(sample: &RawSample, window: i64, may_hold_markers: &[bool]) -> Vec<Need> {
    sample
        .partitions
        .iter()
        .zip(committed_offsets(sample))
        .zip(may_hold_markers)
        .map(|((p, mut offsets), &markers)| {
            let (Some(hw), Some(lso)) = (p.high_watermark, p.last_stable_offset) else {
                return Need::default();
            };
            let log_start = p.log_start_offset.unwrap_or(0);
            let window_from = window_start(p, &offsets, window).filter(|_| markers);
            if hw > lso {
                offsets.push(lso);
            }
            offsets.sort_unstable();
            offsets.dedup();
            let positions = offsets
                .into_iter()
                // Nothing left to read there, no longer in the log (the group's consumers
                // will reset), or in the window: no position read says more.
                .filter(|&o| o < hw && o >= log_start && window_from.is_none_or(|f| o < f))
                .map(|offset| PositionKey {
                    topic: p.topic.clone(),
                    partition: p.partition,
                    offset,
                    read_committed: offset < lso,
                })
                .collect();
            Need {
                window_from,
                positions,
            }
        })
        .collect()
}

/// One partition's part of a Fetch answer.
struct Read {
    records: bytes::Bytes,
    high_watermark: i64,
    last_stable_offset: i64,
    aborted: Vec<(i64, i64)>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::{CommittedOffset, RawGroup, RawPartition};

    fn partition(topic: &str, hw: i64, lso: i64) -> RawPartition {
        RawPartition {
            topic: Arc::from(topic),
            partition: 0,
            log_start_offset: Some(100),
            last_stable_offset: Some(lso),
            high_watermark: Some(hw),
            open_transactions: None,
            log: None,
            replication: None,
        }
    }

    fn group(name: &str, topic: &str, offset: i64) -> RawGroup {
        RawGroup {
            coordinator: None,
            detail: None,
            name: name.into(),
            state: "Stable".into(),
            members: Some(1),
            group_type: "classic".into(),
            protocol: "consumer".into(),
            isolation: None,
            broker_lags: Vec::new(),
            committed: Some(vec![CommittedOffset {
                topic: topic.into(),
                partition: 0,
                offset,
            }]),
        }
    }

    #[test]
    fn plan_reads_windows_near_the_end_and_positions_further_down() {
        let sample = RawSample {
            reached: true,
            partitions: vec![
                partition("at-rest", 5_000, 5_000),
                partition("pinned", 5_000, 4_000),
                partition("near", 5_000, 5_000),
            ],
            groups: vec![
                group("caught-up", "at-rest", 5_000),
                group("far", "pinned", 1_000),
                group("blocked", "pinned", 4_000),
                group("far-ru", "pinned", 4_500),
                group("gone", "pinned", 50), // below the log start
                group("a", "near", 4_990),
                group("b", "near", 4_995),
            ],
            ..Default::default()
        };
        let transactional = [true; 3];
        let needs = plan(&sample, 300, &transactional);
        // Caught up: a window at the HW, which reads nothing until records arrive, and no
        // position.
        assert_eq!(needs[0].window_from, Some(5_000));
        assert!(needs[0].positions.is_empty());
        // Pinned 1,000 below the HW: the LSO and the groups are positions, read_committed
        // below the LSO only; nothing is read below the log start.
        assert_eq!(needs[1].window_from, None);
        assert_eq!(
            positions(&needs[1]),
            vec![(1_000, true), (4_000, false), (4_500, false)]
        );
        // Two groups close to the end share one window from the lower one.
        assert_eq!(needs[2].window_from, Some(4_990));
        assert!(needs[2].positions.is_empty());
        // A window wide enough covers the groups near the end and the pinned LSO above
        // the lowest of them; the LSO alone never starts one.
        let needs = plan(&sample, 1_000, &transactional);
        assert_eq!(needs[1].window_from, Some(4_000));
        assert_eq!(positions(&needs[1]), vec![(1_000, true)]);
        let sample = RawSample {
            groups: vec![group("far", "pinned", 1_000)],
            ..sample
        };
        let needs = plan(&sample, 1_000, &transactional);
        assert_eq!(needs[1].window_from, None);
        assert_eq!(positions(&needs[1]), vec![(1_000, true), (4_000, false)]);
        // A group near the end of a pinned partition, above the LSO (it reads
        // uncommitted) or at the HW: the window starts at the LSO, so that every batch of
        // the open transaction is read before its marker.
        for offset in [4_800, 5_000] {
            let sample = RawSample {
                groups: vec![group("ru", "pinned", offset)],
                ..sample.clone()
            };
            let needs = plan(&sample, 1_000, &transactional);
            assert_eq!(needs[1].window_from, Some(4_000), "group at {offset}");
            // Narrower than the gap: the group's own window only (at the HW, one that
            // reads nothing until records arrive).
            let needs = plan(&sample, 500, &transactional);
            assert_eq!(needs[1].window_from, Some(offset), "group at {offset}");
        }
    }

    fn positions(need: &Need) -> Vec<(i64, bool)> {
        need.positions
            .iter()
            .map(|k| (k.offset, k.read_committed))
            .collect()
    }

    /// Without a transactional producer a partition has no markers: `HW - committed` is
    /// exact, so a group near the end gets a position read (its time lag), no window.
    #[test]
    fn plain_partitions_get_positions_and_no_window() {
        let sample = RawSample {
            reached: true,
            partitions: vec![
                partition("plain", 5_000, 5_000),
                partition("txn", 5_000, 5_000),
            ],
            groups: vec![
                group("eos", "plain", 4_990),
                group("eos", "txn", 4_990),
                group("far", "plain", 1_000),
            ],
            ..Default::default()
        };
        assert_eq!(near_end(&sample, 300), vec![0, 1]);
        let needs = plan(&sample, 300, &[false, true]);
        assert_eq!(needs[0].window_from, None);
        assert_eq!(positions(&needs[0]), vec![(1_000, true), (4_990, true)]);
        assert_eq!(needs[1].window_from, Some(4_990));
        assert!(needs[1].positions.is_empty());
        // Only groups within the window make a partition worth classifying.
        assert_eq!(near_end(&sample, 5), Vec::<usize>::new());
    }

    /// A window is extended while that reads less than starting over at the lowest
    /// group; once its end falls below that group (a group committing every 100 ms
    /// leaves the window of the previous cycle behind), the fresh read is smaller.
    #[test]
    fn fresh_read_when_the_window_fell_behind_the_groups() {
        // Read to 5_000 last cycle; the group is at 4_990, the HW now 6_000: extend.
        assert!(keeps_window(Some((4_900, 5_000)), 4_990, 6_000, 1_000));
        // The group moved past the window's end, within the window: go on from the end,
        // so that nothing between is left unread.
        assert!(keeps_window(Some((4_900, 5_000)), 5_900, 6_000, 1_000));
        // Further: [5_900, 6_000) beats [5_000, 6_000), and the gap stays unread.
        assert!(!keeps_window(Some((4_900, 5_000)), 5_900, 6_000, 500));
        // A group below the window, or a log truncated below its end: start over.
        assert!(!keeps_window(Some((4_900, 5_000)), 4_800, 6_000, 1_000));
        assert!(!keeps_window(Some((4_900, 5_000)), 4_950, 4_990, 1_000));
        assert!(!keeps_window(None, 4_990, 6_000, 1_000));
        // Retention passed the window's end and the group reset to the new log start:
        // start over there (an OFFSET_OUT_OF_RANGE answer drops the window as well).
        assert!(!keeps_window(Some((4_900, 5_000)), 7_000, 7_200, 1_000));
    }
}
