//! `kafka-lso-exporter drill`: opens a real Kafka transaction, writes one record to each
//! selected partition and holds the transaction open, so operators can watch the last
//! stable offset (LSO) get pinned — on the exporter's metrics, dashboards and alerts, and
//! with `kafka-transactions.sh` — before a real incident makes them learn it.
//!
//! The drill always cleans up after itself: it aborts the transaction when the hold ends
//! or on SIGTERM/Ctrl-C, and with `--crash` it leaves the abort to the transaction
//! coordinator, which does it once `transaction.timeout.ms` has passed. Its records are
//! therefore never visible to read_committed consumers; read_uncommitted ones see them.
//!
//! Everything it did goes to stdout, in the words an operator needs: the partitions and the
//! offsets that pin them, the exact abort commands, and the series to watch. Bad arguments
//! exit 2, a failure talking to Kafka exits 1.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use kafka_lso_exporter::config::looks_secret;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{
    BaseRecord, DeliveryResult, NoCustomPartitioner, Producer, ProducerContext, ThreadedProducer,
};
use rdkafka::statistics::Statistics;
use rdkafka::types::RDKafkaErrorCode;

/// The broker's default `transaction.max.timeout.ms`: brokers refuse to initialise a
/// producer whose `transaction.timeout.ms` is longer.
const BROKER_DEFAULT_MAX_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Added to the hold for the default transaction timeout: enough for the abort to reach the
/// coordinator before it would abort on its own.
const TIMEOUT_MARGIN: Duration = Duration::from_secs(60);
/// librdkafka's smallest `transaction.timeout.ms`.
const MIN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(1);
/// Deadline of each blocking Kafka step (metadata, init, flush, abort).
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// The countdown prints at most this often.
const COUNTDOWN_EVERY: Duration = Duration::from_secs(30);
/// Client properties the drill sets from its own flags; `--client` must not override them.
const OWN_PROPERTIES: [(&str, &str); 4] = [
    ("bootstrap.servers", "--bootstrap-servers"),
    ("transactional.id", "--transactional-id"),
    ("transaction.timeout.ms", "--transaction-timeout"),
    (
        "allow.auto.create.topics",
        "nothing: the drill never creates topics",
    ),
];

/// Open a Kafka transaction and hold it, to see the last stable offset pinned.
///
/// Opens a transaction with a transactional producer, writes exactly one record to each
/// selected partition of TOPIC (default: every partition), and prints the offsets that now
/// pin each partition's last stable offset, the exact `kafka-transactions.sh abort`
/// commands, and the metrics and alerts to watch. It then holds the transaction open for
/// --hold and aborts it, so read_committed consumers never see the records. SIGTERM or
/// Ctrl-C during the hold aborts at once. With --crash it exits right after writing,
/// without ending the transaction, like a producer that died: the transaction coordinator
/// aborts it once the transaction timeout has passed.
///
/// This is a real outage for the read_committed consumers of those partitions, for as long
/// as the transaction stays open, and read_uncommitted consumers read the drill's records:
/// drill on a topic made for it.
///
/// The principal needs Write and Describe on the transactional id, and Write on the topic.
/// Exit status: 0 after the drill (also when interrupted), 1 when Kafka failed, 2 for bad
/// arguments (unknown topic or partition included).
#[derive(Debug, clap::Args)]
#[command(long_about)]
pub struct DrillArgs {
    /// Kafka bootstrap servers, host:port[,host:port...]
    #[arg(long, value_name = "LIST")]
    bootstrap_servers: String,

    /// Topic to write to; it must exist (the drill never creates topics)
    #[arg(long, value_name = "TOPIC")]
    topic: String,

    /// How long to hold the transaction open before aborting it, e.g. 90s or 10m
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_duration)]
    hold: Duration,

    /// Partitions to write to, comma-separated (e.g. 0,1,2) [default: every partition of
    /// the topic]
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        allow_negative_numbers = true,
        value_parser = clap::value_parser!(i32).range(0..)
    )]
    partitions: Vec<i32>,

    /// transactional.id of the drill's producer [default:
    /// kafka-lso-exporter-drill-<topic>-<pid>]
    #[arg(long, value_name = "ID")]
    transactional_id: Option<String>,

    /// transaction.timeout.ms: how long the coordinator waits before it aborts the
    /// transaction itself. Must be longer than --hold, and at most the brokers'
    /// transaction.max.timeout.ms (default 15m) [default: hold + 60s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    transaction_timeout: Option<Duration>,

    /// Exit right after writing, without ending the transaction (a producer that died);
    /// the coordinator aborts it after the transaction timeout. Use with
    /// --transaction-timeout to choose how long the partitions stay pinned
    #[arg(long, conflicts_with = "hold")]
    crash: bool,

    /// librdkafka client property KEY=VALUE for secured clusters (security.protocol,
    /// sasl.*, ssl.*); repeatable. Values of keys that look secret are never printed
    #[arg(long = "client", value_name = "KEY=VALUE", value_parser = parse_property)]
    client: Vec<(String, String)>,
}

/// Why the drill stopped early: bad arguments (exit 2) or Kafka (exit 1).
#[derive(Debug)]
enum Failure {
    Usage(String),
    Kafka(String),
}

/// The drill's settings, validated: what [`DrillArgs`] asks for, with defaults applied.
#[derive(Debug)]
struct Plan {
    bootstrap_servers: String,
    topic: String,
    /// Empty: every partition of the topic.
    partitions: BTreeSet<i32>,
    transactional_id: String,
    transaction_timeout: Duration,
    hold: Duration,
    crash: bool,
    client: Vec<(String, String)>,
}

/// Runs the drill and returns the process's exit status.
pub fn run(args: DrillArgs) -> ExitCode {
    let plan = match Plan::new(args, std::process::id()) {
        Ok(plan) => plan,
        Err(failure) => return report_failure(&failure, &Redactor::default()),
    };
    let redactor = Redactor::new(&plan.client);
    match drill(&plan, &redactor) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => report_failure(&failure, &redactor),
    }
}

fn report_failure(failure: &Failure, redactor: &Redactor) -> ExitCode {
    let (message, code) = match failure {
        Failure::Usage(message) => (message, 2),
        Failure::Kafka(message) => (message, 1),
    };
    eprintln!("kafka-lso-exporter drill: {}", redactor.redact(message));
    ExitCode::from(code)
}

impl Plan {
    fn new(args: DrillArgs, pid: u32) -> Result<Plan, Failure> {
        if args.topic.is_empty() {
            return Err(Failure::Usage("--topic must not be empty".into()));
        }
        for (key, _) in &args.client {
            if let Some((_, flag)) = OWN_PROPERTIES.iter().find(|(own, _)| own == key) {
                return Err(Failure::Usage(format!(
                    "--client {key}: the drill sets this itself; use {flag}"
                )));
            }
        }
        let transaction_timeout = args
            .transaction_timeout
            .unwrap_or(args.hold + TIMEOUT_MARGIN);
        if transaction_timeout < MIN_TRANSACTION_TIMEOUT
            || transaction_timeout.as_millis() > i32::MAX as u128
        {
            return Err(Failure::Usage(format!(
                "--transaction-timeout {}: must be between 1s and {}",
                humantime::format_duration(transaction_timeout),
                humantime::format_duration(Duration::from_millis(i32::MAX as u64))
            )));
        }
        // The coordinator would abort first, fence the producer, and the drill's own abort
        // would fail: a drill that cannot clean up after itself. --crash is that scenario,
        // on purpose.
        if !args.crash && transaction_timeout <= args.hold {
            return Err(Failure::Usage(format!(
                "--transaction-timeout {} must be longer than --hold {}: the coordinator would \
                 abort the transaction before the hold ends (use --crash to let it do that)",
                humantime::format_duration(transaction_timeout),
                humantime::format_duration(args.hold)
            )));
        }
        let transactional_id = args
            .transactional_id
            .unwrap_or_else(|| format!("kafka-lso-exporter-drill-{}-{pid}", args.topic));
        if transactional_id.is_empty() {
            return Err(Failure::Usage(
                "--transactional-id must not be empty".into(),
            ));
        }
        Ok(Plan {
            bootstrap_servers: args.bootstrap_servers,
            topic: args.topic,
            partitions: args.partitions.into_iter().collect(),
            transactional_id,
            transaction_timeout,
            hold: args.hold,
            crash: args.crash,
            client: args.client,
        })
    }

    /// The producer's configuration: the user's `--client` properties, then the drill's own.
    fn client_config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("client.id", "kafka-lso-exporter-drill");
        for (key, value) in &self.client {
            config.set(key, value);
        }
        config
            .set("bootstrap.servers", &self.bootstrap_servers)
            .set("transactional.id", &self.transactional_id)
            .set(
                "transaction.timeout.ms",
                self.transaction_timeout.as_millis().to_string(),
            )
            // A producer's metadata requests would create a misspelt topic on brokers with
            // auto.create.topics.enable; a drill must fail instead.
            .set("allow.auto.create.topics", "false")
            .set("linger.ms", "0")
            // The producer id and epoch are only exposed in the statistics.
            .set("statistics.interval.ms", "1000");
        config
    }
}

fn drill(plan: &Plan, redactor: &Redactor) -> Result<(), Failure> {
    print_plan(plan, redactor);
    let producer = create_producer(plan)?;
    let partitions = select_partitions(plan, &producer)?;
    init_transactions(plan, &producer)?;

    // From here on a signal must not kill the process with the transaction open: it is
    // caught, and acted on when the hold starts.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Kafka(format!("cannot start the async runtime: {e}")))?;
    let mut signals = {
        let _entered = runtime.enter();
        Signals::new().map_err(|e| Failure::Kafka(format!("cannot catch signals: {e}")))?
    };

    producer
        .begin_transaction()
        .map_err(|e| Failure::Kafka(format!("begin_transaction failed: {e}")))?;
    let offsets = match write_records(plan, &producer, &partitions) {
        Ok(offsets) => offsets,
        Err(failure) => {
            abort_after_failure(&producer, redactor);
            return Err(failure);
        }
    };
    let began = Instant::now();
    print_open_transaction(plan, &producer, &offsets);

    if plan.crash {
        print_crash(plan);
        // Exit like a producer that died: no EndTxn, no purge, no flush on drop.
        std::mem::forget(producer);
        return Ok(());
    }

    println!(
        "Holding the transaction open for {}; SIGTERM or Ctrl-C aborts it now.",
        humantime::format_duration(plan.hold)
    );
    let end = runtime.block_on(hold(plan.hold, &mut signals));
    let reason = match end {
        HoldEnd::Elapsed => "Hold over".to_string(),
        HoldEnd::Signal(name) => format!("{name} received"),
    };
    println!("{reason}: aborting the transaction");
    producer.abort_transaction(STEP_TIMEOUT).map_err(|e| {
        Failure::Kafka(format!(
            "abort_transaction failed: {e}{}. The transaction stays open until the \
             coordinator aborts it, at most {} after it began; or abort it by hand with \
             the commands above",
            producer.context().last_error_suffix(),
            humantime::format_duration(plan.transaction_timeout)
        ))
    })?;
    println!(
        "Aborted the transaction after {} open: the last stable offsets of {} partition(s) {} \
         move to their high watermarks as the coordinator writes the abort markers. Done.",
        humantime::format_duration(Duration::from_secs(began.elapsed().as_secs())),
        plan.topic,
        join(offsets.keys())
    );
    Ok(())
}

fn print_plan(plan: &Plan, redactor: &Redactor) {
    println!(
        "kafka-lso-exporter drill: a transaction on topic {} at {}",
        plan.topic, plan.bootstrap_servers
    );
    println!("  transactional.id        {}", plan.transactional_id);
    println!(
        "  transaction.timeout.ms  {} ({})",
        plan.transaction_timeout.as_millis(),
        humantime::format_duration(plan.transaction_timeout)
    );
    if plan.crash {
        println!("  then                    exit without ending it (--crash)");
    } else {
        println!(
            "  then                    hold it open for {}, then abort it",
            humantime::format_duration(plan.hold)
        );
    }
    if !plan.client.is_empty() {
        let properties: Vec<String> = plan
            .client
            .iter()
            .map(|(key, value)| format!("{key}={}", redactor.show(key, value)))
            .collect();
        println!("  client properties       {}", properties.join(" "));
    }
    if plan.transaction_timeout > BROKER_DEFAULT_MAX_TIMEOUT {
        println!(
            "  note: a transaction timeout of {} is above the brokers' default \
             transaction.max.timeout.ms (15m); brokers with that default refuse it",
            humantime::format_duration(plan.transaction_timeout)
        );
    }
}

fn create_producer(plan: &Plan) -> Result<DrillProducer, Failure> {
    plan.client_config()
        .create_with_context(DrillContext::default())
        .map_err(|e| match e {
            // The value is left out: it may be a secret, and the key names the problem.
            KafkaError::ClientConfig(_, description, key, _) => Failure::Usage(format!(
                "--client {key}: {}",
                description.replace('\n', " ")
            )),
            other => Failure::Usage(format!("cannot create the Kafka producer: {other}")),
        })
}

/// The partitions to write to: the ones asked for, each checked against the topic's
/// metadata, or every partition of the topic.
fn select_partitions(plan: &Plan, producer: &DrillProducer) -> Result<Vec<i32>, Failure> {
    let metadata = producer
        .client()
        .fetch_metadata(Some(&plan.topic), STEP_TIMEOUT)
        .map_err(|e| {
            Failure::Kafka(format!(
                "cannot read the metadata of {} from {}: {e}{}",
                plan.topic,
                plan.bootstrap_servers,
                producer.context().last_error_suffix()
            ))
        })?;
    let topic = metadata
        .topics()
        .iter()
        .find(|t| t.name() == plan.topic)
        .ok_or_else(|| Failure::Kafka(format!("no metadata for topic {}", plan.topic)))?;
    if let Some(error) = topic.error() {
        return Err(match RDKafkaErrorCode::from(error) {
            RDKafkaErrorCode::UnknownTopicOrPartition => Failure::Usage(format!(
                "topic {} does not exist at {}",
                plan.topic, plan.bootstrap_servers
            )),
            code => Failure::Kafka(format!("topic {}: {code}", plan.topic)),
        });
    }
    let existing: BTreeSet<i32> = topic.partitions().iter().map(|p| p.id()).collect();
    if plan.partitions.is_empty() {
        return Ok(existing.into_iter().collect());
    }
    let missing: Vec<&i32> = plan.partitions.difference(&existing).collect();
    if !missing.is_empty() {
        return Err(Failure::Usage(format!(
            "--partitions: topic {} has no partition {} (it has {} partition(s): {})",
            plan.topic,
            join(missing),
            existing.len(),
            join(&existing)
        )));
    }
    Ok(plan.partitions.iter().copied().collect())
}

fn init_transactions(plan: &Plan, producer: &DrillProducer) -> Result<(), Failure> {
    producer.init_transactions(STEP_TIMEOUT).map_err(|e| {
        let hint = match e.rdkafka_error_code() {
            Some(RDKafkaErrorCode::InvalidTransactionTimeout) => format!(
                ". The brokers refuse a transaction.timeout.ms of {} because it is above \
                 their transaction.max.timeout.ms (default 15m): pass a shorter \
                 --transaction-timeout (and --hold), or raise transaction.max.timeout.ms \
                 on the brokers",
                humantime::format_duration(plan.transaction_timeout)
            ),
            Some(RDKafkaErrorCode::TransactionalIdAuthorizationFailed) => format!(
                ". The principal needs Write and Describe on the transactional id {}",
                plan.transactional_id
            ),
            _ => producer.context().last_error_suffix(),
        };
        Failure::Kafka(format!("init_transactions failed: {e}{hint}"))
    })
}

/// Writes one record to each partition, flushes, and returns the offset of each record,
/// from its delivery report: the offset that now pins the partition's LSO.
fn write_records(
    plan: &Plan,
    producer: &DrillProducer,
    partitions: &[i32],
) -> Result<BTreeMap<i32, i64>, Failure> {
    let key = plan.transactional_id.as_bytes();
    let payload = format!(
        "kafka-lso-exporter drill {}: this record's transaction is always aborted",
        plan.transactional_id
    );
    for &partition in partitions {
        let record = BaseRecord::to(&plan.topic)
            .partition(partition)
            .key(key)
            .payload(payload.as_bytes());
        producer.send(record).map_err(|(e, _)| {
            Failure::Kafka(format!("cannot write to {}/{partition}: {e}", plan.topic))
        })?;
    }
    producer.flush(STEP_TIMEOUT).map_err(|e| {
        Failure::Kafka(format!(
            "the records were not acknowledged within {}: {e}{}",
            humantime::format_duration(STEP_TIMEOUT),
            producer.context().last_error_suffix()
        ))
    })?;
    let deliveries = producer.context().deliveries();
    let mut offsets = BTreeMap::new();
    let mut failures = Vec::new();
    for &partition in partitions {
        match deliveries.get(&partition) {
            Some(Ok(offset)) => {
                offsets.insert(partition, *offset);
            }
            Some(Err(e)) => failures.push(format!("{}/{partition}: {e}", plan.topic)),
            None => failures.push(format!("{}/{partition}: no delivery report", plan.topic)),
        }
    }
    if failures.is_empty() {
        Ok(offsets)
    } else {
        Err(Failure::Kafka(format!(
            "writing failed: {}",
            failures.join("; ")
        )))
    }
}

/// Best effort after a failed write: the transaction may hold records in some partitions.
fn abort_after_failure(producer: &DrillProducer, redactor: &Redactor) {
    match producer.abort_transaction(STEP_TIMEOUT) {
        Ok(()) => eprintln!("kafka-lso-exporter drill: aborted the transaction"),
        Err(e) => eprintln!(
            "kafka-lso-exporter drill: could not abort the transaction either ({}); the \
             coordinator aborts it after the transaction timeout",
            redactor.redact(&e.to_string())
        ),
    }
}

fn print_open_transaction(plan: &Plan, producer: &DrillProducer, offsets: &BTreeMap<i32, i64>) {
    println!();
    match producer.context().producer_id(Duration::from_millis(2500)) {
        Some((id, epoch)) => println!("Transaction open: producer id {id}, epoch {epoch}."),
        None => println!("Transaction open (librdkafka did not report the producer id)."),
    }
    println!(
        "Each partition's last stable offset (LSO) is now pinned at the offset of the drill's \
         record; read_committed consumers of {} stop there until the transaction ends.",
        plan.topic
    );
    println!("  topic {}", plan.topic);
    println!("  partition  offset");
    for (partition, offset) in offsets {
        println!("  {partition:>9}  {offset:>6}");
    }

    let command_config = if plan.client.is_empty() {
        ""
    } else {
        " --command-config CLIENT.properties"
    };
    let tool = format!(
        "kafka-transactions.sh --bootstrap-server {}{command_config}",
        plan.bootstrap_servers
    );
    println!();
    println!("Confirm (the CurrentTransactionStartOffset column shows the offset above):");
    if let Some(partition) = offsets.keys().next() {
        println!(
            "  {tool} describe-producers --topic {} --partition {partition}",
            plan.topic
        );
    }
    println!(
        "  {tool} describe --transactional-id {}",
        plan.transactional_id
    );
    println!("Abort by hand, as for a hanging transaction (needs ClusterAction):");
    for (partition, offset) in offsets {
        println!(
            "  {tool} abort --topic {} --partition {partition} --start-offset {offset}",
            plan.topic
        );
    }
    if !command_config.is_empty() {
        println!(
            "  (CLIENT.properties: your --client security settings, as Java client properties)"
        );
    }

    let selector = format!("topic=\"{}\"", plan.topic);
    println!();
    println!("Watch (PromQL):");
    println!(
        "  kafka_partition_hw_minus_lso{{{selector}}}       1 or more while pinned (the \
         drill's record, and everything written after it)"
    );
    println!("  kafka_partition_lso_stuck_seconds{{{selector}}}  grows while pinned");
    println!(
        "  kafka_transaction_open_info{{transactional_id=\"{}\"}}",
        plan.transactional_id
    );
    println!(
        "  alerts: KafkaLsoStuck (after 3m), KafkaLsoStuckCritical (after 15m), KafkaLsoGapHigh, \
         KafkaConsumerGroupBlockedByTransaction"
    );
    println!();
}

fn print_crash(plan: &Plan) {
    let deadline = SystemTime::now() + plan.transaction_timeout;
    println!(
        "--crash: exiting without ending the transaction. The transaction coordinator aborts \
         it once its transaction timeout of {} has passed, around {} (plus up to the brokers' \
         transaction.abort.timed.out.transaction.cleanup.interval.ms, default 10s).",
        humantime::format_duration(plan.transaction_timeout),
        humantime::format_rfc3339_seconds(deadline)
    );
}

#[derive(Debug, PartialEq)]
enum HoldEnd {
    Elapsed,
    Signal(&'static str),
}

/// Waits for `duration` or a signal, printing the time left at most every
/// [`COUNTDOWN_EVERY`].
async fn hold(duration: Duration, signals: &mut Signals) -> HoldEnd {
    let deadline = tokio::time::Instant::now() + duration;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return HoldEnd::Elapsed;
        }
        tokio::select! {
            name = signals.recv() => return HoldEnd::Signal(name),
            _ = tokio::time::sleep(left.min(COUNTDOWN_EVERY)) => {}
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left >= Duration::from_secs(1) {
            let left = Duration::from_secs(left.as_secs_f64().round() as u64);
            println!("  {} left", humantime::format_duration(left));
        }
    }
}

/// SIGINT and SIGTERM, caught from the moment they are created: a signal that arrives while
/// the records are being written is not lost, the hold then ends at once.
struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    /// Needs a Tokio runtime context.
    fn new() -> std::io::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Signals {
                interrupt: signal(SignalKind::interrupt())?,
                terminate: signal(SignalKind::terminate())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    async fn recv(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => "SIGINT",
                _ = self.terminate.recv() => "SIGTERM",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "Ctrl-C"
        }
    }
}

type DrillProducer = ThreadedProducer<DrillContext, NoCustomPartitioner>;

/// Collects what librdkafka reports on its own threads: delivery reports (the offsets), the
/// producer id and epoch (statistics), and the latest error, which explains a timeout.
#[derive(Default)]
struct DrillContext {
    deliveries: Mutex<BTreeMap<i32, Result<i64, String>>>,
    producer_id: Mutex<Option<(i64, i64)>>,
    last_error: Mutex<Option<String>>,
}

impl DrillContext {
    fn deliveries(&self) -> BTreeMap<i32, Result<i64, String>> {
        lock(&self.deliveries).clone()
    }

    /// The producer id and epoch, waiting up to `patience` for the next statistics.
    fn producer_id(&self, patience: Duration) -> Option<(i64, i64)> {
        let deadline = Instant::now() + patience;
        loop {
            if let Some(id) = *lock(&self.producer_id) {
                return Some(id);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// "; last error from librdkafka: ..." when there was one, for failure messages.
    fn last_error_suffix(&self) -> String {
        match &*lock(&self.last_error) {
            Some(error) => format!(" (last error from librdkafka: {error})"),
            None => String::new(),
        }
    }
}

/// librdkafka's log lines stay out of the drill's output (no logger is installed); its
/// errors are kept to explain a failed step.
impl ClientContext for DrillContext {
    fn error(&self, error: KafkaError, reason: &str) {
        // "N/N brokers are down" follows every connection failure and hides its cause.
        if error.rdkafka_error_code() != Some(RDKafkaErrorCode::AllBrokersDown) {
            *lock(&self.last_error) = Some(reason.to_string());
        }
    }

    fn stats(&self, statistics: Statistics) {
        if let Some(eos) = statistics.eos {
            if eos.producer_id >= 0 {
                *lock(&self.producer_id) = Some((eos.producer_id, eos.producer_epoch));
            }
        }
    }
}

impl ProducerContext for DrillContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let (partition, outcome) = match result {
            Ok(message) => (message.partition(), Ok(message.offset())),
            Err((error, message)) => (message.partition(), Err(error.to_string())),
        };
        lock(&self.deliveries).insert(partition, outcome);
    }
}

/// A poisoned lock only means a librdkafka callback panicked; the data is still usable.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps secret `--client` values out of everything the drill prints, including errors
/// from librdkafka that might quote them.
#[derive(Default)]
struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    fn new(client: &[(String, String)]) -> Redactor {
        Redactor {
            secrets: client
                .iter()
                .filter(|(key, value)| looks_secret(key) && !value.is_empty())
                .map(|(_, value)| value.clone())
                .collect(),
        }
    }

    fn show<'a>(&self, key: &str, value: &'a str) -> &'a str {
        if looks_secret(key) {
            "(not shown)"
        } else {
            value
        }
    }

    fn redact(&self, text: &str) -> String {
        self.secrets.iter().fold(text.to_string(), |text, secret| {
            text.replace(secret.as_str(), "(not shown)")
        })
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("{e}; expected a duration like 90s, 10m or 1h"))
}

fn parse_property(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_string(), value.to_string()))
        }
        _ => Err("expected KEY=VALUE, e.g. security.protocol=SASL_SSL".to_string()),
    }
}

fn join<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|item| item.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        drill: DrillArgs,
    }

    fn plan(args: &[&str]) -> Result<Plan, Failure> {
        let cli = Cli::try_parse_from(
            [
                "drill",
                "--bootstrap-servers",
                "k:9092",
                "--topic",
                "orders",
            ]
            .iter()
            .chain(args),
        )
        .map_err(|e| Failure::Usage(e.to_string()))?;
        Plan::new(cli.drill, 42)
    }

    fn usage(args: &[&str]) -> String {
        match plan(args) {
            Err(Failure::Usage(message)) => message,
            other => panic!("expected a usage error for {args:?}, got {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let plan = plan(&[]).unwrap();
        assert_eq!(plan.hold, Duration::from_secs(600));
        assert_eq!(plan.transaction_timeout, Duration::from_secs(660));
        assert_eq!(plan.transactional_id, "kafka-lso-exporter-drill-orders-42");
        assert!(plan.partitions.is_empty());
        assert!(!plan.crash);
    }

    #[test]
    fn partitions_and_client_properties() {
        let plan = plan(&[
            "--partitions",
            "2,0",
            "--partitions",
            "2",
            "--client",
            "sasl.password=a=b",
        ])
        .unwrap();
        assert_eq!(plan.partitions.into_iter().collect::<Vec<_>>(), [0, 2]);
        assert_eq!(
            plan.client,
            [("sasl.password".to_string(), "a=b".to_string())]
        );
    }

    #[test]
    fn bad_arguments() {
        assert!(usage(&["--hold", "soon"]).contains("--hold"));
        assert!(usage(&["--partitions", "-1"]).contains("--partitions"));
        assert!(usage(&["--client", "novalue"]).contains("KEY=VALUE"));
        assert!(usage(&["--client", "transactional.id=x"]).contains("--transactional-id"));
        assert!(usage(&["--hold", "1m", "--transaction-timeout", "1m"]).contains("longer"));
        assert!(usage(&["--transaction-timeout", "500ms", "--crash"]).contains("1s"));
        assert!(usage(&["--crash", "--hold", "1m"]).contains("--hold"));
    }

    #[test]
    fn crash_may_use_a_short_timeout() {
        let plan = plan(&["--crash", "--transaction-timeout", "5s"]).unwrap();
        assert_eq!(plan.transaction_timeout, Duration::from_secs(5));
    }

    #[test]
    fn secrets_are_not_shown() {
        let client = vec![
            ("sasl.password".to_string(), "hunter2".to_string()),
            ("sasl.username".to_string(), "alice".to_string()),
        ];
        let redactor = Redactor::new(&client);
        assert_eq!(redactor.show("sasl.password", "hunter2"), "(not shown)");
        assert_eq!(redactor.show("sasl.username", "alice"), "alice");
        assert_eq!(
            redactor.redact("login failed with hunter2 for alice"),
            "login failed with (not shown) for alice"
        );
    }
}
