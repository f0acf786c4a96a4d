//! The benchmark workload on the local broker, shared by bench/cycle.rs and bench/load.rs:
//! 20 topics x 100 partitions (2,000 partitions) with a few records each, and 540
//! consumer groups each with committed offsets on 40 partitions (21,600 group-partition
//! series; about 100,000 series on /metrics in all). Created once, kept in .cache/kafka.

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

use crate::common::*;

pub const TOPICS: usize = 20;
pub const PARTITIONS: i32 = 100;
pub const GROUPS: usize = 540;
pub const GROUP_PARTITIONS: i32 = 40;

pub fn topic(i: usize) -> String {
    format!("bench-t{i:02}")
}

fn group(g: usize) -> String {
    format!("bench-g{g:03}")
}

/// Creates whatever part of the workload is missing.
pub async fn setup() {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .unwrap();
    let started = Instant::now();
    let metadata = consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .unwrap();
    if !metadata
        .topics()
        .iter()
        .any(|t| t.name() == topic(TOPICS - 1))
    {
        for i in 0..TOPICS {
            create_topic(&topic(i), PARTITIONS).await;
        }
        let producer = plain_producer();
        for i in 0..TOPICS {
            for p in 0..PARTITIONS {
                send_no_flush(&producer, &topic(i), p, 5);
            }
        }
        producer.flush(Duration::from_secs(60)).unwrap();
    }
    let groups = consumer
        .fetch_group_list(None, Duration::from_secs(10))
        .unwrap();
    let existing: std::collections::HashSet<&str> =
        groups.groups().iter().map(|g| g.name()).collect();
    for g in 0..GROUPS {
        if existing.contains(group(g).as_str()) {
            continue;
        }
        let member: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap())
            .set("group.id", group(g))
            .create()
            .unwrap();
        let mut offsets = TopicPartitionList::new();
        for p in 0..GROUP_PARTITIONS {
            offsets
                .add_partition_offset(&topic(g % TOPICS), p, Offset::Offset(3))
                .unwrap();
        }
        member.commit(&offsets, CommitMode::Sync).unwrap();
    }
    println!(
        "workload ready in {:.0}s: {TOPICS} topics x {PARTITIONS} partitions, {GROUPS} groups x {GROUP_PARTITIONS} committed partitions",
        started.elapsed().as_secs_f64()
    );
}

pub fn send_no_flush(producer: &Producer_, topic: &str, partition: i32, count: usize) {
    use rdkafka::producer::BaseRecord;
    for _ in 0..count {
        let mut record = BaseRecord::<(), _>::to(topic)
            .partition(partition)
            .payload("x");
        while let Err((_, r)) = producer.send(record) {
            record = r;
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
