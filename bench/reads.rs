//! What record reads cost under produce volume (`bench/run reads`).
//!
//! Workload: one topic of 8 partitions receiving 1 KiB records as fast as this machine
//! allows (or `READS_MB_PER_S`), in batches of at most 16 KiB (the Java producer's
//! default `batch.size`, as Kafka Streams writes; `READS_BATCH_BYTES` changes it:
//! 1000000 is librdkafka's), for `READS_SECONDS` (60 by default), from a plain
//! producer, or from a transactional one committing every 100 ms
//! (`READS_INPUT=transactional`). An exactly-once group consumes it: a read_committed
//! consumer whose offsets a transactional producer commits in its transaction every
//! 100 ms, writing one small record per commit to an output topic (as Kafka Streams'
//! exactly-once default does). The release binary samples both topics every 5 s.
//!
//! Printed: bytes produced (record values), bytes the exporter fetched (the record bytes
//! of its Fetch answers, from its debug log), their ratio; and, every few seconds during
//! the load, whether the group's `hw_lag` and `lso_lag` on each partition equal the
//! records a consumer at the scraped committed offset really receives below the scraped
//! HW and LSO (read back by this harness with read_uncommitted and read_committed
//! consumers), and whether `hw_lag_seconds` and `lso_lag_seconds` are present.

#[path = "../tests/common/mod.rs"]
mod common;
mod process;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use process::exporter;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

const PARTITIONS: i32 = 8;
const RECORD: usize = 1024;
const INTERVAL: &str = "5s";
const COMMIT_EVERY: Duration = Duration::from_millis(100);

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Sends 1 KiB records round-robin over the partitions until `stop`, at `rate` bytes per
/// second (0: as fast as possible); a transactional producer commits every 100 ms.
/// Returns the bytes of record values acknowledged.
fn produce(topic: &str, rate: u64, transactional: Option<String>, stop: &AtomicBool) -> u64 {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap())
        .set("linger.ms", "5")
        .set(
            "batch.size",
            env_or("READS_BATCH_BYTES", 16_384).to_string(),
        )
        .set("queue.buffering.max.kbytes", "262144");
    if let Some(id) = &transactional {
        config.set("transactional.id", id);
    }
    let producer: BaseProducer = config.create().expect("producer");
    let timeout = Duration::from_secs(30);
    if transactional.is_some() {
        producer.init_transactions(timeout).unwrap();
        producer.begin_transaction().unwrap();
    }
    let payload = [b'x'; RECORD];
    let started = Instant::now();
    let mut last_commit = Instant::now();
    let mut sent: u64 = 0;
    while !stop.load(Ordering::Relaxed) {
        if rate > 0 && sent * RECORD as u64 > rate * started.elapsed().as_millis() as u64 / 1000 {
            producer.poll(Duration::from_millis(1));
            continue;
        }
        let mut record = BaseRecord::<(), _>::to(topic)
            .partition((sent % PARTITIONS as u64) as i32)
            .payload(&payload[..]);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    producer.poll(Duration::from_millis(5));
                }
                Err((e, _)) => panic!("produce to {topic}: {e}"),
            }
        }
        sent += 1;
        if sent.is_multiple_of(256) {
            producer.poll(Duration::ZERO);
        }
        if transactional.is_some() && last_commit.elapsed() >= COMMIT_EVERY {
            producer.commit_transaction(timeout).unwrap();
            producer.begin_transaction().unwrap();
            last_commit = Instant::now();
        }
    }
    if transactional.is_some() {
        producer.commit_transaction(timeout).unwrap();
    }
    producer.flush(timeout).unwrap();
    sent * RECORD as u64
}

/// The exactly-once group: reads `input` read_committed and, every 100 ms, writes one
/// record to `output` and commits its position in the same transaction.
fn exactly_once(group: &str, input: &str, output: &str, stop: &AtomicBool, consumed: &AtomicU64) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", group)
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .expect("consumer");
    consumer.subscribe(&[input]).unwrap();
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("transactional.id", group)
        .set("linger.ms", "5")
        .create()
        .expect("transactional producer");
    let timeout = Duration::from_secs(30);
    producer.init_transactions(timeout).unwrap();
    producer.begin_transaction().unwrap();
    let mut last_commit = Instant::now();
    let mut since_commit = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match consumer.poll(Duration::from_millis(10)) {
            Some(Ok(_)) => since_commit += 1,
            Some(Err(e)) => panic!("{group} consuming {input}: {e}"),
            None => {}
        }
        if last_commit.elapsed() < COMMIT_EVERY {
            continue;
        }
        let mut offsets = TopicPartitionList::new();
        for e in consumer.position().unwrap().elements() {
            if let Offset::Offset(o) = e.offset() {
                offsets
                    .add_partition_offset(e.topic(), e.partition(), Offset::Offset(o))
                    .unwrap();
            }
        }
        if offsets.count() > 0 {
            let summary = since_commit.to_string();
            producer
                .send(BaseRecord::<(), _>::to(output).payload(&summary))
                .unwrap();
            let metadata = consumer.group_metadata().unwrap();
            producer
                .send_offsets_to_transaction(&offsets, &metadata, timeout)
                .unwrap();
            producer.commit_transaction(timeout).unwrap();
            producer.begin_transaction().unwrap();
            consumed.fetch_add(since_commit, Ordering::Relaxed);
            since_commit = 0;
        }
        last_commit = Instant::now();
    }
    let _ = producer.abort_transaction(timeout);
}

/// Records a consumer at `from` receives below `bound` under `isolation`: the truth the
/// exporter's lags are checked against.
fn receivable(topic: &str, partition: i32, from: i64, bound: i64, isolation: &str) -> i64 {
    if from >= bound {
        return 0;
    }
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", "reads-bench-truth")
        .set("isolation.level", isolation)
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, partition, Offset::Offset(from))
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut count = 0;
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(m)) if m.offset() >= bound => return count,
            Some(Ok(_)) => count += 1,
            // At the end of what this isolation level sees: everything below the bound
            // was delivered (the HW and LSO only grow).
            Some(Err(KafkaError::PartitionEOF(_))) => {
                if let Ok(p) = consumer.position() {
                    let at = p.elements().first().map(|e| e.offset());
                    if matches!(at, Some(Offset::Offset(o)) if o >= bound) {
                        return count;
                    }
                }
            }
            Some(Err(e)) => panic!("reading {topic}/{partition}: {e}"),
            None => {}
        }
    }
    panic!("reading {topic}/{partition} from {from} to {bound} took over 20 s");
}

#[derive(Default)]
struct Checks {
    lags: u32,
    exact: u32,
    time_lags: u32,
    time_lags_present: u32,
    missing_by_partition: BTreeMap<i32, u32>,
}

/// Compares the group's lags on every partition of one scrape with the log.
fn check(scrape: &Scrape, group: &str, topic: &str, checks: &mut Checks) {
    for p in 0..PARTITIONS {
        let partition = p.to_string();
        let labels = [
            ("group", group),
            ("topic", topic),
            ("partition", &partition),
        ];
        let at = [("topic", topic), ("partition", &partition)];
        let value =
            |name: &str, labels: &[(&str, &str)]| scrape.value(name, labels).map(|v| v as i64);
        let (Some(committed), Some(hw), Some(lso)) = (
            value("kafka_consumergroup_committed_offset", &labels),
            value("kafka_partition_high_watermark", &at),
            value("kafka_partition_last_stable_offset", &at),
        ) else {
            println!("  {topic}/{p}: no committed offset, HW or LSO in this scrape");
            continue;
        };
        let hw_lag = value("kafka_consumergroup_hw_lag", &labels);
        let lso_lag = value("kafka_consumergroup_lso_lag", &labels);
        let hw_truth = receivable(topic, p, committed, hw, "read_uncommitted");
        let lso_truth = receivable(topic, p, committed, lso, "read_committed");
        checks.lags += 1;
        if hw_lag == Some(hw_truth) && lso_lag == Some(lso_truth) {
            checks.exact += 1;
        } else {
            println!(
                "  {topic}/{p}: committed {committed} HW {hw} LSO {lso}: hw_lag {hw_lag:?} \
                 (truth {hw_truth}), lso_lag {lso_lag:?} (truth {lso_truth})"
            );
        }
        for name in [
            "kafka_consumergroup_hw_lag_seconds",
            "kafka_consumergroup_lso_lag_seconds",
        ] {
            checks.time_lags += 1;
            if scrape.value(name, &labels).is_some() {
                checks.time_lags_present += 1;
            } else {
                *checks.missing_by_partition.entry(p).or_default() += 1;
            }
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let seconds: u64 = env_or("READS_SECONDS", 60);
    let rate: u64 = env_or::<f64>("READS_MB_PER_S", 0.0) as u64 * 1_000_000;
    let transactional_input = std::env::var("READS_INPUT").is_ok_and(|v| v == "transactional");
    let input = unique("reads-in");
    let output = unique("reads-out");
    let group = unique("reads-eos");
    create_topic(&input, PARTITIONS).await;
    create_topic(&output, PARTITIONS).await;

    let port = free_port();
    let mut command = exporter(
        &bootstrap(),
        "test",
        INTERVAL,
        port,
        &format!("^({input}|{output})$"),
        &format!("^{group}$"),
    );
    command
        .env("KAFKA_LSO_EXPORTER_CLUSTERS__0__GRANULARITY", "partition")
        .env(
            "RUST_LOG",
            "kafka_lso_exporter=info,kafka_lso_exporter::kafka::ask::reads=debug",
        );
    let mut child = command.spawn().expect("start the exporter");
    let stderr = child.stderr.take().unwrap();
    let fetched = Arc::new(AtomicU64::new(0));
    let fetches = Arc::new(AtomicU64::new(0));
    {
        let (fetched, fetches) = (fetched.clone(), fetches.clone());
        std::thread::spawn(move || {
            let bytes = regex::Regex::new(r"record_bytes=(\d+)").unwrap();
            let mut reader = BufReader::new(stderr);
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                if std::env::var("READS_VERBOSE").is_ok() {
                    eprint!("{line}");
                }
                if let Some(c) = bytes.captures(&line) {
                    fetched.fetch_add(c[1].parse().unwrap(), Ordering::Relaxed);
                    fetches.fetch_add(1, Ordering::Relaxed);
                } else if line.contains(" level=WARN ") || line.contains(" level=ERROR ") {
                    eprint!("exporter: {line}");
                }
                line.clear();
            }
        });
    }

    let stop = Arc::new(AtomicBool::new(false));
    let consumed = Arc::new(AtomicU64::new(0));
    let eos = {
        let (group, input, output, stop, consumed) = (
            group.clone(),
            input.clone(),
            output.clone(),
            stop.clone(),
            consumed.clone(),
        );
        std::thread::spawn(move || exactly_once(&group, &input, &output, &stop, &consumed))
    };
    // Let the group join and the exporter take its first samples before the load.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let fetched_before = fetched.load(Ordering::Relaxed);
    let producer = {
        let (input, stop) = (input.clone(), stop.clone());
        let id = transactional_input.then(|| unique("reads-producer"));
        std::thread::spawn(move || produce(&input, rate, id, &stop))
    };
    let started = Instant::now();
    let mut checks = Checks::default();
    let client = reqwest::Client::new();
    tokio::time::sleep(Duration::from_secs(12)).await;
    while started.elapsed() < Duration::from_secs(seconds) {
        let body = client
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let scrape = Scrape::parse(&body);
        let (group, input) = (group.clone(), input.clone());
        checks = tokio::task::spawn_blocking(move || {
            check(&scrape, &group, &input, &mut checks);
            checks
        })
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_secs(7)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    let produced = producer.join().unwrap();
    eos.join().unwrap();
    let read = fetched.load(Ordering::Relaxed) - fetched_before;
    child.kill().unwrap();
    child.wait().unwrap();

    println!(
        "input: {} producer, {PARTITIONS} partitions, {RECORD}-byte records in batches of at most {} bytes; exactly-once group committing every {} ms; exporter interval {INTERVAL}",
        if transactional_input { "transactional (commits every 100 ms)" } else { "plain" },
        env_or("READS_BATCH_BYTES", 16_384),
        COMMIT_EVERY.as_millis()
    );
    println!(
        "produced {:.1} MB in {elapsed:.0} s ({:.1} MB/s); the group consumed {:.1} MB",
        produced as f64 / 1e6,
        produced as f64 / 1e6 / elapsed,
        consumed.load(Ordering::Relaxed) as f64 * RECORD as f64 / 1e6
    );
    println!(
        "exporter fetched {:.2} MB in {} Fetch answers: {:.3}% of the bytes produced",
        read as f64 / 1e6,
        fetches.load(Ordering::Relaxed),
        100.0 * read as f64 / produced.max(1) as f64
    );
    println!(
        "lags exact: {}/{} partition checks; time lags present: {}/{} (absent by partition: {:?})",
        checks.exact,
        checks.lags,
        checks.time_lags_present,
        checks.time_lags,
        checks.missing_by_partition
    );
}
