//! Lag that never lies on transactional topics, against a real broker: commit markers
//! and aborted records are never lag, a group is blocked only when it has nothing left to
//! read and has not read past the LSO, time lag against both bounds, and the age of the
//! oldest withheld record.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

fn anchored(name: &str) -> String {
    format!("^{}$", name.replace('.', "\\."))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Sends `count` records to one partition with the given CreateTime and waits for them.
fn send_at(producer: &Producer_, topic: &str, partition: i32, count: usize, timestamp_ms: i64) {
    for i in 0..count {
        let payload = format!("record-{i}");
        producer
            .send(
                BaseRecord::<(), _>::to(topic)
                    .partition(partition)
                    .payload(&payload)
                    .timestamp(timestamp_ms),
            )
            .unwrap_or_else(|(e, _)| panic!("send to {topic}: {e}"));
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
}

/// Asserts a time value is within `tolerance` seconds of `expected`.
fn assert_near(what: &str, value: Option<f64>, expected: f64, tolerance: f64) {
    let value = value.unwrap_or_else(|| panic!("{what}: absent"));
    assert!(
        (value - expected).abs() <= tolerance,
        "{what}: {value:.2} s where {expected:.2} s (± {tolerance} s) was expected"
    );
}

/// An exactly-once consume-transform-produce loop (read_committed, offsets committed in
/// its producer's transaction) and an auto-commit consumer that read everything of a
/// transactional topic: no lag of either kind, whatever the commit marker's offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exactly_once_and_auto_commit_consumers_at_rest_have_no_lag() {
    require_kafka();
    let input = unique("eos-in");
    let output = unique("eos-out");
    let eos_group = unique("eos-pipeline");
    let auto_group = unique("eos-autocommit");
    create_topic(&input, 1).await;
    create_topic(&output, 1).await;

    let upstream = transactional_producer(&unique("eos-upstream"));
    upstream.begin_transaction().unwrap();
    send(&upstream, &input, 0, 10);
    upstream
        .commit_transaction(Duration::from_secs(30))
        .unwrap();
    wait_high_watermark(&input, 0, 11);

    // The pipeline: read 10 records, write them on, send offset 10 with the transaction.
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", &eos_group)
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(&input, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).unwrap();
    let processor = transactional_producer(&unique("eos-processor"));
    processor.begin_transaction().unwrap();
    let mut last = -1;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while last < 9 {
        assert!(
            std::time::Instant::now() < deadline,
            "pipeline stalled at {last}"
        );
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            let message = message.expect("consume");
            processor
                .send(BaseRecord::<(), [u8]>::to(&output).payload(message.payload().unwrap()))
                .map_err(|(e, _)| e)
                .unwrap();
            last = message.offset();
        }
    }
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset(&input, 0, Offset::Offset(last + 1))
        .unwrap();
    processor
        .send_offsets_to_transaction(
            &offsets,
            &consumer.group_metadata().expect("group metadata"),
            Duration::from_secs(30),
        )
        .unwrap();
    processor
        .commit_transaction(Duration::from_secs(30))
        .unwrap();

    // librdkafka's auto-commit stores the offset after the last delivered record (10):
    // the famous "lag 1 forever" on transactional topics.
    let auto: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", &auto_group)
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", "100")
        .set("enable.partition.eof", "true")
        .create()
        .expect("consumer");
    auto.assign(&assignment).unwrap();
    loop {
        match auto.poll(Duration::from_millis(200)) {
            Some(Err(KafkaError::PartitionEOF(_))) => break,
            Some(Err(e)) => panic!("auto-commit consumer: {e}"),
            _ => assert!(
                std::time::Instant::now() < deadline,
                "auto-commit consumer stalled"
            ),
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    auto.commit_consumer_state(CommitMode::Sync).ok();
    drop(auto);

    let groups = format!("{}|{}", anchored(&eos_group), anchored(&auto_group));
    let exporter = Exporter::start(&anchored(&input), &groups, &[]).await;
    for group in [&eos_group, &auto_group] {
        let g = group_labels(group, &input, "0");
        let committed = exporter
            .wait_for(&format!("{group}'s lags"), Duration::from_secs(15), |s| {
                s.value("kafka_consumergroup_lso_lag_seconds", &g)?;
                s.value("kafka_consumergroup_committed_offset", &g)
            })
            .await;
        assert!(
            (10.0..=11.0).contains(&committed),
            "{group} committed {committed}"
        );
        let s = exporter.scrape().await;
        for metric in [
            "kafka_consumergroup_hw_lag",
            "kafka_consumergroup_lso_lag",
            "kafka_consumergroup_hw_lag_seconds",
            "kafka_consumergroup_lso_lag_seconds",
            "kafka_consumergroup_committed_beyond_lso",
        ] {
            assert_eq!(s.value(metric, &g), Some(0.0), "{metric} of {group}");
        }
    }
    exporter.stop().await;
}

/// A group a known number of data records behind: the markers after them are not lag,
/// and an aborted transaction's records are lag only for read_uncommitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn known_records_behind_markers_and_aborted_transactions() {
    require_kafka();
    let topic = unique("behind");
    let group = unique("behind-group");
    create_topic(&topic, 1).await;
    let t = transactional_producer(&unique("behind-t"));
    t.begin_transaction().unwrap();
    send(&t, &topic, 0, 10);
    t.commit_transaction(Duration::from_secs(30)).unwrap();
    wait_high_watermark(&topic, 0, 11);
    commit_offset(&group, &topic, 7);

    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;
    let g = group_labels(&group, &topic, "0");
    let lags = |s: &Scrape| {
        Some((
            s.value("kafka_consumergroup_hw_lag", &g)?,
            s.value("kafka_consumergroup_lso_lag", &g)?,
        ))
    };
    exporter
        .wait_for("3 records behind, not 4", Duration::from_secs(15), |s| {
            (lags(s)? == (3.0, 3.0)).then_some(())
        })
        .await;

    // An aborted transaction of 4 records (abort marker at 15), then 2 plain records.
    t.begin_transaction().unwrap();
    send(&t, &topic, 0, 4);
    t.abort_transaction(Duration::from_secs(30)).unwrap();
    send(&plain_producer(), &topic, 0, 2);
    wait_high_watermark(&topic, 0, 18);
    exporter
        .wait_for(
            "hw_lag 9 (3 + 4 aborted + 2), lso_lag 5 (3 + 2)",
            Duration::from_secs(10),
            |s| (lags(s)? == (9.0, 5.0)).then_some(()),
        )
        .await;
    exporter.stop().await;
}

/// One pinned partition and four groups around it, with records written at known times
/// (CreateTime). Plain records 0..5 at T-600 s; a transaction opens at 5 at T-300 s and
/// stays open; plain records 6..11 at T-100 s. HW 11, LSO 5.
struct Pinned {
    topic: String,
    t0: i64,
    _transaction: Producer_,
    blocked: String,
    between: String,
    behind: String,
    caught_up: String,
}

async fn pinned_partition_with_groups() -> Pinned {
    let topic = unique("timelag");
    create_topic(&topic, 1).await;
    let t0 = now_ms();
    let plain = plain_producer();
    send_at(&plain, &topic, 0, 5, t0 - 600_000);
    let transaction = transactional_producer(&unique("timelag-t"));
    transaction.begin_transaction().unwrap();
    send_at(&transaction, &topic, 0, 1, t0 - 300_000);
    send_at(&plain, &topic, 0, 5, t0 - 100_000);
    wait_high_watermark(&topic, 0, 11);
    let pinned = Pinned {
        blocked: unique("timelag-blocked-rc"),
        between: unique("timelag-between-ru"),
        behind: unique("timelag-behind-rc"),
        caught_up: unique("timelag-caught-up"),
        topic,
        t0,
        _transaction: transaction,
    };
    commit_offset(&pinned.blocked, &pinned.topic, 5);
    commit_offset(&pinned.between, &pinned.topic, 8);
    commit_offset(&pinned.behind, &pinned.topic, 0);
    commit_offset(&pinned.caught_up, &pinned.topic, 11);
    pinned
}

impl Pinned {
    fn groups(&self) -> String {
        [&self.blocked, &self.between, &self.behind, &self.caught_up]
            .map(|g| anchored(g))
            .join("|")
    }

    /// Checks every value against the truth at the time of the scrape.
    async fn check(&self, exporter: &Exporter) {
        let p = partition_labels(&self.topic, "0");
        exporter
            .wait_for(
                "the time lags of every group",
                Duration::from_secs(15),
                |s| {
                    [&self.blocked, &self.between, &self.behind, &self.caught_up]
                        .iter()
                        .all(|g| {
                            let g = group_labels(g, &self.topic, "0");
                            s.value("kafka_consumergroup_hw_lag_seconds", &g).is_some()
                                && s.value("kafka_consumergroup_lso_lag_seconds", &g).is_some()
                        })
                        .then_some(())
                },
            )
            .await;
        let s = exporter.scrape().await;
        let elapsed = (now_ms() - self.t0) as f64 / 1000.0;
        let tolerance = 2.0; // one 1 s interval, and the scrape
        assert_eq!(s.value("kafka_partition_hw_minus_lso", &p), Some(6.0));
        assert_near(
            "withheld age",
            s.value("kafka_partition_withheld_age_seconds", &p),
            300.0 + elapsed,
            tolerance,
        );
        // (group, hw_lag, lso_lag, beyond, hw_lag_seconds, lso_lag_seconds)
        let cases = [
            (&self.blocked, 6.0, 0.0, 0.0, Some(300.0), Some(0.0)),
            (&self.between, 3.0, 0.0, 3.0, Some(100.0), Some(0.0)),
            (&self.behind, 11.0, 5.0, 0.0, Some(600.0), Some(600.0)),
            // At the HW while the LSO is pinned: it reads uncommitted.
            (&self.caught_up, 0.0, 0.0, 6.0, None, None),
        ];
        for (group, hw_lag, lso_lag, beyond, hw_age, lso_age) in cases {
            let g = group_labels(group, &self.topic, "0");
            assert_eq!(
                (
                    s.value("kafka_consumergroup_hw_lag", &g),
                    s.value("kafka_consumergroup_lso_lag", &g),
                    s.value("kafka_consumergroup_committed_beyond_lso", &g),
                ),
                (Some(hw_lag), Some(lso_lag), Some(beyond)),
                "{group}"
            );
            let expect = |age: Option<f64>| age.map_or(0.0, |a| a + elapsed);
            let hw_expected = if hw_age.is_some() {
                expect(hw_age)
            } else {
                0.0
            };
            let lso_expected = match lso_age {
                Some(a) if a > 0.0 => expect(Some(a)),
                _ => 0.0,
            };
            assert_near(
                &format!("{group} hw_lag_seconds"),
                s.value("kafka_consumergroup_hw_lag_seconds", &g),
                hw_expected,
                tolerance,
            );
            assert_near(
                &format!("{group} lso_lag_seconds"),
                s.value("kafka_consumergroup_lso_lag_seconds", &g),
                lso_expected,
                tolerance,
            );
        }

        // Blocked: the read_committed group at the LSO, never the read_uncommitted one
        // between the LSO and the HW, nor the one with records left to read.
        let (status, body) = exporter.get("/api/v1/stuck").await;
        assert_eq!(status, 200);
        let json: serde_json::Value = serde_json::from_str(&body).unwrap();
        let entry = json["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["topic"] == self.topic.as_str())
            .unwrap_or_else(|| panic!("{} not in /api/v1/stuck: {body}", self.topic));
        assert_eq!(entry["blocked_groups"], serde_json::json!([self.blocked]));
        assert_near(
            "withheld age in /api/v1/stuck",
            entry["withheld_age_seconds"].as_f64(),
            300.0 + elapsed,
            tolerance + 1.0,
        );
        let (_, page) = exporter.get("/").await;
        let withheld = section(&page, "Partitions withheld by open transactions");
        assert!(
            withheld.contains(&self.blocked),
            "blocked group not on /: {withheld}"
        );
        for group in [&self.between, &self.behind] {
            assert!(
                !withheld.contains(group.as_str()),
                "{group} is not blocked, yet / lists it as blocked: {withheld}"
            );
        }
        // The read_uncommitted group between the LSO and the HW has had its records for
        // 100 s: it is ok, and / lists it nowhere. The group behind has had its first
        // record to read for 600 s without its offset moving: stalled, and named so.
        let between: Vec<&str> = page.lines().filter(|l| l.contains(&self.between)).collect();
        assert!(
            between.is_empty(),
            "{} listed on /: {between:#?}",
            self.between
        );
        let groups = section(&page, "Consumer groups that are not ok");
        let behind = groups
            .lines()
            .find(|l| l.contains(&self.behind))
            .unwrap_or_else(|| panic!("{} not among the groups not ok: {groups}", self.behind));
        assert!(behind.contains(">stalled<"), "{behind}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn time_lag_blocked_groups_and_withheld_age() {
    require_kafka();
    let pinned = pinned_partition_with_groups().await;
    let exporter = Exporter::start(&anchored(&pinned.topic), &pinned.groups(), &[]).await;
    pinned.check(&exporter).await;
    exporter.stop().await;

    // A restarted exporter reads what it needs again: the same values.
    let exporter = Exporter::start(&anchored(&pinned.topic), &pinned.groups(), &[]).await;
    pinned.check(&exporter).await;
    exporter.stop().await;

    // Without transaction forensics: the withheld age still comes from the log (record
    // timestamps), but the stuck clock of an exporter that starts while the LSO is pinned
    // starts from its own first sight: the record's CreateTime is the producer's clock,
    // and here 300 s old.
    let exporter = Exporter::start(
        &anchored(&pinned.topic),
        &pinned.groups(),
        &[("KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTIONS", "false")],
    )
    .await;
    pinned.check(&exporter).await;
    let s = exporter.scrape().await;
    let p = partition_labels(&pinned.topic, "0");
    assert_eq!(s.value("kafka_partition_open_transactions", &p), None);
    let stuck = s
        .value("kafka_partition_lso_stuck_seconds", &p)
        .expect("stuck clock after a restart without forensics");
    assert!(
        stuck < 30.0,
        "stuck clock after a restart without forensics: {stuck} s, from a producer's \
         timestamp rather than the exporter's first sight"
    );
    exporter.stop().await;
}

/// Far behind (outside a read window of 2 records): the time lag comes from one short
/// read at the committed offset; the count is an upper bound that includes the marker.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn groups_outside_the_window_get_time_lag_from_a_short_read() {
    require_kafka();
    let topic = unique("far");
    let far = unique("far-group");
    let near = unique("near-group");
    create_topic(&topic, 1).await;
    let t0 = now_ms();
    let t = transactional_producer(&unique("far-t"));
    t.begin_transaction().unwrap();
    send_at(&t, &topic, 0, 10, t0 - 1_000_000);
    t.commit_transaction(Duration::from_secs(30)).unwrap();
    // The coordinator writes the marker after the commit returns: wait for it, so that
    // it sits at 10, before the plain records.
    wait_high_watermark(&topic, 0, 11);
    send_at(&plain_producer(), &topic, 0, 10, t0 - 500_000);
    wait_high_watermark(&topic, 0, 21);
    commit_offset(&far, &topic, 3);
    commit_offset(&near, &topic, 19);

    let groups = format!("{}|{}", anchored(&far), anchored(&near));
    let exporter = Exporter::start(
        &anchored(&topic),
        &groups,
        &[("KAFKA_LSO_EXPORTER_CLUSTERS__0__READ_WINDOW", "2")],
    )
    .await;
    let f = group_labels(&far, &topic, "0");
    let n = group_labels(&near, &topic, "0");
    exporter
        .wait_for("both groups' time lag", Duration::from_secs(15), |s| {
            s.value("kafka_consumergroup_hw_lag_seconds", &f)?;
            s.value("kafka_consumergroup_hw_lag_seconds", &n)
        })
        .await;
    let s = exporter.scrape().await;
    let elapsed = (now_ms() - t0) as f64 / 1000.0;
    assert_near(
        "far group",
        s.value("kafka_consumergroup_hw_lag_seconds", &f),
        1000.0 + elapsed,
        2.0,
    );
    assert_near(
        "far group (read_committed)",
        s.value("kafka_consumergroup_lso_lag_seconds", &f),
        1000.0 + elapsed,
        2.0,
    );
    assert_near(
        "near group",
        s.value("kafka_consumergroup_hw_lag_seconds", &n),
        500.0 + elapsed,
        2.0,
    );
    assert_eq!(s.value("kafka_consumergroup_hw_lag", &n), Some(2.0));
    assert_eq!(
        s.value("kafka_consumergroup_hw_lag", &f),
        Some(18.0),
        "outside the window every offset counts, the marker at 10 too"
    );
    exporter.stop().await;
}

/// On a LogAppendTime topic the broker's time counts, not the producer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn log_append_time_topics_use_the_brokers_time() {
    require_kafka();
    let topic = unique("appendtime");
    let group = unique("appendtime-group");
    let new_topic = NewTopic::new(&topic, 1, TopicReplication::Fixed(1))
        .set("message.timestamp.type", "LogAppendTime");
    for result in admin()
        .create_topics([&new_topic], &AdminOptions::new())
        .await
        .expect("create_topics")
    {
        result.unwrap_or_else(|(t, e)| panic!("creating {t}: {e}"));
    }
    let written = now_ms();
    // Claims to be an hour old; the broker stamps its own time.
    send_at(&plain_producer(), &topic, 0, 3, written - 3_600_000);
    wait_high_watermark(&topic, 0, 3);
    commit_offset(&group, &topic, 0);
    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;
    let g = group_labels(&group, &topic, "0");
    exporter
        .wait_for("time lag", Duration::from_secs(15), |s| {
            s.value("kafka_consumergroup_hw_lag_seconds", &g)
        })
        .await;
    let s = exporter.scrape().await;
    assert_near(
        "LogAppendTime lag",
        s.value("kafka_consumergroup_hw_lag_seconds", &g),
        (now_ms() - written) as f64 / 1000.0,
        2.0,
    );
    exporter.stop().await;
}

/// The part of the status page under the heading that starts with `heading`, up to the next.
fn section<'a>(page: &'a str, heading: &str) -> &'a str {
    let start = page
        .find(&format!("<h2>{heading}"))
        .unwrap_or_else(|| panic!("no section {heading:?} on /"));
    let rest = &page[start + 4..];
    &page[start..start + 4 + rest.find("<h2>").unwrap_or(rest.len())]
}
