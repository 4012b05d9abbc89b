//! The topics as the group coordinator sees them: partition counts for the assignor,
//! every name for regex subscriptions, and ids for the records that store assignments
//! by topic id.
//!
//! A [`TopicImage`] is an immutable snapshot with a version that changes whenever a
//! topic is created, deleted or grows; groups resolve their subscriptions again only
//! when it does. [`ControllerTopics`] follows the metadata deltas and builds a new image
//! only when a delta changes a topic's name, id or partition count, so a heartbeat takes
//! the current image without looking at the topics at all.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use parking_lot::RwLock;
use uuid::Uuid;

use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener, TopicDelta};
use crate::controller::image::MetadataImage;

#[derive(Debug, Default)]
pub struct TopicImage {
    version: u64,
    /// Name → (id, partition count), in name order.
    by_name: BTreeMap<String, (Uuid, i32)>,
    by_id: HashMap<Uuid, String>,
}

impl TopicImage {
    /// An image of `(name, id, partition count)`; its version is derived from them.
    pub fn new(topics: impl IntoIterator<Item = (String, Uuid, i32)>) -> Self {
        let by_name: BTreeMap<String, (Uuid, i32)> = topics
            .into_iter()
            .map(|(name, id, n)| (name, (id, n)))
            .collect();
        let by_id = by_name
            .iter()
            .map(|(name, (id, _))| (*id, name.clone()))
            .collect();
        let version = fingerprint(by_name.iter().map(|(n, (id, p))| (n.as_str(), *id, *p)));
        TopicImage {
            version,
            by_name,
            by_id,
        }
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    /// A topic's partition count, None when it does not exist.
    pub fn partitions(&self, topic: &str) -> Option<i32> {
        self.by_name.get(topic).map(|(_, n)| *n)
    }

    pub fn topic_id(&self, topic: &str) -> Option<Uuid> {
        self.by_name.get(topic).map(|(id, _)| *id)
    }

    /// The name of the topic with this id, None when it no longer exists.
    pub fn topic_name(&self, id: Uuid) -> Option<&str> {
        self.by_id.get(&id).map(String::as_str)
    }

    /// Every topic name in order, internal topics included (Kafka resolves regexes
    /// against all of them).
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

/// A hash of every topic's name, id and partition count.
fn fingerprint<'a>(topics: impl Iterator<Item = (&'a str, Uuid, i32)>) -> u64 {
    let mut h = DefaultHasher::new();
    for (name, id, n) in topics {
        name.hash(&mut h);
        id.hash(&mut h);
        n.hash(&mut h);
    }
    h.finish()
}

/// Where the coordinator gets its image of the topics.
pub trait TopicSource: Send + Sync + 'static {
    fn image(&self) -> Arc<TopicImage>;
}

/// The controller's topics, as its deltas change them.
#[derive(Default)]
pub struct ControllerTopics {
    current: RwLock<Arc<TopicImage>>,
}

impl ControllerTopics {
    /// Empty until subscribed to the controller, which hands it the whole image first.
    pub fn new() -> Arc<ControllerTopics> {
        Arc::new(ControllerTopics::default())
    }
}

impl MetadataListener for ControllerTopics {
    fn on_delta(&self, image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
        let current = self.current.read().clone();
        let reshaped = delta.topics.iter().any(|(name, change)| match change {
            TopicDelta::Removed(_) => current.topic_id(name).is_some(),
            TopicDelta::Changed(t) => {
                current.topic_id(name) != Some(t.topic_id)
                    || current.partitions(name) != Some(t.partitions.len() as i32)
            }
        });
        if reshaped {
            let topics = image
                .topics()
                .map(|t| (t.name.clone(), t.topic_id, t.partitions.len() as i32));
            *self.current.write() = Arc::new(TopicImage::new(topics));
        }
        Vec::new()
    }
}

impl TopicSource for ControllerTopics {
    fn image(&self) -> Arc<TopicImage> {
        self.current.read().clone()
    }
}

/// A fixed image.
impl TopicSource for Arc<TopicImage> {
    fn image(&self) -> Arc<TopicImage> {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::records::{MetadataRecord, PartitionChangeRecord, PartitionRecord};
    use uuid::Uuid;

    fn partition(topic: u128, p: i32) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            partition_id: p,
            topic_id: Uuid::from_u128(topic),
            replicas: vec![1],
            isr: vec![1],
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader: 1,
            leader_recovery_state: 0,
            leader_epoch: 0,
            partition_epoch: 0,
            directories: vec![],
            eligible_leader_replicas: vec![],
            last_known_elr: vec![],
        })
    }

    /// Replays `records` onto `image` and hands their delta to `topics`.
    fn apply(topics: &ControllerTopics, image: &mut MetadataImage, records: &[MetadataRecord]) {
        let changes: Vec<_> = records.iter().map(|r| image.replay(r).unwrap()).collect();
        topics.on_delta(image, &MetadataDelta::from_changes(&changes, image));
    }

    #[test]
    fn a_new_image_only_when_topics_change_shape() {
        let topics = ControllerTopics::new();
        let mut image = MetadataImage::default();
        let topic = MetadataRecord::Topic {
            name: "t".into(),
            topic_id: Uuid::from_u128(1),
        };
        apply(&topics, &mut image, &[topic, partition(1, 0)]);
        let first = topics.image();
        assert_eq!(first.partitions("t"), Some(1));
        assert!(Arc::ptr_eq(&first, &topics.image()), "reads build nothing");

        // Leadership and config changes leave the image (and its version) as it was.
        let leader = MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 0,
            topic_id: Uuid::from_u128(1),
            leader: 1,
            leader_recovery_state: -1,
            ..Default::default()
        });
        let config = MetadataRecord::Config {
            resource_type: crate::controller::records::CONFIG_RESOURCE_TOPIC,
            resource_name: "t".into(),
            name: "retention.ms".into(),
            value: Some("1".into()),
        };
        apply(&topics, &mut image, &[leader, config]);
        assert!(Arc::ptr_eq(&first, &topics.image()));

        // A partition more is a new version.
        apply(&topics, &mut image, &[partition(1, 1)]);
        let grown = topics.image();
        assert_eq!(grown.partitions("t"), Some(2));
        assert_ne!(grown.version(), first.version());

        // Deleted, then created again under a new id: a new version each time.
        apply(
            &topics,
            &mut image,
            &[MetadataRecord::RemoveTopic {
                topic_id: Uuid::from_u128(1),
            }],
        );
        assert_eq!(topics.image().partitions("t"), None);
        let again = MetadataRecord::Topic {
            name: "t".into(),
            topic_id: Uuid::from_u128(2),
        };
        apply(&topics, &mut image, &[again, partition(2, 0)]);
        assert_eq!(topics.image().topic_id("t"), Some(Uuid::from_u128(2)));
    }
}
