//! Kafka's ACLs as values: an [`AclBinding`] is a resource pattern (type, name, LITERAL
//! or PREFIXED) bound to an access control entry (principal, host, operation, ALLOW or
//! DENY); an [`AclBindingFilter`] selects bindings as DescribeAcls and DeleteAcls do
//! (`AclBindingFilter.matches` with `ResourcePatternFilter` and `AccessControlEntryFilter`).
//! Codes and names are Kafka's, so the same values come off the wire, out of
//! `AccessControlEntryRecord`s and out of ZooKeeper's JSON.

use std::fmt;

pub use super::authorizer::PatternType;
use super::authorizer::CLUSTER_NAME;
use super::operations::{AclOperation, ResourceType};
use crate::controller::records::AccessControlEntryRecord;

/// The resource name that stands for every resource of its type in a LITERAL ACL.
pub const WILDCARD_RESOURCE: &str = "*";
/// The principal that stands for every principal (`KafkaPrincipal.WILDCARD_PRINCIPAL`'s
/// string form; only `User:*` is a wildcard).
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The host that stands for every host.
pub const WILDCARD_HOST: &str = "*";

/// `PatternType` codes: UNKNOWN 0, ANY 1, MATCH 2, LITERAL 3, PREFIXED 4.
pub mod pattern_code {
    pub const ANY: i8 = 1;
    pub const MATCH: i8 = 2;
    pub const LITERAL: i8 = 3;
    pub const PREFIXED: i8 = 4;
}

/// `AclPermissionType` codes: UNKNOWN 0, ANY 1, DENY 2, ALLOW 3.
pub mod permission_code {
    pub const ANY: i8 = 1;
    pub const DENY: i8 = 2;
    pub const ALLOW: i8 = 3;
}

/// `ResourceType` ANY, `AclOperation` ANY: filters only.
pub const ANY_CODE: i8 = 1;

impl PatternType {
    pub fn code(self) -> i8 {
        match self {
            PatternType::Literal => pattern_code::LITERAL,
            PatternType::Prefixed => pattern_code::PREFIXED,
        }
    }

    pub fn from_code(code: i8) -> Option<PatternType> {
        match code {
            pattern_code::LITERAL => Some(PatternType::Literal),
            pattern_code::PREFIXED => Some(PatternType::Prefixed),
            _ => None,
        }
    }

    /// Kafka's enum name (`LITERAL`, `PREFIXED`).
    pub fn name(self) -> &'static str {
        match self {
            PatternType::Literal => "LITERAL",
            PatternType::Prefixed => "PREFIXED",
        }
    }

    pub fn from_name(name: &str) -> Option<PatternType> {
        match name.to_ascii_uppercase().as_str() {
            "LITERAL" => Some(PatternType::Literal),
            "PREFIXED" => Some(PatternType::Prefixed),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    Deny,
    Allow,
}

impl Permission {
    pub fn code(self) -> i8 {
        match self {
            Permission::Deny => permission_code::DENY,
            Permission::Allow => permission_code::ALLOW,
        }
    }

    pub fn from_code(code: i8) -> Option<Permission> {
        match code {
            permission_code::DENY => Some(Permission::Deny),
            permission_code::ALLOW => Some(Permission::Allow),
            _ => None,
        }
    }

    /// Kafka's name in ZooKeeper's ACL JSON (`Allow`, `Deny`).
    pub fn camel_name(self) -> &'static str {
        match self {
            Permission::Deny => "Deny",
            Permission::Allow => "Allow",
        }
    }

    pub fn from_name(name: &str) -> Option<Permission> {
        match name.to_ascii_lowercase().as_str() {
            "deny" => Some(Permission::Deny),
            "allow" => Some(Permission::Allow),
            _ => None,
        }
    }
}

/// Kafka's `ResourcePattern`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourcePattern {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
}

/// Kafka's `AccessControlEntry`: `principal` as `Type:Name` (`User:alice`, `User:*`),
/// `host` an address or `*`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccessControlEntry {
    pub principal: String,
    pub host: String,
    pub operation: AclOperation,
    pub permission: Permission,
}

/// Kafka's `AclBinding`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclBinding {
    pub pattern: ResourcePattern,
    pub entry: AccessControlEntry,
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(pattern=ResourcePattern(resourceType={:?}, name={}, patternType={}), entry=(principal={}, host={}, operation={:?}, permissionType={:?}))",
            self.pattern.resource_type,
            self.pattern.name,
            self.pattern.pattern_type.name(),
            self.entry.principal,
            self.entry.host,
            self.entry.operation,
            self.entry.permission
        )
    }
}

/// Splits `Type:Name` as `SecurityUtils.parseKafkaPrincipal` does (at the first colon).
pub fn parse_principal(principal: &str) -> Result<(&str, &str), String> {
    match principal.split_once(':') {
        Some((t, n)) if !t.is_empty() => Ok((t, n)),
        _ => Err(format!(
            "Could not parse principal from `{principal}` (no colon is present separating the principal type from the principal name)"
        )),
    }
}

impl AclBinding {
    /// Builds a binding from CreateAcls' codes, refusing what Kafka's controller refuses
    /// (`AclControlManager.validateNewAcl`) and the broker's checks before it (the
    /// cluster resource's one name, a principal with a type).
    #[allow(clippy::too_many_arguments)]
    pub fn from_codes(
        resource_type: i8,
        name: &str,
        pattern_type: i8,
        principal: &str,
        host: &str,
        operation: i8,
        permission: i8,
    ) -> Result<AclBinding, String> {
        let resource_type = ResourceType::from_code(resource_type)
            .ok_or_else(|| format!("Invalid resourceType {}", resource_type_name(resource_type)))?;
        let pattern_type = PatternType::from_code(pattern_type)
            .ok_or_else(|| format!("Invalid patternType {}", pattern_type_name(pattern_type)))?;
        let operation = AclOperation::from_code(operation)
            .ok_or_else(|| format!("Invalid operation {}", operation_name(operation)))?;
        let permission = Permission::from_code(permission)
            .ok_or_else(|| format!("Invalid permissionType {}", permission_name(permission)))?;
        if resource_type == ResourceType::Cluster && name != CLUSTER_NAME {
            return Err("The only valid name for the CLUSTER resource is kafka-cluster".into());
        }
        if name.is_empty() {
            return Err("Invalid empty resource name specified".into());
        }
        parse_principal(principal)?;
        Ok(AclBinding {
            pattern: ResourcePattern {
                resource_type,
                name: name.to_string(),
                pattern_type,
            },
            entry: AccessControlEntry {
                principal: principal.to_string(),
                host: host.to_string(),
                operation,
                permission,
            },
        })
    }
}

impl AclBinding {
    /// The ACL a metadata record holds; `None` for codes skua does not know (kept in the
    /// log, never matched).
    pub fn from_record(r: &AccessControlEntryRecord) -> Option<AclBinding> {
        Some(AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::from_code(r.resource_type)?,
                name: r.resource_name.clone(),
                pattern_type: PatternType::from_code(r.pattern_type)?,
            },
            entry: AccessControlEntry {
                principal: r.principal.clone(),
                host: r.host.clone(),
                operation: AclOperation::from_code(r.operation)?,
                permission: Permission::from_code(r.permission_type)?,
            },
        })
    }

    pub fn to_record(&self, id: uuid::Uuid) -> AccessControlEntryRecord {
        AccessControlEntryRecord {
            id,
            resource_type: self.pattern.resource_type.code(),
            resource_name: self.pattern.name.clone(),
            pattern_type: self.pattern.pattern_type.code(),
            principal: self.entry.principal.clone(),
            host: self.entry.host.clone(),
            operation: self.entry.operation.code(),
            permission_type: self.entry.permission.code(),
        }
    }
}

fn resource_type_name(code: i8) -> &'static str {
    match code {
        ANY_CODE => "ANY",
        _ => "UNKNOWN",
    }
}

fn pattern_type_name(code: i8) -> &'static str {
    match code {
        pattern_code::ANY => "ANY",
        pattern_code::MATCH => "MATCH",
        _ => "UNKNOWN",
    }
}

fn operation_name(code: i8) -> &'static str {
    match code {
        ANY_CODE => "ANY",
        _ => "UNKNOWN",
    }
}

fn permission_name(code: i8) -> &'static str {
    match code {
        permission_code::ANY => "ANY",
        _ => "UNKNOWN",
    }
}

/// How a filter matches pattern types (`PatternType` as a filter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternFilter {
    /// Any pattern type; with a name, the pattern's name must equal it.
    Any,
    /// The patterns that would match a resource of the filter's name: LITERAL of that
    /// name or `*`, and PREFIXED ones it starts with.
    Match,
    /// Exactly this pattern type.
    Exactly(PatternType),
}

/// Kafka's `AclBindingFilter`: `None` fields match anything (ANY, or a null string).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclBindingFilter {
    pub resource_type: Option<ResourceType>,
    pub name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<AclOperation>,
    pub permission: Option<Permission>,
}

impl AclBindingFilter {
    /// Every binding.
    pub fn any() -> AclBindingFilter {
        AclBindingFilter {
            resource_type: None,
            name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        }
    }

    /// Builds a filter from DescribeAcls' or DeleteAcls' codes; an UNKNOWN code is
    /// refused, as Kafka refuses an unknown filter (`validateFilter`).
    #[allow(clippy::too_many_arguments)]
    pub fn from_codes(
        resource_type: i8,
        name: Option<&str>,
        pattern_type: i8,
        principal: Option<&str>,
        host: Option<&str>,
        operation: i8,
        permission: i8,
    ) -> Result<AclBindingFilter, String> {
        let resource_type = match resource_type {
            ANY_CODE => None,
            code => Some(
                ResourceType::from_code(code)
                    .ok_or_else(|| "Unknown patternFilter.".to_string())?,
            ),
        };
        let pattern = match pattern_type {
            pattern_code::ANY => PatternFilter::Any,
            pattern_code::MATCH => PatternFilter::Match,
            code => PatternFilter::Exactly(
                PatternType::from_code(code).ok_or_else(|| "Unknown patternFilter.".to_string())?,
            ),
        };
        let operation = match operation {
            ANY_CODE => None,
            code => Some(
                AclOperation::from_code(code).ok_or_else(|| "Unknown entryFilter.".to_string())?,
            ),
        };
        let permission = match permission {
            permission_code::ANY => None,
            code => Some(
                Permission::from_code(code).ok_or_else(|| "Unknown entryFilter.".to_string())?,
            ),
        };
        Ok(AclBindingFilter {
            resource_type,
            name: name.map(str::to_string),
            pattern,
            principal: principal.map(str::to_string),
            host: host.map(str::to_string),
            operation,
            permission,
        })
    }

    /// Whether `binding` is selected (Kafka's `AclBindingFilter.matches`).
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.matches_pattern(&binding.pattern) && self.matches_entry(&binding.entry)
    }

    /// `ResourcePatternFilter.matches`.
    pub fn matches_pattern(&self, p: &ResourcePattern) -> bool {
        if self.resource_type.is_some_and(|t| t != p.resource_type) {
            return false;
        }
        if let PatternFilter::Exactly(t) = self.pattern {
            if t != p.pattern_type {
                return false;
            }
        }
        let Some(name) = &self.name else {
            return true;
        };
        match self.pattern {
            PatternFilter::Any | PatternFilter::Exactly(_) => *name == p.name,
            PatternFilter::Match => match p.pattern_type {
                PatternType::Literal => *name == p.name || p.name == WILDCARD_RESOURCE,
                PatternType::Prefixed => name.starts_with(&p.name),
            },
        }
    }

    /// `AccessControlEntryFilter.matches`.
    pub fn matches_entry(&self, e: &AccessControlEntry) -> bool {
        self.principal.as_ref().is_none_or(|p| *p == e.principal)
            && self.host.as_ref().is_none_or(|h| *h == e.host)
            && self.operation.is_none_or(|o| o == e.operation)
            && self.permission.is_none_or(|p| p == e.permission)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(rt: ResourceType, name: &str, pt: PatternType) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: rt,
                name: name.into(),
                pattern_type: pt,
            },
            entry: AccessControlEntry {
                principal: "User:alice".into(),
                host: "*".into(),
                operation: AclOperation::Read,
                permission: Permission::Allow,
            },
        }
    }

    #[test]
    fn create_refuses_what_kafka_refuses() {
        let ok = AclBinding::from_codes(2, "t", 3, "User:a", "*", 3, 3).unwrap();
        assert_eq!(ok.pattern.resource_type, ResourceType::Topic);
        let err = |r: Result<AclBinding, String>| r.unwrap_err();
        assert_eq!(
            err(AclBinding::from_codes(1, "t", 3, "User:a", "*", 3, 3)),
            "Invalid resourceType ANY"
        );
        assert_eq!(
            err(AclBinding::from_codes(2, "t", 2, "User:a", "*", 3, 3)),
            "Invalid patternType MATCH"
        );
        assert_eq!(
            err(AclBinding::from_codes(2, "t", 3, "User:a", "*", 1, 3)),
            "Invalid operation ANY"
        );
        assert_eq!(
            err(AclBinding::from_codes(2, "t", 3, "User:a", "*", 3, 0)),
            "Invalid permissionType UNKNOWN"
        );
        assert!(
            err(AclBinding::from_codes(4, "c", 3, "User:a", "*", 3, 3)).contains("kafka-cluster")
        );
        assert!(err(AclBinding::from_codes(2, "", 3, "User:a", "*", 3, 3)).contains("empty"));
        assert!(err(AclBinding::from_codes(2, "t", 3, "alice", "*", 3, 3)).contains("colon"));
    }

    #[test]
    fn filters_match_as_kafkas() {
        use PatternType::*;
        let lit = binding(ResourceType::Topic, "foo", Literal);
        let wild = binding(ResourceType::Topic, "*", Literal);
        let pre = binding(ResourceType::Topic, "fo", Prefixed);
        let group = binding(ResourceType::Group, "foo", Literal);
        let f = |rt: i8, name: Option<&str>, pt: i8| {
            AclBindingFilter::from_codes(rt, name, pt, None, None, 1, 1).unwrap()
        };
        // ANY everything.
        assert!([&lit, &wild, &pre, &group]
            .iter()
            .all(|b| AclBindingFilter::any().matches(b)));
        // Type only.
        assert!(f(2, None, 1).matches(&lit) && !f(2, None, 1).matches(&group));
        // ANY pattern with a name: the name must be equal.
        assert!(f(2, Some("foo"), 1).matches(&lit));
        assert!(!f(2, Some("foo"), 1).matches(&wild));
        assert!(!f(2, Some("foo"), 1).matches(&pre));
        // MATCH: every pattern that would match a resource named foo.
        let m = f(2, Some("foo"), 2);
        assert!(m.matches(&lit) && m.matches(&wild) && m.matches(&pre));
        assert!(!f(2, Some("bar"), 2).matches(&pre));
        // Exact pattern types.
        assert!(f(2, Some("fo"), 4).matches(&pre));
        assert!(!f(2, Some("fo"), 3).matches(&pre));
        assert!(f(1, None, 3).matches(&group));
        // Entry filters.
        let e =
            AclBindingFilter::from_codes(1, None, 1, Some("User:alice"), Some("*"), 3, 3).unwrap();
        assert!(e.matches(&lit));
        let other = AclBindingFilter::from_codes(1, None, 1, Some("User:bob"), None, 1, 1).unwrap();
        assert!(!other.matches(&lit));
        let deny = AclBindingFilter::from_codes(1, None, 1, None, None, 1, 2).unwrap();
        assert!(!deny.matches(&lit));
        let write = AclBindingFilter::from_codes(1, None, 1, None, None, 4, 1).unwrap();
        assert!(!write.matches(&lit));
        // Unknown codes are refused.
        assert!(AclBindingFilter::from_codes(0, None, 1, None, None, 1, 1).is_err());
        assert!(AclBindingFilter::from_codes(1, None, 0, None, None, 1, 1).is_err());
        assert!(AclBindingFilter::from_codes(1, None, 1, None, None, 0, 1).is_err());
        assert!(AclBindingFilter::from_codes(1, None, 1, None, None, 1, 0).is_err());
    }

    #[test]
    fn names_round_trip() {
        for p in [Permission::Allow, Permission::Deny] {
            assert_eq!(Permission::from_name(p.camel_name()), Some(p));
            assert_eq!(Permission::from_code(p.code()), Some(p));
        }
        for p in [PatternType::Literal, PatternType::Prefixed] {
            assert_eq!(PatternType::from_name(p.name()), Some(p));
            assert_eq!(PatternType::from_code(p.code()), Some(p));
        }
        assert_eq!(
            parse_principal("User:CN=a,O=b:c").unwrap(),
            ("User", "CN=a,O=b:c")
        );
    }
}
