//! The coordinator runtime, after Kafka's `CoordinatorRuntime`: one owner per
//! partition of an internal topic, running that partition's operations one at a time.
//!
//! ```text
//! handler ─▶ write(partition, op) ─▶ owner task ─▶ op(&mut shard) ─▶ records + response
//!                                        │ append one batch (PartitionLog)
//!                                        │ replay the records onto the shard
//!                                        └ answer when the high watermark passes them
//! ```
//!
//! - An operation reads the shard and returns the records to write and its response;
//!   the shard changes only when those records are replayed after the append, with
//!   the same `replay` that loads the partition. A failed append changes nothing.
//! - Reads run on the owner too, so they see every write answered before them.
//! - Timers live in the shard, keyed by deadline; the owner sleeps until the earliest.
//! - `on_elected` loads a partition's shard from its log (answering
//!   COORDINATOR_LOAD_IN_PROGRESS meanwhile); `on_resigned` drops it. A partition that
//!   fails to load is not served (NOT_COORDINATOR), never served empty.
//!
//! The group coordinator is one user (`GroupShard`); the transaction coordinator will
//! be another, with its own records and state.

pub mod batches;
pub mod load;
mod owner;
pub mod shard;
pub mod timers;
pub mod writer;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::time::Instant;

use owner::{Event, Owner, Pending};
pub use shard::{BatchKind, OnSettled, Shard, Written};
pub use writer::{Appended, PartitionLog};

/// Operations queued for one partition before callers wait for room.
const QUEUE_CAPACITY: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardStatus {
    Loading = 0,
    Active = 1,
    Failed = 2,
    Closed = 3,
}

impl ShardStatus {
    fn from_u8(v: u8) -> Self {
        match v {
            0 => ShardStatus::Loading,
            1 => ShardStatus::Active,
            2 => ShardStatus::Failed,
            _ => ShardStatus::Closed,
        }
    }

    /// The error an operation gets from a partition in this status.
    fn refusal(self) -> Option<ResponseError> {
        match self {
            ShardStatus::Active => None,
            ShardStatus::Loading => Some(ResponseError::CoordinatorLoadInProgress),
            ShardStatus::Failed | ShardStatus::Closed => Some(ResponseError::NotCoordinator),
        }
    }
}

pub use crate::clock::now_ms;

struct Handle<S: Shard> {
    epoch: i32,
    status: Arc<AtomicU8>,
    /// Notified once loading ends (served, failed, or closed before it finished).
    settled: Arc<Notify>,
    events: mpsc::Sender<Event<S>>,
}

/// A newly registered owner's status, load notification and queue.
type Installed<S> = (Arc<AtomicU8>, Arc<Notify>, mpsc::Receiver<Event<S>>);

impl<S: Shard> Handle<S> {
    /// Stops serving the partition: its owner ends, and a wait for its load is over.
    fn close(&self) {
        self.status
            .store(ShardStatus::Closed as u8, Ordering::Release);
        self.settled.notify_waiters();
    }
}

pub struct CoordinatorRuntime<S: Shard> {
    /// What the partitions belong to, for logs: "group coordinator".
    name: &'static str,
    log: Arc<dyn PartitionLog>,
    new_shard: Box<dyn Fn(i32) -> S + Send + Sync>,
    owners: Mutex<HashMap<i32, Handle<S>>>,
}

impl<S: Shard> CoordinatorRuntime<S> {
    pub fn new(
        name: &'static str,
        log: Arc<dyn PartitionLog>,
        new_shard: impl Fn(i32) -> S + Send + Sync + 'static,
    ) -> Self {
        CoordinatorRuntime {
            name,
            log,
            new_shard: Box::new(new_shard),
            owners: Mutex::new(HashMap::new()),
        }
    }

    /// How `partition` is served here; None when it is not.
    pub fn status(&self, partition: i32) -> Option<ShardStatus> {
        let owners = self.owners.lock();
        let h = owners.get(&partition)?;
        Some(ShardStatus::from_u8(h.status.load(Ordering::Acquire)))
    }

    /// The partitions served here, whatever their status.
    pub fn partitions(&self) -> Vec<i32> {
        let mut out: Vec<i32> = self.owners.lock().keys().copied().collect();
        out.sort_unstable();
        out
    }

    /// Resolves once `partition` is no longer loading, with its status then (None: it is
    /// not served here).
    pub async fn loaded(&self, partition: i32) -> Option<ShardStatus> {
        loop {
            let (status, settled) = {
                let owners = self.owners.lock();
                let h = owners.get(&partition)?;
                (h.status.clone(), h.settled.clone())
            };
            // Registered before the check, so a load ending in between is not missed.
            let ended = settled.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            match ShardStatus::from_u8(status.load(Ordering::Acquire)) {
                ShardStatus::Loading => ended.await,
                other => return Some(other),
            }
        }
    }

    /// Whether operations on `partition` are served now; the error otherwise.
    pub fn check(&self, partition: i32) -> Result<(), ResponseError> {
        self.check_online(partition)?;
        match self.status(partition) {
            None => Err(ResponseError::NotCoordinator),
            Some(s) => s.refusal().map_or(Ok(()), Err),
        }
    }

    /// NOT_COORDINATOR for a partition whose log dir went offline. Its state here stops
    /// at the failure, while the broker that leads the partition next (the controller
    /// moves it, but this broker, whose replica is offline, hears nothing more of it)
    /// serves on: a read of it (a transaction's partitions, a group's offsets) would
    /// answer from the past, as a verification that called a transaction's new
    /// partition not added (INVALID_TXN_STATE, fatal to the producer) once did.
    ///
    /// NOT_COORDINATOR too while this broker's leaderships are in doubt (its ZooKeeper
    /// session lost): the controller has moved them, and told the broker nothing yet.
    fn check_online(&self, partition: i32) -> Result<(), ResponseError> {
        match self.log.is_offline(partition) || self.log.leaderships_in_doubt() {
            true => Err(ResponseError::NotCoordinator),
            false => Ok(()),
        }
    }

    fn sender(&self, partition: i32) -> Result<mpsc::Sender<Event<S>>, ResponseError> {
        self.check_online(partition)?;
        let owners = self.owners.lock();
        let h = owners
            .get(&partition)
            .ok_or(ResponseError::NotCoordinator)?;
        match ShardStatus::from_u8(h.status.load(Ordering::Acquire)).refusal() {
            Some(e) => Err(e),
            None => Ok(h.events.clone()),
        }
    }

    /// Runs a write operation on `partition`'s owner: its records are appended and
    /// replayed, and its response is given once they are committed.
    pub async fn write<R, F>(&self, partition: i32, op: F) -> Result<R, ResponseError>
    where
        R: Send + 'static,
        F: FnOnce(&mut S) -> Result<Written<S::Record, R>, ResponseError> + Send + 'static,
    {
        let events = self.sender(partition)?;
        let (tx, rx) = oneshot::channel();
        let event = Event::Write(Box::new(move |shard: &mut S| match op(shard) {
            Ok(w) => Pending::from_written(w, move |r| {
                let _ = tx.send(r);
            }),
            Err(e) => Pending {
                records: Vec::new(),
                replay: false,
                batch: BatchKind::Plain,
                settle: Box::new(move |_| {
                    let _ = tx.send(Err(e));
                }),
            },
        }));
        events
            .send(event)
            .await
            .map_err(|_| ResponseError::NotCoordinator)?;
        rx.await.unwrap_or(Err(ResponseError::NotCoordinator))
    }

    /// Runs a read on `partition`'s owner, after every write queued before it.
    pub async fn read<R, F>(&self, partition: i32, op: F) -> Result<R, ResponseError>
    where
        R: Send + 'static,
        F: FnOnce(&S) -> R + Send + 'static,
    {
        let events = self.sender(partition)?;
        let (tx, rx) = oneshot::channel();
        let event = Event::Read(Box::new(move |shard: &S| {
            let _ = tx.send(op(shard));
        }));
        events
            .send(event)
            .await
            .map_err(|_| ResponseError::NotCoordinator)?;
        rx.await.map_err(|_| ResponseError::NotCoordinator)
    }

    /// This broker became the leader of `partition` at `epoch`: its shard is loaded from
    /// the log in the background, answering COORDINATOR_LOAD_IN_PROGRESS meanwhile. The
    /// receiver learns when the partition is served (or failed to load).
    pub fn on_elected(&self, partition: i32, epoch: i32) -> oneshot::Receiver<ShardStatus> {
        let (done, loaded) = oneshot::channel();
        let Some((status, settled, events)) = self.install(partition, epoch, ShardStatus::Loading)
        else {
            let _ = done.send(self.status(partition).unwrap_or(ShardStatus::Closed));
            return loaded;
        };
        let mut shard = (self.new_shard)(partition);
        let log = self.log.clone();
        let name = self.name;
        tokio::spawn(async move {
            let loading = {
                let log = log.clone();
                tokio::task::spawn_blocking(move || {
                    let result = load::load(log.as_ref(), partition, &mut shard);
                    (shard, result)
                })
            };
            let (shard, result) = match loading.await {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(partition, error = %e, "{name}: loading panicked");
                    status.store(ShardStatus::Failed as u8, Ordering::Release);
                    settled.notify_waiters();
                    let _ = done.send(ShardStatus::Failed);
                    return;
                }
            };
            let owner = Self::finish_load(name, partition, log, status, shard, result);
            settled.notify_waiters();
            let _ = done.send(
                owner
                    .as_ref()
                    .map_or(ShardStatus::Failed, |_| ShardStatus::Active),
            );
            if let Some(owner) = owner {
                owner.run(events).await;
            }
        });
        loaded
    }

    /// `on_elected`, loading in the calling thread: a broker starting up serves no
    /// request before its coordinators are loaded.
    pub fn load_now(&self, partition: i32, epoch: i32) -> ShardStatus {
        let Some((status, settled, events)) = self.install(partition, epoch, ShardStatus::Loading)
        else {
            return self.status(partition).unwrap_or(ShardStatus::Closed);
        };
        let mut shard = (self.new_shard)(partition);
        let result = load::load(self.log.as_ref(), partition, &mut shard);
        let owner = Self::finish_load(
            self.name,
            partition,
            self.log.clone(),
            status,
            shard,
            result,
        );
        settled.notify_waiters();
        match owner {
            Some(owner) => {
                tokio::spawn(owner.run(events));
                ShardStatus::Active
            }
            None => ShardStatus::Failed,
        }
    }

    /// Registers an owner for `partition` at `epoch`, unless one at that epoch or later
    /// is there already (serving, loading, or failed to load).
    fn install(&self, partition: i32, epoch: i32, status: ShardStatus) -> Option<Installed<S>> {
        let mut owners = self.owners.lock();
        if let Some(h) = owners.get(&partition) {
            // The same leadership again (a failed load included: as in Kafka, only a
            // new leader epoch loads the partition again).
            if h.epoch >= epoch {
                return None;
            }
            h.close();
        }
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let status = Arc::new(AtomicU8::new(status as u8));
        let settled = Arc::new(Notify::new());
        owners.insert(
            partition,
            Handle {
                epoch,
                status: status.clone(),
                settled: settled.clone(),
                events: tx,
            },
        );
        Some((status, settled, rx))
    }

    fn finish_load(
        name: &'static str,
        partition: i32,
        log: Arc<dyn PartitionLog>,
        status: Arc<AtomicU8>,
        mut shard: S,
        result: Result<load::LoadSummary, String>,
    ) -> Option<Owner<S>> {
        match result {
            Ok(summary) => {
                // Only a partition still loading becomes active: it may have been
                // resigned meanwhile. It is active before the shard hears it is loaded:
                // what `on_loaded` starts (the transaction coordinator's completions of
                // prepared transactions) checks that this broker serves the partition,
                // and on another thread may do so at once. Nothing reaches the shard
                // before `on_loaded`: the owner's loop starts after this returns.
                let activated = status
                    .compare_exchange(
                        ShardStatus::Loading as u8,
                        ShardStatus::Active as u8,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    )
                    .is_ok();
                if activated {
                    shard.on_loaded(Instant::now());
                }
                tracing::info!(
                    partition,
                    records = summary.records,
                    skipped = summary.skipped,
                    bytes = summary.bytes,
                    "{name}: partition loaded"
                );
                activated.then_some(Owner {
                    partition,
                    log: Arc::downgrade(&log),
                    status,
                    shard,
                    last_written: -1,
                })
            }
            Err(e) => {
                tracing::error!(partition, error = %e,
                    "{name}: the partition cannot be loaded and is not served; its groups answer NOT_COORDINATOR until it loads");
                status.store(ShardStatus::Failed as u8, Ordering::Release);
                None
            }
        }
    }

    /// This broker no longer leads `partition` (at `epoch` or later; None: the topic is
    /// gone): its shard is dropped and whatever waits on it answered NOT_COORDINATOR.
    pub fn on_resigned(&self, partition: i32, epoch: Option<i32>) {
        let mut owners = self.owners.lock();
        let resign = owners
            .get(&partition)
            .is_some_and(|h| epoch.is_none_or(|e| h.epoch <= e));
        if resign {
            if let Some(h) = owners.remove(&partition) {
                h.close();
            }
        }
    }

    /// Drops every partition (broker shutdown).
    pub fn shutdown(&self) {
        let mut owners = self.owners.lock();
        for (_, h) in owners.drain() {
            h.close();
        }
    }
}

#[cfg(test)]
pub(crate) mod memory_log;
#[cfg(test)]
mod tests;
