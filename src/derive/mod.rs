//! Derivation: from what the brokers reported in one cycle ([`RawSample`]) to what is
//! shown ([`ClusterSnapshot`]), in pure code with no I/O. Every rule of SPEC §1–§3 that
//! turns offsets into gaps, lags and durations is a function here. [`Deriver`] is the
//! entry: it holds what lives across cycles (the stuck clock, the commit watch, the
//! transaction watch) and runs one cycle's steps in order: offsets and lags
//! ([`offsets`]), commit progress ([`progress`]), granularity, every transaction
//! ([`inventory`]), and what works of the cluster ([`features`]).
//!
//! The files depend downward only: this one on all of them; [`offsets`], [`progress`],
//! [`inventory`], [`stuck`] and [`series`] on [`state`], the leaf. It imports the kafka
//! module's plain types ([`RawSample`]), never its clients; the renderer
//! ([`crate::expose`]), the status page and the scheduler import it.

pub mod features;
pub mod inventory;
pub mod isolation;
pub mod offsets;
pub mod progress;
pub mod rates;
pub mod rebalance;
pub mod series;
pub mod state;
pub mod stuck;

#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

pub use self::offsets::{derive, hw_minus_lso, lag, share_lag_from_broker, time_lag, withheld_age};
pub use self::state::*;
pub use self::stuck::StuckClock;
use crate::config::GroupGranularity;
use crate::kafka::features::{Feature, FeatureState};
use crate::kafka::RawSample;

/// What one cycle learned about one cluster; immutable once published.
#[derive(Debug, Clone)]
pub struct ClusterSnapshot {
    pub cluster: String,
    /// The last cycle reached the cluster.
    pub up: bool,
    /// End of this cycle.
    pub taken_at: SystemTime,
    /// End of the last cycle that reached the cluster (this one, if `up`).
    pub last_success: Option<SystemTime>,
    pub partitions: Vec<PartitionState>,
    pub groups: Vec<GroupState>,
    /// Series left out by the cardinality guard in this cycle.
    pub series_dropped: usize,
    /// Groups whose offset series the guard leaves out of `/metrics` in this cycle; the
    /// status page and the JSON API show them whole.
    pub left_out_groups: std::collections::HashSet<String>,
    /// Series `/metrics` shows for the cluster, counted by the cardinality guard in every
    /// cycle ([`crate::expose::guard`]).
    pub series: usize,
    /// Per topic, the cost of exactly-once counted so far ([`RawSample::eos_cost`]).
    pub eos_cost: std::collections::BTreeMap<Arc<str>, crate::kafka::records::EosCost>,
    /// How `/metrics` shows it: granularity, compatibility families.
    pub exposition: series::Exposition,
    /// Brokers the last cycle's metadata listed: id and address (host:port).
    pub brokers: Vec<(i32, String)>,
    /// The sampled topics' `retention.ms` (-1: unlimited), where it could be read.
    pub retention_ms: HashMap<Arc<str>, i64>,
    /// Every open transaction of the cluster, fencings and coordinator moves.
    pub transactions: inventory::TransactionsView,
    /// The brokers' clock against the exporter's, when measured recently.
    pub clock_skew: Option<crate::kafka::ClockSkew>,
    /// What works of the cluster and what does not, and why ([`features`]).
    pub features: BTreeMap<Feature, FeatureState>,
}

impl ClusterSnapshot {
    /// The features whose state this cycle can vouch for: all of them while the cluster
    /// is up; while it is down only those known not to work (refused credentials, a
    /// setting that turns one off), since "works" was last seen before the outage.
    pub fn known_features(&self) -> impl Iterator<Item = (&Feature, &FeatureState)> {
        let up = self.up;
        self.features
            .iter()
            .filter(move |(_, state)| up || !state.status.works())
    }

    /// A cycle that could not be derived: the cluster down, no partition or group.
    pub fn down(
        cluster: &str,
        taken_at: SystemTime,
        last_success: Option<SystemTime>,
        exposition: series::Exposition,
    ) -> ClusterSnapshot {
        ClusterSnapshot {
            cluster: cluster.to_string(),
            up: false,
            taken_at,
            last_success,
            partitions: Vec::new(),
            groups: Vec::new(),
            series_dropped: 0,
            left_out_groups: Default::default(),
            series: 0,
            exposition,
            brokers: Vec::new(),
            retention_ms: HashMap::new(),
            transactions: Default::default(),
            clock_skew: None,
            eos_cost: Default::default(),
            features: BTreeMap::new(),
        }
    }
}

/// What one cycle's derivation gives the scheduler: the cluster's values and what the
/// cycle remembered.
#[derive(Debug, Default)]
pub struct Step {
    pub derived: Derived,
    pub transactions: inventory::TransactionsView,
    /// Entries of the commit watch, the transaction watch and the isolation watch (groups)
    /// after the cycle.
    pub remembered: (usize, usize, usize),
    /// The cluster's features after the cycle, and those that changed in it.
    pub features: BTreeMap<Feature, FeatureState>,
    pub feature_changes: Vec<features::Change>,
}

/// One cluster's derivation across cycles: what it remembers, and its settings.
#[derive(Debug)]
pub struct Deriver {
    clock: StuckClock,
    commits: progress::CommitWatch,
    rebalances: rebalance::RebalanceWatch,
    rates: rates::RateWatch,
    isolation: isolation::IsolationWatch,
    watch: inventory::TransactionWatch,
    features: features::FeatureMap,
    /// See `clusters[].hanging_margin`.
    pub hanging_margin: Duration,
    /// See `clusters[].stall_after`.
    pub stall_after: Duration,
    /// See `clusters[].transaction_list_detail`.
    pub transaction_list_detail: usize,
    /// The cluster's granularity.
    pub granularity: crate::config::Granularity,
    /// Groups whose granularity differs from the cluster's.
    pub group_granularity: GroupGranularity,
    /// See `clusters[].groups`.
    pub groups: crate::config::GroupSettings,
}

impl Deriver {
    pub fn new(
        hanging_margin: Duration,
        stall_after: Duration,
        transaction_list_detail: usize,
        granularity: crate::config::Granularity,
        group_granularity: GroupGranularity,
    ) -> Deriver {
        Deriver {
            clock: StuckClock::default(),
            commits: progress::CommitWatch::default(),
            rebalances: rebalance::RebalanceWatch::default(),
            rates: rates::RateWatch::default(),
            isolation: isolation::IsolationWatch::default(),
            watch: inventory::TransactionWatch::default(),
            features: features::FeatureMap::default(),
            hanging_margin,
            stall_after,
            transaction_list_detail,
            granularity,
            group_granularity,
            groups: crate::config::GroupSettings::default(),
        }
    }

    /// Derives one cycle's sample, `now` and `wall` being when it was taken: offsets and
    /// lags, the stuck clock, commit progress, each group's granularity, and every
    /// transaction of the cluster.
    pub fn step(&mut self, mut raw: RawSample, now: Instant, wall: SystemTime) -> Step {
        let feature_changes = self.features.observe(&raw);
        let transactions = inventory::Input::take(&mut raw);
        let aborted = std::mem::take(&mut raw.aborted);
        let reached = raw.reached;
        let mut derived = derive(raw, &mut self.clock, now, wall, self.hanging_margin);
        if reached {
            let listing = &derived.group_listing;
            rebalance::apply(
                &mut derived.groups,
                &mut self.rebalances,
                wall,
                self.stall_after,
                |c| listing.gone(c),
            );
        }
        // Before the commit watch takes this cycle's offsets: it still holds the last ones.
        let commits = &self.commits;
        isolation::apply(
            &mut derived,
            &mut self.isolation,
            isolation::Cycle {
                aborted,
                committed_before: &|group, topic, partition| {
                    commits.committed(group, topic, partition)
                },
                now,
                wall,
                reached,
            },
        );
        progress::apply(
            &mut derived,
            &mut self.commits,
            now,
            progress::Settings {
                stall_after: self.stall_after,
                abandon_after: self.groups.abandon_after,
            },
            reached,
        );
        if reached {
            rates::apply(
                &mut derived.groups,
                &derived.partitions,
                &mut self.rates,
                now,
                self.groups.rate_window,
            );
        }
        for group in &mut derived.groups {
            group.granularity = self.group_granularity.of(&group.name, self.granularity);
        }
        let inventory = inventory::derive(
            transactions,
            &derived.partitions,
            &mut self.watch,
            self.transaction_list_detail,
            now,
            wall,
        );
        Step {
            transactions: inventory::TransactionsView {
                inventory,
                counters: self.watch.counters(),
                recent_fencings: self.watch.recent().to_vec(),
            },
            remembered: (self.commits.len(), self.watch.len(), self.isolation.len()),
            derived,
            features: self.features.states().clone(),
            feature_changes,
        }
    }
}
