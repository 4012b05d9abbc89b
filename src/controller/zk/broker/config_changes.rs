//! Dynamic configs in ZooKeeper mode, kept as a Kafka 3.9 broker keeps them.
//!
//! Whoever changes a config (any broker, skua or Kafka, answering AlterConfigs or
//! IncrementalAlterConfigs) writes the whole set to `/config/<entity type>/<entity>`
//! (JSON version 1) and then a persistent sequential `/config/changes/config_change_<seq>`
//! naming it (version 2, `entity_path`). Every broker watches `/config/changes`, re-reads
//! the named entity and puts it in force (Kafka's `ZkConfigManager` with its
//! `ZkNodeChangeNotificationListener`): topic configs go to the logs through the broker
//! side's delta, broker configs (`brokers/<default>` and `brokers/<this id>`) through the
//! dynamic config publisher, user and client quotas (`client_quotas`) to the quota
//! manager. Every new session first reads everything again, so a change
//! made while this broker had no session is not missed. Notifications older than 15
//! minutes are removed, as every Kafka broker removes them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::super::Shared;
use crate::zk::session::{WatchEvent, ZkError, ZkSession};
use crate::zk::znodes::{self, paths, ConfigChangeNotification, EntityConfig};

/// Kafka's `ZkNodeChangeNotificationListener` default `changeExpirationMs`.
const CHANGE_EXPIRATION: Duration = Duration::from_secs(15 * 60);
/// The entity name Kafka gives the cluster-wide default broker configs.
pub const DEFAULT_BROKER: &str = "<default>";
const CHANGE_NODE_PREFIX: &str = "config_change_";
/// Pause before trying again after a failed read (the session is alive, ZooKeeper is not
/// answering), or while waiting for a new session.
const RETRY: Duration = Duration::from_millis(500);

/// Follows config changes for as long as the broker runs, one session after another.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut ended: Option<Arc<ZkSession>> = None;
    loop {
        let session = shared.session.lock().clone();
        let Some(session) = session.filter(|s| !ended.as_ref().is_some_and(|e| Arc::ptr_eq(e, s)))
        else {
            tokio::time::sleep(RETRY).await;
            continue;
        };
        match follow(&shared, &session).await {
            Ok(()) => ended = Some(session),
            Err(ZkError::SessionExpired) => ended = Some(session),
            Err(e) => {
                tracing::warn!(error = %e, "cannot follow config changes in ZooKeeper; trying again");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Reads every config, then applies each change notified on `/config/changes` until the
/// session ends (Ok) or a read fails (Err).
async fn follow(shared: &Shared, session: &ZkSession) -> Result<(), ZkError> {
    // The notifications already there are covered by the full read that follows; one
    // written after this listing is applied from the loop.
    let mut last = session
        .children(paths::CONFIG_CHANGES)
        .await?
        .unwrap_or_default()
        .iter()
        .filter_map(|c| sequence(c))
        .max();
    read_all(shared, session).await?;
    loop {
        let (children, watch) = session.children_and_watch(paths::CONFIG_CHANGES).await?;
        let mut changes: Vec<(u64, &String)> = children
            .iter()
            .filter_map(|c| Some((sequence(c)?, c)))
            .collect();
        changes.sort();
        for &(seq, child) in &changes {
            if last.is_some_and(|l| seq <= l) {
                continue;
            }
            let path = format!("{}/{child}", paths::CONFIG_CHANGES);
            if let Some((data, _)) = session.get(&path).await? {
                match entity_path(&data) {
                    Some(entity) => apply_entity(shared, session, &entity).await?,
                    None => tracing::warn!(
                        path,
                        data = %String::from_utf8_lossy(&data),
                        "config change notification not understood; skipped"
                    ),
                }
            }
            last = Some(seq);
        }
        purge_expired(session, changes.iter().map(|(_, c)| c.as_str())).await;
        match watch.changed().await {
            WatchEvent::Session(e) if e.is_terminal() => return Ok(()),
            _ => {}
        }
    }
}

/// The sequence number of `config_change_<seq>`.
fn sequence(child: &str) -> Option<u64> {
    child.strip_prefix(CHANGE_NODE_PREFIX)?.parse().ok()
}

/// The entity a notification names: `entity_path` (version 2), or `entity_type` and
/// `entity_name` (version 1, Kafka before 2.0).
fn entity_path(data: &[u8]) -> Option<String> {
    if let Ok(n) = znodes::decode::<ConfigChangeNotification>(data) {
        return Some(n.entity_path);
    }
    #[derive(Deserialize)]
    struct V1 {
        entity_type: String,
        entity_name: String,
    }
    let v1 = znodes::decode::<V1>(data).ok()?;
    Some(format!("{}/{}", v1.entity_type, v1.entity_name))
}

/// Every topic's configs, and the broker configs that concern this broker.
pub(crate) async fn read_all(shared: &Shared, session: &ZkSession) -> Result<(), ZkError> {
    let topics = session
        .children(&paths::entity_config("topics"))
        .await?
        .unwrap_or_default();
    for t in topics {
        apply_entity(shared, session, &format!("topics/{t}")).await?;
    }
    apply_entity(shared, session, &format!("brokers/{DEFAULT_BROKER}")).await?;
    let users = session
        .children(&paths::entity_config("users"))
        .await?
        .unwrap_or_default();
    for u in users {
        apply_entity(shared, session, &format!("users/{u}")).await?;
    }
    let own = shared.settings.broker_id;
    apply_entity(shared, session, &format!("brokers/{own}")).await?;
    super::client_quotas::read_all(shared, session).await
}

/// With `password.encoder.old.secret` set, this broker's stored password configs
/// (`/config/brokers/<id>`) that the old secret decodes are encoded again under
/// `password.encoder.secret` and written back with a change notification, as Kafka's
/// `DynamicBrokerConfig` does at startup in ZooKeeper mode. Only the broker's own entity:
/// the `<default>` entity cannot hold password configs. Err (the broker does not start,
/// as Kafka's does not) when a value needs encoding and there is no new secret.
pub(crate) async fn re_encode_passwords(
    shared: &Shared,
    session: &ZkSession,
) -> anyhow::Result<()> {
    let Some(old) = shared.settings.password_encoder_old.as_ref() else {
        return Ok(());
    };
    let entity = format!("brokers/{}", shared.settings.broker_id);
    let stored = read_configs(session, &entity).await?;
    let new = shared.settings.password_encoder.as_ref();
    let Some(updated) =
        crate::config::password_encoder::re_encode(&stored, old, new).map_err(|why| {
            anyhow::anyhow!("re-encoding the dynamic password configs of {entity}: {why}")
        })?
    else {
        return Ok(());
    };
    write_entity_config(session, &entity, &updated).await?;
    tracing::info!(%entity, "dynamic password configs encoded under the new password.encoder.secret");
    Ok(())
}

/// Re-reads `/config/<entity>` and puts it in force if it concerns this broker. Entity
/// types skua does not use (IP quotas) are passed over. A user's znode holds its SCRAM
/// credentials and its quotas; a user's client ids' znodes and client ids' hold quotas.
async fn apply_entity(shared: &Shared, session: &ZkSession, entity: &str) -> Result<(), ZkError> {
    let Some((kind, name)) = entity.split_once('/') else {
        tracing::warn!(entity, "config change for an unknown entity; skipped");
        return Ok(());
    };
    let own = shared.settings.broker_id.to_string();
    match kind {
        "topics" if crate::controller::topic_name::validate(name).is_err() => {
            let shown = super::checked_names::shown(name);
            tracing::error!(topic = %shown, "topic config for an illegal topic name; skipped");
        }
        "topics" => {
            let configs = read_configs(session, entity).await?;
            shared.broker.apply_topic_configs(name, configs);
        }
        "brokers" if name == DEFAULT_BROKER || name == own => {
            let configs = read_configs(session, entity).await?;
            let encoder = shared.settings.password_encoder.as_ref();
            let configs = crate::config::password_encoder::from_persistent(configs, encoder);
            let name = if name == own { own.as_str() } else { "" };
            shared.broker.apply_broker_configs(name, configs);
        }
        "brokers" => {}
        "users" if !name.contains('/') => {
            match super::scram_users::desanitize(name) {
                Some(user) => {
                    let configs = read_configs(session, entity).await?;
                    shared.broker.scram_users.apply(&user, &configs);
                }
                None => tracing::warn!(
                    entity,
                    "user config of a name that is not sanitized; skipped"
                ),
            }
            super::client_quotas::apply(shared, session, entity).await?
        }
        "users" | "clients" => super::client_quotas::apply(shared, session, entity).await?,
        _ => tracing::debug!(entity, "config change for an entity type skua does not use"),
    }
    Ok(())
}

/// `/config/<entity>`'s configs; none when the znode is absent or not understood.
pub(crate) async fn read_configs(
    session: &ZkSession,
    entity: &str,
) -> Result<BTreeMap<String, String>, ZkError> {
    let path = paths::entity_config(entity);
    let Some((data, _)) = session.get(&path).await? else {
        return Ok(BTreeMap::new());
    };
    match znodes::decode::<EntityConfig>(&data) {
        Ok(c) => Ok(c.config.0),
        Err(e) => {
            tracing::warn!(path, error = %e, "unreadable entity config znode; taken as empty");
            Ok(BTreeMap::new())
        }
    }
}

/// Removes notifications older than [`CHANGE_EXPIRATION`] (Kafka's
/// `purgeObsoleteNotifications`); a failure is left to the next pass.
async fn purge_expired<'a>(session: &ZkSession, children: impl Iterator<Item = &'a str>) {
    let now_ms = crate::clock::now_ms();
    for child in children {
        let path = format!("{}/{child}", paths::CONFIG_CHANGES);
        let Ok(Some(stat)) = session.stat(&path).await else {
            continue;
        };
        if now_ms - stat.ctime > CHANGE_EXPIRATION.as_millis() as i64 {
            match session.delete(&path, None).await {
                Ok(()) | Err(ZkError::NoNode(_)) => {}
                Err(e) => tracing::debug!(path, error = %e, "expired config change not removed"),
            }
        }
    }
}

/// Writes `configs` as the whole config set of `entity` (`topics/<t>`,
/// `brokers/<id>`, `brokers/<default>`) and notifies every broker, as Kafka's
/// `AdminZkClient.changeEntityConfig` does.
pub async fn write_entity_config(
    session: &ZkSession,
    entity: &str,
    configs: &BTreeMap<String, String>,
) -> Result<(), ZkError> {
    let path = paths::entity_config(entity);
    let data = znodes::encode(&EntityConfig::new(configs.clone()));
    match session.set(&path, &data, None).await {
        Ok(_) => {}
        Err(ZkError::NoNode(_)) => {
            session.create_recursive(&path, &data).await?;
        }
        Err(e) => return Err(e),
    }
    notify(session, entity).await
}

/// [`write_entity_config`] over the config read at `version` (None: there was no
/// znode): BadVersion or NodeExists when it was written meanwhile.
pub async fn write_entity_config_at(
    session: &ZkSession,
    entity: &str,
    configs: &BTreeMap<String, String>,
    version: Option<i32>,
) -> Result<(), ZkError> {
    let path = paths::entity_config(entity);
    let data = znodes::encode(&EntityConfig::new(configs.clone()));
    match version {
        Some(v) => session.set(&path, &data, Some(v)).await.map(drop)?,
        None => session.create_recursive(&path, &data).await.map(drop)?,
    }
    notify(session, entity).await
}

/// Announces a change of `entity`'s config to every broker.
async fn notify(session: &ZkSession, entity: &str) -> Result<(), ZkError> {
    let note = znodes::encode(&ConfigChangeNotification::new(entity.to_string()));
    session
        .create_sequential(paths::CONFIG_CHANGE_PREFIX, &note)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `password.encoder.old.secret` at startup: the broker's own stored password configs
    /// (a Kafka 3.9.1 broker's encoding under the old secret) are written back under the
    /// new secret with a change notification, and put in force decoded.
    #[tokio::test]
    async fn stored_passwords_move_from_the_old_secret_to_the_new_one_at_startup() {
        use crate::config::password_encoder::{tests::KAFKA_CBC, PasswordEncoder};
        use crate::controller::zk::testkit;
        use crate::zk::memory::Ensemble;
        use crate::zk::session::ZkConfig;

        let cbc = |secret: &str| {
            PasswordEncoder::new(secret, None, "AES/CBC/PKCS5Padding", 128, 4096).unwrap()
        };
        let ensemble = Ensemble::new();
        let config = ZkConfig::in_memory(ensemble.clone(), Duration::from_secs(18));
        let session = Arc::new(ZkSession::connect(&config).await.unwrap());
        crate::controller::zk::registration::create_top_level_paths(&session)
            .await
            .unwrap();
        let mut settings = testkit::settings(1, &ensemble);
        settings.password_encoder = Some(cbc("rotated-secret"));
        settings.password_encoder_old = Some(cbc("encoder-secret"));
        let shared = Arc::new(Shared::new(
            Arc::new(settings),
            "test-cluster".into(),
            Some(session.clone()),
            crate::clock::TokioClock::new(1_700_000_000_000),
            None,
        ));
        let jaas = "listener.name.sasl_plaintext.plain.sasl.jaas.config";
        let stored = format!(
            r#"{{"version":1,"config":{{"{jaas}":"{KAFKA_CBC}","log.cleaner.threads":"2"}}}}"#
        );
        session
            .create_recursive("/config/brokers/1", stored.as_bytes())
            .await
            .unwrap();
        // Another broker's entity is not this broker's to rewrite.
        session
            .create_recursive("/config/brokers/2", stored.as_bytes())
            .await
            .unwrap();

        re_encode_passwords(&shared, &session).await.unwrap();
        let own = read_configs(&session, "brokers/1").await.unwrap();
        assert_eq!(
            cbc("rotated-secret").decode(&own[jaas]).unwrap(),
            "alice-secret ü"
        );
        assert!(cbc("encoder-secret").decode(&own[jaas]).is_err());
        assert_eq!(own["log.cleaner.threads"], "2");
        assert_eq!(
            read_configs(&session, "brokers/2").await.unwrap()[jaas],
            KAFKA_CBC
        );
        let notes = session
            .children(paths::CONFIG_CHANGES)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        let (note, _) = session
            .get(&format!("{}/{}", paths::CONFIG_CHANGES, notes[0]))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(entity_path(&note).as_deref(), Some("brokers/1"));

        // What the broker then reads is the password itself.
        read_all(&shared, &session).await.unwrap();
        let resource = crate::controller::ConfigResource {
            resource_type: crate::controller::records::CONFIG_RESOURCE_BROKER,
            name: "1".into(),
        };
        let applied = shared
            .broker
            .cache()
            .image()
            .resource_configs(&resource)
            .cloned()
            .unwrap();
        assert_eq!(applied[jaas], "alice-secret ü");

        // Restarted with the old secret still set: the value no longer decodes with it and
        // stays as it is.
        re_encode_passwords(&shared, &session).await.unwrap();
        assert_eq!(
            read_configs(&session, "brokers/1").await.unwrap()[jaas],
            own[jaas]
        );
    }

    #[test]
    fn notifications_of_both_versions() {
        assert_eq!(
            entity_path(br#"{"version":2,"entity_path":"topics/t"}"#).as_deref(),
            Some("topics/t")
        );
        assert_eq!(
            entity_path(br#"{"version":1,"entity_type":"brokers","entity_name":"<default>"}"#)
                .as_deref(),
            Some("brokers/<default>")
        );
        assert_eq!(entity_path(b"null"), None);
        assert_eq!(sequence("config_change_0000000042"), Some(42));
        assert_eq!(sequence("other"), None);
    }
}
