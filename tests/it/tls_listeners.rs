//! SSL listeners end to end: a TLS client produces and fetches its bytes back (file
//! ranges copied through the writer's buffer, as TLS cannot sendfile), mTLS principals
//! through `ssl.principal.mapping.rules`, `ssl.client.auth=required` refusing a client
//! without a certificate, a stalled handshake and garbage records closed, PKCS12 stores,
//! and a JKS store refused at startup with the conversion to run.

use crate::common;

use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use rcgen::DnType;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::tls::{client_settings, ssl_listener_overrides, tls_client, TestCa};
use common::{batch, produce_request, values, TestBroker};
use skua::network::session::Principal;
use skua::network::tls::TlsTransport;
use skua::tls::{ListenerTls, SslSettings};

async fn start(dir: &std::path::Path, extra: &[(String, String)]) -> TestBroker {
    let owned: Vec<(String, String)> = extra.to_vec();
    let pairs: Vec<(&str, &str)> = owned
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    TestBroker::start(dir, &pairs).await
}

fn create(name: &str) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_topics(vec![create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_num_partitions(1)
            .with_replication_factor(1)])
        .with_timeout_ms(5000)
}

fn fetch(topic: &str, offset: i64) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(100)
        .with_min_bytes(1)
        .with_max_bytes(50 * 1024 * 1024)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_partition(0)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(8 * 1024 * 1024)])])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_produces_and_fetches_its_bytes_back() {
    let dir = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let broker_cert = ca.broker("broker.pem");
    let broker = start(dir.path(), &ssl_listener_overrides(&ca, &broker_cert)).await;
    let client = tls_client(broker.addr, &client_settings(&ca, None), "localhost");
    let created = client.send(&create("tls-topic"), 7).await.unwrap();
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");

    // Batches of 100 KiB values: more than one 64 KiB copy chunk per fetched range.
    let value = "v".repeat(100 * 1024);
    let mut sent = Vec::new();
    for i in 0..20 {
        let v = format!("{i:03}{value}");
        let req = produce_request("tls-topic", 0, batch(&[&v], None, Compression::None), -1);
        let resp = client.send(&req, 9).await.unwrap();
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!((p.error_code, p.base_offset), (0, i), "{resp:?}");
        sent.push((i, v));
    }
    let mut got = Vec::new();
    while got.len() < sent.len() {
        let resp = client.send(&fetch("tls-topic", got.len() as i64), 12).await;
        let resp = resp.unwrap();
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0);
        got.extend(values(p.records.as_ref().unwrap()));
    }
    assert_eq!(got, sent, "every byte produced comes back over TLS");
    // The plaintext client of the other tests cannot speak to this listener.
    let refused = skua::client::Client::new(
        broker.addr,
        skua::client::ClientConfig {
            request_timeout: Duration::from_secs(5),
            ..Default::default()
        },
    );
    assert!(refused.api_versions().await.is_err());
    broker.stop().await;
}

fn required_auth(ca: &TestCa, broker_cert: &common::tls::Issued) -> Vec<(String, String)> {
    let mut o = ssl_listener_overrides(ca, broker_cert);
    o.push(("ssl.client.auth".into(), "required".into()));
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_auth_required_refuses_a_client_without_a_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let broker_cert = ca.broker("broker.pem");
    let broker = start(dir.path(), &required_auth(&ca, &broker_cert)).await;

    let anonymous = tls_client(broker.addr, &client_settings(&ca, None), "localhost");
    let err = anonymous.api_versions().await.unwrap_err();
    assert!(
        matches!(
            err,
            skua::client::ClientError::Connect { .. } | skua::client::ClientError::Disconnected(_)
        ),
        "{err}"
    );

    // A certificate from another CA is refused too.
    let other_dir = tempfile::tempdir().unwrap();
    let other = TestCa::new(other_dir.path());
    let stranger = other.issue("stranger.pem", &[], &[(DnType::CommonName, "mallory")]);
    let mut settings = client_settings(&ca, Some(&stranger));
    settings.listener = "stranger".into();
    let stranger = tls_client(broker.addr, &settings, "localhost");
    assert!(stranger.api_versions().await.is_err());

    let alice = ca.issue("alice.pem", &[], &[(DnType::CommonName, "alice")]);
    let client = tls_client(
        broker.addr,
        &client_settings(&ca, Some(&alice)),
        "localhost",
    );
    let versions = client.api_versions().await.unwrap();
    assert!(
        versions.contains_key(&0),
        "a client with a trusted certificate is served"
    );

    // The broker's certificate does not name this host: with https identification (the
    // default) the client refuses the broker.
    let wrong_host = tls_client(
        broker.addr,
        &client_settings(&ca, Some(&alice)),
        "kafka.example",
    );
    assert!(wrong_host.api_versions().await.is_err());
    broker.stop().await;
}

/// A listener of `settings` served by hand, accepting one connection: the principal it
/// maps the client to.
async fn principal_of(settings: &SslSettings, client: &SslSettings) -> Result<Principal, String> {
    let tls = ListenerTls::build(settings).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let outbound = skua::tls::OutboundTls::build(client).unwrap();
    let connecting = tokio::spawn(async move {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let stream = outbound.connect("localhost", tcp).await;
        // Hold the stream until the server has mapped the principal.
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(stream);
    });
    let (tcp, _) = listener.accept().await.unwrap();
    let accepted = TlsTransport::accept(&tls, tcp, Duration::from_secs(5)).await;
    connecting.await.unwrap();
    accepted.map(|(_, p)| p).map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_map_to_principals_through_the_rules() {
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let broker_cert = ca.broker("broker.pem");
    let mut server = client_settings(&ca, Some(&broker_cert));
    server.listener = "SSL".into();
    server.client_auth = skua::tls::ClientAuth::Requested;
    server.principal_mapping_rules =
        "RULE:^CN=([a-z]+),OU=ServiceUsers,.*$/svc-$1/U,RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/L,DEFAULT"
            .into();
    let dn = |ou: &str, cn: &str| {
        vec![
            (DnType::CountryName, "US".to_string()),
            (DnType::OrganizationName, "Acme".to_string()),
            (DnType::OrganizationalUnitName, ou.to_string()),
            (DnType::CommonName, cn.to_string()),
        ]
    };
    let issue = |file: &str, dn: Vec<(DnType, String)>| {
        let dn: Vec<(DnType, &str)> = dn.iter().map(|(t, v)| (t.clone(), v.as_str())).collect();
        ca.issue(file, &[], &dn)
    };
    let cases = [
        (
            issue("svc.pem", dn("ServiceUsers", "billing")),
            "SVC-BILLING",
        ),
        (issue("alice.pem", dn("Eng", "Alice")), "alice@eng"),
        (
            issue("ca-only.pem", vec![(DnType::CommonName, "Solo".into())]),
            "CN=Solo",
        ),
    ];
    for (identity, want) in &cases {
        let got = principal_of(&server, &client_settings(&ca, Some(identity)))
            .await
            .unwrap();
        assert_eq!(got.to_string(), format!("User:{want}"));
    }
    // Without a certificate (requested, not required): anonymous.
    let got = principal_of(&server, &client_settings(&ca, None))
        .await
        .unwrap();
    assert_eq!(got, Principal::anonymous());
    // A DN no rule matches has no principal: the connection is refused.
    server.principal_mapping_rules = "RULE:^CN=(.*),OU=Ops,.*$/$1/".into();
    let err = principal_of(&server, &client_settings(&ca, Some(&cases[1].0)))
        .await
        .unwrap_err();
    assert!(
        err.contains("No rules apply to CN=Alice,OU=Eng,O=Acme,C=US"),
        "{err}"
    );
}

/// Reads until the broker closes the connection; how long that took.
async fn closed_within(stream: &mut TcpStream, limit: Duration) -> Duration {
    let start = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(limit, stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return start.elapsed(),
            Ok(Ok(_)) => {}
            Err(_) => panic!("the broker kept the connection open for {limit:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_handshakes_and_garbage_records_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let broker_cert = ca.broker("broker.pem");
    let mut o = ssl_listener_overrides(&ca, &broker_cert);
    // The handshake bound is the shorter of 10 s and the idle limit.
    o.push(("connections.max.idle.ms".into(), "1500".into()));
    let broker = start(dir.path(), &o).await;

    // Connects and sends nothing.
    let mut stalled = TcpStream::connect(broker.addr).await.unwrap();
    let took = closed_within(&mut stalled, Duration::from_secs(10)).await;
    assert!(took >= Duration::from_millis(1000), "closed after {took:?}");

    // Half a ClientHello, then nothing.
    let mut half = TcpStream::connect(broker.addr).await.unwrap();
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00])
        .await
        .unwrap();
    closed_within(&mut half, Duration::from_secs(10)).await;

    // Not TLS at all: a Kafka request in the clear, and random bytes.
    let mut clear = TcpStream::connect(broker.addr).await.unwrap();
    let mut frame = Vec::new();
    let body = [0u8, 18, 0, 3, 0, 0, 0, 1, 0, 0, 0];
    frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
    frame.extend_from_slice(&body);
    clear.write_all(&frame).await.unwrap();
    let start = Instant::now();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), clear.read_to_end(&mut answer))
        .await
        .expect("the broker kept the connection open")
        .unwrap();
    let took = start.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "garbage closed at once, took {took:?}"
    );
    // One fatal alert in a plaintext record (TLS 1.2 record version, length 2, level 2),
    // then the close: nothing after the alert, no second alert.
    assert_eq!(answer.len(), 7, "one alert record: {answer:?}");
    assert_eq!(
        answer[..6],
        [0x15, 0x03, 0x03, 0x00, 0x02, 0x02],
        "{answer:?}"
    );
    let mut noise = TcpStream::connect(broker.addr).await.unwrap();
    let junk: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
    let _ = noise.write_all(&junk).await;
    closed_within(&mut noise, Duration::from_secs(5)).await;

    // After all that, a real TLS client is served.
    let client = tls_client(broker.addr, &client_settings(&ca, None), "localhost");
    assert!(client.api_versions().await.is_ok());
    broker.stop().await;
}

fn openssl(args: &[&str]) -> bool {
    std::process::Command::new("openssl")
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pkcs12_stores_are_read_and_jks_is_refused_with_the_conversion() {
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let broker_cert = ca.broker("broker.pem");
    let p12 = certs.path().join("broker.p12");
    let trust_p12 = certs.path().join("trust.p12");
    let made = openssl(&[
        "pkcs12",
        "-export",
        "-in",
        broker_cert.keystore.to_str().unwrap(),
        "-inkey",
        broker_cert.keystore.to_str().unwrap(),
        "-passout",
        "pass:storepass",
        "-out",
        p12.to_str().unwrap(),
    ]) && openssl(&[
        "pkcs12",
        "-export",
        "-nokeys",
        "-in",
        ca.truststore().to_str().unwrap(),
        "-passout",
        "pass:trustpass",
        "-out",
        trust_p12.to_str().unwrap(),
    ]);
    if !made {
        eprintln!("SKIPPED: openssl cannot write PKCS12 files here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let overrides: Vec<(String, String)> = [
        ("listeners", "SSL://127.0.0.1:0".to_string()),
        ("ssl.keystore.type", "PKCS12".into()),
        ("ssl.keystore.location", p12.display().to_string()),
        ("ssl.keystore.password", "storepass".into()),
        ("ssl.truststore.type", "PKCS12".into()),
        ("ssl.truststore.location", trust_p12.display().to_string()),
        ("ssl.truststore.password", "trustpass".into()),
        ("ssl.client.auth", "requested".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let broker = start(dir.path(), &overrides).await;
    let client = tls_client(broker.addr, &client_settings(&ca, None), "127.0.0.1");
    assert!(client.api_versions().await.is_ok());
    broker.stop().await;

    // A wrong store password stops startup, naming the store and not the password.
    let args = |password: &str, location: &str, store_type: &str| {
        let mut args = vec![];
        for (k, v) in [
            ("listeners", "SSL://127.0.0.1:0"),
            ("ssl.keystore.type", store_type),
            ("ssl.keystore.location", location),
            ("ssl.keystore.password", password),
            ("log.dirs", dir.path().to_str().unwrap()),
        ] {
            args.push("--override".to_string());
            args.push(format!("{k}={v}"));
        }
        args
    };
    let refused = |args: Vec<String>| async move {
        let mut config = skua::config::from_args(&args).unwrap();
        match skua::network::Server::bind_listeners(&mut config).await {
            Ok(_) => "started".to_string(),
            Err(e) => e.to_string(),
        }
    };
    let err = refused(args("not-it", p12.to_str().unwrap(), "PKCS12")).await;
    assert!(
        err.contains("broker.p12") && !err.contains("not-it"),
        "{err}"
    );

    let jks = certs.path().join("broker.jks");
    let keytool = std::process::Command::new("keytool")
        .args([
            "-genkeypair",
            "-alias",
            "b",
            "-keyalg",
            "EC",
            "-dname",
            "CN=b",
        ])
        .args(["-storetype", "JKS", "-storepass", "storepass", "-keystore"])
        .arg(&jks)
        .output();
    if keytool.is_ok_and(|o| o.status.success()) {
        let err = refused(args("storepass", jks.to_str().unwrap(), "JKS")).await;
        assert!(
            err.contains("keytool -importkeystore") && err.contains("-deststoretype PKCS12"),
            "{err}"
        );
    } else {
        eprintln!("keytool unavailable: the JKS case is not run");
    }
}

/// The subject of the certificate the listener at `addr` presents now.
async fn served_subject(addr: std::net::SocketAddr, ca: &TestCa) -> String {
    let outbound = skua::tls::OutboundTls::build(&client_settings(ca, None)).unwrap();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let stream = outbound.connect("localhost", tcp).await.unwrap();
    let leaf = stream.get_ref().1.peer_certificates().unwrap()[0].clone();
    skua::tls::principal::subject_dn(&leaf).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_listener_keystore_is_served_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let issue = |file: &str, cn: &str| {
        ca.issue(
            file,
            &["localhost", "127.0.0.1"],
            &[(DnType::CommonName, cn)],
        )
    };
    let old = issue("old.pem", "broker-2025");
    let new = issue("new.pem", "broker-2026");
    let old_path = old.keystore.display().to_string();
    let broker = TestBroker::start(
        dir.path(),
        &[
            ("listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"),
            ("ssl.keystore.type", "PEM"),
            ("listener.name.ssl.ssl.keystore.location", &old_path),
        ],
    )
    .await;
    let ssl_port = broker
        .broker
        .config()
        .advertised_listeners
        .iter()
        .find(|l| l.name == "SSL")
        .unwrap()
        .port;
    let ssl = std::net::SocketAddr::from(([127, 0, 0, 1], ssl_port));
    assert_eq!(served_subject(ssl, &ca).await, "CN=broker-2025");
    let open = tls_client(ssl, &client_settings(&ca, None), "localhost");
    assert!(open.api_versions().await.is_ok());

    let mut admin = broker.client().await;
    let key = "listener.name.ssl.ssl.keystore.location";
    // A keystore that cannot be read is refused when altered, naming the file.
    let (code, message) = common::configs::incremental_alter(
        &mut admin,
        common::configs::BROKER,
        "1",
        &[(common::configs::SET, key, Some("/nonexistent/k.pem"))],
    )
    .await;
    assert_ne!(code, 0);
    assert!(message.unwrap_or_default().contains("/nonexistent/k.pem"));
    assert_eq!(served_subject(ssl, &ca).await, "CN=broker-2025");

    let new_path = new.keystore.display().to_string();
    let (code, message) = common::configs::incremental_alter(
        &mut admin,
        common::configs::BROKER,
        "1",
        &[(common::configs::SET, key, Some(&new_path))],
    )
    .await;
    assert_eq!(code, 0, "{message:?}");
    let since = Instant::now();
    while served_subject(ssl, &ca).await != "CN=broker-2026" {
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "the new keystore is not served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The connection opened before the rotation still works.
    assert!(open.api_versions().await.is_ok());
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_pem_stores_serve_and_verify() {
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let broker_cert = ca.broker("broker.pem");
    let ca_pem = std::fs::read_to_string(ca.truststore()).unwrap();
    let mut server = client_settings(&ca, None);
    server.listener = "INLINE".into();
    server.keystore = Some(skua::tls::settings::KeystoreSettings {
        store_type: "PEM".into(),
        source: skua::tls::settings::StoreSource::Inline {
            key: Some(common::tls::secret(&broker_cert.key_pem)),
            certs: common::tls::secret(&broker_cert.cert_pem),
        },
        password: None,
        key_password: None,
    });
    server.truststore = Some(skua::tls::settings::TruststoreSettings {
        store_type: "PEM".into(),
        source: skua::tls::settings::StoreSource::Inline {
            key: None,
            certs: common::tls::secret(&ca_pem),
        },
        password: None,
    });
    server.client_auth = skua::tls::ClientAuth::Required;
    let bob = ca.issue("bob.pem", &[], &[(DnType::CommonName, "bob")]);
    let got = principal_of(&server, &client_settings(&ca, Some(&bob))).await;
    assert_eq!(got.unwrap().to_string(), "User:CN=bob");
    assert!(principal_of(&server, &client_settings(&ca, None))
        .await
        .is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_clone_of_a_reloaded_outbound_context_presents_the_new_certificate() {
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let broker_cert = ca.broker("broker.pem");
    let mut server = client_settings(&ca, Some(&broker_cert));
    server.listener = "SSL".into();
    server.client_auth = skua::tls::ClientAuth::Required;
    let tls = ListenerTls::build(&server).unwrap();
    let old = ca.issue("old.pem", &[], &[(DnType::CommonName, "broker-old")]);
    let new = ca.issue("new.pem", &[], &[(DnType::CommonName, "broker-new")]);
    let outbound = skua::tls::OutboundTls::build(&client_settings(&ca, Some(&old))).unwrap();
    // A clone as a client keeps it, made before the reload.
    let held_by_a_client = outbound.clone();
    let presented = |client: skua::tls::OutboundTls| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        let tls = &tls;
        async move {
            let connecting = tokio::spawn(async move {
                let tcp = TcpStream::connect(addr).await.unwrap();
                let stream = client.connect("localhost", tcp).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                drop(stream);
            });
            let (tcp, _) = listener.accept().await.unwrap();
            let (_, principal) = TlsTransport::accept(tls, tcp, Duration::from_secs(5))
                .await
                .unwrap();
            connecting.await.unwrap();
            principal.to_string()
        }
    };
    assert_eq!(
        presented(held_by_a_client.clone()).await,
        "User:CN=broker-old"
    );
    outbound
        .reload_from(&skua::tls::OutboundTls::build(&client_settings(&ca, Some(&new))).unwrap());
    assert_eq!(presented(held_by_a_client).await, "User:CN=broker-new");
}

/// An idle TLS connection holds no buffer: after a request is read and answered, the
/// connection's TLS buffers are released, and waiting for the next request does not end
/// (taking the connection's read buffer) before the client sends one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_tls_connection_holds_no_buffer() {
    use bytes::BytesMut;
    use skua::network::transport::{Transport, TransportRead};

    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::new(certs.path());
    let broker_cert = ca.broker("broker.pem");
    let mut server = client_settings(&ca, Some(&broker_cert));
    server.listener = "SSL".into();
    let tls = ListenerTls::build(&server).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let outbound = skua::tls::OutboundTls::build(&client_settings(&ca, None)).unwrap();
    let client = tokio::spawn(async move {
        let tcp = TcpStream::connect(addr).await.unwrap();
        outbound.connect("localhost", tcp).await.unwrap()
    });
    let (tcp, _) = listener.accept().await.unwrap();
    let (transport, _) = TlsTransport::accept(&tls, tcp, Duration::from_secs(5))
        .await
        .unwrap();
    let mut client = client.await.unwrap();
    let (mut reader, mut writer) = transport.into_split();

    // A request of 40 KB (three TLS records), read whole, and an answer of 100 KB.
    let request: Vec<u8> = (0..40_000u32).map(|i| i as u8).collect();
    client.write_all(&request).await.unwrap();
    client.flush().await.unwrap();
    let mut got = BytesMut::new();
    while got.len() < request.len() {
        reader.wait_readable().await.unwrap();
        got.reserve(64 * 1024);
        assert!(reader.read_buf(&mut got).await.unwrap() > 0);
    }
    assert_eq!(&got[..], &request[..]);
    let answer: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
    writer.write_all(&answer).await.unwrap();
    writer.flush().await.unwrap();
    let mut back = vec![0u8; answer.len()];
    client.read_exact(&mut back).await.unwrap();
    assert_eq!(back, answer);

    assert_eq!(
        reader.buffered_capacity(),
        0,
        "an idle connection's TLS buffers"
    );
    let waited = tokio::time::timeout(Duration::from_millis(300), reader.wait_readable()).await;
    assert!(
        waited.is_err(),
        "waiting for the next request ended before the client sent one"
    );
    client.write_all(b"next").await.unwrap();
    client.flush().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), reader.wait_readable())
        .await
        .expect("the next request's bytes end the wait")
        .unwrap();
    let mut next = BytesMut::with_capacity(16);
    reader.read_buf(&mut next).await.unwrap();
    assert_eq!(&next[..], b"next");
    assert_eq!(reader.buffered_capacity(), 0);
}
