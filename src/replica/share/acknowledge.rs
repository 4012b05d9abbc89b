//! Acknowledgement: a member's verdict on records it acquired (Kafka's
//! `SharePartition.acknowledge`, and `KafkaApis.validateAcknowledgementBatches` for the
//! shape of a request's batches).
//!
//! An acknowledgement either applies whole or not at all: the transitions it started are
//! rolled back at the first refused range, and the request gets INVALID_RECORD_STATE
//! (records the member does not hold, or that are already changing) or INVALID_REQUEST
//! (ranges past what was handed out, malformed batches).

use super::in_flight::{InFlightState, RecordState, Tracking};
use super::partition::{push_state_batch, PendingWrite, SharePartition};
use super::ShareError;
use crate::coordinator::share::StateBatch;

/// Kafka's `AcknowledgeType`, with GAP (0) for offsets the member found no record at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcknowledgeType {
    Gap,
    Accept,
    Release,
    Reject,
    /// KIP-1222 (ShareAcknowledge v2): extend the acquisition lock, change nothing else.
    Renew,
}

impl AcknowledgeType {
    pub fn from_id(id: i8) -> Option<Self> {
        Some(match id {
            0 => AcknowledgeType::Gap,
            1 => AcknowledgeType::Accept,
            2 => AcknowledgeType::Release,
            3 => AcknowledgeType::Reject,
            4 => AcknowledgeType::Renew,
            _ => return None,
        })
    }

    pub fn id(self) -> i8 {
        match self {
            AcknowledgeType::Gap => 0,
            AcknowledgeType::Accept => 1,
            AcknowledgeType::Release => 2,
            AcknowledgeType::Reject => 3,
            AcknowledgeType::Renew => 4,
        }
    }

    /// The state a record moves to (Kafka's `ACK_TYPE_TO_RECORD_STATE`); none for RENEW.
    fn target(self) -> Option<RecordState> {
        match self {
            AcknowledgeType::Gap | AcknowledgeType::Reject => Some(RecordState::Archived),
            AcknowledgeType::Accept => Some(RecordState::Acknowledged),
            AcknowledgeType::Release => Some(RecordState::Available),
            AcknowledgeType::Renew => None,
        }
    }
}

/// One range of a request's acknowledgements: one type for all its offsets, or one per
/// offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcknowledgementBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub acknowledge_types: Vec<i8>,
}

impl AcknowledgementBatch {
    pub fn new(first_offset: i64, last_offset: i64, ack: AcknowledgeType) -> Self {
        AcknowledgementBatch {
            first_offset,
            last_offset,
            acknowledge_types: vec![ack.id()],
        }
    }

    fn type_at(&self, offset: i64) -> Option<AcknowledgeType> {
        let id = match self.acknowledge_types.as_slice() {
            [single] => *single,
            many => *many.get(usize::try_from(offset - self.first_offset).ok()?)?,
        };
        AcknowledgeType::from_id(id)
    }
}

/// The checks Kafka makes on one partition's acknowledgement batches before the
/// share-partition sees them: ranges in order and not overlapping, a type per offset or
/// one for all, types known to the request's version (`max_type`: 3, or 4 from
/// ShareAcknowledge/ShareFetch v2), RENEW only in a request with `IsRenewAck`. A batch may
/// start at the offset the one before ended at, as in Kafka; acknowledging that offset
/// twice then fails in the share-partition, the first transition still being open.
pub fn validate_acknowledgement_batches(
    batches: &[AcknowledgementBatch],
    max_type: i8,
    is_renew_ack: bool,
) -> Result<(), ShareError> {
    let mut previous_end = -1i64;
    for b in batches {
        let types = &b.acknowledge_types;
        let reason = if b.first_offset > b.last_offset {
            "first offset after last offset"
        } else if b.first_offset < previous_end {
            "acknowledgement batches overlap or are out of order"
        } else if types.is_empty() {
            "no acknowledge types"
        } else if types.len() > 1 && (b.last_offset - b.first_offset) != types.len() as i64 - 1 {
            "acknowledge types do not match the batch's offsets"
        } else if types.iter().any(|t| *t < 0 || *t > max_type) {
            "unknown acknowledge type"
        } else if !is_renew_ack && types.contains(&AcknowledgeType::Renew.id()) {
            "RENEW in a request without IsRenewAck"
        } else {
            previous_end = b.last_offset;
            continue;
        };
        return Err(ShareError::InvalidRequest(reason));
    }
    Ok(())
}

type Transitions = Vec<(i64, i64, RecordState)>;

impl SharePartition {
    /// Applies `member_id`'s acknowledgements as transitions to persist; nothing changes if
    /// any range is refused.
    pub fn acknowledge(
        &mut self,
        member_id: &str,
        batches: &[AcknowledgementBatch],
        now_ms: i64,
    ) -> Result<PendingWrite, ShareError> {
        let mut transitions = Vec::new();
        let mut writes = Vec::new();
        let mut outcome = Ok(());
        for batch in batches {
            if batch
                .acknowledge_types
                .iter()
                .any(|t| AcknowledgeType::from_id(*t).is_none())
                || batch.acknowledge_types.is_empty()
            {
                outcome = Err(ShareError::InvalidRequest("invalid acknowledge type"));
                break;
            }
            if batch.last_offset < self.start_offset {
                continue;
            }
            outcome = self.acknowledged_keys(batch).and_then(|keys| {
                self.acknowledge_batches(
                    member_id,
                    batch,
                    &keys,
                    now_ms,
                    &mut transitions,
                    &mut writes,
                )
            });
            if outcome.is_err() {
                break;
            }
        }
        for (first, last, state) in &transitions {
            if state.is_terminal() {
                self.delivery_complete_count += self.in_flight_in_range(*first, *last);
            }
        }
        if let Err(e) = outcome {
            self.roll_back(&transitions, now_ms);
            return Err(e);
        }
        Ok(self.pending_write(writes, transitions))
    }

    /// The cached batches an acknowledgement covers (Kafka's
    /// `fetchSubMapForAcknowledgementBatch`).
    fn acknowledged_keys(&self, batch: &AcknowledgementBatch) -> Result<Vec<i64>, ShareError> {
        let start = self.start_offset;
        let floor = match self.cached.range(..=batch.first_offset).next_back() {
            Some((k, _)) => *k,
            // The start offset moved into the acknowledged range: its cached part counts.
            None if batch.first_offset < start && start <= batch.last_offset => {
                match self.cached.range(..=start).next_back() {
                    Some((k, _)) => *k,
                    None => return Err(not_found()),
                }
            }
            None => return Err(not_found()),
        };
        let keys: Vec<i64> = self
            .cached
            .range(floor..=batch.last_offset)
            .map(|(k, _)| *k)
            .collect();
        let last_cached = keys
            .last()
            .and_then(|k| self.cached.get(k))
            .map_or(i64::MIN, |b| b.last_offset());
        if last_cached < batch.first_offset {
            return Err(ShareError::InvalidRequest(
                "the first offset in request is past acquired records",
            ));
        }
        if batch.last_offset > last_cached {
            return Err(ShareError::InvalidRequest(
                "the last offset in request is past acquired records",
            ));
        }
        Ok(keys)
    }

    fn acknowledge_batches(
        &mut self,
        member_id: &str,
        batch: &AcknowledgementBatch,
        keys: &[i64],
        now_ms: i64,
        transitions: &mut Transitions,
        writes: &mut Vec<StateBatch>,
    ) -> Result<(), ShareError> {
        let start = self.start_offset;
        let limit = self.config.delivery_count_limit;
        let deadline = now_ms.saturating_add(self.config.record_lock_duration_ms);
        for key in keys {
            let Some(cached) = self.cached.get_mut(key) else {
                continue;
            };
            let (first, last) = (cached.first_offset(), cached.last_offset());
            if last < start {
                continue;
            }
            if let Tracking::Batch(s) = cached.tracking() {
                check_holder(s, member_id)?;
            }
            let full_match = first >= batch.first_offset && last <= batch.last_offset;
            let per_offset = batch.acknowledge_types.len() > 1;
            let start_inside = first < start && start <= last;
            if !full_match || cached.is_split() || per_offset || start_inside {
                if cached
                    .batch_state()
                    .is_some_and(|s| s.state() != RecordState::Acquired)
                {
                    return Err(ShareError::InvalidRecordState(
                        "the batch cannot be acknowledged: the subset batch is not acquired",
                    ));
                }
                cached.split();
                let Tracking::PerOffset(map) = cached.tracking_mut() else {
                    continue;
                };
                let from = batch.first_offset.max(start);
                for (offset, s) in map.range_mut(from..=batch.last_offset) {
                    if s.state() != RecordState::Acquired {
                        return Err(ShareError::InvalidRecordState(
                            "the offset cannot be acknowledged: it is not acquired",
                        ));
                    }
                    check_holder(s, member_id)?;
                    let ack = batch
                        .type_at(*offset)
                        .ok_or(ShareError::InvalidRequest("invalid acknowledge type"))?;
                    apply(
                        s,
                        ack,
                        *offset,
                        *offset,
                        limit,
                        deadline,
                        transitions,
                        writes,
                    )?;
                }
            } else {
                let Tracking::Batch(s) = cached.tracking_mut() else {
                    continue;
                };
                if s.state() != RecordState::Acquired {
                    return Err(ShareError::InvalidRecordState(
                        "the batch cannot be acknowledged: it is not acquired",
                    ));
                }
                let ack = batch
                    .type_at(batch.first_offset)
                    .ok_or(ShareError::InvalidRequest("invalid acknowledge type"))?;
                apply(s, ack, first, last, limit, deadline, transitions, writes)?;
            }
        }
        Ok(())
    }
}

/// The record must be held by `member_id`, with no change under way.
fn check_holder(s: &InFlightState, member_id: &str) -> Result<(), ShareError> {
    if s.has_ongoing_transition() {
        return Err(ShareError::InvalidRecordState(
            "the record state is invalid: an acknowledgement of it is in progress",
        ));
    }
    if s.member_id().is_empty() {
        return Err(ShareError::InvalidRecordState(
            "the batch cannot be acknowledged: it is not acquired",
        ));
    }
    if s.member_id() != member_id {
        return Err(ShareError::InvalidRecordState(
            "member is not the owner of the records",
        ));
    }
    Ok(())
}

/// One acknowledgement on one acquired state: RENEW extends its lock, the others start
/// the transition to persist.
#[allow(clippy::too_many_arguments)]
fn apply(
    s: &mut InFlightState,
    ack: AcknowledgeType,
    first: i64,
    last: i64,
    limit: u16,
    renewed_deadline: i64,
    transitions: &mut Transitions,
    writes: &mut Vec<StateBatch>,
) -> Result<(), ShareError> {
    let Some(target) = ack.target() else {
        s.set_lock_deadline(Some(renewed_deadline));
        return Ok(());
    };
    if !s.start_transition(target, limit) {
        return Err(ShareError::InvalidRecordState(
            "unable to acknowledge records for the batch",
        ));
    }
    transitions.push((first, last, s.state()));
    push_state_batch(
        writes,
        StateBatch::new(first, last, s.state().id(), s.delivery_count() as i16),
    );
    Ok(())
}

fn not_found() -> ShareError {
    ShareError::InvalidRecordState(
        "batch record not found: the request batch offsets are not found in the cache",
    )
}
