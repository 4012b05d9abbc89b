//! skua brokers under a quorum of three Apache Kafka 4.4 controllers whose active one is
//! killed (long form, `SKUA_KRAFT_QUORUM=1`: the three controllers alone take about 25 s to
//! start). A producer with acks=all keeps being acknowledged through the kill; once the
//! quorum elected another leader, skua's metadata fetches, heartbeats, forwarded requests,
//! AlterPartition, controlled shutdown and registration all reach it.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::{
    describe_quorum_request as dq, CreateTopicsRequest, DescribeClusterRequest,
    DescribeQuorumRequest, TopicName,
};
use kafka_protocol::records::Compression;

use crate::common::cluster::ONE_AT_A_TIME;
use crate::common::{batch, values, Client};
use crate::kraft_broker::{
    format_dirs_for, free_port, s, script, wait_topic_isrs, write_properties_with_dirs, Skua,
};
use crate::kraft_controller::{metadata_in, FORMAT_FEATURES};

/// The voters' node ids: 3000, 3001, 3002.
const FIRST_VOTER: i32 = 3000;
const VOTERS: i32 = 3;
const SESSION_TIMEOUT: Duration = Duration::from_secs(3);

/// Three Kafka controllers, a static quorum (`controller.quorum.voters`); stopped when
/// dropped.
struct Quorum {
    dirs: Vec<tempfile::TempDir>,
    voters: String,
    cluster_id: String,
}

impl Quorum {
    /// `None` (with a message) only when java is not installed.
    fn start() -> Option<Quorum> {
        if java_missing() {
            return None;
        }
        let cluster_id = skua::log::uuid_to_kafka_string(skua::log::new_kafka_uuid());
        let ports: Vec<u16> = (0..VOTERS).map(|_| free_port()).collect();
        let voters = ports
            .iter()
            .enumerate()
            .map(|(k, p)| format!("{}@127.0.0.1:{p}", FIRST_VOTER + k as i32))
            .collect::<Vec<_>>()
            .join(",");
        let mut quorum = Quorum {
            dirs: Vec::new(),
            voters,
            cluster_id,
        };
        for (k, port) in ports.iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let mut command = Command::new(script());
            command
                .args(["--port", &port.to_string(), "--dir"])
                .arg(dir.path())
                .args(["--node-id", &(FIRST_VOTER + k as i32).to_string()])
                .args(["--voters", &quorum.voters])
                .args(["--cluster-id", &quorum.cluster_id])
                .args([
                    "--set",
                    &format!("broker.session.timeout.ms={}", SESSION_TIMEOUT.as_millis()),
                ]);
            for f in FORMAT_FEATURES {
                command.args(["--feature", f]);
            }
            let out = command.output().unwrap();
            quorum.dirs.push(dir);
            assert!(
                out.status.success(),
                "controller {k}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Some(quorum)
    }

    fn dir(&self, node_id: i32) -> &Path {
        self.dirs[(node_id - FIRST_VOTER) as usize].path()
    }

    /// SIGKILL of controller `node_id` (the process its start wrote in `kafka.pid`), once
    /// it is gone.
    fn kill(&self, node_id: i32) {
        kill_controller(self.dir(node_id));
    }

    fn log(&self, node_id: i32) -> String {
        std::fs::read_to_string(self.dir(node_id).join("server.log")).unwrap_or_default()
    }
}

impl Drop for Quorum {
    fn drop(&mut self) {
        for d in &self.dirs {
            let _ = Command::new(script()).arg("--stop").arg(d.path()).output();
        }
    }
}

#[test]
fn skua_brokers_follow_the_new_active_controller_after_the_old_one_is_killed() {
    if std::env::var_os("SKUA_KRAFT_QUORUM").is_none() {
        eprintln!("SKIPPED: set SKUA_KRAFT_QUORUM=1");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let Some(quorum) = Quorum::start() else {
        return;
    };
    eprintln!("three controllers started in {:?}", started.elapsed());
    let voters = format!("controller.quorum.voters={}", quorum.voters);
    let mut brokers = start_brokers(&voters, &quorum.cluster_id);
    let (addr1, addr2) = (brokers[0].addr, brokers[1].addr);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // A partition led by skua 1 and replicated to skua 2, and a producer with acks=all.
    let (old_leader, epochs_before) = rt.block_on(async {
        let mut c = Client::connect(addr1).await;
        replicated_topic(&mut c).await;
        let leader = quorum_leader(&mut c, -1).await;
        let image = metadata_in(quorum.dir(leader));
        let epochs: Vec<i64> = [1, 2]
            .iter()
            .map(|id| image.broker_epoch(*id).unwrap())
            .collect();
        (leader, epochs)
    });
    let stop = Arc::new(AtomicBool::new(false));
    let producer = rt.spawn(produce_until(addr1, stop.clone()));
    std::thread::sleep(Duration::from_secs(1));

    quorum.kill(old_leader);
    let killed = Instant::now();
    eprintln!("killed the active controller {old_leader}");
    let new_leader = rt.block_on(async {
        let mut c = Client::connect(addr1).await;
        let new_leader = quorum_leader(&mut c, old_leader).await;
        eprintln!(
            "skua names controller {new_leader} the leader {:?} after the kill",
            killed.elapsed()
        );
        // Forwarded: a topic created and a reassignment through skua, which the new
        // controller answers; skua 1, leading, adds skua 2 to the ISR with an
        // AlterPartition the new controller commits, ending the reassignment.
        let t = Instant::now();
        loop {
            let err = create(&mut c, "after", &[1]).await;
            if err == 0 {
                break;
            }
            assert!(t.elapsed() < Duration::from_secs(30), "CreateTopics: {err}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        wait_topic_isrs(
            &mut c,
            "after",
            vec![(0, 1, vec![1])],
            Duration::from_secs(20),
        )
        .await;
        let r = crate::kraft_broker::reassign(&mut c, "after", &[1, 2]).await;
        assert_eq!(r.error_code, 0, "{r:?}");
        assert_eq!(r.responses[0].partitions[0].error_code, 0, "{r:?}");
        wait_topic_isrs(
            &mut c,
            "after",
            vec![(0, 1, vec![1, 2])],
            Duration::from_secs(20),
        )
        .await;
        new_leader
    });
    assert_ne!(new_leader, old_leader);
    let committed = metadata_in(quorum.dir(new_leader));
    let after = committed.topic("after").unwrap();
    assert_eq!(after.partitions[0].state.isr, vec![1, 2], "{after:?}");
    assert_eq!(after.partitions[0].assignment.replicas, vec![1, 2]);

    // Heartbeats: well past the session timeout after the kill, both brokers are still
    // registered at the same epochs and unfenced in the new controller's metadata.
    let wait = (SESSION_TIMEOUT * 3).saturating_sub(killed.elapsed());
    std::thread::sleep(wait);
    let image = metadata_in(quorum.dir(new_leader));
    for (id, epoch) in [1, 2].iter().zip(&epochs_before) {
        let r = image.registration(*id).unwrap();
        assert_eq!((r.epoch, r.fenced), (*epoch, false), "broker {id}");
    }

    // Controlled shutdown and registration through the new controller: skua 2 stops and
    // comes back as a new incarnation, and skua 1 adds it back to the ISR.
    let (status, took) = brokers[1].skua.terminate();
    assert!(status.success(), "{status}");
    assert!(brokers[1].skua.log().contains("controlled shutdown done"));
    eprintln!("skua 2's controlled shutdown took {took:?}");
    let props2 = brokers[1].props.clone();
    brokers[1].skua = Skua::start(&props2, &brokers[1].dir.path().join("skua-2.log"));
    brokers[1].skua.wait_started();
    assert!(
        quorum
            .log(new_leader)
            .contains("Registering a new incarnation of broker 2"),
        "the new active controller registered skua 2 again"
    );
    rt.block_on(async {
        let mut c = Client::connect(addr2).await;
        wait_topic_isrs(
            &mut c,
            "acked",
            vec![(0, 1, vec![1, 2])],
            Duration::from_secs(30),
        )
        .await;
    });

    // The producer: acknowledged before and after the kill, each acknowledged value
    // stored once at its offset.
    stop.store(true, Ordering::Release);
    let acked = rt.block_on(producer).unwrap();
    let after_kill = acked.iter().filter(|a| a.at > killed).count();
    eprintln!(
        "{} writes acknowledged, {after_kill} after the kill",
        acked.len()
    );
    assert!(
        after_kill > 0 && acked.len() > after_kill,
        "{}",
        acked.len()
    );
    rt.block_on(each_acked_write_stored_once(addr1, &acked));
    eprintln!("the quorum scenario took {:?}", started.elapsed());
}

/// A skua broker of the test's cluster.
struct Broker {
    dir: tempfile::TempDir,
    props: std::path::PathBuf,
    skua: Skua,
    addr: SocketAddr,
}

/// skua brokers 1 and 2, their dirs formatted for `cluster_id`, `quorum` the line naming
/// the controllers; once both serve.
fn start_brokers(quorum: &str, cluster_id: &str) -> Vec<Broker> {
    let mut brokers: Vec<Broker> = [1, 2]
        .into_iter()
        .map(|id| {
            let dir = tempfile::tempdir().unwrap();
            let port = free_port();
            let props = write_properties_with_dirs(dir.path(), quorum, id, port, &["data"], &[]);
            format_dirs_for(&props, cluster_id);
            let skua = Skua::start(&props, &dir.path().join("skua.log"));
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            Broker {
                dir,
                props,
                skua,
                addr,
            }
        })
        .collect();
    for b in &mut brokers {
        b.skua.wait_started();
    }
    brokers
}

/// Once both brokers are in the cluster, topic `acked`: one partition led by skua 1 and
/// replicated to skua 2, created through `c`.
async fn replicated_topic(c: &mut Client) {
    let t = Instant::now();
    while c
        .send(&DescribeClusterRequest::default(), 0)
        .await
        .brokers
        .len()
        < 2
    {
        assert!(t.elapsed() < Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(create(c, "acked", &[1, 2]).await, 0);
    wait_topic_isrs(
        c,
        "acked",
        vec![(0, 1, vec![1, 2])],
        Duration::from_secs(20),
    )
    .await;
}

/// CreateTopics of `topic`, one partition on `replicas`, through `c`: its error code.
async fn create(c: &mut Client, topic: &str, replicas: &[i32]) -> i16 {
    let create = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(s(topic)))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(vec![CreatableReplicaAssignment::default()
                .with_partition_index(0)
                .with_broker_ids(
                    replicas.iter().map(|b| (*b).into()).collect(),
                )])])
        .with_timeout_ms(10_000);
    c.send(&create, 7).await.topics[0].error_code
}

/// The quorum's leader as DescribeQuorum through skua names it, once it is not `not`.
async fn quorum_leader(c: &mut Client, not: i32) -> i32 {
    let request = DescribeQuorumRequest::default().with_topics(vec![dq::TopicData::default()
        .with_topic_name(TopicName(s("__cluster_metadata")))
        .with_partitions(vec![dq::PartitionData::default().with_partition_index(0)])]);
    let t = Instant::now();
    loop {
        let r = c.send(&request, 2).await;
        let leader = r
            .topics
            .first()
            .and_then(|t| t.partitions.first())
            .filter(|p| r.error_code == 0 && p.error_code == 0)
            .map(|p| p.leader_id.0);
        if let Some(leader) = leader.filter(|l| *l >= FIRST_VOTER && *l != not) {
            return leader;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "{r:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every value in `acked` is stored once in `acked`-0, read through `addr`, at the offset
/// its acknowledgement gave.
async fn each_acked_write_stored_once(addr: SocketAddr, acked: &[Acked]) {
    let mut c = Client::connect(addr).await;
    let mut stored: Vec<(i64, String)> = Vec::new();
    loop {
        let next = stored.last().map_or(0, |(o, _)| o + 1);
        let fetched = c.fetch("acked", 0, next, 100, 1).await;
        let got = fetched.records.map(|r| values(&r)).unwrap_or_default();
        if got.is_empty() {
            break;
        }
        stored.extend(got);
    }
    for a in acked {
        let at: Vec<&(i64, String)> = stored.iter().filter(|(_, v)| *v == a.value).collect();
        assert_eq!(at.len(), 1, "{} stored {} times", a.value, at.len());
        assert_eq!(at[0].0, a.offset, "{}", a.value);
    }
}

/// One acknowledged write.
struct Acked {
    value: String,
    offset: i64,
    at: Instant,
}

/// Produces one value at a time with acks=all to `acked`-0 through `addr` until `stop`;
/// returns what was acknowledged.
async fn produce_until(addr: SocketAddr, stop: Arc<AtomicBool>) -> Vec<Acked> {
    let mut c = Client::connect(addr).await;
    let mut acked = Vec::new();
    let mut i = 0;
    while !stop.load(Ordering::Acquire) {
        let value = format!("v-{i}");
        i += 1;
        let (err, offset) = c
            .produce("acked", 0, batch(&[&value], None, Compression::None), -1)
            .await;
        if err == 0 {
            acked.push(Acked {
                value,
                offset,
                at: Instant::now(),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    acked
}

/// A dynamic quorum (KIP-853), as Kafka 4's `kafka-storage.sh format --standalone` makes
/// one: controller 3000 formatted as the quorum's only voter, later controllers formatted
/// with `--no-initial-controllers` and added as voters with `kafka-metadata-quorum.sh
/// add-controller`. Everyone (skua brokers too) finds the quorum through
/// `controller.quorum.bootstrap.servers`. Stopped when dropped.
struct DynamicQuorum {
    dirs: Vec<tempfile::TempDir>,
    ports: Vec<u16>,
    cluster_id: String,
}

impl DynamicQuorum {
    /// Controller 3000 alone, with ports kept for `VOTERS - 1` controllers to join.
    /// `None` (with a message) only when java is not installed.
    fn start_standalone() -> Option<DynamicQuorum> {
        if java_missing() {
            return None;
        }
        let mut quorum = DynamicQuorum {
            dirs: Vec::new(),
            ports: (0..VOTERS).map(|_| free_port()).collect(),
            cluster_id: String::new(),
        };
        quorum.cluster_id = quorum.start_controller(FIRST_VOTER, "--standalone");
        Some(quorum)
    }

    /// `controller.quorum.bootstrap.servers`: every controller's endpoint, joined or not.
    fn bootstrap(&self) -> String {
        self.ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Formats (`--standalone` or `--join`) and starts controller `node_id`; its
    /// cluster id.
    fn start_controller(&mut self, node_id: i32, mode: &str) -> String {
        let k = (node_id - FIRST_VOTER) as usize;
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(script());
        command
            .args(["--port", &self.ports[k].to_string(), "--dir"])
            .arg(dir.path())
            .args(["--node-id", &node_id.to_string()])
            .args(["--bootstrap-servers", &self.bootstrap(), mode])
            .args([
                "--set",
                &format!("broker.session.timeout.ms={}", SESSION_TIMEOUT.as_millis()),
            ]);
        if mode == "--join" {
            command.args(["--cluster-id", &self.cluster_id]);
        }
        for f in FORMAT_FEATURES {
            command.args(["--feature", f]);
        }
        let out = command.output().unwrap();
        self.dirs.push(dir);
        assert!(
            out.status.success(),
            "controller {node_id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    fn dir(&self, node_id: i32) -> &Path {
        self.dirs[(node_id - FIRST_VOTER) as usize].path()
    }

    /// The `directory.id` controller `node_id`'s metadata log dir was formatted with.
    fn directory_id(&self, node_id: i32) -> String {
        let meta = std::fs::read_to_string(self.dir(node_id).join("data/meta.properties")).unwrap();
        meta.lines()
            .find_map(|l| l.strip_prefix("directory.id="))
            .expect("a directory.id")
            .to_string()
    }

    /// Kafka's `kafka-metadata-quorum.sh --bootstrap-controller` at controller `at`, with
    /// `args`; retried for up to 60 s (a controller is added only once it has caught up
    /// with the leader's log, and the leader may be moving). Its output.
    fn quorum_tool(&self, at: i32, args: &[&str]) -> String {
        let server = format!("127.0.0.1:{}", self.ports[(at - FIRST_VOTER) as usize]);
        let t = Instant::now();
        loop {
            let out = Command::new(script())
                .args(["--tool", "org.apache.kafka.tools.MetadataQuorumCommand"])
                .args(["--bootstrap-controller", &server])
                .args(args)
                .output()
                .unwrap();
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            if out.status.success() {
                return text;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "kafka-metadata-quorum.sh {args:?}: {text}"
            );
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// Starts controller `node_id` as an observer and adds it to the voters.
    fn join(&mut self, node_id: i32) {
        self.start_controller(node_id, "--join");
        let config = self.dir(node_id).join("controller.properties");
        self.quorum_tool(
            FIRST_VOTER,
            &[
                "--command-config",
                config.to_str().unwrap(),
                "add-controller",
            ],
        );
    }

    /// SIGKILL of controller `node_id`, once it is gone.
    fn kill(&self, node_id: i32) {
        kill_controller(self.dir(node_id));
    }

    /// The lines of every controller's log where it fenced a broker whose session timed
    /// out.
    fn session_fencings(&self) -> Vec<String> {
        self.dirs
            .iter()
            .flat_map(|d| {
                let log = std::fs::read_to_string(d.path().join("server.log")).unwrap_or_default();
                log.lines()
                    .filter(|l| l.contains("because its session has timed out"))
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

impl Drop for DynamicQuorum {
    fn drop(&mut self) {
        for d in &self.dirs {
            let _ = Command::new(script()).arg("--stop").arg(d.path()).output();
        }
    }
}

/// Whether java is missing (said once, as the test's reason to skip): no Kafka controller
/// can start without it.
fn java_missing() -> bool {
    let missing = Command::new("java").arg("-version").output().is_err();
    if missing {
        eprintln!("SKIPPED: java is not installed, so no Kafka controller can start");
    }
    missing
}

/// SIGKILL of the controller `compat/kafka-controller.sh` started in `dir`, once it is gone.
fn kill_controller(dir: &Path) {
    let pid: i32 = std::fs::read_to_string(dir.join("kafka.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill(2) on the pid of a controller this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let t = Instant::now();
    // SAFETY: signal 0 only asks whether the process still exists.
    while unsafe { libc::kill(pid, 0) } == 0 {
        assert!(t.elapsed() < Duration::from_secs(10), "{pid} still runs");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The quorum's voters as DescribeQuorum through skua names them, sorted.
async fn quorum_voters(c: &mut Client) -> Vec<i32> {
    let request = DescribeQuorumRequest::default().with_topics(vec![dq::TopicData::default()
        .with_topic_name(TopicName(s("__cluster_metadata")))
        .with_partitions(vec![dq::PartitionData::default().with_partition_index(0)])]);
    let r = c.send(&request, 2).await;
    let mut voters: Vec<i32> = r
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .map(|p| p.current_voters.iter().map(|v| v.replica_id.0).collect())
        .unwrap_or_default();
    voters.sort_unstable();
    voters
}

/// Waits until DescribeQuorum through skua names exactly `voters`.
async fn wait_voters(c: &mut Client, voters: &[i32]) {
    let t = Instant::now();
    loop {
        let now = quorum_voters(c).await;
        if now == voters {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "voters {now:?}, not {voters:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Kafka 4's default quorum, a dynamic one (KIP-853): skua brokers register with a
/// controller formatted `--standalone` (its log opens with KRaft's VotersRecord and
/// KRaftVersionRecord, kraft.version 1), are unfenced, and replicate a topic written with
/// acks=all. With `SKUA_KRAFT_QUORUM=1` the quorum then changes under the producer: two
/// controllers join with `kafka-metadata-quorum.sh add-controller`, the first is removed
/// with `remove-controller` and killed, and skua follows the new leader (found through its
/// bootstrap servers and the leaders' endpoints) with no broker fenced on the way: forwarded CreateTopics, heartbeats
/// keeping both registrations at their epochs, every acknowledged write stored once.
#[test]
fn skua_brokers_follow_a_dynamic_quorum_as_controllers_join_and_the_first_leaves() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    let Some(mut quorum) = DynamicQuorum::start_standalone() else {
        return;
    };
    eprintln!(
        "the standalone controller started in {:?}",
        started.elapsed()
    );
    let bootstrap = format!("controller.quorum.bootstrap.servers={}", quorum.bootstrap());
    let brokers = start_brokers(&bootstrap, &quorum.cluster_id);
    let addr1 = brokers[0].addr;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let epochs_before = rt.block_on(async {
        let mut c = Client::connect(addr1).await;
        wait_voters(&mut c, &[FIRST_VOTER]).await;
        replicated_topic(&mut c).await;
        let image = metadata_in(quorum.dir(FIRST_VOTER));
        [1, 2]
            .iter()
            .map(|id| {
                let r = image.registration(*id).unwrap();
                assert!(!r.fenced, "broker {id} unfenced: {r:?}");
                r.epoch
            })
            .collect::<Vec<i64>>()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let producer = rt.spawn(produce_until(addr1, stop.clone()));
    std::thread::sleep(Duration::from_secs(1));

    let long = std::env::var_os("SKUA_KRAFT_QUORUM").is_some();
    let mut killed = None;
    if long {
        // Two controllers join; then the first, the leader, leaves and is killed.
        for id in [FIRST_VOTER + 1, FIRST_VOTER + 2] {
            quorum.join(id);
            rt.block_on(async {
                let mut c = Client::connect(addr1).await;
                let voters: Vec<i32> = (FIRST_VOTER..=id).collect();
                wait_voters(&mut c, &voters).await;
            });
            eprintln!(
                "controller {id} joined the voters at {:?}",
                started.elapsed()
            );
        }
        let directory = quorum.directory_id(FIRST_VOTER);
        quorum.quorum_tool(
            FIRST_VOTER + 1,
            &[
                "remove-controller",
                "--controller-id",
                &FIRST_VOTER.to_string(),
                "--controller-directory-id",
                &directory,
            ],
        );
        quorum.kill(FIRST_VOTER);
        killed = Some(Instant::now());
        eprintln!("controller {FIRST_VOTER} removed and killed");
        let new_leader = rt.block_on(async {
            let mut c = Client::connect(addr1).await;
            wait_voters(&mut c, &[FIRST_VOTER + 1, FIRST_VOTER + 2]).await;
            let leader = quorum_leader(&mut c, FIRST_VOTER).await;
            let t = Instant::now();
            loop {
                let err = create(&mut c, "after", &[2, 1]).await;
                if err == 0 {
                    break;
                }
                assert!(t.elapsed() < Duration::from_secs(30), "CreateTopics: {err}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            wait_topic_isrs(
                &mut c,
                "after",
                vec![(0, 2, vec![1, 2])],
                Duration::from_secs(20),
            )
            .await;
            leader
        });
        // Well past the session timeout, both brokers are still registered at the same
        // epochs and unfenced in the new leader's metadata: their heartbeats reach it.
        std::thread::sleep((SESSION_TIMEOUT * 3).saturating_sub(killed.unwrap().elapsed()));
        let image = metadata_in(quorum.dir(new_leader));
        for (id, epoch) in [1, 2].iter().zip(&epochs_before) {
            let r = image.registration(*id).unwrap();
            assert_eq!((r.epoch, r.fenced), (*epoch, false), "broker {id}");
        }
        assert!(image.topic("after").is_some());
        // Their heartbeats reached each new leader within its session timeout: none fenced
        // them, so the partitions they led stayed theirs.
        let fencings = quorum.session_fencings();
        if !fencings.is_empty() {
            for b in &brokers {
                let log = b.skua.log();
                let lifecycle: Vec<&str> = log
                    .lines()
                    .filter(|l| l.contains("kraft") || l.contains("controller"))
                    .collect();
                eprintln!(
                    "--- skua {}'s lifecycle ---\n{}",
                    b.addr,
                    lifecycle.join("\n")
                );
            }
        }
        assert!(fencings.is_empty(), "{fencings:#?}");
    }

    stop.store(true, Ordering::Release);
    let acked = rt.block_on(producer).unwrap();
    let after_kill = killed.map_or(acked.len(), |k| acked.iter().filter(|a| a.at > k).count());
    eprintln!(
        "{} writes acknowledged, {after_kill} after the quorum changed",
        acked.len()
    );
    assert!(after_kill > 0, "{}", acked.len());
    rt.block_on(async {
        let mut c = Client::connect(brokers[1].addr).await;
        wait_topic_isrs(
            &mut c,
            "acked",
            vec![(0, 1, vec![1, 2])],
            Duration::from_secs(20),
        )
        .await;
        each_acked_write_stored_once(addr1, &acked).await;
    });
    eprintln!("the dynamic quorum scenario took {:?}", started.elapsed());
}
