//! A JWKS kept from an `https:` (or `http:`) `sasl.oauthbearer.jwks.endpoint.url`, as
//! Kafka's `RefreshingHttpsJwks` keeps it:
//!
//! - fetched once when the listener is configured; a provider that cannot be reached then
//!   stops startup, naming the URL and why (Kafka's validator fails its `init` so);
//! - fetched again every `sasl.oauthbearer.jwks.endpoint.refresh.ms` (an hour) by a thread
//!   of its own, each failed fetch retried with a backoff from
//!   `sasl.oauthbearer.jwks.endpoint.retry.backoff.ms` doubling up to
//!   `…retry.backoff.max.ms` in all; a refresh that fails keeps the keys in force;
//! - fetched at once when a token names a key id the JWKS lacks (a provider rotating
//!   keys), at most once a minute per key id, for at most 16 key ids of at most 1,000
//!   characters, so tokens with made-up key ids cannot make the broker hammer the
//!   provider.
//!
//! The TLS trust is the JAAS options' `ssl.truststore.*` when they name one (as Kafka's
//! `JaasOptionsUtils` builds the fetcher's socket factory from them), otherwise the
//! Mozilla roots; the provider's host name is always verified. A body over 1 MiB is
//! refused. Token validation never waits on the network: it reads the keys in force.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::jwks::{parse_jwks, VerificationKey, MAX_JWKS_BYTES};
use crate::tls::keystore::load_truststore;
use crate::tls::settings::TruststoreSettings;

/// Key ids remembered as missing, and for how long a missing one is not fetched again.
const MISSING_KEY_IDS: usize = 16;
const MISSING_KEY_ID_IN_FLIGHT: Duration = Duration::from_secs(60);
const MAX_KEY_ID_LEN: usize = 1000;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The endpoint and its `sasl.oauthbearer.jwks.endpoint.*` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointOptions {
    pub url: String,
    pub refresh: Duration,
    pub retry_backoff: Duration,
    pub retry_backoff_max: Duration,
    /// The JAAS options' `ssl.truststore.*`, if they name a truststore.
    pub truststore: Option<TruststoreSettings>,
}

/// The keys of one endpoint, refreshed in the background while this lives.
pub struct RefreshingJwks {
    shared: Arc<Shared>,
}

struct Shared {
    options: EndpointOptions,
    agent: ureq::Agent,
    keys: Mutex<Arc<Vec<VerificationKey>>>,
    wake: Mutex<Wake>,
    woken: Condvar,
    /// Key ids found missing, and when each may be fetched for again.
    missing: Mutex<VecDeque<(String, Instant)>>,
}

#[derive(Default)]
struct Wake {
    expedite: bool,
    stop: bool,
}

impl RefreshingJwks {
    /// Fetches the JWKS now (an error names the URL and why) and starts the refresh thread.
    pub fn start(options: EndpointOptions) -> Result<RefreshingJwks, String> {
        let agent = agent(&options)?;
        let keys = fetch(&agent, &options.url)?;
        if keys.is_empty() {
            tracing::warn!(url = %options.url, "the JWKS holds no signature key skua can use: every OAUTHBEARER token will be refused until it does");
        }
        let shared = Arc::new(Shared {
            options,
            agent,
            keys: Mutex::new(Arc::new(keys)),
            wake: Mutex::new(Wake::default()),
            woken: Condvar::new(),
            missing: Mutex::new(VecDeque::new()),
        });
        let refresher = shared.clone();
        std::thread::Builder::new()
            .name("jwks-refresh".into())
            .spawn(move || refresher.run())
            .map_err(|e| format!("the JWKS refresh thread: {e}"))?;
        Ok(RefreshingJwks { shared })
    }

    /// The keys in force.
    pub(super) fn keys(&self) -> Arc<Vec<VerificationKey>> {
        self.shared.keys.lock().clone()
    }

    /// A token named `kid`, which the keys in force lack: fetch the JWKS now, unless
    /// this key id was looked for within the last minute.
    pub fn expedite(&self, kid: &str) {
        if kid.len() > MAX_KEY_ID_LEN {
            return;
        }
        let now = Instant::now();
        {
            let mut missing = self.shared.missing.lock();
            if let Some(i) = missing.iter().position(|(k, _)| k == kid) {
                if missing[i].1 > now {
                    return;
                }
                missing.remove(i);
            }
            if missing.len() == MISSING_KEY_IDS {
                missing.pop_front();
            }
            missing.push_back((kid.to_string(), now + MISSING_KEY_ID_IN_FLIGHT));
        }
        self.shared.wake.lock().expedite = true;
        self.shared.woken.notify_one();
    }
}

impl Drop for RefreshingJwks {
    fn drop(&mut self) {
        self.shared.wake.lock().stop = true;
        self.shared.woken.notify_one();
    }
}

impl Shared {
    fn run(&self) {
        let mut next = Instant::now() + self.options.refresh;
        loop {
            {
                let mut wake = self.wake.lock();
                while !wake.stop && !wake.expedite && Instant::now() < next {
                    self.woken.wait_until(&mut wake, next);
                }
                if wake.stop {
                    return;
                }
                wake.expedite = false;
            }
            self.refresh();
            next = Instant::now() + self.options.refresh;
        }
    }

    /// One refresh, retried with Kafka's backoff; a failure keeps the keys in force.
    fn refresh(&self) {
        let started = Instant::now();
        let mut backoff = self.options.retry_backoff;
        let keys = loop {
            match fetch(&self.agent, &self.options.url) {
                Ok(keys) => break keys,
                Err(why) => {
                    let left = self
                        .options
                        .retry_backoff_max
                        .saturating_sub(started.elapsed());
                    if left.is_zero() || self.wake.lock().stop {
                        tracing::warn!(
                            "JWKS not refreshed, the keys fetched before stay in force: {why}"
                        );
                        return;
                    }
                    std::thread::sleep(backoff.min(left));
                    backoff = backoff.saturating_mul(2);
                }
            }
        };
        tracing::info!(url = %self.options.url, keys = keys.len(), "JWKS refreshed");
        self.missing
            .lock()
            .retain(|(kid, _)| !keys.iter().any(|k| k.kid.as_deref() == Some(kid.as_str())));
        *self.keys.lock() = Arc::new(keys);
    }
}

/// The HTTP agent: the configured truststore, or the Mozilla roots.
fn agent(options: &EndpointOptions) -> Result<ureq::Agent, String> {
    let builder = ureq::AgentBuilder::new()
        .timeout_connect(CONNECT_TIMEOUT)
        .timeout(REQUEST_TIMEOUT)
        .user_agent(concat!("skua/", env!("CARGO_PKG_VERSION")));
    let Some(store) = &options.truststore else {
        return Ok(builder.build());
    };
    let certs = load_truststore(store).map_err(|e| format!("the JAAS options' truststore: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| format!("the JAAS options' truststore: {e}"))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(builder.tls_config(Arc::new(config)).build())
}

/// One GET of the JWKS: its signature keys, or why not (naming the URL).
fn fetch(agent: &ureq::Agent, url: &str) -> Result<Vec<VerificationKey>, String> {
    let response = agent
        .get(url)
        .set("Accept", "application/json")
        .call()
        .map_err(|e| format!("{url}: {e}"))?;
    let mut body = String::new();
    response
        .into_reader()
        .take(MAX_JWKS_BYTES + 1)
        .read_to_string(&mut body)
        .map_err(|e| format!("{url}: {e}"))?;
    if body.len() as u64 > MAX_JWKS_BYTES {
        return Err(format!("{url}: a JWKS over {MAX_JWKS_BYTES} bytes"));
    }
    parse_jwks(&body).map_err(|e| format!("{url}: {e}"))
}
