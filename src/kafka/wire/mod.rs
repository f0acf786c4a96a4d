//! The plumbing of the exporter's own Kafka client, on the `kafka-protocol` crate: the
//! connection, the pool, TLS (`tls`), SASL ([`scram`], [`oauth`], [`msk_iam`], and
//! Kerberos in `gssapi` with the cargo feature of that name) and version negotiation. What is asked
//! through it lives in [`super::ask`]; [`share_offsets`] and [`streams_describe`] are the
//! messages it encodes itself (the crate lacks the newest version of one, and the other
//! entirely), with the field encodings of [`compact`].
//!
//! One connection per broker, opened on first use and kept between cycles; a request
//! that fails or runs past its deadline closes its connection, so a half-read answer can
//! never be mistaken for the next one. Every connection starts with ApiVersions, then
//! TLS and SASL as the cluster's `client` settings say (the same librdkafka property
//! names), so one set of settings covers both clients. Imported by [`super::ask`] and
//! the cycle, and by the configuration for its checks of OAUTHBEARER settings; imports
//! nothing of the rest of the exporter.

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
#[cfg(feature = "gssapi")]
mod gssapi;
#[cfg(feature = "aws-msk-iam")]
pub mod msk_iam;
pub mod oauth;
pub mod scram;
mod security;
pub mod share_offsets;
pub mod streams_describe;
mod tls;

use security::Sasl;
pub use security::Security;
pub use tls::check_tls_files;

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
    /// The broker ended the TLS handshake with an alert about the client's certificate
    /// (none given, expired, signed by a CA it does not trust): refused credentials, as a
    /// wrong password, not a broker certificate this client refuses ([`WireError::Tls`]).
    #[error("{addr}: the broker refused the client certificate: {reason}")]
    CertificateRefused { addr: String, reason: String },
    /// No credentials to present: the token endpoint, token file or credential chain
    /// failed. Nothing was sent to the broker, and the next attempt may succeed.
    #[error("{addr}: no credentials to authenticate with: {reason}")]
    Credentials { addr: String, reason: String },
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

    /// Retrying cannot help: the broker lacks an API, or refuses this client's TLS.
    ///
    /// Refused credentials are not permanent: librdkafka presents the same ones, so it
    /// cannot do better, and once they are fixed (a password reset, a token renewed) the
    /// next cycle succeeds.
    pub fn is_permanent(&self) -> bool {
        matches!(self, WireError::Unsupported { .. } | WireError::Tls { .. })
    }
}

/// Classifies an error of the TLS handshake. What TLS itself refused (a certificate, a
/// protocol alert, bytes that are no TLS: rustls errors, which tokio-rustls wraps in
/// `InvalidData`) is [`WireError::Tls`], permanent. The connection failing under the
/// handshake (reset, closed, timed out: a broker shutting down or restarting) is
/// [`WireError::Io`], retried next cycle; a plaintext listener that closes on the
/// ClientHello looks the same, so the message says that too.
fn handshake_error(addr: &str, error: io::Error) -> WireError {
    use rustls::AlertDescription as Alert;
    // TLS 1.2: the broker's verdict on the client's certificate comes in the handshake
    // (TLS 1.3: at the first read, an I/O error with the same words).
    let alert = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    if let Some(rustls::Error::AlertReceived(
        Alert::BadCertificate
        | Alert::UnsupportedCertificate
        | Alert::CertificateRevoked
        | Alert::CertificateExpired
        | Alert::CertificateUnknown
        | Alert::CertificateRequired
        | Alert::UnknownCA
        | Alert::AccessDenied,
    )) = alert
    {
        return WireError::CertificateRefused {
            addr: addr.to_string(),
            reason: error.to_string(),
        };
    }
    let from_tls = error.kind() == io::ErrorKind::InvalidData
        || error
            .get_ref()
            .is_some_and(|inner| inner.is::<rustls::Error>());
    if from_tls {
        WireError::Tls {
            addr: addr.to_string(),
            reason: error.to_string(),
        }
    } else {
        WireError::Io {
            addr: addr.to_string(),
            reason: format!(
                "connection failed during the TLS handshake (a broker restarting, or a listener \
                 that does not speak TLS): {error}"
            ),
        }
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
    /// The highest version the broker advertises of every API, also those this client
    /// does not speak (what it says of the cluster's features, e.g. KIP-939).
    advertised: HashMap<i16, i16>,
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
                let name = ServerName::try_from(host_of(addr).to_string()).map_err(|e| {
                    WireError::Tls {
                        addr: addr.to_string(),
                        reason: e.to_string(),
                    }
                })?;
                let stream = tokio_rustls::TlsConnector::from(tls.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| handshake_error(addr, e))?;
                Box::pin(stream)
            }
        };
        let mut connection = Connection {
            addr: addr.to_string(),
            stream,
            versions: HashMap::new(),
            advertised: HashMap::new(),
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
            && self.expires.is_none_or(|at| now < at)
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
        match read_frame(&mut self.stream, MAX_FRAME).await {
            Ok(body) => Ok(Bytes::from(body)),
            Err(FrameError::Io(e)) => Err(self.io_error(e)),
            Err(FrameError::Size(length)) => Err(self.protocol_error(format!(
                "frame of {length} bytes, over the limit of {MAX_FRAME} \
                 (is this a Kafka port, and is security.protocol right?)"
            ))),
        }
    }

    /// ApiVersions v3 (see [`decode_api_versions`] for older brokers).
    async fn negotiate_versions(&mut self) -> Result<(), WireError> {
        let mut request = ApiVersionsRequest::default();
        request.client_software_name = StrBytes::from_static_str(CLIENT_ID);
        request.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
        let body = self.send_raw(&request, 3, "ApiVersions").await?;
        let answer = decode_api_versions(body).map_err(|e| self.protocol_error(e))?;
        for api in answer.api_keys {
            self.advertised.insert(api.api_key, api.max_version);
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
            Sasl::OAuthBearer(_) => oauth::MECHANISM,
            #[cfg(feature = "gssapi")]
            Sasl::Gssapi(_) => "GSSAPI",
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
            Sasl::OAuthBearer(tokens) => {
                let token = tokens
                    .token()
                    .await
                    .map_err(|reason| WireError::Credentials {
                        addr: self.addr.clone(),
                        reason: format!("OAUTHBEARER: {reason}"),
                    })?;
                let challenge = self.sasl_round(tokens.initial_response(&token)).await?;
                if !challenge.is_empty() {
                    // RFC 7628 §3.2.3: the client answers an error with a lone 0x01, then
                    // the broker fails the authentication.
                    let refused = oauth::server_error(&challenge);
                    let reason = match self.sasl_round(vec![0x01]).await {
                        Err(WireError::Authentication { reason, .. }) => {
                            format!("OAUTHBEARER: {refused} ({reason})")
                        }
                        _ => format!("OAUTHBEARER: {refused}"),
                    };
                    return Err(self.auth_error(reason));
                }
            }
            #[cfg(feature = "gssapi")]
            Sasl::Gssapi(kerberos) => self.kerberos(kerberos).await?,
        }
        Ok(())
    }

    /// SASL/GSSAPI after the handshake: context tokens until the context is established,
    /// then the security-layer offer and answer (see [`gssapi`]). Only the first token
    /// may need the KDC, so only it is made off the runtime's threads.
    #[cfg(feature = "gssapi")]
    async fn kerberos(&mut self, kerberos: &gssapi::Kerberos) -> Result<(), WireError> {
        let (settings, host) = (kerberos.clone(), host_of(&self.addr).to_string());
        // Held by the blocking step itself, so a caller that gives up (its deadline
        // passed) does not let the next one start while the KDC is still being asked.
        let first_step = kerberos.first_step.clone().lock_owned().await;
        let (mut initiator, mut token) = tokio::task::spawn_blocking(move || {
            let _one = first_step;
            settings.initiate(&host)
        })
        .await
        .unwrap_or_else(|e| Err(format!("GSSAPI: {e}")))
        .map_err(|e| self.auth_error(e))?;
        let offer = loop {
            let answer = self.sasl_round(token).await?;
            if initiator.is_complete() {
                break answer;
            }
            token = initiator.step(&answer).map_err(|e| self.auth_error(e))?;
        };
        let choice = initiator
            .security_layer(&offer)
            .map_err(|e| self.auth_error(e))?;
        self.sasl_round(choice).await?;
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

/// Why a frame could not be read.
#[derive(Debug)]
enum FrameError {
    Io(io::Error),
    /// The length prefix is negative or over the limit.
    Size(i32),
}

/// Bytes read ahead of a frame's arrival: a broker that announces a large frame and
/// sends less costs what it sent, not what it announced.
const FRAME_CHUNK: usize = 64 * 1024;

/// Reads one size-prefixed frame: a big-endian int32 length, then that many bytes. A
/// length outside `0..=max` is refused before anything is allocated for it.
async fn read_frame<S: AsyncRead + Unpin + ?Sized>(
    stream: &mut S,
    max: usize,
) -> Result<Vec<u8>, FrameError> {
    let mut length = [0u8; 4];
    stream
        .read_exact(&mut length)
        .await
        .map_err(FrameError::Io)?;
    let length = i32::from_be_bytes(length);
    let size = match usize::try_from(length) {
        Ok(size) if size <= max => size,
        _ => return Err(FrameError::Size(length)),
    };
    // Grows by at most what has arrived (doubling), never past the announced size.
    let mut body = Vec::new();
    while body.len() < size {
        let start = body.len();
        let want = (size - start).min(start.max(FRAME_CHUNK));
        body.reserve_exact(want);
        body.resize(start + want, 0);
        let read = stream
            .read(&mut body[start..])
            .await
            .map_err(FrameError::Io)?;
        body.truncate(start + read);
        if read == 0 {
            return Err(FrameError::Io(io::ErrorKind::UnexpectedEof.into()));
        }
    }
    Ok(body)
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
        // The coordination group of replicas (`[ha]`).
        JoinGroupRequest::KEY => range::<JoinGroupRequest>(),
        SyncGroupRequest::KEY => range::<SyncGroupRequest>(),
        HeartbeatRequest::KEY => range::<HeartbeatRequest>(),
        LeaveGroupRequest::KEY => range::<LeaveGroupRequest>(),
        DescribeQuorumRequest::KEY => range::<DescribeQuorumRequest>(),
        // v4 can refuse to create topics.
        MetadataRequest::KEY => (4, range::<MetadataRequest>().1),
        // v2 takes the isolation level.
        ListOffsetsRequest::KEY => (2, range::<ListOffsetsRequest>().1),
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
    #[allow(clippy::type_complexity)]
    connections:
        std::sync::Mutex<HashMap<(String, Lane), Arc<tokio::sync::Mutex<Option<Connection>>>>>,
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
        self.send_via(Lane::Main, addr, request, api, deadline)
            .await
    }

    /// [`Pool::send`] on the connection of `lane`: a request that a broker may take long
    /// to answer goes on a connection of its own, so that it holds up nothing else.
    pub async fn send_via<R: Request>(
        &self,
        lane: Lane,
        addr: &str,
        request: &R,
        api: &'static str,
        deadline: Instant,
    ) -> Result<R::Response, WireError> {
        if Instant::now() >= deadline {
            return Err(WireError::Deadline);
        }
        let slot = self.slot(addr, lane);
        let work = async {
            let mut slot = slot.lock().await;
            let (mut connection, reused) = self.checkout(&mut slot, addr).await?;
            let mut answer = connection.send(request, api).await;
            if let (true, Err(error @ WireError::Io { .. })) = (reused, &answer) {
                // Expected only after the broker's idle timeout: a SASL session is given
                // up before it ends (see `reusable`).
                tracing::debug!(broker = %addr, "a pooled connection failed ({error}); sending again on a new one");
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
        self.version_via::<R>(Lane::Main, addr, deadline).await
    }

    /// [`Pool::version`] on the connection of `lane`: a lane that must not wait behind
    /// a cycle's round trip on the main one asks on its own.
    pub async fn version_via<R: Request>(
        &self,
        lane: Lane,
        addr: &str,
        deadline: Instant,
    ) -> Result<Option<i16>, WireError> {
        let slot = self.slot(addr, lane);
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

    /// The highest version of API `key` that `addr` advertises (connecting first if
    /// needed), or `None` when it advertises none.
    pub async fn advertised(
        &self,
        addr: &str,
        key: i16,
        deadline: Instant,
    ) -> Result<Option<i16>, WireError> {
        let slot = self.slot(addr, Lane::Main);
        let work = async {
            let mut slot = slot.lock().await;
            let (connection, _) = self.checkout(&mut slot, addr).await?;
            let version = connection.advertised.get(&key).copied();
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

    fn slot(&self, addr: &str, lane: Lane) -> Arc<tokio::sync::Mutex<Option<Connection>>> {
        let mut connections = self.connections.lock().unwrap_or_else(|p| p.into_inner());
        connections
            .entry((addr.to_string(), lane))
            .or_default()
            .clone()
    }
}

/// Which of a broker's connections a request goes on. Requests on one connection wait
/// for each other; those of different lanes do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Everything that brokers answer at once.
    Main,
    /// Share groups' progress: a share coordinator can take seconds to answer.
    Share,
    /// Reads in the background of the cycles (the topics' configurations): a broker slow
    /// to answer them holds up no cycle.
    Background,
    /// The replicas' coordination group (`[ha]`): a JoinGroup waits for the whole
    /// rebalance, and heartbeats must not wait behind a cycle.
    Coordination,
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

/// The host of a `host:port` address, without the brackets of an IPv6 literal.
fn host_of(addr: &str) -> &str {
    addr.rsplit_once(':')
        .map(|(host, _)| host)
        .unwrap_or(addr)
        .trim_start_matches('[')
        .trim_end_matches(']')
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

    /// Opens a TLS connection to a local server that answers each connection with
    /// `serve`, and returns the error.
    async fn tls_handshake_against(
        serve: fn(TcpStream) -> futures_util::future::BoxFuture<'static, ()>,
    ) -> WireError {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            serve(socket).await;
        });
        let properties: BTreeMap<String, String> =
            [("security.protocol".to_string(), "SSL".to_string())].into();
        let security = Security::from_properties(&properties).unwrap();
        let error = match Connection::open(&addr, &security).await {
            Ok(_) => panic!("a TLS handshake with {addr} succeeded"),
            Err(error) => error,
        };
        server.await.unwrap();
        error
    }

    #[tokio::test]
    async fn a_connection_lost_in_the_tls_handshake_is_io_not_tls() {
        // Closed right after accepting (a broker shutting down).
        let closed = tls_handshake_against(|socket| Box::pin(async move { drop(socket) })).await;
        // Reset: closed with unread data and a zero linger (RST).
        let reset = tls_handshake_against(|mut socket| {
            Box::pin(async move {
                let mut hello = [0u8; 5];
                let _ = socket.read_exact(&mut hello).await;
                let _ = socket.set_zero_linger();
                drop(socket);
            })
        })
        .await;
        for error in [closed, reset] {
            assert!(matches!(error, WireError::Io { .. }), "{error:?}");
            assert!(!error.is_permanent(), "{error:?}");
        }
    }

    #[tokio::test]
    async fn what_tls_refuses_in_the_handshake_stays_tls() {
        // A server that answers the ClientHello with bytes that are no TLS record.
        let garbage = tls_handshake_against(|mut socket| {
            Box::pin(async move {
                let mut hello = [0u8; 5];
                let _ = socket.read_exact(&mut hello).await;
                let _ = socket
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                    .await;
                // Keep the connection open until the client gives up on it.
                let mut rest = Vec::new();
                let _ = socket.read_to_end(&mut rest).await;
            })
        })
        .await;
        assert!(matches!(garbage, WireError::Tls { .. }), "{garbage:?}");
        assert!(garbage.is_permanent());
    }

    #[tokio::test]
    async fn a_certificate_alert_in_the_handshake_is_refused_credentials_not_tls() {
        // A TLS 1.2 broker that refuses the client's certificate: a fatal alert record,
        // bad_certificate (42), in answer to the handshake.
        let refused = tls_handshake_against(|mut socket| {
            Box::pin(async move {
                let mut hello = [0u8; 5];
                let _ = socket.read_exact(&mut hello).await;
                let _ = socket
                    .write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 42])
                    .await;
                let mut rest = Vec::new();
                let _ = socket.read_to_end(&mut rest).await;
            })
        })
        .await;
        assert!(
            matches!(refused, WireError::CertificateRefused { .. }),
            "{refused:?}"
        );
        assert!(!refused.is_permanent(), "{refused:?}");
        assert_eq!(
            crate::kafka::features::cause_of(&refused.to_string()),
            crate::kafka::features::Cause::Authentication,
            "{refused}"
        );
    }

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
        let oidc = Security::from_properties(&properties(&[
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "OAUTHBEARER"),
            ("sasl.oauthbearer.method", "oidc"),
            (
                "sasl.oauthbearer.token.endpoint.url",
                "https://idp.example/token",
            ),
            ("sasl.oauthbearer.client.id", "exporter"),
            ("sasl.oauthbearer.client.secret", "secret-value"),
        ]))
        .unwrap();
        assert!(oidc.tokens().is_some());
        assert!(!format!("{oidc:?}").contains("secret-value"));

        // GSSAPI, librdkafka's default mechanism: Kerberos with the cargo feature `gssapi`,
        // a sentence naming the feature without it.
        let kerberos = Security::from_properties(&properties(&[("security.protocol", "SASL_SSL")]));
        #[cfg(feature = "gssapi")]
        {
            let kerberos = kerberos.unwrap();
            assert_eq!(
                format!("{kerberos:?}"),
                "Security { tls: true, sasl: \"GSSAPI\" }"
            );
            let Some(Sasl::Gssapi(settings)) = &kerberos.sasl else {
                panic!("{kerberos:?}")
            };
            assert_eq!(settings.service, "kafka");
            assert_eq!((&settings.principal, &settings.keytab), (&None, &None));
            let named = Security::from_properties(&properties(&[
                ("security.protocol", "SASL_PLAINTEXT"),
                ("sasl.mechanism", "gssapi"),
                ("sasl.kerberos.service.name", "broker"),
                ("sasl.kerberos.principal", "exporter@EXAMPLE.COM"),
                ("sasl.kerberos.keytab", "/etc/exporter.keytab"),
            ]))
            .unwrap();
            let Some(Sasl::Gssapi(settings)) = &named.sasl else {
                panic!("{named:?}")
            };
            assert_eq!(settings.service, "broker");
            assert_eq!(settings.principal.as_deref(), Some("exporter@EXAMPLE.COM"));
            assert_eq!(settings.keytab.as_deref(), Some("/etc/exporter.keytab"));
        }
        #[cfg(not(feature = "gssapi"))]
        {
            let reason = kerberos.unwrap_err();
            assert!(
                reason.contains("SASL mechanism GSSAPI is not supported")
                    && reason.contains("cargo feature `gssapi`"),
                "{reason}"
            );
        }

        // What this client cannot do is a sentence for the startup log.
        for (pairs, expected) in [
            (
                vec![
                    ("security.protocol", "SASL_PLAINTEXT"),
                    ("sasl.mechanisms", "OAUTHBEARER"),
                ],
                "sasl.oauthbearer.method: OAUTHBEARER needs a token source",
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

/// Property tests: a broker (or whatever answers on its port) may send any bytes; the
/// frame reader and every answer this client decodes return errors, never panic, and
/// allocate in proportion to what arrived.
#[cfg(test)]
mod hostile {
    use super::*;
    use futures_util::FutureExt as _;
    use kafka_protocol::messages::*;
    use proptest::prelude::*;
    use std::task::{Context, Poll};

    /// Hands out its bytes in the given chunk sizes and remembers how large a buffer
    /// the reader offered while `delivered` bytes had arrived.
    struct Trickle {
        bytes: Vec<u8>,
        at: usize,
        chunks: Vec<usize>,
        offers: Vec<(usize, usize)>,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let this = &mut *self;
            this.offers.push((buf.remaining(), this.at));
            let chunk = this.chunks.pop().unwrap_or(usize::MAX).max(1);
            let n = chunk.min(buf.remaining()).min(this.bytes.len() - this.at);
            buf.put_slice(&this.bytes[this.at..this.at + n]);
            this.at += n;
            Poll::Ready(Ok(()))
        }
    }

    fn any_length() -> impl Strategy<Value = i32> {
        prop_oneof![
            any::<i32>(),
            0..300i32,
            Just(MAX_FRAME as i32),
            Just(MAX_FRAME as i32 + 1),
            Just(i32::MAX),
            Just(-1),
        ]
    }

    /// Decodes `body` as a `T` at every version in `versions`; only errors may come out.
    fn decode_all<T: Decodable>(body: &[u8], versions: (i16, i16)) {
        for version in versions.0..=versions.1 {
            let _ = T::decode(&mut Bytes::copy_from_slice(body), version);
        }
    }

    /// The versions this client may receive `R`'s answer in.
    fn versions<R: Request>() -> (i16, i16) {
        ours(R::KEY).expect("an API this client uses")
    }

    /// Decodes `body` as every answer this client decodes, as [`Connection`] does.
    fn decode_every_answer(body: &[u8]) {
        let _ = decode_api_versions(Bytes::copy_from_slice(body));
        for header in [0, 1] {
            let _ = ResponseHeader::decode(&mut Bytes::copy_from_slice(body), header);
        }
        decode_all::<SaslHandshakeResponse>(body, versions::<SaslHandshakeRequest>());
        decode_all::<SaslAuthenticateResponse>(body, versions::<SaslAuthenticateRequest>());
        decode_all::<DescribeProducersResponse>(body, versions::<DescribeProducersRequest>());
        decode_all::<ListTransactionsResponse>(body, versions::<ListTransactionsRequest>());
        decode_all::<DescribeTransactionsResponse>(body, versions::<DescribeTransactionsRequest>());
        decode_all::<DescribeConfigsResponse>(body, versions::<DescribeConfigsRequest>());
        decode_all::<FindCoordinatorResponse>(body, versions::<FindCoordinatorRequest>());
        decode_all::<ListGroupsResponse>(body, versions::<ListGroupsRequest>());
        decode_all::<DescribeGroupsResponse>(body, versions::<DescribeGroupsRequest>());
        decode_all::<ConsumerGroupDescribeResponse>(
            body,
            versions::<ConsumerGroupDescribeRequest>(),
        );
        decode_all::<ShareGroupDescribeResponse>(body, versions::<ShareGroupDescribeRequest>());
        decode_all::<OffsetFetchResponse>(body, versions::<OffsetFetchRequest>());
        decode_all::<FetchResponse>(body, versions::<FetchRequest>());
        decode_all::<share_offsets::DescribeShareGroupOffsetsAnswer>(
            body,
            versions::<share_offsets::DescribeShareGroupOffsets>(),
        );
    }

    /// Encodings of answers a broker really sends, to bit-flip: one of each type, at
    /// its highest version here, with a few elements in its arrays.
    fn valid_answers() -> Vec<Vec<u8>> {
        fn encode<T: Encodable>(answer: T, version: i16) -> Vec<u8> {
            let mut out = BytesMut::new();
            answer.encode(&mut out, version).expect("encodable");
            out.to_vec()
        }
        let mut fetch = FetchResponse::default();
        let mut topic = fetch_response::FetchableTopicResponse::default();
        topic.topic = TopicName(StrBytes::from_static_str("orders"));
        let mut partition = fetch_response::PartitionData::default();
        partition.records = Some(Bytes::from_static(&[0; 70]));
        let mut aborted = fetch_response::AbortedTransaction::default();
        aborted.producer_id = ProducerId(7);
        partition.aborted_transactions = Some(vec![aborted]);
        topic.partitions = vec![partition.clone(), partition];
        fetch.responses = vec![topic];
        let mut producers = DescribeProducersResponse::default();
        let mut topic = describe_producers_response::TopicResponse::default();
        let mut partition = describe_producers_response::PartitionResponse::default();
        partition.active_producers = vec![Default::default(), Default::default()];
        topic.partitions = vec![partition];
        producers.topics = vec![topic];
        let mut offsets = OffsetFetchResponse::default();
        let mut group = offset_fetch_response::OffsetFetchResponseGroup::default();
        let mut topic = offset_fetch_response::OffsetFetchResponseTopics::default();
        topic.partitions = vec![Default::default(), Default::default()];
        group.topics = vec![topic];
        offsets.groups = vec![group];
        let mut groups = DescribeGroupsResponse::default();
        let mut group = describe_groups_response::DescribedGroup::default();
        group.members = vec![Default::default()];
        groups.groups = vec![group];
        let mut list = ListGroupsResponse::default();
        list.groups = vec![Default::default(), Default::default()];
        let mut api_versions = ApiVersionsResponse::default();
        api_versions.api_keys = vec![Default::default(), Default::default()];
        vec![
            encode(fetch, 12),
            encode(producers, 0),
            encode(offsets, 9),
            encode(groups, 5),
            encode(list, 5),
            encode(api_versions, 3),
        ]
    }

    /// Found by `answers_of_arbitrary_bytes`: an array length read from these bytes made
    /// the unpatched kafka-protocol allocate 98,861,466,000 bytes and abort the process.
    #[test]
    fn arbitrary_bytes_that_aborted_the_decoder() {
        const BODY: [u8; 70] = [
            114, 157, 205, 214, 49, 26, 226, 174, 47, 244, 5, 121, 228, 140, 144, 92, 158, 9, 163,
            58, 106, 84, 48, 200, 249, 244, 244, 84, 176, 146, 123, 22, 178, 76, 167, 216, 51, 175,
            49, 194, 167, 246, 254, 211, 101, 142, 117, 112, 106, 81, 220, 170, 44, 49, 34, 46,
            247, 11, 181, 132, 13, 45, 227, 209, 137, 55, 255, 50, 143, 222,
        ];
        decode_every_answer(&BODY);
    }

    /// The smallest such answer: DescribeProducers with 4,294,967,294 topics in 9 bytes,
    /// and DescribeGroups v0 with i32::MAX groups.
    #[test]
    fn array_lengths_beyond_the_answer_are_errors() {
        static PRODUCERS: [u8; 9] = [0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f];
        let error =
            DescribeProducersResponse::decode(&mut Bytes::from_static(&PRODUCERS), 0).unwrap_err();
        assert!(error.to_string().contains("4294967294"), "{error}");
        static GROUPS: [u8; 5] = [0x7f, 0xff, 0xff, 0xff, 0];
        let error =
            DescribeGroupsResponse::decode(&mut Bytes::from_static(&GROUPS), 0).unwrap_err();
        assert!(error.to_string().contains("2147483647"), "{error}");
    }

    proptest! {
        #![proptest_config(crate::hostile::config(1000))]

        #[test]
        fn frames_of_any_length(
            length in any_length(),
            body in prop::collection::vec(any::<u8>(), 0..400),
            chunks in prop::collection::vec(1..200usize, 0..8),
        ) {
            let mut bytes = length.to_be_bytes().to_vec();
            bytes.extend_from_slice(&body);
            let mut stream = Trickle { bytes, at: 0, chunks, offers: Vec::new() };
            let read = read_frame(&mut stream, MAX_FRAME)
                .now_or_never()
                .expect("the stream never waits");
            match usize::try_from(length) {
                Ok(size) if size <= MAX_FRAME && size <= body.len() => {
                    prop_assert_eq!(read.unwrap(), &body[..size]);
                }
                Ok(size) if size <= MAX_FRAME => {
                    prop_assert!(matches!(read, Err(FrameError::Io(_))), "{:?}", read);
                }
                _ => prop_assert!(matches!(read, Err(FrameError::Size(l)) if l == length)),
            }
            // Room offered past the length prefix grows with what arrived.
            for &(offered, arrived) in &stream.offers {
                let arrived = arrived.saturating_sub(4);
                prop_assert!(offered <= arrived.max(FRAME_CHUNK), "{offered} after {arrived}");
            }
        }

        #[test]
        fn answers_of_arbitrary_bytes(body in prop::collection::vec(any::<u8>(), 0..200)) {
            decode_every_answer(&body);
        }

        #[test]
        fn answers_bit_flipped_and_cut(
            which in any::<prop::sample::Index>(),
            flips in prop::collection::vec((any::<prop::sample::Index>(), 0..8u8), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let answers = valid_answers();
            let mut body = answers[which.index(answers.len())].clone();
            for (at, bit) in &flips {
                let at = at.index(body.len());
                body[at] ^= 1 << bit;
            }
            body.truncate(cut.index(body.len() + 1).max(body.len() / 2));
            decode_every_answer(&body);
        }
    }
}
