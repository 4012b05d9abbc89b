//! rustls contexts from a listener's settings: the server side of an SSL listener, and the
//! client side the broker's own connections use toward the inter-broker listener.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, SupportedProtocolVersion};
use rustls_pki_types::CertificateDer;

use super::keystore::{self, Identity};
use super::principal::PrincipalMapper;
use super::settings::{ClientAuth, SslSettings, TlsVersion};

/// Why a listener's TLS cannot be set up: names the listener and the store, never a secret.
#[derive(Debug, thiserror::Error)]
#[error("listener {listener}: {why}")]
pub struct TlsError {
    pub listener: String,
    pub why: String,
}

impl TlsError {
    fn new(settings: &SslSettings, why: impl std::fmt::Display) -> TlsError {
        TlsError {
            listener: settings.listener.clone(),
            why: why.to_string(),
        }
    }
}

/// What an SSL listener's connections share: the server config their handshakes run
/// with and how a client certificate becomes a principal.
pub struct ListenerTls {
    pub config: Arc<rustls::ServerConfig>,
    pub mapper: PrincipalMapper,
    pub client_auth: ClientAuth,
}

impl ListenerTls {
    /// Reads the listener's keystore and truststore and builds its server context.
    pub fn build(settings: &SslSettings) -> Result<ListenerTls, TlsError> {
        let err = |why: String| TlsError::new(settings, why);
        let keystore = settings.keystore.as_ref().ok_or_else(|| {
            err("an SSL listener needs a keystore (ssl.keystore.location, or ssl.keystore.key with ssl.keystore.certificate.chain)".into())
        })?;
        let Identity { chain, key } =
            keystore::load_keystore(keystore).map_err(|e| err(e.to_string()))?;
        let provider = provider(settings)?;
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions(settings))
            .map_err(|e| err(format!("ssl.enabled.protocols: {e}")))?;
        let builder = match settings.client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            auth => {
                let roots = roots(settings)?;
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
                let verifier = match auth {
                    ClientAuth::Requested => verifier.allow_unauthenticated(),
                    _ => verifier,
                };
                let verifier = verifier
                    .build()
                    .map_err(|e| err(format!("the truststore: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|e| err(format!("the keystore's key and certificate: {e}")))?;
        // Kafka negotiates no application protocol; a client that offers one still connects.
        config.alpn_protocols.clear();
        let mapper = PrincipalMapper::parse(&settings.principal_mapping_rules)
            .map_err(|e| err(format!("ssl.principal.mapping.rules: {e}")))?;
        Ok(ListenerTls {
            config: Arc::new(config),
            mapper,
            client_auth: settings.client_auth,
        })
    }
}

/// ring's provider with the suites `ssl.cipher.suites` allows.
pub(super) fn provider(settings: &SslSettings) -> Result<Arc<CryptoProvider>, TlsError> {
    let suites = super::ciphers::resolve(&settings.cipher_suites, &settings.enabled_protocols)
        .map_err(|why| TlsError::new(settings, format!("ssl.cipher.suites: {why}")))?;
    Ok(Arc::new(CryptoProvider {
        cipher_suites: suites,
        ..rustls::crypto::ring::default_provider()
    }))
}

pub(super) fn versions(settings: &SslSettings) -> Vec<&'static SupportedProtocolVersion> {
    settings
        .enabled_protocols
        .iter()
        .map(|v| match v {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        })
        .collect()
}

/// The truststore's certificates as rustls's roots.
pub(super) fn roots(settings: &SslSettings) -> Result<Arc<RootCertStore>, TlsError> {
    let store = settings.truststore.as_ref().ok_or_else(|| {
        TlsError::new(
            settings,
            "no truststore (ssl.truststore.location or ssl.truststore.certificates) to verify peers with",
        )
    })?;
    let certs: Vec<CertificateDer<'static>> =
        keystore::load_truststore(store).map_err(|e| TlsError::new(settings, e))?;
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| TlsError::new(settings, format!("a truststore certificate: {e}")))?;
    }
    Ok(Arc::new(roots))
}
