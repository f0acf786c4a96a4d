//! docs/api.md against the code: the endpoints the router serves, and every field of
//! `/api/v1/stuck`, both ways. The answer is built from the types `/api/v1/stuck`
//! serializes, with every optional part there, so that a field added to or removed from
//! one of them without a row in docs/api.md fails here. Needs no broker.

#[path = "common/api_doc.rs"]
mod api_doc;

use std::collections::{BTreeMap, BTreeSet};

use api_doc::{ApiDoc, Json};
use kafka_lso_exporter::serve::{
    AbortedReadReport, ClusterTransactions, EvidenceReport, FeatureReport, FencingReport,
    GroupIsolation, GroupProgress, ListedTransaction, MemberIsolation, MemberProgress,
    MemberReport, OwnedPartition, StuckPartition, StuckReport, StuckTransaction, TopicAbortedRead,
    TopicCatchup, TopicPartition,
};

fn member(id: &'static str, values: bool) -> MemberReport<'static> {
    MemberReport {
        member_id: id,
        client_id: "billing-1",
        client_host: "/10.0.0.7",
        group_instance_id: opt(values, "billing-a"),
    }
}

fn opt<T>(on: bool, value: T) -> Option<T> {
    on.then_some(value)
}

fn topic_partition() -> TopicPartition<'static> {
    TopicPartition {
        topic: "orders",
        partition: 3,
    }
}

/// The answer, with every `Option` that holds an object (`transactions`, `owner`,
/// `member`, ...) `Some` when `objects`, and every other one `Some` when `values`: all
/// there, none there, or the objects there with their own optional fields `null`. A
/// shared partition has `members`, which no other partition has, so the group lists one
/// of each. A field added to one of these structs needs a value here and a row in
/// docs/api.md.
fn answer(objects: bool, values: bool) -> String {
    let open = open_by_state();
    let report = StuckReport {
        partitions: vec![StuckPartition {
            cluster: "prod",
            topic: "orders",
            partition: 0,
            high_watermark: 900,
            last_stable_offset: 880,
            hw_minus_lso: 20,
            lso_stuck_seconds: 184.0,
            transactions: opt(objects, vec![StuckTransaction {
                transactional_id: "etl-7",
                producer_id: 4001,
                producer_epoch: 7,
                start_offset: 880,
                state: opt(values, "Ongoing"),
                age_seconds: opt(values, 190.2),
                age_clock: opt(values, "coordinator"),
                timeout_ms: opt(values, 60000),
                coordinator: "open",
                coordinator_broker: opt(values, 1),
                hanging: false,
                abort_command: opt(values, "kafka-transactions.sh --bootstrap-server kafka-0:9092 abort --topic orders --partition 0 --start-offset 880".into()),
            }]),
            withheld_age_seconds: opt(values, 191.0),
            blocked_groups: vec!["billing"],
        }],
        groups: vec![GroupProgress {
            cluster: "prod",
            group: "billing",
            status: "stopped",
            commit_stall_seconds: opt(values, 400.0),
            retention_margin_seconds: opt(values, 86000.0),
            lost_records: 0,
            rebalances: opt(values, 2),
            seconds_since_rebalance: opt(values, 3600.0),
            partitions: vec![
                OwnedPartition {
                    topic: "orders",
                    partition: 0,
                    lag: opt(values, 120),
                    commit_stall_seconds: opt(values, 400.0),
                    blocked: true,
                    withheld: opt(values, 20),
                    abandoned: false,
                    ownership: "owned",
                    members: None,
                    owner: opt(objects, member("billing-1-4f", values)),
                    target_owner: opt(objects, member("billing-2-9c", values)),
                },
                OwnedPartition {
                    topic: "orders",
                    partition: 1,
                    lag: opt(values, 3),
                    commit_stall_seconds: opt(values, 0.0),
                    blocked: false,
                    withheld: opt(values, 0),
                    abandoned: false,
                    ownership: "shared",
                    members: opt(values, 2),
                    owner: opt(objects, member("billing-1-4f", values)),
                    target_owner: opt(objects, member("billing-2-9c", values)),
                },
            ],
            topics: vec![TopicCatchup {
                topic: "orders",
                consume_rate: opt(values, 10.5),
                produce_rate: opt(values, 8.0),
                catchup: "closing",
                catchup_seconds: opt(values, 48.0),
            }],
            members: vec![MemberProgress {
                member: member("billing-1-4f", values),
                member_epoch: opt(values, 12),
                assignment_epoch: opt(values, 13),
                assigned_partitions: opt(values, 2),
                target_partitions: opt(values, 1),
                reconciled: opt(values, false),
                pending: vec![topic_partition()],
                revoking: vec![topic_partition()],
            }],
        }],
        transactions: vec![ClusterTransactions {
            cluster: "prod",
            complete: true,
            filtered_by_exporter: false,
            open: &open,
            unpinning: 1,
            prepared: opt(values, 0),
            oldest: vec![ListedTransaction {
                transactional_id: "etl-7",
                producer_id: 4001,
                producer_epoch: 7,
                state: "Ongoing",
                coordinator: 1,
                age_seconds: opt(values, 190.2),
                timeout_left_seconds: opt(values, 0.0),
                timeout_ms: opt(values, 60000),
                partitions: vec![topic_partition()],
                pins_exported_partition: true,
                two_phase: false,
                fencings: 1,
                coordinator_moves: 0,
            }],
            fencings: vec![FencingReport {
                transactional_id: "etl-7",
                fenced_producer_id: 4001,
                fenced_producer_epoch: 6,
                producer_id: 4001,
                producer_epoch: 7,
                seen_at: 1790000000.0,
            }],
        }],
        features: vec![FeatureReport {
            cluster: "prod",
            feature: "record_reads",
            status: "denied",
            reason: "grant Read on the topics",
            gives: "exact lag without markers, time lag, withheld age",
        }],
        isolation: vec![GroupIsolation {
            cluster: "prod",
            group: "ledger-java",
            isolation: "mixed",
            evidence: vec![EvidenceReport {
                isolation: "read_uncommitted",
                topic: "payments",
                partition: 3,
                committed_offset: 881200,
                last_stable_offset: 880000,
                high_watermark: 900000,
                seen_at: 1790000000.0,
                member: opt(objects, member("ledger-1-4f", values)),
            }],
            members: vec![MemberIsolation {
                member: member("ledger-1-4f", values),
                isolation: "read_uncommitted",
            }],
            aborted_records_read: vec![TopicAbortedRead {
                topic: "payments",
                records: 11342,
                transactions: 1,
            }],
            aborted_read: vec![AbortedReadReport {
                topic: "payments",
                partition: 3,
                transactional_id: "payments-7",
                producer_id: 4001,
                producer_epoch: 12,
                first_offset: 880000,
                last_offset: 899990,
                records: 11342,
                exact: true,
                bound: "exact",
                aborted_at: 1790000120.0,
                member: opt(objects, member("ledger-1-4f", values)),
            }],
        }],
    };
    serde_json::to_string_pretty(&report).unwrap()
}

fn open_by_state() -> BTreeMap<String, u64> {
    BTreeMap::from([("Ongoing".to_string(), 3), ("PrepareCommit".to_string(), 1)])
}

#[test]
fn every_field_of_the_answer_is_documented_and_every_documented_field_is_in_it() {
    let body = answer(true, true);
    let answer: Json = serde_json::from_str(&body).unwrap();
    let mut nulls = Vec::new();
    answer.nulls("", &mut nulls);
    assert!(
        nulls.is_empty(),
        "every optional part is to be there: {nulls:?}"
    );

    let doc = ApiDoc::load();
    let (problems, seen) = doc.check(&answer);
    assert!(
        problems.is_empty(),
        "/api/v1/stuck and docs/api.md disagree:\n{}",
        problems.join("\n")
    );
    let documented = doc.paths();
    let not_in_the_answer: Vec<&String> = documented.difference(&seen).collect();
    assert!(
        not_in_the_answer.is_empty(),
        "documented in docs/api.md, not in the answer: {not_in_the_answer:?}"
    );
    assert_eq!(
        doc.unreached(),
        Vec::<String>::new(),
        "field tables in docs/api.md that no field of the answer leads to"
    );
}

/// `null` and absent exactly where docs/api.md says: with no optional value there, every
/// field it says may be `null` is (the fields of an object with the object there), no
/// other one is, and only the fields it says may be absent are missing.
#[test]
fn null_and_absent_exactly_where_the_doc_says() {
    let doc = ApiDoc::load();
    let mut nulls = BTreeSet::new();
    for (objects, values) in [(false, false), (true, false)] {
        let body = answer(objects, values);
        let answer: Json = serde_json::from_str(&body).unwrap();
        let (problems, seen) = doc.check(&answer);
        assert!(
            problems.is_empty(),
            "/api/v1/stuck and docs/api.md disagree:\n{}",
            problems.join("\n")
        );
        let mut found = Vec::new();
        answer.nulls("", &mut found);
        nulls.extend(found);
        if objects {
            let missing: BTreeSet<String> = doc.paths().difference(&seen).cloned().collect();
            assert_eq!(
                missing,
                doc.optional_paths(),
                "left out of the answer / said in docs/api.md to be absent"
            );
        }
    }
    assert_eq!(
        nulls,
        doc.nullable_paths(),
        "null in the answer / said in docs/api.md to be null"
    );
}

/// The check fails on a field the code adds, on one it drops, on a type the doc does
/// not give and on a `null` the doc does not allow.
#[test]
fn the_check_finds_what_the_doc_does_not_say() {
    let body = answer(true, true);
    let doc = ApiDoc::load();

    let mut answer: Json = serde_json::from_str(&body).unwrap();
    let Json::Object(root) = &mut answer else {
        panic!()
    };
    root.push(("flagged".into(), Json::Bool(true)));
    let Json::Array(partitions) = &mut root[0].1 else {
        panic!()
    };
    let Json::Object(partition) = &mut partitions[0] else {
        panic!()
    };
    partition.retain(|(key, _)| key != "hw_minus_lso");
    for (key, value) in partition.iter_mut() {
        match key.as_str() {
            "partition" => *value = Json::String("0".into()),
            "lso_stuck_seconds" => *value = Json::Null,
            _ => {}
        }
    }
    let (problems, _) = doc.check(&answer);
    let said = problems.join("\n");
    for expected in [
        "flagged: not in docs/api.md",
        "partitions[].hw_minus_lso: missing",
        "partitions[].partition: String(\"0\") is not Integer",
        "partitions[].lso_stuck_seconds: Null is not Number",
    ] {
        assert!(said.contains(expected), "{expected:?} not in:\n{said}");
    }
    assert_eq!(problems.len(), 4, "{said}");

    // A row taken out of the doc: the answer's field is undocumented.
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/api.md"))
        .unwrap()
        .replace(
            "| `coordinator_moves` | integer |",
            "| `coordinator_move` | integer |",
        );
    let answer: Json = serde_json::from_str(&body).unwrap();
    let (problems, seen) = ApiDoc::parse(&text).check(&answer);
    assert!(
        problems.iter().any(|p| {
            p
            == "transactions[].oldest[].coordinator_moves: not in docs/api.md (#listed-transaction)"
        }),
        "{problems:#?}"
    );
    let documented = ApiDoc::parse(&text).paths();
    assert!(documented
        .difference(&seen)
        .any(|p| p == "transactions[].oldest[].coordinator_move"));
}

/// The endpoints table lists the paths the router serves, no more, no fewer.
#[test]
fn the_endpoints_are_the_routes() {
    let source =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/serve/mod.rs")).unwrap();
    let router = &source[source.find("pub fn router(").expect("fn router")..];
    let router = &router[..router.find("\n}\n").unwrap()];
    let routes: BTreeSet<String> = router
        .split(".route(")
        .skip(1)
        .map(|route| {
            let first = route.split(',').next().unwrap().trim();
            match first.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
                Some(path) => path.to_string(),
                // `--web.telemetry-path`, documented under its default.
                None if first == "&state.telemetry_path" => "/metrics".to_string(),
                None => panic!("a route docs/api.md cannot name: {first}"),
            }
        })
        .collect();
    let documented: BTreeSet<String> = ApiDoc::load().endpoints.into_iter().collect();
    assert_eq!(
        documented, routes,
        "docs/api.md's endpoints and the router's routes"
    );
}
