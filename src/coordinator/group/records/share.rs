//! The KIP-932 share group records of `__consumer_offsets`, with Kafka's schemas
//! (`group-coordinator/.../common/message/ShareGroup*.json`, Kafka 4.1+; 4.3 adds only a
//! tagged field to type 12, which skua skips).
//!
//! Keys are non-flexible like every key: the i16 record type, the group id and, for
//! per-member records, the member id. Values are version 0 and flexible.
//!
//! | type | key           | value                                                          |
//! |------|---------------|----------------------------------------------------------------|
//! | 10   | group, member | RackId?, ClientId, ClientHost, SubscribedTopicNames[]          |
//! | 11   | group         | Epoch i32, MetadataHash i64                                    |
//! | 12   | group         | AssignmentEpoch i32 (tag 0: AssignmentTimestamp, 4.3+)         |
//! | 13   | group, member | TopicPartitions[]{TopicId, Partitions[]}                       |
//! | 14   | group, member | MemberEpoch, PreviousMemberEpoch, State i8, AssignedPartitions[] |
//! | 15   | group         | InitializingTopics[]{TopicId, TopicName, Partitions[]}, InitializedTopics[] (same), DeletingTopics[]{TopicId, TopicName} |

use bytes::{BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::consumer::{
    put_compact_nullable_str, put_compact_str, put_len, put_no_tags, put_topic_partitions, strings,
    topic_partitions, TopicPartitions,
};
use super::{put_str, Reader, SchemaError};

/// Which share group record a key names, with its sub-key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ShareKey {
    /// 10: a member's subscription and client details.
    Member(String),
    /// 11: the group epoch and the hash of its subscribed topics' metadata.
    Metadata,
    /// 12: the epoch of the target assignment.
    TargetAssignmentMetadata,
    /// 13: a member's target assignment.
    TargetAssignment(String),
    /// 14: a member's epochs and current assignment.
    CurrentAssignment(String),
    /// 15: which topics' share-partitions have state in `__share_group_state`.
    StatePartitionMetadata,
}

impl ShareKey {
    pub fn record_type(&self) -> i16 {
        match self {
            ShareKey::Member(_) => 10,
            ShareKey::Metadata => 11,
            ShareKey::TargetAssignmentMetadata => 12,
            ShareKey::TargetAssignment(_) => 13,
            ShareKey::CurrentAssignment(_) => 14,
            ShareKey::StatePartitionMetadata => 15,
        }
    }

    pub fn encode(&self, group: &str) -> Bytes {
        let mut buf = BytesMut::with_capacity(8 + group.len());
        buf.put_i16(self.record_type());
        put_str(&mut buf, group);
        match self {
            ShareKey::Member(m)
            | ShareKey::TargetAssignment(m)
            | ShareKey::CurrentAssignment(m) => put_str(&mut buf, m),
            _ => {}
        }
        buf.freeze()
    }

    /// Reads the sub-key of a record of type `record_type` (after the group id); None
    /// for types that are not share group records.
    pub fn decode(record_type: i16, r: &mut Reader) -> Result<Option<Self>, SchemaError> {
        Ok(Some(match record_type {
            10 => ShareKey::Member(r.str()?),
            11 => ShareKey::Metadata,
            12 => ShareKey::TargetAssignmentMetadata,
            13 => ShareKey::TargetAssignment(r.str()?),
            14 => ShareKey::CurrentAssignment(r.str()?),
            15 => ShareKey::StatePartitionMetadata,
            _ => return Ok(None),
        }))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareMemberMetadata {
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareCurrentAssignment {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// Kafka's `MemberState`; a share member is always STABLE (0) once assigned.
    pub state: i8,
    pub assigned: Vec<TopicPartitions>,
}

/// One topic's share-partitions in record 15.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicPartitionsInfo {
    pub topic_id: Uuid,
    pub topic_name: String,
    pub partitions: Vec<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    pub topic_id: Uuid,
    pub topic_name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatePartitionMetadata {
    /// InitializeShareGroupState was sent for these, not yet answered.
    pub initializing: Vec<TopicPartitionsInfo>,
    /// The share coordinator holds state for these: they may be assigned.
    pub initialized: Vec<TopicPartitionsInfo>,
    /// Their state is being deleted.
    pub deleting: Vec<TopicInfo>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShareValue {
    Member(ShareMemberMetadata),
    Metadata { epoch: i32, metadata_hash: i64 },
    TargetAssignmentMetadata { assignment_epoch: i32 },
    TargetAssignment(Vec<TopicPartitions>),
    CurrentAssignment(ShareCurrentAssignment),
    StatePartitionMetadata(StatePartitionMetadata),
}

impl ShareValue {
    pub fn encode(&self) -> Bytes {
        let mut buf = BytesMut::with_capacity(64);
        buf.put_i16(0);
        match self {
            ShareValue::Member(m) => {
                put_compact_nullable_str(&mut buf, m.rack_id.as_deref());
                put_compact_str(&mut buf, &m.client_id);
                put_compact_str(&mut buf, &m.client_host);
                put_len(&mut buf, m.subscribed_topic_names.len());
                for t in &m.subscribed_topic_names {
                    put_compact_str(&mut buf, t);
                }
            }
            ShareValue::Metadata {
                epoch,
                metadata_hash,
            } => {
                buf.put_i32(*epoch);
                buf.put_i64(*metadata_hash);
            }
            ShareValue::TargetAssignmentMetadata { assignment_epoch } => {
                buf.put_i32(*assignment_epoch)
            }
            ShareValue::TargetAssignment(tps) => put_topic_partitions(&mut buf, tps),
            ShareValue::CurrentAssignment(a) => {
                buf.put_i32(a.member_epoch);
                buf.put_i32(a.previous_member_epoch);
                buf.put_i8(a.state);
                put_topic_partitions(&mut buf, &a.assigned);
            }
            ShareValue::StatePartitionMetadata(m) => {
                put_partitions_info(&mut buf, &m.initializing);
                put_partitions_info(&mut buf, &m.initialized);
                put_len(&mut buf, m.deleting.len());
                for t in &m.deleting {
                    buf.put_slice(t.topic_id.as_bytes());
                    put_compact_str(&mut buf, &t.topic_name);
                    put_no_tags(&mut buf);
                }
            }
        }
        put_no_tags(&mut buf);
        buf.freeze()
    }

    /// Decodes the value stored under `key` (its version first).
    pub fn decode(key: &ShareKey, value: Bytes) -> Result<ShareValue, SchemaError> {
        let mut r = Reader::new(value, false);
        let version = r.i16()?;
        if version != 0 {
            return Err(SchemaError::UnknownVersion {
                what: "ShareGroup record value",
                version,
            });
        }
        r.set_flexible(true);
        let value = match key {
            ShareKey::Member(_) => ShareValue::Member(ShareMemberMetadata {
                rack_id: r.nullable_str()?,
                client_id: r.str()?,
                client_host: r.str()?,
                subscribed_topic_names: strings(&mut r)?,
            }),
            ShareKey::Metadata => ShareValue::Metadata {
                epoch: r.i32()?,
                metadata_hash: r.i64()?,
            },
            ShareKey::TargetAssignmentMetadata => ShareValue::TargetAssignmentMetadata {
                assignment_epoch: r.i32()?,
            },
            ShareKey::TargetAssignment(_) => {
                ShareValue::TargetAssignment(topic_partitions(&mut r)?)
            }
            ShareKey::CurrentAssignment(_) => {
                ShareValue::CurrentAssignment(ShareCurrentAssignment {
                    member_epoch: r.i32()?,
                    previous_member_epoch: r.i32()?,
                    state: r.i8()?,
                    assigned: topic_partitions(&mut r)?,
                })
            }
            ShareKey::StatePartitionMetadata => {
                let initializing = partitions_info(&mut r)?;
                let initialized = partitions_info(&mut r)?;
                let n = r.array_len()?;
                let mut deleting = Vec::with_capacity(n);
                for _ in 0..n {
                    deleting.push(TopicInfo {
                        topic_id: r.uuid()?,
                        topic_name: r.str()?,
                    });
                    r.skip_tags()?;
                }
                ShareValue::StatePartitionMetadata(StatePartitionMetadata {
                    initializing,
                    initialized,
                    deleting,
                })
            }
        };
        r.skip_tags()?;
        Ok(value)
    }
}

fn put_partitions_info(buf: &mut BytesMut, topics: &[TopicPartitionsInfo]) {
    put_len(buf, topics.len());
    for t in topics {
        buf.put_slice(t.topic_id.as_bytes());
        put_compact_str(buf, &t.topic_name);
        put_len(buf, t.partitions.len());
        for p in &t.partitions {
            buf.put_i32(*p);
        }
        put_no_tags(buf);
    }
}

fn partitions_info(r: &mut Reader) -> Result<Vec<TopicPartitionsInfo>, SchemaError> {
    let n = r.array_len()?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let topic_id = r.uuid()?;
        let topic_name = r.str()?;
        let count = r.array_len()?;
        let mut partitions = Vec::with_capacity(count);
        for _ in 0..count {
            partitions.push(r.i32()?);
        }
        r.skip_tags()?;
        out.push(TopicPartitionsInfo {
            topic_id,
            topic_name,
            partitions,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T1: Uuid = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);

    fn round_trip(key: ShareKey, value: ShareValue) {
        let bytes = key.encode("g");
        let mut r = Reader::new(bytes, false);
        let record_type = r.i16().unwrap();
        assert_eq!(r.str().unwrap(), "g");
        assert_eq!(
            ShareKey::decode(record_type, &mut r).unwrap(),
            Some(key.clone())
        );
        assert_eq!(ShareValue::decode(&key, value.encode()).unwrap(), value);
    }

    #[test]
    fn keys_carry_the_record_type_group_and_member() {
        assert_eq!(&ShareKey::Metadata.encode("g")[..], &[0, 11, 0, 1, b'g']);
        assert_eq!(
            &ShareKey::CurrentAssignment("m".into()).encode("g")[..],
            &[0, 14, 0, 1, b'g', 0, 1, b'm']
        );
        let mut r = Reader::new(Bytes::from_static(&[0, 1]), false);
        assert_eq!(ShareKey::decode(3, &mut r), Ok(None));
    }

    #[test]
    fn group_metadata_value_layout() {
        let v = ShareValue::Metadata {
            epoch: 2,
            metadata_hash: 3,
        };
        assert_eq!(
            &v.encode()[..],
            &[0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0]
        );
    }

    #[test]
    fn member_and_assignment_value_layout() {
        let v = ShareValue::CurrentAssignment(ShareCurrentAssignment {
            member_epoch: 5,
            previous_member_epoch: 4,
            state: 0,
            assigned: vec![TopicPartitions {
                topic_id: T1,
                partitions: vec![1],
                assignment_epochs: vec![],
            }],
        });
        let mut expected = vec![0, 0, 0, 0, 0, 5, 0, 0, 0, 4, 0, 2];
        expected.extend_from_slice(T1.as_bytes());
        expected.extend_from_slice(&[2, 0, 0, 0, 1, 0, 0]);
        assert_eq!(&v.encode()[..], &expected[..]);
        let m = ShareValue::Member(ShareMemberMetadata {
            rack_id: None,
            client_id: "c".into(),
            client_host: "/h".into(),
            subscribed_topic_names: vec!["t".into()],
        });
        assert_eq!(
            &m.encode()[..],
            &[0, 0, 0, 2, b'c', 3, b'/', b'h', 2, 2, b't', 0]
        );
    }

    #[test]
    fn every_value_round_trips() {
        round_trip(
            ShareKey::Member("m".into()),
            ShareValue::Member(ShareMemberMetadata {
                rack_id: Some("r".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                subscribed_topic_names: vec!["t".into(), "u".into()],
            }),
        );
        round_trip(
            ShareKey::Metadata,
            ShareValue::Metadata {
                epoch: 7,
                metadata_hash: -9,
            },
        );
        round_trip(
            ShareKey::TargetAssignmentMetadata,
            ShareValue::TargetAssignmentMetadata {
                assignment_epoch: 7,
            },
        );
        round_trip(
            ShareKey::TargetAssignment("m".into()),
            ShareValue::TargetAssignment(vec![TopicPartitions {
                topic_id: T1,
                partitions: vec![0, 2],
                assignment_epochs: vec![],
            }]),
        );
        round_trip(
            ShareKey::StatePartitionMetadata,
            ShareValue::StatePartitionMetadata(StatePartitionMetadata {
                initializing: vec![TopicPartitionsInfo {
                    topic_id: T1,
                    topic_name: "t".into(),
                    partitions: vec![1],
                }],
                initialized: vec![TopicPartitionsInfo {
                    topic_id: T1,
                    topic_name: "t".into(),
                    partitions: vec![0],
                }],
                deleting: vec![TopicInfo {
                    topic_id: Uuid::from_u128(9),
                    topic_name: "old".into(),
                }],
            }),
        );
    }

    #[test]
    fn a_4_3_target_metadata_with_its_timestamp_tag_is_read() {
        // AssignmentEpoch 7, then tag 0 (8 bytes): AssignmentTimestamp.
        let mut bytes = vec![0, 0, 0, 0, 0, 7, 1, 0, 8];
        bytes.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        assert_eq!(
            ShareValue::decode(&ShareKey::TargetAssignmentMetadata, Bytes::from(bytes)),
            Ok(ShareValue::TargetAssignmentMetadata {
                assignment_epoch: 7
            })
        );
    }

    #[test]
    fn truncated_and_unknown_values_are_errors() {
        assert!(
            ShareValue::decode(&ShareKey::Metadata, Bytes::from_static(&[0, 0, 0, 0])).is_err()
        );
        assert!(ShareValue::decode(&ShareKey::Metadata, Bytes::from_static(&[0, 1])).is_err());
        // A partition count far past the bytes left.
        let bytes = Bytes::from_static(&[0, 0, 0xff, 0xff, 0xff, 0x7f]);
        assert!(ShareValue::decode(&ShareKey::TargetAssignment("m".into()), bytes).is_err());
    }
}
