//! Partition reassignment and adding and removing brokers in ZooKeeper mode, driven with
//! Apache Kafka 3.9.1's `kafka-reassign-partitions.sh` (ReassignPartitionsCommand) against
//! real clusters (`scripts/cluster`: ZooKeeper plus skua and Kafka brokers on loopback),
//! under an idempotent acks=all Java producer (scripts/faults.d/FaultClient.java) whose
//! every acknowledged record must be readable at its offset afterwards. Skipped, with a
//! message, only when java is not installed.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::cluster::{eventually, rt, Cluster, ONE_AT_A_TIME};
use skua::zk::session::ZkSession;
use skua::zk::znodes::{self, TopicAssignment};

const REASSIGN: &str = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";

/// The writer and checker of `scripts/faults`, compiled once against the cluster's jars.
struct Writer {
    child: Child,
    dir: PathBuf,
}

fn fault_client(c: &Cluster) -> Command {
    let classes = c.dir.path().join("classes");
    let libs = std::fs::read_to_string(c.dir.path().join("libs")).unwrap();
    let libs = libs.trim();
    if !classes.exists() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/faults.d/FaultClient.java");
        let out = Command::new("javac")
            .args(["-nowarn", "-d"])
            .arg(&classes)
            .args(["-cp", &format!("{libs}/*")])
            .arg(src)
            .output()
            .expect("javac runs");
        assert!(
            out.status.success(),
            "javac: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut cmd = Command::new("java");
    cmd.arg(format!(
        "-Dlog4j.configuration=file:{}/log4j-quiet.properties",
        c.dir.path().display()
    ))
    .arg("-cp")
    .arg(format!("{}:{libs}/*", classes.display()));
    cmd.arg("FaultClient");
    cmd
}

impl Writer {
    /// Starts writing unique values to every partition of `topic`, acks=all, idempotent.
    fn start(c: &Cluster, topic: &str) -> Writer {
        let dir = c.dir.path().join(format!("writer-{topic}"));
        std::fs::create_dir_all(&dir).unwrap();
        let child = fault_client(c)
            .args(["writer", &c.bootstrap.join(","), topic])
            .arg(dir.join("stop"))
            .arg(dir.join("acks"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Writer { child, dir }
    }

    fn acked(&self) -> usize {
        std::fs::read_to_string(self.dir.join("acks"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("ack "))
            .count()
    }

    /// Waits until `n` more records than now are acknowledged.
    fn wait_for_more(&self, n: usize) {
        let base = self.acked();
        eventually(
            "the producer makes progress",
            Duration::from_secs(20),
            || (self.acked() >= base + n).then_some(()),
        );
    }

    /// Stops the writer and checks, reading from `bootstrap`, that every acknowledged
    /// record is stored once at its acknowledged offset; returns how many were.
    fn stop_and_check(mut self, c: &Cluster, bootstrap: &str, topic: &str) -> usize {
        std::fs::write(self.dir.join("stop"), b"").unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the writer failed");
        let follow = self.dir.join("follow");
        std::fs::write(&follow, b"").unwrap();
        let out = fault_client(c)
            .args(["check", bootstrap, topic])
            .arg(self.dir.join("acks"))
            .arg(&follow)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "check: {text}");
        self.acked()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The helpers this file's scenarios add to the cluster (a trait of its own, so
/// helpers of the same name in other scenario files do not collide).
trait ClusterHelpers {
    fn topics(&self, args: &[&str]) -> String;
    fn reassign(&self, bootstrap: &str, args: &[&str]) -> (bool, String);
    fn file(&self, name: &str, text: &str) -> String;
    fn get(&self, s: &ZkSession, path: &str) -> Option<Vec<u8>>;
    fn assignment(&self, s: &ZkSession, topic: &str) -> TopicAssignment;
    fn configs(&self, s: &ZkSession, entity: &str) -> String;
    fn partition_dirs(&self, i: usize, topic: &str) -> Vec<String>;
    fn verify_until_done(&self, bootstrap: &str, json: &str, partitions: &[&str]) -> String;
    fn add_skua_broker(&mut self, id: usize, s: &ZkSession);
}

impl ClusterHelpers for Cluster {
    fn topics(&self, args: &[&str]) -> String {
        let out = self.run("topics", args);
        assert!(
            out.status.success(),
            "kafka-topics.sh {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// `kafka-reassign-partitions.sh ARGS` against `bootstrap`: (success, stdout + stderr).
    fn reassign(&self, bootstrap: &str, args: &[&str]) -> (bool, String) {
        let mut full = vec![REASSIGN, "--bootstrap-server", bootstrap];
        full.extend_from_slice(args);
        let out = self.run("tool", &full);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    fn file(&self, name: &str, text: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    fn get(&self, s: &ZkSession, path: &str) -> Option<Vec<u8>> {
        rt().block_on(s.get(path)).unwrap().map(|(d, _)| d)
    }

    fn assignment(&self, s: &ZkSession, topic: &str) -> TopicAssignment {
        znodes::decode(&self.get(s, &znodes::paths::topic(topic)).unwrap()).unwrap()
    }

    /// The config overrides ZooKeeper holds for `entity` (`topics/t`, `brokers/2`).
    fn configs(&self, s: &ZkSession, entity: &str) -> String {
        self.get(s, &znodes::paths::entity_config(entity))
            .map(|d| String::from_utf8_lossy(&d).to_string())
            .unwrap_or_default()
    }

    /// The partition directories of `topic` in broker `i`'s data dir (not those renamed
    /// for a deletion).
    fn partition_dirs(&self, i: usize, topic: &str) -> Vec<String> {
        let data = self.dir.path().join(format!("broker-{i}/data"));
        let mut dirs: Vec<String> = std::fs::read_dir(data)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().to_string())
                    .filter(|n| {
                        n.strip_prefix(&format!("{topic}-"))
                            .is_some_and(|rest| rest.parse::<i32>().is_ok())
                    })
                    .collect()
            })
            .unwrap_or_default();
        dirs.sort();
        dirs
    }

    /// Runs `--verify` until every partition of `json` is reported completed.
    fn verify_until_done(&self, bootstrap: &str, json: &str, partitions: &[&str]) -> String {
        eventually(
            "--verify reports completion",
            Duration::from_secs(30),
            || {
                let (ok, out) =
                    self.reassign(bootstrap, &["--verify", "--reassignment-json-file", json]);
                let done = partitions
                    .iter()
                    .all(|p| out.contains(&format!("Reassignment of partition {p} is completed.")));
                (ok && done).then_some(out)
            },
        )
    }

    /// Adds skua broker `id` (a copy of broker 3's settings on its own port and data
    /// dir), starts it and waits until it is registered.
    fn add_skua_broker(&mut self, id: usize, s: &ZkSession) {
        let root = self.dir.path().to_path_buf();
        let b = root.join(format!("broker-{id}"));
        std::fs::create_dir_all(b.join("data")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let template = std::fs::read_to_string(root.join("broker-3/server.properties")).unwrap();
        let props: String = template
            .lines()
            .map(|l| match l.split_once('=') {
                Some(("broker.id", _)) => format!("broker.id={id}"),
                Some(("listeners", _)) => format!("listeners=PLAINTEXT://127.0.0.1:{port}"),
                Some(("advertised.listeners", _)) => {
                    format!("advertised.listeners=PLAINTEXT://127.0.0.1:{port}")
                }
                Some(("log.dirs", _)) => format!("log.dirs={}", b.join("data").display()),
                _ => l.to_string(),
            })
            .map(|l| l + "\n")
            .collect();
        std::fs::write(b.join("server.properties"), props).unwrap();
        std::fs::write(b.join("kind"), "skua\n").unwrap();
        std::fs::write(b.join("port"), format!("{port}\n")).unwrap();
        std::fs::write(root.join("brokers"), format!("{id}\n")).unwrap();
        if !root.join("skua-bin").exists() {
            std::fs::write(root.join("skua-bin"), env!("CARGO_BIN_EXE_skua")).unwrap();
        }
        self.signal("restart", id);
        self.bootstrap.push(format!("127.0.0.1:{port}"));
        eventually("the new broker registers", Duration::from_secs(20), || {
            self.get(s, &znodes::paths::broker(id as i32)).map(|_| ())
        });
    }
}

fn moves(topic: &str, targets: &[&[i32]]) -> String {
    let parts: Vec<String> = targets
        .iter()
        .enumerate()
        .map(|(p, r)| {
            let replicas: Vec<String> = r.iter().map(|b| b.to_string()).collect();
            format!(
                r#"{{"topic":"{topic}","partition":{p},"replicas":[{}]}}"#,
                replicas.join(",")
            )
        })
        .collect();
    format!(r#"{{"version":1,"partitions":[{}]}}"#, parts.join(","))
}

/// Three skua brokers. An RF 2 topic on brokers 1,2 moves to 2,3 with
/// `kafka-reassign-partitions.sh` while an acks=all producer writes to it:
/// `--generate` proposes only the named brokers, `--execute --throttle` starts it and
/// sets the throttle configs, ListPartitionReassignments (`--list`) shows it under way
/// while broker 3 is paused, `--verify` reports completion and removes the throttles;
/// the controller deleted broker 1's partition directories (broker 1 still runs), the
/// topic znode holds the target with nothing adding or removing, and every acknowledged
/// record is readable at its offset. Cancelling a move of nothing answers
/// NO_REASSIGNMENT_IN_PROGRESS; a duplicate or an unknown broker is refused.
#[test]
fn reassign_with_kafkas_tool_under_an_acks_all_producer() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start_kinds(
        "1,2,3",
        &["--override", "auto.leader.rebalance.enable=false"],
    ) else {
        return;
    };
    let zk = c.zk_session();
    // From the controller K and broker A to A and B; B is paused for a while, so the
    // tools bootstrap from K and A only.
    let k = c.zk_controller(&zk) as usize;
    let others: Vec<usize> = (1..=3).filter(|&b| b != k).collect();
    let (a, b) = (others[0], others[1]);
    let bs = format!("{},{}", c.bootstrap[k - 1], c.bootstrap[a - 1]);
    let (ki, ai, bi) = (k as i32, a as i32, b as i32);
    let initial = format!("{k}:{a},{a}:{k}");
    c.topics(&[
        "--create",
        "--topic",
        "moving",
        "--replica-assignment",
        &initial,
    ]);
    let held = format!("{k}:{a}");
    c.topics(&["--create", "--topic", "held", "--replica-assignment", &held]);
    let writer = Writer::start(&c, "moving");
    writer.wait_for_more(200);

    let topics = c.file(
        "topics.json",
        r#"{"version":1,"topics":[{"topic":"moving"}]}"#,
    );
    let list = format!("{a},{b}");
    let (ok, out) = c.reassign(
        &bs,
        &[
            "--generate",
            "--topics-to-move-json-file",
            &topics,
            "--broker-list",
            &list,
        ],
    );
    assert!(ok, "--generate: {out}");
    let proposed = out
        .split("Proposed partition reassignment configuration")
        .nth(1)
        .unwrap();
    assert!(
        proposed.contains(&format!(r#""replicas":[{a},{b}]"#))
            || proposed.contains(&format!(r#""replicas":[{b},{a}]"#)),
        "{out}"
    );
    assert!(
        !proposed.contains(&format!("[{k},")) && !proposed.contains(&format!(",{k}]")),
        "{out}"
    );

    // Kafka's answers to bad requests, from the controller; NOT_CONTROLLER elsewhere.
    let (controller, other) = (k, a);
    let at = |b: usize| c.bootstrap[b - 1].clone();
    let asks = [
        ("moving", 0, Some(vec![ai, ai])),
        ("moving", 1, Some(vec![ai, 9])),
        ("moving", 1, None),
        ("nowhere", 0, Some(vec![ki, ai])),
    ];
    let (top, codes) = alter_reassignments(&at(controller), &asks[..2]);
    assert_eq!(
        (top, codes),
        (0, vec![(0, 39), (1, 39)]),
        "INVALID_REPLICA_ASSIGNMENT"
    );
    let (top, codes) = alter_reassignments(&at(controller), &asks[2..3]);
    assert_eq!(
        (top, codes),
        (0, vec![(1, 85)]),
        "NO_REASSIGNMENT_IN_PROGRESS"
    );
    let (top, codes) = alter_reassignments(&at(controller), &asks[3..]);
    assert_eq!(
        (top, codes),
        (0, vec![(0, 3)]),
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    let (top, _) = alter_reassignments(&at(other), &asks[..1]);
    assert_eq!(top, 41, "NOT_CONTROLLER");
    assert_eq!(list_reassignments(&at(other)), 41);

    // The move, throttled: the tool sets the throttle configs, --verify removes them.
    let json = c.file("move.json", &moves("moving", &[&[ai, bi], &[bi, ai]]));
    let (ok, out) = c.reassign(
        &bs,
        &[
            "--execute",
            "--reassignment-json-file",
            &json,
            "--throttle",
            "50000000",
        ],
    );
    assert!(
        ok && out.contains("Successfully started partition reassignments"),
        "{out}"
    );
    assert!(c
        .configs(&zk, "topics/moving")
        .contains("leader.replication.throttled.replicas"));
    assert!(c
        .configs(&zk, &format!("brokers/{a}"))
        .contains("leader.replication.throttled.rate"));
    writer.wait_for_more(200);
    let out = c.verify_until_done(&bs, &json, &["moving-0", "moving-1"]);
    assert!(out.contains("Clearing broker-level throttles"), "{out}");
    let z = c.assignment(&zk, "moving");
    assert_eq!(z.partitions.0[&0], vec![ai, bi]);
    assert_eq!(z.partitions.0[&1], vec![bi, ai]);
    assert!(z.adding_replicas.0.is_empty() && z.removing_replicas.0.is_empty());
    for p in 0..2 {
        let st = c.partition_state(&zk, "moving", p).unwrap();
        assert!(
            st.leader == ai || st.leader == bi,
            "leader of moving-{p}: {}",
            st.leader
        );
        assert!(!st.isr.contains(&ki), "ISR of moving-{p}: {:?}", st.isr);
    }
    // K still runs: its directories went because the controller deleted them.
    eventually(
        "the removed replicas deleted",
        Duration::from_secs(10),
        || c.partition_dirs(k, "moving").is_empty().then_some(()),
    );
    assert!(!c
        .configs(&zk, "topics/moving")
        .contains("throttled.replicas"));
    assert!(!c
        .configs(&zk, &format!("brokers/{a}"))
        .contains("throttled.rate"));
    writer.wait_for_more(100);
    let acked = writer.stop_and_check(&c, &bs, "moving");
    assert!(acked >= 500, "{acked} acknowledged");
    assert_eq!(c.partition_dirs(b, "moving"), vec!["moving-0", "moving-1"]);

    // B paused: a move to it cannot finish; it is listed (RS, AR, RR as ZooKeeper has
    // them) until --cancel puts the original replicas back and stops B's new replica.
    c.signal("pause", b);
    let (top, codes) = alter_reassignments(&at(k), &[("held", 0, Some(vec![ai, bi]))]);
    assert_eq!((top, codes), (0, vec![(0, 0)]));
    let listed = list_ongoing(&at(k));
    assert_eq!(
        listed,
        vec![("held".to_string(), 0, vec![ai, bi, ki], vec![bi], vec![ki])]
    );
    let z = c.assignment(&zk, "held");
    assert_eq!(
        (
            z.adding_replicas.0[&0].clone(),
            z.removing_replicas.0[&0].clone()
        ),
        (vec![bi], vec![ki])
    );
    let cancel = c.file("cancel.json", &moves("held", &[&[ai, bi]]));
    let (ok, out) = c.reassign(
        &bs,
        &[
            "--cancel",
            "--reassignment-json-file",
            &cancel,
            // B, paused, cannot answer for its broker configs.
            "--preserve-throttles",
        ],
    );
    c.signal("resume", b);
    assert!(
        ok && out.contains("Successfully cancelled partition reassignment for: held-0"),
        "{out}"
    );
    let z = c.assignment(&zk, "held");
    assert_eq!(
        z.partitions.0[&0],
        vec![ai, ki],
        "the original replicas, in RS order"
    );
    assert!(z.adding_replicas.0.is_empty() && z.removing_replicas.0.is_empty());
    assert!(list_ongoing(&at(k)).is_empty());
    eventually(
        "B's cancelled replica deleted",
        Duration::from_secs(10),
        || c.partition_dirs(b, "held").is_empty().then_some(()),
    );
}

/// Brokers 1 and 2 skua (one of them controls), broker 3 Apache Kafka 3.9.1. An RF 2
/// topic moves from the controller and the other skua broker to that broker and the
/// Kafka broker under an acks=all producer: the Kafka broker creates its replica from
/// the LeaderAndIsr the skua controller sent, follows the skua leader into the ISR, and
/// the move completes; every acknowledged record is readable afterwards.
#[test]
fn reassign_onto_a_kafka_broker() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) =
        Cluster::start_kinds("1,2", &["--override", "auto.leader.rebalance.enable=false"])
    else {
        return;
    };
    let zk = c.zk_session();
    let k = c.zk_controller(&zk) as usize;
    assert!(k == 1 || k == 2, "a skua broker controls");
    let a = 3 - k;
    let bs = c.bootstrap.join(",");
    let (ki, ai) = (k as i32, a as i32);
    let initial = format!("{k}:{a}");
    c.topics(&[
        "--create",
        "--topic",
        "mixed",
        "--replica-assignment",
        &initial,
    ]);
    let writer = Writer::start(&c, "mixed");
    writer.wait_for_more(200);
    let json = c.file("mixed.json", &moves("mixed", &[&[ai, 3]]));
    let (ok, out) = c.reassign(&bs, &["--execute", "--reassignment-json-file", &json]);
    assert!(
        ok && out.contains("Successfully started partition reassignment"),
        "{out}"
    );
    writer.wait_for_more(200);
    c.verify_until_done(&bs, &json, &["mixed-0"]);
    let z = c.assignment(&zk, "mixed");
    assert_eq!(z.partitions.0[&0], vec![ai, 3]);
    assert!(z.adding_replicas.0.is_empty() && z.removing_replicas.0.is_empty());
    let st = c.partition_state(&zk, "mixed", 0).unwrap();
    assert!(
        st.isr.contains(&3) && !st.isr.contains(&ki),
        "ISR {:?}",
        st.isr
    );
    eventually(
        "the removed replica deleted",
        Duration::from_secs(10),
        || c.partition_dirs(k, "mixed").is_empty().then_some(()),
    );
    assert_eq!(c.partition_dirs(3, "mixed"), vec!["mixed-0"]);
    let acked = writer.stop_and_check(&c, &bs, "mixed");
    assert!(acked >= 400, "{acked} acknowledged");
}

/// Adding and removing a broker. A fourth skua broker joins a running three-broker
/// cluster: it registers, a new topic gets partitions on it, and a reassignment moves an
/// existing topic (under an acks=all producer) onto it. Then broker 1 leaves: its
/// replicas are reassigned away, after which it is stopped, and every acknowledged record
/// is still readable from the brokers that remain.
#[test]
fn add_a_broker_then_remove_one() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut c) = Cluster::start_kinds(
        "1,2,3",
        &["--override", "auto.leader.rebalance.enable=false"],
    ) else {
        return;
    };
    let zk = c.zk_session();
    c.topics(&[
        "--create",
        "--topic",
        "old",
        "--replica-assignment",
        "1:2,2:1",
    ]);
    let writer = Writer::start(&c, "old");
    writer.wait_for_more(200);

    c.add_skua_broker(4, &zk);
    // New partitions go to every live broker, the new one too.
    c.topics(&[
        "--create",
        "--topic",
        "fresh",
        "--partitions",
        "4",
        "--replication-factor",
        "1",
    ]);
    let fresh = c.assignment(&zk, "fresh");
    let on = |b: i32| {
        fresh
            .partitions
            .0
            .iter()
            .filter(|(_, r)| r.contains(&b))
            .count()
    };
    assert_eq!(
        (on(1), on(2), on(3), on(4)),
        (1, 1, 1, 1),
        "{:?}",
        fresh.partitions.0
    );

    // Existing partitions move to it.
    let bs = c.bootstrap.join(",");
    let json = c.file("onto4.json", &moves("old", &[&[4, 2], &[2, 4]]));
    let (ok, out) = c.reassign(&bs, &["--execute", "--reassignment-json-file", &json]);
    assert!(ok, "{out}");
    writer.wait_for_more(200);
    c.verify_until_done(&bs, &json, &["old-0", "old-1"]);
    assert_eq!(c.partition_dirs(4, "old"), vec!["old-0", "old-1"]);

    // Broker 1 leaves: what it still hosts moves away first.
    let (p1, _) = fresh
        .partitions
        .0
        .iter()
        .find(|(_, r)| r.contains(&1))
        .unwrap();
    let away: Vec<String> = vec![format!(
        r#"{{"topic":"fresh","partition":{p1},"replicas":[4]}}"#
    )];
    let json = c.file(
        "away.json",
        &format!(r#"{{"version":1,"partitions":[{}]}}"#, away.join(",")),
    );
    let (ok, out) = c.reassign(&bs, &["--execute", "--reassignment-json-file", &json]);
    assert!(ok, "{out}");
    c.verify_until_done(&bs, &json, &[&format!("fresh-{p1}")]);
    eventually("broker 1 hosts nothing", Duration::from_secs(10), || {
        (c.partition_dirs(1, "old").is_empty() && c.partition_dirs(1, "fresh").is_empty())
            .then_some(())
    });
    c.signal("term", 1);
    let rest = c.bootstrap[1..].join(",");
    writer.wait_for_more(100);
    let acked = writer.stop_and_check(&c, &rest, "old");
    assert!(acked >= 500, "{acked} acknowledged");
}

/// AlterPartitionReassignments v0 to `addr`: the top-level error code and each
/// partition's, in the order answered.
fn alter_reassignments(
    addr: &str,
    asks: &[(&str, i32, Option<Vec<i32>>)],
) -> (i16, Vec<(i32, i16)>) {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::{AlterPartitionReassignmentsRequest, BrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let topics = asks
        .iter()
        .map(|(t, p, r)| {
            ReassignableTopic::default()
                .with_name(TopicName(StrBytes::from_string(t.to_string())))
                .with_partitions(vec![ReassignablePartition::default()
                    .with_partition_index(*p)
                    .with_replicas(
                        r.as_ref().map(|r| r.iter().map(|&b| BrokerId(b)).collect()),
                    )])
        })
        .collect();
    let req = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(topics);
    rt().block_on(async {
        let mut client = common::Client::connect(addr.parse().unwrap()).await;
        let resp = client.send(&req, 0).await;
        let codes = resp
            .responses
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (p.partition_index, p.error_code))
            })
            .collect();
        (resp.error_code, codes)
    })
}

/// A listed reassignment: topic, partition, replicas, adding, removing.
type Ongoing = (String, i32, Vec<i32>, Vec<i32>, Vec<i32>);

/// ListPartitionReassignments v0 (all partitions) from `addr`: (topic, partition,
/// replicas, adding, removing) of each.
fn list_ongoing(addr: &str) -> Vec<Ongoing> {
    use kafka_protocol::messages::ListPartitionReassignmentsRequest;
    let req = ListPartitionReassignmentsRequest::default().with_timeout_ms(30_000);
    let ids = |v: &[kafka_protocol::messages::BrokerId]| v.iter().map(|b| b.0).collect();
    rt().block_on(async {
        let mut client = common::Client::connect(addr.parse().unwrap()).await;
        let resp = client.send(&req, 0).await;
        assert_eq!(resp.error_code, 0);
        resp.topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    (
                        t.name.0.to_string(),
                        p.partition_index,
                        ids(&p.replicas),
                        ids(&p.adding_replicas),
                        ids(&p.removing_replicas),
                    )
                })
            })
            .collect()
    })
}

/// ListPartitionReassignments v0 (all partitions) to `addr`: its top-level error code.
fn list_reassignments(addr: &str) -> i16 {
    use kafka_protocol::messages::ListPartitionReassignmentsRequest;
    let req = ListPartitionReassignmentsRequest::default().with_timeout_ms(30_000);
    rt().block_on(async {
        let mut client = common::Client::connect(addr.parse().unwrap()).await;
        client.send(&req, 0).await.error_code
    })
}
