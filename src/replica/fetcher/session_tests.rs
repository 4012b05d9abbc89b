use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::*;

fn part(topic: &str, id: u128, partition: i32, fetch_offset: i64) -> FetchedPartition {
    FetchedPartition {
        tp: TopicPartition::new(topic, partition),
        topic_id: Uuid::from_u128(id),
        leader_epoch: 3,
        fetch_offset,
        last_fetched_epoch: 2,
        log_start_offset: 0,
    }
}

/// An answer with session `session_id` naming `parts` (by id and by name).
fn answer(session_id: i32, parts: &[&FetchedPartition]) -> FetchResponse {
    let responses = parts
        .iter()
        .map(|p| {
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_string(p.tp.topic.clone())))
                .with_topic_id(p.topic_id)
                .with_partitions(vec![PartitionData::default()
                    .with_partition_index(p.tp.partition)
                    .with_records(Some(Bytes::new()))])
        })
        .collect();
    FetchResponse::default()
        .with_session_id(session_id)
        .with_responses(responses)
}

fn error(code: ResponseError) -> FetchResponse {
    FetchResponse::default().with_error_code(code.code())
}

fn names(data: &FetchData) -> Vec<String> {
    data.to_send.iter().map(|p| p.tp.to_string()).collect()
}

#[test]
fn a_session_goes_full_then_incremental_and_full_again_after_an_error() {
    let (a, b) = (part("a", 1, 0, 10), part("b", 2, 0, 20));
    let mut h = FetchSessionHandler::new();
    let full = h.build(17, vec![a.clone(), b.clone()]);
    assert_eq!((full.session_id, full.epoch), (0, 0));
    assert!(full.is_full());
    assert_eq!(names(&full), ["a-0", "b-0"]);
    assert!(h.handle_response(17, &answer(77, &[&a, &b])));

    // Nothing moved: the incremental fetch names no partition.
    let idle = h.build(17, vec![a.clone(), b.clone()]);
    assert_eq!((idle.session_id, idle.epoch), (77, 1));
    assert!(idle.to_send.is_empty() && idle.forgotten.is_empty());
    // A partition absent from the answer had nothing new.
    assert!(h.handle_response(17, &answer(77, &[])));
    let idle = h.build(17, vec![a.clone(), b.clone()]);
    assert_eq!((idle.session_id, idle.epoch), (77, 2));
    assert!(h.handle_response(17, &answer(77, &[&b])));

    // The leader lost the epoch: the next fetch is full and closes session 77.
    assert_eq!(h.build(17, vec![a.clone(), b.clone()]).epoch, 3);
    assert!(!h.handle_response(17, &error(ResponseError::InvalidFetchSessionEpoch)));
    let full = h.build(17, vec![a.clone(), b.clone()]);
    assert_eq!((full.session_id, full.epoch), (77, 0));
    assert_eq!(names(&full), ["a-0", "b-0"]);
    assert!(h.handle_response(17, &answer(78, &[&a, &b])));
    assert_eq!((h.session_id(), h.next_epoch()), (78, 1));

    // An evicted session: a full fetch asking for a new one.
    h.build(17, vec![a.clone(), b.clone()]);
    assert!(!h.handle_response(17, &error(ResponseError::FetchSessionIdNotFound)));
    let full = h.build(17, vec![a.clone(), b.clone()]);
    assert_eq!((full.session_id, full.epoch, full.to_send.len()), (0, 0, 2));
    assert!(h.handle_response(17, &answer(79, &[&a, &b])));

    // A failed request (or a new connection) closes the session.
    h.build(17, vec![a.clone(), b.clone()]);
    h.handle_error();
    let full = h.build(17, vec![a.clone(), b.clone()]);
    assert_eq!(
        (full.session_id, full.epoch, full.to_send.len()),
        (79, 0, 2)
    );

    // Any other error of the whole answer too.
    assert!(!h.handle_response(17, &error(ResponseError::UnknownServerError)));
    assert_eq!((h.session_id(), h.next_epoch()), (79, 0));
}

#[test]
fn incremental_fetches_name_added_changed_and_forgotten_partitions() {
    let (a, b, c) = (part("a", 1, 0, 10), part("a", 1, 1, 5), part("b", 2, 0, 7));
    let mut h = FetchSessionHandler::new();
    h.build(17, vec![a.clone(), b.clone(), c.clone()]);
    assert!(h.handle_response(17, &answer(5, &[&a, &b, &c])));

    // a-0 appended records (fetch offset), a-1's log start moved, b-0 left, d-0 joined.
    let mut a2 = a.clone();
    a2.fetch_offset = 12;
    a2.last_fetched_epoch = 3;
    let mut b2 = b.clone();
    b2.log_start_offset = 4;
    let d = part("d", 4, 0, 0);
    let step = h.build(17, vec![a2.clone(), b2.clone(), d.clone()]);
    assert_eq!(step.epoch, 1);
    assert_eq!(step.to_send, vec![a2.clone(), b2.clone(), d.clone()]);
    assert_eq!(
        step.forgotten,
        vec![(TopicPartition::new("b", 0), Uuid::from_u128(2))]
    );
    assert!(h.handle_response(17, &answer(5, &[&a2])));

    // A new leader epoch is a change too; the rest stays unnamed.
    let mut d2 = d.clone();
    d2.leader_epoch = 4;
    let step = h.build(17, vec![a2.clone(), b2.clone(), d2.clone()]);
    assert_eq!(step.to_send, vec![d2.clone()]);
    assert!(step.forgotten.is_empty());
    assert!(h.handle_response(17, &answer(5, &[])));

    // A topic recreated under a new id: from v13 the old id is forgotten, the new sent.
    let mut a3 = a2.clone();
    a3.topic_id = Uuid::from_u128(9);
    let step = h.build(17, vec![a3.clone(), b2.clone(), d2.clone()]);
    assert_eq!(step.to_send, vec![a3.clone()]);
    assert_eq!(
        step.forgotten,
        vec![(TopicPartition::new("a", 0), Uuid::from_u128(1))]
    );
}

#[test]
fn below_v13_the_same_change_forgets_nothing_and_answers_go_by_name() {
    let (a, b) = (part("a", 1, 0, 10), part("b", 2, 0, 7));
    let mut h = FetchSessionHandler::new();
    h.build(12, vec![a.clone(), b.clone()]);
    assert!(h.handle_response(12, &answer(5, &[&a, &b])));
    let mut a2 = a.clone();
    a2.topic_id = Uuid::from_u128(9);
    let step = h.build(12, vec![a2.clone()]);
    assert_eq!(step.to_send, vec![a2.clone()]);
    // b-0 is forgotten (the request names it by its topic's name).
    assert_eq!(
        step.forgotten,
        vec![(TopicPartition::new("b", 0), Uuid::from_u128(2))]
    );
    // Answers are matched by name below v13: the topic id in them does not matter.
    let mut by_name = answer(5, &[&a]);
    by_name.responses[0].topic_id = Uuid::nil();
    assert!(h.handle_response(12, &by_name));
}

#[test]
fn an_answer_naming_a_partition_outside_the_session_starts_over() {
    let (a, b) = (part("a", 1, 0, 10), part("b", 2, 0, 7));
    let mut h = FetchSessionHandler::new();
    // Full: the answer names b-0, never asked; no session is kept.
    h.build(17, vec![a.clone()]);
    assert!(!h.handle_response(17, &answer(5, &[&a, &b])));
    assert_eq!((h.session_id(), h.next_epoch()), (0, 0));
    // Incremental: the session is closed by the next (full) fetch.
    h.build(17, vec![a.clone()]);
    assert!(h.handle_response(17, &answer(6, &[&a])));
    h.build(17, vec![a.clone()]);
    assert!(!h.handle_response(17, &answer(6, &[&b])));
    let full = h.build(17, vec![a.clone()]);
    assert_eq!((full.session_id, full.epoch, full.to_send.len()), (6, 0, 1));
}

#[test]
fn a_leader_without_a_session_for_us_gets_full_fetches() {
    let a = part("a", 1, 0, 10);
    let mut h = FetchSessionHandler::new();
    // Its cache is full: session id 0 in the answer.
    h.build(17, vec![a.clone()]);
    assert!(h.handle_response(17, &answer(0, &[&a])));
    assert_eq!(h.build(17, vec![a.clone()]).epoch, 0);
    // The leader closed the session in an incremental answer.
    assert!(h.handle_response(17, &answer(8, &[&a])));
    assert_eq!(h.build(17, vec![a.clone()]).epoch, 1);
    assert!(h.handle_response(17, &answer(0, &[])));
    let full = h.build(17, vec![a.clone()]);
    assert_eq!((full.session_id, full.epoch), (0, 0));
}

#[test]
fn below_fetch_v7_every_fetch_is_full_and_outside_any_session() {
    let a = part("a", 1, 0, 10);
    let mut h = FetchSessionHandler::new();
    for _ in 0..3 {
        let data = h.build(6, vec![a.clone()]);
        assert_eq!(
            (data.session_id, data.epoch, data.to_send.len()),
            (0, -1, 1)
        );
        assert!(h.handle_response(6, &answer(0, &[&a])));
    }
}

#[test]
fn session_epochs_wrap_to_one() {
    assert_eq!(next_epoch(1), 2);
    assert_eq!(next_epoch(i32::MAX), 1);
}
