//! The cost of exactly-once per topic against a real broker: commit and abort markers,
//! aborted records and scanned offsets of a topic a read_committed group reads equal what
//! was written, each offset counted once however often the exporter reads it again.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

/// One transaction: records per partition, and whether it commits.
struct Transaction {
    records: [usize; 2],
    commits: bool,
}

/// What the exporter should count for a topic.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Cost {
    commit_markers: f64,
    abort_markers: f64,
    aborted_records: f64,
    scanned_offsets: f64,
}

impl Cost {
    fn read(scrape: &Scrape, topic: &str) -> Option<Cost> {
        let markers = |kind: &str| {
            scrape.value(
                "kafka_topic_transaction_markers_total",
                &[
                    ("kafka_cluster", "test"),
                    ("topic", topic),
                    ("marker", kind),
                ],
            )
        };
        let labels = [("kafka_cluster", "test"), ("topic", topic)];
        Some(Cost {
            commit_markers: markers("commit")?,
            abort_markers: markers("abort")?,
            aborted_records: scrape.value("kafka_topic_aborted_records_total", &labels)?,
            scanned_offsets: scrape.value("kafka_topic_scanned_offsets_total", &labels)?,
        })
    }
}

/// Writes the transactions (each to the partitions it has records for), then `plain`
/// records to partition 1, and returns what they cost: one marker per partition a
/// transaction wrote to, its records aborted when it aborts.
fn write(producer: &Producer_, topic: &str, transactions: &[Transaction], plain: usize) -> Cost {
    let mut cost = Cost::default();
    for t in transactions {
        producer.begin_transaction().expect("begin");
        for (partition, &count) in t.records.iter().enumerate() {
            if count == 0 {
                continue;
            }
            send(producer, topic, partition as i32, count);
            if t.commits {
                cost.commit_markers += 1.0;
            } else {
                cost.abort_markers += 1.0;
                cost.aborted_records += count as f64;
            }
        }
        if t.commits {
            producer
                .commit_transaction(Duration::from_secs(30))
                .expect("commit");
        } else {
            producer
                .abort_transaction(Duration::from_secs(30))
                .expect("abort");
        }
    }
    send(&plain_producer(), topic, 1, plain);
    cost
}

/// Commits `offset` on both partitions of `topic` for `group`.
fn commit_both(group: &str, topic: &str, offset: i64) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut offsets = TopicPartitionList::new();
    for partition in 0..2 {
        offsets
            .add_partition_offset(topic, partition, Offset::Offset(offset))
            .unwrap();
    }
    consumer.assign(&offsets).expect("assign");
    consumer.commit(&offsets, CommitMode::Sync).expect("commit");
}

/// Markers and offsets are written once each: after the markers have landed the HW
/// of both partitions is the number of offsets in the topic.
fn offsets_in(topic: &str) -> f64 {
    (0..2).map(|p| high_watermark(topic, p) as f64).sum()
}

/// The counters stay where they are for at least `cycles` cycles.
async fn stays(exporter: &Exporter, topic: &str, cost: Cost, cycles: u64) {
    let cycle = |s: &Scrape| {
        s.value(
            "kafka_lso_exporter_cycle_duration_seconds_count",
            &[("kafka_cluster", "test")],
        )
        .expect("cycle count") as u64
    };
    let first = cycle(&exporter.scrape().await);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = exporter.scrape().await;
        assert_eq!(Cost::read(&s, topic), Some(cost), "counted again");
        if cycle(&s) >= first + cycles {
            return;
        }
        assert!(Instant::now() < deadline, "{cycles} cycles take over 20 s");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn markers_aborted_records_and_scanned_offsets_are_counted_once() {
    require_kafka();
    let started = Instant::now();
    let topic = unique("eos-cost");
    let group = unique("eos-cost-reader");
    create_topic(&topic, 2).await;
    // A read_committed group sits at the start: the exporter reads the log from there.
    commit_both(&group, &topic, 0);
    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;

    let producer = transactional_producer(&unique("eos-cost-t"));
    let transactions = [
        Transaction {
            records: [3, 2],
            commits: true,
        },
        Transaction {
            records: [4, 1],
            commits: false,
        },
        Transaction {
            records: [2, 0],
            commits: true,
        },
        Transaction {
            records: [0, 3],
            commits: false,
        },
        Transaction {
            records: [5, 4],
            commits: true,
        },
    ];
    let mut expected = write(&producer, &topic, &transactions, 2);
    expected.scanned_offsets = offsets_in(&topic);
    let cost = exporter
        .wait_for(
            "the topic's cost of exactly-once",
            Duration::from_secs(30),
            |s| Cost::read(s, &topic).filter(|c| *c == expected),
        )
        .await;
    // Every offset read is a record written or a marker: the control records' share
    // of the offsets, markers / scanned, is what the writes made it.
    let written: usize = transactions.iter().flat_map(|t| t.records).sum::<usize>() + 2;
    assert_eq!(
        cost.commit_markers + cost.abort_markers + written as f64,
        cost.scanned_offsets
    );
    let share = (cost.commit_markers + cost.abort_markers) / cost.scanned_offsets;
    assert!(share > 0.0 && share < 1.0, "control share {share}");
    stays(&exporter, &topic, cost, 4).await;

    // The group reads everything; then it is rewound to the start: the exporter reads
    // the whole log again, and counts none of it twice.
    consume_all_and_commit(&group, &topic, 2, "read_committed");
    stays(&exporter, &topic, cost, 2).await;
    commit_both(&group, &topic, 0);
    stays(&exporter, &topic, cost, 4).await;

    // New writes count, once.
    let more = write(
        &producer,
        &topic,
        &[
            Transaction {
                records: [1, 2],
                commits: false,
            },
            Transaction {
                records: [2, 0],
                commits: true,
            },
        ],
        0,
    );
    let total = Cost {
        commit_markers: cost.commit_markers + more.commit_markers,
        abort_markers: cost.abort_markers + more.abort_markers,
        aborted_records: cost.aborted_records + more.aborted_records,
        scanned_offsets: offsets_in(&topic),
    };
    assert!(total.scanned_offsets > cost.scanned_offsets);
    exporter
        .wait_for("the new writes counted", Duration::from_secs(30), |s| {
            Cost::read(s, &topic).filter(|c| *c == total)
        })
        .await;
    stays(&exporter, &topic, total, 3).await;
    exporter.stop().await;
    eprintln!("eos_cost: {:.1} s", started.elapsed().as_secs_f64());
}
