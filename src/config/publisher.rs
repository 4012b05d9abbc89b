//! Puts dynamic broker configs in force (Kafka's `DynamicConfigPublisher`): follows the
//! metadata log's ConfigRecords of resource type BROKER for this broker's id and for the
//! cluster default (empty name), builds the whole new config with them and swaps it into
//! the [`SharedConfig`], then gives every hosted log its config again and the cleaner its
//! settings, so a change acts at once (Kafka's `DynamicLogConfig` and
//! `LogCleaner.reconfigure`).

use std::sync::Arc;

use super::broker::DynamicConfigs;
use super::SharedConfig;
use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener};
use crate::controller::image::MetadataImage;
use crate::controller::records::CONFIG_RESOURCE_BROKER;
use crate::controller::ConfigResource;
use crate::replica::ReplicaManager;

pub struct DynamicConfigPublisher {
    config: Arc<SharedConfig>,
    replicas: Arc<ReplicaManager>,
}

impl DynamicConfigPublisher {
    pub fn new(config: Arc<SharedConfig>, replicas: Arc<ReplicaManager>) -> Arc<Self> {
        Arc::new(DynamicConfigPublisher { config, replicas })
    }
}

impl MetadataListener for DynamicConfigPublisher {
    fn on_delta(&self, image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
        let current = self.config.current();
        let own = current.broker_id.to_string();
        let changed = delta.configs.iter().any(|r| {
            r.resource_type == CONFIG_RESOURCE_BROKER && (r.name.is_empty() || r.name == own)
        });
        if !changed {
            return Vec::new();
        }
        let configs_of = |name: &str| {
            image
                .resource_configs(&ConfigResource {
                    resource_type: CONFIG_RESOURCE_BROKER,
                    name: name.to_string(),
                })
                .cloned()
                .unwrap_or_default()
        };
        let dynamic = DynamicConfigs {
            broker: configs_of(&own),
            default: configs_of(""),
        };
        // The replication throttle rates are Kafka's per-broker dynamic configs that are
        // not broker config keys: the broker config below never holds them.
        self.replicas.quotas.update_rates(&dynamic.broker);
        if dynamic == *current.dynamic() {
            return Vec::new();
        }
        // A stored set the broker refuses (checked on the way in, so only from another
        // broker's or an older version's rules) leaves the config in force as it is, as
        // Kafka logs and skips a dynamic config it cannot apply.
        let next = match current.reconfigured(&dynamic) {
            Ok(next) => next,
            Err(e) => {
                tracing::error!(error = %e, "dynamic broker configs not applied");
                return Vec::new();
            }
        };
        let cleaner = next.cleaner.clone();
        self.config.swap(next);
        let (broker, default) = (
            super::broker::redacted(&dynamic.broker),
            super::broker::redacted(&dynamic.default),
        );
        tracing::info!(?broker, ?default, "dynamic broker configs in force");
        self.replicas.reconfigure_logs(image);
        self.replicas.cleaner.update_config(cleaner);
        Vec::new()
    }
}
