//! How startup sorts the keys of `server.properties` (values checked against their
//! definitions, unknown keys noted), and `skua --check-config`, which reports every
//! finding of that same sorting and of the config's build without starting a broker.

use std::collections::BTreeMap;
use std::fmt;

use super::broker::{invalid, key_def, listener_key, BrokerConfig, ConfigError};
use super::catalog::broker_keys;
use super::defs;

/// Keys Kafka defines that skua reads outside `defs::BROKER_KEYS`: the TLS listeners'
/// (`tls::settings`) and the SASL listeners' (`sasl::settings`), both also under
/// `listener.name.<l>.`. Every other Kafka key is accepted and not acted on.
const READ_OUTSIDE_DEFS: &[&str] = &[
    "connection.failed.authentication.delay.ms",
    "connections.max.reauth.ms",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.server.callback.handler.class",
    "sasl.server.max.receive.size",
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.key.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.principal.mapping.rules",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
];

/// Whether skua acts on known key `name` (a listener's own key acts as the key it
/// overrides).
fn acted_on(name: &str) -> bool {
    let base = listener_key(name).unwrap_or(name);
    defs::broker_key(base).is_some() || READ_OUTSIDE_DEFS.contains(&base)
}

/// Something to say about one key that does not stop startup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyNote {
    /// No broker key of that name; `suggestion` is the one known key a typo away.
    Unknown {
        key: String,
        suggestion: Option<String>,
    },
    /// A listener, TLS or SASL key skua does not define yet.
    NotSupportedYet { key: String },
    /// A key Kafka defines whose value skua checks and keeps (DescribeConfigs reports it)
    /// but does not act on.
    NotActedOn { key: String },
}

impl KeyNote {
    /// Startup's log line for the note.
    pub fn log(&self) {
        match self {
            KeyNote::Unknown { key, suggestion } => match suggestion {
                Some(s) => {
                    tracing::warn!(key = %key, did_you_mean = %s, "unknown configuration key; ignored")
                }
                None => tracing::warn!(key = %key, "unknown configuration key; ignored"),
            },
            KeyNote::NotSupportedYet { key } => {
                tracing::warn!(key = %key, "configuration key not supported yet; ignored")
            }
            KeyNote::NotActedOn { key } => {
                tracing::info!(key = %key, "configuration key accepted but not acted on")
            }
        }
    }
}

impl fmt::Display for KeyNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyNote::Unknown {
                key,
                suggestion: Some(s),
            } => write!(f, "{key}: unknown key, ignored (did you mean {s}?)"),
            KeyNote::Unknown { key, .. } => write!(f, "{key}: unknown key, ignored"),
            KeyNote::NotSupportedYet { key } => {
                write!(
                    f,
                    "{key}: listener, TLS or SASL key skua does not support yet, ignored"
                )
            }
            KeyNote::NotActedOn { key } => {
                write!(f, "{key}: a Kafka key skua accepts but does not act on")
            }
        }
    }
}

/// The keys of a `server.properties` as startup sorts them.
pub struct SortedKeys {
    /// Known keys whose values passed their checks, trimmed.
    pub values: BTreeMap<String, String>,
    /// One per known key whose value failed its check, in key order.
    pub errors: Vec<ConfigError>,
    pub notes: Vec<KeyNote>,
}

impl SortedKeys {
    pub fn sort(props: BTreeMap<String, String>) -> SortedKeys {
        let mut sorted = SortedKeys {
            values: BTreeMap::new(),
            errors: Vec::new(),
            notes: Vec::new(),
        };
        for (k, v) in props {
            // The `logging.*` keys are the log's (`logging::config`), read before the
            // broker's config.
            if let Some(checked) = crate::logging::config::check_key(&k, &v) {
                if let Err(why) = checked {
                    sorted.errors.push(invalid(&k, why));
                }
                continue;
            }
            match key_def(&k) {
                Some(def) => match def.check(&v) {
                    Ok(()) => {
                        if !acted_on(&k) {
                            sorted.notes.push(KeyNote::NotActedOn { key: k.clone() });
                        }
                        sorted.values.insert(k, v.trim().to_string());
                    }
                    // Kafka's reason alone: the value may be a secret.
                    Err(why) => {
                        sorted.errors.push(invalid(&k, why));
                    }
                },
                None => {
                    let suggestion = suggestion(&k);
                    let security = k.starts_with("listener.name.")
                        || k.starts_with("ssl.")
                        || k.starts_with("sasl.");
                    sorted.notes.push(match suggestion {
                        None if security => KeyNote::NotSupportedYet { key: k },
                        _ => KeyNote::Unknown { key: k, suggestion },
                    });
                }
            }
        }
        sorted
    }
}

/// One line of `skua --check-config`.
#[derive(Debug)]
pub enum Finding {
    Error(ConfigError),
    Warning(KeyNote),
}

impl Finding {
    pub fn is_error(&self) -> bool {
        matches!(self, Finding::Error(_))
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Error(ConfigError::Invalid { key, why }) => write!(f, "error: {key}: {why}"),
            Finding::Error(e) => write!(f, "error: {e}"),
            Finding::Warning(note) => write!(f, "warning: {note}"),
        }
    }
}

/// Every finding about `props`: the notes and bad values of the sorting startup does,
/// then (when every value passed) what building the config refuses, as startup would
/// refuse it. Nothing is bound, opened or connected to.
pub fn check_properties(props: BTreeMap<String, String>) -> Vec<Finding> {
    let sorted = SortedKeys::sort(props);
    let mut findings: Vec<Finding> = sorted.notes.into_iter().map(Finding::Warning).collect();
    if sorted.errors.is_empty() {
        // Startup builds only from values that all passed, so a refused combination is
        // reported on the same values (one: the build stops at the first).
        if let Err(e) = BrokerConfig::from_sorted_values(sorted.values) {
            findings.push(Finding::Error(e));
        }
    } else {
        findings.extend(sorted.errors.into_iter().map(Finding::Error));
    }
    findings
}

/// The one known broker key within two edits of `key`, when exactly one is closest; for
/// a listener's own key (`listener.name.<l>.ssl.keystore.locaton`), the listener's key
/// of that known key.
fn suggestion(key: &str) -> Option<String> {
    if let Some(rest) = key.strip_prefix("listener.name.") {
        let (listener, base) = rest.split_once('.')?;
        let known = closest_key(base)?;
        let prefixed = format!("listener.name.{listener}.{known}");
        return listener_key(&prefixed).is_some().then_some(prefixed);
    }
    closest_key(key).map(str::to_string)
}

fn closest_key(key: &str) -> Option<&'static str> {
    const MAX_EDITS: usize = 2;
    let mut best: Option<(usize, &'static str)> = None;
    let mut tied = false;
    for known in broker_keys().map(|k| k.name) {
        // The length difference bounds the distance from below: a long line costs nothing.
        if known.len().abs_diff(key.len()) > MAX_EDITS {
            continue;
        }
        let d = edit_distance(key.as_bytes(), known.as_bytes());
        match best {
            _ if d > MAX_EDITS => {}
            Some((b, _)) if d > b => {}
            Some((b, _)) if d == b => tied = true,
            _ => {
                best = Some((d, known));
                tied = false;
            }
        }
    }
    best.filter(|_| !tied).map(|(_, k)| k)
}

/// Levenshtein distance, in bytes (keys are ASCII).
fn edit_distance(a: &[u8], b: &[u8]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let substituted = diagonal + usize::from(ca != cb);
            diagonal = row[j + 1];
            row[j + 1] = substituted.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Each key read outside `defs.rs` is one Kafka defines (else it would be reported
    /// unknown, not acted on) and one `defs.rs` does not (else the entry is stale).
    #[test]
    fn keys_read_outside_defs_are_kafkas_and_not_in_defs() {
        for name in READ_OUTSIDE_DEFS {
            assert!(key_def(name).is_some(), "{name}");
            assert!(defs::broker_key(name).is_none(), "{name}");
        }
        assert!(acted_on("listener.name.ext.ssl.truststore.location"));
        assert!(acted_on("listener.name.ext.plain.sasl.jaas.config"));
        assert!(acted_on(
            "listener.name.ext.oauthbearer.connections.max.reauth.ms"
        ));
        assert!(acted_on(
            "listener.name.ext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url"
        ));
        assert!(acted_on("sasl.oauthbearer.expected.audience"));
        assert!(!acted_on("sasl.oauthbearer.jwks.endpoint.refresh.ms"));
        assert!(!acted_on("sasl.kerberos.service.name"));
        assert!(acted_on("authorizer.class.name"));
        assert!(acted_on("super.users"));
        assert!(!acted_on("delegation.token.secret.key"));
    }

    #[test]
    fn suggests_the_one_close_key() {
        assert_eq!(edit_distance(b"kitten", b"sitting"), 3);
        let suggested = |key| suggestion(key);
        assert_eq!(
            suggested("num.partition").as_deref(),
            Some("num.partitions")
        );
        assert_eq!(
            suggested("listener.name.ext.ssl.keystore.locaton").as_deref(),
            Some("listener.name.ext.ssl.keystore.location")
        );
        assert_eq!(suggested("listener.name.ext.num.partition"), None);
        assert_eq!(suggested("completely.different"), None);
    }

    #[test]
    fn sorts_bad_values_unknown_and_unacted_keys() {
        let sorted = SortedKeys::sort(props(&[
            ("num.partitions", "x"),
            ("num.partition", "3"),
            ("background.threads", "4"),
            ("listener.name.a.ssl.keystore.location", "/k.pem"),
            ("ssl.keystore.password", "hunter2"),
        ]));
        assert_eq!(sorted.errors.len(), 1);
        assert_eq!(
            sorted.errors[0].to_string(),
            "invalid value for num.partitions: Not a number of type INT"
        );
        assert_eq!(
            sorted.notes,
            vec![
                KeyNote::NotActedOn {
                    key: "background.threads".into()
                },
                KeyNote::Unknown {
                    key: "num.partition".into(),
                    suggestion: Some("num.partitions".into())
                },
            ]
        );
        assert!(sorted
            .values
            .contains_key("listener.name.a.ssl.keystore.location"));
        assert!(sorted.values.contains_key("ssl.keystore.password"));
    }

    #[test]
    fn the_logging_keys_are_checked_and_known() {
        let findings = check_properties(props(&[
            ("logging.format", "json"),
            ("logging.level.kafka.server.ReplicaManager", "DEBUG"),
            ("logging.level.skua::log::cleaner", "trace"),
        ]));
        assert!(findings.is_empty(), "{findings:?}");
        let findings = check_properties(props(&[
            ("logging.format", "xml"),
            ("logging.level.kafka.nope", "DEBUG"),
        ]));
        let lines: Vec<String> = findings.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "error: logging.format: String must be one of: text, json",
                "error: logging.level.kafka.nope: Logger kafka.nope does not exist!",
            ]
        );
    }

    #[test]
    fn a_refused_combination_is_an_error() {
        let findings = check_properties(props(&[("listeners", "SASL_PLAINTEXT://:9093")]));
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert!(findings[0].is_error());
        assert!(findings[0].to_string().contains("SASL"), "{}", findings[0]);
        assert!(check_properties(props(&[("num.partitions", "3")])).is_empty());
    }
}
