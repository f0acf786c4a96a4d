//! End to end with the real monitoring stack: Kafka, the exporter (1 s interval), a real
//! Prometheus (Debian package; 1 s scrapes; the alert rules with test-sized thresholds)
//! and a real Alertmanager whose webhook receiver is a listener in this test.
//!
//! Scenario: a transaction held open, a read_committed group caught up behind it, a
//! read_uncommitted group at the HW and another between the LSO and the HW (its LSO lag is 0
//! and its HW lag > 0, like the blocked group's, but it has committed past the LSO). The
//! exporter runs as a new user gets it, in `topic` granularity, with kafka_exporter's
//! families on (`compat`); a second one, cluster `hang`, sees the same broker through the
//! test proxy, which makes the transaction look hanging.
//! Asserts: every dashboard panel query returns data, ours and those of Strimzi's and
//! kafka_exporter's dashboards; `topic` granularity drops the per-partition series of the
//! partition nothing withholds and keeps the withheld one's; KafkaLsoStuck,
//! KafkaConsumerGroupBlockedByTransaction and KafkaTransactionHanging fire, the blocked one
//! for the read_committed group and never for a read_uncommitted one (Prometheus's ALERTS
//! history and the webhook); the webhook receives KafkaLsoStuck with topic and partition;
//! after the commit the alerts resolve.
//!
//! A second scenario checks the recording rules of how fast a group closes its lag
//! (mixin/rules.libsonnet) against the exporter's own rates and estimate on a steady
//! workload: the two agree.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::Producer;
use rdkafka::{Message, Offset, TopicPartitionList};
use serde_json::Value;

/// A child process killed when the test ends, whatever happens.
struct Service {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Service {
    fn start(name: &'static str, dir: &Path, program: &str, args: &[String]) -> Service {
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {program} ({e}): install Debian's prometheus and prometheus-alertmanager (scripts/test does)"));
        Service { name, child, log }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            "--- {} log ---\n{}",
            self.name,
            lines[lines.len().saturating_sub(20)..].join("\n")
        )
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The alert rules with thresholds and `for` durations sized for a test that runs in
/// seconds, generated from the monitoring mixin with only those settings overridden
/// (mixin/test/short-thresholds.jsonnet): the same queries as the shipped rules.
fn test_sized_rules() -> String {
    // go-jsonnet where scripts/test installed it (five times faster), else Debian's.
    let go_jsonnet = repo_root().join(".cache/bin/jsonnet");
    let jsonnet = if go_jsonnet.exists() {
        go_jsonnet
    } else {
        "jsonnet".into()
    };
    let output = Command::new(jsonnet)
        .arg("-S")
        .arg(repo_root().join("mixin/test/short-thresholds.jsonnet"))
        .output()
        .expect("jsonnet is required (Debian package jsonnet; scripts/test installs it)");
    assert!(
        output.status.success(),
        "jsonnet failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let rules = String::from_utf8(output.stdout).unwrap();
    // KafkaLsoStuck's threshold (stuckWarningSeconds) closes its expression.
    let stuck = rules
        .split("- alert: ")
        .find(|rule| rule.starts_with("KafkaLsoStuck\n"))
        .unwrap_or_default();
    assert!(
        stuck.contains(") > 3\n"),
        "short thresholds not applied:\n{rules}"
    );
    rules
}

/// A read_uncommitted consumer in `group` reads `partition` of `topic` from the beginning
/// up to `offset` (exclusive) and commits `offset`.
fn read_uncommitted_and_commit_at(group: &str, topic: &str, partition: i32, offset: i64) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", group)
        .set("isolation.level", "read_uncommitted")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, partition, Offset::Beginning)
        .unwrap();
    consumer.assign(&assignment).expect("assign");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "{group} did not read {topic}/{partition} up to {offset}"
        );
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(record)) if record.offset() + 1 >= offset => break,
            Some(Ok(_)) | None => {}
            Some(Err(e)) => panic!("{group} consuming {topic}: {e}"),
        }
    }
    let mut commit = TopicPartitionList::new();
    commit
        .add_partition_offset(topic, partition, Offset::Offset(offset))
        .unwrap();
    consumer.commit(&commit, CommitMode::Sync).expect("commit");
}

/// Every PromQL query of every dashboard panel, with the dashboard's variables filled in.
fn dashboard_queries(topic: &str) -> Vec<(String, String)> {
    let dir = repo_root().join("dashboards");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 3,
        "expected the three dashboards in {}",
        dir.display()
    );
    let mut queries = Vec::new();
    for file in files {
        let dashboard: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let mut panels = Vec::new();
        collect_panels(&dashboard["panels"], &mut panels);
        for panel in panels {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let Some(expr) = target["expr"].as_str() else {
                    continue;
                };
                let filled = expr
                    .replace("${kafka_cluster}", "test")
                    .replace("$kafka_cluster", "test")
                    .replace("${cluster}", "test")
                    .replace("$cluster", "test")
                    .replace("${topic}", topic)
                    .replace("$topic", topic)
                    .replace("${group}", ".+")
                    .replace("$group", ".+")
                    .replace("${partition}", "0")
                    .replace("$partition", "0")
                    .replace("$__rate_interval", "1m")
                    .replace("$__range", "5m")
                    .replace("$__interval", "15s");
                assert!(
                    !filled.contains('$'),
                    "unfilled variable in {}: {filled}",
                    file.display()
                );
                let name = format!(
                    "{} / {}",
                    file.file_name().unwrap().to_string_lossy(),
                    panel["title"].as_str().unwrap_or("?")
                );
                queries.push((name, filled));
            }
        }
    }
    assert!(
        queries.len() >= 15,
        "only {} panel queries found",
        queries.len()
    );
    queries
}

fn collect_panels<'a>(panels: &'a Value, out: &mut Vec<&'a Value>) {
    for panel in panels.as_array().into_iter().flatten() {
        out.push(panel);
        collect_panels(&panel["panels"], out);
    }
}

/// The Kubernetes namespace and Strimzi cluster Strimzi's PodMonitor gives its targets as
/// labels; its dashboard selects on them.
const NAMESPACE: &str = "kafka-e2e";
const STRIMZI_CLUSTER: &str = "e2e";
/// The pod name the scrape gives the exporter's target, as a ServiceMonitor would.
const POD: &str = "kafka-lso-exporter-0";

/// Serves one fixed exposition text over HTTP on a free port, for as long as the test
/// runs; returns the `host:port` to scrape.
async fn serve_text(body: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let body = body.clone();
            async move { ([("content-type", "text/plain; version=0.0.4")], body) }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}
/// Strimzi's dashboard reads two families from the brokers' JMX metrics, which no
/// kafka_exporter serves.
const BROKER_JMX: [&str; 2] = [
    "kafka_cluster_partition_atminisr",
    "kafka_cluster_partition_underminisr",
];

/// The queries of the kafka_exporter dashboards users run (tests/fixtures/compat): every
/// panel's, and for each template variable the query its picker runs, with the variables
/// filled in as a user picking this test's cluster, topic and group would.
fn compat_dashboard_queries(topic: &str, group: &str, instance: &str) -> Vec<(String, String)> {
    let fill = |text: &str| {
        text.replace("$kubernetes_namespace", NAMESPACE)
            .replace("$strimzi_cluster_name", STRIMZI_CLUSTER)
            .replace("$consumergroup", group)
            .replace("$topic", topic)
            .replace("$instance", instance)
            .replace("$job", "kafka-lso-exporter")
    };
    let mut queries = Vec::new();
    let mut skipped = Vec::new();
    for file in [
        "strimzi-kafka-exporter.json",
        "kafka_exporter_overview.json",
    ] {
        let path = repo_root().join("tests/fixtures/compat").join(file);
        let dashboard: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut panels = Vec::new();
        collect_panels(&dashboard["panels"], &mut panels);
        for panel in panels {
            for target in panel["targets"].as_array().into_iter().flatten() {
                let Some(expr) = target["expr"].as_str() else {
                    continue;
                };
                let name = format!("{file} / {}", panel["title"].as_str().unwrap_or("?"));
                if BROKER_JMX.iter().any(|jmx| expr.contains(jmx)) {
                    skipped.push(name);
                    continue;
                }
                let filled = fill(expr);
                assert!(
                    !filled.contains('$'),
                    "unfilled variable in {name}: {filled}"
                );
                queries.push((name, filled));
            }
        }
        for variable in dashboard["templating"]["list"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let Some(query) = variable["query"].as_str() else {
                continue;
            };
            let name = format!("{file} / variable {}", variable["name"]);
            let query = fill(query);
            // label_values(SELECTOR, LABEL) lists LABEL of what SELECTOR returns;
            // query_result(EXPR) shows EXPR. Both need the selector to return data.
            let expr = if let Some(args) = query.strip_prefix("label_values(") {
                let (selector, label) = args.trim_end_matches(')').rsplit_once(',').unwrap();
                format!("count by ({}) ({selector})", label.trim())
            } else if let Some(expr) = query.strip_prefix("query_result(") {
                expr.trim_end_matches(')').to_string()
            } else {
                continue; // the data source picker
            };
            queries.push((name, expr));
        }
    }
    assert_eq!(
        skipped.len(),
        2,
        "only the broker JMX panels are skipped: {skipped:?}"
    );
    assert!(
        queries.len() >= 20,
        "only {} compat queries found",
        queries.len()
    );
    queries
}

struct Prometheus {
    base: String,
    http: reqwest::Client,
}

impl Prometheus {
    async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let response: Value = self
            .http
            .get(format!("{}/api/v1/query", self.base))
            .query(&[("query", expr)])
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        if response["status"] != "success" {
            return Err(format!("{response}"));
        }
        Ok(response["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// (alertname, state, labels) of every active alert.
    async fn alerts(&self) -> Vec<(String, String, Value)> {
        let response: Value = self
            .http
            .get(format!("{}/api/v1/alerts", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        response["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| {
                (
                    a["labels"]["alertname"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    a["state"].as_str().unwrap_or_default().to_string(),
                    a["labels"].clone(),
                )
            })
            .collect()
    }
}

async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(why) if Instant::now() > deadline => panic!("timed out waiting for {what}: {why}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dashboards_alerts_and_notifications_with_real_prometheus_and_alertmanager() {
    require_kafka();
    let dir = std::env::temp_dir().join(unique("kle-e2e"));
    std::fs::create_dir_all(&dir).unwrap();

    // The scenario.
    let topic = unique("e2e");
    let committed_group = unique("e2e-billing");
    let uncommitted_group = unique("e2e-audit");
    // read_uncommitted, committed between the LSO (10) and the HW (20) of partition 0.
    let between_group = unique("e2e-search");
    create_topic(&topic, 2).await;
    let plain = plain_producer();
    send(&plain, &topic, 0, 10);
    send(&plain, &topic, 1, 10);
    // Open for minutes: the coordinator must not abort it (librdkafka's default
    // transaction.timeout.ms is 60 s) while the dashboards of three projects and the alerts
    // are checked on a busy machine.
    let transaction: Producer_ = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("transactional.id", unique("e2e-t"))
        .set("transaction.timeout.ms", "600000")
        .create()
        .expect("transactional producer");
    transaction
        .init_transactions(Duration::from_secs(30))
        .expect("init_transactions");
    transaction.begin_transaction().unwrap();
    send(&transaction, &topic, 0, 5);
    send(&plain, &topic, 0, 5);
    wait_high_watermark(&topic, 0, 20);
    assert_eq!(
        consume_all_and_commit(&committed_group, &topic, 2, "read_committed"),
        vec![10, 10]
    );
    assert_eq!(
        consume_all_and_commit(&uncommitted_group, &topic, 2, "read_uncommitted"),
        vec![20, 10]
    );
    read_uncommitted_and_commit_at(&between_group, &topic, 0, 15);
    // A read_committed share group that delivers everything it may (the share-group
    // dashboard row needs one).
    let share_group = unique("e2e-queue");
    common::java::configure_group(
        &share_group,
        "share.auto.offset.reset=earliest,share.isolation.level=read_committed",
    );
    let _share_member = common::java::ShareMember::start(&topic, &share_group, 1_000);

    let groups = format!("^({committed_group}|{uncommitted_group}|{between_group}|{share_group})$");
    let exporter = Exporter::start(
        &format!("^{topic}$"),
        &groups,
        &[
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__GRANULARITY", "topic"),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__COMPAT",
                "[\"kafka_exporter\"]",
            ),
        ],
    )
    .await;
    // The same broker through the proxy, which ages the producer's last write by 20
    // minutes and hides the transaction from the coordinators' lists: a hanging
    // transaction, as the exporter sees one.
    let proxy =
        common::proxy::Proxy::start(listener(5).parse().unwrap(), listener(4).parse().unwrap())
            .await;
    proxy.fake_hanging(Duration::from_secs(20 * 60));
    let hanging = Exporter::start_with(config_from_env(
        [
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__NAME", "hang".to_string()),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__BOOTSTRAP_SERVERS",
                listener(5),
            ),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TOPICS__INCLUDE",
                format!("[\"^{topic}$\"]"),
            ),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__GROUPS__INCLUDE",
                format!("[\"^{committed_group}$\"]"),
            ),
            ("KAFKA_LSO_EXPORTER_INTERVAL", "1s".to_string()),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__GRANULARITY",
                "topic".to_string(),
            ),
        ]
        .map(|(k, v)| (k.to_string(), v)),
    ))
    .await;

    // Alertmanager with a webhook receiver in this process.
    let received: Arc<Mutex<Vec<Value>>> = Arc::default();
    let hook_port = free_port();
    let sink = received.clone();
    let app = axum::Router::new().route(
        "/",
        axum::routing::post(move |body: String| {
            let sink = sink.clone();
            async move {
                sink.lock()
                    .unwrap()
                    .push(serde_json::from_str(&body).unwrap());
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", hook_port))
        .await
        .unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let am_port = free_port();
    std::fs::write(
        dir.join("alertmanager.yml"),
        format!(
            "route:\n  receiver: hook\n  group_by: [alertname, kafka_cluster, topic, partition, group]\n  group_wait: 1s\n  group_interval: 1s\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n    webhook_configs:\n      - url: http://127.0.0.1:{hook_port}/\n        send_resolved: true\n"
        ),
    )
    .unwrap();
    let alertmanager = Service::start(
        "alertmanager",
        &dir,
        "prometheus-alertmanager",
        &[
            format!("--config.file={}", dir.join("alertmanager.yml").display()),
            format!("--storage.path={}", dir.join("am-data").display()),
            format!("--web.listen-address=127.0.0.1:{am_port}"),
            "--cluster.listen-address=".into(),
        ],
    );

    let rules = test_sized_rules();
    std::fs::write(dir.join("rules.yml"), rules).unwrap();
    // What kube-state-metrics says of the exporter's pod: the health dashboard sets its
    // memory against the container's limit, joined on namespace and pod.
    let kube_state_metrics = serve_text(format!(
        "# TYPE kube_pod_container_resource_limits gauge\n\
         kube_pod_container_resource_limits{{namespace=\"{NAMESPACE}\",pod=\"{POD}\",container=\"kafka-lso-exporter\",resource=\"memory\",unit=\"byte\"}} 134217728\n"
    ))
    .await;
    let prom_port = free_port();
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [{rules}]\nalerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['127.0.0.1:{am_port}']\nscrape_configs:\n  - job_name: kafka-lso-exporter\n    static_configs:\n      - targets: ['{exporter}']\n        labels: {{namespace: {NAMESPACE}, pod: {POD}, strimzi_io_cluster: {STRIMZI_CLUSTER}}}\n      - targets: ['{hanging}']\n  - job_name: kube-state-metrics\n    honor_labels: true\n    static_configs:\n      - targets: ['{kube_state_metrics}']\n",
            rules = dir.join("rules.yml").display(),
            exporter = exporter.addr,
            hanging = hanging.addr,
        ),
    )
    .unwrap();
    let prometheus_service = Service::start(
        "prometheus",
        &dir,
        "prometheus",
        &[
            format!("--config.file={}", dir.join("prometheus.yml").display()),
            format!("--storage.tsdb.path={}", dir.join("prom-data").display()),
            format!("--web.listen-address=127.0.0.1:{prom_port}"),
        ],
    );
    let prometheus = Prometheus {
        base: format!("http://127.0.0.1:{prom_port}"),
        http: reqwest::Client::new(),
    };
    let context = || {
        format!(
            "{}\n{}",
            prometheus_service.log_tail(),
            alertmanager.log_tail()
        )
    };

    // (1) Every dashboard query returns at least one series: ours, Strimzi's and
    // kafka_exporter's (the variables their pickers need included). Well within the
    // transaction's timeout (10 min): past it the coordinator aborts the transaction, and
    // a failure would also list every query that needs it.
    let mut queries = dashboard_queries(&topic);
    queries.extend(compat_dashboard_queries(
        &topic,
        &committed_group,
        &exporter.addr.to_string(),
    ));
    let pending = eventually(
        "every dashboard query to return data",
        Duration::from_secs(40),
        || async {
            let mut empty = Vec::new();
            for (panel, expr) in &queries {
                match prometheus.query(expr).await {
                    Ok(result) if !result.is_empty() => {}
                    Ok(_) => empty.push(format!("{panel}: {expr} (no series)")),
                    Err(e) => empty.push(format!("{panel}: {expr} ({e})")),
                }
            }
            if empty.is_empty() {
                Ok(())
            } else {
                let (_, body) = exporter.get("/metrics").await;
                let partitions: Vec<&str> = body
                    .lines()
                    .filter(|l| {
                        l.starts_with("kafka_partition_") || l.starts_with("kafka_topic_max")
                    })
                    .collect();
                Err(format!(
                    "{} of {} queries without data:\n{}\n{}\nthe exporter's partition series:\n{}",
                    empty.len(),
                    queries.len(),
                    empty.join("\n"),
                    context(),
                    partitions.join("\n")
                ))
            }
        },
    )
    .await;
    let () = pending;

    // `topic` granularity: partition 1 (nothing withheld) has its per-topic and
    // kafka_exporter series only, partition 0 (withheld) its own series too.
    let series = |expr: String| {
        let prometheus = &prometheus;
        async move { prometheus.query(&expr).await.map(|r| r.len()) }
    };
    for (expr, expected) in [
        (format!("kafka_partition_high_watermark{{kafka_cluster=\"test\", topic=\"{topic}\"}}"), 1),
        (format!("kafka_partition_hw_minus_lso{{kafka_cluster=\"test\", topic=\"{topic}\", partition=\"0\"}}"), 1),
        (format!("kafka_topic_partition_current_offset{{kafka_cluster=\"test\", topic=\"{topic}\"}}"), 2),
        (format!("kafka_consumergroup_committed_offset{{kafka_cluster=\"test\", group=\"{committed_group}\", topic=\"{topic}\"}}"), 1),
        (format!("kafka_consumergroup_topic_committed_offset{{kafka_cluster=\"test\", group=\"{committed_group}\", topic=\"{topic}\"}}"), 1),
    ] {
        assert_eq!(series(expr.clone()).await, Ok(expected), "{expr}");
    }

    // (2) The alerts fire, the blocked one for the read_committed group, while the group
    // between the LSO and the HW shows what a rule on the lags alone mistook for blocked:
    // LSO lag 0 and HW lag > 0 (but committed past the LSO).
    let between_looks_blocked = format!(
        "(kafka_consumergroup_hw_lag{{group=\"{between_group}\", topic=\"{topic}\", partition=\"0\"}} > 0)
          and on (kafka_cluster, group, topic, partition) (kafka_consumergroup_lso_lag == 0)
          and on (kafka_cluster, group, topic, partition) (kafka_consumergroup_committed_beyond_lso > 0)"
    );
    eventually(
        "KafkaLsoStuck, KafkaConsumerGroupBlockedByTransaction and KafkaTransactionHanging firing",
        Duration::from_secs(60),
        || async {
            let between = prometheus.query(&between_looks_blocked).await?;
            if between.is_empty() {
                return Err(format!(
                    "{between_group} not yet between the LSO and the HW in Prometheus\n{}",
                    context()
                ));
            }
            let alerts = prometheus.alerts().await;
            let firing: BTreeSet<String> = alerts
                .iter()
                .filter(|(_, state, _)| state == "firing")
                .map(|(name, _, _)| name.clone())
                .collect();
            let blocked_group_ok = alerts.iter().any(|(name, state, labels)| {
                name == "KafkaConsumerGroupBlockedByTransaction"
                    && state == "firing"
                    && labels["group"] == committed_group.as_str()
            });
            let hanging_ok = alerts.iter().any(|(name, state, labels)| {
                name == "KafkaTransactionHanging"
                    && state == "firing"
                    && labels["kafka_cluster"] == "hang"
                    && labels["topic"] == topic.as_str()
            });
            if firing.contains("KafkaLsoStuck") && blocked_group_ok && hanging_ok {
                Ok(())
            } else {
                Err(format!("firing: {firing:?}\n{}", context()))
            }
        },
    )
    .await;
    // The read_uncommitted groups are never blocked: checked again over the whole run below.
    let blocked_read_uncommitted = |labels: &Value| {
        labels["alertname"] == "KafkaConsumerGroupBlockedByTransaction"
            && (labels["group"] == uncommitted_group.as_str()
                || labels["group"] == between_group.as_str())
    };
    let alerts = prometheus.alerts().await;
    let wrong: Vec<&Value> = alerts
        .iter()
        .map(|(_, _, labels)| labels)
        .filter(|labels| blocked_read_uncommitted(labels))
        .collect();
    assert!(
        wrong.is_empty(),
        "a read_uncommitted group reported as blocked: {wrong:?}"
    );

    // (3) The webhook receives KafkaLsoStuck with the topic and partition, and
    // KafkaConsumerGroupBlockedByTransaction for the read_committed group.
    let is_blocked_notification = || {
        let received = received.lock().unwrap();
        received.iter().any(|n| {
            n["alerts"].as_array().into_iter().flatten().any(|a| {
                a["labels"]["alertname"] == "KafkaConsumerGroupBlockedByTransaction"
                    && a["labels"]["group"] == committed_group.as_str()
                    && a["status"] == "firing"
            })
        })
    };
    let is_stuck_notification = |status: &str| {
        let received = received.lock().unwrap();
        received.iter().any(|n| {
            n["status"] == status
                && n["alerts"].as_array().into_iter().flatten().any(|a| {
                    a["labels"]["alertname"] == "KafkaLsoStuck"
                        && a["labels"]["topic"] == topic.as_str()
                        && a["labels"]["partition"] == "0"
                        && a["status"] == status
                })
        })
    };
    eventually(
        "the KafkaLsoStuck and KafkaConsumerGroupBlockedByTransaction notifications at the webhook",
        Duration::from_secs(60),
        || async {
            if is_stuck_notification("firing") && is_blocked_notification() {
                Ok(())
            } else {
                Err(format!(
                    "received {} notifications\n{}",
                    received.lock().unwrap().len(),
                    context()
                ))
            }
        },
    )
    .await;

    // (4) After the commit, the alerts resolve.
    transaction
        .commit_transaction(Duration::from_secs(30))
        .unwrap();
    eventually("the alerts to resolve", Duration::from_secs(60), || async {
        let alerts = prometheus.alerts().await;
        let left: Vec<String> = alerts
            .iter()
            .filter(|(name, _, _)| {
                name == "KafkaLsoStuck" || name == "KafkaConsumerGroupBlockedByTransaction"
            })
            .map(|(name, state, labels)| format!("{name} {state} {labels}"))
            .collect();
        if left.is_empty() && is_stuck_notification("resolved") {
            Ok(())
        } else {
            Err(format!(
                "still active: {left:?}; resolved notification received: {}",
                is_stuck_notification("resolved")
            ))
        }
    })
    .await;

    // (5) Over the whole run, KafkaConsumerGroupBlockedByTransaction was active for the
    // read_committed group only: Prometheus's ALERTS series keep every evaluation in which an
    // alert was pending or firing, and no notification named a read_uncommitted group.
    let history = |group: &str| {
        format!(
            "count_over_time(ALERTS{{alertname=\"KafkaConsumerGroupBlockedByTransaction\", group=\"{group}\"}}[1h])"
        )
    };
    assert!(
        !prometheus
            .query(&history(&committed_group))
            .await
            .unwrap()
            .is_empty(),
        "ALERTS has no history of the blocked group: the check below would prove nothing"
    );
    for group in [&uncommitted_group, &between_group] {
        let active = prometheus.query(&history(group)).await.unwrap();
        assert!(
            active.is_empty(),
            "KafkaConsumerGroupBlockedByTransaction was active for the read_uncommitted group {group}: {active:?}"
        );
    }
    let notified: Vec<Value> = received
        .lock()
        .unwrap()
        .iter()
        .flat_map(|n| n["alerts"].as_array().cloned().unwrap_or_default())
        .filter(|a| blocked_read_uncommitted(&a["labels"]))
        .collect();
    assert!(
        notified.is_empty(),
        "notified as blocked although read_uncommitted: {notified:?}"
    );

    drop(prometheus_service);
    drop(alertmanager);
    exporter.stop().await;
    hanging.stop().await;
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The consumption and production rates and the catch-up estimate from Prometheus's side
/// (the mixin's recording rules) agree with the exporter's own on a steady workload: a
/// producer writing 20 records a second to each of two partitions, and a group committing
/// 40 a second on each, 2,000 behind at the start; both over a 20 s window.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_recording_rules_agree_with_the_exporters_rates_on_a_steady_workload() {
    require_kafka();
    let dir = std::env::temp_dir().join(unique("kle-rates"));
    std::fs::create_dir_all(&dir).unwrap();
    let topic = unique("rates");
    let group = unique("rates-g");
    create_topic(&topic, 2).await;
    let producer = plain_producer();
    for partition in 0..2 {
        send(&producer, &topic, partition, 2_500);
    }
    wait_high_watermark(&topic, 1, 2_500);
    let committer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap())
        .set("group.id", &group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    // Produced and committed every 250 ms: 5 records and 10 offsets per partition.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let (stop, topic) = (stop.clone(), topic.clone());
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut tick = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                tick += 1;
                for partition in 0..2 {
                    send(&producer, &topic, partition, 5);
                }
                let mut commit = TopicPartitionList::new();
                for partition in 0..2 {
                    commit
                        .add_partition_offset(
                            &topic,
                            partition,
                            Offset::Offset(500 + 10 * tick as i64),
                        )
                        .unwrap();
                }
                committer.commit(&commit, CommitMode::Sync).expect("commit");
                let next = started + Duration::from_millis(250 * tick);
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
        })
    };

    let exporter = Exporter::start(
        &format!("^{topic}$"),
        &format!("^{group}$"),
        &[
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__GRANULARITY", "topic"),
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__GROUPS__RATE_WINDOW", "20s"),
        ],
    )
    .await;
    let rules = test_sized_rules();
    assert!(
        rules.contains("deriv20s"),
        "the rules' window is not the test's:\n{rules}"
    );
    std::fs::write(dir.join("rules.yml"), rules).unwrap();
    let prom_port = free_port();
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [{rules}]\nscrape_configs:\n  - job_name: kafka-lso-exporter\n    static_configs:\n      - targets: ['{exporter}']\n",
            rules = dir.join("rules.yml").display(),
            exporter = exporter.addr,
        ),
    )
    .unwrap();
    let prometheus_service = Service::start(
        "prometheus",
        &dir,
        "prometheus",
        &[
            format!("--config.file={}", dir.join("prometheus.yml").display()),
            format!("--storage.tsdb.path={}", dir.join("prom-data").display()),
            format!("--web.listen-address=127.0.0.1:{prom_port}"),
        ],
    );
    let prometheus = Prometheus {
        base: format!("http://127.0.0.1:{prom_port}"),
        http: reqwest::Client::new(),
    };
    let value = |expr: String| {
        let prometheus = &prometheus;
        async move {
            let result = prometheus.query(&expr).await?;
            match result.as_slice() {
                [one] => one["value"][1]
                    .as_str()
                    .and_then(|v| v.parse::<f64>().ok())
                    .ok_or_else(|| format!("{expr}: {one}")),
                other => Err(format!("{expr}: {} series", other.len())),
            }
        }
    };
    let of = format!("{{group=\"{group}\", topic=\"{topic}\"}}");
    let topic_of = format!("{{topic=\"{topic}\"}}");
    // Both windows full: the exporter's rates and Prometheus's deriv() over 20 s.
    let warmed = Instant::now() + Duration::from_secs(25);
    let figures = eventually("the two sides to agree", Duration::from_secs(90), || async {
        let exporter_consume = value(format!("kafka_consumergroup_topic_consume_rate{of}")).await?;
        let exporter_produce = value(format!("kafka_consumergroup_topic_produce_rate{of}")).await?;
        let exporter_catchup = value(format!("kafka_consumergroup_topic_catchup_seconds{of}")).await?;
        let consume = value(format!("kafka_consumergroup_topic:committed_offset:deriv20s{of}")).await?;
        let produce = value(format!("kafka_topic:last_stable_offset:deriv20s{topic_of}")).await?;
        let catchup = value(format!("kafka_consumergroup_topic:lso_lag_catchup_seconds:deriv20s{of}")).await?;
        let figures = format!(
            "consume {exporter_consume:.1} / {consume:.1}, produce {exporter_produce:.1} / {produce:.1}, \
             catch-up {exporter_catchup:.1} s / {catchup:.1} s (exporter / recording rules)\n{}",
            prometheus_service.log_tail()
        );
        if Instant::now() < warmed {
            return Err(format!("warming up: {figures}"));
        }
        let near = |a: f64, b: f64, within: f64| (a - b).abs() <= within * b.abs().max(1e-9);
        // The workload's own rates: 80 offsets a second committed, 40 produced.
        if !(near(exporter_consume, 80.0, 0.15) && near(exporter_produce, 40.0, 0.15)) {
            return Err(format!("not steady yet: {figures}"));
        }
        if near(consume, exporter_consume, 0.1)
            && near(produce, exporter_produce, 0.1)
            && near(catchup, exporter_catchup, 0.15)
        {
            Ok(figures)
        } else {
            Err(format!("they disagree: {figures}"))
        }
    })
    .await;
    eprintln!("agreed: {figures}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    load.join().unwrap();
    exporter.stop().await;
}
