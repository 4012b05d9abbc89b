//! Length-prefixed frames: a big-endian i32 size, then that many bytes.
//!
//! [`check`] looks at buffered bytes without consuming them, so a half-received frame
//! costs nothing but the bytes already read; the size is validated before any memory
//! is reserved for the body.

use bytes::{Buf, BytesMut};

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame size {size} is negative")]
    Negative { size: i32 },
    #[error("frame size {size} exceeds socket.request.max.bytes {max}")]
    TooLarge { size: i32, max: usize },
}

/// What the buffer holds.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    /// A whole frame whose body is this many bytes long.
    Complete(usize),
    /// More bytes needed: at least this many in total.
    Incomplete(usize),
}

/// Inspects `buf` for a whole frame, rejecting sizes outside `0..=max`.
pub fn check(buf: &[u8], max: usize) -> Result<Check, FrameError> {
    if buf.len() < 4 {
        return Ok(Check::Incomplete(4));
    }
    let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    if size < 0 {
        return Err(FrameError::Negative { size });
    }
    if size as usize > max {
        return Err(FrameError::TooLarge { size, max });
    }
    let total = 4 + size as usize;
    if buf.len() < total {
        Ok(Check::Incomplete(total))
    } else {
        Ok(Check::Complete(size as usize))
    }
}

/// Takes a frame's body of `size` bytes off the front of `buf` (after [`check`]).
pub fn split(buf: &mut BytesMut, size: usize) -> BytesMut {
    buf.advance(4);
    buf.split_to(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bounded_before_use() {
        assert_eq!(check(&[0, 0], 10), Ok(Check::Incomplete(4)));
        assert_eq!(check(&[0, 0, 0, 3, 1], 10), Ok(Check::Incomplete(7)));
        assert_eq!(check(&[0, 0, 0, 1, 9], 10), Ok(Check::Complete(1)));
        assert_eq!(
            check(&[0xff, 0xff, 0xff, 0xff], 10),
            Err(FrameError::Negative { size: -1 })
        );
        assert_eq!(
            check(&[0, 0, 0, 11], 10),
            Err(FrameError::TooLarge { size: 11, max: 10 })
        );
    }

    #[test]
    fn split_takes_exactly_one_frame() {
        let mut buf = BytesMut::from(&[0, 0, 0, 2, 7, 8, 0, 0][..]);
        let body = split(&mut buf, 2);
        assert_eq!(&body[..], &[7, 8]);
        assert_eq!(&buf[..], &[0, 0]);
    }
}
