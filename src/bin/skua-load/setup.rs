//! Connections, version negotiation, topic creation and the wait for leaders.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseBroker;
use kafka_protocol::messages::{
    ApiVersionsRequest, CreateTopicsRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use skua::client::reconnecting::{negotiate, ApiVersions};
use skua::client::{ClientConfig, Connection};
use skua::tls::settings::{Secret, StoreSource, TlsVersion, TruststoreSettings};
use skua::tls::{ClientAuth, OutboundTls, SslSettings};

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

/// TLS toward every broker, once [`use_tls`] set it: every connection of the run (to the
/// bootstrap broker, the controller, each leader) speaks it.
static TLS: OnceLock<OutboundTls> = OnceLock::new();

/// Has every connection of the run speak TLS, trusting `truststore` (PEM certificates, or
/// a PKCS12 store when `password` is given or the file ends in .p12/.pfx) and verifying
/// that each broker's certificate names the address connected to.
pub fn use_tls(truststore: &str, password: Option<&str>) -> Result<(), String> {
    let pkcs12 = password.is_some() || truststore.ends_with(".p12") || truststore.ends_with(".pfx");
    let settings = SslSettings {
        listener: "skua-load".into(),
        keystore: None,
        truststore: Some(TruststoreSettings {
            store_type: if pkcs12 { "PKCS12" } else { "PEM" }.into(),
            source: StoreSource::File(truststore.into()),
            password: password.map(|p| Secret(p.into())),
        }),
        enabled_protocols: vec![TlsVersion::Tls12, TlsVersion::Tls13],
        cipher_suites: Vec::new(),
        client_auth: ClientAuth::None,
        verify_hostname: true,
        principal_mapping_rules: "DEFAULT".into(),
    };
    let tls = OutboundTls::build(&settings).map_err(|e| format!("--tls-truststore: {e}"))?;
    TLS.set(tls).map_err(|_| "TLS is already set".to_string())
}

pub async fn connect(addr: SocketAddr) -> Result<Broker, String> {
    let config = ClientConfig {
        client_id: Some("skua-load".into()),
        tls: TLS.get().cloned(),
        max_in_flight: 1000,
        // Longer than any request's own timeout (CreateTopics asks for 60 s), so the
        // broker's answer, even a timeout error, is what the run reports.
        request_timeout: Duration::from_secs(90),
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

/// One connection to each leader in `leaders`, by address.
pub async fn connect_leaders(
    leaders: impl Iterator<Item = SocketAddr>,
) -> Result<BTreeMap<SocketAddr, Arc<Connection>>, String> {
    let mut conns = BTreeMap::new();
    for addr in leaders {
        if let std::collections::btree_map::Entry::Vacant(e) = conns.entry(addr) {
            e.insert(connect(addr).await?.conn);
        }
    }
    Ok(conns)
}

/// Creates the topic on the cluster's controller (as Kafka's admin client does: a broker
/// in a ZooKeeper-mode cluster that is not the controller answers NOT_CONTROLLER).
pub async fn create_topic(
    broker: &Broker,
    topic: &str,
    partitions: i32,
    replication_factor: i16,
    min_insync_replicas: Option<i16>,
) -> Result<(), String> {
    let controller = controller(broker).await?;
    let broker = &controller;
    let version = broker.version(19, 2, 7)?;
    let configs = min_insync_replicas
        .map(|n| {
            CreatableTopicConfig::default()
                .with_name(StrBytes::from_static_str("min.insync.replicas"))
                .with_value(Some(StrBytes::from_string(n.to_string())))
        })
        .into_iter()
        .collect();
    let req = CreateTopicsRequest::default()
        .with_timeout_ms(60_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_num_partitions(partitions)
            .with_replication_factor(replication_factor)
            .with_configs(configs)]);
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

/// A connection to the controller the cluster's metadata names (up to a minute while it
/// names none), which is `broker` itself on a single node.
async fn controller(broker: &Broker) -> Result<Broker, String> {
    let req = MetadataRequest::default().with_topics(Some(Vec::new()));
    let addr = poll_metadata(broker, &req, |resp| {
        address(
            resp.brokers
                .iter()
                .find(|b| b.node_id == resp.controller_id)?,
        )
    })
    .await?
    .ok_or("no controller in the cluster's metadata after 60 s")?;
    connect(addr).await
}

/// Waits (up to a minute) until every partition of `topic` has a leader and all its
/// replicas in sync (a broker may answer CreateTopics before its partitions are ready, and
/// followers join the ISR once they caught up); returns each partition's leader address.
pub async fn wait_for_leaders(
    broker: &Broker,
    topic: &str,
    partitions: i32,
) -> Result<BTreeMap<i32, SocketAddr>, String> {
    let req = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.into()))))]));
    let mut ready = 0;
    let leaders = poll_metadata(broker, &req, |resp| {
        let addresses: BTreeMap<i32, Option<SocketAddr>> = resp
            .brokers
            .iter()
            .map(|b| (b.node_id.0, address(b)))
            .collect();
        let leaders: BTreeMap<i32, SocketAddr> = resp
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter())
            .filter(|p| p.error_code == 0 && p.isr_nodes.len() >= p.replica_nodes.len())
            .filter_map(|p| Some((p.partition_index, addresses.get(&p.leader_id.0).copied()??)))
            .collect();
        ready = leaders.len();
        (leaders.len() >= partitions as usize).then_some(leaders)
    })
    .await?;
    leaders.ok_or_else(|| {
        format!(
            "{topic}: {ready} of {partitions} partitions have a leader and a full ISR after 60 s"
        )
    })
}

/// A broker's address as the metadata names it.
fn address(b: &MetadataResponseBroker) -> Option<SocketAddr> {
    (b.host.as_str(), u16::try_from(b.port).ok()?)
        .to_socket_addrs()
        .ok()?
        .next()
}

/// Sends `req` every 100 ms until `done` finds what it waits for in the answer; `None`
/// after a minute without it (a failed request ends the wait at once, with its error).
async fn poll_metadata<T>(
    broker: &Broker,
    req: &MetadataRequest,
    mut done: impl FnMut(&MetadataResponse) -> Option<T>,
) -> Result<Option<T>, String> {
    let version = broker.version(3, 1, 12)?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let resp = broker
            .conn
            .send(req, version)
            .await
            .map_err(|e| format!("Metadata: {e}"))?;
        if let Some(found) = done(&resp) {
            return Ok(Some(found));
        }
        if tokio::time::Instant::now() > deadline {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
