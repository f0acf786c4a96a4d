//! Shared helpers for the integration tests: a real Kafka broker (started by
//! `scripts/kafka-local`), producers and consumers on librdkafka, and an exporter
//! running in-process on port 0 whose `/metrics` is parsed back into numbers.
#![allow(dead_code)]

pub mod binary;
pub mod java;
pub mod listeners;
pub mod members;
pub mod proxy;
pub mod python;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use kafka_lso_exporter::config::{Config, Overrides};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::oneshot;

/// The broker under test: `KAFKA_BOOTSTRAP`, or the one `scripts/kafka-local` starts.
pub fn bootstrap() -> String {
    std::env::var("KAFKA_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:19092".to_string())
}

/// The Apache Kafka release under test, as (major, minor): `KAFKA_VERSION`, which
/// `scripts/test` sets for each broker it starts, or `scripts/kafka-local`'s default.
pub fn kafka_version() -> (u32, u32) {
    let version = std::env::var("KAFKA_VERSION").unwrap_or_else(|_| "4.4.0".to_string());
    let mut parts = version.split('.').map(|p| p.parse::<u32>());
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor),
        _ => panic!("KAFKA_VERSION {version:?} is not a release such as 4.4.0"),
    }
}

/// The listener `offset` ports above the PLAINTEXT bootstrap, as `scripts/kafka-local`
/// lays them out.
pub fn listener(offset: u16) -> String {
    let plain = bootstrap();
    let first = plain.split(',').next().unwrap_or_default();
    let (host, port) = first
        .rsplit_once(':')
        .unwrap_or_else(|| panic!("bootstrap {plain:?} is not host:port"));
    let port: u16 = port
        .parse()
        .unwrap_or_else(|_| panic!("bootstrap {plain:?} has no port"));
    format!("{host}:{}", port + offset)
}

pub fn sasl_bootstrap() -> String {
    listener(2)
}

pub fn ssl_bootstrap() -> String {
    listener(3)
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Fails the test (never skips it) when no broker answers.
pub fn require_kafka() {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("client");
    if let Err(e) = consumer.fetch_metadata(None, Duration::from_secs(15)) {
        panic!(
            "no Kafka broker at {}: {e}. Start one with `scripts/kafka-local start` \
             (scripts/test does this).",
            bootstrap()
        );
    }
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A name no other test uses, so tests can share one broker.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{nanos}-{n}", std::process::id())
}

/// A regex that matches exactly `name` (a generated topic or group name).
pub fn anchored(name: &str) -> String {
    format!("^{}$", name.replace('.', "\\.").replace('-', "\\-"))
}

/// Wall-clock milliseconds since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

pub fn admin() -> AdminClient<DefaultClientContext> {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .expect("admin client")
}

pub async fn create_topic(name: &str, partitions: i32) {
    create_topic_with(name, partitions, &[]).await
}

/// [`create_topic`] with topic configurations (`retention.ms`, ...).
pub async fn create_topic_with(name: &str, partitions: i32, configs: &[(&str, &str)]) {
    let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    for (key, value) in configs {
        topic = topic.set(key, value);
    }
    let results = admin()
        .create_topics(
            [&topic],
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await
        .expect("create_topics");
    for r in results {
        r.unwrap_or_else(|(t, e)| panic!("creating {t}: {e}"));
    }
    // Wait until every partition has a leader that answers ListOffsets.
    let consumer = plain_consumer("read_uncommitted");
    let deadline = Instant::now() + Duration::from_secs(30);
    for p in 0..partitions {
        while consumer
            .fetch_watermarks(name, p, Duration::from_secs(5))
            .is_err()
        {
            assert!(
                Instant::now() < deadline,
                "topic {name} partition {p} never became available"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn plain_consumer(isolation: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("isolation.level", isolation)
        .create()
        .expect("consumer")
}

/// The high watermark, straight from the broker (test-side check, not the exporter's).
pub fn high_watermark(topic: &str, partition: i32) -> i64 {
    plain_consumer("read_uncommitted")
        .fetch_watermarks(topic, partition, Duration::from_secs(10))
        .expect("watermarks")
        .1
}

/// Waits until a fresh client reads the partition's watermarks through `isolation`
/// (`read_uncommitted` or `read_committed`): its leader answers ListOffsets. A broker that
/// has just started may still refuse them (`NotLeaderOrFollower`) while it takes its
/// partitions back; a test that counts the exporter's cycles counts them from here.
pub fn wait_partition_answers(topic: &str, partition: i32, isolation: &str) {
    let consumer = plain_consumer(isolation);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match consumer.fetch_watermarks(topic, partition, Duration::from_secs(2)) {
            Ok(_) => return,
            Err(error) => assert!(
                Instant::now() < deadline,
                "{topic}/{partition}: no watermarks through {isolation} within 60 s: {error}"
            ),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until the partition's high watermark reaches `expected` (e.g. a transaction
/// marker has landed), so the next write gets a known offset.
pub fn wait_high_watermark(topic: &str, partition: i32, expected: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let hw = high_watermark(topic, partition);
        if hw == expected {
            return;
        }
        assert!(
            hw < expected,
            "{topic}/{partition}: high watermark {hw} passed the expected {expected}"
        );
        assert!(
            Instant::now() < deadline,
            "{topic}/{partition}: high watermark stuck at {hw}, expected {expected}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub type Producer_ = ThreadedProducer<DefaultProducerContext>;

/// A plain (non-transactional, non-idempotent) producer.
pub fn plain_producer() -> Producer_ {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("linger.ms", "0")
        .create()
        .expect("producer")
}

/// A transactional producer, initialised and ready to begin.
pub fn transactional_producer(transactional_id: &str) -> Producer_ {
    let producer: Producer_ = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("transactional.id", transactional_id)
        .set("linger.ms", "0")
        .create()
        .expect("transactional producer");
    producer
        .init_transactions(Duration::from_secs(30))
        .expect("init_transactions");
    producer
}

/// Sends `count` records to one partition and waits until all are acknowledged.
pub fn send(producer: &Producer_, topic: &str, partition: i32, count: usize) {
    send_with_timestamp(producer, topic, partition, count, None)
}

/// As [`send`], with the records' timestamp (CreateTime) set to `timestamp_ms` when given,
/// as Kafka Streams, Connect or Flink set event time.
pub fn send_with_timestamp(
    producer: &Producer_,
    topic: &str,
    partition: i32,
    count: usize,
    timestamp_ms: Option<i64>,
) {
    for i in 0..count {
        let payload = format!("record-{i}");
        let mut record = BaseRecord::<(), _>::to(topic)
            .partition(partition)
            .payload(&payload);
        if let Some(timestamp_ms) = timestamp_ms {
            record = record.timestamp(timestamp_ms);
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((
                    KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                    r,
                )) => {
                    record = r;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err((e, _)) => panic!("send to {topic}/{partition}: {e}"),
            }
        }
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

/// A consumer in `group` that reads every partition of `topic` from the beginning as far
/// as its isolation level lets it. Returns the consumer, at the end, and how many records
/// it read.
pub fn read_to_end(
    group: &str,
    topic: &str,
    partitions: i32,
    isolation: &str,
) -> (BaseConsumer, usize) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", group)
        .set("isolation.level", isolation)
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    for p in 0..partitions {
        assignment
            .add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&assignment).expect("assign");
    let mut at_end = std::collections::HashSet::new();
    let mut records = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while at_end.len() < partitions as usize {
        assert!(
            Instant::now() < deadline,
            "{group} did not reach the end of {topic}"
        );
        match consumer.poll(Duration::from_millis(200)) {
            Some(Err(KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => panic!("{group} consuming {topic}: {e}"),
            Some(Ok(_)) => records += 1,
            None => {}
        }
    }
    (consumer, records)
}

/// Commits `offset` on partition 0 of `topic` for `group`, as a consumer would (no
/// member stays).
pub fn commit_offset(group: &str, topic: &str, offset: i64) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(topic, 0, Offset::Offset(offset))
        .unwrap();
    consumer.assign(&offsets).expect("assign");
    consumer
        .commit(&offsets, CommitMode::Sync)
        .unwrap_or_else(|e| panic!("committing for {group}: {e}"));
}

/// [`read_to_end`], then commits the position. Returns the committed offset per
/// partition.
pub fn consume_all_and_commit(
    group: &str,
    topic: &str,
    partitions: i32,
    isolation: &str,
) -> Vec<i64> {
    let (consumer, _) = read_to_end(group, topic, partitions, isolation);
    let position = consumer.position().expect("position");
    let mut commit = TopicPartitionList::new();
    let mut offsets = Vec::new();
    for p in 0..partitions {
        let offset = match position.find_partition(topic, p).map(|e| e.offset()) {
            Some(Offset::Offset(o)) => o,
            other => panic!("{group}: no position on {topic}/{p}: {other:?}"),
        };
        commit
            .add_partition_offset(topic, p, Offset::Offset(offset))
            .unwrap();
        offsets.push(offset);
    }
    consumer.commit(&commit, CommitMode::Sync).expect("commit");
    offsets
}

/// Environment-style settings of cluster `index`: name, bootstrap, one topic, no groups,
/// and librdkafka properties.
pub fn cluster_env(
    index: usize,
    name: &str,
    bootstrap: &str,
    topic: &str,
    client: &[(String, String)],
) -> Vec<(String, String)> {
    let prefix = format!("KAFKA_LSO_EXPORTER_CLUSTERS__{index}__");
    let mut env = vec![
        (format!("{prefix}NAME"), name.to_string()),
        (format!("{prefix}BOOTSTRAP_SERVERS"), bootstrap.to_string()),
        (
            format!("{prefix}TOPICS__INCLUDE"),
            format!("[{:?}]", format!("^{topic}$")),
        ),
        (format!("{prefix}GROUPS__INCLUDE"), "[\"^$\"]".to_string()),
    ];
    for (property, value) in client {
        env.push((format!("{prefix}CLIENT__{property}"), value.clone()));
    }
    env
}

/// The configuration of these settings, sampled every second.
pub fn load(mut env: Vec<(String, String)>) -> Config {
    env.push(("KAFKA_LSO_EXPORTER_INTERVAL".into(), "1s".into()));
    config_from_env(env)
}

/// A configuration made of `KAFKA_LSO_EXPORTER_*` variables only (no config file), in
/// `partition` granularity unless the variables say otherwise (see
/// [`per_partition_unless_set`]).
pub fn config_from_env(vars: impl IntoIterator<Item = (String, String)>) -> Config {
    Config::load(
        Some(&repo_root().join("tests/empty.toml")),
        per_partition_unless_set(vars.into_iter().collect(), false),
        &Overrides::default(),
    )
    .expect("test config")
}

/// The suites read per-partition series of partitions nothing withholds (lags, offsets,
/// failures), so each configured cluster whose `granularity` the variables leave unset
/// gets `partition` (the first one also when `first_from_flags`: `--bootstrap-servers`
/// makes it). The default, `topic`, has tests of its own (tests/golden.rs,
/// tests/ops_e2e.rs), which set it.
pub fn per_partition_unless_set(
    mut vars: Vec<(String, String)>,
    first_from_flags: bool,
) -> Vec<(String, String)> {
    let mut clusters: std::collections::BTreeSet<String> = vars
        .iter()
        .filter_map(|(key, _)| key.strip_prefix("KAFKA_LSO_EXPORTER_CLUSTERS__"))
        .filter_map(|rest| rest.split_once("__").map(|(index, _)| index.to_string()))
        .collect();
    if first_from_flags {
        clusters.insert("0".into());
    }
    for index in clusters {
        let key = format!("KAFKA_LSO_EXPORTER_CLUSTERS__{index}__GRANULARITY");
        if !vars.iter().any(|(k, _)| *k == key) {
            vars.push((key, "partition".into()));
        }
    }
    vars
}

/// The exporter, running in this process on an ephemeral port.
pub struct Exporter {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Exporter {
    /// Starts the exporter with a 1 s interval on one cluster, sampling only the topics
    /// and groups matched by the given regexes. `extra` holds more environment-style
    /// settings (`KAFKA_LSO_EXPORTER_*`).
    pub async fn start(topics: &str, groups: &str, extra: &[(&str, &str)]) -> Exporter {
        let mut env: Vec<(String, String)> = vec![
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__NAME".into(), "test".into()),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__BOOTSTRAP_SERVERS".into(),
                bootstrap(),
            ),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TOPICS__INCLUDE".into(),
                format!("[{topics:?}]"),
            ),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__GROUPS__INCLUDE".into(),
                format!("[{groups:?}]"),
            ),
            ("KAFKA_LSO_EXPORTER_INTERVAL".into(), "1s".into()),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Self::start_with(config_from_env(env)).await
    }

    pub async fn start_with(config: Config) -> Exporter {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            kafka_lso_exporter::run(config, vec![listener], async {
                let _ = stopped.await;
            })
            .await
            .expect("exporter run");
        });
        Exporter {
            addr,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub async fn get(&self, path: &str) -> (u16, String) {
        let response = reqwest::get(format!("http://{}{path}", self.addr))
            .await
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        let status = response.status().as_u16();
        (status, response.text().await.unwrap())
    }

    pub async fn scrape(&self) -> Scrape {
        let (status, body) = self.get("/metrics").await;
        assert_eq!(status, 200, "/metrics answered {status}");
        Scrape::parse(&body)
    }

    /// Scrapes until `check` returns Some, or fails the test after `timeout` with the
    /// last scrape's relevant lines.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Scrape) -> Option<T>,
    ) -> T {
        wait_for_scrape(
            what,
            timeout,
            Duration::from_millis(200),
            || self.scrape(),
            check,
        )
        .await
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("exporter stops within 10 s")
                .expect("exporter task");
        }
    }
}

/// Scrapes every `pause` until `check` returns Some, or fails the test after `timeout`
/// with the last scrape.
pub async fn wait_for_scrape<T, F>(
    what: &str,
    timeout: Duration,
    pause: Duration,
    scrape: impl Fn() -> F,
    check: impl Fn(&Scrape) -> Option<T>,
) -> T
where
    F: std::future::Future<Output = Scrape>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let scrape = scrape().await;
        if let Some(value) = check(&scrape) {
            return value;
        }
        if Instant::now() > deadline {
            panic!(
                "timed out after {timeout:?} waiting for {what}; last scrape:\n{}",
                scrape.text
            );
        }
        tokio::time::sleep(pause).await;
    }
}

/// One parsed `/metrics` response.
#[derive(Clone)]
pub struct Scrape {
    pub text: String,
    pub samples: Vec<(String, BTreeMap<String, String>, f64)>,
}

impl Scrape {
    pub fn parse(text: &str) -> Scrape {
        let mut samples = Vec::new();
        for line in text.lines() {
            if line.starts_with('#') || line.is_empty() {
                continue;
            }
            let (series, value) = line.rsplit_once(' ').expect("sample line");
            let value: f64 = value
                .parse()
                .unwrap_or_else(|_| panic!("bad value in {line}"));
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (
                    name,
                    parse_labels(rest.strip_suffix('}').expect("closing brace")),
                ),
                None => (series, BTreeMap::new()),
            };
            samples.push((name.to_string(), labels, value));
        }
        Scrape {
            text: text.to_string(),
            samples,
        }
    }

    /// The value of the one series of `name` whose labels include all of `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let matching: Vec<f64> = self.series(name, labels).map(|(_, v)| v).collect();
        assert!(
            matching.len() <= 1,
            "{name} {labels:?} matches {} series",
            matching.len()
        );
        matching.first().copied()
    }

    pub fn series<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&'a str, &'a str)],
    ) -> impl Iterator<Item = (&'a BTreeMap<String, String>, f64)> + 'a {
        self.samples
            .iter()
            .filter(move |(n, l, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|(_, l, v)| (l, *v))
    }
}

fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut chars = text.chars().peekable();
    while chars.peek().is_some() {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        assert_eq!(chars.next(), Some('"'));
        let mut value = String::new();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some('n') => value.push('\n'),
                    Some(other) => value.push(other),
                    None => break,
                },
                '"' => break,
                c => value.push(c),
            }
        }
        labels.insert(key.trim_start_matches(',').to_string(), value);
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    labels
}

/// Labels of a partition series of the test cluster.
pub fn partition_labels<'a>(topic: &'a str, partition: &'a str) -> [(&'a str, &'a str); 3] {
    [
        ("kafka_cluster", "test"),
        ("topic", topic),
        ("partition", partition),
    ]
}

/// Labels of a group-partition series of the test cluster.
pub fn group_labels<'a>(
    group: &'a str,
    topic: &'a str,
    partition: &'a str,
) -> [(&'a str, &'a str); 4] {
    [
        ("kafka_cluster", "test"),
        ("group", group),
        ("topic", topic),
        ("partition", partition),
    ]
}

/// Producer state of one partition as `kafka-transactions.sh describe-producers` prints
/// it: one map of column -> value per producer.
pub fn describe_producers(topic: &str, partition: i32) -> Vec<BTreeMap<String, String>> {
    let partition = partition.to_string();
    transactions_tool(
        &[
            "describe-producers",
            "--topic",
            topic,
            "--partition",
            &partition,
        ],
        "ProducerId",
    )
}

/// `kafka-transactions.sh` with `args`: its table, found by a column named `column`, as
/// one map of column -> value a row.
pub fn transactions_tool(args: &[&str], column: &str) -> Vec<BTreeMap<String, String>> {
    let output = std::process::Command::new(repo_root().join("scripts/kafka-local"))
        .arg("transactions")
        .args(args)
        .output()
        .expect("run kafka-transactions.sh");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "kafka-transactions.sh {args:?} failed: {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<String> = lines
        .by_ref()
        .find(|l| l.split_whitespace().any(|c| c == column))
        .unwrap_or_else(|| panic!("no header in kafka-transactions.sh {args:?} output:\n{text}"))
        .split_whitespace()
        .map(str::to_string)
        .collect();
    lines
        .map(|line| {
            header
                .iter()
                .cloned()
                .zip(line.split_whitespace().map(str::to_string))
                .collect()
        })
        .collect()
}
