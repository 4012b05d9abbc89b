//! skua's ZooKeeper session against a real ZooKeeper 3.8 (`scripts/zk`, started by each
//! test on its own ports and stopped at the end). Skipped, with a message, only when java
//! is not installed.

use crate::common;

use std::time::Duration;

use common::zookeeper::ZooKeeper;
use skua::zk::session::{Op, SessionEvent, WatchEvent, ZkConfig, ZkError, ZkSession};
use skua::zk::znodes::{self, paths, BrokerRegistration, ControllerRegistration, EndPoint};

const WAIT: Duration = Duration::from_secs(20);

fn endpoint(port: i32) -> EndPoint {
    EndPoint {
        listener: "PLAINTEXT".into(),
        security_protocol: "PLAINTEXT".into(),
        host: "127.0.0.1".into(),
        port,
    }
}

async fn within<T>(what: &str, f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, f)
        .await
        .unwrap_or_else(|_| panic!("{what} within {WAIT:?}"))
}

/// A broker registration under a chroot: the chroot is created, the ephemeral znode is
/// Kafka's JSON, its czxid is the broker epoch, and it disappears (firing a watch in
/// another session) when the registering session closes.
#[tokio::test]
async fn ephemeral_registration_under_a_chroot_goes_with_its_session() {
    let Some(zk) = ZooKeeper::start() else { return };
    let broker = ZkSession::connect(&zk.config("/skua/test")).await.unwrap();
    let observer = ZkSession::connect(&zk.config("")).await.unwrap();
    assert!(broker.session_timeout() <= Duration::from_secs(6));

    broker.ensure_path(paths::BROKER_IDS).await.unwrap();
    let registration = BrokerRegistration::new(&[endpoint(9092)], None, 1_700_000_000_000);
    let stat = broker
        .create_ephemeral(&paths::broker(1), &znodes::encode(&registration))
        .await
        .unwrap();
    assert!(stat.czxid > 0, "the broker epoch");
    assert_eq!(
        broker
            .create_ephemeral(&paths::broker(1), b"{}")
            .await
            .unwrap_err(),
        ZkError::NodeExists("/brokers/ids/1".into())
    );

    // The other session sees it under the chroot, with the same bytes and czxid.
    let (found, watch) = observer
        .get_and_watch("/skua/test/brokers/ids/1")
        .await
        .unwrap();
    let (data, seen) = found.expect("registered");
    assert_eq!(data, znodes::encode(&registration));
    assert_eq!(seen.czxid, stat.czxid);
    assert_eq!(seen.ephemeral_owner, broker.session_id());
    let decoded: BrokerRegistration = znodes::decode(&data).unwrap();
    assert_eq!(decoded.parsed_endpoints().unwrap(), vec![endpoint(9092)]);

    drop(broker);
    let event = within("the watch fires", watch.changed()).await;
    assert_eq!(
        event,
        WatchEvent::Deleted("/skua/test/brokers/ids/1".into())
    );
    assert_eq!(
        observer.get("/skua/test/brokers/ids/1").await.unwrap(),
        None
    );
}

/// Every controller write is conditional on /controller_epoch's version: with the version
/// it read, the writes land together; after another controller bumped the epoch, nothing
/// is written and the caller learns it was fenced.
#[tokio::test]
async fn multi_op_writes_only_while_the_checked_version_holds() {
    let Some(zk) = ZooKeeper::start() else { return };
    let session = ZkSession::connect(&zk.config("/fenced")).await.unwrap();
    let epoch = session
        .create_recursive(
            paths::CONTROLLER_EPOCH,
            &znodes::controller_epoch::encode(1),
        )
        .await
        .unwrap();
    session.ensure_path(paths::TOPICS).await.unwrap();
    let controller = znodes::encode(&ControllerRegistration::new(1, 1_700_000_000_000));
    let written = session
        .multi_checked(
            paths::CONTROLLER_EPOCH,
            epoch.version,
            &[
                Op::Create {
                    path: &paths::topic("a"),
                    data: b"{}",
                    ephemeral: false,
                },
                Op::Create {
                    path: paths::CONTROLLER,
                    data: &controller,
                    ephemeral: true,
                },
            ],
        )
        .await
        .unwrap();
    assert_eq!(written.len(), 2);
    assert!(written.iter().all(|s| s.is_some()));
    let (_, stat) = session.get(paths::CONTROLLER).await.unwrap().unwrap();
    assert_eq!(stat.ephemeral_owner, session.session_id());

    // Another controller takes over: the epoch znode moves on.
    session
        .set(
            paths::CONTROLLER_EPOCH,
            &znodes::controller_epoch::encode(2),
            Some(epoch.version),
        )
        .await
        .unwrap();
    let stale = session
        .multi_checked(
            paths::CONTROLLER_EPOCH,
            epoch.version,
            &[
                Op::SetData {
                    path: &paths::topic("a"),
                    data: b"{\"stale\":true}",
                    version: None,
                },
                Op::Create {
                    path: &paths::topic("b"),
                    data: b"{}",
                    ephemeral: false,
                },
            ],
        )
        .await
        .unwrap_err();
    assert_eq!(
        stale,
        ZkError::Fenced {
            path: paths::CONTROLLER_EPOCH.into(),
            version: epoch.version
        }
    );
    assert_eq!(
        session.get(&paths::topic("a")).await.unwrap().unwrap().0,
        b"{}"
    );
    assert_eq!(session.get(&paths::topic("b")).await.unwrap(), None);
    let mut topics = session.children(paths::TOPICS).await.unwrap().unwrap();
    topics.sort();
    assert_eq!(topics, vec!["a"]);
}

/// A child watch fires when a broker registers, and a sequential znode gets Kafka's
/// 10-digit suffix (config change notifications).
#[tokio::test]
async fn child_watch_and_sequential_znodes() {
    let Some(zk) = ZooKeeper::start() else { return };
    let session = ZkSession::connect(&zk.config("")).await.unwrap();
    session.ensure_path(paths::BROKER_IDS).await.unwrap();
    let (children, watch) = session.children_and_watch(paths::BROKER_IDS).await.unwrap();
    assert!(children.is_empty());
    let other = ZkSession::connect(&zk.config("")).await.unwrap();
    other
        .create_ephemeral(&paths::broker(7), b"{}")
        .await
        .unwrap();
    let event = within("the child watch fires", watch.changed()).await;
    assert_eq!(event, WatchEvent::ChildrenChanged(paths::BROKER_IDS.into()));

    session.ensure_path(paths::CONFIG_CHANGES).await.unwrap();
    let note = znodes::ConfigChangeNotification::new("topics/a".into());
    let path = session
        .create_sequential(paths::CONFIG_CHANGE_PREFIX, &znodes::encode(&note))
        .await
        .unwrap();
    assert_eq!(path, "/config/changes/config_change_0000000000");
}

/// Expiry is a typed, terminal event. A proxy between the session and ZooKeeper cuts
/// the connection for longer than the session timeout, as a network partition does: the
/// server expires the session; once the network is back the client learns it, its owner
/// hears `Expired`, its ephemeral znodes are gone, and every later call fails with
/// `SessionExpired` until a new session is opened.
#[tokio::test]
async fn session_expiry_is_a_terminal_typed_event() {
    let Some(zk) = ZooKeeper::start() else { return };
    let proxy = Partition::start(&zk.connect).await;
    let config = ZkConfig::new(
        &proxy.addr.to_string(),
        Duration::from_secs(2),
        Some(Duration::from_secs(10)),
    )
    .unwrap();
    let session = ZkSession::connect(&config).await.unwrap();
    session.ensure_path(paths::BROKER_IDS).await.unwrap();
    session
        .create_ephemeral(&paths::broker(1), b"{}")
        .await
        .unwrap();
    let mut events = session.events();

    proxy.cut(true);
    assert_eq!(
        within("disconnected", events.next()).await,
        SessionEvent::Disconnected
    );
    // The server expires the session after its timeout with no contact.
    let observer = ZkSession::connect(&zk.config("")).await.unwrap();
    within("the server drops the ephemeral znode", async {
        while observer.get(&paths::broker(1)).await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    proxy.cut(false);

    let event = within("the session event", async {
        loop {
            let e = events.next().await;
            if e.is_terminal() {
                return e;
            }
        }
    })
    .await;
    assert_eq!(event, SessionEvent::Expired);
    assert_eq!(
        session.get(&paths::broker(1)).await.unwrap_err(),
        ZkError::SessionExpired
    );

    let fresh = ZkSession::connect(&config).await.unwrap();
    assert_ne!(fresh.session_id(), session.session_id());
    assert_eq!(fresh.get(&paths::broker(1)).await.unwrap(), None);
}

/// A broker whose session expires registers again with a new broker epoch (the new
/// znode's czxid), and its replica layer (the epoch its follower fetches and ISR changes
/// carry) and log manager (the clean-shutdown marker) take the new epoch: with the old
/// one, Kafka's controller and leaders would fence everything the broker sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_registered_again_after_expiry_uses_its_new_epoch() {
    let Some(zk) = ZooKeeper::start() else { return };
    let proxy = Partition::start(&zk.connect).await;
    let dir = tempfile::tempdir().unwrap();
    let broker = behind(&proxy, dir.path(), &[]).await;
    let observer = ZkSession::connect(&zk.config("")).await.unwrap();
    let czxid = || async {
        observer
            .get(&paths::broker(1))
            .await
            .unwrap()
            .map(|(_, stat)| stat.czxid)
    };
    let first = czxid().await.expect("registered");
    assert_eq!(broker.broker.replicas.cluster.broker_epoch(), first);

    proxy.cut(true);
    within("the server expires the registration", async {
        while czxid().await.is_some() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    proxy.cut(false);
    let second = within("registered again", async {
        loop {
            if let Some(epoch) = czxid().await {
                return epoch;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(second > first);
    within("the replica layer takes the new epoch", async {
        while broker.broker.replicas.cluster.broker_epoch() != second {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    broker.stop().await;
}

/// Commits `offset` for `group` until the answer is `want` (the coordinator may still be
/// loading, or be reached a moment after the state it is awaited in).
async fn commit_until(c: &mut common::Client, group: &str, offset: i64, want: i16) {
    loop {
        if c.commit_offset(group, "orders", offset, None).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A broker cut off from ZooKeeper past its session timeout has lost its leaderships at
/// the controller, which cannot tell it so: its group coordinator answers NOT_COORDINATOR
/// (a client retries it elsewhere) instead of serving from state another broker may have
/// moved on from, until the controller's LeaderAndIsr to its new registration says the
/// partition is still its own. The offsets committed before are still there after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_cut_off_from_zookeeper_steps_back_until_the_controller_speaks_again() {
    let Some(zk) = ZooKeeper::start() else { return };
    let proxy = Partition::start(&zk.connect).await;
    let dir = tempfile::tempdir().unwrap();
    let broker = behind(
        &proxy,
        dir.path(),
        &[
            ("offsets.topic.num.partitions", "1"),
            ("offsets.topic.replication.factor", "1"),
        ],
    )
    .await;
    let mut c = broker.client().await;
    within(
        "the topic created once this broker is the controller",
        async {
            while c.create_topic("orders", 1).await != 0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        },
    )
    .await;
    assert_eq!(c.create_topic("__consumer_offsets", 1).await, 0);
    within(
        "the group coordinator serves",
        commit_until(&mut c, "g", 7, 0),
    )
    .await;

    proxy.cut(true);
    let not_coordinator = kafka_protocol::error::ResponseError::NotCoordinator.code();
    within(
        "NOT_COORDINATOR once the session is lost",
        commit_until(&mut c, "g", 8, not_coordinator),
    )
    .await;
    assert_eq!(c.committed_offsets("g").await, (not_coordinator, vec![]));
    proxy.cut(false);
    within(
        "the coordinator serves again after the controller's LeaderAndIsr",
        commit_until(&mut c, "g", 9, 0),
    )
    .await;
    assert_eq!(c.committed_offsets("g").await, (0, vec![9]));
    broker.stop().await;
}

/// A broker reaching ZooKeeper through `proxy`, with a 2 s session timeout.
async fn behind(
    proxy: &Partition,
    dir: &std::path::Path,
    extra: &[(&str, &str)],
) -> common::TestBroker {
    let connect = proxy.addr.to_string();
    let mut config = vec![
        ("zookeeper.connect", connect.as_str()),
        ("zookeeper.session.timeout.ms", "2000"),
    ];
    config.extend_from_slice(extra);
    common::TestBroker::start(dir, &config).await
}

/// A TCP proxy to one ZooKeeper server that can cut every connection and refuse new ones.
struct Partition {
    addr: std::net::SocketAddr,
    cut: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Partition {
    async fn start(upstream: &str) -> Partition {
        let upstream = upstream.to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, watch) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if *watch.borrow() {
                    continue; // dropped: refused
                }
                let upstream = upstream.clone();
                let mut watch = watch.clone();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = watch.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Partition { addr, cut, task }
    }

    fn cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A session outlives its ensemble's loss of quorum, as with ZooKeeper's Java client (and
/// so Kafka's brokers): two of three servers killed for longer than 1.4 times the session
/// timeout, then restarted. The session reconnects without ever being reported expired
/// and its ephemeral znode is still there. zookeeper-client 0.11.2 declared the session
/// expired by itself after 1.4 timeouts without a server; every broker of a cluster then
/// registered again at once, and the first back, elected controller while it saw no other
/// broker, emptied every ISR but itself (acknowledged records lost under
/// `scripts/faults --nemesis all`; vendor/zookeeper-client/PATCHES.md).
#[tokio::test]
async fn a_session_outlives_its_ensembles_loss_of_quorum() {
    let Some(zk) = ZooKeeper::start_ensemble(3) else {
        return;
    };
    let session = ZkSession::connect(&zk.config("")).await.unwrap();
    let mut events = session.events();
    let stat = session.create_ephemeral("/alive", b"1").await.unwrap();
    assert_eq!(stat.ephemeral_owner, session.session_id());

    zk.kill(2);
    zk.kill(3);
    // Past the session timeout (6 s) and 1.4 times it (8.4 s) with no server serving.
    tokio::time::sleep(Duration::from_secs(11)).await;
    zk.restart(2);
    zk.restart(3);

    within("the session reconnects", async {
        let mut disconnected = false;
        loop {
            match events.next().await {
                SessionEvent::Reconnected if disconnected => break,
                SessionEvent::Reconnected => {}
                SessionEvent::Disconnected => disconnected = true,
                terminal => panic!("the session ended: {terminal:?}"),
            }
        }
    })
    .await;
    let (_, seen) = within("the znode is read", session.get("/alive"))
        .await
        .unwrap()
        .expect("the ephemeral znode survives with its session");
    assert_eq!(seen.ephemeral_owner, session.session_id());
}
