//! Shares: what the ShareFetch and ShareAcknowledge handlers call (Kafka's
//! `SharePartitionManager` with its `DelayedShareFetch`). It owns the share-partitions led
//! here (`manager.rs`), the members' share sessions (`session.rs`), and the acquisition
//! lock timer, and reads the log for a share fetch through the replica manager's delayed
//! fetch: a fetch that acquires nothing waits, without polling, until its partitions'
//! high watermark moves, records are released in a share-partition here (an acknowledged
//! RELEASE, a lock that ran out, a member that left), `max_wait` passes or the broker
//! stops.
//!
//! Acquisition ends the wait: a fetch that acquired records answers at once, whatever
//! `min_bytes` says, since records acquired and not handed out would sit locked until
//! their lock ran out.

use std::sync::{Arc, OnceLock, Weak};

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use parking_lot::Mutex;
use tokio::sync::{watch, Notify};

use super::acquire::{AbortedTransaction, FetchedBatch};
use super::config::{initial_start_offset, LogOffsets};
use super::manager::{Load, SharePartitionManager};
use super::read::{acquired_span, walk_batches, ReadAt};
use super::session::{ShareSession, ShareSessionCache, ShareSessionKey};
use super::{
    AcknowledgementBatch, AcquireRequest, AcquiredRecords, ShareAcquireMode, ShareAutoOffsetReset,
    ShareError, SharePartitionConfig,
};
use crate::coordinator::runtime::now_ms;
use crate::coordinator::share::coordinator::ShareCoordinator;
use crate::coordinator::share::latest_offsets::LatestOffsets;
use crate::coordinator::share::{Persister, SharePartitionKey};
use crate::error::ApiError;
use crate::replica::delayed_fetch::{self, FetchAttempt};
use crate::replica::{FetchIsolation, FetchParams, Partition};

pub struct Shares {
    /// This broker's share coordinator over `__share_group_state` (what the share state
    /// RPCs call).
    pub coordinator: Arc<ShareCoordinator>,
    /// Where the share-partitions here persist: the share coordinator serving each key,
    /// this one or another broker's.
    pub persister: Arc<dyn Persister>,
    pub partitions: SharePartitionManager,
    pub sessions: Mutex<ShareSessionCache>,
    /// Notified whenever records may have become acquirable again without the log
    /// moving: waiting share fetches read again.
    released: Notify,
    /// Notified when a lock deadline earlier than the timer's may have appeared.
    timer_kick: Notify,
    timer: OnceLock<()>,
    /// Partitions' latest offsets for the share-partition lag (set by the broker; unset,
    /// the lag is unknown).
    latest_offsets: OnceLock<LatestOffsets>,
}

/// One share-partition a ShareFetch reads, and how to load it if it is not loaded.
pub struct FetchTarget {
    pub key: SharePartitionKey,
    pub partition: Arc<Partition>,
    /// The most record bytes to return for it.
    pub max_bytes: usize,
    pub config: SharePartitionConfig,
    pub reset: ShareAutoOffsetReset,
}

/// What a ShareFetch got from one share-partition.
#[derive(Clone, Debug, Default)]
pub struct FetchedShare {
    /// The log batches holding the acquired records (others' records among them are
    /// not the member's: the client keeps only the acquired ranges).
    pub records: Bytes,
    pub acquired: Vec<AcquiredRecords>,
    pub error: Option<ApiError>,
}

/// Where one target of a fetch stands with its loading.
#[derive(Clone, Debug)]
enum LoadState {
    Loaded,
    /// Loading after the fetch's first read: nothing to read from it yet.
    Loading,
    /// Its load was refused: the fetch answers this error for it.
    Failed(ApiError),
}

/// How a ShareFetch reads: the member, its limits, the group's isolation level.
pub struct ShareRead<'a> {
    pub member_id: &'a str,
    pub params: FetchParams,
    pub max_records: u32,
    pub batch_size: u32,
    /// ShareFetch v2's `ShareAcquireMode` (batch-optimized below v2).
    pub mode: ShareAcquireMode,
}

impl Shares {
    pub fn new(
        coordinator: Arc<ShareCoordinator>,
        persister: Arc<dyn Persister>,
        max_sessions: usize,
    ) -> Arc<Shares> {
        Arc::new(Shares {
            partitions: SharePartitionManager::new(persister.clone()),
            coordinator,
            persister,
            sessions: Mutex::new(ShareSessionCache::new(max_sessions)),
            released: Notify::new(),
            timer_kick: Notify::new(),
            timer: OnceLock::new(),
            latest_offsets: OnceLock::new(),
        })
    }

    /// Where DescribeShareGroupOffsets reads partitions' latest offsets from.
    pub fn set_latest_offsets(&self, latest: LatestOffsets) {
        let _ = self.latest_offsets.set(latest);
    }

    pub fn latest_offsets(&self) -> Option<&LatestOffsets> {
        self.latest_offsets.get()
    }

    /// Loads `key`'s share-partition unless it is loaded: its persisted state, starting
    /// where `share.auto.offset.reset` says when that has no start offset. A
    /// share-partition the group coordinator has not initialized yet is not loaded
    /// (UNKNOWN_SERVER_ERROR with the share coordinator's message, as Kafka answers it).
    pub async fn load(
        &self,
        key: &SharePartitionKey,
        partition: &Arc<Partition>,
        config: SharePartitionConfig,
        reset: ShareAutoOffsetReset,
    ) -> Result<(), ApiError> {
        // A share-partition loaded under an earlier leadership of this broker is stale:
        // another leader may have moved it meanwhile (and fenced this one's writes).
        let epoch = partition.leader_epoch();
        if self
            .partitions
            .inspect(key, |sp| sp.leader_epoch() != epoch)
            .unwrap_or(false)
        {
            self.partitions.remove(key);
        }
        let log = PartitionOffsets(partition.clone());
        let load = Load {
            leader_epoch: epoch,
            config,
            initial_start_offset: Box::new(move || {
                initial_start_offset(reset, &log, now_ms())
                    .map_err(|e| ShareError::OffsetNotAvailable(e.0))
            }),
        };
        self.partitions.load(key, load).await
    }

    /// Reads and acquires for a member until something is acquired, a partition fails,
    /// `params.max_wait` passes or `stopping` turns true. One answer per target, in order.
    ///
    /// Share-partitions not loaded here yet are loaded as Kafka's leader loads them: the
    /// first one before the fetch reads, the others after that first read, in the
    /// background, each waking the fetch as it ends. Kafka's share-partitions load on
    /// their own and its `DelayedShareFetch` answers as soon as one loaded share-partition
    /// has records; its persister sends the first ReadShareGroupState alone and the
    /// others together once that one is answered. So a member's first fetch of several
    /// new share-partitions gets the first one's records, and the others' from its next
    /// fetch (librdkafka's test 0179 expects that), and a share-partition whose state is
    /// missing answers its error without holding up the others.
    pub async fn fetch(
        self: &Arc<Self>,
        read: &ShareRead<'_>,
        targets: &[FetchTarget],
        stopping: watch::Receiver<bool>,
    ) -> Vec<FetchedShare> {
        self.start_timer();
        let mut states: Vec<LoadState> = targets
            .iter()
            .map(|t| match self.is_loaded(t) {
                true => LoadState::Loaded,
                false => LoadState::Loading,
            })
            .collect();
        let mut later: Vec<usize> = (0..targets.len())
            .filter(|i| matches!(states[*i], LoadState::Loading))
            .collect();
        if !later.is_empty() {
            let first = later.remove(0);
            let t = &targets[first];
            states[first] = match self.load(&t.key, &t.partition, t.config, t.reset).await {
                Ok(()) => LoadState::Loaded,
                Err(e) => LoadState::Failed(e),
            };
        }
        let states = Arc::new(Mutex::new(states));
        let mut background = Some(later);
        let partitions: Vec<Arc<Partition>> = targets.iter().map(|t| t.partition.clone()).collect();
        let answer = delayed_fetch::complete_or(
            &read.params,
            &partitions,
            Some(&self.released),
            stopping,
            || {
                let attempt = self.read_once(read, targets, &states.lock());
                // After the first read, so that it answers only what was loaded before.
                if let Some(later) = background.take() {
                    self.load_in_background(targets, later, &states);
                }
                attempt
            },
        )
        .await;
        if answer.iter().any(|f| !f.acquired.is_empty()) {
            self.timer_kick.notify_one();
        }
        // Who got what when: with the request log's times, where a share group's time goes.
        tracing::trace!(
            member = read.member_id,
            acquired = ?answer.iter().map(|f| &f.acquired).collect::<Vec<_>>(),
            "share fetch answered"
        );
        answer
    }

    /// Whether `t`'s share-partition is loaded here under the partition's current
    /// leadership.
    fn is_loaded(&self, t: &FetchTarget) -> bool {
        let epoch = t.partition.leader_epoch();
        self.partitions
            .inspect(&t.key, |sp| sp.leader_epoch() == epoch)
            .unwrap_or(false)
    }

    /// Loads the targets `indexes` one after another on a task of their own, recording
    /// each outcome in `states` and waking the waiting share fetches as each ends (a load
    /// ending after its fetch answered is simply there for the next fetch, or, refused,
    /// left to be tried again by it).
    fn load_in_background(
        self: &Arc<Self>,
        targets: &[FetchTarget],
        indexes: Vec<usize>,
        states: &Arc<Mutex<Vec<LoadState>>>,
    ) {
        if indexes.is_empty() {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let loads: Vec<_> = indexes
            .into_iter()
            .map(|i| {
                let t = &targets[i];
                (i, t.key.clone(), t.partition.clone(), t.config, t.reset)
            })
            .collect();
        let (shares, states) = (self.clone(), states.clone());
        rt.spawn(async move {
            for (i, key, partition, config, reset) in loads {
                let state = match shares.load(&key, &partition, config, reset).await {
                    Ok(()) => LoadState::Loaded,
                    Err(e) => LoadState::Failed(e),
                };
                states.lock()[i] = state;
                shares.released.notify_waiters();
            }
        });
    }

    /// One pass: each loaded target read from where its share-partition fetches next,
    /// and acquired from; a target whose load was refused answers its error. Acquiring
    /// anything completes the fetch.
    fn read_once(
        &self,
        read: &ShareRead<'_>,
        targets: &[FetchTarget],
        states: &[LoadState],
    ) -> FetchAttempt<Vec<FetchedShare>> {
        let mut left = read.params.max_bytes;
        let mut records_left = read.max_records;
        let mut out = Vec::with_capacity(targets.len());
        let (mut acquired_any, mut errored) = (false, false);
        for (t, state) in targets.iter().zip(states) {
            let got = match state {
                LoadState::Failed(e) => FetchedShare {
                    error: Some(e.clone()),
                    ..Default::default()
                },
                LoadState::Loading => FetchedShare::default(),
                LoadState::Loaded if records_left == 0 || left == 0 => FetchedShare::default(),
                LoadState::Loaded => self.read_one(read, t, left.min(t.max_bytes), records_left),
            };
            errored |= got.error.is_some();
            if !got.acquired.is_empty() {
                acquired_any = true;
                left = left.saturating_sub(got.records.len());
                let count: i64 = got
                    .acquired
                    .iter()
                    .map(|a| a.last_offset - a.first_offset + 1)
                    .sum();
                records_left =
                    records_left.saturating_sub(count.clamp(0, i64::from(u32::MAX)) as u32);
            }
            out.push(got);
        }
        FetchAttempt {
            response: out,
            bytes: if acquired_any { usize::MAX } else { 0 },
            errored,
        }
    }

    fn read_one(
        &self,
        read: &ShareRead<'_>,
        t: &FetchTarget,
        budget: usize,
        max_records: u32,
    ) -> FetchedShare {
        let failed = |e: ResponseError| FetchedShare {
            error: Some(e.into()),
            ..Default::default()
        };
        let (offset, last_wanted) = match self.partitions.next_fetch_span(&t.key, max_records) {
            Ok(Some(span)) => span,
            Ok(None) => return FetchedShare::default(),
            Err(e) => return failed(e),
        };
        let p = &t.partition;
        if let Err(e) = p.check_fetch(-1, -1) {
            return failed(e);
        }
        let data = match p.fetch_records(&read.params, offset, budget, true, -1) {
            Ok(d) => d,
            Err(e) => {
                return FetchedShare {
                    error: Some(ApiError::from(e)),
                    ..Default::default()
                }
            }
        };
        let Some(slice) = data.records else {
            return FetchedShare::default();
        };
        let read_failed = |e: crate::log::LogError| {
            tracing::error!(partition = %p.tp, error = %e, "share fetch read failed");
            FetchedShare {
                error: Some(ApiError::from(e)),
                ..Default::default()
            }
        };
        // Headers only: the record bytes are read for what is acquired.
        let walked = match walk_batches(&slice, last_wanted) {
            Ok(w) => w,
            Err(e) => return read_failed(e),
        };
        let batches: Vec<FetchedBatch> = walked.iter().map(|b| b.batch).collect();
        let aborted: Option<Vec<AbortedTransaction>> =
            (read.params.isolation == FetchIsolation::TxnCommitted).then(|| {
                p.aborted_txns(offset, p.last_stable_offset())
                    .into_iter()
                    .map(|a| AbortedTransaction {
                        producer_id: a.producer_id,
                        first_offset: a.first_offset,
                    })
                    .collect()
            });
        let req = AcquireRequest {
            member_id: read.member_id,
            batch_size: read.batch_size.max(1),
            max_fetch_records: max_records,
            mode: read.mode,
            fetch_offset: offset,
            batches: &batches,
            aborted_transactions: aborted.as_deref(),
        };
        let got = match self.partitions.acquire(&t.key, &req, now_ms()) {
            Ok(got) => got,
            Err(e) => return failed(e),
        };
        let Some(span) = acquired_span(&walked, &got.records) else {
            return FetchedShare::default();
        };
        match slice.read_at(span.start, span.len()) {
            Ok(records) => FetchedShare {
                records,
                acquired: got.records,
                error: None,
            },
            // The records stay acquired until their lock runs out, as when a response
            // is lost on the way.
            Err(e) => read_failed(e),
        }
    }

    /// A member's acknowledgements of one share-partition; waiting fetches read again,
    /// since released records are acquirable.
    pub async fn acknowledge(
        &self,
        key: &SharePartitionKey,
        member_id: &str,
        batches: &[AcknowledgementBatch],
    ) -> Result<(), ResponseError> {
        let result = self
            .partitions
            .acknowledge(key, member_id, batches, now_ms())
            .await;
        tracing::trace!(
            member = member_id,
            ?batches,
            window = ?self.partitions.inspect(key, |sp| (sp.start_offset(), sp.end_offset())),
            "share acknowledgement applied"
        );
        self.released.notify_waiters();
        result
    }

    /// Releases what `member_id` holds in `keys` (its share session ended).
    pub async fn release_member(&self, keys: &[SharePartitionKey], member_id: &str) {
        for key in keys {
            if let Err(e) = self
                .partitions
                .release_member(key, member_id, now_ms())
                .await
            {
                tracing::debug!(group = %key.group_id, partition = key.partition, error = ?e,
                    "releasing a departed member's records failed");
            }
        }
        self.released.notify_waiters();
    }

    /// Closes a member's share session (its final request was answered) and releases
    /// what it holds in the session's share-partitions (Kafka's `releaseSession`).
    pub async fn close_session(&self, key: &ShareSessionKey) {
        let Some(session) = self.sessions.lock().remove(key) else {
            return;
        };
        self.release_session(key, &session).await;
    }

    /// The connection `connection_id` closed: the share session it opened, if still
    /// open, is closed and its member's records released at once, as Kafka's
    /// `ShareSessionCache` disconnect listener does. A member that died holds nothing
    /// here past its sockets' closing, wherever its group coordinator is; only one cut
    /// off without its connections closing waits for its acquisition locks. Costs one
    /// map lookup for a connection that opened no share session.
    pub fn connection_closed(self: &Arc<Self>, connection_id: u64) {
        let Some((key, session)) = self.sessions.lock().remove_connection(connection_id) else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        tracing::debug!(group = %key.group_id, member = %key.member_id, connection_id,
            "share session's connection closed: releasing its records");
        let shares = self.clone();
        rt.spawn(async move { shares.release_session(&key, &session).await });
    }

    async fn release_session(&self, key: &ShareSessionKey, session: &ShareSession) {
        let keys: Vec<SharePartitionKey> = session
            .partitions
            .iter()
            .map(|(topic_id, partition)| SharePartitionKey {
                group_id: key.group_id.clone(),
                topic_id: *topic_id,
                partition: *partition,
            })
            .collect();
        self.release_member(&keys, &key.member_id).await;
    }

    /// `member_id` is no longer a member of `group_id` (its session with the group
    /// coordinator timed out, or it left). While it still has its share session open
    /// here, nothing happens: a closing consumer sends its leave heartbeat and its last
    /// acknowledgements (ShareAcknowledge or ShareFetch at epoch -1) at once, on
    /// different connections, and that final request must still find its session and
    /// the records it acknowledges; it, or the session's connection closing, releases
    /// what the member holds (Kafka's share session is closed only those ways too: its
    /// `ShareGroupListener.onMemberLeave` fires on a connection's close, never on the
    /// group's). Without a session here, what the member holds acquired in the group's
    /// share-partitions led here is released at once, with the delivery counts kept.
    /// Every share-partition of the group is looked at, not only a session's: a member
    /// may hold records in one its session has forgotten.
    pub async fn member_left(&self, group_id: &str, member_id: &str) {
        let key = ShareSessionKey {
            group_id: group_id.to_string(),
            member_id: member_id.to_string(),
        };
        if self.sessions.lock().get(&key).is_some() {
            tracing::debug!(group = %group_id, member = %member_id,
                "share group member left with its share session open: its final request or connection releases its records");
            return;
        }
        let keys: Vec<SharePartitionKey> = self
            .partitions
            .keys()
            .into_iter()
            .filter(|k| k.group_id == group_id)
            .collect();
        self.release_member(&keys, member_id).await;
    }

    /// The acquisition lock timer: one task, sleeping until the earliest lock deadline
    /// of any share-partition here (or until a fetch may have set an earlier one), that
    /// releases the records whose locks ran out and wakes the waiting fetches. It holds
    /// the service weakly and ends with it.
    fn start_timer(self: &Arc<Self>) {
        if self.timer.set(()).is_err() {
            return;
        }
        let weak: Weak<Shares> = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let Some(shares) = weak.upgrade() else { return };
                let next = shares.partitions.expire_locks(now_ms()).await;
                shares.released.notify_waiters();
                // Kicks between the expiry pass and the wait are kept by Notify's permit.
                let kick = shares.clone();
                drop(shares);
                let kicked = async move { kick.timer_kick.notified().await };
                let sleep = async {
                    match next {
                        Some(deadline) => {
                            let wait = (deadline - now_ms()).max(0) as u64;
                            tokio::time::sleep(std::time::Duration::from_millis(wait)).await
                        }
                        // Woken by the next acquisition; checks every minute that the
                        // service still exists.
                        None => tokio::time::sleep(std::time::Duration::from_secs(60)).await,
                    }
                };
                tokio::select! {
                    _ = sleep => {}
                    _ = kicked => {}
                }
            }
        });
    }
}

/// A partition's offsets, as a new share-partition's start needs them.
struct PartitionOffsets(Arc<Partition>);

impl LogOffsets for PartitionOffsets {
    fn earliest(&self) -> i64 {
        self.0.log_start_offset()
    }

    fn latest(&self) -> i64 {
        self.0.high_watermark()
    }

    fn for_timestamp(&self, timestamp_ms: i64) -> Option<i64> {
        self.0
            .fetch_offset_for_timestamp(timestamp_ms, FetchIsolation::HighWatermark)
            .ok()
            .flatten()
            .map(|t| t.offset)
    }
}
