//! The records of `__consumer_offsets`, with Kafka's exact key and value schemas.
//!
//! A key is an i16 key version (the record type) and a non-flexible struct:
//! - key 0/1 `OffsetCommitKey`: group string, topic string, partition i32.
//! - key 2 `GroupMetadataKey`: group string.
//! - keys 3–8 and 16: KIP-848 consumer group records, in `consumer.rs`.
//! - keys 10–15: KIP-932 share group records, in `share.rs`.
//!
//! A value is an i16 value version and the struct; versions 4 and up are flexible
//! (compact strings and arrays, a tagged-field section after every struct). skua writes
//! `OffsetCommitValue` v3 (v1 when the commit carries an explicit expire timestamp) and
//! `GroupMetadataValue` v3, as Kafka 3.x/4.x do, and reads every version. A null value
//! is a tombstone. Other key versions (streams group records) are skipped.

pub mod consumer;
pub mod share;

use bytes::{BufMut, Bytes, BytesMut};

use consumer::{ConsumerKey, ConsumerValue};
use share::{ShareKey, ShareValue};

pub use crate::coordinator::wire::SchemaError;
use crate::coordinator::wire::{put_str, put_uvarint, Reader};

pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The partition of `__consumer_offsets` holding a group:
/// `abs(javaStringHashCode(group_id)) % partitions`, with `abs(i32::MIN) = 0` as Kafka's
/// `Utils.abs` has it.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    let mut h: i32 = 0;
    for unit in group_id.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(unit as i32);
    }
    let abs = if h == i32::MIN { 0 } else { h.abs() };
    abs % partitions.max(1)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
    /// Only v1 carries one: the commit asked for its own retention.
    pub expire_timestamp: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp: i64,
    pub members: Vec<MemberValue>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordKey {
    Offset {
        group: String,
        topic: String,
        partition: i32,
    },
    Group {
        group: String,
    },
    /// A KIP-848 consumer group record.
    Consumer {
        group: String,
        kind: ConsumerKey,
    },
    /// A KIP-932 share group record.
    Share {
        group: String,
        kind: ShareKey,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordValue {
    Offset(OffsetValue),
    Group(GroupValue),
    Consumer(ConsumerValue),
    Share(ShareValue),
}

/// One record of `__consumer_offsets`: a key and its value, or a tombstone (None).
pub type GroupRecord = (RecordKey, Option<RecordValue>);

/// A record as stored: key bytes and value bytes (None: a tombstone).
pub fn encode_record((key, value): &GroupRecord) -> (Bytes, Option<Bytes>) {
    (key.encode(), value.as_ref().map(RecordValue::encode))
}

/// A stored record; `Ok(None)` for record types the group coordinator does not own
/// (streams groups).
pub fn decode_record(
    key: Option<&Bytes>,
    value: Option<&Bytes>,
) -> Result<Option<GroupRecord>, SchemaError> {
    let key = key.ok_or(SchemaError::NoKey)?;
    let Some(key) = decode_key(key)? else {
        return Ok(None);
    };
    let value = value.map(|v| decode_value(&key, v)).transpose()?;
    Ok(Some((key, value)))
}

// ---- encoding (the versions skua writes) ----

fn put_nullable_str(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(buf, s),
        None => buf.put_i16(-1),
    }
}

fn put_bytes(buf: &mut BytesMut, b: &[u8]) {
    buf.put_i32(b.len() as i32);
    buf.put_slice(b);
}

impl RecordKey {
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        match self {
            RecordKey::Offset {
                group,
                topic,
                partition,
            } => {
                buf.put_i16(1);
                put_str(&mut buf, group);
                put_str(&mut buf, topic);
                buf.put_i32(*partition);
            }
            RecordKey::Group { group } => {
                buf.put_i16(2);
                put_str(&mut buf, group);
            }
            RecordKey::Consumer { group, kind } => kind.encode(group, &mut buf),
            RecordKey::Share { group, kind } => return kind.encode(group),
        }
        buf.freeze()
    }

    pub fn group(&self) -> &str {
        match self {
            RecordKey::Offset { group, .. }
            | RecordKey::Group { group }
            | RecordKey::Consumer { group, .. }
            | RecordKey::Share { group, .. } => group,
        }
    }
}

impl RecordValue {
    pub fn encode(&self) -> Bytes {
        match self {
            RecordValue::Offset(v) => v.encode(),
            RecordValue::Group(v) => v.encode(),
            RecordValue::Consumer(v) => v.encode(),
            RecordValue::Share(v) => v.encode(),
        }
    }
}

impl OffsetValue {
    /// v3, or v1 when the commit set an explicit expire timestamp.
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        match self.expire_timestamp {
            Some(expire) => {
                buf.put_i16(1);
                buf.put_i64(self.offset);
                put_str(&mut buf, &self.metadata);
                buf.put_i64(self.commit_timestamp);
                buf.put_i64(expire);
            }
            None => {
                buf.put_i16(3);
                buf.put_i64(self.offset);
                buf.put_i32(self.leader_epoch);
                put_str(&mut buf, &self.metadata);
                buf.put_i64(self.commit_timestamp);
            }
        }
        buf.freeze()
    }
}

impl GroupValue {
    /// v3.
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_i16(3);
        put_str(&mut buf, &self.protocol_type);
        buf.put_i32(self.generation);
        put_nullable_str(&mut buf, self.protocol.as_deref());
        put_nullable_str(&mut buf, self.leader.as_deref());
        buf.put_i64(self.current_state_timestamp);
        buf.put_i32(self.members.len() as i32);
        for m in &self.members {
            put_str(&mut buf, &m.member_id);
            put_nullable_str(&mut buf, m.group_instance_id.as_deref());
            put_str(&mut buf, &m.client_id);
            put_str(&mut buf, &m.client_host);
            buf.put_i32(m.rebalance_timeout_ms);
            buf.put_i32(m.session_timeout_ms);
            put_bytes(&mut buf, &m.subscription);
            put_bytes(&mut buf, &m.assignment);
        }
        buf.freeze()
    }
}

// ---- decoding (every version Kafka writes) ----

/// Decodes a key; `Ok(None)` for record types this coordinator does not own.
pub fn decode_key(key: &Bytes) -> Result<Option<RecordKey>, SchemaError> {
    let mut r = Reader::new(key.clone(), false);
    match r.i16()? {
        0 | 1 => Ok(Some(RecordKey::Offset {
            group: r.str()?,
            topic: r.str()?,
            partition: r.i32()?,
        })),
        2 => Ok(Some(RecordKey::Group { group: r.str()? })),
        t @ (3..=8 | 16) => {
            let group = r.str()?;
            Ok(ConsumerKey::decode(t, &mut r)?.map(|kind| RecordKey::Consumer { group, kind }))
        }
        t @ 10..=15 => {
            let group = r.str()?;
            Ok(ShareKey::decode(t, &mut r)?.map(|kind| RecordKey::Share { group, kind }))
        }
        _ => Ok(None),
    }
}

/// Decodes the value stored under `key`.
pub fn decode_value(key: &RecordKey, value: &Bytes) -> Result<RecordValue, SchemaError> {
    let mut r = Reader::new(value.clone(), false);
    let version = r.i16()?;
    match key {
        RecordKey::Offset { .. } => decode_offset(&mut r, version).map(RecordValue::Offset),
        RecordKey::Group { .. } => decode_group(&mut r, version).map(RecordValue::Group),
        RecordKey::Consumer { kind, .. } => {
            consumer::decode(kind, &mut r, version).map(RecordValue::Consumer)
        }
        RecordKey::Share { kind, .. } => {
            ShareValue::decode(kind, value.clone()).map(RecordValue::Share)
        }
    }
}

fn decode_offset(r: &mut Reader, version: i16) -> Result<OffsetValue, SchemaError> {
    if !(0..=4).contains(&version) {
        return Err(SchemaError::UnknownVersion {
            what: "OffsetCommitValue",
            version,
        });
    }
    r.set_flexible(version >= 4);
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.str()?;
    let commit_timestamp = r.i64()?;
    let expire_timestamp = if version == 1 { Some(r.i64()?) } else { None };
    r.skip_tags()?;
    Ok(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
        expire_timestamp,
    })
}

fn decode_group(r: &mut Reader, version: i16) -> Result<GroupValue, SchemaError> {
    if !(0..=4).contains(&version) {
        return Err(SchemaError::UnknownVersion {
            what: "GroupMetadataValue",
            version,
        });
    }
    r.set_flexible(version >= 4);
    let protocol_type = r.str()?;
    let generation = r.i32()?;
    let protocol = r.nullable_str()?;
    let leader = r.nullable_str()?;
    let current_state_timestamp = if version >= 2 { r.i64()? } else { -1 };
    let count = r.array_len()?;
    let mut members = Vec::with_capacity(count);
    for _ in 0..count {
        let member_id = r.str()?;
        let group_instance_id = if version >= 3 {
            r.nullable_str()?
        } else {
            None
        };
        let client_id = r.str()?;
        let client_host = r.str()?;
        let session_and_rebalance = if version >= 1 {
            let rebalance = r.i32()?;
            (r.i32()?, rebalance)
        } else {
            let session = r.i32()?;
            (session, session)
        };
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        r.skip_tags()?;
        members.push(MemberValue {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms: session_and_rebalance.1,
            session_timeout_ms: session_and_rebalance.0,
            subscription,
            assignment,
        });
    }
    r.skip_tags()?;
    Ok(GroupValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_choice_matches_java_string_hash_code() {
        // "".hashCode() == 0; "a".hashCode() == 97; "console-consumer".hashCode() is
        // negative and wraps.
        assert_eq!(partition_for("", 50), 0);
        assert_eq!(partition_for("a", 50), 97 % 50);
        let h = "console-consumer-12345"
            .encode_utf16()
            .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32));
        assert_eq!(partition_for("console-consumer-12345", 50), h.abs() % 50);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE, which Utils.abs maps to 0.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // UTF-16 code units, not bytes or chars: U+1F600 is two units.
        let expected = (0xD83Di32 * 31 + 0xDE00) % 50;
        assert_eq!(partition_for("\u{1F600}", 50), expected);
    }

    #[test]
    fn offset_key_and_value_v3_layout() {
        let key = RecordKey::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
        };
        assert_eq!(
            &key.encode()[..],
            &[0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]
        );
        let value = OffsetValue {
            offset: 42,
            leader_epoch: 5,
            metadata: "m".into(),
            commit_timestamp: 1000,
            expire_timestamp: None,
        };
        let mut expected = vec![0, 3];
        expected.extend_from_slice(&42i64.to_be_bytes());
        expected.extend_from_slice(&5i32.to_be_bytes());
        expected.extend_from_slice(&[0, 1, b'm']);
        expected.extend_from_slice(&1000i64.to_be_bytes());
        let bytes = value.encode();
        assert_eq!(&bytes[..], &expected[..]);
        assert_eq!(decode_key(&key.encode()).unwrap(), Some(key.clone()));
        assert_eq!(
            decode_value(&key, &bytes).unwrap(),
            RecordValue::Offset(value)
        );
    }

    #[test]
    fn offset_value_v1_carries_the_expire_timestamp() {
        let key = RecordKey::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        };
        let value = OffsetValue {
            offset: 7,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 10,
            expire_timestamp: Some(20),
        };
        let bytes = value.encode();
        assert_eq!(&bytes[..2], &[0, 1]);
        assert_eq!(bytes.len(), 2 + 8 + 2 + 8 + 8);
        assert_eq!(
            decode_value(&key, &bytes).unwrap(),
            RecordValue::Offset(value)
        );
    }

    #[test]
    fn offset_value_v4_flexible_decodes() {
        // v4: offset, leaderEpoch, compact metadata "ab", commitTimestamp, no tags.
        let mut v = vec![0, 4];
        v.extend_from_slice(&9i64.to_be_bytes());
        v.extend_from_slice(&2i32.to_be_bytes());
        v.extend_from_slice(&[3, b'a', b'b']);
        v.extend_from_slice(&77i64.to_be_bytes());
        v.push(0);
        let key = RecordKey::Offset {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        };
        let RecordValue::Offset(o) = decode_value(&key, &Bytes::from(v)).unwrap() else {
            panic!("not an offset");
        };
        assert_eq!(
            (o.offset, o.leader_epoch, o.metadata.as_str()),
            (9, 2, "ab")
        );
        assert_eq!(o.commit_timestamp, 77);
    }

    #[test]
    fn group_metadata_v3_layout_round_trips() {
        let key = RecordKey::Group { group: "g".into() };
        assert_eq!(&key.encode()[..], &[0, 2, 0, 1, b'g']);
        let value = GroupValue {
            protocol_type: "consumer".into(),
            generation: 4,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            current_state_timestamp: 123,
            members: vec![MemberValue {
                member_id: "m1".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300000,
                session_timeout_ms: 45000,
                subscription: Bytes::from_static(b"sub"),
                assignment: Bytes::from_static(b"as"),
            }],
        };
        let bytes = value.encode();
        let mut expected = vec![0, 3, 0, 8];
        expected.extend_from_slice(b"consumer");
        expected.extend_from_slice(&4i32.to_be_bytes());
        expected.extend_from_slice(&[0, 5]);
        expected.extend_from_slice(b"range");
        expected.extend_from_slice(&[0, 2, b'm', b'1']);
        expected.extend_from_slice(&123i64.to_be_bytes());
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&[0, 2, b'm', b'1']);
        expected.extend_from_slice(&[0xff, 0xff]); // null group instance id
        expected.extend_from_slice(&[0, 1, b'c']);
        expected.extend_from_slice(&[0, 10]);
        expected.extend_from_slice(b"/127.0.0.1");
        expected.extend_from_slice(&300000i32.to_be_bytes());
        expected.extend_from_slice(&45000i32.to_be_bytes());
        expected.extend_from_slice(&[0, 0, 0, 3]);
        expected.extend_from_slice(b"sub");
        expected.extend_from_slice(&[0, 0, 0, 2]);
        expected.extend_from_slice(b"as");
        assert_eq!(&bytes[..], &expected[..]);
        assert_eq!(
            decode_value(&key, &bytes).unwrap(),
            RecordValue::Group(value)
        );
    }

    #[test]
    fn other_record_types_are_skipped_and_garbage_is_an_error() {
        // Streams group metadata (type 17).
        assert_eq!(
            decode_key(&Bytes::from_static(&[0, 17, 0, 1, b'g'])),
            Ok(None)
        );
        // Share group metadata (type 11) is a share group's.
        assert_eq!(
            decode_key(&Bytes::from_static(&[0, 11, 0, 1, b'g'])),
            Ok(Some(RecordKey::Share {
                group: "g".into(),
                kind: ShareKey::Metadata
            }))
        );
        assert_eq!(
            decode_key(&Bytes::from_static(&[0, 1, 0, 9, b'g'])),
            Err(SchemaError::Truncated)
        );
        let key = RecordKey::Group { group: "g".into() };
        assert!(decode_value(&key, &Bytes::from_static(&[0, 9])).is_err());
    }
}
