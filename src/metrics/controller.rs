//! Kafka's `kafka.controller:type=ControllerStats` of the ZooKeeper-mode controller, as
//! Strimzi's rules export them: `UncleanLeaderElectionsPerSec` as
//! `kafka_controller_controllerstats_uncleanleaderelections_total`, and the
//! `LeaderElectionRateAndTimeMs` timer as `kafka_controller_controllerstats_
//! leaderelectionrateandtimems` (percentiles in ms over the last five minutes, `_count`).
//! The controller marks them: one time per round of elections it runs (a broker's
//! failure, a preferred-leader rebalance, an ElectLeaders request), one unclean election
//! per partition led from outside its ISR.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::exposition::{Exposition, Kind};
use super::histogram::{LatencyHistogram, Window, PERCENTILES};

#[derive(Default)]
pub struct ControllerStats {
    unclean_elections: AtomicU64,
    elections: LatencyHistogram,
    window: Window,
}

impl ControllerStats {
    /// A round of leader elections took `time`.
    pub fn elected(&self, time: Duration) {
        self.elections.observe(time);
    }

    /// A partition's new leader came from outside its ISR.
    pub fn unclean_election(&self) {
        self.unclean_elections.fetch_add(1, Ordering::Relaxed);
    }

    pub fn unclean_elections(&self) -> u64 {
        self.unclean_elections.load(Ordering::Relaxed)
    }

    pub fn election_rounds(&self) -> u64 {
        self.elections.counts().count()
    }

    pub fn write(&self, out: &mut Exposition, now: Instant) {
        out.family(
            "kafka_controller_controllerstats_uncleanleaderelections_total",
            Kind::Counter,
            "Partitions led from outside their ISR by this controller",
        );
        out.sample("", &[], self.unclean_elections());
        let counts = self.elections.counts();
        let recent = self.window.recent(&counts, now);
        out.family(
            "kafka_controller_controllerstats_leaderelectionrateandtimems",
            Kind::Summary,
            "Time of a round of leader elections, ms (Kafka's percentiles over the last 5 minutes)",
        );
        for (q, label) in PERCENTILES {
            out.sample("", &[("quantile", label)], recent.quantile_ns(q) / 1e6);
        }
        out.sample("_sum", &[], counts.sum_ns() as f64 / 1e6);
        out.sample("_count", &[], counts.count());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::exposition::Format;

    #[test]
    fn exported_under_strimzis_names() {
        let stats = ControllerStats::default();
        stats.elected(Duration::from_millis(4));
        stats.unclean_election();
        let mut out = Exposition::new(Format::Prometheus);
        stats.write(&mut out, Instant::now());
        let text = out.as_str();
        for line in [
            "kafka_controller_controllerstats_uncleanleaderelections_total 1\n",
            "kafka_controller_controllerstats_leaderelectionrateandtimems_count 1\n",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        let p50 = text
            .lines()
            .find(|l| l.contains("leaderelectionrateandtimems{quantile=\"0.50\"}"))
            .unwrap();
        let ms: f64 = p50.rsplit(' ').next().unwrap().parse().unwrap();
        assert!((3.5..=4.5).contains(&ms), "{p50}");
    }
}
