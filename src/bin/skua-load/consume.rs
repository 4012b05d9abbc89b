//! Consumers: each on its own connection, fetching its share of the partitions from the
//! start until it has read up to their high watermarks. Records are counted from batch
//! headers, never decoded (as a follower reads), so the broker, not the client, is the
//! limit.

use std::sync::Arc;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use skua::client::Connection;

use crate::records;

/// What consumers fetched: summed over them and over the passes (a run of two passes
/// that stopped early counts every record of the first and what the second got to).
#[derive(Default)]
pub struct Outcome {
    pub fetches: u64,
    pub records: u64,
    pub bytes: u64,
    /// Each consumer's error, if it stopped on one (each stops at its first).
    pub errors: Vec<String>,
}

impl Outcome {
    pub fn add(&mut self, other: &Outcome) {
        self.fetches += other.fetches;
        self.records += other.records;
        self.bytes += other.bytes;
        self.errors.extend(other.errors.iter().cloned());
    }
}

/// Reads `partitions` of `topic` from offset 0 to their high watermarks.
pub async fn run(
    connection: Arc<Connection>,
    topic: String,
    partitions: Vec<i32>,
    version: i16,
) -> Outcome {
    let mut out = Outcome::default();
    // (partition, next offset); a partition leaves once it has reached its high watermark.
    let mut reading: Vec<(i32, i64)> = partitions.into_iter().map(|p| (p, 0)).collect();
    let name = TopicName(StrBytes::from_string(topic));
    while !reading.is_empty() {
        let req = fetch_request(&name, 100, reading.iter().copied());
        // Which fetch failed: the partitions and offsets it asked for.
        let asked = || {
            let at: Vec<String> = reading.iter().map(|(p, o)| format!("{p}@{o}")).collect();
            format!(
                "fetch {} from {} (partition@offset {})",
                out.fetches + 1,
                connection.addr(),
                at.join(" ")
            )
        };
        let resp = match connection.send(&req, version).await {
            Ok(resp) => resp,
            Err(e) => {
                out.errors.push(format!("{}: {e}", asked()));
                return out;
            }
        };
        if resp.error_code != 0 {
            out.errors
                .push(format!("{}: error code {}", asked(), resp.error_code));
            return out;
        }
        out.fetches += 1;
        for data in resp.responses.iter().flat_map(|t| t.partitions.iter()) {
            if data.error_code != 0 {
                out.errors.push(format!(
                    "fetch partition {}: error code {}",
                    data.partition_index, data.error_code
                ));
                return out;
            }
            let Some(entry) = reading.iter_mut().find(|(p, _)| *p == data.partition_index) else {
                continue;
            };
            if let Some(bytes) = &data.records {
                out.bytes += bytes.len() as u64;
                let (n, next) = records::count(bytes);
                out.records += n;
                if let Some(next) = next {
                    entry.1 = next;
                }
            }
            if entry.1 >= data.high_watermark {
                entry.1 = i64::MAX; // done
            }
        }
        reading.retain(|(_, offset)| *offset != i64::MAX);
    }
    out
}

/// A consumer's Fetch of `partitions` ((partition, offset) pairs) of one topic: at most
/// 1 MiB a partition and 50 MiB in all, answered once a byte is there or after `max_wait_ms`.
pub fn fetch_request(
    name: &TopicName,
    max_wait_ms: i32,
    partitions: impl Iterator<Item = (i32, i64)>,
) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(50 * 1024 * 1024)
        .with_topics(vec![FetchTopic::default()
            .with_topic(name.clone())
            .with_partitions(
                partitions
                    .map(|(p, offset)| {
                        FetchPartition::default()
                            .with_partition(p)
                            .with_fetch_offset(offset)
                            .with_partition_max_bytes(1024 * 1024)
                    })
                    .collect(),
            )])
}
