//! Controller election (Kafka's `registerControllerAndIncrementControllerEpoch`): the
//! broker that creates the ephemeral `/controller` znode, in the same multi-op that
//! bumps `/controller_epoch` with a compare-and-set on its version, is the controller.
//! The epoch znode's new version is the fence of all its later writes.

use super::store::Fence;
use crate::zk::session::{Op, ZkError, ZkSession};
use crate::zk::znodes::{self, controller_epoch, paths, ControllerRegistration};

/// Kafka's `KafkaController.InitialControllerEpoch`.
const INITIAL_CONTROLLER_EPOCH: i32 = 0;

/// The broker named by `/controller`, if any.
pub async fn read_controller_id(s: &ZkSession) -> Result<Option<i32>, ZkError> {
    Ok(s.get(paths::CONTROLLER).await?.and_then(|(data, _)| {
        znodes::decode::<ControllerRegistration>(&data)
            .ok()
            .map(|c| c.brokerid)
    }))
}

/// `/controller_epoch`'s value and version, created at epoch 0 when absent.
async fn read_or_create_epoch(s: &ZkSession) -> Result<(i32, i32), ZkError> {
    loop {
        if let Some((data, stat)) = s.get(paths::CONTROLLER_EPOCH).await? {
            let epoch = controller_epoch::decode(&data)
                .ok_or_else(|| ZkError::Other(format!("unreadable {}", paths::CONTROLLER_EPOCH)))?;
            return Ok((epoch, stat.version));
        }
        match s
            .create_recursive(
                paths::CONTROLLER_EPOCH,
                &controller_epoch::encode(INITIAL_CONTROLLER_EPOCH),
            )
            .await
        {
            Ok(stat) => return Ok((INITIAL_CONTROLLER_EPOCH, stat.version)),
            Err(ZkError::NodeExists(_)) => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Tries to become the controller: Some(fence) when elected, None when another broker
/// is (or the race was lost).
pub async fn try_elect(
    s: &ZkSession,
    broker_id: i32,
    now_ms: i64,
) -> Result<Option<Fence>, ZkError> {
    if read_controller_id(s).await?.is_some() {
        return Ok(None);
    }
    let (epoch, version) = read_or_create_epoch(s).await?;
    let new_epoch = epoch + 1;
    let registration = znodes::encode(&ControllerRegistration::new(broker_id, now_ms));
    let epoch_data = controller_epoch::encode(new_epoch);
    let ops = [
        Op::Create {
            path: paths::CONTROLLER,
            data: &registration,
            ephemeral: true,
        },
        Op::SetData {
            path: paths::CONTROLLER_EPOCH,
            data: &epoch_data,
            version: Some(version),
        },
    ];
    match s
        .multi_checked(paths::CONTROLLER_EPOCH, version, &ops)
        .await
    {
        Ok(stats) => {
            let stat = stats
                .get(1)
                .copied()
                .flatten()
                .ok_or_else(|| ZkError::Other("no stat for the epoch update".into()))?;
            Ok(Some(Fence {
                controller_epoch: new_epoch,
                epoch_zk_version: stat.version,
            }))
        }
        // Lost the race, or a reply lost to a disconnection after it succeeded: the
        // znodes say which (Kafka's `checkControllerAndEpoch`).
        Err(ZkError::NodeExists(_) | ZkError::BadVersion(_) | ZkError::Fenced { .. }) => {
            if read_controller_id(s).await? != Some(broker_id) {
                return Ok(None);
            }
            let (epoch, version) = read_or_create_epoch(s).await?;
            Ok((epoch == new_epoch).then_some(Fence {
                controller_epoch: epoch,
                epoch_zk_version: version,
            }))
        }
        Err(e) => Err(e),
    }
}

/// Gives up the controllership by deleting `/controller`, only while this controller's
/// fence holds (Kafka's `deleteController`).
pub async fn resign(s: &ZkSession, fence: Fence) -> Result<(), ZkError> {
    super::store::delete_fenced(s, fence, paths::CONTROLLER).await
}
