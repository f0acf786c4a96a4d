//! What a sampling cycle asks of the brokers through the exporter's own client
//! ([`super::wire`]). Each request is planned per broker, leader or coordinator, so that
//! requests per cycle grow with brokers, not with partitions or groups. Only the cycle
//! ([`super::cycle`]) imports these; they import the plumbing ([`super::wire`]) and the
//! sample's types.

pub mod clock;
pub mod forensics;
pub mod groups;
pub mod inventory;
pub mod log_offsets;
pub mod metadata;
pub mod offsets;
pub mod reads;
pub mod topic_configs;

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::{DescribeProducersRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{CoordinatorTransaction, RawPartition};

/// What DescribeTransactions answered for one transactional id, as `broker` (its
/// coordinator) answered it: the transaction and its partitions, sorted.
fn described_transaction(
    state: &TransactionState,
    broker: i32,
) -> (CoordinatorTransaction, Vec<(String, i32)>) {
    let mut partitions: Vec<(String, i32)> = state
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
        .collect();
    partitions.sort();
    partitions.dedup();
    let transaction = CoordinatorTransaction {
        transactional_id: state.transactional_id.0.to_string(),
        coordinator: broker,
        state: state.transaction_state.to_string(),
        producer_id: state.producer_id.0,
        producer_epoch: state.producer_epoch,
        start_time_ms: state.transaction_start_time_ms,
        timeout_ms: state.transaction_timeout_ms,
        includes_partition: false,
    };
    (transaction, partitions)
}

/// One DescribeProducers for the partitions at `indices` of `partitions` (all led by the
/// broker it goes to), grouped by topic. Forensics asks it of pinned partitions, record
/// reads of partitions they have not classified yet.
fn describe_producers_request(
    partitions: &[RawPartition],
    indices: &[usize],
) -> DescribeProducersRequest {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for &i in indices {
        let p = &partitions[i];
        topics.entry(&p.topic).or_default().push(p.partition);
    }
    let mut request = DescribeProducersRequest::default();
    request.topics = topics
        .into_iter()
        .map(|(topic, partitions)| {
            let mut t = TopicRequest::default();
            t.name = TopicName(StrBytes::from_string(topic.to_string()));
            t.partition_indexes = partitions;
            t
        })
        .collect();
    request
}
