//! Command-line arguments.

use std::net::{SocketAddr, ToSocketAddrs};

use kafka_protocol::records::Compression;

pub const USAGE: &str =
    "usage: skua-load --bootstrap HOST:PORT --topic T [--create] [--partitions N] \
[--producers N] [--consumers N] [--records N] [--warmup-records N] [--record-size B] \
[--batch-records R] [--rate REC_PER_S] [--acks -1|1] [--in-flight K] \
[--compression none|lz4|zstd|gzip|snappy] [--phases produce,consume,commit,e2e] \
[--consume-passes N] [--groups N] [--commits N] [--connections N] \
[--replication-factor N] [--min-insync-replicas N] [--broker-pid PID[,PID...]] [--threads N] \
[--tls-truststore FILE [--tls-truststore-password P]] [--json FILE]";

pub struct Phases {
    pub produce: bool,
    pub consume: bool,
    pub commit: bool,
    /// Producers and long-polling consumers at once, each record timed from due to fetched.
    pub e2e: bool,
}

pub struct Args {
    pub bootstrap: SocketAddr,
    pub topic: String,
    pub create: bool,
    pub partitions: i32,
    /// The replication factor of a topic --create makes.
    pub replication_factor: i16,
    /// The topic's `min.insync.replicas` when --create makes it; None: the broker's.
    pub min_insync_replicas: Option<i16>,
    pub producers: usize,
    pub consumers: usize,
    pub records: u64,
    pub warmup_records: u64,
    pub record_size: usize,
    pub batch_records: u64,
    /// Records per second over all producers; None: as fast as the broker answers.
    pub rate: Option<f64>,
    pub acks: i16,
    pub in_flight: usize,
    pub compression: Compression,
    pub phases: Phases,
    /// How many times the consume phase reads every partition from offset 0 to its end.
    pub consume_passes: u64,
    /// Consumer groups committing offsets (the commit phase).
    pub groups: u64,
    /// Offset commits the commit phase times (after --warmup-records unmeasured ones).
    pub commits: u64,
    /// Connections to each coordinator in the commit phase.
    pub connections: usize,
    /// The brokers whose CPU is measured (summed): every broker of a cluster.
    pub broker_pids: Vec<u32>,
    pub threads: usize,
    /// Speak TLS to every broker, trusting the certificates of this truststore (PEM, or
    /// PKCS12 with a password); the bootstrap address is then an SSL listener's.
    pub tls_truststore: Option<String>,
    pub tls_truststore_password: Option<String>,
    pub json: Option<String>,
}

impl Args {
    pub fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut a = Args {
            bootstrap: SocketAddr::from(([127, 0, 0, 1], 9092)),
            topic: String::new(),
            create: false,
            partitions: 1,
            replication_factor: 1,
            min_insync_replicas: None,
            producers: 1,
            consumers: 1,
            records: 100_000,
            warmup_records: 0,
            record_size: 100,
            batch_records: 100,
            rate: None,
            acks: 1,
            in_flight: 5,
            compression: Compression::None,
            phases: Phases {
                produce: true,
                consume: true,
                commit: false,
                e2e: false,
            },
            consume_passes: 1,
            groups: 100,
            commits: 100_000,
            connections: 4,
            broker_pids: Vec::new(),
            threads: 2,
            tls_truststore: None,
            tls_truststore_password: None,
            json: None,
        };
        while let Some(flag) = it.next() {
            if flag == "--create" {
                a.create = true;
                continue;
            }
            let value = it.next().ok_or(format!("{flag} needs a value"))?;
            let bad = |what: &str| format!("{flag}: {what}, got {value:?}");
            let count = || value.parse::<u64>().map_err(|_| bad("a count"));
            match flag.as_str() {
                "--bootstrap" => {
                    a.bootstrap = value
                        .to_socket_addrs()
                        .ok()
                        .and_then(|mut addrs| addrs.next())
                        .ok_or_else(|| bad("HOST:PORT"))?
                }
                "--topic" => a.topic = value.clone(),
                "--partitions" => {
                    a.partitions = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=100_000).contains(n))
                        .ok_or_else(|| bad("1..=100000"))?
                }
                "--replication-factor" => {
                    a.replication_factor = value
                        .parse()
                        .ok()
                        .filter(|n| (1..=1000).contains(n))
                        .ok_or_else(|| bad("1..=1000"))?
                }
                "--min-insync-replicas" => {
                    a.min_insync_replicas = Some(
                        value
                            .parse()
                            .ok()
                            .filter(|n| (1..=1000).contains(n))
                            .ok_or_else(|| bad("1..=1000"))?,
                    )
                }
                "--producers" => a.producers = count()?.clamp(1, 10_000) as usize,
                "--consumers" => a.consumers = count()?.clamp(1, 10_000) as usize,
                "--records" => a.records = count()?,
                "--warmup-records" => a.warmup_records = count()?,
                "--record-size" => a.record_size = count()?.min(16 << 20) as usize,
                "--batch-records" => a.batch_records = count()?.clamp(1, 1_000_000),
                "--rate" => {
                    let r: f64 = value.parse().map_err(|_| bad("records per second"))?;
                    a.rate = (r > 0.0).then_some(r);
                }
                "--acks" => {
                    a.acks = match value.as_str() {
                        "1" => 1,
                        "-1" | "all" => -1,
                        _ => return Err(bad("1 or -1 (acks=0 has no answer to time)")),
                    }
                }
                "--in-flight" => a.in_flight = count()?.clamp(1, 1000) as usize,
                "--compression" => {
                    a.compression = match value.as_str() {
                        "none" => Compression::None,
                        "gzip" => Compression::Gzip,
                        "snappy" => Compression::Snappy,
                        "lz4" => Compression::Lz4,
                        "zstd" => Compression::Zstd,
                        _ => return Err(bad("none, gzip, snappy, lz4 or zstd")),
                    }
                }
                "--phases" => {
                    let list: Vec<&str> = value.split(',').collect();
                    a.phases = Phases {
                        produce: list.contains(&"produce"),
                        consume: list.contains(&"consume"),
                        commit: list.contains(&"commit"),
                        e2e: list.contains(&"e2e"),
                    };
                }
                "--broker-pid" => {
                    a.broker_pids = value
                        .split(',')
                        .map(|pid| pid.parse().map_err(|_| bad("pids, comma-separated")))
                        .collect::<Result<_, _>>()?
                }
                "--consume-passes" => a.consume_passes = count()?.clamp(1, 100),
                "--groups" => a.groups = count()?.clamp(1, 1_000_000),
                "--commits" => a.commits = count()?,
                "--connections" => a.connections = count()?.clamp(1, 1000) as usize,
                "--threads" => a.threads = count()?.clamp(1, 64) as usize,
                "--tls-truststore" => a.tls_truststore = Some(value.clone()),
                "--tls-truststore-password" => a.tls_truststore_password = Some(value.clone()),
                "--json" => a.json = Some(value.clone()),
                _ => return Err(format!("unknown argument {flag}")),
            }
        }
        if a.topic.is_empty() {
            return Err("--topic is required".into());
        }
        if a.tls_truststore_password.is_some() && a.tls_truststore.is_none() {
            return Err("--tls-truststore-password needs --tls-truststore".into());
        }
        Ok(a)
    }
}
