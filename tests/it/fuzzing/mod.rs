//! What the short mutation runs in `tests/it/*_fuzz.rs` share: a deterministic generator, the
//! time budget (`SKUA_FUZZ_SECS`), the seed (`SKUA_FUZZ_SEED`), and a mutator for binary
//! Kafka encodings (lengths, counts and varints set to values that break them).
#![allow(dead_code)]

use std::time::Duration;

/// xorshift64*: deterministic, no dependency.
pub struct Rng(pub u64);

impl Rng {
    /// Seeded from `SKUA_FUZZ_SEED` when set, else `default` (each test has its own).
    pub fn from_env(default: u64) -> Rng {
        Rng(std::env::var("SKUA_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(default))
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// How long one run mutates: `SKUA_FUZZ_SECS` when set, else `default_secs`.
pub fn budget(default_secs: f64) -> Duration {
    let secs = std::env::var("SKUA_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_secs);
    Duration::from_secs_f64(secs)
}

/// Values that break length and count fields: negative, zero, just past the end, huge.
pub const NASTY_I32: &[i32] = &[
    -1,
    -2,
    0,
    1,
    0x7f,
    0xff,
    0x7fff,
    0xffff,
    i32::MAX,
    i32::MIN,
    1 << 24,
];

/// One to four changes to `input`: bit flips, byte changes, cuts, nasty 32- and 16-bit
/// fields, maximal unsigned varints (as compact arrays and strings use), duplicated runs.
pub fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = out.len();
        let at = rng.below(len + 1);
        match rng.below(7) {
            0 if len > 0 => out[at.min(len - 1)] ^= 1 << rng.below(8),
            1 if len > 0 => out[at.min(len - 1)] = rng.next() as u8,
            2 => out.truncate(at),
            3 if at + 4 <= len => {
                let v = NASTY_I32[rng.below(NASTY_I32.len())];
                out[at..at + 4].copy_from_slice(&v.to_be_bytes());
            }
            4 if at + 2 <= len => {
                let v = NASTY_I32[rng.below(NASTY_I32.len())] as i16;
                out[at..at + 2].copy_from_slice(&v.to_be_bytes());
            }
            5 => {
                let v: &[u8] = [&[0xff, 0xff, 0xff, 0xff, 0x0f][..], &[0x80; 6]][rng.below(2)];
                out.splice(at..(at + v.len()).min(len), v.iter().copied());
            }
            _ => {
                let end = (at + 1 + rng.below(16)).min(len);
                let chunk = out[at.min(end)..end].to_vec();
                out.splice(at..at, chunk);
            }
        }
    }
    out
}
