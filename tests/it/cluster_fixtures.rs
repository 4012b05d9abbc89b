//! Apache Kafka's inter-broker bytes (ZooKeeper mode), decoded and re-encoded.
//!
//! `protocol-tests/capture-cluster.sh` ran 3-broker Kafka clusters with a recording proxy in
//! front of each broker and kept what each broker received (LeaderAndIsr, UpdateMetadata and
//! StopReplica from the controller; ControlledShutdown, AlterPartition and
//! AllocateProducerIds at the controller; followers' Fetch at leaders; ElectLeaders and the
//! reassignment APIs from admin clients) and its answer: Kafka 3.9.1 at
//! `inter.broker.protocol.version` 3.9 and at older ones down to 0.8.2 (each speaks the
//! versions of that release), Kafka 3.1 and 3.4 brokers for their AlterPartition, and Kafka
//! 3.9.1's and IBM/sarama's admin clients. Every frame must decode with the vendored crate to
//! its last byte and encode back to the same bytes, so skua can both read and write what
//! Kafka's brokers exchange.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};

struct Frame {
    /// Whose traffic: `<release>[-ibp-<v>][-admin]-to-broker-<i>`.
    client: String,
    api_key: ApiKey,
    version: i16,
    request: PathBuf,
}

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol-tests/fixtures-cluster")
}

fn manifest() -> Vec<Frame> {
    let dir = fixtures_dir();
    let text = std::fs::read_to_string(dir.join("MANIFEST.tsv")).expect("MANIFEST.tsv");
    text.lines()
        .skip(1)
        .map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            assert_eq!(cols.len(), 7, "manifest line {line:?}");
            let key: i16 = cols[3].parse().expect("api key");
            Frame {
                client: cols[1].to_string(),
                api_key: ApiKey::try_from(key).expect("known api key"),
                version: cols[5].parse().expect("version"),
                request: dir.join(cols[6]),
            }
        })
        .collect()
}

fn read(path: &Path) -> Bytes {
    Bytes::from(std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

fn decode_request(f: &Frame, frame: &Bytes) -> (RequestHeader, RequestKind) {
    let mut buf = frame.clone();
    let header = RequestHeader::decode(&mut buf, f.api_key.request_header_version(f.version))
        .unwrap_or_else(|e| panic!("{}: header: {e}", f.request.display()));
    assert_eq!(header.request_api_version, f.version);
    let body = RequestKind::decode(f.api_key, &mut buf, f.version)
        .unwrap_or_else(|e| panic!("{}: body: {e}", f.request.display()));
    assert_eq!(
        buf.remaining(),
        0,
        "{}: trailing bytes",
        f.request.display()
    );
    (header, body)
}

fn decode_response(f: &Frame, frame: &Bytes) -> (ResponseHeader, ResponseKind) {
    let mut buf = frame.clone();
    let header = ResponseHeader::decode(&mut buf, f.api_key.response_header_version(f.version))
        .unwrap_or_else(|e| panic!("{}: response header: {e}", f.request.display()));
    let body = ResponseKind::decode(f.api_key, &mut buf, f.version)
        .unwrap_or_else(|e| panic!("{}: response body: {e}", f.request.display()));
    assert_eq!(
        buf.remaining(),
        0,
        "{}: trailing response bytes",
        f.request.display()
    );
    (header, body)
}

fn response_path(f: &Frame) -> PathBuf {
    f.request.with_extension("resp.bin")
}

#[test]
fn every_frame_decodes_and_encodes_back_byte_for_byte() {
    let frames = manifest();
    assert!(!frames.is_empty());
    let mut responses = 0;
    for f in &frames {
        let frame = read(&f.request);
        let (header, body) = decode_request(f, &frame);
        let mut out = BytesMut::new();
        header
            .encode(&mut out, f.api_key.request_header_version(f.version))
            .unwrap();
        body.encode(&mut out, f.version).unwrap();
        assert_eq!(
            &out[..],
            &frame[..],
            "{}: re-encoded request",
            f.request.display()
        );

        // A request still in flight when the cluster stopped has no answer.
        let resp_path = response_path(f);
        if !resp_path.exists() {
            continue;
        }
        responses += 1;
        let frame = read(&resp_path);
        let (resp_header, resp_body) = decode_response(f, &frame);
        assert_eq!(resp_header.correlation_id, header.correlation_id);
        let mut out = BytesMut::new();
        resp_header
            .encode(&mut out, f.api_key.response_header_version(f.version))
            .unwrap();
        resp_body.encode(&mut out, f.version).unwrap();
        assert_eq!(
            &out[..],
            &frame[..],
            "{}: re-encoded response",
            resp_path.display()
        );
    }
    assert!(
        responses * 10 >= frames.len() * 9,
        "most requests were answered"
    );
}

/// The capture holds each API Kafka 3.9 brokers exchange, at the version
/// inter.broker.protocol.version=3.9 uses.
#[test]
fn capture_covers_every_inter_broker_api() {
    let have: BTreeSet<(i16, i16)> = manifest()
        .iter()
        .map(|f| (f.api_key as i16, f.version))
        .collect();
    for (key, version) in [
        (ApiKey::LeaderAndIsr, 7),
        (ApiKey::UpdateMetadata, 8),
        (ApiKey::StopReplica, 4),
        (ApiKey::ControlledShutdown, 3),
        (ApiKey::AlterPartition, 3),
        (ApiKey::AllocateProducerIds, 0),
        (ApiKey::Fetch, 17),
    ] {
        assert!(
            have.contains(&(key as i16, version)),
            "{key:?} v{version} captured"
        );
    }
}

/// The full scenario's events are in the bytes of the Kafka 3.9.1 capture at its own
/// protocol version: a deletion, ISR shrink and expansion, a follower fetch that carried
/// records, a controlled shutdown that was answered.
#[test]
fn capture_holds_the_scenario() {
    let mut stop_with_delete = false;
    let mut stop_without_delete = false;
    let mut isr_sizes = BTreeSet::new();
    let mut follower_fetch_with_records = false;
    let mut new_leader_epochs = BTreeSet::new();
    let mut shutdown_answered = false;
    let mut producer_block = false;
    let mut shutting_down = BTreeSet::new();
    for f in manifest()
        .into_iter()
        .filter(|f| f.client.starts_with("kafka-3.9.1-to-broker-"))
    {
        let (_, request) = decode_request(&f, &read(&f.request));
        let response = response_path(&f)
            .exists()
            .then(|| decode_response(&f, &read(&response_path(&f))).1);
        match request {
            RequestKind::StopReplica(r) => {
                for p in r.topic_states.iter().flat_map(|t| &t.partition_states) {
                    stop_with_delete |= p.delete_partition;
                    stop_without_delete |= !p.delete_partition;
                }
            }
            RequestKind::AlterPartition(r) => {
                assert!(r.broker_epoch > 0);
                for p in r.topics.iter().flat_map(|t| &t.partitions) {
                    isr_sizes.insert(p.new_isr_with_epochs.len());
                }
            }
            RequestKind::LeaderAndIsr(r) => {
                assert!(r.controller_epoch >= 1 && r.broker_epoch > 0);
                for p in r.topic_states.iter().flat_map(|t| &t.partition_states) {
                    new_leader_epochs.insert(p.leader_epoch);
                }
            }
            RequestKind::Fetch(r) => {
                assert!(r.replica_state.replica_id.0 > 0, "a follower's fetch");
                assert!(
                    r.replica_state.replica_epoch > 0,
                    "carries its broker epoch"
                );
                if let Some(ResponseKind::Fetch(resp)) = &response {
                    follower_fetch_with_records |= resp
                        .responses
                        .iter()
                        .flat_map(|t| &t.partitions)
                        .any(|p| p.records.as_ref().is_some_and(|r| !r.is_empty()));
                }
            }
            RequestKind::ControlledShutdown(r) => {
                shutting_down.insert(r.broker_id.0);
                if let Some(ResponseKind::ControlledShutdown(resp)) = &response {
                    shutdown_answered |= resp.error_code == 0;
                }
            }
            RequestKind::AllocateProducerIds(_) => {
                if let Some(ResponseKind::AllocateProducerIds(resp)) = &response {
                    producer_block |= resp.error_code == 0 && resp.producer_id_len == 1000;
                }
            }
            _ => {}
        }
    }
    assert!(stop_with_delete, "StopReplica for the deleted topic");
    assert!(
        stop_without_delete,
        "StopReplica for the broker shutting down"
    );
    assert!(
        isr_sizes.contains(&2) && isr_sizes.contains(&3),
        "ISR shrank and grew: {isr_sizes:?}"
    );
    assert!(
        new_leader_epochs.iter().any(|e| *e > 0),
        "leaders moved: {new_leader_epochs:?}"
    );
    assert!(follower_fetch_with_records);
    assert!(shutdown_answered);
    // Broker 2 was sent SIGTERM first; the others when the cluster stopped.
    assert!(shutting_down.contains(&2), "{shutting_down:?}");
    assert!(producer_block);
}
