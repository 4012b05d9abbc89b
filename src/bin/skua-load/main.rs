//! skua-load: a native load generator and latency probe for any Kafka broker (skua or
//! Apache Kafka), on skua's own client.
//!
//!   skua-load --bootstrap HOST:PORT --topic T [--create] [--partitions N]
//!             [--producers N] [--consumers N] [--records N] [--warmup-records N]
//!             [--record-size B] [--batch-records R] [--rate REC_PER_S] [--acks -1|1]
//!             [--in-flight K] [--compression none|lz4|zstd|gzip|snappy]
//!             [--phases produce,consume,commit,e2e] [--consume-passes N]
//!             [--groups N] [--commits N]
//!             [--connections N] [--replication-factor N]
//!             [--min-insync-replicas N] [--broker-pid PID[,PID...]]
//!             [--tls-truststore FILE [--tls-truststore-password P]] [--json FILE]
//!
//! Producers send one batch of R records per request over N connections (per leader),
//! spread over the partitions, each request to the partition's leader; consumers then read
//! every partition back from offset 0 from its leader over their own connections,
//! counting records from batch headers (`--consume-passes` times over, so a short
//! produce phase still gives the consume phase enough to time). It reports records/s, MB/s, the
//! produce latency in microseconds (p50/p99/p99.9/max, from an HDR histogram), and the
//! CPU of this process and of the brokers (`--broker-pid`, summed) per GB, separately. It exits
//! non-zero if any request failed or the records fetched are not the records acked.
//!
//! The e2e phase runs the producers (usually at a fixed `--rate`) while the consumers
//! long-poll the same partitions from their ends, and times every record from the moment
//! its request was due to the moment a fetch answer brought it back, in microseconds.
//!
//! With `--tls-truststore` every connection speaks TLS (skua's own rustls client), so a
//! broker's SSL listener is measured by a client far cheaper than the Java one.
//!
//! The commit phase has N consumer groups commit offsets of the topic's partitions to
//! their coordinators over `--connections` connections each, `--in-flight` commits
//! outstanding per connection: commits/s, latency in µs and broker CPU per commit.

mod args;
mod commit;
mod consume;
mod cpu;
mod e2e;
mod produce;
mod records;
mod report;
mod setup;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use skua::client::Connection;

use args::Args;

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("skua-load: {e}\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("skua-load: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("skua-load: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the phases; Ok(false) when the run completed but its numbers do not add up.
async fn run(args: Args) -> Result<bool, String> {
    if let Some(truststore) = &args.tls_truststore {
        setup::use_tls(truststore, args.tls_truststore_password.as_deref())?;
    }
    let admin = setup::connect(args.bootstrap).await?;
    let creating = Instant::now();
    if args.create {
        setup::create_topic(
            &admin,
            &args.topic,
            args.partitions,
            args.replication_factor,
            args.min_insync_replicas,
        )
        .await?;
    }
    let leaders = setup::wait_for_leaders(&admin, &args.topic, args.partitions).await?;
    let created = creating.elapsed();
    let produce_version = admin.version(0, 3, 12)?;
    let fetch_version = admin.version(1, 4, 12)?;
    let partitions: Vec<i32> = (0..args.partitions).collect();
    let mut report = report::Report::new(&args);
    if args.create {
        report.create_seconds = Some(created.as_secs_f64());
    }

    if args.phases.produce || args.phases.e2e {
        // Each producer has its own connection to every leader.
        let mut producers = Vec::with_capacity(args.producers);
        for _ in 0..args.producers {
            producers.push(setup::connect_leaders(leaders.values().copied()).await?);
        }
        let batch = records::batch(
            args.batch_records as usize,
            args.record_size,
            args.compression,
            0x5eed,
        );
        let plans = |records: u64, rate: Option<f64>, trace: bool| {
            produce_plans(
                &args,
                &partitions,
                &leaders,
                &producers,
                &batch,
                produce_version,
                records,
                rate,
                trace,
            )
        };
        if args.phases.produce {
            if args.warmup_records > 0 {
                let warm = produce::run_all(plans(args.warmup_records, args.rate, false)).await;
                report.warmup_acked = warm.records_acked;
                if warm.errors > 0 {
                    report.errors.extend(warm.first_error);
                }
            }
            let meter = cpu::Meter::start(&args.broker_pids);
            let started = Instant::now();
            let outcome = produce::run_all(plans(args.records, args.rate, false)).await;
            let elapsed = started.elapsed();
            let (client_cpu, broker_cpu) = meter.elapsed();
            report.produced(&outcome, elapsed, client_cpu, broker_cpu, batch.len());
        }
        if args.phases.e2e {
            let readers = readers(&args, &partitions, &leaders).await?;
            let list_offsets_version = admin.version(2, 1, 7)?;
            let e2e = |records: u64| {
                e2e::run(
                    plans(records, args.rate, true),
                    &readers,
                    &args.topic,
                    fetch_version,
                    list_offsets_version,
                )
            };
            if args.warmup_records > 0 {
                let warm = e2e(args.warmup_records).await;
                report.errors.extend(warm.first_error);
                report.errors.extend(warm.produced.first_error);
            }
            let meter = cpu::Meter::start(&args.broker_pids);
            let started = Instant::now();
            let outcome = e2e(args.records).await;
            let elapsed = started.elapsed();
            let (client_cpu, broker_cpu) = meter.elapsed();
            report.produced(
                &outcome.produced,
                elapsed,
                client_cpu,
                broker_cpu,
                batch.len(),
            );
            report.end_to_end(&outcome);
        }
    }

    if args.phases.consume {
        let work = readers(&args, &partitions, &leaders).await?;
        let meter = cpu::Meter::start(&args.broker_pids);
        let started = Instant::now();
        let mut outcome = consume::Outcome::default();
        let mut passes_done = 0;
        // The passes one after another: each reads every partition from offset 0 again.
        // A pass that failed ends the phase: the next would only wait on the same fault.
        for pass in 1..=args.consume_passes {
            let tasks: Vec<_> = work
                .iter()
                .map(|reader| {
                    tokio::spawn(consume::run(
                        reader.connection.clone(),
                        args.topic.clone(),
                        reader.partitions.clone(),
                        fetch_version,
                    ))
                })
                .collect();
            for t in tasks {
                let mut one = t.await.map_err(|e| format!("consumer task: {e}"))?;
                for e in &mut one.errors {
                    *e = format!("consume pass {pass} of {}: {e}", args.consume_passes);
                }
                outcome.add(&one);
            }
            if !outcome.errors.is_empty() {
                break;
            }
            passes_done = pass;
        }
        let elapsed = started.elapsed();
        let (client_cpu, broker_cpu) = meter.elapsed();
        report.consumed(&outcome, passes_done, elapsed, client_cpu, broker_cpu);
    }

    if args.phases.commit {
        let version = admin.version(8, 2, 8)?;
        let plan = Arc::new(commit::Plan {
            topic: args.topic.clone(),
            partitions: args.partitions,
            groups: args.groups,
            connections: args.connections,
            in_flight: args.in_flight,
            version,
        });
        let coordinators = Arc::new(commit::coordinators(&admin, &plan).await?);
        // Every group's first commit creates it: at least one per group before the clock.
        let warmup = args.warmup_records.max(args.groups);
        let warm = commit::run(plan.clone(), coordinators.clone(), warmup).await;
        report.errors.extend(warm.first_error);
        let meter = cpu::Meter::start(&args.broker_pids);
        let started = Instant::now();
        let outcome = commit::run(plan, coordinators, args.commits).await;
        let elapsed = started.elapsed();
        let (client_cpu, broker_cpu) = meter.elapsed();
        report.committed(&outcome, args.commits, elapsed, client_cpu, broker_cpu);
    }

    let consistent = report.check();
    print!("{}", report.text());
    if let Some(path) = &args.json {
        std::fs::write(path, report.json()).map_err(|e| format!("write {path}: {e}"))?;
    }
    Ok(consistent)
}

/// Splits `records` over the producers (whole batches, the remainder to the first ones)
/// and each producer's partitions: partition p goes to producer p % producers, over that
/// producer's connection to p's leader.
#[allow(clippy::too_many_arguments)]
fn produce_plans(
    args: &Args,
    partitions: &[i32],
    leaders: &BTreeMap<i32, SocketAddr>,
    producers: &[BTreeMap<SocketAddr, Arc<Connection>>],
    batch: &bytes::Bytes,
    version: i16,
    records: u64,
    rate: Option<f64>,
    trace: bool,
) -> Vec<produce::Plan> {
    let n = args.producers as u64;
    let batches = records.div_ceil(args.batch_records);
    (0..n)
        .map(|i| {
            let mine: Vec<i32> = match partitions.len() as u64 >= n {
                true => partitions
                    .iter()
                    .copied()
                    .filter(|p| *p as u64 % n == i)
                    .collect(),
                // More producers than partitions: they share them.
                false => vec![partitions[(i % partitions.len() as u64) as usize]],
            };
            let conns = &producers[i as usize];
            let routed = mine
                .into_iter()
                .filter_map(|p| Some((p, conns.get(leaders.get(&p)?)?.clone())))
                .collect();
            let requests = batches / n + u64::from(i < batches % n);
            // Each producer carries its share of the rate, in requests per second.
            let interval = rate.map(|r| {
                let per_producer = r / n as f64 / args.batch_records as f64;
                Duration::from_secs_f64(1.0 / per_producer.max(1e-6))
            });
            produce::Plan {
                topic: args.topic.clone(),
                partitions: routed,
                batch: batch.clone(),
                batch_records: args.batch_records,
                requests,
                interval,
                acks: args.acks,
                in_flight: args.in_flight,
                version,
                trace,
            }
        })
        .collect()
}

/// The consumers' share of the partitions: consumer i reads partitions p with
/// p % consumers == i, from each one's leader, over a connection of its own per leader.
async fn readers(
    args: &Args,
    partitions: &[i32],
    leaders: &BTreeMap<i32, SocketAddr>,
) -> Result<Vec<e2e::Reader>, String> {
    let mut work = Vec::new();
    for i in 0..args.consumers {
        let mine: Vec<i32> = partitions
            .iter()
            .copied()
            .filter(|p| *p as usize % args.consumers == i)
            .collect();
        let conns =
            setup::connect_leaders(mine.iter().filter_map(|p| leaders.get(p).copied())).await?;
        for (addr, connection) in conns {
            let partitions = mine
                .iter()
                .copied()
                .filter(|p| leaders.get(p) == Some(&addr))
                .collect();
            work.push(e2e::Reader {
                connection,
                partitions,
            });
        }
    }
    Ok(work)
}
