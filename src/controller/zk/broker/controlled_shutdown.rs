//! Controlled shutdown from the broker's side (Kafka's `KafkaServer.controlledShutdown`):
//! before a ZooKeeper-mode broker closes its session it asks the controller with
//! ControlledShutdown to move its leaderships away, so clients switch leaders without
//! waiting for the session to expire. It retries, `controlled.shutdown.retry.backoff.ms`
//! apart, until the controller answers that nothing is left to move, at most
//! `controlled.shutdown.max.retries` times; then the broker goes down anyway (as Kafka,
//! an unclean shutdown from the cluster's point of view: the session's end moves what
//! is left).

use std::time::Duration;

use kafka_protocol::messages::{BrokerId, ControlledShutdownRequest};

use crate::client::{Client, ClientConfig};
use crate::config::BrokerConfig;

/// The version Kafka 3.9 brokers send.
pub const CONTROLLED_SHUTDOWN_VERSION: i16 = 3;

#[derive(Clone, Debug)]
pub struct ShutdownSettings {
    /// `controlled.shutdown.enable` (default true).
    pub enable: bool,
    /// `controlled.shutdown.max.retries` (default 3).
    pub max_retries: u32,
    /// `controlled.shutdown.retry.backoff.ms` (default 5000).
    pub retry_backoff: Duration,
    /// `request.timeout.ms` (default 30000), for each attempt.
    pub request_timeout: Duration,
    /// TLS toward the controller's inter-broker listener; `None`: plain TCP.
    pub outbound_tls: Option<crate::tls::OutboundTls>,
    /// SASL toward the controller's inter-broker listener; `None`: no SASL.
    pub outbound_sasl: Option<crate::sasl::settings::ClientCredentials>,
}

impl ShutdownSettings {
    pub fn from_config(config: &BrokerConfig) -> ShutdownSettings {
        let typed = &config.zookeeper.controlled_shutdown;
        ShutdownSettings {
            enable: typed.enable,
            max_retries: typed.max_retries,
            retry_backoff: typed.retry_backoff,
            request_timeout: config.zookeeper.request_timeout,
            outbound_tls: None,
            outbound_sasl: None,
        }
    }
}

/// Where the controller is now: its id and address, None while no controller is known.
pub type FindController<'a> = dyn Fn() -> Option<(i32, String)> + Send + Sync + 'a;

/// This broker's epoch now: the version of its registration znode, which a new session
/// (the old one expired) replaces.
pub type BrokerEpoch<'a> = dyn Fn() -> i64 + Send + Sync + 'a;

/// Asks the controller until it has moved every leadership away, within the retries.
/// Returns whether it succeeded.
pub async fn run(
    settings: &ShutdownSettings,
    broker_id: i32,
    broker_epoch: &BrokerEpoch<'_>,
    find_controller: &FindController<'_>,
) -> bool {
    if !settings.enable {
        return false;
    }
    tracing::info!(broker_id, "starting controlled shutdown");
    for attempt in 0..=settings.max_retries {
        if attempt > 0 {
            tokio::time::sleep(settings.retry_backoff).await;
            tracing::info!(
                attempt,
                "retrying controlled shutdown after the previous attempt failed"
            );
        }
        let Some((controller, address)) = find_controller() else {
            tracing::warn!("no controller known for controlled shutdown");
            continue;
        };
        // The epoch of each attempt, as Kafka's: a broker that registered again (its session
        // expired) since the last attempt would otherwise be refused with
        // STALE_BROKER_EPOCH on every retry and go down uncleanly.
        if attempt_once(settings, broker_id, broker_epoch(), controller, &address).await {
            return true;
        }
    }
    tracing::warn!(
        "proceeding with an unclean shutdown after the controlled shutdown attempts failed"
    );
    false
}

/// One ControlledShutdown request to the controller: true once it answers that this broker
/// leads nothing any more.
async fn attempt_once(
    settings: &ShutdownSettings,
    broker_id: i32,
    broker_epoch: i64,
    controller: i32,
    address: &str,
) -> bool {
    let request = ControlledShutdownRequest::default()
        .with_broker_id(BrokerId(broker_id))
        .with_broker_epoch(broker_epoch);
    let Some(client) = controller_client(settings, broker_id, address).await else {
        tracing::warn!(controller, %address, "cannot resolve the controller's address");
        return false;
    };
    match client.send(&request, CONTROLLED_SHUTDOWN_VERSION).await {
        Ok(r) if r.error_code == 0 && r.remaining_partitions.is_empty() => {
            tracing::info!(
                controller,
                "Controlled shutdown request returned successfully"
            );
            true
        }
        Ok(r) if r.error_code == 0 => {
            let remaining: Vec<String> = r
                .remaining_partitions
                .iter()
                .map(|p| format!("{}-{}", p.topic_name.0, p.partition_index))
                .collect();
            tracing::info!(
                controller,
                ?remaining,
                "partitions still to move before shutdown"
            );
            false
        }
        Ok(r) => {
            tracing::warn!(
                controller,
                error_code = r.error_code,
                "controlled shutdown refused"
            );
            false
        }
        Err(e) => {
            tracing::warn!(controller, error = %e, "controlled shutdown request failed");
            false
        }
    }
}

/// A client for the controller at `address` ("host:port"), speaking the inter-broker
/// listener's TLS and SASL; None when the address does not resolve.
async fn controller_client(
    settings: &ShutdownSettings,
    broker_id: i32,
    address: &str,
) -> Option<Client> {
    let addr = tokio::net::lookup_host(address).await.ok()?.next()?;
    Some(Client::new(
        addr,
        ClientConfig {
            client_id: Some(broker_id.to_string()),
            request_timeout: settings.request_timeout,
            tls: settings.outbound_tls.clone(),
            sasl: settings.outbound_sasl.clone(),
            server_name: address.rsplit_once(':').map(|(host, _)| {
                host.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_string()
            }),
            ..ClientConfig::default()
        },
    ))
}

#[cfg(test)]
#[path = "controlled_shutdown_tests.rs"]
mod tests;
