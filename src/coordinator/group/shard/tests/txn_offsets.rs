//! Transactional offset commits in the group shard: pending per producer until the
//! marker, committed or dropped by it, the same after a load of the log, and removed by
//! group deletion.

use super::*;
use crate::log::control::{EndTxnMarker, TxnResult};

const GROUP: &str = "g";

fn commit_of(offset: i64) -> Vec<CommitRequest> {
    vec![CommitRequest {
        topic: "t".into(),
        partition: 0,
        offset,
        leader_epoch: -1,
        metadata: None,
    }]
}

fn outsider() -> Committer {
    Committer {
        member_id: String::new(),
        instance: None,
        generation_id_or_member_epoch: -1,
        api_version: 3,
    }
}

async fn txn_commit(rt: &Runtime, producer: (i64, i16), offset: i64) {
    let answers = rt
        .write(0, move |s: &mut GroupShard| {
            s.commit_txn_offsets(GROUP, &outsider(), producer, commit_of(offset), 0)
        })
        .await
        .unwrap();
    assert_eq!(answers, vec![None]);
}

async fn end(rt: &Runtime, producer: (i64, i16), result: TxnResult) {
    let marker = EndTxnMarker {
        result,
        coordinator_epoch: 0,
    };
    rt.write(0, move |_: &mut GroupShard| {
        Ok(Written::marker(producer.0, producer.1, marker, ()))
    })
    .await
    .unwrap();
}

/// Partition t-0 as a `require_stable` fetch sees it: the offset, or the error.
async fn stable(rt: &Runtime) -> Result<Option<i64>, ResponseError> {
    let rows = rt
        .read(0, |s: &GroupShard| {
            s.fetch_stable_offsets(GROUP, (None, -1), Some(vec![("t".into(), 0)]), true)
        })
        .await
        .unwrap()
        .unwrap();
    rows[0].2.clone().map(|v| v.map(|v| v.offset))
}

#[tokio::test]
async fn the_marker_decides_pending_offsets_and_a_load_decides_the_same() {
    let log = Arc::new(MemoryLog::default());
    let rt = runtime(&log, default_image());
    txn_commit(&rt, (7, 0), 10).await;
    assert_eq!(stable(&rt).await, Err(ResponseError::UnstableOffsetCommit));
    end(&rt, (7, 0), TxnResult::Commit).await;
    assert_eq!(stable(&rt).await, Ok(Some(10)));

    // Two producers: one aborts, the other stays open.
    txn_commit(&rt, (8, 0), 20).await;
    txn_commit(&rt, (9, 0), 30).await;
    end(&rt, (8, 0), TxnResult::Abort).await;
    assert_eq!(stable(&rt).await, Err(ResponseError::UnstableOffsetCommit));
    let before = snapshot(&rt).await;

    let reloaded = runtime(&log, default_image());
    assert_eq!(snapshot(&reloaded).await, before);
    assert_eq!(
        stable(&reloaded).await,
        Err(ResponseError::UnstableOffsetCommit),
        "producer 9's commit is still pending after the load"
    );
    end(&reloaded, (9, 0), TxnResult::Commit).await;
    assert_eq!(stable(&reloaded).await, Ok(Some(30)));
    assert_eq!(stable(&runtime(&log, default_image())).await, Ok(Some(30)));
}

#[tokio::test]
async fn a_later_plain_commit_is_not_overwritten_by_an_earlier_transactional_one() {
    let log = Arc::new(MemoryLog::default());
    let rt = runtime(&log, default_image());
    txn_commit(&rt, (7, 0), 10).await;
    rt.write(0, |s: &mut GroupShard| {
        s.commit_offsets(GROUP, &outsider(), None, commit_of(15), 0)
    })
    .await
    .unwrap();
    end(&rt, (7, 0), TxnResult::Commit).await;
    assert_eq!(stable(&rt).await, Ok(Some(15)));
}

#[tokio::test]
async fn deleting_the_group_removes_its_pending_offsets() {
    let log = Arc::new(MemoryLog::default());
    let rt = runtime(&log, default_image());
    txn_commit(&rt, (7, 0), 10).await;
    rt.write(0, |s: &mut GroupShard| s.delete_group(GROUP))
        .await
        .unwrap();
    end(&rt, (7, 0), TxnResult::Commit).await;
    assert_eq!(
        stable(&rt).await,
        Ok(None),
        "the commit marker finds nothing"
    );
    let gone = rt
        .read(0, |s: &GroupShard| s.group(GROUP).is_none())
        .await
        .unwrap();
    assert!(gone);
}
