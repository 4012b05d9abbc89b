use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::*;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

fn key(topic: &str, partition: i32) -> SessionPartitionKey {
    SessionPartitionKey {
        topic_id: Uuid::nil(),
        topic: name(topic),
        partition,
    }
}

fn fetch(topic: &str, partitions: &[(i32, i64)]) -> FetchTopic {
    FetchTopic::default()
        .with_topic(name(topic))
        .with_partitions(
            partitions
                .iter()
                .map(|&(p, offset)| {
                    FetchPartition::default()
                        .with_partition(p)
                        .with_fetch_offset(offset)
                })
                .collect(),
        )
}

fn data(partition: i32, hw: i64, records: usize) -> PartitionData {
    PartitionData::default()
        .with_partition_index(partition)
        .with_high_watermark(hw)
        .with_log_start_offset(0)
        .with_records(Some(Bytes::from(vec![0u8; records])))
}

fn request(session_id: i32, epoch: i32, topics: Vec<FetchTopic>) -> SessionRequest {
    SessionRequest {
        version: 12,
        session_id,
        epoch,
        is_follower: false,
        topics,
        forgotten: Vec::new(),
    }
}

/// A session over partitions 0..n of topic "t", all answered with high watermark 5.
fn session(cache: &FetchSessionCache, now_ms: u64, privileged: bool, n: i32) -> i32 {
    let answers: Vec<PartitionData> = (0..n).map(|p| data(p, 5, 0)).collect();
    let answered = (0..n)
        .map(|p| {
            let fp = FetchPartition::default().with_partition(p);
            (key("t", p), fp, &answers[p as usize])
        })
        .collect();
    cache.maybe_create(now_ms, privileged, false, answered)
}

fn partitions_of(context: &FetchContext) -> Vec<(i32, i64)> {
    match context {
        FetchContext::Incremental { topics, .. } => topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (p.partition, p.fetch_offset)))
            .collect(),
        other => panic!("not incremental: {other:?}"),
    }
}

#[test]
fn a_full_fetch_with_epoch_zero_asks_for_a_session_and_minus_one_for_none() {
    let cache = FetchSessionCache::new(10);
    let full = cache.new_context(0, request(0, INITIAL_EPOCH, vec![fetch("t", &[(0, 0)])]));
    assert!(matches!(full, FetchContext::Full { .. }), "{full:?}");
    let none = cache.new_context(0, request(0, FINAL_EPOCH, vec![fetch("t", &[(0, 0)])]));
    assert!(matches!(none, FetchContext::Sessionless(_)), "{none:?}");
}

#[test]
fn incremental_fetches_keep_the_session_partitions_and_check_the_epoch() {
    let cache = FetchSessionCache::new(10);
    let id = session(&cache, 0, false, 3);
    assert_ne!(id, INVALID_SESSION_ID);
    // Epoch 1 follows the full fetch; it moves partition 1 to offset 7 and forgets 2.
    let mut req = request(id, 1, vec![fetch("t", &[(1, 7)])]);
    req.forgotten = vec![ForgottenTopic::default()
        .with_topic(name("t"))
        .with_partitions(vec![2])];
    let context = cache.new_context(1, req);
    assert_eq!(partitions_of(&context), vec![(0, 0), (1, 7)]);
    // The same epoch again is refused; the next one is taken.
    let again = cache.new_context(2, request(id, 1, Vec::new()));
    assert!(matches!(
        again,
        FetchContext::Error(ResponseError::InvalidFetchSessionEpoch)
    ));
    let next = cache.new_context(2, request(id, 2, Vec::new()));
    assert_eq!(partitions_of(&next), vec![(0, 0), (1, 7)]);
    // An unknown id.
    let unknown = cache.new_context(3, request(id.wrapping_add(1).max(1), 1, Vec::new()));
    assert!(matches!(
        unknown,
        FetchContext::Error(ResponseError::FetchSessionIdNotFound)
    ));
}

#[test]
fn a_session_made_by_topic_names_refuses_a_fetch_by_topic_ids() {
    let cache = FetchSessionCache::new(10);
    let id = session(&cache, 0, false, 1);
    let mut req = request(id, 1, Vec::new());
    req.version = 13;
    assert!(matches!(
        cache.new_context(1, req),
        FetchContext::Error(ResponseError::FetchSessionTopicIdError)
    ));
}

#[test]
fn forgetting_every_partition_ends_the_session() {
    let cache = FetchSessionCache::new(10);
    let id = session(&cache, 0, false, 1);
    let mut req = request(id, 1, Vec::new());
    req.forgotten = vec![ForgottenTopic::default()
        .with_topic(name("t"))
        .with_partitions(vec![0])];
    assert!(matches!(
        cache.new_context(1, req),
        FetchContext::Sessionless(ref t) if t.is_empty()
    ));
    assert!(cache.is_empty());
}

#[test]
fn a_full_fetch_naming_a_session_closes_it() {
    let cache = FetchSessionCache::new(10);
    let id = session(&cache, 0, false, 1);
    cache.new_context(1, request(id, FINAL_EPOCH, Vec::new()));
    assert!(cache.is_empty());
}

#[test]
fn incremental_answers_omit_unchanged_partitions_and_rotate_those_with_records() {
    let cache = FetchSessionCache::new(10);
    let id = session(&cache, 0, false, 3);
    let context = cache.new_context(1, request(id, 1, Vec::new()));
    assert_eq!(partitions_of(&context), vec![(0, 0), (1, 0), (2, 0)]);
    // Partition 0 unchanged, 1 has records, 2's high watermark moved.
    let mut responses = vec![FetchableTopicResponse::default()
        .with_topic(name("t"))
        .with_partitions(vec![data(0, 5, 0), data(1, 5, 10), data(2, 6, 0)])];
    let keys = [key("t", 0), key("t", 1), key("t", 2)];
    cache
        .answer_incremental(id, 1, &keys, &mut responses)
        .unwrap();
    let answered: Vec<i32> = responses[0]
        .partitions
        .iter()
        .map(|p| p.partition_index)
        .collect();
    assert_eq!(answered, vec![1, 2]);
    // Partition 1 returned records, so it is read last next time.
    let context = cache.new_context(2, request(id, 2, Vec::new()));
    assert_eq!(partitions_of(&context), vec![(0, 0), (2, 0), (1, 0)]);
    // Nothing changed at all: no topic left in the answer.
    let mut responses = vec![FetchableTopicResponse::default()
        .with_topic(name("t"))
        .with_partitions(vec![data(0, 5, 0), data(2, 6, 0), data(1, 5, 0)])];
    let keys = [key("t", 0), key("t", 2), key("t", 1)];
    cache
        .answer_incremental(id, 2, &keys, &mut responses)
        .unwrap();
    assert!(responses.is_empty(), "{responses:?}");
}

#[test]
fn an_errored_partition_is_answered_again_once_the_error_clears() {
    let cache = FetchSessionCache::new(10);
    let id = session(&cache, 0, false, 1);
    cache.new_context(1, request(id, 1, Vec::new()));
    let failed = data(0, 5, 0).with_error_code(ResponseError::NotLeaderOrFollower.code());
    let mut responses = vec![FetchableTopicResponse::default().with_partitions(vec![failed])];
    cache
        .answer_incremental(id, 1, &[key("t", 0)], &mut responses)
        .unwrap();
    assert_eq!(responses[0].partitions.len(), 1);
    cache.new_context(2, request(id, 2, Vec::new()));
    let mut responses =
        vec![FetchableTopicResponse::default().with_partitions(vec![data(0, 5, 0)])];
    cache
        .answer_incremental(id, 2, &[key("t", 0)], &mut responses)
        .unwrap();
    assert_eq!(responses.len(), 1, "the recovered partition is sent");
}

#[test]
fn a_duplicate_fetch_answered_after_the_next_epoch_began_is_refused() {
    let cache = FetchSessionCache::new(10);
    let id = session(&cache, 0, false, 1);
    cache.new_context(1, request(id, 1, Vec::new()));
    cache.new_context(2, request(id, 2, Vec::new()));
    let mut responses =
        vec![FetchableTopicResponse::default().with_partitions(vec![data(0, 5, 0)])];
    assert_eq!(
        cache.answer_incremental(id, 1, &[key("t", 0)], &mut responses),
        Err(ResponseError::InvalidFetchSessionEpoch)
    );
}

#[test]
fn a_full_cache_evicts_a_stale_session_first() {
    let cache = FetchSessionCache::new(2);
    let old = session(&cache, 0, false, 1);
    let busy = session(&cache, 0, false, 1);
    // `busy` is used later; `old` idles past the eviction time.
    cache.new_context(EVICTION_MS, request(busy, 1, Vec::new()));
    let newcomer = session(&cache, EVICTION_MS + 1, false, 1);
    assert_ne!(newcomer, INVALID_SESSION_ID);
    assert!(matches!(
        cache.new_context(EVICTION_MS + 2, request(old, 1, Vec::new())),
        FetchContext::Error(ResponseError::FetchSessionIdNotFound)
    ));
    assert!(matches!(
        cache.new_context(EVICTION_MS + 2, request(busy, 2, Vec::new())),
        FetchContext::Incremental { .. }
    ));
}

#[test]
fn young_sessions_are_protected_from_consumers_but_not_from_followers() {
    let cache = FetchSessionCache::new(1);
    let consumer = session(&cache, 0, false, 5);
    // Another consumer, bigger, but the first session is young: no session for it.
    assert_eq!(session(&cache, 10, false, 50), INVALID_SESSION_ID);
    // A follower displaces a consumer at any age.
    let follower = session(&cache, 20, true, 1);
    assert_ne!(follower, INVALID_SESSION_ID);
    assert!(matches!(
        cache.new_context(30, request(consumer, 1, Vec::new())),
        FetchContext::Error(ResponseError::FetchSessionIdNotFound)
    ));
    // Old sessions go to a more valuable newcomer only: a consumer cannot displace the
    // follower even once it is old (but still in use), a follower with more partitions can.
    let later = EVICTION_MS + 100;
    cache.new_context(later, request(follower, 1, Vec::new()));
    assert_eq!(session(&cache, later + 1, false, 100), INVALID_SESSION_ID);
    assert_ne!(session(&cache, later + 2, true, 2), INVALID_SESSION_ID);
}

#[test]
fn zero_slots_means_no_sessions() {
    let cache = FetchSessionCache::new(0);
    assert_eq!(session(&cache, 0, false, 1), INVALID_SESSION_ID);
}

/// A Fetch v12 frame (a `rack_id` of 1 MiB, an unknown tagged field on its partition)
/// naming `topic`'s `partitions`, decoded as the network layer does (zero copy), with a
/// handle telling whether the frame is still alive.
fn tracked_fetch(
    topic: &str,
    partitions: &[i32],
    session_id: i32,
    epoch: i32,
) -> (
    kafka_protocol::messages::FetchRequest,
    crate::protocol::tracked_frame::FrameAlive,
) {
    use kafka_protocol::messages::FetchRequest;
    use kafka_protocol::protocol::{Decodable, Encodable};
    let mut topic = fetch(
        topic,
        &partitions.iter().map(|&p| (p, 0)).collect::<Vec<_>>(),
    );
    for p in &mut topic.partitions {
        p.unknown_tagged_fields
            .insert(99, Bytes::from(vec![1u8; 4096]));
    }
    let req = FetchRequest::default()
        .with_session_id(session_id)
        .with_session_epoch(epoch)
        .with_rack_id(StrBytes::from_string("r".repeat(1 << 20)))
        .with_topics(vec![topic]);
    let mut out = bytes::BytesMut::new();
    req.encode(&mut out, 12).unwrap();
    let (mut frame, alive) = crate::protocol::tracked_frame::tracked(out.to_vec());
    let decoded = FetchRequest::decode(&mut frame, 12).unwrap();
    (decoded, alive)
}

fn session_request(req: kafka_protocol::messages::FetchRequest) -> SessionRequest {
    SessionRequest {
        version: 12,
        session_id: req.session_id,
        epoch: req.session_epoch,
        is_follower: false,
        topics: req.topics,
        forgotten: req.forgotten_topics_data,
    }
}

/// A session keeps no slice of the requests that made and updated it: before, its keys
/// held the topic name as a slice of the frame, and one partition kept a whole frame
/// (8 fetches with a 64 MiB `rack_id` held 513 MB after their connections closed).
#[test]
fn a_session_keeps_no_request_frame_alive() {
    let cache = FetchSessionCache::new(1);
    let (req, first) = tracked_fetch("t", &[0], INVALID_SESSION_ID, INITIAL_EPOCH);
    let FetchContext::Full { topics, .. } = cache.new_context(0, session_request(req)) else {
        panic!("a full fetch");
    };
    let answer = data(0, 5, 0);
    let answered = topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|fp| {
                let key = SessionPartitionKey {
                    topic_id: t.topic_id,
                    topic: t.topic.clone(),
                    partition: fp.partition,
                };
                (key, fp.clone(), &answer)
            })
        })
        .collect();
    let id = cache.maybe_create(0, false, false, answered);
    assert_ne!(id, INVALID_SESSION_ID);
    drop(topics);
    assert!(!first.alive(), "the full fetch's frame is gone");

    // An incremental fetch adding a partition.
    let (req, second) = tracked_fetch("t", &[1], id, 1);
    let context = cache.new_context(1, session_request(req));
    assert_eq!(partitions_of(&context), vec![(0, 0), (1, 0)]);
    drop(context);
    assert!(!second.alive(), "the incremental fetch's frame is gone");
    assert_eq!(cache.retained_bytes(), 2 * (PARTITION_BYTES + 1));
}

/// Incremental fetches that keep adding partitions with long names end their session
/// once it would hold more than MAX_SESSION_BYTES; a full fetch that big gets none.
#[test]
fn a_session_is_bounded_in_what_it_holds() {
    let cache = FetchSessionCache::new(1);
    let id = session(&cache, 0, false, 1);
    let long = "n".repeat(32_000);
    let per_fetch = 100;
    let mut epoch = 1;
    let ended = loop {
        let partitions: Vec<(i32, i64)> =
            (0..per_fetch).map(|p| (epoch * per_fetch + p, 0)).collect();
        match cache.new_context(0, request(id, epoch, vec![fetch(&long, &partitions)])) {
            FetchContext::Incremental { .. } => {}
            other => break other,
        }
        assert!(cache.retained_bytes() <= MAX_SESSION_BYTES);
        epoch += 1;
        assert!(epoch < 1000, "the session never ended");
    };
    assert!(matches!(
        ended,
        FetchContext::Error(ResponseError::FetchSessionIdNotFound)
    ));
    assert_eq!((cache.len(), cache.retained_bytes()), (0, 0));

    let answer = data(0, 5, 0);
    let too_many = (0..(MAX_SESSION_BYTES / 32_000) as i32 + 1)
        .map(|p| {
            (
                key(&long, p),
                FetchPartition::default().with_partition(p),
                &answer,
            )
        })
        .collect();
    assert_eq!(
        cache.maybe_create(0, false, false, too_many),
        INVALID_SESSION_ID
    );
}
