//! What a sampling cycle asks of the brokers through the exporter's own client
//! ([`super::wire`]). Each request is planned per broker, leader or coordinator, so that
//! requests per cycle grow with brokers, not with partitions or groups.

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
use kafka_protocol::messages::{DescribeProducersRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::RawPartition;

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
