//! Short mutation runs of the decoders of files skua reads back from its own data dirs:
//! producer snapshots, offset checkpoints, leader-epoch checkpoints and index files.
//! The same inputs as the cargo-fuzz targets in `fuzz/` (`producer_snapshot`,
//! `offset_checkpoint`, `leader_epoch_checkpoint`, `index_files`), seeded with files skua
//! itself wrote, for a bounded time (`SKUA_FUZZ_SECS`, default 1 s each; `SKUA_FUZZ_SEED`).
//!
//! A damaged file must give an error or a rebuilt index, never a panic or an allocation
//! beyond its size; a fetch from any offset must still start at the batch holding it.

use std::path::Path;
use std::time::Instant;

use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::fuzzing;
use fuzzing::{budget, Rng};

use skua::log::{
    parse_leader_epoch_checkpoint, parse_offset_checkpoint, parse_producer_snapshot, Log,
    LogConfig, TopicPartition,
};

/// Bit flips, byte changes, cuts, huge or negative 32-bit fields, duplicated runs, and
/// text-level damage (digits, signs, newlines) for the checkpoint formats.
fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = out.len();
        let at = rng.below(len);
        match rng.below(8) {
            0 if len > 0 => out[at] ^= 1 << rng.below(8),
            1 if len > 0 => out[at] = rng.next() as u8,
            2 => out.truncate(at),
            3 if at + 4 <= len => {
                let v = [-1i32, 0, i32::MAX, i32::MIN, 1 << 24][rng.below(5)];
                out[at..at + 4].copy_from_slice(&v.to_be_bytes());
            }
            4 => {
                let text: &[u8] = [
                    &b"\n"[..],
                    b"-",
                    b"9999999999999999999999",
                    b"2147483647",
                    b" ",
                    b"0\n",
                ][rng.below(6)];
                out.splice(at..at, text.iter().copied());
            }
            _ => {
                let end = (at + 1 + rng.below(64)).min(len);
                let chunk = out[at.min(end)..end].to_vec();
                out.splice(at..at, chunk);
            }
        }
    }
    out
}

/// Runs `check` on mutations of `seed` until the time budget is spent.
fn run(name: &str, seed: &[u8], mut check: impl FnMut(&[u8])) {
    let mut rng = Rng::from_env(0x0057_04ed);
    let deadline = Instant::now() + budget(1.0);
    check(seed);
    let mut n = 0;
    while Instant::now() < deadline {
        let input = mutate(&mut rng, seed);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&input)));
        if outcome.is_err() {
            panic!("{name} panicked on {:02x?}", input);
        }
        n += 1;
    }
    eprintln!("{name}: {n} mutated inputs");
}

fn config() -> LogConfig {
    LogConfig {
        index_interval_bytes: 1,
        max_index_size: 4096,
        // These batches carry real timestamps, but keep every producer regardless.
        producer_id_expiration_ms: i64::MAX,
        ..LogConfig::default()
    }
}

fn tp() -> TopicPartition {
    TopicPartition::new("fuzz", 0)
}

const BATCHES: i64 = 30;

/// Batch `i` of a log: one record with timestamp `1_700_000_000_000 + i`, from producer
/// `i % 3` with sequence `i / 3`.
fn batch(i: i64) -> bytes::Bytes {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: i % 3,
        producer_epoch: 0,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: (i / 3) as i32,
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
    RecordBatchEncoder::encode(&mut buf, [record].iter(), &options).unwrap();
    buf.freeze()
}

/// A closed log of `BATCHES` one-record idempotent batches from three producers.
fn written_log(dir: &Path) {
    let log = Log::open(dir, tp(), config(), 0, 0, true).unwrap();
    for i in 0..BATCHES {
        log.append_as_leader(batch(i), 2, 1_700_000_000_000 + i)
            .unwrap();
    }
    log.close().unwrap();
}

#[test]
fn producer_snapshots_survive_mutations() {
    let dir = tempfile::tempdir().unwrap();
    written_log(dir.path());
    let snapshot = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "snapshot"))
        .expect("close writes a snapshot");
    let seed = std::fs::read(snapshot).unwrap();
    assert_eq!(parse_producer_snapshot(&seed).unwrap(), 3);
    run("producer snapshot", &seed, |input| {
        if let Ok(n) = parse_producer_snapshot(input) {
            assert_eq!(input.len(), 10 + 46 * n, "entries match the length");
        }
    });
}

#[test]
fn offset_checkpoints_survive_mutations() {
    let seed = b"0\n3\norders 0 42\na-b 3 7\n__consumer_offsets 12 900\n";
    assert_eq!(parse_offset_checkpoint(seed).unwrap().len(), 3);
    run("offset checkpoint", seed, |input| {
        if let Ok(entries) = parse_offset_checkpoint(input) {
            let lines = input.iter().filter(|&&b| b == b'\n').count() + 1;
            assert!(entries.len() <= lines);
        }
    });
}

#[test]
fn leader_epoch_checkpoints_survive_mutations() {
    let dir = tempfile::tempdir().unwrap();
    written_log(dir.path());
    let seed = std::fs::read(dir.path().join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(parse_leader_epoch_checkpoint(&seed).unwrap().len(), 1);
    run("leader epoch checkpoint", &seed, |input| {
        if let Ok(entries) = parse_leader_epoch_checkpoint(input) {
            let lines = input.iter().filter(|&&b| b == b'\n').count() + 1;
            assert!(entries.len() <= lines);
        }
    });
}

#[test]
fn damaged_index_files_are_rebuilt_not_trusted() {
    let template = tempfile::tempdir().unwrap();
    written_log(template.path());
    let read = |name: &str| std::fs::read(template.path().join(name)).unwrap();
    let segment = read("00000000000000000000.log");
    let index = read("00000000000000000000.index");
    let time_index = read("00000000000000000000.timeindex");
    // Seed: the two indexes skua wrote, joined as the fuzz target reads its input.
    let mut seed = (index.len() as u16).to_be_bytes().to_vec();
    seed.extend_from_slice(&index);
    seed.extend_from_slice(&time_index);
    let case = tempfile::tempdir().unwrap();
    run("index files", &seed, |input| {
        let split = input
            .get(..2)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]) as usize);
        let rest = input.get(2..).unwrap_or(&[]);
        let (index, time_index) = rest.split_at(split.min(rest.len()));
        let dir = case.path();
        for entry in std::fs::read_dir(dir).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        std::fs::write(dir.join("00000000000000000000.log"), &segment).unwrap();
        std::fs::write(dir.join("00000000000000000000.index"), index).unwrap();
        std::fs::write(dir.join("00000000000000000000.timeindex"), time_index).unwrap();
        let log = Log::open(dir, tp(), config(), 0, 0, true).expect("a bad index is rebuilt");
        assert_eq!(log.log_end_offset(), BATCHES);
        for offset in 0..BATCHES {
            let data = log.read(offset, 1 << 16, i64::MAX, true).unwrap();
            let base = i64::from_be_bytes(data.records[..8].try_into().unwrap());
            assert_eq!(base, offset, "a read from {offset} starts at its batch");
        }
        // By-timestamp lookups trust the time index as Kafka does: no panic is the bar.
        let _ = log.fetch_offset_by_timestamp(1_700_000_000_000 + 10);
    });
}
