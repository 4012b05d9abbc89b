//! Certificates made at test time (rcgen): a CA, broker certificates for `localhost` and
//! 127.0.0.1, client certificates with a chosen DN, written as PEM files; and skua's own
//! outbound client over TLS toward a listener.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair};
use skua::tls::settings::{
    ClientAuth, KeystoreSettings, Secret, SslSettings, StoreSource, TlsVersion, TruststoreSettings,
};
use skua::tls::OutboundTls;

pub struct TestCa {
    cert: rcgen::Certificate,
    key: KeyPair,
    pub dir: PathBuf,
}

/// A key and certificate signed by the CA, as PEM files.
pub struct Issued {
    /// Key then certificate chain: a PEM keystore file as Kafka reads one.
    pub keystore: PathBuf,
    pub cert_pem: String,
    pub key_pem: String,
}

impl TestCa {
    pub fn new(dir: &Path) -> TestCa {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "skua test CA");
        let cert = params.self_signed(&key).unwrap();
        let ca = TestCa {
            cert,
            key,
            dir: dir.to_path_buf(),
        };
        std::fs::write(ca.truststore(), ca.cert.pem()).unwrap();
        ca
    }

    /// The CA certificate as a PEM truststore file.
    pub fn truststore(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A certificate for `names` (DNS names or IP addresses) with subject `dn`
    /// (attribute, value pairs, most significant first: C, O, OU, CN).
    pub fn issue(&self, file: &str, names: &[&str], dn: &[(DnType, &str)]) -> Issued {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        let mut name = DistinguishedName::new();
        for (t, v) in dn {
            name.push(t.clone(), *v);
        }
        params.distinguished_name = name;
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        let keystore = self.dir.join(file);
        let (cert_pem, key_pem) = (cert.pem(), key.serialize_pem());
        std::fs::write(&keystore, format!("{key_pem}{cert_pem}")).unwrap();
        Issued {
            keystore,
            cert_pem,
            key_pem,
        }
    }

    /// A broker's certificate, valid for localhost and 127.0.0.1.
    pub fn broker(&self, file: &str) -> Issued {
        self.issue(
            file,
            &["localhost", "127.0.0.1"],
            &[(DnType::CommonName, "broker")],
        )
    }
}

/// Settings of a client that trusts `ca` and presents `identity` (if any).
pub fn client_settings(ca: &TestCa, identity: Option<&Issued>) -> SslSettings {
    SslSettings {
        listener: "client".into(),
        keystore: identity.map(|i| KeystoreSettings {
            store_type: "PEM".into(),
            source: StoreSource::File(i.keystore.display().to_string()),
            password: None,
            key_password: None,
        }),
        truststore: Some(TruststoreSettings {
            store_type: "PEM".into(),
            source: StoreSource::File(ca.truststore().display().to_string()),
            password: None,
        }),
        enabled_protocols: vec![TlsVersion::Tls12, TlsVersion::Tls13],
        cipher_suites: vec![],
        client_auth: ClientAuth::None,
        verify_hostname: true,
        principal_mapping_rules: "DEFAULT".into(),
    }
}

/// skua's outbound client over TLS to `addr`, verifying the broker as `host`.
pub fn tls_client(
    addr: std::net::SocketAddr,
    settings: &SslSettings,
    host: &str,
) -> skua::client::Client {
    let config = skua::client::ClientConfig {
        tls: Some(OutboundTls::build(settings).unwrap()),
        server_name: Some(host.into()),
        connect_timeout: std::time::Duration::from_secs(5),
        reconnect_backoff_max: std::time::Duration::from_millis(200),
        ..skua::client::ClientConfig::default()
    };
    skua::client::Client::new(addr, config)
}

/// The broker overrides of an SSL listener with the broker keystore `keystore`.
pub fn ssl_listener_overrides(ca: &TestCa, keystore: &Issued) -> Vec<(String, String)> {
    vec![
        ("listeners".into(), "SSL://127.0.0.1:0".into()),
        ("ssl.keystore.type".into(), "PEM".into()),
        (
            "ssl.keystore.location".into(),
            keystore.keystore.display().to_string(),
        ),
        ("ssl.truststore.type".into(), "PEM".into()),
        (
            "ssl.truststore.location".into(),
            ca.truststore().display().to_string(),
        ),
    ]
}

/// Kept for struct-literal tests of inline PEM stores.
pub fn secret(s: &str) -> Secret {
    Secret(s.to_string())
}
