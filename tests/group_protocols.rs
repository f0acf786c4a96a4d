//! Consumer groups of the new protocol (KIP-848, `group.protocol=consumer`) beside a
//! classic group, against a real broker: one live member through librdkafka and one Java
//! consumer from kafka-clients. Their type, state in the protocol's own names, live
//! members and lag are right, and they fall back to Empty with 0 members when both leave.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

fn anchored(name: &str) -> String {
    format!("^{}$", name.replace('.', "\\."))
}

/// A librdkafka member polling in its own thread until dropped (then it leaves).
struct RdkafkaMember {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RdkafkaMember {
    fn join(topic: &str, group: &str, protocol: &str) -> RdkafkaMember {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bootstrap())
            .set("group.id", group)
            .set("group.protocol", protocol)
            .set("auto.offset.reset", "earliest")
            .set("auto.commit.interval.ms", "200")
            .create()
            .expect("consumer");
        consumer.subscribe(&[topic]).expect("subscribe");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                if let Some(Err(e)) = consumer.poll(Duration::from_millis(100)) {
                    eprintln!("librdkafka member: {e}");
                }
            }
            consumer.unsubscribe();
            // Dropping the consumer closes it: it leaves the group.
        });
        RdkafkaMember {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for RdkafkaMember {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The Java consumer of tests/java/GroupMember.java, run on the broker's classpath.
struct JavaMember {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl JavaMember {
    fn join(topic: &str, group: &str, protocol: &str) -> JavaMember {
        let mut child = Command::new(repo_root().join("scripts/kafka-local"))
            .args(["tool", "tests/java/GroupMember.java"])
            .args([&bootstrap(), topic, group, protocol])
            .current_dir(repo_root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the Java consumer");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // The client logs to standard output too: wait for the line the program prints.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("the Java consumer never got an assignment");
            if line.starts_with("assigned") {
                break;
            }
        }
        JavaMember { child, stdin }
    }

    /// Closes its standard input: it leaves the group and exits.
    fn leave(mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = stdin.flush();
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        panic!("the Java consumer did not leave within 30 s");
    }
}

impl Drop for JavaMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kip_848_groups_beside_a_classic_group() {
    require_kafka();
    let topic = unique("kip848");
    let modern = unique("kip848-consumer-protocol");
    let classic = unique("kip848-classic");
    create_topic(&topic, 2).await;
    let producer = plain_producer();
    send(&producer, &topic, 0, 10);
    send(&producer, &topic, 1, 10);

    let java = JavaMember::join(&topic, &modern, "consumer");
    let rdkafka = RdkafkaMember::join(&topic, &modern, "consumer");
    let classic_member = RdkafkaMember::join(&topic, &classic, "classic");

    let groups = format!("{}|{}", anchored(&modern), anchored(&classic));
    let exporter = Exporter::start(&anchored(&topic), &groups, &[]).await;
    fn group(name: &str) -> [(&str, &str); 2] {
        [("cluster", "test"), ("group", name)]
    }
    fn state<'a>(name: &'a str, group: &'a str) -> [(&'a str, &'a str); 3] {
        [("cluster", "test"), ("group", group), ("state", name)]
    }
    let modern_name = modern.as_str();
    let classic_name = classic.as_str();
    exporter
        .wait_for(
            "the KIP-848 group Stable with 2 members, its lag 0",
            Duration::from_secs(60),
            |s| {
                let stable = s.value("kafka_consumergroup_state", &state("Stable", modern_name))?;
                let members = s.value("kafka_consumergroup_members", &group(modern_name))?;
                let lag: f64 = ["0", "1"]
                    .iter()
                    .map(|p| {
                        s.value(
                            "kafka_consumergroup_hw_lag",
                            &group_labels(modern_name, &topic, p),
                        )
                    })
                    .sum::<Option<f64>>()?;
                (stable == 1.0 && members == 2.0 && lag == 0.0).then_some(())
            },
        )
        .await;
    let s = exporter.scrape().await;
    assert_eq!(
        s.value(
            "kafka_consumergroup_info",
            &[
                ("cluster", "test"),
                ("group", modern_name),
                ("type", "consumer"),
                ("protocol", "consumer"),
            ]
        ),
        Some(1.0)
    );
    // The consumer protocol's own states; none of the classic ones.
    for name in ["Empty", "Assigning", "Reconciling", "Dead"] {
        assert_eq!(
            s.value("kafka_consumergroup_state", &state(name, modern_name)),
            Some(0.0),
            "{name}"
        );
    }
    assert_eq!(
        s.value(
            "kafka_consumergroup_state",
            &state("PreparingRebalance", modern_name)
        ),
        None
    );
    // The classic group beside it.
    exporter
        .wait_for(
            "the classic group Stable with 1 member",
            Duration::from_secs(30),
            |s| {
                (s.value("kafka_consumergroup_state", &state("Stable", classic_name))? == 1.0
                    && s.value("kafka_consumergroup_members", &group(classic_name))? == 1.0)
                    .then_some(())
            },
        )
        .await;
    let s = exporter.scrape().await;
    assert_eq!(
        s.value(
            "kafka_consumergroup_info",
            &[
                ("cluster", "test"),
                ("group", classic_name),
                ("type", "classic"),
                ("protocol", "consumer"),
            ]
        ),
        Some(1.0)
    );

    // Both members of the KIP-848 group leave: Empty, no members.
    drop(rdkafka);
    java.leave();
    exporter
        .wait_for(
            "the KIP-848 group Empty with 0 members",
            Duration::from_secs(30),
            |s| {
                (s.value("kafka_consumergroup_state", &state("Empty", modern_name))? == 1.0
                    && s.value("kafka_consumergroup_members", &group(modern_name))? == 0.0)
                    .then_some(())
            },
        )
        .await;
    drop(classic_member);
    exporter.stop().await;
}
