//! SCRAM credentials in ZooKeeper mode, kept as a Kafka 3.9 broker keeps them: each
//! user's `/config/users/<sanitized name>` holds, beside any quota configs, one key per
//! mechanism (`SCRAM-SHA-256`, `SCRAM-SHA-512`) whose value is Kafka's credential string
//! (`salt=..,stored_key=..,server_key=..,iterations=..`); whoever changes one writes the
//! whole entity and a `/config/changes` notification naming `users/<sanitized name>`, and
//! every broker (skua or Kafka) re-reads it (`config_changes`). Names are sanitized as
//! Kafka's `Sanitizer` does: URL-encoded, with `*` as `%2A` and a space as `%20`.

use std::collections::BTreeMap;

use parking_lot::RwLock;

use crate::sasl::scram::{ScramCredential, ScramMechanism};

/// The credentials read from ZooKeeper, by user and mechanism.
#[derive(Default)]
pub struct ScramUsers {
    credentials: RwLock<BTreeMap<(String, ScramMechanism), ScramCredential>>,
}

impl ScramUsers {
    pub fn get(&self, mechanism: ScramMechanism, user: &str) -> Option<ScramCredential> {
        self.credentials
            .read()
            .get(&(user.to_string(), mechanism))
            .cloned()
    }

    /// Every credential: user, mechanism, iterations.
    pub fn list(&self) -> Vec<(String, ScramMechanism, u32)> {
        self.credentials
            .read()
            .iter()
            .map(|((u, m), c)| (u.clone(), *m, c.iterations))
            .collect()
    }

    /// Puts `user`'s entity configs in force: its SCRAM keys replace what was known of
    /// it (an absent key removes that mechanism's credential). A credential string that
    /// cannot be read is logged (never its value) and left out.
    pub fn apply(&self, user: &str, configs: &BTreeMap<String, String>) {
        let mut credentials = self.credentials.write();
        for mechanism in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let key = (user.to_string(), mechanism);
            match configs
                .get(mechanism.name())
                .map(|v| ScramCredential::parse(v))
            {
                Some(Ok(c)) => {
                    credentials.insert(key, c);
                }
                Some(Err(why)) => {
                    tracing::error!(user, mechanism = mechanism.name(), "SCRAM credential in ZooKeeper not understood ({why}); the user cannot authenticate with it");
                    credentials.remove(&key);
                }
                None => {
                    credentials.remove(&key);
                }
            }
        }
    }
}

/// Kafka's `Sanitizer.sanitize`: a name as a ZooKeeper node name.
pub fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'_' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Kafka's `Sanitizer.desanitize` (URL decoding); `None` for a malformed escape or bytes
/// that are not UTF-8.
pub fn desanitize(node: &str) -> Option<String> {
    let bytes = node.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = node.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized_as_kafka_does() {
        assert_eq!(sanitize("alice"), "alice");
        assert_eq!(sanitize("CN=a b,O=*"), "CN%3Da%20b%2CO%3D%2A");
        assert_eq!(sanitize("ü"), "%C3%BC");
        for name in ["alice", "CN=a b,O=*", "ü", "x/y"] {
            assert_eq!(desanitize(&sanitize(name)).as_deref(), Some(name));
        }
        assert_eq!(desanitize("a+b").as_deref(), Some("a b"));
        assert_eq!(desanitize("%zz"), None);
    }

    #[test]
    fn an_entity_replaces_what_was_known_of_its_user() {
        let users = ScramUsers::default();
        let c = ScramCredential::new(ScramMechanism::Sha512, "pw", b"salt", 4096);
        let configs: BTreeMap<String, String> = [
            ("SCRAM-SHA-512".to_string(), c.to_kafka_string()),
            ("SCRAM-SHA-256".to_string(), "salt=@@".to_string()),
            ("producer_byte_rate".to_string(), "1024".to_string()),
        ]
        .into();
        users.apply("alice", &configs);
        assert_eq!(users.get(ScramMechanism::Sha512, "alice"), Some(c));
        assert_eq!(users.get(ScramMechanism::Sha256, "alice"), None);
        users.apply("alice", &BTreeMap::new());
        assert!(users.list().is_empty());
    }
}
