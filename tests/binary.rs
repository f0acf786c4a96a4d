//! The binary as users run it: flags only, real broker, SIGTERM; and its log, line by
//! line, in both formats.

mod common;

use std::time::{Duration, Instant};

use serde_json::Value;

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
    for line in log.lines() {
        promslog_line("json", line);
    }
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
    let message = " level=INFO source=src/lib.rs:";
    let msg = format!(
        " msg=\"kafka-lso-exporter {} serving /internal/prometheus\" ",
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        started.starts_with("time=")
            && started.contains(message)
            && started.contains(&msg)
            && started.contains(&format!(":{second}"))
            && started.contains(&format!("127.0.0.1:{first}")),
        "{started}"
    );
    // logfmt is the default.
    for line in log.lines() {
        promslog_line("logfmt", line);
    }
}

/// Every line the binary writes, in either `--log.format`, has promslog's keys first —
/// `time`, `level`, `source`, `msg` — and then only flat fields: no nested object, no key
/// twice. At debug level against an unreachable cluster, so that every level the exporter
/// writes by itself (and librdkafka's lines) is there. Needs no broker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_log_line_has_promslogs_keys_in_both_formats() {
    for format in ["logfmt", "json"] {
        let exporter = Binary::start(
            &[
                "--bootstrap-servers",
                "127.0.0.1:1",
                "--cluster-name",
                "gone",
                "--interval",
                "1s",
                "--log.level",
                "debug",
                "--log.format",
                format,
            ],
            &[],
        );
        exporter
            .wait_for("up 0", Duration::from_secs(20), |s| {
                (s.value("kafka_lso_exporter_up", &[("kafka_cluster", "gone")]) == Some(0.0))
                    .then_some(())
            })
            .await;
        // The failed cycle's warning, twice.
        let deadline = Instant::now() + Duration::from_secs(20);
        while exporter.log().matches("cannot reach the cluster").count() < 2 {
            assert!(Instant::now() < deadline, "{format}:\n{}", exporter.log());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (exit, log) = exporter.terminate(Duration::from_secs(5));
        assert!(exit.success(), "exit status {exit:?}");
        let lines: Vec<Vec<(String, String)>> =
            log.lines().map(|l| promslog_line(format, l)).collect();
        let levels: std::collections::BTreeSet<&str> =
            lines.iter().map(|l| l[1].1.as_str()).collect();
        assert!(
            levels.contains("INFO") && levels.contains("DEBUG") && levels.contains("WARN"),
            "{format}: levels {levels:?}:\n{log}"
        );
        let serving = format!(
            "kafka-lso-exporter {} serving /metrics",
            env!("CARGO_PKG_VERSION")
        );
        let started = lines
            .iter()
            .find(|l| l[3].1 == serving)
            .unwrap_or_else(|| panic!("{format}: no start line:\n{log}"));
        assert_eq!(started[1].1, "INFO", "{started:?}");
        assert!(started[2].1.starts_with("src/lib.rs:"), "{started:?}");
        let fields: Vec<&str> = started[4..].iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            fields,
            [
                "listen",
                "clusters",
                "interval",
                "web_tls",
                "web_basic_auth"
            ],
            "{started:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l[3].1 == "stopped" && l[2].1.starts_with("src/main.rs:")),
            "{format}: no stop line:\n{log}"
        );
    }
}

/// One line of the log, checked against promslog's shape and split into its keys and
/// values, in order: `time` (RFC 3339, UTC; milliseconds in logfmt), `level`, `source`
/// (`file:line`), `msg`, then fields that hold one value each, no key twice.
fn promslog_line(format: &str, line: &str) -> Vec<(String, String)> {
    let pairs = match format {
        "json" => json_pairs(line),
        _ => logfmt_pairs(line),
    };
    let keys: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
    assert!(
        keys.len() >= 4 && keys[..4] == ["time", "level", "source", "msg"],
        "{format}: not time, level, source, msg first: {line}"
    );
    let unique: std::collections::BTreeSet<&str> = keys.iter().copied().collect();
    assert_eq!(unique.len(), keys.len(), "{format}: a key twice: {line}");
    let time = &pairs[0].1;
    assert!(
        time.ends_with('Z') && humantime::parse_rfc3339(time).is_ok(),
        "{format}: time {time:?}: {line}"
    );
    if format == "logfmt" {
        assert_eq!(time.len(), "2024-05-01T12:00:00.123Z".len(), "{line}");
    }
    assert!(
        ["ERROR", "WARN", "INFO", "DEBUG"].contains(&pairs[1].1.as_str()),
        "{format}: level {:?}: {line}",
        pairs[1].1
    );
    let source = pairs[2].1.rsplit_once(':');
    assert!(
        source.is_some_and(|(file, number)| file.ends_with(".rs")
            && !file.starts_with('/')
            && number.parse::<u32>().is_ok()),
        "{format}: source {:?}: {line}",
        pairs[2].1
    );
    pairs
}

/// A JSON line's keys in order, every value a string, number or boolean (written as
/// text); fails on anything nested.
fn json_pairs(line: &str) -> Vec<(String, String)> {
    let pairs = kafka_lso_exporter::logging::json_fields(line)
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"));
    pairs
        .into_iter()
        .map(|(key, value)| match value {
            Value::String(text) => (key, text),
            Value::Number(_) | Value::Bool(_) => (key, value.to_string()),
            nested => panic!("{key} is {nested}, not one value: {line}"),
        })
        .collect()
}

/// A logfmt line as slog's text handler writes it: `key=value` pairs one space apart,
/// a key or value bare or quoted with Go's escapes.
fn logfmt_pairs(line: &str) -> Vec<(String, String)> {
    let mut rest = line;
    let mut pairs = Vec::new();
    while !rest.is_empty() {
        let (key, after) = logfmt_token(rest, '=').unwrap_or_else(|| panic!("no key=: {line}"));
        let after = after
            .strip_prefix('=')
            .unwrap_or_else(|| panic!("{key}: no '=': {line}"));
        let (value, after) =
            logfmt_token(after, ' ').unwrap_or_else(|| panic!("{key}: no value: {line}"));
        rest = match after.strip_prefix(' ') {
            Some(next) if !next.is_empty() => next,
            None if after.is_empty() => after,
            _ => panic!("{key}: not one space before the next key: {line}"),
        };
        pairs.push((key, value));
    }
    pairs
}

/// A bare token up to `end` (which it must not hold), or a quoted one; and what follows.
fn logfmt_token(text: &str, end: char) -> Option<(String, &str)> {
    let Some(quoted) = text.strip_prefix('"') else {
        let at = text.find([end, ' ', '=']).unwrap_or(text.len());
        return (at > 0).then(|| (text[..at].to_string(), &text[at..]));
    };
    let mut token = String::new();
    let mut chars = quoted.char_indices();
    while let Some((at, c)) = chars.next() {
        match c {
            '"' => return Some((token, &quoted[at + 1..])),
            '\\' => {
                let (_, escape) = chars.next()?;
                let hex = |chars: &mut std::str::CharIndices, n: usize| {
                    let digits: String = chars.by_ref().take(n).map(|(_, c)| c).collect();
                    char::from_u32(u32::from_str_radix(&digits, 16).ok()?)
                };
                token.push(match escape {
                    '"' | '\\' => escape,
                    'a' => '\u{7}',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'v' => '\u{b}',
                    'x' => hex(&mut chars, 2)?,
                    'u' => hex(&mut chars, 4)?,
                    'U' => hex(&mut chars, 8)?,
                    _ => return None,
                });
            }
            c if c.is_control() => return None,
            c => token.push(c),
        }
    }
    None
}

/// kafka_exporter's command line, as the prometheus-kafka-exporter chart renders it: one
/// cluster served with kafka_exporter's families beside the exporter's own; a flag of
/// kafka_exporter that is not taken is refused by name (exit code 2), never ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_exporters_flags_serve_its_families_and_refuse_what_is_not_taken() {
    require_kafka();
    let server = format!("--kafka.server={}", bootstrap());
    let exporter = Binary::start(
        &[
            "--verbosity=0",
            &server,
            "--no-offset.show-all",
            "--interval",
            "1s",
        ],
        &[],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while exporter.get("/readyz").await.map(|(status, _)| status) != Some(200) {
        assert!(Instant::now() < deadline, "the exporter never became ready");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, body) = exporter.get("/metrics").await.unwrap();
    for family in [
        "kafka_lso_exporter_up{kafka_cluster=\"default\"} 1",
        "\nkafka_brokers{kafka_cluster=\"default\"} 1",
        "\nkafka_broker_info{",
    ] {
        assert!(body.contains(family), "{family} missing:\n{body}");
    }
    let (exit, log) = exporter.terminate(Duration::from_secs(5));
    assert!(exit.success(), "exit status {exit:?}");
    assert!(log.contains("started with kafka_exporter's flags"), "{log}");

    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"))
        .args([
            server.as_str(),
            "--kafka.labels=env=prod",
            "--tls.enabled",
            "--tls.server-name=kafka",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--kafka.labels (") && stderr.contains("--tls.server-name ("),
        "{stderr}"
    );
}

/// `--sasl.password` on the command line, as the prometheus-kafka-exporter chart renders
/// it: the process starts itself again with the password in `SASL_USER_PASSWORD` (its own
/// user's to read) and off `/proc/PID/cmdline` (every user's), keeps its PID and logs in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sasl_password_on_the_command_line_leaves_it() {
    require_kafka();
    let server = format!("--kafka.server={}", sasl_bootstrap());
    let exporter = Binary::start(
        &[
            &server,
            "--sasl.enabled",
            "--sasl.mechanism=scram-sha512",
            "--sasl.username=exporter",
            "--sasl.password=exporter-secret",
            "--interval",
            "1s",
        ],
        &[],
    );
    let s = exporter
        .wait_for("up 1 over SCRAM", Duration::from_secs(30), |s| {
            (s.value("kafka_lso_exporter_up", &[("kafka_cluster", "default")]) == Some(1.0))
                .then(|| s.clone())
        })
        .await;
    assert!(s.text.contains("\nkafka_brokers{"), "{}", s.text);
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", exporter.pid())).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(
        !cmdline.contains("exporter-secret") && cmdline.contains("--sasl.username=exporter"),
        "{cmdline}"
    );
    let environ = std::fs::read(format!("/proc/{}/environ", exporter.pid())).unwrap();
    assert!(
        String::from_utf8_lossy(&environ).contains("SASL_USER_PASSWORD=exporter-secret"),
        "the password is not in the process's environment"
    );
    let (exit, log) = exporter.terminate(Duration::from_secs(5));
    assert!(exit.success(), "exit status {exit:?}");
    assert!(!log.contains("exporter-secret"), "{log}");
}
