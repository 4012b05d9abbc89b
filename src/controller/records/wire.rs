//! The byte encoding of Kafka's flexible message versions, as the KRaft metadata records
//! use it: big-endian integers, 16-byte uuids, compact strings and arrays (unsigned varint
//! length + 1, 0 for null) and a tagged-field section after every struct.
//!
//! `Reader` never trusts a length it reads: every string, array and tagged field is
//! checked against the bytes actually left before anything is allocated.

use uuid::Uuid;

/// A malformed record: what was expected and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WireError(pub String);

fn short(what: &str) -> WireError {
    WireError(format!("record ends inside {what}"))
}

pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], WireError> {
        if n > self.buf.len() {
            return Err(short(what));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], WireError> {
        let bytes = self.take(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub fn i8(&mut self) -> Result<i8, WireError> {
        Ok(i8::from_be_bytes(self.array("an int8")?))
    }

    pub fn bool(&mut self) -> Result<bool, WireError> {
        Ok(self.i8()? != 0)
    }

    pub fn i16(&mut self) -> Result<i16, WireError> {
        Ok(i16::from_be_bytes(self.array("an int16")?))
    }

    pub fn i32(&mut self) -> Result<i32, WireError> {
        Ok(i32::from_be_bytes(self.array("an int32")?))
    }

    pub fn i64(&mut self) -> Result<i64, WireError> {
        Ok(i64::from_be_bytes(self.array("an int64")?))
    }

    pub fn f64(&mut self) -> Result<f64, WireError> {
        Ok(f64::from_be_bytes(self.array("a float64")?))
    }

    pub fn uuid(&mut self) -> Result<Uuid, WireError> {
        Ok(Uuid::from_bytes(self.array("a uuid")?))
    }

    /// An unsigned varint of at most 5 bytes (32 bits).
    pub fn uvarint(&mut self) -> Result<u32, WireError> {
        let mut value = 0u32;
        for i in 0..5 {
            let [b] = self.array::<1>("a varint")?;
            value |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WireError("varint longer than 5 bytes".into()))
    }

    /// A protobuf zigzag varint (record framing).
    pub fn varint(&mut self) -> Result<i32, WireError> {
        let raw = self.uvarint()?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// A protobuf zigzag varlong of at most 10 bytes.
    pub fn varlong(&mut self) -> Result<i64, WireError> {
        let mut raw = 0u64;
        for i in 0..10 {
            let [b] = self.array::<1>("a varlong")?;
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(WireError("varlong longer than 10 bytes".into()))
    }

    /// The length of a compact field: `None` for null.
    fn compact_len(&mut self) -> Result<Option<usize>, WireError> {
        let n = self.uvarint()?;
        Ok(n.checked_sub(1).map(|n| n as usize))
    }

    pub fn nullable_string(&mut self) -> Result<Option<String>, WireError> {
        let Some(len) = self.compact_len()? else {
            return Ok(None);
        };
        let bytes = self.take(len, "a string")?;
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| WireError("string is not UTF-8".into()))
    }

    pub fn string(&mut self) -> Result<String, WireError> {
        self.nullable_string()?
            .ok_or_else(|| WireError("null where a string is required".into()))
    }

    /// A compact array of `item`s, each at least `min_item_bytes` long: the count is
    /// checked against the bytes left before the vector is allocated.
    pub fn nullable_array<T>(
        &mut self,
        min_item_bytes: usize,
        mut item: impl FnMut(&mut Self) -> Result<T, WireError>,
    ) -> Result<Option<Vec<T>>, WireError> {
        let Some(n) = self.compact_len()? else {
            return Ok(None);
        };
        if n.saturating_mul(min_item_bytes.max(1)) > self.remaining() {
            return Err(WireError(format!("array of {n} items exceeds the record")));
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(item(self)?);
        }
        Ok(Some(out))
    }

    pub fn array_of<T>(
        &mut self,
        min_item_bytes: usize,
        item: impl FnMut(&mut Self) -> Result<T, WireError>,
    ) -> Result<Vec<T>, WireError> {
        self.nullable_array(min_item_bytes, item)?
            .ok_or_else(|| WireError("null where an array is required".into()))
    }

    pub fn i32_array(&mut self) -> Result<Vec<i32>, WireError> {
        self.array_of(4, Self::i32)
    }

    pub fn uuid_array(&mut self) -> Result<Vec<Uuid>, WireError> {
        self.array_of(16, Self::uuid)
    }

    /// Reads the tagged-field section, handing each known tag's bytes to `field` (which
    /// returns false for tags it does not know; those are skipped, as Kafka does).
    pub fn tagged_fields(
        &mut self,
        mut field: impl FnMut(u32, &mut Reader<'a>) -> Result<bool, WireError>,
    ) -> Result<(), WireError> {
        let count = self.uvarint()?;
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            let mut body = Reader::new(self.take(size, "a tagged field")?);
            field(tag, &mut body)?;
        }
        Ok(())
    }

    /// Skips a struct's tagged fields.
    pub fn skip_tagged_fields(&mut self) -> Result<(), WireError> {
        self.tagged_fields(|_, _| Ok(false))
    }

    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        self.take(n, "a byte field")
    }

    /// A compact `bytes` field (not null).
    pub fn compact_bytes(&mut self) -> Result<Vec<u8>, WireError> {
        let len = self
            .compact_len()?
            .ok_or_else(|| WireError("null where bytes are required".into()))?;
        Ok(self.take(len, "a bytes field")?.to_vec())
    }
}

/// Appends flexible-version fields to a buffer.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn i8(&mut self, v: i8) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn i16(&mut self, v: i16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn bool(&mut self, v: bool) {
        self.buf.push(v as u8);
    }
    pub fn uuid(&mut self, v: Uuid) {
        self.buf.extend_from_slice(v.as_bytes());
    }

    pub fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    pub fn varint(&mut self, v: i32) {
        self.uvarint(((v << 1) ^ (v >> 31)) as u32);
    }

    pub fn varlong(&mut self, v: i64) {
        let mut raw = ((v << 1) ^ (v >> 63)) as u64;
        while raw >= 0x80 {
            self.buf.push((raw as u8) | 0x80);
            raw >>= 7;
        }
        self.buf.push(raw as u8);
    }

    fn compact_len(&mut self, len: usize) {
        self.uvarint(len as u32 + 1);
    }

    pub fn string(&mut self, s: &str) {
        self.compact_len(s.len());
        self.buf.extend_from_slice(s.as_bytes());
    }

    pub fn compact_bytes(&mut self, b: &[u8]) {
        self.compact_len(b.len());
        self.buf.extend_from_slice(b);
    }

    pub fn nullable_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None => self.uvarint(0),
        }
    }

    pub fn i32_array(&mut self, items: &[i32]) {
        self.compact_len(items.len());
        for &i in items {
            self.i32(i);
        }
    }

    pub fn uuid_array(&mut self, items: &[Uuid]) {
        self.compact_len(items.len());
        for &i in items {
            self.uuid(i);
        }
    }

    /// Writes a tagged-field section from `(tag, encoded bytes)` pairs in ascending tag order.
    pub fn tagged_fields(&mut self, fields: &[(u32, Vec<u8>)]) {
        self.uvarint(fields.len() as u32);
        for (tag, bytes) in fields {
            self.uvarint(*tag);
            self.uvarint(bytes.len() as u32);
            self.buf.extend_from_slice(bytes);
        }
    }

    pub fn no_tagged_fields(&mut self) {
        self.uvarint(0);
    }
}

/// The bytes of one field encoded on its own, for a tagged field's body.
pub fn encoded(write: impl FnOnce(&mut Writer)) -> Vec<u8> {
    let mut w = Writer::default();
    write(&mut w);
    w.buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_their_edges() {
        for v in [0, 1, -1, 63, -64, 64, i32::MAX, i32::MIN] {
            let bytes = encoded(|w| w.varint(v));
            assert_eq!(Reader::new(&bytes).varint().unwrap(), v);
        }
        for v in [0i64, -1, i64::MAX, i64::MIN, 1 << 40] {
            let bytes = encoded(|w| w.varlong(v));
            assert_eq!(Reader::new(&bytes).varlong().unwrap(), v);
        }
        assert_eq!(encoded(|w| w.uvarint(300)), vec![0xac, 0x02]);
    }

    #[test]
    fn lengths_are_checked_before_allocation() {
        // An array claiming 2^31 items in a 6-byte record.
        let bytes = encoded(|w| w.uvarint(1 << 31));
        let err = Reader::new(&bytes).i32_array().unwrap_err();
        assert!(err.0.contains("exceeds"), "{err}");
        let bytes = encoded(|w| w.uvarint(1000));
        assert!(Reader::new(&bytes).string().is_err());
        assert!(Reader::new(&[0xff; 6]).uvarint().is_err());
        assert!(Reader::new(&[0]).string().is_err(), "null string");
    }

    #[test]
    fn unknown_tagged_fields_are_skipped() {
        let bytes = encoded(|w| {
            w.tagged_fields(&[(3, vec![1, 2, 3]), (9, encoded(|w| w.i32(7)))]);
            w.i8(5);
        });
        let mut r = Reader::new(&bytes);
        let mut seen = None;
        r.tagged_fields(|tag, body| {
            if tag == 9 {
                seen = Some(body.i32()?);
                return Ok(true);
            }
            Ok(false)
        })
        .unwrap();
        assert_eq!(seen, Some(7));
        assert_eq!(r.i8().unwrap(), 5);
    }
}
