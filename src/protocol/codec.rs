//! Request decoding and response encoding with the kafka-protocol crate.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};

use super::decode_budget;
use super::frame_buf::FrameBuf;
use super::zero_copy::Chunk;
use super::Frame;
use crate::log::FileSlice;

/// A decoded request.
#[derive(Debug)]
pub struct Request {
    pub api_key: ApiKey,
    pub api_version: i16,
    pub header: RequestHeader,
    pub body: RequestKind,
    /// Heap bytes the decoded header and body hold beyond the frame (arrays, maps).
    pub decoded_bytes: usize,
}

/// The decode limit [`decode_request`] applies: Kafka's default `socket.request.max.bytes`.
pub const DEFAULT_MAX_DECODED_BYTES: usize = 100 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("frame of {0} bytes is too short for a request header")]
    TooShort(usize),
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    #[error("malformed {api_key:?} v{version} request: {why}")]
    Malformed {
        api_key: ApiKey,
        version: i16,
        why: String,
    },
}

/// The api key, version and correlation id: the fixed first 8 bytes of every request header.
pub fn peek_header(frame: &[u8]) -> Result<(i16, i16, i32), DecodeError> {
    if frame.len() < 8 {
        return Err(DecodeError::TooShort(frame.len()));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    Ok((key, version, correlation_id))
}

/// Decodes a whole request frame. Byte fields of the body (produce records) stay
/// slices of `frame`, never copies.
pub fn decode_request(frame: Bytes) -> Result<Request, DecodeError> {
    decode_request_within(frame, DEFAULT_MAX_DECODED_BYTES)
}

/// [`decode_request`], failing as soon as the decoded request would hold more than
/// `max_decoded_bytes` of memory beyond its frame (see [`super::decode_budget`]).
pub fn decode_request_within(
    frame: Bytes,
    max_decoded_bytes: usize,
) -> Result<Request, DecodeError> {
    let (request, decoded_bytes) =
        decode_budget::decode_within(max_decoded_bytes, || decode_frame(frame));
    let mut request = request?;
    request.decoded_bytes = decoded_bytes;
    Ok(request)
}

fn decode_frame(mut frame: Bytes) -> Result<Request, DecodeError> {
    let (key, api_version, _) = peek_header(&frame)?;
    let api_key = ApiKey::try_from(key).map_err(|_| DecodeError::UnknownApiKey(key))?;
    let malformed = |e: anyhow::Error| DecodeError::Malformed {
        api_key,
        version: api_version,
        // The whole chain: the crate's context names the type, its cause says what failed.
        why: format!("{e:#}"),
    };
    let header = RequestHeader::decode(&mut frame, api_key.request_header_version(api_version))
        .map_err(malformed)?;
    let body = RequestKind::decode(api_key, &mut frame, api_version).map_err(malformed)?;
    Ok(Request {
        api_key,
        api_version,
        header,
        body,
        decoded_bytes: 0,
    })
}

/// Encodes a response frame: size, header (version chosen by api key and version;
/// always v0 for ApiVersions), body. Fetch responses come back in several chunks so
/// that fetched record bytes are referenced, not copied (see [`FrameBuf`]); its
/// `file_slices` are the segment ranges its record placeholders stand for, in order.
pub fn encode_response(
    api_key: ApiKey,
    api_version: i16,
    correlation_id: i32,
    body: &ResponseKind,
    file_slices: Vec<FileSlice>,
) -> anyhow::Result<Frame> {
    let header_version = api_key.response_header_version(api_version);
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    if let ResponseKind::Fetch(fetch) = body {
        let records = fetch
            .responses
            .iter()
            .flat_map(|t| t.partitions.iter())
            .filter_map(|p| p.records.clone())
            .collect();
        let mut buf = FrameBuf::new(records, file_slices);
        header.encode(&mut buf, header_version)?;
        fetch.encode(&mut buf, api_version)?;
        i32::try_from(buf.len() - 4)?;
        return buf.into_frame().map_err(anyhow::Error::msg);
    }
    let mut buf = BytesMut::with_capacity(256);
    // The size is patched in once the body is written: the crate has no size pass for
    // a ResponseKind.
    buf.put_i32(0);
    header.encode(&mut buf, header_version)?;
    body.encode(&mut buf, api_version)?;
    let size = i32::try_from(buf.len() - 4)?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(vec![Chunk::Bytes(buf.freeze())])
}
