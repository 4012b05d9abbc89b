//! skua's outbound client (`skua::client`) against a real skua broker and against
//! sockets that misbehave on purpose.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use skua::client::{Client, ClientConfig, Connection};

use common::TestBroker;

fn topic_request(name: &str) -> MetadataRequest {
    MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(TopicName(StrBytes::from_string(name.into()))))]))
}

/// Many requests of different APIs in flight on one connection at once: each caller gets
/// the response to its own request, matched by correlation id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_get_their_own_responses() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let mut admin = broker.client().await;
    for t in 0..4 {
        assert_eq!(admin.create_topic(&format!("pipe-{t}"), t + 1).await, 0);
    }
    let conn = Arc::new(
        Connection::connect(broker.addr, &ClientConfig::default())
            .await
            .unwrap(),
    );
    let mut tasks = Vec::new();
    for i in 0..40 {
        let conn = conn.clone();
        tasks.push(tokio::spawn(async move {
            if i % 5 == 0 {
                let r = conn.send(&ApiVersionsRequest::default(), 3).await.unwrap();
                assert_eq!(r.error_code, 0);
                assert!(r.api_keys.iter().any(|k| k.api_key == 3));
            } else {
                let t = i % 4;
                let r = conn
                    .send(&topic_request(&format!("pipe-{t}")), 12)
                    .await
                    .unwrap();
                assert_eq!(r.topics.len(), 1);
                let topic = &r.topics[0];
                assert_eq!(topic.name.as_ref().unwrap().0.as_str(), format!("pipe-{t}"));
                assert_eq!(topic.partitions.len(), t as usize + 1);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert!(conn.closed().is_none());
    broker.stop().await;
}

/// A broker that reads the request and sends the first 10 bytes of an answer of 100:
/// the request fails with Timeout after the request timeout, saying that 10 bytes came
/// back (an answer begun, not a broker that never answered), and the connection is
/// closed as Kafka's client closes it.
#[tokio::test]
async fn a_request_without_answer_times_out_and_closes_the_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let hold = tokio::spawn(async move {
        let (mut socket, _) = silent.accept().await.unwrap();
        let mut request = [0u8; 8];
        socket.read_exact(&mut request).await.unwrap();
        let mut begun = 100i32.to_be_bytes().to_vec();
        begun.extend_from_slice(&request[4..8]); // the correlation id
        begun.extend_from_slice(&[0, 0]);
        socket.write_all(&begun).await.unwrap();
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(socket);
    });
    let config = ClientConfig {
        request_timeout: Duration::from_millis(300),
        ..ClientConfig::default()
    };
    let conn = Connection::connect(addr, &config).await.unwrap();
    let started = Instant::now();
    let err = conn
        .send(&ApiVersionsRequest::default(), 3)
        .await
        .unwrap_err();
    let waited = started.elapsed();
    assert!(
        matches!(err, skua::client::ClientError::Timeout { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("written and flushed; 10 bytes arrived on the connection since"),
        "{err}"
    );
    assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(5));
    assert!(conn.closed().is_some());
    assert!(matches!(
        conn.send(&ApiVersionsRequest::default(), 3).await,
        Err(skua::client::ClientError::Disconnected(_))
    ));
    hold.abort();
}

/// The client negotiates versions with ApiVersions, survives the broker going away by
/// reconnecting to its replacement, and waits its backoff between failed attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnects_with_backoff_and_negotiates_versions() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(dir.path(), &[]).await;
    let addr = broker.addr;
    let config = ClientConfig {
        reconnect_backoff: Duration::from_millis(200),
        reconnect_backoff_max: Duration::from_millis(400),
        ..ClientConfig::default()
    };
    let client = Client::new(addr, config);
    let versions = client.api_versions().await.unwrap();
    assert_eq!(versions.get(&3), Some(&(0, 13)), "Metadata 0-13");
    let (version, r) = client
        .send_negotiated(&topic_request("reconnect"), 0, 20)
        .await
        .unwrap();
    assert_eq!(version, 13);
    assert_eq!(r.topics.len(), 1);

    broker.stop().await;
    // The old connection is gone; connecting fails while nothing listens.
    assert!(client
        .send(&ApiVersionsRequest::default(), 3)
        .await
        .is_err());
    let mut failures = 0;
    let started = Instant::now();
    while client
        .send(&ApiVersionsRequest::default(), 3)
        .await
        .is_err()
    {
        failures += 1;
        if failures == 3 {
            break;
        }
    }
    // Three failed attempts in a row wait 200 + 400 ms between them at least.
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "{:?}",
        started.elapsed()
    );

    // A broker on the same port again: the next request reconnects.
    let port = addr.port().to_string();
    let listeners = format!("PLAINTEXT://127.0.0.1:{port}");
    let again = TestBroker::start(dir.path(), &[("listeners", listeners.as_str())]).await;
    assert_eq!(again.addr, addr);
    tokio::time::sleep(Duration::from_millis(450)).await;
    let r = client
        .send(&ApiVersionsRequest::default(), 3)
        .await
        .expect("reconnected");
    assert_eq!(r.error_code, 0);
    again.stop().await;
}
