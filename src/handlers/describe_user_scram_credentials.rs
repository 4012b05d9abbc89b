//! DescribeUserScramCredentials: each user's SCRAM mechanisms and iterations (never a
//! salt or key), from the controller's credentials (`/config/users` in ZooKeeper mode,
//! the metadata log's `UserScramCredentialRecord`s on a single node), answered as Kafka
//! answers it: all users with credentials when none are named, else each named user once,
//! RESOURCE_NOT_FOUND for one without credentials or with an empty name, and
//! DUPLICATE_RESOURCE for one named twice.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;
use crate::router::RequestContext;

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse {
    let mut known: BTreeMap<String, Vec<CredentialInfo>> = BTreeMap::new();
    for (user, mechanism, iterations) in broker.controller.scram_credentials() {
        known.entry(user).or_default().push(
            CredentialInfo::default()
                .with_mechanism(mechanism.kafka_type())
                .with_iterations(i32::try_from(iterations).unwrap_or(i32::MAX)),
        );
    }
    let found = |user: &str, infos: Vec<CredentialInfo>| {
        DescribeUserScramCredentialsResult::default()
            .with_user(StrBytes::from_string(user.to_string()))
            .with_credential_infos(infos)
    };
    let named: Vec<String> = req
        .users
        .unwrap_or_default()
        .into_iter()
        .map(|u| u.name.to_string())
        .collect();
    let results = match named.is_empty() {
        true => known
            .into_iter()
            .map(|(u, infos)| found(&u, infos))
            .collect(),
        false => {
            let mut results = Vec::new();
            for (i, user) in named.iter().enumerate() {
                if named[..i].contains(user) {
                    continue;
                }
                let error = |code: ResponseError, message: String| {
                    DescribeUserScramCredentialsResult::default()
                        .with_user(StrBytes::from_string(user.clone()))
                        .with_error_code(code.code())
                        .with_error_message(Some(StrBytes::from_string(message)))
                };
                let result = if user.is_empty() {
                    error(
                        ResponseError::ResourceNotFound,
                        "Cannot describe SCRAM credentials for empty username".into(),
                    )
                } else if named.iter().filter(|u| *u == user).count() > 1 {
                    error(
                        ResponseError::DuplicateResource,
                        format!("Cannot describe SCRAM credentials for the same user twice in a single request: {user}"),
                    )
                } else {
                    match known.remove(user) {
                        Some(infos) => found(user, infos),
                        None => error(
                            ResponseError::ResourceNotFound,
                            format!(
                                "Attempt to describe a user credential that does not exist: {user}"
                            ),
                        ),
                    }
                };
                results.push(result);
            }
            results
        }
    };
    DescribeUserScramCredentialsResponse::default().with_results(results)
}
