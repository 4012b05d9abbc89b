//! The state of records a share-partition has handed out (Kafka's `RecordState`,
//! `InFlightState` and `InFlightBatch`).
//!
//! A record is AVAILABLE (may be acquired), ACQUIRED (locked by one member until its
//! acquisition lock's deadline), ACKNOWLEDGED (accepted, never delivered again) or ARCHIVED
//! (rejected, past the delivery-count limit, aborted, or below the log start offset). The
//! two last are terminal. Only AVAILABLE ⇄ ACQUIRED and ACQUIRED → terminal are transitions;
//! anything else is refused, so a misbehaving client cannot move a record backwards.
//!
//! A change that must be persisted before it counts (an acknowledgement, a release) is a
//! *transition*: the new state is visible at once, so nobody else can take the record, and
//! the previous one is kept until the write to `__share_group_state` succeeds (commit) or
//! fails (roll back). While a transition is open the record accepts no other change.
//!
//! States are tracked per batch of offsets, as the log batches were acquired; a batch is
//! split into one state per offset the first time something touches part of it (a
//! per-offset acknowledgement, a partial acquisition, the log start offset moving into it).

use std::collections::BTreeMap;

/// A record's delivery state, with the ids `__share_group_state` stores
/// (`0:Available, 2:Acked, 4:Archived`; 1 is never persisted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordState {
    Available,
    Acquired,
    Acknowledged,
    Archived,
}

impl RecordState {
    pub fn id(self) -> i8 {
        match self {
            RecordState::Available => 0,
            RecordState::Acquired => 1,
            RecordState::Acknowledged => 2,
            RecordState::Archived => 4,
        }
    }

    pub fn from_id(id: i8) -> Option<Self> {
        Some(match id {
            0 => RecordState::Available,
            1 => RecordState::Acquired,
            2 => RecordState::Acknowledged,
            4 => RecordState::Archived,
            _ => return None,
        })
    }

    /// Acknowledged and archived records are done: the start offset may pass them.
    pub fn is_terminal(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }

    /// Kafka's `validateTransition`: AVAILABLE → ACQUIRED, ACQUIRED → anything else.
    fn can_become(self, next: RecordState) -> bool {
        match self {
            _ if self == next => false,
            RecordState::Available => next == RecordState::Acquired,
            RecordState::Acquired => true,
            RecordState::Acknowledged | RecordState::Archived => false,
        }
    }
}

/// What a transition does to the delivery count (Kafka's `DeliveryCountOps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryCountOp {
    /// Acquisition: one more delivery.
    Increase,
    NoOp,
}

/// The state an open transition returns to if its write fails.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rollback {
    state: RecordState,
    member_id: String,
    delivery_count_limit: u16,
}

/// One record's (or one whole batch's) state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlightState {
    state: RecordState,
    delivery_count: u16,
    /// The member holding the acquisition lock; empty when none does (Kafka's
    /// `EMPTY_MEMBER_ID`).
    member_id: String,
    /// When the acquisition lock runs out (wall-clock ms), while one is held.
    lock_deadline_ms: Option<i64>,
    rollback: Option<Rollback>,
    /// Archived for good (log start offset moved past it, its transaction aborted): a
    /// failed write does not bring it back.
    archived_for_good: bool,
}

impl InFlightState {
    pub fn new(state: RecordState, delivery_count: u16, member_id: &str) -> Self {
        InFlightState {
            state,
            delivery_count,
            member_id: member_id.to_string(),
            lock_deadline_ms: None,
            rollback: None,
            archived_for_good: false,
        }
    }

    pub fn state(&self) -> RecordState {
        self.state
    }
    pub fn delivery_count(&self) -> u16 {
        self.delivery_count
    }
    pub fn member_id(&self) -> &str {
        &self.member_id
    }
    pub fn lock_deadline_ms(&self) -> Option<i64> {
        self.lock_deadline_ms
    }
    pub fn has_ongoing_transition(&self) -> bool {
        self.rollback.is_some()
    }

    /// Available and free to take.
    pub fn is_acquirable(&self) -> bool {
        self.state == RecordState::Available && self.rollback.is_none()
    }

    /// An acquisition lock that has run out by `now_ms` on a record still acquired.
    pub fn lock_expired(&self, now_ms: i64) -> bool {
        self.state == RecordState::Acquired
            && self.rollback.is_none()
            && self.lock_deadline_ms.is_some_and(|d| d <= now_ms)
    }

    pub(super) fn set_lock_deadline(&mut self, deadline_ms: Option<i64>) {
        self.lock_deadline_ms = deadline_ms;
    }

    /// Kafka's `tryUpdateState`: changes the state if the transition is allowed and none is
    /// open. A record going back to AVAILABLE at the delivery-count limit is archived
    /// instead; archiving does not count as a delivery. Returns false, changing nothing,
    /// when refused.
    pub(super) fn try_update(
        &mut self,
        next: RecordState,
        op: DeliveryCountOp,
        delivery_count_limit: u16,
        member_id: &str,
    ) -> bool {
        if self.rollback.is_some() {
            return false;
        }
        let next = match next {
            RecordState::Available if self.delivery_count >= delivery_count_limit => {
                RecordState::Archived
            }
            other => other,
        };
        if !self.state.can_become(next) {
            return false;
        }
        self.state = next;
        if next != RecordState::Archived && op == DeliveryCountOp::Increase {
            self.delivery_count = self.delivery_count.saturating_add(1);
        }
        self.member_id = member_id.to_string();
        // The lock deadline is the caller's: set on acquisition, cleared by an immediate
        // release, kept through a transition (a rolled-back acknowledgement returns the
        // record to its holder until the lock runs out).
        true
    }

    /// Kafka's `startStateTransition`: `try_update`, remembering the previous state until
    /// `complete_transition`.
    pub(super) fn start_transition(
        &mut self,
        next: RecordState,
        delivery_count_limit: u16,
    ) -> bool {
        let before = Rollback {
            state: self.state,
            member_id: self.member_id.clone(),
            delivery_count_limit,
        };
        if !self.try_update(next, DeliveryCountOp::NoOp, delivery_count_limit, "") {
            return false;
        }
        self.rollback = Some(before);
        true
    }

    /// Ends an open transition: kept if its write succeeded (or the record was archived for
    /// good meanwhile), otherwise the record goes back to its holder, or to AVAILABLE
    /// (ARCHIVED at the delivery-count limit) if its acquisition lock ran out meanwhile.
    pub(super) fn complete_transition(&mut self, committed: bool, now_ms: i64) {
        let Some(before) = self.rollback.take() else {
            return;
        };
        if committed || self.archived_for_good {
            self.lock_deadline_ms = None;
            return;
        }
        if self.lock_deadline_ms.is_some_and(|d| d <= now_ms) {
            self.state = if self.delivery_count >= before.delivery_count_limit {
                RecordState::Archived
            } else {
                RecordState::Available
            };
            self.member_id.clear();
            self.lock_deadline_ms = None;
        } else {
            self.state = before.state;
            self.member_id = before.member_id;
        }
    }

    /// Archives the record for good (Kafka's `archive`): below the log start offset, or
    /// part of an aborted transaction.
    pub(super) fn archive(&mut self) {
        self.archived_for_good = true;
        self.state = RecordState::Archived;
        self.member_id.clear();
        self.lock_deadline_ms = None;
    }
}

/// The states of one range of offsets, as acquired together: one state for the whole
/// batch, or one per offset once the batch has been split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InFlightBatch {
    first_offset: i64,
    last_offset: i64,
    tracking: Tracking,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tracking {
    Batch(InFlightState),
    PerOffset(BTreeMap<i64, InFlightState>),
}

impl InFlightBatch {
    pub fn new(first_offset: i64, last_offset: i64, state: InFlightState) -> Self {
        debug_assert!(first_offset <= last_offset);
        InFlightBatch {
            first_offset,
            last_offset,
            tracking: Tracking::Batch(state),
        }
    }

    pub fn first_offset(&self) -> i64 {
        self.first_offset
    }
    pub fn last_offset(&self) -> i64 {
        self.last_offset
    }
    pub fn tracking(&self) -> &Tracking {
        &self.tracking
    }
    pub(super) fn tracking_mut(&mut self) -> &mut Tracking {
        &mut self.tracking
    }

    /// The whole batch's state, while it is not split.
    pub fn batch_state(&self) -> Option<&InFlightState> {
        match &self.tracking {
            Tracking::Batch(s) => Some(s),
            Tracking::PerOffset(_) => None,
        }
    }

    pub fn is_split(&self) -> bool {
        matches!(self.tracking, Tracking::PerOffset(_))
    }

    /// Kafka's `maybeInitializeOffsetStateUpdate`: one state per offset, each a copy of the
    /// batch's (its lock and any open transition included).
    pub(super) fn split(&mut self) {
        if let Tracking::Batch(state) = &self.tracking {
            let per_offset = (self.first_offset..=self.last_offset)
                .map(|offset| (offset, state.clone()))
                .collect();
            self.tracking = Tracking::PerOffset(per_offset);
        }
    }

    /// Every state with the offsets it covers, in offset order.
    pub fn states(&self) -> Vec<(i64, i64, &InFlightState)> {
        match &self.tracking {
            Tracking::Batch(s) => vec![(self.first_offset, self.last_offset, s)],
            Tracking::PerOffset(m) => m.iter().map(|(o, s)| (*o, *o, s)).collect(),
        }
    }

    /// The state holding `offset`, if the batch covers it.
    pub fn state_at(&self, offset: i64) -> Option<&InFlightState> {
        if offset < self.first_offset || offset > self.last_offset {
            return None;
        }
        match &self.tracking {
            Tracking::Batch(s) => Some(s),
            Tracking::PerOffset(m) => m.get(&offset),
        }
    }
}
