//! The listeners' accept loops, the connection cap, the broker-wide request memory, and
//! graceful shutdown.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use super::connection::{self, Limits};
use super::link::Link;
use super::memory::MemoryPool;
use super::session::{SecurityProtocol, Session};
use super::tls::TlsTransport;
use super::transport::{PlainTransport, Transport};
use crate::broker::Broker;
use crate::config::{BrokerConfig, Listener};
use crate::sasl::settings::SaslSettings;
use crate::tls::{ListenerTls, SslSettings};

/// Bytes of requests read but not yet answered that one connection may hold before it
/// stops reading: a few pipelined requests, so that one client cannot take the whole of
/// `queued.max.request.bytes` (Kafka reads one request per connection at a time).
pub const CONNECTION_READ_AHEAD_BYTES: usize = 4 * 1024 * 1024;

/// How long connections get at shutdown to answer what they have read.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Each configured listener with its bound socket and, for an SSL listener, its TLS
/// context (keystore and truststore read at bind time, so a bad one stops startup).
pub type BoundListeners = Vec<(Listener, TcpListener, Option<Arc<ListenerTls>>)>;

/// An SSL listener's context, swapped when its keystore is altered at runtime (KIP-226):
/// connections accepted after the swap handshake with the new certificate, those open
/// keep their session.
type TlsSlot = Arc<parking_lot::RwLock<Option<Arc<ListenerTls>>>>;
/// A SASL listener's settings, swapped when its SASL keys change at runtime (KIP-226:
/// `listener.name.<l>.plain.sasl.jaas.config` with a new user, say): connections
/// accepted after the swap authenticate with the new settings, those open keep theirs
/// (a re-authentication included).
type SaslSlot = Arc<parking_lot::RwLock<Option<Arc<SaslSettings>>>>;

/// The security protocol of `listener` in `config` (PLAINTEXT if unmapped: the config
/// was checked, so that does not happen).
fn protocol_of(config: &BrokerConfig, listener: &Listener) -> SecurityProtocol {
    config
        .security_protocol(&listener.name)
        .and_then(|p| SecurityProtocol::from_name(&p))
        .unwrap_or(SecurityProtocol::Plaintext)
}

/// The TLS settings of `listener` in `config` if its security protocol is SSL or SASL_SSL.
fn ssl_settings(config: &BrokerConfig, listener: &Listener) -> Option<SslSettings> {
    if !protocol_of(config, listener).is_tls() {
        return None;
    }
    SslSettings::for_listener(config, &listener.name).ok()
}

/// The SASL settings of `listener` if its security protocol is SASL_PLAINTEXT or
/// SASL_SSL (checked when the config was built; should they fail now, the listener's
/// connections can never authenticate, and are refused everything but the handshake).
fn sasl_settings(config: &BrokerConfig, listener: &Listener) -> Option<Arc<SaslSettings>> {
    if !protocol_of(config, listener).is_sasl() {
        return None;
    }
    match SaslSettings::for_listener(config, &listener.name) {
        Ok(s) => Some(Arc::new(s)),
        Err(e) => {
            tracing::error!(listener = %listener.name, error = %e, "SASL settings refused; no connection can authenticate");
            None
        }
    }
}

/// The TLS context of `listener` if its security protocol is SSL or SASL_SSL.
pub fn listener_tls(
    config: &BrokerConfig,
    listener: &Listener,
) -> anyhow::Result<Option<Arc<ListenerTls>>> {
    if !protocol_of(config, listener).is_tls() {
        return Ok(None);
    }
    let settings = SslSettings::for_listener(config, &listener.name)?;
    Ok(Some(Arc::new(ListenerTls::build(&settings)?)))
}

pub struct Server {
    listeners: BoundListeners,
    broker: Arc<Broker>,
    limits: Limits,
    max_connections: usize,
    memory: Arc<MemoryPool>,
    shutdown_grace: Duration,
}

impl Server {
    /// Binds every configured listener, before the broker opens: a listener on port 0
    /// gets its port here, and the advertised listener of the same name takes that port
    /// (as in Kafka), so the broker registers an address clients can reach.
    pub async fn bind_listeners(config: &mut BrokerConfig) -> anyhow::Result<BoundListeners> {
        let mut listeners = Vec::new();
        for l in &config.listeners {
            let tls = listener_tls(config, l)?;
            let addr = l.bind_addr();
            let listener = TcpListener::bind(&addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
            let bound = listener.local_addr()?.port();
            for advertised in &mut config.advertised_listeners {
                if advertised.name == l.name && advertised.port == 0 {
                    advertised.port = bound;
                }
            }
            listeners.push((l.clone(), listener, tls));
        }
        if listeners.iter().any(|(_, _, tls)| tls.is_some()) {
            match super::tls::kernel_tls_available() {
                true => tracing::info!("TLS fetches are copied through user space; this kernel offers kernel TLS, which skua does not use yet"),
                false => tracing::info!("TLS fetches are copied through user space (no kernel TLS: `tls` is not in /proc/sys/net/ipv4/tcp_available_ulp)"),
            }
        }
        Ok(listeners)
    }

    /// Serves `listeners` (from [`Server::bind_listeners`]) for `broker`.
    pub fn new(listeners: BoundListeners, broker: Arc<Broker>) -> Server {
        let cfg = broker.config();
        let net = &cfg.network;
        let limits = Limits {
            max_frame_bytes: net.socket_request_max_bytes,
            max_in_flight: net.queued_max_requests,
            read_ahead_bytes: CONNECTION_READ_AHEAD_BYTES,
            idle: Duration::from_millis(net.connections_max_idle_ms.max(1)),
        };
        Server {
            listeners,
            limits,
            max_connections: net.max_connections.min(Semaphore::MAX_PERMITS),
            memory: MemoryPool::new(net.queued_max_request_bytes),
            shutdown_grace: SHUTDOWN_GRACE,
            broker,
        }
    }

    /// Sets how long connections get at shutdown before they are aborted.
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Server {
        self.shutdown_grace = grace;
        self
    }

    pub fn local_addrs(&self) -> Vec<std::net::SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|(_, l, _)| l.local_addr().ok())
            .collect()
    }

    /// The broker-wide pool of request memory (`queued.max.request.bytes`).
    pub fn request_memory(&self) -> Arc<MemoryPool> {
        self.memory.clone()
    }

    /// Serves until `stop` resolves, then stops accepting and lets connections answer
    /// what they have read; after the grace period the rest are aborted. Returns once
    /// every connection task has ended, so no handler runs after this (the logs close
    /// next). Meanwhile the listeners follow the config in force: a listener added at
    /// runtime is bound and advertised, a removed one stops accepting and its connections
    /// are closed (Kafka's dynamic listeners, KIP-226).
    pub async fn run(self, stop: impl std::future::Future<Output = ()>) {
        let permits = Arc::new(Semaphore::new(self.max_connections));
        let mut serving = Serving {
            running: Vec::new(),
            accepts: JoinSet::new(),
            broker: self.broker.clone(),
            limits: self.limits,
            memory: self.memory.clone(),
            permits,
        };
        for (spec, listener, tls) in self.listeners {
            serving.start(spec, listener, tls);
        }
        // The dynamic configs read while the broker opened may already name other
        // listeners than server.properties.
        let mut changes = self.broker.shared_config.subscribe();
        changes.mark_unchanged();
        serving.follow(&self.broker.config()).await;
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                changed = changes.changed() => {
                    if changed.is_err() {
                        (&mut stop).await;
                        break;
                    }
                    let config = changes.borrow_and_update().clone();
                    serving.follow(&config).await;
                }
            }
        }
        tracing::info!("shutting down: no new connections");
        self.broker.begin_shutdown();
        for r in &serving.running {
            let _ = r.shutdown.send(true);
        }
        let mut accepts = serving.accepts;
        let drain = async { while accepts.join_next().await.is_some() {} };
        if tokio::time::timeout(self.shutdown_grace, drain)
            .await
            .is_err()
        {
            tracing::warn!(
                "connections still open after {} s; closing them",
                self.shutdown_grace.as_secs()
            );
            for r in &serving.running {
                let _ = r.abort.send(true);
            }
            while accepts.join_next().await.is_some() {}
        }
    }
}

/// A listener being served, and how to stop it.
struct Running {
    spec: Listener,
    /// The context its accepts use, and the settings it was built from.
    tls: TlsSlot,
    ssl_settings: Option<SslSettings>,
    /// The SASL settings its accepts use.
    sasl: SaslSlot,
    /// Stops accepting (and tells its connections to finish).
    shutdown: watch::Sender<bool>,
    /// Aborts its connections.
    abort: watch::Sender<bool>,
}

impl Running {
    /// Builds a new context when the listener's TLS settings changed (a keystore or
    /// truststore altered at runtime); the alteration was checked against the new stores
    /// when it was made, so a failure here (the file changed since) keeps the old context.
    /// Whether it reloaded.
    fn reload_tls(&mut self, config: &BrokerConfig) -> bool {
        let now = ssl_settings(config, &self.spec);
        if now.is_none() || now == self.ssl_settings {
            return false;
        }
        match now.as_ref().map(ListenerTls::build) {
            Some(Ok(tls)) => {
                *self.tls.write() = Some(Arc::new(tls));
                self.ssl_settings = now;
                tracing::info!(listener = %self.spec.name, "TLS keystore or truststore reloaded; new connections use it");
                true
            }
            Some(Err(e)) => {
                tracing::error!(listener = %self.spec.name, error = %e, "cannot reload TLS; the listener keeps its current keystore");
                false
            }
            None => false,
        }
    }
}

impl Running {
    /// Swaps in the listener's SASL settings when they changed (a JAAS config altered at
    /// runtime); the alteration was checked when it was made, so settings that fail now
    /// (a JWKS file removed since) keep the current ones. Whether it reloaded.
    fn reload_sasl(&mut self, config: &BrokerConfig) -> bool {
        if !protocol_of(config, &self.spec).is_sasl() {
            return false;
        }
        let Some(now) = sasl_settings(config, &self.spec) else {
            return false;
        };
        let mut slot = self.sasl.write();
        if slot.as_deref() == Some(&*now) {
            return false;
        }
        *slot = Some(now);
        tracing::info!(listener = %self.spec.name, "SASL settings reloaded; new connections authenticate with them");
        true
    }
}

/// The listeners being served and what they share.
struct Serving {
    running: Vec<Running>,
    accepts: JoinSet<()>,
    broker: Arc<Broker>,
    limits: Limits,
    memory: Arc<MemoryPool>,
    permits: Arc<Semaphore>,
}

impl Serving {
    fn start(&mut self, spec: Listener, listener: TcpListener, tls: Option<Arc<ListenerTls>>) {
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (abort, abort_rx) = watch::channel(false);
        let config = self.broker.config();
        let ssl_settings = ssl_settings(&config, &spec);
        let tls: TlsSlot = Arc::new(parking_lot::RwLock::new(tls));
        let sasl: SaslSlot = Arc::new(parking_lot::RwLock::new(sasl_settings(&config, &spec)));
        self.accepts.spawn(accept_loop(
            Listening {
                connections: self.broker.metrics.connections.listener(spec.name.as_str()),
                name: spec.name.as_str().into(),
                protocol: protocol_of(&config, &spec),
                sasl: sasl.clone(),
                listener,
                tls: tls.clone(),
                broker: self.broker.clone(),
                limits: self.limits,
                memory: self.memory.clone(),
                permits: self.permits.clone(),
            },
            shutdown_rx,
            abort_rx,
        ));
        self.running.push(Running {
            spec,
            tls,
            ssl_settings,
            sasl,
            shutdown,
            abort,
        });
    }

    /// Serves the listeners `config` names: stops those it no longer has (or has bound
    /// elsewhere), closing their connections as Kafka does, binds the new ones, then
    /// advertises what is served.
    async fn follow(&mut self, config: &BrokerConfig) {
        let (kept, removed): (Vec<Running>, Vec<Running>) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|r| config.listeners.contains(&r.spec));
        self.running = kept;
        let inter_broker = config.inter_broker_listener();
        let mut outbound_changed = false;
        for r in &mut self.running {
            outbound_changed |= r.reload_tls(config) && r.spec.name == inter_broker;
            r.reload_sasl(config);
        }
        if outbound_changed {
            self.reload_outbound_tls(config);
        }
        for r in removed {
            tracing::info!(listener = %r.spec.name, addr = %r.spec.bind_addr(), "listener removed; closing its connections");
            let _ = r.shutdown.send(true);
            let _ = r.abort.send(true);
        }
        let added: Vec<Listener> = config
            .listeners
            .iter()
            .filter(|l| !self.running.iter().any(|r| &r.spec == *l))
            .cloned()
            .collect();
        for spec in added {
            let addr = spec.bind_addr();
            let tls = match listener_tls(config, &spec) {
                Ok(tls) => tls,
                Err(e) => {
                    tracing::error!(listener = %spec.name, error = %e, "cannot set up TLS for an added listener");
                    continue;
                }
            };
            match TcpListener::bind(&addr).await {
                Ok(listener) => {
                    tracing::info!(listener = %spec.name, %addr, "listener added");
                    self.start(spec, listener, tls);
                }
                // Checked when the change was made; the address was taken since.
                Err(e) => {
                    tracing::error!(listener = %spec.name, %addr, error = %e, "cannot listen for an added listener")
                }
            }
        }
        self.advertise(config).await;
    }

    /// The inter-broker listener's stores changed: the broker's own connections present
    /// and verify with the new ones from their next connection on.
    fn reload_outbound_tls(&self, config: &BrokerConfig) {
        let Some(current) = self.broker.shared_config.outbound_tls() else {
            return;
        };
        match config.outbound_tls() {
            Ok(Some(fresh)) => {
                current.reload_from(&fresh);
                tracing::info!("outbound TLS reloaded from the inter-broker listener's stores");
            }
            Ok(None) => {}
            Err(e) => {
                tracing::error!(error = %e, "cannot reload outbound TLS; broker connections keep the current stores")
            }
        }
    }

    async fn advertise(&self, config: &BrokerConfig) {
        if let Err(e) = self.broker.controller.advertise(config).await {
            tracing::error!(error = %e.message, "cannot advertise the listeners now served");
        }
    }
}

/// One listener and what its connections share.
struct Listening {
    name: Arc<str>,
    /// The listener's connection counts.
    connections: Arc<crate::metrics::connections::ListenerConnections>,
    protocol: SecurityProtocol,
    /// Set on a SASL listener.
    sasl: SaslSlot,
    listener: TcpListener,
    /// Set on an SSL listener.
    tls: TlsSlot,
    broker: Arc<Broker>,
    limits: Limits,
    memory: Arc<MemoryPool>,
    permits: Arc<Semaphore>,
}

async fn accept_loop(
    l: Listening,
    mut shutdown: watch::Receiver<bool>,
    mut abort: watch::Receiver<bool>,
) {
    // Every connection's reader and writer: owned here, so none outlives the server.
    let mut connections = JoinSet::new();
    // TLS handshakes under way, each holding its connection's permit; owned here too.
    let mut handshakes: JoinSet<Option<Handshaken>> = JoinSet::new();
    let handshake_timeout = super::tls::HANDSHAKE_TIMEOUT.min(l.limits.idle);
    let mut links = Links::default();
    let mut sweep = tokio::time::interval(sweep_period(l.limits.idle));
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let permit = loop {
            tokio::select! {
                p = l.permits.clone().acquire_owned() => break p.ok().map(Arc::new),
                _ = shutdown.changed() => break None,
                _ = sweep.tick() => links.check_idle(l.limits.idle),
                Some(done) = handshakes.join_next(), if !handshakes.is_empty() => {
                    l.serve_handshaken(done, &mut connections, &mut links)
                }
            }
        };
        let Some(permit) = permit else { break };
        let accepted = loop {
            tokio::select! {
                a = l.listener.accept() => break Some(a),
                _ = shutdown.changed() => break None,
                _ = sweep.tick() => links.check_idle(l.limits.idle),
                Some(done) = handshakes.join_next(), if !handshakes.is_empty() => {
                    l.serve_handshaken(done, &mut connections, &mut links)
                }
            }
        };
        let Some(accepted) = accepted else { break };
        match accepted {
            Ok((stream, peer)) => {
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!(%peer, error = %e, "cannot set TCP_NODELAY");
                }
                let tls = l.tls.read().clone();
                match tls {
                    None => {
                        let transport = PlainTransport(stream);
                        let session = Session::new(l.name.clone(), l.protocol, peer);
                        l.serve(transport, session, permit, &mut connections, &mut links);
                    }
                    // The handshake runs in a task of its own, so a slow client delays no
                    // other; it holds the connection's permit meanwhile.
                    Some(tls) => {
                        let name = l.name.clone();
                        let counts = l.connections.clone();
                        let protocol = l.protocol;
                        handshakes.spawn(async move {
                            match TlsTransport::accept(&tls, stream, handshake_timeout).await {
                                Ok((transport, principal)) => {
                                    let mut session = Session::new(name, protocol, peer);
                                    // SASL_SSL: SASL names the principal, once authenticated.
                                    if !protocol.is_sasl() {
                                        session.principal = principal;
                                    }
                                    Some(Handshaken {
                                        transport,
                                        session,
                                        permit,
                                    })
                                }
                                Err(e) => {
                                    tracing::warn!(%peer, listener = %name, "closing connection: {e}");
                                    counts.failed_authentication();
                                    None
                                }
                            }
                        });
                    }
                }
            }
            Err(e) => {
                // Typically EMFILE: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        while connections.try_join_next().is_some() {}
    }
    // Handshakes under way end with the listener.
    handshakes.abort_all();
    // Readers stop; writers answer what was read, until told to abort them; then wait
    // for the aborted tasks to end.
    links.stop_all();
    let mut aborting = false;
    loop {
        tokio::select! {
            next = connections.join_next() => if next.is_none() { break },
            _ = abort.wait_for(|a| *a), if !aborting => {
                aborting = true;
                connections.abort_all();
            }
        }
    }
}

/// Dropped when both halves of a connection have ended: what the broker keeps per
/// connection is let go (Kafka's `ConnectionDisconnectListener`s): the share session the
/// connection opened is closed and its member's records released.
struct Disconnect {
    broker: Arc<Broker>,
    connection_id: u64,
}

impl Drop for Disconnect {
    fn drop(&mut self) {
        self.broker.shares.connection_closed(self.connection_id);
    }
}

/// A TLS connection whose handshake is done, waiting to be served.
struct Handshaken {
    transport: TlsTransport,
    session: Session,
    permit: Arc<tokio::sync::OwnedSemaphorePermit>,
}

impl Listening {
    /// Opens a connection over `transport` and runs its reader and writer.
    fn serve<T: Transport>(
        &self,
        transport: T,
        session: Session,
        permit: Arc<tokio::sync::OwnedSemaphorePermit>,
        connections: &mut JoinSet<()>,
        links: &mut Links,
    ) {
        let closed = Arc::new(Disconnect {
            broker: self.broker.clone(),
            connection_id: session.connection_id,
        });
        let (reader, writer, link) = connection::open(
            transport,
            session,
            self.sasl.read().clone(),
            self.broker.clone(),
            self.limits,
            self.memory.clone(),
        );
        links.add(link);
        // The connection counts against max.connections, and as open, until both
        // halves end. `map`, not an `async` block that awaits them: a block would hold
        // each future twice (as captured and as awaited), doubling its task's size.
        let open = Arc::new(self.connections.opened());
        let held = (permit.clone(), open.clone(), closed.clone());
        connections.spawn(reader.map(move |()| drop(held)));
        connections.spawn(writer.map(move |()| drop((permit, open, closed))));
    }

    fn serve_handshaken(
        &self,
        done: Result<Option<Handshaken>, tokio::task::JoinError>,
        connections: &mut JoinSet<()>,
        links: &mut Links,
    ) {
        if let Ok(Some(h)) = done {
            self.serve(h.transport, h.session, h.permit, connections, links);
        }
    }
}

/// How often a listener looks for connections idle past `idle`: a connection is closed at
/// most this late.
fn sweep_period(idle: Duration) -> Duration {
    (idle / 10).clamp(Duration::from_millis(10), Duration::from_secs(1))
}

/// A listener's open connections, for its idle sweep and its shutdown.
#[derive(Default)]
struct Links {
    links: Vec<Arc<Link>>,
    /// Ended connections are dropped from `links` once it grows to this many.
    prune_at: usize,
}

impl Links {
    fn add(&mut self, link: Arc<Link>) {
        if self.links.len() >= self.prune_at {
            self.prune();
            self.prune_at = (self.links.len() * 2).max(64);
        }
        self.links.push(link);
    }

    /// Drops the connections whose reader and writer have both ended (only this list
    /// still holds their link).
    fn prune(&mut self) {
        self.links.retain(|link| Arc::strong_count(link) > 1);
    }

    /// Has each connection that has read and written nothing for `idle` check whether it
    /// is idle.
    fn check_idle(&mut self, idle: Duration) {
        self.prune();
        for link in &self.links {
            if link.idle_for() >= idle {
                link.check_idle();
            }
        }
    }

    fn stop_all(&mut self) {
        for link in self.links.drain(..) {
            link.stop();
        }
    }
}
