//! Listeners changed at runtime, per broker (Kafka's KIP-226): `kafka-configs.sh --alter
//! --entity-type brokers --entity-name <id> --add-config listeners=...` binds the new
//! listener at once and advertises it (in Metadata for clients of that listener, and in
//! `/brokers/ids/<id>` in a cluster); deleting it closes the listener and its connections.
//! Refused changes (port 0, an address in use, an unsupported security protocol) leave
//! everything as it was.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use kafka_protocol::messages::*;

use common::configs::{incremental_alter, BROKER, DELETE, SET};
use common::zookeeper::ZooKeeper;
use common::{wait_for, Client, TestBroker};

const INVALID_REQUEST: i16 = 42;

/// IncrementalAlterConfigs of broker `id`: (op, key, value). Returns (code, message).
async fn alter(c: &mut Client, id: i32, ops: &[(i8, &str, Option<&str>)]) -> (i16, String) {
    let (code, message) = incremental_alter(c, BROKER, &id.to_string(), ops).await;
    (code, message.unwrap_or_default())
}

/// (broker id, host, port) of every broker, as Metadata answers on `client`'s listener.
async fn brokers(client: &mut Client) -> Vec<(i32, String, i32)> {
    let resp = client
        .send(&MetadataRequest::default().with_topics(Some(vec![])), 12)
        .await;
    resp.brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect()
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Asks `client` for the brokers until `ok` holds for them; fails the test after 30 s.
async fn until_brokers(
    what: &str,
    client: &mut Client,
    ok: impl Fn(&[(i32, String, i32)]) -> bool,
) {
    let start = std::time::Instant::now();
    while !ok(&brokers(client).await) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn connects(addr: SocketAddr) -> bool {
    tokio::net::TcpStream::connect(addr).await.is_ok()
}

/// The keys that add an EXTERNAL listener on `port` beside the PLAINTEXT one the test
/// broker binds on port 0.
fn external_listener(port: u16) -> [(i8, &'static str, Option<String>); 3] {
    [
        (
            SET,
            "listeners",
            Some(format!(
                "PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:{port}"
            )),
        ),
        (
            SET,
            "advertised.listeners",
            Some(format!(
                "PLAINTEXT://127.0.0.1:0,EXTERNAL://localhost:{port}"
            )),
        ),
        (
            SET,
            "listener.security.protocol.map",
            Some("PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT".to_string()),
        ),
    ]
}

fn ops<'a>(
    keys: &'a [(i8, &'static str, Option<String>)],
) -> Vec<(i8, &'static str, Option<&'a str>)> {
    keys.iter()
        .map(|(o, k, v)| (*o, *k, v.as_deref()))
        .collect()
}

const REMOVE_EXTERNAL: [(i8, &str, Option<&str>); 3] = [
    (DELETE, "listeners", None),
    (DELETE, "advertised.listeners", None),
    (DELETE, "listener.security.protocol.map", None),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_added_at_runtime_serves_and_is_advertised_until_removed() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let id = broker.broker.config().broker_id;
    let mut admin = broker.client().await;
    let plaintext = (id, "127.0.0.1".to_string(), broker.addr.port() as i32);
    assert_eq!(brokers(&mut admin).await, vec![plaintext.clone()]);

    // Refused: an ephemeral port, an address already taken, a protocol not served.
    let (code, msg) = alter(
        &mut admin,
        id,
        &[
            (
                SET,
                "listeners",
                Some("PLAINTEXT://127.0.0.1:0,EXTERNAL://127.0.0.1:0"),
            ),
            (
                SET,
                "listener.security.protocol.map",
                Some("PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT"),
            ),
        ],
    )
    .await;
    assert_eq!(code, INVALID_REQUEST, "{msg}");
    assert!(msg.contains("needs a port other than 0"), "{msg}");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port();
    let (code, msg) = alter(&mut admin, id, &ops(&external_listener(taken_port))).await;
    assert_eq!(code, INVALID_REQUEST, "{msg}");
    assert!(msg.contains("cannot listen on"), "{msg}");
    drop(taken);
    let (code, msg) = alter(
        &mut admin,
        id,
        &[(
            SET,
            "listeners",
            Some("PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:1"),
        )],
    )
    .await;
    assert_eq!(code, INVALID_REQUEST, "{msg}");
    assert_eq!(brokers(&mut admin).await, vec![plaintext.clone()]);

    // Added: bound at once, and its clients are told its advertised address.
    let port = free_port();
    let external = SocketAddr::from(([127, 0, 0, 1], port));
    let (code, msg) = alter(&mut admin, id, &ops(&external_listener(port))).await;
    assert_eq!(code, 0, "{msg}");
    wait_for("the listener accepts", Duration::from_secs(10), || {
        connects(external)
    })
    .await;
    let mut outside = Client::connect(external).await;
    assert_eq!(
        brokers(&mut outside).await,
        vec![(id, "localhost".to_string(), port as i32)]
    );
    assert_eq!(brokers(&mut admin).await, vec![plaintext.clone()]);

    // Kept across a restart: the stored listeners are bound again.
    drop(outside);
    broker.stop().await;
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut admin = broker.client().await;
    wait_for("the listener accepts", Duration::from_secs(10), || {
        connects(external)
    })
    .await;
    let mut outside = Client::connect(external).await;
    assert_eq!(
        brokers(&mut outside).await,
        vec![(id, "localhost".to_string(), port as i32)]
    );

    // Removed: its connections are closed and nothing listens there any more; the
    // PLAINTEXT listener serves on.
    let (code, msg) = alter(&mut admin, id, &REMOVE_EXTERNAL).await;
    assert_eq!(code, 0, "{msg}");
    let closed = tokio::time::timeout(Duration::from_secs(10), outside.read_frame()).await;
    assert!(
        matches!(closed, Ok(None)),
        "the EXTERNAL connection is closed"
    );
    wait_for("nothing listens", Duration::from_secs(10), || async {
        !connects(external).await
    })
    .await;
    assert_eq!(
        brokers(&mut admin).await,
        vec![(id, "127.0.0.1".to_string(), broker.addr.port() as i32)]
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_cluster_the_registration_carries_a_listener_added_at_runtime() {
    let Some(zk) = ZooKeeper::start() else { return };
    let connect = format!("{}/listeners", zk.connect);
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(
        dir.path(),
        &[
            ("broker.id", "1"),
            ("zookeeper.connect", &connect),
            ("offsets.topic.replication.factor", "1"),
        ],
    )
    .await;
    let mut admin = broker.client().await;
    until_brokers("the broker in its own metadata", &mut admin, |b| {
        b.len() == 1
    })
    .await;

    let port = free_port();
    let external = SocketAddr::from(([127, 0, 0, 1], port));
    let (code, msg) = alter(&mut admin, 1, &ops(&external_listener(port))).await;
    assert_eq!(code, 0, "{msg}");

    // /brokers/ids/1 names the new endpoint (what every broker and Kafka's controller read).
    let session = skua::zk::session::ZkSession::connect(&zk.config("/listeners"))
        .await
        .unwrap();
    let registered = || async {
        let (data, _) = session.get("/brokers/ids/1").await.unwrap().unwrap();
        String::from_utf8(data).unwrap()
    };
    let want = format!("EXTERNAL://localhost:{port}");
    wait_for(
        "the registration names EXTERNAL",
        Duration::from_secs(10),
        || async { registered().await.contains(&want) },
    )
    .await;
    assert!(registered().await.contains("\"EXTERNAL\":\"PLAINTEXT\""));

    // The controller told the brokers: clients of EXTERNAL are answered with it.
    wait_for("the listener accepts", Duration::from_secs(10), || {
        connects(external)
    })
    .await;
    let mut outside = Client::connect(external).await;
    let want_brokers = vec![(1, "localhost".to_string(), port as i32)];
    until_brokers("EXTERNAL in the metadata", &mut outside, |b| {
        b == want_brokers
    })
    .await;

    let (code, msg) = alter(&mut admin, 1, &REMOVE_EXTERNAL).await;
    assert_eq!(code, 0, "{msg}");
    wait_for("EXTERNAL unregistered", Duration::from_secs(10), || async {
        !registered().await.contains(&want)
    })
    .await;
    broker.stop().await;
}
