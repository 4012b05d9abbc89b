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
        let keys = ListenerKeys { config, listener };
        let keystore = keystore(&keys)?;
        let truststore = truststore(&keys)?;
        let enabled_protocols = parse_protocols(
            &keys
                .get("ssl.enabled.protocols")
                .unwrap_or_else(|| "TLSv1.2,TLSv1.3".into()),
        )
        .map_err(|why| keys.invalid("ssl.enabled.protocols", why))?;
        let cipher_suites: Vec<String> = keys
            .get("ssl.cipher.suites")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        super::ciphers::resolve(&cipher_suites, &enabled_protocols)
            .map_err(|why| keys.invalid("ssl.cipher.suites", why))?;
        let client_auth = client_auth(&keys)?;
        if client_auth != ClientAuth::None && truststore.is_none() {
            return Err(keys.invalid(
                "ssl.client.auth",
                "verifying client certificates needs a truststore (ssl.truststore.location or ssl.truststore.certificates)".into(),
            ));
        }
        let principal_mapping_rules = keys
            .get("ssl.principal.mapping.rules")
            .unwrap_or_else(|| "DEFAULT".into());
        super::principal::PrincipalMapper::parse(&principal_mapping_rules)
            .map_err(|why| keys.invalid("ssl.principal.mapping.rules", why))?;
        Ok(SslSettings {
            listener: listener.to_string(),
            keystore,
            truststore,
            enabled_protocols,
            cipher_suites,
            client_auth,
            verify_hostname: verify_hostname(&keys)?,
            principal_mapping_rules,
        })
    }
}

/// One listener's `ssl.*` keys, as Kafka resolves them (the listener's own key first).
struct ListenerKeys<'a> {
    config: &'a BrokerConfig,
    listener: &'a str,
}

impl ListenerKeys<'_> {
    /// The key's value in force, if set and not blank.
    fn get(&self, key: &str) -> Option<String> {
        listener_value(self.config, self.listener, key).filter(|v| !v.trim().is_empty())
    }

    fn secret(&self, key: &str) -> Option<Secret> {
        self.get(key).map(Secret)
    }

    /// A store type (`JKS`, Kafka's default), upper case.
    fn store_type(&self, key: &str) -> String {
        self.get(key)
            .unwrap_or_else(|| "JKS".into())
            .trim()
            .to_ascii_uppercase()
    }

    /// The error for `key`, named as written: prefixed where the prefixed key is in force.
    fn invalid(&self, key: &str, why: String) -> ConfigError {
        let prefixed = format!("{}{key}", listener_prefix(self.listener));
        let key = match self.config.get(&prefixed) {
            Some(_) => prefixed,
            None => key.to_string(),
        };
        ConfigError::Invalid { key, why }
    }
}

/// `ssl.keystore.*`: a file, or the inline PEM key and chain (never both).
fn keystore(keys: &ListenerKeys) -> Result<Option<KeystoreSettings>, ConfigError> {
    let store_type = keys.store_type("ssl.keystore.type");
    check_store_type(keys, "ssl.keystore.type", &store_type)?;
    let source = match (
        keys.get("ssl.keystore.location"),
        keys.secret("ssl.keystore.key"),
        keys.secret("ssl.keystore.certificate.chain"),
    ) {
        (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
            return Err(keys.invalid(
                "ssl.keystore.location",
                "set either ssl.keystore.location or ssl.keystore.key with ssl.keystore.certificate.chain, not both".into(),
            ))
        }
        (Some(path), None, None) => StoreSource::File(path),
        (None, Some(key), Some(certs)) => StoreSource::Inline {
            key: Some(key),
            certs,
        },
        (None, Some(_), None) | (None, None, Some(_)) => {
            return Err(keys.invalid(
                "ssl.keystore.key",
                "an inline keystore needs both ssl.keystore.key and ssl.keystore.certificate.chain".into(),
            ))
        }
        (None, None, None) => return Ok(None),
    };
    if matches!(source, StoreSource::Inline { .. }) && store_type != "PEM" {
        return Err(keys.invalid(
            "ssl.keystore.type",
            "ssl.keystore.key and ssl.keystore.certificate.chain need ssl.keystore.type=PEM".into(),
        ));
    }
    Ok(Some(KeystoreSettings {
        store_type,
        source,
        password: keys.secret("ssl.keystore.password"),
        key_password: keys.secret("ssl.key.password"),
    }))
}

/// `ssl.truststore.*`: a file, or inline PEM certificates (never both).
fn truststore(keys: &ListenerKeys) -> Result<Option<TruststoreSettings>, ConfigError> {
    let store_type = keys.store_type("ssl.truststore.type");
    let source = match (
        keys.get("ssl.truststore.location"),
        keys.secret("ssl.truststore.certificates"),
    ) {
        (Some(_), Some(_)) => {
            return Err(keys.invalid(
                "ssl.truststore.location",
                "set either ssl.truststore.location or ssl.truststore.certificates, not both"
                    .into(),
            ))
        }
        (Some(path), None) => StoreSource::File(path),
        (None, Some(certs)) if store_type == "PEM" => StoreSource::Inline { key: None, certs },
        (None, Some(_)) => {
            return Err(keys.invalid(
                "ssl.truststore.type",
                "ssl.truststore.certificates needs ssl.truststore.type=PEM".into(),
            ))
        }
        (None, None) => {
            check_store_type(keys, "ssl.truststore.type", &store_type)?;
            return Ok(None);
        }
    };
    check_store_type(keys, "ssl.truststore.type", &store_type)?;
    Ok(Some(TruststoreSettings {
        store_type,
        source,
        password: keys.secret("ssl.truststore.password"),
    }))
}

fn check_store_type(keys: &ListenerKeys, key: &str, store_type: &str) -> Result<(), ConfigError> {
    match store_type {
        "JKS" | "PKCS12" | "PEM" => Ok(()),
        t => Err(keys.invalid(
            key,
            format!("unknown store type {t}; skua reads PEM, PKCS12 and (as Java does) PKCS12 files typed JKS"),
        )),
    }
}

/// `ssl.client.auth`: none (the default), requested or required.
fn client_auth(keys: &ListenerKeys) -> Result<ClientAuth, ConfigError> {
    match keys
        .get("ssl.client.auth")
        .unwrap_or_else(|| "none".into())
        .trim()
        .to_ascii_lowercase()
        .as_str()
    {
        "none" => Ok(ClientAuth::None),
        "requested" => Ok(ClientAuth::Requested),
        "required" => Ok(ClientAuth::Required),
        other => Err(keys.invalid(
            "ssl.client.auth",
            format!("{other:?} is not one of required, requested, none"),
        )),
    }
}

/// `ssl.endpoint.identification.algorithm`: `https` checks the peer's name (outbound).
fn verify_hostname(keys: &ListenerKeys) -> Result<bool, ConfigError> {
    match keys.get("ssl.endpoint.identification.algorithm") {
        None => Ok(false),
        Some(v) if v.trim().eq_ignore_ascii_case("https") => Ok(true),
        Some(v) => Err(keys.invalid(
            "ssl.endpoint.identification.algorithm",
            format!("{v:?} is not https or empty"),
        )),
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
