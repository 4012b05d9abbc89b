//! The wire format: frames, request headers and bodies, response encoding.
//!
//! No I/O here: the network layer hands in frame bytes and writes out what comes back.

pub mod codec;
pub mod frame;
pub mod legacy_produce;

pub use codec::{decode_request, encode_response, DecodeError, Request};
