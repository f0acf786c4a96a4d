//! `/metrics` rendering. Sampled values are read from the clusters' latest snapshots at
//! scrape time by [`SnapshotCollector`], so a series that is gone from the snapshot is
//! gone from the output. The exporter's own counters and the cycle histogram live in a
//! `prometheus-client` registry for the life of the process.
//!
//! prometheus-client writes OpenMetrics text. Scrapers that do not ask for OpenMetrics get
//! the Prometheus text format 0.0.4, derived by [`to_prometheus_text`].

use std::collections::BTreeMap;
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

use crate::kafka::records::EosCost;
use crate::kafka::Stage;
use crate::series::{self, GroupTopicAggregate, TopicAggregate};
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
    kafka_cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StageLabels {
    kafka_cluster: String,
    stage: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnomalyLabels {
    kafka_cluster: String,
    kind: &'static str,
}

/// Labels of a per-topic counter; a marker counter adds `marker`.
type TopicLabels = Vec<(&'static str, String)>;

/// The cost of exactly-once per topic ([`EosCost`]): counters whose totals the cluster's
/// record reader keeps, brought up to them after each cycle.
#[derive(Debug, Default)]
struct EosCounters {
    markers: Family<TopicLabels, Counter>,
    aborted_records: Family<TopicLabels, Counter>,
    scanned_offsets: Family<TopicLabels, Counter>,
    /// Per cluster, the topics shown, to remove those that are gone.
    topics: Mutex<std::collections::HashMap<String, std::collections::BTreeSet<Arc<str>>>>,
}

/// The values of `kafka_topic_transaction_markers_total`'s `marker` label.
const MARKER_TYPES: [&str; 2] = ["commit", "abort"];

impl EosCounters {
    fn marker_labels(cluster: &str, topic: &str, marker: &'static str) -> TopicLabels {
        vec![
            (CLUSTER_LABEL, cluster.to_string()),
            ("topic", topic.to_string()),
            ("marker", marker.to_string()),
        ]
    }

    fn topic_labels(cluster: &str, topic: &str) -> TopicLabels {
        vec![
            (CLUSTER_LABEL, cluster.to_string()),
            ("topic", topic.to_string()),
        ]
    }

    fn update(&self, cluster: &str, cost: &BTreeMap<Arc<str>, EosCost>) {
        let mut shown = self.topics.lock().unwrap_or_else(|p| p.into_inner());
        let topics = shown.entry(cluster.to_string()).or_default();
        for gone in topics.iter().filter(|t| !cost.contains_key(*t)) {
            for marker in MARKER_TYPES {
                self.markers
                    .remove(&Self::marker_labels(cluster, gone, marker));
            }
            self.aborted_records
                .remove(&Self::topic_labels(cluster, gone));
            self.scanned_offsets
                .remove(&Self::topic_labels(cluster, gone));
        }
        for (topic, cost) in cost {
            let markers = [cost.commit_markers, cost.abort_markers];
            for (marker, total) in MARKER_TYPES.into_iter().zip(markers) {
                bring_to(
                    &self.markers,
                    &Self::marker_labels(cluster, topic, marker),
                    total,
                );
            }
            let labels = Self::topic_labels(cluster, topic);
            bring_to(&self.aborted_records, &labels, cost.aborted_records);
            bring_to(&self.scanned_offsets, &labels, cost.scanned_offsets);
        }
        *topics = cost.keys().cloned().collect();
    }
}

/// Brings a counter up to `total`; one above it (its topic was recreated, or the reader
/// counted afresh) starts over, which `rate()` reads as a counter reset.
fn bring_to(family: &Family<TopicLabels, Counter>, labels: &TopicLabels, total: u64) {
    let current = family.get_or_create(labels).get();
    if total < current {
        family.remove(labels);
        family.get_or_create(labels).inc_by(total);
    } else {
        family.get_or_create(labels).inc_by(total - current);
    }
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
    eos: EosCounters,
    /// The bodies rendered from the current cycle's values. Replaced only with the render
    /// turn held, so whatever is here belongs to the current cycle.
    rendered: Mutex<Rendered>,
    render_turn: Mutex<()>,
}

/// Bodies rendered for one cycle, one slot per [`Variant`].
type Rendered = [Option<Bytes>; 4];

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
        let eos = EosCounters::default();
        registry.register(
            "kafka_topic_transaction_markers",
            "Commit and abort markers (control records) the exporter read in the topic's logs, by marker (commit, abort), each counted once; only the parts of the logs it reads (docs/metrics.md, The cost of exactly-once)",
            eos.markers.clone(),
        );
        registry.register(
            "kafka_topic_aborted_records",
            "Records of aborted transactions the exporter read in the topic's logs, counted once their abort marker was read",
            eos.aborted_records.clone(),
        );
        registry.register(
            "kafka_topic_scanned_offsets",
            "Offsets of the topic whose record-batch headers the exporter read, each counted once: the denominator of the markers' share",
            eos.scanned_offsets.clone(),
        );
        registry.register_collector(Box::new(SnapshotCollector { clusters }));
        Self {
            registry,
            errors,
            anomalies,
            cycle_duration,
            eos,
            rendered: Mutex::new(Rendered::default()),
            render_turn: Mutex::new(()),
        }
    }

    /// Makes every cluster's counters visible at 0 before anything happened, so that
    /// `rate()` and `increase()` see the first failure.
    pub fn init_cluster(&self, cluster: &str) {
        for stage in Stage::ALL {
            drop(self.errors.get_or_create(&StageLabels {
                kafka_cluster: cluster.to_string(),
                stage: stage.as_str(),
            }));
        }
        for kind in [
            Anomaly::LsoAboveHighWatermark,
            Anomaly::CommittedBeyondHighWatermark,
        ] {
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

    pub fn count_anomaly(&self, cluster: &str, kind: Anomaly) {
        self.anomalies
            .get_or_create(&AnomalyLabels {
                kafka_cluster: cluster.to_string(),
                kind: kind.as_str(),
            })
            .inc();
    }

    /// Brings the cluster's exactly-once cost counters up to the totals its record
    /// reader keeps; topics no longer there lose their series. Call only after a cycle
    /// that reached the cluster (the totals of one that did not are empty).
    pub fn set_eos_cost(&self, cluster: &str, cost: &BTreeMap<Arc<str>, EosCost>) {
        self.eos.update(cluster, cost);
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
        let mut body = BodyWriter::new(variant);
        prometheus_client::encoding::text::encode(&mut body, &self.registry)
            .expect("writing to memory cannot fail");
        body.finish()
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
        let variant = Variant::new(Some(PROMETHEUS_ACCEPT), true);
        let body = self.render(variant);
        let mut bodies = Rendered::default();
        bodies[variant.slot()] = Some(body);
        *self.rendered() = bodies;
    }

    /// The body already rendered for this cycle, if any; never renders and never waits for
    /// a render, so it may run on an async worker thread.
    pub fn cached(
        &self,
        accept: Option<&str>,
        accept_gzip: bool,
    ) -> Option<(&'static str, bool, Bytes)> {
        let variant = Variant::new(accept, accept_gzip);
        let body = self.rendered()[variant.slot()].clone()?;
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
        let cached = self.rendered()[variant.slot()].clone();
        let body = cached.unwrap_or_else(|| {
            let body = self.render(variant);
            self.rendered()[variant.slot()] = Some(body.clone());
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

/// Receives the registry's text and turns it into one body: as OpenMetrics or converted
/// line by line to the Prometheus text format, compressed or not.
struct BodyWriter {
    prometheus: bool,
    /// Text not yet passed on: at most one chunk plus a partial line.
    pending: String,
    /// Prometheus text: a family's HELP line, held until its TYPE line says whether the
    /// family is a counter.
    help: Option<String>,
    converted: String,
    out: BodyOut,
}

enum BodyOut {
    Plain(Vec<u8>),
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
}

/// How much text a [`BodyWriter`] gathers before converting and compressing it.
const CHUNK: usize = 64 * 1024;

impl BodyWriter {
    fn new(variant: Variant) -> Self {
        Self {
            prometheus: !variant.openmetrics,
            pending: String::with_capacity(2 * CHUNK),
            help: None,
            converted: String::with_capacity(2 * CHUNK),
            out: if variant.gzip {
                BodyOut::Gzip(flate2::write::GzEncoder::new(
                    Vec::with_capacity(CHUNK),
                    flate2::Compression::fast(),
                ))
            } else {
                BodyOut::Plain(Vec::with_capacity(CHUNK))
            },
        }
    }

    /// Passes on every complete line gathered so far (every line when `all`).
    fn flush(&mut self, all: bool) {
        let end = if all {
            self.pending.len()
        } else {
            self.pending.rfind('\n').map_or(0, |i| i + 1)
        };
        if end == 0 {
            return;
        }
        let text: &str = if self.prometheus {
            self.converted.clear();
            for line in self.pending[..end].split_inclusive('\n') {
                convert_line(line, &mut self.help, &mut self.converted);
            }
            if all {
                if let Some(help) = self.help.take() {
                    self.converted.push_str(&help);
                }
            }
            &self.converted
        } else {
            &self.pending[..end]
        };
        match &mut self.out {
            BodyOut::Plain(out) => out.extend_from_slice(text.as_bytes()),
            BodyOut::Gzip(out) => {
                use std::io::Write;
                out.write_all(text.as_bytes())
                    .expect("compressing into memory cannot fail");
            }
        }
        self.pending.drain(..end);
    }

    fn finish(mut self) -> Bytes {
        self.flush(true);
        match self.out {
            BodyOut::Plain(out) => Bytes::from(out),
            BodyOut::Gzip(out) => {
                Bytes::from(out.finish().expect("compressing into memory cannot fail"))
            }
        }
    }
}

impl std::fmt::Write for BodyWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.pending.push_str(s);
        if self.pending.len() >= CHUNK {
            self.flush(false);
        }
        Ok(())
    }
}

/// Converts one line of prometheus-client's OpenMetrics output to the Prometheus text
/// format 0.0.4.
///
/// For the metric types this exporter uses (counter, gauge, histogram) the two formats
/// differ in three places only: the `# EOF` trailer, `# UNIT` lines, and counters, whose
/// HELP and TYPE lines name the family without `_total` in OpenMetrics but with it in the
/// Prometheus format (where the samples carry `_total` in both). A HELP line comes before
/// its family's TYPE line, so it waits in `help` until the TYPE line tells.
fn convert_line(line: &str, help: &mut Option<String>, out: &mut String) {
    if !line.starts_with('#') {
        if let Some(help) = help.take() {
            out.push_str(&help);
        }
        out.push_str(line);
        return;
    }
    if line.trim_end() == "# EOF" || line.starts_with("# UNIT ") {
        return;
    }
    if line.starts_with("# HELP ") {
        if let Some(previous) = help.replace(line.to_owned()) {
            out.push_str(&previous);
        }
        return;
    }
    if let Some(name) = line
        .strip_prefix("# TYPE ")
        .and_then(|rest| rest.trim_end().strip_suffix(" counter"))
    {
        if let Some(held) = help.take() {
            match held
                .strip_prefix("# HELP ")
                .and_then(|h| h.strip_prefix(name))
            {
                Some(text) if text.starts_with(' ') || text.starts_with('\n') => {
                    out.push_str("# HELP ");
                    out.push_str(name);
                    out.push_str("_total");
                    out.push_str(text);
                }
                _ => out.push_str(&held),
            }
        }
        out.push_str("# TYPE ");
        out.push_str(name);
        out.push_str("_total counter\n");
        return;
    }
    if let Some(held) = help.take() {
        out.push_str(&held);
    }
    out.push_str(line);
}

/// The `Accept` header Prometheus sends by default.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// Converts prometheus-client's OpenMetrics output to the Prometheus text format 0.0.4
/// (see [`convert_line`]).
pub fn to_prometheus_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help = None;
    for line in openmetrics.split_inclusive('\n') {
        convert_line(line, &mut help, &mut out);
    }
    if let Some(help) = help {
        out.push_str(&help);
    }
    out
}

/// Renders the sampled series of every cluster from its latest snapshot.
#[derive(Debug)]
struct SnapshotCollector {
    clusters: Vec<SnapshotReceiver>,
}

pub(crate) type Labels<'a> = [(&'static str, &'a str)];

/// The label naming the configured cluster on every series. Not `cluster`: many
/// Prometheus, Thanos and Mimir setups put that on every series as a target or external
/// label (the Prometheus guide on writing exporters names it as one to avoid).
pub const CLUSTER_LABEL: &str = "kafka_cluster";

/// One cluster's snapshot with what the render reads of it more than once.
pub(crate) struct Shown {
    pub(crate) snapshot: Arc<ClusterSnapshot>,
    /// Partitions whose LSO a transaction pins ([`series::pinned`]), sorted by topic and
    /// partition.
    pinned: Vec<(Arc<str>, i32)>,
    pub(crate) topics: Vec<TopicAggregate>,
    /// Per group (same order as `snapshot.groups`), its per-topic aggregates.
    pub(crate) group_topics: Vec<Vec<GroupTopicAggregate>>,
}

impl Shown {
    fn new(snapshot: Arc<ClusterSnapshot>) -> Self {
        // The partitions are sorted by topic and partition, and so is this.
        let pinned = snapshot
            .partitions
            .iter()
            .filter(|p| series::pinned(p))
            .map(|p| (p.topic.clone(), p.partition))
            .collect();
        let topics = series::topic_aggregates(&snapshot.partitions);
        let group_topics = snapshot
            .groups
            .iter()
            .map(series::group_topic_aggregates)
            .collect();
        Self {
            snapshot,
            pinned,
            topics,
            group_topics,
        }
    }

    pub(crate) fn cluster(&self) -> &str {
        &self.snapshot.cluster
    }

    /// The group's series on this partition are shown (as in
    /// [`series::group_partition_detail`]).
    fn group_partition_detail(&self, group: &GroupState, topic: &str, partition: i32) -> bool {
        group.granularity == crate::config::Granularity::Partition
            || self
                .pinned
                .binary_search_by(|(t, p)| (&**t, *p).cmp(&(topic, partition)))
                .is_ok()
    }
}

impl prometheus_client::collector::Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // Hold each snapshot (an Arc) for the whole scrape, not the channel's lock.
        let shown: Vec<Shown> = self
            .clusters
            .iter()
            .filter_map(|rx| rx.borrow().clone())
            .map(Shown::new)
            .collect();
        encode_partitions(&mut encoder, &shown)?;
        encode_topics(&mut encoder, &shown)?;
        encode_groups(&mut encoder, &shown)?;
        encode_cluster_transactions(&mut encoder, &shown)?;
        encode_exporter(&mut encoder, &shown)?;
        crate::compat::encode(&mut encoder, &shown)?;
        Ok(())
    }
}

/// Per-partition series: every partition in `partition` granularity, pinned ones in
/// `topic` granularity.
fn encode_partitions(
    encoder: &mut DescriptorEncoder,
    shown: &[Shown],
) -> Result<(), std::fmt::Error> {
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
        ("kafka_partition_oldest_transaction_age_seconds", "Age of the oldest open transaction in the partition whose age is known (see kafka_transaction_open_age_seconds); 0 when none is open, absent when none can be dated", |p| {
            p.oldest_transaction_age().map(Value::Seconds)
        }),
        ("kafka_partition_hanging_transactions", "Open transactions in the partition older than transaction.max.timeout.ms plus hanging_margin (KIP-664), by the age of kafka_transaction_open_age_seconds; one of unknown age is never counted", |p| {
            p.transactions.as_ref().map(|t| Value::Count(t.iter().filter(|t| t.hanging).count() as i64))
        }),
    ];
    for (name, help, value) in partition_families {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for cluster in shown {
            let exposition = cluster.snapshot.exposition;
            for p in cluster
                .snapshot
                .partitions
                .iter()
                .filter(|p| exposition.partition_detail(p))
            {
                if let Some(v) = value(p) {
                    let labels: &Labels =
                        &[(CLUSTER_LABEL, cluster.cluster()), ("topic", &p.topic)];
                    gauge(&mut family, &(labels, [("partition", p.partition)]), v)?;
                }
            }
        }
    }

    type TransactionValue = fn(&crate::snapshot::OpenTransaction) -> Option<Value>;
    let transaction_families: [(&str, &str, TransactionValue); 2] = [
        ("kafka_transaction_open_info", "An open transaction holding records of the partition back from read_committed consumers; always 1 (its age: kafka_transaction_open_age_seconds)", |_| {
            Some(Value::Count(1))
        }),
        ("kafka_transaction_open_age_seconds", "Age of an open transaction in the partition, by broker clocks or the exporter's own: from its coordinator's start time when the coordinator reports it open there, else from the LogAppendTime of its first record or since the exporter first saw it, whichever is older; absent when none applies (never from a timestamp the producer wrote)", |t| {
            t.age_seconds.map(Value::Seconds)
        }),
    ];
    for (name, help, value) in transaction_families {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for cluster in shown {
            let exposition = cluster.snapshot.exposition;
            for p in cluster
                .snapshot
                .partitions
                .iter()
                .filter(|p| exposition.partition_detail(p))
            {
                for t in p.transactions.iter().flatten() {
                    let producer_id = t.producer_id.to_string();
                    let producer_epoch = t.producer_epoch.to_string();
                    let start_offset = t.start_offset.to_string();
                    let labels: &Labels = &[
                        (CLUSTER_LABEL, cluster.cluster()),
                        ("topic", &p.topic),
                        ("partition", &p.partition.to_string()),
                        ("transactional_id", &t.transactional_id),
                        ("producer_id", &producer_id),
                        ("producer_epoch", &producer_epoch),
                        ("start_offset", &start_offset),
                    ];
                    if let Some(v) = value(t) {
                        gauge(&mut family, &labels, v)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Per-topic aggregates of the partitions, in every granularity.
fn encode_topics(encoder: &mut DescriptorEncoder, shown: &[Shown]) -> Result<(), std::fmt::Error> {
    type TopicValue = fn(&TopicAggregate) -> Option<Value>;
    let topic_families: [(&str, &str, TopicValue); 10] = [
        ("kafka_topic_partitions", "Partitions of the topic sampled in the last cycle", |t| {
            Some(Value::Count(t.partitions))
        }),
        ("kafka_topic_withheld_partitions", "Partitions of the topic whose high watermark is ahead of their last stable offset: an open transaction withholds records there", |t| {
            t.withheld_partitions.map(Value::Count)
        }),
        ("kafka_topic_log_start_offset", "Sum of the log start offsets of the topic's partitions", |t| {
            t.log_start_offset_sum.map(Value::Count)
        }),
        ("kafka_topic_high_watermark", "Sum of the high watermarks of the topic's partitions; its rate is the records (and markers) written per second", |t| {
            t.high_watermark_sum.map(Value::Count)
        }),
        ("kafka_topic_last_stable_offset", "Sum of the last stable offsets of the topic's partitions; its rate is what becomes visible to read_committed consumers per second", |t| {
            t.last_stable_offset_sum.map(Value::Count)
        }),
        ("kafka_topic_max_hw_minus_lso", "Largest high watermark minus last stable offset of the topic's partitions", |t| {
            t.max_hw_minus_lso.map(Value::Count)
        }),
        ("kafka_topic_max_lso_stuck_seconds", "Longest time a last stable offset of the topic has not moved while behind its high watermark", |t| {
            t.max_lso_stuck_seconds.map(Value::Seconds)
        }),
        ("kafka_topic_max_withheld_age_seconds", "Age of the oldest record of the topic withheld from read_committed consumers, from its timestamp", |t| {
            t.max_withheld_age_seconds.map(Value::Seconds)
        }),
        ("kafka_topic_open_transactions", "Open transactions in the topic's partitions, counted once per partition they write to", |t| {
            t.open_transactions.map(Value::Count)
        }),
        ("kafka_topic_hanging_transactions", "Hanging transactions in the topic's partitions, counted once per partition they hold", |t| {
            t.hanging_transactions.map(Value::Count)
        }),
    ];
    for (name, help, value) in topic_families {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for cluster in shown {
            for t in &cluster.topics {
                if let Some(v) = value(t) {
                    let labels: &Labels =
                        &[(CLUSTER_LABEL, cluster.cluster()), ("topic", &t.topic)];
                    gauge(&mut family, &labels, v)?;
                }
            }
        }
    }

    let mut family = encoder.encode_descriptor(
        "kafka_topic_retention_seconds",
        "The topic's retention.ms in seconds (DescribeConfigs, read again every 10 min); absent when retention is unlimited or could not be read",
        None,
        MetricType::Gauge,
    )?;
    for cluster in shown {
        for t in &cluster.topics {
            let Some(&ms) = cluster.snapshot.retention_ms.get(&t.topic) else {
                continue;
            };
            if ms >= 0 {
                let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster()), ("topic", &t.topic)];
                gauge(&mut family, &labels, Value::Seconds(ms as f64 / 1000.0))?;
            }
        }
    }
    Ok(())
}

fn encode_groups(encoder: &mut DescriptorEncoder, shown: &[Shown]) -> Result<(), std::fmt::Error> {
    type LagValue = fn(&crate::snapshot::GroupPartitionState) -> Option<Value>;
    let group_partition_families: [(&str, &str, LagValue); 10] = [
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
            g.hw_time_lag.map(|t| Value::Seconds(t.seconds()))
        }),
        ("kafka_consumergroup_lso_lag_seconds", "Seconds since the first record a read_committed consumer at the committed offset could read now was written; 0 when there is none", |g| {
            g.lso_time_lag.map(|t| Value::Seconds(t.seconds()))
        }),
        ("kafka_consumergroup_commit_stall_seconds", "Seconds since the group's committed offset last moved while it had something to read (counted by the exporter from its start); 0 when it has nothing to read", |g| {
            g.commit_stall_seconds.map(Value::Seconds)
        }),
        ("kafka_consumergroup_retention_margin", "Committed offset minus the log start offset, at least 0: offsets retention can delete before it reaches the group's next unread record", |g| {
            g.retention_margin.map(Value::Count)
        }),
        ("kafka_consumergroup_retention_margin_seconds", "The topic's retention.ms less the age of the first record the group has not consumed (the whole retention when there is none): at least this many seconds before time retention can delete it; 0 once it is gone", |g| {
            g.retention_margin_seconds.map(Value::Seconds)
        }),
        ("kafka_consumergroup_lost_records", "Offsets between the committed offset and the log start offset once retention passed the committed offset: records deleted before the group consumed them (only while above 0)", |g| {
            g.lost_records.filter(|n| *n > 0).map(Value::Count)
        }),
    ];
    for (name, help, value) in group_partition_families {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for cluster in shown {
            for group in cluster
                .snapshot
                .groups
                .iter()
                .filter(|g| g.group_type != "share")
            {
                for g in group.offsets.iter().flatten() {
                    if !cluster.group_partition_detail(group, &g.topic, g.partition) {
                        continue;
                    }
                    if let Some(v) = value(g) {
                        let labels: &Labels = &[
                            (CLUSTER_LABEL, cluster.cluster()),
                            ("group", &group.name),
                            ("topic", &g.topic),
                        ];
                        gauge(&mut family, &(labels, [("partition", g.partition)]), v)?;
                    }
                }
            }
        }
    }

    type GroupTopicValue = fn(&GroupTopicAggregate) -> Option<Value>;
    let group_topic_families: [(&str, &str, GroupTopicValue); 9] = [
        ("kafka_consumergroup_topic_committed_offset", "Sum of the group's committed offsets on the topic; its rate is the group's progress in offsets per second", |t| {
            t.committed_offset_sum.map(Value::Count)
        }),
        ("kafka_consumergroup_topic_hw_lag", "Sum over the topic's partitions of kafka_consumergroup_hw_lag", |t| {
            t.hw_lag.map(Value::Count)
        }),
        ("kafka_consumergroup_topic_lso_lag", "Sum over the topic's partitions of kafka_consumergroup_lso_lag", |t| {
            t.lso_lag.map(Value::Count)
        }),
        ("kafka_consumergroup_topic_committed_beyond_lso", "Sum over the topic's partitions of kafka_consumergroup_committed_beyond_lso", |t| {
            t.committed_beyond_lso.map(Value::Count)
        }),
        ("kafka_consumergroup_topic_max_hw_lag_seconds", "Largest kafka_consumergroup_hw_lag_seconds of the group's partitions of the topic", |t| {
            t.max_hw_lag_seconds.map(Value::Seconds)
        }),
        ("kafka_consumergroup_topic_max_lso_lag_seconds", "Largest kafka_consumergroup_lso_lag_seconds of the group's partitions of the topic", |t| {
            t.max_lso_lag_seconds.map(Value::Seconds)
        }),
        ("kafka_consumergroup_topic_max_commit_stall_seconds", "Longest kafka_consumergroup_commit_stall_seconds of the group's partitions of the topic", |t| {
            t.max_commit_stall_seconds.map(Value::Seconds)
        }),
        ("kafka_consumergroup_topic_min_retention_margin_seconds", "Smallest kafka_consumergroup_retention_margin_seconds of the group's partitions of the topic", |t| {
            t.min_retention_margin_seconds.map(Value::Seconds)
        }),
        ("kafka_consumergroup_topic_lost_records", "Sum over the topic's partitions of kafka_consumergroup_lost_records (0 when none was lost)", |t| {
            t.lost_records.map(Value::Count)
        }),
    ];
    for (name, help, value) in group_topic_families {
        encode_group_topics(encoder, shown, name, help, false, value)?;
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
        for cluster in shown {
            for group in cluster
                .snapshot
                .groups
                .iter()
                .filter(|g| g.group_type == "share")
            {
                for g in group.offsets.iter().flatten() {
                    if !cluster.group_partition_detail(group, &g.topic, g.partition) {
                        continue;
                    }
                    if let Some(v) = value(group, g) {
                        let labels: &Labels = &[
                            (CLUSTER_LABEL, cluster.cluster()),
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
    for cluster in shown {
        for group in &cluster.snapshot.groups {
            for lag in &group.broker_lags {
                if !cluster.group_partition_detail(group, &lag.topic, lag.partition) {
                    continue;
                }
                let labels: &Labels = &[
                    (CLUSTER_LABEL, cluster.cluster()),
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

    let share_topic_families: [(&str, &str, GroupTopicValue); 3] = [
        ("kafka_sharegroup_topic_lag", "Sum over the topic's partitions of kafka_sharegroup_lag", |t| {
            t.share_lag.map(Value::Count)
        }),
        ("kafka_sharegroup_topic_max_lag_seconds", "Largest kafka_sharegroup_lag_seconds of the share group's partitions of the topic", |t| {
            t.max_share_lag_seconds.map(Value::Seconds)
        }),
        ("kafka_sharegroup_topic_broker_lag", "Sum over the partitions of the topic its brokers reported of kafka_sharegroup_broker_lag", |t| {
            t.broker_lag.map(Value::Count)
        }),
    ];
    for (name, help, value) in share_topic_families {
        encode_group_topics(encoder, shown, name, help, true, value)?;
    }

    let mut family = encoder.encode_descriptor(
        "kafka_sharegroup_isolation_level",
        "The share group's share.isolation.level; always 1",
        None,
        MetricType::Gauge,
    )?;
    for cluster in shown {
        for group in &cluster.snapshot.groups {
            if let Some(isolation) = group.isolation {
                let labels: &Labels = &[
                    (CLUSTER_LABEL, cluster.cluster()),
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
    for cluster in shown {
        for group in &cluster.snapshot.groups {
            let labels: &Labels = &[
                (CLUSTER_LABEL, cluster.cluster()),
                ("group", &group.name),
                ("group_type", &group.group_type),
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
    for cluster in shown {
        for group in &cluster.snapshot.groups {
            let Some(members) = group.members else {
                continue;
            };
            if cluster.snapshot.exposition.kafka_exporter {
                // kafka_exporter's family of the same name labels the group
                // `consumergroup`: one series answers both.
                let labels: &Labels = &[
                    (CLUSTER_LABEL, cluster.cluster()),
                    ("group", &group.name),
                    ("consumergroup", &group.name),
                ];
                gauge(&mut family, &labels, members as i64)?;
            } else {
                let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster()), ("group", &group.name)];
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
    for cluster in shown {
        for group in &cluster.snapshot.groups {
            let states = group_states(&group.group_type);
            let known = states.contains(&group.state.as_str());
            let extra = (!known).then_some(group.state.as_str());
            for state in states.iter().copied().chain(extra) {
                let labels: &Labels = &[
                    (CLUSTER_LABEL, cluster.cluster()),
                    ("group", &group.name),
                    ("state", state),
                ];
                gauge(&mut family, &labels, i64::from(group.state == state))?;
            }
        }
    }

    let mut family = encoder.encode_descriptor(
        "kafka_consumergroup_status",
        "The group's commit progress, worst of its partitions: ok, lagging (commits but has not caught up for stall_after), blocked (by an open transaction), rewinding (its committed offset went back), stalled (something to read, no commit for stall_after), stopped (stalled while its lag grows); 1 for the current status, 0 for the others",
        None,
        MetricType::Gauge,
    )?;
    for cluster in shown {
        for group in &cluster.snapshot.groups {
            let Some(current) = group.status else {
                continue;
            };
            for status in crate::progress::GroupStatus::ALL {
                let labels: &Labels = &[
                    (CLUSTER_LABEL, cluster.cluster()),
                    ("group", &group.name),
                    ("status", status.as_str()),
                ];
                gauge(&mut family, &labels, i64::from(status == current))?;
            }
        }
    }
    Ok(())
}

/// One family of per-group, per-topic aggregates: of share groups when `share`, of the
/// other groups otherwise.
fn encode_group_topics(
    encoder: &mut DescriptorEncoder,
    shown: &[Shown],
    name: &str,
    help: &str,
    share: bool,
    value: fn(&GroupTopicAggregate) -> Option<Value>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for cluster in shown {
        for (group, topics) in cluster.snapshot.groups.iter().zip(&cluster.group_topics) {
            if (group.group_type == "share") != share {
                continue;
            }
            for t in topics {
                if let Some(v) = value(t) {
                    let labels: &Labels = &[
                        (CLUSTER_LABEL, cluster.cluster()),
                        ("group", &group.name),
                        ("topic", &t.topic),
                    ];
                    gauge(&mut family, &labels, v)?;
                }
            }
        }
    }
    Ok(())
}

/// Every open transaction of the cluster (the coordinators' inventory), fencings and
/// coordinator moves.
fn encode_cluster_transactions(
    encoder: &mut DescriptorEncoder,
    shown: &[Shown],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(
        "kafka_cluster_open_transactions",
        "Transactions the coordinators list open longer than transaction_list_min_age, by coordinator state; a lower bound while a broker does not answer (kafka_lso_exporter_errors_total{stage=\"list_transactions\"})",
        None,
        MetricType::Gauge,
    )?;
    for cluster in shown {
        let Some(inventory) = inventory(cluster) else {
            continue;
        };
        for state in crate::kafka::OPEN_TRANSACTION_STATES
            .iter()
            .map(|s| s.to_string())
            .chain(
                inventory
                    .by_state
                    .keys()
                    .filter(|s| !crate::kafka::OPEN_TRANSACTION_STATES.contains(&s.as_str()))
                    .cloned(),
            )
        {
            let count = inventory.by_state.get(&state).copied().unwrap_or(0);
            let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster()), ("state", &state)];
            gauge(&mut family, &labels, count as i64)?;
        }
    }

    let mut family = encoder.encode_descriptor(
        "kafka_cluster_unpinning_open_transactions",
        "Of kafka_cluster_open_transactions, those described that hold the last stable offset of no exported partition (they write only to unsampled topics, sit behind an older transaction, or wrote nowhere yet); a lower bound: one not described in the cycle, or writing to a partition whose holder or LSO is unknown, or listed by a broker that did not answer, is not counted",
        None,
        MetricType::Gauge,
    )?;
    for cluster in shown {
        if let Some(inventory) = inventory(cluster) {
            let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
            gauge(&mut family, &labels, inventory.unpinning as i64)?;
        }
    }

    let mut family = encoder.encode_descriptor(
        "kafka_cluster_prepared_transactions",
        "Open two-phase (KIP-939) transactions (timeout 2147483647 ms where a broker advertises KIP-939): the coordinator never times them out, only their producer or an operator ends them; a lower bound while a broker does not answer; absent where no broker speaks KIP-939",
        None,
        MetricType::Gauge,
    )?;
    for cluster in shown {
        if let Some(prepared) = inventory(cluster).and_then(|i| i.prepared) {
            let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
            gauge(&mut family, &labels, prepared as i64)?;
        }
    }

    type DetailValue = fn(&crate::inventory::DetailedTransaction) -> Option<Value>;
    let detail_families: [(&str, &str, DetailValue); 4] = [
        ("kafka_coordinator_transaction_age_seconds", "Age of one of the transaction_list_detail oldest open transactions of the cluster, from its coordinator's start time", |t| {
            t.age_seconds.map(Value::Seconds)
        }),
        ("kafka_coordinator_transaction_timeout_left_seconds", "Seconds before the coordinator aborts the transaction (its timeout minus its age, at least 0); absent when the coordinator does not time it out (two-phase, or already being committed or aborted)", |t| {
            t.timeout_left_seconds.map(Value::Seconds)
        }),
        ("kafka_coordinator_transaction_partitions", "Partitions the transaction wrote to, as its coordinator lists them", |t| {
            t.described.then_some(Value::Count(t.partitions.len() as i64))
        }),
        ("kafka_coordinator_transaction_two_phase", "1 for a two-phase (KIP-939) transaction, which its coordinator never times out (only its producer or an operator ends it), 0 for any other; absent when the transaction was not described", |t| {
            t.described.then_some(Value::Count(i64::from(t.two_phase)))
        }),
    ];
    for (name, help, value) in detail_families {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for cluster in shown {
            let Some(inventory) = &cluster.snapshot.transactions.inventory else {
                continue;
            };
            for t in &inventory.oldest {
                let Some(v) = value(t) else { continue };
                let producer_id = t.producer_id.to_string();
                let producer_epoch = t.producer_epoch.to_string();
                let coordinator = t.coordinator.to_string();
                let labels: &Labels = &[
                    (CLUSTER_LABEL, cluster.cluster()),
                    ("transactional_id", &t.transactional_id),
                    ("producer_id", &producer_id),
                    ("producer_epoch", &producer_epoch),
                    ("state", &t.state),
                    ("coordinator", &coordinator),
                ];
                gauge(&mut family, &labels, v)?;
            }
        }
    }

    type EventCount = fn(&crate::inventory::WatchCounters) -> u64;
    let event_families: [(&str, &str, EventCount); 2] = [
        ("kafka_transaction_fencings", "Times the id's open transaction was ended by a new producer initialisation: a new instance fenced it, or the application restarted between two observations (seen Ongoing, then Empty or PrepareEpochFence under another producer id or epoch); a healthy producer committing is never counted", |c| c.fencings),
        ("kafka_transaction_coordinator_moves", "Times the transactional id's coordinator changed between two cycles that saw it", |c| c.coordinator_moves),
    ];
    for (name, help, count) in event_families {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for cluster in shown {
            for c in &cluster.snapshot.transactions.counters {
                let labels: &Labels = &[
                    (CLUSTER_LABEL, cluster.cluster()),
                    ("transactional_id", &c.transactional_id),
                ];
                family
                    .encode_family(&labels)?
                    .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(
                        &count(c),
                        None,
                    )?;
            }
        }
    }
    Ok(())
}

/// The cluster's inventory, also when a broker did not answer: its counts are then lower
/// bounds, and an alert on them can still fire (a broker down is when transactions get
/// stuck).
fn inventory(cluster: &Shown) -> Option<&crate::inventory::TransactionInventory> {
    cluster.snapshot.transactions.inventory.as_ref()
}

/// The exporter's own per-cluster state.
fn encode_exporter(
    encoder: &mut DescriptorEncoder,
    shown: &[Shown],
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(
        "kafka_lso_exporter_up",
        "1 if the last sampling cycle reached the cluster",
        None,
        MetricType::Gauge,
    )?;
    for cluster in shown {
        let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
        gauge(&mut family, &labels, i64::from(cluster.snapshot.up))?;
    }

    let mut family = encoder.encode_descriptor(
        "kafka_lso_exporter_series_dropped",
        "Series left out in the last cycle because the cluster exceeded max_series",
        None,
        MetricType::Gauge,
    )?;
    for cluster in shown {
        let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
        gauge(&mut family, &labels, cluster.snapshot.series_dropped as i64)?;
    }

    let mut family = encoder.encode_descriptor(
        "kafka_lso_exporter_last_success_timestamp_seconds",
        "Unix time at which the last cycle that reached the cluster ended",
        None,
        MetricType::Gauge,
    )?;
    for cluster in shown {
        if let Some(at) = cluster.snapshot.last_success {
            let seconds = at
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64();
            let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
            gauge(&mut family, &labels, seconds)?;
        }
    }

    type SkewValue = fn(&crate::kafka::ClockSkew) -> f64;
    let skew_families: [(&str, &str, SkewValue); 2] = [
        ("kafka_lso_exporter_clock_skew_seconds", "The brokers' clock (the KRaft leader's, by DescribeQuorum, read every minute) minus the exporter's: positive when the brokers are ahead. Ages from broker timestamps (transaction start times, LogAppendTime) read this much too high; absent when it cannot be read (DESCRIBE on the cluster, KRaft)", |s| s.seconds),
        ("kafka_lso_exporter_clock_skew_uncertainty_seconds", "Half the round trip of the clock skew's measurement: kafka_lso_exporter_clock_skew_seconds is within this of the truth", |s| s.uncertainty_seconds),
    ];
    for (name, help, value) in skew_families {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for cluster in shown {
            if let Some(skew) = &cluster.snapshot.clock_skew {
                let labels: &Labels = &[(CLUSTER_LABEL, cluster.cluster())];
                gauge(&mut family, &labels, Value::Seconds(value(skew)))?;
            }
        }
    }
    Ok(())
}

pub(crate) fn gauge(
    family: &mut prometheus_client::encoding::MetricEncoder,
    labels: &impl EncodeLabelSet,
    value: impl Into<Value>,
) -> Result<(), std::fmt::Error> {
    family.encode_family(labels)?.encode_gauge(&value.into())
}

/// A gauge value: offsets print as integers, durations as floats.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;
    use std::io::Read as _;

    /// OpenMetrics text of several chunks: counters, gauges with UNIT lines and a
    /// histogram, in the order prometheus-client writes them.
    fn openmetrics(families: usize) -> String {
        let mut text = String::new();
        for f in 0..families {
            let name = format!("family_{f}");
            match f % 3 {
                0 => {
                    writeln!(text, "# HELP {name} Things counted, {f}.").unwrap();
                    writeln!(text, "# TYPE {name} counter").unwrap();
                    for i in 0..40 {
                        writeln!(text, "{name}_total{{cluster=\"c\",n=\"{i}\"}} {i}").unwrap();
                    }
                }
                1 => {
                    writeln!(text, "# HELP {name} A level.").unwrap();
                    writeln!(text, "# TYPE {name} gauge").unwrap();
                    writeln!(text, "# UNIT {name} seconds").unwrap();
                    for i in 0..40 {
                        writeln!(text, "{name}{{topic=\"t\",partition=\"{i}\"}} {i}.5").unwrap();
                    }
                }
                _ => {
                    writeln!(text, "# HELP {name} Durations.").unwrap();
                    writeln!(text, "# TYPE {name} histogram").unwrap();
                    writeln!(text, "{name}_sum 1.0").unwrap();
                    writeln!(text, "{name}_count 2").unwrap();
                    writeln!(text, "{name}_bucket{{le=\"+Inf\"}} 2").unwrap();
                }
            }
        }
        text.push_str("# EOF\n");
        text
    }

    /// Writes `text` in the small pieces prometheus-client writes.
    fn stream(variant: Variant, text: &str) -> Bytes {
        let mut body = BodyWriter::new(variant);
        let mut rest = text;
        let mut step = 1;
        while !rest.is_empty() {
            let mut cut = (step % 23 + 1).min(rest.len());
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            body.write_str(&rest[..cut]).unwrap();
            rest = &rest[cut..];
            step += 1;
        }
        body.finish()
    }

    fn gunzip(body: &[u8]) -> String {
        let mut text = String::new();
        flate2::read::GzDecoder::new(body)
            .read_to_string(&mut text)
            .unwrap();
        text
    }

    /// The cost counters follow the reader's totals: up with them, starting over when
    /// they fall (the topic was recreated), gone with the topic.
    #[test]
    fn eos_cost_counters_follow_the_totals() {
        let metrics = Metrics::new(Vec::new());
        let cost = |scanned| {
            let cost = EosCost {
                commit_markers: 2,
                abort_markers: 1,
                aborted_records: 5,
                scanned_offsets: scanned,
            };
            [(Arc::<str>::from("orders"), cost)].into_iter().collect()
        };
        let scanned = |metrics: &Metrics| {
            let text = metrics.encode_openmetrics();
            text.lines()
                .find_map(|l| {
                    l.strip_prefix(
                        "kafka_topic_scanned_offsets_total{kafka_cluster=\"prod\",topic=\"orders\"} ",
                    )
                })
                .map(str::to_owned)
        };
        metrics.set_eos_cost("prod", &cost(40));
        metrics.set_eos_cost("prod", &cost(40));
        assert_eq!(scanned(&metrics).as_deref(), Some("40"));
        metrics.set_eos_cost("prod", &cost(55));
        assert_eq!(scanned(&metrics).as_deref(), Some("55"));
        metrics.set_eos_cost("prod", &cost(3));
        assert_eq!(scanned(&metrics).as_deref(), Some("3"));
        metrics.set_eos_cost("prod", &BTreeMap::new());
        assert_eq!(scanned(&metrics), None);
        assert!(!metrics
            .encode_openmetrics()
            .contains("kafka_topic_transaction_markers_total"));
    }
    #[test]
    fn prometheus_text_names_counters_with_total_and_drops_unit_and_eof() {
        let converted = to_prometheus_text(&openmetrics(3));
        assert!(converted.starts_with(
            "# HELP family_0_total Things counted, 0.\n# TYPE family_0_total counter\nfamily_0_total{"
        ));
        assert!(converted.contains("# HELP family_1 A level.\n# TYPE family_1 gauge\nfamily_1{"));
        assert!(converted.contains("# TYPE family_2 histogram\nfamily_2_sum 1.0\n"));
        assert!(!converted.contains("# UNIT") && !converted.contains("# EOF"));
        assert_eq!(
            converted.lines().count(),
            openmetrics(3).lines().count() - 2
        );
    }

    #[test]
    fn streamed_bodies_equal_whole_renders_across_chunks() {
        let text = openmetrics(600);
        assert!(text.len() > 4 * CHUNK, "{} bytes", text.len());
        let prometheus = to_prometheus_text(&text);
        let cases = [
            (false, false, prometheus.as_str()),
            (false, true, prometheus.as_str()),
            (true, false, text.as_str()),
            (true, true, text.as_str()),
        ];
        for (openmetrics, gzip, expected) in cases {
            let body = stream(Variant { openmetrics, gzip }, &text);
            let got = if gzip {
                assert!(
                    body.len() < expected.len() / 4,
                    "compressed: {}",
                    body.len()
                );
                gunzip(&body)
            } else {
                String::from_utf8(body.to_vec()).unwrap()
            };
            assert!(got == expected, "openmetrics={openmetrics} gzip={gzip}");
        }
    }
}
