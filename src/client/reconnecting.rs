//! A client for one broker: a connection made when needed and again after it breaks,
//! with exponential backoff between failed attempts (Kafka's `reconnect.backoff.ms` and
//! `reconnect.backoff.max.ms`), and the broker's API versions learnt with ApiVersions on
//! each new connection, so callers can pick the highest version both sides speak.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{Request, StrBytes};
use tokio::time::Instant;

use super::{ClientError, Connection};

/// ApiVersions' UNSUPPORTED_VERSION: the broker answers in v0 with its own ranges.
const UNSUPPORTED_VERSION: i16 = 35;

#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub client_id: Option<String>,
    /// `socket.connection.setup.timeout.ms`.
    pub connect_timeout: Duration,
    /// `request.timeout.ms`: how long one request waits for its response.
    pub request_timeout: Duration,
    /// `reconnect.backoff.ms`: the wait after the first failed connection attempt,
    /// doubling after each further failure up to `reconnect_backoff_max`.
    pub reconnect_backoff: Duration,
    pub reconnect_backoff_max: Duration,
    /// Requests in flight on one connection at most; more wait for a slot.
    pub max_in_flight: usize,
    /// The largest response frame accepted.
    pub max_response_bytes: usize,
    /// TLS toward the broker (its inter-broker listener is SSL); `None`: plain TCP.
    pub tls: Option<crate::tls::OutboundTls>,
    /// SASL toward the broker (its inter-broker listener is SASL_PLAINTEXT or SASL_SSL):
    /// the mechanism and the broker's own credentials; `None`: no SASL.
    pub sasl: Option<crate::sasl::settings::ClientCredentials>,
    /// The host name the broker's certificate is checked against (its advertised host);
    /// `None`: the address connected to.
    pub server_name: Option<String>,
}

impl Default for ClientConfig {
    /// Kafka's client defaults.
    fn default() -> Self {
        ClientConfig {
            client_id: Some("skua".into()),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            reconnect_backoff: Duration::from_millis(50),
            reconnect_backoff_max: Duration::from_secs(1),
            max_in_flight: 100,
            max_response_bytes: super::codec::MAX_FRAME_BYTES,
            tls: None,
            sasl: None,
            server_name: None,
        }
    }
}

/// Per api key, the (min, max) versions the broker handles.
pub type ApiVersions = BTreeMap<i16, (i16, i16)>;

struct State {
    connection: Option<(Arc<Connection>, Arc<ApiVersions>)>,
    failures: u32,
    next_attempt: Option<Instant>,
}

pub struct Client {
    addr: SocketAddr,
    config: ClientConfig,
    /// Connections opened so far.
    opened: AtomicU64,
    state: tokio::sync::Mutex<State>,
}

impl Client {
    pub fn new(addr: SocketAddr, config: ClientConfig) -> Client {
        Client {
            addr,
            config,
            opened: AtomicU64::new(0),
            state: tokio::sync::Mutex::new(State {
                connection: None,
                failures: 0,
                next_attempt: None,
            }),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// How many connections this client has opened: a new value means requests now go on
    /// a new connection.
    pub fn connections_opened(&self) -> u64 {
        self.opened.load(Ordering::Acquire)
    }

    /// Sends `req` at `version` on the current connection, connecting first if there is
    /// none. A connection that broke or timed out is replaced on the next call.
    pub async fn send<R: Request>(
        &self,
        req: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        let (connection, _) = self.connection().await?;
        self.forget_if_broken(&connection, connection.send(req, version).await)
            .await
    }

    /// Sends `req` at the highest version in `min..=max` the broker also handles.
    pub async fn send_negotiated<R: Request>(
        &self,
        req: &R,
        min: i16,
        max: i16,
    ) -> Result<(i16, R::Response), ClientError> {
        let (connection, versions) = self.connection().await?;
        let version = negotiate(&versions, R::KEY, min, max)?;
        let result = connection.send(req, version).await;
        let response = self.forget_if_broken(&connection, result).await?;
        Ok((version, response))
    }

    /// The broker's API versions, as learnt on the current connection.
    pub async fn api_versions(&self) -> Result<Arc<ApiVersions>, ClientError> {
        Ok(self.connection().await?.1)
    }

    async fn forget_if_broken<T>(
        &self,
        connection: &Arc<Connection>,
        result: Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        if connection.closed().is_some() {
            let mut state = self.state.lock().await;
            if state
                .connection
                .as_ref()
                .is_some_and(|(c, _)| Arc::ptr_eq(c, connection))
            {
                state.connection = None;
            }
        }
        result
    }

    /// The live connection, or a new one (after the backoff of earlier failures).
    async fn connection(&self) -> Result<(Arc<Connection>, Arc<ApiVersions>), ClientError> {
        let mut state = self.state.lock().await;
        if let Some((c, v)) = &state.connection {
            if c.closed().is_none() {
                return Ok((c.clone(), v.clone()));
            }
            state.connection = None;
        }
        if let Some(at) = state.next_attempt {
            tokio::time::sleep_until(at).await;
        }
        match self.open().await {
            Ok((connection, versions)) => {
                let pair = (Arc::new(connection), Arc::new(versions));
                state.connection = Some(pair.clone());
                self.opened.fetch_add(1, Ordering::AcqRel);
                state.failures = 0;
                state.next_attempt = None;
                Ok(pair)
            }
            Err(e) => {
                state.failures = state.failures.saturating_add(1);
                let wait = backoff(&self.config, state.failures);
                state.next_attempt = Some(Instant::now() + wait);
                tracing::debug!(addr = %self.addr, error = %e, ?wait, "connection attempt failed");
                Err(e)
            }
        }
    }

    async fn open(&self) -> Result<(Connection, ApiVersions), ClientError> {
        let connection = Connection::connect(self.addr, &self.config).await?;
        let request = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("skua"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let response = match connection.send(&request, 3).await {
            Ok(r) if r.error_code != UNSUPPORTED_VERSION => r,
            // A broker older than ApiVersions v3 (Kafka < 2.4) answers v0 with its ranges.
            Ok(_) | Err(ClientError::Decode(_)) => {
                let connection = Connection::connect(self.addr, &self.config).await?;
                let r = connection.send(&ApiVersionsRequest::default(), 0).await?;
                return Ok((connection, versions(&r)?));
            }
            Err(e) => return Err(e),
        };
        Ok((connection, versions(&response)?))
    }
}

fn versions(response: &ApiVersionsResponse) -> Result<ApiVersions, ClientError> {
    if response.error_code != 0 {
        return Err(ClientError::ApiVersions(response.error_code));
    }
    Ok(response
        .api_keys
        .iter()
        .map(|k| (k.api_key, (k.min_version, k.max_version)))
        .collect())
}

/// The highest version in `min..=max` inside the broker's range for `api_key`.
pub fn negotiate(
    versions: &ApiVersions,
    api_key: i16,
    min: i16,
    max: i16,
) -> Result<i16, ClientError> {
    let unsupported = ClientError::UnsupportedVersion { api_key, min, max };
    let (broker_min, broker_max) = *versions.get(&api_key).ok_or(unsupported)?;
    let version = max.min(broker_max);
    if version < min.max(broker_min) {
        return Err(ClientError::UnsupportedVersion { api_key, min, max });
    }
    Ok(version)
}

/// The wait after the `failures`-th failed attempt in a row: `reconnect_backoff` doubled
/// for each earlier failure, at most `reconnect_backoff_max`.
pub fn backoff(config: &ClientConfig, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    config
        .reconnect_backoff
        .saturating_mul(1 << doublings)
        .min(config.reconnect_backoff_max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_max() {
        let c = ClientConfig::default();
        let waits: Vec<u128> = (1..=7).map(|n| backoff(&c, n).as_millis()).collect();
        assert_eq!(waits, vec![50, 100, 200, 400, 800, 1000, 1000]);
        assert_eq!(backoff(&c, u32::MAX), Duration::from_secs(1));
    }

    #[test]
    fn negotiation_picks_the_highest_common_version() {
        let v: ApiVersions = [(3, (0, 12)), (1, (4, 17))].into_iter().collect();
        assert_eq!(negotiate(&v, 3, 0, 13).unwrap(), 12);
        assert_eq!(negotiate(&v, 1, 0, 11).unwrap(), 11);
        assert!(negotiate(&v, 1, 0, 3).is_err());
        assert!(negotiate(&v, 4, 0, 7).is_err());
    }
}
