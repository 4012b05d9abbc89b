//! A broker started in-process on a loopback port, and a minimal lockstep client that
//! frames requests and reads responses with skua's outbound client codec
//! (`skua::client::codec`), keeping the raw stream at hand for malformed-input tests.

#![allow(dead_code)]

pub mod cluster;
pub mod configs;
pub mod fetch_proxy;
pub mod replicated_topic;
pub mod request_proxy;
pub mod share;
pub mod tls;
pub mod two_brokers;
pub mod txn;
pub mod zookeeper;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use skua::broker::Broker;
use skua::client::codec;
use skua::network::memory::MemoryPool;
use skua::network::Server;

pub struct TestBroker {
    pub addr: SocketAddr,
    /// The metrics endpoint, when `metrics.listener` is set.
    pub metrics_addr: Option<SocketAddr>,
    metrics: Option<skua::metrics::http::MetricsServer>,
    pub broker: Arc<Broker>,
    /// The broker-wide memory of requests read but not answered.
    pub request_memory: Arc<MemoryPool>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl TestBroker {
    pub async fn start(dir: &Path, overrides: &[(&str, &str)]) -> TestBroker {
        Self::start_with_grace(dir, overrides, None).await
    }

    /// [`TestBroker::start`] with the time connections get at shutdown (default 30 s).
    pub async fn start_with_grace(
        dir: &Path,
        overrides: &[(&str, &str)],
        shutdown_grace: Option<Duration>,
    ) -> TestBroker {
        // Broker logs show with `cargo test -- --nocapture` and RUST_LOG set.
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        // Port 0: the broker advertises the port it bound.
        let mut args = vec![
            "--override".to_string(),
            "listeners=PLAINTEXT://127.0.0.1:0".to_string(),
            "--override".to_string(),
            format!("log.dirs={}", dir.display()),
        ];
        for (k, v) in overrides {
            args.push("--override".into());
            args.push(format!("{k}={v}"));
        }
        let mut config = skua::config::from_args(&args).expect("config");
        let listeners = Server::bind_listeners(&mut config).await.expect("bind");
        let metrics_listener = skua::metrics::http::MetricsListener::bind(&config)
            .await
            .expect("bind metrics.listener");
        let broker = Broker::open(config).expect("broker opens");
        let metrics = metrics_listener.map(|l| l.spawn(broker.clone()));
        let mut server = Server::new(listeners, broker.clone());
        if let Some(grace) = shutdown_grace {
            server = server.with_shutdown_grace(grace);
        }
        let addr = server.local_addrs()[0];
        let request_memory = server.request_memory();
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(server.run(async {
            let _ = rx.await;
        }));
        TestBroker {
            addr,
            metrics_addr: metrics.as_ref().and_then(|m| m.addr),
            metrics,
            broker,
            request_memory,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Stops serving and closes the logs cleanly, as SIGTERM does.
    pub async fn stop(mut self) {
        self.stop_serving().await;
        self.broker.shutdown();
    }

    /// Stops serving, as SIGTERM does, without closing the logs yet: returns when the
    /// server is done with every connection.
    pub async fn stop_serving(&mut self) {
        if let Some(m) = self.metrics.take() {
            m.stop().await;
        }
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.addr).await
    }

    /// The log of `topic`'s partition 0 on this broker.
    pub fn log(&self, topic: &str) -> Arc<skua::log::Log> {
        let tp = skua::log::TopicPartition {
            topic: topic.into(),
            partition: 0,
        };
        self.broker.replicas.logs.get_log(&tp).unwrap()
    }
}

/// Polls `check` every 50 ms until it holds; fails the test after `limit`.
pub async fn wait_for<F: std::future::Future<Output = bool>>(
    what: &str,
    limit: Duration,
    mut check: impl FnMut() -> F,
) {
    let start = std::time::Instant::now();
    while !check().await {
        assert!(start.elapsed() < limit, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub struct Client {
    pub stream: TcpStream,
    correlation_id: i32,
    /// The request headers' client id (`skua-test` unless set).
    client_id: String,
}

impl Client {
    pub async fn connect(addr: SocketAddr) -> Client {
        Client {
            stream: TcpStream::connect(addr).await.expect("connect"),
            correlation_id: 0,
            client_id: "skua-test".into(),
        }
    }

    pub fn set_client_id(&mut self, client_id: &str) {
        self.client_id = client_id.to_string();
    }

    /// Sends one request at `version` and decodes its response.
    pub async fn send<R: Request>(&mut self, req: &R, version: i16) -> R::Response {
        self.write_request(req, version).await;
        let frame = self.read_frame().await.expect("response frame");
        let (header, resp) = codec::decode_response::<R>(frame, version).expect("response decodes");
        assert_eq!(header.correlation_id, self.correlation_id, "correlation id");
        resp
    }

    pub async fn write_request<R: Request>(&mut self, req: &R, version: i16) {
        self.correlation_id += 1;
        let frame = codec::encode_request(req, version, self.correlation_id, Some(&self.client_id))
            .expect("request encodes");
        self.stream.write_all(&frame).await.expect("write");
    }

    pub async fn write_frame(&mut self, body: &[u8]) {
        let mut out = BytesMut::with_capacity(4 + body.len());
        out.put_i32(body.len() as i32);
        out.put_slice(body);
        self.stream.write_all(&out).await.expect("write");
    }

    /// Reads one response frame; None when the broker closed the connection.
    pub async fn read_frame(&mut self) -> Option<Bytes> {
        codec::read_frame(&mut self.stream, codec::MAX_FRAME_BYTES)
            .await
            .ok()
            .flatten()
    }

    /// Commits `offset` (with `metadata`) for `topic`-0 from outside any generation, as
    /// admin tools do; the partition's error.
    pub async fn commit_offset(
        &mut self,
        group: &str,
        topic: &str,
        offset: i64,
        metadata: Option<&str>,
    ) -> i16 {
        let s = |v: &str| StrBytes::from_string(v.to_string());
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![
                offset_commit_request::OffsetCommitRequestTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_partitions(vec![
                        offset_commit_request::OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(offset)
                            .with_committed_metadata(metadata.map(s)),
                    ]),
            ]);
        self.send(&req, 8).await.topics[0].partitions[0].error_code
    }

    /// OffsetFetch v8 of every offset of `group`: the group's error and the offsets.
    pub async fn committed_offsets(&mut self, group: &str) -> (i16, Vec<i64>) {
        let req = OffsetFetchRequest::default().with_groups(vec![
            offset_fetch_request::OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
                .with_topics(None),
        ]);
        let g = self.send(&req, 8).await.groups.remove(0);
        let offsets = g
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.committed_offset))
            .collect();
        (g.error_code, offsets)
    }

    pub async fn create_topic(&mut self, name: &str, partitions: i32) -> i16 {
        let req = CreateTopicsRequest::default()
            .with_topics(vec![create_topics_request::CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.into())))
                .with_num_partitions(partitions)
                .with_replication_factor(1)])
            .with_timeout_ms(5000);
        self.send(&req, 7).await.topics[0].error_code
    }

    /// Creates a one-partition topic with `configs`; fails the test unless it succeeds.
    pub async fn create_topic_with(&mut self, name: &str, configs: &[(&str, &str)]) {
        let req = CreateTopicsRequest::default()
            .with_topics(vec![create_topics_request::CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.into())))
                .with_num_partitions(1)
                .with_replication_factor(1)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            create_topics_request::CreatableTopicConfig::default()
                                .with_name(StrBytes::from_string(k.to_string()))
                                .with_value(Some(StrBytes::from_string(v.to_string())))
                        })
                        .collect(),
                )])
            .with_timeout_ms(5000);
        let resp = self.send(&req, 7).await;
        assert_eq!(
            resp.topics[0].error_code, 0,
            "{:?}",
            resp.topics[0].error_message
        );
    }

    /// Produces `records` to one partition; returns (error code, base offset).
    pub async fn produce(
        &mut self,
        topic: &str,
        partition: i32,
        records: Bytes,
        acks: i16,
    ) -> (i16, i64) {
        let req = produce_request(topic, partition, records, acks);
        let resp = self.send(&req, 9).await;
        let p = &resp.responses[0].partition_responses[0];
        (p.error_code, p.base_offset)
    }

    /// Fetches from one partition; returns the partition's response.
    pub async fn fetch(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_wait_ms: i32,
        min_bytes: i32,
    ) -> fetch_response::PartitionData {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(min_bytes)
            .with_max_bytes(50 * 1024 * 1024)
            .with_topics(vec![fetch_request::FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.into())))
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1024 * 1024)])]);
        let resp = self.send(&req, 12).await;
        resp.responses[0].partitions[0].clone()
    }
}

pub fn produce_request(topic: &str, partition: i32, records: Bytes, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(records)),
            ])])
}

/// A v2 batch of `values`, optionally idempotent (producer id, epoch, base sequence).
pub fn batch(
    values: &[&str],
    producer: Option<(i64, i16, i32)>,
    compression: Compression,
) -> Bytes {
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: pid,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch wherever offset - sequence changes; a
            // non-idempotent batch still needs a stepping value (its base sequence is -1).
            sequence: if seq < 0 {
                i as i32 - 1
            } else {
                seq + i as i32
            },
            timestamp: 1_700_000_000_000 + i as i64,
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::copy_from_slice(v.as_bytes())),
            headers: Default::default(),
        })
        .collect();
    encode_v2(&records, compression)
}

/// A v2 batch of plain (non-idempotent) records, one per (key, value), all stamped
/// `timestamp`; a `None` key or value is null.
pub fn plain_batch(
    entries: impl IntoIterator<Item = (Option<Bytes>, Option<Bytes>)>,
    timestamp: i64,
    compression: Compression,
) -> Bytes {
    let records: Vec<Record> = entries
        .into_iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch wherever offset - sequence changes.
            sequence: i as i32 - 1,
            timestamp,
            key,
            value,
            headers: Default::default(),
        })
        .collect();
    encode_v2(&records, compression)
}

/// `records` as v2 batches.
fn encode_v2(records: &[Record], compression: Compression) -> Bytes {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("encode batch");
    buf.freeze()
}

/// Decodes fetched bytes into (offset, value) pairs.
pub fn values(records: &Bytes) -> Vec<(i64, String)> {
    let mut buf = records.clone();
    let mut out = Vec::new();
    for set in RecordBatchDecoder::decode_all(&mut buf).expect("fetched batches decode") {
        for r in set.records {
            out.push((
                r.offset,
                String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned(),
            ));
        }
    }
    out
}
