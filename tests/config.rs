//! Configuration: the reference file, merge order (file < environment < flags), and a
//! table of bad configurations, each rejected with the key and its source named.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use kafka_lso_exporter::config::{Config, ListenAddress, LogFormat, Overrides};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn write_temp(name: &str, contents: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kle-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
    vars.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn addresses(config: &Config) -> Vec<String> {
    config
        .web
        .listen_addresses
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn exporter(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

#[test]
fn the_reference_config_loads() {
    let config = Config::load(
        Some(&repo().join("docs/kafka-lso-exporter.toml")),
        env(&[]),
        &Overrides::default(),
    )
    .expect("reference config");
    assert_eq!(addresses(&config), [":9745"]);
    assert_eq!(config.web.telemetry_path, "/metrics");
    assert_eq!(config.web.config_file, None);
    assert_eq!(config.log.level, "info");
    assert_eq!(config.log.format, LogFormat::Logfmt);
    assert_eq!(config.interval, Duration::from_secs(15));
    assert_eq!(config.timeout, Duration::from_secs(15));
    assert_eq!(config.clusters.len(), 2);
    let prod = &config.clusters[0];
    assert_eq!(prod.name, "prod");
    assert_eq!(prod.bootstrap_servers, "kafka-0:9092,kafka-1:9092");
    assert!(prod.topics.accepts("orders"));
    assert!(!prod.topics.accepts("__consumer_offsets"));
    assert!(prod.groups.accepts("billing"));
    assert_eq!(
        prod.client.get("client.id").map(String::as_str),
        Some("kafka-lso-exporter")
    );
    assert!(prod.read_records);
    assert_eq!(prod.read_window, 1000);
    assert!(prod.transaction_list);
    assert_eq!(
        prod.transaction_list_min_age,
        std::time::Duration::from_secs(10)
    );
    assert_eq!(prod.transaction_list_detail, 10);
    use kafka_lso_exporter::config::Granularity;
    assert_eq!(prod.granularity, Granularity::Topic);
    assert_eq!(
        prod.group_granularity.of("payments-eu", prod.granularity),
        Granularity::Partition
    );
    assert!(!prod.compat_kafka_exporter, "compat is commented out");
    assert_eq!(config.clusters[1].name, "staging");
}

#[test]
fn numbers_and_switches_from_environment_variables() {
    let config = Config::load(
        None,
        env(&[
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__BOOTSTRAP_SERVERS",
                "k:9092",
            ),
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__READ_WINDOW", "250"),
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__READ_RECORDS", "false"),
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTIONS", "False"),
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__MAX_SERIES", "5000"),
            ("KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTION_LIST", "false"),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTION_LIST_MIN_AGE",
                "90s",
            ),
            (
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTION_LIST_DETAIL",
                "25",
            ),
        ]),
        &Overrides::default(),
    )
    .expect("config from the environment");
    let cluster = &config.clusters[0];
    assert_eq!(cluster.read_window, 250);
    assert!(!cluster.read_records);
    assert!(!cluster.transactions);
    assert_eq!(cluster.max_series, Some(5000));
    assert!(!cluster.transaction_list);
    assert_eq!(
        cluster.transaction_list_min_age,
        std::time::Duration::from_secs(90)
    );
    assert_eq!(cluster.transaction_list_detail, 25);
}

#[test]
fn flags_alone_make_a_single_cluster_with_defaults() {
    let overrides = Overrides {
        bootstrap_servers: Some("localhost:9092".into()),
        ..Default::default()
    };
    let config = Config::load(Some(&write_temp("empty.toml", "")), env(&[]), &overrides).unwrap();
    assert_eq!(config.clusters.len(), 1);
    assert_eq!(config.clusters[0].name, "default");
    assert_eq!(config.clusters[0].bootstrap_servers, "localhost:9092");
    assert_eq!(config.interval, Duration::from_secs(15));
    assert_eq!(addresses(&config), [":9745"]);
    assert_eq!(config.web.telemetry_path, "/metrics");
    assert_eq!(config.log.format, LogFormat::Logfmt);
    assert_eq!(config.log.level, "info");
    assert!(!config.clusters[0].topics.accepts("__transaction_state"));
}

#[test]
fn merge_order_is_file_then_environment_then_flags() {
    let file = write_temp(
        "merge.toml",
        r#"
interval = "30s"
[web]
listen_addresses = ["127.0.0.1:1111"]
[[clusters]]
name = "prod"
bootstrap_servers = "file:9092"
[[clusters]]
name = "second"
bootstrap_servers = "second:9092"
"#,
    );
    let only_file = Config::load(Some(&file), env(&[]), &Overrides::default()).unwrap();
    assert_eq!(only_file.interval, Duration::from_secs(30));
    assert_eq!(only_file.clusters[0].bootstrap_servers, "file:9092");

    let vars = env(&[
        ("KAFKA_LSO_EXPORTER_INTERVAL", "20s"),
        (
            "KAFKA_LSO_EXPORTER_CLUSTERS__0__BOOTSTRAP_SERVERS",
            "env:9092",
        ),
        (
            "KAFKA_LSO_EXPORTER_CLUSTERS__1__TOPICS__INCLUDE",
            r#"["^orders$"]"#,
        ),
        (
            "KAFKA_LSO_EXPORTER_CLUSTERS__0__CLIENT__security.protocol",
            "SSL",
        ),
        ("UNRELATED_VARIABLE", "ignored"),
    ]);
    let with_env = Config::load(Some(&file), vars.clone(), &Overrides::default()).unwrap();
    assert_eq!(with_env.interval, Duration::from_secs(20));
    assert_eq!(
        addresses(&with_env),
        ["127.0.0.1:1111"],
        "untouched keys keep the file's value"
    );
    assert_eq!(
        with_env.clusters[0].name, "prod",
        "an env override of one field keeps the others"
    );
    assert_eq!(with_env.clusters[0].bootstrap_servers, "env:9092");
    assert_eq!(
        with_env.clusters[0]
            .client
            .get("security.protocol")
            .map(String::as_str),
        Some("SSL")
    );
    assert!(with_env.clusters[1].topics.accepts("orders"));
    assert!(!with_env.clusters[1].topics.accepts("payments"));

    let flags = Overrides {
        interval: Some("10s".into()),
        bootstrap_servers: Some("flag:9092".into()),
        ..Default::default()
    };
    let with_flags = Config::load(Some(&file), vars, &flags).unwrap();
    assert_eq!(with_flags.interval, Duration::from_secs(10));
    assert_eq!(with_flags.clusters[0].bootstrap_servers, "flag:9092");
    assert_eq!(with_flags.clusters[1].bootstrap_servers, "second:9092");
}

const CLUSTER: &str = "[[clusters]]\nname = \"prod\"\nbootstrap_servers = \"k:9092\"\n";

/// (description, file contents, environment, expected key, expected source fragment)
type BadConfig = (
    &'static str,
    String,
    Vec<(&'static str, &'static str)>,
    &'static str,
    &'static str,
);

fn bad_configs() -> Vec<BadConfig> {
    vec![
        (
            "a misspelt granularity",
            format!("{CLUSTER}granularity = \"partiton\"\n"),
            vec![],
            "clusters[0].granularity: unknown value `partiton`; one of `topic`, `partition`",
            "bad-",
        ),
        (
            "a misspelt [ha] key",
            format!("{CLUSTER}\n[ha]\ngroup = \"g\"\nsession_timout = \"10s\"\n"),
            vec![],
            "did you mean session_timeout",
            "bad-",
        ),
        (
            "an [ha] session timeout the brokers refuse",
            format!("{CLUSTER}\n[ha]\ngroup = \"g\"\nsession_timeout = \"2s\"\n"),
            vec![],
            "ha.session_timeout",
            "bad-",
        ),
        (
            "an [ha] heartbeat as long as the session",
            format!(
                "{CLUSTER}\n[ha]\ngroup = \"g\"\nsession_timeout = \"10s\"\nheartbeat_interval = \"4s\"\n"
            ),
            vec![],
            "ha.heartbeat_interval",
            "bad-",
        ),
        (
            "an [ha] section without a group",
            format!("{CLUSTER}\n[ha]\nsession_timeout = \"10s\"\n"),
            vec![],
            "ha.group",
            "bad-",
        ),
        (
            "unknown top-level key",
            format!("intervall = \"5s\"\n{CLUSTER}"),
            vec![],
            "intervall",
            "bad-",
        ),
        (
            "unknown cluster key",
            format!("{CLUSTER}bootstrap = \"x:1\"\n"),
            vec![],
            "clusters[0]",
            "bad-",
        ),
        (
            "bad duration",
            format!("interval = \"fast\"\n{CLUSTER}"),
            vec![],
            "interval",
            "bad-",
        ),
        (
            "duration out of range",
            format!("interval = \"5ms\"\n{CLUSTER}"),
            vec![],
            "interval",
            "bad-",
        ),
        (
            "duration of the wrong type",
            format!("interval = 15\n{CLUSTER}"),
            vec![],
            "interval",
            "bad-",
        ),
        (
            "timeout longer than interval",
            format!("interval = \"5s\"\ntimeout = \"10s\"\n{CLUSTER}"),
            vec![],
            "timeout",
            "bad-",
        ),
        (
            "bad listen address",
            format!("[web]\nlisten_addresses = [\":9745\", \"everywhere\"]\n{CLUSTER}"),
            vec![],
            "web.listen_addresses[1]",
            "bad-",
        ),
        (
            "IPv6 listen address without brackets",
            format!("[web]\nlisten_addresses = [\"::1:9745\"]\n{CLUSTER}"),
            vec![],
            "web.listen_addresses[0]",
            "bad-",
        ),
        (
            "listen port out of range",
            format!("[web]\nlisten_addresses = [\":65536\"]\n{CLUSTER}"),
            vec![],
            "web.listen_addresses[0]",
            "bad-",
        ),
        (
            "no listen address",
            format!("[web]\nlisten_addresses = []\n{CLUSTER}"),
            vec![],
            "web.listen_addresses",
            "bad-",
        ),
        (
            "a listen address twice",
            format!("[web]\nlisten_addresses = [\":9745\", \":9745\"]\n{CLUSTER}"),
            vec![],
            "web.listen_addresses[1]",
            "bad-",
        ),
        (
            "listen addresses of the wrong type",
            format!("[web]\nlisten_addresses = 9745\n{CLUSTER}"),
            vec![],
            "web.listen_addresses",
            "bad-",
        ),
        (
            "bad listen address (environment)",
            CLUSTER.into(),
            vec![("KAFKA_LSO_EXPORTER_WEB__LISTEN_ADDRESSES", "port 80")],
            "web.listen_addresses[0]",
            "KAFKA_LSO_EXPORTER_WEB__LISTEN_ADDRESSES",
        ),
        (
            "unknown web key",
            format!("[web]\nlisten_address = \":9745\"\n{CLUSTER}"),
            vec![],
            "listen_address",
            "bad-",
        ),
        (
            "telemetry path without a leading slash",
            format!("[web]\ntelemetry_path = \"metrics\"\n{CLUSTER}"),
            vec![],
            "web.telemetry_path",
            "bad-",
        ),
        (
            "telemetry path of another page",
            format!("[web]\ntelemetry_path = \"/healthz\"\n{CLUSTER}"),
            vec![],
            "web.telemetry_path",
            "bad-",
        ),
        (
            "telemetry path the status page has",
            format!("[web]\ntelemetry_path = \"/\"\n{CLUSTER}"),
            vec![],
            "web.telemetry_path",
            "bad-",
        ),
        (
            "telemetry path with a router capture",
            format!("[web]\ntelemetry_path = \"/metrics/{{cluster}}\"\n{CLUSTER}"),
            vec![],
            "web.telemetry_path",
            "bad-",
        ),
        (
            "telemetry path with an empty segment",
            format!("[web]\ntelemetry_path = \"/a//metrics\"\n{CLUSTER}"),
            vec![],
            "web.telemetry_path",
            "bad-",
        ),
        (
            "telemetry path with a dot segment",
            format!("[web]\ntelemetry_path = \"/a/../metrics\"\n{CLUSTER}"),
            vec![],
            "web.telemetry_path",
            "bad-",
        ),
        (
            "bad log format",
            format!("[log]\nformat = \"xml\"\n{CLUSTER}"),
            vec![],
            "log.format",
            "bad-",
        ),
        (
            "the log format of earlier versions",
            format!("[log]\nformat = \"text\"\n{CLUSTER}"),
            vec![],
            "log.format",
            "bad-",
        ),
        (
            "bad log level",
            format!("[log]\nlevel = \"loud[\"\n{CLUSTER}"),
            vec![],
            "log.level",
            "bad-",
        ),
        (
            "log level that is no level",
            format!("[log]\nlevel = \"verbose\"\n{CLUSTER}"),
            vec![],
            "log.level",
            "bad-",
        ),
        (
            "bad log level (environment)",
            CLUSTER.into(),
            vec![("KAFKA_LSO_EXPORTER_LOG__LEVEL", "info,loud")],
            "log.level",
            "KAFKA_LSO_EXPORTER_LOG__LEVEL",
        ),
        (
            "no clusters",
            "interval = \"15s\"\n".into(),
            vec![],
            "clusters",
            "bootstrap-servers",
        ),
        (
            "empty bootstrap list",
            "[[clusters]]\nname = \"a\"\nbootstrap_servers = \" , \"\n".into(),
            vec![],
            "clusters[0].bootstrap_servers",
            "bad-",
        ),
        (
            "bootstrap server without port",
            "[[clusters]]\nname = \"a\"\nbootstrap_servers = \"kafka\"\n".into(),
            vec![],
            "clusters[0].bootstrap_servers",
            "bad-",
        ),
        (
            "duplicate cluster names",
            format!("{CLUSTER}{CLUSTER}"),
            vec![],
            "clusters[1].name",
            "bad-",
        ),
        (
            "bad topic regex",
            format!("{CLUSTER}topics = {{ include = [\"(orders\"] }}\n"),
            vec![],
            "clusters[0].topics.include",
            "bad-",
        ),
        (
            "bad group regex",
            format!("{CLUSTER}groups = {{ exclude = [\"*\"] }}\n"),
            vec![],
            "clusters[0].groups.exclude",
            "bad-",
        ),
        (
            "reserved client property",
            format!("{CLUSTER}client = {{ \"isolation.level\" = \"read_committed\" }}\n"),
            vec![],
            "clusters[0].client.isolation.level",
            "bad-",
        ),
        (
            "topics of the wrong type",
            format!("{CLUSTER}topics = \"orders\"\n"),
            vec![],
            "clusters[0].topics",
            "bad-",
        ),
        ("malformed TOML", "interval = \n".into(), vec![], "", "bad-"),
        (
            "max_series too small",
            format!("{CLUSTER}max_series = 10\n"),
            vec![],
            "clusters[0].max_series",
            "bad-",
        ),
        (
            "hanging_margin not a duration",
            format!("{CLUSTER}hanging_margin = \"a while\"\n"),
            vec![],
            "clusters[0].hanging_margin",
            "bad-",
        ),
        (
            "stall_after shorter than two intervals",
            format!("interval = \"30s\"\n{CLUSTER}stall_after = \"45s\"\n"),
            vec![],
            "clusters[0].stall_after",
            "bad-",
        ),
        (
            "read_window out of range",
            format!("{CLUSTER}read_window = 1000000\n"),
            vec![],
            "clusters[0].read_window",
            "bad-",
        ),
        (
            "read_window not a number (environment)",
            CLUSTER.to_string(),
            vec![("KAFKA_LSO_EXPORTER_CLUSTERS__0__READ_WINDOW", "lots")],
            "clusters[0].read_window",
            "KAFKA_LSO_EXPORTER_CLUSTERS__0__READ_WINDOW",
        ),
        (
            "transaction_list_min_age not a duration",
            format!("{CLUSTER}transaction_list_min_age = \"ten\"\n"),
            vec![],
            "clusters[0].transaction_list_min_age",
            "bad-",
        ),
        (
            "transaction_list_detail out of range",
            format!("{CLUSTER}transaction_list_detail = 100000\n"),
            vec![],
            "clusters[0].transaction_list_detail",
            "bad-",
        ),
        (
            "transaction_list_detail negative (environment)",
            CLUSTER.to_string(),
            vec![(
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTION_LIST_DETAIL",
                "-1",
            )],
            "clusters[0].transaction_list_detail",
            "KAFKA_LSO_EXPORTER_CLUSTERS__0__TRANSACTION_LIST_DETAIL",
        ),
        (
            "transaction_list not a boolean",
            format!("{CLUSTER}transaction_list = \"yes please\"\n"),
            vec![],
            "clusters[0].transaction_list",
            "bad-",
        ),
        (
            "read_records not a boolean",
            format!("{CLUSTER}read_records = 3\n"),
            vec![],
            "clusters[0].read_records",
            "bad-",
        ),
        (
            "transactions not a boolean",
            format!("{CLUSTER}transactions = \"maybe\"\n"),
            vec![],
            "clusters[0].transactions",
            "bad-",
        ),
        (
            "bad priority_groups regex",
            format!("{CLUSTER}priority_groups = [\"(\"]\n"),
            vec![],
            "clusters[0].priority_groups",
            "bad-",
        ),
        (
            "bad environment override",
            CLUSTER.into(),
            vec![("KAFKA_LSO_EXPORTER_INTERVAL", "soon")],
            "interval",
            "KAFKA_LSO_EXPORTER_INTERVAL",
        ),
        (
            "unknown environment key",
            CLUSTER.into(),
            vec![("KAFKA_LSO_EXPORTER_PORT", "9")],
            "port",
            "KAFKA_LSO_EXPORTER_PORT",
        ),
        (
            "a typo in an environment key",
            CLUSTER.into(),
            vec![("KAFKA_LSO_EXPORTER_INTERVALL", "5s")],
            "intervall",
            "KAFKA_LSO_EXPORTER_INTERVALL",
        ),
        (
            "a service-link look-alike with two underscores is a setting",
            CLUSTER.into(),
            vec![("KAFKA_LSO_EXPORTER_WEB__SERVICE_HOST", "10.0.0.1")],
            "web.service_host",
            "KAFKA_LSO_EXPORTER_WEB__SERVICE_HOST",
        ),
        (
            "bad env regex",
            CLUSTER.into(),
            vec![("KAFKA_LSO_EXPORTER_CLUSTERS__0__TOPICS__INCLUDE", "[\"[\"]")],
            "clusters[0].topics.include",
            "KAFKA_LSO_EXPORTER_CLUSTERS__0__TOPICS__INCLUDE",
        ),
    ]
}

#[test]
fn bad_configs_are_rejected_naming_the_key_and_source() {
    let cases = bad_configs();
    assert!(cases.len() >= 20);
    for (index, (what, contents, vars, key, source)) in cases.into_iter().enumerate() {
        let path = write_temp(&format!("bad-{index}.toml"), &contents);
        let error = Config::load(Some(&path), env(&vars), &Overrides::default())
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"))
            .to_string();
        assert!(
            error.contains(key),
            "{what}: {error:?} does not name {key:?}"
        );
        assert!(
            error.contains(source),
            "{what}: {error:?} does not name the source {source:?}"
        );
        assert!(
            !error.contains('\n'),
            "{what}: message is not one line: {error:?}"
        );
    }
}

#[test]
fn client_properties_from_files() {
    let secret = write_temp("kafka-password", "s3cr3t-from-file\n");
    let file = write_temp(
        "client-files.toml",
        &format!(
            "{CLUSTER}client_files = {{ \"sasl.password\" = {:?} }}\n",
            secret.display().to_string()
        ),
    );
    let config = Config::load(Some(&file), env(&[]), &Overrides::default()).unwrap();
    assert_eq!(
        config.clusters[0]
            .client
            .get("sasl.password")
            .map(String::as_str),
        Some("s3cr3t-from-file"),
        "read, with the trailing newline removed"
    );
    let missing = write_temp(
        "client-files-missing.toml",
        &format!("{CLUSTER}client_files = {{ \"sasl.password\" = \"/nonexistent/password\" }}\n"),
    );
    let error = Config::load(Some(&missing), env(&[]), &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("clusters[0].client_files.sasl.password")
            && error.contains("/nonexistent/password"),
        "{error}"
    );
}

#[test]
fn a_missing_config_file_is_an_error() {
    let error = Config::load(
        Some(&repo().join("no-such-file.toml")),
        env(&[]),
        &Overrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("no-such-file.toml"), "{error}");
}

#[test]
fn the_binary_exits_2_on_bad_config_without_printing_secrets() {
    let path = write_temp(
        "secret.toml",
        &format!("interval = \"never\"\n{CLUSTER}client = {{ \"sasl.password\" = \"hunter2-secret\" }}\n"),
    );
    let output = Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"))
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("interval") && stderr.contains("secret.toml"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");

    let secret_type_error = write_temp(
        "secret-type.toml",
        &format!("{CLUSTER}client = {{ \"sasl.password\" = {{ value = \"hunter2-secret\" }} }}\n"),
    );
    let output = Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"))
        .arg("--config")
        .arg(&secret_type_error)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("hunter2"));
}

#[test]
fn check_config_and_version_flags() {
    let output = Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"))
        .args(["--bootstrap-servers", "localhost:9092", "--check-config"])
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 cluster(s): default"));
    let output = Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stdout).contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn granularity_per_cluster_and_per_group_and_compatibility_sets() {
    use kafka_lso_exporter::config::Granularity;
    let path = write_temp(
        "granularity.toml",
        &format!(
            "{CLUSTER}granularity = \"partition\"\ncompat = [\"kafka_exporter\"]\n\
             group_granularity = {{ topic = [\"^batch-\"] }}\n\
             [[clusters]]\nname = \"other\"\nbootstrap_servers = \"k:9092\"\n"
        ),
    );
    let config = Config::load(
        Some(&path),
        env(&[(
            "KAFKA_LSO_EXPORTER_CLUSTERS__1__GROUP_GRANULARITY__PARTITION",
            "[\"^payments-\"]",
        )]),
        &Overrides::default(),
    )
    .expect("config");
    let (prod, other) = (&config.clusters[0], &config.clusters[1]);
    assert_eq!(prod.granularity, Granularity::Partition);
    assert!(prod.compat_kafka_exporter);
    let of = |c: &kafka_lso_exporter::config::ClusterConfig, group: &str| {
        c.group_granularity.of(group, c.granularity)
    };
    assert_eq!(of(prod, "batch-nightly"), Granularity::Topic);
    assert_eq!(of(prod, "billing"), Granularity::Partition);
    // The default is `topic`, and no compatibility families.
    assert_eq!(other.granularity, Granularity::Topic);
    assert!(!other.compat_kafka_exporter);
    assert_eq!(of(other, "payments-eu"), Granularity::Partition);
    assert_eq!(of(other, "billing"), Granularity::Topic);

    for (what, contents, key) in [
        (
            "unknown granularity",
            format!("{CLUSTER}granularity = \"group\"\n"),
            "clusters[0].granularity",
        ),
        (
            "unknown compatibility set",
            format!("{CLUSTER}compat = [\"kminion\"]\n"),
            "clusters[0].compat",
        ),
        (
            "bad group regex",
            format!("{CLUSTER}group_granularity = {{ partition = [\"(\"] }}\n"),
            "clusters[0].group_granularity.partition",
        ),
        (
            "unknown group granularity",
            format!("{CLUSTER}group_granularity = {{ partitions = [\"a\"] }}\n"),
            "clusters[0].group_granularity",
        ),
    ] {
        let path = write_temp("bad-granularity.toml", &contents);
        let error = Config::load(Some(&path), env(&[]), &Overrides::default())
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"))
            .to_string();
        assert!(
            error.contains(key),
            "{what}: {error:?} does not name {key:?}"
        );
    }
}

#[test]
fn listen_addresses_in_the_forms_of_the_exporter_toolkit() {
    for (written, shown) in [
        (":9745", ":9745"),
        ("0.0.0.0:9745", "0.0.0.0:9745"),
        ("[::]:9745", "[::]:9745"),
        ("[::1]:0", "[::1]:0"),
        ("127.0.0.1:9745", "127.0.0.1:9745"),
        ("localhost:9745", "localhost:9745"),
        ("exporter-0.kafka.svc:9745", "exporter-0.kafka.svc:9745"),
    ] {
        let address: ListenAddress = written.parse().unwrap_or_else(|e| panic!("{written}: {e}"));
        assert_eq!(address.to_string(), shown);
        assert_eq!(
            address.port(),
            shown.rsplit(':').next().unwrap().parse::<u16>().unwrap()
        );
    }
    for bad in [
        "9745", ":", ":http", "::1:9745", "[::1]", "[::x]:1", "a b:1", "-a:1", "a..b:1",
    ] {
        assert!(bad.parse::<ListenAddress>().is_err(), "{bad} accepted");
    }
}

#[test]
fn listen_addresses_from_file_environment_and_repeated_flags() {
    let file = write_temp(
        "listen.toml",
        &format!("[web]\nlisten_addresses = [\":9745\", \"[::1]:9746\"]\n{CLUSTER}"),
    );
    let from_file = Config::load(Some(&file), env(&[]), &Overrides::default()).unwrap();
    assert_eq!(addresses(&from_file), [":9745", "[::1]:9746"]);

    let list = env(&[(
        "KAFKA_LSO_EXPORTER_WEB__LISTEN_ADDRESSES",
        r#"["127.0.0.1:1", "127.0.0.1:2"]"#,
    )]);
    let from_env = Config::load(Some(&file), list, &Overrides::default()).unwrap();
    assert_eq!(addresses(&from_env), ["127.0.0.1:1", "127.0.0.1:2"]);
    let one = env(&[("KAFKA_LSO_EXPORTER_WEB__LISTEN_ADDRESSES", "0.0.0.0:9")]);
    let from_env = Config::load(Some(&file), one.clone(), &Overrides::default()).unwrap();
    assert_eq!(
        addresses(&from_env),
        ["0.0.0.0:9"],
        "one address is a list of one"
    );

    let flags = Overrides {
        listen_addresses: vec!["127.0.0.1:7".into(), ":8".into(), "[::]:9".into()],
        ..Default::default()
    };
    let from_flags = Config::load(Some(&file), one, &flags).unwrap();
    assert_eq!(
        addresses(&from_flags),
        ["127.0.0.1:7", ":8", "[::]:9"],
        "the flags replace the list, in their order"
    );
}

#[test]
fn telemetry_path_web_config_file_and_log_settings_in_every_layer() {
    let file = write_temp(
        "web-log.toml",
        &format!(
            "[web]\ntelemetry_path = \"/internal/metrics\"\nconfig_file = \"web.yml\"\n\
             [log]\nlevel = \"warn\"\nformat = \"json\"\n{CLUSTER}"
        ),
    );
    let from_file = Config::load(Some(&file), env(&[]), &Overrides::default()).unwrap();
    assert_eq!(from_file.web.telemetry_path, "/internal/metrics");
    assert_eq!(from_file.web.config_file, Some(PathBuf::from("web.yml")));
    assert_eq!(from_file.log.level, "warn");
    assert_eq!(from_file.log.format, LogFormat::Json);

    let vars = env(&[
        ("KAFKA_LSO_EXPORTER_WEB__TELEMETRY_PATH", "/prometheus/"),
        ("KAFKA_LSO_EXPORTER_LOG__LEVEL", "info,librdkafka=warn"),
        ("KAFKA_LSO_EXPORTER_LOG__FORMAT", "logfmt"),
    ]);
    let from_env = Config::load(Some(&file), vars.clone(), &Overrides::default()).unwrap();
    assert_eq!(from_env.web.telemetry_path, "/prometheus/");
    assert_eq!(from_env.log.level, "info,librdkafka=warn");
    assert_eq!(from_env.log.format, LogFormat::Logfmt);

    let flags = Overrides {
        telemetry_path: Some("/x/y-z_1.v~2".into()),
        web_config_file: Some(PathBuf::from("/etc/web.yml")),
        log_level: Some("debug".into()),
        log_format: Some("json".into()),
        ..Default::default()
    };
    let from_flags = Config::load(Some(&file), vars, &flags).unwrap();
    assert_eq!(from_flags.web.telemetry_path, "/x/y-z_1.v~2");
    assert_eq!(
        from_flags.web.config_file,
        Some(PathBuf::from("/etc/web.yml"))
    );
    assert_eq!(from_flags.log.level, "debug");
    assert_eq!(from_flags.log.format, LogFormat::Json);

    for level in [
        "debug",
        "info",
        "warn",
        "error",
        "WARN",
        "librdkafka=debug",
        "warn,kafka_lso_exporter=debug",
    ] {
        let flags = Overrides {
            log_level: Some(level.into()),
            ..Default::default()
        };
        let config = Config::load(Some(&file), env(&[]), &flags)
            .unwrap_or_else(|e| panic!("--log.level {level}: {e}"));
        assert_eq!(config.log.level, level);
    }
}

#[test]
fn keys_of_earlier_versions_are_rejected_naming_the_new_key() {
    for (old, value, new_key, new_variable) in [
        (
            "listen",
            "\"0.0.0.0:9745\"",
            "web.listen_addresses",
            "KAFKA_LSO_EXPORTER_WEB__LISTEN_ADDRESSES",
        ),
        (
            "log_level",
            "\"info\"",
            "log.level",
            "KAFKA_LSO_EXPORTER_LOG__LEVEL",
        ),
        (
            "log_format",
            "\"text\"",
            "log.format",
            "KAFKA_LSO_EXPORTER_LOG__FORMAT",
        ),
    ] {
        let file = write_temp(
            &format!("old-{old}.toml"),
            &format!("{old} = {value}\n{CLUSTER}"),
        );
        let error = Config::load(Some(&file), env(&[]), &Overrides::default())
            .err()
            .unwrap_or_else(|| panic!("{old}: accepted"))
            .to_string();
        assert!(
            error.starts_with(&format!("{old}: renamed to {new_key} ")),
            "{error}"
        );
        assert!(error.contains(&format!("old-{old}.toml")), "{error}");

        let variable = format!("KAFKA_LSO_EXPORTER_{}", old.to_ascii_uppercase());
        let error = Config::load(
            Some(&write_temp("no-old-keys.toml", CLUSTER)),
            env(&[(&variable, value.trim_matches('"'))]),
            &Overrides::default(),
        )
        .err()
        .unwrap_or_else(|| panic!("{variable}: accepted"))
        .to_string();
        assert!(error.contains(new_variable), "{error}");
        assert!(
            error.contains(&format!("environment variable {variable}")),
            "{error}"
        );

        // The binary: exit 2, one line on standard error naming the new key.
        let output = exporter(&["--config", file.to_str().unwrap(), "--check-config"]);
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(stderr.contains(new_key), "{stderr}");
        assert!(output.stdout.is_empty(), "{output:?}");
    }
}

#[test]
fn flags_of_earlier_versions_exit_2_naming_the_new_flag() {
    for (args, new) in [
        (&["--listen", "127.0.0.1:0"][..], "--web.listen-address"),
        (&["--listen=127.0.0.1:0"], "--web.listen-address"),
        (&["--log-level", "debug"], "--log.level"),
        (&["--log-level"], "--log.level"),
        (&["--log-format=json"], "--log.format"),
        (&["--check-config", "--log-format", "text"], "--log.format"),
    ] {
        let mut all = vec!["--bootstrap-servers", "localhost:9092"];
        all.extend(args);
        let output = exporter(&all);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let old = args.iter().find(|a| a.starts_with("--l")).unwrap();
        let old = old.split('=').next().unwrap();
        assert!(
            stderr.contains(&format!("{old} was renamed to {new}")),
            "{args:?}: {stderr}"
        );
        assert!(output.stdout.is_empty(), "{args:?}: {output:?}");
    }
    // A value that merely looks like an old flag is a value.
    let output = exporter(&[
        "--bootstrap-servers",
        "localhost:9092",
        "--cluster-name=--listen",
        "--check-config",
    ]);
    assert!(output.status.success(), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("1 cluster(s): --listen"));
}

#[test]
fn the_new_flags_reach_the_config() {
    let output = exporter(&[
        "--bootstrap-servers",
        "localhost:9092",
        "--web.listen-address",
        ":9745",
        "--web.listen-address=[::1]:9746",
        "--web.telemetry-path",
        "/internal/metrics",
        "--log.level",
        "debug",
        "--log.format",
        "json",
        "--check-config",
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout.contains("listen :9745 [::1]:9746, metrics at /internal/metrics,"),
        "{stdout}"
    );
    // A bad value names the flag it came from.
    for (flag, value, key) in [
        (
            "--web.listen-address",
            "everywhere",
            "web.listen_addresses[0]",
        ),
        ("--web.telemetry-path", "metrics", "web.telemetry_path"),
        ("--log.level", "verbose", "log.level"),
        ("--log.format", "text", "log.format"),
    ] {
        let output = exporter(&["--bootstrap-servers", "localhost:9092", flag, value]);
        assert_eq!(output.status.code(), Some(2), "{flag} {value}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(key) && stderr.contains(&format!("(from command-line flag {flag})")),
            "{flag} {value}: {stderr}"
        );
    }
}

#[test]
fn help_groups_the_flags_like_other_exporters() {
    let output = exporter(&["--help"]);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    // Heading -> the flags listed under it, up to the next heading.
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            sections.push((line.trim_end_matches(':').to_string(), Vec::new()));
        } else if let (Some(flag), Some((_, flags))) = (
            line.trim_start()
                .split([' ', ','])
                .find(|w| w.starts_with("--")),
            sections.last_mut(),
        ) {
            flags.push(flag.to_string());
        }
    }
    let under = |heading: &str| -> Vec<String> {
        sections
            .iter()
            .find(|(h, _)| h == heading)
            .map(|(_, flags)| flags.clone())
            .unwrap_or_else(|| panic!("no {heading} heading:\n{help}"))
    };
    assert_eq!(
        under("Web"),
        [
            "--web.listen-address",
            "--web.telemetry-path",
            "--web.config.file"
        ],
        "{help}"
    );
    assert_eq!(under("Logging"), ["--log.level", "--log.format"], "{help}");
    assert_eq!(
        under("Kafka"),
        ["--bootstrap-servers", "--cluster-name"],
        "{help}"
    );
    assert_eq!(under("Sampling"), ["--interval", "--timeout"], "{help}");
    for old in ["--listen", "--log-level", "--log-format"] {
        assert!(
            !help.contains(&format!("{old} ")),
            "{old} in --help:\n{help}"
        );
    }
}

/// The variables a kubelet injects for every Service of the namespace: for the Service
/// the bundled manifests create (`kafka-lso-exporter`, port 9745 named `http`) and for
/// one whose name adds a word (`kafka-lso-exporter-headless`), with every protocol.
/// They are ignored (and listed for a debug line); the settings beside them still apply,
/// and a real typo still fails naming the key and the known one it looks like.
#[test]
fn kubernetes_service_link_variables_are_not_settings() {
    let mut links = Vec::new();
    for (name, ip, port, protocol) in [
        ("KAFKA_LSO_EXPORTER", "10.96.0.12", 9745, "TCP"),
        ("KAFKA_LSO_EXPORTER_HEADLESS", "10.96.0.13", 9746, "UDP"),
        ("KAFKA_LSO_EXPORTER_METRICS", "10.96.0.14", 19745, "SCTP"),
    ] {
        let url = format!("{}://{ip}:{port}", protocol.to_ascii_lowercase());
        let base = format!("{name}_PORT_{port}_{protocol}");
        links.extend([
            (format!("{name}_SERVICE_HOST"), ip.to_string()),
            (format!("{name}_SERVICE_PORT"), port.to_string()),
            (format!("{name}_SERVICE_PORT_HTTP"), port.to_string()),
            (
                format!("{name}_SERVICE_PORT_HTTP_METRICS"),
                port.to_string(),
            ),
            (format!("{name}_PORT"), url.clone()),
            (base.clone(), url),
            (format!("{base}_PROTO"), protocol.to_ascii_lowercase()),
            (format!("{base}_PORT"), port.to_string()),
            (format!("{base}_ADDR"), ip.to_string()),
        ]);
    }
    let mut vars = links.clone();
    vars.push(("KAFKA_LSO_EXPORTER_INTERVAL".into(), "7s".into()));
    let file = write_temp("service-links.toml", CLUSTER);
    let config = Config::load(Some(&file), vars.clone(), &Overrides::default())
        .unwrap_or_else(|e| panic!("service-link variables refused: {e}"));
    assert_eq!(config.interval, std::time::Duration::from_secs(7));
    let mut expected: Vec<String> = links.iter().map(|(k, _)| k.clone()).collect();
    expected.sort();
    assert_eq!(config.ignored_env, expected);

    // Beside them, a typo is still a typo.
    vars.push(("KAFKA_LSO_EXPORTER_INTERVALL".into(), "5s".into()));
    let error = Config::load(Some(&file), vars, &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("KAFKA_LSO_EXPORTER_INTERVALL") && error.contains("did you mean interval"),
        "{error}"
    );
    // `PORT` set by hand (not a service link's tcp://...) names the setting to use.
    let error = Config::load(
        Some(&file),
        env(&[("KAFKA_LSO_EXPORTER_PORT", "9745")]),
        &Overrides::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("web.listen_addresses"), "{error}");
}

/// `--check-config` asks librdkafka whether it takes each cluster's client properties
/// (without connecting), and wants a user name and a password for PLAIN and SCRAM: a
/// typo, a refused value and missing credentials exit 2 naming the key, never showing a
/// value; the same properties spelt right pass. The service-link variables of the
/// bundled Service are ignored and said so.
#[test]
fn check_config_catches_what_librdkafka_and_sasl_would_refuse_later() {
    let run = |vars: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"));
        command
            .args(["--bootstrap-servers", "localhost:9092", "--check-config"])
            .env_remove("RUST_LOG");
        for (k, v) in vars {
            command.env(k, v);
        }
        command.output().unwrap()
    };
    let client = |property: &str| format!("KAFKA_LSO_EXPORTER_CLUSTERS__0__CLIENT__{property}");
    let (protocol, mechanism) = (client("security.protocol"), client("sasl.mechanism"));
    let (user, password, typo, ca) = (
        client("sasl.username"),
        client("sasl.password"),
        client("sasl.pasword"),
        client("ssl.ca.location"),
    );
    let not_pem = write_temp("not-a-certificate.pem", "hunter2, not a PEM file\n")
        .display()
        .to_string();

    for (what, vars, key) in [
        (
            "a misspelt property",
            vec![(typo.as_str(), "hunter2-typo")],
            "clusters[0].client.sasl.pasword: No such configuration property: \"sasl.pasword\" (did you mean sasl.password?)",
        ),
        (
            "a SASL mechanism that does not exist",
            vec![
                (protocol.as_str(), "SASL_SSL"),
                (mechanism.as_str(), "SCRAM-SHA-521"),
                (user.as_str(), "exporter"),
                (password.as_str(), "hunter2"),
            ],
            "clusters[0].client.sasl.mechanism: \"SCRAM-SHA-521\" is not a SASL mechanism",
        ),
        (
            "a SASL mechanism in lower case, which librdkafka does not take",
            vec![
                (protocol.as_str(), "SASL_SSL"),
                (mechanism.as_str(), "scram-sha-512"),
                (user.as_str(), "exporter"),
                (password.as_str(), "hunter2"),
            ],
            "clusters[0].client.sasl.mechanism: \"scram-sha-512\" is not a SASL mechanism",
        ),
        (
            "a CA file that does not exist",
            vec![
                (protocol.as_str(), "SSL"),
                (ca.as_str(), "/nonexistent/ca.pem"),
            ],
            "clusters[0].client.ssl.ca.location: cannot read /nonexistent/ca.pem",
        ),
        (
            "a CA file that holds no certificate",
            vec![(protocol.as_str(), "SSL"), (ca.as_str(), not_pem.as_str())],
            "holds no PEM certificate",
        ),
        (
            "a client key file that holds no key",
            vec![
                (protocol.as_str(), "SSL"),
                (client("ssl.key.location").as_str(), not_pem.as_str()),
            ],
            "clusters[0].client.ssl.key.location:",
        ),
        (
            "a value librdkafka refuses",
            vec![(protocol.as_str(), "SASL_SSLL")],
            "clusters[0].client.security.protocol",
        ),
        (
            "SCRAM without a user name or a password",
            vec![
                (protocol.as_str(), "SASL_SSL"),
                (mechanism.as_str(), "SCRAM-SHA-512"),
            ],
            "clusters[0].client.sasl.username",
        ),
        (
            "PLAIN without a password",
            vec![
                (protocol.as_str(), "SASL_PLAINTEXT"),
                (mechanism.as_str(), "PLAIN"),
                (user.as_str(), "exporter"),
            ],
            "clusters[0].client.sasl.password",
        ),
        (
            "SCRAM with its password misspelt: the typo, not the missing password",
            vec![
                (protocol.as_str(), "SASL_SSL"),
                (mechanism.as_str(), "SCRAM-SHA-512"),
                (user.as_str(), "exporter"),
                (typo.as_str(), "hunter2-typo"),
            ],
            "clusters[0].client.sasl.pasword: No such configuration property: \"sasl.pasword\" (did you mean sasl.password?)",
        ),
        (
            "a misspelt setting of the token source, which librdkafka never sees",
            vec![
                (protocol.as_str(), "SASL_SSL"),
                (mechanism.as_str(), "OAUTHBEARER"),
                (client("sasl.oauthbearer.method").as_str(), "oidc"),
                (client("sasl.oauthbearer.client.id").as_str(), "exporter"),
                (client("sasl.oauthbearer.client.secret").as_str(), "hunter2"),
                (client("sasl.oauthbearer.token.endpoint.url").as_str(), "https://idp.example/token"),
                (client("sasl.oauthbearer.scop").as_str(), "kafka"),
            ],
            "clusters[0].client.sasl.oauthbearer.scop: No such configuration property (did you mean sasl.oauthbearer.scope?)",
        ),
    ] {
        let output = run(&vars);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{what}: {output:?}");
        assert!(stderr.contains(key), "{what}: {stderr}");
        assert!(
            !stderr.contains("hunter2"),
            "{what} shows the value: {stderr}"
        );
    }
    let output = run(&[
        (protocol.as_str(), "SASL_SSL"),
        (mechanism.as_str(), "SCRAM-SHA-512"),
        (user.as_str(), "exporter"),
        (password.as_str(), "hunter2"),
        ("KAFKA_LSO_EXPORTER_PORT", "tcp://10.96.0.12:9745"),
        ("KAFKA_LSO_EXPORTER_SERVICE_HOST", "10.96.0.12"),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout.contains("ignored 2 Kubernetes service-link variable(s)"),
        "{stdout}"
    );
    // The TLS files are librdkafka's only for SSL and SASL_SSL: a plaintext cluster with a
    // leftover ssl.ca.location starts as before.
    let output = run(&[(ca.as_str(), "/nonexistent/ca.pem")]);
    assert!(output.status.success(), "{output:?}");
}

/// A client key that is not the certificate's (the key of another pair, after a
/// rotation that replaced one file of two): `--check-config`, and so the start, exit 2
/// naming `ssl.key.location`, instead of librdkafka's "key values mismatch" at the start
/// (exit 1); the pair that belongs together passes.
#[test]
fn check_config_refuses_a_client_key_of_another_certificate() {
    let pair = |name: &str| {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec![name.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (
            write_temp(&format!("{name}.pem"), &cert.pem()),
            write_temp(&format!("{name}.key"), &key.serialize_pem()),
        )
    };
    let (cert, key) = pair("exporter-new");
    let (_, other_key) = pair("exporter-old");
    let run = |key: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"))
            .args(["--bootstrap-servers", "localhost:9093", "--check-config"])
            .env_remove("RUST_LOG")
            .env(
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__CLIENT__security.protocol",
                "SSL",
            )
            .env(
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__CLIENT__ssl.certificate.location",
                &cert,
            )
            .env(
                "KAFKA_LSO_EXPORTER_CLUSTERS__0__CLIENT__ssl.key.location",
                key,
            )
            .output()
            .unwrap()
    };
    let output = run(&other_key);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        stderr.contains("clusters[0].client.ssl.key.location:")
            && stderr.contains("is not the key of the certificate in"),
        "{stderr}"
    );
    let output = run(&key);
    assert!(output.status.success(), "{output:?}");
}

#[test]
fn ha_settings_from_file_and_environment_with_their_defaults() {
    let path = write_temp(
        "ha.toml",
        &format!("{CLUSTER}\n[ha]\ngroup = \"exporters\"\n"),
    );
    let config = Config::load(Some(&path), env(&[]), &Overrides::default()).unwrap();
    let ha = config.ha.expect("[ha]");
    assert_eq!(ha.group, "exporters");
    assert_eq!(ha.cluster, None, "ha.cluster is no longer filled in");
    assert_eq!(ha.session_timeout, std::time::Duration::from_secs(10));
    assert_eq!(ha.heartbeat_interval, std::time::Duration::from_secs(2));
    let config = Config::load(
        Some(&path),
        env(&[
            ("KAFKA_LSO_EXPORTER_HA__GROUP", "from-env"),
            ("KAFKA_LSO_EXPORTER_HA__SESSION_TIMEOUT", "30s"),
        ]),
        &Overrides::default(),
    )
    .unwrap();
    let ha = config.ha.expect("[ha]");
    assert_eq!(
        (ha.group.as_str(), ha.session_timeout.as_secs()),
        ("from-env", 30)
    );
    // No group: a single replica.
    let path = write_temp("no-ha.toml", CLUSTER);
    let config = Config::load(Some(&path), env(&[]), &Overrides::default()).unwrap();
    assert!(config.ha.is_none());
}

/// `--check-config --connect` of a cluster nothing answers for: two cycles, then exit 1
/// with the reason; no feature is said to work, none listed as "unknown".
#[test]
fn connect_check_of_an_unreachable_cluster_says_so_once() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = std::time::Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_kafka-lso-exporter"))
        .args([
            "--bootstrap-servers",
            &format!("127.0.0.1:{port}"),
            "--check-config",
            "--connect",
        ])
        .env("KAFKA_LSO_EXPORTER_INTERVAL", "1s")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stdout.contains(": cannot reach it: "), "{stdout}");
    assert!(stdout.contains("connect check FAILED"), "{stdout}");
    assert!(
        !stdout.contains(" ok ") && !stdout.contains("unknown"),
        "judged features of a cluster it never reached: {stdout}"
    );
    // Two cycles (a deadline of the interval each, 3 s apart), not four.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "took {:?}: {stdout}",
        started.elapsed()
    );
}
