//! The `ssl.*` keys of one listener, as Kafka resolves them: `listener.name.<l>.<key>`
//! (the listener's name in lower case) wins over the broker-wide `<key>`, which wins over
//! Kafka's default. Checked when the config is built, so a value rustls cannot honour
//! stops startup naming its key; the files named are read later, when the listener's
//! context is built (`context.rs`).

use std::fmt;

use crate::config::{BrokerConfig, ConfigError};

/// `ssl.client.auth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    /// A client may present a certificate; one that does not is `User:ANONYMOUS`.
    Requested,
    /// A client without a trusted certificate fails the handshake.
    Required,
}

/// A secret value (a password, an inline key): never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[hidden]")
    }
}

/// Where a keystore's or truststore's contents come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreSource {
    /// `ssl.keystore.location` / `ssl.truststore.location`.
    File(String),
    /// `ssl.keystore.key` + `ssl.keystore.certificate.chain`, or
    /// `ssl.truststore.certificates` (PEM only, as in Kafka).
    Inline { key: Option<Secret>, certs: Secret },
}

/// `ssl.keystore.*`: the certificate this side presents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeystoreSettings {
    /// `ssl.keystore.type`, upper case: JKS (Kafka's default), PKCS12 or PEM.
    pub store_type: String,
    pub source: StoreSource,
    pub password: Option<Secret>,
    /// `ssl.key.password`.
    pub key_password: Option<Secret>,
}

/// `ssl.truststore.*`: the certificates peers are verified against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TruststoreSettings {
    pub store_type: String,
    pub source: StoreSource,
    pub password: Option<Secret>,
}

/// The TLS versions rustls implements, as `ssl.enabled.protocols` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

/// One listener's TLS settings (or the inter-broker listener's, for outbound connections).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SslSettings {
    pub listener: String,
    pub keystore: Option<KeystoreSettings>,
    pub truststore: Option<TruststoreSettings>,
    pub enabled_protocols: Vec<TlsVersion>,
    /// `ssl.cipher.suites`; empty means rustls's defaults (all it implements).
    pub cipher_suites: Vec<String>,
    pub client_auth: ClientAuth,
    /// `ssl.endpoint.identification.algorithm`: `https` (Kafka's default) verifies that a
    /// broker's certificate names the host connected to; empty verifies only the chain.
    pub verify_hostname: bool,
    /// `ssl.principal.mapping.rules`.
    pub principal_mapping_rules: String,
}

/// Kafka's prefix of a listener's own keys: `listener.name.internal.`.
pub fn listener_prefix(listener: &str) -> String {
    format!("listener.name.{}.", listener.to_ascii_lowercase())
}

/// The value in force for `key` on `listener`: the listener's own key first (even when
/// empty: an empty `listener.name.l.ssl.endpoint.identification.algorithm` turns hostname
/// checks off for that listener alone).
pub fn listener_value(config: &BrokerConfig, listener: &str, key: &str) -> Option<String> {
    config
        .get(&format!("{}{key}", listener_prefix(listener)))
        .or_else(|| config.get(key))
}

impl SslSettings {
    /// Resolves and checks the keys of `listener`. The error names the key as written,
    /// prefixed where the prefixed key was the one in force.
    pub fn for_listener(config: &BrokerConfig, listener: &str) -> Result<SslSettings, ConfigError> {
        let get =
            |key: &str| listener_value(config, listener, key).filter(|v| !v.trim().is_empty());
        let secret = |key: &str| get(key).map(Secret);
        let key_name = |key: &str| {
            let prefixed = format!("{}{key}", listener_prefix(listener));
            match config.get(&prefixed) {
                Some(_) => prefixed,
                None => key.to_string(),
            }
        };
        let invalid = |key: &str, why: String| ConfigError::Invalid {
            key: key_name(key),
            why,
        };
        let store_type = |key: &str| {
            get(key)
                .unwrap_or_else(|| "JKS".into())
                .trim()
                .to_ascii_uppercase()
        };
        let keystore_type = store_type("ssl.keystore.type");
        let keystore = match (
            get("ssl.keystore.location"),
            secret("ssl.keystore.key"),
            secret("ssl.keystore.certificate.chain"),
        ) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err(invalid(
                    "ssl.keystore.location",
                    "set either ssl.keystore.location or ssl.keystore.key with ssl.keystore.certificate.chain, not both".into(),
                ))
            }
            (Some(path), None, None) => Some(StoreSource::File(path)),
            (None, Some(key), Some(certs)) => Some(StoreSource::Inline {
                key: Some(key),
                certs,
            }),
            (None, Some(_), None) | (None, None, Some(_)) => {
                return Err(invalid(
                    "ssl.keystore.key",
                    "an inline keystore needs both ssl.keystore.key and ssl.keystore.certificate.chain".into(),
                ))
            }
            (None, None, None) => None,
        };
        if matches!(keystore, Some(StoreSource::Inline { .. })) && keystore_type != "PEM" {
            return Err(invalid(
                "ssl.keystore.type",
                "ssl.keystore.key and ssl.keystore.certificate.chain need ssl.keystore.type=PEM"
                    .into(),
            ));
        }
        let truststore_type = store_type("ssl.truststore.type");
        let truststore =
            match (
                get("ssl.truststore.location"),
                secret("ssl.truststore.certificates"),
            ) {
                (Some(_), Some(_)) => return Err(invalid(
                    "ssl.truststore.location",
                    "set either ssl.truststore.location or ssl.truststore.certificates, not both"
                        .into(),
                )),
                (Some(path), None) => Some(StoreSource::File(path)),
                (None, Some(certs)) if truststore_type == "PEM" => {
                    Some(StoreSource::Inline { key: None, certs })
                }
                (None, Some(_)) => {
                    return Err(invalid(
                        "ssl.truststore.type",
                        "ssl.truststore.certificates needs ssl.truststore.type=PEM".into(),
                    ))
                }
                (None, None) => None,
            };
        for (key, t) in [
            ("ssl.keystore.type", &keystore_type),
            ("ssl.truststore.type", &truststore_type),
        ] {
            if !matches!(t.as_str(), "JKS" | "PKCS12" | "PEM") {
                return Err(invalid(
                    key,
                    format!("unknown store type {t}; skua reads PEM, PKCS12 and (as Java does) PKCS12 files typed JKS"),
                ));
            }
        }
        let enabled_protocols = parse_protocols(
            &get("ssl.enabled.protocols").unwrap_or_else(|| "TLSv1.2,TLSv1.3".into()),
        )
        .map_err(|why| invalid("ssl.enabled.protocols", why))?;
        let cipher_suites: Vec<String> = get("ssl.cipher.suites")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        super::ciphers::resolve(&cipher_suites, &enabled_protocols)
            .map_err(|why| invalid("ssl.cipher.suites", why))?;
        let client_auth = match get("ssl.client.auth")
            .unwrap_or_else(|| "none".into())
            .trim()
            .to_ascii_lowercase()
            .as_str()
        {
            "none" => ClientAuth::None,
            "requested" => ClientAuth::Requested,
            "required" => ClientAuth::Required,
            other => {
                return Err(invalid(
                    "ssl.client.auth",
                    format!("{other:?} is not one of required, requested, none"),
                ))
            }
        };
        if client_auth != ClientAuth::None && truststore.is_none() {
            return Err(invalid(
                "ssl.client.auth",
                "verifying client certificates needs a truststore (ssl.truststore.location or ssl.truststore.certificates)".into(),
            ));
        }
        let verify_hostname =
            match listener_value(config, listener, "ssl.endpoint.identification.algorithm")
                .filter(|v| !v.trim().is_empty())
            {
                None => false,
                Some(v) if v.trim().eq_ignore_ascii_case("https") => true,
                Some(v) => {
                    return Err(invalid(
                        "ssl.endpoint.identification.algorithm",
                        format!("{v:?} is not https or empty"),
                    ))
                }
            };
        let principal_mapping_rules =
            get("ssl.principal.mapping.rules").unwrap_or_else(|| "DEFAULT".into());
        super::principal::PrincipalMapper::parse(&principal_mapping_rules)
            .map_err(|why| invalid("ssl.principal.mapping.rules", why))?;
        Ok(SslSettings {
            listener: listener.to_string(),
            keystore: keystore.map(|source| KeystoreSettings {
                store_type: keystore_type,
                source,
                password: secret("ssl.keystore.password"),
                key_password: secret("ssl.key.password"),
            }),
            truststore: truststore.map(|source| TruststoreSettings {
                store_type: truststore_type,
                source,
                password: secret("ssl.truststore.password"),
            }),
            enabled_protocols,
            cipher_suites,
            client_auth,
            verify_hostname,
            principal_mapping_rules,
        })
    }
}

/// `ssl.enabled.protocols`: rustls implements TLS 1.2 and 1.3 only, so older names are
/// refused rather than silently dropped.
fn parse_protocols(value: &str) -> Result<Vec<TlsVersion>, String> {
    let mut out = Vec::new();
    for name in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let v = match name {
            "TLSv1.2" => TlsVersion::Tls12,
            "TLSv1.3" => TlsVersion::Tls13,
            other => {
                return Err(format!(
                    "{other} cannot be enabled: skua's TLS (rustls) speaks only TLSv1.2 and TLSv1.3"
                ))
            }
        };
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if out.is_empty() {
        return Err("no protocol enabled".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn try_config(pairs: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
        let props: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        BrokerConfig::from_properties(props)
    }

    fn config(pairs: &[(&str, &str)]) -> BrokerConfig {
        try_config(pairs).unwrap()
    }

    #[test]
    fn a_listeners_own_key_wins_over_the_broker_wide_one() {
        let c = config(&[
            ("listeners", "INTERNAL://:1,EXTERNAL://:2"),
            (
                "listener.security.protocol.map",
                "INTERNAL:SSL,EXTERNAL:SSL",
            ),
            ("inter.broker.listener.name", "INTERNAL"),
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", "/broker.pem"),
            (
                "listener.name.internal.ssl.keystore.location",
                "/internal.pem",
            ),
            ("listener.name.internal.ssl.client.auth", "none"),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", "/ca.pem"),
            ("ssl.client.auth", "required"),
        ]);
        let internal = SslSettings::for_listener(&c, "INTERNAL").unwrap();
        let external = SslSettings::for_listener(&c, "EXTERNAL").unwrap();
        let path = |s: &SslSettings| match &s.keystore.as_ref().unwrap().source {
            StoreSource::File(p) => p.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(path(&internal), "/internal.pem");
        assert_eq!(path(&external), "/broker.pem");
        assert_eq!(internal.client_auth, ClientAuth::None);
        assert_eq!(external.client_auth, ClientAuth::Required);
        assert!(external.verify_hostname, "https is Kafka's default");
        assert_eq!(
            external.enabled_protocols,
            vec![TlsVersion::Tls12, TlsVersion::Tls13]
        );
    }

    #[test]
    fn values_rustls_cannot_honour_are_refused_naming_the_key() {
        let refused = |pairs: &[(&str, &str)]| {
            let mut all = vec![
                ("listeners", "SSL://:1"),
                ("ssl.keystore.type", "PEM"),
                ("ssl.keystore.location", "/k.pem"),
            ];
            all.extend_from_slice(pairs);
            // The broker's config is refused as it is built; the settings alone name the
            // same key.
            let built = try_config(&all).map(|_| ());
            match try_config(&all).and_then(|c| SslSettings::for_listener(&c, "SSL")) {
                Err(ConfigError::Invalid { key, why }) => {
                    assert!(built.is_err());
                    format!("{key}: {why}")
                }
                Ok(_) => "accepted".into(),
                Err(e) => e.to_string(),
            }
        };
        assert!(refused(&[("ssl.enabled.protocols", "TLSv1.1,TLSv1.2")])
            .starts_with("ssl.enabled.protocols: TLSv1.1 cannot be enabled"));
        assert!(refused(&[(
            "ssl.cipher.suites",
            "TLS_AES_128_GCM_SHA256,TLS_RSA_WITH_AES_128_CBC_SHA"
        )])
        .starts_with("ssl.cipher.suites: TLS_RSA_WITH_AES_128_CBC_SHA"));
        assert!(
            refused(&[("listener.name.ssl.ssl.client.auth", "sometimes")])
                .starts_with("listener.name.ssl.ssl.client.auth:")
        );
        assert!(refused(&[("ssl.client.auth", "required")]).contains("needs a truststore"));
        assert!(
            refused(&[("ssl.principal.mapping.rules", "RULE:^CN=(.*)$")])
                .starts_with("ssl.principal.mapping.rules:")
        );
        assert_eq!(
            refused(&[("ssl.endpoint.identification.algorithm", "")]),
            "accepted"
        );
        let debug = format!(
            "{:?}",
            SslSettings::for_listener(
                &config(&[
                    ("listeners", "SSL://:1"),
                    ("ssl.keystore.type", "PKCS12"),
                    ("ssl.keystore.location", "/k.p12"),
                    ("ssl.keystore.password", "hunter2"),
                ]),
                "SSL"
            )
            .unwrap()
        );
        assert!(!debug.contains("hunter2"), "{debug}");
    }
}
