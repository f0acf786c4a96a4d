//! Scrape load: 50 concurrent scrapers for 60 s against /metrics holding about 100,000
//! series (the workload of bench/workload.rs), while the exporter keeps sampling every 5 s.
//! Reports errors, latency percentiles, exporter CPU and RSS, and the sampling cycles
//! completed meanwhile. Scrapers ask for gzip, as Prometheus does.

#[path = "../tests/common/mod.rs"]
mod common;
mod process;
mod workload;

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use process::{cpu_seconds, exporter, rss_kib};

const SCRAPERS: usize = 50;
const DURATION: Duration = Duration::from_secs(60);
const INTERVAL_SECONDS: f64 = 5.0;

fn value(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(f64::NAN)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    require_kafka();
    workload::setup().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = exporter(&bootstrap(), "bench", "5s", port, "^bench-t", "^bench-g")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let url = format!("http://127.0.0.1:{port}/metrics");
    let plain = reqwest::Client::builder().no_gzip().build().unwrap();

    // Wait for the first full snapshot.
    let deadline = Instant::now() + Duration::from_secs(60);
    let series = loop {
        if let Ok(r) = plain.get(&url).send().await {
            let text = r.text().await.unwrap_or_default();
            if value(&text, "kafka_lso_exporter_up{") == 1.0 {
                break text.lines().filter(|l| !l.starts_with('#')).count();
            }
        }
        assert!(Instant::now() < deadline, "no snapshot within 60 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let before = plain.get(&url).send().await.unwrap().text().await.unwrap();
    let cycles_before = value(&before, "kafka_lso_exporter_cycle_duration_seconds_count{");
    let cpu_before = cpu_seconds(pid);

    let latencies: Arc<Mutex<Vec<f64>>> = Arc::default();
    let errors = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..SCRAPERS {
        let (url, latencies, errors, bytes) = (
            url.clone(),
            latencies.clone(),
            errors.clone(),
            bytes.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::builder().no_gzip().build().unwrap();
            while started.elapsed() < DURATION {
                let t = Instant::now();
                let ok = match client
                    .get(&url)
                    .header("Accept-Encoding", "gzip")
                    .send()
                    .await
                {
                    Ok(r) if r.status().is_success() => match r.bytes().await {
                        Ok(body) => {
                            bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                            true
                        }
                        Err(_) => false,
                    },
                    _ => false,
                };
                if ok {
                    latencies
                        .lock()
                        .unwrap()
                        .push(t.elapsed().as_secs_f64() * 1000.0);
                } else {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds(pid) - cpu_before;
    let (rss, hwm) = rss_kib(pid);
    let (rss, hwm) = (rss as f64 / 1024.0, hwm as f64 / 1024.0);
    let after = plain.get(&url).send().await.unwrap().text().await.unwrap();
    let cycles = value(&after, "kafka_lso_exporter_cycle_duration_seconds_count{") - cycles_before;
    let cycle_mean = (value(&after, "kafka_lso_exporter_cycle_duration_seconds_sum{")
        - value(&before, "kafka_lso_exporter_cycle_duration_seconds_sum{"))
        / cycles;
    let _ = child.kill();
    let _ = child.wait();

    let mut latencies = latencies.lock().unwrap().clone();
    latencies.sort_by(f64::total_cmp);
    let pct = |p: f64| latencies[((latencies.len() as f64 - 1.0) * p).round() as usize];
    println!("\n## scrape load: {SCRAPERS} concurrent scrapers for {elapsed:.0}s, {series} series on /metrics (gzip)");
    println!(
        "requests: {} ok, {} errors ({:.0} per second, {:.0} MiB sent)",
        latencies.len(),
        errors.load(Ordering::Relaxed),
        latencies.len() as f64 / elapsed,
        bytes.load(Ordering::Relaxed) as f64 / 1024.0 / 1024.0
    );
    println!(
        "latency: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
    println!(
        "exporter CPU: {:.0}% of one core on average; RSS {rss:.1} MiB now, {hwm:.1} MiB peak",
        cpu / elapsed * 100.0
    );
    println!(
        "sampling meanwhile: {cycles:.0} cycles in {elapsed:.0}s at a {INTERVAL_SECONDS}s interval (expected about {:.0}), mean cycle {cycle_mean:.3}s",
        elapsed / INTERVAL_SECONDS
    );
}
