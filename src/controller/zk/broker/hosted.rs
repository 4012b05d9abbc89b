//! The replica manager as the ZooKeeper broker side sees it: the logs on disk and the
//! replicas' fetchers, behind [`HostedReplicas`] so the broker side is tested without them.

use uuid::Uuid;

use super::HostedReplicas;
use crate::log::TopicPartition;
use crate::replica::ReplicaManager;

impl HostedReplicas for ReplicaManager {
    fn log_topic_id(&self, topic: &str, partition: i32) -> Option<Uuid> {
        self.logs
            .topic_id_of(&TopicPartition::new(topic, partition))
    }

    fn is_offline(&self, topic: &str, partition: i32) -> bool {
        self.logs
            .get_log(&TopicPartition::new(topic, partition))
            .is_some_and(|log| log.is_offline())
    }

    fn stop_replica(&self, topic: &str, partition: i32) {
        ReplicaManager::stop_replica(self, &TopicPartition::new(topic, partition));
    }

    fn set_broker_epoch(&self, epoch: i64) {
        self.logs.set_broker_epoch(epoch);
        self.cluster.set_broker_epoch(epoch);
    }

    fn doubt_leaderships(&self) {
        self.cluster.doubt_leaderships();
    }

    fn session_survived(&self) {
        self.cluster.session_survived();
    }

    fn heard_from_controller(&self, request_broker_epoch: i64) {
        self.cluster.heard_from_controller(request_broker_epoch);
    }
}
