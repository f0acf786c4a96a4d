//! Replicas share fate with the clusters they serve, not with one coordination cluster:
//! two real clusters (the suite's broker, and one of this binary's own that it stops),
//! three replicas of one `[ha]` group. With every broker of one cluster stopped, the
//! other cluster stays served by exactly one replica with `up 1` at every scrape, and the
//! cluster that is down says so (`up 0`), so that `KafkaLsoExporterClusterDown` can fire
//! for it. This binary starts and stops a broker of its own: it runs alone.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::binary::Binary;
use common::*;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::ClientConfig;

/// broker 1's PLAINTEXT port of this binary's own cluster.
const FAR_PORT: u16 = 19600;

/// The cluster this binary starts and stops: scripts/kafka-local with files of its own
/// (the libraries of the suite's broker shared through a link).
struct FarCluster {
    home: PathBuf,
}

impl FarCluster {
    fn command(&self, action: &str) -> Command {
        let mut command = Command::new(repo_root().join("scripts/kafka-local"));
        command
            .arg(action)
            .env("KAFKA_LOCAL_PORT", FAR_PORT.to_string())
            .env("KAFKA_LOCAL_HOME", &self.home)
            .env("KAFKA_BROKERS", "1")
            .env_remove("KAFKA_BOOTSTRAP");
        command
    }

    fn start() -> FarCluster {
        let version = std::env::var("KAFKA_VERSION").unwrap_or_else(|_| "4.4.0".into());
        let shared = std::env::var("KAFKA_LOCAL_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|_| repo_root().join(".cache/kafka"));
        let home = repo_root().join(".cache/kafka-ha-fate");
        std::fs::create_dir_all(&home).unwrap();
        let libs = format!("libs-{version}");
        if shared.join(&libs).is_dir() && !home.join(&libs).exists() {
            std::os::unix::fs::symlink(shared.join(&libs), home.join(&libs)).unwrap();
        }
        let far = FarCluster { home };
        let status = far.command("start").status().expect("scripts/kafka-local");
        assert!(status.success(), "could not start the second cluster");
        far
    }

    fn stop(&self) {
        let status = self.command("stop").status().expect("scripts/kafka-local");
        assert!(status.success(), "could not stop the second cluster");
    }

    fn bootstrap(&self) -> String {
        format!("127.0.0.1:{FAR_PORT}")
    }
}

impl Drop for FarCluster {
    fn drop(&mut self) {
        let _ = self.command("stop").status();
    }
}

async fn create_far_topic(bootstrap: &str, name: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let topic = NewTopic::new(name, 1, TopicReplication::Fixed(1));
    let created = admin
        .create_topics([&topic], &AdminOptions::new())
        .await
        .unwrap();
    for result in created {
        result.unwrap();
    }
}

/// Per cluster, the replicas that serve its `up`, and its values there.
async fn ups(replicas: &[(&str, &Binary)]) -> BTreeMap<String, Vec<(String, f64)>> {
    let mut ups: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
    for (name, replica) in replicas {
        if let Some(scrape) = replica.scrape_within(Duration::from_secs(1)).await {
            for (labels, value) in scrape.series("kafka_lso_exporter_up", &[]) {
                ups.entry(labels["kafka_cluster"].clone())
                    .or_default()
                    .push((name.to_string(), value));
            }
        }
    }
    ups
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cluster_that_is_down_hides_only_itself() {
    require_kafka();
    let far = FarCluster::start();
    let (near_topic, far_topic) = (unique("fate-near"), unique("fate-far"));
    create_topic(&near_topic, 1).await;
    create_far_topic(&far.bootstrap(), &far_topic).await;
    let group = unique("fate");
    // The far cluster first: where one coordination group served every cluster, it was
    // the first cluster's (`ha.cluster` by default), and stopping it left every cluster
    // unserved.
    let mut env = cluster_env(0, "far", &far.bootstrap(), &far_topic, &[]);
    env.extend(cluster_env(1, "near", &bootstrap(), &near_topic, &[]));
    env.extend(
        [
            ("KAFKA_LSO_EXPORTER_HA__GROUP", group.as_str()),
            ("KAFKA_LSO_EXPORTER_HA__SESSION_TIMEOUT", "6s"),
            ("KAFKA_LSO_EXPORTER_HA__HEARTBEAT_INTERVAL", "1s"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let start =
        || Binary::start_logging(&env, "info,kafka_lso_exporter::kafka::coordination=debug");
    let (r1, r2, r3) = (start(), start(), start());
    let replicas = [("r1", &r1), ("r2", &r2), ("r3", &r3)];
    let logs = || {
        replicas
            .iter()
            .map(|(n, r)| format!("--- {n}:\n{}", r.log()))
            .collect::<String>()
    };

    // Both clusters served, each by one replica.
    let began = Instant::now();
    loop {
        let ups = ups(&replicas).await;
        let served = |c: &str| ups.get(c).is_some_and(|by| by.len() == 1 && by[0].1 == 1.0);
        if served("near") && served("far") {
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "not both clusters served once: {ups:?}\n{}",
            logs()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    // Every broker of the far cluster stopped: the near one is served throughout, by one
    // replica, up; the far one is reported down.
    far.stop();
    let stopped = Instant::now();
    let mut far_down_after = None;
    while stopped.elapsed() < Duration::from_secs(40) {
        let ups = ups(&replicas).await;
        let near = ups.get("near").cloned().unwrap_or_default();
        assert!(
            near.len() == 1 && near[0].1 == 1.0,
            "{:.1} s after the far cluster stopped, the near one is not served once with up 1: {ups:?}\n{}",
            stopped.elapsed().as_secs_f64(),
            logs()
        );
        let far_ups = ups.get("far").cloned().unwrap_or_default();
        if !far_ups.is_empty() && far_ups.iter().all(|(_, v)| *v == 0.0) {
            far_down_after.get_or_insert(stopped.elapsed());
        }
        if far_down_after.is_some() {
            assert!(
                far_ups.iter().all(|(_, v)| *v == 0.0),
                "the far cluster is up somewhere after it was down: {ups:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let far_down_after = far_down_after.unwrap_or_else(|| {
        panic!(
            "nobody reports the far cluster down (up 0) 40 s after its broker stopped\n{}",
            logs()
        )
    });
    // Within the session timeout, the cycle that notices, and slack for a busy machine.
    assert!(
        far_down_after < Duration::from_secs(30),
        "the far cluster was reported down only after {far_down_after:?}"
    );
    eprintln!("far cluster reported down {far_down_after:?} after its broker stopped; near served throughout");
    for (_, replica) in replicas {
        assert!(replica.alive(), "a replica died:\n{}", logs());
    }
}
