//! The ACLs in force, indexed for the checks on every produce and fetch: per resource
//! type, LITERAL ACLs by exact name, the LITERAL `*` ones apart, and PREFIXED ones by
//! prefix with the set of prefix lengths in use, so a check costs a few hash lookups
//! whatever the number of ACLs (one per distinct prefix length, not one per ACL).
//!
//! The decision is Kafka's (`StandardAuthorizerData.findAclRule` / `AclAuthorizer`):
//! among the ACLs whose pattern matches the resource, one that matches the principal
//! (or `User:*`), the host (or `*`) and the operation (or ALL) decides; a DENY wins over
//! any ALLOW; READ, WRITE, DELETE and ALTER allow DESCRIBE, and ALTER_CONFIGS allows
//! DESCRIBE_CONFIGS (ALLOW ACLs only: DENY READ does not deny DESCRIBE). When no ACL at
//! all matches the resource, the caller's no-ACL rule (`allow.everyone.if.no.acl.found`)
//! applies; when some do but none grants, the answer is DENY.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::str::FromStr;

use super::acl::{
    parse_principal, AclBinding, PatternType, Permission, WILDCARD_HOST, WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
};
use super::operations::{AclOperation, ResourceType};

/// Who asks, as the index compares it.
#[derive(Clone, Copy, Debug)]
pub struct Who<'a> {
    pub principal_type: &'a str,
    pub principal_name: &'a str,
    pub host: IpAddr,
}

/// What the ACLs say about one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// A matching DENY ACL.
    Deny,
    /// A matching ALLOW ACL and no matching DENY.
    Allow,
    /// ACLs match the resource, but none this principal, host and operation.
    NoMatchingAcl,
    /// No ACL matches the resource at all.
    NoResourceAcls,
}

#[derive(Clone, Debug)]
enum HostMatch {
    Any,
    Ip(IpAddr),
    /// Not an address: Kafka compares ACL hosts with the client's address as text, so a
    /// host name never matches.
    Never,
}

/// One ACL's entry, ready to compare.
#[derive(Clone, Debug)]
struct Entry {
    /// `None` for `User:*`.
    principal: Option<(Box<str>, Box<str>)>,
    host: HostMatch,
    operation: AclOperation,
    permission: Permission,
}

impl Entry {
    fn of(binding: &AclBinding) -> Entry {
        let e = &binding.entry;
        let principal = match e.principal.as_str() {
            WILDCARD_PRINCIPAL => None,
            p => {
                let (t, n) = parse_principal(p).unwrap_or(("", p));
                Some((t.into(), n.into()))
            }
        };
        let host = match e.host.as_str() {
            WILDCARD_HOST => HostMatch::Any,
            h => {
                IpAddr::from_str(h).map_or(HostMatch::Never, |ip| HostMatch::Ip(ip.to_canonical()))
            }
        };
        Entry {
            principal,
            host,
            operation: e.operation,
            permission: e.permission,
        }
    }

    fn matches_who(&self, who: &Who<'_>) -> bool {
        let principal = match &self.principal {
            None => true,
            Some((t, n)) => **t == *who.principal_type && **n == *who.principal_name,
        };
        principal
            && match self.host {
                HostMatch::Any => true,
                HostMatch::Ip(ip) => ip == who.host,
                HostMatch::Never => false,
            }
    }

    /// Kafka's `findResult` once principal and host match.
    fn result(&self, operation: AclOperation) -> Option<Permission> {
        use AclOperation::*;
        let applies = match (self.operation, self.permission) {
            (All, _) => true,
            (op, Permission::Deny) => op == operation,
            (op, Permission::Allow) => match operation {
                Describe => matches!(op, Describe | Read | Write | Delete | Alter),
                DescribeConfigs => matches!(op, DescribeConfigs | AlterConfigs),
                _ => op == operation,
            },
        };
        applies.then_some(self.permission)
    }
}

/// The ACLs of one resource type.
#[derive(Clone, Debug, Default)]
struct TypeAcls {
    literal: HashMap<Box<str>, Vec<Entry>>,
    wildcard: Vec<Entry>,
    prefixed: HashMap<Box<str>, Vec<Entry>>,
    /// The byte lengths of the prefixes in `prefixed`, ascending.
    prefix_lens: Vec<usize>,
}

impl TypeAcls {
    /// The entry lists whose pattern matches resource `name`.
    fn matching<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s Vec<Entry>> + 's {
        let literal = self.literal.get(name);
        let wildcard = (!self.wildcard.is_empty()).then_some(&self.wildcard);
        let prefixed = self
            .prefix_lens
            .iter()
            .take_while(move |&&len| len <= name.len())
            .filter(move |&&len| name.is_char_boundary(len))
            .filter_map(move |&len| self.prefixed.get(&name[..len]));
        literal.into_iter().chain(wildcard).chain(prefixed)
    }
}

/// Every ACL in force, indexed.
#[derive(Clone, Debug, Default)]
pub struct AclIndex {
    types: [TypeAcls; 6],
    bindings: BTreeSet<AclBinding>,
}

impl AclIndex {
    pub fn new(bindings: impl IntoIterator<Item = AclBinding>) -> AclIndex {
        let mut index = AclIndex::default();
        for b in bindings {
            index.bindings.insert(b);
        }
        for b in &index.bindings {
            let acls = &mut index.types[b.pattern.resource_type.index()];
            let entry = Entry::of(b);
            let name: &str = &b.pattern.name;
            match b.pattern.pattern_type {
                PatternType::Literal if name == WILDCARD_RESOURCE => acls.wildcard.push(entry),
                PatternType::Literal => acls.literal.entry(name.into()).or_default().push(entry),
                PatternType::Prefixed => {
                    acls.prefixed.entry(name.into()).or_default().push(entry);
                    if let Err(i) = acls.prefix_lens.binary_search(&name.len()) {
                        acls.prefix_lens.insert(i, name.len());
                    }
                }
            }
        }
        index
    }

    /// Every binding, in a stable order.
    pub fn bindings(&self) -> &BTreeSet<AclBinding> {
        &self.bindings
    }

    pub fn len(&self) -> usize {
        self.bindings.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bindings.is_empty()
    }

    /// What the ACLs say about `who` performing `operation` on resource `name`, and how
    /// many entries were compared (the cost of the decision).
    pub fn find(
        &self,
        who: &Who<'_>,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> (Rule, usize) {
        let mut resource_acls = false;
        let mut allowed = false;
        let mut compared = 0;
        for list in self.types[resource_type.index()].matching(name) {
            resource_acls = true;
            compared += list.len();
            for entry in list {
                if !entry.matches_who(who) {
                    continue;
                }
                match entry.result(operation) {
                    Some(Permission::Deny) => return (Rule::Deny, compared),
                    Some(Permission::Allow) => allowed = true,
                    None => {}
                }
            }
        }
        let rule = match (allowed, resource_acls) {
            (true, _) => Rule::Allow,
            (false, true) => Rule::NoMatchingAcl,
            (false, false) => Rule::NoResourceAcls,
        };
        (rule, compared)
    }

    /// Whether `who` could perform `operation` on some resource of `resource_type`
    /// (Kafka's `Authorizer.authorizeByResourceType`, KIP-679's "WRITE on any topic"):
    /// an ALLOW ACL matching the principal, host and operation, on a literal name or
    /// prefix that no DENY ACL covers (a literal DENY of that name, or a DENY prefix of
    /// it); a DENY on `*` denies all. Only the operation itself or ALL count here, as in
    /// Kafka's default implementation (no implied DESCRIBE).
    pub fn any_allowed(
        &self,
        who: &Who<'_>,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        let acls = &self.types[resource_type.index()];
        let applies = |e: &Entry| {
            e.matches_who(who) && (e.operation == operation || e.operation == AclOperation::All)
        };
        let has =
            |list: &Vec<Entry>, p: Permission| list.iter().any(|e| applies(e) && e.permission == p);
        if has(&acls.wildcard, Permission::Deny) {
            return false;
        }
        if has(&acls.wildcard, Permission::Allow) {
            return true;
        }
        let denied_prefix = |name: &str| {
            acls.prefixed
                .iter()
                .any(|(p, list)| name.starts_with(&**p) && has(list, Permission::Deny))
        };
        let literal_allowed = acls.literal.iter().any(|(name, list)| {
            has(list, Permission::Allow) && !has(list, Permission::Deny) && !denied_prefix(name)
        });
        literal_allowed
            || acls
                .prefixed
                .iter()
                .any(|(name, list)| has(list, Permission::Allow) && !denied_prefix(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::acl::{AccessControlEntry, ResourcePattern};
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn acl(
        rt: ResourceType,
        name: &str,
        pt: PatternType,
        principal: &str,
        host: &str,
        op: AclOperation,
        perm: Permission,
    ) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: rt,
                name: name.into(),
                pattern_type: pt,
            },
            entry: AccessControlEntry {
                principal: principal.into(),
                host: host.into(),
                operation: op,
                permission: perm,
            },
        }
    }

    fn topic(
        name: &str,
        pt: PatternType,
        principal: &str,
        op: AclOperation,
        perm: Permission,
    ) -> AclBinding {
        acl(ResourceType::Topic, name, pt, principal, "*", op, perm)
    }

    const ALICE: Who<'static> = Who {
        principal_type: "User",
        principal_name: "alice",
        host: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
    };
    const BOB: Who<'static> = Who {
        principal_type: "User",
        principal_name: "bob",
        host: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
    };

    fn rule(index: &AclIndex, who: &Who<'_>, op: AclOperation, name: &str) -> Rule {
        index.find(who, op, ResourceType::Topic, name).0
    }

    use AclOperation::*;
    use PatternType::*;
    use Permission::*;

    #[test]
    fn literal_wildcard_and_prefixed_patterns() {
        let index = AclIndex::new([
            topic("orders", Literal, "User:alice", Read, Allow),
            topic("*", Literal, "User:bob", Write, Allow),
            topic("pay", Prefixed, "User:alice", Write, Allow),
            topic("payments-", Prefixed, "User:alice", Delete, Allow),
        ]);
        assert_eq!(rule(&index, &ALICE, Read, "orders"), Rule::Allow);
        // A literal name matches only itself.
        assert_eq!(rule(&index, &ALICE, Read, "orders2"), Rule::NoMatchingAcl);
        assert_eq!(rule(&index, &ALICE, Read, "order"), Rule::NoMatchingAcl);
        // `*` matches every topic, for its principal only.
        assert_eq!(rule(&index, &BOB, Write, "anything"), Rule::Allow);
        assert_eq!(rule(&index, &ALICE, Write, "orders"), Rule::NoMatchingAcl);
        // Prefixes match names that start with them (the prefix itself included).
        assert_eq!(rule(&index, &ALICE, Write, "pay"), Rule::Allow);
        assert_eq!(rule(&index, &ALICE, Write, "payments-eu"), Rule::Allow);
        assert_eq!(rule(&index, &ALICE, Delete, "payments-eu"), Rule::Allow);
        assert_eq!(rule(&index, &ALICE, Delete, "payroll"), Rule::NoMatchingAcl);
        assert_eq!(rule(&index, &ALICE, Write, "pa"), Rule::NoMatchingAcl);
        // Another resource type sees none of them.
        assert_eq!(
            index.find(&ALICE, Read, ResourceType::Group, "orders").0,
            Rule::NoResourceAcls
        );
        // No ACL on the resource at all, but bob's wildcard covers every topic.
        let no_wildcard = AclIndex::new([topic("orders", Literal, "User:alice", Read, Allow)]);
        assert_eq!(
            rule(&no_wildcard, &ALICE, Read, "other"),
            Rule::NoResourceAcls
        );
    }

    #[test]
    fn deny_wins_over_allow_from_any_pattern() {
        let index = AclIndex::new([
            topic("orders", Literal, "User:alice", Read, Allow),
            topic("ord", Prefixed, "User:alice", Read, Deny),
            topic("*", Literal, "User:*", Write, Allow),
            topic("*", Literal, "User:alice", Write, Deny),
        ]);
        assert_eq!(rule(&index, &ALICE, Read, "orders"), Rule::Deny);
        assert_eq!(rule(&index, &ALICE, Write, "x"), Rule::Deny);
        assert_eq!(rule(&index, &BOB, Write, "x"), Rule::Allow);
    }

    #[test]
    fn implied_operations_and_all() {
        let index = AclIndex::new([
            topic("r", Literal, "User:alice", Read, Allow),
            topic("w", Literal, "User:alice", Write, Allow),
            topic("d", Literal, "User:alice", Delete, Allow),
            topic("a", Literal, "User:alice", Alter, Allow),
            topic("c", Literal, "User:alice", Create, Allow),
            topic("ac", Literal, "User:alice", AlterConfigs, Allow),
            topic("all", Literal, "User:alice", All, Allow),
            topic("deny-read", Literal, "User:alice", Read, Deny),
            topic("deny-read", Literal, "User:alice", Describe, Allow),
            topic("deny-all", Literal, "User:alice", All, Deny),
            topic("deny-all", Literal, "User:alice", Read, Allow),
        ]);
        for name in ["r", "w", "d", "a"] {
            assert_eq!(rule(&index, &ALICE, Describe, name), Rule::Allow, "{name}");
        }
        // CREATE does not imply DESCRIBE; READ does not imply WRITE.
        assert_eq!(rule(&index, &ALICE, Describe, "c"), Rule::NoMatchingAcl);
        assert_eq!(rule(&index, &ALICE, Write, "r"), Rule::NoMatchingAcl);
        assert_eq!(rule(&index, &ALICE, DescribeConfigs, "ac"), Rule::Allow);
        assert_eq!(rule(&index, &ALICE, AlterConfigs, "ac"), Rule::Allow);
        assert_eq!(
            rule(&index, &ALICE, DescribeConfigs, "r"),
            Rule::NoMatchingAcl
        );
        for op in [
            Read,
            Write,
            Create,
            Delete,
            Alter,
            Describe,
            DescribeConfigs,
            AlterConfigs,
        ] {
            assert_eq!(rule(&index, &ALICE, op, "all"), Rule::Allow, "{op:?}");
            assert_eq!(rule(&index, &ALICE, op, "deny-all"), Rule::Deny, "{op:?}");
        }
        // A DENY of READ does not deny DESCRIBE.
        assert_eq!(rule(&index, &ALICE, Describe, "deny-read"), Rule::Allow);
        assert_eq!(rule(&index, &ALICE, Read, "deny-read"), Rule::Deny);
    }

    #[test]
    fn principals_and_hosts() {
        let index = AclIndex::new([
            acl(
                ResourceType::Topic,
                "t",
                Literal,
                "User:alice",
                "10.0.0.1",
                Read,
                Allow,
            ),
            acl(
                ResourceType::Topic,
                "t",
                Literal,
                "User:*",
                "10.0.0.9",
                Write,
                Allow,
            ),
            acl(
                ResourceType::Topic,
                "v6",
                Literal,
                "User:alice",
                "0:0:0:0:0:0:0:1",
                Read,
                Allow,
            ),
            acl(
                ResourceType::Topic,
                "name",
                Literal,
                "User:alice",
                "localhost",
                Read,
                Allow,
            ),
            acl(
                ResourceType::Topic,
                "g",
                Literal,
                "Group:*",
                "*",
                Read,
                Allow,
            ),
            acl(
                ResourceType::Topic,
                "dn",
                Literal,
                "User:CN=alice,O=x",
                "*",
                Read,
                Allow,
            ),
        ]);
        assert_eq!(rule(&index, &ALICE, Read, "t"), Rule::Allow);
        // Same principal, another host.
        let elsewhere = Who {
            host: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)),
            ..ALICE
        };
        assert_eq!(rule(&index, &elsewhere, Read, "t"), Rule::NoMatchingAcl);
        // `User:*` with a host: any principal from that host.
        let from9 = Who {
            host: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 9)),
            ..BOB
        };
        assert_eq!(rule(&index, &from9, Write, "t"), Rule::Allow);
        assert_eq!(rule(&index, &BOB, Write, "t"), Rule::NoMatchingAcl);
        // Another principal type of the same name is another principal.
        let group_alice = Who {
            principal_type: "Group",
            ..ALICE
        };
        assert_eq!(rule(&index, &group_alice, Read, "t"), Rule::NoMatchingAcl);
        // IPv6 in Java's long form matches the address; a v4-mapped client is v4.
        let v6 = Who {
            host: IpAddr::V6(Ipv6Addr::LOCALHOST),
            ..ALICE
        };
        assert_eq!(rule(&index, &v6, Read, "v6"), Rule::Allow);
        // A host name never matches (Kafka compares addresses).
        let local = Who {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            ..ALICE
        };
        assert_eq!(rule(&index, &local, Read, "name"), Rule::NoMatchingAcl);
        // Only `User:*` is a wildcard principal.
        assert_eq!(rule(&index, &ALICE, Read, "g"), Rule::NoMatchingAcl);
        let dn = Who {
            principal_name: "CN=alice,O=x",
            ..ALICE
        };
        assert_eq!(rule(&index, &dn, Read, "dn"), Rule::Allow);
    }

    #[test]
    fn every_resource_type_is_kept_apart() {
        let index = AclIndex::new(ResourceType::ALL.map(|rt| {
            acl(
                rt,
                if rt == ResourceType::Cluster {
                    "kafka-cluster"
                } else {
                    "x"
                },
                Literal,
                "User:alice",
                "*",
                All,
                Allow,
            )
        }));
        for rt in ResourceType::ALL {
            let name = if rt == ResourceType::Cluster {
                "kafka-cluster"
            } else {
                "x"
            };
            assert_eq!(
                index.find(&ALICE, Describe, rt, name).0,
                Rule::Allow,
                "{rt:?}"
            );
            assert_eq!(
                index.find(&ALICE, Describe, rt, "y").0,
                Rule::NoResourceAcls,
                "{rt:?}"
            );
        }
        assert_eq!(index.len(), 6);
    }

    #[test]
    fn prefixes_on_multibyte_names() {
        let index = AclIndex::new([
            topic("é", Prefixed, "User:alice", Read, Allow),
            topic("ab", Prefixed, "User:alice", Read, Allow),
        ]);
        assert_eq!(rule(&index, &ALICE, Read, "éclair"), Rule::Allow);
        // Byte length 2 falls inside "é": skipped, never a panic.
        assert_eq!(rule(&index, &ALICE, Read, "ée"), Rule::Allow);
        assert_eq!(rule(&index, &ALICE, Read, "aé"), Rule::NoResourceAcls);
    }

    /// Thousands of ACLs on other resources cost a check nothing: it compares only the
    /// entries of the patterns matching its resource.
    #[test]
    fn a_check_compares_only_its_resources_entries() {
        let mut acls: Vec<AclBinding> = (0..10_000)
            .map(|i| topic(&format!("topic-{i}"), Literal, "User:alice", Read, Allow))
            .collect();
        acls.extend((0..1000).map(|i| {
            topic(
                &format!("prefix-{i}-"),
                Prefixed,
                "User:alice",
                Write,
                Allow,
            )
        }));
        let index = AclIndex::new(acls);
        let (r, compared) = index.find(&ALICE, Read, ResourceType::Topic, "topic-5000");
        assert_eq!((r, compared), (Rule::Allow, 1));
        let (r, compared) = index.find(&ALICE, Write, ResourceType::Topic, "prefix-999-x");
        assert_eq!((r, compared), (Rule::Allow, 1));
    }

    #[test]
    fn any_allowed_by_resource_type() {
        let any = |acls: Vec<AclBinding>| {
            AclIndex::new(acls).any_allowed(&ALICE, Write, ResourceType::Topic)
        };
        assert!(!any(vec![]));
        assert!(any(vec![topic("t", Literal, "User:alice", Write, Allow)]));
        assert!(any(vec![topic("t", Prefixed, "User:*", All, Allow)]));
        // Implied operations do not count; another principal does not count.
        assert!(!any(vec![topic("t", Literal, "User:alice", Read, Allow)]));
        assert!(!any(vec![topic("t", Literal, "User:bob", Write, Allow)]));
        // A DENY of the same literal, or a DENY prefix of it, dominates.
        assert!(!any(vec![
            topic("t", Literal, "User:alice", Write, Allow),
            topic("t", Literal, "User:alice", Write, Deny)
        ]));
        assert!(!any(vec![
            topic("tx", Literal, "User:alice", Write, Allow),
            topic("txp", Prefixed, "User:alice", Write, Allow),
            topic("t", Prefixed, "User:alice", Write, Deny)
        ]));
        // A DENY prefix that does not cover the allowed one does not.
        assert!(any(vec![
            topic("a", Prefixed, "User:alice", Write, Allow),
            topic("ab", Prefixed, "User:alice", Write, Deny)
        ]));
        // A DENY on `*` denies all; an ALLOW on `*` allows.
        assert!(!any(vec![
            topic("t", Literal, "User:alice", Write, Allow),
            topic("*", Literal, "User:*", Write, Deny)
        ]));
        assert!(any(vec![topic("*", Literal, "User:alice", Write, Allow)]));
    }
}
