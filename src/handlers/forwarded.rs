//! The requests a KRaft cluster's broker forwards to the active controller (the router's
//! `KRAFT_BROKER_ROUTES`), as Kafka 4's `KafkaApis.maybeForwardToController` does: sent in
//! an Envelope with the client's principal and address, answered with the controller's
//! response. When forwarding fails every entry gets the error (Kafka's
//! `AbstractRequest.getErrorResponse`): REQUEST_TIMED_OUT when no active controller
//! answered in time, UNKNOWN_SERVER_ERROR when it refused the Envelope.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Request, StrBytes};

use super::str_bytes;
use crate::broker::Broker;
use crate::controller::kraft::envelope::Origin;
use crate::router::RequestContext;

/// A request a KRaft broker forwards, and its answer when forwarding fails.
pub trait Forwarded: Request + Send + Sync + 'static {
    /// The response giving every entry of the request `error` (Kafka's
    /// `getErrorResponse`).
    fn error_response(&self, error: ResponseError, message: &str) -> Self::Response;
}

pub async fn handle<R: Forwarded>(broker: Arc<Broker>, ctx: RequestContext, req: R) -> R::Response {
    let Some(controller) = broker.kraft_controller() else {
        // The route exists only on a KRaft broker.
        return req.error_response(ResponseError::UnknownServerError, "not a KRaft broker");
    };
    let origin = Origin {
        principal_type: ctx.session.principal.principal_type.to_string(),
        principal_name: ctx.session.principal.name.to_string(),
        address: ctx.peer.ip(),
        correlation_id: ctx.correlation_id,
        client_id: ctx.client_id.clone(),
    };
    match controller.forward(&origin, &req, ctx.api_version).await {
        Ok(response) => response,
        Err(e) => {
            tracing::warn!(api = ?ctx.api_key, principal = %ctx.session.principal, "forwarding to the active controller failed: {}", e.message);
            req.error_response(e.error, &e.message)
        }
    }
}

fn message(m: &str) -> Option<StrBytes> {
    Some(str_bytes(m))
}

impl Forwarded for CreateAclsRequest {
    fn error_response(&self, error: ResponseError, m: &str) -> CreateAclsResponse {
        CreateAclsResponse::default().with_results(
            self.creations
                .iter()
                .map(|_| {
                    AclCreationResult::default()
                        .with_error_code(error.code())
                        .with_error_message(message(m))
                })
                .collect(),
        )
    }
}

impl Forwarded for DeleteAclsRequest {
    fn error_response(&self, error: ResponseError, m: &str) -> DeleteAclsResponse {
        DeleteAclsResponse::default().with_filter_results(
            self.filters
                .iter()
                .map(|_| {
                    DeleteAclsFilterResult::default()
                        .with_error_code(error.code())
                        .with_error_message(message(m))
                })
                .collect(),
        )
    }
}

impl Forwarded for AlterUserScramCredentialsRequest {
    /// One result per user named, in the order first named.
    fn error_response(&self, error: ResponseError, m: &str) -> AlterUserScramCredentialsResponse {
        let mut users: Vec<&StrBytes> = Vec::new();
        let named = self
            .deletions
            .iter()
            .map(|d| &d.name)
            .chain(self.upsertions.iter().map(|u| &u.name));
        for user in named {
            if !users.contains(&user) {
                users.push(user);
            }
        }
        AlterUserScramCredentialsResponse::default().with_results(
            users
                .into_iter()
                .map(|u| {
                    AlterUserScramCredentialsResult::default()
                        .with_user(u.clone())
                        .with_error_code(error.code())
                        .with_error_message(message(m))
                })
                .collect(),
        )
    }
}

impl Forwarded for ElectLeadersRequest {
    fn error_response(&self, error: ResponseError, m: &str) -> ElectLeadersResponse {
        let topics = self.topic_partitions.iter().flatten();
        ElectLeadersResponse::default()
            .with_error_code(error.code())
            .with_replica_election_results(
                topics
                    .map(|t| {
                        ReplicaElectionResult::default()
                            .with_topic(t.topic.clone())
                            .with_partition_result(
                                t.partitions
                                    .iter()
                                    .map(|&p| {
                                        PartitionResult::default()
                                            .with_partition_id(p)
                                            .with_error_code(error.code())
                                            .with_error_message(message(m))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
    }
}

impl Forwarded for AlterPartitionReassignmentsRequest {
    fn error_response(&self, error: ResponseError, m: &str) -> AlterPartitionReassignmentsResponse {
        AlterPartitionReassignmentsResponse::default()
            .with_allow_replication_factor_change(self.allow_replication_factor_change)
            .with_error_code(error.code())
            .with_error_message(message(m))
            .with_responses(
                self.topics
                    .iter()
                    .map(|t| {
                        ReassignableTopicResponse::default()
                            .with_name(t.name.clone())
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        ReassignablePartitionResponse::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(error.code())
                                            .with_error_message(message(m))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
    }
}

impl Forwarded for ListPartitionReassignmentsRequest {
    fn error_response(&self, error: ResponseError, m: &str) -> ListPartitionReassignmentsResponse {
        ListPartitionReassignmentsResponse::default()
            .with_error_code(error.code())
            .with_error_message(message(m))
    }
}

impl Forwarded for DescribeQuorumRequest {
    fn error_response(&self, error: ResponseError, m: &str) -> DescribeQuorumResponse {
        DescribeQuorumResponse::default()
            .with_error_code(error.code())
            .with_error_message(message(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };

    #[test]
    fn a_failed_forward_answers_every_entry_with_the_error() {
        let name = |n: &'static str| StrBytes::from_static_str(n);
        let scram = AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![ScramCredentialDeletion::default().with_name(name("a"))])
            .with_upsertions(vec![
                ScramCredentialUpsertion::default().with_name(name("b")),
                ScramCredentialUpsertion::default().with_name(name("a")),
            ]);
        let r = scram.error_response(ResponseError::RequestTimedOut, "no controller");
        let users: Vec<(&str, i16)> = r
            .results
            .iter()
            .map(|r| (r.user.as_str(), r.error_code))
            .collect();
        let timed_out = ResponseError::RequestTimedOut.code();
        assert_eq!(users, vec![("a", timed_out), ("b", timed_out)]);
        let acls = CreateAclsRequest::default().with_creations(vec![Default::default(); 2]);
        let r = acls.error_response(ResponseError::UnknownServerError, "refused");
        assert_eq!(r.results.len(), 2);
        assert!(r
            .results
            .iter()
            .all(|c| c.error_code == ResponseError::UnknownServerError.code()));
    }
}
