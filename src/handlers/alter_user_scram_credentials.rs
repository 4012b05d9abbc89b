//! AlterUserScramCredentials: sets (from the client's salted password: the password never
//! reaches the broker) or deletes users' SCRAM credentials, as Kafka checks them: an
//! empty name or too few (< 4096) or too many (> 16384) iterations is UNACCEPTABLE_CREDENTIAL,
//! an unknown mechanism UNSUPPORTED_SASL_MECHANISM, the same user and mechanism twice
//! DUPLICATE_RESOURCE, deleting a credential that does not exist RESOURCE_NOT_FOUND. A
//! user with any refused change gets that error and none of its changes are made; the
//! others' are made together.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::broker::Broker;
use crate::controller::ScramChange;
use crate::router::RequestContext;
use crate::sasl::scram::{ScramCredential, ScramMechanism, MAX_ITERATIONS, MIN_ITERATIONS};

type Refusal = (ResponseError, String);

pub async fn handle(
    broker: Arc<Broker>,
    _ctx: RequestContext,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    // Users in the order first named, each with its changes or why it is refused.
    let mut users: Vec<String> = Vec::new();
    let mut changes: BTreeMap<String, Vec<ScramChange>> = BTreeMap::new();
    let mut refused: BTreeMap<String, Refusal> = BTreeMap::new();
    let mut note = |user: &str, change: Result<ScramChange, Refusal>| {
        if !users.iter().any(|u| u == user) {
            users.push(user.to_string());
        }
        match change {
            Err(why) => {
                refused.entry(user.to_string()).or_insert(why);
            }
            Ok(c) => changes.entry(user.to_string()).or_default().push(c),
        }
    };
    for u in &req.upsertions {
        let user = u.name.as_str();
        note(
            user,
            upsertion(user, u.mechanism, u.iterations, &u.salt, &u.salted_password),
        );
    }
    for d in &req.deletions {
        let user = d.name.as_str();
        let change = check_user(user)
            .and_then(|()| mechanism(d.mechanism))
            .map(|mechanism| ScramChange {
                user: user.to_string(),
                mechanism,
                credential: None,
            });
        note(user, change);
    }
    for (user, list) in &changes {
        if refused.contains_key(user) {
            continue;
        }
        let twice = list
            .iter()
            .enumerate()
            .any(|(i, c)| list[..i].iter().any(|o| o.mechanism == c.mechanism));
        if twice {
            refused.insert(
                user.clone(),
                (
                    ResponseError::DuplicateResource,
                    "A user credential cannot be altered twice in the same request".into(),
                ),
            );
            continue;
        }
        let missing = list.iter().any(|c| {
            c.credential.is_none()
                && broker
                    .controller
                    .scram_credential(c.mechanism, user)
                    .is_none()
        });
        if missing {
            refused.insert(
                user.clone(),
                (
                    ResponseError::ResourceNotFound,
                    "Attempt to delete a user credential that does not exist".into(),
                ),
            );
        }
    }
    let accepted: Vec<ScramChange> = changes
        .into_iter()
        .filter(|(u, _)| !refused.contains_key(u))
        .flat_map(|(_, list)| list)
        .collect();
    let applied = match accepted.is_empty() {
        true => Ok(()),
        false => broker.controller.alter_scram_credentials(accepted).await,
    };
    let results = users
        .into_iter()
        .map(|user| {
            let error = match (refused.remove(&user), &applied) {
                (Some(why), _) => Some(why),
                (None, Err(e)) => Some((e.error, e.message.clone())),
                (None, Ok(())) => None,
            };
            let result =
                AlterUserScramCredentialsResult::default().with_user(StrBytes::from_string(user.clone()));
            match error {
                Some((code, message)) => {
                    tracing::info!(user = %user, error = ?code, "SCRAM credential change refused: {message}");
                    result
                        .with_error_code(code.code())
                        .with_error_message(Some(StrBytes::from_string(message)))
                }
                None => {
                    tracing::info!(user = %user, "SCRAM credentials changed");
                    result
                }
            }
        })
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(results)
}

fn check_user(user: &str) -> Result<(), Refusal> {
    match user.is_empty() {
        true => Err((
            ResponseError::UnacceptableCredential,
            "Username must not be empty".into(),
        )),
        false => Ok(()),
    }
}

fn mechanism(t: i8) -> Result<ScramMechanism, Refusal> {
    ScramMechanism::from_kafka_type(t).ok_or_else(|| {
        (
            ResponseError::UnsupportedSaslMechanism,
            "Unknown SCRAM mechanism".into(),
        )
    })
}

fn upsertion(
    user: &str,
    mechanism_type: i8,
    iterations: i32,
    salt: &[u8],
    salted_password: &[u8],
) -> Result<ScramChange, Refusal> {
    check_user(user)?;
    let mechanism = mechanism(mechanism_type)?;
    let unacceptable = |m: &str| Err((ResponseError::UnacceptableCredential, m.to_string()));
    if iterations < MIN_ITERATIONS as i32 {
        return unacceptable("Too few iterations");
    }
    if iterations > MAX_ITERATIONS as i32 {
        return unacceptable("Too many iterations");
    }
    if salt.is_empty() {
        return unacceptable("Salt must not be empty");
    }
    if salted_password.len() != mechanism.hash_len() {
        return unacceptable("Salted password has the wrong length for its mechanism");
    }
    Ok(ScramChange {
        user: user.to_string(),
        mechanism,
        credential: Some(ScramCredential::from_salted_password(
            mechanism,
            salted_password,
            salt,
            iterations as u32,
        )),
    })
}
