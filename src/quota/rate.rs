//! The measurable stats behind client quotas, as Kafka's metrics library keeps them:
//!
//! - [`Rate`] over a windowed sum (`Rate` over `WindowedSum`, a `SampledStat`): at most
//!   `samples + 1` samples of `window_ms` each (the extra one overlaps the oldest window),
//!   a sample is reset once `samples × window_ms` passed since its last event, and the
//!   rate is the retained sum over the time since the oldest sample began, but never
//!   over fewer than `samples - 1` whole windows (`Rate.windowSize`), so a first burst
//!   counts against a full measuring span.
//! - [`TokenBucket`] (KIP-599, controller mutations): refilled at the quota's rate up to
//!   a burst of `samples × window × quota`, emptied by each record, possibly below zero.
//!
//! Times are milliseconds on one monotonic clock, passed in, so the arithmetic is pure
//! and tested at exact instants. Neither stat allocates after it is built.

/// Kafka's `MetricConfig` as quotas use it: `quota.window.num` samples of
/// `quota.window.size.seconds` each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Windows {
    pub samples: usize,
    pub window_ms: i64,
}

impl Windows {
    pub fn new(samples: usize, window_seconds: u64) -> Windows {
        Windows {
            samples: samples.max(1),
            window_ms: (window_seconds.max(1) as i64).saturating_mul(1000),
        }
    }
}

/// One sample of a `SampledStat`.
#[derive(Clone, Copy, Debug)]
struct Sample {
    value: f64,
    event_count: u64,
    start_ms: i64,
    last_event_ms: i64,
}

impl Sample {
    fn new(now_ms: i64) -> Sample {
        Sample {
            value: 0.0,
            event_count: 0,
            start_ms: now_ms,
            last_event_ms: now_ms,
        }
    }

    fn reset(&mut self, now_ms: i64) {
        *self = Sample::new(now_ms);
    }
}

/// Kafka's `Rate` over a `WindowedSum`, per second.
#[derive(Clone, Debug)]
pub struct Rate {
    windows: Windows,
    samples: Vec<Sample>,
    current: usize,
}

impl Rate {
    pub fn new(windows: Windows) -> Rate {
        Rate {
            windows,
            // One extra for the sample overlapping the oldest window, as Kafka keeps.
            samples: Vec::with_capacity(windows.samples + 1),
            current: 0,
        }
    }

    /// Adds `value` at `now_ms` (a negative value takes back an earlier record).
    pub fn record(&mut self, value: f64, now_ms: i64) {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
        }
        if now_ms - self.samples[self.current].start_ms >= self.windows.window_ms {
            self.advance(now_ms);
        }
        let sample = &mut self.samples[self.current];
        sample.value += value;
        sample.event_count += 1;
        sample.last_event_ms = now_ms;
    }

    fn advance(&mut self, now_ms: i64) {
        self.current = (self.current + 1) % (self.windows.samples + 1);
        match self.samples.get_mut(self.current) {
            Some(s) => s.reset(now_ms),
            None => self.samples.push(Sample::new(now_ms)),
        }
    }

    /// Resets the samples with no event within every window together (Kafka's
    /// `purgeObsoleteSamples`).
    fn purge(&mut self, now_ms: i64) {
        let expire_age = self.windows.samples as i64 * self.windows.window_ms;
        for s in &mut self.samples {
            if now_ms - s.last_event_ms >= expire_age {
                s.reset(now_ms);
            }
        }
    }

    /// The rate per second at `now_ms`.
    pub fn measure(&mut self, now_ms: i64) -> f64 {
        self.measure_over(now_ms).0
    }

    /// The rate per second at `now_ms` and the span it is measured over
    /// ([`Rate::window_size_ms`]), from one pass over the samples (a quota check needs
    /// both on every request).
    pub fn measure_over(&mut self, now_ms: i64) -> (f64, i64) {
        let expire_age = self.windows.samples as i64 * self.windows.window_ms;
        let (mut total, mut oldest) = (0.0, None::<i64>);
        for s in &mut self.samples {
            // `purge`, sample by sample, in the same pass.
            if now_ms - s.last_event_ms >= expire_age {
                s.reset(now_ms);
            }
            total += s.value;
            oldest = Some(oldest.map_or(s.start_ms, |o| o.min(s.start_ms)));
        }
        let span = self.span_ms(oldest.unwrap_or(now_ms), now_ms);
        (total / (span as f64 / 1000.0), span)
    }

    /// The mean of the values recorded within the windows (Kafka's `Avg` over the same
    /// samples); NaN when there are none, as Kafka reports it.
    pub fn average(&mut self, now_ms: i64) -> f64 {
        self.purge(now_ms);
        let (total, count) = self
            .samples
            .iter()
            .fold((0.0, 0u64), |(t, n), s| (t + s.value, n + s.event_count));
        match count {
            0 => f64::NAN,
            n => total / n as f64,
        }
    }

    /// The span the rate is measured over (Kafka's `Rate.windowSize`), at least 1 ms.
    pub fn window_size_ms(&mut self, now_ms: i64) -> i64 {
        self.purge(now_ms);
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms);
        self.span_ms(oldest, now_ms)
    }

    /// Kafka's `Rate.windowSize` from the oldest sample's start.
    fn span_ms(&self, oldest: i64, now_ms: i64) -> i64 {
        let mut elapsed = now_ms - oldest;
        let full_windows = elapsed / self.windows.window_ms;
        let min_full_windows = self.windows.samples as i64 - 1;
        if full_windows < min_full_windows {
            elapsed += (min_full_windows - full_windows) * self.windows.window_ms;
        }
        elapsed.max(1)
    }
}

/// Kafka's `TokenBucket` (per second): starts full.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    tokens: f64,
    last_update_ms: Option<i64>,
}

impl Default for TokenBucket {
    fn default() -> Self {
        TokenBucket::new()
    }
}

impl TokenBucket {
    pub fn new() -> TokenBucket {
        TokenBucket {
            tokens: 0.0,
            last_update_ms: None,
        }
    }

    fn burst(windows: Windows, quota: f64) -> f64 {
        windows.samples as f64 * (windows.window_ms as f64 / 1000.0) * quota
    }

    fn refill(&mut self, windows: Windows, quota: f64, now_ms: i64) {
        let burst = Self::burst(windows, quota);
        self.tokens = match self.last_update_ms {
            None => burst,
            Some(last) => {
                let elapsed_s = (now_ms - last).max(0) as f64 / 1000.0;
                burst.min(self.tokens + quota * elapsed_s)
            }
        };
        self.last_update_ms = Some(now_ms);
    }

    /// The tokens left at `now_ms` (negative: in debt).
    pub fn measure(&mut self, windows: Windows, quota: f64, now_ms: i64) -> f64 {
        self.refill(windows, quota, now_ms);
        self.tokens
    }

    /// Takes `value` tokens at `now_ms`.
    pub fn record(&mut self, windows: Windows, quota: f64, value: f64, now_ms: i64) {
        self.refill(windows, quota, now_ms);
        self.tokens = Self::burst(windows, quota).min(self.tokens - value);
    }
}

/// Kafka's `QuotaUtils.throttleTime`: how long until the measured rate is back at the
/// bound if nothing more is recorded, over the precise window the rate was measured on.
pub fn throttle_time_ms(value: f64, bound: f64, window_size_ms: i64) -> i64 {
    ((value - bound) / bound * window_size_ms as f64).round() as i64
}

/// Kafka's `ControllerMutationQuotaManager.throttleTimeMs`: how long until a bucket in
/// debt (`tokens < 0`) is refilled to zero.
pub fn token_throttle_time_ms(tokens: f64, bound: f64) -> i64 {
    (-tokens / bound * 1000.0).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Windows = Windows {
        samples: 11,
        window_ms: 1000,
    };

    #[test]
    fn a_first_burst_is_measured_over_all_but_one_window() {
        let mut r = Rate::new(W);
        r.record(10_000.0, 0);
        assert_eq!(r.window_size_ms(0), 10_000);
        assert_eq!(r.measure(0), 1_000.0);
        // 5.5 s in: the elapsed time plus the whole windows missing to ten.
        assert_eq!(r.window_size_ms(5_500), 10_500);
        // 12 s in, its last event is older than all eleven windows: reset, nothing left.
        assert_eq!(r.measure(12_000), 0.0);
    }

    #[test]
    fn a_steady_rate_is_measured_as_itself() {
        let mut r = Rate::new(W);
        // 2 000 bytes every 100 ms for 30 s: 20 000 bytes/s.
        let mut t = 0;
        while t < 30_000 {
            r.record(2_000.0, t);
            t += 100;
        }
        let rate = r.measure(t);
        assert!((19_000.0..=21_000.0).contains(&rate), "{rate}");
        // Samples are reused: never more than `samples + 1`.
        assert!(r.samples.len() <= 12);
    }

    /// One pass gives what `measure` and `window_size_ms` give.
    #[test]
    fn measure_over_is_the_rate_and_its_window() {
        let mut r = Rate::new(W);
        let mut t = 0;
        while t < 15_000 {
            r.record(700.0, t);
            t += 350;
            let (rate, span) = r.clone().measure_over(t);
            assert_eq!(rate, r.clone().measure(t));
            assert_eq!(span, r.clone().window_size_ms(t));
        }
    }

    #[test]
    fn a_negative_record_takes_a_value_back() {
        let mut r = Rate::new(W);
        r.record(5_000.0, 0);
        r.record(-5_000.0, 0);
        assert_eq!(r.measure(0), 0.0);
    }

    #[test]
    fn throttle_time_brings_the_rate_back_to_the_bound() {
        // Kafka's ClientQuotaManagerTest: 1 100 bytes/s over a 10 s window with a bound of
        // 1 000: 1 s of throttle.
        assert_eq!(throttle_time_ms(1_100.0, 1_000.0, 10_000), 1_000);
        assert_eq!(throttle_time_ms(1_000.0, 1_000.0, 10_000), 0);
        // And it is what it takes: 11 000 bytes over 10 s + 1 s is the bound.
        let mut r = Rate::new(W);
        r.record(11_000.0, 0);
        let rate = r.measure(0);
        let wait = throttle_time_ms(rate, 1_000.0, r.window_size_ms(0));
        assert_eq!(wait, 1_000);
    }

    #[test]
    fn a_token_bucket_starts_full_and_refills_at_the_quota() {
        let w = Windows {
            samples: 10,
            window_ms: 1000,
        };
        let mut b = TokenBucket::new();
        // Burst: 10 windows × 1 s × 2/s.
        assert_eq!(b.measure(w, 2.0, 0), 20.0);
        b.record(w, 2.0, 30.0, 0);
        assert_eq!(b.measure(w, 2.0, 0), -10.0);
        assert_eq!(token_throttle_time_ms(-10.0, 2.0), 5_000);
        assert_eq!(b.measure(w, 2.0, 5_000), 0.0);
        // Never above the burst.
        assert_eq!(b.measure(w, 2.0, 100_000), 20.0);
    }
}
