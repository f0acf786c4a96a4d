//! Configuration: the reference file, merge order (file < environment < flags), and a
//! table of bad configurations, each rejected with the key and its source named.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use kafka_lso_exporter::config::{Config, Overrides};

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

#[test]
fn the_reference_config_loads() {
    let config = Config::load(
        Some(&repo().join("docs/kafka-lso-exporter.toml")),
        env(&[]),
        &Overrides::default(),
    )
    .expect("reference config");
    assert_eq!(config.listen.to_string(), "0.0.0.0:9745");
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
        ]),
        &Overrides::default(),
    )
    .expect("config from the environment");
    let cluster = &config.clusters[0];
    assert_eq!(cluster.read_window, 250);
    assert!(!cluster.read_records);
    assert!(!cluster.transactions);
    assert_eq!(cluster.max_series, Some(5000));
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
    assert_eq!(config.listen.to_string(), "0.0.0.0:9745");
    assert!(!config.clusters[0].topics.accepts("__transaction_state"));
}

#[test]
fn merge_order_is_file_then_environment_then_flags() {
    let file = write_temp(
        "merge.toml",
        r#"
interval = "30s"
listen = "127.0.0.1:1111"
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
        with_env.listen.to_string(),
        "127.0.0.1:1111",
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
            format!("listen = \"everywhere\"\n{CLUSTER}"),
            vec![],
            "listen",
            "bad-",
        ),
        (
            "bad log format",
            format!("log_format = \"xml\"\n{CLUSTER}"),
            vec![],
            "log_format",
            "bad-",
        ),
        (
            "bad log level",
            format!("log_level = \"loud[\"\n{CLUSTER}"),
            vec![],
            "log_level",
            "bad-",
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
