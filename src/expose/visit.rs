//! What every family of `/metrics` is written with: a [`Visitor`] that either renders
//! the samples ([`Render`]) or counts them ([`Count`]), so that the cardinality guard
//! counts exactly what the render writes. The families themselves are in
//! [`super::families`] (the exporter's own) and [`super::compat`] (kafka_exporter's).

use std::collections::HashMap;
use std::sync::Arc;

use prometheus_client::encoding::{
    DescriptorEncoder, EncodeGaugeValue, EncodeLabelSet, GaugeValueEncoder, LabelSetEncoder,
    NoLabelSet,
};
use prometheus_client::metrics::MetricType;

use crate::derive::series::{self, GroupTopicAggregate, TopicAggregate};
use crate::derive::{ClusterSnapshot, GroupState};

pub(crate) type Labels<'a> = [(&'static str, &'a str)];

/// The label naming the configured cluster on every series. Not `cluster`: many
/// Prometheus, Thanos and Mimir setups put that on every series as a target or external
/// label (the Prometheus guide on writing exporters names it as one to avoid).
pub const CLUSTER_LABEL: &str = "kafka_cluster";

/// One cluster's snapshot with what the render reads of it more than once.
pub(crate) struct Shown<'a> {
    pub(crate) snapshot: &'a ClusterSnapshot,
    /// Partitions whose LSO a transaction pins ([`series::pinned`]), sorted by topic and
    /// partition.
    pinned: Vec<(Arc<str>, i32)>,
    pub(crate) topics: Vec<TopicAggregate>,
    /// Per group (same order as `snapshot.groups`), its per-topic aggregates.
    pub(crate) group_topics: Vec<Vec<GroupTopicAggregate>>,
}

impl<'a> Shown<'a> {
    pub(crate) fn new(snapshot: &'a ClusterSnapshot) -> Self {
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
            .map(|g| series::group_topic_aggregates(g, snapshot.exposition.assigned_only))
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
    pub(crate) fn group_partition_detail(
        &self,
        group: &GroupState,
        topic: &str,
        partition: i32,
    ) -> bool {
        group.granularity == crate::config::Granularity::Partition
            || self
                .pinned
                .binary_search_by(|(t, p)| (&**t, *p).cmp(&(topic, partition)))
                .is_ok()
    }

    /// The group-partition's offset series are left out: it is abandoned and the
    /// cluster shows assigned partitions only (`groups.assigned_only`).
    pub(crate) fn hides(&self, offset: &crate::derive::GroupPartitionState) -> bool {
        offset.abandoned && self.snapshot.exposition.assigned_only
    }

    /// Every partition of `topic` `group` has offsets on is hidden ([`Shown::hides`]): its
    /// per-topic series go too.
    pub(crate) fn hides_topic(&self, group: &GroupState, topic: &str) -> bool {
        self.snapshot.exposition.assigned_only
            && group
                .offsets
                .iter()
                .flatten()
                .filter(|o| &*o.topic == topic)
                .all(|o| o.abandoned)
    }

    /// Who owns a series of `group`'s offsets: the guard may leave them out.
    pub(crate) fn offsets_of<'g>(&self, group: &'g str) -> Owner<'g> {
        Owner::GroupOffsets {
            group,
            left_out: self.snapshot.left_out_groups.contains(group),
        }
    }
}

/// Whose a sample is, for the cardinality guard.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Owner<'a> {
    /// Shown whatever the limit: partitions, topics, a group's state and members, the
    /// cluster's transactions, the exporter's own series.
    Cluster,
    /// One of a group's offset series (per partition and per topic, lags, a share group's
    /// progress, kafka_exporter's group families): left out while the guard leaves the
    /// group out.
    GroupOffsets { group: &'a str, left_out: bool },
}

/// One sample's value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sample {
    Gauge(Value),
    Counter(u64),
}

/// A gauge sample.
pub(crate) fn gauge(value: impl Into<Value>) -> Sample {
    Sample::Gauge(value.into())
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

/// Receives a family's samples: the owner, the labels, the value.
pub(crate) type Emit<'e> = dyn FnMut(Owner<'_>, &dyn EncodeLabelSet, Sample) + 'e;

/// Walks the families: [`Render`] writes them, [`Count`] counts them.
pub(crate) trait Visitor {
    /// One family: `samples` emits each of its samples.
    fn family(
        &mut self,
        name: &str,
        help: &str,
        kind: MetricType,
        samples: &mut dyn FnMut(&mut Emit<'_>),
    );
}

/// A label set behind a reference to the trait (prometheus-client takes sized ones).
struct DynLabels<'a>(&'a dyn EncodeLabelSet);

impl EncodeLabelSet for DynLabels<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }
}

/// Writes the families with prometheus-client's encoder, leaving out the offset series
/// of the groups the guard left out. The first error ends the render.
pub(crate) struct Render<'r, 'e> {
    pub(crate) encoder: &'r mut DescriptorEncoder<'e>,
    pub(crate) error: Option<std::fmt::Error>,
}

impl Visitor for Render<'_, '_> {
    fn family(
        &mut self,
        name: &str,
        help: &str,
        kind: MetricType,
        samples: &mut dyn FnMut(&mut Emit<'_>),
    ) {
        if self.error.is_some() {
            return;
        }
        let mut family = match self.encoder.encode_descriptor(name, help, None, kind) {
            Ok(family) => family,
            Err(error) => {
                self.error = Some(error);
                return;
            }
        };
        let mut failed = None;
        samples(&mut |owner, labels, sample| {
            if failed.is_some() || matches!(owner, Owner::GroupOffsets { left_out: true, .. }) {
                return;
            }
            let labels = DynLabels(labels);
            let written = family
                .encode_family(&labels)
                .and_then(|mut metric| match sample {
                    Sample::Gauge(value) => metric.encode_gauge(&value),
                    Sample::Counter(total) => {
                        metric.encode_counter::<NoLabelSet, _, u64>(&total, None)
                    }
                });
            if let Err(error) = written {
                failed = Some(error);
            }
        });
        self.error = self.error.or(failed);
    }
}

/// Counts the samples the render would write with nothing left out: in all, and per
/// group its offset series (what leaving the group out saves).
#[derive(Debug, Default)]
pub(crate) struct Count {
    pub(crate) total: usize,
    /// Counts per group too (else `total` only).
    per_group: bool,
    group_offsets: HashMap<String, usize>,
    /// The group whose offset series came last, and how many in a row: a family emits a
    /// group's series one after the other, so that the map is looked up once per run
    /// rather than once per series.
    run: (String, usize),
}

impl Count {
    /// Counting per group as well as in all.
    pub(crate) fn per_group() -> Self {
        Self {
            per_group: true,
            ..Self::default()
        }
    }

    /// Per group, its offset series (empty unless counted [`Count::per_group`]).
    pub(crate) fn group_offsets(mut self) -> HashMap<String, usize> {
        self.end_run();
        self.group_offsets
    }

    fn end_run(&mut self) {
        let (group, n) = &mut self.run;
        if *n == 0 {
            return;
        }
        match self.group_offsets.get_mut(group.as_str()) {
            Some(count) => *count += *n,
            None => {
                self.group_offsets.insert(group.clone(), *n);
            }
        }
        *n = 0;
    }
}

impl Visitor for Count {
    fn family(
        &mut self,
        _name: &str,
        _help: &str,
        _kind: MetricType,
        samples: &mut dyn FnMut(&mut Emit<'_>),
    ) {
        samples(&mut |owner, _, _| {
            self.total += 1;
            if !self.per_group {
                return;
            }
            if let Owner::GroupOffsets { group, .. } = owner {
                if self.run.1 > 0 && self.run.0 != group {
                    self.end_run();
                }
                if self.run.1 == 0 {
                    self.run.0.clear();
                    self.run.0.push_str(group);
                }
                self.run.1 += 1;
            }
        });
    }
}
