use super::*;
use crate::log::compression::CompressionType;
use crate::log::test_util::*;
use kafka_protocol::records::Compression;

const NOW: i64 = 1_700_000_000_000;

const CODECS: [Compression; 5] = [
    Compression::None,
    Compression::Gzip,
    Compression::Snappy,
    Compression::Lz4,
    Compression::Zstd,
];

fn cfg() -> LogConfig {
    LogConfig::default()
}

fn validate(blob: &[u8], config: &LogConfig) -> Result<ValidatedRecords, LogError> {
    validate_with(blob, config).map(|(v, _)| v)
}

fn validate_with(
    blob: &[u8],
    config: &LogConfig,
) -> Result<(ValidatedRecords, bytes::BytesMut), LogError> {
    let tp = crate::log::TopicPartition::new("t", 0);
    let records = bytes::Bytes::copy_from_slice(blob);
    validate_records(records, config, NOW, &tp).map(|v| {
        let written = bytes::BytesMut::from(&v.bytes.to_vec()[..]);
        (v, written)
    })
}

fn invalid_record(result: Result<ValidatedRecords, LogError>) -> String {
    match result {
        Err(e @ LogError::InvalidRecord(_)) => e.to_string(),
        other => panic!("expected INVALID_RECORD, got {other:?}"),
    }
}

/// Re-signs a batch after a test edits it, so only the edited property is wrong.
fn resign(blob: &mut [u8]) {
    let crc = batch::compute_crc(blob);
    blob[17..21].copy_from_slice(&crc.to_be_bytes());
}

fn batch_in(codec: Compression, values: &[&[u8]]) -> Vec<u8> {
    encode(&records(values, NOW, None), codec).to_vec()
}

#[test]
fn accepts_one_batch_in_every_codec() {
    for c in CODECS {
        let blob = batch_in(c, &[b"aaaa", b"bbbb", b"cccc"]);
        let v = validate(&blob, &cfg()).unwrap();
        assert_eq!(v.header.compression_codec(), c as u8);
        assert_eq!(v.records_count, 3);
        assert_eq!(v.log_append_time, -1);
    }
}

#[test]
fn two_batches_are_refused() {
    let mut blob = batch_bytes(&[b"a", b"b"], NOW, None).to_vec();
    blob.extend_from_slice(&batch_bytes(&[b"c"], NOW, Some((5, 0, 0))));
    let err = invalid_record(validate(&blob, &cfg()));
    assert!(
        err.contains("Compressed outer record has more than one batch"),
        "{err}"
    );
}

#[test]
fn produce_request_records_hold_exactly_one_batch() {
    let one = batch_bytes(&[b"a"], NOW, None).to_vec();
    check_produce_records(9, &one).unwrap();
    let mut two = one.clone();
    two.extend_from_slice(&one);
    let err = check_produce_records(9, &two).unwrap_err();
    assert_eq!(err.error_code(), 87);
    assert_eq!(
        err.to_string(),
        "Produce requests with version 9 are only allowed to contain exactly one record batch per partition"
    );
    assert_eq!(check_produce_records(9, &[]).unwrap_err().error_code(), 87);
    let zstd = batch_in(Compression::Zstd, &[b"z"]);
    assert_eq!(
        check_produce_records(6, &zstd).unwrap_err().error_code(),
        76
    );
    check_produce_records(7, &zstd).unwrap();
    let mut old_magic = one.clone();
    old_magic[16] = 1;
    assert_eq!(
        check_produce_records(3, &old_magic)
            .unwrap_err()
            .error_code(),
        87
    );
}

#[test]
fn bad_crc_is_corrupt_message() {
    let mut blob = batch_bytes(&[b"hello"], NOW, None).to_vec();
    let last = blob.len() - 1;
    blob[last] ^= 1;
    assert!(matches!(
        validate(&blob, &cfg()),
        Err(LogError::CorruptMessage(_))
    ));
}

#[test]
fn bad_magic_and_base_offset_are_invalid_records() {
    let mut blob = batch_bytes(&[b"hello"], NOW, None).to_vec();
    blob[16] = 1;
    invalid_record(validate(&blob, &cfg()));
    let mut blob = batch_bytes(&[b"hello"], NOW, None).to_vec();
    batch::set_base_offset(&mut blob, 7);
    let err = invalid_record(validate(&blob, &cfg()));
    assert!(err.contains("should be 0, but it is 7"), "{err}");
}

#[test]
fn every_truncation_is_rejected() {
    let blob = batch_bytes(&[b"hello", b"world"], NOW, None).to_vec();
    for len in 1..blob.len() {
        let err = validate(&blob[..len], &cfg()).unwrap_err();
        assert_eq!(err.error_code(), 2, "len {len}: {err}");
    }
    invalid_record(validate(&[], &cfg()));
}

#[test]
fn too_large_batch() {
    let blob = batch_bytes(&[&[0u8; 200]], NOW, None).to_vec();
    let config = LogConfig {
        max_message_bytes: 100,
        ..cfg()
    };
    match validate(&blob, &config) {
        Err(LogError::MessageTooLarge { size, max }) => assert_eq!((size, max), (blob.len(), 100)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn count_must_match_last_offset_delta() {
    let mut blob = batch_bytes(&[b"a", b"b"], NOW, None).to_vec();
    blob[57..61].copy_from_slice(&3i32.to_be_bytes());
    resign(&mut blob);
    let err = invalid_record(validate(&blob, &cfg()));
    assert!(
        err.contains("Inconsistent batch offset range [0, 1] and count of records 3"),
        "{err}"
    );
    let mut blob = batch_bytes(&[b"a"], NOW, None).to_vec();
    blob[57..61].copy_from_slice(&(-1i32).to_be_bytes());
    resign(&mut blob);
    let err = invalid_record(validate(&blob, &cfg()));
    assert!(
        err.contains("Invalid reported count for record batch: -1"),
        "{err}"
    );
}

/// The batch from the report: a ~100-byte gzip batch whose header claims 2^31-1 records
/// (count and last offset delta agree, the CRC is valid) but holds two.
pub(super) fn forged_count(codec: Compression) -> Vec<u8> {
    let mut blob = batch_in(codec, &[b"a", b"b"]);
    blob[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
    blob[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    resign(&mut blob);
    blob
}

#[test]
fn forged_record_count_is_refused_in_every_codec() {
    for c in CODECS {
        let blob = forged_count(c);
        let err = invalid_record(validate(&blob, &cfg()));
        assert!(
            err.contains("Incorrect declared batch size, premature EOF reached"),
            "{c:?}: {err}"
        );
    }
}

#[test]
fn records_left_over_after_the_count_are_refused() {
    for c in CODECS {
        // Three records, a header claiming two.
        let mut blob = batch_in(c, &[b"a", b"b", b"c"]);
        blob[23..27].copy_from_slice(&1i32.to_be_bytes());
        blob[57..61].copy_from_slice(&2i32.to_be_bytes());
        resign(&mut blob);
        let err = invalid_record(validate(&blob, &cfg()));
        assert!(err.contains("records still remaining"), "{c:?}: {err}");
    }
}

#[test]
fn garbage_under_a_valid_crc_is_refused() {
    for c in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut blob = batch_in(c, &[b"some value", b"another value"]);
        for b in &mut blob[HEADER_SIZE..] {
            *b = b.wrapping_mul(31).wrapping_add(7);
        }
        resign(&mut blob);
        let err = invalid_record(validate(&blob, &cfg()));
        assert!(!err.is_empty(), "{c:?}");
    }
}

#[test]
fn inner_offset_deltas_must_run_in_order() {
    for c in CODECS {
        let mut rs = records(&[b"a", b"b", b"c"], NOW, None);
        // Deltas 0, 2, 2: count and last offset delta still agree.
        rs[1].offset = 2;
        rs[1].sequence = 1;
        let blob = encode(&rs, c);
        let err = invalid_record(validate(&blob, &cfg()));
        assert!(
            err.contains("offset delta 2 where 1 was expected"),
            "{c:?}: {err}"
        );
    }
}

#[test]
fn trailing_bytes_inside_batch_rejected() {
    let mut blob = batch_bytes(&[b"a"], NOW, None).to_vec();
    blob.push(0);
    let len = (blob.len() - 12) as i32;
    blob[8..12].copy_from_slice(&len.to_be_bytes());
    resign(&mut blob);
    invalid_record(validate(&blob, &cfg()));
}

#[test]
fn log_append_time_rewrites_header_with_valid_crc() {
    for c in [Compression::None, Compression::Lz4] {
        let blob = encode(&records(&[b"a", b"b"], 1_000, None), c);
        let config = LogConfig {
            message_timestamp_type: TimestampType::LogAppendTime,
            ..cfg()
        };
        let (v, buf) = validate_with(&blob, &config).unwrap();
        assert_eq!(v.log_append_time, NOW);
        let h = v.header;
        assert_eq!(h.max_timestamp(), NOW);
        assert_eq!(h.timestamp_type(), TimestampType::LogAppendTime);
        batch::verify_crc(&buf).unwrap();
        // An independent decoder agrees that the CRC holds.
        let sets = decode_all(&buf.freeze());
        assert_eq!(sets[0].records.len(), 2);
        assert_eq!(
            sets[0].records[0].timestamp_type,
            kafka_protocol::records::TimestampType::LogAppend
        );
    }
}

#[test]
fn a_wrong_max_timestamp_is_corrected() {
    for c in CODECS {
        let mut rs = records(&[b"a", b"b", b"c"], NOW, None);
        rs[1].timestamp = NOW + 50;
        let mut blob = encode(&rs, c).to_vec();
        blob[35..43].copy_from_slice(&(NOW + 999).to_be_bytes());
        resign(&mut blob);
        let (v, buf) = validate_with(&blob, &cfg()).unwrap();
        assert_eq!(v.header.max_timestamp(), NOW + 50, "{c:?}");
        batch::verify_crc(&buf).unwrap();
    }
}

fn with_timestamps(c: Compression, ts: &[i64]) -> Vec<u8> {
    let values: Vec<&[u8]> = ts.iter().map(|_| &b"v"[..]).collect();
    let mut rs = records(&values, NOW, None);
    for (r, &t) in rs.iter_mut().zip(ts) {
        r.timestamp = t;
    }
    encode(&rs, c).to_vec()
}

#[test]
fn create_time_beyond_after_max_ms_is_invalid_timestamp() {
    let hour = 3_600_000;
    for c in CODECS {
        let blob = with_timestamps(c, &[NOW, NOW + hour + 1, NOW + hour, NOW + 2 * hour]);
        let err = validate(&blob, &cfg()).unwrap_err();
        assert_eq!(err.error_code(), 32, "{c:?}");
        assert_eq!(
            err.to_string(),
            "One or more records have been rejected due to invalid timestamp"
        );
        let errors = err.record_errors();
        assert_eq!(
            errors.iter().map(|e| e.batch_index).collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert_eq!(
            errors[0].message,
            format!(
                "Timestamp {} of message with offset 1 is out of range. The timestamp should be within [{}, {}]",
                NOW + hour + 1,
                NOW.wrapping_sub(i64::MAX),
                NOW + hour
            )
        );
    }
}

#[test]
fn create_time_beyond_before_max_ms_is_invalid_timestamp() {
    let config = LogConfig {
        message_timestamp_before_max_ms: 1_000,
        ..cfg()
    };
    let blob = with_timestamps(Compression::Gzip, &[NOW - 1_000, NOW - 1_001]);
    let err = validate(&blob, &config).unwrap_err();
    assert_eq!(err.record_errors().len(), 1);
    assert_eq!(err.record_errors()[0].batch_index, 1);
    // No timestamp (-1) is never checked; LogAppendTime topics check nothing either.
    validate(&with_timestamps(Compression::None, &[-1]), &config).unwrap();
    let lat = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..config
    };
    validate(&blob, &lat).unwrap();
}

#[test]
fn producers_may_not_send_log_append_time() {
    let mut blob = batch_bytes(&[b"a"], NOW, None).to_vec();
    batch::set_log_append_time(&mut blob, NOW);
    let lat = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..cfg()
    };
    let err = validate(&blob, &lat).unwrap_err();
    assert_eq!(err.error_code(), 32);
    assert!(err.record_errors()[0]
        .message
        .ends_with("Producer should not set timestamp type to LogAppendTime."));
}

#[test]
fn compression_type_recompresses_to_the_topic_codec() {
    let values: Vec<Vec<u8>> = (0..50)
        .map(|i| format!("value {i} ").repeat(20).into_bytes())
        .collect();
    let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    let targets = [
        (CompressionType::Uncompressed, 0u8),
        (CompressionType::Gzip, 1),
        (CompressionType::Snappy, 2),
        (CompressionType::Lz4, 3),
        (CompressionType::Zstd, 4),
    ];
    for source in CODECS {
        let mut rs = records(&values, NOW, Some((9, 1, 40)));
        rs[3].key = Some(bytes::Bytes::from_static(b"key"));
        let blob = encode(&rs, source);
        for (target, id) in targets {
            let config = LogConfig {
                compression_type: target,
                ..cfg()
            };
            let (v, buf) = validate_with(&blob, &config).unwrap();
            let h = v.header;
            assert_eq!(h.compression_codec(), id, "{source:?} -> {target:?}");
            assert_eq!(h.size_in_bytes(), buf.len());
            assert_eq!(
                (h.producer_id(), h.producer_epoch(), h.base_sequence()),
                (9, 1, 40)
            );
            assert_eq!((h.records_count(), h.max_timestamp()), (50, NOW + 49));
            batch::verify_crc(&buf).unwrap();
            let sets = decode_all(&buf.freeze());
            assert_eq!(sets.len(), 1);
            let got = &sets[0].records;
            assert_eq!(got.len(), 50);
            for (g, want) in got.iter().zip(&rs) {
                assert_eq!((g.offset, g.timestamp), (want.offset, want.timestamp));
                assert_eq!((&g.key, &g.value), (&want.key, &want.value));
            }
        }
    }
}

#[test]
fn a_recompressed_batch_over_max_message_bytes_is_refused() {
    let big = vec![b'x'; 50_000];
    let blob = batch_in(Compression::Zstd, &[&big]);
    let config = LogConfig {
        compression_type: CompressionType::Uncompressed,
        max_message_bytes: 10_000,
        ..cfg()
    };
    match validate(&blob, &config) {
        Err(LogError::MessageTooLarge { size, max }) => {
            assert_eq!(max, 10_000);
            assert!(size > 50_000, "{size}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_decompressed_record_over_max_decompressed_message_bytes_is_refused() {
    let config = LogConfig {
        max_decompressed_message_bytes: 100,
        ..cfg()
    };
    let err = invalid_record(validate(
        &batch_in(Compression::Lz4, &[&[1u8; 200]]),
        &config,
    ));
    assert!(
        err.contains("exceeds the configured maximum record size of 100"),
        "{err}"
    );
    // Kafka bounds records only where it decompresses them.
    validate(&batch_in(Compression::None, &[&[1u8; 200]]), &config).unwrap();
}

/// The records of a batch stored as it came are not copied out of the request: what goes
/// to the segment after the patched header is the request's own buffer, though the
/// request (here `frame`) still shares it.
#[test]
fn records_are_written_from_the_request_buffer() {
    let frame = batch_in(Compression::None, &[b"aaaa", b"bbbb"]);
    let frame = bytes::Bytes::from(frame);
    let tp = crate::log::TopicPartition::new("t", 0);
    let v = validate_records(frame.clone(), &cfg(), NOW, &tp).unwrap();
    assert_eq!(v.bytes.tail().as_ptr(), frame[HEADER_SIZE..].as_ptr());
    assert_eq!(v.bytes.len(), frame.len());
    assert_eq!(&v.bytes.to_vec()[HEADER_SIZE..], &frame[HEADER_SIZE..]);
}
