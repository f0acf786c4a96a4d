//! What the exporter learns from reading a partition's log: record-batch headers parsed
//! from Fetch answers, and [`LogExtent`], a summary of a range of the log that answers
//! "how many records would a consumer at offset X still receive below bound B, and when
//! was the first of them written". Pure code, no I/O.
//!
//! Only batch headers are read (61 bytes each, plus the key of a control record): no
//! record is decompressed. A consumer never receives control records (commit and abort
//! markers), and a read_committed consumer never receives records of aborted
//! transactions; both take offsets, which is why `HW - committed` overstates lag on
//! transactional topics.

use std::collections::HashMap;

/// Size of a v2 record-batch header, up to and including the record count.
const HEADER: usize = 61;

/// Control record type of an abort marker (the key's second int16).
const ABORT: i16 = 0;
/// Control record type of a commit marker.
const COMMIT: i16 = 1;

/// A transaction marker, from the key of a control batch's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    Commit,
    Abort,
    /// A control record of another type (none are written to user topics today).
    Other,
}

/// One record batch as its header describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub record_count: i32,
    /// Timestamp of the batch's first record (CreateTime topics).
    pub first_timestamp: i64,
    /// Largest timestamp in the batch; with LogAppendTime, every record's timestamp.
    pub max_timestamp: i64,
    pub log_append_time: bool,
    pub transactional: bool,
    /// `Some` for a control batch (commit/abort marker).
    pub control: Option<Marker>,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// Parses the record batches of one partition of a Fetch answer. A batch cut short at
/// the end (the broker fills the byte budget and may cut the last batch) is kept when its
/// header is complete, since only the header is needed; a control batch also needs the
/// key of its record. Errors on anything that is not a v2 record batch.
pub fn parse_batches(mut bytes: &[u8]) -> Result<Vec<Batch>, String> {
    let mut batches = Vec::new();
    while bytes.len() >= HEADER {
        let i64_at = |at: usize| i64::from_be_bytes(bytes[at..at + 8].try_into().unwrap());
        let i32_at = |at: usize| i32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
        let base_offset = i64_at(0);
        let length = i32_at(8);
        let magic = bytes[16] as i8;
        if magic != 2 {
            return Err(format!(
                "record batch at offset {base_offset} has message format v{magic} (only v2 is read)"
            ));
        }
        // The length counts from the partition leader epoch on (byte 12).
        if length < (HEADER - 12) as i32 {
            return Err(format!(
                "record batch at offset {base_offset} has a length of {length} bytes"
            ));
        }
        let end = 12usize.saturating_add(length as usize);
        let attributes = i16::from_be_bytes([bytes[21], bytes[22]]);
        let last_offset_delta = i32_at(23);
        let record_count = i32_at(57);
        if last_offset_delta < 0 || record_count < 0 {
            return Err(format!(
                "record batch at offset {base_offset} has a negative offset delta or record count"
            ));
        }
        // Offsets run from 0 to i64::MAX - 1; the extent adds 1 to the last one.
        let last_offset = base_offset
            .checked_add(i64::from(last_offset_delta))
            .filter(|last| base_offset >= 0 && *last < i64::MAX)
            .ok_or_else(|| {
                format!(
                    "record batch at offset {base_offset} with last offset delta \
                     {last_offset_delta} is outside the log"
                )
            })?;
        let control = if attributes & (1 << 5) != 0 {
            if attributes & 0x7 != 0 {
                return Err(format!(
                    "control batch at offset {base_offset} is compressed"
                ));
            }
            let body = &bytes[HEADER..bytes.len().min(end)];
            match control_type(body) {
                Some(kind) => Some(match kind {
                    ABORT => Marker::Abort,
                    COMMIT => Marker::Commit,
                    _ => Marker::Other,
                }),
                // Its record is cut off: stop here, the next read starts at this batch.
                None if bytes.len() < end => break,
                None => {
                    return Err(format!(
                        "control batch at offset {base_offset} has no readable key"
                    ))
                }
            }
        } else {
            None
        };
        batches.push(Batch {
            base_offset,
            last_offset,
            record_count,
            first_timestamp: i64_at(27),
            max_timestamp: i64_at(35),
            log_append_time: attributes & (1 << 3) != 0,
            transactional: attributes & (1 << 4) != 0,
            control,
            producer_id: i64_at(43),
            producer_epoch: i16::from_be_bytes([bytes[51], bytes[52]]),
        });
        if bytes.len() <= end {
            break;
        }
        bytes = &bytes[end..];
    }
    Ok(batches)
}

/// The type of the first control record in `records` (the bytes after a batch header):
/// length, attributes, timestamp delta, offset delta, key length, then the key
/// (version: int16, type: int16).
fn control_type(mut records: &[u8]) -> Option<i16> {
    let _length = varint(&mut records)?;
    records = records.get(1..)?; // attributes
    let _timestamp_delta = varint(&mut records)?;
    let _offset_delta = varint(&mut records)?;
    let key_length = varint(&mut records)?;
    if key_length < 4 {
        return None;
    }
    let key = records.get(..4)?;
    Some(i16::from_be_bytes([key[2], key[3]]))
}

/// A zig-zag varint (Kafka's varint and varlong), at most 10 bytes.
fn varint(bytes: &mut &[u8]) -> Option<i64> {
    let mut value: u64 = 0;
    for i in 0..10 {
        let byte = *bytes.get(i)?;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *bytes = &bytes[i + 1..];
            return Some((value >> 1) as i64 ^ -((value & 1) as i64));
        }
    }
    None
}

/// What became of a batch's records, as far as this extent knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Plain records, or a transaction's records that were committed.
    Delivered,
    /// Records of an aborted transaction: delivered to read_uncommitted consumers only.
    Aborted,
    /// A transaction not decided within this extent (open, or its marker lies beyond).
    Undecided,
    /// Commit/abort marker: delivered to nobody.
    Control,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    base_offset: i64,
    last_offset: i64,
    record_count: i32,
    first_timestamp: i64,
    max_timestamp: i64,
    log_append_time: bool,
    fate: Fate,
}

impl Entry {
    /// Records of this batch at or after `from` and before `bound`, and whether that
    /// count is exact (a batch with holes left by compaction is counted as if full).
    fn records_in(&self, from: i64, bound: i64) -> (i64, bool) {
        let lo = from.max(self.base_offset);
        let hi = bound.min(self.last_offset + 1);
        if lo >= hi {
            return (0, true);
        }
        let span = self.last_offset - self.base_offset + 1;
        if i64::from(self.record_count) == span {
            (hi - lo, true)
        } else {
            ((hi - lo).min(i64::from(self.record_count)), false)
        }
    }

    /// The write time of the first record at or after `from` in this batch. Within a
    /// batch (CreateTime) it is interpolated between the batch's first and largest
    /// timestamps: exact at the batch's start, off by at most the batch's time span
    /// (the producer's linger) inside it.
    fn timestamp_at(&self, from: i64) -> i64 {
        if self.log_append_time {
            return self.max_timestamp;
        }
        if from <= self.base_offset || self.last_offset == self.base_offset {
            return self.first_timestamp;
        }
        // In i128: the timestamps are the producer's, any two i64 values.
        let first = i128::from(self.first_timestamp);
        let span = (i128::from(self.max_timestamp) - first).max(0);
        let position = i128::from(from.min(self.last_offset) - self.base_offset);
        let width = i128::from(self.last_offset - self.base_offset);
        // Between the first and the largest timestamp, so within i64.
        (first + span * position / width) as i64
    }
}

/// The answer to "when was the first record a consumer would receive written".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstRecord {
    /// Written at this time (ms since the epoch).
    At(i64),
    /// There is none before the bound: nothing left to receive.
    None,
    /// The extent does not reach far enough to say.
    Unknown,
}

/// A contiguous range `[from, to)` of one partition's log as read: every batch in it,
/// with what became of its records. Built from Fetch answers in offset order; extended
/// as the log grows; transactions are decided by the markers read after them, or by the
/// aborted-transaction list a read_committed Fetch returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogExtent {
    from: i64,
    to: i64,
    entries: Vec<Entry>,
    /// Producer id -> indices of its undecided batches, awaiting the marker.
    open: HashMap<i64, Vec<usize>>,
}

impl LogExtent {
    /// An empty extent starting at `from`.
    pub fn new(from: i64) -> LogExtent {
        LogExtent {
            from,
            to: from,
            entries: Vec::new(),
            open: HashMap::new(),
        }
    }

    /// First offset covered.
    pub fn from(&self) -> i64 {
        self.from
    }

    /// End of what was read (exclusive).
    pub fn to(&self) -> i64 {
        self.to
    }

    #[cfg(test)]
    pub fn batches(&self) -> usize {
        self.entries.len()
    }

    /// Adds the batches of one Fetch answer that starts at [`LogExtent::to`].
    ///
    /// `end` is how far the answer is known to be complete: the next offset after the
    /// last batch, or the bound the broker read to (its HW or LSO) when the answer ends
    /// there. `read_committed` carries the answer's aborted transactions (producer id,
    /// first offset) and the LSO it was read under: below it, every transaction is
    /// decided, and a transactional batch not listed as aborted was committed.
    pub fn append(
        &mut self,
        batches: &[Batch],
        end: i64,
        read_committed: Option<(&[(i64, i64)], i64)>,
    ) {
        let mut aborted_list: Vec<(i64, i64)> = read_committed
            .map(|(list, _)| list.to_vec())
            .unwrap_or_default();
        aborted_list.sort_by_key(|&(_, first_offset)| first_offset);
        let mut aborted_list = aborted_list.into_iter().peekable();
        // As Kafka's consumer does: a producer is aborting from the first offset its
        // aborted transaction lists until its abort marker.
        let mut aborting: std::collections::HashSet<i64> = Default::default();
        for batch in batches {
            if batch.last_offset < self.to {
                continue; // already read (a Fetch returns the whole batch holding its offset)
            }
            while let Some((producer_id, _)) =
                aborted_list.next_if(|&(_, first)| first <= batch.last_offset)
            {
                aborting.insert(producer_id);
            }
            let fate = match batch.control {
                Some(marker) => {
                    let decided = match marker {
                        Marker::Commit => Some(Fate::Delivered),
                        Marker::Abort => Some(Fate::Aborted),
                        Marker::Other => None,
                    };
                    if let Some(fate) = decided {
                        for index in self.open.remove(&batch.producer_id).unwrap_or_default() {
                            self.entries[index].fate = fate;
                        }
                        if marker == Marker::Abort {
                            aborting.remove(&batch.producer_id);
                        }
                    }
                    Fate::Control
                }
                None if !batch.transactional => Fate::Delivered,
                None if aborting.contains(&batch.producer_id) => Fate::Aborted,
                None => match read_committed {
                    Some((_, lso)) if batch.last_offset < lso => Fate::Delivered,
                    _ => Fate::Undecided,
                },
            };
            if fate == Fate::Undecided {
                self.open
                    .entry(batch.producer_id)
                    .or_default()
                    .push(self.entries.len());
            }
            self.entries.push(Entry {
                base_offset: batch.base_offset,
                last_offset: batch.last_offset,
                record_count: batch.record_count,
                first_timestamp: batch.first_timestamp,
                max_timestamp: batch.max_timestamp,
                log_append_time: batch.log_append_time,
                fate,
            });
            self.to = self.to.max(batch.last_offset + 1);
        }
        self.to = self.to.max(end);
    }

    /// Forgets the batches that end before `offset` (no consumer of interest is there
    /// any more); the extent then starts at the first batch kept.
    pub fn trim_before(&mut self, offset: i64) {
        let keep_from = self.entries.partition_point(|e| e.last_offset < offset);
        if keep_from == 0 {
            return;
        }
        self.entries.drain(..keep_from);
        self.from = self.from.max(offset.min(self.to));
        if let Some(first) = self.entries.first() {
            self.from = self.from.min(first.base_offset);
        }
        for indices in self.open.values_mut() {
            indices.retain(|&i| i >= keep_from);
            for i in indices.iter_mut() {
                *i -= keep_from;
            }
        }
        self.open.retain(|_, indices| !indices.is_empty());
    }

    /// Records a consumer at `from` would receive below `bound`: a read_uncommitted one
    /// (`committed_only` false) every record but markers, a read_committed one also
    /// not those of aborted transactions. Offsets outside the extent count as records
    /// (an upper bound); the flag says whether the count is exact.
    pub fn receivable(&self, from: i64, bound: i64, committed_only: bool) -> (i64, bool) {
        if from >= bound {
            return (0, true);
        }
        let mut count = 0;
        let mut exact = true;
        let lo = from.max(self.from);
        let hi = bound.min(self.to);
        // Offsets come from the broker: saturating, so that absurd ones (a committed
        // offset of i64::MIN) give a huge count rather than an overflow.
        if from < self.from {
            count = self.from.min(bound).saturating_sub(from);
            exact = false;
        }
        if bound > self.to {
            count = bound
                .saturating_sub(self.to.max(from))
                .saturating_add(count);
            exact = false;
        }
        if lo < hi {
            let start = self.entries.partition_point(|e| e.last_offset < lo);
            for entry in self.entries[start..]
                .iter()
                .take_while(|e| e.base_offset < hi)
            {
                let counted = match entry.fate {
                    Fate::Control => false,
                    Fate::Aborted => !committed_only,
                    Fate::Delivered => true,
                    Fate::Undecided => {
                        // Below the LSO every transaction is decided; one this extent
                        // could not decide is counted, and the count is not exact.
                        exact &= !committed_only;
                        true
                    }
                };
                if counted {
                    let (n, n_exact) = entry.records_in(lo, hi);
                    count = count.saturating_add(n);
                    exact &= n_exact;
                }
            }
        }
        (count, exact)
    }

    /// When the broker appended the record at `offset` (LogAppendTime), by the broker's
    /// clock; `None` when this extent does not hold it or its batch carries the
    /// producer's CreateTime, which may be event time hours old (Streams, Connect, Flink).
    pub fn append_time_at(&self, offset: i64) -> Option<i64> {
        let at = self.entries.partition_point(|e| e.last_offset < offset);
        self.entries
            .get(at)
            .filter(|e| e.base_offset <= offset && e.log_append_time)
            .map(|e| e.max_timestamp)
    }

    /// The producer's timestamp (CreateTime) of the first record of the batch that starts
    /// at `offset`: at a transaction's start offset, its first write to the partition, by
    /// the producer's clock. `None` when this extent holds no batch starting there, when
    /// the batch carries LogAppendTime ([`LogExtent::append_time_at`]), or when it has no
    /// timestamp (-1).
    pub fn create_time_at(&self, offset: i64) -> Option<i64> {
        let at = self.entries.partition_point(|e| e.last_offset < offset);
        self.entries
            .get(at)
            .filter(|e| e.base_offset == offset && !e.log_append_time && e.first_timestamp > 0)
            .map(|e| e.first_timestamp)
    }

    /// When the first record a consumer at `from` would receive below `bound` was
    /// written (see [`LogExtent::receivable`] for `committed_only`).
    pub fn first_receivable(&self, from: i64, bound: i64, committed_only: bool) -> FirstRecord {
        if from >= bound {
            return FirstRecord::None;
        }
        if from < self.from {
            return FirstRecord::Unknown;
        }
        let start = self.entries.partition_point(|e| e.last_offset < from);
        for entry in self.entries[start..]
            .iter()
            .take_while(|e| e.base_offset < bound)
        {
            match entry.fate {
                Fate::Control => continue,
                Fate::Aborted if committed_only => continue,
                Fate::Undecided if committed_only => return FirstRecord::Unknown,
                _ => return FirstRecord::At(entry.timestamp_at(from)),
            }
        }
        if self.to >= bound {
            FirstRecord::None
        } else {
            FirstRecord::Unknown
        }
    }
}

/// The cost of exactly-once in what the exporter read of a log: commit and abort markers,
/// records of aborted transactions, and the offsets read (markers / scanned offsets is the
/// control records' share). Totals over the life of the process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EosCost {
    pub commit_markers: u64,
    pub abort_markers: u64,
    /// Records of transactions whose abort marker was counted.
    pub aborted_records: u64,
    /// Offsets whose batch headers were read: the denominator.
    pub scanned_offsets: u64,
}

impl std::ops::AddAssign for EosCost {
    fn add_assign(&mut self, other: EosCost) {
        self.commit_markers = self.commit_markers.saturating_add(other.commit_markers);
        self.abort_markers = self.abort_markers.saturating_add(other.abort_markers);
        self.aborted_records = self.aborted_records.saturating_add(other.aborted_records);
        self.scanned_offsets = self.scanned_offsets.saturating_add(other.scanned_offsets);
    }
}

/// Record batches of one transaction in a partition, at most this many apart: beyond,
/// the last span grows to cover the next batch (its records stay exact in total, their
/// offsets within the span are then a bound).
const MAX_SPANS: usize = 64;

/// A run of one transaction's records in a partition: its first and last offset and how
/// many records lie there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub base_offset: i64,
    pub last_offset: i64,
    pub records: i64,
}

impl Span {
    /// Records of the span in `[from, to)`, and whether that count is exact (a span whose
    /// offsets are not all its records counts as if its records came first: an upper
    /// bound).
    pub fn records_in(&self, from: i64, to: i64) -> (i64, bool) {
        let lo = from.max(self.base_offset);
        let hi = to.min(self.last_offset.saturating_add(1));
        if lo >= hi {
            return (0, true);
        }
        let width = self.last_offset - self.base_offset + 1;
        if self.records == width {
            (hi - lo, true)
        } else {
            (
                (hi - lo).min(self.records),
                lo == self.base_offset && hi > self.last_offset,
            )
        }
    }
}

/// A transaction whose abort marker the exporter read in a partition's log, with where
/// its records lie: what a read_uncommitted consumer that passed them delivered although
/// they were never committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbortedTransaction {
    pub producer_id: i64,
    /// The epoch its records were written with (under transactions version 2 the marker
    /// carries the next one).
    pub producer_epoch: i16,
    /// Its record batches in this partition, in offset order.
    pub spans: Vec<Span>,
    /// Offset of the abort marker.
    pub marker_offset: i64,
    /// The marker batch's timestamp (ms since the epoch): when the broker wrote it.
    pub aborted_at_ms: i64,
    /// Every batch of the transaction was read: the exporter counted this partition
    /// without a gap from before the transaction's first record (see [`CostTally`]).
    pub exact: bool,
    /// The offset of the producer's last marker the exporter counted before this
    /// transaction's first batch: an earlier transaction of the producer ended there, so
    /// this one began after it.
    pub after_marker: Option<i64>,
}

impl AbortedTransaction {
    /// Offset of its first record read.
    pub fn first_offset(&self) -> i64 {
        self.spans
            .first()
            .map_or(self.marker_offset, |s| s.base_offset)
    }

    /// Offset of its last record.
    pub fn last_offset(&self) -> i64 {
        self.spans
            .last()
            .map_or(self.marker_offset, |s| s.last_offset)
    }

    /// Its records in this partition.
    pub fn records(&self) -> i64 {
        self.spans.iter().map(|s| s.records).sum()
    }

    /// Its records in `[from, to)`, and whether the count is exact.
    pub fn records_in(&self, from: i64, to: i64) -> (i64, bool) {
        let mut exact = self.exact;
        let mut count = 0i64;
        for span in &self.spans {
            let (n, n_exact) = span.records_in(from, to);
            count = count.saturating_add(n);
            exact &= n_exact;
        }
        (count, exact)
    }
}

/// A transaction counted but not decided yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Pending {
    producer_epoch: i16,
    spans: Vec<Span>,
}

impl Pending {
    fn records(&self) -> i64 {
        self.spans.iter().map(|s| s.records).sum()
    }

    fn add(&mut self, base_offset: i64, last_offset: i64, records: i64, epoch: i16) {
        self.producer_epoch = epoch;
        let full = self.spans.len() >= MAX_SPANS;
        match self.spans.last_mut() {
            // Right after the last one (no other producer wrote in between), or no more
            // room: one span, exact in the first case.
            Some(last) if full || base_offset == last.last_offset.saturating_add(1) => {
                last.last_offset = last_offset;
                last.records = last.records.saturating_add(records);
            }
            _ => self.spans.push(Span {
                base_offset,
                last_offset,
                records,
            }),
        }
    }
}

/// How far one partition's log has been counted into [`EosCost`], so that each offset
/// counts once however often a window reads it again: a read that starts below the
/// counted end counts only what lies above it; one that starts above it (the window
/// started over past a gap) counts from its start, and the gap counts nowhere, not even
/// in the scanned offsets.
///
/// It also keeps, per producer, where the records of its undecided transaction lie, and
/// gives each transaction an abort marker ends ([`CostTally::take_aborted`]). Such a
/// transaction is **exact** when every batch of it was read: counting (re)started at or
/// below the LSO sampled then, where no transaction open then can have begun earlier, and
/// its marker lies past the HW sampled then (it was open then, or began later). Any other
/// may have records before the counting started, which nothing read (where it began, as
/// DescribeProducers said while it was open, bounds them: [`crate::derive::isolation`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CostTally {
    /// End (exclusive) of what was counted; `None` before the first read.
    counted_to: Option<i64>,
    /// Transactions counted but not decided yet, by producer id: an abort marker counts
    /// their records as aborted, a commit marker forgets them.
    undecided: HashMap<i64, Pending>,
    /// The HW sampled when counting last (re)started, and whether it started at or
    /// below the LSO sampled then.
    started: Option<(i64, bool)>,
    /// Transactions an abort marker ended since the last [`CostTally::take_aborted`].
    aborted: Vec<AbortedTransaction>,
    /// Per producer, the offset of its last commit or abort marker counted.
    last_marker: HashMap<i64, i64>,
}

/// A partition's LSO and HW as the cycle that reads its log sampled them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sampled {
    pub last_stable_offset: Option<i64>,
    pub high_watermark: Option<i64>,
}

impl CostTally {
    /// End (exclusive) of what was counted.
    pub fn counted_to(&self) -> Option<i64> {
        self.counted_to
    }

    /// The transactions abort markers ended since the last call, in marker order.
    pub fn take_aborted(&mut self) -> Vec<AbortedTransaction> {
        std::mem::take(&mut self.aborted)
    }

    /// Counts one read of the log that started at `read_from` and is complete up to
    /// `end` (as for [`LogExtent::append`]), and returns what it added. `sampled` is the
    /// partition's bounds in the cycle of the read.
    pub fn count(
        &mut self,
        batches: &[Batch],
        read_from: i64,
        end: i64,
        sampled: Sampled,
    ) -> EosCost {
        let start = match self.counted_to {
            Some(counted) if read_from <= counted => counted,
            _ => {
                // First read, or past a gap: a marker after the gap may decide a
                // transaction other than the one counted before it.
                self.undecided.clear();
                self.last_marker.clear();
                let hw = sampled.high_watermark.unwrap_or(i64::MAX);
                let below_lso = sampled
                    .last_stable_offset
                    .is_some_and(|lso| read_from <= lso);
                self.started = Some((hw, below_lso));
                read_from
            }
        };
        let mut cost = EosCost::default();
        let mut at = start;
        for batch in batches {
            if batch.last_offset < at {
                continue;
            }
            let lo = batch.base_offset.max(at);
            match batch.control {
                Some(Marker::Commit) => {
                    cost.commit_markers += 1;
                    self.undecided.remove(&batch.producer_id);
                    self.last_marker
                        .insert(batch.producer_id, batch.base_offset);
                }
                Some(Marker::Abort) => {
                    cost.abort_markers += 1;
                    let after_marker = self
                        .last_marker
                        .insert(batch.producer_id, batch.base_offset);
                    if let Some(pending) = self.undecided.remove(&batch.producer_id) {
                        let records = pending.records();
                        cost.aborted_records = cost.aborted_records.saturating_add(records as u64);
                        // Open when counting (re)started (its marker past the HW sampled
                        // then), which started at or below the LSO sampled then: it began
                        // there or later, and every batch of it was counted.
                        let exact = self
                            .started
                            .is_some_and(|(hw, below_lso)| below_lso && batch.base_offset >= hw);
                        self.aborted.push(AbortedTransaction {
                            producer_id: batch.producer_id,
                            producer_epoch: pending.producer_epoch,
                            spans: pending.spans,
                            marker_offset: batch.base_offset,
                            aborted_at_ms: batch.max_timestamp,
                            exact,
                            after_marker,
                        });
                    }
                }
                Some(Marker::Other) => {}
                None if batch.transactional => {
                    let span = batch.last_offset + 1 - lo;
                    let records = span.min(i64::from(batch.record_count));
                    self.undecided.entry(batch.producer_id).or_default().add(
                        lo,
                        batch.last_offset,
                        records,
                        batch.producer_epoch,
                    );
                }
                None => {}
            }
            at = batch.last_offset + 1;
        }
        // Bounded however rarely they are taken: the latest are kept.
        if self.aborted.len() > 4 * MAX_SPANS {
            let excess = self.aborted.len() - 4 * MAX_SPANS;
            self.aborted.drain(..excess);
        }
        let end = end.max(at).max(start);
        cost.scanned_offsets = end.saturating_sub(start) as u64;
        self.counted_to = Some(end);
        cost
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Encodes a v2 record batch as a broker stores it: the header, then `records` plain
    /// records, or one control record with `marker`'s key.
    pub(crate) fn encode_batch(batch: &Batch) -> Vec<u8> {
        fn zigzag(out: &mut Vec<u8>, v: i64) {
            let mut z = ((v << 1) ^ (v >> 63)) as u64;
            loop {
                let byte = (z & 0x7f) as u8;
                z >>= 7;
                if z == 0 {
                    out.push(byte);
                    break;
                }
                out.push(byte | 0x80);
            }
        }
        let mut records = Vec::new();
        for i in 0..batch.record_count {
            let mut record = vec![0u8]; // attributes
            zigzag(&mut record, 0); // timestamp delta
            zigzag(&mut record, i64::from(i)); // offset delta
            match batch.control {
                Some(marker) => {
                    let kind: i16 = match marker {
                        Marker::Abort => ABORT,
                        Marker::Commit => COMMIT,
                        Marker::Other => 5,
                    };
                    zigzag(&mut record, 4);
                    record.extend_from_slice(&0i16.to_be_bytes());
                    record.extend_from_slice(&kind.to_be_bytes());
                    zigzag(&mut record, 6);
                    record.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
                }
                None => {
                    zigzag(&mut record, -1); // no key
                    zigzag(&mut record, 3);
                    record.extend_from_slice(b"abc");
                }
            }
            zigzag(&mut record, 0); // no headers
            zigzag(&mut records, record.len() as i64);
            records.extend_from_slice(&record);
        }
        let mut attributes: i16 = 0;
        if batch.log_append_time {
            attributes |= 1 << 3;
        }
        if batch.transactional {
            attributes |= 1 << 4;
        }
        if batch.control.is_some() {
            attributes |= 1 << 5;
        }
        let mut out = Vec::new();
        out.extend_from_slice(&batch.base_offset.to_be_bytes());
        out.extend_from_slice(&((HEADER - 12 + records.len()) as i32).to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes()); // leader epoch
        out.push(2);
        out.extend_from_slice(&0u32.to_be_bytes()); // crc (not checked)
        out.extend_from_slice(&attributes.to_be_bytes());
        out.extend_from_slice(
            &(batch.last_offset.wrapping_sub(batch.base_offset) as i32).to_be_bytes(),
        );
        out.extend_from_slice(&batch.first_timestamp.to_be_bytes());
        out.extend_from_slice(&batch.max_timestamp.to_be_bytes());
        out.extend_from_slice(&batch.producer_id.to_be_bytes());
        out.extend_from_slice(&batch.producer_epoch.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&batch.record_count.to_be_bytes());
        out.extend_from_slice(&records);
        out
    }

    pub(crate) fn data(base: i64, count: i32, ts: i64) -> Batch {
        Batch {
            base_offset: base,
            last_offset: base + i64::from(count) - 1,
            record_count: count,
            first_timestamp: ts,
            max_timestamp: ts + i64::from(count - 1) * 10,
            log_append_time: false,
            transactional: false,
            control: None,
            producer_id: -1,
            producer_epoch: 0,
        }
    }

    pub(crate) fn txn(base: i64, count: i32, ts: i64, producer_id: i64) -> Batch {
        Batch {
            transactional: true,
            producer_id,
            ..data(base, count, ts)
        }
    }

    pub(crate) fn marker(offset: i64, producer_id: i64, marker: Marker) -> Batch {
        Batch {
            control: Some(marker),
            ..txn(offset, 1, 0, producer_id)
        }
    }

    fn encode_all(batches: &[Batch]) -> Vec<u8> {
        batches.iter().flat_map(encode_batch).collect()
    }

    #[test]
    fn parses_headers_markers_and_a_cut_last_batch() {
        let batches = vec![
            data(0, 3, 1_000),
            txn(3, 2, 2_000, 7),
            marker(5, 7, Marker::Commit),
            txn(6, 1, 3_000, 8),
            marker(7, 8, Marker::Abort),
        ];
        let bytes = encode_all(&batches);
        assert_eq!(parse_batches(&bytes).unwrap(), batches);
        // Cut inside the last data batch's records: its header is enough.
        let bytes = encode_all(&batches[..4]);
        assert_eq!(
            parse_batches(&bytes[..bytes.len() - 3]).unwrap(),
            batches[..4]
        );
        // Cut inside a header, or inside a marker's key: that batch is left out.
        let bytes = encode_all(&batches[..3]);
        let marker_at = bytes.len() - encode_batch(&batches[2]).len();
        assert_eq!(
            parse_batches(&bytes[..marker_at + 30]).unwrap(),
            batches[..2]
        );
        assert_eq!(
            parse_batches(&bytes[..marker_at + HEADER + 3]).unwrap(),
            batches[..2]
        );
        assert_eq!(parse_batches(&[]).unwrap(), vec![]);
    }

    #[test]
    fn rejects_what_is_not_a_v2_batch() {
        let mut bytes = encode_batch(&data(0, 1, 0));
        bytes[16] = 1;
        assert!(parse_batches(&bytes).unwrap_err().contains("format v1"));
        let mut bytes = encode_batch(&data(0, 1, 0));
        bytes[8..12].copy_from_slice(&3i32.to_be_bytes());
        assert!(parse_batches(&bytes).is_err());
        let mut bytes = encode_batch(&marker(0, 1, Marker::Commit));
        bytes[22] |= 1; // compressed control batch
        assert!(parse_batches(&bytes).is_err());
        // Garbage of every length never panics.
        let junk: Vec<u8> = (0..400u32).map(|i| (i * 31 % 251) as u8).collect();
        for len in 0..junk.len() {
            let _ = parse_batches(&junk[..len]);
        }
    }

    /// The exactly-once example: 10 records in one committed transaction, the
    /// marker at 10, HW 11.
    #[test]
    fn a_commit_marker_is_not_lag() {
        let mut log = LogExtent::new(0);
        log.append(
            &[txn(0, 10, 5_000, 1), marker(10, 1, Marker::Commit)],
            11,
            None,
        );
        assert_eq!(log.receivable(10, 11, false), (0, true));
        assert_eq!(log.receivable(10, 11, true), (0, true));
        assert_eq!(log.first_receivable(10, 11, true), FirstRecord::None);
        // Three data records behind: 3, not 4.
        assert_eq!(log.receivable(7, 11, false), (3, true));
        assert_eq!(log.receivable(7, 11, true), (3, true));
        assert_eq!(log.first_receivable(7, 11, false), FirstRecord::At(5_070));
    }

    /// SPEC §1's worked example, scaled: plain records to 880; T1 (producer 1) opens at
    /// 880; 4 plain; T2 (producer 2) writes 5 and commits (marker at 890); 9 plain.
    /// HW 900, LSO 880. A group at 880 would receive 19 records up to the HW (the marker
    /// is not one), none up to the LSO.
    #[test]
    fn worked_example_behind_an_open_transaction() {
        let batches = [
            data(870, 10, 100),
            txn(880, 1, 200, 1),
            data(881, 4, 300),
            txn(885, 5, 400, 2),
            marker(890, 2, Marker::Commit),
            data(891, 9, 500),
        ];
        let mut log = LogExtent::new(870);
        log.append(&batches, 900, None);
        assert_eq!(log.receivable(880, 900, false), (19, true));
        assert_eq!(log.receivable(880, 880, true), (0, true));
        assert_eq!(log.first_receivable(880, 900, false), FirstRecord::At(200));
        assert_eq!(log.first_receivable(880, 880, true), FirstRecord::None);
        assert_eq!(log.receivable(875, 880, true), (5, true));
        // T1 commits: its marker at 900, HW = LSO = 901; the backlog is 19 records.
        log.append(&[marker(900, 1, Marker::Commit)], 901, None);
        assert_eq!(log.receivable(880, 901, true), (19, true));
        assert_eq!(log.receivable(880, 901, false), (19, true));
    }

    #[test]
    fn aborted_records_are_lag_only_for_read_uncommitted() {
        // By markers (a read_uncommitted read), even when the marker comes in a later
        // read.
        let mut log = LogExtent::new(0);
        log.append(&[data(0, 2, 10), txn(2, 3, 20, 9)], 5, None);
        assert_eq!(log.receivable(0, 5, false), (5, true));
        log.append(&[marker(5, 9, Marker::Abort), data(6, 1, 30)], 7, None);
        assert_eq!(log.receivable(0, 7, false), (6, true));
        assert_eq!(log.receivable(0, 7, true), (3, true));
        assert_eq!(log.first_receivable(2, 7, true), FirstRecord::At(30));
        assert_eq!(log.first_receivable(2, 7, false), FirstRecord::At(20));

        // By the aborted list of a read_committed read whose marker lies beyond it.
        let mut log = LogExtent::new(2);
        log.append(
            &[txn(2, 3, 20, 9), txn(5, 1, 25, 4)],
            6,
            Some((&[(9, 2)], 6)),
        );
        assert_eq!(log.receivable(2, 6, true), (1, true));
        assert_eq!(log.first_receivable(2, 6, true), FirstRecord::At(25));
    }

    #[test]
    fn outside_the_extent_counts_every_offset_and_says_so() {
        let mut log = LogExtent::new(100);
        log.append(
            &[txn(100, 1, 0, 1), marker(101, 1, Marker::Commit)],
            102,
            None,
        );
        assert_eq!(log.receivable(90, 102, false), (11, false));
        assert_eq!(log.receivable(100, 110, false), (9, false));
        assert_eq!(log.first_receivable(90, 102, false), FirstRecord::Unknown);
        assert_eq!(log.first_receivable(101, 110, false), FirstRecord::Unknown);
        assert_eq!(log.first_receivable(101, 102, false), FirstRecord::None);
    }

    #[test]
    fn batches_straddling_the_committed_offset() {
        let mut log = LogExtent::new(0);
        // Compaction left 2 of 5 offsets in the second batch.
        let compacted = Batch {
            record_count: 2,
            ..data(10, 5, 1_000)
        };
        log.append(&[data(0, 10, 0), compacted], 15, None);
        assert_eq!(log.receivable(4, 10, false), (6, true));
        assert_eq!(log.receivable(4, 15, false), (8, false));
        // Timestamps: 0, 10, ..., 90 in the first batch.
        assert_eq!(log.first_receivable(0, 15, false), FirstRecord::At(0));
        assert_eq!(log.first_receivable(9, 15, false), FirstRecord::At(90));
        let appended = Batch {
            log_append_time: true,
            max_timestamp: 777,
            ..data(15, 3, 1)
        };
        log.append(&[appended], 18, None);
        assert_eq!(log.first_receivable(16, 18, false), FirstRecord::At(777));
    }

    #[test]
    fn trimming_keeps_what_later_consumers_need() {
        let mut log = LogExtent::new(0);
        log.append(&[data(0, 5, 0), txn(5, 2, 50, 3), data(7, 3, 70)], 10, None);
        log.trim_before(6);
        assert_eq!(log.from(), 5);
        assert_eq!(log.batches(), 2);
        log.append(&[marker(10, 3, Marker::Abort)], 11, None);
        assert_eq!(log.receivable(6, 11, true), (3, true));
        assert_eq!(log.receivable(6, 11, false), (4, true));
        log.trim_before(100);
        assert_eq!((log.from(), log.batches()), (11, 0));
    }

    /// Two committed transactions, one aborted, plain records, read in two parts.
    #[test]
    fn cost_counts_markers_aborted_records_and_offsets() {
        let log = [
            txn(0, 3, 0, 1),
            marker(3, 1, Marker::Commit),
            txn(4, 2, 0, 2),
            data(6, 2, 0),
            marker(8, 2, Marker::Abort),
            txn(9, 4, 0, 1),
            marker(13, 1, Marker::Commit),
        ];
        let mut tally = CostTally::default();
        // The aborted records are known once the marker is read, in a later read.
        let first = tally.count(&log[..4], 0, 8, Sampled::default());
        assert_eq!(
            first,
            EosCost {
                commit_markers: 1,
                abort_markers: 0,
                aborted_records: 0,
                scanned_offsets: 8
            }
        );
        let second = tally.count(&log[4..], 8, 14, Sampled::default());
        assert_eq!(
            second,
            EosCost {
                commit_markers: 1,
                abort_markers: 1,
                aborted_records: 2,
                scanned_offsets: 6
            }
        );
        assert_eq!(tally.counted_to(), Some(14));
        // Nothing new: the same read again counts nothing.
        assert_eq!(
            tally.count(&log, 0, 14, Sampled::default()),
            EosCost::default()
        );
    }

    /// An abort marker gives the transaction's batches, exact where every batch of it
    /// was read; a commit marker gives nothing.
    #[test]
    fn an_abort_marker_gives_where_the_transactions_records_lie() {
        let sampled = |lso, hw| Sampled {
            last_stable_offset: Some(lso),
            high_watermark: Some(hw),
        };
        // Counting starts at 0 with LSO 0 and HW 5: producer 7's transaction is open
        // there (its first record at 0), producer 8's begins later; both abort.
        let mut tally = CostTally::default();
        tally.count(&[txn(0, 3, 0, 7), data(3, 2, 0)], 0, 5, sampled(0, 5));
        tally.count(
            &[
                txn(5, 4, 0, 8),
                txn(9, 2, 0, 7),
                marker(11, 7, Marker::Abort),
                marker(12, 8, Marker::Commit),
                txn(13, 6, 0, 8),
                marker(19, 8, Marker::Abort),
            ],
            5,
            20,
            sampled(5, 20),
        );
        let aborted = tally.take_aborted();
        assert_eq!(aborted.len(), 2);
        let (first, second) = (&aborted[0], &aborted[1]);
        assert_eq!(
            (first.producer_id, first.first_offset(), first.last_offset()),
            (7, 0, 10)
        );
        assert_eq!(
            (first.records(), first.marker_offset, first.exact),
            (5, 11, true)
        );
        assert_eq!(first.records_in(0, 2), (2, true));
        assert_eq!(
            (second.producer_id, second.records(), second.exact),
            (8, 6, true)
        );
        // Producer 8 committed a transaction at 12 before this one: it began after.
        assert_eq!((first.after_marker, second.after_marker), (None, Some(12)));
        assert!(tally.take_aborted().is_empty(), "taken once");

        // Counting starts at 50, above the LSO (40): a transaction open then may have
        // begun below 50, and one whose marker was written before the read may have too.
        let mut tally = CostTally::default();
        tally.count(
            &[
                txn(50, 3, 0, 1),
                marker(53, 1, Marker::Abort),
                txn(54, 2, 0, 2),
            ],
            50,
            56,
            sampled(40, 56),
        );
        tally.count(
            &[
                marker(56, 2, Marker::Abort),
                txn(57, 3, 0, 3),
                marker(60, 3, Marker::Abort),
            ],
            56,
            61,
            sampled(56, 61),
        );
        let exact: Vec<(i64, bool)> = tally
            .take_aborted()
            .iter()
            .map(|t| (t.producer_id, t.exact))
            .collect();
        // Counting started above the LSO: a transaction open then may have begun below
        // it, and nothing read tells which did (1 was aborted before the read, 2 open at
        // it, 3 began after it): none is exact. Where each began, DescribeProducers tells.
        assert_eq!(exact, [(1, false), (2, false), (3, false)]);
        // The same read starting at the LSO: 2 is exact.
        let mut tally = CostTally::default();
        tally.count(&[txn(54, 2, 0, 2)], 54, 56, sampled(54, 56));
        tally.count(&[marker(56, 2, Marker::Abort)], 56, 57, sampled(56, 57));
        assert!(tally.take_aborted()[0].exact);
    }

    /// A transaction of more batches than are kept apart stays exact in total; inside its
    /// last span the records are a bound.
    #[test]
    fn a_long_transactions_spans_are_bounded() {
        let mut tally = CostTally::default();
        let mut batches = Vec::new();
        for i in 0..100 {
            batches.push(txn(2 * i, 1, 0, 9));
            batches.push(data(2 * i + 1, 1, 0));
        }
        batches.push(marker(200, 9, Marker::Abort));
        tally.count(
            &batches,
            0,
            201,
            Sampled {
                last_stable_offset: Some(0),
                high_watermark: Some(0),
            },
        );
        let t = &tally.take_aborted()[0];
        assert_eq!(
            (t.spans.len(), t.records(), t.exact),
            (MAX_SPANS, 100, true)
        );
        assert_eq!(t.records_in(0, 20), (10, true));
        let (inside, exact) = t.records_in(0, 150);
        assert!(!exact && inside >= 75, "{inside}");
    }

    /// A window that starts over lower reads counted offsets again: only what lies past
    /// the counted end counts. One that starts over higher leaves a gap that counts
    /// nowhere, and a transaction it split is not counted as aborted.
    #[test]
    fn cost_counts_each_offset_once_across_window_restarts() {
        let mut tally = CostTally::default();
        tally.count(
            &[txn(100, 5, 0, 7), marker(105, 7, Marker::Commit)],
            100,
            106,
            Sampled::default(),
        );
        // Restarted at 102 (a group moved there), read to 110: 106..110 only. The Fetch
        // answer starts with the whole batch holding offset 102.
        let again = tally.count(
            &[
                txn(100, 5, 0, 7),
                marker(105, 7, Marker::Commit),
                txn(106, 4, 0, 8),
            ],
            102,
            110,
            Sampled::default(),
        );
        assert_eq!(again.commit_markers, 0);
        assert_eq!(again.scanned_offsets, 4);
        // Past a gap, the window starts inside a batch: its records from there on count.
        let mut straddle = CostTally::default();
        let rest = straddle.count(
            &[txn(0, 10, 0, 3), marker(10, 3, Marker::Abort)],
            4,
            11,
            Sampled::default(),
        );
        assert_eq!((rest.scanned_offsets, rest.aborted_records), (7, 6));
        // Producer 8's 4 records are undecided; the window jumps to 200 (gap 110..200).
        let gap = tally.count(
            &[marker(200, 8, Marker::Abort), data(201, 3, 0)],
            200,
            204,
            Sampled::default(),
        );
        assert_eq!(
            gap,
            EosCost {
                commit_markers: 0,
                abort_markers: 1,
                aborted_records: 0,
                scanned_offsets: 4
            }
        );
        // An empty answer up to the HW still counts the offsets it covers.
        assert_eq!(
            tally
                .count(&[], 204, 204, Sampled::default())
                .scanned_offsets,
            0
        );
        assert_eq!(tally.counted_to(), Some(204));
    }
}

/// Property tests: whatever bytes a broker sends as a partition's records, parsing
/// them and using what was parsed returns errors or numbers, never a panic.
#[cfg(test)]
mod hostile {
    use super::tests::{encode_batch, txn};
    use super::*;
    use proptest::prelude::*;

    fn any_marker() -> impl Strategy<Value = Option<Marker>> {
        prop_oneof![
            3 => Just(None),
            1 => Just(Some(Marker::Commit)),
            1 => Just(Some(Marker::Abort)),
            1 => Just(Some(Marker::Other)),
        ]
    }

    /// A batch header with any values, offsets and timestamps included.
    fn any_batch() -> impl Strategy<Value = Batch> {
        (
            prop_oneof![any::<i64>(), 0..1_000_000i64],
            prop_oneof![any::<i32>(), 0..10i32],
            0..4i32,
            (any::<i64>(), any::<i64>()),
            (any::<bool>(), any::<bool>()),
            any_marker(),
            -1..5i64,
        )
            .prop_map(
                |(base, delta, count, (first, max), (append_time, txn), control, pid)| Batch {
                    base_offset: base,
                    last_offset: base.wrapping_add(i64::from(delta)),
                    record_count: count,
                    first_timestamp: first,
                    max_timestamp: max,
                    log_append_time: append_time,
                    transactional: txn,
                    control,
                    producer_id: pid,
                    producer_epoch: 0,
                },
            )
    }

    /// A batch as a healthy broker writes it: offsets from 0, within what Kafka allows.
    fn valid_batch() -> impl Strategy<Value = Batch> {
        (
            0..1_000_000i64,
            1..4i32,
            any::<bool>(),
            any_marker(),
            0..5i64,
        )
            .prop_map(|(base, count, append_time, control, pid)| Batch {
                base_offset: base,
                last_offset: base + i64::from(count) - 1,
                record_count: count,
                first_timestamp: 1_700_000_000_000,
                max_timestamp: 1_700_000_000_000 + i64::from(count),
                log_append_time: append_time,
                transactional: control.is_some(),
                control,
                producer_id: pid,
                producer_epoch: 0,
            })
    }

    /// Uses parsed batches as the exporter does: appended to an extent (with an aborted
    /// list and an LSO), then asked for lags, first records, and trimmed.
    fn exercise(batches: &[Batch], offsets: [i64; 4], aborted: &[(i64, i64)]) {
        let [start, from, bound, trim] = offsets;
        for batch in batches {
            // What reads.rs relies on to compute where an answer ends.
            assert!(batch.base_offset >= 0, "{batch:?}");
            assert!(batch.last_offset >= batch.base_offset, "{batch:?}");
            assert!(batch.last_offset < i64::MAX, "{batch:?}");
        }
        let end = batches.last().map_or(start, |b| b.last_offset + 1);
        for committed in [None, Some((aborted, bound))] {
            let mut extent = LogExtent::new(start);
            extent.append(batches, end, committed);
            for committed_only in [false, true] {
                let (count, _) = extent.receivable(from, bound, committed_only);
                assert!(count >= 0, "{count}");
                extent.first_receivable(from, bound, committed_only);
            }
            extent.trim_before(trim);
            extent.receivable(from, bound, true);
            extent.first_receivable(from, bound, true);
        }
    }

    fn any_offsets() -> impl Strategy<Value = [i64; 4]> {
        prop::array::uniform4(prop_oneof![any::<i64>(), -2..1_000_010i64])
    }

    /// Found by `arbitrary_bytes` and `truncated_and_bit_flipped_batches`: offsets far
    /// on both sides of an extent overflowed the count of offsets outside it.
    #[test]
    fn receivable_far_outside_the_extent_saturates() {
        let extent = LogExtent::new(0);
        for (from, bound) in [
            (-3217614430978019752, 6005757605876756056),
            (-2050809373503837023, 7172562663350938785),
        ] {
            assert_eq!(extent.receivable(from, bound, false), (i64::MAX, false));
        }
    }

    #[test]
    fn append_time_only_from_log_append_time_batches() {
        let mut extent = LogExtent::new(0);
        extent.append(
            &[
                // CreateTime: what the producer wrote, maybe event time.
                txn(0, 3, 1_000, 7),
                Batch {
                    log_append_time: true,
                    max_timestamp: 9_000,
                    ..txn(3, 2, 5_000, 8)
                },
            ],
            5,
            None,
        );
        assert_eq!(
            extent.append_time_at(1),
            None,
            "CreateTime is no broker clock"
        );
        assert_eq!(extent.append_time_at(3), Some(9_000));
        assert_eq!(extent.append_time_at(4), Some(9_000));
        assert_eq!(extent.append_time_at(5), None, "past the extent");
    }

    /// A transaction's first write, by the producer's clock: the first timestamp of the
    /// batch that starts exactly at its start offset, never one inside a batch, never a
    /// LogAppendTime batch (the broker's clock: `append_time_at`), never -1.
    #[test]
    fn create_time_only_of_a_create_time_batch_starting_there() {
        let mut extent = LogExtent::new(0);
        extent.append(
            &[
                txn(0, 3, 1_000, 7),
                Batch {
                    log_append_time: true,
                    max_timestamp: 9_000,
                    ..txn(3, 2, 5_000, 8)
                },
                txn(5, 1, -1, 9),
            ],
            6,
            None,
        );
        assert_eq!(extent.create_time_at(0), Some(1_000));
        assert_eq!(extent.create_time_at(1), None, "inside a batch");
        assert_eq!(extent.create_time_at(3), None, "LogAppendTime");
        assert_eq!(extent.create_time_at(5), None, "no timestamp");
        assert_eq!(extent.create_time_at(6), None, "past the extent");
    }

    /// Found by `batches_with_any_header_values`: a largest timestamp far below the
    /// first overflowed their difference.
    #[test]
    fn timestamps_of_any_order_interpolate_without_overflow() {
        let batch = Batch {
            base_offset: 0,
            last_offset: 462023,
            record_count: 0,
            first_timestamp: 1962018557276666067,
            max_timestamp: -7261353479578109742,
            log_append_time: false,
            transactional: false,
            control: None,
            producer_id: 0,
            producer_epoch: 0,
        };
        let parsed = parse_batches(&encode_batch(&batch)).unwrap();
        let mut extent = LogExtent::new(0);
        extent.append(&parsed, 462024, None);
        assert_eq!(
            extent.first_receivable(1, 2, false),
            FirstRecord::At(1962018557276666067)
        );
        // In order, the interpolation is unchanged.
        let batch = Batch {
            first_timestamp: 1_000,
            max_timestamp: 1_100,
            last_offset: 10,
            ..batch
        };
        let mut extent = LogExtent::new(0);
        extent.append(&[batch], 11, None);
        assert_eq!(
            extent.first_receivable(5, 11, false),
            FirstRecord::At(1_050)
        );
    }

    /// Found by `batches_with_any_header_values`: a batch at offset -1 was kept, and one
    /// ending at i64::MAX would overflow where the next read starts.
    #[test]
    fn batches_outside_the_log_are_refused() {
        let at_minus_one = Batch {
            base_offset: -1,
            last_offset: -1,
            record_count: 0,
            first_timestamp: 0,
            max_timestamp: 0,
            log_append_time: false,
            transactional: false,
            control: None,
            producer_id: 0,
            producer_epoch: 0,
        };
        let error = parse_batches(&encode_batch(&at_minus_one)).unwrap_err();
        assert!(error.contains("outside the log"), "{error}");
        let at_the_end = Batch {
            base_offset: i64::MAX - 1,
            last_offset: i64::MAX,
            ..at_minus_one
        };
        assert!(parse_batches(&encode_batch(&at_the_end)).is_err());
        let last_possible = Batch {
            base_offset: i64::MAX - 2,
            last_offset: i64::MAX - 1,
            ..at_minus_one
        };
        assert_eq!(
            parse_batches(&encode_batch(&last_possible)),
            Ok(vec![last_possible])
        );
    }

    proptest! {
        #![proptest_config(crate::hostile::config(1000))]

        #[test]
        fn arbitrary_bytes(
            bytes in prop::collection::vec(any::<u8>(), 0..400),
            offsets in any_offsets(),
        ) {
            if let Ok(batches) = parse_batches(&bytes) {
                exercise(&batches, offsets, &[]);
            }
        }

        #[test]
        fn batches_with_any_header_values(
            batches in prop::collection::vec(any_batch(), 1..5),
            offsets in any_offsets(),
            aborted in prop::collection::vec((-1..5i64, any::<i64>()), 0..3),
        ) {
            let bytes: Vec<u8> = batches.iter().flat_map(encode_batch).collect();
            if let Ok(parsed) = parse_batches(&bytes) {
                exercise(&parsed, offsets, &aborted);
            }
        }

        #[test]
        fn truncated_and_bit_flipped_batches(
            batches in prop::collection::vec(valid_batch(), 1..5),
            cut in any::<prop::sample::Index>(),
            flips in prop::collection::vec((any::<prop::sample::Index>(), 0..8u8), 0..4),
            offsets in any_offsets(),
        ) {
            let mut bytes: Vec<u8> = batches.iter().flat_map(encode_batch).collect();
            bytes.truncate(cut.index(bytes.len() + 1));
            for (at, bit) in &flips {
                if !bytes.is_empty() {
                    let at = at.index(bytes.len());
                    bytes[at] ^= 1 << bit;
                }
            }
            if let Ok(parsed) = parse_batches(&bytes) {
                exercise(&parsed, offsets, &[]);
            }
        }

        /// The property above would pass on a parser that rejects everything: whole,
        /// untouched batches must come back as they were written.
        #[test]
        fn valid_batches_round_trip(
            mut batches in prop::collection::vec(valid_batch(), 1..5),
        ) {
            let mut next = 0;
            for batch in &mut batches {
                let count = batch.last_offset - batch.base_offset;
                batch.base_offset += next;
                batch.last_offset = batch.base_offset + count;
                next = batch.last_offset + 1;
            }
            let bytes: Vec<u8> = batches.iter().flat_map(encode_batch).collect();
            prop_assert_eq!(parse_batches(&bytes), Ok(batches));
        }
    }
}
