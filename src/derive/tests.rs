//! The derivation's table-driven tests, with the seed numbers.

use super::offsets::age_seconds;
use super::*;
use crate::kafka::{
    CommittedOffset, CoordinatorView, PartitionLog, RawGroup, RawPartition, RawSample,
    RawTransaction,
};

#[test]
fn hw_minus_lso_table() {
    // (high watermark, last stable offset, expected gap, anomaly)
    let cases = [
        (900_000, 880_000, 20_000, None),
        (900, 880, 20, None),
        (901, 901, 0, None),
        (0, 0, 0, None),
        (10, 12, 0, Some(Anomaly::LsoAboveHighWatermark)),
    ];
    for (hw, lso, gap, anomaly) in cases {
        assert_eq!(hw_minus_lso(hw, lso), (gap, anomaly), "hw {hw} lso {lso}");
    }
}

#[test]
fn offsets_at_the_ends_of_the_range_saturate() {
    // What a broken or hostile broker could send: no overflow, only clamped values.
    assert_eq!(
        hw_minus_lso(i64::MIN, i64::MAX),
        (0, Some(Anomaly::LsoAboveHighWatermark))
    );
    assert_eq!(hw_minus_lso(i64::MAX, i64::MIN), (i64::MAX, None));
    let (lag_max, anomaly) = lag(i64::MIN, i64::MAX, i64::MAX, None);
    assert_eq!((lag_max.hw_lag, lag_max.lso_lag), (i64::MAX, i64::MAX));
    assert_eq!((lag_max.committed_beyond_lso, anomaly), (0, None));
    let (lag_min, anomaly) = lag(i64::MAX, i64::MIN, i64::MIN, None);
    assert_eq!((lag_min.hw_lag, lag_min.lso_lag), (0, 0));
    assert_eq!(lag_min.committed_beyond_lso, i64::MAX);
    assert_eq!(anomaly, Some(Anomaly::CommittedBeyondHighWatermark));
    assert_eq!(age_seconds(i64::MAX, i64::MIN), i64::MAX as f64 / 1000.0);
    assert_eq!(age_seconds(i64::MIN, i64::MAX), 0.0);
}

#[test]
fn lag_table() {
    // (committed, HW, LSO) -> (hw_lag, lso_lag, beyond_lso, anomaly)
    let cases = [
        // A read_committed group caught up behind an open transaction (the worked example).
        (880_000, 900_000, 880_000, (20_000, 0, 0, None)),
        (880, 900, 880, (20, 0, 0, None)),
        // The transaction committed: the whole backlog is visible at once.
        (880, 901, 901, (21, 21, 0, None)),
        // A read_uncommitted group past the LSO.
        (20, 20, 10, (0, 0, 10, None)),
        // Caught up on a topic without open transactions; the committed offset can
        // equal the HW although the last delivered record is HW - 2 (a marker follows it).
        (3, 3, 3, (0, 0, 0, None)),
        (100, 150, 150, (50, 50, 0, None)),
        // Committed beyond the HW (truncation): clamped and counted.
        (
            12,
            10,
            10,
            (0, 0, 2, Some(Anomaly::CommittedBeyondHighWatermark)),
        ),
    ];
    for (committed, hw, lso, (hw_lag, lso_lag, beyond, anomaly)) in cases {
        let expected = Lag {
            hw_lag,
            lso_lag,
            committed_beyond_lso: beyond,
        };
        assert_eq!(
            lag(committed, hw, lso, None),
            (expected, anomaly),
            "committed {committed} hw {hw} lso {lso}"
        );
    }
}

#[test]
fn stuck_clock_runs_while_pinned_and_resets() {
    let topic: Arc<str> = Arc::from("orders");
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let mut clock = StuckClock::default();
    // (time, hw, lso, expected stuck seconds, pinned)
    let steps = [
        (0, 880, 880, 0, false),  // nothing open
        (15, 900, 880, 0, false), // first seen pinned: the clock starts now
        (30, 950, 880, 15, true), // still pinned at 880
        (45, 990, 880, 30, true),
        // The LSO moved on to another open transaction: the clock restarts, and the
        // partition stays pinned (it stood still right before).
        (60, 995, 990, 0, true),
        (75, 999, 990, 15, true),
        (90, 1001, 1001, 0, false), // all decided
        (105, 1010, 1001, 0, false),
        (120, 1020, 1001, 15, true),
        // A busy exactly-once partition from here: some transaction is always open,
        // the LSO moves every time. Pinned once more (it stood still before), then not.
        (135, 1030, 1025, 0, true),
        (150, 1040, 1035, 0, false),
        (165, 1050, 1045, 0, false),
    ];
    for (t, hw, lso, expected, pinned) in steps {
        let stuck = clock.observe(&topic, 0, hw, lso, at(t), None);
        assert_eq!(clock.pinned(&topic, 0), pinned, "pinned at t={t}s");
        assert_eq!(
            stuck,
            Duration::from_secs(expected),
            "t={t} hw={hw} lso={lso}"
        );
    }
}

#[test]
fn stuck_clock_takes_the_coordinators_age_only_when_it_missed_the_arrival() {
    let topic: Arc<str> = Arc::from("orders");
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let open = |s: u64| Some(Duration::from_secs(s));

    // Started while pinned: the transaction at the LSO has been open for 600 s.
    let mut clock = StuckClock::default();
    assert_eq!(
        clock.observe(&topic, 0, 900, 880, at(0), open(600)),
        Duration::from_secs(600)
    );
    assert_eq!(
        clock.observe(&topic, 0, 950, 880, at(15), open(615)),
        Duration::from_secs(615)
    );
    // Without forensics, the clock's own count.
    assert_eq!(
        clock.observe(&topic, 0, 950, 880, at(30), None),
        Duration::from_secs(30)
    );

    // Seen unpinned first: the LSO arrived while watched, the clock is exact; an older
    // transaction start (an earlier one held the LSO before) does not count.
    let mut clock = StuckClock::default();
    clock.observe(&topic, 1, 880, 880, at(0), None);
    clock.observe(&topic, 1, 900, 880, at(15), open(400));
    assert_eq!(
        clock.observe(&topic, 1, 950, 880, at(30), open(415)),
        Duration::from_secs(15)
    );

    // Seen pinned at another LSO first: the move to 890 was watched.
    let mut clock = StuckClock::default();
    clock.observe(&topic, 2, 900, 880, at(0), open(100));
    assert_eq!(
        clock.observe(&topic, 2, 950, 890, at(15), open(500)),
        Duration::ZERO
    );
    assert_eq!(
        clock.observe(&topic, 2, 960, 890, at(30), open(515)),
        Duration::from_secs(15)
    );
}

pub(crate) fn raw_transaction(
    state: &str,
    producer_id: i64,
    coordinator_epoch: i16,
    includes: bool,
) -> RawTransaction {
    RawTransaction {
        producer_id: 4001,
        producer_epoch: 3,
        start_offset: 880,
        last_timestamp_ms: 1_000_000,
        coordinator: CoordinatorView::Found(crate::kafka::CoordinatorTransaction {
            coordinator: 2,
            transactional_id: "etl".into(),
            state: state.into(),
            producer_id,
            producer_epoch: coordinator_epoch,
            start_time_ms: 990_000,
            timeout_ms: 60_000,
            includes_partition: includes,
        }),
    }
}

#[test]
fn open_transaction_age_and_hanging_rule() {
    use CoordinatorStatus::*;
    // The coordinator started the transaction at 990 s, the producer last wrote at
    // 1,000 s (by its own clock, which dates nothing); the broker allows 900 s, the
    // margin is 60 s.
    let (max_ms, margin_ms) = (900_000, 60_000);
    let young = 1_010_000;
    // (raw, transactional id, state, coordinator status, age at `young`)
    let cases = [
        (
            raw_transaction("Ongoing", 4001, 3, true),
            "etl",
            Some("Ongoing"),
            Open,
            Some(20.0),
        ),
        // The coordinator's epoch moved on (fenced): not this partition's transaction.
        (
            raw_transaction("Ongoing", 4001, 4, true),
            "etl",
            Some("Ongoing"),
            Disagrees,
            None,
        ),
        // The coordinator's transaction does not include this partition.
        (
            raw_transaction("Ongoing", 4001, 3, false),
            "etl",
            Some("Ongoing"),
            Disagrees,
            None,
        ),
        // Markers being written: open, whatever the epoch (KIP-890 bumps it).
        (
            raw_transaction("PrepareCommit", 4001, 4, true),
            "etl",
            Some("PrepareCommit"),
            Open,
            Some(20.0),
        ),
        (
            raw_transaction("CompleteAbort", 4001, 4, false),
            "etl",
            Some("CompleteAbort"),
            Open,
            Some(20.0),
        ),
        // The coordinator holds nothing open for this producer.
        (
            raw_transaction("Empty", 4001, 3, false),
            "etl",
            Some("Empty"),
            Disagrees,
            None,
        ),
        // The transactional id now belongs to another producer id.
        (
            raw_transaction("Ongoing", 5000, 0, true),
            "",
            None,
            Disagrees,
            None,
        ),
    ];
    let none = Witness::default();
    let derive = |raw: &RawTransaction, now_ms: i64, witness: Witness| {
        OpenTransaction::derive(raw, now_ms, max_ms, margin_ms, witness)
    };
    for (raw, id, state, status, age) in cases {
        let t = derive(&raw, young, none);
        assert_eq!(
            (
                t.transactional_id.as_str(),
                t.state.as_deref(),
                t.coordinator,
                t.age_seconds,
                t.hanging
            ),
            (id, state, status, age, false),
            "young is never hanging: {raw:?}"
        );
        let Some(age) = age else {
            // Not confirmed by its coordinator: the producer's last write an hour back
            // dates nothing, the age is unknown and the transaction is not hanging.
            let t = derive(&raw, 1_000_000 + 3_600_000, none);
            assert_eq!((t.age_seconds, t.hanging), (None, false), "{raw:?}");
            // Watched by the exporter for longer than the limit, it is.
            let watched = |ms: i64| Witness {
                watched_for: Some(Duration::from_millis(ms as u64)),
                ..Witness::default()
            };
            let t = derive(&raw, young, watched(max_ms + margin_ms));
            assert_eq!(
                (t.age_clock, t.hanging),
                (Some(AgeClock::FirstSight), false)
            );
            let t = derive(&raw, young, watched(max_ms + margin_ms + 1));
            assert_eq!((t.age_clock, t.hanging), (Some(AgeClock::FirstSight), true));
            continue;
        };
        // Hanging once older than the limit, by the same clock as the age.
        let started_ms = young - (age * 1000.0) as i64;
        let at_limit = started_ms + max_ms + margin_ms;
        assert!(!derive(&raw, at_limit, none).hanging, "{raw:?}");
        assert!(derive(&raw, at_limit + 1, none).hanging, "{raw:?}");
        // The coordinator's clock wins over the exporter's and the log's.
        let t = derive(
            &raw,
            young,
            Witness {
                append_time_ms: Some(0),
                create_time_ms: Some(0),
                watched_for: Some(Duration::from_secs(5_000)),
                opened_unseen: true,
            },
        );
        assert_eq!(
            (t.age_clock, t.age_seconds),
            (Some(AgeClock::Coordinator), Some(age))
        );
    }

    // A failed lookup is never evidence, however old the last write.
    let mut unknown = raw_transaction("Ongoing", 4001, 3, true);
    unknown.coordinator = CoordinatorView::Unknown;
    let t = derive(&unknown, 10_000_000, none);
    assert_eq!(
        (t.coordinator, t.hanging, t.transactional_id.as_str()),
        (Unknown, false, "")
    );
    // A coordinator that moved and is loading the transaction log, or one that is
    // down, never makes an old transaction hanging; the loading broker is named.
    unknown.coordinator = CoordinatorView::Loading { broker: 3 };
    let t = derive(&unknown, 10_000_000, none);
    assert_eq!(
        (t.coordinator, t.coordinator_broker, t.hanging),
        (Loading, Some(3), false)
    );
    unknown.coordinator = CoordinatorView::Unavailable;
    let t = derive(&unknown, 10_000_000, none);
    assert_eq!(
        (t.coordinator, t.coordinator_broker, t.hanging),
        (Unavailable, None, false)
    );
    // Not listed by any coordinator: hanging only when old by a broker's clock (the
    // LogAppendTime of its first record) or the exporter's.
    unknown.coordinator = CoordinatorView::NotFound;
    let t = derive(&unknown, 10_000_000, none);
    assert_eq!(
        (t.coordinator, t.age_seconds, t.hanging),
        (NotFound, None, false)
    );
    let appended = Witness {
        append_time_ms: Some(1_000_000),
        watched_for: Some(Duration::from_secs(30)),
        ..Witness::default()
    };
    assert!(!derive(&unknown, young, appended).hanging);
    let t = derive(&unknown, 1_000_000 + max_ms + margin_ms + 1, appended);
    assert_eq!(
        (t.coordinator, t.age_clock, t.hanging),
        (NotFound, Some(AgeClock::LogAppendTime), true)
    );
    // KIP-664: no coordinator knows it, no broker clock dates it, and the exporter did
    // not see it begin: the producer's clock does. Its first record's CreateTime, else
    // its last write (DescribeProducers, at 1,000 s); a LogAppendTime wins over both.
    let written = Witness {
        create_time_ms: Some(995_000),
        opened_unseen: true,
        ..Witness::default()
    };
    let late = 995_000 + max_ms + margin_ms + 1;
    let t = derive(&unknown, late, written);
    assert_eq!(
        (t.age_clock, t.age_seconds, t.hanging),
        (Some(AgeClock::CreateTime), Some(960.001), true)
    );
    let last_write = Witness {
        create_time_ms: None,
        ..written
    };
    let t = derive(&unknown, late, last_write);
    assert_eq!(
        (t.age_clock, t.age_seconds, t.hanging),
        (Some(AgeClock::LastTimestamp), Some(955.001), false),
        "its last write: a lower bound"
    );
    let t = derive(
        &unknown,
        late,
        Witness {
            append_time_ms: Some(999_000),
            ..written
        },
    );
    assert_eq!(t.age_clock, Some(AgeClock::LogAppendTime));
    // Watched longer than the producer's clock says (a producer clock ahead): the
    // exporter's own count.
    let t = derive(
        &unknown,
        late,
        Witness {
            watched_for: Some(Duration::from_secs(2_000)),
            ..written
        },
    );
    assert_eq!(
        (t.age_clock, t.age_seconds),
        (Some(AgeClock::FirstSight), Some(2_000.0))
    );
    // A first write stamped in the future (the producer's clock ahead) is no older than 0.
    let t = derive(&unknown, 900_000, written);
    assert_eq!(
        (t.age_clock, t.age_seconds, t.hanging),
        (Some(AgeClock::CreateTime), Some(0.0), false)
    );
    // Seen to begin by the exporter: its own clock bounds it, the producer's dates
    // nothing.
    let seen_begin = Witness {
        opened_unseen: false,
        ..written
    };
    let t = derive(&unknown, late, seen_begin);
    assert_eq!((t.age_clock, t.age_seconds, t.hanging), (None, None, false));
    // Known to a coordinator that disagrees (transactions version 2: the producer's next
    // transaction described while the leader still lists the one it just committed), or
    // a failed lookup: the producer's clock dates nothing either.
    for view in [
        raw_transaction("Ongoing", 4001, 4, true).coordinator,
        CoordinatorView::Unknown,
        CoordinatorView::Unavailable,
    ] {
        let raw = RawTransaction {
            coordinator: view,
            ..unknown.clone()
        };
        let t = derive(&raw, late, written);
        assert_eq!((t.age_clock, t.hanging), (None, false), "{raw:?}");
    }
    // A transaction allowed a longer timeout than the broker's cap reported (an
    // unreadable cap falls back to 15 min) is measured against its own.
    let mut long = raw_transaction("Ongoing", 4001, 3, true);
    if let CoordinatorView::Found(t) = &mut long.coordinator {
        t.timeout_ms = 3_600_000;
    }
    assert!(!derive(&long, 990_000 + 3_600_000, none).hanging);
    assert!(derive(&long, 990_000 + 3_660_001, none).hanging);
}

#[test]
fn stuck_clock_is_per_partition_and_forgets_deleted_partitions() {
    let topic: Arc<str> = Arc::from("orders");
    let t0 = Instant::now();
    let mut clock = StuckClock::default();
    for partition in 0..24 {
        let lso = if partition == 7 { 100 } else { 120 };
        clock.observe(&topic, partition, 120, lso, t0, None);
    }
    assert_eq!(clock.len(), 1, "only the pinned partition has a clock");
    let later = t0 + Duration::from_secs(10);
    assert_eq!(
        clock.observe(&topic, 7, 125, 100, later, None),
        Duration::from_secs(10)
    );
    assert_eq!(
        clock.observe(&topic, 3, 125, 125, later, None),
        Duration::ZERO
    );
    clock.retain(|_, partition| partition != 7);
    assert!(clock.is_empty());
}

fn partition(topic: &str, partition: i32, hw: Option<i64>, lso: Option<i64>) -> RawPartition {
    RawPartition {
        open_transactions: None,
        topic: Arc::from(topic),
        partition,
        log_start_offset: Some(0),
        last_stable_offset: lso,
        high_watermark: hw,
        log: None,
        replication: None,
    }
}

fn committed(topic: &str, partition: i32, offset: i64) -> CommittedOffset {
    CommittedOffset {
        topic: topic.into(),
        partition,
        offset,
    }
}

/// A share group's log: T1 commits 3 records (0..3, written at 10 s, marker 3), T2
/// aborts 2 (4..6, marker 6), 2 plain at 30 s (7, 8), T3 opens at 9 (40 s), 3 plain
/// at 50 s. HW 13, LSO 9; read from `from`.
fn share_log(from: i64) -> PartitionLog {
    use crate::kafka::records::tests::{data, marker, txn};
    use crate::kafka::records::{LogExtent, Marker};
    let batches = [
        txn(0, 3, 10_000, 1),
        marker(3, 1, Marker::Commit),
        txn(4, 2, 20_000, 2),
        marker(6, 2, Marker::Abort),
        data(7, 2, 30_000),
        txn(9, 1, 40_000, 3),
        data(10, 3, 50_000),
    ];
    let mut window = LogExtent::new(from);
    let read: Vec<_> = batches
        .into_iter()
        .filter(|b| b.last_offset >= from)
        .collect();
    window.append(&read, 13, None);
    PartitionLog {
        window: Some(Arc::new(window)),
        positions: Vec::new(),
    }
}

/// What Kafka 4.4 reports for such groups: the broker's lag counts every offset up to
/// the HW not acknowledged, markers and aborted records the group has not passed
/// included, and none it passed.
#[test]
fn share_lag_from_the_brokers_lag_table() {
    let now_ms = 100_000;
    let log = share_log(0);
    // (start offset, broker's lag) -> (lso lag, its seconds, hw lag, its seconds)
    use TimeLag::{NothingLeft, Since};
    let cases = [
        // Acknowledged all 5 records it may read (start still at 7): nothing left.
        ((7, 4), (0, Some(NothingLeft), 4, Some(Since(60.0)))),
        // Acknowledged 0 and 1 of T1's batch (start 0): 2, 7 and 8 are left, the
        // oldest written at 10.02 s; up to the HW also T2's and T3's records.
        ((0, 11), (3, Some(Since(89.98)), 9, Some(Since(89.98)))),
        // Nothing acknowledged: the start offset's figures.
        ((0, 13), (5, Some(Since(90.0)), 11, Some(Since(90.0)))),
        // A broker lag older than the start offset: the start offset's figures.
        ((7, 20), (2, Some(Since(70.0)), 6, Some(Since(70.0)))),
        // Caught up to the HW (a read_uncommitted group).
        ((12, 0), (0, Some(NothingLeft), 0, Some(NothingLeft))),
    ];
    for ((start, broker_lag), (lso_lag, lso_seconds, hw_lag, hw_seconds)) in cases {
        let (lag, (hw_time, lso_time)) =
            share_lag_from_broker(start, broker_lag, 13, 9, Some(&log), now_ms);
        let what = format!("start {start}, broker lag {broker_lag}");
        assert_eq!((lag.lso_lag, lag.hw_lag), (lso_lag, hw_lag), "{what}");
        assert_eq!((lso_time, hw_time), (lso_seconds, hw_seconds), "{what}");
    }
    // The log read only from 8: offsets not read count, as for any lag; the first
    // record left (2) was not read, so the time lag is the start offset's (unknown).
    let log = share_log(8);
    let (lag, (hw_time, lso_time)) = share_lag_from_broker(0, 11, 13, 9, Some(&log), now_ms);
    assert_eq!((lag.lso_lag, lag.hw_lag), (7, 11));
    assert_eq!((lso_time, hw_time), (None, None));
    // Without any read: offset differences from the first offset left.
    let (lag, times) = share_lag_from_broker(0, 11, 13, 9, None, now_ms);
    assert_eq!((lag.lso_lag, lag.hw_lag), (7, 11));
    assert_eq!(times, (None, None));
}

/// In a cycle: a share group with a broker's lag gets lags derived from it; one
/// without (brokers before Kafka 4.2) keeps the start offset's, an upper bound. A
/// read_committed one that acknowledged everything it may read waits at the LSO.
#[test]
fn derive_takes_a_share_groups_lag_from_its_broker_where_there_is_one() {
    let share = |name: &str, broker_lags: Vec<crate::kafka::BrokerLag>| RawGroup {
        coordinator: None,
        detail: None,
        name: name.into(),
        state: "Stable".into(),
        members: Some(1),
        group_type: "share".into(),
        protocol: "share".into(),
        isolation: Some(crate::kafka::Isolation::ReadCommitted),
        broker_lags,
        committed: Some(vec![CommittedOffset {
            topic: "queue".into(),
            partition: 0,
            offset: 7,
        }]),
    };
    let broker_lag = |lag| {
        vec![crate::kafka::BrokerLag {
            topic: "queue".into(),
            partition: 0,
            lag,
        }]
    };
    let mut partition = partition("queue", 0, Some(13), Some(9));
    partition.log = Some(share_log(0));
    let raw = RawSample {
        reached: true,
        partitions: vec![partition],
        groups: vec![
            share("drained", broker_lag(4)),
            share("older-broker", Vec::new()),
        ],
        ..Default::default()
    };
    let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
    let derived = derive(
        raw,
        &mut StuckClock::default(),
        Instant::now(),
        wall,
        Duration::ZERO,
    );
    let p = &derived.partitions[0];
    let shown = |g: &GroupState| {
        let o = &g.offsets.as_ref().unwrap()[0];
        (g.share_lag(o), g.share_lag_seconds(o), g.waits_at_lso(o, p))
    };
    assert_eq!(shown(&derived.groups[0]), (Some(0), Some(0.0), true));
    assert_eq!(shown(&derived.groups[1]), (Some(2), Some(70.0), false));
}

/// The log as read: SPEC §1's worked example at 1/1000 scale, with timestamps. Plain
/// records 870..880 written at 100 s; T1 (producer 1) opens at 880 at 200 s; 4 plain
/// at 300 s; T2 writes 5 at 400 s and commits (marker 890); 9 plain at 500 s. HW 900,
/// LSO 880.
fn worked_example_log() -> PartitionLog {
    use crate::kafka::records::tests::{data, marker, txn};
    use crate::kafka::records::{LogExtent, Marker};
    let mut window = LogExtent::new(870);
    window.append(
        &[
            data(870, 10, 100_000),
            txn(880, 1, 200_000, 1),
            data(881, 4, 300_000),
            txn(885, 5, 400_000, 2),
            marker(890, 2, Marker::Commit),
            data(891, 9, 500_000),
        ],
        900,
        None,
    );
    PartitionLog {
        window: Some(Arc::new(window)),
        positions: Vec::new(),
    }
}

#[test]
fn lags_from_the_log_never_count_markers() {
    let log = worked_example_log();
    let now_ms = 1_000_000;
    // (committed, hw_lag, lso_lag, hw_time_lag, lso_time_lag)
    use TimeLag::{NothingLeft, Since};
    let cases = [
        // Blocked at the LSO: 19 records behind the HW (the marker at 890 is not
        // one), nothing to read, and the record at the LSO was written at 200 s.
        (880, 19, 0, Some(Since(800.0)), Some(NothingLeft)),
        // Five plain records before the LSO; the batch 870..879 spans 100.00 s to
        // 100.09 s, so the record at 875 is taken as written at 100.05 s.
        (875, 24, 5, Some(Since(899.95)), Some(Since(899.95))),
        // A read_uncommitted group between the LSO and the HW.
        (891, 9, 0, Some(Since(500.0)), Some(NothingLeft)),
        // Caught up.
        (900, 0, 0, Some(NothingLeft), Some(NothingLeft)),
        // Below the window: the unread part counts every offset; no time known.
        (860, 39, 20, None, None),
    ];
    for (committed, hw_lag, lso_lag, hw_seconds, lso_seconds) in cases {
        let (l, _) = lag(committed, 900, 880, Some(&log));
        assert_eq!(
            (l.hw_lag, l.lso_lag),
            (hw_lag, lso_lag),
            "committed {committed}"
        );
        assert_eq!(
            time_lag(committed, 900, 880, Some(&log), now_ms),
            (hw_seconds, lso_seconds),
            "committed {committed}"
        );
    }
    assert_eq!(withheld_age(900, 880, Some(&log), now_ms), Some(800.0));
    assert_eq!(withheld_age(900, 900, None, now_ms), Some(0.0));
    assert_eq!(withheld_age(900, 880, None, now_ms), None);
    // Without reads, nothing is guessed: offset differences, and time only where
    // there is nothing to read.
    assert_eq!(lag(880, 900, 880, None).0.hw_lag, 20);
    assert_eq!(
        time_lag(880, 900, 880, None, now_ms),
        (None, Some(TimeLag::NothingLeft))
    );
    // A record written after the exporter's now (a producer's clock ahead): 0 s old,
    // but still something to read.
    assert_eq!(
        time_lag(875, 900, 880, Some(&log), 50_000),
        (Some(TimeLag::Since(0.0)), Some(TimeLag::Since(0.0)))
    );
}

#[test]
fn blocked_means_nothing_to_read_and_not_past_the_lso() {
    let log = worked_example_log();
    let waits = |committed| lag(committed, 900, 880, Some(&log)).0.waits_at_lso();
    assert!(waits(880), "read_committed at the LSO");
    assert!(!waits(891), "read_uncommitted between LSO and HW");
    assert!(!waits(875), "records left to read");
    // An exactly-once group committed below a commit marker that precedes the LSO.
    let mut window = crate::kafka::records::LogExtent::new(0);
    use crate::kafka::records::tests::{marker, txn};
    window.append(
        &[
            txn(0, 10, 0, 1),
            marker(10, 1, crate::kafka::records::Marker::Commit),
            txn(11, 1, 0, 2),
        ],
        12,
        None,
    );
    let log = PartitionLog {
        window: Some(Arc::new(window)),
        positions: Vec::new(),
    };
    assert!(lag(10, 12, 11, Some(&log)).0.waits_at_lso());
}

#[test]
fn derive_joins_groups_to_partitions_and_drops_what_failed() {
    let raw = RawSample {
        reached: true,
        group_listing: crate::kafka::GroupListing::Complete,
        clock_skew: None,
        brokers: Vec::new(),
        retention_ms: Default::default(),
        eos_cost: Default::default(),
        aborted: Vec::new(),
        transaction_list: None,
        described_transactions: Vec::new(),
        features: Default::default(),
        unseen_topics: Vec::new(),
        partitions: vec![
            partition("orders", 0, Some(900), Some(880)),
            partition("orders", 1, None, Some(50)), // HW request failed
        ],
        groups: vec![
            RawGroup {
                coordinator: None,
                detail: None,
                name: "billing".into(),
                state: "Stable".into(),
                members: Some(2),
                group_type: "classic".into(),
                protocol: "consumer".into(),
                isolation: None,
                broker_lags: Vec::new(),
                committed: Some(vec![
                    committed("orders", 0, 880),
                    committed("orders", 1, 40),
                    committed("excluded-topic", 0, 5),
                ]),
            },
            RawGroup {
                coordinator: None,
                detail: None,
                name: "audit".into(),
                state: "Empty".into(),
                members: Some(0),
                group_type: "classic".into(),
                protocol: "consumer".into(),
                isolation: None,
                broker_lags: Vec::new(),
                committed: None, // offset fetch failed
            },
        ],
        failures: Default::default(),
        transaction_max_timeout_ms: None,
    };
    let mut clock = StuckClock::default();
    let derived = derive(
        raw,
        &mut clock,
        Instant::now(),
        SystemTime::now(),
        Duration::ZERO,
    );
    assert_eq!(
        derived.partitions[0].visibility.map(|v| v.hw_minus_lso),
        Some(20)
    );
    assert_eq!(derived.partitions[1].visibility, None);
    let billing = derived.groups[0].offsets.as_ref().unwrap();
    assert_eq!(billing.len(), 2, "offsets on unselected topics are dropped");
    assert_eq!(
        billing[0].lag,
        Some(Lag {
            hw_lag: 20,
            lso_lag: 0,
            committed_beyond_lso: 0
        })
    );
    assert_eq!(billing[1].committed_offset, 40);
    assert_eq!(billing[1].lag, None, "no lag without a sampled HW");
    assert_eq!(derived.groups[1].offsets, None);
    assert!(derived.anomalies.is_empty());
}

#[test]
fn derive_counts_anomalies() {
    let raw = RawSample {
        reached: true,
        group_listing: crate::kafka::GroupListing::Complete,
        clock_skew: None,
        brokers: Vec::new(),
        retention_ms: Default::default(),
        eos_cost: Default::default(),
        aborted: Vec::new(),
        transaction_list: None,
        described_transactions: Vec::new(),
        features: Default::default(),
        unseen_topics: Vec::new(),
        partitions: vec![partition("t", 0, Some(10), Some(12))],
        groups: vec![RawGroup {
            coordinator: None,
            detail: None,
            name: "g".into(),
            state: "Empty".into(),
            members: Some(0),
            group_type: "classic".into(),
            protocol: "consumer".into(),
            isolation: None,
            broker_lags: Vec::new(),
            committed: Some(vec![committed("t", 0, 15)]),
        }],
        failures: Default::default(),
        transaction_max_timeout_ms: None,
    };
    let derived = derive(
        raw,
        &mut StuckClock::default(),
        Instant::now(),
        SystemTime::now(),
        Duration::ZERO,
    );
    assert_eq!(
        derived.anomalies,
        vec![
            Anomaly::LsoAboveHighWatermark,
            Anomaly::CommittedBeyondHighWatermark
        ]
    );
    let lag = derived.groups[0].offsets.as_ref().unwrap()[0].lag.unwrap();
    assert_eq!(
        (lag.hw_lag, lag.lso_lag, lag.committed_beyond_lso),
        (0, 0, 3)
    );
}

#[test]
fn an_unreachable_cluster_keeps_its_clocks() {
    let topic: Arc<str> = Arc::from("t");
    let t0 = Instant::now();
    let mut clock = StuckClock::default();
    clock.observe(&topic, 0, 10, 5, t0, None);
    let derived = derive(
        RawSample::default(),
        &mut clock,
        t0 + Duration::from_secs(1),
        SystemTime::now(),
        Duration::ZERO,
    );
    assert!(derived.partitions.is_empty());
    assert_eq!(
        clock.len(),
        1,
        "a failed cycle does not restart the stuck clock"
    );
    assert_eq!(
        clock.observe(&topic, 0, 11, 5, t0 + Duration::from_secs(2), None),
        Duration::from_secs(2)
    );
}

/// A partition held at LSO 880 (HW 900) by producer 4001's open transaction, whose
/// first record, like DescribeProducers' last timestamp, carries `record_ms`; with
/// `log_append_time` the broker wrote that time, otherwise the producer did.
fn held_an_hour(record_ms: i64, log_append_time: bool, coordinator: CoordinatorView) -> RawSample {
    use crate::kafka::records::tests::{data, txn};
    use crate::kafka::records::{Batch, LogExtent};
    let mut window = LogExtent::new(870);
    let first = Batch {
        log_append_time,
        max_timestamp: record_ms,
        ..txn(880, 1, record_ms, 4001)
    };
    window.append(&[data(870, 10, record_ms - 1_000), first], 881, None);
    let mut held = partition("orders", 0, Some(900), Some(880));
    held.log = Some(PartitionLog {
        window: Some(Arc::new(window)),
        positions: Vec::new(),
    });
    let mut transaction = raw_transaction("Ongoing", 4001, 3, true);
    transaction.last_timestamp_ms = record_ms;
    transaction.coordinator = coordinator;
    held.open_transactions = Some(vec![transaction]);
    RawSample {
        reached: true,
        partitions: vec![held],
        groups: vec![RawGroup {
            coordinator: None,
            detail: None,
            name: "billing".into(),
            state: "Stable".into(),
            members: Some(1),
            group_type: "classic".into(),
            protocol: "consumer".into(),
            isolation: None,
            broker_lags: Vec::new(),
            committed: Some(vec![committed("orders", 0, 875)]),
        }],
        transaction_max_timeout_ms: Some(900_000),
        ..RawSample::default()
    }
}

/// (stuck seconds, the transaction's age, its clock, hanging) after one cycle.
fn held_state(derived: &Derived) -> (f64, Option<f64>, Option<AgeClock>, bool) {
    let p = &derived.partitions[0];
    let t = &p.transactions.as_ref().unwrap()[0];
    (
        p.visibility.unwrap().lso_stuck_seconds,
        t.age_seconds,
        t.age_clock,
        t.hanging,
    )
}

#[test]
fn producer_timestamps_an_hour_old_neither_hang_nor_move_the_stuck_clock() {
    let t0 = Instant::now();
    let wall0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
    let hour_ago_ms = 100_000_000 - 3_600_000;
    let cycle = |clock: &mut StuckClock, s: u64, coordinator: CoordinatorView| {
        derive(
            held_an_hour(hour_ago_ms, false, coordinator),
            clock,
            t0 + Duration::from_secs(s),
            wall0 + Duration::from_secs(s),
            Duration::from_secs(60),
        )
    };
    // Event time an hour old (Streams, Connect, Flink), and a coordinator that does not
    // confirm the transaction: one that disagrees, or a failed lookup. (One that no
    // coordinator lists is KIP-664's hanging transaction: the next test.)
    for coordinator in [
        raw_transaction("Empty", 4001, 3, false).coordinator,
        CoordinatorView::Unknown,
    ] {
        let mut clock = StuckClock::default();
        let first = cycle(&mut clock, 0, coordinator.clone());
        assert_eq!(
            held_state(&first),
            (0.0, None, None, false),
            "{coordinator:?}"
        );
        let second = cycle(&mut clock, 15, coordinator.clone());
        // Seen by an earlier cycle: dated by the exporter's own clock.
        assert_eq!(
            held_state(&second),
            (15.0, Some(15.0), Some(AgeClock::FirstSight), false),
            "{coordinator:?}"
        );
        // Time lag and the withheld age keep the record timestamps: that is what
        // users mean by them.
        assert_eq!(second.partitions[0].withheld_age_seconds, Some(3615.0));
        let billing = &second.groups[0].offsets.as_ref().unwrap()[0];
        assert!(
            billing.hw_time_lag.unwrap().seconds() > 3600.0,
            "{billing:?}"
        );
        // The exporter restarts: the first cycle after it knows no age either.
        let mut restarted = StuckClock::default();
        let after = cycle(&mut restarted, 600, coordinator.clone());
        assert_eq!(
            held_state(&after),
            (0.0, None, None, false),
            "{coordinator:?}"
        );
        // Watched for longer than transaction.max.timeout.ms + margin: hanging,
        // unless the coordinator lookup failed.
        let late = cycle(&mut restarted, 600 + 961, coordinator.clone());
        assert_eq!(
            held_state(&late).3,
            coordinator != CoordinatorView::Unknown,
            "{coordinator:?}"
        );
    }
    // No coordinator lists it, but the exporter saw it begin: the partition had nothing
    // open at the cycle before. Its own clock bounds it, however old the event time.
    let mut clock = StuckClock::default();
    let mut at_rest = held_an_hour(hour_ago_ms, false, CoordinatorView::NotFound);
    at_rest.partitions[0].high_watermark = Some(880);
    at_rest.partitions[0].open_transactions = Some(Vec::new());
    let rest = derive(at_rest, &mut clock, t0, wall0, Duration::from_secs(60));
    assert_eq!(
        rest.partitions[0].visibility.unwrap().lso_stuck_seconds,
        0.0
    );
    let begun = cycle(&mut clock, 15, CoordinatorView::NotFound);
    assert_eq!(held_state(&begun), (0.0, None, None, false));
    let later = cycle(&mut clock, 30, CoordinatorView::NotFound);
    assert_eq!(
        held_state(&later),
        (15.0, Some(15.0), Some(AgeClock::FirstSight), false)
    );
}

#[test]
fn broker_clocks_an_hour_old_count_from_the_first_cycle() {
    let t0 = Instant::now();
    let wall0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
    let hour_ago_ms = 100_000_000 - 3_600_000;
    // The coordinator started the transaction an hour ago: real, right after a restart.
    let mut confirmed = raw_transaction("Ongoing", 4001, 3, true).coordinator;
    if let CoordinatorView::Found(t) = &mut confirmed {
        t.start_time_ms = hour_ago_ms;
    }
    let mut clock = StuckClock::default();
    let derived = derive(
        held_an_hour(100_000_000 - 5_000, false, confirmed),
        &mut clock,
        t0,
        wall0,
        Duration::from_secs(60),
    );
    assert_eq!(
        held_state(&derived),
        (3600.0, Some(3600.0), Some(AgeClock::Coordinator), true)
    );
    // A LogAppendTime topic: the leader wrote the time of the record at the LSO.
    let mut clock = StuckClock::default();
    let derived = derive(
        held_an_hour(hour_ago_ms, true, CoordinatorView::NotFound),
        &mut clock,
        t0,
        wall0,
        Duration::from_secs(60),
    );
    assert_eq!(
        held_state(&derived),
        (3600.0, Some(3600.0), Some(AgeClock::LogAppendTime), true)
    );
}

/// KIP-664's hanging transaction on a CreateTime topic: no coordinator knows the producer
/// id, no broker clock dates it. Its first write in the partition (the batch at the LSO,
/// by the producer's clock) does, from the first cycle of an exporter that did not see it
/// begin, so a restart or a hand-over goes on counting where the old process left off.
#[test]
fn a_transaction_no_coordinator_knows_is_dated_by_its_first_write_across_restarts() {
    let t0 = Instant::now();
    let wall0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100_000);
    let hour_ago_ms = 100_000_000 - 3_600_000;
    let cycle = |clock: &mut StuckClock, s: u64, raw: RawSample| {
        derive(
            raw,
            clock,
            t0 + Duration::from_secs(s),
            wall0 + Duration::from_secs(s),
            Duration::from_secs(60),
        )
    };
    let hanging = || held_an_hour(hour_ago_ms, false, CoordinatorView::NotFound);
    let created = Some(AgeClock::CreateTime);
    let mut clock = StuckClock::default();
    assert_eq!(
        held_state(&cycle(&mut clock, 0, hanging())),
        (3600.0, Some(3600.0), created, true)
    );
    assert_eq!(
        held_state(&cycle(&mut clock, 15, hanging())),
        (3615.0, Some(3615.0), created, true)
    );
    // Restarted ten minutes later: it goes on, not from 0.
    let mut restarted = StuckClock::default();
    assert_eq!(
        held_state(&cycle(&mut restarted, 600, hanging())),
        (4200.0, Some(4200.0), created, true)
    );
    // The record at the LSO not read (record reads off, or its read failed): its last
    // write by DescribeProducers, a minute after its first, a lower bound.
    let mut unread = hanging();
    unread.partitions[0].log = None;
    unread.partitions[0].open_transactions.as_mut().unwrap()[0].last_timestamp_ms =
        hour_ago_ms + 60_000;
    let mut restarted = StuckClock::default();
    assert_eq!(
        held_state(&cycle(&mut restarted, 600, unread)),
        (4140.0, Some(4140.0), Some(AgeClock::LastTimestamp), true)
    );
    // A producer whose clock runs ten minutes ahead stamped it in the future: 0, not
    // negative, and the exporter's own count from then on.
    let ahead_ms = 100_000_000 + 600_000;
    let mut restarted = StuckClock::default();
    let ahead = || held_an_hour(ahead_ms, false, CoordinatorView::NotFound);
    assert_eq!(
        held_state(&cycle(&mut restarted, 0, ahead())),
        (0.0, Some(0.0), created, false)
    );
    assert_eq!(
        held_state(&cycle(&mut restarted, 15, ahead())),
        (15.0, Some(15.0), Some(AgeClock::FirstSight), false)
    );
}

#[test]
fn the_exporter_forgets_transactions_that_ended() {
    let topic: Arc<str> = Arc::from("orders");
    let t0 = Instant::now();
    let mut clock = StuckClock::default();
    let open = [raw_transaction("Ongoing", 4001, 3, true)];
    let seen = |watched_for: Option<u64>, opened_unseen: bool| {
        vec![super::stuck::Sighting {
            watched_for: watched_for.map(Duration::from_secs),
            opened_unseen,
        }]
    };
    // Open at the first listing of the partition: the exporter did not see it begin,
    // and remembers that while it stays open.
    assert_eq!(clock.watch(&topic, 0, &open, t0), seen(None, true));
    let later = t0 + Duration::from_secs(15);
    assert_eq!(clock.watch(&topic, 0, &open, later), seen(Some(15), true));
    // It ended; a new one of the same producer opens at another offset: seen to begin.
    clock.watch(&topic, 0, &[], later);
    let mut next = open[0].clone();
    next.start_offset = 990;
    assert_eq!(clock.watch(&topic, 0, &[next], later), seen(None, false));
    clock.retain(|_, _| false);
    assert_eq!(clock.watch(&topic, 0, &open, later), seen(None, true));
}

proptest::proptest! {
    /// Whatever the offsets a broker reports (committed past the HW or the LSO, LSO
    /// above the HW, a share group's start offset and its broker's lag), and for every
    /// group type, no lag, catch-up estimate or rate the exporter derives is negative,
    /// and a committed offset past the LSO counts in committed_beyond_lso: what
    /// autoscalers read stays usable (kafka_exporter #437).
    #[test]
    fn no_lag_is_negative_for_any_group_type(
        cycles in proptest::collection::vec((0i64..2_000, 0i64..2_000, 0i64..2_000, 0i64..50), 1..6),
        group_type in proptest::sample::select(vec!["classic", "consumer", "share", "streams"]),
    ) {
        let mut deriver = crate::derive::Deriver::new(
            Duration::from_secs(60),
            Duration::from_secs(2),
            10,
            Default::default(),
            Default::default(),
        );
        let t0 = Instant::now();
        for (i, (committed, hw, lso, broker_lag)) in cycles.into_iter().enumerate() {
            let group = RawGroup {
                coordinator: None,
                detail: None,
                name: "g".into(),
                state: "Stable".into(),
                members: Some(1),
                group_type: group_type.into(),
                protocol: "consumer".into(),
                isolation: (group_type == "share").then_some(crate::kafka::Isolation::ReadCommitted),
                broker_lags: if group_type == "share" {
                    vec![crate::kafka::BrokerLag { topic: "t".into(), partition: 0, lag: broker_lag }]
                } else {
                    Vec::new()
                },
                committed: Some(vec![CommittedOffset { topic: "t".into(), partition: 0, offset: committed }]),
            };
            let raw = RawSample {
                reached: true,
                partitions: vec![partition("t", 0, Some(hw), Some(lso))],
                groups: vec![group],
                ..Default::default()
            };
            let at = t0 + Duration::from_secs(i as u64);
            let step = deriver.step(raw, at, SystemTime::UNIX_EPOCH + Duration::from_secs(i as u64));
            for g in &step.derived.groups {
                for o in g.offsets.iter().flatten() {
                    let lag = o.lag.expect("lag of a sampled partition");
                    proptest::prop_assert!(lag.hw_lag >= 0 && lag.lso_lag >= 0, "{lag:?}");
                    proptest::prop_assert_eq!(lag.committed_beyond_lso, (committed - lso).max(0));
                    if let Some(l) = g.share_lag(o) {
                        proptest::prop_assert!(l >= 0, "share lag {l}");
                    }
                }
                for r in &g.rates {
                    proptest::prop_assert!(r.consume_rate.is_none_or(|c| c >= 0.0));
                    proptest::prop_assert!(r.produce_rate.is_none_or(|p| p >= 0.0));
                    if let crate::derive::Catchup::Seconds(s) = r.catchup {
                        proptest::prop_assert!(s > 0.0, "catch-up {s}");
                    }
                }
            }
        }
    }
}

/// A cycle of the cluster of the visibility tests: `orders` partition 0 with HW 1000 and
/// LSO 800 (a transaction open since the first cycle) where listed, and the classic group
/// `billing` of one member, 300 records behind the LSO, unmoved.
fn visibility_cycle(listed: bool, unseen: Vec<crate::kafka::visibility::UnseenTopic>) -> RawSample {
    RawSample {
        reached: true,
        group_listing: crate::kafka::GroupListing::Complete,
        partitions: if listed {
            vec![partition("orders", 0, Some(1000), Some(800))]
        } else {
            Vec::new()
        },
        groups: vec![RawGroup {
            name: "billing".into(),
            group_type: "classic".into(),
            protocol: "consumer".into(),
            state: "Stable".into(),
            members: Some(1),
            // The brokers leave the offsets on topics the principal may not describe out
            // of OffsetFetch too.
            committed: Some(if listed {
                vec![committed("orders", 0, 500)]
            } else {
                Vec::new()
            }),
            ..Default::default()
        }],
        unseen_topics: unseen,
        ..Default::default()
    }
}

fn visibility_deriver() -> Deriver {
    Deriver::new(
        Duration::from_secs(60),
        Duration::from_secs(600),
        10,
        Default::default(),
        Default::default(),
    )
}

/// (stuck seconds of orders/0, commit stall of billing on it) after one step.
fn clocks(step: &Step) -> (f64, Option<f64>) {
    let stuck = step.derived.partitions[0]
        .visibility
        .expect("offsets")
        .lso_stuck_seconds;
    let stall = step.derived.groups[0].offsets.as_ref().unwrap()[0].commit_stall_seconds;
    (stuck, stall)
}

/// A prefixed ACL that does not cover a topic: the brokers leave it out of the metadata
/// and of the group's committed offsets, and the cycle has no partition left. That is
/// no empty, healthy cluster: the offsets feature is refused, with the topic, why the
/// exporter expects it and the ACL to grant.
#[test]
fn a_topic_the_principal_may_not_see_is_a_refusal_not_an_empty_cluster() {
    use crate::kafka::features::{Feature, Status};
    use crate::kafka::visibility::{Absence, Expectation, UnseenTopic};
    let hidden = UnseenTopic {
        topic: Arc::from("orders"),
        expected: Expectation::Assigned("billing".into()),
        absence: Absence::Denied,
        cycles: 1,
    };
    let mut deriver = visibility_deriver();
    let step = deriver.step(
        visibility_cycle(false, vec![hidden]),
        Instant::now(),
        SystemTime::now(),
    );
    let offsets = &step.features[&Feature::Offsets];
    assert_eq!(offsets.status, Status::Denied, "{offsets:?}");
    assert!(
        offsets
            .reason
            .contains("\"orders\" (group \"billing\" reads it)")
            && offsets.reason.contains("grant Describe on the topics"),
        "{}",
        offsets.reason
    );

    // A topic missing and not confirmed gone (a metadata race) is no refusal.
    let mut deriver = visibility_deriver();
    let raced = UnseenTopic {
        topic: Arc::from("orders"),
        expected: Expectation::Sampled,
        absence: Absence::Unconfirmed("listed when named".into()),
        cycles: 1,
    };
    let step = deriver.step(
        visibility_cycle(false, vec![raced]),
        Instant::now(),
        SystemTime::now(),
    );
    assert_eq!(step.features[&Feature::Offsets].status, Status::Ok);
}

/// A topic missing from one cycle (a metadata race, a refusal that a grant undoes) keeps
/// its stuck clock and its groups' commit-stall clocks: both go on when it is back. A
/// topic deleted and created again starts them afresh.
#[test]
fn a_topic_missing_for_a_cycle_keeps_its_clocks_a_deleted_one_does_not() {
    use crate::kafka::visibility::{Absence, Expectation, UnseenTopic};
    let unseen = |absence: Absence| {
        vec![UnseenTopic {
            topic: Arc::from("orders"),
            expected: Expectation::Sampled,
            absence,
            cycles: 1,
        }]
    };
    let t0 = Instant::now();
    let wall = SystemTime::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let mut deriver = visibility_deriver();
    for s in [0, 15, 30] {
        let step = deriver.step(visibility_cycle(true, Vec::new()), at(s), wall);
        assert_eq!(clocks(&step), (s as f64, Some(s as f64)), "at {s} s");
    }
    for (gap, absence) in [
        (45, Absence::Unconfirmed("listed when named".into())),
        (75, Absence::Denied),
    ] {
        let step = deriver.step(visibility_cycle(false, unseen(absence)), at(gap), wall);
        assert!(step.derived.partitions.is_empty());
        let step = deriver.step(visibility_cycle(true, Vec::new()), at(gap + 15), wall);
        assert_eq!(
            clocks(&step),
            ((gap + 15) as f64, Some((gap + 15) as f64)),
            "back after a gap at {gap} s"
        );
    }
    deriver.step(
        visibility_cycle(false, unseen(Absence::Deleted)),
        at(105),
        wall,
    );
    let step = deriver.step(visibility_cycle(true, Vec::new()), at(120), wall);
    assert_eq!(clocks(&step), (0.0, Some(0.0)), "created again");
}
