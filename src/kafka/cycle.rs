//! The real [`Sampler`]: the exporter's own Kafka client ([`super::wire`]) for what a
//! cycle asks of leaders and coordinators, and two librdkafka consumer handles per
//! cluster, one per isolation level, that never join a group and never fetch records:
//! they fetch the metadata, and stand in for the own client where it cannot talk to the
//! cluster (security it does not speak).
//!
//! One cycle, in this order (SPEC §2):
//! 1. metadata (topics, partitions, leaders), filtered by the topic regexes: one
//!    Metadata request, hedged across brokers ([`super::ask::metadata`]);
//! 2. and 3. per broker, all brokers at once: its groups with type, state and members
//!    (ListGroups v5, then each group described by its own protocol) and their committed
//!    offsets (one OffsetFetch, to the broker that listed them), share groups' progress
//!    ([`super::ask::groups`], [`super::ask::offsets`]);
//!    then the topics it expects (named in the configuration, read by those groups,
//!    sampled before) and the metadata left out, asked for by name: an ACL hides them, or
//!    they were deleted ([`super::visibility`]);
//! 4. per partition leader, all leaders at once: log start offsets (ListOffsets
//!    EARLIEST), last stable offsets (ListOffsets LATEST, read_committed), then high
//!    watermarks (ListOffsets LATEST, read_uncommitted), one request each, to the leaders
//!    the metadata names ([`super::ask::log_offsets`]);
//! 5. for partitions with HW > LSO only, the open transactions holding them
//!    ([`super::forensics`]);
//!    then every open transaction of the cluster from the coordinators
//!    ([`super::ask::inventory`]);
//! 6. record-batch headers near the groups' committed offsets and at the LSO, for lag
//!    that never counts markers and for time lag ([`super::reads`]).
//!
//! Committed offsets come before the LSO, and the LSO before the HW: all three only
//! grow, so this order yields `hw >= lso` and non-negative lag without clamping.
//!
//! Each stage gets a share of the time left before the cycle's deadline: groups and
//! their offsets half, the log offsets half of the rest, forensics half of what remains,
//! record reads the rest. Within a stage every broker is asked on its own, all at once:
//! a broker that hangs costs the stage its share of time, and its own partitions, groups
//! and transactions their values for that cycle, but no value of any other broker.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use kafka_protocol::messages::MetadataResponse;
use rdkafka::client::{ClientContext, OAuthToken};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::{Offset, TopicPartitionList};

use super::ask::clock::BrokerClock;
use super::ask::forensics::Forensics;
use super::ask::groups::ShareReader;
use super::ask::inventory::Inventory;
use super::ask::log_offsets::{self, Kind};
use super::ask::metadata::{self, Candidates};
use super::ask::offsets::{self, Coordinators};
use super::ask::reads::Reads;
use super::ask::topic_configs::TopicConfigs;
use super::capability::Capability;
use super::features::{Feature, FeatureState, Status};
use super::native::{list_consumer_group_offsets, queued_events, set_oauth_token};
use super::visibility::{self, Absence, Expectation, TopicWatch};
use super::wire::oauth::{self, TokenSource};
use super::wire::{Security, WireClient, WireError};
use super::{
    CommittedOffset, Failures, GroupListing, Planned, RawGroup, RawPartition, RawSample,
    Replication, Sampler, Stage,
};
use crate::config::{ClusterConfig, NameFilter};

/// Samples one cluster through librdkafka.
pub struct KafkaSampler {
    read_uncommitted: Arc<BaseConsumer<ClusterContext>>,
    read_committed: Arc<BaseConsumer<ClusterContext>>,
    topics: NameFilter,
    groups: NameFilter,
    /// The kafka-protocol client (batched OffsetFetch, forensics); `None` when the
    /// cluster's security settings need something only librdkafka speaks (OAUTHBEARER, a
    /// PKCS#12 keystore, GSSAPI in a build without the feature `gssapi`, ...).
    wire: Option<Arc<WireClient>>,
    /// Committed offsets go through `wire`, except for a while after it proved unable to
    /// fetch them here.
    wire_offsets: Capability,
    /// Groups are listed and described through `wire`, except for a while after a broker
    /// turned out not to name group types.
    wire_groups: Capability,
    /// Metadata is fetched through `wire`, except for a while after it proved unable to.
    wire_metadata: Capability,
    /// A broker refused the own client's TLS (a certificate rustls rejects and OpenSSL
    /// accepts, such as one naming its host only in the CN): metadata, groups, committed
    /// offsets and log offsets go through librdkafka for a while.
    wire_refused: Capability,
    /// Where the own client asks for metadata.
    candidates: Candidates,
    /// Each group's coordinator, kept between cycles.
    coordinators: Coordinators,
    /// Share groups' progress, read in the background of the cycles.
    shares: ShareReader,
    cluster: String,
    /// Who holds each pinned LSO; `None` when off for this cluster.
    forensics: Option<Forensics>,
    /// Every open transaction of the cluster; `None` when off for this cluster.
    inventory: Option<Inventory>,
    /// Record-batch headers for exact and time lag; `None` when off for this cluster.
    reads: Option<Reads>,
    /// The topics' `retention.ms`, through the own client.
    topic_configs: Option<Arc<TopicConfigs>>,
    /// The brokers' clock against the exporter's, through the own client.
    clock: Option<Arc<BrokerClock>>,
    /// OAUTHBEARER tokens, shared by both clients.
    tokens: Option<Arc<TokenSource>>,
    /// The token last given to librdkafka (see `push_token`).
    pushed_token: std::sync::Mutex<Option<String>>,
    /// The last refusal of some brokers' TLS that was logged.
    refusal_said: std::sync::Mutex<Option<String>>,
    /// The features the configuration turns off, or that the own client cannot serve
    /// with the cluster's settings: said in every cycle.
    settled: Vec<(Feature, FeatureState)>,
    /// The topics it expects to see, across cycles ([`super::visibility`]).
    topic_watch: std::sync::Mutex<TopicWatch>,
}

/// The features off from the start: by `transactions`, `transaction_list`,
/// `read_records` and `retention_configs`, or because the own client, which sends their requests, cannot connect
/// with the cluster's settings (`wire_unusable`).
fn settled_features(
    config: &ClusterConfig,
    wire_unusable: Option<&str>,
) -> Vec<(Feature, FeatureState)> {
    let mut settled = Vec::new();
    let mut off = |feature, reason: &str| {
        settled.push((feature, FeatureState::off(Status::Disabled, reason)));
    };
    if !config.transactions {
        off(Feature::TransactionForensics, "transactions = false");
        off(Feature::TransactionTimeout, "transactions = false");
        off(Feature::TransactionList, "transactions = false");
    } else if !config.transaction_list {
        off(Feature::TransactionList, "transaction_list = false");
    }
    if !config.read_records {
        off(Feature::RecordReads, "read_records = false");
    }
    if !config.retention_configs {
        off(Feature::RetentionConfigs, "retention_configs = false");
    }
    if let Some(reason) = wire_unusable {
        for feature in [
            Feature::TransactionForensics,
            Feature::TransactionTimeout,
            Feature::TransactionList,
            Feature::RecordReads,
            Feature::RetentionConfigs,
        ] {
            if !settled.iter().any(|(f, _)| *f == feature) {
                let why = format!(
                    "the exporter's own client, which sends its requests, cannot connect with this cluster's settings: {reason}"
                );
                settled.push((feature, FeatureState::off(Status::Unsupported, why)));
            }
        }
    }
    settled
}

/// What makes a broker certificate one the own client accepts.
const TLS_HINT: &str = "a broker certificate that WebPKI accepts fixes it: valid for the broker's address \
    (in its subjectAltName, or a host name in its CN), not marked as a CA, signed with a current algorithm";

/// Routes librdkafka's own log lines and errors into `tracing`, tagged with the cluster.
///
/// Connection failures repeat on every reconnect attempt; they go to debug level, and the
/// scheduler logs one line per failed cycle instead.
pub struct ClusterContext {
    cluster: String,
    /// The cluster's OAUTHBEARER tokens, shared with the own client.
    tokens: Option<Arc<TokenSource>>,
    /// The latest error librdkafka reported on its own (authentication, TLS, DNS), which
    /// says more than the request's timeout; added to the cycle's failure message.
    last_error: std::sync::Mutex<Option<(Instant, String)>>,
}

impl ClientContext for ClusterContext {
    /// librdkafka takes its OAUTHBEARER token from the cluster's [`TokenSource`], so
    /// both clients present the same one. Called while the cycle serves librdkafka's
    /// events, after the cycle made sure of a fresh token: it only reads the cache.
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn generate_oauth_token(
        &self,
        _oauthbearer_config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn std::error::Error>> {
        let tokens = self
            .tokens
            .as_ref()
            .ok_or("no OAUTHBEARER token source is configured")?;
        let token = tokens
            .current()
            .ok_or("no valid OAUTHBEARER token yet (asked again shortly)")?;
        let expires = token
            .expires
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Ok(OAuthToken {
            token: token.value,
            principal_name: token.principal,
            lifetime_ms: expires.as_millis() as i64,
        })
    }

    fn log(&self, level: RDKafkaLogLevel, facility: &str, message: &str) {
        match level {
            RDKafkaLogLevel::Emerg | RDKafkaLogLevel::Alert | RDKafkaLogLevel::Critical => {
                tracing::error!(target: "librdkafka", component = "librdkafka", cluster = %self.cluster, "{facility}: {message}")
            }
            _ => {
                tracing::debug!(target: "librdkafka", component = "librdkafka", cluster = %self.cluster, "{facility}: {message}")
            }
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        tracing::debug!(target: "librdkafka", component = "librdkafka", cluster = %self.cluster, "{error}: {reason}");
        // "N/N brokers are down" follows every connection failure and hides its cause.
        if error.rdkafka_error_code() != Some(rdkafka::types::RDKafkaErrorCode::AllBrokersDown) {
            *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((Instant::now(), reason.to_string()));
        }
    }
}

impl ConsumerContext for ClusterContext {}

/// The librdkafka configuration of one cluster's consumer: the user's `client` properties
/// (less those the exporter reads itself) and the exporter's own settings.
fn librdkafka_config(config: &ClusterConfig, isolation_level: &str) -> ClientConfig {
    let oauthbearer = is_oauthbearer(config);
    let mut client = ClientConfig::new();
    client.set("client.id", "kafka-lso-exporter");
    // Reconnect to a broker that came back within a cycle, not after librdkafka's
    // default 10 s backoff; the exporter makes few connections, so this is cheap.
    client.set("reconnect.backoff.max.ms", "1000");
    for (property, value) in &config.client {
        // The token source is the exporter's (see `generate_oauth_token`): librdkafka is
        // given none of its settings (some of which it does not know, such as
        // `sasl.oauthbearer.method=file`).
        let token_setting = property.starts_with("sasl.oauthbearer.")
            || property == "enable.sasl.oauthbearer.unsecure.jwt";
        if (oauthbearer && token_setting) || oauth::OWN_PROPERTIES.contains(&property.as_str()) {
            continue;
        }
        client.set(property, value);
    }
    client
        .set("bootstrap.servers", &config.bootstrap_servers)
        // librdkafka's default is read_committed: always say which one is meant.
        .set("isolation.level", isolation_level)
        .set("enable.auto.commit", "false")
        // librdkafka drops debug-level lines unless the log level allows them; a `debug`
        // property in `client` asks for exactly those.
        .set_log_level(if config.client.contains_key("debug") {
            RDKafkaLogLevel::Debug
        } else {
            RDKafkaLogLevel::Info
        });
    client
}

fn is_oauthbearer(config: &ClusterConfig) -> bool {
    config
        .client
        .get("sasl.mechanism")
        .or(config.client.get("sasl.mechanisms"))
        .is_some_and(|m| m.trim().eq_ignore_ascii_case(oauth::MECHANISM))
}

/// Whether librdkafka takes the cluster's `client` properties: an unknown property
/// (`sasl.pasword`) or a value it refuses (`security.protocol = "SASL_SSLL"`), found
/// without connecting. The error names the key as the configuration writes it.
///
/// Also a user name and a password for PLAIN and SCRAM, which librdkafka would only
/// miss at the first connection.
pub fn check_client(index: usize, config: &ClusterConfig) -> Result<(), String> {
    // The names first: a misspelt property (`sasl.pasword`) is the error to show, not the
    // credentials it leaves missing.
    let token_settings: Vec<&String> = config
        .client
        .keys()
        .filter(|p| {
            p.starts_with("sasl.oauthbearer.") || *p == "enable.sasl.oauthbearer.unsecure.jwt"
        })
        .collect();
    // The token source's settings are the exporter's, never given to librdkafka: checked
    // against librdkafka's names and the exporter's own (when the table can be had).
    let known = if token_settings.is_empty() {
        Vec::new()
    } else {
        librdkafka_property_names()
    };
    for property in token_settings {
        if !known.is_empty()
            && !oauth::OWN_PROPERTIES.contains(&property.as_str())
            && !known.iter().any(|k| k == property)
        {
            let hint = nearest_property(property)
                .map(|near| format!(" (did you mean {near}?)"))
                .unwrap_or_default();
            return Err(format!(
                "clusters[{index}].client.{property}: No such configuration property{hint}"
            ));
        }
    }
    match librdkafka_config(config, "read_committed").create_native_config() {
        Ok(_) => {}
        // Never the value: it may be a secret.
        Err(KafkaError::ClientConfig(_, description, key, _)) => {
            let hint = match nearest_property(&key) {
                Some(near) if description.contains("No such configuration property") => {
                    format!(" (did you mean {near}?)")
                }
                _ => String::new(),
            };
            return Err(format!(
                "clusters[{index}].client.{key}: {description}{hint}"
            ));
        }
        Err(other) => return Err(format!("clusters[{index}].client: {other}")),
    }
    let mechanism = config
        .client
        .get("sasl.mechanism")
        .or(config.client.get("sasl.mechanisms"))
        .map(|m| m.trim().to_ascii_uppercase())
        .unwrap_or_else(|| "GSSAPI".into());
    if oauth::uses_sasl(&config.client)
        && matches!(
            mechanism.as_str(),
            "PLAIN" | "SCRAM-SHA-256" | "SCRAM-SHA-512"
        )
    {
        let missing: Vec<&str> = ["sasl.username", "sasl.password"]
            .into_iter()
            .filter(|k| config.client.get(*k).is_none_or(|v| v.is_empty()))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "clusters[{index}].client.{}: missing; sasl.mechanism {mechanism} needs sasl.username and \
                 sasl.password (in client, client_files or an environment variable)",
                missing[0]
            ));
        }
    }
    // librdkafka compares the name exactly (upper case); GSSAPI only when built with it.
    let (key, written) = match (
        config.client.get("sasl.mechanism"),
        config.client.get("sasl.mechanisms"),
    ) {
        (Some(m), _) => ("sasl.mechanism", m.as_str()),
        (None, Some(m)) => ("sasl.mechanisms", m.as_str()),
        (None, None) => ("sasl.mechanism", "GSSAPI"),
    };
    let offered: Vec<&str> = SASL_MECHANISMS
        .into_iter()
        .filter(|m| *m != "GSSAPI" || cfg!(feature = "gssapi"))
        .collect();
    if oauth::uses_sasl(&config.client) && !offered.contains(&written) {
        return Err(format!(
            "clusters[{index}].client.{key}: {written:?} is not a SASL mechanism this build \
             offers (one of {}, written in capitals)",
            offered.join(", ")
        ));
    }
    // The files librdkafka opens only when the client starts (for SSL and SASL_SSL, the
    // protocols that read them), and fails the start on.
    let tls = config
        .client
        .get("security.protocol")
        .is_some_and(|p| matches!(p.trim().to_ascii_uppercase().as_str(), "SSL" | "SASL_SSL"));
    if !tls {
        return Ok(());
    }
    super::wire::check_tls_files(&config.client)
        .map_err(|(key, reason)| format!("clusters[{index}].client.{key}: {reason}"))
}

/// The SASL mechanisms librdkafka (as built here) and the exporter's own client speak.
const SASL_MECHANISMS: [&str; 5] = [
    "GSSAPI",
    "PLAIN",
    "SCRAM-SHA-256",
    "SCRAM-SHA-512",
    "OAUTHBEARER",
];

/// The property librdkafka knows whose name is nearest to `unknown` (by edit distance,
/// at most a third of its length), for a typo's error message. The names are
/// librdkafka's own: every global and topic property its configuration dump lists.
fn nearest_property(unknown: &str) -> Option<String> {
    let known = librdkafka_property_names();
    let distance = |a: &str, b: &str| -> usize {
        let b: Vec<char> = b.chars().collect();
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut previous = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let substitution = previous + usize::from(ca != *cb);
                previous = row[j + 1];
                row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
            }
        }
        row[b.len()]
    };
    known
        .into_iter()
        .map(|name| (distance(unknown, &name), name))
        .filter(|(d, _)| *d > 0 && *d <= unknown.chars().count().div_ceil(3).max(1))
        .min()
        .map(|(_, name)| name)
}

/// Every property name librdkafka documents, global and topic: the first column of the
/// table `rd_kafka_conf_properties_show` prints (its CONFIGURATION.md). Empty if the
/// table cannot be had, which only loses the hint.
fn librdkafka_property_names() -> Vec<String> {
    use std::io::{Read, Seek};
    use std::os::fd::FromRawFd;
    let mut table = String::new();
    // SAFETY: an anonymous in-memory file (no writable /tmp needed: the pod's root is
    // read-only) owned by `file`; librdkafka writes the table through a FILE on a
    // duplicate of its descriptor, which fclose closes.
    unsafe {
        let fd = libc::memfd_create(c"librdkafka-properties".as_ptr(), libc::MFD_CLOEXEC);
        if fd < 0 {
            return Vec::new();
        }
        let mut file = std::fs::File::from_raw_fd(fd);
        let copy = libc::dup(fd);
        if copy < 0 {
            return Vec::new();
        }
        let fp = libc::fdopen(copy, c"w".as_ptr());
        if fp.is_null() {
            libc::close(copy);
            return Vec::new();
        }
        rdkafka::bindings::rd_kafka_conf_properties_show(fp);
        libc::fclose(fp);
        if file.rewind().is_err() || file.read_to_string(&mut table).is_err() {
            return Vec::new();
        }
    }
    let mut names: Vec<String> = table
        .lines()
        .filter_map(|line| line.split_once('|'))
        .map(|(name, _)| name.trim())
        .filter(|name| {
            name.contains('.')
                && name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '_')
        })
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

impl KafkaSampler {
    /// The cluster's own client (its connections, TLS and SASL), when it has one.
    pub fn wire(&self) -> Option<Arc<WireClient>> {
        self.wire.clone()
    }

    /// Creates the clients; no connection is made until the first cycle.
    pub fn new(config: &ClusterConfig) -> Result<Self, KafkaError> {
        let oauthbearer = is_oauthbearer(config);
        // One token source for both clients, whether or not the own client can serve
        // this cluster (its TLS settings may be ones only librdkafka reads).
        let tokens = (oauthbearer && oauth::uses_sasl(&config.client))
            .then(|| match TokenSource::from_properties(&config.client) {
                Ok(tokens) => Some(Arc::new(tokens)),
                // Checked when the configuration was loaded; not expected here.
                Err((key, reason)) => {
                    tracing::error!(cluster = %config.name, "no OAUTHBEARER token source: {key}: {reason}");
                    None
                }
            })
            .flatten();
        if let Some(url) = tokens.as_ref().and_then(|t| t.cleartext_endpoint()) {
            tracing::warn!(
                cluster = %config.name,
                "the OAuth token endpoint {url} is plain HTTP: the client secret crosses the network unencrypted"
            );
        }
        let security = Security::from_properties(&config.client).map(|security| match &tokens {
            Some(tokens) => security.with_tokens(tokens.clone()),
            None => security,
        });
        let consumer = |isolation_level: &str| -> Result<BaseConsumer<ClusterContext>, KafkaError> {
            let client = librdkafka_config(config, isolation_level);
            client.create_with_context(ClusterContext {
                cluster: config.name.clone(),
                tokens: tokens.clone(),
                last_error: Default::default(),
            })
        };
        let wire_unusable = security.as_ref().err().cloned();
        let wire = match security {
            Ok(security) => Some(Arc::new(WireClient::new(security))),
            Err(reason) => {
                tracing::warn!(
                    cluster = %config.name,
                    "transaction forensics is off for this cluster: {reason}; committed offsets are \
                     fetched through librdkafka, one request per group, and every other metric is sampled as usual"
                );
                None
            }
        };
        Ok(Self {
            read_uncommitted: Arc::new(consumer("read_uncommitted")?),
            read_committed: Arc::new(consumer("read_committed")?),
            topics: config.topics.clone(),
            groups: config.groups.clone(),
            forensics: wire.clone().and_then(|w| Forensics::new(config, w)),
            inventory: wire.clone().and_then(|w| Inventory::new(config, w)),
            reads: wire.clone().and_then(|w| Reads::new(config, w)),
            clock: wire
                .clone()
                .map(|w| Arc::new(BrokerClock::new(&config.name, w))),
            topic_configs: wire
                .clone()
                .filter(|_| config.retention_configs)
                .map(|w| Arc::new(TopicConfigs::new(&config.name, w))),
            wire_offsets: Capability::new(RECHECK),
            wire_metadata: Capability::new(RECHECK),
            wire_refused: Capability::new(RECHECK),
            candidates: Candidates::new(&config.bootstrap_servers),
            wire_groups: Capability::new(RECHECK),
            coordinators: Coordinators::default(),
            shares: ShareReader::default(),
            wire,
            cluster: config.name.clone(),
            tokens,
            pushed_token: Default::default(),
            refusal_said: Default::default(),
            settled: settled_features(config, wire_unusable.as_deref()),
            topic_watch: std::sync::Mutex::new(TopicWatch::new(config.topics.named())),
        })
    }

    /// The latest error either client reported by itself in the last half minute
    /// (reconnect attempts run between cycles, so it need not be from this cycle).
    fn recent_client_error(&self) -> Option<String> {
        [&self.read_uncommitted, &self.read_committed]
            .iter()
            .find_map(|c| {
                let (at, reason) = c
                    .context()
                    .last_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()?;
                (at.elapsed() < Duration::from_secs(30)).then_some(reason)
            })
    }

    /// Gives librdkafka the current token whenever it is not the one last given, and
    /// again after every drain where there are SASL extensions: librdkafka's own refresh
    /// callback (through rdkafka) runs only at 80% of the lifetime of the token it has
    /// and only while a cycle serves its events, and cannot carry extensions (KIP-342;
    /// Confluent Cloud needs `logicalCluster` and `identityPoolId`).
    fn push_token(&self) {
        let Some(tokens) = &self.tokens else { return };
        let Some(token) = tokens.current() else {
            return;
        };
        let mut pushed = self.pushed_token.lock().unwrap_or_else(|p| p.into_inner());
        if pushed.as_deref() == Some(token.value.as_str()) && tokens.extensions().is_empty() {
            return;
        }
        for consumer in [&self.read_uncommitted, &self.read_committed] {
            if let Err(error) = set_oauth_token(consumer.client(), &token, tokens.extensions()) {
                tracing::debug!(cluster = %self.cluster, "librdkafka refused the token: {error}");
                return;
            }
        }
        *pushed = Some(token.value);
    }

    /// Serves librdkafka's event queues (log lines, errors) so that nothing piles up
    /// between cycles; these consumers have no subscription, so no message is returned.
    fn drain_events(&self) {
        for consumer in [&self.read_uncommitted, &self.read_committed] {
            // Bounded, in case events arrive faster than they are served.
            for _ in 0..100_000 {
                if queued_events(consumer.client()) == 0 {
                    break;
                }
                let _ = consumer.poll(Duration::ZERO);
            }
        }
        self.push_token();
    }
}

impl KafkaSampler {
    /// Committed offsets of `groups`: through the exporter's own client (one batched
    /// FindCoordinator, one OffsetFetch per coordinator) while it can reach this cluster;
    /// through librdkafka (one request per group) where it cannot, for good once it found
    /// out. Group offsets get at most half of the time left, so that the LSO and HW,
    /// sampled next, keep time of their own when coordinators are loading or gone.
    /// Log start offsets, last stable offsets and high watermarks of every target: through
    /// the own client to the leaders the cycle's metadata names, or through librdkafka
    /// where the own client cannot talk to this cluster. They get at most half of the time
    /// left, so that forensics and reads keep time of their own when a leader does not
    /// answer.
    async fn log_offsets(
        &self,
        targets: &Arc<Vec<Target>>,
        brokers: &BTreeMap<i32, String>,
        deadline: Instant,
    ) -> [OffsetsRound; 3] {
        let deadline = Instant::now() + remaining(deadline) / 2;
        let kinds = [Kind::LogStart, Kind::LastStable, Kind::HighWatermark];
        if let Some(wire) = self.own() {
            let listed = log_offsets::list_offsets(wire, brokers, targets, &kinds, deadline).await;
            if let Ok(mut rounds) = <[OffsetsRound; 3]>::try_from(listed.rounds) {
                if let Some(refusal) = &listed.refusal {
                    // The partitions of leaders that refused the own client: through
                    // librdkafka, in this cycle already; every leader refused: the own
                    // client is out for a while.
                    self.brokers_refused(refusal, listed.refused.len() == targets.len());
                    let again: Arc<Vec<Target>> =
                        Arc::new(listed.refused.iter().map(|&i| targets[i].clone()).collect());
                    let read = self.librdkafka_log_offsets(&again, deadline).await;
                    for (round, read) in rounds.iter_mut().zip(read) {
                        for (&i, value) in listed.refused.iter().zip(read) {
                            round[i] = value;
                        }
                    }
                }
                return rounds;
            }
        }
        self.librdkafka_log_offsets(targets, deadline).await
    }

    /// [`Self::log_offsets`] through librdkafka, one request per leader and kind.
    async fn librdkafka_log_offsets(
        &self,
        targets: &Arc<Vec<Target>>,
        deadline: Instant,
    ) -> [OffsetsRound; 3] {
        let kinds = [Kind::LogStart, Kind::LastStable, Kind::HighWatermark];
        let mut rounds = Vec::with_capacity(3);
        for kind in kinds {
            let (consumer, position) = match kind {
                Kind::LogStart => (&self.read_uncommitted, Offset::Beginning),
                Kind::LastStable => (&self.read_committed, Offset::End),
                Kind::HighWatermark => (&self.read_uncommitted, Offset::End),
            };
            rounds.push(list_offsets(consumer, targets, position, deadline).await);
        }
        rounds.try_into().expect("three rounds")
    }

    /// Committed offsets of `groups` listed without the own client's group pipeline:
    /// through the own client (coordinators from [`Coordinators`] or FindCoordinator, one
    /// OffsetFetch per coordinator) while it can fetch them here, else through librdkafka,
    /// one request per group.
    async fn committed_offsets(
        &self,
        groups: &[String],
        brokers: &BTreeMap<i32, String>,
        deadline: Instant,
    ) -> Vec<Result<Vec<CommittedOffset>, String>> {
        if let Some(wire) = self.own().filter(|_| self.wire_offsets.usable()) {
            let servers: Vec<String> = brokers.values().cloned().collect();
            let fetched =
                offsets::fetch(&wire.pool, groups, &servers, &self.coordinators, deadline).await;
            match fetched.unusable {
                None => return fetched.results,
                Some(reason) => self.offsets_unusable(&reason),
            }
        }
        let consumer = self.read_uncommitted.clone();
        let names = groups.to_vec();
        blocking(move || {
            list_consumer_group_offsets(consumer.client(), &names, deadline)
                .into_iter()
                .map(|r| r.map_err(|e| e.to_string()))
                .collect()
        })
        .await
        .unwrap_or_else(|error| groups.iter().map(|_| Err(error.clone())).collect())
    }

    /// The own client while the brokers do not refuse its TLS (see `wire_refused`).
    fn own(&self) -> Option<&Arc<WireClient>> {
        self.wire.as_ref().filter(|_| self.wire_refused.usable())
    }

    /// Every broker refused the own client's TLS: librdkafka (OpenSSL) reads what it can
    /// for [`RECHECK`] (metadata, the classic group list, committed and log offsets), so
    /// that the cluster never looks reachable and empty at once.
    fn refused(&self, reason: &str) {
        tracing::warn!(
            cluster = %self.cluster,
            "the brokers refuse the TLS of the exporter's own Kafka client ({reason}); metadata, groups (classic list) \
             and offsets are read through librdkafka for the next {} min, then the own client is tried again; \
             transaction forensics, the transaction list, record reads and retention need the own client and \
             fail meanwhile ({TLS_HINT})",
            RECHECK.as_secs() / 60
        );
        self.wire_refused
            .turn_off(format!("the brokers refuse its TLS: {reason}"));
    }

    /// Some brokers refused the own client's TLS in this cycle (every one when `all`):
    /// their partitions' offsets were read through librdkafka; said once while the same
    /// brokers refuse. The others keep the own client, so that their groups keep the
    /// types and states of their own protocols.
    fn brokers_refused(&self, reason: &str, all: bool) {
        if all {
            self.refused(reason);
            return;
        }
        let mut said = self.refusal_said.lock().unwrap_or_else(|p| p.into_inner());
        if said.as_deref() != Some(reason) {
            tracing::warn!(
                cluster = %self.cluster,
                "a broker refuses the TLS of the exporter's own Kafka client ({reason}); the offsets of its partitions \
                 are read through librdkafka, its groups and transactions are absent and counted as failures \
                 ({TLS_HINT})"
            );
            *said = Some(reason.to_string());
        }
    }

    fn offsets_unusable(&self, reason: &str) {
        tracing::warn!(
            cluster = %self.cluster,
            "the exporter's own Kafka client cannot fetch committed offsets here ({reason}); they are \
             fetched through librdkafka, one request per group, for the next {} min, then the own client is tried again",
            RECHECK.as_secs() / 60
        );
        self.wire_offsets.turn_off(reason);
    }
}

/// How long a capability of the own client stays off before it is tried again.
const RECHECK: Duration = Duration::from_secs(300);

impl KafkaSampler {
    /// The selected groups with their type, state and members: through the exporter's
    /// own client, by each group's protocol ([`super::groups`]), while the brokers name
    /// group types; through librdkafka's classic ListGroups and DescribeGroups where they
    /// do not (Kafka before 3.8), or where the own client cannot work. `None` when the
    /// group list failed (recorded in `sample`).
    async fn groups(
        &self,
        sample: &mut RawSample,
        brokers: &BTreeMap<i32, String>,
        deadline: Instant,
    ) -> Option<(Vec<RawGroup>, bool)> {
        if let Some(wire) = self.own().filter(|_| self.wire_groups.usable()) {
            let with_offsets = self.wire_offsets.usable();
            let listed = super::ask::groups::list(
                wire,
                &self.shares,
                brokers,
                |name| self.groups.accepts(name),
                with_offsets.then_some(&self.coordinators),
                deadline,
            )
            .await;
            match listed {
                Ok(mut listed) => {
                    if self.wire_groups.recovered() {
                        tracing::info!(cluster = %self.cluster, "every broker names group types again: groups are listed by their own protocols");
                    }
                    let refused = listed.list_failures.iter().filter(|f| f.refused).count();
                    if refused > 0 && refused == brokers.len() {
                        // The classic list through librdkafka, in this cycle already.
                        self.refused(&listed.list_failures[0].reason);
                        return self.classic_groups(sample, deadline).await;
                    }
                    // Some brokers refused: their groups are absent (failures, a partial
                    // list), the others' keep their own protocols.
                    let list_failed = listed.list_failures.len();
                    sample.fail_each(
                        Stage::ListGroups,
                        listed.list_failures.iter().map(|f| &f.reason),
                    );
                    if let Some(reason) = &listed.streams_unsupported {
                        sample.features.insert(
                            Feature::StreamsGroups,
                            FeatureState::off(Status::Unsupported, reason.clone()),
                        );
                    }
                    for (stage, failures) in [
                        (Stage::DescribeGroups, &listed.describe_failures),
                        (Stage::ShareGroupOffsets, &listed.share_failures),
                    ] {
                        sample.fail_each(stage, failures.iter());
                    }
                    sample.fail_all(
                        Stage::GroupOffsets,
                        std::mem::take(&mut listed.offset_failures),
                    );
                    // Every broker failed: the group list is unknown, not empty.
                    if list_failed > 0 && list_failed == brokers.len() {
                        return None;
                    }
                    sample.group_listing = if list_failed == 0 {
                        GroupListing::Complete
                    } else {
                        GroupListing::Partial(
                            listed
                                .list_failures
                                .iter()
                                .map(|f| f.addr.clone())
                                .collect(),
                        )
                    };
                    let mut offsets_done = with_offsets;
                    if let Some(reason) = &listed.offsets_unusable {
                        self.offsets_unusable(reason);
                        offsets_done = false;
                    } else if with_offsets && self.wire_offsets.recovered() {
                        tracing::info!(cluster = %self.cluster, "the exporter's own Kafka client fetches committed offsets again");
                    }
                    let names: std::collections::HashSet<&str> =
                        listed.groups.iter().map(|g| g.name.as_str()).collect();
                    self.coordinators.retain(|name| names.contains(name));
                    return Some((listed.groups, offsets_done));
                }
                Err(reason) => {
                    tracing::warn!(
                        cluster = %self.cluster,
                        "groups are listed with the classic APIs for the next {} min, then the brokers are asked again ({reason}): consumer groups of the new protocol (KIP-848), share and streams groups may show a wrong state and member count",
                        RECHECK.as_secs() / 60
                    );
                    self.wire_groups.turn_off(reason);
                }
            }
        }
        self.classic_groups(sample, deadline).await
    }

    /// The groups through librdkafka's classic ListGroups (type, state, members), without
    /// committed offsets.
    async fn classic_groups(
        &self,
        sample: &mut RawSample,
        deadline: Instant,
    ) -> Option<(Vec<RawGroup>, bool)> {
        // The classic list gets half of the time: the committed offsets, asked next, the
        // other half.
        let consumer = self.read_uncommitted.clone();
        let filter = self.groups.clone();
        let list_deadline = Instant::now() + remaining(deadline) / 2;
        let listed = blocking(move || {
            consumer
                .fetch_group_list(None, remaining(list_deadline))
                .map(|list| {
                    list.groups()
                        .iter()
                        .filter(|g| {
                            filter.accepts(g.name())
                                && g.protocol_type() != crate::kafka::coordination::PROTOCOL_TYPE
                        })
                        .map(|g| RawGroup {
                            coordinator: None,
                            detail: Some(crate::kafka::ask::groups::classic_members(
                                g.protocol_type(),
                                g.state(),
                                g.members().iter().map(|m| {
                                    crate::kafka::ask::groups::ClassicMember {
                                        member_id: m.id(),
                                        instance_id: None,
                                        client_id: m.client_id(),
                                        client_host: m.client_host(),
                                        metadata: m.metadata().unwrap_or_default(),
                                        assignment: m.assignment().unwrap_or_default(),
                                    }
                                }),
                            )),
                            name: g.name().to_string(),
                            group_type: "classic".to_string(),
                            protocol: g.protocol_type().to_string(),
                            state: g.state().to_string(),
                            members: Some(g.members().len()),
                            isolation: None,
                            broker_lags: Vec::new(),
                            committed: None,
                        })
                        .collect::<Vec<_>>()
                })
                .map_err(|e| e.to_string())
        })
        .await
        .and_then(|listed| listed);
        match listed {
            Ok(groups) => {
                sample.group_listing = GroupListing::Complete;
                Some((groups, false))
            }
            Err(error) => {
                sample.fail(Stage::ListGroups, 1, error);
                None
            }
        }
    }
}

/// Runs a blocking librdkafka call on the runtime's blocking threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| format!("librdkafka call failed: {e}"))
}

impl Sampler for KafkaSampler {
    fn sample(&self, deadline: Instant) -> BoxFuture<'_, RawSample> {
        Box::pin(self.cycle(deadline))
    }
}

/// A partition to ask ListOffsets about: topic, partition, leader.
type Target = (Arc<str>, i32, i32);

/// The partitions `topics` selects, with their leaders and replicas, and the brokers, from
/// a Metadata answer of the own client. A topic answered with an error is left out here;
/// if the exporter expects it, the cycle asks about it by name ([`super::visibility`]).
fn plan_of(answer: &MetadataResponse, topics: &NameFilter) -> MetadataPlan {
    let mut plan: Vec<(Target, Replication)> = Vec::new();
    for topic in &answer.topics {
        let Some(name) = topic.name.as_ref().map(|n| n.0.as_str()) else {
            continue;
        };
        if topic.error_code != 0 || !topics.accepts(name) {
            continue;
        }
        let name: Arc<str> = Arc::from(name);
        for partition in &topic.partitions {
            let leader = partition.leader_id.0;
            let replication = Replication {
                leader,
                preferred_leader: partition.replica_nodes.first().map_or(-1, |b| b.0),
                replicas: partition.replica_nodes.len() as u32,
                in_sync_replicas: partition.isr_nodes.len() as u32,
            };
            plan.push((
                (name.clone(), partition.partition_index, leader),
                replication,
            ));
        }
    }
    (plan, metadata::brokers(answer))
}

/// The partitions to sample with their replication, and the brokers: id -> address.
type MetadataPlan = (Vec<(Target, Replication)>, BTreeMap<i32, String>);

impl KafkaSampler {
    /// The metadata through librdkafka.
    async fn librdkafka_metadata(&self, deadline: Instant) -> Result<MetadataPlan, String> {
        let consumer = self.read_uncommitted.clone();
        let topics = self.topics.clone();
        blocking(move || {
            consumer
                .fetch_metadata(None, remaining(deadline))
                .map(|metadata| {
                    let mut plan: Vec<(Target, Replication)> = Vec::new();
                    for topic in metadata.topics() {
                        if topic.error().is_some() || !topics.accepts(topic.name()) {
                            continue;
                        }
                        let name: Arc<str> = Arc::from(topic.name());
                        for partition in topic.partitions() {
                            let replication = Replication {
                                leader: partition.leader(),
                                preferred_leader: partition
                                    .replicas()
                                    .first()
                                    .copied()
                                    .unwrap_or(-1),
                                replicas: partition.replicas().len() as u32,
                                in_sync_replicas: partition.isr().len() as u32,
                            };
                            plan.push((
                                (name.clone(), partition.id(), partition.leader()),
                                replication,
                            ));
                        }
                    }
                    let brokers: BTreeMap<i32, String> = metadata
                        .brokers()
                        .iter()
                        .map(|b| (b.id(), super::wire::broker_address(b.host(), b.port())))
                        .collect();
                    (plan, brokers)
                })
                .map_err(|e| e.to_string())
        })
        .await
        .and_then(|answer| answer)
    }
}

impl KafkaSampler {
    /// One sampling cycle, in the order of the module docs.
    async fn cycle(&self, deadline: Instant) -> RawSample {
        if let Some(tokens) = &self.tokens {
            // A fresh token before librdkafka's events are served, since its refresh
            // callback only reads the cache. Failures show where the token is used.
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = tokio::time::timeout(left / 4, tokens.token()).await;
        }
        self.drain_events();
        let mut sample = RawSample::default();
        sample.features.extend(self.settled.iter().cloned());

        // 1. Metadata: through the own client (a hedged request, so that a broker that
        // hangs does not cost the cycle), through librdkafka where it cannot be used.
        let metadata = match self.own().filter(|_| self.wire_metadata.usable()) {
            Some(wire) => match metadata::fetch(&wire.pool, &self.candidates, deadline).await {
                Ok(answer) => {
                    if self.wire_refused.recovered() {
                        tracing::info!(cluster = %self.cluster, "the brokers accept the exporter's own Kafka client's TLS again");
                    }
                    Some(Ok(plan_of(&answer, &self.topics)))
                }
                Err(error @ WireError::Tls { .. }) => {
                    self.refused(&error.to_string());
                    None
                }
                Err(error) if error.is_permanent() => {
                    tracing::warn!(
                        cluster = %self.cluster,
                        "the exporter's own Kafka client cannot fetch metadata here ({error}); librdkafka \
                         fetches it for the next {} min, then the own client is tried again",
                        RECHECK.as_secs() / 60
                    );
                    self.wire_metadata.turn_off(error.to_string());
                    None
                }
                Err(error) => Some(Err(error.to_string())),
            },
            None => None,
        };
        let metadata = match metadata {
            Some(Ok(metadata)) => Ok(metadata),
            // No broker answered the own client: librdkafka tries with the time left
            // (it may reach what the own client cannot).
            Some(Err(error)) => match self.librdkafka_metadata(deadline).await {
                Ok(metadata) => Ok(metadata),
                Err(other) => Err(format!("{error}; through librdkafka: {other}")),
            },
            None => self.librdkafka_metadata(deadline).await,
        };
        let (mut plan, brokers) = match metadata {
            Ok(metadata) => metadata,
            Err(error) => {
                self.drain_events();
                match self.recent_client_error() {
                    Some(cause) => sample.fail(Stage::Metadata, 1, format!("{error} ({cause})")),
                    None => sample.fail(Stage::Metadata, 1, error),
                }
                return sample;
            }
        };
        sample.reached = true;
        // Sorted by topic and partition: derive keeps the order, and the rates, the render
        // and `/` look partitions up by it (derive sorts a sample that is not).
        plan.sort_by(|(a, _), (b, _)| (&a.0, a.1).cmp(&(&b.0, b.1)));
        sample.brokers = brokers
            .iter()
            .map(|(id, address)| (*id, address.clone()))
            .collect();
        sample.partitions = plan
            .iter()
            .map(|((topic, partition, _), replication)| RawPartition {
                topic: topic.clone(),
                partition: *partition,
                log_start_offset: None,
                last_stable_offset: None,
                high_watermark: None,
                open_transactions: None,
                log: None,
                replication: Some(*replication),
            })
            .collect();
        let plan: Vec<Target> = plan.into_iter().map(|(target, _)| target).collect();
        let planned: Vec<Planned> = plan
            .iter()
            .enumerate()
            .map(|(index, (_, _, leader))| Planned {
                index,
                leader: *leader,
            })
            .collect();
        let targets: Arc<Vec<Target>> = Arc::new(plan);

        // 2. Groups, 3. their committed offsets: at most half of the time left, so that a
        // broker that does not answer leaves the partitions' offsets, asked next, time of
        // their own.
        // The topics' retention.ms (DescribeConfigs, cached, refreshed in the background).
        let groups_deadline = Instant::now() + remaining(deadline) / 2;
        if let Some(clock) = self.clock.as_ref().filter(|_| self.own().is_some()) {
            sample.clock_skew = clock.skew(&brokers);
        }
        if let Some(configs) = &self.topic_configs {
            let mut topics: Vec<Arc<str>> = targets.iter().map(|(t, _, _)| t.clone()).collect();
            topics.dedup();
            let (retention_ms, failure, feature) = configs.retention(&topics, &brokers);
            sample.retention_ms = retention_ms;
            if let Some(feature) = feature {
                sample.features.insert(Feature::RetentionConfigs, feature);
            }
            if let Some(error) = failure {
                sample.fail(Stage::TopicConfigs, 1, error);
            }
        }
        let listed = self.groups(&mut sample, &brokers, groups_deadline).await;
        if let Some((mut groups, offsets_done)) = listed {
            groups.sort_by(|a, b| a.name.cmp(&b.name));
            groups.dedup_by(|a, b| a.name == b.name);
            if !offsets_done {
                let names: std::collections::HashSet<&str> =
                    groups.iter().map(|g| g.name.as_str()).collect();
                self.coordinators.retain(|name| names.contains(name));
                // A share group has no committed offsets: its members acknowledge records
                // one by one, and its start offsets came with the group list.
                let names: Vec<String> = groups
                    .iter()
                    .filter(|g| g.group_type != "share")
                    .map(|g| g.name.clone())
                    .collect();
                let mut results = self
                    .committed_offsets(&names, &brokers, groups_deadline)
                    .await
                    .into_iter();
                for group in groups.iter_mut() {
                    if group.group_type == "share" {
                        continue;
                    }
                    match results.next() {
                        Some(Ok(offsets)) => group.committed = Some(offsets),
                        // The cause told by the error, not by the group's name.
                        Some(Err(error)) => {
                            sample.failed(
                                Stage::GroupOffsets,
                                1,
                                super::features::cause_of(&error),
                                || format!("group {:?}: {error}", group.name),
                            );
                        }
                        None => {}
                    }
                }
            }
            sample.groups = groups;
        }

        // 3b. The topics it expects and the metadata left out, asked for by name: an ACL
        // that does not cover them, a topic deleted, or a broker's metadata behind.
        self.unseen_topics(&mut sample, &targets, deadline).await;

        // 4. Log start offsets, last stable offsets, then high watermarks.
        let [log_start, last_stable, high_watermark] =
            self.log_offsets(&targets, &brokers, deadline).await;
        apply(&mut sample, log_start, Stage::LogStartOffset, |p, v| {
            p.log_start_offset = v
        });
        apply(&mut sample, last_stable, Stage::LastStableOffset, |p, v| {
            p.last_stable_offset = v
        });
        apply(&mut sample, high_watermark, Stage::HighWatermark, |p, v| {
            p.high_watermark = v
        });

        // 5. Who holds the partitions whose LSO is behind the HW.
        if let Some(forensics) = &self.forensics {
            let pinned: Vec<&Planned> = planned
                .iter()
                .filter(|t| {
                    let p = &sample.partitions[t.index];
                    matches!((p.high_watermark, p.last_stable_offset), (Some(hw), Some(lso)) if hw > lso)
                })
                .collect();
            // Half of the time left: a broker that does not answer leaves the record
            // reads, next, time of their own.
            let forensics_deadline = Instant::now() + remaining(deadline) / 2;
            forensics
                .describe(&mut sample, &pinned, &brokers, forensics_deadline)
                .await;
        }

        // 5b. Every open transaction of the cluster, from the coordinators: a third of the
        // time left, so that a broker that does not answer leaves the reads time.
        if let Some(inventory) = &self.inventory {
            let inventory_deadline = Instant::now() + remaining(deadline) / 3;
            inventory
                .list(&mut sample, &brokers, inventory_deadline)
                .await;
        }

        // 6. Record-batch headers where groups are close to the end, at offsets of groups
        // further behind, and at the LSO.
        if let Some(reads) = &self.reads {
            reads.read(&mut sample, &planned, &brokers, deadline).await;
        }

        sample
    }
}

/// Missing topics asked about by name through librdkafka at most per cycle (one request
/// each); the rest count as not confirmed either way.
const NAMED_THROUGH_LIBRDKAFKA: usize = 20;

impl KafkaSampler {
    /// Fills [`RawSample::unseen_topics`]: the topics it expects ([`TopicWatch`]) that
    /// the cycle's metadata (`targets`) left out, each asked about by name with a share
    /// of the time left. Those refused count as refusals of the metadata stage, those
    /// not confirmed either way as its failures; a deleted one is neither.
    async fn unseen_topics(&self, sample: &mut RawSample, targets: &[Target], deadline: Instant) {
        let lock = || self.topic_watch.lock().unwrap_or_else(|p| p.into_inner());
        let listed: std::collections::HashSet<&str> =
            targets.iter().map(|(topic, _, _)| &**topic).collect();
        let missing = lock().missing(&listed, &sample.groups, |t| self.topics.accepts(t));
        let answered = if missing.is_empty() {
            Vec::new()
        } else {
            let named_deadline = Instant::now() + remaining(deadline) / 4;
            self.named_metadata(missing, named_deadline).await
        };
        let mut listed: Vec<&Arc<str>> = targets.iter().map(|(topic, _, _)| topic).collect();
        listed.dedup();
        sample.unseen_topics = lock().settle(listed, answered);
        let mut failures = Failures::default();
        if let Some((count, denial)) = visibility::denial(&sample.unseen_topics) {
            failures.add_as(super::features::Cause::Denied, count, || denial);
        }
        for unseen in &sample.unseen_topics {
            if let Absence::Unconfirmed(why) = &unseen.absence {
                failures.add_as(super::features::Cause::Failed, 1, || {
                    format!(
                        "topic {:?} ({}) is missing from the metadata: {why}",
                        unseen.topic, unseen.expected
                    )
                });
            }
        }
        sample.fail_all(Stage::Metadata, failures);
    }

    /// What a Metadata request that names each of `missing` answers of it.
    async fn named_metadata(
        &self,
        missing: Vec<(Arc<str>, Expectation)>,
        deadline: Instant,
    ) -> Vec<(Arc<str>, Expectation, Absence)> {
        let names: Vec<Arc<str>> = missing.iter().map(|(topic, _)| topic.clone()).collect();
        let answers: Vec<Absence> = match self.own().filter(|_| self.wire_metadata.usable()) {
            Some(wire) => {
                match metadata::fetch_named(&wire.pool, &self.candidates, &names, deadline).await {
                    Ok(answer) => names
                        .iter()
                        .map(|name| {
                            let topic = answer
                                .topics
                                .iter()
                                .find(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == &**name));
                            match topic.map(|t| t.error_code) {
                                None => Absence::Unconfirmed("not in the answer naming it".into()),
                                Some(code) => absence_of(code, || {
                                    format!(
                                        "{:?}",
                                        kafka_protocol::ResponseError::try_from_code(code)
                                    )
                                }),
                            }
                        })
                        .collect(),
                    Err(error) => {
                        let why = format!("asking for it by name failed: {error}");
                        names
                            .iter()
                            .map(|_| Absence::Unconfirmed(why.clone()))
                            .collect()
                    }
                }
            }
            None => {
                let consumer = self.read_uncommitted.clone();
                let asked = names.clone();
                blocking(move || {
                    asked
                        .iter()
                        .enumerate()
                        .map(|(i, name)| {
                            if i >= NAMED_THROUGH_LIBRDKAFKA {
                                return Absence::Unconfirmed("not asked in this cycle".into());
                            }
                            match consumer.fetch_metadata(Some(name), remaining(deadline)) {
                                Ok(metadata) => match metadata.topics().first() {
                                    Some(topic) => match topic.error() {
                                        None => absence_of(0, String::new),
                                        Some(error) => {
                                            absence_of(error as i16, || format!("{error:?}"))
                                        }
                                    },
                                    None => {
                                        Absence::Unconfirmed("not in the answer naming it".into())
                                    }
                                },
                                Err(error) => Absence::Unconfirmed(format!(
                                    "asking for it by name failed: {error}"
                                )),
                            }
                        })
                        .collect()
                })
                .await
                .unwrap_or_else(|error| {
                    names
                        .iter()
                        .map(|_| Absence::Unconfirmed(error.clone()))
                        .collect()
                })
            }
        };
        missing
            .into_iter()
            .zip(answers)
            .map(|((topic, expected), absence)| (topic, expected, absence))
            .collect()
    }
}

/// What a topic's error code in a Metadata answer that names it says of its absence;
/// `error` describes any other code.
fn absence_of(error_code: i16, error: impl FnOnce() -> String) -> Absence {
    // TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION: the protocol's codes.
    match error_code {
        29 => Absence::Denied,
        // librdkafka's own code for a topic the cluster does not know as well.
        3 | -188 => Absence::Deleted,
        0 => Absence::Unconfirmed(
            "listed when asked for by name (the brokers' metadata differed for a moment)".into(),
        ),
        _ => Absence::Unconfirmed(error()),
    }
}

/// The outcome of one ListOffsets round: a value or an error per partition index.
type OffsetsRound = Vec<Result<i64, String>>;

/// One ListOffsets request per partition leader, all leaders at once, each bounded by
/// `deadline`. The isolation level is the consumer's. A leader that fails fails only its
/// own partitions; a partition without a leader fails alone.
async fn list_offsets(
    consumer: &Arc<BaseConsumer<ClusterContext>>,
    targets: &Arc<Vec<Target>>,
    position: Offset,
    deadline: Instant,
) -> OffsetsRound {
    let (consumer, shared) = (consumer.clone(), targets.clone());
    blocking(move || list_offsets_blocking(&consumer, &shared, position, deadline))
        .await
        .unwrap_or_else(|error| targets.iter().map(|_| Err(error.clone())).collect())
}

fn list_offsets_blocking(
    consumer: &BaseConsumer<ClusterContext>,
    partitions: &[Target],
    position: Offset,
    deadline: Instant,
) -> OffsetsRound {
    let mut results: OffsetsRound = vec![Err(String::new()); partitions.len()];
    let mut by_leader: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
    for (index, (_, _, leader)) in partitions.iter().enumerate() {
        if *leader < 0 {
            results[index] = Err("partition has no leader".into());
        } else {
            by_leader.entry(*leader).or_default().push(index);
        }
    }
    let answers: Vec<(Vec<usize>, Result<TopicPartitionList, KafkaError>)> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = by_leader
                .into_values()
                .map(|indices| {
                    scope.spawn(move || {
                        let mut request = TopicPartitionList::with_capacity(indices.len());
                        for &i in &indices {
                            let (topic, partition, _) = &partitions[i];
                            // Cannot fail: the list was just created and the offset is valid.
                            let _ = request.add_partition_offset(topic, *partition, position);
                        }
                        let answer = consumer.offsets_for_times(request, remaining(deadline));
                        (indices, answer)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("ListOffsets thread panicked"))
                .collect()
        });
    for (indices, answer) in answers {
        match answer {
            Ok(list) => {
                for &i in &indices {
                    let (topic, partition, _) = &partitions[i];
                    results[i] = match list.find_partition(topic, *partition) {
                        Some(elem) => match (elem.error(), elem.offset()) {
                            (Err(error), _) => Err(error.to_string()),
                            (Ok(()), Offset::Offset(offset)) if offset >= 0 => Ok(offset),
                            (Ok(()), other) => Err(format!("no offset in answer ({other:?})")),
                        },
                        None => Err("partition missing from answer".into()),
                    };
                }
            }
            Err(error) => {
                for &i in &indices {
                    results[i] = Err(error.to_string());
                }
            }
        }
    }
    results
}

fn apply(
    sample: &mut RawSample,
    round: OffsetsRound,
    stage: Stage,
    set: impl Fn(&mut RawPartition, Option<i64>),
) {
    // Per cause, told from the error, not from the topic's name before it.
    let mut failures = Failures::default();
    for (partition, result) in sample.partitions.iter_mut().zip(round) {
        match result {
            Ok(offset) => set(partition, Some(offset)),
            Err(error) => {
                let error = error.to_string();
                let cause = super::features::cause_of(&error);
                failures.add_as(cause, 1, || {
                    format!("{}/{}: {error}", partition.topic, partition.partition)
                });
            }
        }
    }
    sample.fail_all(stage, failures);
}

fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

#[cfg(test)]
mod tests {
    use super::nearest_property;

    #[test]
    fn a_misspelt_property_names_the_nearest_one_librdkafka_knows() {
        for (typo, meant) in [
            ("sasl.pasword", "sasl.password"),
            ("sasl.usernme", "sasl.username"),
            ("ssl.ca.locaton", "ssl.ca.location"),
            ("securty.protocol", "security.protocol"),
            ("auto.offset.rest", "auto.offset.reset"),
        ] {
            assert_eq!(nearest_property(typo).as_deref(), Some(meant), "{typo}");
        }
        assert_eq!(nearest_property("completely.unrelated.words"), None);
    }
}
