//! Request frames captured from real clients (`protocol-tests/fixtures`, see its README)
//! and what a replay of one checks about skua's answer.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ApiKey, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Decodable;

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("protocol-tests/fixtures")
}

/// What Apache Kafka's brokers and admin tools sent a Kafka ZooKeeper-mode cluster
/// (`protocol-tests/capture-cluster.sh`), in the same layout.
pub fn cluster_fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("protocol-tests/fixtures-cluster")
}

/// One line of `MANIFEST.tsv`.
#[derive(Clone, Debug)]
pub struct Fixture {
    /// Capture order; a client's fixtures replay in this order.
    pub seq: u32,
    pub client: String,
    pub client_version: String,
    pub api_key: ApiKey,
    pub version: i16,
    /// Relative to `dir`.
    pub file: String,
    /// The fixtures directory the manifest lies in.
    pub dir: PathBuf,
}

impl Fixture {
    /// The request frame body (no size prefix), exactly as the client sent it.
    pub fn request(&self) -> Bytes {
        let path = self.dir.join(&self.file);
        Bytes::from(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
    }

    /// The response the broker gave at capture time, when it was recorded.
    pub fn captured_response(&self) -> Option<Bytes> {
        let path = self.dir.join(self.file.replace(".bin", ".resp.bin"));
        std::fs::read(path).ok().map(Bytes::from)
    }

    pub fn is_handmade(&self) -> bool {
        self.client == "handmade"
    }
}

impl std::fmt::Display for Fixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({} {})", self.file, self.client, self.client_version)
    }
}

/// Every client fixture, in capture order.
pub fn manifest() -> Vec<Fixture> {
    manifest_in(fixtures_dir())
}

/// Every inter-broker and cluster-admin fixture, in capture order.
pub fn cluster_manifest() -> Vec<Fixture> {
    manifest_in(cluster_fixtures_dir())
}

fn manifest_in(dir: PathBuf) -> Vec<Fixture> {
    let path = dir.join("MANIFEST.tsv");
    let text = std::fs::read_to_string(&path).expect("MANIFEST.tsv");
    let mut out: Vec<Fixture> = text
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let c: Vec<&str> = line.split('\t').collect();
            assert_eq!(c.len(), 7, "MANIFEST.tsv line {line:?}");
            let key: i16 = c[3].parse().expect("api key");
            Fixture {
                seq: c[0].parse().expect("seq"),
                client: c[1].into(),
                client_version: c[2].into(),
                api_key: ApiKey::try_from(key).expect("known api key"),
                version: c[5].parse().expect("version"),
                file: c[6].into(),
                dir: dir.clone(),
            }
        })
        .collect();
    out.sort_by_key(|f| f.seq);
    out
}

/// The version the response body is encoded at: a too-new ApiVersions request is answered
/// at v0 (KIP-511), everything else at the request's version.
pub fn response_version(api_key: ApiKey, version: i16) -> i16 {
    let max = skua::router::route_for(api_key).map_or(i16::MAX, |r| r.max_version);
    if api_key == ApiKey::ApiVersions && version > max {
        0
    } else {
        version
    }
}

/// Decodes a response frame body with the crate's client-side decoder, as a client would:
/// the header at `ApiKey::response_header_version`, the body at `version`, nothing left over.
pub fn decode_response(
    api_key: ApiKey,
    version: i16,
    mut frame: Bytes,
) -> Result<(i32, ResponseKind), String> {
    let version = response_version(api_key, version);
    let header = ResponseHeader::decode(&mut frame, api_key.response_header_version(version))
        .map_err(|e| format!("response header: {e}"))?;
    let body = ResponseKind::decode(api_key, &mut frame, version)
        .map_err(|e| format!("response body: {e}"))?;
    if frame.has_remaining() {
        return Err(format!("{} trailing bytes", frame.remaining()));
    }
    Ok((header.correlation_id, body))
}

/// Every error code anywhere in a response (top level, topics, partitions), found through
/// `Debug` so that no response type is forgotten.
pub fn error_codes(resp: &ResponseKind) -> Vec<i16> {
    let text = format!("{resp:?}");
    text.match_indices("error_code: ")
        .filter_map(|(i, m)| {
            let rest = &text[i + m.len()..];
            let end = rest
                .find(|c: char| c != '-' && !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..end].parse().ok()
        })
        .collect()
}

/// Error codes that only a broker bug explains when a real client's request gets them.
pub const BUG_CODES: &[(i16, &str)] = &[
    (-1, "UNKNOWN_SERVER_ERROR"),
    (2, "CORRUPT_MESSAGE"),
    (35, "UNSUPPORTED_VERSION"),
    (42, "INVALID_REQUEST"),
    (56, "KAFKA_STORAGE_ERROR"),
    (87, "INVALID_RECORD"),
];

/// (topic name, topic id) pairs a response reveals.
pub fn topic_ids(resp: &ResponseKind) -> Vec<(String, [u8; 16])> {
    let mut out = Vec::new();
    match resp {
        ResponseKind::Metadata(r) => {
            for t in &r.topics {
                if let Some(n) = &t.name {
                    out.push((n.to_string(), *t.topic_id.as_bytes()));
                }
            }
        }
        ResponseKind::CreateTopics(r) => {
            for t in &r.topics {
                out.push((t.name.to_string(), *t.topic_id.as_bytes()));
            }
        }
        ResponseKind::DescribeTopicPartitions(r) => {
            for t in &r.topics {
                if let Some(n) = &t.name {
                    out.push((n.to_string(), *t.topic_id.as_bytes()));
                }
            }
        }
        _ => {}
    }
    out.retain(|(_, id)| *id != [0; 16]);
    out
}

/// Topic ids differ between the capture and the replay (they are random), so requests
/// that name topics by id (Fetch v13+, Produce v13) have the captured ids swapped for the
/// replay broker's. Ids are learnt from the Metadata-like responses both brokers gave to the
/// same request; 16 random bytes never occur by accident elsewhere in a frame.
#[derive(Default)]
pub struct TopicIdMap {
    captured_to_live: HashMap<[u8; 16], [u8; 16]>,
}

impl TopicIdMap {
    pub fn learn(&mut self, captured: &ResponseKind, live: &ResponseKind) {
        let live: HashMap<String, [u8; 16]> = topic_ids(live).into_iter().collect();
        for (name, old) in topic_ids(captured) {
            if let Some(new) = live.get(&name) {
                self.captured_to_live.insert(old, *new);
            }
        }
    }

    pub fn rewrite(&self, frame: &mut [u8]) -> usize {
        let mut n = 0;
        for (old, new) in &self.captured_to_live {
            let mut i = 0;
            while i + 16 <= frame.len() {
                if &frame[i..i + 16] == old {
                    frame[i..i + 16].copy_from_slice(new);
                    n += 1;
                    i += 16;
                } else {
                    i += 1;
                }
            }
        }
        n
    }
}

/// A Produce v0–2 response, which the crate cannot decode: the error code of each partition.
pub fn legacy_produce_errors(mut body: Bytes, version: i16) -> Option<Vec<i16>> {
    let mut errors = Vec::new();
    let topics = get_i32(&mut body)?;
    for _ in 0..topics {
        let len = usize::try_from(get_i16(&mut body)?).ok()?;
        (body.remaining() >= len).then(|| body.advance(len))?;
        let partitions = get_i32(&mut body)?;
        for _ in 0..partitions {
            get_i32(&mut body)?;
            errors.push(get_i16(&mut body)?);
            let rest = if version >= 2 { 16 } else { 8 };
            (body.remaining() >= rest).then(|| body.advance(rest))?;
        }
    }
    if version >= 1 {
        get_i32(&mut body)?;
    }
    (!body.has_remaining()).then_some(errors)
}

fn get_i16(b: &mut Bytes) -> Option<i16> {
    (b.remaining() >= 2).then(|| b.get_i16())
}

fn get_i32(b: &mut Bytes) -> Option<i32> {
    (b.remaining() >= 4).then(|| b.get_i32())
}

/// The member ids a response assigns (JoinGroup, ConsumerGroupHeartbeat v0 when the
/// broker names the member): `{client id or instance id}-{uuid}`, so random.
pub fn member_ids(resp: &ResponseKind) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    match resp {
        ResponseKind::JoinGroup(r) => out.push(r.member_id.as_bytes().to_vec()),
        ResponseKind::ConsumerGroupHeartbeat(r) => {
            if let Some(id) = &r.member_id {
                out.push(id.as_bytes().to_vec());
            }
        }
        _ => {}
    }
    out.retain(|id| !id.is_empty());
    out
}

/// Member ids differ between the capture and the replay as topic ids do: the broker makes
/// them up (JoinGroup v4+ first answers MEMBER_ID_REQUIRED with one the next JoinGroup must
/// carry; SyncGroup, Heartbeat, OffsetCommit, LeaveGroup and the leader's assignments name
/// it; a ConsumerGroupHeartbeat v0 member learns its id from the first answer). The id the
/// capture-time answer gave is swapped for the one the replay broker gave to the same
/// request in later frames. Ids are `{prefix}-{uuid}`, so both have the same length and no
/// length prefix changes; a uuid does not occur by accident elsewhere in a frame.
#[derive(Default)]
pub struct MemberIdMap {
    captured_to_live: Vec<(Vec<u8>, Vec<u8>)>,
}

impl MemberIdMap {
    pub fn learn(&mut self, captured: &ResponseKind, live: &ResponseKind) -> Result<(), String> {
        for (old, new) in member_ids(captured).into_iter().zip(member_ids(live)) {
            if old == new || self.captured_to_live.iter().any(|(o, _)| *o == old) {
                continue;
            }
            if old.len() != new.len() {
                return Err(format!(
                    "member id {:?} became {:?}: lengths differ, frames cannot be rewritten",
                    String::from_utf8_lossy(&old),
                    String::from_utf8_lossy(&new)
                ));
            }
            self.captured_to_live.push((old, new));
        }
        Ok(())
    }

    pub fn rewrite(&self, frame: &mut [u8]) -> usize {
        let mut n = 0;
        for (old, new) in &self.captured_to_live {
            let mut i = 0;
            while i + old.len() <= frame.len() {
                if frame[i..i + old.len()] == old[..] {
                    frame[i..i + old.len()].copy_from_slice(new);
                    n += 1;
                    i += old.len();
                } else {
                    i += 1;
                }
            }
        }
        n
    }
}
