//! What the replica layer knows of the other brokers, from the metadata it follows: each
//! live broker's address (where a follower fetches from its leader), the active
//! controller (where a leader sends its ISR changes), this broker's own epoch (which
//! its fetches and ISR changes carry, so a restarted broker's old requests are fenced),
//! and in a KRaft cluster each broker's registration (which replicas may join an ISR).

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
    /// [`NO_DOUBT`], or the broker epoch this broker had when its leaderships came in
    /// doubt (see [`ClusterView::doubt_leaderships`]).
    doubt_since_epoch: AtomicI64,
    /// Each registered broker, when the metadata is a KRaft log (a ZooKeeper-mode image
    /// registers none: brokers are znodes there, and the map stays empty).
    registrations: RwLock<HashMap<i32, Registration>>,
}

/// A broker's registration as the metadata log shows it: what a KRaft leader checks
/// before it proposes the broker for an ISR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registration {
    pub epoch: i64,
    pub fenced: bool,
    pub in_controlled_shutdown: bool,
}

/// `doubt_since_epoch` when this broker's leaderships are what its metadata says.
const NO_DOUBT: i64 = i64::MIN;

impl ClusterView {
    pub fn new(local_id: i32) -> Self {
        ClusterView {
            local_id,
            brokers: RwLock::new(HashMap::new()),
            controller_id: AtomicI32::new(-1),
            broker_epoch: AtomicI64::new(-1),
            doubt_since_epoch: AtomicI64::new(NO_DOUBT),
            registrations: RwLock::new(HashMap::new()),
        }
    }

    pub fn local_id(&self) -> i32 {
        self.local_id
    }

    /// Takes the live brokers, the controller, this broker's epoch and the registrations
    /// from `image`. A metadata image that names no brokers (a broker alone) leaves what
    /// is known.
    pub fn update(&self, image: &MetadataImage) {
        if !image.brokers().is_empty() {
            *self.brokers.write() = image.brokers().iter().map(|b| (b.id, b.clone())).collect();
            self.controller_id
                .store(image.controller_id(), Ordering::Release);
        }
        if let Some(epoch) = image.broker_epoch(self.local_id) {
            self.set_broker_epoch(epoch);
        }
        // Like the brokers: an image registering none (ZooKeeper mode, or a delta applied
        // alone) leaves what is known.
        if image.registered_brokers().next().is_none() {
            return;
        }
        let registrations = image
            .registered_brokers()
            .filter_map(|id| {
                let r = image.registration(id)?;
                Some((
                    id,
                    Registration {
                        epoch: r.epoch,
                        fenced: r.fenced,
                        in_controlled_shutdown: r.in_controlled_shutdown,
                    },
                ))
            })
            .collect();
        *self.registrations.write() = registrations;
    }

    /// Sets the brokers' registrations directly (tests, and a metadata source that is
    /// not an image).
    pub fn set_registrations(&self, registrations: HashMap<i32, Registration>) {
        *self.registrations.write() = registrations;
    }

    /// Whether the metadata is a KRaft log's: its ISR proposals name each member with its
    /// broker epoch (KIP-903) and only eligible replicas join.
    pub fn is_kraft(&self) -> bool {
        !self.registrations.read().is_empty()
    }

    /// Whether a leader may propose `replica_id`, whose fetches carried `fetch_epoch`
    /// (-1: none, or a Fetch before v15), for an ISR (Kafka's `isReplicaIsrEligible`).
    /// In a KRaft cluster: registered, neither fenced nor in controlled shutdown, and
    /// fetching at its registration's epoch (a fetch from before a restart is not the
    /// broker the controller knows now). In ZooKeeper mode the controller alone judges.
    pub fn isr_eligible(&self, replica_id: i32, fetch_epoch: i64) -> bool {
        let registrations = self.registrations.read();
        if registrations.is_empty() {
            return true;
        }
        registrations.get(&replica_id).is_some_and(|r| {
            !r.fenced && !r.in_controlled_shutdown && (fetch_epoch == -1 || fetch_epoch == r.epoch)
        })
    }

    /// Whether a leader's high watermark waits for `replica_id`, outside the ISR but caught
    /// up, to join it (Kafka's `isReplicaIsrEligible` as `shouldWaitForReplicaToJoinIsr`
    /// asks it): in a KRaft cluster [`ClusterView::isr_eligible`]; in ZooKeeper mode, as
    /// Kafka 3.9's, whether the metadata lists the broker alive (a broker that stopped is
    /// not waited for once the controller said so).
    pub fn may_join_isr(&self, replica_id: i32, fetch_epoch: i64) -> bool {
        if self.is_kraft() {
            return self.isr_eligible(replica_id, fetch_epoch);
        }
        let brokers = self.brokers.read();
        brokers.is_empty() || brokers.contains_key(&replica_id)
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

    /// ZooKeeper mode: this broker's session is gone at the servers (cut off from them
    /// past its session timeout, or told it expired). The controller has seen it die and
    /// moved its leaderships, and cannot tell it so: what this broker's metadata says it
    /// leads is in doubt until the controller's first LeaderAndIsr to a newer
    /// registration ([`ClusterView::heard_from_controller`]). Coordinators answer
    /// NOT_COORDINATOR meanwhile: a coordinator serving from state another broker has
    /// since moved on from answers from the past (a transaction verified against the
    /// stale state of its old coordinator is INVALID_TXN_STATE, fatal to the producer).
    pub fn doubt_leaderships(&self) {
        let epoch = self.broker_epoch();
        if self.doubt_since_epoch.swap(epoch, Ordering::AcqRel) == NO_DOUBT {
            tracing::warn!(
                broker_epoch = epoch,
                "ZooKeeper session lost: coordinators answer NOT_COORDINATOR until the controller speaks to this broker's next registration"
            );
        }
    }

    /// The session survived its disconnection: the controller never saw this broker
    /// die, and its leaderships stand.
    pub fn session_survived(&self) {
        if self.doubt_since_epoch.swap(NO_DOUBT, Ordering::AcqRel) != NO_DOUBT {
            tracing::info!("ZooKeeper session survived: this broker's leaderships stand");
        }
    }

    /// A LeaderAndIsr was taken, sent to the registration of `request_broker_epoch`:
    /// once that registration is newer than the one whose session was lost, the
    /// controller has said what this broker leads now, and the doubt is over.
    pub fn heard_from_controller(&self, request_broker_epoch: i64) {
        let since = self.doubt_since_epoch.load(Ordering::Acquire);
        if since != NO_DOUBT
            && request_broker_epoch > since
            && self
                .doubt_since_epoch
                .compare_exchange(since, NO_DOUBT, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            tracing::info!(
                broker_epoch = request_broker_epoch,
                "the controller spoke to this broker's new registration: coordinators serve again"
            );
        }
    }

    /// KRaft: the broker's lifecycle lost its lease (no heartbeat answered within
    /// `broker.session.timeout.ms`, or an answer saying it is fenced), so the controllers
    /// may have fenced it and moved its leaderships; the lifecycle logged why. As after a
    /// lost ZooKeeper session, coordinators answer NOT_COORDINATOR until
    /// [`ClusterView::lease_regained`].
    pub fn lease_lost(&self) {
        self.doubt_since_epoch
            .store(self.broker_epoch(), Ordering::Release);
    }

    /// KRaft: a heartbeat answer shows this broker unfenced. The controllers unfence a
    /// broker only once its heartbeat's metadata offset reached what they committed, so
    /// the metadata this broker follows names the leaders they chose: the doubt is over.
    pub fn lease_regained(&self) {
        self.doubt_since_epoch.store(NO_DOUBT, Ordering::Release);
    }

    /// Whether this broker's leaderships are in doubt ([`ClusterView::doubt_leaderships`]).
    pub fn leaderships_in_doubt(&self) -> bool {
        self.doubt_since_epoch.load(Ordering::Acquire) != NO_DOUBT
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
