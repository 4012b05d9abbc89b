//! KIP-951: a Produce (v10+) or Fetch (v16+) answered NOT_LEADER_OR_FOLLOWER (Fetch also
//! FENCED_LEADER_EPOCH) names the partition's current leader and epoch, and the response
//! carries that leader's endpoint, so the client moves at once instead of refreshing its
//! metadata first. Both come from the metadata this broker has, as in Kafka.

use std::collections::BTreeMap;

use crate::broker::Broker;
use crate::controller::BrokerInfo;

/// The leaders named in one response, for its `node_endpoints`.
#[derive(Default)]
pub struct LeaderHints {
    named: BTreeMap<i32, BrokerInfo>,
}

impl LeaderHints {
    /// The current leader and leader epoch of a partition as the metadata says
    /// (`(-1, -1)` when unknown); a live leader's endpoint is kept for the response.
    pub fn current_leader(&mut self, broker: &Broker, topic: &str, partition: i32) -> (i32, i32) {
        let state = broker.controller.topic(topic).and_then(|t| {
            t.partitions
                .iter()
                .find(|p| p.partition == partition)
                .map(|p| (p.state.leader, p.state.leader_epoch))
        });
        let Some((leader, epoch)) = state.filter(|(leader, _)| *leader >= 0) else {
            return (-1, -1);
        };
        if let std::collections::btree_map::Entry::Vacant(slot) = self.named.entry(leader) {
            let live = broker
                .controller
                .brokers()
                .into_iter()
                .find(|b| b.id == leader);
            if let Some(b) = live {
                slot.insert(b);
            }
        }
        (leader, epoch)
    }

    /// The endpoints of the leaders named, by broker id.
    pub fn endpoints(self) -> impl Iterator<Item = BrokerInfo> {
        self.named.into_values()
    }
}
