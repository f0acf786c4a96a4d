//! How far the brokers' clock is from the exporter's. Ages the exporter shows are its own
//! wall clock minus a broker's timestamp (a coordinator's transaction start time, a
//! leader's LogAppendTime), so a skew between the hosts reads as that much age, or none.
//!
//! The only broker clock a client can read on demand is the KRaft quorum leader's (the
//! active controller's): DescribeQuorum answers with each voter's last fetch time, and
//! the leader's own entry is the leader's clock when it answered. With dedicated
//! controllers that is another host than the brokers whose timestamps the ages use; in
//! an NTP-synchronised cluster it stands for them. The skew is that time less the exporter's at the middle of the
//! round trip, within half the round trip. Read in the background every [`REFRESH`], on a
//! connection of its own, from any broker (brokers forward it to the controller; a combined
//! node answers itself). Needs DESCRIBE on the CLUSTER resource; without it, or on
//! ZooKeeper-based clusters, the skew is unknown and absent.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{DescribeQuorumRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::kafka::wire::{Lane, WireClient};
use crate::kafka::ClockSkew;

/// How often the skew is measured.
pub const REFRESH: Duration = Duration::from_secs(60);
/// A measurement older than this is not shown.
const MAX_AGE: Duration = Duration::from_secs(300);
/// How long one measurement may take.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The clock reader of one cluster.
pub struct BrokerClock {
    cluster: String,
    wire: Arc<WireClient>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    last: Option<(Instant, ClockSkew)>,
    due: Option<Instant>,
    reading: bool,
    warned: bool,
    /// Which broker to ask next: they take turns, so that one down stops no measurement.
    turn: usize,
}

impl BrokerClock {
    pub fn new(cluster: &str, wire: Arc<WireClient>) -> BrokerClock {
        BrokerClock {
            cluster: cluster.to_string(),
            wire,
            state: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The latest skew measured, if recent enough; starts a measurement in the
    /// background when one is due. The cycle never waits for it. A failure is logged once
    /// (until a measurement succeeds), not counted: the skew is a diagnosis, and a
    /// principal without DESCRIBE on the cluster lacks it for good.
    pub fn skew(self: &Arc<Self>, brokers: &BTreeMap<i32, String>) -> Option<ClockSkew> {
        let now = Instant::now();
        let mut state = self.lock();
        let due = state.due.is_none_or(|at| now >= at);
        if due && !state.reading && !brokers.is_empty() {
            state.turn = state.turn.wrapping_add(1);
            if let Some(addr) = brokers.values().nth(state.turn % brokers.len()).cloned() {
                state.reading = true;
                state.due = Some(now + REFRESH);
                let this = self.clone();
                tokio::spawn(async move { this.refresh(addr).await });
            }
        }
        state
            .last
            .filter(|(at, _)| now.saturating_duration_since(*at) < MAX_AGE)
            .map(|(_, skew)| skew)
    }

    async fn refresh(&self, addr: String) {
        let measured = self.measure(&addr).await;
        let mut state = self.lock();
        state.reading = false;
        match measured {
            Ok(skew) => {
                state.last = Some((Instant::now(), skew));
                state.warned = false;
            }
            Err(error) => {
                if !state.warned {
                    state.warned = true;
                    tracing::info!(
                        cluster = %self.cluster,
                        "cannot read the brokers' clock ({error}): kafka_lso_exporter_clock_skew_seconds is absent \
                         (needs DescribeQuorum, KRaft, and DESCRIBE on the cluster); asked again every {} s",
                        REFRESH.as_secs()
                    );
                }
            }
        }
    }

    /// One DescribeQuorum of the metadata log, timed.
    async fn measure(&self, addr: &str) -> Result<ClockSkew, String> {
        let mut partition = PartitionData::default();
        partition.partition_index = 0;
        let mut topic = TopicData::default();
        topic.topic_name = TopicName(StrBytes::from_static_str("__cluster_metadata"));
        topic.partitions = vec![partition];
        let mut request = DescribeQuorumRequest::default();
        request.topics = vec![topic];
        let sent_wall = SystemTime::now();
        let sent = Instant::now();
        let answer = self
            .wire
            .pool
            .send_via(
                Lane::Background,
                addr,
                &request,
                "DescribeQuorum",
                sent + READ_TIMEOUT,
            )
            .await
            .map_err(|e| format!("DescribeQuorum on {addr}: {e}"))?;
        let round_trip = sent.elapsed();
        if let Some(error) = ResponseError::try_from_code(answer.error_code) {
            return Err(format!("DescribeQuorum on {addr}: {error}"));
        }
        let partition = answer
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .next()
            .ok_or_else(|| format!("DescribeQuorum on {addr}: no partition in the answer"))?;
        if let Some(error) = ResponseError::try_from_code(partition.error_code) {
            return Err(format!("DescribeQuorum on {addr}: {error}"));
        }
        let leader_ms = partition
            .current_voters
            .iter()
            .find(|v| v.replica_id == partition.leader_id)
            .map(|v| v.last_fetch_timestamp)
            .filter(|ms| *ms > 0)
            .ok_or_else(|| {
                format!("DescribeQuorum on {addr}: the leader's time is not in the answer")
            })?;
        Ok(skew_of(leader_ms, sent_wall, round_trip))
    }
}

/// The broker's time `broker_ms` against the exporter's at the middle of the round trip
/// that began at `sent`.
fn skew_of(broker_ms: i64, sent: SystemTime, round_trip: Duration) -> ClockSkew {
    let sent_ms = sent
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    let middle_ms = sent_ms + round_trip.as_secs_f64() * 1000.0 / 2.0;
    ClockSkew {
        seconds: (broker_ms as f64 - middle_ms) / 1000.0,
        uncertainty_seconds: round_trip.as_secs_f64() / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_skew_is_the_brokers_time_less_the_middle_of_the_round_trip() {
        let sent = SystemTime::UNIX_EPOCH + Duration::from_millis(1_000_000);
        // Answered 100 ms later by a broker that read 1,002,050 ms: 2 s ahead.
        let skew = skew_of(1_002_050, sent, Duration::from_millis(100));
        assert!((skew.seconds - 2.0).abs() < 1e-9, "{skew:?}");
        assert!((skew.uncertainty_seconds - 0.05).abs() < 1e-9);
        // A broker behind reads negative.
        let skew = skew_of(990_050, sent, Duration::from_millis(100));
        assert!((skew.seconds + 10.0).abs() < 1e-9, "{skew:?}");
    }
}
