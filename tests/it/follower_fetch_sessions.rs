//! skua's replica fetchers keep KIP-227 fetch sessions with their leaders: after one full
//! fetch, an idle follower's fetches name no partition, a fetch names only partitions
//! whose position moved, and a session the leader no longer holds is replaced by a new
//! one through a full fetch. A decoding proxy in front of the leader sees every Fetch on
//! the wire; against a skua leader here, against Apache Kafka 3.9.1 in
//! `a_skua_follower_keeps_a_fetch_session_with_a_kafka_leader`.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::fetch_proxy::{FetchProxy, SeenFetch};
use common::two_brokers::{
    self, committed, eventually, leader_and_isr, partition_info, TwoBrokers,
};
use common::{batch, TestBroker};
use kafka_protocol::records::Compression;
use skua::controller::TopicInfo;
use uuid::Uuid;

const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;

/// Topic `s` as `partitions` partitions on replicas 1 and 2, led by broker 1.
fn announce(b: &TestBroker, topic_id: Uuid, partitions: i32, epoch: i32) {
    let state = leader_and_isr(1, epoch, &[1, 2]);
    two_brokers::announce(
        b,
        TopicInfo {
            name: "s".into(),
            topic_id,
            partitions: (0..partitions)
                .map(|partition| partition_info(partition, &[1, 2], state.clone()))
                .collect(),
            configs: BTreeMap::new(),
        },
    );
}

async fn produce(c: &mut common::Client, p: i32, v: String) {
    let records = batch(&[&v], None, Compression::None);
    let (err, _) = c.produce("s", p, records, 1).await;
    assert_eq!(err, 0, "produce to s-{p}");
}

/// The follower's fetches seen after the first `from`.
fn since(proxy: &FetchProxy, from: usize) -> Vec<SeenFetch> {
    proxy.fetches().split_off(from)
}

/// Whether a fetch after the first `from` was answered and named no partition: every
/// position the follower had by then reached the leader, and the session is idle.
fn idle_since(proxy: &FetchProxy, from: usize) -> bool {
    since(proxy, from)
        .iter()
        .any(|f| f.partitions == 0 && f.answer.is_some())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_follower_fetches_name_no_partition_and_a_lost_session_is_replaced() {
    const N: i32 = 40;
    let pair = TwoBrokers::start("50", "s", N).await;
    // Broker 2 reaches broker 1 through the proxy.
    let proxy = FetchProxy::start("127.0.0.1:0".parse().unwrap(), pair.b1.addr).await;
    pair.introduce(proxy.addr);
    let TwoBrokers {
        b1,
        b2,
        topic_id,
        epoch,
        ..
    } = pair;
    let mut c1 = b1.client().await;
    announce(&b1, topic_id, N, epoch);
    announce(&b2, topic_id, N, epoch);
    let leader = |p: i32| b1.broker.replicas.partition("s", p).unwrap();
    let follower = |p: i32| b2.broker.replicas.partition("s", p).unwrap();
    for p in 0..N {
        produce(&mut c1, p, format!("first-{p}")).await;
    }
    let all_alike = || {
        (0..N).all(|p| {
            let (l, f) = (leader(p), follower(p));
            f.log_end_offset() == l.log_end_offset()
                && f.high_watermark() == l.high_watermark()
                && l.high_watermark() == l.log_end_offset()
        })
    };
    eventually("the follower has every record", all_alike).await;

    // The first fetch opened a session (with the partitions the fetcher had by then; the
    // rest joined it in incremental fetches).
    let first = proxy.fetches()[0].clone();
    assert_eq!((first.session_id, first.epoch), (0, 0), "{first:?}");
    let session = first.answer.expect("answered").1;
    assert!(session > 0, "the leader made a session");

    // Idle: incremental fetches naming nothing, answered with nothing, epochs in a row.
    let caught_up = proxy.fetches().len();
    eventually("an idle fetch", || idle_since(&proxy, caught_up)).await;
    let from = proxy.fetches().len();
    eventually("three more fetches", || since(&proxy, from).len() >= 3).await;
    let idle = since(&proxy, from);
    assert!(idle.len() >= 3, "idle fetches: {idle:?}");
    for (f, next) in idle.iter().zip(idle.iter().skip(1)) {
        assert_eq!(next.epoch, f.epoch + 1, "{idle:?}");
    }
    for f in &idle {
        assert_eq!(f.session_id, session, "{f:?}");
        assert!(f.epoch > 0, "{f:?}");
        assert_eq!((f.partitions, f.forgotten), (0, 0), "{f:?}");
        if let Some(answer) = f.answer {
            assert_eq!(answer, (0, session, 0), "{f:?}");
        }
        assert!(
            f.bytes < 100,
            "an idle fetch of {N} partitions: {} bytes",
            f.bytes
        );
    }
    assert_eq!(
        b1.broker.fetch_sessions.len(),
        1,
        "one session on the leader"
    );
    let stats = b2.broker.replicas.fetcher_stats().unwrap();
    assert!(stats.full_requests >= 1 && stats.requests > stats.full_requests);

    // Records on two partitions: only they are named again, once their fetch offset moved.
    let from = proxy.fetches().len();
    produce(&mut c1, 3, "second-3".into()).await;
    produce(&mut c1, 7, "second-7".into()).await;
    eventually("the follower has the new records", all_alike).await;
    let caught_up = proxy.fetches().len();
    eventually("an idle fetch after the new records", || {
        idle_since(&proxy, caught_up)
    })
    .await;
    let moved = since(&proxy, from);
    assert!(
        moved.iter().all(|f| f.epoch > 0 && f.partitions <= 2),
        "{moved:?}"
    );
    let named: usize = moved.iter().map(|f| f.partitions).sum();
    assert!((2..=4).contains(&named), "{moved:?}");

    // The leader no longer knows the session: it answers FETCH_SESSION_ID_NOT_FOUND and
    // the follower opens a new session with a full fetch.
    let from = proxy.fetches().len();
    proxy.lose_next_session();
    for p in 0..N {
        produce(&mut c1, p, format!("third-{p}")).await;
    }
    eventually("the follower has every record again", all_alike).await;
    let after = since(&proxy, from);
    let lost = after
        .iter()
        .position(|f| f.sabotaged)
        .expect("one lost session");
    assert_eq!(after[lost].answer.unwrap().0, FETCH_SESSION_ID_NOT_FOUND);
    let renewed = &after[lost + 1];
    assert_eq!(
        (renewed.session_id, renewed.epoch, renewed.partitions),
        (0, 0, N as usize),
        "{renewed:?}"
    );
    assert!(renewed.bytes > 20 * N as usize, "a full fetch: {renewed:?}");
    let new_session = renewed.answer.unwrap().1;
    assert!(new_session > 0 && new_session != session);
    let caught_up = proxy.fetches().len();
    eventually("an idle fetch in the new session", || {
        idle_since(&proxy, caught_up)
    })
    .await;
    let last = proxy.fetches().last().unwrap().clone();
    assert_eq!(
        (last.session_id, last.partitions),
        (new_session, 0),
        "{last:?}"
    );
    for p in 0..N {
        assert_eq!(committed(&follower(p)), committed(&leader(p)), "s-{p}");
        assert_eq!(
            leader(p).log_end_offset(),
            if p == 3 || p == 7 { 3 } else { 2 }
        );
    }
    drop(proxy);
    b2.stop().await;
    b1.stop().await;
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A cluster of two skua brokers (1, 2) and Apache Kafka 3.9.1 (3, started first): topic
/// `k` has 8 partitions led by Kafka and followed by skua broker 1, which reaches Kafka
/// through the decoding proxy. skua's fetches open a session Kafka keeps, idle ones name no
/// partition, and when Kafka no longer finds the session (FETCH_SESSION_ID_NOT_FOUND, its
/// answer for an evicted one) skua opens a new one; every record reaches skua with Kafka's
/// segment bytes.
#[test]
fn a_skua_follower_keeps_a_fetch_session_with_a_kafka_leader() {
    use common::cluster::{eventually, rt, Cluster, ONE_AT_A_TIME};
    const N: usize = 8;
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let listen: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let proxy_port = free_port();
    let kafka: std::net::SocketAddr = format!("127.0.0.1:{}", listen[2]).parse().unwrap();
    let proxy = rt().block_on(FetchProxy::start(
        format!("127.0.0.1:{proxy_port}").parse().unwrap(),
        kafka,
    ));
    let ports = format!("{},{},{}", listen[0], listen[1], listen[2]);
    let advertised = format!("{},{},{proxy_port}", listen[0], listen[1]);
    let Some(c) = Cluster::start_kinds(
        "1,2",
        &[
            "--kafka-first",
            "--ports",
            &ports,
            "--advertised-ports",
            &advertised,
            "--override",
            "replica.fetch.wait.max.ms=100",
        ],
    ) else {
        return;
    };
    let assignment = ["3:1"; N].join(",");
    let out = c.run(
        "topics",
        &[
            "--create",
            "--topic",
            "k",
            "--replica-assignment",
            &assignment,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let produce = |round: &str| {
        for p in 0..N as i32 {
            let v = format!("{round}-{p}");
            let records = batch(&[&v], None, Compression::None);
            eventually(
                &format!("Kafka takes a record of k-{p}"),
                Duration::from_secs(60),
                || {
                    let error = rt().block_on(async {
                        let mut client = common::Client::connect(kafka).await;
                        client.produce("k", p, records.clone(), 1).await.0
                    });
                    (error == 0).then_some(())
                },
            );
        }
    };
    let segment = |b: usize, p: usize| {
        let path = c
            .dir
            .path()
            .join(format!("broker-{b}/data/k-{p}/00000000000000000000.log"));
        std::fs::read(path).unwrap_or_default()
    };
    let alike = |records: usize| {
        eventually(
            &format!("skua has Kafka's {records} record(s) of every partition"),
            Duration::from_secs(60),
            || {
                (0..N)
                    .all(|p| {
                        let kafka = segment(3, p);
                        // A batch of one short record takes at least 61 bytes.
                        kafka.len() >= records * 61 && segment(1, p) == kafka
                    })
                    .then_some(())
            },
        )
    };
    let skua_fetches = || -> Vec<SeenFetch> {
        proxy
            .fetches()
            .into_iter()
            .filter(|f| f.client_id.starts_with("broker-1-fetcher"))
            .collect()
    };
    // Answered fetches naming no partition after the first `from`: skua's session is idle.
    let settled = |from: usize| {
        eventually("an idle fetch", Duration::from_secs(30), || {
            skua_fetches()[from..]
                .iter()
                .any(|f| f.partitions == 0 && f.answer.is_some())
                .then_some(())
        })
    };
    produce("first");
    alike(1);
    settled(skua_fetches().len());
    let from = skua_fetches().len();
    eventually("three more fetches", Duration::from_secs(30), || {
        (skua_fetches().len() >= from + 3).then_some(())
    });
    let idle: Vec<SeenFetch> = skua_fetches().split_off(from);
    assert!(idle.len() >= 3, "idle fetches: {idle:?}");
    let session = idle[0].session_id;
    assert!(session > 0, "{idle:?}");
    for f in &idle {
        assert_eq!(f.version, 17, "Kafka 3.9 at IBP 3.9: {f:?}");
        assert_eq!(
            (f.session_id, f.partitions, f.forgotten),
            (session, 0, 0),
            "{f:?}"
        );
        assert!(f.epoch > 0, "{f:?}");
        if let Some(answer) = f.answer {
            assert_eq!(answer, (0, session, 0), "{f:?}");
        }
    }

    // Kafka no longer finds the session; skua opens a new one and goes on replicating.
    let from = skua_fetches().len();
    proxy.lose_next_session();
    eventually(
        "a fetch whose session Kafka lost",
        Duration::from_secs(30),
        || skua_fetches()[from..].iter().find(|f| f.sabotaged).cloned(),
    );
    produce("second");
    alike(2);
    settled(skua_fetches().len());
    let after = skua_fetches().split_off(from);
    let lost = after.iter().position(|f| f.sabotaged).unwrap();
    assert_eq!(
        after[lost].answer.unwrap().0,
        FETCH_SESSION_ID_NOT_FOUND,
        "{after:?}"
    );
    let renewed = &after[lost + 1];
    assert_eq!(
        (renewed.session_id, renewed.epoch, renewed.partitions),
        (0, 0, N),
        "{after:?}"
    );
    let new_session = renewed.answer.unwrap().1;
    assert!(new_session > 0 && new_session != session, "{after:?}");
    let last = skua_fetches().last().unwrap().clone();
    assert_eq!(
        (last.session_id, last.partitions),
        (new_session, 0),
        "{last:?}"
    );
    assert!(last.epoch > 0);
}
