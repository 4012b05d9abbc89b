//! What a cleaning pass knows of transactions as it walks batches in offset order
//! (Kafka's `CleanedTransactionMetadata`).
//!
//! The cleanable section ends at the last stable offset, so every transactional batch in
//! it belongs to a transaction that has ended, though its marker may lie further on. The
//! aborted ones are those the aborted-transaction index names (producer id, first offset,
//! marker offset); every other transactional batch was committed and is compacted like
//! any record.
//!
//! A marker may go once no batch of its transaction is left before it: an abort marker
//! when the pass saw none of the aborted transaction's batches (removed in an earlier
//! round), a commit marker when it saw no transactional batch of that producer since its
//! previous marker. Such a marker is still kept for `delete.retention.ms` (`filter`
//! stamps its batch with a delete horizon), so a consumer that read the transaction's
//! data before it was cleaned still reads its end. An abort marker whose batches are
//! still there keeps its aborted-transaction index entry in the cleaned segment; one
//! without batches needs no entry, as nothing is left to skip.
//!
//! Memory: the aborted transactions of the cleaned section (already held in memory by the
//! segments' indexes) and at most one open transaction per producer.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::log::batch::RecordBatchHeader;
use crate::log::control::{read_marker, TxnResult};
use crate::log::{AbortedTxn, LogError};

/// An aborted transaction the pass has reached (its first offset is behind it) and whose
/// marker it has not reached yet.
struct OngoingAbort {
    txn: AbortedTxn,
    /// A batch of it was seen in this pass: its marker stays.
    batch_seen: bool,
}

/// What the pass learnt from a control batch.
#[derive(Debug, PartialEq, Eq)]
pub struct ControlRead {
    /// No batch of its transaction is left: the marker may go once its delete horizon
    /// has passed.
    pub discardable: bool,
    /// The abort marker stays for batches still there: its index entry goes to the
    /// cleaned segment.
    pub index_entry: Option<AbortedTxn>,
}

#[derive(Default)]
pub struct TxnTracker {
    /// Aborted transactions not reached yet, by first offset.
    pending: VecDeque<AbortedTxn>,
    ongoing_aborted: HashMap<i64, OngoingAbort>,
    /// Producers with a committed transaction whose batches the pass has seen and whose
    /// marker it has not reached yet.
    ongoing_committed: HashSet<i64>,
}

impl TxnTracker {
    /// A tracker for a pass over a section whose aborted transactions are `aborted` (any
    /// order; an entry listed twice counts once).
    pub fn new(aborted: impl IntoIterator<Item = AbortedTxn>) -> Self {
        let mut pending: Vec<AbortedTxn> = aborted.into_iter().collect();
        pending.sort_by_key(|t| (t.first_offset, t.producer_id, t.last_offset));
        pending.dedup();
        TxnTracker {
            pending: pending.into(),
            ..TxnTracker::default()
        }
    }

    /// Kafka's `consumeAbortedTxnsUpTo`: aborts that began at or before `offset` are open
    /// from here on (a producer has one transaction open at a time).
    fn reach(&mut self, offset: i64) {
        while let Some(txn) = self.pending.front().copied() {
            if txn.first_offset > offset {
                break;
            }
            self.pending.pop_front();
            self.ongoing_aborted
                .entry(txn.producer_id)
                .or_insert(OngoingAbort {
                    txn,
                    batch_seen: false,
                });
        }
    }

    /// A data batch (Kafka's `onBatchRead`). Returns true when it belongs to an aborted
    /// transaction: its records may all go.
    pub fn on_batch(&mut self, h: &RecordBatchHeader) -> bool {
        self.reach(h.last_offset());
        if !h.is_transactional() {
            return false;
        }
        match self.ongoing_aborted.get_mut(&h.producer_id()) {
            Some(abort) => {
                abort.batch_seen = true;
                true
            }
            None => {
                self.ongoing_committed.insert(h.producer_id());
                false
            }
        }
    }

    /// A control batch, its bytes whole (Kafka's `onControlBatchRead`). A control record
    /// that is no transaction marker is never discardable; an empty control batch is one
    /// an earlier round cut down, so it is.
    pub fn on_control(
        &mut self,
        h: &RecordBatchHeader,
        batch: &[u8],
    ) -> Result<ControlRead, LogError> {
        self.reach(h.last_offset());
        let keep = ControlRead {
            discardable: false,
            index_entry: None,
        };
        if h.records_count() == 0 {
            return Ok(ControlRead {
                discardable: true,
                ..keep
            });
        }
        let Some(marker) = read_marker(batch)? else {
            return Ok(keep);
        };
        let producer_id = h.producer_id();
        Ok(match marker.result {
            TxnResult::Abort => match self.ongoing_aborted.remove(&producer_id) {
                Some(abort) if abort.batch_seen => ControlRead {
                    discardable: false,
                    index_entry: Some(abort.txn),
                },
                _ => ControlRead {
                    discardable: true,
                    ..keep
                },
            },
            TxnResult::Commit => ControlRead {
                discardable: !self.ongoing_committed.remove(&producer_id),
                ..keep
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::batch::set_base_offset;
    use crate::log::control::{marker_batch, EndTxnMarker};
    use crate::log::test_util::txn_batch_bytes;

    fn data(base: i64, producer_id: i64) -> RecordBatchHeader {
        let mut b = txn_batch_bytes(&[b"x"], 0, (producer_id, 0, 0)).to_vec();
        set_base_offset(&mut b, base);
        RecordBatchHeader::parse(&b).unwrap()
    }

    fn marker(base: i64, producer_id: i64, result: TxnResult) -> Vec<u8> {
        let m = EndTxnMarker {
            result,
            coordinator_epoch: 0,
        };
        let mut b = marker_batch(producer_id, 0, m, 0).to_vec();
        set_base_offset(&mut b, base);
        b
    }

    fn control(t: &mut TxnTracker, b: &[u8]) -> ControlRead {
        t.on_control(&RecordBatchHeader::parse(b).unwrap(), b)
            .unwrap()
    }

    #[test]
    fn markers_stay_while_their_transactions_have_batches() {
        let abort = AbortedTxn {
            producer_id: 2,
            first_offset: 1,
            last_offset: 3,
            last_stable_offset: 0,
        };
        // Producer 1 commits [0, 2], producer 2 aborts [1, 3]; the index lists it twice
        // (once per segment it spans).
        let mut t = TxnTracker::new([abort, abort]);
        assert!(!t.on_batch(&data(0, 1)), "committed");
        assert!(t.on_batch(&data(1, 2)), "aborted");
        let commit = control(&mut t, &marker(2, 1, TxnResult::Commit));
        assert_eq!(
            commit,
            ControlRead {
                discardable: false,
                index_entry: None
            }
        );
        let abort_read = control(&mut t, &marker(3, 2, TxnResult::Abort));
        assert_eq!(
            abort_read,
            ControlRead {
                discardable: false,
                index_entry: Some(abort)
            }
        );
        // A later pass over the same markers after the batches went: both may go.
        let mut t = TxnTracker::new([abort]);
        assert!(control(&mut t, &marker(2, 1, TxnResult::Commit)).discardable);
        assert!(control(&mut t, &marker(3, 2, TxnResult::Abort)).discardable);
        // An empty control batch was cut down by an earlier round.
        let full = marker(4, 1, TxnResult::Commit);
        let empty = crate::log::batch::NewBatch {
            records_count: 0,
            ..crate::log::batch::NewBatch::like(&RecordBatchHeader::parse(&full).unwrap())
        }
        .encode(&[]);
        assert!(control(&mut t, &empty).discardable);
    }
}
