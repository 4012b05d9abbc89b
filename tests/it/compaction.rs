//! Log compaction as clients see it over TCP: a compacted topic keeps the latest value of
//! every key, tombstones go after `delete.retention.ms`, records without a key are
//! refused, and `__consumer_offsets` is compacted while its groups load as before.

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use common::{plain_batch, produce_request, wait_for, Client, TestBroker};

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// One batch of records; a `None` key or value is null.
fn batch(entries: &[(Option<String>, Option<String>)]) -> Bytes {
    let entries = entries
        .iter()
        .map(|(k, v)| (k.clone().map(Bytes::from), v.clone().map(Bytes::from)));
    plain_batch(entries, skua::log::now_ms(), Compression::Lz4)
}

async fn produce(c: &mut Client, topic: &str, entries: &[(Option<String>, Option<String>)]) {
    let resp = c
        .send(&produce_request(topic, 0, batch(entries), 1), 9)
        .await;
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0, "{:?}", p.error_message);
}

/// Every record from offset 0 on, with the latest value of each key, and the count.
async fn consume_all(c: &mut Client, topic: &str) -> (usize, BTreeMap<String, Option<String>>) {
    let mut latest = BTreeMap::new();
    let (mut offset, mut count) = (0i64, 0usize);
    loop {
        let p = c.fetch(topic, 0, offset, 0, 1).await;
        assert_eq!(p.error_code, 0);
        let mut bytes = p.records.clone().unwrap_or_default();
        if bytes.is_empty() {
            return (count, latest);
        }
        let mut next = offset;
        for set in RecordBatchDecoder::decode_all(&mut bytes).unwrap() {
            for r in set.records {
                next = next.max(r.offset + 1);
                if r.offset < offset {
                    continue;
                }
                count += 1;
                let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
                latest.insert(text(r.key.as_ref().unwrap()), r.value.as_ref().map(text));
            }
        }
        // A batch may end in offsets that compaction removed.
        let high = p.high_watermark;
        offset = if next == offset { high } else { next };
        if offset >= high {
            return (count, latest);
        }
    }
}

#[tokio::test]
async fn records_without_a_key_are_refused_by_a_compacted_topic() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    c.create_topic_with("keyed", &[("cleanup.policy", "compact,delete")])
        .await;
    let entries = [
        (Some("a".to_string()), Some("1".to_string())),
        (None, Some("2".to_string())),
        (None, None),
    ];
    let resp = c
        .send(&produce_request("keyed", 0, batch(&entries), 1), 9)
        .await;
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ResponseError::InvalidRecord.code());
    let message = "Compacted topic cannot accept message without key in topic partition keyed-0";
    assert_eq!(
        p.error_message.as_deref(),
        Some(
            format!(
                "One or more records have been rejected due to 2 record errors in total, and only showing the first three errors at most: [RecordError(batchIndex=1, message='{message}'), RecordError(batchIndex=2, message='{message}')]"
            )
            .as_str()
        )
    );
    let errors: Vec<(i32, String)> = p
        .record_errors
        .iter()
        .map(|e| {
            (
                e.batch_index,
                e.batch_index_error_message
                    .as_deref()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        errors,
        vec![(1, message.to_string()), (2, message.to_string())]
    );
    assert_eq!(b.log("keyed").log_end_offset(), 0);
    produce(&mut c, "keyed", &entries[..1]).await;
    b.stop().await;
}

/// The measure: 1,000,000 updates over 1,000 keys, then tombstones for 100 of
/// them; the cleaner leaves about one record per key, and once `delete.retention.ms` has
/// passed, no tombstone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_updates_over_a_thousand_keys_shrink_to_a_record_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(
        dir.path(),
        &[
            ("log.cleaner.backoff.ms", "200"),
            ("log.retention.check.interval.ms", "500"),
            ("log.segment.delete.delay.ms", "0"),
        ],
    )
    .await;
    let mut c = b.client().await;
    c.create_topic_with(
        "compacted",
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "1048576"),
            // The idle last segment rolls, so it is cleaned too.
            ("segment.ms", "1000"),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("delete.retention.ms", "2000"),
        ],
    )
    .await;
    const UPDATES: usize = 1_000_000;
    const PER_BATCH: usize = 5_000;
    for start in (0..UPDATES).step_by(PER_BATCH) {
        let entries: Vec<_> = (start..start + PER_BATCH)
            .map(|i| (Some(format!("k{}", i % 1000)), Some(format!("v{i}"))))
            .collect();
        produce(&mut c, "compacted", &entries).await;
    }
    let tombstones: Vec<_> = (900..1000).map(|k| (Some(format!("k{k}")), None)).collect();
    produce(&mut c, "compacted", &tombstones).await;
    let log = b.log("compacted");
    let written = log.size_bytes();
    wait_for("the log is compacted", Duration::from_secs(120), || {
        let size = log.size_bytes();
        async move { size < written / 100 }
    })
    .await;
    let (count, latest) = consume_all(&mut c, "compacted").await;
    assert!((1000..=1100).contains(&count), "{count} records left");
    assert_eq!(latest.len(), 1000);
    for k in 0..900 {
        // The last update of key k was 999_000 + k.
        assert_eq!(
            latest[&format!("k{k}")].as_deref(),
            Some(format!("v{}", 999_000 + k).as_str())
        );
    }
    assert!(
        (900..1000).all(|k| latest[&format!("k{k}")].is_none()),
        "tombstones kept for now"
    );

    // After delete.retention.ms, the next cleaning (new keys make the log dirty again)
    // drops them.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let others: Vec<_> = (0..1000)
        .map(|i| (Some(format!("o{i}")), Some("x".into())))
        .collect();
    produce(&mut c, "compacted", &others).await;
    let started = Instant::now();
    while consume_all(&mut c, "compacted").await.1.len() != 1900 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the tombstones stayed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, latest) = consume_all(&mut c, "compacted").await;
    assert!(
        latest.values().all(Option::is_some),
        "no tombstone older than delete.retention.ms"
    );
    let checkpoint =
        std::fs::read_to_string(dir.path().join(skua::log::CLEANER_OFFSET_CHECKPOINT)).unwrap();
    assert!(checkpoint.contains("compacted 0 "), "{checkpoint}");
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_offsets_is_compacted_and_its_groups_load_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let overrides = [
        ("offsets.topic.num.partitions", "1"),
        ("offsets.topic.segment.bytes", "1048576"),
        ("log.cleaner.backoff.ms", "200"),
        ("group.initial.rebalance.delay.ms", "0"),
    ];
    let b = TestBroker::start(dir.path(), &overrides).await;
    let mut c = b.client().await;
    c.create_topic_with("events", &[]).await;
    let req = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![s("g0")]);
    assert_eq!(c.send(&req, 4).await.coordinators[0].error_code, 0);
    // About 7 MiB of commits (over 600 bytes each) for 10 groups: segments full of
    // superseded offsets, cleaned while the commits go on.
    for i in 0..12_000i64 {
        let metadata = "m".repeat(200);
        let group = format!("g{}", i % 10);
        let code = c.commit_offset(&group, "events", i, Some(&metadata)).await;
        assert_eq!(code, 0);
    }
    let offsets = b.log("__consumer_offsets");
    assert!(offsets.log_end_offset() >= 12_000);
    wait_for(
        "__consumer_offsets is compacted",
        Duration::from_secs(60),
        || {
            // At most the active segment (1 MiB) and a record per group below it.
            let size = offsets.size_bytes();
            async move { size < (1 << 20) + 64 * 1024 }
        },
    )
    .await;
    // Kafka's LogCleaner gauges show the last cleaning: it took time, copied a small
    // part of what it read, and filled some of its offset map.
    let scraped = skua::metrics::scrape::to_string(&b.broker).await;
    let gauge = |name: &str| -> f64 {
        let line = scraped.lines().find(|l| l.starts_with(&format!("{name} ")));
        let line = line.unwrap_or_else(|| panic!("no {name} in the scrape"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(gauge("kafka_log_logcleaner_max_clean_time_secs") > 0.0);
    let recopy = gauge("kafka_log_logcleaner_cleaner_recopy_percent");
    assert!(recopy > 0.0 && recopy < 50.0, "recopy {recopy}%");
    let buffer = gauge("kafka_log_logcleaner_max_buffer_utilization_percent");
    assert!(buffer > 0.0 && buffer < 100.0, "buffer {buffer}%");
    for g in 0..10 {
        assert_eq!(
            c.committed_offsets(&format!("g{g}")).await,
            (0, vec![11_990 + g])
        );
    }
    drop(offsets);
    b.stop().await;

    // The groups come back from the compacted log.
    let b = TestBroker::start(dir.path(), &overrides).await;
    let mut c = b.client().await;
    for g in 0..10 {
        assert_eq!(
            c.committed_offsets(&format!("g{g}")).await,
            (0, vec![11_990 + g])
        );
    }
    let offsets = b.log("__consumer_offsets");
    assert!(
        offsets.size_bytes() < (1 << 20) + 64 * 1024,
        "loaded from the compacted log"
    );
    drop(offsets);
    b.stop().await;
}

/// Changes one topic config with IncrementalAlterConfigs (SET).
async fn set_config(c: &mut Client, topic: &str, key: &str, value: &str) {
    set_resource_config(c, 2, topic, key, value).await
}

/// Changes one config of a resource (2: topic, 4: broker, "" its cluster default) with
/// IncrementalAlterConfigs (SET).
async fn set_resource_config(
    c: &mut Client,
    resource_type: i8,
    name: &str,
    key: &str,
    value: &str,
) {
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(name))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s(key))
                    .with_config_operation(0)
                    .with_value(Some(s(value))),
            ]),
    ]);
    let resp = c.send(&req, 1).await;
    assert_eq!(
        resp.responses[0].error_code, 0,
        "{:?}",
        resp.responses[0].error_message
    );
}

/// `cleanup.policy` and `min.cleanable.dirty.ratio` changed on a live topic act on the
/// cleaner's next turn: a `delete` topic is not compacted until it becomes `compact`; a
/// log whose dirty part is a small share of it waits while its ratio is above that share
/// and is cleaned once the ratio goes below it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanup_policy_and_dirty_ratio_changed_on_a_live_topic_take_effect() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(
        dir.path(),
        &[
            ("log.cleaner.backoff.ms", "100"),
            ("log.retention.check.interval.ms", "200"),
            ("log.segment.delete.delay.ms", "0"),
        ],
    )
    .await;
    let mut c = b.client().await;
    c.create_topic_with(
        "live",
        &[
            ("cleanup.policy", "delete"),
            ("segment.bytes", "1048576"),
            ("segment.ms", "500"),
            ("min.cleanable.dirty.ratio", "0.5"),
        ],
    )
    .await;
    // 40,000 distinct keys, then every one of the first 2,000 again: 2,000 records a
    // compaction would remove.
    for start in (0..40_000).step_by(5_000) {
        let entries: Vec<_> = (start..start + 5_000)
            .map(|i| (Some(format!("k{i:05}")), Some(format!("first-{i:05}"))))
            .collect();
        produce(&mut c, "live", &entries).await;
    }
    let again: Vec<_> = (0..2_000)
        .map(|i| (Some(format!("k{i:05}")), Some(format!("second-{i:05}"))))
        .collect();
    produce(&mut c, "live", &again).await;
    // Many cleaner turns and an idle roll later, a `delete` topic keeps every record.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(consume_all(&mut c, "live").await.0, 42_000);

    set_config(&mut c, "live", "cleanup.policy", "compact").await;
    wait_for_count(&mut c, "the first cleaning", 40_000).await;
    let (_, latest) = consume_all(&mut c, "live").await;
    assert_eq!(latest["k00000"].as_deref(), Some("second-00000"));
    assert_eq!(latest["k39999"].as_deref(), Some("first-39999"));

    // Updates of 500 keys: a dirty ratio near 500 / 40,500, below the 0.5 required.
    set_config(&mut c, "live", "min.cleanable.dirty.ratio", "0.5").await;
    let third: Vec<_> = (0..500)
        .map(|i| (Some(format!("k{i:05}")), Some(format!("third-{i:05}"))))
        .collect();
    produce(&mut c, "live", &third).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        consume_all(&mut c, "live").await.0,
        40_500,
        "cleaned below min.cleanable.dirty.ratio"
    );
    set_config(&mut c, "live", "min.cleanable.dirty.ratio", "0.001").await;
    wait_for_count(&mut c, "the cleaning the lower ratio allows", 40_000).await;
    let (_, latest) = consume_all(&mut c, "live").await;
    assert_eq!(latest["k00499"].as_deref(), Some("third-00499"));
    assert_eq!(latest["k00500"].as_deref(), Some("second-00500"));
    b.stop().await;
}

/// `log.cleaner.backoff.ms` is a dynamic broker config in Kafka: lowered at runtime, the
/// cleaner's next round comes after the new backoff, not the one it started with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lower_cleaner_backoff_set_at_runtime_takes_effect() {
    let dir = tempfile::tempdir().unwrap();
    // A log cleanable from the broker's start: its cleaning shows the cleaner's first
    // round has run.
    let b = TestBroker::start(
        dir.path(),
        &[
            ("log.cleaner.enable", "false"),
            ("log.retention.check.interval.ms", "100"),
        ],
    )
    .await;
    let mut c = b.client().await;
    c.create_topic_with(
        "warm",
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "100"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    )
    .await;
    let twice = [(Some("k".to_string()), Some("old".to_string()))];
    produce(&mut c, "warm", &twice).await;
    produce(&mut c, "warm", &twice).await;
    let warm = b.log("warm");
    wait_for("the idle roll of warm", Duration::from_secs(30), || {
        let rolled = warm.segment_count() == 2;
        async move { rolled }
    })
    .await;
    drop(warm);
    b.stop().await;

    let b = TestBroker::start(
        dir.path(),
        &[
            ("log.cleaner.backoff.ms", "3600000"),
            ("log.retention.check.interval.ms", "200"),
            ("log.segment.delete.delay.ms", "0"),
        ],
    )
    .await;
    let mut c = b.client().await;
    let warm = b.log("warm");
    wait_for("the cleaner's first round", Duration::from_secs(60), || {
        let cleaned = warm.cleaner_checkpoint().is_some();
        async move { cleaned }
    })
    .await;
    assert_eq!(consume_all(&mut c, "warm").await.0, 1, "warm cleaned");
    // The next round is an hour away.
    c.create_topic_with(
        "live",
        &[
            ("cleanup.policy", "compact"),
            ("segment.ms", "500"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    )
    .await;
    let first: Vec<_> = (0..1_000)
        .map(|i| (Some(format!("k{i:04}")), Some(format!("first-{i:04}"))))
        .collect();
    produce(&mut c, "live", &first).await;
    produce(&mut c, "live", &first).await;
    // An idle roll later the log is cleanable, but the cleaner's backoff is an hour: a
    // few of the cleaner jobs' one-second ticks go by without a cleaning.
    let live = b.log("live");
    wait_for("the idle roll of live", Duration::from_secs(30), || {
        let rolled = live.segment_count() == 2;
        async move { rolled }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(consume_all(&mut c, "live").await.0, 2_000);

    set_resource_config(&mut c, 4, "", "log.cleaner.backoff.ms", "100").await;
    wait_for_count(&mut c, "the cleaning after the backoff was lowered", 1_000).await;
    drop((warm, live));
    b.stop().await;
}

/// Waits up to a minute until the topic "live" holds `want` records.
async fn wait_for_count(c: &mut Client, what: &str, want: usize) {
    let start = Instant::now();
    while consume_all(c, "live").await.0 != want {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
