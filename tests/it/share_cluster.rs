//! Share groups in a three-broker ZooKeeper-mode cluster of skua brokers
//! (`scripts/cluster start 3 --skua 1,2,3`): the share-partition's leader persists its
//! state in the share coordinator of whichever broker leads `__share_group_state`, in
//! process or with the share coordinator's RPCs, and when that leader is killed with
//! SIGKILL the partition's new leader loads the persisted state and its consumers go on
//! there: the acknowledged records are never delivered again, the others are. When a
//! member's connection to the leader closes, the leader releases its records at once,
//! wherever the group's coordinator is. DescribeShareGroupOffsets v1 answers the same
//! lag before and after, wherever the group's coordinator, the state's coordinator and
//! the partition's leader are.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use uuid::Uuid;

use crate::common::cluster::{rt, Cluster, ONE_AT_A_TIME};
use crate::common::{batch, Client};

const GROUP: &str = "queue";
const ACCEPT: i8 = 1;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

async fn connect(addr: &str) -> Client {
    Client::connect(addr.parse::<SocketAddr>().unwrap()).await
}

/// The broker index (1-based) of `id`'s address in the cluster's bootstrap.
fn index_of(c: &Cluster, host: &str, port: i32) -> usize {
    let addr = format!("{host}:{port}");
    1 + c
        .bootstrap
        .iter()
        .position(|b| *b == addr)
        .expect("a known broker")
}

/// The partition's leader as `via` sees it: (broker id, its address).
async fn leader(via: &str, topic: &str) -> Option<(i32, String)> {
    let mut c = connect(via).await;
    let req = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s(topic)))),
    ]));
    let r = c.send(&req, 12).await;
    let id = r.topics.first()?.partitions.first()?.leader_id.0;
    let b = r.brokers.iter().find(|b| b.node_id.0 == id)?;
    Some((id, format!("{}:{}", b.host, b.port)))
}

/// The group's coordinator's address, as `via` answers FindCoordinator.
async fn coordinator(via: &str) -> Option<String> {
    let mut c = connect(via).await;
    let find = FindCoordinatorRequest::default().with_coordinator_keys(vec![s(GROUP)]);
    let r = c.send(&find, 6).await;
    let k = r.coordinators.first()?;
    (k.error_code == 0).then(|| format!("{}:{}", k.host, k.port))
}

/// The broker serving the share-partition's state (FindCoordinator key type SHARE).
async fn state_coordinator(via: &str, topic_id: Uuid) -> i32 {
    let key = format!(
        "{GROUP}:{}:0",
        base64::Engine::encode(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
            topic_id.as_bytes()
        )
    );
    let find = FindCoordinatorRequest::default()
        .with_key_type(2)
        .with_coordinator_keys(vec![s(&key)]);
    let r = connect(via).await.send(&find, 6).await;
    r.coordinators.first().map_or(-1, |k| k.node_id.0)
}

/// q-0's (start offset, lag) as `kafka-share-groups.sh --describe --offsets` gets them:
/// DescribeShareGroupOffsets v1 at the group's coordinator, which reads the summary from
/// the state's coordinator and the latest offset from q-0's leader, wherever they are.
/// Retried while the coordinators move.
async fn start_and_lag(via: &str) -> Result<(i64, i64), String> {
    let req = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_topics(Some(vec![
                describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(TopicName(s("q")))
                    .with_partitions(vec![0]),
            ])),
    ]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Some(addr) = coordinator(via).await {
            let r = connect(&addr).await.send(&req, 1).await;
            let g = &r.groups[0];
            match g.topics.first().and_then(|t| t.partitions.first()) {
                Some(p) if g.error_code == 0 && p.error_code == 0 => {
                    return Ok((p.start_offset, p.lag))
                }
                _ => last = format!("{r:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Err(last)
}

/// Joins `member` at the group's coordinator (found through `via`) and heartbeats until
/// it is assigned partition 0 of `topic_id`.
async fn join(via: &str, member: &str, topic_id: Uuid) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut epoch = 0;
    loop {
        assert!(Instant::now() < deadline, "{member} never assigned");
        let Some(addr) = coordinator(via).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let mut c = connect(&addr).await;
        let mut req = ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(GROUP)))
            .with_member_id(s(member))
            .with_member_epoch(epoch);
        if epoch == 0 {
            req = req.with_subscribed_topic_names(Some(vec![TopicName(s("q"))]));
        }
        let r = c.send(&req, 1).await;
        if r.error_code == 0 {
            epoch = r.member_epoch;
            let assigned = r
                .assignment
                .iter()
                .flat_map(|a| a.topic_partitions.iter())
                .any(|tp| tp.topic_id == topic_id && tp.partitions == vec![0]);
            if assigned {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A ShareFetch of partition 0 at `epoch` carrying `acks`; the acquired
/// (first, last, delivery count), or the error codes when it failed.
async fn share_fetch(
    c: &mut Client,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: &[(i64, i64, i8)],
) -> Result<Vec<(i64, i64, i16)>, (i16, i16, i16)> {
    let batches = acks
        .iter()
        .map(|&(first, last, t)| {
            share_fetch_request::AcknowledgementBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(vec![t])
        })
        .collect();
    let req = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s(GROUP))))
        .with_member_id(Some(s(member)))
        .with_share_session_epoch(epoch)
        .with_max_wait_ms(1000)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_max_records(500)
        .with_batch_size(500)
        .with_topics(vec![share_fetch_request::FetchTopic::default()
            .with_topic_id(topic_id)
            .with_partitions(vec![
                share_fetch_request::FetchPartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(batches),
            ])]);
    let r = c.send(&req, 1).await;
    let p = r.responses.first().and_then(|t| t.partitions.first());
    let (code, ack) = p.map_or((0, 0), |p| (p.error_code, p.acknowledge_error_code));
    if r.error_code != 0 || code != 0 || ack != 0 {
        return Err((r.error_code, code, ack));
    }
    Ok(p.map(|p| {
        p.acquired_records
            .iter()
            .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
            .collect()
    })
    .unwrap_or_default())
}

#[test]
fn consumers_go_on_at_the_new_leader_without_acknowledged_records_again() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::start_brokers(
        3,
        "1,2,3",
        &[
            "--override",
            "share.coordinator.state.topic.replication.factor=3",
            "--override",
            "share.coordinator.state.topic.num.partitions=3",
        ],
    ) else {
        return;
    };
    rt().block_on(async {
        let first = cluster.bootstrap[0].clone();
        let mut admin = connect(&first).await;
        let create = CreateTopicsRequest::default()
            .with_topics(vec![create_topics_request::CreatableTopic::default()
                .with_name(TopicName(s("q")))
                .with_num_partitions(1)
                .with_replication_factor(3)])
            .with_timeout_ms(10_000);
        // CreateTopics goes to the controller, whichever broker that is.
        let mut created = None;
        for b in &cluster.bootstrap {
            let r = connect(b).await.send(&create, 7).await;
            created = Some((r.topics[0].error_code, r.topics[0].error_message.clone()));
            if r.topics[0].error_code == 0 {
                break;
            }
        }
        assert_eq!(created.as_ref().map(|c| c.0), Some(0), "{created:?}");
        let (mut old_leader, mut at) = (0, String::new());
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some((id, addr)) = leader(&first, "q").await {
                if id >= 0 {
                    (old_leader, at) = (id, addr);
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(old_leader > 0, "q has a leader");
        let req =
            MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(TopicName(s("q"))))]));
        let q = admin.send(&req, 12).await.topics[0].topic_id;

        join(&first, "m1", q).await;
        let mut c = connect(&at).await;
        // The first fetch loads the share-partition at the log's end (the group's
        // share.auto.offset.reset is latest): retried while its state's coordinator loads.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut opened = Err((0, 0, 0));
        while Instant::now() < deadline {
            opened = share_fetch(&mut c, "m1", 0, q, &[]).await;
            if opened.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert_eq!(opened, Ok(vec![]), "the share-partition loaded");
        let values: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        let (err, _) = c
            .produce("q", 0, batch(&refs, None, Compression::None), -1)
            .await;
        assert_eq!(err, 0);
        // The leader loads the share-partition from the share coordinator (wherever it
        // is), then acquires; the first half is accepted and persisted.
        let got = share_fetch(&mut c, "m1", 1, q, &[]).await;
        assert_eq!(got, Ok(vec![(0, 9, 1)]));
        let accepted = share_fetch(&mut c, "m1", 2, q, &[(0, 4, ACCEPT)]).await;
        assert_eq!(accepted, Ok(vec![]), "0-4 accepted, 5-9 still held");
        // KIP-1226's lag: 10 records, 5 of them delivered for good.
        let lag_before = start_and_lag(&first).await.map(|(_, lag)| lag);
        assert_eq!(lag_before, Ok(5), "the lag while 5-9 are held");
        eprintln!(
            "lag 5 answered by the group's coordinator {} with q's leader {at} and the \
             state's coordinator {}",
            coordinator(&first).await.unwrap_or_default(),
            state_coordinator(&first, q).await
        );
        drop(c);

        // The partition's leader dies; another takes over and reads the state.
        let host_port = at.rsplit_once(':').unwrap();
        let killed = index_of(&cluster, host_port.0, host_port.1.parse().unwrap());
        cluster.signal("kill", killed);
        let survivor = cluster.bootstrap[if killed == 1 { 1 } else { 0 }].clone();
        let mut new_at = String::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some((id, addr)) = leader(&survivor, "q").await {
                if id >= 0 && id != old_leader {
                    new_at = addr;
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert!(!new_at.is_empty(), "q has a new leader");

        join(&survivor, "m2", q).await;
        let mut c = connect(&new_at).await;
        let mut got = Ok(Vec::new());
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            got = share_fetch(&mut c, "m2", 0, q, &[]).await;
            if got.as_ref().is_ok_and(|g| !g.is_empty()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        // Only the records never accepted come again.
        let ranges: Vec<(i64, i64)> = got
            .clone()
            .unwrap_or_default()
            .iter()
            .map(|(f, l, _)| (*f, *l))
            .collect();
        assert_eq!(ranges, vec![(5, 9)], "{got:?}");

        // m2's fetching connection closes (as a killed consumer's does) while m2 is still
        // a member: the leader releases what m2 held at once, whichever broker the group's
        // coordinator is (it plays no part), and m3 gets the records well before their
        // 30 s locks would run out, delivered once more.
        let count = got.as_ref().map_or(0, |g| g[0].2);
        join(&survivor, "m3", q).await;
        drop(c);
        let mut c = connect(&new_at).await;
        let started = Instant::now();
        // (each try opens m3's session again: epoch 0 replaces it)
        let mut again = Ok(Vec::new());
        while started.elapsed() < Duration::from_secs(10) {
            again = share_fetch(&mut c, "m3", 0, q, &[]).await;
            if again.as_ref().is_ok_and(|g| !g.is_empty()) {
                break;
            }
        }
        assert_eq!(
            again,
            Ok(vec![(5, 9, count + 1)]),
            "after {:?}",
            started.elapsed()
        );
        // The same lag after the failover, from the state the new leader read back and
        // the new leader's high watermark.
        let lag_after = start_and_lag(&survivor).await.map(|(_, lag)| lag);
        assert_eq!(lag_after, Ok(5), "the lag after the failover");
        let group_coordinator = coordinator(&survivor).await.unwrap_or_default();
        eprintln!(
            "m2's records released at q's leader {new_at} {:.3} s after its connection closed; \
             the group's coordinator is {group_coordinator} ({})",
            started.elapsed().as_secs_f32(),
            if group_coordinator == new_at {
                "the same broker"
            } else {
                "another broker"
            }
        );
        // Which path the state took (in process, or the share coordinator's RPCs) depends
        // on where `__share_group_state`'s partitions landed; shown for the record.
        let (new_leader, _) = leader(&survivor, "q").await.unwrap();
        eprintln!(
            "q's leader {old_leader} then {new_leader}; the state's coordinator now {}",
            state_coordinator(&survivor, q).await
        );
    });
}
