//! Who is at the other end of a connection, as far as the broker knows.
//!
//! One per connection, carried into every request's context. On a plaintext listener the
//! principal is `User:ANONYMOUS` (as in Kafka without authentication); on an SSL listener
//! it is the client certificate's mapped DN (`tls::principal`), set before the first
//! request is read. On a SASL listener the connection's authenticator
//! (`network::authenticator`) sets it (`User:<authenticated name>`) with the
//! [`SaslSession`] once the exchange succeeds; until then no request reaches the pipeline.
//! The authorizer reads it from the request context.

use std::borrow::Cow;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::auth::authorizer::Authorizer;
use crate::auth::decisions::Decisions;
use crate::quota::manager::ConnectionQuota;
use crate::quota::QuotaManager;

/// Kafka's security protocols that skua speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name for it, as in `listener.security.protocol.map`.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// From Kafka's name (`listener.security.protocol.map`'s values).
    pub fn from_name(name: &str) -> Option<SecurityProtocol> {
        Some(match name {
            "PLAINTEXT" => SecurityProtocol::Plaintext,
            "SSL" => SecurityProtocol::Ssl,
            "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
            "SASL_SSL" => SecurityProtocol::SaslSsl,
            _ => return None,
        })
    }

    /// Whether connections authenticate with SASL before their first request.
    pub fn is_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }

    /// Whether the bytes go over TLS.
    pub fn is_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }
}

/// Kafka's `KafkaPrincipal`: a type and a name. Borrowed where they are constants (the
/// anonymous principal every plaintext connection has costs no allocation), owned where
/// authentication names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub principal_type: Cow<'static, str>,
    pub name: Cow<'static, str>,
}

impl Principal {
    /// A `User` principal (what every SASL mechanism and the SSL principal builder name).
    pub fn user(name: impl Into<String>) -> Principal {
        Principal {
            principal_type: Cow::Borrowed("User"),
            name: Cow::Owned(name.into()),
        }
    }

    /// The principal of an unauthenticated connection.
    pub fn anonymous() -> Principal {
        Principal {
            principal_type: Cow::Borrowed("User"),
            name: Cow::Borrowed("ANONYMOUS"),
        }
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// A connection's identity: where it came in, how, from whom; and the authorizer its
/// requests are checked by.
#[derive(Clone)]
pub struct Session {
    /// The listener's name (`PLAINTEXT` in `listeners=PLAINTEXT://:9092`), shared by the
    /// listener's connections.
    pub listener: Arc<str>,
    pub security_protocol: SecurityProtocol,
    pub principal: Principal,
    pub peer: SocketAddr,
    /// On a SASL listener, once authenticated: how, and until when.
    pub sasl: Option<SaslSession>,
    /// Unique among this process's connections (Kafka's connection id): what ties a
    /// share session to the connection that opened it.
    pub connection_id: u64,
    /// The broker's authorizer (`None`: allow all), fixed when the connection opens (it is
    /// installed before the broker serves). A request reaches it through its session, so
    /// no request clones a handle every connection's requests would share.
    pub authorizer: Option<Arc<dyn Authorizer>>,
    /// The broker's quota manager, fixed when the connection opens as the authorizer is
    /// (`None`: no quota is ever recorded): reached through the session, so a request
    /// clones no handle every connection shares.
    pub quotas: Option<Arc<dyn QuotaManager>>,
    /// What the connection keeps of the answers its requests share.
    pub held: Held,
}

/// What a connection keeps between its requests so that the common path reads nothing
/// every connection writes: its resolved client quotas, and the authorizer's decisions
/// its requests got. Each is checked against its source's generation before use, so a
/// quota or ACL change reaches open connections at their next request. A clone (the
/// session of a re-authenticated connection, whose principal may differ) starts empty.
#[derive(Clone, Default)]
pub struct Held {
    pub quota: ConnectionQuota,
    pub decisions: Decisions,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("listener", &self.listener)
            .field("security_protocol", &self.security_protocol)
            .field("principal", &self.principal)
            .field("peer", &self.peer)
            .field("sasl", &self.sasl)
            .field("connection_id", &self.connection_id)
            .field("authorizer", &self.authorizer.is_some())
            .field("quotas", &self.quotas.is_some())
            .finish()
    }
}

/// The next connection's id.
static NEXT_CONNECTION_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A SASL connection's authenticated session (Kafka's `SaslServerAuthenticator` state
/// after COMPLETE, with KIP-368's expiry).
#[derive(Clone, Debug)]
pub struct SaslSession {
    /// The mechanism it authenticated with (a re-authentication must use the same).
    pub mechanism: &'static str,
    /// When the session expires: `connections.max.reauth.ms` after authentication, or the
    /// OAUTHBEARER token's expiry if sooner. `None`: never (re-authentication is off).
    pub expires_at: Option<std::time::Instant>,
    /// When the last re-authentication began (Kafka allows one a second at most).
    pub reauthenticated_at: Option<std::time::Instant>,
}

impl SaslSession {
    /// Whether the session has expired by `now`.
    pub fn expired(&self, now: std::time::Instant) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

impl Session {
    /// A new connection's session: anonymous until it authenticates (never, on a
    /// plaintext listener).
    pub fn new(
        listener: impl Into<Arc<str>>,
        security_protocol: SecurityProtocol,
        peer: SocketAddr,
    ) -> Session {
        Session {
            listener: listener.into(),
            security_protocol,
            principal: Principal::anonymous(),
            peer,
            sasl: None,
            connection_id: NEXT_CONNECTION_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            authorizer: None,
            quotas: None,
            held: Held::default(),
        }
    }
}
