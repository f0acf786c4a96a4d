//! `kafka-lso-exporter drill` as operators run it, against a real broker: the transaction
//! it opens pins the last stable offset exactly at the offsets it prints, Kafka's own
//! `kafka-transactions.sh` sees the same, and every way the drill ends (hold over,
//! `--crash` with the coordinator's timeout, SIGTERM) leaves the partitions unpinned.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

const BINARY: &str = env!("CARGO_BIN_EXE_kafka-lso-exporter");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_pins_every_partition_at_the_printed_offset_then_aborts() {
    require_kafka();
    let topic = unique("drill-hold");
    let transactional_id = unique("drill-hold-t");
    create_topic(&topic, 3).await;
    // The exporter watches the topic: it must name the drill's transaction everywhere.
    let exporter = Exporter::start(&format!("^{topic}$"), "^$", &[]).await;
    exporter
        .wait_for("the exporter's first cycle", Duration::from_secs(20), |s| {
            s.value(
                "kafka_partition_open_transactions",
                &partition_labels(&topic, "2"),
            )
        })
        .await;
    // Long enough for Kafka's own tool (a JVM) to start and answer while the hold lasts,
    // on a machine that runs the other suites at once.
    let hold = Duration::from_secs(30);
    let hold_arg = format!("{}s", hold.as_secs());
    let started = Instant::now();
    let mut drill = Drill::spawn(&[
        "--topic",
        &topic,
        "--hold",
        &hold_arg,
        "--transactional-id",
        &transactional_id,
    ]);
    let offsets = drill.wait_until_open(&topic);
    assert_eq!(
        offsets.keys().copied().collect::<Vec<_>>(),
        [0, 1, 2],
        "{}",
        drill.stdout()
    );
    let opened = Instant::now();

    // Kafka's own tool names the drill's producer, with the printed offset as the start of
    // its open transaction. First, while the hold surely lasts (the JVM is the slow part).
    let producers = describe_producers(&topic, 0);
    assert!(
        producers
            .iter()
            .any(|row| row.get("CurrentTransactionStartOffset") == Some(&offsets[&0].to_string())),
        "no producer with CurrentTransactionStartOffset {} on {topic}/0 ({:?} after the drill \
         opened its transaction): {producers:?}",
        offsets[&0],
        opened.elapsed()
    );
    for (&partition, &offset) in &offsets {
        let lso = end_offset(&topic, partition, "read_committed");
        let hw = end_offset(&topic, partition, "read_uncommitted");
        assert!(
            lso < hw,
            "{topic}/{partition}: not pinned during the hold (LSO {lso}, HW {hw}, {:?} after \
             opening)",
            opened.elapsed()
        );
        assert_eq!(lso, offset, "{topic}/{partition}: LSO vs printed offset");
    }
    let named = exporter
        .wait_for(
            "the drill's transaction named on every partition",
            Duration::from_secs(5),
            |s| {
                let named: BTreeMap<i32, i64> = s
                    .series(
                        "kafka_transaction_open_info",
                        &[
                            ("topic", topic.as_str()),
                            ("transactional_id", transactional_id.as_str()),
                        ],
                    )
                    .map(|(labels, _)| {
                        (
                            labels["partition"].parse().unwrap(),
                            labels["start_offset"].parse().unwrap(),
                        )
                    })
                    .collect();
                (named.len() == 3).then_some(named)
            },
        )
        .await;
    assert_eq!(
        named, offsets,
        "the exporter's start offsets are the drill's"
    );
    assert!(
        opened.elapsed() < hold,
        "the checks took longer than the hold; they proved nothing"
    );

    let status = drill.wait(hold + Duration::from_secs(7), started);
    assert!(
        status.success(),
        "exit status {status:?}\n{}",
        drill.stdout()
    );
    assert!(
        drill.stdout().contains("Aborted the transaction"),
        "{}",
        drill.stdout()
    );
    for (&partition, &offset) in &offsets {
        // The record and the abort marker.
        wait_unpinned(&topic, partition, Duration::from_secs(10));
        assert_eq!(high_watermark(&topic, partition), offset + 2);
    }
    assert_eq!(
        read_committed_records(&topic, 3),
        0,
        "an aborted record was visible to read_committed"
    );
    exporter
        .wait_for(
            "the drill's transaction gone",
            Duration::from_secs(5),
            |s| {
                (s.series("kafka_transaction_open_info", &[("topic", topic.as_str())])
                    .count()
                    == 0)
                    .then_some(())
            },
        )
        .await;
    exporter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_leaves_the_transaction_to_the_coordinator_timeout() {
    require_kafka();
    let topic = unique("drill-crash");
    create_topic(&topic, 2).await;
    let started = Instant::now();
    let mut drill = Drill::spawn(&[
        "--topic",
        &topic,
        "--partitions",
        "1",
        "--crash",
        "--transaction-timeout",
        "5s",
    ]);
    let status = drill.wait(Duration::from_secs(15), started);
    let exited = Instant::now();
    assert!(
        status.success(),
        "exit status {status:?}\n{}",
        drill.stdout()
    );
    let offsets = drill.wait_until_open(&topic);
    assert_eq!(offsets.keys().copied().collect::<Vec<_>>(), [1]);
    assert!(
        drill
            .stdout()
            .contains("aborts it once its transaction timeout of 5s has passed"),
        "{}",
        drill.stdout()
    );

    // Right after the exit the transaction is still open: the drill did not end it.
    let lso = end_offset(&topic, 1, "read_committed");
    let hw = end_offset(&topic, 1, "read_uncommitted");
    assert!(
        lso == offsets[&1] && lso < hw,
        "{topic}/1 not pinned at {} right after --crash exited (LSO {lso}, HW {hw}, {:?} after \
         the exit)",
        offsets[&1],
        exited.elapsed()
    );
    // Partition 0 was not selected.
    assert_eq!(high_watermark(&topic, 0), 0);

    wait_unpinned(&topic, 1, Duration::from_secs(15));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_the_hold_aborts_at_once() {
    require_kafka();
    let topic = unique("drill-sigterm");
    create_topic(&topic, 1).await;
    let mut drill = Drill::spawn(&["--topic", &topic, "--hold", "10m"]);
    let offsets = drill.wait_until_open(&topic);
    let lso = end_offset(&topic, 0, "read_committed");
    assert_eq!(
        lso, offsets[&0],
        "{topic}/0 not pinned at the printed offset"
    );
    assert!(lso < high_watermark(&topic, 0));

    let terminated = Instant::now();
    drill.signal("TERM");
    let status = drill.wait(Duration::from_secs(5), terminated);
    assert!(
        status.success(),
        "exit status {status:?}\n{}",
        drill.stdout()
    );
    let stdout = drill.stdout();
    assert!(
        stdout.contains("SIGTERM received") && stdout.contains("Aborted the transaction"),
        "{stdout}"
    );
    wait_unpinned(&topic, 0, Duration::from_secs(10));
}

/// `--client` carries the security settings; the password is used, never printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drills_a_sasl_scram_cluster_without_printing_the_password() {
    require_kafka();
    let topic = unique("drill-sasl");
    create_topic(&topic, 1).await;
    let sasl = sasl_bootstrap();
    let started = Instant::now();
    let mut drill = Drill::spawn_at(
        &sasl,
        &[
            "--topic",
            &topic,
            "--hold",
            "3s",
            "--client",
            "security.protocol=SASL_PLAINTEXT",
            "--client",
            "sasl.mechanisms=SCRAM-SHA-512",
            "--client",
            "sasl.username=exporter",
            "--client",
            "sasl.password=exporter-secret",
        ],
    );
    let offsets = drill.wait_until_open(&topic);
    assert_eq!(end_offset(&topic, 0, "read_committed"), offsets[&0]);
    let status = drill.wait(Duration::from_secs(20), started);
    assert!(
        status.success(),
        "exit status {status:?}\n{}",
        drill.stdout()
    );
    let stdout = drill.stdout();
    assert!(
        stdout.contains("sasl.username=exporter sasl.password=(not shown)")
            && stdout.contains("--command-config CLIENT.properties")
            && stdout.contains("Aborted the transaction"),
        "{stdout}"
    );
    assert!(!stdout.contains("exporter-secret"), "{stdout}");
    wait_unpinned(&topic, 0, Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_exit_2_and_name_the_problem() {
    require_kafka();
    let topic = unique("drill-args");
    create_topic(&topic, 2).await;
    let missing = unique("drill-missing");
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["--hold", "1m"], vec!["--topic"]),
        (vec!["--topic", &missing], vec![&missing, "does not exist"]),
        (
            vec!["--topic", &topic, "--hold", "soon"],
            vec!["--hold", "soon"],
        ),
        (
            vec!["--topic", &topic, "--partitions", "0,5"],
            vec!["--partitions", "no partition 5"],
        ),
        (
            vec![
                "--topic",
                &topic,
                "--hold",
                "1m",
                "--transaction-timeout",
                "30s",
            ],
            vec!["--transaction-timeout", "longer than --hold"],
        ),
        (
            vec!["--topic", &topic, "--client", "transactional.id=x"],
            vec!["--transactional-id"],
        ),
        (
            vec![
                "--topic",
                &topic,
                "--client",
                "sasl.password=hunter2-secret",
                "--client",
                "security.protocol=bogus",
            ],
            vec!["security.protocol", "bogus"],
        ),
    ];
    for (args, expected) in cases {
        let output = drill_output(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        for word in expected {
            assert!(stderr.contains(word), "{args:?}: no {word:?} in {stderr}");
        }
        assert!(
            !stderr.contains("hunter2") && !stdout.contains("hunter2"),
            "{args:?} printed a secret:\n{stdout}\n{stderr}"
        );
        // Nothing was written: the topic stays empty.
        assert_eq!(high_watermark(&topic, 0), 0, "{args:?} wrote to {topic}");
    }

    // The exporter's own flags do not mix with the subcommand.
    let output = Command::new(BINARY)
        .args([
            "--web.listen-address",
            "127.0.0.1:0",
            "drill",
            "--topic",
            &topic,
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--web.listen-address"));
}

#[test]
fn help_lists_the_drill_and_explains_every_flag() {
    let top = Command::new(BINARY).arg("--help").output().unwrap();
    assert!(top.status.success());
    let top = String::from_utf8_lossy(&top.stdout);
    assert!(
        top.contains("drill") && top.contains("--bootstrap-servers"),
        "{top}"
    );
    let help = Command::new(BINARY)
        .args(["drill", "--help"])
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--bootstrap-servers",
        "--topic",
        "--hold",
        "--partitions",
        "--transactional-id",
        "--transaction-timeout",
        "--crash",
        "--client",
    ] {
        assert!(help.contains(flag), "drill --help lacks {flag}:\n{help}");
    }
}

/// A running drill, its stdout read line by line as it is printed. Dropping it ends the
/// process with SIGTERM (the drill aborts), or SIGKILL if that does not work.
struct Drill {
    bootstrap: String,
    child: Child,
    lines: mpsc::Receiver<String>,
    stdout: Vec<String>,
}

impl Drill {
    fn spawn(args: &[&str]) -> Drill {
        Drill::spawn_at(&bootstrap(), args)
    }

    fn spawn_at(bootstrap: &str, args: &[&str]) -> Drill {
        let mut child = Command::new(BINARY)
            .arg("drill")
            .args(["--bootstrap-servers", bootstrap])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the drill");
        let stdout = child.stdout.take().expect("stdout");
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Drill {
            bootstrap: bootstrap.to_string(),
            child,
            lines,
            stdout: Vec::new(),
        }
    }

    fn stdout(&self) -> String {
        self.stdout.join("\n")
    }

    /// Reads stdout until the drill reports the open transaction (the hold starts, or
    /// --crash exits), and returns the offset it printed for each partition, taken from
    /// its `kafka-transactions.sh ... abort` commands.
    fn wait_until_open(&mut self, topic: &str) -> BTreeMap<i32, i64> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self
            .stdout
            .iter()
            .any(|l| l.starts_with("Holding the transaction open") || l.starts_with("--crash:"))
        {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.stdout.push(line),
                Err(e) => panic!(
                    "the drill never reported an open transaction ({e}):\n{}",
                    self.stdout()
                ),
            }
        }
        let prefix = format!(
            "kafka-transactions.sh --bootstrap-server {}{} abort --topic {topic} --partition ",
            self.bootstrap,
            if self.stdout().contains("client properties") {
                " --command-config CLIENT.properties"
            } else {
                ""
            }
        );
        self.stdout
            .iter()
            .filter_map(|line| line.trim().strip_prefix(&prefix))
            .map(|rest| {
                let (partition, offset) = rest
                    .split_once(" --start-offset ")
                    .unwrap_or_else(|| panic!("bad abort command: {rest}"));
                (partition.parse().unwrap(), offset.parse().unwrap())
            })
            .collect()
    }

    /// Waits for the exit, at most `timeout` after `since`, and collects the rest of stdout.
    fn wait(&mut self, timeout: Duration, since: Instant) -> ExitStatus {
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                since.elapsed() < timeout,
                "the drill did not exit within {timeout:?}:\n{}",
                self.stdout()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        // The reader thread ends at EOF, which follows the exit.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.stdout.push(line);
        }
        status
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name}");
    }
}

impl Drop for Drill {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        self.signal("TERM");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a drill that is expected to stop before opening a transaction.
fn drill_output(args: &[&str]) -> Output {
    Command::new(BINARY)
        .arg("drill")
        .args(["--bootstrap-servers", &bootstrap()])
        .args(args)
        .output()
        .expect("run the drill")
}

/// The end offset a consumer of `isolation` sees: the LSO for read_committed, the HW for
/// read_uncommitted.
fn end_offset(topic: &str, partition: i32, isolation: &str) -> i64 {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("isolation.level", isolation)
        .create()
        .expect("consumer");
    consumer
        .fetch_watermarks(topic, partition, Duration::from_secs(10))
        .expect("watermarks")
        .1
}

/// Waits until the partition's LSO equals its HW again.
fn wait_unpinned(topic: &str, partition: i32, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let lso = end_offset(topic, partition, "read_committed");
        let hw = end_offset(topic, partition, "read_uncommitted");
        if lso == hw {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{topic}/{partition} still pinned after {timeout:?}: LSO {lso}, HW {hw}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// How many records a read_committed consumer reads from the whole topic.
fn read_committed_records(topic: &str, partitions: i32) -> usize {
    read_to_end(&unique("drill-reader"), topic, partitions, "read_committed").1
}
