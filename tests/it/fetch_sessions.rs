//! Incremental fetch sessions (KIP-227) over TCP: what a consumer in a session sends and
//! gets back, byte for byte through the codec.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn fetch_topic(topic: &str, partitions: &[(i32, i64)]) -> FetchTopic {
    FetchTopic::default()
        .with_topic(name(topic))
        .with_partitions(
            partitions
                .iter()
                .map(|&(p, offset)| {
                    FetchPartition::default()
                        .with_partition(p)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1024 * 1024)
                })
                .collect(),
        )
}

fn session_fetch(session_id: i32, epoch: i32, topics: Vec<FetchTopic>) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(50 * 1024 * 1024)
        .with_session_id(session_id)
        .with_session_epoch(epoch)
        .with_topics(topics)
}

/// (partition, high watermark, record bytes) of every partition answered.
fn answered(resp: &FetchResponse) -> Vec<(i32, i64, usize)> {
    resp.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| {
            let bytes = p.records.as_ref().map_or(0, |r| r.len());
            (p.partition_index, p.high_watermark, bytes)
        })
        .collect()
}

#[tokio::test]
async fn an_incremental_session_answers_only_what_changed() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("s", 3).await, 0);
    let one = || batch(&["x"], None, Compression::None);
    assert_eq!(c.produce("s", 0, one(), 1).await, (0, 0));

    // A full fetch with epoch 0 gets a session and every partition.
    let full = session_fetch(0, 0, vec![fetch_topic("s", &[(0, 0), (1, 0), (2, 0)])]);
    let resp = c.send(&full, 12).await;
    assert_eq!(resp.error_code, 0);
    let id = resp.session_id;
    assert_ne!(id, 0, "a session is offered");
    let got = answered(&resp);
    assert_eq!(got.iter().map(|p| p.0).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert!(got[0].2 > 0 && got[1].2 == 0 && got[2].2 == 0, "{got:?}");

    // Epoch 1 moves partition 0 past its record: nothing changed, nothing answered.
    let resp = c
        .send(&session_fetch(id, 1, vec![fetch_topic("s", &[(0, 1)])]), 12)
        .await;
    assert_eq!((resp.error_code, resp.session_id), (0, id));
    assert!(resp.responses.is_empty(), "{:?}", answered(&resp));

    // A record on partition 2: only partition 2 is answered, though the request names none.
    assert_eq!(c.produce("s", 2, one(), 1).await, (0, 0));
    let resp = c.send(&session_fetch(id, 2, Vec::new()), 12).await;
    let got = answered(&resp);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].0, got[0].1), (2, 1));
    assert!(got[0].2 > 0);

    // Forget partition 2; a new record there is no longer answered.
    let mut forget = session_fetch(id, 3, Vec::new());
    forget.forgotten_topics_data = vec![ForgottenTopic::default()
        .with_topic(name("s"))
        .with_partitions(vec![2])];
    let resp = c.send(&forget, 12).await;
    assert!(resp.responses.is_empty(), "{:?}", answered(&resp));
    assert_eq!(c.produce("s", 2, one(), 1).await, (0, 1));
    let resp = c.send(&session_fetch(id, 4, Vec::new()), 12).await;
    assert!(resp.responses.is_empty(), "{:?}", answered(&resp));

    // A record on partition 1 wakes an incremental long poll.
    let addr = b.addr;
    let producer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut p = Client::connect(addr).await;
        p.produce("s", 1, batch(&["late"], None, Compression::None), 1)
            .await
    });
    let started = Instant::now();
    let poll = session_fetch(id, 5, Vec::new()).with_max_wait_ms(10_000);
    let resp = c.send(&poll, 12).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(producer.await.unwrap(), (0, 0));
    let got = answered(&resp);
    assert_eq!(got.iter().map(|p| p.0).collect::<Vec<_>>(), vec![1]);
    b.stop().await;
}

#[tokio::test]
async fn session_errors_are_kafkas() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("e", 1).await, 0);
    let resp = c
        .send(&session_fetch(0, 0, vec![fetch_topic("e", &[(0, 0)])]), 12)
        .await;
    let id = resp.session_id;
    assert_ne!(id, 0);
    // An epoch out of turn.
    let resp = c.send(&session_fetch(id, 7, Vec::new()), 12).await;
    assert_eq!(
        resp.error_code,
        ResponseError::InvalidFetchSessionEpoch.code()
    );
    assert_eq!(resp.session_id, 0);
    // A session made by topic names, used by topic ids (v13).
    let resp = c.send(&session_fetch(id, 1, Vec::new()), 13).await;
    assert_eq!(
        resp.error_code,
        ResponseError::FetchSessionTopicIdError.code()
    );
    // The right epoch still works: errors leave the session as it was.
    let resp = c.send(&session_fetch(id, 1, Vec::new()), 12).await;
    assert_eq!((resp.error_code, resp.session_id), (0, id));
    // Epoch -1 closes the session; its id is then unknown.
    let resp = c
        .send(
            &session_fetch(id, -1, vec![fetch_topic("e", &[(0, 0)])]),
            12,
        )
        .await;
    assert_eq!((resp.error_code, resp.session_id), (0, 0));
    assert_eq!(answered(&resp).len(), 1, "a sessionless fetch answers all");
    let resp = c.send(&session_fetch(id, 2, Vec::new()), 12).await;
    assert_eq!(
        resp.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );
    b.stop().await;
}

#[tokio::test]
async fn zero_cache_slots_means_full_fetches_only() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(
        dir.path(),
        &[("max.incremental.fetch.session.cache.slots", "0")],
    )
    .await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("z", 1).await, 0);
    let resp = c
        .send(&session_fetch(0, 0, vec![fetch_topic("z", &[(0, 0)])]), 12)
        .await;
    assert_eq!((resp.error_code, resp.session_id), (0, 0));
    assert_eq!(answered(&resp).len(), 1);
    b.stop().await;
}
