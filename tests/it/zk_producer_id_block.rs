//! An empty `/latest_producer_id_block`, as older skua versions left it, on a real
//! cluster (`scripts/cluster`: ZooKeeper 3.8, skua brokers 1 and 2, Apache Kafka 3.9.1 as
//! broker 3) at inter.broker.protocol.version=2.6, where every broker claims its own
//! producer id blocks in ZooKeeper and Kafka claims one at startup. Kafka fails to start
//! on the empty znode; a skua broker that starts repairs it with a valid block, and then
//! Kafka starts and claims the next one. Skipped, with a message, only without java.

use crate::common;

use std::time::Duration;

use common::cluster::{eventually, rt, Cluster, ONE_AT_A_TIME};
use skua::zk::session::ZkSession;
use skua::zk::znodes::{self, paths, ProducerIdBlock};

/// The block in `/latest_producer_id_block`: (broker, first id, last id), if it parses.
fn latest_block(zk: &ZkSession) -> Option<(i32, i64, i64)> {
    let (data, _) = rt()
        .block_on(zk.get(paths::LATEST_PRODUCER_ID_BLOCK))
        .ok()??;
    let block: ProducerIdBlock = znodes::decode(&data).ok()?;
    let (first, last) = block.range()?;
    Some((block.broker, first, last))
}

#[test]
fn a_skua_broker_repairs_an_empty_producer_id_block_so_kafka_at_ibp_2_6_starts() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(c) = Cluster::start_kinds("1,2", &["--override", "inter.broker.protocol.version=2.6"])
    else {
        return;
    };
    let zk = c.zk_session();
    let (broker, _, _) = latest_block(&zk).expect("Kafka at 2.6 claimed a block at startup");
    assert_eq!(broker, 3);

    // What an older skua left: the znode present with no data.
    c.signal("kill", 3);
    rt().block_on(zk.set(paths::LATEST_PRODUCER_ID_BLOCK, b"", None))
        .unwrap();
    let out = c.run("restart", &["3"]);
    assert!(
        !out.status.success(),
        "Kafka 3.9.1 at 2.6 does not start on an empty block znode"
    );

    // A skua broker starting finds it empty and writes a valid block.
    c.signal("kill", 1);
    c.signal("restart", 1);
    let (broker, first, last) = eventually(
        "skua broker 1 repairs /latest_producer_id_block",
        Duration::from_secs(60),
        || latest_block(&zk),
    );
    assert_eq!(
        (broker, first, last),
        (1, 0, 999),
        "the first block, as for none"
    );
    assert!(
        c.log(1).contains("was empty (left by an older skua)"),
        "the repair is logged"
    );

    // Now Kafka starts, claiming the block after skua's.
    c.signal("restart", 3);
    eventually(
        "Kafka broker 3 registers again",
        Duration::from_secs(60),
        || rt().block_on(zk.get(&paths::broker(3))).ok()?.map(|_| ()),
    );
    assert_eq!(latest_block(&zk), Some((3, 1000, 1999)));
}
