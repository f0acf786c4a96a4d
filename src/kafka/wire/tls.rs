//! TLS of the exporter's own client, as librdkafka configures it from the same `ssl.*`
//! properties: the trusted roots (a CA file or directory, inline PEM, or the system's),
//! a client certificate, and the server's certificate checked by WebPKI with librdkafka's
//! two switches and OpenSSL's reading of the CN. Used by the broker connections
//! ([`super::security`]) and the OAuth token endpoint's client ([`super::oauth`]);
//! imports nothing of the client.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// A rustls client configuration from librdkafka's `ssl.*` properties.
pub(super) fn tls_config(
    properties: &BTreeMap<String, String>,
) -> Result<rustls::ClientConfig, String> {
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
    let constrained_roots = roots.roots.iter().any(|r| r.name_constraints.is_some());
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
        constrained_roots,
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

/// The TLS files of librdkafka's `ssl.*` properties as `--check-config` checks them,
/// before anything connects: each named file (or CA directory) exists and can be read,
/// and a PEM one holds what its key says. An error names the key and the path (never a
/// value of an inline property: a key may be secret).
pub fn check_tls_files(properties: &BTreeMap<String, String>) -> Result<(), (String, String)> {
    // (key, what a PEM file of it holds; None: not PEM, or encrypted with a password)
    let encrypted_key = properties.contains_key("ssl.key.password");
    let files: [(&str, Option<&str>); 5] = [
        ("ssl.ca.location", Some("certificate")),
        ("ssl.certificate.location", Some("certificate")),
        (
            "ssl.key.location",
            (!encrypted_key).then_some("private key"),
        ),
        ("ssl.crl.location", None),
        ("ssl.keystore.location", None),
    ];
    for (key, holds) in files {
        let Some(path) = properties.get(key).map(|p| p.trim()) else {
            continue;
        };
        if key == "ssl.ca.location" && path == "probe" {
            continue;
        }
        let failed = |e: std::io::Error| (key.to_string(), format!("cannot read {path}: {e}"));
        if std::fs::metadata(path).map_err(failed)?.is_dir() {
            // A CA directory, as OpenSSL's CApath: read lazily, so only readable.
            std::fs::read_dir(path).map_err(failed)?;
            continue;
        }
        let text = String::from_utf8_lossy(&std::fs::read(path).map_err(failed)?).into_owned();
        // As OpenSSL reads them: any certificate label (TRUSTED CERTIFICATE too), any
        // private key (RSA, EC, DSA, PKCS#8).
        let found = match holds {
            Some("certificate") => {
                text.contains("-----BEGIN CERTIFICATE-----")
                    || text.contains("-----BEGIN TRUSTED CERTIFICATE-----")
                    || text.contains("-----BEGIN X509 CERTIFICATE-----")
            }
            Some(_) => text.lines().any(|l| {
                l.starts_with("-----BEGIN ") && l.trim_end().ends_with("PRIVATE KEY-----")
            }),
            None => true,
        };
        if !found {
            return Err((
                key.to_string(),
                format!("{path} holds no PEM {}", holds.unwrap_or_default()),
            ));
        }
    }
    check_key_matches(properties)
}

/// The client certificate and its key belong together: the key's public half is the
/// certificate's (what librdkafka refuses at the start with "key values mismatch").
/// Files only, and an unencrypted key; a key type the check cannot read is left to the
/// clients.
fn check_key_matches(properties: &BTreeMap<String, String>) -> Result<(), (String, String)> {
    let (Some(cert_path), Some(key_path)) = (
        properties.get("ssl.certificate.location"),
        properties.get("ssl.key.location"),
    ) else {
        return Ok(());
    };
    if properties.contains_key("ssl.key.password") {
        return Ok(());
    }
    let (Ok(cert), Ok(key)) = (
        std::fs::read(cert_path.trim()),
        std::fs::read(key_path.trim()),
    ) else {
        return Ok(());
    };
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&cert).flatten().collect();
    let Ok(key) = PrivateKeyDer::from_pem_slice(&key) else {
        return Ok(());
    };
    let provider = rustls::crypto::ring::default_provider();
    match rustls::sign::CertifiedKey::from_der(chain, key, &provider) {
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => Err((
            "ssl.key.location".to_string(),
            format!(
                "{} is not the key of the certificate in {} (ssl.certificate.location): a key of \
                 another certificate, or the two files of another pair",
                key_path.trim(),
                cert_path.trim()
            ),
        )),
        _ => Ok(()),
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
    /// Some trusted root limits the names it may certify (name constraints): WebPKI
    /// checks those against the subjectAltName only, so no name is taken from a CN.
    constrained_roots: bool,
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
            )) if !self.verify_hostname
                || (!self.constrained_roots
                    && !intermediates.iter().any(|c| has_name_constraints(c))
                    && named_by_common_name(end_entity, server_name)) =>
            {
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
/// subjectAltName: valid for that host by the rule OpenSSL (librdkafka) applies and WebPKI
/// does not (it reads the subjectAltName only). Brokers with such certificates (made
/// before browsers dropped the CN) are common, and librdkafka connects to them with the
/// same settings. Never looser than OpenSSL's default host check: only for host
/// names (an IP address must be in the subjectAltName), never under a CA that constrains
/// names (checked by the caller: OpenSSL checks a CN against them, WebPKI does not), a
/// `*` only as the whole first label of a name of at least three labels, standing for
/// exactly one label. Partial wildcards (`kafka-*.example.com`), which OpenSSL also
/// accepts, are refused: librdkafka still connects there, the own client does not.
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
    let host = host.as_ref();
    let named = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok())
        .any(|cn| host_matches(cn, host));
    named
}

/// The certificate (an intermediate CA) carries name constraints.
fn has_name_constraints(cert: &CertificateDer<'_>) -> bool {
    x509_parser::parse_x509_certificate(cert.as_ref()).map_or(true, |(_, cert)| {
        cert.name_constraints().ok().flatten().is_some()
    })
}

/// `pattern` (a certificate's name, perhaps `*.example.com`) covers `host`.
fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix("*.") {
        // As OpenSSL: the wildcard's domain has at least two labels (`*.com` covers
        // nothing), and the label it stands for is not empty.
        Some(domain) => {
            domain.contains('.')
                && !domain.contains('*')
                && host.split_once('.').is_some_and(|(label, rest)| {
                    !label.is_empty() && rest.eq_ignore_ascii_case(domain)
                })
        }
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
        assert!(
            !host_matches("*.com", "example.com"),
            "a wildcard of one label"
        );
        assert!(!host_matches("kafka-0.example.com.", "kafka-0.example.com"));
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

    /// A CN-only broker certificate checked as a handshake checks it: accepted under a
    /// CA that constrains no names, refused under one that does (OpenSSL checks the CN
    /// against the constraints; WebPKI would check none).
    #[test]
    fn no_name_from_a_cn_under_a_ca_that_constrains_names() {
        use rcgen::{BasicConstraints, CertificateParams, DnType, GeneralSubtree, IsCa, KeyPair};
        let verify = |constrained: bool| {
            let ca_key = KeyPair::generate().unwrap();
            let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
            ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            ca.distinguished_name.push(DnType::CommonName, "a CA");
            if constrained {
                ca.name_constraints = Some(rcgen::NameConstraints {
                    permitted_subtrees: vec![GeneralSubtree::DnsName("kafka.internal".into())],
                    excluded_subtrees: Vec::new(),
                });
            }
            let ca = ca.self_signed(&ca_key).unwrap();
            let key = KeyPair::generate().unwrap();
            let mut leaf = CertificateParams::new(Vec::<String>::new()).unwrap();
            leaf.distinguished_name
                .push(DnType::CommonName, "broker.elsewhere.example");
            let leaf = leaf.signed_by(&key, &ca, &ca_key).unwrap();
            let mut roots = rustls::RootCertStore::empty();
            roots.add(ca.der().clone()).unwrap();
            let constrained_roots = roots.roots.iter().any(|r| r.name_constraints.is_some());
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let verifier = Verifier {
                inner: rustls::client::WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .unwrap(),
                verify_certificate: true,
                verify_hostname: true,
                constrained_roots,
            };
            use rustls::client::danger::ServerCertVerifier;
            verifier
                .verify_server_cert(
                    leaf.der(),
                    &[],
                    &ServerName::try_from("broker.elsewhere.example").unwrap(),
                    &[],
                    rustls::pki_types::UnixTime::now(),
                )
                .is_ok()
        };
        assert!(
            verify(false),
            "a CN-only certificate under an unconstrained CA"
        );
        assert!(!verify(true), "a CN outside the CA's permitted names");
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
