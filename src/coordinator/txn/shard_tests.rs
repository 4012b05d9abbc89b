use super::*;
use crate::config::BrokerConfig;

fn shard() -> (TxnShard, mpsc::UnboundedReceiver<Completion>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut s = TxnShard::new(0, BrokerConfig::default().transaction, tx);
    s.on_loaded(Instant::now());
    (s, rx)
}

/// Replays what an operation wrote, as the runtime does once it is appended; returns
/// the records too.
fn apply<R>(
    s: &mut TxnShard,
    op: impl FnOnce(&mut TxnShard) -> Written<TxnRecord, R>,
) -> (R, Vec<TxnRecord>) {
    let w = op(s);
    for (i, r) in w.records.iter().enumerate() {
        s.replay(i as i64, r.clone()).unwrap();
    }
    (w.response, w.records)
}

fn tp(p: i32) -> TopicPartition {
    TopicPartition::new("t", p)
}

#[test]
fn a_transaction_prepares_completes_and_replays_to_the_same_state() {
    let (mut s, mut prepared) = shard();
    let mut log = Vec::new();
    let (r, recs) = apply(&mut s, |s| {
        s.init_producer_id("tx", 60_000, None, Some(7), 1).unwrap()
    });
    assert_eq!(r, Ok((7, 0)));
    log.extend(recs);
    let (_, recs) = apply(&mut s, |s| {
        s.add_partitions("tx", 7, 0, &[tp(0), tp(1)], 2).unwrap()
    });
    log.extend(recs);
    assert_eq!(s.get("tx").unwrap().value.state, TxnState::Ongoing);
    // Adding what is there already writes nothing.
    assert!(s
        .add_partitions("tx", 7, 0, &[tp(1)], 3)
        .unwrap()
        .records
        .is_empty());
    assert_eq!(
        s.verify_partitions("tx", 7, 0, &[tp(1), tp(2)]).unwrap(),
        vec![(tp(1), None), (tp(2), Some(ResponseError::InvalidTxnState))]
    );

    let (outcome, recs) = apply(&mut s, |s| s.end_txn("tx", 7, 0, true, 4).unwrap());
    log.extend(recs);
    let c = prepared
        .try_recv()
        .expect("the prepared transaction goes to the marker writer");
    assert_eq!((c.result, c.producer_epoch), (TxnResult::Commit, 0));
    assert_eq!(c.partitions.len(), 2);
    assert!(matches!(
        s.end_txn("tx", 7, 0, true, 5),
        Err(ResponseError::ConcurrentTransactions)
    ));
    let (_, recs) = apply(&mut s, |s| s.complete(&c, 6));
    log.extend(recs);
    let EndTxnOutcome::Completing(mut done) = outcome else {
        panic!("an ongoing transaction completes")
    };
    assert!(done.try_recv().is_ok(), "EndTxn is answered once complete");
    assert_eq!(s.get("tx").unwrap().value.state, TxnState::CompleteCommit);
    assert!(matches!(
        s.end_txn("tx", 7, 0, true, 7).unwrap().response,
        EndTxnOutcome::Done
    ));

    // Loading the same records gives the same state, and starts nothing.
    let (tx, mut started) = mpsc::unbounded_channel();
    let mut loaded = TxnShard::new(0, BrokerConfig::default().transaction, tx);
    for (i, r) in log.into_iter().enumerate() {
        loaded.replay(i as i64, r).unwrap();
    }
    loaded.on_loaded(Instant::now());
    assert_eq!(loaded.get("tx").unwrap().value, s.get("tx").unwrap().value);
    assert!(started.try_recv().is_err());
}

#[test]
fn a_prepared_transaction_found_at_load_is_completed() {
    let (mut s, _) = shard();
    let _ = apply(&mut s, |s| {
        s.init_producer_id("tx", 60_000, None, Some(3), 1).unwrap()
    });
    apply(&mut s, |s| {
        s.add_partitions("tx", 3, 0, &[tp(0)], 2).unwrap()
    });
    let (_, prepare) = apply(&mut s, |s| s.end_txn("tx", 3, 0, false, 3).unwrap());
    let (tx, mut started) = mpsc::unbounded_channel();
    let mut loaded = TxnShard::new(0, BrokerConfig::default().transaction, tx);
    for (i, r) in prepare.into_iter().enumerate() {
        loaded.replay(i as i64, r).unwrap();
    }
    assert!(started.try_recv().is_err(), "not while loading");
    loaded.on_loaded(Instant::now());
    let c = started.try_recv().expect("completed after the load");
    assert_eq!((c.result, c.producer_id), (TxnResult::Abort, 3));
}

#[test]
fn epochs_fence_and_kip_360_retries_get_the_same_epoch() {
    let (mut s, _) = shard();
    let _ = apply(&mut s, |s| {
        s.init_producer_id("tx", 60_000, None, Some(5), 1).unwrap()
    });
    let (r, _) = apply(&mut s, |s| {
        s.init_producer_id("tx", 60_000, None, None, 2).unwrap()
    });
    assert_eq!(r, Ok((5, 1)), "a new instance bumps the epoch");
    assert!(matches!(
        s.add_partitions("tx", 5, 0, &[tp(0)], 3),
        Err(ResponseError::ProducerFenced)
    ));
    // KIP-360: the producer at epoch 1 re-initialises after an abortable error.
    let (r, _) = apply(&mut s, |s| {
        s.init_producer_id("tx", 60_000, Some((5, 1)), None, 4)
            .unwrap()
    });
    assert_eq!(r, Ok((5, 2)));
    // Its retry (the answer was lost) gets the same epoch back, no further bump.
    let w = s
        .init_producer_id("tx", 60_000, Some((5, 1)), None, 5)
        .unwrap();
    assert!(w.records.is_empty());
    assert_eq!(w.response, Ok((5, 2)));
    // An epoch the coordinator never gave out is fenced; so is another producer id.
    assert!(matches!(
        s.init_producer_id("tx", 60_000, Some((5, 0)), None, 6),
        Err(ResponseError::ProducerFenced)
    ));
    assert!(matches!(
        s.init_producer_id("tx", 60_000, Some((99, 2)), None, 6),
        Err(ResponseError::ProducerFenced)
    ));
}

#[test]
fn a_transaction_past_its_timeout_is_aborted_under_a_bumped_epoch() {
    let (mut s, mut prepared) = shard();
    let _ = apply(&mut s, |s| {
        s.init_producer_id("tx", 1_000, None, Some(9), 1).unwrap()
    });
    let now = now_ms();
    apply(&mut s, |s| {
        s.add_partitions("tx", 9, 0, &[tp(0)], now - 5_000).unwrap()
    });
    let later = Instant::now() + Duration::from_secs(3600);
    let (_, recs) = apply(&mut s, |s| s.on_deadline(later));
    assert_eq!(recs.len(), 1);
    let v = &s.get("tx").unwrap().value;
    assert_eq!((v.state, v.producer_epoch), (TxnState::PrepareAbort, 1));
    let c = prepared.try_recv().unwrap();
    assert_eq!((c.result, c.producer_epoch), (TxnResult::Abort, 1));
    // The producer that opened it is fenced.
    assert!(matches!(
        s.end_txn("tx", 9, 0, true, now),
        Err(ResponseError::ProducerFenced)
    ));
}

#[test]
fn idle_ids_expire_with_a_tombstone() {
    let (mut s, _) = shard();
    let _ = apply(&mut s, |s| {
        s.init_producer_id("old", 60_000, None, Some(1), 0).unwrap()
    });
    let (_, recs) = apply(&mut s, |s| {
        s.on_deadline(Instant::now() + Duration::from_secs(7200))
    });
    assert_eq!(recs, vec![("old".to_string(), None)]);
    assert!(s.get("old").is_none());
}
