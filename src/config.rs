//! Configuration: one TOML file, overridden by `KAFKA_LSO_EXPORTER_*` environment
//! variables, overridden by command-line flags.
//!
//! Everything is loaded through figment so that every value keeps its origin; a bad
//! value is reported once, naming the key and the file or variable it came from.
//! [`Config::load`] is the only entry point and returns a fully validated config with
//! compiled regexes, so nothing downstream re-checks anything.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use crate::kafka::wire::oauth::{self, TokenSource};
use figment::providers::{Format, Toml};
use figment::value::{Dict, Map, Value};
use figment::{Figment, Metadata, Profile, Provider};
use regex::RegexSet;
use serde::{Deserialize, Deserializer};
use tokio::net::TcpListener;

/// Prefix of every environment variable the exporter reads.
pub const ENV_PREFIX: &str = "KAFKA_LSO_EXPORTER_";
/// The config file read when `--config` is not given, if it exists.
pub const DEFAULT_CONFIG_FILE: &str = "kafka-lso-exporter.toml";

/// Client properties the exporter sets itself; a user value would break sampling.
/// Default of `clusters[].hanging_margin`.
pub const DEFAULT_HANGING_MARGIN: Duration = Duration::from_secs(60);
/// Default of `clusters[].stall_after`.
pub const DEFAULT_STALL_AFTER: Duration = Duration::from_secs(300);
/// Default of `clusters[].groups.rate_window`.
pub const DEFAULT_RATE_WINDOW: Duration = Duration::from_secs(300);
/// Default of `clusters[].groups.abandon_after`.
pub const DEFAULT_ABANDON_AFTER: Duration = Duration::from_secs(24 * 3600);
/// Default of `clusters[].read_window`, in records.
pub const DEFAULT_READ_WINDOW: u64 = 1000;
/// Largest `clusters[].read_window`: the window is kept in memory per partition.
pub const MAX_READ_WINDOW: u64 = 100_000;
/// Default of `clusters[].transaction_list_min_age`.
pub const DEFAULT_TRANSACTION_LIST_MIN_AGE: Duration = Duration::from_secs(10);
/// Default of `clusters[].transaction_list_detail`.
pub const DEFAULT_TRANSACTION_LIST_DETAIL: usize = 10;
/// Largest `clusters[].transaction_list_detail`: each detailed transaction is a handful of
/// series with its transactional id as a label.
pub const MAX_TRANSACTION_LIST_DETAIL: usize = 1000;

const RESERVED_CLIENT_KEYS: &[&str] = &[
    "bootstrap.servers",
    "isolation.level",
    "group.id",
    "enable.auto.commit",
];

/// Default of `web.listen_addresses`: port 9745 on every interface.
pub const DEFAULT_LISTEN_ADDRESS: &str = ":9745";
/// Default of `web.telemetry_path`.
pub const DEFAULT_TELEMETRY_PATH: &str = "/metrics";
/// Paths the exporter serves besides the telemetry path, which must not take one of them.
const RESERVED_PATHS: &[&str] = &["/", "/healthz", "/readyz", "/api/v1/stuck"];

/// Keys of earlier versions, with the key that replaced each: named in the error, since
/// deny_unknown_fields alone would only say that the old key is unknown.
const RENAMED_KEYS: &[(&str, &str, &str)] = &[
    ("listen", "web.listen_addresses", "a list of addresses"),
    (
        "log_level",
        "log.level",
        "debug, info, warn, error or a filter",
    ),
    ("log_format", "log.format", "logfmt or json"),
];

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The HTTP side, under `[web]`: the names of the exporter-toolkit's `--web.*` flags.
    pub web: WebSettings,
    /// Logging, under `[log]`: the toolkit's `--log.level` and `--log.format`.
    pub log: LogSettings,
    pub interval: Duration,
    /// Deadline of one sampling cycle; never longer than `interval`.
    pub timeout: Duration,
    pub clusters: Vec<ClusterConfig>,
    /// Replicas that share the work, under `[ha]`; `None`: this replica serves all.
    pub ha: Option<HaSettings>,
    /// `KAFKA_LSO_EXPORTER_*` variables left unread because they are Kubernetes
    /// service-link variables (see [`is_service_link`]), by name, for a debug line.
    pub ignored_env: Vec<String>,
}

/// Replicas sharing the work through one group of Kafka's group protocol (see
/// [`crate::kafka::coordination`]).
#[derive(Debug, Clone)]
pub struct HaSettings {
    /// The coordination group: the same for every replica of one deployment.
    pub group: String,
    /// `ha.cluster` as written: no longer used (each cluster's share is coordinated on
    /// that cluster), accepted for one release with a warning.
    pub cluster: Option<String>,
    /// A replica that does not heartbeat for this long loses its share.
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
}

/// Where and how the exporter serves HTTP.
#[derive(Debug, Clone)]
pub struct WebSettings {
    /// Every address the exporter serves on; at least one, no duplicates.
    pub listen_addresses: Vec<ListenAddress>,
    /// The path of the metrics, `/metrics` unless set.
    pub telemetry_path: String,
    /// The exporter-toolkit web config file (TLS, basic auth), loaded by the binary.
    pub config_file: Option<PathBuf>,
}

/// What the exporter logs, and how.
#[derive(Debug, Clone)]
pub struct LogSettings {
    /// A level (debug, info, warn, error) or a filter such as `info,librdkafka=warn`.
    pub level: String,
    pub format: LogFormat,
}

/// An address to serve HTTP on, written as the Prometheus exporter-toolkit takes it:
/// `host:port`, `[ipv6]:port`, or `:port` for every interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenAddress {
    /// An IP address or a host name; `None` for every interface.
    host: Option<String>,
    port: u16,
}

impl ListenAddress {
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Opens a listening socket. `:port` listens on every interface, IPv6 and IPv4
    /// alike, or on every IPv4 interface where the host has no IPv6.
    pub async fn bind(&self) -> io::Result<TcpListener> {
        match &self.host {
            Some(host) => TcpListener::bind((host.as_str(), self.port)).await,
            None => match bind_dual_stack(self.port) {
                Ok(listener) => Ok(listener),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::AddrInUse | io::ErrorKind::PermissionDenied
                    ) =>
                {
                    Err(e)
                }
                Err(_) => TcpListener::bind((Ipv4Addr::UNSPECIFIED, self.port)).await,
            },
        }
    }
}

/// `[::]:port` with IPV6_V6ONLY off, so that IPv4 clients are accepted too whatever the
/// system's default (Linux's `net.ipv6.bindv6only`).
fn bind_dual_stack(port: u16) -> io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV6, Type::STREAM, None)?;
    socket.set_only_v6(false)?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)).into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

impl FromStr for ListenAddress {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let wrong =
            || format!("\"{text}\" is not an address like :9745, 0.0.0.0:9745 or [::1]:9745");
        let (host, port) = text.rsplit_once(':').ok_or_else(wrong)?;
        let port: u16 = port.parse().map_err(|_| wrong())?;
        let host = if host.is_empty() {
            None
        } else if let Some(ipv6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            ipv6.parse::<Ipv6Addr>().map_err(|_| wrong())?;
            Some(ipv6.to_string())
        } else if host.contains(':') {
            return Err(format!(
                "\"{text}\": write an IPv6 address in brackets, e.g. [::1]:9745"
            ));
        } else if host.parse::<IpAddr>().is_ok() || is_host_name(host) {
            Some(host.to_string())
        } else {
            return Err(wrong());
        };
        Ok(ListenAddress { host, port })
    }
}

impl fmt::Display for ListenAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            None => write!(f, ":{}", self.port),
            Some(host) if host.contains(':') => write!(f, "[{host}]:{}", self.port),
            Some(host) => write!(f, "{host}:{}", self.port),
        }
    }
}

fn is_host_name(host: &str) -> bool {
    host.split('.').all(|label| {
        !label.is_empty()
            && label.len() <= 63
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
    })
}

/// One Kafka cluster to sample.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub name: String,
    pub bootstrap_servers: String,
    pub topics: NameFilter,
    pub groups: NameFilter,
    /// librdkafka properties passed through as-is (security.protocol, sasl.*, ssl.*).
    pub client: ClientProperties,
    /// Cardinality guard: at most this many sampled series for the cluster.
    pub max_series: Option<usize>,
    /// Groups whose series the guard never drops.
    pub priority_groups: NameFilter,
    /// Transaction forensics (DescribeProducers, ListTransactions, DescribeTransactions
    /// for partitions whose LSO is behind the HW).
    pub transactions: bool,
    /// How much longer than the broker's `transaction.max.timeout.ms` a transaction may
    /// stay open before it counts as hanging.
    pub hanging_margin: Duration,
    /// A group with something to read whose committed offset has not moved for this long
    /// is stalled (or stopped); see [`crate::derive::progress`].
    pub stall_after: Duration,
    /// List every open transaction of the cluster from the coordinators (needs
    /// `transactions`).
    pub transaction_list: bool,
    /// Only transactions open at least this long are listed.
    pub transaction_list_min_age: Duration,
    /// How many of the oldest listed transactions get series of their own.
    pub transaction_list_detail: usize,
    /// Read record-batch headers (Fetch) so that lags never count commit/abort markers or
    /// aborted records, and for time lag and withheld age.
    pub read_records: bool,
    /// Read the topics' `retention.ms` (DescribeConfigs) for the retention margin.
    pub retention_configs: bool,
    /// A group at most this many offsets below the HW has its lag counted exactly from
    /// the log; further behind, markers beyond the window are counted as records.
    pub read_window: u64,
    /// Which per-partition series the cluster's partitions get.
    pub granularity: Granularity,
    /// Groups whose granularity differs from the cluster's.
    pub group_granularity: GroupGranularity,
    /// Also export kafka_exporter's metric families (`compat = ["kafka_exporter"]`).
    pub compat_kafka_exporter: bool,
    /// How the cluster's groups are followed (`groups.*` other than the filter).
    pub group_settings: GroupSettings,
}

impl ClusterConfig {
    /// What `[ha]` replicas must agree on for this cluster, as one canonical text: every
    /// setting as validated (durations in milliseconds, however they were written; a
    /// setting written at its default reads as the default left out), secret client
    /// properties by name only, and the sampling rhythm. Keys are sorted; no `Debug`
    /// output. A setting that a later version adds goes in only when it is not at its
    /// default, so that a rolling upgrade with the same configuration keeps sharing the
    /// work.
    pub fn canonical(&self, interval: Duration, timeout: Duration) -> String {
        use serde_json::{json, Value};
        let ms = |d: Duration| json!(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let patterns = |set: &RegexSet| -> Value { json!(set.patterns()) };
        let mut bootstrap = bootstrap_list(&self.bootstrap_servers);
        bootstrap.sort_unstable();
        let client: BTreeMap<&str, &str> = self
            .client
            .iter()
            .map(|(k, v)| {
                let v = if looks_secret(k) {
                    "(secret)"
                } else {
                    v.as_str()
                };
                (k.as_str(), v)
            })
            .collect();
        let text = json!({
            "name": self.name,
            "bootstrap_servers": bootstrap,
            "topics": {"include": patterns(&self.topics.include), "exclude": patterns(&self.topics.exclude)},
            "groups": {
                "include": patterns(&self.groups.include),
                "exclude": patterns(&self.groups.exclude),
                "abandon_after": ms(self.group_settings.abandon_after),
                "assigned_only": self.group_settings.assigned_only,
                "rate_window": ms(self.group_settings.rate_window),
                "owner_labels": self.group_settings.owner_labels,
            },
            "client": client,
            "max_series": self.max_series,
            "priority_groups": {"include": patterns(&self.priority_groups.include), "exclude": patterns(&self.priority_groups.exclude)},
            "transactions": self.transactions,
            "hanging_margin": ms(self.hanging_margin),
            "stall_after": ms(self.stall_after),
            "transaction_list": self.transaction_list,
            "transaction_list_min_age": ms(self.transaction_list_min_age),
            "transaction_list_detail": self.transaction_list_detail,
            "read_records": self.read_records,
            "retention_configs": self.retention_configs,
            "read_window": self.read_window,
            "granularity": self.granularity.as_str(),
            "group_granularity": {
                "partition": patterns(&self.group_granularity.partition),
                "topic": patterns(&self.group_granularity.topic),
            },
            "compat": if self.compat_kafka_exporter { vec!["kafka_exporter"] } else { Vec::new() },
            "interval": ms(interval),
            "timeout": ms(timeout),
        });
        // serde_json's maps are sorted by key (no `preserve_order`).
        text.to_string()
    }
}

/// `clusters[].groups.*` besides `include` and `exclude`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupSettings {
    /// A group's partition that no member has owned, and whose committed offset has not
    /// moved, for this long is `abandoned`, not `stalled`.
    pub abandon_after: Duration,
    /// Abandoned partitions get no offset series on `/metrics` (`/` still shows them).
    pub assigned_only: bool,
    /// The window of the consumption and production rates and the catch-up estimate.
    pub rate_window: Duration,
    /// Each owned group-partition gets a series naming its owner
    /// (`kafka_consumergroup_partition_owner_info`).
    pub owner_labels: bool,
}

impl Default for GroupSettings {
    fn default() -> Self {
        GroupSettings {
            abandon_after: DEFAULT_ABANDON_AFTER,
            assigned_only: false,
            rate_window: DEFAULT_RATE_WINDOW,
            owner_labels: false,
        }
    }
}

/// The `host:port` entries of a `bootstrap_servers` list, as written.
pub fn bootstrap_list(bootstrap_servers: &str) -> Vec<&str> {
    bootstrap_servers
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// A cluster's librdkafka properties. They hold secrets (`sasl.password`,
/// `ssl.key.password`, ...), so `Debug` shows the value of no key that
/// [`looks_secret`]: a `{:?}` of the config in a log or a panic message leaks nothing.
/// Reads as the map it wraps.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientProperties(BTreeMap<String, String>);

impl ClientProperties {
    pub fn new(properties: BTreeMap<String, String>) -> ClientProperties {
        ClientProperties(properties)
    }
}

impl std::ops::Deref for ClientProperties {
    type Target = BTreeMap<String, String>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<'a> IntoIterator for &'a ClientProperties {
    type Item = (&'a String, &'a String);
    type IntoIter = std::collections::btree_map::Iter<'a, String, String>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl fmt::Debug for ClientProperties {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(key, value)| {
                let shown: &dyn fmt::Debug = if looks_secret(key) {
                    &"<redacted>"
                } else {
                    value
                };
                (key, shown)
            }))
            .finish()
    }
}

/// How finely a cluster's (or a group's) series are broken down.
///
/// `Topic` keeps one series per topic (and per group and topic) for everything, and
/// per-partition series only where a transaction withholds records (HW > LSO) and for the
/// groups on those partitions; `Partition` keeps every per-partition series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Granularity {
    #[default]
    Topic,
    Partition,
}

impl Granularity {
    pub fn as_str(self) -> &'static str {
        match self {
            Granularity::Topic => "topic",
            Granularity::Partition => "partition",
        }
    }
}

/// Per-group exceptions to the cluster's granularity: a group matching `partition` gets
/// per-partition series, else one matching `topic` gets per-topic series.
#[derive(Debug, Clone)]
pub struct GroupGranularity {
    partition: RegexSet,
    topic: RegexSet,
}

impl GroupGranularity {
    /// The granularity of `group` on a cluster whose own granularity is `cluster`.
    pub fn of(&self, group: &str, cluster: Granularity) -> Granularity {
        if self.partition.is_match(group) {
            Granularity::Partition
        } else if self.topic.is_match(group) {
            Granularity::Topic
        } else {
            cluster
        }
    }
}

impl Default for GroupGranularity {
    fn default() -> Self {
        Self {
            partition: RegexSet::empty(),
            topic: RegexSet::empty(),
        }
    }
}

/// `logfmt` (`time=... level=INFO source=... msg="..." key=value`) or `json`, one line per
/// event, the same keys in both (promslog's, see `crate::logging`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Logfmt,
    Json,
}

/// Include/exclude regexes over topic or group names. A name is kept when it matches at
/// least one include pattern and no exclude pattern; patterns are unanchored searches.
/// For topics, an internal topic (`__consumer_offsets`, `__transaction_state`, ...) is kept
/// only when an include pattern names internal topics ([`names_internal_topics`]):
/// `include = [".*"]` matches them too, but nobody who writes
/// `topics = { exclude = ["^test"] }` means to sample `__consumer_offsets`.
#[derive(Debug, Clone)]
pub struct NameFilter {
    include: RegexSet,
    exclude: RegexSet,
    /// Topics only: the include patterns that name internal topics.
    internal: Option<RegexSet>,
}

/// Names of Kafka's internal topics start with this.
const INTERNAL_PREFIX: &str = "__";

/// An include pattern names internal topics when it begins with `__`, after an optional
/// `^` and opening groups: `^__consumer_offsets$`, `^__`, `(?:__transaction_state)`.
pub fn names_internal_topics(pattern: &str) -> bool {
    pattern
        .trim_start_matches(['^', '('])
        .trim_start_matches("?:")
        .starts_with(INTERNAL_PREFIX)
}

impl NameFilter {
    pub fn new(include: &[String], exclude: &[String]) -> Result<Self, regex::Error> {
        Ok(Self {
            include: RegexSet::new(include)?,
            exclude: RegexSet::new(exclude)?,
            internal: None,
        })
    }

    /// A topic filter: as [`NameFilter::new`], and internal topics only where an include
    /// pattern names them.
    pub fn topics(include: &[String], exclude: &[String]) -> Result<Self, regex::Error> {
        let internal = include.iter().filter(|p| names_internal_topics(p));
        Ok(Self {
            internal: Some(RegexSet::new(internal)?),
            ..Self::new(include, exclude)?
        })
    }

    pub fn accepts(&self, name: &str) -> bool {
        let include = match &self.internal {
            Some(internal) if name.starts_with(INTERNAL_PREFIX) => internal,
            _ => &self.include,
        };
        include.is_match(name) && !self.exclude.is_match(name)
    }

    /// The names the include patterns spell out whole and the filter accepts: `^orders$`
    /// (a `.` read as itself, escaped or not), not `orders` (a search) nor `^orders-.*`.
    /// The exporter expects to see them.
    pub fn named(&self) -> Vec<String> {
        let whole = |pattern: &str| -> Option<String> {
            let inner = pattern.strip_prefix('^')?.strip_suffix('$')?;
            let name = inner.replace("\\.", ".").replace("\\-", "-");
            let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
            (!name.is_empty() && name.chars().all(legal)).then_some(name)
        };
        let mut names: Vec<String> = self
            .include
            .patterns()
            .iter()
            .filter_map(|p| whole(p))
            .filter(|name| self.accepts(name))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// Why the configuration was rejected. The message names the key and its source.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Invalid(String),
    #[error("cannot read config file {path}: {reason}")]
    Unreadable { path: PathBuf, reason: String },
}

/// Values given on the command line; each one, when set, overrides file and environment.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--web.listen-address`, repeated; when given, replaces the whole list.
    pub listen_addresses: Vec<String>,
    pub telemetry_path: Option<String>,
    pub web_config_file: Option<PathBuf>,
    pub interval: Option<String>,
    pub timeout: Option<String>,
    pub log_level: Option<String>,
    pub log_format: Option<String>,
    /// Sets the first cluster's bootstrap servers (creating it if the file has none).
    pub bootstrap_servers: Option<String>,
    /// Sets the first cluster's name.
    pub cluster_name: Option<String>,
    /// Further settings of the first cluster, by key path below it (kafka_exporter's
    /// flags: [`crate::kafka_exporter_flags`]).
    pub cluster_settings: ClusterSettings,
}

/// Settings of a cluster by key path below it. Its `{:?}` shows a setting whose key looks
/// secret (`client.sasl.password`) as `<secret>`: a debug line of the overrides leaks
/// nothing.
#[derive(Default, Clone)]
pub struct ClusterSettings(pub Vec<(Vec<String>, Value)>);

impl std::ops::Deref for ClusterSettings {
    type Target = Vec<(Vec<String>, Value)>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::fmt::Debug for ClusterSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(key, value)| {
                let key = key.join(".");
                let shown = if looks_secret(&key) {
                    "<secret>".to_string()
                } else {
                    format!("{value:?}")
                };
                (key, shown)
            }))
            .finish()
    }
}

impl Overrides {
    fn provider(&self) -> NamedDict {
        let mut dict = Dict::new();
        let web_config_file = self
            .web_config_file
            .as_ref()
            .map(|path| path.to_string_lossy().into_owned());
        let keys = [
            (&["interval"][..], &self.interval),
            (&["timeout"], &self.timeout),
            (&["web", "telemetry_path"], &self.telemetry_path),
            (&["web", "config_file"], &web_config_file),
            (&["log", "level"], &self.log_level),
            (&["log", "format"], &self.log_format),
        ];
        for (key, value) in keys {
            if let Some(value) = value {
                let path: Vec<String> = key.iter().map(|k| k.to_string()).collect();
                insert_path(&mut dict, &path, Value::from(value.clone()));
            }
        }
        if !self.listen_addresses.is_empty() {
            let path = ["web".to_string(), "listen_addresses".to_string()];
            insert_path(&mut dict, &path, Value::from(self.listen_addresses.clone()));
        }
        let cluster = [
            ("bootstrap_servers", &self.bootstrap_servers),
            ("name", &self.cluster_name),
        ];
        for (key, value) in cluster {
            if let Some(value) = value {
                let path = ["clusters".to_string(), "0".to_string(), key.to_string()];
                insert_path(&mut dict, &path, Value::from(value.clone()));
            }
        }
        for (key, value) in self.cluster_settings.iter() {
            let path: Vec<String> = ["clusters".to_string(), "0".to_string()]
                .into_iter()
                .chain(key.iter().cloned())
                .collect();
            insert_path(&mut dict, &path, value.clone());
        }
        NamedDict {
            name: FLAG_ORIGIN,
            dict,
        }
    }
}

// ---- raw (as written) configuration -------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    web: RawWeb,
    #[serde(default)]
    log: RawLog,
    #[serde(default = "default_interval")]
    interval: String,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default, deserialize_with = "indexed_list")]
    clusters: Vec<RawCluster>,
    #[serde(default)]
    ha: Option<RawHa>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHa {
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    cluster: Option<String>,
    #[serde(default = "default_session_timeout")]
    session_timeout: String,
    #[serde(default = "default_heartbeat_interval")]
    heartbeat_interval: String,
}

fn default_session_timeout() -> String {
    "10s".into()
}
fn default_heartbeat_interval() -> String {
    "2s".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWeb {
    #[serde(default = "default_listen_addresses", deserialize_with = "one_or_more")]
    listen_addresses: Vec<String>,
    #[serde(default = "default_telemetry_path")]
    telemetry_path: String,
    #[serde(default)]
    config_file: Option<PathBuf>,
}

impl Default for RawWeb {
    fn default() -> Self {
        Self {
            listen_addresses: default_listen_addresses(),
            telemetry_path: default_telemetry_path(),
            config_file: None,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLog {
    #[serde(default = "default_log_level")]
    level: String,
    #[serde(default = "default_log_format")]
    format: LogFormat,
}

impl Default for RawLog {
    fn default() -> Self {
        Self {
            level: default_log_level(),
            format: default_log_format(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCluster {
    #[serde(default = "default_cluster_name")]
    name: String,
    #[serde(default)]
    bootstrap_servers: Option<String>,
    #[serde(default)]
    topics: RawFilter,
    #[serde(default = "default_group_filter")]
    groups: RawGroups,
    #[serde(default)]
    client: BTreeMap<String, ClientValue>,
    /// Client properties read from files (secrets mounted by Kubernetes or Docker).
    #[serde(default)]
    client_files: BTreeMap<String, PathBuf>,
    #[serde(default, deserialize_with = "integer")]
    max_series: Option<i64>,
    #[serde(default)]
    priority_groups: Vec<String>,
    #[serde(default = "default_true", deserialize_with = "boolean")]
    transactions: bool,
    #[serde(default)]
    hanging_margin: Option<String>,
    #[serde(default)]
    stall_after: Option<String>,
    #[serde(default = "default_true", deserialize_with = "boolean")]
    transaction_list: bool,
    #[serde(default)]
    transaction_list_min_age: Option<String>,
    #[serde(default, deserialize_with = "integer")]
    transaction_list_detail: Option<i64>,
    #[serde(default = "default_true", deserialize_with = "boolean")]
    read_records: bool,
    #[serde(default = "default_true", deserialize_with = "boolean")]
    retention_configs: bool,
    #[serde(default, deserialize_with = "integer")]
    read_window: Option<i64>,
    #[serde(default)]
    granularity: Granularity,
    #[serde(default)]
    group_granularity: RawGroupGranularity,
    #[serde(default)]
    compat: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroupGranularity {
    #[serde(default)]
    partition: Vec<String>,
    #[serde(default)]
    topic: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFilter {
    #[serde(default = "match_all")]
    include: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
}

impl Default for RawFilter {
    /// Topics: everything except internal topics (`__consumer_offsets`, ...).
    fn default() -> Self {
        Self {
            include: match_all(),
            exclude: vec!["^__".to_string()],
        }
    }
}

/// Client properties are strings for librdkafka, but TOML users write numbers and booleans.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ClientValue {
    Text(String),
    Integer(i64),
    Bool(bool),
}

impl fmt::Display for ClientValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientValue::Text(s) => f.write_str(s),
            ClientValue::Integer(i) => write!(f, "{i}"),
            ClientValue::Bool(b) => write!(f, "{b}"),
        }
    }
}

fn default_listen_addresses() -> Vec<String> {
    vec![DEFAULT_LISTEN_ADDRESS.into()]
}
fn default_telemetry_path() -> String {
    DEFAULT_TELEMETRY_PATH.into()
}
fn default_interval() -> String {
    "15s".into()
}
fn default_log_format() -> LogFormat {
    LogFormat::Logfmt
}
fn default_log_level() -> String {
    "info".into()
}
/// An integer, also from an environment variable (whose value is text).
fn integer<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    struct Integer;
    impl serde::de::Visitor<'_> for Integer {
        type Value = Option<i64>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a whole number")
        }
        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Self::Value, E> {
            Ok(Some(n))
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Self::Value, E> {
            i64::try_from(n)
                .map(Some)
                .map_err(|_| E::custom(format!("{n} is too large")))
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
            text.trim()
                .parse()
                .map(Some)
                .map_err(|_| E::custom(format!("\"{text}\" is not a whole number")))
        }
    }
    deserializer.deserialize_any(Integer)
}

/// `true` or `false`, also from an environment variable (whose value is text).
fn boolean<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    struct Boolean;
    impl serde::de::Visitor<'_> for Boolean {
        type Value = bool;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("true or false")
        }
        fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<bool, E> {
            Ok(b)
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<bool, E> {
            match text.trim().to_ascii_lowercase().as_str() {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(E::custom(format!("\"{text}\" is neither true nor false"))),
            }
        }
    }
    deserializer.deserialize_any(Boolean)
}

/// A list of strings, or one string as a list of one (handy in an environment variable:
/// `KAFKA_LSO_EXPORTER_WEB__LISTEN_ADDRESSES=:9745`).
fn one_or_more<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMore {
        One(String),
        More(Vec<String>),
    }
    match OneOrMore::deserialize(deserializer) {
        Ok(OneOrMore::One(text)) => Ok(vec![text]),
        Ok(OneOrMore::More(list)) => Ok(list),
        Err(_) => Err(serde::de::Error::custom(
            "expected a list of addresses such as [\":9745\"], or one address",
        )),
    }
}

fn default_true() -> bool {
    true
}
fn default_cluster_name() -> String {
    "default".into()
}
fn match_all() -> Vec<String> {
    vec![".*".into()]
}
fn default_group_filter() -> RawGroups {
    RawGroups {
        include: match_all(),
        exclude: Vec::new(),
        abandon_after: None,
        assigned_only: false,
        rate_window: None,
        owner_labels: false,
    }
}

/// `clusters[].groups`: the filter, and how the groups are followed.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroups {
    #[serde(default = "match_all")]
    include: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
    #[serde(default)]
    abandon_after: Option<String>,
    #[serde(default, deserialize_with = "boolean")]
    assigned_only: bool,
    #[serde(default)]
    rate_window: Option<String>,
    #[serde(default, deserialize_with = "boolean")]
    owner_labels: bool,
}

/// `clusters` is a TOML array of tables in the file, but environment variables address it
/// by index (`KAFKA_LSO_EXPORTER_CLUSTERS__0__NAME`). The file is therefore read as a map
/// keyed by index (see [`IndexedToml`]) and turned back into a list here, in index order.
fn indexed_list<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct IndexedList<T>(std::marker::PhantomData<T>);

    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for IndexedList<T> {
        type Value = Vec<T>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of cluster tables")
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut list = Vec::new();
            while let Some(item) = seq.next_element()? {
                list.push(item);
            }
            Ok(list)
        }

        // Deserializing entry by entry (not through an intermediate type) keeps the
        // error path, so a bad field is reported as clusters[0].field.
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Vec<T>, A::Error> {
            let mut indexed = Vec::new();
            while let Some(key) = map.next_key::<String>()? {
                let index: usize = key.parse().map_err(|_| {
                    serde::de::Error::custom(format!(
                        "clusters are addressed by index (0, 1, ...), found \"{key}\""
                    ))
                })?;
                indexed.push((index, map.next_value()?));
            }
            indexed.sort_by_key(|(index, _)| *index);
            Ok(indexed.into_iter().map(|(_, value)| value).collect())
        }
    }

    deserializer.deserialize_any(IndexedList(std::marker::PhantomData))
}

/// A TOML file provider whose `clusters` array becomes a map keyed by index, so that
/// environment variables can override single fields of single clusters.
struct IndexedToml {
    path: PathBuf,
}

impl Provider for IndexedToml {
    fn metadata(&self) -> Metadata {
        Metadata::from("config file", self.path.as_path())
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let mut data = Toml::file_exact(&self.path).data()?;
        for dict in data.values_mut() {
            if let Some(Value::Array(tag, clusters)) = dict.remove("clusters") {
                let indexed: Dict = clusters
                    .into_iter()
                    .enumerate()
                    .map(|(index, cluster)| (index.to_string(), cluster))
                    .collect();
                dict.insert("clusters".into(), Value::Dict(tag, indexed));
            }
        }
        Ok(data)
    }
}

impl Config {
    /// Loads and validates the configuration.
    ///
    /// `file`: an explicit `--config` path (must exist), or `None` to read
    /// [`DEFAULT_CONFIG_FILE`] when present. `env` is the process environment (passed in
    /// so tests do not depend on the real one).
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        let mut figment = Figment::new();
        let path = match file {
            Some(path) => Some(path.to_path_buf()),
            None => Some(PathBuf::from(DEFAULT_CONFIG_FILE)).filter(|p| p.exists()),
        };
        if let Some(path) = &path {
            // Checked here so that a missing or unreadable file is its own clear error,
            // not a TOML error from the provider.
            if let Err(e) = std::fs::read_to_string(path) {
                return Err(ConfigError::Unreadable {
                    path: path.clone(),
                    reason: e.to_string(),
                });
            }
            figment = figment.merge(IndexedToml { path: path.clone() });
        }

        let (ignored_env, env): (Vec<_>, Vec<_>) = env
            .into_iter()
            .filter(|(k, _)| k.starts_with(ENV_PREFIX))
            .partition(|(k, v)| is_service_link(k, v));
        figment = figment.merge(env_provider(env));

        figment = figment.merge(overrides.provider());

        for (old, new, what) in RENAMED_KEYS {
            if figment.find_value(old).is_ok() {
                let origin = origin_of(&figment, &[old]);
                // Say it in the words of the layer it came from.
                let new = if origin.starts_with(ENV_ORIGIN) {
                    format!(
                        "{ENV_PREFIX}{}",
                        new.replace('.', "__").to_ascii_uppercase()
                    )
                } else {
                    new.to_string()
                };
                return Err(ConfigError::Invalid(format!(
                    "{old}: renamed to {new} ({what}) (from {origin})"
                )));
            }
        }

        let raw: RawConfig = figment.extract().map_err(|e| describe_figment_error(&e))?;
        let mut config = validate(raw, &figment)?;
        config.ignored_env = ignored_env.into_iter().map(|(k, _)| k).collect();
        config.ignored_env.sort();
        Ok(config)
    }
}

/// Whether `name` is one of the variables a kubelet injects for every Service of the
/// namespace (unless the pod sets `enableServiceLinks: false`), for a Service whose name
/// turns into our prefix: `kafka-lso-exporter` (the name the bundled manifests and the
/// chart give theirs) or `kafka-lso-exporter-<anything>`. Their shapes, for a Service
/// `NAME` with a port 9745 named `http`:
///
/// - `NAME_SERVICE_HOST=10.96.0.12`, `NAME_SERVICE_PORT=9745`, `NAME_SERVICE_PORT_HTTP=9745`;
/// - `NAME_PORT=tcp://10.96.0.12:9745`;
/// - `NAME_PORT_9745_TCP=tcp://10.96.0.12:9745`, and that with `_PROTO`, `_PORT`, `_ADDR`
///   (also for UDP and SCTP).
///
/// No setting has these names: settings are one word or words joined by `__`, which a
/// Service name never yields. `NAME_PORT` is a service link only with a value of its
/// shape, so that `KAFKA_LSO_EXPORTER_PORT=9745` (someone setting the listen port) is
/// still an unknown key, answered with the key that does it.
pub fn is_service_link(name: &str, value: &str) -> bool {
    let Some(rest) = name.strip_prefix(ENV_PREFIX) else {
        return false;
    };
    if rest.is_empty() || rest.contains("__") {
        return false;
    }
    let words: Vec<&str> = rest.split('_').collect();
    // A Service name may add words of its own (`kafka-lso-exporter-headless`); the shape
    // is in the last words.
    let ends = |tail: &[&str]| words.ends_with(tail);
    let number = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
    let protocol = |w: &str| matches!(w, "TCP" | "UDP" | "SCTP");
    let url = |v: &str| {
        ["tcp://", "udp://", "sctp://"]
            .iter()
            .any(|scheme| v.to_ascii_lowercase().starts_with(scheme))
    };
    if ends(&["SERVICE", "HOST"]) || ends(&["SERVICE", "PORT"]) {
        return true;
    }
    // NAME_SERVICE_PORT_<port name>: a port name is one or more words.
    if let Some(at) = words.windows(2).rposition(|w| w == ["SERVICE", "PORT"]) {
        if at + 2 < words.len() {
            return true;
        }
    }
    // NAME_PORT_<n>_<protocol>[_PROTO|_PORT|_ADDR]
    let n = words.len();
    let port_proto = |i: usize| {
        i >= 1 && words[i - 1] == "PORT" && number(words[i]) && i + 1 < n && protocol(words[i + 1])
    };
    if n >= 3 && port_proto(n - 2) {
        return true;
    }
    if n >= 4 && port_proto(n - 3) && matches!(words[n - 1], "PROTO" | "PORT" | "ADDR") {
        return true;
    }
    ends(&["PORT"]) && url(value)
}

/// Environment provider over an explicit list of variables (not the process environment).
///
/// Client properties are dotted librdkafka names, so their segment keeps its dots:
/// `KAFKA_LSO_EXPORTER_CLUSTERS__0__CLIENT__sasl.password`.
fn env_provider(vars: Vec<(String, String)>) -> NamedDict {
    let mut dict = Dict::new();
    for (key, value) in vars {
        let path: Vec<String> = key[ENV_PREFIX.len()..]
            .split("__")
            .map(|segment| segment.to_ascii_lowercase())
            .collect();
        insert_path(&mut dict, &path, parse_env_value(Value::from(value)));
    }
    NamedDict {
        name: ENV_ORIGIN,
        dict,
    }
}

const ENV_ORIGIN: &str = "environment variable";
const FLAG_ORIGIN: &str = "command-line flag";

/// The flag that sets each key, so that a message about a flag's value names the flag.
const FLAGS: &[(&[&str], &str)] = &[
    (&["web", "listen_addresses"], "--web.listen-address"),
    (&["web", "telemetry_path"], "--web.telemetry-path"),
    (&["web", "config_file"], "--web.config.file"),
    (&["log", "level"], "--log.level"),
    (&["log", "format"], "--log.format"),
    (&["interval"], "--interval"),
    (&["timeout"], "--timeout"),
    (
        &["clusters", "0", "bootstrap_servers"],
        "--bootstrap-servers",
    ),
    (&["clusters", "0", "name"], "--cluster-name"),
];

/// A provider of already-built values with a name saying where they came from.
struct NamedDict {
    name: &'static str,
    dict: Dict,
}

impl Provider for NamedDict {
    fn metadata(&self) -> Metadata {
        let metadata = Metadata::named(self.name);
        if self.name == ENV_ORIGIN {
            metadata.interpolater(|_profile, keys| {
                let keys: Vec<String> = keys.iter().map(|k| k.to_ascii_uppercase()).collect();
                format!("{ENV_PREFIX}{}", keys.join("__"))
            })
        } else {
            metadata
        }
    }

    fn data(&self) -> Result<Map<Profile, Dict>, figment::Error> {
        let mut map = Map::new();
        map.insert(Profile::Default, self.dict.clone());
        Ok(map)
    }
}

fn insert_path(dict: &mut Dict, path: &[String], value: Value) {
    match path {
        [] => {}
        [last] => {
            dict.insert(last.clone(), value);
        }
        [first, rest @ ..] => {
            let entry = dict
                .entry(first.clone())
                .or_insert_with(|| Value::from(Dict::new()));
            if !matches!(entry, Value::Dict(..)) {
                *entry = Value::from(Dict::new());
            }
            if let Value::Dict(_, inner) = entry {
                insert_path(inner, rest, value);
            }
        }
    }
}

/// Environment values are strings; lists (`topics.include`) are written as TOML arrays.
fn parse_env_value(value: Value) -> Value {
    match &value {
        Value::String(_, s) if s.trim().starts_with('[') => toml_array(s.trim()).unwrap_or(value),
        _ => value,
    }
}

fn toml_array(text: &str) -> Option<Value> {
    let doc = format!("v = {text}");
    let data = Toml::string(&doc).data().ok()?;
    data.get(&Profile::Default)?.get("v").cloned()
}

/// Renders a figment error as one line: the key, the problem, and where it came from.
fn describe_figment_error(error: &figment::Error) -> ConfigError {
    let key = if error.path.is_empty() {
        String::from("(top level)")
    } else {
        display_key(&error.path)
    };
    let origin = error
        .metadata
        .as_ref()
        .map(|m| describe_origin(m, &error.path))
        .unwrap_or_else(|| "defaults".to_string());
    // Type errors quote the value; never quote one that may be a credential.
    let problem = if error.path.iter().any(|segment| looks_secret(segment)) {
        "invalid value (not shown: it may be a secret)".to_string()
    } else if let figment::error::Kind::UnknownField(field, expected) = &error.kind {
        unknown_key(field, expected)
    } else if let figment::error::Kind::UnknownVariant(found, expected) = &error.kind {
        // figment quotes the list of choices as a whole: "expected ``topic` or `partition``".
        let choices = expected
            .iter()
            .map(|c| format!("`{c}`"))
            .collect::<Vec<_>>()
            .join(", ");
        format!("unknown value `{found}`; one of {choices}")
    } else {
        one_line(&error.kind.to_string())
    };
    ConfigError::Invalid(format!("{key}: {problem} (from {origin})"))
}

/// "unknown key", with the known key it is most likely a typo of, and a word for the
/// listen port that people look for as `port`.
fn unknown_key(field: &str, expected: &[&str]) -> String {
    let known = expected.join(", ");
    let near = expected
        .iter()
        .map(|k| (edit_distance(field, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min();
    match near {
        Some((_, k)) => format!("unknown key; did you mean {k}? (known here: {known})"),
        None if field == "port" && expected.contains(&"web") => format!(
            "unknown key; the port to serve on is web.listen_addresses \
             (KAFKA_LSO_EXPORTER_WEB__LISTEN_ADDRESSES=:9745) (known here: {known})"
        ),
        None => format!("unknown key (known here: {known})"),
    }
}

/// Levenshtein distance, for the few short keys of one table.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// TOML parse errors draw a multi-line picture; keep the words, drop the picture.
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.contains('|'))
        .collect::<Vec<_>>()
        .join(": ")
}

/// A setting whose value may be a secret (sasl.password, ssl.key.pem,
/// sasl.oauthbearer.config and its extensions, ...): never shown.
pub fn looks_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    [
        "password",
        "secret",
        "token",
        "key",
        "jaas",
        "credential",
        "oauthbearer.config",
        "extension",
    ]
    .iter()
    .any(|word| key.contains(word))
}

fn display_key(path: &[String]) -> String {
    let mut out = String::new();
    for segment in path {
        if segment.chars().all(|c| c.is_ascii_digit()) {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(segment);
        }
    }
    out
}

fn describe_origin(metadata: &Metadata, path: &[String]) -> String {
    let keys: Vec<&str> = path.iter().map(String::as_str).collect();
    match &metadata.source {
        Some(figment::Source::File(file)) => format!("{} {}", metadata.name, file.display()),
        _ if metadata.name == ENV_ORIGIN => {
            format!(
                "environment variable {}",
                metadata.interpolate(&Profile::Default, &keys)
            )
        }
        _ if metadata.name == FLAG_ORIGIN => {
            match FLAGS.iter().find(|(key, _)| keys.starts_with(key)) {
                Some((_, flag)) => format!("{FLAG_ORIGIN} {flag}"),
                None => FLAG_ORIGIN.to_string(),
            }
        }
        _ => metadata.name.to_string(),
    }
}

/// Where the value at `path` came from, for validation errors after extraction. Falls
/// back to the nearest parent: librdkafka property names contain dots.
fn origin_of(figment: &Figment, path: &[&str]) -> String {
    (1..=path.len())
        .rev()
        .find_map(|len| {
            let metadata = figment.find_metadata(&path[..len].join("."))?;
            let owned: Vec<String> = path[..len].iter().map(|s| s.to_string()).collect();
            Some(describe_origin(metadata, &owned))
        })
        .unwrap_or_else(|| "defaults".to_string())
}

fn invalid(figment: &Figment, path: &[&str], problem: impl fmt::Display) -> ConfigError {
    let owned: Vec<String> = path.iter().map(|s| s.to_string()).collect();
    ConfigError::Invalid(format!(
        "{}: {problem} (from {})",
        display_key(&owned),
        origin_of(figment, path)
    ))
}

fn parse_duration(figment: &Figment, key: &[&str], text: &str) -> Result<Duration, ConfigError> {
    parse_duration_up_to(figment, key, text, Duration::from_secs(3600), "1h")
}

/// `duration` (written `text`, at `key`) when it spans at least two sampling intervals.
fn at_least_two_intervals(
    figment: &Figment,
    key: &[&str],
    text: &str,
    duration: Duration,
    interval: Duration,
) -> Result<Duration, ConfigError> {
    if duration < 2 * interval {
        return Err(invalid(
            figment,
            key,
            format!(
                "{text} is shorter than two sampling intervals ({})",
                humantime::format_duration(2 * interval)
            ),
        ));
    }
    Ok(duration)
}

/// As [`parse_duration`], with a higher bound (`most`, written `most_text`).
fn parse_duration_up_to(
    figment: &Figment,
    key: &[&str],
    text: &str,
    most: Duration,
    most_text: &str,
) -> Result<Duration, ConfigError> {
    let duration = humantime::parse_duration(text).map_err(|e| {
        invalid(
            figment,
            key,
            format!("invalid duration \"{text}\" ({e}); write e.g. \"15s\" or \"1m\""),
        )
    })?;
    if duration < Duration::from_millis(100) || duration > most {
        return Err(invalid(
            figment,
            key,
            format!("{text} is out of range (100ms to {most_text})"),
        ));
    }
    Ok(duration)
}

fn validate(raw: RawConfig, figment: &Figment) -> Result<Config, ConfigError> {
    let web = validate_web(raw.web, figment)?;
    let interval = parse_duration(figment, &["interval"], &raw.interval)?;
    let timeout = match &raw.timeout {
        Some(text) => {
            let timeout = parse_duration(figment, &["timeout"], text)?;
            if timeout > interval {
                return Err(invalid(
                    figment,
                    &["timeout"],
                    format!("{text} is longer than interval {}", raw.interval),
                ));
            }
            timeout
        }
        None => interval,
    };
    if !is_log_level(&raw.log.level) {
        return Err(invalid(
            figment,
            &["log", "level"],
            format!(
                "\"{}\" is not a level (debug, info, warn, error) or a filter such as \
                 info,librdkafka=warn",
                raw.log.level
            ),
        ));
    }
    if raw.clusters.is_empty() {
        return Err(ConfigError::Invalid(
            "clusters: no cluster configured; add a [[clusters]] table to the config file \
             or pass --bootstrap-servers (from defaults)"
                .into(),
        ));
    }

    let mut clusters: Vec<ClusterConfig> = Vec::with_capacity(raw.clusters.len());
    for (index, cluster) in raw.clusters.into_iter().enumerate() {
        let idx = index.to_string();
        let key = |field: &'static str| -> [String; 3] {
            ["clusters".to_string(), idx.clone(), field.to_string()]
        };
        let at = |field: &'static str| {
            let k = key(field);
            move |problem: String| {
                let refs: Vec<&str> = k.iter().map(String::as_str).collect();
                invalid(figment, &refs, problem)
            }
        };
        if cluster.name.trim().is_empty() {
            return Err(at("name")("must not be empty".into()));
        }
        if clusters.iter().any(|c| c.name == cluster.name) {
            return Err(at("name")(format!(
                "duplicate cluster name \"{}\"",
                cluster.name
            )));
        }
        let bootstrap_servers = cluster.bootstrap_servers.unwrap_or_default();
        let servers = bootstrap_list(&bootstrap_servers);
        if servers.is_empty() {
            return Err(at("bootstrap_servers")(
                "no bootstrap servers; write host:port[,host:port...]".into(),
            ));
        }
        if let Some(bad) = servers.iter().find(|s| !looks_like_host_port(s)) {
            return Err(at("bootstrap_servers")(format!(
                "\"{bad}\" is not host:port"
            )));
        }
        let topics = filter(&cluster.topics, NameFilter::topics).map_err(|(field, e)| {
            let k = ["clusters", &idx, "topics", field];
            invalid(figment, &k, e)
        })?;
        let group_filter = RawFilter {
            include: cluster.groups.include.clone(),
            exclude: cluster.groups.exclude.clone(),
        };
        let groups = filter(&group_filter, NameFilter::new).map_err(|(field, e)| {
            let k = ["clusters", &idx, "groups", field];
            invalid(figment, &k, e)
        })?;
        let abandon_after = match &cluster.groups.abandon_after {
            Some(text) => {
                let k = ["clusters", &idx, "groups", "abandon_after"];
                // Offsets retention keeps an empty group's offsets 7 days by default.
                let abandon_after = parse_duration_up_to(
                    figment,
                    &k,
                    text,
                    Duration::from_secs(30 * 24 * 3600),
                    "30d",
                )?;
                at_least_two_intervals(figment, &k, text, abandon_after, interval)?
            }
            None => DEFAULT_ABANDON_AFTER,
        };
        let rate_window = match &cluster.groups.rate_window {
            Some(text) => {
                let k = ["clusters", &idx, "groups", "rate_window"];
                let window =
                    parse_duration_up_to(figment, &k, text, Duration::from_secs(24 * 3600), "24h")?;
                // Shorter, one sample would be all a rate has.
                at_least_two_intervals(figment, &k, text, window, interval)?
            }
            None => DEFAULT_RATE_WINDOW.max(2 * interval),
        };
        let group_settings = GroupSettings {
            abandon_after,
            assigned_only: cluster.groups.assigned_only,
            rate_window,
            owner_labels: cluster.groups.owner_labels,
        };
        let max_series = match cluster.max_series {
            None => None,
            Some(n) if n >= 100 => Some(n as usize),
            Some(n) => {
                return Err(at("max_series")(format!(
                    "{n} is too small; the limit counts every series of the cluster (at least 100)"
                )))
            }
        };
        let priority_groups = filter(
            &RawFilter {
                include: cluster.priority_groups,
                exclude: Vec::new(),
            },
            NameFilter::new,
        )
        .map_err(|(_, e)| at("priority_groups")(e))?;
        let hanging_margin = match &cluster.hanging_margin {
            Some(text) => {
                let k = key("hanging_margin");
                let refs: Vec<&str> = k.iter().map(String::as_str).collect();
                parse_duration(figment, &refs, text)?
            }
            None => DEFAULT_HANGING_MARGIN,
        };
        let stall_after = match &cluster.stall_after {
            Some(text) => {
                let k = key("stall_after");
                let refs: Vec<&str> = k.iter().map(String::as_str).collect();
                let stall_after = parse_duration(figment, &refs, text)?;
                // Shorter, a group that commits once per cycle would look stalled.
                at_least_two_intervals(figment, &refs, text, stall_after, interval)?
            }
            None => DEFAULT_STALL_AFTER.max(2 * interval),
        };
        let transaction_list_min_age = match &cluster.transaction_list_min_age {
            Some(text) => {
                let k = key("transaction_list_min_age");
                let refs: Vec<&str> = k.iter().map(String::as_str).collect();
                parse_duration(figment, &refs, text)?
            }
            None => DEFAULT_TRANSACTION_LIST_MIN_AGE,
        };
        let transaction_list_detail = match cluster.transaction_list_detail {
            None => DEFAULT_TRANSACTION_LIST_DETAIL,
            Some(n) if (0..=MAX_TRANSACTION_LIST_DETAIL as i64).contains(&n) => n as usize,
            Some(n) => {
                return Err(at("transaction_list_detail")(format!(
                    "{n} is out of range (0 to {MAX_TRANSACTION_LIST_DETAIL} transactions)"
                )))
            }
        };
        let read_window = match cluster.read_window {
            None => DEFAULT_READ_WINDOW,
            Some(n) if (0..=MAX_READ_WINDOW as i64).contains(&n) => n as u64,
            Some(n) => {
                return Err(at("read_window")(format!(
                    "{n} is out of range (0 to {MAX_READ_WINDOW} records)"
                )))
            }
        };
        let mut group_granularity = GroupGranularity::default();
        for (field, patterns, set) in [
            (
                "partition",
                &cluster.group_granularity.partition,
                &mut group_granularity.partition,
            ),
            (
                "topic",
                &cluster.group_granularity.topic,
                &mut group_granularity.topic,
            ),
        ] {
            *set = RegexSet::new(patterns).map_err(|e| {
                let k = ["clusters", &idx, "group_granularity", field];
                invalid(figment, &k, format!("invalid regex: {e}"))
            })?;
        }
        let mut compat_kafka_exporter = false;
        for name in &cluster.compat {
            match name.as_str() {
                "kafka_exporter" => compat_kafka_exporter = true,
                other => {
                    return Err(at("compat")(format!(
                    "\"{other}\" is not a compatibility set; the one there is: \"kafka_exporter\""
                )))
                }
            }
        }
        let mut client = BTreeMap::new();
        for (property, value) in cluster.client {
            if RESERVED_CLIENT_KEYS.contains(&property.as_str()) {
                let k = ["clusters", &idx, "client", &property];
                return Err(invalid(
                    figment,
                    &k,
                    "is set by the exporter and cannot be overridden".to_string(),
                ));
            }
            client.insert(property, value.to_string());
        }
        let mut from_files = Vec::new();
        for (property, path) in cluster.client_files {
            from_files.push(property.clone());
            let k = ["clusters", &idx, "client_files", &property];
            if RESERVED_CLIENT_KEYS.contains(&property.as_str()) {
                return Err(invalid(
                    figment,
                    &k,
                    "is set by the exporter and cannot be overridden".to_string(),
                ));
            }
            // The content is a secret: the error names the file, never what is in it.
            let value = std::fs::read_to_string(&path).map_err(|e| {
                invalid(figment, &k, format!("cannot read {}: {e}", path.display()))
            })?;
            client.insert(property, value.trim_end_matches(['\n', '\r']).to_string());
        }
        let mechanism = client
            .get("sasl.mechanism")
            .or(client.get("sasl.mechanisms"))
            .map(|m| m.trim());
        if mechanism.is_some_and(|m| m.eq_ignore_ascii_case(oauth::MECHANISM))
            && oauth::uses_sasl(&client)
        {
            if let Err((property, reason)) = TokenSource::from_properties(&client) {
                let table = if from_files.contains(&property) {
                    "client_files"
                } else {
                    "client"
                };
                let k = ["clusters", &idx, table, &property];
                return Err(invalid(figment, &k, reason));
            }
        }
        clusters.push(ClusterConfig {
            name: cluster.name,
            bootstrap_servers: servers.join(","),
            topics,
            groups,
            client: ClientProperties::new(client),
            max_series,
            priority_groups,
            transactions: cluster.transactions,
            hanging_margin,
            stall_after,
            transaction_list: cluster.transaction_list,
            transaction_list_min_age,
            transaction_list_detail,
            read_records: cluster.read_records,
            retention_configs: cluster.retention_configs,
            read_window,
            granularity: cluster.granularity,
            group_granularity,
            compat_kafka_exporter,
            group_settings,
        });
    }

    let ha = match raw.ha {
        Some(ha) => validate_ha(ha, figment)?,
        None => None,
    };
    Ok(Config {
        web,
        log: LogSettings {
            level: raw.log.level,
            format: raw.log.format,
        },
        interval,
        timeout,
        clusters,
        ha,
        ignored_env: Vec::new(),
    })
}

/// `[ha]`: no group (or an empty one) is a single replica.
fn validate_ha(raw: RawHa, figment: &Figment) -> Result<Option<HaSettings>, ConfigError> {
    let Some(group) = raw
        .group
        .map(|g| g.trim().to_string())
        .filter(|g| !g.is_empty())
    else {
        return Err(invalid(
            figment,
            &["ha", "group"],
            "missing: an [ha] section without a group would leave every replica serving every \
             cluster; name the group the replicas share, or remove [ha]"
                .to_string(),
        ));
    };
    if group.len() > 249 || group.chars().any(char::is_control) {
        return Err(invalid(
            figment,
            &["ha", "group"],
            "must be at most 249 printable characters".to_string(),
        ));
    }
    // Deprecated and ignored (each cluster coordinates its own share): accepted whatever
    // it names, with a warning at start and in --check-config.
    let cluster = raw.cluster;
    let session_timeout =
        parse_duration(figment, &["ha", "session_timeout"], &raw.session_timeout)?;
    let heartbeat_interval = parse_duration(
        figment,
        &["ha", "heartbeat_interval"],
        &raw.heartbeat_interval,
    )?;
    // The brokers' group.min.session.timeout.ms and group.max.session.timeout.ms
    // defaults bound what a coordinator accepts.
    if session_timeout < Duration::from_secs(6) || session_timeout > Duration::from_secs(1800) {
        return Err(invalid(
            figment,
            &["ha", "session_timeout"],
            format!(
                "{} is outside 6s..30m (the brokers' group.min/max.session.timeout.ms defaults)",
                raw.session_timeout
            ),
        ));
    }
    // At most a third: a heartbeat that runs into its deadline and the next one still
    // renew the membership in time.
    if heartbeat_interval.is_zero() || heartbeat_interval * 3 > session_timeout {
        return Err(invalid(
            figment,
            &["ha", "heartbeat_interval"],
            format!(
                "{} must be above 0 and at most a third of session_timeout {}",
                raw.heartbeat_interval, raw.session_timeout
            ),
        ));
    }
    Ok(Some(HaSettings {
        group,
        cluster,
        session_timeout,
        heartbeat_interval,
    }))
}

fn validate_web(raw: RawWeb, figment: &Figment) -> Result<WebSettings, ConfigError> {
    let key = ["web", "listen_addresses"];
    if raw.listen_addresses.is_empty() {
        return Err(invalid(figment, &key, "no address; write e.g. [\":9745\"]"));
    }
    let mut listen_addresses: Vec<ListenAddress> = Vec::new();
    for (index, text) in raw.listen_addresses.iter().enumerate() {
        let index = index.to_string();
        let at = ["web", "listen_addresses", &index];
        let address: ListenAddress = text.parse().map_err(|e| invalid(figment, &at, e))?;
        if listen_addresses.contains(&address) {
            return Err(invalid(figment, &at, format!("\"{text}\" is listed twice")));
        }
        listen_addresses.push(address);
    }
    let path = raw.telemetry_path;
    if let Err(problem) = check_telemetry_path(&path) {
        return Err(invalid(figment, &["web", "telemetry_path"], problem));
    }
    Ok(WebSettings {
        listen_addresses,
        telemetry_path: path,
        config_file: raw.config_file,
    })
}

/// A path the router can take as it is: no captures or wildcards (axum reads `{`, `*`
/// and `:` there), nothing a client would normalise away, none of the other pages.
fn check_telemetry_path(path: &str) -> Result<(), String> {
    let like = "write a path such as /metrics (letters, digits, - . _ ~ between slashes)";
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!("\"{path}\" does not start with /; {like}"));
    };
    if RESERVED_PATHS.contains(&path) {
        return Err(format!(
            "\"{path}\" is taken by another page of the exporter"
        ));
    }
    let segments: Vec<&str> = rest.split('/').collect();
    let last = segments.len() - 1;
    for (index, segment) in segments.iter().enumerate() {
        // A trailing slash is allowed (`/metrics/`), an empty segment elsewhere is not.
        let empty_ok = index == last && index > 0;
        let bad = (segment.is_empty() && !empty_ok)
            || matches!(*segment, "." | "..")
            || !segment
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~'));
        if bad {
            return Err(format!("\"{path}\": {like}"));
        }
    }
    Ok(())
}

/// A level, or a tracing filter whose bare words are levels: `info,librdkafka=warn` is
/// taken, and so is `loud=debug` (a target), but not `loud`, which tracing would read as
/// "everything of target loud" and so log almost nothing.
fn is_log_level(text: &str) -> bool {
    let bare_words_are_levels = text
        .split(',')
        .map(str::trim)
        .filter(|directive| !directive.is_empty() && !directive.contains(['=', '[']))
        .all(|word| {
            word.parse::<tracing_subscriber::filter::LevelFilter>()
                .is_ok()
        });
    !text.trim().is_empty()
        && bare_words_are_levels
        && tracing_subscriber::EnvFilter::try_new(text).is_ok()
}

fn looks_like_host_port(server: &str) -> bool {
    let server = server.rsplit("://").next().unwrap_or(server);
    match server.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0),
        None => false,
    }
}

fn filter(
    raw: &RawFilter,
    new: fn(&[String], &[String]) -> Result<NameFilter, regex::Error>,
) -> Result<NameFilter, (&'static str, String)> {
    for (field, patterns) in [("include", &raw.include), ("exclude", &raw.exclude)] {
        for pattern in patterns {
            if let Err(error) = regex::Regex::new(pattern) {
                // regex's syntax errors span several lines; keep the last, which says what.
                let text = error.to_string();
                let reason = text
                    .lines()
                    .last()
                    .unwrap_or_default()
                    .trim_start_matches("error: ");
                return Err((field, format!("bad regex \"{pattern}\": {reason}")));
            }
        }
    }
    new(&raw.include, &raw.exclude).map_err(|e| ("include", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loads `text` as the config file, without environment or flags.
    fn load(name: &str, text: &str) -> Config {
        let path = std::env::temp_dir().join(format!(
            "kafka-lso-exporter-config-{}-{name}.toml",
            std::process::id()
        ));
        std::fs::write(&path, text).unwrap();
        let loaded = Config::load(Some(&path), Vec::new(), &Overrides::default());
        let _ = std::fs::remove_file(&path);
        loaded.unwrap()
    }

    /// What replicas compare: the same settings however they were written (a file or
    /// the environment, "5m" or "300s", a default written out or left out, another
    /// password) give one text; a setting that shapes the series gives another.
    #[test]
    fn the_canonical_form_is_what_the_settings_mean_not_how_they_were_written() {
        let canonical =
            |config: &Config| config.clusters[0].canonical(config.interval, config.timeout);
        let file = load(
            "canonical-a",
            r#"
[[clusters]]
name = "prod"
bootstrap_servers = "kafka-1:9092,kafka-0:9092"
hanging_margin = "5m"
groups = { assigned_only = true }
[clusters.client]
"security.protocol" = "SASL_SSL"
"sasl.mechanisms" = "PLAIN"
"sasl.username" = "u"
"sasl.password" = "hunter2-secret"
"#,
        );
        let text = canonical(&file);
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains(r#""hanging_margin":300000"#), "{text}");
        let same = load(
            "canonical-b",
            r#"
[[clusters]]
bootstrap_servers = "kafka-0:9092, kafka-1:9092"
name = "prod"
hanging_margin = "300s"
transactions = true
groups = { assigned_only = true }
[clusters.client]
"sasl.password" = "another"
"security.protocol" = "SASL_SSL"
"sasl.username" = "u"
"sasl.mechanisms" = "PLAIN"
"#,
        );
        assert_eq!(canonical(&same), text);
        let env = |pairs: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| {
                    (
                        format!("KAFKA_LSO_EXPORTER_CLUSTERS__0__{k}"),
                        v.to_string(),
                    )
                })
                .collect();
            Config::load(None, vars, &Overrides::default()).unwrap()
        };
        let from_env = env(&[
            ("NAME", "prod"),
            ("BOOTSTRAP_SERVERS", "kafka-0:9092"),
            ("READ_RECORDS", "true"),
        ]);
        let from_file = load(
            "canonical-c",
            "[[clusters]]\nname = \"prod\"\nbootstrap_servers = \"kafka-0:9092\"\n",
        );
        assert_eq!(canonical(&from_env), canonical(&from_file));
        let other = env(&[
            ("NAME", "prod"),
            ("BOOTSTRAP_SERVERS", "kafka-0:9092"),
            ("TOPICS__INCLUDE", r#"["^orders$"]"#),
        ]);
        assert_ne!(canonical(&other), canonical(&from_file));
    }

    fn topics(name: &str, table: &str) -> NameFilter {
        let text =
            format!("[[clusters]]\nbootstrap_servers = \"localhost:9092\"\ntopics = {table}\n");
        load(name, &text).clusters[0].topics.clone()
    }

    #[test]
    fn the_topics_an_include_pattern_names_whole() {
        let filter = topics(
            "named",
            r#"{ include = ["^orders$", "^eu\\.payments$", "^audit.v1$", "invoices", "^ledger-.*", "^(a|b)$", "^__consumer_offsets$", "^dropped$"], exclude = ["^dropped$"] }"#,
        );
        assert_eq!(
            filter.named(),
            ["__consumer_offsets", "audit.v1", "eu.payments", "orders"]
        );
    }

    #[test]
    fn a_topics_table_keeps_internal_topics_out_unless_it_names_them() {
        // (topics table, accepted, refused)
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                r#"{ exclude = ["^test"] }"#,
                &["orders"],
                &["test-1", "__consumer_offsets", "__transaction_state"],
            ),
            (
                r#"{ include = [".*"], exclude = [] }"#,
                &["orders", "o__rders"],
                &["__consumer_offsets"],
            ),
            (
                r#"{ include = ["orders", "^__consumer_offsets$"] }"#,
                &["orders", "__consumer_offsets"],
                &["__transaction_state", "payments"],
            ),
            (
                r#"{ include = ["^__"], exclude = ["^__transaction"] }"#,
                &["__consumer_offsets", "__share_group_state"],
                &["__transaction_state", "orders"],
            ),
            (
                r#"{ include = [".*", "(?:__consumer_offsets)"] }"#,
                &["orders", "__consumer_offsets"],
                &["__transaction_state"],
            ),
        ];
        for (i, (table, accepted, refused)) in cases.iter().enumerate() {
            let filter = topics(&format!("topics-{i}"), table);
            for topic in *accepted {
                assert!(filter.accepts(topic), "{table} must accept {topic}");
            }
            for topic in *refused {
                assert!(!filter.accepts(topic), "{table} must refuse {topic}");
            }
        }
        // Groups have no internal names: a group called __x is a group like any other.
        let config = load(
            "groups",
            "[[clusters]]\nbootstrap_servers = \"localhost:9092\"\ngroups = { exclude = [\"^test\"] }\n",
        );
        assert!(config.clusters[0].groups.accepts("__x"));
    }

    #[test]
    fn no_secret_reaches_debug() {
        let config = load(
            "secrets",
            r#"
[[clusters]]
bootstrap_servers = "localhost:9092"
[clusters.client]
"security.protocol" = "SASL_SSL"
"sasl.username" = "exporter"
"sasl.password" = "hunter2-sasl"
"ssl.key.password" = "hunter2-key"
"sasl.oauthbearer.client.secret" = "hunter2-oauth"
"#,
        );
        let shown = format!("{config:?} {:?}", config.clusters[0]);
        for secret in ["hunter2-sasl", "hunter2-key", "hunter2-oauth"] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        // What is no secret still helps whoever reads the log, and the values still
        // reach the client.
        assert!(shown.contains(r#""sasl.username": "exporter""#), "{shown}");
        assert!(
            shown.contains(r#""sasl.password": "<redacted>""#),
            "{shown}"
        );
        let client = &config.clusters[0].client;
        assert_eq!(
            client.get("sasl.password").map(String::as_str),
            Some("hunter2-sasl")
        );
        assert_eq!(client.len(), 5);
    }
}

/// Property tests: any config file, environment and flags give a config or an error,
/// never a panic.
#[cfg(test)]
mod hostile {
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Writes `text` to a file of its own and loads it with `env` and `overrides`.
    fn load_text(
        text: &str,
        env: Vec<(String, String)>,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "kafka-lso-exporter-hostile-{}-{}.toml",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, text).unwrap();
        let loaded = Config::load(Some(&path), env, overrides);
        let _ = std::fs::remove_file(&path);
        loaded
    }

    const KEYS: &[&str] = &[
        "web",
        "listen_addresses",
        "telemetry_path",
        "config_file",
        "log",
        "level",
        "format",
        "listen",
        "interval",
        "timeout",
        "log_format",
        "log_level",
        "clusters",
        "0",
        "1",
        "18446744073709551615",
        "name",
        "bootstrap_servers",
        "topics",
        "groups",
        "include",
        "exclude",
        "client",
        "client_files",
        "max_series",
        "priority_groups",
        "transactions",
        "hanging_margin",
        "stall_after",
        "transaction_list",
        "transaction_list_min_age",
        "transaction_list_detail",
        "read_records",
        "retention_configs",
        "read_window",
        "granularity",
        "group_granularity",
        "partition",
        "topic",
        "compat",
        "sasl.password",
        "",
    ];

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => prop::sample::select(KEYS).prop_map(str::to_string),
            1 => "[a-z_.0-9]{1,8}",
        ]
    }

    /// A TOML value of any type, or one that looks like what the key wants.
    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|n| n.to_string()),
            any::<bool>().prop_map(|b| b.to_string()),
            "[ -~]{0,12}".prop_map(|s| format!("{s:?}")),
            prop::sample::select(
                &[
                    "\"15s\"",
                    "\"0s\"",
                    "\"99999999999999999999h\"",
                    "\"1h 1ns\"",
                    "\"[\"",
                    "\"(\"",
                    "\"a{99999}{99999}\"",
                    "\"host:9092\"",
                    "\"::1\"",
                    "\"0.0.0.0:0\"",
                    "\":9745\"",
                    "\"[::1]:0\"",
                    "[\":0\", \"127.0.0.1:0\"]",
                    "\"/metrics\"",
                    "\"/{x}\"",
                    "\"//\"",
                    "\"logfmt\"",
                    "[]",
                    "[\"^a\", \"(\"]",
                    "[1, true]",
                    "{}",
                    "{ include = [] }",
                    "\"json\"",
                    "\"trace,x=off\"",
                    "\"x=\"",
                    "100000",
                    "100001",
                    "-1",
                    "99",
                ][..]
            )
            .prop_map(str::to_string),
        ]
    }

    /// A config file of `[section]` headers and `key = value` lines, in any order.
    fn toml_file() -> impl Strategy<Value = String> {
        let line = prop_oneof![
            3 => (key(), value()).prop_map(|(k, v)| format!("{k:?} = {v}")),
            1 => prop::collection::vec(key(), 1..4).prop_map(|path| {
                let path: Vec<String> = path.iter().map(|k| format!("{k:?}")).collect();
                format!("[{}]", path.join("."))
            }),
            1 => Just("[[clusters]]".to_string()),
        ];
        prop::collection::vec(line, 0..12).prop_map(|lines| lines.join("\n"))
    }

    fn env_var() -> impl Strategy<Value = (String, String)> {
        (
            prop::collection::vec(key(), 1..5),
            prop_oneof![value(), "[ -~]{0,12}"],
        )
            .prop_map(|(path, value)| {
                let path: Vec<String> = path.iter().map(|k| k.to_ascii_uppercase()).collect();
                (format!("{ENV_PREFIX}{}", path.join("__")), value)
            })
    }

    fn overrides() -> impl Strategy<Value = Overrides> {
        let flag = || prop::option::of(prop_oneof![value(), "[ -~]{0,12}"]);
        (
            prop::collection::vec(prop_oneof![value(), "[ -~]{0,12}"], 0..3),
            (flag(), flag()),
            (flag(), flag(), flag(), flag(), flag(), flag()),
        )
            .prop_map(
                |(
                    listen_addresses,
                    (telemetry_path, web_config_file),
                    (interval, timeout, log_level, log_format, bootstrap_servers, cluster_name),
                )| {
                    Overrides {
                        listen_addresses,
                        telemetry_path,
                        web_config_file: web_config_file.map(PathBuf::from),
                        interval,
                        timeout,
                        log_level,
                        log_format,
                        bootstrap_servers,
                        cluster_name,
                        cluster_settings: Default::default(),
                    }
                },
            )
    }

    proptest! {
        #![proptest_config(crate::hostile::config(300))]

        #[test]
        fn arbitrary_text(text in "\\PC{0,200}") {
            let _ = load_text(&text, Vec::new(), &Overrides::default());
        }

        #[test]
        fn files_env_and_flags_of_any_values(
            text in toml_file(),
            env in prop::collection::vec(env_var(), 0..6),
            overrides in overrides(),
        ) {
            let _ = load_text(&text, env, &overrides);
        }

        /// The properties above would pass on a loader that refuses everything.
        #[test]
        fn a_sound_config_in_any_layer_loads(
            name in "[a-z][a-z0-9-]{0,10}",
            port in 1..65535u16,
            in_env in any::<bool>(),
        ) {
            let servers = format!("kafka-0:{port}");
            let (text, env) = if in_env {
                (String::new(), vec![
                    (format!("{ENV_PREFIX}CLUSTERS__0__NAME"), name.clone()),
                    (format!("{ENV_PREFIX}CLUSTERS__0__BOOTSTRAP_SERVERS"), servers.clone()),
                ])
            } else {
                (format!("[[clusters]]\nname = {name:?}\nbootstrap_servers = {servers:?}\n"), Vec::new())
            };
            let config = load_text(&text, env, &Overrides::default()).unwrap();
            prop_assert_eq!(&config.clusters[0].name, &name);
            prop_assert_eq!(&config.clusters[0].bootstrap_servers, &servers);
        }
    }
}
