//! Runs the lifecycle, the follower and the publisher against a real controller quorum:
//! one task owns the three state machines and the metadata image, sends what they ask
//! over the outbound client (one reconnecting connection per quorum node), feeds the
//! answers back, and publishes every new image and the broker's state on watch channels.
//!
//! Registration and heartbeats go to the active controller, which in a KRaft quorum is
//! the quorum's leader: the one the follower found (its controller-listener address is
//! what Fetch responses name). Until it is known, a registration or heartbeat waits; the
//! lifecycle's registration timeout bounds that wait.
//!
//! The broker is ready to be unfenced once the controller says it caught up and the
//! metadata it applied has been published (Kafka's BrokerServer waits for the same two
//! things before `setReadyToUnfence`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{
    BrokerHeartbeatRequest, BrokerRegistrationRequest, FetchRequest, FetchSnapshotRequest,
};
use kafka_protocol::protocol::Request;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::client::{Client, ClientConfig, ClientError};
use crate::controller::delta::{MetadataDelta, TopicDelta};
use crate::controller::image::MetadataImage;

use super::follower::{self, Endpoint, Follower, FollowerConfig};
use super::lifecycle::{self, BrokerState, Lifecycle, Registration, ShutdownReason, Timing};
use super::publish::Publisher;

/// The versions sent: Fetch from 15 (the replica's id in `ReplicaState`) to 17 (its
/// directory id); the others' whole ranges.
const FETCH_VERSIONS: (i16, i16) = (15, 17);
const FETCH_SNAPSHOT_VERSIONS: (i16, i16) = (0, 1);
const REGISTRATION_VERSIONS: (i16, i16) = (0, 4);
const HEARTBEAT_VERSIONS: (i16, i16) = (0, 1);

#[derive(Clone, Debug)]
pub struct DriverConfig {
    pub registration: Registration,
    pub timing: Timing,
    pub follower: FollowerConfig,
    pub client: ClientConfig,
    /// Whether the broker says itself when it is ready to be unfenced
    /// ([`KraftBroker::ready_to_unfence`], once its logs are open); otherwise it is ready
    /// as soon as it caught up.
    pub wait_for_ready: bool,
}

/// Who is handed each published image with what changed, in order, before the broker's
/// heartbeat reports the offset it reached.
pub trait Published: Send + Sync {
    fn published(&self, image: &Arc<MetadataImage>, delta: &MetadataDelta);
}

/// What the broker's lifecycle and metadata have reached.
#[derive(Clone, Debug, PartialEq)]
pub struct Status {
    pub state: BrokerState,
    pub broker_epoch: i64,
    /// The offset of the last metadata record applied to the published image.
    pub applied_offset: i64,
    /// The quorum's leader and epoch, when known.
    pub leader: Option<(i32, i32)>,
    /// Where the active controller (the quorum's leader) is, when known.
    pub controller: Option<Endpoint>,
    /// Why the driver stopped, once it has.
    pub stopped: Option<Stopped>,
    /// The lifecycle's [`Lifecycle::leaderships_in_doubt`]: the controllers may have
    /// fenced this broker and moved its leaderships.
    pub leaderships_in_doubt: bool,
}

impl Default for Status {
    /// Before the driver starts.
    fn default() -> Status {
        Status {
            state: BrokerState::NotRunning,
            broker_epoch: -1,
            applied_offset: -1,
            leader: None,
            controller: None,
            stopped: None,
            leaderships_in_doubt: false,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stopped {
    Lifecycle(ShutdownReason),
    /// The metadata log could not be followed or applied.
    Fatal(String),
}

#[derive(Debug)]
enum Command {
    ReadyToUnfence,
    BeginControlledShutdown,
    Shutdown,
}

/// The handle the broker keeps: the published image and status, and the commands.
pub struct KraftBroker {
    pub image: watch::Receiver<Arc<MetadataImage>>,
    pub status: watch::Receiver<Status>,
    commands: mpsc::UnboundedSender<Command>,
    task: tokio::task::JoinHandle<()>,
}

impl KraftBroker {
    /// Starts registering and following the metadata log; `published` is handed every
    /// image.
    pub fn start(config: DriverConfig, published: Option<Arc<dyn Published>>) -> KraftBroker {
        let (image_tx, image) = watch::channel(Arc::new(MetadataImage::default()));
        let (status_tx, status) = watch::channel(Status::default());
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(config, published, image_tx, status_tx, commands_rx));
        KraftBroker {
            image,
            status,
            commands,
            task,
        }
    }

    /// The broker's logs are open: the next heartbeat asks to be unfenced (once caught up).
    pub fn ready_to_unfence(&self) {
        let _ = self.commands.send(Command::ReadyToUnfence);
    }

    /// Asks the controller to move this broker's leaderships away, then stops once it
    /// allows (the status shows `Stopped::Lifecycle(ControlledShutdownDone)`).
    pub fn begin_controlled_shutdown(&self) {
        let _ = self.commands.send(Command::BeginControlledShutdown);
    }

    /// Stops at once and waits for the task.
    pub async fn shutdown(self) {
        let _ = self.commands.send(Command::Shutdown);
        let _ = self.task.await;
    }
}

/// A response, fed back to the machine that asked.
enum Answer {
    Lifecycle(lifecycle::Event),
    Follower(follower::Event),
}

struct Driver {
    start: Instant,
    config: DriverConfig,
    lifecycle: Lifecycle,
    follower: Follower,
    publisher: Publisher,
    image: MetadataImage,
    clients: HashMap<(String, u16), Arc<Client>>,
    answers: mpsc::UnboundedSender<Answer>,
    /// A lifecycle request waiting for the active controller to be known.
    waiting: Option<lifecycle::Output>,
    caught_up: bool,
    /// The broker said its logs are open (always, without `wait_for_ready`).
    broker_ready: bool,
    published: Option<Arc<dyn Published>>,
    image_tx: watch::Sender<Arc<MetadataImage>>,
    status_tx: watch::Sender<Status>,
    stopped: Option<Stopped>,
}

async fn run(
    config: DriverConfig,
    published: Option<Arc<dyn Published>>,
    image_tx: watch::Sender<Arc<MetadataImage>>,
    status_tx: watch::Sender<Status>,
    mut commands: mpsc::UnboundedReceiver<Command>,
) {
    let (answers, mut answers_rx) = mpsc::unbounded_channel();
    let broker_ready = !config.wait_for_ready;
    let mut d = Driver {
        start: Instant::now(),
        lifecycle: Lifecycle::new(config.registration.clone(), config.timing),
        follower: Follower::new(config.follower.clone(), 0),
        config,
        publisher: Publisher::new(),
        image: MetadataImage::default(),
        clients: HashMap::new(),
        answers,
        waiting: None,
        caught_up: false,
        broker_ready,
        published,
        image_tx,
        status_tx,
        stopped: None,
    };
    let now = d.now_ms();
    let out = d.follower.decide(now, follower::Event::Tick);
    d.on_follower(out).await;
    let out = d.lifecycle.decide(now, lifecycle::Event::Start);
    d.on_lifecycle(out).await;
    while d.stopped.is_none() {
        d.publish_status();
        let deadline = [d.lifecycle.next_deadline(), d.follower.next_deadline()]
            .into_iter()
            .flatten()
            .min()
            .map(|ms| d.start + Duration::from_millis(ms));
        let sleep = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            answer = answers_rx.recv() => {
                let Some(answer) = answer else { break };
                let now = d.now_ms();
                match answer {
                    Answer::Lifecycle(e) => {
                        let out = d.lifecycle.decide(now, e);
                        d.on_lifecycle(out).await;
                    }
                    Answer::Follower(e) => {
                        let out = d.follower.decide(now, e);
                        d.on_follower(out).await;
                    }
                }
            }
            command = commands.recv() => {
                let now = d.now_ms();
                let event = match command {
                    Some(Command::ReadyToUnfence) => {
                        d.broker_ready = true;
                        d.maybe_ready().await;
                        continue;
                    }
                    Some(Command::BeginControlledShutdown) => lifecycle::Event::BeginControlledShutdown,
                    Some(Command::Shutdown) | None => lifecycle::Event::Shutdown,
                };
                let out = d.lifecycle.decide(now, event);
                d.on_lifecycle(out).await;
            }
            _ = sleep => {
                let now = d.now_ms();
                let out = d.follower.decide(now, follower::Event::Tick);
                d.on_follower(out).await;
                let out = d.lifecycle.decide(now, lifecycle::Event::Tick);
                d.on_lifecycle(out).await;
            }
        }
    }
    d.publish_status();
}

impl Driver {
    fn now_ms(&self) -> u64 {
        self.start.elapsed().as_millis() as u64
    }

    fn publish_status(&self) {
        let status = Status {
            state: self.lifecycle.state(),
            broker_epoch: self.lifecycle.broker_epoch(),
            applied_offset: self.publisher.last_applied_offset(),
            leader: self.follower.leader(),
            controller: self.follower.leader_endpoint(),
            stopped: self.stopped.clone(),
            leaderships_in_doubt: self.lifecycle.leaderships_in_doubt(),
        };
        self.status_tx.send_if_modified(|s| {
            let changed = *s != status;
            *s = status;
            changed
        });
    }

    async fn client(&mut self, to: &Endpoint) -> Result<Arc<Client>, ClientError> {
        let key = (to.host.clone(), to.port);
        if let Some(c) = self.clients.get(&key) {
            return Ok(c.clone());
        }
        let addr: SocketAddr = tokio::net::lookup_host((to.host.as_str(), to.port))
            .await
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| ClientError::Disconnected(format!("cannot resolve {}", to.host)))?;
        let client = Arc::new(Client::new(addr, self.config.client.clone()));
        self.clients.insert(key, client.clone());
        Ok(client)
    }

    /// Sends `request` to `to` in its own task; the answer comes back as `wrap` makes it.
    async fn send<R, F>(&mut self, to: &Endpoint, request: R, versions: (i16, i16), wrap: F)
    where
        R: Request + Send + Sync + 'static,
        R::Response: Send,
        F: FnOnce(Result<R::Response, ClientError>) -> Answer + Send + 'static,
    {
        let answers = self.answers.clone();
        match self.client(to).await {
            Ok(client) => {
                tokio::spawn(async move {
                    let result = client
                        .send_negotiated(&request, versions.0, versions.1)
                        .await
                        .map(|(_, r)| r);
                    let _ = answers.send(wrap(result));
                });
            }
            Err(e) => {
                let _ = answers.send(wrap(Err(e)));
            }
        }
    }

    async fn on_follower(&mut self, outputs: Vec<follower::Output>) {
        for output in outputs {
            match output {
                follower::Output::Fetch(to, request) => {
                    self.send::<FetchRequest, _>(&to, request, FETCH_VERSIONS, |r| {
                        Answer::Follower(follower::Event::FetchResponse(
                            r.map_err(follower_failure),
                        ))
                    })
                    .await
                }
                follower::Output::FetchSnapshot(to, request) => {
                    self.send::<FetchSnapshotRequest, _>(
                        &to,
                        request,
                        FETCH_SNAPSHOT_VERSIONS,
                        |r| {
                            Answer::Follower(follower::Event::FetchSnapshotResponse(
                                r.map_err(follower_failure),
                            ))
                        },
                    )
                    .await
                }
                follower::Output::Publish(batches) => {
                    let mut image = self.image.clone();
                    match self.publisher.apply(&mut image, &batches) {
                        Ok(changes) => {
                            let delta = MetadataDelta::from_changes(&changes, &image);
                            self.publish_image(image, delta).await
                        }
                        Err(why) => self.fatal(why),
                    }
                }
                follower::Output::LoadSnapshot {
                    end_offset,
                    batches,
                    ..
                } => match self.publisher.load_snapshot(end_offset, &batches) {
                    Ok(image) => {
                        // Everything the snapshot holds, and the topics it no longer has.
                        let mut delta = MetadataDelta::everything(&image);
                        for t in self.image.topics() {
                            if image
                                .topic(&t.name)
                                .is_none_or(|n| n.topic_id != t.topic_id)
                            {
                                delta
                                    .topics
                                    .entry(t.name.clone())
                                    .or_insert_with(|| TopicDelta::Removed(t.clone()));
                            }
                        }
                        self.publish_image(image, delta).await
                    }
                    Err(why) => self.fatal(why),
                },
                follower::Output::Leader { id, epoch } => {
                    tracing::info!(
                        leader = id,
                        epoch,
                        "following the controller quorum's leader"
                    );
                    if let Some(waiting) = self.waiting.take() {
                        self.on_lifecycle(vec![waiting]).await;
                    }
                    let now = self.now_ms();
                    let out = self
                        .lifecycle
                        .decide(now, lifecycle::Event::ControllerChanged);
                    self.on_lifecycle(out).await;
                }
                follower::Output::Fatal(why) => self.fatal(why),
            }
        }
    }

    fn fatal(&mut self, why: String) {
        tracing::error!("stopping: the metadata log cannot be followed: {why}");
        self.stopped = Some(Stopped::Fatal(why));
    }

    async fn publish_image(&mut self, image: MetadataImage, delta: MetadataDelta) {
        let shared = Arc::new(image.clone());
        self.image = image;
        if let Some(p) = &self.published {
            if !delta.is_empty() {
                p.published(&shared, &delta);
            }
        }
        self.image_tx.send_replace(shared);
        let now = self.now_ms();
        let applied = self.publisher.last_applied_offset();
        let out = self
            .lifecycle
            .decide(now, lifecycle::Event::MetadataApplied(applied));
        Box::pin(self.on_lifecycle(out)).await;
        self.maybe_ready().await;
    }

    async fn maybe_ready(&mut self) {
        if self.caught_up && self.broker_ready && self.publisher.last_applied_offset() >= 0 {
            self.caught_up = false;
            let now = self.now_ms();
            let out = self.lifecycle.decide(now, lifecycle::Event::ReadyToUnfence);
            Box::pin(self.on_lifecycle(out)).await;
        }
    }

    /// The active controller: the quorum leader the follower follows.
    fn active_controller(&self) -> Option<Endpoint> {
        self.follower.leader_endpoint()
    }

    async fn on_lifecycle(&mut self, outputs: Vec<lifecycle::Output>) {
        for output in outputs {
            match output {
                lifecycle::Output::SendRegistration(request) => {
                    let Some(to) = self.active_controller() else {
                        self.waiting = Some(lifecycle::Output::SendRegistration(request));
                        continue;
                    };
                    self.send::<BrokerRegistrationRequest, _>(
                        &to,
                        request,
                        REGISTRATION_VERSIONS,
                        |r| {
                            Answer::Lifecycle(lifecycle::Event::RegistrationResponse(
                                r.map_err(lifecycle_failure),
                            ))
                        },
                    )
                    .await
                }
                lifecycle::Output::SendHeartbeat(request) => {
                    let Some(to) = self.active_controller() else {
                        self.waiting = Some(lifecycle::Output::SendHeartbeat(request));
                        continue;
                    };
                    self.send::<BrokerHeartbeatRequest, _>(&to, request, HEARTBEAT_VERSIONS, |r| {
                        Answer::Lifecycle(lifecycle::Event::HeartbeatResponse(
                            r.map_err(lifecycle_failure),
                        ))
                    })
                    .await
                }
                // The follower finds the new leader: its next answer names it.
                lifecycle::Output::FindController => {}
                lifecycle::Output::CaughtUp => {
                    self.caught_up = true;
                    Box::pin(self.maybe_ready()).await;
                }
                lifecycle::Output::Unfenced => {
                    tracing::info!(
                        epoch = self.lifecycle.broker_epoch(),
                        "the broker is unfenced"
                    );
                }
                lifecycle::Output::ShutDown(reason) => {
                    self.stopped = Some(Stopped::Lifecycle(reason));
                }
            }
        }
    }
}

fn follower_failure(e: ClientError) -> follower::Failure {
    match e {
        ClientError::Timeout { .. } => follower::Failure::Timeout,
        _ => follower::Failure::Disconnected,
    }
}

fn lifecycle_failure(e: ClientError) -> lifecycle::Failure {
    tracing::debug!(error = %e, "a request to the controller failed");
    match e {
        ClientError::Timeout { .. } => lifecycle::Failure::Timeout,
        ClientError::UnsupportedVersion { .. } | ClientError::ApiVersions(_) => {
            lifecycle::Failure::UnsupportedVersion
        }
        _ => lifecycle::Failure::Disconnected,
    }
}
