//! How the exporter's own client secures its connections: TLS (rustls) and SASL
//! settings read from the same librdkafka-style `client` properties as librdkafka.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

#[cfg(feature = "gssapi")]
use super::gssapi::Kerberos;
use super::oauth::{self, TokenSource};
use super::scram::Mechanism;

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
         `gssapi`)"
            .into(),
    )
}

/// A rustls client configuration from librdkafka's `ssl.*` properties.
fn tls_config(properties: &BTreeMap<String, String>) -> Result<rustls::ClientConfig, String> {
    for key in [
        "ssl.keystore.location",
        "ssl.key.password",
        "ssl.engine.location",
    ] {
        if properties.contains_key(key) {
            return Err(format!(
                "{key} is not supported (use PEM files: ssl.ca.location, ssl.certificate.location, ssl.key.location)"
            ));
        }
    }
    let read = |key: &str, inline: &str| -> Result<Option<Vec<u8>>, String> {
        if let Some(path) = properties.get(key) {
            return std::fs::read(path)
                .map(Some)
                .map_err(|e| format!("{key}: cannot read {path}: {e}"));
        }
        Ok(properties.get(inline).map(|pem| pem.as_bytes().to_vec()))
    };
    let roots = roots(properties, &[("ssl.ca.location", "ssl.ca.pem")])
        .map_err(|(key, reason)| format!("{key}: {reason}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let verify_certificate = properties
        .get("enable.ssl.certificate.verification")
        .is_none_or(|v| v.trim() != "false");
    let verify_hostname = !properties
        .get("ssl.endpoint.identification.algorithm")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("none"));
    let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| format!("ssl.ca.location: {e}"))?;
    let verifier = Arc::new(Verifier {
        inner: webpki,
        verify_certificate,
        verify_hostname,
    });
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let client_cert = read("ssl.certificate.location", "ssl.certificate.pem")?;
    let client_key = read("ssl.key.location", "ssl.key.pem")?;
    match (client_cert, client_key) {
        (Some(cert), Some(key)) => {
            let chain: Vec<_> = CertificateDer::pem_slice_iter(&cert).flatten().collect();
            let key = PrivateKeyDer::from_pem_slice(&key)
                .map_err(|_| "ssl.key.location holds no PEM private key".to_string())?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("ssl.certificate.location: {e}"))
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        _ => Err("ssl.certificate.location and ssl.key.location must be set together".into()),
    }
}

/// The certificates of the first of `sources` (a file property and its inline PEM
/// property) that is set, or the system's roots if none is. An error names the key.
fn roots(
    properties: &BTreeMap<String, String>,
    sources: &[(&str, &str)],
) -> Result<rustls::RootCertStore, (String, String)> {
    let mut roots = rustls::RootCertStore::empty();
    // As librdkafka: the file (or directory) and the inline PEM together; "probe" means
    // the system's certificates, unless an inline PEM is given.
    for &(file, inline) in sources {
        let location = properties.get(file).map(|p| p.trim());
        let pem = properties.get(inline);
        if location.is_none() && pem.is_none() {
            continue;
        }
        let mut added_from = |key: &str, bytes: &[u8]| -> Result<(), (String, String)> {
            let certs: Vec<_> = CertificateDer::pem_slice_iter(bytes).flatten().collect();
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err((key.to_string(), "holds no PEM certificate".to_string()));
            }
            Ok(())
        };
        match location {
            Some("probe") if pem.is_none() => break,
            Some("probe") | None => {}
            Some(path) => added_from(file, &read_pem_files(file, path)?)?,
        }
        if let Some(pem) = pem {
            added_from(inline, pem.as_bytes())?;
        }
        return Ok(roots);
    }
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    Ok(roots)
}

/// The bytes of a PEM file, or of every file in a directory of them (as OpenSSL's
/// CApath, which librdkafka accepts too), concatenated.
fn read_pem_files(key: &str, path: &str) -> Result<Vec<u8>, (String, String)> {
    let failed = |e: std::io::Error| (key.to_string(), format!("cannot read {path}: {e}"));
    let meta = std::fs::metadata(path).map_err(failed)?;
    if !meta.is_dir() {
        return std::fs::read(path).map_err(failed);
    }
    let mut pem = Vec::new();
    for entry in std::fs::read_dir(path).map_err(failed)?.flatten() {
        if entry.path().is_file() {
            if let Ok(bytes) = std::fs::read(entry.path()) {
                pem.extend_from_slice(&bytes);
                pem.push(b'\n');
            }
        }
    }
    Ok(pem)
}

/// A rustls configuration that checks servers against the roots of [`roots`] and
/// presents no certificate: for the OAuth token endpoint.
pub(super) fn roots_config(
    properties: &BTreeMap<String, String>,
    sources: &[(&str, &str)],
) -> Result<rustls::ClientConfig, (String, String)> {
    let roots = roots(properties, sources)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|builder| builder.with_root_certificates(roots).with_no_client_auth())
        .map_err(|e| (sources[0].0.to_string(), format!("TLS setup: {e}")))
}

/// librdkafka's two switches over the usual WebPKI checks:
/// `enable.ssl.certificate.verification=false` accepts any certificate, and
/// `ssl.endpoint.identification.algorithm=none` checks the chain but not the name.
#[derive(Debug)]
struct Verifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    verify_certificate: bool,
    verify_hostname: bool,
}

impl rustls::client::danger::ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        if !self.verify_certificate {
            return Ok(rustls::client::danger::ServerCertVerified::assertion());
        }
        // WebPKI checks the chain before the name: a name error means the chain is good.
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForName))
            | Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForNameContext { .. },
            )) if !self.verify_hostname || named_by_common_name(end_entity, server_name) => {
                Ok(rustls::client::danger::ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The certificate names `server_name` in its subject's CN and has no DNS name in a
/// subjectAltName: valid for that host by the rule OpenSSL (librdkafka) and the Java
/// client apply, which WebPKI does not (it reads the subjectAltName only). Brokers with
/// such certificates (made before browsers dropped the CN) are common, and librdkafka
/// connects to them with the same settings. Only for host names, as OpenSSL: an IP
/// address must be in the subjectAltName. A `*` is allowed as the whole first label,
/// standing for exactly one label.
fn named_by_common_name(end_entity: &CertificateDer<'_>, server_name: &ServerName<'_>) -> bool {
    let ServerName::DnsName(host) = server_name else {
        return false;
    };
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(end_entity.as_ref()) else {
        return false;
    };
    let dns_alt_names = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .is_some_and(|san| {
            san.value
                .general_names
                .iter()
                .any(|n| matches!(n, x509_parser::extensions::GeneralName::DNSName(_)))
        });
    if dns_alt_names {
        return false;
    }
    let host = host.as_ref().trim_end_matches('.');
    let named = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .any(|cn| host_matches(cn.trim_end_matches('.'), host));
    named
}

/// `pattern` (a certificate's name, perhaps `*.example.com`) covers `host`.
fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        Some(domain) => host
            .split_once('.')
            .is_some_and(|(label, rest)| !label.is_empty() && rest.eq_ignore_ascii_case(domain)),
        None => !pattern.contains('*') && pattern.eq_ignore_ascii_case(host),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_common_name_covers_a_host_as_openssl_has_it() {
        assert!(host_matches("kafka-0.example.com", "KAFKA-0.example.com"));
        assert!(host_matches("*.example.com", "kafka-0.example.com"));
        assert!(!host_matches("*.example.com", "example.com"));
        assert!(!host_matches("*.example.com", "a.b.example.com"));
        assert!(!host_matches("kafka-*.example.com", "kafka-0.example.com"));
        assert!(!host_matches("kafka-1.example.com", "kafka-0.example.com"));

        let leaf = |cn: &str, alt_names: Vec<String>| {
            let mut params = rcgen::CertificateParams::new(alt_names).unwrap();
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, cn);
            let key = rcgen::KeyPair::generate().unwrap();
            params.self_signed(&key).unwrap().der().clone()
        };
        let name = |n: &str| ServerName::try_from(n.to_string()).unwrap();
        let cn_only = leaf("kafka-0.example.com", Vec::new());
        assert!(named_by_common_name(&cn_only, &name("kafka-0.example.com")));
        assert!(!named_by_common_name(
            &cn_only,
            &name("kafka-1.example.com")
        ));
        // A subjectAltName with DNS names decides alone, as in OpenSSL.
        let with_alt = leaf("kafka-0.example.com", vec!["other.example.com".into()]);
        assert!(!named_by_common_name(
            &with_alt,
            &name("kafka-0.example.com")
        ));
        // An IP address is never taken from the CN.
        let ip_cn = leaf("127.0.0.1", Vec::new());
        assert!(!named_by_common_name(&ip_cn, &name("127.0.0.1")));
    }

    fn pem(name: &str) -> String {
        rcgen::generate_simple_self_signed(vec![name.to_string()])
            .unwrap()
            .cert
            .pem()
    }

    #[test]
    fn ca_roots_from_a_directory_a_file_and_inline_pem_together() {
        let dir = std::env::temp_dir().join(format!("roots-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.pem"), pem("a")).unwrap();
        std::fs::write(dir.join("b.pem"), pem("b")).unwrap();
        let props = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let sources = [("ssl.ca.location", "ssl.ca.pem")];
        let count = |pairs: &[(&str, &str)]| roots(&props(pairs), &sources).map(|r| r.len());
        let dir_path = dir.to_str().unwrap().to_string();
        let file = dir.join("a.pem").to_str().unwrap().to_string();
        let inline = pem("c");
        assert_eq!(count(&[("ssl.ca.location", &dir_path)]), Ok(2));
        assert_eq!(
            count(&[("ssl.ca.location", &file), ("ssl.ca.pem", &inline)]),
            Ok(2)
        );
        assert_eq!(
            count(&[("ssl.ca.location", "probe"), ("ssl.ca.pem", &inline)]),
            Ok(1)
        );
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "no certificate here").unwrap();
        let error = count(&[("ssl.ca.location", empty.to_str().unwrap())]).unwrap_err();
        assert_eq!(error.0, "ssl.ca.location");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
