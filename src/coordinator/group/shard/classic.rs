//! Classic group operations on the shard. The group changes in memory as the request
//! is handled (as in Kafka, waiters and session timers are not records); what the state
//! machine asks to persist (its GroupMetadata) is written without replay, and the
//! SyncGroup answers that wait for that write go out once it is settled.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::time::Instant;

use super::{Group, GroupShard};
use crate::coordinator::group::classic::{
    ClassicGroup, Effects, JoinRequest, JoinResult, Outcome, SyncResult,
};
use crate::coordinator::group::consumer::tombstones;
use crate::coordinator::group::records::{GroupRecord, RecordKey, RecordValue};
use crate::coordinator::runtime::Written;

type Op<R> = Result<Written<GroupRecord, R>, ResponseError>;

/// A SyncGroup request, owned, as it travels to the partition's owner.
pub struct SyncRequest {
    pub member_id: String,
    pub instance: Option<String>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

impl GroupShard {
    /// Runs `f` on a classic group (created Empty first when `create`); None when there
    /// is no such classic group. Writes what the state machine asked for.
    fn with_classic<R: Send + 'static>(
        &mut self,
        group_id: &str,
        create: bool,
        now_ms: i64,
        f: impl FnOnce(&mut ClassicGroup) -> R,
    ) -> Option<Written<GroupRecord, R>> {
        if create && !self.groups.contains_key(group_id) {
            let g = self.new_classic(group_id, now_ms);
            self.groups.insert(group_id.to_string(), Group::Classic(g));
        }
        let Some(Group::Classic(g)) = self.groups.get_mut(group_id) else {
            return None;
        };
        let result = f(g);
        let effects = g.take_effects();
        // A group that a refused request created holds nothing worth keeping.
        self.drop_if_holds_nothing(group_id);
        self.schedule(group_id);
        Some(persist(group_id, effects, result))
    }

    /// A KIP-848 group left empty turns back into a classic group when a classic member
    /// joins: its records are tombstoned first.
    pub fn retire_empty_consumer_group(&mut self, group_id: &str) -> Op<()> {
        match self.groups.get(group_id) {
            Some(Group::Consumer(c)) if c.members.is_empty() => {
                let records = encode_consumer(group_id, tombstones(c));
                Ok(Written::new(records, ()))
            }
            _ => Ok(Written::response(())),
        }
    }

    pub fn classic_join(
        &mut self,
        group_id: &str,
        req: JoinRequest,
        now: Instant,
        now_ms: i64,
    ) -> Op<Outcome<JoinResult>> {
        let cfg = self.settings.broker().group.classic;
        let fail = |e, member_id: &str| {
            Ok(Written::response(Outcome::Done(JoinResult::error(
                e, member_id,
            ))))
        };
        if req.session_timeout_ms < cfg.min_session_timeout_ms
            || req.session_timeout_ms > cfg.max_session_timeout_ms
        {
            return fail(ResponseError::InvalidSessionTimeout, &req.member_id);
        }
        if let Some(Group::Consumer(_)) = self.groups.get(group_id) {
            // A consumer group with members stays one (no online downgrade).
            return fail(ResponseError::InconsistentGroupProtocol, &req.member_id);
        }
        let member_id = req.member_id.clone();
        let create = member_id.is_empty();
        match self.with_classic(group_id, create, now_ms, |g| g.join(req, &cfg, now, now_ms)) {
            Some(w) => Ok(w),
            None => fail(ResponseError::UnknownMemberId, &member_id),
        }
    }

    pub fn classic_sync(
        &mut self,
        group_id: &str,
        req: SyncRequest,
        now: Instant,
        now_ms: i64,
    ) -> Op<Outcome<SyncResult>> {
        let written = self.with_classic(group_id, false, now_ms, |g| {
            g.sync(
                &req.member_id,
                req.instance.as_deref(),
                req.generation_id,
                (req.protocol_type.as_deref(), req.protocol_name.as_deref()),
                req.assignments,
                now,
                now_ms,
            )
        });
        Ok(written.unwrap_or_else(|| {
            Written::response(Outcome::Done(SyncResult::error(
                ResponseError::UnknownMemberId,
            )))
        }))
    }

    pub fn classic_heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance: Option<&str>,
        generation_id: i32,
        now: Instant,
        now_ms: i64,
    ) -> Op<Option<ResponseError>> {
        let written = self.with_classic(group_id, false, now_ms, |g| {
            g.heartbeat(member_id, instance, generation_id, now)
        });
        Ok(written.unwrap_or_else(|| Written::response(Some(ResponseError::UnknownMemberId))))
    }

    /// Removes members; one answer per (member id, instance id).
    pub fn classic_leave(
        &mut self,
        group_id: &str,
        members: &[(String, Option<String>)],
        now: Instant,
        now_ms: i64,
    ) -> Op<Vec<Option<ResponseError>>> {
        self.with_classic(group_id, false, now_ms, |g| {
            members
                .iter()
                .map(|(id, instance)| g.leave(id, instance.as_deref(), now, now_ms))
                .collect()
        })
        .ok_or(ResponseError::UnknownMemberId)
    }

    /// A classic group's timer: sessions, pending member ids, rebalance and sync
    /// timeouts.
    pub(super) fn classic_tick(
        &mut self,
        group_id: &str,
        now: Instant,
        now_ms: i64,
    ) -> Written<GroupRecord, ()> {
        self.with_classic(group_id, false, now_ms, |g| g.tick(now, now_ms))
            .unwrap_or_else(|| Written::response(()))
    }
}

/// The group metadata the state machine asked to write (without replay: the group
/// already is what it says), and the SyncGroup answers that go out once it is written.
fn persist<R>(group_id: &str, effects: Effects, result: R) -> Written<GroupRecord, R> {
    let records: Vec<GroupRecord> = effects
        .record
        .map(|v| {
            let key = RecordKey::Group {
                group: group_id.to_string(),
            };
            (key, Some(RecordValue::Group(v)))
        })
        .into_iter()
        .collect();
    let answers = effects.sync_answers;
    let written = Written::new(records, result).without_replay();
    if answers.is_empty() {
        return written;
    }
    written.on_settled(Box::new(move |outcome| {
        for (tx, answer) in answers {
            let _ = tx.send(match outcome {
                Ok(()) => answer,
                Err(e) => SyncResult::error(e),
            });
        }
    }))
}

/// A consumer group's records under its group id.
pub(super) fn encode_consumer(
    group_id: &str,
    records: crate::coordinator::group::consumer::ConsumerRecords,
) -> Vec<GroupRecord> {
    records
        .into_iter()
        .map(|(kind, value)| {
            let key = RecordKey::Consumer {
                group: group_id.to_string(),
                kind,
            };
            (key, value.map(RecordValue::Consumer))
        })
        .collect()
}
