//! Following the metadata log as an observer, response by response with an explicit
//! clock: finding the leader, committing below the high watermark, truncating on a
//! diverging epoch, fetching a snapshot in chunks, and the answers that stop the broker.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{
    EpochEndOffset, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
    SnapshotId,
};
use kafka_protocol::messages::{fetch_snapshot_response, FetchResponse, FetchSnapshotResponse};
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::controller::records::batch::build_batch;

const DIR: Uuid = Uuid::from_u128(0xd1);

fn config() -> FollowerConfig {
    FollowerConfig {
        node_id: 7,
        cluster_id: "x4AJGXQSRnephtTZzujw4w".into(),
        directory_id: DIR,
        bootstrap: vec![
            Endpoint {
                node_id: None,
                host: "c1".into(),
                port: 9093,
            },
            Endpoint {
                node_id: None,
                host: "c2".into(),
                port: 9093,
            },
        ],
        retry_backoff_ms: 100,
        fetch_timeout_ms: 2000,
        max_snapshot_bytes: 1024,
    }
}

fn leader_endpoint(id: i32) -> Endpoint {
    Endpoint {
        node_id: Some(id),
        host: format!("controller{id}"),
        port: 9093,
    }
}

/// A batch of `count` records (one-byte values) at `base` stamped with `epoch`.
fn batch(base: i64, epoch: i32, count: usize) -> Vec<u8> {
    let values: Vec<[u8; 1]> = (0..count).map(|i| [i as u8]).collect();
    let items: Vec<(Option<&[u8]>, &[u8])> = values.iter().map(|v| (None, &v[..])).collect();
    build_batch(base, epoch, 0, false, &items)
}

fn partition(leader: i32, epoch: i32, high_watermark: i64) -> PartitionData {
    PartitionData::default()
        .with_partition_index(0)
        .with_high_watermark(high_watermark)
        .with_current_leader(
            LeaderIdAndEpoch::default()
                .with_leader_id(leader.into())
                .with_leader_epoch(epoch),
        )
}

fn response(p: PartitionData) -> Event {
    let leader = p.current_leader.leader_id.0;
    let endpoints = if leader >= 0 {
        vec![NodeEndpoint::default()
            .with_node_id(leader.into())
            .with_host(StrBytes::from_string(format!("controller{leader}")))
            .with_port(9093)]
    } else {
        Vec::new()
    };
    Event::FetchResponse(Ok(FetchResponse::default()
        .with_responses(vec![FetchableTopicResponse::default()
            .with_topic_id(METADATA_TOPIC_ID)
            .with_partitions(vec![p])])
        .with_node_endpoints(endpoints)))
}

fn records(p: PartitionData, batches: &[Vec<u8>]) -> PartitionData {
    p.with_records(Some(Bytes::from(batches.concat())))
}

/// The one Fetch in `out`: where it goes, its offset and last fetched epoch.
fn fetch_of(out: &[Output]) -> (Endpoint, i64, i32, i32) {
    let fetches: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Fetch(to, r) => Some((to, r)),
            _ => None,
        })
        .collect();
    let [(to, r)] = fetches.as_slice() else {
        panic!("expected one Fetch, got {out:?}");
    };
    assert_eq!(
        r.replica_state.replica_id.0, 7,
        "fetches as an observer with its id"
    );
    assert_eq!(r.cluster_id.as_deref(), Some("x4AJGXQSRnephtTZzujw4w"));
    let p = &r.topics[0].partitions[0];
    assert_eq!(r.topics[0].topic_id, METADATA_TOPIC_ID);
    assert_eq!(p.replica_directory_id, DIR);
    (
        (*to).clone(),
        p.fetch_offset,
        p.last_fetched_epoch,
        p.current_leader_epoch,
    )
}

fn published(out: &[Output]) -> Vec<(i64, i64)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Publish(batches) => Some(batches),
            _ => None,
        })
        .flatten()
        .map(|b| {
            let h = RecordBatchHeader::parse(b).unwrap();
            (h.base_offset(), h.last_offset())
        })
        .collect()
}

fn fatal(out: &[Output]) -> String {
    out.iter()
        .find_map(|o| match o {
            Output::Fatal(why) => Some(why.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("expected a fatal outcome, got {out:?}"))
}

/// A follower that found leader 3000 at epoch 5 and holds `held` records of epoch 5,
/// all committed.
fn following(held: usize) -> Follower {
    let mut f = Follower::new(config(), 0);
    fetch_of(&f.decide(0, Event::Tick));
    let out = f.decide(1, response(partition(3000, 5, 0)));
    assert_eq!(out[0], Output::Leader { id: 3000, epoch: 5 });
    assert_eq!(fetch_of(&out).0, leader_endpoint(3000));
    let out = f.decide(
        1,
        response(records(
            partition(3000, 5, held as i64),
            &[batch(0, 5, held)],
        )),
    );
    assert_eq!(published(&out), vec![(0, held as i64 - 1)]);
    assert_eq!(f.committed_offset(), held as i64);
    f
}

#[test]
fn bootstrap_endpoints_are_asked_in_turn_until_one_names_the_leader() {
    let mut f = Follower::new(config(), 0);
    assert_eq!(f.next_deadline(), Some(0));
    let (to, offset, last_epoch, leader_epoch) = fetch_of(&f.decide(0, Event::Tick));
    assert_eq!(
        (to.host.as_str(), offset, last_epoch, leader_epoch),
        ("c1", 0, 0, 0)
    );
    assert_eq!(
        f.next_deadline(),
        None,
        "nothing is sent while a Fetch is in flight"
    );

    // A node that knows no leader yet: the next endpoint after the backoff.
    assert!(f.decide(10, response(partition(-1, 0, -1))).is_empty());
    assert_eq!(f.next_deadline(), Some(110));
    assert!(
        f.decide(50, Event::Tick).is_empty(),
        "not before the backoff"
    );
    let (to, ..) = fetch_of(&f.decide(110, Event::Tick));
    assert_eq!(to.host, "c2");

    // The answer names leader 3000 at a new epoch 4: Fetch follows it at once, and the
    // records of that answer are dropped (they are fetched again from the leader).
    let out = f.decide(
        120,
        response(records(partition(3000, 4, 2), &[batch(0, 4, 2)])),
    );
    assert_eq!(out[0], Output::Leader { id: 3000, epoch: 4 });
    assert!(published(&out).is_empty());
    let (to, offset, last_epoch, leader_epoch) = fetch_of(&out);
    assert_eq!(to, leader_endpoint(3000));
    assert_eq!((offset, last_epoch, leader_epoch), (0, 0, 4));
    let out = f.decide(
        130,
        response(records(partition(3000, 4, 2), &[batch(0, 4, 2)])),
    );
    assert_eq!(published(&out), vec![(0, 1)]);
    assert_eq!(fetch_of(&out), (leader_endpoint(3000), 2, 4, 4));
    assert_eq!(f.leader(), Some((3000, 4)));
}

#[test]
fn only_batches_below_the_high_watermark_are_published_and_in_order() {
    let mut f = following(1);
    // Three batches arrive; the high watermark covers the first only.
    let out = f.decide(
        10,
        response(records(
            partition(3000, 5, 3),
            &[batch(1, 5, 2), batch(3, 5, 3), batch(6, 5, 1)],
        )),
    );
    assert_eq!(published(&out), vec![(1, 2)]);
    assert_eq!(f.committed_offset(), 3);
    assert_eq!(
        fetch_of(&out).1,
        7,
        "the uncommitted tail is held and fetched past"
    );

    // The high watermark inside a batch commits nothing of it.
    let out = f.decide(20, response(partition(3000, 5, 5)));
    assert!(published(&out).is_empty());
    let out = f.decide(30, response(partition(3000, 5, 7)));
    assert_eq!(published(&out), vec![(3, 5), (6, 6)]);
    assert_eq!(f.committed_offset(), 7);
}

#[test]
fn a_trailing_partial_batch_is_fetched_again_and_an_old_batch_skipped() {
    let mut f = following(2);
    let whole = batch(2, 5, 2);
    let next = batch(4, 5, 1);
    let mut bytes = [batch(0, 5, 2), whole.clone()].concat();
    bytes.extend_from_slice(&next[..next.len() - 4]);
    let out = f.decide(
        10,
        response(partition(3000, 5, 5).with_records(Some(Bytes::from(bytes)))),
    );
    assert_eq!(
        published(&out),
        vec![(2, 3)],
        "offsets 0-1 already held are skipped"
    );
    assert_eq!(fetch_of(&out).1, 4, "the cut batch is asked for again");
}

#[test]
fn a_batch_that_does_not_follow_the_log_end_or_goes_back_an_epoch_is_fatal() {
    let mut f = following(2);
    let out = f.decide(
        10,
        response(records(partition(3000, 5, 9), &[batch(5, 5, 1)])),
    );
    assert!(fatal(&out).contains("offset 5 where the log ends at 2"));
    assert_eq!(
        f.next_deadline(),
        None,
        "a failed follower sends nothing more"
    );
    assert!(f.decide(20, Event::Tick).is_empty());

    let mut f = following(2);
    let out = f.decide(
        10,
        response(records(partition(3000, 5, 9), &[batch(2, 4, 1)])),
    );
    assert!(fatal(&out).contains("epoch 4 after epoch 5"));

    let mut f = following(2);
    let mut damaged = batch(2, 5, 1);
    let last = damaged.len() - 1;
    damaged[last] ^= 0xff;
    let out = f.decide(10, response(records(partition(3000, 5, 9), &[damaged])));
    fatal(&out);
}

#[test]
fn a_diverging_epoch_truncates_the_uncommitted_tail() {
    let mut f = following(2);
    // Uncommitted: [2..3] epoch 5, [4..5] epoch 6.
    let out = f.decide(
        10,
        response(records(
            partition(3000, 6, 2),
            &[batch(2, 5, 2), batch(4, 6, 2)],
        )),
    );
    assert_eq!(out[0], Output::Leader { id: 3000, epoch: 6 });
    // A leader moved to a new epoch: the records of that answer are dropped.
    assert_eq!(fetch_of(&out).1, 2);
    let out = f.decide(
        20,
        response(records(
            partition(3000, 6, 2),
            &[batch(2, 5, 2), batch(4, 6, 2)],
        )),
    );
    assert_eq!(fetch_of(&out), (leader_endpoint(3000), 6, 6, 6));

    // The new leader of epoch 7 says epoch 5 ended at 3 in its log: the tail from offset
    // 3 goes; batch [2..3] is cut inside, so it goes whole and is fetched again.
    let out = f.decide(30, response(partition(3000, 7, 2)));
    fetch_of(&out);
    let out = f.decide(
        40,
        response(
            partition(3000, 7, 2)
                .with_diverging_epoch(EpochEndOffset::default().with_epoch(5).with_end_offset(3)),
        ),
    );
    let (_, offset, last_epoch, _) = fetch_of(&out);
    assert_eq!((offset, last_epoch), (2, 5));
    assert!(published(&out).is_empty());

    // It then sends its own version of offsets 2.. and commits them.
    let out = f.decide(
        50,
        response(records(partition(3000, 7, 4), &[batch(2, 7, 2)])),
    );
    assert_eq!(published(&out), vec![(2, 3)]);
    assert_eq!(fetch_of(&out).1, 4);
}

#[test]
fn a_truncation_below_the_committed_offset_is_fatal() {
    let mut f = following(4);
    let out = f.decide(
        10,
        response(
            partition(3000, 5, 4)
                .with_diverging_epoch(EpochEndOffset::default().with_epoch(5).with_end_offset(2)),
        ),
    );
    assert!(
        fatal(&out).contains("below the committed offset 4"),
        "{out:?}"
    );
}

#[test]
fn a_new_epoch_or_a_fenced_epoch_moves_to_the_leader_named_and_old_answers_are_dropped() {
    let mut f = following(1);
    // Leader 3001 at epoch 6: at once to it.
    let out = f.decide(10, response(partition(3001, 6, 1)));
    assert_eq!(out[0], Output::Leader { id: 3001, epoch: 6 });
    assert_eq!(fetch_of(&out).0, leader_endpoint(3001));

    // An answer from epoch 5 is dropped: nothing published, retried after the backoff.
    let out = f.decide(
        20,
        response(records(partition(3000, 5, 9), &[batch(1, 5, 1)])),
    );
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(f.next_deadline(), Some(120));
    assert_eq!(f.leader(), Some((3001, 6)));

    let out = f.decide(120, Event::Tick);
    fetch_of(&out);
    let out = f.decide(
        130,
        response(partition(3002, 6, 1).with_error_code(ResponseError::FencedLeaderEpoch.code())),
    );
    assert_eq!(out[0], Output::Leader { id: 3002, epoch: 6 });
    assert_eq!(fetch_of(&out).0, leader_endpoint(3002));
}

#[test]
fn no_successful_fetch_within_the_fetch_timeout_forgets_the_leader() {
    // A Fetch to the leader is in flight.
    let mut f = following(1);
    // A failure: after the backoff, another endpoint is asked who leads...
    assert!(f
        .decide(500, Event::FetchResponse(Err(Failure::Timeout)))
        .is_empty());
    assert_eq!(f.next_deadline(), Some(600));
    let (to, ..) = fetch_of(&f.decide(600, Event::Tick));
    assert_eq!(to.host, "c2", "the next of the quorum's endpoints");
    // ...and names the same leader: no news, the leader is asked again at once.
    let out = f.decide(
        610,
        response(partition(3000, 5, -1).with_error_code(ResponseError::NotLeaderOrFollower.code())),
    );
    assert!(
        !out.iter().any(|o| matches!(o, Output::Leader { .. })),
        "{out:?}"
    );
    assert_eq!(fetch_of(&out).0, leader_endpoint(3000));
    // Failures go on until controller.quorum.fetch.timeout.ms passed since the last good
    // answer.
    assert!(f
        .decide(1900, Event::FetchResponse(Err(Failure::Disconnected)))
        .is_empty());
    let (to, offset, ..) = fetch_of(&f.decide(2001, Event::Tick));
    assert_eq!(f.leader(), None);
    assert_eq!(to.node_id, None, "back to the bootstrap endpoints");
    assert_eq!(to.host, "c1", "the next in turn");
    assert_eq!(offset, 1, "from where the log ends");
}

/// The leader dies and the quorum elects another: after the first failed Fetch, the
/// quorum's other endpoints are asked (Kafka's observer asks a bootstrap server while its
/// leader backs off), so the new leader is followed as soon as a voter names it, long
/// before `controller.quorum.fetch.timeout.ms`.
#[test]
fn a_failed_fetch_to_the_leader_finds_its_successor_through_the_other_endpoints() {
    let mut f = following(1);
    assert!(f
        .decide(500, Event::FetchResponse(Err(Failure::Disconnected)))
        .is_empty());
    let (to, ..) = fetch_of(&f.decide(600, Event::Tick));
    assert_eq!(to.host, "c2");
    // An election is under way: epoch 6, no leader yet. The endpoints are asked in turn.
    let out = f.decide(
        605,
        response(partition(-1, 6, -1).with_error_code(ResponseError::NotLeaderOrFollower.code())),
    );
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(f.leader(), None);
    let (to, ..) = fetch_of(&f.decide(705, Event::Tick));
    assert_eq!(to.host, "c1");
    // A voter names the new leader: followed at once.
    let out = f.decide(
        710,
        response(partition(3002, 6, -1).with_error_code(ResponseError::NotLeaderOrFollower.code())),
    );
    assert_eq!(out[0], Output::Leader { id: 3002, epoch: 6 });
    assert_eq!(fetch_of(&out).0, leader_endpoint(3002));
    assert_eq!(f.leader(), Some((3002, 6)));
}

#[test]
fn a_refused_cluster_id_is_fatal_and_other_top_level_errors_retry() {
    let mut f = following(1);
    let out = f.decide(
        20,
        Event::FetchResponse(Ok(
            FetchResponse::default().with_error_code(ResponseError::BrokerNotAvailable.code())
        )),
    );
    assert!(out.is_empty());
    fetch_of(&f.decide(120, Event::Tick));
    let out = f.decide(
        130,
        Event::FetchResponse(Ok(
            FetchResponse::default().with_error_code(ResponseError::InconsistentClusterId.code())
        )),
    );
    assert!(fatal(&out).contains("refused"), "{out:?}");
}

fn snapshot_chunk(end_offset: i64, epoch: i32, size: i64, position: i64, bytes: &[u8]) -> Event {
    Event::FetchSnapshotResponse(Ok(FetchSnapshotResponse::default()
        .with_topics(vec![fetch_snapshot_response::TopicSnapshot::default()
            .with_name(StrBytes::from_static_str(METADATA_TOPIC).into())
            .with_partitions(vec![
                fetch_snapshot_response::PartitionSnapshot::default()
                    .with_index(0)
                    .with_snapshot_id(
                        fetch_snapshot_response::SnapshotId::default()
                            .with_end_offset(end_offset)
                            .with_epoch(epoch),
                    )
                    .with_current_leader(
                        fetch_snapshot_response::LeaderIdAndEpoch::default()
                            .with_leader_id(3000.into())
                            .with_leader_epoch(5),
                    )
                    .with_size(size)
                    .with_position(position)
                    .with_unaligned_records(Bytes::copy_from_slice(bytes)),
            ])])
        .with_node_endpoints(vec![fetch_snapshot_response::NodeEndpoint::default()
            .with_node_id(3000.into())
            .with_host(StrBytes::from_static_str("controller3000"))
            .with_port(9093)])))
}

fn snapshot_request(out: &[Output]) -> (i64, i32, i64) {
    match out {
        [Output::FetchSnapshot(to, r)] => {
            assert_eq!(*to, leader_endpoint(3000));
            assert_eq!(r.replica_id.0, 7);
            let p = &r.topics[0].partitions[0];
            (p.snapshot_id.end_offset, p.snapshot_id.epoch, p.position)
        }
        other => panic!("expected one FetchSnapshot, got {other:?}"),
    }
}

#[test]
fn a_log_starting_past_the_fetch_offset_is_loaded_from_the_snapshot_in_chunks() {
    let mut f = Follower::new(config(), 0);
    fetch_of(&f.decide(0, Event::Tick));
    f.decide(1, response(partition(3000, 5, 0)));
    let out = f.decide(
        2,
        response(
            partition(3000, 5, 120)
                .with_snapshot_id(SnapshotId::default().with_end_offset(100).with_epoch(4)),
        ),
    );
    assert_eq!(snapshot_request(&out), (100, 4, 0));

    let snapshot = [batch(0, 4, 3), batch(3, 4, 2)].concat();
    let (first, second) = snapshot.split_at(50);
    let size = snapshot.len() as i64;
    let out = f.decide(3, snapshot_chunk(100, 4, size, 0, first));
    assert_eq!(
        snapshot_request(&out),
        (100, 4, 50),
        "the next chunk from where it stopped"
    );
    let out = f.decide(4, snapshot_chunk(100, 4, size, 50, second));
    assert_eq!(
        out[0],
        Output::LoadSnapshot {
            end_offset: 100,
            epoch: 4,
            batches: Bytes::from(snapshot.clone()),
        }
    );
    assert_eq!(f.committed_offset(), 100);
    let (_, offset, last_epoch, _) = fetch_of(&out);
    assert_eq!(
        (offset, last_epoch),
        (100, 4),
        "Fetch resumes at the snapshot's end"
    );

    let out = f.decide(
        5,
        response(records(partition(3000, 5, 101), &[batch(100, 5, 1)])),
    );
    assert_eq!(published(&out), vec![(100, 100)]);
}

#[test]
fn a_snapshot_gone_from_the_leader_starts_over_and_one_too_large_is_fatal() {
    let start = |f: &mut Follower| {
        fetch_of(&f.decide(0, Event::Tick));
        f.decide(1, response(partition(3000, 5, 0)));
        let out = f.decide(
            2,
            response(
                partition(3000, 5, 120)
                    .with_snapshot_id(SnapshotId::default().with_end_offset(100).with_epoch(4)),
            ),
        );
        snapshot_request(&out);
    };
    let mut f = Follower::new(config(), 0);
    start(&mut f);
    let gone =
        Event::FetchSnapshotResponse(Ok(FetchSnapshotResponse::default().with_topics(vec![
            fetch_snapshot_response::TopicSnapshot::default()
                .with_name(StrBytes::from_static_str(METADATA_TOPIC).into())
                .with_partitions(vec![fetch_snapshot_response::PartitionSnapshot::default()
                    .with_error_code(ResponseError::SnapshotNotFound.code())
                    .with_current_leader(
                        fetch_snapshot_response::LeaderIdAndEpoch::default()
                            .with_leader_id(3000.into())
                            .with_leader_epoch(5),
                    )]),
        ])));
    let (_, offset, ..) = fetch_of(&f.decide(3, gone));
    assert_eq!(
        offset, 0,
        "a Fetch again, which names the leader's current snapshot"
    );

    let mut f = Follower::new(config(), 0);
    start(&mut f);
    let out = f.decide(3, snapshot_chunk(100, 4, 4096, 0, &[0; 10]));
    assert!(fatal(&out).contains("exceeds"), "{out:?}");

    // A chunk of another snapshot or another position is not appended.
    let mut f = Follower::new(config(), 0);
    start(&mut f);
    let out = f.decide(3, snapshot_chunk(100, 4, 40, 10, &[0; 10]));
    assert!(fatal(&out).contains("at position 10"), "{out:?}");
}
