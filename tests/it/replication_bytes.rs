//! skua's replication requests against Apache Kafka 3.9.1's, captured from a Kafka 3.9.1
//! cluster in ZooKeeper mode (`protocol-tests/capture-cluster.sh`):
//! - every full follower Fetch is rebuilt by skua's fetcher from the same partition
//!   positions and must encode to the same bytes, except the fetch-session fields (skua's
//!   followers send sessionless full fetches: session id 0, epoch -1, where Kafka's keep a
//!   session);
//! - every AlterPartition a Kafka leader sent is rebuilt from the same ISR proposals and
//!   must encode to the same bytes;
//! - at `inter.broker.protocol.version=2.6` (`capture-cluster.sh --ibp 2.6 --scenario
//!   follower`), Kafka's followers send Fetch v11 and truncate with OffsetForLeaderEpoch v3:
//!   skua's followers at that version pick the same versions and build both requests to
//!   the same bytes.

use std::path::Path;

use bytes::{Buf, Bytes, BytesMut};
use std::sync::Arc;

use kafka_protocol::messages::{AlterPartitionRequest, ApiKey, FetchRequest, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use skua::log::{Log, LogConfig, TopicPartition};
use skua::replica::fetcher::thread::{build_request, FetchedPartition};
use skua::replica::fetcher::FetcherSettings;

/// Every captured request of `api` from Kafka 3.9.1 at its current inter-broker protocol
/// (the captures at older protocol versions and releases are the fixtures' and the
/// replay's business, except those this file names), decoded: (file, version, request).
fn captured<R: Decodable>(api: ApiKey, name: &str) -> Vec<(String, i16, R)> {
    captured_from("kafka-3.9.1", api, name)
}

/// Every captured request of `api` in the capture `label`, decoded.
fn captured_from<R: Decodable>(label: &str, api: ApiKey, name: &str) -> Vec<(String, i16, R)> {
    let prefix = format!("{label}-to-broker-");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol-tests/fixtures-cluster");
    let manifest = std::fs::read_to_string(dir.join("MANIFEST.tsv")).unwrap();
    let mut found = Vec::new();
    for line in manifest.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols[4] != name || !cols[1].starts_with(&prefix) {
            continue;
        }
        let version: i16 = cols[5].parse().unwrap();
        let mut buf = Bytes::from(std::fs::read(dir.join(cols[6])).unwrap());
        let header_version = api.request_header_version(version);
        let header = RequestHeader::decode(&mut buf, header_version).unwrap();
        assert_eq!(header.request_api_version, version);
        let req = R::decode(&mut buf, version).unwrap();
        assert_eq!(buf.remaining(), 0);
        found.push((cols[6].to_string(), version, req));
    }
    found
}

/// What skua built encodes to the bytes Kafka sent, at `version`.
fn assert_same_bytes<R: Encodable>(skua: &R, kafka: &R, version: i16, file: &str) {
    let (mut a, mut b) = (BytesMut::new(), BytesMut::new());
    skua.encode(&mut a, version).unwrap();
    kafka.encode(&mut b, version).unwrap();
    assert_eq!(a, b, "{file}");
}

/// A fetch skua built with no session is, in the session `kafka` names, `kafka` field for
/// field and byte for byte.
fn assert_same_in_kafkas_session(
    mut skua: FetchRequest,
    kafka: &FetchRequest,
    version: i16,
    file: &str,
) {
    assert_eq!((skua.session_id, skua.session_epoch), (0, -1), "{file}");
    skua.session_id = kafka.session_id;
    skua.session_epoch = kafka.session_epoch;
    assert_eq!(&skua, kafka, "{file}");
    assert_same_bytes(&skua, kafka, version, file);
}

fn kafka_follower_fetches() -> Vec<(String, i16, FetchRequest)> {
    captured(ApiKey::Fetch, "Fetch")
}

#[test]
fn skua_builds_the_follower_fetch_kafka_3_9_sends() {
    // Kafka's session-opening fetches (epoch 0) are full fetches naming every partition;
    // its later ones are incremental and name only what changed.
    let fetches: Vec<_> = kafka_follower_fetches()
        .into_iter()
        .filter(|(_, _, f)| f.session_epoch <= 0)
        .collect();
    assert!(
        fetches.len() >= 3,
        "captured full follower fetches: {}",
        fetches.len()
    );
    for (file, version, kafka) in fetches {
        assert_eq!(version, 17, "{file}: Kafka 3.9 followers send v17");
        let first = &kafka.topics[0].partitions[0];
        let settings = FetcherSettings {
            num_fetchers: 1,
            max_wait_ms: kafka.max_wait_ms,
            min_bytes: kafka.min_bytes,
            max_bytes: kafka.max_bytes,
            partition_max_bytes: first.partition_max_bytes,
            backoff: std::time::Duration::from_secs(1),
        };
        let partitions: Vec<FetchedPartition> = kafka
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| FetchedPartition {
                    // v13+ names topics by id only; the name is not sent.
                    tp: TopicPartition::new("unused", p.partition),
                    topic_id: t.topic_id,
                    leader_epoch: p.current_leader_epoch,
                    fetch_offset: p.fetch_offset,
                    last_fetched_epoch: p.last_fetched_epoch,
                    log_start_offset: p.log_start_offset,
                })
            })
            .collect();
        let skua = build_request(
            version,
            kafka.replica_state.replica_id.0,
            kafka.replica_state.replica_epoch,
            &settings,
            &partitions,
        );
        assert_same_in_kafkas_session(skua, &kafka, version, &file);
    }
}

/// Every follower fetch Kafka 3.9 sent, the session-opening ones and the incremental ones
/// (naming only changed partitions, forgetting by topic id), is what skua builds for the
/// same step of a session.
#[test]
fn skua_builds_every_session_fetch_kafka_3_9_followers_send() {
    use skua::replica::fetcher::session::FetchData;
    use skua::replica::fetcher::thread::build_fetch;
    let fetches = kafka_follower_fetches();
    let incremental = fetches.iter().filter(|(_, _, f)| f.session_epoch > 0);
    assert!(incremental.count() >= 3, "captured incremental fetches");
    for (file, version, kafka) in fetches {
        let settings = FetcherSettings {
            num_fetchers: 1,
            max_wait_ms: kafka.max_wait_ms,
            min_bytes: kafka.min_bytes,
            max_bytes: kafka.max_bytes,
            partition_max_bytes: kafka
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .map_or(1 << 20, |p| p.partition_max_bytes),
            backoff: std::time::Duration::from_secs(1),
        };
        let to_send = kafka
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| FetchedPartition {
                    tp: TopicPartition::new("unused", p.partition),
                    topic_id: t.topic_id,
                    leader_epoch: p.current_leader_epoch,
                    fetch_offset: p.fetch_offset,
                    last_fetched_epoch: p.last_fetched_epoch,
                    log_start_offset: p.log_start_offset,
                })
            })
            .collect();
        let forgotten = kafka
            .forgotten_topics_data
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (TopicPartition::new("unused", *p), t.topic_id))
            })
            .collect();
        let data = FetchData {
            session_id: kafka.session_id,
            epoch: kafka.session_epoch,
            to_send,
            forgotten,
        };
        let skua = build_fetch(
            version,
            kafka.replica_state.replica_id.0,
            kafka.replica_state.replica_epoch,
            &settings,
            &data,
        );
        assert_same_bytes(&skua, &kafka, version, &file);
    }
}

#[test]
fn skua_builds_the_alter_partition_kafka_3_9_leaders_send() {
    use skua::replica::isr::{build_request as build_alter, IsrChange};
    use skua::replica::state::IsrProposal;
    use skua::replica::Partition;
    let requests: Vec<(String, i16, AlterPartitionRequest)> =
        captured(ApiKey::AlterPartition, "AlterPartition");
    assert!(!requests.is_empty());
    let root = tempfile::tempdir().unwrap();
    for (file, version, kafka) in requests {
        assert_eq!(version, 3, "{file}: Kafka 3.9 leaders send v3");
        let mut changes = Vec::new();
        for t in &kafka.topics {
            for p in &t.partitions {
                let tp = TopicPartition::new("captured", p.partition_index);
                let dir = root
                    .path()
                    .join(format!("{}-{}", t.topic_id, p.partition_index));
                let log = Log::open(&dir, tp.clone(), LogConfig::default(), 0, 0, false).unwrap();
                changes.push(IsrChange {
                    partition: Arc::new(Partition::new(tp, t.topic_id, Arc::new(log), 0)),
                    proposal: IsrProposal {
                        leader_epoch: p.leader_epoch,
                        partition_epoch: p.partition_epoch,
                        new_isr: p
                            .new_isr_with_epochs
                            .iter()
                            .map(|b| (b.broker_id.0, b.broker_epoch))
                            .collect(),
                    },
                });
            }
        }
        let changes: Vec<&IsrChange> = changes.iter().collect();
        let skua = build_alter(version, kafka.broker_id.0, kafka.broker_epoch, &changes);
        assert_eq!(skua, kafka, "{file}");
        assert_same_bytes(&skua, &kafka, version, &file);
    }
}

/// A captured response to a captured request.
fn response_of<R: Decodable>(api: ApiKey, file: &str, version: i16) -> R {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol-tests/fixtures-cluster");
    let path = dir.join(file.replace(".bin", ".resp.bin"));
    let mut buf = Bytes::from(std::fs::read(path).unwrap());
    kafka_protocol::messages::ResponseHeader::decode(
        &mut buf,
        api.response_header_version(version),
    )
    .unwrap();
    let resp = R::decode(&mut buf, version).unwrap();
    assert_eq!(buf.remaining(), 0);
    resp
}

#[test]
fn a_skua_follower_stores_a_kafka_leaders_batches_unchanged() {
    use kafka_protocol::messages::FetchResponse;
    let mut appended = 0;
    let root = tempfile::tempdir().unwrap();
    for (file, version, _) in kafka_follower_fetches() {
        let resp: FetchResponse = response_of(ApiKey::Fetch, &file, version);
        for t in &resp.responses {
            for p in &t.partitions {
                // Incremental fetches carry partitions the request does not name (the
                // session holds their offsets): the first batch starts at the fetch offset.
                let records = p.records.clone().unwrap_or_default();
                if records.is_empty() {
                    continue;
                }
                let first = skua::log::RecordBatchHeader::parse(&records[..]).unwrap();
                let fetch_offset = first.base_offset();
                // A follower whose log ends at the fetch offset.
                let whole = skua::log::whole_batches_len(&records);
                let dir = root.path().join(format!("f{appended}-0"));
                let tp = TopicPartition::new(format!("f{appended}"), 0);
                let log = Log::open(&dir, tp, LogConfig::default(), 0, 0, false).unwrap();
                log.truncate_fully_and_start_at(fetch_offset).unwrap();
                let info = log.append_as_follower(records.slice(..whole)).unwrap();
                assert_eq!(info.first_offset, fetch_offset, "{file}");
                // The Kafka leader's batches, byte for byte, with their epochs.
                let stored = log
                    .read(fetch_offset, 1 << 24, log.log_end_offset(), true)
                    .unwrap()
                    .records;
                assert_eq!(stored, records.slice(..whole), "{file}");
                assert!(log.latest_epoch() >= Some(first.partition_leader_epoch()));
                appended += 1;
            }
        }
    }
    assert!(appended > 0, "some captured fetch carried records");
}

/// Kafka 3.9.1's followers at `inter.broker.protocol.version=2.6`.
const IBP_2_6_FOLLOWERS: &str = "kafka-3.9.1-ibp-2.6-follower";

#[test]
fn at_ibp_2_6_skua_builds_the_follower_fetch_kafka_sends() {
    use skua::config::inter_broker_protocol::MetadataVersion;
    let ibp = MetadataVersion::parse("2.6").unwrap();
    let fetches: Vec<(String, i16, FetchRequest)> =
        captured_from::<FetchRequest>(IBP_2_6_FOLLOWERS, ApiKey::Fetch, "Fetch")
            .into_iter()
            .filter(|(_, _, f)| f.session_epoch <= 0)
            .collect();
    assert!(fetches.len() >= 3, "full fetches: {}", fetches.len());
    for (file, version, kafka) in fetches {
        assert_eq!(version, 11, "{file}");
        assert_eq!(version, ibp.fetch_request_version(), "{file}");
        assert!(
            kafka.replica_id.0 > 0,
            "{file}: v11 carries the follower's id"
        );
        let first = &kafka.topics[0].partitions[0];
        let settings = FetcherSettings {
            num_fetchers: 1,
            max_wait_ms: kafka.max_wait_ms,
            min_bytes: kafka.min_bytes,
            max_bytes: kafka.max_bytes,
            partition_max_bytes: first.partition_max_bytes,
            backoff: std::time::Duration::from_secs(1),
        };
        let partitions: Vec<FetchedPartition> = kafka
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| FetchedPartition {
                    // Below v13 topics go by name.
                    tp: TopicPartition::new(t.topic.0.as_str(), p.partition),
                    topic_id: t.topic_id,
                    leader_epoch: p.current_leader_epoch,
                    fetch_offset: p.fetch_offset,
                    // What the follower's log holds; v11 has no field for it.
                    last_fetched_epoch: 7,
                    log_start_offset: p.log_start_offset,
                })
            })
            .collect();
        let skua = build_request(version, kafka.replica_id.0, 5, &settings, &partitions);
        assert_same_in_kafkas_session(skua, &kafka, version, &file);
    }
}

#[test]
fn at_ibp_2_6_skua_builds_the_offset_for_leader_epoch_kafka_followers_send() {
    use kafka_protocol::messages::OffsetForLeaderEpochRequest;
    use skua::config::inter_broker_protocol::MetadataVersion;
    use skua::replica::fetcher::endpoint::{build_offset_for_leader_epoch_request, EpochQuery};
    let ibp = MetadataVersion::parse("2.6").unwrap();
    assert!(!ibp.is_truncation_on_fetch_supported());
    let requests: Vec<(String, i16, OffsetForLeaderEpochRequest)> = captured_from(
        IBP_2_6_FOLLOWERS,
        ApiKey::OffsetForLeaderEpoch,
        "OffsetForLeaderEpoch",
    );
    assert!(
        !requests.is_empty(),
        "Kafka's followers truncated before fetching"
    );
    for (file, version, kafka) in requests {
        assert_eq!(version, 3, "{file}");
        assert_eq!(version, ibp.offset_for_leader_epoch_request_version());
        assert!(kafka.replica_id.0 > 0, "{file}: asked as a follower");
        let queries: Vec<EpochQuery> = kafka
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| EpochQuery {
                    tp: TopicPartition::new(t.topic.0.as_str(), p.partition),
                    current_leader_epoch: p.current_leader_epoch,
                    leader_epoch: p.leader_epoch,
                })
            })
            .collect();
        assert!(queries
            .iter()
            .all(|q| q.leader_epoch <= q.current_leader_epoch));
        let skua = build_offset_for_leader_epoch_request(kafka.replica_id.0, &queries);
        assert_eq!(skua, kafka, "{file}");
        assert_same_bytes(&skua, &kafka, version, &file);
    }
}

/// Below `inter.broker.protocol.version` 2.1 followers ask OffsetForLeaderEpoch v1 (2.0)
/// or v0 (0.11.0 to 1.1), which carry neither the asker's id nor its current leader epoch:
/// skua's follower request encodes to the bytes Kafka 3.9.1's followers sent.
#[test]
fn below_ibp_2_1_skua_encodes_the_offset_for_leader_epoch_kafka_followers_send() {
    use kafka_protocol::messages::OffsetForLeaderEpochRequest;
    use skua::config::inter_broker_protocol::MetadataVersion;
    use skua::replica::fetcher::endpoint::{build_offset_for_leader_epoch_request, EpochQuery};
    for (ibp, expected) in [("2.0", 1), ("1.1", 0)] {
        let version = MetadataVersion::parse(ibp)
            .unwrap()
            .offset_for_leader_epoch_request_version();
        assert_eq!(version, expected);
        let requests: Vec<(String, i16, OffsetForLeaderEpochRequest)> = captured_from(
            &format!("kafka-3.9.1-ibp-{ibp}-follower"),
            ApiKey::OffsetForLeaderEpoch,
            "OffsetForLeaderEpoch",
        );
        assert!(!requests.is_empty(), "Kafka's followers at {ibp} truncated");
        for (file, v, kafka) in requests {
            assert_eq!(v, version, "{file}");
            assert_eq!(
                (
                    kafka.replica_id.0,
                    kafka.topics[0].partitions[0].current_leader_epoch
                ),
                (-2, -1),
                "{file}: neither on the wire"
            );
            let queries: Vec<EpochQuery> = kafka
                .topics
                .iter()
                .flat_map(|t| {
                    t.partitions.iter().map(|p| EpochQuery {
                        tp: TopicPartition::new(t.topic.0.as_str(), p.partition),
                        current_leader_epoch: 9,
                        leader_epoch: p.leader_epoch,
                    })
                })
                .collect();
            let skua = build_offset_for_leader_epoch_request(1, &queries);
            assert_same_bytes(&skua, &kafka, version, &file);
        }
    }
}
