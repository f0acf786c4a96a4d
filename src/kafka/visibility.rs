//! Topics the exporter expects to sample and does not see ([`TopicWatch`]). Brokers leave
//! out of an all-topics Metadata answer every topic the principal may not Describe,
//! without an error: a topic an ACL does not cover looks like no topic at all, and a
//! cluster whose topics are all hidden looks healthy and empty. The exporter knows some of
//! the topics it should see: those the configuration names whole (`^orders$`), those it
//! sampled in an earlier cycle, and those the groups it samples read (their members'
//! assignments, their committed offsets). Each of them missing from a cycle's metadata is
//! asked about in a Metadata request that names it, and the answer says why
//! ([`Absence`]): an ACL (a refusal on the capability map, [`denial`]), a topic that does
//! not exist (deleted), or not confirmed either way (a broker's metadata behind the
//! others', no answer).
//!
//! What the derivation keeps of a topic missing from a cycle follows
//! [`UnseenTopic::keeps_state`]: a refused topic's clocks stay while it is refused, those
//! of a topic not confirmed gone stay for [`GAP_CYCLES`] cycles (a leader election or a
//! metadata race must not restart a stuck clock), a deleted topic's go at once.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

use super::RawGroup;

/// Cycles in a row a topic sampled before may be missing, its absence not confirmed
/// either way, before the exporter forgets it and what it knew of it.
pub const GAP_CYCLES: u32 = 3;

/// Topics listed by name in a denial at most; the rest are counted.
const NAMED_IN_DENIAL: usize = 5;

/// Why the exporter expects to see a topic.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Expectation {
    /// The configuration names it whole (`topics.include = ["^orders$"]`).
    Configured,
    /// A member of this group is assigned it (or is to be: KIP-848's target).
    Assigned(String),
    /// This group has committed offsets on it.
    Committed(String),
    /// An earlier cycle sampled it.
    Sampled,
}

impl fmt::Display for Expectation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expectation::Configured => f.write_str("named in topics.include"),
            Expectation::Assigned(group) => write!(f, "group {group:?} reads it"),
            Expectation::Committed(group) => write!(f, "group {group:?} commits on it"),
            Expectation::Sampled => f.write_str("sampled before"),
        }
    }
}

/// What a Metadata request that names a missing topic answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Absence {
    /// TOPIC_AUTHORIZATION_FAILED: the principal may not Describe it (Kafka gives a
    /// principal that may not the same answer whether the topic exists or not).
    Denied,
    /// UNKNOWN_TOPIC_OR_PARTITION: it does not exist (deleted, or not created yet).
    Deleted,
    /// Neither: another error, no answer, or the topic listed when named (a broker's
    /// metadata was behind the others'). Said in words for the log.
    Unconfirmed(String),
}

/// A topic the exporter expected in a cycle and did not see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnseenTopic {
    pub topic: Arc<str>,
    pub expected: Expectation,
    pub absence: Absence,
    /// Cycles in a row it has been missing, this one included.
    pub cycles: u32,
}

impl UnseenTopic {
    /// What the exporter learned of the topic's partitions (stuck clocks, the groups'
    /// commit-stall clocks) stays: while it is refused, or for [`GAP_CYCLES`] cycles while
    /// its absence is not confirmed; never once it is deleted.
    pub fn keeps_state(&self) -> bool {
        match self.absence {
            Absence::Denied => true,
            Absence::Deleted => false,
            Absence::Unconfirmed(_) => self.cycles <= GAP_CYCLES,
        }
    }
}

/// The refusal a cycle's unseen topics amount to: how many the principal may not
/// describe, and a message naming them and why each is expected (in the words
/// [`super::features::cause_of`] reads as an ACL on the topics); `None` when none is
/// refused.
pub fn denial(unseen: &[UnseenTopic]) -> Option<(u64, String)> {
    let denied: Vec<&UnseenTopic> = unseen
        .iter()
        .filter(|u| u.absence == Absence::Denied)
        .collect();
    if denied.is_empty() {
        return None;
    }
    let mut named: Vec<String> = denied
        .iter()
        .take(NAMED_IN_DENIAL)
        .map(|u| format!("{:?} ({})", u.topic, u.expected))
        .collect();
    if denied.len() > NAMED_IN_DENIAL {
        named.push(format!("and {} more", denied.len() - NAMED_IN_DENIAL));
    }
    Some((
        denied.len() as u64,
        format!(
            "Topic authorization failed for {} the exporter is to sample, which the brokers \
             leave out of the metadata it gets: {}",
            match denied.len() {
                1 => "1 topic".to_string(),
                n => format!("{n} topics"),
            },
            named.join(", ")
        ),
    ))
}

/// Across cycles, the topics the exporter expects to see: one cluster's, kept by its
/// sampler.
#[derive(Debug, Default)]
pub struct TopicWatch {
    /// The topics the configuration names whole.
    configured: Vec<Arc<str>>,
    /// Topics listed in an earlier cycle, with the cycles in a row each has been missing
    /// since (0: listed in the last one).
    known: BTreeMap<Arc<str>, u32>,
}

impl TopicWatch {
    pub fn new(configured: impl IntoIterator<Item = String>) -> TopicWatch {
        TopicWatch {
            configured: configured.into_iter().map(Arc::from).collect(),
            known: BTreeMap::new(),
        }
    }

    /// The topics expected and not among `listed` (this cycle's metadata, as the topic
    /// filter selects it), each with why, sorted by name: those the configuration names,
    /// those `groups` read or commit on that `accepts` (the topic filter), those sampled
    /// before.
    pub fn missing(
        &self,
        listed: &HashSet<&str>,
        groups: &[RawGroup],
        accepts: impl Fn(&str) -> bool,
    ) -> Vec<(Arc<str>, Expectation)> {
        let mut missing: BTreeMap<Arc<str>, Expectation> = BTreeMap::new();
        let mut expect = |topic: &str, why: Expectation| {
            if !listed.contains(topic) && !missing.contains_key(topic) {
                missing.insert(Arc::from(topic), why);
            }
        };
        for topic in &self.configured {
            expect(topic, Expectation::Configured);
        }
        for group in groups {
            let members = group.detail.iter().flat_map(|d| &d.members);
            for member in members {
                let named = member.assigned.iter().chain(&member.target).flatten();
                for (topic, _) in named.filter(|(topic, _)| accepts(topic)) {
                    expect(topic, Expectation::Assigned(group.name.clone()));
                }
            }
        }
        for group in groups {
            for offset in group.committed.iter().flatten() {
                if accepts(&offset.topic) {
                    expect(&offset.topic, Expectation::Committed(group.name.clone()));
                }
            }
        }
        for topic in self.known.keys() {
            expect(topic, Expectation::Sampled);
        }
        missing.into_iter().collect()
    }

    /// Takes in one cycle: the topics it `listed`, and what was answered of each missing
    /// one ([`TopicWatch::missing`]); returns those missing, for the sample. A deleted
    /// topic is forgotten; one sampled before and not confirmed either way, after
    /// [`GAP_CYCLES`] cycles; a refused one stays expected.
    pub fn settle<'a>(
        &mut self,
        listed: impl IntoIterator<Item = &'a Arc<str>>,
        answered: Vec<(Arc<str>, Expectation, Absence)>,
    ) -> Vec<UnseenTopic> {
        let mut known: BTreeMap<Arc<str>, u32> =
            listed.into_iter().map(|topic| (topic.clone(), 0)).collect();
        let mut unseen = Vec::with_capacity(answered.len());
        for (topic, expected, absence) in answered {
            let cycles = self.known.get(&topic).map_or(1, |missed| missed + 1);
            let remember = match absence {
                Absence::Denied => true,
                Absence::Deleted => false,
                // What the configuration or a group names is asked about again anyway;
                // its count goes on.
                Absence::Unconfirmed(_) => cycles <= GAP_CYCLES || expected != Expectation::Sampled,
            };
            if remember {
                known.insert(topic.clone(), cycles);
            }
            unseen.push(UnseenTopic {
                topic,
                expected,
                absence,
                cycles,
            });
        }
        self.known = known;
        unseen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::{CommittedOffset, GroupDetail, RawMember};

    fn listed(topics: &[&'static str]) -> HashSet<&'static str> {
        topics.iter().copied().collect()
    }

    fn arcs(topics: &[&str]) -> Vec<Arc<str>> {
        topics.iter().map(|t| Arc::from(*t)).collect()
    }

    /// A classic group whose member is assigned `assigned` and that committed on
    /// `committed`.
    fn group(name: &str, assigned: &[&str], committed: &[&str]) -> RawGroup {
        RawGroup {
            name: name.into(),
            detail: Some(GroupDetail {
                members: vec![RawMember {
                    assigned: Some(assigned.iter().map(|t| (t.to_string(), vec![0])).collect()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            committed: Some(
                committed
                    .iter()
                    .map(|t| CommittedOffset {
                        topic: Arc::from(*t),
                        partition: 0,
                        offset: 5,
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    /// Why each missing topic is expected: named by the configuration first, then read
    /// by a group, committed on, sampled before; the topic filter applies to the groups'
    /// topics; a topic listed is not missing.
    #[test]
    fn what_is_expected_and_why() {
        let mut watch = TopicWatch::new(["orders".to_string()]);
        watch.settle(&arcs(&["payments", "audit"]), Vec::new());
        let groups = [
            group("billing", &["invoices", "orders", "payments"], &["ledger"]),
            group("tests", &["test-scratch"], &[]),
        ];
        let missing = watch.missing(&listed(&["payments"]), &groups, |t| !t.starts_with("test-"));
        assert_eq!(
            missing,
            vec![
                (Arc::from("audit"), Expectation::Sampled),
                (
                    Arc::from("invoices"),
                    Expectation::Assigned("billing".into())
                ),
                (
                    Arc::from("ledger"),
                    Expectation::Committed("billing".into())
                ),
                (Arc::from("orders"), Expectation::Configured),
            ]
        );
    }

    /// A refused topic stays expected; one not confirmed either way for [`GAP_CYCLES`]
    /// cycles keeps its state, then is forgotten; a deleted one at once.
    #[test]
    fn refused_kept_unconfirmed_for_a_few_cycles_deleted_never() {
        let mut watch = TopicWatch::new(Vec::<String>::new());
        watch.settle(&arcs(&["orders", "audit", "old"]), Vec::new());
        for cycle in 1..=GAP_CYCLES + 2 {
            let missing = watch.missing(&listed(&[]), &[], |_| true);
            let answered: Vec<(Arc<str>, Expectation, Absence)> = missing
                .into_iter()
                .map(|(topic, why)| {
                    let absence = match &*topic {
                        "orders" => Absence::Denied,
                        "audit" => Absence::Unconfirmed("no answer".into()),
                        _ => Absence::Deleted,
                    };
                    (topic, why, absence)
                })
                .collect();
            let unseen = watch.settle(std::iter::empty(), answered);
            let of = |topic: &str| unseen.iter().find(|u| &*u.topic == topic);
            let orders = of("orders").expect("a refused topic stays expected");
            assert_eq!((orders.cycles, orders.keeps_state()), (cycle, true));
            match of("audit") {
                Some(audit) => {
                    assert!(cycle <= GAP_CYCLES + 1, "forgotten after the gap");
                    assert_eq!(audit.keeps_state(), cycle <= GAP_CYCLES, "cycle {cycle}");
                }
                None => assert!(cycle > GAP_CYCLES + 1, "cycle {cycle}"),
            }
            let old = of("old");
            assert_eq!(
                old.map(UnseenTopic::keeps_state),
                (cycle == 1).then_some(false)
            );
        }
        // Listed again: nothing missing.
        watch.settle(&arcs(&["orders"]), Vec::new());
        assert!(watch
            .missing(&listed(&["orders"]), &[], |_| true)
            .is_empty());
    }

    #[test]
    fn a_denial_names_the_topics_and_why_and_reads_as_an_acl() {
        let unseen: Vec<UnseenTopic> = (0..7)
            .map(|i| UnseenTopic {
                topic: Arc::from(format!("orders-{i}")),
                expected: Expectation::Assigned("billing".into()),
                absence: Absence::Denied,
                cycles: 1,
            })
            .chain([UnseenTopic {
                topic: Arc::from("gone"),
                expected: Expectation::Sampled,
                absence: Absence::Deleted,
                cycles: 1,
            }])
            .collect();
        let (count, message) = denial(&unseen).unwrap();
        assert_eq!(count, 7);
        assert!(
            message.contains("7 topics")
                && message.contains("\"orders-0\" (group \"billing\" reads it)")
                && message.ends_with("and 2 more")
                && !message.contains("gone"),
            "{message}"
        );
        assert_eq!(
            crate::kafka::features::cause_of(&message),
            crate::kafka::features::Cause::Denied
        );
        assert_eq!(denial(&unseen[7..]), None);
    }
}
