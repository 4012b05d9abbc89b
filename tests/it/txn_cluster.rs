//! Transactions across the brokers of a ZooKeeper-mode cluster (`scripts/cluster`: ZooKeeper
//! 3.8 plus three brokers on loopback), driven by the Java (Kafka 3.9.1) transactional
//! producer and read_committed consumer of tests/java/TxnClusterClient.java: the
//! coordinator writes its markers to partitions led by other brokers (skua or Kafka), and
//! a coordinator killed with SIGKILL mid-transaction is replaced by the leader that takes
//! over its `__transaction_state` partition. Each scenario starts its own cluster and stops
//! it; they run one at a time. Skipped, with a message, only when java is not installed.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::cluster::{eventually, Cluster, ONE_AT_A_TIME};

const TOPIC: &str = "orders";

/// Small coordinator topics load fast; everything replicated three times.
const OVERRIDES: &[&str] = &[
    "--override",
    "transaction.state.log.num.partitions=3",
    "--override",
    "offsets.topic.num.partitions=3",
    "--override",
    "transaction.state.log.replication.factor=3",
    "--override",
    "transaction.state.log.min.isr=2",
    "--override",
    "default.replication.factor=3",
    "--override",
    "auto.leader.rebalance.enable=false",
];

/// The helpers this file's scenarios add to the cluster (a trait of its own, so
/// helpers of the same name in other scenario files do not collide).
trait ClusterHelpers {
    fn all(&self) -> String;
    fn java_classes(&self) -> PathBuf;
    fn libs(&self) -> String;
    fn java(&self, args: &[&str]) -> Command;
    fn java_lines(&self, args: &[&str]) -> Vec<String>;
    fn read_committed(&self) -> Vec<String>;
    fn read_committed_until(&self, expected: &[String]);
    fn create_orders(&self);
}

impl ClusterHelpers for Cluster {
    fn all(&self) -> String {
        self.bootstrap.join(",")
    }

    /// Compiles the Java client once per cluster, against the cluster's Kafka jars.
    fn java_classes(&self) -> PathBuf {
        let classes = self.dir.path().join("classes");
        if classes.join("TxnClusterClient.class").exists() {
            return classes;
        }
        let source =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/java/TxnClusterClient.java");
        let out = Command::new("javac")
            .args(["-nowarn", "-d"])
            .arg(&classes)
            .arg("-cp")
            .arg(format!("{}/*", self.libs()))
            .arg(source)
            .output()
            .expect("javac runs");
        assert!(
            out.status.success(),
            "javac: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        classes
    }

    fn libs(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("libs"))
            .unwrap()
            .trim()
            .to_string()
    }

    fn java(&self, args: &[&str]) -> Command {
        let classes = self.java_classes();
        let mut cmd = Command::new("java");
        cmd.arg(format!(
            "-Dlog4j.configuration=file:{}",
            self.dir.path().join("log4j-quiet.properties").display()
        ))
        .arg(format!(
            "-Dlog4j2.configurationFile={}",
            self.dir.path().join("log4j2-quiet.properties").display()
        ))
        .arg("-cp")
        .arg(format!("{}:{}/*", classes.display(), self.libs()))
        .arg("TxnClusterClient")
        .args(args);
        cmd
    }

    /// Runs the Java client to its end: its stdout lines.
    fn java_lines(&self, args: &[&str]) -> Vec<String> {
        let out = self
            .java(args)
            .stdin(Stdio::null())
            .output()
            .expect("java runs");
        assert!(
            out.status.success(),
            "TxnClusterClient {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// Every value a read_committed consumer reads, sorted.
    fn read_committed(&self) -> Vec<String> {
        let mut lines = self.java_lines(&["consume", &self.all(), TOPIC]);
        assert_eq!(
            lines.pop().as_deref(),
            Some("END"),
            "the consumer reached the LSO"
        );
        lines.sort();
        lines
    }

    /// Reads committed until `expected` (sorted) is what is read. A commit is answered
    /// once it is prepared; its markers reach the partitions after (as in Kafka), and a
    /// partition shows the transaction only once its marker is there. A record read that
    /// is not expected, or read twice, fails at once.
    fn read_committed_until(&self, expected: &[String]) {
        eventually(
            "every committed record read once",
            Duration::from_secs(60),
            || {
                let got = self.read_committed();
                let mut unexpected = got.clone();
                for e in expected {
                    if let Some(i) = unexpected.iter().position(|g| g == e) {
                        unexpected.remove(i);
                    }
                }
                assert!(
                    unexpected.is_empty(),
                    "read but not committed once: {unexpected:?}"
                );
                (got == expected).then_some(())
            },
        );
    }

    /// `orders`, three partitions led by brokers 1, 2 and 3, each replicated to all.
    fn create_orders(&self) {
        let out = self.run(
            "topics",
            &[
                "--create",
                "--topic",
                TOPIC,
                "--replica-assignment",
                "1:2:3,2:3:1,3:1:2",
            ],
        );
        assert!(
            out.status.success(),
            "kafka-topics.sh --create: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        eventually(
            "orders' partitions led as assigned",
            Duration::from_secs(30),
            || {
                let out = self.run("topics", &["--describe", "--topic", TOPIC]);
                let text = String::from_utf8_lossy(&out.stdout).to_string();
                let led = (0..3).all(|p| {
                    text.lines().any(|l| {
                        l.contains(&format!("Partition: {p}\t"))
                            && l.contains(&format!("Leader: {}\t", p + 1))
                            && l.contains("Isr: ")
                            && l.split("Isr: ").nth(1).is_some_and(|isr| {
                                isr.split('\t').next().unwrap_or("").split(',').count() == 3
                            })
                    })
                });
                led.then_some(())
            },
        );
    }
}

/// What `run` commits for `id` with `n` transactions: the even ones, one record per
/// partition each.
fn committed_by(id: &str, n: usize) -> Vec<String> {
    (0..n)
        .step_by(2)
        .flat_map(|i| (0..3).map(move |p| format!("{id}:t{i}-p{p}")))
        .collect()
}

/// Commits and aborts from transactional ids whose coordinators are spread over the
/// brokers: every commit is read once, no aborted record ever.
fn commits_seen_once_aborts_never(c: &Cluster) {
    c.create_orders();
    let ids = ["txn-a", "txn-b", "txn-c", "txn-d"];
    let mut expected = Vec::new();
    for id in ids {
        let start = Instant::now();
        let out = c.java_lines(&["run", &c.all(), TOPIC, id, "6"]);
        assert_eq!(out, ["done"], "{id}");
        eprintln!("{id}: 6 transactions in {:?}", start.elapsed());
        expected.extend(committed_by(id, 6));
    }
    expected.sort();
    c.read_committed_until(&expected);
}

#[test]
fn markers_reach_partitions_led_by_every_broker() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start_kinds("1,2,3", OVERRIDES) else {
        return;
    };
    commits_seen_once_aborts_never(&c);
}

/// Broker 3 is Apache Kafka 3.9.1: skua's coordinators send it markers for the partition
/// it leads, and Kafka's coordinator (for the ids whose `__transaction_state` partition
/// it leads) sends skua its markers.
#[test]
fn markers_between_skua_and_a_kafka_broker() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start_kinds("1,2", OVERRIDES) else {
        return;
    };
    commits_seen_once_aborts_never(&c);
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Each broker is reached (by clients and other brokers alike) through a proxy recording
/// the WriteTxnMarkers it carries. `wide` has two partitions led by each broker, so a
/// transaction's coordinator has two markers for each other broker: they leave in one
/// request, and every committed record is read.
#[test]
fn a_transactions_markers_for_one_broker_go_in_one_request() {
    use common::cluster::rt;
    use common::request_proxy::RequestProxy;
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let listen: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let proxies: Vec<RequestProxy> = listen
        .iter()
        .map(|&port| {
            rt().block_on(RequestProxy::start(
                "127.0.0.1:0".parse().unwrap(),
                format!("127.0.0.1:{port}").parse().unwrap(),
            ))
        })
        .collect();
    let ports = listen
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let advertised = proxies
        .iter()
        .map(|p| p.addr.port().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut args = OVERRIDES.to_vec();
    args.extend(["--ports", &ports, "--advertised-ports", &advertised]);
    let Some(c) = Cluster::start_kinds("1,2,3", &args) else {
        return;
    };
    let out = c.run(
        "topics",
        &[
            "--create",
            "--topic",
            "wide",
            "--replica-assignment",
            "1:2:3,1:2:3,2:3:1,2:3:1,3:1:2,3:1:2",
        ],
    );
    assert!(
        out.status.success(),
        "kafka-topics.sh --create: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One committed transaction for each id (`run` aborts every second one, and an abort
    // may end before all its records were sent); the ids' coordinators differ.
    let ids = ["wide-a", "wide-b", "wide-c"];
    let mut committed = Vec::new();
    for id in ids {
        assert_eq!(c.java_lines(&["run", &c.all(), "wide", id, "1"]), ["done"]);
        committed.extend((0..6).map(|p| format!("{id}:t0-p{p}")));
    }
    committed.sort();
    eventually(
        "every committed record read",
        Duration::from_secs(60),
        || {
            let mut got = c.java_lines(&["consume", &c.all(), "wide"]);
            assert_eq!(got.pop().as_deref(), Some("END"));
            got.sort();
            (got == committed).then_some(())
        },
    );
    // The coordinator's own two partitions are local appends; each other broker gets
    // one request per transaction naming both of its partitions.
    let requests: Vec<_> = proxies.iter().flat_map(|p| p.write_txn_markers()).collect();
    let named: usize = requests.iter().flatten().map(|&(_, n)| n).sum();
    assert!(
        named >= 4 * ids.len(),
        "markers for two other brokers' partitions: {requests:?}"
    );
    assert!(
        requests
            .iter()
            .all(|r| r.iter().map(|&(_, n)| n).sum::<usize>() >= 2),
        "a request with one partition: the other broker's second marker went alone: {requests:?}"
    );
}

/// A transaction whose records are on every broker; the coordinator's broker is killed
/// before the commit. The producer finds the new coordinator (the new leader of the
/// transaction's `__transaction_state` partition, which loaded the ongoing transaction
/// from its replica), which completes the commit: the records are read exactly once.
#[test]
fn a_killed_coordinator_is_replaced_mid_transaction() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start_kinds("1,2,3", OVERRIDES) else {
        return;
    };
    c.create_orders();
    // A committed transaction first, so the topic has data the kill must not disturb.
    assert_eq!(
        c.java_lines(&["run", &c.all(), TOPIC, "txn-before", "2"]),
        ["done"]
    );

    let mut held = c
        .java(&["hold", &c.all(), TOPIC, "txn-held"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("java runs");
    let mut lines = BufReader::new(held.stdout.take().unwrap());
    let line = next_line(&mut lines, &mut held);
    let coordinator: usize = line
        .strip_prefix("COORDINATOR ")
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("the producer named its coordinator, not {line:?}"));
    let killed_at = Instant::now();
    c.signal("kill", coordinator);

    writeln!(held.stdin.as_mut().unwrap()).unwrap();
    let outcome = next_line(&mut lines, &mut held);
    assert_eq!(outcome, "COMMITTED");
    eprintln!("committed {:?} after the kill", killed_at.elapsed());
    let _ = held.wait();

    let mut expected = committed_by("txn-before", 2);
    expected.extend((0..3).map(|p| format!("held-p{p}")));
    expected.sort();
    c.read_committed_until(&expected);
    let log = c.log(coordinator % 3 + 1) + &c.log((coordinator + 1) % 3 + 1);
    assert!(!log.contains("panicked"), "no broker panicked");
}

/// The next line the child prints (30 s at most); the child is killed on failure.
fn next_line(lines: &mut BufReader<ChildStdout>, child: &mut Child) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut line = String::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            let _ = lines.read_line(&mut line);
            let _ = tx.send(());
        });
        if rx.recv_timeout(Duration::from_secs(60)).is_err() {
            let _ = child.kill();
        }
    });
    line.trim().to_string()
}
