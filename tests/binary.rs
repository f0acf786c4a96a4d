//! The binary as users run it: flags only, real broker, SIGTERM.

mod common;

use std::time::{Duration, Instant};

use common::binary::Binary;
use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_start_flags_serve_metrics_and_sigterm_stops_gracefully() {
    require_kafka();
    let exporter = Binary::start(
        &[
            "--bootstrap-servers",
            &bootstrap(),
            "--interval",
            "1s",
            "--log-format",
            "json",
        ],
        &[],
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    while exporter.get("/readyz").await.map(|(status, _)| status) != Some(200) {
        assert!(Instant::now() < deadline, "the exporter never became ready");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, body) = exporter.get("/metrics").await.unwrap();
    assert!(
        body.contains("kafka_lso_exporter_up{kafka_cluster=\"default\"} 1"),
        "{body}"
    );

    let (exit, log) = exporter.terminate(Duration::from_secs(5));
    assert!(exit.success(), "exit status {exit:?}");
    assert!(
        log.lines().all(|l| l.starts_with('{')),
        "every log line is JSON:\n{log}"
    );
    assert!(
        log.contains("first cycle done")
            && log.contains("shutting down")
            && log.contains("stopped"),
        "{log}"
    );
}
