//! The member's session supervisor. A ZooKeeper session that expires is gone for good
//! (its `/brokers/ids/<id>` and, if this broker was the controller, its `/controller`
//! with it), so the member never carries on half-alive: the event loop of that session
//! ends (resigning, its queued requests dropped), and a new session registers the
//! broker again (a new broker epoch) and starts a new loop, which competes for the
//! controllership and re-reads everything.

use std::sync::Arc;
use std::time::Duration;

use super::event_loop::ControllerLoop;
use super::{registration, Shared};
use crate::zk::session::{SessionEvent, ZkSession};

const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Registers `/brokers/ids/<id>` on `session` and records the broker epoch.
pub(super) async fn register(shared: &Shared, session: &ZkSession) -> anyhow::Result<()> {
    let settings = &shared.settings;
    // An earlier process's registration lives until its session expires.
    let wait = settings.zk.session_timeout * 2 + Duration::from_secs(5);
    let epoch =
        registration::register_broker(session, settings.broker_id, &shared.registration(), wait)
            .await?;
    shared.set_broker_epoch(epoch);
    Ok(())
}

pub(super) async fn run(shared: Arc<Shared>, mut session: Arc<ZkSession>) {
    loop {
        let mut events = session.events();
        shared.session_metrics.connected();
        let controller =
            ControllerLoop::new(session.clone(), shared.settings.clone(), shared.clone());
        *shared.events.lock() = Some(controller.sender());
        let ended = tokio::select! {
            e = controller.run() => format!("{e}"),
            e = terminal(&mut events, &shared, session.session_timeout()) => format!("{e:?}"),
        };
        *shared.events.lock() = None;
        *shared.session.lock() = None;
        shared.reset();
        tracing::warn!(why = %ended, "ZooKeeper session ended; starting a new one, registering again and re-reading the cluster");
        session = reconnect(&shared).await;
        *shared.session.lock() = Some(session.clone());
    }
}

/// Waits for the session's end, marking its events on the metrics meanwhile. Cut off
/// from ZooKeeper for `session_timeout`, the session is gone at the servers (they expire
/// it then) although the client hears so only once it reaches one again: from that
/// moment, as at an expiry, this broker's leaderships are in doubt
/// (`ClusterView::doubt_leaderships`); a reconnection to the same session ends the doubt.
pub(super) async fn terminal(
    events: &mut crate::zk::session::SessionEvents,
    shared: &Shared,
    session_timeout: Duration,
) -> SessionEvent {
    let metrics = &shared.session_metrics;
    let mut lost_at: Option<tokio::time::Instant> = None;
    loop {
        let e = tokio::select! {
            e = events.next() => e,
            _ = tokio::time::sleep_until(lost_at.unwrap_or_else(tokio::time::Instant::now)), if lost_at.is_some() => {
                lost_at = None;
                shared.broker.doubt_leaderships();
                continue;
            }
        };
        match e {
            SessionEvent::Expired => metrics.expired(),
            SessionEvent::AuthFailed => metrics.auth_failed(),
            SessionEvent::Closed => metrics.closed(),
            SessionEvent::Disconnected => {
                metrics.disconnected();
                lost_at = Some(tokio::time::Instant::now() + session_timeout);
                tracing::warn!("ZooKeeper disconnected; the session may still survive")
            }
            SessionEvent::Reconnected => {
                metrics.connected();
                lost_at = None;
                shared.broker.session_survived();
                tracing::info!("ZooKeeper reconnected")
            }
        }
        if e.is_terminal() {
            shared.broker.doubt_leaderships();
            return e;
        }
    }
}

/// A new session with this broker registered, retried with backoff until it works.
async fn reconnect(shared: &Shared) -> Arc<ZkSession> {
    let mut backoff = Duration::from_millis(100);
    loop {
        match try_reconnect(shared).await {
            Ok(s) => return s,
            Err(e) => {
                tracing::warn!(error = %e, ?backoff, "cannot re-establish the ZooKeeper session");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
            }
        }
    }
}

async fn try_reconnect(shared: &Shared) -> anyhow::Result<Arc<ZkSession>> {
    let session = Arc::new(ZkSession::connect(&shared.settings.zk).await?);
    session.record_latency_in(shared.session_metrics.request_latency.clone());
    registration::create_top_level_paths(&session).await?;
    let id = registration::create_or_get_cluster_id(&session, &shared.cluster_id).await?;
    if id != shared.cluster_id {
        anyhow::bail!(
            "/cluster/id is {id}, but this broker belongs to cluster {}",
            shared.cluster_id
        );
    }
    register(shared, &session).await?;
    Ok(session)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicI64, Ordering};

    use super::*;
    use crate::controller::zk::broker::HostedReplicas;
    use crate::controller::zk::testkit;
    use crate::replica::cluster_view::ClusterView;
    use crate::zk::memory::Ensemble;
    use crate::zk::session::ZkConfig;

    /// The replica side as the member drives it: the cluster view's doubt, nothing else.
    struct Replicas(ClusterView, AtomicI64);

    impl HostedReplicas for Replicas {
        fn log_topic_id(&self, _: &str, _: i32) -> Option<uuid::Uuid> {
            None
        }
        fn is_offline(&self, _: &str, _: i32) -> bool {
            false
        }
        fn stop_replica(&self, _: &str, _: i32) {}
        fn set_broker_epoch(&self, epoch: i64) {
            self.1.store(epoch, Ordering::Release);
            self.0.set_broker_epoch(epoch);
        }
        fn doubt_leaderships(&self) {
            self.0.doubt_leaderships();
        }
        fn session_survived(&self) {
            self.0.session_survived();
        }
        fn heard_from_controller(&self, request_broker_epoch: i64) {
            self.0.heard_from_controller(request_broker_epoch);
        }
    }

    async fn member(timeout: Duration) -> (Ensemble, Arc<ZkSession>, Arc<Shared>, Arc<Replicas>) {
        let (ensemble, session, shared) = testkit::member_shared(timeout).await;
        let replicas = Arc::new(Replicas(ClusterView::new(1), AtomicI64::new(-1)));
        shared.broker.host_replicas(replicas.clone()).unwrap();
        register(&shared, &session).await.unwrap();
        replicas.set_broker_epoch(shared.broker_epoch());
        (ensemble, session, shared, replicas)
    }

    #[tokio::test(start_paused = true)]
    async fn cut_off_past_the_session_timeout_the_leaderships_are_in_doubt_until_reconnected() {
        let timeout = Duration::from_secs(6);
        let (ensemble, session, shared, replicas) = member(timeout).await;
        let mut events = session.events();
        let watching = {
            let shared = shared.clone();
            tokio::spawn(async move { terminal(&mut events, &shared, timeout).await })
        };
        tokio::task::yield_now().await;
        ensemble.set_connected(session.session_id(), false);
        // Within the session timeout the session may still survive: leaderships stand.
        tokio::time::sleep(timeout - Duration::from_millis(100)).await;
        assert!(!replicas.0.leaderships_in_doubt());
        // Past it, the servers have expired the session, whatever the client heard.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(replicas.0.leaderships_in_doubt());
        // Reaching a server again with the same session: it survived after all.
        ensemble.set_connected(session.session_id(), true);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!replicas.0.leaderships_in_doubt());
        // A short disconnection raises no doubt.
        ensemble.set_connected(session.session_id(), false);
        tokio::time::sleep(Duration::from_secs(1)).await;
        ensemble.set_connected(session.session_id(), true);
        tokio::time::sleep(timeout * 2).await;
        assert!(!replicas.0.leaderships_in_doubt());
        watching.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn after_an_expiry_only_a_leader_and_isr_to_the_new_registration_ends_the_doubt() {
        let timeout = Duration::from_secs(6);
        let (ensemble, session, shared, replicas) = member(timeout).await;
        let old_epoch = replicas.1.load(Ordering::Acquire);
        let mut events = session.events();
        let watching = {
            let shared = shared.clone();
            tokio::spawn(async move { terminal(&mut events, &shared, timeout).await })
        };
        tokio::task::yield_now().await;
        ensemble.expire(session.session_id());
        assert_eq!(watching.await.unwrap(), SessionEvent::Expired);
        assert!(replicas.0.leaderships_in_doubt());
        // A LeaderAndIsr the controller sent the old registration settles nothing.
        replicas.heard_from_controller(old_epoch);
        assert!(replicas.0.leaderships_in_doubt());
        // The broker registers again (a new epoch); the controller's next LeaderAndIsr
        // carries it.
        let config = ZkConfig::in_memory(ensemble.clone(), timeout);
        let next = ZkSession::connect(&config).await.unwrap();
        register(&shared, &next).await.unwrap();
        let new_epoch = shared.broker_epoch();
        assert!(new_epoch > old_epoch);
        assert!(replicas.0.leaderships_in_doubt());
        replicas.heard_from_controller(new_epoch);
        assert!(!replicas.0.leaderships_in_doubt());
    }
}
