//! skua never deletes data it was not asked to delete: logs the metadata does not know are
//! set aside whole (`-stray`) across any number of restarts, and a deleted topic's logs
//! are renamed at once (`-delete`), removed only after `file.delete.delay.ms`, and never
//! brought back by a restart.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.into()))
}

/// Every file under `dir` (relative path) with its bytes.
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                out.push((path.strip_prefix(root).unwrap().to_path_buf(), bytes));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// Directories in `dir` whose name starts with `prefix` and ends with `suffix`.
fn dirs_like(dir: &Path, prefix: &str, suffix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(prefix) && n.ends_with(suffix)
        })
        .collect();
    out.sort();
    out
}

async fn metadata_error(c: &mut Client, topic: &str) -> i16 {
    let req = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(name(topic)))]))
        .with_allow_auto_topic_creation(false);
    c.send(&req, 12).await.topics[0].error_code
}

#[tokio::test]
async fn logs_the_metadata_does_not_know_keep_every_byte_across_restarts() {
    // Another broker's data: topic "ghost" and a two-partition "shared".
    let other = tempfile::tempdir().unwrap();
    let b = TestBroker::start(other.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("ghost", 1).await, 0);
    assert_eq!(c.create_topic("shared", 2).await, 0);
    for (t, p) in [("ghost", 0), ("shared", 1)] {
        let (err, _) = c
            .produce(
                t,
                p,
                batch(&["kept", "every", "byte"], None, Compression::None),
                -1,
            )
            .await;
        assert_eq!(err, 0);
    }
    b.stop().await;

    // This broker knows "shared" with one partition and no "ghost"; the other broker's
    // ghost-0 and shared-1 are copied in while it is down.
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[("auto.create.topics.enable", "false")]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("shared", 1).await, 0);
    b.stop().await;
    for d in ["ghost-0", "shared-1"] {
        copy_dir(&other.path().join(d), &dir.path().join(d));
    }
    let ghost = tree(&dir.path().join("ghost-0"));
    let shared = tree(&dir.path().join("shared-1"));

    for round in 0..3 {
        let b = TestBroker::start(dir.path(), &[("auto.create.topics.enable", "false")]).await;
        let mut c = b.client().await;
        if round < 2 {
            assert_eq!(
                metadata_error(&mut c, "ghost").await,
                ResponseError::UnknownTopicOrPartition.code(),
                "a stray is never served"
            );
        } else {
            // The topic created in round 1 is served from its own log, not the stray's.
            assert_eq!(c.fetch("ghost", 0, 0, 0, 1).await.high_watermark, 0);
        }
        let fetched = c.fetch("shared", 1, 0, 0, 1).await;
        assert_eq!(
            fetched.error_code,
            ResponseError::UnknownTopicOrPartition.code()
        );
        assert_eq!(dir.path().join("ghost-0").exists(), round == 2);
        let strays = dirs_like(dir.path(), "ghost-0.", "-stray");
        assert_eq!(strays.len(), 1, "round {round}: {strays:?}");
        assert_eq!(tree(&strays[0]), ghost, "round {round}: every byte kept");
        let strays = dirs_like(dir.path(), "shared-1.", "-stray");
        assert_eq!(strays.len(), 1);
        assert_eq!(tree(&strays[0]), shared);
        if round == 1 {
            // Creating the topic again makes a new, empty log beside the stray.
            assert_eq!(c.create_topic("ghost", 1).await, 0);
            let fetched = c.fetch("ghost", 0, 0, 0, 1).await;
            assert_eq!(fetched.high_watermark, 0);
        }
        b.stop().await;
    }
}

#[tokio::test]
async fn a_deleted_topic_goes_at_once_stays_gone_and_is_removed_after_the_delay() {
    let dir = tempfile::tempdir().unwrap();
    let delay = [("log.segment.delete.delay.ms", "1500")];
    let b = TestBroker::start(dir.path(), &delay).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("doomed", 2).await, 0);
    let (err, _) = c
        .produce("doomed", 1, batch(&["a", "b"], None, Compression::None), -1)
        .await;
    assert_eq!(err, 0);
    let req = DeleteTopicsRequest::default()
        .with_topic_names(vec![name("doomed")])
        .with_timeout_ms(5000);
    let resp = c.send(&req, 5).await;
    assert_eq!(resp.responses[0].error_code, 0);
    assert!(!dir.path().join("doomed-0").exists(), "renamed at once");
    assert!(!dir.path().join("doomed-1").exists());
    let renamed = dirs_like(dir.path(), "doomed-", "-delete");
    assert_eq!(renamed.len(), 2, "{renamed:?}");
    let deleted_at = Instant::now();

    // A restart before the delay neither resurrects the topic nor loses the pending removal.
    b.stop().await;
    let b = TestBroker::start(dir.path(), &delay).await;
    let mut c = b.client().await;
    assert_eq!(
        metadata_error(&mut c, "doomed").await,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert!(!dir.path().join("doomed-1").exists());
    if deleted_at.elapsed() < Duration::from_millis(1400) {
        assert_eq!(
            dirs_like(dir.path(), "doomed-", "-delete").len(),
            2,
            "kept until the delay"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !dirs_like(dir.path(), "doomed-", "-delete").is_empty() {
        assert!(Instant::now() < deadline, "removed after the delay");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The same name again is a new topic with a new, empty log.
    assert_eq!(c.create_topic("doomed", 2).await, 0);
    assert_eq!(c.fetch("doomed", 1, 0, 0, 1).await.high_watermark, 0);
    b.stop().await;
    let b = TestBroker::start(dir.path(), &delay).await;
    let mut c = b.client().await;
    assert_eq!(c.fetch("doomed", 1, 0, 0, 1).await.high_watermark, 0);
    b.stop().await;
}
