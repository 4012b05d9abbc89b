//! Test frames that tell when the last slice of them is gone.
//!
//! A decoded request's strings and tagged fields are slices of its frame, and any slice
//! kept keeps the whole frame alive. Long-lived state (fetch sessions, group members)
//! must copy out what it keeps; a test decodes a request from a tracked frame, hands it
//! to that state, drops the request, and asserts the frame is gone.

use std::sync::{Arc, Weak};

use bytes::Bytes;

/// A frame's bytes with a token whose last reference goes with them.
struct Owned {
    data: Vec<u8>,
    _token: Arc<()>,
}

impl AsRef<[u8]> for Owned {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// Whether some slice of a tracked frame is still alive.
pub struct FrameAlive(Weak<()>);

impl FrameAlive {
    pub fn alive(&self) -> bool {
        self.0.strong_count() > 0
    }
}

/// `data` as one frame whose life [`FrameAlive`] follows.
pub fn tracked(data: Vec<u8>) -> (Bytes, FrameAlive) {
    let token = Arc::new(());
    let alive = FrameAlive(Arc::downgrade(&token));
    (
        Bytes::from_owner(Owned {
            data,
            _token: token,
        }),
        alive,
    )
}

#[test]
fn a_slice_keeps_the_frame_and_a_copy_does_not() {
    let (frame, alive) = tracked(vec![7; 1024]);
    let slice = frame.slice(0..4);
    let copy = Bytes::copy_from_slice(&frame[0..4]);
    drop(frame);
    assert!(alive.alive());
    drop(slice);
    assert!(!alive.alive());
    assert_eq!(&copy[..], &[7; 4]);
}
