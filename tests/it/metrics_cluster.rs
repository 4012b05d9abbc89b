//! The metrics of a real cluster (`scripts/cluster`: ZooKeeper 3.8 plus three skua
//! brokers on loopback, each serving `metrics.listener`), scraped over HTTP as
//! Prometheus would: exactly one broker reports itself the active controller; a
//! partition's leader reports it under-replicated once a follower dies and leaves the
//! ISR, and no longer once the follower is back in it. Skipped, with a message, only
//! when java is not installed.

use crate::common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::Duration;

use common::cluster::{eventually, Cluster, ONE_AT_A_TIME};

use crate::metrics_endpoint::samples;

/// The address broker `i` serves its metrics on, from its log (the port is chosen at
/// bind time; a restart chooses another, so the last line counts).
fn metrics_addr(c: &Cluster, i: usize) -> Option<String> {
    let log = c.log(i);
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("metrics listener serving http://"))?;
    let rest = &line[line.find("http://")? + 7..];
    Some(rest[..rest.find("/metrics")?].to_string())
}

/// One scrape of broker `i`, None while it does not answer.
fn scrape(c: &Cluster, i: usize) -> Option<BTreeMap<String, f64>> {
    let addr = metrics_addr(c, i)?;
    let mut s = std::net::TcpStream::connect(&addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut raw = String::new();
    s.read_to_string(&mut raw).ok()?;
    let (head, body) = raw.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.0 200").then(|| samples(body))
}

fn value(c: &Cluster, i: usize, key: &str) -> Option<f64> {
    scrape(c, i)?.get(key).copied()
}

/// The active controllers the live brokers report, summed.
fn active_controllers(c: &Cluster, live: &[usize]) -> Option<f64> {
    live.iter()
        .map(|&i| {
            value(
                c,
                i,
                "kafka_controller_kafkacontroller_activecontrollercount",
            )
        })
        .sum()
}

#[test]
fn one_active_controller_and_under_replicated_follows_a_dead_follower() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let extra = [
        "--override",
        "metrics.listener=http://127.0.0.1:0",
        "--override",
        "replica.lag.time.max.ms=3000",
    ];
    let Some(c) = Cluster::start_kinds("1,2,3", &extra) else {
        return;
    };
    let all = [1, 2, 3];
    eventually(
        "exactly one active controller",
        Duration::from_secs(30),
        || (active_controllers(&c, &all)? == 1.0).then_some(()),
    );
    let zk = c.zk_session();
    let ctrl = c.zk_controller(&zk);
    assert_eq!(
        value(
            &c,
            ctrl as usize,
            "kafka_controller_kafkacontroller_activecontrollercount"
        ),
        Some(1.0),
        "the controller in /controller is the one reporting itself active"
    );
    // Every broker's ZooKeeper session is connected and has timed its requests.
    for b in all {
        let m = scrape(&c, b).expect("scrape");
        let connected = "skua_zookeeper_session_state{state=\"CONNECTED\"}";
        assert_eq!(m.get(connected), Some(&1.0), "broker {b}");
        let requests = m["kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms_count"];
        assert!(
            requests > 0.0,
            "broker {b}: {requests} ZooKeeper requests timed"
        );
        let p99 =
            "kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms{quantile=\"0.99\"}";
        assert!(m[p99] > 0.0, "broker {b}: p99 {}", m[p99]);
    }
    let others: Vec<i32> = all
        .iter()
        .map(|&b| b as i32)
        .filter(|&b| b != ctrl)
        .collect();
    let (a, follower) = (others[0], others[1]);
    let out = c.run(
        "topics",
        &[
            "--create",
            "--topic",
            "ur",
            "--replica-assignment",
            &format!("{ctrl}:{a}:{follower}"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let leader = ctrl as usize;
    let partition_gauge = "kafka_cluster_partition_underreplicated{topic=\"ur\",partition=\"0\"}";
    let under = |want: f64| {
        let m = scrape(&c, leader)?;
        let count = *m.get("kafka_server_replicamanager_underreplicatedpartitions")?;
        (count == want && m.get(partition_gauge) == Some(&want)).then_some(())
    };
    eventually("ur in sync on its leader", Duration::from_secs(30), || {
        under(0.0)
    });
    assert_eq!(
        value(
            &c,
            leader,
            "kafka_controller_kafkacontroller_globalpartitioncount"
        ),
        Some(1.0),
        "the controller counts the cluster's one partition"
    );
    let expands_before = value(&c, leader, "kafka_server_replicamanager_isrexpands_total")
        .expect("isrexpands_total is scraped");

    c.signal("kill", follower as usize);
    eventually(
        "the leader reports ur under-replicated",
        Duration::from_secs(30),
        || under(1.0),
    );
    assert_eq!(
        active_controllers(&c, &[ctrl as usize, a as usize]),
        Some(1.0)
    );

    c.signal("restart", follower as usize);
    eventually(
        "the leader reports ur in sync again",
        Duration::from_secs(45),
        || under(0.0),
    );
    let expands = value(&c, leader, "kafka_server_replicamanager_isrexpands_total").unwrap();
    assert!(
        expands > expands_before,
        "the follower's return is an ISR expansion"
    );
    eventually(
        "exactly one active controller",
        Duration::from_secs(30),
        || (active_controllers(&c, &all)? == 1.0).then_some(()),
    );
}
