//! The listeners' accept loops, the connection cap, and graceful shutdown.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use super::connection::{self, Limits};
use crate::broker::Broker;
use crate::config::BrokerConfig;

pub struct Server {
    listeners: Vec<TcpListener>,
    broker: Arc<Broker>,
    limits: Limits,
    max_connections: usize,
}

impl Server {
    /// Binds every configured listener, before the broker opens: a listener on port 0
    /// gets its port here, and the advertised listener of the same name takes that port
    /// (as in Kafka), so the broker registers an address clients can reach.
    pub async fn bind_listeners(config: &mut BrokerConfig) -> anyhow::Result<Vec<TcpListener>> {
        let mut listeners = Vec::new();
        for l in &config.listeners {
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
            listeners.push(listener);
        }
        Ok(listeners)
    }

    /// Serves `listeners` (from [`Server::bind_listeners`]) for `broker`.
    pub fn new(listeners: Vec<TcpListener>, broker: Arc<Broker>) -> Server {
        let cfg = &broker.config;
        let limits = Limits {
            max_frame_bytes: cfg.socket_request_max_bytes,
            max_in_flight: cfg.queued_max_requests,
            idle: Duration::from_millis(cfg.connections_max_idle_ms.max(1)),
        };
        Server {
            listeners,
            limits,
            max_connections: cfg.max_connections.min(Semaphore::MAX_PERMITS),
            broker,
        }
    }

    pub fn local_addrs(&self) -> Vec<std::net::SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// Serves until `stop` resolves, then stops accepting, lets connections answer what
    /// they have read, and returns once they are closed (or after a grace period).
    pub async fn run(self, stop: impl std::future::Future<Output = ()>) {
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let permits = Arc::new(Semaphore::new(self.max_connections));
        let mut accepts = JoinSet::new();
        for listener in self.listeners {
            accepts.spawn(accept_loop(
                listener,
                self.broker.clone(),
                self.limits,
                permits.clone(),
                shutdown_rx.clone(),
            ));
        }
        stop.await;
        tracing::info!("shutting down: no new connections");
        self.broker.begin_shutdown();
        let _ = shutdown_tx.send(true);
        let drain = async { while accepts.join_next().await.is_some() {} };
        if tokio::time::timeout(Duration::from_secs(30), drain)
            .await
            .is_err()
        {
            tracing::warn!("connections still open after 30 s; closing them");
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    broker: Arc<Broker>,
    limits: Limits,
    permits: Arc<Semaphore>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            _ = shutdown.changed() => break,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                let broker = broker.clone();
                let rx = shutdown.clone();
                connections.spawn(async move {
                    connection::serve(stream, peer, broker, limits, rx).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // Typically EMFILE: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        while connections.try_join_next().is_some() {}
    }
    while connections.join_next().await.is_some() {}
}
