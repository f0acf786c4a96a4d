//! kafka-lso-exporter: a Prometheus exporter that shows what Kafka transactions do to
//! visibility — per partition the high watermark and the last stable offset, the gap
//! between them, how long the LSO has been stuck, and consumer lag against both.
//!
//! Layout: [`config`] loads and validates settings; [`kafka`] samples clusters;
//! [`snapshot`] derives metric values (pure code); [`scheduler`] runs one sampling loop
//! per cluster; [`metrics`] renders snapshots; [`http`] serves them, behind [`web`] (TLS
//! and basic auth) when a web config is given; [`logfmt`] is the default log format.
//! [`run`] and [`run_with`] wire it up.

pub mod config;
pub mod http;
pub mod kafka;
pub mod logfmt;
pub mod metrics;
pub mod scheduler;
pub mod snapshot;
pub mod web;

#[cfg(test)]
mod hostile;

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::Config;
use crate::kafka::{KafkaSampler, Sampler};
use crate::metrics::Metrics;
use crate::scheduler::ClusterLoop;
use crate::web::WebConfig;

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
    #[error("HTTP server failed: {0}")]
    Http(#[from] std::io::Error),
}

/// Runs the exporter until `shutdown` completes: one sampling loop per configured
/// cluster and the HTTP server on `listener`. Returns once the server has answered its
/// in-flight requests and the sampling loops have stopped.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    run_with(config, listener, None, shutdown).await
}

/// [`run`], with the web config (`--web.config.file`) applied to every path when given:
/// HTTPS instead of HTTP when it sets a certificate, basic auth when it lists users.
pub async fn run_with(
    config: Config,
    listener: TcpListener,
    web: Option<WebConfig>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    let mut samplers: Vec<(String, Arc<dyn Sampler>)> = Vec::new();
    for cluster in &config.clusters {
        let sampler = KafkaSampler::new(cluster).map_err(|source| RunError::Client {
            cluster: cluster.name.clone(),
            source,
        })?;
        samplers.push((cluster.name.clone(), Arc::new(sampler)));
    }

    let mut receivers = Vec::new();
    let mut senders = Vec::new();
    for (name, _) in &samplers {
        let (tx, rx) = watch::channel(None);
        receivers.push((name.clone(), rx));
        senders.push(tx);
    }
    let metrics = Arc::new(Metrics::new(
        receivers.iter().map(|(_, rx)| rx.clone()).collect(),
    ));

    let (stop_tx, stop_rx) = watch::channel(false);
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
        };
        loops.push(tokio::spawn(cluster_loop.run(stop_rx.clone())));
    }

    let app = http::router(http::AppState {
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
    });
    if let Some(web) = &web {
        for warning in web.warnings() {
            tracing::warn!(file = %web.path().display(), "{warning}");
        }
    }
    tracing::info!(
        listen = %listener.local_addr()?,
        clusters = config.clusters.len(),
        interval = ?config.interval,
        tls = web.as_ref().is_some_and(WebConfig::tls_enabled),
        basic_auth = web.as_ref().is_some_and(|w| w.basic_auth_users() > 0),
        "kafka-lso-exporter {VERSION} serving /metrics"
    );
    let shutdown = async move {
        shutdown.await;
        tracing::info!("shutting down");
        let _ = stop_tx.send(true);
    };
    let served = match web.map(WebConfig::into_live) {
        None => {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        }
        Some(live) if live.tls() => {
            let app = web::protect(app, live.clone());
            axum::serve(web::TlsListener::new(listener, live), app)
                .with_graceful_shutdown(shutdown)
                .await
        }
        Some(live) => {
            axum::serve(listener, web::protect(app, live))
                .with_graceful_shutdown(shutdown)
                .await
        }
    };
    for handle in loops {
        let _ = handle.await;
    }
    served.map_err(RunError::Http)
}
