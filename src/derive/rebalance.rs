//! How often each group rebalances: counted from what two descriptions of the group, one
//! cycle apart, say ([`RebalanceWatch`]).
//!
//! - Where the group has an epoch (KIP-848 consumer groups, share and streams groups: the
//!   group epoch goes up by one at every change of members, subscriptions or topology)
//!   or a classic group a generation (its members' subscriptions carry the generation
//!   they last joined in, KIP-792), every step of it counts: a group that went from epoch
//!   5 to 8 between two cycles rebalanced three times, although a cycle saw none of them.
//! - Where it has neither (a classic group whose clients send no generation, or one of
//!   another protocol type than `consumer`), what a cycle can see counts once per
//!   rebalance: the group entering a rebalancing state, or its members or their
//!   assignment changing since the last description. Two rebalances within one interval
//!   then count as one, and one that starts and ends between two cycles without changing
//!   members or assignment is not seen at all.
//!
//! Members that joined and left are counted by member id. A group's first description
//! counts nothing (its history before it is not known); it lives in the exporter's
//! memory: after a restart the counters start at 0, as a Prometheus counter may.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::time::SystemTime;

use super::state::{GroupState, Rebalances};
use crate::kafka::GroupDetail;

/// The states in which a group of any protocol is rebalancing.
const REBALANCING_STATES: &[&str] = &[
    "PreparingRebalance",
    "CompletingRebalance",
    "Assigning",
    "Reconciling",
];

/// What the last description of a group said, and what was counted so far.
#[derive(Debug, Clone)]
struct Entry {
    /// The last epoch (generation) a description said: kept while descriptions say none
    /// (a classic group that is not `Stable` is described without its generation).
    epoch: Option<i64>,
    /// Rebalances counted by observation since `epoch` was last known: an epoch that
    /// reappears counts only the steps those did not.
    observed_since_epoch: u64,
    /// Its members' ids, hashed, sorted: what a cycle compares costs no copy of them.
    members: Vec<u64>,
    /// The members' assignments, each hashed with its member's id ([`fingerprint`]).
    assignment: u64,
    rebalancing: bool,
    /// A rebalance was counted while the group was rebalancing, and the group has not
    /// been seen out of it since: what changes until it is belongs to that rebalance.
    counted_this_one: bool,
    counted: Rebalances,
    /// The broker that last listed the group: whether its absence means it is gone.
    coordinator: Option<String>,
    /// Since when the group is missing from the lists of the brokers that answered.
    missing_since: Option<SystemTime>,
    /// The cycle that last saw the group.
    seen: u64,
}

/// Per group, what the rebalance count needs from the last cycle.
#[derive(Debug, Default)]
pub struct RebalanceWatch {
    entries: HashMap<String, Entry>,
    /// A buffer for a description's member ids.
    spare: Vec<u64>,
    /// Cycles applied so far.
    cycle: u64,
}

impl RebalanceWatch {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A group rebalances now: its state says so, or (KIP-848) a member has not reached its
/// target assignment yet.
fn rebalancing(state: &str, detail: &GroupDetail) -> bool {
    REBALANCING_STATES.contains(&state)
        || detail.members.iter().any(|m| {
            // Both known: an assignment not known (a streams task the topology does
            // not name) is no sign of a rebalance.
            m.assigned.is_some()
                && m.target
                    .as_ref()
                    .is_some_and(|t| Some(t) != m.assigned.as_ref())
        })
}

/// A hash of `value`: a fingerprint to compare with the next cycle's, not a map key, so
/// that a fast hash does (nobody can use a collision to slow the exporter down; a member
/// id made to collide could at most hide its own join or leave from the counts).
fn hash_of(value: &impl Hash) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    value.hash(&mut hasher);
    hasher.finish()
}

/// splitmix64's finaliser: every bit of the result depends on every bit of `x`, so that a
/// sum of such values tells apart sets that the sum of FxHash's (linear in its input)
/// would not (two members swapping assignments).
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The group's member ids, hashed and sorted, into `ids`, and a hash of their assignments
/// that does not depend on the order the members are listed in (each member's id and
/// assignment hashed together and mixed, the members' hashes added up).
fn fingerprint(detail: &GroupDetail, ids: &mut Vec<u64>) -> u64 {
    ids.clear();
    let mut assignment = 0u64;
    for m in &detail.members {
        let id = hash_of(&m.member_id);
        ids.push(id);
        assignment = assignment.wrapping_add(mix(hash_of(&(id, &m.assigned))));
    }
    ids.sort_unstable();
    assignment
}

/// How many of the sorted `a` are not in the sorted `b`.
fn not_in(a: &[u64], b: &[u64]) -> u64 {
    a.iter().filter(|x| b.binary_search(x).is_err()).count() as u64
}

/// KIP-848: partitions of the target assignment their member does not own yet.
fn unreconciled(detail: &GroupDetail) -> Option<u64> {
    let mut any = false;
    let mut missing = 0u64;
    for m in &detail.members {
        // A member whose assignment or target is not known tells nothing.
        let (Some(target), Some(assigned)) = (&m.target, &m.assigned) else {
            continue;
        };
        any = true;
        let owned: HashSet<(&str, i32)> = assigned
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.as_str(), *p)))
            .collect();
        for (topic, partitions) in target {
            missing += partitions
                .iter()
                .filter(|p| !owned.contains(&(topic.as_str(), **p)))
                .count() as u64;
        }
    }
    any.then_some(missing)
}

/// Counts each described group's rebalances since the last cycle and fills
/// [`GroupState::rebalance`]. A group not described in this cycle keeps what was counted
/// (and shows it); a group missing from this cycle is forgotten once `gone` has said of
/// the broker that last listed it, for `grace`, that its absence means the group is gone
/// (a group moving to another coordinator, as in a broker's restart, may be missing from
/// one list or two: its counts go on).
pub fn apply(
    groups: &mut [GroupState],
    watch: &mut RebalanceWatch,
    wall: SystemTime,
    grace: std::time::Duration,
    gone: impl Fn(Option<&str>) -> bool,
) {
    watch.cycle += 1;
    let cycle = watch.cycle;
    for group in groups.iter_mut() {
        let Some(detail) = &group.detail else {
            // Not described in this cycle: what was counted stays, what the description
            // said of now (rebalancing, unreconciled partitions) is not known.
            group.rebalance = watch.entries.get_mut(&group.name).map(|e| {
                e.seen = cycle;
                Rebalances {
                    rebalancing: false,
                    unreconciled: None,
                    ..e.counted
                }
            });
            continue;
        };
        let mut members = std::mem::take(&mut watch.spare);
        let assignment = fingerprint(detail, &mut members);
        let now_rebalancing = rebalancing(&group.state, detail);
        let entry = match watch.entries.get_mut(&group.name) {
            Some(entry) => entry,
            None => {
                let entry = Entry {
                    epoch: detail.epoch,
                    observed_since_epoch: 0,
                    members,
                    assignment,
                    rebalancing: now_rebalancing,
                    counted_this_one: now_rebalancing,
                    counted: Rebalances {
                        rebalancing: now_rebalancing,
                        unreconciled: unreconciled(detail),
                        ..Rebalances::default()
                    },
                    coordinator: group.coordinator.clone(),
                    missing_since: None,
                    seen: cycle,
                };
                group.rebalance = Some(entry.counted);
                watch.entries.insert(group.name.clone(), entry);
                continue;
            }
        };
        let joined = not_in(&members, &entry.members);
        let left = not_in(&entry.members, &members);
        let steps = match (entry.epoch, detail.epoch) {
            (Some(before), Some(now)) if now >= before => {
                ((now - before) as u64).saturating_sub(entry.observed_since_epoch)
            }
            // The epoch went back: the group was deleted and made again.
            (Some(_), Some(_)) => 1,
            _ => {
                let changed = joined > 0 || left > 0 || assignment != entry.assignment;
                let started = now_rebalancing && !entry.rebalancing;
                if started || (changed && !entry.counted_this_one) {
                    1
                } else {
                    0
                }
            }
        };
        if steps > 0 {
            entry.counted.total += steps;
            entry.counted.last_at = Some(wall);
            entry.counted_this_one = now_rebalancing;
        } else if !now_rebalancing {
            entry.counted_this_one = false;
        }
        entry.counted.joined += joined;
        entry.counted.left += left;
        entry.counted.rebalancing = now_rebalancing;
        entry.counted.unreconciled = unreconciled(detail);
        if detail.epoch.is_some() {
            entry.epoch = detail.epoch;
            entry.observed_since_epoch = 0;
        } else {
            entry.observed_since_epoch += steps;
        }
        // The last description's ids make the next one's buffer: no allocation per group
        // and cycle.
        watch.spare = std::mem::replace(&mut entry.members, members);
        entry.assignment = assignment;
        entry.rebalancing = now_rebalancing;
        entry.coordinator.clone_from(&group.coordinator);
        entry.missing_since = None;
        entry.seen = cycle;
        group.rebalance = Some(entry.counted);
    }
    watch.entries.retain(|_, entry| {
        if entry.seen == cycle || !gone(entry.coordinator.as_deref()) {
            return true;
        }
        let since = *entry.missing_since.get_or_insert(wall);
        wall.duration_since(since).unwrap_or_default() < grace
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::RawMember;
    use std::time::Duration;

    fn member(id: &str, assigned: &[i32]) -> RawMember {
        RawMember {
            member_id: id.into(),
            client_id: format!("client-{id}"),
            client_host: "/10.0.0.1".into(),
            assigned: Some(vec![("orders".into(), assigned.to_vec())]),
            ..RawMember::default()
        }
    }

    fn group(state: &str, epoch: Option<i64>, members: Vec<RawMember>) -> GroupState {
        GroupState {
            name: "billing".into(),
            coordinator: None,
            group_type: "classic".into(),
            protocol: "consumer".into(),
            state: state.into(),
            members: Some(members.len()),
            isolation: None,
            broker_lags: Vec::new(),
            offsets: None,
            granularity: Default::default(),
            status: None,
            detail: Some(GroupDetail {
                epoch,
                assignment_epoch: None,
                members,
            }),
            rebalance: None,
            rates: Vec::new(),
            ruler: Default::default(),
        }
    }

    fn observe(watch: &mut RebalanceWatch, at: u64, g: GroupState) -> Rebalances {
        let mut groups = vec![g];
        let wall = SystemTime::UNIX_EPOCH + Duration::from_secs(at);
        apply(&mut groups, watch, wall, Duration::from_secs(60), |_| true);
        groups[0].rebalance.unwrap()
    }

    /// Epoch steps count, also those no cycle saw; the first description counts none.
    #[test]
    fn every_epoch_step_counts_once() {
        let mut watch = RebalanceWatch::default();
        let first = observe(
            &mut watch,
            100,
            group("Stable", Some(5), vec![member("a", &[0, 1])]),
        );
        assert_eq!((first.total, first.last_at), (0, None));
        let same = observe(
            &mut watch,
            110,
            group("Stable", Some(5), vec![member("a", &[0, 1])]),
        );
        assert_eq!(same.total, 0);
        let jumped = observe(
            &mut watch,
            120,
            group(
                "Stable",
                Some(8),
                vec![member("a", &[0]), member("b", &[1])],
            ),
        );
        assert_eq!(jumped.total, 3);
        assert_eq!((jumped.joined, jumped.left), (1, 0));
        assert_eq!(
            jumped.last_at,
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(120))
        );
    }

    /// Without an epoch, one rebalance seen over several cycles (entering it, then its
    /// members changing, then stable again) counts once; the next one counts again.
    #[test]
    fn without_an_epoch_a_rebalance_seen_twice_counts_once() {
        let mut watch = RebalanceWatch::default();
        let ab = || vec![member("a", &[0]), member("b", &[1])];
        observe(&mut watch, 0, group("Stable", None, ab()));
        let r = observe(&mut watch, 10, group("PreparingRebalance", None, ab()));
        assert_eq!((r.total, r.rebalancing), (1, true));
        let r = observe(
            &mut watch,
            20,
            group("CompletingRebalance", None, vec![member("a", &[])]),
        );
        assert_eq!((r.total, r.left), (1, 1));
        let r = observe(
            &mut watch,
            30,
            group("Stable", None, vec![member("a", &[0, 1])]),
        );
        assert_eq!((r.total, r.rebalancing), (1, false));
        // A member joins between two cycles, the rebalance unseen: its change counts.
        let r = observe(
            &mut watch,
            40,
            group("Stable", None, vec![member("a", &[0]), member("c", &[1])]),
        );
        assert_eq!((r.total, r.joined, r.left), (2, 1, 1));
    }

    /// A classic group is described without its generation while it is not `Stable`:
    /// the generation known before stays, and the steps it jumped once it is known again
    /// count, less those counted by observation meanwhile.
    #[test]
    fn generations_unknown_while_rebalancing_still_count_every_step() {
        let mut watch = RebalanceWatch::default();
        let ab = || vec![member("a", &[0]), member("b", &[1])];
        observe(&mut watch, 0, group("Stable", Some(10), ab()));
        let r = observe(&mut watch, 10, group("PreparingRebalance", None, ab()));
        assert_eq!(r.total, 1);
        let r = observe(&mut watch, 20, group("Stable", Some(14), ab()));
        assert_eq!(r.total, 4, "10 to 14: four rebalances");
        let r = observe(&mut watch, 30, group("CompletingRebalance", None, ab()));
        assert_eq!(r.total, 5);
        let r = observe(&mut watch, 40, group("Stable", Some(18), ab()));
        assert_eq!(r.total, 8, "14 to 18: four more");
        // One rebalance seen while it happens and then its generation: counted once.
        let r = observe(&mut watch, 50, group("PreparingRebalance", None, ab()));
        assert_eq!(r.total, 9);
        let r = observe(&mut watch, 60, group("Stable", Some(19), ab()));
        assert_eq!(r.total, 9);
    }

    /// A group not described in a cycle keeps its count; one gone is forgotten.
    #[test]
    fn undescribed_groups_keep_their_count_and_gone_ones_are_forgotten() {
        let mut watch = RebalanceWatch::default();
        observe(
            &mut watch,
            0,
            group("Stable", Some(1), vec![member("a", &[0])]),
        );
        observe(
            &mut watch,
            10,
            group("Stable", Some(2), vec![member("b", &[0])]),
        );
        let mut undescribed = group("Stable", None, Vec::new());
        undescribed.detail = None;
        let mut groups = vec![undescribed];
        let grace = Duration::from_secs(60);
        let at = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        apply(&mut groups, &mut watch, at(20), grace, |_| true);
        let kept = groups[0].rebalance.unwrap();
        assert_eq!(
            (kept.total, kept.rebalancing, kept.unreconciled),
            (1, false, None)
        );
        apply(&mut [], &mut watch, at(30), grace, |_| false);
        assert_eq!(
            watch.len(),
            1,
            "kept while its absence may be a failed list"
        );
        apply(&mut [], &mut watch, at(40), grace, |_| true);
        assert_eq!(
            watch.len(),
            1,
            "kept while it may be moving to another coordinator"
        );
        apply(&mut [], &mut watch, at(100), grace, |_| true);
        assert!(watch.is_empty());
    }

    /// KIP-848: a member short of its target assignment makes the group rebalancing, and
    /// the partitions it does not own yet are counted.
    #[test]
    fn unreconciled_partitions_of_a_consumer_group() {
        let mut watch = RebalanceWatch::default();
        let mut m = member("a", &[0]);
        m.target = Some(vec![("orders".into(), vec![0, 1, 2])]);
        let r = observe(&mut watch, 0, group("Stable", Some(3), vec![m]));
        assert_eq!((r.rebalancing, r.unreconciled), (true, Some(2)));
        let mut m = member("a", &[0, 1, 2]);
        m.target = Some(vec![("orders".into(), vec![0, 1, 2])]);
        let r = observe(&mut watch, 10, group("Stable", Some(3), vec![m]));
        assert_eq!(
            (r.rebalancing, r.unreconciled, r.total),
            (false, Some(0), 0)
        );
    }

    /// Two members swapping their partitions is a change of assignment: for a group
    /// without an epoch it counts as a rebalance.
    #[test]
    fn members_swapping_partitions_is_a_change() {
        for (a, b) in [
            (&[0, 1][..], &[2, 3][..]),
            (&[0][..], &[1][..]),
            (&[5][..], &[7][..]),
        ] {
            let before = GroupDetail {
                epoch: None,
                assignment_epoch: None,
                members: vec![member("a", a), member("b", b)],
            };
            let after = GroupDetail {
                members: vec![member("a", b), member("b", a)],
                ..before.clone()
            };
            let mut ids = Vec::new();
            assert_ne!(
                fingerprint(&before, &mut ids),
                fingerprint(&after, &mut ids),
                "{a:?} and {b:?} swapped"
            );
        }
    }
}
