//! Replication at an old `inter.broker.protocol.version` (2.6, as during a rolling upgrade
//! from Kafka 2.6), on real clusters (`scripts/cluster`: ZooKeeper 3.8 and three brokers on
//! loopback): three skua brokers, and two skua brokers with Apache Kafka 3.9.1 (started
//! first, so it is the controller). At 2.6 followers send Fetch v11, whose answers never
//! say where a follower's log diverged, so a follower truncates with OffsetForLeaderEpoch
//! v3 before it fetches, on becoming a follower and after every leader change. At 2.0
//! (Apache Kafka 3.9.1 as broker 1 with two skua brokers) they send Fetch v8 and
//! OffsetForLeaderEpoch v1.
//!
//! The scenario: topic `diverge` (replicas 1, 3, 2) and topic `handover` (1, 2, 3) are led
//! by broker 1. Cut off from both followers, broker 1 takes records with acks=1 that nobody
//! else has and is killed; broker 3 takes over `diverge` and broker 2 `handover`, both take
//! more records, and broker 1 comes back with a divergent tail. Every replica must end
//! with the same segment bytes. A recording proxy (`protocol-tests/capture.py`) in front of
//! each broker keeps every Fetch and OffsetForLeaderEpoch it was sent: the followers'
//! versions are the protocol's, and the returning broker asked its new leader where its
//! epoch ends.
//! Skipped, with a message, only when java is not installed.

use crate::common;

use std::collections::BTreeSet;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::cluster::{eventually, rt, Cluster, ONE_AT_A_TIME};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;
use kafka_protocol::records::Compression;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `capture.py` in front of one broker, keeping every Fetch and OffsetForLeaderEpoch, and
/// every LeaderAndIsr, StopReplica and UpdateMetadata.
struct Recorder {
    child: Child,
    listen: u16,
    upstream: u16,
    out: tempfile::TempDir,
}

/// One recorded request: who sent it (its client id), the API and the version.
#[derive(Debug)]
struct Recorded {
    client_id: String,
    api_key: ApiKey,
    version: i16,
    file: PathBuf,
}

impl Recorder {
    fn start(listen: u16, upstream: u16) -> Recorder {
        let out = tempfile::tempdir().unwrap();
        let child = Recorder::spawn(listen, upstream, out.path());
        Recorder {
            child,
            listen,
            upstream,
            out,
        }
    }

    /// `capture.py` appending to the records in `out`, once it listens.
    fn spawn(listen: u16, upstream: u16, out: &Path) -> Child {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol-tests/capture.py");
        let child = Command::new("python3")
            .arg(script)
            .args(["--listen", &format!("127.0.0.1:{listen}")])
            .args(["--upstream", &format!("127.0.0.1:{upstream}")])
            .args([
                "--client",
                "recorded",
                "--apis",
                "1,23,4,5,6",
                "--no-responses",
            ])
            .args(["--max-per-version", "1000000", "--out"])
            .arg(out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs capture.py");
        eventually(
            &format!("capture.py listens on {listen}"),
            Duration::from_secs(60),
            || TcpStream::connect(("127.0.0.1", listen)).ok().map(drop),
        );
        child
    }

    /// Stops the proxy, closing every connection through it: what the broker behind it
    /// answers from now on reaches no one.
    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// A proxy on the same port again, adding to the same records.
    fn start_again(&mut self) {
        self.child = Recorder::spawn(self.listen, self.upstream, self.out.path());
    }

    fn requests(&self) -> Vec<Recorded> {
        let manifest =
            std::fs::read_to_string(self.out.path().join("MANIFEST.tsv")).unwrap_or_default();
        manifest
            .lines()
            .skip(1)
            .filter_map(|line| {
                let cols: Vec<&str> = line.split('\t').collect();
                let api_key = ApiKey::try_from(cols.get(3)?.parse::<i16>().ok()?).ok()?;
                let version: i16 = cols.get(5)?.parse().ok()?;
                let file = self.out.path().join(cols.get(6)?);
                let mut frame = Bytes::from(std::fs::read(&file).ok()?);
                let header =
                    RequestHeader::decode(&mut frame, api_key.request_header_version(version))
                        .ok()?;
                Some(Recorded {
                    client_id: header.client_id.map(|s| s.to_string()).unwrap_or_default(),
                    api_key,
                    version,
                    file,
                })
            })
            .collect()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A cluster whose brokers advertise a recorder in front of each of them.
struct Recorded3 {
    c: Cluster,
    listen: Vec<u16>,
    recorders: Vec<Recorder>,
}

impl Recorded3 {
    /// Brokers `skua` are skua's, the others Kafka 3.9.1's, all at `ibp`.
    fn start(skua: &str, ibp: &str, extra: &[&str]) -> Option<Recorded3> {
        let listen: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let advertised: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let recorders: Vec<Recorder> = (0..3)
            .map(|i| Recorder::start(advertised[i], listen[i]))
            .collect();
        let csv = |ports: &[u16]| {
            ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let (listen_csv, advertised_csv) = (csv(&listen), csv(&advertised));
        let ibp = format!("inter.broker.protocol.version={ibp}");
        let mut args = vec![
            "--ports",
            &listen_csv,
            "--advertised-ports",
            &advertised_csv,
            "--override",
            &ibp,
        ];
        args.extend_from_slice(extra);
        let c = Cluster::start_kinds(skua, &args)?;
        Some(Recorded3 {
            c,
            listen,
            recorders,
        })
    }

    /// Broker `b`'s own address (not its recorder's).
    fn addr(&self, b: usize) -> std::net::SocketAddr {
        format!("127.0.0.1:{}", self.listen[b - 1]).parse().unwrap()
    }

    /// What broker `b` was sent by broker `from`'s replica fetchers (skua's and Kafka's
    /// fetchers both name themselves `broker-<id>-fetcher-...`).
    fn sent_by_fetchers_of(&self, b: usize, from: usize) -> Vec<Recorded> {
        let prefix = format!("broker-{from}-fetcher");
        self.recorders[b - 1]
            .requests()
            .into_iter()
            .filter(|r| r.client_id.starts_with(&prefix))
            .collect()
    }

    /// The (API, version)s broker `b` was sent by controller `controller` (Kafka's and
    /// skua's controllers name themselves by their broker id).
    fn sent_by_controller(&self, b: usize, controller: i32) -> BTreeSet<(i16, i16)> {
        self.recorders[b - 1]
            .requests()
            .into_iter()
            .filter(|r| r.client_id == controller.to_string())
            .filter(|r| {
                matches!(
                    r.api_key,
                    ApiKey::LeaderAndIsr | ApiKey::UpdateMetadata | ApiKey::StopReplica
                )
            })
            .map(|r| (r.api_key as i16, r.version))
            .collect()
    }

    fn create(&self, topic: &str, assignment: &str) {
        let out = self.c.run(
            "topics",
            &[
                "--create",
                "--topic",
                topic,
                "--replica-assignment",
                assignment,
            ],
        );
        assert!(
            out.status.success(),
            "kafka-topics.sh --create {topic}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Produces one batch of `values` to `topic`-0 on broker `b` until it is accepted.
    fn produce(&self, b: usize, topic: &str, values: &[String], acks: i16) -> i64 {
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        let records = common::batch(&refs, None, Compression::None);
        eventually(
            &format!("broker {b} takes {} records of {topic}", values.len()),
            Duration::from_secs(60),
            || {
                let (error, offset) = rt().block_on(async {
                    let mut client = common::Client::connect(self.addr(b)).await;
                    client.produce(topic, 0, records.clone(), acks).await
                });
                (error == 0).then_some(offset)
            },
        )
    }

    /// `topic`-0's segment bytes on broker `b`.
    fn segment(&self, b: usize, topic: &str) -> Vec<u8> {
        let path = self.c.dir.path().join(format!(
            "broker-{b}/data/{topic}-0/00000000000000000000.log"
        ));
        std::fs::read(path).unwrap_or_default()
    }

    /// Waits until `topic`-0 is led by `leader` with every replica in the ISR and the same
    /// segment bytes on all three.
    fn in_sync_alike(&self, topic: &str, leader: i32) {
        let zk = self.c.zk_session();
        let limit = Duration::from_secs(90);
        let start = Instant::now();
        loop {
            let state = self.c.partition_state(&zk, topic, 0);
            let segments: Vec<Vec<u8>> = (1..=3).map(|b| self.segment(b, topic)).collect();
            let alike = !segments[0].is_empty() && segments.iter().all(|s| *s == segments[0]);
            if alike
                && state
                    .as_ref()
                    .is_some_and(|s| s.leader == leader && s.isr.len() == 3)
            {
                return;
            }
            // What was last seen, for when it never comes.
            let sizes: Vec<usize> = segments.iter().map(Vec::len).collect();
            assert!(
                start.elapsed() < limit,
                "{topic}: led by {leader}, every replica in the ISR with the same bytes within \
                 {limit:?}; last seen {state:?}, segment sizes on brokers 1-3 {sizes:?}"
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    fn wait_leader(&self, topic: &str, leader: i32) -> i32 {
        let zk = self.c.zk_session();
        eventually(
            &format!("{topic} led by {leader}"),
            Duration::from_secs(60),
            || {
                let state = self.c.partition_state(&zk, topic, 0)?;
                (state.leader == leader).then_some(state.leader_epoch)
            },
        )
    }
}

fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// The versions followers send at an inter-broker protocol version: (Fetch,
/// OffsetForLeaderEpoch), as Kafka 3.9 picks them.
const AT_2_6: (i16, i16) = (11, 3);
const AT_2_0: (i16, i16) = (8, 1);

/// The scenario of this file's doc comment on a started cluster whose followers send
/// `versions` (Fetch, OffsetForLeaderEpoch).
fn a_returning_leader_truncates_its_divergent_tail(r: &mut Recorded3, versions: (i16, i16)) {
    let (fetch_version, epoch_version) = versions;
    r.create("diverge", "1:3:2");
    r.create("handover", "1:2:3");
    for topic in ["diverge", "handover"] {
        r.wait_leader(topic, 1);
        r.produce(1, topic, &values("committed", 20), -1);
        r.in_sync_alike(topic, 1);
    }

    // Broker 1 cut off from both followers, which reach it only at its recorder's address:
    // with the recorder stopped, no fetch they left waiting at broker 1 can be answered
    // with what it takes next. Broker 1 alone takes records, then dies with them.
    r.recorders[0].stop();
    let lost = r.produce(1, "diverge", &values("lost", 5), 1);
    assert_eq!(lost, 20, "the lost records follow the committed ones");
    r.c.signal("kill", 1);
    r.recorders[0].start_again();

    // The new leaders write past broker 1's log end: fetching from there would find
    // records, so only the epochs tell that broker 1's offsets 20..25 are not theirs.
    let diverge_epoch = r.wait_leader("diverge", 3);
    let handover_epoch = r.wait_leader("handover", 2);
    assert_eq!(r.produce(3, "diverge", &values("kept", 10), -1), 20);
    r.produce(3, "diverge", &values("more", 10), -1);
    r.produce(2, "handover", &values("kept", 10), -1);

    r.c.signal("restart", 1);
    r.in_sync_alike("diverge", 3);
    r.in_sync_alike("handover", 2);
    let zk = r.c.zk_session();
    for (topic, epoch) in [("diverge", diverge_epoch), ("handover", handover_epoch)] {
        let state = r.c.partition_state(&zk, topic, 0).unwrap();
        assert_eq!(
            state.leader_epoch, epoch,
            "{topic}: no further leader change"
        );
    }

    // Broker 1 asked broker 3 where its epoch of `diverge` ends, then fetched.
    let asked = r.sent_by_fetchers_of(3, 1);
    let sent = |api: ApiKey| -> BTreeSet<i16> {
        asked
            .iter()
            .filter(|q| q.api_key == api)
            .map(|q| q.version)
            .collect()
    };
    assert_eq!(
        sent(ApiKey::OffsetForLeaderEpoch),
        BTreeSet::from([epoch_version]),
        "broker 1 at its new leader: {asked:?}"
    );
    assert_eq!(sent(ApiKey::Fetch), BTreeSet::from([fetch_version]));
    let epoch_query = asked
        .iter()
        .find(|q| q.api_key == ApiKey::OffsetForLeaderEpoch)
        .unwrap();
    let mut frame = Bytes::from(std::fs::read(&epoch_query.file).unwrap());
    RequestHeader::decode(
        &mut frame,
        ApiKey::OffsetForLeaderEpoch.request_header_version(epoch_version),
    )
    .unwrap();
    let request =
        kafka_protocol::messages::OffsetForLeaderEpochRequest::decode(&mut frame, epoch_version)
            .unwrap();
    // Only v3 names the replica, and v2 the epoch the asker knows its leader by.
    if epoch_version >= 3 {
        assert_eq!(request.replica_id.0, 1, "asked as replica 1");
    }
    let p = request
        .topics
        .iter()
        .filter(|t| t.topic.0.as_str() == "diverge")
        .flat_map(|t| &t.partitions)
        .next()
        .expect("diverge asked about");
    if epoch_version >= 2 {
        assert_eq!(p.current_leader_epoch, diverge_epoch);
    }
    assert!(p.leader_epoch < diverge_epoch, "its own last epoch");

    // Every follower, of either kind, at either leader, spoke the protocol's versions.
    for b in 1..=3 {
        for from in (1..=3).filter(|&f| f != b) {
            for q in r.sent_by_fetchers_of(b, from) {
                let want = match q.api_key {
                    ApiKey::Fetch => fetch_version,
                    _ => epoch_version,
                };
                assert_eq!(q.version, want, "broker {from} to broker {b}: {q:?}");
            }
        }
    }
    // Broker 3 followed broker 2 through the leader change of `handover`.
    let handover_follower = r.sent_by_fetchers_of(2, 3);
    assert!(
        handover_follower
            .iter()
            .any(|q| q.api_key == ApiKey::OffsetForLeaderEpoch),
        "broker 3 asked its new leader: {handover_follower:?}"
    );
}

/// Three skua brokers at inter.broker.protocol.version=2.6.
#[test]
fn skua_followers_at_ibp_2_6_truncate_with_offset_for_leader_epoch() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut r) = Recorded3::start("1,2,3", "2.6", &[]) else {
        return;
    };
    a_returning_leader_truncates_its_divergent_tail(&mut r, AT_2_6);
    assert!(
        r.c.log(1).contains("truncating a divergent tail"),
        "broker 1 cut its tail"
    );
}

/// skua brokers 1 and 2 with Apache Kafka 3.9.1 as broker 3 (the controller), all at
/// inter.broker.protocol.version=2.6: skua follows a skua leader and then the Kafka
/// leader, and cuts its divergent tail at the Kafka leader's word; Kafka follows skua
/// leaders through a leader change.
#[test]
fn skua_and_kafka_at_ibp_2_6_follow_each_other_through_a_leader_change() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut r) = Recorded3::start("1,2", "2.6", &["--kafka-first"]) else {
        return;
    };
    a_returning_leader_truncates_its_divergent_tail(&mut r, AT_2_6);
    assert!(
        r.c.log(1).contains("truncating a divergent tail"),
        "broker 1 cut its tail"
    );
}

/// Apache Kafka 3.9.1 as broker 1 with skua brokers 2 and 3 (one of them the controller),
/// all at inter.broker.protocol.version=2.0, where followers ask OffsetForLeaderEpoch v1
/// (no replica id, no current leader epoch to be fenced by) and fetch with v8. Kafka,
/// killed with a tail only it has, comes back as follower of the skua leaders,
/// asks them where its epoch ends, and cuts its tail: every replica ends with the same
/// segment bytes.
#[test]
fn kafka_at_ibp_2_0_truncates_at_a_skua_leaders_word() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut r) = Recorded3::start("2,3", "2.0", &[]) else {
        return;
    };
    a_returning_leader_truncates_its_divergent_tail(&mut r, AT_2_0);
    assert!(
        r.c.log(1).contains("Truncating partition diverge-0")
            || r.c.log(1).contains("Truncating to offset 20"),
        "Kafka broker 1 cut its tail:\n{}",
        r.c.log(1)
    );
}

/// The ISR of `topic`-0 as broker `b`'s Metadata answer gives it.
fn metadata_isr(r: &Recorded3, b: usize, topic: &str) -> Option<Vec<i32>> {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{MetadataRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let req = MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(topic.to_string()))))]));
    let resp = rt().block_on(async {
        let mut client = common::Client::connect(r.addr(b)).await;
        client.send(&req, 9).await
    });
    let partition = resp.topics.first()?.partitions.first()?;
    Some(partition.isr_nodes.iter().map(|id| id.0).collect())
}

/// skua brokers 1 and 2 (started first, so one of them is the controller) with Apache
/// Kafka 3.9.1 as broker 3, at inter.broker.protocol.version=2.6. There a Kafka leader has
/// no AlterPartition: when its follower stops fetching, it writes the shrunk ISR into the
/// partition's state znode itself and posts `/isr_change_notification/isr_change_<seq>`.
/// The skua controller reads the notification, tells every broker with UpdateMetadata and
/// deletes it, so Metadata shows the ISR Kafka wrote. (The follower's ZooKeeper session
/// is made long, so the controller does not learn of it by the follower's expiry instead.)
#[test]
fn a_skua_controller_tells_brokers_of_an_isr_a_kafka_leader_wrote_to_zookeeper() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let extra = [
        "--override",
        "replica.lag.time.max.ms=3000",
        "--override",
        "zookeeper.session.timeout.ms=120000",
    ];
    let Some(r) = Recorded3::start("1,2", "2.6", &extra) else {
        return;
    };
    let zk = r.c.zk_session();
    let controller = r.c.zk_controller(&zk);
    assert!(
        controller == 1 || controller == 2,
        "a skua broker is the controller, not {controller}"
    );
    let follower = 3 - controller as usize;
    r.create("shrink", &format!("3:{follower}"));
    r.produce(3, "shrink", &values("in-sync", 3), -1);
    eventually(
        "Metadata shows both replicas in the ISR",
        Duration::from_secs(60),
        || (metadata_isr(&r, controller as usize, "shrink")?.len() == 2).then_some(()),
    );

    r.c.signal("pause", follower);
    // A follower whose log ends where the leader's does stays in sync however long it is
    // silent (Kafka's `Replica.isCaughtUp`): the leader needs records it lacks.
    r.produce(3, "shrink", &values("out-of-sync", 3), 1);
    eventually(
        "Kafka's leader writes the shrunk ISR to ZooKeeper",
        Duration::from_secs(60),
        || (r.c.partition_state(&zk, "shrink", 0)?.isr == vec![3]).then_some(()),
    );
    // Well within the paused follower's session (40 s, ZooKeeper's maximum here), whose
    // expiry would also take it out of the ISR.
    eventually(
        "the skua controller's brokers learn the ISR Kafka wrote",
        Duration::from_secs(25),
        || (metadata_isr(&r, controller as usize, "shrink")? == vec![3]).then_some(()),
    );
    eventually(
        "the notification is deleted",
        Duration::from_secs(30),
        || {
            let left = rt()
                .block_on(zk.children("/isr_change_notification"))
                .unwrap()
                .unwrap_or_default();
            left.is_empty().then_some(())
        },
    );
    assert!(
        r.c.log(controller as usize)
            .contains("ISR changes written by their leaders"),
        "the controller read the notification"
    );
    r.c.signal("resume", follower);
    // The skua controller spoke 2.6's versions to every broker, Kafka's included, as
    // Kafka 3.9's controller does at 2.6 (LeaderAndIsr v4, UpdateMetadata v6), with
    // LeaderAndIsr to the two replicas of `shrink`.
    for b in 1..=3 {
        let sent = r.sent_by_controller(b, controller);
        assert!(
            sent.contains(&(ApiKey::UpdateMetadata as i16, 6)),
            "broker {b} was sent UpdateMetadata v6: {sent:?}"
        );
        if b == 3 || b == follower {
            assert!(
                sent.contains(&(ApiKey::LeaderAndIsr as i16, 4)),
                "broker {b} was sent LeaderAndIsr v4: {sent:?}"
            );
        }
        assert!(
            sent.iter().all(|&(key, v)| match ApiKey::try_from(key) {
                Ok(ApiKey::LeaderAndIsr) => v == 4,
                Ok(ApiKey::UpdateMetadata) => v == 6,
                _ => v == 3,
            }),
            "broker {b} was sent nothing newer than 2.6's: {sent:?}"
        );
    }
}
