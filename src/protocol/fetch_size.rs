//! The encoded size of a Fetch response's body, which the consumer byte-rate quota counts
//! for every consumer Fetch (Kafka's `FetchResponse.sizeOf`).
//!
//! The crate's `compute_size` gives the same number, but through its generic encoders: a
//! `Result` per field, every tagged struct compared with a default built for the
//! purpose, every map of unknown tagged fields walked, about 800 instructions for a
//! response of one partition. Here the size is summed from the fields' wire sizes
//! directly, a few instructions a partition. A response holding what skua's handlers
//! never put in one (unknown tagged fields, a field its version cannot carry, a name or
//! byte string too long for its length prefix) is sized by the crate instead, so the two
//! always agree, errors included (0, as the quota counted a response the crate could not
//! size).

use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::FetchResponse;
use kafka_protocol::protocol::Encodable;

/// From this version the response is flexible: compact arrays, strings and bytes
/// (lengths as unsigned varints of length + 1), tagged fields.
const FLEXIBLE: i16 = 12;
/// The top-level error code and the session id are in the response from this version.
const SESSION_ID: i16 = 7;
/// The log start offset is in each partition from this version.
const LOG_START_OFFSET: i16 = 5;
/// The preferred read replica is in each partition from this version (KIP-392).
const PREFERRED_READ_REPLICA: i16 = 11;
/// Topics are named by id from this version on (the name is no longer sent).
const TOPIC_ID: i16 = 13;
/// The node endpoints tagged field exists from this version (KIP-951).
const NODE_ENDPOINTS: i16 = 16;

/// The body's encoded size at `version` (the response header not included), as the
/// crate's `compute_size` answers it (0 where it fails).
pub fn fetch_response_size(response: &FetchResponse, version: i16) -> usize {
    match quick_size(response, version, true) {
        Some(size) => size,
        None => response.compute_size(version).unwrap_or(0),
    }
}

/// The bytes the consumer byte-rate quota records for a Fetch answered with `response`,
/// as Kafka's `FetchResponse.sizeOf`: 4 (the response header's correlation id) plus the
/// body sized without its node endpoints (Kafka sizes a copy made with none).
pub fn fetch_quota_bytes(response: &FetchResponse, version: i16) -> usize {
    let body = match quick_size(response, version, false) {
        Some(size) => size,
        None if response.node_endpoints.is_empty() => response.compute_size(version).unwrap_or(0),
        None => {
            let mut without = response.clone();
            without.node_endpoints.clear();
            without.compute_size(version).unwrap_or(0)
        }
    };
    4 + body
}

/// The size from the fields' sizes (the node endpoints left out unless `endpoints`); None
/// when the response needs the crate's sizing.
fn quick_size(r: &FetchResponse, version: i16, endpoints: bool) -> Option<usize> {
    let flexible = version >= FLEXIBLE;
    // throttle_time_ms
    let mut size = 4;
    if version >= SESSION_ID {
        // error_code, session_id
        size += 2 + 4;
    } else if r.session_id != 0 {
        return None;
    }
    size += array_prefix(r.responses.len(), flexible)?;
    for topic in &r.responses {
        size += topic_size(topic, version)?;
    }
    if flexible {
        if !r.unknown_tagged_fields.is_empty() {
            return None;
        }
        let endpoints = endpoints && version >= NODE_ENDPOINTS && !r.node_endpoints.is_empty();
        // The number of tagged fields (0 or 1).
        size += 1;
        if endpoints {
            let mut field = uvarint(r.node_endpoints.len().checked_add(1)?)?;
            for e in &r.node_endpoints {
                field += endpoint_size(e)?;
            }
            // The tag (0), the field's length, the field.
            size += 1 + uvarint(field)? + field;
        }
    }
    Some(size)
}

fn topic_size(t: &FetchableTopicResponse, version: i16) -> Option<usize> {
    let flexible = version >= FLEXIBLE;
    let mut size = match version >= TOPIC_ID {
        // topic_id
        true => 16,
        false => string_size(t.topic.len(), flexible)?,
    };
    size += array_prefix(t.partitions.len(), flexible)?;
    for p in &t.partitions {
        size += partition_size(p, version)?;
    }
    if flexible {
        if !t.unknown_tagged_fields.is_empty() {
            return None;
        }
        // No tagged fields.
        size += 1;
    }
    Some(size)
}

fn partition_size(p: &PartitionData, version: i16) -> Option<usize> {
    let flexible = version >= FLEXIBLE;
    // partition_index, error_code, high_watermark, last_stable_offset
    let mut size = 4 + 2 + 8 + 8;
    if version >= LOG_START_OFFSET {
        size += 8;
    }
    size += match &p.aborted_transactions {
        None => null_prefix(flexible),
        Some(aborted) => {
            let mut each = 8 + 8;
            if flexible {
                if aborted.iter().any(has_tagged_fields) {
                    return None;
                }
                each += 1;
            }
            array_prefix(aborted.len(), flexible)? + aborted.len().checked_mul(each)?
        }
    };
    if version >= PREFERRED_READ_REPLICA {
        size += 4;
    } else if p.preferred_read_replica.0 != -1 {
        return None;
    }
    size += match &p.records {
        None => null_prefix(flexible),
        Some(records) => bytes_prefix(records.len(), flexible)? + records.len(),
    };
    if flexible {
        if !p.unknown_tagged_fields.is_empty()
            || !p.diverging_epoch.unknown_tagged_fields.is_empty()
            || !p.current_leader.unknown_tagged_fields.is_empty()
            || !p.snapshot_id.unknown_tagged_fields.is_empty()
        {
            return None;
        }
        // The number of tagged fields (at most 3).
        size += 1;
        // Each one set: its tag, its length (one byte: it is short), the struct (its
        // fields and an empty tagged-field count).
        if p.diverging_epoch.epoch != -1 || p.diverging_epoch.end_offset != -1 {
            size += 1 + 1 + (4 + 8 + 1);
        }
        if p.current_leader.leader_id.0 != -1 || p.current_leader.leader_epoch != -1 {
            size += 1 + 1 + (4 + 4 + 1);
        }
        if p.snapshot_id.end_offset != -1 || p.snapshot_id.epoch != -1 {
            size += 1 + 1 + (8 + 4 + 1);
        }
    }
    Some(size)
}

fn has_tagged_fields(a: &AbortedTransaction) -> bool {
    !a.unknown_tagged_fields.is_empty()
}

/// A node endpoint's size (flexible versions only: the field exists from v16).
fn endpoint_size(e: &NodeEndpoint) -> Option<usize> {
    if !e.unknown_tagged_fields.is_empty() {
        return None;
    }
    // node_id, host, port, rack, no tagged fields
    let rack = match &e.rack {
        None => 1,
        Some(rack) => string_size(rack.len(), true)?,
    };
    Some(4 + string_size(e.host.len(), true)? + 4 + rack + 1)
}

/// An array's length prefix: an int32, or an unsigned varint of length + 1.
fn array_prefix(len: usize, flexible: bool) -> Option<usize> {
    match flexible {
        true if len < u32::MAX as usize => uvarint(len + 1),
        false if len <= i32::MAX as usize => Some(4),
        _ => None,
    }
}

/// A byte string's length prefix (the same limits as an array's).
fn bytes_prefix(len: usize, flexible: bool) -> Option<usize> {
    array_prefix(len, flexible)
}

/// A string's size: an int16 length, or an unsigned varint of length + 1, and its bytes.
fn string_size(len: usize, flexible: bool) -> Option<usize> {
    match flexible {
        true if len < u32::MAX as usize => Some(uvarint(len + 1)? + len),
        false if len <= i16::MAX as usize => Some(2 + len),
        _ => None,
    }
}

/// A null array or byte string: -1 as an int32, or 0 as an unsigned varint.
fn null_prefix(flexible: bool) -> usize {
    match flexible {
        true => 1,
        false => 4,
    }
}

/// The size of an unsigned varint (of a u32; None above).
fn uvarint(n: usize) -> Option<usize> {
    Some(match n {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0xfff_ffff => 4,
        0x1000_0000..=0xffff_ffff => 5,
        _ => return None,
    })
}

#[cfg(test)]
#[path = "fetch_size_tests.rs"]
mod tests;
