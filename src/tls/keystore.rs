//! Reading keystores and truststores as Kafka's `ssl.keystore.type` / `ssl.truststore.type`
//! name them.
//!
//! - PEM: a file (or the inline `ssl.keystore.key` + `ssl.keystore.certificate.chain`,
//!   `ssl.truststore.certificates`) holding a PKCS#8, PKCS#1 or SEC1 key and certificates.
//!   An encrypted key (`ENCRYPTED PRIVATE KEY`, for `ssl.key.password`) is refused with
//!   the openssl command that decrypts it.
//! - PKCS12: through `p12-keystore` (pure Rust, RustCrypto; the schemes keytool and
//!   `openssl pkcs12` write). The store password decrypts keys and certificates alike.
//! - JKS, Kafka's default type: no maintained Rust crate reads Sun's proprietary key
//!   protection, so a real JKS file (magic `FEEDFEED`) is refused with the `keytool
//!   -importkeystore` command that converts it. A PKCS12 file typed JKS is read, as Java
//!   reads it (`keystore.type.compat`).

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::settings::{KeystoreSettings, Secret, StoreSource, TruststoreSettings};

/// Why a store cannot be used; the message names the store and never its secrets.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// A keystore's one key and its chain, leaf first.
pub struct Identity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Identity({} certificates, key hidden)", self.chain.len())
    }
}

/// The magic number a JKS file starts with.
const JKS_MAGIC: [u8; 4] = [0xFE, 0xED, 0xFE, 0xED];

/// The largest store read: a keystore is a few KiB; a path that names something huge is
/// an error, not an allocation.
const MAX_STORE_BYTES: u64 = 16 * 1024 * 1024;

fn read_file(path: &str, what: &str) -> Result<Vec<u8>, StoreError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| StoreError(format!("cannot read the {what} {path}: {e}")))?;
    if meta.len() > MAX_STORE_BYTES {
        return Err(StoreError(format!(
            "the {what} {path} is {} bytes, more than a store can be ({MAX_STORE_BYTES})",
            meta.len()
        )));
    }
    std::fs::read(path).map_err(|e| StoreError(format!("cannot read the {what} {path}: {e}")))
}

pub fn load_keystore(settings: &KeystoreSettings) -> Result<Identity, StoreError> {
    match &settings.source {
        StoreSource::Inline { key, certs } => {
            let key = key.as_ref().map(|k| pem_lines(&k.0)).unwrap_or_default();
            let chain = pem_certs(
                pem_lines(&certs.0).as_bytes(),
                "ssl.keystore.certificate.chain",
            )?;
            let key = pem_key(
                key.as_bytes(),
                "ssl.keystore.key",
                settings.key_password.as_ref(),
            )?;
            identity(chain, key, "the inline keystore")
        }
        StoreSource::File(path) => {
            let data = read_file(path, "keystore")?;
            match effective_type(&settings.store_type, &data, path, "keystore")? {
                StoreType::Pem => {
                    let chain = pem_certs(&data, path)?;
                    let key = pem_key(&data, path, settings.key_password.as_ref())?;
                    identity(chain, key, path)
                }
                StoreType::Pkcs12 => pkcs12_identity(&data, path, settings.password.as_ref()),
            }
        }
    }
}

pub fn load_truststore(
    settings: &TruststoreSettings,
) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    let certs = match &settings.source {
        StoreSource::Inline { certs, .. } => pem_certs(
            pem_lines(&certs.0).as_bytes(),
            "ssl.truststore.certificates",
        )?,
        StoreSource::File(path) => {
            let data = read_file(path, "truststore")?;
            match effective_type(&settings.store_type, &data, path, "truststore")? {
                StoreType::Pem => pem_certs(&data, path)?,
                StoreType::Pkcs12 => pkcs12_certs(&data, path, settings.password.as_ref())?,
            }
        }
    };
    if certs.is_empty() {
        return Err(StoreError("the truststore holds no certificate".into()));
    }
    Ok(certs)
}

enum StoreType {
    Pem,
    Pkcs12,
}

fn effective_type(
    declared: &str,
    data: &[u8],
    path: &str,
    what: &str,
) -> Result<StoreType, StoreError> {
    match declared {
        "PEM" => Ok(StoreType::Pem),
        "PKCS12" => Ok(StoreType::Pkcs12),
        _ if data.starts_with(&JKS_MAGIC) => Err(StoreError(format!(
            "the {what} {path} is a JKS store, which skua cannot read; convert it to PKCS12 with \
             `keytool -importkeystore -srckeystore {path} -srcstoretype JKS -destkeystore {path}.p12 -deststoretype PKCS12` \
             and set ssl.{what}.location={path}.p12 and ssl.{what}.type=PKCS12"
        ))),
        // Java's JKS type reads PKCS12 files too; a PKCS12 store starts with a DER SEQUENCE.
        _ if data.first() == Some(&0x30) => Ok(StoreType::Pkcs12),
        _ => Err(StoreError(format!(
            "the {what} {path} is typed JKS (Kafka's default ssl.{what}.type) but is neither JKS nor PKCS12; set ssl.{what}.type"
        ))),
    }
}

/// An inline PEM value as a properties file gives it: continuation lines are joined
/// without their line breaks (`-----BEGIN CERTIFICATE----- MIIB... -----END CERTIFICATE-----`),
/// which Kafka's PEM reader accepts. Rewritten with the line breaks PEM parsers expect;
/// text that already has them is kept.
fn pem_lines(text: &str) -> String {
    if text.contains('\n') {
        return text.to_string();
    }
    let mut out = String::new();
    let mut rest = text;
    while let Some(begin) = rest.find("-----BEGIN ") {
        let after = &rest[begin + "-----BEGIN ".len()..];
        let Some(label_end) = after.find("-----") else {
            break;
        };
        let label = &after[..label_end];
        let body_and_rest = &after[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(end) = body_and_rest.find(&end_marker) else {
            break;
        };
        let body: String = body_and_rest[..end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        out.push_str(&format!("-----BEGIN {label}-----\n"));
        for line in body.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str(&end_marker);
        out.push('\n');
        rest = &body_and_rest[end + end_marker.len()..];
    }
    out
}

fn pem_certs(data: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    CertificateDer::pem_slice_iter(data)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| StoreError(format!("cannot read the certificates of {what}: {e}")))
}

fn pem_key(
    data: &[u8],
    what: &str,
    key_password: Option<&Secret>,
) -> Result<PrivateKeyDer<'static>, StoreError> {
    if std::str::from_utf8(data).is_ok_and(|s| s.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----"))
    {
        let with = if key_password.is_some() {
            " (ssl.key.password is set)"
        } else {
            ""
        };
        return Err(StoreError(format!(
            "the private key of {what} is encrypted{with}, which skua cannot decrypt yet; write it unencrypted with \
             `openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pem` and keep the file readable by the broker only"
        )));
    }
    PrivateKeyDer::from_pem_slice(data)
        .map_err(|e| StoreError(format!("cannot read the private key of {what}: {e}")))
}

fn identity(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    what: &str,
) -> Result<Identity, StoreError> {
    if chain.is_empty() {
        return Err(StoreError(format!("{what} holds no certificate")));
    }
    Ok(Identity { chain, key })
}

fn password(p: Option<&Secret>) -> &str {
    p.map_or("", |p| p.0.as_str())
}

/// Opens a PKCS12 store. A keystore links each key to its chain (`Relaxed`); a truststore
/// takes every certificate (`Raw`), with or without the Java-only "trusted" attribute
/// (`openssl pkcs12 -nokeys` writes none, and Java trusts such certificates too).
fn open_pkcs12(
    data: &[u8],
    path: &str,
    pass: Option<&Secret>,
    policy: p12_keystore::Pkcs12ImportPolicy,
) -> Result<p12_keystore::KeyStore, StoreError> {
    p12_keystore::KeyStore::from_pkcs12(data, password(pass), policy).map_err(|e| {
        StoreError(format!(
            "cannot open the PKCS12 store {path} (wrong password, or not PKCS12): {e}"
        ))
    })
}

fn pkcs12_identity(data: &[u8], path: &str, pass: Option<&Secret>) -> Result<Identity, StoreError> {
    let store = open_pkcs12(data, path, pass, p12_keystore::Pkcs12ImportPolicy::Relaxed)?;
    let (_, chain) = store
        .private_key_chain()
        .ok_or_else(|| StoreError(format!("the PKCS12 keystore {path} holds no private key")))?;
    let certs = chain
        .certs()
        .iter()
        .map(|c| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()));
    identity(certs, key, path)
}

fn pkcs12_certs(
    data: &[u8],
    path: &str,
    pass: Option<&Secret>,
) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    let store = open_pkcs12(data, path, pass, p12_keystore::Pkcs12ImportPolicy::Raw)?;
    let mut out = Vec::new();
    for (_, entry) in store.entries() {
        match entry {
            p12_keystore::KeyStoreEntry::Certificate(c) => {
                out.push(CertificateDer::from(c.as_der().to_vec()))
            }
            p12_keystore::KeyStoreEntry::PrivateKeyChain(chain) => out.extend(
                chain
                    .certs()
                    .iter()
                    .map(|c| CertificateDer::from(c.as_der().to_vec())),
            ),
            _ => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_joined_by_properties_continuations_reads_as_pem() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let joined = |pem: &str| pem.lines().collect::<Vec<_>>().join(" ");
        let settings = KeystoreSettings {
            store_type: "PEM".into(),
            source: StoreSource::Inline {
                key: Some(Secret(joined(&key.serialize_pem()))),
                certs: Secret(format!("{} {}", joined(&cert.pem()), joined(&cert.pem()))),
            },
            password: None,
            key_password: None,
        };
        let id = load_keystore(&settings).unwrap();
        assert_eq!(id.chain.len(), 2);
        assert_eq!(id.chain[0].as_ref(), cert.der().as_ref());
        let encrypted = KeystoreSettings {
            source: StoreSource::Inline {
                key: Some(Secret("-----BEGIN ENCRYPTED PRIVATE KEY----- AAAA -----END ENCRYPTED PRIVATE KEY-----".into())),
                certs: Secret(cert.pem()),
            },
            ..settings
        };
        let err = load_keystore(&encrypted).unwrap_err().to_string();
        assert!(err.contains("openssl pkcs8 -topk8 -nocrypt"), "{err}");
    }
}
