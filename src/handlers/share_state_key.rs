//! The share-partition each partition of a share coordinator RPC names (Initialize-,
//! Read-, Write-, DeleteShareGroupState and ReadShareGroupStateSummary share it).

use kafka_protocol::error::ResponseError;
use uuid::Uuid;

use crate::coordinator::share::SharePartitionKey;

/// The key of one partition of a share-state request; UNSUPPORTED_VERSION while share
/// groups are off (`enabled`), as Kafka answers these RPCs then.
pub fn key(
    enabled: bool,
    group_id: &str,
    topic_id: Uuid,
    partition: i32,
) -> Result<SharePartitionKey, ResponseError> {
    match enabled {
        false => Err(ResponseError::UnsupportedVersion),
        true => Ok(SharePartitionKey {
            group_id: group_id.to_string(),
            topic_id,
            partition,
        }),
    }
}
