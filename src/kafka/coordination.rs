//! Replicas that share the work: every replica with the same `[ha] group` joins one
//! group of Kafka's classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
//! with a protocol type of its own, as Kafka Connect workers do. The broker's group
//! coordinator elects the leader; the leader gives each configured cluster to exactly
//! one member (balanced, sticky: a cluster stays where it is unless the balance needs
//! it elsewhere); every replica samples and serves only the clusters it was given.
//!
//! What a replica may serve is its [`Ownership`], asked before every cycle and every
//! render: a member serves its clusters only while its membership is provably current,
//! i.e. less than one session timeout after the last heartbeat the coordinator
//! accepted. A replica that was frozen (SIGSTOP) or cut off therefore stops serving by
//! itself, before it hears that the group moved on: no series is ever served by two
//! replicas for longer than one cycle of the new owner, and a share is served again
//! within the session timeout plus the new owner's first cycle.
//!
//! A member's metadata and the leader's assignment are versioned JSON ([`Metadata`],
//! [`Assignment`]): fields are only ever added, readers ignore what they do not know.
//! A cluster that two members configure differently is not shared: it goes to the
//! members whose configuration matches the leader's (or most members'), and the others
//! are told which member they differ from. A group that the ACLs deny falls back to
//! serving everything alone, with a warning and a counted fallback; a replica that cannot
//! reach any coordinator serves nothing (it may be the only one cut off).
//!
//! Imported by the scheduler, the exposition and the HTTP side (through [`Ownership`]);
//! imports the wire client and the configuration.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    FindCoordinatorRequest, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::config::HaSettings;
use crate::kafka::wire::{broker_address, Lane, WireClient, WireError};

/// The protocol type of the coordination group: never exported as a consumer group.
pub const PROTOCOL_TYPE: &str = "kafka-lso-exporter";
/// The one assignment strategy members offer.
const PROTOCOL_NAME: &str = "clusters";
/// Version of [`Metadata`] and [`Assignment`]; later versions only add fields.
const VERSION: u32 = 1;
/// The oldest member version that reads this version's assignment as it is meant.
const MIN_VERSION: u32 = 1;
/// A group the ACLs deny is tried again this often.
const DENIED_RETRY: Duration = Duration::from_secs(60);

/// What this replica may serve now.
#[derive(Debug)]
pub struct Ownership {
    /// Every configured cluster, in configuration order.
    clusters: Vec<String>,
    group: Option<String>,
    state: Mutex<State>,
    /// Bumped on every change of what is assigned; the cluster loops wake on it.
    changes: watch::Sender<u64>,
}

#[derive(Debug, Clone)]
struct State {
    mode: Mode,
    assigned: BTreeSet<String>,
    /// A member's assignment holds until then: one session timeout after the last
    /// heartbeat (or join) the coordinator accepted.
    valid_until: Option<Instant>,
    generation: i32,
    leader: bool,
    member_id: String,
    /// Per cluster this member configures differently from the one it was given to.
    refused: BTreeMap<String, String>,
    rebalances: u64,
    fallbacks: u64,
    /// Clusters this member gained in its current generation, served only from
    /// `gained_until` on (see [`HAND_OVER_GRACE`]).
    gained: BTreeSet<String>,
    gained_until: Option<Instant>,
}

/// How long a member waits before it serves a cluster it gained in a rebalance. The
/// member that gives it up learns so from its own SyncGroup answer, which the coordinator
/// sends at the same moment; the wait lets it stop first, so that no series is served by
/// two replicas even for the moment between the two answers being read.
pub const HAND_OVER_GRACE: Duration = Duration::from_secs(1);

/// How this replica decides what to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No `[ha]` section: everything, always.
    Everything,
    /// Not (yet, or no longer) a member: nothing.
    Joining,
    /// A member: its assignment, while the membership is current.
    Member,
    /// The group could not be used (denied, taken by something else): everything.
    Alone,
}

/// What [`Ownership::report`] says, for `/readyz`, `/` and the exporter's own series.
#[derive(Debug, Clone)]
pub struct Report {
    pub group: Option<String>,
    pub mode: Mode,
    pub generation: i32,
    pub leader: bool,
    pub member_id: String,
    pub serving: Vec<String>,
    pub refused: BTreeMap<String, String>,
    pub rebalances: u64,
    pub fallbacks: u64,
}

impl Ownership {
    /// A single replica: serves every cluster.
    pub fn everything(clusters: Vec<String>) -> Arc<Ownership> {
        Arc::new(Ownership::with(clusters, None, Mode::Everything))
    }

    /// A replica of `group`, serving nothing until it has joined.
    pub fn member(clusters: Vec<String>, group: &str) -> Arc<Ownership> {
        Arc::new(Ownership::with(
            clusters,
            Some(group.to_string()),
            Mode::Joining,
        ))
    }

    fn with(clusters: Vec<String>, group: Option<String>, mode: Mode) -> Ownership {
        Ownership {
            clusters,
            group,
            state: Mutex::new(State {
                mode,
                assigned: BTreeSet::new(),
                valid_until: None,
                generation: -1,
                leader: false,
                member_id: String::new(),
                refused: BTreeMap::new(),
                rebalances: 0,
                fallbacks: 0,
                gained: BTreeSet::new(),
                gained_until: None,
            }),
            changes: watch::channel(0).0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this replica samples and serves `cluster` at this moment.
    pub fn serves(&self, cluster: &str) -> bool {
        self.lock().serves(cluster, Instant::now())
    }

    /// The group of `[ha]`, if any.
    pub fn group(&self) -> Option<&str> {
        self.group.as_deref()
    }

    /// Every configured cluster.
    pub fn clusters(&self) -> &[String] {
        &self.clusters
    }

    /// Changes whenever what is served may have changed, including a membership that
    /// ran out: a rendered `/metrics` body is kept only while this stays the same.
    pub fn view(&self) -> (u64, bool) {
        let state = self.lock();
        let current = match state.mode {
            Mode::Member => state.valid_until.is_some_and(|at| Instant::now() < at),
            _ => true,
        };
        (*self.changes.borrow(), current)
    }

    /// Wakes when the assignment changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub fn report(&self) -> Report {
        let state = self.lock();
        let now = Instant::now();
        Report {
            group: self.group.clone(),
            mode: state.mode,
            generation: state.generation,
            leader: state.leader,
            member_id: state.member_id.clone(),
            serving: self
                .clusters
                .iter()
                .filter(|c| state.serves(c, now))
                .cloned()
                .collect(),
            refused: state.refused.clone(),
            rebalances: state.rebalances,
            fallbacks: state.fallbacks,
        }
    }

    /// Applies `change`; wakes the cluster loops when the mode or the assignment moved.
    fn update(&self, change: impl FnOnce(&mut State)) {
        let moved = {
            let mut state = self.lock();
            let before = (state.mode, state.assigned.clone());
            change(&mut state);
            before != (state.mode, state.assigned.clone())
        };
        if moved {
            self.changes.send_modify(|n| *n += 1);
        }
    }

    /// What this member says it serves, for the leader's sticky assignment.
    fn owned(&self) -> (i32, Vec<String>) {
        let state = self.lock();
        match state.mode {
            Mode::Member => (state.generation, state.assigned.iter().cloned().collect()),
            _ => (-1, Vec::new()),
        }
    }
}

impl State {
    fn serves(&self, cluster: &str, now: Instant) -> bool {
        match self.mode {
            Mode::Everything | Mode::Alone => true,
            Mode::Joining => false,
            Mode::Member => {
                self.valid_until.is_some_and(|at| now < at)
                    && self.assigned.contains(cluster)
                    && !(self.gained.contains(cluster)
                        && self.gained_until.is_some_and(|at| now < at))
            }
        }
    }
}

/// A member's metadata in JoinGroup: what it can serve and what it serves now.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Metadata {
    pub version: u32,
    /// The exporter's version, said in the leader's log when it differs.
    #[serde(default)]
    pub exporter: String,
    #[serde(default)]
    pub host: String,
    /// Cluster name -> fingerprint of everything that shapes its series.
    #[serde(default)]
    pub clusters: BTreeMap<String, String>,
    /// The generation in which it was given [`Metadata::owned`].
    #[serde(default)]
    pub generation: i32,
    #[serde(default)]
    pub owned: Vec<String>,
}

/// The leader's answer to one member.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Assignment {
    pub version: u32,
    /// The oldest member version that reads this assignment as it is meant. A leader of a
    /// later version that shares the work differently (what a member of version 1 would
    /// misread) raises it, and an older member then serves nothing rather than serving
    /// twice; a leader that only adds fields leaves it at 1.
    #[serde(default)]
    pub min_version: u32,
    #[serde(default)]
    pub clusters: Vec<String>,
    /// Cluster -> why this member does not get it although it configures it.
    #[serde(default)]
    pub refused: BTreeMap<String, String>,
}

/// The leader's assignment as this member may follow it: one that needs a later version
/// than this one is refused (the member serves nothing) with the reason.
pub fn readable(assignment: Assignment) -> Result<Assignment, String> {
    if assignment.min_version > VERSION {
        return Err(format!(
            "the leader's assignment is of version {} and needs members of version {} or later \
             (this replica reads version {VERSION}): serving nothing until the replicas run one version",
            assignment.version, assignment.min_version
        ));
    }
    Ok(assignment)
}

/// The leader's assignment of every cluster some member configures: to one member
/// whose configuration of it matches the reference (the leader's, or most members'),
/// the one that serves it now if it is still among them and not above its fair share,
/// else the member with the fewest clusters. Pure; `members` is (member id, metadata).
pub fn assign(leader: &str, members: &[(String, Metadata)]) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|(id, _)| {
            (
                id.clone(),
                Assignment {
                    version: VERSION,
                    min_version: MIN_VERSION,
                    ..Assignment::default()
                },
            )
        })
        .collect();
    let names: BTreeSet<&String> = members
        .iter()
        .flat_map(|(_, m)| m.clusters.keys())
        .collect();
    let who = |id: &str| -> String {
        members
            .iter()
            .find(|(m, _)| m == id)
            .map(|(m, meta)| match meta.host.as_str() {
                "" => m.clone(),
                host => format!("{m} (host {host})"),
            })
            .unwrap_or_else(|| id.to_string())
    };
    // Per cluster, the members that may serve it.
    let mut eligible: BTreeMap<&String, Vec<&String>> = BTreeMap::new();
    for name in &names {
        let configured: Vec<(&String, &String)> = members
            .iter()
            .filter_map(|(id, m)| m.clusters.get(*name).map(|f| (id, f)))
            .collect();
        let reference = match configured.iter().find(|(id, _)| id.as_str() == leader) {
            Some((_, f)) => (*f).clone(),
            None => {
                let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
                for (_, f) in &configured {
                    *counts.entry(f).or_default() += 1;
                }
                let best = counts.values().copied().max().unwrap_or(0);
                configured
                    .iter()
                    .find(|(_, f)| counts[f] == best)
                    .map(|(_, f)| (*f).clone())
                    .unwrap_or_default()
            }
        };
        let example = configured
            .iter()
            .find(|(_, f)| **f == reference)
            .map(|(id, _)| who(id))
            .unwrap_or_default();
        let mut ok = Vec::new();
        for (id, f) in configured {
            if *f == reference {
                ok.push(id);
            } else if let Some(a) = out.get_mut(id) {
                a.refused.insert(
                    (*name).clone(),
                    format!("its configuration of cluster {name} (topics, groups, client settings, interval or timeout) differs from that of member {example}"),
                );
            }
        }
        eligible.insert(name, ok);
    }
    let members_with_any = members
        .iter()
        .filter(|(id, _)| eligible.values().any(|ok| ok.contains(&id)))
        .count()
        .max(1);
    let fair = names.len().div_ceil(members_with_any);
    let mut load: BTreeMap<&String, usize> = members.iter().map(|(id, _)| (id, 0)).collect();
    // Sticky first: the newest claim of each cluster, while within the fair share.
    let mut claims: Vec<(&String, &String, i32)> = Vec::new();
    for (id, m) in members {
        for owned in &m.owned {
            claims.push((owned, id, m.generation));
        }
    }
    claims.sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(b.1)));
    let mut given: BTreeMap<&String, &String> = BTreeMap::new();
    for (cluster, id, _) in claims {
        let allowed = eligible.get(cluster).is_some_and(|ok| ok.contains(&id));
        if allowed && !given.contains_key(cluster) && load[id] < fair {
            given.insert(cluster, id);
            *load.get_mut(id).expect("every member has a load") += 1;
        }
    }
    for (name, ok) in &eligible {
        if given.contains_key(name) {
            continue;
        }
        if let Some(id) = ok.iter().min_by_key(|id| (load[**id], (**id).clone())) {
            given.insert(name, id);
            *load.get_mut(*id).expect("every member has a load") += 1;
        }
    }
    for (cluster, id) in given {
        if let Some(a) = out.get_mut(id) {
            a.clusters.push(cluster.clone());
        }
    }
    out
}

/// The fingerprint of what shapes one cluster's series: its settings as written
/// ([`crate::config::ClusterConfig::as_written`]: no defaults, no client property values)
/// and the sampling rhythm.
pub fn fingerprint(parts: &str) -> String {
    // FNV-1a: stable across builds and platforms, which `DefaultHasher` is not promised
    // to be.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Runs this replica's membership until `shutdown`, then leaves the group.
pub struct Coordinator {
    pub ownership: Arc<Ownership>,
    pub wire: Arc<WireClient>,
    pub settings: HaSettings,
    pub bootstrap: Vec<String>,
    /// Cluster name -> fingerprint, for this replica's metadata.
    pub fingerprints: BTreeMap<String, String>,
    /// The bootstrap address asked first: the one after the last that did not answer.
    pub first_address: std::sync::atomic::AtomicUsize,
}

enum Next {
    /// Ask for the coordinator again.
    Rediscover,
    /// Join again (with the member id when it is still good).
    Rejoin,
}

impl Coordinator {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let group = self.settings.group.clone();
        let mut member_id = String::new();
        let mut coordinator: Option<String> = None;
        let mut unreachable_since: Option<Instant> = None;
        loop {
            if *shutdown.borrow() {
                break;
            }
            let step = async {
                let addr = match &coordinator {
                    Some(addr) => addr.clone(),
                    None => self.find_coordinator().await?,
                };
                coordinator = Some(addr.clone());
                self.session(&addr, &mut member_id).await
            };
            let outcome = tokio::select! {
                outcome = step => outcome,
                _ = shutdown.wait_for(|stop| *stop) => break,
            };
            let pause = match outcome {
                Ok(Next::Rejoin) => {
                    unreachable_since = None;
                    Duration::ZERO
                }
                Ok(Next::Rediscover) => {
                    unreachable_since = None;
                    coordinator = None;
                    self.settings
                        .heartbeat_interval
                        .min(Duration::from_millis(500))
                }
                Err(Failure::Denied(reason)) => {
                    tracing::warn!(
                        %group,
                        "cannot use the coordination group: {reason}; this replica serves every cluster alone \
                         (grant Read on the group to share the work)"
                    );
                    self.ownership.update(|s| {
                        if s.mode != Mode::Alone {
                            s.fallbacks += 1;
                        }
                        s.mode = Mode::Alone;
                        s.assigned.clear();
                        s.leader = false;
                    });
                    coordinator = None;
                    DENIED_RETRY
                }
                Err(Failure::Unreachable(reason)) => {
                    coordinator = None;
                    // No fallback to serving alone: a replica cut off from the brokers
                    // while the others are not would serve its clusters twice. Its
                    // membership runs out by itself (see `Ownership::serves`).
                    let since = *unreachable_since.get_or_insert_with(Instant::now);
                    tracing::warn!(%group, unreachable_for = ?since.elapsed(), "coordination group: {reason}; trying again");
                    self.settings.heartbeat_interval
                }
            };
            if !pause.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = shutdown.wait_for(|stop| *stop) => break,
                }
            }
        }
        // Leave at once, so that the others take over without waiting for the session
        // to time out.
        if let (Some(addr), false) = (coordinator, member_id.is_empty()) {
            let mut request = LeaveGroupRequest::default();
            request.group_id = GroupId(StrBytes::from_string(group.clone()));
            // By the members list (v3+, every broker since Kafka 2.4), not the old field.
            let mut identity = MemberIdentity::default();
            identity.member_id = StrBytes::from_string(member_id.clone());
            identity.reason = Some(StrBytes::from_static_str("the replica stops"));
            request.members = vec![identity];
            let deadline = Instant::now() + Duration::from_secs(2);
            match self
                .wire
                .pool
                .send_via(Lane::Coordination, &addr, &request, "LeaveGroup", deadline)
                .await
            {
                Ok(_) => tracing::info!(%group, "left the coordination group"),
                Err(error) => tracing::debug!(%group, "LeaveGroup: {error}"),
            }
        }
        self.ownership.update(|s| {
            s.mode = Mode::Joining;
            s.assigned.clear();
        });
    }

    async fn find_coordinator(&self) -> Result<String, Failure> {
        use std::sync::atomic::Ordering;
        let mut last = String::from("no bootstrap server");
        // A broker that hangs must not hold the lookup for a whole session: the next
        // address gets its turn well within it, and a single address (a load balancer, a
        // name with several addresses behind it) is tried again on a new connection,
        // for at most a session in all.
        let count = self.bootstrap.len();
        let session = self.settings.session_timeout;
        let per_address = self
            .settings
            .heartbeat_interval
            .max(Duration::from_secs(3))
            .min(session);
        let tries =
            count.max(session.as_millis().div_ceil(per_address.as_millis().max(1)) as usize);
        let started = Instant::now();
        let first = self.first_address.load(Ordering::Relaxed);
        for turn in 0..tries {
            if turn >= count && started.elapsed() >= session {
                break;
            }
            let index = (first + turn) % count;
            let addr = &self.bootstrap[index];
            if turn > 0 {
                // The previous address did not answer: start with this one next time.
                self.first_address.store(index, Ordering::Relaxed);
            }
            let deadline = Instant::now() + per_address;
            let version = match self
                .wire
                .pool
                .version_via::<FindCoordinatorRequest>(Lane::Coordination, addr, deadline)
                .await
            {
                Ok(version) => version.unwrap_or(0),
                Err(error) => {
                    last = format!("{addr}: {error}");
                    continue;
                }
            };
            let mut request = FindCoordinatorRequest::default();
            request.key_type = 0;
            if version >= 4 {
                request.coordinator_keys = vec![StrBytes::from_string(self.settings.group.clone())];
            } else {
                request.key = StrBytes::from_string(self.settings.group.clone());
            }
            let answer = match self
                .wire
                .pool
                .send_via(
                    Lane::Coordination,
                    addr,
                    &request,
                    "FindCoordinator",
                    deadline,
                )
                .await
            {
                Ok(answer) => answer,
                Err(error) => {
                    last = format!("{addr}: {error}");
                    continue;
                }
            };
            let (code, host, port) = match answer.coordinators.first() {
                Some(c) => (c.error_code, c.host.to_string(), c.port),
                None => (answer.error_code, answer.host.to_string(), answer.port),
            };
            match ResponseError::try_from_code(code) {
                None => return Ok(broker_address(&host, port)),
                Some(ResponseError::GroupAuthorizationFailed) => {
                    return Err(Failure::Denied(format!(
                        "FindCoordinator: {}",
                        ResponseError::GroupAuthorizationFailed
                    )))
                }
                Some(error) => last = format!("{addr}: FindCoordinator: {error}"),
            }
        }
        Err(Failure::Unreachable(last))
    }

    /// One membership: join, sync, then heartbeats until the group rebalances or the
    /// membership is lost.
    async fn session(&self, addr: &str, member_id: &mut String) -> Result<Next, Failure> {
        let mut heartbeat_to = addr.to_string();
        let group = &self.settings.group;
        let session_timeout = self.settings.session_timeout;
        let (generation, owned) = self.ownership.owned();
        let metadata = Metadata {
            version: VERSION,
            exporter: crate::VERSION.to_string(),
            host: hostname(),
            clusters: self.fingerprints.clone(),
            generation,
            owned,
        };
        let mut request = JoinGroupRequest::default();
        request.group_id = GroupId(StrBytes::from_string(group.clone()));
        request.session_timeout_ms = millis(session_timeout);
        request.rebalance_timeout_ms = millis(session_timeout);
        request.member_id = StrBytes::from_string(member_id.clone());
        request.protocol_type = StrBytes::from_static_str(PROTOCOL_TYPE);
        let mut protocol = JoinGroupRequestProtocol::default();
        protocol.name = StrBytes::from_static_str(PROTOCOL_NAME);
        protocol.metadata = serde_json::to_vec(&metadata).unwrap_or_default().into();
        request.protocols = vec![protocol];
        // JoinGroup waits for the rebalance: up to the rebalance timeout.
        let started = Instant::now();
        let deadline = started + session_timeout * 2 + Duration::from_secs(5);
        let joined = self
            .wire
            .pool
            .send_via(Lane::Coordination, addr, &request, "JoinGroup", deadline)
            .await
            .map_err(unreachable)?;
        match ResponseError::try_from_code(joined.error_code) {
            None => {}
            Some(ResponseError::MemberIdRequired) => {
                *member_id = joined.member_id.to_string();
                return Ok(Next::Rejoin);
            }
            Some(error) => return self.failed("JoinGroup", error, member_id),
        }
        *member_id = joined.member_id.to_string();
        let generation = joined.generation_id;
        let leader = joined.leader.as_str() == member_id.as_str();
        let mut sync = SyncGroupRequest::default();
        sync.group_id = GroupId(StrBytes::from_string(group.clone()));
        sync.generation_id = generation;
        sync.member_id = StrBytes::from_string(member_id.clone());
        sync.protocol_type = Some(StrBytes::from_static_str(PROTOCOL_TYPE));
        sync.protocol_name = Some(StrBytes::from_static_str(PROTOCOL_NAME));
        if leader {
            let members: Vec<(String, Metadata)> = joined
                .members
                .iter()
                .map(|m| {
                    let metadata = serde_json::from_slice::<Metadata>(&m.metadata)
                        .unwrap_or_else(|error| {
                            tracing::warn!(%group, member = %m.member_id, "a member's metadata does not read ({error}): it gets nothing");
                            Metadata::default()
                        });
                    (m.member_id.to_string(), metadata)
                })
                .collect();
            for (id, m) in &members {
                if m.exporter != crate::VERSION {
                    tracing::info!(%group, member = %id, "member runs exporter {} (this leader {})", m.exporter, crate::VERSION);
                }
            }
            let plan = assign(member_id, &members);
            for (id, a) in &plan {
                for (cluster, reason) in &a.refused {
                    tracing::warn!(%group, member = %id, %cluster, "not shared with that member: {reason}");
                }
            }
            tracing::info!(
                %group, generation, members = members.len(),
                "leading the coordination group: {}",
                plan.iter()
                    .map(|(id, a)| format!("{id}=[{}]", a.clusters.join(",")))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            sync.assignments = plan
                .into_iter()
                .map(|(id, a)| {
                    let mut assignment = SyncGroupRequestAssignment::default();
                    assignment.member_id = StrBytes::from_string(id);
                    assignment.assignment = serde_json::to_vec(&a).unwrap_or_default().into();
                    assignment
                })
                .collect();
        }
        // A new generation exists from here on: what this replica served in the previous
        // one may already be another's, so a failed SyncGroup leaves it nothing.
        let syncing = Instant::now();
        let synced = match self
            .wire
            .pool
            .send_via(Lane::Coordination, addr, &sync, "SyncGroup", deadline)
            .await
        {
            Ok(synced) => synced,
            Err(error) => {
                self.drop_assignment();
                return Err(unreachable(error));
            }
        };
        if let Some(error) = ResponseError::try_from_code(synced.error_code) {
            self.drop_assignment();
            return self.failed("SyncGroup", error, member_id);
        }
        let assignment: Assignment = if synced.assignment.is_empty() {
            Assignment::default()
        } else {
            serde_json::from_slice(&synced.assignment).unwrap_or_else(|error| {
                tracing::warn!(%group, "the leader's assignment does not read ({error}): serving nothing");
                Assignment::default()
            })
        };
        let assignment = readable(assignment).unwrap_or_else(|problem| {
            tracing::error!(%group, "{problem}");
            Assignment::default()
        });
        for (cluster, reason) in &assignment.refused {
            tracing::error!(%group, %cluster, "not shared with this replica: {reason}; give every replica the same configuration");
        }
        let mine: BTreeSet<String> = assignment
            .clusters
            .iter()
            .filter(|c| self.fingerprints.contains_key(*c))
            .cloned()
            .collect();
        tracing::info!(
            %group, generation, leader, member = %member_id,
            "serving {} of {} cluster(s){}{}",
            mine.len(),
            self.fingerprints.len(),
            if mine.is_empty() { " (standing by)" } else { ": " },
            mine.iter().cloned().collect::<Vec<_>>().join(", ")
        );
        let id = member_id.clone();
        let synced = Instant::now();
        self.ownership.update(|s| {
            // What it served until now (a current membership's) goes on; what it gains
            // waits for the member that gives it up to stop.
            let served = if s.mode == Mode::Member && s.valid_until.is_some_and(|at| synced < at) {
                s.assigned.clone()
            } else {
                BTreeSet::new()
            };
            s.gained = mine.difference(&served).cloned().collect();
            s.gained_until = (!s.gained.is_empty()).then_some(synced + HAND_OVER_GRACE);
            s.mode = Mode::Member;
            s.assigned = mine;
            s.valid_until = Some(syncing + session_timeout);
            s.generation = generation;
            s.leader = leader;
            s.member_id = id;
            s.refused = assignment.refused.clone();
            s.rebalances += 1;
        });
        // The cluster loops and the rendered bodies learn when the wait is over.
        let ownership = self.ownership.clone();
        tokio::spawn(async move {
            tokio::time::sleep(HAND_OVER_GRACE).await;
            ownership.changes.send_modify(|n| *n += 1);
        });

        // Heartbeats until the group moves on.
        let mut beat = HeartbeatRequest::default();
        beat.group_id = GroupId(StrBytes::from_string(group.clone()));
        beat.generation_id = generation;
        beat.member_id = StrBytes::from_string(member_id.clone());
        loop {
            tokio::time::sleep(self.settings.heartbeat_interval).await;
            let sent = Instant::now();
            let deadline = sent + self.settings.heartbeat_interval.max(Duration::from_secs(1));
            let answer = match self
                .wire
                .pool
                .send_via(
                    Lane::Coordination,
                    &heartbeat_to,
                    &beat,
                    "Heartbeat",
                    deadline,
                )
                .await
            {
                Ok(answer) => answer,
                Err(error) => {
                    tracing::debug!(%group, "Heartbeat: {error}");
                    if self.ownership.view().1 {
                        // The coordinator may have moved (its broker died): ask where
                        // it is now and go on heartbeating in the same generation, which
                        // the new coordinator knows from __consumer_offsets.
                        if let Ok(moved) = self.find_coordinator().await {
                            if moved != heartbeat_to {
                                tracing::info!(%group, from = %heartbeat_to, to = %moved, "the coordination group's coordinator moved");
                                heartbeat_to = moved;
                            }
                        }
                        continue;
                    }
                    // The membership ran out while the coordinator did not answer.
                    self.drop_assignment();
                    return Ok(Next::Rediscover);
                }
            };
            match ResponseError::try_from_code(answer.error_code) {
                None => self.ownership.update(|s| {
                    s.valid_until = Some(sent + session_timeout);
                }),
                Some(ResponseError::RebalanceInProgress) => {
                    // Still a member; keep serving until the new assignment.
                    self.ownership.update(|s| {
                        s.valid_until = Some(sent + session_timeout);
                    });
                    return Ok(Next::Rejoin);
                }
                Some(ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable) => {
                    // Moved: heartbeat the new coordinator in the same generation.
                    if let Ok(moved) = self.find_coordinator().await {
                        heartbeat_to = moved;
                    }
                    if !self.ownership.view().1 {
                        self.drop_assignment();
                        return Ok(Next::Rediscover);
                    }
                }
                Some(error) => return self.failed("Heartbeat", error, member_id),
            }
        }
    }

    fn drop_assignment(&self) {
        self.ownership.update(|s| {
            s.mode = Mode::Joining;
            s.assigned.clear();
            s.valid_until = None;
            s.leader = false;
        });
    }

    fn failed(
        &self,
        api: &str,
        error: ResponseError,
        member_id: &mut String,
    ) -> Result<Next, Failure> {
        let group = &self.settings.group;
        match error {
            ResponseError::GroupAuthorizationFailed => {
                Err(Failure::Denied(format!("{api}: {error}")))
            }
            ResponseError::InconsistentGroupProtocol => Err(Failure::Denied(format!(
                "{api}: {error} (is the group name {group} taken by a consumer group?)"
            ))),
            ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable => {
                tracing::info!(%group, "{api}: {error}: looking for the new coordinator");
                Ok(Next::Rediscover)
            }
            ResponseError::RebalanceInProgress => Ok(Next::Rejoin),
            // The coordinator is still loading the group: ask again after a pause.
            ResponseError::CoordinatorLoadInProgress => Ok(Next::Rediscover),
            ResponseError::UnknownMemberId
            | ResponseError::IllegalGeneration
            | ResponseError::FencedInstanceId => {
                tracing::info!(%group, "{api}: {error}: the group moved on, joining again");
                if error == ResponseError::UnknownMemberId {
                    member_id.clear();
                }
                self.drop_assignment();
                Ok(Next::Rejoin)
            }
            other => {
                tracing::warn!(%group, "{api}: {other}; joining again");
                self.drop_assignment();
                member_id.clear();
                Err(Failure::Unreachable(format!("{api}: {other}")))
            }
        }
    }
}

enum Failure {
    /// The group cannot be used by this replica (ACL, name taken).
    Denied(String),
    /// No coordinator answered.
    Unreachable(String),
}

fn unreachable(error: WireError) -> Failure {
    Failure::Unreachable(error.to_string())
}

fn millis(duration: Duration) -> i32 {
    i32::try_from(duration.as_millis()).unwrap_or(i32::MAX)
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(clusters: &[(&str, &str)], generation: i32, owned: &[&str]) -> Metadata {
        Metadata {
            version: VERSION,
            exporter: crate::VERSION.into(),
            host: String::new(),
            clusters: clusters
                .iter()
                .map(|(n, f)| (n.to_string(), f.to_string()))
                .collect(),
            generation,
            owned: owned.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn served(plan: &BTreeMap<String, Assignment>) -> Vec<String> {
        let mut all: Vec<String> = plan.values().flat_map(|a| a.clusters.clone()).collect();
        all.sort();
        all
    }

    #[test]
    fn every_cluster_goes_to_exactly_one_member_balanced() {
        let all = [("a", "1"), ("b", "1"), ("c", "1"), ("d", "1")];
        let members: Vec<(String, Metadata)> = ["m1", "m2", "m3"]
            .iter()
            .map(|id| (id.to_string(), member(&all, -1, &[])))
            .collect();
        let plan = assign("m1", &members);
        assert_eq!(served(&plan), ["a", "b", "c", "d"]);
        let loads: Vec<usize> = plan.values().map(|a| a.clusters.len()).collect();
        assert_eq!(loads.iter().max(), Some(&2));
        assert_eq!(loads.iter().min(), Some(&1));
    }

    #[test]
    fn a_cluster_stays_with_its_newest_owner() {
        let all = [("a", "1"), ("b", "1")];
        // m2 took over `a` at generation 7 while m1 was frozen; m1 still claims it from 5.
        let members = vec![
            ("m1".to_string(), member(&all, 5, &["a"])),
            ("m2".to_string(), member(&all, 7, &["a", "b"])),
            ("m3".to_string(), member(&all, -1, &[])),
        ];
        let plan = assign("m1", &members);
        assert_eq!(plan["m2"].clusters, ["a"]);
        assert_eq!(served(&plan), ["a", "b"]);
        // One cluster, three members: it does not move.
        let one = [("a", "1")];
        let members = vec![
            ("m1".to_string(), member(&one, -1, &[])),
            ("m2".to_string(), member(&one, 3, &["a"])),
        ];
        assert_eq!(assign("m1", &members)["m2"].clusters, ["a"]);
    }

    #[test]
    fn a_differently_configured_cluster_is_not_shared_and_says_with_whom() {
        let members = vec![
            ("m1".to_string(), member(&[("a", "1")], -1, &[])),
            ("m2".to_string(), member(&[("a", "2")], 4, &["a"])),
        ];
        let plan = assign("m1", &members);
        assert_eq!(plan["m1"].clusters, ["a"]);
        assert!(plan["m2"].clusters.is_empty());
        assert!(
            plan["m2"].refused["a"].contains("differs from that of member m1"),
            "{:?}",
            plan["m2"]
        );
    }

    #[test]
    fn metadata_of_a_newer_version_still_reads() {
        let newer =
            br#"{"version":2,"clusters":{"a":"1"},"generation":3,"owned":["a"],"shards":[1,2]}"#;
        let read: Metadata = serde_json::from_slice(newer).unwrap();
        assert_eq!(read.owned, ["a"]);
        assert_eq!(read.version, 2);
    }

    #[test]
    fn an_assignment_only_a_later_version_reads_is_refused() {
        // A later leader that only adds fields: followed.
        let added: Assignment = serde_json::from_slice(
            br#"{"version":2,"min_version":1,"clusters":["a"],"shards":{"a":[0,1]}}"#,
        )
        .unwrap();
        assert_eq!(readable(added).unwrap().clusters, ["a"]);
        // One of version 1 predates min_version: read as 0, followed.
        let first: Assignment =
            serde_json::from_slice(br#"{"version":1,"clusters":["a"]}"#).unwrap();
        assert_eq!(readable(first).unwrap().clusters, ["a"]);
        // A later leader that shares the work differently: refused, with why.
        let other: Assignment =
            serde_json::from_slice(br#"{"version":3,"min_version":3,"clusters":["a"]}"#).unwrap();
        let refusal = readable(other).unwrap_err();
        assert!(refusal.contains("needs members of version 3"), "{refusal}");
        // This version's leader writes what every version 1 member follows.
        let plan = assign("m1", &[("m1".to_string(), member(&[("a", "1")], -1, &[]))]);
        assert_eq!(plan["m1"].min_version, 1);
    }

    #[test]
    fn an_expired_membership_serves_nothing() {
        let ownership = Ownership::member(vec!["a".into()], "g");
        assert!(!ownership.serves("a"));
        ownership.update(|s| {
            s.mode = Mode::Member;
            s.assigned = ["a".to_string()].into();
            s.valid_until = Some(Instant::now() + Duration::from_secs(60));
        });
        assert!(ownership.serves("a"));
        ownership.update(|s| s.valid_until = Some(Instant::now()));
        assert!(!ownership.serves("a"));
        assert!(!ownership.view().1);
        assert!(Ownership::everything(vec!["a".into()]).serves("a"));
    }

    /// A cluster gained in a rebalance is served only once the member that gave it up
    /// has had HAND_OVER_GRACE to stop; what the member kept is served throughout.
    #[test]
    fn a_gained_cluster_waits_for_the_grace() {
        let ownership = Ownership::member(vec!["a".into(), "b".into()], "g");
        let now = Instant::now();
        ownership.update(|s| {
            s.mode = Mode::Member;
            s.assigned = ["a".to_string(), "b".to_string()].into();
            s.valid_until = Some(now + Duration::from_secs(60));
            s.gained = ["b".to_string()].into();
            s.gained_until = Some(now + HAND_OVER_GRACE);
        });
        let state = ownership.lock().clone();
        assert!(state.serves("a", now));
        assert!(!state.serves("b", now));
        assert!(!state.serves("b", now + HAND_OVER_GRACE / 2));
        assert!(state.serves("b", now + HAND_OVER_GRACE));
    }
}
