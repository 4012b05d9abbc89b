//! The broker's replicas placed on its log dir in the cluster's metadata: a Kafka 4
//! broker's `AssignmentsManager` sends AssignReplicasToDirs for every replica it hosts in
//! a dir other than the one the partition's record names (`directories`), and the
//! controller only elects a leader whose replica's dir is one its broker registered
//! online. A broker that comes back on a freshly formatted dir (a new `directory.id`) or
//! takes over another broker's replicas has them all on a dir the metadata does not name
//! until it says so; without it, a preferred leader election answers
//! PREFERRED_LEADER_NOT_AVAILABLE for each of its partitions.
//!
//! skua places every replica of a broker with one log dir in that dir. With several log
//! dirs the metadata's placement is left as it is (which dir holds a partition is the log
//! manager's, not read here yet).

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

/// The broker's replicas (topic id, partition) whose dir in `image` is not `dir`.
pub fn misplaced(image: &MetadataImage, broker_id: i32, dir: Uuid) -> Vec<(Uuid, i32)> {
    let mut out = Vec::new();
    for topic in image.topics() {
        for p in &topic.partitions {
            let a = &p.assignment;
            let Some(i) = a.replicas.iter().position(|r| *r == broker_id) else {
                continue;
            };
            // Before directory assignment (metadata.version < 3.7-IV2) there are none.
            if a.directories.get(i).is_some_and(|d| *d != dir) {
                out.push((topic.topic_id, p.partition));
            }
        }
    }
    out
}

/// AssignReplicasToDirs v0: `replicas` placed on `dir`, by topic.
pub fn request(
    broker_id: i32,
    broker_epoch: i64,
    dir: Uuid,
    replicas: &[(Uuid, i32)],
) -> AssignReplicasToDirsRequest {
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
    AssignReplicasToDirsRequest::default()
        .with_broker_id(broker_id.into())
        .with_broker_epoch(broker_epoch)
        .with_directories(vec![DirectoryData::default()
            .with_id(dir)
            .with_topics(topics)])
}

/// Every image the controller publishes, the broker's replicas on another dir than `dir`
/// are assigned to it; ends with the controller.
pub fn spawn(controller: &Arc<KraftController>, dir: Uuid) {
    let weak: Weak<KraftController> = Arc::downgrade(controller);
    let mut images = controller.images();
    tokio::spawn(async move {
        loop {
            let Some(c) = weak.upgrade() else { return };
            let image = images.borrow_and_update().clone();
            let replicas = misplaced(&image, c.broker_id(), dir);
            let epoch = c.broker_epoch();
            let sent = if replicas.is_empty() || epoch < 0 {
                true
            } else {
                assign(&c, dir, epoch, &replicas).await
            };
            drop(c);
            if sent {
                if images.changed().await.is_err() {
                    return;
                }
            } else {
                tokio::time::sleep(RETRY).await;
            }
        }
    });
}

/// Sends one assignment; false when it is to be tried again.
async fn assign(c: &KraftController, dir: Uuid, epoch: i64, replicas: &[(Uuid, i32)]) -> bool {
    let request = request(c.broker_id(), epoch, dir, replicas);
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
    tracing::info!(
        replicas = replicas.len(),
        refused,
        dir = %dir,
        "assigned the broker's replicas to its log dir"
    );
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
        assert_eq!(misplaced(&image, 2, NEW), vec![(T, 0), (T, 3)]);
        assert!(misplaced(&image, 2, OLD).contains(&(T, 1)));
    }

    /// The request groups the partitions under their topic, in one directory.
    #[test]
    fn the_request_names_the_dir_and_each_topic_once() {
        let u = Uuid::from_u128(0x8);
        let r = request(2, 42, NEW, &[(T, 0), (T, 3), (u, 1)]);
        assert_eq!((r.broker_id.0, r.broker_epoch), (2, 42));
        assert_eq!(r.directories.len(), 1);
        assert_eq!(r.directories[0].id, NEW);
        let topics: Vec<(Uuid, Vec<i32>)> = r.directories[0]
            .topics
            .iter()
            .map(|t| {
                (
                    t.topic_id,
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            })
            .collect();
        assert_eq!(topics, vec![(T, vec![0, 3]), (u, vec![1])]);
    }
}
