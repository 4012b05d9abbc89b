//! The controller's topics as KIP-848 groups see them: partition counts for the
//! assignor, every name for regex subscriptions, and ids for the records that store
//! assignments by topic id.

use uuid::Uuid;

use super::consumer::TopicView;
use crate::controller::Controller;

pub struct ControllerTopics<'a>(pub &'a dyn Controller);

impl TopicView for ControllerTopics<'_> {
    fn partitions(&self, topic: &str) -> Option<i32> {
        self.0.topic(topic).map(|t| t.partitions.len() as i32)
    }

    fn names(&self) -> Vec<String> {
        // Kafka resolves regexes against every topic, internal ones included.
        self.0.topics().iter().map(|t| t.name.clone()).collect()
    }

    fn topic_id(&self, topic: &str) -> Option<Uuid> {
        self.0.topic(topic).map(|t| t.topic_id)
    }

    fn topic_name(&self, id: Uuid) -> Option<String> {
        self.0.topic_by_id(id).map(|t| t.name.clone())
    }
}
