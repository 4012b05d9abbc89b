//! One scrape: the marked metrics, then the gauges computed from the broker's state at
//! this moment, written to a [`Sink`] a bounded part at a time.
//!
//! What the computed gauges read, and why no produce or fetch waits on it:
//! - the replica manager's partitions: a copy of the handles (the map's shards are held
//!   only for the copy), then per partition atomics (offsets, the log's published size
//!   and segment count) and one shared read of its replication state, which appends
//!   also only read;
//! - the controller's published topics and brokers (`Controller::topics`), on the
//!   active controller only, as Kafka's ZooKeeper-mode controller reports them;
//! - the group coordinator's committed offsets: one read per `__consumer_offsets`
//!   partition, queued on that partition's owner like any request's;
//! - `/proc/self`.
//!
//! Families that grow with the cluster are flushed to the sink every
//! [`Exposition::FLUSH_BYTES`], so a scrape holds the partitions' handles, one buffer
//! and (for lag) the committed offsets, whatever the number of partitions.

use std::collections::BTreeSet;
use std::io;
use std::sync::Arc;
use std::time::Instant;

use super::exposition::{Exposition, Format, Kind, Sink};
use super::process;
use crate::broker::Broker;
use crate::coordinator::group::shard::GroupOffsetsView;
use crate::replica::Partition;

/// Writes every metric of `broker` in `format` to `sink`.
pub async fn scrape(broker: &Broker, format: Format, sink: &mut dyn Sink) -> io::Result<()> {
    let mut out = Exposition::new(format);
    broker.metrics.write(&mut out, sink, Instant::now()).await?;
    replica_manager(broker, &mut out, sink).await?;
    log_manager(broker, &mut out);
    log_cleaner(broker, &mut out);
    controller(broker, &mut out);
    if let Some(zk) = broker.controller.zk() {
        zk.shared().session_metrics.write(&mut out, Instant::now());
        zk.shared().controller_stats.write(&mut out, Instant::now());
    }
    broker.client_quotas.write_metrics(&mut out);
    consumer_groups(broker, &mut out, sink).await?;
    process::write(&mut out);
    out.finish();
    sink.send(out.take()).await
}

/// Every metric of `broker` in Prometheus' text format, whole.
pub async fn to_string(broker: &Broker) -> String {
    let mut sink = super::exposition::Collected::default();
    // A Collected sink cannot fail.
    let _ = scrape(broker, Format::Prometheus, &mut sink).await;
    sink.0
}

/// Kafka's `ReplicaManager` gauges, then the per-partition families
/// (`kafka.cluster:type=Partition` and `kafka.log:type=Log`).
async fn replica_manager(
    broker: &Broker,
    out: &mut Exposition,
    sink: &mut dyn Sink,
) -> io::Result<()> {
    let mut hosted = broker.replicas.hosted_partitions();
    hosted
        .sort_unstable_by(|a, b| (&a.tp.topic, a.tp.partition).cmp(&(&b.tp.topic, b.tp.partition)));
    let mut counts = ReplicaCounts::default();
    for p in &hosted {
        counts.add(p);
    }
    let gauges = [
        (
            "kafka_server_replicamanager_partitioncount",
            "Partitions hosted",
            counts.partitions,
        ),
        (
            "kafka_server_replicamanager_leadercount",
            "Partitions led",
            counts.leaders,
        ),
        (
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions led whose ISR is smaller than their replicas",
            counts.under_replicated,
        ),
        (
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Partitions led whose ISR is smaller than min.insync.replicas",
            counts.under_min_isr,
        ),
        (
            "kafka_server_replicamanager_atminisrpartitioncount",
            "Partitions led whose ISR is exactly min.insync.replicas",
            counts.at_min_isr,
        ),
        (
            "kafka_server_replicamanager_offlinereplicacount",
            "Partitions hosted whose log dir is offline",
            counts.offline,
        ),
    ];
    for (name, help, n) in gauges {
        out.family(name, Kind::Gauge, help);
        out.sample("", &[], n);
    }
    out.family(
        "kafka_server_replicafetchermanager_maxlag",
        Kind::Gauge,
        "Most messages a followed partition is behind its leader's high watermark",
    );
    out.sample("", &[("clientId", "Replica")], counts.max_lag);
    type Read = fn(&Partition) -> i64;
    let families: [(&'static str, &str, Read); 5] = [
        (
            "kafka_cluster_partition_underreplicated",
            "1 if this broker leads the partition and its ISR is smaller than its replicas",
            |p| {
                let s = p.replication_summary();
                (s.leader && s.isr < s.replicas).into()
            },
        ),
        ("kafka_log_log_size", "The log's size, bytes", |p| {
            p.log().published_size_bytes() as i64
        }),
        (
            "kafka_log_log_logstartoffset",
            "The log start offset",
            |p| p.log_start_offset(),
        ),
        ("kafka_log_log_logendoffset", "The log end offset", |p| {
            p.log_end_offset()
        }),
        ("kafka_log_log_numlogsegments", "Segments in the log", |p| {
            p.log().published_segment_count() as i64
        }),
    ];
    let mut partition = String::new();
    for (name, help, read) in families {
        out.family(name, Kind::Gauge, help);
        for p in &hosted {
            partition.clear();
            partition.push_str(itoa(p.tp.partition, &mut [0u8; 12]));
            let labels = [("topic", p.tp.topic.as_str()), ("partition", &partition)];
            out.sample("", &labels, read(p));
            out.flush_if_full(sink).await?;
        }
    }
    Ok(())
}

/// `n` in decimal, in `buf` (no allocation per sample).
fn itoa(n: i32, buf: &mut [u8; 12]) -> &str {
    use std::io::Write as _;
    let mut cursor = io::Cursor::new(&mut buf[..]);
    let _ = write!(cursor, "{n}");
    let len = cursor.position() as usize;
    std::str::from_utf8(&buf[..len]).unwrap_or("")
}

#[derive(Default)]
struct ReplicaCounts {
    partitions: usize,
    leaders: usize,
    under_replicated: usize,
    under_min_isr: usize,
    at_min_isr: usize,
    offline: usize,
    /// Of the partitions followed.
    max_lag: i64,
}

impl ReplicaCounts {
    /// Counts `p` as Kafka's `Partition` does: under-replicated and min-ISR states only
    /// on the leader.
    fn add(&mut self, p: &Arc<Partition>) {
        self.partitions += 1;
        let log = p.log();
        if log.is_offline() {
            self.offline += 1;
        }
        let s = p.replication_summary();
        if !s.leader {
            self.max_lag = self.max_lag.max(p.follower_lag());
            return;
        }
        self.leaders += 1;
        if s.isr < s.replicas {
            self.under_replicated += 1;
        }
        let min_isr = usize::try_from(log.min_insync_replicas()).unwrap_or(1);
        if s.isr < min_isr {
            self.under_min_isr += 1;
        } else if s.isr == min_isr {
            self.at_min_isr += 1;
        }
    }
}

/// Kafka's `LogManager` gauges: offline log dirs, in all and per dir.
fn log_manager(broker: &Broker, out: &mut Exposition) {
    let dirs = broker.replicas.logs.log_dirs();
    let offline = dirs.iter().filter(|d| d.offline_cause.is_some()).count();
    out.family(
        "kafka_log_logmanager_offlinelogdirectorycount",
        Kind::Gauge,
        "Log dirs offline",
    );
    out.sample("", &[], offline);
    out.family(
        "kafka_log_logmanager_logdirectoryoffline",
        Kind::Gauge,
        "1 if the log dir is offline",
    );
    for d in &dirs {
        let path = d.path.display().to_string();
        out.sample("", &[("logDirectory", &path)], d.offline_cause.is_some());
    }
}

/// Kafka's `LogCleaner` gauges, of the last cleaning (0 before the first): Kafka's are
/// of each cleaner thread's last, the maximum or (recopy) the mean over threads.
fn log_cleaner(broker: &Broker, out: &mut Exposition) {
    let last = broker.replicas.cleaner.last_cleaning().unwrap_or_default();
    let ratio = |part: u64, whole: u64| match whole {
        0 => 0.0,
        _ => 100.0 * part as f64 / whole as f64,
    };
    let gauges = [
        (
            "kafka_log_logcleaner_max_clean_time_secs",
            "How long the last cleaning took, seconds",
            last.elapsed_ms as f64 / 1e3,
        ),
        (
            "kafka_log_logcleaner_cleaner_recopy_percent",
            "Bytes the last cleaning wrote, percent of those it read",
            ratio(last.bytes_written, last.bytes_read),
        ),
        (
            "kafka_log_logcleaner_max_buffer_utilization_percent",
            "How full the last cleaning's offset map was, percent",
            ratio(last.map_keys, last.map_slots),
        ),
    ];
    for (name, help, v) in gauges {
        out.family(name, Kind::Gauge, help);
        out.sample("", &[], v);
    }
}

/// Kafka's `KafkaController` gauges. A ZooKeeper-mode broker that is not the
/// controller reports 0 for each, as Kafka's does; a single-node broker is its own
/// controller.
fn controller(broker: &Broker, out: &mut Exposition) {
    let active = broker.controller.zk().is_none_or(|zk| zk.is_active());
    let (mut topics, mut partitions, mut offline) = (0usize, 0usize, 0usize);
    if active {
        let live: BTreeSet<i32> = broker.controller.brokers().iter().map(|b| b.id).collect();
        for t in broker.controller.topics() {
            topics += 1;
            partitions += t.partitions.len();
            offline += t
                .partitions
                .iter()
                .filter(|p| p.state.leader < 0 || !live.contains(&p.state.leader))
                .count();
        }
    }
    let gauges = [
        (
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the active controller",
            usize::from(active),
        ),
        (
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a live leader",
            offline,
        ),
        (
            "kafka_controller_kafkacontroller_globaltopiccount",
            "Topics in the cluster",
            topics,
        ),
        (
            "kafka_controller_kafkacontroller_globalpartitioncount",
            "Partitions in the cluster",
            partitions,
        ),
    ];
    for (name, help, n) in gauges {
        out.family(name, Kind::Gauge, help);
        out.sample("", &[], n);
    }
}

/// kafka_exporter's consumer group metrics, for the groups this broker coordinates.
/// A partition's lag needs its high watermark, known here only for partitions this
/// broker hosts (as leader, or as follower a little behind); others have their
/// committed offset only.
async fn consumer_groups(
    broker: &Broker,
    out: &mut Exposition,
    sink: &mut dyn Sink,
) -> io::Result<()> {
    let mut views = broker.groups.offsets_views().await;
    group_coordinator(&views, out);
    // kafka_exporter lists consumer groups as ListGroups does: no dead ones, and no
    // share groups (they commit no offsets).
    views.retain(|g| g.state != "Dead" && g.protocol != "share");
    out.family(
        "kafka_consumergroup_members",
        Kind::Gauge,
        "Members of the consumer group",
    );
    for g in &views {
        out.sample("", &[("consumergroup", &g.group_id)], g.members);
    }
    let mut partition = String::new();
    out.family(
        "kafka_consumergroup_current_offset",
        Kind::Gauge,
        "The group's committed offset of the partition",
    );
    for g in &views {
        for (topic, p, offset) in &g.offsets {
            partition.clear();
            partition.push_str(itoa(*p, &mut [0u8; 12]));
            let labels = [
                ("consumergroup", g.group_id.as_str()),
                ("topic", topic),
                ("partition", &partition),
            ];
            out.sample("", &labels, *offset);
            out.flush_if_full(sink).await?;
        }
    }
    out.family(
        "kafka_consumergroup_lag",
        Kind::Gauge,
        "The partition's high watermark less the group's committed offset",
    );
    let mut sums: Vec<(&str, &str, i64)> = Vec::new();
    for g in &views {
        for (topic, p, offset) in &g.offsets {
            let Some(hw) = broker
                .replicas
                .partition(topic, *p)
                .map(|p| p.high_watermark())
            else {
                continue;
            };
            if *offset < 0 {
                continue;
            }
            let lag = (hw - offset).max(0);
            partition.clear();
            partition.push_str(itoa(*p, &mut [0u8; 12]));
            let labels = [
                ("consumergroup", g.group_id.as_str()),
                ("topic", topic),
                ("partition", &partition),
            ];
            out.sample("", &labels, lag);
            match sums.last_mut() {
                Some((group, t, sum)) if *group == g.group_id && t == topic => *sum += lag,
                _ => sums.push((&g.group_id, topic, lag)),
            }
            out.flush_if_full(sink).await?;
        }
    }
    out.family(
        "kafka_consumergroup_lag_sum",
        Kind::Gauge,
        "The group's lag summed over the topic's partitions",
    );
    for (group, topic, sum) in sums {
        out.sample("", &[("consumergroup", group), ("topic", topic)], sum);
    }
    out.flush_if_full(sink).await
}

/// Kafka's group coordinator gauges for the groups this broker coordinates: the
/// GroupMetadataManager's (`NumGroups` of every protocol, the classic groups per state,
/// `NumOffsets`) and the group-coordinator-metrics' counts per protocol and per
/// consumer-group state.
fn group_coordinator(views: &[GroupOffsetsView], out: &mut Exposition) {
    let classic_in = |state: &str| {
        views
            .iter()
            .filter(|g| g.protocol == "classic" && g.state == state)
            .count()
    };
    let offsets: usize = views.iter().map(|g| g.offsets.len()).sum();
    let gauges = [
        (
            "kafka_coordinator_group_groupmetadatamanager_numgroups",
            "Groups coordinated, of every protocol",
            views.len(),
        ),
        (
            "kafka_coordinator_group_groupmetadatamanager_numgroupspreparingrebalance",
            "Classic groups preparing a rebalance",
            classic_in("PreparingRebalance"),
        ),
        (
            "kafka_coordinator_group_groupmetadatamanager_numgroupscompletingrebalance",
            "Classic groups completing a rebalance",
            classic_in("CompletingRebalance"),
        ),
        (
            "kafka_coordinator_group_groupmetadatamanager_numgroupsstable",
            "Classic groups stable",
            classic_in("Stable"),
        ),
        (
            "kafka_coordinator_group_groupmetadatamanager_numgroupsdead",
            "Classic groups dead",
            classic_in("Dead"),
        ),
        (
            "kafka_coordinator_group_groupmetadatamanager_numgroupsempty",
            "Classic groups empty",
            classic_in("Empty"),
        ),
        (
            "kafka_coordinator_group_groupmetadatamanager_numoffsets",
            "Committed offsets kept",
            offsets,
        ),
    ];
    for (name, help, value) in gauges {
        out.family(name, Kind::Gauge, help);
        out.sample("", &[], value as u64);
    }
    out.family(
        "kafka_server_group_coordinator_metrics_group_count",
        Kind::Gauge,
        "Groups coordinated, per protocol",
    );
    for protocol in ["classic", "consumer", "share"] {
        let n = views.iter().filter(|g| g.protocol == protocol).count();
        out.sample("", &[("protocol", protocol)], n as u64);
    }
    out.family(
        "kafka_server_group_coordinator_metrics_consumer_group_count",
        Kind::Gauge,
        "Consumer (KIP-848) groups coordinated, per state",
    );
    for state in ["Empty", "Assigning", "Reconciling", "Stable", "Dead"] {
        let n = views
            .iter()
            .filter(|g| g.protocol == "consumer" && g.state == state)
            .count();
        out.sample("", &[("state", state)], n as u64);
    }
}
