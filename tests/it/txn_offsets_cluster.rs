//! A consume-transform-produce transaction (`sendOffsetsToTransaction`, as franz-go's
//! TestTxnEtl and Kafka Streams run it) on three skua brokers in ZooKeeper mode, with the
//! transaction coordinator, the group coordinator and the output partition's leader on
//! different brokers: the commit's markers must reach the other two. Until they do, a
//! read_committed consumer sees nothing past the last stable offset and a `require_stable`
//! OffsetFetch answers UNSTABLE_OFFSET_COMMIT, so a transaction whose markers stay on the
//! coordinator's broker stalls every consumer after it. Skipped, with a message, only when
//! java is not installed (scripts/cluster runs ZooKeeper).

use crate::common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::cluster::{rt, Cluster, ONE_AT_A_TIME};
use common::txn::*;
use common::Client;
use kafka_protocol::messages::*;

const UNSTABLE_OFFSET_COMMIT: i16 = 88;

/// Three partitions per coordinator topic, spread over the brokers; everything
/// replicated three times.
const OVERRIDES: &[&str] = &[
    "--override",
    "transaction.state.log.num.partitions=3",
    "--override",
    "offsets.topic.num.partitions=3",
    "--override",
    "auto.leader.rebalance.enable=false",
];

/// The brokers by id (scripts/cluster numbers them 1, 2, 3 in bootstrap order).
struct Brokers {
    addrs: Vec<SocketAddr>,
}

impl Brokers {
    async fn client(&self, id: i32) -> Client {
        Client::connect(self.addrs[id as usize - 1]).await
    }
}

/// The coordinator of `key` (0 group, 1 transaction), once one is available.
async fn coordinator(c: &mut Client, key_type: i8, key: &str) -> i32 {
    let start = Instant::now();
    loop {
        let req = FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_coordinator_keys(vec![s(key)]);
        let resp: FindCoordinatorResponse = c.send(&req, 4).await;
        let found = &resp.coordinators[0];
        if found.error_code == 0 {
            return found.node_id.0;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no coordinator for {key}: {found:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The controller's id, as Metadata names it.
async fn controller(c: &mut Client) -> i32 {
    let req = MetadataRequest::default().with_topics(Some(vec![]));
    let resp: MetadataResponse = c.send(&req, 12).await;
    resp.controller_id.0
}

/// TOPIC with one partition on every broker.
fn on_every_broker() -> create_topics_request::CreatableTopic {
    create_topics_request::CreatableTopic::default()
        .with_name(TopicName(s(TOPIC)))
        .with_num_partitions(1)
        .with_replication_factor(3)
}

/// TOPIC with one partition on `replicas`, the first its leader.
fn on_replicas(replicas: &[i32]) -> create_topics_request::CreatableTopic {
    create_topics_request::CreatableTopic::default()
        .with_name(TopicName(s(TOPIC)))
        .with_num_partitions(-1)
        .with_replication_factor(-1)
        .with_assignments(vec![
            create_topics_request::CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids(replicas.iter().map(|&id| BrokerId(id)).collect()),
        ])
}

/// Creates `topic` (through the controller, as ZooKeeper mode wants) and returns the
/// leader of its partition 0.
async fn create_topic(brokers: &Brokers, topic: create_topics_request::CreatableTopic) -> i32 {
    let id = controller(&mut brokers.client(1).await).await;
    let mut c = brokers.client(id).await;
    let req = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(10_000);
    let resp: CreateTopicsResponse = c.send(&req, 7).await;
    assert_eq!(resp.topics[0].error_code, 0, "{:?}", resp.topics[0]);
    let start = Instant::now();
    loop {
        let req =
            MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(TopicName(s(TOPIC))))]));
        let resp: MetadataResponse = c.send(&req, 12).await;
        let leader = resp.topics[0]
            .partitions
            .first()
            .map_or(-1, |p| p.leader_id.0);
        if leader > 0 {
            return leader;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{TOPIC} has no leader"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A key whose coordinator (of `key_type`) is not one of `avoid`: `prefix-N` for the
/// first N that works, None when none of the first 64 does.
async fn key_away_from(
    c: &mut Client,
    key_type: i8,
    prefix: &str,
    avoid: &[i32],
) -> Option<(String, i32)> {
    for n in 0..64 {
        let key = format!("{prefix}-{n}");
        let id = coordinator(c, key_type, &key).await;
        if !avoid.contains(&id) {
            return Some((key, id));
        }
    }
    None
}

/// Polls `check` every 200 ms until it returns Some, for at most 30 s; `what` and the
/// last value otherwise.
async fn within_30s<T: std::fmt::Debug>(
    what: &str,
    mut check: impl AsyncFnMut() -> (Option<T>, String),
) -> T {
    let start = Instant::now();
    loop {
        let (done, last) = check().await;
        if let Some(v) = done {
            return v;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what} within 30 s; last: {last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[test]
fn offsets_and_records_of_a_transaction_commit_on_three_brokers() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::start_kinds("1,2,3", OVERRIDES) else {
        return;
    };
    let brokers = Brokers {
        addrs: cluster
            .bootstrap
            .iter()
            .map(|a| a.parse().unwrap())
            .collect(),
    };
    rt().block_on(async {
        let leader = create_topic(&brokers, on_every_broker()).await;
        let mut any = brokers.client(1).await;
        let (txn_id, txn_coordinator) = key_away_from(&mut any, 1, "etl-tx", &[leader])
            .await
            .expect("a transaction coordinator away from the partition's leader");
        // The third broker if it leads a `__consumer_offsets` partition, else the leader's.
        let (group, group_coordinator) =
            match key_away_from(&mut any, 0, "etl-group", &[txn_coordinator, leader]).await {
                Some(found) => found,
                None => key_away_from(&mut any, 0, "etl-group", &[txn_coordinator])
                    .await
                    .expect("a group coordinator away from the transaction coordinator"),
            };
        eprintln!(
            "partition leader {leader}, transaction coordinator {txn_coordinator}, \
             group coordinator {group_coordinator}"
        );

        let mut coordinator = brokers.client(txn_coordinator).await;
        let r = init(&mut coordinator, &txn_id, (-1, -1)).await;
        assert_eq!(r.error_code, 0, "{r:?}");
        let producer = (r.producer_id.0, r.producer_epoch);
        assert_eq!(
            add_partition(&mut coordinator, &txn_id, producer.0, producer.1, 0).await,
            0
        );
        let mut partition = brokers.client(leader).await;
        let values = ["a", "b", "c"];
        let batch = txn_batch(&values, (producer.0, producer.1, 0));
        let (error, base) = produce(&mut partition, &txn_id, batch).await;
        assert_eq!((error, base), (0, 0));
        assert_eq!(
            add_offsets(&mut coordinator, &txn_id, &group, producer).await,
            0
        );
        let mut groups = brokers.client(group_coordinator).await;
        assert_eq!(
            txn_offset_commit(&mut groups, &txn_id, &group, producer, 42).await,
            0
        );
        assert_eq!(
            fetch_offset(&mut groups, &group, true).await,
            (UNSTABLE_OFFSET_COMMIT, -1),
            "pending until the transaction ends"
        );
        assert_eq!(
            end(&mut coordinator, &txn_id, producer.0, producer.1, true).await,
            0
        );

        // The commit marker on the group coordinator's partition makes the offset stable.
        within_30s("the transaction's offset is committed", async || {
            let got = fetch_offset(&mut groups, &group, true).await;
            ((got == (0, 42)).then_some(()), format!("{got:?}"))
        })
        .await;
        // The commit marker on the output partition's leader lets read_committed
        // consumers past the records.
        let read = within_30s("read_committed sees the records", async || {
            let data = fetch(&mut partition, true).await;
            let got: Vec<(i64, String, bool)> = records(&data)
                .into_iter()
                .filter(|(_, _, control)| !control)
                .collect();
            let done = (got.len() == values.len()).then(|| got.clone());
            (
                done,
                format!("{got:?}, last stable {}", data.last_stable_offset),
            )
        })
        .await;
        let read: Vec<&str> = read.iter().map(|(_, v, _)| v.as_str()).collect();
        assert_eq!(read, values);
        assert_eq!(
            latest(&mut partition, true).await,
            4,
            "3 records and the marker"
        );
    });
}

/// A key whose coordinator (of `key_type`) is `want`: `prefix-N` for the first N that
/// is, None when none of the first 64 is.
async fn key_at(c: &mut Client, key_type: i8, prefix: &str, want: i32) -> Option<String> {
    for n in 0..64 {
        let key = format!("{prefix}-{n}");
        if coordinator(c, key_type, &key).await == want {
            return Some(key);
        }
    }
    None
}

/// The state DescribeTransactions gives `id`.
async fn txn_state(c: &mut Client, id: &str) -> String {
    let req =
        DescribeTransactionsRequest::default().with_transactional_ids(vec![TransactionalId(s(id))]);
    let resp: DescribeTransactionsResponse = c.send(&req, 0).await;
    resp.transaction_states[0].transaction_state.to_string()
}

/// A broker stopped with SIGSTOP until dropped.
struct Paused<'a> {
    cluster: &'a Cluster,
    broker: i32,
}

impl<'a> Paused<'a> {
    fn new(cluster: &'a Cluster, broker: i32) -> Self {
        cluster.signal("pause", broker as usize);
        Paused { cluster, broker }
    }
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.cluster.run("resume", &[&self.broker.to_string()]);
    }
}

/// Coordinators and partition leaders internal topics are single replicas: only TOPIC's
/// partition waits for a follower.
const SINGLE_REPLICA_COORDINATORS: &[&str] = &[
    "--override",
    "transaction.state.log.num.partitions=12",
    "--override",
    "transaction.state.log.replication.factor=1",
    "--override",
    "transaction.state.log.min.isr=1",
    "--override",
    "offsets.topic.num.partitions=12",
    "--override",
    "offsets.topic.replication.factor=1",
    "--override",
    "auto.leader.rebalance.enable=false",
];

/// A group coordinator checks a TxnOffsetCommit with the producer's transaction
/// coordinator (KIP-890) on the broker that coordinator is on, and may at the same time
/// be sending that broker markers of a transaction it coordinates itself. A marker is
/// answered only once its partition's ISR has it, which takes as long as the slowest
/// follower; the check must not wait behind it, or the producer's TxnOffsetCommit goes
/// unanswered past its request timeout (as franz-go's TestTxnEtl saw on a loaded
/// machine). Here the follower is stopped outright while the marker is pending.
#[test]
fn offset_commit_check_does_not_wait_behind_markers() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = Cluster::start_kinds("1,2,3", SINGLE_REPLICA_COORDINATORS) else {
        return;
    };
    let brokers = Brokers {
        addrs: cluster
            .bootstrap
            .iter()
            .map(|a| a.parse().unwrap())
            .collect(),
    };
    rt().block_on(async {
        let mut any = brokers.client(1).await;
        // Producer X: its coordinator C checks X's offset commit on group coordinator G.
        let (x_id, c) = key_away_from(&mut any, 1, "checked-tx", &[])
            .await
            .expect("a transaction coordinator");
        let (group, g) = key_away_from(&mut any, 0, "etl-group", &[c])
            .await
            .expect("a group coordinator away from the transaction coordinator");
        // Producer Y, coordinated by G, writes to TOPIC on C, followed by the third broker.
        let y_id = key_at(&mut any, 1, "marker-tx", g)
            .await
            .expect("a transactional id coordinated by the group coordinator");
        let follower = 6 - c - g;
        assert_eq!(create_topic(&brokers, on_replicas(&[c, follower])).await, c);
        eprintln!("transaction coordinator {c}, group coordinator {g}, follower {follower}");

        let mut on_g = brokers.client(g).await;
        let mut on_c = brokers.client(c).await;
        let r = init(&mut on_g, &y_id, (-1, -1)).await;
        assert_eq!(r.error_code, 0, "{r:?}");
        let y = (r.producer_id.0, r.producer_epoch);
        assert_eq!(add_partition(&mut on_g, &y_id, y.0, y.1, 0).await, 0);
        let values = ["a", "b", "c"];
        let (error, base) = produce(&mut on_c, &y_id, txn_batch(&values, (y.0, y.1, 0))).await;
        assert_eq!((error, base), (0, 0));
        let r = init(&mut on_c, &x_id, (-1, -1)).await;
        assert_eq!(r.error_code, 0, "{r:?}");
        let x = (r.producer_id.0, r.producer_epoch);
        assert_eq!(add_offsets(&mut on_c, &x_id, &group, x).await, 0);

        let paused = Paused::new(&cluster, follower);
        // Y's commit: G sends C the marker for TOPIC, which waits for the stopped follower.
        let mut ending = brokers.client(g).await;
        let y_ending = y_id.clone();
        let ended = tokio::spawn(async move { end(&mut ending, &y_ending, y.0, y.1, true).await });
        within_30s("Y's transaction is being committed", async || {
            let state = txn_state(&mut on_g, &y_id).await;
            ((state == "PrepareCommit").then_some(()), state)
        })
        .await;
        tokio::time::sleep(Duration::from_millis(300)).await;

        let started = Instant::now();
        let committed = tokio::time::timeout(
            Duration::from_secs(3),
            txn_offset_commit(&mut on_g, &x_id, &group, x, 42),
        )
        .await;
        assert_eq!(
            committed,
            Ok(0),
            "X's offset commit answered within 3 s while a marker waits for a follower \
             (after {:?})",
            started.elapsed()
        );
        drop(paused);

        assert_eq!(ended.await.unwrap(), 0, "Y's EndTxn");
        assert_eq!(end(&mut on_c, &x_id, x.0, x.1, true).await, 0, "X's EndTxn");
        within_30s("X's offset is committed", async || {
            let got = fetch_offset(&mut on_g, &group, true).await;
            ((got == (0, 42)).then_some(()), format!("{got:?}"))
        })
        .await;
        within_30s("read_committed sees Y's records", async || {
            let data = fetch(&mut on_c, true).await;
            let got: Vec<String> = records(&data)
                .into_iter()
                .filter(|(_, _, control)| !control)
                .map(|(_, v, _)| v)
                .collect();
            ((got == values).then_some(()), format!("{got:?}"))
        })
        .await;
    });
}
