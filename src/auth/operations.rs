//! Authorized operations as Kafka reports them: a bit field with bit `code` set for each
//! allowed `AclOperation` (Kafka's `Utils.to32BitField`).
//!
//! Without an authorizer Kafka answers every operation its ACLs can name for the resource
//! type (`AclEntry.supportedOperations`), and `NOT_REQUESTED` when the request did not ask.
//! An authorizer will narrow these per principal and resource.

/// The schemas' default for an authorized-operations field: the client did not ask.
pub const NOT_REQUESTED: i32 = i32::MIN;

/// `AclOperation` codes (clients/src/main/java/org/apache/kafka/common/acl/AclOperation.java).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum AclOperation {
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
}

/// The resource types whose operations skua reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceType {
    Topic,
    Group,
    Cluster,
    TransactionalId,
}

impl ResourceType {
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

fn to_bit_field(ops: &[AclOperation]) -> i32 {
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
}
