//! One slow member cannot make the leader hold unbounded state: the window stops at
//! `max_record_locks` (plus less than one log batch), records locked by a member that
//! never acknowledges come back after the lock duration, and at most
//! `delivery_count_limit` times.

use super::*;

fn log_of(batches: i64, records_per_batch: i64) -> Vec<FetchedBatch> {
    (0..batches)
        .map(|b| FetchedBatch::plain(b * records_per_batch, (b + 1) * records_per_batch - 1))
        .collect()
}

/// What the log returns for a fetch at `offset`: the batches from the one holding it.
fn read_from(log: &[FetchedBatch], offset: i64) -> Vec<FetchedBatch> {
    log.iter()
        .filter(|b| b.last_offset >= offset)
        .copied()
        .collect()
}

fn limited(max_record_locks: u32, delivery_count_limit: u16) -> SharePartitionConfig {
    SharePartitionConfig {
        max_record_locks,
        delivery_count_limit,
        ..SharePartitionConfig::default()
    }
}

#[test]
fn the_window_stops_at_max_record_locks() {
    let mut sp = partition_at(limited(100, 5), 0);
    let log = log_of(100, 10); // 1,000 records
    let mut acquired = 0;
    for now in 0..50 {
        let offset = sp.next_fetch_offset();
        let got = fetch_with(&mut sp, "slow", &read_from(&log, offset), 500, 30, now);
        acquired += got.count;
        assert!(
            sp.in_flight_records() <= 100,
            "window {}",
            sp.in_flight_records()
        );
    }
    assert_eq!(acquired, 100);
    assert_eq!(sp.end_offset(), 99);
    assert!(!sp.can_acquire_records());
    // Other members get nothing either until the window moves.
    let offset = sp.next_fetch_offset();
    let got = fetch(&mut sp, "other", &read_from(&log, offset), 60);
    assert!(got.records.is_empty());
}

#[test]
fn whole_log_batches_overshoot_the_limit_by_less_than_one_batch() {
    let mut sp = partition_at(limited(100, 5), 0);
    let log = log_of(3, 150);
    let got = fetch(&mut sp, "m1", &read_from(&log, 0), 0);
    assert_eq!(ranges(&got), vec![(0, 149, 1)]);
    assert!(!sp.can_acquire_records());
    let offset = sp.next_fetch_offset();
    assert!(fetch(&mut sp, "m1", &read_from(&log, offset), 1)
        .records
        .is_empty());
    assert!(sp.in_flight_records() < 100 + 150);
}

#[test]
fn a_member_that_never_acknowledges_holds_records_for_a_bounded_time() {
    let mut sp = partition_at(limited(100, 2), 0);
    let log = log_of(100, 10);
    let mut now = 0;
    let mut deliveries_of_0 = 0;
    for _ in 0..20 {
        let offset = sp.next_fetch_offset();
        let got = fetch_with(&mut sp, "slow", &read_from(&log, offset), 500, 500, now);
        if got.records.iter().any(|r| r.first_offset == 0) {
            deliveries_of_0 += 1;
        }
        assert!(sp.in_flight_records() <= 100);
        assert!(sp.cached_batches().count() <= 100);
        now += LOCK_MS;
        if let Some(pending) = sp.expire_locks(now) {
            sp.complete_write(&pending, Ok(()), now);
        }
    }
    // Offset 0 went out twice, then was archived; the window moved on.
    assert_eq!(deliveries_of_0, 2);
    assert_eq!(state_or_done(&sp, 0), None);
    assert!(sp.start_offset() >= 100);
}

fn state_or_done(sp: &SharePartition, offset: i64) -> Option<RecordState> {
    sp.record_state(offset).map(|s| s.state())
}

#[test]
fn released_records_in_a_full_window_are_acquired_without_growing_it() {
    let mut sp = partition_at(limited(100, 5), 0);
    let log = log_of(10, 10);
    fetch(&mut sp, "m1", &read_from(&log, 0), 0);
    assert_eq!(sp.end_offset(), 99);
    ack_persisted(&mut sp, "m1", 40, 49, AcknowledgeType::Release, 1);
    assert!(sp.can_acquire_records());
    let offset = sp.next_fetch_offset();
    assert_eq!(offset, 40);
    let got = fetch(&mut sp, "m2", &read_from(&log, offset), 2);
    assert_eq!(ranges(&got), vec![(40, 49, 2)]);
    assert_eq!(sp.end_offset(), 99);
}

#[test]
fn a_corrupt_persisted_window_is_refused_not_allocated() {
    let huge = PersistedState {
        state_epoch: 0,
        start_offset: 0,
        state_batches: vec![StateBatch::new(0, i64::MAX - 1, 0, 1)],
    };
    assert!(matches!(
        SharePartition::initialize(config(), 0, &huge, || Ok(0)),
        Err(ShareError::InvalidPersistedState(_))
    ));
}
