use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint,
    PartitionData, SnapshotId,
};
use kafka_protocol::messages::{BrokerId, FetchResponse, ProducerId, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use uuid::Uuid;

use super::*;

/// The body as the crate encodes it.
fn encoded_len(r: &FetchResponse, version: i16) -> Option<usize> {
    let mut buf = BytesMut::new();
    r.encode(&mut buf, version).ok().map(|()| buf.len())
}

/// The quick size is taken (no fallback), and equals both the crate's size and the
/// length of the encoded body.
fn assert_sized(r: &FetchResponse, version: i16, what: &str) {
    let quick = quick_size(r, version, true);
    let crate_size = r.compute_size(version).unwrap();
    let encoded = encoded_len(r, version).unwrap();
    assert_eq!(
        crate_size, encoded,
        "{what} v{version}: the crate's own two"
    );
    assert_eq!(quick, Some(encoded), "{what} v{version}");
    assert_eq!(
        fetch_response_size(r, version),
        encoded,
        "{what} v{version}"
    );
    // What the quota records: Kafka's sizeOf, 4 + the body as encoded without endpoints.
    let mut without = r.clone();
    without.node_endpoints.clear();
    assert_eq!(
        fetch_quota_bytes(r, version),
        4 + encoded_len(&without, version).unwrap(),
        "{what} v{version}: quota bytes"
    );
}

fn name(len: usize) -> TopicName {
    TopicName(StrBytes::from_string("t".repeat(len)))
}

fn records(len: usize) -> Option<Bytes> {
    Some(Bytes::from(vec![7u8; len]))
}

fn partition(index: i32) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_high_watermark(1_000)
        .with_last_stable_offset(1_000)
        .with_log_start_offset(0)
        .with_aborted_transactions(None)
        .with_records(records(100))
}

fn topic(name_len: usize, partitions: Vec<PartitionData>) -> FetchableTopicResponse {
    FetchableTopicResponse::default()
        .with_topic(name(name_len))
        .with_topic_id(Uuid::from_u128(7))
        .with_partitions(partitions)
}

fn aborted(n: usize) -> Vec<AbortedTransaction> {
    (0..n)
        .map(|i| {
            AbortedTransaction::default()
                .with_producer_id(ProducerId(i as i64))
                .with_first_offset(10 * i as i64)
        })
        .collect()
}

fn endpoint(host_len: usize, rack: Option<usize>) -> NodeEndpoint {
    NodeEndpoint::default()
        .with_node_id(BrokerId(2))
        .with_host(StrBytes::from_string("h".repeat(host_len)))
        .with_port(9092)
        .with_rack(rack.map(|n| StrBytes::from_string("r".repeat(n))))
}

/// A consumer's fetch as the handler answers it: one topic, one partition with records.
#[test]
fn a_plain_consumer_fetch_is_sized_at_every_version() {
    for version in 4..=18 {
        let r = FetchResponse::default().with_responses(vec![topic(14, vec![partition(0)])]);
        assert_sized(&r, version, "one partition");
        let empty = FetchResponse::default();
        assert_sized(&empty, version, "no topics");
    }
}

/// Several topics and partitions, errors, null and empty records, aborted transactions
/// (null, empty, several), and the lengths where a varint prefix grows a byte.
#[test]
fn varied_responses_are_sized_as_encoded() {
    let record_lens = [0, 1, 126, 127, 128, 16_382, 16_383, 16_384, 70_000];
    for version in 4..=18 {
        for (i, &len) in record_lens.iter().enumerate() {
            let error = PartitionData::default()
                .with_partition_index(3)
                .with_error_code(6)
                .with_high_watermark(-1)
                .with_records(None);
            let empty = partition(1).with_records(Some(Bytes::new()));
            let committed = partition(2)
                .with_aborted_transactions(Some(aborted(i)))
                .with_records(records(len));
            let none_aborted = partition(4).with_aborted_transactions(Some(Vec::new()));
            let r = FetchResponse::default()
                .with_session_id(if version >= 7 { 12_345 } else { 0 })
                .with_error_code(0)
                .with_responses(vec![
                    topic(1 + i, vec![partition(0), error, empty]),
                    topic(126 + i % 3, vec![committed, none_aborted]),
                    topic(249, Vec::new()),
                ]);
            assert_sized(&r, version, &format!("records of {len}"));
        }
    }
}

/// The tagged fields skua sets: a follower's diverging epoch, KIP-951's current leader
/// and node endpoints, and a snapshot id; and the preferred read replica (v11+).
#[test]
fn tagged_fields_and_the_preferred_read_replica_are_sized() {
    for version in 11..=18 {
        let mut diverging = partition(0).with_records(Some(Bytes::new()));
        let mut leader = partition(1).with_error_code(6).with_records(None);
        let mut snapshot = partition(2).with_preferred_read_replica(BrokerId(3));
        if version >= 12 {
            diverging = diverging
                .with_diverging_epoch(EpochEndOffset::default().with_epoch(4).with_end_offset(90));
            leader = leader.with_current_leader(
                LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(2))
                    .with_leader_epoch(5),
            );
            snapshot = snapshot
                .with_snapshot_id(SnapshotId::default().with_end_offset(80).with_epoch(3))
                .with_aborted_transactions(Some(aborted(3)));
        }
        let both = partition(3)
            .with_diverging_epoch(EpochEndOffset::default().with_epoch(1))
            .with_current_leader(LeaderIdAndEpoch::default().with_leader_epoch(0));
        let mut r = FetchResponse::default().with_responses(vec![topic(
            5,
            match version >= 12 {
                true => vec![diverging, leader, snapshot, both],
                false => vec![diverging, leader, snapshot],
            },
        )]);
        assert_sized(&r, version, "tagged partition fields");
        // Endpoints only from v16; a long host takes a two-byte length.
        if version >= 16 {
            r.node_endpoints = vec![
                endpoint(9, None),
                endpoint(200, Some(3)),
                endpoint(0, Some(0)),
            ];
            assert_sized(&r, version, "node endpoints");
            let many = (0..60).map(|i| endpoint(20 + i, Some(i))).collect();
            r.node_endpoints = many;
            assert_sized(&r, version, "node endpoints over 127 bytes");
        }
    }
}

/// Many responses of pseudo-random shape (a fixed seed): every version, up to 4 topics
/// of up to 5 partitions, each field set or not.
#[test]
fn pseudo_random_responses_are_sized_as_encoded() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n) as usize
    };
    for round in 0..2_000 {
        let version = 4 + (round % 15) as i16;
        let topics = (0..next(5))
            .map(|_| {
                let partitions = (0..next(6))
                    .map(|i| {
                        let mut p = partition(i as i32)
                            .with_error_code([0, 1, 6, 74][next(4)])
                            .with_records(match next(4) {
                                0 => None,
                                _ => records([0, 5, 127, 128, 1_000, 20_000][next(6)]),
                            })
                            .with_aborted_transactions(match next(3) {
                                0 => None,
                                _ => Some(aborted(next(4))),
                            });
                        if version >= 11 && next(3) == 0 {
                            p.preferred_read_replica = BrokerId(next(5) as i32);
                        }
                        if version >= 12 && next(3) == 0 {
                            p.diverging_epoch = EpochEndOffset::default()
                                .with_epoch(next(9) as i32)
                                .with_end_offset(next(1_000) as i64);
                        }
                        if version >= 12 && next(3) == 0 {
                            p.current_leader = LeaderIdAndEpoch::default()
                                .with_leader_id(BrokerId(next(3) as i32))
                                .with_leader_epoch(next(9) as i32);
                        }
                        if version >= 12 && next(4) == 0 {
                            p.snapshot_id = SnapshotId::default()
                                .with_end_offset(next(100) as i64)
                                .with_epoch(-1);
                        }
                        p
                    })
                    .collect();
                topic(1 + next(200), partitions)
            })
            .collect();
        let mut r = FetchResponse::default().with_responses(topics);
        if version >= 7 {
            r.session_id = next(3) as i32;
            r.error_code = [0, 70][next(2)];
        }
        if version >= 16 && next(3) == 0 {
            r.node_endpoints = (0..1 + next(3)).map(|i| endpoint(9, Some(i))).collect();
        }
        assert_sized(&r, version, &format!("round {round}"));
    }
}

/// What skua never sends is sized by the crate: unknown tagged fields, fields a version
/// cannot carry (the crate's error: 0).
#[test]
fn what_the_quick_size_does_not_cover_is_sized_by_the_crate() {
    let mut unknown = partition(0);
    unknown
        .unknown_tagged_fields
        .insert(9, Bytes::from_static(b"abc"));
    let r = FetchResponse::default().with_responses(vec![topic(3, vec![unknown])]);
    assert_eq!(quick_size(&r, 12, true), None);
    assert_eq!(fetch_response_size(&r, 12), encoded_len(&r, 12).unwrap());
    assert_eq!(fetch_response_size(&r, 11), encoded_len(&r, 11).unwrap());

    let mut nested = partition(0);
    nested
        .diverging_epoch
        .unknown_tagged_fields
        .insert(1, Bytes::from_static(b"x"));
    let r = FetchResponse::default().with_responses(vec![topic(3, vec![nested])]);
    assert_eq!(quick_size(&r, 13, true), None);
    assert_eq!(fetch_response_size(&r, 13), encoded_len(&r, 13).unwrap());

    // A session id before v7, a preferred read replica before v11: not encodable.
    let r = FetchResponse::default().with_session_id(5);
    assert_eq!(quick_size(&r, 6, true), None);
    assert_eq!(fetch_response_size(&r, 6), 0);
    let r = FetchResponse::default().with_responses(vec![topic(
        3,
        vec![partition(0).with_preferred_read_replica(BrokerId(1))],
    )]);
    assert_eq!(fetch_response_size(&r, 10), 0);
    assert!(encoded_len(&r, 10).is_none());
}
