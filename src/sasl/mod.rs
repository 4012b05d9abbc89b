//! SASL as Kafka's brokers speak it, as pure state machines with no I/O: each mechanism
//! takes the client's messages (the bytes of SaslAuthenticate requests) and answers the
//! bytes to send back, a principal once authenticated, or a failure whose client-facing
//! message never says which part of the credentials was wrong.
//!
//! ```text
//! settings     a listener's SASL keys as Kafka resolves them (mechanisms, JAAS per mechanism,
//!              connections.max.reauth.ms, sasl.server.max.receive.size, the failure delay),
//!              and the broker's own credentials on the inter-broker listener
//! jaas         Kafka's JAAS config grammar (sasl.jaas.config): modules, flags, options
//! plain        PLAIN (RFC 4616) against `user_<name>="<password>"` JAAS options
//! scram        SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, 7677) and Kafka's credential string
//! oauthbearer  OAUTHBEARER (RFC 7628) with Kafka's unsecured JWS validator
//! jwks         Kafka's secured OAUTHBEARER validator: signed JWTs against a JWKS file
//! client       the client side of PLAIN and SCRAM, for the broker's own connections
//! ```
//!
//! A SASL listener's connection runs them through `network::authenticator` (Kafka's
//! `SaslServerAuthenticator`) before its first request reaches the pipeline; the broker's
//! outbound connections through `client::sasl`. SCRAM credentials come from the
//! controller (`UserScramCredentialRecord`s, or `/config/users` in ZooKeeper mode).

pub mod client;
pub mod jaas;
pub mod jwks;
mod jwks_endpoint;
pub mod oauthbearer;
pub mod plain;
pub mod scram;
pub mod scram_spec;
pub mod settings;

/// Why an exchange failed. `client` is what the client may be told (Kafka's
/// SaslAuthenticate error message); `detail` is for the broker's log only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslFailure {
    pub client: String,
    pub detail: String,
}

impl SaslFailure {
    pub fn new(client: impl Into<String>, detail: impl Into<String>) -> SaslFailure {
        SaslFailure {
            client: client.into(),
            detail: detail.into(),
        }
    }
}

/// What a mechanism answers to one client message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send these bytes and wait for the client's next message.
    Challenge(Vec<u8>),
    /// Authenticated as `principal` (a `User` name); send `final_message` (may be empty).
    Done {
        principal: String,
        final_message: Vec<u8>,
    },
}
