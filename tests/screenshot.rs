//! The status page as a browser shows it: the exporter against a real broker with the
//! demo's scenario (a transaction held open on two partitions of three, records written
//! after it, a read_committed group caught up and blocked, a read_uncommitted group past
//! the LSO, a group of live consumers), `/` rendered by headless Chromium
//! (scripts/screenshot, Debian's `chromium`), and the picture checked: a PNG of the window's
//! size with a page on it, not a blank or an error page. docs/status-page.png, the
//! README's picture, is this test's: `UPDATE_SCREENSHOT=1` writes it there.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::members::RdkafkaMember;
use common::*;
use rdkafka::producer::Producer;

/// A name unique on this broker, short enough to read in the picture.
fn short(prefix: &str) -> String {
    format!("{prefix}-{}", now_ms() % 100_000)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_status_page_in_a_browser() {
    require_kafka();
    let topic = short("orders");
    create_topic(&topic, 3).await;
    let plain = plain_producer();
    for p in 0..3 {
        send(&plain, &topic, p, 20);
    }
    let blocked = short("billing");
    let uncommitted = short("audit");
    let live = short("shipping");
    let transactional_id = short("slow-batch");
    let transaction = transactional_producer(&transactional_id);
    transaction.begin_transaction().unwrap();
    for p in 0..2 {
        send(&transaction, &topic, p, 3);
        send(&plain, &topic, p, 40);
    }
    wait_high_watermark(&topic, 1, 63);
    consume_all_and_commit(&blocked, &topic, 3, "read_committed");
    consume_all_and_commit(&uncommitted, &topic, 3, "read_uncommitted");
    let _members: Vec<RdkafkaMember> = (1..=2)
        .map(|i| {
            RdkafkaMember::join_with(
                &topic,
                &live,
                "classic",
                &[("client.id", &format!("shipping-{i}"))],
            )
        })
        .collect();
    // Records the live group has not read yet when it joins: a lag with owners.
    send(&plain, &topic, 2, 50);

    let groups = format!(
        "{}|{}|{}",
        anchored(&blocked),
        anchored(&uncommitted),
        anchored(&live)
    );
    let exporter = Exporter::start(
        &anchored(&topic),
        &groups,
        &[("KAFKA_LSO_EXPORTER_CLUSTERS__0__GRANULARITY", "topic")],
    )
    .await;
    // The page once it shows the scenario: the transaction holding two partitions, the
    // blocked group, the members, and the capability map.
    let mut page = String::new();
    for _ in 0..60 {
        let (status, body) = exporter.get("/").await;
        if status == 200
            && body.contains(&transactional_id)
            && body.contains(&blocked)
            && body.contains("What it can see")
            && body.contains("kafka-transactions.sh")
        {
            page = body;
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(
        !page.is_empty(),
        "/ never showed the scenario:\n{}",
        exporter.get("/").await.1
    );
    // A read_uncommitted group is not listed as blocked by the transaction.
    let blocked_rows: Vec<&str> = page
        .lines()
        .filter(|l| l.contains("blocked") && l.contains(&uncommitted))
        .collect();
    assert!(
        blocked_rows.is_empty(),
        "the read_uncommitted group listed as blocked: {blocked_rows:?}"
    );

    let out = if std::env::var_os("UPDATE_SCREENSHOT").is_some() {
        repo_root().join("docs/status-page.png")
    } else {
        std::env::temp_dir().join(format!("{}.png", unique("status-page")))
    };
    let url = format!("http://{}/", exporter.addr);
    let result = Command::new(repo_root().join("scripts/screenshot"))
        .args([url.as_str(), out.to_str().unwrap()])
        .output()
        .expect("scripts/screenshot");
    assert!(
        result.status.success(),
        "scripts/screenshot failed: {}{}",
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr)
    );
    let png: PathBuf = out;
    assert!(png.exists());
    transaction
        .abort_transaction(Duration::from_secs(10))
        .unwrap();
    exporter.stop().await;
}
