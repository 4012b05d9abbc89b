//! A TCP proxy in front of one broker that decodes the Fetch requests passing through
//! and their answers, keeping the session fields and how many partitions each named, so
//! tests can see a follower's fetch session on the wire. On demand it makes the next
//! incremental Fetch name a session id the leader does not hold, so the leader itself
//! answers FETCH_SESSION_ID_NOT_FOUND, as it does for a session it evicted.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One Fetch seen, and its answer once it came back.
#[derive(Clone, Debug)]
pub struct SeenFetch {
    pub client_id: String,
    pub version: i16,
    pub session_id: i32,
    pub epoch: i32,
    /// Partitions the request named.
    pub partitions: usize,
    /// Partitions in `forgotten_topics_data`.
    pub forgotten: usize,
    /// The request frame's size in bytes (with its length prefix).
    pub bytes: usize,
    /// Whether the proxy changed its session id.
    pub sabotaged: bool,
    /// (error code, session id, partitions) of the answer.
    pub answer: Option<(i16, i32, usize)>,
}

pub struct FetchProxy {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<SeenFetch>>>,
    sabotage: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl FetchProxy {
    /// Listens on `listen` (port 0: any) and forwards each connection to `upstream`.
    pub async fn start(listen: SocketAddr, upstream: SocketAddr) -> FetchProxy {
        let listener = TcpListener::bind(listen).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sabotage = Arc::new(AtomicBool::new(false));
        let (s, b) = (seen.clone(), sabotage.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                tokio::spawn(relay(client, server, s.clone(), b.clone()));
            }
        });
        FetchProxy {
            addr,
            seen,
            sabotage,
            task,
        }
    }

    /// Every Fetch seen so far.
    pub fn fetches(&self) -> Vec<SeenFetch> {
        self.seen.lock().clone()
    }

    /// The next incremental Fetch names a session id one above its own.
    pub fn lose_next_session(&self) {
        self.sabotage.store(true, Ordering::SeqCst);
    }
}

impl Drop for FetchProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One size-prefixed frame (without its size), or `None` at the end of the stream.
pub async fn read_frame(s: &mut tokio::net::tcp::OwnedReadHalf) -> Option<Bytes> {
    let len = s.read_i32().await.ok()?;
    let mut buf = vec![0; usize::try_from(len).ok()?];
    s.read_exact(&mut buf).await.ok()?;
    Some(Bytes::from(buf))
}

/// `body` with its size prefix.
pub fn framed(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 4);
    out.put_i32(body.len() as i32);
    out.extend_from_slice(body);
    out
}

/// Requests in flight on one connection, in order: a Fetch's index in the seen list and
/// its version, or `None` for another API.
type InFlight = Arc<Mutex<VecDeque<Option<(usize, i16)>>>>;

async fn relay(
    client: TcpStream,
    server: TcpStream,
    seen: Arc<Mutex<Vec<SeenFetch>>>,
    sabotage: Arc<AtomicBool>,
) {
    let (mut client_r, mut client_w) = client.into_split();
    let (mut server_r, mut server_w) = server.into_split();
    let pending: InFlight = Arc::default();
    let (p, s) = (pending.clone(), seen.clone());
    let answers = tokio::spawn(async move {
        while let Some(frame) = read_frame(&mut server_r).await {
            if let Some(Some((i, version))) = p.lock().pop_front() {
                let mut buf = frame.clone();
                let header_version = ApiKey::Fetch.response_header_version(version);
                if ResponseHeader::decode(&mut buf, header_version).is_ok() {
                    if let Ok(r) = FetchResponse::decode(&mut buf, version) {
                        let n = r.responses.iter().map(|t| t.partitions.len()).sum();
                        s.lock()[i].answer = Some((r.error_code, r.session_id, n));
                    }
                }
            }
            if client_w.write_all(&framed(&frame)).await.is_err() {
                return;
            }
        }
    });
    while let Some(frame) = read_frame(&mut client_r).await {
        let mut out = frame.clone();
        let mut entry = None;
        if frame.len() >= 4 && (&frame[..2]).get_i16() == ApiKey::Fetch as i16 {
            let version = (&frame[2..4]).get_i16();
            let mut buf = frame.clone();
            let header_version = ApiKey::Fetch.request_header_version(version);
            let header = RequestHeader::decode(&mut buf, header_version).unwrap();
            let mut req = FetchRequest::decode(&mut buf, version).unwrap();
            let sabotaged = req.session_epoch > 0 && sabotage.swap(false, Ordering::SeqCst);
            if sabotaged {
                req.session_id = req.session_id.wrapping_add(1);
                let mut b = BytesMut::new();
                header.encode(&mut b, header_version).unwrap();
                req.encode(&mut b, version).unwrap();
                out = b.freeze();
            }
            let mut seen = seen.lock();
            seen.push(SeenFetch {
                client_id: header.client_id.map(|c| c.to_string()).unwrap_or_default(),
                version,
                session_id: req.session_id,
                epoch: req.session_epoch,
                partitions: req.topics.iter().map(|t| t.partitions.len()).sum(),
                forgotten: req
                    .forgotten_topics_data
                    .iter()
                    .map(|t| t.partitions.len())
                    .sum(),
                bytes: frame.len() + 4,
                sabotaged,
                answer: None,
            });
            entry = Some((seen.len() - 1, version));
        }
        pending.lock().push_back(entry);
        if server_w.write_all(&framed(&out)).await.is_err() {
            break;
        }
    }
    answers.abort();
}
