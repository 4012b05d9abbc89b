//! The records inside a batch (Kafka's `DefaultRecord`, magic v2), read from a stream: an
//! uncompressed batch's bytes, or a decompressor bounded by `compression.rs`.
//!
//! ```text
//! length varint (bytes that follow)   attributes i8   timestampDelta varlong
//! offsetDelta varint   keyLen varint (-1: null) + key   valueLen varint (-1: null) + value
//! headerCount varint   per header: keyLen varint + key, valueLen varint (-1: null) + value
//! ```
//!
//! Produce validation, ListOffsets and the readers of stored data all walk records here.
//! Every length a record declares is checked against its own declared length before bytes
//! are skipped or copied, and copies grow with the bytes actually read, so no declared size
//! turns into an allocation. Errors carry Kafka's `InvalidRecordException` messages.

use std::io::{self, BufRead, Read};

use bytes::Bytes;

use super::batch::{RecordBatchHeader, HEADER_SIZE};
use super::compression::{self, Codec};
use super::{LogError, TimestampType};

/// One record of a stored batch, with its absolute offset and timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<Header>,
}

/// A record header: the key is never null, the value may be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

/// The whole, length-sound batches at the start of `buf`, as header and bytes. A read from
/// the log may end inside a batch; iteration stops there, and at the first length that
/// does not fit.
pub fn whole_batches(buf: &[u8]) -> impl Iterator<Item = (RecordBatchHeader, &[u8])> {
    let mut position = 0usize;
    std::iter::from_fn(move || {
        let rest = buf.get(position..)?;
        let header = RecordBatchHeader::parse(rest).ok()?;
        let size = header.check_length(rest.len()).ok()?;
        position += size;
        Some((header, &rest[..size]))
    })
}

/// The records of one whole stored batch (`batch` is the batch's bytes from its header on,
/// as `whole_batches` yields them). Compressed records are decompressed as a stream of at most
/// [`compression::decompressed_bytes_max`] bytes; a batch declaring no records has none.
/// The CRC is not checked: stored batches were checked on append and on recovery.
pub fn records(batch: &[u8]) -> Result<Records<'_>, LogError> {
    Ok(Records {
        walk: RecordWalk::open(batch, None)?,
        failed: false,
    })
}

/// Iterator over the records of a stored batch; the first error ends it.
pub struct Records<'a> {
    walk: RecordWalk<Box<dyn BufRead + 'a>>,
    failed: bool,
}

impl Records<'_> {
    pub fn header(&self) -> &RecordBatchHeader {
        &self.walk.header
    }
}

impl Iterator for Records<'_> {
    type Item = Result<Record, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let result = self.walk.next(Keep::All).transpose()?;
        self.failed = result.is_err();
        Some(result.map(|r| Record {
            offset: r.offset,
            timestamp: r.timestamp,
            key: r.key,
            value: r.value,
            headers: r.headers,
        }))
    }
}

/// How much of each record the walk copies out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Offsets, timestamps and field sizes; keys, values and headers are skipped (`None`).
    Positions,
    /// As `Positions`, and the key (the cleaner's offset map needs nothing else).
    Key,
    All,
}

/// One record as the walk read it.
pub(crate) struct WalkedRecord {
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the walk's tests compare it; validation reads RecordFields"
        )
    )]
    pub offset_delta: i32,
    pub offset: i64,
    pub timestamp: i64,
    /// Key and value sizes, -1 for null (as declared, whether kept or not).
    #[cfg_attr(
        not(test),
        expect(
            dead_code,
            reason = "the walk's tests compare it; validation reads RecordFields"
        )
    )]
    pub key_size: i32,
    pub value_size: i32,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<Header>,
}

/// A record's offsets, timestamp and field sizes, as `WalkedRecord` has them, without
/// anything it owns.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecordFields {
    pub offset_delta: i32,
    pub offset: i64,
    pub timestamp: i64,
    /// -1 for null.
    pub key_size: i32,
    pub value_size: i32,
}

/// Walks the `records_count` records of one batch from `src`, then checks that `src` holds
/// nothing more (Kafka's `RecordIterator`).
pub(crate) struct RecordWalk<R> {
    pub header: RecordBatchHeader,
    src: R,
    read: i32,
    count: i32,
    /// `max.decompressed.message.bytes`: the largest record body read from a decompressor.
    record_bytes_max: Option<usize>,
}

impl<'a> RecordWalk<Box<dyn BufRead + 'a>> {
    /// A walk over a whole batch held in memory, decompressing if it is compressed.
    /// `record_bytes_max` bounds each decompressed record's length.
    pub fn open(batch: &'a [u8], record_bytes_max: Option<usize>) -> Result<Self, LogError> {
        let header = RecordBatchHeader::parse(batch)?;
        let size = header.check_length(batch.len())?;
        let payload = &batch[HEADER_SIZE..size];
        let codec = Codec::from_id(header.compression_codec()).ok_or_else(|| {
            LogError::InvalidRecord(format!(
                "Unknown compression type id: {}",
                header.compression_codec()
            ))
        })?;
        let src =
            compression::decompress(codec, payload, compression::decompressed_bytes_max(size))
                .map_err(decompression_failed)?;
        let bound = (codec != Codec::None).then_some(record_bytes_max).flatten();
        RecordWalk::new(header, src, bound)
    }
}

impl<R: BufRead> RecordWalk<R> {
    pub fn new(
        header: RecordBatchHeader,
        src: R,
        record_bytes_max: Option<usize>,
    ) -> Result<Self, LogError> {
        let count = header.records_count();
        if count < 0 {
            return Err(LogError::InvalidRecord(format!(
                "Found invalid record count {count} in magic v2 batch"
            )));
        }
        Ok(RecordWalk {
            header,
            src,
            read: 0,
            count,
            record_bytes_max,
        })
    }

    /// The next record, or `None` once `records_count` were read.
    pub fn next(&mut self, keep: Keep) -> Result<Option<WalkedRecord>, LogError> {
        if !self.begin_record()? {
            return Ok(None);
        }
        let raw = read_record(&mut self.src, keep, self.record_bytes_max)?;
        let f = self.end_record(raw.fields())?;
        Ok(Some(WalkedRecord {
            offset_delta: f.offset_delta,
            offset: f.offset,
            timestamp: f.timestamp,
            key_size: f.key_size,
            value_size: f.value_size,
            key: raw.key,
            value: raw.value,
            headers: raw.headers,
        }))
    }

    /// `next(Keep::Positions)` for a walk that reads only each record's fields (produce
    /// validation): no record is built or dropped, which costs about as much as a quarter
    /// of the rest of the walk over small records.
    pub fn next_fields(&mut self) -> Result<Option<RecordFields>, LogError> {
        if !self.begin_record()? {
            return Ok(None);
        }
        let buf = self.src.fill_buf().map_err(decompression_failed)?;
        let fields = match record_in_buffer(buf, Keep::Positions, self.record_bytes_max) {
            Some((fields, _, len)) => {
                self.src.consume(len);
                fields
            }
            // Split across refills or malformed: the byte-at-a-time read, which reports.
            None => read_record(&mut self.src, Keep::Positions, self.record_bytes_max)?.fields(),
        };
        self.end_record(fields).map(Some)
    }

    /// Counts the record about to be read; `false` once `records_count` were read. The
    /// record must have bytes.
    fn begin_record(&mut self) -> Result<bool, LogError> {
        if self.read >= self.count {
            return Ok(false);
        }
        self.read += 1;
        let at_end = self
            .src
            .fill_buf()
            .map_err(decompression_failed)?
            .is_empty();
        if at_end {
            return Err(LogError::InvalidRecord(
                "Incorrect declared batch size, premature EOF reached".into(),
            ));
        }
        Ok(true)
    }

    /// Checks a record just read against its batch, and the batch's end after its last.
    fn end_record(&mut self, raw: RawFields) -> Result<RecordFields, LogError> {
        // Compaction may leave gaps, but a record never lies outside its batch's range.
        let last_delta = self.header.last_offset_delta();
        if !(0..=last_delta).contains(&raw.offset_delta) {
            return Err(LogError::InvalidRecord(format!(
                "Inner record offset delta {} is outside the batch's range [0, {last_delta}]",
                raw.offset_delta
            )));
        }
        if self.read == self.count
            && !self
                .src
                .fill_buf()
                .map_err(decompression_failed)?
                .is_empty()
        {
            return Err(LogError::InvalidRecord(
                "Incorrect declared batch size, records still remaining in file".into(),
            ));
        }
        let h = &self.header;
        let timestamp = match h.timestamp_type() {
            TimestampType::LogAppendTime => h.max_timestamp(),
            // Java's long arithmetic wraps; so does the timestamp Kafka reports.
            TimestampType::CreateTime => h.base_timestamp().wrapping_add(raw.timestamp_delta),
        };
        Ok(RecordFields {
            offset_delta: raw.offset_delta,
            offset: h.base_offset().wrapping_add(i64::from(raw.offset_delta)),
            timestamp,
            key_size: raw.key_size,
            value_size: raw.value_size,
        })
    }

    /// The source, for callers that want what is left of it.
    pub fn into_source(self) -> R {
        self.src
    }
}

fn decompression_failed(e: io::Error) -> LogError {
    LogError::InvalidRecord(format!("Failed to decompress record stream: {e}"))
}

/// What a record says of itself apart from its bytes.
#[derive(Clone, Copy)]
struct RawFields {
    timestamp_delta: i64,
    offset_delta: i32,
    key_size: i32,
    value_size: i32,
}

impl RawRecord {
    fn fields(&self) -> RawFields {
        RawFields {
            timestamp_delta: self.timestamp_delta,
            offset_delta: self.offset_delta,
            key_size: self.key_size,
            value_size: self.value_size,
        }
    }
}

struct RawRecord {
    timestamp_delta: i64,
    offset_delta: i32,
    key_size: i32,
    value_size: i32,
    key: Option<Bytes>,
    value: Option<Bytes>,
    headers: Vec<Header>,
}

fn structure() -> LogError {
    LogError::InvalidRecord("Found invalid record structure".into())
}

fn read_record<R: BufRead>(
    src: &mut R,
    keep: Keep,
    record_bytes_max: Option<usize>,
) -> Result<RawRecord, LogError> {
    if keep != Keep::All {
        let buf = src.fill_buf().map_err(decompression_failed)?;
        if let Some((fields, key, len)) = record_in_buffer(buf, keep, record_bytes_max) {
            src.consume(len);
            return Ok(RawRecord {
                timestamp_delta: fields.timestamp_delta,
                offset_delta: fields.offset_delta,
                key_size: fields.key_size,
                value_size: fields.value_size,
                key,
                value: None,
                headers: Vec::new(),
            });
        }
    }
    let size = read_zigzag(src, 5, usize::MAX)?.0;
    let size = i32::try_from(size).map_err(|_| structure())?;
    let size = usize::try_from(size).map_err(|_| {
        LogError::InvalidRecord(format!("Invalid record size: {size} is negative."))
    })?;
    if let Some(max) = record_bytes_max.filter(|&max| size > max) {
        return Err(LogError::InvalidRecord(format!(
            "Invalid record size: {size} exceeds the configured maximum record size of {max}."
        )));
    }
    let mut body = Body {
        src,
        size,
        left: size,
    };
    let _attributes = body.byte()?;
    let timestamp_delta = body.varlong()?;
    let offset_delta = body.varint()?;
    let key_len = body.varint()?;
    let key_keep = match keep {
        Keep::Key => Keep::All,
        other => other,
    };
    let key = body.nullable(key_len, key_keep)?;
    let value_len = body.varint()?;
    let value = body.nullable(value_len, keep)?;
    let header_count = body.varint()?;
    if header_count < 0 {
        return Err(LogError::InvalidRecord(format!(
            "Found invalid number of record headers {header_count}"
        )));
    }
    if header_count as usize > body.left {
        return Err(LogError::InvalidRecord(format!(
            "Found invalid number of record headers. {header_count} is larger than the remaining size of the buffer"
        )));
    }
    let mut headers = Vec::new();
    for _ in 0..header_count {
        let key_len = body.varint()?;
        if key_len < 0 {
            return Err(LogError::InvalidRecord(format!(
                "Invalid negative header key size {key_len}"
            )));
        }
        let header_key = body.nullable(key_len, keep)?;
        let value_len = body.varint()?;
        let header_value = body.nullable(value_len, keep)?;
        if let (Keep::All, Some(key)) = (keep, header_key) {
            headers.push(Header {
                key,
                value: header_value,
            });
        }
    }
    if body.left != 0 {
        return Err(LogError::InvalidRecord(format!(
            "Invalid record size: expected to read {size} bytes in record payload, but instead read {}",
            size - body.left
        )));
    }
    Ok(RawRecord {
        timestamp_delta,
        offset_delta,
        key_size: key_len,
        value_size: value_len,
        key,
        value,
        headers,
    })
}

/// A sound record that lies whole in `buf` (always, for an uncompressed batch in memory),
/// read straight from the slice, and the bytes it took; `None` for anything else, which
/// `read_record`'s byte-at-a-time path then reads again and reports. Produce validation
/// walks every record of every batch, so this is the broker's per-record cost; inlined,
/// so that validation's walk (`Keep::Positions`) compiles without the key's branch.
#[inline(always)]
fn record_in_buffer(
    buf: &[u8],
    keep: Keep,
    record_bytes_max: Option<usize>,
) -> Option<(RawFields, Option<Bytes>, usize)> {
    let mut at = Cursor { buf, pos: 0 };
    let size = usize::try_from(i32::try_from(at.zigzag(5)?).ok()?).ok()?;
    if record_bytes_max.is_some_and(|max| size > max) {
        return None;
    }
    let end = at.pos.checked_add(size)?;
    let mut body = Cursor {
        buf: buf.get(at.pos..end)?,
        pos: 0,
    };
    body.skip(1)?; // attributes
    let timestamp_delta = body.zigzag(10)?;
    let offset_delta = body.varint()?;
    let key_size = body.varint()?;
    let key = match (keep, usize::try_from(key_size)) {
        (Keep::Key, Ok(len)) => Some(Bytes::copy_from_slice(body.take(len)?)),
        _ => {
            body.skip_nullable(key_size)?;
            None
        }
    };
    let value_size = body.varint()?;
    body.skip_nullable(value_size)?;
    let header_count = usize::try_from(body.varint()?).ok()?;
    if header_count > body.buf.len() - body.pos {
        return None;
    }
    for _ in 0..header_count {
        let key_len = body.varint()?;
        if key_len < 0 {
            return None;
        }
        body.skip_nullable(key_len)?;
        let value_len = body.varint()?;
        body.skip_nullable(value_len)?;
    }
    if body.pos != body.buf.len() {
        return None;
    }
    let fields = RawFields {
        timestamp_delta,
        offset_delta,
        key_size,
        value_size,
    };
    Some((fields, key, end))
}

/// Reads from a slice; every method answers `None` where the bytes are not all there or
/// not well formed.
struct Cursor<'b> {
    buf: &'b [u8],
    pos: usize,
}

impl<'b> Cursor<'b> {
    /// A small record's varints take one or two bytes (a 100-byte record's length, value
    /// size and offset deltas from 64 take two): those are read inline, longer ones by
    /// the loop. `max_bytes` is at least 5, so two bytes are always within it.
    #[inline(always)]
    fn zigzag(&mut self, max_bytes: usize) -> Option<i64> {
        let &first = self.buf.get(self.pos)?;
        if first & 0x80 == 0 {
            self.pos += 1;
            return Some(unzigzag(u64::from(first)));
        }
        if let Some(&second) = self.buf.get(self.pos + 1) {
            if second & 0x80 == 0 {
                self.pos += 2;
                return Some(unzigzag(u64::from(first & 0x7f) | (u64::from(second) << 7)));
            }
        }
        self.zigzag_multibyte(max_bytes)
    }

    fn zigzag_multibyte(&mut self, max_bytes: usize) -> Option<i64> {
        let rest = self.buf.get(self.pos..)?;
        let (value, n) = decode_varint(&rest[..rest.len().min(max_bytes)])?;
        self.pos += n;
        Some(unzigzag(value))
    }

    #[inline(always)]
    fn varint(&mut self) -> Option<i32> {
        i32::try_from(self.zigzag(5)?).ok()
    }

    fn take(&mut self, len: usize) -> Option<&'b [u8]> {
        let end = self.pos.checked_add(len)?;
        let taken = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(taken)
    }

    fn skip(&mut self, len: usize) -> Option<()> {
        self.take(len).map(|_| ())
    }

    /// A length-prefixed field's bytes: -1 is null, other negatives are malformed.
    fn skip_nullable(&mut self, len: i32) -> Option<()> {
        match len {
            -1 => Some(()),
            len => self.skip(usize::try_from(len).ok()?),
        }
    }
}

/// The body of one record: every read is charged against the record's declared length.
struct Body<'r, R> {
    src: &'r mut R,
    size: usize,
    left: usize,
}

impl<R: BufRead> Body<'_, R> {
    fn eof(&self) -> LogError {
        LogError::InvalidRecord(format!(
            "Invalid record size: expected {} bytes in record payload, but the record payload reached EOF.",
            self.size
        ))
    }

    fn byte(&mut self) -> Result<u8, LogError> {
        if self.left == 0 {
            return Err(structure());
        }
        let first = self
            .src
            .fill_buf()
            .map_err(decompression_failed)?
            .first()
            .copied();
        let b = first.ok_or_else(|| self.eof())?;
        self.src.consume(1);
        self.left -= 1;
        Ok(b)
    }

    fn varint(&mut self) -> Result<i32, LogError> {
        let v = self.zigzag(5)?;
        i32::try_from(v).map_err(|_| structure())
    }

    fn varlong(&mut self) -> Result<i64, LogError> {
        self.zigzag(10)
    }

    fn zigzag(&mut self, max_bytes: u32) -> Result<i64, LogError> {
        let (v, n) = read_zigzag(self.src, max_bytes, self.left).map_err(|e| match e {
            ZigzagError::Eof => self.eof(),
            ZigzagError::Other(e) => e,
        })?;
        self.left -= n;
        Ok(v)
    }

    /// A length-prefixed field: -1 is null, other negatives are malformed. Its bytes are
    /// copied when `keep` asks for them, else skipped.
    fn nullable(&mut self, len: i32, keep: Keep) -> Result<Option<Bytes>, LogError> {
        if len == -1 {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|_| structure())?;
        if len > self.left {
            return Err(structure());
        }
        self.left -= len;
        if keep == Keep::All {
            // Grows with the bytes read, never to the declared length up front.
            let mut out = Vec::new();
            let n = (&mut *self.src)
                .take(len as u64)
                .read_to_end(&mut out)
                .map_err(decompression_failed)?;
            return match n == len {
                true => Ok(Some(Bytes::from(out))),
                false => Err(self.eof()),
            };
        }
        let mut to_skip = len;
        while to_skip > 0 {
            let available = self.src.fill_buf().map_err(decompression_failed)?.len();
            if available == 0 {
                return Err(self.eof());
            }
            let n = available.min(to_skip);
            self.src.consume(n);
            to_skip -= n;
        }
        Ok(None)
    }
}

enum ZigzagError {
    Eof,
    Other(LogError),
}

impl From<ZigzagError> for LogError {
    fn from(e: ZigzagError) -> Self {
        match e {
            ZigzagError::Eof => LogError::InvalidRecord(
                "Incorrect declared batch size, premature EOF reached".into(),
            ),
            ZigzagError::Other(e) => e,
        }
    }
}

/// A protobuf-style zigzag varint of at most `max_bytes` bytes, reading no more than `left`
/// bytes. Returns the value and the bytes it took.
fn read_zigzag<R: BufRead>(
    src: &mut R,
    max_bytes: u32,
    left: usize,
) -> Result<(i64, usize), ZigzagError> {
    let mut value = 0u64;
    for i in 0..max_bytes as usize {
        if i >= left {
            return Err(ZigzagError::Other(structure()));
        }
        let buf = src
            .fill_buf()
            .map_err(|e| ZigzagError::Other(decompression_failed(e)))?;
        let Some(&b) = buf.first() else {
            return Err(ZigzagError::Eof);
        };
        src.consume(1);
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Ok((unzigzag(value), i + 1));
        }
    }
    Err(ZigzagError::Other(structure()))
}

/// The unsigned varint at the start of `buf` and its length, if it ends within `buf`.
fn decode_varint(buf: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &b) in buf.iter().enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

fn unzigzag(value: u64) -> i64 {
    ((value >> 1) as i64) ^ -((value & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::test_util::*;
    use kafka_protocol::records::Compression;

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// Every record of `payload` (a batch's bytes after its header) as the walk reads
    /// it, through a buffer of `capacity` bytes, up to the first error (as its message).
    /// `keep` `None` walks with `next_fields`, as produce validation does, printed as
    /// `Keep::Positions` prints.
    fn walk(
        header: RecordBatchHeader,
        payload: &[u8],
        capacity: usize,
        keep: Option<Keep>,
    ) -> Vec<String> {
        let src = std::io::BufReader::with_capacity(capacity, payload);
        let mut walk = RecordWalk::new(header, src, None).unwrap();
        let mut out = Vec::new();
        loop {
            let next = match keep {
                Some(keep) => walk.next(keep).map(|r| {
                    r.map(|r| {
                        format!(
                            "{} {} {} {} {:?} {:?} {}",
                            r.offset_delta,
                            r.timestamp,
                            r.key_size,
                            r.value_size,
                            r.key,
                            r.value,
                            r.headers.len()
                        )
                    })
                }),
                None => walk.next_fields().map(|r| {
                    r.map(|r| {
                        format!(
                            "{} {} {} {} None None 0",
                            r.offset_delta, r.timestamp, r.key_size, r.value_size
                        )
                    })
                }),
            };
            match next {
                Ok(Some(line)) => out.push(line),
                Ok(None) => return out,
                Err(e) => {
                    out.push(e.to_string());
                    return out;
                }
            }
        }
    }

    /// Records read from a whole buffer take the slice path; through a 1-byte buffer every
    /// record takes the byte-at-a-time path. Both must read the same records and refuse
    /// the same damage with the same message: every byte of the payload is corrupted in
    /// turn, and the payload is cut at every length.
    #[test]
    fn whole_buffer_and_byte_at_a_time_reads_agree_on_every_corruption() {
        let mut rs = crate::log::test_util::records(&[b"aa", b"", &[b'v'; 200]], 1_000, None);
        rs[0].key = Some(Bytes::from_static(b"k0"));
        rs[1].value = None;
        rs[2].headers.insert(
            kafka_protocol::protocol::StrBytes::from_static_str("h"),
            Some(Bytes::from_static(b"hv")),
        );
        let batch = encode(&rs, Compression::None);
        let header = RecordBatchHeader::parse(&batch).unwrap();
        let payload = batch[HEADER_SIZE..].to_vec();
        // `next_fields` (None) must read and refuse exactly what `next(Positions)` does.
        let fields = walk(header, &payload, 1 << 16, None);
        assert_eq!(
            fields,
            walk(header, &payload, 1 << 16, Some(Keep::Positions))
        );
        for keep in [None, Some(Keep::Positions), Some(Keep::Key)] {
            let sound = walk(header, &payload, 1 << 16, keep);
            assert_eq!(sound.len(), 3, "{sound:?}");
            assert_eq!(sound, walk(header, &payload, 1, keep));
            for at in 0..payload.len() {
                for byte in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                    let mut damaged = payload.clone();
                    damaged[at] = byte;
                    let whole = walk(header, &damaged, 1 << 16, keep);
                    assert_eq!(
                        whole,
                        walk(header, &damaged, 1, keep),
                        "byte {at} set to {byte:#x}"
                    );
                    if keep.is_none() {
                        let positions = Some(Keep::Positions);
                        assert_eq!(whole, walk(header, &damaged, 1 << 16, positions));
                    }
                }
            }
            for len in 0..payload.len() {
                let cut = &payload[..len];
                assert_eq!(
                    walk(header, cut, 1 << 16, keep),
                    walk(header, cut, 1, keep),
                    "cut at {len}"
                );
            }
        }
    }

    #[test]
    fn reads_what_the_crate_encodes_in_every_codec() {
        let mut rs = crate::log::test_util::records(&[b"aa", b"", b"cccc"], 1_000, None);
        rs[0].key = Some(Bytes::from_static(b"k0"));
        rs[1].value = None;
        rs[2].headers.insert(
            kafka_protocol::protocol::StrBytes::from_static_str("h"),
            Some(Bytes::from_static(b"hv")),
        );
        for c in CODECS {
            let batch = encode(&rs, c);
            let got: Vec<Record> = super::records(&batch)
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert_eq!(got.len(), 3, "{c:?}");
            assert_eq!(got[0].key.as_deref(), Some(&b"k0"[..]));
            assert_eq!(got[0].value.as_deref(), Some(&b"aa"[..]));
            assert_eq!(got[1].value, None);
            assert_eq!((got[2].offset, got[2].timestamp), (2, 1_002));
            assert_eq!(got[2].headers[0].key, Bytes::from_static(b"h"));
            assert_eq!(got[2].headers[0].value.as_deref(), Some(&b"hv"[..]));
        }
    }

    #[test]
    fn whole_batches_stop_at_a_partial_batch() {
        let mut buf = batch_bytes(&[b"a"], 1, None).to_vec();
        let first = buf.len();
        buf.extend_from_slice(&batch_bytes(&[b"b", b"c"], 2, None));
        let full = buf.len();
        buf.extend_from_slice(&batch_bytes(&[b"d"], 3, None)[..30]);
        let got: Vec<_> = whole_batches(&buf).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1.len(), first);
        assert_eq!(got[1].1.len(), full - first);
    }

    #[test]
    fn a_count_beyond_the_records_is_premature_eof() {
        let mut batch = batch_bytes(&[b"a", b"b"], 1, None).to_vec();
        batch[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
        let results: Vec<_> = super::records(&batch).unwrap().collect();
        assert_eq!(results.len(), 3);
        assert!(results[..2].iter().all(Result::is_ok));
        let err = results[2].as_ref().unwrap_err().to_string();
        assert!(err.contains("premature EOF"), "{err}");
    }

    #[test]
    fn empty_batches_have_no_records() {
        let mut batch = batch_bytes(&[b"a"], 1, None).to_vec();
        batch[57..61].copy_from_slice(&0i32.to_be_bytes());
        assert_eq!(super::records(&batch).unwrap().count(), 0);
    }
}
