//! Controlled shutdown against a stand-in controller that checks the broker epoch as
//! Kafka's does (STALE_BROKER_EPOCH for any but the broker's current registration).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, ControlledShutdownResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use super::*;
use kafka_protocol::error::ResponseError;

/// The controller's view: the epoch of the broker's registration in ZooKeeper now, and
/// the epochs its ControlledShutdown requests carried.
struct StandIn {
    registered_epoch: AtomicI64,
    seen: Mutex<Vec<i64>>,
}

async fn serve(mut stream: tokio::net::TcpStream, controller: Arc<StandIn>) {
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
                        .with_api_key(ApiKey::ControlledShutdown as i16)
                        .with_max_version(3),
                ])
                .encode(&mut body, version)
                .unwrap(),
            ApiKey::ControlledShutdown => {
                let request = ControlledShutdownRequest::decode(&mut frame, version).unwrap();
                controller.seen.lock().push(request.broker_epoch);
                let error = match request.broker_epoch
                    == controller.registered_epoch.load(Ordering::SeqCst)
                {
                    true => 0,
                    false => ResponseError::StaleBrokerEpoch.code(),
                };
                ControlledShutdownResponse::default()
                    .with_error_code(error)
                    .encode(&mut body, version)
                    .unwrap()
            }
            other => panic!("stand-in controller got {other:?}"),
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

/// A broker whose session expired while it shut down registers again with a new epoch:
/// the retry carries the new epoch and succeeds. (Before, every retry carried the epoch
/// read when shutdown began, each was refused with STALE_BROKER_EPOCH, and the broker went
/// down uncleanly: seen under scripts/faults --nemesis, a SIGTERM right after ZooKeeper
/// lost and regained its quorum.)
#[tokio::test]
async fn a_retry_carries_the_epoch_of_the_brokers_registration_now() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let controller = Arc::new(StandIn {
        registered_epoch: AtomicI64::new(8_589_934_668),
        seen: Mutex::new(Vec::new()),
    });
    let c = controller.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, c.clone()));
        }
    });
    let settings = ShutdownSettings {
        enable: true,
        max_retries: 3,
        retry_backoff: Duration::from_millis(10),
        request_timeout: Duration::from_secs(5),
        outbound_tls: None,
        outbound_sasl: None,
    };
    // The broker's epoch: its old registration's on the first attempt, the new one after.
    let attempts = AtomicI64::new(0);
    let epoch = || match attempts.fetch_add(1, Ordering::SeqCst) {
        0 => 4_294_967_357,
        _ => 8_589_934_668,
    };
    let find = || Some((2, address.clone()));
    assert!(run(&settings, 3, &epoch, &find).await);
    assert_eq!(*controller.seen.lock(), [4_294_967_357, 8_589_934_668]);
}
