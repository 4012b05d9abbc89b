//! The broker config in force, shared by every component that reads it.
//!
//! Built and validated once at startup; never changed in place. A dynamic change (a
//! broker config set through the metadata log) builds a whole new [`BrokerConfig`] with
//! [`BrokerConfig::reconfigured`] and [`SharedConfig::swap`]s it in: readers that took the
//! old one finish with it, the next read sees the new one, so no reader ever sees half a
//! change. Whoever must act on a change rather than read it next time (the listeners)
//! [`SharedConfig::subscribe`]s.

use std::sync::Arc;

use parking_lot::RwLock;
use tokio::sync::watch;

use super::BrokerConfig;

pub struct SharedConfig {
    current: RwLock<Arc<BrokerConfig>>,
    /// The config each swap put in force, for subscribers.
    swapped: watch::Sender<Arc<BrokerConfig>>,
    /// The TLS context of the broker's connections to other brokers, built from the
    /// inter-broker listener's stores when the broker opens (`None`: plain TCP).
    outbound_tls: RwLock<Option<crate::tls::OutboundTls>>,
}

impl SharedConfig {
    pub fn new(config: BrokerConfig) -> Arc<SharedConfig> {
        let config = Arc::new(config);
        Arc::new(SharedConfig {
            current: RwLock::new(config.clone()),
            swapped: watch::Sender::new(config),
            outbound_tls: RwLock::new(None),
        })
    }

    /// The TLS context outbound broker connections use; `None`: plain TCP.
    pub fn outbound_tls(&self) -> Option<crate::tls::OutboundTls> {
        self.outbound_tls.read().clone()
    }

    pub fn set_outbound_tls(&self, tls: Option<crate::tls::OutboundTls>) {
        *self.outbound_tls.write() = tls;
    }

    /// The mechanism and credentials outbound broker connections authenticate with when
    /// the inter-broker listener is a SASL listener (checked when the config was built);
    /// `None`: no SASL.
    pub fn outbound_sasl(&self) -> Option<crate::sasl::settings::ClientCredentials> {
        crate::sasl::settings::inter_broker(&self.current())
            .ok()
            .flatten()
    }

    /// Sees every config put in force from now on (the latest, if several came at once).
    pub fn subscribe(&self) -> watch::Receiver<Arc<BrokerConfig>> {
        self.swapped.subscribe()
    }

    /// The config in force. The lock is held only for the clone of the `Arc`, so a read
    /// never waits on a change being built.
    pub fn current(&self) -> Arc<BrokerConfig> {
        self.current.read().clone()
    }

    /// Puts `next` in force; returns the config it replaces.
    pub fn swap(&self, next: BrokerConfig) -> Arc<BrokerConfig> {
        let next = Arc::new(next);
        let old = std::mem::replace(&mut *self.current.write(), next.clone());
        self.swapped.send_replace(next);
        old
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::broker::{BrokerSource, DynamicConfigs};

    #[test]
    fn a_swap_replaces_the_whole_config_and_keeps_identity() {
        let mut start = BrokerConfig::from_properties(BTreeMap::from([(
            "listeners".to_string(),
            "PLAINTEXT://127.0.0.1:0".to_string(),
        )]))
        .unwrap();
        // What startup resolves: the node id from meta.properties, the bound port.
        start.broker_id = 7;
        start.advertised_listeners[0].port = 40123;
        let shared = SharedConfig::new(start);
        let before = shared.current();

        let dynamic = DynamicConfigs {
            broker: BTreeMap::from([("log.segment.delete.delay.ms".to_string(), "5".to_string())]),
            default: BTreeMap::from([
                ("log.segment.delete.delay.ms".to_string(), "6".to_string()),
                ("message.max.bytes".to_string(), "2000".to_string()),
                // Not dynamic in Kafka: a stored value is ignored.
                ("num.partitions".to_string(), "9".to_string()),
            ]),
        };
        let next = shared.current().reconfigured(&dynamic).unwrap();
        let old = shared.swap(next);
        assert!(Arc::ptr_eq(&old, &before), "readers keep what they took");
        let now = shared.current();
        assert_eq!(now.log.segment_delete_delay_ms, 5);
        assert_eq!(now.log.message_max_bytes, 2000);
        assert_eq!(now.log.num_partitions, 1);
        assert_eq!(
            now.source("message.max.bytes"),
            BrokerSource::DynamicDefault
        );
        assert_eq!(
            now.source("log.segment.delete.delay.ms"),
            BrokerSource::DynamicBroker
        );
        assert_eq!(now.source("listeners"), BrokerSource::Static);
        assert_eq!(
            (now.broker_id, now.advertised_listeners[0].port),
            (7, 40123)
        );
        assert_eq!(before.log.segment_delete_delay_ms, 60_000);

        // Dropping a dynamic key brings back the static value or the default.
        let back = now.reconfigured(&DynamicConfigs::default()).unwrap();
        assert_eq!(back.log.segment_delete_delay_ms, 60_000);
        assert_eq!(
            back.source("log.segment.delete.delay.ms"),
            BrokerSource::Default
        );

        // A refused value changes nothing.
        let bad = DynamicConfigs {
            broker: BTreeMap::from([("log.segment.bytes".to_string(), "1".to_string())]),
            ..Default::default()
        };
        assert!(now.reconfigured(&bad).is_err());
        assert_eq!(shared.current().log.segment_delete_delay_ms, 5);
    }
}
