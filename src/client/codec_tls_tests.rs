//! Frames over a TLS stream whose transport takes little at a time (an in-memory pipe of
//! a few KiB, as a socket whose send buffer is full): every frame written must reach the
//! peer whole, requests and answers alike, however the TLS records split or join them.

use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::{read_frame, write_frame};

/// A CA and a server certificate for `localhost` it signed: the server's and the
/// client's rustls contexts.
fn contexts() -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(ca.der().to_vec())).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    (Arc::new(server), Arc::new(client))
}

/// A client and a server TLS stream over a pipe that holds at most `pipe` bytes each way.
async fn tls_pair(
    pipe: usize,
) -> (
    tokio_rustls::client::TlsStream<DuplexStream>,
    tokio_rustls::server::TlsStream<DuplexStream>,
) {
    let (server_config, client_config) = contexts();
    let (client_io, server_io) = tokio::io::duplex(pipe);
    let accept = tokio::spawn(async move {
        TlsAcceptor::from(server_config)
            .accept(server_io)
            .await
            .unwrap()
    });
    let name = ServerName::try_from("localhost").unwrap();
    let client = TlsConnector::from(client_config)
        .connect(name, client_io)
        .await
        .unwrap();
    (client, accept.await.unwrap())
}

/// A frame of `len` body bytes, each byte its position mod 251.
fn frame(len: usize) -> Vec<u8> {
    let mut f = (len as i32).to_be_bytes().to_vec();
    f.extend((0..len).map(|i| (i % 251) as u8));
    f
}

/// The request is larger than the pipe takes at once, so its last TLS records are still
/// in the client's TLS stream when `write_all` returns: `write_frame` must send them, or
/// the server never sees the whole request and the client waits for an answer that
/// cannot come (skua-load's requests timed out this way).
#[tokio::test]
async fn a_request_larger_than_the_socket_takes_reaches_the_broker_whole() {
    let (mut client, mut server) = tls_pair(4096).await;
    let (mut client_read, mut client_write) = tokio::io::split(&mut client);
    let broker = tokio::spawn(async move {
        // Read each request and answer it with its own size, as a broker would.
        let mut answered = 0;
        while let Ok(Some(request)) = read_frame(&mut server, 1 << 20).await {
            let answer = frame(request.len());
            server.write_all(&answer).await.unwrap();
            server.flush().await.unwrap();
            answered += 1;
        }
        answered
    });
    for len in [10_000, 100_000, 300, 40_000] {
        write_frame(&mut client_write, &frame(len)).await.unwrap();
        let answer = tokio::time::timeout(
            Duration::from_secs(5),
            read_frame(&mut client_read, 1 << 20),
        )
        .await
        .unwrap_or_else(|_| panic!("no answer to a request of {len} bytes"))
        .unwrap()
        .unwrap();
        assert_eq!(&answer[..], &frame(len)[4..], "answer to {len} bytes");
    }
    client_write.shutdown().await.unwrap();
    drop((client_read, client_write));
    drop(client);
    assert_eq!(broker.await.unwrap(), 4);
}

/// Answers as a broker sends them: several in one TLS record, one spread over many
/// records and pauses, one ending mid-record with the next's size in the same record.
/// The reader returns each whole, and never waits on the transport while the TLS stream
/// already holds the bytes of the next one.
#[tokio::test]
async fn answers_split_and_joined_across_tls_records_are_read_whole() {
    let (mut client, mut server) = tls_pair(4096).await;
    let sizes = [5usize, 7, 3, 70_000, 1, 16_384, 16_379, 2];
    let broker = tokio::spawn(async move {
        let stream: Vec<u8> = sizes.iter().flat_map(|&n| frame(n)).collect();
        // Uneven writes, flushed one by one: each ends a TLS record somewhere inside a
        // frame or between two, the first holding three whole frames.
        let mut at = 0;
        for step in [27usize, 5000, 9, 16_400, 1, 60_000].iter().cycle() {
            let end = (at + step).min(stream.len());
            server.write_all(&stream[at..end]).await.unwrap();
            server.flush().await.unwrap();
            tokio::time::sleep(Duration::from_millis(2)).await;
            at = end;
            if at == stream.len() {
                break;
            }
        }
        server
    });
    for &n in &sizes {
        let answer = tokio::time::timeout(Duration::from_secs(5), read_frame(&mut client, 1 << 20))
            .await
            .unwrap_or_else(|_| panic!("the answer of {n} bytes never came"))
            .unwrap()
            .unwrap();
        assert_eq!(&answer[..], &frame(n)[4..]);
    }
    drop(broker.await.unwrap());
}
