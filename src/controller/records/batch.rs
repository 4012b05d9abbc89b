//! Record batches of the metadata log, as Kafka's raft layer writes them: magic 2, no
//! compression, CreateTime, no producer, null keys for data records, 4-byte keys for
//! control records. Reading accepts only uncompressed batches: Kafka never compresses
//! metadata batches, and a compressed one is refused rather than guessed at.

use crate::log::{RecordBatchHeader, HEADER_SIZE};

use super::wire::{Reader, WireError, Writer};

const ATTRIBUTE_CONTROL: i16 = 1 << 5;
const COMPRESSION_MASK: i16 = 0x07;

/// One record of a batch, borrowed from the batch bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct BatchRecord<'a> {
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
}

/// Builds one batch at `base_offset` stamped with `leader_epoch`: each item is a record's
/// (key, value).
pub fn build_batch(
    base_offset: i64,
    leader_epoch: i32,
    timestamp_ms: i64,
    control: bool,
    records: &[(Option<&[u8]>, &[u8])],
) -> Vec<u8> {
    let mut body = Writer::default();
    for (i, (key, value)) in records.iter().enumerate() {
        let mut r = Writer::default();
        r.i8(0); // attributes
        r.varlong(0); // timestamp delta
        r.varint(i as i32); // offset delta
        match key {
            Some(k) => {
                r.varint(k.len() as i32);
                r.buf.extend_from_slice(k);
            }
            None => r.varint(-1),
        }
        r.varint(value.len() as i32);
        r.buf.extend_from_slice(value);
        r.varint(0); // headers
        body.varint(r.buf.len() as i32);
        body.buf.extend_from_slice(&r.buf);
    }
    let count = records.len() as i32;
    let mut b = Writer::default();
    b.i64(base_offset);
    b.i32((HEADER_SIZE - 12 + body.buf.len()) as i32);
    b.i32(leader_epoch);
    b.i8(2); // magic
    b.i32(0); // crc, filled in below
    b.i16(if control { ATTRIBUTE_CONTROL } else { 0 });
    b.i32(count - 1); // last offset delta
    b.i64(timestamp_ms);
    b.i64(timestamp_ms);
    b.i64(-1); // producer id
    b.i16(-1); // producer epoch
    b.i32(-1); // base sequence
    b.i32(count);
    b.buf.extend_from_slice(&body.buf);
    let crc = crc32c::crc32c(&b.buf[21..]);
    b.buf[17..21].copy_from_slice(&crc.to_be_bytes());
    b.buf
}

/// The records of one whole batch (`batch` is exactly the batch's bytes). Lengths are
/// checked against the batch; the CRC too.
pub fn records_of(batch: &[u8]) -> Result<(RecordBatchHeader, Vec<BatchRecord<'_>>), WireError> {
    let header = RecordBatchHeader::parse(batch).map_err(|e| WireError(e.to_string()))?;
    if header.size_in_bytes() != batch.len() || batch.len() < HEADER_SIZE {
        return Err(WireError("batch length does not match its bytes".into()));
    }
    if header.magic() != 2 {
        return Err(WireError(format!(
            "batch magic {} is not 2",
            header.magic()
        )));
    }
    if crc32c::crc32c(&batch[21..]) != header.crc() {
        return Err(WireError(format!(
            "batch at offset {} fails its CRC",
            header.base_offset()
        )));
    }
    if header.attributes() & COMPRESSION_MASK != 0 {
        return Err(WireError(format!(
            "batch at offset {} is compressed; metadata batches never are",
            header.base_offset()
        )));
    }
    let mut r = Reader::new(&batch[HEADER_SIZE..]);
    let count = header.records_count().max(0) as usize;
    // A record takes at least 7 bytes, so the count is checked before allocating.
    if count.saturating_mul(7) > r.remaining() {
        return Err(WireError("record count exceeds the batch".into()));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let len =
            usize::try_from(r.varint()?).map_err(|_| WireError("negative record length".into()))?;
        let mut rec = Reader::new(r.bytes(len)?);
        rec.i8()?; // attributes
        rec.varlong()?; // timestamp delta
        let offset_delta = rec.varint()?;
        let key = nullable_bytes(&mut rec)?;
        let value = nullable_bytes(&mut rec)?;
        out.push(BatchRecord {
            offset: header.base_offset() + i64::from(offset_delta),
            key,
            value,
        });
    }
    Ok((header, out))
}

fn nullable_bytes<'a>(r: &mut Reader<'a>) -> Result<Option<&'a [u8]>, WireError> {
    let len = r.varint()?;
    if len < 0 {
        return Ok(None);
    }
    Ok(Some(r.bytes(len as usize)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_batches_read_back() {
        let batch = build_batch(
            40,
            3,
            1_700_000_000_000,
            false,
            &[(None, b"one"), (None, b"two")],
        );
        let (header, records) = records_of(&batch).unwrap();
        assert_eq!(header.base_offset(), 40);
        assert_eq!(header.partition_leader_epoch(), 3);
        assert_eq!(header.last_offset(), 41);
        assert!(!header.is_control());
        assert_eq!(records[1].offset, 41);
        assert_eq!(records[1].value, Some(&b"two"[..]));
        assert_eq!(records[0].key, None);

        let control = build_batch(42, 3, 0, true, &[(Some(&[0, 0, 0, 2]), b"x")]);
        let (header, records) = records_of(&control).unwrap();
        assert!(header.is_control());
        assert_eq!(records[0].key, Some(&[0u8, 0, 0, 2][..]));
    }

    #[test]
    fn damaged_batches_are_refused() {
        let mut batch = build_batch(0, 0, 0, false, &[(None, b"value")]);
        let last = batch.len() - 2;
        batch[last] ^= 1;
        assert!(records_of(&batch).unwrap_err().0.contains("CRC"));
        let mut forged = build_batch(0, 0, 0, false, &[(None, b"v")]);
        forged[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&forged[21..]);
        forged[17..21].copy_from_slice(&crc.to_be_bytes());
        assert!(records_of(&forged).is_err());
    }
}
