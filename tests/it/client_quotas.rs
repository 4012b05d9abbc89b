//! Client quotas over TCP: AlterClientQuotas puts a quota in force and DescribeClientQuotas
//! shows it, a producer over its `producer_byte_rate` is told its throttle time and held
//! near the rate, a strict controller mutation quota refuses topics, replication is never
//! throttled, and the quotas survive a restart (ClientQuotaRecords in the metadata log).

use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use crate::common::{batch, produce_request, Client, TestBroker};

/// The test client's id (`common::Client` sends it with every request).
const CLIENT_ID: &str = "skua-test";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// AlterClientQuotas of one op on the client id entity `client` (None: the default).
async fn alter(
    c: &mut Client,
    client: Option<&str>,
    key: &str,
    value: Option<f64>,
    validate_only: bool,
) -> (i16, Option<String>) {
    let entity = alter_client_quotas_request::EntityData::default()
        .with_entity_type(s("client-id"))
        .with_entity_name(client.map(s));
    let op = alter_client_quotas_request::OpData::default()
        .with_key(s(key))
        .with_value(value.unwrap_or(0.0))
        .with_remove(value.is_none());
    let req = AlterClientQuotasRequest::default()
        .with_entries(vec![alter_client_quotas_request::EntryData::default()
            .with_entity(vec![entity])
            .with_ops(vec![op])])
        .with_validate_only(validate_only);
    let resp = c.send(&req, 1).await;
    let e = &resp.entries[0];
    (
        e.error_code,
        e.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// Every client-id entity's quotas: (name, key, value).
async fn describe(c: &mut Client) -> Vec<(Option<String>, String, f64)> {
    let req = DescribeClientQuotasRequest::default().with_components(vec![
        describe_client_quotas_request::ComponentData::default()
            .with_entity_type(s("client-id"))
            .with_match_type(2)
            .with_match(None),
    ]);
    let resp = c.send(&req, 1).await;
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
    let mut out = Vec::new();
    for e in resp.entries.unwrap_or_default() {
        let name = e.entity[0].entity_name.as_ref().map(|n| n.to_string());
        for v in e.values {
            out.push((name.clone(), v.key.to_string(), v.value));
        }
    }
    out
}

#[tokio::test]
async fn a_producer_over_its_quota_is_throttled_near_the_rate_and_quotas_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    // Two windows of a second: the rate is measured over one to two seconds, so a few
    // seconds of producing show the bound.
    let windows = [
        ("quota.window.num", "2"),
        ("quota.window.size.seconds", "1"),
    ];
    let b = TestBroker::start(dir.path(), &windows).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("q", 1).await, 0);

    // Checks first: a bad value is refused, validate_only changes nothing.
    let (code, message) = alter(
        &mut c,
        Some(CLIENT_ID),
        "producer_byte_rate",
        Some(1.5),
        false,
    )
    .await;
    assert_eq!(code, ResponseError::InvalidRequest.code());
    assert_eq!(
        message.as_deref(),
        Some("producer_byte_rate cannot be a fractional value.")
    );
    let (code, _) = alter(
        &mut c,
        Some(CLIENT_ID),
        "producer_byte_rate",
        Some(100.0),
        true,
    )
    .await;
    assert_eq!(code, 0);
    assert!(
        describe(&mut c).await.is_empty(),
        "validate_only wrote nothing"
    );

    const RATE: f64 = 200_000.0;
    let (code, _) = alter(
        &mut c,
        Some(CLIENT_ID),
        "producer_byte_rate",
        Some(RATE),
        false,
    )
    .await;
    assert_eq!(code, 0);
    let (code, _) = alter(&mut c, None, "consumer_byte_rate", Some(1e9), false).await;
    assert_eq!(code, 0);
    assert_eq!(
        describe(&mut c).await,
        vec![
            (None, "consumer_byte_rate".to_string(), 1e9),
            (
                Some(CLIENT_ID.to_string()),
                "producer_byte_rate".to_string(),
                RATE
            ),
        ]
    );

    // Produce 20 KB requests back to back: the broker holds each answer back for the
    // throttle the one before earned (KIP-219). The first two seconds spend the
    // allowance a fresh rate starts with (a window's worth) and let Kafka's throttle
    // arithmetic settle; the next three show the steady rate.
    let value = "x".repeat(20_000);
    let records = batch(&[value.as_str()], None, Compression::None);
    let request = produce_request("q", 0, records, 1);
    let started = Instant::now();
    let (mut sent, mut throttled) = (0usize, 0);
    let mut measured_from = None;
    while started.elapsed() < Duration::from_secs(5) {
        let resp = c.send(&request, 9).await;
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
        if resp.throttle_time_ms > 0 {
            throttled += 1;
        }
        match measured_from {
            None if started.elapsed() >= Duration::from_secs(2) => {
                measured_from = Some(Instant::now())
            }
            None => {}
            Some(_) => sent += 20_000,
        }
    }
    let rate = sent as f64 / measured_from.unwrap().elapsed().as_secs_f64();
    eprintln!("produced at {rate:.0} bytes/s against a quota of {RATE}");
    assert!(throttled > 0, "the producer was told its throttle time");
    assert!(
        (RATE * 0.8..=RATE * 1.2).contains(&rate),
        "produced at {rate:.0} bytes/s against a quota of {RATE}"
    );

    // The quotas are in the metadata log: a restarted broker has them, in force.
    drop(c);
    b.stop().await;
    let b = TestBroker::start(dir.path(), &windows).await;
    let mut c = b.client().await;
    assert_eq!(describe(&mut c).await.len(), 2);
    let mut throttled = false;
    for _ in 0..40 {
        if c.send(&request, 9).await.throttle_time_ms > 0 {
            throttled = true;
            break;
        }
    }
    assert!(throttled, "the quota is in force after the restart");

    // Removed: no longer described, no longer throttled, on the connection that was (a
    // connection holds its resolved quotas; a change reaches it at its next request).
    let (code, _) = alter(&mut c, Some(CLIENT_ID), "producer_byte_rate", None, false).await;
    assert_eq!(code, 0);
    assert_eq!(describe(&mut c).await.len(), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..3 {
        assert_eq!(c.send(&request, 9).await.throttle_time_ms, 0);
    }
    // Set again, far lower, while the connection is open: its next produce is throttled
    // (the client id's rate still holds what it produced).
    let (code, _) = alter(
        &mut c,
        Some(CLIENT_ID),
        "producer_byte_rate",
        Some(1_000.0),
        false,
    )
    .await;
    assert_eq!(code, 0);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        c.send(&request, 9).await.throttle_time_ms > 0,
        "the lowered quota reached the open connection"
    );
    drop(c);
    b.stop().await;
}

#[tokio::test]
async fn a_strict_controller_mutation_quota_refuses_topics_once_exhausted() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    // 1 partition/s: a burst of 11 (eleven one-second windows).
    let (code, _) = alter(&mut c, None, "controller_mutation_rate", Some(1.0), false).await;
    assert_eq!(code, 0);
    let topic = |name: &str| {
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(12)
            .with_replication_factor(1)
    };
    let req = CreateTopicsRequest::default()
        .with_topics(vec![topic("m1"), topic("m2")])
        .with_timeout_ms(5000);
    let resp = c.send(&req, 6).await;
    // The first is admitted (the bucket was not in debt), the second refused.
    assert_eq!(resp.topics[0].error_code, 0);
    assert_eq!(
        resp.topics[1].error_code,
        ResponseError::ThrottlingQuotaExceeded.code()
    );
    assert!(resp.throttle_time_ms > 0, "{}", resp.throttle_time_ms);
    assert!(b.broker.controller.topic("m2").is_none());
    // Before v6 the quota is permissive: created, and throttled.
    drop(c);
    let mut c = b.client().await;
    let req = CreateTopicsRequest::default()
        .with_topics(vec![topic("m3")])
        .with_timeout_ms(5000);
    let resp = c.send(&req, 5).await;
    assert_eq!(resp.topics[0].error_code, 0);
    assert!(resp.throttle_time_ms > 0);
    eprintln!("T before stop {:?}", std::time::SystemTime::now());
    drop(c);
    b.stop().await;
    eprintln!("T after stop {:?}", std::time::SystemTime::now());
}

#[tokio::test]
async fn replication_is_never_throttled_by_client_quotas() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("r", 1).await, 0);
    let value = "y".repeat(50_000);
    let (code, _) = c
        .produce("r", 0, batch(&[value.as_str()], None, Compression::None), 1)
        .await;
    assert_eq!(code, 0);
    let (code, _) = alter(&mut c, None, "consumer_byte_rate", Some(1_000.0), false).await;
    assert_eq!(code, 0);
    let fetch = |replica: i32| {
        FetchRequest::default()
            .with_replica_id(BrokerId(replica))
            .with_max_wait_ms(0)
            .with_max_bytes(1024 * 1024)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(TopicName(s("r")))
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1024 * 1024)])])
    };
    // A consumer's fetch of 50 KB against 1 KB/s is throttled...
    let resp = c.send(&fetch(-1), 12).await;
    assert!(resp.throttle_time_ms > 0);
    // ...a follower's (replica id 7: refused, as this broker has no such follower, but
    // never counted nor throttled) is not, and is answered at once.
    drop(c);
    let mut c = b.client().await;
    for _ in 0..3 {
        let started = Instant::now();
        let resp = c.send(&fetch(7), 12).await;
        assert_eq!(resp.throttle_time_ms, 0);
        assert!(started.elapsed() < Duration::from_secs(1));
    }
    drop(c);
    b.stop().await;
}
