//! The topics' `retention.ms`, for how long a group's unread records stay in the log
//! (unlimited, -1, on a compacted topic: `cleanup.policy` without `delete`):
//! DescribeConfigs on the topics, read when a topic is first seen and again every
//! [`REFRESH`], all topics due in one request to one broker (any broker answers for topic
//! configurations). At rest a cycle sends nothing.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::DescribeConfigsRequest;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::kafka::wire::WireClient;

/// How long a topic's `retention.ms` is used before it is read again (an operator may
/// change it).
pub const REFRESH: Duration = Duration::from_secs(600);
/// After a failed read, how long before the topics are asked for again.
const RETRY: Duration = Duration::from_secs(60);

/// The topic configuration reader of one cluster.
pub struct TopicConfigs {
    cluster: String,
    wire: Arc<WireClient>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Per topic: `retention.ms` (-1: unlimited) and when it is due again.
    known: HashMap<Arc<str>, (i64, Instant)>,
    /// No topic is asked for before then (after a failure).
    quiet_until: Option<Instant>,
    /// Which broker to ask next: the brokers take turns.
    turn: usize,
    /// A failure was logged since the last success.
    warned: bool,
}

impl TopicConfigs {
    pub fn new(cluster: &str, wire: Arc<WireClient>) -> TopicConfigs {
        TopicConfigs {
            cluster: cluster.to_string(),
            wire,
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `retention.ms` of each of `topics` (sorted, distinct): from the cache, after
    /// asking for the topics not yet known or due again. A failure leaves the cached
    /// values in place (a topic never read has none) and is returned, for `topic_configs`
    /// in the cycle's errors.
    pub async fn retention(
        &self,
        topics: &[Arc<str>],
        brokers: &BTreeMap<i32, String>,
        deadline: Instant,
    ) -> (HashMap<Arc<str>, i64>, Option<String>) {
        let mut failure = None;
        let now = Instant::now();
        let (due, addr) = {
            let mut state = self.lock();
            state.known.retain(|topic, _| topics.contains(topic));
            let quiet = state.quiet_until.is_some_and(|until| now < until);
            let due: Vec<Arc<str>> = topics
                .iter()
                .filter(|t| state.known.get(*t).is_none_or(|(_, at)| now >= *at))
                .cloned()
                .collect();
            let addr = (!brokers.is_empty()).then(|| {
                state.turn = state.turn.wrapping_add(1);
                brokers.values().nth(state.turn % brokers.len()).cloned()
            });
            (if quiet { Vec::new() } else { due }, addr.flatten())
        };
        if let (false, Some(addr)) = (due.is_empty(), addr) {
            match self.read(&addr, &due, deadline).await {
                Ok(read) => {
                    let mut state = self.lock();
                    let next = Instant::now() + REFRESH;
                    for (topic, retention) in read {
                        state.known.insert(topic, (retention, next));
                    }
                    state.quiet_until = None;
                    state.warned = false;
                }
                Err(error) => {
                    let mut state = self.lock();
                    state.quiet_until = Some(Instant::now() + RETRY);
                    if !state.warned {
                        state.warned = true;
                        tracing::warn!(
                            cluster = %self.cluster,
                            "cannot read the topics' retention.ms ({error}); the groups' retention margin in seconds is absent \
                             for topics not read yet (needs DescribeConfigs on the topics); asked again in {} s",
                            RETRY.as_secs()
                        );
                    }
                    failure = Some(error);
                }
            }
        }
        let state = self.lock();
        let known = topics
            .iter()
            .filter_map(|t| state.known.get(t).map(|(ms, _)| (t.clone(), *ms)))
            .collect();
        (known, failure)
    }

    /// One DescribeConfigs for `retention.ms` of `topics`; a topic the broker reports an
    /// error for (deleted since the metadata, no permission) is left out.
    async fn read(
        &self,
        addr: &str,
        topics: &[Arc<str>],
        deadline: Instant,
    ) -> Result<Vec<(Arc<str>, i64)>, String> {
        let mut request = DescribeConfigsRequest::default();
        request.resources = topics
            .iter()
            .map(|topic| {
                let mut resource = DescribeConfigsResource::default();
                resource.resource_type = 2; // TOPIC
                resource.resource_name = StrBytes::from_string(topic.to_string());
                resource.configuration_keys = Some(vec![
                    StrBytes::from_static_str("retention.ms"),
                    StrBytes::from_static_str("cleanup.policy"),
                ]);
                resource
            })
            .collect();
        let answer = self
            .wire
            .pool
            .send(addr, &request, "DescribeConfigs", deadline)
            .await
            .map_err(|e| format!("DescribeConfigs on {addr}: {e}"))?;
        let mut read = Vec::new();
        let mut first_error = None;
        for result in &answer.results {
            if let Some(error) = ResponseError::try_from_code(result.error_code) {
                first_error.get_or_insert_with(|| {
                    format!(
                        "DescribeConfigs {:?}: {error}",
                        result.resource_name.as_str()
                    )
                });
                continue;
            }
            let config = |name: &str| {
                result
                    .configs
                    .iter()
                    .find(|c| c.name.as_str() == name)
                    .and_then(|c| Some(c.value.as_ref()?.as_str().trim().to_string()))
            };
            // A compacted topic (cleanup.policy without `delete`) deletes nothing by age.
            let deletes = config("cleanup.policy")
                .is_none_or(|policy| policy.split(',').any(|p| p.trim() == "delete"));
            let value = config("retention.ms")
                .and_then(|ms| ms.parse::<i64>().ok())
                .map(|ms| if deletes { ms } else { -1 });
            let topic = topics
                .iter()
                .find(|t| ***t == *result.resource_name.as_str());
            if let (Some(topic), Some(value)) = (topic, value) {
                read.push((topic.clone(), value));
            }
        }
        match first_error {
            Some(error) if read.is_empty() => Err(error),
            _ => Ok(read),
        }
    }
}
