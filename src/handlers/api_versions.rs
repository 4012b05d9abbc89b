//! ApiVersions: the versions of every API in the routing table.

use std::sync::Arc;

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use crate::broker::Broker;
use crate::router::{self, RequestContext};

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    _req: ApiVersionsRequest,
) -> ApiVersionsResponse {
    let mut answer = response(0, broker.mode());
    if !broker.groups.share_groups_enabled() {
        // Kafka leaves the share group APIs out while `share.version` is 0.
        answer.api_keys.retain(|k| !SHARE_APIS.contains(&k.api_key));
    }
    answer
}

/// The share group APIs, advertised only while share groups are enabled.
const SHARE_APIS: [i16; 12] = [
    ApiKey::ShareGroupHeartbeat as i16,
    ApiKey::ShareGroupDescribe as i16,
    ApiKey::ShareFetch as i16,
    ApiKey::ShareAcknowledge as i16,
    ApiKey::DescribeShareGroupOffsets as i16,
    ApiKey::AlterShareGroupOffsets as i16,
    ApiKey::DeleteShareGroupOffsets as i16,
    ApiKey::InitializeShareGroupState as i16,
    ApiKey::ReadShareGroupState as i16,
    ApiKey::WriteShareGroupState as i16,
    ApiKey::DeleteShareGroupState as i16,
    ApiKey::ReadShareGroupStateSummary as i16,
];

/// The response with every route of a broker in `mode`, and
/// `error_code` (UNSUPPORTED_VERSION when the request's version was unknown: the client then retries
/// with a version from our range).
pub fn response(error_code: i16, mode: router::Mode) -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(
            router::routes(mode)
                .map(|r| {
                    ApiVersion::default()
                        .with_api_key(r.api_key as i16)
                        .with_min_version(r.min_version)
                        .with_max_version(r.max_version)
                })
                .collect(),
        )
}
