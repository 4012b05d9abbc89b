//! The broker's replicas placed on their log dirs in the cluster's metadata (Kafka 4's
//! `AssignmentsManager`, KIP-858): a Kafka 4 broker sends AssignReplicasToDirs for every
//! replica whose log is in a dir other than the one the partition's record names
//! (`directories`), and the controller only elects a leader whose replica's dir is one its
//! broker registered online. A broker with several log dirs is given new replicas
//! unassigned (the controller cannot know where the broker will put them) and says where
//! it put each; one that comes back on a freshly formatted dir (a new `directory.id`) or
//! takes over another broker's replicas has them all on a dir the metadata does not name
//! until it says so. Without it, a preferred leader election answers
//! PREFERRED_LEADER_NOT_AVAILABLE for each of those partitions.
//!
//! Where a replica is comes from the log manager (`LogManager::placement_of`): the
//! `directory.id` of the dir its current log is in, and nothing for a replica on a dir gone
//! offline (the heartbeat reports the dir) or one moving to another dir (AlterReplicaLogDirs:
//! the move has its new dir assigned itself before it switches, [`MoveAssigner`], and a
//! move abandoned afterwards is put back here). Checked at each new image (published once
//! the replica manager created the logs it names) and every `RECHECK`.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use kafka_protocol::messages::assign_replicas_to_dirs_request::{
    DirectoryData, PartitionData, TopicData,
};
use kafka_protocol::messages::{AssignReplicasToDirsRequest, AssignReplicasToDirsResponse};
use uuid::Uuid;

use crate::controller::image::MetadataImage;
use crate::controller::Controller;

use super::backend::KraftController;

/// How long a refused or unanswered assignment waits before it is tried again.
const RETRY: Duration = Duration::from_secs(1);
/// How often the placement is checked without a new image (moves between dirs).
const RECHECK: Duration = Duration::from_secs(5);
/// Replicas per request, as Kafka's `AssignmentsManager` bounds them; the rest go in the
/// next request.
const MAX_PER_REQUEST: usize = 2250;

/// The `directory.id` of the log dir holding this broker's log of (topic, partition);
/// `None` when there is no log of it here (yet).
pub type DirOf = Arc<dyn Fn(&str, i32) -> Option<Uuid> + Send + Sync>;

/// Replicas (topic id, partition) by the dir to assign them to.
pub type Placement = BTreeMap<Uuid, Vec<(Uuid, i32)>>;

/// The broker's replicas whose log is in another dir than `image` names, by the dir that
/// holds them, at most `limit` in all.
pub fn misplaced(
    image: &MetadataImage,
    broker_id: i32,
    dir_of: &dyn Fn(&str, i32) -> Option<Uuid>,
    limit: usize,
) -> Placement {
    let mut out = Placement::new();
    let mut count = 0;
    for topic in image.topics() {
        for p in &topic.partitions {
            let a = &p.assignment;
            let Some(i) = a.replicas.iter().position(|r| *r == broker_id) else {
                continue;
            };
            // Before directory assignment (metadata.version < 3.7-IV2) there are none.
            let Some(named) = a.directories.get(i) else {
                continue;
            };
            let Some(dir) = dir_of(&topic.name, p.partition) else {
                continue;
            };
            if *named != dir {
                if count == limit {
                    return out;
                }
                count += 1;
                out.entry(dir)
                    .or_default()
                    .push((topic.topic_id, p.partition));
            }
        }
    }
    out
}

/// AssignReplicasToDirs v0: each dir with its replicas, by topic.
pub fn request(
    broker_id: i32,
    broker_epoch: i64,
    placement: &Placement,
) -> AssignReplicasToDirsRequest {
    let directories = placement
        .iter()
        .map(|(dir, replicas)| {
            let mut topics: Vec<TopicData> = Vec::new();
            for (topic_id, partition) in replicas {
                let part = PartitionData::default().with_partition_index(*partition);
                match topics.last_mut() {
                    Some(t) if t.topic_id == *topic_id => t.partitions.push(part),
                    _ => topics.push(
                        TopicData::default()
                            .with_topic_id(*topic_id)
                            .with_partitions(vec![part]),
                    ),
                }
            }
            DirectoryData::default().with_id(*dir).with_topics(topics)
        })
        .collect();
    AssignReplicasToDirsRequest::default()
        .with_broker_id(broker_id.into())
        .with_broker_epoch(broker_epoch)
        .with_directories(directories)
}

/// At every image the controller publishes, and every `RECHECK`, the broker's replicas
/// the metadata names on another dir than the one `dir_of` finds them in are assigned to
/// theirs; ends with the controller.
pub fn spawn(controller: &Arc<KraftController>, dir_of: DirOf) {
    let weak: Weak<KraftController> = Arc::downgrade(controller);
    let mut images = controller.images();
    tokio::spawn(async move {
        loop {
            let Some(c) = weak.upgrade() else { return };
            let image = images.borrow_and_update().clone();
            let placement = misplaced(&image, c.broker_id(), &*dir_of, MAX_PER_REQUEST);
            let epoch = c.broker_epoch();
            let count: usize = placement.values().map(Vec::len).sum();
            let sent = if count == 0 || epoch < 0 {
                true
            } else {
                assign(&c, epoch, &placement).await
            };
            drop(c);
            if !sent {
                tokio::time::sleep(RETRY).await;
            } else if count < MAX_PER_REQUEST {
                tokio::select! {
                    changed = images.changed() => if changed.is_err() { return },
                    _ = tokio::time::sleep(RECHECK) => {}
                }
            }
        }
    });
}

/// A log dir move's new dir, assigned before the move switches
/// (`replica::log_dir_move`; Kafka's `ReplicaAlterLogDirsThread` waits for the same).
pub struct MoveAssigner(Weak<KraftController>);

impl MoveAssigner {
    pub fn new(controller: &Arc<KraftController>) -> MoveAssigner {
        MoveAssigner(Arc::downgrade(controller))
    }
}

#[async_trait::async_trait]
impl crate::replica::log_dir_move::DirAssigner for MoveAssigner {
    async fn assign(&self, topic_id: Uuid, partition: i32, dir: Uuid) -> bool {
        let Some(c) = self.0.upgrade() else {
            return false;
        };
        let epoch = c.broker_epoch();
        if epoch < 0 {
            return false;
        }
        let placement = Placement::from([(dir, vec![(topic_id, partition)])]);
        assign(&c, epoch, &placement).await
    }
}

/// Sends one assignment; false when it is to be tried again.
async fn assign(c: &KraftController, epoch: i64, placement: &Placement) -> bool {
    let request = request(c.broker_id(), epoch, placement);
    let response: AssignReplicasToDirsResponse = match c.send_to_active(request, (0, 0)).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("AssignReplicasToDirs: {}", e.message);
            return false;
        }
    };
    if response.error_code != 0 {
        tracing::warn!(
            error_code = response.error_code,
            "the controller refused AssignReplicasToDirs"
        );
        return false;
    }
    let refused = response
        .directories
        .iter()
        .flat_map(|d| &d.topics)
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, p)))
        .filter(|(_, p)| p.error_code != 0)
        .inspect(|(t, p)| {
            tracing::warn!(topic_id = %t, partition = p.partition_index, error_code = p.error_code, "the controller refused a replica's log dir")
        })
        .count();
    for (dir, replicas) in placement {
        tracing::info!(
            replicas = replicas.len(),
            dir = %dir,
            "assigned the broker's replicas to their log dir"
        );
    }
    if refused > 0 {
        tracing::warn!(refused, "some replicas were not assigned to their log dir");
    }
    refused == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::records::{MetadataRecord, PartitionRecord};

    const T: Uuid = Uuid::from_u128(0x7);
    const OLD: Uuid = Uuid::from_u128(0xD1);
    const NEW: Uuid = Uuid::from_u128(0xD2);

    fn image(partitions: &[(Vec<i32>, Vec<Uuid>)]) -> MetadataImage {
        let mut image = MetadataImage::default();
        image
            .replay(&MetadataRecord::Topic {
                name: "t".into(),
                topic_id: T,
            })
            .unwrap();
        for (i, (replicas, directories)) in partitions.iter().enumerate() {
            image
                .replay(&MetadataRecord::Partition(PartitionRecord {
                    partition_id: i as i32,
                    topic_id: T,
                    replicas: replicas.clone(),
                    isr: replicas.clone(),
                    removing_replicas: vec![],
                    adding_replicas: vec![],
                    leader: replicas[0],
                    leader_recovery_state: 0,
                    leader_epoch: 0,
                    partition_epoch: 0,
                    directories: directories.clone(),
                    eligible_leader_replicas: vec![],
                    last_known_elr: vec![],
                }))
                .unwrap();
        }
        image
    }

    /// Broker 2 came back on a new dir: its replicas named on the old one (and a
    /// partition it does not host, or hosts on the new dir already) are told apart.
    #[test]
    fn replicas_named_on_another_dir_are_misplaced() {
        let image = image(&[
            (vec![1, 2, 3], vec![OLD, OLD, OLD]),
            (vec![2, 3, 1], vec![NEW, OLD, OLD]),
            (vec![3, 1], vec![OLD, OLD]),
            (vec![3, 2], vec![OLD, Uuid::nil()]),
            (vec![2], vec![]),
        ]);
        let all_on = |dir: Uuid| move |_: &str, _: i32| Some(dir);
        assert_eq!(
            misplaced(&image, 2, &all_on(NEW), 100),
            Placement::from([(NEW, vec![(T, 0), (T, 3)])])
        );
        assert!(misplaced(&image, 2, &all_on(OLD), 100)[&OLD].contains(&(T, 1)));
        // At most `limit`.
        assert_eq!(
            misplaced(&image, 2, &all_on(NEW), 1),
            Placement::from([(NEW, vec![(T, 0)])])
        );
    }

    /// Several log dirs: each replica goes to the dir its log is in; one with no log
    /// here yet waits for it.
    #[test]
    fn each_replica_is_placed_on_the_dir_holding_its_log() {
        let unassigned = Uuid::nil();
        let image = image(&[
            (vec![2, 1], vec![unassigned, OLD]),
            (vec![1, 2], vec![OLD, unassigned]),
            (vec![2], vec![NEW]),
            (vec![2], vec![unassigned]),
        ]);
        let dir_of = |topic: &str, partition: i32| {
            assert_eq!(topic, "t");
            match partition {
                0 | 2 => Some(NEW),
                1 => Some(OLD),
                _ => None,
            }
        };
        assert_eq!(
            misplaced(&image, 2, &dir_of, 100),
            Placement::from([(OLD, vec![(T, 1)]), (NEW, vec![(T, 0)])])
        );
    }

    /// The request names each dir once, with its partitions grouped under their topic.
    #[test]
    fn the_request_names_each_dir_and_each_topic_once() {
        let u = Uuid::from_u128(0x8);
        let placement = Placement::from([(NEW, vec![(T, 0), (T, 3), (u, 1)]), (OLD, vec![(u, 2)])]);
        let r = request(2, 42, &placement);
        assert_eq!((r.broker_id.0, r.broker_epoch), (2, 42));
        type Partitions = Vec<(Uuid, Vec<i32>)>;
        let dirs: Vec<(Uuid, Partitions)> = r
            .directories
            .iter()
            .map(|d| {
                let topics = d
                    .topics
                    .iter()
                    .map(|t| {
                        (
                            t.topic_id,
                            t.partitions.iter().map(|p| p.partition_index).collect(),
                        )
                    })
                    .collect();
                (d.id, topics)
            })
            .collect();
        assert_eq!(
            dirs,
            vec![
                (OLD, vec![(u, vec![2])]),
                (NEW, vec![(T, vec![0, 3]), (u, vec![1])])
            ]
        );
        let mut buf = bytes::BytesMut::new();
        kafka_protocol::protocol::Encodable::encode(&r, &mut buf, 0).unwrap();
    }
}
