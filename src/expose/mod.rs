//! The serving side of `/metrics`: what each cycle publishes, rendered. The sampled
//! values are read from the clusters' latest snapshots by [`SnapshotCollector`] through
//! the families of [`families`] (ours) and [`compat`] (kafka_exporter's), walked by the
//! visitors of [`visit`]; so a series that is gone from the snapshot is gone from the
//! output, and the cardinality guard ([`guard`]) counts with the same code that renders.
//! The exporter's own counters and the cycle histogram live in a `prometheus-client`
//! registry for the life of the process; [`body`] turns the registry's text into what a
//! scraper asked for.
//!
//! May import the derivation (the snapshot it renders) and the kafka module's plain
//! types; nothing here talks to Kafka or is imported by the derivation.

mod body;
mod compat;
mod families;
mod process;
mod visit;

pub use body::to_prometheus_text;
pub use visit::CLUSTER_LABEL;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use self::body::{BodyWriter, Variant, PROMETHEUS_ACCEPT};
pub use self::body::{OPENMETRICS_TEXT, PROMETHEUS_TEXT};
use self::visit::{Count, Render, Shown, Visitor};
use crate::derive::{Anomaly, ClusterSnapshot};
use crate::kafka::coordination::{Mode, Ownership};
use crate::kafka::{Refusals, Stage};

/// The latest snapshot of one cluster, `None` until its first cycle ends.
pub type SnapshotReceiver = watch::Receiver<Option<Arc<ClusterSnapshot>>>;

/// Cycle duration histogram buckets, seconds.
const CYCLE_BUCKETS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabels {
    kafka_cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    kafka_cluster: String,
    stage: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RefusalLabels {
    kafka_cluster: String,
    stage: &'static str,
    cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnomalyLabels {
    kafka_cluster: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    revision: &'static str,
}

/// The exporter's own telemetry and the registry that renders everything.
///
/// Every value on `/metrics` changes only when a cycle ends, so a rendered body is kept
/// until the next cycle ([`Metrics::cycle_finished`]) and shared by all scrapes meanwhile:
/// a scrape after the first one in a cycle costs only the transfer.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    errors: Family<StageLabels, Counter>,
    refusals: Family<RefusalLabels, Counter>,
    anomalies: Family<AnomalyLabels, Counter>,
    cycle_duration: Family<ClusterLabels, Histogram>,
    /// The bodies rendered from the current cycle's values. Replaced only with the render
    /// turn held, so whatever is here belongs to the current cycle.
    rendered: Mutex<Rendered>,
    render_turn: Mutex<()>,
    /// Which clusters this replica serves; the bodies in `rendered` were rendered under
    /// `rendered_view` of it and are dropped as soon as it changes.
    ownership: Arc<Ownership>,
    rendered_view: Mutex<(u64, bool)>,
    /// This replica's place in its coordination group, with `[ha]`.
    ha: Option<HaFamilies>,
    /// `process_*`, once [`Metrics::with_process_metrics`] turned them on.
    process: Option<process::ProcessMetrics>,
    /// A body older than this is rendered again at the next scrape, although no cycle
    /// ended: the replica's own series (`process_*`, `kafka_lso_exporter_ha_*`) go on
    /// where no cycle runs (a replica standing by) or a cycle runs late.
    max_age: Option<Duration>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    group: String,
}

/// One cluster's coordination group: `ha_cluster`, not `kafka_cluster`, since every
/// replica has these series, whichever serves the cluster.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HaClusterLabels {
    group: String,
    ha_cluster: String,
}

#[derive(Debug)]
struct HaFamilies {
    labels: GroupLabels,
    clusters: Family<GroupLabels, Gauge>,
    serving: Family<GroupLabels, Gauge>,
    leader: Family<HaClusterLabels, Gauge>,
    generation: Family<HaClusterLabels, Gauge>,
    fallbacks: Family<GroupLabels, Counter>,
}

/// The exporter's own families of `[ha]`: (name as shown, kind, help).
const HA_FAMILIES: [(&str, &str, &str); 5] = [
    (
        "kafka_lso_exporter_ha_clusters",
        "gauge",
        "Clusters this replica's configuration names, which the coordination group shares out",
    ),
    (
        "kafka_lso_exporter_ha_serving_clusters",
        "gauge",
        "Clusters this replica of the coordination group samples and serves",
    ),
    (
        "kafka_lso_exporter_ha_leader",
        "gauge",
        "1 while this replica leads the coordination group on the cluster ha_cluster (decides who serves it)",
    ),
    (
        "kafka_lso_exporter_ha_generation",
        "gauge",
        "Generation of the coordination group on the cluster ha_cluster that this replica last joined",
    ),
    (
        "kafka_lso_exporter_ha_fallbacks_total",
        "counter",
        "Times this replica could not use a cluster's coordination group (denied, its name taken, or client settings only librdkafka speaks) and served that cluster alone",
    ),
];

/// Bodies rendered for one cycle, one slot per [`Variant`], each with when it was rendered.
type Rendered = [Option<(Bytes, Instant)>; 4];

impl Metrics {
    /// Builds the registry for the given clusters' snapshot channels, all served.
    pub fn new(clusters: Vec<SnapshotReceiver>) -> Self {
        Self::with_ownership(clusters, Ownership::everything(Vec::new()))
    }

    /// [`Metrics::new`] for a replica that serves what `ownership` says.
    pub fn with_ownership(clusters: Vec<SnapshotReceiver>, ownership: Arc<Ownership>) -> Self {
        let mut registry = Registry::default();
        let errors = Family::<StageLabels, Counter>::default();
        let refusals = Family::<RefusalLabels, Counter>::default();
        let anomalies = Family::<AnomalyLabels, Counter>::default();
        let cycle_duration = Family::<ClusterLabels, Histogram>::new_with_constructor(
            (|| Histogram::new(CYCLE_BUCKETS.iter().copied())) as fn() -> Histogram,
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        build_info
            .get_or_create(&BuildLabels {
                version: crate::VERSION,
                revision: crate::REVISION,
            })
            .set(1);

        registry.register(
            "kafka_lso_exporter_errors",
            "Sampling failures by stage: one per failed partition or group, or per failed cluster-wide request",
            errors.clone(),
        );
        registry.register(
            "kafka_lso_exporter_request_refusals",
            "Of kafka_lso_exporter_errors_total, the failures that a grant or a setting must end, by cause: denied by an ACL, unsupported by a broker, authentication refused",
            refusals.clone(),
        );
        registry.register(
            "kafka_lso_exporter_anomalies",
            "Impossible values clamped to 0, by kind",
            anomalies.clone(),
        );
        registry.register(
            "kafka_lso_exporter_cycle_duration_seconds",
            "Duration of sampling cycles",
            cycle_duration.clone(),
        );
        registry.register(
            "kafka_lso_exporter_build_info",
            "Version of the exporter; always 1",
            build_info,
        );
        registry.register_collector(Box::new(SnapshotCollector {
            clusters,
            ownership: ownership.clone(),
        }));
        let rendered_view = Mutex::new(ownership.view());
        let ha = ownership.group().map(|group| {
            let families = HaFamilies {
                labels: GroupLabels {
                    group: group.to_string(),
                },
                clusters: Family::default(),
                serving: Family::default(),
                leader: Family::default(),
                generation: Family::default(),
                fallbacks: Family::default(),
            };
            let name = |i: usize| HA_FAMILIES[i].0.trim_end_matches("_total");
            registry.register(name(0), HA_FAMILIES[0].2, families.clusters.clone());
            registry.register(name(1), HA_FAMILIES[1].2, families.serving.clone());
            registry.register(name(2), HA_FAMILIES[2].2, families.leader.clone());
            registry.register(name(3), HA_FAMILIES[3].2, families.generation.clone());
            registry.register(name(4), HA_FAMILIES[4].2, families.fallbacks.clone());
            families
        });
        Self {
            ha,
            registry,
            errors,
            refusals,
            anomalies,
            cycle_duration,
            rendered: Mutex::new(Rendered::default()),
            render_turn: Mutex::new(()),
            ownership,
            rendered_view,
            process: None,
            max_age: None,
        }
    }

    /// Renders a body again at a scrape once it is older than `max_age` (two sampling
    /// intervals), even when no cycle ended since.
    pub fn with_max_age(mut self, max_age: Duration) -> Self {
        self.max_age = Some(max_age);
        self
    }

    /// The body of `variant`, unless it is missing or older than `max_age`.
    fn fresh(&self, variant: Variant) -> Option<Bytes> {
        let (body, at) = self.rendered()[variant.slot()].clone()?;
        match self.max_age {
            Some(max_age) if at.elapsed() >= max_age => None,
            _ => Some(body),
        }
    }

    /// Also serves the `process_*` families (memory, CPU, start time, file descriptors)
    /// of this process, refreshed at every render; where `/proc` cannot be read, none.
    pub fn with_process_metrics(mut self) -> Self {
        self.process = process::ProcessMetrics::register(&mut self.registry);
        self
    }

    /// Makes every cluster's counters visible at 0 before anything happened, so that
    /// `rate()` and `increase()` see the first failure.
    pub fn init_cluster(&self, cluster: &str) {
        for stage in Stage::ALL {
            drop(self.errors.get_or_create(&StageLabels {
                kafka_cluster: cluster.to_string(),
                stage: stage.as_str(),
            }));
            for cause in Refusals::CAUSES {
                drop(self.refusals.get_or_create(&RefusalLabels {
                    kafka_cluster: cluster.to_string(),
                    stage: stage.as_str(),
                    cause,
                }));
            }
        }
        for kind in Anomaly::ALL {
            drop(self.anomalies.get_or_create(&AnomalyLabels {
                kafka_cluster: cluster.to_string(),
                kind: kind.as_str(),
            }));
        }
    }

    pub fn count_errors(&self, cluster: &str, stage: Stage, count: u64) {
        self.errors
            .get_or_create(&StageLabels {
                kafka_cluster: cluster.to_string(),
                stage: stage.as_str(),
            })
            .inc_by(count);
    }

    /// Counts the refusals among a stage's failures (which [`Metrics::count_errors`]
    /// counts in full).
    pub fn count_refusals(&self, cluster: &str, stage: Stage, refused: Refusals) {
        for (cause, count) in refused.by_cause() {
            if count > 0 {
                self.refusals
                    .get_or_create(&RefusalLabels {
                        kafka_cluster: cluster.to_string(),
                        stage: stage.as_str(),
                        cause,
                    })
                    .inc_by(count);
            }
        }
    }

    pub fn count_anomaly(&self, cluster: &str, kind: Anomaly) {
        self.anomalies
            .get_or_create(&AnomalyLabels {
                kafka_cluster: cluster.to_string(),
                kind: kind.as_str(),
            })
            .inc();
    }

    pub fn observe_cycle(&self, cluster: &str, seconds: f64) {
        self.cycle_duration
            .get_or_create(&ClusterLabels {
                kafka_cluster: cluster.to_string(),
            })
            .observe(seconds);
    }

    /// Renders everything as OpenMetrics text.
    pub fn encode_openmetrics(&self) -> String {
        let body = self.render(Variant {
            openmetrics: true,
            gzip: false,
        });
        String::from_utf8(body.into()).expect("the registry writes UTF-8")
    }

    /// Renders one variant in a single pass: the Prometheus text is converted and the
    /// body compressed as the registry writes it, so a gzipped body never exists
    /// uncompressed in memory (at a million series that text is over 100 MB).
    fn render(&self, variant: Variant) -> Bytes {
        self.forget_unserved();
        self.refresh_ha();
        if let Some(process) = &self.process {
            process.refresh();
        }
        let mut body = BodyWriter::new(variant);
        prometheus_client::encoding::text::encode(&mut body, &self.registry)
            .expect("writing to memory cannot fail");
        body.finish()
    }

    /// Drops the counters of the clusters another replica serves: every series with a
    /// `kafka_cluster` label comes from the one replica that serves the cluster. A
    /// cluster taken over again starts them at 0 ([`Metrics::init_cluster`]).
    fn forget_unserved(&self) {
        for cluster in self.ownership.clusters() {
            if self.ownership.serves(cluster) {
                continue;
            }
            for stage in Stage::ALL {
                self.errors.remove(&StageLabels {
                    kafka_cluster: cluster.clone(),
                    stage: stage.as_str(),
                });
                for cause in Refusals::CAUSES {
                    self.refusals.remove(&RefusalLabels {
                        kafka_cluster: cluster.clone(),
                        stage: stage.as_str(),
                        cause,
                    });
                }
            }
            for kind in Anomaly::ALL {
                self.anomalies.remove(&AnomalyLabels {
                    kafka_cluster: cluster.clone(),
                    kind: kind.as_str(),
                });
            }
            self.cycle_duration.remove(&ClusterLabels {
                kafka_cluster: cluster.clone(),
            });
        }
    }

    /// This replica's place in its coordination group, as the group last said it.
    fn refresh_ha(&self) {
        if let Some(ha) = &self.ha {
            let report = self.ownership.report();
            let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
            ha.clusters
                .get_or_create(&ha.labels)
                .set(count(self.ownership.clusters().len()));
            ha.serving
                .get_or_create(&ha.labels)
                .set(count(report.serving.len()));
            for share in &report.shares {
                let labels = HaClusterLabels {
                    group: ha.labels.group.clone(),
                    ha_cluster: share.cluster.clone(),
                };
                let leads = share.mode == Mode::Member && share.leader;
                ha.leader.get_or_create(&labels).set(i64::from(leads));
                ha.generation
                    .get_or_create(&labels)
                    .set(i64::from(share.generation.max(0)));
            }
            let fallbacks = ha.fallbacks.get_or_create(&ha.labels);
            fallbacks.inc_by(report.fallbacks.saturating_sub(fallbacks.get()));
        }
    }

    /// Drops the rendered bodies when what this replica serves changed since they were
    /// rendered (a hand-over, or a membership that ran out while frozen).
    fn outdate_if_moved(&self) {
        let now = self.ownership.view();
        let mut view = self
            .rendered_view
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if *view != now {
            *view = now;
            *self.rendered() = Rendered::default();
        }
    }

    /// Marks everything rendered so far as outdated, without rendering.
    pub fn cycle_finished(&self) {
        let _turn = self.render_turn();
        *self.rendered() = Rendered::default();
    }

    /// Makes what a cycle has just published (its snapshot and its counters) current:
    /// renders the variant Prometheus asks for (OpenMetrics, gzip) from it first, then
    /// outdates the previous cycle's bodies. Scrapes during the render get the previous
    /// cycle's body at once instead of waiting for the render. Blocking: call from a
    /// blocking thread.
    pub fn cycle_finished_and_rendered(&self) {
        let _turn = self.render_turn();
        self.outdate_if_moved();
        let variant = Variant::new(Some(PROMETHEUS_ACCEPT), true);
        let body = self.render(variant);
        let mut bodies = Rendered::default();
        bodies[variant.slot()] = Some((body, Instant::now()));
        *self.rendered() = bodies;
    }

    /// The body already rendered for this cycle, if any; never renders and never waits for
    /// a render, so it may run on an async worker thread.
    pub fn cached(
        &self,
        accept: Option<&str>,
        accept_gzip: bool,
    ) -> Option<(&'static str, bool, Bytes)> {
        // Never updates the view itself: a render under way may belong to the old one.
        // A moved view sends the scrape to `encode_for`, which waits for its turn.
        let current = *self
            .rendered_view
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if current != self.ownership.view() {
            return None;
        }
        let variant = Variant::new(accept, accept_gzip);
        let body = self.fresh(variant)?;
        Some((variant.content_type(), variant.gzip, body))
    }

    /// The body in the format the `Accept` header asks for, gzip-compressed when the
    /// scraper accepts it (Prometheus does): (content type, gzipped, body). Each variant is
    /// rendered at most once per cycle; concurrent scrapes wait for one render and share
    /// its body.
    pub fn encode_for(
        &self,
        accept: Option<&str>,
        accept_gzip: bool,
    ) -> (&'static str, bool, Bytes) {
        let variant = Variant::new(accept, accept_gzip);
        let _turn = self.render_turn();
        self.outdate_if_moved();
        let body = self.fresh(variant).unwrap_or_else(|| {
            let body = self.render(variant);
            self.rendered()[variant.slot()] = Some((body.clone(), Instant::now()));
            body
        });
        (variant.content_type(), variant.gzip, body)
    }

    /// One render at a time: a render holds this for its whole duration, lookups never do.
    fn render_turn(&self) -> std::sync::MutexGuard<'_, ()> {
        self.render_turn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The bodies, locked only to look one up or to store one, never during a render.
    fn rendered(&self) -> std::sync::MutexGuard<'_, Rendered> {
        self.rendered
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Renders the sampled series of every cluster from its latest snapshot.
#[derive(Debug)]
struct SnapshotCollector {
    clusters: Vec<SnapshotReceiver>,
    ownership: Arc<Ownership>,
}

impl prometheus_client::collector::Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Hold each snapshot (an Arc) for the whole scrape, not the channel's lock.
        let snapshots: Vec<Arc<ClusterSnapshot>> = self
            .clusters
            .iter()
            .filter_map(|rx| rx.borrow().clone())
            .filter(|s| self.ownership.serves(&s.cluster))
            .collect();
        let shown: Vec<Shown> = snapshots.iter().map(|s| Shown::new(s)).collect();
        let mut render = Render {
            encoder: &mut encoder,
            error: None,
        };
        visit_all(&mut render, &shown);
        render.error.map_or(Ok(()), Err)
    }
}

/// Every family of the clusters' snapshots, in the order `/metrics` shows them.
fn visit_all(out: &mut dyn Visitor, shown: &[Shown]) {
    families::visit(out, shown);
    compat::visit(out, shown);
}

/// Every family `/metrics` can show, ours and kafka_exporter's, with its type: the
/// snapshot families as the render walks them (whatever a cycle found), then the
/// exporter's own registry. What docs/metrics.md is checked against.
pub fn catalog() -> Vec<(String, &'static str)> {
    struct Names(Vec<(String, &'static str)>);
    impl Visitor for Names {
        fn family(
            &mut self,
            name: &str,
            _help: &str,
            kind: prometheus_client::metrics::MetricType,
            _samples: &mut dyn FnMut(&mut visit::Emit<'_>),
        ) {
            let (name, kind) = match kind {
                prometheus_client::metrics::MetricType::Counter => {
                    (format!("{name}_total"), "counter")
                }
                _ => (name.to_string(), "gauge"),
            };
            self.0.push((name, kind));
        }
    }
    let snapshot = ClusterSnapshot::down(
        "catalog",
        std::time::SystemTime::UNIX_EPOCH,
        None,
        crate::derive::series::Exposition {
            granularity: crate::config::Granularity::Partition,
            kafka_exporter: true,
            assigned_only: false,
            owner_labels: false,
        },
    );
    let mut names = Names(Vec::new());
    visit_all(&mut names, &[Shown::new(&snapshot)]);
    names.0.extend([
        ("kafka_lso_exporter_errors_total".to_string(), "counter"),
        (
            "kafka_lso_exporter_request_refusals_total".to_string(),
            "counter",
        ),
        ("kafka_lso_exporter_anomalies_total".to_string(), "counter"),
        (
            "kafka_lso_exporter_cycle_duration_seconds".to_string(),
            "histogram",
        ),
        ("kafka_lso_exporter_build_info".to_string(), "gauge"),
    ]);
    names.0.extend(
        HA_FAMILIES
            .iter()
            .map(|(name, kind, _)| (name.to_string(), *kind)),
    );
    names.0
}

/// What the cardinality guard decided for one cluster's snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trimmed {
    /// Groups whose offset series are left out of `/metrics`.
    pub groups: HashSet<String>,
    /// Series left out.
    pub dropped: usize,
    /// Series shown.
    pub shown: usize,
}

/// The cardinality guard: counts every series `/metrics` shows for `snapshot`, with the
/// render's own code, and while they are more than `max_series`, leaves out the offset
/// series (per partition and per topic, lags, share progress, kafka_exporter's group
/// families) of whole groups that `is_priority` does not keep, last names first, so the
/// same groups go every cycle. Partition, topic and transaction series, and every group's
/// state and members, are always shown: when they alone are more than `max_series`, the
/// result is still above it (the caller says so). The snapshot itself is left whole: the
/// status page and the JSON API show every group.
/// Without a limit (`None`), it only counts.
pub fn guard(
    snapshot: &ClusterSnapshot,
    max_series: Option<usize>,
    is_priority: impl Fn(&str) -> bool,
) -> Trimmed {
    let max_series = max_series.unwrap_or(usize::MAX);
    let total = count(snapshot, Count::default()).total;
    let mut trimmed = Trimmed {
        shown: total,
        ..Trimmed::default()
    };
    if total <= max_series {
        return trimmed;
    }
    // Over the limit: counted again, per group, to know what leaving each out saves.
    let group_offsets = count(snapshot, Count::per_group()).group_offsets();
    for group in snapshot.groups.iter().rev() {
        if trimmed.shown <= max_series {
            break;
        }
        if is_priority(&group.name) {
            continue;
        }
        let Some(&series) = group_offsets.get(&group.name) else {
            continue;
        };
        trimmed.groups.insert(group.name.clone());
        trimmed.shown -= series;
        trimmed.dropped += series;
    }
    trimmed
}

/// Every series `/metrics` would show for `snapshot` with no group left out ([`Count`]
/// counts what it is shown, left out or not).
fn count(snapshot: &ClusterSnapshot, mut count: Count) -> Count {
    visit_all(&mut count, &[Shown::new(snapshot)]);
    count
}

/// How many series `/metrics` shows for `snapshot`: every series the render walks, less
/// the offset series of the groups the guard left out.
pub fn series_count(snapshot: &ClusterSnapshot) -> usize {
    if snapshot.left_out_groups.is_empty() {
        return count(snapshot, Count::default()).total;
    }
    let count = count(snapshot, Count::per_group());
    let total = count.total;
    let group_offsets = count.group_offsets();
    let left_out: usize = snapshot
        .left_out_groups
        .iter()
        .filter_map(|g| group_offsets.get(g))
        .sum();
    total - left_out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Granularity;
    use crate::derive::series::Exposition;
    use crate::derive::{
        GroupPartitionState, GroupState, Lag, PartitionState, TimeLag, Visibility,
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
            withheld_age_seconds: None,
            transactions: None,
            replication: None,
        }
    }

    fn group(name: &str, topic: &str, partitions: i32, granularity: Granularity) -> GroupState {
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
            offsets: Some(
                (0..partitions)
                    .map(|p| GroupPartitionState {
                        topic: Arc::from(topic),
                        partition: p,
                        committed_offset: 100 + i64::from(p),
                        lag: Some(Lag {
                            hw_lag: i64::from(p),
                            lso_lag: 0,
                            committed_beyond_lso: 0,
                        }),
                        hw_time_lag: Some(TimeLag::Since(f64::from(p))),
                        lso_time_lag: None,
                        commit_stall_seconds: None,
                        retention_margin: None,
                        retention_margin_seconds: None,
                        lost_records: None,
                        owner: Default::default(),
                        abandoned: false,
                    })
                    .collect(),
            ),
            granularity,
            status: None,
        }
    }

    fn snapshot(
        partitions: Vec<PartitionState>,
        groups: Vec<GroupState>,
        exposition: Exposition,
    ) -> ClusterSnapshot {
        ClusterSnapshot {
            cluster: "prod".into(),
            up: true,
            taken_at: std::time::SystemTime::UNIX_EPOCH,
            last_success: None,
            partitions,
            groups,
            series_dropped: 0,
            left_out_groups: Default::default(),
            series: 0,
            exposition,
            brokers: Vec::new(),
            retention_ms: Default::default(),
            transactions: Default::default(),
            clock_skew: None,
            eos_cost: Default::default(),
            features: Default::default(),
        }
    }

    const PARTITION: Exposition = Exposition {
        granularity: Granularity::Partition,
        kafka_exporter: false,
        assigned_only: false,
        owner_labels: false,
    };
    const TOPIC: Exposition = Exposition {
        granularity: Granularity::Topic,
        kafka_exporter: false,
        assigned_only: false,
        owner_labels: false,
    };
    /// Of the exporter's per-cluster series: up, series_dropped, series.
    const CLUSTER: usize = 3;

    fn counted(partitions: &[PartitionState], groups: &[GroupState], e: Exposition) -> usize {
        series_count(&snapshot(partitions.to_vec(), groups.to_vec(), e))
    }

    #[test]
    fn topic_granularity_counts_partition_series_only_where_the_lso_is_pinned() {
        let mut partitions = vec![
            partition("t", 0, 900, 880, 10.0),
            partition("t", 1, 5, 5, 0.0),
            partition("t", 2, 5, 5, 0.0),
        ];
        let groups = vec![group("g", "t", 3, Granularity::Partition)];
        // Partition series: 3 x (log start, HW, LSO, gap, stuck) = 15; the topic: count,
        // withheld, three sums, largest gap, largest stuck = 7 (no withheld age, no
        // forensics). The group: info, members, isolation level, 4 states; 3 partitions x (committed, 3
        // lags, hw time lag) = 15; the topic: committed sum, 3 lag sums, largest hw time
        // lag = 5.
        assert_eq!(
            counted(&partitions, &groups, PARTITION),
            15 + 7 + 7 + 15 + 5 + CLUSTER
        );
        // `topic`: only partition 0's series, but the group asked for every partition.
        assert_eq!(
            counted(&partitions, &groups, TOPIC),
            5 + 7 + 7 + 15 + 5 + CLUSTER
        );
        // A group of `topic` granularity: its position on partition 0 only.
        let groups = vec![group("g", "t", 3, Granularity::Topic)];
        assert_eq!(
            counted(&partitions, &groups, TOPIC),
            5 + 7 + 7 + 5 + 5 + CLUSTER
        );
        // kafka_exporter's families: current and oldest offset per partition (no
        // replication known here), per group-partition and group-topic two each, and the
        // broker count (no broker listed here).
        let compat = Exposition {
            kafka_exporter: true,
            assigned_only: false,
            owner_labels: false,
            ..TOPIC
        };
        assert_eq!(
            counted(&partitions, &groups, compat),
            5 + 7 + 7 + 5 + 5 + 3 * 2 + 3 * 2 + 2 + 1 + CLUSTER
        );
        // A transaction open on partition 2 whose LSO moved since the last cycle (a busy
        // exactly-once partition): withheld, not pinned, no partition series.
        partitions[2] = partition("t", 2, 9, 7, 0.0);
        assert!(!crate::derive::series::pinned(&partitions[2]));
        assert_eq!(
            counted(&partitions, &groups, TOPIC),
            5 + 7 + 7 + 5 + 5 + CLUSTER
        );
    }

    /// Member series churn with every consumer restart: the guard leaves them out with
    /// the group's offsets, and keeps them for a group it keeps.
    #[test]
    fn the_guard_leaves_member_series_out_with_the_group() {
        let partitions: Vec<PartitionState> =
            (0..10).map(|p| partition("t", p, 5, 5, 0.0)).collect();
        let groups: Vec<GroupState> = ["a", "b"]
            .iter()
            .map(|name| {
                let mut g = group(name, "t", 10, Granularity::Partition);
                g.detail = Some(crate::kafka::GroupDetail {
                    epoch: Some(1),
                    assignment_epoch: None,
                    members: vec![crate::kafka::RawMember {
                        member_id: format!("{name}-m1"),
                        client_id: format!("{name}-client"),
                        client_host: "/10.0.0.1".into(),
                        assigned: Some(vec![("t".into(), (0..10).collect())]),
                        ..Default::default()
                    }],
                });
                g
            })
            .collect();
        let mut guarded = snapshot(partitions, groups, PARTITION);
        guarded.left_out_groups = HashSet::from(["b".to_string()]);
        let (_tx, rx) = watch::channel(Some(Arc::new(guarded)));
        let text = Metrics::new(vec![rx]).encode_openmetrics();
        assert!(text.contains("member_id=\"a-m1\""), "{text}");
        assert!(!text.contains("member_id=\"b-m1\""), "{text}");
    }

    #[test]
    fn the_guard_leaves_out_whole_groups_outside_the_priority_list_and_changes_no_group() {
        let partitions: Vec<PartitionState> =
            (0..10).map(|p| partition("t", p, 5, 5, 0.0)).collect();
        let groups: Vec<GroupState> = ["a-critical", "b", "c"]
            .iter()
            .map(|name| group(name, "t", 10, Granularity::Partition))
            .collect();
        let whole = snapshot(partitions.clone(), groups.clone(), PARTITION);
        // 10 x 5 + 7 for the topic; per group 7 + 10 x 5 + 5 = 62 (55 of them offsets).
        let all = 57 + 3 * 62 + CLUSTER;
        assert_eq!(series_count(&whole), all);
        let critical = |g: &str| g.ends_with("critical");
        let trimmed = guard(&whole, Some(1000), critical);
        assert_eq!((trimmed.dropped, trimmed.shown), (0, all));
        assert!(trimmed.groups.is_empty());

        // One group (the last by name) is enough.
        let trimmed = guard(&whole, Some(all - 6), critical);
        assert_eq!(trimmed.dropped, 55);
        assert_eq!(trimmed.groups, HashSet::from(["c".to_string()]));
        // The priority group is kept even over the limit.
        let trimmed = guard(&whole, Some(60), critical);
        assert_eq!(trimmed.dropped, 110);
        assert_eq!(trimmed.shown, all - 110);
        assert!(!trimmed.groups.contains("a-critical"));

        // What the guard decides is what the render leaves out, counted the same way, and
        // the snapshot keeps every group's offsets (the status page shows them).
        let mut guarded = whole.clone();
        guarded.left_out_groups = trimmed.groups.clone();
        assert_eq!(series_count(&guarded), trimmed.shown);
        assert!(guarded
            .groups
            .iter()
            .all(|g| g.offsets.as_ref().unwrap().len() == 10));
        let (_tx, rx) = watch::channel(Some(Arc::new(guarded)));
        let text = Metrics::new(vec![rx]).encode_openmetrics();
        let rendered = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with("kafka_lso_exporter_build_info"))
            .count();
        assert_eq!(rendered, trimmed.shown, "{text}");
        assert!(!text.contains("group=\"b\",topic"), "{text}");
        assert!(text.contains("kafka_consumergroup_members{kafka_cluster=\"prod\",group=\"b\"} 1"));

        // In `topic` granularity the same groups cost far less.
        let groups: Vec<GroupState> = ["a", "b", "c"]
            .iter()
            .map(|name| group(name, "t", 10, Granularity::Topic))
            .collect();
        assert_eq!(
            counted(&partitions, &groups, TOPIC),
            7 + 3 * (7 + 5) + CLUSTER
        );
    }

    #[test]
    fn kafka_exporter_families_skip_share_groups() {
        let partitions = vec![partition("t", 0, 5, 5, 0.0)];
        let mut share = group("q", "t", 1, Granularity::Partition);
        share.group_type = "share".into();
        share.isolation = Some(crate::kafka::Isolation::ReadCommitted);
        let compat = Exposition {
            kafka_exporter: true,
            assigned_only: false,
            owner_labels: false,
            ..PARTITION
        };
        // The same count with and without compat: a share group commits no offsets.
        assert_eq!(
            counted(&partitions, std::slice::from_ref(&share), compat)
                - counted(&partitions, &[], compat),
            counted(&partitions, std::slice::from_ref(&share), PARTITION)
                - counted(&partitions, &[], PARTITION)
        );
    }
}
