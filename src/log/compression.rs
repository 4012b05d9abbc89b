//! The record-batch codecs (attributes bits 0–2): bounded streaming decompression for every
//! reader of records, and compression as Kafka's broker writes it when `compression.type`
//! asks for another codec.
//!
//! Nothing here trusts a size the data declares. Every decompressor is a stream that the
//! record walk pulls from, so a batch whose records stop early costs only the bytes up to
//! that point, and the total a batch may decompress to is capped by
//! [`decompressed_bytes_max`]: a decompression bomb fails at the cap instead of growing
//! memory or burning CPU. The codecs' own state is bounded too: zstd windows above
//! [`ZSTD_WINDOW_LOG_MAX`] are refused, LZ4 frames use at most 4 MiB blocks, deflate a
//! 32 KiB window, and snappy blocks are checked against snappy's largest possible
//! expansion before any buffer is sized (see `snappy.rs`).

use std::io::{self, BufRead, BufReader, Read, Write};

use super::snappy;

/// A batch's compression codec, by Kafka's ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    None = 0,
    Gzip = 1,
    Snappy = 2,
    Lz4 = 3,
    Zstd = 4,
}

impl Codec {
    pub fn from_id(id: u8) -> Option<Codec> {
        Some(match id {
            0 => Codec::None,
            1 => Codec::Gzip,
            2 => Codec::Snappy,
            3 => Codec::Lz4,
            4 => Codec::Zstd,
            _ => return None,
        })
    }

    pub fn id(self) -> u8 {
        self as u8
    }
}

/// `compression.type` (topic, and the broker default of the same name): the codec batches are
/// stored with. `Producer` keeps whatever the producer used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CompressionType {
    #[default]
    Producer,
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl CompressionType {
    /// Kafka's `BrokerCompressionType` names; `none` is read as `uncompressed`. Anything
    /// else keeps the producer's codec (the config layer refuses unknown names).
    pub fn parse(name: &str) -> CompressionType {
        match name.trim() {
            "uncompressed" | "none" => CompressionType::Uncompressed,
            "gzip" => CompressionType::Gzip,
            "snappy" => CompressionType::Snappy,
            "lz4" => CompressionType::Lz4,
            "zstd" => CompressionType::Zstd,
            _ => CompressionType::Producer,
        }
    }

    /// The codec a batch compressed with `source` is stored with (Kafka's
    /// `BrokerCompressionType.targetCompression`).
    pub fn target(self, source: Codec) -> Codec {
        match self {
            CompressionType::Producer => source,
            CompressionType::Uncompressed => Codec::None,
            CompressionType::Gzip => Codec::Gzip,
            CompressionType::Snappy => Codec::Snappy,
            CompressionType::Lz4 => Codec::Lz4,
            CompressionType::Zstd => Codec::Zstd,
        }
    }
}

/// A batch may decompress to this many times its own size...
pub const DECOMPRESSION_RATIO_MAX: u64 = 128;
/// ...and always to at least this much, so that small batches of very repetitive records
/// (which compress far better than 128:1) are never refused.
pub const DECOMPRESSED_BYTES_FLOOR: u64 = 128 * 1024 * 1024;
/// zstd frames needing a window above 16 MiB are refused: producers' levels 1–19 use at most
/// 8 MiB, and a frame's window is memory the decoder reserves whatever the data holds.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 24;

/// Decompressed bytes go to the record walk through a buffer of this size.
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// The most bytes the records of a batch of `batch_size` bytes may decompress to. The same
/// rule holds on produce and on every read of stored data, so whatever was accepted reads
/// back. See docs/design.md ("Compressed batches are validated on produce") for the choice.
pub fn decompressed_bytes_max(batch_size: usize) -> u64 {
    (batch_size as u64)
        .saturating_mul(DECOMPRESSION_RATIO_MAX)
        .max(DECOMPRESSED_BYTES_FLOOR)
}

/// The records of a batch, decompressed as a stream of at most `limit` bytes; reading past
/// the limit fails. `Codec::None` reads `payload` as it is.
pub fn decompress<'a>(
    codec: Codec,
    payload: &'a [u8],
    limit: u64,
) -> io::Result<Box<dyn BufRead + 'a>> {
    let stream: Box<dyn Read + 'a> = match codec {
        Codec::None => return Ok(Box::new(payload)),
        // Java's GZIPInputStream reads concatenated members too.
        Codec::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(payload)),
        Codec::Snappy => Box::new(snappy::Decoder::new(payload, limit)),
        Codec::Lz4 => Box::new(lz4::Decoder::new(payload)?),
        Codec::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(payload)?;
            decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
            Box::new(decoder)
        }
    };
    Ok(Box::new(BufReader::with_capacity(
        READ_BUFFER_BYTES,
        Bounded {
            inner: stream,
            left: limit,
            limit,
        },
    )))
}

/// A decompressed stream that fails once it has produced more than `limit` bytes.
struct Bounded<R> {
    inner: R,
    left: u64,
    limit: u64,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // One byte past the limit is asked for, so a stream of exactly `limit` bytes passes.
        let want = buf.len().min(
            usize::try_from(self.left)
                .unwrap_or(usize::MAX)
                .saturating_add(1),
        );
        let n = self.inner.read(&mut buf[..want])?;
        match self.left.checked_sub(n as u64) {
            Some(left) => {
                self.left = left;
                Ok(n)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the records decompress to more than {} bytes", self.limit),
            )),
        }
    }
}

/// Compression levels and framing as Kafka's broker writes: gzip at the default level 6,
/// snappy in xerial 32 KiB blocks (snappy-java's `SnappyOutputStream`), LZ4 frames of
/// independent 64 KiB blocks with the fast compressor (Kafka's `Lz4BlockOutputStream` at
/// the default level), zstd level 3.
pub enum Compressor<W: Write> {
    None(W),
    Gzip(flate2::write::GzEncoder<W>),
    Snappy(Box<snappy::Encoder<W>>),
    Lz4(lz4::Encoder<W>),
    Zstd(zstd::stream::write::Encoder<'static, W>),
}

const ZSTD_LEVEL: i32 = 3;

impl<W: Write> Compressor<W> {
    pub fn new(codec: Codec, out: W) -> io::Result<Self> {
        Ok(match codec {
            Codec::None => Compressor::None(out),
            Codec::Gzip => Compressor::Gzip(flate2::write::GzEncoder::new(
                out,
                flate2::Compression::new(6),
            )),
            Codec::Snappy => Compressor::Snappy(Box::new(snappy::Encoder::new(out)?)),
            Codec::Lz4 => Compressor::Lz4(
                lz4::EncoderBuilder::new()
                    .block_size(lz4::BlockSize::Max64KB)
                    .block_mode(lz4::BlockMode::Independent)
                    .checksum(lz4::ContentChecksum::NoChecksum)
                    .build(out)?,
            ),
            Codec::Zstd => Compressor::Zstd(zstd::stream::write::Encoder::new(out, ZSTD_LEVEL)?),
        })
    }

    /// Ends the stream (trailers, end marks) and returns the writer.
    pub fn finish(self) -> io::Result<W> {
        match self {
            Compressor::None(w) => Ok(w),
            Compressor::Gzip(e) => e.finish(),
            Compressor::Snappy(e) => e.finish(),
            Compressor::Lz4(e) => {
                let (w, result) = e.finish();
                result.map(|()| w)
            }
            Compressor::Zstd(e) => e.finish(),
        }
    }
}

impl<W: Write> Write for Compressor<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Compressor::None(w) => w.write(buf),
            Compressor::Gzip(e) => e.write(buf),
            Compressor::Snappy(e) => e.write(buf),
            Compressor::Lz4(e) => e.write(buf),
            Compressor::Zstd(e) => e.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Compressor::None(w) => w.flush(),
            Compressor::Gzip(e) => e.flush(),
            Compressor::Snappy(e) => e.flush(),
            Compressor::Lz4(e) => e.flush(),
            Compressor::Zstd(e) => e.flush(),
        }
    }
}

/// An in-memory sink that stores at most `cap` bytes: a rebuilt batch is bounded by
/// `max.message.bytes` while it is written. Past the cap it keeps counting (so the refusal
/// can say how large the batch would have been) but stores nothing more.
pub struct CappedBuf {
    pub buf: Vec<u8>,
    cap: usize,
    written: usize,
}

impl CappedBuf {
    pub fn new(buf: Vec<u8>, cap: usize) -> Self {
        let written = buf.len();
        CappedBuf { buf, cap, written }
    }

    /// Bytes written in all, stored or not.
    pub fn written(&self) -> usize {
        self.written
    }

    pub fn overflowed(&self) -> bool {
        self.written > self.cap
    }
}

impl Write for CappedBuf {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.written = self.written.saturating_add(data.len());
        if !self.overflowed() {
            self.buf.extend_from_slice(data);
        } else if !self.buf.is_empty() {
            self.buf = Vec::new();
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Codec; 5] = [
        Codec::None,
        Codec::Gzip,
        Codec::Snappy,
        Codec::Lz4,
        Codec::Zstd,
    ];

    fn compress(codec: Codec, data: &[u8]) -> Vec<u8> {
        let mut c = Compressor::new(codec, Vec::new()).unwrap();
        c.write_all(data).unwrap();
        c.finish().unwrap()
    }

    fn read_all(codec: Codec, payload: &[u8], limit: u64) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        decompress(codec, payload, limit)?.read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        for codec in ALL {
            let packed = compress(codec, &data);
            assert_eq!(
                read_all(codec, &packed, 1 << 30).unwrap(),
                data,
                "{codec:?}"
            );
        }
    }

    #[test]
    fn the_limit_is_exact() {
        let data = vec![7u8; 100_000];
        for codec in ALL[1..].iter().copied() {
            let packed = compress(codec, &data);
            assert_eq!(read_all(codec, &packed, 100_000).unwrap().len(), 100_000);
            let err = read_all(codec, &packed, 99_999).unwrap_err();
            assert!(
                err.to_string().contains("more than 99999 bytes"),
                "{codec:?}: {err}"
            );
        }
    }

    #[test]
    fn the_crates_decoders_read_what_we_write() {
        // kafka-protocol's decoders stand in for consumers here.
        use kafka_protocol::compression::{Decompressor, Gzip, Lz4, Snappy, Zstd};
        let data = b"a record payload, repeated; a record payload, repeated".repeat(2000);
        let read = |codec, packed: Vec<u8>| -> Vec<u8> {
            let mut buf = bytes::Bytes::from(packed);
            let take = |b: &mut bytes::Bytes| Ok(b.to_vec());
            match codec {
                Codec::Gzip => Gzip::decompress(&mut buf, take),
                Codec::Snappy => Snappy::decompress(&mut buf, take),
                Codec::Lz4 => Lz4::decompress(&mut buf, take),
                _ => Zstd::decompress(&mut buf, take),
            }
            .unwrap()
        };
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            assert_eq!(read(codec, compress(codec, &data)), data, "{codec:?}");
        }
    }

    #[test]
    fn compression_type_targets() {
        assert_eq!(
            CompressionType::parse("producer").target(Codec::Lz4),
            Codec::Lz4
        );
        assert_eq!(
            CompressionType::parse("uncompressed").target(Codec::Lz4),
            Codec::None
        );
        assert_eq!(
            CompressionType::parse("zstd").target(Codec::None),
            Codec::Zstd
        );
        assert_eq!(decompressed_bytes_max(100), DECOMPRESSED_BYTES_FLOOR);
        assert_eq!(decompressed_bytes_max(10 << 20), 1280 << 20);
    }

    #[test]
    fn capped_buf_stops_storing_past_its_cap() {
        let mut c = CappedBuf::new(Vec::new(), 10);
        c.write_all(b"0123456789").unwrap();
        assert!(!c.overflowed());
        c.write_all(b"x").unwrap();
        assert!(c.overflowed() && c.buf.is_empty());
        assert_eq!(c.written(), 11);
    }
}
