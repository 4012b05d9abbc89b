//! The SASL keys of one listener, as Kafka resolves them (`SaslChannelBuilder` and
//! `JaasContext.loadServerContext`):
//!
//! ```text
//! listener.name.<l>.sasl.enabled.mechanisms          else sasl.enabled.mechanisms (GSSAPI)
//! listener.name.<l>.<mechanism>.sasl.jaas.config     one per enabled mechanism, lower case;
//!                                                    an unprefixed sasl.jaas.config is
//!                                                    ignored with Kafka's warning
//! listener.name.<l>.<mechanism>.connections.max.reauth.ms
//!                                                    else listener.name.<l>.connections.max.reauth.ms
//!                                                    else connections.max.reauth.ms (0: off)
//! listener.name.<l>.sasl.server.max.receive.size     else sasl.server.max.receive.size (512 KiB)
//! listener.name.<l>.oauthbearer.sasl.server.callback.handler.class
//!                                                    Kafka's unsecured validator (default) or
//!                                                    its OAuthBearerValidatorCallbackHandler
//! listener.name.<l>.[oauthbearer.]sasl.oauthbearer.*  else sasl.oauthbearer.* (the JWKS
//!                                                    validator's keys, as Kafka's
//!                                                    ConfigurationUtils looks them up)
//! connection.failed.authentication.delay.ms          (100)
//! ```
//!
//! Checked when the config is built, so a mechanism skua cannot serve (GSSAPI), a missing
//! or unparsable JAAS config, or an inter-broker mechanism the inter-broker listener does
//! not enable stops startup naming the key. Passwords never leave this module in a form
//! that prints ([`Secret`]).

use std::collections::BTreeMap;
use std::time::Duration;

use super::jaas::{self, LoginModule};
use super::jwks::{
    EndpointOptions, JwksOptions, JwksSource, JwksValidator, VALIDATOR_CALLBACK_HANDLERS,
};
use super::oauthbearer::{TokenValidator, UnsecuredValidatorOptions};
use super::plain::{PlainUsers, PLAIN_LOGIN_MODULE};
use super::scram::ScramMechanism;
use crate::config::{BrokerConfig, ConfigError};
use crate::tls::settings::{
    listener_prefix, listener_value, Secret, StoreSource, TruststoreSettings,
};

pub const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
pub const OAUTHBEARER_LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
/// Kafka's default OAUTHBEARER server callback handler.
pub const UNSECURED_VALIDATOR_CALLBACK_HANDLER: &str = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler";

/// The SASL mechanisms skua serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
    OAuthBearer,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    pub fn from_name(name: &str) -> Option<Mechanism> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            "OAUTHBEARER" => Some(Mechanism::OAuthBearer),
            other => ScramMechanism::from_name(other).map(Mechanism::Scram),
        }
    }

    /// The login module class its JAAS config must name.
    fn login_module(self) -> &'static str {
        match self {
            Mechanism::Plain => PLAIN_LOGIN_MODULE,
            Mechanism::Scram(_) => SCRAM_LOGIN_MODULE,
            Mechanism::OAuthBearer => OAUTHBEARER_LOGIN_MODULE,
        }
    }
}

/// The broker's own credentials on a listener (the JAAS `username` / `password` options),
/// what it authenticates with when it connects to another broker's listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCredentials {
    pub mechanism: Mechanism,
    pub username: String,
    pub password: Secret,
}

/// One SASL listener's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SaslSettings {
    pub listener: String,
    /// `sasl.enabled.mechanisms`, in the order configured (SaslHandshake answers them so).
    pub enabled: Vec<Mechanism>,
    /// PLAIN's users (`user_<name>="<password>"`), when PLAIN is enabled.
    pub plain: Option<PlainUsers>,
    /// How OAUTHBEARER tokens are validated, when OAUTHBEARER is enabled.
    pub oauthbearer: Option<TokenValidator>,
    /// `connections.max.reauth.ms` per mechanism, where positive.
    pub max_reauth: BTreeMap<Mechanism, Duration>,
    /// `sasl.server.max.receive.size`: the largest frame before and during authentication.
    pub max_receive_size: usize,
    /// `connection.failed.authentication.delay.ms`.
    pub failed_authentication_delay: Duration,
    /// Each enabled mechanism's JAAS `username` / `password`, where both are set.
    pub client_credentials: BTreeMap<Mechanism, ClientCredentials>,
}

/// Whether `listener`'s security protocol in `config` is SASL_PLAINTEXT or SASL_SSL.
pub fn is_sasl_listener(config: &BrokerConfig, listener: &str) -> bool {
    matches!(
        config.security_protocol(listener).as_deref(),
        Some("SASL_PLAINTEXT" | "SASL_SSL")
    )
}

impl SaslSettings {
    /// Resolves and checks the SASL keys of `listener`. The error names the key as
    /// written (prefixed where the prefixed key was the one in force), never its value.
    pub fn for_listener(
        config: &BrokerConfig,
        listener: &str,
    ) -> Result<SaslSettings, ConfigError> {
        let keys = ListenerKeys { config, listener };
        let enabled = enabled_mechanisms(&keys)?;
        if config.get("sasl.jaas.config").is_some() {
            tracing::warn!(
                "Server config sasl.jaas.config should be prefixed with SASL mechanism name, ignoring config"
            );
        }
        let mut plain = None;
        let mut oauthbearer = None;
        let mut client_credentials = BTreeMap::new();
        let mut max_reauth = BTreeMap::new();
        for &mechanism in &enabled {
            let (jaas_key, text, module) = mechanism_jaas(&keys, mechanism)?;
            match mechanism {
                Mechanism::Plain => {
                    plain = Some(
                        PlainUsers::from_jaas(&text)
                            .map_err(|e| invalid(jaas_key.clone(), e.to_string()))?,
                    )
                }
                Mechanism::OAuthBearer => {
                    oauthbearer = Some(token_validator(&keys, &jaas_key, &module)?);
                }
                Mechanism::Scram(_) => {}
            }
            if let Some(c) = credentials(mechanism, &module) {
                client_credentials.insert(mechanism, c);
            }
            if let Some(lifetime) = max_reauth_of(&keys, mechanism)? {
                max_reauth.insert(mechanism, lifetime);
            }
        }
        Ok(SaslSettings {
            listener: listener.to_string(),
            enabled,
            plain,
            oauthbearer,
            max_reauth,
            max_receive_size: max_receive_size(&keys)?,
            failed_authentication_delay: failed_authentication_delay(config)?,
            client_credentials,
        })
    }

    /// The names of the enabled mechanisms, as SaslHandshake answers them.
    pub fn enabled_names(&self) -> Vec<&'static str> {
        self.enabled.iter().map(|m| m.name()).collect()
    }
}

/// A `sasl.oauthbearer.*` key of `listener`'s OAUTHBEARER validator, as Kafka's
/// `ConfigurationUtils` finds it: `listener.name.<l>.oauthbearer.<key>`, else
/// `listener.name.<l>.<key>`, else `<key>`. (key as written, value).
fn invalid(key: String, why: String) -> ConfigError {
    ConfigError::Invalid { key, why }
}

/// One listener's SASL keys, as Kafka resolves them.
struct ListenerKeys<'a> {
    config: &'a BrokerConfig,
    listener: &'a str,
}

impl ListenerKeys<'_> {
    /// `key` as written: prefixed where the listener's own key is in force.
    fn name(&self, key: &str) -> String {
        let prefixed = format!("{}{key}", listener_prefix(self.listener));
        match self.config.get(&prefixed) {
            Some(_) => prefixed,
            None => key.to_string(),
        }
    }

    fn value(&self, key: &str) -> Option<String> {
        listener_value(self.config, self.listener, key)
    }

    /// A per-mechanism key: `listener.name.<l>.<mechanism>.<key>`.
    fn mechanism_key(&self, mechanism: Mechanism, key: &str) -> String {
        let lower = mechanism.name().to_ascii_lowercase();
        format!("{}{lower}.{key}", listener_prefix(self.listener))
    }
}

/// `sasl.enabled.mechanisms`: at least one, each one skua serves (GSSAPI named apart).
fn enabled_mechanisms(keys: &ListenerKeys) -> Result<Vec<Mechanism>, ConfigError> {
    let listener = keys.listener;
    let refuse = |why: String| invalid(keys.name("sasl.enabled.mechanisms"), why);
    let listed = keys.value("sasl.enabled.mechanisms").unwrap_or_default();
    let mut enabled = Vec::new();
    for name in listed.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let mechanism = match (name, Mechanism::from_name(name)) {
            (_, Some(m)) => m,
            ("GSSAPI", None) => return Err(refuse(format!("listener {listener} enables GSSAPI (Kerberos, Kafka's default), which skua does not serve; enable PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"))),
            (other, None) => return Err(refuse(format!("unknown SASL mechanism {other}; skua serves PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER"))),
        };
        if !enabled.contains(&mechanism) {
            enabled.push(mechanism);
        }
    }
    if enabled.is_empty() {
        return Err(refuse(format!(
            "no SASL mechanism is enabled for listener {listener}"
        )));
    }
    Ok(enabled)
}

/// The mechanism's `sasl.jaas.config` (its key, its text and its one login module).
fn mechanism_jaas(
    keys: &ListenerKeys,
    mechanism: Mechanism,
) -> Result<(String, String, LoginModule), ConfigError> {
    let jaas_key = keys.mechanism_key(mechanism, "sasl.jaas.config");
    let Some(text) = keys.config.get(&jaas_key) else {
        return Err(invalid(
            jaas_key,
            format!("mechanism {} is enabled on listener {} but has no JAAS config (skua reads no JAAS file: java.security.auth.login.config is not consulted)", mechanism.name(), keys.listener),
        ));
    };
    let module = jaas::parse_single(&text, mechanism.login_module())
        .map_err(|e| invalid(jaas_key.clone(), e.to_string()))?;
    Ok((jaas_key, text, module))
}

/// OAUTHBEARER's server callback handler: Kafka's unsecured validator (the default) or
/// its JWKS validator.
fn token_validator(
    keys: &ListenerKeys,
    jaas_key: &str,
    module: &LoginModule,
) -> Result<TokenValidator, ConfigError> {
    let handler = keys.mechanism_key(Mechanism::OAuthBearer, "sasl.server.callback.handler.class");
    let class = keys.config.get(&handler).unwrap_or_default();
    match class.trim() {
        "" | UNSECURED_VALIDATOR_CALLBACK_HANDLER => Ok(TokenValidator::Unsecured(
            UnsecuredValidatorOptions::from_jaas_options(&module.options)
                .map_err(|why| invalid(jaas_key.to_string(), why))?,
        )),
        c if VALIDATOR_CALLBACK_HANDLERS.contains(&c) => Ok(TokenValidator::Jwks(
            std::sync::Arc::new(jwks_validator(keys.config, keys.listener, &module.options)?),
        )),
        other => Err(invalid(
            handler,
            format!("{other}: skua validates OAUTHBEARER tokens with Kafka's unsecured validator or its OAuthBearerValidatorCallbackHandler (JWKS), no other server callback handler"),
        )),
    }
}

/// KIP-368's session lifetime for `mechanism` (`connections.max.reauth.ms`, the
/// mechanism's own key first); None when sessions do not expire.
fn max_reauth_of(
    keys: &ListenerKeys,
    mechanism: Mechanism,
) -> Result<Option<Duration>, ConfigError> {
    let reauth_key = keys.mechanism_key(mechanism, "connections.max.reauth.ms");
    let (key, value) = match keys.config.get(&reauth_key) {
        Some(v) => (reauth_key, v),
        None => (
            keys.name("connections.max.reauth.ms"),
            keys.value("connections.max.reauth.ms")
                .unwrap_or_else(|| "0".into()),
        ),
    };
    let ms: i64 = value
        .trim()
        .parse()
        .map_err(|_| invalid(key, format!("{value:?} is not a number of type LONG")))?;
    Ok((ms > 0).then(|| Duration::from_millis(ms as u64)))
}

/// `sasl.server.max.receive.size`: the largest frame before and during authentication.
fn max_receive_size(keys: &ListenerKeys) -> Result<usize, ConfigError> {
    let size = keys
        .value("sasl.server.max.receive.size")
        .unwrap_or_else(|| "524288".into());
    size.trim()
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            invalid(
                keys.name("sasl.server.max.receive.size"),
                format!("{size:?} is not a size above 0"),
            )
        })
}

/// `connection.failed.authentication.delay.ms`, below `connections.max.idle.ms`.
fn failed_authentication_delay(config: &BrokerConfig) -> Result<Duration, ConfigError> {
    let key = "connection.failed.authentication.delay.ms";
    let delay = config.get(key).unwrap_or_else(|| "100".into());
    let delay_ms = delay.trim().parse::<u64>().map_err(|_| {
        invalid(
            key.into(),
            format!("{delay:?} is not a number of milliseconds >= 0"),
        )
    })?;
    if delay_ms >= config.network.connections_max_idle_ms {
        return Err(invalid(
            key.into(),
            "must be less than connections.max.idle.ms".into(),
        ));
    }
    Ok(Duration::from_millis(delay_ms))
}

fn oauthbearer_value(config: &BrokerConfig, listener: &str, key: &str) -> Option<(String, String)> {
    let prefix = listener_prefix(listener);
    [
        format!("{prefix}oauthbearer.{key}"),
        format!("{prefix}{key}"),
        key.to_string(),
    ]
    .into_iter()
    .find_map(|k| config.get(&k).map(|v| (k, v)))
}

/// An `https:`/`http:` JWKS endpoint's `sasl.oauthbearer.jwks.endpoint.*` settings, and
/// the truststore the JAAS options name for it (Kafka's `JaasOptionsUtils` reads
/// `ssl.truststore.*` there).
fn endpoint_options(
    config: &BrokerConfig,
    listener: &str,
    url: &str,
    jaas_options: &BTreeMap<String, String>,
) -> Result<EndpointOptions, ConfigError> {
    let ms = |key: &str, default: u64, min: u64| -> Result<Duration, ConfigError> {
        let Some((k, v)) = oauthbearer_value(config, listener, key) else {
            return Ok(Duration::from_millis(default));
        };
        v.trim()
            .parse::<u64>()
            .ok()
            .filter(|n| *n >= min)
            .map(Duration::from_millis)
            .ok_or_else(|| ConfigError::Invalid {
                key: k,
                why: format!("{v:?} is not a number of milliseconds >= {min}"),
            })
    };
    let jaas = |key: &str| {
        jaas_options
            .get(key)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    };
    let source = match (
        jaas("ssl.truststore.location"),
        jaas("ssl.truststore.certificates"),
    ) {
        (Some(path), _) => Some(StoreSource::File(path.to_string())),
        (None, Some(pem)) => Some(StoreSource::Inline {
            key: None,
            certs: Secret(pem.to_string()),
        }),
        (None, None) => None,
    };
    let truststore = source.map(|source| TruststoreSettings {
        store_type: jaas("ssl.truststore.type")
            .unwrap_or(match source {
                StoreSource::Inline { .. } => "PEM",
                StoreSource::File(_) => "JKS",
            })
            .to_ascii_uppercase(),
        source,
        password: jaas("ssl.truststore.password").map(|p| Secret(p.to_string())),
    });
    Ok(EndpointOptions {
        url: url.to_string(),
        refresh: ms("sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000, 1)?,
        retry_backoff: ms("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100, 0)?,
        retry_backoff_max: ms(
            "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
            10_000,
            0,
        )?,
        truststore,
    })
}

/// Kafka's secured validator for `listener`: its JWKS read (or fetched) now, so a missing
/// or unreadable file, or an endpoint that cannot be reached, stops startup naming the key.
fn jwks_validator(
    config: &BrokerConfig,
    listener: &str,
    jaas_options: &BTreeMap<String, String>,
) -> Result<JwksValidator, ConfigError> {
    let get = |key: &str| oauthbearer_value(config, listener, key);
    let text = |key: &str, default: &str| {
        get(key)
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| default.to_string())
    };
    let (url_key, url) = get("sasl.oauthbearer.jwks.endpoint.url").ok_or_else(|| {
        invalid(
            "sasl.oauthbearer.jwks.endpoint.url".into(),
            format!(
                "listener {listener}'s OAuthBearerValidatorCallbackHandler needs the JWKS location"
            ),
        )
    })?;
    let url = url.trim();
    let lower = url.to_ascii_lowercase();
    let source = if lower.starts_with("https://") || lower.starts_with("http://") {
        JwksSource::Endpoint(endpoint_options(config, listener, url, jaas_options)?)
    } else {
        JwksSource::File(
            super::jwks::file_url_path(url).map_err(|why| invalid(url_key.clone(), why))?,
        )
    };
    let skew_key = "sasl.oauthbearer.clock.skew.seconds";
    let skew = text(skew_key, "30");
    let skew_s = skew
        .parse::<i64>()
        .ok()
        .filter(|s| *s >= 0)
        .ok_or_else(|| {
            invalid(
                get(skew_key).map(|(k, _)| k).unwrap_or(skew_key.into()),
                format!("{skew:?} is not a number of seconds >= 0"),
            )
        })?;
    let options = JwksOptions {
        source,
        expected_audience: get("sasl.oauthbearer.expected.audience")
            .map(|(_, v)| {
                v.split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        expected_issuer: get("sasl.oauthbearer.expected.issuer")
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty()),
        scope_claim: text("sasl.oauthbearer.scope.claim.name", "scope"),
        sub_claim: text("sasl.oauthbearer.sub.claim.name", "sub"),
        clock_skew_ms: skew_s.saturating_mul(1000),
    };
    JwksValidator::new(options).map_err(|why| invalid(url_key, why))
}

/// The login module's `username` / `password` options (PLAIN and SCRAM clients).
fn credentials(mechanism: Mechanism, module: &LoginModule) -> Option<ClientCredentials> {
    if mechanism == Mechanism::OAuthBearer {
        return None;
    }
    Some(ClientCredentials {
        mechanism,
        username: module.options.get("username")?.clone(),
        password: Secret(module.options.get("password")?.clone()),
    })
}

/// The inter-broker listener's SASL side, when it is a SASL listener: the mechanism
/// (`sasl.mechanism.inter.broker.protocol`), which that listener must enable, and the
/// broker's credentials for it (its JAAS `username` and `password`).
pub fn inter_broker(config: &BrokerConfig) -> Result<Option<ClientCredentials>, ConfigError> {
    let listener = config.inter_broker_listener();
    if !is_sasl_listener(config, &listener) {
        return Ok(None);
    }
    let settings = SaslSettings::for_listener(config, &listener)?;
    let name = config
        .get("sasl.mechanism.inter.broker.protocol")
        .unwrap_or_else(|| "GSSAPI".into());
    let name = name.trim();
    let mechanism = Mechanism::from_name(name).filter(|m| settings.enabled.contains(m));
    let Some(mechanism) = mechanism else {
        return Err(ConfigError::Invalid {
            key: "sasl.mechanism.inter.broker.protocol".into(),
            why: format!("{name} must be included in sasl.enabled.mechanisms when SASL is used for inter-broker communication"),
        });
    };
    match settings.client_credentials.get(&mechanism) {
        Some(c) => Ok(Some(c.clone())),
        None => Err(ConfigError::Invalid {
            key: format!(
                "{}{}.sasl.jaas.config",
                listener_prefix(&listener),
                mechanism.name().to_ascii_lowercase()
            ),
            why: format!(
                "the inter-broker listener {listener}'s {} JAAS config needs the broker's own username and password options",
                mechanism.name()
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn try_config(pairs: &[(&str, &str)]) -> Result<BrokerConfig, ConfigError> {
        BrokerConfig::from_properties(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    const PLAIN: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#;
    const SCRAM: &str = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="admin-scram";"#;

    #[test]
    fn a_listeners_own_keys_win_and_every_mechanism_needs_its_jaas() {
        let c = try_config(&[
            ("listeners", "SASL_PLAINTEXT://:1,INTERNAL://:2"),
            (
                "listener.security.protocol.map",
                "SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
            ),
            ("inter.broker.listener.name", "INTERNAL"),
            ("sasl.enabled.mechanisms", "PLAIN"),
            (
                "listener.name.internal.sasl.enabled.mechanisms",
                "SCRAM-SHA-512,PLAIN",
            ),
            ("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"),
            ("listener.name.sasl_plaintext.plain.sasl.jaas.config", PLAIN),
            ("listener.name.internal.plain.sasl.jaas.config", PLAIN),
            (
                "listener.name.internal.scram-sha-512.sasl.jaas.config",
                SCRAM,
            ),
            ("connections.max.reauth.ms", "60000"),
            (
                "listener.name.internal.scram-sha-512.connections.max.reauth.ms",
                "5000",
            ),
        ])
        .unwrap();
        let outer = SaslSettings::for_listener(&c, "SASL_PLAINTEXT").unwrap();
        assert_eq!(outer.enabled_names(), vec!["PLAIN"]);
        assert_eq!(outer.max_receive_size, 524288);
        assert_eq!(
            outer.failed_authentication_delay,
            Duration::from_millis(100)
        );
        assert_eq!(outer.max_reauth[&Mechanism::Plain], Duration::from_secs(60));
        let inner = SaslSettings::for_listener(&c, "INTERNAL").unwrap();
        assert_eq!(inner.enabled_names(), vec!["SCRAM-SHA-512", "PLAIN"]);
        let scram = Mechanism::Scram(ScramMechanism::Sha512);
        assert_eq!(inner.max_reauth[&scram], Duration::from_secs(5));
        let own = inter_broker(&c).unwrap().unwrap();
        assert_eq!((own.mechanism, own.username.as_str()), (scram, "admin"));
        assert!(!format!("{own:?}").contains("admin-scram"));
    }

    #[test]
    fn what_skua_cannot_serve_stops_startup_naming_the_key() {
        let refused = |extra: &[(&str, &str)]| {
            let mut all = vec![
                ("listeners", "SASL_PLAINTEXT://:1"),
                ("security.inter.broker.protocol", "SASL_PLAINTEXT"),
                ("sasl.enabled.mechanisms", "PLAIN"),
                ("sasl.mechanism.inter.broker.protocol", "PLAIN"),
                ("listener.name.sasl_plaintext.plain.sasl.jaas.config", PLAIN),
            ];
            all.extend_from_slice(extra);
            match try_config(&all) {
                Ok(_) => "accepted".to_string(),
                Err(ConfigError::Invalid { key, why }) => format!("{key}: {why}"),
                Err(e) => e.to_string(),
            }
        };
        assert_eq!(refused(&[]), "accepted");
        assert!(refused(&[("sasl.enabled.mechanisms", "GSSAPI")])
            .starts_with("sasl.enabled.mechanisms: listener SASL_PLAINTEXT enables GSSAPI"));
        assert!(
            refused(&[("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256")])
                .starts_with("listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config:")
        );
        assert!(
            refused(&[("sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-256")])
                .contains("must be included in sasl.enabled.mechanisms")
        );
        let bad = refused(&[(
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"s3cret",
        )]);
        assert!(bad.contains("line 1") && !bad.contains("s3cret"), "{bad}");
        assert!(refused(&[(
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"x\";"
        )])
        .contains("username and password"));
        assert!(refused(&[("sasl.server.max.receive.size", "0")])
            .starts_with("sasl.server.max.receive.size:"));
    }

    #[test]
    fn oauthbearer_picks_kafkas_validator_by_its_callback_handler() {
        let dir = tempfile::tempdir().unwrap();
        let jwks = dir.path().join("jwks.json");
        std::fs::write(&jwks, r#"{"keys":[]}"#).unwrap();
        let url = format!("file://{}", jwks.display());
        let jaas = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;";
        let handler = "listener.name.ext.oauthbearer.sasl.server.callback.handler.class";
        let settings = |extra: &[(&str, &str)]| {
            let mut all = vec![
                ("listeners", "PLAINTEXT://:1,EXT://:2"),
                (
                    "listener.security.protocol.map",
                    "PLAINTEXT:PLAINTEXT,EXT:SASL_PLAINTEXT",
                ),
                ("sasl.enabled.mechanisms", "OAUTHBEARER"),
                ("listener.name.ext.oauthbearer.sasl.jaas.config", jaas),
            ];
            all.extend_from_slice(extra);
            try_config(&all).and_then(|c| SaslSettings::for_listener(&c, "EXT"))
        };
        assert!(matches!(
            settings(&[]).unwrap().oauthbearer,
            Some(TokenValidator::Unsecured(_))
        ));
        let secured =
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler";
        let s = settings(&[
            (handler, secured),
            ("sasl.oauthbearer.jwks.endpoint.url", "file:/elsewhere"),
            (
                "listener.name.ext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url",
                &url,
            ),
            (
                "listener.name.ext.sasl.oauthbearer.expected.audience",
                "kafka, other",
            ),
            ("sasl.oauthbearer.expected.issuer", "https://idp"),
            ("sasl.oauthbearer.sub.claim.name", "client_id"),
            ("sasl.oauthbearer.clock.skew.seconds", "5"),
        ])
        .unwrap();
        let Some(TokenValidator::Jwks(v)) = s.oauthbearer else {
            panic!("{:?}", s.oauthbearer)
        };
        let o = v.options();
        assert_eq!(o.source, JwksSource::File(jwks));
        assert_eq!(o.expected_audience, vec!["kafka", "other"]);
        assert_eq!(o.expected_issuer.as_deref(), Some("https://idp"));
        assert_eq!(
            (o.sub_claim.as_str(), o.scope_claim.as_str()),
            ("client_id", "scope")
        );
        assert_eq!(o.clock_skew_ms, 5000);
        let refused = |extra: &[(&str, &str)]| match settings(extra) {
            Err(ConfigError::Invalid { key, why }) => format!("{key}: {why}"),
            other => panic!("{other:?}"),
        };
        assert!(refused(&[(handler, secured)]).starts_with("sasl.oauthbearer.jwks.endpoint.url:"));
        assert!(refused(&[
            (handler, secured),
            (
                "sasl.oauthbearer.jwks.endpoint.url",
                "https://127.0.0.1:1/jwks"
            )
        ])
        .contains("https://127.0.0.1:1/jwks: "));
        assert!(refused(&[
            (handler, secured),
            (
                "sasl.oauthbearer.jwks.endpoint.url",
                "https://127.0.0.1:1/jwks"
            ),
            ("sasl.oauthbearer.jwks.endpoint.refresh.ms", "0")
        ])
        .starts_with("sasl.oauthbearer.jwks.endpoint.refresh.ms: "));
        assert!(refused(&[
            (handler, secured),
            (
                "sasl.oauthbearer.jwks.endpoint.url",
                "file:/nonexistent/jwks.json"
            )
        ])
        .contains("/nonexistent/jwks.json"));
        assert!(refused(&[(handler, "com.example.Handler")]).starts_with(handler));
    }
}
