//! Log start offsets, last stable offsets and high watermarks: ListOffsets, one request
//! per partition leader and kind, sent to the leader the cycle's metadata names, all
//! leaders at once.
//!
//! A leader that is down or unreachable fails only its own partitions, and a leader that
//! moved answers NOT_LEADER_OR_FOLLOWER for them: they are absent for that cycle and
//! asked of the new leader in the next, since every cycle starts with fresh metadata.
//! (librdkafka's `offsets_for_times` looks leaders up in its own metadata cache, which
//! after a leader was killed kept failing with "Meta data fetch error" for over a minute
//! while the cluster had long elected a new one.)

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::kafka::wire::{WireClient, WireError};

/// Which offset of each partition to ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The log start offset (EARLIEST).
    LogStart,
    /// The last stable offset (LATEST, read_committed).
    LastStable,
    /// The high watermark (LATEST, read_uncommitted).
    HighWatermark,
}

impl Kind {
    fn timestamp(self) -> i64 {
        match self {
            Kind::LogStart => -2,
            Kind::LastStable | Kind::HighWatermark => -1,
        }
    }

    fn isolation_level(self) -> i8 {
        match self {
            Kind::LastStable => 1,
            Kind::LogStart | Kind::HighWatermark => 0,
        }
    }
}

/// What [`list_offsets`] learned.
pub struct Listed {
    /// Per kind, per target: a value or why there is none.
    pub rounds: Vec<Vec<Result<i64, String>>>,
    /// Targets whose leader refused this client's TLS ([`WireError::Tls`]): another
    /// client may still read them.
    pub refused: Vec<usize>,
    /// Why, the first refusal.
    pub refusal: Option<String>,
}

/// The offsets of each kind in `kinds` for every (topic, partition, leader) of
/// `targets`, in order: a value or why there is none. Each leader is asked for one kind
/// after the other (so the HW is read after the LSO, and `hw >= lso` holds), all leaders
/// at once: a leader that does not answer holds up only its own partitions.
pub async fn list_offsets(
    wire: &WireClient,
    brokers: &BTreeMap<i32, String>,
    targets: &[(Arc<str>, i32, i32)],
    kinds: &[Kind],
    deadline: Instant,
) -> Listed {
    let mut refused = Vec::new();
    let mut refusal = None;
    let mut results: Vec<Vec<Result<i64, String>>> =
        vec![vec![Err(String::new()); targets.len()]; kinds.len()];
    let mut by_leader: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (index, (_, _, leader)) in targets.iter().enumerate() {
        let error = match brokers.get(leader) {
            Some(addr) => {
                by_leader.entry(addr.as_str()).or_default().push(index);
                continue;
            }
            None if *leader < 0 => "partition has no leader".to_string(),
            None => format!("leader {leader} is not in the metadata"),
        };
        for round in results.iter_mut() {
            round[index] = Err(error.clone());
        }
    }
    let answers = join_all(by_leader.into_iter().map(|(addr, indices)| async move {
        let mut rounds = Vec::with_capacity(kinds.len());
        for &kind in kinds {
            let request = request(targets, &indices, kind, deadline);
            rounds.push(
                wire.pool
                    .send(addr, &request, "ListOffsets", deadline)
                    .await,
            );
        }
        (indices, rounds)
    }))
    .await;
    for (indices, rounds) in answers {
        if let Some(Err(error @ WireError::Tls { .. })) = rounds.first() {
            refused.extend(indices.iter().copied());
            refusal.get_or_insert_with(|| error.to_string());
        }
        for (round, answer) in results.iter_mut().zip(rounds) {
            match answer {
                Ok(answer) => {
                    let mut found: HashMap<(&str, i32), Result<i64, String>> = HashMap::new();
                    for topic in &answer.topics {
                        for p in &topic.partitions {
                            let value = match ResponseError::try_from_code(p.error_code) {
                                Some(error) => Err(error.to_string()),
                                None if p.offset >= 0 => Ok(p.offset),
                                None => Err(format!("no offset in the answer ({})", p.offset)),
                            };
                            found.insert((topic.name.0.as_str(), p.partition_index), value);
                        }
                    }
                    for &i in &indices {
                        let (topic, partition, _) = &targets[i];
                        round[i] = found
                            .remove(&(&**topic, *partition))
                            .unwrap_or_else(|| Err("partition missing from the answer".into()));
                    }
                }
                Err(error) => {
                    let error = error.to_string();
                    for &i in &indices {
                        round[i] = Err(error.clone());
                    }
                }
            }
        }
    }
    Listed {
        rounds: results,
        refused,
        refusal,
    }
}

/// ListOffsets of `kind` for the partitions `indices` of `targets` (one leader's).
fn request(
    targets: &[(Arc<str>, i32, i32)],
    indices: &[usize],
    kind: Kind,
    deadline: Instant,
) -> ListOffsetsRequest {
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    let mut position: HashMap<&str, usize> = HashMap::new();
    for &i in indices {
        let (topic, partition, _) = &targets[i];
        let slot = *position.entry(topic).or_insert_with(|| {
            let mut t = ListOffsetsTopic::default();
            t.name = TopicName(StrBytes::from_string(topic.to_string()));
            topics.push(t);
            topics.len() - 1
        });
        let mut p = ListOffsetsPartition::default();
        p.partition_index = *partition;
        p.timestamp = kind.timestamp();
        topics[slot].partitions.push(p);
    }
    let mut request = ListOffsetsRequest::default();
    // -1: a consumer, not a follower.
    request.replica_id = BrokerId(-1);
    request.isolation_level = kind.isolation_level();
    request.timeout_ms = i32::try_from(
        deadline
            .saturating_duration_since(Instant::now())
            .as_millis(),
    )
    .unwrap_or(i32::MAX);
    request.topics = topics;
    request
}
