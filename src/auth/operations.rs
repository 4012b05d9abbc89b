//! Authorized operations as Kafka reports them: a bit field with bit `code` set for each
//! allowed `AclOperation` (Kafka's `Utils.to32BitField`).
//!
//! Without an authorizer Kafka answers every operation its ACLs can name for the resource
//! type (`AclEntry.supportedOperations`), and `NOT_REQUESTED` when the request did not ask.
//! An authorizer will narrow these per principal and resource.

/// The schemas' default for an authorized-operations field: the client did not ask.
pub const NOT_REQUESTED: i32 = i32::MIN;

/// `AclOperation` codes (clients/src/main/java/org/apache/kafka/common/acl/AclOperation.java).
/// `All` appears only in ACLs (it grants or denies every operation); a check names one
/// of the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum AclOperation {
    All = 2,
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
    CreateTokens = 13,
    DescribeTokens = 14,
}

impl AclOperation {
    /// Every operation an ACL may name, by code.
    pub const ALL: [AclOperation; 13] = [
        AclOperation::All,
        AclOperation::Read,
        AclOperation::Write,
        AclOperation::Create,
        AclOperation::Delete,
        AclOperation::Alter,
        AclOperation::Describe,
        AclOperation::ClusterAction,
        AclOperation::DescribeConfigs,
        AclOperation::AlterConfigs,
        AclOperation::IdempotentWrite,
        AclOperation::CreateTokens,
        AclOperation::DescribeTokens,
    ];

    pub fn code(self) -> i8 {
        self as u8 as i8
    }

    /// The operation of a code an ACL may hold (not UNKNOWN 0 or ANY 1).
    pub fn from_code(code: i8) -> Option<AclOperation> {
        Self::ALL.into_iter().find(|o| o.code() == code)
    }

    /// Kafka's name in ZooKeeper's ACL JSON (`SecurityUtils.operationName`: `Read`,
    /// `IdempotentWrite`).
    pub fn camel_name(self) -> &'static str {
        use AclOperation::*;
        match self {
            All => "All",
            Read => "Read",
            Write => "Write",
            Create => "Create",
            Delete => "Delete",
            Alter => "Alter",
            Describe => "Describe",
            ClusterAction => "ClusterAction",
            DescribeConfigs => "DescribeConfigs",
            AlterConfigs => "AlterConfigs",
            IdempotentWrite => "IdempotentWrite",
            CreateTokens => "CreateTokens",
            DescribeTokens => "DescribeTokens",
        }
    }

    /// Parses Kafka's names as `AclOperation.fromString` does: any case, with or without
    /// underscores (`IdempotentWrite`, `IDEMPOTENT_WRITE`).
    pub fn from_name(name: &str) -> Option<AclOperation> {
        let wanted = name.replace('_', "");
        Self::ALL
            .into_iter()
            .find(|o| o.camel_name().eq_ignore_ascii_case(&wanted))
    }
}

/// Kafka's resource types (`org.apache.kafka.common.resource.ResourceType`), with their
/// codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ResourceType {
    Topic = 2,
    Group = 3,
    Cluster = 4,
    TransactionalId = 5,
    DelegationToken = 6,
    User = 7,
}

impl ResourceType {
    pub const ALL: [ResourceType; 6] = [
        ResourceType::Topic,
        ResourceType::Group,
        ResourceType::Cluster,
        ResourceType::TransactionalId,
        ResourceType::DelegationToken,
        ResourceType::User,
    ];

    pub fn code(self) -> i8 {
        self as u8 as i8
    }

    /// The type of a code an ACL may hold (not UNKNOWN 0 or ANY 1).
    pub fn from_code(code: i8) -> Option<ResourceType> {
        Self::ALL.into_iter().find(|t| t.code() == code)
    }

    /// Kafka's name in ZooKeeper paths (`SecurityUtils.resourceTypeName`: `Topic`,
    /// `TransactionalId`).
    pub fn camel_name(self) -> &'static str {
        match self {
            ResourceType::Topic => "Topic",
            ResourceType::Group => "Group",
            ResourceType::Cluster => "Cluster",
            ResourceType::TransactionalId => "TransactionalId",
            ResourceType::DelegationToken => "DelegationToken",
            ResourceType::User => "User",
        }
    }

    /// Parses Kafka's names in any case, with or without underscores (`Topic`,
    /// `TRANSACTIONAL_ID`), as `ResourceType.fromString` and `SecurityUtils` read them.
    pub fn from_name(name: &str) -> Option<ResourceType> {
        let wanted = name.replace('_', "");
        Self::ALL
            .into_iter()
            .find(|t| t.camel_name().eq_ignore_ascii_case(&wanted))
    }

    /// Index of this type in per-type tables.
    pub fn index(self) -> usize {
        self as usize - 2
    }

    /// The operations an ACL on this resource type can grant.
    pub fn supported_operations(self) -> &'static [AclOperation] {
        use AclOperation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            // Group configs (KIP-848) made DESCRIBE_CONFIGS and ALTER_CONFIGS group operations.
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
        }
    }
}

/// What the caller may do on a resource of `resource_type`: with no authorizer, everything.
pub fn authorized_operations(resource_type: ResourceType) -> i32 {
    to_bit_field(resource_type.supported_operations())
}

/// The answer to a request that may or may not ask for authorized operations.
pub fn if_requested(requested: bool, resource_type: ResourceType) -> i32 {
    if requested {
        authorized_operations(resource_type)
    } else {
        NOT_REQUESTED
    }
}

/// Kafka's `Utils.to32BitField` of a set of operations.
pub fn to_bit_field(ops: &[AclOperation]) -> i32 {
    ops.iter().fold(0, |bits, op| bits | (1 << *op as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values Apache Kafka 4.1 answers with no authorizer (or for a super user).
    #[test]
    fn bit_fields_match_kafka() {
        assert_eq!(authorized_operations(ResourceType::Topic), 3576);
        assert_eq!(authorized_operations(ResourceType::Group), 3400);
        assert_eq!(authorized_operations(ResourceType::Cluster), 8096);
        assert_eq!(if_requested(false, ResourceType::Topic), i32::MIN);
    }

    #[test]
    fn names_and_codes_as_kafkas() {
        for op in AclOperation::ALL {
            assert_eq!(AclOperation::from_code(op.code()), Some(op));
            assert_eq!(AclOperation::from_name(op.camel_name()), Some(op));
        }
        assert_eq!(
            AclOperation::from_name("IDEMPOTENT_WRITE"),
            Some(AclOperation::IdempotentWrite)
        );
        assert_eq!(AclOperation::from_code(1), None);
        assert_eq!(AclOperation::DescribeConfigs.code(), 10);
        for t in ResourceType::ALL {
            assert_eq!(ResourceType::from_code(t.code()), Some(t));
            assert_eq!(ResourceType::from_name(t.camel_name()), Some(t));
        }
        assert_eq!(
            ResourceType::from_name("TRANSACTIONAL_ID"),
            Some(ResourceType::TransactionalId)
        );
        assert_eq!(ResourceType::User.code(), 7);
        assert_eq!(ResourceType::from_code(1), None);
    }
}
