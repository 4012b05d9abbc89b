//! Kafka's `BrokerTopicMetrics`, per topic: bytes and records appended and bytes read,
//! apart for client and replication traffic. `ReplicaManager` marks them, for every
//! origin of an append (client, coordinator, transaction marker, replication) and of a
//! fetch (consumer, follower).

use prometheus::{IntCounter, IntCounterVec, Opts, Registry};

use super::register;

/// The counter vectors, one series per topic.
pub struct BrokerTopicMetrics {
    bytes_in: IntCounterVec,
    messages_in: IntCounterVec,
    bytes_out: IntCounterVec,
    replication_bytes_in: IntCounterVec,
    replication_bytes_out: IntCounterVec,
}

/// One topic's counters, resolved once (when a partition of the topic is hosted) and
/// kept on the partition, so a request marks them without a lookup.
#[derive(Clone)]
pub struct TopicCounters {
    /// Bytes appended as leader (clients, coordinators, markers): `BytesInPerSec`.
    pub bytes_in: IntCounter,
    /// Records appended as leader: `MessagesInPerSec`.
    pub messages_in: IntCounter,
    /// Record bytes returned to consumers: `BytesOutPerSec`.
    pub bytes_out: IntCounter,
    /// Bytes appended as follower: `ReplicationBytesInPerSec`.
    pub replication_bytes_in: IntCounter,
    /// Record bytes returned to followers: `ReplicationBytesOutPerSec`.
    pub replication_bytes_out: IntCounter,
}

impl TopicCounters {
    /// Counters in no registry, for a partition made outside a broker (tests, tools).
    pub fn unregistered() -> TopicCounters {
        let counter = |name: &str| {
            IntCounter::new(name, "unregistered").expect("a constant, valid metric name")
        };
        TopicCounters {
            bytes_in: counter("bytes_in"),
            messages_in: counter("messages_in"),
            bytes_out: counter("bytes_out"),
            replication_bytes_in: counter("replication_bytes_in"),
            replication_bytes_out: counter("replication_bytes_out"),
        }
    }
}

impl BrokerTopicMetrics {
    pub(super) fn register(registry: &Registry) -> BrokerTopicMetrics {
        let vec = |name: &str, help: &str| {
            let opts = Opts::new(
                format!("kafka_server_brokertopicmetrics_{name}_total"),
                help,
            );
            let vec = IntCounterVec::new(opts, &["topic"]).expect("constant, valid names");
            register(registry, vec)
        };
        BrokerTopicMetrics {
            bytes_in: vec("bytesin", "Bytes appended by clients and coordinators"),
            messages_in: vec("messagesin", "Records appended by clients and coordinators"),
            bytes_out: vec("bytesout", "Record bytes fetched by consumers"),
            replication_bytes_in: vec("replicationbytesin", "Bytes appended as follower"),
            replication_bytes_out: vec("replicationbytesout", "Record bytes fetched by followers"),
        }
    }

    /// The counters of `topic` (created at first use).
    pub fn for_topic(&self, topic: &str) -> TopicCounters {
        let labels = [topic];
        TopicCounters {
            bytes_in: self.bytes_in.with_label_values(&labels),
            messages_in: self.messages_in.with_label_values(&labels),
            bytes_out: self.bytes_out.with_label_values(&labels),
            replication_bytes_in: self.replication_bytes_in.with_label_values(&labels),
            replication_bytes_out: self.replication_bytes_out.with_label_values(&labels),
        }
    }

    /// Drops a deleted topic's series (Kafka's `removeMetrics`); partitions still holding
    /// its handles count into handles no longer exported.
    pub fn remove_topic(&self, topic: &str) {
        let labels = [topic];
        for vec in [
            &self.bytes_in,
            &self.messages_in,
            &self.bytes_out,
            &self.replication_bytes_in,
            &self.replication_bytes_out,
        ] {
            // Absent when no partition of the topic was hosted here.
            let _ = vec.remove_label_values(&labels);
        }
    }
}
