//! The binary: parse flags, load the config, start logging, call [`kafka_lso_exporter::run`].
//! The `drill` subcommand instead opens a transaction on purpose ([`drill`]).

mod drill;

/// A heap profile of the Rust side (bench/memory.rs): built with `--features dhat-heap`,
/// every allocation is tracked, and `dhat-heap.json` is written in the working directory
/// after DHAT_HEAP_SECONDS (default 150) while the exporter runs on.
#[cfg(feature = "dhat-heap")]
#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

#[cfg(feature = "dhat-heap")]
fn start_heap_profile() {
    let seconds: u64 = std::env::var("DHAT_HEAP_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    let profiler = dhat::Profiler::new_heap();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(seconds));
        drop(profiler);
    });
}

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use kafka_lso_exporter::config::{Config, Overrides};
use kafka_lso_exporter::kafka_exporter_flags;
use kafka_lso_exporter::logging::{Promslog, SpanFields};
use kafka_lso_exporter::serve::web::WebConfig;

/// Prometheus exporter for Kafka transactional visibility.
///
/// For every partition it samples the high watermark (what read_uncommitted consumers can
/// read) and the last stable offset (what read_committed consumers can read), every
/// consumer group's committed offsets, and serves the gap between them, how long each
/// last stable offset has been stuck, consumer lag against both, and which open
/// transaction holds each stuck partition on /metrics; / and /api/v1/stuck list the
/// stuck partitions with the groups they block.
///
/// Settings come from the config file, then KAFKA_LSO_EXPORTER_* environment variables
/// (nested keys joined by "__", e.g. KAFKA_LSO_EXPORTER_CLUSTERS__0__BOOTSTRAP_SERVERS),
/// then these flags. Quick start: kafka-lso-exporter --bootstrap-servers localhost:9092
///
/// To rehearse a stuck transaction, see: kafka-lso-exporter drill --help
///
/// kafka_exporter's command line is taken too: any flag only kafka_exporter has
/// (--kafka.server=HOST:PORT, --topic.filter, ...) serves one cluster with kafka_exporter's
/// metric families on :9308; kafka-lso-exporter --kafka.server=x --help lists its flags.
#[derive(Debug, Parser)]
#[command(name = "kafka-lso-exporter", version = VERSION, about, long_about)]
// The exporter's flags belong to the exporter: mixing them with a subcommand is an error,
// not silently ignored.
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// TOML config file [default: kafka-lso-exporter.toml, if present]
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Validate the configuration, print a summary and exit
    #[arg(long)]
    check_config: bool,

    /// With --check-config: also connect to every cluster, run a few sampling cycles and
    /// print, per feature, whether it works and if not why (the ACL on the resource, the
    /// API a broker lacks, the setting that turns it off); exits 1 when a cluster cannot
    /// be reached or a feature the configuration asks for cannot work
    #[arg(long, requires = "check_config")]
    connect: bool,

    /// Kafka bootstrap servers of the (first) cluster, host:port[,host:port...]
    #[arg(long, value_name = "LIST", help_heading = "Kafka")]
    bootstrap_servers: Option<String>,

    /// Name of the (first) cluster, the `kafka_cluster` label [default: default]
    #[arg(long, value_name = "NAME", help_heading = "Kafka")]
    cluster_name: Option<String>,

    /// Sampling interval, e.g. 15s or 1m [default: 15s]
    #[arg(long, value_name = "DURATION", help_heading = "Sampling")]
    interval: Option<String>,

    /// Deadline of one sampling cycle [default: the interval]
    #[arg(long, value_name = "DURATION", help_heading = "Sampling")]
    timeout: Option<String>,

    /// Address to serve on; repeat it to serve on several. ":9745" is every interface,
    /// IPv6 and IPv4 [default: :9745]
    #[arg(
        long = "web.listen-address",
        value_name = "ADDR",
        action = clap::ArgAction::Append,
        help_heading = "Web"
    )]
    web_listen_addresses: Vec<String>,

    /// Path under which to expose metrics [default: /metrics]
    #[arg(long = "web.telemetry-path", value_name = "PATH", help_heading = "Web")]
    web_telemetry_path: Option<String>,

    /// Web config file (Prometheus exporter-toolkit format): TLS, basic auth and
    /// response headers for every path [default: plain HTTP, no auth]
    #[arg(long = "web.config.file", value_name = "FILE", help_heading = "Web")]
    web_config_file: Option<PathBuf>,

    /// Only log messages with the given severity or above: debug, info, warn, error, or
    /// a filter such as info,librdkafka=warn [default: info]
    #[arg(long = "log.level", value_name = "LEVEL", help_heading = "Logging")]
    log_level: Option<String>,

    /// Output format of log messages: logfmt or json [default: logfmt]
    #[arg(long = "log.format", value_name = "FORMAT", help_heading = "Logging")]
    log_format: Option<String>,
}

/// Flags of earlier versions and the flags that replaced them.
const RENAMED_FLAGS: &[(&str, &str)] = &[
    ("--listen", "--web.listen-address (repeatable)"),
    ("--log-level", "--log.level"),
    ("--log-format", "--log.format (logfmt or json)"),
];

/// The first flag of an earlier version on the command line, with its new name. Looked
/// for before parsing, so that the answer is the new name rather than "unexpected
/// argument".
fn renamed_flag(args: &[OsString]) -> Option<(&'static str, &'static str)> {
    args.iter()
        .skip(1)
        .map_while(|arg| arg.to_str().filter(|arg| *arg != "--"))
        .find_map(|arg| {
            let flag = arg.split_once('=').map_or(arg, |(flag, _)| flag);
            RENAMED_FLAGS.iter().copied().find(|(old, _)| *old == flag)
        })
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    Drill(drill::DrillArgs),
}

const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (revision ",
    env!("GIT_REVISION"),
    ", features ",
    env!("BUILD_FEATURES"),
    ")"
);

/// Where Strimzi's image has its Kafka Exporter's run script, and this image has its own.
const STRIMZI_RUN_SCRIPT: &str = "/opt/kafka-exporter/kafka_exporter_run.sh";

/// How the process was started: this exporter's flags, or kafka_exporter's.
struct Start {
    config: Option<PathBuf>,
    check_config: bool,
    connect: bool,
    overrides: Overrides,
    /// What kafka_exporter's flags became, logged once logging has started.
    notes: Vec<String>,
}

/// Strimzi starts its exporter container with `args: [/opt/kafka-exporter/kafka_exporter_run.sh]`,
/// which follow this image's entrypoint: run that script (it turns the operator's
/// environment into kafka_exporter's flags and starts this binary with them).
fn strimzi_run_script(args: &[OsString]) -> Option<ExitCode> {
    let script = args.get(1)?;
    if args.len() != 2 || script != STRIMZI_RUN_SCRIPT {
        return None;
    }
    use std::os::unix::process::CommandExt;
    let error = std::process::Command::new("/bin/sh")
        .arg(script)
        .args(&args[2..])
        .exec();
    eprintln!(
        "kafka-lso-exporter: cannot run {}: {error}",
        script.to_string_lossy()
    );
    Some(ExitCode::FAILURE)
}

/// `--sasl.password` given once on the command line (as the prometheus-kafka-exporter chart
/// renders it, `--sasl.password=$(SCRAM_PASSWORD)`): the process starts itself again with
/// the password in `SASL_USER_PASSWORD`, which kafka_exporter also reads, and without it on
/// the command line, where every user of the node could read it in `/proc/PID/cmdline`
/// (the environment is readable by the process's own user only). The process keeps its
/// PID. Returns only when that cannot be done, and then the command line stays as it was.
fn scrub_password(args: &[OsString]) {
    let flag = |a: &OsString| {
        let a = a.to_string_lossy();
        a == "--sasl.password" || a.starts_with("--sasl.password=")
    };
    if args.iter().filter(|a| flag(a)).count() != 1 {
        return;
    }
    let at = args.iter().position(flag).unwrap_or(0);
    let (password, taken) = match args[at]
        .to_str()
        .and_then(|a| a.strip_prefix("--sasl.password="))
    {
        Some(value) => (OsString::from(value), 1),
        None => match args.get(at + 1) {
            Some(value) => (value.clone(), 2),
            None => return,
        },
    };
    if password.is_empty() {
        return;
    }
    let rest: Vec<&OsString> = args[1..at].iter().chain(&args[at + taken..]).collect();
    use std::os::unix::process::CommandExt;
    let error = std::process::Command::new("/proc/self/exe")
        .arg0(&args[0])
        .args(rest)
        .env("SASL_USER_PASSWORD", password)
        .exec();
    eprintln!(
        "kafka-lso-exporter: the SASL password stays on the command line (cannot start again without it: {error})"
    );
}

/// The command line as kafka_exporter's ([`kafka_lso_exporter::kafka_exporter_flags`]).
fn kafka_exporter_start(args: &[OsString]) -> Result<Start, ExitCode> {
    scrub_password(args);
    let rest: Vec<String> = match args[1..].iter().map(|a| a.clone().into_string()).collect() {
        Ok(rest) => rest,
        Err(arg) => {
            eprintln!("kafka-lso-exporter: {arg:?} is not UTF-8");
            return Err(ExitCode::from(2));
        }
    };
    if rest
        .iter()
        .any(|a| a == "--help" || a == "-h" || a == "--help-long")
    {
        print!("{}", kafka_exporter_flags::help());
        return Err(ExitCode::SUCCESS);
    }
    if rest.iter().any(|a| a == "--version") {
        println!("kafka-lso-exporter {VERSION}");
        return Err(ExitCode::SUCCESS);
    }
    match kafka_exporter_flags::translate(&rest, |name| std::env::var(name).ok()) {
        Ok(translation) => {
            // Before any thread starts.
            for (name, value) in &translation.env {
                std::env::set_var(name, value);
            }
            let mut notes = vec![format!(
                "started with kafka_exporter's flags: one cluster, kafka_exporter's metric families on ({} flags read)",
                rest.len()
            )];
            notes.extend(translation.notes);
            Ok(Start {
                config: translation.config,
                check_config: translation.check_config,
                connect: translation.connect,
                overrides: translation.overrides,
                notes,
            })
        }
        Err(error) => {
            eprintln!("kafka-lso-exporter: {error}; see --help");
            Err(ExitCode::from(2))
        }
    }
}

/// The exporter's own command line: how to start, or the exit code of a subcommand or a
/// renamed flag.
fn cli_start(args: Vec<OsString>) -> Result<Start, ExitCode> {
    if let Some((old, new)) = renamed_flag(&args) {
        eprintln!("kafka-lso-exporter: {old} was renamed to {new}; see --help");
        return Err(ExitCode::from(2));
    }
    let cli = Cli::parse_from(args);
    if let Some(Command::Drill(args)) = cli.command {
        return Err(drill::run(args));
    }
    Ok(Start {
        config: cli.config,
        check_config: cli.check_config,
        connect: cli.connect,
        overrides: Overrides {
            listen_addresses: cli.web_listen_addresses,
            telemetry_path: cli.web_telemetry_path,
            web_config_file: cli.web_config_file,
            interval: cli.interval,
            timeout: cli.timeout,
            log_level: cli.log_level,
            log_format: cli.log_format,
            bootstrap_servers: cli.bootstrap_servers,
            cluster_name: cli.cluster_name,
            cluster_settings: Default::default(),
        },
        notes: Vec::new(),
    })
}

fn main() -> ExitCode {
    kafka_lso_exporter::memory::tune();
    let args: Vec<OsString> = std::env::args_os().collect();
    if let Some(code) = strimzi_run_script(&args) {
        return code;
    }
    let start = if kafka_exporter_flags::applies(&args) {
        match kafka_exporter_start(&args) {
            Ok(start) => start,
            Err(code) => return code,
        }
    } else {
        match cli_start(args) {
            Ok(start) => start,
            Err(code) => return code,
        }
    };
    let config = match Config::load(start.config.as_deref(), std::env::vars(), &start.overrides) {
        Ok(config) => config,
        Err(error) => {
            eprintln!("kafka-lso-exporter: invalid configuration: {error}");
            return ExitCode::from(2);
        }
    };
    for (index, cluster) in config.clusters.iter().enumerate() {
        if let Err(error) = kafka_lso_exporter::kafka::check_client(index, cluster) {
            eprintln!("kafka-lso-exporter: invalid configuration: {error}");
            return ExitCode::from(2);
        }
    }
    let web = match config
        .web
        .config_file
        .as_deref()
        .map(WebConfig::load)
        .transpose()
    {
        Ok(web) => web,
        Err(error) => {
            eprintln!("kafka-lso-exporter: invalid configuration: {error}");
            return ExitCode::from(2);
        }
    };
    if start.check_config {
        print_config_check(&config, web.as_ref());
        if start.connect {
            return connect_check(&config);
        }
        return ExitCode::SUCCESS;
    }
    init_logging(&config);
    for note in &start.notes {
        tracing::info!("{note}");
    }
    #[cfg(feature = "dhat-heap")]
    start_heap_profile();
    for variable in &config.ignored_env {
        tracing::debug!(%variable, "ignored: a Kubernetes service-link variable, not a setting");
    }

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("kafka-lso-exporter: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        let mut listeners = Vec::new();
        for address in &config.web.listen_addresses {
            let listener = address
                .bind()
                .await
                .map_err(|e| format!("cannot listen on {address}: {e}"))?;
            listeners.push(listener);
        }
        kafka_lso_exporter::run_with(config, listeners, web, shutdown_signal())
            .await
            .map_err(|e| e.to_string())
    });
    // A sampling cycle blocked in a Kafka call ends by its own deadline; do not wait for it.
    runtime.shutdown_timeout(Duration::from_millis(500));
    match result {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(error) => {
            tracing::error!("{error}");
            eprintln!("kafka-lso-exporter: {error}");
            ExitCode::FAILURE
        }
    }
}

/// What `--check-config` prints of a valid configuration: where it listens, the clusters,
/// the web config, the replicas' coordination, the variables it ignored.
fn print_config_check(config: &Config, web: Option<&WebConfig>) {
    println!(
        "configuration ok: listen {}, metrics at {}, interval {:?}, timeout {:?}, {} cluster(s): {}",
        config
            .web
            .listen_addresses
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" "),
        config.web.telemetry_path,
        config.interval,
        config.timeout,
        config.clusters.len(),
        config
            .clusters
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(web) = web {
        println!(
            "web config ok: {}, TLS {}, basic auth {}",
            web.path().display(),
            if web.tls_enabled() { "on" } else { "off" },
            match web.basic_auth_users() {
                0 => "off".to_string(),
                n => format!("for {n} user(s)"),
            }
        );
        for warning in web.warnings() {
            println!("web config warning: {warning}");
        }
    }
    if let Some(ha) = &config.ha {
        println!(
            "ha: replicas share the clusters through a coordination group {} on each cluster \
             (session timeout {:?}, heartbeat {:?}); the principal needs Read on that group in every cluster",
            ha.group, ha.session_timeout, ha.heartbeat_interval
        );
        if ha.cluster.is_some() {
            println!(
                "ha warning: ha.cluster is deprecated and ignored: each cluster's share is coordinated on that cluster; remove it"
            );
        }
    }
    if !config.ignored_env.is_empty() {
        println!(
            "ignored {} Kubernetes service-link variable(s): {}",
            config.ignored_env.len(),
            config.ignored_env.join(" ")
        );
    }
}

/// `--check-config --connect`: the capability map of every cluster, as a table.
fn connect_check(config: &Config) -> ExitCode {
    use kafka_lso_exporter::kafka::features::Feature;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("kafka-lso-exporter: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let checks = runtime.block_on(kafka_lso_exporter::connect_check(
        config,
        4,
        Duration::from_secs(3),
    ));
    runtime.shutdown_timeout(Duration::from_millis(500));
    let checks = match checks {
        Ok(checks) => checks,
        Err(error) => {
            eprintln!("kafka-lso-exporter: {error}");
            return ExitCode::FAILURE;
        }
    };
    let mut passed = true;
    let mut not_exercised = 0;
    for check in &checks {
        passed &= check.passed();
        match &check.unreachable {
            Some(reason) => println!("cluster {}: cannot reach it: {reason}", check.cluster),
            None => println!("cluster {}: reached", check.cluster),
        }
        for feature in Feature::ALL {
            match check.features.get(&feature) {
                // Of a cluster it cannot reach now, only what is known not to work.
                Some(state) if check.unreachable.is_some() && state.status.works() => {}
                Some(state) if state.reason.is_empty() => {
                    println!(
                        "  {:<22} {:<11} {}",
                        feature.as_str(),
                        state.status.as_str(),
                        feature.gives()
                    )
                }
                Some(state) => println!(
                    "  {:<22} {:<11} {}: {}",
                    feature.as_str(),
                    state.status.as_str(),
                    feature.gives(),
                    state.reason
                ),
                // Of a cluster it cannot reach, only what is known not to work is said.
                None if check.unreachable.is_some() => {}
                None => {
                    not_exercised += 1;
                    println!(
                        "  {:<22} {:<11} {}: not exercised by these cycles (no traffic that needs it)",
                        feature.as_str(),
                        "unknown",
                        feature.gives()
                    )
                }
            }
        }
        if check.unreachable.is_some() {
            println!("  (what works is known once the cluster is reached)");
        }
    }
    match (passed, not_exercised) {
        (true, 0) => {
            println!("connect check ok: every cluster reached, every feature asked for works");
            ExitCode::SUCCESS
        }
        (true, n) => {
            println!(
                "connect check ok: every cluster reached, every feature exercised works; {n} not exercised (see above)"
            );
            ExitCode::SUCCESS
        }
        (false, _) => {
            println!("connect check FAILED: see the lines above");
            ExitCode::FAILURE
        }
    }
}

/// Log lines on standard error, as promslog writes them (see [`kafka_lso_exporter::logging`]).
fn init_logging(config: &Config) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new(&config.log.level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .fmt_fields(SpanFields)
        .event_format(Promslog::new(config.log.format))
        .init();
}

/// Completes on SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}
