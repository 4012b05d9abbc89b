//! A consume-transform-produce transaction (`sendOffsetsToTransaction`, as franz-go's
//! TestTxnEtl and Kafka Streams run it) on three skua brokers in ZooKeeper mode, with the
//! transaction coordinator, the group coordinator and the output partition's leader on
//! different brokers: the commit's markers must reach the other two. Until they do, a
//! read_committed consumer sees nothing past the last stable offset and a `require_stable`
//! OffsetFetch answers UNSTABLE_OFFSET_COMMIT, so a transaction whose markers stay on the
//! coordinator's broker stalls every consumer after it. Skipped, with a message, only when
//! java is not installed (scripts/cluster runs ZooKeeper).

mod common;

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

/// Creates TOPIC with one partition on every broker (through the controller, as ZooKeeper
/// mode wants) and returns its leader.
async fn create_topic(brokers: &Brokers) -> i32 {
    let id = controller(&mut brokers.client(1).await).await;
    let mut c = brokers.client(id).await;
    let req = CreateTopicsRequest::default()
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_num_partitions(1)
            .with_replication_factor(3)])
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
        let leader = create_topic(&brokers).await;
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
