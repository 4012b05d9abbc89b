//! The runtime with a toy shard (a key-value map whose entries can expire) over an
//! in-memory log: writes replay once appended, a failed append changes nothing, a load
//! replays to the state the writes built, responses wait for the high watermark.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::time::{Duration, Instant};

use super::memory_log::MemoryLog;
use super::timers::Timers;
use super::*;

/// key → value (None: a tombstone).
type Kv = (String, Option<String>);

/// Run by `on_loaded` (a test's look at the runtime from inside the shard).
type OnLoaded = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct KvShard {
    map: BTreeMap<String, (String, i64)>,
    expiry: Timers<String>,
    unloaded: bool,
    on_loaded: Option<OnLoaded>,
}

impl Shard for KvShard {
    type Record = Kv;

    fn encode(record: &Kv) -> (Bytes, Option<Bytes>) {
        (
            Bytes::from(record.0.clone()),
            record.1.clone().map(Bytes::from),
        )
    }

    fn decode(key: Option<&Bytes>, value: Option<&Bytes>) -> Result<Option<Kv>, String> {
        let key = key.ok_or("no key")?;
        let key = String::from_utf8(key.to_vec()).map_err(|e| e.to_string())?;
        if key.starts_with('x') {
            return Ok(None);
        }
        let value = value
            .map(|v| String::from_utf8(v.to_vec()).map_err(|e| e.to_string()))
            .transpose()?;
        Ok(Some((key, value)))
    }

    fn replay(&mut self, offset: i64, (key, value): Kv) -> Result<(), String> {
        if key == "bad" {
            return Err("bad key".into());
        }
        match value {
            Some(v) => {
                self.map.insert(key, (v, offset));
            }
            None => {
                self.map.remove(&key);
                self.expiry.cancel(&key);
            }
        }
        Ok(())
    }

    fn on_loaded(&mut self, _now: Instant) {
        if let Some(f) = &self.on_loaded {
            f();
        }
    }

    fn on_unloaded(&mut self) {
        self.unloaded = true;
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.expiry.next()
    }

    fn on_deadline(&mut self, now: Instant) -> Written<Kv, ()> {
        let records = self
            .expiry
            .pop_due(now)
            .into_iter()
            .map(|k| (k, None))
            .collect();
        Written::new(records, ())
    }
}

fn runtime(log: &Arc<MemoryLog>) -> CoordinatorRuntime<KvShard> {
    CoordinatorRuntime::new("test coordinator", log.clone(), |_| KvShard::default())
}

fn put(
    key: &str,
    value: &str,
) -> impl FnOnce(&mut KvShard) -> Result<Written<Kv, ()>, ResponseError> {
    let record = (key.to_string(), Some(value.to_string()));
    move |_| Ok(Written::new(vec![record], ()))
}

async fn contents(rt: &CoordinatorRuntime<KvShard>) -> Vec<(String, String, i64)> {
    rt.read(0, |s: &KvShard| {
        s.map
            .iter()
            .map(|(k, (v, o))| (k.clone(), v.clone(), *o))
            .collect()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn writes_replay_once_appended_and_a_load_rebuilds_the_same_state() {
    let log = Arc::new(MemoryLog::default());
    let rt = runtime(&log);
    assert_eq!(rt.load_now(0, 0), ShardStatus::Active);
    rt.write(0, put("a", "1")).await.unwrap();
    rt.write(0, |_: &mut KvShard| {
        Ok(Written::new(
            vec![("b".to_string(), Some("2".to_string())), ("a".into(), None)],
            (),
        ))
    })
    .await
    .unwrap();
    rt.write(0, put("c", "3")).await.unwrap();
    let live = contents(&rt).await;
    assert_eq!(
        live,
        vec![("b".into(), "2".into(), 1), ("c".into(), "3".into(), 3)]
    );

    // A second runtime over the same log: the load replays to the same state.
    let reloaded = runtime(&log);
    assert_eq!(reloaded.load_now(0, 1), ShardStatus::Active);
    assert_eq!(contents(&reloaded).await, live);
}

#[tokio::test]
async fn a_failed_append_changes_nothing() {
    let log = Arc::new(MemoryLog::default());
    let rt = runtime(&log);
    rt.load_now(0, 0);
    rt.write(0, put("a", "1")).await.unwrap();
    log.fail_appends.store(true, Ordering::Release);
    let err = rt
        .write(0, |_: &mut KvShard| {
            Ok(Written::new(vec![("a".to_string(), None)], "deleted"))
        })
        .await;
    assert_eq!(err, Err(ResponseError::CoordinatorNotAvailable));
    assert_eq!(contents(&rt).await, vec![("a".into(), "1".into(), 0)]);
    log.fail_appends.store(false, Ordering::Release);
    let reloaded = runtime(&log);
    reloaded.load_now(0, 1);
    assert_eq!(contents(&reloaded).await, vec![("a".into(), "1".into(), 0)]);
}

#[tokio::test]
async fn an_operation_error_writes_nothing() {
    let log = Arc::new(MemoryLog::default());
    let rt = runtime(&log);
    rt.load_now(0, 0);
    let r: Result<(), _> = rt
        .write(0, |_: &mut KvShard| Err(ResponseError::InvalidGroupId))
        .await;
    assert_eq!(r, Err(ResponseError::InvalidGroupId));
    assert_eq!(log.log_end(0), 0);
}

#[tokio::test]
async fn the_response_waits_for_the_high_watermark() {
    let log = Arc::new(MemoryLog::default());
    log.manual_high_watermark.store(true, Ordering::Release);
    let rt = Arc::new(runtime(&log));
    rt.load_now(0, 0);
    let writer = {
        let rt = rt.clone();
        tokio::spawn(async move { rt.write(0, put("a", "1")).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !writer.is_finished(),
        "answered before the record was committed"
    );
    // Written and replayed already: the owner moved on.
    assert_eq!(contents(&rt).await.len(), 1);
    log.set_high_watermark(0, 1);
    assert_eq!(writer.await.unwrap(), Ok(()));
}

#[tokio::test]
async fn a_partition_that_fails_to_load_is_not_served() {
    let log = Arc::new(MemoryLog::default());
    {
        let rt = runtime(&log);
        rt.load_now(0, 0);
        rt.write(0, put("a", "1")).await.unwrap();
        // A record this shard cannot replay, as a corrupt log would hold.
        rt.write(0, |_: &mut KvShard| {
            Ok(Written::new(vec![("bad".to_string(), Some("x".into()))], ()).without_replay())
        })
        .await
        .unwrap();
    }
    let rt = runtime(&log);
    assert_eq!(rt.load_now(0, 1), ShardStatus::Failed);
    assert_eq!(rt.check(0), Err(ResponseError::NotCoordinator));
    let r = rt.write(0, put("b", "2")).await;
    assert_eq!(r, Err(ResponseError::NotCoordinator));
    assert_eq!(
        log.log_end(0),
        2,
        "nothing written to a partition not served"
    );
}

#[tokio::test]
async fn unknown_record_types_are_skipped_and_undecodable_ones_fail_the_load() {
    let log = Arc::new(MemoryLog::default());
    let rt = runtime(&log);
    rt.load_now(0, 0);
    rt.write(0, put("xshare", "?")).await.unwrap();
    rt.write(0, put("a", "1")).await.unwrap();
    let reloaded = runtime(&log);
    assert_eq!(reloaded.load_now(0, 1), ShardStatus::Active);
    assert_eq!(contents(&reloaded).await, vec![("a".into(), "1".into(), 1)]);
    // Invalid UTF-8 in a key, under a valid CRC.
    let batch = batches::encode(vec![(Bytes::from_static(&[0xff, 0xfe]), None)], 0).unwrap();
    let mut stored = bytes::BytesMut::from(&batch[..]);
    let end = log.log_end(0);
    stored[..8].copy_from_slice(&end.to_be_bytes());
    log.append_raw(0, end, stored.freeze(), end + 1);
    let reloaded = runtime(&log);
    assert_eq!(reloaded.load_now(0, 2), ShardStatus::Failed);
}

#[tokio::test]
async fn a_loading_partition_answers_load_in_progress() {
    let log = Arc::new(MemoryLog::default());
    let rt = runtime(&log);
    assert_eq!(rt.check(0), Err(ResponseError::NotCoordinator));
    let loaded = rt.on_elected(0, 0);
    // Until the background load finishes the partition is loading (or already active).
    match rt.check(0) {
        Ok(()) | Err(ResponseError::CoordinatorLoadInProgress) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(loaded.await.unwrap(), ShardStatus::Active);
    rt.write(0, put("a", "1")).await.unwrap();
    rt.on_resigned(0, Some(0));
    assert_eq!(rt.check(0), Err(ResponseError::NotCoordinator));
    assert_eq!(
        rt.write(0, put("b", "1")).await,
        Err(ResponseError::NotCoordinator)
    );
}

// Paused time: on a loaded machine 150 ms of wall-clock margin between the checks and
// the deadlines was not always enough.
#[tokio::test(start_paused = true)]
async fn timers_fire_at_their_deadline_and_write_like_operations() {
    let log = Arc::new(MemoryLog::default());
    let rt = runtime(&log);
    rt.load_now(0, 0);
    rt.write(0, put("a", "1")).await.unwrap();
    rt.write(0, put("b", "2")).await.unwrap();
    rt.write(0, |s: &mut KvShard| {
        let now = Instant::now();
        s.expiry
            .schedule("a".into(), now + Duration::from_millis(100));
        s.expiry
            .schedule("b".into(), now + Duration::from_millis(400));
        Ok(Written::response(()))
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(contents(&rt).await, vec![("b".into(), "2".into(), 1)]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(contents(&rt).await.is_empty());
    // The expiries were written: a reload agrees.
    let reloaded = runtime(&log);
    reloaded.load_now(0, 1);
    assert!(contents(&reloaded).await.is_empty());
}

#[tokio::test]
async fn partitions_do_not_wait_for_each_other() {
    let log = Arc::new(MemoryLog::default());
    let rt = Arc::new(runtime(&log));
    rt.load_now(0, 0);
    rt.load_now(1, 0);
    log.hold(0);
    let stuck = {
        let rt = rt.clone();
        tokio::spawn(async move { rt.write(0, put("a", "1")).await })
    };
    // Partition 1 writes and reads while partition 0's append is still waiting.
    tokio::time::timeout(Duration::from_secs(5), rt.write(1, put("b", "2")))
        .await
        .expect("partition 1 is not held up by partition 0")
        .unwrap();
    assert!(!stuck.is_finished());
    log.release(0);
    assert_eq!(stuck.await.unwrap(), Ok(()));
}

/// What a shard starts when it is loaded (a transaction's completion, on another task)
/// finds the partition served: `on_loaded` runs once the partition is active. Before,
/// a completion that checked first was dropped, leaving its transaction prepared for
/// good and its producer answered CONCURRENT_TRANSACTIONS forever.
#[tokio::test]
async fn a_shard_hears_it_is_loaded_once_its_partition_is_served() {
    let log = Arc::new(MemoryLog::default());
    let cell: Arc<parking_lot::Mutex<Option<Arc<CoordinatorRuntime<KvShard>>>>> = Arc::default();
    let seen: Arc<parking_lot::Mutex<Vec<Result<(), ResponseError>>>> = Arc::default();
    let hook: OnLoaded = {
        let (cell, seen) = (cell.clone(), seen.clone());
        Arc::new(move || {
            if let Some(rt) = cell.lock().as_ref() {
                seen.lock().push(rt.check(0));
            }
        })
    };
    let rt = Arc::new(CoordinatorRuntime::new("test coordinator", log.clone(), {
        move |_| KvShard {
            on_loaded: Some(hook.clone()),
            ..KvShard::default()
        }
    }));
    *cell.lock() = Some(rt.clone());
    assert_eq!(rt.load_now(0, 0), ShardStatus::Active);
    assert_eq!(*seen.lock(), vec![Ok(())]);
    *cell.lock() = None;
}
