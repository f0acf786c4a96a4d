//! Java clients from the broker's own kafka-clients and kafka-streams artifacts, run by
//! the JDK's source launcher through `scripts/kafka-local tool`: a consumer group member of
//! either protocol (tests/java/GroupMember.java), a share group member
//! (tests/java/ShareMember.java), a Kafka Streams application of the streams protocol
//! (tests/java/StreamsApp.java), and Kafka's kafka-configs tool for group configs.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{bootstrap, repo_root};

/// The Java consumer of tests/java/GroupMember.java, run on the broker's classpath.
pub struct JavaMember {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl JavaMember {
    pub fn join(topic: &str, group: &str, protocol: &str) -> JavaMember {
        Self::start(topic, group, protocol, None)
    }

    /// The same with `client_id` as its client.id.
    pub fn join_as(topic: &str, group: &str, protocol: &str, client_id: &str) -> JavaMember {
        Self::start(topic, group, protocol, Some(client_id))
    }

    fn start(topic: &str, group: &str, protocol: &str, client_id: Option<&str>) -> JavaMember {
        // `scripts/kafka-local tool` execs the JVM: the child is the consumer itself.
        let mut child = Command::new(repo_root().join("scripts/kafka-local"))
            .args(["tool", "tests/java/GroupMember.java"])
            .args([&bootstrap(), topic, group, protocol])
            .args(client_id)
            .current_dir(repo_root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the Java consumer");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
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
    pub fn leave(mut self) {
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

    /// SIGKILL: it dies without leaving the group (no LeaveGroup, no last heartbeat);
    /// only the coordinator's session timeout removes it. Returns once it is dead.
    pub fn kill(mut self) {
        // The child must be the JVM itself: killing a shell that runs it would leave the
        // JVM running until its standard input closes, and it would then leave the group
        // as gracefully as `leave` does.
        let comm = std::fs::read_to_string(format!("/proc/{}/comm", self.child.id()))
            .expect("the Java consumer's process");
        assert_eq!(comm.trim(), "java", "the child to kill is not the JVM");
        self.child.kill().expect("SIGKILL the Java consumer");
        let status = self.child.wait().expect("wait for the Java consumer");
        assert!(
            status.code().is_none(),
            "the Java consumer exited by itself ({status}) instead of being killed"
        );
    }
}

impl Drop for JavaMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sets group configs with Kafka's own kafka-configs tool.
pub fn configure_group(group: &str, configs: &str) {
    let output = Command::new(repo_root().join("scripts/kafka-local"))
        .args(["tool", config_command()])
        .args(["--bootstrap-server", &bootstrap(), "--alter"])
        .args(["--entity-type", "groups", "--entity-name", group])
        .args(["--add-config", configs])
        .output()
        .expect("run kafka-configs");
    assert!(
        output.status.success(),
        "kafka-configs failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// kafka-configs' class: in the tools from Kafka 4.2, in the broker's Scala code before.
fn config_command() -> &'static str {
    if super::kafka_version() >= (4, 2) {
        "org.apache.kafka.tools.ConfigCommand"
    } else {
        "kafka.admin.ConfigCommand"
    }
}

/// tests/java/ShareMember.java: acknowledges the first `count` records it receives.
pub struct ShareMember {
    child: Child,
    _stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl ShareMember {
    pub fn start(topic: &str, group: &str, count: usize) -> ShareMember {
        let mut child = Command::new(repo_root().join("scripts/kafka-local"))
            .args(["tool", "tests/java/ShareMember.java"])
            .args([&bootstrap(), topic, group, &count.to_string()])
            .current_dir(repo_root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the share consumer");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        ShareMember {
            child,
            _stdin: stdin,
            lines,
        }
    }

    /// Waits until it has acknowledged `count` records.
    pub fn wait_acknowledged(&self, count: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let expected = format!("acknowledged {count}");
        loop {
            let line = self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .unwrap_or_else(|_| panic!("the share consumer never acknowledged {count}"));
            if line == expected {
                return;
            }
        }
    }
}

impl Drop for ShareMember {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One instance of tests/java/StreamsApp.java: a Kafka Streams application with
/// `group.protocol=streams` copying `input` to `output`, its streams group named
/// `application_id`.
pub struct StreamsApp {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl StreamsApp {
    pub fn start(input: &str, output: &str, application_id: &str) -> StreamsApp {
        let mut child = Command::new(repo_root().join("scripts/kafka-local"))
            .args(["tool", "tests/java/StreamsApp.java"])
            .args([&bootstrap(), input, output, application_id])
            .current_dir(repo_root())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the Kafka Streams application");
        let stdin = child.stdin.take();
        StreamsApp { child, stdin }
    }

    /// Closes its standard input: it leaves the group, closes and exits.
    pub fn stop(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        panic!("the Kafka Streams application did not stop within 60 s");
    }
}

impl Drop for StreamsApp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// tests/java/TransactionalProducer.java: a Java producer (transaction version 2 where
/// the broker has it), driven one command a line.
pub struct JavaProducer {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
}

impl JavaProducer {
    pub fn start(transactional_id: &str) -> JavaProducer {
        let mut child = Command::new(repo_root().join("scripts/kafka-local"))
            .args(["tool", "tests/java/TransactionalProducer.java"])
            .args([&bootstrap(), transactional_id])
            .current_dir(repo_root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the Java producer");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // The client logs to standard output too.
                let answer = line == "ready" || line == "ok" || line.starts_with("error ");
                if answer && tx.send(line).is_err() {
                    break;
                }
            }
        });
        JavaProducer {
            child,
            stdin,
            lines,
        }
    }

    fn next(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the Java producer answers within 60 s")
    }

    pub fn ready(&self) {
        assert_eq!(self.next(), "ready");
    }

    /// Runs `command`; returns "ok" or "error CLASS".
    pub fn run(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        self.next()
    }

    /// Runs `command`, which must answer "ok".
    pub fn must(&mut self, command: &str) {
        assert_eq!(self.run(command), "ok", "Java producer: {command}");
    }
}

impl Drop for JavaProducer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
