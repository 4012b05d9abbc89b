//! Client quotas in ZooKeeper mode, kept as a Kafka 3.9 broker keeps them: the quota
//! keys of `/config/users/<user>`, `/config/clients/<client-id>` and
//! `/config/users/<user>/clients/<client-id>` (names sanitized, `<default>` for the
//! defaults; JSON version 1, values as strings), each change announced on
//! `/config/changes` with the entity path (`users/<user>/clients/<client-id>`).
//!
//! A users znode also holds the user's SCRAM credentials: a quota change reads the whole
//! config, changes only the quota keys and writes it back with a version check, so a
//! concurrent credential change is never lost (it is read again and the quota change
//! redone).

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;

use super::super::Shared;
use super::config_changes::write_entity_config_at;
use crate::controller::ControllerError;
use crate::quota::configs::{self, Alteration, ClientQuotas};
use crate::quota::entity::QuotaEntity;
use crate::zk::session::{ZkError, ZkSession};
use crate::zk::znodes::{self, paths, EntityConfig};

/// How often a quota change is redone after a concurrent write to the same znode.
const WRITE_ATTEMPTS: usize = 5;

/// Reads every user's, user's client id's and client id's quotas.
pub(crate) async fn read_all(shared: &Shared, session: &ZkSession) -> Result<(), ZkError> {
    for entity_path in entity_paths(session).await? {
        apply(shared, session, &entity_path).await?;
    }
    Ok(())
}

/// The entity path of every user, user's client id and client id with a config znode
/// (`users/<user>`, `users/<user>/clients/<client-id>`, `clients/<client-id>`).
async fn entity_paths(session: &ZkSession) -> Result<Vec<String>, ZkError> {
    let mut out = Vec::new();
    let users = session
        .children(&paths::entity_config("users"))
        .await?
        .unwrap_or_default();
    for user in users {
        let clients = session
            .children(&paths::entity_config(&format!("users/{user}/clients")))
            .await?
            .unwrap_or_default();
        out.push(format!("users/{user}"));
        out.extend(
            clients
                .into_iter()
                .map(|client| format!("users/{user}/clients/{client}")),
        );
    }
    let clients = session
        .children(&paths::entity_config("clients"))
        .await?
        .unwrap_or_default();
    out.extend(
        clients
            .into_iter()
            .map(|client| format!("clients/{client}")),
    );
    Ok(out)
}

fn zk_error(e: ZkError) -> ControllerError {
    ControllerError::new(ResponseError::UnknownServerError, e.to_string())
}

/// Every entity's quotas as the znodes hold them now (Kafka's
/// `ZkAdminManager.describeClientQuotas` reads ZooKeeper for each DescribeClientQuotas,
/// so a quota another broker has just written is listed before any broker has followed
/// its `/config/changes` notification).
pub(crate) async fn read_znodes(shared: &Shared) -> Result<ClientQuotas, ControllerError> {
    let session = shared.session()?;
    let mut out = ClientQuotas::new();
    for entity_path in entity_paths(&session).await.map_err(zk_error)? {
        let Some(entity) = QuotaEntity::from_zk_entity_path(&entity_path) else {
            continue;
        };
        let (configs, _) = read(&session, &entity_path).await.map_err(zk_error)?;
        let quotas = configs::from_strings(&configs);
        if !quotas.is_empty() {
            out.insert(entity, quotas);
        }
    }
    Ok(out)
}

/// Re-reads the quotas of `entity_path` (`users/..`, `clients/..`) and puts them in
/// force (Kafka's `UserConfigHandler` and `ClientIdConfigHandler`).
pub(crate) async fn apply(
    shared: &Shared,
    session: &ZkSession,
    entity_path: &str,
) -> Result<(), ZkError> {
    let Some(entity) = QuotaEntity::from_zk_entity_path(entity_path) else {
        tracing::warn!(
            entity = entity_path,
            "quota config for a malformed entity path; skipped"
        );
        return Ok(());
    };
    let (configs, _) = read(session, entity_path).await?;
    shared
        .broker
        .apply_client_quotas(entity, configs::from_strings(&configs));
    Ok(())
}

/// `/config/<entity_path>`'s whole config and its version (None when absent).
async fn read(
    session: &ZkSession,
    entity_path: &str,
) -> Result<(BTreeMap<String, String>, Option<i32>), ZkError> {
    let path = paths::entity_config(entity_path);
    let Some((data, stat)) = session.get(&path).await? else {
        return Ok((BTreeMap::new(), None));
    };
    match znodes::decode::<EntityConfig>(&data) {
        Ok(c) => Ok((c.config.0, Some(stat.version))),
        Err(e) => {
            tracing::warn!(path, error = %e, "unreadable entity config znode; taken as empty");
            Ok((BTreeMap::new(), Some(stat.version)))
        }
    }
}

/// AlterClientQuotas in ZooKeeper mode (Kafka's `ZkAdminManager.alterClientQuotas`):
/// each entity's quota keys changed in its znode, the other keys kept, every broker
/// notified; this broker applies the change at once.
pub(crate) async fn alter(
    shared: &Shared,
    alterations: Vec<Alteration>,
    validate_only: bool,
) -> Result<Vec<Result<(), ControllerError>>, ControllerError> {
    let session = shared.session()?;
    let mut seen = std::collections::BTreeSet::new();
    let mut results = Vec::with_capacity(alterations.len());
    for a in &alterations {
        let result = match seen.insert(&a.entity) {
            false => Err(ControllerError::new(
                ResponseError::InvalidRequest,
                format!("Ignoring duplicate entity {}", a.entity),
            )),
            true => alter_one(shared, &session, a, validate_only).await,
        };
        results.push(result);
    }
    Ok(results)
}

async fn alter_one(
    shared: &Shared,
    session: &ZkSession,
    alteration: &Alteration,
    validate_only: bool,
) -> Result<(), ControllerError> {
    let Some(entity_path) = alteration.entity.zk_entity_path() else {
        return Err(ControllerError::new(
            ResponseError::InvalidRequest,
            "Invalid client quota entity",
        ));
    };
    for _ in 0..WRITE_ATTEMPTS {
        let (mut stored, version) = read(session, &entity_path).await.map_err(zk_error)?;
        let quotas = configs::altered(Some(&configs::from_strings(&stored)), &alteration.ops)?;
        if validate_only {
            return Ok(());
        }
        stored.retain(|k, _| configs::QuotaType::of_key(k).is_none());
        for (k, v) in &quotas {
            stored.insert(k.clone(), configs::to_string(k, *v));
        }
        match write_entity_config_at(session, &entity_path, &stored, version).await {
            Ok(()) => {
                tracing::info!(entity = %alteration.entity, ?quotas, "client quotas written to ZooKeeper");
                shared
                    .broker
                    .apply_client_quotas(alteration.entity.clone(), quotas);
                return Ok(());
            }
            // Written by someone else meanwhile (a credential, another quota): again.
            Err(ZkError::BadVersion(_)) | Err(ZkError::NodeExists(_)) => continue,
            Err(e) => return Err(zk_error(e)),
        }
    }
    Err(ControllerError::new(
        ResponseError::UnknownServerError,
        format!("{entity_path} kept changing while its quotas were written"),
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::controller::zk::testkit;
    use crate::quota::entity::EntityName;

    async fn shared() -> (Arc<Shared>, Arc<ZkSession>) {
        let (_, session, shared) = testkit::member_shared(Duration::from_secs(18)).await;
        (shared, session)
    }

    #[tokio::test]
    async fn describe_reads_the_znodes_as_kafka_does_not_only_what_was_followed() {
        let (shared, session) = shared().await;
        // Another broker's AlterClientQuotas: the znode is written, its /config/changes
        // notification not yet followed here.
        session
            .create_recursive(
                "/config/users/bob/clients/app",
                br#"{"version":1,"config":{"producer_byte_rate":"100","SCRAM-SHA-256":"x"}}"#,
            )
            .await
            .unwrap();
        session
            .create_recursive("/config/clients/<default>", br#"{"version":1,"config":{}}"#)
            .await
            .unwrap();
        let pair = QuotaEntity::user_client_id(
            EntityName::Named("bob".into()),
            EntityName::Named("app".into()),
        );
        assert_eq!(quotas_of(&shared, &pair), None);
        assert_eq!(
            read_znodes(&shared).await.unwrap(),
            ClientQuotas::from([(
                pair.clone(),
                BTreeMap::from([("producer_byte_rate".to_string(), 100.0)])
            )])
        );
        // Deleted by the other broker: gone from the answer at once.
        session
            .set(
                "/config/users/bob/clients/app",
                br#"{"version":1,"config":{}}"#,
                None,
            )
            .await
            .unwrap();
        assert!(read_znodes(&shared).await.unwrap().is_empty());
    }

    fn quotas_of(shared: &Shared, entity: &QuotaEntity) -> Option<BTreeMap<String, f64>> {
        shared
            .broker
            .cache()
            .image()
            .client_quotas()
            .get(entity)
            .cloned()
    }

    #[tokio::test]
    async fn quotas_are_read_and_written_as_kafka_keeps_them_beside_scram_credentials() {
        let (shared, session) = shared().await;
        // As a Kafka 3.9 broker leaves a user with a SCRAM credential and a quota.
        let alice = br#"{"version":1,"config":{"SCRAM-SHA-256":"salt=c2FsdA==,stored_key=a,server_key=b,iterations=4096","producer_byte_rate":"1024"}}"#;
        session
            .create_recursive("/config/users/CN%3Dalice", alice)
            .await
            .unwrap();
        session
            .create_recursive(
                "/config/users/<default>/clients/app%201",
                br#"{"version":1,"config":{"request_percentage":"12.5"}}"#,
            )
            .await
            .unwrap();
        read_all(&shared, &session).await.unwrap();
        let user = QuotaEntity::user(EntityName::Named("CN=alice".into()));
        assert_eq!(
            quotas_of(&shared, &user),
            Some(BTreeMap::from([("producer_byte_rate".to_string(), 1024.0)]))
        );
        let pair =
            QuotaEntity::user_client_id(EntityName::Default, EntityName::Named("app 1".into()));
        assert_eq!(
            quotas_of(&shared, &pair),
            Some(BTreeMap::from([("request_percentage".to_string(), 12.5)]))
        );

        // AlterClientQuotas: the quota keys change, the credential stays, every broker is
        // told through /config/changes.
        let alteration = Alteration {
            entity: user.clone(),
            ops: BTreeMap::from([
                ("producer_byte_rate".to_string(), None),
                ("consumer_byte_rate".to_string(), Some(2048.0)),
            ]),
        };
        let results = alter(&shared, vec![alteration.clone()], false)
            .await
            .unwrap();
        assert!(results[0].is_ok(), "{results:?}");
        let (data, _) = session
            .get("/config/users/CN%3Dalice")
            .await
            .unwrap()
            .unwrap();
        let stored: EntityConfig = znodes::decode(&data).unwrap();
        assert_eq!(
            stored.config.0,
            BTreeMap::from([
                (
                    "SCRAM-SHA-256".to_string(),
                    "salt=c2FsdA==,stored_key=a,server_key=b,iterations=4096".to_string()
                ),
                ("consumer_byte_rate".to_string(), "2048".to_string()),
            ])
        );
        let changes = session
            .children(paths::CONFIG_CHANGES)
            .await
            .unwrap()
            .unwrap();
        let (note, _) = session
            .get(&format!("{}/{}", paths::CONFIG_CHANGES, changes[0]))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            note,
            br#"{"version":2,"entity_path":"users/CN%3Dalice"}"#.to_vec()
        );
        assert_eq!(
            quotas_of(&shared, &user),
            Some(BTreeMap::from([("consumer_byte_rate".to_string(), 2048.0)]))
        );

        // A bad value changes nothing; validate_only writes nothing; a new entity's znode
        // is created.
        let bad = Alteration {
            ops: BTreeMap::from([("consumer_byte_rate".to_string(), Some(-1.0))]),
            ..alteration.clone()
        };
        let new_client = Alteration {
            entity: QuotaEntity::client_id(EntityName::Default),
            ops: BTreeMap::from([("producer_byte_rate".to_string(), Some(10.0))]),
        };
        let results = alter(&shared, vec![bad, new_client.clone()], true)
            .await
            .unwrap();
        assert!(results[0].is_err() && results[1].is_ok());
        assert!(session
            .get("/config/clients/<default>")
            .await
            .unwrap()
            .is_none());
        alter(&shared, vec![new_client], false).await.unwrap()[0]
            .clone()
            .unwrap();
        let (data, _) = session
            .get("/config/clients/<default>")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            data,
            br#"{"version":1,"config":{"producer_byte_rate":"10"}}"#.to_vec()
        );
    }
}
