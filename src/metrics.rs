//! `/metrics` rendering. Sampled values are read from the clusters' latest snapshots at
//! scrape time by [`SnapshotCollector`], so a series that is gone from the snapshot is
//! gone from the output. The exporter's own counters and the cycle histogram live in a
//! `prometheus-client` registry for the life of the process.
//!
//! prometheus-client writes OpenMetrics text. Scrapers that do not ask for OpenMetrics get
//! the Prometheus text format 0.0.4, derived by [`to_prometheus_text`].

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::UNIX_EPOCH;

use axum::body::Bytes;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeGaugeValue, EncodeLabelSet, GaugeValueEncoder,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use crate::kafka::Stage;
use crate::snapshot::{group_states, Anomaly, ClusterSnapshot, GroupState};

/// The latest snapshot of one cluster, `None` until its first cycle ends.
pub type SnapshotReceiver = watch::Receiver<Option<Arc<ClusterSnapshot>>>;

/// Content type of the Prometheus text format.
pub const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// Content type of the OpenMetrics text format.
pub const OPENMETRICS_TEXT: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Cycle duration histogram buckets, seconds.
const CYCLE_BUCKETS: &[f64] = &[0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabels {
    cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    cluster: String,
    stage: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnomalyLabels {
    cluster: String,
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
    anomalies: Family<AnomalyLabels, Counter>,
    cycle_duration: Family<ClusterLabels, Histogram>,
    generation: AtomicU64,
    rendered: Mutex<Rendered>,
}

/// Bodies rendered for one generation, one per [`Variant`].
#[derive(Debug, Default)]
struct Rendered {
    generation: u64,
    bodies: [Option<Bytes>; 4],
}

/// What a scraper asked for: the format and whether it accepts gzip.
#[derive(Debug, Clone, Copy)]
struct Variant {
    openmetrics: bool,
    gzip: bool,
}

impl Variant {
    fn new(accept: Option<&str>, accept_gzip: bool) -> Self {
        Self {
            openmetrics: accept.is_some_and(|a| a.contains("application/openmetrics-text")),
            gzip: accept_gzip,
        }
    }

    fn slot(self) -> usize {
        usize::from(self.openmetrics) * 2 + usize::from(self.gzip)
    }

    fn content_type(self) -> &'static str {
        if self.openmetrics {
            OPENMETRICS_TEXT
        } else {
            PROMETHEUS_TEXT
        }
    }
}

fn gzip(body: &[u8]) -> Bytes {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 8),
        flate2::Compression::fast(),
    );
    encoder
        .write_all(body)
        .and_then(|()| encoder.finish())
        .map(Bytes::from)
        .expect("compressing into memory cannot fail")
}

impl Metrics {
    /// Builds the registry for the given clusters' snapshot channels.
    pub fn new(clusters: Vec<SnapshotReceiver>) -> Self {
        let mut registry = Registry::default();
        let errors = Family::<StageLabels, Counter>::default();
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
        registry.register_collector(Box::new(SnapshotCollector { clusters }));
        Self {
            registry,
            errors,
            anomalies,
            cycle_duration,
            generation: AtomicU64::new(1),
            rendered: Mutex::new(Rendered::default()),
        }
    }

    /// Makes every cluster's counters visible at 0 before anything happened, so that
    /// `rate()` and `increase()` see the first failure.
    pub fn init_cluster(&self, cluster: &str) {
        let stages = [
            Stage::Metadata,
            Stage::LogStartOffset,
            Stage::ListGroups,
            Stage::GroupOffsets,
            Stage::LastStableOffset,
            Stage::HighWatermark,
            Stage::DescribeProducers,
            Stage::DescribeTransactions,
            Stage::ReadRecords,
            Stage::DescribeGroups,
            Stage::ShareGroupOffsets,
        ];
        for stage in stages {
            drop(self.errors.get_or_create(&StageLabels {
                cluster: cluster.to_string(),
                stage: stage.as_str(),
            }));
        }
        for kind in [
            Anomaly::LsoAboveHighWatermark,
            Anomaly::CommittedBeyondHighWatermark,
        ] {
            drop(self.anomalies.get_or_create(&AnomalyLabels {
                cluster: cluster.to_string(),
                kind: kind.as_str(),
            }));
        }
    }

    pub fn count_errors(&self, cluster: &str, stage: Stage, count: u64) {
        self.errors
            .get_or_create(&StageLabels {
                cluster: cluster.to_string(),
                stage: stage.as_str(),
            })
            .inc_by(count);
    }

    pub fn count_anomaly(&self, cluster: &str, kind: Anomaly) {
        self.anomalies
            .get_or_create(&AnomalyLabels {
                cluster: cluster.to_string(),
                kind: kind.as_str(),
            })
            .inc();
    }

    pub fn observe_cycle(&self, cluster: &str, seconds: f64) {
        self.cycle_duration
            .get_or_create(&ClusterLabels {
                cluster: cluster.to_string(),
            })
            .observe(seconds);
    }

    /// Renders everything as OpenMetrics text.
    pub fn encode_openmetrics(&self) -> String {
        let mut out = String::with_capacity(64 * 1024);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    /// Marks everything rendered so far as outdated; called when a cycle has published
    /// its snapshot and counted its errors.
    pub fn cycle_finished(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// Renders the variant Prometheus asks for (OpenMetrics, gzip) right after a cycle,
    /// so that the first scrape of the cycle is served from the cache instead of waiting
    /// for the render. Blocking: call from a blocking thread.
    pub fn prerender(&self) {
        let _ = self.encode_for(Some(PROMETHEUS_ACCEPT), true);
    }

    /// The body already rendered for this cycle, if any; never renders and never waits for
    /// a render in progress, so it may run on an async worker thread.
    pub fn cached(
        &self,
        accept: Option<&str>,
        accept_gzip: bool,
    ) -> Option<(&'static str, bool, Bytes)> {
        let variant = Variant::new(accept, accept_gzip);
        let rendered = self.rendered.try_lock().ok()?;
        if rendered.generation != self.generation.load(Ordering::Acquire) {
            return None;
        }
        let body = rendered.bodies[variant.slot()].clone()?;
        Some((variant.content_type(), variant.gzip, body))
    }

    /// The body in the format the `Accept` header asks for, gzip-compressed when the
    /// scraper accepts it (Prometheus does): (content type, gzipped, body). Each variant is
    /// rendered at most once per cycle; concurrent scrapes wait for one render.
    pub fn encode_for(
        &self,
        accept: Option<&str>,
        accept_gzip: bool,
    ) -> (&'static str, bool, Bytes) {
        let variant = Variant::new(accept, accept_gzip);
        let generation = self.generation.load(Ordering::Acquire);
        let mut rendered = self
            .rendered
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if rendered.generation != generation {
            *rendered = Rendered {
                generation,
                ..Rendered::default()
            };
        }
        let plain = Variant {
            gzip: false,
            ..variant
        };
        let text = rendered.bodies[plain.slot()]
            .get_or_insert_with(|| {
                let openmetrics = self.encode_openmetrics();
                Bytes::from(if variant.openmetrics {
                    openmetrics
                } else {
                    to_prometheus_text(&openmetrics)
                })
            })
            .clone();
        let body = if variant.gzip {
            rendered.bodies[variant.slot()]
                .get_or_insert_with(|| gzip(&text))
                .clone()
        } else {
            text
        };
        (variant.content_type(), variant.gzip, body)
    }
}

/// The `Accept` header Prometheus sends by default.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// Converts prometheus-client's OpenMetrics output to the Prometheus text format 0.0.4.
///
/// For the metric types this exporter uses (counter, gauge, histogram) the two formats
/// differ in three places only: the `# EOF` trailer, `# UNIT` lines, and counters, whose
/// HELP and TYPE lines name the family without `_total` in OpenMetrics but with it in the
/// Prometheus format (where the samples carry `_total` in both).
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let counters: HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len() + counters.len() * 24);
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let header = line
            .strip_prefix("# HELP ")
            .map(|rest| ("# HELP ", rest))
            .or_else(|| line.strip_prefix("# TYPE ").map(|rest| ("# TYPE ", rest)));
        if let Some((prefix, rest)) = header {
            let name = rest.split(' ').next().unwrap_or_default();
            if counters.contains(name) {
                out.push_str(prefix);
                out.push_str(name);
                out.push_str("_total");
                out.push_str(&rest[name.len()..]);
                out.push('\n');
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Renders the sampled series of every cluster from its latest snapshot.
#[derive(Debug)]
struct SnapshotCollector {
    clusters: Vec<SnapshotReceiver>,
}

type Labels<'a> = [(&'static str, &'a str)];

impl prometheus_client::collector::Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Hold each snapshot (an Arc) for the whole scrape, not the channel's lock.
        let snapshots: Vec<Arc<ClusterSnapshot>> = self
            .clusters
            .iter()
            .filter_map(|rx| rx.borrow().clone())
            .collect();

        type PartitionValue = fn(&crate::snapshot::PartitionState) -> Option<Value>;
        let partition_families: [(&str, &str, PartitionValue); 9] = [
            ("kafka_partition_log_start_offset", "Earliest offset of the partition", |p| {
                p.log_start_offset.map(Value::Count)
            }),
            ("kafka_partition_high_watermark", "High watermark: the latest offset under read_uncommitted", |p| {
                p.high_watermark.map(Value::Count)
            }),
            ("kafka_partition_last_stable_offset", "Last stable offset: the latest offset under read_committed", |p| {
                p.last_stable_offset.map(Value::Count)
            }),
            ("kafka_partition_hw_minus_lso", "High watermark minus last stable offset: records withheld from read_committed consumers by open transactions", |p| {
                p.visibility.map(|v| Value::Count(v.hw_minus_lso))
            }),
            ("kafka_partition_lso_stuck_seconds", "Seconds the last stable offset has not moved while behind the high watermark; 0 when they are equal", |p| {
                p.visibility.map(|v| Value::Seconds(v.lso_stuck_seconds))
            }),
            ("kafka_partition_withheld_age_seconds", "Age of the oldest record withheld from read_committed consumers (the record at the last stable offset), from its timestamp; 0 when the high watermark equals the last stable offset", |p| {
                p.withheld_age_seconds.map(Value::Seconds)
            }),
            ("kafka_partition_open_transactions", "Open transactions in the partition (asked of the leader only while HW > LSO; 0 when they are equal)", |p| {
                p.transactions.as_ref().map(|t| Value::Count(t.len() as i64))
            }),
            ("kafka_partition_oldest_transaction_age_seconds", "Age of the oldest open transaction in the partition, from its coordinator's start time; 0 when none is open", |p| {
                p.transactions.as_ref().map(|t| Value::Seconds(t.iter().map(|t| t.age_seconds).fold(0.0, f64::max)))
            }),
            ("kafka_partition_hanging_transactions", "Open transactions in the partition older than transaction.max.timeout.ms plus hanging_margin (KIP-664): by the coordinator's start time, or since the producer's last write when no coordinator reports them as open there", |p| {
                p.transactions.as_ref().map(|t| Value::Count(t.iter().filter(|t| t.hanging).count() as i64))
            }),
        ];
        for (name, help, value) in partition_families {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for snapshot in &snapshots {
                for p in &snapshot.partitions {
                    if let Some(v) = value(p) {
                        let labels: &Labels =
                            &[("cluster", &snapshot.cluster), ("topic", &p.topic)];
                        gauge(&mut family, &(labels, [("partition", p.partition)]), v)?;
                    }
                }
            }
        }

        let mut family = encoder.encode_descriptor(
            "kafka_transaction_open_info",
            "An open transaction holding the partition's last stable offset; the value is its age in seconds",
            None,
            MetricType::Gauge,
        )?;
        for snapshot in &snapshots {
            for p in &snapshot.partitions {
                for t in p.transactions.iter().flatten() {
                    let producer_id = t.producer_id.to_string();
                    let producer_epoch = t.producer_epoch.to_string();
                    let start_offset = t.start_offset.to_string();
                    let labels: &Labels = &[
                        ("cluster", &snapshot.cluster),
                        ("topic", &p.topic),
                        ("partition", &p.partition.to_string()),
                        ("transactional_id", &t.transactional_id),
                        ("producer_id", &producer_id),
                        ("producer_epoch", &producer_epoch),
                        ("start_offset", &start_offset),
                    ];
                    gauge(&mut family, &labels, t.age_seconds)?;
                }
            }
        }

        type LagValue = fn(&crate::snapshot::GroupPartitionState) -> Option<Value>;
        let group_partition_families: [(&str, &str, LagValue); 6] = [
            ("kafka_consumergroup_committed_offset", "Committed offset of the group", |g| {
                Some(Value::Count(g.committed_offset))
            }),
            ("kafka_consumergroup_hw_lag", "Records a consumer at the committed offset would still receive up to the high watermark: max(0, high watermark - committed offset) less the commit/abort markers in that range", |g| {
                g.lag.map(|l| Value::Count(l.hw_lag))
            }),
            ("kafka_consumergroup_lso_lag", "Records a read_committed consumer at the committed offset can still read now: up to the last stable offset, less commit/abort markers and records of aborted transactions", |g| {
                g.lag.map(|l| Value::Count(l.lso_lag))
            }),
            ("kafka_consumergroup_committed_beyond_lso", "max(0, committed offset - last stable offset): records read before their transaction was decided", |g| {
                g.lag.map(|l| Value::Count(l.committed_beyond_lso))
            }),
            ("kafka_consumergroup_hw_lag_seconds", "Seconds since the first record the group would still receive up to the high watermark was written; 0 when there is none", |g| {
                g.hw_lag_seconds.map(Value::Seconds)
            }),
            ("kafka_consumergroup_lso_lag_seconds", "Seconds since the first record a read_committed consumer at the committed offset could read now was written; 0 when there is none", |g| {
                g.lso_lag_seconds.map(Value::Seconds)
            }),
        ];
        for (name, help, value) in group_partition_families {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for snapshot in &snapshots {
                for group in snapshot.groups.iter().filter(|g| g.group_type != "share") {
                    for g in group.offsets.iter().flatten() {
                        if let Some(v) = value(g) {
                            let labels: &Labels = &[
                                ("cluster", &snapshot.cluster),
                                ("group", &group.name),
                                ("topic", &g.topic),
                            ];
                            gauge(&mut family, &(labels, [("partition", g.partition)]), v)?;
                        }
                    }
                }
            }
        }

        type ShareValue = fn(&GroupState, &crate::snapshot::GroupPartitionState) -> Option<Value>;
        let share_families: [(&str, &str, ShareValue); 3] = [
            ("kafka_sharegroup_start_offset", "Share-partition start offset of the share group: every record below it has been delivered and acknowledged", |_, g| {
                Some(Value::Count(g.committed_offset))
            }),
            ("kafka_sharegroup_lag", "Records the share group may still deliver from its start offset: up to the last stable offset with share.isolation.level=read_committed, up to the high watermark otherwise; never commit/abort markers", |group, g| {
                group.share_lag(g).map(Value::Count)
            }),
            ("kafka_sharegroup_lag_seconds", "Seconds since the first record the share group may still deliver was written; 0 when there is none", |group, g| {
                group.share_lag_seconds(g).map(Value::Seconds)
            }),
        ];
        for (name, help, value) in share_families {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for snapshot in &snapshots {
                for group in snapshot.groups.iter().filter(|g| g.group_type == "share") {
                    for g in group.offsets.iter().flatten() {
                        if let Some(v) = value(group, g) {
                            let labels: &Labels = &[
                                ("cluster", &snapshot.cluster),
                                ("group", &group.name),
                                ("topic", &g.topic),
                            ];
                            gauge(&mut family, &(labels, [("partition", g.partition)]), v)?;
                        }
                    }
                }
            }
        }

        let mut family = encoder.encode_descriptor(
            "kafka_sharegroup_broker_lag",
            "The share group's lag on the partition as its broker computes it (KIP-1226, Kafka 4.2 and later): records past the start offset not yet acknowledged",
            None,
            MetricType::Gauge,
        )?;
        for snapshot in &snapshots {
            for group in &snapshot.groups {
                for lag in &group.broker_lags {
                    let labels: &Labels = &[
                        ("cluster", &snapshot.cluster),
                        ("group", &group.name),
                        ("topic", &lag.topic),
                    ];
                    gauge(
                        &mut family,
                        &(labels, [("partition", lag.partition)]),
                        lag.lag,
                    )?;
                }
            }
        }

        let mut family = encoder.encode_descriptor(
            "kafka_sharegroup_isolation_level",
            "The share group's share.isolation.level; always 1",
            None,
            MetricType::Gauge,
        )?;
        for snapshot in &snapshots {
            for group in &snapshot.groups {
                if let Some(isolation) = group.isolation {
                    let labels: &Labels = &[
                        ("cluster", &snapshot.cluster),
                        ("group", &group.name),
                        ("isolation_level", isolation.as_str()),
                    ];
                    gauge(&mut family, &labels, 1)?;
                }
            }
        }

        let mut family = encoder.encode_descriptor(
            "kafka_consumergroup_info",
            "The group's type (classic, consumer, share, streams) and its members' protocol type; always 1",
            None,
            MetricType::Gauge,
        )?;
        for snapshot in &snapshots {
            for group in &snapshot.groups {
                let labels: &Labels = &[
                    ("cluster", &snapshot.cluster),
                    ("group", &group.name),
                    ("type", &group.group_type),
                    ("protocol", &group.protocol),
                ];
                gauge(&mut family, &labels, 1)?;
            }
        }

        let mut family = encoder.encode_descriptor(
            "kafka_consumergroup_members",
            "Live members of the consumer group (absent when it could not be described)",
            None,
            MetricType::Gauge,
        )?;
        for snapshot in &snapshots {
            for group in &snapshot.groups {
                let labels: &Labels = &[("cluster", &snapshot.cluster), ("group", &group.name)];
                if let Some(members) = group.members {
                    gauge(&mut family, &labels, members as i64)?;
                }
            }
        }

        let mut family = encoder.encode_descriptor(
            "kafka_consumergroup_state",
            "State of the consumer group: 1 for the current state, 0 for the others",
            None,
            MetricType::Gauge,
        )?;
        for snapshot in &snapshots {
            for group in &snapshot.groups {
                let states = group_states(&group.group_type);
                let known = states.contains(&group.state.as_str());
                let extra = (!known).then_some(group.state.as_str());
                for state in states.iter().copied().chain(extra) {
                    let labels: &Labels = &[
                        ("cluster", &snapshot.cluster),
                        ("group", &group.name),
                        ("state", state),
                    ];
                    gauge(&mut family, &labels, i64::from(group.state == state))?;
                }
            }
        }

        let mut family = encoder.encode_descriptor(
            "kafka_lso_exporter_up",
            "1 if the last sampling cycle reached the cluster",
            None,
            MetricType::Gauge,
        )?;
        for snapshot in &snapshots {
            let labels: &Labels = &[("cluster", &snapshot.cluster)];
            gauge(&mut family, &labels, i64::from(snapshot.up))?;
        }

        let mut family = encoder.encode_descriptor(
            "kafka_lso_exporter_series_dropped",
            "Series left out in the last cycle because the cluster exceeded max_series",
            None,
            MetricType::Gauge,
        )?;
        for snapshot in &snapshots {
            let labels: &Labels = &[("cluster", &snapshot.cluster)];
            gauge(&mut family, &labels, snapshot.series_dropped as i64)?;
        }

        let mut family = encoder.encode_descriptor(
            "kafka_lso_exporter_last_success_timestamp_seconds",
            "Unix time at which the last cycle that reached the cluster ended",
            None,
            MetricType::Gauge,
        )?;
        for snapshot in &snapshots {
            if let Some(at) = snapshot.last_success {
                let seconds = at
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs_f64();
                let labels: &Labels = &[("cluster", &snapshot.cluster)];
                gauge(&mut family, &labels, seconds)?;
            }
        }
        Ok(())
    }
}

fn gauge(
    family: &mut prometheus_client::encoding::MetricEncoder,
    labels: &impl EncodeLabelSet,
    value: impl Into<Value>,
) -> Result<(), std::fmt::Error> {
    family.encode_family(labels)?.encode_gauge(&value.into())
}

/// A gauge value: offsets print as integers, durations as floats.
#[derive(Debug, Clone, Copy)]
enum Value {
    Count(i64),
    Seconds(f64),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Count(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Seconds(v)
    }
}

impl EncodeGaugeValue for Value {
    fn encode(&self, encoder: &mut GaugeValueEncoder) -> Result<(), std::fmt::Error> {
        match self {
            Value::Count(v) => v.encode(encoder),
            Value::Seconds(v) => v.encode(encoder),
        }
    }
}
