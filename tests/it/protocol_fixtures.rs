//! Request bytes captured from real clients, replayed against skua.
//!
//! `protocol-tests/fixtures/MANIFEST.tsv` lists every frame librdkafka, kcat, the Java
//! clients, franz-go and kafka-python sent while `protocol-tests/capture.py` sat between
//! them and skua (plus a few handmade frames for versions no client sends). Each client's
//! frames are replayed in capture order on one connection to a scratch broker, and each
//! answer must be what a client can read: the same correlation id, the header version its
//! (api, version) calls for, a body the crate's client-side decoder reads to the last byte,
//! and no error code that only a broker bug explains.

use crate::common;
use crate::replay;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, RequestHeader, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use common::{Client, TestBroker};
use replay::{Fixture, MemberIdMap, TopicIdMap, BUG_CODES};

const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// Every fixture skua routes is a whole request the crate decodes to its last byte, at the
/// version the client put in its header.
#[test]
fn fixtures_decode_completely() {
    let fixtures = replay::manifest();
    assert!(!fixtures.is_empty());
    for f in &fixtures {
        let frame = f.request();
        let (key, version, _) = skua::protocol::codec::peek_header(&frame).expect("header");
        assert_eq!(
            (key, version),
            (f.api_key as i16, f.version),
            "{f}: manifest"
        );
        if !is_routed(f) {
            // Not decoded by skua: answered UNSUPPORTED_VERSION or the connection closed.
            continue;
        }
        let mut buf = frame.clone();
        RequestHeader::decode(&mut buf, f.api_key.request_header_version(f.version))
            .unwrap_or_else(|e| panic!("{f}: header: {e}"));
        RequestKind::decode(f.api_key, &mut buf, f.version)
            .unwrap_or_else(|e| panic!("{f}: body: {e}"));
        if !TRAILING_BYTES_SEEN.contains(&(f.client.as_str(), f.api_key, f.version)) {
            assert_eq!(buf.remaining(), 0, "{f}: trailing bytes after the body");
        }
        skua::protocol::decode_request(frame).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
}

/// Real clients that send bytes after a request body. Kafka's parser reads the fields of the
/// version and ignores what follows, and so does skua.
const TRAILING_BYTES_SEEN: &[(&str, ApiKey, i16)] = &[
    // librdkafka 2.16's describe_cluster: a Metadata v13 for all topics, then `01 00 00`.
    ("librdkafka", ApiKey::Metadata, 13),
];

/// Frames skua hands to the crate's decoder: routed versions, except Produce v0–2 (which
/// the crate has no codec for; skua reads their few fields itself).
fn is_routed(f: &Fixture) -> bool {
    skua::router::lookup(f.api_key, f.version).is_some()
        && !(f.api_key == ApiKey::Produce && f.version < 3)
}

/// ApiVersions advertises nothing that no fixture exercises: the single-node routes by the
/// clients' fixtures, the ZooKeeper-mode routes by what Kafka's brokers, controllers and
/// admin clients sent a Kafka cluster (`protocol-tests/fixtures-cluster`), except the
/// versions in `ZK_NO_PEER_SENDS`.
#[test]
fn every_advertised_version_has_a_fixture() {
    let have = |fixtures: Vec<Fixture>| {
        let mut have: BTreeMap<(i16, i16), BTreeSet<String>> = BTreeMap::new();
        for f in fixtures {
            have.entry((f.api_key as i16, f.version))
                .or_default()
                .insert(f.client.clone());
        }
        have
    };
    let (clients, cluster) = (have(replay::manifest()), have(replay::cluster_manifest()));
    let mut missing = Vec::new();
    for route in skua::router::ROUTES {
        for v in route.min_version..=route.max_version {
            if !clients.contains_key(&(route.api_key as i16, v)) {
                missing.push(format!("{:?} v{v}", route.api_key));
            }
        }
    }
    for route in skua::router::ZK_ROUTES {
        for v in route.min_version..=route.max_version {
            let key = (route.api_key as i16, v);
            let excused = ZK_NO_PEER_SENDS
                .iter()
                .any(|(k, ver, _)| (*k as i16, *ver) == key);
            match (cluster.contains_key(&key), excused) {
                (false, false) => {
                    missing.push(format!("{:?} v{v} (ZooKeeper mode)", route.api_key))
                }
                (true, true) => panic!(
                    "{:?} v{v} is captured now ({:?}): drop it from ZK_NO_PEER_SENDS",
                    route.api_key, cluster[&key]
                ),
                _ => {}
            }
        }
    }
    assert!(
        missing.is_empty(),
        "advertised but never replayed (capture them, see protocol-tests/README.md): {}",
        missing.join(", ")
    );
}

/// Versions skua advertises in ZooKeeper mode that no Apache Kafka peer sends to it, each
/// with why it stays advertised. None today: Kafka 3.9.1 at an older
/// `inter.broker.protocol.version` sends every older inter-broker version (ControlledShutdown
/// v0 at 0.8.x, UpdateMetadata v1 at 0.9 ...), Kafka 3.1 and 3.4 brokers send AlterPartition
/// v0 and v2, and IBM/sarama set to Kafka 0.10.2 and 2.3 sends ElectLeaders v0 and v1 (Kafka's
/// own admin client sends v2 to any broker that offers it).
const ZK_NO_PEER_SENDS: &[(ApiKey, i16, &str)] = &[];

/// Every inter-broker and cluster-admin frame skua routes in ZooKeeper mode decodes with
/// skua's own request decoder, at the version in its header. (`tests/it/cluster_fixtures.rs`
/// decodes each with the crate to its last byte and encodes it back to the same bytes.)
#[test]
fn zk_fixtures_decode_completely() {
    let fixtures = replay::cluster_manifest();
    assert!(!fixtures.is_empty());
    let mut decoded = 0;
    for f in &fixtures {
        let frame = f.request();
        let (key, version, _) = skua::protocol::codec::peek_header(&frame).expect("header");
        assert_eq!(
            (key, version),
            (f.api_key as i16, f.version),
            "{f}: manifest"
        );
        assert!(
            skua::router::lookup_in(f.api_key, f.version, skua::router::Mode::ZooKeeper).is_some(),
            "{f}: captured from a Kafka peer but not routed in ZooKeeper mode"
        );
        let request = skua::protocol::decode_request(frame).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(request.api_version, f.version, "{f}");
        decoded += 1;
    }
    assert_eq!(decoded, fixtures.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_every_client() {
    let dir = tempfile::tempdir().unwrap();
    // As at capture (capture-all.sh): a new group's first JoinGroup is answered at once
    // rather than after 3 s; every captured group has one member at a time.
    let broker = TestBroker::start(dir.path(), &[("group.initial.rebalance.delay.ms", "0")]).await;
    // At capture time `__consumer_offsets` existed for every client but the first to use a
    // group (librdkafka), whose FindCoordinator created it. Create it up front here too:
    // clients replaying side by side would otherwise race its creation, and a JoinGroup
    // sent while its partitions are still being made is answered NOT_COORDINATOR.
    let mut setup = broker.client().await;
    let found = setup
        .send(
            &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("replay-setup")),
            3,
        )
        .await;
    assert_eq!(found.error_code, 0, "{found:?}");
    drop(setup);
    let mut by_client: BTreeMap<String, Vec<Fixture>> = BTreeMap::new();
    // The transactional clients, in capture order (see below).
    let mut txn_clients: Vec<(String, Vec<Fixture>)> = Vec::new();
    for f in replay::manifest() {
        if f.client.starts_with(TXN_CLIENT_PREFIX) {
            match txn_clients.iter_mut().find(|(c, _)| *c == f.client) {
                Some((_, fixtures)) => fixtures.push(f),
                None => txn_clients.push((f.client.clone(), vec![f])),
            }
        } else {
            by_client.entry(f.client.clone()).or_default().push(f);
        }
    }
    // Clients use disjoint topics, so they replay side by side; long polls overlap.
    let mut tasks = Vec::new();
    for (client, fixtures) in by_client {
        let addr = broker.addr;
        tasks.push(tokio::spawn(async move {
            let started = std::time::Instant::now();
            let failures = replay_client(addr, &fixtures).await;
            (client, fixtures.len(), failures, started.elapsed())
        }));
    }
    let mut failures = Vec::new();
    for t in tasks {
        let (client, n, f, took) = t.await.expect("replay task");
        eprintln!(
            "{client}: {n} frames replayed in {took:.1?}, {} failed",
            f.len()
        );
        failures.extend(f);
    }
    // Transactional clients name the producer ids the broker handed them in later frames
    // (AddPartitionsToTxn, EndTxn, their batches), so they replay as they were captured
    // (capture-txn.sh): on a broker of their own, one after another, which hands out the
    // same ids in the same order.
    let txn_dir = tempfile::tempdir().unwrap();
    let txn_broker = TestBroker::start(txn_dir.path(), TXN_CAPTURE_OVERRIDES).await;
    let found = txn_broker
        .client()
        .await
        .send(
            &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("replay-setup")),
            1,
        )
        .await;
    assert_eq!(found.error_code, 0, "{found:?}");
    for (client, fixtures) in &txn_clients {
        let started = std::time::Instant::now();
        let f = replay_client(txn_broker.addr, fixtures).await;
        eprintln!(
            "{client}: {} frames replayed in {:.1?}, {} failed",
            fixtures.len(),
            started.elapsed(),
            f.len()
        );
        failures.extend(f);
    }
    txn_broker.stop().await;
    // The broker still serves after every client's frames.
    let mut conn = broker.client().await;
    let versions = conn
        .send(&kafka_protocol::messages::ApiVersionsRequest::default(), 3)
        .await;
    assert_eq!(versions.error_code, 0);
    broker.stop().await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Clients captured by `capture-txn.sh`.
const TXN_CLIENT_PREFIX: &str = "txn-";
/// The broker `capture-txn.sh` captures against.
const TXN_CAPTURE_OVERRIDES: &[(&str, &str)] = &[
    ("transaction.state.log.num.partitions", "3"),
    ("offsets.topic.num.partitions", "3"),
];

/// Replays one client's frames in order on one connection; the failures.
async fn replay_client(addr: std::net::SocketAddr, fixtures: &[Fixture]) -> Vec<String> {
    let mut conn = Client::connect(addr).await;
    let mut ids = TopicIdMap::default();
    let mut members = MemberIdMap::default();
    let mut failures = Vec::new();
    for f in fixtures {
        if !is_advertised(f) {
            // As Kafka does, a version outside the advertised range closes the
            // connection; the client reconnects (old franz-go pins probe this way).
            if let Err(e) = expect_close(&mut conn, f).await {
                failures.push(format!("{f}: {e}"));
            }
            conn = Client::connect(addr).await;
            continue;
        }
        if let Err(e) = replay_one(&mut conn, &mut ids, &mut members, f).await {
            failures.push(format!("{f}: {e}"));
            if e.starts_with("connection") {
                break;
            }
        }
    }
    failures
}

/// In the routing table, or an ApiVersions request (answered at any version, KIP-511).
fn is_advertised(f: &Fixture) -> bool {
    f.api_key == ApiKey::ApiVersions || skua::router::lookup(f.api_key, f.version).is_some()
}

async fn expect_close(conn: &mut Client, f: &Fixture) -> Result<(), String> {
    conn.write_frame(&f.request()).await;
    match tokio::time::timeout(RESPONSE_TIMEOUT, conn.read_frame()).await {
        Ok(None) => Ok(()),
        Ok(Some(_)) => Err("an unadvertised version was answered".into()),
        Err(_) => Err("an unadvertised version neither answered nor closed".into()),
    }
}

/// Sends one fixture and checks the answer. Each client replays on a broker in the state its
/// own earlier frames left, so the error codes must be the ones skua gave at capture time.
async fn replay_one(
    conn: &mut Client,
    ids: &mut TopicIdMap,
    members: &mut MemberIdMap,
    f: &Fixture,
) -> Result<(), String> {
    let mut frame = BytesMut::from(&f.request()[..]);
    ids.rewrite(&mut frame);
    members.rewrite(&mut frame);
    let frame = frame.freeze();
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let retry_until = tokio::time::Instant::now() + SHARE_INITIALIZATION_WAIT;
    let response = loop {
        conn.write_frame(&frame).await;
        if !expects_response(f, &frame) {
            return Ok(());
        }
        let response = tokio::time::timeout(RESPONSE_TIMEOUT, conn.read_frame())
            .await
            .map_err(|_| "no response within 10 s".to_string())?
            .ok_or("connection closed instead of answering")?;
        if tokio::time::Instant::now() < retry_until
            && met_uninitialized_share_partition(f, &frame, &response)
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        break response;
    };
    if f.api_key == ApiKey::Produce && f.version < 3 {
        return check_legacy_produce(f, response, correlation_id);
    }
    let (got_id, body) = replay::decode_response(f.api_key, f.version, response)?;
    if got_id != correlation_id {
        return Err(format!("correlation id {got_id}, sent {correlation_id}"));
    }
    check_error_codes(f, &body)?;
    if let Some(captured) = f.captured_response() {
        let (_, captured) = replay::decode_response(f.api_key, f.version, captured)
            .map_err(|e| format!("captured response: {e}"))?;
        ids.learn(&captured, &body);
        members.learn(&captured, &body)?;
        if !lists_every_topic(&frame) {
            let (then, now) = (replay::error_codes(&captured), replay::error_codes(&body));
            if then != now && !raced_share_epoch(f, &then, &now) {
                return Err(format!("error codes {now:?}, at capture {then:?}"));
            }
        }
    }
    Ok(())
}

/// How long an opening ShareFetch is sent again while it meets share-partitions whose
/// state the group coordinator is still initializing.
const SHARE_INITIALIZATION_WAIT: Duration = Duration::from_secs(5);

/// An opening ShareFetch (session epoch 0) answered, for a share-partition whose state
/// the group coordinator has not initialized yet, UNKNOWN_SERVER_ERROR with the share
/// coordinator's message, as Kafka answers it. At capture that initialization (a round
/// trip to the share coordinator after the member's first heartbeat) had finished
/// before the fetch; in a replay it may not have, and the client would fetch again, as
/// the replay does (sending the same opening request again replaces the session).
fn met_uninitialized_share_partition(f: &Fixture, frame: &Bytes, response: &Bytes) -> bool {
    if f.api_key != ApiKey::ShareFetch {
        return false;
    }
    let opens = matches!(
        skua::protocol::decode_request(frame.clone()).map(|r| r.body),
        Ok(RequestKind::ShareFetch(r)) if r.share_session_epoch == 0
    );
    let Ok((_, ResponseKind::ShareFetch(body))) =
        replay::decode_response(f.api_key, f.version, response.clone())
    else {
        return false;
    };
    opens
        && body.responses.iter().flat_map(|t| &t.partitions).any(|p| {
            p.error_code == ResponseError::UnknownServerError.code()
                && p.error_message.as_deref()
                    == Some(skua::coordinator::share::shard::READ_UNINITIALIZED_SHARE_PARTITION)
        })
}

/// A share group heartbeat that carries the member epoch its group had after the share
/// state of its topics was initialized: at capture that initialization (a round trip to
/// the share coordinator) finished before the heartbeat, in a replay it may not have yet,
/// and the heartbeat is then fenced. Only that difference is let through.
fn raced_share_epoch(f: &Fixture, then: &[i16], now: &[i16]) -> bool {
    f.api_key == ApiKey::ShareGroupHeartbeat
        && then == [0]
        && now == [ResponseError::FencedMemberEpoch.code()]
}

/// A Metadata request for every topic: its answer depends on the other clients' topics.
fn lists_every_topic(frame: &Bytes) -> bool {
    match skua::protocol::decode_request(frame.clone()) {
        Ok(r) => match r.body {
            RequestKind::Metadata(m) => m.topics.is_none_or(|t| t.is_empty() && r.api_version == 0),
            _ => false,
        },
        Err(_) => false,
    }
}

/// acks=0 produce requests get no response.
fn expects_response(f: &Fixture, frame: &Bytes) -> bool {
    if f.api_key != ApiKey::Produce {
        return true;
    }
    let mut buf = frame.clone();
    if f.version < 3 {
        let _ = RequestHeader::decode(&mut buf, 1);
        return buf.remaining() < 2 || buf.get_i16() != 0;
    }
    match skua::protocol::decode_request(buf) {
        Ok(r) => !matches!(r.body, RequestKind::Produce(p) if p.acks == 0),
        Err(_) => true,
    }
}

fn check_error_codes(f: &Fixture, body: &ResponseKind) -> Result<(), String> {
    let too_new_api_versions = replay::response_version(f.api_key, f.version) != f.version;
    for code in replay::error_codes(body) {
        if code == 35 && too_new_api_versions {
            continue;
        }
        if let Some((_, name)) = BUG_CODES.iter().find(|(c, _)| *c == code) {
            return Err(format!("error {code} {name} in {body:?}"));
        }
    }
    if too_new_api_versions && replay::error_codes(body).first() != Some(&35) {
        return Err("a too-new ApiVersions must be answered UNSUPPORTED_VERSION".into());
    }
    Ok(())
}

/// Produce v0–2 is advertised but refused: every partition UNSUPPORTED_VERSION.
fn check_legacy_produce(f: &Fixture, mut response: Bytes, sent: i32) -> Result<(), String> {
    if response.remaining() < 4 || response.get_i32() != sent {
        return Err("correlation id".into());
    }
    let errors = replay::legacy_produce_errors(response, f.version)
        .ok_or("malformed Produce v0-2 response")?;
    if errors.is_empty() || errors.iter().any(|&e| e != 35) {
        return Err(format!(
            "expected UNSUPPORTED_VERSION everywhere, got {errors:?}"
        ));
    }
    Ok(())
}
