//! A loopback TCP proxy of the test suite's own, for faults a real broker cannot produce
//! on demand: it forwards Kafka frames, delays them, blackholes them (accepts and reads,
//! never answers), cuts every open connection, or answers chosen groups' OffsetFetch
//! requests with COORDINATOR_LOAD_IN_PROGRESS in the real wire format (kafka-protocol), or
//! removes API keys from ApiVersions answers, as an older broker would answer.
//! The local broker advertises a listener at the proxy's address
//! (`scripts/kafka-local bootstrap proxied`), so every connection of a client bootstrapped
//! there passes through it. One proxy at a time: `start` waits for the previous one.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseGroup;
use kafka_protocol::messages::{
    ApiVersionsResponse, DescribeProducersResponse, DescribeQuorumResponse, FetchResponse,
    FindCoordinatorResponse, ListTransactionsResponse, MetadataResponse, OffsetFetchRequest,
    OffsetFetchResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const FETCH: i16 = 1;
const OFFSET_FETCH: i16 = 9;
const API_VERSIONS: i16 = 18;
const DESCRIBE_PRODUCERS: i16 = 61;
const LIST_TRANSACTIONS: i16 = 66;
const METADATA: i16 = 3;
const DESCRIBE_QUORUM: i16 = 55;
const FIND_COORDINATOR: i16 = 10;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Forward,
    /// Forward after a pause per frame.
    Delay(Duration),
    /// Accept connections and read requests, never answer.
    Blackhole,
}

#[derive(Default)]
struct State {
    mode: Option<Mode>,
    /// Group id -> how many more OffsetFetch answers to replace with a loading error.
    failing_groups: HashMap<String, u32>,
    /// The error those answers carry instead (`fail_offset_fetch_with`).
    offset_fetch_error: Option<i16>,
    /// Errors injected so far.
    injected: u32,
    /// API key -> highest version left in ApiVersions answers (-1: the key is removed):
    /// an older broker.
    capped_apis: HashMap<i16, i16>,
    /// Subtracted from every producer's last write in DescribeProducers answers.
    producers_aged_by: Option<Duration>,
    /// ListTransactions answers are emptied.
    transactions_forgotten: bool,
    /// ListTransactions answers carry this error code instead of their transactions.
    list_transactions_error: Option<i16>,
    /// API key -> how long its answers are held back (a broker slow on that request).
    slow_apis: HashMap<i16, Duration>,
    /// The host every broker of a Metadata answer is advertised as.
    advertised_host: Option<String>,
    /// Added to the times of DescribeQuorum answers: a broker whose clock runs ahead.
    clock_ahead_ms: i64,
}

pub struct Proxy {
    state: Arc<Mutex<State>>,
    cut: watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
    _exclusive: Option<tokio::sync::OwnedMutexGuard<()>>,
}

fn exclusive() -> Arc<tokio::sync::Mutex<()>> {
    static LOCK: std::sync::OnceLock<Arc<tokio::sync::Mutex<()>>> = std::sync::OnceLock::new();
    LOCK.get_or_init(Default::default).clone()
}

impl Proxy {
    pub async fn start(listen: SocketAddr, upstream: SocketAddr) -> Proxy {
        let guard = exclusive().lock_owned().await;
        Self::listen(listen, upstream, Some(guard)).await
    }

    /// A proxy that runs beside others, one per broker of a cluster (each broker
    /// advertises its own proxied port).
    pub async fn start_beside(listen: SocketAddr, upstream: SocketAddr) -> Proxy {
        Self::listen(listen, upstream, None).await
    }

    /// A proxy that speaks TLS to its clients with `tls` (and plaintext to the broker): a
    /// broker listener with a certificate of the test's choosing.
    pub async fn start_tls(
        listen: SocketAddr,
        upstream: SocketAddr,
        tls: Arc<rustls::ServerConfig>,
    ) -> Proxy {
        let guard = exclusive().lock_owned().await;
        Self::listen_with(listen, upstream, Some(guard), Some(tls)).await
    }

    async fn listen(
        listen: SocketAddr,
        upstream: SocketAddr,
        guard: Option<tokio::sync::OwnedMutexGuard<()>>,
    ) -> Proxy {
        Self::listen_with(listen, upstream, guard, None).await
    }

    async fn listen_with(
        listen: SocketAddr,
        upstream: SocketAddr,
        guard: Option<tokio::sync::OwnedMutexGuard<()>>,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Proxy {
        // The previous proxy's listener closes when its aborted task is dropped, which
        // can be a moment after the proxy itself.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match TcpListener::bind(listen).await {
                Ok(listener) => break listener,
                Err(e)
                    if e.kind() == std::io::ErrorKind::AddrInUse
                        && std::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("proxy cannot listen on {listen}: {e}"),
            }
        };
        let state = Arc::new(Mutex::new(State::default()));
        let (cut, _) = watch::channel(0u64);
        let task = {
            let state = state.clone();
            let cut = cut.clone();
            tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    let (state, cut) = (state.clone(), cut.subscribe());
                    match &tls {
                        None => {
                            tokio::spawn(serve(client, upstream, state, cut));
                        }
                        Some(tls) => {
                            let acceptor = tokio_rustls::TlsAcceptor::from(tls.clone());
                            tokio::spawn(async move {
                                // A client that refuses the certificate ends here.
                                if let Ok(client) = acceptor.accept(client).await {
                                    serve(client, upstream, state, cut).await;
                                }
                            });
                        }
                    }
                }
            })
        };
        Proxy {
            state,
            cut,
            task,
            _exclusive: guard,
        }
    }

    pub fn set_mode(&self, mode: Mode) {
        self.state.lock().unwrap().mode = Some(mode);
    }

    /// Closes every open connection (the broker "dies" mid-request).
    pub fn cut_all(&self) {
        self.cut.send_modify(|generation| *generation += 1);
    }

    /// Answers the next `times` OffsetFetch requests for `group` with
    /// COORDINATOR_LOAD_IN_PROGRESS (`u32::MAX`: until told otherwise; 0: stop).
    pub fn fail_offset_fetch(&self, group: &str, times: u32) {
        self.state
            .lock()
            .unwrap()
            .failing_groups
            .insert(group.to_string(), times);
    }

    /// Removes `api_key` from every ApiVersions answer from now on, as an older broker
    /// would answer (e.g. 61, DescribeProducers, which Kafka before 3.0 lacks).
    pub fn hide_api(&self, api_key: i16) {
        self.cap_api(api_key, -1);
    }

    /// A hanging transaction, as a broker would show it: every producer last wrote `by`
    /// ago (DescribeProducers), no coordinator lists any transaction (ListTransactions),
    /// and the broker appended every transactional record `by` ago (Fetch: its batches
    /// carry LogAppendTime, as on a `LogAppendTime` topic; the exporter dates a
    /// transaction no coordinator confirms by that broker clock, never by the producer's
    /// timestamps). The real broker cannot be made to hang one on demand.
    pub fn fake_hanging(&self, by: Duration) {
        let mut state = self.state.lock().unwrap();
        state.producers_aged_by = Some(by);
        state.transactions_forgotten = true;
    }

    /// No coordinator lists any transaction from now on (ListTransactions answers are
    /// emptied), everything else left as the broker answers it: a transaction the
    /// coordinators no longer know (KIP-664), on a `CreateTime` topic the records keep
    /// the producer's timestamps.
    pub fn hide_transactions(&self) {
        self.state.lock().unwrap().transactions_forgotten = true;
    }

    /// Every ListTransactions answer from now on carries `error_code` and no
    /// transaction (as a coordinator that is not available answers).
    pub fn fail_list_transactions(&self, error_code: i16) {
        self.state.lock().unwrap().list_transactions_error = Some(error_code);
    }

    /// Holds back every answer to `api_key` for `pause`: a broker slow on that request
    /// (a broker answers the requests of one connection in order, so what follows on
    /// the same connection waits too).
    pub fn slow_api(&self, api_key: i16, pause: Duration) {
        self.state.lock().unwrap().slow_apis.insert(api_key, pause);
    }

    /// Metadata answers name every broker by `host` (its port kept), as a broker with
    /// `advertised.listeners` on that host name would.
    pub fn advertise_as(&self, host: &str) {
        self.state.lock().unwrap().advertised_host = Some(host.to_string());
    }

    /// DescribeQuorum answers read `ms` later (earlier when negative) than the broker's
    /// clock: a broker host whose clock is off.
    pub fn shift_broker_clock(&self, ms: i64) {
        self.state.lock().unwrap().clock_ahead_ms = ms;
    }

    /// Lowers the highest version of `api_key` in every ApiVersions answer to `max`.
    pub fn cap_api(&self, api_key: i16, max: i16) {
        self.state.lock().unwrap().capped_apis.insert(api_key, max);
    }

    /// How many OffsetFetch answers were replaced so far.
    pub fn injected(&self) -> u32 {
        self.state.lock().unwrap().injected
    }

    /// As `fail_offset_fetch`, with `error_code` (e.g. 16, NOT_COORDINATOR: a coordinator
    /// that moved) in every OffsetFetch answer the proxy replaces from now on.
    pub fn fail_offset_fetch_with(&self, group: &str, times: u32, error_code: i16) {
        let mut state = self.state.lock().unwrap();
        state.offset_fetch_error = Some(error_code);
        state.failing_groups.insert(group.to_string(), times);
    }

    pub fn remaining_failures(&self, group: &str) -> u32 {
        self.state
            .lock()
            .unwrap()
            .failing_groups
            .get(group)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut_all();
        self.task.abort();
    }
}

async fn read_frame(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> Option<Bytes> {
    let length = stream.read_i32().await.ok()?;
    let mut frame = vec![0u8; usize::try_from(length).ok()?];
    stream.read_exact(&mut frame).await.ok()?;
    Some(Bytes::from(frame))
}

/// One write per frame: a separate length prefix would meet Nagle's algorithm and
/// delayed acknowledgements and add tens of milliseconds to every request.
async fn write_frame(stream: &mut (impl tokio::io::AsyncWrite + Unpin), frame: &[u8]) -> bool {
    let mut framed = Vec::with_capacity(frame.len() + 4);
    framed.extend_from_slice(&(frame.len() as i32).to_be_bytes());
    framed.extend_from_slice(frame);
    stream.write_all(&framed).await.is_ok()
}

/// Waits as the mode says; false when the frame must be swallowed.
async fn pass(state: &Arc<Mutex<State>>) -> bool {
    let mode = state.lock().unwrap().mode.unwrap_or(Mode::Forward);
    match mode {
        Mode::Forward => true,
        Mode::Delay(pause) => {
            tokio::time::sleep(pause).await;
            true
        }
        Mode::Blackhole => false,
    }
}

/// OffsetFetch requests in flight on one connection: correlation id -> (version, groups).
type InFlight = Arc<Mutex<HashMap<i32, (i16, Vec<String>)>>>;

/// Every request in flight on one connection: correlation id -> (API key, version).
type RequestsInFlight = Arc<Mutex<HashMap<i32, (i16, i16)>>>;

async fn serve(
    client: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
    upstream: SocketAddr,
    state: Arc<Mutex<State>>,
    mut cut: watch::Receiver<u64>,
) {
    let Ok(upstream) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut client_read, mut client_write) = tokio::io::split(client);
    let (mut upstream_read, mut upstream_write) = upstream.into_split();
    let in_flight: InFlight = Arc::default();
    let requests_in_flight: RequestsInFlight = Arc::default();

    let to_broker = {
        let (state, in_flight) = (state.clone(), in_flight.clone());
        let requests_in_flight = requests_in_flight.clone();
        async move {
            while let Some(frame) = read_frame(&mut client_read).await {
                if let Some((correlation_id, api_key, version)) = request_key(&frame) {
                    requests_in_flight
                        .lock()
                        .unwrap()
                        .insert(correlation_id, (api_key, version));
                }
                if let Some((correlation_id, version, groups)) = offset_fetch_request(&frame) {
                    in_flight
                        .lock()
                        .unwrap()
                        .insert(correlation_id, (version, groups));
                }
                if pass(&state).await && !write_frame(&mut upstream_write, &frame).await {
                    break;
                }
            }
        }
    };
    let to_client = async move {
        while let Some(frame) = read_frame(&mut upstream_read).await {
            let frame = match frame.get(..4) {
                Some(id) => {
                    let correlation_id = i32::from_be_bytes(id.try_into().unwrap());
                    let request = in_flight.lock().unwrap().remove(&correlation_id);
                    let key = requests_in_flight.lock().unwrap().remove(&correlation_id);
                    let slow =
                        key.and_then(|(api, _)| state.lock().unwrap().slow_apis.get(&api).copied());
                    if let Some(pause) = slow {
                        tokio::time::sleep(pause).await;
                    }
                    let replaced = match (request, key) {
                        (Some((version, groups)), _) => {
                            inject(&state, &frame, correlation_id, version, &groups)
                        }
                        (None, Some((API_VERSIONS, version))) => hide_apis(&state, &frame, version),
                        (None, Some((DESCRIBE_PRODUCERS, version))) => {
                            age_producers(&state, &frame, version)
                        }
                        (None, Some((LIST_TRANSACTIONS, version))) => {
                            forget_transactions(&state, &frame, version)
                        }
                        (None, Some((FETCH, version))) => age_appends(&state, &frame, version),
                        (None, Some((METADATA, version))) => {
                            rename_brokers(&state, &frame, version)
                        }
                        (None, Some((FIND_COORDINATOR, version))) => {
                            rename_coordinators(&state, &frame, version)
                        }
                        (None, Some((DESCRIBE_QUORUM, version))) => {
                            shift_clock(&state, &frame, version)
                        }
                        _ => None,
                    };
                    replaced.unwrap_or(frame)
                }
                None => frame,
            };
            if pass(&state).await && !write_frame(&mut client_write, &frame).await {
                break;
            }
        }
    };
    tokio::select! {
        _ = to_broker => {}
        _ = to_client => {}
        _ = cut.changed() => {}
    }
}

/// (correlation id, API key, version) of a request frame.
fn request_key(frame: &Bytes) -> Option<(i32, i16, i16)> {
    let api_key = i16::from_be_bytes(frame.get(0..2)?.try_into().ok()?);
    let version = i16::from_be_bytes(frame.get(2..4)?.try_into().ok()?);
    let correlation_id = i32::from_be_bytes(frame.get(4..8)?.try_into().ok()?);
    Some((correlation_id, api_key, version))
}

/// Decodes a response frame, lets `change` edit it, and encodes it again.
fn rewrite<R>(answer: &Bytes, version: i16, change: impl FnOnce(&mut R)) -> Option<Bytes>
where
    R: Decodable + Encodable + HeaderVersion,
{
    let mut body = answer.clone();
    let header = ResponseHeader::decode(&mut body, R::header_version(version)).ok()?;
    let mut response = R::decode(&mut body, version).ok()?;
    change(&mut response);
    let mut buf = BytesMut::new();
    header.encode(&mut buf, R::header_version(version)).ok()?;
    response.encode(&mut buf, version).ok()?;
    Some(buf.freeze())
}

/// DescribeProducers answers with every producer's last write moved into the past: a
/// producer that has not written for that long.
fn age_producers(state: &Arc<Mutex<State>>, answer: &Bytes, version: i16) -> Option<Bytes> {
    let by = state.lock().unwrap().producers_aged_by?;
    rewrite::<DescribeProducersResponse>(answer, version, |response| {
        for topic in &mut response.topics {
            for partition in &mut topic.partitions {
                for producer in &mut partition.active_producers {
                    producer.last_timestamp -= by.as_millis() as i64;
                }
            }
        }
    })
}

/// Fetch answers whose transactional record batches say the broker appended them `by`
/// ago (LogAppendTime). Only the batch headers change; the exporter reads nothing else
/// (and checks no CRC, as librdkafka by default does not).
fn age_appends(state: &Arc<Mutex<State>>, answer: &Bytes, version: i16) -> Option<Bytes> {
    let by = state.lock().unwrap().producers_aged_by?;
    let appended = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .saturating_sub(by)
        .as_millis() as i64;
    rewrite::<FetchResponse>(answer, version, |response| {
        for topic in &mut response.responses {
            for partition in &mut topic.partitions {
                let Some(records) = partition.records.take() else {
                    continue;
                };
                let mut bytes = records.to_vec();
                let mut at = 0;
                // v2 batches: base offset (8), length (4), then the header from byte 12.
                while bytes.len() >= at + 61 {
                    let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().unwrap());
                    let attributes = i16::from_be_bytes([bytes[at + 21], bytes[at + 22]]);
                    let transactional_data =
                        attributes & (1 << 4) != 0 && attributes & (1 << 5) == 0;
                    if bytes[at + 16] == 2 && transactional_data {
                        let attributes = attributes | (1 << 3);
                        bytes[at + 21..at + 23].copy_from_slice(&attributes.to_be_bytes());
                        bytes[at + 27..at + 35].copy_from_slice(&appended.to_be_bytes());
                        bytes[at + 35..at + 43].copy_from_slice(&appended.to_be_bytes());
                    }
                    at += 12 + length.max(0) as usize;
                }
                partition.records = Some(Bytes::from(bytes));
            }
        }
    })
}

/// Metadata answers with every broker's host replaced (see [`Proxy::advertise_as`]).
fn rename_brokers(state: &Arc<Mutex<State>>, answer: &Bytes, version: i16) -> Option<Bytes> {
    let host = state.lock().unwrap().advertised_host.clone()?;
    rewrite::<MetadataResponse>(answer, version, |response| {
        for broker in &mut response.brokers {
            broker.host = kafka_protocol::protocol::StrBytes::from_string(host.clone());
        }
    })
}

/// FindCoordinator answers with the coordinator's host replaced, as Metadata's: a
/// broker advertised by that name answers both with it (a client renames the broker
/// after the coordinator's address, and a TLS client then checks the certificate
/// against that name).
fn rename_coordinators(state: &Arc<Mutex<State>>, answer: &Bytes, version: i16) -> Option<Bytes> {
    let host = state.lock().unwrap().advertised_host.clone()?;
    rewrite::<FindCoordinatorResponse>(answer, version, |response| {
        if !response.host.is_empty() {
            response.host = kafka_protocol::protocol::StrBytes::from_string(host.clone());
        }
        for coordinator in &mut response.coordinators {
            if !coordinator.host.is_empty() {
                coordinator.host = kafka_protocol::protocol::StrBytes::from_string(host.clone());
            }
        }
    })
}

/// DescribeQuorum answers with every voter's and observer's times shifted.
fn shift_clock(state: &Arc<Mutex<State>>, answer: &Bytes, version: i16) -> Option<Bytes> {
    let ms = state.lock().unwrap().clock_ahead_ms;
    if ms == 0 {
        return None;
    }
    rewrite::<DescribeQuorumResponse>(answer, version, |response| {
        for partition in response.topics.iter_mut().flat_map(|t| &mut t.partitions) {
            for replica in partition
                .current_voters
                .iter_mut()
                .chain(partition.observers.iter_mut())
            {
                replica.last_fetch_timestamp += ms;
                replica.last_caught_up_timestamp += ms;
            }
        }
    })
}

/// ListTransactions answers without any transaction: coordinators that lost track, or
/// that answer with an error.
fn forget_transactions(state: &Arc<Mutex<State>>, answer: &Bytes, version: i16) -> Option<Bytes> {
    let (forgotten, error) = {
        let state = state.lock().unwrap();
        (state.transactions_forgotten, state.list_transactions_error)
    };
    if !forgotten && error.is_none() {
        return None;
    }
    rewrite::<ListTransactionsResponse>(answer, version, |response| {
        response.transaction_states.clear();
        if let Some(code) = error {
            response.error_code = code;
        }
    })
}

/// The broker's ApiVersions answer with the capped API keys lowered or removed.
fn hide_apis(state: &Arc<Mutex<State>>, answer: &Bytes, version: i16) -> Option<Bytes> {
    let capped = state.lock().unwrap().capped_apis.clone();
    if capped.is_empty() {
        return None;
    }
    let mut body = answer.clone();
    let header =
        ResponseHeader::decode(&mut body, ApiVersionsResponse::header_version(version)).ok()?;
    let mut response = ApiVersionsResponse::decode(&mut body, version).ok()?;
    response
        .api_keys
        .retain_mut(|api| match capped.get(&api.api_key) {
            None => true,
            Some(&max) => {
                api.max_version = api.max_version.min(max);
                api.max_version >= api.min_version
            }
        });
    let mut buf = BytesMut::new();
    header
        .encode(&mut buf, ApiVersionsResponse::header_version(version))
        .ok()?;
    response.encode(&mut buf, version).ok()?;
    Some(buf.freeze())
}

/// (correlation id, version, group ids) of an OffsetFetch request frame.
fn offset_fetch_request(frame: &Bytes) -> Option<(i32, i16, Vec<String>)> {
    let api_key = i16::from_be_bytes(frame.get(0..2)?.try_into().ok()?);
    if api_key != OFFSET_FETCH {
        return None;
    }
    let version = i16::from_be_bytes(frame.get(2..4)?.try_into().ok()?);
    let mut buf = frame.clone();
    let header =
        RequestHeader::decode(&mut buf, OffsetFetchRequest::header_version(version)).ok()?;
    let request = OffsetFetchRequest::decode(&mut buf, version).ok()?;
    let mut groups: Vec<String> = request
        .groups
        .iter()
        .map(|g| g.group_id.to_string())
        .collect();
    if version < 8 {
        groups.push(request.group_id.to_string());
    }
    Some((header.correlation_id, version, groups))
}

/// The broker's answer with COORDINATOR_LOAD_IN_PROGRESS for the groups due to fail
/// (every other group of a batched request keeps its real answer), if any is due.
fn inject(
    state: &Arc<Mutex<State>>,
    answer: &Bytes,
    correlation_id: i32,
    version: i16,
    groups: &[String],
) -> Option<Bytes> {
    let (failing, error_code) = {
        let mut state = state.lock().unwrap();
        let due: Vec<String> = groups
            .iter()
            .filter(|g| state.failing_groups.get(*g).is_some_and(|n| *n > 0))
            .cloned()
            .collect();
        for group in &due {
            let remaining = state.failing_groups.get_mut(group).unwrap();
            if *remaining != u32::MAX {
                *remaining -= 1;
            }
            state.injected += 1;
        }
        let error_code = state
            .offset_fetch_error
            .unwrap_or(COORDINATOR_LOAD_IN_PROGRESS);
        (due, error_code)
    };
    if failing.is_empty() {
        return None;
    }
    let mut response = if version >= 8 {
        let mut body = answer.clone();
        ResponseHeader::decode(&mut body, OffsetFetchResponse::header_version(version)).ok()?;
        let mut response = OffsetFetchResponse::decode(&mut body, version).ok()?;
        for group in &mut response.groups {
            if failing.contains(&group.group_id.to_string()) {
                let id = group.group_id.clone();
                *group = OffsetFetchResponseGroup::default();
                group.group_id = id;
                group.error_code = error_code;
            }
        }
        response
    } else {
        OffsetFetchResponse::default()
    };
    if version < 8 {
        response.error_code = error_code;
    }
    let mut buf = BytesMut::new();
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    header
        .encode(&mut buf, OffsetFetchResponse::header_version(version))
        .ok()?;
    response.encode(&mut buf, version).ok()?;
    Some(buf.freeze())
}
