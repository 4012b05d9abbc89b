//! skua: a Kafka-compatible broker.
//!
//! A request's path through the broker, and the module that owns each step:
//!
//! ```text
//! client ──TCP──▶ network/    listener, one task per connection, length-prefixed frames,
//!                             pipelined requests answered in order
//!              ▶ protocol/   request header + body codec (kafka-protocol crate)
//!              ▶ router      ApiKey → handler table; ApiVersions is derived from it
//!              ▶ handlers/   one file per API
//!              ▶ replica/    the partitions this broker hosts, high watermark, long polls
//!              ▶ log/        LogManager → Log → LogSegment → .log/.index/.timeindex
//! beside them:
//!                controller/ cluster metadata (topics, partitions, ids) behind one trait
//!                coordinator/ runtime/: one owner per internal-topic partition, records
//!                            replayed once written; group/: consumer groups and
//!                            committed offsets in __consumer_offsets
//!                config/     server.properties and per-topic configs
//! ```

pub mod broker;
pub mod config;
pub mod controller;
pub mod coordinator;
pub mod handlers;
pub mod log;
pub mod network;
pub mod protocol;
pub mod replica;
pub mod router;
