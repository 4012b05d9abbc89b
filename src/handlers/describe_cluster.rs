//! DescribeCluster: the cluster id, controller and brokers. Kafka checks nothing for it;
//! the cluster's authorized operations, when asked for, are the requester's.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::str_bytes;
use crate::auth::authorizer::CLUSTER_NAME;
use crate::auth::operations::ResourceType;
use crate::broker::Broker;
use crate::router::RequestContext;

/// `endpoint_type` 1 asks for brokers; 2 (controllers) is for KRaft controllers, which skua has none of.
const ENDPOINT_BROKERS: i8 = 1;

pub async fn handle(
    broker: Arc<Broker>,
    ctx: RequestContext,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let c = &broker.controller;
    let resp = DescribeClusterResponse::default()
        .with_endpoint_type(req.endpoint_type)
        .with_cluster_id(str_bytes(c.cluster_id()))
        .with_controller_id(BrokerId(c.controller_id()))
        .with_cluster_authorized_operations(ctx.authorized_operations_if(
            req.include_cluster_authorized_operations,
            ResourceType::Cluster,
            CLUSTER_NAME,
        ));
    if req.endpoint_type != ENDPOINT_BROKERS {
        return resp
            .with_error_code(ResponseError::UnsupportedEndpointType.code())
            .with_error_message(Some(str_bytes(
                "The endpoint type requested is not supported",
            )));
    }
    resp.with_brokers(
        c.brokers_on(&ctx.session.listener)
            .into_iter()
            .map(|b| {
                DescribeClusterBroker::default()
                    .with_broker_id(BrokerId(b.id))
                    .with_host(str_bytes(b.host))
                    .with_port(b.port)
                    .with_rack(b.rack.map(str_bytes))
            })
            .collect(),
    )
}
