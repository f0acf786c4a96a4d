//! S8: the broker disappears while the exporter runs, then comes back. This test stops
//! the shared broker, so it lives in its own test binary (cargo runs binaries one by one).

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

fn kafka_local(action: &str) {
    let status = Command::new(repo_root().join("scripts/kafka-local"))
        .arg(action)
        .status()
        .expect("scripts/kafka-local");
    assert!(status.success(), "scripts/kafka-local {action} failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn s8_broker_loss_and_recovery() {
    require_kafka();
    let topic = unique("s8");
    create_topic(&topic, 3).await;
    send(&plain_producer(), &topic, 0, 10);
    let exporter = Exporter::start(&format!("^{topic}$"), "^$", &[]).await;
    let cluster = [("kafka_cluster", "test")];
    let p = partition_labels(&topic, "0");
    exporter
        .wait_for("first samples", Duration::from_secs(15), |s| {
            (s.value("kafka_partition_high_watermark", &p) == Some(10.0)).then_some(())
        })
        .await;
    assert_eq!(exporter.get("/readyz").await.0, 200);

    kafka_local("stop");
    let topic_only = [("kafka_cluster", "test"), ("topic", topic.as_str())];
    exporter
        .wait_for(
            "up 0 and no partition series",
            Duration::from_secs(15),
            |s| {
                (s.value("kafka_lso_exporter_up", &cluster) == Some(0.0)
                    && s.series("kafka_partition_high_watermark", &topic_only)
                        .count()
                        == 0
                    && s.series("kafka_partition_last_stable_offset", &topic_only)
                        .count()
                        == 0
                    && s.series("kafka_partition_hw_minus_lso", &topic_only)
                        .count()
                        == 0)
                    .then_some(())
            },
        )
        .await;
    // Still serving: a cluster that is down is `up 0`, not an unready pod.
    let (status, body) = exporter.get("/readyz").await;
    assert_eq!(status, 200, "unready with the broker down: {body}");
    assert!(
        body.contains("test: down (up 0), last successful cycle"),
        "{body}"
    );
    assert_eq!(
        exporter.get("/healthz").await.0,
        200,
        "the process stays up"
    );
    let s = exporter.scrape().await;
    assert!(
        s.value(
            "kafka_lso_exporter_errors_total",
            &[("kafka_cluster", "test"), ("stage", "metadata")]
        )
        .unwrap()
            >= 1.0,
        "the failed cycles are counted"
    );

    kafka_local("start");
    let restarted = Instant::now();
    exporter
        .wait_for("full recovery", Duration::from_secs(30), |s| {
            (s.value("kafka_lso_exporter_up", &cluster) == Some(1.0)
                && s.value("kafka_partition_high_watermark", &p) == Some(10.0)
                && s.value("kafka_partition_hw_minus_lso", &p) == Some(0.0))
            .then_some(())
        })
        .await;
    let recovery = restarted.elapsed();
    eprintln!(
        "recovered {:.1}s after the broker was ready again",
        recovery.as_secs_f64()
    );
    assert!(
        recovery <= Duration::from_secs(3),
        "recovery took {recovery:?}, more than two cycles"
    );
    let (status, body) = exporter.get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("test: up;"), "{body}");
    exporter.stop().await;
}
