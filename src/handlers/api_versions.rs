//! ApiVersions: the versions of every API in the routing table. A broker of a KRaft
//! cluster narrows the APIs it forwards to the active controller in an Envelope to the
//! versions the controller also speaks (the client's request reaches the controller at
//! the client's version), as Kafka's `ApiVersionsResponse.intersectForwardableApis` does
//! with the controller's `NodeApiVersions`; until it knows them it advertises its own.

use std::sync::Arc;

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

use crate::broker::Broker;
use crate::client::reconnecting::ApiVersions;
use crate::router::{self, RequestContext};

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    _req: ApiVersionsRequest,
) -> ApiVersionsResponse {
    let mut answer = response(0, broker.mode());
    if let Some(controller) = broker.kraft_controller() {
        match controller.controller_api_versions() {
            Some(versions) => intersect_forwarded(&mut answer, &versions),
            None => {
                let controller = controller.clone();
                tokio::spawn(async move { controller.learn_controller_api_versions().await });
            }
        }
    }
    if !broker.groups.share_groups_enabled() {
        // Kafka leaves the share group APIs out while `share.version` is 0.
        answer.api_keys.retain(|k| !SHARE_APIS.contains(&k.api_key));
    }
    answer
}

/// The forwarded APIs (`router::KRAFT_BROKER_ROUTES`) narrowed to the versions the active
/// controller answers (`controller`: its ApiVersions); one the controller has no common
/// version of is left out, as Kafka leaves it out.
pub fn intersect_forwarded(answer: &mut ApiVersionsResponse, controller: &ApiVersions) {
    answer.api_keys.retain_mut(|k| {
        if !router::KRAFT_BROKER_ROUTES
            .iter()
            .any(|r| r.api_key as i16 == k.api_key)
        {
            return true;
        }
        let Some(&(min, max)) = controller.get(&k.api_key) else {
            return false;
        };
        k.min_version = k.min_version.max(min);
        k.max_version = k.max_version.min(max);
        k.min_version <= k.max_version
    });
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

#[cfg(test)]
mod tests {
    use super::*;

    fn range(answer: &ApiVersionsResponse, key: ApiKey) -> Option<(i16, i16)> {
        answer
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| (k.min_version, k.max_version))
    }

    /// A controller speaking CreateAcls 2-5 and ElectLeaders 0-1, DescribeQuorum only at
    /// versions skua does not forward, and no DeleteAcls: the forwarded ranges shrink to
    /// the overlap, the others go; APIs skua answers itself are untouched.
    #[test]
    fn forwarded_apis_are_narrowed_to_the_controllers_versions() {
        let mut answer = response(0, router::Mode::KraftBroker);
        let own = |key| range(&response(0, router::Mode::KraftBroker), key);
        assert_eq!(own(ApiKey::CreateAcls), Some((1, 3)));
        let mut controller = ApiVersions::new();
        controller.insert(ApiKey::CreateAcls as i16, (2, 5));
        controller.insert(ApiKey::ElectLeaders as i16, (0, 1));
        controller.insert(ApiKey::DescribeQuorum as i16, (7, 9));
        controller.insert(ApiKey::AlterUserScramCredentials as i16, (0, 0));
        controller.insert(ApiKey::AlterPartitionReassignments as i16, (0, 1));
        controller.insert(ApiKey::ListPartitionReassignments as i16, (0, 0));
        intersect_forwarded(&mut answer, &controller);
        assert_eq!(range(&answer, ApiKey::CreateAcls), Some((2, 3)));
        assert_eq!(range(&answer, ApiKey::ElectLeaders), Some((0, 1)));
        assert_eq!(range(&answer, ApiKey::DescribeQuorum), None);
        assert_eq!(range(&answer, ApiKey::DeleteAcls), None);
        assert_eq!(
            range(&answer, ApiKey::AlterUserScramCredentials),
            Some((0, 0))
        );
        assert_eq!(range(&answer, ApiKey::Produce), own(ApiKey::Produce));
        assert_eq!(
            range(&answer, ApiKey::CreateTopics),
            own(ApiKey::CreateTopics)
        );
        assert!(own(ApiKey::Produce).is_some());
    }
}
