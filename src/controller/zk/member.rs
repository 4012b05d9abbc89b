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
use crate::metrics::zookeeper::SessionMetrics;
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
            e = terminal(&mut events, &shared.session_metrics) => format!("{e:?}"),
        };
        *shared.events.lock() = None;
        *shared.session.lock() = None;
        shared.reset();
        tracing::warn!(why = %ended, "ZooKeeper session ended; starting a new one, registering again and re-reading the cluster");
        session = reconnect(&shared).await;
        *shared.session.lock() = Some(session.clone());
    }
}

/// Waits for the session's end, marking its events on `metrics` meanwhile.
pub(super) async fn terminal(
    events: &mut crate::zk::session::SessionEvents,
    metrics: &SessionMetrics,
) -> SessionEvent {
    loop {
        let e = events.next().await;
        match e {
            SessionEvent::Expired => metrics.expired(),
            SessionEvent::AuthFailed => metrics.auth_failed(),
            SessionEvent::Closed => metrics.closed(),
            SessionEvent::Disconnected => {
                metrics.disconnected();
                tracing::warn!("ZooKeeper disconnected; the session may still survive")
            }
            SessionEvent::Reconnected => {
                metrics.connected();
                tracing::info!("ZooKeeper reconnected")
            }
        }
        if e.is_terminal() {
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
