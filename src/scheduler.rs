//! One sampling loop per cluster: every `interval`, run one asynchronous sampling cycle
//! (bounded by `timeout`), derive a snapshot and publish it. Cycles never overlap: a
//! cycle that overruns delays the next tick instead of stacking up.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

use crate::config::{GroupGranularity, NameFilter};
use crate::derive::series::Exposition;
use crate::derive::{ClusterSnapshot, Deriver, Step};
use crate::expose::{self, Metrics};
use crate::kafka::coordination::{Ownership, Serving};
use crate::kafka::features::Status;
use crate::kafka::{RawSample, Sampler, Stage};

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
    /// See `clusters[].stall_after`.
    pub stall_after: Duration,
    /// See `clusters[].transaction_list_detail`.
    pub transaction_list_detail: usize,
    /// How `/metrics` shows the cluster (`granularity`, `compat`).
    pub exposition: Exposition,
    /// Groups whose granularity differs from the cluster's.
    pub group_granularity: GroupGranularity,
    /// See `clusters[].groups`.
    pub group_settings: crate::config::GroupSettings,
    /// Whether this replica samples the cluster (always, without `[ha]`).
    pub ownership: Arc<Ownership>,
    /// How long the cluster's derived state (clocks, counters, what the groups showed) is
    /// kept while this replica does not serve it: a cluster back within it (a rebalance
    /// that collided, a generation that failed and gave it straight back) goes on as if
    /// it had never left. Zero without `[ha]`.
    pub keep_state_for: Duration,
}

impl ClusterLoop {
    /// Runs until `shutdown` turns true (or its sender is dropped).
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        // Derivation is CPU work that grows with the fleet (tens of milliseconds at 200,000
        // group-partitions), so it runs on a blocking thread: scrapes, served by the async
        // workers, never wait behind it.
        let fresh_deriver = || {
            let mut deriver = Deriver::new(
                self.hanging_margin,
                self.stall_after,
                self.transaction_list_detail,
                self.exposition.granularity,
                self.group_granularity.clone(),
            );
            deriver.groups = self.group_settings;
            Arc::new(std::sync::Mutex::new(deriver))
        };
        let mut deriver = fresh_deriver();
        let mut handed = self.ownership.subscribe();
        let mut sampling_here = false;
        // How the cluster was served at the last turn of the loop.
        let mut served_as = Serving::No;
        // When this replica last let the cluster go, while it keeps its state.
        let mut let_go_at: Option<Instant> = None;
        let max_series = Arc::new(self.max_series.clone());
        let exposition = self.exposition;
        let mut last_success: Option<SystemTime> = None;
        let mut was_up: Option<bool> = None;
        let mut was_limited = (false, false);
        let mut ticker = tokio::time::interval(self.interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);

        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                Ok(()) = handed.changed() => {
                    // Only a change of this cluster's share breaks the rhythm (taken over:
                    // act now, not at the next tick); a rebalance that leaves it where it
                    // was, or another cluster's, never adds a cycle.
                    if self.ownership.serving(&self.cluster) == served_as {
                        continue;
                    }
                    ticker.reset();
                }
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
            let serving = self.ownership.serving(&self.cluster);
            if serving == Serving::IfDown && served_as == Serving::Yes {
                // What it published as the cluster's owner is not this replica's to
                // serve any more; only a cycle that cannot reach the cluster is.
                self.snapshots.send_replace(None);
                self.metrics.cycle_finished();
            }
            served_as = serving;
            if serving == Serving::No {
                if sampling_here {
                    // Another replica's share now, or this replica's membership ran out:
                    // nothing of it is served here. What it derived is kept for a while,
                    // for a cluster that comes straight back.
                    tracing::info!(cluster = %self.cluster, "no longer sampled by this replica: another replica's share now, or this replica's membership of the cluster's coordination group ran out");
                    self.snapshots.send_replace(None);
                    self.metrics.cycle_finished();
                    sampling_here = false;
                    let_go_at = Some(Instant::now());
                }
                continue;
            }
            if !sampling_here {
                let kept = let_go_at.is_some_and(|at| at.elapsed() <= self.keep_state_for);
                if let_go_at.is_some() && !kept {
                    // Away for longer: what it remembered would be stale.
                    deriver = fresh_deriver();
                    (last_success, was_up, was_limited) = (None, None, (false, false));
                }
                if self.ownership.group().is_some() {
                    tracing::info!(
                        cluster = %self.cluster,
                        state = if kept { "kept: back within keep_state_for" } else { "new" },
                        "{}",
                        if serving == Serving::IfDown {
                            "sampled by this replica, served only while it cannot reach the cluster (no coordinator of the cluster's group answers)"
                        } else {
                            "sampled by this replica now (its share of the cluster's coordination group, or served alone)"
                        }
                    );
                }
                let_go_at = None;
                self.metrics.init_cluster(&self.cluster);
                sampling_here = true;
            }
            let started = Instant::now();
            let deadline = started + self.timeout;
            let sampler = self.sampler.clone();
            // A task of its own, so that a panic in a cycle ends only that cycle. What it
            // learned is lost with it: the cycle is published as one that could not reach
            // the cluster (down, no series), never by serving the previous snapshot as if
            // it were fresh.
            let sampling = tokio::spawn(async move { sampler.sample(deadline).await });
            let mut panicked = false;
            let raw = tokio::select! {
                joined = sampling => match joined {
                    Ok(raw) => raw,
                    Err(error) => {
                        tracing::error!(cluster = %self.cluster, "sampling cycle panicked, the cluster counts as down for this cycle: {error}");
                        panicked = true;
                        RawSample::default()
                    }
                },
                _ = shutdown.wait_for(|stop| *stop) => break,
            };

            // Reached, but not one partition's offsets could be read (every leader
            // refused or failed): the cluster is down for the exporter. It never looks
            // healthy and empty at once.
            let unreadable = raw.reached
                && !raw.partitions.is_empty()
                && raw.partitions.iter().all(|p| {
                    p.high_watermark.is_none()
                        && p.last_stable_offset.is_none()
                        && p.log_start_offset.is_none()
                });
            if serving == Serving::IfDown && raw.reached && !unreadable {
                // Nobody coordinates the cluster's group from here, yet the cluster
                // answers: another replica may serve it, so nothing is published here,
                // and what was derived here goes stale from now on.
                if self.snapshots.borrow().is_some() {
                    self.snapshots.send_replace(None);
                    self.metrics.cycle_finished();
                }
                sampling_here = false;
                let_go_at.get_or_insert_with(Instant::now);
                continue;
            }
            let mut up = raw.reached && !unreadable;
            let deriver = deriver.clone();
            let derived = tokio::task::spawn_blocking(move || {
                let mut deriver = deriver
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                deriver.step(raw, Instant::now(), SystemTime::now())
            })
            .await;
            let Step {
                derived,
                transactions,
                remembered,
                features,
                feature_changes,
            } = match derived {
                Ok(step) => step,
                Err(error) => {
                    tracing::error!(cluster = %self.cluster, "deriving the cycle's snapshot panicked, the cluster counts as down for this cycle: {error}");
                    (up, panicked) = (false, true);
                    Step::default()
                }
            };
            let taken_at = SystemTime::now();
            if up {
                last_success = Some(taken_at);
            }
            let elapsed = started.elapsed();
            // A replica that serves the cluster only while it cannot reach it says `up 0`
            // and no more: its failures are not the cluster's (another replica may
            // reach it), and its cycles are not the owner's.
            if serving == Serving::Yes {
                for (stage, failure) in &derived.failures {
                    self.metrics
                        .count_errors(&self.cluster, *stage, failure.count);
                    self.metrics
                        .count_refusals(&self.cluster, *stage, failure.refused);
                }
                for anomaly in &derived.anomalies {
                    self.metrics.count_anomaly(&self.cluster, *anomaly);
                }
                self.metrics
                    .observe_cycle(&self.cluster, elapsed.as_secs_f64());
            }
            self.log_feature_changes(&feature_changes);

            self.log_outcome(
                &derived, up, unreadable, panicked, was_up, elapsed, remembered,
            );
            was_up = Some(up);

            let snapshot = ClusterSnapshot {
                cluster: self.cluster.clone(),
                up,
                taken_at,
                last_success,
                partitions: derived.partitions,
                groups: derived.groups,
                series_dropped: 0,
                left_out_groups: Default::default(),
                series: 0,
                exposition,
                brokers: derived.brokers,
                retention_ms: derived.retention_ms,
                transactions,
                clock_skew: derived.clock_skew,
                features,
                eos_cost: if up {
                    derived.eos_cost
                } else {
                    Default::default()
                },
            };
            let snapshot = match self.guard(snapshot, max_series.clone()).await {
                Some(snapshot) => snapshot,
                // As a cycle whose derivation panicked: published as down, with none of
                // its series, never as the previous cycle's.
                None => ClusterSnapshot::down(&self.cluster, taken_at, last_success, exposition),
            };
            was_limited = self.log_limits(&snapshot, was_limited);
            match self.ownership.serving(&self.cluster) {
                Serving::Yes => {}
                Serving::IfDown if !snapshot.up => {}
                // Handed over during the cycle: the next turn of the loop lets go.
                _ => continue,
            }
            self.publish(snapshot).await;
        }
        tracing::debug!(cluster = %self.cluster, "sampling stopped");
    }

    /// The cardinality guard counts what the render shows, with the render's own code
    /// (CPU work that grows with the fleet: not on an async worker). `None` when it
    /// panicked.
    async fn guard(
        &self,
        snapshot: ClusterSnapshot,
        max_series: Arc<Option<(usize, NameFilter)>>,
    ) -> Option<ClusterSnapshot> {
        let guarded = tokio::task::spawn_blocking(move || {
            let mut snapshot = snapshot;
            let trimmed = match max_series.as_ref() {
                Some((max, priority)) => {
                    expose::guard(&snapshot, Some(*max), |g| priority.accepts(g))
                }
                None => expose::guard(&snapshot, None, |_| true),
            };
            snapshot.series_dropped = trimmed.dropped;
            snapshot.series = trimmed.shown;
            snapshot.left_out_groups = trimmed.groups;
            snapshot
        })
        .await;
        guarded
            .map_err(|error| tracing::error!(cluster = %self.cluster, "counting the cycle's series panicked, the cluster counts as down for this cycle: {error}"))
            .ok()
    }

    /// Makes `snapshot` the cluster's current one, rendered before it replaces the
    /// previous cycle's body, so that no scrape waits for a render; the next cycle starts
    /// after it.
    async fn publish(&self, snapshot: ClusterSnapshot) {
        let previous = self.snapshots.send_replace(Some(Arc::new(snapshot)));
        let metrics = self.metrics.clone();
        if let Err(error) = tokio::task::spawn_blocking(move || {
            // Freeing a large snapshot takes time too: not on an async worker.
            drop(previous);
            metrics.cycle_finished_and_rendered();
            // What the cycle freed goes back to the system, not kept by the allocator
            // for the next cycle's peak (crate::memory).
            crate::memory::release_freed();
        })
        .await
        {
            tracing::error!(cluster = %self.cluster, "rendering /metrics failed: {error}");
            self.metrics.cycle_finished();
        }
    }

    /// Once per change, not per cycle: a feature that stopped working, or works again.
    fn log_feature_changes(&self, feature_changes: &[crate::derive::features::Change]) {
        for change in feature_changes {
            let (feature, now) = (change.feature, &change.now);
            match (now.status, &change.was) {
                (Status::Ok, None) => {
                    tracing::debug!(cluster = %self.cluster, %feature, "feature works")
                }
                (Status::Ok, Some(_)) => {
                    tracing::info!(cluster = %self.cluster, %feature, "feature works again")
                }
                (Status::Disabled, _) => {
                    tracing::info!(cluster = %self.cluster, %feature, "feature off: {}", now.reason)
                }
                (status, _) => tracing::warn!(
                    cluster = %self.cluster,
                    %feature,
                    status = status.as_str(),
                    "feature does not work: {} (it gives {})",
                    now.reason,
                    feature.gives()
                ),
            }
        }
    }

    /// What one cycle came to, in the log: its figures at debug, a change of reach at
    /// info, a cycle that partly failed or a cluster down at warn.
    #[allow(clippy::too_many_arguments)]
    fn log_outcome(
        &self,
        derived: &crate::derive::state::Derived,
        up: bool,
        unreadable: bool,
        panicked: bool,
        was_up: Option<bool>,
        elapsed: Duration,
        remembered: (usize, usize, usize),
    ) {
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
                    commit_watch = remembered.0,
                    transaction_watch = remembered.1,
                    isolation_watch = remembered.2,
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
        } else if unreadable {
            let reason = derived
                .failures
                .iter()
                .find(|(stage, _)| *stage == Stage::HighWatermark)
                .or(derived.failures.first())
                .map(|(_, f)| f.first_error.as_str())
                .unwrap_or("unknown error");
            tracing::warn!(cluster = %self.cluster, "the cluster answers metadata, but no partition's offsets could be read: it counts as down: {reason}");
        } else if !panicked {
            let reason = derived
                .failures
                .first()
                .map(|(_, f)| f.first_error.as_str())
                .unwrap_or("unknown error");
            tracing::warn!(cluster = %self.cluster, "cannot reach the cluster, its series are absent: {reason}");
        }
    }

    /// Says when the cluster goes over `max_series` or back under it, once per change;
    /// returns the new (limited, over).
    fn log_limits(&self, snapshot: &ClusterSnapshot, was_limited: (bool, bool)) -> (bool, bool) {
        let limited = snapshot.series_dropped > 0;
        let over = self
            .max_series
            .as_ref()
            .is_some_and(|(max, _)| snapshot.series > *max);
        if (limited, over) != was_limited {
            if limited {
                tracing::warn!(
                    cluster = %self.cluster,
                    series_dropped = snapshot.series_dropped,
                    groups = snapshot.left_out_groups.len(),
                    "over max_series: the offset series (per partition and per topic) of groups outside priority_groups are left out \
                     (kafka_lso_exporter_series_dropped); raise max_series or narrow the group regexes"
                );
            } else if !over {
                tracing::info!(cluster = %self.cluster, "back under max_series: every series is exported again");
            }
            if over {
                tracing::warn!(
                    cluster = %self.cluster,
                    series = snapshot.series,
                    "still over max_series with every group outside priority_groups left out: the partition, topic, \
                     transaction and group-state series and the priority groups alone are more (kafka_lso_exporter_series); \
                     raise max_series or narrow the topic regexes"
                );
            }
        }
        (limited, over)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Granularity;
    use crate::kafka::{BrokerLag, CommittedOffset, Isolation, RawGroup, RawPartition};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Returns what `script` gives for the cycle's number (from 0); a panic in it is a
    /// panic of the cycle.
    struct Scripted(AtomicUsize, fn(usize) -> RawSample);

    impl Sampler for Scripted {
        fn sample(&self, _deadline: Instant) -> futures_util::future::BoxFuture<'_, RawSample> {
            let cycle = self.0.fetch_add(1, Ordering::SeqCst);
            let script = self.1;
            Box::pin(async move { script(cycle) })
        }
    }

    /// One cycle's sample: the sampler lists the partitions of selected topics only
    /// (`orders`); the brokers report groups' offsets and lags on every topic.
    fn orders_and_groups() -> RawSample {
        let committed = |topic: &str| CommittedOffset {
            topic: topic.into(),
            partition: 0,
            offset: 880,
        };
        let group = |name: &str, group_type: &str| RawGroup {
            coordinator: None,
            detail: None,
            name: name.into(),
            group_type: group_type.into(),
            protocol: "consumer".into(),
            state: "Stable".into(),
            members: Some(1),
            isolation: (group_type == "share").then_some(Isolation::ReadCommitted),
            broker_lags: ["orders", "excluded-topic", "__consumer_offsets"]
                .into_iter()
                .filter(|_| group_type == "share")
                .map(|topic| BrokerLag {
                    topic: topic.into(),
                    partition: 0,
                    lag: 20,
                })
                .collect(),
            committed: Some(vec![
                committed("orders"),
                committed("excluded-topic"),
                committed("__consumer_offsets"),
            ]),
        };
        RawSample {
            reached: true,
            partitions: vec![RawPartition {
                topic: Arc::from("orders"),
                partition: 0,
                log_start_offset: Some(0),
                last_stable_offset: Some(880),
                high_watermark: Some(900),
                open_transactions: None,
                log: None,
                replication: None,
            }],
            groups: vec![group("billing", "classic"), group("queue", "share")],
            ..RawSample::default()
        }
    }

    fn looping(
        script: fn(usize) -> RawSample,
        max_series: Option<(usize, NameFilter)>,
    ) -> (
        ClusterLoop,
        watch::Receiver<Option<Arc<ClusterSnapshot>>>,
        Arc<Metrics>,
    ) {
        let (snapshots, published) = watch::channel(None);
        let metrics = Arc::new(Metrics::new(vec![published.clone()]));
        let cluster_loop = ClusterLoop {
            cluster: "prod".into(),
            sampler: Arc::new(Scripted(AtomicUsize::new(0), script)),
            interval: Duration::from_millis(20),
            timeout: Duration::from_secs(1),
            snapshots,
            metrics: metrics.clone(),
            max_series,
            hanging_margin: Duration::ZERO,
            stall_after: Duration::from_secs(300),
            transaction_list_detail: 10,
            exposition: Exposition {
                granularity: Granularity::Partition,
                kafka_exporter: true,
                assigned_only: false,
                owner_labels: false,
            },
            group_granularity: GroupGranularity::default(),
            group_settings: Default::default(),
            ownership: Ownership::everything(vec!["prod".into()]),
            keep_state_for: Duration::ZERO,
        };
        (cluster_loop, published, metrics)
    }

    /// Runs `cluster_loop` until a snapshot satisfies `done`; returns it.
    async fn run_until(
        cluster_loop: ClusterLoop,
        published: &mut watch::Receiver<Option<Arc<ClusterSnapshot>>>,
        done: impl Fn(&ClusterSnapshot) -> bool,
    ) -> Arc<ClusterSnapshot> {
        let (stop, stopped) = watch::channel(false);
        let running = tokio::spawn(cluster_loop.run(stopped));
        let wanted = published.wait_for(|s| s.as_deref().is_some_and(&done));
        let snapshot = tokio::time::timeout(Duration::from_secs(5), wanted)
            .await
            .expect("no such snapshot within 5 s")
            .unwrap()
            .clone()
            .unwrap();
        stop.send_replace(true);
        running.await.unwrap();
        snapshot
    }

    /// A rebalance that collides and gives the cluster straight back keeps what the
    /// cluster loop derived (the stuck clock goes on, not from 0); a change of another
    /// cluster's share adds no cycle.
    #[tokio::test]
    async fn a_cluster_given_straight_back_keeps_its_state_and_its_rhythm() {
        static CYCLES: AtomicUsize = AtomicUsize::new(0);
        fn script(_: usize) -> RawSample {
            CYCLES.fetch_add(1, Ordering::SeqCst);
            orders_and_groups()
        }
        let stuck = |s: &ClusterSnapshot| {
            s.partitions
                .first()
                .and_then(|p| p.visibility.as_ref())
                .map_or(0.0, |v| v.lso_stuck_seconds)
        };
        let (mut cluster_loop, mut published, _) = looping(script, None);
        let ownership = Ownership::member(vec!["prod".into(), "other".into()], "g");
        ownership.hold_for_test("prod", true, false);
        cluster_loop.ownership = ownership.clone();
        cluster_loop.interval = Duration::from_millis(400);
        cluster_loop.keep_state_for = Duration::from_secs(5);
        let (stop, stopped) = watch::channel(false);
        let running = tokio::spawn(cluster_loop.run(stopped));
        let first = published
            .wait_for(|s| s.as_deref().is_some_and(|s| stuck(s) >= 1.0))
            .await
            .unwrap()
            .clone()
            .unwrap();
        let before = stuck(&first);
        // Another cluster's rebalance, many times over: no cycle out of the rhythm.
        let cycles = CYCLES.load(Ordering::SeqCst);
        for _ in 0..5 {
            ownership.hold_for_test("other", false, true);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            CYCLES.load(Ordering::SeqCst) <= cycles + 1,
            "a rebalance of another cluster added cycles: {} -> {}",
            cycles,
            CYCLES.load(Ordering::SeqCst)
        );
        // A collision: let go, and given straight back.
        ownership.hold_for_test("prod", false, false);
        published.wait_for(|s| s.is_none()).await.unwrap();
        ownership.hold_for_test("prod", true, false);
        let back = published
            .wait_for(|s| s.is_some())
            .await
            .unwrap()
            .clone()
            .unwrap();
        assert!(
            stuck(&back) >= before,
            "the stuck clock started over after a rebalance that gave the cluster back: {} then {}",
            before,
            stuck(&back)
        );
        stop.send_replace(true);
        running.await.unwrap();
    }

    #[tokio::test]
    async fn a_panicking_cycle_marks_the_cluster_down_and_drops_its_values() {
        fn script(cycle: usize) -> RawSample {
            assert!(cycle == 0, "the sampler broke");
            orders_and_groups()
        }
        let (cluster_loop, mut published, metrics) = looping(script, None);
        let (stop, stopped) = watch::channel(false);
        let running = tokio::spawn(cluster_loop.run(stopped));
        let first = published
            .wait_for(|s| s.is_some())
            .await
            .unwrap()
            .clone()
            .unwrap();
        assert!(first.up && first.partitions.len() == 1, "{first:?}");
        // The next cycle panics: published as unreachable, nothing of the first served.
        let down = published.wait_for(|s| s.as_ref().is_some_and(|s| !s.up));
        let after = tokio::time::timeout(Duration::from_secs(5), down)
            .await
            .expect("no snapshot marks the cluster down after the panic")
            .unwrap()
            .clone()
            .unwrap();
        stop.send_replace(true);
        running.await.unwrap();
        assert!(
            after.partitions.is_empty() && after.groups.is_empty(),
            "{after:?}"
        );
        assert_eq!(after.last_success, first.last_success);
        let text = metrics.encode_openmetrics();
        assert!(
            text.contains("kafka_lso_exporter_up{kafka_cluster=\"prod\"} 0"),
            "{text}"
        );
        assert!(!text.contains("kafka_partition_high_watermark{"), "{text}");
        assert!(!text.contains("group=\"billing\""), "{text}");
    }

    /// The metadata answered, but not one partition's offsets could be read (every
    /// ListOffsets refused): the cluster is down, never up and empty.
    #[tokio::test]
    async fn a_cluster_whose_offsets_all_fail_is_down_not_up_and_empty() {
        fn script(_: usize) -> RawSample {
            let mut raw = orders_and_groups();
            for p in &mut raw.partitions {
                (p.log_start_offset, p.last_stable_offset, p.high_watermark) = (None, None, None);
            }
            raw.fail(Stage::HighWatermark, 1, "orders/0: TLS handshake failed");
            raw
        }
        let (cluster_loop, mut published, metrics) = looping(script, None);
        let snapshot = run_until(cluster_loop, &mut published, |_| true).await;
        assert!(!snapshot.up, "{snapshot:?}");
        let text = metrics.encode_openmetrics();
        assert!(
            text.contains("kafka_lso_exporter_up{kafka_cluster=\"prod\"} 0"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn no_group_series_on_topics_the_filter_leaves_out_or_past_max_series() {
        fn script(_: usize) -> RawSample {
            orders_and_groups()
        }
        // Every per-partition family of groups (own, per topic, share, kafka_exporter's).
        let (cluster_loop, mut published, metrics) = looping(script, None);
        run_until(cluster_loop, &mut published, |s| s.up).await;
        let text = metrics.encode_openmetrics();
        assert!(
            text.contains("kafka_consumergroup_committed_offset{kafka_cluster=\"prod\",group=\"billing\",topic=\"orders\""),
            "{text}"
        );
        assert!(text.contains("kafka_sharegroup_broker_lag{"), "{text}");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(
                !line.contains("excluded-topic") && !line.contains("__consumer_offsets"),
                "a series of a topic the filter leaves out: {line}"
            );
        }

        // Over max_series, the groups outside priority_groups lose every offset series.
        let nobody = NameFilter::new(&[], &[]).unwrap();
        let (cluster_loop, mut published, metrics) = looping(script, Some((1, nobody)));
        let snapshot = run_until(cluster_loop, &mut published, |s| s.up).await;
        let text = metrics.encode_openmetrics();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(
                !(line.contains("topic=\"orders\"") && line.contains("group=\"")),
                "a group's offset series past max_series: {line}"
            );
        }
        assert!(text.contains("kafka_consumergroup_members{"), "{text}");
        // Only /metrics is trimmed: the snapshot the status page and the JSON API read
        // keeps every group's offsets.
        assert_eq!(
            snapshot.left_out_groups,
            ["billing".to_string(), "queue".to_string()].into()
        );
        assert!(snapshot
            .groups
            .iter()
            .all(|g| g.offsets.as_ref().is_some_and(|o| !o.is_empty())));
        let shown = text
            .lines()
            .filter(|l| l.contains("kafka_cluster=\"prod\"") && !l.starts_with('#'))
            .filter(|l| {
                ![
                    "errors_total",
                    "request_refusals_total",
                    "anomalies_total",
                    "cycle_duration_seconds",
                ]
                .iter()
                .any(|own| l.starts_with(&format!("kafka_lso_exporter_{own}")))
            })
            .count();
        assert_eq!(snapshot.series, shown, "{text}");
        assert!(
            text.contains(&format!(
                "kafka_lso_exporter_series{{kafka_cluster=\"prod\"}} {shown}"
            )),
            "{text}"
        );
    }
}
