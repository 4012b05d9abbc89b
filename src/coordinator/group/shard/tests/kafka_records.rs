//! A KIP-848 group as Apache Kafka 4.4 wrote it to `__consumer_offsets`
//! (tests/fixtures/kafka-4.4-kip848-group.md), loaded by the shard as a data dir adopted
//! from Kafka is: the values carry fields Kafka 4.4 adds as tags (the group's metadata
//! hash, the assignment timestamp, per-partition assignment epochs), a member without a
//! regex has an empty one, and no partition metadata record is written. The group must
//! resume at Kafka's commits, and what skua's members commit must be what the next
//! member reads, before and after a reload.

use super::*;

const KAFKA_LOG: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/kafka-4.4-kip848-group.log"
));
/// Kafka's batches in that log: (base offset, byte range, next offset).
const BATCHES: [(i64, std::ops::Range<usize>, i64); 3] =
    [(0, 0..385, 5), (5, 385..647, 8), (8, 647..869, 13)];
/// The topic id Kafka gave `mig` (VVU0rGDgSUCGYCkW3MAsRg).
const MIG: u128 = 0x5555_34ac_60e0_4940_8660_2916_dcc0_2c46;
/// The member of Kafka's console consumer that committed mig-1 at 70.
const KAFKA_MEMBER: &str = "nEtc9PKKTimgaccGu2N6Yw";

/// A log holding Kafka's batches that start before `end`, as Kafka wrote them.
fn kafka_log(end: i64) -> Arc<MemoryLog> {
    let log = Arc::new(MemoryLog::default());
    for (base, bytes, next) in BATCHES {
        if base < end {
            log.append_raw(0, base, Bytes::from_static(&KAFKA_LOG[bytes]), next);
        }
    }
    log
}

fn mig() -> Arc<TopicImage> {
    image(&[("mig", MIG, 3)])
}

/// `gnew`'s committed offsets, read from outside the group.
async fn committed(rt: &Runtime) -> Vec<(String, i32, i64)> {
    let mut out: Vec<_> = rt
        .read(0, |s: &GroupShard| {
            s.fetch_offsets("gnew", (None, -1), None)
        })
        .await
        .unwrap()
        .unwrap()
        .into_iter()
        .map(|(t, p, v)| (t, p, v.map_or(-1, |v| v.offset)))
        .collect();
    out.sort();
    out
}

fn offsets(o: [i64; 3]) -> Vec<(String, i32, i64)> {
    (0..3)
        .map(|p| ("mig".to_string(), p, o[p as usize]))
        .collect()
}

/// (state, group epoch, assignment epoch, member ids) of `gnew`.
async fn state(rt: &Runtime) -> (&'static str, i32, i32, Vec<String>) {
    rt.read(0, |s: &GroupShard| match s.group("gnew") {
        Some(Group::Consumer(c)) => (
            c.state_name(),
            c.group_epoch,
            c.assignment_epoch,
            c.members.keys().cloned().collect(),
        ),
        _ => panic!("gnew is not a consumer group"),
    })
    .await
    .unwrap()
}

fn all_of_mig() -> Option<Vec<(Uuid, Vec<i32>)>> {
    Some(vec![(Uuid::from_u128(MIG), vec![0, 1, 2])])
}

#[tokio::test]
async fn a_group_kafka_left_empty_resumes_at_its_commits_and_keeps_ours() {
    let log = kafka_log(i64::MAX);
    let topics = mig();
    let rt = runtime(&log, topics.clone());
    // Kafka's member left: tombstones, group epoch 3, assignment epoch 3.
    assert_eq!(state(&rt).await, ("Empty", 3, 3, vec![]));
    assert_eq!(committed(&rt).await, offsets([0, 70, 0]));

    // A new member gets every partition and reads Kafka's commits at its epoch.
    let joined = consumer(&rt, "gnew", join("next", Some(&["mig"]), None), &topics)
        .await
        .unwrap();
    assert_eq!(
        (joined.member_epoch, &joined.assignment),
        (4, &all_of_mig())
    );
    let read = rt
        .read(0, |s: &GroupShard| {
            s.fetch_offsets("gnew", (Some("next"), 4), None)
                .map(|o| o.len())
        })
        .await
        .unwrap();
    assert_eq!(read, Ok(3));
    // It consumes the lag, commits at its epoch and leaves.
    let answers = commit(
        &rt,
        "gnew",
        "next",
        4,
        None,
        &[("mig", 0, 100), ("mig", 1, 100), ("mig", 2, 100)],
    )
    .await
    .unwrap();
    assert_eq!(answers, vec![None, None, None]);
    let left = consumer(&rt, "gnew", beat("next", -1, &None), &topics)
        .await
        .unwrap();
    assert_eq!(left.member_epoch, -1);
    assert_eq!(state(&rt).await, ("Empty", 5, 4, vec![]));

    // The next member starts where that one committed, and so does a reload.
    let after = consumer(&rt, "gnew", join("after", Some(&["mig"]), None), &topics)
        .await
        .unwrap();
    assert_eq!((after.member_epoch, &after.assignment), (6, &all_of_mig()));
    assert_eq!(committed(&rt).await, offsets([100, 100, 100]));
    let live = snapshot(&rt).await;
    let reloaded = runtime(&log, topics);
    assert_eq!(snapshot(&reloaded).await, live);
    assert_eq!(committed(&reloaded).await, offsets([100, 100, 100]));
}

#[tokio::test]
async fn a_member_kafka_had_at_its_stop_heartbeats_and_commits_on() {
    // Kafka's log up to the member's leave: it is in the group at epoch 2 with every
    // partition, as after a Kafka broker stopped under a running consumer.
    let log = kafka_log(8);
    let topics = mig();
    let rt = runtime(&log, topics.clone());
    assert_eq!(
        state(&rt).await,
        ("Stable", 2, 2, vec![KAFKA_MEMBER.to_string()])
    );
    assert_eq!(committed(&rt).await, offsets([0, 70, 0]));

    // Its next heartbeat is not fenced: it keeps its partitions, is told them again
    // after the load, and commits at the epoch it was answered with.
    let hb = consumer(&rt, "gnew", beat(KAFKA_MEMBER, 2, &all_of_mig()), &topics)
        .await
        .unwrap();
    assert_eq!(hb.assignment, all_of_mig());
    let answers = commit(
        &rt,
        "gnew",
        KAFKA_MEMBER,
        hb.member_epoch,
        None,
        &[("mig", 1, 71)],
    )
    .await
    .unwrap();
    assert_eq!(answers, vec![None]);
    assert_eq!(committed(&rt).await, offsets([0, 71, 0]));
}
