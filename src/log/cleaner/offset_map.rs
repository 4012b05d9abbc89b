//! The cleaner's key → latest offset map (Kafka's `SkimpyOffsetMap`), in a fixed budget.
//!
//! Each slot holds a 128-bit digest of a key and an offset: 24 bytes, as in Kafka, so a map
//! of `log.cleaner.dedupe.buffer.size / log.cleaner.threads` bytes holds that many / 24
//! slots, filled to `log.cleaner.io.buffer.load.factor` at most. Keys themselves are never
//! stored. Two keys with the same digest would be taken for one, so the digest is keyed
//! SipHash with keys drawn at random for each map: a client cannot choose keys that
//! collide (Kafka's MD5 is unkeyed). Open addressing with double hashing over a prime
//! number of slots (every step then visits every slot); the table is allocated zeroed, so
//! the pages of slots never touched are never made resident.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// Bytes one slot takes: the digest's two halves and the offset.
pub const SLOT_BYTES: usize = 24;

pub struct OffsetMap {
    /// Digest halves per slot; the second half is never 0 in a used slot.
    digests: Vec<[u64; 2]>,
    offsets: Vec<i64>,
    /// Slots may be filled up to this many.
    capacity: usize,
    entries: usize,
    /// The largest offset the map has seen (Kafka's `latestOffset`); -1 when none.
    latest_offset: i64,
    hash_keys: [RandomState; 2],
}

impl OffsetMap {
    /// A map in at most `memory_bytes`, filled to `load_factor` of its slots at most.
    pub fn new(memory_bytes: usize, load_factor: f64) -> Self {
        let slots = prev_prime((memory_bytes / SLOT_BYTES).max(3));
        let capacity = ((slots as f64 * load_factor.clamp(0.01, 1.0)) as usize).clamp(1, slots - 1);
        OffsetMap {
            digests: vec![[0; 2]; slots],
            offsets: vec![0; slots],
            capacity,
            entries: 0,
            latest_offset: -1,
            hash_keys: [RandomState::new(), RandomState::new()],
        }
    }

    fn digest(&self, key: &[u8]) -> [u64; 2] {
        let half = |state: &RandomState| {
            let mut h = state.build_hasher();
            h.write(key);
            h.finish()
        };
        [half(&self.hash_keys[0]), half(&self.hash_keys[1]) | 1]
    }

    /// The slot holding `digest`, or the empty one where it would go.
    fn find(&self, digest: [u64; 2]) -> usize {
        let slots = self.digests.len() as u64;
        // 1..slots-1: coprime with the prime slot count.
        let step = (1 + digest[1] % (slots - 1)) as usize;
        let mut slot = (digest[0] % slots) as usize;
        loop {
            let d = self.digests[slot];
            if d[1] == 0 || d == digest {
                return slot;
            }
            slot += step;
            if slot >= self.digests.len() {
                slot -= self.digests.len();
            }
        }
    }

    /// The table's slots (Kafka's buffer utilization is the keys over these).
    pub fn slots(&self) -> usize {
        self.digests.len()
    }

    /// Whether another new key fits.
    pub fn is_full(&self) -> bool {
        self.entries >= self.capacity
    }

    /// Records `offset` as the latest for `key`. Returns false, storing nothing, when the
    /// key is new and the map is full.
    pub fn put(&mut self, key: &[u8], offset: i64) -> bool {
        let digest = self.digest(key);
        let slot = self.find(digest);
        if self.digests[slot][1] == 0 {
            if self.is_full() {
                return false;
            }
            self.digests[slot] = digest;
            self.entries += 1;
        }
        self.offsets[slot] = offset;
        self.latest_offset = self.latest_offset.max(offset);
        true
    }

    /// The latest offset recorded for `key`, or -1.
    pub fn get(&self, key: &[u8]) -> i64 {
        let slot = self.find(self.digest(key));
        match self.digests[slot][1] {
            0 => -1,
            _ => self.offsets[slot],
        }
    }

    pub fn latest_offset(&self) -> i64 {
        self.latest_offset
    }

    /// Kafka's `updateLatestOffset`: the map covers the log up to here (offsets without
    /// keys, or a gap, still count as read).
    pub fn update_latest_offset(&mut self, offset: i64) {
        self.latest_offset = self.latest_offset.max(offset);
    }

    pub fn len(&self) -> usize {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// How many keys fit.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// The largest prime at most `n` (n >= 3). Trial division: at most a few hundred
/// candidates of about sqrt(n) divisions each, once per map.
fn prev_prime(n: usize) -> usize {
    let is_prime = |m: usize| m >= 2 && (2..).take_while(|d| d * d <= m).all(|d| m % d != 0);
    (2..=n).rev().find(|&m| is_prime(m)).unwrap_or(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latest_offset_per_key_within_the_budget() {
        // 240 bytes: 10 slots, a prime 7 of them, filled to 0.9 = 6 keys.
        let mut map = OffsetMap::new(240, 0.9);
        assert_eq!(map.capacity(), 6);
        for (i, key) in [b"a", b"b", b"c", b"a"].iter().enumerate() {
            assert!(map.put(*key, i as i64));
        }
        assert_eq!((map.get(b"a"), map.get(b"b"), map.get(b"zz")), (3, 1, -1));
        assert_eq!((map.len(), map.latest_offset()), (3, 3));
        for (i, key) in [b"d", b"e", b"f"].iter().enumerate() {
            assert!(map.put(*key, 10 + i as i64));
        }
        assert!(map.is_full());
        assert!(!map.put(b"g", 20), "a new key does not fit");
        assert!(map.put(b"a", 21), "a known key is updated");
        assert_eq!((map.get(b"g"), map.get(b"a")), (-1, 21));
        map.update_latest_offset(30);
        assert_eq!(map.latest_offset(), 30);
    }

    #[test]
    fn many_keys_at_a_high_load_factor() {
        let mut map = OffsetMap::new(1 << 20, 0.9);
        let n = map.capacity();
        // 43690 slots fit; 43669 is the prime below.
        assert_eq!(n, 43669 * 9 / 10);
        for i in 0..n {
            assert!(map.put(format!("key-{i}").as_bytes(), i as i64));
        }
        for i in (0..n).step_by(97) {
            assert_eq!(map.get(format!("key-{i}").as_bytes()), i as i64);
        }
        assert_eq!(map.get(b"never"), -1);
    }
}
