//! The plumbing of the exporter's own Kafka client, on the `kafka-protocol` crate: the
//! connection, the pool, TLS, SASL ([`scram`]) and version negotiation. What is asked
//! through it lives in [`super::ask`]; [`share_offsets`] and [`streams_describe`] are the
//! messages it encodes itself (the crate lacks the newest version of one, and the other
//! entirely), with the field encodings of [`compact`].
//!
//! One connection per broker, opened on first use and kept between cycles; a request
//! that fails or runs past its deadline closes its connection, so a half-read answer can
//! never be mistaken for the next one. Every connection starts with ApiVersions, then
//! TLS and SASL as the cluster's `client` settings say (the same librdkafka property
//! names), so one set of settings covers both clients.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use kafka_protocol::ResponseError;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use self::scram::ScramClient;

mod compact;
pub mod scram;
mod security;
pub mod share_offsets;
pub mod streams_describe;

use security::Sasl;
pub use security::Security;

/// Largest answer accepted; a DescribeProducers answer for thousands of partitions is a
/// few MiB, and anything larger is more likely a wrong port (e.g. TLS spoken to plain).
const MAX_FRAME: usize = 64 * 1024 * 1024;

const CLIENT_ID: &str = "kafka-lso-exporter";

/// A pooled connection idle longer than this is replaced rather than reused.
const MAX_IDLE: Duration = Duration::from_secs(300);

/// What can go wrong talking to one broker.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WireError {
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: String, reason: String },
    #[error("{addr}: TLS handshake failed: {reason}")]
    Tls { addr: String, reason: String },
    #[error("{addr}: SASL authentication failed: {reason}")]
    Authentication { addr: String, reason: String },
    #[error("{addr}: {reason}")]
    Io { addr: String, reason: String },
    #[error("{addr}: broker does not support {api} (needs API key {key})")]
    Unsupported {
        addr: String,
        api: &'static str,
        key: i16,
    },
    #[error("{addr}: malformed answer: {reason}")]
    Protocol { addr: String, reason: String },
    #[error("deadline passed")]
    Deadline,
}

impl WireError {
    /// A broker too old for an API: the capability cannot work on this cluster.
    pub fn is_unsupported(&self) -> bool {
        matches!(self, WireError::Unsupported { .. })
    }

    /// Retrying cannot help: the broker lacks an API, or refuses this client's TLS or
    /// credentials.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            WireError::Unsupported { .. }
                | WireError::Tls { .. }
                | WireError::Authentication { .. }
        )
    }
}

trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// One open, authenticated connection to one broker.
pub struct Connection {
    addr: String,
    stream: Pin<Box<dyn Stream>>,
    /// API key -> the highest version both sides speak.
    versions: HashMap<i16, i16>,
    next_correlation_id: i32,
    last_used: Instant,
    /// End of the SASL session (KIP-368), when the broker set one.
    expires: Option<Instant>,
}

impl Connection {
    /// Connects, negotiates API versions and authenticates. Not bounded by itself: callers
    /// wrap it in their deadline.
    pub async fn open(addr: &str, security: &Security) -> Result<Connection, WireError> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| WireError::Connect {
                addr: addr.to_string(),
                reason: e.to_string(),
            })?;
        let _ = tcp.set_nodelay(true);
        let stream: Pin<Box<dyn Stream>> = match &security.tls {
            None => Box::pin(tcp),
            Some(tls) => {
                let host = addr
                    .rsplit_once(':')
                    .map(|(host, _)| host)
                    .unwrap_or(addr)
                    .trim_start_matches('[')
                    .trim_end_matches(']');
                let name = ServerName::try_from(host.to_string()).map_err(|e| WireError::Tls {
                    addr: addr.to_string(),
                    reason: e.to_string(),
                })?;
                let stream = tokio_rustls::TlsConnector::from(tls.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| WireError::Tls {
                        addr: addr.to_string(),
                        reason: e.to_string(),
                    })?;
                Box::pin(stream)
            }
        };
        let mut connection = Connection {
            addr: addr.to_string(),
            stream,
            versions: HashMap::new(),
            next_correlation_id: 1,
            last_used: Instant::now(),
            expires: None,
        };
        connection.negotiate_versions().await?;
        if let Some(sasl) = &security.sasl {
            connection.authenticate(sasl).await?;
        }
        Ok(connection)
    }

    /// Still worth reusing: not idle for long (brokers close idle connections after
    /// `connections.max.idle.ms`, 10 min by default) and within its SASL session.
    fn reusable(&self) -> bool {
        let now = Instant::now();
        now.saturating_duration_since(self.last_used) < MAX_IDLE
            && !self.expires.is_some_and(|at| now >= at)
    }

    /// The version this connection uses for `R`, if the broker speaks any we do.
    pub fn version<R: Request>(&self) -> Option<i16> {
        self.versions.get(&R::KEY).copied()
    }

    /// Sends `request` at the highest version both sides speak.
    pub async fn send<R: Request>(
        &mut self,
        request: &R,
        api: &'static str,
    ) -> Result<R::Response, WireError> {
        let version = self.version::<R>().ok_or_else(|| WireError::Unsupported {
            addr: self.addr.clone(),
            api,
            key: R::KEY,
        })?;
        self.send_version(request, version, api).await
    }

    async fn send_version<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        api: &'static str,
    ) -> Result<R::Response, WireError> {
        let mut body = self.send_raw(request, version, api).await?;
        R::Response::decode(&mut body, version)
            .map_err(|e| self.protocol_error(format!("cannot decode answer: {e}")))
    }

    /// Sends `request` and returns the answer's body after its header, undecoded.
    async fn send_raw<R: Request>(
        &mut self,
        request: &R,
        version: i16,
        api: &'static str,
    ) -> Result<Bytes, WireError> {
        // The benchmark counts requests per cycle from these lines.
        tracing::debug!(broker = %self.addr, "Sent {api}Request (v{version})");
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let mut header = RequestHeader::default();
        header.request_api_key = R::KEY;
        header.request_api_version = version;
        header.correlation_id = correlation_id;
        header.client_id = Some(StrBytes::from_static_str(CLIENT_ID));

        let mut frame = BytesMut::with_capacity(256);
        frame.put_i32(0);
        header
            .encode(&mut frame, R::header_version(version))
            .and_then(|_| request.encode(&mut frame, version))
            .map_err(|e| self.protocol_error(format!("cannot encode request: {e}")))?;
        let length = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&length.to_be_bytes());
        self.stream
            .write_all(&frame)
            .await
            .map_err(|e| self.io_error(e))?;
        self.stream.flush().await.map_err(|e| self.io_error(e))?;

        let mut body = self.read_frame().await?;
        let answer = ResponseHeader::decode(&mut body, R::Response::header_version(version))
            .map_err(|e| self.protocol_error(format!("bad response header: {e}")))?;
        if answer.correlation_id != correlation_id {
            return Err(self.protocol_error(format!(
                "answer to request {} where {correlation_id} was expected",
                answer.correlation_id
            )));
        }
        self.last_used = Instant::now();
        Ok(body)
    }

    async fn read_frame(&mut self) -> Result<Bytes, WireError> {
        let mut length = [0u8; 4];
        self.stream
            .read_exact(&mut length)
            .await
            .map_err(|e| self.io_error(e))?;
        let length = i32::from_be_bytes(length);
        if length < 0 || length as usize > MAX_FRAME {
            return Err(self.protocol_error(format!(
                "frame of {length} bytes (is this a Kafka port, and is security.protocol right?)"
            )));
        }
        let mut body = vec![0u8; length as usize];
        self.stream
            .read_exact(&mut body)
            .await
            .map_err(|e| self.io_error(e))?;
        Ok(Bytes::from(body))
    }

    /// ApiVersions v3 (see [`decode_api_versions`] for older brokers).
    async fn negotiate_versions(&mut self) -> Result<(), WireError> {
        let mut request = ApiVersionsRequest::default();
        request.client_software_name = StrBytes::from_static_str(CLIENT_ID);
        request.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
        let body = self.send_raw(&request, 3, "ApiVersions").await?;
        let answer = decode_api_versions(body).map_err(|e| self.protocol_error(e))?;
        for api in answer.api_keys {
            if let Some((min, max)) = ours(api.api_key) {
                let version = max.min(api.max_version);
                if version >= min.max(api.min_version) {
                    self.versions.insert(api.api_key, version);
                }
            }
        }
        Ok(())
    }

    async fn authenticate(&mut self, sasl: &Sasl) -> Result<(), WireError> {
        let mechanism = match sasl {
            Sasl::Plain { .. } => "PLAIN",
            Sasl::Scram { mechanism, .. } => mechanism.name(),
        };
        let mut handshake = SaslHandshakeRequest::default();
        handshake.mechanism = StrBytes::from_static_str(mechanism);
        let answer = self.send(&handshake, "SaslHandshake").await?;
        if answer.error_code != 0 {
            let enabled: Vec<&str> = answer.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(self.auth_error(format!(
                "the broker does not offer {mechanism} (it offers {})",
                enabled.join(", ")
            )));
        }
        match sasl {
            Sasl::Plain { username, password } => {
                let mut token = Vec::with_capacity(username.len() + password.len() + 2);
                token.push(0);
                token.extend_from_slice(username.as_bytes());
                token.push(0);
                token.extend_from_slice(password.as_bytes());
                self.sasl_round(token).await?;
            }
            Sasl::Scram {
                mechanism,
                username,
                password,
            } => {
                let mut scram = ScramClient::new(*mechanism, username, password);
                let server_first = self.sasl_round(scram.client_first()).await?;
                let client_final = scram
                    .client_final(&server_first)
                    .map_err(|e| self.auth_error(e.to_string()))?;
                let server_final = self.sasl_round(client_final).await?;
                scram
                    .verify_server_final(&server_final)
                    .map_err(|e| self.auth_error(e.to_string()))?;
            }
        }
        Ok(())
    }

    async fn sasl_round(&mut self, token: Vec<u8>) -> Result<Bytes, WireError> {
        let mut request = SaslAuthenticateRequest::default();
        request.auth_bytes = Bytes::from(token);
        let answer = self.send(&request, "SaslAuthenticate").await?;
        if answer.session_lifetime_ms > 0 {
            // KIP-368: the broker closes the connection when the session ends; give it
            // up a little before that.
            let lifetime = Duration::from_millis(answer.session_lifetime_ms as u64);
            self.expires = Some(Instant::now() + lifetime.mul_f64(0.9));
        }
        if answer.error_code != 0 {
            let reason = answer
                .error_message
                .map(|m| m.to_string())
                .or_else(|| ResponseError::try_from_code(answer.error_code).map(|e| e.to_string()))
                .unwrap_or_default();
            return Err(self.auth_error(reason));
        }
        Ok(answer.auth_bytes)
    }

    fn io_error(&self, error: io::Error) -> WireError {
        let reason = if error.kind() == io::ErrorKind::UnexpectedEof {
            "connection closed by the broker".to_string()
        } else {
            error.to_string()
        };
        WireError::Io {
            addr: self.addr.clone(),
            reason,
        }
    }

    fn protocol_error(&self, reason: String) -> WireError {
        WireError::Protocol {
            addr: self.addr.clone(),
            reason,
        }
    }

    fn auth_error(&self, reason: String) -> WireError {
        WireError::Authentication {
            addr: self.addr.clone(),
            reason,
        }
    }
}

/// An ApiVersions v3 answer. A broker older than Kafka 2.4 answers that version with
/// UNSUPPORTED_VERSION in the v0 format, with its API list: that is read as v0 and used.
fn decode_api_versions(body: Bytes) -> Result<ApiVersionsResponse, String> {
    let unsupported = ResponseError::UnsupportedVersion.code();
    let answer = match ApiVersionsResponse::decode(&mut body.clone(), 3) {
        Ok(answer) if answer.error_code != unsupported => answer,
        _ => ApiVersionsResponse::decode(&mut body.clone(), 0)
            .map_err(|e| format!("cannot decode ApiVersions: {e}"))?,
    };
    match ResponseError::try_from_code(answer.error_code) {
        Some(error) if answer.error_code != unsupported => Err(format!("ApiVersions: {error}")),
        _ => Ok(answer),
    }
}

/// The version range this client implements for an API it uses.
fn ours(key: i16) -> Option<(i16, i16)> {
    use kafka_protocol::messages::*;
    fn range<R: Request>() -> (i16, i16) {
        (R::VERSIONS.min, R::VERSIONS.max)
    }
    Some(match key {
        ApiVersionsRequest::KEY => range::<ApiVersionsRequest>(),
        SaslHandshakeRequest::KEY => range::<SaslHandshakeRequest>(),
        SaslAuthenticateRequest::KEY => range::<SaslAuthenticateRequest>(),
        DescribeProducersRequest::KEY => range::<DescribeProducersRequest>(),
        ListTransactionsRequest::KEY => range::<ListTransactionsRequest>(),
        DescribeTransactionsRequest::KEY => range::<DescribeTransactionsRequest>(),
        DescribeConfigsRequest::KEY => range::<DescribeConfigsRequest>(),
        FindCoordinatorRequest::KEY => range::<FindCoordinatorRequest>(),
        ListGroupsRequest::KEY => range::<ListGroupsRequest>(),
        DescribeGroupsRequest::KEY => range::<DescribeGroupsRequest>(),
        ConsumerGroupDescribeRequest::KEY => range::<ConsumerGroupDescribeRequest>(),
        ShareGroupDescribeRequest::KEY => range::<ShareGroupDescribeRequest>(),
        // Encoded by this client, with the broker's lag (v1, KIP-1226).
        90 => range::<share_offsets::DescribeShareGroupOffsets>(),
        // Encoded by this client: the crate has no StreamsGroupDescribe.
        89 => range::<streams_describe::StreamsGroupDescribe>(),
        // v8 and v9 batch many groups in one request; v10 names topics by id.
        OffsetFetchRequest::KEY => (8, 9),
        // v13 names topics by id.
        FetchRequest::KEY => (4, 12),
        _ => return None,
    })
}

/// Connections to every broker of one cluster, reused across cycles.
pub struct Pool {
    security: Security,
    connections: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Connection>>>>>,
}

impl Pool {
    pub fn new(security: Security) -> Pool {
        Pool {
            security,
            connections: Default::default(),
        }
    }

    /// Sends one request to the broker at `addr` before `deadline`, connecting first if
    /// needed.
    ///
    /// The connection is taken out of the pool while in use and put back only after a
    /// complete answer: a request cut short by its deadline drops its connection with it,
    /// so no later request can meet a half-sent request or a half-read answer. A reused
    /// connection that the broker closed meanwhile (idle timeout, re-authentication) is
    /// replaced and the request sent once more; every request here only reads.
    pub async fn send<R: Request>(
        &self,
        addr: &str,
        request: &R,
        api: &'static str,
        deadline: Instant,
    ) -> Result<R::Response, WireError> {
        if Instant::now() >= deadline {
            return Err(WireError::Deadline);
        }
        let slot = self.slot(addr);
        let work = async {
            let mut slot = slot.lock().await;
            let (mut connection, reused) = self.checkout(&mut slot, addr).await?;
            let mut answer = connection.send(request, api).await;
            if reused && matches!(answer, Err(WireError::Io { .. })) {
                connection = Connection::open(addr, &self.security).await?;
                answer = connection.send(request, api).await;
            }
            if answer.is_ok() || answer.as_ref().is_err_and(WireError::is_unsupported) {
                *slot = Some(connection);
            }
            answer
        };
        tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), work)
            .await
            .unwrap_or(Err(WireError::Deadline))
    }

    /// The version `addr` speaks of `R` (connecting first if needed), or `None`.
    pub async fn version<R: Request>(
        &self,
        addr: &str,
        deadline: Instant,
    ) -> Result<Option<i16>, WireError> {
        let slot = self.slot(addr);
        let work = async {
            let mut slot = slot.lock().await;
            let (connection, _) = self.checkout(&mut slot, addr).await?;
            let version = connection.version::<R>();
            *slot = Some(connection);
            Ok(version)
        };
        tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), work)
            .await
            .unwrap_or(Err(WireError::Deadline))
    }

    /// Takes the pooled connection out of `slot` if it is still worth reusing (and says
    /// so), or opens a new one.
    async fn checkout(
        &self,
        slot: &mut Option<Connection>,
        addr: &str,
    ) -> Result<(Connection, bool), WireError> {
        match slot.take().filter(Connection::reusable) {
            Some(connection) => Ok((connection, true)),
            None => Ok((Connection::open(addr, &self.security).await?, false)),
        }
    }

    fn slot(&self, addr: &str) -> Arc<tokio::sync::Mutex<Option<Connection>>> {
        let mut connections = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        connections.entry(addr.to_string()).or_default().clone()
    }
}

/// The exporter's own client for one cluster: its connection pool, driven by the
/// exporter's runtime from the asynchronous sampling cycle.
pub struct WireClient {
    pub pool: Pool,
}

impl WireClient {
    pub fn new(security: Security) -> WireClient {
        WireClient {
            pool: Pool::new(security),
        }
    }
}

/// `host:port`, with an IPv6 literal in brackets (`[::1]:9092`) so that it parses back.
pub fn broker_address(host: &str, port: i32) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::scram::Mechanism;
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn broker_addresses_parse_back() {
        assert_eq!(broker_address("kafka-0.kafka", 9092), "kafka-0.kafka:9092");
        assert_eq!(broker_address("10.0.0.7", 9093), "10.0.0.7:9093");
        assert_eq!(broker_address("fd00::7", 9093), "[fd00::7]:9093");
        assert_eq!(broker_address("[fd00::7]", 9093), "[fd00::7]:9093");
        let parsed: std::net::SocketAddr = broker_address("::1", 9092).parse().unwrap();
        assert_eq!(parsed.port(), 9092);
    }

    #[test]
    fn api_versions_of_a_broker_older_than_2_4() {
        use kafka_protocol::messages::api_versions_response::ApiVersion;
        let mut old = ApiVersionsResponse::default();
        old.error_code = ResponseError::UnsupportedVersion.code();
        let mut api = ApiVersion::default();
        api.api_key = 9;
        api.max_version = 6;
        old.api_keys = vec![api];
        let mut v0 = BytesMut::new();
        old.encode(&mut v0, 0).unwrap();
        let answer = decode_api_versions(v0.freeze()).expect("read as v0");
        assert_eq!(answer.api_keys.len(), 1);
        assert_eq!(
            (answer.api_keys[0].api_key, answer.api_keys[0].max_version),
            (9, 6)
        );

        let mut current = ApiVersionsResponse::default();
        current.api_keys = vec![ApiVersion::default()];
        let mut v3 = BytesMut::new();
        current.encode(&mut v3, 3).unwrap();
        assert_eq!(decode_api_versions(v3.freeze()).unwrap().api_keys.len(), 1);

        let mut refused = ApiVersionsResponse::default();
        refused.error_code = ResponseError::ClusterAuthorizationFailed.code();
        let mut body = BytesMut::new();
        refused.encode(&mut body, 3).unwrap();
        assert!(decode_api_versions(body.freeze()).is_err());
    }

    fn properties(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn security_from_librdkafka_properties() {
        let plain = Security::from_properties(&properties(&[])).unwrap();
        assert!(plain.tls.is_none() && plain.sasl.is_none());
        let scram = Security::from_properties(&properties(&[
            ("security.protocol", "sasl_plaintext"),
            ("sasl.mechanisms", "scram-sha-512"),
            ("sasl.username", "u"),
            ("sasl.password", "secret-value"),
        ]))
        .unwrap();
        assert!(matches!(
            scram.sasl,
            Some(Sasl::Scram {
                mechanism: Mechanism::Sha512,
                ..
            })
        ));
        assert!(!format!("{scram:?}").contains("secret-value"));
        let ssl = Security::from_properties(&properties(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "PLAIN"),
        ]))
        .unwrap();
        assert!(ssl.tls.is_some() && matches!(ssl.sasl, Some(Sasl::Plain { .. })));

        // What this client cannot do is a sentence for the startup log.
        for (pairs, expected) in [
            (
                vec![("security.protocol", "SASL_SSL")],
                "SASL mechanism GSSAPI is not supported",
            ),
            (
                vec![
                    ("security.protocol", "SASL_PLAINTEXT"),
                    ("sasl.mechanisms", "OAUTHBEARER"),
                ],
                "SASL mechanism OAUTHBEARER is not supported",
            ),
            (
                vec![("security.protocol", "carrier-pigeon")],
                "security.protocol \"carrier-pigeon\" is not supported",
            ),
            (
                vec![
                    ("security.protocol", "SSL"),
                    ("ssl.keystore.location", "/etc/kafka/client.p12"),
                ],
                "ssl.keystore.location is not supported",
            ),
            (
                vec![
                    ("security.protocol", "SSL"),
                    ("ssl.ca.location", "/nonexistent/ca.pem"),
                ],
                "ssl.ca.location: cannot read /nonexistent/ca.pem",
            ),
            (
                vec![
                    ("security.protocol", "SSL"),
                    ("ssl.certificate.location", "/nonexistent/cert.pem"),
                ],
                "ssl.certificate.location: cannot read",
            ),
        ] {
            let reason = Security::from_properties(&properties(&pairs)).unwrap_err();
            assert!(reason.contains(expected), "{pairs:?}: {reason}");
        }
    }
}
