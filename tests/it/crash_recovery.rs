//! `kill -9` scenarios against the real binary: acknowledged writes survive, torn and
//! garbage tails are truncated, and the next produce continues at the right offset.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use kafka_protocol::messages::ApiVersionsRequest;
use kafka_protocol::records::Compression;

struct Process {
    child: Child,
    addr: SocketAddr,
}

impl Process {
    /// Starts the skua binary on a free loopback port and waits until it answers.
    async fn start(dir: &Path) -> Process {
        Process::start_with(dir, &[]).await
    }

    /// `start` with `key=value` overrides.
    async fn start_with(dir: &Path, overrides: &[(&str, &str)]) -> Process {
        // Port 0, read back from the start-up line: a port picked here and bound later
        // could be taken meanwhile, even by this test's own connect attempts.
        let mut command = Command::new(env!("CARGO_BIN_EXE_skua"));
        for (k, v) in overrides {
            command.args(["--override", &format!("{k}={v}")]);
        }
        let mut child = command
            .args(["--override", "listeners=PLAINTEXT://127.0.0.1:0"])
            .args(["--override", &format!("log.dirs={}", dir.display())])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("skua starts");
        let logs = child.stdout.take().expect("piped stdout");
        // Owned from here on, so a failed wait below still kills it.
        let mut process = Process {
            child,
            addr: "127.0.0.1:0".parse().unwrap(),
        };
        let (found, bound) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(logs).lines().map_while(Result::ok) {
                if let Some(port) = listening_port(&line) {
                    let _ = found.send(port);
                }
            }
        });
        // Generous: a debug build recovering its logs on a loaded machine is slow.
        let port = bound
            .recv_timeout(Duration::from_secs(60))
            .expect("skua did not start listening");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        process.addr = addr;
        let mut c = Client::connect(addr).await;
        assert_eq!(
            c.send(&ApiVersionsRequest::default(), 3).await.error_code,
            0
        );
        process
    }

    fn kill_9(mut self) {
        self.kill();
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The port in the start-up line's `listeners=[127.0.0.1:PORT]`.
fn listening_port(line: &str) -> Option<u16> {
    let rest = &line[line.find("skua started")?..];
    let rest = &rest[rest.find("listeners=[127.0.0.1:")? + "listeners=[127.0.0.1:".len()..];
    rest[..rest.find(']')?].parse().ok()
}

/// A failed assertion must not leave a broker running.
impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Every value in the partition, in offset order.
async fn read_all(addr: SocketAddr, topic: &str) -> Vec<(i64, String)> {
    let mut c = Client::connect(addr).await;
    let mut out = Vec::new();
    loop {
        let next = out.last().map_or(0, |(o, _): &(i64, String)| o + 1);
        let p = c.fetch(topic, 0, next, 0, 1).await;
        assert_eq!(p.error_code, 0);
        let got: Vec<_> = values(p.records.as_ref().unwrap())
            .into_iter()
            .filter(|(o, _)| *o >= next)
            .collect();
        if got.is_empty() {
            return out;
        }
        out.extend(got);
    }
}

#[tokio::test]
async fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let skua = Process::start(dir.path()).await;
    let mut c = Client::connect(skua.addr).await;
    assert_eq!(c.create_topic("durable", 1).await, 0);
    let mut acked = Vec::new();
    for i in 0..300 {
        let v = format!("r{i}");
        let (err, base) = c
            .produce(
                "durable",
                0,
                batch(&[&v, "pad"], None, Compression::None),
                -1,
            )
            .await;
        assert_eq!(err, 0);
        acked.push((base, v));
    }
    // Keep a producer writing while the broker dies.
    let addr = skua.addr;
    let writer = tokio::spawn(async move {
        let mut c = Client::connect(addr).await;
        for i in 0..10_000 {
            let v = format!("late{i}");
            c.write_request(
                &produce_request("durable", 0, batch(&[&v], None, Compression::Zstd), -1),
                9,
            )
            .await;
            if c.read_frame().await.is_none() {
                break;
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    skua.kill_9();
    let _ = writer.await;

    let skua = Process::start(dir.path()).await;
    let all = read_all(skua.addr, "durable").await;
    for (base, v) in &acked {
        assert!(
            all.iter().any(|(o, val)| o == base && val == v),
            "acknowledged {v} at {base} lost"
        );
    }
    let offsets: Vec<i64> = all.iter().map(|(o, _)| *o).collect();
    assert_eq!(
        offsets,
        (0..all.len() as i64).collect::<Vec<_>>(),
        "offsets contiguous after recovery"
    );
    let mut c = Client::connect(skua.addr).await;
    let (err, base) = c
        .produce("durable", 0, batch(&["next"], None, Compression::None), -1)
        .await;
    assert_eq!((err, base), (0, all.len() as i64));
    skua.kill_9();
}

/// Many partitions written, the broker killed, restarted, killed again straight after
/// its recovery, and restarted: every acknowledged record
/// of every partition is read back at its offset, and each partition continues at its
/// log end. Recovery after a crash rebuilds every active segment's indexes and writes
/// producer snapshots; the second crash hits those rebuilt, not yet synced files.
#[tokio::test]
async fn kill_9_with_many_partitions_keeps_every_acknowledged_record() {
    const PARTITIONS: i32 = 400;
    let dir = tempfile::tempdir().unwrap();
    let skua = Process::start(dir.path()).await;
    let mut c = Client::connect(skua.addr).await;
    assert_eq!(c.create_topic("wide", PARTITIONS).await, 0);
    let mut acked = Vec::new();
    for round in 0..3 {
        for p in 0..PARTITIONS {
            // Partitions get different numbers of records, so offsets differ.
            if round > 0 && p % (round + 1) != 0 {
                continue;
            }
            let v = format!("p{p}r{round}");
            let (err, base) = c
                .produce("wide", p, batch(&[&v], None, Compression::None), -1)
                .await;
            assert_eq!(err, 0);
            acked.push((p, base, v));
        }
    }
    skua.kill_9();
    // Killed again right after its recovery: the indexes, snapshots and checkpoints it
    // rebuilt must not hide or lose anything on the next start.
    let skua = Process::start(dir.path()).await;
    skua.kill_9();
    let skua = Process::start(dir.path()).await;
    let mut c = Client::connect(skua.addr).await;
    let mut ends = vec![0i64; PARTITIONS as usize];
    for (p, base, v) in &acked {
        let got = c.fetch("wide", *p, *base, 0, 1).await;
        assert_eq!(got.error_code, 0);
        let values = values(got.records.as_ref().unwrap());
        assert_eq!(
            values.first(),
            Some(&(*base, v.clone())),
            "acknowledged {v} at {base} of partition {p}"
        );
        ends[*p as usize] = ends[*p as usize].max(base + 1);
    }
    for p in [0, 1, PARTITIONS / 2, PARTITIONS - 1] {
        let next = batch(&["next"], None, Compression::None);
        assert_eq!(
            c.produce("wide", p, next, -1).await,
            (0, ends[p as usize]),
            "partition {p} continues at its log end"
        );
    }
    skua.kill_9();
}

#[tokio::test]
async fn garbage_and_torn_tails_are_truncated_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let skua = Process::start(dir.path()).await;
    let mut c = Client::connect(skua.addr).await;
    assert_eq!(c.create_topic("tails", 1).await, 0);
    for i in 0..20 {
        let v = format!("t{i}");
        assert_eq!(
            c.produce("tails", 0, batch(&[&v], None, Compression::Lz4), -1)
                .await,
            (0, i)
        );
    }
    skua.kill_9();
    let segment = dir.path().join("tails-0").join("00000000000000000000.log");
    let clean_len = std::fs::metadata(&segment).unwrap().len();
    // A torn batch (a valid header start cut short) followed by garbage.
    let whole = batch(&["torn"], None, Compression::None);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&segment)
        .unwrap();
    f.write_all(&whole[..whole.len() / 2]).unwrap();
    f.write_all(&[0xde, 0xad, 0xbe, 0xef].repeat(100)).unwrap();
    drop(f);

    let skua = Process::start(dir.path()).await;
    let all = read_all(skua.addr, "tails").await;
    assert_eq!(all.len(), 20);
    assert_eq!(all[19], (19, "t19".into()));
    assert_eq!(
        std::fs::metadata(&segment).unwrap().len(),
        clean_len,
        "tail truncated"
    );
    let mut c = Client::connect(skua.addr).await;
    assert_eq!(
        c.produce("tails", 0, batch(&["after"], None, Compression::None), -1)
            .await,
        (0, 20)
    );
    skua.kill_9();
}

/// A transaction committed before a `kill -9` stays visible exactly once; one still open
/// holds read_committed readers back after the restart until the coordinator, which
/// loaded it from `__transaction_state`, aborts it at its timeout; its records are then
/// named aborted, and the producer's old epoch is fenced.
#[tokio::test]
async fn an_open_transaction_is_aborted_after_kill_9() {
    use common::txn::{self, TOPIC};
    let overrides = [
        ("transaction.state.log.num.partitions", "3"),
        ("offsets.topic.num.partitions", "3"),
        (
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "100",
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let skua = Process::start_with(dir.path(), &overrides).await;
    let mut c = Client::connect(skua.addr).await;
    assert_eq!(c.create_topic(TOPIC, 1).await, 0);
    let found = txn::find_txn_coordinator(&mut c, "crash").await;
    assert_eq!(found.coordinators[0].error_code, 0);
    let init = kafka_protocol::messages::InitProducerIdRequest::default()
        .with_transactional_id(Some(kafka_protocol::messages::TransactionalId(txn::s(
            "crash",
        ))))
        .with_transaction_timeout_ms(3_000)
        .with_producer_id(kafka_protocol::messages::ProducerId(-1))
        .with_producer_epoch(-1);
    let r = c.send(&init, 4).await;
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(txn::add_partition(&mut c, "crash", pid, epoch, 0).await, 0);
    let committed = txn::txn_batch(&["c0", "c1"], (pid, epoch, 0));
    assert_eq!(txn::produce(&mut c, "crash", committed).await, (0, 0));
    assert_eq!(txn::end(&mut c, "crash", pid, epoch, true).await, 0);
    assert_eq!(txn::add_partition(&mut c, "crash", pid, epoch, 0).await, 0);
    let open = txn::txn_batch(&["o0", "o1", "o2"], (pid, epoch, 2));
    assert_eq!(txn::produce(&mut c, "crash", open).await, (0, 3));
    skua.kill_9();

    let skua = Process::start_with(dir.path(), &overrides).await;
    let mut c = Client::connect(skua.addr).await;
    let held = txn::fetch(&mut c, true).await;
    assert_eq!((held.high_watermark, held.last_stable_offset), (6, 3));
    let data = |p: &kafka_protocol::messages::fetch_response::PartitionData| -> Vec<String> {
        txn::records(p)
            .into_iter()
            .filter(|r| !r.2)
            .map(|r| r.1)
            .collect()
    };
    assert_eq!(
        data(&held),
        ["c0", "c1"],
        "committed once, nothing of the open one"
    );
    let mut after = held;
    for _ in 0..200 {
        if after.last_stable_offset > 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        after = txn::fetch(&mut c, true).await;
    }
    assert_eq!(
        after.last_stable_offset, 7,
        "aborted at its timeout: marker at 6"
    );
    assert_eq!(txn::aborted(&after), Some(vec![(pid, 3)]));
    assert_eq!(
        txn::add_partition(&mut c, "crash", pid, epoch, 0).await,
        90,
        "fenced"
    );
    skua.kill_9();
}
