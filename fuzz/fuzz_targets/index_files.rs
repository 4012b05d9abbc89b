//! A segment's `.index` and `.timeindex` as found on disk after a clean shutdown: whatever
//! they hold, opening the log must not panic, and reads must still find the right batches
//! (a bad index is rebuilt, never trusted into a wrong answer).
//!
//! Input: a 2-byte big-endian length, that many bytes of `.index`, the rest `.timeindex`.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use skua::log::{Log, LogConfig, TopicPartition};

const BATCHES: i64 = 40;

fn config() -> LogConfig {
    LogConfig {
        index_interval_bytes: 1,
        max_index_size: 4096,
        ..LogConfig::default()
    }
}

fn tp() -> TopicPartition {
    TopicPartition::new("fuzz", 0)
}

/// The `.log` bytes of a segment of `BATCHES` one-record batches, written once.
fn segment() -> &'static [u8] {
    static SEGMENT: OnceLock<Vec<u8>> = OnceLock::new();
    SEGMENT.get_or_init(|| {
        let dir = scratch("template");
        let log = Log::open(&dir, tp(), config(), 0, 0, true).expect("log opens");
        for i in 0..BATCHES {
            log.append_as_leader(batch(i), 0, 1_700_000_000_000 + i)
                .expect("append");
        }
        log.close().expect("close");
        std::fs::read(dir.join("00000000000000000000.log")).expect("segment")
    })
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("skua-fuzz-index-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// One uncompressed batch of one record, timestamp `1_700_000_000_000 + i`.
fn batch(i: i64) -> bytes::Bytes {
    use kafka_protocol::records::*;
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000 + i,
        key: None,
        value: Some(bytes::Bytes::from(format!("value {i}"))),
        headers: Default::default(),
    };
    let mut buf = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, [record].iter(), &options).expect("encode");
    buf.freeze()
}

fuzz_target!(|data: &[u8]| {
    let segment = segment();
    let split = data.get(..2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]) as usize);
    let rest = data.get(2..).unwrap_or(&[]);
    let (index, time_index) = rest.split_at(split.min(rest.len()));
    let dir = scratch("case");
    std::fs::write(dir.join("00000000000000000000.log"), segment).unwrap();
    std::fs::write(dir.join("00000000000000000000.index"), index).unwrap();
    std::fs::write(dir.join("00000000000000000000.timeindex"), time_index).unwrap();
    let log = Log::open(&dir, tp(), config(), 0, 0, true).expect("a bad index is rebuilt");
    assert_eq!(log.log_end_offset(), BATCHES);
    for offset in 0..BATCHES {
        let data = log.read(offset, 1 << 16, i64::MAX, true).expect("read");
        let base = i64::from_be_bytes(data.records[..8].try_into().unwrap());
        assert_eq!(base, offset, "a read from {offset} starts at the batch holding it");
    }
    let _ = log.fetch_offset_by_timestamp(1_700_000_000_000 + BATCHES / 2);
});
