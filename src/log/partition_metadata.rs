//! `partition.metadata`: the topic id of a partition directory, plus Kafka's Uuid text form.

use std::path::Path;

use uuid::Uuid;

use super::checkpoint::{read_bounded, write_atomic, write_new};
use super::LogError;

pub const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// Kafka's `PartitionMetadataFile`: exactly `version: 0\ntopic_id: <id>` with no trailing
/// newline, where `<id>` is the 22-character base64url Uuid. Readers split each line on
/// `:` plus whitespace; the topic id may not be all zeros. Written via tmp + fsync + rename.
pub fn write_partition_metadata(dir: &Path, topic_id: Uuid) -> Result<(), LogError> {
    let text = format!("version: 0\ntopic_id: {}", uuid_to_kafka_string(topic_id));
    write_atomic(&dir.join(PARTITION_METADATA_FILE), text.as_bytes())
}

/// As [`write_partition_metadata`], for the directory of a log just made: written
/// straight to its name (created exclusively) and not synced; the log's first flush
/// makes it durable (see `Log::sync_creation`). A crash before that may leave it absent,
/// empty or torn: startup then loads the log without a topic id, and the metadata, which
/// names the partition durably, writes the file again (`LogManager::get_or_create_log`).
pub fn write_new_partition_metadata(dir: &Path, topic_id: Uuid) -> Result<(), LogError> {
    let text = format!("version: 0\ntopic_id: {}", uuid_to_kafka_string(topic_id));
    write_new(&dir.join(PARTITION_METADATA_FILE), text.as_bytes())
}

/// The topic id stored in `dir`, or `None` if the file is absent.
pub fn read_partition_metadata(dir: &Path) -> Result<Option<Uuid>, LogError> {
    let path = dir.join(PARTITION_METADATA_FILE);
    let Some(bytes) = read_bounded(&path, 4096)? else {
        return Ok(None);
    };
    let text = String::from_utf8(bytes).map_err(|_| LogError::corrupt_file(&path, "not UTF-8"))?;
    let mut version = None;
    let mut topic_id = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            return Err(LogError::corrupt_file(
                &path,
                format!("malformed line {line:?}"),
            ));
        };
        match key.trim() {
            "version" => version = value.trim().parse::<i32>().ok(),
            "topic_id" => topic_id = kafka_string_to_uuid(value.trim()),
            _ => {
                return Err(LogError::corrupt_file(
                    &path,
                    format!("unknown key {key:?}"),
                ))
            }
        }
    }
    match (version, topic_id) {
        (Some(v), Some(id)) if v >= 0 && !id.is_nil() => Ok(Some(id)),
        _ => Err(LogError::corrupt_file(
            &path,
            "missing or invalid version/topic_id",
        )),
    }
}

const BASE64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Kafka's `Uuid.toString()`: the 16 bytes in base64url without padding (22 characters).
pub fn uuid_to_kafka_string(id: Uuid) -> String {
    let bytes = id.as_bytes();
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | u32::from(b) << (16 - 8 * i));
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(BASE64URL[((n >> (18 - 6 * i)) & 0x3f) as usize] as char);
        }
    }
    out
}

/// Parses Kafka's 22-character Uuid text; `None` unless it decodes to exactly 16 bytes.
pub fn kafka_string_to_uuid(text: &str) -> Option<Uuid> {
    if text.len() != 22 {
        return None;
    }
    let mut bits = 0u32;
    let mut nbits = 0;
    let mut out = Vec::with_capacity(16);
    for c in text.bytes() {
        let v = BASE64URL.iter().position(|&b| b == c)? as u32;
        bits = (bits << 6) | v;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((bits >> nbits) as u8);
            bits &= (1 << nbits) - 1;
        }
    }
    // 22 chars = 132 bits: 16 bytes plus 4 bits that must be zero in a canonical encoding.
    if bits != 0 {
        return None;
    }
    Uuid::from_slice(&out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_uuid_text() {
        // Kafka's Uuid.METADATA_TOPIC_ID is new Uuid(0, 1) → "AAAAAAAAAAAAAAAAAAAAAQ".
        let id = Uuid::from_u64_pair(0, 1);
        assert_eq!(uuid_to_kafka_string(id), "AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(kafka_string_to_uuid("AAAAAAAAAAAAAAAAAAAAAQ"), Some(id));
        let all = Uuid::from_bytes([0xff; 16]);
        assert_eq!(uuid_to_kafka_string(all), "_____________________w");
        for _ in 0..100 {
            let id = Uuid::new_v4();
            let s = uuid_to_kafka_string(id);
            assert_eq!(s.len(), 22);
            assert_eq!(kafka_string_to_uuid(&s), Some(id));
        }
        assert_eq!(kafka_string_to_uuid("short"), None);
        assert_eq!(kafka_string_to_uuid("AAAAAAAAAAAAAAAAAAAAA="), None);
        assert_eq!(kafka_string_to_uuid("AAAAAAAAAAAAAAAAAAAAAB"), None);
    }

    #[test]
    fn partition_metadata_exact_bytes() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_partition_metadata(dir.path()).unwrap(), None);
        let id = Uuid::from_u64_pair(0, 1);
        write_partition_metadata(dir.path(), id).unwrap();
        let text = std::fs::read_to_string(dir.path().join(PARTITION_METADATA_FILE)).unwrap();
        assert_eq!(text, "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ");
        assert_eq!(read_partition_metadata(dir.path()).unwrap(), Some(id));
        std::fs::write(
            dir.path().join(PARTITION_METADATA_FILE),
            "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",
        )
        .unwrap();
        assert!(read_partition_metadata(dir.path()).is_err());
        std::fs::write(dir.path().join(PARTITION_METADATA_FILE), "garbage").unwrap();
        assert!(read_partition_metadata(dir.path()).is_err());
    }
}
