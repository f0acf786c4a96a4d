//! The web config (`--web.config.file`): TLS, basic auth, extra response headers and a
//! rate limit for every path, in the file format of the Prometheus exporter-toolkit, so a
//! file written for node_exporter or any other toolkit-based exporter works here unchanged.
//!
//! [`WebConfig::load`] reads and validates the file at startup; any problem is an error
//! that names the key and the file and never shows a password, hash or private key. While
//! serving, the file and the certificate, key and CA files it names are checked for
//! changes at most once per [`RELOAD_CHECK_INTERVAL`]: a changed set is loaded again
//! (certificate rotation, new users) and takes effect for new connections and requests;
//! one that no longer loads is logged and ignored, and the last good one stays in force.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use base64::Engine as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedProtocolVersion};
use serde::{Deserialize, Deserializer};
use serde_norway::{Mapping, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// How often, at most, the web config and the files it names are checked for changes.
pub const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// A client that has not finished its TLS handshake by then is disconnected.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many TLS handshakes run at once; further connections wait in the backlog.
const MAX_HANDSHAKES: usize = 256;
/// Successful (user, password) verifications remembered; the cache is emptied when full.
const VERIFIED_CACHE_SIZE: usize = 64;

/// The keys exporter-toolkit accepts at the top level.
const TOP_LEVEL_KEYS: &str = "tls_server_config, http_server_config, basic_auth_users, rate_limit";

/// Response headers exporter-toolkit lets a web config set, with the values it allows
/// (any value when the list is empty).
const ALLOWED_HEADERS: &[(&str, &[&str])] = &[
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

/// Why the web config was rejected. The message names the key and the file; it never
/// contains a password, a password hash or a private key.
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    #[error("cannot read web config file {}: {reason}", path.display())]
    Unreadable { path: PathBuf, reason: String },
    #[error("{}{problem} (from web config file {})", key_prefix(key), path.display())]
    Invalid {
        path: PathBuf,
        /// The key, dotted (`tls_server_config.cert_file`); empty for the file as a whole.
        key: String,
        problem: String,
    },
}

fn key_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    }
}

/// A loaded, validated web config.
pub struct WebConfig {
    path: PathBuf,
    loaded: Loaded,
}

impl fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebConfig")
            .field("path", &self.path)
            .field("tls", &self.tls_enabled())
            .field("basic_auth_users", &self.basic_auth_users())
            .finish_non_exhaustive()
    }
}

impl WebConfig {
    /// Reads and validates `path` and every file it names (certificate, key, client CA).
    pub fn load(path: &Path) -> Result<WebConfig, WebConfigError> {
        Ok(WebConfig {
            path: path.to_path_buf(),
            loaded: Loaded::read(path)?,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the exporter serves HTTPS (the file sets a certificate and key).
    pub fn tls_enabled(&self) -> bool {
        self.loaded.settings.tls.is_some()
    }

    /// How many users basic auth accepts; 0 when it is off.
    pub fn basic_auth_users(&self) -> usize {
        self.loaded.settings.users.len()
    }

    /// Settings in the file that are accepted but have no effect here.
    pub fn warnings(&self) -> &[String] {
        &self.loaded.warnings
    }

    /// The state shared by the TLS listener and the request guard while serving.
    pub(crate) fn into_live(self) -> Arc<Live> {
        Arc::new(Live {
            tls: self.tls_enabled(),
            path: self.path,
            state: Mutex::new(LiveState {
                checked: Instant::now(),
                failed: None,
                loaded: self.loaded,
            }),
        })
    }
}

// ---- the file as written ------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert: Option<String>,
    key: Option<Secret>,
    client_ca: Option<String>,
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    client_allowed_sans: Option<Vec<String>>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
    curve_preferences: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRateLimit {
    interval: Option<GoDuration>,
    burst: Option<u32>,
}

/// A string that must never appear in a message (a private key or a password hash).
struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Through Value, so that a wrong type is reported without echoing the value.
        match Value::deserialize(deserializer)? {
            Value::String(text) => Ok(Secret(text)),
            _ => Err(serde::de::Error::custom("must be a string")),
        }
    }
}

/// A Go duration as exporter-toolkit reads it: a string such as "1s" or "100ms", or an
/// integer number of nanoseconds.
#[derive(Debug, Clone, Copy)]
struct GoDuration(Duration);

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Number(n) => n
                .as_u64()
                .map(|nanos| GoDuration(Duration::from_nanos(nanos)))
                .ok_or_else(|| serde::de::Error::custom(format!("invalid duration {n}"))),
            Value::String(text) => humantime::parse_duration(text.trim())
                .map(GoDuration)
                .map_err(|e| {
                    serde::de::Error::custom(format!(
                        "invalid duration \"{text}\" ({e}); write e.g. \"1s\" or \"100ms\""
                    ))
                }),
            _ => Err(serde::de::Error::custom(
                "must be a duration such as \"1s\" or \"100ms\"",
            )),
        }
    }
}

// ---- the validated settings ---------------------------------------------------------

/// One successful load of the web config.
struct Loaded {
    settings: Arc<Settings>,
    /// The files this load read, with their state at the time.
    fingerprint: Fingerprint,
    warnings: Vec<String>,
}

struct Settings {
    tls: Option<Arc<ServerConfig>>,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// User name -> bcrypt hash.
    users: BTreeMap<String, String>,
    rate_limit: Option<Mutex<TokenBucket>>,
    /// (user, SHA-256 of the password) pairs that passed bcrypt.
    verified: Mutex<HashSet<(String, [u8; 32])>>,
    /// One bcrypt check at a time: each takes tens to hundreds of milliseconds of CPU.
    bcrypt: Semaphore,
    /// Checked against when the user does not exist, so that unknown users take as long
    /// as wrong passwords.
    decoy_hash: OnceLock<Option<String>>,
}

/// (path, modification time and length) of every file a load read; `None` when missing.
type Fingerprint = Vec<(PathBuf, Option<(SystemTime, u64)>)>;

fn fingerprint(paths: impl IntoIterator<Item = PathBuf>) -> Fingerprint {
    paths
        .into_iter()
        .map(|path| {
            let state = std::fs::metadata(&path)
                .ok()
                .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()));
            (path, state)
        })
        .collect()
}

/// Builds errors for one file.
struct Problems<'a> {
    path: &'a Path,
}

impl Problems<'_> {
    fn at(&self, key: &str, problem: impl Into<String>) -> WebConfigError {
        WebConfigError::Invalid {
            path: self.path.to_path_buf(),
            key: key.to_string(),
            problem: problem.into(),
        }
    }
}

impl Loaded {
    fn read(path: &Path) -> Result<Loaded, WebConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| WebConfigError::Unreadable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let problems = Problems { path };
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut files = vec![path.to_path_buf()];
        let mut warnings = Vec::new();

        // Into a Value first: a file that is not a mapping is reported without echoing it.
        let document: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_norway::from_str(&text)
                .map_err(|e| problems.at("", format!("not valid YAML: {e}")))?
        };
        let mapping = match document {
            Value::Null => Mapping::new(),
            Value::Mapping(mapping) => mapping,
            _ => {
                return Err(problems.at(
                    "",
                    format!("the file must be a YAML mapping with the keys {TOP_LEVEL_KEYS}"),
                ))
            }
        };

        let mut tls = RawTls::default();
        let mut http = RawHttp::default();
        let mut users = BTreeMap::new();
        let mut rate_limit = RawRateLimit::default();
        for (key, value) in mapping {
            let Some(key) = key.as_str().map(str::to_owned) else {
                return Err(problems.at("", "every top-level key must be a string"));
            };
            match key.as_str() {
                "tls_server_config" => tls = section(&problems, &key, value)?,
                "http_server_config" => http = section(&problems, &key, value)?,
                "rate_limit" => rate_limit = section(&problems, &key, value)?,
                "basic_auth_users" => {
                    let raw: BTreeMap<String, Secret> = section(&problems, &key, value)?;
                    users = raw.into_iter().map(|(user, hash)| (user, hash.0)).collect();
                }
                _ => {
                    return Err(problems.at(
                        &key,
                        format!("unknown key; expected one of {TOP_LEVEL_KEYS}"),
                    ))
                }
            }
        }

        for (user, hash) in &users {
            if !is_bcrypt_hash(hash) {
                return Err(problems.at(
                    &format!("basic_auth_users.{user}"),
                    format!(
                        "is not a bcrypt hash; generate one with `htpasswd -nBC 10 {user}` \
                         and use the part after the colon"
                    ),
                ));
            }
        }

        let headers = headers(&problems, http.headers.unwrap_or_default())?;
        if http.http2 == Some(true) {
            warnings.push(
                "http_server_config.http2: HTTP/2 is not offered; clients use HTTP/1.1".into(),
            );
        }

        let rate_limit = match (rate_limit.interval, rate_limit.burst) {
            (None, _) => None,
            (Some(GoDuration(interval)), _) if interval.is_zero() => None,
            (Some(_), None | Some(0)) => {
                return Err(problems.at(
                    "rate_limit.burst",
                    "must be at least 1 when rate_limit.interval is set",
                ))
            }
            (Some(GoDuration(interval)), Some(burst)) => {
                Some(Mutex::new(TokenBucket::new(interval, burst)))
            }
        };

        let tls = if tls_enabled(&tls) {
            Some(tls_config(&problems, dir, &tls, &mut files, &mut warnings)?)
        } else {
            None
        };

        Ok(Loaded {
            settings: Arc::new(Settings {
                tls,
                headers,
                users,
                rate_limit,
                verified: Mutex::new(HashSet::new()),
                bcrypt: Semaphore::new(1),
                decoy_hash: OnceLock::new(),
            }),
            fingerprint: fingerprint(files),
            warnings,
        })
    }
}

/// One top-level section; `null` (a key with nothing under it) is the default.
fn section<T: for<'de> Deserialize<'de> + Default>(
    problems: &Problems,
    key: &str,
    value: Value,
) -> Result<T, WebConfigError> {
    serde_norway::from_value::<Option<T>>(value)
        .map(Option::unwrap_or_default)
        .map_err(|e| problems.at(key, e.to_string()))
}

/// `$2a$`, `$2b$`, `$2x$` or `$2y$`, a two-digit cost from 04 to 31, `$`, then 22
/// characters of salt and 31 of hash in bcrypt's base64 alphabet.
fn is_bcrypt_hash(hash: &str) -> bool {
    let bytes = hash.as_bytes();
    let shape = bytes.len() == 60
        && bytes[0] == b'$'
        && bytes[1] == b'2'
        && matches!(bytes[2], b'a' | b'b' | b'x' | b'y')
        && bytes[3] == b'$'
        && bytes[6] == b'$'
        && hash[4..6]
            .parse::<u32>()
            .is_ok_and(|cost| (4..=31).contains(&cost))
        && bytes[7..]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'.' || *b == b'/');
    shape && hash.parse::<bcrypt::HashParts>().is_ok()
}

fn headers(
    problems: &Problems,
    configured: BTreeMap<String, String>,
) -> Result<Vec<(HeaderName, HeaderValue)>, WebConfigError> {
    let mut headers = Vec::new();
    for (name, value) in configured {
        let key = format!("http_server_config.headers.{name}");
        let Some((_, allowed)) = ALLOWED_HEADERS.iter().find(|(n, _)| *n == name) else {
            let names: Vec<&str> = ALLOWED_HEADERS.iter().map(|(n, _)| *n).collect();
            return Err(problems.at(
                &key,
                format!("this header cannot be set; allowed: {}", names.join(", ")),
            ));
        };
        if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
            return Err(problems.at(
                &key,
                format!("\"{value}\" is not one of {}", allowed.join(", ")),
            ));
        }
        if value.is_empty() {
            continue; // "Unset if blank."
        }
        let value = HeaderValue::from_str(&value)
            .map_err(|_| problems.at(&key, format!("\"{value}\" is not a valid header value")))?;
        headers.push((
            HeaderName::from_bytes(name.as_bytes()).expect("listed"),
            value,
        ));
    }
    Ok(headers)
}

/// As exporter-toolkit decides: any certificate, key or client-auth setting turns TLS on.
fn tls_enabled(tls: &RawTls) -> bool {
    [
        &tls.cert,
        &tls.cert_file,
        &tls.key_file,
        &tls.client_ca,
        &tls.client_ca_file,
        &tls.client_auth_type,
    ]
    .iter()
    .any(|v| v.as_deref().is_some_and(|s| !s.is_empty()))
        || tls.key.as_ref().is_some_and(|k| !k.0.is_empty())
}

/// A path relative to the web config file's directory, as exporter-toolkit resolves it.
fn resolve(dir: &Path, file: &str) -> PathBuf {
    let path = Path::new(file);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        dir.join(path)
    }
}

fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|s| !s.is_empty())
}

fn tls_config(
    problems: &Problems,
    dir: &Path,
    raw: &RawTls,
    files: &mut Vec<PathBuf>,
    warnings: &mut Vec<String>,
) -> Result<Arc<ServerConfig>, WebConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());

    // The certificate chain.
    let (certs, cert_key) = if let Some(file) = non_empty(&raw.cert_file) {
        let path = resolve(dir, file);
        files.push(path.clone());
        let key = "tls_server_config.cert_file";
        let text = read(problems, key, &path)?;
        (pem_certs(&text), (key, Some(path)))
    } else if let Some(text) = non_empty(&raw.cert) {
        (pem_certs(text.as_bytes()), ("tls_server_config.cert", None))
    } else {
        return Err(problems.at(
            "tls_server_config.cert_file",
            "missing: TLS needs cert_file (or cert) and key_file (or key)",
        ));
    };
    let certs = match certs {
        Ok(certs) if !certs.is_empty() => certs,
        _ => {
            let (key, path) = cert_key;
            let what = path.map_or_else(|| "the value".to_string(), |p| p.display().to_string());
            return Err(problems.at(
                key,
                format!("no PEM certificate (-----BEGIN CERTIFICATE-----) in {what}"),
            ));
        }
    };

    // The private key. Its parse errors are never shown: they can quote key material.
    let (private_key, key_key, key_what) = if let Some(file) = non_empty(&raw.key_file) {
        let path = resolve(dir, file);
        files.push(path.clone());
        let key = "tls_server_config.key_file";
        let text = read(problems, key, &path)?;
        (
            PrivateKeyDer::from_pem_slice(&text).ok(),
            key,
            path.display().to_string(),
        )
    } else if let Some(secret) = raw.key.as_ref().filter(|k| !k.0.is_empty()) {
        (
            PrivateKeyDer::from_pem_slice(secret.0.as_bytes()).ok(),
            "tls_server_config.key",
            "the value".to_string(),
        )
    } else {
        return Err(problems.at(
            "tls_server_config.key_file",
            "missing: TLS needs cert_file (or cert) and key_file (or key)",
        ));
    };
    let Some(private_key) = private_key else {
        return Err(problems.at(
            key_key,
            format!("no PEM private key (PKCS#8, PKCS#1 or SEC1) in {key_what}"),
        ));
    };

    // Protocol versions: rustls speaks TLS 1.2 and 1.3 only.
    let min = match raw.min_version.as_deref().unwrap_or("TLS12") {
        "TLS10" | "TLS11" => {
            warnings.push(format!(
                "tls_server_config.min_version: {} is not supported, TLS12 is the minimum",
                raw.min_version.as_deref().unwrap_or_default()
            ));
            12
        }
        "TLS12" | "" => 12,
        "TLS13" => 13,
        other => {
            return Err(problems.at(
                "tls_server_config.min_version",
                format!("unknown TLS version \"{other}\"; expected TLS12 or TLS13"),
            ))
        }
    };
    let max = match raw.max_version.as_deref().unwrap_or("TLS13") {
        "TLS12" => 12,
        "TLS13" | "" => 13,
        other @ ("TLS10" | "TLS11") => {
            return Err(problems.at(
                "tls_server_config.max_version",
                format!("{other} is not supported; expected TLS12 or TLS13"),
            ))
        }
        other => {
            return Err(problems.at(
                "tls_server_config.max_version",
                format!("unknown TLS version \"{other}\"; expected TLS12 or TLS13"),
            ))
        }
    };
    if min > max {
        return Err(problems.at(
            "tls_server_config.min_version",
            "is greater than tls_server_config.max_version",
        ));
    }
    let mut versions: Vec<&'static SupportedProtocolVersion> = Vec::new();
    if min <= 12 {
        versions.push(&rustls::version::TLS12);
    }
    if max >= 13 {
        versions.push(&rustls::version::TLS13);
    }

    for (set, key) in [
        (
            raw.cipher_suites.as_ref().is_some_and(|v| !v.is_empty()),
            "cipher_suites",
        ),
        (
            raw.curve_preferences
                .as_ref()
                .is_some_and(|v| !v.is_empty()),
            "curve_preferences",
        ),
        (
            raw.prefer_server_cipher_suites.is_some(),
            "prefer_server_cipher_suites",
        ),
    ] {
        if set {
            warnings.push(format!(
                "tls_server_config.{key} is ignored: the TLS library's own secure defaults apply"
            ));
        }
    }

    // Client certificates.
    let client_roots = if let Some(file) = non_empty(&raw.client_ca_file) {
        let path = resolve(dir, file);
        files.push(path.clone());
        let key = "tls_server_config.client_ca_file";
        let text = read(problems, key, &path)?;
        Some((roots(&text), key, path.display().to_string()))
    } else {
        non_empty(&raw.client_ca).map(|text| {
            (
                roots(text.as_bytes()),
                "tls_server_config.client_ca",
                "the value".to_string(),
            )
        })
    };
    let client_roots = match client_roots {
        None => None,
        Some((roots, _, _)) if !roots.is_empty() => Some(Arc::new(roots)),
        Some((_, key, what)) => {
            return Err(problems.at(key, format!("no usable PEM CA certificate in {what}")))
        }
    };
    let auth_key = "tls_server_config.client_auth_type";
    let allow_unauthenticated = match raw.client_auth_type.as_deref().unwrap_or("") {
        "" | "NoClientCert" => {
            if client_roots.is_some() {
                return Err(problems.at(
                    auth_key,
                    "client_ca_file (or client_ca) is set but client_auth_type is NoClientCert; \
                     set it to RequireAndVerifyClientCert",
                ));
            }
            None
        }
        "RequireAndVerifyClientCert" => Some(false),
        "VerifyClientCertIfGiven" => Some(true),
        other @ ("RequestClientCert" | "RequireAnyClientCert" | "RequireClientCert") => {
            return Err(problems.at(
                auth_key,
                format!(
                    "{other} is not supported: it accepts client certificates without \
                     verifying them; use RequireAndVerifyClientCert with client_ca_file"
                ),
            ))
        }
        other => {
            return Err(problems.at(
                auth_key,
                format!(
                    "unknown value \"{other}\"; expected NoClientCert, \
                     RequireAndVerifyClientCert or VerifyClientCertIfGiven"
                ),
            ))
        }
    };
    if raw.client_allowed_sans.is_some() {
        return Err(problems.at(
            "tls_server_config.client_allowed_sans",
            "is not supported; issue client certificates from a dedicated CA instead",
        ));
    }

    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| problems.at("tls_server_config.min_version", e.to_string()))?;
    let builder = match allow_unauthenticated {
        None => builder.with_no_client_auth(),
        Some(allow_unauthenticated) => {
            let Some(roots) = client_roots else {
                return Err(problems.at(
                    "tls_server_config.client_ca_file",
                    "missing: verifying client certificates needs the CA that issued them",
                ));
            };
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
            let verifier = if allow_unauthenticated {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| problems.at("tls_server_config.client_ca_file", e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(certs, private_key).map_err(|e| {
        problems.at(
            key_key,
            format!("the key does not fit the certificate or cannot be used: {e}"),
        )
    })?;
    Ok(Arc::new(config))
}

fn read(problems: &Problems, key: &str, path: &Path) -> Result<Vec<u8>, WebConfigError> {
    std::fs::read(path)
        .map_err(|e| problems.at(key, format!("cannot read {}: {e}", path.display())))
}

fn pem_certs(text: &[u8]) -> Result<Vec<CertificateDer<'static>>, rustls::pki_types::pem::Error> {
    CertificateDer::pem_slice_iter(text).collect()
}

fn roots(text: &[u8]) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(CertificateDer::pem_slice_iter(text).flatten());
    roots
}

// ---- serving ------------------------------------------------------------------------

/// The web config in force while serving, reloaded when its files change.
pub(crate) struct Live {
    path: PathBuf,
    /// Fixed at startup: switching between HTTP and HTTPS needs a restart.
    tls: bool,
    state: Mutex<LiveState>,
}

struct LiveState {
    loaded: Loaded,
    checked: Instant,
    /// The fingerprint of a changed set that failed to load, so it is logged once.
    failed: Option<Fingerprint>,
}

impl Live {
    pub(crate) fn tls(&self) -> bool {
        self.tls
    }

    fn lock(&self) -> MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The settings in force, after loading the files again if they changed.
    fn current(&self) -> Arc<Settings> {
        let mut state = self.lock();
        if state.checked.elapsed() < RELOAD_CHECK_INTERVAL {
            return state.loaded.settings.clone();
        }
        state.checked = Instant::now();
        let now = fingerprint(state.loaded.fingerprint.iter().map(|(p, _)| p.clone()));
        if now == state.loaded.fingerprint || state.failed.as_ref() == Some(&now) {
            return state.loaded.settings.clone();
        }
        match Loaded::read(&self.path) {
            Ok(loaded) if loaded.settings.tls.is_some() != self.tls => {
                tracing::error!(
                    file = %self.path.display(),
                    "web config not reloaded: turning TLS on or off needs a restart; \
                     the previous settings stay in force"
                );
                state.failed = Some(now);
            }
            Ok(loaded) => {
                for warning in &loaded.warnings {
                    tracing::warn!(file = %self.path.display(), "{warning}");
                }
                tracing::info!(
                    file = %self.path.display(),
                    basic_auth_users = loaded.settings.users.len(),
                    "web config reloaded"
                );
                state.loaded = loaded;
                state.failed = None;
            }
            Err(error) => {
                tracing::error!(
                    "web config not reloaded, the previous settings stay in force: {error}"
                );
                state.failed = Some(now);
            }
        }
        state.loaded.settings.clone()
    }
}

/// Puts the rate limit, basic auth and the extra headers in front of every path of `app`.
pub(crate) fn protect(app: Router, live: Arc<Live>) -> Router {
    app.layer(axum::middleware::from_fn_with_state(live, guard))
}

async fn guard(State(live): State<Arc<Live>>, request: Request, next: Next) -> Response {
    let settings = live.current();
    if let Some(bucket) = &settings.rate_limit {
        let allowed = bucket
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .allow();
        if !allowed {
            return (StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n").into_response();
        }
    }
    let mut response = if settings.users.is_empty() || settings.authorized(request.headers()).await
    {
        next.run(request).await
    } else {
        let mut response = (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response();
        response
            .headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic"));
        response
    };
    for (name, value) in &settings.headers {
        response
            .headers_mut()
            .entry(name)
            .or_insert_with(|| value.clone());
    }
    response
}

impl Settings {
    /// Whether the request carries the name and password of a configured user.
    async fn authorized(self: &Arc<Self>, headers: &HeaderMap) -> bool {
        let Some((user, password)) = basic_credentials(headers) else {
            return false;
        };
        let key = (user, sha256(&password));
        if self.is_verified(&key) {
            return true;
        }
        // One bcrypt at a time; whoever waited may find the answer cached meanwhile.
        let Ok(_permit) = self.bcrypt.acquire().await else {
            return false;
        };
        if self.is_verified(&key) {
            return true;
        }
        let settings = self.clone();
        let user = key.0.clone();
        let ok = tokio::task::spawn_blocking(move || settings.check_password(&user, &password))
            .await
            .unwrap_or(false);
        if ok {
            let mut verified = self.verified.lock().unwrap_or_else(PoisonError::into_inner);
            if verified.len() >= VERIFIED_CACHE_SIZE {
                verified.clear();
            }
            verified.insert(key);
        }
        ok
    }

    fn is_verified(&self, key: &(String, [u8; 32])) -> bool {
        self.verified
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(key)
    }

    /// bcrypt, CPU-bound: call from a blocking thread.
    fn check_password(&self, user: &str, password: &[u8]) -> bool {
        match self.users.get(user) {
            Some(hash) => bcrypt::verify(password, hash).unwrap_or(false),
            None => {
                // As slow as a wrong password, so that user names cannot be probed.
                let decoy = self.decoy_hash.get_or_init(|| {
                    let cost = self
                        .users
                        .values()
                        .find_map(|h| h.parse::<bcrypt::HashParts>().ok())
                        .map_or(bcrypt::DEFAULT_COST, |p| p.get_cost());
                    bcrypt::hash("not a password of any user", cost).ok()
                });
                if let Some(decoy) = decoy {
                    let _ = bcrypt::verify(password, decoy);
                }
                false
            }
        }
    }
}

/// The user and password of an `Authorization: Basic ...` header.
fn basic_credentials(headers: &HeaderMap) -> Option<(String, Vec<u8>)> {
    let value = headers.get(AUTHORIZATION)?.as_bytes();
    let (scheme, encoded) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"basic ") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim_ascii())
        .ok()?;
    let colon = decoded.iter().position(|b| *b == b':')?;
    let user = String::from_utf8(decoded[..colon].to_vec()).ok()?;
    Some((user, decoded[colon + 1..].to_vec()))
}

fn sha256(data: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, data);
    let mut out = [0; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// exporter-toolkit's rate limit: `burst` requests at once, refilled one per `interval`.
struct TokenBucket {
    interval: Duration,
    burst: f64,
    tokens: f64,
    refilled: Instant,
}

impl TokenBucket {
    fn new(interval: Duration, burst: u32) -> TokenBucket {
        TokenBucket {
            interval,
            burst: f64::from(burst),
            tokens: f64::from(burst),
            refilled: Instant::now(),
        }
    }

    fn allow(&mut self) -> bool {
        let now = Instant::now();
        let earned = now.duration_since(self.refilled).as_secs_f64() / self.interval.as_secs_f64();
        self.tokens = (self.tokens + earned).min(self.burst);
        self.refilled = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Accepts TCP connections and hands out those that completed a TLS handshake. Handshakes
/// run in their own tasks, so a slow or silent client holds up no one else; a client that
/// speaks plain HTTP fails the handshake and gets no HTTP response.
pub(crate) struct TlsListener {
    tcp: TcpListener,
    live: Arc<Live>,
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, SocketAddr)>>,
}

impl TlsListener {
    pub(crate) fn new(tcp: TcpListener, live: Arc<Live>) -> TlsListener {
        TlsListener {
            tcp,
            live,
            handshakes: JoinSet::new(),
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                accepted = self.tcp.accept(), if self.handshakes.len() < MAX_HANDSHAKES => {
                    match accepted {
                        Ok((stream, addr)) => {
                            let config = self.live.current().tls.clone();
                            if let Some(config) = config {
                                let acceptor = TlsAcceptor::from(config);
                                self.handshakes.spawn(handshake(acceptor, stream, addr));
                            }
                        }
                        Err(error) => accept_error(error).await,
                    }
                }
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Some(connection)) = done {
                        return connection;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

async fn handshake(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    addr: SocketAddr,
) -> Option<(TlsStream<TcpStream>, SocketAddr)> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => Some((tls, addr)),
        Ok(Err(error)) => {
            tracing::debug!(client = %addr, "TLS handshake failed: {error}");
            None
        }
        Err(_) => {
            tracing::debug!(client = %addr, "TLS handshake timed out");
            None
        }
    }
}

/// As axum's own listener: connection errors concern one client; others (out of file
/// descriptors) get a pause before the next accept.
async fn accept_error(error: io::Error) {
    if matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!("accept error: {error}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Property tests: any web config file loads or is refused with an error, never a
/// panic; so is any `Authorization` header a client sends.
#[cfg(test)]
mod hostile {
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn load_text(text: &str) -> Result<WebConfig, WebConfigError> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "kafka-lso-exporter-hostile-web-{}-{}.yml",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, text).unwrap();
        let loaded = WebConfig::load(&path);
        let _ = std::fs::remove_file(&path);
        loaded
    }

    const KEYS: &[&str] = &[
        "tls_server_config",
        "http_server_config",
        "basic_auth_users",
        "rate_limit",
        "cert",
        "key",
        "client_ca",
        "cert_file",
        "key_file",
        "client_auth_type",
        "client_ca_file",
        "client_allowed_sans",
        "min_version",
        "max_version",
        "cipher_suites",
        "prefer_server_cipher_suites",
        "curve_preferences",
        "http2",
        "headers",
        "Strict-Transport-Security",
        "X-Frame-Options",
        "interval",
        "burst",
        "alice",
    ];

    fn scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<u64>().prop_map(|n| n.to_string()),
            any::<bool>().prop_map(|b| b.to_string()),
            "[ -~]{0,16}".prop_map(|s| format!("{s:?}")),
            prop::sample::select(
                &[
                    "~",
                    "\"\"",
                    "1s",
                    "0s",
                    "99999999999999999999h",
                    "-1s",
                    "TLS12",
                    "TLS13",
                    "RequireAndVerifyClientCert",
                    "deny",
                    "\"$2y$10$abcdefghijklmnopqrstuu\"",
                    "\"-----BEGIN CERTIFICATE-----\\nAAAA\\n-----END CERTIFICATE-----\\n\"",
                    "\"-----BEGIN PRIVATE KEY-----\\nAAAA\\n-----END PRIVATE KEY-----\\n\"",
                    "[]",
                    "{}",
                    "[TLS_AES_128_GCM_SHA256]",
                    "[X25519, P-999]",
                    "&a x",
                    "*a",
                ][..]
            )
            .prop_map(str::to_string),
        ]
    }

    /// A YAML document nesting the web config's keys to depth three, with any values.
    fn yaml() -> impl Strategy<Value = String> {
        let key = || {
            prop_oneof![
                4 => prop::sample::select(KEYS).prop_map(str::to_string),
                1 => "[a-z_]{1,6}",
            ]
        };
        let leaf = (key(), scalar()).prop_map(|(k, v)| vec![format!("{k}: {v}")]);
        let tree = leaf.prop_recursive(2, 12, 4, move |inner| {
            (key(), prop::collection::vec(inner, 0..4)).prop_map(|(k, children)| {
                let mut lines = vec![format!("{k}:")];
                for line in children.into_iter().flatten() {
                    lines.push(format!("  {line}"));
                }
                lines
            })
        });
        prop::collection::vec(tree, 0..5)
            .prop_map(|trees| trees.into_iter().flatten().collect::<Vec<_>>().join("\n"))
    }

    proptest! {
        #![proptest_config(crate::hostile::config(300))]

        #[test]
        fn arbitrary_text(text in "\\PC{0,200}") {
            let _ = load_text(&text);
        }

        #[test]
        fn documents_of_any_values(text in yaml()) {
            let _ = load_text(&text);
        }

        /// The properties above would pass on a loader that refuses everything.
        #[test]
        fn a_sound_config_loads(burst in 1..1000u32, millis in 1..100_000u64) {
            static HASH: OnceLock<String> = OnceLock::new();
            let hash = HASH.get_or_init(|| bcrypt::hash("pencil", 4).unwrap());
            let text = format!(
                "basic_auth_users:\n  alice: {hash}\nrate_limit:\n  interval: {millis}ms\n  burst: {burst}\n"
            );
            let config = load_text(&text).unwrap();
            prop_assert_eq!(config.basic_auth_users(), 1);
        }

        #[test]
        fn authorization_headers(value in prop::collection::vec(any::<u8>(), 0..80), basic in any::<bool>()) {
            let mut value = value;
            if basic {
                let mut prefixed = b"Basic ".to_vec();
                prefixed.extend(base64::engine::general_purpose::STANDARD.encode(&value).into_bytes());
                value = prefixed;
            }
            if let Ok(value) = HeaderValue::from_bytes(&value) {
                let mut headers = HeaderMap::new();
                headers.insert(AUTHORIZATION, value);
                let _ = basic_credentials(&headers);
            }
        }
    }
}
