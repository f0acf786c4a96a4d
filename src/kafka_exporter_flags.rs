//! kafka_exporter's command line, so that this exporter's image runs where kafka_exporter's
//! did without a change to how it is started: the prometheus-community
//! `prometheus-kafka-exporter` chart (its Deployment passes kafka_exporter's flags) and
//! Strimzi's `spec.kafkaExporter` (its run script, `/opt/kafka-exporter/kafka_exporter_run.sh`
//! in the image, turns the operator's environment into the same flags).
//!
//! A command line with any flag only kafka_exporter has (`--kafka.server`, `--topic.filter`,
//! `--verbosity`, ...) is read as kafka_exporter 1.9 reads it: `--flag=value` or
//! `--flag value`, a boolean as `--flag`, `--no-flag` or `--flag=true|false`, `--kafka.server`
//! repeated. Each flag either becomes the setting with the same effect (one cluster, the
//! kafka_exporter metric families on, `:9308` unless `--web.listen-address` says otherwise)
//! or, where this exporter has nothing with that effect, the command line is refused
//! naming the flag and why (exit code 2): never ignored. [`TAKEN`] and [`NOT_TAKEN`] are
//! the lists docs/platforms/kafka-exporter.md prints.

use std::ffi::OsString;

use figment::value::Value;

use crate::config::Overrides;

/// The flags of kafka_exporter 1.9 that are taken, with what each becomes.
pub const TAKEN: &[(&str, &str)] = &[
    ("kafka.server", "the cluster's bootstrap servers (repeatable)"),
    ("topic.filter", "topics.include"),
    ("topic.exclude",
        "topics.exclude (kafka_exporter's default ^$, or empty, excludes nothing)",
    ),
    ("group.filter", "groups.include"),
    ("group.exclude", "groups.exclude (^$, or empty, excludes nothing)"),
    ("tls.enabled", "security.protocol SSL (SASL_SSL with --sasl.enabled)"),
    ("tls.ca-file", "ssl.ca.location (every certificate of the file is trusted)"),
    ("tls.cert-file", "ssl.certificate.location"),
    ("tls.key-file", "ssl.key.location"),
    (
        "tls.insecure-skip-tls-verify",
        "enable.ssl.certificate.verification false, ssl.endpoint.identification.algorithm none",
    ),
    ("sasl.enabled", "security.protocol SASL_PLAINTEXT (SASL_SSL with --tls.enabled)"),
    (
        "sasl.mechanism",
        "sasl.mechanisms: plain, scram-sha256, scram-sha512, gssapi, awsiam (OAUTHBEARER with sasl.oauthbearer.method aws_msk_iam)",
    ),
    ("sasl.username", "sasl.username"),
    ("sasl.password",
        "sasl.password (else the variable SASL_USER_PASSWORD, which keeps it off the command line)",
    ),
    ("sasl.handshake", "true only: Kafka 1.0 and later always handshake"),
    ("sasl.aws-region", "sasl.oauthbearer.aws.region"),
    ("sasl.service-name", "sasl.kerberos.service.name"),
    ("sasl.realm", "the realm of sasl.kerberos.principal (sasl.username@realm)"),
    ("sasl.keytab-path", "sasl.kerberos.keytab"),
    ("sasl.kerberos-config-path", "KRB5_CONFIG"),
    ("sasl.kerberos-auth-type", "keytabAuth, required with gssapi: a password login is refused"),
    ("web.listen-address", "--web.listen-address (default :9308 here)"),
    ("web.telemetry-path", "--web.telemetry-path"),
    ("log.level", "--log.level"),
    ("log.format", "--log.format"),
    ("verbosity", "1: --log.level debug, 2 and more: trace; 0 changes nothing"),
    ("log.enable-sarama",
        "librdkafka's log lines shown from debug level up (log.level ...,librdkafka=debug)",
    ),
    ("kafka.version", "nothing to do: every request's version is negotiated with the brokers"),
    ("refresh.metadata", "nothing to do: metadata is read every cycle (--interval)"),
    ("concurrent.enable", "nothing to do: scrapes never start a collection, every scrape reads the last cycle"),
    ("topic.workers", "nothing to do: requests are batched per broker, there are no workers to size"),
    (
        "offset.show-all",
        "true: every committed partition (the default); false: groups.assigned_only: a partition no member has owned and whose offset has stood still for groups.abandon_after (24 h) loses its series, also in a group without members (kafka_exporter keeps those)",
    ),
    ("kafka.allow-auto-topic-creation", "false only: the exporter never creates topics"),
];

/// The flags of kafka_exporter 1.9 that are refused, with why.
pub const NOT_TAKEN: &[(&str, &str)] = &[
    (
        "kafka.labels",
        "no constant labels on every series: add them with the scrape's relabelings (the chart's prometheus.serviceMonitor.relabelings)",
    ),
    (
        "tls.server-name",
        "leave it out (the chart's tls.serverName empty): the brokers' certificates are checked against the host names of --kafka.server and of the brokers' advertised listeners, which their subjectAltNames must hold",
    ),
    (
        "sasl.disable-PA-FX-FAST",
        "Kerberos goes through the system's GSS-API library and its krb5.conf",
    ),
    (
        "sasl.oauthbearer-token-url",
        "OAUTHBEARER is configured with sasl.oauthbearer.* in the config file",
    ),
    (
        "server.tls.enabled",
        "HTTPS: --web.config.file, the exporter-toolkit's web config",
    ),
    (
        "server.tls.mutual-auth-enabled",
        "client certificates: --web.config.file (client_auth_type)",
    ),
    ("server.tls.ca-file", "--web.config.file (client_ca_file)"),
    ("server.tls.cert-file", "--web.config.file (cert_file)"),
    ("server.tls.key-file", "--web.config.file (key_file)"),
    (
        "use.consumelag.zookeeper",
        "Kafka 3.9 and later keep no offsets in ZooKeeper",
    ),
    (
        "zookeeper.server",
        "Kafka 3.9 and later keep no offsets in ZooKeeper",
    ),
];

/// This exporter's own flags, also taken in this mode (after kafka_exporter's).
const OWN: &[&str] = &[
    "config",
    "cluster-name",
    "interval",
    "timeout",
    "web.config.file",
    "check-config",
    "connect",
];

/// The flags that may be given more than once (each adds); any other repeated is refused,
/// as kafka_exporter's parser refuses it.
const REPEATABLE: &[&str] = &["kafka.server", "web.listen-address"];

const BOOLEAN: &[&str] = &[
    "tls.enabled",
    "tls.insecure-skip-tls-verify",
    "sasl.enabled",
    "sasl.handshake",
    "sasl.disable-PA-FX-FAST",
    "log.enable-sarama",
    "offset.show-all",
    "kafka.allow-auto-topic-creation",
    "server.tls.enabled",
    "server.tls.mutual-auth-enabled",
    "use.consumelag.zookeeper",
    "concurrent.enable",
    "check-config",
    "connect",
];

/// The address kafka_exporter listens on by default.
pub const DEFAULT_LISTEN: &str = ":9308";

/// A kafka_exporter command line, read.
#[derive(Debug, Default)]
pub struct Translation {
    pub overrides: Overrides,
    pub config: Option<std::path::PathBuf>,
    pub check_config: bool,
    pub connect: bool,
    /// Variables to set before anything starts (`KRB5_CONFIG`).
    pub env: Vec<(String, String)>,
    /// What the flags became, for one log line at start.
    pub notes: Vec<String>,
}

/// The flag's name without dashes, `no-` and `=value`.
fn name_of(arg: &str) -> Option<&str> {
    let flag = arg.strip_prefix("--")?;
    let flag = flag.split_once('=').map_or(flag, |(name, _)| name);
    Some(flag)
}

fn known(name: &str) -> bool {
    TAKEN.iter().chain(NOT_TAKEN).any(|(flag, _)| *flag == name)
}

/// Whether the command line is kafka_exporter's: it names a flag only kafka_exporter has
/// (its `--web.*` and `--log.*` flags are this exporter's too).
pub fn applies(args: &[OsString]) -> bool {
    args.iter()
        .skip(1)
        .filter_map(|arg| arg.to_str())
        .take_while(|arg| *arg != "--")
        .filter_map(name_of)
        .map(|name| {
            name.strip_prefix("no-")
                .filter(|n| BOOLEAN.contains(n))
                .unwrap_or(name)
        })
        .any(|name| {
            known(name)
                && !name.starts_with("web.")
                && !name.starts_with("log.level")
                && name != "log.format"
        })
}

/// The value of a flag given at most once (a repeated one is refused before).
fn value<'a>(flags: &'a [(String, String)], name: &str) -> Option<&'a str> {
    flags
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Every value of a flag that adds (`--kafka.server`, `--web.listen-address`).
fn values<'a>(flags: &'a [(String, String)], name: &str) -> Vec<&'a str> {
    flags
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .collect()
}

fn boolean(flag: &str, value: Option<&str>) -> Result<bool, String> {
    match value {
        None => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(format!("--{flag}={v}: a boolean is true or false")),
    }
}

/// The flags as (name, value): booleans as "true"/"false", the rest as given.
fn parse(args: &[String]) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let Some(flag) = arg.strip_prefix("--") else {
            return Err(format!(
                "{arg:?}: kafka_exporter's command line takes no arguments that are not flags"
            ));
        };
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (flag, None),
        };
        if let Some(positive) = name.strip_prefix("no-").filter(|n| BOOLEAN.contains(n)) {
            if inline.is_some() {
                return Err(format!("--{name} takes no value"));
            }
            out.push((positive.to_string(), "false".to_string()));
            continue;
        }
        if BOOLEAN.contains(&name) {
            out.push((name.to_string(), boolean(name, inline)?.to_string()));
            continue;
        }
        if !known(name) && !OWN.contains(&name) {
            return Err(format!(
                "--{name} is neither a flag of kafka_exporter 1.9 nor one of this exporter's taken with them (see docs/platforms/kafka-exporter.md)"
            ));
        }
        let value = match inline {
            Some(value) => value.to_string(),
            None => rest
                .next()
                .ok_or_else(|| format!("--{name} needs a value"))?
                .clone(),
        };
        out.push((name.to_string(), value));
    }
    Ok(out)
}

/// Reads a kafka_exporter command line (without the program name). `env` answers
/// `SASL_USER_PASSWORD`, which kafka_exporter reads when `--sasl.password` is empty.
pub fn translate(
    args: &[String],
    env: impl Fn(&str) -> Option<String>,
) -> Result<Translation, String> {
    let flags = parse(args)?;
    for (index, (name, _)) in flags.iter().enumerate() {
        if !REPEATABLE.contains(&name.as_str()) && flags[..index].iter().any(|(n, _)| n == name) {
            return Err(format!(
                "--{name} is given more than once (only --kafka.server and --web.listen-address add)"
            ));
        }
    }
    let refused: Vec<String> = flags
        .iter()
        .filter_map(|(name, value)| {
            let why = NOT_TAKEN.iter().find(|(flag, _)| flag == name)?.1;
            // A refused boolean at its default changes nothing.
            let default_false = BOOLEAN.contains(&name.as_str()) && value == "false";
            (!default_false).then(|| format!("--{name} ({why})"))
        })
        .collect();
    if !refused.is_empty() {
        return Err(format!(
            "kafka_exporter flags this exporter does not take: {}",
            refused.join("; ")
        ));
    }
    let last = |name: &str| value(&flags, name);
    let set = |name: &str| last(name) == Some("true");
    let mut t = Translation::default();
    let mut settings: Vec<(Vec<&str>, Value)> = Vec::new();

    let servers = values(&flags, "kafka.server");
    // kafka_exporter's defaults, unless a config file may say otherwise.
    let with_file = last("config").is_some();
    t.overrides.bootstrap_servers = match (servers.is_empty(), with_file) {
        (false, _) => Some(servers.join(",")),
        (true, false) => Some("kafka:9092".to_string()),
        (true, true) => None,
    };
    t.overrides.cluster_name = last("cluster-name").map(str::to_string);
    settings.push((
        vec!["compat"],
        Value::from(vec!["kafka_exporter".to_string()]),
    ));
    for (flag, key) in [
        ("topic.filter", ["topics", "include"]),
        ("topic.exclude", ["topics", "exclude"]),
        ("group.filter", ["groups", "include"]),
        ("group.exclude", ["groups", "exclude"]),
    ] {
        if let Some(pattern) = last(flag) {
            regex::Regex::new(pattern).map_err(|e| format!("--{flag}={pattern}: {e}"))?;
            // kafka_exporter's exclude default matches nothing.
            if !(flag.ends_with("exclude") && (pattern == "^$" || pattern.is_empty())) {
                settings.push((key.to_vec(), Value::from(vec![pattern.to_string()])));
            }
        }
    }

    let client = translate_security(&flags, &env, &mut t)?;
    if set("kafka.allow-auto-topic-creation") {
        return Err("--kafka.allow-auto-topic-creation: the exporter never creates topics".into());
    }
    if last("offset.show-all") == Some("false") {
        settings.push((vec!["groups", "assigned_only"], Value::from(true)));
        t.notes
            .push("--no-offset.show-all: groups.assigned_only".into());
    }
    if let Some(version) = last("kafka.version") {
        t.notes.push(format!(
            "--kafka.version={version} is not needed: each request's version is negotiated with the brokers"
        ));
    }

    let listen: Vec<String> = values(&flags, "web.listen-address")
        .into_iter()
        .map(str::to_string)
        .collect();
    t.overrides.listen_addresses = if listen.is_empty() && !with_file {
        vec![DEFAULT_LISTEN.to_string()]
    } else {
        listen
    };
    t.overrides.telemetry_path = last("web.telemetry-path").map(str::to_string);
    t.overrides.log_format = last("log.format").map(str::to_string);
    t.overrides.log_level = log_level(&flags)?;
    t.overrides.interval = last("interval").map(str::to_string);
    t.overrides.timeout = last("timeout").map(str::to_string);
    t.overrides.web_config_file = last("web.config.file").map(Into::into);
    t.config = last("config").map(Into::into);
    t.check_config = set("check-config");
    t.connect = set("connect");
    if t.connect && !t.check_config {
        return Err("--connect needs --check-config".into());
    }
    for flag in ["refresh.metadata", "concurrent.enable", "topic.workers"] {
        if let Some(value) = last(flag) {
            let what = TAKEN
                .iter()
                .find(|(f, _)| *f == flag)
                .map_or("", |(_, w)| *w);
            t.notes
                .push(format!("--{flag}={value} changes nothing here: {what}"));
        }
    }

    for (key, value) in client {
        settings.push((vec!["client", key], Value::from(value)));
    }
    t.overrides.cluster_settings = crate::config::ClusterSettings(
        settings
            .into_iter()
            .map(|(key, value)| (key.into_iter().map(str::to_string).collect(), value))
            .collect(),
    );
    Ok(t)
}

/// `security.protocol` and the TLS and SASL client properties of `--tls.*` and `--sasl.*`.
fn translate_security(
    flags: &[(String, String)],
    env: &impl Fn(&str) -> Option<String>,
    t: &mut Translation,
) -> Result<Vec<(&'static str, String)>, String> {
    let last = |name: &str| value(flags, name);
    let set = |name: &str| last(name) == Some("true");
    let mut client: Vec<(&'static str, String)> = Vec::new();
    let tls = set("tls.enabled");
    let sasl = set("sasl.enabled");
    let protocol = match (tls, sasl) {
        (false, false) => None,
        (true, false) => Some("SSL"),
        (false, true) => Some("SASL_PLAINTEXT"),
        (true, true) => Some("SASL_SSL"),
    };
    if let Some(protocol) = protocol {
        client.push(("security.protocol", protocol.to_string()));
    }
    for (flag, property) in [
        ("tls.ca-file", "ssl.ca.location"),
        ("tls.cert-file", "ssl.certificate.location"),
        ("tls.key-file", "ssl.key.location"),
    ] {
        if let Some(path) = last(flag).filter(|p| !p.is_empty()) {
            if !tls {
                return Err(format!("--{flag} without --tls.enabled"));
            }
            client.push((property, path.to_string()));
        }
    }
    if set("tls.insecure-skip-tls-verify") {
        client.push(("enable.ssl.certificate.verification", "false".to_string()));
        client.push(("ssl.endpoint.identification.algorithm", "none".to_string()));
    }
    if sasl {
        translate_sasl(flags, env, &mut client, t)?;
    } else if let Some((name, _)) = flags.iter().find(|(n, v)| {
        n.starts_with("sasl.") && n != "sasl.handshake" && n != "sasl.enabled" && !v.is_empty()
    }) {
        return Err(format!("--{name} without --sasl.enabled"));
    }
    if last("sasl.handshake") == Some("false") {
        return Err("--sasl.handshake=false: librdkafka always sends SaslHandshake (Kafka 1.0 and later need it)".into());
    }
    Ok(client)
}

/// `--log.level`, with `--verbosity` (kafka_exporter's log level) and `--log.enable-sarama`.
fn log_level(flags: &[(String, String)]) -> Result<Option<String>, String> {
    let last = |name: &str| value(flags, name);
    let verbosity: u32 = match last("verbosity") {
        Some(v) => v
            .parse()
            .map_err(|_| format!("--verbosity={v}: a number (0 info, 1 debug, 2 trace)"))?,
        None => 0,
    };
    let mut level = last("log.level").map(str::to_string);
    if verbosity > 0 {
        level = Some(if verbosity == 1 { "debug" } else { "trace" }.to_string());
    }
    if last("log.enable-sarama") == Some("true") {
        level = Some(format!(
            "{},librdkafka=debug",
            level.as_deref().unwrap_or("info")
        ));
    }
    Ok(level)
}

fn translate_sasl(
    flags: &[(String, String)],
    env: &impl Fn(&str) -> Option<String>,
    client: &mut Vec<(&'static str, String)>,
    t: &mut Translation,
) -> Result<(), String> {
    let last = |name: &str| value(flags, name);
    let username = last("sasl.username").filter(|v| !v.is_empty());
    let password = last("sasl.password")
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .or_else(|| env("SASL_USER_PASSWORD").filter(|v| !v.is_empty()));
    let mechanism = last("sasl.mechanism").unwrap_or("").to_ascii_lowercase();
    // A flag of another mechanism than the one chosen.
    let kerberos = [
        "sasl.service-name",
        "sasl.realm",
        "sasl.keytab-path",
        "sasl.kerberos-config-path",
        "sasl.kerberos-auth-type",
        "sasl.disable-PA-FX-FAST",
    ];
    let foreign = flags.iter().find(|(n, v)| {
        !v.is_empty()
            && v != "false"
            && ((kerberos.contains(&n.as_str()) && mechanism != "gssapi")
                || (n == "sasl.aws-region" && mechanism != "awsiam"))
    });
    if let Some((name, _)) = foreign {
        return Err(format!(
            "--{name} with --sasl.mechanism={mechanism}: it belongs to another mechanism"
        ));
    }
    match mechanism.as_str() {
        "plain" | "scram-sha256" | "scram-sha512" => {
            let name = match mechanism.as_str() {
                "plain" => "PLAIN",
                "scram-sha256" => "SCRAM-SHA-256",
                _ => "SCRAM-SHA-512",
            };
            client.push(("sasl.mechanisms", name.to_string()));
            let (Some(username), Some(password)) = (username, password) else {
                return Err(format!("--sasl.mechanism={mechanism} needs --sasl.username and --sasl.password (or SASL_USER_PASSWORD)"));
            };
            client.push(("sasl.username", username.to_string()));
            client.push(("sasl.password", password));
        }
        "awsiam" => {
            client.push(("sasl.mechanisms", "OAUTHBEARER".to_string()));
            client.push(("sasl.oauthbearer.method", "aws_msk_iam".to_string()));
            if let Some(region) = last("sasl.aws-region").filter(|v| !v.is_empty()) {
                client.push(("sasl.oauthbearer.aws.region", region.to_string()));
            }
        }
        "gssapi" => {
            client.push(("sasl.mechanisms", "GSSAPI".to_string()));
            // kafka_exporter logs in with the password unless the type is keytabAuth.
            let kind = last("sasl.kerberos-auth-type").unwrap_or("");
            if kind != "keytabAuth" {
                return Err(format!(
                    "--sasl.kerberos-auth-type={kind:?}: only keytabAuth (with --sasl.keytab-path) is taken; a Kerberos password login needs kinit outside the exporter"
                ));
            }
            if let Some(service) = last("sasl.service-name").filter(|v| !v.is_empty()) {
                client.push(("sasl.kerberos.service.name", service.to_string()));
            }
            if let Some(keytab) = last("sasl.keytab-path").filter(|v| !v.is_empty()) {
                client.push(("sasl.kerberos.keytab", keytab.to_string()));
            }
            match (username, last("sasl.realm").filter(|v| !v.is_empty())) {
                (Some(username), Some(realm)) => {
                    client.push(("sasl.kerberos.principal", format!("{username}@{realm}")))
                }
                (Some(username), None) => {
                    client.push(("sasl.kerberos.principal", username.to_string()))
                }
                (None, Some(_)) => return Err("--sasl.realm without --sasl.username".into()),
                (None, None) => {}
            }
            if let Some(path) = last("sasl.kerberos-config-path").filter(|v| !v.is_empty()) {
                t.env.push(("KRB5_CONFIG".to_string(), path.to_string()));
            }
        }
        "" => return Err("--sasl.enabled needs --sasl.mechanism (plain, scram-sha256, scram-sha512, gssapi or awsiam), as kafka_exporter does".into()),
        other => return Err(format!("--sasl.mechanism={other}: one of plain, scram-sha256, scram-sha512, gssapi, awsiam")),
    }
    Ok(())
}

/// The help of this mode: what each kafka_exporter flag becomes, and what is refused.
pub fn help() -> String {
    let mut text = String::from(
        "kafka-lso-exporter, started with kafka_exporter's flags (docs/platforms/kafka-exporter.md):\n\ntaken:\n",
    );
    for (flag, what) in TAKEN {
        text.push_str(&format!("  --{flag:<34} {what}\n"));
    }
    text.push_str("\nrefused (exit code 2, naming the flag):\n");
    for (flag, why) in NOT_TAKEN {
        text.push_str(&format!("  --{flag:<34} {why}\n"));
    }
    text.push_str("\nalso: --config, --cluster-name, --interval, --timeout, --web.config.file, --check-config, --connect\n");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn a_debug_line_of_the_overrides_hides_the_password() {
        let t = translate(
            &args(
                "--kafka.server=k:9093 --sasl.enabled --sasl.mechanism=scram-sha512 \
                 --sasl.username=u --sasl.password=hunter2",
            ),
            |_| None,
        )
        .unwrap();
        let shown = format!("{:?}", t.overrides);
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            shown.contains("(\"client.sasl.password\", \"<secret>\")"),
            "{shown}"
        );
        assert!(shown.contains("client.sasl.username"), "{shown}");
    }

    fn setting<'a>(t: &'a Translation, key: &str) -> Option<&'a Value> {
        t.overrides
            .cluster_settings
            .iter()
            .find(|(k, _)| k.join(".") == key)
            .map(|(_, v)| v)
    }

    fn text(t: &Translation, key: &str) -> Option<String> {
        setting(t, key).and_then(|v| v.as_str().map(str::to_string))
    }

    /// The command line Strimzi's run script builds (defaults, with excludes and logging).
    #[test]
    fn strimzis_command_line_becomes_one_mutual_tls_cluster_on_9404() {
        let t = translate(
            &args(
                "--group.filter=orders-.* --topic.filter=orders.* --group.exclude=^test --topic.exclude=^tmp \
                 --tls.enabled --tls.ca-file=/etc/kafka-exporter/cluster-ca-certs/cluster-ca.crt \
                 --tls.cert-file=/etc/kafka-exporter/kafka-exporter-certs/kafka-exporter.crt \
                 --tls.key-file=/etc/kafka-exporter/kafka-exporter-certs/kafka-exporter.key \
                 --kafka.server=my-cluster-kafka-bootstrap:9091 --web.listen-address=:9404 --verbosity=1 \
                 --kafka.version=4.1.0",
            ),
            |_| None,
        )
        .unwrap();
        assert_eq!(
            t.overrides.bootstrap_servers.as_deref(),
            Some("my-cluster-kafka-bootstrap:9091")
        );
        assert_eq!(t.overrides.listen_addresses, vec![":9404"]);
        assert_eq!(t.overrides.log_level.as_deref(), Some("debug"));
        assert_eq!(text(&t, "client.security.protocol").as_deref(), Some("SSL"));
        assert_eq!(
            text(&t, "client.ssl.ca.location").as_deref(),
            Some("/etc/kafka-exporter/cluster-ca-certs/cluster-ca.crt")
        );
        assert_eq!(
            text(&t, "client.ssl.key.location").as_deref(),
            Some("/etc/kafka-exporter/kafka-exporter-certs/kafka-exporter.key")
        );
        assert!(setting(&t, "compat").is_some());
        assert!(setting(&t, "groups.include").is_some() && setting(&t, "topics.exclude").is_some());
        assert!(t.notes.iter().any(|n| n.contains("--kafka.version=4.1.0")));
    }

    /// The prometheus-kafka-exporter chart with TLS and SCRAM.
    #[test]
    fn the_charts_tls_and_scram_command_line() {
        let t = translate(
            &args(
                "--verbosity=0 --kafka.server=a:9093 --kafka.server=b:9093 --tls.enabled \
                 --tls.ca-file=/certs/ca.crt --tls.cert-file=/certs/tls.crt --tls.key-file=/certs/tls.key \
                 --log.format=json",
            ),
            |_| None,
        )
        .unwrap();
        assert_eq!(t.overrides.log_format.as_deref(), Some("json"));
        assert_eq!(
            t.overrides.bootstrap_servers.as_deref(),
            Some("a:9093,b:9093")
        );
        assert_eq!(t.overrides.listen_addresses, vec![DEFAULT_LISTEN]);
        assert_eq!(t.overrides.log_level, None);
        let scram = translate(
            &args(
                "--verbosity=0 --kafka.server=a:9093 --tls.enabled --sasl.enabled --sasl.username=u \
                 --sasl.password=p --sasl.mechanism=scram-sha512",
            ),
            |_| None,
        )
        .unwrap();
        assert_eq!(
            text(&scram, "client.security.protocol").as_deref(),
            Some("SASL_SSL")
        );
        assert_eq!(
            text(&scram, "client.sasl.mechanisms").as_deref(),
            Some("SCRAM-SHA-512")
        );
        assert_eq!(text(&scram, "client.sasl.password").as_deref(), Some("p"));
        let from_env = translate(
            &args("--kafka.server=a:9093 --sasl.enabled --sasl.username=u --sasl.mechanism=plain"),
            |name| (name == "SASL_USER_PASSWORD").then(|| "secret".to_string()),
        )
        .unwrap();
        assert_eq!(
            text(&from_env, "client.sasl.password").as_deref(),
            Some("secret")
        );
        assert_eq!(
            text(&from_env, "client.security.protocol").as_deref(),
            Some("SASL_PLAINTEXT")
        );
    }

    #[test]
    fn booleans_in_every_form_kafka_exporters_users_write() {
        for line in [
            "--kafka.server=a --no-offset.show-all",
            "--kafka.server=a --offset.show-all=false",
        ] {
            let t = translate(&args(line), |_| None).unwrap();
            assert_eq!(
                setting(&t, "groups.assigned_only"),
                Some(&Value::from(true)),
                "{line}"
            );
        }
        let t = translate(&args("--kafka.server=a --offset.show-all"), |_| None).unwrap();
        assert_eq!(setting(&t, "groups.assigned_only"), None);
        // The chart renders --sasl.handshake=false when asked; it cannot be honoured.
        let error =
            translate(&args("--kafka.server=a --sasl.handshake=false"), |_| None).unwrap_err();
        assert!(error.contains("--sasl.handshake=false"), "{error}");
        assert!(translate(&args("--kafka.server=a --sasl.handshake=true"), |_| None).is_ok());
        let error = translate(&args("--kafka.server=a --tls.enabled=yes"), |_| None).unwrap_err();
        assert!(error.contains("true or false"), "{error}");
    }

    #[test]
    fn a_flag_not_taken_is_refused_by_name_never_ignored() {
        let error = translate(
            &args("--kafka.server=a --kafka.labels=env=prod --tls.enabled --tls.server-name=kafka"),
            |_| None,
        )
        .unwrap_err();
        assert!(
            error.contains("--kafka.labels (") && error.contains("--tls.server-name ("),
            "{error}"
        );
        // A refused boolean at its default changes nothing.
        assert!(translate(
            &args("--kafka.server=a --no-use.consumelag.zookeeper"),
            |_| None
        )
        .is_ok());
        assert!(
            translate(&args("--kafka.server=a --use.consumelag.zookeeper"), |_| {
                None
            })
            .is_err()
        );
        let error = translate(&args("--kafka.server=a --kafka.srever=b"), |_| None).unwrap_err();
        assert!(
            error.contains("--kafka.srever is neither a flag"),
            "{error}"
        );
        let error = translate(&args("--kafka.server=a --sasl.enabled"), |_| None).unwrap_err();
        assert!(error.contains("--sasl.mechanism"), "{error}");
        let error = translate(&args("--kafka.server=a --topic.filter=("), |_| None).unwrap_err();
        assert!(error.contains("--topic.filter"), "{error}");
    }

    /// What the review of this mode found: a repeated flag, a flag of another mechanism, a
    /// Kerberos password login, defaults over a config file, performance flags.
    #[test]
    fn nothing_is_dropped_without_a_word() {
        let refused = |line: &str, says: &str| {
            let error = translate(&args(line), |_| None).unwrap_err();
            assert!(error.contains(says), "{line}: {error}");
        };
        refused(
            "--kafka.server=a --topic.filter=x --topic.filter=y",
            "--topic.filter is given more than once",
        );
        refused(
            "--kafka.server=a --sasl.username=u",
            "--sasl.username without --sasl.enabled",
        );
        refused(
            "--kafka.server=a --sasl.enabled --sasl.mechanism=plain --sasl.username=u --sasl.password=p --sasl.realm=R",
            "--sasl.realm with --sasl.mechanism=plain",
        );
        refused(
            "--kafka.server=a --sasl.enabled --sasl.mechanism=gssapi --sasl.username=u --sasl.password=p",
            "only keytabAuth",
        );
        refused(
            "--kafka.server=a --connect",
            "--connect needs --check-config",
        );
        let keytab = translate(
            &args(
                "--kafka.server=a --sasl.enabled --sasl.mechanism=gssapi --sasl.kerberos-auth-type=keytabAuth \
                 --sasl.keytab-path=/k --sasl.username=u --sasl.realm=R --sasl.service-name=kafka",
            ),
            |_| None,
        )
        .unwrap();
        assert_eq!(
            text(&keytab, "client.sasl.kerberos.principal").as_deref(),
            Some("u@R")
        );
        let both = translate(
            &args(
                "--kafka.server=a --kafka.server=b --web.listen-address=:1 --web.listen-address=:2",
            ),
            |_| None,
        )
        .unwrap();
        assert_eq!(both.overrides.listen_addresses, vec![":1", ":2"]);
        let file = translate(&args("--verbosity=0 --config /etc/x.toml"), |_| None).unwrap();
        assert_eq!(file.overrides.bootstrap_servers, None);
        assert!(file.overrides.listen_addresses.is_empty());
        let quiet = translate(
            &args("--kafka.server=a --refresh.metadata=1m --topic.workers=10 --concurrent.enable"),
            |_| None,
        )
        .unwrap();
        assert_eq!(quiet.notes.len(), 3, "{:?}", quiet.notes);
        let checked =
            translate(&args("--kafka.server=a --check-config --connect"), |_| None).unwrap();
        assert!(checked.check_config && checked.connect);
    }

    #[test]
    fn only_a_flag_of_kafka_exporter_alone_switches_the_mode() {
        let os = |line: &str| -> Vec<OsString> {
            std::iter::once("x")
                .chain(line.split_whitespace())
                .map(OsString::from)
                .collect()
        };
        assert!(applies(&os("--kafka.server=a:9092")));
        assert!(applies(&os("--verbosity=0 --web.listen-address=:9308")));
        assert!(applies(&os("--no-offset.show-all")));
        assert!(!applies(&os(
            "--bootstrap-servers a:9092 --web.listen-address :9745 --log.level debug"
        )));
        assert!(!applies(&os("drill --topic t")));
        assert!(!applies(&os("-- --kafka.server=a")));
    }

    /// docs/platforms/kafka-exporter.md prints both lists as they are here.
    #[test]
    fn the_platform_page_lists_every_flag_as_the_code_takes_it() {
        let page = include_str!("../docs/platforms/kafka-exporter.md");
        for (flag, what) in TAKEN.iter().chain(NOT_TAKEN) {
            let row = format!("| `--{flag}` | {} |", what.replace('|', "\\|"));
            assert!(
                page.contains(&row),
                "docs/platforms/kafka-exporter.md lacks the row {row}"
            );
        }
    }

    #[test]
    fn every_flag_is_either_taken_or_refused_and_listed_once() {
        let mut all: Vec<&str> = TAKEN.iter().chain(NOT_TAKEN).map(|(f, _)| *f).collect();
        let count = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), count);
        for flag in BOOLEAN.iter().filter(|f| !OWN.contains(f)) {
            assert!(all.contains(flag), "{flag}");
        }
        assert!(help().contains("--kafka.labels"));
    }
}
