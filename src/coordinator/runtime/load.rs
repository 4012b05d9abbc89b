//! Loading a partition: every record from the log start to the log end is replayed
//! onto a fresh shard, in offset order, with the same `replay` a write uses.
//!
//! As Kafka's loader does, records of a transactional batch are replayed as pending
//! for their producer and a transaction marker (a control batch) ends them; record types the coordinator does not own are skipped with a warning;
//! anything else that cannot be read or replayed fails the whole load, so a partition
//! is never served with part of its state missing.

use super::batches;
use super::shard::Shard;
use super::writer::PartitionLog;

/// Bytes read per step.
const READ_BYTES: usize = 1024 * 1024;

#[derive(Debug, Default, PartialEq, Eq)]
pub struct LoadSummary {
    pub records: u64,
    pub skipped: u64,
    pub bytes: u64,
}

pub fn load<S: Shard>(
    log: &dyn PartitionLog,
    partition: i32,
    shard: &mut S,
) -> Result<LoadSummary, String> {
    let mut summary = LoadSummary::default();
    let mut offset = log.log_start_offset(partition).map_err(|e| e.message())?;
    loop {
        let bytes = log
            .read(partition, offset, READ_BYTES)
            .map_err(|e| e.message())?;
        if bytes.is_empty() {
            return Ok(summary);
        }
        let stored = batches::decode_stored(&bytes)?;
        let Some(last) = stored.last() else {
            return Err(format!("no whole batch at offset {offset}"));
        };
        if last.next_offset <= offset {
            return Err(format!("batches at offset {offset} do not advance"));
        }
        let next = last.next_offset;
        summary.bytes += bytes.len() as u64;
        for batch in stored {
            // A read starts at the batch holding `offset`; records before it are done.
            if batch.next_offset <= offset {
                continue;
            }
            if batch.control {
                if let (Some(marker), Some(producer_id)) =
                    (batch.marker, batch.transactional_producer)
                {
                    shard
                        .replay_end_txn(batch.base_offset, producer_id, marker.result)
                        .map_err(|e| format!("marker at offset {}: {e}", batch.base_offset))?;
                }
                continue;
            }
            for r in batch.records {
                if r.offset < offset {
                    continue;
                }
                match S::decode(r.key.as_ref(), r.value.as_ref()) {
                    Ok(Some(record)) => {
                        let replayed = match batch.transactional_producer {
                            Some(producer_id) => {
                                shard.replay_transactional(r.offset, producer_id, record)
                            }
                            None => shard.replay(r.offset, record),
                        };
                        replayed.map_err(|e| format!("record at offset {}: {e}", r.offset))?;
                        summary.records += 1;
                    }
                    Ok(None) => {
                        summary.skipped += 1;
                        tracing::warn!(
                            partition,
                            offset = r.offset,
                            "skipping a record of a type this coordinator does not own"
                        );
                    }
                    Err(e) => return Err(format!("record at offset {}: {e}", r.offset)),
                }
            }
        }
        offset = next;
    }
}
