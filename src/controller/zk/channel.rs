//! The controller's channels to brokers (Kafka's `ControllerChannelManager`): one queue
//! and one sending task per live broker, so each broker receives the controller's
//! requests one at a time and in the order they were decided. A request that fails
//! (connection refused, timeout) is retried every 100 ms on a new connection until it is
//! answered or the broker is removed, as Kafka's `RequestSendThread` does: a broker must
//! not miss a state change. Answers that matter to the controller go back to its event
//! loop.
//!
//! With an [`Outbox`] (unit tests, the cluster simulation) nothing is sent: each request
//! is recorded in the order decided, with the event queue its answer goes to, for the
//! caller to deliver, lose or reorder.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use tokio::sync::mpsc;

use super::context::LiveBroker;
use super::event_loop::Event;
use super::requests::ControlRequest;
use crate::client::{Client, ClientConfig, ClientError};

const RETRY_BACKOFF: Duration = Duration::from_millis(100);

enum BrokerChannel {
    Network {
        queue: mpsc::UnboundedSender<ControlRequest>,
        sender: tokio::task::JoinHandle<()>,
    },
    /// Requests go to the outbox, stamped with the broker's epoch as registered.
    Recorded { broker_epoch: i64, outbox: Outbox },
}

impl Drop for BrokerChannel {
    fn drop(&mut self) {
        if let BrokerChannel::Network { sender, .. } = self {
            sender.abort();
        }
    }
}

/// A controller request recorded instead of sent.
pub struct Sent {
    pub from: i32,
    pub to: i32,
    /// The epoch of the registration the controller addressed.
    pub broker_epoch: i64,
    pub request: ControlRequest,
    /// The event loop that sent it: answers go here.
    pub events: mpsc::UnboundedSender<Event>,
}

/// Where controller requests go instead of the network, in the order decided.
#[derive(Clone, Default)]
pub struct Outbox(Arc<Mutex<Vec<Sent>>>);

impl Outbox {
    /// Everything recorded since the last call.
    pub fn take(&self) -> Vec<Sent> {
        std::mem::take(&mut self.0.lock())
    }
}

pub struct ChannelManager {
    controller_id: i32,
    listener: String,
    request_timeout: Duration,
    /// TLS toward the brokers' inter-broker listener; `None`: plain TCP.
    tls: Option<crate::tls::OutboundTls>,
    /// SASL toward the brokers' inter-broker listener; `None`: no SASL.
    sasl: Option<crate::sasl::settings::ClientCredentials>,
    events: mpsc::UnboundedSender<Event>,
    channels: BTreeMap<i32, BrokerChannel>,
    outbox: Option<Outbox>,
}

impl ChannelManager {
    pub fn new(
        controller_id: i32,
        listener: String,
        request_timeout: Duration,
        tls: Option<crate::tls::OutboundTls>,
        sasl: Option<crate::sasl::settings::ClientCredentials>,
        events: mpsc::UnboundedSender<Event>,
        outbox: Option<Outbox>,
    ) -> Self {
        ChannelManager {
            controller_id,
            listener,
            request_timeout,
            tls,
            sasl,
            events,
            channels: BTreeMap::new(),
            outbox,
        }
    }

    pub fn add_broker(&mut self, broker: &LiveBroker) {
        if self.channels.contains_key(&broker.id) {
            return;
        }
        let Some(endpoint) = broker.endpoint(&self.listener) else {
            tracing::error!(broker = broker.id, listener = %self.listener, "broker has no endpoint for the inter-broker listener; it gets no requests");
            return;
        };
        if let Some(outbox) = &self.outbox {
            let channel = BrokerChannel::Recorded {
                broker_epoch: broker.epoch,
                outbox: outbox.clone(),
            };
            self.channels.insert(broker.id, channel);
            return;
        }
        // The queue is unbounded as Kafka's is: it holds the state changes decided and not
        // yet delivered, which a broker must receive in full and in order.
        let (tx, rx) = mpsc::unbounded_channel();
        let config = ClientConfig {
            // Kafka's controller names itself by its broker id.
            client_id: Some(self.controller_id.to_string()),
            request_timeout: self.request_timeout,
            max_in_flight: 1,
            tls: self.tls.clone(),
            sasl: self.sasl.clone(),
            server_name: Some(endpoint.host.clone()),
            ..ClientConfig::default()
        };
        let sender = tokio::spawn(send_loop(
            broker.id,
            format!("{}:{}", endpoint.host, endpoint.port),
            config,
            rx,
            self.events.clone(),
        ));
        self.channels
            .insert(broker.id, BrokerChannel::Network { queue: tx, sender });
    }

    /// Stops sending to a broker; what its queue still holds is dropped.
    pub fn remove_broker(&mut self, id: i32) {
        self.channels.remove(&id);
    }

    pub fn send(&self, broker: i32, request: ControlRequest) {
        match self.channels.get(&broker) {
            Some(BrokerChannel::Network { queue, .. }) => {
                if queue.send(request).is_err() {
                    tracing::warn!(broker, "channel closed; request dropped");
                }
            }
            Some(BrokerChannel::Recorded {
                broker_epoch,
                outbox,
            }) => {
                outbox.0.lock().push(Sent {
                    from: self.controller_id,
                    to: broker,
                    broker_epoch: *broker_epoch,
                    request,
                    events: self.events.clone(),
                });
            }
            None => tracing::warn!(broker, "not sending to broker {broker}: it is offline"),
        }
    }

    pub fn clear(&mut self) {
        self.channels.clear();
    }
}

async fn resolve(address: &str) -> Option<SocketAddr> {
    tokio::net::lookup_host(address).await.ok()?.next()
}

async fn send_loop(
    broker: i32,
    address: String,
    config: ClientConfig,
    mut queue: mpsc::UnboundedReceiver<ControlRequest>,
    events: mpsc::UnboundedSender<Event>,
) {
    let mut client: Option<Client> = None;
    // Failed attempts in a row: the first is a warning, the retries are not news.
    let mut failures = 0u32;
    while let Some(request) = queue.recv().await {
        loop {
            let c = match &client {
                Some(c) => c,
                None => match resolve(&address).await {
                    Some(addr) => client.insert(Client::new(addr, config.clone())),
                    None => {
                        tracing::warn!(broker, %address, "cannot resolve broker address");
                        tokio::time::sleep(RETRY_BACKOFF).await;
                        continue;
                    }
                },
            };
            match deliver(c, broker, &request, &events).await {
                Ok(()) => {
                    if failures > 0 {
                        tracing::info!(broker, %address, failures, "controller request delivered after retries");
                    }
                    failures = 0;
                    break;
                }
                Err(e) => {
                    if failures == 0 {
                        tracing::warn!(broker, %address, error = %e, "controller request failed; resending every 100 ms until delivered");
                    } else {
                        tracing::debug!(broker, %address, error = %e, "controller request failed again");
                    }
                    failures = failures.saturating_add(1);
                    client = None;
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
            }
        }
    }
}

async fn deliver(
    client: &Client,
    broker: i32,
    request: &ControlRequest,
    events: &mpsc::UnboundedSender<Event>,
) -> Result<(), ClientError> {
    match request {
        ControlRequest::LeaderAndIsr { request, version } => {
            let response = client.send(request, *version).await?;
            let _ = events.send(Event::LeaderAndIsrResponse { broker, response });
        }
        ControlRequest::UpdateMetadata { request, version } => {
            let response = client.send(request, *version).await?;
            if response.error_code != 0 {
                tracing::error!(
                    broker,
                    error = response.error_code,
                    "UpdateMetadata answered with an error"
                );
            }
        }
        ControlRequest::StopReplica {
            request,
            version,
            deleting,
        } => {
            let response = client.send(request, *version).await?;
            if !deleting.is_empty() {
                let _ = events.send(Event::StopReplicaResponse {
                    broker,
                    response,
                    deleting: deleting.clone(),
                });
            }
        }
    }
    Ok(())
}
