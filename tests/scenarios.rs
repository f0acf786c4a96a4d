//! The transactional scenarios of the core issue, against a real Apache Kafka broker.
//! Offsets are exact: every write waits until the previous transaction marker landed.

mod common;

use std::time::{Duration, Instant};

use common::*;
use rdkafka::producer::Producer;

const CYCLE: Duration = Duration::from_secs(1);

fn anchored(name: &str) -> String {
    format!("^{}$", regex_escape(name))
}

fn regex_escape(name: &str) -> String {
    name.chars()
        .flat_map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                vec![c]
            } else {
                vec!['\\', c]
            }
        })
        .collect()
}

/// S1: the worked example. 880 plain records; T1 opens at 880; 4 plain; T2 writes 5 and
/// commits (marker 890); 9 plain. HW 900, LSO 880. Then T1 commits: HW 901 = LSO.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s1_worked_example() {
    require_kafka();
    let topic = unique("s1");
    let group = unique("s1-committed");
    create_topic(&topic, 1).await;
    let plain = plain_producer();

    send(&plain, &topic, 0, 880);
    wait_high_watermark(&topic, 0, 880);
    let t1 = transactional_producer(&unique("s1-t1"));
    t1.begin_transaction().unwrap();
    send(&t1, &topic, 0, 1);
    wait_high_watermark(&topic, 0, 881);
    send(&plain, &topic, 0, 4);
    wait_high_watermark(&topic, 0, 885);
    let t2 = transactional_producer(&unique("s1-t2"));
    t2.begin_transaction().unwrap();
    send(&t2, &topic, 0, 5);
    t2.commit_transaction(Duration::from_secs(30)).unwrap();
    wait_high_watermark(&topic, 0, 891);
    send(&plain, &topic, 0, 9);
    wait_high_watermark(&topic, 0, 900);

    let committed = consume_all_and_commit(&group, &topic, 1, "read_committed");
    assert_eq!(
        committed,
        vec![880],
        "a read_committed consumer stops at the LSO"
    );

    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;
    let p = partition_labels(&topic, "0");
    let g = group_labels(&group, &topic, "0");
    exporter
        .wait_for(
            "HW 900 and the group's offsets",
            Duration::from_secs(15),
            |s| {
                (s.value("kafka_partition_high_watermark", &p) == Some(900.0)
                    && s.value("kafka_consumergroup_hw_lag", &g).is_some())
                .then_some(())
            },
        )
        .await;
    let s = exporter.scrape().await;
    assert_eq!(s.value("kafka_partition_high_watermark", &p), Some(900.0));
    assert_eq!(
        s.value("kafka_partition_last_stable_offset", &p),
        Some(880.0)
    );
    assert_eq!(s.value("kafka_partition_hw_minus_lso", &p), Some(20.0));
    assert_eq!(s.value("kafka_partition_log_start_offset", &p), Some(0.0));
    assert_eq!(
        s.value("kafka_consumergroup_committed_offset", &g),
        Some(880.0)
    );
    assert_eq!(s.value("kafka_consumergroup_lso_lag", &g), Some(0.0));
    // 20 offsets, but T2's commit marker at 890 is no record a consumer receives.
    assert_eq!(s.value("kafka_consumergroup_hw_lag", &g), Some(19.0));
    assert_eq!(
        s.value("kafka_consumergroup_committed_beyond_lso", &g),
        Some(0.0)
    );
    assert_eq!(
        s.value("kafka_lso_exporter_up", &[("kafka_cluster", "test")]),
        Some(1.0)
    );

    t1.commit_transaction(Duration::from_secs(30)).unwrap();
    wait_high_watermark(&topic, 0, 901);
    let released = Instant::now();
    exporter
        .wait_for("LSO 901 after T1 commits", CYCLE * 3, |s| {
            (s.value("kafka_partition_last_stable_offset", &p) == Some(901.0)).then_some(())
        })
        .await;
    assert!(released.elapsed() <= CYCLE * 3);
    let s = exporter.scrape().await;
    assert_eq!(s.value("kafka_partition_high_watermark", &p), Some(901.0));
    assert_eq!(s.value("kafka_partition_hw_minus_lso", &p), Some(0.0));
    assert_eq!(s.value("kafka_partition_lso_stuck_seconds", &p), Some(0.0));
    assert_eq!(
        s.value("kafka_consumergroup_lso_lag", &g),
        Some(19.0),
        "the whole backlog became visible at once (21 offsets less two commit markers)"
    );
    assert_eq!(s.value("kafka_consumergroup_hw_lag", &g), Some(19.0));
    exporter.stop().await;
}

/// S2: an aborted transaction. Both records and the abort marker take offsets, HW == LSO
/// afterwards, and a read_committed consumer that read everything shows no lag.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s2_abort() {
    require_kafka();
    let topic = unique("s2");
    let group = unique("s2-committed");
    create_topic(&topic, 1).await;
    let t = transactional_producer(&unique("s2-t"));
    t.begin_transaction().unwrap();
    send(&t, &topic, 0, 2);
    t.abort_transaction(Duration::from_secs(30)).unwrap();
    wait_high_watermark(&topic, 0, 3);
    let committed = consume_all_and_commit(&group, &topic, 1, "read_committed");
    assert_eq!(
        committed,
        vec![3],
        "the consumer's position passes the aborted records and the marker"
    );

    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;
    let p = partition_labels(&topic, "0");
    let g = group_labels(&group, &topic, "0");
    exporter
        .wait_for("the group's lag", Duration::from_secs(15), |s| {
            s.value("kafka_consumergroup_lso_lag", &g).map(|_| ())
        })
        .await;
    let s = exporter.scrape().await;
    assert_eq!(s.value("kafka_partition_high_watermark", &p), Some(3.0));
    assert_eq!(s.value("kafka_partition_last_stable_offset", &p), Some(3.0));
    assert_eq!(s.value("kafka_partition_hw_minus_lso", &p), Some(0.0));
    assert_eq!(s.value("kafka_consumergroup_hw_lag", &g), Some(0.0));
    assert_eq!(s.value("kafka_consumergroup_lso_lag", &g), Some(0.0));
    exporter.stop().await;
}

/// S3 and S4: one open transaction enrolled in one partition of 24 pins only that
/// partition; its stuck clock grows with elapsed time and returns to 0 after the commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s3_s4_per_partition_and_stuck_clock() {
    require_kafka();
    let topic = unique("s3");
    create_topic(&topic, 24).await;
    let plain = plain_producer();
    for partition in 0..24 {
        send(&plain, &topic, partition, 3);
    }
    let t = transactional_producer(&unique("s3-t"));
    t.begin_transaction().unwrap();
    send(&t, &topic, 7, 2);
    send(&plain, &topic, 7, 5);
    wait_high_watermark(&topic, 7, 10);

    let exporter = Exporter::start(&anchored(&topic), "^$", &[]).await;
    let pinned = partition_labels(&topic, "7");
    let first = exporter
        .wait_for(
            "partition 7 pinned with a running clock",
            Duration::from_secs(15),
            |s| {
                let stuck = s.value("kafka_partition_lso_stuck_seconds", &pinned)?;
                (stuck > 0.0).then_some((Instant::now(), stuck))
            },
        )
        .await;
    let s = exporter.scrape().await;
    assert_eq!(
        s.value("kafka_partition_last_stable_offset", &pinned),
        Some(3.0)
    );
    assert_eq!(
        s.value("kafka_partition_high_watermark", &pinned),
        Some(10.0)
    );
    assert_eq!(s.value("kafka_partition_hw_minus_lso", &pinned), Some(7.0));
    for partition in (0..24).filter(|p| *p != 7) {
        let partition = partition.to_string();
        let labels = partition_labels(&topic, &partition);
        assert_eq!(
            s.value("kafka_partition_hw_minus_lso", &labels),
            Some(0.0),
            "partition {partition}"
        );
        assert_eq!(
            s.value("kafka_partition_lso_stuck_seconds", &labels),
            Some(0.0),
            "partition {partition}"
        );
        assert_eq!(
            s.value("kafka_partition_last_stable_offset", &labels),
            Some(3.0),
            "partition {partition}"
        );
    }

    tokio::time::sleep(Duration::from_secs(4)).await;
    let s = exporter.scrape().await;
    let second = s
        .value("kafka_partition_lso_stuck_seconds", &pinned)
        .unwrap();
    let elapsed = first.0.elapsed().as_secs_f64();
    let grown = second - first.1;
    assert!(
        (grown - elapsed).abs() <= 1.5,
        "stuck clock grew by {grown:.2}s over {elapsed:.2}s of wall time"
    );

    t.commit_transaction(Duration::from_secs(30)).unwrap();
    wait_high_watermark(&topic, 7, 11);
    exporter
        .wait_for("stuck clock back to 0 within a cycle", CYCLE * 3, |s| {
            (s.value("kafka_partition_lso_stuck_seconds", &pinned) == Some(0.0)
                && s.value("kafka_partition_hw_minus_lso", &pinned) == Some(0.0))
            .then_some(())
        })
        .await;
    exporter.stop().await;
}

/// S5: mixed isolation on one topic. The read_uncommitted group commits past the LSO;
/// the read_committed group stops at it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s5_mixed_isolation() {
    require_kafka();
    let topic = unique("s5");
    let group_a = unique("s5-a-uncommitted");
    let group_b = unique("s5-b-committed");
    create_topic(&topic, 1).await;
    let plain = plain_producer();
    send(&plain, &topic, 0, 10);
    let t = transactional_producer(&unique("s5-t"));
    t.begin_transaction().unwrap();
    send(&t, &topic, 0, 5);
    send(&plain, &topic, 0, 5);
    wait_high_watermark(&topic, 0, 20);

    assert_eq!(
        consume_all_and_commit(&group_a, &topic, 1, "read_uncommitted"),
        vec![20]
    );
    assert_eq!(
        consume_all_and_commit(&group_b, &topic, 1, "read_committed"),
        vec![10]
    );

    let groups = format!("{}|{}", anchored(&group_a), anchored(&group_b));
    let exporter = Exporter::start(&anchored(&topic), &groups, &[]).await;
    let a = group_labels(&group_a, &topic, "0");
    let b = group_labels(&group_b, &topic, "0");
    exporter
        .wait_for("both groups", Duration::from_secs(15), |s| {
            (s.value("kafka_consumergroup_committed_beyond_lso", &a)
                .is_some()
                && s.value("kafka_consumergroup_committed_beyond_lso", &b)
                    .is_some())
            .then_some(())
        })
        .await;
    let s = exporter.scrape().await;
    assert_eq!(
        s.value("kafka_consumergroup_committed_beyond_lso", &a),
        Some(10.0)
    );
    assert_eq!(s.value("kafka_consumergroup_lso_lag", &a), Some(0.0));
    assert_eq!(s.value("kafka_consumergroup_hw_lag", &a), Some(0.0));
    assert_eq!(
        s.value("kafka_consumergroup_committed_beyond_lso", &b),
        Some(0.0)
    );
    assert_eq!(s.value("kafka_consumergroup_lso_lag", &b), Some(0.0));
    assert_eq!(s.value("kafka_consumergroup_hw_lag", &b), Some(10.0));
    // Both groups have no members and report the Empty state.
    for group in [&group_a, &group_b] {
        let labels = [("kafka_cluster", "test"), ("group", group.as_str())];
        assert_eq!(s.value("kafka_consumergroup_members", &labels), Some(0.0));
        let state = [
            ("kafka_cluster", "test"),
            ("group", group.as_str()),
            ("state", "Empty"),
        ];
        assert_eq!(s.value("kafka_consumergroup_state", &state), Some(1.0));
    }
    t.abort_transaction(Duration::from_secs(30)).unwrap();
    exporter.stop().await;
}

/// S6: a transactional producer with transaction.timeout.ms = 5000 dies (SIGKILL) with
/// its transaction open; the broker aborts it and the exporter shows the LSO released.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s6_timeout_abort() {
    require_kafka();
    let topic = unique("s6");
    create_topic(&topic, 1).await;
    let exporter = Exporter::start(&anchored(&topic), "^$", &[]).await;
    let p = partition_labels(&topic, "0");

    // Kafka's own producer benchmark, from the kafka-tools artifact, as the child process:
    // one long transaction, records trickling in.
    let mut child = std::process::Command::new(repo_root().join("scripts/kafka-local"))
        .args([
            "tool",
            "org.apache.kafka.tools.ProducerPerformance",
            "--topic",
            &topic,
            "--num-records",
            "100000",
            "--throughput",
            "20",
            "--record-size",
            "64",
            "--transactional-id",
            &unique("s6-t"),
            "--transaction-duration-ms",
            "600000",
            "--producer-props",
            &format!("bootstrap.servers={}", bootstrap()),
            "transaction.timeout.ms=5000",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start the transactional producer");
    exporter
        .wait_for(
            "an open transaction pinning the LSO",
            Duration::from_secs(30),
            |s| (s.value("kafka_partition_hw_minus_lso", &p)? > 0.0).then_some(()),
        )
        .await;
    // Kill the whole process group: the launcher script and the JVM.
    unsafe_kill_group(child.id());
    let _ = child.wait();
    let killed = Instant::now();
    let withheld = exporter
        .scrape()
        .await
        .value("kafka_partition_hw_minus_lso", &p)
        .unwrap();
    assert!(withheld > 0.0);

    exporter
        .wait_for(
            "the LSO released after the broker aborts",
            Duration::from_secs(5) + CYCLE * 10,
            |s| {
                (s.value("kafka_partition_hw_minus_lso", &p) == Some(0.0)
                    && s.value("kafka_partition_lso_stuck_seconds", &p) == Some(0.0))
                .then_some(())
            },
        )
        .await;
    eprintln!(
        "LSO released {:.1}s after the producer died",
        killed.elapsed().as_secs_f64()
    );
    exporter.stop().await;
}

fn unsafe_kill_group(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -KILL failed");
}

use std::os::unix::process::CommandExt as _;

/// S7: a deleted topic's and a deleted group's series are gone within one cycle.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s7_churn() {
    require_kafka();
    let topic = unique("s7");
    let group = unique("s7-g");
    create_topic(&topic, 2).await;
    let plain = plain_producer();
    send(&plain, &topic, 0, 5);
    send(&plain, &topic, 1, 5);
    consume_all_and_commit(&group, &topic, 2, "read_uncommitted");

    let exporter = Exporter::start(&anchored(&topic), &anchored(&group), &[]).await;
    let g = group_labels(&group, &topic, "1");
    exporter
        .wait_for("the group and topic series", Duration::from_secs(15), |s| {
            s.value("kafka_consumergroup_committed_offset", &g)
                .map(|_| ())
        })
        .await;

    let admin = admin();
    let opts = rdkafka::admin::AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
    for r in admin.delete_groups(&[&group], &opts).await.unwrap() {
        r.unwrap_or_else(|(g, e)| panic!("deleting group {g}: {e}"));
    }
    let deleted = Instant::now();
    let group_only = [("kafka_cluster", "test"), ("group", group.as_str())];
    exporter
        .wait_for("the deleted group's series gone", CYCLE * 3, |s| {
            (s.series("kafka_consumergroup_committed_offset", &group_only)
                .count()
                == 0
                && s.series("kafka_consumergroup_members", &group_only).count() == 0
                && s.series("kafka_consumergroup_state", &group_only).count() == 0)
                .then_some(())
        })
        .await;
    assert!(deleted.elapsed() <= CYCLE * 3);

    for r in admin.delete_topics(&[&topic], &opts).await.unwrap() {
        r.unwrap_or_else(|(t, e)| panic!("deleting topic {t}: {e}"));
    }
    let topic_only = [("kafka_cluster", "test"), ("topic", topic.as_str())];
    exporter
        .wait_for("the deleted topic's series gone", CYCLE * 3, |s| {
            (s.series("kafka_partition_high_watermark", &topic_only)
                .count()
                == 0
                && s.series("kafka_partition_last_stable_offset", &topic_only)
                    .count()
                    == 0)
                .then_some(())
        })
        .await;
    let s = exporter.scrape().await;
    assert_eq!(
        s.value("kafka_lso_exporter_up", &[("kafka_cluster", "test")]),
        Some(1.0)
    );
    exporter.stop().await;
}

/// Group ids may be any string: quotes, backslashes, newlines, markup and non-ASCII are
/// exported with correct escaping (promtool accepts the live output, and the values parse
/// back to the original names).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_group_names() {
    require_kafka();
    let topic = unique("hostile");
    create_topic(&topic, 1).await;
    send(&plain_producer(), &topic, 0, 4);
    let suffix = unique("");
    let names = [
        format!("quote\"d{suffix}"),
        format!("back\\slash\\{suffix}"),
        format!("new\nline{suffix}"),
        format!("<script>alert('x')</script>{suffix}"),
        format!("ünïcødé-グループ{suffix}"),
    ];
    for name in &names {
        consume_all_and_commit(name, &topic, 1, "read_uncommitted");
    }
    let exporter = Exporter::start(&anchored(&topic), &regex_escape(&suffix), &[]).await;
    let s = exporter
        .wait_for("every hostile group", Duration::from_secs(15), |s| {
            let found = names
                .iter()
                .filter(|name| {
                    s.value(
                        "kafka_consumergroup_committed_offset",
                        &group_labels(name, &topic, "0"),
                    ) == Some(4.0)
                })
                .count();
            (found == names.len()).then_some(s.text.clone())
        })
        .await;

    let mut promtool = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus)");
    std::io::Write::write_all(&mut promtool.stdin.take().unwrap(), s.as_bytes()).unwrap();
    let output = promtool.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "promtool check metrics rejects the live output: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(s.contains("new\\nline"), "newline escaped as \\n");
    assert!(s.contains("quote\\\"d"), "quote escaped");
    assert!(s.contains("back\\\\slash\\\\"), "backslash escaped");

    // An open transaction makes every one of them a blocked group: listed, escaped, on `/`
    // and, exact, in /api/v1/stuck.
    let held = transactional_producer(&unique("hostile-t"));
    held.begin_transaction().unwrap();
    send(&held, &topic, 0, 1);
    let json = wait_for_scrape(
        "the hostile groups listed as blocked",
        Duration::from_secs(15),
        Duration::from_millis(200),
        || async {
            let (_, body) = exporter.get("/api/v1/stuck").await;
            Scrape {
                text: body,
                samples: Vec::new(),
            }
        },
        |s| {
            let json: serde_json::Value = serde_json::from_str(&s.text).ok()?;
            let entry = json["partitions"]
                .as_array()?
                .iter()
                .find(|p| p["topic"] == topic.as_str())?
                .clone();
            (entry["blocked_groups"].as_array()?.len() == names.len()).then_some(entry)
        },
    )
    .await;
    let mut blocked: Vec<&str> = json["blocked_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_str().unwrap())
        .collect();
    blocked.sort();
    let mut expected: Vec<&str> = names.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(blocked, expected);
    let (_, page) = exporter.get("/").await;
    assert!(!page.contains("<script>alert"), "unescaped group name on /");
    assert!(page.contains(&format!(
        "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;{suffix}"
    )));
    assert!(page.contains(&format!("quote&quot;d{suffix}")));
    assert!(page.contains(&format!("ünïcødé-グループ{suffix}")));
    held.abort_transaction(Duration::from_secs(30)).unwrap();
    exporter.stop().await;
}

/// The brokers' clock against the exporter's: the broker runs on this host, so the skew
/// it measures is no more than the measurement's own uncertainty plus a few milliseconds
/// of scheduling, and the uncertainty is a loopback round trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_brokers_clock_is_measured() {
    require_kafka();
    let topic = unique("clock");
    create_topic(&topic, 1).await;
    let exporter = Exporter::start(&anchored(&topic), "^$", &[]).await;
    let cluster = [("kafka_cluster", "test")];
    let (skew, uncertainty) = exporter
        .wait_for("the clock skew", Duration::from_secs(15), |s| {
            Some((
                s.value("kafka_lso_exporter_clock_skew_seconds", &cluster)?,
                s.value(
                    "kafka_lso_exporter_clock_skew_uncertainty_seconds",
                    &cluster,
                )?,
            ))
        })
        .await;
    assert!(
        uncertainty < 0.5,
        "a loopback round trip of {uncertainty} s"
    );
    assert!(
        skew.abs() <= uncertainty + 0.1,
        "the same host's clock read {skew} s off (uncertainty {uncertainty} s)"
    );
    exporter.stop().await;
}
