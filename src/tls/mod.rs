//! TLS as Kafka configures it: the `ssl.*` keys of a listener (a `listener.name.<l>.ssl.*`
//! key wins over the broker-wide one), the keystores they name, the rustls contexts built
//! from them for the listeners and for the broker's own outbound connections, and the
//! principal a client certificate maps to.
//!
//! ```text
//! settings   the keys resolved for one listener, checked (protocols, ciphers, client auth)
//! keystore   PEM (files or inline), PKCS12; JKS refused with the keytool conversion
//! context    rustls ServerConfig / ClientConfig from the settings and keystores
//! ciphers    Kafka's (Java's) cipher suite names to the suites rustls implements
//! principal  the peer's DN (RFC 2253, as Java prints it) through ssl.principal.mapping.rules
//! outbound   the inter-broker listener's client side: connect, handshake, verify the peer
//! ```
//!
//! The connection's transport over a TLS stream is in `network::tls`.

pub mod ciphers;
pub mod context;
pub mod keystore;
pub mod outbound;
pub mod principal;
pub mod settings;

pub use context::{ListenerTls, TlsError};
pub use outbound::OutboundTls;
pub use settings::{ClientAuth, SslSettings};
