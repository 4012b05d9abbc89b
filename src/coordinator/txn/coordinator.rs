//! TransactionCoordinator: what the transaction handlers call. Each transactional id
//! belongs to the owner of its `__transaction_state` partition
//! (`abs(hash(id)) % partitions`); a broker not serving it answers NOT_COORDINATOR,
//! one still loading it COORDINATOR_LOAD_IN_PROGRESS. Which partitions are served
//! follows their leadership in the metadata, as for groups.
//!
//! Ending a transaction: EndTxn writes the Prepare record; its replay hands the
//! transaction to `complete`, which writes a marker to every partition of the
//! transaction (`MarkerWriter`) and then the Complete record. EndTxn answers once the
//! transaction is complete, or after `COMPLETION_WAIT` at the latest: once Prepare is
//! committed the outcome is decided, and the markers are retried until written, also by
//! the next coordinator after a crash (it finds the Prepare record when loading).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use tokio::sync::mpsc;

use super::markers::{MarkerWrite, MarkerWriter};
use super::peers::TxnPeers;
use super::records::{partition_for, TxnRecord};
use super::shard::{Completion, EndTxnOutcome, TxnDescription, TxnShard};
use crate::config::transaction::TransactionConfig;
use crate::controller::delta::{ApplyError, MetadataDelta, MetadataListener, TopicDelta};
use crate::controller::image::MetadataImage;
use crate::controller::TopicInfo;
#[cfg(test)]
use crate::coordinator::runtime::ShardStatus;
use crate::coordinator::runtime::{now_ms, CoordinatorRuntime, PartitionLog, Written};
use crate::coordinator::TRANSACTION_STATE_TOPIC;
use crate::log::control::EndTxnMarker;
use crate::log::TopicPartition;

/// How long EndTxn waits for the markers before answering anyway.
const COMPLETION_WAIT: Duration = Duration::from_secs(10);
/// Retry backoff for a marker that could not be written.
const MARKER_RETRY_MIN: Duration = Duration::from_millis(50);
const MARKER_RETRY_MAX: Duration = Duration::from_secs(2);

/// The leader of a partition of `__transaction_state` as some metadata says.
pub type LeaderLookup = Box<dyn Fn(i32) -> Option<i32> + Send + Sync>;

pub struct TransactionCoordinator {
    config: TransactionConfig,
    /// The partition count of `__transaction_state`, fixed once the topic is seen.
    state_partitions: OnceLock<i32>,
    runtime: CoordinatorRuntime<TxnShard>,
    log: Arc<dyn PartitionLog>,
    markers: Arc<dyn MarkerWriter>,
    /// Other brokers, for verifying a transaction their coordinator holds (None: alone).
    peers: Option<Arc<TxnPeers>>,
    /// The leader of each `__transaction_state` partition, as the metadata says.
    leaders: parking_lot::Mutex<std::collections::HashMap<i32, i32>>,
    /// The leader of a `__transaction_state` partition in the broker's metadata cache, when
    /// the broker has one (`follow_metadata_leaders`): Kafka's verification asks the
    /// coordinator its metadata cache names. The deltas behind `leaders` follow the
    /// replicas hosted here, and a replica whose log dir went offline hears of no later
    /// leader.
    metadata_leader: OnceLock<LeaderLookup>,
    broker_id: i32,
    started: AtomicBool,
    /// The task completing prepared transactions (and the completions it runs), ended by
    /// `shutdown`.
    completions: parking_lot::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// How long EndTxn waits for the markers (`COMPLETION_WAIT`; shorter in tests).
    completion_wait_ms: std::sync::atomic::AtomicU64,
    /// True once the broker begins shutting down: EndTxn stops waiting for markers.
    stopping: tokio::sync::watch::Sender<bool>,
}

impl TransactionCoordinator {
    /// Must run in a tokio runtime: the task writing markers is started here.
    pub fn new(
        broker_id: i32,
        config: TransactionConfig,
        log: Arc<dyn PartitionLog>,
        markers: Arc<dyn MarkerWriter>,
        peers: Option<Arc<TxnPeers>>,
    ) -> Arc<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        let shard_config = config.clone();
        let runtime = CoordinatorRuntime::new("transaction coordinator", log.clone(), move |p| {
            TxnShard::new(p, shard_config.clone(), tx.clone())
        });
        let coordinator = Arc::new(TransactionCoordinator {
            config,
            state_partitions: OnceLock::new(),
            runtime,
            log,
            markers,
            peers,
            leaders: parking_lot::Mutex::new(std::collections::HashMap::new()),
            metadata_leader: OnceLock::new(),
            broker_id,
            started: AtomicBool::new(false),
            completions: parking_lot::Mutex::new(None),
            completion_wait_ms: std::sync::atomic::AtomicU64::new(
                COMPLETION_WAIT.as_millis() as u64
            ),
            stopping: tokio::sync::watch::Sender::new(false),
        });
        let task = tokio::spawn(run_completions(Arc::downgrade(&coordinator), rx));
        *coordinator.completions.lock() = Some(task);
        coordinator
    }

    /// `__transaction_state` partitions: the topic's own count once it exists, the
    /// configured one (which creates it) until then.
    fn partitions(&self) -> i32 {
        self.state_partitions
            .get()
            .copied()
            .unwrap_or(self.config.state_log_partitions.max(1))
    }

    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        partition_for(transactional_id, self.partitions())
    }

    /// Whether this broker serves `transactional_id` now; the error otherwise.
    pub fn check_coordinator(&self, transactional_id: &str) -> Result<(), ResponseError> {
        self.runtime.check(self.partition_for(transactional_id))
    }

    /// Resolves once the partition of `transactional_id` is no longer loading.
    pub async fn loaded(&self, transactional_id: &str) {
        self.runtime
            .loaded(self.partition_for(transactional_id))
            .await;
    }

    /// Stops serving: every partition is dropped and markers still being written are
    /// left for the next start, which finds their transactions prepared.
    /// The broker begins shutting down: an EndTxn waiting for its markers is answered
    /// now (its outcome was decided when its Prepare record was committed), so it does
    /// not hold its connection, and the listener's drain, until the wait is over.
    pub fn begin_shutdown(&self) {
        self.stopping.send_replace(true);
    }

    pub fn shutdown(&self) {
        self.runtime.shutdown();
        if let Some(task) = self.completions.lock().take() {
            task.abort();
        }
    }

    async fn write<R, F>(&self, transactional_id: &str, op: F) -> Result<R, ResponseError>
    where
        R: Send + 'static,
        F: FnOnce(&mut TxnShard) -> Result<Written<TxnRecord, R>, ResponseError> + Send + 'static,
    {
        if transactional_id.is_empty() {
            return Err(ResponseError::InvalidRequest);
        }
        let p = self.partition_for(transactional_id);
        self.runtime.check(p)?;
        self.runtime.write(p, op).await
    }

    async fn read<R, F>(&self, transactional_id: &str, op: F) -> Result<R, ResponseError>
    where
        R: Send + 'static,
        F: FnOnce(&TxnShard) -> R + Send + 'static,
    {
        let p = self.partition_for(transactional_id);
        self.runtime.check(p)?;
        self.runtime.read(p, op).await
    }

    /// InitProducerId with a transactional id: the producer id and epoch to use.
    /// `allocate` gives a new producer id; it is called only when one is needed.
    pub async fn init_producer_id<F, Fut>(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        allocate: F,
    ) -> Result<(i64, i16), ResponseError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<i64, ResponseError>>,
    {
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            return Err(ResponseError::InvalidTransactionTimeout);
        }
        let id = transactional_id.to_string();
        let needs = self
            .read(transactional_id, move |s| s.needs_producer_id(&id))
            .await?;
        let new_producer_id = match needs {
            true => Some(allocate().await?),
            false => None,
        };
        let id = transactional_id.to_string();
        self.write(transactional_id, move |s| {
            s.init_producer_id(&id, timeout_ms, expected, new_producer_id, now_ms())
        })
        .await?
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn with the offsets partition).
    pub async fn add_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: Vec<TopicPartition>,
    ) -> Result<(), ResponseError> {
        let id = transactional_id.to_string();
        self.write(transactional_id, move |s| {
            s.add_partitions(&id, producer_id, epoch, &partitions, now_ms())
        })
        .await
    }

    /// Where the broker's metadata cache says `__transaction_state`'s partitions are led
    /// (the first call counts).
    pub fn follow_metadata_leaders(&self, lookup: LeaderLookup) {
        let _ = self.metadata_leader.set(lookup);
    }

    /// The leader of `partition` of `__transaction_state`: the metadata cache's, else the
    /// last delta's.
    fn leader_of(&self, partition: i32) -> Option<i32> {
        self.metadata_leader
            .get()
            .and_then(|lookup| lookup(partition))
            .or_else(|| self.leaders.lock().get(&partition).copied())
    }

    /// Whether each partition is in the producer's ongoing transaction (KIP-890).
    pub async fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: Vec<TopicPartition>,
    ) -> Result<Vec<(TopicPartition, Option<ResponseError>)>, ResponseError> {
        let p = self.partition_for(transactional_id);
        let elsewhere = self.leader_of(p);
        match (self.runtime.check(p), elsewhere, &self.peers) {
            // Another broker coordinates the id: ask it, as Kafka's partition leaders do.
            (Err(ResponseError::NotCoordinator), Some(leader), Some(peers))
                if leader >= 0 && leader != self.broker_id =>
            {
                peers
                    .verify_partitions(leader, transactional_id, producer_id, epoch, &partitions)
                    .await
            }
            _ => {
                self.verify_partitions_here(transactional_id, producer_id, epoch, partitions)
                    .await
            }
        }
    }

    /// `verify_partitions` answered by this broker's coordinator only: what a verify-only
    /// AddPartitionsToTxn from another broker gets (never sent on, so brokers whose
    /// metadata disagree cannot pass it back and forth).
    pub async fn verify_partitions_here(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: Vec<TopicPartition>,
    ) -> Result<Vec<(TopicPartition, Option<ResponseError>)>, ResponseError> {
        let id = transactional_id.to_string();
        self.read(transactional_id, move |s| {
            s.verify_partitions(&id, producer_id, epoch, &partitions)
        })
        .await?
    }

    /// EndTxn: commit or abort the producer's ongoing transaction.
    pub async fn end_txn(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), ResponseError> {
        let id = transactional_id.to_string();
        let outcome = self
            .write(transactional_id, move |s| {
                s.end_txn(&id, producer_id, epoch, commit, now_ms())
            })
            .await?;
        if let EndTxnOutcome::Completing(done) = outcome {
            // Decided once Prepare is committed; the wait only spares the client a
            // CONCURRENT_TRANSACTIONS on its next transaction while markers are written.
            let wait = Duration::from_millis(self.completion_wait_ms.load(Ordering::Relaxed));
            let mut stopping = self.stopping.subscribe();
            tokio::select! {
                r = tokio::time::timeout(wait, done) => if r.is_err() {
                    tracing::warn!(
                        transactional_id,
                        "transaction markers still pending; EndTxn answered"
                    );
                },
                _ = stopping.wait_for(|&s| s) => {}
            }
        }
        Ok(())
    }

    /// DescribeTransactions for one id (None: not known).
    pub async fn describe(
        &self,
        transactional_id: &str,
    ) -> Result<Option<TxnDescription>, ResponseError> {
        let id = transactional_id.to_string();
        self.read(transactional_id, move |s| s.describe(&id)).await
    }

    /// Every transactional id served here (ListTransactions). A partition still loading
    /// makes the answer COORDINATOR_LOAD_IN_PROGRESS.
    pub async fn list(&self) -> Result<Vec<TxnDescription>, ResponseError> {
        let mut out = Vec::new();
        for p in self.runtime.partitions() {
            match self.runtime.read(p, |s: &TxnShard| s.list()).await {
                Ok(txns) => out.extend(txns),
                Err(ResponseError::CoordinatorLoadInProgress) => {
                    return Err(ResponseError::CoordinatorLoadInProgress)
                }
                Err(_) => {}
            }
        }
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        Ok(out)
    }

    /// Writes the markers of a prepared transaction, then its Complete record. Stops
    /// when this broker no longer coordinates the transaction: the next coordinator
    /// finds it prepared and finishes it.
    async fn complete(&self, c: Completion) {
        // Markers only once the Prepare record is committed, as Kafka sends them from its
        // append's callback (acks=all). The shard replays the record when it is appended;
        // one a new leader truncates (this broker cut off, a timed-out transaction
        // aborted meanwhile) would leave markers written for an outcome the next
        // coordinator never learns: it would end the transaction the other way, and the
        // partitions that took the first markers would refuse the second (an older
        // producer epoch), splitting the transaction. A partition no longer led here
        // answers NOT_COORDINATOR, and the next coordinator completes what it has.
        if self
            .log
            .committed(c.partition, c.prepared_at)
            .await
            .is_err()
        {
            return;
        }
        let Some(coordinator_epoch) = self.log.leader_epoch(c.partition) else {
            return;
        };
        let marker = EndTxnMarker {
            result: c.result,
            coordinator_epoch,
        };
        if self.runtime.check(c.partition).is_err() {
            return;
        }
        let started = std::time::Instant::now();
        // Every first attempt starts at once, so the markers bound for one broker leave
        // in one request; each partition then retries on its own.
        let partitions: Vec<TopicPartition> = c.partitions.iter().cloned().collect();
        let first =
            self.markers
                .write_markers(&partitions, c.producer_id, c.producer_epoch, marker);
        let writes = partitions
            .iter()
            .zip(first)
            .map(|(tp, first)| self.write_marker_until_done(&c, tp, marker, first));
        let written = futures::future::join_all(writes).await;
        if written.contains(&false) {
            return;
        }
        tracing::debug!(
            producer_id = c.producer_id,
            partitions = c.partitions.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "transaction markers written"
        );
        // The Complete record is retried while this broker still coordinates the
        // partition (Kafka's `TransactionMarkerChannelManager.tryAppendToLog` retries
        // NOT_ENOUGH_REPLICAS and timeouts): an ISR below min.insync.replicas that
        // leadership does not leave would otherwise hold the transaction prepared, and
        // its producer at CONCURRENT_TRANSACTIONS, until the ISR grew back and beyond.
        let partition = c.partition;
        let mut backoff = std::time::Duration::from_millis(100);
        loop {
            let attempt = c.clone();
            let result = self
                .runtime
                .write(partition, move |s| Ok(s.complete(&attempt, now_ms())))
                .await;
            let Err(e) = result else { return };
            if self.runtime.check(partition).is_err() {
                tracing::warn!(partition, error = %e, "transaction not completed; the next coordinator completes it");
                return;
            }
            tracing::warn!(partition, error = %e, retry_ms = backoff.as_millis() as u64, "transaction's Complete record not written; retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(std::time::Duration::from_secs(5));
        }
    }

    /// Awaits one marker's `first` write, retrying with backoff (the leader looked up
    /// again each time); false when this broker stopped coordinating (or was fenced)
    /// first.
    async fn write_marker_until_done(
        &self,
        c: &Completion,
        tp: &TopicPartition,
        marker: EndTxnMarker,
        first: MarkerWrite,
    ) -> bool {
        let mut backoff = MARKER_RETRY_MIN;
        let mut attempts: u64 = 1;
        let mut write = first;
        loop {
            match write.await {
                Ok(()) => return true,
                // A deleted partition has no transaction to end (Kafka drops these too).
                Err(ResponseError::UnknownTopicOrPartition) => {
                    tracing::warn!(partition = %tp, "dropping a transaction marker for a partition that no longer exists");
                    return true;
                }
                Err(ResponseError::InvalidProducerEpoch | ResponseError::ProducerFenced) => {
                    tracing::warn!(partition = %tp, producer_id = c.producer_id, "the partition has a newer epoch of the producer; its marker is not needed");
                    return true;
                }
                Err(ResponseError::TransactionCoordinatorFenced) => {
                    tracing::warn!(partition = %tp, "a newer transaction coordinator wrote to this partition; stopping");
                    return false;
                }
                // As Kafka's marker sender: retried (with backoff) for as long as this
                // broker coordinates the transaction, whatever keeps the partition from
                // taking it (no leader, a leader moving, a `__consumer_offsets` partition
                // whose group load failed until a leadership change reloads it). Said
                // once, then every 30th attempt (about a minute at the longest backoff).
                Err(e) => {
                    if attempts % 30 == 1 {
                        tracing::warn!(partition = %tp, error = %e, attempts, "transaction marker not written; retrying");
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MARKER_RETRY_MAX);
                }
            }
            attempts += 1;
            if self.runtime.check(c.partition).is_err() {
                return false;
            }
            let again = self.markers.write_markers(
                std::slice::from_ref(tp),
                c.producer_id,
                c.producer_epoch,
                marker,
            );
            write = match again.into_iter().next() {
                Some(w) => w,
                None => Box::pin(std::future::ready(Err(ResponseError::UnknownServerError))),
            };
        }
    }

    // ---- leadership ----

    fn follow_leadership(&self, topic: &TopicInfo, inline: bool) {
        if !topic.partitions.is_empty() {
            let _ = self.state_partitions.set(topic.partitions.len() as i32);
        }
        self.leaders.lock().extend(
            topic
                .partitions
                .iter()
                .map(|p| (p.partition, p.state.leader)),
        );
        for p in &topic.partitions {
            let (partition, epoch) = (p.partition, p.state.leader_epoch);
            match p.state.leader == self.broker_id {
                true if inline => {
                    self.runtime.load_now(partition, epoch);
                }
                true => drop(self.runtime.on_elected(partition, epoch)),
                false => self.runtime.on_resigned(partition, Some(epoch)),
            }
        }
    }

    /// What to subscribe to the metadata (held weakly, as the group coordinator's).
    pub fn metadata_listener(self: &Arc<Self>) -> Arc<dyn MetadataListener> {
        Arc::new(LeadershipListener(Arc::downgrade(self)))
    }

    fn apply_delta(&self, delta: &MetadataDelta) {
        let inline = !self.started.swap(true, Ordering::AcqRel);
        match delta.topics.get(TRANSACTION_STATE_TOPIC) {
            Some(TopicDelta::Changed(topic)) => self.follow_leadership(topic, inline),
            Some(TopicDelta::Removed(topic)) => {
                self.leaders.lock().clear();
                for p in &topic.partitions {
                    self.runtime.on_resigned(p.partition, None);
                }
            }
            None => {}
        }
    }
}

struct LeadershipListener(Weak<TransactionCoordinator>);

impl MetadataListener for LeadershipListener {
    fn on_delta(&self, _image: &MetadataImage, delta: &MetadataDelta) -> Vec<ApplyError> {
        if let Some(txns) = self.0.upgrade() {
            txns.apply_delta(delta);
        }
        Vec::new()
    }
}

/// Completes each prepared transaction the shards hand over, concurrently. The
/// completions are this task's own (a `JoinSet`), so aborting it ends them too.
async fn run_completions(
    coordinator: Weak<TransactionCoordinator>,
    mut prepared: mpsc::UnboundedReceiver<Completion>,
) {
    let mut running = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            c = prepared.recv() => {
                let Some(c) = c else { break };
                let Some(me) = coordinator.upgrade() else { break };
                running.spawn(async move { me.complete(c).await });
            }
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
    running.shutdown().await;
}

#[cfg(test)]
impl TransactionCoordinator {
    /// Loads `partition` as leader at `epoch`, as a metadata delta would.
    fn load_now(&self, partition: i32, epoch: i32) -> ShardStatus {
        self.runtime.load_now(partition, epoch)
    }

    fn set_completion_wait(&self, wait: Duration) {
        self.completion_wait_ms
            .store(wait.as_millis() as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
#[path = "coordinator_tests.rs"]
mod tests;

/// The replica manager asks the transaction coordinator (this broker's, or through it
/// the one coordinating the id) before a transaction's first batch in a partition.
#[async_trait::async_trait]
impl crate::replica::append::TransactionVerifier for TransactionCoordinator {
    async fn verify(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        tp: &TopicPartition,
    ) -> Result<(), ResponseError> {
        let answered = self
            .verify_partitions(
                transactional_id,
                producer_id,
                producer_epoch,
                vec![tp.clone()],
            )
            .await?;
        match answered.first().and_then(|(_, e)| *e) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
