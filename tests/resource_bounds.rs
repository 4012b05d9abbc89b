//! One client must not be able to exhaust the broker's memory or outlive its shutdown:
//! each test replays an attack over TCP (or the request path it takes) and checks what
//! the broker held, ran and sent.
//!
//! Peak memory is the process's (VmHWM, reset before each measurement), so the tests in
//! this file run one at a time.

#[path = "it/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use common::*;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, Request, StrBytes};
use kafka_protocol::records::Compression;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use skua::network::{SecurityProtocol, Session};
use skua::protocol::decode_budget::MeteredAllocator;
use skua::protocol::zero_copy::Chunk;
use skua::router::RequestContext;

/// As in the skua binary: what a request's decode allocates is measured and bounded.
#[global_allocator]
static ALLOCATOR: MeteredAllocator = MeteredAllocator;

/// Held by each test: peak memory is measured for the whole process.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Resets the process's peak resident size to its current size.
fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").expect("reset VmHWM");
}

/// The process's peak resident size since the last reset, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmHWM value");
    kb * 1024
}

fn current_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS");
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse::<u64>().ok())
        .expect("VmRSS value")
        * 1024
}

const MIB: u64 = 1024 * 1024;

/// A request frame (size prefix included) as a client would send it.
fn frame<R: Request + Encodable>(req: &R, version: i16, correlation_id: i32) -> Bytes {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("attacker")));
    let mut body = BytesMut::new();
    body.put_i32(0);
    header
        .encode(&mut body, R::header_version(version))
        .expect("header");
    req.encode(&mut body, version).expect("body");
    let size = (body.len() - 4) as i32;
    body[..4].copy_from_slice(&size.to_be_bytes());
    body.freeze()
}

/// A LeaveGroup frame of about `size` bytes whose member array claims 2^31-1 entries and
/// holds the smallest ones that decode: at v3 four bytes each (two empty strings), at v5
/// six (empty strings and one unknown tagged field, which the crate keeps in a map).
fn leave_group_bomb(size: usize, version: i16) -> Vec<u8> {
    let mut f = Vec::with_capacity(size + 16);
    f.extend_from_slice(&[0, 0, 0, 0]);
    f.extend_from_slice(&13i16.to_be_bytes());
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&7i32.to_be_bytes());
    f.extend_from_slice(&[0, 1, b'x']); // client id
    let element: &[u8] = if version >= 4 {
        f.push(0); // header tagged fields
        f.extend_from_slice(&[2, b'g', 0x80, 0x80, 0x80, 0x80, 0x08]);
        &[1, 0, 0, 1, 0, 0]
    } else {
        f.extend_from_slice(&[0, 1, b'g', 0x7f, 0xff, 0xff, 0xff]);
        &[0, 0, 0xff, 0xff]
    };
    while f.len() + element.len() <= size {
        f.extend_from_slice(element);
    }
    let body = (f.len() - 4) as i32;
    f[..4].copy_from_slice(&body.to_be_bytes());
    f
}

/// Issue: a 99 MB LeaveGroup frame of minimal elements took the broker's peak resident
/// size to 3 GB (8.7 GB with a tagged field per element), its virtual size to 12 GB.
/// Each frame here is 24 MB; decoding either would take 0.7–2 GB unbounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_cannot_decode_into_gigabytes() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[("socket.request.max.bytes", "33554432")]).await;
    for version in [3, 5] {
        let bomb = leave_group_bomb(24_000_000, version);
        reset_peak_rss();
        let before = current_rss();
        let mut c = b.client().await;
        c.stream.write_all(&bomb).await.expect("sent");
        let answer = tokio::time::timeout(Duration::from_secs(60), c.read_frame())
            .await
            .expect("the broker answers or closes");
        assert!(answer.is_none(), "v{version}: connection closed");
        let grown = peak_rss().saturating_sub(before);
        // The frame (24 MB here and 24 MB in the broker) plus the 32 MiB decode budget.
        assert!(
            grown < 160 * MIB,
            "v{version}: peak resident size grew by {} MiB",
            grown / MIB
        );
    }
    let mut c = b.client().await;
    assert_eq!(
        c.send(&ApiVersionsRequest::default(), 3).await.error_code,
        0
    );
    b.stop().await;
}

fn long_poll(topic: &str, max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1 << 30)
        .with_max_bytes(1 << 20)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(1 << 20)])])
}

async fn wait_until(what: &str, within: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue: a long-poll Fetch then 20 × 50 MB Produce frames on one connection raised the
/// broker's resident size from 6 MB to 1.6 GB, held for 60 s after the client left. Here
/// the connection stops reading once it holds a request past its read-ahead, and when the
/// client resets it the Fetch is dropped with the queued Produce requests, unrun.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_muted_connection_holds_little_and_frees_it_when_the_client_resets() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[("message.max.bytes", "10485760")]).await;
    let mut admin = b.client().await;
    assert_eq!(admin.create_topic("attack", 1).await, 0);
    let value = "v".repeat(8 << 20);
    let produce = frame(
        &produce_request("attack", 0, batch(&[&value], None, Compression::None), 1),
        9,
        2,
    );
    reset_peak_rss();
    let before = current_rss();

    let mut attacker = TcpStream::connect(b.addr).await.unwrap();
    attacker
        .write_all(&frame(&long_poll("attack", 30_000), 12, 1))
        .await
        .unwrap();
    // 16 × 8 MB, as far as the broker lets them in.
    for _ in 0..16 {
        let sent = tokio::time::timeout(Duration::from_secs(2), attacker.write_all(&produce)).await;
        if sent.is_err() {
            break;
        }
    }
    let held = b.request_memory.used() as u64;
    assert!(
        held > 8 * MIB && held < 13 * MIB,
        "the long poll and one produce frame are read, no more: {held} bytes"
    );
    let grown = peak_rss().saturating_sub(before);
    assert!(
        grown < 48 * MIB,
        "peak resident size grew by {} MiB",
        grown / MIB
    );

    attacker.set_zero_linger().unwrap();
    drop(attacker); // RST
    wait_until(
        "the broker drops the connection's requests",
        Duration::from_secs(3),
        || b.request_memory.used() == 0,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let p = b.broker.replicas.partition("attack", 0).unwrap();
    assert_eq!(p.high_watermark(), 0, "no queued produce ran");
    b.stop().await;
}

/// `queued.max.request.bytes`: a connection reserves a frame's size before it reads the
/// body, and while the broker's pool is full every connection stops reading until memory
/// is given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_broker_pool_mutes_every_connection_until_memory_is_given_back() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[("queued.max.request.bytes", "1048576")]).await;
    let mut big = TcpStream::connect(b.addr).await.unwrap();
    big.write_all(&(8i32 << 20).to_be_bytes()).await.unwrap();
    big.write_all(&[0u8; 1000]).await.unwrap();
    wait_until(
        "the whole frame is reserved before its body arrives",
        Duration::from_secs(2),
        || b.request_memory.used() == (8 << 20) + 4,
    )
    .await;

    let mut other = b.client().await;
    other.write_request(&ApiVersionsRequest::default(), 3).await;
    let early = tokio::time::timeout(Duration::from_millis(500), other.read_frame()).await;
    assert!(early.is_err(), "not read while the pool is full");
    drop(big); // closed mid-frame: its reservation is given back
    let answer = tokio::time::timeout(Duration::from_secs(2), other.read_frame())
        .await
        .expect("read once memory is free");
    assert!(answer.is_some(), "answered");
    b.stop().await;
}

/// A client that sends a long poll, a produce it waits an answer for, and one it does not
/// (acks=0), then closes cleanly: the long poll ends at once (it only reads), and both
/// produce requests run in the order sent, as Kafka handles what it read before a close
/// (a LeaveGroup sent behind a waiting JoinGroup must still take its member out); only
/// their answers go nowhere. After a reset, the test above: nothing queued runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_sent_before_a_clean_close_still_run_in_order() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut admin = b.client().await;
    assert_eq!(admin.create_topic("left", 1).await, 0);
    let mut leaving = TcpStream::connect(b.addr).await.unwrap();
    let mut out = BytesMut::new();
    out.put(frame(&long_poll("left", 2_000), 12, 1));
    let answered = batch(&["answered"], None, Compression::None);
    out.put(frame(&produce_request("left", 0, answered, 1), 9, 2));
    let unanswered = batch(&["fire-and-forget"], None, Compression::None);
    out.put(frame(&produce_request("left", 0, unanswered, 0), 9, 3));
    leaving.write_all(&out).await.unwrap();
    leaving.shutdown().await.unwrap();
    drop(leaving);

    let p = b.broker.replicas.partition("left", 0).unwrap();
    wait_until(
        "both produce requests are appended without waiting for the long poll",
        Duration::from_secs(1),
        || p.high_watermark() == 2,
    )
    .await;
    wait_until(
        "the connection's memory is given back",
        Duration::from_secs(1),
        || b.request_memory.used() == 0,
    )
    .await;
    let fetched = admin.fetch("left", 0, 0, 0, 1).await;
    assert_eq!(
        values(fetched.records.as_ref().unwrap()),
        vec![
            (0, "answered".to_string()),
            (1, "fire-and-forget".to_string())
        ]
    );
    b.stop().await;
}

/// Issue: after the 30 s shutdown grace, connection tasks went on running handlers while
/// the logs closed. Here a client that never reads its responses keeps its connection's
/// writer blocked past the grace, with produce requests queued behind 16 MB of fetch
/// answers: once the server has stopped no task of it is left, and no produce ever runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_every_connection_task_before_the_logs_close() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let alive = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    assert_eq!(alive(), 0, "a runtime of this test alone");
    let dir = tempfile::tempdir().unwrap();
    let mut b =
        TestBroker::start_with_grace(dir.path(), &[], Some(Duration::from_millis(300))).await;
    let mut admin = b.client().await;
    assert_eq!(admin.create_topic("out", 1).await, 0);
    assert_eq!(admin.create_topic("late", 1).await, 0);
    let value = "o".repeat(1_000_000);
    let (err, _) = admin
        .produce("out", 0, batch(&[&value], None, Compression::None), 1)
        .await;
    assert_eq!(err, 0);
    drop(admin);

    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stuck = socket.connect(b.addr).await.unwrap();
    let mut out = BytesMut::new();
    for i in 0..16 {
        let fetch = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_bytes(2 << 20)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_static_str("out")))
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_partition_max_bytes(2 << 20)])]);
        out.put(frame(&fetch, 12, i));
    }
    for i in 0..3 {
        let late = batch(&["late"], None, Compression::None);
        out.put(frame(&produce_request("late", 0, late, 1), 9, 100 + i));
    }
    stuck.write_all(&out).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let stopping = Instant::now();
    b.stop_serving().await;
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "stopped after the grace period"
    );
    let late = b.broker.replicas.partition("late", 0).unwrap();
    assert_eq!(late.high_watermark(), 0, "the produce requests were behind");
    b.broker.shutdown();
    // The broker's own tasks end with its shutdown; a connection task blocked on its
    // socket would not. (The runtime counts a task out a moment after it ends.)
    wait_until(
        "no task outlives the server and the broker",
        Duration::from_secs(2),
        || alive() == 0,
    )
    .await;
    // Read what was sent: a writer still alive would now go on to the produce requests.
    let mut sink = vec![0u8; 1 << 16];
    let drained = tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(n) = stuck.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
    assert!(drained.is_ok(), "the connection was closed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        late.high_watermark(),
        0,
        "no handler ran after the server stopped"
    );
}

/// `connections.max.idle.ms`: a connection that has read nothing for that long is closed,
/// unless a request of it is still waiting to be answered (a long poll past the limit is
/// answered, and the connection closed only once it has been idle that long again); one
/// that keeps sending stays open; and a clean stop closes the idle connections at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_idle_past_the_limit_are_closed_but_not_while_a_request_waits() {
    let _serial = ONE_AT_A_TIME.lock().await;
    const IDLE: Duration = Duration::from_millis(400);
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[("connections.max.idle.ms", "400")]).await;
    let mut admin = b.client().await;
    assert_eq!(admin.create_topic("quiet", 1).await, 0);
    drop(admin);

    // Answered, then idle.
    let mut idle = b.client().await;
    idle.send(&ApiVersionsRequest::default(), 3).await;
    let answered = Instant::now();
    // A long poll of 1.5 s, well past the limit.
    let mut polling = b.client().await;
    polling
        .stream
        .write_all(&frame(&long_poll("quiet", 1_500), 12, 1))
        .await
        .unwrap();
    let polled = Instant::now();
    // One request every 100 ms for 1.2 s.
    let mut busy = b.client().await;

    let closed = tokio::spawn(async move {
        let gone = idle.read_frame().await;
        (gone.is_none(), answered.elapsed())
    });
    for _ in 0..12 {
        busy.send(&ApiVersionsRequest::default(), 3).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (eof, after) = tokio::time::timeout(Duration::from_secs(10), closed)
        .await
        .expect("the idle connection is closed")
        .unwrap();
    assert!(eof, "closed without an answer");
    assert!(after >= IDLE, "closed after {after:?}, before the limit");

    let answer = tokio::time::timeout(Duration::from_secs(10), polling.read_frame())
        .await
        .expect("the long poll is answered");
    assert!(answer.is_some(), "not closed while the long poll waited");
    assert!(polled.elapsed() >= Duration::from_millis(1_400));
    let idle_again = Instant::now();
    let end = tokio::time::timeout(Duration::from_secs(10), polling.read_frame())
        .await
        .expect("closed once idle");
    assert!(end.is_none());
    assert!(idle_again.elapsed() >= Duration::from_millis(300));

    // The sweep ends with the listener: what closes this one is the stop.
    let mut last = b.client().await;
    last.send(&ApiVersionsRequest::default(), 3).await;
    let stopping = Instant::now();
    let stop = tokio::spawn(b.stop());
    let end = tokio::time::timeout(Duration::from_secs(5), last.read_frame())
        .await
        .expect("closed by the stop");
    assert!(end.is_none());
    tokio::time::timeout(Duration::from_secs(5), stop)
        .await
        .expect("stopped")
        .unwrap();
    assert!(
        stopping.elapsed() < Duration::from_secs(5),
        "an idle connection does not hold up the stop"
    );
}

/// Issue: partition ranges over 16 MB were read whole into memory (five fetchers that
/// never read their sockets took 963 MB). A 20 MB range is answered as one file chunk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_range_over_16_mib_is_sent_from_the_file() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("large", 1).await, 0);
    let value = "l".repeat(1_000_000);
    for _ in 0..20 {
        let (err, _) = c
            .produce("large", 0, batch(&[&value], None, Compression::None), 1)
            .await;
        assert_eq!(err, 0);
    }
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_bytes(64 << 20)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("large")))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_partition_max_bytes(64 << 20)])]);
    let ctx = RequestContext {
        api_key: ApiKey::Fetch,
        api_version: 12,
        correlation_id: 1,
        client_id: None,
        peer: b.addr,
        session: std::sync::Arc::new(Session::new(
            "PLAINTEXT",
            SecurityProtocol::Plaintext,
            b.addr,
        )),
    };
    let (resp, slices) = skua::handlers::fetch::handle(b.broker.clone(), ctx, req.clone()).await;
    let frame =
        skua::protocol::encode_response(ApiKey::Fetch, 12, 1, &ResponseKind::Fetch(resp), slices)
            .unwrap();
    let files: Vec<usize> = frame
        .iter()
        .filter_map(|c| match c {
            Chunk::File(f) => Some(f.len()),
            Chunk::Bytes(_) => None,
        })
        .collect();
    let in_memory: usize = frame
        .iter()
        .filter_map(|c| match c {
            Chunk::Bytes(b) => Some(b.len()),
            Chunk::File(_) => None,
        })
        .sum();
    assert_eq!(files.len(), 1, "one file chunk: {files:?}");
    assert!(files[0] > 16 << 20, "the whole range: {} bytes", files[0]);
    assert!(
        in_memory < 1024,
        "only the response's fields in memory: {in_memory}"
    );

    // Over TCP the client gets every record.
    let resp = c.send(&req, 12).await;
    let got = values(resp.responses[0].partitions[0].records.as_ref().unwrap());
    assert_eq!(got.len(), 20);
    assert_eq!(got[19], (19, value));
    b.stop().await;
}

/// Kafka keys a fetch by topic and partition: a partition named twice is answered once,
/// in the place of its first mention with the fields of its last, and partitions of one
/// topic that end up next to each other share a topic entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_named_twice_is_read_once() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("dup", 2).await, 0);
    for (p, v) in [(0, "a0"), (0, "a1"), (1, "b0")] {
        let (err, _) = c
            .produce("dup", p, batch(&[v], None, Compression::None), 1)
            .await;
        assert_eq!(err, 0);
    }
    let part = |p: i32, offset: i64| {
        fetch_request::FetchPartition::default()
            .with_partition(p)
            .with_fetch_offset(offset)
            .with_partition_max_bytes(1 << 20)
    };
    let topic = |parts| {
        fetch_request::FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("dup")))
            .with_partitions(parts)
    };
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            topic(vec![part(0, 0), part(1, 0)]),
            topic(vec![part(0, 1)]),
        ]);
    let resp = c.send(&req, 12).await;
    assert_eq!(resp.responses.len(), 1, "one topic entry");
    let parts = &resp.responses[0].partitions;
    let answered: Vec<(i32, Vec<(i64, String)>)> = parts
        .iter()
        .map(|p| (p.partition_index, values(p.records.as_ref().unwrap())))
        .collect();
    assert_eq!(
        answered,
        vec![
            (0, vec![(1, "a1".to_string())]),
            (1, vec![(0, "b0".to_string())]),
        ]
    );
    b.stop().await;
}
