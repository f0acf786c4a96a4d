//! The churn soak: the exporter sampling every second for SOAK_MINUTES (30 by default)
//! while the cluster never holds still, and a broker restarting midway.
//!
//! Run it on three brokers, so that a restart leaves the cluster serving:
//! `KAFKA_BROKERS=3 KAFKA_LOCAL_PORT=19200 bench/run soak`.
//!
//! Churn, all at once:
//! - a topic created every 10 s (3 partitions, replication factor 3 where there are
//!   three brokers) and the one created 30 s earlier deleted;
//! - a consumer group appearing every 10 s (offsets committed on the newest topic) and
//!   the one from 30 s earlier deleted;
//! - transactions on the newest topics every 2 s, committing and aborting in turn, and
//!   every 2 minutes one left open until the coordinator aborts it on its timeout (10 s);
//! - broker 2 restarted at half time.
//!
//! With `SOAK_UNREACHABLE=N` (three brokers), the exporter reaches the brokers through
//! proxies of this process on their PROXIED listeners, and broker N's proxy blackholes
//! every connection from the start: a broker the metadata lists that the exporter cannot
//! reach, so that its ListGroups fails in every cycle while the others answer (no restart
//! then). What the exporter remembers across cycles (its commit watch, from the debug log
//! of each cycle) must stay flat meanwhile.
//!
//! With `SOAK_COORDINATOR_DOWN=N` (three brokers), the exporter reads committed offsets
//! through librdkafka (its own client refuses the PKCS#12 keystore it is given, on the
//! SSL listeners), and the groups it keeps are ten groups whose coordinator is broker N
//! (the leader of their `__consumer_offsets` partitions), read once, after which broker N
//! is stopped for the rest of the soak (no restart then; started again at the end). Ten
//! groups stay in librdkafka's coordinator cache (11 entries), which names broker N: the
//! cycles right after the stop ask a broker that no longer coordinates them, then one
//! that is gone (vendor/rdkafka-sys/PATCHED.md: unpatched, the first crashed the
//! exporter, and a request waiting for the second could stay inside librdkafka for good,
//! one per group and cycle). Their offsets must come back from the new coordinators and
//! the RSS stay flat. The churn's topics get replication factor 2 then, so that two
//! brokers can hold them.
//!
//! Reported: the exporter's RSS over time and its slope over the second half, series
//! left behind for deleted topics and groups (scraped every 5 s; a name counts as left
//! behind when it is still on /metrics 3 cycles after its deletion was acknowledged),
//! anomalies counted by the exporter, cycles longer than the interval, the entries of its
//! commit watch over time, and the exporter's warnings by kind.

#[path = "../tests/common/mod.rs"]
mod common;
mod process;

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use process::{exporter, rss_kib};
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

const INTERVAL: &str = "1s";
const KEEP: usize = 3;
/// A deleted name may linger this long (3 cycles) before it counts as left behind.
const GRACE: Duration = Duration::from_secs(3);

/// Least-squares slope of (minutes, MiB), in MiB per hour.
fn slope_per_hour(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(x, y), p| (x + p.0 / n, y + p.1 / n));
    let (num, den) = points.iter().fold((0.0, 0.0), |(a, b), p| {
        (a + (p.0 - mx) * (p.1 - my), b + (p.0 - mx).powi(2))
    });
    num / den * 60.0
}

/// The first word of a warning, after the log level and target: its kind.
fn warning_kind(line: &str) -> String {
    let text = line.split("scheduler").nth(1).unwrap_or(line);
    let text: String = text
        .chars()
        .filter(|c| !c.is_ascii_digit())
        .take(90)
        .collect();
    text.trim_start_matches(|c: char| !c.is_alphabetic())
        .to_string()
}

/// Groups coordinated by the stopped broker (`SOAK_COORDINATOR_DOWN`): fewer than
/// librdkafka's coordinator cache holds (11).
const DOWN_GROUPS: usize = 10;
/// `offsets.topic.num.partitions` of `scripts/kafka-local`.
const OFFSETS_PARTITIONS: i32 = 8;

/// `scripts/kafka-local ARGS` for the brokers under test (bench/run's environment).
fn kafka_local(args: &[&str]) -> String {
    let output = Command::new(repo_root().join("scripts/kafka-local"))
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("scripts/kafka-local");
    assert!(
        output.status.success(),
        "scripts/kafka-local {args:?} failed"
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// The CA certificate of the SSL listeners, and a PKCS#12 keystore beside it (the
/// brokers' own, password "kafka-local").
fn tls_files() -> (String, String) {
    let ca = kafka_local(&["tls-ca"]);
    let keystore = std::path::Path::new(&ca).with_file_name("broker.p12");
    assert!(keystore.exists(), "no keystore at {}", keystore.display());
    (ca, keystore.to_string_lossy().into_owned())
}

/// The `__consumer_offsets` partition of `group` (Kafka's `Utils.abs(hashCode) % n`).
fn offsets_partition(group: &str) -> i32 {
    let hash = group
        .encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)));
    hash.checked_abs().unwrap_or(0) % OFFSETS_PARTITIONS
}

/// `count` groups `{tag}-down-*` whose coordinator is `broker`, each with an offset
/// committed on a topic `{tag}-down` of its own.
async fn groups_coordinated_by(tag: &str, broker: i32, count: usize) -> Vec<String> {
    let topic = format!("{tag}-down");
    let new = NewTopic::new(&topic, 1, TopicReplication::Fixed(3));
    let _ = admin().create_topics([&new], &AdminOptions::new()).await;
    send(&plain_producer(), &topic, 0, count);
    let commit = |group: &str, offset: i64| commit_offset(group, &topic, offset);
    // The first commit creates __consumer_offsets where it does not exist yet.
    commit(&format!("{tag}-warmup"), 0);
    let metadata: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .create()
        .unwrap();
    let metadata = metadata
        .fetch_metadata(Some("__consumer_offsets"), Duration::from_secs(10))
        .expect("metadata of __consumer_offsets");
    let leaders: BTreeMap<i32, i32> = metadata.topics()[0]
        .partitions()
        .iter()
        .map(|p| (p.id(), p.leader()))
        .collect();
    assert!(
        leaders.values().any(|&l| l == broker),
        "broker {broker} leads no partition of __consumer_offsets: {leaders:?}"
    );
    let groups: Vec<String> = (0..)
        .map(|n| format!("{tag}-down-{n:04}"))
        .filter(|g| leaders.get(&offsets_partition(g)) == Some(&broker))
        .take(count)
        .collect();
    for (i, group) in groups.iter().enumerate() {
        commit(group, i as i64 + 1);
    }
    groups
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    require_kafka();
    let minutes: f64 = std::env::var("SOAK_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(30.0);
    let brokers = bootstrap().split(',').count();
    let replication = if brokers >= 3 { 3 } else { 1 };
    let run_tag = unique("soak");
    println!(
        "soak: {minutes} min at {INTERVAL}, {brokers} broker(s), topics and groups named {run_tag}-*"
    );

    // A broker the exporter cannot reach (see the module docs).
    let unreachable: Option<usize> = std::env::var("SOAK_UNREACHABLE")
        .ok()
        .and_then(|n| n.parse().ok());
    let mut proxies = Vec::new();
    let mut exporter_bootstrap = bootstrap();
    if let Some(blackholed) = unreachable {
        assert!(brokers >= 3, "SOAK_UNREACHABLE needs three brokers");
        let mut reachable = Vec::new();
        for (i, addr) in bootstrap().split(',').enumerate() {
            let (host, port) = addr.rsplit_once(':').unwrap();
            let port: u16 = port.parse().unwrap();
            // PROXIED listens at offset 4 and is advertised at offset 5.
            let listen: std::net::SocketAddr = format!("{host}:{}", port + 5).parse().unwrap();
            let upstream: std::net::SocketAddr = format!("{host}:{}", port + 4).parse().unwrap();
            let proxy = common::proxy::Proxy::start_beside(listen, upstream).await;
            if i + 1 == blackholed {
                proxy.set_mode(common::proxy::Mode::Blackhole);
            } else {
                reachable.push(listen.to_string());
            }
            proxies.push(proxy);
        }
        exporter_bootstrap = reachable.join(",");
        println!("broker {blackholed} unreachable for the exporter (its proxy blackholes)");
    }
    // A group coordinator stopped under the librdkafka fallback (see the module docs).
    let coordinator_down: Option<i32> = std::env::var("SOAK_COORDINATOR_DOWN")
        .ok()
        .and_then(|n| n.parse().ok());
    let replication = match coordinator_down {
        Some(_) => {
            assert!(
                brokers >= 3 && unreachable.is_none(),
                "SOAK_COORDINATOR_DOWN needs three brokers and no SOAK_UNREACHABLE"
            );
            2
        }
        None => replication,
    };
    let port = free_port();
    let names = format!("^{run_tag}-");
    let mut command = exporter(&exporter_bootstrap, "soak", INTERVAL, port, &names, &names);
    let mut down_groups = Vec::new();
    if let Some(broker) = coordinator_down {
        down_groups = groups_coordinated_by(&run_tag, broker, DOWN_GROUPS).await;
        let (ca, keystore) = tls_files();
        let ssl: Vec<String> = bootstrap()
            .split(',')
            .map(|addr| {
                let (host, port) = addr.rsplit_once(':').unwrap();
                format!("{host}:{}", port.parse::<u16>().unwrap() + 3)
            })
            .collect();
        command = exporter(
            &ssl.join(","),
            "soak",
            INTERVAL,
            port,
            &names,
            &format!("^{run_tag}-down-"),
        );
        for (property, value) in [
            ("security.protocol", "SSL"),
            ("ssl.ca.location", ca.as_str()),
            // The brokers do not ask for a client certificate: the keystore only makes the
            // exporter's own client step aside (it reads PEM files only).
            ("ssl.keystore.location", keystore.as_str()),
            ("ssl.keystore.password", "kafka-local"),
        ] {
            command.env(
                format!("KAFKA_LSO_EXPORTER_CLUSTERS__0__CLIENT__{property}"),
                value,
            );
        }
        println!(
            "committed offsets through librdkafka; groups {run_tag}-down-* coordinated by broker {broker}, \
             which stops once the exporter has read them"
        );
    }
    let mut child = command
        .env("RUST_LOG", "kafka_lso_exporter=debug")
        .spawn()
        .expect("start the exporter");
    let pid = child.id();

    // The exporter's log: cycle times, what it remembers, and warnings.
    let cycles = Arc::new(Mutex::new(Vec::<f64>::new()));
    let remembered = Arc::new(Mutex::new(Vec::<(f64, u64)>::new()));
    let warnings = Arc::new(Mutex::new(BTreeMap::<String, u32>::new()));
    // Every warning with the minute it came, so that each can be explained.
    let warning_log = Arc::new(Mutex::new(Vec::<(f64, String)>::new()));
    let soak_started = Instant::now();
    {
        let stderr = child.stderr.take().unwrap();
        let (cycles, warnings, warning_log, remembered) = (
            cycles.clone(),
            warnings.clone(),
            warning_log.clone(),
            remembered.clone(),
        );
        let seconds = regex::Regex::new(r"seconds=([0-9.]+)").unwrap();
        let watch = regex::Regex::new(r"commit_watch=([0-9]+)").unwrap();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                let text = String::from_utf8_lossy(&line);
                if text.contains("cycle done") {
                    if let Some(c) = seconds.captures(&text) {
                        cycles.lock().unwrap().push(c[1].parse().unwrap());
                    }
                    if let Some(c) = watch.captures(&text) {
                        let minute = soak_started.elapsed().as_secs_f64() / 60.0;
                        remembered
                            .lock()
                            .unwrap()
                            .push((minute, c[1].parse().unwrap()));
                    }
                } else if text.contains(" level=WARN ") || text.contains(" level=ERROR ") {
                    *warnings
                        .lock()
                        .unwrap()
                        .entry(warning_kind(&text))
                        .or_default() += 1;
                    let message = text.split("scheduler").nth(1).unwrap_or(&text);
                    warning_log.lock().unwrap().push((
                        soak_started.elapsed().as_secs_f64() / 60.0,
                        message.trim().chars().take(400).collect(),
                    ));
                }
                line.clear();
            }
        });
    }

    let stop = Arc::new(AtomicBool::new(false));
    // Names deleted, with when the deletion was acknowledged.
    let deleted: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let live_topics: Arc<Mutex<VecDeque<String>>> = Arc::default();
    let transactions = Arc::new(Mutex::new(BTreeMap::<&str, u32>::new()));

    // Transactions: commit, abort, and now and then one left to time out.
    let txn_thread = {
        let (stop, live_topics, transactions) =
            (stop.clone(), live_topics.clone(), transactions.clone());
        let tag = run_tag.clone();
        std::thread::spawn(move || {
            let producer = transactional_producer(&format!("{tag}-txn"));
            let mut n = 0u64;
            let mut last_timeout = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_secs(2));
                let Some(topic) = live_topics.lock().unwrap().back().cloned() else {
                    continue;
                };
                if last_timeout.elapsed() > Duration::from_secs(120) {
                    last_timeout = Instant::now();
                    // A producer that stops talking mid-transaction: its coordinator
                    // aborts the transaction after transaction.timeout.ms.
                    let lost: Producer_ = ClientConfig::new()
                        .set("bootstrap.servers", bootstrap())
                        .set("transactional.id", format!("{tag}-lost-{n}"))
                        .set("transaction.timeout.ms", "10000")
                        .create()
                        .unwrap();
                    if lost.init_transactions(Duration::from_secs(30)).is_ok()
                        && lost.begin_transaction().is_ok()
                    {
                        send(&lost, &topic, 0, 2);
                        *transactions.lock().unwrap().entry("timed out").or_default() += 1;
                    }
                    std::mem::forget(lost);
                }
                n += 1;
                let outcome = (|| {
                    producer.begin_transaction()?;
                    for p in 0..3 {
                        let record = rdkafka::producer::BaseRecord::<(), _>::to(&topic)
                            .partition(p)
                            .payload("t");
                        producer.send(record).map_err(|(e, _)| e)?;
                    }
                    if n.is_multiple_of(2) {
                        producer.commit_transaction(Duration::from_secs(30))?;
                        Ok::<_, rdkafka::error::KafkaError>("committed")
                    } else {
                        producer.abort_transaction(Duration::from_secs(30))?;
                        Ok("aborted")
                    }
                })();
                let key = match outcome {
                    Ok(kind) => kind,
                    Err(_) => {
                        // The topic may have been deleted under it, or a broker be
                        // restarting: end the transaction and go on.
                        let _ = producer.abort_transaction(Duration::from_secs(30));
                        "failed (topic deleted or broker restarting)"
                    }
                };
                *transactions.lock().unwrap().entry(key).or_default() += 1;
            }
        })
    };

    if let Some(broker) = coordinator_down {
        // Broker N goes once the exporter has read every group (librdkafka's coordinator
        // cache names broker N for each of them then).
        let http = reqwest::Client::new();
        let by = Instant::now() + Duration::from_secs(120);
        loop {
            let body = match http
                .get(format!("http://127.0.0.1:{port}/metrics"))
                .send()
                .await
            {
                Ok(r) => r.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            let read = down_groups
                .iter()
                .filter(|g| {
                    body.lines().any(|l| {
                        // kafka_consumergroup_topic_committed_offset at the default
                        // granularity.
                        l.starts_with("kafka_consumergroup_")
                            && l.contains("committed_offset{")
                            && l.contains(&format!("group=\"{g}\""))
                    })
                })
                .count();
            if read == down_groups.len() {
                break;
            }
            assert!(
                Instant::now() < by,
                "the exporter read {read} of the {} groups in 2 minutes",
                down_groups.len()
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let minute = soak_started.elapsed().as_secs_f64() / 60.0;
        kafka_local(&["stop", &broker.to_string()]);
        println!("minute {minute:.1}: broker {broker} (the groups' coordinator) stopped");
    }

    let started = Instant::now();
    let end = started + Duration::from_secs_f64(minutes * 60.0);
    let restart_at = started + Duration::from_secs_f64(minutes * 30.0);
    let mut restarted = false;
    let mut rss: Vec<(f64, f64)> = Vec::new();
    let mut left_behind: BTreeMap<String, u32> = BTreeMap::new();
    let mut live_groups: VecDeque<String> = VecDeque::new();
    let (mut created_topics, mut created_groups) = (0usize, 0usize);
    let mut scrapes = 0usize;
    let http = reqwest::Client::new();
    let mut tick = 0u64;
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_secs(5)).await;
        tick += 1;
        let minute = started.elapsed().as_secs_f64() / 60.0;
        rss.push((minute, rss_kib(pid).0 as f64 / 1024.0));

        if tick.is_multiple_of(2) {
            // A new topic and group; the ones from KEEP rounds ago go.
            let topic = format!("{run_tag}-t{created_topics:05}");
            created_topics += 1;
            let new = NewTopic::new(&topic, 3, TopicReplication::Fixed(replication));
            let _ = admin().create_topics([&new], &AdminOptions::new()).await;
            let producer = plain_producer();
            for p in 0..3 {
                let record = rdkafka::producer::BaseRecord::<(), _>::to(&topic)
                    .partition(p)
                    .payload("x");
                let _ = producer.send(record);
            }
            let _ = producer.flush(Duration::from_secs(10));
            live_topics.lock().unwrap().push_back(topic.clone());

            let group = format!("{run_tag}-g{created_groups:05}");
            created_groups += 1;
            let member: BaseConsumer = ClientConfig::new()
                .set("bootstrap.servers", bootstrap())
                .set("group.id", &group)
                .create()
                .unwrap();
            let mut offsets = TopicPartitionList::new();
            for p in 0..3 {
                offsets
                    .add_partition_offset(&topic, p, Offset::Offset(1))
                    .unwrap();
            }
            if member.commit(&offsets, CommitMode::Sync).is_ok() {
                live_groups.push_back(group);
            }

            let old_topic = {
                let mut live = live_topics.lock().unwrap();
                (live.len() > KEEP).then(|| live.pop_front().unwrap())
            };
            if let Some(old) = old_topic {
                if admin()
                    .delete_topics(&[&old], &AdminOptions::new())
                    .await
                    .is_ok_and(|r| r.iter().all(Result::is_ok))
                {
                    deleted.lock().unwrap().push((old, Instant::now()));
                }
            }
            if live_groups.len() > KEEP {
                let old = live_groups.pop_front().unwrap();
                if admin()
                    .delete_groups(&[&old], &AdminOptions::new())
                    .await
                    .is_ok_and(|r| r.iter().all(Result::is_ok))
                {
                    deleted.lock().unwrap().push((old, Instant::now()));
                }
            }
        }

        if !restarted
            && Instant::now() >= restart_at
            && brokers >= 3
            && unreachable.is_none()
            && coordinator_down.is_none()
        {
            restarted = true;
            let t = Instant::now();
            let status = Command::new(repo_root().join("scripts/kafka-local"))
                .args(["restart", "2"])
                .status()
                .expect("scripts/kafka-local restart 2");
            assert!(status.success(), "restarting broker 2 failed");
            println!(
                "minute {minute:.1}: broker 2 restarted in {:.1} s",
                t.elapsed().as_secs_f64()
            );
        }

        // Names deleted more than GRACE ago must be gone from /metrics.
        let Ok(body) = http
            .get(format!("http://127.0.0.1:{port}/metrics"))
            .send()
            .await
            .and_then(|r| r.error_for_status())
        else {
            panic!("the exporter stopped answering /metrics at minute {minute:.1}");
        };
        let body = body.text().await.unwrap();
        scrapes += 1;
        for (name, at) in deleted.lock().unwrap().iter() {
            if at.elapsed() > GRACE
                && (body.contains(&format!("topic=\"{name}\""))
                    || body.contains(&format!("group=\"{name}\"")))
            {
                *left_behind.entry(name.clone()).or_default() += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = txn_thread.join();

    let metrics = reqwest::get(format!("http://127.0.0.1:{port}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    if let Some(broker) = coordinator_down {
        kafka_local(&["start", &broker.to_string()]);
    }

    let cycles = cycles.lock().unwrap().clone();
    let over = cycles.iter().filter(|s| **s > 1.0).count();
    let mut sorted = cycles.clone();
    sorted.sort_by(f64::total_cmp);
    let second_half: Vec<(f64, f64)> = rss
        .iter()
        .copied()
        .filter(|(m, _)| *m >= minutes / 2.0)
        .collect();
    println!(
        "\nchurn: {created_topics} topics created, {} deleted; {created_groups} groups created; transactions {:?}",
        deleted
            .lock()
            .unwrap()
            .iter()
            .filter(|(n, _)| n.contains("-t"))
            .count(),
        transactions.lock().unwrap()
    );
    println!(
        "RSS (MiB) by minute: {}",
        rss.iter()
            .filter(|(m, _)| (m.fract() * 60.0) < 5.0 || *m < 0.1)
            .map(|(m, r)| format!("{m:.0}:{r:.1}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "RSS slope over the second half: {:+.2} MiB/hour (whole run {:+.2} MiB/hour); max {:.1} MiB",
        slope_per_hour(&second_half),
        slope_per_hour(&rss),
        rss.iter().map(|r| r.1).fold(0.0, f64::max)
    );
    println!(
        "series left behind for deleted topics and groups: {} names over {scrapes} scrapes {:?}",
        left_behind.len(),
        left_behind
    );
    println!(
        "cycles: {}; median {:.3} s, max {:.3} s; longer than the {INTERVAL} interval: {over}",
        cycles.len(),
        sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN),
        sorted.last().copied().unwrap_or(f64::NAN)
    );
    let remembered = remembered.lock().unwrap().clone();
    let watch_points: Vec<(f64, f64)> = remembered.iter().map(|(m, n)| (*m, *n as f64)).collect();
    println!(
        "commit watch (group-partitions remembered) by minute: {}; max {}, slope over the second half {:+.1} entries/hour",
        remembered
            .iter()
            .filter(|(m, _)| m.fract() * 60.0 < 1.0)
            .map(|(m, n)| format!("{m:.0}:{n}"))
            .collect::<Vec<_>>()
            .join(" "),
        remembered.iter().map(|(_, n)| *n).max().unwrap_or(0),
        slope_per_hour(
            &watch_points
                .iter()
                .copied()
                .filter(|(m, _)| *m >= minutes / 2.0)
                .collect::<Vec<_>>()
        )
    );
    drop(proxies);
    println!("anomalies counted by the exporter:");
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("kafka_lso_exporter_anomalies_total"))
    {
        println!("  {line}");
    }
    println!("errors counted by the exporter:");
    for line in metrics
        .lines()
        .filter(|l| l.starts_with("kafka_lso_exporter_errors_total"))
    {
        println!("  {line}");
    }
    println!("warnings in the exporter's log, by kind:");
    for (kind, n) in warnings.lock().unwrap().iter() {
        println!("  {n:5} {kind}");
    }
    println!("the warnings (the first 40), by minute:");
    for (minute, message) in warning_log.lock().unwrap().iter().take(40) {
        println!("  {minute:5.1} {message}");
    }
}
