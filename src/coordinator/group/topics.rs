//! The topics as the group coordinator sees them: partition counts for the assignor,
//! every name for regex subscriptions, and ids for the records that store assignments
//! by topic id.
//!
//! A [`TopicImage`] is an immutable snapshot with a version that changes whenever a
//! topic is created, deleted or grows; groups resolve their subscriptions again only
//! when it does. [`ControllerTopics`] takes it from the controller, reusing the last
//! image while the topics are unchanged.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use parking_lot::Mutex;
use uuid::Uuid;

use crate::controller::{Controller, TopicInfo};

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

/// The controller's topics. Without a metadata version to compare, each call lists the
/// topics and hashes them (no allocation per topic); the image is rebuilt only when
/// that hash differs from the last one.
pub struct ControllerTopics {
    controller: Arc<dyn Controller>,
    last: Mutex<Arc<TopicImage>>,
}

impl ControllerTopics {
    pub fn new(controller: Arc<dyn Controller>) -> Self {
        ControllerTopics {
            controller,
            last: Mutex::new(Arc::new(TopicImage::default())),
        }
    }
}

impl TopicSource for ControllerTopics {
    fn image(&self) -> Arc<TopicImage> {
        let mut topics: Vec<Arc<TopicInfo>> = self.controller.topics();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        let version = fingerprint(
            topics
                .iter()
                .map(|t| (t.name.as_str(), t.topic_id, t.partitions.len() as i32)),
        );
        let mut last = self.last.lock();
        if last.version != version || (last.is_empty() && !topics.is_empty()) {
            *last =
                Arc::new(TopicImage::new(topics.iter().map(|t| {
                    (t.name.clone(), t.topic_id, t.partitions.len() as i32)
                })));
        }
        last.clone()
    }
}

/// A fixed image.
impl TopicSource for Arc<TopicImage> {
    fn image(&self) -> Arc<TopicImage> {
        self.clone()
    }
}
