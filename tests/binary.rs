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
            "--log.format",
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

/// Every `--web.listen-address` serves, the metrics are at `--web.telemetry-path` and
/// nowhere else, `/` links to them, and the log is logfmt. Needs no broker: an
/// unreachable cluster is still served (`kafka_lso_exporter_up 0`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_on_every_listen_address_at_the_telemetry_path() {
    let second = free_port();
    let exporter = Binary::start(
        &[
            "--bootstrap-servers",
            "127.0.0.1:1",
            "--interval",
            "1s",
            // `:port`, every interface, beside the loopback address Binary::start adds.
            "--web.listen-address",
            &format!(":{second}"),
            "--web.telemetry-path",
            "/internal/prometheus",
        ],
        &[],
    );
    let client = reqwest::Client::new();
    let get = |base: String, path: &'static str| {
        let client = client.clone();
        async move {
            let response = client.get(format!("{base}{path}")).send().await.ok()?;
            let status = response.status().as_u16();
            Some((status, response.text().await.ok()?))
        }
    };
    let mut bases = vec![
        format!("http://127.0.0.1:{}", exporter.port()),
        format!("http://127.0.0.1:{second}"),
    ];
    // `:port` takes IPv6 clients too, where the host has IPv6.
    if std::net::TcpListener::bind("[::1]:0").is_ok() {
        bases.push(format!("http://[::1]:{second}"));
    }

    for base in &bases {
        let deadline = Instant::now() + Duration::from_secs(20);
        let body = loop {
            match get(base.clone(), "/internal/prometheus").await {
                Some((200, body)) if body.contains("kafka_lso_exporter_up{") => break body,
                answer => {
                    assert!(exporter.alive(), "the exporter exited:\n{}", exporter.log());
                    assert!(
                        Instant::now() < deadline,
                        "{base}/internal/prometheus: {answer:?}\n{}",
                        exporter.log()
                    );
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert!(
            body.contains("# TYPE kafka_lso_exporter_up gauge"),
            "{body}"
        );
        let (status, _) = get(base.clone(), "/metrics").await.unwrap();
        assert_eq!(status, 404, "{base}/metrics is served too");
        let (status, page) = get(base.clone(), "/").await.unwrap();
        assert_eq!(status, 200);
        assert!(
            page.contains("<a href=\"internal/prometheus\">metrics</a>"),
            "{page}"
        );
        let (status, _) = get(base.clone(), "/healthz").await.unwrap();
        assert_eq!(status, 200, "{base}/healthz");
    }

    let first = exporter.port();
    let (exit, log) = exporter.terminate(Duration::from_secs(5));
    assert!(exit.success(), "exit status {exit:?}");
    let started = log
        .lines()
        .find(|l| l.contains("serving /internal/prometheus"))
        .unwrap_or_else(|| panic!("no start line:\n{log}"));
    let message = format!(
        " level=info msg=\"kafka-lso-exporter {} serving /internal/prometheus\" ",
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        started.starts_with("ts=")
            && started.contains(&message)
            && started.contains(&format!(":{second}"))
            && started.contains(&format!("127.0.0.1:{first}")),
        "{started}"
    );
    assert!(
        log.lines()
            .all(|l| l.starts_with("ts=") && l.contains(" level=")),
        "every log line is logfmt:\n{log}"
    );
}
