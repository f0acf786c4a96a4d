//! docs/metrics.md against the families the render walks: every family `/metrics` can
//! show is documented there, under its name, and every metric the document's tables name
//! is one `/metrics` can show. The README's table is checked the same way.

use std::collections::BTreeSet;

use kafka_lso_exporter::expose::catalog;

/// The metric names a markdown document's tables name in their first column.
fn table_names(document: &str) -> BTreeSet<String> {
    let name = regex::Regex::new(r"`(kafka_[a-z0-9_]+)`").unwrap();
    document
        .lines()
        .filter(|l| l.starts_with("| `kafka_"))
        .flat_map(|l| {
            let first = l.split('|').nth(1).unwrap_or_default().to_string();
            name.captures_iter(&first)
                .map(|c| c[1].to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn families() -> BTreeSet<String> {
    catalog().into_iter().map(|(name, _)| name).collect()
}

#[test]
fn docs_metrics_documents_every_family_and_only_those() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md"),
    )
    .unwrap();
    let documented = table_names(&doc);
    let shown = families();
    let undocumented: Vec<&String> = shown.difference(&documented).collect();
    let unknown: Vec<&String> = documented.difference(&shown).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "docs/metrics.md lacks {undocumented:?}, and names {unknown:?} that /metrics never shows"
    );
}

#[test]
fn the_readme_names_only_families_that_exist() {
    let readme =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap();
    let shown = families();
    // Every metric name it quotes anywhere (the label `kafka_cluster` aside), with or
    // without its `{...}` or suffix-free form.
    let name = regex::Regex::new(r"`(kafka_[a-z0-9_]+)").unwrap();
    let quoted: BTreeSet<String> = name
        .captures_iter(&readme)
        .map(|c| c[1].to_string())
        .filter(|n| n != "kafka_cluster")
        .collect();
    assert!(!quoted.is_empty(), "README.md quotes no metric");
    let unknown: Vec<&String> = quoted.iter().filter(|n| !shown.contains(*n)).collect();
    assert!(
        unknown.is_empty(),
        "README.md names {unknown:?}, which /metrics never shows"
    );
}
