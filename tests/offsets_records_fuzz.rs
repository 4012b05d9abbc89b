//! A mutation smoke test of the `__consumer_offsets` record decoder, the code the group
//! coordinator loads its partitions with: keys and values of every record type, in every
//! version skua reads, flipped, cut, grown and given hostile lengths and counts.
//!
//! What must hold for any input: decoding answers (a record, "not ours", or an error)
//! without panicking; no single allocation grows past a bound proportional to the input;
//! and whatever decodes re-encodes to bytes that decode to the same record, so a record
//! read at load is the record a write of it would replay. `SKUA_FUZZ_SEED` and
//! `SKUA_FUZZ_SECS` widen the run; `fuzz/fuzz_targets/offsets_records.rs` is the
//! coverage-guided version.

use std::alloc::{GlobalAlloc, Layout, System};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use bytes::Bytes;

#[path = "it/fuzzing/mod.rs"]
mod fuzzing;
use fuzzing::{budget, mutate, Rng};
use uuid::Uuid;

use skua::coordinator::group::records::consumer::{
    ConsumerKey, ConsumerValue, CurrentAssignment, MemberMetadata, RegularExpression,
    TopicMetadata, TopicPartitions,
};
use skua::coordinator::group::records::{
    decode_record, encode_record, GroupValue, MemberValue, OffsetValue, RecordKey, RecordValue,
};

/// Tracks the largest single allocation, so a hostile count cannot go unnoticed.
struct PeakAlloc;

static LARGEST_ALLOC: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only records sizes.
unsafe impl GlobalAlloc for PeakAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST_ALLOC.fetch_max(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST_ALLOC.fetch_max(new_size, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: PeakAlloc = PeakAlloc;

/// Arrays are sized only after their count is checked against the bytes left (one byte
/// per element at least), and no decoded element is larger than a few hundred bytes.
fn alloc_bound(len: usize) -> usize {
    256 * len + 4096
}

const T1: Uuid = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);

fn consumer(kind: ConsumerKey, value: ConsumerValue) -> (RecordKey, Option<RecordValue>) {
    let key = RecordKey::Consumer {
        group: "group".into(),
        kind,
    };
    (key, Some(RecordValue::Consumer(value)))
}

/// One record of every type skua writes, and the versions it only reads.
fn seeds() -> Vec<(Bytes, Option<Bytes>)> {
    let offset_key = RecordKey::Offset {
        group: "group".into(),
        topic: "orders".into(),
        partition: 3,
    };
    let offset = |expire| OffsetValue {
        offset: 42,
        leader_epoch: 5,
        metadata: "meta".into(),
        commit_timestamp: 1_700_000_000_000,
        expire_timestamp: expire,
    };
    let group = GroupValue {
        protocol_type: "consumer".into(),
        generation: 4,
        protocol: Some("range".into()),
        leader: Some("m1".into()),
        current_state_timestamp: 123,
        members: vec![MemberValue {
            member_id: "m1".into(),
            group_instance_id: Some("i1".into()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 300_000,
            session_timeout_ms: 45_000,
            subscription: Bytes::from_static(b"\0\0\0\0\0\x01\0\x01t"),
            assignment: Bytes::from_static(b"as"),
        }],
    };
    let tps = |ps: Vec<i32>| {
        vec![TopicPartitions {
            topic_id: T1,
            partitions: ps,
            assignment_epochs: vec![],
        }]
    };
    let records = vec![
        (offset_key.clone(), Some(RecordValue::Offset(offset(None)))),
        (
            offset_key.clone(),
            Some(RecordValue::Offset(offset(Some(9)))),
        ),
        (offset_key, None),
        (
            RecordKey::Group {
                group: "group".into(),
            },
            Some(RecordValue::Group(group)),
        ),
        consumer(ConsumerKey::Metadata, ConsumerValue::Metadata { epoch: 7 }),
        consumer(
            ConsumerKey::PartitionMetadata,
            ConsumerValue::PartitionMetadata(vec![TopicMetadata {
                topic_id: T1,
                topic_name: "orders".into(),
                num_partitions: 6,
            }]),
        ),
        consumer(
            ConsumerKey::Member("m".into()),
            ConsumerValue::Member(MemberMetadata {
                instance_id: Some("i".into()),
                rack_id: Some("r".into()),
                client_id: "c".into(),
                client_host: "h".into(),
                subscribed_topic_names: vec!["t".into(), "u".into()],
                subscribed_topic_regex: Some("v.*".into()),
                rebalance_timeout_ms: 30_000,
                server_assignor: Some("uniform".into()),
            }),
        ),
        consumer(
            ConsumerKey::TargetAssignmentMetadata,
            ConsumerValue::TargetAssignmentMetadata {
                assignment_epoch: 7,
            },
        ),
        consumer(
            ConsumerKey::TargetAssignment("m".into()),
            ConsumerValue::TargetAssignment(tps(vec![0, 2, 4])),
        ),
        consumer(
            ConsumerKey::CurrentAssignment("m".into()),
            ConsumerValue::CurrentAssignment(CurrentAssignment {
                member_epoch: 7,
                previous_member_epoch: 6,
                state: 1,
                assigned: tps(vec![0]),
                pending_revocation: tps(vec![1]),
            }),
        ),
        consumer(
            ConsumerKey::RegularExpression("t.*".into()),
            ConsumerValue::RegularExpression(RegularExpression {
                topics: vec!["t1".into(), "t2".into()],
                version: 3,
                timestamp_ms: 1_700_000_000_000,
            }),
        ),
    ];
    let mut out: Vec<(Bytes, Option<Bytes>)> = records.iter().map(encode_record).collect();
    // Versions only Kafka writes: OffsetCommitValue v4 (flexible) and v0.
    let key = out[0].0.clone();
    let mut v4 = vec![0, 4];
    v4.extend_from_slice(&9i64.to_be_bytes());
    v4.extend_from_slice(&2i32.to_be_bytes());
    v4.extend_from_slice(&[3, b'a', b'b']);
    v4.extend_from_slice(&77i64.to_be_bytes());
    v4.push(0);
    out.push((key.clone(), Some(Bytes::from(v4))));
    let mut v0 = vec![0, 0];
    v0.extend_from_slice(&9i64.to_be_bytes());
    v0.extend_from_slice(&[0, 1, b'm']);
    v0.extend_from_slice(&77i64.to_be_bytes());
    out.push((key, Some(Bytes::from(v0))));
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn offsets_topic_records_survive_mutations() {
    let mut rng = Rng::from_env(0x0ff5_e7e5);
    let seeds = seeds();
    let deadline = Instant::now() + budget(1.5);
    let (mut n, mut decoded) = (0u64, 0u64);
    while Instant::now() < deadline && n < 2_000_000 {
        let (key, value) = &seeds[rng.below(seeds.len())];
        // Mutate the key, the value, or both; sometimes drop the value (a tombstone).
        let key = if rng.below(3) == 0 {
            Bytes::from(mutate(&mut rng, key))
        } else {
            key.clone()
        };
        let value = match (value, rng.below(8)) {
            (_, 0) => None,
            (Some(v), _) => Some(Bytes::from(mutate(&mut rng, v))),
            (None, _) => None,
        };
        let len = key.len() + value.as_ref().map_or(0, |v| v.len());
        LARGEST_ALLOC.store(0, Ordering::Relaxed);
        let result = catch_unwind(AssertUnwindSafe(|| {
            decode_record(Some(&key), value.as_ref())
        }))
        .unwrap_or_else(|_| {
            panic!(
                "decoding panicked on key {} value {:?}",
                hex(&key),
                value.as_deref().map(hex)
            )
        });
        let largest = LARGEST_ALLOC.load(Ordering::Relaxed);
        assert!(
            largest <= alloc_bound(len),
            "{len} bytes allocated {largest} at once: key {} value {:?}",
            hex(&key),
            value.as_deref().map(hex)
        );
        n += 1;
        let Ok(Some(record)) = result else { continue };
        decoded += 1;
        // What decodes is what a write of it would produce again.
        let (k, v) = encode_record(&record);
        let again = decode_record(Some(&k), v.as_ref())
            .unwrap_or_else(|e| panic!("re-encoded record does not decode ({e}): {record:?}"));
        assert_eq!(again, Some(record), "key {}", hex(&key));
    }
    eprintln!("offsets topic records: {n} mutated, {decoded} still decoded");
    assert!(n >= 1000, "too few iterations ({n}) to mean anything");
    assert!(decoded > 0, "no mutation decoded: the seeds are wrong");
    // Records without a key are refused, never skipped silently.
    assert!(decode_record(None, None).is_err());
}
