//! Two in-process brokers, 1 and 2, replicating one topic created on broker 1. Roles come
//! from metadata deltas handed to each broker's replica manager, as the cluster's
//! controller would announce them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use skua::controller::delta::{MetadataDelta, MetadataListener, TopicDelta};
use skua::controller::image::MetadataImage;
use skua::controller::{BrokerInfo, LeaderAndIsr, PartitionAssignment, PartitionInfo, TopicInfo};
use skua::replica::Partition;
use uuid::Uuid;

use super::TestBroker;

/// Keep it bound while its brokers run (moving them out of it is fine): its data dirs go
/// with it.
pub struct TwoBrokers {
    pub b1: TestBroker,
    pub b2: TestBroker,
    /// The topic's id and the leader epoch broker 1 created it at.
    pub topic_id: Uuid,
    pub epoch: i32,
    /// Removed after the brokers stop (fields drop in order).
    _dirs: [tempfile::TempDir; 2],
}

impl TwoBrokers {
    /// Brokers 1 and 2 whose fetchers back off 50 ms and long-poll at most `fetch_wait_ms`,
    /// with `topic` (`partitions` partitions) created on broker 1.
    pub async fn start(fetch_wait_ms: &str, topic: &str, partitions: i32) -> TwoBrokers {
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let fast = [
            ("replica.fetch.backoff.ms", "50"),
            ("replica.fetch.wait.max.ms", fetch_wait_ms),
        ];
        let b1 =
            TestBroker::start(dirs[0].path(), &[&[("broker.id", "1")][..], &fast].concat()).await;
        let b2 =
            TestBroker::start(dirs[1].path(), &[&[("broker.id", "2")][..], &fast].concat()).await;
        let mut c1 = b1.client().await;
        assert_eq!(c1.create_topic(topic, partitions).await, 0);
        let topic_id = b1.broker.controller.topic(topic).unwrap().topic_id;
        let epoch = b1
            .broker
            .replicas
            .partition(topic, 0)
            .unwrap()
            .leader_epoch();
        TwoBrokers {
            b1,
            b2,
            topic_id,
            epoch,
            _dirs: dirs,
        }
    }

    /// Tells both brokers that broker 1 is at `b1_addr` (its own address or a proxy's)
    /// and broker 2 at its own, with broker 1 the controller.
    pub fn introduce(&self, b1_addr: SocketAddr) {
        for b in [&self.b1, &self.b2] {
            b.broker
                .replicas
                .cluster
                .set_brokers(vec![info(1, b1_addr), info(2, self.b2.addr)], 1);
        }
    }
}

pub fn info(id: i32, addr: SocketAddr) -> BrokerInfo {
    BrokerInfo {
        id,
        host: addr.ip().to_string(),
        port: i32::from(addr.port()),
        rack: None,
    }
}

/// `leader` at `epoch` (also the partition epoch) with `isr` in sync.
pub fn leader_and_isr(leader: i32, epoch: i32, isr: &[i32]) -> LeaderAndIsr {
    LeaderAndIsr::elected(leader, epoch, isr)
}

/// Partition `partition` on `replicas` in `state`.
pub fn partition_info(partition: i32, replicas: &[i32], state: LeaderAndIsr) -> PartitionInfo {
    PartitionInfo {
        partition,
        assignment: PartitionAssignment {
            replicas: replicas.to_vec(),
            directories: vec![Uuid::nil(); replicas.len()],
        },
        state,
    }
}

/// Hands broker `b` the metadata delta that changes `topic`, as its controller would.
pub fn announce(b: &TestBroker, topic: TopicInfo) {
    let name = topic.name.clone();
    let delta = MetadataDelta {
        topics: BTreeMap::from([(name, TopicDelta::Changed(Arc::new(topic)))]),
        ..Default::default()
    };
    let failed = b
        .broker
        .replicas
        .on_delta(&MetadataImage::default(), &delta);
    assert!(failed.is_empty(), "{failed:?}");
}

/// Waits (30 s at most) until `cond` holds.
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The committed records of `p`, as a consumer reads them.
pub fn committed(p: &Partition) -> Bytes {
    p.read(0, 1 << 20, true).unwrap().records
}
