//! The capability map of one cluster: for each [`Feature`], whether it works and, if not,
//! why ([`FeatureState`]), from one cycle's sample. What the cycle says of a feature
//! itself ([`RawSample::features`]: off by configuration, a capability off for a while, a
//! refusal answered per resource) comes first; then, for the offsets, topics the exporter
//! expects and an ACL hides from it ([`RawSample::unseen_topics`]); then a refusal or a
//! missing API among the failures of the feature's stages; then evidence that its
//! requests were answered. A
//! cycle that sent none of a feature's requests (forensics with no pinned partition,
//! the retention read between refreshes) keeps what the last one that did found, so that
//! a feature does not flap with the work a cycle happened to have. A passing failure (a
//! timeout, a broker down) changes nothing here: it is an error, counted by stage, and
//! the cluster's `up`.

use std::collections::BTreeMap;

use crate::kafka::features::{request_of, Feature, FeatureState, Status};
use crate::kafka::{visibility, RawSample, Stage};

/// One cluster's features across cycles.
#[derive(Debug, Default, Clone)]
pub struct FeatureMap {
    states: BTreeMap<Feature, FeatureState>,
}

/// A feature whose state changed in a cycle: what it was (`None`: not known yet) and is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub feature: Feature,
    pub was: Option<FeatureState>,
    pub now: FeatureState,
}

impl FeatureMap {
    /// The features known so far, in [`Feature::ALL`]'s order.
    pub fn states(&self) -> &BTreeMap<Feature, FeatureState> {
        &self.states
    }

    /// Takes in one cycle's sample; returns the features whose state changed.
    pub fn observe(&mut self, raw: &RawSample) -> Vec<Change> {
        let mut changes = Vec::new();
        for feature in Feature::ALL {
            let Some(now) = judge(feature, raw) else {
                continue;
            };
            let was = self.states.insert(feature, now.clone());
            if was.as_ref() != Some(&now) {
                changes.push(Change { feature, was, now });
            }
        }
        changes
    }
}

/// What one cycle says of `feature`; `None` when it says nothing.
fn judge(feature: Feature, raw: &RawSample) -> Option<FeatureState> {
    if let Some(said) = raw.features.get(&feature) {
        return Some(said.clone());
    }
    if feature == Feature::Authentication {
        if raw.reached {
            // Reached, yet a connection of another stage (another broker, the own
            // client's) was refused its credentials: a certificate one broker does not
            // trust, a token the own client could not get. Nothing else would say so.
            let refused = raw.failures.iter().find_map(|(stage, f)| {
                let error = f.refused_credentials.as_ref()?;
                FeatureState::from_error(feature, request_of(*stage), error)
            });
            return Some(refused.unwrap_or_else(FeatureState::ok));
        }
        return raw
            .failures
            .values()
            .find_map(|f| FeatureState::from_error(feature, "Metadata", &f.first_error));
    }
    if !raw.reached {
        return None;
    }
    // Topics it expects and the brokers leave out of the metadata: an ACL hides them, and
    // the partitions it does sample (none, perhaps) would read as the whole cluster.
    if feature == Feature::Offsets {
        if let Some((_, denial)) = visibility::denial(&raw.unseen_topics) {
            return FeatureState::from_error(feature, request_of(Stage::Metadata), &denial);
        }
    }
    for stage in feature.stages() {
        if let Some(failure) = raw.failures.get(stage) {
            if let Some(off) =
                FeatureState::from_error(feature, request_of(*stage), &failure.first_error)
            {
                return Some(off);
            }
        }
    }
    answered(feature, raw).then(FeatureState::ok)
}

/// The cycle holds what the feature's requests answered.
fn answered(feature: Feature, raw: &RawSample) -> bool {
    match feature {
        Feature::Authentication => raw.reached,
        Feature::Offsets => {
            raw.partitions.is_empty()
                || raw.partitions.iter().any(|p| {
                    p.high_watermark.is_some()
                        || p.last_stable_offset.is_some()
                        || p.log_start_offset.is_some()
                })
        }
        Feature::Groups => raw.group_listing != crate::kafka::GroupListing::Unknown,
        Feature::ShareGroups => raw
            .groups
            .iter()
            .any(|g| g.group_type == "share" && (g.committed.is_some() || g.isolation.is_some())),
        Feature::StreamsGroups => raw
            .groups
            .iter()
            .any(|g| g.group_type == "streams" && g.detail.is_some()),
        // An open transaction found at a pinned partition: DescribeProducers answered.
        Feature::TransactionForensics => raw.partitions.iter().any(|p| {
            p.open_transactions
                .as_ref()
                .is_some_and(|open| !open.is_empty())
        }),
        // Read or defaulted, the cycle says which ([`RawSample::features`]).
        Feature::TransactionTimeout => false,
        Feature::TransactionList => raw.transaction_list.is_some(),
        Feature::RecordReads => raw.partitions.iter().any(|p| {
            p.log
                .as_ref()
                .is_some_and(|log| log.window.is_some() || !log.positions.is_empty())
        }),
        Feature::RetentionConfigs => !raw.retention_ms.is_empty(),
    }
}

/// Counts of a map's features by whether they work, for a one-line summary.
pub fn summary(states: &BTreeMap<Feature, FeatureState>) -> (usize, usize) {
    let off = states
        .values()
        .filter(|s| !s.status.works() && s.status != Status::Disabled)
        .count();
    (states.len() - off, off)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::features::Status;
    use crate::kafka::{RawPartition, Stage};
    use std::sync::Arc;

    fn partition(hw: i64, lso: i64) -> RawPartition {
        RawPartition {
            topic: Arc::from("orders"),
            partition: 0,
            log_start_offset: Some(0),
            last_stable_offset: Some(lso),
            high_watermark: Some(hw),
            open_transactions: None,
            log: None,
            replication: None,
        }
    }

    fn reached() -> RawSample {
        RawSample {
            reached: true,
            partitions: vec![partition(10, 10)],
            ..Default::default()
        }
    }

    #[test]
    fn a_refusal_turns_a_feature_off_until_a_cycle_answers_it() {
        let mut map = FeatureMap::default();
        let mut raw = reached();
        raw.fail(
            Stage::TopicConfigs,
            1,
            "DescribeConfigs \"orders\": Topic authorization failed.",
        );
        let changes = map.observe(&raw);
        let retention = &map.states()[&Feature::RetentionConfigs];
        assert_eq!(retention.status, Status::Denied);
        assert!(retention
            .reason
            .contains("grant DescribeConfigs on the topics"));
        assert!(changes
            .iter()
            .any(|c| c.feature == Feature::RetentionConfigs));
        assert_eq!(map.states()[&Feature::Offsets].status, Status::Ok);

        // A cycle that did not ask keeps it; one that read retention.ms turns it on.
        assert!(map.observe(&reached()).is_empty(), "nothing changed");
        assert_eq!(
            map.states()[&Feature::RetentionConfigs].status,
            Status::Denied
        );
        let mut granted = reached();
        granted.retention_ms.insert(Arc::from("orders"), 3_600_000);
        let changes = map.observe(&granted);
        assert_eq!(map.states()[&Feature::RetentionConfigs].status, Status::Ok);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].was.as_ref().unwrap().status, Status::Denied);
    }

    #[test]
    fn credentials_a_broker_refuses_in_a_later_stage_turn_authentication_off() {
        let mut map = FeatureMap::default();
        map.observe(&reached());
        assert_eq!(map.states()[&Feature::Authentication].status, Status::Ok);
        // Metadata answered, then one broker refused the certificate to the own client
        // (after a timeout of another, the stage's first error).
        let mut raw = reached();
        raw.fail(Stage::DescribeProducers, 1, "b-1:9093: deadline passed");
        raw.fail(
            Stage::DescribeProducers,
            1,
            "b-2:9093: the broker refused the client certificate: received fatal alert: CertificateExpired",
        );
        map.observe(&raw);
        let authentication = &map.states()[&Feature::Authentication];
        assert_eq!(authentication.status, Status::Failed);
        assert!(
            authentication.reason.contains("client certificate")
                && authentication.reason.contains("b-2:9093"),
            "{}",
            authentication.reason
        );
        // A cycle without the refusal: on again.
        map.observe(&reached());
        assert_eq!(map.states()[&Feature::Authentication].status, Status::Ok);
        // The own client refusing a broker's certificate, or a token it could not get,
        // is no refusal of the credentials by the brokers.
        let mut own = reached();
        own.fail(
            Stage::TopicConfigs,
            1,
            "b-1:9093: TLS handshake failed: invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))",
        );
        own.fail(
            Stage::DescribeProducers,
            1,
            "b-1:9093: no credentials to authenticate with: OAUTHBEARER: token endpoint answered 503",
        );
        map.observe(&own);
        assert_eq!(map.states()[&Feature::Authentication].status, Status::Ok);
    }

    #[test]
    fn streams_groups_work_where_described_and_not_where_a_broker_lacks_the_api() {
        let mut map = FeatureMap::default();
        let mut described = reached();
        described.groups.push(crate::kafka::RawGroup {
            name: "app".into(),
            group_type: "streams".into(),
            detail: Some(Default::default()),
            ..Default::default()
        });
        map.observe(&described);
        assert_eq!(map.states()[&Feature::StreamsGroups].status, Status::Ok);
        let mut older = reached();
        older.features.insert(
            Feature::StreamsGroups,
            FeatureState::off(Status::Unsupported, "b:9092 lacks StreamsGroupDescribe"),
        );
        let changes = map.observe(&older);
        assert_eq!(
            map.states()[&Feature::StreamsGroups].status,
            Status::Unsupported
        );
        assert_eq!(changes.len(), 1);
        // No streams group at all: nothing said, the last state stays.
        assert!(map.observe(&reached()).is_empty());
    }

    #[test]
    fn a_passing_failure_or_a_cluster_down_says_nothing_of_the_features() {
        let mut map = FeatureMap::default();
        map.observe(&reached());
        let mut slow = reached();
        slow.fail(Stage::HighWatermark, 3, "deadline passed");
        assert!(map.observe(&slow).is_empty());
        let down = RawSample {
            failures: [(
                Stage::Metadata,
                crate::kafka::StageFailure {
                    count: 1,
                    first_error: "cannot connect to b:9092: connection refused".into(),
                    refused: Default::default(),
                    refused_credentials: None,
                },
            )]
            .into(),
            ..Default::default()
        };
        assert!(map.observe(&down).is_empty());
    }

    #[test]
    fn refused_credentials_are_the_authentication_feature() {
        let mut map = FeatureMap::default();
        let mut refused = RawSample::default();
        refused.fail(
            Stage::Metadata,
            1,
            "b:9092: SASL authentication failed: invalid credentials",
        );
        map.observe(&refused);
        assert_eq!(
            map.states()[&Feature::Authentication].status,
            Status::Failed
        );
        map.observe(&reached());
        assert_eq!(map.states()[&Feature::Authentication].status, Status::Ok);
    }

    #[test]
    fn what_the_cycle_says_of_a_feature_comes_first() {
        let mut map = FeatureMap::default();
        let mut raw = reached();
        raw.features.insert(
            Feature::RecordReads,
            FeatureState::off(Status::Disabled, "read_records = false"),
        );
        map.observe(&raw);
        assert_eq!(map.states()[&Feature::RecordReads].status, Status::Disabled);
        assert_eq!(summary(map.states()), (map.states().len(), 0));
    }
}
