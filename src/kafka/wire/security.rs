//! How the exporter's own client secures its connections: TLS (rustls) and SASL
//! settings read from the same librdkafka-style `client` properties as librdkafka.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

#[cfg(feature = "gssapi")]
use super::gssapi::Kerberos;
use super::oauth::{self, TokenSource};
use super::scram::Mechanism;
use super::tls::tls_config;

/// How connections are secured, from librdkafka-style `client` properties.
#[derive(Clone)]
pub struct Security {
    pub(super) tls: Option<Arc<rustls::ClientConfig>>,
    pub(super) sasl: Option<Sasl>,
}

#[derive(Clone)]
pub(super) enum Sasl {
    Plain {
        username: String,
        password: String,
    },
    Scram {
        mechanism: Mechanism,
        username: String,
        password: String,
    },
    OAuthBearer(Arc<TokenSource>),
    /// Kerberos, with librdkafka's `sasl.kerberos.*` settings.
    #[cfg(feature = "gssapi")]
    Gssapi(Kerberos),
}

impl fmt::Debug for Security {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sasl = match &self.sasl {
            None => "none",
            Some(Sasl::Plain { .. }) => "PLAIN",
            Some(Sasl::Scram { mechanism, .. }) => mechanism.name(),
            Some(Sasl::OAuthBearer(_)) => oauth::MECHANISM,
            #[cfg(feature = "gssapi")]
            Some(Sasl::Gssapi(_)) => "GSSAPI",
        };
        f.debug_struct("Security")
            .field("tls", &self.tls.is_some())
            .field("sasl", &sasl)
            .finish()
    }
}

impl Security {
    /// The cluster's OAUTHBEARER token source, which librdkafka is to share.
    pub fn tokens(&self) -> Option<Arc<TokenSource>> {
        match &self.sasl {
            Some(Sasl::OAuthBearer(tokens)) => Some(tokens.clone()),
            _ => None,
        }
    }

    /// The same settings with `tokens` as the OAUTHBEARER token source, so that one
    /// source serves this client and librdkafka.
    pub fn with_tokens(mut self, tokens: Arc<TokenSource>) -> Security {
        if let Some(Sasl::OAuthBearer(own)) = &mut self.sasl {
            *own = tokens;
        }
        self
    }

    /// Reads `security.protocol`, `sasl.*` and `ssl.*` the way librdkafka does. An
    /// `Err` says, in a sentence for the startup log, what this client cannot do (e.g.
    /// GSSAPI); the caller turns the capability off for that cluster.
    pub fn from_properties(properties: &BTreeMap<String, String>) -> Result<Security, String> {
        let get = |key: &str| properties.get(key).map(|v| v.trim());
        let protocol = get("security.protocol")
            .unwrap_or("plaintext")
            .to_ascii_lowercase();
        let (tls, sasl) = match protocol.as_str() {
            "plaintext" => (false, false),
            "ssl" => (true, false),
            "sasl_plaintext" => (false, true),
            "sasl_ssl" => (true, true),
            other => return Err(format!("security.protocol {other:?} is not supported")),
        };
        let sasl = if sasl {
            let mechanism = get("sasl.mechanism")
                .or(get("sasl.mechanisms"))
                .unwrap_or("GSSAPI");
            let username = get("sasl.username").unwrap_or_default().to_string();
            let password = properties.get("sasl.password").cloned().unwrap_or_default();
            Some(if mechanism.eq_ignore_ascii_case("PLAIN") {
                Sasl::Plain { username, password }
            } else if mechanism.eq_ignore_ascii_case(oauth::MECHANISM) {
                let tokens = TokenSource::from_properties(properties)
                    .map_err(|(key, reason)| format!("{key}: {reason}"))?;
                Sasl::OAuthBearer(Arc::new(tokens))
            } else if mechanism.eq_ignore_ascii_case("GSSAPI") {
                gssapi(&get)?
            } else if let Some(mechanism) = Mechanism::from_name(mechanism) {
                Sasl::Scram {
                    mechanism,
                    username,
                    password,
                }
            } else {
                return Err(format!(
                    "SASL mechanism {mechanism} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER{} are)",
                    if cfg!(feature = "gssapi") { " and GSSAPI" } else { "" }
                ));
            })
        } else {
            None
        };
        let tls = if tls {
            Some(Arc::new(tls_config(properties)?))
        } else {
            None
        };
        Ok(Security { tls, sasl })
    }
}

/// Kerberos from librdkafka's `sasl.kerberos.*` properties.
#[cfg(feature = "gssapi")]
fn gssapi<'a>(get: &impl Fn(&str) -> Option<&'a str>) -> Result<Sasl, String> {
    let set = |key: &str| get(key).filter(|v| !v.is_empty()).map(str::to_string);
    Ok(Sasl::Gssapi(Kerberos {
        service: set("sasl.kerberos.service.name").unwrap_or_else(|| "kafka".into()),
        principal: set("sasl.kerberos.principal"),
        keytab: set("sasl.kerberos.keytab"),
        first_step: Default::default(),
    }))
}

#[cfg(not(feature = "gssapi"))]
fn gssapi<'a>(_: &impl Fn(&str) -> Option<&'a str>) -> Result<Sasl, String> {
    Err(
        "SASL mechanism GSSAPI is not supported by this build (it lacks the cargo feature \
         `gssapi`): use the -kerberos release tarball or the image built with \
         --build-arg FLAVOUR=kerberos"
            .into(),
    )
}
