//! A latency histogram with fixed buckets, marked with one atomic add per observation,
//! read two ways at scrape time:
//! - as Kafka's Yammer histogram through Strimzi's rules: the 50th to 99.9th
//!   percentiles in milliseconds over the last few minutes (Kafka's reservoir is biased
//!   to the last five), computed from the difference between the buckets now and a copy
//!   kept from a scrape about five minutes ago ([`Window`]);
//! - as a Prometheus histogram in microseconds, cumulative since start.
//!
//! Buckets: up to 1 µs, then four per doubling (1.25, 1.5, 1.75, 2 µs, 2.5, ...) up to
//! 2^28 µs (about 268 s), then one open bucket. A percentile is interpolated inside its
//! bucket, so it is within an eighth of a doubling of the true value.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::exposition::Exposition;

/// Doublings covered above 1 µs.
const OCTAVES: usize = 28;
const PER_OCTAVE: usize = 4;
/// Bounded buckets (each an inclusive upper bound in ns), then the open one.
const BOUNDS: usize = 1 + OCTAVES * PER_OCTAVE;
const BUCKETS: usize = BOUNDS + 1;

/// The percentiles Kafka's histograms export and Strimzi's rules turn into
/// `quantile` labels (`50thPercentile` becomes `0.50`).
pub const PERCENTILES: [(f64, &str); 6] = [
    (0.50, "0.50"),
    (0.75, "0.75"),
    (0.95, "0.95"),
    (0.98, "0.98"),
    (0.99, "0.99"),
    (0.999, "0.999"),
];

/// How far back the percentiles look, and how often a copy of the buckets is kept.
const WINDOW: Duration = Duration::from_secs(300);
const WINDOW_STEP: Duration = Duration::from_secs(30);

fn bounds_ns() -> &'static [u64; BOUNDS] {
    static B: OnceLock<[u64; BOUNDS]> = OnceLock::new();
    B.get_or_init(|| {
        let mut b = [0u64; BOUNDS];
        b[0] = 1_000;
        for octave in 0..OCTAVES {
            for step in 1..=PER_OCTAVE {
                let base = 1_000u64 << octave;
                b[1 + octave * PER_OCTAVE + step - 1] =
                    base + base * step as u64 / PER_OCTAVE as u64;
            }
        }
        b
    })
}

/// The bucket of an observation of `ns` (the first whose bound is at least `ns`), in a
/// few instructions: every request marks several histograms. The bounds are
/// `250 ns * 2^octave * (4 + step)`, so with `m = ceil(ns / 250) - 1` the octave is
/// `log2(m) - 2` and the step `m >> octave` less 3.
fn bucket_of(ns: u64) -> usize {
    if ns <= 1_000 {
        return 0;
    }
    let m = ns.div_ceil(250) - 1;
    let octave = (63 - m.leading_zeros()) as usize - 2;
    if octave >= OCTAVES {
        return BOUNDS;
    }
    let step = (m >> octave) as usize - 3;
    octave * PER_OCTAVE + step
}

/// The histogram's counts, written by request paths.
pub struct LatencyHistogram {
    buckets: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            sum_ns: AtomicU64::new(0),
        }
    }
}

/// A copy of the counts at one instant.
#[derive(Clone)]
pub struct Counts {
    buckets: Box<[u64; BUCKETS]>,
    sum_ns: u64,
}

impl Counts {
    pub fn zero() -> Counts {
        Counts {
            buckets: Box::new([0; BUCKETS]),
            sum_ns: 0,
        }
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Adds what `h` counted (the stripes of one histogram summed at scrape time).
    pub fn add(&mut self, h: &LatencyHistogram) {
        for (o, b) in self.buckets.iter_mut().zip(h.buckets.iter()) {
            *o += b.load(Ordering::Relaxed);
        }
        self.sum_ns += h.sum_ns.load(Ordering::Relaxed);
    }

    pub fn sum_ns(&self) -> u64 {
        self.sum_ns
    }

    /// `self - earlier`, bucket by bucket.
    fn since(&self, earlier: &Counts) -> Counts {
        let mut out = self.clone();
        for (o, e) in out.buckets.iter_mut().zip(earlier.buckets.iter()) {
            *o = o.saturating_sub(*e);
        }
        out.sum_ns = self.sum_ns.saturating_sub(earlier.sum_ns);
        out
    }

    /// The value at quantile `q` (0..=1), in ns; 0 when nothing was observed (Kafka's
    /// empty histogram reports 0).
    pub fn quantile_ns(&self, q: f64) -> f64 {
        let total = self.count();
        if total == 0 {
            return 0.0;
        }
        let bounds = bounds_ns();
        let rank = q * total as f64;
        let mut below = 0u64;
        for (i, &n) in self.buckets.iter().enumerate() {
            if n == 0 || ((below + n) as f64) < rank {
                below += n;
                continue;
            }
            let lower = if i == 0 { 0 } else { bounds[i - 1] } as f64;
            let upper = bounds.get(i).map_or(lower * 2.0, |&b| b as f64);
            let within = ((rank - below as f64) / n as f64).clamp(0.0, 1.0);
            return lower + (upper - lower) * within;
        }
        bounds[BOUNDS - 1] as f64
    }
}

impl LatencyHistogram {
    pub fn observe(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub fn counts(&self) -> Counts {
        let mut c = Counts::zero();
        for (o, b) in c.buckets.iter_mut().zip(self.buckets.iter()) {
            *o = b.load(Ordering::Relaxed);
        }
        c.sum_ns = self.sum_ns.load(Ordering::Relaxed);
        c
    }
}

/// Copies of one histogram's counts taken by scrapes, for the percentiles' window.
/// Only scrapes touch it, never a request.
#[derive(Default)]
pub struct Window {
    kept: parking_lot::Mutex<VecDeque<(Instant, Counts)>>,
}

impl Window {
    /// The counts of about the last [`WINDOW`] (since start while the first copy is
    /// younger), keeping `now`'s copy when the last kept is [`WINDOW_STEP`] old.
    pub fn recent(&self, now_counts: &Counts, now: Instant) -> Counts {
        let mut kept = self.kept.lock();
        // The base is the newest copy at least WINDOW old; older ones are done with.
        while kept.len() > 1 && now.duration_since(kept[1].0) >= WINDOW {
            kept.pop_front();
        }
        let base = kept
            .front()
            .filter(|(at, _)| now.duration_since(*at) >= WINDOW);
        let recent = match base {
            Some((_, base)) => now_counts.since(base),
            None => now_counts.clone(),
        };
        if kept
            .back()
            .is_none_or(|(at, _)| now.duration_since(*at) >= WINDOW_STEP)
        {
            kept.push_back((now, now_counts.clone()));
        }
        recent
    }
}

/// Writes `counts` as Prometheus histogram samples in µs (buckets at each doubling).
pub fn write_micros(out: &mut Exposition, labels: &[(&str, &str)], counts: &Counts) {
    let bounds = bounds_ns();
    let mut cumulative = 0u64;
    for (i, n) in counts.buckets.iter().enumerate().take(BOUNDS) {
        cumulative += n;
        // 1 µs, then the last bucket of each doubling.
        if i % PER_OCTAVE != 0 {
            continue;
        }
        let mut le = [0u8; 20];
        let le = decimal(bounds[i] / 1_000, &mut le);
        out.sample_with("_bucket", labels, Some(("le", le)), cumulative);
    }
    let total = counts.count();
    out.sample_with("_bucket", labels, Some(("le", "+Inf")), total);
    out.sample("_sum", labels, counts.sum_ns as f64 / 1_000.0);
    out.sample("_count", labels, total);
}

/// `n` in decimal, in `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &str {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    std::str::from_utf8(&buf[i..]).unwrap_or("0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_of_a_value_is_the_first_whose_bound_holds_it() {
        let bounds = bounds_ns();
        let mut values: Vec<u64> = vec![0, 1, 999, 1_000, 1_001, u64::MAX];
        for &b in bounds.iter() {
            values.extend([b - 1, b, b + 1]);
        }
        for v in values {
            let expected = bounds.partition_point(|&b| b < v);
            assert_eq!(bucket_of(v), expected, "{v} ns");
        }
    }

    #[test]
    fn bounds_rise_by_quarter_doublings() {
        let b = bounds_ns();
        assert_eq!(&b[..6], &[1_000, 1_250, 1_500, 1_750, 2_000, 2_500]);
        assert_eq!(b[BOUNDS - 1], 1_000u64 << OCTAVES);
        assert!(b.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn percentiles_land_within_their_bucket() {
        let h = LatencyHistogram::default();
        for us in 1..=1000u64 {
            h.observe(Duration::from_micros(us));
        }
        let c = h.counts();
        assert_eq!(c.count(), 1000);
        for (q, _) in PERCENTILES {
            let got = c.quantile_ns(q) / 1_000.0;
            let want = q * 1000.0;
            assert!(
                (got - want).abs() <= want * 0.125 + 1.0,
                "p{q}: {got} µs, want about {want}"
            );
        }
        assert_eq!(LatencyHistogram::default().counts().quantile_ns(0.99), 0.0);
    }

    #[test]
    fn the_window_forgets_what_is_older_than_five_minutes() {
        let h = LatencyHistogram::default();
        let w = Window::default();
        let t0 = Instant::now();
        for _ in 0..100 {
            h.observe(Duration::from_secs(1));
        }
        assert_eq!(w.recent(&h.counts(), t0).count(), 100);
        for _ in 0..10 {
            h.observe(Duration::from_micros(10));
        }
        // Within the first five minutes the percentiles cover everything since start.
        assert_eq!(w.recent(&h.counts(), t0 + WINDOW_STEP).count(), 110);
        // Six minutes on, with copies kept along the way: only the fast ones are recent.
        for step in 1..=12 {
            w.recent(&h.counts(), t0 + WINDOW_STEP * step);
        }
        let recent = w.recent(&h.counts(), t0 + WINDOW_STEP * 12);
        assert_eq!(recent.count(), 0, "nothing new in the last five minutes");
        let c = h.counts();
        assert_eq!(c.count(), 110, "the µs histogram is cumulative");
    }

    #[test]
    fn micros_buckets_are_cumulative_with_inf_and_count() {
        let h = LatencyHistogram::default();
        h.observe(Duration::from_micros(3));
        h.observe(Duration::from_millis(5));
        let mut out = Exposition::new(super::super::exposition::Format::Prometheus);
        out.family("h", super::super::exposition::Kind::Histogram, "h");
        write_micros(&mut out, &[("request", "Produce")], &h.counts());
        let text = out.as_str();
        assert!(text.contains("h_bucket{request=\"Produce\",le=\"2\"} 0\n"));
        assert!(text.contains("h_bucket{request=\"Produce\",le=\"4\"} 1\n"));
        assert!(text.contains("h_bucket{request=\"Produce\",le=\"8192\"} 2\n"));
        assert!(text.contains("h_bucket{request=\"Produce\",le=\"+Inf\"} 2\n"));
        assert!(text.contains("h_count{request=\"Produce\"} 2\n"));
        assert!(text.contains("h_sum{request=\"Produce\"} 5003\n"));
    }
}
