//! Puts the quotas of the metadata image in force: Kafka's `ClientQuotaMetadataManager`
//! (single node, from `ClientQuotaRecord`s) and its ZooKeeper-mode config handlers for
//! users and clients both end here, since both modes' quotas arrive as image deltas.

use std::sync::Arc;

use super::manager::ClientQuotaManager;
use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener};
use crate::controller::image::MetadataImage;

pub struct QuotaPublisher {
    manager: Arc<ClientQuotaManager>,
}

impl QuotaPublisher {
    pub fn new(manager: Arc<ClientQuotaManager>) -> Arc<QuotaPublisher> {
        Arc::new(QuotaPublisher { manager })
    }
}

impl MetadataListener for QuotaPublisher {
    fn on_delta(&self, image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
        if delta.client_quotas {
            self.manager.update(image.client_quotas());
        }
        Vec::new()
    }
}
