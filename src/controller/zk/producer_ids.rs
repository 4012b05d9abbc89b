//! Producer id blocks from `/latest_producer_id_block` (Kafka's
//! `ZkProducerIdManager.getNewProducerIdBlock`): the next 1000 ids after the last block
//! handed out, claimed with a compare-and-set on the znode's version, so two brokers (or
//! two controllers) never get the same block.

use crate::zk::session::{ZkError, ZkSession};
use crate::zk::znodes::{self, paths, ProducerIdBlock};

pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    #[error("have exhausted all producer ids")]
    Exhausted,
    #[error(transparent)]
    Zk(#[from] ZkError),
}

/// Claims the next block for `broker_id`; returns its first id.
pub async fn allocate_block(s: &ZkSession, broker_id: i32) -> Result<i64, BlockError> {
    loop {
        let (current, version) = match s.get(paths::LATEST_PRODUCER_ID_BLOCK).await? {
            Some((data, stat)) if !data.is_empty() => {
                let block = znodes::decode::<ProducerIdBlock>(&data)
                    .ok()
                    .and_then(|b| b.range())
                    .ok_or_else(|| {
                        ZkError::Other(format!("unreadable {}", paths::LATEST_PRODUCER_ID_BLOCK))
                    })?;
                (Some(block), Some(stat.version))
            }
            Some((_, stat)) => (None, Some(stat.version)),
            None => (None, None),
        };
        let first = match current {
            Some((_, last)) if last > i64::MAX - PRODUCER_ID_BLOCK_SIZE => {
                return Err(BlockError::Exhausted)
            }
            Some((_, last)) => last + 1,
            None => 0,
        };
        let data = znodes::encode(&ProducerIdBlock::new(
            broker_id,
            first,
            PRODUCER_ID_BLOCK_SIZE,
        ));
        let written = match version {
            Some(v) => s
                .set(paths::LATEST_PRODUCER_ID_BLOCK, &data, Some(v))
                .await
                .map(|_| ()),
            None => s
                .create_recursive(paths::LATEST_PRODUCER_ID_BLOCK, &data)
                .await
                .map(|_| ()),
        };
        match written {
            Ok(()) => {
                tracing::info!(
                    broker_id,
                    first,
                    last = first + PRODUCER_ID_BLOCK_SIZE - 1,
                    "producer id block claimed"
                );
                return Ok(first);
            }
            Err(ZkError::BadVersion(_) | ZkError::NodeExists(_) | ZkError::NoNode(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}
