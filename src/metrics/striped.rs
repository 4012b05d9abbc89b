//! Counters that every connection marks, split into stripes so that threads marking at
//! once do not write the same cache line.
//!
//! A relaxed atomic add is a few instructions, but when two cores add to the same line
//! in turn the line travels between them at every add, and that costs each add far more
//! than its instructions: with a request's version, six times and its error codes all
//! marked on its API's counters, and each partition's bytes on its topic's and the
//! all-topics counters, two workers serving produce requests at once would pass those
//! lines back and forth dozens of times a request. Kafka's meters avoid it the same way
//! (a `LongAdder` under each Yammer meter). Each thread marks the stripe it was given
//! when it first marked anything; a scrape sums the stripes.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Stripes beyond the cores would only cost memory: a thread past them shares one.
const MAX_STRIPES: usize = 16;

/// How many stripes each striped counter has: the cores this process may use, at most
/// [`MAX_STRIPES`].
pub fn count() -> usize {
    static COUNT: OnceLock<usize> = OnceLock::new();
    *COUNT.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, MAX_STRIPES)
    })
}

/// The stripe the calling thread marks (threads take stripes in turn as they first
/// mark, so a runtime's workers, started together, get one each).
pub fn mine() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    MINE.with(|m| {
        let mut i = m.get();
        if i == usize::MAX {
            i = NEXT.fetch_add(1, Ordering::Relaxed) % count();
            m.set(i);
        }
        i
    })
}

/// One stripe, alone on its cache lines (128 bytes: a line and the neighbour some cores
/// fetch with it).
#[repr(align(128))]
#[derive(Default)]
struct Padded<T>(T);

/// A `T` per stripe.
pub struct Striped<T> {
    stripes: Box<[Padded<T>]>,
}

impl<T: Default> Default for Striped<T> {
    fn default() -> Self {
        Striped {
            stripes: (0..count()).map(|_| Padded::default()).collect(),
        }
    }
}

impl<T> Striped<T> {
    /// The calling thread's stripe, to mark.
    pub fn mine(&self) -> &T {
        // `mine()` is below `count()`, the stripes' length; `get` keeps a mistake from
        // panicking on a request path.
        let i = mine();
        &self.stripes.get(i).unwrap_or(&self.stripes[0]).0
    }

    /// Every stripe, to sum.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.stripes.iter().map(|p| &p.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    #[test]
    fn marks_from_many_threads_sum_to_every_mark() {
        let s: Arc<Striped<AtomicU64>> = Arc::default();
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        s.mine().fetch_add(1, Ordering::Relaxed);
                    }
                    mine()
                })
            })
            .collect();
        let stripes: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let total: u64 = s.iter().map(|a| a.load(Ordering::Relaxed)).sum();
        assert_eq!(total, 8000);
        assert!(stripes.iter().all(|&i| i < count()));
        if count() > 1 {
            let distinct: std::collections::BTreeSet<_> = stripes.iter().collect();
            assert!(
                distinct.len() > 1,
                "threads share out the stripes: {stripes:?}"
            );
        }
    }

    #[test]
    fn a_thread_keeps_its_stripe() {
        assert_eq!(mine(), mine());
    }
}
