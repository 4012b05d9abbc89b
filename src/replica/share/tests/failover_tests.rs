//! A share-partition rebuilt by a new leader from what the old one persisted through
//! `__share_group_state`: acquired-but-unacknowledged records are delivered again,
//! acknowledged and archived ones never.

use std::collections::BTreeSet;

use bytes::Bytes;

use super::*;
use crate::coordinator::share::records::{
    decode_key, decode_snapshot_value, decode_update_value, encode_key, encode_snapshot_value,
    encode_update_value, SharePartitionKey, ShareStateKey,
};
use crate::coordinator::share::state::{ShareStateRecord, ShareStateStore};

/// The share coordinator's side, through the records' bytes: every write becomes a
/// record, encoded, decoded and replayed as a loading coordinator would.
struct Coordinator {
    store: ShareStateStore,
    log: Vec<(Bytes, Bytes)>,
}

impl Coordinator {
    fn new(updates_per_snapshot: u32) -> Self {
        Coordinator {
            store: ShareStateStore::new(updates_per_snapshot),
            log: Vec::new(),
        }
    }

    fn append(&mut self, record: ShareStateRecord) {
        let value = match &record {
            ShareStateRecord::Snapshot(_, v) => encode_snapshot_value(v),
            ShareStateRecord::Update(_, v) => encode_update_value(v),
        };
        self.log.push((encode_key(&record.key()), value));
        self.store.replay(&record);
    }

    fn persist(&mut self, key: &SharePartitionKey, pending: &PendingWrite, now: i64) {
        let record = self
            .store
            .write_record(key, &pending.write, now)
            .expect("write accepted");
        self.append(record);
    }

    /// A coordinator loading the partition from its records.
    fn reload(&self, updates_per_snapshot: u32) -> ShareStateStore {
        let mut store = ShareStateStore::new(updates_per_snapshot);
        for (k, v) in &self.log {
            let record = match decode_key(k.clone()).unwrap() {
                ShareStateKey::Snapshot(k) => {
                    ShareStateRecord::Snapshot(k, decode_snapshot_value(v.clone()).unwrap())
                }
                ShareStateKey::Update(k) => {
                    ShareStateRecord::Update(k, decode_update_value(v.clone()).unwrap())
                }
            };
            store.replay(&record);
        }
        store
    }
}

fn key() -> SharePartitionKey {
    SharePartitionKey {
        group_id: "g".into(),
        topic_id: uuid::Uuid::from_u128(7),
        partition: 0,
    }
}

/// Fetches as `member` until nothing more comes, returning each delivered offset with its
/// delivery count.
fn drain(sp: &mut SharePartition, member: &str, log: &[FetchedBatch], now: i64) -> Vec<(i64, u16)> {
    let mut out = Vec::new();
    for _ in 0..20 {
        let offset = sp.next_fetch_offset();
        let batches: Vec<FetchedBatch> = log
            .iter()
            .filter(|b| b.last_offset >= offset)
            .copied()
            .collect();
        let got = fetch(sp, member, &batches, now);
        if got.records.is_empty() {
            break;
        }
        for r in got.records {
            out.extend((r.first_offset..=r.last_offset).map(|o| (o, r.delivery_count)));
        }
    }
    out
}

#[test]
fn a_new_leader_redelivers_what_was_not_acknowledged_and_nothing_else() {
    let log = plain(&[(0, 9), (10, 19), (20, 29)]);
    for updates_per_snapshot in [0, 2, 500] {
        let mut coordinator = Coordinator::new(updates_per_snapshot);
        coordinator.append(
            coordinator
                .store
                .initialize_record(&key(), 0, 0, 0)
                .unwrap(),
        );

        let mut old = partition_at(config(), 0);
        assert_eq!(
            ranges(&fetch(&mut old, "m1", &log[..1], 0)),
            vec![(0, 9, 1)]
        );
        assert_eq!(
            ranges(&fetch(&mut old, "m2", &log[1..2], 0)),
            vec![(10, 19, 1)]
        );
        let verdicts = [
            ("m1", 0, 4, AcknowledgeType::Accept),
            ("m1", 5, 6, AcknowledgeType::Release),
            ("m1", 7, 7, AcknowledgeType::Reject),
            ("m2", 15, 19, AcknowledgeType::Accept),
        ];
        for (member, first, last, t) in verdicts {
            let pending = ack(&mut old, member, first, last, t, 1).unwrap();
            coordinator.persist(&key(), &pending, 1);
            old.complete_write(&pending, Ok(()), 1);
        }
        // m1 still holds 8-9 and m2 10-14 when the leader dies; nothing of those was
        // written. A second acknowledgement whose write never completed dies with it.
        let unpersisted = ack(&mut old, "m1", 8, 8, AcknowledgeType::Accept, 2).unwrap();
        drop(unpersisted);
        assert_eq!(old.start_offset(), 5);

        let reloaded = coordinator.reload(updates_per_snapshot);
        assert_eq!(
            reloaded.read(&key()),
            coordinator.store.read(&key()),
            "replay of the bytes"
        );
        let persisted = reloaded.read(&key()).expect("initialized");
        let mut new =
            SharePartition::initialize(config(), 1, &persisted, || unreachable!()).unwrap();
        assert_eq!(new.start_offset(), 5);

        let delivered = drain(&mut new, "m3", &log, 10);
        let offsets: BTreeSet<i64> = delivered.iter().map(|(o, _)| *o).collect();
        let expected: BTreeSet<i64> = [5, 6, 8, 9]
            .into_iter()
            .chain(10..=14)
            .chain(20..=29)
            .collect();
        assert_eq!(
            offsets, expected,
            "updates per snapshot {updates_per_snapshot}"
        );
        assert_eq!(delivered.len(), expected.len(), "each once");
        // Released once before: second delivery. Acquired but never persisted: as new.
        assert!(delivered.contains(&(5, 2)) && delivered.contains(&(6, 2)));
        assert!(delivered.contains(&(8, 1)) && delivered.contains(&(12, 1)));
    }
}

#[test]
fn a_rebuilt_partition_finishes_the_window_and_persists_on() {
    let log = plain(&[(0, 9)]);
    let mut coordinator = Coordinator::new(1);
    coordinator.append(
        coordinator
            .store
            .initialize_record(&key(), 0, 0, 0)
            .unwrap(),
    );
    let mut old = partition_at(config(), 0);
    fetch(&mut old, "m1", &log, 0);
    let pending = ack(&mut old, "m1", 2, 3, AcknowledgeType::Accept, 1).unwrap();
    coordinator.persist(&key(), &pending, 1);

    let mut new = SharePartition::initialize(
        config(),
        1,
        &coordinator.store.read(&key()).expect("initialized"),
        || unreachable!(),
    )
    .unwrap();
    assert_eq!(
        new.start_offset(),
        0,
        "0-1 were never written: a gap to fetch again"
    );
    let got = fetch(&mut new, "m2", &log, 5);
    assert_eq!(ranges(&got), vec![(0, 1, 1), (4, 9, 1)]);
    for (first, last) in [(0, 1), (4, 9)] {
        let pending = ack(&mut new, "m2", first, last, AcknowledgeType::Accept, 6).unwrap();
        coordinator.persist(&key(), &pending, 6);
        new.complete_write(&pending, Ok(()), 6);
    }
    assert_eq!(new.start_offset(), 10);
    // As in Kafka, a write carries the start offset from before it moved: the persisted
    // start lags one write behind, and the batch it lags over is persisted as done.
    let persisted = coordinator.reload(1).read(&key()).expect("initialized");
    assert_eq!(persisted.start_offset, 4);
    assert_eq!(persisted.state_batches, vec![StateBatch::new(4, 9, 2, 1)]);
    // A third leader starts past all of it and delivers none of 0-9.
    let mut third = SharePartition::initialize(config(), 2, &persisted, || unreachable!()).unwrap();
    assert_eq!((third.start_offset(), third.end_offset()), (10, 10));
    assert_eq!(third.next_fetch_offset(), 10);
    assert!(drain(&mut third, "m3", &log, 7).is_empty());
}

#[test]
fn a_write_from_an_old_leader_is_fenced() {
    let mut coordinator = Coordinator::new(500);
    coordinator.append(
        coordinator
            .store
            .initialize_record(&key(), 0, 0, 0)
            .unwrap(),
    );
    // The old leader, at leader epoch 0.
    let mut old = partition_at(config(), 0);
    // The new leader (epoch 1) wrote first.
    let mut leader1 = SharePartition::initialize(
        config(),
        1,
        &coordinator.store.read(&key()).expect("initialized"),
        || unreachable!(),
    )
    .unwrap();
    fetch(&mut leader1, "m1", &plain(&[(0, 9)]), 0);
    let pending = ack(&mut leader1, "m1", 0, 9, AcknowledgeType::Accept, 1).unwrap();
    coordinator.persist(&key(), &pending, 1);
    fetch(&mut old, "m0", &plain(&[(0, 9)]), 0);
    let stale = ack(&mut old, "m0", 0, 9, AcknowledgeType::Release, 1).unwrap();
    assert_eq!(
        coordinator.store.write_record(&key(), &stale.write, 2),
        Err(kafka_protocol::error::ResponseError::FencedLeaderEpoch)
    );
}
