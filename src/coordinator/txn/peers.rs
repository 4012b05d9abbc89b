//! What the transaction machinery asks other brokers, each request at the highest
//! version both sides speak:
//! - WriteTxnMarkers to partitions' leader (Kafka's `TransactionMarkerChannelManager`
//!   sending side, `marker_sender.rs`), each partition's answer handed back for the
//!   coordinator to decide on a retry;
//! - AddPartitionsToTxn verify-only to a transactional id's coordinator (Kafka's
//!   `AddPartitionsToTxnManager`, KIP-890), before a partition led here opens a
//!   transaction.
//!
//! Each kind has its own connection to each broker, as Kafka's marker sender and
//! `AddPartitionsToTxnManager` have their own network clients: a broker answers one
//! request of a connection at a time, and a WriteTxnMarkers is answered only once its
//! markers are replicated, so a verification queued behind markers would wait for that
//! replication (seconds on a loaded machine) while the producer's TxnOffsetCommit or
//! produce that needs it waits too, past the producer's request timeout.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, ProducerId, TopicName, TransactionalId};
use kafka_protocol::protocol::StrBytes;

use super::marker_sender::{MarkerAnswer, MarkerQueues, PendingMarker};
use crate::client::{Client, ClientConfig};
use crate::log::TopicPartition;
use crate::replica::cluster_view::ClusterView;

/// AddPartitionsToTxn versions with verify-only transactions (KIP-890).
const VERIFY_MIN_VERSION: i16 = 4;
const VERIFY_MAX_VERSION: i16 = 5;

pub struct TxnPeers {
    cluster: Arc<ClusterView>,
    /// Each broker's queue of markers, sent on connections of their own.
    markers: MarkerQueues,
    /// Connections carrying verify-only AddPartitionsToTxn.
    verify: Clients,
}

/// One client per broker, replaced when the broker's address changes.
pub struct Clients {
    config: ClientConfig,
    by_broker: parking_lot::Mutex<HashMap<i32, Arc<Client>>>,
}

impl Clients {
    /// `config` with the client id suffixed by `purpose`, so each connection says
    /// what it carries in the other broker's logs.
    pub fn new(config: &ClientConfig, purpose: &str) -> Self {
        let client_id = config
            .client_id
            .as_ref()
            .map(|id| format!("{id}-{purpose}"));
        Clients {
            config: ClientConfig {
                client_id,
                ..config.clone()
            },
            by_broker: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    pub fn client(&self, cluster: &ClusterView, broker: i32) -> Option<Arc<Client>> {
        let addr = cluster.address(broker)?;
        let config = ClientConfig {
            server_name: cluster.broker(broker).map(|b| b.host),
            ..self.config.clone()
        };
        let mut clients = self.by_broker.lock();
        let client = clients
            .entry(broker)
            .and_modify(|c| {
                if c.addr() != addr {
                    *c = Arc::new(Client::new(addr, config.clone()));
                }
            })
            .or_insert_with(|| Arc::new(Client::new(addr, config)));
        Some(client.clone())
    }
}

impl TxnPeers {
    pub fn new(cluster: Arc<ClusterView>, config: ClientConfig) -> Self {
        TxnPeers {
            cluster: cluster.clone(),
            markers: MarkerQueues::new(cluster.clone(), Arc::new(Clients::new(&config, "markers"))),
            verify: Clients::new(&config, "verify"),
        }
    }

    /// Queues markers for `broker`, their partitions' leader, to leave together in its
    /// next WriteTxnMarkers (`marker_sender.rs`); their answers in the same order.
    pub fn write_markers(&self, broker: i32, markers: Vec<PendingMarker>) -> Vec<MarkerAnswer> {
        self.markers.enqueue(broker, markers)
    }

    /// Asks `broker`, the coordinator of `transactional_id`, whether each partition is in
    /// the producer's ongoing transaction. No answer is NOT_COORDINATOR: the caller's
    /// client retries, and the metadata of then names the coordinator again.
    pub async fn verify_partitions(
        &self,
        broker: i32,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Option<ResponseError>)>, ResponseError> {
        let Some(client) = self.verify.client(&self.cluster, broker) else {
            return Err(ResponseError::NotCoordinator);
        };
        let mut topics: Vec<AddPartitionsToTxnTopic> = Vec::new();
        for tp in partitions {
            match topics.last_mut() {
                Some(t) if t.name.0.as_str() == tp.topic => t.partitions.push(tp.partition),
                _ => topics.push(
                    AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                        .with_partitions(vec![tp.partition]),
                ),
            }
        }
        let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
            AddPartitionsToTxnTransaction::default()
                .with_transactional_id(TransactionalId(StrBytes::from_string(
                    transactional_id.to_string(),
                )))
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(producer_epoch)
                .with_verify_only(true)
                .with_topics(topics),
        ]);
        let response = match client
            .send_negotiated(&request, VERIFY_MIN_VERSION, VERIFY_MAX_VERSION)
            .await
        {
            Ok((_, response)) => response,
            Err(e) => {
                tracing::debug!(broker, transactional_id, error = %e, "AddPartitionsToTxn got no answer");
                return Err(ResponseError::NotCoordinator);
            }
        };
        if response.error_code != 0 {
            return Err(error(response.error_code));
        }
        let results = response
            .results_by_transaction
            .iter()
            .find(|t| t.transactional_id.0.as_str() == transactional_id);
        let Some(results) = results else {
            return Err(ResponseError::UnknownServerError);
        };
        Ok(partitions
            .iter()
            .map(|tp| {
                let code = results
                    .topic_results
                    .iter()
                    .filter(|t| t.name.0.as_str() == tp.topic)
                    .flat_map(|t| &t.results_by_partition)
                    .find(|p| p.partition_index == tp.partition)
                    .map_or(ResponseError::UnknownServerError.code(), |p| {
                        p.partition_error_code
                    });
                (tp.clone(), (code != 0).then(|| error(code)))
            })
            .collect())
    }
}

fn error(code: i16) -> ResponseError {
    ResponseError::try_from_code(code).unwrap_or(ResponseError::UnknownServerError)
}
