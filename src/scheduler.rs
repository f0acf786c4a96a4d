//! One sampling loop per cluster: every `interval`, run one asynchronous sampling cycle
//! (bounded by `timeout`), derive a snapshot and publish it. Cycles never overlap: a
//! cycle that overruns delays the next tick instead of stacking up.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::config::{GroupGranularity, NameFilter};
use crate::kafka::Sampler;
use crate::metrics::Metrics;
use crate::series::{enforce_series_limit, Exposition};
use crate::snapshot::{derive, ClusterSnapshot, StuckClock};

/// Everything one cluster's loop needs.
pub struct ClusterLoop {
    pub cluster: String,
    pub sampler: Arc<dyn Sampler>,
    pub interval: Duration,
    pub timeout: Duration,
    pub snapshots: watch::Sender<Option<Arc<ClusterSnapshot>>>,
    pub metrics: Arc<Metrics>,
    /// The cardinality guard: a series limit and the groups it never drops.
    pub max_series: Option<(usize, NameFilter)>,
    /// See `clusters[].hanging_margin`.
    pub hanging_margin: Duration,
    /// How `/metrics` shows the cluster (`granularity`, `compat`).
    pub exposition: Exposition,
    /// Groups whose granularity differs from the cluster's.
    pub group_granularity: GroupGranularity,
}

impl ClusterLoop {
    /// Runs until `shutdown` turns true (or its sender is dropped).
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        // Derivation is CPU work that grows with the fleet (tens of milliseconds at 200,000
        // group-partitions), so it runs on a blocking thread: scrapes, served by the async
        // workers, never wait behind it.
        let clock = Arc::new(std::sync::Mutex::new(StuckClock::default()));
        let max_series = Arc::new(self.max_series.clone());
        let hanging_margin = self.hanging_margin;
        let exposition = self.exposition;
        let group_granularity = Arc::new(self.group_granularity.clone());
        let mut last_success: Option<SystemTime> = None;
        let mut was_up: Option<bool> = None;
        let mut was_limited = false;
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        self.metrics.init_cluster(&self.cluster);

        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
            let started = Instant::now();
            let deadline = started + self.timeout;
            let sampler = self.sampler.clone();
            // A task of its own, so that a panic in a cycle ends only that cycle.
            let sampling = tokio::spawn(async move { sampler.sample(deadline).await });
            let raw = tokio::select! {
                joined = sampling => match joined {
                    Ok(raw) => raw,
                    Err(error) => {
                        tracing::error!(cluster = %self.cluster, "sampling cycle panicked: {error}");
                        continue;
                    }
                },
                _ = shutdown.wait_for(|stop| *stop) => break,
            };

            let up = raw.reached;
            let (clock, max_series) = (clock.clone(), max_series.clone());
            let group_granularity = group_granularity.clone();
            let derived = tokio::task::spawn_blocking(move || {
                let mut clock = clock
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                let mut derived = derive(
                    raw,
                    &mut clock,
                    Instant::now(),
                    SystemTime::now(),
                    hanging_margin,
                );
                for group in &mut derived.groups {
                    group.granularity = group_granularity.of(&group.name, exposition.granularity);
                }
                let series_dropped = match max_series.as_ref() {
                    Some((max, priority)) => enforce_series_limit(
                        &derived.partitions,
                        &mut derived.groups,
                        exposition,
                        *max,
                        |g| priority.accepts(g),
                    ),
                    None => 0,
                };
                (derived, series_dropped)
            })
            .await;
            let (derived, series_dropped) = match derived {
                Ok(derived) => derived,
                Err(error) => {
                    tracing::error!(cluster = %self.cluster, "deriving the cycle's snapshot panicked: {error}");
                    continue;
                }
            };
            if (series_dropped > 0) != was_limited {
                was_limited = series_dropped > 0;
                if was_limited {
                    tracing::warn!(
                        cluster = %self.cluster,
                        series_dropped,
                        "over max_series: the offset series (per partition and per topic) of groups outside priority_groups are left out \
                         (kafka_lso_exporter_series_dropped); raise max_series or narrow the group regexes"
                    );
                } else {
                    tracing::info!(cluster = %self.cluster, "back under max_series: every series is exported again");
                }
            }
            let taken_at = SystemTime::now();
            if up {
                last_success = Some(taken_at);
            }
            for (stage, failure) in &derived.failures {
                self.metrics
                    .count_errors(&self.cluster, *stage, failure.count);
            }
            for anomaly in &derived.anomalies {
                self.metrics.count_anomaly(&self.cluster, *anomaly);
            }
            let elapsed = started.elapsed();
            self.metrics
                .observe_cycle(&self.cluster, elapsed.as_secs_f64());

            let pinned = derived
                .partitions
                .iter()
                .filter(|p| p.visibility.is_some_and(|v| v.hw_minus_lso > 0))
                .count();
            if up {
                match was_up {
                    Some(true) => tracing::debug!(
                        cluster = %self.cluster,
                        partitions = derived.partitions.len(),
                        groups = derived.groups.len(),
                        pinned,
                        seconds = elapsed.as_secs_f64(),
                        "cycle done"
                    ),
                    Some(false) => tracing::info!(
                        cluster = %self.cluster,
                        partitions = derived.partitions.len(),
                        groups = derived.groups.len(),
                        pinned,
                        "cluster reachable again"
                    ),
                    None => tracing::info!(
                        cluster = %self.cluster,
                        partitions = derived.partitions.len(),
                        groups = derived.groups.len(),
                        pinned,
                        seconds = elapsed.as_secs_f64(),
                        "first cycle done"
                    ),
                }
                if !derived.failures.is_empty() {
                    let summary: Vec<String> = derived
                        .failures
                        .iter()
                        .map(|(stage, f)| {
                            format!("{stage}: {} failed (first: {})", f.count, f.first_error)
                        })
                        .collect();
                    tracing::warn!(cluster = %self.cluster, "cycle partly failed; affected series are absent: {}", summary.join("; "));
                }
            } else {
                let reason = derived
                    .failures
                    .first()
                    .map(|(_, f)| f.first_error.as_str())
                    .unwrap_or("unknown error");
                tracing::warn!(cluster = %self.cluster, "cannot reach the cluster, its series are absent: {reason}");
            }
            was_up = Some(up);

            let previous = self.snapshots.send_replace(Some(Arc::new(ClusterSnapshot {
                cluster: self.cluster.clone(),
                up,
                taken_at,
                last_success,
                partitions: derived.partitions,
                groups: derived.groups,
                series_dropped,
                exposition,
                brokers: derived.brokers,
            })));
            // Rendered before it replaces the previous cycle's body, so that no scrape
            // waits for a render; the next cycle starts after it.
            let metrics = self.metrics.clone();
            if let Err(error) = tokio::task::spawn_blocking(move || {
                // Freeing a large snapshot takes time too: not on an async worker.
                drop(previous);
                metrics.cycle_finished_and_rendered();
            })
            .await
            {
                tracing::error!(cluster = %self.cluster, "rendering /metrics failed: {error}");
                self.metrics.cycle_finished();
            }
        }
        tracing::debug!(cluster = %self.cluster, "sampling stopped");
    }
}
