//! `kill -9` scenarios against the real binary: acknowledged writes survive, torn and
//! garbage tails are truncated, and the next produce continues at the right offset.

mod common;

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
        // Port 0, read back from the start-up line: a port picked here and bound later
        // could be taken meanwhile, even by this test's own connect attempts.
        let mut child = Command::new(env!("CARGO_BIN_EXE_skua"))
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
