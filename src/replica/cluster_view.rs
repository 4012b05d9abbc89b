//! What the replica layer knows of the other brokers, from the metadata it follows: each
//! live broker's address (where a follower fetches from its leader), the active
//! controller (where a leader sends its ISR changes), and this broker's own epoch (which
//! its fetches and ISR changes carry, so a restarted broker's old requests are fenced).

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};

use parking_lot::RwLock;

use crate::controller::image::MetadataImage;
use crate::controller::BrokerInfo;

pub struct ClusterView {
    local_id: i32,
    brokers: RwLock<HashMap<i32, BrokerInfo>>,
    controller_id: AtomicI32,
    /// Set again at every registration in ZooKeeper mode (a new session after an expiry
    /// registers with a new epoch), so ISR changes never carry a stale one.
    broker_epoch: AtomicI64,
}

impl ClusterView {
    pub fn new(local_id: i32) -> Self {
        ClusterView {
            local_id,
            brokers: RwLock::new(HashMap::new()),
            controller_id: AtomicI32::new(-1),
            broker_epoch: AtomicI64::new(-1),
        }
    }

    pub fn local_id(&self) -> i32 {
        self.local_id
    }

    /// Takes the live brokers, the controller and this broker's epoch from `image`. A
    /// metadata image that names no brokers (a broker alone) leaves what is known.
    pub fn update(&self, image: &MetadataImage) {
        if !image.brokers().is_empty() {
            *self.brokers.write() = image.brokers().iter().map(|b| (b.id, b.clone())).collect();
            self.controller_id
                .store(image.controller_id(), Ordering::Release);
        }
        if let Some(epoch) = image.broker_epoch(self.local_id) {
            self.set_broker_epoch(epoch);
        }
    }

    /// Sets the live brokers and the controller directly (tests, and a metadata source
    /// that is not an image).
    pub fn set_brokers(&self, brokers: Vec<BrokerInfo>, controller_id: i32) {
        *self.brokers.write() = brokers.into_iter().map(|b| (b.id, b)).collect();
        self.controller_id.store(controller_id, Ordering::Release);
    }

    /// This broker's epoch as the controller registered it (ZooKeeper mode: the czxid
    /// of its `/brokers/ids` znode).
    pub fn set_broker_epoch(&self, epoch: i64) {
        self.broker_epoch.store(epoch, Ordering::Release);
    }

    pub fn broker_epoch(&self) -> i64 {
        self.broker_epoch.load(Ordering::Acquire)
    }

    pub fn controller_id(&self) -> i32 {
        self.controller_id.load(Ordering::Acquire)
    }

    /// Where broker `id` listens, if it is live and its host resolves.
    pub fn address(&self, id: i32) -> Option<SocketAddr> {
        let broker = self.brokers.read().get(&id).cloned()?;
        let port = u16::try_from(broker.port).ok()?;
        if let Ok(ip) = broker.host.parse::<std::net::IpAddr>() {
            return Some(SocketAddr::new(ip, port));
        }
        (broker.host.as_str(), port).to_socket_addrs().ok()?.next()
    }

    /// The broker as metadata describes it (KIP-951's current-leader endpoint).
    pub fn broker(&self, id: i32) -> Option<BrokerInfo> {
        self.brokers.read().get(&id).cloned()
    }
}
