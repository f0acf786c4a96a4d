//! The HTTP surface (SPEC §5): `/metrics` (or the `--web.telemetry-path`), `/healthz`,
//! `/readyz`, a small HTML page at `/`, and the same pinned partitions as JSON at
//! `/api/v1/stuck`; [`web`] puts TLS and basic auth in front of it (the exporter-toolkit's
//! web config). Nothing here talks to Kafka: every handler reads the latest snapshots
//! ([`crate::derive`]) and the rendered bodies ([`crate::expose`]). Only the wiring in
//! the crate root imports this.

pub mod web;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::http::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde::Serialize;

use crate::derive::ClusterSnapshot;
use crate::expose::{Metrics, SnapshotReceiver};
use crate::kafka::coordination::{Mode, Ownership, Report};

/// Shared by all handlers.
#[derive(Clone)]
pub struct AppState {
    pub metrics: Arc<Metrics>,
    pub clusters: Arc<Vec<(String, SnapshotReceiver)>>,
    /// Cluster name -> bootstrap servers, for the abort commands.
    pub bootstrap: Arc<HashMap<String, String>>,
    pub interval: Duration,
    /// Where the metrics are served (`--web.telemetry-path`), validated by the config.
    pub telemetry_path: Arc<str>,
    /// Which clusters this replica serves (all, without `[ha]`).
    pub ownership: Arc<Ownership>,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(index))
        .route(&state.telemetry_path, get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/api/v1/stuck", get(stuck))
        .with_state(state)
}

async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let accept = headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let gzip = headers
        .get(ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(accepts_gzip);
    // Served from the body rendered for this cycle when there is one; rendering a large
    // snapshot takes milliseconds of CPU, so it runs off the I/O threads.
    let encoded = match state.metrics.cached(accept.as_deref(), gzip) {
        Some(encoded) => Ok(encoded),
        None => {
            tokio::task::spawn_blocking(move || state.metrics.encode_for(accept.as_deref(), gzip))
                .await
        }
    };
    match encoded {
        Ok((content_type, gzipped, body)) => {
            let mut response = ([(CONTENT_TYPE, content_type)], body).into_response();
            if gzipped {
                response
                    .headers_mut()
                    .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            }
            response
        }
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding failed: {error}\n"),
        )
            .into_response(),
    }
}

/// `Accept-Encoding` lists gzip without refusing it (`gzip;q=0`).
fn accepts_gzip(header: &str) -> bool {
    header.split(',').any(|coding| {
        let mut parts = coding.split(';').map(str::trim);
        let name = parts.next().unwrap_or_default();
        let refused = parts.any(|p| p.replace(' ', "") == "q=0" || p.replace(' ', "") == "q=0.0");
        (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
    })
}

/// Ready while it serves: every cluster's sampler has ended a cycle within the last 3
/// intervals, reached or not (an unreachable cluster is `up 0` on /metrics and a line
/// here, not an unready pod: `helm upgrade --wait` must not stall during a Kafka
/// incident). Not ready before each cluster's first cycle has ended (nothing to serve
/// yet) or when a sampler has stopped producing snapshots.
async fn readyz(State(state): State<AppState>) -> Response {
    let now = SystemTime::now();
    let limit = state.interval * 3;
    let mut body = String::new();
    let mut ready = true;
    let report = state.ownership.report();
    if let Some(group) = &report.group {
        let _ = writeln!(body, "{}", ha_line(group, &report));
    }
    for (name, rx) in state.clusters.iter() {
        if !report.serving.contains(name) {
            // Another replica's share, or none yet while joining: this replica serves
            // what it has (nothing of this cluster), and is ready to.
            let why = match report.refused.get(name) {
                Some(reason) => format!("not served by this replica: {reason}"),
                None if report.mode(name) == Some(Mode::Joining) => {
                    "not served until this replica has joined the cluster's group".to_string()
                }
                None if report.mode(name) == Some(Mode::Unreachable) => {
                    "no coordinator of the cluster's group answers: served only as down (up 0) \
                     while this replica cannot reach the cluster either"
                        .to_string()
                }
                None => "served by another replica".to_string(),
            };
            let _ = writeln!(body, "{name}: {why}");
            continue;
        }
        let snapshot = rx.borrow().clone();
        let Some(snapshot) = snapshot else {
            // Only a replica that just started waits for its first cycle; a member
            // that just took a cluster over is ready while its first cycle runs.
            ready &= report.group.is_some();
            let _ = writeln!(body, "{name}: first cycle not ended yet");
            continue;
        };
        let age = now.duration_since(snapshot.taken_at).unwrap_or_default();
        let fresh = age <= limit;
        ready &= fresh;
        let reached = match snapshot.last_success {
            _ if snapshot.up => "up".to_string(),
            Some(at) => format!(
                "down (up 0), last successful cycle {:.1}s ago",
                now.duration_since(at).unwrap_or_default().as_secs_f64()
            ),
            None => "down (up 0), no successful cycle yet".to_string(),
        };
        let _ = writeln!(
            body,
            "{name}: {reached}; last cycle ended {:.1}s ago{}",
            age.as_secs_f64(),
            if fresh {
                ""
            } else {
                " (stale: the sampler is stuck)"
            }
        );
    }
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body).into_response()
}

async fn index(State(state): State<AppState>) -> Html<String> {
    let snapshots = state.snapshots();
    let page = render_index(
        &snapshots,
        &state.bootstrap,
        &state.telemetry_path,
        SystemTime::now(),
    );
    let report = state.ownership.report();
    // A cluster this replica reports only as down (no coordinator of its group answers)
    // is shown: it has a snapshot here.
    let shown = snapshots.iter().any(|(_, snapshot)| snapshot.is_some());
    if let (Some(group), true) = (&report.group, report.serving.is_empty() && !shown) {
        // A replica that stands by knows nothing of the clusters: it says so, and no
        // "every partition's LSO equals its HW" about data it does not sample.
        return Html(format!(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>kafka-lso-exporter</title></head><body>\n\
             <h1>kafka-lso-exporter</h1>\n<p>{}.</p>\n<p>This replica serves no cluster now: the \
             other replicas' pages show them. <a href=\"readyz\">readyz</a></p>\n</body></html>\n",
            escape(&ha_line(group, &report))
        ));
    }
    match &report.group {
        // Which replica serves what: the clusters below are this replica's share.
        Some(group) => Html(page.replacen(
            "<h2>Clusters</h2>",
            &format!(
                "<p>{}; the other clusters are on the other replicas' pages.</p>\n<h2>Clusters</h2>",
                escape(&ha_line(group, &report))
            ),
            1,
        )),
        None => Html(page),
    }
}

async fn stuck(State(state): State<AppState>) -> Response {
    let snapshots = state.snapshots();
    let report = StuckReport::new(&snapshots, &state.bootstrap);
    match serde_json::to_string_pretty(&report) {
        Ok(body) => ([(CONTENT_TYPE, "application/json")], body).into_response(),
        Err(error) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{error}\n")).into_response(),
    }
}

impl AppState {
    /// The clusters this replica serves, with their latest snapshots.
    fn snapshots(&self) -> Vec<(String, Option<Arc<ClusterSnapshot>>)> {
        self.clusters
            .iter()
            .filter(|(name, _)| self.ownership.serves(name))
            .map(|(name, rx)| (name.clone(), rx.borrow().clone()))
            .collect()
    }
}

/// One line on this replica's place in its coordination groups (one per cluster).
fn ha_line(group: &str, report: &Report) -> String {
    let serving = if report.serving.is_empty() {
        "nothing".to_string()
    } else {
        report.serving.join(", ")
    };
    let mut line = format!("ha group {group}: serving {serving}");
    let leading: Vec<&str> = report
        .shares
        .iter()
        .filter(|s| s.mode == Mode::Member && s.leader)
        .map(|s| s.cluster.as_str())
        .collect();
    if !leading.is_empty() {
        let _ = write!(line, "; leads the group on {}", leading.join(", "));
    }
    for share in &report.shares {
        let what = match share.mode {
            Mode::Member | Mode::Everything => continue,
            Mode::Joining => "joining",
            Mode::Alone => "group unusable (see the log), served alone",
            Mode::Unreachable => "no coordinator answers, served only while down",
        };
        let _ = write!(line, "; {}: {what}", share.cluster);
    }
    line
}

/// Every partition with HW > LSO, longest stuck first, with the transactions that hold
/// it and the groups it blocks: what `/` shows and `/api/v1/stuck` returns.
#[derive(Debug, Serialize)]
pub struct StuckReport<'a> {
    pub partitions: Vec<StuckPartition<'a>>,
    /// Groups whose status is not `ok`: stopped, stalled, rewinding, blocked or lagging
    /// (see docs/metrics.md), or that lost records to retention; those losing or
    /// closest to losing records first.
    pub groups: Vec<GroupProgress<'a>>,
    /// Per cluster, the oldest open transactions the coordinators list, and the latest
    /// fencings.
    pub transactions: Vec<ClusterTransactions<'a>>,
    /// Per cluster, each feature known so far: whether it works and, if not, why.
    pub features: Vec<FeatureReport<'a>>,
    /// Every group whose isolation level is known or that read records of aborted
    /// transactions: mixed groups first, then those that read uncommitted.
    pub isolation: Vec<GroupIsolation<'a>>,
}

/// A group's isolation level, what showed it, and the aborted transactions it read
/// ([`crate::derive::isolation`]).
#[derive(Debug, Serialize)]
pub struct GroupIsolation<'a> {
    pub cluster: &'a str,
    pub group: &'a str,
    /// read_uncommitted, read_committed, mixed (its members disagree) or unknown.
    pub isolation: &'static str,
    /// What showed it, newest first: one per level and member at most.
    pub evidence: Vec<EvidenceReport<'a>>,
    /// Its members as last described, each with the level it was shown to read with.
    pub members: Vec<MemberIsolation<'a>>,
    /// Per topic, the records of aborted transactions it delivered and of how many
    /// transactions (the counters of /metrics).
    pub aborted_records_read: Vec<TopicAbortedRead<'a>>,
    /// The latest aborted transactions it read records of, newest first: what its
    /// downstream must compensate.
    pub aborted_read: Vec<AbortedReadReport<'a>>,
}

/// What showed a group's isolation level.
#[derive(Debug, Serialize)]
pub struct EvidenceReport<'a> {
    /// read_uncommitted: committed past the LSO while it had members (proof);
    /// read_committed: held at a pinned LSO with records above it and live members for a
    /// minute (inference).
    pub isolation: &'static str,
    pub topic: &'a str,
    pub partition: i32,
    pub committed_offset: i64,
    pub last_stable_offset: i64,
    pub high_watermark: i64,
    /// Unix time it was last seen.
    pub seen_at: f64,
    /// The member that owned the partition; `null` where not known.
    pub member: Option<MemberReport<'a>>,
}

/// A member and the isolation level it was shown to read with.
#[derive(Debug, Serialize)]
pub struct MemberIsolation<'a> {
    #[serde(flatten)]
    pub member: MemberReport<'a>,
    /// read_uncommitted, read_committed or unknown.
    pub isolation: &'static str,
}

#[derive(Debug, Serialize)]
pub struct TopicAbortedRead<'a> {
    pub topic: &'a str,
    pub records: u64,
    pub transactions: u64,
}

/// An aborted transaction a group read records of.
#[derive(Debug, Serialize)]
pub struct AbortedReadReport<'a> {
    pub topic: &'a str,
    pub partition: i32,
    /// Empty when the exporter never saw the transaction open.
    pub transactional_id: &'a str,
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Offsets of its first and last record in the partition.
    pub first_offset: i64,
    pub last_offset: i64,
    /// Its records the group delivered.
    pub records: i64,
    /// Every batch of the transaction was read: `records` is exact.
    pub exact: bool,
    /// How `records` relates to the truth: `exact`; `at_most` (the reading began inside
    /// the transaction, and the offsets before it, from where DescribeProducers said it
    /// began, count as records); `at_least` (where it began is not known: only what was
    /// read counts).
    pub bound: &'static str,
    /// Unix time its abort marker was written.
    pub aborted_at: f64,
    /// The member that owned the partition when the group passed them; `null` where not
    /// known.
    pub member: Option<MemberReport<'a>>,
}

fn unix(at: SystemTime) -> f64 {
    at.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

impl<'a> MemberReport<'a> {
    fn seen(m: &'a crate::derive::SeenMember) -> Self {
        MemberReport {
            member_id: &m.member_id,
            client_id: &m.client_id,
            client_host: &m.client_host,
            group_instance_id: m.instance_id.as_deref(),
        }
    }
}

/// The groups of [`StuckReport::isolation`].
fn isolation_reports<'a>(
    clusters: &'a [(String, Option<Arc<ClusterSnapshot>>)],
) -> Vec<GroupIsolation<'a>> {
    use crate::derive::RulerLevel;
    let mut reports = Vec::new();
    for (name, snapshot) in clusters {
        let Some(snapshot) = snapshot else { continue };
        for group in &snapshot.groups {
            let ruler = &group.ruler;
            let read_some = ruler.aborted.iter().any(|(_, r)| r.records > 0);
            if ruler.level == RulerLevel::Unknown && !read_some {
                continue;
            }
            let members = group.detail.as_ref().map_or(Vec::new(), |d| {
                d.members
                    .iter()
                    .enumerate()
                    .map(|(i, m)| MemberIsolation {
                        member: MemberReport::of(m),
                        isolation: ruler.member(i).map_or("unknown", |l| l.as_str()),
                    })
                    .collect()
            });
            reports.push(GroupIsolation {
                cluster: name,
                group: &group.name,
                isolation: ruler.level.as_str(),
                evidence: ruler
                    .evidence
                    .iter()
                    .map(|e| EvidenceReport {
                        isolation: e.isolation.as_str(),
                        topic: &e.topic,
                        partition: e.partition,
                        committed_offset: e.committed_offset,
                        last_stable_offset: e.last_stable_offset,
                        high_watermark: e.high_watermark,
                        seen_at: unix(e.seen_at),
                        member: e.member.as_ref().map(MemberReport::seen),
                    })
                    .collect(),
                members,
                aborted_records_read: ruler
                    .aborted
                    .iter()
                    .map(|(topic, r)| TopicAbortedRead {
                        topic,
                        records: r.records,
                        transactions: r.transactions,
                    })
                    .collect(),
                aborted_read: ruler
                    .aborted_transactions
                    .iter()
                    .map(|t| AbortedReadReport {
                        topic: &t.topic,
                        partition: t.partition,
                        transactional_id: &t.transactional_id,
                        producer_id: t.producer_id,
                        producer_epoch: t.producer_epoch,
                        first_offset: t.first_offset,
                        last_offset: t.last_offset,
                        records: t.records,
                        exact: t.bound == crate::derive::Bound::Exact,
                        bound: t.bound.as_str(),
                        aborted_at: unix(t.aborted_at),
                        member: t.member.as_ref().map(MemberReport::seen),
                    })
                    .collect(),
            });
        }
    }
    let rank = |isolation: &str| match isolation {
        "mixed" => 0,
        "read_uncommitted" => 1,
        "unknown" => 2,
        _ => 3,
    };
    let read = |g: &GroupIsolation| {
        g.aborted_records_read
            .iter()
            .map(|t| t.records)
            .sum::<u64>()
    };
    reports.sort_by(|a, b| {
        rank(a.isolation)
            .cmp(&rank(b.isolation))
            .then(read(b).cmp(&read(a)))
            .then(a.cluster.cmp(b.cluster))
            .then(a.group.cmp(b.group))
    });
    reports
}

/// One feature of one cluster, as the capability map knows it.
#[derive(Debug, Serialize)]
pub struct FeatureReport<'a> {
    pub cluster: &'a str,
    pub feature: &'static str,
    /// ok, denied, unsupported, failed or disabled.
    pub status: &'static str,
    /// Why it does not work, in words to act on; empty when ok.
    pub reason: &'a str,
    /// What it gives.
    pub gives: &'static str,
}

/// A group that needs a look: not committing, going back, blocked or not keeping up.
#[derive(Debug, Serialize)]
pub struct GroupProgress<'a> {
    pub cluster: &'a str,
    pub group: &'a str,
    /// ok, lagging, blocked, rewinding, stalled or stopped: the worst of its partitions;
    /// unknown while no lag of it is known in this cycle.
    pub status: &'static str,
    /// The longest time its committed offset has not moved on a partition where it has
    /// something to read; `null` when no lag is known.
    pub commit_stall_seconds: Option<f64>,
    /// The least time before retention may delete a record it has not consumed (a lower
    /// bound); `null` when no topic retention or record age is known.
    pub retention_margin_seconds: Option<f64>,
    /// Records deleted by retention before it consumed them, over its partitions.
    pub lost_records: i64,
    /// Rebalances counted since the exporter first described it; `null` before that.
    pub rebalances: Option<u64>,
    /// Seconds since the last rebalance counted; `null` until one was.
    pub seconds_since_rebalance: Option<f64>,
    /// Its partitions with something to read, or abandoned, most behind first (at most
    /// [`OWNED_PARTITIONS`]), each with the member that owns it.
    pub partitions: Vec<OwnedPartition<'a>>,
    /// Per topic, how fast it reads and when it will have caught up.
    pub topics: Vec<TopicCatchup<'a>>,
    /// Its members (at most [`OWNED_PARTITIONS`]) with what they own and, in a KIP-848
    /// consumer group or a streams group, the target assignment they reconcile to; those
    /// not reconciled first.
    pub members: Vec<MemberProgress<'a>>,
}

/// A member of a group, what it owns and (KIP-848, streams) what it is to own.
#[derive(Debug, Serialize)]
pub struct MemberProgress<'a> {
    #[serde(flatten)]
    pub member: MemberReport<'a>,
    /// KIP-848, share and streams groups: the member's epoch.
    pub member_epoch: Option<i32>,
    /// KIP-848 and streams groups: the epoch of the group's target assignment; a member
    /// whose epoch is behind it has not acknowledged its new assignment.
    pub assignment_epoch: Option<i64>,
    /// Partitions it owns now; `null` where its assignment cannot be read.
    pub assigned_partitions: Option<usize>,
    /// KIP-848 and streams groups: partitions its target assignment gives it; `null` for
    /// other protocols.
    pub target_partitions: Option<usize>,
    /// It owns exactly its target assignment, at the group's assignment epoch; `null`
    /// where either assignment is not known.
    pub reconciled: Option<bool>,
    /// Partitions of its target it does not own yet (at most [`OWNED_PARTITIONS`]).
    pub pending: Vec<TopicPartition<'a>>,
    /// Partitions it owns that its target no longer gives it: it is to give them up
    /// (at most [`OWNED_PARTITIONS`]); the member stays behind the assignment epoch until
    /// it has let them go.
    pub revoking: Vec<TopicPartition<'a>>,
}

/// How fast a group reads one topic (docs/metrics.md, How fast it closes).
#[derive(Debug, Serialize)]
pub struct TopicCatchup<'a> {
    pub topic: &'a str,
    /// Offsets per second, over the cluster's `groups.rate_window`; `null` until known.
    pub consume_rate: Option<f64>,
    pub produce_rate: Option<f64>,
    /// caught_up, keeps_up, closing, not_closing, waits_for_transaction or unknown.
    pub catchup: &'static str,
    /// Seconds until caught up at these rates, where it is `closing`.
    pub catchup_seconds: Option<f64>,
}

/// At most this many partitions of a group are listed with their owners.
pub const OWNED_PARTITIONS: usize = 100;

/// One partition of a group and who owns it.
#[derive(Debug, Serialize)]
pub struct OwnedPartition<'a> {
    pub topic: &'a str,
    pub partition: i32,
    /// Records it has to read: against the LSO, or the HW where it reads uncommitted (it
    /// committed past the LSO, or was shown to read uncommitted);
    /// `null` when not known in this cycle.
    pub lag: Option<i64>,
    pub commit_stall_seconds: Option<f64>,
    /// It has read all a read_committed consumer may read, and an open transaction
    /// withholds the rest (HW > LSO): it waits for the transaction.
    pub blocked: bool,
    /// Where `blocked`: the records withheld from it (up to the HW).
    pub withheld: Option<i64>,
    /// No member owns it, and its offset has not moved for `groups.abandon_after`.
    pub abandoned: bool,
    /// `owned`, `shared` (several members read it: a share group), `unowned` (no member
    /// owns it), `assigning` (KIP-848, streams: a member's target gives it, no member owns
    /// it yet) or `unknown` (the assignment cannot be read, or the group could not be
    /// described).
    pub ownership: &'static str,
    /// How many members read it, where `shared`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub members: Option<usize>,
    /// The member that owns it; `null` unless `ownership` is `owned`.
    pub owner: Option<MemberReport<'a>>,
    /// KIP-848 and streams groups: the member whose target assignment gives it the
    /// partition, where that is not the member that owns it now (it moves there once
    /// both have reconciled); `null` otherwise.
    pub target_owner: Option<MemberReport<'a>>,
}

/// A member of a group.
#[derive(Debug, Serialize)]
pub struct MemberReport<'a> {
    pub member_id: &'a str,
    pub client_id: &'a str,
    pub client_host: &'a str,
    pub group_instance_id: Option<&'a str>,
}

impl<'a> MemberReport<'a> {
    fn of(m: &'a crate::kafka::RawMember) -> Self {
        MemberReport {
            member_id: &m.member_id,
            client_id: &m.client_id,
            client_host: &m.client_host,
            group_instance_id: m.instance_id.as_deref(),
        }
    }
}

/// An assignment's partitions, sorted.
fn flat(assignment: &crate::kafka::TopicPartitions) -> Vec<(&str, i32)> {
    let mut all: Vec<(&str, i32)> = assignment
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.as_str(), *p)))
        .collect();
    all.sort_unstable();
    all.dedup();
    all
}

/// Of the sorted `a`, those not in the sorted `b`, at most [`OWNED_PARTITIONS`].
fn missing_from<'a>(a: &[(&'a str, i32)], b: &[(&str, i32)]) -> Vec<TopicPartition<'a>> {
    a.iter()
        .filter(|x| b.binary_search(x).is_err())
        .take(OWNED_PARTITIONS)
        .map(|&(topic, partition)| TopicPartition { topic, partition })
        .collect()
}

/// A group's members with their assignments (see [`GroupProgress::members`]).
fn member_progress(group: &crate::derive::GroupState) -> Vec<MemberProgress<'_>> {
    let members = group.detail.as_ref().map_or(&[][..], |d| &d.members[..]);
    let assignment_epoch = group.detail.as_ref().and_then(|d| d.assignment_epoch);
    let mut listed: Vec<MemberProgress> = members
        .iter()
        .map(|m| {
            let assigned = m.assigned.as_ref().map(flat);
            let target = m.target.as_ref().map(flat);
            // As the coordinator judges it: at its target, and at the epoch of the
            // group's assignment. A member that owes partitions stays at its old epoch
            // until it has let them go, whether the answer lists them as its own or
            // leaves them out as pending revocation.
            let current = match (m.member_epoch, assignment_epoch) {
                (Some(member), Some(group)) => i64::from(member) >= group,
                _ => true,
            };
            let (reconciled, pending, revoking) = match (&assigned, &target) {
                (Some(a), Some(t)) => (
                    Some(a == t && current),
                    missing_from(t, a),
                    missing_from(a, t),
                ),
                _ => (None, Vec::new(), Vec::new()),
            };
            MemberProgress {
                member: MemberReport::of(m),
                member_epoch: m.member_epoch,
                assignment_epoch: target.is_some().then_some(assignment_epoch).flatten(),
                assigned_partitions: assigned.as_ref().map(Vec::len),
                target_partitions: target.as_ref().map(Vec::len),
                reconciled,
                pending,
                revoking,
            }
        })
        .collect();
    // Not reconciled first, then by client id: the order a reader scans for.
    listed.sort_by(|a, b| {
        (
            a.reconciled != Some(false),
            a.member.client_id,
            a.member.member_id,
        )
            .cmp(&(
                b.reconciled != Some(false),
                b.member.client_id,
                b.member.member_id,
            ))
    });
    listed.truncate(OWNED_PARTITIONS);
    listed
}

/// A group's partitions to list with their owners (see [`GroupProgress::partitions`]).
fn owned_partitions<'a>(
    group: &'a crate::derive::GroupState,
    partitions: &[crate::derive::PartitionState],
) -> Vec<OwnedPartition<'a>> {
    use crate::derive::Owner;
    let members = group
        .detail
        .as_ref()
        .map(|d| &d.members[..])
        .unwrap_or_default();
    // KIP-848, streams: which member's target names each partition.
    let mut targets: Vec<((&str, i32), usize)> = members
        .iter()
        .enumerate()
        .flat_map(|(i, m)| m.target.iter().flatten().map(move |tp| (tp, i)))
        .flat_map(|((t, ps), i)| ps.iter().map(move |p| ((t.as_str(), *p), i)))
        .collect();
    targets.sort_unstable();
    let mut listed: Vec<OwnedPartition> = group
        .offsets
        .iter()
        .flatten()
        .filter_map(|o| {
            let lag = o.lag.map(|l| {
                if group.reads_uncommitted_at(o) {
                    l.hw_lag
                } else {
                    l.lso_lag
                }
            });
            // Held by an open transaction: nothing left below the LSO, records withheld
            // above it (partitions are sorted by topic and partition).
            let blocked = partitions
                .binary_search_by(|p| (&*p.topic, p.partition).cmp(&(&*o.topic, o.partition)))
                .ok()
                .map(|i| &partitions[i])
                .filter(|p| p.visibility.is_some_and(|v| v.hw_minus_lso > 0))
                .is_some_and(|p| group.waits_at_lso(o, p));
            if !o.abandoned && !blocked && lag.is_none_or(|l| l == 0) {
                return None;
            }
            let members_reading = match o.owner {
                Owner::Shared(n) => Some(n),
                _ => None,
            };
            let target = targets
                .binary_search_by(|(key, _)| key.cmp(&(&*o.topic, o.partition)))
                .ok()
                .map(|i| targets[i].1);
            let target_owner = match (o.owner, target) {
                (Owner::Member(now), Some(then)) if now == then => None,
                (Owner::Member(_) | Owner::Nobody | Owner::Assigning, Some(then)) => {
                    members.get(then).map(MemberReport::of)
                }
                _ => None,
            };
            let (ownership, owner) = match o.owner {
                Owner::Member(i) => ("owned", members.get(i).map(MemberReport::of)),
                Owner::Shared(_) => ("shared", None),
                Owner::Nobody => ("unowned", None),
                Owner::Assigning => ("assigning", None),
                Owner::Unknown => ("unknown", None),
            };
            Some(OwnedPartition {
                topic: &o.topic,
                partition: o.partition,
                lag,
                blocked,
                withheld: o.lag.filter(|_| blocked).map(|l| l.hw_lag),
                commit_stall_seconds: o.commit_stall_seconds,
                abandoned: o.abandoned,
                ownership,
                members: members_reading,
                owner,
                target_owner,
            })
        })
        .collect();
    listed.sort_by_key(|p| std::cmp::Reverse(p.lag.unwrap_or(0).max(p.withheld.unwrap_or(0))));
    listed.truncate(OWNED_PARTITIONS);
    listed
}

/// What the coordinators list of one cluster's open transactions.
#[derive(Debug, Serialize)]
pub struct ClusterTransactions<'a> {
    pub cluster: &'a str,
    /// Every broker answered ListTransactions: the counts are the cluster's.
    pub complete: bool,
    /// Some broker lacks ListTransactions v1 (Kafka before 3.8): the exporter filtered
    /// its transactions by age itself.
    pub filtered_by_exporter: bool,
    /// Open transactions older than `transaction_list_min_age`, by coordinator state.
    pub open: &'a std::collections::BTreeMap<String, u64>,
    /// Of those, the described ones that hold the LSO of no exported partition (a lower
    /// bound: one not described in the cycle is not counted).
    pub unpinning: u64,
    /// Two-phase (KIP-939) transactions; `null` where no broker speaks KIP-939.
    pub prepared: Option<u64>,
    /// The `transaction_list_detail` oldest, oldest first.
    pub oldest: Vec<ListedTransaction<'a>>,
    /// The latest fencings the exporter saw, newest first.
    pub fencings: Vec<FencingReport<'a>>,
}

#[derive(Debug, Serialize)]
pub struct ListedTransaction<'a> {
    pub transactional_id: &'a str,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub state: &'a str,
    /// The id of the broker that coordinates it.
    pub coordinator: i32,
    /// From the coordinator's start time; `null` when it could not be described.
    pub age_seconds: Option<f64>,
    /// Before the coordinator aborts it; `null` when it does not (two-phase, or already
    /// being committed or aborted) or when it could not be described.
    pub timeout_left_seconds: Option<f64>,
    pub timeout_ms: Option<i32>,
    pub partitions: Vec<TopicPartition<'a>>,
    /// It holds (or may hold, where the holder is unknown) the LSO of an exported
    /// partition; `false` as well when it could not be described.
    pub pins_exported_partition: bool,
    pub two_phase: bool,
    pub fencings: u64,
    pub coordinator_moves: u64,
}

#[derive(Debug, Serialize)]
pub struct TopicPartition<'a> {
    pub topic: &'a str,
    pub partition: i32,
}

#[derive(Debug, Serialize)]
pub struct FencingReport<'a> {
    pub transactional_id: &'a str,
    /// The producer whose transaction was fenced.
    pub fenced_producer_id: i64,
    pub fenced_producer_epoch: i16,
    /// The producer that holds the id now, with its new epoch.
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// Unix time of the cycle that saw it.
    pub seen_at: f64,
}

#[derive(Debug, Serialize)]
pub struct StuckPartition<'a> {
    pub cluster: &'a str,
    pub topic: &'a str,
    pub partition: i32,
    pub high_watermark: i64,
    pub last_stable_offset: i64,
    pub hw_minus_lso: i64,
    pub lso_stuck_seconds: f64,
    /// `null` when transaction forensics is off for the cluster or failed this cycle.
    pub transactions: Option<Vec<StuckTransaction<'a>>>,
    /// Age of the record at the LSO, from its timestamp; `null` when it was not read.
    pub withheld_age_seconds: Option<f64>,
    /// Groups that have read everything a read_committed consumer may read here and
    /// have not read past the LSO: held by the transaction. A read_uncommitted group
    /// (committed past the LSO) is never listed.
    pub blocked_groups: Vec<&'a str>,
}

#[derive(Debug, Serialize)]
pub struct StuckTransaction<'a> {
    pub transactional_id: &'a str,
    pub producer_id: i64,
    pub producer_epoch: i32,
    pub start_offset: i64,
    /// The coordinator's state, `null` when no coordinator reported this producer.
    pub state: Option<&'a str>,
    /// `null` when no clock dates the transaction (see `age_clock`).
    pub age_seconds: Option<f64>,
    /// coordinator, log_append_time, first_sight, or for a transaction no coordinator
    /// knows, create_time or last_timestamp (the producer's clock): the clock
    /// `age_seconds` is read from.
    pub age_clock: Option<&'static str>,
    pub timeout_ms: Option<i32>,
    /// open, disagrees, not_found, loading (a coordinator that moved is loading the
    /// transaction log; the transaction cannot end before it has), unavailable (a broker
    /// that may coordinate it could not be asked) or unknown (the lookup failed).
    pub coordinator: &'static str,
    /// The id of the broker coordinating the transaction, `null` when none answered.
    pub coordinator_broker: Option<i32>,
    pub hanging: bool,
    /// Aborts this transaction in this partition (KIP-664); for a hanging transaction,
    /// or one whose producer is gone for good. `null` while its age is unknown: nothing
    /// then says it is not a healthy transaction about to commit.
    pub abort_command: Option<String>,
}

impl<'a> StuckReport<'a> {
    pub fn new(
        clusters: &'a [(String, Option<Arc<ClusterSnapshot>>)],
        bootstrap: &'a HashMap<String, String>,
    ) -> StuckReport<'a> {
        let mut partitions = Vec::new();
        for (name, snapshot) in clusters {
            let Some(snapshot) = snapshot else { continue };
            let servers = bootstrap.get(name).map_or("BOOTSTRAP", String::as_str);
            let mut blocked: HashMap<(&str, i32), Vec<&str>> = HashMap::new();
            let by_partition: HashMap<(&str, i32), &crate::derive::PartitionState> = snapshot
                .partitions
                .iter()
                .map(|p| ((&*p.topic, p.partition), p))
                .collect();
            for group in &snapshot.groups {
                for g in group.offsets.iter().flatten() {
                    let Some(partition) = by_partition.get(&(&*g.topic, g.partition)) else {
                        continue;
                    };
                    if group.waits_at_lso(g, partition) {
                        blocked
                            .entry((&g.topic, g.partition))
                            .or_default()
                            .push(&group.name);
                    }
                }
            }
            for p in &snapshot.partitions {
                let Some(v) = p.visibility.filter(|v| v.hw_minus_lso > 0) else {
                    continue;
                };
                let transactions = p.transactions.as_ref().map(|open| {
                    open.iter()
                        .map(|t| StuckTransaction {
                            transactional_id: &t.transactional_id,
                            producer_id: t.producer_id,
                            producer_epoch: t.producer_epoch,
                            start_offset: t.start_offset,
                            state: t.state.as_deref(),
                            age_seconds: t.age_seconds,
                            age_clock: t.age_clock.map(|c| c.as_str()),
                            timeout_ms: t.timeout_ms,
                            coordinator: t.coordinator.as_str(),
                            coordinator_broker: t.coordinator_broker,
                            hanging: t.hanging,
                            abort_command: t.age_seconds.map(|_| format!(
                                "kafka-transactions.sh --bootstrap-server {servers} abort --topic {} --partition {} --start-offset {}",
                                shell_word(&p.topic),
                                p.partition,
                                t.start_offset
                            )),
                        })
                        .collect()
                });
                partitions.push(StuckPartition {
                    cluster: name,
                    topic: &p.topic,
                    partition: p.partition,
                    high_watermark: p.high_watermark.unwrap_or_default(),
                    last_stable_offset: p.last_stable_offset.unwrap_or_default(),
                    hw_minus_lso: v.hw_minus_lso,
                    lso_stuck_seconds: v.lso_stuck_seconds,
                    withheld_age_seconds: p.withheld_age_seconds,
                    transactions,
                    blocked_groups: blocked
                        .remove(&(&*p.topic, p.partition))
                        .unwrap_or_default(),
                });
            }
        }
        partitions.sort_by(|a, b| {
            b.lso_stuck_seconds
                .total_cmp(&a.lso_stuck_seconds)
                .then(b.hw_minus_lso.cmp(&a.hw_minus_lso))
        });
        let mut groups = Vec::new();
        for (name, snapshot) in clusters {
            let Some(snapshot) = snapshot else { continue };
            for group in &snapshot.groups {
                let offsets = group.offsets.as_deref().unwrap_or_default();
                let lost_records = offsets
                    .iter()
                    .filter_map(|o| o.lost_records)
                    .fold(0i64, i64::saturating_add);
                let ok = group
                    .status
                    .is_none_or(|s| s == crate::derive::progress::GroupStatus::Ok);
                if ok && lost_records == 0 {
                    continue;
                }
                groups.push(GroupProgress {
                    cluster: name,
                    group: &group.name,
                    status: group.status.map_or("unknown", |s| s.as_str()),
                    commit_stall_seconds: offsets
                        .iter()
                        .filter_map(|o| o.commit_stall_seconds)
                        .reduce(f64::max),
                    retention_margin_seconds: offsets
                        .iter()
                        .filter_map(|o| o.retention_margin_seconds)
                        .reduce(f64::min),
                    lost_records,
                    rebalances: group.rebalance.map(|r| r.total),
                    seconds_since_rebalance: group
                        .rebalance
                        .and_then(|r| r.last_at)
                        .and_then(|at| snapshot.taken_at.duration_since(at).ok())
                        .map(|d| d.as_secs_f64()),
                    partitions: owned_partitions(group, &snapshot.partitions),
                    members: member_progress(group),
                    topics: group
                        .rates
                        .iter()
                        .map(|r| TopicCatchup {
                            topic: &r.topic,
                            consume_rate: r.consume_rate,
                            produce_rate: r.produce_rate,
                            catchup: r.catchup.as_str(),
                            catchup_seconds: match r.catchup {
                                crate::derive::Catchup::Seconds(s) => Some(s),
                                _ => None,
                            },
                        })
                        .collect(),
                });
            }
        }
        groups.sort_by(|a, b| {
            b.lost_records
                .cmp(&a.lost_records)
                .then(
                    a.retention_margin_seconds
                        .unwrap_or(f64::INFINITY)
                        .total_cmp(&b.retention_margin_seconds.unwrap_or(f64::INFINITY)),
                )
                .then(
                    b.commit_stall_seconds
                        .unwrap_or(0.0)
                        .total_cmp(&a.commit_stall_seconds.unwrap_or(0.0)),
                )
        });
        let transactions = clusters
            .iter()
            .filter_map(|(name, snapshot)| {
                let view = &snapshot.as_ref()?.transactions;
                let inventory = view.inventory.as_ref()?;
                Some(ClusterTransactions {
                    cluster: name,
                    complete: inventory.complete,
                    filtered_by_exporter: inventory.filtered_here,
                    open: &inventory.by_state,
                    unpinning: inventory.unpinning,
                    prepared: inventory.prepared,
                    oldest: inventory
                        .oldest
                        .iter()
                        .map(|t| ListedTransaction {
                            transactional_id: &t.transactional_id,
                            producer_id: t.producer_id,
                            producer_epoch: t.producer_epoch,
                            state: &t.state,
                            coordinator: t.coordinator,
                            age_seconds: t.age_seconds,
                            timeout_left_seconds: t.timeout_left_seconds,
                            timeout_ms: t.timeout_ms,
                            partitions: t
                                .partitions
                                .iter()
                                .map(|(topic, partition)| TopicPartition {
                                    topic,
                                    partition: *partition,
                                })
                                .collect(),
                            pins_exported_partition: t.pins,
                            two_phase: t.two_phase,
                            fencings: t.fencings,
                            coordinator_moves: t.coordinator_moves,
                        })
                        .collect(),
                    fencings: view
                        .recent_fencings
                        .iter()
                        .map(|f| FencingReport {
                            transactional_id: &f.transactional_id,
                            fenced_producer_id: f.fenced_producer_id,
                            fenced_producer_epoch: f.fenced_epoch,
                            producer_id: f.producer_id,
                            producer_epoch: f.producer_epoch,
                            seen_at: f
                                .at
                                .duration_since(SystemTime::UNIX_EPOCH)
                                .unwrap_or_default()
                                .as_secs_f64(),
                        })
                        .collect(),
                })
            })
            .collect();
        let features = clusters
            .iter()
            .filter_map(|(name, snapshot)| Some((name, snapshot.as_ref()?)))
            .flat_map(|(name, snapshot)| {
                snapshot
                    .known_features()
                    .map(move |(feature, state)| FeatureReport {
                        cluster: name,
                        feature: feature.as_str(),
                        status: state.status.as_str(),
                        reason: &state.reason,
                        gives: feature.gives(),
                    })
            })
            .collect();
        StuckReport {
            partitions,
            transactions,
            groups,
            features,
            isolation: isolation_reports(clusters),
        }
    }
}

/// A topic name as one shell word (Kafka topic names are `[a-zA-Z0-9._-]`, so this
/// only matters for a name that is not).
fn shell_word(text: &str) -> String {
    if text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The `/` page: version, clusters, and every partition with HW > LSO, longest stuck
/// first, with the transactions holding it, the groups it blocks and the abort command.
/// Links are relative (`metrics`, not `/metrics`), so the page works behind a proxy that
/// serves the exporter under a path prefix.
pub fn render_index(
    clusters: &[(String, Option<Arc<ClusterSnapshot>>)],
    bootstrap: &HashMap<String, String>,
    telemetry_path: &str,
    now: SystemTime,
) -> String {
    let mut out = String::with_capacity(8 * 1024);
    out.push_str(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>kafka-lso-exporter</title>\n\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right;vertical-align:top}\
         td.l,th.l{text-align:left}code{font-size:90%}.hang{color:#b00;font-weight:bold}</style></head><body>\n",
    );
    let _ = writeln!(
        out,
        "<h1>kafka-lso-exporter</h1>\n<p>version {} (revision {}) · <a href=\"{}\">metrics</a> · \
         <a href=\"api/v1/stuck\">api/v1/stuck</a> · <a href=\"readyz\">readyz</a></p>",
        escape(crate::VERSION),
        escape(crate::REVISION),
        escape(telemetry_path.trim_start_matches('/'))
    );

    out.push_str("<h2>Clusters</h2>\n<table><tr><th class=\"l\">cluster</th><th>up</th><th>last successful cycle</th><th>partitions</th><th>groups</th><th>partitions with HW &gt; LSO</th></tr>\n");
    for (name, snapshot) in clusters {
        let (up, age, partitions, groups, pinned) = match snapshot {
            Some(s) => (
                if s.up { "yes" } else { "no" },
                s.last_success
                    .map(|at| {
                        format!(
                            "{:.0}s ago",
                            now.duration_since(at).unwrap_or_default().as_secs_f64()
                        )
                    })
                    .unwrap_or_else(|| "never".into()),
                s.partitions.len().to_string(),
                s.groups.len().to_string(),
                s.partitions
                    .iter()
                    .filter(|p| p.visibility.is_some_and(|v| v.hw_minus_lso > 0))
                    .count()
                    .to_string(),
            ),
            None => (
                "starting",
                "never".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ),
        };
        let _ = writeln!(
            out,
            "<tr><td class=\"l\">{}</td><td>{up}</td><td>{age}</td><td>{partitions}</td><td>{groups}</td><td>{pinned}</td></tr>",
            escape(name)
        );
    }
    out.push_str("</table>\n");

    let report = StuckReport::new(clusters, bootstrap);
    // What it cannot see, and why: every feature that does not work, then what does.
    out.push_str("<h2>What it can see</h2>\n");
    let off: Vec<&FeatureReport> = report
        .features
        .iter()
        .filter(|f| f.status != "ok")
        .collect();
    if !off.is_empty() {
        out.push_str("<table><tr><th class=\"l\">cluster</th><th class=\"l\">feature</th><th class=\"l\">status</th><th class=\"l\">what is missing</th><th class=\"l\">why</th></tr>\n");
        for f in &off {
            let _ = writeln!(
                out,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l{}\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
                escape(f.cluster),
                f.feature,
                if f.status == "disabled" { "" } else { " hang" },
                f.status,
                escape(f.gives),
                escape(f.reason)
            );
        }
        out.push_str("</table>\n");
    }
    let unreachable: Vec<&str> = clusters
        .iter()
        .filter(|(_, snapshot)| snapshot.as_ref().is_some_and(|s| !s.up))
        .map(|(name, _)| name.as_str())
        .collect();
    let not_sampled_yet: Vec<&str> = clusters
        .iter()
        .filter(|(_, snapshot)| snapshot.is_none())
        .map(|(name, _)| name.as_str())
        .collect();
    for (name, snapshot) in clusters {
        if snapshot.as_ref().is_some_and(|s| !s.up) {
            let _ = writeln!(
                out,
                "<p>{}: unreachable, so what works is not known now; the table above names any feature known not to work.</p>",
                escape(name)
            );
            continue;
        }
        let working: Vec<&str> = report
            .features
            .iter()
            .filter(|f| f.cluster == name.as_str() && f.status == "ok")
            .map(|f| f.feature)
            .collect();
        if !working.is_empty() {
            let _ = writeln!(
                out,
                "<p>{}: works: {}.</p>",
                escape(name),
                working.join(", ")
            );
        }
    }
    out.push_str("<h2>Partitions withheld by open transactions (HW &gt; LSO)</h2>\n");
    let mut unknown = Vec::new();
    if !unreachable.is_empty() {
        unknown.push(format!("{}: down", unreachable.join(", ")));
    }
    if !not_sampled_yet.is_empty() && not_sampled_yet.len() < clusters.len() {
        unknown.push(format!("{}: not sampled yet", not_sampled_yet.join(", ")));
    }
    // What the groups' sections cannot speak for: clusters down or not sampled yet; and
    // whether they can speak for any cluster at all.
    let reached = clusters.len() - unreachable.len() - not_sampled_yet.len();
    let groups_unknown = if clusters.is_empty() {
        None
    } else if unreachable.len() == clusters.len() {
        Some("Not known: no cluster can be reached.".to_string())
    } else if reached == 0 {
        Some("Not known yet: no cluster has been sampled.".to_string())
    } else {
        (!unknown.is_empty()).then(|| format!("Not known for {}.", unknown.join("; ")))
    };
    // Topics it expects and may not describe: "none" would speak for them too.
    let hidden: Vec<&str> = clusters
        .iter()
        .filter(|(_, snapshot)| {
            snapshot.as_ref().is_some_and(|s| {
                s.up && s
                    .features
                    .get(&crate::kafka::features::Feature::Offsets)
                    .is_some_and(|f| f.status == crate::kafka::features::Status::Denied)
            })
        })
        .map(|(name, _)| name.as_str())
        .collect();
    if !hidden.is_empty() {
        unknown.push(format!(
            "{}: topics an ACL hides from it (see above)",
            hidden.join(", ")
        ));
    }
    if report.partitions.is_empty() && unknown.is_empty() {
        out.push_str(
            "<p>None: every partition's last stable offset equals its high watermark.</p>\n",
        );
    } else if report.partitions.is_empty() && unreachable.len() == clusters.len() {
        out.push_str("<p>Not known: no cluster can be reached.</p>\n");
    } else if report.partitions.is_empty() {
        let _ = writeln!(
            out,
            "<p>None on the clusters it reaches. Not known for {}.</p>",
            escape(&unknown.join("; "))
        );
    } else {
        out.push_str("<table><tr><th class=\"l\">cluster</th><th class=\"l\">topic</th><th>partition</th><th>high watermark</th><th>last stable offset</th><th>HW &minus; LSO</th><th>LSO stuck for</th><th>oldest withheld record</th>\
            <th class=\"l\">transactional.id</th><th>producer id/epoch</th><th class=\"l\">state</th><th class=\"l\">coordinator</th><th>age</th><th class=\"l\">blocked groups</th><th class=\"l\">resolution</th></tr>\n");
        for p in &report.partitions {
            let transactions: &[StuckTransaction] = p.transactions.as_deref().unwrap_or(&[]);
            let rows = transactions.len().max(1);
            let _ = write!(
                out,
                "<tr><td class=\"l\" rowspan=\"{rows}\">{}</td><td class=\"l\" rowspan=\"{rows}\">{}</td><td rowspan=\"{rows}\">{}</td><td rowspan=\"{rows}\">{}</td><td rowspan=\"{rows}\">{}</td><td rowspan=\"{rows}\">{}</td><td rowspan=\"{rows}\">{}</td><td rowspan=\"{rows}\">{}</td>",
                escape(p.cluster),
                escape(p.topic),
                p.partition,
                p.high_watermark,
                p.last_stable_offset,
                p.hw_minus_lso,
                human_duration(p.lso_stuck_seconds),
                p.withheld_age_seconds
                    .map_or("-".to_string(), |age| format!("{} old", human_duration(age)))
            );
            let blocked = if p.blocked_groups.is_empty() {
                "-".to_string()
            } else {
                p.blocked_groups
                    .iter()
                    .map(|g| escape(g))
                    .collect::<Vec<_>>()
                    .join("<br>")
            };
            if transactions.is_empty() {
                let _ = writeln!(
                    out,
                    "<td class=\"l\" colspan=\"5\">{}</td><td class=\"l\">{blocked}</td><td class=\"l\">-</td></tr>",
                    if p.transactions.is_some() {
                        "no open transaction reported"
                    } else {
                        "unknown (transaction forensics off or failed this cycle)"
                    }
                );
                continue;
            }
            for (i, t) in transactions.iter().enumerate() {
                if i > 0 {
                    out.push_str("<tr>");
                }
                let id = match (t.transactional_id.is_empty(), t.coordinator) {
                    (false, _) => escape(t.transactional_id),
                    (true, "not_found") => "<i>not listed by any coordinator</i>".to_string(),
                    (true, "disagrees") => {
                        "<i>its id now belongs to another producer</i>".to_string()
                    }
                    (true, "loading") => {
                        "<i>unknown: its coordinator is loading the transaction log</i>".to_string()
                    }
                    (true, "unavailable") => {
                        "<i>unknown: a broker that may coordinate it is unavailable</i>".to_string()
                    }
                    (true, _) => "<i>unknown: the coordinator lookup failed</i>".to_string(),
                };
                let coordinator = match (t.coordinator, t.coordinator_broker) {
                    ("loading", Some(b)) => format!("broker {b}, loading the transaction log"),
                    ("unavailable", _) => "unavailable".to_string(),
                    (_, Some(b)) => format!("broker {b}"),
                    (_, None) => "-".to_string(),
                };
                let state = match (t.state, t.hanging) {
                    (Some(state), false) => escape(state),
                    (Some(state), true) => {
                        format!("<span class=\"hang\">{} (hanging)</span>", escape(state))
                    }
                    (None, true) => "<span class=\"hang\">hanging</span>".to_string(),
                    (None, false) => "unknown".to_string(),
                };
                let _ = write!(
                    out,
                    "<td class=\"l\">{id}</td><td>{}/{}</td><td class=\"l\">{state}</td><td class=\"l\">{coordinator}</td><td>{}</td>",
                    t.producer_id,
                    t.producer_epoch,
                    t.age_seconds.map_or("unknown".to_string(), human_duration)
                );
                if i == 0 {
                    let _ = write!(out, "<td class=\"l\" rowspan=\"{rows}\">{blocked}</td>");
                }
                let _ = match &t.abort_command {
                    Some(command) => writeln!(
                        out,
                        "<td class=\"l\"><code>{}</code></td></tr>",
                        escape(command)
                    ),
                    None => writeln!(
                        out,
                        "<td class=\"l\">- (age unknown: watch it for a cycle)</td></tr>"
                    ),
                };
            }
        }
        out.push_str("</table>\n");
        out.push_str("<p>The abort command ends a transaction in one partition without its producer; use it for a hanging transaction or one whose producer is gone for good (a live producer would be fenced). Add <code>--command-config</code> for a secured cluster.</p>\n");
    }
    out.push_str("<h2>Consumer groups that are not ok</h2>\n");
    if report.groups.is_empty() {
        match &groups_unknown {
            None => out.push_str("<p>None: every group commits as it reads, or has nothing to read, and has lost nothing to retention.</p>\n"),
            Some(unknown) if reached == 0 => {
                let _ = writeln!(out, "<p>{}</p>", escape(unknown));
            }
            Some(unknown) => {
                let _ = writeln!(
                    out,
                    "<p>None on the clusters it reaches: every group there commits as it reads, or has nothing to read. {}</p>",
                    escape(unknown)
                );
            }
        }
    } else {
        out.push_str("<table><tr><th class=\"l\">cluster</th><th class=\"l\">group</th><th class=\"l\">status</th><th>no commit for</th><th>retention margin</th><th>records lost</th><th>rebalances</th><th class=\"l\">catch-up</th><th class=\"l\">partitions behind or abandoned: owner</th></tr>\n");
        for g in &report.groups {
            let status = match g.status {
                "stopped" | "stalled" => format!("<span class=\"hang\">{}</span>", g.status),
                other => other.to_string(),
            };
            let lost = if g.lost_records > 0 {
                format!("<span class=\"hang\">{}</span>", g.lost_records)
            } else {
                "0".to_string()
            };
            let mut rebalances = match (g.rebalances, g.seconds_since_rebalance) {
                (Some(n), Some(since)) => format!("{n}, last {} ago", human_duration(since)),
                (Some(n), None) => n.to_string(),
                _ => "-".to_string(),
            };
            let reconciling = render_reconciling(&g.members);
            if rebalances == "-" && !reconciling.is_empty() {
                rebalances.clear();
            } else if !reconciling.is_empty() {
                rebalances.push_str("<br>");
            }
            rebalances.push_str(&reconciling);
            let owners = render_owners(&g.partitions);
            let catchup = render_catchup(&g.topics);
            let _ = writeln!(
                out,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{status}</td><td>{}</td><td>{}</td><td>{lost}</td><td>{rebalances}</td><td class=\"l\">{catchup}</td><td class=\"l\">{owners}</td></tr>",
                escape(g.cluster),
                escape(g.group),
                g.commit_stall_seconds.map_or("-".to_string(), human_duration),
                g.retention_margin_seconds.map_or("-".to_string(), |m| if m > 0.0 {
                    format!("at least {}", human_duration(m))
                } else {
                    "none".to_string()
                }),
            );
        }
        out.push_str("</table>\n");
        out.push_str("<p>stopped: something to read, no commit for <code>stall_after</code>, and its lag grows; stalled: the same with the lag not growing; rewinding: its committed offset went back; blocked: it read all a read_committed consumer may read below an open transaction; rebalancing: its members are being reassigned; lagging: it commits, but its lag has only grown for <code>stall_after</code>; abandoned: it has members, none of which owns its partitions, and its offsets have not moved for <code>groups.abandon_after</code>. Each partition behind (or where an open transaction holds the group: what it withholds) names the member that owns it (client id, host), or says no member does, and in a KIP-848 or streams group the member it is moving to; the rebalances cell names the members that have not reached their target assignment yet, with the partitions each is to take and to give up. No commit for: since the committed offset last moved while there was something to read (first seen, since the first record left to read was written). The retention margin is the topic's <code>retention.ms</code> less the age of the first record the group has not consumed.</p>\n");
    }
    render_isolation(&mut out, &report.isolation, groups_unknown.as_deref());
    render_cluster_transactions(&mut out, &report.transactions);
    out.push_str("<p>Stuck times and transaction ages come from broker clocks or the exporter's own; a timestamp the producer wrote dates only a transaction no coordinator knows (a hanging one) that was open before the exporter first looked. Stuck times count from the first cycle that saw the LSO at its current value; after a restart of the exporter, from the coordinator's start time of the transaction at the LSO when forensics is on, or else from the LogAppendTime of the record at the LSO on a LogAppendTime topic, or else, for a transaction no coordinator knows, from the CreateTime of the record at the LSO (the producer's clock). A transaction's age comes from its coordinator's start time, else the oldest of the LogAppendTime of its first record, the first cycle that saw it and, for one no coordinator knows, its first record's CreateTime or its producer's last write; until one applies it is unknown and offers no abort command. The oldest withheld record's age comes from its timestamp in the log (CreateTime: what the producer wrote).</p>\n</body></html>\n");
    out
}

/// What showed a group's isolation level, for one cell of `/`.
fn evidence_cell(g: &GroupIsolation) -> String {
    g.evidence
        .iter()
        .map(|e| {
            let what = if e.isolation == "read_uncommitted" {
                format!(
                    "committed {} past LSO {}",
                    e.committed_offset, e.last_stable_offset
                )
            } else {
                format!("held at LSO {} with records above", e.last_stable_offset)
            };
            format!(
                "{} on {}/{}{}",
                escape(&what),
                escape(e.topic),
                e.partition,
                e.member.as_ref().map_or(String::new(), |m| format!(
                    " by {} on {}",
                    escape(m.client_id),
                    escape(m.client_host)
                ))
            )
        })
        .collect::<Vec<_>>()
        .join("<br>")
}

/// A group's members by the level each was shown to read with, for one cell of `/`.
fn members_cell(g: &GroupIsolation) -> String {
    let side = |level: &str| {
        g.members
            .iter()
            .filter(|m| m.isolation == level)
            .map(|m| {
                format!(
                    "{} on {}",
                    escape(m.member.client_id),
                    escape(m.member.client_host)
                )
            })
            .collect::<Vec<_>>()
    };
    let mut members = Vec::new();
    for (level, words) in [
        ("read_uncommitted", "reads uncommitted"),
        ("read_committed", "reads committed"),
        ("unknown", "not shown yet"),
    ] {
        let names = side(level);
        if !names.is_empty() {
            members.push(format!("{words}: {}", names.join(", ")));
        }
    }
    members.join("<br>")
}

/// The records of aborted transactions a group read: its totals, then the latest
/// transactions, for one cell of `/`.
fn aborted_cell(g: &GroupIsolation) -> String {
    let aborted = g
        .aborted_read
        .iter()
        .map(|t| {
            format!(
                "{}{} record{} of <code>{}</code> (producer {}, epoch {}) at {}/{} offsets {}–{}, aborted {}{}",
                match t.bound {
                    "at_most" => "at most ",
                    "at_least" => "at least ",
                    _ => "",
                },
                t.records,
                if t.records == 1 { "" } else { "s" },
                if t.transactional_id.is_empty() {
                    "a transaction not seen open".to_string()
                } else {
                    escape(t.transactional_id)
                },
                t.producer_id,
                t.producer_epoch,
                escape(t.topic),
                t.partition,
                t.first_offset,
                t.last_offset,
                rfc3339(t.aborted_at),
                t.member.as_ref().map_or(String::new(), |m| format!(
                    ", read by {} on {}",
                    escape(m.client_id),
                    escape(m.client_host)
                ))
            )
        })
        .collect::<Vec<_>>()
        .join("<br>");
    // The totals first (the counters of /metrics), then the latest transactions.
    let totals = g
        .aborted_records_read
        .iter()
        .filter(|t| t.records > 0)
        .map(|t| {
            format!(
                "<b>{} record{} of {} aborted transaction{} on {}</b>",
                t.records,
                if t.records == 1 { "" } else { "s" },
                t.transactions,
                if t.transactions == 1 { "" } else { "s" },
                escape(t.topic)
            )
        })
        .collect::<Vec<_>>()
        .join("<br>");
    let aborted = match (totals.is_empty(), aborted.is_empty()) {
        (true, true) => "none".to_string(),
        (_, true) => totals,
        (true, _) => aborted,
        _ => format!(
            "{totals}<br>the latest (at most {}):<br>{aborted}",
            crate::derive::isolation::RECENT
        ),
    };
    aborted
}

/// The groups that read uncommitted, wholly or in part, with what showed it and the
/// aborted transactions they read; those shown to read committed are counted.
fn render_isolation(out: &mut String, groups: &[GroupIsolation], unknown: Option<&str>) {
    out.push_str("<h2>Isolation: groups that read uncommitted</h2>\n");
    // Those shown to read committed that the table does not list (it lists the ones
    // that read aborted records before they were shown to).
    let committed = groups
        .iter()
        .filter(|g| g.isolation == "read_committed" && g.aborted_read.is_empty())
        .count();
    let listed: Vec<&GroupIsolation> = groups
        .iter()
        .filter(|g| g.isolation != "read_committed" || !g.aborted_read.is_empty())
        .collect();
    if listed.is_empty() {
        let _ = writeln!(
            out,
            "<p>None shown: no group has committed past a last stable offset while it had members. {committed} shown to read committed.{}</p>",
            unknown
                .map(|unknown| format!(" {}", escape(unknown)))
                .unwrap_or_default()
        );
        return;
    }
    out.push_str("<table><tr><th class=\"l\">cluster</th><th class=\"l\">group</th><th class=\"l\">isolation</th><th class=\"l\">shown by</th><th class=\"l\">members</th><th class=\"l\">aborted transactions it read</th></tr>\n");
    for g in listed {
        let _ = writeln!(
            out,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l{}\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            escape(g.cluster),
            escape(g.group),
            if g.isolation == "read_committed" { "" } else { " hang" },
            g.isolation,
            evidence_cell(g),
            members_cell(g),
            aborted_cell(g)
        );
    }
    out.push_str("</table>\n");
    let committed_names: Vec<String> = groups
        .iter()
        .filter(|g| g.isolation == "read_committed" && g.aborted_read.is_empty())
        .take(10)
        .map(|g| escape(g.group))
        .collect();
    let named = if committed_names.is_empty() {
        String::new()
    } else {
        format!(
            " ({}{})",
            committed_names.join(", "),
            if committed > committed_names.len() {
                ", ..."
            } else {
                ""
            }
        )
    };
    let _ = writeln!(
        out,
        "<p>{committed} more shown to read committed{named}. read_uncommitted: the group committed past the last stable offset while it had members; read_committed: it stood at a pinned last stable offset with records above it and live members for a minute; mixed: its members disagree (the Java consumer reads uncommitted by default, librdkafka committed). A group that reads uncommitted delivers records of transactions that are later aborted: its downstream must reconcile them by business key, not by offset. Lag 0 in two groups of different isolation says nothing about whether they read the same records.</p>"
    );
}

/// Unix seconds as an RFC 3339 UTC time, to the second.
fn rfc3339(unix: f64) -> String {
    // humantime fails past the year 9999: such a time is shown as it is.
    if !(0.0..253_402_300_800.0).contains(&unix) {
        return format!("{unix:.0} s after 1970");
    }
    let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs_f64(unix);
    humantime::format_rfc3339_seconds(at).to_string()
}

/// When a group will have caught up, per topic it is not caught up on, for one cell of
/// `/`.
fn render_catchup(topics: &[TopicCatchup]) -> String {
    let mut cell = String::new();
    for t in topics
        .iter()
        .filter(|t| !matches!(t.catchup, "caught_up" | "keeps_up"))
    {
        if !cell.is_empty() {
            cell.push_str("<br>");
        }
        let when = match (t.catchup, t.catchup_seconds) {
            ("closing", Some(s)) => format!("in {}", human_duration(s)),
            ("not_closing", _) if t.consume_rate.is_some_and(|c| c <= 0.0) => {
                "not closing: it reads nothing".to_string()
            }
            ("not_closing", _) => "not closing: it reads no faster than records arrive".to_string(),
            ("waits_for_transaction", _) => "waits for the transaction".to_string(),
            _ => "not known yet".to_string(),
        };
        let _ = write!(cell, "{}: {when}", escape(t.topic));
    }
    if cell.is_empty() {
        cell.push('-');
    }
    cell
}

/// KIP-848 and streams groups: the members that have not reached their target assignment
/// yet, and what they are to take and give up, for the rebalances cell of `/`.
fn render_reconciling(members: &[MemberProgress]) -> String {
    const SHOWN: usize = 5;
    // Those with partitions to take or to give up: a member behind the group's epoch with
    // nothing to move only has its next heartbeat to send.
    let reconciling: Vec<&MemberProgress> = members
        .iter()
        .filter(|m| {
            m.reconciled == Some(false) && (!m.pending.is_empty() || !m.revoking.is_empty())
        })
        .collect();
    if reconciling.is_empty() {
        return String::new();
    }
    let of = members.iter().filter(|m| m.reconciled.is_some()).count();
    let mut cell = format!(
        "{} of {of} members not at their target assignment:",
        reconciling.len()
    );
    let list = |partitions: &[TopicPartition]| {
        partitions
            .iter()
            .map(|p| format!("{}-{}", escape(p.topic), p.partition))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for m in reconciling.iter().take(SHOWN) {
        let _ = write!(
            cell,
            "<br>{} on {}",
            escape(m.member.client_id),
            escape(m.member.client_host)
        );
        if !m.pending.is_empty() {
            let _ = write!(cell, ", to take {}", list(&m.pending));
        }
        if !m.revoking.is_empty() {
            let _ = write!(cell, ", to give up {}", list(&m.revoking));
        }
        if let (Some(member), Some(group)) = (m.member_epoch, m.assignment_epoch) {
            if i64::from(member) < group {
                let _ = write!(
                    cell,
                    ", has not acknowledged its new assignment (epoch {member}, the group's {group})"
                );
            }
        }
    }
    if reconciling.len() > SHOWN {
        let _ = write!(
            cell,
            "<br>and {} more (JSON API)",
            reconciling.len() - SHOWN
        );
    }
    cell
}

/// A group's partitions behind and their owners, for one cell of `/` (the first ten).
fn render_owners(partitions: &[OwnedPartition]) -> String {
    const SHOWN: usize = 10;
    let mut cell = String::new();
    for p in partitions.iter().take(SHOWN) {
        if !cell.is_empty() {
            cell.push_str("<br>");
        }
        let who = match &p.owner {
            Some(m) => format!("{} on {}", escape(m.client_id), escape(m.client_host)),
            None if p.ownership == "unowned" => "no member".to_string(),
            None if p.ownership == "assigning" => "no member yet".to_string(),
            None if p.ownership == "shared" => {
                format!("shared by {} members", p.members.unwrap_or(0))
            }
            None => "owner unknown".to_string(),
        };
        let lag = match (p.blocked, p.withheld, p.lag) {
            (true, Some(w), _) => format!(" (waits for a transaction, {w} withheld)"),
            (_, _, Some(l)) => format!(" ({l} behind)"),
            _ => String::new(),
        };
        let abandoned = if p.abandoned { ", abandoned" } else { "" };
        let moving = p.target_owner.as_ref().map_or(String::new(), |m| {
            format!(
                ", moving to {} on {}",
                escape(m.client_id),
                escape(m.client_host)
            )
        });
        let _ = write!(
            cell,
            "{}-{}{lag}: {who}{moving}{abandoned}",
            escape(p.topic),
            p.partition
        );
    }
    if partitions.len() > SHOWN {
        let _ = write!(cell, "<br>and {} more (JSON API)", partitions.len() - SHOWN);
    }
    if cell.is_empty() {
        cell.push('-');
    }
    cell
}

/// The section of `/` on every open transaction the coordinators list.
fn render_cluster_transactions(out: &mut String, clusters: &[ClusterTransactions]) {
    if clusters.is_empty() {
        return;
    }
    out.push_str("<h2>Oldest open transactions in the cluster (from the coordinators)</h2>\n");
    for c in clusters {
        let counts: Vec<String> = c
            .open
            .iter()
            .map(|(state, n)| format!("{n} {}", escape(state)))
            .collect();
        let _ = writeln!(
            out,
            "<p>{}: {}{}{}{}{}</p>",
            escape(c.cluster),
            if counts.is_empty() {
                "no transaction open for longer than <code>transaction_list_min_age</code>"
                    .to_string()
            } else {
                counts.join(", ")
            },
            if c.complete {
                ""
            } else {
                " (incomplete: a broker did not answer)"
            },
            if counts.is_empty() {
                String::new()
            } else {
                format!(
                    "; of them, at least {} pin no partition shown here",
                    c.unpinning
                )
            },
            c.prepared
                .map_or(String::new(), |n| format!("; {n} two-phase (KIP-939)")),
            if c.fencings.is_empty() {
                String::new()
            } else {
                format!(
                    "; latest open transaction ended by a new producer initialisation (a new instance fenced it, or the application restarted): {} (producer {} epoch {}, now epoch {})",
                    escape(c.fencings[0].transactional_id),
                    c.fencings[0].fenced_producer_id,
                    c.fencings[0].fenced_producer_epoch,
                    c.fencings[0].producer_epoch
                )
            }
        );
        if c.oldest.is_empty() {
            continue;
        }
        out.push_str("<table><tr><th class=\"l\">transactional.id</th><th>producer id/epoch</th><th class=\"l\">state</th><th class=\"l\">coordinator</th><th>age</th><th>time left</th><th class=\"l\">partitions</th><th>fencings or restarts</th><th>coordinator moves</th></tr>\n");
        for t in &c.oldest {
            let partitions = if t.partitions.is_empty() {
                "-".to_string()
            } else {
                t.partitions
                    .iter()
                    .map(|p| format!("{}/{}", escape(p.topic), p.partition))
                    .collect::<Vec<_>>()
                    .join("<br>")
            };
            let left = match (t.timeout_left_seconds, t.two_phase) {
                (_, true) => "never times out (two-phase)".to_string(),
                (Some(left), false) => human_duration(left),
                (None, false) => "unknown".to_string(),
            };
            let _ = writeln!(
                out,
                "<tr><td class=\"l\">{}</td><td>{}/{}</td><td class=\"l\">{}</td><td class=\"l\">broker {}</td><td>{}</td><td>{left}</td><td class=\"l\">{partitions}{}</td><td>{}</td><td>{}</td></tr>",
                escape(t.transactional_id),
                t.producer_id,
                t.producer_epoch,
                escape(t.state),
                t.coordinator,
                t.age_seconds.map_or("unknown".to_string(), human_duration),
                if t.pins_exported_partition || t.timeout_ms.is_none() {
                    ""
                } else {
                    "<br><i>pins no exported partition</i>"
                },
                t.fencings,
                t.coordinator_moves
            );
        }
        out.push_str("</table>\n");
    }
}

fn human_duration(seconds: f64) -> String {
    let s = seconds.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive::{
        AgeClock, CoordinatorStatus, GroupPartitionState, GroupState, OpenTransaction,
        PartitionState, Visibility,
    };

    fn partition(topic: &str, partition: i32, hw: i64, lso: i64, stuck: f64) -> PartitionState {
        PartitionState {
            topic: Arc::from(topic),
            partition,
            log_start_offset: Some(0),
            high_watermark: Some(hw),
            last_stable_offset: Some(lso),
            visibility: Some(Visibility {
                hw_minus_lso: hw - lso,
                lso_stuck_seconds: stuck,
                pinned: hw > lso && stuck > 0.0,
            }),
            withheld_age_seconds: Some(stuck + 1.0),
            transactions: None,
            replication: None,
        }
    }

    fn group(
        name: &str,
        topic: &str,
        partition: i32,
        committed: i64,
        hw: i64,
        lso: i64,
    ) -> GroupState {
        GroupState {
            detail: None,
            rebalance: None,
            rates: Vec::new(),
            ruler: Default::default(),
            coordinator: None,
            name: name.into(),
            state: "Stable".into(),
            members: Some(1),
            group_type: "classic".into(),
            protocol: "consumer".into(),
            isolation: None,
            broker_lags: Vec::new(),
            offsets: Some(vec![GroupPartitionState {
                topic: Arc::from(topic),
                partition,
                committed_offset: committed,
                lag: Some(crate::derive::lag(committed, hw, lso, None).0),
                hw_time_lag: None,
                lso_time_lag: None,
                commit_stall_seconds: None,
                retention_margin: None,
                retention_margin_seconds: None,
                lost_records: None,
                owner: Default::default(),
                abandoned: false,
            }]),
            granularity: Default::default(),
            status: None,
        }
    }

    fn snapshot(
        cluster: &str,
        partitions: Vec<PartitionState>,
        groups: Vec<GroupState>,
    ) -> ClusterSnapshot {
        let now = SystemTime::now();
        ClusterSnapshot {
            clock_skew: None,
            cluster: cluster.into(),
            up: true,
            taken_at: now,
            last_success: Some(now),
            partitions,
            groups,
            series_dropped: 0,
            left_out_groups: Default::default(),
            series: 0,
            eos_cost: Default::default(),
            exposition: Default::default(),
            brokers: Vec::new(),
            retention_ms: Default::default(),
            transactions: Default::default(),
            features: Default::default(),
        }
    }

    #[test]
    fn groups_that_are_not_ok_are_listed_those_losing_records_first() {
        use crate::derive::progress::GroupStatus;
        let with = |name: &str, status: GroupStatus, stall: f64, margin: f64, lost: i64| {
            let mut g = group(name, "orders", 0, 100, 120, 120);
            g.status = Some(status);
            let o = &mut g.offsets.as_mut().unwrap()[0];
            o.commit_stall_seconds = Some(stall);
            o.retention_margin_seconds = Some(margin);
            o.lost_records = Some(lost);
            g
        };
        let groups = vec![
            with("healthy", GroupStatus::Ok, 0.0, 600.0, 0),
            with("stopped <b>", GroupStatus::Stopped, 400.0, 30.0, 0),
            with("lost-some", GroupStatus::Stalled, 900.0, 0.0, 35),
            with("lagging", GroupStatus::Lagging, 0.0, 3000.0, 0),
        ];
        let clusters = [(
            "prod".to_string(),
            Some(Arc::new(snapshot(
                "prod",
                vec![partition("orders", 0, 120, 120, 0.0)],
                groups,
            ))),
        )];
        let bootstrap = HashMap::new();
        let report = StuckReport::new(&clusters, &bootstrap);
        let listed: Vec<(&str, &str, i64)> = report
            .groups
            .iter()
            .map(|g| (g.group, g.status, g.lost_records))
            .collect();
        assert_eq!(
            listed,
            [
                ("lost-some", "stalled", 35),
                ("stopped <b>", "stopped", 0),
                ("lagging", "lagging", 0)
            ]
        );
        let page = render_index(&clusters, &HashMap::new(), "/metrics", SystemTime::now());
        assert!(page.contains("stopped &lt;b&gt;"), "escaped group name");
        assert!(!page.contains(">healthy<"), "an ok group is not listed");
        assert!(page.contains("<td>6m 40s</td><td>at least 30s</td><td>0</td>"));
    }

    /// `/api/v1/stuck` of `clusters`, as JSON.
    fn report_json(clusters: &[(String, Option<Arc<ClusterSnapshot>>)]) -> serde_json::Value {
        let bootstrap = HashMap::new();
        serde_json::to_value(StuckReport::new(clusters, &bootstrap)).unwrap()
    }

    /// The group `name` as the JSON report lists it.
    fn listed_group(json: &serde_json::Value, name: &str) -> serde_json::Value {
        json["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["group"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not listed: {json:#}"))
    }

    /// KIP-848: a partition its owner is to give up names the member it moves to, and
    /// the members not at their target say what each is to take and give up; a member at
    /// its target is reconciled, one of a classic group has no target at all.
    #[test]
    fn a_kip848_group_names_the_partitions_moving_and_who_has_not_reconciled() {
        use crate::derive::progress::GroupStatus;
        use crate::derive::Owner;
        use crate::kafka::{GroupDetail, RawMember};
        let member = |id: &str, assigned: &[i32], target: Option<&[i32]>| RawMember {
            member_id: id.into(),
            client_id: format!("payments-{id}"),
            client_host: format!("/10.0.0.{}", id.len()),
            assigned: Some(vec![("orders".into(), assigned.to_vec())]),
            target: target.map(|t| vec![("orders".into(), t.to_vec())]),
            member_epoch: Some(9),
            ..RawMember::default()
        };
        // a owns 0 and 1 and is to give up 1; bb owns 2 and is to take 1; ccc is done.
        let mut payments = group("payments", "orders", 0, 100, 160, 160);
        payments.status = Some(GroupStatus::Rebalancing);
        let offsets = payments.offsets.as_mut().unwrap();
        offsets[0].partition = 1;
        offsets[0].owner = Owner::Member(0);
        payments.detail = Some(GroupDetail {
            epoch: Some(9),
            assignment_epoch: Some(9),
            members: vec![
                member("a", &[0, 1], Some(&[0])),
                member("bb", &[2], Some(&[1, 2])),
                member("ccc", &[3], Some(&[3])),
            ],
        });
        // Later: a has let partition 1 go and is at its target, its epoch not bumped yet
        // (nothing to move: not listed on `/`); bb takes 1 at its next heartbeat.
        let mut later = group("payments-later", "orders", 0, 100, 160, 160);
        later.status = Some(GroupStatus::Rebalancing);
        let offsets = later.offsets.as_mut().unwrap();
        offsets[0].partition = 1;
        offsets[0].owner = Owner::Assigning;
        let mut behind = member("a", &[0], Some(&[0]));
        behind.member_epoch = Some(8);
        later.detail = Some(GroupDetail {
            epoch: Some(9),
            assignment_epoch: Some(9),
            members: vec![behind, member("bb", &[2], Some(&[1, 2]))],
        });
        let mut classic = group("reports", "orders", 0, 100, 160, 160);
        classic.status = Some(GroupStatus::Stalled);
        classic.offsets.as_mut().unwrap()[0].owner = Owner::Member(0);
        classic.detail = Some(GroupDetail {
            epoch: Some(3),
            assignment_epoch: None,
            members: vec![member("d", &[0], None)],
        });
        let clusters = [(
            "prod".to_string(),
            Some(Arc::new(snapshot(
                "prod",
                vec![
                    partition("orders", 0, 160, 160, 0.0),
                    partition("orders", 1, 160, 160, 0.0),
                ],
                vec![payments, later, classic],
            ))),
        )];
        let json = report_json(&clusters);
        let find = |name: &str| listed_group(&json, name);
        let payments = find("payments");
        let moving = &payments["partitions"][0];
        assert_eq!(moving["partition"], 1);
        assert_eq!(moving["owner"]["member_id"], "a");
        assert_eq!(moving["target_owner"]["member_id"], "bb");
        let members = payments["members"].as_array().unwrap();
        // Not reconciled first.
        let ids: Vec<&str> = members
            .iter()
            .map(|m| m["member_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["a", "bb", "ccc"]);
        assert_eq!(members[0]["reconciled"], false);
        assert_eq!(members[0]["assigned_partitions"], 2);
        assert_eq!(members[0]["target_partitions"], 1);
        assert_eq!(
            members[0]["revoking"],
            serde_json::json!([{"topic": "orders", "partition": 1}])
        );
        assert_eq!(members[0]["pending"], serde_json::json!([]));
        assert_eq!(
            members[1]["pending"],
            serde_json::json!([{"topic": "orders", "partition": 1}])
        );
        assert_eq!(members[2]["reconciled"], true);
        assert_eq!(members[2]["member_epoch"], 9);
        assert_eq!(members[2]["assignment_epoch"], 9);
        let later = find("payments-later");
        let assigning = &later["partitions"][0];
        assert_eq!(assigning["ownership"], "assigning", "{later:#}");
        assert!(assigning["owner"].is_null());
        assert_eq!(assigning["target_owner"]["member_id"], "bb");
        let behind = &later["members"][0];
        assert_eq!(behind["member_id"], "a", "{later:#}");
        assert_eq!(
            behind["reconciled"], false,
            "at its target, behind the epoch"
        );
        assert_eq!(behind["revoking"], serde_json::json!([]));
        let reports = find("reports");
        assert!(reports["partitions"][0]["target_owner"].is_null());
        assert!(reports["members"][0]["reconciled"].is_null());
        assert!(reports["members"][0]["target_partitions"].is_null());
        let page = render_index(&clusters, &HashMap::new(), "/metrics", SystemTime::now());
        assert!(
            page.contains(
                "orders-1 (60 behind): payments-a on /10.0.0.1, moving to payments-bb on /10.0.0.2"
            ),
            "{page}"
        );
        assert!(
            page.contains("2 of 3 members not at their target assignment:"),
            "{page}"
        );
        assert!(
            page.contains("payments-a on /10.0.0.1, to give up orders-1"),
            "{page}"
        );
        assert!(
            page.contains("payments-bb on /10.0.0.2, to take orders-1"),
            "{page}"
        );
        let classic_row = page
            .lines()
            .find(|l| l.contains(">reports<"))
            .expect("the classic group's row");
        assert!(
            classic_row.contains("payments-d on /10.0.0.1"),
            "{classic_row}"
        );
        assert!(!classic_row.contains("moving to"), "{classic_row}");
        assert!(!classic_row.contains("target assignment"), "{classic_row}");
        let later_row = page
            .lines()
            .find(|l| l.contains(">payments-later<"))
            .expect("the row a heartbeat later");
        assert!(
            later_row.contains(
                "orders-1 (60 behind): no member yet, moving to payments-bb on /10.0.0.2"
            ),
            "{later_row}"
        );
        assert!(
            later_row.contains("1 of 2 members not at their target assignment"),
            "{later_row}"
        );
        assert!(
            !later_row.contains("payments-a on /10.0.0.1,"),
            "{later_row}"
        );
        assert!(
            later_row.contains("payments-bb on /10.0.0.2, to take orders-1"),
            "{later_row}"
        );
    }

    /// A group blocked by a transaction lists the partitions it waits on, with what is
    /// withheld from it, not only those it is behind on below the LSO.
    #[test]
    fn a_blocked_group_lists_the_partitions_a_transaction_holds() {
        use crate::derive::progress::GroupStatus;
        let mut held = group("held", "orders", 0, 100, 160, 100);
        held.status = Some(GroupStatus::Blocked);
        let clusters = [(
            "prod".to_string(),
            Some(Arc::new(snapshot(
                "prod",
                vec![partition("orders", 0, 160, 100, 30.0)],
                vec![held],
            ))),
        )];
        let json = report_json(&clusters);
        let p = &listed_group(&json, "held")["partitions"][0];
        assert_eq!(p["partition"], 0, "{json:#}");
        assert_eq!(p["blocked"], true);
        assert_eq!(p["withheld"], 60);
        assert_eq!(p["lag"], 0);
        let page = render_index(&clusters, &HashMap::new(), "/metrics", SystemTime::now());
        assert!(
            page.contains("orders-0 (waits for a transaction, 60 withheld)"),
            "{page}"
        );
    }

    /// A partition a group is behind on names the member that owns it, its client id and
    /// host, on `/` and in the JSON API; one nobody owns says so; the catch-up estimate is
    /// a time where it closes and words where it cannot be one.
    #[test]
    fn a_lagging_partition_names_its_owner_and_when_it_catches_up() {
        use crate::derive::progress::GroupStatus;
        use crate::derive::{Catchup, Owner, TopicRate};
        use crate::kafka::{GroupDetail, RawMember};
        let mut billing = group("billing", "orders", 0, 100, 160, 160);
        billing.status = Some(GroupStatus::Lagging);
        billing.offsets.as_mut().unwrap()[0].owner = Owner::Member(0);
        billing.detail = Some(GroupDetail {
            epoch: Some(4),
            assignment_epoch: None,
            members: vec![RawMember {
                member_id: "m-1".into(),
                client_id: "billing-<1>".into(),
                client_host: "/10.0.0.11".into(),
                assigned: Some(vec![("orders".into(), vec![0])]),
                ..RawMember::default()
            }],
        });
        billing.rates = vec![TopicRate {
            topic: Arc::from("orders"),
            consume_rate: Some(30.0),
            produce_rate: Some(10.0),
            catchup: Catchup::Seconds(3.0),
        }];
        let mut audit = group("audit", "orders", 0, 100, 160, 160);
        audit.status = Some(GroupStatus::Stalled);
        audit.offsets.as_mut().unwrap()[0].owner = Owner::Nobody;
        audit.rates = vec![TopicRate {
            topic: Arc::from("orders"),
            consume_rate: Some(0.0),
            produce_rate: Some(10.0),
            catchup: Catchup::NotClosing,
        }];
        let clusters = [(
            "prod".to_string(),
            Some(Arc::new(snapshot(
                "prod",
                vec![partition("orders", 0, 160, 160, 0.0)],
                vec![billing, audit],
            ))),
        )];
        let json = report_json(&clusters);
        let find = |name: &str| listed_group(&json, name);
        let billing = find("billing");
        assert_eq!(billing["partitions"][0]["lag"], 60);
        assert_eq!(billing["partitions"][0]["ownership"], "owned");
        assert_eq!(
            billing["partitions"][0]["owner"]["client_id"],
            "billing-<1>"
        );
        assert_eq!(
            billing["partitions"][0]["owner"]["client_host"],
            "/10.0.0.11"
        );
        assert_eq!(billing["topics"][0]["catchup"], "closing");
        assert_eq!(billing["topics"][0]["catchup_seconds"], 3.0);
        let audit = find("audit");
        assert_eq!(audit["partitions"][0]["ownership"], "unowned");
        assert!(audit["partitions"][0]["owner"].is_null());
        assert_eq!(audit["topics"][0]["catchup"], "not_closing");
        let page = render_index(&clusters, &HashMap::new(), "/metrics", SystemTime::now());
        assert!(
            page.contains("orders-0 (60 behind): billing-&lt;1&gt; on /10.0.0.11"),
            "{page}"
        );
        assert!(page.contains("orders-0 (60 behind): no member"), "{page}");
        assert!(page.contains("orders: in 3s"), "{page}");
        assert!(page.contains("orders: not closing"), "{page}");
    }

    /// A mixed group on `/` and in the JSON: each member on its side, the totals and
    /// the transaction it read with its range and bound, everything escaped.
    #[test]
    fn a_mixed_group_names_its_members_and_the_aborted_transactions_it_read() {
        use crate::derive::{AbortedRead, AbortedTransactionRead, Bound, Ruler, RulerLevel};
        use crate::kafka::{GroupDetail, Isolation, RawMember};
        let hostile = "<img src=x>";
        let mut g = group("ledger", "orders", 0, 120, 200, 81);
        let member = |id: &str, client: &str| RawMember {
            member_id: id.into(),
            client_id: client.into(),
            client_host: "/10.0.0.7".into(),
            ..Default::default()
        };
        g.detail = Some(GroupDetail {
            epoch: None,
            assignment_epoch: None,
            members: vec![member("a", "java-default"), member("b", hostile)],
        });
        g.ruler = Ruler {
            level: RulerLevel::Mixed,
            members: vec![
                Some(Isolation::ReadUncommitted),
                Some(Isolation::ReadCommitted),
            ],
            aborted: vec![(
                Arc::from("orders"),
                AbortedRead {
                    records: 37,
                    transactions: 1,
                },
            )],
            aborted_transactions: vec![AbortedTransactionRead {
                topic: Arc::from("orders"),
                partition: 0,
                transactional_id: hostile.into(),
                producer_id: 7,
                producer_epoch: 3,
                first_offset: 100,
                last_offset: 146,
                records: 37,
                bound: Bound::AtMost,
                aborted_at: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_790_000_000),
                member: None,
            }],
            ..Default::default()
        };
        let clusters = vec![(
            "prod".to_string(),
            Some(Arc::new(snapshot("prod", vec![], vec![g]))),
        )];
        let page = render_index(&clusters, &HashMap::new(), "/metrics", SystemTime::now());
        assert!(!page.contains(hostile), "unescaped: {page}");
        assert!(
            page.contains("reads uncommitted: java-default on /10.0.0.7"),
            "{page}"
        );
        assert!(
            page.contains("reads committed: &lt;img src=x&gt; on /10.0.0.7"),
            "{page}"
        );
        assert!(
            page.contains("<b>37 records of 1 aborted transaction on orders</b>"),
            "{page}"
        );
        assert!(
            page.contains("at most 37 records of <code>&lt;img src=x&gt;</code> (producer 7, epoch 3) at orders/0 offsets 100–146, aborted 2026-09-21T"),
            "{page}"
        );
        let json = report_json(&clusters);
        let entry = &json["isolation"][0];
        assert_eq!(entry["isolation"], "mixed");
        assert_eq!(entry["members"][1]["isolation"], "read_committed");
        assert_eq!(entry["aborted_read"][0]["bound"], "at_most");
        assert_eq!(entry["aborted_read"][0]["exact"], false);
        assert_eq!(entry["aborted_records_read"][0]["records"], 37);
    }

    #[test]
    fn index_lists_pinned_partitions_longest_stuck_first_and_escapes() {
        let now = SystemTime::now();
        let hostile = "<script>alert('x')</script>&\"";
        let snapshot = snapshot(
            hostile,
            vec![
                partition("orders", 0, 900, 880, 184.0),
                partition("orders", 1, 50, 50, 0.0),
                partition("payments", 3, 120, 100, 4000.0),
            ],
            vec![],
        );
        let page = render_index(
            &[(hostile.to_string(), Some(Arc::new(snapshot)))],
            &HashMap::new(),
            "/metrics",
            now,
        );
        assert!(!page.contains("<script>"), "unescaped: {page}");
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"));
        let payments = page
            .find("payments</td><td rowspan=\"1\">3</td><td rowspan=\"1\">120</td><td rowspan=\"1\">100</td><td rowspan=\"1\">20</td><td rowspan=\"1\">1h 06m</td>")
            .expect("payments row");
        let orders = page
            .find("orders</td><td rowspan=\"1\">0</td><td rowspan=\"1\">900</td><td rowspan=\"1\">880</td><td rowspan=\"1\">20</td><td rowspan=\"1\">3m 04s</td>")
            .expect("orders row");
        assert!(payments < orders, "longest stuck first");
        assert!(
            !page.contains("orders</td><td rowspan=\"1\">1</td>"),
            "HW == LSO is not listed"
        );
        assert!(page.contains("unknown (transaction forensics off or failed this cycle)"));
    }

    #[test]
    fn a_share_group_is_blocked_only_when_it_reads_committed() {
        use crate::kafka::Isolation;
        let share = |name: &str, isolation| GroupState {
            coordinator: None,
            group_type: "share".into(),
            protocol: "share".into(),
            isolation: Some(isolation),
            broker_lags: Vec::new(),
            ..group(name, "orders", 0, 880, 900, 880)
        };
        let groups = vec![
            share("queue-committed", Isolation::ReadCommitted),
            share("queue-uncommitted", Isolation::ReadUncommitted),
        ];
        let clusters = vec![(
            "prod".to_string(),
            Some(Arc::new(snapshot(
                "prod",
                vec![partition("orders", 0, 900, 880, 60.0)],
                groups,
            ))),
        )];
        let bootstrap = HashMap::new();
        let report = StuckReport::new(&clusters, &bootstrap);
        assert_eq!(report.partitions[0].blocked_groups, vec!["queue-committed"]);
    }

    #[test]
    fn stuck_report_names_the_transaction_blocked_groups_and_abort_command() {
        let mut pinned = partition("orders", 0, 900, 880, 184.0);
        pinned.transactions = Some(vec![
            OpenTransaction {
                producer_id: 4001,
                producer_epoch: 7,
                start_offset: 880,
                transactional_id: "etl-<1>".into(),
                state: Some("Ongoing".into()),
                age_seconds: Some(190.0),
                age_clock: Some(AgeClock::Coordinator),
                timeout_ms: Some(60_000),
                coordinator: CoordinatorStatus::Open,
                coordinator_broker: Some(2),
                hanging: true,
            },
            OpenTransaction {
                producer_id: 4002,
                producer_epoch: 0,
                start_offset: 890,
                transactional_id: "etl-2".into(),
                state: Some("Ongoing".into()),
                age_seconds: Some(20.0),
                age_clock: Some(AgeClock::Coordinator),
                timeout_ms: Some(60_000),
                coordinator: CoordinatorStatus::Open,
                coordinator_broker: Some(2),
                hanging: false,
            },
            OpenTransaction {
                producer_id: 4003,
                producer_epoch: 1,
                start_offset: 895,
                transactional_id: String::new(),
                state: None,
                age_seconds: None,
                age_clock: None,
                timeout_ms: None,
                coordinator: CoordinatorStatus::Unknown,
                coordinator_broker: None,
                hanging: false,
            },
        ]);
        let hostile_group = "billing\"<b>\n\\ü";
        let groups = vec![
            group(hostile_group, "orders", 0, 880, 900, 880), // caught up, still behind: blocked
            group("audit", "orders", 0, 900, 900, 880),       // read_uncommitted: not blocked
            group("peek", "orders", 0, 895, 900, 880), // read_uncommitted, behind the HW: not blocked
            group("slow", "orders", 0, 100, 900, 880), // has committed data to read
        ];
        let clusters = vec![(
            "prod".to_string(),
            Some(Arc::new(snapshot("prod", vec![pinned], groups))),
        )];
        let bootstrap: HashMap<String, String> =
            [("prod".to_string(), "kafka-0:9092,kafka-1:9092".to_string())].into();

        let report = StuckReport::new(&clusters, &bootstrap);
        assert_eq!(report.partitions.len(), 1);
        let p = &report.partitions[0];
        assert_eq!(p.blocked_groups, vec![hostile_group]);
        let transactions = p.transactions.as_ref().unwrap();
        assert_eq!(transactions[0].transactional_id, "etl-<1>");
        assert_eq!(
            transactions[0].abort_command.as_deref(),
            Some("kafka-transactions.sh --bootstrap-server kafka-0:9092,kafka-1:9092 abort --topic orders --partition 0 --start-offset 880")
        );
        // No clock dates the third: no abort command for it.
        assert_eq!(transactions[2].abort_command, None);
        let json: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
        assert_eq!(
            json["partitions"][0]["transactions"][1]["producer_id"],
            4002
        );
        assert_eq!(json["partitions"][0]["transactions"][0]["hanging"], true);
        assert_eq!(
            json["partitions"][0]["transactions"][0]["coordinator"],
            "open"
        );
        assert_eq!(
            json["partitions"][0]["transactions"][0]["coordinator_broker"],
            2
        );
        assert!(json["partitions"][0]["transactions"][2]["coordinator_broker"].is_null());
        assert!(json["partitions"][0]["transactions"][2]["age_seconds"].is_null());
        assert!(json["partitions"][0]["transactions"][2]["abort_command"].is_null());
        assert_eq!(
            json["partitions"][0]["transactions"][0]["age_clock"],
            "coordinator"
        );
        assert_eq!(json["partitions"][0]["blocked_groups"][0], hostile_group);

        let page = render_index(&clusters, &bootstrap, "/metrics", SystemTime::now());
        assert!(page.contains("etl-&lt;1&gt;"), "{page}");
        assert!(page.contains("billing&quot;&lt;b&gt;\n\\ü"), "{page}");
        assert!(!page.contains("<b>"), "unescaped group name: {page}");
        assert!(page.contains("<td>4001/7</td><td class=\"l\"><span class=\"hang\">Ongoing (hanging)</span></td><td class=\"l\">broker 2</td><td>3m 10s</td>"));
        assert!(page.contains("<code>kafka-transactions.sh --bootstrap-server kafka-0:9092,kafka-1:9092 abort --topic orders --partition 0 --start-offset 890</code>"));
        assert!(!page.contains("--start-offset 895"), "{page}");
        assert!(
            page.contains(
                "<td>4003/1</td><td class=\"l\">unknown</td><td class=\"l\">-</td><td>unknown</td>"
            ),
            "{page}"
        );
        assert!(!page.contains(">slow<") && !page.contains(">audit<") && !page.contains(">peek<"));
        // An empty id says why it is empty, never that no coordinator knows it when the
        // lookup merely failed.
        assert!(page.contains("<i>unknown: the coordinator lookup failed</i>"));
        assert!(!page.contains("not listed by any coordinator"));
    }

    #[test]
    fn gzip_negotiation() {
        assert!(accepts_gzip("gzip"));
        assert!(accepts_gzip("deflate, gzip;q=1.0, *;q=0.5"));
        assert!(accepts_gzip("*"));
        assert!(!accepts_gzip("identity"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip("br"));
    }

    #[test]
    fn shell_words() {
        assert_eq!(shell_word("orders.v2_x-1"), "orders.v2_x-1");
        assert_eq!(shell_word("a b'c"), "'a b'\\''c'");
    }

    #[test]
    fn index_before_the_first_cycle() {
        let page = render_index(
            &[("prod".to_string(), None)],
            &HashMap::new(),
            "/metrics",
            SystemTime::now(),
        );
        assert!(page.contains("<td class=\"l\">prod</td><td>starting</td>"));
        assert!(page.contains("<a href=\"metrics\">metrics</a>"), "{page}");
        // No all-clear for groups it has not asked about yet.
        assert!(!page.contains("None: every group"), "{page}");
        assert_eq!(
            page.matches("Not known yet: no cluster has been sampled.")
                .count(),
            2,
            "groups and isolation: {page}"
        );
        assert!(page.contains("None: every partition"));
    }

    /// Topics an ACL hides: `/` says so, and no "every partition's LSO equals its HW"
    /// about a cluster whose topics it cannot all see.
    #[test]
    fn topics_an_acl_hides_are_no_none_on_the_page() {
        use crate::kafka::features::{Feature, FeatureState, Status};
        let mut hiding = snapshot("prod", Vec::new(), Vec::new());
        hiding.features = [(
            Feature::Offsets,
            FeatureState::off(
                Status::Denied,
                "Metadata refused by an ACL; grant Describe on the topics: Topic authorization \
                 failed for 1 topic the exporter is to sample, which the brokers leave out of \
                 the metadata it gets: \"orders\" (group \"billing\" reads it)",
            ),
        )]
        .into();
        let clusters = [("prod".to_string(), Some(Arc::new(hiding)))];
        let page = render_index(&clusters, &HashMap::new(), "/metrics", SystemTime::now());
        assert!(!page.contains("None: every partition"), "{page}");
        assert!(
            page.contains("Not known for prod: topics an ACL hides from it (see above)")
                && page.contains("(group &quot;billing&quot; reads it)"),
            "{page}"
        );
    }

    #[test]
    fn a_cluster_that_is_down_vouches_for_nothing_that_worked_before() {
        use crate::kafka::features::{Feature, FeatureState, Status};
        let mut down = snapshot("prod", Vec::new(), Vec::new());
        down.up = false;
        down.features = [
            (Feature::Offsets, FeatureState::ok()),
            (
                Feature::Authentication,
                FeatureState::off(Status::Denied, "the brokers refuse the credentials"),
            ),
        ]
        .into();
        let clusters = [("prod".to_string(), Some(Arc::new(down.clone())))];
        let page = render_index(&clusters, &HashMap::new(), "/metrics", SystemTime::now());
        assert!(
            page.contains("prod: unreachable, so what works is not known now"),
            "{page}"
        );
        assert!(!page.contains("works: offsets"), "{page}");
        assert!(
            page.contains("the brokers refuse the credentials"),
            "{page}"
        );
        assert!(!page.contains("None: every partition"), "{page}");
        assert!(
            page.contains("Not known: no cluster can be reached."),
            "{page}"
        );
        // Nor for its groups: no all-clear for what it could not ask.
        assert!(!page.contains("None: every group"), "{page}");
        assert_eq!(
            page.matches("Not known: no cluster can be reached.")
                .count(),
            3,
            "partitions, groups and isolation: {page}"
        );
        let bootstrap = HashMap::new();
        let report = StuckReport::new(&clusters, &bootstrap);
        let known: Vec<&str> = report.features.iter().map(|f| f.feature).collect();
        assert_eq!(known, ["authentication"]);
        // Up again: what works is vouched for again.
        down.up = true;
        let clusters = [("prod".to_string(), Some(Arc::new(down)))];
        let page = render_index(&clusters, &HashMap::new(), "/metrics", SystemTime::now());
        assert!(page.contains("prod: works: offsets."), "{page}");
    }

    #[test]
    fn cluster_transactions_on_the_page_and_in_the_api_escaped() {
        use crate::derive::inventory::{
            DetailedTransaction, Fencing, TransactionInventory, TransactionsView, WatchCounters,
        };
        let hostile = "<b>etl</b>&\"";
        let mut snapshot = snapshot("prod", Vec::new(), Vec::new());
        snapshot.transactions = TransactionsView {
            inventory: Some(TransactionInventory {
                complete: true,
                filtered_here: false,
                by_state: [("Ongoing".to_string(), 3)].into(),
                unpinning: 2,
                prepared: None,
                oldest: vec![DetailedTransaction {
                    transactional_id: hostile.into(),
                    producer_id: 4001,
                    producer_epoch: 7,
                    state: "Ongoing".into(),
                    coordinator: 2,
                    age_seconds: Some(125.0),
                    timeout_left_seconds: Some(775.0),
                    timeout_ms: Some(900_000),
                    partitions: vec![("<i>orders</i>".into(), 3)],
                    described: true,
                    pins: false,
                    two_phase: false,
                    fencings: 1,
                    coordinator_moves: 2,
                }],
            }),
            counters: vec![WatchCounters {
                transactional_id: hostile.into(),
                fencings: 1,
                coordinator_moves: 2,
            }],
            recent_fencings: vec![Fencing {
                transactional_id: hostile.into(),
                fenced_producer_id: 4001,
                fenced_epoch: 5,
                producer_id: 4001,
                producer_epoch: 7,
                at: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_790_000_000),
            }],
        };
        let clusters = vec![("prod".to_string(), Some(Arc::new(snapshot)))];
        let page = render_index(&clusters, &HashMap::new(), "/metrics", SystemTime::now());
        assert!(
            !page.contains(hostile) && !page.contains("<i>orders</i>"),
            "{page}"
        );
        assert!(page.contains("&lt;b&gt;etl&lt;/b&gt;&amp;&quot;"), "{page}");
        assert!(page.contains("&lt;i&gt;orders&lt;/i&gt;/3"), "{page}");
        assert!(
            page.contains("prod: 3 Ongoing; of them, at least 2 pin no partition shown here"),
            "{page}"
        );
        assert!(page.contains("now epoch 7"), "{page}");
        let bootstrap = HashMap::new();
        let report = StuckReport::new(&clusters, &bootstrap);
        let json = serde_json::to_value(&report).unwrap();
        let t = &json["transactions"][0];
        assert_eq!(t["open"]["Ongoing"], 3);
        assert!(t["prepared"].is_null());
        assert_eq!(t["oldest"][0]["transactional_id"], hostile);
        assert_eq!(t["oldest"][0]["partitions"][0]["partition"], 3);
        assert_eq!(t["oldest"][0]["coordinator_moves"], 2);
        assert_eq!(t["fencings"][0]["fenced_producer_epoch"], 5);
        assert_eq!(t["fencings"][0]["producer_epoch"], 7);
        assert_eq!(json["partitions"], serde_json::json!([]));
    }
}
