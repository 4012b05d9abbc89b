//! One share-partition: a share group's view of one topic partition on its leader (Kafka's
//! `SharePartition`), as pure state. Time comes in as `now_ms`; writes to
//! `__share_group_state` go out as [`PendingWrite`]s whose outcome comes back through
//! [`SharePartition::complete_write`].
//!
//! The in-flight window runs from the share-partition start offset (SPSO) to the end offset
//! (SPEO, the last offset handed out; equal to the SPSO when nothing is in flight). Below
//! the SPSO every record is done; the cache holds the states of the window's records, keyed
//! by the first offset of each acquired batch. The SPSO advances over a contiguous prefix of
//! acknowledged and archived records once their states are persisted.
//!
//! Acquisition (`acquire.rs`) and acknowledgement (`acknowledge.rs`) are the two other
//! halves of this type.

use std::collections::BTreeMap;

use super::config::SharePartitionConfig;
use super::in_flight::{DeliveryCountOp, InFlightBatch, InFlightState, RecordState, Tracking};
use super::ShareError;
use crate::coordinator::share::{PersistedState, StateBatch, StateWrite};

/// A persisted window larger than this is corruption, refused rather than allocated for:
/// a real one holds at most `group.share.partition.max.record.locks` (≤ 10,000) plus one
/// log batch's records.
pub const MAX_PERSISTED_WINDOW_RECORDS: i64 = 1 << 20;

/// A write to persist, and the transitions waiting on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingWrite {
    pub write: StateWrite,
    /// Offset ranges whose open transitions end with the write, and the state written.
    transitions: Vec<(i64, i64, RecordState)>,
}

impl PendingWrite {
    pub fn is_empty(&self) -> bool {
        self.write.state_batches.is_empty()
    }
}

/// Offsets a share-partition restored from persisted state may have handed out before
/// and never persisted: the gaps between its persisted batches, up to their end (Kafka's
/// `GapWindow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct GapWindow {
    pub(super) end_offset: i64,
    pub(super) gap_start_offset: i64,
}

#[derive(Clone, Debug)]
pub struct SharePartition {
    pub(super) config: SharePartitionConfig,
    pub(super) leader_epoch: i32,
    pub(super) state_epoch: i32,
    pub(super) cached: BTreeMap<i64, InFlightBatch>,
    pub(super) start_offset: i64,
    pub(super) end_offset: i64,
    /// Something went back to AVAILABLE: the next fetch offset must be searched for.
    pub(super) find_next_fetch_offset: bool,
    pub(super) gap_window: Option<GapWindow>,
    /// Terminal records at or above the start offset (KIP-1226's lag).
    pub(super) delivery_complete_count: i32,
}

impl SharePartition {
    /// A share-partition built from its persisted state (Kafka's `maybeInitialize`).
    /// `initial_start_offset` decides where a never-initialized one starts
    /// (`share.auto.offset.reset`, see `config::initial_start_offset`).
    pub fn initialize(
        config: SharePartitionConfig,
        leader_epoch: i32,
        persisted: &PersistedState,
        initial_start_offset: impl FnOnce() -> Result<i64, ShareError>,
    ) -> Result<Self, ShareError> {
        let start_offset = match persisted.start_offset {
            -1 => initial_start_offset()?,
            o if o < 0 => return Err(invalid(format!("start offset {o}"))),
            o => o,
        };
        let mut sp = SharePartition {
            config,
            leader_epoch,
            state_epoch: persisted.state_epoch,
            cached: BTreeMap::new(),
            start_offset,
            end_offset: start_offset,
            find_next_fetch_offset: false,
            gap_window: None,
            delivery_complete_count: 0,
        };
        let mut gap_start = None;
        let mut previous_last = start_offset - 1;
        for b in &persisted.state_batches {
            if b.first_offset < start_offset || b.last_offset < b.first_offset {
                return Err(invalid(format!("batch {b:?} below start {start_offset}")));
            }
            if b.first_offset <= previous_last {
                return Err(invalid(format!("batch {b:?} overlaps the one before")));
            }
            if b.last_offset - start_offset >= MAX_PERSISTED_WINDOW_RECORDS {
                return Err(invalid(format!("batch {b:?} beyond the largest window")));
            }
            let state = match RecordState::from_id(b.delivery_state) {
                Some(s) if s != RecordState::Acquired => s,
                _ => return Err(invalid(format!("delivery state {}", b.delivery_state))),
            };
            let count = u16::try_from(b.delivery_count)
                .map_err(|_| invalid(format!("delivery count {}", b.delivery_count)))?;
            if gap_start.is_none() && b.first_offset > previous_last + 1 {
                gap_start = Some(previous_last + 1);
            }
            previous_last = b.last_offset;
            let s = InFlightState::new(state, count, "");
            sp.cached.insert(
                b.first_offset,
                InFlightBatch::new(b.first_offset, b.last_offset, s),
            );
            if state.is_terminal() {
                sp.delivery_complete_count += (b.last_offset - b.first_offset + 1) as i32;
            }
        }
        if let Some(last) = sp.cached.values().next_back().map(|b| b.last_offset()) {
            sp.find_next_fetch_offset = true;
            sp.end_offset = last;
            sp.gap_window = gap_start.map(|gap_start_offset| GapWindow {
                end_offset: last,
                gap_start_offset,
            });
            sp.maybe_update_cached_state_and_offsets();
        }
        Ok(sp)
    }

    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }
    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }
    pub fn state_epoch(&self) -> i32 {
        self.state_epoch
    }
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }
    pub fn delivery_complete_count(&self) -> i32 {
        self.delivery_complete_count
    }
    pub fn config(&self) -> &SharePartitionConfig {
        &self.config
    }

    /// A group's dynamic `share.*` settings changed; applies to locks taken from now on.
    pub fn set_config(&mut self, config: SharePartitionConfig) {
        self.config = config;
    }

    /// The cached batches, in offset order.
    pub fn cached_batches(&self) -> impl Iterator<Item = &InFlightBatch> {
        self.cached.values()
    }

    /// The state of one offset, if it is in the cache.
    pub fn record_state(&self, offset: i64) -> Option<&InFlightState> {
        let (_, batch) = self.cached.range(..=offset).next_back()?;
        batch.state_at(offset)
    }

    /// Records in the window: the end offset minus the start offset, plus one, while
    /// anything is cached (Kafka's `numInFlightRecords`).
    pub fn in_flight_records(&self) -> i64 {
        match self.cached.is_empty() {
            true => 0,
            false => self.end_offset - self.start_offset + 1,
        }
    }

    /// Whether a fetch may acquire anything: records went back to AVAILABLE inside the
    /// window, or the window has room (Kafka's `canAcquireRecords`).
    pub fn can_acquire_records(&mut self) -> bool {
        if self.next_fetch_offset() != self.end_offset + 1 {
            return true;
        }
        self.in_flight_records() < i64::from(self.config.max_record_locks)
    }

    /// Where the next fetch from the log starts: the first AVAILABLE record in the window
    /// (or the first offset of a gap left by the persisted state), else past the window.
    pub fn next_fetch_offset(&mut self) -> i64 {
        let past_window = self
            .cached
            .values()
            .next_back()
            .is_none_or(|b| self.start_offset > b.last_offset());
        if past_window {
            self.find_next_fetch_offset = false;
            return self.end_offset;
        }
        if !self.find_next_fetch_offset {
            return self.end_offset + 1;
        }
        let gap_active = self.gap_window_active();
        let mut gap_start = self.gap_window.map_or(-1, |g| g.gap_start_offset);
        let mut next = None;
        for (key, batch) in &self.cached {
            if gap_active {
                if *key > gap_start {
                    next = Some(gap_start);
                    break;
                }
                gap_start = gap_start.max(batch.last_offset() + 1);
            }
            if let Some((offset, _, _)) = batch
                .states()
                .into_iter()
                .find(|(_, _, s)| s.is_acquirable())
            {
                next = Some(offset);
                break;
            }
        }
        match next {
            Some(offset) => offset,
            None => {
                self.find_next_fetch_offset = false;
                self.end_offset + 1
            }
        }
    }

    /// The earliest acquisition-lock deadline, for the caller's timer.
    pub fn next_lock_deadline(&self) -> Option<i64> {
        self.cached
            .values()
            .flat_map(|b| b.states())
            .filter(|(_, _, s)| s.state() == RecordState::Acquired && !s.has_ongoing_transition())
            .filter_map(|(_, _, s)| s.lock_deadline_ms())
            .min()
    }

    /// Releases the records whose acquisition locks ran out by `now_ms`: back to AVAILABLE,
    /// or ARCHIVED at the delivery-count limit or below the start offset (Kafka's
    /// acquisition-lock timeout). The change is immediate; the write only records it.
    pub fn expire_locks(&mut self, now_ms: i64) -> Option<PendingWrite> {
        let mut batches = Vec::new();
        let keys: Vec<i64> = self.cached.keys().copied().collect();
        for key in keys {
            self.expire_batch(key, now_ms, &mut batches);
        }
        (!batches.is_empty()).then(|| self.pending_write(batches, Vec::new()))
    }

    fn expire_batch(&mut self, key: i64, now_ms: i64, out: &mut Vec<StateBatch>) {
        let start = self.start_offset;
        let limit = self.config.delivery_count_limit;
        let Some(batch) = self.cached.get_mut(&key) else {
            return;
        };
        let (first, last) = (batch.first_offset(), batch.last_offset());
        if let Tracking::Batch(s) = batch.tracking() {
            if !s.lock_expired(now_ms) {
                return;
            }
            if first < start && start <= last {
                // Part of the batch is below the start offset: those offsets are archived
                // whatever their delivery count.
                batch.split();
            }
        }
        let mut released = Vec::new();
        match batch.tracking_mut() {
            Tracking::Batch(s) => {
                let next = if last < start {
                    RecordState::Archived
                } else {
                    RecordState::Available
                };
                if s.try_update(next, DeliveryCountOp::NoOp, limit, "") {
                    s.set_lock_deadline(None);
                    released.push((first, last, s.state(), s.delivery_count()));
                }
            }
            Tracking::PerOffset(map) => {
                for (offset, s) in map.iter_mut().filter(|(_, s)| s.lock_expired(now_ms)) {
                    let next = if *offset < start {
                        RecordState::Archived
                    } else {
                        RecordState::Available
                    };
                    if s.try_update(next, DeliveryCountOp::NoOp, limit, "") {
                        s.set_lock_deadline(None);
                        released.push((*offset, *offset, s.state(), s.delivery_count()));
                    }
                }
            }
        }
        for (first, last, state, count) in released {
            push_state_batch(out, StateBatch::new(first, last, state.id(), count as i16));
            if state != RecordState::Archived {
                self.find_next_fetch_offset = true;
            }
            if state.is_terminal() {
                self.delivery_complete_count += self.in_flight_in_range(first, last);
            }
        }
    }

    /// Releases every record `member_id` holds (its share session closed, or it left the
    /// group), as transitions persisted like acknowledgements (Kafka's
    /// `releaseAcquiredRecords`).
    pub fn release_acquired_records(
        &mut self,
        member_id: &str,
        now_ms: i64,
    ) -> Result<PendingWrite, ShareError> {
        let start = self.start_offset;
        let limit = self.config.delivery_count_limit;
        let mut transitions = Vec::new();
        let mut batches = Vec::new();
        let mut failed = false;
        for batch in self.cached.values_mut() {
            let (first, last) = (batch.first_offset(), batch.last_offset());
            if let Tracking::Batch(s) = batch.tracking() {
                if s.state() == RecordState::Acquired
                    && s.member_id() == member_id
                    && first < start
                    && start <= last
                {
                    batch.split();
                }
            }
            let states: Vec<(i64, i64, &mut InFlightState)> = match batch.tracking_mut() {
                Tracking::Batch(s) => vec![(first, last, s)],
                Tracking::PerOffset(m) => m.iter_mut().map(|(o, s)| (*o, *o, s)).collect(),
            };
            for (f, l, s) in states {
                if s.member_id() != member_id && !s.member_id().is_empty() {
                    continue;
                }
                if s.state() != RecordState::Acquired {
                    continue;
                }
                let next = if l < start {
                    RecordState::Archived
                } else {
                    RecordState::Available
                };
                if !s.start_transition(next, limit) {
                    failed = true;
                    break;
                }
                transitions.push((f, l, s.state()));
                push_state_batch(
                    &mut batches,
                    StateBatch::new(f, l, s.state().id(), s.delivery_count() as i16),
                );
            }
            if failed {
                break;
            }
        }
        for (f, l, state) in &transitions {
            if state.is_terminal() {
                self.delivery_complete_count += self.in_flight_in_range(*f, *l);
            }
        }
        if failed {
            self.roll_back(&transitions, now_ms);
            return Err(ShareError::InvalidRecordState(
                "unable to release acquired records",
            ));
        }
        Ok(self.pending_write(batches, transitions))
    }

    /// The log start offset moved past the start offset (retention, DeleteRecords): the
    /// records below it that are AVAILABLE are archived, and the window starts there
    /// (Kafka's `updateCacheAndOffsets`). Acquired ones are archived when their locks run
    /// out. Nothing is persisted now; the next write carries the new start offset.
    pub fn update_log_start_offset(&mut self, log_start_offset: i64) {
        if log_start_offset <= self.start_offset {
            return;
        }
        if self.cached.is_empty() {
            self.start_offset = log_start_offset;
            self.end_offset = log_start_offset;
            self.delivery_complete_count = 0;
            return;
        }
        let removed = self.terminal_records_below(log_start_offset);
        let keys: Vec<i64> = self.cached.keys().copied().collect();
        let start = self.start_offset;
        if self.archive_records(
            start,
            log_start_offset,
            &keys,
            RecordState::Available,
            false,
        ) {
            self.find_next_fetch_offset = true;
        }
        self.start_offset = log_start_offset;
        self.delivery_complete_count -= removed;
        if self.end_offset < self.start_offset {
            self.end_offset = self.start_offset;
        }
    }

    /// The persister's answer to a write: commits its transitions, or rolls them back;
    /// then, if anything committed, moves the start offset. Returns whether the cached
    /// state changed so (a delayed share fetch may now complete).
    pub fn complete_write(
        &mut self,
        pending: &PendingWrite,
        result: Result<(), ()>,
        now_ms: i64,
    ) -> bool {
        if pending.transitions.is_empty() {
            // A lock-timeout write: the change was made already, whatever the outcome.
            return self.maybe_update_cached_state_and_offsets();
        }
        if result.is_err() {
            self.roll_back(&pending.transitions, now_ms);
            return false;
        }
        for (first, last, _) in &pending.transitions {
            let mut available = false;
            self.for_each_state_in(*first, *last, |_, _, s| {
                s.complete_transition(true, now_ms);
                available |= s.state() == RecordState::Available;
            });
            self.find_next_fetch_offset |= available;
        }
        self.maybe_update_cached_state_and_offsets()
    }

    /// Undoes open transitions (a failed write, or an operation refused half-way).
    pub(super) fn roll_back(&mut self, transitions: &[(i64, i64, RecordState)], now_ms: i64) {
        let start = self.start_offset;
        for (first, last, written) in transitions {
            let mut available = false;
            let mut un_terminated = 0;
            self.for_each_state_in(*first, *last, |f, l, s| {
                s.complete_transition(false, now_ms);
                available |= s.state() == RecordState::Available;
                if written.is_terminal() && !s.state().is_terminal() && l >= start {
                    un_terminated += (l - f.max(start) + 1) as i32;
                }
            });
            self.find_next_fetch_offset |= available;
            self.delivery_complete_count -= un_terminated;
        }
    }

    /// Calls `f(first, last, state)` for every state holding an offset in
    /// `[first, last]` with an open transition.
    fn for_each_state_in(
        &mut self,
        first: i64,
        last: i64,
        mut f: impl FnMut(i64, i64, &mut InFlightState),
    ) {
        let floor = self
            .cached
            .range(..=first)
            .next_back()
            .map_or(first, |(k, _)| *k);
        for batch in self.cached.range_mut(floor..=last).map(|(_, b)| b) {
            let (bf, bl) = (batch.first_offset(), batch.last_offset());
            match batch.tracking_mut() {
                Tracking::Batch(s) if s.has_ongoing_transition() && bl >= first => f(bf, bl, s),
                Tracking::Batch(_) => {}
                Tracking::PerOffset(m) => {
                    for (o, s) in m.range_mut(first..=last) {
                        if s.has_ongoing_transition() {
                            f(*o, *o, s);
                        }
                    }
                }
            }
        }
    }

    pub(super) fn pending_write(
        &self,
        state_batches: Vec<StateBatch>,
        transitions: Vec<(i64, i64, RecordState)>,
    ) -> PendingWrite {
        PendingWrite {
            write: StateWrite {
                state_epoch: self.state_epoch,
                leader_epoch: self.leader_epoch,
                start_offset: self.start_offset,
                delivery_complete_count: self.delivery_complete_count,
                state_batches,
            },
            transitions,
        }
    }

    /// Moves the start offset over the acknowledged and archived records at the front of
    /// the window, and drops the batches wholly below it (Kafka's
    /// `maybeUpdateCachedStateAndOffsets`). A batch is dropped only once all of it is done.
    pub(super) fn maybe_update_cached_state_and_offsets(&mut self) -> bool {
        if !self.can_move_start_offset() {
            return false;
        }
        let Some((last_done, removed)) = self.last_offset_acknowledged() else {
            return false;
        };
        let Some(last_cached) = self.cached.values().next_back().map(|b| b.last_offset()) else {
            return false;
        };
        if last_done == last_cached {
            self.start_offset = last_cached + 1;
            self.end_offset = last_cached + 1;
            self.cached.clear();
            self.delivery_complete_count = 0;
            return true;
        }
        let Some((&floor_key, floor)) = self.cached.range(..=last_done).next_back() else {
            return false;
        };
        let last_key_to_remove = if last_done == floor.last_offset() {
            if let Some((&higher, _)) = self.cached.range(last_done + 1..).next() {
                self.start_offset = self.start_offset.max(higher);
            }
            if let Some(gap) = self.gap_window.filter(|_| self.gap_window_active()) {
                self.start_offset = self.start_offset.min(gap.gap_start_offset);
            }
            Some(floor_key)
        } else {
            self.start_offset = self.start_offset.max(last_done + 1);
            self.cached.range(..floor_key).next_back().map(|(k, _)| *k)
        };
        self.delivery_complete_count -= removed;
        if let Some(last_key) = last_key_to_remove {
            self.cached = self.cached.split_off(&(last_key + 1));
        }
        true
    }

    /// Whether the record at the start offset is done (Kafka's `canMoveStartOffset`).
    fn can_move_start_offset(&self) -> bool {
        let Some((_, batch)) = self.cached.range(..=self.start_offset).next_back() else {
            // A gap at the start: offsets handed out before a failover, never persisted.
            return false;
        };
        let state = match batch.tracking() {
            Tracking::Batch(s) => s,
            Tracking::PerOffset(m) => match m.get(&self.start_offset) {
                Some(s) => s,
                None => return false,
            },
        };
        !state.has_ongoing_transition() && state.state().is_terminal()
    }

    /// The last offset of the done prefix of the cache, and how many done records at or
    /// above the start offset it holds (Kafka's `findLastOffsetAcknowledgedAndMetadata`).
    fn last_offset_acknowledged(&self) -> Option<(i64, i32)> {
        let gap = self.gap_window.filter(|_| self.gap_window_active());
        let mut last_done = None;
        let mut count = 0i32;
        for batch in self.cached.values() {
            if gap.is_some_and(|g| batch.last_offset() >= g.gap_start_offset) {
                break;
            }
            let mut stopped = false;
            for (first, last, s) in batch.states() {
                if s.has_ongoing_transition() || !s.state().is_terminal() {
                    stopped = true;
                    break;
                }
                last_done = Some(last);
                count += self.in_flight_in_range(first, last);
            }
            if stopped {
                break;
            }
        }
        last_done.map(|o| (o, count))
    }

    /// Records of `[first, last]` at or above the start offset.
    pub(super) fn in_flight_in_range(&self, first: i64, last: i64) -> i32 {
        match last >= self.start_offset {
            true => (last - first.max(self.start_offset) + 1) as i32,
            false => 0,
        }
    }

    /// Done records in `[start offset, new_start)` (Kafka's `countTerminalRecordsUpToNewLSO`).
    fn terminal_records_below(&self, new_start: i64) -> i32 {
        let mut count = 0i64;
        for batch in self.cached.range(..new_start).map(|(_, b)| b) {
            if batch.last_offset() < self.start_offset {
                continue;
            }
            for (first, last, s) in batch.states() {
                if !s.state().is_terminal() {
                    continue;
                }
                let from = first.max(self.start_offset);
                let to = last.min(new_start - 1);
                if from <= to {
                    count += to - from + 1;
                }
            }
        }
        count as i32
    }

    /// Archives the records of `[from, to_exclusive)` in the batches at `keys` that are in
    /// `initial` state, for good (Kafka's `archiveRecords`). Returns whether any was.
    pub(super) fn archive_records(
        &mut self,
        from: i64,
        to_exclusive: i64,
        keys: &[i64],
        initial: RecordState,
        count_as_complete: bool,
    ) -> bool {
        let mut any = false;
        for key in keys {
            if *key >= to_exclusive {
                break;
            }
            let Some(batch) = self.cached.get_mut(key) else {
                continue;
            };
            let (first, last) = (batch.first_offset(), batch.last_offset());
            let full_match = first >= from && last < to_exclusive;
            let mut archived = 0i32;
            match batch.tracking() {
                Tracking::Batch(s) if s.state() != initial => continue,
                Tracking::Batch(_) if !full_match => batch.split(),
                _ => {}
            }
            match batch.tracking_mut() {
                Tracking::Batch(s) => {
                    s.archive();
                    archived = (last - first + 1) as i32;
                }
                Tracking::PerOffset(m) => {
                    for (_, s) in m.range_mut(from..to_exclusive) {
                        if s.state() == initial {
                            s.archive();
                            archived += 1;
                        }
                    }
                }
            }
            any |= archived > 0;
            if count_as_complete {
                self.delivery_complete_count += archived;
            }
        }
        any
    }

    /// The persisted state's gaps are still being fetched: the window has not grown past
    /// where the persisted state ended.
    pub(super) fn gap_window_active(&self) -> bool {
        self.gap_window
            .is_some_and(|g| g.end_offset == self.end_offset)
    }

    /// Narrows the gap window after offsets up to `offset - 1` were acquired, or drops it
    /// once the window grew past it (Kafka's `maybeUpdatePersisterGapWindowStartOffset`).
    pub(super) fn update_gap_window_start(&mut self, offset: i64) {
        if let Some(gap) = &mut self.gap_window {
            if gap.end_offset == self.end_offset && offset <= gap.end_offset {
                gap.gap_start_offset = offset;
            } else {
                self.gap_window = None;
            }
        }
    }
}

fn invalid(what: String) -> ShareError {
    ShareError::InvalidPersistedState(what)
}

/// Appends a state batch, merged into the one before when contiguous and alike (the
/// share coordinator would merge them anyway; this keeps writes small).
pub(super) fn push_state_batch(out: &mut Vec<StateBatch>, b: StateBatch) {
    if let Some(prev) = out.last_mut() {
        if prev.last_offset + 1 == b.first_offset
            && prev.delivery_state == b.delivery_state
            && prev.delivery_count == b.delivery_count
        {
            prev.last_offset = b.last_offset;
            return;
        }
    }
    out.push(b);
}
