//! SASL OAUTHBEARER (KIP-255, RFC 7628) for the exporter's own client, and the token
//! sources that feed it and librdkafka alike: one [`TokenSource`] per cluster, so both
//! clients present the same token and the token endpoint is asked once per lifetime.
//!
//! Token sources, chosen by `sasl.oauthbearer.method` (librdkafka's property names where
//! librdkafka has one):
//! - `default`: librdkafka's unsecured JWT (`enable.sasl.oauthbearer.unsecure.jwt=true`
//!   and `sasl.oauthbearer.config=principal=... [scope=...] [lifeSeconds=...]`), for
//!   brokers that accept unsigned tokens (development and test clusters);
//! - `oidc`: the OAuth 2.0 client-credentials grant against
//!   `sasl.oauthbearer.token.endpoint.url` with `sasl.oauthbearer.client.id` and
//!   `sasl.oauthbearer.client.secret`, optionally `sasl.oauthbearer.scope`;
//! - `file`: the token in `sasl.oauthbearer.token.file` (a Kubernetes projected
//!   service-account token, a Vault agent sink), read again whenever the file changes;
//! - `aws_msk_iam`: an AWS MSK IAM token signed with the AWS default credential chain
//!   for `sasl.oauthbearer.aws.region` (see [`super::msk_iam`]).
//!
//! `sasl.oauthbearer.extensions` (`key=value,key=value`, KIP-342) are sent with any of
//! them. A token is refreshed once 80% of its lifetime (±5%) has passed; a refresh that
//! fails keeps the current token while it is valid.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;

/// What the exporter sends as `sasl.mechanism` for these token sources.
pub const MECHANISM: &str = "OAUTHBEARER";

/// A fetch of a token (HTTP, file, AWS credential chain) that takes longer has failed.
const FETCH_TIMEOUT: Duration = Duration::from_secs(15);

/// How long to wait after `failures` failed refreshes in a row before asking again:
/// 10 s while a valid token is in hand; without one 2 s, doubling up to 30 s.
fn backoff(failures: u32, have_valid: bool) -> Duration {
    if have_valid {
        return Duration::from_secs(10);
    }
    Duration::from_secs((2u64 << failures.saturating_sub(1).min(4)).min(30))
}

/// Largest token endpoint answer read.
const MAX_ANSWER: usize = 1024 * 1024;

/// How long the token endpoint may take.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// Lifetime of an unsecured token when `sasl.oauthbearer.config` names none
/// (librdkafka's default).
const UNSECURED_LIFE: Duration = Duration::from_secs(3600);

/// Exporter properties that librdkafka does not know: they are removed from what
/// librdkafka is given.
pub const OWN_PROPERTIES: &[&str] = &[
    "sasl.oauthbearer.token.file",
    "sasl.oauthbearer.aws.region",
    // librdkafka knows these only when built with libcurl, which this build is not: the
    // exporter's own token endpoint client reads them.
    "https.ca.location",
    "https.ca.pem",
];

/// True when `security.protocol` is SASL_PLAINTEXT or SASL_SSL: only then does the
/// mechanism matter (librdkafka ignores a leftover `sasl.mechanism` otherwise).
pub fn uses_sasl(properties: &BTreeMap<String, String>) -> bool {
    properties
        .get("security.protocol")
        .is_some_and(|p| p.trim().to_ascii_lowercase().starts_with("sasl_"))
}

/// A bearer token, when it stops being valid, and the principal it names.
#[derive(Clone)]
pub struct Token {
    pub value: String,
    pub principal: String,
    pub expires: SystemTime,
}

/// Never shows the token itself.
impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("value", &"<redacted>")
            .field("principal", &self.principal)
            .field("expires", &self.expires)
            .finish()
    }
}

enum Method {
    Unsecured {
        principal: String,
        principal_claim: String,
        scope_claim: String,
        scope: Vec<String>,
        life: Duration,
    },
    Oidc {
        url: String,
        client_id: String,
        client_secret: String,
        scope: Option<String>,
        http: reqwest::Client,
    },
    File {
        path: PathBuf,
    },
    #[cfg(feature = "aws-msk-iam")]
    MskIam {
        region: Option<String>,
        signer: tokio::sync::OnceCell<super::msk_iam::MskIam>,
    },
}

impl Method {
    fn name(&self) -> &'static str {
        match self {
            Method::Unsecured { .. } => "unsecured JWT",
            Method::Oidc { .. } => "OIDC token endpoint",
            Method::File { .. } => "token file",
            #[cfg(feature = "aws-msk-iam")]
            Method::MskIam { .. } => "AWS MSK IAM",
        }
    }
}

struct Cached {
    token: Token,
    /// When to fetch the next one.
    refresh_at: SystemTime,
    /// The token file's modification time and length when it was read.
    stamp: Option<(SystemTime, u64)>,
}

/// One cluster's OAUTHBEARER tokens: fetched when first needed, cached and shared by
/// every connection of both clients, refreshed ahead of expiry.
///
/// A refresh runs in a task of its own, one at a time: a caller holding a valid token
/// never waits for the token endpoint, and a caller cut short by its deadline does not
/// cut the refresh short. After a failure the source waits before asking again (2 s,
/// doubling to 30 s without a valid token; 10 s while one is valid).
pub struct TokenSource {
    method: Method,
    extensions: Vec<(String, String)>,
    state: Mutex<State>,
    /// Woken when a refresh ends.
    refreshed: tokio::sync::Notify,
}

/// Unsticks a [`TokenSource`] whose refresh panicked (dropped without being forgotten).
struct Unstick<'a>(&'a TokenSource);

impl Drop for Unstick<'_> {
    fn drop(&mut self) {
        self.0.unstick();
    }
}

#[derive(Default)]
struct State {
    cached: Option<Cached>,
    refreshing: bool,
    /// The last failed refresh: when it ended, why, and how many failed in a row.
    failed: Option<(SystemTime, String, u32)>,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSource")
            .field("method", &self.method.name())
            .finish_non_exhaustive()
    }
}

/// A property that is missing or wrong: its key and why.
pub type PropertyError = (String, String);

fn property_error(key: &str, reason: impl Into<String>) -> PropertyError {
    (key.to_string(), reason.into())
}

impl TokenSource {
    /// The token source the `sasl.oauthbearer.*` properties describe. `tls_roots` gives
    /// the certificates an `https` token endpoint is checked against.
    pub fn from_properties(
        properties: &BTreeMap<String, String>,
    ) -> Result<TokenSource, PropertyError> {
        let get = |key: &str| {
            properties
                .get(key)
                .map(|v| v.trim())
                .filter(|v| !v.is_empty())
        };
        let need = |key: &str, method: &str| {
            get(key).map(str::to_string).ok_or_else(|| {
                property_error(
                    key,
                    format!("is required with sasl.oauthbearer.method={method}"),
                )
            })
        };
        let method = match get("sasl.oauthbearer.method") {
            Some(m) => m.to_ascii_lowercase(),
            None if get("sasl.oauthbearer.token.file").is_some() => "file".to_string(),
            None => "default".to_string(),
        };
        let method = match method.as_str() {
            "default" => {
                let unsecured = get("enable.sasl.oauthbearer.unsecure.jwt")
                    .is_some_and(|v| ["true", "t", "1"].iter().any(|t| v.eq_ignore_ascii_case(t)));
                if !unsecured {
                    return Err(property_error(
                        "sasl.oauthbearer.method",
                        "OAUTHBEARER needs a token source: oidc (with sasl.oauthbearer.token.endpoint.url), \
                         file (with sasl.oauthbearer.token.file), aws_msk_iam, or \
                         enable.sasl.oauthbearer.unsecure.jwt=true for unsigned tokens",
                    ));
                }
                parse_unsecured_config(get("sasl.oauthbearer.config").unwrap_or_default())?
            }
            "oidc" => {
                let url = need("sasl.oauthbearer.token.endpoint.url", "oidc")?;
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    return Err(property_error(
                        "sasl.oauthbearer.token.endpoint.url",
                        "must be an http:// or https:// URL",
                    ));
                }
                Method::Oidc {
                    url,
                    client_id: need("sasl.oauthbearer.client.id", "oidc")?,
                    client_secret: properties
                        .get("sasl.oauthbearer.client.secret")
                        .filter(|s| !s.is_empty())
                        .cloned()
                        .ok_or_else(|| {
                            property_error(
                                "sasl.oauthbearer.client.secret",
                                "is required with sasl.oauthbearer.method=oidc",
                            )
                        })?,
                    scope: get("sasl.oauthbearer.scope").map(str::to_string),
                    http: http_client(properties)?,
                }
            }
            "file" => Method::File {
                path: PathBuf::from(need("sasl.oauthbearer.token.file", "file")?),
            },
            #[cfg(feature = "aws-msk-iam")]
            "aws_msk_iam" => Method::MskIam {
                region: get("sasl.oauthbearer.aws.region").map(str::to_string),
                signer: Default::default(),
            },
            #[cfg(not(feature = "aws-msk-iam"))]
            "aws_msk_iam" => {
                return Err(property_error(
                    "sasl.oauthbearer.method",
                    "aws_msk_iam needs a build with the cargo feature aws-msk-iam (the \
                     default build, the release tarball and the image have it); this one \
                     was built without it"
                        .to_string(),
                ))
            }
            other => {
                return Err(property_error(
                    "sasl.oauthbearer.method",
                    format!("{other:?} is not one of default, oidc, file, aws_msk_iam"),
                ))
            }
        };
        let mut extensions = Vec::new();
        if let Some(list) = get("sasl.oauthbearer.extensions") {
            for pair in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (key, value) = pair.split_once('=').ok_or_else(|| {
                    property_error(
                        "sasl.oauthbearer.extensions",
                        format!("{pair:?} is not key=value"),
                    )
                })?;
                extensions.push(check_extension(
                    "sasl.oauthbearer.extensions",
                    key.trim(),
                    value.trim(),
                )?);
            }
        }
        if let Method::Unsecured { .. } = method {
            for (key, value) in unsecured_extensions(get("sasl.oauthbearer.config"))? {
                extensions.push((key, value));
            }
        }
        Ok(TokenSource {
            method,
            extensions,
            state: Mutex::new(State::default()),
            refreshed: tokio::sync::Notify::new(),
        })
    }

    /// The token endpoint's URL when it is plain HTTP to another host than this one.
    pub fn cleartext_endpoint(&self) -> Option<&str> {
        match &self.method {
            Method::Oidc { url, .. } => {
                let rest = url.strip_prefix("http://")?;
                let host = rest.split(['/', '?']).next().unwrap_or_default();
                let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
                (!["127.0.0.1", "localhost", "[::1]"].contains(&host)).then_some(url.as_str())
            }
            _ => None,
        }
    }

    /// The method, for messages: "OIDC token endpoint", "token file", ...
    pub fn describe(&self) -> &'static str {
        self.method.name()
    }

    /// A valid token: the cached one until it is due for refresh, else a new one. Past
    /// the refresh time a cached token that is still valid is returned at once while a
    /// refresh runs in the background; without a valid token the caller waits for the
    /// refresh, and the error says what the source answered.
    pub async fn token(self: &Arc<Self>) -> Result<Token, String> {
        loop {
            let refreshed = self.refreshed.notified();
            {
                let mut state = self.lock();
                let now = SystemTime::now();
                // A token file that changed is read before anything is returned.
                let changed = match (&self.method, &state.cached) {
                    (Method::File { path }, Some(cached)) => file_stamp(path) != cached.stamp,
                    _ => false,
                };
                if let Some(cached) = &state.cached {
                    if now < cached.refresh_at && !changed {
                        return Ok(cached.token.clone());
                    }
                }
                let valid = state
                    .cached
                    .as_ref()
                    .map(|c| c.token.clone())
                    .filter(|t| t.expires > now + Duration::from_secs(1));
                let waiting = state.failed.as_ref().is_some_and(|(at, _, failures)| {
                    now < *at + backoff(*failures, valid.is_some())
                });
                if !state.refreshing && !waiting {
                    state.refreshing = true;
                    let source = self.clone();
                    tokio::spawn(async move {
                        let guard = Unstick(&source);
                        source.refresh().await;
                        std::mem::forget(guard);
                    });
                }
                if let Some(token) = valid {
                    if !(changed && state.refreshing) {
                        return Ok(token);
                    }
                } else if !state.refreshing {
                    let (_, error, _) = state.failed.as_ref().expect("a failure to wait out");
                    return Err(error.clone());
                }
            }
            refreshed.await;
        }
    }

    /// After a refresh that panicked: records a failure and wakes whoever waits, so
    /// that the next call tries again.
    fn unstick(&self) {
        {
            let mut state = self.lock();
            state.refreshing = false;
            let failures = state.failed.as_ref().map_or(0, |f| f.2) + 1;
            state.failed = Some((
                SystemTime::now(),
                format!("{}: the token could not be read", self.describe()),
                failures,
            ));
        }
        self.refreshed.notify_waiters();
    }

    /// Fetches a new token and records the outcome; wakes whoever waits.
    async fn refresh(&self) {
        let fetched = match tokio::time::timeout(FETCH_TIMEOUT, self.fetch()).await {
            Ok(fetched) => fetched,
            Err(_) => Err(format!(
                "{}: no answer in {} s",
                self.describe(),
                FETCH_TIMEOUT.as_secs()
            )),
        };
        let now = SystemTime::now();
        let fetched = fetched.and_then(|(token, stamp)| {
            if token.expires <= now + Duration::from_secs(1) {
                let ago = now.duration_since(token.expires).unwrap_or_default();
                let origin = match &self.method {
                    Method::File { path } => format!("{} {}", self.describe(), path.display()),
                    Method::Oidc { url, .. } => format!("{} {url}", self.describe()),
                    _ => self.describe().to_string(),
                };
                Err(format!(
                    "{origin}: the token expired {} s ago",
                    ago.as_secs()
                ))
            } else {
                Ok((token, stamp))
            }
        });
        {
            let mut state = self.lock();
            state.refreshing = false;
            match fetched {
                Ok((token, stamp)) => {
                    tracing::debug!(
                        source = self.describe(),
                        principal = %token.principal,
                        "new OAUTHBEARER token, valid for {} s",
                        token.expires.duration_since(now).unwrap_or_default().as_secs()
                    );
                    state.cached = Some(Cached {
                        refresh_at: refresh_time(now, token.expires),
                        token,
                        stamp,
                    });
                    state.failed = None;
                }
                Err(error) => {
                    let failures = state.failed.as_ref().map_or(0, |f| f.2) + 1;
                    if let Some(valid) = state
                        .cached
                        .as_ref()
                        .filter(|c| c.token.expires > now + Duration::from_secs(1))
                    {
                        tracing::warn!(
                            "OAUTHBEARER token refresh failed ({error}); the current token is used \
                             while it is valid ({} s left)",
                            valid.token.expires.duration_since(now).unwrap_or_default().as_secs()
                        );
                    }
                    state.failed = Some((now, error, failures));
                }
            }
        }
        self.refreshed.notify_waiters();
    }

    /// The cached token while it is valid, for librdkafka (which must not wait); `None`
    /// before the first fetch or after it expired.
    pub fn current(&self) -> Option<Token> {
        self.lock()
            .cached
            .as_ref()
            .map(|c| c.token.clone())
            .filter(|t| t.expires > SystemTime::now() + Duration::from_secs(1))
    }

    /// The SASL extensions sent with the token (KIP-342).
    pub fn extensions(&self) -> &[(String, String)] {
        &self.extensions
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn fetch(&self) -> Result<(Token, Option<(SystemTime, u64)>), String> {
        let what = self.describe();
        match &self.method {
            Method::Unsecured {
                principal,
                principal_claim,
                scope_claim,
                scope,
                life,
            } => Ok((
                unsecured_token(
                    principal,
                    principal_claim,
                    scope_claim,
                    scope,
                    *life,
                    SystemTime::now(),
                ),
                None,
            )),
            Method::Oidc {
                url,
                client_id,
                client_secret,
                scope,
                http,
            } => {
                let token = oidc_token(http, url, client_id, client_secret, scope.as_deref())
                    .await
                    .map_err(|e| format!("{what} {url}: {e}"))?;
                Ok((token, None))
            }
            Method::File { path } => {
                let stamp = file_stamp(path);
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("{what} {}: {e}", path.display()))?;
                let value = text.trim().to_string();
                let claims =
                    jwt_claims(&value).map_err(|e| format!("{what} {}: {e}", path.display()))?;
                let expires = claims.expires.ok_or_else(|| {
                    format!("{what} {}: the token has no exp claim", path.display())
                })?;
                Ok((
                    Token {
                        principal: claims.subject.unwrap_or_else(|| "unknown".to_string()),
                        value,
                        expires,
                    },
                    stamp,
                ))
            }
            #[cfg(feature = "aws-msk-iam")]
            Method::MskIam { region, signer } => {
                let signer = signer
                    .get_or_try_init(|| {
                        super::msk_iam::MskIam::from_default_chain(region.as_deref())
                    })
                    .await
                    .map_err(|e| format!("{what}: {e}"))?;
                let (value, expires) = signer.token().await.map_err(|e| format!("{what}: {e}"))?;
                Ok((
                    Token {
                        value,
                        principal: "aws-msk-iam".to_string(),
                        expires,
                    },
                    None,
                ))
            }
        }
    }

    /// The client's first (and only) OAUTHBEARER message (RFC 7628 §3.1): the GS2
    /// header, `auth=Bearer <token>` and the extensions, separated by 0x01.
    pub fn initial_response(&self, token: &Token) -> Vec<u8> {
        initial_response(&token.value, &self.extensions)
    }
}

fn initial_response(token: &str, extensions: &[(String, String)]) -> Vec<u8> {
    let mut message = format!("n,,\x01auth=Bearer {token}\x01");
    for (key, value) in extensions {
        message.push_str(&format!("{key}={value}\x01"));
    }
    message.push('\x01');
    message.into_bytes()
}

/// What a broker that refuses the token says (RFC 7628 §3.2.2), for the log: its
/// `status` and, if any, `scope` and `openid-configuration` — never the token.
pub fn server_error(challenge: &[u8]) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_slice(challenge).ok();
    match parsed {
        Some(serde_json::Value::Object(fields)) => {
            let mut parts = Vec::new();
            for key in ["status", "scope", "openid-configuration"] {
                if let Some(value) = fields.get(key) {
                    let value = value
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or(value.to_string());
                    parts.push(format!("{key} {value}"));
                }
            }
            if parts.is_empty() {
                "the broker refused the token".to_string()
            } else {
                format!("the broker refused the token: {}", parts.join(", "))
            }
        }
        _ => "the broker refused the token (unreadable error message)".to_string(),
    }
}

/// librdkafka checks extension names and values the same way (RFC 7628 §3.1).
fn check_extension(key: &str, name: &str, value: &str) -> Result<(String, String), PropertyError> {
    if value.is_empty() {
        return Err(property_error(
            key,
            format!("extension {name} has no value (brokers refuse empty ones)"),
        ));
    }
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphabetic()) || name == "auth" {
        return Err(property_error(
            key,
            format!("extension name {name:?} must be letters only and not \"auth\""),
        ));
    }
    if !value
        .chars()
        .all(|c| matches!(c, '\x21'..='\x7e' | ' ' | '\t' | '\r' | '\n'))
    {
        return Err(property_error(
            key,
            format!("the value of extension {name} has characters SASL does not allow"),
        ));
    }
    Ok((name.to_string(), value.to_string()))
}

/// librdkafka's `sasl.oauthbearer.config` for unsecured tokens: space-separated
/// `principal=`, `principalClaimName=`, `scope=` (comma-separated), `scopeClaimName=`,
/// `lifeSeconds=` and `extension_NAME=`.
fn parse_unsecured_config(config: &str) -> Result<Method, PropertyError> {
    const KEY: &str = "sasl.oauthbearer.config";
    let mut principal = None;
    let mut principal_claim = "sub".to_string();
    let mut scope_claim = "scope".to_string();
    let mut scope = Vec::new();
    let mut life = UNSECURED_LIFE;
    for pair in config.split_whitespace() {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| property_error(KEY, format!("{pair:?} is not key=value")))?;
        match key {
            "principal" => principal = Some(value.to_string()),
            "principalClaimName" => principal_claim = value.to_string(),
            "scopeClaimName" => scope_claim = value.to_string(),
            "scope" => {
                scope = value
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            }
            "lifeSeconds" => {
                // Up to ten years: no token lives longer, and the arithmetic stays far from
                // overflowing.
                let seconds: u64 = value
                    .parse()
                    .ok()
                    .filter(|&s| s > 0 && s <= 315_360_000)
                    .ok_or_else(|| {
                        property_error(
                            KEY,
                            format!("lifeSeconds {value:?} is not a number of seconds from 1 to 315360000"),
                        )
                    })?;
                life = Duration::from_secs(seconds);
            }
            key if key.starts_with("extension_") => {}
            other => {
                return Err(property_error(
                    KEY,
                    format!("unknown key {other:?} (principal, principalClaimName, scope, scopeClaimName, lifeSeconds, extension_NAME)"),
                ))
            }
        }
    }
    let principal = principal
        .filter(|p| !p.is_empty())
        .ok_or_else(|| property_error(KEY, "needs principal=<name> for unsecured tokens"))?;
    Ok(Method::Unsecured {
        principal,
        principal_claim,
        scope_claim,
        scope,
        life,
    })
}

fn unsecured_extensions(config: Option<&str>) -> Result<Vec<(String, String)>, PropertyError> {
    let mut out = Vec::new();
    for pair in config.unwrap_or_default().split_whitespace() {
        if let Some((name, value)) = pair
            .strip_prefix("extension_")
            .and_then(|rest| rest.split_once('='))
        {
            out.push(check_extension("sasl.oauthbearer.config", name, value)?);
        }
    }
    Ok(out)
}

/// An unsigned JWS (`alg` none), as librdkafka builds one for unsecured OAUTHBEARER.
fn unsecured_token(
    principal: &str,
    principal_claim: &str,
    scope_claim: &str,
    scope: &[String],
    life: Duration,
    now: SystemTime,
) -> Token {
    let iat = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let exp = iat + life.as_secs();
    let mut claims = serde_json::Map::new();
    claims.insert(principal_claim.to_string(), principal.into());
    claims.insert("iat".to_string(), iat.into());
    claims.insert("exp".to_string(), exp.into());
    if !scope.is_empty() {
        claims.insert(scope_claim.to_string(), scope.to_vec().into());
    }
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
    let payload = URL_SAFE_NO_PAD.encode(serde_json::Value::Object(claims).to_string());
    Token {
        value: format!("{header}.{payload}."),
        principal: principal.to_string(),
        expires: UNIX_EPOCH + Duration::from_secs(exp),
    }
}

/// The claims of a JWT the exporter needs: when it expires and whom it names. Its
/// signature is the broker's to check.
struct Claims {
    expires: Option<SystemTime>,
    subject: Option<String>,
}

fn jwt_claims(token: &str) -> Result<Claims, String> {
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("the token is not a JWT (three base64url parts separated by dots)".into());
    };
    let bytes = URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| "the token's payload is not base64url".to_string())?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|_| "the token's payload is not a JSON object".to_string())?;
    let expires = claims
        .get("exp")
        .and_then(serde_json::Value::as_f64)
        // Up to the year 5138: a larger value is no time a token expires.
        .filter(|s| s.is_finite() && (0.0..1e11).contains(s))
        .map(|s| UNIX_EPOCH + Duration::from_secs_f64(s));
    let subject = claims
        .get("sub")
        .and_then(serde_json::Value::as_str)
        .map(str::to_string);
    Ok(Claims { expires, subject })
}

/// 80% of the lifetime left, ±5%, so that many exporters started together do not ask
/// the token endpoint at the same moment.
fn refresh_time(now: SystemTime, expires: SystemTime) -> SystemTime {
    let left = expires.duration_since(now).unwrap_or_default();
    let mut byte = [0u8; 1];
    let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut byte);
    let jitter = byte[0] as f64 / 255.0;
    now + left.mul_f64(0.75 + 0.1 * jitter)
}

fn file_stamp(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// The HTTP client for the token endpoint: TLS checked against `https.ca.location` (a
/// PEM file or a directory of them; `probe`: the system's) or `https.ca.pem`, else the
/// system's roots, as librdkafka does. The brokers' `ssl.ca.*` is not used: a private
/// Kafka CA and a publicly signed identity provider are common together.
fn http_client(properties: &BTreeMap<String, String>) -> Result<reqwest::Client, PropertyError> {
    let tls = super::tls::roots_config(properties, &[("https.ca.location", "https.ca.pem")])
        .map_err(|(key, reason)| property_error(&key, reason))?;
    reqwest::Client::builder()
        .use_preconfigured_tls(tls)
        .timeout(HTTP_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .user_agent(concat!("kafka-lso-exporter/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| property_error("sasl.oauthbearer.token.endpoint.url", e.to_string()))
}

/// The client-credentials grant (RFC 6749 §4.4): the client authenticates with HTTP
/// Basic, id and secret as they are (as librdkafka and Kafka's Java client send them by
/// default; RFC 6749 §2.3.1 would form-encode them first, which identity providers that
/// do not decode refuse for secrets with `+`, `/`, `=` or `%`).
async fn oidc_token(
    http: &reqwest::Client,
    url: &str,
    client_id: &str,
    client_secret: &str,
    scope: Option<&str>,
) -> Result<Token, String> {
    let basic = STANDARD.encode(format!("{client_id}:{client_secret}"));
    let mut body = "grant_type=client_credentials".to_string();
    if let Some(scope) = scope {
        body.push_str(&format!("&scope={}", form_urlencoded(scope)));
    }
    let answer = http
        .post(url)
        .header("Authorization", format!("Basic {basic}"))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Accept", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| {
            let e = e.without_url();
            let mut reason = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(inner) = source {
                reason.push_str(&format!(": {inner}"));
                source = inner.source();
            }
            reason
        })?;
    let status = answer.status();
    let mut answer = answer;
    let mut bytes = Vec::new();
    while let Some(chunk) = answer
        .chunk()
        .await
        .map_err(|e| format!("reading the answer: {}", e.without_url()))?
    {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > MAX_ANSWER {
            return Err(format!(
                "the answer is larger than {} KiB",
                MAX_ANSWER / 1024
            ));
        }
    }
    let json: Option<serde_json::Value> = serde_json::from_slice(&bytes).ok();
    if !status.is_success() {
        let detail = json
            .as_ref()
            .map(|j| {
                [j.get("error"), j.get("error_description")]
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str())
                    .collect::<Vec<_>>()
                    .join(": ")
            })
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| "no OAuth error in the answer".to_string());
        return Err(format!("HTTP {status}: {detail}"));
    }
    let json = json.ok_or("the answer is not JSON")?;
    let value = json
        .get("access_token")
        .and_then(serde_json::Value::as_str)
        .ok_or("the answer has no access_token")?
        .to_string();
    let claims = jwt_claims(&value).ok();
    let expires = claims
        .as_ref()
        .and_then(|c| c.expires)
        .or_else(|| {
            json.get("expires_in")
                .and_then(|v| v.as_u64().or_else(|| v.as_str()?.trim().parse().ok()))
                .filter(|&s| s < 1_000_000_000)
                .map(|s| SystemTime::now() + Duration::from_secs(s))
        })
        .ok_or("the token has no exp claim and the answer no expires_in")?;
    Ok(Token {
        principal: claims
            .and_then(|c| c.subject)
            .unwrap_or_else(|| client_id.to_string()),
        value,
        expires,
    })
}

/// `application/x-www-form-urlencoded` encoding of one value.
fn form_urlencoded(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for byte in s.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(byte as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// Shared by the clients of one cluster.
pub type SharedTokens = Arc<TokenSource>;

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn initial_response_follows_rfc_7628() {
        let message = initial_response(
            "abc.def.ghi",
            &[
                ("traceId".into(), "123".into()),
                ("logicalCluster".into(), "lkc-1".into()),
            ],
        );
        assert_eq!(
            message,
            b"n,,\x01auth=Bearer abc.def.ghi\x01traceId=123\x01logicalCluster=lkc-1\x01\x01"
        );
        assert_eq!(initial_response("t", &[]), b"n,,\x01auth=Bearer t\x01\x01");
    }

    #[test]
    fn unsecured_token_is_an_unsigned_jws_with_sub_exp_and_scope() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let token = unsecured_token(
            "exporter",
            "sub",
            "scope",
            &["read".into(), "describe".into()],
            Duration::from_secs(60),
            now,
        );
        let parts: Vec<&str> = token.value.split('.').collect();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[2], "");
        assert_eq!(
            URL_SAFE_NO_PAD.decode(parts[0]).unwrap(),
            br#"{"alg":"none"}"#
        );
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["sub"], "exporter");
        assert_eq!(claims["iat"], 1_700_000_000u64);
        assert_eq!(claims["exp"], 1_700_000_060u64);
        assert_eq!(claims["scope"], serde_json::json!(["read", "describe"]));
        assert_eq!(token.expires, now + Duration::from_secs(60));
        let parsed = jwt_claims(&token.value).unwrap();
        assert_eq!(parsed.expires, Some(token.expires));
        assert_eq!(parsed.subject.as_deref(), Some("exporter"));
    }

    #[test]
    fn unsecured_config_is_read_as_librdkafka_reads_it() {
        let source = TokenSource::from_properties(&props(&[
            ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
            (
                "sasl.oauthbearer.config",
                "principal=alice scope=a,b lifeSeconds=30 extension_traceId=7",
            ),
        ]))
        .unwrap();
        match &source.method {
            Method::Unsecured {
                principal,
                scope,
                life,
                ..
            } => {
                assert_eq!(principal, "alice");
                assert_eq!(scope, &["a", "b"]);
                assert_eq!(*life, Duration::from_secs(30));
            }
            _ => panic!("not unsecured"),
        }
        assert_eq!(source.extensions, vec![("traceId".into(), "7".into())]);
    }

    #[test]
    fn wrong_properties_name_their_key() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "sasl.oauthbearer.method"),
            (
                &[("sasl.oauthbearer.method", "magic")],
                "sasl.oauthbearer.method",
            ),
            (
                &[("sasl.oauthbearer.method", "oidc")],
                "sasl.oauthbearer.token.endpoint.url",
            ),
            (
                &[
                    ("sasl.oauthbearer.method", "oidc"),
                    ("sasl.oauthbearer.token.endpoint.url", "ftp://x"),
                ],
                "sasl.oauthbearer.token.endpoint.url",
            ),
            (
                &[
                    ("sasl.oauthbearer.method", "oidc"),
                    ("sasl.oauthbearer.token.endpoint.url", "https://idp/token"),
                    ("sasl.oauthbearer.client.id", "x"),
                ],
                "sasl.oauthbearer.client.secret",
            ),
            (
                &[("sasl.oauthbearer.method", "file")],
                "sasl.oauthbearer.token.file",
            ),
            (
                &[
                    ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
                    ("sasl.oauthbearer.config", "scope=x"),
                ],
                "sasl.oauthbearer.config",
            ),
            (
                &[
                    ("sasl.oauthbearer.token.file", "/t"),
                    ("sasl.oauthbearer.extensions", "auth=x"),
                ],
                "sasl.oauthbearer.extensions",
            ),
            (
                &[
                    ("sasl.oauthbearer.token.file", "/t"),
                    ("sasl.oauthbearer.extensions", "novalue"),
                ],
                "sasl.oauthbearer.extensions",
            ),
        ];
        for (pairs, key) in cases {
            let error = TokenSource::from_properties(&props(pairs)).unwrap_err();
            assert_eq!(error.0, *key, "{pairs:?}: {error:?}");
        }
    }

    #[test]
    fn refresh_comes_at_about_80_percent_of_the_lifetime() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let at = refresh_time(now, now + Duration::from_secs(1000));
        let after = at.duration_since(now).unwrap().as_secs();
        assert!((750..=850).contains(&after), "{after}");
        assert_eq!(refresh_time(now, now - Duration::from_secs(5)), now);
    }

    #[test]
    fn jwt_claims_of_bad_tokens_are_errors() {
        assert!(jwt_claims("not-a-jwt").is_err());
        assert!(jwt_claims("a.!!!.c").is_err());
        let payload = URL_SAFE_NO_PAD.encode("[1,2]");
        let claims = jwt_claims(&format!("a.{payload}.c")).unwrap();
        assert!(claims.expires.is_none());
    }

    #[test]
    fn server_errors_show_status_never_more() {
        let message = server_error(br#"{"status":"invalid_token","scope":"kafka"}"#);
        assert_eq!(
            message,
            "the broker refused the token: status invalid_token, scope kafka"
        );
        assert!(server_error(b"\xff").contains("unreadable"));
    }

    #[tokio::test]
    async fn a_token_file_is_read_again_when_it_changes() {
        let dir = std::env::temp_dir().join(format!("oauth-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        let now = SystemTime::now();
        let write = |sub: &str, life: u64| {
            let t = unsecured_token(sub, "sub", "scope", &[], Duration::from_secs(life), now);
            std::fs::write(&path, format!("{}\n", t.value)).unwrap();
            t
        };
        let first = write("one", 600);
        let source = Arc::new(
            TokenSource::from_properties(&props(&[(
                "sasl.oauthbearer.token.file",
                path.to_str().unwrap(),
            )]))
            .unwrap(),
        );
        let token = source.token().await.unwrap();
        assert_eq!(token.value, first.value);
        assert_eq!(token.principal, "one");
        // A new token of another length: the file's stamp changes.
        let second = write("second", 900);
        let token = source.token().await.unwrap();
        assert_eq!(token.value, second.value);
        assert!(!format!("{token:?}").contains(&second.value));
        // An expired token in the file: the valid one in hand stays in use.
        let expired = unsecured_token(
            "x",
            "sub",
            "scope",
            &[],
            Duration::ZERO,
            now - Duration::from_secs(120),
        );
        std::fs::write(&path, &expired.value).unwrap();
        assert_eq!(source.token().await.unwrap().value, second.value);
        assert_eq!(source.token().await.unwrap().value, second.value);
        // Without one, an expired token is an error naming the file, never the token.
        std::fs::write(
            &path,
            unsecured_token(
                "x",
                "sub",
                "scope",
                &[],
                Duration::ZERO,
                now - Duration::from_secs(120),
            )
            .value,
        )
        .unwrap();
        let source = Arc::new(
            TokenSource::from_properties(&props(&[(
                "sasl.oauthbearer.token.file",
                path.to_str().unwrap(),
            )]))
            .unwrap(),
        );
        let error = source.token().await.unwrap_err();
        assert!(error.contains("expired"), "{error}");
        assert!(error.contains(path.to_str().unwrap()), "{error}");
        assert!(!error.contains(&expired.value[..20]), "{error}");
        // Asked again at once: the failure is waited out, not repeated.
        let again = source.token().await.unwrap_err();
        assert_eq!(again, error);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn backoff_doubles_to_30_s_without_a_token_and_is_10_s_with_one() {
        let waits: Vec<u64> = (1..=7).map(|n| backoff(n, false).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(backoff(3, true), Duration::from_secs(10));
    }

    #[test]
    fn librdkafka_truth_values_and_empty_extensions() {
        for truth in ["true", "True", "t", "1"] {
            assert!(TokenSource::from_properties(&props(&[
                ("enable.sasl.oauthbearer.unsecure.jwt", truth),
                ("sasl.oauthbearer.config", "principal=p"),
            ]))
            .is_ok());
        }
        let error = TokenSource::from_properties(&props(&[
            ("sasl.oauthbearer.token.file", "/t"),
            ("sasl.oauthbearer.extensions", "traceId="),
        ]))
        .unwrap_err();
        assert_eq!(error.0, "sasl.oauthbearer.extensions");
    }

    #[test]
    fn a_huge_exp_is_no_expiry() {
        let payload = URL_SAFE_NO_PAD.encode(r#"{"exp":1e300,"sub":"s"}"#);
        assert!(jwt_claims(&format!("a.{payload}.c"))
            .unwrap()
            .expires
            .is_none());
    }

    #[test]
    fn cleartext_endpoints_other_than_loopback_are_named() {
        let source = |url: &str| {
            TokenSource::from_properties(&props(&[
                ("sasl.oauthbearer.method", "oidc"),
                ("sasl.oauthbearer.token.endpoint.url", url),
                ("sasl.oauthbearer.client.id", "i"),
                ("sasl.oauthbearer.client.secret", "s"),
            ]))
            .unwrap()
        };
        assert_eq!(
            source("http://idp.example:8080/token").cleartext_endpoint(),
            Some("http://idp.example:8080/token")
        );
        assert_eq!(
            source("http://127.0.0.1:1/token").cleartext_endpoint(),
            None
        );
        assert_eq!(
            source("https://idp.example/token").cleartext_endpoint(),
            None
        );
    }

    #[test]
    fn form_encoding_escapes_what_basic_auth_must_not_see() {
        assert_eq!(form_urlencoded("a b:c%"), "a+b%3Ac%25");
        assert_eq!(form_urlencoded("plain-id_1.x"), "plain-id_1.x");
    }
}
