//! Committed metadata from the quorum replayed into the image: the follower's
//! [`Output::Publish`](super::follower::Output::Publish) batches and
//! [`Output::LoadSnapshot`](super::follower::Output::LoadSnapshot) snapshots, decoded
//! with skua's metadata record codec and applied with [`MetadataImage::replay`]. A
//! metadata transaction (KIP-868) applies only once its EndTransaction is read; an
//! aborted one never does; one still open waits across batches. The offset of the last
//! record applied is what the broker's heartbeat reports as its metadata offset.

use bytes::Bytes;

use crate::controller::image::{Change, MetadataImage};
use crate::controller::records::batch::records_of;
use crate::controller::records::MetadataRecord;
use crate::controller::snapshot::MAX_BATCH_BYTES;
use crate::log::{RecordBatchHeader, HEADER_SIZE};

#[derive(Debug, Default)]
pub struct Publisher {
    /// The records of a metadata transaction not yet ended.
    transaction: Option<Vec<MetadataRecord>>,
    /// The offset of the last record applied; -1 before any.
    last_applied: i64,
}

/// One whole batch at the start of `bytes`, its length checked.
fn next_batch(bytes: &[u8]) -> Result<(RecordBatchHeader, usize), String> {
    let header = RecordBatchHeader::parse(bytes).map_err(|e| e.to_string())?;
    let size = header.size_in_bytes();
    if !(HEADER_SIZE..=MAX_BATCH_BYTES).contains(&size) || size > bytes.len() {
        return Err(format!(
            "metadata batch at offset {} declares {size} bytes of the {} left",
            header.base_offset(),
            bytes.len()
        ));
    }
    Ok((header, size))
}

impl Publisher {
    pub fn new() -> Publisher {
        Publisher {
            transaction: None,
            last_applied: -1,
        }
    }

    /// The offset of the last record applied (-1 before any): the heartbeat's
    /// `current_metadata_offset`.
    pub fn last_applied_offset(&self) -> i64 {
        self.last_applied
    }

    /// Applies committed batches in order; answers what changed. A record the image
    /// refuses is an error: the log is not one Kafka's controllers would write.
    pub fn apply(
        &mut self,
        image: &mut MetadataImage,
        batches: &[Bytes],
    ) -> Result<Vec<Change>, String> {
        let mut changes = Vec::new();
        for batch in batches {
            let (header, records) =
                records_of(batch).map_err(|e| format!("committed metadata batch: {}", e.0))?;
            if !header.is_control() {
                for r in records {
                    let value = r
                        .value
                        .ok_or_else(|| format!("metadata record {} has no value", r.offset))?;
                    let record = MetadataRecord::decode(value)
                        .map_err(|e| format!("metadata record at offset {}: {}", r.offset, e.0))?;
                    self.replay(image, record, &mut changes)
                        .map_err(|e| format!("metadata record at offset {}: {e}", r.offset))?;
                }
            }
            self.last_applied = header.last_offset();
        }
        Ok(changes)
    }

    fn replay(
        &mut self,
        image: &mut MetadataImage,
        record: MetadataRecord,
        changes: &mut Vec<Change>,
    ) -> Result<(), String> {
        match (&mut self.transaction, record) {
            (None, MetadataRecord::BeginTransaction) => self.transaction = Some(Vec::new()),
            (Some(_), MetadataRecord::BeginTransaction) => {
                return Err("BeginTransactionRecord inside a metadata transaction".into())
            }
            (None, MetadataRecord::EndTransaction | MetadataRecord::AbortTransaction) => {
                return Err("a metadata transaction ends that never began".into())
            }
            (Some(_), MetadataRecord::EndTransaction) => {
                for r in self.transaction.take().unwrap_or_default() {
                    changes.push(image.replay(&r)?);
                }
            }
            (Some(_), MetadataRecord::AbortTransaction) => self.transaction = None,
            (Some(pending), record) => pending.push(record),
            (None, record) => changes.push(image.replay(&record)?),
        }
        Ok(())
    }

    /// A whole snapshot ending at `end_offset` (its record batches: header, data,
    /// footer) as a new image; what was applied before is replaced.
    pub fn load_snapshot(
        &mut self,
        end_offset: i64,
        batches: &Bytes,
    ) -> Result<MetadataImage, String> {
        let mut image = MetadataImage::default();
        let mut position = 0;
        while position < batches.len() {
            let (_, size) = next_batch(&batches[position..])?;
            let batch = batches.slice(position..position + size);
            let (header, records) =
                records_of(&batch).map_err(|e| format!("snapshot batch: {}", e.0))?;
            if !header.is_control() {
                for r in records {
                    let value = r
                        .value
                        .ok_or_else(|| format!("snapshot record {} has no value", r.offset))?;
                    let record = MetadataRecord::decode(value)
                        .map_err(|e| format!("snapshot record {}: {}", r.offset, e.0))?;
                    image.replay(&record)?;
                }
            }
            position += size;
        }
        self.transaction = None;
        self.last_applied = end_offset - 1;
        Ok(image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::records::batch::build_batch;
    use crate::controller::records::control;
    use uuid::Uuid;

    const TOPIC_ID: Uuid = Uuid::from_u128(0x5eed);

    fn values(records: &[MetadataRecord]) -> Vec<Vec<u8>> {
        records.iter().map(|r| r.encode(1)).collect()
    }

    fn batch(base: i64, records: &[MetadataRecord]) -> Bytes {
        let values = values(records);
        let items: Vec<(Option<&[u8]>, &[u8])> = values.iter().map(|v| (None, &v[..])).collect();
        Bytes::from(build_batch(base, 1, 0, false, &items))
    }

    fn topic(name: &str) -> MetadataRecord {
        MetadataRecord::Topic {
            name: name.into(),
            topic_id: TOPIC_ID,
        }
    }

    fn feature(level: i16) -> MetadataRecord {
        MetadataRecord::FeatureLevel {
            name: "metadata.version".into(),
            level,
        }
    }

    #[test]
    fn committed_batches_reach_the_image_and_the_applied_offset() {
        let mut p = Publisher::new();
        let mut image = MetadataImage::default();
        assert_eq!(p.last_applied_offset(), -1);
        let key = control::key(control::LEADER_CHANGE);
        let leader_change = control::leader_change(3000, &[3000]);
        let batches = [
            Bytes::from(build_batch(
                0,
                1,
                0,
                true,
                &[(Some(&key[..]), &leader_change)],
            )),
            batch(1, &[feature(21)]),
            batch(2, &[topic("orders")]),
        ];
        let changes = p.apply(&mut image, &batches).unwrap();
        assert_eq!(changes, vec![Change::None, Change::Topic("orders".into())]);
        assert_eq!(image.metadata_version(), Some(21));
        assert_eq!(image.topic("orders").unwrap().topic_id, TOPIC_ID);
        assert_eq!(p.last_applied_offset(), 2);
    }

    #[test]
    fn a_transaction_applies_only_once_it_ends_even_across_batches() {
        let mut p = Publisher::new();
        let mut image = MetadataImage::default();
        p.apply(
            &mut image,
            &[batch(
                0,
                &[MetadataRecord::BeginTransaction, topic("pending")],
            )],
        )
        .unwrap();
        assert!(
            image.topic("pending").is_none(),
            "not applied before its end"
        );
        assert_eq!(p.last_applied_offset(), 1);
        p.apply(&mut image, &[batch(2, &[MetadataRecord::EndTransaction])])
            .unwrap();
        assert!(image.topic("pending").is_some());
        p.apply(
            &mut image,
            &[batch(
                3,
                &[
                    MetadataRecord::BeginTransaction,
                    feature(25),
                    MetadataRecord::AbortTransaction,
                ],
            )],
        )
        .unwrap();
        assert_eq!(
            image.metadata_version(),
            None,
            "an aborted transaction never applies"
        );
        let e = p
            .apply(&mut image, &[batch(6, &[MetadataRecord::EndTransaction])])
            .unwrap_err();
        assert!(e.contains("never began"), "{e}");
    }

    #[test]
    fn a_snapshot_replaces_the_image() {
        let mut p = Publisher::new();
        let mut image = MetadataImage::default();
        p.apply(&mut image, &[batch(0, &[topic("old")])]).unwrap();
        let header = control::key(control::SNAPSHOT_HEADER);
        let footer = control::key(control::SNAPSHOT_FOOTER);
        let snapshot: Vec<u8> = [
            build_batch(0, 4, 0, true, &[(Some(&header[..]), &[0, 0, 0][..])]),
            batch(0, &[feature(21), topic("kept")]).to_vec(),
            build_batch(2, 4, 0, true, &[(Some(&footer[..]), &[0, 0][..])]),
        ]
        .concat();
        let image = p
            .load_snapshot(120, &Bytes::from(snapshot.clone()))
            .unwrap();
        assert!(image.topic("old").is_none());
        assert!(image.topic("kept").is_some());
        assert_eq!(image.metadata_version(), Some(21));
        assert_eq!(p.last_applied_offset(), 119);
        // A snapshot cut short is refused, not half loaded.
        let e = p
            .load_snapshot(120, &Bytes::from(snapshot[..snapshot.len() - 3].to_vec()))
            .unwrap_err();
        assert!(e.contains("declares"), "{e}");
    }
}
