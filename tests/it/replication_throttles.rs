//! Replication throttles (KIP-73) on a real ZooKeeper-mode cluster of three skua brokers
//! (`scripts/cluster`), set with Apache Kafka 3.9.1's kafka-configs.sh and kafka-topics.sh:
//! a new replica catches up at about the configured rate, held back by its leader or by
//! itself, and at full speed once the throttle is removed. Skipped, with a message, only
//! when java is not installed.

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::cluster::{eventually, Cluster, ONE_AT_A_TIME};
use skua::zk::session::ZkSession;

/// The throttle, bytes/s.
const RATE: u64 = 1_000_000;
/// Records of 1000 bytes each topic gets per phase: about 8 MB, eight seconds at RATE.
const RECORDS: u64 = 8_000;

/// The helpers this file's scenarios add to the cluster (a trait of its own, so
/// helpers of the same name in other scenario files do not collide).
trait ClusterHelpers {
    fn all(&self) -> String;
    fn tool(&self, args: &[&str]) -> String;
    fn configs(&self, args: &[&str]);
    fn create(&self, topic: &str, leader: i32, follower: i32, configs: &[&str]);
    fn produce(&self, topic: &str);
    fn isr(&self, s: &ZkSession, topic: &str) -> Vec<i32>;
    fn segment(&self, broker: i32, topic: &str) -> PathBuf;
    fn segment_len(&self, broker: i32, topic: &str) -> u64;
    fn catch_up(&self, s: &ZkSession, follower: i32, topics: &[&str]) -> Vec<Duration>;
}

impl ClusterHelpers for Cluster {
    fn all(&self) -> String {
        self.bootstrap.join(",")
    }

    /// Runs a Kafka 3.9.1 tool class, which must succeed; its stdout.
    fn tool(&self, args: &[&str]) -> String {
        let out = self.run("tool", args);
        assert!(
            out.status.success(),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// kafka-configs.sh against every broker.
    fn configs(&self, args: &[&str]) {
        let all = self.all();
        let mut full = vec!["kafka.admin.ConfigCommand", "--bootstrap-server", &all];
        full.extend_from_slice(args);
        self.tool(&full);
    }

    /// kafka-topics.sh --create of a one-partition topic on `leader` and `follower`.
    fn create(&self, topic: &str, leader: i32, follower: i32, configs: &[&str]) {
        let assignment = format!("{leader}:{follower}");
        let mut args = vec![
            "--create",
            "--topic",
            topic,
            "--replica-assignment",
            &assignment,
        ];
        for c in configs {
            args.extend_from_slice(&["--config", c]);
        }
        let out = self.run("topics", &args);
        assert!(
            out.status.success(),
            "kafka-topics.sh --create {topic}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// kafka-producer-perf-test.sh: RECORDS records of 1000 bytes, acks=1.
    fn produce(&self, topic: &str) {
        let records = RECORDS.to_string();
        let props = format!("bootstrap.servers={}", self.all());
        self.tool(&[
            "org.apache.kafka.tools.ProducerPerformance",
            "--topic",
            topic,
            "--num-records",
            &records,
            "--record-size",
            "1000",
            "--throughput",
            "-1",
            "--producer-props",
            &props,
            "acks=1",
            "batch.size=65536",
            "linger.ms=5",
        ]);
    }

    fn isr(&self, s: &ZkSession, topic: &str) -> Vec<i32> {
        self.partition_state(s, topic, 0)
            .map(|st| st.isr)
            .unwrap_or_default()
    }

    fn segment(&self, broker: i32, topic: &str) -> PathBuf {
        self.dir.path().join(format!(
            "broker-{broker}/data/{topic}-0/00000000000000000000.log"
        ))
    }

    fn segment_len(&self, broker: i32, topic: &str) -> u64 {
        std::fs::metadata(self.segment(broker, topic)).map_or(0, |m| m.len())
    }

    /// Restarts `follower` and returns how long after that each topic had it back in its
    /// ISR, in the order given.
    fn catch_up(&self, s: &ZkSession, follower: i32, topics: &[&str]) -> Vec<Duration> {
        let start = Instant::now();
        self.signal("restart", follower as usize);
        let mut joined: Vec<Option<Duration>> = vec![None; topics.len()];
        while joined.iter().any(Option::is_none) {
            assert!(
                start.elapsed() < Duration::from_secs(90),
                "replicas back in sync within 90 s: {joined:?}"
            );
            for (t, j) in topics.iter().zip(joined.iter_mut()) {
                if j.is_none() && self.isr(s, t).contains(&follower) {
                    *j = Some(start.elapsed());
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        joined.into_iter().flatten().collect()
    }
}

/// Three skua brokers; replication is measured over two one-second windows
/// (`replication.quota.window.num=2`), so a first burst is one second's worth. Broker L
/// leads, broker F (stopped while the topics fill) is the new replica. `lt` is throttled
/// on L's side (`leader.replication.throttled.replicas`, L's
/// `leader.replication.throttled.rate`), `ft` on F's side, `free` not at all. F catches up
/// with `free` at once and with each throttled topic at about the rate; then, with the
/// rate of L removed and `ft`'s throttled replicas removed, a second round of records
/// comes as fast as `free`'s. The replicas' segments are byte-identical throughout.
#[test]
fn new_replicas_catch_up_at_the_throttled_rate() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start_kinds(
        "1,2,3",
        &[
            "--override",
            "replication.quota.window.num=2",
            "--override",
            "auto.leader.rebalance.enable=false",
        ],
    ) else {
        return;
    };
    let zk = c.zk_session();
    let controller = c.zk_controller(&zk);
    // Neither is the controller: stopping F moves no controller.
    let others: Vec<i32> = (1..=3).filter(|&b| b != controller).collect();
    let (l, f) = (others[0], others[1]);
    let rate = RATE.to_string();
    c.configs(&[
        "--entity-type",
        "brokers",
        "--entity-name",
        &l.to_string(),
        "--alter",
        "--add-config",
        &format!("leader.replication.throttled.rate={rate}"),
    ]);
    c.configs(&[
        "--entity-type",
        "brokers",
        "--entity-name",
        &f.to_string(),
        "--alter",
        "--add-config",
        &format!("follower.replication.throttled.rate={rate}"),
    ]);

    c.signal("kill", f as usize);
    c.create(
        "lt",
        l,
        f,
        &[&format!("leader.replication.throttled.replicas=0:{l}")],
    );
    c.create(
        "ft",
        l,
        f,
        &[&format!("follower.replication.throttled.replicas=0:{f}")],
    );
    c.create("free", l, f, &[]);
    for t in ["lt", "ft", "free"] {
        eventually("led by L", Duration::from_secs(20), || {
            c.partition_state(&zk, t, 0)
                .filter(|s| s.leader == l)
                .map(|_| ())
        });
        c.produce(t);
    }
    let bytes = c.segment_len(l, "lt");
    assert!(bytes >= RECORDS * 1000, "{bytes} bytes stored");
    let expected = Duration::from_secs_f64(bytes as f64 / RATE as f64);

    let took = c.catch_up(&zk, f, &["lt", "ft", "free"]);
    let (lt, ft, free) = (took[0], took[1], took[2]);
    eprintln!("{bytes} bytes each; caught up: leader-throttled {lt:?}, follower-throttled {ft:?}, unthrottled {free:?}; at the rate {expected:?}");
    assert!(free < Duration::from_secs(5), "unthrottled in {free:?}");
    for (what, t) in [("leader", lt), ("follower", ft)] {
        // The first second's burst goes at once; the rest at the rate, give or take a
        // fetch (1 MiB) and the time F takes to start and rejoin.
        assert!(
            t >= expected.mul_f64(0.5) && t <= expected.mul_f64(2.0) + free,
            "{what}-throttled replica caught up in {t:?}; {expected:?} expected at {RATE} B/s"
        );
        assert!(
            t > free + Duration::from_secs(2),
            "{what}: {t:?} vs {free:?}"
        );
    }
    for t in ["lt", "ft", "free"] {
        assert_eq!(
            std::fs::read(c.segment(f, t)).unwrap(),
            std::fs::read(c.segment(l, t)).unwrap(),
            "{t}: the new replica's segment is the leader's"
        );
    }

    // The throttles removed: the leader's rate, and ft's throttled replicas.
    c.signal("kill", f as usize);
    for t in ["lt", "ft", "free"] {
        eventually("F out of the ISR", Duration::from_secs(30), || {
            (c.isr(&zk, t) == vec![l]).then_some(())
        });
        c.produce(t);
    }
    c.configs(&[
        "--entity-type",
        "brokers",
        "--entity-name",
        &l.to_string(),
        "--alter",
        "--delete-config",
        "leader.replication.throttled.rate",
    ]);
    c.configs(&[
        "--entity-type",
        "topics",
        "--entity-name",
        "ft",
        "--alter",
        "--delete-config",
        "follower.replication.throttled.replicas",
    ]);
    let took = c.catch_up(&zk, f, &["lt", "ft", "free"]);
    eprintln!("unthrottled again: {took:?}");
    for (t, d) in ["lt", "ft"].iter().zip(&took) {
        assert!(
            *d < took[2] + Duration::from_secs(2),
            "{t} caught up in {d:?}, unthrottled {:?}",
            took[2]
        );
        assert_eq!(
            std::fs::read(c.segment(f, t)).unwrap(),
            std::fs::read(c.segment(l, t)).unwrap(),
            "{t}: the replica's segment is the leader's"
        );
    }
}
