//! kafka-lso-exporter: a Prometheus exporter that shows what Kafka transactions do to
//! visibility — per partition the high watermark and the last stable offset, the gap
//! between them, how long the LSO has been stuck, and consumer lag against both.
//!
//! The path of a cycle, one folder each, every import pointing down it:
//! [`kafka`] samples a cluster (a [`kafka::RawSample`]), [`derive`] turns that into a
//! [`derive::ClusterSnapshot`] (pure code), [`expose`] renders snapshots for `/metrics`,
//! [`serve`] answers HTTP (behind TLS and basic auth when a web config is given).
//! [`scheduler`] runs one sampling loop per cluster through them. At the side:
//! [`config`] (settings, validated; imported by all), [`logging`] (the log lines, logfmt or
//! JSON, in promslog's keys), [`memory`] (how the allocator holds memory; imports nothing)
//! [`kafka_exporter_flags`] (kafka_exporter's command line, read into settings) and `drill`
//! (the binary's `drill` subcommand). [`run`] and [`run_with`] wire it up;
//! `main.rs` only parses flags and starts telemetry.

pub mod config;
pub mod derive;
pub mod expose;
pub mod kafka;
pub mod kafka_exporter_flags;
pub mod logging;
pub mod memory;
pub mod scheduler;
pub mod serve;

#[cfg(test)]
mod hostile;

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::Config;
use crate::derive::series::Exposition;
use crate::expose::Metrics;
use crate::kafka::coordination::{self, Coordinator, Ownership};
use crate::kafka::{KafkaSampler, Sampler};
use crate::scheduler::ClusterLoop;
use crate::serve::web::{self, WebConfig};

/// The exporter's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The source revision the binary was built from.
pub const REVISION: &str = env!("GIT_REVISION");

/// Why the exporter could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot create the Kafka client for cluster {cluster}: {source}")]
    Client {
        cluster: String,
        source: rdkafka::error::KafkaError,
    },
    #[error("no address to serve HTTP on")]
    NoListener,
    #[error("HTTP server failed: {0}")]
    Http(#[from] std::io::Error),
}

/// Runs the exporter until `shutdown` completes: one sampling loop per configured
/// cluster and the HTTP server on every one of `listeners` (one per
/// `--web.listen-address`; at least one). Returns once the servers have answered their
/// in-flight requests and the sampling loops have stopped.
pub async fn run(
    config: Config,
    listeners: Vec<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    run_with(config, listeners, None, shutdown).await
}

/// [`run`], with the web config (`--web.config.file`) applied to every path of every
/// listener when given: HTTPS instead of HTTP when it sets a certificate, basic auth when
/// it lists users.
pub async fn run_with(
    config: Config,
    listeners: Vec<TcpListener>,
    web: Option<WebConfig>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    if listeners.is_empty() {
        return Err(RunError::NoListener);
    }
    let names: Vec<String> = config.clusters.iter().map(|c| c.name.clone()).collect();
    let ownership = match &config.ha {
        Some(ha) => Ownership::member(names.clone(), &ha.group),
        None => Ownership::everything(names.clone()),
    };
    let mut samplers: Vec<(String, Arc<dyn Sampler>)> = Vec::new();
    let mut coordinators = Vec::new();
    if let Some(cluster) = config.ha.as_ref().and_then(|ha| ha.cluster.as_ref()) {
        tracing::warn!(
            ha_cluster = %cluster,
            "ha.cluster is deprecated and ignored: each cluster's share is coordinated on that cluster \
             (a group of the name ha.group in each); remove the setting"
        );
    }
    for cluster in &config.clusters {
        let sampler = KafkaSampler::new(cluster).map_err(|source| RunError::Client {
            cluster: cluster.name.clone(),
            source,
        })?;
        // Each cluster's share is decided on the cluster itself: a cluster that is down
        // can only hide itself.
        if let Some(ha) = &config.ha {
            match sampler.wire() {
                Some(wire) => coordinators.push(Coordinator {
                    cluster: cluster.name.clone(),
                    ownership: ownership.clone(),
                    wire,
                    settings: ha.clone(),
                    bootstrap: config::bootstrap_list(&cluster.bootstrap_servers)
                        .into_iter()
                        .map(str::to_string)
                        .collect(),
                    fingerprint: coordination::fingerprint(
                        &cluster.canonical(config.interval, config.timeout),
                    ),
                    first_address: Default::default(),
                }),
                None => ownership.alone(
                    &cluster.name,
                    "its client settings are ones the exporter's own client cannot use, and the \
                     replicas coordinate over it with that client",
                ),
            }
        }
        samplers.push((cluster.name.clone(), Arc::new(sampler)));
    }

    let mut receivers = Vec::new();
    let mut senders = Vec::new();
    for (name, _) in &samplers {
        let (tx, rx) = watch::channel(None);
        receivers.push((name.clone(), rx));
        senders.push(tx);
    }
    let metrics = Arc::new(
        Metrics::with_ownership(
            receivers.iter().map(|(_, rx)| rx.clone()).collect(),
            ownership.clone(),
        )
        .with_process_metrics()
        // Two intervals: a cycle that ends a little later than the last one renders
        // the body itself; a scrape re-renders only where none ended for that long (a
        // stand-by replica, every cluster down).
        .with_max_age(config.interval * 2),
    );

    let (stop_tx, stop_rx) = watch::channel(false);
    let coordinating: Vec<_> = coordinators
        .into_iter()
        .map(|c| tokio::spawn(c.run(stop_rx.clone())))
        .collect();
    let mut loops = Vec::new();
    for (((name, sampler), snapshots), cluster) in
        samplers.into_iter().zip(senders).zip(&config.clusters)
    {
        let cluster_loop = ClusterLoop {
            cluster: name,
            sampler,
            interval: config.interval,
            timeout: config.timeout,
            snapshots,
            metrics: metrics.clone(),
            max_series: cluster
                .max_series
                .map(|max| (max, cluster.priority_groups.clone())),
            hanging_margin: cluster.hanging_margin,
            stall_after: cluster.stall_after,
            transaction_list_detail: cluster.transaction_list_detail,
            exposition: Exposition {
                granularity: cluster.granularity,
                kafka_exporter: cluster.compat_kafka_exporter,
                assigned_only: cluster.group_settings.assigned_only,
                owner_labels: cluster.group_settings.owner_labels,
            },
            group_granularity: cluster.group_granularity.clone(),
            group_settings: cluster.group_settings,
            ownership: ownership.clone(),
            // A cluster back within a rebalance (the session timeout, twice: a join
            // that waits for the others, then the sync) and a cycle keeps its state.
            keep_state_for: config.ha.as_ref().map_or(std::time::Duration::ZERO, |ha| {
                ha.session_timeout * 2 + config.interval * 2
            }),
        };
        loops.push(tokio::spawn(cluster_loop.run(stop_rx.clone())));
    }

    let app = serve::router(serve::AppState {
        metrics,
        clusters: Arc::new(receivers),
        bootstrap: Arc::new(
            config
                .clusters
                .iter()
                .map(|c| (c.name.clone(), c.bootstrap_servers.clone()))
                .collect(),
        ),
        interval: config.interval,
        telemetry_path: Arc::from(config.web.telemetry_path.as_str()),
        ownership: ownership.clone(),
    });
    if let Some(web) = &web {
        for warning in web.warnings() {
            tracing::warn!(file = %web.path().display(), "{warning}");
        }
    }
    let addresses = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    tracing::info!(
        listen = %addresses.join(","),
        clusters = config.clusters.len(),
        interval = ?config.interval,
        web_tls = web.as_ref().is_some_and(WebConfig::tls_enabled),
        web_basic_auth = web.as_ref().is_some_and(|w| w.basic_auth_users() > 0),
        "kafka-lso-exporter {VERSION} serving {}",
        config.web.telemetry_path
    );

    // One server per listener, all on the same router and the same web config (one rate
    // limit, one reload of rotated certificates), each draining its connections once
    // `stop_rx` turns true.
    let live = web.map(WebConfig::into_live);
    let app = match &live {
        Some(live) => web::protect(app, live.clone()),
        None => app,
    };
    let mut servers: Vec<Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>>> = Vec::new();
    for listener in listeners {
        let stopped = stopped(stop_rx.clone());
        let app = app.clone();
        servers.push(match &live {
            Some(live) if live.tls() => Box::pin(
                axum::serve(web::TlsListener::new(listener, live.clone()), app)
                    .with_graceful_shutdown(stopped)
                    .into_future(),
            ),
            _ => Box::pin(
                axum::serve(listener, app)
                    .with_graceful_shutdown(stopped)
                    .into_future(),
            ),
        });
    }
    let serving = futures_util::future::try_join_all(servers);
    tokio::pin!(serving);
    tokio::pin!(shutdown);
    let served = tokio::select! {
        // A server ends on its own only when it failed; the others stop with it.
        served = &mut serving => served,
        () = &mut shutdown => {
            tracing::info!("shutting down");
            let _ = stop_tx.send(true);
            serving.await
        }
    };
    let _ = stop_tx.send(true);
    // Leaves the coordination groups at once, so that the other replicas take over now.
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(3),
        futures_util::future::join_all(coordinating),
    )
    .await;
    for handle in loops {
        let _ = handle.await;
    }
    served.map(drop).map_err(RunError::Http)
}

/// Completes once `stop` turns true (or its sender is gone).
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// What `--check-config --connect` found of one cluster.
#[derive(Debug)]
pub struct ConnectCheck {
    pub cluster: String,
    /// Why no cycle reached the cluster; `None` when one did.
    pub unreachable: Option<String>,
    /// Each feature the cycles could judge.
    pub features:
        std::collections::BTreeMap<kafka::features::Feature, kafka::features::FeatureState>,
}

impl ConnectCheck {
    /// The cluster was reached and no feature the configuration asks for is known not
    /// to work.
    pub fn passed(&self) -> bool {
        use kafka::features::Status;
        self.unreachable.is_none()
            && self
                .features
                .values()
                .all(|s| matches!(s.status, Status::Ok | Status::Disabled))
    }
}

/// Connects to every cluster and runs sampling cycles (at most `cycles`, `pause` apart)
/// until each feature that can be judged without traffic has been (the retention read
/// runs in the background of the first cycle), as the exporter would: the capability
/// map `--check-config --connect` prints.
pub async fn connect_check(
    config: &Config,
    cycles: usize,
    pause: std::time::Duration,
) -> Result<Vec<ConnectCheck>, RunError> {
    use kafka::features::Feature;
    let mut checks = Vec::new();
    for cluster in &config.clusters {
        let sampler = KafkaSampler::new(cluster).map_err(|source| RunError::Client {
            cluster: cluster.name.clone(),
            source,
        })?;
        let mut map = derive::features::FeatureMap::default();
        let mut unreachable = Some("no cycle ran".to_string());
        for cycle in 0..cycles.max(1) {
            if cycle > 0 {
                tokio::time::sleep(pause).await;
            }
            let raw = sampler
                .sample(std::time::Instant::now() + config.timeout)
                .await;
            unreachable = (!raw.reached).then(|| {
                raw.failures
                    .values()
                    .next()
                    .map_or_else(|| "unknown error".to_string(), |f| f.first_error.clone())
            });
            map.observe(&raw);
            // What only traffic exercises (share groups, a pinned partition) may stay
            // unknown; the rest is known after a cycle or two.
            let judged = |f: &Feature| {
                matches!(f, Feature::ShareGroups | Feature::TransactionForensics)
                    || map.states().contains_key(f)
            };
            // A cluster it cannot reach is tried once more (a pod's DNS, a broker
            // restarting, the first token), unless the brokers refused the credentials.
            let refused = map
                .states()
                .get(&Feature::Authentication)
                .is_some_and(|s| !s.status.works());
            if (!raw.reached && (cycle > 0 || refused))
                || (cycle > 0 && Feature::ALL.iter().all(judged))
            {
                break;
            }
        }
        checks.push(ConnectCheck {
            cluster: cluster.name.clone(),
            unreachable,
            features: map.states().clone(),
        });
    }
    Ok(checks)
}
