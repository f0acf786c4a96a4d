//! The HTTP surface (SPEC §5): `/metrics`, `/healthz`, `/readyz` and a small HTML page
//! at `/`. Nothing here talks to Kafka; every handler reads the latest snapshots.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::http::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::metrics::{Metrics, SnapshotReceiver};
use crate::snapshot::ClusterSnapshot;

/// Shared by all handlers.
#[derive(Clone)]
pub struct AppState {
    pub metrics: Arc<Metrics>,
    pub clusters: Arc<Vec<(String, SnapshotReceiver)>>,
    pub interval: Duration,
}

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let accept = headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let gzip = headers
        .get(ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(accepts_gzip);
    // Served from the body rendered for this cycle when there is one; rendering a large
    // snapshot takes milliseconds of CPU, so it runs off the I/O threads.
    let encoded = match state.metrics.cached(accept.as_deref(), gzip) {
        Some(encoded) => Ok(encoded),
        None => {
            tokio::task::spawn_blocking(move || state.metrics.encode_for(accept.as_deref(), gzip))
                .await
        }
    };
    match encoded {
        Ok((content_type, gzipped, body)) => {
            let mut response = ([(CONTENT_TYPE, content_type)], body).into_response();
            if gzipped {
                response
                    .headers_mut()
                    .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            }
            response
        }
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding failed: {error}\n"),
        )
            .into_response(),
    }
}

/// `Accept-Encoding` lists gzip without refusing it (`gzip;q=0`).
fn accepts_gzip(header: &str) -> bool {
    header.split(',').any(|coding| {
        let mut parts = coding.split(';').map(str::trim);
        let name = parts.next().unwrap_or_default();
        let refused = parts.any(|p| p.replace(' ', "") == "q=0" || p.replace(' ', "") == "q=0.0");
        (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
    })
}

/// Ready once every cluster had a cycle that reached it within the last 3 intervals.
async fn readyz(State(state): State<AppState>) -> Response {
    let now = SystemTime::now();
    let limit = state.interval * 3;
    let mut body = String::new();
    let mut ready = true;
    for (name, rx) in state.clusters.iter() {
        let snapshot = rx.borrow().clone();
        match snapshot.as_ref().and_then(|s| s.last_success) {
            Some(at) => {
                let age = now.duration_since(at).unwrap_or_default();
                let fresh = age <= limit;
                ready &= fresh;
                let _ = writeln!(
                    body,
                    "{name}: last successful cycle {:.1}s ago{}",
                    age.as_secs_f64(),
                    if fresh { "" } else { " (stale)" }
                );
            }
            None => {
                ready = false;
                let _ = writeln!(body, "{name}: no successful cycle yet");
            }
        }
    }
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body).into_response()
}

async fn index(State(state): State<AppState>) -> Html<String> {
    let snapshots: Vec<(String, Option<Arc<ClusterSnapshot>>)> = state
        .clusters
        .iter()
        .map(|(name, rx)| (name.clone(), rx.borrow().clone()))
        .collect();
    Html(render_index(&snapshots, SystemTime::now()))
}

/// The `/` page: version, clusters, and every partition with HW > LSO, longest stuck first.
pub fn render_index(
    clusters: &[(String, Option<Arc<ClusterSnapshot>>)],
    now: SystemTime,
) -> String {
    let mut out = String::with_capacity(8 * 1024);
    out.push_str(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>kafka-lso-exporter</title>\n\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}\
         td.l,th.l{text-align:left}</style></head><body>\n",
    );
    let _ = writeln!(
        out,
        "<h1>kafka-lso-exporter</h1>\n<p>version {} (revision {}) · <a href=\"metrics\">metrics</a> · \
         <a href=\"readyz\">readyz</a></p>",
        escape(crate::VERSION),
        escape(crate::REVISION)
    );

    out.push_str("<h2>Clusters</h2>\n<table><tr><th class=\"l\">cluster</th><th>up</th><th>last successful cycle</th><th>partitions</th><th>groups</th><th>partitions with HW &gt; LSO</th></tr>\n");
    for (name, snapshot) in clusters {
        let (up, age, partitions, groups, pinned) = match snapshot {
            Some(s) => (
                if s.up { "yes" } else { "no" },
                s.last_success
                    .map(|at| {
                        format!(
                            "{:.0}s ago",
                            now.duration_since(at).unwrap_or_default().as_secs_f64()
                        )
                    })
                    .unwrap_or_else(|| "never".into()),
                s.partitions.len().to_string(),
                s.groups.len().to_string(),
                s.partitions
                    .iter()
                    .filter(|p| p.visibility.is_some_and(|v| v.hw_minus_lso > 0))
                    .count()
                    .to_string(),
            ),
            None => (
                "starting",
                "never".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ),
        };
        let _ = writeln!(
            out,
            "<tr><td class=\"l\">{}</td><td>{up}</td><td>{age}</td><td>{partitions}</td><td>{groups}</td><td>{pinned}</td></tr>",
            escape(name)
        );
    }
    out.push_str("</table>\n");

    let mut pinned: Vec<(&str, &crate::snapshot::PartitionState, i64, f64)> = Vec::new();
    for (name, snapshot) in clusters {
        for p in snapshot.iter().flat_map(|s| s.partitions.iter()) {
            if let Some(v) = p.visibility.filter(|v| v.hw_minus_lso > 0) {
                pinned.push((name, p, v.hw_minus_lso, v.lso_stuck_seconds));
            }
        }
    }
    pinned.sort_by(|a, b| b.3.total_cmp(&a.3).then(b.2.cmp(&a.2)));
    out.push_str("<h2>Partitions withheld by open transactions (HW &gt; LSO)</h2>\n");
    if pinned.is_empty() {
        out.push_str(
            "<p>None: every partition's last stable offset equals its high watermark.</p>\n",
        );
    } else {
        out.push_str("<table><tr><th class=\"l\">cluster</th><th class=\"l\">topic</th><th>partition</th><th>high watermark</th><th>last stable offset</th><th>HW &minus; LSO</th><th>LSO stuck for</th></tr>\n");
        for (cluster, p, gap, stuck) in pinned {
            let _ = writeln!(
                out,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{gap}</td><td>{}</td></tr>",
                escape(cluster),
                escape(&p.topic),
                p.partition,
                p.high_watermark.unwrap_or_default(),
                p.last_stable_offset.unwrap_or_default(),
                human_duration(stuck)
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str("<p>Stuck times count from the first cycle that saw the LSO at its current value; a restart of the exporter restarts them.</p>\n</body></html>\n");
    out
}

fn human_duration(seconds: f64) -> String {
    let s = seconds.round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{PartitionState, Visibility};

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
            }),
        }
    }

    #[test]
    fn index_lists_pinned_partitions_longest_stuck_first_and_escapes() {
        let now = SystemTime::now();
        let hostile = "<script>alert('x')</script>&\"";
        let snapshot = ClusterSnapshot {
            cluster: hostile.into(),
            up: true,
            taken_at: now,
            last_success: Some(now),
            partitions: vec![
                partition("orders", 0, 900, 880, 184.0),
                partition("orders", 1, 50, 50, 0.0),
                partition("payments", 3, 120, 100, 4000.0),
            ],
            groups: vec![],
            series_dropped: 0,
        };
        let page = render_index(&[(hostile.to_string(), Some(Arc::new(snapshot)))], now);
        assert!(!page.contains("<script>"), "unescaped: {page}");
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"));
        let payments = page.find("<td class=\"l\">payments</td><td>3</td><td>120</td><td>100</td><td>20</td><td>1h 06m</td>").expect("payments row");
        let orders = page.find("<td class=\"l\">orders</td><td>0</td><td>900</td><td>880</td><td>20</td><td>3m 04s</td>").expect("orders row");
        assert!(payments < orders, "longest stuck first");
        assert!(
            !page.contains("<td class=\"l\">orders</td><td>1</td>"),
            "HW == LSO is not listed"
        );
    }

    #[test]
    fn gzip_negotiation() {
        assert!(accepts_gzip("gzip"));
        assert!(accepts_gzip("deflate, gzip;q=1.0, *;q=0.5"));
        assert!(accepts_gzip("*"));
        assert!(!accepts_gzip("identity"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip("br"));
    }

    #[test]
    fn index_before_the_first_cycle() {
        let page = render_index(&[("prod".to_string(), None)], SystemTime::now());
        assert!(page.contains("<td class=\"l\">prod</td><td>starting</td>"));
        assert!(page.contains("None: every partition"));
    }
}
