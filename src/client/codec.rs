//! The client side of the wire format: a request frame out (size, header, body), a
//! response frame in (size, header, body). No I/O beyond reading and writing whole frames.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::ClientError;

/// Kafka's `socket.request.max.bytes` default: no response frame of a broker is larger
/// than what it would accept as a request.
pub const MAX_FRAME_BYTES: usize = 100 * 1024 * 1024;

/// The frame of `req` at `version`: 4-byte size, request header, body.
pub fn encode_request<R: Request>(
    req: &R,
    version: i16,
    correlation_id: i32,
    client_id: Option<&str>,
) -> Result<BytesMut, ClientError> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(client_id.map(|c| StrBytes::from_string(c.to_string())));
    let mut frame = BytesMut::with_capacity(256);
    frame.put_i32(0);
    header
        .encode(&mut frame, R::header_version(version))
        .map_err(|e| ClientError::Encode(format!("request header: {e}")))?;
    req.encode(&mut frame, version)
        .map_err(|e| ClientError::Encode(format!("api {} v{version}: {e}", R::KEY)))?;
    let size = i32::try_from(frame.len() - 4)
        .map_err(|_| ClientError::Encode("request larger than 2 GiB".into()))?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    Ok(frame)
}

/// The correlation id a response frame (without its size) starts with.
pub fn correlation_id(frame: &[u8]) -> Option<i32> {
    Some(i32::from_be_bytes(frame.get(..4)?.try_into().ok()?))
}

/// Decodes a response frame (without its size) to `R`'s response at `version`, with the
/// header version its api calls for (always 0 for ApiVersions). Bytes after the body
/// are an error: a broker that sends them and a client that reads the wrong version look
/// the same.
pub fn decode_response<R: Request>(
    mut frame: Bytes,
    version: i16,
) -> Result<(ResponseHeader, R::Response), ClientError> {
    let header = ResponseHeader::decode(&mut frame, R::Response::header_version(version))
        .map_err(|e| ClientError::Decode(format!("response header: {e}")))?;
    let body = R::Response::decode(&mut frame, version)
        .map_err(|e| ClientError::Decode(format!("api {} v{version}: {e}", R::KEY)))?;
    if frame.has_remaining() {
        return Err(ClientError::Decode(format!(
            "api {} v{version}: {} bytes after the body",
            R::KEY,
            frame.remaining()
        )));
    }
    Ok((header, body))
}

/// Reads one frame and returns its body; None at a clean end of stream. A size outside
/// `0..=max_bytes` is an error before anything is allocated.
pub async fn read_frame<S: AsyncRead + Unpin>(
    stream: &mut S,
    max_bytes: usize,
) -> std::io::Result<Option<Bytes>> {
    let mut size = [0u8; 4];
    match stream.read_exact(&mut size).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let size = i32::from_be_bytes(size);
    let size = usize::try_from(size)
        .ok()
        .filter(|s| *s <= max_bytes)
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("frame size {size} outside 0..={max_bytes}"),
            )
        })?;
    // Read into uninitialised capacity: zero-filling a multi-megabyte fetch answer first
    // costs as much as a bare reader spends receiving it.
    let mut body = BytesMut::with_capacity(size);
    let mut rest = (&mut *stream).take(size as u64);
    while body.len() < size {
        if rest.read_buf(&mut body).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(Some(body.freeze()))
}

/// Writes a whole frame (size prefix included) and flushes it. Over TLS the flush is what
/// sends it: `write_all` returns once the TLS stream has taken the last plaintext, and
/// when the socket was full at that moment the last encrypted records wait in the TLS
/// stream for a later write, which a client waiting for this frame's answer never makes
/// (the request stays unsent and times out). Over TCP the flush does nothing.
pub async fn write_frame<S: AsyncWrite + Unpin>(
    stream: &mut S,
    frame: &[u8],
) -> std::io::Result<()> {
    stream.write_all(frame).await?;
    stream.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, MetadataRequest};

    #[test]
    fn request_frame_carries_its_size_and_header() {
        let frame = encode_request(&MetadataRequest::default(), 12, 7, Some("skua")).unwrap();
        let size = i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(size, frame.len() - 4);
        let mut body = Bytes::copy_from_slice(&frame[4..]);
        let header = RequestHeader::decode(&mut body, 2).unwrap();
        assert_eq!(
            (header.request_api_key, header.request_api_version),
            (3, 12)
        );
        assert_eq!(header.correlation_id, 7);
        assert_eq!(header.client_id.as_deref(), Some("skua"));
    }

    #[test]
    fn response_with_trailing_bytes_is_refused() {
        let mut frame = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(3)
            .encode(&mut frame, 0)
            .unwrap();
        ApiVersionsResponse::default()
            .encode(&mut frame, 3)
            .unwrap();
        let (header, _) = decode_response::<ApiVersionsRequest>(frame.clone().freeze(), 3).unwrap();
        assert_eq!(header.correlation_id, 3);
        assert_eq!(correlation_id(&frame), Some(3));
        frame.put_u8(0);
        assert!(decode_response::<ApiVersionsRequest>(frame.freeze(), 3).is_err());
    }

    #[tokio::test]
    async fn oversized_frame_is_refused_before_allocation() {
        let mut input: &[u8] = &[0x7f, 0xff, 0xff, 0xff];
        let err = read_frame(&mut input, 1024).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        let mut input: &[u8] = &[0xff, 0xff, 0xff, 0xff];
        assert!(read_frame(&mut input, 1024).await.is_err());
        let mut empty: &[u8] = &[];
        assert!(read_frame(&mut empty, 1024).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn frames_are_read_one_at_a_time_and_a_short_one_is_an_error() {
        let mut input: &[u8] = &[0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 2, 4, 5, 0, 0, 0, 4, 6];
        let first = read_frame(&mut input, 1024).await.unwrap().unwrap();
        assert_eq!(&first[..], &[1, 2, 3]);
        let second = read_frame(&mut input, 1024).await.unwrap().unwrap();
        assert_eq!(&second[..], &[4, 5]);
        let err = read_frame(&mut input, 1024).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}

#[cfg(test)]
#[path = "codec_tls_tests.rs"]
mod tls_tests;
