use super::*;

#[test]
fn an_expired_lock_makes_the_records_available_again() {
    let mut sp = partition_at(config(), 0);
    fetch(&mut sp, "m1", &plain(&[(0, 9)]), 1_000);
    assert_eq!(sp.next_lock_deadline(), Some(1_000 + LOCK_MS));
    assert!(sp.expire_locks(LOCK_MS).is_none());
    let pending = sp.expire_locks(1_000 + LOCK_MS).expect("released");
    assert_eq!(
        pending.write.state_batches,
        vec![StateBatch::new(0, 9, 0, 1)]
    );
    // Released at once, whatever becomes of the write.
    assert_eq!(state(&sp, 3), (RecordState::Available, 1, String::new()));
    sp.complete_write(&pending, Err(()), 1_000 + LOCK_MS);
    assert_eq!(sp.next_fetch_offset(), 0);
    let got = fetch(&mut sp, "m2", &plain(&[(0, 9)]), 40_000);
    assert_eq!(ranges(&got), vec![(0, 9, 2)]);
    // The holder's late acknowledgement is refused.
    assert!(ack(&mut sp, "m1", 0, 9, AcknowledgeType::Accept, 40_001).is_err());
}

#[test]
fn the_delivery_count_limit_archives() {
    let mut cfg = config();
    cfg.delivery_count_limit = 2;
    let mut sp = partition_at(cfg, 0);
    let log = plain(&[(0, 4)]);
    let mut now = 0;
    for delivery in 1..=2 {
        let got = fetch(&mut sp, "m1", &log, now);
        assert_eq!(ranges(&got), vec![(0, 4, delivery)]);
        now += LOCK_MS;
        let pending = sp.expire_locks(now).unwrap();
        sp.complete_write(&pending, Ok(()), now);
    }
    assert_eq!(sp.start_offset(), 5, "archived after two deliveries");
    assert!(fetch(&mut sp, "m1", &log, now).records.is_empty());
}

#[test]
fn release_at_the_limit_archives() {
    let mut cfg = config();
    cfg.delivery_count_limit = 2;
    let mut sp = partition_at(cfg, 0);
    let log = plain(&[(0, 4)]);
    fetch(&mut sp, "m1", &log, 0);
    ack_persisted(&mut sp, "m1", 0, 4, AcknowledgeType::Release, 1);
    fetch(&mut sp, "m1", &log, 2);
    let pending = ack(&mut sp, "m1", 0, 4, AcknowledgeType::Release, 3).unwrap();
    assert_eq!(
        pending.write.state_batches,
        vec![StateBatch::new(0, 4, 4, 2)]
    );
    sp.complete_write(&pending, Ok(()), 3);
    assert_eq!(sp.start_offset(), 5);
}

#[test]
fn locks_expire_per_offset_in_a_split_batch() {
    let mut sp = partition_at(config(), 0);
    fetch(&mut sp, "m1", &plain(&[(0, 9)]), 0);
    ack_persisted(&mut sp, "m1", 0, 2, AcknowledgeType::Accept, 1);
    let pending = sp.expire_locks(LOCK_MS).unwrap();
    assert_eq!(
        pending.write.state_batches,
        vec![StateBatch::new(3, 9, 0, 1)]
    );
    assert_eq!(sp.start_offset(), 3);
    assert_eq!(sp.next_fetch_offset(), 3);
}

#[test]
fn a_moved_log_start_offset_archives_what_is_below_it() {
    let mut sp = partition_at(config(), 0);
    fetch(&mut sp, "m1", &plain(&[(0, 9), (10, 19)]), 0);
    ack_persisted(&mut sp, "m1", 0, 9, AcknowledgeType::Release, 1);
    sp.update_log_start_offset(5);
    assert_eq!(sp.start_offset(), 5);
    assert_eq!(state(&sp, 4).0, RecordState::Archived);
    assert_eq!(state(&sp, 5).0, RecordState::Available);
    assert_eq!(state(&sp, 10).0, RecordState::Acquired);
    let got = fetch(&mut sp, "m1", &plain(&[(0, 9)]), 3);
    assert_eq!(ranges(&got), vec![(5, 9, 2)]);
    // Past everything cached: the window restarts there.
    sp.update_log_start_offset(30);
    assert_eq!((sp.start_offset(), sp.end_offset()), (30, 30));
}

#[test]
fn acquired_records_below_a_moved_log_start_offset_are_archived_at_timeout() {
    let mut sp = partition_at(config(), 0);
    fetch(&mut sp, "m1", &plain(&[(0, 9)]), 0);
    sp.update_log_start_offset(5);
    let pending = sp.expire_locks(LOCK_MS).unwrap();
    assert_eq!(
        pending.write.state_batches,
        vec![StateBatch::new(0, 4, 4, 1), StateBatch::new(5, 9, 0, 1)]
    );
    sp.complete_write(&pending, Ok(()), LOCK_MS);
    assert_eq!(sp.start_offset(), 5);
    assert_eq!(sp.next_fetch_offset(), 5);
}
