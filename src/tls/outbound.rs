//! The client side of TLS for the broker's own connections (replica fetchers, the
//! controller's channel, AlterPartition, controlled shutdown, transaction markers): the
//! inter-broker listener's settings, its keystore as the client certificate (for a peer
//! listener with `ssl.client.auth`), its truststore to verify the peer, and with
//! `ssl.endpoint.identification.algorithm=https` the peer's certificate checked against
//! the host connected to.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::net::TcpStream;

use super::context::{provider, roots, versions, TlsError};
use super::keystore;
use super::settings::SslSettings;

/// A broker's outbound TLS context; cheap to clone. Clones share one slot, so a context
/// reloaded with [`OutboundTls::reload_from`] (the inter-broker listener's keystore altered
/// at runtime) is what every client's next connection uses.
#[derive(Clone)]
pub struct OutboundTls {
    connector: Arc<parking_lot::RwLock<tokio_rustls::TlsConnector>>,
}

impl fmt::Debug for OutboundTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OutboundTls")
    }
}

impl OutboundTls {
    pub fn build(settings: &SslSettings) -> Result<OutboundTls, TlsError> {
        let err = |why: String| TlsError {
            listener: settings.listener.clone(),
            why,
        };
        let provider = provider(settings)?;
        let roots = roots(settings)?;
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| err(format!("the truststore: {e}")))?;
        let verifier = Arc::new(PeerVerifier {
            inner: webpki,
            verify_hostname: settings.verify_hostname,
        });
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions(settings))
            .map_err(|e| err(format!("ssl.enabled.protocols: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match &settings.keystore {
            Some(store) => {
                let id = keystore::load_keystore(store).map_err(|e| err(e.to_string()))?;
                builder
                    .with_client_auth_cert(id.chain, id.key)
                    .map_err(|e| err(format!("the keystore's key and certificate: {e}")))?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(OutboundTls {
            connector: Arc::new(parking_lot::RwLock::new(tokio_rustls::TlsConnector::from(
                Arc::new(config),
            ))),
        })
    }

    /// Puts `fresh`'s context in this one's slot: connections made from now on, by any
    /// clone, use it; open ones keep their session.
    pub fn reload_from(&self, fresh: &OutboundTls) {
        let next = fresh.connector.read().clone();
        *self.connector.write() = next;
    }

    /// Runs the client handshake on `tcp` toward `host` (a name or an IP address).
    pub async fn connect(
        &self,
        host: &str,
        tcp: TcpStream,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let name = ServerName::try_from(host.to_string()).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{host:?} is not a host name: {e}"),
            )
        })?;
        let connector = self.connector.read().clone();
        connector.connect(name, tcp).await
    }
}

/// webpki's chain verification, with the name check dropped when
/// `ssl.endpoint.identification.algorithm` is empty (Kafka then verifies the chain only).
#[derive(Debug)]
struct PeerVerifier {
    inner: Arc<WebPkiServerVerifier>,
    verify_hostname: bool,
}

impl ServerCertVerifier for PeerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.verify_hostname => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}
