//! Idle groups cost nothing: the coordinator keeps one timer per group with something
//! due (a session, a rebalance), ordered by deadline, instead of visiting every group on
//! a fixed tick. 10,000 groups made by OffsetCommit from outside any generation (which
//! any client can create) must leave an idle broker idle.
//!
//! Alone in its test binary: it measures the CPU time of the whole process.

use crate::common;

use std::time::Duration;

use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const GROUPS: usize = 10_000;
const CLIENTS: usize = 4;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// CPU time used by this process so far (user and system, every thread).
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes a plain struct we own; RUSAGE_SELF is always valid.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_idle_groups_leave_the_broker_idle() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[("offsets.topic.num.partitions", "4")]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("t", 1).await, 0);
    let find = FindCoordinatorRequest::default().with_key(s("g"));
    assert_eq!(c.send(&find, 3).await.error_code, 0);

    let mut tasks = Vec::new();
    for k in 0..CLIENTS {
        let addr = b.addr;
        tasks.push(tokio::spawn(async move {
            let mut c = Client::connect(addr).await;
            for i in (k..GROUPS).step_by(CLIENTS) {
                let req = OffsetCommitRequest::default()
                    .with_group_id(GroupId(s(&format!("idle-{i}"))))
                    .with_generation_id_or_member_epoch(-1)
                    .with_topics(vec![
                        offset_commit_request::OffsetCommitRequestTopic::default()
                            .with_name(TopicName(s("t")))
                            .with_partitions(vec![
                                offset_commit_request::OffsetCommitRequestPartition::default()
                                    .with_partition_index(0)
                                    .with_committed_offset(i as i64),
                            ]),
                    ]);
                // The offsets topic was just created: its partitions load in the
                // background, and a commit meanwhile gets COORDINATOR_LOAD_IN_PROGRESS
                // (14), which a client retries.
                loop {
                    let resp = c.send(&req, 8).await;
                    match resp.topics[0].partitions[0].error_code {
                        14 => tokio::time::sleep(Duration::from_millis(20)).await,
                        code => break assert_eq!(code, 0),
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let listed = c.send(&ListGroupsRequest::default(), 4).await;
    assert_eq!(listed.groups.len(), GROUPS);

    let window = Duration::from_secs(2);
    let before = cpu_time();
    tokio::time::sleep(window).await;
    let used = cpu_time() - before;
    eprintln!("{GROUPS} idle groups: {used:?} of CPU in {window:?}");
    assert!(
        used < window / 50,
        "an idle broker with {GROUPS} groups used {used:?} of CPU in {window:?}"
    );
    b.stop().await;
}
