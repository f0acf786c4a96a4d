//! Replicas that share the work (`[ha]`), measured against the local broker (`bench/run
//! ha`; three brokers: `KAFKA_BROKERS=3 KAFKA_LOCAL_PORT=19200 bench/run ha`).
//!
//! Workload: two clusters (the local cluster under two names), each with 4 topics x 10
//! partitions of its own and one open transaction, sampled every 2 s. The harness runs
//! one replica alone, then three replicas of one `[ha]` group, and prints: Kafka requests
//! per cycle of the three together against the one alone (counted from the debug logs of
//! the exporter's own client and librdkafka's protocol log; a "cycle" is one sampling of
//! every cluster), the seconds without full coverage after a SIGKILL and after a SIGSTOP
//! of a replica serving a cluster, and the most replicas seen serving one cluster at once.

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rdkafka::producer::Producer;

const INTERVAL: &str = "2s";
const MEASURE: Duration = Duration::from_secs(40);

struct Replica {
    child: Child,
    port: u16,
    /// Requests sent (by API) and clusters' cycles ended, from its log.
    requests: Arc<Mutex<BTreeMap<String, u64>>>,
    cycles: Arc<AtomicU64>,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(topics: &[String; 2], group: Option<&str>) -> Replica {
    let port = free_port();
    let mut command = Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"));
    command
        .args(["--interval", INTERVAL, "--web.listen-address"])
        .arg(format!("127.0.0.1:{port}"))
        .env("RUST_LOG", "kafka_lso_exporter=debug,librdkafka=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (i, (name, topic)) in ["a", "b"].iter().zip(topics).enumerate() {
        let p = format!("KAFKA_LSO_EXPORTER_CLUSTERS__{i}__");
        command
            .env(format!("{p}NAME"), name)
            .env(format!("{p}BOOTSTRAP_SERVERS"), bootstrap())
            .env(
                format!("{p}TOPICS__INCLUDE"),
                format!("[{:?}]", format!("^{topic}-.*")),
            )
            .env(format!("{p}GROUPS__INCLUDE"), "[\"^$\"]")
            .env(format!("{p}CLIENT__debug"), "protocol");
    }
    if let Some(group) = group {
        command
            .env("KAFKA_LSO_EXPORTER_HA__GROUP", group)
            .env("KAFKA_LSO_EXPORTER_HA__SESSION_TIMEOUT", "6s")
            .env("KAFKA_LSO_EXPORTER_HA__HEARTBEAT_INTERVAL", "1s");
    }
    let mut child = command.spawn().expect("the exporter");
    let requests = Arc::new(Mutex::new(BTreeMap::new()));
    let cycles = Arc::new(AtomicU64::new(0));
    let stderr = child.stderr.take().unwrap();
    let (r, c) = (requests.clone(), cycles.clone());
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
            let text = String::from_utf8_lossy(&line);
            // "Sent {Api}Request (v…": the exporter's own client and librdkafka's
            // protocol log say it alike.
            if let Some(api) = sent_api(&text) {
                *r.lock().unwrap().entry(api.to_string()).or_insert(0) += 1;
            }
            if text.contains("cycle done") {
                c.fetch_add(1, Ordering::Relaxed);
            }
            line.clear();
        }
    });
    Replica {
        child,
        port,
        requests,
        cycles,
    }
}

async fn serving(replica: &Replica) -> Vec<String> {
    let url = format!("http://127.0.0.1:{}/metrics", replica.port);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let Ok(response) = client.get(url).send().await else {
        return Vec::new();
    };
    let Ok(body) = response.text().await else {
        return Vec::new();
    };
    Scrape::parse(&body)
        .series("kafka_lso_exporter_up", &[])
        .filter(|(_, v)| *v == 1.0)
        .map(|(l, _)| l["kafka_cluster"].clone())
        .collect()
}

/// Cluster -> replicas serving it, in one round of scrapes.
async fn owners(replicas: &[&Replica]) -> BTreeMap<String, Vec<usize>> {
    let mut out: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, r) in replicas.iter().enumerate() {
        for cluster in serving(r).await {
            out.entry(cluster).or_default().push(i);
        }
    }
    out
}

/// The API of a "Sent {Api}Request (v…" log line.
fn sent_api(line: &str) -> Option<&str> {
    let rest = &line[line.find("Sent ")? + 5..];
    let end = rest.find("Request (v")?;
    let api = &rest[..end];
    (!api.is_empty() && api.chars().all(|c| c.is_ascii_alphanumeric())).then_some(api)
}

/// Requests per cycle of `replicas` together over `MEASURE`, after a warm-up, in all and
/// by API.
async fn requests_per_cycle(replicas: &[&Replica]) -> (f64, BTreeMap<String, f64>) {
    tokio::time::sleep(Duration::from_secs(8)).await;
    let snapshot = |r: &Replica| {
        (
            r.requests.lock().unwrap().clone(),
            r.cycles.load(Ordering::Relaxed),
        )
    };
    let before: Vec<_> = replicas.iter().map(|r| snapshot(r)).collect();
    tokio::time::sleep(MEASURE).await;
    let mut by_api: BTreeMap<String, u64> = BTreeMap::new();
    let mut cycles = 0;
    for (r, (requests_before, cycles_before)) in replicas.iter().zip(before) {
        let (requests, c) = snapshot(r);
        for (api, n) in requests {
            *by_api.entry(api.clone()).or_insert(0) +=
                n - requests_before.get(&api).copied().unwrap_or(0);
        }
        cycles += c - cycles_before;
    }
    // A cycle of the deployment samples both clusters once.
    let per_cycle = cycles as f64 / 2.0;
    let by_api: BTreeMap<String, f64> = by_api
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(api, n)| (api, n as f64 / per_cycle))
        .collect();
    (by_api.values().sum(), by_api)
}

fn apis(by_api: &BTreeMap<String, f64>) -> String {
    by_api
        .iter()
        .map(|(api, n)| format!("{api} {n:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Seconds until every cluster is served again, and the most replicas serving one cluster
/// at once on the way.
async fn until_covered(replicas: &[&Replica], since: Instant) -> (f64, usize) {
    let mut most = 0;
    loop {
        let owners = owners(replicas).await;
        most = most.max(owners.values().map(Vec::len).max().unwrap_or(0));
        if owners.len() == 2 {
            return (since.elapsed().as_secs_f64(), most);
        }
        assert!(
            since.elapsed() < Duration::from_secs(120),
            "never covered: {owners:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn signal(replica: &Replica, name: &str) {
    let status = Command::new("kill")
        .args([format!("-{name}"), replica.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    require_kafka();
    let base = unique("bench-ha");
    let topics = [format!("{base}-a"), format!("{base}-b")];
    for t in &topics {
        for n in 0..4 {
            create_topic(&format!("{t}-{n}"), 10).await;
        }
    }
    let producers: Vec<Producer_> = topics
        .iter()
        .map(|t| {
            // Open through the whole bench (librdkafka's default timeout, a minute,
            // would end it between the two measurements and change the workload).
            let p: Producer_ = rdkafka::ClientConfig::new()
                .set("bootstrap.servers", bootstrap())
                .set("transactional.id", format!("{t}-txn"))
                .set("transaction.timeout.ms", "900000")
                .create()
                .expect("transactional producer");
            p.init_transactions(Duration::from_secs(30))
                .expect("init_transactions");
            p.begin_transaction().unwrap();
            send(&p, &format!("{t}-0"), 0, 3);
            p
        })
        .collect();

    println!("workload: 2 clusters x 4 topics x 10 partitions, one open transaction each, interval {INTERVAL}");
    let alone = start(&topics, None);
    let (one, one_by_api) = requests_per_cycle(&[&alone]).await;
    drop(alone);
    println!(
        "one replica: {one:.1} Kafka requests per cycle ({})",
        apis(&one_by_api)
    );

    let group = unique("bench-ha-group");
    let replicas: Vec<Replica> = (0..3).map(|_| start(&topics, Some(&group))).collect();
    let all: Vec<&Replica> = replicas.iter().collect();
    until_covered(&all, Instant::now()).await;
    let (three, three_by_api) = requests_per_cycle(&all).await;
    println!(
        "three replicas of one [ha] group: {three:.1} Kafka requests per cycle together ({:.2}x one replica; {})",
        three / one,
        apis(&three_by_api)
    );

    let owners_now = owners(&all).await;
    let victim = owners_now["a"][0];
    let rest: Vec<&Replica> = all
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != victim)
        .map(|(_, r)| *r)
        .collect();
    let killed = Instant::now();
    signal(all[victim], "KILL");
    let (gap, most) = until_covered(&rest, killed).await;
    println!("SIGKILL of the replica serving a: {gap:.1} s without full coverage, at most {most} replica(s) serving one cluster");

    tokio::time::sleep(Duration::from_secs(5)).await;
    let owners_now = owners(&rest).await;
    let frozen = owners_now["b"][0];
    let awake: Vec<&Replica> = rest
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != frozen)
        .map(|(_, r)| *r)
        .collect();
    let stopped = Instant::now();
    signal(rest[frozen], "STOP");
    let (gap, most) = until_covered(&awake, stopped).await;
    println!("SIGSTOP of the replica serving b: {gap:.1} s without full coverage, at most {most} replica(s) serving one cluster");
    signal(rest[frozen], "CONT");
    let woke = Instant::now();
    let mut most = 0;
    while woke.elapsed() < Duration::from_secs(15) {
        most = most.max(
            owners(&rest)
                .await
                .values()
                .map(Vec::len)
                .max()
                .unwrap_or(0),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("after SIGCONT, 15 s: at most {most} replica(s) serving one cluster");
    for p in producers {
        let _ = p.abort_transaction(Duration::from_secs(10));
    }
}
