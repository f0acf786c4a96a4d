//! Replicas that share the work (`[ha]`), as real processes against a real broker: three
//! replicas of one configuration with two clusters serve every series one replica alone
//! serves, each from exactly one replica; a replica killed with SIGKILL or frozen with
//! SIGSTOP has its share served again by another within seconds, the stuck clock goes
//! on across the hand-over, and the frozen one serves nothing twice when it wakes.
//! Replicas configured differently refuse to share the cluster they disagree on.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use common::binary::Binary;
use common::*;
use rdkafka::producer::Producer;

/// Session timeout of the drills: the brokers' minimum.
const SESSION: &str = "6s";
/// A share is served again within the session timeout plus two cycles (1 s each), with
/// 4 s for a machine that runs other suites at once.
const TAKEOVER: Duration = Duration::from_secs(6 + 2 + 4);

fn replica(env: &[(String, String)]) -> Binary {
    Binary::start_logging(env, "info,kafka_lso_exporter::kafka::coordination=debug")
}

/// Two clusters (the same broker under two names, each with a topic of its own) and,
/// with `group`, the coordination group.
fn settings(group: Option<&str>, topic_a: &str, topic_b: &str) -> Vec<(String, String)> {
    let mut env = cluster_env(0, "a", &bootstrap(), topic_a, &[]);
    env.extend(cluster_env(1, "b", &bootstrap(), topic_b, &[]));
    if let Some(group) = group {
        // Cluster b lists the coordination group, were it a consumer group.
        for (key, value) in env.iter_mut() {
            if key == "KAFKA_LSO_EXPORTER_CLUSTERS__1__GROUPS__INCLUDE" {
                *value = format!("[{:?}]", format!("^{group}$"));
            }
        }
        env.extend([
            (
                "KAFKA_LSO_EXPORTER_HA__GROUP".to_string(),
                group.to_string(),
            ),
            (
                "KAFKA_LSO_EXPORTER_HA__SESSION_TIMEOUT".to_string(),
                SESSION.to_string(),
            ),
            (
                "KAFKA_LSO_EXPORTER_HA__HEARTBEAT_INTERVAL".to_string(),
                "1s".to_string(),
            ),
        ]);
    }
    env
}

/// `env` with cluster a also sampling `topic` and the group `group`.
fn also_in_a(mut env: Vec<(String, String)>, topic: &str, group: &str) -> Vec<(String, String)> {
    for (key, value) in env.iter_mut() {
        if key == "KAFKA_LSO_EXPORTER_CLUSTERS__0__TOPICS__INCLUDE" {
            let first: Vec<String> = serde_json::from_str(value).unwrap();
            *value = format!("[{:?}, {:?}]", first[0], format!("^{topic}$"));
        }
        if key == "KAFKA_LSO_EXPORTER_CLUSTERS__0__GROUPS__INCLUDE" {
            *value = format!("[{:?}]", format!("^{group}$"));
        }
    }
    env
}

/// One scrape, or `None` when the replica does not answer within a second (frozen,
/// dead).
async fn scrape(replica: &Binary) -> Option<Scrape> {
    replica.scrape_within(Duration::from_secs(1)).await
}

/// The series of the clusters (every family with a `kafka_cluster` label), as
/// name{labels} strings.
fn cluster_series(scrape: &Scrape) -> BTreeSet<String> {
    scrape
        .samples
        .iter()
        .filter(|(_, labels, _)| labels.contains_key("kafka_cluster"))
        .map(|(name, labels, _)| format!("{name}{labels:?}"))
        .collect()
}

/// Which replicas serve `up` of each cluster, in one round of scrapes; fails when any
/// series of a cluster (not only `up`) comes from two replicas in that round.
async fn owners_of(replicas: &[(&str, &Binary)]) -> BTreeMap<String, Vec<String>> {
    let mut owners: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut served_by: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (name, replica) in replicas {
        if let Some(s) = scrape(replica).await {
            for (labels, value) in s.series("kafka_lso_exporter_up", &[]) {
                if value == 1.0 {
                    owners
                        .entry(labels["kafka_cluster"].clone())
                        .or_default()
                        .push(name.to_string());
                }
            }
            for series in cluster_series(&s) {
                served_by.entry(series).or_default().push(name);
            }
        }
    }
    let twice: Vec<_> = served_by.iter().filter(|(_, by)| by.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "series served by two replicas at once: {:?}",
        &twice[..twice.len().min(5)]
    );
    owners
}

fn signal(replica: &Binary, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &replica.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name}");
}

/// Waits until every cluster is served by exactly one of `replicas`, checking on the
/// way that none is ever served by two; returns how long that took.
async fn until_covered(
    what: &str,
    replicas: &[(&str, &Binary)],
    within: Duration,
) -> (Duration, BTreeMap<String, Vec<String>>) {
    let started = Instant::now();
    loop {
        let owners = owners_of(replicas).await;
        for (cluster, by) in &owners {
            assert!(
                by.len() <= 1,
                "{what}: cluster {cluster} served by {by:?} at once"
            );
        }
        if ["a", "b"].iter().all(|c| owners.contains_key(*c)) {
            return (started.elapsed(), owners);
        }
        assert!(
            started.elapsed() < within,
            "{what}: not every cluster served after {within:?}: {owners:?}\n{}",
            replicas
                .iter()
                .map(|(n, r)| format!("--- {n}:\n{}", r.log()))
                .collect::<String>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_replicas_share_the_work_and_take_over_after_sigkill_and_sigstop() {
    require_kafka();
    let (topic_a, topic_b) = (unique("ha-a"), unique("ha-b"));
    create_topic(&topic_a, 3).await;
    create_topic(&topic_b, 2).await;
    send(&plain_producer(), &topic_b, 0, 5);
    // An open transaction pins topic a's partition 0: the stuck clock must go on across a
    // hand-over.
    let transactional_id = unique("ha-t");
    let producer = transactional_producer(&transactional_id);
    producer.begin_transaction().unwrap();
    send(&producer, &topic_a, 0, 3);
    send(&plain_producer(), &topic_a, 0, 2);
    // A group that committed once and then stopped while records kept coming: its
    // commit-stall clock must go on across a hand-over too.
    let (stall_topic, stalled) = (unique("ha-s"), unique("ha-stalled"));
    create_topic(&stall_topic, 1).await;
    send(&plain_producer(), &stall_topic, 0, 3);
    consume_all_and_commit(&stalled, &stall_topic, 1, "read_committed");
    send(&plain_producer(), &stall_topic, 0, 4);
    let stall_of = |s: &Scrape| {
        s.value(
            "kafka_consumergroup_topic_max_commit_stall_seconds",
            &[("group", &stalled), ("topic", &stall_topic)],
        )
    };

    // What one replica alone serves.
    let alone = replica(&also_in_a(
        settings(None, &topic_a, &topic_b),
        &stall_topic,
        &stalled,
    ));
    let alone_series = alone
        .wait_for("one replica's cycles", Duration::from_secs(30), |s| {
            (s.value("kafka_lso_exporter_up", &[("kafka_cluster", "a")]) == Some(1.0)
                && s.value("kafka_lso_exporter_up", &[("kafka_cluster", "b")]) == Some(1.0)
                && s.value(
                    "kafka_partition_hw_minus_lso",
                    &[("topic", &topic_a), ("partition", "0")],
                ) == Some(5.0)
                && stall_of(s).is_some())
            .then(|| cluster_series(s))
        })
        .await;
    alone.stop();

    let group = unique("ha-group");
    let env = also_in_a(
        settings(Some(&group), &topic_a, &topic_b),
        &stall_topic,
        &stalled,
    );
    let (r1, r2, r3) = (replica(&env), replica(&env), replica(&env));
    let all = [("r1", &r1), ("r2", &r2), ("r3", &r3)];
    let started = Instant::now();
    let (took, mut owners) = until_covered("start", &all, Duration::from_secs(60)).await;
    eprintln!("three replicas: every cluster served after {took:?}: {owners:?}");
    // Two clusters, three replicas: once the three have joined, two replicas serve one
    // cluster each (the first to join served both until then).
    while owners["a"] == owners["b"] {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "one replica serves both: {owners:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        owners = until_covered("rebalance", &all, Duration::from_secs(30))
            .await
            .1;
    }
    eprintln!("balanced after {:?}: {owners:?}", started.elapsed());

    // Steady state: the union is what one replica serves, each series from one replica.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut union: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut serving_clusters = 0.0;
    for (name, replica) in &all {
        let s = scrape(replica).await.expect("scrape");
        // What KafkaLsoExporterClustersUnserved compares: the clusters configured, and
        // the ones each replica serves.
        let ha = [("group", group.as_str())];
        assert_eq!(
            s.value("kafka_lso_exporter_ha_clusters", &ha),
            Some(2.0),
            "{name}"
        );
        serving_clusters += s
            .value("kafka_lso_exporter_ha_serving_clusters", &ha)
            .expect("ha_serving_clusters");
        for series in cluster_series(&s) {
            union.entry(series).or_default().push(name);
        }
        // The coordination group is no consumer group.
        let exported: Vec<_> = s
            .samples
            .iter()
            .filter(|(n, l, _)| {
                !n.starts_with("kafka_lso_exporter_ha_")
                    && l.get("group").is_some_and(|g| *g == group)
            })
            .collect();
        assert!(
            exported.is_empty(),
            "the coordination group is exported: {exported:?}"
        );
        let ready = replica.get("/readyz").await.expect("readyz");
        assert_eq!(ready.0, 200, "{name} unready: {}", ready.1);
        assert!(
            ready.1.contains(&format!("ha group {group}")),
            "{}",
            ready.1
        );
    }
    assert_eq!(
        serving_clusters, 2.0,
        "the replicas serve every cluster once"
    );
    let twice: Vec<_> = union.iter().filter(|(_, by)| by.len() > 1).collect();
    assert!(twice.is_empty(), "served by two replicas: {twice:?}");
    let served: BTreeSet<String> = union.keys().cloned().collect();
    let missing: Vec<_> = alone_series
        .iter()
        // Other tests' transactions come and go in the cluster-wide listing.
        .filter(|s| !s.contains("transactional_id") || s.contains(&transactional_id))
        .filter(|s| !s.contains("cycle_duration") && !served.contains(*s))
        .collect();
    assert!(
        missing.is_empty(),
        "served by one replica alone, by none of three: {missing:?}"
    );

    // SIGKILL the owner of cluster a.
    let by_name = |n: &str| all.iter().find(|(name, _)| *name == n).unwrap().1;
    let owner_a = owners["a"][0].clone();
    let stuck_before = scrape(by_name(&owner_a))
        .await
        .and_then(|s| {
            s.value(
                "kafka_partition_lso_stuck_seconds",
                &[("topic", &topic_a), ("partition", "0")],
            )
        })
        .expect("stuck seconds of the pinned partition");
    let stall_before = scrape(by_name(&owner_a))
        .await
        .and_then(|s| stall_of(&s))
        .expect("commit stall of the stalled group");
    let killed_at = Instant::now();
    signal(by_name(&owner_a), "KILL");
    let rest: Vec<(&str, &Binary)> = all
        .iter()
        .filter(|(n, _)| *n != owner_a)
        .map(|(n, b)| (*n, *b))
        .collect();
    let (gap, owners) = until_covered("after SIGKILL", &rest, Duration::from_secs(30)).await;
    eprintln!("SIGKILL of {owner_a}: every cluster served again after {gap:?}: {owners:?}");
    assert!(
        gap <= TAKEOVER,
        "cluster a unserved for {gap:?} after SIGKILL"
    );
    // The stuck clock of the new owner goes on from the transaction's age at the broker.
    let new_owner = by_name(&owners["a"][0]);
    let stuck_after = new_owner
        .wait_for(
            "the pinned partition's stuck clock",
            Duration::from_secs(10),
            |s| {
                s.value(
                    "kafka_partition_lso_stuck_seconds",
                    &[("topic", &topic_a), ("partition", "0")],
                )
            },
        )
        .await;
    let elapsed = killed_at.elapsed().as_secs_f64();
    assert!(
        stuck_after >= stuck_before + elapsed - 3.0,
        "the stuck clock restarted on the hand-over: {stuck_before} s before, {stuck_after} s \
         after {elapsed:.1} s"
    );
    // So does the commit-stall clock: the new owner dates it by the first record the group
    // has to read, which is older than the old owner's first sight of the group.
    let stall_after = new_owner
        .wait_for(
            "the stalled group's commit stall",
            Duration::from_secs(10),
            |s| stall_of(s),
        )
        .await;
    let elapsed = killed_at.elapsed().as_secs_f64();
    assert!(
        stall_before > 0.0 && stall_after >= stall_before + elapsed - 3.0,
        "the commit-stall clock restarted on the hand-over: {stall_before} s before, \
         {stall_after} s after {elapsed:.1} s"
    );

    // SIGSTOP the owner of cluster b (heartbeats stop); the other takes it over, and the
    // frozen one serves nothing twice when it wakes.
    let owner_b = owners["b"][0].clone();
    let other = rest.iter().find(|(n, _)| *n != owner_b).unwrap().0;
    signal(by_name(&owner_b), "STOP");
    let awake = [(other, by_name(other))];
    let (gap, _) = until_covered("after SIGSTOP", &awake, Duration::from_secs(30)).await;
    eprintln!("SIGSTOP of {owner_b}: every cluster served again after {gap:?}");
    assert!(
        gap <= TAKEOVER,
        "a cluster unserved for {gap:?} after SIGSTOP"
    );
    signal(by_name(&owner_b), "CONT");
    let both = [
        (other, by_name(other)),
        (owner_b.as_str(), by_name(&owner_b)),
    ];
    let woke = Instant::now();
    while woke.elapsed() < Duration::from_secs(15) {
        let owners = owners_of(&both).await;
        for (cluster, by) in &owners {
            assert!(
                by.len() <= 1,
                "after SIGCONT, cluster {cluster} served by {by:?} at once"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    until_covered("after SIGCONT", &both, Duration::from_secs(20)).await;
    let log = by_name(&owner_b).log();
    assert!(
        log.contains("joining again") || log.contains("no longer sampled by this replica"),
        "the woken replica did not notice the group moved on:\n{log}"
    );

    // SIGTERM leaves the group at once: the other takes over without waiting for the
    // session timeout.
    let (status, log) = match other {
        "r1" => r1.terminate(Duration::from_secs(10)),
        "r2" => r2.terminate(Duration::from_secs(10)),
        _ => r3.terminate(Duration::from_secs(10)),
    };
    assert!(status.success(), "{log}");
    assert!(log.contains("left the coordination group"), "{log}");
    producer.abort_transaction(Duration::from_secs(10)).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_configured_differently_do_not_share_the_cluster_they_disagree_on() {
    require_kafka();
    let (topic_a, topic_b, other) = (unique("ha-da"), unique("ha-db"), unique("ha-dc"));
    for topic in [&topic_a, &topic_b, &other] {
        create_topic(topic, 1).await;
    }
    let group = unique("ha-differ");
    let first = replica(&settings(Some(&group), &topic_a, &topic_b));
    // The second watches another topic in cluster a.
    let second = replica(&settings(Some(&group), &other, &topic_b));
    let both = [("first", &first), ("second", &second)];
    let (_, owners) = until_covered("two configurations", &both, Duration::from_secs(60)).await;
    // Cluster a is served by whichever replica leads with its configuration; the other
    // says why it does not serve it.
    let refused = Instant::now();
    loop {
        let mut said = false;
        for (name, replica) in &both {
            let ready = replica.get("/readyz").await.expect("readyz").1;
            if ready.contains(
                "a: not served by this replica: its configuration of cluster a (topics, groups, client settings, interval or timeout) differs from that of member",
            ) {
                assert!(
                    !owners["a"].contains(&name.to_string()),
                    "{owners:?}\n{ready}"
                );
                said = true;
            }
        }
        if said {
            break;
        }
        assert!(
            refused.elapsed() < Duration::from_secs(20),
            "neither replica says it does not share cluster a: {owners:?}\n{}\n{}",
            first.log(),
            second.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Both still serve everything exactly once.
    let owners = owners_of(&both).await;
    assert_eq!(owners.get("a").map(Vec::len), Some(1), "{owners:?}");
    assert_eq!(owners.get("b").map(Vec::len), Some(1), "{owners:?}");
    first.stop();
    second.stop();
}
