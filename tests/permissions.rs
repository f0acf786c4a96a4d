//! The permission tables of the docs follow the one list in the code of which request each
//! feature sends with which permission (`kafka::features::PERMISSIONS`): every permission
//! in the list is a row of each table, every row is in the list, and where a table names
//! the requests, it names each request of that permission.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use kafka_lso_exporter::kafka::features::{Resource, PERMISSIONS};

/// (operation, resource) as the list names them, lower case.
type Key = (String, Resource);

fn resource_of(words: &str) -> Option<Resource> {
    let w = words.to_ascii_lowercase().replace(['`', '_', '-'], " ");
    if w.contains("[ha]") {
        Some(Resource::CoordinationGroup)
    } else if w.contains("transactional") {
        Some(Resource::TransactionalId)
    } else if w.contains("topic") {
        Some(Resource::Topic)
    } else if w.contains("group") {
        Some(Resource::Group)
    } else if w.contains("cluster") {
        Some(Resource::Cluster)
    } else {
        None
    }
}

fn operation_of(words: &str) -> Option<String> {
    let w = words.to_ascii_lowercase().replace(['`', '_'], "");
    let first = w.split_whitespace().next()?;
    ["describeconfigs", "describe", "read"]
        .into_iter()
        .find(|op| first == *op)
        .map(str::to_string)
}

/// The rows of the table whose header row starts with `header`: (permission cell, the
/// cell of column `requests`, if any).
fn table(
    doc: &str,
    header: &str,
    permission_columns: &[usize],
    requests_column: Option<usize>,
) -> Vec<(Key, String)> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(doc)).unwrap();
    let start = text
        .lines()
        .position(|l| l.starts_with(header))
        .unwrap_or_else(|| panic!("{doc}: no table starting {header:?}"));
    let mut rows = Vec::new();
    for line in text.lines().skip(start + 2) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let cell = permission_columns
            .iter()
            .map(|i| cells[*i])
            .collect::<Vec<_>>()
            .join(" ");
        let (Some(op), Some(resource)) = (operation_of(&cell), resource_of(&cell)) else {
            continue; // a row of a permission the exporter does not ask for (Connect)
        };
        let requests = requests_column
            .map(|i| cells[i].to_string())
            .unwrap_or_default();
        rows.push(((op, resource), requests));
    }
    rows
}

fn list() -> BTreeMap<Key, BTreeSet<&'static str>> {
    let mut out: BTreeMap<Key, BTreeSet<&'static str>> = BTreeMap::new();
    for p in &PERMISSIONS {
        out.entry((p.operation.to_ascii_lowercase(), p.resource))
            .or_default()
            .extend(p.requests.iter().copied());
    }
    out
}

fn check(doc: &str, header: &str, permission_columns: &[usize], requests_column: Option<usize>) {
    let list = list();
    let rows = table(doc, header, permission_columns, requests_column);
    let in_doc: BTreeSet<&Key> = rows.iter().map(|(k, _)| k).collect();
    let in_code: BTreeSet<&Key> = list.keys().collect();
    assert_eq!(
        in_doc, in_code,
        "{doc}: the permissions of the table differ from src/kafka/features.rs"
    );
    if requests_column.is_some() {
        for (key, requests) in &rows {
            for request in &list[key] {
                assert!(
                    requests.contains(request),
                    "{doc}: the row of {key:?} does not name {request}: {requests}"
                );
            }
        }
    }
}

#[test]
fn the_platforms_table_is_the_list() {
    check(
        "docs/platforms/README.md",
        "| Kafka permission |",
        &[0],
        Some(1),
    );
}

#[test]
fn the_strimzi_table_is_the_list() {
    check("docs/platforms/strimzi.md", "| ACL |", &[0], None);
}

#[test]
fn the_msk_table_is_the_list() {
    // The Kafka ACL column, with the resource column for the [ha] group.
    check("docs/platforms/aws-msk.md", "| action |", &[2, 1], Some(3));
}

#[test]
fn the_security_page_table_is_the_list() {
    check(
        "docs/kafka-security.md",
        "| Kafka permission |",
        &[0],
        Some(1),
    );
}

#[test]
fn the_aiven_table_is_the_list() {
    check("docs/platforms/aiven.md", "| ACL |", &[0], None);
}

#[test]
fn the_redpanda_table_is_the_list() {
    check("docs/platforms/redpanda.md", "| ACL |", &[0], None);
}

#[test]
fn the_confluent_cloud_table_is_the_list() {
    check(
        "docs/platforms/confluent-cloud.md",
        "| operation |",
        &[0, 1],
        None,
    );
}
