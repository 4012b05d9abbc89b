//! Who is at the other end of a connection, as far as the broker knows.
//!
//! One per connection, carried into every request's context. On a plaintext listener the
//! principal is `User:ANONYMOUS` (as in Kafka without authentication); on an SSL listener
//! it is the client certificate's mapped DN (`tls::principal`), set before the first
//! request is read. SASL will authenticate within a session and set its principal, and
//! the authorizer will read it from the request context.

use std::borrow::Cow;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

/// Kafka's security protocols that skua speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
}

impl SecurityProtocol {
    /// Kafka's name for it, as in `listener.security.protocol.map`.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
        }
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

/// A connection's identity: where it came in, how, from whom.
#[derive(Clone, Debug)]
pub struct Session {
    /// The listener's name (`PLAINTEXT` in `listeners=PLAINTEXT://:9092`), shared by the
    /// listener's connections.
    pub listener: Arc<str>,
    pub security_protocol: SecurityProtocol,
    pub principal: Principal,
    pub peer: SocketAddr,
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
        }
    }
}
