//! Kafka's znodes as Kafka 3.9 writes them (core/src/main/scala/kafka/zk/ZkData.scala).
//!
//! Each type serializes to the exact bytes Kafka writes: the same keys, versions, value
//! types (some numbers are JSON strings) and key order (see `java_order`), so Kafka's
//! brokers and tools read what skua writes and the reverse. Readers accept what Kafka
//! accepts: unknown keys are ignored, optional keys may be absent.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::java_order::{java_properties_order, scala_grown_table_len, scala_mutable_order};

/// Znode paths. A chroot in `zookeeper.connect` is applied by the session, not here.
pub mod paths {
    pub const CLUSTER_ID: &str = "/cluster/id";
    pub const CONTROLLER: &str = "/controller";
    pub const CONTROLLER_EPOCH: &str = "/controller_epoch";
    pub const BROKER_IDS: &str = "/brokers/ids";
    pub const TOPICS: &str = "/brokers/topics";
    /// Its data is empty; Kafka bumps its version to generate broker ids
    /// (`reserved.broker.max.id` + version).
    pub const BROKER_SEQUENCE_ID: &str = "/brokers/seqid";
    pub const DELETE_TOPICS: &str = "/admin/delete_topics";
    pub const CONFIG_CHANGES: &str = "/config/changes";
    /// Sequential children: `config_change_0000000000`, ...
    pub const CONFIG_CHANGE_PREFIX: &str = "/config/changes/config_change_";
    pub const LATEST_PRODUCER_ID_BLOCK: &str = "/latest_producer_id_block";
    pub const FEATURE: &str = "/feature";
    /// The persistent paths Kafka creates at startup (`KafkaZkClient.createTopLevelPaths`),
    /// but for `/latest_producer_id_block`: Kafka creates that one with null data, which
    /// its producer id manager reads as "no block yet", while ZooKeeper's wire format
    /// from this client can only carry bytes, and a Kafka 3.9 broker or controller fails
    /// to parse an empty znode there (at startup, below IBP 3.0). skua creates it with its
    /// first block instead (`allocate_block`).
    pub const PERSISTENT: &[&str] = &[
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
        "/config/ips",
    ];

    pub fn broker(id: i32) -> String {
        format!("{BROKER_IDS}/{id}")
    }
    pub fn topic(topic: &str) -> String {
        format!("{TOPICS}/{topic}")
    }
    pub fn partitions(topic: &str) -> String {
        format!("{TOPICS}/{topic}/partitions")
    }
    pub fn partition(topic: &str, partition: i32) -> String {
        format!("{TOPICS}/{topic}/partitions/{partition}")
    }
    pub fn partition_state(topic: &str, partition: i32) -> String {
        format!("{TOPICS}/{topic}/partitions/{partition}/state")
    }
    /// A topic marked for deletion; the znode has no data.
    pub fn delete_topic(topic: &str) -> String {
        format!("{DELETE_TOPICS}/{topic}")
    }
    /// `/config/<entity type>/<entity>`: entity types `topics`, `brokers`, `clients`,
    /// `users`, `ips`; `<default>` names the default entity; user/client pairs nest
    /// (`users/<user>/clients/<client>`).
    pub fn entity_config(entity_path: &str) -> String {
        format!("/config/{entity_path}")
    }
}

/// `/cluster/id`: `{"version":"1","id":"<22-char base64url uuid>"}` (the version is a string).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterId {
    pub version: String,
    pub id: String,
}

impl ClusterId {
    pub fn new(id: String) -> ClusterId {
        ClusterId {
            version: "1".into(),
            id,
        }
    }
}

/// `/controller` (ephemeral): the elected controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerRegistration {
    pub version: i32,
    pub brokerid: i32,
    /// Milliseconds since the epoch, as a JSON string.
    pub timestamp: String,
    /// -1 in ZooKeeper mode (a KRaft controller during migration writes its epoch).
    #[serde(rename = "kraftControllerEpoch", default = "minus_one")]
    pub kraft_controller_epoch: i32,
}

fn minus_one() -> i32 {
    -1
}

impl ControllerRegistration {
    pub fn new(broker_id: i32, timestamp_ms: i64) -> ControllerRegistration {
        ControllerRegistration {
            version: 2,
            brokerid: broker_id,
            timestamp: timestamp_ms.to_string(),
            kraft_controller_epoch: -1,
        }
    }
}

/// `/controller_epoch`: the epoch as decimal text; its znode version fences controller
/// writes (every write is a multi-op that checks it).
pub mod controller_epoch {
    pub fn encode(epoch: i32) -> Vec<u8> {
        epoch.to_string().into_bytes()
    }
    pub fn decode(data: &[u8]) -> Option<i32> {
        std::str::from_utf8(data).ok()?.trim().parse().ok()
    }
}

/// One advertised listener of a broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndPoint {
    pub listener: String,
    pub security_protocol: String,
    pub host: String,
    pub port: i32,
}

impl EndPoint {
    /// Kafka's `EndPoint.connectionString`: `LISTENER://host:port`, IPv6 hosts in brackets.
    pub fn connection_string(&self) -> String {
        if self.host.contains(':') {
            format!("{}://[{}]:{}", self.listener, self.host, self.port)
        } else {
            format!("{}://{}:{}", self.listener, self.host, self.port)
        }
    }
}

/// `/brokers/ids/<id>` (ephemeral), version 5. The broker epoch is the znode's czxid.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    /// Supported feature ranges (`{"<feature>":{"min_version":..,"max_version":..}}`);
    /// empty for a ZooKeeper-mode broker of Kafka 3.9.
    #[serde(default)]
    pub features: IndexMap<String, IndexMap<String, i16>>,
    #[serde(default)]
    pub listener_security_protocol_map: IndexMap<String, String>,
    pub endpoints: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    pub jmx_port: i32,
    /// The first PLAINTEXT endpoint's port (-1 without one), for old clients.
    pub port: i32,
    /// The first PLAINTEXT endpoint's host (null without one), for old clients.
    pub host: Option<String>,
    pub version: i32,
    /// Milliseconds since the epoch, as a JSON string.
    pub timestamp: String,
}

impl BrokerRegistration {
    pub const VERSION: i32 = 5;

    pub fn new(endpoints: &[EndPoint], rack: Option<String>, timestamp_ms: i64) -> Self {
        let plaintext = endpoints
            .iter()
            .find(|e| e.security_protocol == "PLAINTEXT");
        BrokerRegistration {
            features: IndexMap::new(),
            listener_security_protocol_map: endpoints
                .iter()
                .map(|e| (e.listener.clone(), e.security_protocol.clone()))
                .collect(),
            endpoints: endpoints.iter().map(EndPoint::connection_string).collect(),
            rack,
            jmx_port: -1,
            port: plaintext.map_or(-1, |e| e.port),
            host: plaintext.map(|e| e.host.clone()),
            version: Self::VERSION,
            timestamp: timestamp_ms.to_string(),
        }
    }

    /// The advertised endpoints, parsed from `LISTENER://host:port` strings with the
    /// listener map giving each one's security protocol.
    pub fn parsed_endpoints(&self) -> Option<Vec<EndPoint>> {
        self.endpoints
            .iter()
            .map(|s| {
                let (listener, address) = s.split_once("://")?;
                let (host, port) = address.rsplit_once(':')?;
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let security_protocol = self
                    .listener_security_protocol_map
                    .get(listener)
                    .cloned()
                    .unwrap_or_else(|| listener.to_string());
                Some(EndPoint {
                    listener: listener.to_string(),
                    security_protocol,
                    host: host.to_string(),
                    port: port.parse().ok()?,
                })
            })
            .collect()
    }
}

/// Partition → replicas, written in the order of the Scala `mutable.HashMap` Kafka fills
/// one partition at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaMap(pub BTreeMap<i32, Vec<i32>>);

impl Serialize for ReplicaMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut keys: Vec<String> = self.0.keys().map(|p| p.to_string()).collect();
        let len = scala_grown_table_len(keys.len());
        scala_mutable_order(&mut keys, len);
        s.collect_map(keys.iter().map(|k| {
            let p: i32 = k.parse().expect("formatted from an i32");
            (k, &self.0[&p])
        }))
    }
}

impl<'de> Deserialize<'de> for ReplicaMap {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = BTreeMap::<String, Vec<i32>>::deserialize(d)?;
        raw.into_iter()
            .map(|(k, v)| {
                let p = k
                    .parse::<i32>()
                    .map_err(|_| D::Error::custom(format!("partition {k:?}")))?;
                Ok((p, v))
            })
            .collect::<Result<_, _>>()
            .map(ReplicaMap)
    }
}

/// `/brokers/topics/<topic>`, version 3: the replica assignment and topic id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicAssignment {
    pub partitions: ReplicaMap,
    /// Kafka's base64url topic id; absent for topics created before Kafka 2.8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    /// Replicas being added by a reassignment, per partition (only partitions with some).
    #[serde(default)]
    pub adding_replicas: ReplicaMap,
    #[serde(default)]
    pub removing_replicas: ReplicaMap,
    pub version: i32,
}

impl TopicAssignment {
    pub const VERSION: i32 = 3;

    pub fn new(topic_id: String, partitions: BTreeMap<i32, Vec<i32>>) -> Self {
        TopicAssignment {
            partitions: ReplicaMap(partitions),
            topic_id: Some(topic_id),
            adding_replicas: ReplicaMap::default(),
            removing_replicas: ReplicaMap::default(),
            version: Self::VERSION,
        }
    }
}

/// Kafka's `LeaderRecoveryState.RECOVERING`: written only then; RECOVERED is the default.
pub const LEADER_RECOVERING: i8 = 1;

/// `/brokers/topics/<topic>/partitions/<p>/state`: leader, ISR and epochs. Its znode
/// version is the partition epoch that AlterPartition compares.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaderIsrAndControllerEpoch {
    pub controller_epoch: i32,
    pub leader: i32,
    pub version: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_recovery_state: Option<i8>,
    pub leader_epoch: i32,
    pub isr: Vec<i32>,
}

impl LeaderIsrAndControllerEpoch {
    pub fn new(controller_epoch: i32, leader: i32, leader_epoch: i32, isr: Vec<i32>) -> Self {
        LeaderIsrAndControllerEpoch {
            controller_epoch,
            leader,
            version: 1,
            leader_recovery_state: None,
            leader_epoch,
            isr,
        }
    }

    pub fn recovering(&self) -> bool {
        self.leader_recovery_state == Some(LEADER_RECOVERING)
    }
}

/// Config name → value, written in the order of the `java.util.Properties` Kafka encodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct ConfigMap(pub BTreeMap<String, String>);

impl Serialize for ConfigMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut keys: Vec<&String> = self.0.keys().collect();
        java_properties_order(&mut keys);
        s.collect_map(keys.into_iter().map(|k| (k, &self.0[k])))
    }
}

/// `/config/<entity type>/<entity>`: the entity's dynamic configs (version 1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityConfig {
    pub version: i32,
    #[serde(default)]
    pub config: ConfigMap,
}

impl EntityConfig {
    pub fn new(config: BTreeMap<String, String>) -> Self {
        EntityConfig {
            version: 1,
            config: ConfigMap(config),
        }
    }
}

/// `/config/changes/config_change_<seq>` (persistent sequential), version 2: tells every
/// broker to re-read `/config/<entity_path>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigChangeNotification {
    pub version: i32,
    /// `topics/<t>`, `brokers/<id>`, `brokers/<default>`, `clients/<id>`, `users/<user>`,
    /// `users/<user>/clients/<id>` (user and client names sanitized as Kafka's `Sanitizer`).
    pub entity_path: String,
}

impl ConfigChangeNotification {
    pub fn new(entity_path: String) -> Self {
        ConfigChangeNotification {
            version: 2,
            entity_path,
        }
    }
}

/// `/latest_producer_id_block`: the last block of producer ids handed out (inclusive
/// bounds, as JSON strings), updated with a version check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdBlock {
    pub version: i32,
    pub broker: i32,
    pub block_start: String,
    pub block_end: String,
}

impl ProducerIdBlock {
    pub fn new(broker: i32, first_producer_id: i64, size: i64) -> Self {
        ProducerIdBlock {
            version: 1,
            broker,
            block_start: first_producer_id.to_string(),
            block_end: (first_producer_id + size - 1).to_string(),
        }
    }

    /// (first, last) producer id of the block.
    pub fn range(&self) -> Option<(i64, i64)> {
        Some((self.block_start.parse().ok()?, self.block_end.parse().ok()?))
    }
}

/// `/feature`: the cluster's finalized features (version 2, status 1 = enabled). A
/// ZooKeeper-mode Kafka 3.9 cluster finalizes none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureZNode {
    #[serde(default)]
    pub features: IndexMap<String, IndexMap<String, i16>>,
    pub version: i32,
    pub status: i32,
}

impl FeatureZNode {
    pub fn enabled() -> Self {
        FeatureZNode {
            features: IndexMap::new(),
            version: 2,
            status: 1,
        }
    }
}

/// JSON bytes of a znode value.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).expect("znode types serialize")
}

/// A znode value from its JSON bytes.
pub fn decode<'a, T: Deserialize<'a>>(data: &'a [u8]) -> serde_json::Result<T> {
    serde_json::from_slice(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `path<TAB>data` for every znode of a Kafka 3.9.1 ZooKeeper-mode cluster (3 brokers,
    /// broker 3 with `broker.rack`, topics of 1 to 100 partitions, topic/broker/client/user
    /// configs, an idempotent producer), read with Kafka's zookeeper-shell
    /// (`org.apache.zookeeper.ZooKeeperMainWithTlsSupportForKafka`). `null`: no data.
    const KAFKA_ZNODES: &str = include_str!("testdata/kafka-3.9.1-znodes.tsv");

    fn znodes() -> Vec<(&'static str, &'static str)> {
        KAFKA_ZNODES
            .lines()
            .map(|l| l.split_once('\t').expect("path<TAB>data"))
            .collect()
    }

    /// Decodes as `T` and encodes back to Kafka's bytes.
    fn round_trip<T: Serialize + for<'a> Deserialize<'a>>(path: &str, data: &str) -> T {
        let value: T = decode(data.as_bytes()).unwrap_or_else(|e| panic!("{path}: {e}"));
        let again = String::from_utf8(encode(&value)).unwrap();
        assert_eq!(again, data, "{path}");
        value
    }

    #[test]
    fn every_kafka_znode_decodes_and_encodes_back_to_the_same_bytes() {
        let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
        for (path, data) in znodes() {
            let parts: Vec<&str> = path.split('/').collect();
            let kind = match parts.as_slice() {
                ["", "cluster", "id"] => {
                    let id: ClusterId = round_trip(path, data);
                    assert_eq!(id.id.len(), 22);
                    "cluster id"
                }
                ["", "controller"] => {
                    let c: ControllerRegistration = round_trip(path, data);
                    assert_eq!((c.version, c.kraft_controller_epoch), (2, -1));
                    "controller"
                }
                ["", "controller_epoch"] => {
                    assert_eq!(controller_epoch::decode(data.as_bytes()), Some(1));
                    assert_eq!(controller_epoch::encode(1), data.as_bytes());
                    "controller epoch"
                }
                ["", "brokers", "ids", id] => {
                    let b: BrokerRegistration = round_trip(path, data);
                    assert_eq!(b.version, 5);
                    assert_eq!(b.rack.is_some(), *id == "3", "broker 3 has a rack");
                    "broker"
                }
                ["", "brokers", "topics", _] => {
                    let t: TopicAssignment = round_trip(path, data);
                    assert_eq!(t.version, 3);
                    "topic"
                }
                ["", "brokers", "topics", _, "partitions", _, "state"] => {
                    let s: LeaderIsrAndControllerEpoch = round_trip(path, data);
                    assert!(s.isr.contains(&s.leader));
                    "partition state"
                }
                ["", "config", "changes", _] => {
                    let n: ConfigChangeNotification = round_trip(path, data);
                    assert_eq!(n.version, 2);
                    "config change"
                }
                ["", "config", _, ..] if data != "null" => {
                    let c: EntityConfig = round_trip(path, data);
                    assert_eq!(c.version, 1);
                    "entity config"
                }
                ["", "latest_producer_id_block"] => {
                    let b: ProducerIdBlock = round_trip(path, data);
                    let (first, last) = b.range().unwrap();
                    assert_eq!(last - first + 1, 1000);
                    "producer id block"
                }
                ["", "feature"] => {
                    let f: FeatureZNode = round_trip(path, data);
                    assert_eq!(f, FeatureZNode::enabled());
                    "feature"
                }
                _ => {
                    assert!(
                        data == "null" || data.is_empty(),
                        "{path}: unexpected data {data}"
                    );
                    "no data"
                }
            };
            *kinds.entry(kind).or_default() += 1;
        }
        // Every kind of znode was in the capture.
        assert_eq!(kinds.len(), 11, "{kinds:?}");
    }

    #[test]
    fn new_values_are_what_kafka_writes() {
        let endpoint = EndPoint {
            listener: "PLAINTEXT".into(),
            security_protocol: "PLAINTEXT".into(),
            host: "127.0.0.1".into(),
            port: 51179,
        };
        let b = BrokerRegistration::new(
            std::slice::from_ref(&endpoint),
            Some("rack-c".into()),
            1796062053481,
        );
        let kafka = znodes()
            .into_iter()
            .find(|(p, _)| *p == "/brokers/ids/3")
            .unwrap()
            .1;
        assert_eq!(String::from_utf8(encode(&b)).unwrap(), kafka);
        assert_eq!(b.parsed_endpoints().unwrap(), vec![endpoint]);

        let c = ControllerRegistration::new(2, 1796061931444);
        assert_eq!(
            String::from_utf8(encode(&c)).unwrap(),
            r#"{"version":2,"brokerid":2,"timestamp":"1796061931444","kraftControllerEpoch":-1}"#
        );
        let s = LeaderIsrAndControllerEpoch::new(1, 2, 1, vec![2, 1, 3]);
        assert_eq!(
            String::from_utf8(encode(&s)).unwrap(),
            r#"{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":1,"isr":[2,1,3]}"#
        );
        let p = ProducerIdBlock::new(3, 2000, 1000);
        assert_eq!(
            String::from_utf8(encode(&p)).unwrap(),
            r#"{"version":1,"broker":3,"block_start":"2000","block_end":"2999"}"#
        );
    }

    /// Kafka's key order where its fixtures have no example: a partition state with
    /// `leader_recovery_state` (a six-key Scala immutable map, CHAMP order by improved
    /// hash), a topic without a topic id (four keys of the same mutable map).
    #[test]
    fn optional_keys_take_kafka_positions() {
        let mut s = LeaderIsrAndControllerEpoch::new(5, 1, 3, vec![1]);
        s.leader_recovery_state = Some(LEADER_RECOVERING);
        assert_eq!(
            String::from_utf8(encode(&s)).unwrap(),
            r#"{"controller_epoch":5,"leader":1,"version":1,"leader_recovery_state":1,"leader_epoch":3,"isr":[1]}"#
        );
        let mut t = TopicAssignment::new("x".into(), BTreeMap::from([(0, vec![1])]));
        t.topic_id = None;
        t.adding_replicas = ReplicaMap(BTreeMap::from([(0, vec![2])]));
        assert_eq!(
            String::from_utf8(encode(&t)).unwrap(),
            r#"{"partitions":{"0":[1]},"adding_replicas":{"0":[2]},"removing_replicas":{},"version":3}"#
        );
    }
}
