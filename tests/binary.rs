//! The binary as users run it: flags only, real broker, SIGTERM.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_start_flags_serve_metrics_and_sigterm_stops_gracefully() {
    require_kafka();
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"))
        .args(["--bootstrap-servers", &bootstrap(), "--interval", "1s"])
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--log-format",
            "json",
        ])
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ready = client
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .await;
        if ready.is_ok_and(|r| r.status() == 200) {
            break;
        }
        assert!(Instant::now() < deadline, "the exporter never became ready");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let body = client
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        body.contains("kafka_lso_exporter_up{cluster=\"default\"} 1"),
        "{body}"
    );

    let terminated = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = loop {
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        assert!(
            terminated.elapsed() < Duration::from_secs(5),
            "no exit within 5 s of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "exit status {exit:?}");
    let output = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
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
