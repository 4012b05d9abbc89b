//! Share sessions: Kafka's epochs and errors, and the bound on their number.

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use crate::replica::share::session::*;

const T: Uuid = Uuid::from_u128(5);

fn key(member: &str) -> ShareSessionKey {
    ShareSessionKey {
        group_id: "g".into(),
        member_id: member.into(),
    }
}

fn parts(c: &FetchContext) -> Vec<(Uuid, i32)> {
    match c {
        FetchContext::Session(p) => p.iter().copied().collect(),
        FetchContext::Final => panic!("final"),
    }
}

#[test]
fn epochs_move_by_one_and_a_session_names_its_partitions_once() {
    let mut cache = ShareSessionCache::new(10);
    let k = key("m1");
    let c = cache
        .fetch_context(&k, 0, &[(T, 0), (T, 1)], &[], false, 0)
        .unwrap();
    assert_eq!(parts(&c), vec![(T, 0), (T, 1)]);
    // Incremental: add 2, forget 0.
    let c = cache
        .fetch_context(&k, 1, &[(T, 2)], &[(T, 0)], true, 1)
        .unwrap();
    assert_eq!(parts(&c), vec![(T, 1), (T, 2)]);
    // Nothing named: the session's partitions.
    let c = cache.fetch_context(&k, 2, &[], &[], false, 2).unwrap();
    assert_eq!(parts(&c), vec![(T, 1), (T, 2)]);
    // An acknowledgement moves the epoch too.
    cache.acknowledge_update(&k, 3, 3).unwrap();
    assert_eq!(cache.get(&k).unwrap().epoch, 4);
}

#[test]
fn wrong_epochs_and_missing_sessions_are_kafkas_errors_and_change_nothing() {
    let mut cache = ShareSessionCache::new(10);
    let k = key("m1");
    assert_eq!(
        cache.fetch_context(&k, 1, &[], &[], false, 0),
        Err(ResponseError::ShareSessionNotFound)
    );
    cache
        .fetch_context(&k, 0, &[(T, 0)], &[], false, 0)
        .unwrap();
    assert_eq!(
        cache.fetch_context(&k, 5, &[(T, 1)], &[], false, 1),
        Err(ResponseError::InvalidShareSessionEpoch)
    );
    assert_eq!(cache.get(&k).unwrap().epoch, 1);
    assert_eq!(cache.get(&k).unwrap().partitions.len(), 1);
    assert_eq!(
        cache.acknowledge_update(&k, 0, 1),
        Err(ResponseError::InvalidShareSessionEpoch)
    );
    assert_eq!(
        cache.acknowledge_update(&k, 2, 1),
        Err(ResponseError::InvalidShareSessionEpoch)
    );
    assert_eq!(
        cache.acknowledge_update(&key("m2"), 1, 1),
        Err(ResponseError::ShareSessionNotFound)
    );
    // A new session may not carry acknowledgements.
    assert_eq!(
        cache.fetch_context(&k, 0, &[(T, 0)], &[], true, 2),
        Err(ResponseError::InvalidRequest)
    );
}

#[test]
fn the_final_request_fetches_nothing_and_the_session_then_closes() {
    let mut cache = ShareSessionCache::new(10);
    let k = key("m1");
    cache
        .fetch_context(&k, 0, &[(T, 0)], &[], false, 0)
        .unwrap();
    assert_eq!(
        cache.fetch_context(&k, -1, &[(T, 0)], &[], true, 1),
        Err(ResponseError::InvalidRequest)
    );
    assert_eq!(
        cache.fetch_context(&k, -1, &[], &[], true, 1),
        Ok(FetchContext::Final)
    );
    cache.acknowledge_update(&k, -1, 1).unwrap();
    assert!(cache.remove(&k).is_some());
    assert_eq!(
        cache.fetch_context(&k, -1, &[], &[], true, 2),
        Err(ResponseError::ShareSessionNotFound)
    );
    // Opening again starts a fresh session at epoch 1.
    cache
        .fetch_context(&k, 0, &[(T, 3)], &[], false, 3)
        .unwrap();
    assert_eq!(cache.get(&k).unwrap().epoch, 1);
    assert!(cache.remove_member("g", "m1").is_some());
}

#[test]
fn the_number_of_sessions_is_bounded() {
    let mut cache = ShareSessionCache::new(2);
    cache
        .fetch_context(&key("a"), 0, &[(T, 0)], &[], false, 0)
        .unwrap();
    cache
        .fetch_context(&key("b"), 0, &[(T, 0)], &[], false, 0)
        .unwrap();
    assert_eq!(
        cache.fetch_context(&key("c"), 0, &[(T, 0)], &[], false, 0),
        Err(ResponseError::ShareSessionLimitReached)
    );
    // A member opening its session again replaces its own.
    cache
        .fetch_context(&key("a"), 0, &[(T, 1)], &[], false, 1)
        .unwrap();
    assert_eq!(cache.len(), 2);
    assert_eq!(next_epoch(i32::MAX), 1);
}

/// A session belongs to the connection that opened it: that connection's closing closes
/// it, once; a session the member opened again on another connection is not the old
/// connection's to close.
#[test]
fn a_connection_closes_the_session_it_opened_and_no_later_one() {
    let mut cache = ShareSessionCache::new(10);
    let k = key("m1");
    cache
        .fetch_context(&k, 0, &[(T, 0)], &[], false, 0)
        .unwrap();
    cache.bind_connection(&k, 7);
    let (closed, session) = cache.remove_connection(7).expect("connection 7's session");
    assert_eq!((closed, session.connection_id), (k.clone(), 7));
    assert_eq!(
        session.partitions.into_iter().collect::<Vec<_>>(),
        vec![(T, 0)]
    );
    assert!(cache.get(&k).is_none());
    assert!(cache.remove_connection(7).is_none(), "closed once");

    // Opened on 8, then again on 9: 8's closing leaves 9's session open.
    cache
        .fetch_context(&k, 0, &[(T, 0)], &[], false, 1)
        .unwrap();
    cache.bind_connection(&k, 8);
    cache
        .fetch_context(&k, 0, &[(T, 1)], &[], false, 2)
        .unwrap();
    cache.bind_connection(&k, 9);
    assert!(cache.remove_connection(8).is_none());
    assert_eq!(cache.get(&k).map(|s| s.connection_id), Some(9));
    // A session closed by its final request is not closed again by its connection.
    assert!(cache.remove(&k).is_some());
    assert!(cache.remove_connection(9).is_none());
}
