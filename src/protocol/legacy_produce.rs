//! Produce v0–2: advertised (as Kafka 4 does, since older librdkafka turns compression
//! off when Produce v0 is missing) but answered UNSUPPORTED_VERSION for every partition.
//! The crate has no codec below v3, so these few fields are read and written here.

use bytes::{Buf, BufMut, Bytes, BytesMut};

const UNSUPPORTED_VERSION: i16 = 35;

/// Topics and partition indexes of a Produce v0–2 body, and whether a response is expected.
#[derive(Debug, PartialEq, Eq)]
pub struct LegacyProduce {
    pub acks: i16,
    pub topics: Vec<(String, Vec<i32>)>,
}

/// Parses the body that follows a v1 request header.
pub fn decode(mut body: Bytes) -> Option<LegacyProduce> {
    let acks = get_i16(&mut body)?;
    let _timeout_ms = get_i32(&mut body)?;
    let topic_count = count(&mut body)?;
    let mut topics = Vec::new();
    for _ in 0..topic_count {
        let name_len = usize::try_from(get_i16(&mut body)?).ok()?;
        if body.remaining() < name_len {
            return None;
        }
        let name = String::from_utf8(body.split_to(name_len).to_vec()).ok()?;
        let partition_count = count(&mut body)?;
        let mut partitions = Vec::new();
        for _ in 0..partition_count {
            partitions.push(get_i32(&mut body)?);
            let records_len = get_i32(&mut body)?;
            if records_len > 0 {
                let n = records_len as usize;
                if body.remaining() < n {
                    return None;
                }
                body.advance(n);
            }
        }
        topics.push((name, partitions));
    }
    Some(LegacyProduce { acks, topics })
}

/// The response body (without header) at `version` 0–2.
pub fn encode_unsupported(req: &LegacyProduce, version: i16) -> Bytes {
    let mut buf = BytesMut::new();
    buf.put_i32(req.topics.len() as i32);
    for (name, partitions) in &req.topics {
        buf.put_i16(name.len() as i16);
        buf.put_slice(name.as_bytes());
        buf.put_i32(partitions.len() as i32);
        for &p in partitions {
            buf.put_i32(p);
            buf.put_i16(UNSUPPORTED_VERSION);
            buf.put_i64(-1);
            if version >= 2 {
                buf.put_i64(-1);
            }
        }
    }
    if version >= 1 {
        buf.put_i32(0);
    }
    buf.freeze()
}

fn get_i16(b: &mut Bytes) -> Option<i16> {
    (b.remaining() >= 2).then(|| b.get_i16())
}

fn get_i32(b: &mut Bytes) -> Option<i32> {
    (b.remaining() >= 4).then(|| b.get_i32())
}

/// An array count, refused when it could not fit in what is left (each element ≥ 4 bytes).
fn count(b: &mut Bytes) -> Option<usize> {
    let n = usize::try_from(get_i32(b)?).ok()?;
    (n <= b.remaining() / 4).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut b = BytesMut::new();
        b.put_i16(1);
        b.put_i32(1000);
        b.put_i32(1);
        b.put_i16(3);
        b.put_slice(b"abc");
        b.put_i32(2);
        b.put_i32(0);
        b.put_i32(2);
        b.put_slice(&[1, 2]);
        b.put_i32(5);
        b.put_i32(-1);
        let req = decode(b.freeze()).unwrap();
        assert_eq!(
            req,
            LegacyProduce {
                acks: 1,
                topics: vec![("abc".into(), vec![0, 5])]
            }
        );
        let out = encode_unsupported(&req, 2);
        // count + name + count + 2 × (index, error, offset, time) + throttle
        assert_eq!(out.len(), 4 + 2 + 3 + 4 + 2 * (4 + 2 + 8 + 8) + 4);
        assert_eq!(&out[13..19], &[0, 0, 0, 0, 0, 35]);
    }

    #[test]
    fn hostile_counts_are_refused() {
        let mut b = BytesMut::new();
        b.put_i16(1);
        b.put_i32(0);
        b.put_i32(i32::MAX);
        assert!(decode(b.freeze()).is_none());
    }
}
