//! Producer id blocks from `/latest_producer_id_block` (Kafka's
//! `ZkProducerIdManager.getNewProducerIdBlock`): the next 1000 ids after the last block
//! handed out, claimed with a compare-and-set on the znode's version, so two brokers (or
//! two controllers) never get the same block. An empty znode (older skua versions created
//! one at startup) means no block handed out yet, as a missing one does.

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

/// Makes an empty `/latest_producer_id_block` a valid one by claiming the first block for
/// `broker_id`. skua reads an empty znode as "no block yet", but a Kafka 3.9 broker below
/// inter-broker protocol 3.0 claims its own blocks at startup and fails to start parsing
/// an empty one. The ids of the block claimed here are simply never handed out.
pub async fn repair_empty_block(s: &ZkSession, broker_id: i32) -> Result<(), BlockError> {
    match s.get(paths::LATEST_PRODUCER_ID_BLOCK).await? {
        Some((data, _)) if data.is_empty() => {
            let first = allocate_block(s, broker_id).await?;
            tracing::warn!(
                broker_id,
                first,
                "{} was empty (left by an older skua); wrote a valid block so Kafka brokers \
                 below inter.broker.protocol.version 3.0 can start",
                paths::LATEST_PRODUCER_ID_BLOCK
            );
            Ok(())
        }
        _ => Ok(()),
    }
}
