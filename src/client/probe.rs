//! `skua --probe HOST:PORT`: the container health check. It asks a broker for its API
//! versions, which proves the listener accepts connections and the broker answers
//! requests (a bare TCP connect would pass while the broker is still opening its logs).

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use super::{Client, ClientConfig};

/// Sends ApiVersions to `addr` and returns how many APIs the broker advertises.
pub fn probe(addr: &str, timeout: Duration) -> anyhow::Result<usize> {
    let target: SocketAddr = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{addr} resolves to no address"))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = Client::new(
            target,
            ClientConfig {
                client_id: Some("skua-probe".into()),
                connect_timeout: timeout,
                request_timeout: timeout,
                ..ClientConfig::default()
            },
        );
        let versions = tokio::time::timeout(timeout, client.api_versions())
            .await
            .map_err(|_| anyhow::anyhow!("no answer from {target} within {timeout:?}"))??;
        Ok(versions.len())
    })
}
