//! KIP-848 operations on the shard: ConsumerGroupHeartbeat and member expiry. The group
//! itself changes only when their records are replayed; the sessions beside it (when a
//! member's session and rebalance timeout run out, whether it is owed its assignment)
//! are kept here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use tokio::time::{Duration, Instant};

use super::classic::encode_consumer;
use super::{Group, GroupShard, Session};
use crate::coordinator::group::classic::ClassicGroup;
use crate::coordinator::group::consumer::heartbeat::{Context, Revoking};
use crate::coordinator::group::consumer::{
    self, ConsumerGroup, Heartbeat, HeartbeatResult, TopicImage, LEAVE_EPOCH, STATIC_LEAVE_EPOCH,
};
use crate::coordinator::group::records::{GroupRecord, RecordKey};
use crate::coordinator::runtime::Written;

impl GroupShard {
    /// One ConsumerGroupHeartbeat: join (epoch 0), heartbeat, or leave (-1, or -2 for
    /// a static member leaving for now).
    pub fn consumer_heartbeat(
        &mut self,
        group_id: &str,
        hb: Heartbeat,
        image: Arc<TopicImage>,
        now: Instant,
        now_ms: i64,
    ) -> Result<Written<GroupRecord, HeartbeatResult>, ResponseError> {
        self.image = image;
        let leaving = hb.member_epoch == LEAVE_EPOCH || hb.member_epoch == STATIC_LEAVE_EPOCH;
        let empty = ConsumerGroup::default();
        let mut records: Vec<GroupRecord> = Vec::new();
        let group = match self.groups.get(group_id) {
            Some(Group::Consumer(c)) => c,
            Some(Group::Classic(g)) if hb.member_epoch == 0 => {
                // A classic group with members stays classic (no online upgrade); an
                // empty one is deleted first, as Kafka does.
                if !g.is_empty() {
                    return Err(ResponseError::GroupIdNotFound);
                }
                if had_classic_record(g) {
                    let key = RecordKey::Group {
                        group: group_id.to_string(),
                    };
                    records.push((key, None));
                }
                &empty
            }
            None if hb.member_epoch == 0 => &empty,
            _ if leaving => return Err(ResponseError::GroupIdNotFound),
            _ => return Err(ResponseError::UnknownMemberId),
        };
        let image = self.image.clone();
        let beat = if leaving {
            consumer::leave(group, &hb, &image)?
        } else {
            let resolved_at = self
                .resolved_at
                .get(group_id)
                .map(|v| v.load(Ordering::Acquire));
            let session = self
                .sessions
                .get(group_id)
                .and_then(|s| s.get(&hb.member_id));
            let ctx = Context {
                topics: &image,
                regexes: &mut self.regexes,
                refresh: resolved_at != Some(image.version()),
                resend: session.is_some_and(|s| s.resend),
                now_ms,
            };
            consumer::heartbeat(group, &hb, ctx)?
        };
        records.extend(encode_consumer(group_id, beat.records));

        // The member's session, kept beside the group.
        let sessions = self.sessions.entry(group_id.to_string()).or_default();
        if let Some(old) = &beat.replaced {
            sessions.remove(old);
        }
        if !beat.left {
            let session_ms = self.settings.consumer(group_id).session_timeout_ms.max(0) as u64;
            let rebalance_ms = beat.rebalance_timeout_ms.max(0) as u64;
            let previous = sessions.get(&hb.member_id).copied();
            let revocation_deadline = match beat.revoking {
                None => None,
                Some(Revoking::Started) => Some(now + Duration::from_millis(rebalance_ms)),
                Some(Revoking::Continues) => previous
                    .and_then(|s| s.revocation_deadline)
                    .or(Some(now + Duration::from_millis(rebalance_ms))),
            };
            let resend = previous.is_some_and(|s| s.resend) && !beat.sent_assignment;
            sessions.insert(
                beat.result.member_id.clone(),
                Session {
                    deadline: now + Duration::from_millis(session_ms),
                    revocation_deadline,
                    resend,
                },
            );
        } else if hb.member_epoch == LEAVE_EPOCH {
            sessions.remove(&hb.member_id);
        }
        self.schedule(group_id);

        let written = Written::new(records, beat.result);
        if !beat.refreshed {
            return Ok(written);
        }
        // Resolved against this image: once that is committed the group need not
        // resolve again until the topics change.
        let cell = self
            .resolved_at
            .entry(group_id.to_string())
            .or_insert_with(|| Arc::new(AtomicU64::new(0)))
            .clone();
        let version = image.version();
        Ok(written.on_settled(Box::new(move |outcome| {
            if outcome.is_ok() {
                cell.store(version, Ordering::Release);
            }
        })))
    }

    /// A consumer group's timer: members whose session or rebalance timeout ran out
    /// leave it.
    pub(super) fn expire_consumer_members(
        &mut self,
        group_id: &str,
        now: Instant,
    ) -> Written<GroupRecord, ()> {
        let Some(Group::Consumer(c)) = self.groups.get(group_id) else {
            return Written::response(());
        };
        let due: Vec<&str> = self
            .sessions
            .get(group_id)
            .into_iter()
            .flatten()
            .filter(|(_, s)| s.deadline <= now || s.revocation_deadline.is_some_and(|d| d <= now))
            .map(|(id, _)| id.as_str())
            .collect();
        for id in &due {
            tracing::info!(group = %group_id, member = %id, "consumer group member's session or rebalance timeout expired");
        }
        let records = consumer::expire(c, &due, &self.image);
        // Sessions of members the group no longer has (a failed join) go too.
        if let Some(sessions) = self.sessions.get_mut(group_id) {
            sessions.retain(|id, _| c.members.contains_key(id));
        }
        Written::new(encode_consumer(group_id, records), ())
    }
}

/// Whether a group was ever written as a classic group (GroupMetadataValue).
fn had_classic_record(g: &ClassicGroup) -> bool {
    g.generation_id > 0 || g.protocol_type.is_some()
}
