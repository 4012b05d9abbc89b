//! The records of `__transaction_state`, with Kafka's exact schemas
//! (`TransactionLogKey` and `TransactionLogValue`, `TransactionLog.scala`).
//!
//! Key: `i16 version (0)`, `TransactionalId` string. Value: `i16 version` and
//! - v0: `ProducerId i64, ProducerEpoch i16, TransactionTimeoutMs i32,
//!   TransactionStatus i8, TransactionPartitions []{Topic string, PartitionIds []i32}`
//!   (null when Empty), `TransactionLastUpdateTimestampMs i64,
//!   TransactionStartTimestampMs i64`;
//! - v1: the same, flexible (compact strings and arrays, a tagged-field section after
//!   each struct), with tags 0 `PreviousProducerId i64`, 1 `NextProducerId i64`,
//!   2 `ClientTransactionVersion i16`.
//!
//! skua writes v0, as Kafka does at `transaction.version` 0 (the transaction protocol
//! skua serves; it does not offer KIP-890's version 2), and reads both. A null value
//! is a tombstone: the transactional id expired.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{Buf, BufMut, Bytes, BytesMut};

pub use crate::coordinator::wire::SchemaError;
use crate::coordinator::wire::{put_str, Reader};
use crate::log::TopicPartition;

/// A transaction's state as stored (Kafka's `TransactionState` ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxnState {
    Empty = 0,
    Ongoing = 1,
    PrepareCommit = 2,
    PrepareAbort = 3,
    CompleteCommit = 4,
    CompleteAbort = 5,
    Dead = 6,
    PrepareEpochFence = 7,
}

impl TxnState {
    fn from_i8(v: i8) -> Option<Self> {
        Some(match v {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }

    /// Kafka's name, as DescribeTransactions and ListTransactions report it.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }
}

/// One transactional id's state, as a `TransactionLogValue` holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnValue {
    pub producer_id: i64,
    /// v1's tag 0: the producer id before the last rotation (-1: none).
    pub previous_producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TopicPartition>,
    pub last_update_ms: i64,
    /// When the transaction began (-1 when none is open).
    pub start_ms: i64,
}

/// A record: the transactional id and its value, or a tombstone (None).
pub type TxnRecord = (String, Option<TxnValue>);

const KEY_VERSION: i16 = 0;
const VALUE_VERSION: i16 = 0;

pub fn encode_key(transactional_id: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(4 + transactional_id.len());
    b.put_i16(KEY_VERSION);
    put_str(&mut b, transactional_id);
    b.freeze()
}

/// `TransactionLogValue` v0.
pub fn encode_value(v: &TxnValue) -> Bytes {
    let mut b = BytesMut::with_capacity(64);
    b.put_i16(VALUE_VERSION);
    b.put_i64(v.producer_id);
    b.put_i16(v.producer_epoch);
    b.put_i32(v.timeout_ms);
    b.put_i8(v.state as i8);
    if v.state == TxnState::Empty {
        b.put_i32(-1);
    } else {
        let by_topic = by_topic(&v.partitions);
        b.put_i32(by_topic.len() as i32);
        for (topic, ids) in by_topic {
            put_str(&mut b, topic);
            b.put_i32(ids.len() as i32);
            for id in ids {
                b.put_i32(id);
            }
        }
    }
    b.put_i64(v.last_update_ms);
    b.put_i64(v.start_ms);
    b.freeze()
}

fn by_topic(partitions: &BTreeSet<TopicPartition>) -> BTreeMap<&str, Vec<i32>> {
    let mut out: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        out.entry(tp.topic.as_str()).or_default().push(tp.partition);
    }
    out
}

pub fn encode_record((id, value): &TxnRecord) -> (Bytes, Option<Bytes>) {
    (encode_key(id), value.as_ref().map(encode_value))
}

/// A stored record. Every key of `__transaction_state` is this coordinator's, so
/// anything undecodable is an error.
pub fn decode_record(key: Option<&Bytes>, value: Option<&Bytes>) -> Result<TxnRecord, SchemaError> {
    let key = key.ok_or(SchemaError::NoKey)?;
    let mut r = Reader::new(key.clone(), false);
    let version = r.i16()?;
    if version != KEY_VERSION {
        return Err(SchemaError::UnknownVersion {
            what: "TransactionLogKey",
            version,
        });
    }
    let id = r.str()?;
    let value = value.map(decode_value).transpose()?;
    Ok((id, value))
}

fn decode_value(value: &Bytes) -> Result<TxnValue, SchemaError> {
    let mut r = Reader::new(value.clone(), false);
    let version = r.i16()?;
    if !(0..=1).contains(&version) {
        return Err(SchemaError::UnknownVersion {
            what: "TransactionLogValue",
            version,
        });
    }
    r.set_flexible(version >= 1);
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let status = r.i8()?;
    let state = TxnState::from_i8(status).ok_or(SchemaError::UnknownStatus(status))?;
    let mut partitions = BTreeSet::new();
    if let Some(topics) = r.nullable_array_len()? {
        for _ in 0..topics {
            let topic = r.str()?;
            let ids = r.nullable_array_len()?.unwrap_or(0);
            for _ in 0..ids {
                partitions.insert(TopicPartition::new(topic.clone(), r.i32()?));
            }
            r.skip_tags()?;
        }
    }
    let last_update_ms = r.i64()?;
    let start_ms = r.i64()?;
    let mut previous_producer_id = -1;
    if r.is_flexible() {
        for (tag, mut data) in r.tagged_fields()? {
            if tag == 0 && data.remaining() >= 8 {
                previous_producer_id = data.get_i64();
            }
        }
    }
    Ok(TxnValue {
        producer_id,
        previous_producer_id,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        last_update_ms,
        start_ms,
    })
}

/// The `__transaction_state` partition of a transactional id: Kafka's
/// `abs(javaStringHashCode(id)) % partitions`, as for groups.
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    crate::coordinator::group::records::partition_for(transactional_id, partitions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(state: TxnState) -> TxnValue {
        TxnValue {
            producer_id: 1000,
            previous_producer_id: -1,
            producer_epoch: 3,
            timeout_ms: 60_000,
            state,
            partitions: [
                TopicPartition::new("b", 1),
                TopicPartition::new("a", 2),
                TopicPartition::new("a", 0),
            ]
            .into_iter()
            .collect(),
            last_update_ms: 1_700_000_000_123,
            start_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn v0_layout_is_kafkas() {
        let key = encode_key("tx");
        assert_eq!(&key[..], &[0, 0, 0, 2, b't', b'x']);
        let v = encode_value(&value(TxnState::Ongoing));
        let mut expected = vec![0u8, 0];
        expected.extend_from_slice(&1000i64.to_be_bytes());
        expected.extend_from_slice(&3i16.to_be_bytes());
        expected.extend_from_slice(&60_000i32.to_be_bytes());
        expected.push(1);
        expected.extend_from_slice(&2i32.to_be_bytes());
        expected.extend_from_slice(&[0, 1, b'a', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2]);
        expected.extend_from_slice(&[0, 1, b'b', 0, 0, 0, 1, 0, 0, 0, 1]);
        expected.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        expected.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        assert_eq!(&v[..], &expected[..]);
        let (id, back) = decode_record(Some(&key), Some(&v)).unwrap();
        assert_eq!((id.as_str(), back), ("tx", Some(value(TxnState::Ongoing))));

        // Empty carries null partitions.
        let mut empty = value(TxnState::Empty);
        empty.partitions.clear();
        let v = encode_value(&empty);
        assert_eq!(&v[17..21], &(-1i32).to_be_bytes());
        assert_eq!(decode_record(Some(&key), Some(&v)).unwrap().1, Some(empty));
        assert_eq!(
            decode_record(Some(&key), None).unwrap(),
            ("tx".into(), None)
        );
    }

    #[test]
    fn v1_flexible_with_tags_decodes() {
        // Kafka 4 at transaction.version 2: compact fields, PreviousProducerId in tag 0.
        let mut b = BytesMut::new();
        b.put_i16(1);
        b.put_i64(2000);
        b.put_i16(0);
        b.put_i32(30_000);
        b.put_i8(TxnState::CompleteCommit as i8);
        b.put_u8(2); // one topic
        b.put_u8(2);
        b.put_slice(b"t");
        b.put_u8(2); // one partition
        b.put_i32(5);
        b.put_u8(0); // the topic's tags
        b.put_i64(10);
        b.put_i64(9);
        b.put_u8(2); // two tags
        b.put_u8(0);
        b.put_u8(8);
        b.put_i64(1999);
        b.put_u8(2);
        b.put_u8(2);
        b.put_i16(2);
        let v = decode_value(&b.freeze()).unwrap();
        assert_eq!(v.producer_id, 2000);
        assert_eq!(v.previous_producer_id, 1999);
        assert_eq!(v.state, TxnState::CompleteCommit);
        assert!(v.partitions.contains(&TopicPartition::new("t", 5)));
        assert_eq!((v.last_update_ms, v.start_ms), (10, 9));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let key = encode_key("tx");
        for bad in [
            &b""[..],
            &[0, 0],
            &[0, 9, 0],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 42],
        ] {
            assert!(decode_record(Some(&key), Some(&Bytes::copy_from_slice(bad))).is_err());
        }
        // An array count larger than the bytes left is refused before any allocation.
        let mut v = encode_value(&value(TxnState::Ongoing)).to_vec();
        v[17..21].copy_from_slice(&i32::MAX.to_be_bytes());
        assert_eq!(
            decode_record(Some(&key), Some(&Bytes::from(v))),
            Err(SchemaError::Truncated)
        );
        assert_eq!(decode_record(None, None), Err(SchemaError::NoKey));
    }
}
