//! A SASL SCRAM client (RFC 5802, RFC 7677) for SCRAM-SHA-256 and SCRAM-SHA-512, the
//! two SCRAM mechanisms Kafka supports, to be carried in SaslAuthenticate requests.
//!
//! The exchange is three messages: [`ScramClient::client_first`] is sent,
//! [`ScramClient::client_final`] answers the server's challenge, and
//! [`ScramClient::verify_server_final`] checks that the server, too, knows the password.
//! Channel binding is not supported (the GS2 header is always `n,,`), as in Kafka.
//!
//! The password is used as its UTF-8 bytes, without SASLprep normalization: Kafka's Java
//! client and broker do the same, so a password with characters SASLprep would change
//! only works if both sides skip it.

use std::fmt;
use std::num::NonZeroU32;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use ring::{digest, hmac, pbkdf2, rand::SecureRandom as _};

/// The GS2 header for "no channel binding, no authorization identity"; the `c=`
/// attribute of the final message repeats it, base64-encoded.
const GS2_HEADER: &str = "n,,";

/// Fewest PBKDF2 iterations accepted from a server. A server asking for fewer makes an
/// offline attack on a captured exchange cheap; Kafka's Java client rejects them too.
pub const MIN_ITERATIONS: u32 = 4096;

/// Most PBKDF2 iterations accepted from a server: Kafka stores no SCRAM credential with
/// more (its `ScramMechanism` maximum). Each one costs CPU time, so a server asking for
/// billions would hold the client for hours.
pub const MAX_ITERATIONS: u32 = 16384;

/// Random bytes in the client nonce; base64-encoded they make 32 printable characters.
const NONCE_BYTES: usize = 24;

/// A SCRAM mechanism Kafka supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Sha256,
    Sha512,
}

impl Mechanism {
    /// Parses a SASL mechanism name, `"SCRAM-SHA-256"` or `"SCRAM-SHA-512"`, ignoring
    /// case (SASL names are case-insensitive in configs); `None` for anything else.
    pub fn from_name(name: &str) -> Option<Mechanism> {
        [Mechanism::Sha256, Mechanism::Sha512]
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
    }

    /// The mechanism name as sent in SaslHandshake.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Sha256 => "SCRAM-SHA-256",
            Mechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            Mechanism::Sha256 => hmac::HMAC_SHA256,
            Mechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            Mechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            Mechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            Mechanism::Sha256 => &digest::SHA256,
            Mechanism::Sha512 => &digest::SHA512,
        }
    }
}

/// Why a SCRAM exchange failed. Messages name what went wrong but never include the
/// password or anything derived from it.
#[derive(Debug, thiserror::Error)]
pub enum ScramError {
    /// The server's message does not follow the RFC 5802 grammar.
    #[error("malformed SCRAM server message: {0}")]
    Malformed(&'static str),
    /// The server reported an error (`e=...`), e.g. `invalid-proof` for a wrong password.
    #[error("SCRAM server error: {0}")]
    Server(String),
    /// The server's nonce does not extend ours: the reply is not to our request.
    #[error("SCRAM server nonce does not start with the client nonce")]
    NonceMismatch,
    /// The server asked for too few PBKDF2 iterations (see [`MIN_ITERATIONS`]).
    #[error("SCRAM iteration count {iterations} is below the minimum of {minimum}")]
    IterationsTooLow { iterations: u32, minimum: u32 },
    /// The server asked for more PBKDF2 iterations than Kafka ever stores (see
    /// [`MAX_ITERATIONS`]).
    #[error("SCRAM iteration count {iterations} is above the maximum of {maximum}")]
    IterationsTooHigh { iterations: u32, maximum: u32 },
    /// The server requires an extension (`m=...`) this client does not know; RFC 5802
    /// says the client must then fail.
    #[error("SCRAM server requires an unsupported mandatory extension")]
    UnsupportedExtension,
    /// The server's signature is wrong: it does not know the password, so it is not the
    /// server the credentials were registered with.
    #[error("SCRAM server signature does not match")]
    ServerSignatureMismatch,
    /// The methods were called out of order (a bug in the caller, not the server).
    #[error("SCRAM exchange out of order: {0}")]
    OutOfOrder(&'static str),
}

/// Where the exchange stands. The server-final can only be checked with what the
/// server-first yielded, so that is kept between the two.
enum State {
    /// `client_final` not yet called successfully.
    Initial,
    /// Client-final sent; the server-final must carry HMAC(server_key, auth_message).
    AwaitingServerFinal {
        server_key: hmac::Key,
        auth_message: String,
    },
}

/// One SCRAM authentication exchange, client side. Use a new one for every attempt: the
/// nonce must not be reused.
pub struct ScramClient {
    mechanism: Mechanism,
    username: String,
    password: String,
    client_nonce: String,
    state: State,
}

/// Shows the mechanism, user and progress, never the password or derived keys, so a
/// client may appear in logs.
impl fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Initial => "initial",
            State::AwaitingServerFinal { .. } => "awaiting server-final",
        };
        f.debug_struct("ScramClient")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl ScramClient {
    /// Starts an exchange with a fresh random nonce.
    ///
    /// Panics if the operating system's random number generator fails: authenticating
    /// with a predictable nonce would be worse than not authenticating.
    pub fn new(mechanism: Mechanism, username: &str, password: &str) -> ScramClient {
        let mut bytes = [0u8; NONCE_BYTES];
        ring::rand::SystemRandom::new()
            .fill(&mut bytes)
            .expect("the system random number generator failed");
        Self::with_nonce_inner(mechanism, username, password, BASE64.encode(bytes))
    }

    /// Starts an exchange with a fixed nonce, for known-answer tests.
    #[cfg(test)]
    fn with_nonce(
        mechanism: Mechanism,
        username: &str,
        password: &str,
        nonce: &str,
    ) -> ScramClient {
        Self::with_nonce_inner(mechanism, username, password, nonce.to_owned())
    }

    fn with_nonce_inner(
        mechanism: Mechanism,
        username: &str,
        password: &str,
        client_nonce: String,
    ) -> ScramClient {
        ScramClient {
            mechanism,
            username: username.to_owned(),
            password: password.to_owned(),
            client_nonce,
            state: State::Initial,
        }
    }

    /// The client-first-message: `n,,n=<saslname>,r=<nonce>`.
    pub fn client_first(&self) -> Vec<u8> {
        format!("{GS2_HEADER}{}", self.client_first_bare()).into_bytes()
    }

    /// The client-first-message without the GS2 header; it is part of the AuthMessage
    /// both sides sign.
    fn client_first_bare(&self) -> String {
        format!(
            "n={},r={}",
            escape_username(&self.username),
            self.client_nonce
        )
    }

    /// Answers the server-first-message with the client-final-message, which proves
    /// knowledge of the password without revealing it.
    ///
    /// Fails on a malformed message, a server error (`e=`), a required extension (`m=`),
    /// a nonce that does not extend ours, or fewer than [`MIN_ITERATIONS`] iterations.
    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        if !matches!(self.state, State::Initial) {
            return Err(ScramError::OutOfOrder("client_final called twice"));
        }
        let server_first =
            std::str::from_utf8(server_first).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        let challenge = parse_server_first(server_first)?;
        if !challenge.nonce.starts_with(&self.client_nonce) {
            return Err(ScramError::NonceMismatch);
        }
        if challenge.iterations.get() < MIN_ITERATIONS {
            return Err(ScramError::IterationsTooLow {
                iterations: challenge.iterations.get(),
                minimum: MIN_ITERATIONS,
            });
        }
        if challenge.iterations.get() > MAX_ITERATIONS {
            return Err(ScramError::IterationsTooHigh {
                iterations: challenge.iterations.get(),
                maximum: MAX_ITERATIONS,
            });
        }

        let without_proof = format!("c={},r={}", BASE64.encode(GS2_HEADER), challenge.nonce);
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare(),
            server_first,
            without_proof
        );

        // RFC 5802 section 3: SaltedPassword, ClientKey, StoredKey, signatures, proof.
        let m = self.mechanism;
        let mut salted = vec![0u8; m.digest().output_len()];
        pbkdf2::derive(
            m.pbkdf2(),
            challenge.iterations,
            &challenge.salt,
            self.password.as_bytes(),
            &mut salted,
        );
        let salted_key = hmac::Key::new(m.hmac(), &salted);
        let client_key = hmac::sign(&salted_key, b"Client Key");
        let stored_key = digest::digest(m.digest(), client_key.as_ref());
        let client_signature = hmac::sign(
            &hmac::Key::new(m.hmac(), stored_key.as_ref()),
            auth_message.as_bytes(),
        );
        let proof: Vec<u8> = client_key
            .as_ref()
            .iter()
            .zip(client_signature.as_ref())
            .map(|(k, s)| k ^ s)
            .collect();
        let server_key = hmac::sign(&salted_key, b"Server Key");

        let client_final = format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes();
        self.state = State::AwaitingServerFinal {
            server_key: hmac::Key::new(m.hmac(), server_key.as_ref()),
            auth_message,
        };
        Ok(client_final)
    }

    /// Checks the server-final-message: `v=` must carry the signature only a server that
    /// knows the password can compute; `e=` is the server's refusal, returned as
    /// [`ScramError::Server`].
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), ScramError> {
        let State::AwaitingServerFinal {
            server_key,
            auth_message,
        } = &self.state
        else {
            return Err(ScramError::OutOfOrder(
                "verify_server_final called before client_final",
            ));
        };
        let server_final =
            std::str::from_utf8(server_final).map_err(|_| ScramError::Malformed("not UTF-8"))?;
        // Extensions may follow the first attribute; none are defined, so they are ignored.
        let first = server_final.split(',').next().unwrap_or_default();
        if let Some(error) = first.strip_prefix("e=") {
            return Err(ScramError::Server(error.to_owned()));
        }
        let verifier = first
            .strip_prefix("v=")
            .ok_or(ScramError::Malformed("server-final has neither v= nor e="))?;
        let verifier = BASE64
            .decode(verifier)
            .map_err(|_| ScramError::Malformed("v= is not base64"))?;
        // hmac::verify compares in constant time.
        hmac::verify(server_key, auth_message.as_bytes(), &verifier)
            .map_err(|_| ScramError::ServerSignatureMismatch)
    }
}

/// What the server-first-message asks for.
struct Challenge<'a> {
    /// The combined nonce: ours followed by the server's.
    nonce: &'a str,
    salt: Vec<u8>,
    iterations: NonZeroU32,
}

/// Parses `[m=...,]r=<nonce>,s=<salt>,i=<count>[,extensions]` (RFC 5802 section 7),
/// also accepting `e=<error>` in place of it, which some servers send on failure.
fn parse_server_first(message: &str) -> Result<Challenge<'_>, ScramError> {
    let mut attributes = message.split(',');
    let mut next = attributes.next().unwrap_or_default();
    if let Some(error) = next.strip_prefix("e=") {
        return Err(ScramError::Server(error.to_owned()));
    }
    if next.starts_with("m=") {
        return Err(ScramError::UnsupportedExtension);
    }
    let nonce = next
        .strip_prefix("r=")
        .filter(|n| !n.is_empty())
        .ok_or(ScramError::Malformed("server-first does not start with r="))?;
    next = attributes.next().unwrap_or_default();
    let salt = next
        .strip_prefix("s=")
        .ok_or(ScramError::Malformed("server-first has no s= after r="))?;
    let salt = BASE64
        .decode(salt)
        .map_err(|_| ScramError::Malformed("s= is not base64"))?;
    next = attributes.next().unwrap_or_default();
    let iterations = next
        .strip_prefix("i=")
        .ok_or(ScramError::Malformed("server-first has no i= after s="))?;
    // Digits only: u32's parser would also take a leading '+', which the grammar forbids.
    if iterations.is_empty() || !iterations.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ScramError::Malformed("i= is not a positive number"));
    }
    let iterations = iterations
        .parse::<NonZeroU32>()
        .map_err(|_| ScramError::Malformed("i= is not a positive number"))?;
    Ok(Challenge {
        nonce,
        salt,
        iterations,
    })
}

/// Encodes a username as a SCRAM `saslname`: `=` and `,` would end the attribute, so
/// they become `=3D` and `=2C`.
fn escape_username(username: &str) -> String {
    let mut escaped = String::with_capacity(username.len());
    for c in username.chars() {
        match c {
            '=' => escaped.push_str("=3D"),
            ',' => escaped.push_str("=2C"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    const RFC_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
    const RFC_SERVER_FIRST: &str = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                                    s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";

    fn rfc_client(mechanism: Mechanism) -> ScramClient {
        ScramClient::with_nonce(mechanism, "user", "pencil", RFC_NONCE)
    }

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).unwrap()
    }

    /// RFC 7677 section 3, the SCRAM-SHA-256 example exchange.
    #[test]
    fn rfc7677_sha256_example() {
        let mut client = rfc_client(Mechanism::Sha256);
        assert_eq!(
            text(client.client_first()),
            "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
        );
        let client_final = client.client_final(RFC_SERVER_FIRST.as_bytes()).unwrap();
        assert_eq!(
            text(client_final),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        client
            .verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
    }

    /// SCRAM-SHA-512 has no RFC example. These values come from the RFC 7677 inputs
    /// (user, password, nonces, salt, 4096 iterations) run through RFC 5802 section 3
    /// with Python's standard library (hashlib.pbkdf2_hmac("sha512", ...), hmac.new(...,
    /// "sha512"), hashlib.sha512, base64); the same script with "sha256" reproduces the
    /// RFC 7677 example above exactly.
    #[test]
    fn sha512_known_answer() {
        let mut client = rfc_client(Mechanism::Sha512);
        let client_final = client.client_final(RFC_SERVER_FIRST.as_bytes()).unwrap();
        assert_eq!(
            text(client_final),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=gMGXRcevScNtxZ6/8lQYpGtnsNAc3mGcmNomv+xnoOMw+3R2xNJdMNnzMlTN8PPC6wdp6dybEmDYXYTxwnYPJQ=="
        );
        client
            .verify_server_final(
                b"v=ZQnYEgWQMFmmsM8aQMF0nDDCy/AgCzkwk8CmMZYcMg0vSVlKDanekLtifDSeVGT4+5ZxXnJq199RVG2rR7N7Zw==",
            )
            .unwrap();
    }

    #[test]
    fn wrong_server_signature_is_rejected() {
        let mut client = rfc_client(Mechanism::Sha256);
        client.client_final(RFC_SERVER_FIRST.as_bytes()).unwrap();
        // The RFC signature with its first character changed.
        let err = client
            .verify_server_final(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap_err();
        assert!(
            matches!(err, ScramError::ServerSignatureMismatch),
            "{err:?}"
        );
        // A SHA-256 signature does not pass for SHA-512 either (lengths differ).
        let mut client = rfc_client(Mechanism::Sha512);
        client.client_final(RFC_SERVER_FIRST.as_bytes()).unwrap();
        let err = client
            .verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap_err();
        assert!(
            matches!(err, ScramError::ServerSignatureMismatch),
            "{err:?}"
        );
    }

    #[test]
    fn nonce_mismatch_is_rejected() {
        let mut client = rfc_client(Mechanism::Sha256);
        let err = client
            .client_final(b"r=XOprNGfwEbeRWgbNEkqO%hvYDpWUa2R,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .unwrap_err();
        assert!(matches!(err, ScramError::NonceMismatch), "{err:?}");
    }

    #[test]
    fn low_iteration_count_is_rejected() {
        let mut client = rfc_client(Mechanism::Sha256);
        let err = client
            .client_final(b"r=rOprNGfwEbeRWgbNEkqO%hvY,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095")
            .unwrap_err();
        assert!(
            matches!(
                err,
                ScramError::IterationsTooLow {
                    iterations: 4095,
                    minimum: 4096
                }
            ),
            "{err:?}"
        );
    }

    /// Found by `hostile::server_first_with_any_values`: a server asking for u32::MAX
    /// iterations held the client in PBKDF2 for hours.
    #[test]
    fn huge_iteration_count_is_rejected_at_once() {
        let (done, outcome) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut client = rfc_client(Mechanism::Sha256);
            let answer = client.client_final(
                b"r=rOprNGfwEbeRWgbNEkqO%hvY,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4294967295",
            );
            let _ = done.send(answer.map(|_| ()));
        });
        let err = outcome
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("answered within 5 s")
            .unwrap_err();
        assert!(
            matches!(
                err,
                ScramError::IterationsTooHigh {
                    iterations: u32::MAX,
                    maximum: 16384
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn server_error_is_reported() {
        let mut client = rfc_client(Mechanism::Sha256);
        let err = client.client_final(b"e=other-error").unwrap_err();
        assert!(
            matches!(&err, ScramError::Server(e) if e == "other-error"),
            "{err:?}"
        );

        let mut client = rfc_client(Mechanism::Sha256);
        client.client_final(RFC_SERVER_FIRST.as_bytes()).unwrap();
        let err = client.verify_server_final(b"e=other-error").unwrap_err();
        assert!(
            matches!(&err, ScramError::Server(e) if e == "other-error"),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "SCRAM server error: other-error");
    }

    #[test]
    fn username_is_escaped() {
        let client = ScramClient::with_nonce(Mechanism::Sha256, "a=b,c", "pencil", "abc");
        assert_eq!(text(client.client_first()), "n,,n=a=3Db=2Cc,r=abc");
    }

    #[test]
    fn debug_and_errors_do_not_reveal_the_password() {
        let password = "s3cret-pencil";
        let mut client = ScramClient::with_nonce(Mechanism::Sha256, "user", password, RFC_NONCE);
        assert!(!format!("{client:?}").contains(password));
        assert!(format!("{client:?}").contains("user"));
        client.client_final(RFC_SERVER_FIRST.as_bytes()).unwrap();
        assert!(!format!("{client:?}").contains(password));
        let err = client.verify_server_final(b"v=AAAA").unwrap_err();
        assert!(!format!("{err} {err:?}").contains(password));
    }

    #[test]
    fn malformed_messages_are_errors_not_panics() {
        let bad: &[&[u8]] = &[
            b"",
            b",",
            b"\xff\xfe",
            b"r=",
            b"r=rOprNGfwEbeRWgbNEkqOxyz",
            b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==",
            b"r=rOprNGfwEbeRWgbNEkqOxyz,s=not*base64,i=4096",
            b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=",
            b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=0",
            b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=+4096",
            b"r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999999",
            b"s=W22ZaJ0SNY7soEsUEjb6gQ==,r=rOprNGfwEbeRWgbNEkqOxyz,i=4096",
        ];
        for message in bad {
            let err = rfc_client(Mechanism::Sha256)
                .client_final(message)
                .unwrap_err();
            assert!(
                matches!(err, ScramError::Malformed(_)),
                "{:?}: {err:?}",
                String::from_utf8_lossy(message)
            );
        }
        let err = rfc_client(Mechanism::Sha256)
            .client_final(b"m=ext,r=rOprNGfwEbeRWgbNEkqOxyz,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .unwrap_err();
        assert!(matches!(err, ScramError::UnsupportedExtension), "{err:?}");

        let mut client = rfc_client(Mechanism::Sha256);
        client.client_final(RFC_SERVER_FIRST.as_bytes()).unwrap();
        for message in [&b""[..], b"x=1", b"v=***", b"\xff"] {
            let err = client.verify_server_final(message).unwrap_err();
            assert!(matches!(err, ScramError::Malformed(_)), "{err:?}");
        }
    }

    #[test]
    fn extensions_after_known_attributes_are_ignored() {
        let mut client = rfc_client(Mechanism::Sha256);
        let server_first = format!("{RFC_SERVER_FIRST},x=ext");
        let client_final = text(client.client_final(server_first.as_bytes()).unwrap());
        // The extension is part of the signed AuthMessage, so the proof differs from the
        // RFC's; the point is that it is accepted and the exchange completes.
        assert!(client_final.starts_with("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2R"));
    }

    #[test]
    fn calls_out_of_order_are_errors() {
        let mut client = rfc_client(Mechanism::Sha256);
        let err = client
            .verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap_err();
        assert!(matches!(err, ScramError::OutOfOrder(_)), "{err:?}");
        client.client_final(RFC_SERVER_FIRST.as_bytes()).unwrap();
        let err = client
            .client_final(RFC_SERVER_FIRST.as_bytes())
            .unwrap_err();
        assert!(matches!(err, ScramError::OutOfOrder(_)), "{err:?}");
    }

    #[test]
    fn random_nonces_differ_and_are_safe_to_embed() {
        let a = ScramClient::new(Mechanism::Sha512, "user", "pencil");
        let b = ScramClient::new(Mechanism::Sha512, "user", "pencil");
        assert_ne!(a.client_nonce, b.client_nonce);
        assert_eq!(a.client_nonce.len(), 32);
        assert!(a
            .client_nonce
            .bytes()
            .all(|c| c.is_ascii_graphic() && c != b','));
    }

    #[test]
    fn mechanism_names() {
        assert_eq!(
            Mechanism::from_name("scram-sha-256"),
            Some(Mechanism::Sha256)
        );
        assert_eq!(
            Mechanism::from_name("SCRAM-SHA-512"),
            Some(Mechanism::Sha512)
        );
        assert_eq!(Mechanism::from_name("PLAIN"), None);
        assert_eq!(Mechanism::Sha256.name(), "SCRAM-SHA-256");
        assert_eq!(Mechanism::Sha512.name(), "SCRAM-SHA-512");
    }
}

/// Property tests: whatever a server sends in the two SCRAM messages, the client answers
/// or refuses, and spends no more than Kafka's largest iteration count on it.
#[cfg(test)]
mod hostile {
    use super::*;
    use proptest::prelude::*;

    const NONCE: &str = "fyko+d2lbbFgONRv9qkxdawL";

    fn client() -> ScramClient {
        ScramClient::with_nonce(Mechanism::Sha256, "user", "pencil", NONCE)
    }

    /// A server-first message in the RFC 5802 shape with any attribute values, the
    /// iteration count included, and optionally something appended.
    fn server_first() -> impl Strategy<Value = (String, Option<u32>)> {
        (
            prop_oneof![Just(NONCE.to_string()), "[!-+--~]{0,30}"],
            "[!-+--~]{0,12}",
            prop_oneof![
                3 => prop::collection::vec(any::<u8>(), 0..20).prop_map(|s| BASE64.encode(s)),
                1 => "[!-+--~]{0,20}",
            ],
            prop_oneof![
                4 => any::<u32>().prop_map(Some),
                1 => (MIN_ITERATIONS..=MAX_ITERATIONS).prop_map(Some),
                1 => Just(None),
            ],
            prop_oneof![Just(String::new()), "[ -~]{0,20}"],
        )
            .prop_map(|(nonce, suffix, salt, iterations, tail)| {
                let count = iterations.map_or_else(|| "x".to_string(), |i| i.to_string());
                (
                    format!("r={nonce}{suffix},s={salt},i={count}{tail}"),
                    iterations,
                )
            })
    }

    proptest! {
        #![proptest_config(crate::hostile::config(300))]

        #[test]
        fn server_first_of_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(answer) = client().client_final(&bytes) {
                // Only a message that starts with our nonce gets an answer.
                let text = std::str::from_utf8(&bytes).unwrap();
                prop_assert!(text.starts_with(&format!("r={NONCE}")), "{text:?} {answer:?}");
            }
        }

        #[test]
        fn server_first_with_any_values(
            (message, iterations) in server_first(),
            server_final in prop::collection::vec(any::<u8>(), 0..120),
        ) {
            let mut client = client();
            match client.client_final(message.as_bytes()) {
                Ok(_) => {
                    let iterations = iterations.expect("a number");
                    prop_assert!(
                        (MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations),
                        "{message}"
                    );
                    // A server-final not made from the password is refused.
                    prop_assert!(client.verify_server_final(&server_final).is_err());
                    let text = format!("v={}", BASE64.encode(&server_final));
                    prop_assert!(client.verify_server_final(text.as_bytes()).is_err());
                }
                Err(_) => prop_assert!(client.verify_server_final(&server_final).is_err()),
            }
        }
    }
}
