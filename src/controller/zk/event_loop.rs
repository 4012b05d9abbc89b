//! The controller's event loop (Kafka's `KafkaController` with its `ControllerEventManager`):
//! one task processes events one at a time: ZooKeeper watches firing, brokers'
//! answers, and the broker → controller APIs. It owns the controller context, so
//! nothing else changes it, and every decision it writes to ZooKeeper is fenced by the
//! controller epoch. Every cluster member runs one: it competes for `/controller`,
//! keeps the member's view of live brokers and of who controls, and does the
//! controller's work only while it holds the election.

use std::collections::BTreeSet;
use std::sync::Arc;

use kafka_protocol::messages::{
    AlterPartitionRequest, AlterPartitionResponse, LeaderAndIsrResponse, StopReplicaResponse,
};
use tokio::sync::{mpsc, oneshot};

use super::channel::ChannelManager;
use super::context::{ControllerContext, TopicPartition};
use super::partition_reassignment::{OngoingReassignments, ReassignmentResults};
use super::replica_election::{ElectionResults, ElectionType, Trigger};
use super::requests::RequestBatch;
use super::store::{self, Fence};
use super::{election, Settings, Shared};
use crate::zk::session::{Watch, WatchEvent, ZkError, ZkSession};
use crate::zk::znodes::paths;

pub type ZkResult<T> = Result<T, ZkError>;

/// What the event loop acts on. Watch events carry the generation (election term of
/// this member) that armed them, so a watch left from an earlier term is dropped.
pub enum Event {
    /// `/controller` was deleted, or the member just started: try to be elected.
    Elect,
    /// `/controller` was created or changed: someone else may have won.
    ControllerChanged,
    BrokerChange,
    /// A live broker's registration changed (its endpoints, say).
    BrokerModification(u64, i32),
    TopicChange(u64),
    PartitionModifications(u64, String),
    TopicDeletion(u64),
    /// `/log_dir_event_notification` has new children: brokers with an offline log dir.
    LogDirEventNotification(u64),
    /// `/isr_change_notification` has new children: ISR changes leaders wrote themselves.
    IsrChangeNotification(u64),
    LeaderAndIsrResponse {
        broker: i32,
        response: LeaderAndIsrResponse,
    },
    StopReplicaResponse {
        broker: i32,
        response: StopReplicaResponse,
        deleting: BTreeSet<TopicPartition>,
    },
    AlterPartition {
        request: AlterPartitionRequest,
        version: i16,
        reply: oneshot::Sender<AlterPartitionResponse>,
    },
    ControlledShutdown {
        broker_id: i32,
        broker_epoch: i64,
        reply: oneshot::Sender<Result<Vec<TopicPartition>, kafka_protocol::error::ResponseError>>,
    },
    AllocateProducerIds {
        broker_id: i32,
        broker_epoch: i64,
        reply: oneshot::Sender<Result<(i64, i32), kafka_protocol::error::ResponseError>>,
    },
    /// ElectLeaders: the partitions and the kind of election.
    ReplicaLeaderElection {
        partitions: BTreeSet<TopicPartition>,
        election: ElectionType,
        reply: oneshot::Sender<ElectionResults>,
    },
    /// `/admin/preferred_replica_election` was created or changed.
    PreferredReplicaElection(u64),
    /// The periodic leader imbalance check is due.
    AutoLeaderRebalance(u64),
    /// AlterPartitionReassignments: a target per partition, None to cancel.
    AlterPartitionReassignments {
        reassignments: std::collections::BTreeMap<TopicPartition, Option<Vec<i32>>>,
        reply: oneshot::Sender<Result<ReassignmentResults, kafka_protocol::error::ResponseError>>,
    },
    /// ListPartitionReassignments: the named partitions, or all.
    ListPartitionReassignments {
        partitions: Option<BTreeSet<TopicPartition>>,
        reply: oneshot::Sender<Result<OngoingReassignments, kafka_protocol::error::ResponseError>>,
    },
    /// `/admin/reassign_partitions` changed; `created` when it was just written.
    ZkPartitionReassignment {
        generation: u64,
        created: bool,
    },
}

impl Event {
    /// The term of the controller that armed the watch (or timer) this event comes
    /// from; None for the election's events, broker changes, and requests.
    fn generation(&self) -> Option<u64> {
        match self {
            Event::TopicChange(g)
            | Event::PartitionModifications(g, _)
            | Event::TopicDeletion(g)
            | Event::LogDirEventNotification(g)
            | Event::IsrChangeNotification(g)
            | Event::BrokerModification(g, _)
            | Event::PreferredReplicaElection(g)
            | Event::AutoLeaderRebalance(g) => Some(*g),
            Event::ZkPartitionReassignment { generation, .. } => Some(*generation),
            _ => None,
        }
    }
}

pub struct ControllerLoop {
    pub(super) s: Arc<ZkSession>,
    pub(super) settings: Arc<Settings>,
    pub(super) shared: Arc<Shared>,
    pub(super) tx: mpsc::UnboundedSender<Event>,
    rx: mpsc::UnboundedReceiver<Event>,
    pub(super) ctx: ControllerContext,
    /// Set while this member is the elected controller.
    pub(super) fence: Option<Fence>,
    /// Bumped on every election won or lost; watches of older terms are ignored.
    pub(super) generation: u64,
    pub(super) channels: ChannelManager,
    pub(super) batch: RequestBatch,
    /// Watches left and not yet fired, so each znode has one watcher (a second read
    /// with a watch would make every change arrive twice).
    pub(super) armed: Armed,
}

/// Which watches are armed.
#[derive(Default)]
pub struct Armed {
    pub controller: bool,
    pub brokers: bool,
    pub topics: bool,
    pub deletions: bool,
    pub log_dir_events: bool,
    pub isr_change_events: bool,
    pub topic: std::collections::HashSet<String>,
    pub broker: std::collections::HashSet<i32>,
    pub preferred_election: bool,
    pub reassign_partitions: bool,
}

impl ControllerLoop {
    pub fn new(s: Arc<ZkSession>, settings: Arc<Settings>, shared: Arc<Shared>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let channels = ChannelManager::new(
            settings.broker_id,
            settings.inter_broker_listener.clone(),
            settings.controller_socket_timeout,
            settings.outbound_tls.clone(),
            settings.outbound_sasl.clone(),
            tx.clone(),
            shared.outbox.clone(),
        );
        ControllerLoop {
            s,
            settings,
            shared,
            tx,
            rx,
            ctx: ControllerContext::default(),
            fence: None,
            generation: 0,
            channels,
            batch: RequestBatch::default(),
            armed: Armed::default(),
        }
    }

    pub fn sender(&self) -> mpsc::UnboundedSender<Event> {
        self.tx.clone()
    }

    /// Runs until the session expires (or another terminal ZooKeeper error); the caller
    /// then starts over on a new session. Resigns on the way out.
    pub async fn run(mut self) -> ZkError {
        if let Err(e) = self.start().await {
            return e;
        }
        while let Some(event) = self.rx.recv().await {
            if let Some(end) = self.handle(event).await {
                return end;
            }
        }
        ZkError::Other("controller event queue closed".into())
    }

    /// What the loop does before its first event: queue an election, read the brokers.
    pub async fn start(&mut self) -> ZkResult<()> {
        let _ = self.tx.send(Event::Elect);
        self.refresh_brokers().await
    }

    /// The next queued event, if any (for callers that drive the loop themselves).
    pub fn try_next_event(&mut self) -> Option<Event> {
        self.rx.try_recv().ok()
    }

    /// Processes one event and publishes the outcome; Some(error) when the session is
    /// over and the loop must end.
    pub async fn handle(&mut self, event: Event) -> Option<ZkError> {
        if let Err(e) = self.process(event).await {
            match e {
                ZkError::SessionExpired => {
                    self.on_resignation();
                    self.publish();
                    return Some(e);
                }
                ZkError::Fenced { .. } => {
                    tracing::warn!(
                        "controller epoch moved on: another controller was elected; resigning"
                    );
                    self.on_resignation();
                    let _ = self.tx.send(Event::ControllerChanged);
                }
                e if self.is_active() => {
                    tracing::error!(error = %e, "controller failed on a ZooKeeper error; resigning so another broker takes over");
                    self.trigger_controller_move().await;
                }
                e => tracing::warn!(error = %e, "ZooKeeper error"),
            }
        }
        self.publish();
        None
    }

    /// The controller epoch this member holds, None when it is not the controller.
    pub fn controller_epoch(&self) -> Option<i32> {
        self.fence.map(|f| f.controller_epoch)
    }

    pub fn is_active(&self) -> bool {
        self.fence.is_some()
    }

    pub(super) fn fence(&self) -> ZkResult<Fence> {
        self.fence
            .ok_or_else(|| ZkError::Other("not the controller".into()))
    }

    async fn process(&mut self, event: Event) -> ZkResult<()> {
        self.disarm_fired_watch(&event);
        let current = self.is_active() && event.generation() == Some(self.generation);
        match event {
            Event::Elect => {
                self.maybe_resign().await?;
                self.elect().await
            }
            Event::ControllerChanged => self.maybe_resign().await,
            Event::BrokerChange => self.process_broker_change().await,
            e if e.generation().is_some() => match current {
                true => self.process_watch(e).await,
                // A watch of an earlier term, or one fired after resigning.
                false => Ok(()),
            },
            e => self.process_request(e).await,
        }
    }

    /// A fired watch is gone: the processing of its event leaves a new one.
    fn disarm_fired_watch(&mut self, event: &Event) {
        if let Event::Elect | Event::ControllerChanged = event {
            self.armed.controller = false;
        }
        if let Event::BrokerChange = event {
            self.armed.brokers = false;
        }
        if event.generation() != Some(self.generation) {
            return;
        }
        let a = &mut self.armed;
        match event {
            Event::TopicChange(_) => a.topics = false,
            Event::TopicDeletion(_) => a.deletions = false,
            Event::LogDirEventNotification(_) => a.log_dir_events = false,
            Event::IsrChangeNotification(_) => a.isr_change_events = false,
            Event::PartitionModifications(_, t) => {
                a.topic.remove(t);
            }
            Event::BrokerModification(_, id) => {
                a.broker.remove(id);
            }
            Event::PreferredReplicaElection(_) => a.preferred_election = false,
            Event::ZkPartitionReassignment { .. } => a.reassign_partitions = false,
            _ => {}
        }
    }

    /// A watch of this term fired (or its timer came due) while this member controls.
    async fn process_watch(&mut self, event: Event) -> ZkResult<()> {
        match event {
            Event::TopicChange(_) => self.process_topic_change().await,
            Event::PartitionModifications(_, topic) => {
                self.process_partition_modifications(&topic).await
            }
            Event::LogDirEventNotification(_) => self.process_log_dir_event_notification().await,
            Event::IsrChangeNotification(_) => self.process_isr_change_notification().await,
            Event::TopicDeletion(_) => self.process_topic_deletion().await,
            Event::BrokerModification(_, id) => self.process_broker_modification(id).await,
            Event::PreferredReplicaElection(_) => {
                self.process_preferred_replica_election_znode().await
            }
            Event::AutoLeaderRebalance(_) => self.process_auto_leader_rebalance().await,
            Event::ZkPartitionReassignment { created, .. } => self
                .process_zk_partition_reassignment(created)
                .await
                .map(|_| ()),
            _ => Ok(()),
        }
    }

    /// A broker's answer, or a request from a broker or an admin client (answered
    /// NOT_CONTROLLER by the steps themselves on a member that does not control).
    async fn process_request(&mut self, event: Event) -> ZkResult<()> {
        match event {
            Event::AlterPartitionReassignments {
                reassignments,
                reply,
            } => {
                let result = self
                    .process_api_partition_reassignment(reassignments)
                    .await?;
                let _ = reply.send(result);
            }
            Event::ListPartitionReassignments { partitions, reply } => {
                let _ = reply.send(self.process_list_partition_reassignments(partitions));
            }
            Event::ReplicaLeaderElection {
                partitions,
                election,
                reply,
            } => {
                let results = self
                    .process_replica_leader_election(partitions, election, Trigger::AdminClient)
                    .await?;
                let _ = reply.send(results);
            }
            Event::LeaderAndIsrResponse { broker, response } => {
                self.process_leader_and_isr_response(broker, response)
                    .await?
            }
            Event::StopReplicaResponse {
                broker,
                response,
                deleting,
            } => {
                self.process_stop_replica_response(broker, response, deleting)
                    .await?
            }
            Event::AlterPartition {
                request,
                version,
                reply,
            } => self.alter_partition(request, version, reply).await?,
            Event::ControlledShutdown {
                broker_id,
                broker_epoch,
                reply,
            } => {
                let result = self
                    .process_controlled_shutdown(broker_id, broker_epoch)
                    .await?;
                let _ = reply.send(result);
            }
            Event::AllocateProducerIds {
                broker_id,
                broker_epoch,
                reply,
            } => {
                let result = self
                    .process_allocate_producer_ids(broker_id, broker_epoch)
                    .await?;
                let _ = reply.send(result);
            }
            _ => {}
        }
        Ok(())
    }

    /// Sends what the state changes since the last flush decided.
    pub(super) fn flush(&mut self) {
        let requests = self.batch.build(
            &self.ctx,
            self.settings.broker_id,
            &self.settings.inter_broker_listener,
            self.settings.inter_broker_protocol,
        );
        for (broker, request) in requests {
            self.channels.send(broker, request);
        }
    }

    /// Publishes what handlers and the `Controller` adapter read.
    fn publish(&self) {
        self.shared.publish(self);
    }

    // ---- election ----

    async fn elect(&mut self) -> ZkResult<()> {
        let controller = self.watch_controller().await?;
        if controller.is_some() {
            return Ok(());
        }
        let now_ms = self.shared.clock.now_ms();
        match election::try_elect(&self.s, self.settings.broker_id, now_ms).await? {
            Some(fence) => {
                tracing::info!(
                    broker_id = self.settings.broker_id,
                    epoch = fence.controller_epoch,
                    epoch_zk_version = fence.epoch_zk_version,
                    "elected controller"
                );
                self.shared.set_controller_id(self.settings.broker_id);
                self.fence = Some(fence);
                self.generation += 1;
                self.on_controller_failover().await
            }
            None => {
                self.watch_controller().await?;
                Ok(())
            }
        }
    }

    /// Reads `/controller` and leaves a watch on it (unless one is armed); returns the
    /// controller's id.
    async fn watch_controller(&mut self) -> ZkResult<Option<i32>> {
        if self.armed.controller {
            let id = election::read_controller_id(&self.s).await?;
            self.shared.set_controller_id(id.unwrap_or(-1));
            return Ok(id);
        }
        let (found, watch) = self.s.get_and_watch(paths::CONTROLLER).await?;
        let id = found.and_then(|(data, _)| {
            crate::zk::znodes::decode::<crate::zk::znodes::ControllerRegistration>(&data)
                .ok()
                .map(|c| c.brokerid)
        });
        self.shared.set_controller_id(id.unwrap_or(-1));
        self.armed.controller = true;
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let event = match watch.changed().await {
                WatchEvent::Deleted(_) => Event::Elect,
                WatchEvent::Session(_) => return,
                _ => Event::ControllerChanged,
            };
            let _ = tx.send(event);
        });
        Ok(id)
    }

    /// Reads `/controller` and watches it again (a fired watch is gone: without a new one
    /// the next controller's death would go unnoticed and nobody would be elected).
    async fn maybe_resign(&mut self) -> ZkResult<()> {
        let was_active = self.is_active();
        let id = self.watch_controller().await?;
        if was_active && id != Some(self.settings.broker_id) {
            tracing::warn!(controller = ?id, "another broker is the controller now; resigning");
            self.on_resignation();
        }
        Ok(())
    }

    /// Gives up the controllership: no more requests, no more watches acted on.
    pub(super) fn on_resignation(&mut self) {
        if self.fence.take().is_some() {
            tracing::info!(
                broker_id = self.settings.broker_id,
                "resigned as controller"
            );
        }
        self.generation += 1;
        self.channels.clear();
        self.batch = RequestBatch::default();
        self.ctx = ControllerContext::default();
        // The controller's watches belong to the old generation and will be ignored.
        self.armed.topics = false;
        self.armed.deletions = false;
        self.armed.log_dir_events = false;
        self.armed.isr_change_events = false;
        self.armed.topic.clear();
        self.armed.broker.clear();
        self.armed.preferred_election = false;
        self.armed.reassign_partitions = false;
    }

    /// AlterPartition answered first, as Kafka does; then an ISR that now holds every
    /// target replica finishes a reassignment.
    async fn alter_partition(
        &mut self,
        request: AlterPartitionRequest,
        version: i16,
        reply: oneshot::Sender<AlterPartitionResponse>,
    ) -> ZkResult<()> {
        let response = self.process_alter_partition(request, version).await?;
        let changed = self.partitions_changed(&response);
        let _ = reply.send(response);
        self.maybe_complete_reassignments(&changed).await
    }

    /// The partitions an AlterPartition answer reports changed (or confirmed).
    fn partitions_changed(&self, response: &AlterPartitionResponse) -> Vec<TopicPartition> {
        response
            .topics
            .iter()
            .filter_map(|t| {
                let name = match t.topic_name.0.is_empty() {
                    true => self.ctx.topic_name(t.topic_id)?.to_string(),
                    false => t.topic_name.0.to_string(),
                };
                Some((name, t))
            })
            .flat_map(|(name, t)| {
                t.partitions
                    .iter()
                    .filter(|p| p.error_code == 0)
                    .map(move |p| TopicPartition::new(name.clone(), p.partition_index))
            })
            .collect()
    }

    /// Resigns and deletes `/controller` (if still ours) so that a healthy broker is
    /// elected (Kafka's `triggerControllerMove`).
    async fn trigger_controller_move(&mut self) {
        let fence = self.fence;
        self.on_resignation();
        if let Some(fence) = fence {
            if let Err(e) = election::resign(&self.s, fence).await {
                tracing::warn!(error = %e, "could not delete /controller after resigning");
            }
        }
    }

    // ---- watches ----

    /// Spawns a task that turns a watch into an event (nothing when the session ends).
    pub(super) fn on_watch(&self, watch: Watch, event: Event) {
        let tx = self.tx.clone();
        tokio::spawn(async move {
            if let WatchEvent::Session(_) = watch.changed().await {
                return;
            }
            let _ = tx.send(event);
        });
    }

    /// Live brokers, re-read with a new watch; shared with the adapter on every member.
    pub(super) async fn read_brokers_and_watch(
        &mut self,
    ) -> ZkResult<std::collections::BTreeMap<i32, super::context::LiveBroker>> {
        if !self.armed.brokers {
            let (_, watch) = self.s.children_and_watch(paths::BROKER_IDS).await?;
            self.on_watch(watch, Event::BrokerChange);
            self.armed.brokers = true;
        }
        let brokers = store::read_brokers(&self.s).await?;
        self.shared.set_brokers(&brokers);
        Ok(brokers)
    }

    async fn refresh_brokers(&mut self) -> ZkResult<()> {
        self.read_brokers_and_watch().await.map(|_| ())
    }
}
