//! The cluster's metadata (brokers, topics, partitions and their leaders) through the
//! exporter's own client, with a hedged request: one broker is asked, and when it has
//! not answered within [`hedge`] of the time left the next one is asked too, and so on;
//! the first answer wins. A broker that hangs or answers slowly costs the cycle that
//! delay, never its metadata. The broker that answered last is asked first next time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt as _};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::kafka::wire::{Pool, WireError};

/// The longest a broker is waited for before the next one is asked as well.
const MAX_HEDGE: Duration = Duration::from_millis(500);

/// Where metadata is asked for: the brokers of the last answer, the one that answered it
/// first; the bootstrap servers until there is an answer.
pub struct Candidates {
    bootstrap: Vec<String>,
    state: Mutex<(Vec<String>, Option<String>)>,
}

impl Candidates {
    pub fn new(bootstrap_servers: &str) -> Candidates {
        Candidates {
            bootstrap: crate::config::bootstrap_list(bootstrap_servers)
                .into_iter()
                .map(str::to_string)
                .collect(),
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Vec<String>, Option<String>)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The order to ask in: the broker that answered last, then the other known brokers,
    /// then the bootstrap servers not among them.
    fn order(&self) -> Vec<String> {
        let (known, last) = self.lock().clone();
        let mut order: Vec<String> = last.into_iter().collect();
        for addr in known.iter().chain(&self.bootstrap) {
            if !order.contains(addr) {
                order.push(addr.clone());
            }
        }
        order
    }

    fn answered(&self, by: &str, brokers: Vec<String>) {
        *self.lock() = (brokers, Some(by.to_string()));
    }
}

/// How long to wait for one broker before asking the next as well: a quarter of the time
/// left, at most [`MAX_HEDGE`].
fn hedge(deadline: Instant) -> Duration {
    (deadline.saturating_duration_since(Instant::now()) / 4).min(MAX_HEDGE)
}

/// The metadata of every topic, from the first broker to answer. `Err` carries the error
/// of the last broker that failed when none answered.
pub async fn fetch(
    pool: &Pool,
    candidates: &Candidates,
    deadline: Instant,
) -> Result<MetadataResponse, WireError> {
    let mut request = MetadataRequest::default();
    request.topics = None; // every topic
    request.allow_auto_topic_creation = false;
    hedged(pool, candidates, &request, deadline).await
}

/// The metadata of the topics named, as [`fetch`] asks: where every topic's leaves out
/// those the principal may not Describe, this one answers each with its error
/// (TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION). Never creates a topic.
pub async fn fetch_named(
    pool: &Pool,
    candidates: &Candidates,
    topics: &[Arc<str>],
    deadline: Instant,
) -> Result<MetadataResponse, WireError> {
    let mut request = MetadataRequest::default();
    request.topics = Some(
        topics
            .iter()
            .map(|topic| {
                let mut named = MetadataRequestTopic::default();
                named.name = Some(TopicName(StrBytes::from_string(topic.to_string())));
                named
            })
            .collect(),
    );
    request.allow_auto_topic_creation = false;
    hedged(pool, candidates, &request, deadline).await
}

/// `request` to the first broker to answer, the next asked after [`hedge`].
async fn hedged(
    pool: &Pool,
    candidates: &Candidates,
    request: &MetadataRequest,
    deadline: Instant,
) -> Result<MetadataResponse, WireError> {
    let order = candidates.order();
    let mut asking = FuturesUnordered::new();
    let mut last_error = WireError::Deadline;
    let ask = |addr: String| async move {
        let answer = pool.send(&addr, request, "Metadata", deadline).await;
        (addr, answer)
    };
    let mut next = order.into_iter();
    match next.next() {
        Some(addr) => asking.push(ask(addr)),
        None => {
            return Err(WireError::Connect {
                addr: String::new(),
                reason: "no bootstrap server".into(),
            })
        }
    }
    let mut more = true;
    while !asking.is_empty() {
        let wait = tokio::time::sleep(hedge(deadline));
        tokio::select! {
            answer = asking.next() => match answer {
                Some((addr, Ok(answer))) => {
                    candidates.answered(&addr, brokers(&answer).into_values().collect());
                    return Ok(answer);
                }
                Some((_, Err(error))) => {
                    last_error = error;
                    // Failed at once (refused, reset): the next broker is asked now.
                    match next.next() {
                        Some(addr) => asking.push(ask(addr)),
                        None => more = false,
                    }
                }
                None => {}
            },
            _ = wait, if more => match next.next() {
                Some(addr) => asking.push(ask(addr)),
                // Nobody left to ask: wait for those asked.
                None => more = false,
            },
        }
    }
    Err(last_error)
}

/// The brokers of an answer: id -> address.
pub fn brokers(answer: &MetadataResponse) -> BTreeMap<i32, String> {
    answer
        .brokers
        .iter()
        .map(|b| {
            (
                b.node_id.0,
                crate::kafka::wire::broker_address(&b.host, b.port),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_the_last_broker_that_answered_first_then_the_others() {
        let candidates = Candidates::new("b1:9092, b2:9092");
        assert_eq!(candidates.order(), vec!["b1:9092", "b2:9092"]);
        candidates.answered(
            "k3:9092",
            vec!["k1:9092".into(), "k2:9092".into(), "k3:9092".into()],
        );
        assert_eq!(
            candidates.order(),
            vec!["k3:9092", "k1:9092", "k2:9092", "b1:9092", "b2:9092"]
        );
    }

    #[test]
    fn the_hedge_is_a_quarter_of_the_time_left_at_most_half_a_second() {
        let soon = Instant::now() + Duration::from_millis(400);
        assert!(hedge(soon) <= Duration::from_millis(100));
        assert_eq!(hedge(Instant::now() + Duration::from_secs(30)), MAX_HEDGE);
        assert_eq!(hedge(Instant::now()), Duration::ZERO);
    }
}
