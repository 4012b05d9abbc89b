use super::*;

fn acquired_0_to_9() -> SharePartition {
    let mut sp = partition_at(config(), 0);
    fetch(&mut sp, "m1", &plain(&[(0, 9)]), 0);
    sp
}

#[test]
fn accept_moves_the_start_offset_once_persisted() {
    let mut sp = acquired_0_to_9();
    let pending = ack(&mut sp, "m1", 0, 9, AcknowledgeType::Accept, 1).unwrap();
    assert_eq!(
        pending.write.state_batches,
        vec![StateBatch::new(0, 9, 2, 1)]
    );
    assert_eq!(pending.write.delivery_complete_count, 10);
    // Not yet persisted: the records are taken by nobody, the window has not moved.
    assert_eq!(sp.start_offset(), 0);
    assert!(sp.record_state(0).unwrap().has_ongoing_transition());
    assert!(sp.complete_write(&pending, Ok(()), 1));
    assert_eq!((sp.start_offset(), sp.end_offset()), (10, 10));
    assert_eq!(sp.cached_batches().count(), 0);
    assert_eq!(sp.delivery_complete_count(), 0);
    assert_eq!(sp.next_fetch_offset(), 10);
}

#[test]
fn release_redelivers_with_the_next_delivery_count() {
    let mut sp = acquired_0_to_9();
    ack_persisted(&mut sp, "m1", 0, 9, AcknowledgeType::Release, 1);
    assert_eq!(state(&sp, 0), (RecordState::Available, 1, String::new()));
    assert_eq!(sp.next_fetch_offset(), 0);
    let got = fetch(&mut sp, "m2", &plain(&[(0, 9)]), 2);
    assert_eq!(ranges(&got), vec![(0, 9, 2)]);
}

#[test]
fn reject_archives_and_is_never_redelivered() {
    let mut sp = acquired_0_to_9();
    ack_persisted(&mut sp, "m1", 0, 4, AcknowledgeType::Reject, 1);
    assert_eq!(state(&sp, 0).0, RecordState::Archived);
    assert_eq!(sp.start_offset(), 5);
    ack_persisted(&mut sp, "m1", 5, 9, AcknowledgeType::Release, 1);
    let got = fetch(&mut sp, "m1", &plain(&[(0, 9)]), 2);
    assert_eq!(ranges(&got), vec![(5, 9, 2)]);
}

#[test]
fn per_offset_types_split_the_batch() {
    let mut sp = acquired_0_to_9();
    let batch = AcknowledgementBatch {
        first_offset: 0,
        last_offset: 4,
        acknowledge_types: vec![1, 1, 2, 3, 0],
    };
    let pending = sp.acknowledge("m1", &[batch], 1).unwrap();
    assert_eq!(
        pending.write.state_batches,
        vec![
            StateBatch::new(0, 1, 2, 1),
            StateBatch::new(2, 2, 0, 1),
            StateBatch::new(3, 4, 4, 1)
        ]
    );
    sp.complete_write(&pending, Ok(()), 1);
    assert_eq!(sp.start_offset(), 2);
    assert_eq!(state(&sp, 2).0, RecordState::Available);
    assert_eq!(state(&sp, 4).0, RecordState::Archived);
    assert_eq!(state(&sp, 5), (RecordState::Acquired, 1, "m1".into()));
    assert_eq!(sp.delivery_complete_count(), 2);
}

#[test]
fn records_of_another_member_are_refused_unchanged() {
    let mut sp = acquired_0_to_9();
    let before = sp.clone();
    let err = ack(&mut sp, "m2", 0, 9, AcknowledgeType::Accept, 1).unwrap_err();
    assert_eq!(
        err.response_error(),
        kafka_protocol::error::ResponseError::InvalidRecordState
    );
    assert_eq!(
        format!("{:?}", sp.cached_batches().collect::<Vec<_>>()),
        format!("{:?}", before.cached_batches().collect::<Vec<_>>())
    );
}

#[test]
fn records_not_acquired_are_refused() {
    let mut sp = acquired_0_to_9();
    ack_persisted(&mut sp, "m1", 5, 9, AcknowledgeType::Release, 1);
    let err = ack(&mut sp, "m1", 5, 9, AcknowledgeType::Accept, 2).unwrap_err();
    assert!(matches!(err, ShareError::InvalidRecordState(_)), "{err}");
}

#[test]
fn ranges_outside_the_window_are_refused() {
    let mut sp = partition_at(config(), 10);
    fetch(&mut sp, "m1", &plain(&[(10, 19)]), 0);
    // Past what was handed out.
    let err = ack(&mut sp, "m1", 15, 25, AcknowledgeType::Accept, 1).unwrap_err();
    assert_eq!(
        err,
        ShareError::InvalidRequest("the last offset in request is past acquired records")
    );
    let err = ack(&mut sp, "m1", 20, 25, AcknowledgeType::Accept, 1).unwrap_err();
    assert!(matches!(err, ShareError::InvalidRequest(_)), "{err}");
    // Wholly below the start offset: already done, nothing to do (as Kafka skips it).
    let pending = ack(&mut sp, "m1", 0, 9, AcknowledgeType::Accept, 1).unwrap();
    assert!(pending.is_empty());
    assert_eq!(state(&sp, 10), (RecordState::Acquired, 1, "m1".into()));
    // Straddling the start offset: only the window's part is acknowledged.
    let pending = ack(&mut sp, "m1", 5, 12, AcknowledgeType::Accept, 1).unwrap();
    assert_eq!(
        pending.write.state_batches,
        vec![StateBatch::new(10, 12, 2, 1)]
    );
    sp.complete_write(&pending, Ok(()), 1);
    assert_eq!(sp.start_offset(), 13);
    // Inside the window but never handed out: no record held there.
    let mut empty = partition_at(config(), 10);
    let err = ack(&mut empty, "m1", 10, 12, AcknowledgeType::Accept, 1).unwrap_err();
    assert_eq!(
        err.response_error(),
        kafka_protocol::error::ResponseError::InvalidRecordState
    );
}

#[test]
fn an_offset_acknowledged_twice_in_one_request_changes_nothing() {
    let mut sp = acquired_0_to_9();
    let batches = [
        AcknowledgementBatch::new(0, 4, AcknowledgeType::Accept),
        AcknowledgementBatch::new(4, 9, AcknowledgeType::Reject),
    ];
    // Kafka's request validation lets a batch start where the last ended ...
    validate_acknowledgement_batches(&batches, 3, false).unwrap();
    // ... and the share-partition refuses the second transition of offset 4.
    let err = sp.acknowledge("m1", &batches, 1).unwrap_err();
    assert!(matches!(err, ShareError::InvalidRecordState(_)), "{err}");
    for offset in 0..=9 {
        let s = sp.record_state(offset).unwrap();
        assert_eq!(
            (s.state(), s.has_ongoing_transition()),
            (RecordState::Acquired, false)
        );
    }
    assert_eq!(sp.delivery_complete_count(), 0);
    // Overlapping ranges never reach it.
    let overlapping = [
        AcknowledgementBatch::new(0, 5, AcknowledgeType::Accept),
        AcknowledgementBatch::new(3, 9, AcknowledgeType::Accept),
    ];
    assert!(matches!(
        validate_acknowledgement_batches(&overlapping, 3, false),
        Err(ShareError::InvalidRequest(_))
    ));
}

#[test]
fn validation_refuses_malformed_batches() {
    let bad = |first, last, types: Vec<i8>| {
        let b = [AcknowledgementBatch {
            first_offset: first,
            last_offset: last,
            acknowledge_types: types,
        }];
        validate_acknowledgement_batches(&b, 3, false)
    };
    assert!(bad(5, 4, vec![1]).is_err());
    assert!(bad(0, 4, vec![]).is_err());
    assert!(bad(0, 4, vec![1, 1]).is_err());
    assert!(bad(0, 1, vec![1, 5]).is_err());
    assert!(bad(0, 1, vec![-1]).is_err());
    assert!(bad(0, 0, vec![4]).is_err(), "RENEW is past v1's types");
    assert!(bad(0, 1, vec![0, 3]).is_ok());
    let renew = [AcknowledgementBatch::new(0, 0, AcknowledgeType::Renew)];
    assert!(validate_acknowledgement_batches(&renew, 4, false).is_err());
    assert!(validate_acknowledgement_batches(&renew, 4, true).is_ok());
}

#[test]
fn an_acknowledgement_in_flight_blocks_another() {
    let mut sp = acquired_0_to_9();
    let _pending = ack(&mut sp, "m1", 0, 9, AcknowledgeType::Accept, 1).unwrap();
    let err = ack(&mut sp, "m1", 0, 9, AcknowledgeType::Release, 2).unwrap_err();
    assert!(matches!(err, ShareError::InvalidRecordState(_)), "{err}");
}

#[test]
fn a_failed_write_returns_the_records_to_their_holder() {
    let mut sp = acquired_0_to_9();
    let pending = ack(&mut sp, "m1", 0, 9, AcknowledgeType::Accept, 1).unwrap();
    assert!(!sp.complete_write(&pending, Err(()), 2));
    assert_eq!(state(&sp, 0), (RecordState::Acquired, 1, "m1".into()));
    assert_eq!(sp.start_offset(), 0);
    assert_eq!(sp.delivery_complete_count(), 0);
    ack_persisted(&mut sp, "m1", 0, 9, AcknowledgeType::Accept, 3);
    assert_eq!(sp.start_offset(), 10);
}

#[test]
fn a_failed_write_after_the_lock_ran_out_makes_the_records_available() {
    let mut sp = acquired_0_to_9();
    let pending = ack(&mut sp, "m1", 0, 9, AcknowledgeType::Accept, LOCK_MS - 1).unwrap();
    // The lock runs out while the write is under way: the timeout leaves them alone ...
    assert!(sp.expire_locks(LOCK_MS).is_none());
    // ... and the failed write finds it expired.
    sp.complete_write(&pending, Err(()), LOCK_MS + 1);
    assert_eq!(state(&sp, 0), (RecordState::Available, 1, String::new()));
    assert_eq!(sp.next_fetch_offset(), 0);
}

#[test]
fn renew_extends_the_lock_without_persisting() {
    let mut sp = acquired_0_to_9();
    let pending = ack(&mut sp, "m1", 0, 9, AcknowledgeType::Renew, 20_000).unwrap();
    assert!(pending.is_empty());
    assert!(sp.expire_locks(LOCK_MS).is_none());
    assert_eq!(sp.next_lock_deadline(), Some(20_000 + LOCK_MS));
    assert!(sp.expire_locks(20_000 + LOCK_MS).is_some());
}

#[test]
fn closing_a_session_releases_only_that_members_records() {
    let mut sp = partition_at(config(), 0);
    fetch(&mut sp, "m1", &plain(&[(0, 4)]), 0);
    fetch(&mut sp, "m2", &plain(&[(5, 9)]), 0);
    let pending = sp.release_acquired_records("m1", 1).unwrap();
    assert_eq!(
        pending.write.state_batches,
        vec![StateBatch::new(0, 4, 0, 1)]
    );
    sp.complete_write(&pending, Ok(()), 1);
    assert_eq!(state(&sp, 0), (RecordState::Available, 1, String::new()));
    assert_eq!(state(&sp, 5), (RecordState::Acquired, 1, "m2".into()));
    assert_eq!(sp.next_fetch_offset(), 0);
}
