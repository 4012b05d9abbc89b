//! Connections, version negotiation, topic creation and the wait for leaders.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiVersionsRequest, CreateTopicsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use skua::client::reconnecting::{negotiate, ApiVersions};
use skua::client::{ClientConfig, Connection};

/// TOPIC_ALREADY_EXISTS: a topic from an earlier run is used as it is.
const TOPIC_ALREADY_EXISTS: i16 = 36;

/// One connection to the broker and the API versions it handles.
pub struct Broker {
    pub conn: Arc<Connection>,
    versions: ApiVersions,
}

impl Broker {
    /// The highest version of `api_key` in `min..=max` the broker handles.
    pub fn version(&self, api_key: i16, min: i16, max: i16) -> Result<i16, String> {
        negotiate(&self.versions, api_key, min, max).map_err(|e| e.to_string())
    }
}

pub async fn connect(addr: SocketAddr) -> Result<Broker, String> {
    let config = ClientConfig {
        client_id: Some("skua-load".into()),
        max_in_flight: 1000,
        ..ClientConfig::default()
    };
    let conn = Connection::connect(addr, &config)
        .await
        .map_err(|e| e.to_string())?;
    let response = conn
        .send(&ApiVersionsRequest::default(), 0)
        .await
        .map_err(|e| format!("ApiVersions: {e}"))?;
    if response.error_code != 0 {
        return Err(format!("ApiVersions: error code {}", response.error_code));
    }
    let versions = response
        .api_keys
        .iter()
        .map(|k| (k.api_key, (k.min_version, k.max_version)))
        .collect();
    Ok(Broker {
        conn: Arc::new(conn),
        versions,
    })
}

pub async fn connect_all(addr: SocketAddr, n: usize) -> Result<Vec<Broker>, String> {
    let mut all = Vec::with_capacity(n);
    for _ in 0..n {
        all.push(connect(addr).await?);
    }
    Ok(all)
}

pub async fn create_topic(broker: &Broker, topic: &str, partitions: i32) -> Result<(), String> {
    let version = broker.version(19, 2, 7)?;
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(60_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_num_partitions(partitions)
            .with_replication_factor(1)]);
    let resp = broker
        .conn
        .send(&req, version)
        .await
        .map_err(|e| format!("CreateTopics: {e}"))?;
    match resp.topics.first().map(|t| t.error_code) {
        Some(0) | Some(TOPIC_ALREADY_EXISTS) => Ok(()),
        Some(code) => Err(format!("CreateTopics {topic}: error code {code}")),
        None => Err(format!("CreateTopics {topic}: no answer for the topic")),
    }
}

/// Waits (up to a minute) until every partition of `topic` has a leader: a broker may
/// answer CreateTopics before its partitions are ready.
pub async fn wait_for_leaders(broker: &Broker, topic: &str, partitions: i32) -> Result<(), String> {
    let version = broker.version(3, 1, 12)?;
    let req = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.into()))))]));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let resp = broker
            .conn
            .send(&req, version)
            .await
            .map_err(|e| format!("Metadata: {e}"))?;
        let led = resp
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| p.error_code == 0 && p.leader_id.0 >= 0)
            .count();
        if led >= partitions as usize {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!(
                "{topic}: {led} of {partitions} partitions have a leader after 60 s"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
