//! Acquisition: what a ShareFetch takes from what the log returned (Kafka's
//! `SharePartition.acquire`, in either `ShareAcquireMode`).
//!
//! Batch-optimized (mode 0, ShareFetch v1's only mode): new records are acquired in
//! whole log batches, so a fetch may take more than its `MaxRecords` and the window may
//! pass `max_record_locks` by less than one batch. Record-limit (mode 1, KIP-1206,
//! ShareFetch v2): never more than `MaxRecords`, new records cut inside a log batch and
//! cached batches split to per-offset tracking where only part of them fits. Either way
//! records already in the window are acquired again where they are AVAILABLE, per offset
//! once their batch is split. Records on their
//! last permitted delivery go out alone, and records redelivered often go out in halving
//! groups, so one bad record does not use up its neighbours' deliveries. Under
//! read_committed, records of aborted transactions are archived instead of handed out.

use std::collections::{BTreeSet, HashSet};

use super::in_flight::{DeliveryCountOp, InFlightBatch, InFlightState, RecordState, Tracking};
use super::partition::SharePartition;

/// The header of one batch the log returned: what acquisition needs of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchedBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    /// -1 for a producer without an id.
    pub producer_id: i64,
    pub transactional: bool,
    /// A control batch, and whether its marker is an ABORT.
    pub control: Option<ControlMarker>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlMarker {
    Abort,
    Commit,
}

impl FetchedBatch {
    /// A plain (non-transactional) batch.
    pub fn plain(base_offset: i64, last_offset: i64) -> Self {
        FetchedBatch {
            base_offset,
            last_offset,
            producer_id: -1,
            transactional: false,
            control: None,
        }
    }
}

/// An aborted transaction in the fetched range, as a Fetch response lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTransaction {
    pub producer_id: i64,
    pub first_offset: i64,
}

/// ShareFetch v2's `ShareAcquireMode`: how strictly `MaxRecords` binds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShareAcquireMode {
    /// 0: whole log batches, `MaxRecords` a soft limit.
    #[default]
    BatchOptimized,
    /// 1: at most `MaxRecords` records, batches split to keep to it.
    RecordLimit,
}

impl ShareAcquireMode {
    /// The mode a request's id names; None for an id Kafka does not know.
    pub fn from_id(id: i8) -> Option<Self> {
        match id {
            0 => Some(ShareAcquireMode::BatchOptimized),
            1 => Some(ShareAcquireMode::RecordLimit),
            _ => None,
        }
    }
}

/// What one ShareFetch asks of the share-partition.
#[derive(Clone, Copy, Debug)]
pub struct AcquireRequest<'a> {
    pub member_id: &'a str,
    /// Records per acquired range (ShareFetch's `BatchSize`).
    pub batch_size: u32,
    /// A soft limit in batch-optimized mode (whole log batches are acquired), a hard one
    /// in record-limit mode.
    pub max_fetch_records: u32,
    pub mode: ShareAcquireMode,
    /// Where the log was read from (`next_fetch_offset`).
    pub fetch_offset: i64,
    /// The batches read, in offset order.
    pub batches: &'a [FetchedBatch],
    /// `Some` for `share.isolation.level=read_committed`: the aborted transactions the
    /// log reported for the range.
    pub aborted_transactions: Option<&'a [AbortedTransaction]>,
}

/// One acquired range, as ShareFetch's `AcquiredRecords` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcquiredRecords {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_count: u16,
}

/// What a fetch acquired, and how many offsets that is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShareAcquiredRecords {
    pub records: Vec<AcquiredRecords>,
    pub count: i64,
}

impl SharePartition {
    /// Acquires for `req.member_id` the AVAILABLE records among `req.batches`, locking
    /// them until `now_ms` plus the lock duration.
    pub fn acquire(&mut self, req: &AcquireRequest<'_>, now_ms: i64) -> ShareAcquiredRecords {
        let (Some(first_batch), Some(last_batch)) = (req.batches.first(), req.batches.last())
        else {
            return ShareAcquiredRecords::default();
        };
        if req.max_fetch_records == 0 || last_batch.last_offset < self.start_offset {
            return ShareAcquiredRecords::default();
        }
        let (last_to_acquire, mut max_records) = self.last_offset_and_max_records(
            req.fetch_offset,
            req.max_fetch_records,
            last_batch.last_offset,
        );
        if max_records <= 0 {
            return ShareAcquiredRecords::default();
        }
        let mut base_offset = first_batch.base_offset;
        self.archive_stale_batches(req.fetch_offset, base_offset);
        match self.cached.range(..=base_offset).next_back() {
            None if base_offset < self.start_offset => base_offset = self.start_offset,
            Some((key, b)) if b.last_offset() >= base_offset => base_offset = *key,
            _ => {}
        }
        let lowest = first_batch.base_offset.min(base_offset);
        let keys: Vec<i64> = self
            .cached
            .range(lowest..=last_to_acquire)
            .map(|(k, _)| *k)
            .collect();
        let Some(&last_key) = keys.last() else {
            let acquired = self.acquire_new(req, base_offset, last_to_acquire, max_records, now_ms);
            return self.filter_aborted(req, acquired);
        };
        let sub_last = self
            .cached
            .get(&last_key)
            .map_or(last_to_acquire, |b| b.last_offset());

        let mut result = Vec::new();
        let mut count = 0i64;
        let mut gap_start = base_offset;
        for key in keys {
            if count >= max_records {
                break;
            }
            let Some(batch) = self.cached.get(&key) else {
                continue;
            };
            let (first, last) = (batch.first_offset(), batch.last_offset());
            if self.gap_window_active() {
                if gap_start < key {
                    let got =
                        self.acquire_new(req, gap_start, key - 1, max_records - count, now_ms);
                    count += got.count;
                    result.extend(got.records);
                }
                gap_start = last + 1;
                if count >= max_records {
                    break;
                }
            }
            let Some(batch) = self.cached.get(&key) else {
                continue;
            };
            let full_match = first >= first_batch.base_offset && last <= last_to_acquire;
            // Record-limit mode takes only what is left of MaxRecords from a batch.
            let over_limit =
                req.mode == ShareAcquireMode::RecordLimit && last - first + 1 > max_records - count;
            let throttle = self.should_throttle(batch, first_batch.base_offset, last_to_acquire);
            if throttle && count > 0 {
                max_records = 0;
                break;
            }
            if !full_match || batch.is_split() || throttle || over_limit {
                if !batch.is_split() && !batch.batch_state().is_some_and(|s| s.is_acquirable()) {
                    continue;
                }
                let limit =
                    (req.mode == ShareAcquireMode::RecordLimit).then_some(max_records - count);
                let got = self.acquire_subset(
                    req.member_id,
                    first_batch.base_offset,
                    last_to_acquire,
                    key,
                    limit,
                    now_ms,
                    &mut result,
                );
                count += got;
                if throttle && got > 0 {
                    max_records = 0;
                    break;
                }
                continue;
            }
            let limit = self.config.delivery_count_limit;
            let deadline = now_ms.saturating_add(self.config.record_lock_duration_ms);
            let Some(batch) = self.cached.get_mut(&key) else {
                continue;
            };
            let Tracking::Batch(s) = batch.tracking_mut() else {
                continue;
            };
            if !s.is_acquirable()
                || !s.try_update(
                    RecordState::Acquired,
                    DeliveryCountOp::Increase,
                    limit,
                    req.member_id,
                )
            {
                continue;
            }
            s.set_lock_deadline(Some(deadline));
            result.push(AcquiredRecords {
                first_offset: first,
                last_offset: last,
                delivery_count: s.delivery_count(),
            });
            count += last - first + 1;
        }
        if count < max_records && sub_last < last_to_acquire {
            let got = self.acquire_new(
                req,
                sub_last + 1,
                last_to_acquire,
                max_records - count,
                now_ms,
            );
            count += got.count;
            result.extend(got.records);
        }
        if let Some(last) = result.last() {
            let next = last.last_offset + 1;
            self.update_gap_window_start(next);
            return self.filter_aborted(
                req,
                ShareAcquiredRecords {
                    records: result,
                    count,
                },
            );
        }
        ShareAcquiredRecords {
            records: result,
            count,
        }
    }

    /// How far acquisition may go and how many records it may take: the window's room,
    /// or, when the window is full but the fetch is inside it (records released there),
    /// up to the end offset (Kafka's `lastOffsetAndMaxRecordsToAcquire`).
    fn last_offset_and_max_records(
        &self,
        fetch_offset: i64,
        max_fetch: u32,
        last_offset: i64,
    ) -> (i64, i64) {
        let room = i64::from(self.config.max_record_locks) - self.in_flight_records();
        let max_records = i64::from(max_fetch).min(room);
        if max_records > 0 {
            return (last_offset, max_records);
        }
        if fetch_offset <= self.end_offset {
            let max_records = i64::from(max_fetch).min(self.end_offset - fetch_offset + 1);
            return (last_offset.min(self.end_offset), max_records);
        }
        (last_offset, max_records)
    }

    /// Acquires records not yet in the cache, `[first, last]` cut at the log batch holding
    /// the `max`-th record (Kafka's `acquireNewBatchRecords`).
    fn acquire_new(
        &mut self,
        req: &AcquireRequest<'_>,
        first: i64,
        last: i64,
        max: i64,
        now_ms: i64,
    ) -> ShareAcquiredRecords {
        let mut first_acquired = first;
        if self.cached.is_empty() && self.end_offset > first_acquired {
            first_acquired = self.end_offset;
        }
        let mut last_acquired = last;
        if max < last_acquired - first_acquired + 1 {
            last_acquired = match req.mode {
                ShareAcquireMode::BatchOptimized => {
                    last_offset_of_batch_holding(req.batches, first_acquired + max - 1)
                }
                // The rest of the log batch stays uncached, read again by the next fetch.
                ShareAcquireMode::RecordLimit => first_acquired + max - 1,
            };
            if self.gap_window_active() && last_acquired > last {
                last_acquired = last;
            }
        }
        if first_acquired > last_acquired {
            return ShareAcquiredRecords::default();
        }
        let records = self.create_batches(req, first_acquired, last_acquired, now_ms);
        if self.cached.keys().next() == Some(&first_acquired) {
            self.start_offset = first_acquired;
        }
        if last_acquired > self.end_offset {
            self.end_offset = last_acquired;
        }
        self.update_gap_window_start(last_acquired + 1);
        ShareAcquiredRecords {
            records,
            count: last_acquired - first_acquired + 1,
        }
    }

    /// Cuts `[first, last]` into ranges of about `batch_size` records on log batch
    /// boundaries, each cached as one acquired batch (Kafka's `BatchOptimizedStrategy`).
    fn create_batches(
        &mut self,
        req: &AcquireRequest<'_>,
        first: i64,
        last: i64,
        now_ms: i64,
    ) -> Vec<AcquiredRecords> {
        let batch_size = i64::from(req.batch_size.max(1));
        let mut ranges = Vec::new();
        let mut current = first;
        if last - first + 1 > batch_size {
            for b in req.batches {
                if b.base_offset > last {
                    break;
                }
                if b.base_offset - current >= batch_size {
                    ranges.push((current, b.base_offset - 1));
                    current = b.base_offset;
                }
            }
        }
        ranges.push((current, last));
        let deadline = now_ms.saturating_add(self.config.record_lock_duration_ms);
        ranges
            .into_iter()
            .map(|(f, l)| {
                let mut s = InFlightState::new(RecordState::Acquired, 1, req.member_id);
                s.set_lock_deadline(Some(deadline));
                self.cached.insert(f, InFlightBatch::new(f, l, s));
                AcquiredRecords {
                    first_offset: f,
                    last_offset: l,
                    delivery_count: 1,
                }
            })
            .collect()
    }

    /// Acquires the AVAILABLE offsets of the batch at `key` within `[first, last]`, one by
    /// one, at most `limit` of them where given (record-limit mode) (Kafka's
    /// `acquireSubsetBatchRecords`). Returns how many.
    #[allow(clippy::too_many_arguments)]
    fn acquire_subset(
        &mut self,
        member_id: &str,
        first: i64,
        last: i64,
        key: i64,
        limit_records: Option<i64>,
        now_ms: i64,
        result: &mut Vec<AcquiredRecords>,
    ) -> i64 {
        let limit = self.config.delivery_count_limit;
        let throttle_limit = self.config.throttle_limit();
        let deadline = now_ms.saturating_add(self.config.record_lock_duration_ms);
        let Some(batch) = self.cached.get_mut(&key) else {
            return 0;
        };
        batch.split();
        let Tracking::PerOffset(map) = batch.tracking_mut() else {
            return 0;
        };
        let size = map.len() as i64;
        let mut count = 0i64;
        let mut throttled_max: Option<i64> = None;
        for (offset, s) in map.range_mut(first..=last) {
            if limit_records.is_some_and(|l| count >= l) {
                break;
            }
            if !s.is_acquirable() {
                continue;
            }
            let deliveries = s.delivery_count();
            if limit > 2 && deliveries == limit - 1 && count > 0 {
                // The record's last delivery goes out alone, in the next fetch.
                break;
            }
            if deliveries >= throttle_limit && throttled_max.is_none() {
                let shift = u32::from(deliveries - throttle_limit + 1);
                throttled_max = Some(size.checked_shr(shift).unwrap_or(0).max(1));
            }
            if !s.try_update(
                RecordState::Acquired,
                DeliveryCountOp::Increase,
                limit,
                member_id,
            ) {
                continue;
            }
            s.set_lock_deadline(Some(deadline));
            push_acquired(result, *offset, s.delivery_count());
            count += 1;
            if s.delivery_count() == limit && limit > 2 {
                break;
            }
            if throttled_max == Some(count) {
                break;
            }
        }
        count
    }

    /// Whether the AVAILABLE records of a batch have been delivered often enough to be
    /// handed out in smaller groups.
    fn should_throttle(&self, batch: &InFlightBatch, first: i64, last: i64) -> bool {
        let limit = self.config.throttle_limit();
        match batch.tracking() {
            Tracking::Batch(s) => s.is_acquirable() && s.delivery_count() >= limit,
            Tracking::PerOffset(m) => {
                m.range(first..=last)
                    .filter(|(_, s)| s.is_acquirable())
                    .map(|(_, s)| s.delivery_count())
                    .max()
                    .unwrap_or(0)
                    >= limit
            }
        }
    }

    /// The log returned nothing between the fetch offset and its first batch: those
    /// offsets were compacted away, and AVAILABLE records cached there are archived so the
    /// start offset can pass them (Kafka's `maybeArchiveStaleBatches`).
    fn archive_stale_batches(&mut self, fetch_offset: i64, base_offset: i64) {
        if self.cached.is_empty() || fetch_offset >= base_offset {
            return;
        }
        let floor = match self.cached.range(..=fetch_offset).next_back() {
            Some((k, b)) if b.last_offset() >= fetch_offset => *k,
            _ => fetch_offset,
        };
        let keys: Vec<i64> = self
            .cached
            .range(floor..base_offset)
            .map(|(k, _)| *k)
            .collect();
        if !keys.is_empty()
            && self.archive_records(
                fetch_offset,
                base_offset,
                &keys,
                RecordState::Available,
                true,
            )
        {
            self.find_next_fetch_offset = true;
        }
    }

    /// read_committed: archives the acquired records of aborted transactions and leaves
    /// them out of what the member gets (Kafka's
    /// `maybeFilterAbortedTransactionalAcquiredRecords`).
    fn filter_aborted(
        &mut self,
        req: &AcquireRequest<'_>,
        acquired: ShareAcquiredRecords,
    ) -> ShareAcquiredRecords {
        let Some(aborted) = req.aborted_transactions.filter(|a| !a.is_empty()) else {
            return acquired;
        };
        let to_archive = aborted_batches(req.batches, aborted);
        if to_archive.is_empty() {
            return acquired;
        }
        for b in &to_archive {
            let floor = self
                .cached
                .range(..=b.base_offset)
                .next_back()
                .map(|(k, _)| *k);
            let Some(floor) = floor else {
                continue;
            };
            let keys: Vec<i64> = self
                .cached
                .range(floor..=b.last_offset)
                .map(|(k, _)| *k)
                .collect();
            self.archive_records(
                b.base_offset,
                b.last_offset + 1,
                &keys,
                RecordState::Acquired,
                true,
            );
        }
        let records = subtract_ranges(&acquired.records, &to_archive);
        let count = records
            .iter()
            .map(|r| r.last_offset - r.first_offset + 1)
            .sum();
        ShareAcquiredRecords { records, count }
    }
}

/// The data batches of aborted transactions among `batches` (Kafka's
/// `fetchAbortedTransactionRecordBatches`): a producer's batches from its aborted
/// transaction's first offset up to its ABORT marker.
pub fn aborted_batches(
    batches: &[FetchedBatch],
    aborted: &[AbortedTransaction],
) -> Vec<FetchedBatch> {
    let mut pending: BTreeSet<(i64, i64)> = aborted
        .iter()
        .map(|a| (a.first_offset, a.producer_id))
        .collect();
    let mut aborted_producers = HashSet::new();
    let mut out = Vec::new();
    for b in batches.iter().filter(|b| b.producer_id >= 0) {
        while let Some(&(first, pid)) = pending.first() {
            if first > b.last_offset {
                break;
            }
            pending.pop_first();
            aborted_producers.insert(pid);
        }
        if b.control == Some(ControlMarker::Abort) {
            aborted_producers.remove(&b.producer_id);
        } else if b.transactional && aborted_producers.contains(&b.producer_id) {
            out.push(*b);
        }
    }
    out
}

/// `acquired` without the offsets of `removed` (both in offset order).
fn subtract_ranges(acquired: &[AcquiredRecords], removed: &[FetchedBatch]) -> Vec<AcquiredRecords> {
    let mut out = Vec::new();
    for r in acquired {
        let mut from = r.first_offset;
        for b in removed {
            if b.last_offset < from || b.base_offset > r.last_offset {
                continue;
            }
            if b.base_offset > from {
                out.push(AcquiredRecords {
                    first_offset: from,
                    last_offset: b.base_offset - 1,
                    ..*r
                });
            }
            from = from.max(b.last_offset + 1);
        }
        if from <= r.last_offset {
            out.push(AcquiredRecords {
                first_offset: from,
                ..*r
            });
        }
    }
    out
}

/// The last offset of the batch holding `offset`, or `offset` when none does (Kafka's
/// `lastOffsetFromBatchWithRequestOffset`).
fn last_offset_of_batch_holding(batches: &[FetchedBatch], offset: i64) -> i64 {
    let holder = batches
        .iter()
        .take_while(|b| offset >= b.base_offset)
        .last();
    match holder {
        Some(b) if offset <= b.last_offset => b.last_offset,
        _ => offset,
    }
}

/// Appends one acquired offset, joined to the range before when contiguous with the same
/// delivery count (Kafka's `accumulateAcquiredRecords`).
fn push_acquired(out: &mut Vec<AcquiredRecords>, offset: i64, delivery_count: u16) {
    if let Some(prev) = out.last_mut() {
        if prev.last_offset + 1 == offset && prev.delivery_count == delivery_count {
            prev.last_offset = offset;
            return;
        }
    }
    out.push(AcquiredRecords {
        first_offset: offset,
        last_offset: offset,
        delivery_count,
    });
}
