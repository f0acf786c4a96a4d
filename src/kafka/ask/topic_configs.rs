//! The topics' `retention.ms`, for how long a group's unread records stay in the log
//! (unlimited, -1, on a compacted topic: `cleanup.policy` without `delete`):
//! DescribeConfigs on the topics, read when a topic is first seen and again every
//! [`REFRESH`], all topics due in one request to one broker (any broker answers for topic
//! configurations), in the background of the cycles, on a connection of its own. At rest a cycle sends nothing; a
//! topic the broker refuses (no `DescribeConfigs` on it) is asked for again after
//! [`RETRY`], so that a permission granted is picked up within a minute.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::DescribeConfigsRequest;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::kafka::capability::Capability;
use crate::kafka::features::{Feature, FeatureState};
use crate::kafka::wire::{Lane, WireClient};

/// How long a topic's `retention.ms` is used before it is read again (an operator may
/// change it).
pub const REFRESH: Duration = Duration::from_secs(600);
/// After a failed read, how long before the topics are asked for again.
const RETRY: Duration = Duration::from_secs(60);

/// The topic configuration reader of one cluster.
pub struct TopicConfigs {
    cluster: String,
    wire: Arc<WireClient>,
    /// Off for [`RETRY`] after a failed request: no topic is asked for meanwhile.
    capability: Capability,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Per topic: `retention.ms` (-1: unlimited; `None`: the broker refused it, e.g. no
    /// DescribeConfigs permission) and when it is due again.
    known: HashMap<Arc<str>, (Option<i64>, Instant)>,
    /// A refresh runs in the background.
    reading: bool,
    /// Why the last refresh failed, until a cycle reports it.
    failure: Option<String>,
    /// Which broker to ask next: the brokers take turns.
    turn: usize,
    /// A failure was logged since the last success.
    warned: bool,
    /// Why the last refresh could not read some topics (refused per topic, or the
    /// request failed); `None` once one read every topic it asked for.
    refused: Option<String>,
    /// A refresh has ended.
    read_once: bool,
}

/// How long one refresh may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

impl TopicConfigs {
    pub fn new(cluster: &str, wire: Arc<WireClient>) -> TopicConfigs {
        TopicConfigs {
            cluster: cluster.to_string(),
            wire,
            capability: Capability::new(RETRY),
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `retention.ms` of each of `topics` as far as it is known, and why the last refresh
    /// failed (once, for `topic_configs` in the cycle's errors). Topics not yet read, or
    /// due again, are read in the background (one DescribeConfigs for all of them, to
    /// one broker): the cycle never waits for it, and a broker that does not answer costs
    /// the values of the topics it was asked about until the next try, nothing else.
    pub fn retention(
        self: &Arc<Self>,
        topics: &[Arc<str>],
        brokers: &BTreeMap<i32, String>,
    ) -> (HashMap<Arc<str>, i64>, Option<String>, Option<FeatureState>) {
        let now = Instant::now();
        let wanted: HashSet<&str> = topics.iter().map(|t| &**t).collect();
        let mut state = self.lock();
        state.known.retain(|topic, _| wanted.contains(&**topic));
        if !state.reading && !brokers.is_empty() && self.capability.usable() {
            let due: Vec<Arc<str>> = topics
                .iter()
                .filter(|t| state.known.get(*t).is_none_or(|(_, at)| now >= *at))
                .cloned()
                .collect();
            if !due.is_empty() {
                state.turn = state.turn.wrapping_add(1);
                let addr = brokers.values().nth(state.turn % brokers.len()).cloned();
                if let Some(addr) = addr {
                    state.reading = true;
                    let this = self.clone();
                    tokio::spawn(async move { this.refresh(addr, due).await });
                }
            }
        }
        let known = topics
            .iter()
            .filter_map(|t| {
                let (ms, _) = state.known.get(t)?;
                Some((t.clone(), (*ms)?))
            })
            .collect();
        let feature = match &state.refused {
            Some(reason) => {
                FeatureState::from_error(Feature::RetentionConfigs, "DescribeConfigs", reason)
            }
            None => state.read_once.then(FeatureState::ok),
        };
        (known, state.failure.take(), feature)
    }

    async fn refresh(&self, addr: String, due: Vec<Arc<str>>) {
        let read = self.read(&addr, &due, Instant::now() + READ_TIMEOUT).await;
        let mut state = self.lock();
        state.reading = false;
        state.read_once = true;
        match read {
            Ok((read, refused)) => {
                // A refusal per topic is a failure too (counted under topic_configs),
                // and it keeps the feature off until every topic has been read: a
                // refresh of only the topics readable before (they fall due at other
                // times than the refused ones) does not turn it on.
                if let Some(reason) = &refused {
                    state.failure = Some(reason.clone());
                }
                let (next, retry) = (Instant::now() + REFRESH, Instant::now() + RETRY);
                for topic in due {
                    let value = read.get(&topic).copied();
                    let due_again = if value.is_some() { next } else { retry };
                    state.known.insert(topic, (value, due_again));
                }
                let unread = state.known.values().any(|(value, _)| value.is_none());
                let refused = match refused {
                    None if unread => state.refused.clone(),
                    refused => refused,
                };
                state.refused = refused.clone();
                match refused {
                    Some(reason) if !state.warned => {
                        state.warned = true;
                        tracing::warn!(
                            cluster = %self.cluster,
                            "cannot read the retention.ms of some topics ({reason}); their groups' retention margin in \
                             seconds is absent (needs DescribeConfigs on the topics); asked again in {} s",
                            RETRY.as_secs()
                        );
                    }
                    Some(_) => {}
                    None => state.warned = false,
                }
            }
            Err(error) => {
                self.capability.turn_off(error.clone());
                state.refused = Some(error.clone());
                if !state.warned {
                    state.warned = true;
                    tracing::warn!(
                        cluster = %self.cluster,
                        "cannot read the topics' retention.ms ({error}); the groups' retention margin in seconds is absent \
                         for topics not read yet; asked again in {} s",
                        RETRY.as_secs()
                    );
                }
                state.failure = Some(error);
            }
        }
    }

    /// One DescribeConfigs for `retention.ms` of `topics`; a topic the broker reports an
    /// error for (deleted since the metadata, no permission) is left out.
    async fn read(
        &self,
        addr: &str,
        topics: &[Arc<str>],
        deadline: Instant,
    ) -> Result<(HashMap<Arc<str>, i64>, Option<String>), String> {
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
        // A connection of its own: the cycle's requests to this broker never wait
        // behind it.
        let answer = self
            .wire
            .pool
            .send_via(
                Lane::Background,
                addr,
                &request,
                "DescribeConfigs",
                deadline,
            )
            .await
            .map_err(|e| format!("DescribeConfigs on {addr}: {e}"))?;
        let by_name: HashMap<&str, &Arc<str>> = topics.iter().map(|t| (&**t, t)).collect();
        let mut read = HashMap::new();
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
            if let (Some(topic), Some(value)) = (by_name.get(result.resource_name.as_str()), value)
            {
                read.insert((*topic).clone(), value);
            }
        }
        Ok((read, first_error))
    }
}
