//! Replicas that share the work: every replica with the same `[ha] group` joins, on each
//! configured cluster, a group of that name in Kafka's classic group protocol (JoinGroup,
//! SyncGroup, Heartbeat, LeaveGroup) with a protocol type of its own, as Kafka Connect
//! workers do. Each cluster's group decides who serves that cluster: its coordinator (a
//! broker of that cluster) elects a leader, which gives the cluster to exactly one member
//! (sticky, and balanced across the replicas by the loads the members report). A cluster
//! is coordinated on itself, so a cluster that is down can only hide itself: the others
//! go on being served.
//!
//! What a replica may serve is its [`Ownership`], asked before every cycle and every
//! render: a member serves its cluster only while its membership is provably current,
//! i.e. less than one session timeout after the last heartbeat the coordinator accepted.
//! A replica that was frozen (SIGSTOP) or cut off therefore stops serving by itself,
//! before it hears that the group moved on: no series is ever served by two replicas for
//! longer than one cycle of the new owner, and a share is served again within the session
//! timeout plus the new owner's first cycle. Once a JoinGroup is sent, every failure
//! before the new assignment arrives lets the cluster go at once (the generation may have
//! completed without this replica); a heartbeat that only did not arrive keeps it until
//! the membership runs out.
//!
//! A cluster whose group cannot be reached at all (its brokers down, or this replica cut
//! off from them) is sampled by every replica that cannot reach it, and served only while
//! the replica cannot reach the cluster either ([`Serving::IfDown`]): `up 0`, so that the
//! cluster that is down says so, and never a second copy of the series of a cluster some
//! other replica serves.
//!
//! A member's metadata and the leader's assignment are versioned JSON ([`Metadata`],
//! [`Assignment`]): fields are only ever added, readers ignore what they do not know.
//! A cluster that two members configure differently is not shared: it goes to the
//! members whose configuration matches the leader's (or most members'), and the others
//! are told which member they differ from. A group that the ACLs deny falls back to
//! serving its cluster alone, with a warning and a counted fallback.
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
    FindCoordinatorRequest, GroupId, HeartbeatRequest, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, SyncGroupRequest,
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
/// Version 2: one group per cluster, on that cluster.
const VERSION: u32 = 2;
/// The oldest member version that reads this version's assignment as it is meant: a
/// member of version 1 would take the one cluster of a group for its whole share.
const MIN_VERSION: u32 = 2;
/// A group the ACLs deny is tried again this often.
const DENIED_RETRY: Duration = Duration::from_secs(60);

/// How long a member waits before it serves a cluster it gained in a rebalance. The
/// member that gives it up learns so from its own SyncGroup answer, which the coordinator
/// sends at the same moment; the wait lets it stop first, so that no series is served by
/// two replicas even for the moment between the two answers being read.
pub const HAND_OVER_GRACE: Duration = Duration::from_secs(1);

/// What this replica may serve now, per cluster.
#[derive(Debug)]
pub struct Ownership {
    /// Every configured cluster, in configuration order.
    clusters: Vec<String>,
    group: Option<String>,
    /// This replica's identity in every group's metadata: the members one replica has
    /// in the groups of several clusters count as one when the leaders balance.
    replica: String,
    shares: Mutex<BTreeMap<String, Share>>,
    /// Bumped on every change of what is served; the cluster loops wake on it.
    changes: watch::Sender<u64>,
}

/// This replica's place in one cluster's group.
#[derive(Debug, Clone)]
struct Share {
    mode: Mode,
    /// The leader gave this replica the cluster in `generation`.
    assigned: bool,
    /// The assignment holds until then: one session timeout after the last heartbeat (or
    /// join) the coordinator accepted.
    valid_until: Option<Instant>,
    generation: i32,
    leader: bool,
    member_id: String,
    /// Why the leader did not give it this replica although it configures it.
    refused: Option<String>,
    rebalances: u64,
    fallbacks: u64,
    /// A cluster gained in this generation is served only from then on (see
    /// [`HAND_OVER_GRACE`]).
    gained_until: Option<Instant>,
    /// The generation in which the leader last gave this replica the cluster, kept when
    /// the replica lets it go on a failure: its next JoinGroup claims it, and the
    /// newest claim wins (a collision gives the cluster back to where it was).
    claim: Option<i32>,
    /// The group's leader runs a version before one group per cluster (a rolling
    /// upgrade): it shares every cluster through this one group, so this replica serves
    /// nothing anywhere until the rollout ends, rather than twice beside the old ones.
    legacy_leader: bool,
}

/// How this replica decides whether to serve a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No `[ha]` section: everything, always.
    Everything,
    /// Not (yet, or no longer) a member: nothing.
    Joining,
    /// A member: its assignment, while the membership is current.
    Member,
    /// The group could not be used (denied, taken by something else, or the cluster's
    /// settings are ones only librdkafka speaks): served alone.
    Alone,
    /// No coordinator of the cluster's group answers: served only while the cluster
    /// cannot be reached either.
    Unreachable,
}

/// Whether a cluster's loop samples it and publishes what it sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serving {
    /// Sampled and served.
    Yes,
    /// Another replica's, or nobody's yet.
    No,
    /// Sampled; served only when the cycle could not reach the cluster (`up 0`).
    IfDown,
}

/// One cluster's line in [`Report`].
#[derive(Debug, Clone)]
pub struct ShareReport {
    pub cluster: String,
    pub mode: Mode,
    pub generation: i32,
    pub leader: bool,
    pub member_id: String,
}

/// What [`Ownership::report`] says, for `/readyz`, `/` and the exporter's own series.
#[derive(Debug, Clone)]
pub struct Report {
    pub group: Option<String>,
    /// The clusters served in full (not those served only while down).
    pub serving: Vec<String>,
    pub refused: BTreeMap<String, String>,
    pub rebalances: u64,
    pub fallbacks: u64,
    /// Per configured cluster, in configuration order.
    pub shares: Vec<ShareReport>,
}

impl Report {
    /// The cluster's mode in this replica.
    pub fn mode(&self, cluster: &str) -> Option<Mode> {
        self.shares
            .iter()
            .find(|s| s.cluster == cluster)
            .map(|s| s.mode)
    }
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
        let share = Share {
            mode,
            assigned: false,
            valid_until: None,
            generation: -1,
            leader: false,
            member_id: String::new(),
            refused: None,
            rebalances: 0,
            fallbacks: 0,
            gained_until: None,
            claim: None,
            legacy_leader: false,
        };
        let replica = format!(
            "{}/{}/{:x}",
            hostname(),
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        );
        Ownership {
            shares: Mutex::new(
                clusters
                    .iter()
                    .map(|c| (c.clone(), share.clone()))
                    .collect(),
            ),
            clusters,
            group,
            replica,
            changes: watch::channel(0).0,
        }
    }

    /// `cluster` cannot be coordinated (`reason`): this replica serves it alone.
    pub fn alone(&self, cluster: &str, reason: &str) {
        if let Some(group) = &self.group {
            tracing::warn!(%group, %cluster, "this replica serves the cluster alone, every replica does: {reason}");
        }
        self.update(cluster, |s| {
            s.mode = Mode::Alone;
            s.fallbacks += 1;
        });
    }

    /// Whether a group of this replica has a leader of version 1 ([`Share::legacy_leader`]).
    fn beside_old_leader(&self) -> bool {
        self.lock().values().any(|s| s.legacy_leader)
    }

    /// For the scheduler's tests: this replica holds `cluster` (a current membership) or
    /// not; `bump` wakes the loops even when nothing of the cluster changed (another
    /// cluster's rebalance).
    #[cfg(test)]
    pub(crate) fn hold_for_test(&self, cluster: &str, held: bool, bump: bool) {
        self.update(cluster, |s| {
            s.mode = Mode::Member;
            s.assigned = held;
            s.valid_until = Some(Instant::now() + Duration::from_secs(600));
        });
        if bump {
            self.changes.send_modify(|n| *n += 1);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Share>> {
        self.shares.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether this replica samples and publishes `cluster` at this moment.
    pub fn serving(&self, cluster: &str) -> Serving {
        if self.group.is_none() {
            return Serving::Yes;
        }
        let now = Instant::now();
        let shares = self.lock();
        let legacy = shares.values().any(|s| s.legacy_leader);
        shares
            .get(cluster)
            .map_or(Serving::No, |s| s.serving(now, legacy))
    }

    /// Whether what this replica published of `cluster` may be served now (in full, or
    /// as a cluster that is down).
    pub fn serves(&self, cluster: &str) -> bool {
        self.serving(cluster) != Serving::No
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
        let now = Instant::now();
        let current = self.lock().values().all(|s| match s.mode {
            Mode::Member if s.assigned => s.valid_until.is_some_and(|at| now < at),
            _ => true,
        });
        (*self.changes.borrow(), current)
    }

    /// Wakes when the assignment changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    pub fn report(&self) -> Report {
        let shares = self.lock();
        let now = Instant::now();
        let mut report = Report {
            group: self.group.clone(),
            serving: Vec::new(),
            refused: BTreeMap::new(),
            rebalances: 0,
            fallbacks: 0,
            shares: Vec::new(),
        };
        let legacy = shares.values().any(|s| s.legacy_leader);
        for cluster in &self.clusters {
            let Some(share) = shares.get(cluster) else {
                continue;
            };
            if share.serving(now, legacy) == Serving::Yes {
                report.serving.push(cluster.clone());
            }
            if let Some(reason) = &share.refused {
                report.refused.insert(cluster.clone(), reason.clone());
            }
            report.rebalances += share.rebalances;
            report.fallbacks += share.fallbacks;
            report.shares.push(ShareReport {
                cluster: cluster.clone(),
                mode: share.mode,
                generation: share.generation,
                leader: share.leader,
                member_id: share.member_id.clone(),
            });
        }
        report
    }

    /// Applies `change` to `cluster`'s share; wakes the cluster loops when its mode or
    /// its assignment moved.
    fn update(&self, cluster: &str, change: impl FnOnce(&mut Share)) {
        let moved = {
            let mut shares = self.lock();
            let Some(share) = shares.get_mut(cluster) else {
                return;
            };
            let before = (share.mode, share.assigned);
            change(share);
            before != (share.mode, share.assigned)
        };
        if moved {
            self.changes.send_modify(|n| *n += 1);
        }
    }

    /// What this replica says in `cluster`'s group: the generation in which it was last
    /// given the cluster (-1: never, or given to another since), and the other clusters it
    /// holds (served, waiting out the grace, or let go on a failure and claimed back).
    fn claims(&self, cluster: &str) -> (i32, Vec<String>) {
        let shares = self.lock();
        let now = Instant::now();
        let legacy = shares.values().any(|s| s.legacy_leader);
        let held = shares
            .iter()
            .filter(|(name, s)| {
                name.as_str() != cluster
                    && (s.serving(now, legacy) == Serving::Yes || s.claim.is_some())
            })
            .map(|(name, _)| name.clone())
            .collect();
        let claim = shares.get(cluster).and_then(|s| s.claim).unwrap_or(-1);
        (claim, held)
    }
}

impl Share {
    /// `legacy`: some group of this replica has a leader of a version before one group
    /// per cluster ([`Share::legacy_leader`]).
    fn serving(&self, now: Instant, legacy: bool) -> Serving {
        match self.mode {
            Mode::Everything | Mode::Alone => Serving::Yes,
            Mode::Joining => Serving::No,
            Mode::Unreachable => Serving::IfDown,
            Mode::Member if legacy => Serving::No,
            Mode::Member => {
                let current = self.valid_until.is_some_and(|at| now < at);
                let waiting = self.gained_until.is_some_and(|at| now < at);
                if current && self.assigned && !waiting {
                    Serving::Yes
                } else {
                    Serving::No
                }
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
    /// Cluster name -> fingerprint of everything that shapes its series: since version
    /// 2 the one cluster the member coordinates through this group.
    #[serde(default)]
    pub clusters: BTreeMap<String, String>,
    /// The generation in which it was given [`Metadata::owned`].
    #[serde(default)]
    pub generation: i32,
    #[serde(default)]
    pub owned: Vec<String>,
    /// The replica the member belongs to (version 2): one replica has a member in the
    /// group of each of its clusters, and two where two configured clusters share
    /// their brokers.
    #[serde(default)]
    pub replica: String,
    /// Which clusters the replica holds through its other groups (version 2): a replica
    /// above its fair share keeps the ones of the lowest hash of cluster and replica, so
    /// that the groups of its clusters, deciding at once, give up the same ones.
    #[serde(default)]
    pub held: Vec<String>,
    /// How many clusters the replica's configuration names (version 2).
    #[serde(default)]
    pub configured: u32,
}

/// The leader's answer to one member.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Assignment {
    pub version: u32,
    /// The oldest member version that reads this assignment as it is meant. A leader of a
    /// later version that shares the work differently (what an older member would
    /// misread) raises it, and an older member then serves nothing rather than serving
    /// twice; a leader that only adds fields leaves it as it is.
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

/// The leader's assignment of every cluster some member names: to one member whose
/// configuration of it matches the reference (the leader's, or most members'); the one
/// that serves it now if it is still among them and its replica is not above its fair
/// share (the configured clusters over the replicas), else the member whose replica
/// serves the fewest clusters, ties spread by a hash of the cluster and the replica (so
/// that the groups of several clusters, deciding at once, do not all pick one replica).
/// Pure; `members` is (member id, metadata).
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
    // One replica may have several members here; loads count by replica.
    let replica_of: BTreeMap<&String, &str> = members
        .iter()
        .map(|(id, m)| {
            (
                id,
                if m.replica.is_empty() {
                    id.as_str()
                } else {
                    m.replica.as_str()
                },
            )
        })
        .collect();
    let replicas: BTreeSet<&str> = members
        .iter()
        .filter(|(id, _)| eligible.values().any(|ok| ok.contains(&id)))
        .map(|(id, _)| replica_of[id])
        .collect();
    let configured = members
        .iter()
        .map(|(_, m)| m.configured as usize)
        .max()
        .unwrap_or(0)
        .max(names.len());
    let fair = configured.div_ceil(replicas.len().max(1));
    let rank_key = |cluster: &str, replica: &str| fingerprint(&format!("{cluster}\u{0}{replica}"));
    // What each replica holds elsewhere (the clusters of this group left out: they are
    // decided here), and what it claims here.
    let mut held: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (id, m) in members {
        let set = held.entry(replica_of[id]).or_default();
        set.extend(m.held.iter().filter(|c| !names.contains(c)).cloned());
    }
    let mut claims: Vec<(&String, &String, i32)> = Vec::new();
    for (id, m) in members {
        for owned in &m.owned {
            claims.push((owned, id, m.generation));
        }
    }
    claims.sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(b.1)));
    let mut given: BTreeMap<&String, &String> = BTreeMap::new();
    for (cluster, id, _) in &claims {
        let allowed = eligible.get(*cluster).is_some_and(|ok| ok.contains(id));
        if allowed && !given.contains_key(*cluster) {
            given.insert(cluster, id);
        }
    }
    // Sticky within the fair share: a replica that holds more (elsewhere and here) keeps
    // the `fair` clusters of the lowest rank key and gives up the others, the same ones
    // in every group of its clusters.
    let mut load: BTreeMap<&str, usize> = BTreeMap::new();
    for replica in replica_of.values() {
        load.insert(replica, held.get(replica).map_or(0, BTreeSet::len));
    }
    let mut by_replica: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
    for (cluster, id) in &given {
        by_replica.entry(replica_of[*id]).or_default().push(cluster);
    }
    for (replica, here) in by_replica {
        let mut all: Vec<(String, String)> = held
            .get(replica)
            .into_iter()
            .flatten()
            .map(|c| (rank_key(c, replica), c.clone()))
            .chain(here.iter().map(|c| (rank_key(c, replica), (*c).clone())))
            .collect();
        all.sort();
        let kept: BTreeSet<&String> = all.iter().take(fair).map(|(_, c)| c).collect();
        for cluster in here {
            if kept.contains(cluster) {
                *load.get_mut(replica).expect("every replica has a load") += 1;
            } else {
                given.remove(cluster);
            }
        }
    }
    for (name, ok) in &eligible {
        if given.contains_key(name) {
            continue;
        }
        let pick = ok.iter().min_by_key(|id| {
            let replica = replica_of[**id];
            (load[replica], rank_key(name, replica), (**id).clone())
        });
        if let Some(id) = pick {
            given.insert(name, id);
            *load
                .get_mut(replica_of[*id])
                .expect("every replica has a load") += 1;
        }
    }
    for (cluster, id) in given {
        if let Some(a) = out.get_mut(id) {
            a.clusters.push(cluster.clone());
        }
    }
    out
}

/// The fingerprint of a canonical text ([`crate::config::ClusterConfig::canonical`] and
/// the sampling rhythm): FNV-1a, stable across builds and platforms, which
/// `DefaultHasher` is not promised to be.
pub fn fingerprint(parts: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in parts.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Runs this replica's membership of one cluster's group until `shutdown`, then leaves
/// the group.
pub struct Coordinator {
    /// The cluster this group decides, and whose brokers coordinate it.
    pub cluster: String,
    pub ownership: Arc<Ownership>,
    pub wire: Arc<WireClient>,
    pub settings: HaSettings,
    pub bootstrap: Vec<String>,
    /// The fingerprint of the cluster's configuration, for this replica's metadata.
    pub fingerprint: String,
    /// The bootstrap address asked first: the one after the last that did not answer.
    pub first_address: std::sync::atomic::AtomicUsize,
}

/// Where this replica's membership stands between two steps.
#[derive(Debug, Default)]
struct Session {
    member_id: String,
    /// The broker that coordinates the group, as last found (it moves when its broker
    /// dies): heartbeats and the LeaveGroup go there.
    coordinator: Option<String>,
}

/// A JoinGroup answered: the generation this member is in.
struct Joined {
    generation: i32,
    leader: bool,
    /// Every member with its metadata; only the leader is told them.
    members: Vec<(String, Metadata)>,
}

enum Next {
    /// Ask for the coordinator again.
    Rediscover,
    /// Join again (with the member id when it is still good).
    Rejoin,
}

enum Failure {
    /// The group cannot be used by this replica (ACL, name taken).
    Denied(String),
    /// No coordinator answered.
    Unreachable(String),
}

impl Coordinator {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        let mut session = Session::default();
        let mut unreachable_since: Option<Instant> = None;
        loop {
            if *shutdown.borrow() {
                break;
            }
            let outcome = tokio::select! {
                outcome = self.membership(&mut session) => outcome,
                _ = shutdown.wait_for(|stop| *stop) => break,
            };
            let pause = self.after(outcome, &mut session, &mut unreachable_since);
            if !pause.is_zero() {
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = shutdown.wait_for(|stop| *stop) => break,
                }
            }
        }
        self.leave(&session).await;
        self.ownership.update(&self.cluster, |s| {
            s.mode = Mode::Joining;
            s.assigned = false;
        });
    }

    /// One membership: find the coordinator, join, sync, then heartbeats until the
    /// group rebalances or the membership is lost.
    async fn membership(&self, session: &mut Session) -> Result<Next, Failure> {
        let addr = match &session.coordinator {
            Some(addr) => addr.clone(),
            None => self.find_coordinator().await?,
        };
        session.coordinator = Some(addr.clone());
        // From the JoinGroup on, a new generation may complete without this replica
        // learning it (an answer lost): every failure until the new assignment lets the
        // cluster go.
        let joined = match self.join(&addr, &mut session.member_id).await {
            Ok(Ok(joined)) => joined,
            Ok(Err(next)) => return Ok(next),
            Err(failure) => {
                self.let_go();
                return Err(failure);
            }
        };
        let syncing = Instant::now();
        let assignment = match self.sync(&addr, &joined, &mut session.member_id).await {
            Ok(assignment) => assignment,
            Err(outcome) => {
                self.let_go();
                return outcome;
            }
        };
        if self.take(&joined, &session.member_id, assignment, syncing) {
            // An old leader gave this replica the cluster it will not serve: join again,
            // naming no cluster, so that the old leader gives it to one of its own.
            return Ok(Next::Rejoin);
        }
        self.heartbeats(session, joined.generation).await
    }

    /// What the loop does after a membership ended: how long it pauses.
    fn after(
        &self,
        outcome: Result<Next, Failure>,
        session: &mut Session,
        unreachable_since: &mut Option<Instant>,
    ) -> Duration {
        let (group, cluster) = (&self.settings.group, &self.cluster);
        match outcome {
            Ok(Next::Rejoin) => {
                *unreachable_since = None;
                Duration::ZERO
            }
            Ok(Next::Rediscover) => {
                *unreachable_since = None;
                session.coordinator = None;
                self.settings
                    .heartbeat_interval
                    .min(Duration::from_millis(500))
            }
            Err(Failure::Denied(reason)) => {
                tracing::warn!(
                    %group, %cluster,
                    "cannot use the coordination group on this cluster: {reason}; this replica serves the cluster alone \
                     (grant Read on the group to share the work)"
                );
                self.ownership.update(cluster, |s| {
                    if s.mode != Mode::Alone {
                        s.fallbacks += 1;
                    }
                    s.mode = Mode::Alone;
                    s.assigned = false;
                    s.leader = false;
                });
                session.coordinator = None;
                DENIED_RETRY
            }
            Err(Failure::Unreachable(reason)) => {
                session.coordinator = None;
                // No serving alone: a replica cut off from the brokers while the others
                // are not would serve the cluster twice. Once its membership ran out it
                // serves the cluster only as far as it cannot reach it either.
                let now = Instant::now();
                self.ownership.update(cluster, |s| {
                    let current =
                        s.mode == Mode::Member && s.valid_until.is_some_and(|at| now < at);
                    if !current && s.mode != Mode::Alone {
                        s.mode = Mode::Unreachable;
                        s.assigned = false;
                        s.leader = false;
                    }
                });
                let since = *unreachable_since.get_or_insert(now);
                tracing::warn!(%group, %cluster, unreachable_for = ?since.elapsed(), "coordination group: {reason}; trying again");
                self.settings.heartbeat_interval
            }
        }
    }

    /// JoinGroup; `Err(next)` when the coordinator answered with what to do instead
    /// (join again with the member id it gave, look for the coordinator elsewhere).
    async fn join(
        &self,
        addr: &str,
        member_id: &mut String,
    ) -> Result<Result<Joined, Next>, Failure> {
        let session_timeout = self.settings.session_timeout;
        let (generation, held) = self.ownership.claims(&self.cluster);
        let metadata = Metadata {
            version: VERSION,
            exporter: crate::VERSION.to_string(),
            host: hostname(),
            // Beside an old leader, which shares every cluster through this group, it names
            // none: the old replicas serve them until they are gone.
            clusters: if self.ownership.beside_old_leader() {
                BTreeMap::new()
            } else {
                [(self.cluster.clone(), self.fingerprint.clone())].into()
            },
            generation,
            owned: if generation >= 0 {
                vec![self.cluster.clone()]
            } else {
                Vec::new()
            },
            replica: self.ownership.replica.clone(),
            held,
            configured: u32::try_from(self.ownership.clusters.len()).unwrap_or(u32::MAX),
        };
        let mut request = JoinGroupRequest::default();
        request.group_id = GroupId(StrBytes::from_string(self.settings.group.clone()));
        request.session_timeout_ms = millis(session_timeout);
        request.rebalance_timeout_ms = millis(session_timeout);
        request.member_id = StrBytes::from_string(member_id.clone());
        request.protocol_type = StrBytes::from_static_str(PROTOCOL_TYPE);
        let mut protocol = JoinGroupRequestProtocol::default();
        protocol.name = StrBytes::from_static_str(PROTOCOL_NAME);
        protocol.metadata = serde_json::to_vec(&metadata).unwrap_or_default().into();
        request.protocols = vec![protocol];
        let joined = self
            .wire
            .pool
            .send_via(
                Lane::Coordination,
                addr,
                &request,
                "JoinGroup",
                self.rebalance_deadline(),
            )
            .await
            .map_err(unreachable)?;
        match ResponseError::try_from_code(joined.error_code) {
            None => {}
            Some(ResponseError::MemberIdRequired) => {
                *member_id = joined.member_id.to_string();
                return Ok(Err(Next::Rejoin));
            }
            Some(error) => return self.failed("JoinGroup", error, member_id).map(Err),
        }
        *member_id = joined.member_id.to_string();
        Ok(Ok(Joined {
            generation: joined.generation_id,
            leader: joined.leader.as_str() == member_id.as_str(),
            members: self.members(&joined),
        }))
    }

    /// JoinGroup waits for the rebalance: up to the rebalance timeout (the session
    /// timeout), and as long for the SyncGroup that follows.
    fn rebalance_deadline(&self) -> Instant {
        Instant::now() + self.settings.session_timeout * 2 + Duration::from_secs(5)
    }

    /// The members a JoinGroup answer names to the leader, with their metadata.
    fn members(&self, joined: &JoinGroupResponse) -> Vec<(String, Metadata)> {
        let (group, cluster) = (&self.settings.group, &self.cluster);
        joined
            .members
            .iter()
            .map(|m| {
                let metadata = serde_json::from_slice::<Metadata>(&m.metadata)
                    .unwrap_or_else(|error| {
                        tracing::warn!(%group, %cluster, member = %m.member_id, "a member's metadata does not read ({error}): it gets nothing");
                        Metadata::default()
                    });
                (m.member_id.to_string(), metadata)
            })
            .collect()
    }

    /// The leader's plan for the generation, logged, as SyncGroup carries it.
    fn lead(&self, joined: &Joined, member_id: &str) -> Vec<SyncGroupRequestAssignment> {
        let (group, cluster) = (&self.settings.group, &self.cluster);
        for (id, m) in &joined.members {
            if m.exporter != crate::VERSION {
                tracing::info!(%group, %cluster, member = %id, "member runs exporter {} (this leader {})", m.exporter, crate::VERSION);
            }
        }
        let plan = assign(member_id, &joined.members);
        for (id, a) in &plan {
            for (name, reason) in &a.refused {
                tracing::warn!(%group, %cluster, member = %id, "cluster {name} not shared with that member: {reason}");
            }
        }
        tracing::info!(
            %group, %cluster, generation = joined.generation, members = joined.members.len(),
            "leading the coordination group: {}",
            plan.iter()
                .map(|(id, a)| format!("{id}=[{}]", a.clusters.join(",")))
                .collect::<Vec<_>>()
                .join(" ")
        );
        plan.into_iter()
            .map(|(id, a)| {
                let mut assignment = SyncGroupRequestAssignment::default();
                assignment.member_id = StrBytes::from_string(id);
                assignment.assignment = serde_json::to_vec(&a).unwrap_or_default().into();
                assignment
            })
            .collect()
    }

    /// SyncGroup: this member's assignment in the generation it joined.
    async fn sync(
        &self,
        addr: &str,
        joined: &Joined,
        member_id: &mut String,
    ) -> Result<Assignment, Result<Next, Failure>> {
        let group = &self.settings.group;
        let mut sync = SyncGroupRequest::default();
        sync.group_id = GroupId(StrBytes::from_string(group.clone()));
        sync.generation_id = joined.generation;
        sync.member_id = StrBytes::from_string(member_id.clone());
        sync.protocol_type = Some(StrBytes::from_static_str(PROTOCOL_TYPE));
        sync.protocol_name = Some(StrBytes::from_static_str(PROTOCOL_NAME));
        if joined.leader {
            sync.assignments = self.lead(joined, member_id);
        }
        let synced = self
            .wire
            .pool
            .send_via(
                Lane::Coordination,
                addr,
                &sync,
                "SyncGroup",
                self.rebalance_deadline(),
            )
            .await
            .map_err(|error| Err(unreachable(error)))?;
        if let Some(error) = ResponseError::try_from_code(synced.error_code) {
            return Err(self.failed("SyncGroup", error, member_id));
        }
        if synced.assignment.is_empty() {
            return Ok(Assignment::default());
        }
        let cluster = &self.cluster;
        let assignment = serde_json::from_slice(&synced.assignment).unwrap_or_else(|error| {
            tracing::warn!(%group, %cluster, "the leader's assignment does not read ({error}): serving nothing");
            Assignment::default()
        });
        Ok(readable(assignment).unwrap_or_else(|problem| {
            tracing::error!(%group, %cluster, "{problem}");
            Assignment::default()
        }))
    }

    /// Follows the assignment of a generation just synced (at `syncing`). True when the
    /// member must join again at once: an old leader gave this replica the cluster, which
    /// it declines, or the old leader is gone and the member named no cluster.
    fn take(
        &self,
        joined: &Joined,
        member_id: &str,
        assignment: Assignment,
        syncing: Instant,
    ) -> bool {
        let (group, cluster) = (&self.settings.group, &self.cluster);
        // A leader of version 1 shares every cluster through this one group, with the
        // configuration compared as written: its refusals say nothing of this version's.
        let legacy = assignment.version == 1;
        let refused = assignment.refused.get(cluster).cloned().filter(|_| !legacy);
        if legacy {
            tracing::warn!(%group, %cluster, "the group's leader runs an exporter version that shares every cluster through one group: \
                 this replica serves nothing until the replicas of that version are gone (a rolling upgrade), rather than twice");
        }
        if let Some(reason) = &refused {
            tracing::error!(%group, %cluster, "not shared with this replica: {reason}; give every replica the same configuration");
        }
        let mine = assignment.clusters.iter().any(|c| c == cluster);
        let generation = joined.generation;
        tracing::info!(
            %group, %cluster, generation, leader = joined.leader, member = %member_id,
            "{}",
            if mine { "serving the cluster (its share of the coordination group)" } else { "standing by for the cluster: another replica serves it" }
        );
        let synced = Instant::now();
        let mut gained = false;
        // It joined naming no cluster (beside an old leader, see `join`).
        let mut named_none = false;
        let legacy_before = self.ownership.lock().values().any(|s| s.legacy_leader);
        self.ownership.update(cluster, |s| {
            // What it served until now (a current membership's) goes on; a cluster it
            // gains waits for the member that gives it up to stop.
            let served =
                s.mode == Mode::Member && s.assigned && s.valid_until.is_some_and(|at| synced < at);
            gained = mine && !served;
            s.gained_until = gained.then_some(synced + HAND_OVER_GRACE);
            s.mode = Mode::Member;
            s.assigned = mine;
            s.valid_until = Some(syncing + self.settings.session_timeout);
            s.generation = generation;
            s.leader = joined.leader;
            s.member_id = member_id.to_string();
            s.refused = refused;
            s.rebalances += 1;
            s.claim = mine.then_some(generation);
            named_none = s.legacy_leader;
            s.legacy_leader = legacy;
        });
        if legacy_before != self.ownership.lock().values().any(|s| s.legacy_leader) {
            // Every cluster's loop: what this replica may serve changed everywhere.
            self.ownership.changes.send_modify(|n| *n += 1);
        }
        if gained {
            // The cluster's loop learns when the wait is over.
            let ownership = self.ownership.clone();
            tokio::spawn(async move {
                tokio::time::sleep(HAND_OVER_GRACE).await;
                ownership.changes.send_modify(|n| *n += 1);
            });
        }
        // Declined, or the old leader is gone while this member named nothing: join
        // again, naming the cluster.
        (legacy && mine) || (named_none && !legacy)
    }

    /// Heartbeats in `generation` until the group moves on.
    async fn heartbeats(&self, session: &mut Session, generation: i32) -> Result<Next, Failure> {
        let (group, cluster) = (&self.settings.group, &self.cluster);
        let mut beat = HeartbeatRequest::default();
        beat.group_id = GroupId(StrBytes::from_string(group.clone()));
        beat.generation_id = generation;
        beat.member_id = StrBytes::from_string(session.member_id.clone());
        loop {
            tokio::time::sleep(self.settings.heartbeat_interval).await;
            let to = session.coordinator.clone().unwrap_or_default();
            let sent = Instant::now();
            let deadline = sent + self.settings.heartbeat_interval.max(Duration::from_secs(1));
            let answer = self
                .wire
                .pool
                .send_via(Lane::Coordination, &to, &beat, "Heartbeat", deadline)
                .await;
            let error = match answer {
                Ok(answer) => ResponseError::try_from_code(answer.error_code),
                Err(error) => {
                    tracing::debug!(%group, %cluster, "Heartbeat: {error}");
                    Some(ResponseError::CoordinatorNotAvailable)
                }
            };
            match error {
                None => self.renew(sent),
                Some(ResponseError::RebalanceInProgress) => {
                    // Still a member; keep serving until the new assignment.
                    self.renew(sent);
                    return Ok(Next::Rejoin);
                }
                Some(ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable) => {
                    if !self.current() {
                        // The membership ran out while the coordinator did not answer.
                        self.let_go();
                        return Ok(Next::Rediscover);
                    }
                    // The coordinator may have moved (its broker died): ask where it is
                    // now and go on heartbeating in the same generation, which the new
                    // coordinator knows from __consumer_offsets.
                    if let Ok(moved) = self.find_coordinator().await {
                        if moved != to {
                            tracing::info!(%group, %cluster, from = %to, to = %moved, "the coordination group's coordinator moved");
                            session.coordinator = Some(moved);
                        }
                    }
                }
                Some(error) => return self.failed("Heartbeat", error, &mut session.member_id),
            }
        }
    }

    /// Whether this replica's membership of the cluster's group is still current.
    fn current(&self) -> bool {
        let now = Instant::now();
        self.ownership
            .lock()
            .get(&self.cluster)
            .is_some_and(|s| s.valid_until.is_some_and(|at| now < at))
    }

    fn renew(&self, sent: Instant) {
        let until = sent + self.settings.session_timeout;
        self.ownership
            .update(&self.cluster, |s| s.valid_until = Some(until));
    }

    /// Stops serving the cluster at once; the member stays (joining again).
    fn let_go(&self) {
        self.ownership.update(&self.cluster, |s| {
            if s.mode == Mode::Member {
                s.mode = Mode::Joining;
            }
            s.assigned = false;
            s.valid_until = None;
            s.leader = false;
        });
    }

    /// What an error code of the group's coordinator means for the membership. Every
    /// error lets the cluster go (the caller has already, or does here): only a
    /// heartbeat that did not arrive keeps it, and that is not an error code.
    fn failed(
        &self,
        api: &str,
        error: ResponseError,
        member_id: &mut String,
    ) -> Result<Next, Failure> {
        let (group, cluster) = (&self.settings.group, &self.cluster);
        self.let_go();
        match error {
            ResponseError::GroupAuthorizationFailed => {
                Err(Failure::Denied(format!("{api}: {error}")))
            }
            ResponseError::InconsistentGroupProtocol => Err(Failure::Denied(format!(
                "{api}: {error} (is the group name {group} taken by a consumer group?)"
            ))),
            ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable => {
                tracing::info!(%group, %cluster, "{api}: {error}: looking for the new coordinator");
                Ok(Next::Rediscover)
            }
            ResponseError::RebalanceInProgress => Ok(Next::Rejoin),
            // The coordinator is still loading the group: ask again after a pause.
            ResponseError::CoordinatorLoadInProgress => Ok(Next::Rediscover),
            ResponseError::UnknownMemberId
            | ResponseError::IllegalGeneration
            | ResponseError::FencedInstanceId => {
                tracing::info!(%group, %cluster, "{api}: {error}: the group moved on, joining again");
                if error == ResponseError::UnknownMemberId {
                    member_id.clear();
                }
                Ok(Next::Rejoin)
            }
            other => {
                tracing::warn!(%group, %cluster, "{api}: {other}; joining again");
                member_id.clear();
                Err(Failure::Unreachable(format!("{api}: {other}")))
            }
        }
    }

    /// Leaves the group at once, through its current coordinator, so that the others
    /// take over without waiting for the session to time out.
    async fn leave(&self, session: &Session) {
        let (group, cluster) = (&self.settings.group, &self.cluster);
        if session.member_id.is_empty() {
            return;
        }
        // Two tries within 2 s: where the coordinator is not known (the replica was
        // looking for it) or answers that it is not the coordinator any more, it is
        // looked up again once.
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut coordinator = session.coordinator.clone();
        let mut error = String::from("no coordinator known");
        for _ in 0..2 {
            let addr = match coordinator.take() {
                Some(addr) => addr,
                None => {
                    match tokio::time::timeout_at(deadline.into(), self.find_coordinator()).await {
                        Ok(Ok(addr)) => addr,
                        Ok(Err(Failure::Denied(e) | Failure::Unreachable(e))) => {
                            error = e;
                            break;
                        }
                        Err(_) => break,
                    }
                }
            };
            match self.leave_via(&addr, &session.member_id, deadline).await {
                None => {
                    tracing::info!(%group, %cluster, "left the coordination group");
                    return;
                }
                Some((moved, e)) => {
                    error = format!("{addr}: {e}");
                    if !moved {
                        break;
                    }
                }
            }
        }
        tracing::warn!(
            %group, %cluster,
            "could not leave the coordination group ({error}): the other replicas take the cluster over once the session times out"
        );
    }

    /// One LeaveGroup; `None` when accepted, else whether the coordinator moved, and the
    /// error.
    async fn leave_via(
        &self,
        addr: &str,
        member_id: &str,
        deadline: Instant,
    ) -> Option<(bool, String)> {
        let mut request = LeaveGroupRequest::default();
        request.group_id = GroupId(StrBytes::from_string(self.settings.group.clone()));
        // By the members list (v3+, every broker since Kafka 2.4), not the old field.
        let mut identity = MemberIdentity::default();
        identity.member_id = StrBytes::from_string(member_id.to_string());
        identity.reason = Some(StrBytes::from_static_str("the replica stops"));
        request.members = vec![identity];
        let answer = self
            .wire
            .pool
            .send_via(Lane::Coordination, addr, &request, "LeaveGroup", deadline)
            .await;
        match answer {
            Err(error) => Some((true, error.to_string())),
            Ok(answer) => ResponseError::try_from_code(answer.error_code)
                .or_else(|| {
                    answer
                        .members
                        .iter()
                        .find_map(|m| ResponseError::try_from_code(m.error_code))
                })
                .map(|e| {
                    let moved = matches!(
                        e,
                        ResponseError::NotCoordinator | ResponseError::CoordinatorNotAvailable
                    );
                    (moved, e.to_string())
                }),
        }
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
            ..Metadata::default()
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
            ("m2".to_string(), member(&all, 7, &["a"])),
            ("m3".to_string(), member(&all, -1, &[])),
        ];
        let plan = assign("m1", &members);
        assert_eq!(plan["m2"].clusters, ["a"]);
        assert_eq!(served(&plan), ["a", "b"]);
        // Claiming both, above its share of one: it keeps one and gives up the other.
        let members = vec![
            ("m1".to_string(), member(&all, 5, &["a"])),
            ("m2".to_string(), member(&all, 7, &["a", "b"])),
            ("m3".to_string(), member(&all, -1, &[])),
        ];
        let plan = assign("m1", &members);
        assert_eq!(plan["m2"].clusters.len(), 1, "{plan:?}");
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
        // This version's leader shares one cluster per group, which a member of version 1
        // would take for its whole share: it asks for version 2.
        let plan = assign("m1", &[("m1".to_string(), member(&[("a", "1")], -1, &[]))]);
        assert_eq!(plan["m1"].min_version, 2);
    }

    #[test]
    fn an_expired_membership_serves_nothing() {
        let ownership = Ownership::member(vec!["a".into()], "g");
        assert!(!ownership.serves("a"));
        ownership.update("a", |s| {
            s.mode = Mode::Member;
            s.assigned = true;
            s.valid_until = Some(Instant::now() + Duration::from_secs(60));
        });
        assert!(ownership.serves("a"));
        ownership.update("a", |s| s.valid_until = Some(Instant::now()));
        assert!(!ownership.serves("a"));
        assert!(!ownership.view().1);
        assert!(Ownership::everything(vec!["a".into()]).serves("a"));
    }

    /// A cluster gained in a rebalance is served only once the member that gave it up
    /// has had HAND_OVER_GRACE to stop.
    #[test]
    fn a_gained_cluster_waits_for_the_grace() {
        let now = Instant::now();
        let share = Share {
            mode: Mode::Member,
            assigned: true,
            valid_until: Some(now + Duration::from_secs(60)),
            generation: 3,
            leader: false,
            member_id: "m".into(),
            refused: None,
            rebalances: 1,
            fallbacks: 0,
            gained_until: Some(now + HAND_OVER_GRACE),
            claim: Some(3),
            legacy_leader: false,
        };
        assert_eq!(share.serving(now, false), Serving::No);
        assert_eq!(share.serving(now + HAND_OVER_GRACE / 2, false), Serving::No);
        assert_eq!(share.serving(now + HAND_OVER_GRACE, false), Serving::Yes);
        // A leader of version 1 in any of the replica's groups: nothing served.
        assert_eq!(share.serving(now + HAND_OVER_GRACE, true), Serving::No);
    }

    /// A cluster whose group no coordinator answers is served only as one that is
    /// down; each cluster's share is its own.
    #[test]
    fn an_unreachable_group_serves_its_cluster_only_while_down() {
        let ownership = Ownership::member(vec!["a".into(), "b".into()], "g");
        ownership.update("a", |s| s.mode = Mode::Unreachable);
        ownership.update("b", |s| {
            s.mode = Mode::Member;
            s.assigned = true;
            s.valid_until = Some(Instant::now() + Duration::from_secs(60));
        });
        assert_eq!(ownership.serving("a"), Serving::IfDown);
        assert_eq!(ownership.serving("b"), Serving::Yes);
        let report = ownership.report();
        assert_eq!(report.serving, ["b"]);
        assert_eq!(report.mode("a"), Some(Mode::Unreachable));
        // What the member of a's group says of the replica: it holds b elsewhere, and
        // a is not its own.
        assert_eq!(ownership.claims("a"), (-1, vec!["b".to_string()]));
        // Given b, then let go on a failure (a collision): b is still claimed, with the
        // generation it was given in.
        ownership.update("b", |s| {
            s.claim = Some(7);
            s.assigned = false;
            s.mode = Mode::Joining;
        });
        assert_eq!(ownership.claims("b").0, 7);
        assert_eq!(ownership.claims("a").1, ["b"]);
    }

    /// The groups of several clusters decide at once, each with the loads the members
    /// reported: replicas that serve nothing yet get the clusters spread, not all on
    /// one; a replica above its share gives one up.
    #[test]
    fn groups_of_several_clusters_balance_by_the_replicas_loads() {
        let member_of = |replica: &str, cluster: &str, owned: bool| Metadata {
            version: VERSION,
            clusters: [(cluster.to_string(), "1".to_string())].into(),
            generation: if owned { 4 } else { -1 },
            owned: if owned {
                vec![cluster.to_string()]
            } else {
                Vec::new()
            },
            replica: replica.to_string(),
            configured: 4,
            ..Metadata::default()
        };
        let mut owner: BTreeMap<String, String> = BTreeMap::new();
        for cluster in ["c1", "c2", "c3", "c4"] {
            let members: Vec<(String, Metadata)> = ["r1", "r2"]
                .iter()
                .map(|r| (format!("{r}-{cluster}"), member_of(r, cluster, false)))
                .collect();
            let plan = assign(&members[0].0, &members);
            let (id, _) = plan.iter().find(|(_, a)| !a.clusters.is_empty()).unwrap();
            owner.insert(cluster.to_string(), id[..2].to_string());
        }
        let r1 = owner.values().filter(|r| *r == "r1").count();
        assert!(
            (1..=3).contains(&r1),
            "all four clusters on one replica: {owner:?}"
        );
        // r1 holds all four; r2 arrives, and the four groups decide at once with what
        // the members said: r1 keeps the two of its lowest rank, r2 gets the other two.
        let all = ["c1", "c2", "c3", "c4"];
        let mut r1 = Vec::new();
        for cluster in all {
            let mut first = member_of("r1", cluster, true);
            first.held = all
                .iter()
                .filter(|c| **c != cluster)
                .map(|c| c.to_string())
                .collect();
            let members = vec![
                (format!("r1-{cluster}"), first),
                (format!("r2-{cluster}"), member_of("r2", cluster, false)),
            ];
            let plan = assign(&members[0].0, &members);
            if plan[&format!("r1-{cluster}")].clusters == [cluster] {
                r1.push(cluster);
            } else {
                assert_eq!(plan[&format!("r2-{cluster}")].clusters, [cluster]);
            }
        }
        assert_eq!(r1.len(), 2, "r1 keeps {r1:?} of four");
        // Within its share it keeps it.
        let mut first = member_of("r1", "c4", true);
        first.held = vec!["c1".into()];
        let mut second = member_of("r2", "c4", false);
        second.held = vec!["c2".into()];
        let members = vec![("r1-c4".to_string(), first), ("r2-c4".to_string(), second)];
        assert_eq!(assign("r2-c4", &members)["r1-c4"].clusters, ["c4"]);
    }

    /// Two configured clusters on the same brokers meet in one group: each goes to one
    /// member that names it.
    #[test]
    fn two_clusters_on_the_same_brokers_share_one_group() {
        let members: Vec<(String, Metadata)> = [("r1", "a"), ("r1", "b"), ("r2", "a"), ("r2", "b")]
            .iter()
            .map(|(r, c)| {
                (
                    format!("{r}-{c}"),
                    Metadata {
                        version: VERSION,
                        clusters: [(c.to_string(), "1".to_string())].into(),
                        generation: -1,
                        replica: r.to_string(),
                        configured: 2,
                        ..Metadata::default()
                    },
                )
            })
            .collect();
        let plan = assign("r1-a", &members);
        for (id, a) in &plan {
            for c in &a.clusters {
                assert!(id.ends_with(c.as_str()), "{id} got {c}: {plan:?}");
            }
        }
        assert_eq!(served(&plan), ["a", "b"]);
    }
}
