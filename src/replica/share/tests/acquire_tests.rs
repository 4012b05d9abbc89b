use super::*;

#[test]
fn acquire_single_batch() {
    let mut sp = partition_at(config(), 0);
    let got = fetch(&mut sp, "m1", &plain(&[(0, 4)]), 0);
    assert_eq!(ranges(&got), vec![(0, 4, 1)]);
    assert_eq!(got.count, 5);
    assert_eq!((sp.start_offset(), sp.end_offset()), (0, 4));
    assert_eq!(sp.next_fetch_offset(), 5);
    assert_eq!(state(&sp, 2), (RecordState::Acquired, 1, "m1".into()));
    assert_eq!(
        sp.record_state(0).and_then(|s| s.lock_deadline_ms()),
        Some(LOCK_MS)
    );
}

#[test]
fn acquire_cuts_ranges_at_batch_size_on_log_batch_boundaries() {
    let mut sp = partition_at(config(), 0);
    let batches = plain(&[(0, 4), (5, 9), (10, 14), (15, 19), (20, 24)]);
    let got = fetch_with(&mut sp, "m1", &batches, 10, 500, 0);
    assert_eq!(ranges(&got), vec![(0, 9, 1), (10, 19, 1), (20, 24, 1)]);
    assert_eq!(sp.cached_batches().count(), 3);
}

#[test]
fn acquire_stops_at_the_log_batch_holding_the_max_record() {
    let mut sp = partition_at(config(), 0);
    let batches = plain(&[(0, 9), (10, 19), (20, 29)]);
    // 15 records asked: the batch holding the 15th (10-19) is taken whole.
    let got = fetch_with(&mut sp, "m1", &batches, 500, 15, 0);
    assert_eq!(ranges(&got), vec![(0, 19, 1)]);
    assert_eq!(sp.next_fetch_offset(), 20);
}

#[test]
fn acquired_records_are_not_acquired_twice() {
    let mut sp = partition_at(config(), 0);
    fetch(&mut sp, "m1", &plain(&[(0, 4)]), 0);
    // Another member's fetch reads past the window: nothing of 0-4 again.
    let req = AcquireRequest {
        member_id: "m2",
        batch_size: 500,
        max_fetch_records: 500,
        mode: Default::default(),
        fetch_offset: 0,
        batches: &plain(&[(0, 4)]),
        aborted_transactions: None,
    };
    assert!(sp.acquire(&req, 1).records.is_empty());
    assert_eq!(state(&sp, 0).2, "m1");
}

#[test]
fn records_before_the_start_offset_are_never_acquired() {
    let mut sp = partition_at(config(), 5);
    let got = fetch(&mut sp, "m1", &plain(&[(0, 9)]), 0);
    assert_eq!(ranges(&got), vec![(5, 9, 1)]);
    let mut sp = partition_at(config(), 20);
    assert!(fetch(&mut sp, "m1", &plain(&[(0, 9)]), 0)
        .records
        .is_empty());
}

#[test]
fn released_offsets_inside_a_batch_are_acquired_per_offset() {
    let mut sp = partition_at(config(), 0);
    fetch(&mut sp, "m1", &plain(&[(0, 9)]), 0);
    let types = vec![1, 2, 2, 1, 1, 2, 1, 1, 1, 1];
    let pending = sp
        .acknowledge(
            "m1",
            &[AcknowledgementBatch {
                first_offset: 0,
                last_offset: 9,
                acknowledge_types: types,
            }],
            1,
        )
        .unwrap();
    sp.complete_write(&pending, Ok(()), 1);
    assert_eq!(sp.start_offset(), 1);
    assert_eq!(sp.next_fetch_offset(), 1);
    let got = fetch(&mut sp, "m2", &plain(&[(0, 9)]), 2);
    assert_eq!(ranges(&got), vec![(1, 2, 2), (5, 5, 2)]);
    assert_eq!(state(&sp, 5), (RecordState::Acquired, 2, "m2".into()));
    // Nothing left to hand out in the window: the next fetch starts past it.
    assert_eq!(sp.next_fetch_offset(), 10);
}

#[test]
fn read_committed_archives_aborted_transactions() {
    let mut sp = partition_at(config(), 0);
    let txn = |f, l| FetchedBatch {
        base_offset: f,
        last_offset: l,
        producer_id: 7,
        transactional: true,
        control: None,
    };
    let batches = vec![
        txn(0, 1),
        FetchedBatch::plain(2, 2),
        FetchedBatch {
            control: Some(ControlMarker::Abort),
            ..txn(3, 3)
        },
        FetchedBatch {
            producer_id: 8,
            ..txn(4, 5)
        },
        FetchedBatch {
            producer_id: 8,
            control: Some(ControlMarker::Commit),
            ..txn(6, 6)
        },
    ];
    let aborted = [AbortedTransaction {
        producer_id: 7,
        first_offset: 0,
    }];
    let req = AcquireRequest {
        member_id: "m1",
        batch_size: 500,
        max_fetch_records: 500,
        mode: Default::default(),
        fetch_offset: 0,
        batches: &batches,
        aborted_transactions: Some(&aborted),
    };
    let got = sp.acquire(&req, 0);
    // The aborted producer's records never reach the member; its marker and the
    // committed producer's records do (the member acknowledges markers as GAP).
    assert_eq!(ranges(&got), vec![(2, 6, 1)]);
    assert_eq!(got.count, 5);
    assert_eq!(state(&sp, 0).0, RecordState::Archived);
    assert_eq!(state(&sp, 1).0, RecordState::Archived);
    ack_persisted(&mut sp, "m1", 2, 2, AcknowledgeType::Accept, 1);
    ack_persisted(&mut sp, "m1", 3, 3, AcknowledgeType::Gap, 1);
    ack_persisted(&mut sp, "m1", 4, 6, AcknowledgeType::Accept, 1);
    assert_eq!(sp.start_offset(), 7);
}

#[test]
fn read_uncommitted_hands_out_aborted_records() {
    let mut sp = partition_at(config(), 0);
    let batches = vec![
        FetchedBatch {
            base_offset: 0,
            last_offset: 1,
            producer_id: 7,
            transactional: true,
            control: None,
        },
        FetchedBatch {
            base_offset: 2,
            last_offset: 2,
            producer_id: 7,
            transactional: true,
            control: Some(ControlMarker::Abort),
        },
    ];
    let got = fetch(&mut sp, "m1", &batches, 0);
    assert_eq!(ranges(&got), vec![(0, 2, 1)]);
}

#[test]
fn compacted_away_batches_are_archived_so_the_start_offset_can_pass() {
    let mut sp = partition_at(config(), 0);
    fetch(&mut sp, "m1", &plain(&[(0, 4), (5, 9)]), 0);
    ack_persisted(&mut sp, "m1", 0, 9, AcknowledgeType::Release, 1);
    assert_eq!(sp.next_fetch_offset(), 0);
    // The cleaner removed 0-4 meanwhile: the log's first batch starts at 5.
    let got = fetch(&mut sp, "m1", &plain(&[(5, 9)]), 2);
    assert_eq!(ranges(&got), vec![(5, 9, 2)]);
    assert_eq!(state(&sp, 0).0, RecordState::Archived);
    ack_persisted(&mut sp, "m1", 5, 9, AcknowledgeType::Accept, 3);
    assert_eq!(sp.start_offset(), 10);
}

#[test]
fn last_delivery_goes_out_alone() {
    let mut cfg = config();
    cfg.delivery_count_limit = 4;
    let mut sp = partition_at(cfg, 0);
    let log = plain(&[(0, 3)]);
    fetch(&mut sp, "m1", &log, 0);
    // Offset 3 alone goes round twice more while m1 holds 0-2.
    for now in [1, 3] {
        ack_persisted(&mut sp, "m1", 3, 3, AcknowledgeType::Release, now);
        assert_eq!(ranges(&fetch(&mut sp, "m1", &log, now + 1)).len(), 1);
    }
    ack_persisted(&mut sp, "m1", 0, 3, AcknowledgeType::Release, 5);
    assert_eq!(state(&sp, 3), (RecordState::Available, 3, String::new()));
    // Offset 3's next delivery is its last (4 of 4): it is not sent with 0-2.
    let got = fetch(&mut sp, "m2", &log, 6);
    assert_eq!(ranges(&got), vec![(0, 2, 2)]);
    let got = fetch(&mut sp, "m2", &log, 7);
    assert_eq!(ranges(&got), vec![(3, 3, 4)]);
}

#[test]
fn often_redelivered_batches_go_out_in_smaller_groups() {
    let mut cfg = config();
    cfg.delivery_count_limit = 10; // throttled from delivery 5
    let mut sp = partition_at(cfg, 0);
    let batches = plain(&[(0, 99)]);
    for round in 0..5 {
        let got = fetch(&mut sp, "m1", &batches, round * 10);
        assert_eq!(ranges(&got), vec![(0, 99, round as u16 + 1)]);
        ack_persisted(
            &mut sp,
            "m1",
            0,
            99,
            AcknowledgeType::Release,
            round * 10 + 1,
        );
    }
    // Delivered 5 times (>= 5): half of the batch at a time.
    let got = fetch(&mut sp, "m1", &batches, 100);
    assert_eq!(ranges(&got), vec![(0, 49, 6)]);
}

fn record_limit(
    sp: &mut SharePartition,
    member: &str,
    batches: &[FetchedBatch],
    max: u32,
) -> ShareAcquiredRecords {
    fetch_in_mode(
        sp,
        member,
        batches,
        500,
        max,
        ShareAcquireMode::RecordLimit,
        0,
    )
}

#[test]
fn record_limit_cuts_new_records_inside_a_log_batch() {
    let mut sp = partition_at(config(), 0);
    let batches = plain(&[(0, 9), (10, 19)]);
    // Batch-optimized would take 0-9 whole; record-limit takes exactly 4.
    let got = record_limit(&mut sp, "m1", &batches, 4);
    assert_eq!(ranges(&got), vec![(0, 3, 1)]);
    assert_eq!(got.count, 4);
    assert_eq!(sp.next_fetch_offset(), 4);
    assert!(
        sp.record_state(4).is_none(),
        "the rest of the log batch is not cached"
    );
    // The next fetch reads the same log batch again and goes on where the first stopped,
    // across the log batch boundary.
    let got = record_limit(&mut sp, "m2", &batches, 9);
    assert_eq!(ranges(&got), vec![(4, 12, 1)]);
    assert_eq!(state(&sp, 12), (RecordState::Acquired, 1, "m2".into()));
    assert_eq!(sp.next_fetch_offset(), 13);
    // Fewer records than the limit: all of them.
    let got = record_limit(&mut sp, "m1", &batches, 100);
    assert_eq!(ranges(&got), vec![(13, 19, 1)]);
}

#[test]
fn record_limit_splits_a_cached_batch() {
    let mut sp = partition_at(config(), 0);
    let batches = plain(&[(0, 9)]);
    fetch(&mut sp, "m1", &batches, 0);
    ack_persisted(&mut sp, "m1", 0, 9, AcknowledgeType::Release, 1);
    // 0-9 is one AVAILABLE cached batch: record-limit members share it out 3 by 3.
    let got = record_limit(&mut sp, "m2", &batches, 3);
    assert_eq!(ranges(&got), vec![(0, 2, 2)]);
    let got = record_limit(&mut sp, "m3", &batches, 3);
    assert_eq!(ranges(&got), vec![(3, 5, 2)]);
    assert_eq!(state(&sp, 2), (RecordState::Acquired, 2, "m2".into()));
    assert_eq!(state(&sp, 3), (RecordState::Acquired, 2, "m3".into()));
    assert_eq!(state(&sp, 6).0, RecordState::Available);
    // Batch-optimized takes what is left of the split batch.
    let got = fetch(&mut sp, "m1", &batches, 2);
    assert_eq!(ranges(&got), vec![(6, 9, 2)]);
}

#[test]
fn record_limit_counts_cached_and_new_records_together() {
    let mut sp = partition_at(config(), 0);
    let batches = plain(&[(0, 4), (5, 9)]);
    fetch_with(&mut sp, "m1", &plain(&[(0, 4)]), 500, 500, 0);
    ack_persisted(&mut sp, "m1", 0, 4, AcknowledgeType::Release, 1);
    // 5 available in the cache, 2 more new ones: 7 in all.
    let got = record_limit(&mut sp, "m2", &batches, 7);
    assert_eq!(ranges(&got), vec![(0, 4, 2), (5, 6, 1)]);
    assert_eq!(got.count, 7);
    assert!(sp.record_state(7).is_none());
}
