//! Transactional offset commits over TCP, as `sendOffsetsToTransaction` drives them:
//! AddOffsetsToTxn, TxnOffsetCommit, then EndTxn. The offsets are committed only when the
//! transaction commits, never when it aborts; meanwhile a `require_stable` OffsetFetch
//! answers UNSTABLE_OFFSET_COMMIT and a plain one the last committed offset. A `kill -9`
//! of the broker mid-transaction keeps them pending, and the transaction's end after the
//! restart decides them.

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::txn::*;
use common::{Client, TestBroker};
use kafka_protocol::messages::*;

const GROUP: &str = "etl";
const UNSTABLE_OFFSET_COMMIT: i16 = 88;

async fn find_group_coordinator(c: &mut Client) -> i16 {
    let req = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s(GROUP)]);
    let resp: FindCoordinatorResponse = c.send(&req, 4).await;
    resp.coordinators[0].error_code
}

/// A transactional producer's setup: the topic, both coordinators, a producer id.
async fn setup(c: &mut Client, id: &str) -> (i64, i16) {
    assert_eq!(c.create_topic(TOPIC, 1).await, 0);
    assert_eq!(find_group_coordinator(c).await, 0);
    assert_eq!(
        find_txn_coordinator(c, id).await.coordinators[0].error_code,
        0
    );
    let r = init(c, id, (-1, -1)).await;
    assert_eq!(r.error_code, 0);
    (r.producer_id.0, r.producer_epoch)
}

#[tokio::test]
async fn offsets_are_committed_with_the_transaction_and_dropped_with_its_abort() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), OVERRIDES).await;
    let mut c = broker.client().await;
    let (pid, epoch) = setup(&mut c, "etl-tx").await;

    // A commit before AddOffsetsToTxn: the transaction does not hold the offsets
    // partition, so nothing is written.
    assert_eq!(
        txn_offset_commit(&mut c, "etl-tx", GROUP, (pid, epoch), 3).await,
        48,
        "INVALID_TXN_STATE"
    );
    assert_eq!(fetch_offset(&mut c, GROUP, true).await, (0, -1));

    assert_eq!(add_offsets(&mut c, "etl-tx", GROUP, (pid, epoch)).await, 0);
    assert_eq!(
        txn_offset_commit(&mut c, "etl-tx", GROUP, (pid, epoch), 5).await,
        0
    );
    assert_eq!(
        fetch_offset(&mut c, GROUP, true).await,
        (UNSTABLE_OFFSET_COMMIT, -1)
    );
    assert_eq!(
        fetch_offset(&mut c, GROUP, false).await,
        (0, -1),
        "nothing committed yet"
    );
    assert_eq!(end(&mut c, "etl-tx", pid, epoch, true).await, 0);
    assert_eq!(fetch_offset(&mut c, GROUP, true).await, (0, 5));

    // An aborted transaction leaves the committed offset as it was.
    assert_eq!(add_offsets(&mut c, "etl-tx", GROUP, (pid, epoch)).await, 0);
    assert_eq!(
        txn_offset_commit(&mut c, "etl-tx", GROUP, (pid, epoch), 9).await,
        0
    );
    assert_eq!(
        fetch_offset(&mut c, GROUP, true).await,
        (UNSTABLE_OFFSET_COMMIT, -1)
    );
    assert_eq!(fetch_offset(&mut c, GROUP, false).await, (0, 5));
    assert_eq!(end(&mut c, "etl-tx", pid, epoch, false).await, 0);
    assert_eq!(fetch_offset(&mut c, GROUP, true).await, (0, 5));

    // A fenced instance cannot commit offsets any more.
    let r = init(&mut c, "etl-tx", (-1, -1)).await;
    assert_eq!((r.error_code, r.producer_epoch), (0, epoch + 1));
    assert_eq!(
        add_offsets(&mut c, "etl-tx", GROUP, (pid, epoch)).await,
        90,
        "PRODUCER_FENCED"
    );
    assert_ne!(
        txn_offset_commit(&mut c, "etl-tx", GROUP, (pid, epoch), 11).await,
        0
    );
    assert_eq!(fetch_offset(&mut c, GROUP, true).await, (0, 5));
    broker.stop().await;

    // What a restart rebuilds from the log is what was served.
    let broker = TestBroker::start(dir.path(), OVERRIDES).await;
    let mut c = broker.client().await;
    assert_eq!(find_group_coordinator(&mut c).await, 0);
    assert_eq!(fetch_offset(&mut c, GROUP, true).await, (0, 5));
    broker.stop().await;
}

struct Process {
    child: Child,
    addr: SocketAddr,
}

impl Process {
    fn start(dir: &Path) -> Process {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skua"))
            .args(["--override", "listeners=PLAINTEXT://127.0.0.1:0"])
            .args(["--override", &format!("log.dirs={}", dir.display())])
            .args(["--override", "transaction.state.log.num.partitions=3"])
            .args(["--override", "offsets.topic.num.partitions=3"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("skua starts");
        let logs = child.stdout.take().expect("piped stdout");
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
        Process {
            child,
            addr: format!("127.0.0.1:{port}").parse().unwrap(),
        }
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

#[tokio::test]
async fn pending_offsets_survive_a_kill_9_and_the_transaction_ends_them_after() {
    let dir = tempfile::tempdir().unwrap();
    let (pid, epoch) = {
        let mut broker = Process::start(dir.path());
        let mut c = Client::connect(broker.addr).await;
        let (pid, epoch) = setup(&mut c, "crash-tx").await;
        // One committed transaction, then one left open by the kill.
        assert_eq!(
            add_offsets(&mut c, "crash-tx", GROUP, (pid, epoch)).await,
            0
        );
        assert_eq!(
            txn_offset_commit(&mut c, "crash-tx", GROUP, (pid, epoch), 4).await,
            0
        );
        assert_eq!(end(&mut c, "crash-tx", pid, epoch, true).await, 0);
        assert_eq!(
            add_offsets(&mut c, "crash-tx", GROUP, (pid, epoch)).await,
            0
        );
        assert_eq!(
            txn_offset_commit(&mut c, "crash-tx", GROUP, (pid, epoch), 8).await,
            0
        );
        broker.kill_9();
        (pid, epoch)
    };
    let broker = Process::start(dir.path());
    let mut c = Client::connect(broker.addr).await;
    assert_eq!(find_group_coordinator(&mut c).await, 0);
    assert_eq!(
        fetch_offset(&mut c, GROUP, true).await,
        (UNSTABLE_OFFSET_COMMIT, -1)
    );
    assert_eq!(fetch_offset(&mut c, GROUP, false).await, (0, 4));
    assert_eq!(
        find_txn_coordinator(&mut c, "crash-tx").await.coordinators[0].error_code,
        0
    );
    assert_eq!(end(&mut c, "crash-tx", pid, epoch, true).await, 0);
    assert_eq!(fetch_offset(&mut c, GROUP, true).await, (0, 8));
}
