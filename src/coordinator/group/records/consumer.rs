//! The KIP-848 consumer group records of `__consumer_offsets`, with Kafka's schemas
//! (`group-coordinator/.../common/message/ConsumerGroup*.json`).
//!
//! Keys are non-flexible like every key: the i16 record type, the group id and, for
//! per-member records, the member id (for type 16, the regular expression). Values are
//! version 0 and flexible: compact strings and arrays, a tagged-field section after
//! every struct. skua writes one tag, Kafka 4.4's AssignmentEpochs (tag 0 of record 8's
//! TopicPartitions, KIP-1251: the member epoch at which each partition was assigned,
//! aligned with Partitions), and skips every other it reads, e.g. the
//! ClassicMemberMetadata tag of a member record or fields later Kafka versions add.
//!
//! | type | key               | value                                                      |
//! |------|-------------------|------------------------------------------------------------|
//! | 3    | group             | Epoch i32                                                  |
//! | 4    | group             | Topics[]{TopicId, TopicName, NumPartitions, PartitionMetadata[]{Partition, Racks[]}} |
//! | 5    | group, member     | InstanceId?, RackId?, ClientId, ClientHost, SubscribedTopicNames[], SubscribedTopicRegex?, RebalanceTimeoutMs, ServerAssignor? |
//! | 6    | group             | AssignmentEpoch i32                                        |
//! | 7    | group, member     | TopicPartitions[]{TopicId, Partitions[]}                   |
//! | 8    | group, member     | MemberEpoch, PreviousMemberEpoch, State i8, AssignedPartitions[], PartitionsPendingRevocation[] (TopicPartitions[]{TopicId, Partitions[], tag 0: AssignmentEpochs[]}) |
//! | 16   | group, regex      | Topics[], Version i64, Timestamp i64                       |

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::{put_str, put_uvarint, Reader, SchemaError};

/// Which consumer group record a key names, with its sub-key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConsumerKey {
    /// 3: the group epoch.
    Metadata,
    /// 4: the partition counts of the subscribed topics.
    PartitionMetadata,
    /// 5: a member's subscription and client details.
    Member(String),
    /// 6: the epoch of the target assignment.
    TargetAssignmentMetadata,
    /// 7: a member's target assignment.
    TargetAssignment(String),
    /// 8: a member's epochs and current assignment.
    CurrentAssignment(String),
    /// 16: what a regular expression subscription resolved to.
    RegularExpression(String),
}

impl ConsumerKey {
    pub fn record_type(&self) -> i16 {
        match self {
            ConsumerKey::Metadata => 3,
            ConsumerKey::PartitionMetadata => 4,
            ConsumerKey::Member(_) => 5,
            ConsumerKey::TargetAssignmentMetadata => 6,
            ConsumerKey::TargetAssignment(_) => 7,
            ConsumerKey::CurrentAssignment(_) => 8,
            ConsumerKey::RegularExpression(_) => 16,
        }
    }

    /// The key struct after the record type.
    pub(super) fn encode(&self, group: &str, buf: &mut BytesMut) {
        buf.put_i16(self.record_type());
        put_str(buf, group);
        match self {
            ConsumerKey::Member(s)
            | ConsumerKey::TargetAssignment(s)
            | ConsumerKey::CurrentAssignment(s)
            | ConsumerKey::RegularExpression(s) => put_str(buf, s),
            _ => {}
        }
    }

    /// Reads the sub-key of a record of type `record_type` (after the group id); None
    /// for types that are not consumer group records.
    pub(super) fn decode(record_type: i16, r: &mut Reader) -> Result<Option<Self>, SchemaError> {
        Ok(Some(match record_type {
            3 => ConsumerKey::Metadata,
            4 => ConsumerKey::PartitionMetadata,
            5 => ConsumerKey::Member(r.str()?),
            6 => ConsumerKey::TargetAssignmentMetadata,
            7 => ConsumerKey::TargetAssignment(r.str()?),
            8 => ConsumerKey::CurrentAssignment(r.str()?),
            16 => ConsumerKey::RegularExpression(r.str()?),
            _ => return Ok(None),
        }))
    }
}

/// One topic's partitions, by topic id as every assignment record stores them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicPartitions {
    pub topic_id: Uuid,
    pub partitions: Vec<i32>,
    /// Record 8 only: the member epoch at which each partition was assigned, aligned with
    /// `partitions` (tag 0, AssignmentEpochs). Empty is Kafka's default: not written, and
    /// what a record without the tag reads as.
    pub assignment_epochs: Vec<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicMetadata {
    pub topic_id: Uuid,
    pub topic_name: String,
    pub num_partitions: i32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
}

/// Kafka's `MemberState` as record 8 stores it.
pub mod member_state {
    pub const STABLE: i8 = 0;
    pub const UNREVOKED_PARTITIONS: i8 = 1;
    pub const UNRELEASED_PARTITIONS: i8 = 2;
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentAssignment {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: i8,
    pub assigned: Vec<TopicPartitions>,
    pub pending_revocation: Vec<TopicPartitions>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegularExpression {
    pub topics: Vec<String>,
    /// The metadata version the expression was resolved against.
    pub version: i64,
    pub timestamp_ms: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerValue {
    Metadata { epoch: i32 },
    PartitionMetadata(Vec<TopicMetadata>),
    Member(MemberMetadata),
    TargetAssignmentMetadata { assignment_epoch: i32 },
    TargetAssignment(Vec<TopicPartitions>),
    CurrentAssignment(CurrentAssignment),
    RegularExpression(RegularExpression),
}

// ---- encoding (value version 0, flexible) ----

/// A compact length: n + 1 (0 is null).
pub(super) fn put_len(buf: &mut BytesMut, n: usize) {
    put_uvarint(buf, u32::try_from(n).unwrap_or(u32::MAX - 1) + 1);
}

pub(super) fn put_compact_str(buf: &mut BytesMut, s: &str) {
    put_len(buf, s.len());
    buf.put_slice(s.as_bytes());
}

pub(super) fn put_compact_nullable_str(buf: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_compact_str(buf, s),
        None => buf.put_u8(0),
    }
}

/// An empty tagged-field section.
pub(super) fn put_no_tags(buf: &mut BytesMut) {
    buf.put_u8(0);
}

pub(super) fn put_topic_partitions(buf: &mut BytesMut, tps: &[TopicPartitions]) {
    put_len(buf, tps.len());
    for tp in tps {
        buf.put_slice(tp.topic_id.as_bytes());
        put_len(buf, tp.partitions.len());
        for p in &tp.partitions {
            buf.put_i32(*p);
        }
        if tp.assignment_epochs.is_empty() {
            put_no_tags(buf);
        } else {
            // One tagged field: tag 0, its size, a compact int32 array.
            let mut epochs = BytesMut::new();
            put_len(&mut epochs, tp.assignment_epochs.len());
            for e in &tp.assignment_epochs {
                epochs.put_i32(*e);
            }
            put_uvarint(buf, 1);
            put_uvarint(buf, ASSIGNMENT_EPOCHS_TAG);
            put_uvarint(buf, u32::try_from(epochs.len()).unwrap_or(u32::MAX));
            buf.put_slice(&epochs);
        }
    }
}

/// The tag of TopicPartitions' AssignmentEpochs in record 8.
const ASSIGNMENT_EPOCHS_TAG: u32 = 0;

impl ConsumerValue {
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::new();
        buf.put_i16(0);
        match self {
            ConsumerValue::Metadata { epoch } => buf.put_i32(*epoch),
            ConsumerValue::PartitionMetadata(topics) => {
                put_len(&mut buf, topics.len());
                for t in topics {
                    buf.put_slice(t.topic_id.as_bytes());
                    put_compact_str(&mut buf, &t.topic_name);
                    buf.put_i32(t.num_partitions);
                    // PartitionMetadata (racks per partition): skua's assignor is not
                    // rack-aware, and Kafka 4.x no longer reads it.
                    put_len(&mut buf, 0);
                    put_no_tags(&mut buf);
                }
            }
            ConsumerValue::Member(m) => {
                put_compact_nullable_str(&mut buf, m.instance_id.as_deref());
                put_compact_nullable_str(&mut buf, m.rack_id.as_deref());
                put_compact_str(&mut buf, &m.client_id);
                put_compact_str(&mut buf, &m.client_host);
                put_len(&mut buf, m.subscribed_topic_names.len());
                for t in &m.subscribed_topic_names {
                    put_compact_str(&mut buf, t);
                }
                put_compact_nullable_str(&mut buf, m.subscribed_topic_regex.as_deref());
                buf.put_i32(m.rebalance_timeout_ms);
                put_compact_nullable_str(&mut buf, m.server_assignor.as_deref());
            }
            ConsumerValue::TargetAssignmentMetadata { assignment_epoch } => {
                buf.put_i32(*assignment_epoch)
            }
            ConsumerValue::TargetAssignment(tps) => put_topic_partitions(&mut buf, tps),
            ConsumerValue::CurrentAssignment(a) => {
                buf.put_i32(a.member_epoch);
                buf.put_i32(a.previous_member_epoch);
                buf.put_i8(a.state);
                put_topic_partitions(&mut buf, &a.assigned);
                put_topic_partitions(&mut buf, &a.pending_revocation);
            }
            ConsumerValue::RegularExpression(r) => {
                put_len(&mut buf, r.topics.len());
                for t in &r.topics {
                    put_compact_str(&mut buf, t);
                }
                buf.put_i64(r.version);
                buf.put_i64(r.timestamp_ms);
            }
        }
        put_no_tags(&mut buf);
        buf.freeze()
    }
}

// ---- decoding ----

/// Decodes the value of a consumer group record; `r` is positioned after the version.
pub(super) fn decode(
    key: &ConsumerKey,
    r: &mut Reader,
    version: i16,
) -> Result<ConsumerValue, SchemaError> {
    if version != 0 {
        return Err(SchemaError::UnknownVersion {
            what: "ConsumerGroup record value",
            version,
        });
    }
    r.set_flexible(true);
    let value = match key {
        ConsumerKey::Metadata => ConsumerValue::Metadata { epoch: r.i32()? },
        ConsumerKey::PartitionMetadata => {
            let n = r.array_len()?;
            let mut topics = Vec::with_capacity(n);
            for _ in 0..n {
                let topic_id = r.uuid()?;
                let topic_name = r.str()?;
                let num_partitions = r.i32()?;
                // Racks per partition: read past, unused.
                for _ in 0..r.array_len()? {
                    r.i32()?;
                    for _ in 0..r.array_len()? {
                        r.str()?;
                    }
                    r.skip_tags()?;
                }
                r.skip_tags()?;
                topics.push(TopicMetadata {
                    topic_id,
                    topic_name,
                    num_partitions,
                });
            }
            ConsumerValue::PartitionMetadata(topics)
        }
        ConsumerKey::Member(_) => ConsumerValue::Member(MemberMetadata {
            instance_id: r.nullable_str()?,
            rack_id: r.nullable_str()?,
            client_id: r.str()?,
            client_host: r.str()?,
            subscribed_topic_names: strings(r)?,
            subscribed_topic_regex: r.nullable_str()?,
            rebalance_timeout_ms: r.i32()?,
            server_assignor: r.nullable_str()?,
        }),
        ConsumerKey::TargetAssignmentMetadata => ConsumerValue::TargetAssignmentMetadata {
            assignment_epoch: r.i32()?,
        },
        ConsumerKey::TargetAssignment(_) => ConsumerValue::TargetAssignment(topic_partitions(r)?),
        ConsumerKey::CurrentAssignment(_) => ConsumerValue::CurrentAssignment(CurrentAssignment {
            member_epoch: r.i32()?,
            previous_member_epoch: r.i32()?,
            state: r.i8()?,
            assigned: topic_partitions_with_epochs(r)?,
            pending_revocation: topic_partitions_with_epochs(r)?,
        }),
        ConsumerKey::RegularExpression(_) => ConsumerValue::RegularExpression(RegularExpression {
            topics: strings(r)?,
            version: r.i64()?,
            timestamp_ms: r.i64()?,
        }),
    };
    r.skip_tags()?;
    Ok(value)
}

pub(super) fn strings(r: &mut Reader) -> Result<Vec<String>, SchemaError> {
    let n = r.array_len()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(r.str()?);
    }
    Ok(out)
}

pub(super) fn topic_partitions(r: &mut Reader) -> Result<Vec<TopicPartitions>, SchemaError> {
    read_topic_partitions(r, false)
}

/// Record 8's TopicPartitions: tag 0 is AssignmentEpochs (a null one reads as empty).
fn topic_partitions_with_epochs(r: &mut Reader) -> Result<Vec<TopicPartitions>, SchemaError> {
    read_topic_partitions(r, true)
}

fn read_topic_partitions(
    r: &mut Reader,
    epochs_tag: bool,
) -> Result<Vec<TopicPartitions>, SchemaError> {
    let n = r.array_len()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let topic_id = r.uuid()?;
        let partitions = int32s(r)?;
        let mut assignment_epochs = Vec::new();
        if epochs_tag {
            for (tag, data) in r.tagged_fields()? {
                if tag == ASSIGNMENT_EPOCHS_TAG {
                    assignment_epochs = int32s(&mut Reader::new(data, true))?;
                }
            }
        } else {
            r.skip_tags()?;
        }
        out.push(TopicPartitions {
            topic_id,
            partitions,
            assignment_epochs,
        });
    }
    Ok(out)
}

/// A compact int32 array (null reads as empty); the count is bounded by the bytes left.
fn int32s(r: &mut Reader) -> Result<Vec<i32>, SchemaError> {
    let count = r.array_len()?;
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        out.push(r.i32()?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::{decode_key, decode_value, RecordKey, RecordValue};
    use super::*;

    fn key(kind: ConsumerKey) -> RecordKey {
        RecordKey::Consumer {
            group: "g".into(),
            kind,
        }
    }

    fn round_trip(kind: ConsumerKey, value: ConsumerValue) {
        let k = key(kind);
        assert_eq!(decode_key(&k.encode()).unwrap(), Some(k.clone()));
        assert_eq!(
            decode_value(&k, &value.encode()).unwrap(),
            RecordValue::Consumer(value)
        );
    }

    const T1: Uuid = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);

    #[test]
    fn keys_carry_the_record_type_group_and_sub_key() {
        assert_eq!(
            &key(ConsumerKey::Metadata).encode()[..],
            &[0, 3, 0, 1, b'g']
        );
        assert_eq!(
            &key(ConsumerKey::CurrentAssignment("m".into())).encode()[..],
            &[0, 8, 0, 1, b'g', 0, 1, b'm']
        );
        assert_eq!(
            &key(ConsumerKey::RegularExpression("t.*".into())).encode()[..],
            &[0, 16, 0, 1, b'g', 0, 3, b't', b'.', b'*']
        );
    }

    #[test]
    fn every_value_round_trips() {
        round_trip(ConsumerKey::Metadata, ConsumerValue::Metadata { epoch: 7 });
        round_trip(
            ConsumerKey::PartitionMetadata,
            ConsumerValue::PartitionMetadata(vec![TopicMetadata {
                topic_id: T1,
                topic_name: "t".into(),
                num_partitions: 6,
            }]),
        );
        round_trip(
            ConsumerKey::Member("m".into()),
            ConsumerValue::Member(MemberMetadata {
                instance_id: Some("i".into()),
                rack_id: None,
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                subscribed_topic_names: vec!["t".into(), "u".into()],
                subscribed_topic_regex: Some("v.*".into()),
                rebalance_timeout_ms: 30_000,
                server_assignor: Some("uniform".into()),
            }),
        );
        round_trip(
            ConsumerKey::TargetAssignmentMetadata,
            ConsumerValue::TargetAssignmentMetadata {
                assignment_epoch: 7,
            },
        );
        round_trip(
            ConsumerKey::TargetAssignment("m".into()),
            ConsumerValue::TargetAssignment(vec![TopicPartitions {
                topic_id: T1,
                partitions: vec![0, 2, 4],
                assignment_epochs: vec![],
            }]),
        );
        round_trip(
            ConsumerKey::CurrentAssignment("m".into()),
            ConsumerValue::CurrentAssignment(CurrentAssignment {
                member_epoch: 7,
                previous_member_epoch: 6,
                state: member_state::UNREVOKED_PARTITIONS,
                assigned: vec![TopicPartitions {
                    topic_id: T1,
                    partitions: vec![0],
                    assignment_epochs: vec![],
                }],
                pending_revocation: vec![TopicPartitions {
                    topic_id: T1,
                    partitions: vec![1],
                    assignment_epochs: vec![],
                }],
            }),
        );
        round_trip(
            ConsumerKey::RegularExpression("t.*".into()),
            ConsumerValue::RegularExpression(RegularExpression {
                topics: vec!["t1".into()],
                version: 0,
                timestamp_ms: 1_700_000_000_000,
            }),
        );
    }

    /// ConsumerGroupCurrentMemberAssignmentValue v0, field by field in the spec's order:
    /// MemberEpoch, PreviousMemberEpoch, State, AssignedPartitions,
    /// PartitionsPendingRevocation, each struct closed by an empty tag section.
    #[test]
    fn current_assignment_layout_follows_the_spec() {
        let value = ConsumerValue::CurrentAssignment(CurrentAssignment {
            member_epoch: 5,
            previous_member_epoch: 4,
            state: member_state::STABLE,
            assigned: vec![TopicPartitions {
                topic_id: T1,
                partitions: vec![1, 3],
                assignment_epochs: vec![],
            }],
            pending_revocation: vec![],
        });
        let mut expected = vec![0, 0]; // value version 0
        expected.extend_from_slice(&5i32.to_be_bytes());
        expected.extend_from_slice(&4i32.to_be_bytes());
        expected.push(0); // State
        expected.push(2); // compact array of one TopicPartitions
        expected.extend_from_slice(T1.as_bytes());
        expected.push(3); // compact array of two partitions
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&3i32.to_be_bytes());
        expected.push(0); // TopicPartitions tags
        expected.push(1); // empty PartitionsPendingRevocation
        expected.push(0); // value tags
        assert_eq!(&value.encode()[..], &expected[..]);
    }

    /// Kafka 4.4's layout of record 8 with AssignmentEpochs (tag 0 of each
    /// TopicPartitions, `ConsumerGroupCurrentMemberAssignmentValue.json`): the tag section
    /// holds one field, tag 0, its size, and a compact int32 array aligned with Partitions;
    /// a topic with no epochs keeps an empty section (Kafka's default, an empty array,
    /// is not written). The same bytes decode back, and the same record without the tag
    /// (skua's and Kafka's before 4.4) reads with no epochs.
    #[test]
    fn current_assignment_with_assignment_epochs_is_kafka_4_4s_layout() {
        let value = ConsumerValue::CurrentAssignment(CurrentAssignment {
            member_epoch: 9,
            previous_member_epoch: 8,
            state: member_state::UNREVOKED_PARTITIONS,
            assigned: vec![TopicPartitions {
                topic_id: T1,
                partitions: vec![1, 3],
                assignment_epochs: vec![5, 9],
            }],
            pending_revocation: vec![TopicPartitions {
                topic_id: T1,
                partitions: vec![4],
                assignment_epochs: vec![],
            }],
        });
        let mut expected = vec![0, 0]; // value version 0
        expected.extend_from_slice(&9i32.to_be_bytes());
        expected.extend_from_slice(&8i32.to_be_bytes());
        expected.push(1); // State: UNREVOKED_PARTITIONS
        expected.push(2); // AssignedPartitions: one TopicPartitions
        expected.extend_from_slice(T1.as_bytes());
        expected.push(3); // Partitions: two
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&3i32.to_be_bytes());
        expected.push(1); // one tagged field
        expected.push(0); // tag 0: AssignmentEpochs
        expected.push(9); // its size: the compact length byte and two int32s
        expected.push(3); // compact array of two
        expected.extend_from_slice(&5i32.to_be_bytes());
        expected.extend_from_slice(&9i32.to_be_bytes());
        expected.push(2); // PartitionsPendingRevocation: one TopicPartitions
        expected.extend_from_slice(T1.as_bytes());
        expected.push(2);
        expected.extend_from_slice(&4i32.to_be_bytes());
        expected.push(0); // no tagged fields
        expected.push(0); // value tags
        let encoded = value.encode();
        assert_eq!(&encoded[..], &expected[..]);
        let k = key(ConsumerKey::CurrentAssignment("m".into()));
        assert_eq!(
            decode_value(&k, &encoded).unwrap(),
            RecordValue::Consumer(value.clone())
        );

        // Without the tag (the section emptied, its 11 bytes cut): no epochs.
        let start = 2 + 4 + 4 + 1 + 1 + 16 + 1 + 8;
        let mut untagged = expected[..start].to_vec();
        untagged.push(0);
        untagged.extend_from_slice(&expected[start + 12..]);
        let RecordValue::Consumer(ConsumerValue::CurrentAssignment(a)) =
            decode_value(&k, &Bytes::from(untagged)).unwrap()
        else {
            panic!("not record 8");
        };
        assert_eq!(a.assigned[0].partitions, vec![1, 3]);
        assert!(a.assigned[0].assignment_epochs.is_empty());

        // A null AssignmentEpochs (what Kafka's null default writes) reads as none.
        let mut null = expected[..start].to_vec();
        null.extend_from_slice(&[1, 0, 1, 0]);
        null.extend_from_slice(&expected[start + 12..]);
        let RecordValue::Consumer(ConsumerValue::CurrentAssignment(a)) =
            decode_value(&k, &Bytes::from(null)).unwrap()
        else {
            panic!("not record 8");
        };
        assert!(a.assigned[0].assignment_epochs.is_empty());
    }

    /// ConsumerGroupMemberMetadataValue v0: InstanceId?, RackId?, ClientId, ClientHost,
    /// SubscribedTopicNames, SubscribedTopicRegex?, RebalanceTimeoutMs, ServerAssignor?.
    #[test]
    fn member_metadata_layout_follows_the_spec() {
        let value = ConsumerValue::Member(MemberMetadata {
            instance_id: None,
            rack_id: Some("r".into()),
            client_id: "c".into(),
            client_host: "h".into(),
            subscribed_topic_names: vec!["t".into()],
            subscribed_topic_regex: None,
            rebalance_timeout_ms: 300,
            server_assignor: None,
        });
        let mut expected = vec![0, 0, 0, 2, b'r', 2, b'c', 2, b'h', 2, 2, b't', 0];
        expected.extend_from_slice(&300i32.to_be_bytes());
        expected.extend_from_slice(&[0, 0]);
        assert_eq!(&value.encode()[..], &expected[..]);
    }

    /// Tagged fields are skipped: Kafka writes ClassicMemberMetadata as tag 0 of a
    /// member record for members that joined with the classic protocol.
    #[test]
    fn tagged_fields_are_skipped() {
        let plain = ConsumerValue::Metadata { epoch: 3 }.encode();
        let mut tagged = plain[..plain.len() - 1].to_vec();
        tagged.extend_from_slice(&[1, 0, 2, 0xAA, 0xBB]); // one tag, id 0, two bytes
        let k = key(ConsumerKey::Metadata);
        assert_eq!(
            decode_value(&k, &Bytes::from(tagged)).unwrap(),
            RecordValue::Consumer(ConsumerValue::Metadata { epoch: 3 })
        );
    }

    /// Mutated values (bytes flipped, cut, or grown) decode or fail, never panic; array
    /// counts are checked against the bytes left before anything is allocated.
    #[test]
    fn mutated_values_never_panic() {
        let samples = [
            (
                ConsumerKey::Member("m".into()),
                ConsumerValue::Member(MemberMetadata {
                    instance_id: Some("i".into()),
                    rack_id: None,
                    client_id: "c".into(),
                    client_host: "h".into(),
                    subscribed_topic_names: vec!["t".into(), "u".into()],
                    subscribed_topic_regex: Some("v.*".into()),
                    rebalance_timeout_ms: 1,
                    server_assignor: None,
                }),
            ),
            (
                ConsumerKey::PartitionMetadata,
                ConsumerValue::PartitionMetadata(vec![TopicMetadata {
                    topic_id: T1,
                    topic_name: "t".into(),
                    num_partitions: 6,
                }]),
            ),
            (
                ConsumerKey::CurrentAssignment("m".into()),
                ConsumerValue::CurrentAssignment(CurrentAssignment {
                    member_epoch: 1,
                    previous_member_epoch: 0,
                    state: 0,
                    assigned: vec![TopicPartitions {
                        topic_id: T1,
                        partitions: vec![0, 1, 2],
                        assignment_epochs: vec![],
                    }],
                    pending_revocation: vec![],
                }),
            ),
            (
                ConsumerKey::RegularExpression("r".into()),
                ConsumerValue::RegularExpression(RegularExpression {
                    topics: vec!["t".into()],
                    version: 0,
                    timestamp_ms: 0,
                }),
            ),
        ];
        let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for (kind, value) in samples {
            let k = key(kind);
            let good = value.encode().to_vec();
            for _ in 0..2000 {
                let mut v = good.clone();
                for _ in 0..1 + next(4) {
                    match next(3) {
                        0 => {
                            let i = next(v.len());
                            v[i] = next(256) as u8;
                        }
                        1 => v.truncate(next(v.len() + 1)),
                        _ => v.insert(next(v.len() + 1), next(256) as u8),
                    }
                    if v.is_empty() {
                        v.push(0);
                    }
                }
                let _ = decode_value(&k, &Bytes::from(v));
            }
        }
    }

    #[test]
    fn truncated_and_oversized_values_are_errors() {
        let k = key(ConsumerKey::TargetAssignment("m".into()));
        let full = ConsumerValue::TargetAssignment(vec![TopicPartitions {
            topic_id: T1,
            partitions: vec![0],
            assignment_epochs: vec![],
        }])
        .encode();
        for n in 2..full.len() {
            assert!(decode_value(&k, &full.slice(..n)).is_err(), "cut at {n}");
        }
        // An array count far beyond the bytes present is refused before allocating.
        let huge = Bytes::from_static(&[0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(decode_value(&k, &huge), Err(SchemaError::Truncated));
        assert!(decode_value(&k, &Bytes::from_static(&[0, 1, 1, 0])).is_err());
    }
}
