//! The permission tables of the docs follow the one list in the code of which request each
//! feature sends with which permission (`kafka::features::PERMISSIONS`): every permission
//! in the list is a row of each table, every row is in the list, and where a table names
//! the requests, it names each request of that permission.
//!
//! Against a broker that enforces ACLs (scripts/kafka-local): topics the principal may not
//! Describe, which the brokers leave out of the metadata without an error, are a refusal
//! of the offsets feature, never an empty, healthy cluster; and a topic hidden for a few
//! cycles keeps its stuck clock and its groups' commit-stall clocks.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::binary::Binary;
use common::members::RdkafkaMember;
use common::*;
use kafka_lso_exporter::kafka::features::{Resource, PERMISSIONS};
use rdkafka::config::ClientConfig;
use rdkafka::producer::Producer as _;

/// (operation, resource) as the list names them, lower case.
type Key = (String, Resource);

fn resource_of(words: &str) -> Option<Resource> {
    let w = words.to_ascii_lowercase().replace(['`', '_', '-'], " ");
    if w.contains("[ha]") {
        Some(Resource::CoordinationGroup)
    } else if w.contains("transactional") {
        Some(Resource::TransactionalId)
    } else if w.contains("topic") {
        Some(Resource::Topic)
    } else if w.contains("group") {
        Some(Resource::Group)
    } else if w.contains("cluster") {
        Some(Resource::Cluster)
    } else {
        None
    }
}

fn operation_of(words: &str) -> Option<String> {
    let w = words.to_ascii_lowercase().replace(['`', '_'], "");
    let first = w.split_whitespace().next()?;
    ["describeconfigs", "describe", "read"]
        .into_iter()
        .find(|op| first == *op)
        .map(str::to_string)
}

/// The rows of the table whose header row starts with `header`: (permission cell, the
/// cell of column `requests`, if any).
fn table(
    doc: &str,
    header: &str,
    permission_columns: &[usize],
    requests_column: Option<usize>,
) -> Vec<(Key, String)> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(doc)).unwrap();
    let start = text
        .lines()
        .position(|l| l.starts_with(header))
        .unwrap_or_else(|| panic!("{doc}: no table starting {header:?}"));
    let mut rows = Vec::new();
    for line in text.lines().skip(start + 2) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let cell = permission_columns
            .iter()
            .map(|i| cells[*i])
            .collect::<Vec<_>>()
            .join(" ");
        let (Some(op), Some(resource)) = (operation_of(&cell), resource_of(&cell)) else {
            continue; // a row of a permission the exporter does not ask for (Connect)
        };
        let requests = requests_column
            .map(|i| cells[i].to_string())
            .unwrap_or_default();
        rows.push(((op, resource), requests));
    }
    rows
}

fn list() -> BTreeMap<Key, BTreeSet<&'static str>> {
    let mut out: BTreeMap<Key, BTreeSet<&'static str>> = BTreeMap::new();
    for p in &PERMISSIONS {
        out.entry((p.operation.to_ascii_lowercase(), p.resource))
            .or_default()
            .extend(p.requests.iter().copied());
    }
    out
}

fn check(doc: &str, header: &str, permission_columns: &[usize], requests_column: Option<usize>) {
    let list = list();
    let rows = table(doc, header, permission_columns, requests_column);
    let in_doc: BTreeSet<&Key> = rows.iter().map(|(k, _)| k).collect();
    let in_code: BTreeSet<&Key> = list.keys().collect();
    assert_eq!(
        in_doc, in_code,
        "{doc}: the permissions of the table differ from src/kafka/features.rs"
    );
    if requests_column.is_some() {
        for (key, requests) in &rows {
            for request in &list[key] {
                assert!(
                    requests.contains(request),
                    "{doc}: the row of {key:?} does not name {request}: {requests}"
                );
            }
        }
    }
}

#[test]
fn the_platforms_table_is_the_list() {
    check(
        "docs/platforms/README.md",
        "| Kafka permission |",
        &[0],
        Some(1),
    );
}

#[test]
fn the_strimzi_table_is_the_list() {
    check("docs/platforms/strimzi.md", "| ACL |", &[0], None);
}

#[test]
fn the_msk_table_is_the_list() {
    // The Kafka ACL column, with the resource column for the [ha] group.
    check("docs/platforms/aws-msk.md", "| action |", &[2, 1], Some(3));
}

#[test]
fn the_security_page_table_is_the_list() {
    check(
        "docs/kafka-security.md",
        "| Kafka permission |",
        &[0],
        Some(1),
    );
}

#[test]
fn the_aiven_table_is_the_list() {
    check("docs/platforms/aiven.md", "| ACL |", &[0], None);
}

#[test]
fn the_redpanda_table_is_the_list() {
    check("docs/platforms/redpanda.md", "| ACL |", &[0], None);
}

#[test]
fn the_confluent_cloud_table_is_the_list() {
    check(
        "docs/platforms/confluent-cloud.md",
        "| operation |",
        &[0, 1],
        None,
    );
}

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

/// Allows (`--add`) or takes back (`--remove`) `operations` on the topics starting with
/// `prefix` to `principal`.
fn prefixed(action: &str, principal: &str, operations: &[&str], prefix: &str) {
    let mut args = vec![action, "--allow-principal", principal];
    for operation in operations {
        args.extend(["--operation", operation]);
    }
    args.extend(["--topic", prefix, "--resource-pattern-type", "prefixed"]);
    if action == "--remove" {
        args.push("--force");
    }
    acl(&args);
}

/// Cluster "acl" on the SASL listener as user "exporter": the topics and groups starting
/// with `prefix`, every partition's series; `more` settings after.
fn settings(prefix: &str, more: &[(&str, &str)]) -> Vec<(String, String)> {
    let key = |k: &str| format!("KAFKA_LSO_EXPORTER_CLUSTERS__0__{k}");
    let mut env: Vec<(String, String)> = vec![
        (key("NAME"), "acl".into()),
        (key("BOOTSTRAP_SERVERS"), sasl_bootstrap()),
        (
            key("TOPICS__INCLUDE"),
            format!("[{:?}]", format!("^{prefix}")),
        ),
        (
            key("GROUPS__INCLUDE"),
            format!("[{:?}]", format!("^{prefix}")),
        ),
        (key("GRANULARITY"), "partition".into()),
    ];
    for (property, value) in [
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "SCRAM-SHA-512"),
        ("sasl.username", "exporter"),
        ("sasl.password", "exporter-secret"),
    ] {
        env.push((key(&format!("CLIENT__{property}")), value.into()));
    }
    env.extend(more.iter().map(|(k, v)| (key(k), v.to_string())));
    env
}

fn feature_up(s: &Scrape, feature: &str) -> Option<f64> {
    s.value(
        "kafka_lso_exporter_feature_up",
        &[("kafka_cluster", "acl"), ("feature", feature)],
    )
}

fn offsets_up(s: &Scrape) -> Option<f64> {
    feature_up(s, "offsets")
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

fn offsets_reason(s: &Scrape) -> String {
    reason(s, "offsets")
}

fn high_watermark_of(s: &Scrape, topic: &str) -> Option<f64> {
    s.value(
        "kafka_partition_high_watermark",
        &[
            ("kafka_cluster", "acl"),
            ("topic", topic),
            ("partition", "0"),
        ],
    )
}

/// A prefixed ACL that covers the topics an application had, not the one it added: the
/// brokers leave the new topic out of the metadata and out of the group's committed
/// offsets, without an error. The exporter knows the group reads it (its member's
/// assignment names it): the offsets feature is refused, naming the topic, the group and
/// the ACL to grant, on `/metrics`, `/`, the JSON API and `--check-config --connect`,
/// and `/` does not say "every partition's LSO equals its HW". A KIP-848 group that reads
/// it cannot be described at all (the brokers refuse ConsumerGroupDescribe for its
/// topics): the groups feature is refused, with Describe on the topics to grant. Granted,
/// the topic is sampled and both features work again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_a_prefixed_acl_does_not_cover_is_a_refusal_not_a_healthy_cluster() {
    require_kafka();
    let prefix = unique("hidden");
    let (old, new, group) = (
        format!("{prefix}-old"),
        format!("{prefix}-new"),
        format!("{prefix}-readers"),
    );
    // The prefix is closed to principals without ACLs (another application has one on it),
    // as on a cluster without allow.everyone.if.no.acl.found; the exporter may see what
    // starts with the old topic's name.
    prefixed(
        "--add",
        "User:application",
        &["Describe"],
        &format!("{prefix}-"),
    );
    prefixed(
        "--add",
        "User:exporter",
        &["Describe", "Read", "DescribeConfigs"],
        &old,
    );
    create_topic(&old, 1).await;
    create_topic(&new, 1).await;
    send(&plain_producer(), &old, 0, 5);
    send(&plain_producer(), &new, 0, 5);
    // One member reading both topics (a regex subscription), its offsets committed.
    let _member = RdkafkaMember::join(&format!("^{prefix}-.*"), &group, "classic");
    let kip848 = kafka_version() >= (4, 0);
    let _kip848_member =
        kip848.then(|| RdkafkaMember::join(&new, &format!("{prefix}-kip848"), "consumer"));

    let env = settings(&prefix, &[]);
    let exporter = Binary::start_debug(&env);
    let scrape = exporter
        .wait_for(
            "the offsets feature refused",
            Duration::from_secs(60),
            |s| {
                (offsets_up(s) == Some(0.0)
                    && high_watermark_of(s, &old).is_some()
                    && (!kip848 || feature_up(s, "groups") == Some(0.0)))
                .then(|| Scrape::parse(&s.text))
            },
        )
        .await;
    let why = offsets_reason(&scrape);
    assert!(
        why.contains(&format!("{new:?} (group {group:?} reads it)"))
            && why.contains("grant Describe on the topics")
            && !why.contains(&format!("{old:?}")),
        "{why}"
    );
    assert_eq!(high_watermark_of(&scrape, &new), None, "not sampled");
    let denied = scrape
        .value(
            "kafka_lso_exporter_request_refusals_total",
            &[
                ("kafka_cluster", "acl"),
                ("stage", "metadata"),
                ("cause", "denied"),
            ],
        )
        .unwrap_or(0.0);
    assert!(denied >= 1.0, "refusals of the metadata stage: {denied}");
    assert_eq!(
        scrape.value("kafka_lso_exporter_up", &[("kafka_cluster", "acl")]),
        Some(1.0),
        "the cluster is reached"
    );

    let (_, page) = exporter.get("/").await.expect("/");
    assert!(
        !page.contains("None: every partition")
            && page.contains("acl: topics an ACL hides from it")
            && page.contains(&new),
        "{page}"
    );
    let (_, json) = exporter.get("/api/v1/stuck").await.expect("api");
    let json: serde_json::Value = serde_json::from_str(&json).expect("json");
    let offsets = json["features"]
        .as_array()
        .expect("features")
        .iter()
        .find(|f| f["feature"] == "offsets")
        .cloned()
        .unwrap_or_default();
    assert_eq!(offsets["status"], "denied", "{json:#}");

    // The connecting check says the same and fails.
    let output = Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"))
        .args([
            "--config",
            repo_root().join("tests/empty.toml").to_str().unwrap(),
        ])
        .args(["--check-config", "--connect"])
        .env_remove("RUST_LOG")
        .envs(env.iter().cloned())
        .output()
        .expect("run --check-config --connect");
    let out = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(
        out.lines().any(|l| l.trim_start().starts_with("offsets")
            && l.contains("denied")
            && l.contains("Describe on the topics")
            && l.contains(&new)),
        "{out}"
    );

    // Granted: sampled, and the features work again without a restart.
    prefixed("--add", "User:exporter", &["Describe"], &new);
    exporter
        .wait_for("the new topic sampled", Duration::from_secs(60), |s| {
            (offsets_up(s) == Some(1.0)
                && feature_up(s, "groups") == Some(1.0)
                && high_watermark_of(s, &new) == Some(5.0))
            .then_some(())
        })
        .await;
}

/// A topic hidden for a few cycles (Describe taken back, then granted again) keeps its
/// stuck clock and its group's commit-stall clock: both read on from where they were,
/// not from 0. Forensics and record reads are off, so that nothing else could date the
/// clocks again (the coordinator's transaction start, the first unread record).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_hidden_for_a_while_keeps_its_clocks() {
    require_kafka();
    let prefix = unique("gap");
    let (topic, group) = (format!("{prefix}-orders"), format!("{prefix}-billing"));
    prefixed(
        "--add",
        "User:application",
        &["Describe"],
        &format!("{prefix}-"),
    );
    prefixed("--add", "User:exporter", &["Describe"], &topic);
    create_topic(&topic, 1).await;
    // The group commits at 5 and stops; 5 plain records follow, then a transaction that
    // stays open: HW 13, LSO 10, 5 records left for the group to read below the LSO.
    send(&plain_producer(), &topic, 0, 5);
    consume_all_and_commit(&group, &topic, 1, "read_committed");
    send(&plain_producer(), &topic, 0, 5);
    let producer: Producer_ = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("transactional.id", format!("{prefix}-tx"))
        .set("transaction.timeout.ms", "300000")
        .set("linger.ms", "0")
        .create()
        .expect("transactional producer");
    producer
        .init_transactions(Duration::from_secs(30))
        .expect("init_transactions");
    producer.begin_transaction().expect("begin");
    send(&producer, &topic, 0, 3);

    let env = settings(
        &prefix,
        &[("TRANSACTIONS", "false"), ("READ_RECORDS", "false")],
    );
    let exporter = Binary::start_debug(&env);
    let partition = [
        ("kafka_cluster", "acl"),
        ("topic", topic.as_str()),
        ("partition", "0"),
    ];
    let group_partition = [
        ("kafka_cluster", "acl"),
        ("group", group.as_str()),
        ("topic", topic.as_str()),
        ("partition", "0"),
    ];
    let clocks = |s: &Scrape| {
        Some((
            s.value("kafka_partition_lso_stuck_seconds", &partition)?,
            s.value("kafka_consumergroup_commit_stall_seconds", &group_partition)?,
        ))
    };
    let (stuck, stall) = exporter
        .wait_for("both clocks at 5 s", Duration::from_secs(60), |s| {
            clocks(s).filter(|(stuck, stall)| *stuck >= 5.0 && *stall >= 5.0)
        })
        .await;
    let hidden_at = Instant::now();

    // Hidden: its series gone, for a few cycles (the exporter samples every second).
    prefixed("--remove", "User:exporter", &["Describe"], &topic);
    exporter
        .wait_for("the topic hidden", Duration::from_secs(60), |s| {
            clocks(s).is_none().then_some(())
        })
        .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let hidden = exporter.scrape().await;
    let refusal = (offsets_up(&hidden), offsets_reason(&hidden));

    prefixed("--add", "User:exporter", &["Describe"], &topic);
    let (stuck_after, stall_after, at) = exporter
        .wait_for("the topic back", Duration::from_secs(60), |s| {
            let (stuck, stall) = clocks(s)?;
            (offsets_up(s) == Some(1.0)).then(|| (stuck, stall, Instant::now()))
        })
        .await;
    let hidden_for = at.duration_since(hidden_at).as_secs_f64();
    eprintln!(
        "stuck {stuck} s and stall {stall} s when hidden; {stuck_after} s and {stall_after} s \
         back {hidden_for:.1} s later"
    );
    // Read on, within two cycles of the time that passed; from 0 they would read at most
    // the seconds since the grant.
    for (what, before, after) in [
        ("lso_stuck_seconds", stuck, stuck_after),
        ("commit_stall_seconds", stall, stall_after),
    ] {
        assert!(
            after >= before + hidden_for - 2.0,
            "{what}: {before} s before it was hidden, {after} s {hidden_for:.1} s later"
        );
    }
    // While hidden, a refusal that says why the exporter expects the topic.
    assert!(
        refusal.0 == Some(0.0) && refusal.1.contains(&format!("{topic:?} (sampled before)")),
        "{refusal:?}"
    );
    producer
        .abort_transaction(Duration::from_secs(30))
        .expect("abort");
}
