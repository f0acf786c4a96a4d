//! kafka-lso-exporter beside four other Kafka lag exporters, one at a time, against the same
//! workload on the local broker (bench/workload.rs: 20 topics x 100 partitions, 540 groups x
//! 40 committed partitions, plus one transaction held open on 5 partitions during each run).
//!
//! This harness builds none of them: it runs the binaries named by
//!   KAFKA_EXPORTER_BIN  danielqsj/kafka_exporter
//!   KMINION_BIN         redpanda-data/kminion (formerly cloudhut)
//!   KLAG_EXPORTER_BIN   klag-exporter
//!   BURROW_BIN          linkedin/Burrow
//! and skips, with a printed line, every one whose variable is unset. kafka-lso-exporter is
//! the release binary of this checkout (or BENCH_EXPORTER's), run three times: default
//! settings (`topic` granularity), `granularity = "partition"`, and started as Strimzi's run
//! script (deploy/strimzi/kafka_exporter_run.sh) starts it for `spec.kafkaExporter` with
//! `topicRegex`/`groupRegex` set, TLS left out: kafka_exporter's flags only (`--kafka.server`,
//! `--web.listen-address`, `--topic.filter`, `--group.filter`, `--verbosity=0`; no config
//! file), so kafka_exporter's metric families are on beside its own.
//!
//! Every exporter gets a 15 s rhythm: those that poll on their own have their poll interval
//! set to 15 s (kafka-lso-exporter `interval`: `--interval`, or with kafka_exporter's flags
//! KAFKA_LSO_EXPORTER_INTERVAL, which is also its default; klag-exporter `poll_interval`,
//! Burrow `offset-refresh`); those that ask Kafka when scraped (kafka_exporter, kminion) are
//! scraped every 15 s. Each is filtered to the bench topics (`^bench-t`) and groups
//! (`^bench-g`) where it can be, listens on 127.0.0.1 only, and reaches the broker through
//! its PROXIED listener (scripts/kafka-local: port + 4, advertised as port + 5): this
//! harness runs the TCP proxy on port + 5 and counts every request by API key.
//!
//! For each exporter, after a warm-up (until its /metrics names a bench group, at most
//! PEERS_WARMUP_SECONDS, 300 by default), over a window of PEERS_SECONDS (150 by default):
//! a scrape every 15 s as Prometheus asks (OpenMetrics, gzip), at once after one that took
//! longer than that, each started while the window lasts. Reported: series on /metrics
//! (lines without `#` in the last scrape), CPU seconds used in the window (/proc/PID/stat),
//! peak RSS (VmHWM), Kafka requests per cycle by API (requests in the window, until its
//! last scrape ends, divided by the scrapes, or for those that poll on their own by the
//! window over their interval), and the median /metrics latency of the window's scrapes
//! (until the last byte, compressed).
//! PEERS_ONLY=kminion runs only the exporters whose name holds that text (PEERS_ONLY=kafka:
//! kafka_exporter and the three runs of kafka-lso-exporter);
//! KLAG_EXPORTER_POLL_SECONDS=30 runs klag-exporter at its default interval instead.

#[path = "../tests/common/mod.rs"]
mod common;
mod process;
mod workload;

use std::collections::BTreeMap;
use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use process::{cpu_seconds, exporter, rss_kib};
use rdkafka::producer::Producer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use workload::{setup, topic};

const INTERVAL: Duration = Duration::from_secs(15);
const ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

fn seconds_from_env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Requests seen by the proxies, by API key, and connections accepted.
#[derive(Default)]
struct Counts {
    requests: BTreeMap<i16, u64>,
    connections: u64,
}

/// One proxy per broker: listens on the advertised PROXIED port (PLAINTEXT port + 5) and
/// forwards to the PROXIED listener (+ 4), counting the requests of every client frame.
struct Proxies {
    counts: Arc<Mutex<Counts>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Proxies {
    async fn start(bootstrap: &str) -> Proxies {
        let counts = Arc::new(Mutex::new(Counts::default()));
        let mut tasks = Vec::new();
        for broker in bootstrap.split(',') {
            let address: SocketAddr = broker.trim().parse().expect("bootstrap as IP:PORT");
            let listen = SocketAddr::new(address.ip(), address.port() + 5);
            let upstream = SocketAddr::new(address.ip(), address.port() + 4);
            // Another test's proxy may hold the port for a moment.
            let deadline = Instant::now() + Duration::from_secs(120);
            let listener = loop {
                match TcpListener::bind(listen).await {
                    Ok(l) => break l,
                    Err(e) if Instant::now() < deadline => {
                        eprintln!("waiting for {listen} ({e})");
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                    Err(e) => panic!("cannot listen on {listen}, the proxied port: {e}"),
                }
            };
            let counts = counts.clone();
            tasks.push(tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    counts.lock().unwrap().connections += 1;
                    let counts = counts.clone();
                    tokio::spawn(async move {
                        if let Ok(server) = TcpStream::connect(upstream).await {
                            // Without it, Nagle's algorithm and delayed ACKs add up to 40 ms
                            // to a small request: a client that waits for each answer
                            // before its next request would pay it every time.
                            let _ = client.set_nodelay(true);
                            let _ = server.set_nodelay(true);
                            forward(client, server, counts).await;
                        }
                    });
                }
            }));
        }
        Proxies { counts, tasks }
    }

    /// The counts so far, and zero from now on.
    fn take(&self) -> Counts {
        std::mem::take(&mut *self.counts.lock().unwrap())
    }
}

impl Drop for Proxies {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Client frames are read whole (4-byte length, then int16 api_key, int16 api_version,
/// int32 correlation id, ...) and counted; answers are copied back as they come.
async fn forward(client: TcpStream, server: TcpStream, counts: Arc<Mutex<Counts>>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let requests = async move {
        let mut frame = Vec::new();
        loop {
            let mut length = [0u8; 4];
            if client_read.read_exact(&mut length).await.is_err() {
                break;
            }
            let size = i32::from_be_bytes(length);
            if size < 2 {
                break;
            }
            // Forwarded as one write, length and all.
            frame.clear();
            frame.extend_from_slice(&length);
            frame.resize(4 + size as usize, 0);
            if client_read.read_exact(&mut frame[4..]).await.is_err() {
                break;
            }
            let api_key = i16::from_be_bytes([frame[4], frame[5]]);
            *counts.lock().unwrap().requests.entry(api_key).or_default() += 1;
            if server_write.write_all(&frame).await.is_err() {
                break;
            }
        }
        let _ = server_write.shutdown().await;
    };
    let answers = async move {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::join!(requests, answers);
}

fn api_name(key: i16) -> String {
    match kafka_protocol::messages::ApiKey::try_from(key) {
        Ok(api) => format!("{api:?}"),
        Err(_) => format!("api{key}"),
    }
}

/// How one exporter is started.
struct Spec {
    name: String,
    command: Command,
    /// Where its output goes (and its configuration lives).
    dir: PathBuf,
    /// Its own poll interval; `None` for those that ask Kafka when scraped.
    polls: Option<Duration>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn run_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("peers-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, file: &str, text: &str) -> PathBuf {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    path
}

/// The exporters to run, each with its port; `None` with the reason for a skipped one.
fn specs(proxied: &str) -> Vec<Result<(Spec, u16), String>> {
    let mut specs = Vec::new();
    let interval = format!("{}s", INTERVAL.as_secs());

    for (name, granularity) in [
        ("kafka-lso-exporter (topic)", None),
        ("kafka-lso-exporter (partition)", Some("partition")),
    ] {
        let port = free_port();
        let dir = run_dir(if granularity.is_some() {
            "lso-partition"
        } else {
            "lso-topic"
        });
        let mut command = exporter(proxied, "bench", &interval, port, "^bench-t", "^bench-g");
        if let Some(g) = granularity {
            command.env("KAFKA_LSO_EXPORTER_CLUSTERS__0__GRANULARITY", g);
        }
        specs.push(Ok((
            Spec {
                name: name.to_string(),
                command,
                dir,
                polls: Some(INTERVAL),
            },
            port,
        )));
    }

    // kafka-lso-exporter with kafka_exporter's flags, as Strimzi's run script passes them
    // (without its TLS flags, and without `--cluster-name`, which it derives only from a
    // `<cluster>-kafka-bootstrap` address): one cluster, kafka_exporter's families on,
    // `--offset.show-all` (every committed partition) by default. The rhythm is the interval
    // in the environment: 15 s, also its default, so the command line is the script's.
    {
        let port = free_port();
        let dir = run_dir("lso-kafka_exporter-flags");
        let binary = std::env::var_os("BENCH_EXPORTER")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_kafka-lso-exporter").into());
        let mut command = Command::new(binary);
        command
            .args([
                &format!("--kafka.server={proxied}"),
                &format!("--web.listen-address=127.0.0.1:{port}"),
                "--topic.filter=^bench-t",
                "--group.filter=^bench-g",
                "--verbosity=0",
            ])
            .env("KAFKA_LSO_EXPORTER_INTERVAL", &interval);
        specs.push(Ok((
            Spec {
                name: "kafka-lso-exporter, kafka_exporter's flags".into(),
                command,
                dir,
                polls: Some(INTERVAL),
            },
            port,
        )));
    }

    let bin = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };

    // kafka_exporter: asks Kafka on each scrape (no interval of its own); its defaults
    // otherwise (metadata refreshed every 30 s, offsets of every filtered partition for
    // every group: offset.show-all).
    match bin("KAFKA_EXPORTER_BIN") {
        None => specs.push(Err(
            "kafka_exporter: skipped, KAFKA_EXPORTER_BIN is not set".into(),
        )),
        Some(path) => {
            let port = free_port();
            let dir = run_dir("kafka_exporter");
            let mut command = Command::new(path);
            command.args([
                &format!("--kafka.server={proxied}"),
                &format!("--web.listen-address=127.0.0.1:{port}"),
                "--topic.filter=^bench-t",
                "--group.filter=^bench-g",
            ]);
            specs.push(Ok((
                Spec {
                    name: "kafka_exporter".into(),
                    command,
                    dir,
                    polls: None,
                },
                port,
            )));
        }
    }

    // kminion: asks Kafka on each scrape; defaults otherwise (adminApi mode, partition
    // granularity for topics and groups, log dirs, end-to-end off).
    match bin("KMINION_BIN") {
        None => specs.push(Err("kminion: skipped, KMINION_BIN is not set".into())),
        Some(path) => {
            let port = free_port();
            let dir = run_dir("kminion");
            let brokers: Vec<String> = proxied.split(',').map(|b| format!("{b:?}")).collect();
            let config = write(
                &dir,
                "kminion.yaml",
                &format!(
                    "kafka:\n  brokers: [{}]\nminion:\n  consumerGroups:\n    allowedGroups: [\"/^bench-g/\"]\n  topics:\n    allowedTopics: [\"/^bench-t/\"]\nexporter:\n  host: \"127.0.0.1\"\n  port: {port}\n",
                    brokers.join(", ")
                ),
            );
            let mut command = Command::new(path);
            command.env("CONFIG_FILEPATH", config);
            specs.push(Ok((
                Spec {
                    name: "kminion".into(),
                    command,
                    dir,
                    polls: None,
                },
                port,
            )));
        }
    }

    // klag-exporter: polls every poll_interval (15 s here, 30 s by default; another with
    // KLAG_EXPORTER_POLL_SECONDS) and gives a collection poll_interval - 5 s; defaults
    // otherwise (topic granularity, time lag from sampled record timestamps).
    match bin("KLAG_EXPORTER_BIN") {
        None => specs.push(Err(
            "klag-exporter: skipped, KLAG_EXPORTER_BIN is not set".into()
        )),
        Some(path) => {
            let poll = Duration::from_secs(seconds_from_env(
                "KLAG_EXPORTER_POLL_SECONDS",
                INTERVAL.as_secs(),
            ));
            let interval = format!("{}s", poll.as_secs());
            let port = free_port();
            let dir = run_dir("klag-exporter");
            let config = write(
                &dir,
                "config.toml",
                &format!(
                    "[exporter]\npoll_interval = \"{interval}\"\nhttp_port = {port}\nhttp_host = \"127.0.0.1\"\n\n[[clusters]]\nname = \"bench\"\nbootstrap_servers = \"{proxied}\"\ngroup_whitelist = [\"^bench-g\"]\ntopic_whitelist = [\"^bench-t\"]\n"
                ),
            );
            let mut command = Command::new(path);
            command.arg("--config").arg(config);
            specs.push(Ok((
                Spec {
                    name: if poll == INTERVAL {
                        "klag-exporter".into()
                    } else {
                        format!("klag-exporter (poll_interval {interval})")
                    },
                    command,
                    dir,
                    polls: Some(poll),
                },
                port,
            )));
        }
    }

    // Burrow: consumes __consumer_offsets continuously, asks for every partition's end
    // offset every offset-refresh (15 s here, 10 s by default) and for metadata every
    // topic-refresh (60 s, its default); no topic filter exists. No notifier, so no
    // ZooKeeper.
    match bin("BURROW_BIN") {
        None => specs.push(Err("Burrow: skipped, BURROW_BIN is not set".into())),
        Some(path) => {
            let port = free_port();
            let dir = run_dir("burrow");
            let servers: Vec<String> = proxied.split(',').map(|b| format!("{b:?}")).collect();
            let servers = servers.join(", ");
            write(
                &dir,
                "burrow.toml",
                &format!(
                    "[general]\npidfile = \"{pid}\"\n\n[logging]\nlevel = \"info\"\n\n[client-profile.bench]\nclient-id = \"burrow-bench\"\n\n[cluster.bench]\nclass-name = \"kafka\"\nservers = [{servers}]\nclient-profile = \"bench\"\noffset-refresh = {secs}\n\n[consumer.bench]\nclass-name = \"kafka\"\ncluster = \"bench\"\nservers = [{servers}]\nclient-profile = \"bench\"\ngroup-allowlist = \"^bench-g\"\n\n[httpserver.default]\naddress = \"127.0.0.1:{port}\"\n\n[storage.default]\nclass-name = \"inmemory\"\n\n[evaluator.default]\nclass-name = \"caching\"\n",
                    pid = dir.join("burrow.pid").display(),
                    secs = INTERVAL.as_secs(),
                ),
            );
            let mut command = Command::new(path);
            command.arg("--config-dir").arg(&dir);
            specs.push(Ok((
                Spec {
                    name: "Burrow".into(),
                    command,
                    dir,
                    polls: Some(INTERVAL),
                },
                port,
            )));
        }
    }
    specs
}

struct Figures {
    name: String,
    series: usize,
    /// Text, and what came over the wire (gzip where the exporter compresses).
    bytes: usize,
    wire_bytes: usize,
    cpu: f64,
    window: f64,
    hwm_kib: u64,
    scrapes: usize,
    /// What requests are divided by: the scrapes, or for those that poll on their own,
    /// the window over their interval.
    cycles: f64,
    requests: BTreeMap<i16, u64>,
    connections: u64,
    latency_ms: f64,
    latency_max_ms: f64,
    failed_scrapes: usize,
    note: String,
}

fn kill(child: &mut Child) {
    // SIGTERM first: Burrow removes its pid file, the others stop as they would.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A scrape as Prometheus asks (OpenMetrics, gzip): milliseconds until the last byte,
/// the bytes received, and the body as text (decompressed here, after the clock stopped).
async fn scrape(client: &reqwest::Client, url: &str) -> Option<(f64, usize, String)> {
    let started = Instant::now();
    let response = client
        .get(url)
        .header("Accept", ACCEPT)
        .header("Accept-Encoding", "gzip")
        .send()
        .await
        .ok()?;
    if !response.status().is_success() {
        return None;
    }
    let gzip = response
        .headers()
        .get("content-encoding")
        .is_some_and(|v| v.as_bytes() == b"gzip");
    let body = response.bytes().await.ok()?;
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let text = if gzip {
        let mut text = String::new();
        flate2::read::GzDecoder::new(&body[..])
            .read_to_string(&mut text)
            .ok()?;
        text
    } else {
        String::from_utf8_lossy(&body).into_owned()
    };
    Some((ms, body.len(), text))
}

fn series(text: &str) -> usize {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count()
}

async fn measure(spec: Spec, port: u16, proxies: &Proxies, window: Duration) -> Figures {
    let Spec {
        name,
        mut command,
        dir,
        polls,
    } = spec;
    let log = std::fs::File::create(dir.join("output.log")).unwrap();
    command
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log);
    let mut child = command
        .spawn()
        .unwrap_or_else(|e| panic!("start {name}: {e}"));
    let pid = child.id();
    let url = format!("http://127.0.0.1:{port}/metrics");
    // Long enough for an exporter that asks Kafka for everything while it is scraped.
    let client = reqwest::Client::builder()
        .no_gzip()
        .timeout(Duration::from_secs(600))
        .build()
        .unwrap();
    let mut note = String::new();

    // Warm-up: until /metrics names a bench group (the first cycle is done or, for those
    // that ask Kafka when scraped, a scrape went that far).
    let warmup = Duration::from_secs(seconds_from_env("PEERS_WARMUP_SECONDS", 300));
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return failed(
                &name,
                format!("exited during warm-up ({status}); see {}", dir.display()),
            );
        }
        if let Some((_, _, text)) = scrape(&client, &url).await {
            if text.contains("bench-g") {
                break;
            }
        }
        if started.elapsed() > warmup {
            note = format!(
                "no bench group on /metrics after {}s of warm-up; ",
                warmup.as_secs()
            );
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    println!("{name}: warm-up {:.0}s", started.elapsed().as_secs_f64());

    // The window: a scrape every INTERVAL (at once after one that took longer), started
    // while the window lasts; requests counted until it ends or the last scrape has.
    proxies.take();
    let cpu_before = cpu_seconds(pid);
    let start = Instant::now();
    let end = start + window;
    let mut latencies = Vec::new();
    let mut failed_scrapes = 0;
    let mut scrapes = 0;
    let mut last = None;
    let mut next = start;
    while next < end {
        tokio::time::sleep_until(next.into()).await;
        match scrape(&client, &url).await {
            Some((ms, wire, text)) => {
                latencies.push(ms);
                last = Some((wire, text));
            }
            None => failed_scrapes += 1,
        }
        scrapes += 1;
        next = (start + INTERVAL * scrapes as u32).max(Instant::now());
    }
    tokio::time::sleep_until(end.into()).await;
    let elapsed = start.elapsed().as_secs_f64();
    let counts = proxies.take();
    let alive = matches!(child.try_wait(), Ok(None));
    let cpu = if alive {
        cpu_seconds(pid) - cpu_before
    } else {
        f64::NAN
    };
    let (_, hwm_kib) = rss_kib(pid);
    kill(&mut child);
    if !alive {
        note.push_str(&format!(
            "exited during the window; see {}; ",
            dir.display()
        ));
    }
    if elapsed > window.as_secs_f64() + 1.0 {
        note.push_str(&format!(
            "a scrape ran past the window's end: {elapsed:.0}s; "
        ));
    }
    let (wire_bytes, body) = last.unwrap_or_default();
    // Kept beside the exporter's log, to see what it exports.
    let _ = std::fs::write(dir.join("metrics.txt"), &body);
    latencies.sort_by(f64::total_cmp);
    Figures {
        name,
        series: series(&body),
        bytes: body.len(),
        wire_bytes,
        cpu,
        window: elapsed,
        hwm_kib,
        scrapes,
        cycles: polls.map_or(scrapes as f64, |p| elapsed / p.as_secs_f64()),
        requests: counts.requests,
        connections: counts.connections,
        latency_ms: latencies
            .get(latencies.len() / 2)
            .copied()
            .unwrap_or(f64::NAN),
        latency_max_ms: latencies.last().copied().unwrap_or(f64::NAN),
        failed_scrapes,
        note,
    }
}

fn failed(name: &str, note: String) -> Figures {
    Figures {
        name: name.to_string(),
        series: 0,
        bytes: 0,
        wire_bytes: 0,
        cpu: f64::NAN,
        window: 0.0,
        hwm_kib: 0,
        scrapes: 0,
        cycles: 0.0,
        requests: BTreeMap::new(),
        connections: 0,
        latency_ms: f64::NAN,
        latency_max_ms: f64::NAN,
        failed_scrapes: 0,
        note,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    require_kafka();
    setup().await;
    let window = Duration::from_secs(seconds_from_env("PEERS_SECONDS", 150));
    let only = std::env::var("PEERS_ONLY").unwrap_or_default();

    let proxies = Proxies::start(&bootstrap()).await;
    let proxied: Vec<String> = bootstrap()
        .split(',')
        .map(|b| {
            let address: SocketAddr = b.trim().parse().unwrap();
            format!("{}:{}", address.ip(), address.port() + 5)
        })
        .collect();
    let proxied = proxied.join(",");
    println!(
        "\nworkload: {} topics x {} partitions, {} groups x {} committed partitions, one transaction open on 5 partitions; \
         every exporter through the counting proxy at {proxied}, {}s rhythm, {}s window",
        workload::topics(),
        workload::PARTITIONS,
        workload::groups(),
        workload::GROUP_PARTITIONS,
        INTERVAL.as_secs(),
        window.as_secs()
    );

    let held: Producer_ = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("transactional.id", "bench-peers-held-transaction")
        .set("transaction.timeout.ms", "900000")
        .create()
        .expect("transactional producer");
    held.init_transactions(Duration::from_secs(30)).unwrap();

    let mut results = Vec::new();
    for spec in specs(&proxied) {
        let (spec, port) = match spec {
            Err(skipped) => {
                println!("{skipped}");
                continue;
            }
            Ok(s) => s,
        };
        if !spec.name.contains(&only) {
            continue;
        }
        // A transaction of its own per run: each run is well within its timeout.
        held.begin_transaction().unwrap();
        for p in 0..5 {
            send(&held, &topic(0), p, 1);
        }
        held.flush(Duration::from_secs(30)).unwrap();
        println!(
            "{}: running for {}s after warm-up (log and last /metrics in {})",
            spec.name,
            window.as_secs(),
            spec.dir.display()
        );
        let figures = measure(spec, port, &proxies, window).await;
        held.abort_transaction(Duration::from_secs(30)).unwrap();
        results.push(figures);
    }
    drop(proxies);

    println!(
        "\n| exporter | series | CPU s in window | peak RSS MiB | Kafka requests per cycle | /metrics median ms (max) |"
    );
    println!("|---|---|---|---|---|---|");
    for f in &results {
        let per_cycle = |n: u64| n as f64 / f.cycles.max(1.0);
        let total: u64 = f.requests.values().sum();
        println!(
            "| {} | {} | {:.2} | {:.1} | {:.1} | {:.1} ({:.1}) |",
            f.name,
            f.series,
            f.cpu,
            f.hwm_kib as f64 / 1024.0,
            per_cycle(total),
            f.latency_ms,
            f.latency_max_ms
        );
    }
    println!();
    for f in &results {
        let per_cycle = |n: u64| n as f64 / f.cycles.max(1.0);
        let mut by_api: Vec<(i16, u64)> = f.requests.iter().map(|(k, v)| (*k, *v)).collect();
        by_api.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        println!(
            "{}: {} series ({} KiB of text, {} KiB sent); window {:.0}s, {} scrapes{}, {:.1} cycles; connections opened {:.1} per cycle; requests per cycle: {}{}",
            f.name,
            f.series,
            f.bytes / 1024,
            f.wire_bytes / 1024,
            f.window,
            f.scrapes,
            if f.failed_scrapes > 0 {
                format!(" ({} failed)", f.failed_scrapes)
            } else {
                String::new()
            },
            f.cycles,
            per_cycle(f.connections),
            by_api
                .iter()
                .map(|(k, n)| format!("{} {:.1}", api_name(*k), per_cycle(*n)))
                .collect::<Vec<_>>()
                .join(", "),
            if f.note.is_empty() {
                String::new()
            } else {
                format!("; {}", f.note.trim_end_matches("; "))
            }
        );
    }
}
