//! The consumer's side, against a real broker and real consumers: who owns each partition
//! (a classic and a KIP-848 group of three librdkafka consumers with client ids of their
//! own), a member leaving counted as one rebalance, a member killed (three Java consumers
//! per group, one SIGKILLed: its partitions change owner within the session timeout and
//! two cycles, one rebalance counted), offsets a live group no longer reads turning
//! `abandoned` instead of paging as `stalled`, a KIP-848 member that does not reconcile
//! named with what it holds back, and the catch-up estimate against a throttled consumer.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::java::{configure_group, JavaMember};
use common::members::RdkafkaMember;
use common::*;

/// Per member's client id: the partitions it owns, from `/metrics`.
fn owners(s: &Scrape, group: &str) -> BTreeMap<String, f64> {
    let labels = [("kafka_cluster", "test"), ("group", group)];
    let ids: BTreeMap<String, String> = s
        .series("kafka_consumergroup_member_info", &labels)
        .map(|(l, _)| (l["member_id"].clone(), l["client_id"].clone()))
        .collect();
    s.series("kafka_consumergroup_member_assigned_partitions", &labels)
        .filter_map(|(l, v)| Some((ids.get(&l["member_id"])?.clone(), v)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn who_owns_each_partition_and_a_member_leaving_is_one_rebalance() {
    require_kafka();
    let topic = unique("owners");
    create_topic(&topic, 6).await;
    let producer = plain_producer();
    for p in 0..6 {
        send(&producer, &topic, p, 5);
    }
    let classic = unique("owners-classic");
    let modern = unique("owners-kip848");
    // KIP-848 consumers of librdkafka need Kafka 4.0 (ConsumerGroupHeartbeat v1).
    let mut groups = vec![(classic.clone(), "classic")];
    if kafka_version() >= (4, 0) {
        groups.push((modern.clone(), "consumer"));
    }
    let mut members: BTreeMap<String, Vec<RdkafkaMember>> = BTreeMap::new();
    for (group, protocol) in &groups {
        for i in 1..=3 {
            let client_id = format!("{group}-c{i}");
            members
                .entry(group.clone())
                .or_default()
                .push(RdkafkaMember::join_with(
                    &topic,
                    group,
                    protocol,
                    &[("client.id", &client_id)],
                ));
        }
    }
    let filter = groups
        .iter()
        .map(|(g, _)| anchored(g))
        .collect::<Vec<_>>()
        .join("|");
    let exporter = Exporter::start(
        &anchored(&topic),
        &filter,
        &[(
            "KAFKA_LSO_EXPORTER_CLUSTERS__0__GROUPS__OWNER_LABELS",
            "true",
        )],
    )
    .await;

    // Three members each, every partition owned, each member some of them.
    for (group, _) in &groups {
        exporter
            .wait_for(
                &format!("{group}: three members owning the six partitions"),
                Duration::from_secs(60),
                |s| {
                    let owned = owners(s, group);
                    let expected: Vec<String> = (1..=3).map(|i| format!("{group}-c{i}")).collect();
                    let names: Vec<String> = owned.keys().cloned().collect();
                    (names == expected
                        && owned.values().sum::<f64>() == 6.0
                        && owned.values().all(|n| *n >= 1.0))
                    .then_some(())
                },
            )
            .await;
        // With owner_labels, each of the six partitions names the member that owns it,
        // as many per member as it owns.
        let s = exporter
            .wait_for(
                &format!("{group}: an owner series per partition"),
                Duration::from_secs(30),
                |s| {
                    let n = s
                        .series(
                            "kafka_consumergroup_partition_owner_info",
                            &[("kafka_cluster", "test"), ("group", group)],
                        )
                        .count();
                    (n == 6).then(|| s.clone())
                },
            )
            .await;
        let mut per_client: BTreeMap<String, f64> = BTreeMap::new();
        for (labels, _) in s.series(
            "kafka_consumergroup_partition_owner_info",
            &[("kafka_cluster", "test"), ("group", group)],
        ) {
            *per_client.entry(labels["client_id"].clone()).or_default() += 1.0;
        }
        assert_eq!(
            per_client,
            owners(&s, group),
            "{group}: owners per partition"
        );
        for (labels, _) in s.series(
            "kafka_consumergroup_member_info",
            &[("kafka_cluster", "test"), ("group", group)],
        ) {
            assert!(
                labels["client_host"].contains("127.0.0.1"),
                "{group}: the host the member connected from: {labels:?}"
            );
        }
    }

    // Settled: the count holds still for a few cycles before the member leaves.
    let counts = |s: &Scrape, group: &str| -> Option<(f64, f64)> {
        let labels = [("kafka_cluster", "test"), ("group", group)];
        Some((
            s.value("kafka_consumergroup_rebalances_total", &labels)?,
            s.value("kafka_consumergroup_members_left_total", &labels)?,
        ))
    };
    let mut before = BTreeMap::new();
    for (group, _) in &groups {
        let first = counts(&exporter.scrape().await, group).expect("rebalance counters");
        tokio::time::sleep(Duration::from_secs(3)).await;
        let again = counts(&exporter.scrape().await, group).expect("rebalance counters");
        assert_eq!(first, again, "{group}: no rebalance while nothing changes");
        before.insert(group.clone(), again);
    }

    // One member of each group leaves: its partitions go to the other two, and the
    // group counts one rebalance and one member gone.
    for (group, _) in &groups {
        let gone = members.get_mut(group).unwrap().remove(1);
        drop(gone);
    }
    for (group, _) in &groups {
        exporter
            .wait_for(
                &format!("{group}: the two members left owning the six partitions"),
                Duration::from_secs(60),
                |s| {
                    let owned = owners(s, group);
                    let expected = [format!("{group}-c1"), format!("{group}-c3")];
                    let names: Vec<String> = owned.keys().cloned().collect();
                    (names == expected && owned.values().sum::<f64>() == 6.0).then_some(())
                },
            )
            .await;
    }
    // A few cycles more, so that a rebalance counted twice would show.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let s = exporter.scrape().await;
    for (group, _) in &groups {
        let (rebalances, left) = counts(&s, group).expect("rebalance counters");
        let (rebalances_before, left_before) = before[group];
        assert_eq!(
            (rebalances - rebalances_before, left - left_before),
            (1.0, 1.0),
            "{group}: one rebalance, one member gone"
        );
        let at = s
            .value(
                "kafka_consumergroup_last_rebalance_timestamp_seconds",
                &[("kafka_cluster", "test"), ("group", group)],
            )
            .expect("when the rebalance was counted");
        let since = now_ms() as f64 / 1000.0 - at;
        assert!((0.0..60.0).contains(&since), "{group}: {since} s ago");
    }
    drop(members);
    exporter.stop().await;
}

/// Per partition of the group: the client ids its `partition_owner_info` series name (one,
/// unless a partition has two owner series).
fn partition_owners(s: &Scrape, group: &str) -> BTreeMap<String, Vec<String>> {
    let mut owners: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (labels, _) in s.series(
        "kafka_consumergroup_partition_owner_info",
        &[("kafka_cluster", "test"), ("group", group)],
    ) {
        owners
            .entry(labels["partition"].clone())
            .or_default()
            .push(labels["client_id"].clone());
    }
    owners
}

/// The client ids of the group's `member_info` series.
fn member_clients(s: &Scrape, group: &str) -> BTreeSet<String> {
    s.series(
        "kafka_consumergroup_member_info",
        &[("kafka_cluster", "test"), ("group", group)],
    )
    .map(|(l, _)| l["client_id"].clone())
    .collect()
}

/// Exactly `clients` are the group's members and own its six partitions: on
/// `member_info`, `member_assigned_partitions` (each of them some) and, one owner per
/// partition, `partition_owner_info`.
fn owned_by(s: &Scrape, group: &str, clients: &[String]) -> bool {
    let expected: BTreeSet<String> = clients.iter().cloned().collect();
    let owned = owners(s, group);
    let per_partition = partition_owners(s, group);
    let partitions: Vec<String> = (0..6).map(|p| p.to_string()).collect();
    member_clients(s, group) == expected
        && owned.keys().cloned().collect::<BTreeSet<_>>() == expected
        && owned.values().sum::<f64>() == 6.0
        && owned.values().all(|n| *n >= 1.0)
        && per_partition.keys().cloned().collect::<Vec<_>>() == partitions
        && per_partition
            .values()
            .all(|c| c.len() == 1 && expected.contains(&c[0]))
}

/// The classic members' session.timeout.ms (tests/java/GroupMember.java) and the KIP-848
/// group's consumer.session.timeout.ms: the broker's minimums.
const SESSION: Duration = Duration::from_secs(6);
/// The exporter's interval (Exporter::start).
const CYCLE: Duration = Duration::from_secs(1);
/// The survivors' next heartbeat (classic: the client's default 3 s; KIP-848: the
/// group's 1 s), their rejoin or reconciliation, and a loaded machine.
const SLACK: Duration = Duration::from_secs(6);

/// Three Java consumers per group (classic, and from Kafka 4.0 KIP-848), each with a client
/// id of its own; one of each is SIGKILLed: no LeaveGroup, only the coordinator's session
/// timeout removes it. Within the session timeout and two cycles (and some slack) the two
/// left own all six partitions on /metrics, and a few cycles later the group has counted
/// exactly one rebalance and one member gone, however many cycles saw the rebalance.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_member_is_one_rebalance_and_its_partitions_change_owner_within_two_cycles() {
    require_kafka();
    let started = Instant::now();
    let topic = unique("killed");
    create_topic(&topic, 6).await;
    let producer = plain_producer();
    for p in 0..6 {
        send(&producer, &topic, p, 5);
    }
    let mut groups = vec![(unique("killed-classic"), "classic")];
    // KIP-848 group configs (and consumers of the Java client's "consumer" protocol that
    // need no preview switch) come with Kafka 4.0.
    if kafka_version() >= (4, 0) {
        let group = unique("killed-kip848");
        configure_group(
            &group,
            "consumer.session.timeout.ms=6000,consumer.heartbeat.interval.ms=1000",
        );
        groups.push((group, "consumer"));
    }
    let clients =
        |group: &str| -> Vec<String> { (1..=3).map(|i| format!("{group}-c{i}")).collect() };
    // All six JVMs at once: each compiles GroupMember.java before it joins.
    let mut members: BTreeMap<String, Vec<JavaMember>> = std::thread::scope(|scope| {
        let joining: Vec<_> = groups
            .iter()
            .flat_map(|(group, protocol)| {
                clients(group)
                    .into_iter()
                    .map(move |c| (group, *protocol, c))
            })
            .map(|(group, protocol, client)| {
                let topic = &topic;
                let member =
                    scope.spawn(move || JavaMember::join_as(topic, group, protocol, &client));
                (group.clone(), member)
            })
            .collect();
        let mut members: BTreeMap<String, Vec<JavaMember>> = BTreeMap::new();
        for (group, member) in joining {
            members
                .entry(group)
                .or_default()
                .push(member.join().expect("a Java consumer joined"));
        }
        members
    });
    let filter = groups
        .iter()
        .map(|(g, _)| anchored(g))
        .collect::<Vec<_>>()
        .join("|");
    let exporter = Exporter::start(
        &anchored(&topic),
        &filter,
        &[(
            "KAFKA_LSO_EXPORTER_CLUSTERS__0__GROUPS__OWNER_LABELS",
            "true",
        )],
    )
    .await;
    for (group, _) in &groups {
        exporter
            .wait_for(
                &format!("{group}: three members owning the six partitions"),
                Duration::from_secs(60),
                |s| owned_by(s, group, &clients(group)).then_some(()),
            )
            .await;
    }

    // Settled: the counts hold still for a few cycles before the kill.
    let counts = |s: &Scrape, group: &str| -> Option<(f64, f64, f64)> {
        let labels = [("kafka_cluster", "test"), ("group", group)];
        Some((
            s.value("kafka_consumergroup_rebalances_total", &labels)?,
            s.value("kafka_consumergroup_members_left_total", &labels)?,
            s.value("kafka_consumergroup_members_joined_total", &labels)?,
        ))
    };
    let first = exporter.scrape().await;
    tokio::time::sleep(CYCLE * 3).await;
    let again = exporter.scrape().await;
    let mut before = BTreeMap::new();
    for (group, _) in &groups {
        let settled = counts(&again, group).expect("rebalance counters");
        assert_eq!(
            counts(&first, group),
            Some(settled),
            "{group}: no rebalance while nothing changes"
        );
        before.insert(group.clone(), settled);
    }

    // The second member of each group dies. A classic group then stays PreparingRebalance
    // until both survivors' next heartbeats (every 3 s): usually one cycle or more sees the
    // rebalance in progress (the timeline printed below says how many), and it must still
    // count once. A KIP-848 group's epoch steps once when the coordinator fences the member.
    let killed_at_wall = now_ms() as f64 / 1000.0;
    let mut killed_at = BTreeMap::new();
    for (group, _) in &groups {
        members.get_mut(group).unwrap().remove(1).kill();
        killed_at.insert(group.clone(), Instant::now());
    }
    let survivors = |group: &str| -> Vec<String> {
        let all = clients(group);
        vec![all[0].clone(), all[2].clone()]
    };
    let budget = SESSION + CYCLE * 2 + SLACK;
    let mut took_over: BTreeMap<String, Duration> = BTreeMap::new();
    // What the scrapes showed of each group from the kill on: its state, whether the
    // exporter called it rebalancing, its count; one entry per change.
    let mut seen: BTreeMap<String, Vec<(f64, String)>> = BTreeMap::new();
    let mut record = |s: &Scrape| {
        for (group, _) in &groups {
            let labels = [("kafka_cluster", "test"), ("group", group.as_str())];
            let state = s
                .series("kafka_consumergroup_state", &labels)
                .find(|(_, v)| *v == 1.0)
                .map_or("?".to_string(), |(l, _)| l["state"].clone());
            let mut status = labels.to_vec();
            status.push(("status", "rebalancing"));
            let now = format!(
                "{state} rebalancing={} total={}",
                s.value("kafka_consumergroup_status", &status)
                    .unwrap_or(-1.0),
                s.value("kafka_consumergroup_rebalances_total", &labels)
                    .unwrap_or(-1.0)
            );
            let log = seen.entry(group.clone()).or_default();
            if log.last().map(|(_, l)| l) != Some(&now) {
                log.push((killed_at[group].elapsed().as_secs_f64(), now));
            }
        }
    };
    loop {
        let s = exporter.scrape().await;
        record(&s);
        for (group, _) in &groups {
            if !took_over.contains_key(group) && owned_by(&s, group, &survivors(group)) {
                took_over.insert(group.clone(), killed_at[group].elapsed());
            }
        }
        if took_over.len() == groups.len() {
            break;
        }
        let late: Vec<&String> = groups
            .iter()
            .map(|(g, _)| g)
            .filter(|g| !took_over.contains_key(*g) && killed_at[*g].elapsed() > budget)
            .collect();
        assert!(
            late.is_empty(),
            "{late:?}: the two members left do not own the six partitions {budget:?} after the kill; last scrape:\n{}",
            s.text
                .lines()
                .filter(|l| late.iter().any(|g| l.contains(g.as_str())))
                .collect::<Vec<_>>()
                .join("\n")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for (group, protocol) in &groups {
        eprintln!(
            "{protocol}: the survivors own all six partitions {:.1} s after the kill (budget {budget:?})",
            took_over[group].as_secs_f64()
        );
    }

    // A few cycles more, so that a rebalance counted in several cycles would show.
    let more = Instant::now();
    while more.elapsed() < CYCLE * 4 {
        record(&exporter.scrape().await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let s = exporter.scrape().await;
    record(&s);
    for (group, protocol) in &groups {
        for (at, what) in &seen[group] {
            eprintln!("{protocol} +{at:.1} s: {what}");
        }
    }
    for (group, protocol) in &groups {
        let (rebalances, left, joined) = counts(&s, group).expect("rebalance counters");
        let (rebalances_before, left_before, joined_before) = before[group];
        assert_eq!(
            (
                rebalances - rebalances_before,
                left - left_before,
                joined - joined_before
            ),
            (1.0, 1.0, 0.0),
            "{group} ({protocol}): one rebalance, one member gone, none new"
        );
        let at = s
            .value(
                "kafka_consumergroup_last_rebalance_timestamp_seconds",
                &[("kafka_cluster", "test"), ("group", group)],
            )
            .expect("when the rebalance was counted");
        assert!(
            at >= killed_at_wall,
            "{group}: the rebalance counted at {at}, before the kill at {killed_at_wall}"
        );
    }
    drop(members);
    exporter.stop().await;
    eprintln!(
        "killed-member test: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// A KIP-848 member that stops polling keeps the partitions its target assignment takes
/// from it (nothing serves the revocation), and the member that joined waits for them:
/// `/` and the JSON API name each such partition with its holder and the member it moves
/// to, the holder as behind the group's assignment epoch with what it is to give up, the
/// newcomer with what it is to take; once the holder polls again, all have reconciled.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_that_does_not_reconcile_is_named_with_the_partitions_it_holds_back() {
    require_kafka();
    // KIP-848 consumers of librdkafka need Kafka 4.0 (ConsumerGroupHeartbeat v1).
    if kafka_version() < (4, 0) {
        eprintln!(
            "Kafka {:?}: no KIP-848 consumers, nothing to reconcile",
            kafka_version()
        );
        return;
    }
    let started = Instant::now();
    let topic = unique("reconcile");
    let group = unique("reconcile-kip848");
    create_topic(&topic, 4).await;
    let producer = plain_producer();
    for p in 0..4 {
        send(&producer, &topic, p, 5);
    }
    let (holder, newcomer) = (format!("{group}-holder"), format!("{group}-newcomer"));
    let first = RdkafkaMember::join_with(&topic, &group, "consumer", &[("client.id", &holder)]);
    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;
    exporter
        .wait_for(
            "the first member owning the four partitions, all read and committed",
            Duration::from_secs(60),
            |s| {
                let committed = s.value(
                    "kafka_consumergroup_topic_committed_offset",
                    &[
                        ("kafka_cluster", "test"),
                        ("group", &group),
                        ("topic", &topic),
                    ],
                );
                (owners(s, &group).get(&holder) == Some(&4.0) && committed == Some(20.0))
                    .then_some(())
            },
        )
        .await;

    // It stops polling; records arrive on every partition (so that each is behind), and a
    // second member joins: the target gives it two partitions the first still holds.
    first.pause(true);
    for p in 0..4 {
        send(&producer, &topic, p, 5);
    }
    let second = RdkafkaMember::join_with(&topic, &group, "consumer", &[("client.id", &newcomer)]);
    let member = |json: &serde_json::Value, client: &str| -> Option<serde_json::Value> {
        let groups = json["groups"].as_array()?;
        let g = groups.iter().find(|g| g["group"] == group.as_str())?;
        g["members"]
            .as_array()?
            .iter()
            .find(|m| m["client_id"] == client)
            .cloned()
    };
    // The holder stays behind the group's assignment epoch for as long as it does not
    // poll. Kafka 4.4 lists the two it owes as still its own (it is to give them up); a
    // broker that left them out as pending revocation would show them as `assigning`;
    // either way each names the newcomer as the member it moves to.
    let partitions_of = |m: &serde_json::Value, key: &str| -> BTreeSet<i64> {
        m[key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["partition"].as_i64())
            .collect()
    };
    let json = {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let (status, body) = exporter.get("/api/v1/stuck").await;
            assert_eq!(status, 200, "{body}");
            let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
            let holding = member(&json, &holder).is_some_and(|m| {
                m["reconciled"] == false
                    && m["member_epoch"].as_i64() < m["assignment_epoch"].as_i64()
            });
            let waiting = member(&json, &newcomer).is_some_and(|m| {
                m["reconciled"] == false && partitions_of(&m, "pending").len() == 2
            });
            if holding && waiting {
                break json;
            }
            assert!(
                Instant::now() < deadline,
                "the holder behind the assignment epoch, the newcomer waiting for two partitions: {json:#}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    let g = json["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == group.as_str())
        .unwrap();
    assert_eq!(g["status"], "rebalancing", "{g:#}");
    let holder_json = member(&json, &holder).unwrap();
    let newcomer_json = member(&json, &newcomer).unwrap();
    let owed = partitions_of(&newcomer_json, "pending");
    assert_eq!(holder_json["target_partitions"], 2, "{holder_json:#}");
    assert_eq!(newcomer_json["assigned_partitions"], 0, "{newcomer_json:#}");
    let listed_as_own = holder_json["assigned_partitions"] == 4;
    if listed_as_own {
        assert_eq!(
            partitions_of(&holder_json, "revoking"),
            owed,
            "{holder_json:#}"
        );
    } else {
        assert_eq!(holder_json["assigned_partitions"], 2, "{holder_json:#}");
        assert!(
            partitions_of(&holder_json, "revoking").is_empty(),
            "{holder_json:#}"
        );
    }
    let moving: BTreeSet<i64> = g["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            let held = if listed_as_own {
                p["ownership"] == "owned" && p["owner"]["client_id"] == holder.as_str()
            } else {
                p["ownership"] == "assigning" && p["owner"].is_null()
            };
            held && p["target_owner"]["client_id"] == newcomer.as_str()
        })
        .map(|p| p["partition"].as_i64().unwrap())
        .collect();
    assert_eq!(moving, owed, "{g:#}");
    assert!(
        g["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["ownership"] != "unowned"),
        "{g:#}"
    );
    let (_, page) = exporter.get("/").await;
    assert!(
        page.contains("2 of 2 members not at their target assignment"),
        "{page}"
    );
    assert!(
        page.contains(&format!(", moving to {newcomer} on ")),
        "{page}"
    );
    assert!(
        page.contains(&format!("{holder} on /127.0.0.1"))
            && page.contains("has not acknowledged its new assignment"),
        "{page}"
    );
    assert!(
        page.contains(&format!("{newcomer} on /127.0.0.1, to take ")),
        "{page}"
    );

    // It polls again: it gives them up, the newcomer takes them, both at their target.
    first.pause(false);
    exporter
        .wait_for(
            "both members at their target, two partitions each",
            Duration::from_secs(60),
            |s| {
                let owned = owners(s, &group);
                let unreconciled = s.value(
                    "kafka_consumergroup_unreconciled_partitions",
                    &[("kafka_cluster", "test"), ("group", &group)],
                );
                (owned.get(&holder) == Some(&2.0)
                    && owned.get(&newcomer) == Some(&2.0)
                    && unreconciled == Some(0.0))
                .then_some(())
            },
        )
        .await;
    drop((first, second));
    exporter.stop().await;
    eprintln!("reconcile test: {:.1} s", started.elapsed().as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn offsets_nobody_owns_are_abandoned_not_stalled_and_can_be_left_out() {
    require_kafka();
    let topic = unique("abandoned");
    let group = unique("abandoned-group");
    create_topic(&topic, 2).await;
    let producer = plain_producer();
    send(&producer, &topic, 0, 10);
    send(&producer, &topic, 1, 10);
    consume_all_and_commit(&group, &topic, 2, "read_committed");
    // More to read, and nobody reads it: the group's one member now reads another topic
    // (it stopped reading this one).
    send(&producer, &topic, 0, 5);
    wait_high_watermark(&topic, 0, 15);
    let other = unique("abandoned-other");
    create_topic(&other, 1).await;
    let _member = RdkafkaMember::join(&other, &group, "classic");

    let exporter = Exporter::start(
        &anchored(&topic),
        &anchored(&group),
        &[
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__GRANULARITY", "partition"),
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__STALL_AFTER", "2s"),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__GROUPS__ABANDON_AFTER",
                "8s",
            ),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__GROUPS__ASSIGNED_ONLY",
                "true",
            ),
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__GROUPS__RATE_WINDOW", "2s"),
        ],
    )
    .await;
    let status = |s: &Scrape, name: &str| {
        s.value(
            "kafka_consumergroup_status",
            &[
                ("kafka_cluster", "test"),
                ("group", &group),
                ("status", name),
            ],
        )
    };
    let lag = |s: &Scrape| {
        s.value(
            "kafka_consumergroup_lso_lag",
            &group_labels(&group, &topic, "0"),
        )
    };
    let consume_rate = |s: &Scrape| {
        s.value(
            "kafka_consumergroup_topic_consume_rate",
            &[
                ("kafka_cluster", "test"),
                ("group", &group),
                ("topic", &topic),
            ],
        )
    };
    // First stalled, its series shown: something to read, no commit, reading nothing.
    let shown = exporter
        .wait_for(
            "the group stalled, its rate known",
            Duration::from_secs(30),
            |s| (status(s, "stalled")? == 1.0 && consume_rate(s)? == 0.0).then(|| lag(s)),
        )
        .await;
    assert_eq!(shown, Some(5.0), "its lag while it is stalled");
    // Then abandoned: no member has owned it for abandon_after; not stalled any more,
    // and with assigned_only its offset series are gone.
    exporter
        .wait_for("the group abandoned", Duration::from_secs(30), |s| {
            (status(s, "abandoned")? == 1.0 && status(s, "stalled")? == 0.0).then_some(())
        })
        .await;
    let s = exporter.scrape().await;
    assert_eq!(
        lag(&s),
        None,
        "assigned_only leaves abandoned partitions out"
    );
    assert_eq!(
        consume_rate(&s),
        None,
        "and the rates of a topic whose partitions are all abandoned"
    );
    assert_eq!(
        s.value(
            "kafka_consumergroup_topic_committed_offset",
            &[
                ("kafka_cluster", "test"),
                ("group", &group),
                ("topic", &topic)
            ],
        ),
        None
    );
    // The JSON API still lists it, and says nobody owns it.
    let (code, body) = exporter.get("/api/v1/stuck").await;
    assert_eq!(code, 200);
    let report: serde_json::Value = serde_json::from_str(&body).unwrap();
    let listed = report["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == group.as_str())
        .unwrap_or_else(|| panic!("{group} not in {body}"));
    assert_eq!(listed["status"], "abandoned");
    let p0 = listed["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["partition"] == 0)
        .unwrap_or_else(|| panic!("partition 0 not in {listed}"));
    assert_eq!(
        (&p0["ownership"], &p0["abandoned"], &p0["lag"]),
        (
            &serde_json::json!("unowned"),
            &serde_json::json!(true),
            &serde_json::json!(5)
        )
    );
    exporter.stop().await;
}

/// Paces `work` to `rate` per second on average: it runs as often as the time since
/// `start` allows, whatever a slow machine makes one call cost.
fn paced(start: std::time::Instant, done: u64, rate: f64) -> u64 {
    let due = (start.elapsed().as_secs_f64() * rate) as u64;
    due.saturating_sub(done)
}

/// Records arrive at 100 per second. A consumer reading at half that never closes its lag:
/// no estimate. Read at twice that, it closes at 100 per second: the estimate, read once
/// the rate window holds only the new pace (the middle of three readings a second apart),
/// is within 20% of the time it then takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_catchup_estimate_against_a_throttled_consumer() {
    throttled_catchup(false).await;
}

/// The same with a transactional producer (a transaction every 100 ms: a commit marker
/// in the offsets every ten records) and a read_committed consumer, whose bound is the
/// LSO; then the producer holds a transaction open while records keep arriving in it:
/// the consumer, caught up to the LSO, waits for the transaction, and the estimate says so
/// instead of a number.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_catchup_estimate_against_a_throttled_read_committed_consumer() {
    throttled_catchup(true).await;
}

async fn throttled_catchup(transactional: bool) {
    use rdkafka::config::ClientConfig;
    use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
    use rdkafka::producer::{BaseRecord, Producer};
    use rdkafka::{Message, Offset, TopicPartitionList};
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    require_kafka();
    let topic = unique("catchup");
    let group = unique("catchup-group");
    create_topic(&topic, 1).await;
    let stop = Arc::new(AtomicBool::new(false));
    // The producer holds its transaction open from now on (transactional only).
    let hold = Arc::new(AtomicBool::new(false));
    // The consumer's pace, in records per second.
    let pace = Arc::new(AtomicU64::new(50));

    let producing = {
        let (topic, stop, hold) = (topic.clone(), stop.clone(), hold.clone());
        let transactional_id = transactional.then(|| unique("catchup-tx"));
        std::thread::spawn(move || {
            let producer = match &transactional_id {
                Some(id) => transactional_producer(id),
                None => plain_producer(),
            };
            let start = std::time::Instant::now();
            let mut sent = 0u64;
            let mut open_since: Option<std::time::Instant> = None;
            while !stop.load(Ordering::Relaxed) {
                if transactional_id.is_some() && open_since.is_none() {
                    producer.begin_transaction().expect("begin");
                    open_since = Some(std::time::Instant::now());
                }
                for _ in 0..paced(start, sent, 100.0) {
                    let record = BaseRecord::<(), str>::to(&topic).partition(0).payload("x");
                    producer.send(record).expect("send");
                    sent += 1;
                }
                if open_since.is_some_and(|at| at.elapsed() >= Duration::from_millis(100))
                    && !hold.load(Ordering::Relaxed)
                {
                    producer
                        .commit_transaction(Duration::from_secs(10))
                        .expect("commit");
                    open_since = None;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let consuming = {
        let (topic, group, stop, pace) = (topic.clone(), group.clone(), stop.clone(), pace.clone());
        std::thread::spawn(move || {
            let consumer: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", bootstrap())
                .set("group.id", &group)
                .set("enable.auto.commit", "false")
                .set("auto.offset.reset", "earliest")
                .set(
                    "isolation.level",
                    if transactional {
                        "read_committed"
                    } else {
                        "read_uncommitted"
                    },
                )
                .create()
                .expect("consumer");
            let mut assignment = TopicPartitionList::new();
            assignment
                .add_partition_offset(&topic, 0, Offset::Beginning)
                .unwrap();
            consumer.assign(&assignment).expect("assign");
            let mut rate = pace.load(Ordering::Relaxed);
            let mut start = std::time::Instant::now();
            let mut read = 0u64;
            let mut last_commit = std::time::Instant::now();
            let mut next = None;
            while !stop.load(Ordering::Relaxed) {
                let now_rate = pace.load(Ordering::Relaxed);
                if now_rate != rate {
                    (rate, start, read) = (now_rate, std::time::Instant::now(), 0);
                }
                for _ in 0..paced(start, read, rate as f64) {
                    match consumer.poll(Duration::from_millis(50)) {
                        Some(Ok(m)) => {
                            next = Some(m.offset() + 1);
                            read += 1;
                        }
                        _ => break,
                    }
                }
                if let Some(offset) =
                    next.filter(|_| last_commit.elapsed() >= Duration::from_millis(100))
                {
                    let mut commit = TopicPartitionList::new();
                    commit
                        .add_partition_offset(&topic, 0, Offset::Offset(offset))
                        .unwrap();
                    let _ = consumer.commit(&commit, CommitMode::Async);
                    last_commit = std::time::Instant::now();
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };

    let exporter = Exporter::start(
        &anchored(&topic),
        &anchored(&group),
        &[
            ("KAFKA_LSO_EXPORTER_INTERVAL", "500ms"),
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__GROUPS__RATE_WINDOW", "3s"),
        ],
    )
    .await;
    let labels = [
        ("kafka_cluster", "test"),
        ("group", group.as_str()),
        ("topic", topic.as_str()),
    ];
    let labels = &labels[..];
    // Half the pace: rates known, the lag growing, no estimate.
    tokio::time::sleep(Duration::from_secs(8)).await;
    // Over a 3 s window on a busy machine, a consumer starved for a moment reads in a
    // burst: wait for a window that shows the pace (it must come within 30 s).
    let slow = exporter
        .wait_for(
            "a consume rate under 3/4 of the produce rate at half the pace",
            Duration::from_secs(30),
            |s| {
                let consume = s.value("kafka_consumergroup_topic_consume_rate", labels)?;
                let produce = s.value("kafka_consumergroup_topic_produce_rate", labels)?;
                (consume < produce * 0.75).then(|| {
                    (
                        consume,
                        produce,
                        s.value("kafka_consumergroup_topic_catchup_seconds", labels),
                    )
                })
            },
        )
        .await;
    assert_eq!(
        slow.2, None,
        "a lag that does not close has no estimate (consumes {} against {} produced)",
        slow.0, slow.1
    );
    tokio::time::sleep(Duration::from_secs(20)).await;

    // Twice the pace: once the window holds the new pace only, the estimate. Read at
    // three cycles a second apart, each a prediction of when it will have caught up; the
    // middle one is compared with when it did (one reading alone can fall on a window
    // in which a consumer starved for a moment on a busy machine reads in a burst).
    pace.store(200, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(4)).await;
    let from = std::time::Instant::now();
    let mut predicted = Vec::new();
    let mut readings = Vec::new();
    for _ in 0..3 {
        let s = exporter.scrape().await;
        let estimate = s
            .value("kafka_consumergroup_topic_catchup_seconds", labels)
            .unwrap_or_else(|| panic!("no estimate while it closes:\n{}", s.text));
        let lag = s
            .value("kafka_consumergroup_topic_lso_lag", labels)
            .unwrap();
        assert!(lag > 300.0, "lag {lag} when the estimate was read");
        predicted.push(from.elapsed().as_secs_f64() + estimate);
        readings.push((estimate, lag));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    predicted.sort_by(f64::total_cmp);
    let predicted = predicted[1];
    exporter
        .wait_for("the group caught up", Duration::from_secs(120), |s| {
            (s.value("kafka_consumergroup_topic_lso_lag", labels)? <= 50.0).then_some(())
        })
        .await;
    let observed = from.elapsed().as_secs_f64();
    eprintln!(
        "catch-up (transactional: {transactional}): estimates (s, at lag) {readings:?}, predicted {predicted:.1} s, caught up in {observed:.1} s"
    );
    assert!(
        (predicted - observed).abs() <= 0.2 * observed,
        "estimates (s, at lag) {readings:?}: predicted {predicted:.1} s, caught up in {observed:.1} s"
    );

    if transactional {
        // A transaction held open while records arrive in it: the consumer reads up to
        // the LSO and waits there, however fast it reads. Caught up as it is, its
        // estimate is absent (waits), not 0 (caught up): within a few cycles, as a cycle
        // that sees the LSO for the first time does not know yet that it stands.
        hold.store(true, Ordering::Relaxed);
        exporter
            .wait_for(
                "the group at the pinned LSO, with no estimate",
                Duration::from_secs(30),
                |s| {
                    let lag = s.value("kafka_consumergroup_topic_lso_lag", labels)?;
                    let withheld = s.value(
                        "kafka_partition_hw_minus_lso",
                        &partition_labels(&topic, "0"),
                    )?;
                    let estimate = s.value("kafka_consumergroup_topic_catchup_seconds", labels);
                    (lag == 0.0 && withheld > 100.0 && estimate.is_none()).then_some(())
                },
            )
            .await;
        // The JSON and `/` say why.
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let (_, body) = exporter.get("/api/v1/stuck").await;
            let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
            let waits = json["groups"].as_array().into_iter().flatten().any(|g| {
                g["group"] == group.as_str() && g["topics"][0]["catchup"] == "waits_for_transaction"
            });
            let (_, page) = exporter.get("/").await;
            if waits && page.contains(&format!("{topic}: waits for the transaction")) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the group waits for the transaction: {json:#}\n{page}"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    stop.store(true, Ordering::Relaxed);
    producing.join().unwrap();
    consuming.join().unwrap();
    exporter.stop().await;
}
