//! The exporter against secured listeners of the local broker (`scripts/kafka-local`):
//! SASL_PLAINTEXT with SCRAM on port+2, SSL on port+3 and SSL that requires a client
//! certificate on port+50 of the PLAINTEXT bootstrap port. Sampling works through them;
//! a wrong password or a refused certificate makes the cluster `up 0` with
//! errors counted while the process keeps serving; and no password ever shows in
//! `/metrics`, `/`, `/readyz` or the logs, even at debug level with librdkafka's own
//! `debug=all` output.
//!
//! A broker without these listeners fails these tests (restart it with
//! `scripts/kafka-local stop && scripts/kafka-local start`); they never skip.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::binary::Binary;
use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// The SCRAM user `scripts/kafka-local` creates (SCRAM-SHA-512 and SCRAM-SHA-256).
const USER: &str = "exporter";
const PASSWORD: &str = "exporter-secret";

/// The line of librdkafka's configuration dump (`debug=all`) that names the password.
const CONFIG_DUMP: &str = "sasl.password = [redacted]";

/// How long a cluster may take to show its first values.
const FIRST_SAMPLE: Duration = Duration::from_secs(30);

/// The CA certificate of the SSL listener (`scripts/kafka-local tls-ca`).
fn ca_pem() -> PathBuf {
    let home = std::env::var_os("KAFKA_LOCAL_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".cache/kafka"));
    let path = home.join("tls/ca.pem");
    assert!(
        path.is_file(),
        "no CA certificate at {}: the broker has no SSL listener yet. Restart it with \
         `scripts/kafka-local stop && scripts/kafka-local start`.",
        path.display()
    );
    path
}

fn scram_client(mechanism: &str, password: &str) -> Vec<(String, String)> {
    [
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanisms", mechanism),
        ("sasl.username", USER),
        ("sasl.password", password),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Adds librdkafka's own debug output (`debug=all`) to the exporter's debug level, so the
/// log under test holds everything the client can log, its configuration dump included.
fn with_librdkafka_debug(mut client: Vec<(String, String)>) -> Vec<(String, String)> {
    client.push(("debug".into(), "all".into()));
    client
}

fn ssl_client(ca: &Path) -> Vec<(String, String)> {
    vec![
        ("security.protocol".into(), "SSL".into()),
        ("ssl.ca.location".into(), ca.display().to_string()),
    ]
}

/// Fails the test unless a client with `client` settings reads metadata through
/// `bootstrap`: the listener exists and accepts these settings. Keeps the negative tests
/// honest: their `up 0` must come from the wrong setting, not from a missing listener.
fn require_listener(what: &str, bootstrap: &str, client: &[(String, String)]) {
    require_kafka();
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (k, v) in client {
        config.set(k, v);
    }
    let consumer: BaseConsumer = config.create().expect("client");
    if let Err(e) = consumer.fetch_metadata(None, Duration::from_secs(15)) {
        panic!(
            "the {what} listener at {bootstrap} does not answer: {e}. Restart the broker with \
             `scripts/kafka-local stop && scripts/kafka-local start` to get every listener."
        );
    }
}

/// A topic with one partition holding `records` plain records.
async fn topic_with(prefix: &str, records: usize) -> String {
    let topic = unique(prefix);
    create_topic(&topic, 1).await;
    send(&plain_producer(), &topic, 0, records);
    topic
}

/// Waits until `cluster` is up with the topic's high watermark at `hw`.
async fn wait_sampled(exporter: &Exporter, cluster: &str, topic: &str, hw: f64) {
    let p = [
        ("kafka_cluster", cluster),
        ("topic", topic),
        ("partition", "0"),
    ];
    exporter
        .wait_for(
            &format!("cluster {cluster} up with {topic}/0 at HW {hw}"),
            FIRST_SAMPLE,
            |s| {
                (s.value("kafka_lso_exporter_up", &[("kafka_cluster", cluster)]) == Some(1.0)
                    && s.value("kafka_partition_high_watermark", &p) == Some(hw)
                    && s.value("kafka_partition_last_stable_offset", &p) == Some(hw))
                .then_some(())
            },
        )
        .await;
}

async fn sampled_through_scram(mechanism: &str) {
    require_listener(
        "SASL_PLAINTEXT",
        &sasl_bootstrap(),
        &scram_client(mechanism, PASSWORD),
    );
    let topic = topic_with("sec-scram", 5).await;
    let exporter = Exporter::start_with(load(cluster_env(
        0,
        "scram",
        &sasl_bootstrap(),
        &topic,
        &scram_client(mechanism, PASSWORD),
    )))
    .await;
    wait_sampled(&exporter, "scram", &topic, 5.0).await;
    assert_eq!(exporter.get("/readyz").await.0, 200);
    exporter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_through_sasl_scram_sha_512() {
    sampled_through_scram("SCRAM-SHA-512").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_through_sasl_scram_sha_256() {
    sampled_through_scram("SCRAM-SHA-256").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_through_ssl_with_the_ca() {
    let ca = ca_pem();
    require_listener("SSL", &ssl_bootstrap(), &ssl_client(&ca));
    let topic = topic_with("sec-ssl", 5).await;
    let exporter = Exporter::start_with(load(cluster_env(
        0,
        "tls",
        &ssl_bootstrap(),
        &topic,
        &ssl_client(&ca),
    )))
    .await;
    wait_sampled(&exporter, "tls", &topic, 5.0).await;
    assert_eq!(exporter.get("/readyz").await.0, 200);
    exporter.stop().await;
}

/// The broker's certificate is verified: without the local CA the handshake fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssl_without_the_ca_is_refused() {
    let ca = ca_pem();
    require_listener("SSL", &ssl_bootstrap(), &ssl_client(&ca));
    let topic = topic_with("sec-ssl-noca", 5).await;
    let exporter = Exporter::start_with(load(cluster_env(
        0,
        "tls",
        &ssl_bootstrap(),
        &topic,
        &[("security.protocol".into(), "SSL".into())],
    )))
    .await;
    let cluster = [("kafka_cluster", "tls")];
    let metadata = [("kafka_cluster", "tls"), ("stage", "metadata")];
    exporter
        .wait_for("up 0 with metadata errors", FIRST_SAMPLE, |s| {
            (s.value("kafka_lso_exporter_up", &cluster) == Some(0.0)
                && s.value("kafka_lso_exporter_errors_total", &metadata)
                    .is_some_and(|n| n >= 2.0))
            .then_some(())
        })
        .await;
    let scrape = exporter.scrape().await;
    assert_eq!(
        scrape
            .series("kafka_partition_high_watermark", &cluster)
            .count(),
        0,
        "{}",
        scrape.text
    );
    exporter.stop().await;
}

/// The files of the listener that requires a client certificate (port+50, signed by the
/// second CA of a two-CA bundle): CA bundle, certificate, key.
fn mtls_files() -> (PathBuf, PathBuf, PathBuf) {
    let dir = ca_pem().with_file_name("mtls");
    let files = (
        dir.join("ca-bundle.pem"),
        dir.join("client.pem"),
        dir.join("client.key"),
    );
    assert!(
        files.0.is_file() && files.1.is_file() && files.2.is_file(),
        "no client certificate in {}: the broker has no MTLS listener yet. Restart it with \
         `scripts/kafka-local stop && scripts/kafka-local start`.",
        dir.display()
    );
    files
}

fn mtls_client(ca: &Path, cert: Option<(&Path, &Path)>) -> Vec<(String, String)> {
    let mut client = ssl_client(ca);
    if let Some((cert, key)) = cert {
        client.push((
            "ssl.certificate.location".into(),
            cert.display().to_string(),
        ));
        client.push(("ssl.key.location".into(), key.display().to_string()));
    }
    client
}

/// A listener that requires a client certificate refuses a client without one, and one
/// whose certificate no CA of its trusts signed, with a TLS alert: both are refused
/// credentials (`feature_up{feature="authentication"} 0`, a refusal of cause
/// `authentication`, `/` naming the certificate), as a wrong password is; the right
/// certificate is sampled beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_the_brokers_refuse_is_an_authentication_failure() {
    let mtls = listener(50);
    let (ca, cert, key) = mtls_files();
    require_listener("MTLS", &mtls, &mtls_client(&ca, Some((&cert, &key))));
    // A certificate of its own, signed by no CA the broker trusts.
    let dir = std::env::temp_dir().join(unique("stranger"));
    std::fs::create_dir_all(&dir).unwrap();
    let (stranger, stranger_key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=stranger", "-keyout"])
        .arg(&stranger_key)
        .arg("-out")
        .arg(&stranger)
        .output()
        .expect("openssl");
    assert!(made.status.success(), "{made:?}");

    let topic = topic_with("sec-mtls", 5).await;
    let mut env = cluster_env(
        0,
        "mtls",
        &mtls,
        &topic,
        &mtls_client(&ca, Some((&cert, &key))),
    );
    env.extend(cluster_env(
        1,
        "nocert",
        &mtls,
        &topic,
        &mtls_client(&ca, None),
    ));
    env.extend(cluster_env(
        2,
        "stranger",
        &mtls,
        &topic,
        &mtls_client(&ca, Some((&stranger, &stranger_key))),
    ));
    let exporter = Exporter::start_with(load(env)).await;
    wait_sampled(&exporter, "mtls", &topic, 5.0).await;
    let refused = |s: &Scrape, cluster: &str| {
        s.value("kafka_lso_exporter_up", &[("kafka_cluster", cluster)]) == Some(0.0)
            && s.value(
                "kafka_lso_exporter_feature_up",
                &[("kafka_cluster", cluster), ("feature", "authentication")],
            ) == Some(0.0)
            && s.value(
                "kafka_lso_exporter_request_refusals_total",
                &[
                    ("kafka_cluster", cluster),
                    ("stage", "metadata"),
                    ("cause", "authentication"),
                ],
            )
            .is_some_and(|n| n >= 1.0)
    };
    exporter
        .wait_for(
            "nocert and stranger refused as credentials",
            FIRST_SAMPLE,
            |s| (refused(s, "nocert") && refused(s, "stranger")).then_some(()),
        )
        .await;
    let scrape = exporter.scrape().await;
    assert_eq!(
        scrape.value(
            "kafka_lso_exporter_feature_up",
            &[("kafka_cluster", "mtls"), ("feature", "authentication")]
        ),
        Some(1.0),
        "{}",
        scrape.text
    );
    let (_, page) = exporter.get("/").await;
    assert_eq!(
        page.matches("the brokers refuse the exporter&#39;s client certificate")
            .count(),
        2,
        "/ names the refused certificate of both clusters: {page}"
    );
    exporter.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two clusters in one exporter: a cluster that refuses the credentials does not hold
/// back the other one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_with_a_wrong_password_does_not_affect_the_other() {
    require_listener(
        "SASL_PLAINTEXT",
        &sasl_bootstrap(),
        &scram_client("SCRAM-SHA-512", PASSWORD),
    );
    let topic = topic_with("sec-two", 5).await;
    let wrong = unique("wrong-password");
    let mut env = cluster_env(0, "plain", &bootstrap(), &topic, &[]);
    env.extend(cluster_env(
        1,
        "scram",
        &sasl_bootstrap(),
        &topic,
        &scram_client("SCRAM-SHA-512", &wrong),
    ));
    let exporter = Exporter::start_with(load(env)).await;

    let plain = [
        ("kafka_cluster", "plain"),
        ("topic", topic.as_str()),
        ("partition", "0"),
    ];
    let scram = [("kafka_cluster", "scram")];
    let scram_metadata = [("kafka_cluster", "scram"), ("stage", "metadata")];
    // Several failed cycles of "scram", with "plain" sampled all along.
    exporter
        .wait_for(
            "plain up with its series, scram up 0 after 3 failed cycles",
            FIRST_SAMPLE,
            |s| {
                (s.value("kafka_lso_exporter_up", &[("kafka_cluster", "plain")]) == Some(1.0)
                    && s.value("kafka_partition_high_watermark", &plain) == Some(5.0)
                    && s.value("kafka_lso_exporter_up", &scram) == Some(0.0)
                    && s.value("kafka_lso_exporter_errors_total", &scram_metadata)
                        .is_some_and(|n| n >= 3.0))
                .then_some(())
            },
        )
        .await;
    let scrape = exporter.scrape().await;
    assert_eq!(
        scrape.value("kafka_lso_exporter_up", &[("kafka_cluster", "plain")]),
        Some(1.0)
    );
    assert_eq!(
        scrape
            .series("kafka_partition_high_watermark", &scram)
            .count(),
        0,
        "a cluster that was never reached has no partition series:\n{}",
        scrape.text
    );
    assert!(scrape
        .value(
            "kafka_lso_exporter_last_success_timestamp_seconds",
            &[("kafka_cluster", "plain")]
        )
        .is_some_and(|t| t > 0.0));
    assert!(!scrape.text.contains(&wrong), "{}", scrape.text);
    let (status, page) = exporter.get("/").await;
    assert_eq!(status, 200);
    assert!(!page.contains(&wrong), "{page}");
    // Ready (it serves), and the cluster never reached is said so.
    let (status, body) = exporter.get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("scram: down (up 0), no successful cycle yet"),
        "{body}"
    );
    assert!(!body.contains(&wrong), "{body}");
    exporter.stop().await;
}

// ---- the binary, with its logs ---------------------------------------------------------

/// The binary at `--log.level debug` with `env` and an empty config file, its standard
/// error in a file (see [`Binary`]).
fn start_binary(env: &[(String, String)]) -> Binary {
    Binary::start_debug(env)
}

/// The binary with a wrong password: `up 0`, metadata errors counted, every endpoint
/// served, and the password in none of them nor in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_counted_and_never_shown() {
    require_listener(
        "SASL_PLAINTEXT",
        &sasl_bootstrap(),
        &scram_client("SCRAM-SHA-512", PASSWORD),
    );
    let topic = topic_with("sec-wrong", 5).await;
    let wrong = unique("wrong-password");
    let binary = start_binary(&cluster_env(
        0,
        "scram",
        &sasl_bootstrap(),
        &topic,
        &with_librdkafka_debug(scram_client("SCRAM-SHA-512", &wrong)),
    ));
    let cluster = [("kafka_cluster", "scram")];
    let metadata = [("kafka_cluster", "scram"), ("stage", "metadata")];
    let scrape = binary
        .wait_for("up 0 after 3 failed cycles", FIRST_SAMPLE, |s| {
            (s.value("kafka_lso_exporter_up", &cluster) == Some(0.0)
                && s.value("kafka_lso_exporter_errors_total", &metadata)
                    .is_some_and(|n| n >= 3.0))
            .then(|| Scrape::parse(&s.text))
        })
        .await;
    assert_eq!(
        scrape
            .series("kafka_partition_high_watermark", &cluster)
            .count(),
        0,
        "{}",
        scrape.text
    );
    assert!(!scrape.text.contains(&wrong), "{}", scrape.text);

    // Still serving everything, and showing the password nowhere.
    for path in ["/metrics", "/", "/readyz", "/healthz"] {
        let (status, body) = binary
            .get(path)
            .await
            .unwrap_or_else(|| panic!("GET {path} failed"));
        assert_eq!(status, 200, "GET {path}: {body}");
        assert!(
            !body.contains(&wrong),
            "GET {path} shows the password:\n{body}"
        );
    }
    let (_, page) = binary.get("/").await.unwrap();
    assert!(
        page.contains("scram"),
        "the status page lists the cluster:\n{page}"
    );

    let log = binary.kill();
    // The log is the real one: the failure is there, at debug level, and it is the
    // broker refusing the credentials.
    assert!(
        log.contains("cannot reach the cluster"),
        "no failed cycle logged:\n{log}"
    );
    assert!(
        log.contains(" level=DEBUG "),
        "no debug lines in the log:\n{log}"
    );
    assert!(
        log.to_ascii_lowercase().contains("authentication"),
        "the log never says that authentication failed:\n{log}"
    );
    // The once-per-cycle line itself names the cause, not only librdkafka's debug output.
    assert!(
        log.lines().any(|l| l.contains("cannot reach the cluster")
            && l.to_ascii_lowercase().contains("authentication")),
        "the failed-cycle line does not name the authentication failure:\n{log}"
    );
    assert!(
        log.contains(CONFIG_DUMP),
        "librdkafka's configuration dump is missing from the log:\n{log}"
    );
    assert!(!log.contains(&wrong), "the log shows the password:\n{log}");
}

/// The binary with the right password, sampling successfully: the password is in no
/// endpoint and not in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_right_password_is_not_logged_at_debug_level() {
    require_listener(
        "SASL_PLAINTEXT",
        &sasl_bootstrap(),
        &scram_client("SCRAM-SHA-512", PASSWORD),
    );
    let topic = topic_with("sec-right", 5).await;
    let binary = start_binary(&cluster_env(
        0,
        "scram",
        &sasl_bootstrap(),
        &topic,
        &with_librdkafka_debug(scram_client("SCRAM-SHA-512", PASSWORD)),
    ));
    let p = [
        ("kafka_cluster", "scram"),
        ("topic", topic.as_str()),
        ("partition", "0"),
    ];
    binary
        .wait_for("up 1 with HW 5", FIRST_SAMPLE, |s| {
            (s.value("kafka_lso_exporter_up", &[("kafka_cluster", "scram")]) == Some(1.0)
                && s.value("kafka_partition_high_watermark", &p) == Some(5.0))
            .then_some(())
        })
        .await;
    // A few more cycles, so that debug lines of steady sampling are in the log too.
    let deadline = Instant::now() + FIRST_SAMPLE;
    while !binary.log().contains("cycle done") {
        assert!(
            Instant::now() < deadline,
            "no debug line of a finished cycle:\n{}",
            binary.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for path in ["/metrics", "/", "/readyz"] {
        let (status, body) = binary
            .get(path)
            .await
            .unwrap_or_else(|| panic!("GET {path} failed"));
        assert_eq!(status, 200, "GET {path}: {body}");
        assert!(
            !body.contains(PASSWORD),
            "GET {path} shows the password:\n{body}"
        );
    }
    let log = binary.kill();
    assert!(log.contains("first cycle done"), "{log}");
    assert!(
        log.contains(CONFIG_DUMP),
        "librdkafka's configuration dump is missing from the log:\n{log}"
    );
    assert!(
        !log.contains(PASSWORD),
        "the log shows the password:\n{log}"
    );
}

/// Holds a transaction open on a fresh topic (through the PLAINTEXT listener) and waits
/// until the exporter, connected through `bootstrap` with `client`, names it: the
/// forensics client speaks the same security settings as librdkafka.
async fn forensics_through(cluster: &str, bootstrap: &str, client: &[(String, String)]) {
    use rdkafka::producer::Producer;
    require_listener(cluster, bootstrap, client);
    let topic = topic_with("sec-fx", 5).await;
    let transactional_id = unique("sec-fx-t");
    let held = transactional_producer(&transactional_id);
    held.begin_transaction().unwrap();
    send(&held, &topic, 0, 1);
    let exporter =
        Exporter::start_with(load(cluster_env(0, cluster, bootstrap, &topic, client))).await;
    let p = [
        ("kafka_cluster", cluster),
        ("topic", topic.as_str()),
        ("partition", "0"),
    ];
    let labels = exporter
        .wait_for(
            &format!("the open transaction named through {cluster}"),
            FIRST_SAMPLE,
            |s| {
                s.series("kafka_transaction_open_info", &p)
                    .next()
                    .map(|(labels, _)| labels.clone())
            },
        )
        .await;
    assert_eq!(labels["transactional_id"], transactional_id);
    assert_eq!(labels["start_offset"], "5");
    let scrape = exporter.scrape().await;
    for stage in ["describe_producers", "describe_transactions"] {
        assert_eq!(
            scrape.value(
                "kafka_lso_exporter_errors_total",
                &[("kafka_cluster", cluster), ("stage", stage)]
            ),
            Some(0.0),
            "{stage} errors through {cluster}"
        );
    }
    held.abort_transaction(Duration::from_secs(30)).unwrap();
    exporter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forensics_through_sasl_scram_sha_512() {
    forensics_through(
        "scram512",
        &sasl_bootstrap(),
        &scram_client("SCRAM-SHA-512", PASSWORD),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forensics_through_sasl_scram_sha_256() {
    forensics_through(
        "scram256",
        &sasl_bootstrap(),
        &scram_client("SCRAM-SHA-256", PASSWORD),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forensics_through_ssl_with_the_ca() {
    forensics_through("ssl", &ssl_bootstrap(), &ssl_client(&ca_pem())).await;
}

/// The forensics client's own connection: a wrong SCRAM password is an authentication
/// error that says so and never contains the password; the right one connects and
/// negotiates DescribeProducers; SSL without the CA is a TLS error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forensics_client_reports_authentication_and_tls_errors() {
    use kafka_lso_exporter::kafka::wire::{Connection, Security, WireError};
    use kafka_protocol::messages::DescribeProducersRequest;
    require_listener(
        "SASL_PLAINTEXT",
        &sasl_bootstrap(),
        &scram_client("SCRAM-SHA-512", PASSWORD),
    );
    let properties = |client: Vec<(String, String)>| -> std::collections::BTreeMap<String, String> {
        client.into_iter().collect()
    };
    let wrong = "not-the-exporter-secret";
    let security = Security::from_properties(&properties(scram_client("SCRAM-SHA-512", wrong)))
        .expect("SCRAM is supported");
    let error = match Connection::open(&sasl_bootstrap(), &security).await {
        Ok(_) => panic!("a wrong password authenticated"),
        Err(error) => error,
    };
    assert!(
        matches!(error, WireError::Authentication { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("SASL authentication failed"), "{message}");
    assert!(
        !message.contains(wrong) && !message.contains(PASSWORD),
        "{message}"
    );

    for mechanism in ["SCRAM-SHA-512", "SCRAM-SHA-256"] {
        let security =
            Security::from_properties(&properties(scram_client(mechanism, PASSWORD))).unwrap();
        let connection = Connection::open(&sasl_bootstrap(), &security)
            .await
            .unwrap_or_else(|e| panic!("{mechanism}: {e}"));
        assert!(connection.version::<DescribeProducersRequest>().is_some());
    }

    let no_ca = properties(vec![("security.protocol".into(), "SSL".into())]);
    let security = Security::from_properties(&no_ca).unwrap();
    match Connection::open(&ssl_bootstrap(), &security).await {
        Ok(_) => panic!("an unknown CA was trusted"),
        Err(error) => assert!(matches!(error, WireError::Tls { .. }), "{error:?}"),
    }
    let unsupported = properties(vec![
        ("security.protocol".into(), "SASL_SSL".into()),
        ("sasl.mechanism".into(), "GSSAPI".into()),
    ]);
    let gssapi = Security::from_properties(&unsupported);
    // Without the cargo feature `gssapi`, a sentence that names it (tests/kerberos.rs
    // covers the feature).
    #[cfg(not(feature = "gssapi"))]
    {
        let reason = gssapi.unwrap_err();
        assert!(reason.contains("GSSAPI is not supported"), "{reason}");
        assert!(reason.contains("cargo feature `gssapi`"), "{reason}");
    }
    #[cfg(feature = "gssapi")]
    assert!(gssapi.is_ok(), "{gssapi:?}");
}
