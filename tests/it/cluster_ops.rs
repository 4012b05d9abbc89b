//! Cluster operations in ZooKeeper mode, driven with Apache Kafka 3.9.1's own tools against
//! real clusters (`scripts/cluster`: ZooKeeper 3.8 plus three brokers on loopback):
//! leader elections (`kafka-leader-election.sh`, the `/admin/preferred_replica_election`
//! znode) and the controller's automatic leader rebalance. Each scenario starts its own
//! cluster and stops it; they run one at a time. Skipped, with a message, only when java is
//! not installed.

use crate::common;

use std::time::{Duration, Instant};

use common::cluster::{eventually, rt, Cluster, ONE_AT_A_TIME, SESSION_TIMEOUT_MS};
use skua::zk::session::ZkSession;

/// The helpers this file's scenarios add to the cluster (a trait of its own, so
/// helpers of the same name in other scenario files do not collide).
trait ClusterHelpers {
    fn all(&self) -> String;
    fn topics(&self, args: &[&str]) -> String;
    fn leader_election(&self, args: &[&str]) -> (bool, String);
    fn leader(&self, s: &ZkSession, topic: &str, partition: i32) -> i32;
    fn isr(&self, s: &ZkSession, topic: &str, partition: i32) -> Vec<i32>;
}

impl ClusterHelpers for Cluster {
    fn all(&self) -> String {
        self.bootstrap.join(",")
    }

    fn topics(&self, args: &[&str]) -> String {
        let out = self.run("topics", args);
        assert!(
            out.status.success(),
            "kafka-topics.sh {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// `kafka-leader-election.sh ARGS` against every broker: (success, stdout + stderr).
    fn leader_election(&self, args: &[&str]) -> (bool, String) {
        let bootstrap = self.all();
        let mut full = vec![
            "org.apache.kafka.tools.LeaderElectionCommand",
            "--bootstrap-server",
            &bootstrap,
        ];
        full.extend_from_slice(args);
        let out = self.run("tool", &full);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    fn leader(&self, s: &ZkSession, topic: &str, partition: i32) -> i32 {
        self.partition_state(s, topic, partition)
            .map_or(-2, |st| st.leader)
    }

    fn isr(&self, s: &ZkSession, topic: &str, partition: i32) -> Vec<i32> {
        self.partition_state(s, topic, partition)
            .map(|st| st.isr)
            .unwrap_or_default()
    }
}

/// Three skua brokers, automatic rebalance off. Broker A (not the controller) is the
/// preferred leader of `pref`; stopped and restarted, it is back in the ISR but leads
/// nothing until asked:
/// kafka-leader-election.sh (PREFERRED) moves partition 0 back, the
/// `/admin/preferred_replica_election` znode partition 1 (and is deleted); a partition
/// already led by its preferred replica is reported so; with the preferred replica down
/// the election fails with PREFERRED_LEADER_NOT_AVAILABLE. An offline partition whose
/// only ISR member is gone gets a leader only from an UNCLEAN election.
#[test]
fn leader_elections_with_kafkas_tool_and_znode() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start_kinds(
        "1,2,3",
        &["--override", "auto.leader.rebalance.enable=false"],
    ) else {
        return;
    };
    let zk = c.zk_session();
    // The two brokers that are not the controller: stopping them moves no controller.
    let controller = c.zk_controller(&zk);
    let others: Vec<i32> = (1..=3).filter(|&b| b != controller).collect();
    let (a, b) = (others[0], others[1]);
    let (sa, sb) = (a as usize, b as usize);
    c.topics(&[
        "--create",
        "--topic",
        "pref",
        "--replica-assignment",
        format!("{a}:{b},{a}:{b}").as_str(),
    ]);
    c.topics(&[
        "--create",
        "--topic",
        "lone",
        "--replica-assignment",
        format!("{b}:{a}").as_str(),
    ]);
    for p in 0..2 {
        eventually("pref led by broker A", Duration::from_secs(20), || {
            (c.leader(&zk, "pref", p) == a && c.isr(&zk, "pref", p).len() == 2).then_some(())
        });
    }
    eventually("lone fully in sync", Duration::from_secs(20), || {
        (c.isr(&zk, "lone", 0).len() == 2).then_some(())
    });

    // A stops (controlled shutdown): its leaderships go to B.
    c.signal("term", sa);
    for p in 0..2 {
        eventually("pref led by broker B", Duration::from_secs(20), || {
            (c.leader(&zk, "pref", p) == b).then_some(())
        });
    }
    // With A down, its preferred election cannot happen.
    let (ok, out) = c.leader_election(&[
        "--election-type",
        "PREFERRED",
        "--topic",
        "pref",
        "--partition",
        "0",
    ]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("PreferredLeaderNotAvailableException"),
        "the tool reports PREFERRED_LEADER_NOT_AVAILABLE: {out}"
    );
    assert_eq!(c.leader(&zk, "pref", 0), b);

    c.signal("restart", sa);
    for p in 0..2 {
        eventually(
            "broker A back in pref's ISR",
            Duration::from_secs(30),
            || (c.isr(&zk, "pref", p).contains(&a)).then_some(()),
        );
    }
    // Rebalance is off: the leaders stay where they are.
    std::thread::sleep(Duration::from_secs(6));
    assert_eq!(
        c.leader(&zk, "pref", 0),
        b,
        "nothing moves without a request"
    );
    assert_eq!(
        c.leader(&zk, "pref", 1),
        b,
        "nothing moves without a request"
    );

    let (ok, out) = c.leader_election(&[
        "--election-type",
        "PREFERRED",
        "--topic",
        "pref",
        "--partition",
        "0",
    ]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Successfully completed leader election (PREFERRED) for partitions pref-0"),
        "{out}"
    );
    assert_eq!(c.leader(&zk, "pref", 0), a);
    assert_eq!(c.leader(&zk, "pref", 1), b, "only the partition asked for");
    // kafka-topics.sh (from the metadata every broker serves) agrees.
    let described = c.topics(&["--describe", "--topic", "pref"]);
    assert!(
        described
            .lines()
            .any(|l| l.contains("Partition: 0") && l.contains(&format!("Leader: {a}"))),
        "{described}"
    );

    let (ok, out) = c.leader_election(&[
        "--election-type",
        "PREFERRED",
        "--topic",
        "pref",
        "--partition",
        "0",
    ]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Valid replica already elected for partitions pref-0"),
        "ELECTION_NOT_NEEDED: {out}"
    );

    // The legacy znode, as Kafka's controller reads it.
    let request = br#"{"version":1,"partitions":[{"topic":"pref","partition":1}]}"#;
    rt().block_on(zk.create_recursive("/admin/preferred_replica_election", request))
        .unwrap();
    eventually(
        "the znode's preferred election done",
        Duration::from_secs(15),
        || (c.leader(&zk, "pref", 1) == a).then_some(()),
    );
    eventually(
        "the znode deleted once acted on",
        Duration::from_secs(10),
        || {
            rt().block_on(zk.get("/admin/preferred_replica_election"))
                .unwrap()
                .is_none()
                .then_some(())
        },
    );

    // lone: A leaves the ISR (stopped), then B, its last ISR member: offline.
    c.signal("term", sa);
    eventually("lone's ISR is B alone", Duration::from_secs(20), || {
        (c.isr(&zk, "lone", 0) == vec![b]).then_some(())
    });
    c.signal("term", sb);
    eventually("lone offline", Duration::from_secs(20), || {
        (c.leader(&zk, "lone", 0) == -1).then_some(())
    });
    c.signal("restart", sa);
    std::thread::sleep(Duration::from_secs(4));
    assert_eq!(
        c.leader(&zk, "lone", 0),
        -1,
        "A is out of the ISR: no clean leader"
    );
    let (ok, out) = c.leader_election(&[
        "--election-type",
        "UNCLEAN",
        "--topic",
        "lone",
        "--partition",
        "0",
    ]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Successfully completed leader election (UNCLEAN) for partitions lone-0"),
        "{out}"
    );
    let st = c.partition_state(&zk, "lone", 0).unwrap();
    assert_eq!((st.leader, st.isr), (a, vec![a]));
}

/// Three skua brokers with a 2 s imbalance check: broker A (not the controller) is
/// killed, its leaderships move; restarted, it leads its preferred partitions again within a check or two after it
/// is back in the ISR, with nobody asking.
#[test]
fn auto_leader_rebalance_restores_preferred_leaders() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start_kinds(
        "1,2,3",
        &["--override", "leader.imbalance.check.interval.seconds=2"],
    ) else {
        return;
    };
    let zk = c.zk_session();
    let controller = c.zk_controller(&zk);
    let others: Vec<i32> = (1..=3).filter(|&b| b != controller).collect();
    let (a, b) = (others[0], others[1]);
    c.topics(&[
        "--create",
        "--topic",
        "balanced",
        "--replica-assignment",
        format!("{a}:{b},{a}:{controller},{b}:{a},{controller}:{a}").as_str(),
    ]);
    let preferred = [a, a, b, controller];
    for (p, &l) in preferred.iter().enumerate() {
        eventually("preferred leaders", Duration::from_secs(20), || {
            (c.leader(&zk, "balanced", p as i32) == l
                && c.isr(&zk, "balanced", p as i32).len() == 2)
                .then_some(())
        });
    }
    c.signal("kill", a as usize);
    for p in 0..2 {
        eventually(
            "broker A's leaderships move",
            Duration::from_millis(SESSION_TIMEOUT_MS) + Duration::from_secs(15),
            || (![a, -1].contains(&c.leader(&zk, "balanced", p))).then_some(()),
        );
    }
    c.signal("restart", a as usize);
    for p in 0..2 {
        eventually("broker A back in sync", Duration::from_secs(30), || {
            c.isr(&zk, "balanced", p).contains(&a).then_some(())
        });
    }
    let back = Instant::now();
    for (p, &l) in preferred.iter().enumerate() {
        eventually(
            "preferred leaders again, within a few checks",
            Duration::from_secs(8),
            || (c.leader(&zk, "balanced", p as i32) == l).then_some(()),
        );
    }
    eprintln!(
        "preferred leaders restored {:?} after broker A was back in sync",
        back.elapsed()
    );
    eventually(
        "the controller's imbalance check logged the move",
        Duration::from_secs(5),
        || {
            (1..=3)
                .any(|b| {
                    c.log(b)
                        .contains("automatic preferred replica leader election")
                })
                .then_some(())
        },
    );
}

/// skua controls two Apache Kafka 3.9.1 brokers: kafka-leader-election.sh through any
/// broker reaches skua, which moves leadership back to the Kafka broker it prefers.
#[test]
fn skua_controller_elects_preferred_kafka_leaders() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start_kinds("1", &["--override", "auto.leader.rebalance.enable=false"])
    else {
        return;
    };
    let zk = c.zk_session();
    c.topics(&[
        "--create",
        "--topic",
        "mixed",
        "--replica-assignment",
        "2:3",
    ]);
    eventually("mixed in sync", Duration::from_secs(30), || {
        (c.leader(&zk, "mixed", 0) == 2 && c.isr(&zk, "mixed", 0).len() == 2).then_some(())
    });
    c.signal("term", 2);
    eventually("leader moves to 3", Duration::from_secs(30), || {
        (c.leader(&zk, "mixed", 0) == 3).then_some(())
    });
    c.signal("restart", 2);
    eventually(
        "Kafka broker 2 back in the ISR",
        Duration::from_secs(40),
        || c.isr(&zk, "mixed", 0).contains(&2).then_some(()),
    );
    assert_eq!(c.leader(&zk, "mixed", 0), 3);
    let (ok, out) = c.leader_election(&["--election-type", "PREFERRED", "--all-topic-partitions"]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Successfully completed leader election (PREFERRED) for partitions mixed-0"),
        "{out}"
    );
    assert_eq!(c.leader(&zk, "mixed", 0), 2);
    assert!(
        c.log(1).contains("starting replica leader election"),
        "skua (broker 1) was the controller that elected"
    );
}
