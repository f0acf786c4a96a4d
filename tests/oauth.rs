//! The exporter against the OAUTHBEARER listeners of the local broker
//! (`scripts/kafka-local`): unsecured JWTs on port+6 and RS256 JWTs of a loopback OIDC
//! token endpoint, checked by the broker against its JWKS, on port+7. Both end SASL
//! sessions after 10 s (KIP-368).
//!
//! Every metric family, forensics, exact lag and time lag among them, equals what the
//! PLAINTEXT listener shows on the same broker, at rest and with a transaction held open.
//! Bad credentials (a wrong client secret, the token endpoint down, a malformed or
//! expired token file) make the cluster `up 0` with a log line naming OAUTHBEARER and the
//! cause, never the secret or the token, and the exporter recovers by itself once the
//! cause is fixed.
//!
//! A broker without these listeners fails these tests (restart it with
//! `scripts/kafka-local stop && scripts/kafka-local start`); they never skip.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::binary::Binary;
use common::*;

const FIRST_SAMPLE: Duration = Duration::from_secs(30);

/// The port of the token/JWKS endpoint `scripts/kafka-local` runs (KAFKA_LOCAL_PORT + 98).
fn oidc_port() -> u16 {
    listener(98).rsplit_once(':').unwrap().1.parse().unwrap()
}

fn kafka_local_home() -> PathBuf {
    std::env::var_os("KAFKA_LOCAL_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".cache/kafka"))
}

fn props(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn unsecured_client() -> Vec<(String, String)> {
    props(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
        ("sasl.oauthbearer.config", "principal=exporter"),
    ])
}

fn oidc_client(url: &str, id: &str, secret: &str) -> Vec<(String, String)> {
    props(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("sasl.oauthbearer.method", "oidc"),
        ("sasl.oauthbearer.token.endpoint.url", url),
        ("sasl.oauthbearer.client.id", id),
        ("sasl.oauthbearer.client.secret", secret),
    ])
}

fn file_client(path: &Path) -> Vec<(String, String)> {
    props(&[
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanism", "OAUTHBEARER"),
        ("sasl.oauthbearer.method", "file"),
        ("sasl.oauthbearer.token.file", path.to_str().unwrap()),
    ])
}

/// The token endpoint of `scripts/kafka-local`, answering: fails the test otherwise.
fn require_oidc_listeners() {
    require_kafka();
    let url = format!("http://127.0.0.1:{}/health", oidc_port());
    let ok = std::net::TcpStream::connect(("127.0.0.1", oidc_port())).is_ok();
    assert!(
        ok,
        "no OIDC token endpoint at {url}: restart the broker with \
         `scripts/kafka-local stop && scripts/kafka-local start` to get the OAUTHBEARER listeners"
    );
    for offset in [6, 7] {
        assert!(
            std::net::TcpStream::connect(listener(offset)).is_ok(),
            "nothing listens on {} (the OAUTHBEARER listeners): restart the broker with \
             `scripts/kafka-local stop && scripts/kafka-local start`",
            listener(offset)
        );
    }
}

/// A token endpoint of the test's own (same signing key as the brokers trust, own
/// clients), on `port`; stopped when dropped.
struct Endpoint {
    child: Child,
    dir: PathBuf,
    port: u16,
    /// Its request log (one line per request).
    log: PathBuf,
    scheme: &'static str,
}

impl Endpoint {
    fn start(port: u16, clients: &str) -> Endpoint {
        let dir = std::env::temp_dir().join(unique("oidc-endpoint"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(kafka_local_home().join("oidc/key.pem"), dir.join("key.pem"))
            .expect("the key of scripts/kafka-local's OIDC endpoint");
        std::fs::write(dir.join("clients"), clients).unwrap();
        Self::spawn(dir, port)
    }

    fn spawn(dir: PathBuf, port: u16) -> Endpoint {
        Self::spawn_with(dir, port, None)
    }

    /// Serving HTTPS with the certificate of the brokers' SSL listener (CN=localhost).
    fn start_tls(port: u16, clients: &str) -> Endpoint {
        let mut endpoint = Self::start(free_port(), clients);
        let pem = endpoint.dir.join("tls.pem");
        let converted = Command::new("openssl")
            .args(["pkcs12", "-nodes", "-passin", "pass:kafka-local", "-in"])
            .arg(kafka_local_home().join("tls/broker.p12"))
            .arg("-out")
            .arg(&pem)
            .status()
            .expect("openssl");
        assert!(
            converted.success(),
            "openssl could not read the broker's key store"
        );
        let dir = std::mem::replace(&mut endpoint.dir, std::env::temp_dir().join(unique("gone")));
        drop(endpoint);
        Self::spawn_with(dir, port, Some(&pem))
    }

    fn spawn_with(dir: PathBuf, port: u16, tls: Option<&Path>) -> Endpoint {
        let log = std::env::temp_dir().join(unique("oidc-endpoint-log"));
        let mut command = Command::new("python3");
        command
            .arg(repo_root().join("scripts/oidc-endpoint"))
            .args(["--dir", dir.to_str().unwrap(), "--port", &port.to_string()]);
        if let Some(pem) = tls {
            command.arg("--tls-pem").arg(pem);
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("python3 scripts/oidc-endpoint");
        let deadline = Instant::now() + Duration::from_secs(15);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the test's OIDC endpoint did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let scheme = if tls.is_some() { "https" } else { "http" };
        Endpoint {
            child,
            dir,
            port,
            log,
            scheme,
        }
    }

    fn url(&self) -> String {
        match self.scheme {
            "https" => format!("https://localhost:{}/token", self.port),
            _ => format!("http://127.0.0.1:{}/token", self.port),
        }
    }

    /// How many tokens it was asked for.
    fn token_requests(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("POST /token"))
            .count()
    }

    fn set_clients(&self, clients: &str) {
        std::fs::write(self.dir.join("clients"), clients).unwrap();
    }

    /// A token for `sub` signed with the brokers' key, valid for `lifetime` seconds
    /// (negative: expired that long ago).
    async fn mint(&self, sub: &str, lifetime: i64) -> String {
        let url = format!(
            "http://127.0.0.1:{}/mint?sub={sub}&lifetime={lifetime}",
            self.port
        );
        let answer: serde_json::Value = reqwest::get(url).await.unwrap().json().await.unwrap();
        answer["access_token"].as_str().unwrap().to_string()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.log);
    }
}

/// [`common::cluster_env`] with the groups matching `groups` sampled too.
fn cluster_env_with_groups(
    index: usize,
    name: &str,
    bootstrap: &str,
    topic: &str,
    groups: &str,
    client: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env = cluster_env(index, name, bootstrap, topic, client);
    let key = format!("KAFKA_LSO_EXPORTER_CLUSTERS__{index}__GROUPS__INCLUDE");
    env.retain(|(k, _)| *k != key);
    env.push((key, format!("[{groups:?}]")));
    env
}

/// PLAINTEXT, OIDC-validated OAUTHBEARER and unsecured OAUTHBEARER on one broker, in one
/// exporter: the same series with the same values, at rest and with a transaction open
/// (forensics naming it, exact lag against the LSO, time lag, withheld records).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauthbearer_listeners_show_what_plaintext_shows() {
    require_oidc_listeners();
    let endpoint = format!("http://127.0.0.1:{}/token", oidc_port());
    listeners::same_as_plaintext(&[
        (
            "oidc",
            listener(7),
            oidc_client(&endpoint, "exporter", "exporter-secret"),
        ),
        ("unsecured", listener(6), unsecured_client()),
    ])
    .await;
}

// ---- bad credentials, through the binary and its log --------------------------------

fn start_binary(env: &[(String, String)]) -> Binary {
    Binary::start_debug(env)
}

async fn wait_up(binary: &Binary, cluster: &str, up: f64, what: &str) {
    binary
        .wait_for(what, FIRST_SAMPLE, |s| {
            (s.value("kafka_lso_exporter_up", &[("kafka_cluster", cluster)]) == Some(up))
                .then_some(())
        })
        .await;
}

/// Waits for a failed-cycle line that names OAUTHBEARER and contains `cause`.
async fn wait_logged(binary: &Binary, cause: &str) {
    let deadline = Instant::now() + FIRST_SAMPLE;
    loop {
        let log = binary.log();
        if log.lines().any(|l| {
            l.contains("cannot reach the cluster") && l.contains("OAUTHBEARER") && l.contains(cause)
        }) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no failed-cycle line naming OAUTHBEARER and {cause:?}:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Nothing the binary serves or logs contains any of `secrets`.
async fn shows_none(binary: &Binary, secrets: &[&str]) {
    for path in ["/metrics", "/", "/readyz"] {
        let (_, body) = binary.get(path).await.unwrap();
        for secret in secrets {
            assert!(!body.contains(secret), "GET {path} shows a secret:\n{body}");
        }
    }
    let log = binary.log();
    for secret in secrets {
        assert!(!log.contains(secret), "the log shows a secret:\n{log}");
    }
}

/// A wrong client secret: `up 0`, the endpoint's `invalid_client` in the log, the secret
/// nowhere; once the identity provider knows that secret, sampling resumes by itself.
/// Then the endpoint goes down: the cached token carries on while it is valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_client_secret_then_the_endpoint_down() {
    require_oidc_listeners();
    let topic = unique("oauth-bad");
    create_topic(&topic, 1).await;
    send(&plain_producer(), &topic, 0, 2);
    let client = unique("client");
    // Characters that form-encoding would change: sent as they are, as librdkafka does.
    let secret = format!("{}+/=~%", unique("secret-s3cr3t"));
    let endpoint = Endpoint::start(free_port(), "other other-secret 3600\n");
    let binary = start_binary(&cluster_env(
        0,
        "oidc",
        &listener(7),
        &topic,
        &oidc_client(&endpoint.url(), &client, &secret),
    ));
    wait_up(&binary, "oidc", 0.0, "up 0 with a wrong secret").await;
    wait_logged(&binary, "invalid_client").await;
    shows_none(&binary, &[&secret]).await;

    // Tokens valid for 30 s: refreshed after 22-26 s.
    endpoint.set_clients(&format!("{client} {secret} 30\n"));
    wait_up(&binary, "oidc", 1.0, "up 1 once the secret is right").await;
    // The endpoint goes away: the refresh fails, and the token in hand is used while it
    // is valid.
    drop(endpoint);
    let deadline = Instant::now() + Duration::from_secs(29);
    while !binary.log().contains("OAUTHBEARER token refresh failed") {
        assert!(
            Instant::now() < deadline,
            "no failed refresh logged:\n{}",
            binary.log()
        );
        let scrape = binary.scrape().await;
        assert_eq!(
            scrape.value("kafka_lso_exporter_up", &[("kafka_cluster", "oidc")]),
            Some(1.0),
            "down while the token was valid:\n{}",
            binary.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    wait_up(&binary, "oidc", 1.0, "still up 1 after the failed refresh").await;
    shows_none(&binary, &[&secret]).await;
    let log = binary.kill();
    assert!(!log.contains(&secret), "{log}");
}

/// The token endpoint is not running when the exporter starts: `up 0` with the
/// connection error in the log; sampling starts once the endpoint does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_endpoint_down_then_up() {
    require_oidc_listeners();
    let topic = unique("oauth-down");
    create_topic(&topic, 1).await;
    send(&plain_producer(), &topic, 0, 2);
    let port = free_port();
    let secret = unique("secret-d0wn");
    let binary = start_binary(&cluster_env(
        0,
        "oidc",
        &listener(7),
        &topic,
        &oidc_client(
            &format!("http://127.0.0.1:{port}/token"),
            "exporter",
            &secret,
        ),
    ));
    wait_up(&binary, "oidc", 0.0, "up 0 with no token endpoint").await;
    wait_logged(&binary, &format!("127.0.0.1:{port}")).await;
    let endpoint = Endpoint::start(port, &format!("exporter {secret} 3600\n"));
    wait_up(&binary, "oidc", 1.0, "up 1 once the endpoint runs").await;
    shows_none(&binary, &[&secret]).await;
    drop(endpoint);
    binary.kill();
}

/// A token file holding garbage, then an expired token, then a token signed by a key
/// the broker does not trust, then a good one: `up 0` with the cause logged each time
/// (the last one the broker's own `invalid_token`), no token in any output, and sampling
/// resumes by itself once the file holds a valid token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_file_malformed_expired_untrusted_then_valid() {
    require_oidc_listeners();
    let topic = unique("oauth-file");
    create_topic(&topic, 1).await;
    send(&plain_producer(), &topic, 0, 2);
    let endpoint = Endpoint::start(free_port(), "");
    let dir = std::env::temp_dir().join(unique("oauth-token-file"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("token");
    std::fs::write(&path, "not-a-token\n").unwrap();
    let binary = start_binary(&cluster_env(
        0,
        "file",
        &listener(7),
        &topic,
        &file_client(&path),
    ));
    wait_up(&binary, "file", 0.0, "up 0 with garbage in the token file").await;
    wait_logged(&binary, "not a JWT").await;

    let expired = endpoint.mint("exporter", -120).await;
    std::fs::write(&path, &expired).unwrap();
    wait_logged(&binary, "expired").await;

    // Signed by a key of its own: well-formed and unexpired, but the broker refuses it.
    let stranger = Endpoint::spawn(
        std::env::temp_dir().join(unique("oidc-stranger")),
        free_port(),
    );
    let untrusted = stranger.mint("exporter", 3600).await;
    std::fs::write(&path, &untrusted).unwrap();
    wait_logged(&binary, "invalid_token").await;
    wait_up(&binary, "file", 0.0, "up 0 with an untrusted token").await;

    let valid = endpoint.mint("exporter", 3600).await;
    std::fs::write(&path, &valid).unwrap();
    wait_up(
        &binary,
        "file",
        1.0,
        "up 1 once the file holds a valid token",
    )
    .await;
    shows_none(&binary, &[&expired, &untrusted, &valid]).await;
    binary.kill();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A token source that cannot work is a configuration error: exit 2 naming the key.
#[test]
fn a_bad_token_source_setting_exits_2_naming_the_key() {
    let cases = [
        (
            ("sasl.oauthbearer.method", "magic"),
            "clusters[0].client.sasl.oauthbearer.method",
        ),
        (
            ("sasl.oauthbearer.method", "oidc"),
            "clusters[0].client.sasl.oauthbearer.token.endpoint.url",
        ),
    ];
    for ((key, value), named) in cases {
        let output = Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"))
            .args([
                "--config",
                repo_root().join("tests/empty.toml").to_str().unwrap(),
                "--check-config",
            ])
            .env("KAFKA_LSO_EXPORTER_CLUSTERS__0__NAME", "c")
            .env(
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__BOOTSTRAP_SERVERS",
                "127.0.0.1:1",
            )
            .env(
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__CLIENT__security.protocol",
                "SASL_SSL",
            )
            .env(
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__CLIENT__sasl.mechanism",
                "OAUTHBEARER",
            )
            .env(
                format!("KAFKA_LSO_EXPORTER_CLUSTERS__0__CLIENT__{key}"),
                value,
            )
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{key}={value}: {stderr}");
        assert!(
            stderr.contains(named),
            "{key}={value} does not name {named}: {stderr}"
        );
    }
}

/// Two minutes on the OIDC listener with 40-second tokens and 10-second SASL sessions:
/// at least ten re-authentications and one token refresh, and not one failed cycle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_minutes_of_reauthentication_and_token_refresh_without_a_failed_cycle() {
    require_oidc_listeners();
    let topic = unique("oauth-reauth");
    create_topic(&topic, 1).await;
    let producer = plain_producer();
    send(&producer, &topic, 0, 2);
    let group = unique("oauth-reauth-g");
    consume_all_and_commit(&group, &topic, 1, "read_committed");
    let endpoint = format!("http://127.0.0.1:{}/token", oidc_port());
    // Cycles of 2 s (and so a 2 s deadline): on a machine shared with other suites a 1 s
    // deadline is sometimes missed for reasons of its own; what is tested here is that
    // re-authentication fails no cycle.
    let env = cluster_env_with_groups(
        0,
        "oidc",
        &listener(7),
        &topic,
        &format!("^{group}$"),
        &oidc_client(&endpoint, "exporter-short", "exporter-short-secret"),
    );
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let config = repo_root().join("tests/empty.toml");
    let binary = Binary::start(
        &[
            "--config",
            config.to_str().unwrap(),
            "--interval",
            "2s",
            "--log.level",
            "debug",
            "--log.format",
            "logfmt",
        ],
        &env,
    );
    wait_up(&binary, "oidc", 1.0, "up 1").await;
    let errors = |s: &Scrape| -> f64 {
        s.series(
            "kafka_lso_exporter_errors_total",
            &[("kafka_cluster", "oidc")],
        )
        .map(|(_, v)| v)
        .sum()
    };
    let start = Instant::now();
    let first = binary.scrape().await;
    let mut hw = 2;
    while start.elapsed() < Duration::from_secs(120) {
        // Data keeps arriving, so every cycle has something new to show.
        send(&producer, &topic, 0, 1);
        hw += 1;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let scrape = binary.scrape().await;
        assert_eq!(
            scrape.value("kafka_lso_exporter_up", &[("kafka_cluster", "oidc")]),
            Some(1.0),
            "a failed cycle after {:?}:\n{}\n{}",
            start.elapsed(),
            scrape.text,
            binary.log()
        );
        if errors(&scrape) != errors(&first) {
            let counted: Vec<&str> = scrape
                .text
                .lines()
                .filter(|l| l.starts_with("kafka_lso_exporter_errors_total"))
                .collect();
            let log = binary.log();
            let said: Vec<&str> = log
                .lines()
                .filter(|l| l.contains(" level=WARN ") || l.contains(" level=ERROR "))
                .collect();
            panic!(
                "errors counted after {:?}:\n{}\nwhat the exporter said:\n{}",
                start.elapsed(),
                counted.join("\n"),
                said.join("\n")
            );
        }
    }
    let p = [
        ("kafka_cluster", "oidc"),
        ("topic", topic.as_str()),
        ("partition", "0"),
    ];
    binary
        .wait_for("the latest high watermark", Duration::from_secs(10), |s| {
            (s.value("kafka_partition_high_watermark", &p) == Some(hw as f64)).then_some(())
        })
        .await;
    let log = binary.kill();
    let authentications = log
        .lines()
        .filter(|l| l.contains("Sent SaslAuthenticateRequest"))
        .count();
    let tokens = log
        .lines()
        .filter(|l| l.contains("new OAUTHBEARER token"))
        .count();
    assert!(
        authentications >= 11,
        "{authentications} authentications in 2 min:\n{log}"
    );
    assert!(tokens >= 2, "{tokens} tokens in 2 min (40 s each):\n{log}");
    assert!(
        !log.contains(" level=WARN "),
        "warnings during the run:\n{log}"
    );
}

/// librdkafka and the own client present the same token: the token endpoint is asked
/// once per token lifetime, not once per client or connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_token_serves_both_clients() {
    require_oidc_listeners();
    let topic = unique("oauth-one");
    create_topic(&topic, 1).await;
    // Over HTTPS, checked against https.ca.location, with a SASL extension (which
    // librdkafka gets pushed with the token).
    let endpoint = Endpoint::start_tls(free_port(), "exporter exporter-secret 3600\n");
    let mut client = oidc_client(&endpoint.url(), "exporter", "exporter-secret");
    client.extend(props(&[
        (
            "https.ca.location",
            kafka_local_home().join("tls/ca.pem").to_str().unwrap(),
        ),
        ("sasl.oauthbearer.extensions", "traceId=one-token"),
        ("debug", "security"),
    ]));
    let binary = start_binary(&cluster_env(0, "oidc", &listener(7), &topic, &client));
    wait_up(&binary, "oidc", 1.0, "up 1").await;
    // Sessions end every 10 s: connections authenticate again with the same token.
    tokio::time::sleep(Duration::from_secs(12)).await;
    wait_up(&binary, "oidc", 1.0, "still up 1").await;
    let log = binary.kill();
    assert_eq!(endpoint.token_requests(), 1, "{log}");
    // librdkafka, too, authenticated with it.
    assert!(
        log.contains("SASL OAUTHBEARER authentication successful"),
        "librdkafka never authenticated:\n{log}"
    );
    // No warning but a stage's deadline on a loaded machine (the first cycle opens every
    // connection, TLS and SASL, within a 1 s interval): nothing about tokens or
    // authentication.
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" level=WARN ") && !l.contains("(first: deadline passed)"))
        .collect();
    assert!(warnings.is_empty(), "{warnings:#?}\n{log}");
}

/// An HTTPS token endpoint whose certificate no configured CA vouches for: `up 0`, the
/// certificate error in the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_token_endpoint_of_an_unknown_ca_is_refused() {
    require_oidc_listeners();
    let topic = unique("oauth-ca");
    create_topic(&topic, 1).await;
    let endpoint = Endpoint::start_tls(free_port(), "exporter exporter-secret 3600\n");
    let binary = start_binary(&cluster_env(
        0,
        "oidc",
        &listener(7),
        &topic,
        &oidc_client(&endpoint.url(), "exporter", "exporter-secret"),
    ));
    wait_up(&binary, "oidc", 0.0, "up 0 with an unknown CA").await;
    wait_logged(&binary, "certificate").await;
    assert_eq!(endpoint.token_requests(), 0);
    binary.kill();
}
