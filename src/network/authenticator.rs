//! A SASL listener's connection before it has authenticated: Kafka's
//! `SaslServerAuthenticator`, as a state machine over the frames the connection reads.
//!
//! ```text
//! INITIAL ──ApiVersions──▶ HANDSHAKE ──SaslHandshake──▶ AUTHENTICATE ──▶ authenticated
//!    └─────────────SaslHandshake────────────┘    (v1: SaslAuthenticate requests;
//!                                                 v0: raw size-prefixed tokens)
//! ```
//!
//! Until the exchange succeeds only ApiVersions (once, first), SaslHandshake and then the
//! mechanism's tokens are read; anything else closes the connection with a log line, as
//! Kafka closes it. A mechanism not enabled is answered UNSUPPORTED_SASL_MECHANISM with
//! the enabled list, a failed exchange SASL_AUTHENTICATION_FAILED with the mechanism's
//! client message (which never says which part of the credentials was wrong), and a
//! request other than SaslAuthenticate after the handshake ILLEGAL_SASL_STATE; each of
//! these answers is sent `connection.failed.authentication.delay.ms` late, and the
//! connection closes half a second after it (the writer's linger: a client must read
//! the answer before it sees the close). Frames are bounded by `sasl.server.max.receive.size` (the
//! connection's reader applies it), and the exchange by a deadline.
//!
//! KIP-368 re-authentication runs the same machine from the SaslHandshake an
//! authenticated connection sends: the mechanism and the principal must not change.
//!
//! The machine does no I/O: [`Authenticator::receive`] takes one frame and says what to
//! send and whether the connection is now authenticated, failed, or waits for more.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestKind, ResponseKind, SaslAuthenticateResponse,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::session::{Principal, SaslSession};
use crate::clock::now_ms;
use crate::handlers::api_versions;
use crate::protocol::codec::{decode_request_within, encode_response, peek_header};
use crate::protocol::zero_copy::Chunk;
use crate::protocol::Frame;
use crate::sasl::oauthbearer::OAuthBearerServer;
use crate::sasl::scram::{ScramCredential, ScramMechanism, ScramServer};
use crate::sasl::settings::{Mechanism, SaslSettings};
use crate::sasl::{plain, SaslFailure, Step};

/// How long a connection has to authenticate (or re-authenticate) once it starts: a
/// client that connects and stalls, or trickles its exchange, holds its slot no longer.
/// `connections.max.idle.ms` bounds it further where it is shorter.
pub const AUTHENTICATION_TIMEOUT: Duration = Duration::from_secs(10);

/// Kafka's `MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS`: a SaslHandshake sooner after the last
/// re-authentication began is an ordinary request (answered ILLEGAL_SASL_STATE).
pub const MIN_REAUTH_INTERVAL: Duration = Duration::from_secs(1);

/// What the authenticator needs from the broker.
pub trait Credentials {
    /// The SCRAM credential of `user` for `mechanism`, if it has one.
    fn scram(&self, mechanism: ScramMechanism, user: &str) -> Option<ScramCredential>;
    /// The kind of broker, whose routes ApiVersions lists.
    fn mode(&self) -> crate::router::Mode;
}

/// What to do after one frame.
pub enum Outcome {
    /// Send this and read the next frame.
    Continue(Frame),
    /// Authenticated: send `reply`, then serve requests as `principal`.
    Authenticated {
        reply: Frame,
        principal: Principal,
        session: SaslSession,
    },
    /// Failed: send `reply` if any (after the failed-authentication delay when `delayed`),
    /// then close; `why` is for the broker's log (no secret in it).
    Failed {
        reply: Option<Frame>,
        delayed: bool,
        why: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// ApiVersions or SaslHandshake may come (Kafka's INITIAL_REQUEST and
    /// HANDSHAKE_OR_VERSIONS_REQUEST).
    HandshakeOrVersions,
    /// After ApiVersions: SaslHandshake must come.
    Handshake,
    /// The mechanism's tokens.
    Authenticate,
    /// A re-authentication asked for another mechanism: the next frame fails it.
    ReauthBadMechanism,
}

impl State {
    fn kafka_name(self) -> &'static str {
        match self {
            State::HandshakeOrVersions => "HANDSHAKE_OR_VERSIONS_REQUEST",
            State::Handshake => "HANDSHAKE_REQUEST",
            State::Authenticate => "AUTHENTICATE",
            State::ReauthBadMechanism => "REAUTH_BAD_MECHANISM",
        }
    }
}

enum Server {
    Plain,
    Scram(ScramServer),
    OAuthBearer(OAuthBearerServer),
}

/// What a re-authentication must keep.
struct Previous {
    mechanism: &'static str,
    principal: Principal,
}

pub struct Authenticator {
    settings: Arc<SaslSettings>,
    state: State,
    /// SaslHandshake v1+: tokens come in SaslAuthenticate requests (else raw frames).
    headers: bool,
    mechanism: Option<Mechanism>,
    server: Option<Server>,
    previous: Option<Previous>,
    bad_mechanism: Option<String>,
    /// Set by the first SaslAuthenticate of v1 or above (KIP-368's client support).
    client_supports_reauthentication: bool,
    /// When the exchange must be done by.
    pub deadline: Instant,
}

impl Authenticator {
    /// A new connection's authenticator; it must authenticate within `timeout`.
    pub fn new(settings: Arc<SaslSettings>, timeout: Duration) -> Authenticator {
        Authenticator {
            settings,
            state: State::HandshakeOrVersions,
            headers: false,
            mechanism: None,
            server: None,
            previous: None,
            bad_mechanism: None,
            client_supports_reauthentication: false,
            deadline: Instant::now() + timeout,
        }
    }

    /// A re-authentication of a connection authenticated as `principal` with
    /// `mechanism`; its first frame is the SaslHandshake that began it.
    pub fn reauthenticate(
        settings: Arc<SaslSettings>,
        timeout: Duration,
        mechanism: &'static str,
        principal: Principal,
    ) -> Authenticator {
        let mut a = Authenticator::new(settings, timeout);
        a.state = State::Handshake;
        a.previous = Some(Previous {
            mechanism,
            principal,
        });
        a
    }

    /// The largest frame to read next.
    pub fn max_receive_size(&self) -> usize {
        self.settings.max_receive_size
    }

    /// The delay before a failure's answer is sent and the connection closed.
    pub fn failure_delay(&self) -> Duration {
        self.settings.failed_authentication_delay
    }

    fn during(&self) -> &'static str {
        match self.previous {
            Some(_) => "re-authentication",
            None => "authentication",
        }
    }

    /// Takes one frame (the bytes after its size).
    pub fn receive(&mut self, frame: Bytes, broker: &dyn Credentials) -> Outcome {
        match self.state {
            State::HandshakeOrVersions | State::Handshake => self.kafka_request(frame, broker),
            State::ReauthBadMechanism => Outcome::Failed {
                reply: None,
                delayed: true,
                why: self.bad_mechanism.take().unwrap_or_default(),
            },
            State::Authenticate if self.headers => self.authenticate_request(frame, broker),
            State::Authenticate => self.raw_token(frame, broker),
        }
    }

    /// ApiVersions or SaslHandshake.
    fn kafka_request(&mut self, frame: Bytes, broker: &dyn Credentials) -> Outcome {
        let close = |why: String| Outcome::Failed {
            reply: None,
            delayed: false,
            why,
        };
        let initial = self.state == State::HandshakeOrVersions && self.previous.is_none();
        let not_kafka = || {
            "Invalid request, potential reasons: kafka client configured with the wrong security protocol, it does not support KIP-43 or it is not a kafka client.".to_string()
        };
        let Ok((key, version, correlation_id)) = peek_header(&frame) else {
            return close(not_kafka());
        };
        let api_key = match ApiKey::try_from(key) {
            Ok(k @ (ApiKey::ApiVersions | ApiKey::SaslHandshake)) => k,
            Ok(other) => {
                return close(format!(
                    "Unexpected Kafka request of type {other:?} during SASL handshake."
                ))
            }
            Err(_) if initial => return close(not_kafka()),
            Err(_) => return close(format!("unknown api key {key} during SASL handshake")),
        };
        if api_key == ApiKey::ApiVersions {
            if self.state != State::HandshakeOrVersions || self.previous.is_some() {
                return close(format!(
                    "Unexpected ApiVersions request received during SASL authentication state {}",
                    self.state.kafka_name()
                ));
            }
            let body = ResponseKind::ApiVersions(api_versions::response(0, broker.mode()));
            if crate::router::lookup_in(api_key, version, broker.mode()).is_none() {
                // A newer client: v0 with UNSUPPORTED_VERSION and our ranges (KIP-511); it
                // retries in a version we speak, still before the handshake.
                let body = ResponseKind::ApiVersions(api_versions::response(
                    ResponseError::UnsupportedVersion.code(),
                    broker.mode(),
                ));
                return reply(api_key, 0, correlation_id, &body)
                    .map_or_else(close, Outcome::Continue);
            }
            if let Err(e) = decode_request_within(frame, self.settings.max_receive_size) {
                return close(e.to_string());
            }
            self.state = State::Handshake;
            return reply(api_key, version, correlation_id, &body)
                .map_or_else(close, Outcome::Continue);
        }
        if !(0..=1).contains(&version) {
            return close(format!("SaslHandshake v{version} is not supported"));
        }
        let request = match decode_request_within(frame, self.settings.max_receive_size) {
            Ok(r) => r,
            Err(e) => return close(e.to_string()),
        };
        let RequestKind::SaslHandshake(handshake) = request.body else {
            return close("SaslHandshake decoded as another request".into());
        };
        self.headers = version >= 1;
        let names: Vec<StrBytes> = self
            .settings
            .enabled_names()
            .into_iter()
            .map(StrBytes::from_static_str)
            .collect();
        let asked = handshake.mechanism.as_str();
        let Some(mechanism) =
            Mechanism::from_name(asked).filter(|m| self.settings.enabled.contains(m))
        else {
            let body = ResponseKind::SaslHandshake(
                SaslHandshakeResponse::default()
                    .with_error_code(ResponseError::UnsupportedSaslMechanism.code())
                    .with_mechanisms(names),
            );
            return Outcome::Failed {
                reply: reply(api_key, version, correlation_id, &body).ok(),
                delayed: true,
                why: format!("Unsupported SASL mechanism {}", printable(asked)),
            };
        };
        let body = ResponseKind::SaslHandshake(
            SaslHandshakeResponse::default()
                .with_error_code(0)
                .with_mechanisms(names),
        );
        let answer = match reply(api_key, version, correlation_id, &body) {
            Ok(a) => a,
            Err(why) => return close(why),
        };
        if let Some(previous) = &self.previous {
            if previous.mechanism != mechanism.name() {
                self.bad_mechanism = Some(format!(
                    "SASL mechanism '{}' requested by client is not supported for re-authentication of mechanism '{}'",
                    mechanism.name(),
                    previous.mechanism
                ));
                self.state = State::ReauthBadMechanism;
                return Outcome::Continue(answer);
            }
        }
        self.mechanism = Some(mechanism);
        self.server = Some(match mechanism {
            Mechanism::Plain => Server::Plain,
            Mechanism::Scram(m) => Server::Scram(ScramServer::new(m)),
            Mechanism::OAuthBearer => match &self.settings.oauthbearer {
                Some(validator) => Server::OAuthBearer(OAuthBearerServer::new(validator.clone())),
                None => return close("OAUTHBEARER enabled without its options".into()),
            },
        });
        self.state = State::Authenticate;
        Outcome::Continue(answer)
    }

    /// The mechanism's answer to one client token.
    fn evaluate(&mut self, token: &[u8], broker: &dyn Credentials) -> Result<Step, SaslFailure> {
        let Some(mechanism) = self.mechanism else {
            return Err(SaslFailure::new(
                "Authentication failed",
                "no mechanism chosen",
            ));
        };
        let users = self.settings.plain.as_ref();
        match self.server.as_mut() {
            Some(Server::Plain) => match users {
                Some(users) => plain::authenticate(users, token),
                None => Err(SaslFailure::new(
                    "Authentication failed",
                    "PLAIN has no users",
                )),
            },
            Some(Server::Scram(server)) => {
                let Mechanism::Scram(m) = mechanism else {
                    return Err(SaslFailure::new("Authentication failed", "not SCRAM"));
                };
                server.step(token, &|user: &str| broker.scram(m, user))
            }
            Some(Server::OAuthBearer(server)) => server.step(token, now_ms()),
            None => Err(SaslFailure::new(
                "Authentication failed",
                "no mechanism chosen",
            )),
        }
    }

    /// A finished exchange as `name`: the session it opens, or why not (a
    /// re-authentication that would change the principal).
    fn finish(&self, name: String) -> Result<(Principal, SaslSession, i64), SaslFailure> {
        let principal = Principal::user(name);
        if let Some(previous) = &self.previous {
            if previous.principal != principal {
                let message = format!(
                    "Cannot change principals during re-authentication from {}.{}: {}.{}",
                    previous.principal.principal_type,
                    previous.principal.name,
                    principal.principal_type,
                    principal.name
                );
                return Err(SaslFailure::new(message.clone(), message));
            }
        }
        let mechanism = self.mechanism.map_or("", Mechanism::name);
        let max_reauth = self
            .mechanism
            .and_then(|m| self.settings.max_reauth.get(&m).copied());
        let credential_expiry_ms = match &self.server {
            Some(Server::OAuthBearer(s)) => s.expires_at_ms(),
            _ => None,
        };
        // Kafka's calcCompletionTimesAndReturnSessionLifetimeMs.
        let lifetime_ms: Option<i64> = match (credential_expiry_ms, max_reauth) {
            (None, None) => None,
            (None, Some(max)) => Some(max.as_millis() as i64),
            (Some(exp), None) => Some((exp - now_ms()).max(0)),
            (Some(exp), Some(max)) => Some((exp - now_ms()).min(max.as_millis() as i64).max(0)),
        };
        let now = Instant::now();
        let session = SaslSession {
            mechanism,
            expires_at: lifetime_ms.map(|ms| now + Duration::from_millis(ms as u64)),
            reauthenticated_at: self.previous.as_ref().map(|_| now),
        };
        Ok((principal, session, lifetime_ms.unwrap_or(0)))
    }

    /// A failure's client message, said of re-authentication where it is one.
    fn client_message(&self, failure: &SaslFailure) -> String {
        match self.previous {
            Some(_) => failure
                .client
                .replace("during authentication", "during re-authentication"),
            None => failure.client.clone(),
        }
    }

    /// SaslHandshake v1+: a SaslAuthenticate request carries the token.
    fn authenticate_request(&mut self, frame: Bytes, broker: &dyn Credentials) -> Outcome {
        let close = |why: String| Outcome::Failed {
            reply: None,
            delayed: false,
            why,
        };
        let Ok((key, version, correlation_id)) = peek_header(&frame) else {
            return close(
                "a frame too short for a request header during SASL authentication".into(),
            );
        };
        let api_key = ApiKey::try_from(key).ok();
        if api_key != Some(ApiKey::SaslAuthenticate) {
            let why = match api_key {
                Some(k) => {
                    format!("Unexpected Kafka request of type {k:?} during SASL authentication.")
                }
                None => format!("unknown api key {key} during SASL authentication"),
            };
            return Outcome::Failed {
                reply: api_key.and_then(|k| illegal_state(k, version, correlation_id)),
                delayed: true,
                why,
            };
        }
        if !(0..=2).contains(&version) {
            return close(format!(
                "Version {version} is not supported for apiKey SASL_AUTHENTICATE"
            ));
        }
        let request = match decode_request_within(frame, self.settings.max_receive_size) {
            Ok(r) => r,
            Err(e) => return close(e.to_string()),
        };
        let RequestKind::SaslAuthenticate(req) = request.body else {
            return close("SaslAuthenticate decoded as another request".into());
        };
        self.client_supports_reauthentication |= version > 0;
        let answer = |body: SaslAuthenticateResponse| {
            reply(
                ApiKey::SaslAuthenticate,
                version,
                correlation_id,
                &ResponseKind::SaslAuthenticate(body),
            )
        };
        let failed = |this: &Self, f: SaslFailure| {
            let body = SaslAuthenticateResponse::default()
                .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                .with_error_message(Some(StrBytes::from_string(this.client_message(&f))));
            Outcome::Failed {
                reply: answer(body).ok(),
                delayed: true,
                why: format!(
                    "Failed {}: {} ({})",
                    this.during(),
                    this.client_message(&f),
                    f.detail
                ),
            }
        };
        match self.evaluate(&req.auth_bytes, broker) {
            Ok(Step::Challenge(bytes)) => {
                let body = SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(bytes));
                answer(body).map_or_else(close, Outcome::Continue)
            }
            Ok(Step::Done {
                principal,
                final_message,
            }) => match self.finish(principal) {
                Ok((principal, session, lifetime_ms)) => {
                    let body = SaslAuthenticateResponse::default()
                        .with_auth_bytes(Bytes::from(final_message))
                        .with_session_lifetime_ms(lifetime_ms);
                    match answer(body) {
                        Ok(reply) => Outcome::Authenticated {
                            reply,
                            principal,
                            session,
                        },
                        Err(why) => close(why),
                    }
                }
                Err(f) => failed(self, f),
            },
            Err(f) => failed(self, f),
        }
    }

    /// SaslHandshake v0: the frame is the token itself, and so is the answer.
    fn raw_token(&mut self, frame: Bytes, broker: &dyn Credentials) -> Outcome {
        let failed = |this: &Self, f: SaslFailure| Outcome::Failed {
            reply: None,
            delayed: true,
            why: format!(
                "Failed {}: {} ({})",
                this.during(),
                this.client_message(&f),
                f.detail
            ),
        };
        match self.evaluate(&frame, broker) {
            Ok(Step::Challenge(bytes)) => Outcome::Continue(raw(bytes)),
            Ok(Step::Done {
                principal,
                final_message,
            }) => match self.finish(principal) {
                Ok((principal, session, _)) => Outcome::Authenticated {
                    reply: raw(final_message),
                    principal,
                    session,
                },
                Err(f) => failed(self, f),
            },
            Err(f) => failed(self, f),
        }
    }
}

/// A response frame.
fn reply(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &ResponseKind,
) -> Result<Frame, String> {
    encode_response(api_key, version, correlation_id, body, Vec::new())
        .map_err(|e| format!("cannot encode {api_key:?} v{version} response: {e}"))
}

/// A raw SASL token, size-prefixed (the v0 exchange; an empty token is still sent, as
/// Kafka sends every token its mechanism returns).
fn raw(token: Vec<u8>) -> Frame {
    let mut out = Vec::with_capacity(4 + token.len());
    out.extend_from_slice(&(token.len() as u32).to_be_bytes());
    out.extend_from_slice(&token);
    vec![Chunk::Bytes(Bytes::from(out))]
}

/// ILLEGAL_SASL_STATE for a request sent after the handshake instead of SaslAuthenticate,
/// where the answer is simple to give (a repeated handshake, ApiVersions); for any other
/// API the connection closes without one.
fn illegal_state(api_key: ApiKey, version: i16, correlation_id: i32) -> Option<Frame> {
    let code = ResponseError::IllegalSaslState.code();
    let body = match api_key {
        ApiKey::SaslHandshake if (0..=1).contains(&version) => {
            ResponseKind::SaslHandshake(SaslHandshakeResponse::default().with_error_code(code))
        }
        ApiKey::ApiVersions if (0..=4).contains(&version) => {
            ResponseKind::ApiVersions(ApiVersionsResponse::default().with_error_code(code))
        }
        _ => return None,
    };
    reply(api_key, version, correlation_id, &body).ok()
}

/// A client-sent string for a log line: control characters escaped, at most 64 chars.
fn printable(s: &str) -> String {
    s.chars().take(64).flat_map(char::escape_debug).collect()
}

impl Credentials for crate::broker::Broker {
    fn scram(&self, mechanism: ScramMechanism, user: &str) -> Option<ScramCredential> {
        self.controller.scram_credential(mechanism, user)
    }

    fn mode(&self) -> crate::router::Mode {
        crate::broker::Broker::mode(self)
    }
}
