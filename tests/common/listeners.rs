//! The same broker through other listeners: every series the exporter shows through them
//! must equal what it shows through PLAINTEXT.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::producer::Producer;

use super::*;

/// A cluster name, its bootstrap through one listener, and the `client` properties there.
pub type Listener<'a> = (&'a str, String, Vec<(String, String)>);

/// PLAINTEXT and each of `listeners` (cluster name, bootstrap, `client` properties) on
/// one broker, in one exporter: the same series with the same values, at rest and with a
/// transaction held open (forensics naming it, exact lag against the LSO, time lag,
/// withheld records and their age).
pub async fn same_as_plaintext(listeners: &[Listener<'_>]) {
    let topic = unique("listeners-eq");
    create_topic(&topic, 2).await;
    let producer = plain_producer();
    send(&producer, &topic, 0, 6);
    send(&producer, &topic, 1, 4);
    let committed = unique("listeners-eq-rc");
    let uncommitted = unique("listeners-eq-ru");
    consume_all_and_commit(&committed, &topic, 2, "read_committed");
    // Two records behind on partition 1.
    send(&producer, &topic, 1, 2);
    consume_all_and_commit(&uncommitted, &topic, 1, "read_uncommitted");

    let groups = format!("^({committed}|{uncommitted})$");
    let mut env = cluster_env(0, "plain", &bootstrap(), &topic, &[]);
    for (i, (name, bootstrap, client)) in listeners.iter().enumerate() {
        env.extend(cluster_env(i + 1, name, bootstrap, &topic, client));
    }
    for i in 0..=listeners.len() {
        env.push((
            format!("KAFKA_LSO_EXPORTER_CLUSTERS__{i}__GROUPS__INCLUDE"),
            format!("[{groups:?}]"),
        ));
    }
    env.retain(|(k, v)| !(k.ends_with("__GROUPS__INCLUDE") && v == "[\"^$\"]"));
    let exporter = Exporter::start_with(load(env)).await;
    let others: Vec<&str> = listeners.iter().map(|(name, _, _)| *name).collect();
    let mut all = others.clone();
    all.push("plain");

    let lag = |s: &Scrape, cluster: &str, group: &str, partition: &str| {
        s.value(
            "kafka_consumergroup_lso_lag",
            &[
                ("kafka_cluster", cluster),
                ("group", group),
                ("topic", topic.as_str()),
                ("partition", partition),
            ],
        )
    };
    let at_rest = wait_equal(&exporter, "at rest", &others, |s| {
        all.iter().all(|c| {
            s.value("kafka_lso_exporter_up", &[("kafka_cluster", c)]) == Some(1.0)
                && lag(s, c, &committed, "1") == Some(2.0)
                && lag(s, c, &uncommitted, "0") == Some(0.0)
        })
    })
    .await;
    assert!(at_rest.len() > 10, "too few series to compare: {at_rest:?}");

    // A transaction held open on partition 0: 3 records withheld from read_committed.
    let transactional_id = unique("listeners-eq-t");
    let held = transactional_producer(&transactional_id);
    held.begin_transaction().unwrap();
    send(&held, &topic, 0, 3);
    let open = wait_equal(&exporter, "with a transaction open", &others, |s| {
        all.iter().all(|c| {
            s.series(
                "kafka_transaction_open_info",
                &[("kafka_cluster", c), ("topic", topic.as_str())],
            )
            .any(|(labels, _)| labels["transactional_id"] == transactional_id)
        })
    })
    .await;
    let withheld = open
        .iter()
        .find(|(k, _)| {
            k.starts_with("kafka_partition_hw_minus_lso{") && k.contains("partition=\"0\"")
        })
        .map(|(_, v)| *v);
    assert_eq!(withheld, Some(3.0), "{open:#?}");
    for family in [
        "kafka_consumergroup_lso_lag_seconds{",
        "kafka_partition_withheld_age_seconds{",
        "kafka_transaction_open_age_seconds{",
    ] {
        assert!(
            open.iter().any(|(k, v)| k.starts_with(family) && *v > 0.0),
            "no {family} to compare: {open:#?}"
        );
    }
    held.abort_transaction(Duration::from_secs(30)).unwrap();
    exporter.stop().await;
}

/// Series of `cluster`, keyed by name and labels without `kafka_cluster`; the exporter's
/// own series (cycle times, request counts) are left out.
fn of_cluster(scrape: &Scrape, cluster: &str) -> BTreeMap<String, f64> {
    scrape
        .samples
        .iter()
        .filter(|(name, labels, _)| {
            !name.starts_with("kafka_lso_exporter_")
                && labels.get("kafka_cluster").map(String::as_str) == Some(cluster)
        })
        .map(|(name, labels, value)| {
            let labels: Vec<String> = labels
                .iter()
                .filter(|(k, _)| *k != "kafka_cluster")
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect();
            (format!("{name}{{{}}}", labels.join(",")), *value)
        })
        .collect()
}

/// Time-valued series (ages, time lags) move between the clusters' cycles; everything
/// else must be equal.
fn time_valued(key: &str) -> bool {
    let name = key.split('{').next().unwrap();
    name.ends_with("_seconds") || name.contains("timestamp")
}

/// The differences between `other`'s series and `plain`'s, in words; empty if equal.
fn differences(plain: &BTreeMap<String, f64>, other: &BTreeMap<String, f64>) -> Vec<String> {
    let mut out = Vec::new();
    for (key, value) in plain {
        match other.get(key) {
            None => out.push(format!("missing: {key} {value}")),
            Some(v) if time_valued(key) => {
                if (v - value).abs() > 3.0 {
                    out.push(format!("{key}: {v} where PLAINTEXT shows {value}"));
                }
            }
            Some(v) if v != value => out.push(format!("{key}: {v} where PLAINTEXT shows {value}")),
            Some(_) => {}
        }
    }
    for key in other.keys().filter(|k| !plain.contains_key(*k)) {
        out.push(format!("extra: {key}"));
    }
    out
}

/// Waits until the three clusters agree (two scrapes in a row, so a cycle that just
/// ended in one cluster does not decide), then returns the PLAINTEXT cluster's series.
async fn wait_equal(
    exporter: &Exporter,
    what: &str,
    others: &[&str],
    ready: impl Fn(&Scrape) -> bool,
) -> BTreeMap<String, f64> {
    let deadline = Instant::now() + Duration::from_secs(45);
    let mut agreed = 0;
    loop {
        let scrape = exporter.scrape().await;
        let plain = of_cluster(&scrape, "plain");
        let mut problems = Vec::new();
        for cluster in others {
            for d in differences(&plain, &of_cluster(&scrape, cluster)) {
                problems.push(format!("{cluster}: {d}"));
            }
        }
        if ready(&scrape) && problems.is_empty() {
            agreed += 1;
            if agreed == 2 {
                return plain;
            }
        } else {
            agreed = 0;
        }
        if Instant::now() > deadline {
            panic!(
                "{what}: {others:?} never showed what PLAINTEXT shows:\n{}\n\nlast scrape:\n{}",
                problems.join("\n"),
                scrape.text
            );
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
}
