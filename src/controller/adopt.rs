//! What a new metadata log starts with when skua opens dirs that hold data but no metadata
//! log: the topics of an older skua's `skua-metadata.json`, or those of a ZooKeeper-mode
//! Kafka broker's dirs, read from the partition directories themselves (names, topic ids
//! in `partition.metadata`, leader epochs, producer ids in producer-state snapshots).
//! Kafka's KRaft dirs need none of this: their metadata log is read as it is. A dir
//! formatted by Kafka's `kafka-storage.sh format` but never started holds
//! `bootstrap.checkpoint`, whose SCRAM credentials (`--add-scram`) the new log takes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use uuid::Uuid;

use crate::log::{
    read_bounded, read_leader_epoch_checkpoint, read_partition_metadata, TopicPartition,
    LEADER_EPOCH_CHECKPOINT, METADATA_LOG_DIR,
};

use super::local::bootstrap_records;
use super::records::{MetadataRecord, PartitionRecord, CONFIG_RESOURCE_TOPIC};

/// The metadata file of skua before the metadata log.
pub const SKUA_METADATA_FILE: &str = "skua-metadata.json";
const MAX_SKUA_METADATA_BYTES: u64 = 256 * 1024 * 1024;
/// Producer-state snapshots larger than this are not scanned for producer ids.
const MAX_PRODUCER_SNAPSHOT_BYTES: u64 = 256 * 1024 * 1024;
const PRODUCER_ID_BLOCK: i64 = 1000;

/// Kafka's bootstrap snapshot, written by `kafka-storage.sh format` in the metadata log
/// dir and read by Kafka's controller when its metadata log is empty.
pub const BOOTSTRAP_CHECKPOINT: &str = "bootstrap.checkpoint";

/// The UserScramCredentialRecords of `<metadata_dir>/bootstrap.checkpoint`, if there is
/// one (`kafka-storage.sh format --add-scram`). Its feature levels are not taken: skua
/// formats its log at the level it writes (see `bootstrap_records`), which Kafka reads.
pub fn bootstrap_scram_records(metadata_dir: &Path) -> Result<Vec<MetadataRecord>, String> {
    let path = metadata_dir.join(BOOTSTRAP_CHECKPOINT);
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let snapshot = super::snapshot::SnapshotId {
        end_offset: 0,
        epoch: 0,
        path,
    };
    let mut scram = Vec::new();
    super::snapshot::read(&snapshot, |value| {
        let record = MetadataRecord::decode(value).map_err(|e| e.to_string())?;
        if matches!(record, MetadataRecord::UserScramCredential(_)) {
            scram.push(record);
        }
        Ok(())
    })?;
    Ok(scram)
}

/// `skua-metadata.json` as skua wrote it.
#[derive(serde::Deserialize)]
pub struct SkuaMetadataFile {
    pub cluster_id: String,
    /// First producer id not yet reserved.
    producer_id_block_end: i64,
    topics: Vec<FileTopic>,
}

#[derive(serde::Deserialize)]
struct FileTopic {
    name: String,
    topic_id: Uuid,
    partitions: Vec<FilePartition>,
    configs: BTreeMap<String, String>,
}

#[derive(serde::Deserialize)]
struct FilePartition {
    partition: i32,
    leader: i32,
    leader_epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
}

impl SkuaMetadataFile {
    pub fn read(dir: &Path) -> anyhow::Result<Option<SkuaMetadataFile>> {
        let path = dir.join(SKUA_METADATA_FILE);
        let Some(bytes) = read_bounded(&path, MAX_SKUA_METADATA_BYTES)? else {
            return Ok(None);
        };
        let file = serde_json::from_slice(&bytes)
            .map_err(|e| anyhow::anyhow!("{} is damaged: {e}", path.display()))?;
        Ok(Some(file))
    }

    /// The file's topics and producer-id mark as metadata records.
    pub fn records(&self) -> Vec<MetadataRecord> {
        let mut out = bootstrap_records();
        for t in &self.topics {
            out.push(MetadataRecord::Topic {
                name: t.name.clone(),
                topic_id: t.topic_id,
            });
            out.extend(topic_configs(&t.name, &t.configs));
            for p in &t.partitions {
                out.push(MetadataRecord::Partition(PartitionRecord {
                    partition_id: p.partition,
                    topic_id: t.topic_id,
                    replicas: p.replicas.clone(),
                    isr: p.isr.clone(),
                    removing_replicas: Vec::new(),
                    adding_replicas: Vec::new(),
                    leader: p.leader,
                    leader_recovery_state: 0,
                    leader_epoch: p.leader_epoch,
                    partition_epoch: 0,
                    directories: vec![Uuid::nil(); p.replicas.len()],
                    eligible_leader_replicas: Vec::new(),
                    last_known_elr: Vec::new(),
                }));
            }
        }
        if self.producer_id_block_end > 0 {
            out.push(MetadataRecord::ProducerIds {
                broker_id: -1,
                broker_epoch: -1,
                next_producer_id: self.producer_id_block_end,
            });
        }
        out
    }
}

fn topic_configs(topic: &str, configs: &BTreeMap<String, String>) -> Vec<MetadataRecord> {
    configs
        .iter()
        .map(|(k, v)| MetadataRecord::Config {
            resource_type: CONFIG_RESOURCE_TOPIC,
            resource_name: topic.to_string(),
            name: k.clone(),
            value: Some(v.clone()),
        })
        .collect()
}

/// A partition directory found on disk.
#[derive(Clone, Debug)]
pub struct FoundPartition {
    pub tp: TopicPartition,
    pub dir: PathBuf,
    pub directory_id: Uuid,
    pub topic_id: Option<Uuid>,
    /// The newest leader epoch in its leader-epoch-checkpoint, -1 if none.
    pub latest_epoch: i32,
    /// The highest producer id in its newest producer-state snapshot, -1 if none.
    pub max_producer_id: i64,
}

/// Every partition directory in the log dirs (each with its `directory.id`); special
/// directories (`-delete`, `-stray`, `-future`, the metadata log) are not partitions.
pub fn scan_partition_dirs(log_dirs: &[(PathBuf, Uuid)]) -> anyhow::Result<Vec<FoundPartition>> {
    let mut out = Vec::new();
    for (parent, directory_id) in log_dirs {
        for entry in std::fs::read_dir(parent)? {
            let entry = entry?;
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let special = ["-delete", "-stray", "-future"];
            if name.starts_with(METADATA_LOG_DIR) || special.iter().any(|s| name.ends_with(s)) {
                continue;
            }
            let Some(tp) = TopicPartition::from_dir_name(&name) else {
                continue;
            };
            let dir = entry.path();
            let latest_epoch = read_leader_epoch_checkpoint(&dir.join(LEADER_EPOCH_CHECKPOINT))
                .ok()
                .and_then(|entries| entries.last().map(|e| e.epoch))
                .unwrap_or(-1);
            out.push(FoundPartition {
                topic_id: read_partition_metadata(&dir)?,
                max_producer_id: max_snapshot_producer_id(&dir),
                tp,
                dir,
                directory_id: *directory_id,
                latest_epoch,
            });
        }
    }
    out.sort_by(|a, b| a.tp.cmp(&b.tp));
    Ok(out)
}

/// The highest producer id in the newest `<offset>.snapshot` of `dir` (Kafka's producer
/// state: i16 version, u32 crc, i32 count, 46-byte entries each starting with the id).
fn max_snapshot_producer_id(dir: &Path) -> i64 {
    let newest = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_owned();
            let stem = name.strip_suffix(".snapshot")?;
            (stem.len() == 20)
                .then(|| stem.parse::<i64>().ok())?
                .map(|o| (o, e.path()))
        })
        .max_by_key(|(o, _)| *o);
    let Some((_, path)) = newest else {
        return -1;
    };
    let Ok(Some(bytes)) = read_bounded(&path, MAX_PRODUCER_SNAPSHOT_BYTES) else {
        return -1;
    };
    bytes
        .get(10..)
        .unwrap_or_default()
        .chunks_exact(46)
        .map(|e| i64::from_be_bytes(e[..8].try_into().unwrap_or_default()))
        .max()
        .unwrap_or(-1)
}

/// Records for the topics of partition directories found without any metadata (a
/// ZooKeeper-mode Kafka dir): each topic keeps the id its `partition.metadata` carries (a
/// new one if none does) and has as many partitions as its highest partition number says;
/// each partition is led here with a leader epoch past every epoch its log has seen, and
/// producer ids continue past every id in the data. Per-topic configs lived in ZooKeeper
/// and are not in the dirs: the topics start with the broker's defaults (the internal
/// topics with Kafka's own settings).
pub fn zookeeper_mode_records(
    node_id: i32,
    found: &[FoundPartition],
) -> anyhow::Result<Vec<MetadataRecord>> {
    let mut by_topic: BTreeMap<&str, Vec<&FoundPartition>> = BTreeMap::new();
    for f in found {
        by_topic.entry(&f.tp.topic).or_default().push(f);
    }
    let mut out = bootstrap_records();
    for (topic, parts) in by_topic {
        let ids: BTreeSet<Uuid> = parts.iter().filter_map(|p| p.topic_id).collect();
        if ids.len() > 1 {
            anyhow::bail!(
                "the partition directories of topic {topic} carry different topic ids ({}); move the ones that do not belong elsewhere",
                ids.iter().map(|i| crate::log::uuid_to_kafka_string(*i)).collect::<Vec<_>>().join(", ")
            );
        }
        let topic_id = ids
            .into_iter()
            .next()
            .unwrap_or_else(crate::log::new_kafka_uuid);
        out.push(MetadataRecord::Topic {
            name: topic.to_string(),
            topic_id,
        });
        if topic == "__consumer_offsets" {
            let internal: BTreeMap<String, String> = [
                ("cleanup.policy", "compact"),
                ("compression.type", "producer"),
                ("segment.bytes", "104857600"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
            out.extend(topic_configs(topic, &internal));
        }
        let count = parts.iter().map(|p| p.tp.partition).max().unwrap_or(0) + 1;
        let default_dir = parts.first().map_or(Uuid::nil(), |p| p.directory_id);
        for partition in 0..count {
            let on_disk = parts.iter().find(|p| p.tp.partition == partition);
            out.push(MetadataRecord::Partition(PartitionRecord {
                partition_id: partition,
                topic_id,
                replicas: vec![node_id],
                isr: vec![node_id],
                removing_replicas: Vec::new(),
                adding_replicas: Vec::new(),
                leader: node_id,
                leader_recovery_state: 0,
                leader_epoch: on_disk.map_or(0, |p| p.latest_epoch + 1).max(0),
                partition_epoch: 0,
                directories: vec![on_disk.map_or(default_dir, |p| p.directory_id)],
                eligible_leader_replicas: Vec::new(),
                last_known_elr: Vec::new(),
            }));
        }
    }
    let max_pid = found.iter().map(|f| f.max_producer_id).max().unwrap_or(-1);
    if max_pid >= 0 {
        let next = (max_pid / PRODUCER_ID_BLOCK + 1) * PRODUCER_ID_BLOCK;
        out.push(MetadataRecord::ProducerIds {
            broker_id: node_id,
            broker_epoch: -1,
            next_producer_id: next,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_storage_formats_scram_credentials_are_taken() {
        let dir = tempfile::tempdir().unwrap();
        assert!(bootstrap_scram_records(dir.path()).unwrap().is_empty());
        std::fs::write(
            dir.path().join(BOOTSTRAP_CHECKPOINT),
            include_bytes!("../../tests/fixtures/kafka-4.1-format-add-scram/bootstrap.checkpoint"),
        )
        .unwrap();
        let records = bootstrap_scram_records(dir.path()).unwrap();
        let [MetadataRecord::UserScramCredential(alice)] = &records[..] else {
            panic!("{records:?}")
        };
        assert_eq!(
            (alice.name.as_str(), alice.mechanism, alice.iterations),
            ("alice", 2, 4096)
        );
        let derived = crate::sasl::scram::ScramCredential::new(
            crate::sasl::scram::ScramMechanism::Sha512,
            "alice-secret",
            &alice.salt,
            4096,
        );
        assert_eq!(
            (&derived.stored_key, &derived.server_key),
            (&alice.stored_key, &alice.server_key)
        );
        std::fs::write(dir.path().join(BOOTSTRAP_CHECKPOINT), b"garbage").unwrap();
        assert!(bootstrap_scram_records(dir.path()).is_err());
    }
    use crate::controller::image::MetadataImage;

    #[test]
    fn zookeeper_mode_dirs_become_topics() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().to_path_buf();
        let id = Uuid::from_u128(0xabc);
        for (name, epoch) in [
            ("orders-0", 4),
            ("orders-2", 7),
            ("__consumer_offsets-1", 0),
        ] {
            std::fs::create_dir_all(d.join(name)).unwrap();
            std::fs::write(
                d.join(name).join(LEADER_EPOCH_CHECKPOINT),
                format!("0\n1\n{epoch} 0\n"),
            )
            .unwrap();
        }
        crate::log::write_partition_metadata_file(&d.join("orders-0"), id).unwrap();
        // A producer-state snapshot naming producer 4242.
        let mut snap = vec![0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        snap.extend_from_slice(&4242i64.to_be_bytes());
        snap.extend_from_slice(&[0; 38]);
        std::fs::write(d.join("orders-2/00000000000000000010.snapshot"), snap).unwrap();
        for special in [
            "orders-1.0123456789abcdef0123456789abcdef-delete",
            "x-0.ab-stray",
            METADATA_LOG_DIR,
        ] {
            std::fs::create_dir_all(d.join(special)).unwrap();
        }
        let dir_id = Uuid::from_u128(77);
        let found = scan_partition_dirs(&[(d.clone(), dir_id)]).unwrap();
        assert_eq!(found.len(), 3, "{found:?}");
        let records = zookeeper_mode_records(5, &found).unwrap();
        let mut image = MetadataImage::default();
        for r in &records {
            image.replay(r).unwrap();
        }
        let orders = image.topic("orders").unwrap();
        assert_eq!(orders.topic_id, id);
        assert_eq!(orders.partitions.len(), 3);
        assert_eq!(orders.partitions[2].state.leader_epoch, 8);
        assert_eq!(orders.partitions[2].assignment.replicas, vec![5]);
        assert_eq!(orders.partitions[0].assignment.directories, vec![dir_id]);
        let offsets = image.topic("__consumer_offsets").unwrap();
        assert_eq!(offsets.partitions.len(), 2);
        assert_eq!(offsets.configs["cleanup.policy"], "compact");
        assert_eq!(image.next_producer_id(), 5000);
        assert_eq!(image.metadata_version(), Some(25));
    }

    /// The store of skua before the metadata log, as it wrote it.
    #[test]
    fn imports_skua_metadata_json() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(SKUA_METADATA_FILE),
            r#"{"version":1,"cluster_id":"MkU3OEVBNTcwNTJENDM2Qk","producer_id_block_end":2000,
               "topics":[{"name":"orders","topic_id":"6b0b5a1e-1d5f-4d3c-9a51-0f3f0e6c2b10",
               "partitions":[{"partition":0,"leader":1,"leader_epoch":0,"replicas":[1],"isr":[1]},
                             {"partition":1,"leader":1,"leader_epoch":0,"replicas":[1],"isr":[1]}],
               "configs":{"cleanup.policy":"compact"}}]}"#,
        )
        .unwrap();
        let file = SkuaMetadataFile::read(dir.path()).unwrap().unwrap();
        assert_eq!(file.cluster_id, "MkU3OEVBNTcwNTJENDM2Qk");
        let mut image = MetadataImage::default();
        for r in &file.records() {
            image.replay(r).unwrap();
        }
        let orders = image.topic("orders").unwrap();
        assert_eq!(
            orders.topic_id,
            Uuid::parse_str("6b0b5a1e-1d5f-4d3c-9a51-0f3f0e6c2b10").unwrap()
        );
        assert_eq!(orders.partitions.len(), 2);
        assert_eq!(orders.configs["cleanup.policy"], "compact");
        assert_eq!(image.next_producer_id(), 2000);
        std::fs::write(dir.path().join(SKUA_METADATA_FILE), "{").unwrap();
        assert!(SkuaMetadataFile::read(dir.path()).is_err());
    }

    #[test]
    fn conflicting_topic_ids_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().to_path_buf();
        for (name, id) in [("t-0", 1u128), ("t-1", 2)] {
            std::fs::create_dir_all(d.join(name)).unwrap();
            crate::log::write_partition_metadata_file(&d.join(name), Uuid::from_u128(id << 70))
                .unwrap();
        }
        let found = scan_partition_dirs(&[(d, Uuid::nil())]).unwrap();
        assert!(zookeeper_mode_records(1, &found).is_err());
    }
}
