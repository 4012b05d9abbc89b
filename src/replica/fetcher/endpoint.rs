//! The leader a fetcher replicates from (Kafka's `LeaderEndPoint`): Fetch for records,
//! ListOffsets for the leader's log start and end when a fetch offset is out of range.
//! Over the network it is one outbound client per fetcher; tests put a partition of
//! another replica manager behind it.

use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};

use crate::client::reconnecting::negotiate;
use crate::client::{Client, ClientConfig, ClientError};
use crate::log::TopicPartition;

/// Fetch versions a follower sends: from v12 the leader answers a divergent log with the
/// epoch it diverges at (KIP-320); v17 is what Kafka 3.9's followers send.
pub const FETCH_MIN_VERSION: i16 = 12;
pub const FETCH_MAX_VERSION: i16 = 17;
/// ListOffsets versions a follower sends (v2+: isolation level; up to what Kafka 3.9 has).
const LIST_OFFSETS_MIN_VERSION: i16 = 1;
const LIST_OFFSETS_MAX_VERSION: i16 = 9;

#[async_trait]
pub trait LeaderEndpoint: Send + Sync {
    /// The Fetch version both sides speak (at least `FETCH_MIN_VERSION`).
    async fn fetch_version(&self) -> Result<i16, ClientError>;

    async fn fetch(
        &self,
        request: &FetchRequest,
        version: i16,
    ) -> Result<FetchResponse, ClientError>;

    /// The leader's offset for `timestamp` (EARLIEST -2 or LATEST -1) of one partition,
    /// asked as replica `replica_id`; `Err` with the partition's error code.
    async fn list_offset(
        &self,
        tp: &TopicPartition,
        replica_id: i32,
        current_leader_epoch: i32,
        timestamp: i64,
    ) -> Result<Result<i64, i16>, ClientError>;
}

/// Creates the endpoint for a leader at an address.
pub trait EndpointFactory: Send + Sync {
    fn connect(
        &self,
        broker_id: i32,
        addr: SocketAddr,
        fetcher_id: usize,
    ) -> Arc<dyn LeaderEndpoint>;
}

/// A leader over the network.
pub struct RemoteLeader {
    client: Client,
}

#[async_trait]
impl LeaderEndpoint for RemoteLeader {
    async fn fetch_version(&self) -> Result<i16, ClientError> {
        let versions = self.client.api_versions().await?;
        negotiate(
            &versions,
            FetchRequest::KEY,
            FETCH_MIN_VERSION,
            FETCH_MAX_VERSION,
        )
    }

    async fn fetch(
        &self,
        request: &FetchRequest,
        version: i16,
    ) -> Result<FetchResponse, ClientError> {
        self.client.send(request, version).await
    }

    async fn list_offset(
        &self,
        tp: &TopicPartition,
        replica_id: i32,
        current_leader_epoch: i32,
        timestamp: i64,
    ) -> Result<Result<i64, i16>, ClientError> {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(replica_id))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(tp.partition)
                    .with_current_leader_epoch(current_leader_epoch)
                    .with_timestamp(timestamp)])]);
        let (_, response): (i16, ListOffsetsResponse) = self
            .client
            .send_negotiated(&request, LIST_OFFSETS_MIN_VERSION, LIST_OFFSETS_MAX_VERSION)
            .await?;
        let found = response
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition_index == tp.partition);
        Ok(match found {
            None => Err(kafka_protocol::error::ResponseError::UnknownServerError.code()),
            Some(p) if p.error_code != 0 => Err(p.error_code),
            Some(p) => Ok(p.offset),
        })
    }
}

/// Fetchers' connections: one client per fetcher, with `replica.socket.timeout.ms` as
/// its request timeout and the largest response `replica.fetch.response.max.bytes`
/// allows (one partition's batch may exceed it, as KIP-74 lets the first one).
pub struct NetworkEndpoints {
    pub local_id: i32,
    pub config: ClientConfig,
}

impl EndpointFactory for NetworkEndpoints {
    fn connect(
        &self,
        broker_id: i32,
        addr: SocketAddr,
        fetcher_id: usize,
    ) -> Arc<dyn LeaderEndpoint> {
        let mut config = self.config.clone();
        config.client_id = Some(format!(
            "broker-{}-fetcher-{fetcher_id}-from-{broker_id}",
            self.local_id
        ));
        Arc::new(RemoteLeader {
            client: Client::new(addr, config),
        })
    }
}
