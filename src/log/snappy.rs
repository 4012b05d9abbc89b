//! Snappy as Kafka uses it: snappy-java's xerial framing (a 16-byte header, then blocks of a
//! big-endian u32 length and one raw snappy block), or, as librdkafka writes and
//! snappy-java's `SnappyInputStream` accepts, one raw snappy block without a header.
//!
//! A raw block starts with its uncompressed length. That length is a claim, not a fact: it
//! is checked against snappy's largest possible expansion and against what the batch may
//! still decompress to before a buffer is sized, and blocks are decoded one at a time.

use std::io::{self, Read, Write};

/// snappy-java's header: magic, then version 1 and minimum compatible version 1.
const XERIAL_HEADER: &[u8; 16] = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01";
const XERIAL_MAGIC_LEN: usize = 8;
/// snappy-java's `SnappyOutputStream` block size.
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;
/// The most a snappy element expands: a 3-byte copy writes at most 64 bytes.
const EXPANSION_MAX: usize = 22;

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// Decodes xerial-framed or raw snappy, one block at a time, producing at most `limit`
/// bytes in all.
pub struct Decoder<'a> {
    /// Compressed bytes not yet decoded.
    input: &'a [u8],
    xerial: bool,
    block: Vec<u8>,
    pos: usize,
    left: u64,
    limit: u64,
}

impl<'a> Decoder<'a> {
    pub fn new(payload: &'a [u8], limit: u64) -> Self {
        let xerial = payload.len() >= XERIAL_HEADER.len()
            && payload[..XERIAL_MAGIC_LEN] == XERIAL_HEADER[..XERIAL_MAGIC_LEN];
        Decoder {
            input: if xerial {
                &payload[XERIAL_HEADER.len()..]
            } else {
                payload
            },
            xerial,
            block: Vec::new(),
            pos: 0,
            left: limit,
            limit,
        }
    }

    /// The next compressed block, or `None` at the end of the input.
    fn next_compressed(&mut self) -> io::Result<Option<&'a [u8]>> {
        if self.input.is_empty() {
            return Ok(None);
        }
        if !self.xerial {
            return Ok(Some(std::mem::take(&mut self.input)));
        }
        let Some((len, rest)) = self.input.split_first_chunk::<4>() else {
            return Err(invalid(format!(
                "{} bytes where a snappy block length was expected",
                self.input.len()
            )));
        };
        let len = u32::from_be_bytes(*len) as usize;
        if len > rest.len() {
            return Err(invalid(format!(
                "snappy block of {len} bytes with {} left",
                rest.len()
            )));
        }
        let (block, rest) = rest.split_at(len);
        self.input = rest;
        Ok(Some(block))
    }

    /// Decodes the next block into `self.block`; false at the end of the input.
    fn decode_next(&mut self) -> io::Result<bool> {
        let Some(compressed) = self.next_compressed()? else {
            return Ok(false);
        };
        let declared = snap::raw::decompress_len(compressed).map_err(|e| invalid(e.to_string()))?;
        if declared > compressed.len().saturating_mul(EXPANSION_MAX) {
            return Err(invalid(format!(
                "a snappy block of {} bytes cannot hold the {declared} bytes it declares",
                compressed.len()
            )));
        }
        if declared as u64 > self.left {
            return Err(invalid(format!(
                "the records decompress to more than {} bytes",
                self.limit
            )));
        }
        self.left -= declared as u64;
        self.block.resize(declared, 0);
        snap::raw::Decoder::new()
            .decompress(compressed, &mut self.block)
            .map_err(|e| invalid(e.to_string()))?;
        self.pos = 0;
        Ok(true)
    }
}

impl Read for Decoder<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.pos == self.block.len() {
            if !self.decode_next()? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.block.len() - self.pos);
        buf[..n].copy_from_slice(&self.block[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Writes xerial-framed snappy in 32 KiB blocks, as snappy-java's `SnappyOutputStream`.
pub struct Encoder<W: Write> {
    out: W,
    pending: Vec<u8>,
    encoder: snap::raw::Encoder,
    compressed: Vec<u8>,
}

impl<W: Write> Encoder<W> {
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(XERIAL_HEADER)?;
        Ok(Encoder {
            out,
            pending: Vec::with_capacity(XERIAL_BLOCK_BYTES),
            encoder: snap::raw::Encoder::new(),
            compressed: vec![0; snap::raw::max_compress_len(XERIAL_BLOCK_BYTES)],
        })
    }

    fn write_block(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let n = self
            .encoder
            .compress(&self.pending, &mut self.compressed)
            .map_err(|e| invalid(e.to_string()))?;
        self.out.write_all(&(n as u32).to_be_bytes())?;
        self.out.write_all(&self.compressed[..n])?;
        self.pending.clear();
        Ok(())
    }

    pub fn finish(mut self) -> io::Result<W> {
        self.write_block()?;
        Ok(self.out)
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(XERIAL_BLOCK_BYTES - self.pending.len());
        self.pending.extend_from_slice(&buf[..n]);
        if self.pending.len() == XERIAL_BLOCK_BYTES {
            self.write_block()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(payload: &[u8], limit: u64) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        Decoder::new(payload, limit).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn raw_and_xerial_round_trip() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i / 7) as u8).collect();
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(read_all(&raw, 1 << 20).unwrap(), data);
        let mut e = Encoder::new(Vec::new()).unwrap();
        e.write_all(&data).unwrap();
        let framed = e.finish().unwrap();
        assert_eq!(&framed[..16], XERIAL_HEADER);
        assert_eq!(read_all(&framed, 1 << 20).unwrap(), data);
    }

    #[test]
    fn a_declared_length_is_not_trusted() {
        // A raw block declaring 4 GiB - 1 in five bytes: refused before any buffer is sized.
        let bomb = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
        let err = read_all(&bomb, u64::MAX).unwrap_err();
        assert!(err.to_string().contains("cannot hold"), "{err}");
        // The same inside xerial framing.
        let mut framed = XERIAL_HEADER.to_vec();
        framed.extend_from_slice(&(bomb.len() as u32).to_be_bytes());
        framed.extend_from_slice(&bomb);
        assert!(read_all(&framed, u64::MAX).is_err());
    }

    #[test]
    fn the_limit_holds_across_blocks() {
        let data = vec![0u8; 200_000];
        let mut e = Encoder::new(Vec::new()).unwrap();
        e.write_all(&data).unwrap();
        let framed = e.finish().unwrap();
        assert_eq!(read_all(&framed, 200_000).unwrap().len(), 200_000);
        assert!(read_all(&framed, 199_999).is_err());
    }

    #[test]
    fn truncated_framing_is_an_error() {
        let mut e = Encoder::new(Vec::new()).unwrap();
        e.write_all(&[1u8; 1000]).unwrap();
        let framed = e.finish().unwrap();
        for len in 17..framed.len() {
            assert!(read_all(&framed[..len], 1 << 20).is_err(), "len {len}");
        }
    }
}
