//! skua as the controller of a ZooKeeper-mode cluster of Apache Kafka 3.9.1 brokers
//! (`scripts/cluster start 3 --skua 1`: ZooKeeper 3.8, skua as broker 1, Kafka as 2 and 3),
//! driven with Kafka's own tools. Each test starts its cluster on free loopback ports and
//! stops it at the end; they run one at a time. Skipped, with a message, only when java
//! is not installed. `SKUA_CLUSTER_LONG=1` adds the long scenarios (topic deletion,
//! partition additions, repeated failovers).
//!
//! skua hosts the replicas the controller assigns it (LeaderAndIsr), answers Metadata
//! from its UpdateMetadata cache, deletes logs on StopReplica, and replicates with Kafka
//! brokers in both directions (`skua_and_kafka_replicate_each_other`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;

use common::cluster::{eventually, script, Cluster, ONE_AT_A_TIME, SESSION_TIMEOUT_MS};
use skua::zk::session::{ZkConfig, ZkSession};
use skua::zk::znodes::{
    self, ControllerRegistration, LeaderIsrAndControllerEpoch, TopicAssignment,
};

/// How long after a session timeout a change must be visible ("a few seconds").
const SLACK: Duration = Duration::from_secs(15);

/// Partition → (leader, replicas, isr), as kafka-topics.sh --describe prints it.
type Described = BTreeMap<i32, (i32, Vec<i32>, Vec<i32>)>;

/// The helpers this file's scenarios add to the cluster (a trait of its own, so
/// helpers of the same name in other scenario files do not collide).
trait ClusterHelpers {
    fn start() -> Option<Cluster>;
    fn start_with(extra: &[&str]) -> Option<Cluster>;
    fn broker(&self, i: usize) -> &str;
    fn kafka_bootstrap(&self) -> String;
    fn topics(&self, args: &[&str]) -> Result<String, String>;
    fn describe(&self, topic: &str, broker: usize) -> Described;
    fn zk_shell_get(&self, path: &str) -> String;
    fn controller(&self) -> Option<i32>;
    fn controller_after(&self, old: i32, what: &str) -> i32;
    fn produce(&self, topic: &str, lines: &[String]);
    fn produce_via(&self, bootstrap: &str, topic: &str, lines: &[String]);
    fn consume(&self, topic: &str, n: usize) -> Vec<String>;
    fn consume_via(&self, bootstrap: &str, topic: &str, n: usize) -> Vec<String>;
    async fn session(&self) -> ZkSession;
}

impl ClusterHelpers for Cluster {
    fn start() -> Option<Cluster> {
        Cluster::start_with(&[])
    }

    /// `scripts/cluster start 3 --skua 1` with more options.
    fn start_with(extra: &[&str]) -> Option<Cluster> {
        Cluster::start_kinds("1", extra)
    }

    /// Broker `i`'s address (1-based).
    fn broker(&self, i: usize) -> &str {
        &self.bootstrap[i - 1]
    }

    fn kafka_bootstrap(&self) -> String {
        self.bootstrap[1..].join(",")
    }

    fn topics(&self, args: &[&str]) -> Result<String, String> {
        let out = self.run("topics", args);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() {
            Ok(text)
        } else {
            Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)))
        }
    }

    fn describe(&self, topic: &str, broker: usize) -> Described {
        let out = self
            .topics(&[
                "--describe",
                "--topic",
                topic,
                "--bootstrap-server",
                self.broker(broker),
            ])
            .unwrap_or_default();
        parse_describe(&out)
    }

    /// Kafka 3.9's zookeeper-shell `get PATH`: the data line.
    fn zk_shell_get(&self, path: &str) -> String {
        let out = self.run("zk-shell", &["get", path]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .rfind(|l| l.starts_with('{') || l.starts_with('['))
            .unwrap_or_default()
            .to_string()
    }

    /// The broker `/controller` names, as Kafka's own shell reads it.
    fn controller(&self) -> Option<i32> {
        let json = self.zk_shell_get("/controller");
        let r: ControllerRegistration = znodes::decode(json.as_bytes()).ok()?;
        Some(r.brokerid)
    }

    /// Waits until a broker other than `old` is controller; returns it.
    fn controller_after(&self, old: i32, what: &str) -> i32 {
        eventually(what, failover_limit(), || {
            self.controller().filter(|&id| id != old)
        })
    }

    async fn session(&self) -> ZkSession {
        let config = ZkConfig::new(&self.zk_connect(), Duration::from_secs(10), None).unwrap();
        ZkSession::connect(&config).await.unwrap()
    }

    /// Sends `lines` with Kafka's console producer (acks=all) through the Kafka brokers.
    fn produce(&self, topic: &str, lines: &[String]) {
        self.produce_via(&self.kafka_bootstrap(), topic, lines)
    }

    /// Sends `lines` with Kafka's console producer (acks=all) through `bootstrap`.
    fn produce_via(&self, bootstrap: &str, topic: &str, lines: &[String]) {
        let mut child = Command::new(script())
            .args(["tool"])
            .arg(self.dir.path())
            .args([
                "kafka.tools.ConsoleProducer",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                topic,
                "--producer-property",
                "acks=all",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        for l in lines {
            writeln!(stdin, "{l}").unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "console producer: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Reads `n` records from the beginning with Kafka's console consumer.
    fn consume(&self, topic: &str, n: usize) -> Vec<String> {
        self.consume_via(&self.kafka_bootstrap(), topic, n)
    }

    /// Reads `n` records from the beginning, bootstrapping from `bootstrap`.
    fn consume_via(&self, bootstrap: &str, topic: &str, n: usize) -> Vec<String> {
        let out = self.run(
            "tool",
            &[
                "org.apache.kafka.tools.consumer.ConsoleConsumer",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                topic,
                "--from-beginning",
                "--max-messages",
                &n.to_string(),
                "--timeout-ms",
                "60000",
            ],
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

fn parse_ids(s: &str) -> Vec<i32> {
    s.split(',').filter_map(|x| x.trim().parse().ok()).collect()
}

fn parse_describe(out: &str) -> Described {
    let mut d = Described::new();
    for line in out.lines().filter(|l| l.contains("Partition: ")) {
        let field = |name: &str| {
            line.split('\t')
                .find_map(|f| f.trim().strip_prefix(name))
                .unwrap_or("")
                .trim()
                .to_string()
        };
        let Ok(p) = field("Partition:").parse::<i32>() else {
            continue;
        };
        let leader = field("Leader:").parse().unwrap_or(-2);
        d.insert(
            p,
            (
                leader,
                parse_ids(&field("Replicas:")),
                parse_ids(&field("Isr:")),
            ),
        );
    }
    d
}

/// Every assignment Kafka's `assignReplicasToBrokers` (no racks) can produce for sorted
/// `brokers`: one per random start index and first follower shift.
fn kafka_assignments(brokers: &[i32], partitions: i32, rf: usize) -> Vec<BTreeMap<i32, Vec<i32>>> {
    let n = brokers.len();
    let mut all = Vec::new();
    for start in 0..n {
        for first_shift in 0..n {
            let mut shift = first_shift;
            let mut m = BTreeMap::new();
            for p in 0..partitions as usize {
                if p > 0 && p % n == 0 {
                    shift += 1;
                }
                let first = (p + start) % n;
                let mut replicas = vec![brokers[first]];
                for j in 0..rf - 1 {
                    let s = 1 + (shift + j) % (n - 1);
                    replicas.push(brokers[(first + s) % n]);
                }
                m.insert(p as i32, replicas);
            }
            all.push(m);
        }
    }
    all
}

fn failover_limit() -> Duration {
    Duration::from_millis(SESSION_TIMEOUT_MS) + SLACK
}

/// (1) skua wins /controller; topics created with kafka-topics.sh through it are led and
/// served by the Kafka brokers, every broker describes them alike, and ZooKeeper holds
/// Kafka's JSON. (2) kill -9 of a Kafka broker: its partitions get new leaders from the
/// ISR within the session timeout plus a few seconds; the broker comes back into the
/// ISR through AlterPartition. (3) kill -9 of skua: a Kafka broker takes over, topic
/// creation works again, and a restarted skua rejoins as a plain broker.
#[test]
fn skua_controls_kafka_brokers_and_hands_over() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start() else { return };
    let rt = tokio::runtime::Runtime::new().unwrap();

    // (1) skua is the controller, in Kafka's JSON as Kafka's own shell reads it.
    assert_eq!(c.controller(), Some(1), "skua started first and won");

    let created = c
        .topics(&[
            "--create",
            "--topic",
            "served",
            "--replica-assignment",
            "2:3,3:2,2:3,3:2",
        ])
        .expect("kafka-topics.sh --create through the skua controller");
    assert!(created.contains("Created topic served"), "{created}");
    let expected: Described = [(0, 2), (1, 3), (2, 2), (3, 3)]
        .into_iter()
        .map(|(p, l)| {
            let other = 5 - l;
            (p, (l, vec![l, other], vec![l, other]))
        })
        .collect();
    for broker in 1..=3 {
        eventually(
            &format!("broker {broker} describes the leaders skua elected"),
            Duration::from_secs(30),
            || (c.describe("served", broker) == expected).then_some(()),
        );
    }
    let topic_json = c.zk_shell_get("/brokers/topics/served");
    let topic: TopicAssignment = znodes::decode(topic_json.as_bytes()).unwrap();
    assert!(
        topic_json
            .starts_with(r#"{"partitions":{"0":[2,3],"1":[3,2],"2":[2,3],"3":[3,2]},"topic_id":""#)
            && topic_json
                .ends_with(r#"","adding_replicas":{},"removing_replicas":{},"version":3}"#),
        "{topic_json}"
    );
    assert_eq!(topic.topic_id.as_deref().map(str::len), Some(22));
    assert_eq!(
        c.zk_shell_get("/brokers/topics/served/partitions/1/state"),
        r#"{"controller_epoch":1,"leader":3,"version":1,"leader_epoch":0,"isr":[3,2]}"#
    );

    // Without an assignment: Kafka's algorithm over the live brokers 1..3; each
    // partition is led by its first replica, skua (1) included, and every broker
    // describes it so.
    c.topics(&[
        "--create",
        "--topic",
        "spread",
        "--partitions",
        "6",
        "--replication-factor",
        "2",
    ])
    .expect("create with Kafka's assignment");
    let spread: TopicAssignment =
        znodes::decode(c.zk_shell_get("/brokers/topics/spread").as_bytes()).unwrap();
    assert!(
        kafka_assignments(&[1, 2, 3], 6, 2).contains(&spread.partitions.0),
        "{:?} is an assignment Kafka's algorithm makes",
        spread.partitions.0
    );
    for broker in 1..=3 {
        eventually(
            &format!(
                "broker {broker} describes every partition of spread led by its first replica"
            ),
            Duration::from_secs(30),
            || {
                let d = c.describe("spread", broker);
                let preferred = d.iter().all(|(p, (l, r, _))| {
                    spread.partitions.0.get(p) == Some(r) && r.first() == Some(l)
                });
                (d.len() == 6 && preferred).then_some(())
            },
        );
    }
    assert!(
        spread.partitions.0.values().any(|r| r[0] == 1),
        "skua leads some partition of spread"
    );

    let records: Vec<String> = (0..30).map(|i| format!("record-{i}")).collect();
    c.produce("served", &records);
    let mut got = c.consume("served", records.len());
    got.sort();
    let mut want = records.clone();
    want.sort();
    assert_eq!(
        got, want,
        "every record produced through the Kafka leaders is read back"
    );

    // The idempotent console producer's broker asked skua for producer ids.
    assert!(
        c.log(1).contains("producer id block claimed"),
        "AllocateProducerIds answered by skua"
    );

    // More partitions through skua: Kafka's algorithm from partition 0's first replica.
    c.topics(&["--alter", "--topic", "served", "--partitions", "6"])
        .expect("kafka-topics.sh --alter --partitions through skua");
    let grown: TopicAssignment =
        znodes::decode(c.zk_shell_get("/brokers/topics/served").as_bytes()).unwrap();
    assert_eq!(grown.partitions.0.get(&4), Some(&vec![3, 2]));
    assert_eq!(grown.partitions.0.get(&5), Some(&vec![1, 3]));
    eventually(
        "the new partitions led by their first replicas, skua's by skua",
        Duration::from_secs(30),
        || {
            let d = c.describe("served", 3);
            (d.len() == 6 && d[&4].0 == 3 && d[&5].0 == 1).then_some(())
        },
    );

    // Deletion through skua: StopReplica (without, then with deletion) to every
    // replica; the znodes go once every replica confirmed.
    c.topics(&[
        "--create",
        "--topic",
        "doomed",
        "--replica-assignment",
        "2:3,3:2",
    ])
    .expect("create doomed");
    c.topics(&["--delete", "--topic", "doomed"])
        .expect("delete through skua");
    c.topics(&["--delete", "--topic", "spread"])
        .expect("delete through skua");
    rt.block_on(async {
        let s = c.session().await;
        let start = Instant::now();
        for path in [
            "/brokers/topics/doomed",
            "/admin/delete_topics/doomed",
            "/config/topics/doomed",
        ] {
            while s.get(path).await.unwrap().is_some() {
                assert!(start.elapsed() < Duration::from_secs(30), "{path} removed");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        // spread has replicas on skua: skua's StopReplica answers complete its deletion.
        for path in ["/brokers/topics/spread", "/admin/delete_topics/spread"] {
            while s.get(path).await.unwrap().is_some() {
                assert!(start.elapsed() < Duration::from_secs(30), "{path} removed");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
    // skua renamed its logs of spread for deletion (removed after file.delete.delay.ms).
    let skua_dirs: Vec<String> = std::fs::read_dir(c.dir.path().join("broker-1/data"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("spread-"))
        .collect();
    assert!(
        skua_dirs.iter().all(|n| n.ends_with("-delete")),
        "{skua_dirs:?}"
    );
    for broker in [2, 3] {
        eventually(
            &format!("broker {broker} has no log of doomed left"),
            Duration::from_secs(30),
            || {
                let data = c.dir.path().join(format!("broker-{broker}/data"));
                let live = std::fs::read_dir(data)
                    .unwrap()
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .any(|n| n.starts_with("doomed-") && !n.ends_with("-delete"));
                (!live).then_some(())
            },
        );
    }

    // Controlled shutdown of broker 2 (SIGTERM): skua moves its leaderships to broker 3
    // and answers that it leads nothing more, before broker 2 stops.
    c.signal("term", 2);
    assert!(
        c.log(2)
            .contains("Controlled shutdown request returned successfully"),
        "broker 2's ControlledShutdown answered by skua with nothing left to move"
    );
    assert!(c.log(1).contains("controlled shutdown broker=2"));
    let d = c.describe("served", 1);
    assert!(d.values().all(|(l, _, _)| *l != 2) && d[&5].0 == 1, "{d:?}");
    c.signal("restart", 2);
    eventually(
        "broker 2 back in every ISR",
        Duration::from_secs(60),
        || {
            let d = c.describe("served", 3);
            let back = d
                .values()
                .all(|(_, r, isr)| !r.contains(&2) || isr.contains(&2));
            (d.len() == 6 && back).then_some(())
        },
    );

    // (2) kill -9 a Kafka broker: broker 3 leads everything within the bound.
    let killed = Instant::now();
    c.signal("kill", 2);
    for broker in [3, 1] {
        eventually(
            &format!("broker {broker} sees broker 3 leading every partition"),
            failover_limit(),
            || {
                let d = c.describe("served", broker);
                let moved = (0..4).all(|p| {
                    d.get(&p)
                        .is_some_and(|(l, _, isr)| *l == 3 && isr == &vec![3])
                });
                (d.len() == 6 && moved).then_some(())
            },
        );
    }
    eprintln!("failover seen by both brokers after {:?}", killed.elapsed());
    let state: LeaderIsrAndControllerEpoch = znodes::decode(
        c.zk_shell_get("/brokers/topics/served/partitions/0/state")
            .as_bytes(),
    )
    .unwrap();
    assert_eq!(
        (state.leader, state.leader_epoch, state.isr.clone()),
        // Epoch 1: broker 3 took over in the controlled shutdown; 2: broker 2 left the
        // ISR (the controller's ISR changes bump the leader epoch, as Kafka's do).
        (3, 2, vec![3])
    );

    // Broker 2 back: broker 3 (its leader) asks skua to grow the ISR with AlterPartition.
    c.signal("restart", 2);
    eventually(
        "broker 2 back in every ISR",
        Duration::from_secs(60),
        || {
            let d = c.describe("served", 3);
            let back = d
                .values()
                .all(|(_, r, isr)| !r.contains(&2) || isr.contains(&2));
            (d.len() == 6 && back).then_some(())
        },
    );
    assert!(
        c.log(1).contains("ISR changed"),
        "skua answered AlterPartition"
    );

    // (3) kill -9 skua: a Kafka broker takes over and creates topics.
    c.signal("kill", 1);
    let new_controller = c.controller_after(1, "a Kafka broker is elected controller");
    assert!([2, 3].contains(&new_controller));
    let created = c
        .topics(&[
            "--create",
            "--topic",
            "after-skua",
            "--replica-assignment",
            "2:3",
            "--bootstrap-server",
            &c.kafka_bootstrap(),
        ])
        .expect("topic creation through the Kafka controller");
    assert!(created.contains("Created topic after-skua"), "{created}");

    // A restarted skua registers again and stays a plain broker.
    c.signal("restart", 1);
    rt.block_on(async {
        let s = c.session().await;
        let start = Instant::now();
        loop {
            if s.get("/brokers/ids/1").await.unwrap().is_some() {
                break;
            }
            assert!(
                start.elapsed() < failover_limit() * 2,
                "skua registered again"
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let (data, _) = s.get("/controller").await.unwrap().unwrap();
        let r: ControllerRegistration = znodes::decode(&data).unwrap();
        assert_eq!(r.brokerid, new_controller, "the Kafka controller stays");
    });
    // Requests only the controller answers get NOT_CONTROLLER from skua now.
    rt.block_on(async {
        use kafka_protocol::messages::create_topics_request::CreatableTopic;
        use kafka_protocol::messages::*;
        use kafka_protocol::protocol::StrBytes;
        let addr = c.broker(1).parse().unwrap();
        let client = skua::client::Client::new(addr, Default::default());
        let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("nope")))
            .with_num_partitions(1)
            .with_replication_factor(1)]);
        let r = client.send(&create, 7).await.unwrap();
        assert_eq!(r.topics[0].error_code, 41, "NOT_CONTROLLER");
        let alter = AlterPartitionRequest::default().with_broker_id(BrokerId(2));
        let r = client.send(&alter, 3).await.unwrap();
        assert_eq!(r.error_code, 41, "NOT_CONTROLLER");
        let meta = client.send(&MetadataRequest::default(), 12).await.unwrap();
        assert_eq!(
            meta.controller_id.0, new_controller,
            "skua names the real controller"
        );
    });

    // skua holds replicas (served-5, __consumer_offsets): the Kafka controller tells it,
    // and skua hosts them again.
    let told = format!("controller={new_controller}");
    eventually(
        "the Kafka controller's LeaderAndIsr reaches skua",
        Duration::from_secs(30),
        || {
            c.log(1)
                .lines()
                .any(|l| l.contains("LeaderAndIsr") && l.contains(&told))
                .then_some(())
        },
    );
}

/// The mixed cluster the other way round (`scripts/cluster start 3 --skua 2,3
/// --kafka-first`): Apache Kafka 3.9's broker 1 is the controller and the two skua
/// brokers follow its LeaderAndIsr and UpdateMetadata: they lead what it assigns them,
/// serve a real client's produce and fetch, and describe every topic as Kafka does; when
/// the Kafka controller is killed a skua broker takes over and creates topics.
#[test]
fn skua_brokers_follow_a_kafka_controller_and_take_over() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Coordinator partitions of RF 1 and Kafka leaders that drop a non-fetching skua
    // follower from the ISR within seconds: skua's followers do not fetch yet.
    let Some(c) = Cluster::start_kinds(
        "2,3",
        &[
            "--kafka-first",
            "--override",
            "offsets.topic.replication.factor=1",
            "--override",
            "replica.lag.time.max.ms=5000",
        ],
    ) else {
        return;
    };
    assert_eq!(
        c.controller(),
        Some(1),
        "the Kafka broker started first and won"
    );

    // (a) RF 1 partitions on the skua brokers, created through the Kafka controller.
    let created = c
        .topics(&[
            "--create",
            "--topic",
            "on-skua",
            "--replica-assignment",
            "2,3,2,3",
            "--bootstrap-server",
            c.broker(1),
        ])
        .expect("kafka-topics.sh --create through the Kafka controller");
    assert!(created.contains("Created topic on-skua"), "{created}");
    let expected: Described = [(0, 2), (1, 3), (2, 2), (3, 3)]
        .into_iter()
        .map(|(p, l)| (p, (l, vec![l], vec![l])))
        .collect();
    for broker in 1..=3 {
        eventually(
            &format!("broker {broker} describes on-skua led by the skua brokers"),
            Duration::from_secs(30),
            || (c.describe("on-skua", broker) == expected).then_some(()),
        );
    }
    // Produced by a producer that found the skua leaders through the Kafka broker, read
    // back by a consumer group bootstrapped from the skua brokers only: its
    // FindCoordinator has a skua broker (not the controller) create __consumer_offsets
    // in ZooKeeper, as Kafka's brokers do.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let coordinator = rt.block_on(async {
        use kafka_protocol::messages::FindCoordinatorRequest;
        use kafka_protocol::protocol::StrBytes;
        let client = skua::client::Client::new(c.broker(2).parse().unwrap(), Default::default());
        let find =
            FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("mixed-group"));
        let start = Instant::now();
        loop {
            let r = client.send(&find, 3).await.unwrap();
            if r.error_code == 0 {
                break r.node_id.0;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "FindCoordinator on skua broker 2 keeps answering {}",
                r.error_code
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    });
    assert!((1..=3).contains(&coordinator), "coordinator {coordinator}");
    assert!(
        c.log(2).contains("created __consumer_offsets"),
        "skua broker 2 created the offsets topic"
    );
    let records: Vec<String> = (0..40).map(|i| format!("mixed-{i}")).collect();
    let skua_bootstrap = format!("{},{}", c.broker(2), c.broker(3));
    c.produce_via(c.broker(1), "on-skua", &records);
    let mut got = c.consume_via(&skua_bootstrap, "on-skua", records.len());
    got.sort();
    let mut want = records.clone();
    want.sort();
    assert_eq!(
        got, want,
        "every record produced to the skua leaders is read back"
    );
    for broker in [2, 3] {
        let data = c.dir.path().join(format!("broker-{broker}/data"));
        let hosted: BTreeSet<String> = std::fs::read_dir(data)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with("on-skua-"))
            .collect();
        let mine: BTreeSet<String> = (0..4)
            .filter(|p| expected[p].0 == broker)
            .map(|p| format!("on-skua-{p}"))
            .collect();
        assert_eq!(hosted, mine, "broker {broker} hosts the logs it leads");
    }

    // RF 3 over both kinds: every broker describes the same leaders, replicas and ISR.
    c.topics(&[
        "--create",
        "--topic",
        "everywhere",
        "--partitions",
        "3",
        "--replication-factor",
        "3",
        "--bootstrap-server",
        c.broker(1),
    ])
    .expect("create with RF 3");
    eventually(
        "every broker describes everywhere alike",
        Duration::from_secs(30),
        || {
            let all: Vec<Described> = (1..=3).map(|b| c.describe("everywhere", b)).collect();
            let led = all[0]
                .values()
                .all(|(l, r, _)| r.len() == 3 && r.first() == Some(l));
            (all[0].len() == 3 && led && all[1] == all[0] && all[2] == all[0]).then_some(())
        },
    );

    // Controlled shutdown of skua broker 3 (SIGTERM): it asks the Kafka controller to
    // move its leaderships away before it stops, so no partition of RF 3 is led by it.
    let led_by_3 = c
        .describe("everywhere", 1)
        .values()
        .filter(|(l, _, _)| *l == 3)
        .count();
    assert!(led_by_3 > 0, "broker 3 leads a partition of everywhere");
    c.signal("term", 3);
    assert!(
        c.log(3)
            .contains("Controlled shutdown request returned successfully"),
        "skua's ControlledShutdown answered by the Kafka controller with nothing left"
    );
    eventually(
        "every partition of everywhere led by a broker other than 3",
        Duration::from_secs(30),
        || {
            let d = c.describe("everywhere", 1);
            (d.len() == 3 && d.values().all(|(l, _, _)| *l != 3 && *l >= 0)).then_some(())
        },
    );
    c.signal("restart", 3);
    eventually(
        "broker 3 leads its partitions of on-skua again",
        Duration::from_secs(60),
        || {
            let d = c.describe("on-skua", 2);
            (d.len() == 4 && d[&1].0 == 3 && d[&3].0 == 3).then_some(())
        },
    );
    // What broker 3 held before its shutdown is served again after its restart.
    let mut again = c.consume_via(&skua_bootstrap, "on-skua", records.len());
    again.sort();
    assert_eq!(again, want, "every record read back after skua's restart");

    // (c) kill -9 the Kafka controller: a skua broker takes over and creates topics.
    c.signal("kill", 1);
    let new_controller = c.controller_after(1, "a skua broker is elected controller");
    assert!([2, 3].contains(&new_controller));
    let created = c
        .topics(&[
            "--create",
            "--topic",
            "after-kafka",
            "--replica-assignment",
            "3",
            "--bootstrap-server",
            &skua_bootstrap,
        ])
        .expect("topic creation through the skua controller");
    assert!(created.contains("Created topic after-kafka"), "{created}");
    let expected: Described = [(0, (3, vec![3], vec![3]))].into_iter().collect();
    for broker in [2, 3] {
        eventually(
            &format!("broker {broker} describes after-kafka"),
            Duration::from_secs(30),
            || (c.describe("after-kafka", broker) == expected).then_some(()),
        );
    }
    let more: Vec<String> = (0..10).map(|i| format!("after-{i}")).collect();
    c.produce_via(&skua_bootstrap, "after-kafka", &more);
    // Read from the partition itself: the coordinator partitions the dead Kafka broker
    // held are offline.
    let out = c.run(
        "tool",
        &[
            "org.apache.kafka.tools.consumer.ConsoleConsumer",
            "--bootstrap-server",
            &skua_bootstrap,
            "--topic",
            "after-kafka",
            "--partition",
            "0",
            "--offset",
            "earliest",
            "--max-messages",
            "10",
            "--timeout-ms",
            "60000",
        ],
    );
    let got: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(got, more, "read back in order from skua");
}

/// Every znode outside `/brokers/ids` and `/zookeeper`: path → (data, mzxid).
/// The first segment of `topic`-0 on broker `broker` (empty when there is none yet).
fn first_segment(c: &Cluster, broker: usize, topic: &str) -> Vec<u8> {
    let path = c.dir.path().join(format!(
        "broker-{broker}/data/{topic}-0/00000000000000000000.log"
    ));
    std::fs::read(path).unwrap_or_default()
}

/// Replication across kinds: skua as brokers 1 and 2, Apache Kafka 3.9.1 as broker 3. A
/// topic led by skua and one led by Kafka (RF 3, min.insync.replicas=2) take acks=all
/// writes; every replica ends in the ISR with the same segment bytes (followers of either
/// kind store the leader's batches unchanged). kill -9 of the Kafka leader: a skua
/// follower takes over with every acknowledged record and takes more, and the restarted
/// Kafka broker catches up to the same bytes and rejoins the ISR.
#[test]
fn skua_and_kafka_replicate_each_other() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start_kinds("1,2", &[]) else {
        return;
    };
    let topics = [("by-skua", "1:2:3"), ("by-kafka", "3:1:2")];
    let lines = |t: &str, r: std::ops::Range<usize>| -> Vec<String> {
        r.map(|i| format!("{t}-{i}")).collect()
    };
    for (topic, assignment) in topics {
        c.topics(&[
            "--create",
            "--topic",
            topic,
            "--replica-assignment",
            assignment,
            "--config",
            "min.insync.replicas=2",
        ])
        .unwrap();
        c.produce_via(c.broker(1), topic, &lines(topic, 0..500));
    }
    let in_sync_alike = |topic: &str| {
        let isr = c.describe(topic, 1).get(&0)?.2.clone();
        let leader_bytes = first_segment(&c, 1, topic);
        let alike = !leader_bytes.is_empty()
            && (2..=3).all(|b| first_segment(&c, b, topic) == leader_bytes);
        (isr.len() == 3 && alike).then_some(())
    };
    for (topic, _) in topics {
        eventually(
            &format!("{topic}: every replica in the ISR with the same bytes"),
            failover_limit(),
            || in_sync_alike(topic),
        );
    }

    c.signal("kill", 3);
    eventually("a skua broker leads by-kafka", failover_limit(), || {
        let leader = c.describe("by-kafka", 1).get(&0)?.0;
        (leader == 1 || leader == 2).then_some(())
    });
    c.produce_via(c.broker(1), "by-kafka", &lines("by-kafka", 500..800));
    let got: BTreeSet<String> = c
        .consume_via(c.broker(1), "by-kafka", 800)
        .into_iter()
        .collect();
    let want: BTreeSet<String> = lines("by-kafka", 0..800).into_iter().collect();
    assert_eq!(got, want, "every acknowledged record, once");

    c.signal("restart", 3);
    eventually(
        "the restarted Kafka broker back in the ISR with the same bytes",
        failover_limit(),
        || in_sync_alike("by-kafka"),
    );
}

async fn znode_snapshot(s: &ZkSession) -> BTreeMap<String, (Vec<u8>, i64)> {
    let mut out = BTreeMap::new();
    let mut stack = vec!["/".to_string()];
    while let Some(path) = stack.pop() {
        if path.starts_with("/brokers/ids") || path.starts_with("/zookeeper") {
            continue;
        }
        if let Some((data, stat)) = s.get(&path).await.unwrap() {
            out.insert(path.clone(), (data, stat.mzxid));
        }
        for child in s.children(&path).await.unwrap().unwrap_or_default() {
            let p = if path == "/" {
                format!("/{child}")
            } else {
                format!("{path}/{child}")
            };
            stack.push(p);
        }
    }
    out
}

/// (4) A controller paused past its session timeout (SIGSTOP) while a broker dies is
/// deposed: a Kafka broker takes over and acts on the death. Resumed (SIGCONT), skua
/// finds its session expired, registers again and changes nothing in ZooKeeper.
#[test]
fn deposed_controller_changes_nothing() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start() else { return };
    let rt = tokio::runtime::Runtime::new().unwrap();
    c.topics(&[
        "--create",
        "--topic",
        "fenced",
        "--replica-assignment",
        "2:3,3:2",
    ])
    .expect("create through skua");
    let s = rt.block_on(c.session());

    c.signal("pause", 1);
    c.signal("kill", 3);
    eventually(
        "broker 2 controls and leads every partition",
        failover_limit() * 2,
        || {
            rt.block_on(async {
                let (data, _) = s.get("/controller").await.unwrap()?;
                let r: ControllerRegistration = znodes::decode(&data).ok()?;
                let mut leaders = BTreeSet::new();
                for p in 0..2 {
                    let (data, _) = s
                        .get(&format!("/brokers/topics/fenced/partitions/{p}/state"))
                        .await
                        .unwrap()?;
                    let st: LeaderIsrAndControllerEpoch = znodes::decode(&data).ok()?;
                    leaders.insert(st.leader);
                }
                (r.brokerid == 2 && leaders == BTreeSet::from([2])).then_some(())
            })
        },
    );
    // The new controller has finished what it does about broker 3 and the paused broker 1
    // once ZooKeeper holds the same znodes two seconds apart.
    let mut last = rt.block_on(znode_snapshot(&s));
    let before = eventually(
        "the new controller's changes settle",
        failover_limit() * 4,
        || {
            std::thread::sleep(Duration::from_secs(2));
            let now = rt.block_on(znode_snapshot(&s));
            let settled = now == last;
            last = now;
            settled.then(|| last.clone())
        },
    );
    let epoch_before = before["/controller_epoch"].0.clone();

    c.signal("resume", 1);
    let old_epoch = rt.block_on(async {
        let start = Instant::now();
        loop {
            if let Some((_, stat)) = s.get("/brokers/ids/1").await.unwrap() {
                break stat.czxid;
            }
            assert!(
                start.elapsed() < failover_limit() * 2,
                "skua registered again"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    assert!(old_epoch > 0);
    std::thread::sleep(Duration::from_secs(5));
    let after = rt.block_on(znode_snapshot(&s));
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "no znode created or deleted"
    );
    for (path, v) in &before {
        assert_eq!(
            &after[path], v,
            "{path} unchanged by the deposed controller"
        );
    }
    assert_eq!(after["/controller_epoch"].0, epoch_before);
    assert_eq!(String::from_utf8_lossy(&epoch_before), "2");
    assert!(
        c.log(1).contains("ZooKeeper session ended"),
        "skua saw its session end:\n{}",
        c.log(1)
    );
}

/// A partition's `state` znode.
async fn partition_state(
    s: &ZkSession,
    topic: &str,
    p: i32,
) -> Option<LeaderIsrAndControllerEpoch> {
    let (data, _) = s
        .get(&format!("/brokers/topics/{topic}/partitions/{p}/state"))
        .await
        .unwrap()?;
    znodes::decode(&data).ok()
}

/// The long scenarios (`SKUA_CLUSTER_LONG=1`), on a 3-node ZooKeeper ensemble under a
/// chroot: a partition with no replica left has no leader and comes back with its
/// broker; unclean election per topic config; a ZooKeeper node lost; repeated broker
/// failures; a clean stop of the skua controller hands over at once.
#[test]
fn long_cluster_scenarios() {
    if std::env::var("SKUA_CLUSTER_LONG").as_deref() != Ok("1") {
        eprintln!("SKIPPED: set SKUA_CLUSTER_LONG=1 for the long cluster scenarios");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start_with(&["--zk-nodes", "3", "--chroot", "/long/run"]) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let s = rt.block_on(c.session());
    let state = |t: &str, p: i32| rt.block_on(partition_state(&s, t, p));
    assert!(c.zk_connect().ends_with("/long/run"));

    c.topics(&["--create", "--topic", "lonely", "--replica-assignment", "2"])
        .unwrap();
    c.topics(&[
        "--create",
        "--topic",
        "dirty",
        "--replica-assignment",
        "2:3",
        "--config",
        "unclean.leader.election.enable=true",
    ])
    .unwrap();
    eventually(
        "dirty led by 2 with both in sync",
        Duration::from_secs(30),
        || state("dirty", 0).filter(|st| st.leader == 2 && st.isr.len() == 2),
    );

    // No replica left: leader -1, the last ISR member kept.
    c.signal("kill", 3);
    eventually("dirty's ISR down to 2", failover_limit(), || {
        state("dirty", 0).filter(|st| st.isr == vec![2])
    });
    c.signal("kill", 2);
    let st = eventually("lonely has no leader", failover_limit(), || {
        state("lonely", 0).filter(|st| st.leader == -1)
    });
    assert_eq!(st.isr, vec![2]);
    let st = eventually("dirty has no leader", failover_limit(), || {
        state("dirty", 0).filter(|st| st.leader == -1)
    });
    assert_eq!(st.isr, vec![2]);

    // Broker 3 back, out of the ISR: dirty allows an unclean leader, which recovers.
    c.signal("restart", 3);
    let st = eventually("dirty led by 3, uncleanly", failover_limit(), || {
        state("dirty", 0).filter(|st| st.leader == 3)
    });
    assert_eq!(st.isr, vec![3]);
    assert!(
        c.log(1)
            .contains("leader elected partition=dirty-0 leader=3"),
        "skua elected it"
    );
    // Broker 2 back: lonely's only replica leads again (a clean election).
    c.signal("restart", 2);
    eventually("lonely led by 2 again", failover_limit(), || {
        state("lonely", 0).filter(|st| st.leader == 2 && st.isr == vec![2])
    });

    // A ZooKeeper node lost: the ensemble keeps a quorum and skua keeps working.
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/zk"))
        .arg("kill")
        .arg(c.dir.path().join("zk"))
        .arg("1")
        .output()
        .unwrap();
    assert!(out.status.success());
    eventually(
        "topic creation with a ZooKeeper node down",
        Duration::from_secs(60),
        || {
            c.topics(&[
                "--create",
                "--topic",
                "quorum",
                "--replica-assignment",
                "2:3",
            ])
            .ok()
            .filter(|o| o.contains("Created topic quorum"))
        },
    );

    // Repeated failures of a Kafka broker.
    c.topics(&[
        "--create",
        "--topic",
        "churn",
        "--replica-assignment",
        "3:2,2:3",
    ])
    .unwrap();
    for round in 0..3 {
        eventually(
            &format!("round {round}: both in sync"),
            Duration::from_secs(60),
            || {
                (0..2)
                    .all(|p| state("churn", p).is_some_and(|st| st.isr.len() == 2))
                    .then_some(())
            },
        );
        c.signal("kill", 3);
        eventually(
            &format!("round {round}: broker 2 leads alone"),
            failover_limit(),
            || {
                (0..2)
                    .all(|p| {
                        state("churn", p).is_some_and(|st| st.leader == 2 && st.isr == vec![2])
                    })
                    .then_some(())
            },
        );
        c.signal("restart", 3);
    }

    // A clean stop of the skua controller: its session closes, a Kafka broker takes over
    // without waiting for a session timeout.
    let stopped = Instant::now();
    c.signal("term", 1);
    let controller = eventually("a Kafka broker controls", failover_limit(), || {
        let (data, _) = rt.block_on(s.get("/controller")).unwrap()?;
        let r: ControllerRegistration = znodes::decode(&data).ok()?;
        (r.brokerid != 1).then_some(r.brokerid)
    });
    assert!(
        stopped.elapsed() < Duration::from_millis(SESSION_TIMEOUT_MS),
        "broker {controller} took over after {:?}",
        stopped.elapsed()
    );
}

/// IncrementalAlterConfigs v1 of one resource, sent to the broker at `addr`: `ops` are
/// (key, Some(value)) to set and (key, None) to delete. Returns the error code.
fn alter_configs(addr: &str, resource_type: i8, name: &str, ops: &[(&str, Option<&str>)]) -> i16 {
    use kafka_protocol::messages::incremental_alter_configs_request::{
        AlterConfigsResource, AlterableConfig,
    };
    use kafka_protocol::messages::IncrementalAlterConfigsRequest;
    use kafka_protocol::protocol::StrBytes;
    let configs = ops
        .iter()
        .map(|(k, v)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(k.to_string()))
                .with_config_operation(if v.is_some() { 0 } else { 1 })
                .with_value(v.map(|v| StrBytes::from_string(v.to_string())))
        })
        .collect();
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configs(configs),
    ]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut client = common::Client::connect(addr.parse().unwrap()).await;
        let resp = client.send(&req, 1).await;
        let r = &resp.responses[0];
        if r.error_code != 0 {
            eprintln!("IncrementalAlterConfigs to {addr}: {:?}", r.error_message);
        }
        r.error_code
    })
}

/// DescribeConfigs v4 of one resource at `addr`: key → (value, source).
fn describe_configs(
    addr: &str,
    resource_type: i8,
    name: &str,
) -> BTreeMap<String, (Option<String>, i8)> {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::DescribeConfigsRequest;
    use kafka_protocol::protocol::StrBytes;
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_string()))
            .with_configuration_keys(None)]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut client = common::Client::connect(addr.parse().unwrap()).await;
        let resp = client.send(&req, 4).await;
        resp.results[0]
            .configs
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    (c.value.as_ref().map(|v| v.to_string()), c.config_source),
                )
            })
            .collect()
    })
}

/// Produces one record of `size` bytes to partition 0 of `topic` at `addr` (acks=1):
/// the error code.
fn produce_bytes(addr: &str, topic: &str, size: usize) -> i16 {
    let value = "x".repeat(size);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut client = common::Client::connect(addr.parse().unwrap()).await;
        let records = common::batch(&[&value], None, kafka_protocol::records::Compression::None);
        client.produce(topic, 0, records, 1).await.0
    })
}

const TOPIC_RESOURCE: i8 = 2;
const BROKER_RESOURCE: i8 = 4;
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const MESSAGE_TOO_LARGE: i16 = 10;

/// Dynamic configs live in ZooKeeper (`/config/topics|brokers/...` and
/// `/config/changes`), so a change made through a broker of either kind acts on every
/// broker: skua as broker 1, Apache Kafka 3.9.1 as brokers 2 and 3; topics hosted only
/// on skua (`on-skua`) and only on Kafka (`on-kafka`, `plain-kafka`). Each change is sent
/// to one broker and its effect is checked on a broker of the other kind: the config as
/// DescribeConfigs reports it and what the log does (segments rolled, records refused
/// as too large).
#[test]
fn configs_changed_through_either_kind_act_on_both() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start() else {
        return;
    };
    for (topic, assignment) in [("on-skua", "1"), ("on-kafka", "2"), ("plain-kafka", "2")] {
        c.topics(&[
            "--create",
            "--topic",
            topic,
            "--replica-assignment",
            assignment,
        ])
        .unwrap();
    }
    let (skua, kafka) = (c.broker(1).to_string(), c.broker(2).to_string());
    let limit = Duration::from_secs(30);
    eventually("every topic writable", limit, || {
        [
            (&skua, "on-skua"),
            (&kafka, "on-kafka"),
            (&kafka, "plain-kafka"),
        ]
        .iter()
        .all(|(addr, t)| produce_bytes(addr, t, 3000) == 0)
        .then_some(())
    });

    // A topic config set through Kafka: skua reports it and its log obeys.
    assert_eq!(
        alter_configs(
            &kafka,
            TOPIC_RESOURCE,
            "on-skua",
            &[("segment.bytes", Some("4096"))]
        ),
        0
    );
    eventually("skua describes Kafka's segment.bytes", limit, || {
        let d = describe_configs(&skua, TOPIC_RESOURCE, "on-skua");
        (d.get("segment.bytes") == Some(&(Some("4096".into()), DYNAMIC_TOPIC_CONFIG))).then_some(())
    });
    for _ in 0..6 {
        assert_eq!(produce_bytes(&skua, "on-skua", 3000), 0);
    }
    let segments = std::fs::read_dir(c.dir.path().join("broker-1/data/on-skua-0"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".log"))
        })
        .count();
    assert!(
        segments >= 3,
        "skua's log rolls at Kafka's segment.bytes: {segments} segments"
    );

    // A topic config set through skua: Kafka reports it (kafka-configs.sh) and obeys.
    assert_eq!(
        alter_configs(
            &skua,
            TOPIC_RESOURCE,
            "on-kafka",
            &[("max.message.bytes", Some("1500"))]
        ),
        0
    );
    eventually(
        "Kafka refuses what skua's max.message.bytes forbids",
        limit,
        || (produce_bytes(&kafka, "on-kafka", 3000) == MESSAGE_TOO_LARGE).then_some(()),
    );
    let out = c.run(
        "tool",
        &[
            "kafka.admin.ConfigCommand",
            "--bootstrap-server",
            &kafka,
            "--describe",
            "--entity-type",
            "topics",
            "--entity-name",
            "on-kafka",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("max.message.bytes=1500"),
        "kafka-configs.sh through Kafka: {text}"
    );
    assert_eq!(
        c.zk_shell_get("/config/topics/on-kafka"),
        r#"{"version":1,"config":{"max.message.bytes":"1500"}}"#
    );

    // A cluster-wide broker default set through Kafka: skua reports it and obeys.
    assert_eq!(
        alter_configs(
            &kafka,
            BROKER_RESOURCE,
            "",
            &[("message.max.bytes", Some("2000"))]
        ),
        0
    );
    eventually(
        "skua describes Kafka's default message.max.bytes",
        limit,
        || {
            let d = describe_configs(&skua, BROKER_RESOURCE, "1");
            (d.get("message.max.bytes")
                == Some(&(Some("2000".into()), DYNAMIC_DEFAULT_BROKER_CONFIG)))
            .then_some(())
        },
    );
    eventually("skua refuses what Kafka's default forbids", limit, || {
        (produce_bytes(&skua, "on-skua", 3000) == MESSAGE_TOO_LARGE).then_some(())
    });
    // Kafka's brokers follow /config/changes in their own time too.
    eventually("Kafka refuses what its default forbids", limit, || {
        (produce_bytes(&kafka, "plain-kafka", 3000) == MESSAGE_TOO_LARGE).then_some(())
    });

    // The default removed through skua: Kafka takes it back too.
    assert_eq!(
        alter_configs(&skua, BROKER_RESOURCE, "", &[("message.max.bytes", None)]),
        0
    );
    eventually(
        "Kafka accepts again once skua removed the default",
        limit,
        || {
            let d = describe_configs(&kafka, BROKER_RESOURCE, "2");
            let gone = d
                .get("message.max.bytes")
                .is_some_and(|(_, s)| *s != DYNAMIC_DEFAULT_BROKER_CONFIG);
            (gone && produce_bytes(&kafka, "plain-kafka", 3000) == 0).then_some(())
        },
    );
    assert_eq!(produce_bytes(&skua, "on-skua", 3000), 0);
}
