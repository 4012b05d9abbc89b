//! The wire format: frames, request headers and bodies, response encoding.
//!
//! No I/O here: the network layer hands in frame bytes and writes out what comes back.

pub mod codec;
pub mod decode_budget;
pub mod fetch_size;
pub mod frame;
pub mod frame_buf;
pub mod legacy_produce;
#[cfg(test)]
pub mod tracked_frame;
pub mod zero_copy;

pub use codec::{decode_request, decode_request_within, encode_response, DecodeError, Request};

/// An encoded response: the size prefix, header and body as consecutive chunks.
pub type Frame = Vec<zero_copy::Chunk>;
