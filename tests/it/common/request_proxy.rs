//! A TCP proxy in front of one broker that passes every byte through and records each
//! WriteTxnMarkers request it carries: which transactions (producer ids) and how many
//! partitions each named, so tests can see how a coordinator batches its markers.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ApiKey, RequestHeader, WriteTxnMarkersRequest};
use kafka_protocol::protocol::Decodable;
use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use super::fetch_proxy::{framed, read_frame};

/// One WriteTxnMarkers seen: (producer id, partitions) of each of its markers.
pub type SeenMarkers = Vec<(i64, usize)>;

pub struct RequestProxy {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<SeenMarkers>>>,
    task: tokio::task::JoinHandle<()>,
}

impl RequestProxy {
    /// Listens on `listen` and forwards each connection to `upstream`.
    pub async fn start(listen: SocketAddr, upstream: SocketAddr) -> RequestProxy {
        let listener = TcpListener::bind(listen).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                tokio::spawn(relay(client, server, s.clone()));
            }
        });
        RequestProxy { addr, seen, task }
    }

    /// Every WriteTxnMarkers seen so far.
    pub fn write_txn_markers(&self) -> Vec<SeenMarkers> {
        self.seen.lock().clone()
    }
}

impl Drop for RequestProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn markers_in(frame: &Bytes) -> Option<SeenMarkers> {
    if frame.len() < 4 || (&frame[..2]).get_i16() != ApiKey::WriteTxnMarkers as i16 {
        return None;
    }
    let version = (&frame[2..4]).get_i16();
    let mut buf = frame.clone();
    RequestHeader::decode(
        &mut buf,
        ApiKey::WriteTxnMarkers.request_header_version(version),
    )
    .ok()?;
    let request = WriteTxnMarkersRequest::decode(&mut buf, version).ok()?;
    Some(
        request
            .markers
            .iter()
            .map(|m| {
                let partitions = m.topics.iter().map(|t| t.partition_indexes.len()).sum();
                (m.producer_id.0, partitions)
            })
            .collect(),
    )
}

async fn relay(client: TcpStream, server: TcpStream, seen: Arc<Mutex<Vec<SeenMarkers>>>) {
    let (mut client_r, mut client_w) = client.into_split();
    let (mut server_r, mut server_w) = server.into_split();
    let answers = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut server_r, &mut client_w).await;
    });
    while let Some(frame) = read_frame(&mut client_r).await {
        if let Some(markers) = markers_in(&frame) {
            seen.lock().push(markers);
        }
        if server_w.write_all(&framed(&frame)).await.is_err() {
            break;
        }
    }
    answers.abort();
}
