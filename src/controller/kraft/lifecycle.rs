//! A KRaft broker's lifecycle with the controller quorum, as Kafka's
//! `BrokerLifecycleManager` runs it, as a pure state machine: [`Lifecycle::decide`] takes
//! one [`Event`] (a response, a timer, something the broker did) and answers the
//! [`Output`]s (the BrokerRegistration or BrokerHeartbeat request to send, a state the
//! broker reached, a reason to stop). Time is the `now_ms` each event carries; nothing here
//! reads a clock, opens a socket or sleeps, so every scenario is a unit test.
//!
//! ```text
//! NOT_RUNNING ─Start─▶ STARTING ─heartbeat: is_caught_up─▶ RECOVERY ─heartbeat: !is_fenced─▶ RUNNING
//!                         │                                                              │
//!                         └─ no registration within initial.broker.registration.timeout  │
//!                            ─▶ SHUTTING_DOWN            BeginControlledShutdown ────────┘
//!                                                               ▼
//!                                          PENDING_CONTROLLED_SHUTDOWN ─should_shut_down─▶ SHUTTING_DOWN
//! ```
//!
//! One request is in flight at a time. The next is due at [`Lifecycle::next_deadline`]:
//! right after registering, 10 ms after a heartbeat while STARTING, 50 ms after the first
//! heartbeat asking to shut down, `broker.heartbeat.interval.ms` otherwise, and after a
//! failure an exponential backoff from 100 ms to `broker.session.timeout.ms`. Something
//! that asks for an immediate send while a request is in flight is sent as soon as the
//! answer arrives. The heartbeat asks to stay fenced until the broker says it is ready
//! (its logs recovered, the metadata replayed to where the controller's answer said it
//! was caught up), and carries the metadata offset the broker has applied.
//!
//! While RUNNING (or in controlled shutdown) the broker's leaderships come in doubt
//! ([`Lifecycle::leaderships_in_doubt`]) once no heartbeat sent in the last
//! `broker.session.timeout.ms` was answered (the controllers time the session from the
//! heartbeat they received, so from its send the broker cannot be later than they are),
//! or when an answer says the broker is fenced: the controllers have fenced it and may
//! have moved its leaderships, which a broker cut off from them cannot learn. The doubt
//! ends only with an answered heartbeat, sent within the session timeout, that shows the
//! broker unfenced: the controllers unfence a broker only once the metadata offset its
//! heartbeat carries has reached what they committed, so every leadership moved meanwhile
//! is in the image the broker published already.
//!
//! The controller's errors: NOT_CONTROLLER asks the driver to find the active controller
//! again ([`Output::FindController`]) and the request is retried after the backoff, as
//! every other error is (DUPLICATE_BROKER_REGISTRATION while the previous incarnation's
//! session lasts, STALE_BROKER_EPOCH, ...): Kafka's broker retries them all until it
//! registers or its initial registration times out. A registration the metadata shows as
//! needing a refresh is sent again on [`Event::ResendRegistration`].

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::broker_registration_request::{Feature, Listener};
use kafka_protocol::messages::{
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest,
    BrokerRegistrationResponse,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

/// Kafka's `BrokerState`, with its wire values (BrokerRegistration metrics and
/// `kafka.server:type=KafkaServer,name=BrokerState` report them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerState {
    NotRunning = 0,
    Starting = 1,
    Recovery = 2,
    Running = 3,
    PendingControlledShutdown = 6,
    ShuttingDown = 7,
}

/// One listener the broker registers (an advertised listener, not a controller one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisteredListener {
    pub name: String,
    pub host: String,
    pub port: u16,
    /// Kafka's `SecurityProtocol` id: PLAINTEXT 0, SSL 1, SASL_PLAINTEXT 2, SASL_SSL 3.
    pub security_protocol: i16,
}

/// A feature and the levels this broker supports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SupportedFeature {
    pub name: String,
    pub min: i16,
    pub max: i16,
}

/// What the broker registers with, fixed for the process's life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub broker_id: i32,
    pub cluster_id: String,
    /// New at every start: the controllers tell a restart from a duplicate by it.
    pub incarnation_id: Uuid,
    pub listeners: Vec<RegisteredListener>,
    pub features: Vec<SupportedFeature>,
    pub rack: Option<String>,
    /// The `directory.id` of every log dir.
    pub log_dirs: Vec<Uuid>,
    /// The broker epoch of the previous run, from a clean shutdown's marker; -1 if none.
    pub previous_broker_epoch: i64,
}

/// The timings, from `KRaftConfig`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub heartbeat_interval_ms: u64,
    pub session_timeout_ms: u64,
    pub initial_registration_timeout_ms: u64,
}

/// Why a request got no response body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// No answer within the request timeout, or the connection could not be made.
    Timeout,
    Disconnected,
    /// The controller listener refused the broker's credentials.
    Authentication,
    /// The controller speaks no version of the API the broker can send.
    UnsupportedVersion,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// The broker is ready to register (its dirs checked, its listeners known).
    Start,
    /// Time passed; due requests and deadlines are acted on.
    Tick,
    /// The broker applied the metadata log up to this offset.
    MetadataApplied(i64),
    /// The broker has caught up and recovered its logs: it may be unfenced.
    ReadyToUnfence,
    RegistrationResponse(Result<BrokerRegistrationResponse, Failure>),
    HeartbeatResponse(Result<BrokerHeartbeatResponse, Failure>),
    /// A log dir failed; the controllers must hear of it within `timeout_ms` or the
    /// broker stops.
    OfflineDir {
        dir: Uuid,
        timeout_ms: u64,
    },
    /// The broker is stopping: ask the controller to move its leaderships away first.
    BeginControlledShutdown,
    /// The metadata shows this broker's registration needs sending again.
    ResendRegistration,
    /// The quorum has a new leader, the active controller: a request that failed is sent
    /// to it at once instead of after its backoff, as Kafka's channel to the controller
    /// sends a request it could not deliver again as soon as the new controller is known.
    /// Otherwise a broker whose heartbeats failed while the old controller died waits out
    /// a backoff grown towards the session timeout, and the new controller, timing the
    /// session from its own start, can fence it meanwhile.
    ControllerChanged,
    /// Stop now, without controlled shutdown.
    Shutdown,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    SendRegistration(BrokerRegistrationRequest),
    SendHeartbeat(BrokerHeartbeatRequest),
    /// The answer said NOT_CONTROLLER: look up the active controller before the retry.
    FindController,
    /// The controller says the broker has caught up with the metadata log (STARTING →
    /// RECOVERY): it may recover its logs and publish metadata.
    CaughtUp,
    /// The controller unfenced the broker (RECOVERY → RUNNING).
    Unfenced,
    /// The lifecycle ended (SHUTTING_DOWN); the broker stops.
    ShutDown(ShutdownReason),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShutdownReason {
    /// The controller allowed the controlled shutdown to finish.
    ControlledShutdownDone,
    /// Shutdown was asked before the broker was RUNNING, or with no controlled shutdown.
    Requested,
    /// No registration succeeded within `initial.broker.registration.timeout.ms`.
    RegistrationTimedOut,
    /// A failed log dir could not be reported to the controllers in time.
    OfflineDirNotReported(Uuid),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InFlight {
    Registration,
    Heartbeat,
}

/// The first backoff after a failure, and its growth (Kafka's `ExponentialBackoff(100,
/// 2, broker.session.timeout.ms)`, without its 2% jitter).
const BACKOFF_INITIAL_MS: u64 = 100;
/// The heartbeat after one that found the broker still STARTING.
const STARTING_HEARTBEAT_MS: u64 = 10;
/// The heartbeat after the first one that asked to shut down.
const FIRST_SHUTDOWN_HEARTBEAT_MS: u64 = 50;

#[derive(Clone, Debug)]
pub struct Lifecycle {
    registration: Registration,
    timing: Timing,
    state: BrokerState,
    /// -1 until registered.
    broker_epoch: i64,
    registered: bool,
    initial_registration_succeeded: bool,
    registration_deadline: Option<u64>,
    ready_to_unfence: bool,
    metadata_offset: i64,
    /// Failed log dirs, and whether a heartbeat carrying them was answered.
    offline_dirs: BTreeMap<Uuid, bool>,
    /// When each failed dir must have been reported by.
    offline_dir_deadlines: BTreeMap<Uuid, u64>,
    /// The request in flight.
    in_flight: Option<Sent>,
    next_send: Option<u64>,
    /// A send was asked for while one was in flight: send once it is answered.
    send_immediately: bool,
    /// The active controller changed while a request was in flight: if it fails, the
    /// retry goes at once (to the new one).
    retry_at_once: bool,
    failed_attempts: u32,
    got_controlled_shutdown_response: bool,
    /// When the last heartbeat answered without error was sent: the controllers fence the
    /// broker `broker.session.timeout.ms` after they received it, so no earlier than that
    /// long after this.
    last_ok_heartbeat_sent: Option<u64>,
    /// This broker's leaderships may have moved without it knowing (see the module doc).
    in_doubt: bool,
}

/// A request in flight: which, the offline dirs a heartbeat carried, and when it was sent.
#[derive(Clone, Debug)]
struct Sent {
    kind: InFlight,
    dirs: Vec<Uuid>,
    at_ms: u64,
}

impl Lifecycle {
    pub fn new(registration: Registration, timing: Timing) -> Lifecycle {
        Lifecycle {
            registration,
            timing,
            state: BrokerState::NotRunning,
            broker_epoch: -1,
            registered: false,
            initial_registration_succeeded: false,
            registration_deadline: None,
            ready_to_unfence: false,
            metadata_offset: -1,
            offline_dirs: BTreeMap::new(),
            offline_dir_deadlines: BTreeMap::new(),
            in_flight: None,
            next_send: None,
            send_immediately: false,
            retry_at_once: false,
            failed_attempts: 0,
            got_controlled_shutdown_response: false,
            last_ok_heartbeat_sent: None,
            in_doubt: false,
        }
    }

    pub fn state(&self) -> BrokerState {
        self.state
    }

    /// The broker epoch the controller gave, -1 before registration.
    pub fn broker_epoch(&self) -> i64 {
        self.broker_epoch
    }

    pub fn incarnation_id(&self) -> Uuid {
        self.registration.incarnation_id
    }

    /// When the driver must next call [`Event::Tick`]: the next send, or a deadline.
    pub fn next_deadline(&self) -> Option<u64> {
        if self.state == BrokerState::ShuttingDown {
            return None;
        }
        let send = self.next_send.filter(|_| self.in_flight.is_none());
        [
            send,
            self.registration_deadline
                .filter(|_| !self.initial_registration_succeeded),
            self.offline_dir_deadlines.values().min().copied(),
            self.lease_deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Whether the controllers may have fenced this broker by now: registered, but no
    /// heartbeat sent in the last `broker.session.timeout.ms` was answered.
    pub fn lease_expired(&self, now_ms: u64) -> bool {
        self.registered
            && self
                .last_ok_heartbeat_sent
                .is_none_or(|t| now_ms.saturating_sub(t) >= self.timing.session_timeout_ms)
    }

    /// Whether this broker's leaderships are in doubt: RUNNING (or in controlled shutdown)
    /// and either no heartbeat answered within the session timeout or an answer saying it
    /// is fenced, and no answer since saying it is unfenced. Its coordinators step back
    /// meanwhile (`ClusterView::lease_lost`).
    pub fn leaderships_in_doubt(&self) -> bool {
        self.in_doubt
    }

    /// When the lease runs out, while it is watched (registered, RUNNING and not in doubt
    /// yet; a registration sent again raises no doubt of its own, and its answer starts
    /// the heartbeats that decide).
    fn lease_deadline(&self) -> Option<u64> {
        if self.in_doubt || !self.serving() || !self.registered {
            return None;
        }
        self.last_ok_heartbeat_sent
            .map(|t| t + self.timing.session_timeout_ms)
    }

    /// The states in which the broker leads partitions and serves as their coordinator.
    fn serving(&self) -> bool {
        matches!(
            self.state,
            BrokerState::Running | BrokerState::PendingControlledShutdown
        )
    }

    /// Raises the doubt (`why` is logged once).
    fn doubt(&mut self, why: &str) {
        if !self.in_doubt {
            self.in_doubt = true;
            tracing::warn!(
                broker_epoch = self.broker_epoch,
                "{why}: the controllers may have fenced this broker and moved its leaderships; coordinators answer NOT_COORDINATOR until a heartbeat shows it unfenced"
            );
        }
    }

    /// Applies one event at `now_ms` and answers what to do.
    pub fn decide(&mut self, now_ms: u64, event: Event) -> Vec<Output> {
        let mut out = Vec::new();
        if self.state == BrokerState::ShuttingDown {
            return out;
        }
        match event {
            Event::Start => self.start(now_ms),
            Event::Tick => {}
            Event::MetadataApplied(offset) => {
                self.metadata_offset = self.metadata_offset.max(offset)
            }
            Event::ReadyToUnfence => {
                self.ready_to_unfence = true;
                self.schedule(now_ms, 0);
            }
            Event::RegistrationResponse(r) => self.on_registration(now_ms, r, &mut out),
            Event::HeartbeatResponse(r) => self.on_heartbeat(now_ms, r, &mut out),
            Event::OfflineDir { dir, timeout_ms } => {
                self.offline_dirs.entry(dir).or_insert(false);
                self.offline_dir_deadlines
                    .entry(dir)
                    .or_insert(now_ms + timeout_ms);
                if self.registered {
                    self.schedule(now_ms, 0);
                }
            }
            Event::BeginControlledShutdown => match self.state {
                BrokerState::Running => {
                    self.state = BrokerState::PendingControlledShutdown;
                    self.schedule(now_ms, 0);
                }
                BrokerState::PendingControlledShutdown => {}
                _ => self.shut_down(ShutdownReason::Requested, &mut out),
            },
            Event::ResendRegistration => {
                if self.state != BrokerState::NotRunning {
                    self.registered = false;
                    self.schedule(now_ms, 0);
                }
            }
            Event::ControllerChanged => self.controller_changed(now_ms),
            Event::Shutdown => self.shut_down(ShutdownReason::Requested, &mut out),
        }
        if self.state != BrokerState::ShuttingDown {
            self.check_deadlines(now_ms, &mut out);
        }
        if self.serving() && self.lease_expired(now_ms) {
            self.doubt(
                "no heartbeat answered by the controller quorum within broker.session.timeout.ms",
            );
        }
        if self.state != BrokerState::ShuttingDown {
            self.send_if_due(now_ms, &mut out);
        }
        out
    }

    fn start(&mut self, now_ms: u64) {
        if self.state != BrokerState::NotRunning {
            return;
        }
        self.state = BrokerState::Starting;
        self.registration_deadline = Some(now_ms + self.timing.initial_registration_timeout_ms);
        self.schedule(now_ms, 0);
        tracing::info!(
            broker = self.registration.broker_id,
            incarnation = %self.registration.incarnation_id,
            cluster = %self.registration.cluster_id,
            "the broker is STARTING: registering with the controller quorum"
        );
    }

    fn check_deadlines(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        if !self.initial_registration_succeeded
            && self.registration_deadline.is_some_and(|d| now_ms >= d)
        {
            tracing::error!("shutting down: the broker could not register with the controller quorum within initial.broker.registration.timeout.ms");
            self.shut_down(ShutdownReason::RegistrationTimedOut, out);
            return;
        }
        let due: Vec<Uuid> = self
            .offline_dir_deadlines
            .iter()
            .filter(|(_, d)| now_ms >= **d)
            .map(|(dir, _)| *dir)
            .collect();
        for dir in due {
            self.offline_dir_deadlines.remove(&dir);
            if !self.offline_dirs.get(&dir).copied().unwrap_or(false) {
                tracing::error!(%dir, "shutting down: the offline log dir could not be reported to the controllers");
                self.shut_down(ShutdownReason::OfflineDirNotReported(dir), out);
                return;
            }
        }
    }

    fn send_if_due(&mut self, now_ms: u64, out: &mut Vec<Output>) {
        if self.in_flight.is_some() || self.next_send.is_none_or(|t| now_ms < t) {
            return;
        }
        self.next_send = None;
        if self.registered {
            let dirs: Vec<Uuid> = self.offline_dirs.keys().copied().collect();
            let request = BrokerHeartbeatRequest::default()
                .with_broker_id(self.registration.broker_id.into())
                .with_broker_epoch(self.broker_epoch)
                .with_current_metadata_offset(self.metadata_offset)
                .with_want_fence(!self.ready_to_unfence)
                .with_want_shut_down(self.state == BrokerState::PendingControlledShutdown)
                .with_offline_log_dirs(dirs.clone());
            self.in_flight = Some(Sent {
                kind: InFlight::Heartbeat,
                dirs,
                at_ms: now_ms,
            });
            out.push(Output::SendHeartbeat(request));
        } else {
            self.in_flight = Some(Sent {
                kind: InFlight::Registration,
                dirs: Vec::new(),
                at_ms: now_ms,
            });
            out.push(Output::SendRegistration(self.registration_request()));
        }
    }

    fn registration_request(&self) -> BrokerRegistrationRequest {
        let r = &self.registration;
        let mut log_dirs = r.log_dirs.clone();
        log_dirs.sort();
        BrokerRegistrationRequest::default()
            .with_broker_id(r.broker_id.into())
            .with_cluster_id(StrBytes::from_string(r.cluster_id.clone()))
            .with_incarnation_id(r.incarnation_id)
            .with_listeners(
                r.listeners
                    .iter()
                    .map(|l| {
                        Listener::default()
                            .with_name(StrBytes::from_string(l.name.clone()))
                            .with_host(StrBytes::from_string(l.host.clone()))
                            .with_port(l.port)
                            .with_security_protocol(l.security_protocol)
                    })
                    .collect(),
            )
            .with_features(
                r.features
                    .iter()
                    .map(|f| {
                        Feature::default()
                            .with_name(StrBytes::from_string(f.name.clone()))
                            .with_min_supported_version(f.min)
                            .with_max_supported_version(f.max)
                    })
                    .collect(),
            )
            .with_rack(r.rack.clone().map(StrBytes::from_string))
            .with_is_migrating_zk_broker(false)
            .with_log_dirs(log_dirs)
            .with_previous_broker_epoch(r.previous_broker_epoch)
    }

    fn on_registration(
        &mut self,
        now_ms: u64,
        response: Result<BrokerRegistrationResponse, Failure>,
        out: &mut Vec<Output>,
    ) {
        if self.in_flight.take().map(|s| s.kind) != Some(InFlight::Registration) {
            tracing::warn!(
                "a BrokerRegistration response with no registration in flight is ignored"
            );
            return;
        }
        let response = match response {
            Ok(r) => r,
            Err(failure) => {
                tracing::warn!(?failure, "the broker could not register; retrying");
                return self.after_failure(now_ms);
            }
        };
        match ResponseError::try_from_code(response.error_code) {
            None => {
                self.failed_attempts = 0;
                self.retry_at_once = false;
                self.broker_epoch = response.broker_epoch;
                self.registered = true;
                self.initial_registration_succeeded = true;
                tracing::info!(
                    broker = self.registration.broker_id,
                    epoch = self.broker_epoch,
                    "registered with the controller quorum"
                );
                self.schedule(now_ms, 0);
            }
            Some(e) => {
                tracing::info!(error = %e, "the controller refused the broker's registration; retrying");
                self.controller_error(e, out);
                self.after_failure(now_ms);
            }
        }
    }

    fn on_heartbeat(
        &mut self,
        now_ms: u64,
        response: Result<BrokerHeartbeatResponse, Failure>,
        out: &mut Vec<Output>,
    ) {
        let sent = match self.in_flight.take() {
            Some(sent) if sent.kind == InFlight::Heartbeat => sent,
            other => {
                self.in_flight = other;
                tracing::warn!("a BrokerHeartbeat response with no heartbeat in flight is ignored");
                return;
            }
        };
        let response = match response {
            Ok(r) => r,
            Err(failure) => {
                tracing::warn!(?failure, "the broker heartbeat failed; retrying");
                return self.after_failure(now_ms);
            }
        };
        if let Some(e) = ResponseError::try_from_code(response.error_code) {
            tracing::warn!(error = %e, "the controller answered the broker heartbeat with an error; retrying");
            self.controller_error(e, out);
            return self.after_failure(now_ms);
        }
        self.failed_attempts = 0;
        self.retry_at_once = false;
        self.last_ok_heartbeat_sent = Some(sent.at_ms);
        for dir in sent.dirs {
            self.offline_dirs.insert(dir, true);
        }
        // A granted controlled shutdown is answered fenced too (Kafka's SHUTDOWN_NOW): no
        // doubt, the broker stops.
        if self.serving() && !response.should_shut_down {
            if response.is_fenced {
                self.doubt("the controller answered this broker's heartbeat as fenced");
            } else if self.in_doubt && !self.lease_expired(now_ms) {
                self.in_doubt = false;
                tracing::info!(
                    broker_epoch = self.broker_epoch,
                    "the controller answers this broker's heartbeat as unfenced: its leaderships are what its metadata says, coordinators serve again"
                );
            }
        }
        match self.state {
            BrokerState::Starting => {
                if response.is_caught_up {
                    tracing::info!(
                        "the broker has caught up with the metadata log: STARTING → RECOVERY"
                    );
                    self.state = BrokerState::Recovery;
                    out.push(Output::CaughtUp);
                }
                self.schedule(now_ms, STARTING_HEARTBEAT_MS);
            }
            BrokerState::Recovery => {
                if !response.is_fenced {
                    tracing::info!("the controller unfenced the broker: RECOVERY → RUNNING");
                    self.state = BrokerState::Running;
                    out.push(Output::Unfenced);
                }
                self.schedule(now_ms, self.timing.heartbeat_interval_ms);
            }
            BrokerState::Running => self.schedule(now_ms, self.timing.heartbeat_interval_ms),
            BrokerState::PendingControlledShutdown => {
                if response.should_shut_down {
                    tracing::info!("the controller let the broker finish its controlled shutdown");
                    self.shut_down(ShutdownReason::ControlledShutdownDone, out);
                    return;
                }
                let after = if self.got_controlled_shutdown_response {
                    self.timing.heartbeat_interval_ms
                } else {
                    FIRST_SHUTDOWN_HEARTBEAT_MS
                };
                self.got_controlled_shutdown_response = true;
                self.schedule(now_ms, after);
            }
            BrokerState::NotRunning | BrokerState::ShuttingDown => {}
        }
    }

    fn controller_error(&self, e: ResponseError, out: &mut Vec<Output>) {
        if e == ResponseError::NotController {
            out.push(Output::FindController);
        }
    }

    /// A new active controller: a send held back by a failure's backoff goes now; one in
    /// flight (to the old controller) is retried at once if it fails.
    fn controller_changed(&mut self, now_ms: u64) {
        if self.failed_attempts == 0 {
            return;
        }
        if self.in_flight.is_some() {
            self.retry_at_once = true;
        } else if self.next_send.is_some() {
            self.next_send = Some(now_ms);
        }
    }

    /// The next send after a failure: Kafka's exponential backoff, capped at the session
    /// timeout, and never at once even if something asked for it, unless the active
    /// controller changed while the failed request was in flight.
    fn after_failure(&mut self, now_ms: u64) {
        let backoff = match std::mem::take(&mut self.retry_at_once) {
            true => 0,
            false => BACKOFF_INITIAL_MS
                .saturating_mul(1u64 << self.failed_attempts.min(32))
                .min(self.timing.session_timeout_ms.max(BACKOFF_INITIAL_MS)),
        };
        self.failed_attempts = self.failed_attempts.saturating_add(1);
        self.send_immediately = false;
        self.next_send = Some(now_ms + backoff);
    }

    /// Schedules the next send `after_ms` from now (at once if an immediate send was asked
    /// for while a request was in flight). With a request in flight, an immediate send is
    /// remembered for when it is answered.
    fn schedule(&mut self, now_ms: u64, after_ms: u64) {
        if self.in_flight.is_some() {
            if after_ms == 0 {
                self.send_immediately = true;
            }
            return;
        }
        let after = if std::mem::take(&mut self.send_immediately) {
            0
        } else {
            after_ms
        };
        // The newest schedule replaces the one before, as Kafka's deferred event does.
        self.next_send = Some(now_ms + after);
    }

    fn shut_down(&mut self, reason: ShutdownReason, out: &mut Vec<Output>) {
        tracing::info!(from = ?self.state, ?reason, "the broker lifecycle is SHUTTING_DOWN");
        self.state = BrokerState::ShuttingDown;
        self.next_send = None;
        out.push(Output::ShutDown(reason));
    }
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;
