//! The marker queues against a stand-in broker that records each WriteTxnMarkers and
//! answers it (holding its first answer back while the test queues more).

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::*;
use crate::client::ClientConfig;
use crate::controller::BrokerInfo;

const BROKER: i32 = 2;

/// What the stand-in broker saw, and its answers: each request waits for a permit.
struct StandIn {
    requests: Mutex<Vec<WriteTxnMarkersRequest>>,
    answer: Semaphore,
    /// Partitions (topic, partition) answered NOT_LEADER_OR_FOLLOWER.
    refused: Vec<(String, i32)>,
}

async fn stand_in(refused: Vec<(String, i32)>) -> (Arc<StandIn>, MarkerQueues) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let broker = Arc::new(StandIn {
        requests: Mutex::new(Vec::new()),
        answer: Semaphore::new(0),
        refused,
    });
    let b = broker.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, b.clone()));
        }
    });
    let cluster = Arc::new(ClusterView::new(1));
    cluster.set_brokers(
        vec![BrokerInfo {
            id: BROKER,
            host: "127.0.0.1".into(),
            port: port.into(),
            rack: None,
        }],
        1,
    );
    let clients = Arc::new(Clients::new(&ClientConfig::default(), "markers"));
    (broker, MarkerQueues::new(cluster, clients))
}

async fn serve(mut stream: tokio::net::TcpStream, broker: Arc<StandIn>) {
    while let Ok(Some(mut frame)) = crate::client::codec::read_frame(&mut stream, 1 << 20).await {
        let key = ApiKey::try_from(i16::from_be_bytes([frame[0], frame[1]])).unwrap();
        let version = i16::from_be_bytes([frame[2], frame[3]]);
        let header =
            RequestHeader::decode(&mut frame, key.request_header_version(version)).unwrap();
        let mut body = BytesMut::new();
        match key {
            ApiKey::ApiVersions => ApiVersionsResponse::default()
                .with_api_keys(vec![
                    ApiVersion::default()
                        .with_api_key(ApiKey::ApiVersions as i16)
                        .with_max_version(3),
                    ApiVersion::default()
                        .with_api_key(ApiKey::WriteTxnMarkers as i16)
                        .with_max_version(1),
                ])
                .encode(&mut body, version)
                .unwrap(),
            ApiKey::WriteTxnMarkers => {
                let request = WriteTxnMarkersRequest::decode(&mut frame, version).unwrap();
                broker.requests.lock().push(request.clone());
                broker.answer.acquire().await.unwrap().forget();
                broker
                    .answer_to(request)
                    .encode(&mut body, version)
                    .unwrap();
            }
            other => panic!("stand-in broker got {other:?}"),
        }
        let mut out = BytesMut::new();
        out.put_i32(0);
        ResponseHeader::default()
            .with_correlation_id(header.correlation_id)
            .encode(&mut out, key.response_header_version(version))
            .unwrap();
        out.extend_from_slice(&body);
        let size = (out.len() - 4) as i32;
        out[..4].copy_from_slice(&size.to_be_bytes());
        if stream.write_all(&out).await.is_err() {
            return;
        }
    }
}

impl StandIn {
    fn answer_to(&self, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
        crate::handlers::write_txn_markers::answer_shaped_like(&request, |_, topic, p| {
            match self.refused.contains(&(topic.to_string(), p)) {
                true => ResponseError::NotLeaderOrFollower.code(),
                false => 0,
            }
        })
    }

    async fn wait_for_requests(&self, n: usize) {
        for _ in 0..500 {
            if self.requests.lock().len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the stand-in broker never got {n} requests");
    }

    /// (producer id, [(topic, partition)]) of each marker entry of request `i`.
    fn request(&self, i: usize) -> Vec<(i64, Vec<(String, i32)>)> {
        self.requests.lock()[i]
            .markers
            .iter()
            .map(|m| {
                let partitions = m
                    .topics
                    .iter()
                    .flat_map(|t| {
                        t.partition_indexes
                            .iter()
                            .map(|&p| (t.name.0.to_string(), p))
                    })
                    .collect();
                (m.producer_id.0, partitions)
            })
            .collect()
    }
}

fn markers(producer_id: i64, partitions: &[(&str, i32)]) -> Vec<PendingMarker> {
    partitions
        .iter()
        .map(|&(topic, p)| PendingMarker {
            tp: TopicPartition::new(topic, p),
            producer_id,
            producer_epoch: 0,
            marker: EndTxnMarker {
                result: TxnResult::Commit,
                coordinator_epoch: 3,
            },
        })
        .collect()
}

async fn answers(answers: Vec<MarkerAnswer>) -> Vec<Result<(), ResponseError>> {
    let mut out = Vec::new();
    for a in answers {
        out.push(
            tokio::time::timeout(Duration::from_secs(10), a)
                .await
                .unwrap()
                .unwrap(),
        );
    }
    out
}

fn owned(partitions: &[(&str, i32)]) -> Vec<(String, i32)> {
    partitions
        .iter()
        .map(|&(t, p)| (t.to_string(), p))
        .collect()
}

#[tokio::test]
async fn a_transactions_markers_for_one_broker_leave_in_one_request() {
    let (broker, queues) = stand_in(vec![]).await;
    broker.answer.add_permits(100);
    let parts = [("a", 0), ("a", 1), ("b", 0), ("a", 2)];
    let got = answers(queues.enqueue(BROKER, markers(7, &parts))).await;
    assert_eq!(got, vec![Ok(()); 4]);
    assert_eq!(broker.requests.lock().len(), 1);
    let request = broker.request(0);
    assert_eq!(request.len(), 1);
    assert_eq!(request[0].0, 7);
    let mut sent = request[0].1.clone();
    sent.sort();
    assert_eq!(sent, owned(&[("a", 0), ("a", 1), ("a", 2), ("b", 0)]));
    let m = &broker.requests.lock()[0].markers[0];
    assert!(m.transaction_result);
    assert_eq!(m.coordinator_epoch, 3);
    assert_eq!(m.topics.len(), 2, "partitions grouped by topic");
}

#[tokio::test]
async fn markers_queued_while_a_request_is_out_leave_together_in_the_next() {
    let (broker, queues) = stand_in(vec![]).await;
    let first = queues.enqueue(BROKER, markers(1, &[("t", 0)]));
    broker.wait_for_requests(1).await;
    let second = queues.enqueue(BROKER, markers(2, &[("t", 0), ("t", 1)]));
    let third = queues.enqueue(BROKER, markers(3, &[("u", 5)]));
    broker.answer.add_permits(100);
    assert_eq!(answers(first).await, vec![Ok(())]);
    assert_eq!(answers(second).await, vec![Ok(()); 2]);
    assert_eq!(answers(third).await, vec![Ok(())]);
    assert_eq!(broker.requests.lock().len(), 2);
    assert_eq!(broker.request(0), vec![(1, owned(&[("t", 0)]))]);
    assert_eq!(
        broker.request(1),
        vec![(2, owned(&[("t", 0), ("t", 1)])), (3, owned(&[("u", 5)]))]
    );
}

#[tokio::test]
async fn each_partition_gets_its_own_answer() {
    let (broker, queues) = stand_in(owned(&[("t", 1)])).await;
    broker.answer.add_permits(100);
    let got = answers(queues.enqueue(BROKER, markers(9, &[("t", 0), ("t", 1), ("t", 2)]))).await;
    assert_eq!(
        got,
        vec![Ok(()), Err(ResponseError::NotLeaderOrFollower), Ok(())]
    );
}

#[tokio::test]
async fn a_broker_without_an_address_is_not_leader() {
    let (_broker, queues) = stand_in(vec![]).await;
    let got = answers(queues.enqueue(BROKER + 1, markers(9, &[("t", 0), ("t", 1)]))).await;
    assert_eq!(got, vec![Err(ResponseError::NotLeaderOrFollower); 2]);
}

#[test]
fn a_producer_id_has_one_marker_a_request() {
    let mut queued = markers(4, &[("t", 0)]);
    let mut aborted = markers(4, &[("t", 1)]);
    aborted[0].marker.result = TxnResult::Abort;
    queued.extend(aborted);
    queued.extend(markers(5, &[("t", 2)]));
    let queued: Vec<Queued> = queued
        .into_iter()
        .map(|pending| Queued {
            pending,
            answer: oneshot::channel().0,
        })
        .collect();
    let (now, later) = one_request(queued);
    let ids = |q: &[Queued]| {
        q.iter()
            .map(|q| (q.pending.producer_id, q.pending.tp.partition))
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&now), vec![(4, 0), (5, 2)]);
    assert_eq!(ids(&later), vec![(4, 1)]);
}
