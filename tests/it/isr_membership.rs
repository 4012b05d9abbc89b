//! ISR membership on real clusters (`scripts/cluster`: ZooKeeper 3.8 plus three skua
//! brokers on loopback), as Apache Kafka 3.9.1's own tools see it: a broker restarted
//! after a controlled shutdown rejoins the ISR as soon as it has caught up, the
//! controller's own broker included; a follower stopped past `replica.lag.time.max.ms`
//! leaves the ISR (kafka-topics.sh --describe shows it) and rejoins after catching up;
//! with two of three brokers down, acks=all is refused with NOT_ENOUGH_REPLICAS while
//! acks=1 is stored. Each scenario starts its own cluster; they run one at a time.
//! Skipped, with a message, only when java is not installed.

use crate::common;

use std::time::{Duration, Instant};

use common::cluster::{eventually, rt, Cluster, ONE_AT_A_TIME};
use kafka_protocol::records::Compression;
use skua::zk::session::ZkSession;
use skua::zk::znodes;

/// The helpers this file's scenarios add to the cluster (a trait of its own, so
/// helpers of the same name in other scenario files do not collide).
trait ClusterHelpers {
    fn leader_and_isr(&self, s: &ZkSession, topic: &str, partition: i32) -> (i32, Vec<i32>);
    fn topics(&self, args: &[&str]) -> String;
    fn produce(&self, bootstrap: &str, topic: &str, values: &[&str], props: &[&str]) -> String;
    fn latest_offset(&self, bootstrap: &str, topic: &str, partition: i32) -> i64;
}

impl ClusterHelpers for Cluster {
    fn leader_and_isr(&self, s: &ZkSession, topic: &str, partition: i32) -> (i32, Vec<i32>) {
        self.partition_state(s, topic, partition)
            .map_or((-2, Vec::new()), |st| (st.leader, st.isr))
    }

    /// `kafka-topics.sh ARGS` (TopicCommand), which must succeed: its stdout.
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

    /// Kafka 3.9's console producer sending `values` through `bootstrap` with `props`:
    /// what it printed (a failed send is logged with its exception).
    fn produce(&self, bootstrap: &str, topic: &str, values: &[&str], props: &[&str]) -> String {
        let mut args = vec![
            "kafka.tools.ConsoleProducer",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
        ];
        for p in props {
            args.extend_from_slice(&["--producer-property", p]);
        }
        let mut child = std::process::Command::new(common::cluster::script())
            .arg("tool")
            .arg(self.dir.path())
            .args(&args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            for v in values {
                writeln!(stdin, "{v}").unwrap();
            }
        }
        let out = child.wait_with_output().unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    /// The latest offset of `topic`-`partition` as GetOffsetShell (ListOffsets) sees it.
    fn latest_offset(&self, bootstrap: &str, topic: &str, partition: i32) -> i64 {
        let out = self.run(
            "tool",
            &[
                "org.apache.kafka.tools.GetOffsetShell",
                "--bootstrap-server",
                bootstrap,
                "--topic",
                topic,
                "--partitions",
                &partition.to_string(),
            ],
        );
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{topic}:{partition}:")))
            .unwrap_or_else(|| {
                panic!(
                    "GetOffsetShell: {text}{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        line.rsplit(':').next().unwrap().trim().parse().unwrap()
    }
}

/// Fails unless the console producer reported no error (a failed send, a missing class).
fn assert_sent(out: &str) {
    assert!(
        !["ERROR", "Error", "Exception"]
            .iter()
            .any(|e| out.contains(e)),
        "the console producer: {out}"
    );
}

/// The ISR kafka-topics.sh --describe prints for each partition of its output.
fn described_isr(described: &str) -> Vec<(i32, Vec<i32>)> {
    let field = |line: &str, name: &str| -> Option<String> {
        line.split('\t')
            .find_map(|f| f.trim().strip_prefix(name).map(|v| v.trim().to_string()))
    };
    described
        .lines()
        .filter_map(|l| {
            let p = field(l, "Partition:")?.parse().ok()?;
            let isr = field(l, "Isr:")?
                .split(',')
                .filter_map(|b| b.trim().parse().ok())
                .collect();
            Some((p, isr))
        })
        .collect()
}

/// The broker that is both controller and leader stops with a controlled shutdown (its
/// leaderships and the controller move) and starts again: it is back in the ISR of
/// every partition within seconds. The new controller's first UpdateMetadata changes no
/// partition; the leaders must still learn from it where to send their ISR changes
/// (they kept sending them to the stopped broker, and the restarted broker stayed out
/// of the ISR until some partition change happened to tell them).
#[test]
fn the_controllers_broker_rejoins_the_isr_after_a_controlled_shutdown() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start_kinds("1,2,3", &[]) else {
        return;
    };
    let zk = c.zk_session();
    let ctrl = c.zk_controller(&zk);
    let others: Vec<i32> = (1..=3).filter(|&b| b != ctrl).collect();
    let (a, b) = (others[0], others[1]);
    c.topics(&[
        "--create",
        "--topic",
        "rejoin",
        "--replica-assignment",
        &format!("{ctrl}:{a}:{b},{ctrl}:{b}:{a}"),
    ]);
    for p in 0..2 {
        eventually(
            "rejoin led by the controller, in sync",
            Duration::from_secs(30),
            || {
                let (leader, isr) = c.leader_and_isr(&zk, "rejoin", p);
                (leader == ctrl && isr.len() == 3).then_some(())
            },
        );
    }
    let bootstrap = c.bootstrap.join(",");
    let out = c.produce(&bootstrap, "rejoin", &["a", "b", "c"], &["acks=all"]);
    assert_sent(&out);
    let stored = |p| c.latest_offset(&bootstrap, "rejoin", p);
    assert_eq!(stored(0) + stored(1), 3);

    c.signal("term", ctrl as usize);
    for p in 0..2 {
        let (leader, isr) = c.leader_and_isr(&zk, "rejoin", p);
        assert!(
            leader != ctrl && !isr.contains(&ctrl),
            "the controlled shutdown moved partition {p}: {leader} {isr:?}"
        );
    }
    eventually("the controller moved", Duration::from_secs(20), || {
        let (data, _) = rt().block_on(zk.get("/controller")).unwrap()?;
        let id = znodes::decode::<znodes::ControllerRegistration>(&data)
            .ok()?
            .brokerid;
        (id != ctrl).then_some(())
    });
    // Written while it is away: the restarted broker has to catch up.
    let out = c.produce(&bootstrap, "rejoin", &["d", "e"], &["acks=all"]);
    assert_sent(&out);
    assert_eq!(stored(0) + stored(1), 5);

    c.signal("restart", ctrl as usize);
    let back = Instant::now();
    for p in 0..2 {
        eventually(
            "the restarted broker back in the ISR",
            Duration::from_secs(20),
            || {
                c.leader_and_isr(&zk, "rejoin", p)
                    .1
                    .contains(&ctrl)
                    .then_some(())
            },
        );
    }
    eprintln!("back in the ISR {:?} after its restart", back.elapsed());
}

/// replica.lag.time.max.ms=3000: a follower killed for longer leaves the ISR through its
/// leader's ISR shrink (well before its ZooKeeper session expires), which
/// kafka-topics.sh --describe shows; restarted, it catches up on what was written
/// meanwhile and is back in the ISR. Then with two
/// brokers stopped the survivor leads alone: acks=all is refused with
/// NOT_ENOUGH_REPLICAS (min.insync.replicas=2), acks=1 is stored.
#[test]
fn a_lagging_follower_leaves_and_rejoins_the_isr_and_min_insync_guards_acks_all() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start_kinds("1,2,3", &["--override", "replica.lag.time.max.ms=3000"])
    else {
        return;
    };
    let zk = c.zk_session();
    let ctrl = c.zk_controller(&zk);
    let others: Vec<i32> = (1..=3).filter(|&b| b != ctrl).collect();
    let (leader, follower) = (others[0], others[1]);
    c.topics(&[
        "--create",
        "--topic",
        "lag",
        "--replica-assignment",
        &format!("{leader}:{follower}:{ctrl}"),
        "--config",
        "min.insync.replicas=2",
    ]);
    eventually("lag in sync", Duration::from_secs(30), || {
        let (l, isr) = c.leader_and_isr(&zk, "lag", 0);
        (l == leader && isr.len() == 3).then_some(())
    });
    let described = c.topics(&["--describe", "--topic", "lag"]);
    assert_eq!(
        described_isr(&described),
        vec![(0, vec![leader, follower, ctrl])],
        "{described}"
    );
    let bootstrap = c.bootstrap.join(",");

    let stopped = Instant::now();
    c.signal("kill", follower as usize);
    // Writes go on (a follower at the log end is never out of sync): one a poll.
    let leader_addr = c.bootstrap[leader as usize - 1].parse().unwrap();
    let mut to_leader = rt().block_on(common::Client::connect(leader_addr));
    let mut written = 0;
    eventually(
        "the stopped follower out of the ISR",
        Duration::from_secs(30),
        || {
            let records = common::batch(&["w"], None, Compression::None);
            let (error, _) = rt().block_on(to_leader.produce("lag", 0, records, 1));
            assert_eq!(error, 0, "acks=1 to the leader");
            written += 1;
            (c.leader_and_isr(&zk, "lag", 0).1 == vec![leader, ctrl]).then_some(())
        },
    );
    // Its last caught-up fetch may have begun a fetch wait (500 ms) before the kill.
    assert!(
        stopped.elapsed() >= Duration::from_millis(2500),
        "not before replica.lag.time.max.ms"
    );
    let described = c.topics(&["--describe", "--topic", "lag"]);
    assert_eq!(
        described_isr(&described),
        vec![(0, vec![leader, ctrl])],
        "{described}"
    );
    assert!(
        c.log(leader as usize).contains("shrinking the ISR"),
        "the leader shrank it for lag"
    );
    // acks=all goes on with two in sync (min.insync.replicas=2).
    let out = c.produce(&bootstrap, "lag", &["1", "2", "3"], &["acks=all"]);
    assert_sent(&out);
    assert_eq!(c.latest_offset(&bootstrap, "lag", 0), written + 3);

    c.signal("restart", follower as usize);
    eventually(
        "the follower back in the ISR",
        Duration::from_secs(30),
        || {
            c.leader_and_isr(&zk, "lag", 0)
                .1
                .contains(&follower)
                .then_some(())
        },
    );
    let described = c.topics(&["--describe", "--topic", "lag"]);
    let isr = &described_isr(&described)[0].1;
    assert!(isr.contains(&follower) && isr.len() == 3, "{described}");

    // Two brokers down (controlled shutdowns: the sessions outlive a kill here): the
    // survivor, the controller's broker, leads alone.
    c.signal("term", leader as usize);
    c.signal("term", follower as usize);
    eventually("the survivor leads alone", Duration::from_secs(40), || {
        (c.leader_and_isr(&zk, "lag", 0) == (ctrl, vec![ctrl])).then_some(())
    });
    let survivor = c.bootstrap[ctrl as usize - 1].clone();
    let before = c.latest_offset(&survivor, "lag", 0);
    let strict = [
        "acks=all",
        "retries=0",
        "enable.idempotence=false",
        "delivery.timeout.ms=20000",
    ];
    let out = c.produce(&survivor, "lag", &["refused"], &strict);
    assert!(
        out.contains("NotEnoughReplicasException"),
        "acks=all: {out}"
    );
    assert_eq!(
        c.latest_offset(&survivor, "lag", 0),
        before,
        "nothing stored"
    );
    let out = c.produce(
        &survivor,
        "lag",
        &["stored"],
        &["acks=1", "retries=0", "enable.idempotence=false"],
    );
    assert_sent(&out);
    assert_eq!(
        c.latest_offset(&survivor, "lag", 0),
        before + 1,
        "acks=1 stored"
    );
}
