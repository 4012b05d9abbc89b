//! The metrics endpoint (`metrics.listener=http://host:port`): `GET /metrics` answers
//! one scrape ([`super::scrape`]) in Prometheus' text format, or OpenMetrics when the
//! `Accept` header asks for it.
//!
//! A hand-written HTTP/1.1 server of one route, rather than a web framework: it needs
//! to read one request head and stream one response, and every bound is in view here.
//! - a request head is at most [`MAX_HEAD_BYTES`], read within [`HEAD_TIMEOUT`];
//! - at most [`MAX_SCRAPES`] connections are served at once, others answered 503;
//! - a response is streamed in chunks as the scrape writes them (HTTP/1.1
//!   `Transfer-Encoding: chunked`; an HTTP/1.0 client gets the body until the close),
//!   and must be written within [`RESPONSE_TIMEOUT`], or the connection is dropped;
//! - one request per connection (`Connection: close`): Prometheus reconnects at each
//!   scrape interval, which costs nothing next to a scrape.
//!
//! No scrape holds a lock across a write to its socket (the compiler refuses to hold the
//! broker's synchronous locks across an await), so a slow scraper stalls only itself.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use super::exposition::{Format, Sink};
use crate::broker::Broker;
use crate::config::{BrokerConfig, Listener};

pub const MAX_HEAD_BYTES: usize = 8 * 1024;
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);
pub const MAX_SCRAPES: usize = 4;

/// The bound socket, before the broker opens (a port in use stops startup at once).
pub struct MetricsListener {
    listener: TcpListener,
}

impl MetricsListener {
    /// Binds `metrics.listener`, if set.
    pub async fn bind(config: &BrokerConfig) -> anyhow::Result<Option<MetricsListener>> {
        let Some(l) = &config.metrics_listener else {
            return Ok(None);
        };
        Ok(Some(MetricsListener::bind_to(l).await?))
    }

    pub async fn bind_to(l: &Listener) -> anyhow::Result<MetricsListener> {
        let addr = l.bind_addr();
        let listener = TcpListener::bind(&addr)
            .await
            .map_err(|e| anyhow::anyhow!("metrics.listener: cannot listen on {addr}: {e}"))?;
        Ok(MetricsListener { listener })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `broker`'s metrics until the returned handle is stopped.
    pub fn spawn(self, broker: Arc<Broker>) -> MetricsServer {
        let addr = self.listener.local_addr().ok();
        if let Some(addr) = addr {
            tracing::info!(%addr, "metrics listener serving http://{addr}/metrics");
        }
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(accept_loop(self.listener, broker, stopped));
        MetricsServer { addr, stop, task }
    }
}

/// A running metrics endpoint.
pub struct MetricsServer {
    pub addr: Option<SocketAddr>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl MetricsServer {
    /// Stops accepting and ends the scrapes under way.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

async fn accept_loop(listener: TcpListener, broker: Arc<Broker>, mut stop: watch::Receiver<bool>) {
    let permits = Arc::new(Semaphore::new(MAX_SCRAPES));
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.changed() => break,
        };
        while connections.try_join_next().is_some() {}
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "metrics listener: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let permit = permits.clone().try_acquire_owned().ok();
        let broker = broker.clone();
        connections.spawn(async move {
            let served = match permit {
                Some(_held) => serve(stream, &broker).await,
                None => busy(stream).await,
            };
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "metrics request not answered");
            }
        });
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

/// What a request head asks for.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    method: String,
    path: String,
    /// HTTP/1.1 or later: the response may be chunked.
    http11: bool,
    accept: Option<String>,
}

/// Parses a request head (request line and header lines, without the blank line).
fn parse_head(text: &str) -> Option<Head> {
    let mut lines = text.split("\r\n");
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    let path = target.split('?').next().unwrap_or(target);
    let accept = lines.find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("accept")
            .then(|| value.trim().to_string())
    });
    Some(Head {
        method: method.to_string(),
        path: path.to_string(),
        http11: version != "HTTP/1.0",
        accept,
    })
}

/// Reads a request head: up to the blank line, at most `MAX_HEAD_BYTES`.
async fn read_head(stream: &mut TcpStream) -> std::io::Result<Option<Head>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let text = String::from_utf8_lossy(&buf[..end]);
            return Ok(parse_head(&text));
        }
        if buf.len() >= MAX_HEAD_BYTES {
            return Ok(None);
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n.min(MAX_HEAD_BYTES + 4 - buf.len())]);
    }
}

async fn serve(mut stream: TcpStream, broker: &Broker) -> std::io::Result<()> {
    let head = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await {
        Ok(head) => head?,
        Err(_) => return Err(std::io::Error::other("request head not read in time")),
    };
    let Some(head) = head else {
        return reply(&mut stream, "400 Bad Request", "a bad request\n").await;
    };
    if head.path != "/metrics" {
        return reply(&mut stream, "404 Not Found", "metrics are at /metrics\n").await;
    }
    if head.method != "GET" {
        return reply(&mut stream, "405 Method Not Allowed", "GET only\n").await;
    }
    let format = Format::from_accept(head.accept.as_deref());
    let chunked = head.http11;
    let answered = async {
        let mut status = format!(
            "HTTP/1.{} 200 OK\r\nContent-Type: {}\r\nConnection: close\r\n",
            u8::from(chunked),
            format.content_type()
        );
        if chunked {
            status.push_str("Transfer-Encoding: chunked\r\n");
        }
        status.push_str("\r\n");
        stream.write_all(status.as_bytes()).await?;
        let mut sink = Response {
            stream: &mut stream,
            chunked,
        };
        super::scrape::scrape(broker, format, &mut sink).await?;
        if chunked {
            stream.write_all(b"0\r\n\r\n").await?;
        }
        stream.flush().await
    };
    match tokio::time::timeout(RESPONSE_TIMEOUT, answered).await {
        Ok(done) => done,
        Err(_) => Err(std::io::Error::other("response not written in time")),
    }
}

/// 503 when `MAX_SCRAPES` are already being served.
async fn busy(mut stream: TcpStream) -> std::io::Result<()> {
    let answered = reply(
        &mut stream,
        "503 Service Unavailable",
        "too many scrapes at once\n",
    );
    tokio::time::timeout(HEAD_TIMEOUT, answered)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("503 not written in time")))
}

async fn reply(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(text.as_bytes()).await?;
    stream.flush().await
}

/// The response body, one chunk per part the scrape sends.
struct Response<'a> {
    stream: &'a mut TcpStream,
    chunked: bool,
}

#[async_trait::async_trait]
impl Sink for Response<'_> {
    async fn send(&mut self, text: String) -> std::io::Result<()> {
        // An empty chunk would end the body.
        if text.is_empty() {
            return Ok(());
        }
        if self.chunked {
            let size = format!("{:x}\r\n", text.len());
            self.stream.write_all(size.as_bytes()).await?;
            self.stream.write_all(text.as_bytes()).await?;
            self.stream.write_all(b"\r\n").await
        } else {
            self.stream.write_all(text.as_bytes()).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads() {
        let head = parse_head("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nACCEPT: application/openmetrics-text; version=1.0.0").unwrap();
        assert_eq!(head.path, "/metrics");
        assert!(head.http11);
        assert_eq!(
            Format::from_accept(head.accept.as_deref()),
            Format::OpenMetrics
        );
        let old = parse_head("GET /metrics HTTP/1.0").unwrap();
        assert!(!old.http11 && old.accept.is_none());
        assert_eq!(parse_head("GET /metrics"), None);
        assert_eq!(parse_head("GET /metrics SPDY/3"), None);
    }

    #[test]
    fn metrics_listener_is_one_http_address_or_nothing() {
        let config = |v: &str| {
            let props = [("metrics.listener".to_string(), v.to_string())].into();
            BrokerConfig::from_properties(props)
        };
        let l = config("http://:9404").unwrap().metrics_listener.unwrap();
        assert_eq!((l.bind_addr().as_str(), l.port), ("0.0.0.0:9404", 9404));
        let l = config("http://127.0.0.1:0")
            .unwrap()
            .metrics_listener
            .unwrap();
        assert_eq!(l.bind_addr(), "127.0.0.1:0");
        assert!(config("").unwrap().metrics_listener.is_none());
        assert!(
            BrokerConfig::default().metrics_listener.is_none(),
            "off by default"
        );
        for bad in ["tcp://:9404", "http://:1,http://:2", "http://nohost"] {
            assert!(config(bad).is_err(), "{bad}");
        }
    }
}
