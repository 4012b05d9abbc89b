//! What the active controller knows (Kafka's `ControllerContext`): live brokers and
//! their epochs, every topic's id and assignment, every partition's leadership, and the
//! state machines' states. Filled from ZooKeeper on election and kept current by the
//! event loop, the only owner; nothing else mutates it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::leader_and_isr::{LeaderAndIsr, EPOCH_DURING_DELETE};
use super::reassignment::ReplicaAssignment;
use super::states::{PartitionState, ReplicaState};
use crate::zk::znodes::{BrokerRegistration, EndPoint, TopicAssignment};

/// The controller names partitions as the log layer does: one type for one concept.
pub use crate::log::TopicPartition;

/// A registered broker: its `/brokers/ids/<id>` znode and its epoch (the znode's czxid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveBroker {
    pub id: i32,
    pub epoch: i64,
    pub endpoints: Vec<EndPoint>,
    pub rack: Option<String>,
}

impl LiveBroker {
    pub fn from_registration(id: i32, epoch: i64, r: &BrokerRegistration) -> Option<Self> {
        Some(LiveBroker {
            id,
            epoch,
            endpoints: r.parsed_endpoints()?,
            rack: r.rack.clone(),
        })
    }

    /// The endpoint of `listener` (the inter-broker listener).
    pub fn endpoint(&self, listener: &str) -> Option<&EndPoint> {
        self.endpoints.iter().find(|e| e.listener == listener)
    }
}

/// The leadership of one partition and the controller epoch that wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    pub leader_and_isr: LeaderAndIsr,
    pub controller_epoch: i32,
}

#[derive(Default)]
pub struct ControllerContext {
    pub epoch: i32,
    /// The `/controller_epoch` znode's version: every write checks it.
    pub epoch_zk_version: i32,
    pub live_brokers: BTreeMap<i32, LiveBroker>,
    pub shutting_down: BTreeSet<i32>,
    pub topic_ids: BTreeMap<String, Uuid>,
    /// Config overrides from `/config/topics/<topic>`, as read when the topic was loaded.
    pub topic_configs: BTreeMap<String, BTreeMap<String, String>>,
    /// Topic → partition → replicas, in assignment order.
    pub assignments: BTreeMap<String, BTreeMap<i32, Vec<i32>>>,
    pub leadership: BTreeMap<TopicPartition, Leadership>,
    pub partition_states: HashMap<TopicPartition, PartitionState>,
    pub replica_states: HashMap<(TopicPartition, i32), ReplicaState>,
    pub topics_to_delete: BTreeSet<String>,
    pub topics_ineligible_for_deletion: BTreeSet<String>,
    /// Topics whose partitions were already taken offline for deletion.
    pub topics_with_deletion_started: BTreeSet<String>,
    /// Replicas a broker reported KAFKA_STORAGE_ERROR for in LeaderAndIsr: offline
    /// although the broker lives.
    pub offline_replicas: BTreeMap<i32, BTreeSet<TopicPartition>>,
    /// Replicas being added and removed (AR, RR) of partitions that are moving; the
    /// assignment above is then the full set RS.
    pub moving_replicas: BTreeMap<TopicPartition, (Vec<i32>, Vec<i32>)>,
    /// Kafka's `partitionsBeingReassigned`: reassignments started and not yet finished.
    pub partitions_being_reassigned: BTreeSet<TopicPartition>,
}

impl ControllerContext {
    pub fn replicas(&self, tp: &TopicPartition) -> &[i32] {
        self.assignments
            .get(&tp.topic)
            .and_then(|t| t.get(&tp.partition))
            .map_or(&[], Vec::as_slice)
    }

    /// The partition's assignment with its replicas being added and removed.
    pub fn full_assignment(&self, tp: &TopicPartition) -> ReplicaAssignment {
        let (adding, removing) = self.moving_replicas.get(tp).cloned().unwrap_or_default();
        ReplicaAssignment {
            replicas: self.replicas(tp).to_vec(),
            adding,
            removing,
        }
    }

    pub fn set_full_assignment(&mut self, tp: &TopicPartition, a: ReplicaAssignment) {
        if a.is_being_reassigned() {
            self.moving_replicas
                .insert(tp.clone(), (a.adding, a.removing));
        } else {
            self.moving_replicas.remove(tp);
        }
        self.assignments
            .entry(tp.topic.clone())
            .or_default()
            .insert(tp.partition, a.replicas);
    }

    pub fn adding_replicas(&self, tp: &TopicPartition) -> &[i32] {
        self.moving_replicas
            .get(tp)
            .map_or(&[], |(a, _)| a.as_slice())
    }

    pub fn removing_replicas(&self, tp: &TopicPartition) -> &[i32] {
        self.moving_replicas
            .get(tp)
            .map_or(&[], |(_, r)| r.as_slice())
    }

    /// `/brokers/topics/<topic>` as the context has it, as Kafka's `TopicZNode.encode`
    /// writes it: adding and removing replicas only for partitions that have some.
    pub fn topic_znode(&self, topic: &str) -> TopicAssignment {
        let partitions = self.assignments.get(topic).cloned().unwrap_or_default();
        let id = self.topic_ids.get(topic).copied().unwrap_or(Uuid::nil());
        let mut z = TopicAssignment::new(crate::log::uuid_to_kafka_string(id), partitions);
        for (tp, (adding, removing)) in self
            .moving_replicas
            .iter()
            .filter(|(tp, _)| tp.topic == topic)
        {
            if !adding.is_empty() {
                z.adding_replicas.0.insert(tp.partition, adding.clone());
            }
            if !removing.is_empty() {
                z.removing_replicas.0.insert(tp.partition, removing.clone());
            }
        }
        z
    }

    pub fn all_partitions(&self) -> Vec<TopicPartition> {
        self.assignments
            .iter()
            .flat_map(|(t, ps)| ps.keys().map(move |&p| TopicPartition::new(t.clone(), p)))
            .collect()
    }

    pub fn partitions_of(&self, topic: &str) -> Vec<TopicPartition> {
        self.assignments
            .get(topic)
            .map(|ps| ps.keys().map(|&p| TopicPartition::new(topic, p)).collect())
            .unwrap_or_default()
    }

    pub fn live_broker_ids(&self) -> BTreeSet<i32> {
        self.live_brokers
            .keys()
            .copied()
            .filter(|b| !self.shutting_down.contains(b))
            .collect()
    }

    pub fn live_or_shutting_down_ids(&self) -> BTreeSet<i32> {
        self.live_brokers.keys().copied().collect()
    }

    pub fn is_replica_online(
        &self,
        broker: i32,
        tp: &TopicPartition,
        include_shutting_down: bool,
    ) -> bool {
        self.live_brokers.contains_key(&broker)
            && (include_shutting_down || !self.shutting_down.contains(&broker))
            && !self
                .offline_replicas
                .get(&broker)
                .is_some_and(|s| s.contains(tp))
    }

    /// The replicas of `tp` that are online (shutting-down brokers excluded).
    pub fn live_replicas(&self, tp: &TopicPartition) -> BTreeSet<i32> {
        self.replicas(tp)
            .iter()
            .copied()
            .filter(|&r| self.is_replica_online(r, tp, false))
            .collect()
    }

    /// (partition, replica) for every replica hosted on `brokers`.
    pub fn replicas_on_brokers(&self, brokers: &BTreeSet<i32>) -> Vec<(TopicPartition, i32)> {
        let mut out = Vec::new();
        for (topic, parts) in &self.assignments {
            for (&p, replicas) in parts {
                for &r in replicas.iter().filter(|r| brokers.contains(r)) {
                    out.push((TopicPartition::new(topic.clone(), p), r));
                }
            }
        }
        out
    }

    pub fn partitions_on_broker(&self, broker: i32) -> Vec<TopicPartition> {
        self.replicas_on_brokers(&BTreeSet::from([broker]))
            .into_iter()
            .map(|(tp, _)| tp)
            .collect()
    }

    /// Partitions whose leader is offline (or that have none), outside topics being deleted.
    pub fn partitions_with_offline_leader(&self) -> Vec<TopicPartition> {
        self.leadership
            .iter()
            .filter(|(tp, l)| {
                !self.is_topic_queued_for_deletion(&tp.topic)
                    && !self.is_replica_online(l.leader_and_isr.leader, tp, false)
            })
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    pub fn partition_leaders_on(&self, broker: i32) -> Vec<TopicPartition> {
        self.leadership
            .iter()
            .filter(|(_, l)| l.leader_and_isr.leader == broker)
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    pub fn is_topic_queued_for_deletion(&self, topic: &str) -> bool {
        self.topics_to_delete.contains(topic)
    }

    /// The leader epoch a StopReplica carries: -2 while its topic is queued for deletion.
    pub fn leader_epoch_for_stop_replica(&self, tp: &TopicPartition) -> i32 {
        if self.is_topic_queued_for_deletion(&tp.topic) {
            return EPOCH_DURING_DELETE;
        }
        self.leadership
            .get(tp)
            .map_or(-1, |l| l.leader_and_isr.leader_epoch)
    }

    pub fn partition_state(&self, tp: &TopicPartition) -> PartitionState {
        self.partition_states
            .get(tp)
            .copied()
            .unwrap_or(PartitionState::NonExistent)
    }

    pub fn replica_state(&self, tp: &TopicPartition, replica: i32) -> ReplicaState {
        self.replica_states
            .get(&(tp.clone(), replica))
            .copied()
            .unwrap_or(ReplicaState::NonExistent)
    }

    /// Removes a deleted topic everywhere.
    pub fn remove_topic(&mut self, topic: &str) {
        self.topic_ids.remove(topic);
        self.topic_configs.remove(topic);
        self.assignments.remove(topic);
        self.leadership.retain(|tp, _| tp.topic != topic);
        self.partition_states.retain(|tp, _| tp.topic != topic);
        self.replica_states.retain(|(tp, _), _| tp.topic != topic);
        self.topics_to_delete.remove(topic);
        self.topics_ineligible_for_deletion.remove(topic);
        self.topics_with_deletion_started.remove(topic);
        for set in self.offline_replicas.values_mut() {
            set.retain(|tp| tp.topic != topic);
        }
        self.moving_replicas.retain(|tp, _| tp.topic != topic);
        self.partitions_being_reassigned
            .retain(|tp| tp.topic != topic);
    }

    /// (partition, replica) of every replica of `topic`.
    pub fn replicas_of_topic(&self, topic: &str) -> Vec<(TopicPartition, i32)> {
        self.partitions_of(topic)
            .into_iter()
            .flat_map(|tp| {
                let rs = self.replicas(&tp).to_vec();
                rs.into_iter().map(move |r| (tp.clone(), r))
            })
            .collect()
    }

    pub fn replicas_in_state(
        &self,
        topic: &str,
        state: ReplicaState,
    ) -> Vec<(TopicPartition, i32)> {
        self.replicas_of_topic(topic)
            .into_iter()
            .filter(|(tp, r)| self.replica_state(tp, *r) == state)
            .collect()
    }

    pub fn topic_name(&self, id: Uuid) -> Option<&str> {
        self.topic_ids
            .iter()
            .find(|(_, &v)| v == id)
            .map(|(k, _)| k.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker(id: i32) -> LiveBroker {
        LiveBroker {
            id,
            epoch: 100 + id as i64,
            endpoints: vec![],
            rack: None,
        }
    }

    #[test]
    fn online_replicas_exclude_dead_shutting_down_and_offline_dirs() {
        let mut c = ControllerContext::default();
        for id in [1, 2, 3] {
            c.live_brokers.insert(id, broker(id));
        }
        c.assignments
            .insert("t".into(), BTreeMap::from([(0, vec![1, 2, 3, 4])]));
        let tp = TopicPartition::new("t", 0);
        c.shutting_down.insert(2);
        c.offline_replicas.entry(3).or_default().insert(tp.clone());
        assert_eq!(c.live_replicas(&tp), BTreeSet::from([1]));
        assert!(c.is_replica_online(2, &tp, true));
        assert!(!c.is_replica_online(4, &tp, true));
        c.topics_to_delete.insert("t".into());
        assert_eq!(c.leader_epoch_for_stop_replica(&tp), EPOCH_DURING_DELETE);
        c.remove_topic("t");
        assert!(c.all_partitions().is_empty());
    }

    #[test]
    fn a_moving_partition_is_written_as_kafka_writes_it() {
        let mut c = ControllerContext::default();
        let id = crate::log::kafka_string_to_uuid("M32DnqaWSm6LhWOydQsQGA").unwrap();
        c.topic_ids.insert("t".into(), id);
        c.assignments.insert(
            "t".into(),
            BTreeMap::from([(0, vec![1, 2]), (1, vec![2, 1])]),
        );
        let tp = TopicPartition::new("t", 0);
        let moving = c.full_assignment(&tp).reassign_to(&[2, 3]);
        c.set_full_assignment(&tp, moving);
        assert_eq!(c.replicas(&tp), &[2, 3, 1]);
        let json = String::from_utf8(crate::zk::znodes::encode(&c.topic_znode("t"))).unwrap();
        assert_eq!(
            json,
            r#"{"partitions":{"0":[2,3,1],"1":[2,1]},"topic_id":"M32DnqaWSm6LhWOydQsQGA","adding_replicas":{"0":[3]},"removing_replicas":{"0":[1]},"version":3}"#
        );
        // Done: nothing adding or removing, as Kafka leaves it.
        c.set_full_assignment(&tp, ReplicaAssignment::settled(vec![2, 3]));
        let json = String::from_utf8(crate::zk::znodes::encode(&c.topic_znode("t"))).unwrap();
        assert!(
            json.contains(r#""adding_replicas":{},"removing_replicas":{}"#),
            "{json}"
        );
    }
}
