//! Transaction forensics against a real broker: the exporter names the transaction that
//! pins each LSO (transactional id, producer id and epoch, start offset, true age), counts
//! open and hanging transactions, lists the groups they block on `/` and
//! `/api/v1/stuck`, and agrees with Kafka's own `kafka-transactions.sh describe-producers`;
//! a healthy producer committing and aborting many transactions, restarted once, is never
//! counted fenced and dates each transaction from its own start, with the Java client
//! (transaction version 2 on Kafka 4.x: an epoch bump at every commit and abort) and with
//! librdkafka (version 1).

#[path = "common/api_doc.rs"]
mod api_doc;
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::java::JavaProducer;
use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::producer::Producer;

const CYCLE: Duration = Duration::from_secs(1);

/// The open-transaction series of one partition: (labels, age). Each transaction's
/// `kafka_transaction_open_info` is 1 and its age is the gauge with the same labels.
fn open_info(
    scrape: &Scrape,
    topic: &str,
    partition: &str,
) -> Vec<(BTreeMap<String, String>, f64)> {
    let selector = [
        ("kafka_cluster", "test"),
        ("topic", topic),
        ("partition", partition),
    ];
    let info: Vec<(BTreeMap<String, String>, f64)> = scrape
        .series("kafka_transaction_open_info", &selector)
        .map(|(labels, value)| (labels.clone(), value))
        .collect();
    let ages: Vec<(BTreeMap<String, String>, f64)> = scrape
        .series("kafka_transaction_open_age_seconds", &selector)
        .map(|(labels, value)| (labels.clone(), value))
        .collect();
    assert!(
        info.iter().all(|(_, v)| *v == 1.0),
        "info series are 1: {info:?}"
    );
    assert_eq!(
        info.iter().map(|(l, _)| l).collect::<Vec<_>>(),
        ages.iter().map(|(l, _)| l).collect::<Vec<_>>(),
        "one age per info series, with the same labels"
    );
    ages
}

/// One held transaction: its id and producer are named, its start offset is the LSO, its
/// age is right within a cycle, the read_committed group it blocks is listed on `/` and
/// `/api/v1/stuck` with the abort command, and `describe-producers` agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn names_the_transaction_that_pins_the_lso() {
    require_kafka();
    let topic = unique("fx-held");
    let group = unique("fx-blocked");
    let transactional_id = unique("fx-etl");
    create_topic(&topic, 2).await;
    let plain = plain_producer();
    send(&plain, &topic, 0, 5);
    wait_high_watermark(&topic, 0, 5);

    let held = transactional_producer(&transactional_id);
    held.begin_transaction().unwrap();
    let opened_ms = now_ms();
    send(&held, &topic, 0, 3);
    wait_high_watermark(&topic, 0, 8);
    // Partition 1 stays empty: HW == LSO == 0, so no transaction can be open there.
    let committed = consume_all_and_commit(&group, &topic, 1, "read_committed");
    assert_eq!(committed, vec![5], "read_committed stops at the LSO");

    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;
    let p0 = partition_labels(&topic, "0");
    let (labels, age, scraped_ms) = exporter
        .wait_for("the open transaction named", Duration::from_secs(30), |s| {
            let info = open_info(s, &topic, "0");
            (info.len() == 1).then(|| (info[0].0.clone(), info[0].1, now_ms()))
        })
        .await;
    assert_eq!(labels["transactional_id"], transactional_id);
    assert_eq!(
        labels["start_offset"], "5",
        "the transaction starts at the LSO"
    );
    let scrape = exporter.scrape().await;
    assert_eq!(
        scrape.value("kafka_partition_last_stable_offset", &p0),
        Some(5.0)
    );
    assert_eq!(
        scrape.value("kafka_partition_open_transactions", &p0),
        Some(1.0)
    );
    assert_eq!(
        scrape.value("kafka_partition_hanging_transactions", &p0),
        Some(0.0)
    );
    let p1 = partition_labels(&topic, "1");
    assert_eq!(
        scrape.value("kafka_partition_open_transactions", &p1),
        Some(0.0)
    );
    assert_eq!(
        scrape.value("kafka_partition_oldest_transaction_age_seconds", &p1),
        Some(0.0)
    );
    // The age is the coordinator's: it started when the first record was added, between
    // `opened_ms` and the first send's acknowledgement, and the sample is at most a
    // cycle older than the scrape.
    let truth = (scraped_ms - opened_ms) as f64 / 1000.0;
    assert!(
        age <= truth + 0.5 && age >= truth - CYCLE.as_secs_f64() - 1.0,
        "age {age}s, truth about {truth}s"
    );

    // Kafka's own tool sees the same producer at the same offset.
    let producers = describe_producers(&topic, 0);
    let open: Vec<_> = producers
        .iter()
        .filter(|p| p.get("CurrentTransactionStartOffset").map(String::as_str) != Some("-1"))
        .collect();
    assert_eq!(open.len(), 1, "describe-producers: {producers:?}");
    assert_eq!(open[0]["ProducerId"], labels["producer_id"]);
    assert_eq!(open[0]["ProducerEpoch"], labels["producer_epoch"]);
    assert_eq!(
        open[0]["CurrentTransactionStartOffset"],
        labels["start_offset"]
    );

    // The blocked group, on the page and in the API.
    let (status, json) = exporter.get("/api/v1/stuck").await;
    assert_eq!(status, 200);
    // Every key of the live answer as docs/api.md documents it.
    api_doc::assert_documented(&json);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let entry = json["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["topic"] == topic.as_str())
        .unwrap_or_else(|| panic!("{topic} not in /api/v1/stuck: {json}"));
    assert_eq!(entry["partition"], 0);
    assert_eq!(entry["last_stable_offset"], 5);
    assert_eq!(entry["hw_minus_lso"], 3);
    assert_eq!(entry["blocked_groups"], serde_json::json!([group]));
    let t = &entry["transactions"][0];
    assert_eq!(t["transactional_id"], transactional_id.as_str());
    assert_eq!(t["state"], "Ongoing");
    assert_eq!(t["hanging"], false);
    assert_eq!(
        t["abort_command"],
        format!(
            "kafka-transactions.sh --bootstrap-server {} abort --topic {topic} --partition 0 --start-offset 5",
            bootstrap()
        )
    );
    let (_, page) = exporter.get("/").await;
    assert!(page.contains(&transactional_id), "{page}");
    assert!(page.contains(&group), "{page}");
    assert!(page.contains(&format!("--topic {topic} --partition 0 --start-offset 5")));

    // Committed: the series vanish within a cycle or two.
    held.commit_transaction(Duration::from_secs(30)).unwrap();
    let ended = Instant::now();
    exporter
        .wait_for("the transaction gone after commit", CYCLE * 3, |s| {
            (open_info(s, &topic, "0").is_empty()
                && s.value("kafka_partition_open_transactions", &p0) == Some(0.0))
            .then_some(())
        })
        .await;
    eprintln!(
        "series gone {:.1}s after commit",
        ended.elapsed().as_secs_f64()
    );
    exporter.stop().await;
}

/// Two transactions in one partition: open_transactions 2, the older one sets the LSO and
/// the oldest age; abort the older and the LSO moves to the younger's start; abort that
/// and nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_transactions_in_one_partition() {
    require_kafka();
    let topic = unique("fx-two");
    create_topic(&topic, 1).await;
    let (older_id, younger_id) = (unique("fx-older"), unique("fx-younger"));
    let older = transactional_producer(&older_id);
    older.begin_transaction().unwrap();
    send(&older, &topic, 0, 2);
    wait_high_watermark(&topic, 0, 2);
    std::thread::sleep(Duration::from_secs(2));
    let younger = transactional_producer(&younger_id);
    younger.begin_transaction().unwrap();
    send(&younger, &topic, 0, 2);
    wait_high_watermark(&topic, 0, 4);

    let exporter = Exporter::start(&anchored(&topic), "^$", &[]).await;
    let p = partition_labels(&topic, "0");
    let info = exporter
        .wait_for("two open transactions", Duration::from_secs(30), |s| {
            let info = open_info(s, &topic, "0");
            (info.len() == 2).then_some(info)
        })
        .await;
    let scrape = exporter.scrape().await;
    assert_eq!(
        scrape.value("kafka_partition_open_transactions", &p),
        Some(2.0)
    );
    assert_eq!(
        scrape.value("kafka_partition_last_stable_offset", &p),
        Some(0.0)
    );
    let by_id: BTreeMap<&str, (&BTreeMap<String, String>, f64)> = info
        .iter()
        .map(|(labels, age)| (labels["transactional_id"].as_str(), (labels, *age)))
        .collect();
    assert_eq!(
        by_id[older_id.as_str()].0["start_offset"],
        "0",
        "the older one sets the LSO"
    );
    assert_eq!(by_id[younger_id.as_str()].0["start_offset"], "2");
    assert!(by_id[older_id.as_str()].1 > by_id[younger_id.as_str()].1 + 1.0);
    let oldest = scrape
        .value("kafka_partition_oldest_transaction_age_seconds", &p)
        .unwrap();
    assert!(
        oldest >= by_id[older_id.as_str()].1,
        "oldest {oldest}, info {info:?}"
    );

    older.abort_transaction(Duration::from_secs(30)).unwrap();
    exporter
        .wait_for("the younger transaction alone", CYCLE * 3, |s| {
            let info = open_info(s, &topic, "0");
            (info.len() == 1
                && info[0].0["transactional_id"] == younger_id
                && s.value("kafka_partition_last_stable_offset", &p) == Some(2.0)
                && s.value("kafka_partition_open_transactions", &p) == Some(1.0))
            .then_some(())
        })
        .await;
    younger.abort_transaction(Duration::from_secs(30)).unwrap();
    exporter
        .wait_for("no transaction left", CYCLE * 3, |s| {
            (open_info(s, &topic, "0").is_empty()
                && s.value("kafka_partition_open_transactions", &p) == Some(0.0)
                && s.value("kafka_partition_oldest_transaction_age_seconds", &p) == Some(0.0))
            .then_some(())
        })
        .await;
    exporter.stop().await;
}

/// A producer that disappears with its transaction open: named while the coordinator
/// holds it, gone within a cycle of the coordinator's timeout abort.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn vanishes_after_the_coordinator_times_it_out() {
    require_kafka();
    let topic = unique("fx-timeout");
    let transactional_id = unique("fx-abandoned");
    create_topic(&topic, 1).await;
    let producer: Producer_ = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("transactional.id", &transactional_id)
        .set("transaction.timeout.ms", "4000")
        .set("linger.ms", "0")
        .create()
        .expect("transactional producer");
    producer.init_transactions(Duration::from_secs(30)).unwrap();
    producer.begin_transaction().unwrap();
    send(&producer, &topic, 0, 1);
    let exporter = Exporter::start(&anchored(&topic), "^$", &[]).await;
    let info = exporter
        .wait_for(
            "the abandoned transaction named",
            Duration::from_secs(30),
            |s| {
                let info = open_info(s, &topic, "0");
                (info.len() == 1).then_some(info)
            },
        )
        .await;
    assert_eq!(info[0].0["transactional_id"], transactional_id);
    // Leave it open: no commit, no abort, and no clean close that could end it.
    std::mem::forget(producer);
    let p = partition_labels(&topic, "0");
    exporter
        .wait_for(
            "the series gone after the timeout abort",
            Duration::from_secs(20),
            |s| {
                (open_info(s, &topic, "0").is_empty()
                    && s.value("kafka_partition_open_transactions", &p) == Some(0.0)
                    && s.value("kafka_partition_hw_minus_lso", &p) == Some(0.0))
                .then_some(())
            },
        )
        .await;
    exporter.stop().await;
}

/// A transactional id reused by a new producer instance fences the old one
/// mid-transaction: the coordinator aborts the old transaction, the partition is released
/// and nothing is left counted as hanging (the hanging rule itself is unit-tested in
/// `snapshot.rs`: a real broker does not leave hanging transactions on demand).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fenced_producer_releases_the_partition_and_nothing_hangs() {
    require_kafka();
    let topic = unique("fx-fenced");
    let transactional_id = unique("fx-reused");
    create_topic(&topic, 1).await;
    let first = transactional_producer(&transactional_id);
    first.begin_transaction().unwrap();
    send(&first, &topic, 0, 1);
    let exporter = Exporter::start(&anchored(&topic), "^$", &[]).await;
    let p = partition_labels(&topic, "0");
    exporter
        .wait_for("the transaction named", Duration::from_secs(30), |s| {
            (open_info(s, &topic, "0").len() == 1
                && s.value("kafka_partition_hanging_transactions", &p) == Some(0.0))
            .then_some(())
        })
        .await;
    // A new instance with the same id fences the first: the coordinator aborts the open
    // transaction, which releases the partition; nothing may be left counted as hanging.
    let second = transactional_producer(&transactional_id);
    exporter
        .wait_for("released and nothing hanging", CYCLE * 10, |s| {
            (open_info(s, &topic, "0").is_empty()
                && s.value("kafka_partition_hanging_transactions", &p) == Some(0.0)
                && s.value("kafka_partition_hw_minus_lso", &p) == Some(0.0))
            .then_some(())
        })
        .await;
    drop(second);
    drop(first);
    exporter.stop().await;
}

/// Event time an hour old (the CreateTime Kafka Streams, Connect or Flink write, which
/// DescribeProducers also reports as the producer's last timestamp) never dates the
/// transaction: with forensics (the coordinator's clock) and without (the exporter's own),
/// in an exporter started fresh and again after a restart, the transaction is not hanging
/// and the LSO not stuck for an hour. The withheld age, read from the record, is an hour:
/// record timestamps keep meaning event time there, as in time lag.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn event_time_an_hour_old_neither_hangs_nor_moves_the_stuck_clock() {
    require_kafka();
    let topic = unique("fx-event-time");
    let transactional_id = unique("fx-streams");
    create_topic(&topic, 1).await;
    let held = transactional_producer(&transactional_id);
    held.begin_transaction().unwrap();
    let opened_ms = now_ms();
    send_with_timestamp(&held, &topic, 0, 3, Some(opened_ms - 3_600_000));
    wait_high_watermark(&topic, 0, 3);
    let p0 = partition_labels(&topic, "0");

    // Fresh, then restarted, with forensics on and off.
    for forensics in ["true", "true", "false", "false"] {
        let exporter = Exporter::start(
            &anchored(&topic),
            "^$",
            &[("KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTIONS", forensics)],
        )
        .await;
        for cycle in 0..3 {
            let (stuck, withheld) = exporter
                .wait_for("the held partition sampled", Duration::from_secs(30), |s| {
                    let stuck = s.value("kafka_partition_lso_stuck_seconds", &p0)?;
                    let withheld = s.value("kafka_partition_withheld_age_seconds", &p0)?;
                    Some((stuck, withheld))
                })
                .await;
            let open_for = (now_ms() - opened_ms) as f64 / 1000.0;
            assert!(
                stuck <= open_for + 1.0,
                "forensics {forensics}, cycle {cycle}: stuck {stuck}s, open {open_for}s"
            );
            assert!(
                withheld >= 3_600.0,
                "the record's own (event) time: {withheld}s"
            );
            let scrape = exporter.scrape().await;
            if forensics == "true" {
                assert_eq!(
                    scrape.value("kafka_partition_hanging_transactions", &p0),
                    Some(0.0)
                );
                let ages = open_info(&scrape, &topic, "0");
                assert!(
                    ages.iter().all(|(_, age)| *age <= open_for + 1.0),
                    "transaction ages {ages:?}, open {open_for}s"
                );
            }
            tokio::time::sleep(CYCLE).await;
        }
        exporter.stop().await;
    }
    held.abort_transaction(Duration::from_secs(30)).unwrap();
}

/// A transactional producer of either client, driven the same way.
enum Transactional {
    /// Transaction version 2 on Kafka 4.x, version 1 on 3.x.
    Java(JavaProducer),
    /// Transaction version 1.
    Librdkafka(Producer_),
}

impl Transactional {
    fn begin(&mut self) {
        match self {
            Transactional::Java(p) => p.must("begin"),
            Transactional::Librdkafka(p) => p.begin_transaction().unwrap(),
        }
    }

    fn send(&mut self, topic: &str) {
        match self {
            Transactional::Java(p) => p.must(&format!("send {topic} 0 1")),
            Transactional::Librdkafka(p) => send(p, topic, 0, 1),
        }
    }

    fn end(&mut self, commit: bool) {
        match (self, commit) {
            (Transactional::Java(p), true) => p.must("commit"),
            (Transactional::Java(p), false) => p.must("abort"),
            (Transactional::Librdkafka(p), true) => {
                p.commit_transaction(Duration::from_secs(30)).unwrap()
            }
            (Transactional::Librdkafka(p), false) => {
                p.abort_transaction(Duration::from_secs(30)).unwrap()
            }
        }
    }
}

/// When the exporter's last cycle that reached the cluster ended (Unix seconds).
fn last_cycle(scrape: &Scrape) -> Option<f64> {
    scrape.value(
        "kafka_lso_exporter_last_success_timestamp_seconds",
        &[("kafka_cluster", "test")],
    )
}

/// Returns once a whole cycle of the exporter ran after the call: every scrape from then
/// on shows what the cluster was after the call began.
async fn whole_cycle(exporter: &Exporter) {
    let first = last_cycle(&exporter.scrape().await).unwrap_or(0.0);
    let ended = exporter
        .wait_for("a cycle ends", Duration::from_secs(15), |s| {
            last_cycle(s).filter(|at| *at > first)
        })
        .await;
    exporter
        .wait_for("the next cycle ends", Duration::from_secs(15), |s| {
            last_cycle(s).filter(|at| *at > ended)
        })
        .await;
}

/// The fencings of `id` on /metrics (0 while the series is absent).
fn fencings(scrape: &Scrape, id: &str) -> f64 {
    scrape
        .value(
            "kafka_transaction_fencings_total",
            &[("transactional_id", id)],
        )
        .unwrap_or(0.0)
}

/// A healthy producer commits and aborts many transactions in a row (six at a time, too
/// quick for most to be sampled, then one held open until sampled), and is restarted once,
/// right after an abort the exporter saw: the new instance's InitProducerId leaves the id
/// `Empty` two epochs up under transaction version 2 (one under version 1), what a fence
/// leaves too, and is seen so while the exporter still follows the aborted transaction.
/// Never a fencing; every held transaction is dated from its own start (its age, the
/// partition's oldest age, the LSO's stuck clock and the coordinator's age all at most
/// the time since it began: nothing carried from the previous one); nothing hangs.
async fn healthy_producer_restarted_after_an_abort(client: &str) {
    require_kafka();
    let topic = unique(&format!("fx-healthy-{client}"));
    let id = unique(&format!("fx-healthy-{client}"));
    create_topic(&topic, 1).await;
    // The Java instance that takes over is started at once (a JVM compiles the source
    // first) and initialised only at the restart.
    let (mut producer, mut next) = match client {
        "java" => {
            let (first, next) = (JavaProducer::start(&id), JavaProducer::start(&id));
            first.ready();
            next.ready();
            let mut first = Transactional::Java(first);
            if let Transactional::Java(p) = &mut first {
                p.must("init");
            }
            (first, Some(next))
        }
        _ => (Transactional::Librdkafka(transactional_producer(&id)), None),
    };
    let exporter = Exporter::start(
        &anchored(&topic),
        "^$",
        &[
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTION_LIST_MIN_AGE",
                "1s",
            ),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTION_LIST_DETAIL",
                "1000",
            ),
        ],
    )
    .await;
    let p0 = partition_labels(&topic, "0");
    let coordinator_age = |s: &Scrape| {
        s.series(
            "kafka_coordinator_transaction_age_seconds",
            &[("transactional_id", id.as_str())],
        )
        .map(|(_, age)| age)
        .next()
    };
    let mut epochs = Vec::new();
    let rounds = 6;
    for round in 0..rounds {
        for n in 0..6 {
            producer.begin();
            producer.send(&topic);
            producer.end(n % 2 == 0);
        }
        let began = Instant::now();
        producer.begin();
        producer.send(&topic);
        // The partition's only writer: its record is the last one.
        let start_offset = (high_watermark(&topic, 0) - 1).to_string();
        whole_cycle(&exporter).await;
        let (scrape, labels, age, coordinator) = exporter
            .wait_for(
                "the held transaction sampled and listed",
                Duration::from_secs(15),
                |s| {
                    let open = open_info(s, &topic, "0");
                    let (labels, age) = open
                        .iter()
                        .find(|(l, _)| l["start_offset"] == start_offset)?
                        .clone();
                    Some((s.clone(), labels, age, coordinator_age(s)?))
                },
            )
            .await;
        let since = began.elapsed().as_secs_f64() + 0.5;
        let context = format!(
            "round {round}, {since:.1}s since it began:\n{}",
            scrape.text
        );
        assert_eq!(labels["transactional_id"], id, "{context}");
        assert_eq!(open_info(&scrape, &topic, "0").len(), 1, "{context}");
        let clocks = [
            ("open age", Some(age)),
            (
                "oldest age",
                scrape.value("kafka_partition_oldest_transaction_age_seconds", &p0),
            ),
            (
                "LSO stuck",
                scrape.value("kafka_partition_lso_stuck_seconds", &p0),
            ),
            ("coordinator age", Some(coordinator)),
        ];
        for (clock, value) in clocks {
            let value = value.unwrap_or_else(|| panic!("{clock} absent; {context}"));
            assert!(
                (0.0..=since).contains(&value),
                "{clock} {value}s, not this transaction's; {context}"
            );
        }
        assert_eq!(
            scrape.value("kafka_partition_hanging_transactions", &p0),
            Some(0.0),
            "{context}"
        );
        assert_eq!(fencings(&scrape, &id), 0.0, "{context}");
        epochs.push(labels["producer_epoch"].parse::<i64>().unwrap());

        let commit = round % 2 == 0;
        producer.end(commit);
        if round == 3 {
            assert!(!commit);
            // The exporter follows the aborted transaction up (it sees the abort), then
            // the restart: the old instance goes away without a word, the new one
            // initialises, and a cycle sees it Empty before it begins.
            whole_cycle(&exporter).await;
            producer = match next.take() {
                Some(mut java) => {
                    drop(producer);
                    java.must("init");
                    Transactional::Java(java)
                }
                None => {
                    drop(producer);
                    Transactional::Librdkafka(transactional_producer(&id))
                }
            };
            whole_cycle(&exporter).await;
        }
    }
    whole_cycle(&exporter).await;
    whole_cycle(&exporter).await;
    let scrape = exporter.scrape().await;
    assert_eq!(fencings(&scrape, &id), 0.0, "{}", scrape.text);
    assert!(
        open_info(&scrape, &topic, "0").is_empty(),
        "{}",
        scrape.text
    );
    assert_eq!(
        scrape.value("kafka_partition_hanging_transactions", &p0),
        Some(0.0)
    );
    assert_eq!(
        scrape.value("kafka_partition_lso_stuck_seconds", &p0),
        Some(0.0)
    );
    // Transaction version 2 bumps the epoch at every commit and abort (seven per round),
    // version 1 only at the restart.
    eprintln!("{client}: epochs of the held transactions {epochs:?}");
    let java_v2 = client == "java" && kafka_version() >= (4, 4);
    for (round, pair) in epochs.windows(2).enumerate() {
        let (was, is) = (pair[0], pair[1]);
        match (java_v2, round == 3) {
            (true, _) => assert!(is >= was + 7, "{client}: epochs {epochs:?}"),
            (false, false) => assert!(is == was || is >= was + 7, "{client}: epochs {epochs:?}"),
            (false, true) => assert!(is > was, "{client}: epochs {epochs:?}"),
        }
    }
    exporter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn healthy_java_producer_restarted_after_an_abort_is_never_fenced() {
    healthy_producer_restarted_after_an_abort("java").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn healthy_librdkafka_producer_restarted_after_an_abort_is_never_fenced() {
    healthy_producer_restarted_after_an_abort("librdkafka").await;
}
