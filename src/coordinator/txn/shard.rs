//! TxnShard: the transactional ids of one `__transaction_state` partition, as the
//! coordinator runtime serves them (Kafka's `TransactionStateManager` cache for one
//! partition, with `TransactionCoordinator`'s state transitions).
//!
//! State changes only by replaying records. A transaction ends in two steps, as in
//! Kafka: `PrepareCommit`/`PrepareAbort` is written first; once it is replayed (at write
//! time, or found at load after a crash) the transaction is handed to the marker
//! writer (`Completion`), which writes the markers to every partition of the
//! transaction and then asks the shard to write `CompleteCommit`/`CompleteAbort`.
//!
//! Two periodic checks run as the shard's timers: transactions open past their timeout
//! are aborted with the producer's epoch bumped (so the producer is fenced), and ids
//! idle past `transactional.id.expiration.ms` are removed with a tombstone.

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Duration, Instant};

use super::records::{decode_record, encode_record, TxnRecord, TxnState, TxnValue};
use crate::config::transaction::TransactionConfig;
use crate::coordinator::runtime::{now_ms, Shard, Written};
use crate::log::control::TxnResult;
use crate::log::TopicPartition;

/// Epochs at or past this leave no room for another bump: the producer id is rotated.
const EPOCH_EXHAUSTED: i16 = i16::MAX - 1;

/// One transactional id: the stored value and what memory adds to it.
#[derive(Clone, Debug)]
pub struct TxnMetadata {
    pub value: TxnValue,
    /// The epoch before the last bump (-1: unknown), so a producer retrying the
    /// InitProducerId that bumped it gets the same epoch back (KIP-360).
    pub last_producer_epoch: i16,
    /// The offset of the record this state was replayed from.
    pub offset: i64,
}

/// A prepared transaction whose markers are to be written.
#[derive(Clone, Debug)]
pub struct Completion {
    /// The `__transaction_state` partition it belongs to.
    pub partition: i32,
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub result: TxnResult,
    pub partitions: BTreeSet<TopicPartition>,
    /// The offset of its Prepare record: no marker is written before that record is
    /// committed.
    pub prepared_at: i64,
}

/// What InitProducerId answers.
pub type InitResult = Result<(i64, i16), ResponseError>;

/// What EndTxn answers: done, or prepared and completing (resolved once the
/// transaction's Complete record is replayed).
pub enum EndTxnOutcome {
    Done,
    Completing(oneshot::Receiver<()>),
}

/// A transaction as DescribeTransactions and ListTransactions report it.
#[derive(Clone, Debug)]
pub struct TxnDescription {
    pub transactional_id: String,
    pub value: TxnValue,
}

pub struct TxnShard {
    partition: i32,
    config: TransactionConfig,
    txns: HashMap<String, TxnMetadata>,
    /// Set once loading ended: from then on a replayed Prepare record starts its markers.
    loaded: bool,
    completions: mpsc::UnboundedSender<Completion>,
    /// EndTxn callers waiting for their transaction's Complete record.
    waiters: HashMap<String, Vec<oneshot::Sender<()>>>,
    next_timeout_check: Option<Instant>,
    next_expiration_check: Option<Instant>,
}

impl TxnShard {
    pub fn new(
        partition: i32,
        config: TransactionConfig,
        completions: mpsc::UnboundedSender<Completion>,
    ) -> Self {
        TxnShard {
            partition,
            config,
            txns: HashMap::new(),
            loaded: false,
            completions,
            waiters: HashMap::new(),
            next_timeout_check: None,
            next_expiration_check: None,
        }
    }

    pub fn get(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns.get(transactional_id)
    }

    /// Whether InitProducerId for `transactional_id` needs a new producer id: the id is
    /// new, or its epoch is exhausted.
    pub fn needs_producer_id(&self, transactional_id: &str) -> bool {
        self.txns
            .get(transactional_id)
            .is_none_or(|m| m.value.producer_epoch >= EPOCH_EXHAUSTED)
    }

    /// InitProducerId with a transactional id (Kafka's `handleInitProducerId`, transaction
    /// version 0/1). `expected` is the producer id and epoch a producer re-initialising
    /// after an abortable error sends (KIP-360); `new_producer_id` was allocated by the
    /// caller when `needs_producer_id` said so.
    pub fn init_producer_id(
        &mut self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        new_producer_id: Option<i64>,
        now_ms: i64,
    ) -> Result<Written<TxnRecord, InitResult>, ResponseError> {
        let Some(m) = self.txns.get(transactional_id) else {
            let Some(pid) = new_producer_id else {
                return Err(ResponseError::ConcurrentTransactions);
            };
            let value = TxnValue {
                producer_id: pid,
                previous_producer_id: -1,
                producer_epoch: 0,
                timeout_ms,
                state: TxnState::Empty,
                partitions: BTreeSet::new(),
                last_update_ms: now_ms,
                start_ms: -1,
            };
            return Ok(write(transactional_id, value, Ok((pid, 0))));
        };
        let v = &m.value;
        if let Some((pid, epoch)) = expected {
            let known =
                pid == v.producer_id || (pid == v.previous_producer_id && epoch >= EPOCH_EXHAUSTED);
            if !known {
                return Err(ResponseError::ProducerFenced);
            }
        }
        match v.state {
            TxnState::PrepareCommit
            | TxnState::PrepareAbort
            | TxnState::Dead
            | TxnState::PrepareEpochFence => Err(ResponseError::ConcurrentTransactions),
            TxnState::Ongoing => {
                // Abort the open transaction under a bumped epoch, which fences the
                // producer that began it; the caller retries and bumps again.
                let mut next = v.clone();
                next.producer_epoch = bump(v.producer_epoch);
                next.state = TxnState::PrepareAbort;
                next.last_update_ms = now_ms;
                Ok(write(
                    transactional_id,
                    next,
                    Err(ResponseError::ConcurrentTransactions),
                ))
            }
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let exhausted = v.producer_epoch >= EPOCH_EXHAUSTED;
                let mut next = v.clone();
                next.state = TxnState::Empty;
                next.partitions.clear();
                next.timeout_ms = timeout_ms;
                next.last_update_ms = now_ms;
                next.start_ms = -1;
                if exhausted && expected.is_none_or(|(_, e)| e == v.producer_epoch) {
                    let Some(pid) = new_producer_id else {
                        return Err(ResponseError::ConcurrentTransactions);
                    };
                    next.previous_producer_id = v.producer_id;
                    next.producer_id = pid;
                    next.producer_epoch = 0;
                } else {
                    match expected {
                        // A retry of the InitProducerId that made the current epoch.
                        Some((_, e))
                            if v.producer_epoch >= 0
                                && e != v.producer_epoch
                                && e == m.last_producer_epoch =>
                        {
                            return Ok(Written::response(Ok((v.producer_id, v.producer_epoch))));
                        }
                        Some((_, e)) if v.producer_epoch >= 0 && e != v.producer_epoch => {
                            return Err(ResponseError::ProducerFenced);
                        }
                        _ => next.producer_epoch = bump(v.producer_epoch),
                    }
                }
                let answer = Ok((next.producer_id, next.producer_epoch));
                Ok(write(transactional_id, next, answer))
            }
        }
    }

    /// The metadata of `transactional_id` for a request from `producer_id` at `epoch`:
    /// INVALID_PRODUCER_ID_MAPPING for an unknown id or another producer, PRODUCER_FENCED
    /// for another epoch.
    fn checked(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
    ) -> Result<&TxnMetadata, ResponseError> {
        let m = self
            .txns
            .get(transactional_id)
            .ok_or(ResponseError::InvalidProducerIdMapping)?;
        if m.value.producer_id != producer_id {
            return Err(ResponseError::InvalidProducerIdMapping);
        }
        if m.value.producer_epoch != epoch {
            return Err(ResponseError::ProducerFenced);
        }
        Ok(m)
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn, with the group's offsets partition):
    /// the transaction is Ongoing with these partitions once the record is written.
    pub fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TopicPartition],
        now_ms: i64,
    ) -> Result<Written<TxnRecord, ()>, ResponseError> {
        let m = self.checked(transactional_id, producer_id, epoch)?;
        let v = &m.value;
        match v.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                return Err(ResponseError::ConcurrentTransactions)
            }
            TxnState::Dead | TxnState::PrepareEpochFence => {
                return Err(ResponseError::InvalidTxnState)
            }
            TxnState::Ongoing if partitions.iter().all(|p| v.partitions.contains(p)) => {
                return Ok(Written::response(()))
            }
            _ => {}
        }
        let mut next = v.clone();
        if v.state != TxnState::Ongoing {
            next.partitions.clear();
            next.start_ms = now_ms;
        }
        next.state = TxnState::Ongoing;
        next.partitions.extend(partitions.iter().cloned());
        next.last_update_ms = now_ms;
        Ok(write(transactional_id, next, ()))
    }

    /// AddPartitionsToTxn v4+ with `verify_only` (KIP-890): whether each partition is in
    /// the producer's ongoing transaction. Nothing is written.
    pub fn verify_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Option<ResponseError>)>, ResponseError> {
        let m = self.checked(transactional_id, producer_id, epoch)?;
        if matches!(
            m.value.state,
            TxnState::PrepareCommit | TxnState::PrepareAbort
        ) {
            return Err(ResponseError::ConcurrentTransactions);
        }
        let ongoing = m.value.state == TxnState::Ongoing;
        Ok(partitions
            .iter()
            .map(|p| {
                let added = ongoing && m.value.partitions.contains(p);
                (
                    p.clone(),
                    (!added).then_some(ResponseError::InvalidTxnState),
                )
            })
            .collect())
    }

    /// EndTxn (Kafka's `endTransaction`, transaction version 0/1): an ongoing
    /// transaction is prepared; a retry of an ended one is answered as it was.
    pub fn end_txn(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        epoch: i16,
        commit: bool,
        now_ms: i64,
    ) -> Result<Written<TxnRecord, EndTxnOutcome>, ResponseError> {
        let m = self.checked(transactional_id, producer_id, epoch)?;
        let v = &m.value;
        let (prepare, complete) = match commit {
            true => (TxnState::PrepareCommit, TxnState::CompleteCommit),
            false => (TxnState::PrepareAbort, TxnState::CompleteAbort),
        };
        match v.state {
            TxnState::Ongoing => {
                let mut next = v.clone();
                next.state = prepare;
                next.last_update_ms = now_ms;
                let (tx, rx) = oneshot::channel();
                self.waiters
                    .entry(transactional_id.to_string())
                    .or_default()
                    .push(tx);
                Ok(write(transactional_id, next, EndTxnOutcome::Completing(rx)))
            }
            s if s == complete => Ok(Written::response(EndTxnOutcome::Done)),
            s if s == prepare => Err(ResponseError::ConcurrentTransactions),
            _ => Err(ResponseError::InvalidTxnState),
        }
    }

    /// The markers of a prepared transaction are written: it is complete. Nothing is
    /// written when the transaction moved on meanwhile (another coordinator finished it).
    pub fn complete(&mut self, c: &Completion, now_ms: i64) -> Written<TxnRecord, ()> {
        let Some(m) = self.txns.get(&c.transactional_id) else {
            return Written::response(());
        };
        let v = &m.value;
        let prepared = match c.result {
            TxnResult::Commit => TxnState::PrepareCommit,
            TxnResult::Abort => TxnState::PrepareAbort,
        };
        if v.state != prepared
            || v.producer_id != c.producer_id
            || v.producer_epoch != c.producer_epoch
        {
            return Written::response(());
        }
        let mut next = v.clone();
        next.state = match c.result {
            TxnResult::Commit => TxnState::CompleteCommit,
            TxnResult::Abort => TxnState::CompleteAbort,
        };
        next.partitions.clear();
        next.last_update_ms = now_ms;
        write(&c.transactional_id, next, ())
    }

    pub fn describe(&self, transactional_id: &str) -> Option<TxnDescription> {
        self.txns.get(transactional_id).map(|m| TxnDescription {
            transactional_id: transactional_id.to_string(),
            value: m.value.clone(),
        })
    }

    pub fn list(&self) -> Vec<TxnDescription> {
        self.txns
            .iter()
            .map(|(id, m)| TxnDescription {
                transactional_id: id.clone(),
                value: m.value.clone(),
            })
            .collect()
    }

    /// Transactions open past their timeout, aborted under a bumped epoch (Kafka's
    /// `abortTimedOutTransactions` with `prepareFenceProducerEpoch`).
    fn timed_out(&self, now_ms: i64) -> Vec<TxnRecord> {
        self.txns
            .iter()
            .filter(|(_, m)| {
                m.value.state == TxnState::Ongoing
                    && m.value.start_ms.saturating_add(i64::from(m.value.timeout_ms)) <= now_ms
            })
            .map(|(id, m)| {
                let mut next = m.value.clone();
                next.producer_epoch = bump(next.producer_epoch);
                next.state = TxnState::PrepareAbort;
                next.last_update_ms = now_ms;
                tracing::info!(transactional_id = %id, producer_id = next.producer_id, "aborting a transaction past its timeout");
                (id.clone(), Some(next))
            })
            .collect()
    }

    /// Ids with no open transaction, idle past `transactional.id.expiration.ms`.
    fn expired(&self, now_ms: i64) -> Vec<TxnRecord> {
        self.txns
            .iter()
            .filter(|(_, m)| {
                matches!(
                    m.value.state,
                    TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
                ) && m
                    .value
                    .last_update_ms
                    .saturating_add(self.config.id_expiration_ms)
                    <= now_ms
            })
            .map(|(id, _)| (id.clone(), None))
            .collect()
    }

    fn completion(&self, id: &str, v: &TxnValue, prepared_at: i64) -> Option<Completion> {
        let result = match v.state {
            TxnState::PrepareCommit => TxnResult::Commit,
            TxnState::PrepareAbort => TxnResult::Abort,
            _ => return None,
        };
        Some(Completion {
            partition: self.partition,
            transactional_id: id.to_string(),
            producer_id: v.producer_id,
            producer_epoch: v.producer_epoch,
            result,
            partitions: v.partitions.clone(),
            prepared_at,
        })
    }

    fn start_completion(&self, id: &str, v: &TxnValue, prepared_at: i64) {
        if let Some(c) = self.completion(id, v, prepared_at) {
            // The receiver lives as long as the coordinator; without it nothing is served.
            let _ = self.completions.send(c);
        }
    }
}

fn bump(epoch: i16) -> i16 {
    if epoch >= EPOCH_EXHAUSTED {
        epoch
    } else {
        epoch + 1
    }
}

fn write<R>(transactional_id: &str, value: TxnValue, response: R) -> Written<TxnRecord, R> {
    Written::new(vec![(transactional_id.to_string(), Some(value))], response)
}

impl Shard for TxnShard {
    type Record = TxnRecord;

    fn encode(record: &TxnRecord) -> (Bytes, Option<Bytes>) {
        encode_record(record)
    }

    fn decode(key: Option<&Bytes>, value: Option<&Bytes>) -> Result<Option<TxnRecord>, String> {
        decode_record(key, value)
            .map(Some)
            .map_err(|e| e.to_string())
    }

    fn replay(&mut self, offset: i64, (id, value): TxnRecord) -> Result<(), String> {
        let Some(value) = value else {
            self.txns.remove(&id);
            self.waiters.remove(&id);
            return Ok(());
        };
        let last_producer_epoch = match self.txns.get(&id) {
            Some(old) if old.value.producer_id == value.producer_id => {
                if value.producer_epoch > old.value.producer_epoch {
                    old.value.producer_epoch
                } else {
                    old.last_producer_epoch
                }
            }
            _ => -1,
        };
        if self.loaded {
            self.start_completion(&id, &value, offset);
        }
        if matches!(
            value.state,
            TxnState::CompleteCommit | TxnState::CompleteAbort
        ) {
            for waiter in self.waiters.remove(&id).unwrap_or_default() {
                let _ = waiter.send(());
            }
        }
        self.txns.insert(
            id,
            TxnMetadata {
                value,
                last_producer_epoch,
                offset,
            },
        );
        Ok(())
    }

    fn on_loaded(&mut self, now: Instant) {
        self.loaded = true;
        // Transactions prepared before a crash or a leadership change are finished here.
        for (id, m) in &self.txns {
            self.start_completion(id, &m.value, m.offset);
        }
        self.next_timeout_check = Some(now + interval(self.config.abort_timed_out_interval_ms));
        self.next_expiration_check = Some(now + interval(self.config.remove_expired_interval_ms));
    }

    fn on_unloaded(&mut self) {
        // Dropping the senders answers every EndTxn still waiting.
        self.waiters.clear();
    }

    fn next_deadline(&self) -> Option<Instant> {
        [self.next_timeout_check, self.next_expiration_check]
            .into_iter()
            .flatten()
            .min()
    }

    fn on_deadline(&mut self, now: Instant) -> Written<TxnRecord, ()> {
        let mut records = Vec::new();
        if self.next_timeout_check.is_some_and(|at| at <= now) {
            records.extend(self.timed_out(now_ms()));
            self.next_timeout_check = Some(now + interval(self.config.abort_timed_out_interval_ms));
        }
        if self.next_expiration_check.is_some_and(|at| at <= now) {
            records.extend(self.expired(now_ms()));
            self.next_expiration_check =
                Some(now + interval(self.config.remove_expired_interval_ms));
        }
        Written::new(records, ())
    }
}

fn interval(ms: i64) -> Duration {
    Duration::from_millis(ms.max(1) as u64)
}

#[cfg(test)]
#[path = "shard_tests.rs"]
mod tests;
