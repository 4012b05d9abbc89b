//! The field codec of the coordinators' internal-topic records (`__consumer_offsets`,
//! `__transaction_state`): Kafka's generated message schemas, non-flexible or flexible
//! (compact lengths, tagged fields), read with every length checked against what is left
//! before it is used, so a corrupt or hostile record is an error, never an allocation.

use bytes::{Buf, BufMut, Bytes, BytesMut};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SchemaError {
    #[error("record truncated")]
    Truncated,
    #[error("invalid utf-8 in a string")]
    Utf8,
    #[error("unknown {what} version {version}")]
    UnknownVersion { what: &'static str, version: i16 },
    #[error("unknown transaction status {0}")]
    UnknownStatus(i8),
    #[error("record without a key")]
    NoKey,
    #[error("invalid {0}")]
    Invalid(&'static str),
}

/// Reads the fields of one record key or value.
pub struct Reader {
    buf: Bytes,
    flexible: bool,
}

impl Reader {
    pub fn new(buf: Bytes, flexible: bool) -> Self {
        Reader { buf, flexible }
    }

    /// Switches to the flexible encoding (a value whose version is flexible).
    pub fn set_flexible(&mut self, flexible: bool) {
        self.flexible = flexible;
    }

    pub fn is_flexible(&self) -> bool {
        self.flexible
    }

    fn need(&self, n: usize) -> Result<(), SchemaError> {
        match self.buf.remaining() >= n {
            true => Ok(()),
            false => Err(SchemaError::Truncated),
        }
    }

    pub fn i8(&mut self) -> Result<i8, SchemaError> {
        self.need(1)?;
        Ok(self.buf.get_i8())
    }

    pub fn i16(&mut self) -> Result<i16, SchemaError> {
        self.need(2)?;
        Ok(self.buf.get_i16())
    }

    pub fn i32(&mut self) -> Result<i32, SchemaError> {
        self.need(4)?;
        Ok(self.buf.get_i32())
    }

    pub fn i64(&mut self) -> Result<i64, SchemaError> {
        self.need(8)?;
        Ok(self.buf.get_i64())
    }

    pub fn uuid(&mut self) -> Result<uuid::Uuid, SchemaError> {
        self.need(16)?;
        let mut b = [0u8; 16];
        self.buf.copy_to_slice(&mut b);
        Ok(uuid::Uuid::from_bytes(b))
    }

    pub fn uvarint(&mut self) -> Result<u32, SchemaError> {
        let mut value: u32 = 0;
        for shift in (0..35).step_by(7) {
            self.need(1)?;
            let b = self.buf.get_u8();
            value |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(SchemaError::Truncated)
    }

    /// A length: -1 (or compact 0) means null.
    fn len(&mut self, wide: bool) -> Result<Option<usize>, SchemaError> {
        let n: i64 = match (self.flexible, wide) {
            (true, _) => i64::from(self.uvarint()?) - 1,
            (false, true) => i64::from(self.i32()?),
            (false, false) => i64::from(self.i16()?),
        };
        Ok(usize::try_from(n).ok())
    }

    fn nullable_bytes(&mut self, wide: bool) -> Result<Option<Bytes>, SchemaError> {
        match self.len(wide)? {
            None => Ok(None),
            Some(n) => {
                self.need(n)?;
                Ok(Some(self.buf.split_to(n)))
            }
        }
    }

    pub fn nullable_str(&mut self) -> Result<Option<String>, SchemaError> {
        match self.nullable_bytes(false)? {
            None => Ok(None),
            Some(b) => String::from_utf8(b.to_vec())
                .map(Some)
                .map_err(|_| SchemaError::Utf8),
        }
    }

    /// A string; null reads as empty.
    pub fn str(&mut self) -> Result<String, SchemaError> {
        Ok(self.nullable_str()?.unwrap_or_default())
    }

    /// Bytes; null reads as empty.
    pub fn bytes(&mut self) -> Result<Bytes, SchemaError> {
        Ok(self.nullable_bytes(true)?.unwrap_or_default())
    }

    /// An array's element count, None for null. Every element takes a byte at least: a
    /// count beyond what is left is corruption.
    pub fn nullable_array_len(&mut self) -> Result<Option<usize>, SchemaError> {
        let n = self.len(true)?;
        if let Some(n) = n {
            self.need(n)?;
        }
        Ok(n)
    }

    /// An array's element count; null reads as empty.
    pub fn array_len(&mut self) -> Result<usize, SchemaError> {
        Ok(self.nullable_array_len()?.unwrap_or(0))
    }

    /// A tagged-field section: (tag, data) of each (none in non-flexible versions).
    pub fn tagged_fields(&mut self) -> Result<Vec<(u32, Bytes)>, SchemaError> {
        let mut out = Vec::new();
        if !self.flexible {
            return Ok(out);
        }
        let count = self.uvarint()?;
        for _ in 0..count {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.need(size)?;
            out.push((tag, self.buf.split_to(size)));
        }
        Ok(out)
    }

    /// Skips a tagged-field section.
    pub fn skip_tags(&mut self) -> Result<(), SchemaError> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.uvarint()?;
        for _ in 0..count {
            self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.need(size)?;
            self.buf.advance(size);
        }
        Ok(())
    }
}

/// A non-flexible string.
pub fn put_str(buf: &mut BytesMut, s: &str) {
    buf.put_i16(s.len() as i16);
    buf.put_slice(s.as_bytes());
}

/// An unsigned varint (compact lengths, tags, tagged-field sizes).
pub fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}
