//! The capability map against a broker that enforces ACLs (scripts/kafka-local runs
//! KRaft's StandardAuthorizer): a permission denied to the exporter's principal turns its
//! feature off with the ACL to grant, on `/metrics`, `/`, the JSON API, the log (once)
//! and `--check-config --connect`; granted again, the feature is back without a restart.

mod common;

use std::process::Command;
use std::time::Duration;

use common::binary::Binary;
use common::*;

const BINARY: &str = env!("CARGO_BIN_EXE_kafka-lso-exporter");

/// Kafka's ACL tool on the local cluster, as the super user (PLAINTEXT).
fn acl(args: &[&str]) {
    let class = if kafka_version() >= (4, 0) {
        "org.apache.kafka.tools.AclCommand"
    } else {
        "kafka.admin.AclCommand"
    };
    let output = Command::new(repo_root().join("scripts/kafka-local"))
        .args(["tool", class, "--bootstrap-server", &bootstrap()])
        .args(args)
        .output()
        .expect("scripts/kafka-local tool");
    assert!(
        output.status.success(),
        "kafka-acls {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// One cluster on the SASL listener as user "exporter", the topic and group given.
fn settings(topic: &str, group: &str) -> Vec<(String, String)> {
    let prefix = "KAFKA_LSO_EXPORTER_CLUSTERS__0__";
    let mut env: Vec<(String, String)> = vec![
        (format!("{prefix}NAME"), "acl".into()),
        (format!("{prefix}BOOTSTRAP_SERVERS"), sasl_bootstrap()),
        (
            format!("{prefix}TOPICS__INCLUDE"),
            format!("[{:?}]", anchored(topic)),
        ),
        (
            format!("{prefix}GROUPS__INCLUDE"),
            format!("[{:?}]", anchored(group)),
        ),
    ];
    for (key, value) in [
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.username", "exporter"),
        ("sasl.password", "exporter-secret"),
    ] {
        env.push((format!("{prefix}CLIENT__{key}"), value.into()));
    }
    env
}

fn feature(s: &Scrape, feature: &str) -> Option<f64> {
    s.value(
        "kafka_lso_exporter_feature_up",
        &[("kafka_cluster", "acl"), ("feature", feature)],
    )
}

fn reason(s: &Scrape, feature: &str) -> String {
    s.samples
        .iter()
        .find(|(n, l, _)| {
            n == "kafka_lso_exporter_feature_info"
                && l.get("feature").map(String::as_str) == Some(feature)
        })
        .and_then(|(_, l, _)| l.get("reason").cloned())
        .unwrap_or_default()
}

fn connect_check(env: &[(String, String)]) -> (i32, String) {
    let output = Command::new(BINARY)
        .args([
            "--config",
            repo_root().join("tests/empty.toml").to_str().unwrap(),
        ])
        .args(["--check-config", "--connect"])
        .env_remove("RUST_LOG")
        .envs(env.iter().cloned())
        .output()
        .expect("run --check-config --connect");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    (output.status.code().unwrap_or(-1), stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_permission_is_a_feature_off_with_the_acl_to_grant_and_back_once_granted() {
    require_kafka();
    let (topic, group) = (unique("acl"), unique("acl-group"));
    create_topic(&topic, 1).await;
    send(&plain_producer(), &topic, 0, 5);
    consume_all_and_commit(&group, &topic, 1, "read_committed");
    // Five records the group has not read: record reads have something to read.
    send(&plain_producer(), &topic, 0, 5);
    // The principal may describe the topic, nothing more: a topic with ACLs is closed to
    // what they do not allow (allow.everyone.if.no.acl.found holds only without ACLs).
    let principal = ["--allow-principal", "User:exporter"];
    acl(&[
        &["--add"],
        &principal[..],
        &["--operation", "Describe", "--topic", &topic],
    ]
    .concat());
    let env = settings(&topic, &group);
    let exporter = Binary::start_debug(&env);
    let scrape = exporter
        .wait_for("the denied features off", Duration::from_secs(60), |s| {
            (feature(s, "retention_configs") == Some(0.0)
                && feature(s, "record_reads") == Some(0.0)
                && feature(s, "offsets") == Some(1.0)
                && feature(s, "groups") == Some(1.0))
            .then(|| Scrape::parse(&s.text))
        })
        .await;
    let retention = reason(&scrape, "retention_configs");
    assert!(
        retention.contains("grant DescribeConfigs on the topics")
            && retention.contains("--topic '*'"),
        "{retention}"
    );
    let reads = reason(&scrape, "record_reads");
    assert!(reads.contains("grant Read on the topics"), "{reads}");
    for stage in ["topic_configs", "read_records"] {
        let errors = scrape
            .value(
                "kafka_lso_exporter_errors_total",
                &[("kafka_cluster", "acl"), ("stage", stage)],
            )
            .unwrap_or(0.0);
        assert!(errors >= 1.0, "{stage}: errors_total {errors}");
        // Counted as refusals by an ACL too: KafkaLsoExporterErrors leaves them to
        // KafkaLsoExporterFeatureDown.
        let denied = scrape
            .value(
                "kafka_lso_exporter_request_refusals_total",
                &[
                    ("kafka_cluster", "acl"),
                    ("stage", stage),
                    ("cause", "denied"),
                ],
            )
            .unwrap_or(0.0);
        assert!(
            denied >= 1.0,
            "{stage}: request_refusals_total{{cause=\"denied\"}} {denied}"
        );
    }
    // Turned off by the configuration: a status, no feature_up.
    assert_eq!(feature(&scrape, "transaction_forensics"), None);

    let (status, page) = exporter.get("/").await.expect("/");
    assert_eq!(status, 200);
    assert!(
        page.contains("What it can see") && page.contains("retention_configs"),
        "{page}"
    );
    let (_, json) = exporter.get("/api/v1/stuck").await.expect("api");
    let json: serde_json::Value = serde_json::from_str(&json).expect("json");
    let denied: Vec<&str> = json["features"]
        .as_array()
        .expect("features")
        .iter()
        .filter(|f| f["status"] == "denied")
        .filter_map(|f| f["feature"].as_str())
        .collect();
    assert!(
        denied.contains(&"retention_configs") && denied.contains(&"record_reads"),
        "{denied:?}"
    );

    // The connecting check says the same and fails.
    let (code, out) = connect_check(&env);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.lines().any(|l| l.contains("retention_configs")
            && l.contains("denied")
            && l.contains("DescribeConfigs on the topics")),
        "{out}"
    );

    // Granted again: back without a restart, said once.
    acl(&[
        &["--add"],
        &principal[..],
        &["--operation", "Read", "--topic", &topic],
    ]
    .concat());
    exporter
        .wait_for("record reads back", Duration::from_secs(60), |s| {
            (feature(s, "record_reads") == Some(1.0)).then_some(())
        })
        .await;
    let log = exporter.stop();
    let off = log
        .lines()
        .filter(|l| l.contains("feature does not work") && l.contains("record_reads"))
        .count();
    assert_eq!(off, 1, "said once per change:\n{log}");
    assert!(
        log.lines()
            .any(|l| l.contains("feature works again") && l.contains("record_reads")),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connecting_check_passes_where_every_permission_is_granted() {
    require_kafka();
    let topic = unique("acl-open");
    create_topic(&topic, 1).await;
    send(&plain_producer(), &topic, 0, 3);
    let env = cluster_env(0, "open", &bootstrap(), &topic, &[]);
    let (code, out) = connect_check(&env);
    assert_eq!(code, 0, "{out}");
    for feature in ["authentication", "offsets", "groups", "retention_configs"] {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(feature) && l.contains(" ok ")),
            "{feature}: {out}"
        );
    }

    // A cluster nobody answers for: not reached, exit 1.
    let mut env = cluster_env(
        0,
        "nowhere",
        &format!("127.0.0.1:{}", free_port()),
        &topic,
        &[],
    );
    env.push(("KAFKA_LSO_EXPORTER_TIMEOUT".into(), "3s".into()));
    let (code, out) = connect_check(&env);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("cannot reach it"), "{out}");
}
