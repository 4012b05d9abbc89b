//! KIP-932 operations on the shard: ShareGroupHeartbeat, member expiry and the answers to
//! share-partition state initialization. The group changes only when their records are
//! replayed; the sessions beside it (when a member's session runs out) and when each
//! topic's initialization was last asked for are kept here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use tokio::time::{Duration, Instant};

use super::{Group, GroupShard, Session};
use crate::coordinator::group::records::share::{ShareKey, ShareValue};
use crate::coordinator::group::records::{GroupRecord, RecordKey, RecordValue};
use crate::coordinator::group::share::{
    self, Context, InitializeRequest, ShareGroup, ShareHeartbeat, ShareHeartbeatResult,
    ShareRecords, TopicImage, TopicPartitionsById, INITIALIZE_RETRY_INTERVAL_MS_DEFAULT,
    LEAVE_EPOCH,
};
use crate::coordinator::runtime::Written;

/// What a ShareGroupHeartbeat answers, and the initialization to send once its records
/// are written.
#[derive(Debug)]
pub struct ShareHeartbeatAnswer {
    pub result: ShareHeartbeatResult,
    pub initialize: Option<InitializeRequest>,
}

impl GroupShard {
    /// One ShareGroupHeartbeat: join (epoch 0), heartbeat, or leave (-1).
    pub fn share_heartbeat(
        &mut self,
        group_id: &str,
        hb: ShareHeartbeat,
        image: Arc<TopicImage>,
        now: Instant,
        now_ms: i64,
    ) -> Result<Written<GroupRecord, ShareHeartbeatAnswer>, ResponseError> {
        share::heartbeat::validate(group_id, &hb).map_err(|(e, why)| {
            tracing::debug!(group = %group_id, member = %hb.member_id, why, "invalid ShareGroupHeartbeat");
            e
        })?;
        self.image = image;
        let empty = ShareGroup::default();
        let group = match self.groups.get(group_id) {
            Some(Group::Share(s)) => s,
            // Kafka: "Group {} is not a share group."
            Some(_) => return Err(ResponseError::GroupIdNotFound),
            None if hb.member_epoch == 0 => &empty,
            None => return Err(ResponseError::GroupIdNotFound),
        };
        let image = self.image.clone();
        let config = self.settings.broker().group.share;
        let beat = if hb.member_epoch == LEAVE_EPOCH {
            share::leave(group, &hb, &image)?
        } else {
            let resolved_at = self
                .resolved_at
                .get(group_id)
                .map(|v| v.load(Ordering::Acquire));
            let since = self
                .share_initializing
                .entry(group_id.to_string())
                .or_default();
            let ctx = Context {
                topics: &image,
                refresh: resolved_at != Some(image.version()),
                now_ms,
                max_size: config.max_size.max(1) as usize,
                initialize_retry_ms: INITIALIZE_RETRY_INTERVAL_MS_DEFAULT,
                initializing_since: since,
            };
            let beat = share::heartbeat(group, &hb, &ctx)?;
            if let Some(req) = &beat.initialize {
                req.note_sent(since, now_ms);
            }
            beat
        };
        let records = encode_share(group_id, beat.records);

        let sessions = self.sessions.entry(group_id.to_string()).or_default();
        match beat.left {
            true => {
                sessions.remove(&hb.member_id);
            }
            false => {
                let session_ms = self
                    .settings
                    .share_members(group_id)
                    .session_timeout_ms
                    .max(0) as u64;
                let session = Session {
                    deadline: now + Duration::from_millis(session_ms),
                    revocation_deadline: None,
                    resend: false,
                };
                sessions.insert(beat.result.member_id.clone(), session);
            }
        }
        self.schedule(group_id);

        let answer = ShareHeartbeatAnswer {
            result: beat.result,
            initialize: beat.initialize,
        };
        let written = Written::new(records, answer);
        if beat.left {
            let departures = self.share_departures.clone();
            let (group, member) = (group_id.to_string(), hb.member_id.clone());
            return Ok(written.on_settled(Box::new(move |outcome| {
                if outcome.is_ok() {
                    departures.left(&group, &[member]);
                }
            })));
        }
        // The metadata hash was computed against this image: once that is committed
        // the group need not compute it again until the topics change.
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

    /// The share coordinator answered an InitializeShareGroupState: the partitions it
    /// initialized become assignable; those it failed are asked for again.
    pub fn share_initialized(
        &mut self,
        group_id: &str,
        topics: &TopicPartitionsById,
        succeeded: bool,
    ) -> Written<GroupRecord, ()> {
        let Some(Group::Share(g)) = self.groups.get(group_id) else {
            return Written::response(());
        };
        let records = match succeeded {
            true => share::initialized(g, topics),
            false => share::uninitialize(g, topics),
        };
        if !succeeded {
            if let Some(since) = self.share_initializing.get_mut(group_id) {
                for id in topics.keys() {
                    since.remove(id);
                }
            }
        }
        Written::new(encode_share(group_id, records), ())
    }

    /// AlterShareGroupOffsets, first step (Kafka's `alterShareGroupOffsets` on the
    /// coordinator): the share group, got or created, must be empty (NON_EMPTY_GROUP;
    /// GROUP_ID_NOT_FOUND for a group of another kind); `topics` are recorded as
    /// initializing. Answers the group's epoch, the state epoch Kafka initializes the
    /// share-partitions under (0 for a group created here).
    pub fn share_offsets_altering(
        &mut self,
        group_id: &str,
        topics: &TopicPartitionsById,
    ) -> Result<Written<GroupRecord, i32>, ResponseError> {
        let empty = ShareGroup::default();
        let group = match self.groups.get(group_id) {
            Some(Group::Share(g)) => g,
            Some(_) => return Err(ResponseError::GroupIdNotFound),
            None => &empty,
        };
        if !group.members.is_empty() {
            return Err(ResponseError::NonEmptyGroup);
        }
        let epoch = group.group_epoch;
        Ok(Written::new(
            encode_share(group_id, share::heartbeat::altering(group, topics)),
            epoch,
        ))
    }

    /// AlterShareGroupOffsets, last step: the share coordinator initialized `topics`
    /// anew, so they move from initializing to initialized (Kafka's
    /// `initializeShareGroupState`).
    pub fn share_offsets_altered(
        &mut self,
        group_id: &str,
        topics: &TopicPartitionsById,
    ) -> Written<GroupRecord, ()> {
        self.share_initialized(group_id, topics, true)
    }

    /// The share coordinator no longer holds state for `topics` of the group
    /// (DeleteShareGroupOffsets): they leave its share-partitions.
    pub fn share_state_forgotten(
        &mut self,
        group_id: &str,
        topics: &[uuid::Uuid],
    ) -> Written<GroupRecord, ()> {
        let Some(Group::Share(g)) = self.groups.get(group_id) else {
            return Written::response(());
        };
        Written::new(encode_share(group_id, share::forget_topics(g, topics)), ())
    }

    /// A share group's timer: members whose session ran out leave it.
    pub(super) fn expire_share_members(
        &mut self,
        group_id: &str,
        now: Instant,
    ) -> Written<GroupRecord, ()> {
        let Some(Group::Share(g)) = self.groups.get(group_id) else {
            return Written::response(());
        };
        let due: Vec<&str> = self
            .sessions
            .get(group_id)
            .into_iter()
            .flatten()
            .filter(|(_, s)| s.deadline <= now)
            .map(|(id, _)| id.as_str())
            .collect();
        for id in &due {
            tracing::info!(group = %group_id, member = %id, "share group member's session expired");
        }
        let gone: Vec<String> = due
            .iter()
            .filter(|id| g.members.contains_key(**id))
            .map(|id| id.to_string())
            .collect();
        let records = share::expire(g, &due, &self.image);
        if let Some(sessions) = self.sessions.get_mut(group_id) {
            sessions.retain(|id, _| g.members.contains_key(id));
        }
        let departures = self.share_departures.clone();
        let group = group_id.to_string();
        Written::new(encode_share(group_id, records), ()).on_settled(Box::new(move |outcome| {
            if outcome.is_ok() {
                departures.left(&group, &gone);
            }
        }))
    }
}

pub(super) fn encode_share(group_id: &str, records: ShareRecords) -> Vec<GroupRecord> {
    records
        .into_iter()
        .map(|(kind, value): (ShareKey, Option<ShareValue>)| {
            let key = RecordKey::Share {
                group: group_id.to_string(),
                kind,
            };
            (key, value.map(RecordValue::Share))
        })
        .collect()
}
