//! KIP-932 share groups: members consume the same partitions together, the broker
//! assigns partitions and every member converges by heartbeats (ShareGroupHeartbeat).
//!
//! A share group is a KIP-848 group without revocation: a partition may be assigned to
//! many members at once, since records are handed out one acquisition at a time by the
//! share-partition on the leader (`replica/share/`), not owned by a member. So a member
//! takes its target assignment as soon as it heartbeats; only the group epoch, the
//! target assignment and the member epochs follow the consumer group's steps.
//!
//! A partition is assigned only once its state exists in `__share_group_state`: a
//! heartbeat that finds subscribed partitions without state writes them as
//! *initializing* and asks for InitializeShareGroupState; when the share coordinator
//! answers, they become *initialized* (record 15), and the next heartbeat moves the group
//! epoch and assigns them (Kafka's `initializedAssignmentPending`).
//!
//! The group is its records in `__consumer_offsets` (types 10–15, `records/share.rs`):
//! - `heartbeat.rs`: a heartbeat, a leave, an expiry or an initialization's answer reads
//!   the group and returns the records of what changes, in Kafka's order;
//! - `replay.rs`: the group changes only when those records are replayed;
//! - `assignor.rs`: Kafka's simple assignor for share groups.

mod assignor;
pub mod heartbeat;
mod replay;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};

use uuid::Uuid;

pub use heartbeat::{
    expire, forget_topics, heartbeat, initialized, leave, uninitialize, Context, ShareBeat,
};

pub use super::consumer::{Assignment, TopicImage};
use super::records::share::{ShareKey, ShareValue};

/// Records of one share group: key and value (None: a tombstone).
pub type ShareRecords = Vec<(ShareKey, Option<ShareValue>)>;

/// The member epoch of a heartbeat that leaves the group.
pub const LEAVE_EPOCH: i32 = -1;

/// `group.share.max.size`'s default (Kafka's `SHARE_GROUP_MAX_SIZE_DEFAULT`).
pub const MAX_SIZE_DEFAULT: usize = 200;

/// `group.share.initialize.retry.interval.ms`'s default: an initialization not
/// answered for this long is asked for again.
pub const INITIALIZE_RETRY_INTERVAL_MS_DEFAULT: i64 = 30_000;

/// Told, with the group and member ids, of each member that left a share group here
/// (its session ran out, or it left) once the records taking it out are committed.
pub type ShareMemberLeft = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// Where the group coordinator reports departed share group members: the share-partitions
/// led here release what those members hold at once, rather than when each acquisition
/// lock runs out. Set once by the broker; shared by every shard.
#[derive(Default)]
pub struct ShareDepartures(OnceLock<ShareMemberLeft>);

impl ShareDepartures {
    pub fn set(&self, listener: ShareMemberLeft) {
        let _ = self.0.set(listener);
    }

    /// Reports `member_ids` of `group_id` as gone.
    pub fn left(&self, group_id: &str, member_ids: &[String]) {
        if let Some(listener) = self.0.get() {
            for id in member_ids {
                listener(group_id, id);
            }
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShareMember {
    pub member_id: String,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed: Vec<String>,
    pub member_epoch: i32,
    pub previous_epoch: i32,
    pub assigned: Assignment,
}

/// One ShareGroupHeartbeat, as the coordinator needs it.
#[derive(Clone, Debug, Default)]
pub struct ShareHeartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    /// None: unchanged since the last heartbeat.
    pub subscribed: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareHeartbeatResult {
    pub member_id: String,
    pub member_epoch: i32,
    /// The member's assignment by topic id, when it is sent.
    pub assignment: Option<Vec<(Uuid, Vec<i32>)>>,
}

/// Topic id → its name and partitions, as record 15 lists them.
pub type TopicPartitionsById = BTreeMap<Uuid, (String, BTreeSet<i32>)>;

/// The share-partitions whose state the share coordinator holds or is creating.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatePartitions {
    pub initializing: TopicPartitionsById,
    pub initialized: TopicPartitionsById,
    pub deleting: BTreeMap<Uuid, String>,
}

impl StatePartitions {
    pub fn is_empty(&self) -> bool {
        self.initializing.is_empty() && self.initialized.is_empty() && self.deleting.is_empty()
    }
}

/// InitializeShareGroupState to send for a group: its share-partitions start at
/// `share.auto.offset.reset` (start offset -1), with the group epoch as state epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitializeRequest {
    pub state_epoch: i32,
    pub topics: TopicPartitionsById,
}

/// A share group, as its records describe it.
#[derive(Clone, Debug, Default)]
pub struct ShareGroup {
    pub group_epoch: i32,
    /// The hash of the subscribed topics' metadata the group epoch was computed from.
    pub metadata_hash: i64,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ShareMember>,
    pub target: BTreeMap<String, Assignment>,
    pub state_partitions: StatePartitions,
}

/// When InitializeShareGroupState was last sent for each topic of a group. Not stored:
/// topics loaded as initializing have no time, so they are asked for again at once.
pub type InitializingSince = HashMap<Uuid, i64>;

impl InitializeRequest {
    /// Notes that this request is sent at `now_ms`.
    pub fn note_sent(&self, since: &mut InitializingSince, now_ms: i64) {
        for id in self.topics.keys() {
            since.insert(*id, now_ms);
        }
    }
}

impl ShareGroup {
    /// Kafka's share group states.
    pub fn state_name(&self) -> &'static str {
        match self.members.is_empty() {
            true => "Empty",
            false => "Stable",
        }
    }

    /// Every topic the group's members subscribe to.
    pub fn subscribed_topics(&self) -> BTreeSet<&str> {
        self.members
            .values()
            .flat_map(|m| m.subscribed.iter().map(String::as_str))
            .collect()
    }
}

/// Kafka keeps a hash of the subscribed topics' metadata in the group epoch record and
/// moves the epoch when it changes. This is skua's: FNV-1a over each subscribed topic's
/// name, id and partition count in name order (0 for none). Only equality matters; a
/// Kafka coordinator reading skua's records would compute its own and rebalance once.
pub fn metadata_hash<'a>(topics: impl IntoIterator<Item = &'a str>, image: &TopicImage) -> i64 {
    let present: BTreeSet<&str> = topics
        .into_iter()
        .filter(|t| image.partitions(t).is_some())
        .collect();
    if present.is_empty() {
        return 0;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for t in present {
        feed(t.as_bytes());
        feed(&[0]);
        if let Some(id) = image.topic_id(t) {
            feed(id.as_bytes());
        }
        feed(&image.partitions(t).unwrap_or(0).to_be_bytes());
    }
    h as i64
}
