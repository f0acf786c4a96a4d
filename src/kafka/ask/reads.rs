//! Record reads for lag that never counts markers: which parts of which partitions'
//! logs a cycle reads (Fetch, batch headers only), and what it remembers between cycles.
//!
//! Two kinds of read, both planned per partition leader:
//! - **Windows.** Where some group sits at most `read_window` records below the HW, or
//!   the LSO is that close to it, the partition's log is read from the lowest such
//!   offset up to the HW (read_uncommitted) and kept as a [`LogExtent`]. Later cycles
//!   only read what was appended since, so a cluster at rest costs no Fetch at all, and
//!   a group a few records behind has its lag counted exactly.
//! - **Positions.** For a group further behind (and for the record at the LSO when the
//!   gap is wider than the window), one short read at its committed offset gives the
//!   write time of the first record it has not read: read_committed below the LSO (the
//!   answer lists the aborted transactions), read_uncommitted at or above it. The record
//!   at an offset never changes, so each is read once and kept while it is asked for.
//!
//! Each round sends at most one Fetch per leader and isolation level (a partition may
//! appear once in a Fetch), and a cycle makes at most [`ROUNDS`] rounds: requests per
//! cycle grow with brokers, not with partitions or groups. What is not read in time is
//! absent (time lag) or counted as every offset (lag), never guessed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::future::join_all;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::config::ClusterConfig;
use crate::kafka::records::{parse_batches, LogExtent};
use crate::kafka::wire::WireClient;
use crate::kafka::{PartitionLog, Planned, RawSample, Stage};

/// Rounds of Fetch requests per cycle at most.
const ROUNDS: usize = 4;
/// Bytes one window read may bring per partition and round.
const WINDOW_BYTES: i32 = 1024 * 1024;
/// Bytes one position read brings: a few batch headers are all it needs.
const POSITION_BYTES: i32 = 16 * 1024;
/// Bytes one Fetch answer may hold in all.
const REQUEST_BYTES: i32 = 32 * 1024 * 1024;

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
}

#[derive(Default)]
struct State {
    windows: HashMap<PartitionKey, Arc<LogExtent>>,
    positions: HashMap<PositionKey, Arc<LogExtent>>,
    /// A missing Read ACL is logged once, not every cycle.
    warned_unauthorized: bool,
}

/// What one partition needs read in this cycle.
#[derive(Default)]
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
        let needs = plan(sample, self.window);
        let mut state = std::mem::take(&mut *self.lock());

        // Windows: keep what is still useful, forget what is not.
        let mut window_keys: HashMap<PartitionKey, usize> = HashMap::new();
        for (index, need) in needs.iter().enumerate() {
            let p = &sample.partitions[index];
            let key = (p.topic.clone(), p.partition);
            let (Some(from), Some(hw)) = (need.window_from, p.high_watermark) else {
                continue;
            };
            let keep = state
                .windows
                .get(&key)
                .is_some_and(|w| w.from() <= from && w.to() <= hw);
            if keep {
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
        let wanted: std::collections::HashSet<&PositionKey> =
            needs.iter().flat_map(|n| n.positions.iter()).collect();
        state.positions.retain(|key, _| wanted.contains(key));

        let leaders: HashMap<usize, i32> = planned.iter().map(|p| (p.index, p.leader)).collect();
        let mut failures: BTreeMap<usize, String> = BTreeMap::new();
        for _round in 0..ROUNDS {
            // At most one item per partition and isolation level in a round.
            let mut uncommitted: BTreeMap<i32, Vec<Item>> = BTreeMap::new();
            let mut committed: BTreeMap<i32, Vec<Item>> = BTreeMap::new();
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
                if let Some(window) = state.windows.get(&key).filter(|w| w.to() < hw) {
                    uncommitted.entry(leader).or_default().push(Item {
                        index,
                        offset: window.to(),
                        bytes: WINDOW_BYTES,
                        position: None,
                    });
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
                    queue.entry(leader).or_default().push(Item {
                        index,
                        offset: position.offset,
                        bytes: POSITION_BYTES,
                        position: Some(position.clone()),
                    });
                }
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
            let answers = join_all(requests.map(|(leader, read_committed, items)| async move {
                let answer = match brokers.get(&leader) {
                    Some(addr) => self
                        .fetch(addr, partitions, &items, read_committed, deadline)
                        .await
                        .map_err(|e| e.to_string()),
                    None => Err(format!("leader {leader} is not in the metadata")),
                };
                (items, answer)
            }))
            .await;
            let mut progress = false;
            for (items, answer) in answers {
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
                    match result.and_then(|read| {
                        parse_batches(&read.records)
                            .map(|batches| (read, batches))
                            .map_err(|e| format!("{}/{}: {e}", p.topic, p.partition))
                    }) {
                        Ok((read, batches)) => {
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
                                    let key = (p.topic.clone(), p.partition);
                                    if let Some(window) = state.windows.get_mut(&key) {
                                        Arc::make_mut(window).append(&batches, end, None);
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
                            failures.entry(item.index).or_insert(error);
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
            sample.fail(Stage::ReadRecords, failures.len() as u64, first);
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
        *self.lock() = state;
    }

    /// One Fetch to one leader for `items`: the answer for each item, in order.
    async fn fetch(
        &self,
        addr: &str,
        partitions: &[crate::kafka::RawPartition],
        items: &[Item],
        read_committed: bool,
        deadline: Instant,
    ) -> Result<Vec<Result<Read, String>>, crate::kafka::wire::WireError> {
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
        request.max_bytes = REQUEST_BYTES;
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
            return Ok(items.iter().map(|_| Err(message.clone())).collect());
        }
        let mut answers: Vec<Option<Result<Read, String>>> = items.iter().map(|_| None).collect();
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
                    Some(error) => Err(format!(
                        "{}/{}: {error:?}",
                        topic.topic.0, partition.partition_index
                    )),
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
                    Err(format!(
                        "{}/{}: missing from the Fetch answer",
                        p.topic, p.partition
                    ))
                })
            })
            .collect())
    }
}

/// What each partition needs read (see the module docs).
fn plan(sample: &RawSample, window: i64) -> Vec<Need> {
    let index: HashMap<(&str, i32), usize> = sample
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| ((&*p.topic, p.partition), i))
        .collect();
    let mut committed: Vec<Vec<i64>> = vec![Vec::new(); sample.partitions.len()];
    for group in &sample.groups {
        for c in group.committed.iter().flatten() {
            if let Some(&i) = index.get(&(c.topic.as_str(), c.partition)) {
                committed[i].push(c.offset);
            }
        }
    }
    sample
        .partitions
        .iter()
        .zip(committed)
        .map(|(p, mut offsets)| {
            let (Some(hw), Some(lso)) = (p.high_watermark, p.last_stable_offset) else {
                return Need::default();
            };
            let log_start = p.log_start_offset.unwrap_or(0);
            if hw > lso {
                offsets.push(lso);
            }
            offsets.sort_unstable();
            offsets.dedup();
            let mut need = Need::default();
            for offset in offsets {
                // Nothing left to read there, or no longer in the log (the group's
                // consumers will reset): no read can say more.
                if offset >= hw || offset < log_start {
                    continue;
                }
                if hw - offset <= window {
                    need.window_from = Some(need.window_from.map_or(offset, |f| f.min(offset)));
                } else {
                    need.positions.push(PositionKey {
                        topic: p.topic.clone(),
                        partition: p.partition,
                        offset,
                        read_committed: offset < lso,
                    });
                }
            }
            need
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
        let needs = plan(&sample, 300);
        // Caught up: nothing to read at all.
        assert!(needs[0].window_from.is_none() && needs[0].positions.is_empty());
        // Pinned 1,000 below the HW: the LSO and the groups are positions, read_committed
        // below the LSO only; nothing is read below the log start.
        assert_eq!(needs[1].window_from, None);
        let positions: Vec<(i64, bool)> = needs[1]
            .positions
            .iter()
            .map(|k| (k.offset, k.read_committed))
            .collect();
        assert_eq!(
            positions,
            vec![(1_000, true), (4_000, false), (4_500, false)]
        );
        // Two groups close to the end share one window from the lower one.
        assert_eq!(needs[2].window_from, Some(4_990));
        assert!(needs[2].positions.is_empty());
        // A window wide enough covers the pinned LSO and the groups near it.
        let needs = plan(&sample, 1_000);
        assert_eq!(needs[1].window_from, Some(4_000));
        assert_eq!(needs[1].positions.len(), 1);
    }
}
