//! The owner of one partition: a task that runs the partition's operations and timers
//! one at a time against its shard, writes their records, replays them once appended,
//! and settles each operation when the high watermark passes its records.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;

use kafka_protocol::error::ResponseError;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::shard::{BatchKind, OnSettled, Shard, Written};
use super::writer::{Appended, PartitionLog};
use super::{batches, now_ms, ShardStatus};

/// What an operation asked to write, with how to answer once that is settled.
pub(super) struct Pending<Rec> {
    pub records: Vec<Rec>,
    pub replay: bool,
    pub batch: BatchKind,
    pub settle: OnSettled,
}

impl<Rec> Pending<Rec> {
    pub fn from_written<R: Send + 'static>(
        w: Written<Rec, R>,
        answer: impl FnOnce(Result<R, ResponseError>) + Send + 'static,
    ) -> Self {
        let Written {
            records,
            response,
            replay,
            on_settled,
            batch,
        } = w;
        Pending {
            records,
            replay,
            batch,
            settle: Box::new(move |result| {
                if let Some(f) = on_settled {
                    f(result);
                }
                answer(result.map(|()| response));
            }),
        }
    }
}

/// An operation as queued: it runs on the shard and says what to write.
pub(super) type WriteOp<S> = Box<dyn FnOnce(&mut S) -> Pending<<S as Shard>::Record> + Send>;

pub(super) enum Event<S: Shard> {
    Write(WriteOp<S>),
    Read(Box<dyn FnOnce(&S) + Send>),
}

pub(super) struct Owner<S: Shard> {
    pub partition: i32,
    /// Weak: the runtime's owner (the broker) holds the log; once it is gone, so is
    /// this partition.
    pub log: Weak<dyn PartitionLog>,
    pub status: Arc<AtomicU8>,
    pub shard: S,
    /// The offset of the last record this owner wrote (-1: none yet).
    pub last_written: i64,
}

impl<S: Shard> Owner<S> {
    fn status(&self) -> ShardStatus {
        ShardStatus::from_u8(self.status.load(Ordering::Acquire))
    }

    /// Serves events until the partition is closed or its state no longer matches its log.
    pub async fn run(mut self, mut events: mpsc::Receiver<Event<S>>) {
        while self.status() == ShardStatus::Active {
            let deadline = self.shard.next_deadline();
            let timer = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let event = tokio::select! {
                event = events.recv() => event,
                _ = timer => {
                    let written = self.shard.on_deadline(Instant::now());
                    let pending = Pending::from_written(written, |_| {});
                    self.write(pending).await;
                    continue;
                }
            };
            let Some(event) = event else { break };
            if self.status() != ShardStatus::Active {
                break;
            }
            match event {
                Event::Write(op) => {
                    let pending = op(&mut self.shard);
                    self.write(pending).await;
                }
                Event::Read(op) => op(&self.shard),
            }
        }
        // What is still queued is dropped unrun: its callers' answer channels close,
        // which they read as NOT_COORDINATOR.
        events.close();
        while events.recv().await.is_some() {}
        self.shard.on_unloaded();
    }

    /// Appends the records (or the marker), replays them, and settles once they are
    /// committed.
    async fn write(&mut self, p: Pending<S::Record>) {
        let is_marker = matches!(p.batch, BatchKind::Marker { .. });
        if p.records.is_empty() && !is_marker {
            self.settle_when_committed(self.last_written, p.settle);
            return;
        }
        let Some(log) = self.log.upgrade() else {
            (p.settle)(Err(ResponseError::NotCoordinator));
            return;
        };
        let now = now_ms();
        let encoded = match self.encode(&p, now) {
            Ok(e) => e,
            Err(e) => {
                (p.settle)(Err(e));
                return;
            }
        };
        let appended = match append(log.as_ref(), self.partition, p.batch, encoded, now).await {
            Ok(a) => a,
            Err(e) => {
                (p.settle)(Err(e));
                return;
            }
        };
        let count = if is_marker { 1 } else { p.records.len() as i64 };
        if appended.last_offset - appended.first_offset + 1 != count {
            self.fail(&format!(
                "{count} records were appended at offsets {}..={}",
                appended.first_offset, appended.last_offset
            ));
            (p.settle)(Err(ResponseError::NotCoordinator));
            return;
        }
        if p.replay {
            if let Err((offset, e)) = self.replay(p.batch, appended.first_offset, p.records) {
                self.fail(&format!(
                    "record written at offset {offset} does not replay: {e}"
                ));
                (p.settle)(Err(ResponseError::NotCoordinator));
                return;
            }
        }
        self.last_written = appended.last_offset;
        self.settle_when_committed(appended.last_offset, p.settle);
    }

    /// Encodes a write's records as one batch (plain or transactional); None for a
    /// marker, which the log builds.
    fn encode(&self, p: &Pending<S::Record>, now: i64) -> Result<Option<Bytes>, ResponseError> {
        let producer = match p.batch {
            BatchKind::Marker { .. } => return Ok(None),
            BatchKind::Plain => None,
            BatchKind::Transactional {
                producer_id,
                producer_epoch,
            } => Some((producer_id, producer_epoch)),
        };
        let encoded = p.records.iter().map(S::encode).collect();
        match batches::encode_for(encoded, now, producer) {
            Ok(b) => Ok(Some(b)),
            Err(e) => {
                tracing::error!(partition = self.partition, error = %e, "cannot encode coordinator records");
                Err(ResponseError::UnknownServerError)
            }
        }
    }

    /// Replays what a write appended from `first_offset`; the offset and error of a
    /// record that does not replay.
    fn replay(
        &mut self,
        batch: BatchKind,
        first_offset: i64,
        records: Vec<S::Record>,
    ) -> Result<(), (i64, String)> {
        if let BatchKind::Marker {
            producer_id,
            marker,
            ..
        } = batch
        {
            return self
                .shard
                .replay_end_txn(first_offset, producer_id, marker.result)
                .map_err(|e| (first_offset, e));
        }
        for (i, record) in records.into_iter().enumerate() {
            let offset = first_offset + i as i64;
            let replayed = match batch {
                BatchKind::Transactional { producer_id, .. } => {
                    self.shard.replay_transactional(offset, producer_id, record)
                }
                _ => self.shard.replay(offset, record),
            };
            replayed.map_err(|e| (offset, e))?;
        }
        Ok(())
    }

    fn settle_when_committed(&self, offset: i64, settle: OnSettled) {
        let Some(log) = self.log.upgrade() else {
            settle(Err(ResponseError::NotCoordinator));
            return;
        };
        let committed = log
            .high_watermark(self.partition)
            .is_some_and(|hw| hw > offset);
        if offset < 0 || committed {
            settle(Ok(()));
            return;
        }
        let partition = self.partition;
        tokio::spawn(async move { settle(log.committed(partition, offset).await) });
    }

    /// The shard no longer matches its log: stop serving it rather than answer from it.
    fn fail(&self, why: &str) {
        tracing::error!(
            partition = self.partition,
            "coordinator state is out of sync with its log and is no longer served: {why}"
        );
        self.status
            .store(ShardStatus::Failed as u8, Ordering::Release);
    }
}

/// Appends one write's batch: its encoded records, or the marker it asks for.
async fn append(
    log: &dyn PartitionLog,
    partition: i32,
    batch: BatchKind,
    encoded: Option<Bytes>,
    now: i64,
) -> Result<Appended, ResponseError> {
    match (batch, encoded) {
        (
            BatchKind::Marker {
                producer_id,
                producer_epoch,
                marker,
            },
            _,
        ) => {
            log.append_marker(partition, producer_id, producer_epoch, marker, now)
                .await
        }
        (_, Some(bytes)) => log.append(partition, bytes, now).await,
        (_, None) => Err(ResponseError::UnknownServerError),
    }
}
