//! The leader a fetcher replicates from (Kafka's `LeaderEndPoint`): Fetch for records,
//! OffsetForLeaderEpoch for where a follower's log parts from the leader's when its Fetch
//! version is too old to be told (below v12), ListOffsets for the leader's log start and
//! end when a fetch offset is out of range. Over the network it is one outbound client per
//! fetcher, whose request versions are at most what `inter.broker.protocol.version` names
//! (as a Kafka 3.9 broker at that version sends) and at most what the leader handles;
//! tests put a partition of another replica manager behind it.

use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};

use crate::client::reconnecting::negotiate;
use crate::client::{Client, ClientConfig, ClientError};
use crate::config::inter_broker_protocol::MetadataVersion;
use crate::log::TopicPartition;

/// Fetch versions a follower sends: from v4 records are in format v2, the only one skua
/// stores; v17 is what Kafka 3.9's followers send.
pub const FETCH_MIN_VERSION: i16 = 4;
pub const FETCH_MAX_VERSION: i16 = 17;
/// ListOffsets versions a follower sends (v2+: isolation level; up to what Kafka 3.9 has).
const LIST_OFFSETS_MIN_VERSION: i16 = 1;
const LIST_OFFSETS_MAX_VERSION: i16 = 9;
/// OffsetForLeaderEpoch versions a follower sends (up to what Kafka 3.9 has).
const OFFSET_FOR_LEADER_EPOCH_MAX_VERSION: i16 = 4;

/// One partition of an OffsetForLeaderEpoch request: the follower's latest epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochQuery {
    pub tp: TopicPartition,
    /// The leader epoch the follower follows in, so a stale leader refuses to answer.
    pub current_leader_epoch: i32,
    /// The epoch of the follower's last batch.
    pub leader_epoch: i32,
}

/// The leader's answer for one partition: the end offset of the largest epoch it knows at
/// or below the one asked (-1 and -1 when it knows none), or an error code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochEnd {
    pub tp: TopicPartition,
    pub error_code: i16,
    pub leader_epoch: i32,
    pub end_offset: i64,
}

#[async_trait]
pub trait LeaderEndpoint: Send + Sync {
    /// The Fetch version both sides speak (at least `FETCH_MIN_VERSION`); below v12 the
    /// leader does not tell a follower where its log diverges.
    async fn fetch_version(&self) -> Result<i16, ClientError>;

    /// Whether a follower asks OffsetForLeaderEpoch where its log parts from the leader's
    /// (Kafka's `isOffsetForLeaderEpochSupported`); if not, it truncates to its high
    /// watermark before fetching with an old Fetch version.
    fn is_offset_for_leader_epoch_supported(&self) -> bool;

    /// Which connection to the leader requests go on (it changes when one is replaced), so
    /// a fetcher starts a new fetch session on a new connection.
    fn connection_generation(&self) -> u64 {
        0
    }

    /// Each partition's end offset of its epoch on the leader (Kafka's
    /// `fetchEpochEndOffsets`), asked as replica `replica_id`.
    async fn fetch_epoch_end_offsets(
        &self,
        replica_id: i32,
        partitions: &[EpochQuery],
    ) -> Result<Vec<EpochEnd>, ClientError>;

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
    inter_broker_protocol: MetadataVersion,
}

#[async_trait]
impl LeaderEndpoint for RemoteLeader {
    async fn fetch_version(&self) -> Result<i16, ClientError> {
        let versions = self.client.api_versions().await?;
        let max = FETCH_MAX_VERSION.min(self.inter_broker_protocol.fetch_request_version());
        negotiate(&versions, FetchRequest::KEY, FETCH_MIN_VERSION, max)
    }

    fn is_offset_for_leader_epoch_supported(&self) -> bool {
        self.inter_broker_protocol
            .is_offset_for_leader_epoch_supported()
    }

    fn connection_generation(&self) -> u64 {
        self.client.connections_opened()
    }

    async fn fetch_epoch_end_offsets(
        &self,
        replica_id: i32,
        partitions: &[EpochQuery],
    ) -> Result<Vec<EpochEnd>, ClientError> {
        let request = build_offset_for_leader_epoch_request(replica_id, partitions);
        let max = OFFSET_FOR_LEADER_EPOCH_MAX_VERSION.min(
            self.inter_broker_protocol
                .offset_for_leader_epoch_request_version(),
        );
        let (_, response): (i16, OffsetForLeaderEpochResponse) =
            self.client.send_negotiated(&request, 0, max).await?;
        Ok(epoch_ends(partitions, &response))
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
        let max =
            LIST_OFFSETS_MAX_VERSION.min(self.inter_broker_protocol.list_offset_request_version());
        let (_, response): (i16, ListOffsetsResponse) = self
            .client
            .send_negotiated(&request, LIST_OFFSETS_MIN_VERSION, max)
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
    /// Where the leaders' advertised hosts are known (their certificates name them).
    pub cluster: Arc<crate::replica::cluster_view::ClusterView>,
    pub local_id: i32,
    pub config: ClientConfig,
    pub inter_broker_protocol: MetadataVersion,
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
        config.server_name = self.cluster.broker(broker_id).map(|b| b.host);
        Arc::new(RemoteLeader {
            client: Client::new(addr, config),
            inter_broker_protocol: self.inter_broker_protocol,
        })
    }
}

/// A follower's OffsetForLeaderEpoch, as Kafka 3.9's followers build it: topics by name in
/// the order first met, each partition with the follower's current leader epoch and its
/// latest epoch (fields a version lacks are not sent).
pub fn build_offset_for_leader_epoch_request(
    replica_id: i32,
    partitions: &[EpochQuery],
) -> OffsetForLeaderEpochRequest {
    let mut topics: Vec<OffsetForLeaderTopic> = Vec::new();
    for q in partitions {
        let p = OffsetForLeaderPartition::default()
            .with_partition(q.tp.partition)
            .with_current_leader_epoch(q.current_leader_epoch)
            .with_leader_epoch(q.leader_epoch);
        match topics.iter_mut().find(|t| t.topic.0.as_str() == q.tp.topic) {
            Some(t) => t.partitions.push(p),
            None => topics.push(
                OffsetForLeaderTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(q.tp.topic.clone())))
                    .with_partitions(vec![p]),
            ),
        }
    }
    OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(replica_id))
        .with_topics(topics)
}

/// The answer for each asked partition; one the leader left out is UNKNOWN_SERVER_ERROR,
/// so it is asked again after the backoff.
fn epoch_ends(asked: &[EpochQuery], response: &OffsetForLeaderEpochResponse) -> Vec<EpochEnd> {
    asked
        .iter()
        .map(|q| {
            let found = response
                .topics
                .iter()
                .filter(|t| t.topic.0.as_str() == q.tp.topic)
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition == q.tp.partition);
            match found {
                Some(p) => EpochEnd {
                    tp: q.tp.clone(),
                    error_code: p.error_code,
                    leader_epoch: p.leader_epoch,
                    end_offset: p.end_offset,
                },
                None => EpochEnd {
                    tp: q.tp.clone(),
                    error_code: kafka_protocol::error::ResponseError::UnknownServerError.code(),
                    leader_epoch: -1,
                    end_offset: -1,
                },
            }
        })
        .collect()
}
