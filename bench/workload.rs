//! The benchmark workload on the local broker, shared by bench/cycle.rs and bench/load.rs:
//! 20 topics x 100 partitions (2,000 partitions) with a few records each, and 540
//! consumer groups each with committed offsets on 40 partitions (21,600 group-partition
//! series; about 100,000 series on /metrics in all). Created once, kept in .cache/kafka.
//!
//! `BENCH_WORKLOAD=10k` asks for 100 topics x 100 partitions (10,000) and 2,500 groups,
//! `BENCH_WORKLOAD=fleet` for the largest fleet instead: 200 topics x 100 partitions
//! (20,000 partitions) and 5,000 groups x 40 committed partitions (200,000 group-partition
//! series), too many open files for one broker here: run it on three
//! (`KAFKA_BROKERS=3 bench/run cycle`). It extends the default workload.

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

use crate::common::*;

pub const PARTITIONS: i32 = 100;
pub const GROUP_PARTITIONS: i32 = 40;

/// The largest fleet was asked for (`BENCH_WORKLOAD=fleet`).
pub fn fleet() -> bool {
    std::env::var("BENCH_WORKLOAD").is_ok_and(|w| w == "fleet")
}

/// The middle size was asked for (`BENCH_WORKLOAD=10k`).
fn ten_thousand() -> bool {
    std::env::var("BENCH_WORKLOAD").is_ok_and(|w| w == "10k")
}

/// Topics of [`PARTITIONS`] partitions.
pub fn topics() -> usize {
    if fleet() {
        200
    } else if ten_thousand() {
        100
    } else {
        20
    }
}

/// Groups with [`GROUP_PARTITIONS`] committed partitions each.
pub fn groups() -> usize {
    if fleet() {
        5_000
    } else if ten_thousand() {
        2_500
    } else {
        540
    }
}

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
    let present: std::collections::HashSet<&str> =
        metadata.topics().iter().map(|t| t.name()).collect();
    let missing: Vec<usize> = (0..topics())
        .filter(|&i| !present.contains(topic(i).as_str()))
        .collect();
    for &i in &missing {
        create_topic(&topic(i), PARTITIONS).await;
    }
    let producer = plain_producer();
    for &i in &missing {
        for p in 0..PARTITIONS {
            send_no_flush(&producer, &topic(i), p, 5);
        }
    }
    producer.flush(Duration::from_secs(120)).unwrap();
    let listed = consumer
        .fetch_group_list(None, Duration::from_secs(10))
        .unwrap();
    let existing: std::collections::HashSet<&str> =
        listed.groups().iter().map(|g| g.name()).collect();
    let missing: Vec<usize> = (0..groups())
        .filter(|&g| !existing.contains(group(g).as_str()))
        .collect();
    // A few committers at a time: each is a client of its own (one group id each).
    std::thread::scope(|scope| {
        for chunk in missing.chunks(missing.len().div_ceil(8).max(1)) {
            scope.spawn(move || {
                for &g in chunk {
                    commit(g);
                }
            });
        }
    });
    println!(
        "workload ready in {:.0}s: {} topics x {PARTITIONS} partitions, {} groups x {GROUP_PARTITIONS} committed partitions",
        started.elapsed().as_secs_f64(),
        topics(),
        groups()
    );
}

/// Commits offset 3 on [`GROUP_PARTITIONS`] partitions of one topic for group `g`.
fn commit(g: usize) {
    let member: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", group(g))
        .create()
        .unwrap();
    let mut offsets = TopicPartitionList::new();
    for p in 0..GROUP_PARTITIONS {
        offsets
            .add_partition_offset(&topic(g % topics()), p, Offset::Offset(3))
            .unwrap();
    }
    member.commit(&offsets, CommitMode::Sync).unwrap();
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
