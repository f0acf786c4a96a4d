//! Every open transaction of the cluster, against a real broker: the list the exporter
//! shows equals `kafka-transactions.sh list` (restricted to the open states) and its
//! `--duration-filter`, with transactional ids idle, empty, long open and young open; a
//! transaction writing only to an unexported topic pins no exported partition; a new
//! producer instance fences an open transaction and counts once, while a healthy Java
//! producer (transaction version 2: an epoch bump at the end of every transaction)
//! committing many transactions counts none; an application that commits and restarts
//! counts none under transaction version 1 and, under version 2, leaves exactly what a
//! fence leaves.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use common::java::JavaProducer;
use common::*;
use rdkafka::producer::Producer;

const OPEN_STATES: [&str; 4] = [
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "PrepareEpochFence",
];

/// An exporter on `topic` that lists transactions open `min_age` seconds, with room for
/// every transaction of the shared broker in detail.
async fn exporter(topic: &str, min_age: u64) -> Exporter {
    let min_age = format!("{min_age}s");
    Exporter::start(
        &anchored(topic),
        "^$",
        &[
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTION_LIST_MIN_AGE",
                &min_age,
            ),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTION_LIST_DETAIL",
                "1000",
            ),
        ],
    )
    .await
}

/// What `kafka-transactions.sh list` (with `extra` arguments) lists in an open state, of
/// the ids starting with `prefix`: id -> (state, producer id, coordinator).
fn tool_open(prefix: &str, extra: &[&str]) -> BTreeMap<String, (String, String, String)> {
    let mut args = vec!["list"];
    args.extend_from_slice(extra);
    transactions_tool(&args, "TransactionalId")
        .into_iter()
        .filter(|row| row["TransactionalId"].starts_with(prefix))
        .filter(|row| OPEN_STATES.contains(&row["TransactionState"].as_str()))
        .map(|row| {
            (
                row["TransactionalId"].clone(),
                (
                    row["TransactionState"].clone(),
                    row["ProducerId"].clone(),
                    row["Coordinator"].clone(),
                ),
            )
        })
        .collect()
}

/// The exporter's listed transactions of the ids starting with `prefix` (from
/// `/api/v1/stuck`): id -> the JSON entry.
async fn exporter_open(exporter: &Exporter, prefix: &str) -> BTreeMap<String, serde_json::Value> {
    let (status, body) = exporter.get("/api/v1/stuck").await;
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    json["transactions"]
        .as_array()
        .unwrap_or_else(|| panic!("no transactions in /api/v1/stuck: {json}"))
        .iter()
        .flat_map(|c| c["oldest"].as_array().cloned().unwrap_or_default())
        .filter(|t| t["transactional_id"].as_str().unwrap().starts_with(prefix))
        .map(|t| (t["transactional_id"].as_str().unwrap().to_string(), t))
        .collect()
}

/// Whether some broker advertises InitProducerId v6 (KIP-939 two-phase commit), by
/// Kafka's own kafka-broker-api-versions.
fn brokers_speak_two_phase_commit() -> bool {
    // The tool moved from the core module (Kafka 3.x) to the tools module in 4.0.
    let class = if kafka_version() < (4, 0) {
        "kafka.admin.BrokerApiVersionsCommand"
    } else {
        "org.apache.kafka.tools.BrokerApiVersionsCommand"
    };
    let output = Command::new(repo_root().join("scripts/kafka-local"))
        .args(["tool", class])
        .args(["--bootstrap-server", &bootstrap()])
        .output()
        .expect("run kafka-broker-api-versions");
    let text = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "kafka-broker-api-versions ({class}): {text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    text.split(',')
        .filter_map(|api| api.trim().strip_prefix("InitProducerId(22): "))
        .map(|range| {
            let max = range.split_whitespace().nth(2).unwrap_or("0");
            max.parse::<i16>().unwrap_or(0)
        })
        .any(|max| max >= 6)
}

/// Ids idle (committed), empty (initialised only), long open on the exported topic, long
/// open on a topic the exporter does not sample, and young open: the exporter lists what
/// `kafka-transactions.sh list --duration-filter` lists, and only open states.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_list_equals_kafka_transactions_list() {
    require_kafka();
    // Long enough that the young one stays younger while the tools run.
    const MIN_AGE: Duration = Duration::from_secs(8);
    let prefix = unique("inv-list");
    let (topic, unexported) = (format!("{prefix}-t"), format!("{prefix}-u"));
    create_topic(&topic, 2).await;
    create_topic(&unexported, 1).await;

    let idle = transactional_producer(&format!("{prefix}-idle"));
    idle.begin_transaction().unwrap();
    send(&idle, &topic, 1, 1);
    idle.commit_transaction(Duration::from_secs(30)).unwrap();
    let _empty = transactional_producer(&format!("{prefix}-empty"));
    let long = transactional_producer(&format!("{prefix}-long"));
    long.begin_transaction().unwrap();
    let long_opened = now_ms();
    send(&long, &topic, 0, 2);
    let hidden = transactional_producer(&format!("{prefix}-hidden"));
    hidden.begin_transaction().unwrap();
    send(&hidden, &unexported, 0, 1);

    let exporter = exporter(&topic, MIN_AGE.as_secs()).await;
    let long_id = format!("{prefix}-long");
    let hidden_id = format!("{prefix}-hidden");
    exporter
        .wait_for(
            "the long transactions listed",
            Duration::from_secs(30),
            |s| {
                let listed = |id: &str| {
                    s.series(
                        "kafka_coordinator_transaction_age_seconds",
                        &[("transactional_id", id)],
                    )
                    .count()
                        == 1
                };
                (listed(&long_id) && listed(&hidden_id)).then_some(())
            },
        )
        .await;
    // A young one, opened now: open, but not for MIN_AGE yet.
    let young = transactional_producer(&format!("{prefix}-young"));
    young.begin_transaction().unwrap();
    let young_opened = Instant::now();
    send(&young, &topic, 1, 1);

    // The exporter, then both tools at once (each JVM takes a few seconds), then the
    // exporter again. The young one is left out of the comparison where its age may have
    // reached MIN_AGE by then (a slow machine).
    let young_id = format!("{prefix}-young");
    let shown_before = exporter_open(&exporter, &prefix).await;
    assert!(!shown_before.contains_key(&young_id), "{shown_before:?}");
    let (all, old) = std::thread::scope(|scope| {
        let all = scope.spawn(|| tool_open(&prefix, &[]));
        let long_ms = MIN_AGE.as_millis().to_string();
        let old = tool_open(&prefix, &["--duration-filter", &long_ms]);
        (all.join().unwrap(), old)
    });
    let tools_done = young_opened.elapsed();
    let mut shown = exporter_open(&exporter, &prefix).await;
    let young_read = young_opened.elapsed();
    let mut old = old;
    if tools_done < MIN_AGE {
        assert!(
            !old.contains_key(&young_id),
            "younger than the filter: {old:?}"
        );
    }
    if young_read + Duration::from_secs(1) < MIN_AGE {
        assert!(
            !shown.contains_key(&young_id),
            "younger than the minimum: {shown:?}"
        );
    }
    eprintln!("the young one was {tools_done:?} old when the tools were done");
    old.remove(&young_id);
    shown.remove(&young_id);
    assert_eq!(
        shown_before.keys().collect::<Vec<_>>(),
        shown.keys().collect::<Vec<_>>()
    );
    let expected: BTreeSet<String> = [long_id.clone(), hidden_id.clone()].into();
    assert_eq!(
        old.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "the tool, filtered: {old:?}"
    );
    assert_eq!(
        shown.keys().cloned().collect::<BTreeSet<_>>(),
        expected,
        "the exporter: {shown:?}"
    );
    assert!(
        all.contains_key(&young_id),
        "the young one is open: {all:?}"
    );
    assert_eq!(all.len(), 3, "idle and empty ids are not open: {all:?}");
    for (id, (state, producer_id, coordinator)) in &old {
        let t = &shown[id];
        assert_eq!(t["state"], state.as_str(), "{id}");
        assert_eq!(t["producer_id"].to_string(), *producer_id, "{id}");
        assert_eq!(t["coordinator"].to_string(), *coordinator, "{id}");
    }

    // Detail: age from the coordinator, time left of librdkafka's 60 s timeout, the
    // partitions, and whether it pins an exported partition.
    let entry = &shown[&long_id];
    let age = entry["age_seconds"].as_f64().unwrap();
    let truth = (now_ms() - long_opened) as f64 / 1000.0;
    assert!(
        age <= truth + 0.5 && age >= truth - 6.0,
        "age {age}s, truth {truth}s"
    );
    let left = entry["timeout_left_seconds"].as_f64().unwrap();
    assert!(
        (left - (60.0 - age)).abs() < 0.01,
        "left {left}s, age {age}s"
    );
    assert_eq!(entry["timeout_ms"], 60_000);
    assert_eq!(
        entry["partitions"],
        serde_json::json!([{"topic": topic, "partition": 0}])
    );
    assert_eq!(entry["pins_exported_partition"], true);
    assert_eq!(shown[&hidden_id]["pins_exported_partition"], false);
    assert_eq!(
        shown[&hidden_id]["partitions"],
        serde_json::json!([{"topic": unexported, "partition": 0}])
    );
    let scrape = exporter.scrape().await;
    let detail = [("transactional_id", long_id.as_str())];
    assert_eq!(
        scrape.value("kafka_coordinator_transaction_partitions", &detail),
        Some(1.0)
    );
    let (labels, _) = scrape
        .series(
            "kafka_coordinator_transaction_timeout_left_seconds",
            &detail,
        )
        .next()
        .expect("time left of the long one");
    assert_eq!(labels["state"], "Ongoing");
    assert_eq!(labels["coordinator"], old[&long_id].2);
    assert!(
        scrape
            .value(
                "kafka_cluster_unpinning_open_transactions",
                &[("kafka_cluster", "test")]
            )
            .unwrap()
            >= 1.0,
        "the hidden one pins no exported partition"
    );
    assert!(
        scrape
            .value(
                "kafka_cluster_open_transactions",
                &[("kafka_cluster", "test"), ("state", "Ongoing")]
            )
            .unwrap()
            >= 2.0
    );
    // KIP-939: a prepared count only where a broker speaks two-phase commit.
    assert_eq!(
        scrape
            .value(
                "kafka_cluster_prepared_transactions",
                &[("kafka_cluster", "test")]
            )
            .is_some(),
        brokers_speak_two_phase_commit(),
        "{}",
        scrape.text
    );
    let (_, page) = exporter.get("/").await;
    assert!(
        page.contains(&long_id) && page.contains("pins no exported partition"),
        "{page}"
    );

    // Committed: gone from the list within a cycle or two.
    long.commit_transaction(Duration::from_secs(30)).unwrap();
    hidden.abort_transaction(Duration::from_secs(30)).unwrap();
    exporter
        .wait_for("the ended ones gone", Duration::from_secs(5), |s| {
            (s.series("kafka_coordinator_transaction_age_seconds", &detail)
                .count()
                == 0)
                .then_some(())
        })
        .await;
    young.abort_transaction(Duration::from_secs(30)).unwrap();
    exporter.stop().await;
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

/// The exporter's entry for `id` once it lists it open for MIN_AGE.
async fn wait_listed(exporter: &Exporter, id: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(t) = exporter_open(exporter, id).await.remove(id) {
            return t;
        }
        assert!(Instant::now() < deadline, "{id} never listed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A second producer with the same transactional id fences the first one's open
/// transaction: one fencing, named with the new epoch, for a Java producer (transaction
/// version 2) and for librdkafka (version 1). A healthy Java producer whose transaction
/// the exporter watched, committing twenty more (twenty epoch bumps), counts none.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_instance_fences_and_healthy_commits_do_not() {
    require_kafka();
    let prefix = unique("inv-fence");
    let topic = format!("{prefix}-t");
    create_topic(&topic, 1).await;
    let (fenced_id, healthy_id, v1_id) = (
        format!("{prefix}-java"),
        format!("{prefix}-healthy"),
        format!("{prefix}-librdkafka"),
    );
    // Three JVMs start at once (each compiles the source first).
    let mut first = JavaProducer::start(&fenced_id);
    let mut second = JavaProducer::start(&fenced_id);
    let mut healthy = JavaProducer::start(&healthy_id);
    for p in [&first, &second, &healthy] {
        p.ready();
    }
    for (p, what) in [(&mut first, "first"), (&mut healthy, "healthy")] {
        for command in ["init", "begin", &format!("send {topic} 0 1")] {
            assert_eq!(p.run(command), "ok", "{what}: {command}");
        }
    }
    let rd_first = transactional_producer(&v1_id);
    rd_first.begin_transaction().unwrap();
    send(&rd_first, &topic, 0, 1);

    // A slower rhythm than the other tests': the fences below are made right after a cycle
    // ends, so that no cycle lists the ids during the ~100 ms their aborts take (a fence
    // caught in its abort cannot be told from a producer's own abort, and is not counted).
    let exporter = Exporter::start(
        &anchored(&topic),
        "^$",
        &[
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTION_LIST_MIN_AGE",
                "2s",
            ),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTION_LIST_DETAIL",
                "1000",
            ),
            ("KAFKA_LSO_EXPORTER_INTERVAL", "3s"),
        ],
    )
    .await;
    let watched = wait_listed(&exporter, &fenced_id).await;
    let fenced_epoch = watched["producer_epoch"].as_i64().unwrap();
    wait_listed(&exporter, &v1_id).await;
    let before = wait_listed(&exporter, &healthy_id).await;

    // Healthy: commit, twenty more transactions, and one more left open until listed.
    assert_eq!(healthy.run("commit"), "ok");
    let committed = Instant::now();
    assert_eq!(healthy.run(&format!("cycle 20 {topic} 0")), "ok");
    assert_eq!(healthy.run("begin"), "ok");
    assert_eq!(healthy.run(&format!("send {topic} 0 1")), "ok");
    // The new transaction, once a whole cycle ran after it began (the listing of a cycle
    // before the commit would name the old one).
    let ended = last_cycle(&exporter.scrape().await).unwrap_or(0.0);
    let next = exporter
        .wait_for("a cycle ends", Duration::from_secs(15), |s| {
            last_cycle(s).filter(|at| *at > ended)
        })
        .await;
    exporter
        .wait_for("the next cycle ends", Duration::from_secs(15), |s| {
            last_cycle(s).filter(|at| *at > next)
        })
        .await;
    let after = wait_listed(&exporter, &healthy_id).await;
    assert!(
        after["age_seconds"].as_f64().unwrap() < committed.elapsed().as_secs_f64() + 0.5,
        "the transaction begun after the commit: {after}"
    );
    let (was, is) = (
        before["producer_epoch"].as_i64().unwrap(),
        after["producer_epoch"].as_i64().unwrap(),
    );
    // Transaction version 2 (Kafka 4.x clusters formatted by 4.x, Java client 4.x) bumps
    // the epoch at every commit; version 1 never does.
    assert!(
        is >= was + 21 || is == was,
        "twenty-one commits: epoch {was} -> {is}"
    );
    if kafka_version() >= (4, 4) {
        assert!(
            is >= was + 21,
            "transaction version 2 on Kafka 4.4: {was} -> {is}"
        );
    }
    eprintln!("healthy producer: epoch {was} -> {is} over 21 commits");

    // The fences: a new instance initialises each id while the old one's is open, right
    // after a cycle ended.
    let ended = last_cycle(&exporter.scrape().await).unwrap_or(0.0);
    exporter
        .wait_for("a cycle ends", Duration::from_secs(15), |s| {
            last_cycle(s).filter(|at| *at > ended)
        })
        .await;
    assert_eq!(second.run("init"), "ok");
    let rd_second = transactional_producer(&v1_id);
    let fenced = exporter
        .wait_for("both fencings counted", Duration::from_secs(20), |s| {
            (fencings(s, &fenced_id) >= 1.0 && fencings(s, &v1_id) >= 1.0).then(|| s.text.clone())
        })
        .await;
    assert_eq!(first.run("commit"), "error ProducerFencedException");
    assert!(rd_first
        .commit_transaction(Duration::from_secs(10))
        .is_err());
    let scrape = exporter.scrape().await;
    assert_eq!(fencings(&scrape, &fenced_id), 1.0, "{fenced}");
    assert_eq!(fencings(&scrape, &v1_id), 1.0, "{fenced}");
    assert_eq!(fencings(&scrape, &healthy_id), 0.0, "{}", scrape.text);
    assert_eq!(
        scrape.value(
            "kafka_transaction_coordinator_moves_total",
            &[("transactional_id", &fenced_id)]
        ),
        Some(0.0),
        "one broker: no move"
    );

    // Named with the new epoch, as the coordinator reports it.
    let described = transactions_tool(
        &["describe", "--transactional-id", &fenced_id],
        "TransactionalId",
    );
    let (status, body) = exporter.get("/api/v1/stuck").await;
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let fencing = json["transactions"][0]["fencings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["transactional_id"] == fenced_id.as_str())
        .unwrap_or_else(|| panic!("{fenced_id} not among the fencings: {json}"))
        .clone();
    assert_eq!(fencing["fenced_producer_epoch"], fenced_epoch);
    assert_eq!(
        fencing["producer_epoch"].to_string(),
        described[0]["ProducerEpoch"],
        "{described:?}"
    );
    assert!(fencing["producer_epoch"].as_i64().unwrap() > fenced_epoch);
    let (_, page) = exporter.get("/").await;
    assert!(
        page.contains("latest open transaction ended by a new producer initialisation"),
        "{page}"
    );

    drop(rd_second);
    assert_eq!(healthy.run("abort"), "ok");
    exporter.stop().await;
}

/// When the exporter's last cycle that reached the cluster ended (Unix seconds).
fn last_cycle(scrape: &Scrape) -> Option<f64> {
    scrape.value(
        "kafka_lso_exporter_last_success_timestamp_seconds",
        &[("kafka_cluster", "test")],
    )
}

/// The epoch and state `kafka-transactions.sh describe` shows for `id`.
fn described_epoch_state(id: &str) -> (i64, String) {
    let described = transactions_tool(&["describe", "--transactional-id", id], "TransactionalId");
    (
        described[0]["ProducerEpoch"].parse().unwrap(),
        described[0]["TransactionState"].clone(),
    )
}

/// An application that commits and restarts (a rolling deploy of an idle exactly-once
/// application). Transaction version 1 (librdkafka): the commit keeps the epoch and the
/// new instance's InitProducerId bumps it once, leaving `Empty` one epoch up, which a
/// fence never does: not counted. Transaction version 2 (Java): the commit bumps the epoch
/// and InitProducerId once more, leaving `Empty` two epochs up, exactly what a fence
/// leaves: counted when no cycle saw the commit in between, as the docs say (the counter
/// is "ended by a new producer initialisation: fenced or restarted").
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn commit_then_restart() {
    require_kafka();
    let prefix = unique("inv-restart");
    let topic = format!("{prefix}-t");
    create_topic(&topic, 1).await;
    let (v1_id, v2_id) = (format!("{prefix}-librdkafka"), format!("{prefix}-java"));
    let mut java_first = JavaProducer::start(&v2_id);
    let mut java_second = JavaProducer::start(&v2_id);
    java_first.ready();
    java_second.ready();
    for command in ["init", "begin", &format!("send {topic} 0 1")] {
        assert_eq!(java_first.run(command), "ok", "{command}");
    }
    let rd_first = transactional_producer(&v1_id);
    rd_first.begin_transaction().unwrap();
    send(&rd_first, &topic, 0, 1);

    let exporter = exporter(&topic, 2).await;
    let v1_epoch = wait_listed(&exporter, &v1_id).await["producer_epoch"]
        .as_i64()
        .unwrap();
    let v2_epoch = wait_listed(&exporter, &v2_id).await["producer_epoch"]
        .as_i64()
        .unwrap();

    // Commit, then at once a new instance.
    rd_first
        .commit_transaction(Duration::from_secs(30))
        .unwrap();
    drop(rd_first);
    let rd_second = transactional_producer(&v1_id);
    assert_eq!(java_first.run("commit"), "ok");
    drop(java_first);
    assert_eq!(java_second.run("init"), "ok");

    assert_eq!(
        described_epoch_state(&v1_id),
        (v1_epoch + 1, "Empty".to_string()),
        "transaction version 1: commit keeps the epoch, the restart bumps it once"
    );
    let (v2_now, v2_state) = described_epoch_state(&v2_id);
    assert_eq!(v2_state, "Empty");
    if kafka_version() >= (4, 4) {
        assert_eq!(
            v2_now,
            v2_epoch + 2,
            "transaction version 2: commit and restart leave what a fence leaves"
        );
    }
    // Several cycles (each follows up ids no longer listed).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let scrape = exporter.scrape().await;
    assert_eq!(fencings(&scrape, &v1_id), 0.0, "{}", scrape.text);
    let v2_counted = fencings(&scrape, &v2_id);
    assert!(v2_counted <= 1.0, "{}", scrape.text);
    eprintln!("transaction version 2 commit then restart: counted {v2_counted}");
    drop(rd_second);
    exporter.stop().await;
}
