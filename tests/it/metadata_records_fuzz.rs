//! Short mutation runs of the decoders of skua's metadata store, the KRaft metadata log
//! `__cluster_metadata-0` (Kafka's format): record values, whole record batches, snapshot
//! files and the `quorum-state` file. The same inputs as the cargo-fuzz target
//! `metadata_records` in `fuzz/`, for a bounded time (`SKUA_FUZZ_SECS`, `SKUA_FUZZ_SEED`).
//!
//! A damaged record must be refused or decoded into something the image can replay (or
//! refuse), never a panic; a record that decodes must encode back to a record that decodes
//! to the same value; a damaged snapshot or quorum-state file is an error or ignored.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use uuid::Uuid;

use skua::controller::image::MetadataImage;
use skua::controller::quorum_state::{QuorumState, QUORUM_STATE_FILE};
use skua::controller::records::batch::{build_batch, records_of};
use skua::controller::records::{
    MetadataRecord, PartitionChangeRecord, PartitionRecord, CONFIG_RESOURCE_GROUP,
    CONFIG_RESOURCE_TOPIC,
};
use skua::controller::snapshot;

use crate::fuzzing;
use fuzzing::{budget, mutate, Rng};

const T1: Uuid = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);

/// One record of every kind skua writes or reads, in the versions it knows.
fn seeds() -> Vec<Vec<u8>> {
    let partition = |version| {
        MetadataRecord::Partition(PartitionRecord {
            partition_id: 1,
            topic_id: T1,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2],
            removing_replicas: vec![3],
            adding_replicas: vec![],
            leader: 1,
            leader_recovery_state: 0,
            leader_epoch: 7,
            partition_epoch: 9,
            directories: if version >= 1 {
                vec![Uuid::from_u128(5); 3]
            } else {
                vec![]
            },
            eligible_leader_replicas: vec![],
            last_known_elr: if version >= 2 { vec![2] } else { vec![] },
        })
        .encode(version)
    };
    vec![
        MetadataRecord::Topic {
            name: "orders".into(),
            topic_id: T1,
        }
        .encode(0),
        partition(0),
        partition(1),
        partition(2),
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 1,
            topic_id: T1,
            isr: Some(vec![1]),
            leader: 2,
            replicas: Some(vec![1, 2]),
            leader_recovery_state: -1,
            directories: Some(vec![Uuid::from_u128(5); 2]),
            eligible_leader_replicas: Some(vec![]),
            last_known_elr: Some(vec![1]),
            ..Default::default()
        })
        .encode(2),
        MetadataRecord::Config {
            resource_type: CONFIG_RESOURCE_TOPIC,
            resource_name: "orders".into(),
            name: "retention.ms".into(),
            value: Some("1000".into()),
        }
        .encode(0),
        MetadataRecord::Config {
            resource_type: CONFIG_RESOURCE_GROUP,
            resource_name: "g".into(),
            name: "consumer.session.timeout.ms".into(),
            value: None,
        }
        .encode(0),
        MetadataRecord::RemoveTopic { topic_id: T1 }.encode(0),
        MetadataRecord::FeatureLevel {
            name: "metadata.version".into(),
            level: 21,
        }
        .encode(0),
        MetadataRecord::ProducerIds {
            broker_id: 1,
            broker_epoch: 4,
            next_producer_id: 5000,
        }
        .encode(0),
        // UnregisterBrokerRecord v0 as Kafka writes it (skua only reads these): frame 1,
        // api key 1, version 0, broker id 1, broker epoch 4, no tagged fields.
        vec![1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4, 0],
        MetadataRecord::BeginTransaction.encode(0),
        MetadataRecord::EndTransaction.encode(0),
    ]
}

/// An image that already knows topic `orders` and its partition 1, so partition changes
/// and configs reach the code that applies them.
fn image() -> MetadataImage {
    let mut image = MetadataImage::default();
    for seed in &seeds()[..2] {
        image
            .replay(&MetadataRecord::decode(seed).expect("seed decodes"))
            .expect("seed replays");
    }
    image
}

/// Decodes `value`; a record that decodes re-encodes to the same record and replays (or is
/// refused) on a clone of `base`.
fn check_value(value: &[u8], base: &MetadataImage) -> bool {
    let Ok(record) = MetadataRecord::decode(value) else {
        return false;
    };
    if let MetadataRecord::Partition(_)
    | MetadataRecord::PartitionChange(_)
    | MetadataRecord::Topic { .. }
    | MetadataRecord::Config { .. } = &record
    {
        for version in 0..=2 {
            let again = MetadataRecord::decode(&record.encode(version));
            if let Ok(again) = again {
                // Lower versions drop fields; what a version keeps must come back the same.
                if version == 2 || matches!(record, MetadataRecord::Topic { .. }) {
                    assert_eq!(again, record, "re-encoded at v{version}");
                }
            }
        }
    }
    let mut image = base.clone();
    let _ = image.replay(&record);
    true
}

#[test]
fn metadata_record_values_survive_mutations() {
    let mut rng = Rng::from_env(0x3e7a_da7a);
    let seeds = seeds();
    let base = image();
    let deadline = Instant::now() + budget(1.0);
    let (mut n, mut decoded) = (0u64, 0u64);
    while Instant::now() < deadline {
        let seed = &seeds[rng.below(seeds.len())];
        let input = mutate(&mut rng, seed);
        match catch_unwind(AssertUnwindSafe(|| check_value(&input, &base))) {
            Ok(true) => decoded += 1,
            Ok(false) => {}
            Err(_) => panic!("metadata record {:02x?} panicked", input),
        }
        n += 1;
    }
    eprintln!("metadata records: {n} mutated values, {decoded} decoded");
    assert!(n > 0);
}

/// Whole batches: damaged with the CRC fixed up afterwards, so the record framing inside
/// (lengths, varints, counts) is what gets tested, not only the checksum.
#[test]
fn metadata_batches_survive_mutations() {
    let mut rng = Rng::from_env(0x0ba7_c4e5);
    let values = seeds();
    let records: Vec<(Option<&[u8]>, &[u8])> = values.iter().map(|v| (None, &v[..])).collect();
    let batch = build_batch(100, 3, 1_700_000_000_000, false, &records);
    let base = image();
    let deadline = Instant::now() + budget(1.0);
    let mut n = 0u64;
    while Instant::now() < deadline {
        let mut input = mutate(&mut rng, &batch);
        if input.len() >= 61 && rng.below(4) != 0 {
            // keep the declared length and the CRC consistent with the damage
            let len = (input.len() - 12) as i32;
            input[8..12].copy_from_slice(&len.to_be_bytes());
            let crc = crc32c::crc32c(&input[21..]);
            input[17..21].copy_from_slice(&crc.to_be_bytes());
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if let Ok((_, records)) = records_of(&input) {
                assert!(records.len() <= input.len(), "more records than bytes");
                for r in records {
                    if let Some(v) = r.value {
                        check_value(v, &base);
                    }
                }
            }
        }));
        if outcome.is_err() {
            panic!("metadata batch {:02x?} panicked", input);
        }
        n += 1;
    }
    eprintln!("metadata batches: {n} mutated batches");
}

/// Snapshot files and `quorum-state`, as read from `__cluster_metadata-0` at startup.
#[test]
fn snapshot_and_quorum_state_files_survive_mutations() {
    let mut rng = Rng::from_env(0x5a95_4071);
    let dir = tempfile::tempdir().unwrap();
    let values = seeds();
    let records: Vec<(Option<&[u8]>, &[u8])> = values.iter().map(|v| (None, &v[..])).collect();
    let mut file = build_batch(0, 1, 1_700_000_000_000, false, &records[..5]);
    file.extend(build_batch(5, 1, 1_700_000_000_000, false, &records[5..]));
    let quorum = br#"{"clusterId":"","leaderId":1,"leaderEpoch":4,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":0}"#;
    let name = "00000000000000000042-0000000003.checkpoint";
    let deadline = Instant::now() + budget(1.0);
    let mut n = 0u64;
    while Instant::now() < deadline {
        let snap = mutate(&mut rng, &file);
        let qs = mutate(&mut rng, quorum);
        std::fs::write(dir.path().join(name), &snap).unwrap();
        std::fs::write(dir.path().join(QUORUM_STATE_FILE), &qs).unwrap();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let ids = snapshot::list(dir.path()).unwrap();
            assert_eq!(ids.len(), 1);
            let mut seen = 0usize;
            let _ = snapshot::read(&ids[0], |v| {
                seen += 1;
                MetadataRecord::decode(v).map(|_| ()).map_err(|e| e.0)
            });
            assert!(seen <= snap.len());
            let _ = QuorumState::read(dir.path());
        }));
        if outcome.is_err() {
            panic!("snapshot {:02x?} / quorum-state {:02x?} panicked", snap, qs);
        }
        n += 1;
    }
    eprintln!("snapshot files: {n} mutated files");
}
