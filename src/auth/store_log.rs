//! ACLs on a single node, as Kafka's `StandardAuthorizer` keeps them: each one an
//! `AccessControlEntryRecord` in the KRaft metadata log (removed by a
//! `RemoveAccessControlEntryRecord`), written by the local controller, replayed into the
//! image at startup, and followed by the authorizer through the metadata deltas, so ACLs
//! survive a restart and a Kafka 4 broker adopting the dir finds them (and the reverse).

use std::sync::Arc;

use async_trait::async_trait;

use super::acl::{AclBinding, AclBindingFilter};
use super::acl_authorizer::{AclAuthorizer, AclStore, StoreError};
use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener};
use crate::controller::image::MetadataImage;
use crate::controller::local::LocalController;
use crate::controller::ControllerError;

pub struct MetadataLogStore {
    controller: Arc<LocalController>,
}

impl MetadataLogStore {
    pub fn new(controller: Arc<LocalController>) -> MetadataLogStore {
        MetadataLogStore { controller }
    }
}

fn store_error(e: ControllerError) -> StoreError {
    StoreError {
        error: e.error,
        message: e.message,
    }
}

#[async_trait]
impl AclStore for MetadataLogStore {
    async fn create(&self, acls: Vec<AclBinding>) -> Result<(), StoreError> {
        self.controller.create_acls(acls).await.map_err(store_error)
    }

    async fn delete(
        &self,
        filters: Vec<AclBindingFilter>,
    ) -> Result<Vec<Vec<AclBinding>>, StoreError> {
        self.controller
            .delete_acls(filters)
            .await
            .map_err(store_error)
    }
}

/// Puts the image's ACLs in force whenever a delta says they changed (and at
/// subscription, with the whole image).
pub struct AclFollower {
    authorizer: Arc<AclAuthorizer>,
}

impl AclFollower {
    pub fn new(authorizer: Arc<AclAuthorizer>) -> Arc<AclFollower> {
        Arc::new(AclFollower { authorizer })
    }
}

impl MetadataListener for AclFollower {
    fn on_delta(&self, image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
        if delta.acls {
            let acls: Vec<AclBinding> = image
                .acls()
                .filter_map(|r| {
                    let acl = AclBinding::from_record(r);
                    if acl.is_none() {
                        tracing::warn!(id = %r.id, "ACL record with codes skua does not know is not enforced: {r:?}");
                    }
                    acl
                })
                .collect();
            tracing::info!(acls = acls.len(), "ACLs in force from the metadata log");
            self.authorizer.set_acls(acls);
        }
        Vec::new()
    }
}
