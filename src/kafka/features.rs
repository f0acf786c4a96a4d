//! What the exporter can see of a cluster, feature by feature, and the one list of which
//! request each feature sends with which permission ([`PERMISSIONS`]). The docs'
//! permission tables are checked against this list (tests/permissions.rs), the status
//! page and `--check-config --connect` print it, and [`cause_of`] tells a refusal (an
//! ACL) and a broker too old for an API from a passing failure.

use std::fmt;

use super::Stage;

/// One thing the exporter shows that needs requests of its own, as a user turns it on
/// or loses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// Connecting and authenticating to the brokers.
    Authentication,
    /// Partition offsets: log start, LSO, HW.
    Offsets,
    /// Consumer groups of the classic, consumer (KIP-848) and streams protocols, with
    /// their committed offsets.
    Groups,
    /// Share groups (KIP-932): their isolation level and progress.
    ShareGroups,
    /// Streams groups (KIP-1071) described by their own protocol: members, owners,
    /// rebalances (StreamsGroupDescribe).
    StreamsGroups,
    /// Who holds each pinned LSO (DescribeProducers and the coordinators).
    TransactionForensics,
    /// The brokers' `transaction.max.timeout.ms`, for the hanging rule.
    TransactionTimeout,
    /// Every open transaction of the cluster, from the coordinators.
    TransactionList,
    /// Record-batch headers: exact lag, time lag, withheld age.
    RecordReads,
    /// The topics' `retention.ms`: the groups' retention margin.
    RetentionConfigs,
}

impl Feature {
    pub const ALL: [Feature; 10] = [
        Feature::Authentication,
        Feature::Offsets,
        Feature::Groups,
        Feature::ShareGroups,
        Feature::StreamsGroups,
        Feature::TransactionForensics,
        Feature::TransactionTimeout,
        Feature::TransactionList,
        Feature::RecordReads,
        Feature::RetentionConfigs,
    ];

    /// The `feature` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Feature::Authentication => "authentication",
            Feature::Offsets => "offsets",
            Feature::Groups => "groups",
            Feature::ShareGroups => "share_groups",
            Feature::StreamsGroups => "streams_groups",
            Feature::TransactionForensics => "transaction_forensics",
            Feature::TransactionTimeout => "transaction_timeout",
            Feature::TransactionList => "transaction_list",
            Feature::RecordReads => "record_reads",
            Feature::RetentionConfigs => "retention_configs",
        }
    }

    /// What it gives, in a few words.
    pub fn gives(self) -> &'static str {
        match self {
            Feature::Authentication => "a connection the brokers accept",
            Feature::Offsets => {
                "partition offsets: log start, LSO, HW, the gap and the stuck clock"
            }
            Feature::Groups => "consumer groups (classic, consumer, streams) and their lag",
            Feature::ShareGroups => "share groups' isolation level and lag",
            Feature::StreamsGroups => "streams groups' members, owners and rebalances",
            Feature::TransactionForensics => "which transaction holds each pinned LSO",
            Feature::TransactionTimeout => {
                "the brokers' transaction.max.timeout.ms for the hanging rule"
            }
            Feature::TransactionList => "every open transaction of the cluster",
            Feature::RecordReads => "exact lag without markers, time lag, withheld age",
            Feature::RetentionConfigs => "the topics' retention.ms: the groups' retention margin",
        }
    }

    /// The cycle's stages whose failures are this feature's.
    pub fn stages(self) -> &'static [Stage] {
        match self {
            Feature::Authentication => &[],
            Feature::Offsets => &[
                Stage::Metadata,
                Stage::LogStartOffset,
                Stage::LastStableOffset,
                Stage::HighWatermark,
            ],
            Feature::Groups => &[
                Stage::ListGroups,
                Stage::DescribeGroups,
                Stage::GroupOffsets,
            ],
            Feature::ShareGroups => &[Stage::ShareGroupOffsets],
            // Its describe failures count with the other groups' (`groups`).
            Feature::StreamsGroups => &[],
            Feature::TransactionForensics => &[Stage::DescribeProducers],
            Feature::TransactionTimeout => &[],
            Feature::TransactionList => &[Stage::ListTransactions, Stage::DescribeTransactions],
            Feature::RecordReads => &[Stage::ReadRecords],
            Feature::RetentionConfigs => &[Stage::TopicConfigs],
        }
    }

    /// The permissions it needs.
    pub fn permissions(self) -> impl Iterator<Item = &'static Permission> {
        PERMISSIONS
            .iter()
            .filter(move |p| p.features.contains(&self))
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A Kafka ACL resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    Topic,
    Group,
    Cluster,
    TransactionalId,
    /// The replicas' coordination group (`[ha]`): a group resource, named in the config.
    CoordinationGroup,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Topic => "the topics",
            Resource::Group => "the groups",
            Resource::Cluster => "the cluster",
            Resource::TransactionalId => "the transactional ids",
            Resource::CoordinationGroup => "the [ha] group",
        }
    }

    /// The `kafka-acls.sh` option that names the resource.
    pub fn acl_option(self) -> &'static str {
        match self {
            Resource::Topic => "--topic '*'",
            Resource::Group => "--group '*'",
            Resource::Cluster => "--cluster",
            Resource::TransactionalId => "--transactional-id '*'",
            Resource::CoordinationGroup => "--group NAME",
        }
    }
}

/// One permission and what it buys.
#[derive(Debug)]
pub struct Permission {
    /// The ACL operation: Describe, Read, DescribeConfigs.
    pub operation: &'static str,
    pub resource: Resource,
    /// The requests that need it.
    pub requests: &'static [&'static str],
    /// The features that send them; empty for one that only makes a request cheaper.
    pub features: &'static [Feature],
    /// What is lost without it.
    pub without: &'static str,
}

/// Every permission the exporter's requests need, the one list the docs' tables follow.
pub const PERMISSIONS: [Permission; 9] = [
    Permission {
        operation: "Describe",
        resource: Resource::Topic,
        requests: &["Metadata", "ListOffsets", "OffsetFetch"],
        features: &[Feature::Offsets, Feature::Groups],
        without: "the topics are not sampled",
    },
    Permission {
        operation: "Read",
        resource: Resource::Topic,
        requests: &["DescribeProducers", "Fetch"],
        features: &[Feature::TransactionForensics, Feature::RecordReads],
        without: "no transaction forensics; offset-difference lags, no time lag or withheld age",
    },
    Permission {
        operation: "DescribeConfigs",
        resource: Resource::Topic,
        requests: &["DescribeConfigs"],
        features: &[Feature::RetentionConfigs],
        without: "no retention margin (the retention alerts and table stay empty)",
    },
    Permission {
        operation: "Describe",
        resource: Resource::Group,
        requests: &[
            "ListGroups",
            "DescribeGroups",
            "ConsumerGroupDescribe",
            "StreamsGroupDescribe",
            "ShareGroupDescribe",
            "OffsetFetch",
            "DescribeShareGroupOffsets",
        ],
        features: &[Feature::Groups, Feature::ShareGroups, Feature::StreamsGroups],
        without: "no groups, no lag",
    },
    Permission {
        operation: "DescribeConfigs",
        resource: Resource::Group,
        requests: &["DescribeConfigs"],
        features: &[Feature::ShareGroups],
        without: "no lag for share groups (their share.isolation.level is unknown)",
    },
    Permission {
        operation: "Describe",
        resource: Resource::Cluster,
        requests: &["ListGroups", "DescribeQuorum"],
        features: &[],
        without: "the brokers' clock skew is not measured (kafka_lso_exporter_clock_skew_seconds absent); ListGroups then lists the groups the principal may describe",
    },
    Permission {
        operation: "Describe",
        resource: Resource::TransactionalId,
        requests: &["ListTransactions", "DescribeTransactions"],
        features: &[Feature::TransactionForensics, Feature::TransactionList],
        without: "open transactions are not named or dated by their coordinator",
    },
    Permission {
        operation: "DescribeConfigs",
        resource: Resource::Cluster,
        requests: &["DescribeConfigs"],
        features: &[Feature::TransactionTimeout],
        without: "15 min is assumed for the hanging rule",
    },
    Permission {
        operation: "Read",
        resource: Resource::CoordinationGroup,
        requests: &["JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"],
        features: &[],
        without: "with [ha]: each replica serves every cluster alone (duplicate series, kafka_lso_exporter_ha_fallbacks_total)",
    },
];

/// The request a stage sends, as the permission list names it.
pub fn request_of(stage: Stage) -> &'static str {
    match stage {
        Stage::Metadata => "Metadata",
        Stage::LogStartOffset | Stage::LastStableOffset | Stage::HighWatermark => "ListOffsets",
        Stage::ListGroups => "ListGroups",
        Stage::DescribeGroups => "DescribeGroups",
        Stage::GroupOffsets => "OffsetFetch",
        Stage::ShareGroupOffsets => "DescribeShareGroupOffsets",
        Stage::DescribeProducers => "DescribeProducers",
        Stage::DescribeTransactions => "DescribeTransactions",
        Stage::ListTransactions => "ListTransactions",
        Stage::ReadRecords => "Fetch",
        Stage::TopicConfigs => "DescribeConfigs",
    }
}

/// Why a request failed, as far as its error says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// An ACL refused it (`*_AUTHORIZATION_FAILED`).
    Denied,
    /// A broker lacks the API or the version (`UNSUPPORTED_VERSION`, not in ApiVersions).
    Unsupported,
    /// The brokers refused the credentials or the TLS handshake.
    Authentication,
    /// Anything else: a timeout, a broker down; the next cycle may succeed.
    Failed,
}

/// The TLS alerts a broker sends about the client's certificate, in the words of the own
/// client (rustls: "received fatal alert: BadCertificate") and of librdkafka (OpenSSL:
/// "sslv3 alert bad certificate", "tlsv13 alert certificate required"). An alert is
/// always the peer's verdict: a certificate the client itself refuses is another error.
const CERTIFICATE_ALERTS: [(&str, &str); 8] = [
    ("badcertificate", "bad certificate"),
    ("unsupportedcertificate", "unsupported certificate"),
    ("certificaterevoked", "certificate revoked"),
    ("certificateexpired", "certificate expired"),
    ("certificateunknown", "certificate unknown"),
    ("certificaterequired", "certificate required"),
    ("unknownca", "unknown ca"),
    ("accessdenied", "access denied"),
];

/// Whether `error` (lower case) is a broker's TLS alert refusing the client's certificate:
/// an alert name after rustls' words, as a whole word, or after OpenSSL's prefixes.
fn certificate_refused(error: &str) -> bool {
    CERTIFICATE_ALERTS.iter().any(|(rustls, openssl)| {
        error
            .match_indices(&format!("received fatal alert: {rustls}"))
            .any(|(at, words)| {
                !error[at + words.len()..].starts_with(|c: char| c.is_ascii_alphanumeric())
            })
            || [
                "sslv3 alert ",
                "tlsv1 alert ",
                "tlsv13 alert ",
                "ssl/tls alert ",
            ]
            .iter()
            .any(|prefix| error.contains(&format!("{prefix}{openssl}")))
    })
}

/// The own client's words for a token it could not get (`WireError::Credentials`):
/// nothing reached the brokers, whatever the token source's answer says.
const NO_CREDENTIALS: &str = "no credentials to authenticate with";

/// Whether `error` (lower case) is a broker refusing the client's certificate, and not a
/// token source that happened to answer with a certificate alert.
fn client_certificate_refused(error: &str) -> bool {
    !error.contains(NO_CREDENTIALS) && certificate_refused(error)
}

/// Whether `error` is the brokers refusing the credentials the exporter presented: a
/// SASL authentication failure, or a TLS alert about its certificate. Not a broker
/// certificate the exporter's own client does not verify, nor a token it could not get:
/// those are its own verdicts, and say nothing of what the brokers accept.
///
/// Matched on the clients' own phrasing only (the own client's `WireError` texts,
/// librdkafka's), never on loose words: these messages also carry topic and group names,
/// and a group named "authentication failed audit" is no refusal.
pub fn refused_by_brokers(error: &str) -> bool {
    let error = error.to_ascii_lowercase();
    if error.contains(NO_CREDENTIALS) {
        return false;
    }
    client_certificate_refused(&error)
        || [
            ": sasl authentication failed: ",
            ": the broker refused the client certificate: ",
            "sasl authentication error: ",
            "local: authentication failure",
            "broker: sasl authentication failed",
        ]
        .iter()
        .any(|words| error.contains(words))
}

/// The cause of an error, from its text: the own client's (`TopicAuthorizationFailed`,
/// "Topic authorization failed.", "does not support") and librdkafka's ("Broker: Topic
/// authorization failed", "Broker: Unsupported version"). A broker's TLS alert about the
/// client's certificate is an authentication failure, as a refused password is.
pub fn cause_of(error: &str) -> Cause {
    let error = error.to_ascii_lowercase();
    if error.contains("authorizationfailed")
        || error.contains("authorization failed")
        || error.contains("not authorized")
    {
        Cause::Denied
    } else if error.contains("does not support")
        || error.contains("unsupportedversion")
        || error.contains("unsupported version")
        || error.contains("version of api is not supported")
        || error.contains("kafka 3.0 or later is needed")
    {
        Cause::Unsupported
    } else if [
        "authentication fail",
        "authentication error",
        "authenticationfail",
        "sasl authentication",
        "sasl handshake",
        "sasl mechanism",
        "oauthbearer token",
        "unsupportedsaslmechanism",
        "tls handshake",
        "ssl handshake",
        "no credentials",
    ]
    .iter()
    .any(|words| error.contains(words))
        || certificate_refused(&error)
    {
        Cause::Authentication
    } else {
        Cause::Failed
    }
}

/// Whether a feature works, and if not, why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    Ok,
    /// An ACL refuses a request it needs.
    Denied,
    /// A broker lacks an API it needs, or the own client cannot connect with the
    /// cluster's settings.
    Unsupported,
    /// The brokers refuse the credentials.
    Failed,
    /// The configuration turns it off.
    Disabled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Denied => "denied",
            Status::Unsupported => "unsupported",
            Status::Failed => "failed",
            Status::Disabled => "disabled",
        }
    }

    /// It works (`feature_up` 1), or the user turned it off (no `feature_up`).
    pub fn works(self) -> bool {
        self == Status::Ok
    }
}

/// A feature's state: its status and, unless ok, why in words a person acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureState {
    pub status: Status,
    pub reason: String,
}

impl FeatureState {
    pub fn ok() -> FeatureState {
        FeatureState {
            status: Status::Ok,
            reason: String::new(),
        }
    }

    pub fn off(status: Status, reason: impl Into<String>) -> FeatureState {
        FeatureState {
            status,
            reason: reason.into(),
        }
    }

    /// A failed request of `feature` with `error`: denied or unsupported, with what to do
    /// about it; `None` for a passing failure, which says nothing about the feature.
    pub fn from_error(feature: Feature, request: &str, error: &str) -> Option<FeatureState> {
        let error = &steady(error);
        match cause_of(error) {
            Cause::Denied => {
                // The resource the error names (Topic/Group/Cluster/Transactional Id
                // authorization failed), else the first that covers the request.
                let lower = error.to_ascii_lowercase().replace(' ', "");
                let named = |p: &&Permission| match p.resource {
                    Resource::Topic => lower.contains("topicauthorization"),
                    Resource::Group | Resource::CoordinationGroup => {
                        lower.contains("groupauthorization")
                    }
                    Resource::Cluster => lower.contains("clusterauthorization"),
                    Resource::TransactionalId => lower.contains("transactionalidauthorization"),
                };
                let covers = |p: &&Permission| p.requests.contains(&request);
                // The resource the error names before the request's own: a group's
                // description refused for its topics (KIP-848's ConsumerGroupDescribe
                // answers TOPIC_AUTHORIZATION_FAILED) wants Describe on the topics.
                let grant = feature
                    .permissions()
                    .find(|p| covers(p) && named(p))
                    .or_else(|| feature.permissions().find(named))
                    .or_else(|| feature.permissions().find(covers))
                    .or_else(|| feature.permissions().next())
                    .map(|p| {
                        format!(
                            "; grant {} on {} (kafka-acls.sh --add --allow-principal User:... --operation {} {})",
                            p.operation,
                            p.resource.as_str(),
                            p.operation,
                            p.resource.acl_option()
                        )
                    })
                    .unwrap_or_default();
                Some(FeatureState::off(
                    Status::Denied,
                    format!("{request} refused by an ACL{grant}: {error}"),
                ))
            }
            Cause::Unsupported => Some(FeatureState::off(
                Status::Unsupported,
                format!("a broker lacks {request}: {error}"),
            )),
            Cause::Authentication if feature == Feature::Authentication => Some(FeatureState::off(
                Status::Failed,
                if client_certificate_refused(&error.to_ascii_lowercase()) {
                    format!(
                        "the brokers refuse the exporter's client certificate (set it and its key \
                         with ssl.certificate.location and ssl.key.location, or ssl.certificate.pem \
                         and ssl.key.pem, or ssl.keystore.location; it must be current, signed by a \
                         CA the brokers trust, and allowed by them): {error}"
                    )
                } else {
                    format!("the brokers refuse the connection: {error}")
                },
            )),
            Cause::Authentication | Cause::Failed => None,
        }
    }
}

/// `error` without what changes from one cycle to the next for the same cause:
/// librdkafka's "(after 2ms in state APIVERSION_QUERY, 31 identical error(s)
/// suppressed)". A feature's reason is a label value (`feature_info`) and a log line
/// once per change: it changes with the cause, not with a timing or a count.
fn steady(error: &str) -> String {
    let mut out = String::with_capacity(error.len());
    let mut rest = error;
    while let Some(at) = rest.find(" (after ") {
        let tail = &rest[at..];
        // The parenthesis that closes it ("error(s)" holds a pair of its own).
        let mut depth = 0;
        let close = tail.char_indices().find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            (c == ')' && depth == 0).then_some(i)
        });
        match close {
            Some(end) if tail[..end].contains("ms in state ") => {
                out.push_str(&rest[..at]);
                rest = &tail[end + 1..];
            }
            _ => {
                out.push_str(&rest[..at + 8]);
                rest = &rest[at + 8..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_brokers_refusal_is_told_by_the_clients_phrasing_not_by_names() {
        for refused in [
            "b:9093: SASL authentication failed: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
            "b:9093: the broker refused the client certificate: received fatal alert: BadCertificate",
            "sasl_ssl://b:9093/1: SASL authentication error: Authentication failed during authentication due to invalid credentials",
            "Local: Authentication failure",
            "b:9093: received fatal alert: CertificateUnknown",
        ] {
            assert!(refused_by_brokers(refused), "{refused}");
        }
        for not_refused in [
            "group \"authentication failed audit\": deadline passed",
            "user.authenticationFailed.v1/3: Broker: Not leader for partition",
            "b:9093: no credentials to authenticate with: OAUTHBEARER: the token endpoint answered 401: invalid_client: Client authentication failed",
            "b:9093: TLS handshake failed: invalid peer certificate: UnknownIssuer",
        ] {
            assert!(!refused_by_brokers(not_refused), "{not_refused}");
        }
    }

    #[test]
    fn a_reason_does_not_change_with_librdkafkas_timings_and_counts() {
        let reason = |error: &str| {
            FeatureState::from_error(Feature::Authentication, "Metadata", error)
                .unwrap()
                .reason
        };
        let first = reason("b:9093: received fatal alert: BadCertificate; through librdkafka: Meta data fetch error: BrokerTransportFailure (ssl://b:9093/bootstrap: Receive failed: sslv3 alert bad certificate: SSL alert number 42 (after 2ms in state APIVERSION_QUERY, 1 identical error(s) suppressed))");
        let later = reason("b:9093: received fatal alert: BadCertificate; through librdkafka: Meta data fetch error: BrokerTransportFailure (ssl://b:9093/bootstrap: Receive failed: sslv3 alert bad certificate: SSL alert number 42 (after 0ms in state APIVERSION_QUERY, 31 identical error(s) suppressed))");
        assert_eq!(first, later);
        assert!(first.ends_with("SSL alert number 42)"), "{first}");
        assert_eq!(
            steady("x (after all) y (after 5ms in state UP)"),
            "x (after all) y"
        );
    }

    #[test]
    fn causes_from_both_clients_words() {
        for denied in [
            "DescribeConfigs \"orders\": Topic authorization failed.",
            "Fetch: TopicAuthorizationFailed",
            "Broker: Group authorization failed",
            "Broker: Transactional Id authorization failed",
        ] {
            assert_eq!(cause_of(denied), Cause::Denied, "{denied}");
        }
        for unsupported in [
            "b:9092: broker does not support DescribeProducers (needs API key 61)",
            "Broker: Unsupported version",
        ] {
            assert_eq!(cause_of(unsupported), Cause::Unsupported, "{unsupported}");
        }
        assert_eq!(
            cause_of("b:9092: SASL authentication failed: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"),
            Cause::Authentication
        );
        assert_eq!(
            cause_of("Local: Authentication failure"),
            Cause::Authentication
        );
        // A broker's TLS alert about the client's certificate, through both clients.
        for refused in [
            "b:9093: received fatal alert: BadCertificate",
            "b:9093: received fatal alert: CertificateUnknown",
            "ssl://b:9093/bootstrap: Receive failed: error:0A000412:SSL routines::sslv3 alert bad certificate: SSL alert number 42",
            "ssl://b:9093/1: SSL handshake failed: error:0A00045C:SSL routines::tlsv13 alert certificate required: SSL alert number 116",
            "ssl://b:9093/1: Receive failed: tlsv1 alert unknown ca: SSL alert number 48",
            // OpenSSL 3.2 and later.
            "ssl://b:9093/1: Receive failed: error:0A000412:SSL routines::ssl/tls alert bad certificate: SSL alert number 42",
        ] {
            assert_eq!(cause_of(refused), Cause::Authentication, "{refused}");
        }
        // Not the broker's verdict on the client: a connection cut, a cipher mismatch, or
        // the words in a name.
        for failed in [
            "b:9093: received fatal alert: HandshakeFailure",
            "ssl://b:9093/1: Receive failed: sslv3 alert handshake failure",
            "certificates-audit/0: Broker: Not leader for partition",
            "fraud alert unknown cards/0: deadline passed",
            "alert certificate expired notifier/2: Broker: Not leader for partition",
            "received fatal alert: BadCertificates/0: deadline passed",
        ] {
            assert_eq!(cause_of(failed), Cause::Failed, "{failed}");
        }
        // Names are not causes: a topic, a group or a host may say anything.
        for failed in [
            "user-authentication-events/3: deadline passed",
            "kafka-sasl-0:9093: connection refused",
            "sasl-audit/0: Broker: Not leader for partition",
        ] {
            assert_eq!(cause_of(failed), Cause::Failed, "{failed}");
        }
        assert_eq!(cause_of("deadline passed"), Cause::Failed);
        assert_eq!(cause_of("Broker: Not coordinator"), Cause::Failed);
    }

    #[test]
    fn a_denial_says_which_acl_on_which_resource() {
        let state = FeatureState::from_error(
            Feature::RetentionConfigs,
            "DescribeConfigs",
            "DescribeConfigs \"orders\": Topic authorization failed.",
        )
        .unwrap();
        assert_eq!(state.status, Status::Denied);
        assert!(
            state.reason.contains("grant DescribeConfigs on the topics")
                && state
                    .reason
                    .contains("--operation DescribeConfigs --topic '*'"),
            "{}",
            state.reason
        );
        let group = FeatureState::from_error(
            Feature::Groups,
            "OffsetFetch",
            "OffsetFetch for group g: GroupAuthorizationFailed",
        )
        .unwrap();
        assert!(
            group.reason.contains("grant Describe on the groups"),
            "{}",
            group.reason
        );
        assert!(
            FeatureState::from_error(Feature::Offsets, "ListOffsets", "deadline passed").is_none()
        );
        // A KIP-848 group described with topics the principal may not describe.
        let topics = FeatureState::from_error(
            Feature::Groups,
            "DescribeGroups",
            "b:9092: describing group \"billing\": TopicAuthorizationFailed",
        )
        .unwrap();
        assert!(
            topics.reason.contains("grant Describe on the topics"),
            "{}",
            topics.reason
        );
    }

    #[test]
    fn every_feature_but_authentication_and_the_timeout_has_stages_and_each_a_permission() {
        for feature in Feature::ALL {
            if feature != Feature::Authentication {
                assert!(feature.permissions().next().is_some(), "{feature}");
            }
            for stage in feature.stages() {
                let request = request_of(*stage);
                assert!(
                    feature.permissions().any(|p| p.requests.contains(&request)),
                    "{feature}: {request} is in no permission of it"
                );
            }
        }
    }
}
