//! The broker runs its own periodic jobs (a started broker, not only the `skua` binary):
//! the log flusher and the recovery-point checkpoint keep the checkpoint file current
//! while it serves, and the jobs stop with it.

use crate::common;

use std::time::Duration;

use common::*;
use kafka_protocol::records::Compression;

#[tokio::test]
async fn the_flusher_and_the_checkpoint_run_while_the_broker_serves() {
    let dir = tempfile::tempdir().unwrap();
    let config = [
        ("log.flush.scheduler.interval.ms", "50"),
        ("log.flush.interval.ms", "50"),
        ("log.flush.offset.checkpoint.interval.ms", "50"),
    ];
    let b = TestBroker::start(dir.path(), &config).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("jobs", 1).await, 0);
    let (code, _) = c
        .produce(
            "jobs",
            0,
            batch(&["a", "b", "c"], None, Compression::None),
            -1,
        )
        .await;
    assert_eq!(code, 0);
    let checkpoint = dir.path().join("recovery-point-offset-checkpoint");
    let flushed = |text: &str| text.lines().any(|l| l == "jobs 0 3");
    let mut text = String::new();
    for _ in 0..200 {
        text = std::fs::read_to_string(&checkpoint).unwrap_or_default();
        if flushed(&text) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(flushed(&text), "recovery point not checkpointed: {text:?}");
    assert!(b
        .broker
        .scheduler()
        .job_names()
        .contains(&"kafka-delete-logs"));
    drop(c);
    b.stop().await;
}
