//! skua's ZooKeeper-mode broker side against Apache Kafka's broker as the oracle.
//!
//! `protocol-tests/fixtures-cluster/` holds what a Kafka controller sent each broker of a
//! 3-broker cluster (LeaderAndIsr, UpdateMetadata, StopReplica, in order) and what that
//! Kafka broker answered. The oracle is Kafka 3.9.1, at its own protocol version and at
//! older `inter.broker.protocol.version`s (which send the older request versions). Each
//! broker's stream of each capture is replayed, in order, into a fresh skua broker side
//! of the same broker id; every answer must carry the same error codes (top level and per
//! partition) as Kafka's. One broker side replays a broker's whole stream: in the Kafka
//! 3.9.1 capture broker 3 was paused past its session (a new registration, its replicas
//! kept, as skua keeps them) and later killed and restarted (after which every request
//! carried newer leader epochs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Decodable;
use skua::controller::delta::{ApplyError, MetadataDelta, MetadataListener};
use skua::controller::image::MetadataImage;
use skua::controller::zk::broker::BrokerSide;

/// A listener that applies everything (the logs are not what is compared here).
struct Accepting;

impl MetadataListener for Accepting {
    fn on_delta(&self, _: &MetadataImage, _: &MetadataDelta) -> Vec<ApplyError> {
        Vec::new()
    }
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol-tests/fixtures-cluster")
}

struct Frame {
    seq: u32,
    /// The capture (`kafka-3.9.1`, `kafka-3.9.1-ibp-2.4`, ...).
    capture: String,
    broker: i32,
    api_key: ApiKey,
    version: i16,
    request: PathBuf,
}

fn manifest() -> Vec<Frame> {
    let dir = fixtures_dir();
    let text = std::fs::read_to_string(dir.join("MANIFEST.tsv")).expect("MANIFEST.tsv");
    let mut frames: Vec<Frame> = text
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            let (capture, broker) = cols[1].rsplit_once("-to-broker-")?;
            // Kafka 3.9.1's answers only: the Kafka 3.1.2 and 3.4.1 captures (there for
            // their AlterPartition versions) end with all three brokers shutting down at
            // once, and 3.1.2 then answered a StopReplica at the leader epoch of the last
            // LeaderAndIsr it was sent with FENCED_LEADER_EPOCH.
            if !capture.starts_with("kafka-3.9.1") {
                return None;
            }
            let key: i16 = cols[3].parse().ok()?;
            Some(Frame {
                seq: cols[0].parse().ok()?,
                capture: capture.to_string(),
                broker: broker.parse().ok()?,
                api_key: ApiKey::try_from(key).ok()?,
                version: cols[5].parse().ok()?,
                request: dir.join(cols[6]),
            })
        })
        .filter(|f| {
            matches!(
                f.api_key,
                ApiKey::LeaderAndIsr | ApiKey::UpdateMetadata | ApiKey::StopReplica
            )
        })
        .collect();
    frames.sort_by(|a, b| (&a.capture, a.broker, a.seq).cmp(&(&b.capture, b.broker, b.seq)));
    frames
}

fn read(path: &Path) -> Bytes {
    Bytes::from(std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

fn request(f: &Frame) -> RequestKind {
    let mut buf = read(&f.request);
    RequestHeader::decode(&mut buf, f.api_key.request_header_version(f.version)).unwrap();
    let body = RequestKind::decode(f.api_key, &mut buf, f.version).unwrap();
    assert_eq!(buf.remaining(), 0);
    body
}

fn response(f: &Frame) -> Option<ResponseKind> {
    let path = f.request.with_extension("resp.bin");
    if !path.exists() {
        return None;
    }
    let mut buf = read(&path);
    ResponseHeader::decode(&mut buf, f.api_key.response_header_version(f.version)).unwrap();
    Some(ResponseKind::decode(f.api_key, &mut buf, f.version).unwrap())
}

/// Top-level code and the per-partition codes, keyed by topic (name or id) and partition.
type Codes = (i16, BTreeSet<(String, i32, i16)>);

fn codes(r: &ResponseKind) -> Codes {
    match r {
        ResponseKind::LeaderAndIsr(r) => {
            let mut set: BTreeSet<(String, i32, i16)> = r
                .partition_errors
                .iter()
                .map(|p| (p.topic_name.0.to_string(), p.partition_index, p.error_code))
                .collect();
            for t in &r.topics {
                for p in &t.partition_errors {
                    set.insert((t.topic_id.to_string(), p.partition_index, p.error_code));
                }
            }
            (r.error_code, set)
        }
        ResponseKind::UpdateMetadata(r) => (r.error_code, BTreeSet::new()),
        ResponseKind::StopReplica(r) => (
            r.error_code,
            r.partition_errors
                .iter()
                .map(|p| (p.topic_name.0.to_string(), p.partition_index, p.error_code))
                .collect(),
        ),
        other => panic!("unexpected response {other:?}"),
    }
}

fn broker_epoch(r: &RequestKind) -> i64 {
    match r {
        RequestKind::LeaderAndIsr(r) => r.broker_epoch,
        RequestKind::UpdateMetadata(r) => r.broker_epoch,
        RequestKind::StopReplica(r) => r.broker_epoch,
        _ => -1,
    }
}

fn fresh(broker: i32) -> BrokerSide {
    let side = BrokerSide::new(broker);
    assert!(side.subscribe(Arc::new(Accepting)).is_empty());
    side
}

#[test]
fn skua_answers_the_kafka_controller_as_kafkas_broker_did() {
    let frames = manifest();
    let mut compared: BTreeMap<(i16, i16), usize> = BTreeMap::new();
    let mut side: Option<(&str, i32, BrokerSide)> = None;
    for f in &frames {
        let req = request(f);
        let epoch = broker_epoch(&req);
        if side
            .as_ref()
            .is_none_or(|(c, b, _)| (*c, *b) != (f.capture.as_str(), f.broker))
        {
            side = Some((&f.capture, f.broker, fresh(f.broker)));
        }
        let (_, _, s) = side.as_ref().unwrap();
        let ours = match &req {
            RequestKind::LeaderAndIsr(r) => {
                ResponseKind::LeaderAndIsr(s.leader_and_isr(r, f.version, epoch, &BTreeMap::new()))
            }
            RequestKind::UpdateMetadata(r) => {
                ResponseKind::UpdateMetadata(s.update_metadata(r, epoch))
            }
            RequestKind::StopReplica(r) => ResponseKind::StopReplica(s.stop_replica(r, epoch)),
            _ => unreachable!(),
        };
        let Some(kafka) = response(f) else {
            continue;
        };
        assert_eq!(
            codes(&ours),
            codes(&kafka),
            "{}: skua's answer differs from Kafka's",
            f.request.display()
        );
        *compared.entry((f.api_key as i16, f.version)).or_default() += 1;
    }
    // Every version skua routes in ZooKeeper mode was compared.
    for api in [
        ApiKey::LeaderAndIsr,
        ApiKey::UpdateMetadata,
        ApiKey::StopReplica,
    ] {
        let route = skua::router::lookup_in(api, 0, skua::router::Mode::ZooKeeper)
            .expect("routed in ZooKeeper mode");
        for v in route.min_version..=route.max_version {
            assert!(
                compared.get(&(api as i16, v)).is_some_and(|n| *n > 0),
                "{api:?} v{v} compared: {compared:?}"
            );
        }
    }
}
