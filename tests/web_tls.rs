//! `--web.config.file`: TLS, basic auth and response headers on every path, in the
//! exporter-toolkit file format. No Kafka needed: the exporter samples an address where
//! nothing listens and still serves `kafka_lso_exporter_up 0`.

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::binary::Binary;
use kafka_lso_exporter::config::{Config, Overrides};
use kafka_lso_exporter::serve::web::{WebConfig, WebConfigError};
use tokio::sync::oneshot;

const UNREACHABLE: &str = "127.0.0.1:1";
/// The name in the test certificates; the client resolves it to the exporter's address.
const HOST: &str = "exporter.test";
const USER: &str = "prometheus";
const PASSWORD: &str = "s3cret-scrape-password";
/// bcrypt's lowest cost keeps the unoptimised test build fast; the cost changes nothing else.
const TEST_COST: u32 = 4;

/// A directory of its own for one test, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "kafka-lso-exporter-web-{name}-{}-{n}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A self-signed server certificate for [`HOST`], as PEM (certificate, key).
fn server_cert() -> (String, String) {
    let certified = rcgen::generate_simple_self_signed(vec![HOST.to_string()]).unwrap();
    (certified.cert.pem(), certified.key_pair.serialize_pem())
}

fn hash(password: &str) -> String {
    bcrypt::hash(password, TEST_COST).unwrap()
}

/// Writes cert.pem, key.pem and web.yml (naming them relative to itself) into `dir`.
fn tls_web_config(dir: &TempDir, extra: &str) -> (PathBuf, String) {
    let (cert, key) = server_cert();
    dir.write("cert.pem", &cert);
    dir.write("key.pem", &key);
    let path = dir.write(
        "web.yml",
        &format!("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n{extra}"),
    );
    (path, cert)
}

fn users_and_headers(user: &str, password: &str) -> String {
    format!(
        "http_server_config:\n  headers:\n    X-Frame-Options: deny\n    \
         Strict-Transport-Security: max-age=31536000\n\
         basic_auth_users:\n  {user}: '{}'\n",
        hash(password)
    )
}

/// The exporter, in this process, behind a web config.
struct Exporter {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Exporter {
    async fn start(web: WebConfig) -> Exporter {
        let env = vec![
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__BOOTSTRAP_SERVERS".to_string(),
                UNREACHABLE.to_string(),
            ),
            ("KAFKA_LSO_EXPORTER_INTERVAL".to_string(), "1s".to_string()),
        ];
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let config = Config::load(
            Some(&root.join("tests/empty.toml")),
            env,
            &Overrides::default(),
        )
        .expect("test config");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            kafka_lso_exporter::run_with(config, vec![listener], Some(web), async {
                let _ = stopped.await;
            })
            .await
            .expect("exporter run");
        });
        Exporter {
            addr,
            stop: Some(stop),
            task,
        }
    }

    fn https(&self, path: &str) -> String {
        format!("https://{HOST}:{}{path}", self.addr.port())
    }

    fn http(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("exporter stops within 10 s")
            .expect("exporter task");
    }
}

/// A client that trusts `ca_pem` and finds [`HOST`] at `addr`.
fn tls_client(ca_pem: &str, addr: SocketAddr) -> reqwest::Client {
    tls_client_builder(ca_pem, addr).build().unwrap()
}

fn tls_client_builder(ca_pem: &str, addr: SocketAddr) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .resolve(HOST, addr)
        .timeout(Duration::from_secs(20))
}

/// GETs `url` until `/metrics` has the exporter's `up` sample (the first cycle, against
/// an unreachable broker, ends within one interval).
async fn wait_for_metrics(request: impl Fn() -> reqwest::RequestBuilder) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let response = request().send().await.expect("GET /metrics");
        assert_eq!(
            response.status(),
            200,
            "/metrics with the right credentials"
        );
        let body = response.text().await.unwrap();
        if body.contains("kafka_lso_exporter_up{") {
            return body;
        }
        assert!(
            Instant::now() < deadline,
            "no kafka_lso_exporter_up sample:\n{body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn assert_unauthorized(response: &reqwest::Response, what: &str) {
    assert_eq!(response.status(), 401, "{what}");
    assert_eq!(
        response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap()),
        Some("Basic"),
        "{what}: WWW-Authenticate"
    );
}

/// Sends a plain-HTTP request to `addr` and returns whatever comes back.
async fn raw_plain_http(addr: SocketAddr) -> Vec<u8> {
    tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: exporter.test\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        answer
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_basic_auth_guards_every_path() {
    let dir = TempDir::new("auth");
    let (path, ca) = tls_web_config(&dir, &users_and_headers(USER, PASSWORD));
    let web = WebConfig::load(&path).expect("web config");
    assert!(web.tls_enabled());
    assert_eq!(web.basic_auth_users(), 1);
    let exporter = Exporter::start(web).await;
    let client = tls_client(&ca, exporter.addr);

    // The right credentials, over TLS.
    let body = wait_for_metrics(|| {
        client
            .get(exporter.https("/metrics"))
            .basic_auth(USER, Some(PASSWORD))
    })
    .await;
    assert!(
        body.contains("kafka_lso_exporter_up{kafka_cluster=\"default\"} 0"),
        "{body}"
    );
    let ok = client
        .get(exporter.https("/metrics"))
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()["x-frame-options"], "deny");
    assert_eq!(
        ok.headers()["strict-transport-security"],
        "max-age=31536000"
    );

    // Wrong password, unknown user, no credentials, a malformed header: 401 on every path.
    for path in ["/metrics", "/", "/healthz", "/readyz", "/no-such-path"] {
        let wrong = client
            .get(exporter.https(path))
            .basic_auth(USER, Some("not-the-password"))
            .send()
            .await
            .unwrap();
        assert_unauthorized(&wrong, &format!("{path} with a wrong password"));
        assert_eq!(wrong.headers()["x-frame-options"], "deny", "{path}");
        let body = wrong.text().await.unwrap();
        assert!(!body.contains("kafka_lso_exporter"), "{body}");

        let unknown = client
            .get(exporter.https(path))
            .basic_auth("someone-else", Some(PASSWORD))
            .send()
            .await
            .unwrap();
        assert_unauthorized(&unknown, &format!("{path} as an unknown user"));

        let anonymous = client.get(exporter.https(path)).send().await.unwrap();
        assert_unauthorized(&anonymous, &format!("{path} without credentials"));

        let malformed = client
            .get(exporter.https(path))
            .header("authorization", "Basic %%%not-base64")
            .send()
            .await
            .unwrap();
        assert_unauthorized(&malformed, &format!("{path} with a malformed header"));
    }
    let healthz = client
        .get(exporter.https("/healthz"))
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(healthz.status(), 200);

    // Plain HTTP to the TLS port: the handshake fails, no HTTP response comes back.
    let plain = reqwest::Client::new()
        .get(exporter.http("/metrics"))
        .basic_auth(USER, Some(PASSWORD))
        .timeout(Duration::from_secs(15))
        .send()
        .await;
    assert!(plain.is_err(), "plain HTTP got an answer: {plain:?}");
    let answer = raw_plain_http(exporter.addr).await;
    assert!(
        !answer.starts_with(b"HTTP/"),
        "plain HTTP got an HTTP response: {}",
        String::from_utf8_lossy(&answer)
    );

    // A client that does not trust the certificate cannot connect.
    let untrusting = reqwest::Client::builder()
        .resolve(HOST, exporter.addr)
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap();
    assert!(untrusting
        .get(exporter.https("/healthz"))
        .send()
        .await
        .is_err());

    exporter.stop().await;
}

/// bcrypt costs tens to hundreds of milliseconds per check: a scraper that sends the same
/// credentials every time must pay it once, not on every scrape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn successful_verifications_are_cached() {
    let dir = TempDir::new("cache");
    // A cost high enough that one check takes well over 100 ms even in an optimised
    // build, so that 20 uncached checks could not finish within the limit below.
    let slow_hash = bcrypt::hash(PASSWORD, 10).unwrap();
    let (path, ca) = tls_web_config(
        &dir,
        &format!("basic_auth_users:\n  {USER}: '{slow_hash}'\n"),
    );
    let exporter = Exporter::start(WebConfig::load(&path).unwrap()).await;
    let client = tls_client(&ca, exporter.addr);
    let get = || {
        client
            .get(exporter.https("/healthz"))
            .basic_auth(USER, Some(PASSWORD))
            .send()
    };

    let first = Instant::now();
    assert_eq!(get().await.unwrap().status(), 200);
    let one_check = first.elapsed();

    let started = Instant::now();
    for _ in 0..20 {
        assert_eq!(get().await.unwrap().status(), 200);
    }
    let twenty_cached = started.elapsed();
    assert!(
        twenty_cached < one_check * 5 && twenty_cached < Duration::from_secs(2),
        "20 requests took {twenty_cached:?}, the first (uncached) one {one_check:?}"
    );

    // A wrong password is not cached as right, and the right one stays right.
    let wrong = client
        .get(exporter.https("/healthz"))
        .basic_auth(USER, Some("wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    assert_eq!(get().await.unwrap().status(), 200);
    exporter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_without_tls_serves_plain_http() {
    let dir = TempDir::new("plain");
    let path = dir.write("web.yml", &users_and_headers(USER, PASSWORD));
    let web = WebConfig::load(&path).unwrap();
    assert!(!web.tls_enabled());
    let exporter = Exporter::start(web).await;
    let client = reqwest::Client::new();

    let anonymous = client.get(exporter.http("/metrics")).send().await.unwrap();
    assert_unauthorized(&anonymous, "no credentials");
    let body = wait_for_metrics(|| {
        client
            .get(exporter.http("/metrics"))
            .basic_auth(USER, Some(PASSWORD))
    })
    .await;
    assert!(body.contains("kafka_lso_exporter_up"), "{body}");
    exporter.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_and_verified() {
    use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair};
    let dir = TempDir::new("mtls");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    dir.write("clients-ca.pem", &ca.pem());

    let client_identity = |issuer: &rcgen::Certificate, issuer_key: &KeyPair| {
        let mut params = CertificateParams::new(vec!["prometheus".to_string()]).unwrap();
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, issuer, issuer_key).unwrap();
        reqwest::Identity::from_pem(format!("{}{}", cert.pem(), key.serialize_pem()).as_bytes())
            .unwrap()
    };
    let trusted = client_identity(&ca, &ca_key);
    // Same shape, issued by a CA the exporter does not know.
    let other_key = KeyPair::generate().unwrap();
    let mut other_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    other_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let other_ca = other_params.self_signed(&other_key).unwrap();
    let untrusted = client_identity(&other_ca, &other_key);

    let (path, server_ca) = tls_web_config(
        &dir,
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: clients-ca.pem\n",
    );
    let exporter = Exporter::start(WebConfig::load(&path).unwrap()).await;

    let with_cert = tls_client_builder(&server_ca, exporter.addr)
        .identity(trusted)
        .build()
        .unwrap();
    let response = with_cert
        .get(exporter.https("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);

    let without_cert = tls_client(&server_ca, exporter.addr);
    let refused = without_cert.get(exporter.https("/healthz")).send().await;
    assert!(refused.is_err(), "no client certificate: {refused:?}");

    let wrong_ca = tls_client_builder(&server_ca, exporter.addr)
        .identity(untrusted)
        .build()
        .unwrap();
    let refused = wrong_ca.get(exporter.https("/healthz")).send().await;
    assert!(
        refused.is_err(),
        "client certificate of another CA: {refused:?}"
    );
    exporter.stop().await;
}

/// exporter-toolkit's `rate_limit`: `burst` requests at once, then one per `interval`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_answers_429_past_the_burst() {
    let dir = TempDir::new("rate");
    let path = dir.write("web.yml", "rate_limit:\n  interval: 1m\n  burst: 2\n");
    let exporter = Exporter::start(WebConfig::load(&path).unwrap()).await;
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let response = client.get(exporter.http("/healthz")).send().await.unwrap();
        statuses.push(response.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 429, 429]);
    exporter.stop().await;
}

/// Changed files take effect without a restart; a change that does not load is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_files_are_reloaded_and_broken_ones_ignored() {
    let dir = TempDir::new("reload");
    let (path, ca) = tls_web_config(&dir, &users_and_headers("alice", "alice-password"));
    let exporter = Exporter::start(WebConfig::load(&path).unwrap()).await;
    let client = tls_client(&ca, exporter.addr);
    let status = |user: &'static str, password: &'static str| {
        let request = client
            .get(exporter.https("/healthz"))
            .basic_auth(user, Some(password));
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status("alice", "alice-password").await, 200);
    assert_eq!(status("bob", "bob-password").await, 401);

    std::fs::write(
        &path,
        format!(
            "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n{}",
            users_and_headers("bob", "bob-password")
        ),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while status("bob", "bob-password").await != 200 {
        assert!(Instant::now() < deadline, "the new user never got in");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(status("alice", "alice-password").await, 401);

    // A broken file: logged, and bob keeps getting in.
    std::fs::write(&path, "tls_server_config: [not, a, mapping\n").unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(status("bob", "bob-password").await, 200);
    assert_eq!(status("alice", "alice-password").await, 401);
    exporter.stop().await;
}

fn load_error(contents: &str) -> (String, PathBuf) {
    let dir = TempDir::new("invalid");
    let (cert, key) = server_cert();
    dir.write("cert.pem", &cert);
    dir.write("key.pem", &key);
    let path = dir.write("web.yml", contents);
    let error = WebConfig::load(&path).expect_err("must be rejected");
    assert!(matches!(error, WebConfigError::Invalid { .. }), "{error:?}");
    let message = error.to_string();
    assert!(!message.contains('\n'), "one line: {message}");
    assert!(
        message.contains(&path.display().to_string()),
        "names the file: {message}"
    );
    (message, path)
}

#[test]
fn invalid_web_configs_name_the_key() {
    let cases: &[(&str, &str)] = &[
        ("bogus_key: 1\n", "bogus_key"),
        (
            "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  bogus: 1\n",
            "tls_server_config",
        ),
        (
            "tls_server_config:\n  cert_file: cert.pem\n",
            "tls_server_config.key_file",
        ),
        (
            "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  \
             client_auth_type: RequireAnyClientCert\n",
            "tls_server_config.client_auth_type",
        ),
        (
            "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  \
             client_auth_type: Sometimes\n",
            "tls_server_config.client_auth_type",
        ),
        (
            "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  min_version: TLS14\n",
            "tls_server_config.min_version",
        ),
        (
            "tls_server_config:\n  cert_file: cert.pem\n  key_file: cert.pem\n",
            "tls_server_config.key_file",
        ),
        (
            "http_server_config:\n  headers:\n    X-Custom: yes\n",
            "http_server_config.headers.X-Custom",
        ),
        (
            "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
            "http_server_config.headers.X-Frame-Options",
        ),
        ("rate_limit:\n  interval: 1s\n", "rate_limit.burst"),
        ("basic_auth_users: [alice]\n", "basic_auth_users"),
        ("- just\n- a list\n", "mapping"),
        ("tls_server_config: [unclosed\n", "YAML"),
    ];
    for (contents, key) in cases {
        let (message, _) = load_error(contents);
        assert!(message.contains(key), "{contents:?} -> {message}");
    }
}

#[test]
fn a_key_that_does_not_fit_the_certificate_is_rejected() {
    let (_, other_key) = server_cert();
    let dir = TempDir::new("mismatch");
    let (cert, _) = server_cert();
    dir.write("cert.pem", &cert);
    dir.write("key.pem", &other_key);
    let path = dir.write(
        "web.yml",
        "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n",
    );
    let message = WebConfig::load(&path).unwrap_err().to_string();
    assert!(message.contains("tls_server_config.key_file"), "{message}");
    assert!(!message.contains("PRIVATE KEY"), "{message}");
}

#[test]
fn empty_file_and_toolkit_extras_are_accepted() {
    let dir = TempDir::new("extras");
    let empty = dir.write("empty.yml", "# nothing here\n");
    let web = WebConfig::load(&empty).unwrap();
    assert!(!web.tls_enabled());
    assert_eq!(web.basic_auth_users(), 0);

    let (cert, key) = server_cert();
    dir.write("cert.pem", &cert);
    let key_path = dir.write("key.pem", &key);
    // An absolute key path, inline-free; settings rustls has no knob for only warn.
    let path = dir.write(
        "web.yml",
        &format!(
            "tls_server_config:\n  cert_file: cert.pem\n  key_file: {}\n  \
             min_version: TLS12\n  max_version: TLS13\n  \
             cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n  \
             curve_preferences: [X25519]\n  prefer_server_cipher_suites: true\n\
             http_server_config:\n  http2: false\n\
             rate_limit:\n  interval: 0s\n  burst: 0\n",
            key_path.display()
        ),
    );
    let web = WebConfig::load(&path).unwrap();
    assert!(web.tls_enabled());
    let warnings = web.warnings().join("\n");
    for key in [
        "cipher_suites",
        "curve_preferences",
        "prefer_server_cipher_suites",
    ] {
        assert!(warnings.contains(key), "{warnings}");
    }
}

// ---- the binary ---------------------------------------------------------------------

/// Runs the binary with `args` and returns its output, failing the test after 30 s.
fn run_binary(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"))
        .args([
            "--bootstrap-servers",
            UNREACHABLE,
            "--web.listen-address",
            "127.0.0.1:0",
        ])
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the exporter did not exit: {:?}", child.wait_with_output());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn assert_exit_2_naming(output: &Output, file: &Path, key: &str, secrets: &[&str]) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("invalid configuration"), "{stderr}");
    assert!(
        stderr.contains(&file.display().to_string()),
        "names the file: {stderr}"
    );
    assert!(stderr.contains(key), "names {key}: {stderr}");
    for secret in secrets {
        assert!(!stderr.contains(secret), "shows a secret: {stderr}");
        assert!(!stdout.contains(secret), "shows a secret: {stdout}");
    }
}

#[test]
fn binary_exits_2_on_an_unknown_key() {
    let dir = TempDir::new("bin-unknown");
    let password_hash = hash(PASSWORD);
    let path = dir.write(
        "web.yml",
        &format!("basic_auth_users:\n  {USER}: '{password_hash}'\nbasic_auth_user:\n  x: y\n"),
    );
    let output = run_binary(&["--web.config.file", path.to_str().unwrap()]);
    assert_exit_2_naming(
        &output,
        &path,
        "basic_auth_user",
        &[&password_hash, PASSWORD],
    );
}

#[test]
fn binary_exits_2_on_an_unreadable_certificate() {
    let dir = TempDir::new("bin-cert");
    let password_hash = hash(PASSWORD);
    let (_, key) = server_cert();
    dir.write("key.pem", &key);
    let path = dir.write(
        "web.yml",
        &format!(
            "tls_server_config:\n  cert_file: missing-cert.pem\n  key_file: key.pem\n\
             basic_auth_users:\n  {USER}: '{password_hash}'\n"
        ),
    );
    let output = run_binary(&["--web.config.file", path.to_str().unwrap()]);
    assert_exit_2_naming(
        &output,
        &path,
        "tls_server_config.cert_file",
        &[&password_hash, PASSWORD, "PRIVATE KEY"],
    );
    // The certificate path, resolved against the web config's directory.
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&dir.0.join("missing-cert.pem").display().to_string()),
        "{stderr}"
    );
}

#[test]
fn binary_exits_2_on_a_bad_hash_without_showing_it() {
    let dir = TempDir::new("bin-hash");
    let bad = "$2y$10$this-is-not-a-real-hash-but-still-secret";
    let path = dir.write(
        "web.yml",
        &format!("basic_auth_users:\n  {USER}: '{bad}'\n"),
    );
    let output = run_binary(&["--web.config.file", path.to_str().unwrap()]);
    assert_exit_2_naming(
        &output,
        &path,
        &format!("basic_auth_users.{USER}"),
        &[bad, "not-a-real-hash"],
    );
}

#[test]
fn binary_exits_2_on_a_missing_web_config() {
    let dir = TempDir::new("bin-missing");
    let path = dir.0.join("no-such-web.yml");
    let output = run_binary(&["--web.config.file", path.to_str().unwrap()]);
    assert_exit_2_naming(&output, &path, "cannot read web config file", &[]);
}

#[test]
fn check_config_validates_the_web_config() {
    let dir = TempDir::new("bin-check");
    let (path, _) = tls_web_config(&dir, &users_and_headers(USER, PASSWORD));
    let output = run_binary(&[
        "--web.config.file",
        path.to_str().unwrap(),
        "--check-config",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout.contains("TLS on, basic auth for 1 user(s)"),
        "{stdout}"
    );
}

/// The binary over TLS: serves, then stops within a few seconds of SIGTERM even with an
/// idle keep-alive connection open.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serves_tls_and_stops_on_sigterm() {
    let dir = TempDir::new("bin-sigterm");
    let (path, ca) = tls_web_config(&dir, &users_and_headers(USER, PASSWORD));
    let exporter = Binary::start(
        &[
            "--bootstrap-servers",
            UNREACHABLE,
            "--interval",
            "1s",
            "--web.config.file",
            path.to_str().unwrap(),
        ],
        &[],
    );
    let port = exporter.port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let client = tls_client(&ca, addr);
    let url = format!("https://{HOST}:{port}/metrics");
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let response = client
            .get(&url)
            .basic_auth(USER, Some(PASSWORD))
            .send()
            .await;
        if let Ok(response) = response {
            assert_eq!(response.status(), 200);
            let body = response.text().await.unwrap();
            if body.contains("kafka_lso_exporter_up{") {
                break body;
            }
        }
        assert!(
            Instant::now() < deadline,
            "never served; log:\n{}",
            exporter.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        body.contains("kafka_lso_exporter_up{kafka_cluster=\"default\"} 0"),
        "{body}"
    );

    let (exit, log) = exporter.terminate(Duration::from_secs(5));
    assert!(exit.success(), "exit status {exit:?}");
    assert!(log.contains("web_tls=true"), "{log}");
    assert!(!log.contains(PASSWORD), "{log}");
    drop(client);
}

/// With several `--web.listen-address`es, the web config guards every one of them: TLS
/// and basic auth on each, plain HTTP answered on none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_applies_the_web_config_to_every_listen_address() {
    let dir = TempDir::new("bin-two-addresses");
    let (path, ca) = tls_web_config(&dir, &users_and_headers(USER, PASSWORD));
    let second = common::free_port();
    let exporter = Binary::start(
        &[
            "--bootstrap-servers",
            UNREACHABLE,
            "--interval",
            "1s",
            "--web.config.file",
            path.to_str().unwrap(),
            "--web.listen-address",
            &format!("127.0.0.1:{second}"),
            "--web.telemetry-path",
            "/prom",
        ],
        &[],
    );
    for port in [exporter.port(), second] {
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let client = tls_client(&ca, addr);
        let url = format!("https://{HOST}:{port}/prom");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let answer = client
                .get(&url)
                .basic_auth(USER, Some(PASSWORD))
                .send()
                .await;
            if let Ok(response) = answer {
                assert_eq!(response.status(), 200, "{url}");
                if response
                    .text()
                    .await
                    .unwrap()
                    .contains("kafka_lso_exporter_up{")
                {
                    break;
                }
            }
            assert!(
                exporter.alive() && Instant::now() < deadline,
                "{url} never served; log:\n{}",
                exporter.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let anonymous = client.get(&url).send().await.unwrap();
        assert_unauthorized(&anonymous, &format!("{url} without credentials"));
        let answer = raw_plain_http(addr).await;
        assert!(
            !answer.starts_with(b"HTTP/"),
            "plain HTTP on port {port} got an HTTP response: {}",
            String::from_utf8_lossy(&answer)
        );
    }
    let (exit, _) = exporter.terminate(Duration::from_secs(5));
    assert!(exit.success(), "exit status {exit:?}");
}
