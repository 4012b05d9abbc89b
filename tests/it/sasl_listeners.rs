//! SASL listeners over TCP, as Kafka's `SaslServerAuthenticator` answers them: PLAIN
//! users from the listener's JAAS config, SCRAM users created with
//! AlterUserScramCredentials (surviving a restart in the metadata log), OAUTHBEARER's
//! unsecured tokens and signed JWTs checked against a JWKS file (Kafka's
//! OAuthBearerValidatorCallbackHandler), the first users of a stopped broker (Kafka's
//! `kafka-storage.sh format --add-scram`, `skua --add-scram`), PLAIN users added by
//! altering the listener's JAAS config at runtime (KIP-226), the v0 handshake's raw tokens, KIP-368 re-authentication, and each
//! bad input closing the connection: requests before authentication, unknown mechanisms,
//! wrong credentials (late, and never saying which part was wrong), oversized frames,
//! stalled exchanges, garbage, brute force. The principal a request carries is what an
//! authorizer is asked about; no secret reaches the broker's log.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;

use skua::auth::authorizer::{Action, AuthorizationResult, Authorizer, Requester};
use skua::sasl::client::{plain_message, ScramClient};
use skua::sasl::scram::ScramMechanism;
use skua::sasl::settings::{ClientCredentials, Mechanism};
use skua::tls::settings::Secret;

use crate::common::{Client, TestBroker};

const PLAIN_JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#;
const SCRAM_JAAS: &str = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-scram";"#;
const OAUTH_JAAS: &str = r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";"#;
const DELAY_MS: u64 = 300;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// A broker whose only listener is SASL_PLAINTEXT with every mechanism skua serves.
async fn start(dir: &std::path::Path, extra: &[(&str, &str)]) -> TestBroker {
    let delay = DELAY_MS.to_string();
    let mut overrides = vec![
        ("listeners", "SASL_PLAINTEXT://127.0.0.1:0"),
        (
            "sasl.enabled.mechanisms",
            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        ),
        (
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            PLAIN_JAAS,
        ),
        (
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config",
            SCRAM_JAAS,
        ),
        (
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config",
            SCRAM_JAAS,
        ),
        (
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config",
            OAUTH_JAAS,
        ),
        ("connection.failed.authentication.delay.ms", delay.as_str()),
    ];
    overrides.extend_from_slice(extra);
    TestBroker::start(dir, &overrides).await
}

async fn handshake(c: &mut Client, mechanism: &str, version: i16) -> SaslHandshakeResponse {
    let req = SaslHandshakeRequest::default().with_mechanism(s(mechanism));
    c.send(&req, version).await
}

async fn authenticate(c: &mut Client, token: Vec<u8>, version: i16) -> SaslAuthenticateResponse {
    let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    c.send(&req, version).await
}

/// A client authenticated with PLAIN as `user`.
async fn plain_client(b: &TestBroker, user: &str, password: &str) -> Client {
    let mut c = b.client().await;
    assert_eq!(handshake(&mut c, "PLAIN", 1).await.error_code, 0);
    let done = authenticate(&mut c, plain_message(user, password), 2).await;
    assert_eq!(done.error_code, 0, "{done:?}");
    c
}

/// Whether the broker closed the connection (reads until end of stream, within 5 s).
async fn closed(c: &mut Client) -> bool {
    matches!(
        tokio::time::timeout(Duration::from_secs(5), c.read_frame()).await,
        Ok(None)
    )
}

fn metadata() -> MetadataRequest {
    MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s("t")))),
    ]))
}

/// Allows everything and records who asked.
#[derive(Default)]
struct RecordPrincipals(Mutex<Vec<String>>);

impl Authorizer for RecordPrincipals {
    fn authorize(&self, r: &Requester<'_>, actions: &[Action<'_>]) -> Vec<AuthorizationResult> {
        self.0.lock().push(r.principal.to_string());
        vec![AuthorizationResult::Allowed; actions.len()]
    }
}

/// The salted password AlterUserScramCredentials carries, as Kafka's admin client
/// computes it.
fn salted(m: ScramMechanism, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    let algorithm = match m {
        ScramMechanism::Sha256 => ring::pbkdf2::PBKDF2_HMAC_SHA256,
        ScramMechanism::Sha512 => ring::pbkdf2::PBKDF2_HMAC_SHA512,
    };
    let mut out = vec![0u8; m.hash_len()];
    ring::pbkdf2::derive(
        algorithm,
        std::num::NonZeroU32::new(iterations).unwrap(),
        salt,
        password.as_bytes(),
        &mut out,
    );
    out
}

fn upsert(
    user: &str,
    m: ScramMechanism,
    password: &str,
    iterations: i32,
) -> AlterUserScramCredentialsRequest {
    let salt = b"a-salt-of-16-by.".to_vec();
    AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
            .with_name(s(user))
            .with_mechanism(m.kafka_type())
            .with_iterations(iterations)
            .with_salted_password(Bytes::from(salted(
                m,
                password,
                &salt,
                iterations.max(1) as u32,
            )))
            .with_salt(Bytes::from(salt)),
    ])
}

/// A SCRAM exchange over SaslAuthenticate: the final response, or the failing one.
async fn scram(
    c: &mut Client,
    m: ScramMechanism,
    user: &str,
    password: &str,
) -> SaslAuthenticateResponse {
    assert_eq!(handshake(c, m.name(), 1).await.error_code, 0);
    let mut client = ScramClient::new(m, user, password);
    let first = authenticate(c, client.first_message(), 1).await;
    if first.error_code != 0 {
        return first;
    }
    let last = client.final_message(&first.auth_bytes).unwrap();
    let done = authenticate(c, last, 1).await;
    if done.error_code == 0 {
        client.verify_server_final(&done.auth_bytes).unwrap();
    }
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_authenticates_and_requests_carry_its_principal() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &[]).await;
    let recorder = Arc::new(RecordPrincipals::default());
    b.broker.set_authorizer(recorder.clone()).unwrap();
    let mut c = b.client().await;
    // ApiVersions before the handshake advertises both SASL APIs.
    let versions = c.send(&ApiVersionsRequest::default(), 3).await;
    let range = |k: ApiKey| {
        versions
            .api_keys
            .iter()
            .find(|v| v.api_key == k as i16)
            .map(|v| (v.min_version, v.max_version))
    };
    assert_eq!(range(ApiKey::SaslHandshake), Some((0, 1)));
    assert_eq!(range(ApiKey::SaslAuthenticate), Some((0, 2)));
    let hs = handshake(&mut c, "PLAIN", 1).await;
    assert_eq!(hs.error_code, 0);
    let names: Vec<&str> = hs.mechanisms.iter().map(|m| m.as_str()).collect();
    assert_eq!(
        names,
        ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    );
    let done = authenticate(&mut c, plain_message("alice", "alice-secret"), 2).await;
    assert_eq!(
        (done.error_code, done.session_lifetime_ms),
        (0, 0),
        "{done:?}"
    );
    let md = c.send(&metadata(), 12).await;
    assert_eq!(md.topics.len(), 1);
    assert!(
        recorder.0.lock().iter().any(|p| p == "User:alice"),
        "{:?}",
        recorder.0.lock()
    );
    assert!(!recorder.0.lock().iter().any(|p| p == "User:ANONYMOUS"));
    // Once authenticated (and without re-authentication), the SASL APIs are refused.
    assert_eq!(
        handshake(&mut c, "PLAIN", 1).await.error_code,
        ResponseError::IllegalSaslState.code()
    );
    let again = authenticate(&mut c, plain_message("alice", "alice-secret"), 2).await;
    assert_eq!(again.error_code, ResponseError::IllegalSaslState.code());
    assert_eq!(c.send(&metadata(), 12).await.topics.len(), 1);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anything_but_the_handshake_before_authentication_closes_the_connection() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &[]).await;
    // A request of any other API, first.
    let mut c = b.client().await;
    c.write_request(&metadata(), 12).await;
    assert!(closed(&mut c).await, "Metadata before authentication");
    // ApiVersions twice.
    let mut c = b.client().await;
    c.send(&ApiVersionsRequest::default(), 3).await;
    c.write_request(&ApiVersionsRequest::default(), 3).await;
    assert!(closed(&mut c).await, "a second ApiVersions");
    // After the handshake, another request than SaslAuthenticate: ILLEGAL_SASL_STATE.
    let mut c = b.client().await;
    handshake(&mut c, "PLAIN", 1).await;
    let hs = handshake(&mut c, "PLAIN", 1).await;
    assert_eq!(hs.error_code, ResponseError::IllegalSaslState.code());
    assert!(closed(&mut c).await);
    let mut c = b.client().await;
    handshake(&mut c, "PLAIN", 1).await;
    c.write_request(&metadata(), 12).await;
    assert!(closed(&mut c).await, "Metadata after the handshake");
    // Not Kafka at all.
    let mut c = b.client().await;
    tokio::io::AsyncWriteExt::write_all(&mut c.stream, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    assert!(closed(&mut c).await, "HTTP");
    // The broker still serves.
    plain_client(&b, "alice", "alice-secret").await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_mechanism_gets_the_enabled_list_late_then_the_connection_closes() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(
        dir.path(),
        &[("sasl.enabled.mechanisms", "SCRAM-SHA-512,PLAIN")],
    )
    .await;
    for version in [0, 1] {
        let mut c = b.client().await;
        let started = Instant::now();
        let hs = handshake(&mut c, "GSSAPI", version).await;
        assert!(started.elapsed() >= Duration::from_millis(DELAY_MS - 20));
        assert_eq!(
            hs.error_code,
            ResponseError::UnsupportedSaslMechanism.code()
        );
        let names: Vec<&str> = hs.mechanisms.iter().map(|m| m.as_str()).collect();
        assert_eq!(names, ["SCRAM-SHA-512", "PLAIN"]);
        assert!(closed(&mut c).await);
    }
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_fail_alike_late_and_close() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &[]).await;
    let mut admin = plain_client(&b, "admin", "admin-secret").await;
    let made = admin
        .send(
            &upsert("carol", ScramMechanism::Sha512, "carol-pw", 8192),
            0,
        )
        .await;
    assert_eq!(made.results[0].error_code, 0, "{made:?}");
    for (user, password) in [
        ("alice", "wrong"),
        ("mallory", "alice-secret"),
        ("alice", "admin-secret"),
    ] {
        let mut c = b.client().await;
        handshake(&mut c, "PLAIN", 1).await;
        let started = Instant::now();
        let failed = authenticate(&mut c, plain_message(user, password), 2).await;
        assert!(started.elapsed() >= Duration::from_millis(DELAY_MS - 20));
        assert_eq!(
            failed.error_code,
            ResponseError::SaslAuthenticationFailed.code()
        );
        assert_eq!(
            failed.error_message.as_deref(),
            Some("Authentication failed: Invalid username or password")
        );
        // The close does not follow the answer at once: a client that reads both in
        // one pass may act on the close and drop the answer.
        let next = tokio::time::timeout(Duration::from_millis(200), c.read_frame()).await;
        assert!(
            next.is_err(),
            "the connection closed with the answer: {next:?}"
        );
        assert!(closed(&mut c).await);
    }
    for (user, password) in [("carol", "wrong"), ("nobody", "carol-pw")] {
        let mut c = b.client().await;
        let failed = scram(&mut c, ScramMechanism::Sha512, user, password).await;
        assert_eq!(
            failed.error_code,
            ResponseError::SaslAuthenticationFailed.code()
        );
        assert_eq!(
            failed.error_message.as_deref(),
            Some("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512")
        );
        assert!(closed(&mut c).await);
    }
    // A credential of one mechanism does not authenticate with the other.
    let mut c = b.client().await;
    let failed = scram(&mut c, ScramMechanism::Sha256, "carol", "carol-pw").await;
    assert_eq!(
        failed.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_users_are_altered_described_and_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &[]).await;
    let mut admin = plain_client(&b, "admin", "admin-secret").await;
    let made = admin
        .send(
            &upsert("alice", ScramMechanism::Sha512, "alice-scram", 8192),
            0,
        )
        .await;
    assert_eq!(made.results[0].error_code, 0, "{made:?}");
    let made = admin
        .send(
            &upsert("alice", ScramMechanism::Sha256, "alice-256", 4096),
            0,
        )
        .await;
    assert_eq!(made.results[0].error_code, 0);
    // Refusals, each as Kafka words it.
    let refused = |r: AlterUserScramCredentialsResponse| {
        (
            r.results[0].error_code,
            r.results[0]
                .error_message
                .as_deref()
                .unwrap_or("")
                .to_string(),
        )
    };
    let few = admin
        .send(&upsert("bob", ScramMechanism::Sha512, "x", 1000), 0)
        .await;
    assert_eq!(
        refused(few),
        (
            ResponseError::UnacceptableCredential.code(),
            "Too few iterations".into()
        )
    );
    let many = admin
        .send(&upsert("bob", ScramMechanism::Sha512, "x", 20000), 0)
        .await;
    assert_eq!(refused(many).1, "Too many iterations");
    let delete_missing = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        alter_user_scram_credentials_request::ScramCredentialDeletion::default()
            .with_name(s("bob"))
            .with_mechanism(2),
    ]);
    let missing = admin.send(&delete_missing, 0).await;
    assert_eq!(refused(missing).0, ResponseError::ResourceNotFound.code());
    let described = admin
        .send(
            &DescribeUserScramCredentialsRequest::default().with_users(None),
            0,
        )
        .await;
    assert_eq!(described.error_code, 0);
    assert_eq!(described.results.len(), 1);
    let infos: Vec<(i8, i32)> = described.results[0]
        .credential_infos
        .iter()
        .map(|i| (i.mechanism, i.iterations))
        .collect();
    assert_eq!(described.results[0].user.as_str(), "alice");
    assert_eq!(infos, [(1, 4096), (2, 8192)]);
    let unknown = admin
        .send(
            &DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                describe_user_scram_credentials_request::UserName::default().with_name(s("bob")),
            ])),
            0,
        )
        .await;
    assert_eq!(
        unknown.results[0].error_code,
        ResponseError::ResourceNotFound.code()
    );
    // The credential authenticates, over the wire and through skua's own client.
    let mut c = b.client().await;
    assert_eq!(
        scram(&mut c, ScramMechanism::Sha512, "alice", "alice-scram")
            .await
            .error_code,
        0
    );
    assert_eq!(c.send(&metadata(), 12).await.topics.len(), 1);
    let mut c = b.client().await;
    assert_eq!(
        scram(&mut c, ScramMechanism::Sha256, "alice", "alice-256")
            .await
            .error_code,
        0
    );
    let config = skua::client::ClientConfig {
        sasl: Some(ClientCredentials {
            mechanism: Mechanism::Scram(ScramMechanism::Sha512),
            username: "alice".into(),
            password: Secret("alice-scram".into()),
        }),
        ..Default::default()
    };
    let conn = skua::client::Connection::connect(b.addr, &config)
        .await
        .unwrap();
    conn.send(&metadata(), 12).await.unwrap();
    let wrong = skua::client::ClientConfig {
        sasl: Some(ClientCredentials {
            password: Secret("nope".into()),
            ..config.sasl.clone().unwrap()
        }),
        ..Default::default()
    };
    assert!(skua::client::Connection::connect(b.addr, &wrong)
        .await
        .is_err());
    // Across a restart (the metadata log holds UserScramCredentialRecords).
    b.stop().await;
    let b = start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(
        scram(&mut c, ScramMechanism::Sha512, "alice", "alice-scram")
            .await
            .error_code,
        0
    );
    // Deleted, it no longer authenticates.
    let mut admin = plain_client(&b, "admin", "admin-secret").await;
    let delete = AlterUserScramCredentialsRequest::default().with_deletions(vec![
        alter_user_scram_credentials_request::ScramCredentialDeletion::default()
            .with_name(s("alice"))
            .with_mechanism(2),
    ]);
    assert_eq!(admin.send(&delete, 0).await.results[0].error_code, 0);
    let mut c = b.client().await;
    assert_ne!(
        scram(&mut c, ScramMechanism::Sha512, "alice", "alice-scram")
            .await
            .error_code,
        0
    );
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v0_handshake_exchanges_raw_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(handshake(&mut c, "PLAIN", 0).await.error_code, 0);
    c.write_frame(&plain_message("alice", "alice-secret")).await;
    // PLAIN's (empty) answer, as a size-prefixed frame of its own.
    assert_eq!(c.read_frame().await.as_deref(), Some(&b""[..]));
    assert_eq!(c.send(&metadata(), 12).await.topics.len(), 1);
    // A wrong password: no answer, the connection closes.
    let mut c = b.client().await;
    handshake(&mut c, "PLAIN", 0).await;
    c.write_frame(&plain_message("alice", "nope")).await;
    assert!(closed(&mut c).await);
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_malformed_and_stalled_exchanges_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(
        dir.path(),
        &[
            ("sasl.server.max.receive.size", "4096"),
            ("connections.max.idle.ms", "1500"),
        ],
    )
    .await;
    // A frame over sasl.server.max.receive.size before authentication, by its size alone.
    let mut c = b.client().await;
    tokio::io::AsyncWriteExt::write_all(&mut c.stream, &5000i32.to_be_bytes())
        .await
        .unwrap();
    assert!(closed(&mut c).await, "oversized frame");
    // An oversized token inside SaslAuthenticate.
    let mut c = b.client().await;
    handshake(&mut c, "PLAIN", 1).await;
    c.write_request(
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(vec![b'a'; 8000])),
        1,
    )
    .await;
    assert!(closed(&mut c).await, "oversized token");
    // Malformed SCRAM messages and a wrong nonce fail the exchange.
    for (first, last) in [
        (&b"garbage"[..], None),
        (&b"n,,n=alice"[..], None),
        (
            &b"n,,n=alice,r=abc"[..],
            Some(&b"c=biws,r=not-the-nonce,p=AAAA"[..]),
        ),
    ] {
        let mut c = b.client().await;
        handshake(&mut c, "SCRAM-SHA-256", 1).await;
        let mut resp = authenticate(&mut c, first.to_vec(), 1).await;
        if let Some(last) = last {
            assert_eq!(resp.error_code, 0);
            resp = authenticate(&mut c, last.to_vec(), 1).await;
        }
        assert_eq!(
            resp.error_code,
            ResponseError::SaslAuthenticationFailed.code()
        );
        assert!(closed(&mut c).await);
    }
    // Malformed PLAIN.
    let mut c = b.client().await;
    handshake(&mut c, "PLAIN", 1).await;
    let resp = authenticate(&mut c, b"only-one-token".to_vec(), 1).await;
    assert_eq!(
        resp.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    // A stalled exchange (half a handshake) is closed within the bound.
    let mut c = b.client().await;
    let started = Instant::now();
    tokio::io::AsyncWriteExt::write_all(&mut c.stream, &[0, 0, 0, 30, 0, 17])
        .await
        .unwrap();
    assert!(closed(&mut c).await, "stalled");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(4),
        "{took:?}"
    );
    plain_client(&b, "alice", "alice-secret").await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brute_force_never_authenticates() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(
        dir.path(),
        &[("connection.failed.authentication.delay.ms", "0")],
    )
    .await;
    let secret = "alice-secret";
    let mut guesses: Vec<String> = (0..secret.len()).map(|n| secret[..n].to_string()).collect();
    guesses.extend((0..40).map(|i| format!("guess-{i}")));
    guesses.push(format!("{secret} "));
    guesses.push(secret.to_uppercase());
    let attempts = guesses.iter().map(|g| {
        let b = &b;
        async move {
            let mut c = b.client().await;
            handshake(&mut c, "PLAIN", 1).await;
            authenticate(&mut c, plain_message("alice", g), 2)
                .await
                .error_code
        }
    });
    let codes = futures::future::join_all(attempts).await;
    assert!(
        codes
            .iter()
            .all(|c| *c == ResponseError::SaslAuthenticationFailed.code()),
        "{codes:?}"
    );
    // SCRAM guesses too.
    let mut admin = plain_client(&b, "admin", "admin-secret").await;
    admin
        .send(
            &upsert("alice", ScramMechanism::Sha256, "alice-scram", 4096),
            0,
        )
        .await;
    for g in ["alice-scra", "alice-scram ", "ALICE-SCRAM", ""] {
        let mut c = b.client().await;
        assert_ne!(
            scram(&mut c, ScramMechanism::Sha256, "alice", g)
                .await
                .error_code,
            0
        );
    }
    plain_client(&b, "alice", secret).await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reauthentication_keeps_the_principal_and_an_expired_session_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &[("connections.max.reauth.ms", "1500")]).await;
    let mut c = b.client().await;
    handshake(&mut c, "PLAIN", 1).await;
    let done = authenticate(&mut c, plain_message("alice", "alice-secret"), 2).await;
    assert_eq!((done.error_code, done.session_lifetime_ms), (0, 1500));
    // v0 has no lifetime field; the session still has one.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(handshake(&mut c, "PLAIN", 1).await.error_code, 0);
    let again = authenticate(&mut c, plain_message("alice", "alice-secret"), 2).await;
    assert_eq!((again.error_code, again.session_lifetime_ms), (0, 1500));
    // Within the new lifetime (the first one has passed) requests are served.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(c.send(&metadata(), 12).await.topics.len(), 1);
    // Then unused past it: the next request closes the connection.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    c.write_request(&metadata(), 12).await;
    assert!(closed(&mut c).await, "expired session");

    // Another principal is refused.
    let mut c = plain_client(&b, "alice", "alice-secret").await;
    tokio::time::sleep(Duration::from_millis(1050)).await;
    handshake(&mut c, "PLAIN", 1).await;
    let changed = authenticate(&mut c, plain_message("admin", "admin-secret"), 2).await;
    assert_eq!(
        changed.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    assert_eq!(
        changed.error_message.as_deref(),
        Some("Cannot change principals during re-authentication from User.alice: User.admin")
    );
    assert!(closed(&mut c).await);
    // Another mechanism is refused at its first token.
    let mut c = plain_client(&b, "alice", "alice-secret").await;
    tokio::time::sleep(Duration::from_millis(1050)).await;
    assert_eq!(handshake(&mut c, "SCRAM-SHA-256", 1).await.error_code, 0);
    c.write_request(&SaslAuthenticateRequest::default(), 1)
        .await;
    assert!(closed(&mut c).await);
    // A handshake sooner than a second after the last re-authentication is refused.
    let mut c = plain_client(&b, "alice", "alice-secret").await;
    tokio::time::sleep(Duration::from_millis(1050)).await;
    handshake(&mut c, "PLAIN", 1).await;
    authenticate(&mut c, plain_message("alice", "alice-secret"), 2).await;
    assert_eq!(
        handshake(&mut c, "PLAIN", 1).await.error_code,
        ResponseError::IllegalSaslState.code()
    );
    b.stop().await;
}

fn unsecured_token(sub: &str, exp_in_s: i64) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let header = b64.encode(br#"{"alg":"none"}"#);
    let claims = b64.encode(format!(
        r#"{{"sub":"{sub}","iat":{now},"exp":{}}}"#,
        now + exp_in_s
    ));
    format!("n,,\x01auth=Bearer {header}.{claims}.\x01\x01").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauthbearer_unsecured_tokens_authenticate_until_they_expire() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &[]).await;
    let recorder = Arc::new(RecordPrincipals::default());
    b.broker.set_authorizer(recorder.clone()).unwrap();
    let mut c = b.client().await;
    handshake(&mut c, "OAUTHBEARER", 1).await;
    let done = authenticate(&mut c, unsecured_token("svc", 60), 1).await;
    assert_eq!(done.error_code, 0, "{done:?}");
    // The session lives as long as the token (KIP-368), sent to the client.
    assert!(
        (55_000..=60_000).contains(&done.session_lifetime_ms),
        "{}",
        done.session_lifetime_ms
    );
    c.send(&metadata(), 12).await;
    assert!(recorder.0.lock().iter().any(|p| p == "User:svc"));
    // An expired token: Kafka's error challenge, then the failure.
    let mut c = b.client().await;
    handshake(&mut c, "OAUTHBEARER", 1).await;
    let challenge = authenticate(&mut c, unsecured_token("svc", -60), 1).await;
    assert_eq!(challenge.error_code, 0);
    let json: serde_json::Value = serde_json::from_slice(&challenge.auth_bytes).unwrap();
    assert_eq!(json["status"], "invalid_token");
    let failed = authenticate(&mut c, vec![1], 1).await;
    assert_eq!(
        failed.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    assert!(closed(&mut c).await);
    b.stop().await;
}

/// KIP-226 for SASL: altering `listener.name.<l>.plain.sasl.jaas.config` with
/// IncrementalAlterConfigs adds a PLAIN user without a restart. A connection opened after
/// the change authenticates as carol; one authenticated before keeps working; a JAAS
/// config that does not parse is refused (naming the line, never the value) and leaves
/// the users in force; the change survives a restart (the metadata log's ConfigRecord).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_user_added_to_the_jaas_config_at_runtime_authenticates() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &[]).await;
    let key = "listener.name.sasl_plaintext.plain.sasl.jaas.config";
    let mut admin = plain_client(&b, "admin", "admin-secret").await;
    let mut c = b.client().await;
    handshake(&mut c, "PLAIN", 1).await;
    let refused = authenticate(&mut c, plain_message("carol", "carol-secret"), 2).await;
    assert_eq!(
        refused.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    let broker_id = b.broker.config().broker_id.to_string();
    let with_carol = PLAIN_JAAS.replace(';', r#" user_carol="carol-secret";"#);
    let (code, message) = crate::common::configs::incremental_alter(
        &mut admin,
        crate::common::configs::BROKER,
        &broker_id,
        &[(crate::common::configs::SET, key, Some(&with_carol))],
    )
    .await;
    assert_eq!(code, 0, "{message:?}");
    let since = Instant::now();
    loop {
        let mut c = b.client().await;
        handshake(&mut c, "PLAIN", 1).await;
        let done = authenticate(&mut c, plain_message("carol", "carol-secret"), 2).await;
        if done.error_code == 0 {
            c.send(&metadata(), 12).await;
            break;
        }
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "carol never authenticated"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The connection authenticated before the change goes on.
    admin.send(&metadata(), 12).await;
    let broken = r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_dave="dave-secret"#;
    let (code, message) = crate::common::configs::incremental_alter(
        &mut admin,
        crate::common::configs::BROKER,
        &broker_id,
        &[(crate::common::configs::SET, key, Some(broken))],
    )
    .await;
    let message = message.unwrap_or_default();
    assert_ne!(code, 0);
    assert!(
        message.contains(key) && !message.contains("dave-secret"),
        "{message}"
    );
    b.stop().await;
    let b = start(dir.path(), &[]).await;
    for (user, password) in [("carol", "carol-secret"), ("alice", "alice-secret")] {
        plain_client(&b, user, password).await;
    }
    b.stop().await;
}

/// `skua --add-scram ARGS --override log.dirs=DIR`: (exit code, stdout, stderr).
fn add_scram(dir: &std::path::Path, specs: &[&str]) -> (i32, String, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_skua"));
    for spec in specs {
        cmd.args(["--add-scram", spec]);
    }
    let out = cmd
        .args(["--override", &format!("log.dirs={}", dir.display())])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The first users of a broker whose only listener needs SASL, made before it ever
/// runs: a dir formatted by Kafka 4.1's `kafka-storage.sh format --add-scram` (its
/// bootstrap.checkpoint holds alice, SCRAM-SHA-512), then `skua --add-scram` for bob
/// (SCRAM-SHA-256) on the stopped dir, which creates the metadata log as a first start
/// would. Both authenticate once the broker runs; `skua --add-scram` on the running
/// broker's dir is refused by the dir lock; carol, added after it stopped, authenticates
/// after a restart, beside the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_users_are_written_before_the_broker_runs() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kafka-4.1-format-add-scram");
    for file in ["meta.properties", "bootstrap.checkpoint"] {
        std::fs::copy(fixture.join(file), dir.path().join(file)).unwrap();
    }
    let (code, out, err) = add_scram(
        dir.path(),
        &["SCRAM-SHA-256=[name=bob,password=bob-secret]"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim(), "added SCRAM-SHA-256 bob");
    assert!(!out.contains("bob-secret") && !err.contains("bob-secret"));
    let (code, _, err) = add_scram(dir.path(), &["SCRAM-SHA-1=[name=x,password=y]"]);
    assert_eq!(code, 2, "{err}");

    let b = start(dir.path(), &[]).await;
    let users = [
        (ScramMechanism::Sha512, "alice", "alice-secret"),
        (ScramMechanism::Sha256, "bob", "bob-secret"),
    ];
    for (m, user, password) in users {
        let mut c = b.client().await;
        let done = scram(&mut c, m, user, password).await;
        assert_eq!(done.error_code, 0, "{user}: {done:?}");
    }
    let mut c = b.client().await;
    let wrong = scram(&mut c, ScramMechanism::Sha512, "alice", "bob-secret").await;
    assert_eq!(
        wrong.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    let (code, _, err) = add_scram(
        dir.path(),
        &["SCRAM-SHA-512=[name=carol,password=carol-secret]"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("another broker"), "{err}");
    b.stop().await;

    let (code, out, err) = add_scram(
        dir.path(),
        &["SCRAM-SHA-512=[name=carol,password=carol-secret,iterations=8192]"],
    );
    assert_eq!(code, 0, "{out}{err}");
    let b = start(dir.path(), &[]).await;
    for (m, user, password) in
        users
            .into_iter()
            .chain([(ScramMechanism::Sha512, "carol", "carol-secret")])
    {
        let mut c = b.client().await;
        let done = scram(&mut c, m, user, password).await;
        assert_eq!(done.error_code, 0, "{user}: {done:?}");
    }
    b.stop().await;
}

/// Signs JWTs for the JWKS tests: the RSA test key of `src/sasl/testdata` and an EC P-256
/// key made now.
struct JwtSigner {
    rsa: ring::signature::RsaKeyPair,
    ec: ring::signature::EcdsaKeyPair,
}

impl JwtSigner {
    fn new() -> JwtSigner {
        use ring::signature::{EcdsaKeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
        let der = base64::engine::general_purpose::STANDARD
            .decode(
                include_str!("../../src/sasl/testdata/rsa-2048.pkcs1.b64")
                    .split_whitespace()
                    .collect::<String>(),
            )
            .unwrap();
        let rng = ring::rand::SystemRandom::new();
        let ec = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        JwtSigner {
            rsa: RsaKeyPair::from_der(&der).unwrap(),
            ec: EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, ec.as_ref(), &rng)
                .unwrap(),
        }
    }

    fn jwks(&self) -> String {
        use ring::signature::KeyPair;
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let rsa = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(self.rsa.public());
        let trim = |b: &[u8]| b64.encode(&b[b.iter().take_while(|x| **x == 0).count()..]);
        let point = self.ec.public_key().as_ref();
        serde_json::json!({"keys": [
            {"kty": "RSA", "kid": "rsa", "use": "sig", "n": trim(&rsa.n), "e": trim(&rsa.e)},
            {"kty": "EC", "kid": "ec", "crv": "P-256",
             "x": b64.encode(&point[1..33]), "y": b64.encode(&point[33..65])},
        ]})
        .to_string()
    }

    /// The OAUTHBEARER client message carrying a JWT of `claims` signed with `alg`.
    fn message(&self, alg: &str, kid: &str, claims: serde_json::Value) -> Vec<u8> {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let header = serde_json::json!({"alg": alg, "kid": kid, "typ": "JWT"});
        let signed = format!(
            "{}.{}",
            b64.encode(header.to_string()),
            b64.encode(claims.to_string())
        );
        let rng = ring::rand::SystemRandom::new();
        let signature = if alg == "RS256" {
            let mut sig = vec![0; self.rsa.public().modulus_len()];
            self.rsa
                .sign(
                    &ring::signature::RSA_PKCS1_SHA256,
                    &rng,
                    signed.as_bytes(),
                    &mut sig,
                )
                .unwrap();
            sig
        } else {
            self.ec
                .sign(&rng, signed.as_bytes())
                .unwrap()
                .as_ref()
                .to_vec()
        };
        format!(
            "n,,\x01auth=Bearer {signed}.{}\x01\x01",
            b64.encode(signature)
        )
        .into_bytes()
    }
}

/// OAUTHBEARER with Kafka's OAuthBearerValidatorCallbackHandler: RS256 and ES256 tokens
/// whose keys are in the JWKS file authenticate as their `sub` for as long as they live;
/// a token for another audience, or signed by a key the JWKS does not hold, gets Kafka's
/// error challenge and then fails, late, and the connection closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oauthbearer_signed_tokens_are_checked_against_the_jwks() {
    let (dir, keys) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let signer = JwtSigner::new();
    let jwks = keys.path().join("jwks.json");
    std::fs::write(&jwks, signer.jwks()).unwrap();
    let url = format!("file://{}", jwks.display());
    let b = start(
        dir.path(),
        &[
            (
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            ),
            ("sasl.oauthbearer.jwks.endpoint.url", &url),
            ("sasl.oauthbearer.expected.audience", "kafka"),
            ("sasl.oauthbearer.expected.issuer", "https://idp.test"),
        ],
    )
    .await;
    let recorder = Arc::new(RecordPrincipals::default());
    b.broker.set_authorizer(recorder.clone()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let claims = |sub: &str, aud: &str| {
        serde_json::json!({"sub": sub, "aud": aud, "iss": "https://idp.test",
                           "iat": now, "exp": now + 120, "scope": "kafka"})
    };
    for (alg, kid, sub) in [("RS256", "rsa", "alice"), ("ES256", "ec", "bob")] {
        let mut c = b.client().await;
        assert_eq!(handshake(&mut c, "OAUTHBEARER", 1).await.error_code, 0);
        let done = authenticate(&mut c, signer.message(alg, kid, claims(sub, "kafka")), 2).await;
        assert_eq!(done.error_code, 0, "{alg}: {done:?}");
        assert!(
            (110_000..=120_000).contains(&done.session_lifetime_ms),
            "{}",
            done.session_lifetime_ms
        );
        c.send(&metadata(), 12).await;
        let principal = format!("User:{sub}");
        assert!(recorder.0.lock().contains(&principal), "{principal}");
    }
    let stranger = JwtSigner::new();
    for message in [
        signer.message("RS256", "rsa", claims("mallory", "elsewhere")),
        stranger.message("ES256", "ec", claims("mallory", "kafka")),
    ] {
        let mut c = b.client().await;
        handshake(&mut c, "OAUTHBEARER", 1).await;
        let challenge = authenticate(&mut c, message, 2).await;
        assert_eq!(challenge.error_code, 0);
        assert_eq!(
            std::str::from_utf8(&challenge.auth_bytes).unwrap(),
            r#"{"status":"invalid_token"}"#
        );
        let started = Instant::now();
        let failed = authenticate(&mut c, vec![1], 2).await;
        assert_eq!(
            failed.error_code,
            ResponseError::SaslAuthenticationFailed.code()
        );
        assert!(started.elapsed() >= Duration::from_millis(DELAY_MS - 50));
        assert!(closed(&mut c).await);
    }
    assert!(!recorder.0.lock().iter().any(|p| p == "User:mallory"));
    b.stop().await;
}

/// A writer into a shared buffer, for a capturing subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn secrets_never_reach_the_log() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    // One thread: every task the broker spawns logs to this subscriber.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let b = start(dir.path(), &[]).await;
        let mut admin = plain_client(&b, "admin", "admin-secret").await;
        admin
            .send(
                &upsert("alice", ScramMechanism::Sha512, "scram-hunter2", 4096),
                0,
            )
            .await;
        let mut c = b.client().await;
        handshake(&mut c, "PLAIN", 1).await;
        authenticate(&mut c, plain_message("alice", "plain-hunter3"), 2).await;
        let mut c = b.client().await;
        scram(&mut c, ScramMechanism::Sha512, "alice", "scram-hunter4").await;
        // DescribeConfigs hides the JAAS config.
        let described = admin
            .send(
                &DescribeConfigsRequest::default().with_resources(vec![
                    describe_configs_request::DescribeConfigsResource::default()
                        .with_resource_type(4)
                        .with_resource_name(s("1"))
                        .with_configuration_keys(None),
                ]),
                4,
            )
            .await;
        let jaas = described.results[0]
            .configs
            .iter()
            .find(|c| c.name.as_str() == "listener.name.sasl_plaintext.plain.sasl.jaas.config");
        if let Some(j) = jaas {
            assert!(j.value.is_none() && j.is_sensitive, "{j:?}");
        }
        assert!(!format!("{described:?}").contains("admin-secret"));
        b.stop().await;
    });
    let log = String::from_utf8_lossy(&captured.0.lock()).to_string();
    assert!(
        log.contains("Failed authentication"),
        "the failures are logged"
    );
    for secret in [
        "admin-secret",
        "alice-secret",
        "plain-hunter3",
        "scram-hunter2",
        "scram-hunter4",
        "admin-scram",
    ] {
        assert!(!log.contains(secret), "{secret} in the log");
    }
}
