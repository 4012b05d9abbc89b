//! Which authorizer `server.properties` asks for, as Kafka reads it: `authorizer.class.name`
//! names Kafka's class (so the same file works for both), `super.users` lists principals
//! (`User:a;User:b`) allowed everything, and `allow.everyone.if.no.acl.found` allows a
//! resource no ACL matches.

/// Kafka 3.9's ZooKeeper-mode authorizer: ACLs in ZooKeeper's znodes.
pub const ACL_AUTHORIZER: &str = "kafka.security.authorizer.AclAuthorizer";
/// Kafka's KRaft authorizer: ACLs in the metadata log.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// Where the configured authorizer keeps its ACLs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AclStorage {
    ZooKeeper,
    MetadataLog,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizerSettings {
    pub storage: AclStorage,
    /// `super.users`, each as (principal type, name).
    pub super_users: Vec<(String, String)>,
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerSettings {
    /// The settings from the three keys' values; `None` when no authorizer is configured
    /// (an empty class name, as Kafka's default). An unknown class is an error naming
    /// the ones skua provides.
    pub fn parse(
        class_name: Option<&str>,
        super_users: Option<&str>,
        allow_everyone: Option<&str>,
    ) -> Result<Option<AuthorizerSettings>, String> {
        let storage = match class_name.map(str::trim).unwrap_or("") {
            "" => return Ok(None),
            ACL_AUTHORIZER => AclStorage::ZooKeeper,
            STANDARD_AUTHORIZER => AclStorage::MetadataLog,
            other => {
                return Err(format!(
                    "authorizer.class.name={other} is not an authorizer skua provides; use {ACL_AUTHORIZER} (ZooKeeper mode) or {STANDARD_AUTHORIZER} (single node), or leave it empty"
                ))
            }
        };
        let super_users = super_users
            .unwrap_or("")
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                super::acl::parse_principal(s)
                    .map(|(t, n)| (t.to_string(), n.to_string()))
                    .map_err(|why| format!("super.users: {why}"))
            })
            .collect::<Result<Vec<_>, String>>()?;
        let allow_everyone = match allow_everyone.map(str::trim) {
            None | Some("") => false,
            Some(v) if v.eq_ignore_ascii_case("true") => true,
            Some(v) if v.eq_ignore_ascii_case("false") => false,
            Some(v) => {
                return Err(format!(
                    "allow.everyone.if.no.acl.found={v}: expected true or false"
                ))
            }
        };
        Ok(Some(AuthorizerSettings {
            storage,
            super_users,
            allow_everyone_if_no_acl_found: allow_everyone,
        }))
    }

    /// The settings of a broker config.
    pub fn from_config(
        config: &crate::config::BrokerConfig,
    ) -> Result<Option<AuthorizerSettings>, String> {
        Self::parse(
            config.get("authorizer.class.name").as_deref(),
            config.get("super.users").as_deref(),
            config.get("allow.everyone.if.no.acl.found").as_deref(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_class_names_select_the_storage() {
        assert_eq!(AuthorizerSettings::parse(None, None, None), Ok(None));
        assert_eq!(AuthorizerSettings::parse(Some(" "), None, None), Ok(None));
        let zk = AuthorizerSettings::parse(Some(ACL_AUTHORIZER), None, None)
            .unwrap()
            .unwrap();
        assert_eq!(zk.storage, AclStorage::ZooKeeper);
        assert!(zk.super_users.is_empty() && !zk.allow_everyone_if_no_acl_found);
        let s = AuthorizerSettings::parse(
            Some(STANDARD_AUTHORIZER),
            Some("User:admin;User:CN=broker,O=skua ; "),
            Some("TRUE"),
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.storage, AclStorage::MetadataLog);
        assert_eq!(
            s.super_users,
            vec![
                ("User".to_string(), "admin".to_string()),
                ("User".to_string(), "CN=broker,O=skua".to_string())
            ]
        );
        assert!(s.allow_everyone_if_no_acl_found);
        let err =
            AuthorizerSettings::parse(Some("com.example.MyAuthorizer"), None, None).unwrap_err();
        assert!(err.contains("com.example.MyAuthorizer") && err.contains(STANDARD_AUTHORIZER));
        assert!(AuthorizerSettings::parse(Some(ACL_AUTHORIZER), Some("admin"), None).is_err());
        assert!(AuthorizerSettings::parse(Some(ACL_AUTHORIZER), None, Some("yes")).is_err());
    }
}
