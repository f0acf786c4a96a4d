//! Committed offsets through librdkafka's Admin ListConsumerGroupOffsets, the way the
//! exporter reads them where its own client cannot be used, while the group coordinator
//! does not answer: what each call leaves inside librdkafka stays bounded.
//!
//! librdkafka sends each ListConsumerGroupOffsets through a "coordinator request" that
//! looks the group's coordinator up (FindCoordinator), waits for a connection to it, then
//! sends OffsetFetch. Unpatched, that request outlived the Admin call's timeout for as
//! long as no broker connection changed state, so every cycle left one behind per group
//! (vendor/rdkafka-sys/PATCHED.md). The requests are invisible from the outside while the
//! coordinator is away; when a connection comes up, every request still waiting runs at
//! once, and each one whose coordinator is not in librdkafka's small coordinator cache
//! sends a FindCoordinator. The FindCoordinator requests librdkafka sends right after the
//! coordinator comes back, without being asked for anything, count the requests that
//! were left behind.
//!
//! The broker is reached through the test proxy (`scripts/kafka-local bootstrap
//! proxied`), which blackholes it for a while.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::proxy::{Mode, Proxy};
use common::*;
use kafka_lso_exporter::kafka::{list_consumer_group_offsets, CommittedOffset, GroupOffsetsError};
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::statistics::Statistics;

/// More groups than librdkafka's coordinator cache holds (11 entries), so that most
/// requests left behind look their coordinator up again.
const GROUPS: usize = 30;
/// Calls while the coordinator does not answer, each with the deadline of a short cycle.
const ROUNDS: usize = 10;
const ROUND: Duration = Duration::from_millis(300);

/// The latest statistics of a client (librdkafka's `statistics.interval.ms`).
#[derive(Clone, Default)]
struct Counted(Arc<Mutex<Option<Statistics>>>);

impl ClientContext for Counted {
    fn stats(&self, statistics: Statistics) {
        *self.0.lock().unwrap() = Some(statistics);
    }
}

impl ConsumerContext for Counted {}

impl Counted {
    /// FindCoordinator requests sent so far, over every broker handle.
    fn find_coordinator(&self) -> i64 {
        self.0
            .lock()
            .unwrap()
            .as_ref()
            .map(|s| {
                s.brokers
                    .values()
                    .filter_map(|b| b.req.get("FindCoordinator"))
                    .sum()
            })
            .unwrap_or(0)
    }

    /// Whether a connection to a broker with a node id (not a bootstrap address) is up.
    fn up(&self) -> bool {
        self.0
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|s| s.brokers.values().any(|b| b.nodeid >= 0 && b.state == "UP"))
    }
}

/// Serves the client's events (statistics among them) for `time`.
fn serve(client: &BaseConsumer<Counted>, time: Duration) {
    let end = Instant::now() + time;
    while Instant::now() < end {
        let _ = client.poll(Duration::from_millis(20));
    }
}

/// One call as a cycle makes it, with `time` until its deadline.
fn fetch(
    client: &BaseConsumer<Counted>,
    groups: &[String],
    time: Duration,
) -> Vec<Result<Vec<CommittedOffset>, GroupOffsetsError>> {
    tokio::task::block_in_place(|| {
        list_consumer_group_offsets(client.client(), groups, Instant::now() + time)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_for_a_coordinator_that_does_not_answer_stay_bounded() {
    require_kafka();
    let topic = unique("fallback-offsets");
    create_topic(&topic, 1).await;
    send(&plain_producer(), &topic, 0, GROUPS + 1);
    let groups: Vec<String> = (0..GROUPS).map(|i| format!("{topic}-g{i:02}")).collect();
    tokio::task::block_in_place(|| {
        for (i, group) in groups.iter().enumerate() {
            commit_offset(group, &topic, i as i64 + 1);
        }
    });

    let addr = |s: String| s.parse().unwrap();
    let proxy = Proxy::start(addr(listener(5)), addr(listener(4))).await;
    let context = Counted::default();
    let client: BaseConsumer<Counted> = ClientConfig::new()
        .set("bootstrap.servers", listener(5))
        // As the exporter's clients (src/kafka/cycle.rs).
        .set("reconnect.backoff.max.ms", "1000")
        .set("enable.auto.commit", "false")
        .set("statistics.interval.ms", "100")
        .create_with_context(context.clone())
        .unwrap();

    // The coordinator answers: every group's offset.
    let answers = fetch(&client, &groups, Duration::from_secs(15));
    for (i, answer) in answers.iter().enumerate() {
        let offsets = answer
            .as_ref()
            .unwrap_or_else(|e| panic!("group {}: {e}", groups[i]));
        assert_eq!(
            offsets.iter().map(|o| o.offset).collect::<Vec<_>>(),
            vec![i as i64 + 1],
            "group {}",
            groups[i]
        );
    }

    // It stops answering: the open connections are cut, new ones are swallowed.
    proxy.set_mode(Mode::Blackhole);
    proxy.cut_all();
    serve(&client, Duration::from_secs(1));
    for round in 0..ROUNDS {
        let answers = fetch(&client, &groups, ROUND);
        assert!(
            answers.iter().all(Result::is_err),
            "round {round}: an answer through a blackhole: {answers:?}"
        );
    }
    serve(&client, Duration::from_secs(1));
    let before = context.find_coordinator();

    // It answers again. Nothing is asked of the client meanwhile: whatever it sends comes
    // from the requests still waiting inside librdkafka.
    proxy.set_mode(Mode::Forward);
    proxy.cut_all();
    let up_by = Instant::now() + Duration::from_secs(20);
    while !context.up() {
        assert!(
            Instant::now() < up_by,
            "no connection 20 s after the proxy forwards again"
        );
        serve(&client, Duration::from_millis(100));
    }
    serve(&client, Duration::from_secs(3));
    let left_behind = context.find_coordinator() - before;
    println!(
        "{GROUPS} groups, {ROUNDS} calls of {} ms while the coordinator did not answer: \
         {left_behind} FindCoordinator requests sent by the requests still waiting when it came back",
        ROUND.as_millis()
    );
    assert!(
        left_behind <= GROUPS as i64,
        "{left_behind} requests were left behind inside librdkafka by {ROUNDS} calls for \
         {GROUPS} groups: more than one per group"
    );

    // And every group answers again.
    let answers = fetch(&client, &groups, Duration::from_secs(15));
    assert!(
        answers.iter().all(Result::is_ok),
        "after the coordinator came back: {answers:?}"
    );
    drop(proxy);
}

/// A coordinator that answers NOT_COORDINATOR (it moved, as in every rolling restart):
/// librdkafka 2.12.1 asked its consumer group, which an Admin client does not have, to
/// look the coordinator up again, and crashed the process (rd_kafka_cgrp_op on a null
/// group, confluentinc/librdkafka#5040). The group is asked again and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_coordinator_that_moved_is_asked_again() {
    const NOT_COORDINATOR: i16 = 16;
    require_kafka();
    let topic = unique("fallback-moved");
    create_topic(&topic, 1).await;
    send(&plain_producer(), &topic, 0, 3);
    let groups = vec![format!("{topic}-a"), format!("{topic}-b")];
    tokio::task::block_in_place(|| {
        for (i, group) in groups.iter().enumerate() {
            commit_offset(group, &topic, i as i64 + 1);
        }
    });
    let addr = |s: String| s.parse().unwrap();
    let proxy = Proxy::start(addr(listener(5)), addr(listener(4))).await;
    proxy.fail_offset_fetch_with(&groups[0], 1, NOT_COORDINATOR);
    let client: BaseConsumer<Counted> = ClientConfig::new()
        .set("bootstrap.servers", listener(5))
        .set("reconnect.backoff.max.ms", "1000")
        .set("enable.auto.commit", "false")
        .create_with_context(Counted::default())
        .unwrap();
    let answers = fetch(&client, &groups, Duration::from_secs(15));
    assert_eq!(
        proxy.injected(),
        1,
        "the proxy answered NOT_COORDINATOR once"
    );
    for (i, answer) in answers.iter().enumerate() {
        let offsets = answer
            .as_ref()
            .unwrap_or_else(|e| panic!("group {}: {e}", groups[i]));
        assert_eq!(
            offsets.iter().map(|o| o.offset).collect::<Vec<_>>(),
            vec![i as i64 + 1],
            "group {}",
            groups[i]
        );
    }
    drop(proxy);
}
