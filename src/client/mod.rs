//! skua's outbound Kafka client: what a broker needs to talk to other brokers (replica
//! fetchers, controller → broker requests, transaction markers), and what the tests use
//! to talk to skua.
//!
//! `codec` frames requests and reads responses with the kafka-protocol crate's client
//! side; `connection` pipelines requests on one TCP connection and matches responses by
//! correlation id, each with its own timeout; `client` keeps one connection to a broker,
//! reconnecting with exponential backoff and negotiating versions with ApiVersions on
//! every new connection.

pub mod codec;
pub mod connection;
pub mod probe;
pub mod reconnecting;
pub mod sasl;

pub use connection::Connection;
pub use reconnecting::{Client, ClientConfig};

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connect to {addr}: {source}")]
    Connect {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error("connection closed: {0}")]
    Disconnected(String),
    /// `detail` says what the connection saw meanwhile: whether the broker sent anything
    /// at all tells a broker that never answered from an answer the client did not read.
    #[error("no response within {after:?} ({detail})")]
    Timeout {
        after: std::time::Duration,
        detail: String,
    },
    #[error("undecodable response: {0}")]
    Decode(String),
    #[error("{0}")]
    Encode(String),
    #[error("the broker supports no version of api {api_key} in {min}..={max}")]
    UnsupportedVersion { api_key: i16, min: i16, max: i16 },
    #[error("ApiVersions answered error {0}")]
    ApiVersions(i16),
}
