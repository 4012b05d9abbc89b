//! `ReplicaManager::append_records`: every append to a partition this broker leads,
//! whatever its origin (Kafka's `ReplicaManager.appendRecords`), and the follower's
//! append of what it fetched. Both mark the topic's counters here, so every byte that
//! reaches a log is counted in this one file.
//!
//! For a client's produce it applies the acks rules (only -1, 0 and 1; acks=all checks
//! `min.insync.replicas` and waits for the high watermark), refuses writes to the
//! internal topics, and checks a transaction's first batch in a partition with the
//! transaction coordinator (KIP-890). Coordinators and markers write with acks=all's ISR
//! check; they wait for the high watermark themselves (the coordinator runtime commits
//! an operation once it is replicated).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use kafka_protocol::error::ResponseError;

use super::partition::LeaderAppend;
use super::{AppendError, DelayedProduce, Partition, ReplicaManager};
use crate::coordinator::is_internal_topic;
use crate::error::ApiError;
use crate::log::control::{self, EndTxnMarker};
use crate::log::{check_produce_records, now_ms, AppendInfo, RecordBatchHeader, TopicPartition};

/// Who appends.
#[derive(Clone, Copy, Debug)]
pub enum AppendOrigin<'a> {
    /// A producer's Produce request.
    Client {
        required_acks: i16,
        /// The request's version (which record formats it may carry).
        api_version: i16,
        transactional_id: Option<&'a str>,
        /// How long acks=all waits for replication.
        timeout: Duration,
    },
    /// A group or transaction coordinator writing its internal topic.
    Coordinator,
    /// A transaction marker (WriteTxnMarkers, or this broker's transaction coordinator).
    Marker,
}

/// What is appended to one partition.
pub enum AppendData {
    Records(Bytes),
    Marker {
        producer_id: i64,
        producer_epoch: i16,
        marker: EndTxnMarker,
    },
}

/// One partition's part of an append, and its outcome once appended (written in place,
/// so a request's appends need one vector, not two).
pub struct AppendEntry<'a> {
    /// Borrowed from the request: finding the partition copies no name.
    pub topic: &'a str,
    pub partition: i32,
    data: Option<AppendData>,
    outcome: Option<AppendOutcome>,
}

impl<'a> AppendEntry<'a> {
    pub fn new(topic: &'a str, partition: i32, data: AppendData) -> Self {
        AppendEntry {
            topic,
            partition,
            data: Some(data),
            outcome: None,
        }
    }

    /// The outcome `append_records` left (taken).
    pub fn take_outcome(&mut self) -> AppendOutcome {
        self.outcome
            .take()
            .unwrap_or_else(|| AppendOutcome::Refused {
                error: Box::new(AppendError::Refused(ApiError::new(
                    ResponseError::UnknownServerError,
                    "not appended",
                ))),
                log_start_offset: -1,
            })
    }
}

/// One partition's answer.
#[derive(Debug)]
pub enum AppendOutcome {
    Appended(AppendInfo),
    /// Appended, but acks=all was not satisfied (REQUEST_TIMED_OUT, or
    /// NOT_LEADER_OR_FOLLOWER once leadership moved).
    NotReplicated {
        info: AppendInfo,
        error: ResponseError,
    },
    /// Not appended; `log_start_offset` is -1 when no partition was found.
    Refused {
        /// Boxed: outcomes are moved a few times per partition, and most are successes.
        error: Box<AppendError>,
        log_start_offset: i64,
    },
    /// A client's write to an internal topic: Kafka answers INVALID_TOPIC_EXCEPTION with
    /// no message.
    InternalTopic,
}

impl AppendOutcome {
    /// The error code answered for it (0: appended and acknowledged).
    pub fn error_code(&self) -> i16 {
        match self {
            AppendOutcome::Appended(_) => 0,
            AppendOutcome::NotReplicated { error, .. } => error.code(),
            AppendOutcome::Refused { error, .. } => error.error_code(),
            AppendOutcome::InternalTopic => ResponseError::InvalidTopicException.code(),
        }
    }
}

/// The transaction coordinator's answer to KIP-890's question: is this partition in the
/// producer's ongoing transaction?
#[async_trait]
pub trait TransactionVerifier: Send + Sync {
    async fn verify(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        tp: &TopicPartition,
    ) -> Result<(), ResponseError>;
}

impl ReplicaManager {
    /// Appends each entry to its partition's leader here, in order, leaving each its
    /// outcome. A client's acks=all append returns once replicated or timed out.
    pub async fn append_records(&self, origin: AppendOrigin<'_>, entries: &mut [AppendEntry<'_>]) {
        if let AppendOrigin::Client { required_acks, .. } = origin {
            if !matches!(required_acks, -1..=1) {
                for entry in entries.iter_mut() {
                    entry.outcome = Some(AppendOutcome::Refused {
                        error: Box::new(AppendError::Refused(ApiError::new(
                            ResponseError::InvalidRequiredAcks,
                            "acks must be -1, 0 or 1",
                        ))),
                        log_start_offset: -1,
                    });
                }
                return;
            }
        }
        let now = now_ms();
        // acks=all: the appends wait for their high watermarks, answered together.
        let mut acks = DelayedProduce::new();
        let mut watched = Vec::new();
        for (i, entry) in entries.iter_mut().enumerate() {
            let Some(data) = entry.data.take() else {
                continue;
            };
            let (outcome, appended) = self
                .append_entry(origin, entry.topic, entry.partition, data, now)
                .await;
            if let (
                AppendOrigin::Client {
                    required_acks: -1, ..
                },
                Some((p, last)),
            ) = (origin, appended)
            {
                watched.push((i, p.clone()));
                acks.watch(p, last);
            }
            entry.outcome = Some(outcome);
        }
        if let (false, AppendOrigin::Client { timeout, .. }) = (acks.is_empty(), origin) {
            for (refused, (i, p)) in acks.complete(timeout).await.into_iter().zip(watched) {
                let Some(error) = refused else { continue };
                let outcome = &mut entries[i].outcome;
                if let Some(AppendOutcome::Appended(info)) = outcome {
                    tracing::debug!(partition = %p.tp, error = ?error, "acks=all not satisfied");
                    *outcome = Some(AppendOutcome::NotReplicated {
                        info: info.clone(),
                        error,
                    });
                }
            }
        }
    }

    /// `append_records` for one partition.
    pub async fn append_one(
        &self,
        origin: AppendOrigin<'_>,
        entry: AppendEntry<'_>,
    ) -> AppendOutcome {
        let mut entries = [entry];
        self.append_records(origin, &mut entries).await;
        let [mut entry] = entries;
        entry.take_outcome()
    }

    /// One entry: its partition found and checked, appended, counted. Also returns, for
    /// a fresh append, the partition and the append's last offset (acks=all waits for it).
    async fn append_entry(
        &self,
        origin: AppendOrigin<'_>,
        topic: &str,
        partition: i32,
        data: AppendData,
        now: i64,
    ) -> (AppendOutcome, Option<(Arc<Partition>, i64)>) {
        let client = matches!(origin, AppendOrigin::Client { .. });
        let bytes = match &data {
            AppendData::Records(records) => records.len() as u64,
            AppendData::Marker { .. } => marker_bytes(),
        };
        // Only the coordinators write their internal topics: a client's batch there
        // could make their partitions unloadable.
        if client && is_internal_topic(topic) && self.knows_topic(topic) {
            tracing::debug!(topic, partition, "Cannot append to internal topic {topic}");
            self.metrics.topics.all_topics().produce_request();
            return (AppendOutcome::InternalTopic, None);
        }
        let p = match self.leader_of(topic, partition, -1) {
            Ok(p) => p,
            Err(e) => {
                self.metrics.topics.all_topics().produce_request();
                tracing::debug!(partition = %format_args!("{topic}-{partition}"), error = %e, "append refused");
                let refused = AppendOutcome::Refused {
                    error: Box::new(AppendError::Refused(e)),
                    log_start_offset: -1,
                };
                return (refused, None);
            }
        };
        p.counters.produce_request();
        let appended = match (origin, data) {
            (
                AppendOrigin::Client {
                    required_acks,
                    api_version,
                    transactional_id,
                    ..
                },
                AppendData::Records(records),
            ) => {
                let checked = match check_produce_records(api_version, &records) {
                    Ok(()) => {
                        self.verify_transaction(&p, &records, transactional_id)
                            .await
                    }
                    Err(e) => Err(e.into()),
                };
                match checked {
                    Ok(()) => {
                        let data = LeaderAppend::Client {
                            records,
                            required_acks,
                        };
                        p.append_as_leader(data, now).await
                    }
                    Err(e) => Err(AppendError::Refused(e)),
                }
            }
            (_, AppendData::Records(records)) => {
                p.append_as_leader(LeaderAppend::Coordinator(records), now)
                    .await
            }
            (
                _,
                AppendData::Marker {
                    producer_id,
                    producer_epoch,
                    marker,
                },
            ) => {
                let data = LeaderAppend::Marker {
                    producer_id,
                    producer_epoch,
                    marker,
                };
                p.append_as_leader(data, now).await
            }
        };
        match appended {
            Ok(info) => {
                if !info.duplicate {
                    count_leader_append(&p, &info, bytes);
                }
                let last = info.last_offset;
                (AppendOutcome::Appended(info), Some((p, last)))
            }
            Err(e) => {
                count_refused_append(&p, &e, bytes);
                if e.error().error == ResponseError::KafkaStorageError {
                    tracing::error!(partition = %p.tp, error = %e, "append failed");
                } else {
                    tracing::debug!(partition = %p.tp, error = %e, "append refused");
                }
                let refused = AppendOutcome::Refused {
                    log_start_offset: p.log_start_offset(),
                    error: Box::new(e),
                };
                (refused, None)
            }
        }
    }

    /// KIP-890's defence against hanging transactions: the first transactional batch of
    /// a transaction in a partition is accepted only if the coordinator has the
    /// partition in the producer's ongoing transaction (Kafka asks with
    /// AddPartitionsToTxn verify-only). Later batches of the same transaction find it
    /// open in the partition's producer state and are not asked about again. A late
    /// batch of a fenced or finished transaction is refused rather than opening a
    /// transaction no coordinator will ever end.
    async fn verify_transaction(
        &self,
        partition: &Partition,
        records: &Bytes,
        transactional_id: Option<&str>,
    ) -> Result<(), ApiError> {
        let Ok(header) = RecordBatchHeader::parse(records) else {
            return Ok(()); // the append refuses it with the log's own error
        };
        if !header.is_transactional() {
            return Ok(());
        }
        let Some(id) = transactional_id else {
            return Err(ApiError::new(
                ResponseError::TransactionalIdAuthorizationFailed,
                "transactional records need a transactional id",
            ));
        };
        let (producer_id, epoch) = (header.producer_id(), header.producer_epoch());
        if partition.has_ongoing_txn(producer_id, epoch) {
            return Ok(());
        }
        let Some(verifier) = self.transaction_verifier() else {
            return Err(ApiError::new(
                ResponseError::NotEnoughReplicas,
                "no transaction coordinator to verify with yet",
            ));
        };
        let verified = verifier.verify(id, producer_id, epoch, &partition.tp).await;
        verified.map_err(|e| {
            // As Kafka maps verification errors for the producer: fencing is an old
            // epoch, a coordinator that cannot answer now is worth a retry.
            let e = match e {
                ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
                ResponseError::NotCoordinator
                | ResponseError::CoordinatorNotAvailable
                | ResponseError::CoordinatorLoadInProgress
                | ResponseError::ConcurrentTransactions => ResponseError::NotEnoughReplicas,
                e => e,
            };
            ApiError::new(
                e,
                format!(
                    "the transaction of producer {producer_id} does not include {}",
                    partition.tp
                ),
            )
        })
    }
}

/// As follower at `leader_epoch`: appends what the leader returned (the fetcher's one
/// way into the log), counted as replication bytes in.
pub async fn append_as_follower(
    p: &Partition,
    leader_epoch: i32,
    records: Bytes,
) -> Result<AppendInfo, AppendError> {
    let bytes = records.len() as u64;
    let info = p.append_as_follower(leader_epoch, records).await?;
    p.counters.replication_bytes_in(bytes);
    Ok(info)
}

/// A leader's fresh append: its bytes and records into the topic's counters.
fn count_leader_append(p: &Partition, info: &AppendInfo, bytes: u64) {
    let records = u64::try_from(info.last_offset - info.first_offset + 1).unwrap_or(0);
    p.counters.appended(records, bytes);
}

/// A refused append, as Kafka's `appendToLocalLog` counts it: a batch too large is
/// bytes rejected; a refusal the producer is expected to handle (leadership, size,
/// corruption, an offline log) is not a failed produce request, anything else is.
fn count_refused_append(p: &Partition, e: &AppendError, bytes: u64) {
    use ResponseError::*;
    let error = e.error().error;
    if error == MessageTooLarge {
        p.counters.bytes_rejected(bytes);
    }
    let expected = [
        UnknownTopicOrPartition,
        NotLeaderOrFollower,
        MessageTooLarge,
        RecordListTooLarge,
        CorruptMessage,
        KafkaStorageError,
    ];
    if !expected.contains(&error) {
        p.counters.failed_produce_request();
    }
}

/// The size of a marker's batch, which the log builds (the same for every marker).
fn marker_bytes() -> u64 {
    static BYTES: OnceLock<u64> = OnceLock::new();
    *BYTES.get_or_init(|| {
        let marker = EndTxnMarker {
            result: control::TxnResult::Commit,
            coordinator_epoch: 0,
        };
        control::marker_batch(0, 0, marker, 0).len() as u64
    })
}
