//! The key order of the JVM maps Kafka 3.9 hands to its JSON writer.
//!
//! Kafka builds each znode's JSON from a Scala or Java map and Jackson writes the keys in
//! that map's iteration order, which follows the keys' hash codes. To write znodes byte
//! for byte as Kafka does, skua orders keys the same way. Three map kinds occur:
//! - Scala 2.13 `mutable.HashMap`: buckets `h & (len - 1)` in index order, a bucket's
//!   entries by (signed) hash, with `h = s.hashCode ^ (s.hashCode >>> 16)`; the table
//!   starts at 16 slots and doubles when an insert would reach 3/4 of it.
//! - Java `ConcurrentHashMap` (behind `java.util.Properties`, Kafka's config maps): bins
//!   `(h ^ (h >>> 16)) & 0x7fffffff & (n - 1)` in index order, 16 bins doubling at 3/4.
//! - Scala immutable maps of up to four entries keep insertion order; the larger ones
//!   (partition state) have fixed key sets, so their orders are written out in `znodes`.
//!
//! The tests check these against JSON read from a Kafka 3.9.1 cluster's ZooKeeper.

/// Java's `String.hashCode`: `31 * h + c` over the UTF-16 code units, wrapping.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(c as i32))
}

fn spread(s: &str) -> i32 {
    let h = java_string_hash(s);
    h ^ ((h as u32) >> 16) as i32
}

/// The table length of a Scala `mutable.HashMap` that started empty (16 slots) after
/// `entries` inserts: it doubles when `size + 1 >= 0.75 * length` before an insert.
pub fn scala_grown_table_len(entries: usize) -> usize {
    let mut len = 16usize;
    for size in 0..entries {
        if size + 1 >= len * 3 / 4 {
            len *= 2;
        }
    }
    len
}

/// `keys` in the iteration order of a Scala 2.13 `mutable.HashMap` of table length `len`.
pub fn scala_mutable_order<K: AsRef<str>>(keys: &mut [K], len: usize) {
    let mask = (len - 1) as i32;
    keys.sort_by_key(|k| {
        let h = spread(k.as_ref());
        (h & mask, h)
    });
}

/// `keys` in the iteration order of the `ConcurrentHashMap` inside `java.util.Properties`
/// (created empty: 16 bins, doubling once it holds 3/4 of its bins). Keys sharing a bin
/// keep the order they come in (Kafka's insertion order is not known here; they rarely meet).
pub fn java_properties_order<K: AsRef<str>>(keys: &mut [K]) {
    let mut bins = 16usize;
    while keys.len() >= bins * 3 / 4 {
        bins *= 2;
    }
    let mask = (bins - 1) as i32;
    keys.sort_by_key(|k| spread(k.as_ref()) & 0x7fff_ffff & mask);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_the_jvm() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("version"), 351608024);
        assert_eq!(java_string_hash("a"), 97);
    }

    #[test]
    fn table_grows_at_three_quarters() {
        assert_eq!(scala_grown_table_len(11), 16);
        assert_eq!(scala_grown_table_len(12), 32);
        assert_eq!(scala_grown_table_len(23), 32);
        assert_eq!(scala_grown_table_len(24), 64);
    }
}
