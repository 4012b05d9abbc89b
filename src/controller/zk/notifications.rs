//! The controller's reading of notification znodes: persistent sequential children of one
//! parent (`/isr_change_notification`, `/log_dir_event_notification`), each written by a
//! broker, read and deleted by the controller.

use serde::de::DeserializeOwned;

use super::event_loop::{ControllerLoop, ZkResult};
use super::store;
use crate::zk::znodes;

impl ControllerLoop {
    /// The contents of `parent`'s `children` that are still there; an unreadable one is
    /// logged (as a `kind` notification) and skipped.
    pub(super) async fn read_notifications<T: DeserializeOwned>(
        &self,
        parent: &str,
        children: &[String],
        kind: &str,
    ) -> ZkResult<Vec<T>> {
        let mut read = Vec::with_capacity(children.len());
        for child in children {
            let path = format!("{parent}/{child}");
            let Some((data, _)) = self.s.get(&path).await? else {
                continue;
            };
            match znodes::decode::<T>(&data) {
                Ok(notification) => read.push(notification),
                Err(e) => {
                    tracing::warn!(path, error = %e, "ignoring an unreadable {kind} notification")
                }
            }
        }
        Ok(read)
    }

    /// Deletes `parent`'s `children`, fenced by this controller's epoch.
    pub(super) async fn delete_notifications(
        &self,
        parent: &str,
        children: &[String],
    ) -> ZkResult<()> {
        let fence = self.fence()?;
        for child in children {
            store::delete_fenced(&self.s, fence, &format!("{parent}/{child}")).await?;
        }
        Ok(())
    }
}
