//! The exporter against the local broker's GSSAPI listener (`scripts/kafka-local`: an MIT
//! KDC of realm KAFKA.LOCAL, the SASL_PLAINTEXT listener with GSSAPI at port+8 of the
//! PLAINTEXT bootstrap port, sessions that end after 10 s). Both clients authenticate with
//! the `client` properties that `scripts/kafka-local client-config gssapi` prints, and find
//! the realm through the `KRB5_CONFIG` of its comment line: librdkafka (Cyrus SASL, `kinit`)
//! and the exporter's own client (GSS-API, tickets from the keytab in memory).
//!
//! Sampling and forensics work; sessions re-authenticate without a failed cycle; a missing
//! keytab and a stopped KDC are counted, logged with the GSS-API's words and recovered
//! from. The tests that stop the KDC start it again, also when they fail.
//!
//! A broker without the GSSAPI listener fails these tests (restart it with
//! `scripts/kafka-local stop && scripts/kafka-local start`); they never skip.
#![cfg(feature = "gssapi")]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::binary::Binary;
use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::Producer;
use tokio::sync::RwLock;

/// How long a cluster may take to show its first values.
const FIRST_SAMPLE: Duration = Duration::from_secs(30);

/// The broker's sessions on the GSSAPI listener (`connections.max.reauth.ms`).
const SESSION: Duration = Duration::from_secs(10);

/// Held shared by the tests that need the KDC, exclusively by those that stop it.
static KDC: RwLock<()> = RwLock::const_new(());

/// `scripts/kafka-local ARGS` for the broker under test: its `KAFKA_LOCAL_PORT` is the
/// port of `KAFKA_BOOTSTRAP`. Fails the test when the script fails.
fn kafka_local(args: &[&str]) -> String {
    let plain = bootstrap();
    let port = plain
        .split(',')
        .next()
        .and_then(|first| first.rsplit_once(':'))
        .map(|(_, port)| port.to_string())
        .unwrap_or_else(|| panic!("bootstrap {plain:?} is not host:port"));
    let output = Command::new(repo_root().join("scripts/kafka-local"))
        .args(args)
        .env("KAFKA_LOCAL_PORT", port)
        .output()
        .expect("run scripts/kafka-local");
    assert!(
        output.status.success(),
        "scripts/kafka-local {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// The GSSAPI listener of the broker under test.
fn gssapi_bootstrap() -> String {
    listener(8)
}

/// The `client` properties of `scripts/kafka-local client-config gssapi`. The first call
/// points `KRB5_CONFIG` at the krb5.conf its comment line names, for this process and the
/// binaries it starts; every test calls this before anything in it uses Kerberos.
fn gssapi_client() -> Vec<(String, String)> {
    static PRINTED: OnceLock<String> = OnceLock::new();
    let printed = PRINTED.get_or_init(|| {
        let printed = kafka_local(&["client-config", "gssapi"]);
        let krb5_conf = printed
            .lines()
            .find_map(|line| line.strip_prefix("# KRB5_CONFIG="))
            .unwrap_or_else(|| panic!("no KRB5_CONFIG comment line in:\n{printed}"));
        assert!(
            std::path::Path::new(krb5_conf).is_file(),
            "{krb5_conf} does not exist"
        );
        // Set before any thread starts where scripts/test runs the tests; changing the
        // environment while other threads read it is a race, so only when it differs.
        if std::env::var("KRB5_CONFIG").as_deref() != Ok(krb5_conf) {
            std::env::set_var("KRB5_CONFIG", krb5_conf);
        }
        printed
    });
    printed
        .lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .map(|line| {
            let (key, value) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("not key=value: {line:?}"));
            (key.to_string(), value.to_string())
        })
        .collect()
}

/// The keytab of `client`.
fn keytab_of(client: &[(String, String)]) -> PathBuf {
    client
        .iter()
        .find(|(k, _)| k == "sasl.kerberos.keytab")
        .map(|(_, v)| PathBuf::from(v))
        .expect("a keytab in the client configuration")
}

/// `client` with `key` set to `value`.
fn with(mut client: Vec<(String, String)>, key: &str, value: &str) -> Vec<(String, String)> {
    client.retain(|(k, _)| k != key);
    client.push((key.to_string(), value.to_string()));
    client
}

/// Fails the test unless librdkafka reads metadata through the GSSAPI listener with
/// `client`: the listener exists, the KDC answers and librdkafka speaks GSSAPI.
fn require_gssapi_listener(client: &[(String, String)]) {
    require_kafka();
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", gssapi_bootstrap());
    for (k, v) in client {
        config.set(k, v);
    }
    let consumer: BaseConsumer = config.create().expect("client");
    if let Err(e) = consumer.fetch_metadata(None, Duration::from_secs(20)) {
        panic!(
            "the GSSAPI listener at {} does not answer librdkafka: {e}. Restart the broker with \
             `scripts/kafka-local stop && scripts/kafka-local start` to get it and the KDC.",
            gssapi_bootstrap()
        );
    }
}

/// A topic with one partition: 5 plain records, then one record of a transaction left
/// open (HW 6, LSO 5). Returns the topic, the transaction's id and its producer.
async fn topic_with_an_open_transaction(prefix: &str) -> (String, String, Producer_) {
    let topic = unique(prefix);
    create_topic(&topic, 1).await;
    send(&plain_producer(), &topic, 0, 5);
    let transactional_id = unique(&format!("{prefix}-t"));
    let held = transactional_producer(&transactional_id);
    held.begin_transaction().unwrap();
    send(&held, &topic, 0, 1);
    wait_high_watermark(&topic, 0, 6);
    (topic, transactional_id, held)
}

/// The open transaction of `topic`/0 as the exporter names it, if it does.
fn open_transaction(s: &Scrape, cluster: &str, topic: &str) -> Option<BTreeMap<String, String>> {
    let p = [
        ("kafka_cluster", cluster),
        ("topic", topic),
        ("partition", "0"),
    ];
    let named = s
        .series("kafka_transaction_open_info", &p)
        .next()
        .map(|(labels, _)| labels.clone());
    named
}

fn errors(s: &Scrape, cluster: &str, stage: &str) -> f64 {
    s.value(
        "kafka_lso_exporter_errors_total",
        &[("kafka_cluster", cluster), ("stage", stage)],
    )
    .unwrap_or(0.0)
}

/// Every failure of every stage of `cluster`.
fn all_errors(s: &Scrape, cluster: &str) -> f64 {
    s.series(
        "kafka_lso_exporter_errors_total",
        &[("kafka_cluster", cluster)],
    )
    .map(|(_, value)| value)
    .sum()
}

/// The binary at `--log.level debug`, sampling every second, with `env`, and a default
/// credential cache of its own (`KRB5CCNAME`): librdkafka's `kinit` of one test, maybe as
/// another principal, does not replace the tickets of another test's process.
fn start_binary(env: &[(String, String)]) -> Binary {
    let ccache = format!(
        "FILE:{}",
        std::env::temp_dir().join(unique("krb5cc")).display()
    );
    let mut env = env.to_vec();
    env.push(("KRB5CCNAME".into(), ccache));
    Binary::start_debug(&env)
}

/// Failures are counted while Kerberos cannot work: `up 0` with failed metadata cycles
/// (librdkafka has no ticket either), or `up 1` (librdkafka's cached tickets) with the own
/// client's stages failing.
fn failing(s: &Scrape, cluster: &str) -> bool {
    let up = s.value("kafka_lso_exporter_up", &[("kafka_cluster", cluster)]);
    (up == Some(0.0) && errors(s, cluster, "metadata") >= 2.0)
        || (up == Some(1.0) && all_errors(s, cluster) >= 2.0)
}

/// Waits until the exporter names `transactional_id` again, then for three more cycles
/// without a failure.
async fn recovered(binary: &Binary, cluster: &str, topic: &str, transactional_id: &str) {
    let labels = binary
        .wait_for(
            "the open transaction named again",
            Duration::from_secs(90),
            |s| {
                (s.value("kafka_lso_exporter_up", &[("kafka_cluster", cluster)]) == Some(1.0))
                    .then(|| open_transaction(s, cluster, topic))
                    .flatten()
            },
        )
        .await;
    assert_eq!(labels["transactional_id"], transactional_id);
    let before = all_errors(&binary.scrape().await, cluster);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = binary.scrape().await;
    assert_eq!(
        all_errors(&after, cluster),
        before,
        "still failing:\n{}",
        after.text
    );
}

/// Every series through the GSSAPI listener equals what PLAINTEXT shows on the same
/// broker, at rest and with a transaction open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gssapi_shows_what_plaintext_shows() {
    let client = gssapi_client();
    let _kdc = KDC.read().await;
    require_gssapi_listener(&client);
    listeners::same_as_plaintext(&[("gssapi", gssapi_bootstrap(), client)]).await;
}

/// (a) The exporter with the printed client configuration samples the topic's HW and LSO,
/// and its own client names the open transaction (forensics).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_and_names_an_open_transaction_through_gssapi() {
    let client = gssapi_client();
    let _kdc = KDC.read().await;
    require_gssapi_listener(&client);
    let (topic, transactional_id, held) = topic_with_an_open_transaction("krb-fx").await;
    let cluster = "kerberos";
    let exporter = Exporter::start_with(load(cluster_env(
        0,
        cluster,
        &gssapi_bootstrap(),
        &topic,
        &client,
    )))
    .await;
    let p = [
        ("kafka_cluster", cluster),
        ("topic", topic.as_str()),
        ("partition", "0"),
    ];
    let labels = exporter
        .wait_for(
            "HW 6, LSO 5 and the open transaction named through GSSAPI",
            FIRST_SAMPLE,
            |s| {
                (s.value("kafka_lso_exporter_up", &[("kafka_cluster", cluster)]) == Some(1.0)
                    && s.value("kafka_partition_high_watermark", &p) == Some(6.0)
                    && s.value("kafka_partition_last_stable_offset", &p) == Some(5.0))
                .then(|| open_transaction(s, cluster, &topic))
                .flatten()
            },
        )
        .await;
    assert_eq!(labels["transactional_id"], transactional_id);
    assert_eq!(labels["start_offset"], "5");
    let scrape = exporter.scrape().await;
    for stage in ["metadata", "describe_producers", "describe_transactions"] {
        assert_eq!(
            errors(&scrape, cluster, stage),
            0.0,
            "{stage}:\n{}",
            scrape.text
        );
    }
    held.abort_transaction(Duration::from_secs(30)).unwrap();
    exporter.stop().await;
}

/// (b) 40 s of sampling every second across at least three ends of the broker's 10 s
/// sessions, as exporter-brief@KAFKA.LOCAL, whose tickets last 20 s: the own client opens
/// a new, re-authenticated connection before each session ends, with tickets it renews
/// from the keytab, and no cycle fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_tickets_end_and_are_renewed_without_a_failed_cycle() {
    let client = gssapi_client();
    let _kdc = KDC.read().await;
    require_gssapi_listener(&client);
    let brief = keytab_of(&client).with_file_name("exporter-brief.keytab");
    assert!(
        brief.is_file(),
        "no {}: this KDC predates it; delete its directory and restart the broker",
        brief.display()
    );
    // librdkafka renews by kinit every 5 s instead of every minute.
    let client = with(
        with(
            with(
                client,
                "sasl.kerberos.principal",
                "exporter-brief@KAFKA.LOCAL",
            ),
            "sasl.kerberos.keytab",
            &brief.display().to_string(),
        ),
        "sasl.kerberos.min.time.before.relogin",
        "5000",
    );
    let (topic, transactional_id, held) = topic_with_an_open_transaction("krb-reauth").await;
    let cluster = "kerberos";
    let binary = start_binary(&cluster_env(
        0,
        cluster,
        &gssapi_bootstrap(),
        &topic,
        &client,
    ));
    binary
        .wait_for("the open transaction named", FIRST_SAMPLE, |s| {
            open_transaction(s, cluster, &topic)
        })
        .await;
    let start = binary.scrape().await;
    let failures = all_errors(&start, cluster);
    let run = 4 * SESSION;
    let until = Instant::now() + run;
    let mut scrapes = 0;
    while Instant::now() < until {
        let s = binary.scrape().await;
        assert_eq!(
            s.value("kafka_lso_exporter_up", &[("kafka_cluster", cluster)]),
            Some(1.0),
            "down after {scrapes} scrapes:\n{}",
            s.text
        );
        assert_eq!(
            all_errors(&s, cluster),
            failures,
            "a stage failed after {scrapes} scrapes:\n{}",
            s.text
        );
        let named = open_transaction(&s, cluster, &topic);
        assert_eq!(
            named.as_ref().map(|l| l["transactional_id"].as_str()),
            Some(transactional_id.as_str()),
            "{}",
            s.text
        );
        scrapes += 1;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    held.abort_transaction(Duration::from_secs(30)).unwrap();
    let log = binary.kill();
    let address = format!("broker={}", gssapi_bootstrap());
    let handshakes = log
        .lines()
        .filter(|l| l.contains("Sent SaslHandshakeRequest") && l.contains(&address))
        .count();
    // The first connection and at least one new one per session that ended.
    assert!(
        handshakes >= 4,
        "{handshakes} GSSAPI authentications in {run:?}; log:\n{log}"
    );
    // Each before its session ended (KIP-368's lifetime in SaslAuthenticate): the broker
    // never had to close a connection under a request.
    assert!(
        !log.lines()
            .any(|l| l.contains("a pooled connection failed") && l.contains(&address)),
        "the broker closed a connection whose session had ended:\n{log}"
    );
    assert!(
        !log.contains("cannot reach the cluster"),
        "a failed cycle:\n{log}"
    );
}

/// (c) A keytab that does not exist (yet): failures counted, a log line in GSS-API's
/// words naming the keytab; once the keytab appears, the own client authenticates again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_keytab_is_counted_and_recovered_from_when_it_appears() {
    let client = gssapi_client();
    let _kdc = KDC.read().await;
    require_gssapi_listener(&client);
    let keytab = keytab_of(&client);
    let dir = std::env::temp_dir().join(unique("krb-keytab"));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("exporter.keytab");
    let missing_path = missing.display().to_string();
    // librdkafka runs kinit every 2 s instead of every minute, so that it too recovers
    // within the test.
    let client = with(
        with(client, "sasl.kerberos.keytab", &missing_path),
        "sasl.kerberos.min.time.before.relogin",
        "2000",
    );
    let (topic, transactional_id, held) = topic_with_an_open_transaction("krb-keytab").await;
    let cluster = "kerberos";
    let binary = failing_binary(cluster, &topic, &client).await;
    let log = binary.log();
    assert!(
        log.lines()
            .any(|l| l.contains("GSSAPI: cannot acquire credentials") && l.contains(&missing_path)),
        "no line names GSSAPI and the missing keytab:\n{log}"
    );

    std::fs::copy(&keytab, &missing).unwrap();
    recovered(&binary, cluster, &topic, &transactional_id).await;
    held.abort_transaction(Duration::from_secs(30)).unwrap();
    drop(binary);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The binary on the GSSAPI listener with `client`, once it counts failures.
async fn failing_binary(cluster: &str, topic: &str, client: &[(String, String)]) -> Binary {
    let binary = start_binary(&cluster_env(0, cluster, &gssapi_bootstrap(), topic, client));
    binary
        .wait_for("failures counted", FIRST_SAMPLE, |s| {
            failing(s, cluster).then_some(())
        })
        .await;
    binary
}

/// Starts the KDC when dropped: a test that stopped it leaves it running, pass or fail.
struct KdcRestart;

impl Drop for KdcRestart {
    fn drop(&mut self) {
        kafka_local(&["kdc", "start"]);
    }
}

/// (c) The KDC stopped: a fresh process has no ticket and cannot get one, the failures are
/// counted with the GSS-API's words; once the KDC is back, the own client authenticates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_kdc_is_counted_and_recovered_from_when_it_returns() {
    let client = with(
        gssapi_client(),
        "sasl.kerberos.min.time.before.relogin",
        "2000",
    );
    let _kdc = KDC.write().await;
    require_gssapi_listener(&client);
    let (topic, transactional_id, held) = topic_with_an_open_transaction("krb-kdc").await;
    let restart = KdcRestart;
    kafka_local(&["kdc", "stop"]);
    let cluster = "kerberos";
    let binary = failing_binary(cluster, &topic, &client).await;
    let log = binary.log();
    assert!(
        log.lines()
            .any(|l| l.contains("GSSAPI: ") && l.contains("Cannot contact any KDC")),
        "no line names GSSAPI and the unreachable KDC:\n{log}"
    );

    drop(restart);
    recovered(&binary, cluster, &topic, &transactional_id).await;
    held.abort_transaction(Duration::from_secs(30)).unwrap();
}

/// The own client's connection: the right settings authenticate and negotiate
/// DescribeProducers; a keytab that does not exist and a service the realm does not know
/// are authentication errors in GSS-API's words, naming GSSAPI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_own_client_reports_gssapi_failures_as_authentication_errors() {
    use kafka_lso_exporter::kafka::wire::{Connection, Security, WireError};
    use kafka_protocol::messages::DescribeProducersRequest;
    let client = gssapi_client();
    let _kdc = KDC.read().await;
    require_gssapi_listener(&client);
    let open = |client: Vec<(String, String)>| async move {
        let security =
            Security::from_properties(&client.into_iter().collect()).expect("GSSAPI is supported");
        Connection::open(&gssapi_bootstrap(), &security).await
    };
    let connection = open(client.clone()).await.unwrap_or_else(|e| panic!("{e}"));
    assert!(connection.version::<DescribeProducersRequest>().is_some());

    let missing = std::env::temp_dir()
        .join(unique("krb-none"))
        .join("exporter.keytab")
        .display()
        .to_string();
    let unknown_service = with(client.clone(), "sasl.kerberos.service.name", "nobody");
    for (settings, expected) in [
        (
            with(client.clone(), "sasl.kerberos.keytab", &missing),
            &*format!("with keytab {missing}: "),
        ),
        (
            with(client.clone(), "sasl.kerberos.keytab", &missing),
            "the keytab cannot be read: No such file or directory",
        ),
        (
            unknown_service,
            "nobody/127.0.0.1@KAFKA.LOCAL not found in Kerberos database",
        ),
    ] {
        let error = match open(settings).await {
            Ok(_) => panic!("authenticated, expected {expected:?}"),
            Err(error) => error,
        };
        assert!(
            matches!(error, WireError::Authentication { .. }),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains("SASL authentication failed: GSSAPI: "),
            "{message}"
        );
        assert!(message.contains(expected), "{message}");
    }
}
