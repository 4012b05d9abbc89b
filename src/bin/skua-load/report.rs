//! What a run prints (text) and writes (`--json`, for scripts/bench).

use std::fmt::Write;
use std::time::Duration;

use crate::args::Args;
use crate::{commit, consume, e2e, produce};

pub struct Produced {
    pub records_sent: u64,
    pub records_acked: u64,
    pub requests: u64,
    pub seconds: f64,
    pub payload_bytes: u64,
    pub batch_bytes: usize,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub client_cpu_s: f64,
    pub broker_cpu_s: Option<f64>,
}

pub struct Consumed {
    /// The passes that read every partition to its end (fewer than asked after an error).
    pub passes_done: u64,
    pub records: u64,
    pub bytes: u64,
    pub fetches: u64,
    pub seconds: f64,
    pub client_cpu_s: f64,
    pub broker_cpu_s: Option<f64>,
}

pub struct Committed {
    pub groups: u64,
    pub asked: u64,
    pub commits: u64,
    pub seconds: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub client_cpu_s: f64,
    pub broker_cpu_s: Option<f64>,
}

pub struct EndToEnd {
    pub records: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

pub struct Report {
    record_size: u64,
    batch_records: u64,
    partitions: i32,
    consume_passes: u64,
    pub warmup_acked: u64,
    produced: Option<Produced>,
    consumed: Option<Consumed>,
    committed: Option<Committed>,
    end_to_end: Option<EndToEnd>,
    groups: u64,
    /// From the CreateTopics request until every partition has a leader (with --create).
    pub create_seconds: Option<f64>,
    pub errors: Vec<String>,
}

/// CPU seconds per GB of `bytes`.
fn per_gb(cpu_s: f64, bytes: u64) -> f64 {
    cpu_s / (bytes.max(1) as f64 / 1e9)
}

impl Report {
    pub fn new(args: &Args) -> Report {
        Report {
            record_size: args.record_size as u64,
            batch_records: args.batch_records,
            partitions: args.partitions,
            consume_passes: args.consume_passes,
            warmup_acked: 0,
            produced: None,
            consumed: None,
            committed: None,
            end_to_end: None,
            groups: args.groups,
            create_seconds: None,
            errors: Vec::new(),
        }
    }

    pub fn produced(
        &mut self,
        o: &produce::Outcome,
        elapsed: Duration,
        client_cpu: Duration,
        broker_cpu: Option<Duration>,
        batch_bytes: usize,
    ) {
        self.errors.extend(o.first_error.clone());
        let h = &o.latency;
        self.produced = Some(Produced {
            records_sent: o.requests * self.batch_records,
            records_acked: o.records_acked,
            requests: o.requests,
            seconds: elapsed.as_secs_f64(),
            payload_bytes: o.records_acked * self.record_size,
            batch_bytes,
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            client_cpu_s: client_cpu.as_secs_f64(),
            broker_cpu_s: broker_cpu.map(|d| d.as_secs_f64()),
        });
    }

    pub fn consumed(
        &mut self,
        o: &consume::Outcome,
        passes_done: u64,
        elapsed: Duration,
        client_cpu: Duration,
        broker_cpu: Option<Duration>,
    ) {
        self.errors.extend(o.errors.iter().cloned());
        self.consumed = Some(Consumed {
            passes_done,
            records: o.records,
            bytes: o.bytes,
            fetches: o.fetches,
            seconds: elapsed.as_secs_f64(),
            client_cpu_s: client_cpu.as_secs_f64(),
            broker_cpu_s: broker_cpu.map(|d| d.as_secs_f64()),
        });
    }

    pub fn committed(
        &mut self,
        o: &commit::Outcome,
        asked: u64,
        elapsed: Duration,
        client_cpu: Duration,
        broker_cpu: Option<Duration>,
    ) {
        self.errors.extend(o.first_error.clone());
        let h = &o.latency;
        self.committed = Some(Committed {
            groups: self.groups,
            asked,
            commits: o.commits,
            seconds: elapsed.as_secs_f64(),
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            client_cpu_s: client_cpu.as_secs_f64(),
            broker_cpu_s: broker_cpu.map(|d| d.as_secs_f64()),
        });
    }

    /// The records of an e2e run, timed from due to fetched.
    pub fn end_to_end(&mut self, o: &e2e::Outcome) {
        self.errors.extend(o.first_error.clone());
        let h = &o.latency;
        self.end_to_end = Some(EndToEnd {
            records: o.records,
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        });
    }

    /// Whether the run adds up: no errors, every record sent acked, and (when both phases
    /// ran) every record acked, warm-up included, fetched back exactly once a pass.
    pub fn check(&mut self) -> bool {
        if let Some(p) = &self.produced {
            if p.records_sent != p.records_acked {
                self.errors.push(format!(
                    "{} records sent, {} acked",
                    p.records_sent, p.records_acked
                ));
            }
            if let Some(c) = &self.consumed {
                let acked = p.records_acked + self.warmup_acked;
                if c.records != acked * self.consume_passes {
                    // Records are counted over every pass, so a run of two passes that
                    // stopped in the second has fetched more than were acked, once.
                    let passes = match (self.consume_passes, c.passes_done) {
                        (1, 1) => String::new(),
                        (n, done) if done == n => format!(" in {n} passes"),
                        (n, done) => format!(
                            " in {done} whole passes of {n} and the part of the next before the error"
                        ),
                    };
                    self.errors.push(format!(
                        "{acked} records acked, {} fetched{passes}",
                        c.records
                    ));
                }
            }
        }
        if let (Some(p), Some(e)) = (&self.produced, &self.end_to_end) {
            if e.records != p.records_acked {
                self.errors.push(format!(
                    "{} records acked, {} fetched end to end",
                    p.records_acked, e.records
                ));
            }
        }
        if let Some(c) = &self.committed {
            if c.commits != c.asked {
                self.errors
                    .push(format!("{} commits asked, {} accepted", c.asked, c.commits));
            }
        }
        self.errors.is_empty()
    }

    pub fn text(&self) -> String {
        let mut s = String::new();
        if let Some(t) = self.create_seconds {
            let _ = writeln!(
                s,
                "create: {} partitions with a leader in {t:.3} s",
                self.partitions
            );
        }
        if let Some(p) = &self.produced {
            let _ = writeln!(
                s,
                "produce: {} records ({} requests, {} B batches) in {:.3} s: {:.0} rec/s, {:.2} MB/s; \
latency µs p50 {} p99 {} p99.9 {} max {}; CPU s/GB client {:.2} broker {}",
                p.records_acked,
                p.requests,
                p.batch_bytes,
                p.seconds,
                p.records_acked as f64 / p.seconds,
                p.payload_bytes as f64 / 1e6 / p.seconds,
                p.p50_us,
                p.p99_us,
                p.p999_us,
                p.max_us,
                per_gb(p.client_cpu_s, p.payload_bytes),
                p.broker_cpu_s
                    .map_or("-".into(), |b| format!("{:.2}", per_gb(b, p.payload_bytes))),
            );
        }
        if let Some(c) = &self.consumed {
            let _ = writeln!(
                s,
                "consume: {} records, {} bytes ({} fetches over {} partitions, {} passes) in {:.3} s: {:.0} rec/s, {:.2} MB/s; \
CPU s/GB client {:.2} broker {}",
                c.records,
                c.bytes,
                c.fetches,
                self.partitions,
                self.consume_passes,
                c.seconds,
                c.records as f64 / c.seconds,
                c.bytes as f64 / 1e6 / c.seconds,
                per_gb(c.client_cpu_s, c.bytes),
                c.broker_cpu_s
                    .map_or("-".into(), |b| format!("{:.2}", per_gb(b, c.bytes))),
            );
        }
        if let Some(e) = &self.end_to_end {
            let _ = writeln!(
                s,
                "end to end: {} records, due to fetched latency µs p50 {} p99 {} p99.9 {} max {}",
                e.records, e.p50_us, e.p99_us, e.p999_us, e.max_us,
            );
        }
        if let Some(c) = &self.committed {
            let per = |cpu: f64| cpu * 1e6 / c.commits.max(1) as f64;
            let _ = writeln!(
                s,
                "commit: {} offset commits from {} groups in {:.3} s: {:.0} commits/s; \
latency µs p50 {} p99 {} p99.9 {} max {}; CPU µs/commit client {:.1} broker {}",
                c.commits,
                c.groups,
                c.seconds,
                c.commits as f64 / c.seconds,
                c.p50_us,
                c.p99_us,
                c.p999_us,
                c.max_us,
                per(c.client_cpu_s),
                c.broker_cpu_s
                    .map_or("-".into(), |b| format!("{:.1}", per(b))),
            );
        }
        for e in &self.errors {
            let _ = writeln!(s, "error: {e}");
        }
        s
    }

    /// Flat JSON (no serde derive needed for a handful of numbers).
    pub fn json(&self) -> String {
        let mut fields: Vec<(String, serde_json::Value)> = vec![
            ("warmup_acked".into(), self.warmup_acked.into()),
            ("record_size".into(), self.record_size.into()),
            ("partitions".into(), self.partitions.into()),
            ("errors".into(), self.errors.clone().into()),
            ("create_seconds".into(), self.create_seconds.into()),
        ];
        if let Some(p) = &self.produced {
            fields.extend([
                ("produce_records_sent".into(), p.records_sent.into()),
                ("produce_records_acked".into(), p.records_acked.into()),
                ("produce_requests".into(), p.requests.into()),
                ("produce_seconds".into(), p.seconds.into()),
                ("produce_bytes".into(), p.payload_bytes.into()),
                ("produce_p50_us".into(), p.p50_us.into()),
                ("produce_p99_us".into(), p.p99_us.into()),
                ("produce_p999_us".into(), p.p999_us.into()),
                ("produce_max_us".into(), p.max_us.into()),
                ("produce_client_cpu_s".into(), p.client_cpu_s.into()),
                ("produce_broker_cpu_s".into(), p.broker_cpu_s.into()),
            ]);
        }
        if let Some(c) = &self.consumed {
            fields.extend([
                ("consume_passes".into(), self.consume_passes.into()),
                ("consume_passes_done".into(), c.passes_done.into()),
                ("consume_records".into(), c.records.into()),
                ("consume_bytes".into(), c.bytes.into()),
                ("consume_fetches".into(), c.fetches.into()),
                ("consume_seconds".into(), c.seconds.into()),
                ("consume_client_cpu_s".into(), c.client_cpu_s.into()),
                ("consume_broker_cpu_s".into(), c.broker_cpu_s.into()),
            ]);
        }
        if let Some(e) = &self.end_to_end {
            fields.extend([
                ("e2e_records".into(), e.records.into()),
                ("e2e_p50_us".into(), e.p50_us.into()),
                ("e2e_p99_us".into(), e.p99_us.into()),
                ("e2e_p999_us".into(), e.p999_us.into()),
                ("e2e_max_us".into(), e.max_us.into()),
            ]);
        }
        if let Some(c) = &self.committed {
            fields.extend([
                ("commit_groups".into(), c.groups.into()),
                ("commit_count".into(), c.commits.into()),
                ("commit_seconds".into(), c.seconds.into()),
                ("commit_p50_us".into(), c.p50_us.into()),
                ("commit_p99_us".into(), c.p99_us.into()),
                ("commit_p999_us".into(), c.p999_us.into()),
                ("commit_max_us".into(), c.max_us.into()),
                ("commit_client_cpu_s".into(), c.client_cpu_s.into()),
                ("commit_broker_cpu_s".into(), c.broker_cpu_s.into()),
            ]);
        }
        let map: serde_json::Map<String, serde_json::Value> = fields.into_iter().collect();
        serde_json::Value::Object(map).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(passes: u64) -> Report {
        let args = ["--topic", "t", "--batch-records", "100", "--consume-passes"]
            .map(String::from)
            .into_iter()
            .chain([passes.to_string()]);
        let mut report = Report::new(&Args::parse(args).unwrap());
        let mut produced = produce::Outcome::new();
        produced.requests = 10;
        produced.records_acked = 1_000;
        report.produced(&produced, Duration::from_secs(1), Duration::ZERO, None, 0);
        report
    }

    /// Two passes of which the second stopped on an error: the records fetched are more
    /// than were acked and fewer than twice, and the check says why.
    #[test]
    fn a_run_cut_short_says_how_many_passes_it_read_whole() {
        let mut report = report(2);
        let consumed = consume::Outcome {
            fetches: 12,
            records: 1_200,
            bytes: 1,
            errors: vec!["consume pass 2 of 2: fetch 2 from 127.0.0.1:9093: no response".into()],
        };
        report.consumed(&consumed, 1, Duration::from_secs(1), Duration::ZERO, None);
        assert!(!report.check());
        assert_eq!(
            report.errors,
            [
                "consume pass 2 of 2: fetch 2 from 127.0.0.1:9093: no response",
                "1000 records acked, 1200 fetched in 1 whole passes of 2 and the part of the \
                 next before the error"
            ]
        );
    }

    #[test]
    fn whole_passes_that_fetched_too_much_say_so_and_exact_ones_pass() {
        let mut report = report(2);
        let consumed = consume::Outcome {
            records: 2_400,
            ..Default::default()
        };
        report.consumed(&consumed, 2, Duration::from_secs(1), Duration::ZERO, None);
        assert!(!report.check());
        assert_eq!(
            report.errors,
            ["1000 records acked, 2400 fetched in 2 passes"]
        );

        let mut report = report_exact();
        assert!(report.check(), "{:?}", report.errors);
    }

    fn report_exact() -> Report {
        let mut report = report(1);
        let consumed = consume::Outcome {
            records: 1_000,
            ..Default::default()
        };
        report.consumed(&consumed, 1, Duration::from_secs(1), Duration::ZERO, None);
        report
    }
}
