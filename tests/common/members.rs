//! Consumer group members through librdkafka, each polling in a thread of its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use super::bootstrap;

/// A librdkafka member polling in its own thread until dropped (then it leaves).
pub struct RdkafkaMember {
    stop: Arc<AtomicBool>,
    /// Set: the thread stops polling (librdkafka goes on heartbeating in its own threads,
    /// but nothing serves a rebalance: a KIP-848 member then keeps what it is to give up).
    paused: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RdkafkaMember {
    /// Joins `group` with `protocol` (`classic` or `consumer`), subscribed to `topic`.
    pub fn join(topic: &str, group: &str, protocol: &str) -> RdkafkaMember {
        Self::join_with(topic, group, protocol, &[])
    }

    /// The same with more client properties (`client.id`, ...).
    pub fn join_with(
        topic: &str,
        group: &str,
        protocol: &str,
        properties: &[(&str, &str)],
    ) -> RdkafkaMember {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", bootstrap())
            .set("group.id", group)
            .set("group.protocol", protocol)
            .set("auto.offset.reset", "earliest")
            .set("auto.commit.interval.ms", "200");
        for (key, value) in properties {
            config.set(*key, *value);
        }
        let consumer: BaseConsumer = config.create().expect("consumer");
        consumer.subscribe(&[topic]).expect("subscribe");
        let stop = Arc::new(AtomicBool::new(false));
        let paused = Arc::new(AtomicBool::new(false));
        let (flag, pause) = (stop.clone(), paused.clone());
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                if pause.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                if let Some(Err(e)) = consumer.poll(Duration::from_millis(100)) {
                    eprintln!("librdkafka member: {e}");
                }
            }
            consumer.unsubscribe();
            // Dropping the consumer closes it: it leaves the group.
        });
        RdkafkaMember {
            stop,
            paused,
            thread: Some(thread),
        }
    }

    /// Stops polling (`true`) or polls again (`false`).
    pub fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }
}

impl Drop for RdkafkaMember {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
