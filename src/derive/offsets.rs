//! From what the brokers reported to offsets, gaps and lags (pure code): HW - LSO, both
//! lags of a committed offset (never counting commit/abort markers, nor aborted records
//! for read_committed, where the log was read), time lags, a share group's lag from its
//! broker's, and [`derive`], which turns one cycle's [`RawSample`] into [`Derived`].

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime};

use super::state::*;
use super::stuck::StuckClock;
use crate::kafka::records::FirstRecord;
use crate::kafka::visibility::UnseenTopic;
use crate::kafka::{PartitionLog, RawSample};

/// HW - LSO, clamped at 0.
pub fn hw_minus_lso(high_watermark: i64, last_stable_offset: i64) -> (i64, Option<Anomaly>) {
    let gap = high_watermark.saturating_sub(last_stable_offset);
    if gap < 0 {
        (0, Some(Anomaly::LsoAboveHighWatermark))
    } else {
        (gap, None)
    }
}

/// Both lags and the beyond-LSO distance of a committed offset. A committed offset above
/// the LSO is normal for a read_uncommitted consumer; above the HW it is an anomaly.
///
/// Without `log` the lags are offset differences. With it, offsets the exporter has read
/// count only if a consumer would receive them: never a commit/abort marker, and for
/// the LSO lag never a record of an aborted transaction. Offsets it has not read still
/// count one each, so the lag is exact where the log was read and an upper bound
/// elsewhere.
pub fn lag(
    committed: i64,
    high_watermark: i64,
    last_stable_offset: i64,
    log: Option<&PartitionLog>,
) -> (Lag, Option<Anomaly>) {
    // Offsets come from brokers: saturating, so that no value a broker sends overflows.
    let hw_gap = high_watermark.saturating_sub(committed);
    let window = log.and_then(|l| l.window.as_deref());
    let count = |bound: i64, committed_only: bool| match window {
        Some(w) if committed < bound => w.receivable(committed, bound, committed_only).0,
        _ => bound.saturating_sub(committed).max(0),
    };
    let lag = Lag {
        hw_lag: count(high_watermark, false),
        lso_lag: count(last_stable_offset, true),
        committed_beyond_lso: committed.saturating_sub(last_stable_offset).max(0),
    };
    let anomaly = (hw_gap < 0).then_some(Anomaly::CommittedBeyondHighWatermark);
    (lag, anomaly)
}

/// Seconds since `written_ms`, never negative (a producer's clock may run ahead).
pub(crate) fn age_seconds(now_ms: i64, written_ms: i64) -> f64 {
    now_ms.saturating_sub(written_ms).max(0) as f64 / 1000.0
}

/// How long ago the first record a consumer at `from` would receive below `bound` was
/// written, or that there is none; `None` when the log read does not say.
fn first_record_age(
    log: Option<&PartitionLog>,
    from: i64,
    bound: i64,
    committed_only: bool,
    now_ms: i64,
) -> Option<TimeLag> {
    if from >= bound {
        return Some(TimeLag::NothingLeft);
    }
    match log?
        .extent_at(from)?
        .first_receivable(from, bound, committed_only)
    {
        // A record without a timestamp (-1, NO_TIMESTAMP) has no age to tell.
        FirstRecord::At(written_ms) if written_ms <= 0 => None,
        FirstRecord::At(written_ms) => Some(TimeLag::Since(age_seconds(now_ms, written_ms))),
        FirstRecord::None => Some(TimeLag::NothingLeft),
        FirstRecord::Unknown => None,
    }
}

/// Time lag of a committed offset against the HW and against the LSO (see
/// [`GroupPartitionState::hw_time_lag`]).
pub fn time_lag(
    committed: i64,
    high_watermark: i64,
    last_stable_offset: i64,
    log: Option<&PartitionLog>,
    now_ms: i64,
) -> (Option<TimeLag>, Option<TimeLag>) {
    (
        first_record_age(log, committed, high_watermark, false, now_ms),
        first_record_age(log, committed, last_stable_offset, true, now_ms),
    )
}

/// A share group's lag and time lag on one partition from the lag its broker reports
/// (KIP-1226: offsets from the start offset up to the HW not yet acknowledged), rather
/// than from its start offset, which moves only past whole batches and so stands below
/// records the group already acknowledged.
///
/// The broker counts, among the offsets not acknowledged, the commit/abort markers and
/// aborted records the group has not passed yet (not those it passed), and everything
/// above the LSO, which a read_committed group cannot acquire (as Kafka 4.4 does:
/// tests/share_groups.rs). Which offsets are left is not reported,
/// only how many: the estimate takes them to be the last ones, as for a group that
/// acknowledges in order, so the first one left is `HW - broker lag` (never below the
/// start offset). From there the lags are counted as for any consumer: up to the LSO
/// less markers and aborted records, up to the HW less markers. A group that left a
/// record behind (released, redelivered) has records older than that: the lag is then
/// right in number only where the offsets it skips hold no markers, and the time lag is
/// a lower bound. The HW is this cycle's, sampled after the broker computed its lag:
/// records written in between make the lag look smaller by their number.
///
/// Neither lag exceeds the start offset's ([`lag`], [`time_lag`]), both upper bounds;
/// where the log at the first offset left was not read, the time lag is the start
/// offset's.
pub fn share_lag_from_broker(
    start_offset: i64,
    broker_lag: i64,
    high_watermark: i64,
    last_stable_offset: i64,
    log: Option<&PartitionLog>,
    now_ms: i64,
) -> (Lag, (Option<TimeLag>, Option<TimeLag>)) {
    let (from_start, _) = lag(start_offset, high_watermark, last_stable_offset, log);
    let start_times = time_lag(
        start_offset,
        high_watermark,
        last_stable_offset,
        log,
        now_ms,
    );
    let first_left = high_watermark
        .saturating_sub(broker_lag.max(0))
        .max(start_offset);
    let (left, _) = lag(first_left, high_watermark, last_stable_offset, log);
    let (hw_seconds, lso_seconds) =
        time_lag(first_left, high_watermark, last_stable_offset, log, now_ms);
    let lags = Lag {
        hw_lag: left.hw_lag.min(from_start.hw_lag),
        lso_lag: left.lso_lag.min(from_start.lso_lag),
        committed_beyond_lso: from_start.committed_beyond_lso,
    };
    (
        lags,
        (hw_seconds.or(start_times.0), lso_seconds.or(start_times.1)),
    )
}

/// Age of the record at the LSO while HW > LSO; 0 when they are equal.
pub fn withheld_age(
    high_watermark: i64,
    last_stable_offset: i64,
    log: Option<&PartitionLog>,
    now_ms: i64,
) -> Option<f64> {
    first_record_age(log, last_stable_offset, high_watermark, false, now_ms).map(TimeLag::seconds)
}

/// Turns a raw sample into metric values, advancing the stuck clock.
///
/// `now` is the time the sample was taken. Only partitions whose topic passed the filter
/// appear in the raw sample, and group offsets on other topics are dropped here (those
/// on topics the exporter expected and did not see are in [`RawSample::unseen_topics`]).
pub fn derive(
    raw: RawSample,
    clock: &mut StuckClock,
    now: Instant,
    wall: SystemTime,
    hanging_margin: Duration,
) -> Derived {
    let mut anomalies = Vec::new();
    let now_ms = wall
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let max_timeout_ms = raw
        .transaction_max_timeout_ms
        .unwrap_or(crate::kafka::DEFAULT_MAX_TIMEOUT_MS);
    let margin_ms = i64::try_from(hanging_margin.as_millis()).unwrap_or(i64::MAX);
    let mut raw = raw;
    // Sorted by topic and partition, as a cycle samples them: the rates, the pinned
    // partitions of the render and `/` look partitions up by that order.
    if !raw
        .partitions
        .is_sorted_by(|a, b| (&a.topic, a.partition) <= (&b.topic, b.partition))
    {
        raw.partitions
            .sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    }
    // What was read of each partition's log, by the partition's index.
    let logs: Vec<Option<PartitionLog>> = raw.partitions.iter_mut().map(|p| p.log.take()).collect();
    let partitions: Vec<PartitionState> = raw
        .partitions
        .into_iter()
        .zip(&logs)
        .map(|(p, log)| {
            // The broker's LogAppendTime of the record at `offset`, when it was read.
            let append_time_at = |offset: i64| {
                log.as_ref()
                    .and_then(|l| l.extent_at(offset))
                    .and_then(|e| e.append_time_at(offset))
            };
            let transactions: Option<Vec<OpenTransaction>> =
                p.open_transactions.as_ref().map(|open| {
                    let watched = clock.watch(&p.topic, p.partition, open, now);
                    open.iter()
                        .zip(watched)
                        .map(|(t, seen)| {
                            let witness = Witness {
                                append_time_ms: append_time_at(t.start_offset),
                                create_time_ms: log
                                    .as_ref()
                                    .and_then(|l| l.extent_at(t.start_offset))
                                    .and_then(|e| e.create_time_at(t.start_offset)),
                                watched_for: seen.watched_for,
                                opened_unseen: seen.opened_unseen,
                            };
                            OpenTransaction::derive(t, now_ms, max_timeout_ms, margin_ms, witness)
                        })
                        .collect()
                });
            let mut withheld_age_seconds = None;
            let visibility = match (p.high_watermark, p.last_stable_offset) {
                (Some(hw), Some(lso)) => {
                    let (gap, anomaly) = hw_minus_lso(hw, lso);
                    anomalies.extend(anomaly);
                    withheld_age_seconds = withheld_age(hw, lso, log.as_ref(), now_ms);
                    // How long the LSO can have stood at most, by a broker's clock: the
                    // coordinator's age of the transaction the LSO stands at, or else
                    // the LogAppendTime of the record at the LSO (it cannot have arrived
                    // there before that was written). The producer's clock (CreateTime,
                    // event time for some) only where the transaction's own age was read
                    // from it: one no coordinator knows, open before the exporter looked.
                    let coordinator_age = transactions.iter().flatten().find_map(|t| {
                        (t.start_offset == lso
                            && t.state.as_deref() == Some("Ongoing")
                            && t.age_clock == Some(AgeClock::Coordinator))
                        .then_some(t.age_seconds)
                        .flatten()
                    });
                    let appended_age = append_time_at(lso)
                        .filter(|_| gap > 0)
                        .map(|at| age_seconds(now_ms, at));
                    let written_age = transactions.iter().flatten().find_map(|t| {
                        (t.start_offset == lso
                            && matches!(
                                t.age_clock,
                                Some(AgeClock::CreateTime | AgeClock::LastTimestamp)
                            ))
                        .then_some(t.age_seconds)
                        .flatten()
                    });
                    let open_for = coordinator_age
                        .or(appended_age)
                        .or(written_age)
                        .map(Duration::from_secs_f64);
                    let stuck = clock.observe(&p.topic, p.partition, hw, lso, now, open_for);
                    Some(Visibility {
                        hw_minus_lso: gap,
                        lso_stuck_seconds: stuck.as_secs_f64(),
                        pinned: gap > 0 && clock.pinned(&p.topic, p.partition),
                    })
                }
                _ => None,
            };
            PartitionState {
                topic: p.topic,
                partition: p.partition,
                log_start_offset: p.log_start_offset,
                high_watermark: p.high_watermark,
                last_stable_offset: p.last_stable_offset,
                visibility,
                withheld_age_seconds,
                transactions,
                replication: p.replication,
            }
        })
        .collect();

    if raw.reached {
        let present: HashSet<(&str, i32)> = partitions
            .iter()
            .map(|p| (&*p.topic, p.partition))
            .collect();
        // A topic missing from this cycle and not known to be gone (refused, or not
        // confirmed either way: a metadata race) keeps its clocks; a deleted one does not.
        let hidden = hidden_topics(&raw.unseen_topics);
        clock.retain(|topic, partition| {
            present.contains(&(&**topic, partition)) || hidden.contains(&**topic)
        });
    }

    let index: HashMap<(&str, i32), (&PartitionState, Option<&PartitionLog>)> = partitions
        .iter()
        .zip(&logs)
        .map(|(p, log)| ((&*p.topic, p.partition), (p, log.as_ref())))
        .collect();
    let groups = raw
        .groups
        .into_iter()
        .map(|g| {
            let broker_lags: HashMap<(&str, i32), i64> = g
                .broker_lags
                .iter()
                .map(|l| ((l.topic.as_str(), l.partition), l.lag))
                .collect();
            let owners = owners(g.detail.as_ref());
            let offsets = g.committed.map(|committed| {
                let mut offsets: Vec<GroupPartitionState> = Vec::with_capacity(committed.len());
                offsets.extend(committed.into_iter().filter_map(|c| {
                    let &(partition, log) = index.get(&(&*c.topic, c.partition))?;
                    let mut state = GroupPartitionState {
                        topic: partition.topic.clone(),
                        partition: c.partition,
                        committed_offset: c.offset,
                        lag: None,
                        hw_time_lag: None,
                        lso_time_lag: None,
                        commit_stall_seconds: None,
                        retention_margin: None,
                        retention_margin_seconds: None,
                        lost_records: None,
                        owner: owners.of(&c.topic, c.partition),
                        abandoned: false,
                    };
                    if let (Some(hw), Some(lso)) =
                        (partition.high_watermark, partition.last_stable_offset)
                    {
                        let (lag, anomaly) = lag(c.offset, hw, lso, log);
                        anomalies.extend(anomaly);
                        state.lag = Some(lag);
                        (state.hw_time_lag, state.lso_time_lag) =
                            time_lag(c.offset, hw, lso, log, now_ms);
                        // A share group's start offset (its `committed`) stands
                        // below records it acknowledged: where the broker reports
                        // its own lag, the lags are derived from that.
                        let broker_lag = broker_lags.get(&(&*c.topic, c.partition));
                        if let Some(&broker_lag) = broker_lag.filter(|_| g.group_type == "share") {
                            let (lag, times) =
                                share_lag_from_broker(c.offset, broker_lag, hw, lso, log, now_ms);
                            state.lag = Some(lag);
                            (state.hw_time_lag, state.lso_time_lag) = times;
                        }
                    }
                    Some(state)
                }));
                offsets.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
                // One series per partition, whatever a broker answered twice.
                offsets.dedup_by(|a, b| a.topic == b.topic && a.partition == b.partition);
                // Kept for a whole cycle, beside the next one's while that is derived: no
                // room for more than it holds.
                offsets.shrink_to_fit();
                offsets
            });
            GroupState {
                coordinator: g.coordinator,
                name: g.name,
                group_type: g.group_type,
                protocol: g.protocol,
                state: g.state,
                members: g.members,
                isolation: g.isolation,
                // Only the partitions sampled: the topic filter applies to them too.
                broker_lags: g
                    .broker_lags
                    .into_iter()
                    .filter(|l| index.contains_key(&(l.topic.as_str(), l.partition)))
                    .collect(),
                offsets,
                granularity: Default::default(),
                status: None,
                detail: g.detail,
                rebalance: None,
                rates: Vec::new(),
                ruler: Default::default(),
            }
        })
        .collect();

    Derived {
        partitions,
        groups,
        group_listing: raw.group_listing,
        brokers: raw.brokers,
        anomalies,
        failures: raw.failures.into_iter().collect(),
        retention_ms: raw.retention_ms,
        eos_cost: raw.eos_cost,
        clock_skew: raw.clock_skew,
        unseen_topics: raw.unseen_topics,
    }
}

/// The topics missing from a cycle whose partitions' state stays
/// ([`UnseenTopic::keeps_state`]).
pub(crate) fn hidden_topics(unseen: &[UnseenTopic]) -> HashSet<&str> {
    unseen
        .iter()
        .filter(|u| u.keeps_state())
        .map(|u| &*u.topic)
        .collect()
}

/// A partition a member names, with the first member that names it and how many do.
type Named<'a> = ((&'a str, i32), (usize, usize));

/// Who owns which partition of a group, from its description.
struct Owners<'a> {
    /// Every partition a member names, sorted by topic and partition (a group's few partitions: cheaper than a map to build and
    /// to search, in every cycle for every group).
    by_partition: Vec<Named<'a>>,
    /// Every member's assignment could be read: a partition none of them names has no
    /// owner.
    complete: bool,
    /// The partitions the members' target assignments name (KIP-848, streams), sorted.
    targeted: Vec<(&'a str, i32)>,
}

impl Owners<'_> {
    fn of(&self, topic: &str, partition: i32) -> Owner {
        let found = self
            .by_partition
            .binary_search_by(|(key, _)| (key.0, key.1).cmp(&(topic, partition)));
        match found.map(|i| self.by_partition[i].1) {
            Ok((member, 1)) => Owner::Member(member),
            Ok((_, members)) => Owner::Shared(members),
            Err(_) if !self.complete => Owner::Unknown,
            Err(_) if self.targeted.binary_search(&(topic, partition)).is_ok() => Owner::Assigning,
            Err(_) => Owner::Nobody,
        }
    }
}

fn owners(detail: Option<&crate::kafka::GroupDetail>) -> Owners<'_> {
    let Some(detail) = detail else {
        return Owners {
            by_partition: Vec::new(),
            complete: false,
            targeted: Vec::new(),
        };
    };
    let mut named: Vec<((&str, i32), usize)> = Vec::new();
    let mut complete = true;
    let mut targeted: Vec<(&str, i32)> = Vec::new();
    for (index, member) in detail.members.iter().enumerate() {
        for (topic, partitions) in member.target.iter().flatten() {
            targeted.extend(partitions.iter().map(|&p| (topic.as_str(), p)));
        }
        match &member.assigned {
            Some(topics) => {
                for (topic, partitions) in topics {
                    named.extend(partitions.iter().map(|&p| ((topic.as_str(), p), index)));
                }
            }
            None => complete = false,
        }
    }
    // Stable: the first member that names a partition comes first.
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let mut by_partition: Vec<Named> = Vec::with_capacity(named.len());
    for (key, index) in named {
        match by_partition.last_mut() {
            Some((last, (_, members))) if *last == key => *members += 1,
            _ => by_partition.push((key, (index, 1))),
        }
    }
    targeted.sort_unstable();
    Owners {
        by_partition,
        complete,
        targeted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::{GroupDetail, RawMember};

    fn member(id: &str, assigned: Option<&[(&str, &[i32])]>) -> RawMember {
        RawMember {
            member_id: id.into(),
            assigned: assigned.map(|a| {
                a.iter()
                    .map(|(t, ps)| (t.to_string(), ps.to_vec()))
                    .collect()
            }),
            ..RawMember::default()
        }
    }

    /// One member per partition (consumer, classic, streams groups): that member; several
    /// (a share group's partitions): shared, with how many; none of members whose
    /// assignments are all known: nobody; an assignment not known: unknown.
    #[test]
    fn who_owns_a_partition() {
        let detail = GroupDetail {
            epoch: None,
            assignment_epoch: None,
            members: vec![
                member("a", Some(&[("orders", &[0, 1])])),
                member("b", Some(&[("orders", &[1, 2])])),
                member("c", Some(&[("orders", &[1])])),
            ],
        };
        let known = owners(Some(&detail));
        assert_eq!(known.of("orders", 0), Owner::Member(0));
        assert_eq!(known.of("orders", 1), Owner::Shared(3));
        assert_eq!(known.of("orders", 2), Owner::Member(1));
        assert_eq!(known.of("orders", 3), Owner::Nobody);
        let unknown = GroupDetail {
            members: vec![member("a", Some(&[("orders", &[0])])), member("b", None)],
            ..detail
        };
        assert_eq!(owners(Some(&unknown)).of("orders", 3), Owner::Unknown);
        assert_eq!(owners(None).of("orders", 0), Owner::Unknown);
    }

    /// KIP-848: a partition a member's target gives it and no member's assignment names
    /// is on its way to that member, not owned by nobody.
    #[test]
    fn a_partition_in_a_target_and_no_assignment_is_assigning() {
        let mut moving = member("a", Some(&[("orders", &[0])]));
        moving.target = Some(vec![("orders".into(), vec![0])]);
        let mut waiting = member("b", Some(&[]));
        waiting.target = Some(vec![("orders".into(), vec![1])]);
        let detail = GroupDetail {
            epoch: Some(3),
            assignment_epoch: Some(3),
            members: vec![moving, waiting],
        };
        let known = owners(Some(&detail));
        assert_eq!(known.of("orders", 0), Owner::Member(0));
        assert_eq!(known.of("orders", 1), Owner::Assigning);
        assert_eq!(known.of("orders", 2), Owner::Nobody);
    }
}
