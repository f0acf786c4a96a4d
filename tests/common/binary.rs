//! The exporter binary as a child process, as users run it: flags, environment, its
//! standard error in a file the tests can read. Killed when dropped, so a failing test
//! leaves no process behind.
#![allow(dead_code)]

use std::fs::File;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{free_port, repo_root, unique, Scrape};

pub struct Binary {
    /// Behind a lock so that every method can ask whether it still runs.
    child: Mutex<Child>,
    port: u16,
    log: PathBuf,
    client: reqwest::Client,
}

impl Binary {
    /// The binary at `--log.level debug` (logfmt) with an empty config file, a 1 s
    /// interval and the `KAFKA_LSO_EXPORTER_*` settings of `env`.
    pub fn start_debug(env: &[(String, String)]) -> Binary {
        Binary::start_logging(env, "debug")
    }

    /// [`Binary::start_debug`] at log level (or filter) `level`.
    pub fn start_logging(env: &[(String, String)], level: &str) -> Binary {
        let config = repo_root().join("tests/empty.toml");
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        Binary::start(
            &[
                "--config",
                config.to_str().unwrap(),
                "--interval",
                "1s",
                "--log.level",
                level,
                "--log.format",
                "logfmt",
            ],
            &env,
        )
    }

    /// Starts the binary with `args` plus `--web.listen-address` on a free loopback port,
    /// and `env`.
    /// No `RUST_LOG` and no `KAFKA_LSO_EXPORTER_*` variable of the test's own environment
    /// reaches it.
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> Binary {
        let port = free_port();
        let log = std::env::temp_dir().join(format!("{}.log", unique("exporter")));
        let mut command = Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"));
        command
            .args(args)
            .args(["--web.listen-address", &format!("127.0.0.1:{port}")])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("log file"));
        for (key, _) in std::env::vars() {
            if key.starts_with("KAFKA_LSO_EXPORTER_") {
                command.env_remove(key);
            }
        }
        // `partition` granularity unless the test sets one (see
        // `per_partition_unless_set`); the first cluster may come from the flags.
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let from_flags = args.contains(&"--bootstrap-servers");
        command.envs(super::per_partition_unless_set(env, from_flags));
        let child = command.spawn().expect("start the exporter binary");
        Binary {
            child: Mutex::new(child),
            port,
            log,
            client: reqwest::Client::new(),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.child().id()
    }

    fn child(&self) -> std::sync::MutexGuard<'_, Child> {
        self.child.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The exit status, once it has exited.
    fn exited(&self) -> Option<ExitStatus> {
        self.child().try_wait().unwrap()
    }

    /// One plain-HTTP GET; `None` when nothing answers.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        let response = self
            .client
            .get(format!("http://127.0.0.1:{}{path}", self.port))
            .send()
            .await
            .ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().await.ok()?))
    }

    /// One `/metrics`, or `None` when it does not answer 200 within `within` (a process
    /// frozen with SIGSTOP accepts the connection and never answers).
    pub async fn scrape_within(&self, within: Duration) -> Option<Scrape> {
        match tokio::time::timeout(within, self.get("/metrics")).await {
            Ok(Some((200, body))) => Some(Scrape::parse(&body)),
            _ => None,
        }
    }

    /// `/metrics`, asked again until it answers 200; fails with the log when the process
    /// exited or nothing answered within 10 s.
    pub async fn scrape(&self) -> Scrape {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answer = self.get("/metrics").await;
            if let Some((200, body)) = answer {
                return Scrape::parse(&body);
            }
            let log = self.log();
            let tail: String = {
                let last: Vec<char> = log.chars().rev().take(2000).collect();
                last.into_iter().rev().collect()
            };
            if let Some(status) = self.exited() {
                panic!("the exporter exited ({status}); its log ends:\n{tail}");
            }
            assert!(
                Instant::now() < deadline,
                "the exporter does not answer /metrics ({answer:?}); its log ends:\n{tail}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Scrapes until `check` returns Some; fails after `timeout` with the last scrape.
    pub async fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        check: impl Fn(&Scrape) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            let scrape = self.scrape().await;
            if let Some(value) = check(&scrape) {
                return value;
            }
            if Instant::now() > deadline {
                // What the exporter said is often the reason: its last lines with the scrape.
                let log = self.log();
                let lines: Vec<&str> = log.lines().collect();
                panic!(
                    "timed out after {timeout:?} waiting for {what}; the exporter's last log lines:\n{}\nlast scrape:\n{}",
                    lines[lines.len().saturating_sub(40)..].join("\n"),
                    scrape.text
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Everything it logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn alive(&self) -> bool {
        self.exited().is_none()
    }

    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    }

    /// Sends SIGTERM and waits for the exit: its status and everything it logged. Fails
    /// when it has not exited within `within`.
    pub fn terminate(self, within: Duration) -> (ExitStatus, String) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -TERM failed");
        let sent = Instant::now();
        let exit = loop {
            if let Some(exit) = self.exited() {
                break exit;
            }
            assert!(
                sent.elapsed() < within,
                "no exit within {within:?} of SIGTERM; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        (exit, self.log())
    }

    /// Sends SIGTERM, waits for the exit (30 s at most) and returns everything it logged.
    pub fn stop(self) -> String {
        self.terminate(Duration::from_secs(30)).1
    }

    /// Kills the process and returns everything it logged.
    pub fn kill(self) -> String {
        let mut child = self.child();
        let _ = child.kill();
        let _ = child.wait();
        drop(child);
        self.log()
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|p| p.into_inner());
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}
