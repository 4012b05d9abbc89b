//! DescribeLogDirs and AlterReplicaLogDirs on a broker with two `log.dirs`: what a client
//! is told about each dir (its replicas' sizes as the files on disk have them, the file
//! system's size, an offline dir's KAFKA_STORAGE_ERROR), and a replica moved to the other
//! dir while a producer goes on, every record there after a restart.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{batch, values, wait_for, Client, TestBroker};
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

const KAFKA_STORAGE_ERROR: i16 = 56;

fn two_dirs(root: &Path) -> (Vec<PathBuf>, String) {
    let dirs = vec![root.join("d1"), root.join("d2")];
    let joined = format!("{},{}", dirs[0].display(), dirs[1].display());
    (dirs, joined)
}

/// The bytes of a partition directory's segment files, as Kafka's `UnifiedLog.size` counts.
fn segment_bytes(partition_dir: &Path) -> i64 {
    std::fs::read_dir(partition_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| std::fs::metadata(p).unwrap().len() as i64)
        .sum()
}

async fn describe(
    client: &mut Client,
    topics: Option<Vec<(&str, Vec<i32>)>>,
    version: i16,
) -> DescribeLogDirsResponse {
    let topics = topics.map(|ts| {
        ts.into_iter()
            .map(|(name, partitions)| {
                DescribableLogDirTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(name.into())))
                    .with_partitions(partitions)
            })
            .collect()
    });
    client
        .send(
            &DescribeLogDirsRequest::default().with_topics(topics),
            version,
        )
        .await
}

/// (dir, topic, partition, size, offset lag, is future) for every replica in the answer.
fn replicas(resp: &DescribeLogDirsResponse) -> Vec<(String, String, i32, i64, i64, bool)> {
    let mut out = Vec::new();
    for dir in &resp.results {
        for t in &dir.topics {
            for p in &t.partitions {
                out.push((
                    dir.log_dir.to_string(),
                    t.name.0.to_string(),
                    p.partition_index,
                    p.partition_size,
                    p.offset_lag,
                    p.is_future_key,
                ));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_log_dirs_reports_every_dir_and_replica() {
    let root = tempfile::tempdir().unwrap();
    let (dirs, joined) = two_dirs(root.path());
    let broker = TestBroker::start(
        &dirs[0],
        &[
            ("log.dirs", &joined),
            ("replica.high.watermark.checkpoint.interval.ms", "200"),
        ],
    )
    .await;
    let mut client = broker.client().await;
    assert_eq!(client.create_topic("t", 2).await, 0);
    assert_eq!(client.create_topic("u", 1).await, 0);
    for (topic, p, n) in [("t", 0, 3), ("t", 1, 1), ("u", 0, 2)] {
        for _ in 0..n {
            let (code, _) = client
                .produce(topic, p, batch(&["a", "bb"], None, Compression::None), 1)
                .await;
            assert_eq!(code, 0);
        }
    }
    let dir_of = |name: &str| {
        dirs.iter()
            .find(|d| d.join(name).is_dir())
            .unwrap_or_else(|| panic!("{name} in a log dir"))
            .clone()
    };

    for version in [1, 2, 3, 4] {
        let resp = describe(&mut client, None, version).await;
        assert_eq!(resp.error_code, 0);
        let listed: Vec<String> = resp.results.iter().map(|r| r.log_dir.to_string()).collect();
        let want: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        assert_eq!(listed, want, "every dir, absolute, in log.dirs order");
        assert!(resp.results.iter().all(|r| r.error_code == 0));
        if version >= 4 {
            for r in &resp.results {
                assert!(
                    r.total_bytes > 0 && (0..=r.total_bytes).contains(&r.usable_bytes),
                    "{} {}",
                    r.total_bytes,
                    r.usable_bytes
                );
            }
        }
        let mut want = Vec::new();
        for (topic, p) in [("t", 0), ("t", 1), ("u", 0)] {
            let name = format!("{topic}-{p}");
            let size = segment_bytes(&dir_of(&name).join(&name));
            assert!(size > 0);
            want.push((
                dir_of(&name).display().to_string(),
                topic.to_string(),
                p,
                size,
                0,
                false,
            ));
        }
        want.sort();
        assert_eq!(replicas(&resp), want, "v{version}");
    }

    // Only the partitions asked for; an unknown one is simply absent.
    let resp = describe(
        &mut client,
        Some(vec![("t", vec![1]), ("nope", vec![0])]),
        4,
    )
    .await;
    let got: Vec<(String, i32)> = replicas(&resp).into_iter().map(|r| (r.1, r.2)).collect();
    assert_eq!(got, vec![("t".to_string(), 1)]);
    assert_eq!(resp.results.len(), 2, "every dir, even without a match");

    // A dir that fails is listed with KAFKA_STORAGE_ERROR and nothing in it.
    let failed = dir_of("u-0");
    let checkpoint = failed.join("replication-offset-checkpoint");
    let _ = std::fs::remove_file(&checkpoint);
    std::fs::create_dir_all(checkpoint.join("in-the-way")).unwrap();
    let failed_name = failed.display().to_string();
    wait_for("the dir goes offline", Duration::from_secs(20), || {
        let addr = broker.addr;
        let failed_name = failed_name.clone();
        async move {
            let resp = describe(&mut Client::connect(addr).await, None, 4).await;
            resp.results
                .iter()
                .any(|r| r.log_dir.as_str() == failed_name && r.error_code == KAFKA_STORAGE_ERROR)
        }
    })
    .await;
    let resp = describe(&mut client, None, 4).await;
    for r in &resp.results {
        if r.log_dir.as_str() == failed_name {
            assert!(r.topics.is_empty());
            assert_eq!((r.total_bytes, r.usable_bytes), (-1, -1));
        } else {
            assert_eq!(r.error_code, 0);
        }
    }
    broker.stop().await;
}

async fn alter(
    client: &mut Client,
    path: &str,
    topic: &str,
    partitions: Vec<i32>,
    version: i16,
) -> Vec<i16> {
    let req = AlterReplicaLogDirsRequest::default().with_dirs(vec![AlterReplicaLogDir::default()
        .with_path(StrBytes::from_string(path.into()))
        .with_topics(vec![AlterReplicaLogDirTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(partitions)])]);
    let resp = client.send(&req, version).await;
    resp.results
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// Every value in `topic-0`, read from offset 0 to its end.
async fn all_values(client: &mut Client, topic: &str) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    loop {
        let next = out.last().map_or(0, |(o, _): &(i64, String)| o + 1);
        let fetched = client.fetch(topic, 0, next, 0, 0).await;
        assert_eq!(fetched.error_code, 0);
        let got = values(fetched.records.as_ref().unwrap());
        if got.is_empty() {
            return out;
        }
        out.extend(got);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_moves_to_another_dir_while_producers_go_on() {
    let root = tempfile::tempdir().unwrap();
    let (dirs, joined) = two_dirs(root.path());
    let overrides = [
        ("log.dirs", joined.as_str()),
        ("log.segment.bytes", "1048576"),
    ];
    let broker = TestBroker::start(&dirs[0], &overrides).await;
    let mut client = broker.client().await;
    assert_eq!(client.create_topic("m", 1).await, 0);
    let big = "x".repeat(2000);
    let mut sent = Vec::new();
    for i in 0..1500 {
        let value = format!("{i}-{big}");
        let (code, _) = client
            .produce("m", 0, batch(&[value.as_str()], None, Compression::None), 1)
            .await;
        assert_eq!(code, 0);
        sent.push(value);
    }
    let source = dirs
        .iter()
        .find(|d| d.join("m-0").is_dir())
        .unwrap()
        .clone();
    let target = dirs.iter().find(|d| **d != source).unwrap().clone();
    assert!(
        std::fs::read_dir(source.join("m-0"))
            .unwrap()
            .filter(|e| e
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "log"))
            .count()
            > 1,
        "several segments to copy"
    );

    // Errors first: not a log dir, a partition not hosted here.
    let target_name = target.display().to_string();
    assert_eq!(
        alter(&mut client, "/no/such/dir", "m", vec![0], 2).await,
        vec![57]
    );
    assert_eq!(
        alter(&mut client, &target_name, "m", vec![7], 2).await,
        vec![9]
    );
    assert_eq!(
        alter(&mut client, &target_name, "nope", vec![0], 1).await,
        vec![9]
    );

    // The move, with a producer going on meanwhile.
    let addr = broker.addr;
    let producing = tokio::spawn(async move {
        let mut c = Client::connect(addr).await;
        let mut more = Vec::new();
        for i in 1500..2500 {
            let value = format!("{i}-during");
            let (code, _) = c
                .produce("m", 0, batch(&[value.as_str()], None, Compression::None), 1)
                .await;
            assert_eq!(code, 0, "produce during the move");
            more.push(value);
        }
        more
    });
    assert_eq!(
        alter(&mut client, &target_name, "m", vec![0], 2).await,
        vec![0]
    );
    let start = std::time::Instant::now();
    loop {
        let resp = describe(&mut client, None, 4).await;
        let rs = replicas(&resp);
        let done = rs.len() == 1 && rs[0].0 == target_name && !rs[0].5;
        if done {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "moved within 60 s: {rs:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sent.extend(producing.await.unwrap());
    for i in 2500..2510 {
        let value = format!("{i}-after");
        let (code, _) = client
            .produce("m", 0, batch(&[value.as_str()], None, Compression::None), 1)
            .await;
        assert_eq!(code, 0);
        sent.push(value);
    }
    assert!(target.join("m-0").is_dir());
    assert!(
        !source.join("m-0").exists(),
        "the old copy is renamed for deletion"
    );
    let want: Vec<(i64, String)> = sent
        .iter()
        .cloned()
        .enumerate()
        .map(|(i, v)| (i as i64, v))
        .collect();
    assert_eq!(all_values(&mut client, "m").await, want);
    broker.stop().await;

    // After a restart: every record, from the new dir.
    let broker = TestBroker::start(&dirs[0], &overrides).await;
    let mut client = broker.client().await;
    assert_eq!(all_values(&mut client, "m").await, want);
    assert!(broker.log("m").dir().starts_with(&target));
    assert!(!source.join("m-0").exists());
    broker.stop().await;
}
