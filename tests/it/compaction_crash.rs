//! `kill -9` while the cleaner works, against the real binary: after each restart every
//! key still reads back its latest value, the log end is where it was, and the cleaner's
//! temporary files are gone.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use common::{plain_batch, produce_request, Client};

const TOPIC: &str = "kv";
const KEYS: usize = 1000;

struct Process {
    child: Child,
    addr: SocketAddr,
}

impl Process {
    async fn start(dir: &Path) -> Process {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skua"))
            .args(["--override", "listeners=PLAINTEXT://127.0.0.1:0"])
            .args(["--override", &format!("log.dirs={}", dir.display())])
            .args(["--override", "log.cleaner.backoff.ms=100"])
            // Slow enough that each cleaning takes seconds: there is time to kill it.
            .args(["--override", "log.cleaner.io.max.bytes.per.second=3000000"])
            .args(["--override", "log.cleaner.io.buffer.size=65536"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("skua starts");
        let logs = child.stdout.take().expect("piped stdout");
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
        let port = bound
            .recv_timeout(Duration::from_secs(60))
            .expect("skua did not start listening");
        process.addr = format!("127.0.0.1:{port}").parse().unwrap();
        process
    }

    fn kill_9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill_9();
    }
}

fn listening_port(line: &str) -> Option<u16> {
    let rest = &line[line.find("skua started")?..];
    let rest = &rest[rest.find("listeners=[127.0.0.1:")? + "listeners=[127.0.0.1:".len()..];
    rest[..rest.find(']')?].parse().ok()
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

fn batch(entries: &[(String, String)]) -> Bytes {
    let entries = entries
        .iter()
        .map(|(k, v)| (Some(Bytes::from(k.clone())), Some(Bytes::from(v.clone()))));
    plain_batch(entries, skua::log::now_ms(), Compression::None)
}

/// Writes `n` updates round-robin over the keys, `generation` in each value.
async fn write(
    c: &mut Client,
    generation: usize,
    n: usize,
    expected: &mut BTreeMap<String, String>,
) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
        let entries: Vec<(String, String)> = chunk
            .iter()
            .map(|i| {
                (
                    format!("k{}", i % KEYS),
                    format!("g{generation}-{i}-{}", "x".repeat(80)),
                )
            })
            .collect();
        let resp = c
            .send(&produce_request(TOPIC, 0, batch(&entries), -1), 9)
            .await;
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
        expected.extend(entries);
    }
}

async fn read_latest(addr: SocketAddr) -> (i64, BTreeMap<String, String>) {
    let mut c = Client::connect(addr).await;
    let mut latest = BTreeMap::new();
    let mut offset = 0;
    loop {
        let p = c.fetch(TOPIC, 0, offset, 0, 1).await;
        assert_eq!(p.error_code, 0);
        let mut bytes = p.records.clone().unwrap_or_default();
        let mut next = offset;
        for set in RecordBatchDecoder::decode_all(&mut bytes).unwrap() {
            for r in set.records {
                next = next.max(r.offset + 1);
                if r.offset >= offset {
                    let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
                    latest.insert(
                        text(r.key.as_ref().unwrap()),
                        text(r.value.as_ref().unwrap()),
                    );
                }
            }
        }
        offset = if next > offset {
            next
        } else {
            p.high_watermark
        };
        if offset >= p.high_watermark {
            return (p.high_watermark, latest);
        }
    }
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".cleaned") || n.ends_with(".swap"))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the cleaner has finished a cleaning of the topic: its offset is in the log
/// dir's `cleaner-offset-checkpoint`.
fn cleaned(log_dir: &Path) -> bool {
    std::fs::read_to_string(log_dir.join("cleaner-offset-checkpoint"))
        .is_ok_and(|c| c.lines().any(|l| l.starts_with(&format!("{TOPIC} "))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_cleaning_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let partition_dir: PathBuf = dir.path().join(format!("{TOPIC}-0"));
    let mut skua = Process::start(dir.path()).await;
    let mut c = Client::connect(skua.addr).await;
    let req = CreateTopicsRequest::default()
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(
                [
                    ("cleanup.policy", "compact"),
                    ("segment.bytes", "1048576"),
                    ("min.cleanable.dirty.ratio", "0.01"),
                ]
                .iter()
                .map(|(k, v)| {
                    create_topics_request::CreatableTopicConfig::default()
                        .with_name(s(k))
                        .with_value(Some(s(v)))
                })
                .collect(),
            )])
        .with_timeout_ms(5000);
    assert_eq!(c.send(&req, 7).await.topics[0].error_code, 0);
    let mut expected = BTreeMap::new();
    let mut kills = 0;
    // Kills that found the cleaner at work (its temporary files seen). On a loaded
    // machine this task may sleep through a whole cleaning: the kill then comes after
    // it, which the checks below must survive as well.
    let mut during = 0;
    for generation in 0..4 {
        // About 8 MiB of updates: several segments for the cleaner to work through.
        write(&mut c, generation, 80_000, &mut expected).await;
        let (end_before, _) = read_latest(skua.addr).await;
        let started = Instant::now();
        loop {
            if !temp_files(&partition_dir).is_empty() {
                during += 1;
                // Somewhere in the cleaning: its map, its copy, or its swap.
                tokio::time::sleep(Duration::from_millis(150 * generation as u64)).await;
                break;
            }
            if started.elapsed() > Duration::from_secs(60) {
                assert!(
                    cleaned(dir.path()),
                    "the cleaner neither started nor finished a cleaning"
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        skua.kill_9();
        kills += 1;
        skua = Process::start(dir.path()).await;
        assert!(
            temp_files(&partition_dir).is_empty(),
            "the loader cleared them"
        );
        let (end_after, latest) = read_latest(skua.addr).await;
        assert_eq!(
            end_after, end_before,
            "kill {kills}: the log end is where it was"
        );
        assert_eq!(latest, expected, "kill {kills}: every key's latest value");
        c = Client::connect(skua.addr).await;
    }
    assert!(during > 0, "no kill found the cleaner at work");
    // Left alone, the cleaner finishes: one record per key below the active segment.
    let started = Instant::now();
    loop {
        let (_, latest) = read_latest(skua.addr).await;
        assert_eq!(latest, expected);
        let size: u64 = std::fs::read_dir(&partition_dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
            .map(|e| e.metadata().unwrap().len())
            .sum();
        // 320,000 records of ~100 bytes were written; what stays is one per key and the
        // active segment.
        if size < 2 << 20 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "never compacted: {size} bytes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
