//! Who a quota is for, as Kafka names it (`ClientQuotaEntity`): a user, a client id, or
//! both, each either named or `<default>`; and where ZooKeeper keeps each
//! (`/config/users/<user>`, `/config/clients/<id>`, `/config/users/<user>/clients/<id>`,
//! names escaped by Kafka's `Sanitizer`, `<default>` for the defaults).

use std::fmt;

/// Kafka's entity type names (`ClientQuotaEntity.USER`, `CLIENT_ID`, `IP`).
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";
pub const IP: &str = "ip";
/// The name ZooKeeper paths give a default entity (`ZooKeeperInternals.DEFAULT_STRING`).
pub const DEFAULT: &str = "<default>";

/// One side of an entity: a name, or the default for every name without its own.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityName {
    Default,
    Named(String),
}

impl EntityName {
    /// From the protocol and the metadata record, where null is the default.
    pub fn from_nullable(name: Option<&str>) -> EntityName {
        match name {
            None => EntityName::Default,
            Some(n) => EntityName::Named(n.to_string()),
        }
    }

    pub fn as_nullable(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(n) => Some(n),
        }
    }

    /// The name as a ZooKeeper path segment.
    fn sanitized(&self) -> String {
        match self {
            EntityName::Default => DEFAULT.to_string(),
            EntityName::Named(n) => sanitize(n),
        }
    }

    fn from_sanitized(segment: &str) -> Option<EntityName> {
        match segment {
            DEFAULT => Some(EntityName::Default),
            s => desanitize(s).map(EntityName::Named),
        }
    }
}

/// A quota entity: a user, a client id, or a user's client id. Never neither.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
}

impl QuotaEntity {
    pub fn user(name: EntityName) -> QuotaEntity {
        QuotaEntity {
            user: Some(name),
            client_id: None,
        }
    }

    pub fn client_id(name: EntityName) -> QuotaEntity {
        QuotaEntity {
            user: None,
            client_id: Some(name),
        }
    }

    pub fn user_client_id(user: EntityName, client_id: EntityName) -> QuotaEntity {
        QuotaEntity {
            user: Some(user),
            client_id: Some(client_id),
        }
    }

    /// The entity's `(type, name)` pairs, user first, as the protocol and the metadata
    /// record list them (null name: the default).
    pub fn components(&self) -> impl Iterator<Item = (&'static str, Option<&str>)> {
        let user = self.user.as_ref().map(|u| (USER, u.as_nullable()));
        let client = self
            .client_id
            .as_ref()
            .map(|c| (CLIENT_ID, c.as_nullable()));
        user.into_iter().chain(client)
    }

    /// Its entity path under `/config` (`users/<u>`, `clients/<c>`,
    /// `users/<u>/clients/<c>`), as Kafka's `AdminZkClient` writes it.
    pub fn zk_entity_path(&self) -> Option<String> {
        match (&self.user, &self.client_id) {
            (Some(u), None) => Some(format!("users/{}", u.sanitized())),
            (None, Some(c)) => Some(format!("clients/{}", c.sanitized())),
            (Some(u), Some(c)) => {
                Some(format!("users/{}/clients/{}", u.sanitized(), c.sanitized()))
            }
            (None, None) => None,
        }
    }

    /// The entity an entity path under `/config` names; None for other entity types or
    /// a malformed path.
    pub fn from_zk_entity_path(path: &str) -> Option<QuotaEntity> {
        let parts: Vec<&str> = path.split('/').collect();
        match parts.as_slice() {
            ["users", u] => Some(QuotaEntity::user(EntityName::from_sanitized(u)?)),
            ["clients", c] => Some(QuotaEntity::client_id(EntityName::from_sanitized(c)?)),
            ["users", u, "clients", c] => Some(QuotaEntity::user_client_id(
                EntityName::from_sanitized(u)?,
                EntityName::from_sanitized(c)?,
            )),
            _ => None,
        }
    }
}

impl fmt::Display for QuotaEntity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (kind, name) in self.components() {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{kind}={}", name.unwrap_or(DEFAULT))?;
        }
        Ok(())
    }
}

/// Kafka's `Sanitizer.sanitize`: Java's `URLEncoder` (letters, digits, `.`, `-`, `_`
/// kept; every other UTF-8 byte as `%XX`), with `*` and space as `%2A` and `%20`.
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

/// Kafka's `Sanitizer.desanitize` (Java's `URLDecoder`: `+` is a space); None when the
/// escapes are malformed or do not decode to UTF-8.
pub fn desanitize(name: &str) -> Option<String> {
    let bytes = name.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
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

    fn named(n: &str) -> EntityName {
        EntityName::Named(n.to_string())
    }

    #[test]
    fn names_are_sanitized_as_kafka_does() {
        assert_eq!(sanitize("alice"), "alice");
        assert_eq!(sanitize("CN=a b,O=x*"), "CN%3Da%20b%2CO%3Dx%2A");
        assert_eq!(sanitize("ü"), "%C3%BC");
        assert_eq!(
            desanitize("CN%3Da%20b%2CO%3Dx%2A").as_deref(),
            Some("CN=a b,O=x*")
        );
        assert_eq!(desanitize("a+b").as_deref(), Some("a b"));
        assert_eq!(desanitize("%C3%BC").as_deref(), Some("ü"));
        assert_eq!(desanitize("%4"), None);
        assert_eq!(desanitize("%FF"), None);
    }

    #[test]
    fn entity_paths_round_trip() {
        let cases = [
            (QuotaEntity::user(named("alice")), "users/alice"),
            (QuotaEntity::user(EntityName::Default), "users/<default>"),
            (QuotaEntity::client_id(named("my app")), "clients/my%20app"),
            (
                QuotaEntity::user_client_id(named("CN=x"), EntityName::Default),
                "users/CN%3Dx/clients/<default>",
            ),
        ];
        for (entity, path) in cases {
            assert_eq!(entity.zk_entity_path().as_deref(), Some(path));
            assert_eq!(QuotaEntity::from_zk_entity_path(path), Some(entity));
        }
        assert_eq!(QuotaEntity::from_zk_entity_path("topics/t"), None);
        assert_eq!(QuotaEntity::from_zk_entity_path("users/a/clients"), None);
        assert_eq!(QuotaEntity::from_zk_entity_path("users/%zz"), None);
    }

    #[test]
    fn an_entity_displays_its_components() {
        let e = QuotaEntity::user_client_id(named("a"), EntityName::Default);
        assert_eq!(e.to_string(), "user=a, client-id=<default>");
    }
}
