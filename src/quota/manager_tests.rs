use std::collections::BTreeMap;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;

use super::*;
use crate::quota::configs::{
    CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE,
};

fn named(n: &str) -> EntityName {
    EntityName::Named(n.to_string())
}

fn d() -> EntityName {
    EntityName::Default
}

/// Every entity of Kafka's eight levels, its level number as its produce quota.
fn eight_levels() -> ClientQuotas {
    let q = |v: f64| BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), v)]);
    BTreeMap::from([
        (QuotaEntity::user_client_id(named("u"), named("c")), q(1.0)),
        (QuotaEntity::user_client_id(named("u"), d()), q(2.0)),
        (QuotaEntity::user(named("u")), q(3.0)),
        (QuotaEntity::user_client_id(d(), named("c")), q(4.0)),
        (QuotaEntity::user_client_id(d(), d()), q(5.0)),
        (QuotaEntity::user(d()), q(6.0)),
        (QuotaEntity::client_id(named("c")), q(7.0)),
        (QuotaEntity::client_id(d()), q(8.0)),
    ])
}

#[test]
fn precedence_is_kafkas_eight_levels() {
    let mut quotas = eight_levels();
    let m = ClientQuotaManager::new(QuotaSettings::default());
    // Remove the most specific level one at a time: the next one applies.
    for level in 1..=8 {
        m.update(&quotas);
        assert_eq!(
            m.quota(QuotaType::Produce, "u", "c"),
            Some(level as f64),
            "with levels {level}..=8"
        );
        let first = quotas
            .keys()
            .find(|e| quotas[*e][PRODUCER_BYTE_RATE] == level as f64);
        let first = first.cloned().unwrap();
        quotas.remove(&first);
    }
    m.update(&quotas);
    assert_eq!(m.quota(QuotaType::Produce, "u", "c"), None);
}

#[test]
fn other_users_and_clients_get_the_defaults() {
    let m = ClientQuotaManager::new(QuotaSettings::default());
    m.update(&eight_levels());
    // Another client of u: u's <default> client (level 2).
    assert_eq!(m.quota(QuotaType::Produce, "u", "other"), Some(2.0));
    // Another user with client c: <default> user's client c (level 4).
    assert_eq!(m.quota(QuotaType::Produce, "v", "c"), Some(4.0));
    // Neither: <default> user's <default> client (level 5).
    assert_eq!(m.quota(QuotaType::Produce, "v", "w"), Some(5.0));
    // Only client-id quotas: another client id gets clients/<default>.
    let clients = BTreeMap::from([
        (
            QuotaEntity::client_id(named("c")),
            BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), 7.0)]),
        ),
        (
            QuotaEntity::client_id(d()),
            BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), 8.0)]),
        ),
    ]);
    m.update(&clients);
    assert_eq!(m.quota(QuotaType::Produce, "v", "c"), Some(7.0));
    assert_eq!(m.quota(QuotaType::Produce, "v", "w"), Some(8.0));
    // Quota types are independent: no consumer quota anywhere.
    assert_eq!(m.quota(QuotaType::Fetch, "v", "w"), None);
}

fn who<'a>(user: &'a str, client_id: &'a str) -> QuotaClient<'a> {
    QuotaClient { user, client_id }
}

fn handled(api_key: ApiKey, request_bytes: usize, handler_time: Duration) -> Recorded<'static> {
    Recorded {
        api_key,
        request_bytes,
        response_bytes: None,
        handler_time,
    }
}

fn produce(m: &ClientQuotaManager, user: &str, client: &str, bytes: usize, now_ms: i64) -> i32 {
    let recorded = handled(ApiKey::Produce, bytes, Duration::ZERO);
    m.record_at(who(user, client), recorded, now_ms)
}

#[test]
fn a_producer_over_its_byte_rate_is_throttled_as_kafka_computes() {
    let m = ClientQuotaManager::new(QuotaSettings::default());
    m.update(&BTreeMap::from([(
        QuotaEntity::user(named("u")),
        BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), 1000.0)]),
    )]));
    // 10 000 bytes at once: 1 000/s over the ten-window span; not over.
    assert_eq!(produce(&m, "u", "a", 10_000, 0), 0);
    // One more byte is over: 10 001 bytes over 10 s, throttle 1 ms.
    assert_eq!(produce(&m, "u", "a", 1, 0), 1);
    // Another client of u shares u's rate (user-level quota): 11 001 over 10 s.
    assert_eq!(produce(&m, "u", "b", 1000, 0), 1001);
    // Another user has no quota.
    assert_eq!(produce(&m, "v", "a", 1_000_000, 0), 0);
    // Once the burst has left every window, nothing is left of it.
    assert_eq!(produce(&m, "u", "a", 0, 11_000), 0);
}

#[test]
fn a_client_id_quota_is_per_client_id_across_users() {
    let m = ClientQuotaManager::new(QuotaSettings::default());
    m.update(&BTreeMap::from([(
        QuotaEntity::client_id(d()),
        BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), 100.0)]),
    )]));
    assert_eq!(produce(&m, "u", "a", 1_000, 0), 0);
    // The same client id from another user shares its rate: 1 100 bytes over 10 s is
    // 10 % over, 1 s of throttle...
    assert_eq!(produce(&m, "v", "a", 100, 0), 1_000);
    // ...another client id has its own, at the default's bound.
    assert_eq!(produce(&m, "v", "b", 1_000, 0), 0);
}

#[test]
fn consumer_quotas_count_response_bytes_and_bound_a_fetch() {
    let m = ClientQuotaManager::new(QuotaSettings::default());
    assert_eq!(m.max_fetch_bytes("u", "c"), None);
    m.update(&BTreeMap::from([(
        QuotaEntity::user(d()),
        BTreeMap::from([(CONSUMER_BYTE_RATE.to_string(), 100.0)]),
    )]));
    let fetch = |bytes: usize| {
        let size = move || bytes;
        let recorded = Recorded {
            response_bytes: Some(&size),
            ..handled(ApiKey::Fetch, 5, Duration::ZERO)
        };
        m.record_at(who("u", "c"), recorded, 0)
    };
    assert_eq!(fetch(1_000), 0);
    assert_eq!(fetch(100), 1_000);
    // Produce is not bounded by a consumer quota.
    assert_eq!(produce(&m, "u", "c", 1_000_000, 0), 0);
    // Ten windows at 100 bytes/s.
    assert_eq!(m.max_fetch_bytes("u", "c"), Some(1_000));
}

/// Through the pipeline's entry point, a consumer's Fetch counts exactly its response
/// body's encoded size (as Kafka's `FetchResponse.sizeOf` sizes it), in a non-flexible
/// and a flexible version: against 100 B/s over a ten-window span, N bytes at once earn
/// a throttle of 10 × N − 10,000 ms.
#[test]
fn a_consumer_fetch_counts_its_encoded_response_size() {
    use bytes::{Bytes, BytesMut};
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, FetchableTopicResponse, PartitionData,
    };
    use kafka_protocol::messages::{FetchResponse, ResponseKind, TopicName};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use crate::network::{Principal, SecurityProtocol, Session};
    use crate::quota::Caller;

    let m = ClientQuotaManager::new(QuotaSettings::default());
    m.update(&BTreeMap::from([(
        QuotaEntity::user(d()),
        BTreeMap::from([(CONSUMER_BYTE_RATE.to_string(), 100.0)]),
    )]));
    let partition = |i: i32, records: usize| {
        PartitionData::default()
            .with_partition_index(i)
            .with_high_watermark(10)
            .with_aborted_transactions(Some(vec![AbortedTransaction::default()]))
            .with_records(Some(Bytes::from(vec![1u8; records])))
    };
    let response = FetchResponse::default().with_responses(vec![
        FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("topic")))
            .with_partitions(vec![partition(0, 1_500), partition(1, 0)]),
        FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_static_str("other")))
            .with_partitions(vec![partition(0, 700).with_error_code(1)]),
    ]);
    for version in [11, 16] {
        let mut session = Session::new(
            "PLAINTEXT",
            SecurityProtocol::Plaintext,
            "127.0.0.1:1".parse().unwrap(),
        );
        // A user of its own per version: each starts with an empty rate.
        session.principal = Principal::user(format!("u{version}"));
        let caller = Caller {
            session: &session,
            client_id: "c",
            api_version: version,
            at: m.epoch,
        };
        let mut body = BytesMut::new();
        response.encode(&mut body, version).unwrap();
        let fetch = ResponseKind::Fetch(response.clone());
        let verdict = QuotaManager::record(&m, &caller, ApiKey::Fetch, 5, &fetch, Duration::ZERO);
        assert!(body.len() > 2_200, "{}", body.len());
        // Kafka's FetchResponse.sizeOf: the body and 4 bytes of response header.
        assert_eq!(
            verdict.throttle_ms as usize,
            10 * (4 + body.len()) - 10_000,
            "v{version}: {} bytes",
            body.len()
        );
    }
}

#[test]
fn request_percentage_counts_handler_time_and_bounds_the_throttle() {
    let m = ClientQuotaManager::new(QuotaSettings::default());
    m.update(&BTreeMap::from([(
        QuotaEntity::user(named("u")),
        BTreeMap::from([(REQUEST_PERCENTAGE.to_string(), 10.0)]),
    )]));
    let handled_for = |ms: u64| {
        let recorded = handled(ApiKey::Metadata, 0, Duration::from_millis(ms));
        m.record_at(who("u", "c"), recorded, 0)
    };
    // 1 s of handler time in a 10 s span: 10 %.
    assert_eq!(handled_for(1_000), 0);
    // 11 s of it would take 100 s to even out; Kafka bounds it to one window.
    assert_eq!(handled_for(10_000), 1_000);
}

#[test]
fn nothing_is_recorded_before_any_quota_is_set() {
    let m = ClientQuotaManager::new(QuotaSettings::default());
    assert!(!QuotaManager::enabled(&m));
    assert_eq!(produce(&m, "u", "c", usize::MAX / 2, 0), 0);
    assert!(m.clients.is_empty());
}

#[test]
fn a_quota_change_applies_to_clients_already_seen() {
    let m = ClientQuotaManager::new(QuotaSettings::default());
    let set = |v: f64| {
        m.update(&BTreeMap::from([(
            QuotaEntity::user(named("u")),
            BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), v)]),
        )]))
    };
    set(1_000_000.0);
    assert_eq!(produce(&m, "u", "c", 20_000, 0), 0);
    set(1_000.0);
    // The same rate, now against the lower bound: 21 000 bytes over 10 s.
    assert_eq!(produce(&m, "u", "c", 1_000, 0), 11_000);
    m.update(&BTreeMap::new());
    assert_eq!(produce(&m, "u", "c", 1_000_000, 0), 0);
}

/// A connection's held quotas follow every change: a quota lowered, removed or set for
/// the first time reaches the open connection at its next request, and another client
/// id on the connection counts against its own rate.
#[test]
fn a_connections_held_quotas_follow_quota_changes() {
    let m = ClientQuotaManager::new(QuotaSettings::default());
    let held = ConnectionQuota::default();
    let set = |v: Option<f64>| {
        let quotas = v.map(|v| {
            (
                QuotaEntity::user_client_id(named("u"), d()),
                BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), v)]),
            )
        });
        m.update(&quotas.into_iter().collect());
    };
    let produce = |client: &str, bytes: usize, now_ms: i64| {
        let recorded = handled(ApiKey::Produce, bytes, Duration::ZERO);
        m.record_held(&held, who("u", client), recorded, now_ms)
    };
    // Before any quota: nothing held, nothing recorded.
    assert_eq!(produce("c", 1_000_000, 0), 0);
    assert!(held.0.lock().is_none());
    set(Some(1_000_000.0));
    assert_eq!(produce("c", 20_000, 0), 0);
    assert!(held.0.lock().is_some());
    // Lowered: 21 000 bytes over 10 s against 1 000/s.
    set(Some(1_000.0));
    assert_eq!(produce("c", 1_000, 0), 11_000);
    // Another client id on the same connection: its own rate (a user + client id level).
    assert_eq!(produce("other", 10_000, 0), 0);
    assert_eq!(produce("c", 0, 0), 11_000);
    // Removed: not throttled, and nothing recorded; set again: the rate is the one
    // before, against the bound again.
    set(None);
    assert_eq!(produce("c", 1_000_000, 0), 0);
    set(Some(1_000.0));
    assert_eq!(produce("c", 0, 0), 11_000);
    // A clone (a re-authenticated session) holds nothing.
    assert!(held.clone().0.lock().is_none());
    // Another manager's resolution is not taken for this one's.
    let other = ClientQuotaManager::new(QuotaSettings::default());
    other.update(&BTreeMap::from([(
        QuotaEntity::user_client_id(named("u"), d()),
        BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), 1e12)]),
    )]));
    let recorded = handled(ApiKey::Produce, 0, Duration::ZERO);
    assert_eq!(other.record_held(&held, who("u", "c"), recorded, 0), 0);
}

#[test]
fn a_strict_mutation_quota_refuses_once_in_debt() {
    let m = ClientQuotaManager::new(QuotaSettings {
        windows: Windows::new(11, 1),
        controller_windows: Windows::new(10, 1),
    });
    let mut none = m.mutation_quota_at("u", "c", true, 0);
    assert_eq!(none.record(1_000.0), Ok(()));
    m.update(&BTreeMap::from([(
        QuotaEntity::user(named("u")),
        BTreeMap::from([(CONTROLLER_MUTATION_RATE.to_string(), 2.0)]),
    )]));
    let at = |ms: u64| m.epoch + Duration::from_millis(ms);
    let mut q = m.mutation_quota_at("u", "c", true, 0);
    // A burst of 20 tokens: 30 partitions are accepted at once (not in debt yet)...
    assert_eq!(q.record_at(30.0, at(0)), Ok(()));
    // ...the next is refused, until the debt of 10 is refilled at 2/s: 5 s.
    assert_eq!(q.record_at(1.0, at(0)), Err(5_000));
    assert!(q.is_exceeded());
    let mut later = m.mutation_quota_at("u", "c", true, 5_000);
    assert_eq!(later.record_at(1.0, at(5_000)), Ok(()));
    // A permissive quota (older request versions) accepts and throttles.
    let mut permissive = m.mutation_quota_at("u", "c", false, 5_000);
    assert_eq!(permissive.record_at(10.0, at(5_000)), Ok(()));
    assert!(!permissive.is_exceeded());
    assert!(permissive.last_throttle_ms > 0);
}

#[test]
fn each_client_sensor_exports_its_throttle_time_and_rate_under_strimzis_names() {
    let m = ClientQuotaManager::new(QuotaSettings::default());
    m.update(&BTreeMap::from([(
        QuotaEntity::user(named("u")),
        BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), 1000.0)]),
    )]));
    assert_eq!(produce(&m, "u", "c", 10_000, 0), 0);
    let throttle = produce(&m, "u", "c", 10_000, 0);
    assert!(throttle > 0);
    let mut out = Exposition::new(crate::metrics::exposition::Format::Prometheus);
    m.write_metrics(&mut out);
    let text = out.as_str();
    // A user-level quota: the user is in the sensor's tags, the client id is not.
    let labels = r#"{resource="Produce",user="u",clientId=""}"#;
    let line = |name: &str| {
        let prefix = format!("{name}{labels} ");
        let line = text.lines().find(|l| l.starts_with(&prefix));
        let value = line.unwrap_or_else(|| panic!("{prefix} in\n{text}"));
        value[prefix.len()..].parse::<f64>().unwrap()
    };
    // One throttled request of the two: the mean of the throttles given.
    assert_eq!(line("kafka_server_quota_throttle_time"), throttle as f64);
    // 20,000 bytes over the ten-window span.
    assert_eq!(line("kafka_server_quota_byte_rate"), 2_000.0);
    assert!(!text.contains("kafka_server_quota_request_time{"));
}
