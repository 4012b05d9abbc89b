//! skua-load, the native load generator (src/bin/skua-load), against a broker: its runs
//! add up (records sent = acked = fetched), a fixed rate is kept, and a run whose numbers
//! do not add up fails.

use crate::common;

use std::process::Command;

use common::TestBroker;
use serde_json::Value;

/// Runs skua-load with `args` against `broker`; its exit success and its JSON report.
async fn load(
    broker: &TestBroker,
    dir: &std::path::Path,
    name: &str,
    args: &[&str],
) -> (bool, Value) {
    let json = dir.join(format!("{name}.json"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_skua-load"));
    command
        .args(["--bootstrap", &broker.addr.to_string()])
        .args(["--broker-pid", &std::process::id().to_string()])
        .args(["--json", json.to_str().unwrap()])
        .args(args);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .expect("skua-load runs");
    let report = std::fs::read_to_string(&json).expect("skua-load writes its report");
    let report: Value = serde_json::from_str(&report).expect("the report is JSON");
    eprintln!("{}", String::from_utf8_lossy(&output.stdout));
    (output.status.success(), report)
}

fn n(report: &Value, key: &str) -> u64 {
    report[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_over_several_connections_adds_up_and_a_rerun_on_old_records_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(&dir.path().join("data"), &[]).await;
    let args = [
        "--topic",
        "load",
        "--create",
        "--partitions",
        "4",
        "--producers",
        "2",
        "--consumers",
        "3",
        "--records",
        "30000",
        "--warmup-records",
        "5000",
        "--batch-records",
        "100",
        "--compression",
        "lz4",
        "--acks",
        "all",
    ];
    let (ok, report) = load(&broker, dir.path(), "first", &args).await;
    assert!(ok, "{report}");
    assert_eq!(report["errors"], serde_json::json!([]));
    assert_eq!(n(&report, "produce_records_sent"), 30_000);
    assert_eq!(n(&report, "produce_records_acked"), 30_000);
    assert_eq!(n(&report, "warmup_acked"), 5_000);
    assert_eq!(n(&report, "consume_records"), 35_000);
    assert_eq!(n(&report, "produce_requests"), 300);
    let (p50, p99, max) = (
        n(&report, "produce_p50_us"),
        n(&report, "produce_p99_us"),
        n(&report, "produce_max_us"),
    );
    assert!(0 < p50 && p50 <= p99 && p99 <= max, "{report}");
    assert!(report["produce_broker_cpu_s"].is_f64(), "{report}");
    assert!(n(&report, "consume_bytes") > 35_000, "{report}");

    // The topic now holds 35,000 records from before: fetched is not what this run acked.
    let (ok, report) = load(&broker, dir.path(), "second", &args).await;
    assert!(!ok, "{report}");
    assert_eq!(n(&report, "consume_records"), 70_000);
    let errors = report["errors"].to_string();
    assert!(
        errors.contains("35000 records acked, 70000 fetched"),
        "{errors}"
    );
    broker.stop().await;
}

/// `--consume-passes 3`: every record acked is fetched three times over, and a count that
/// is not a whole number of passes fails the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_consume_pass_reads_every_record_again() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(&dir.path().join("data"), &[]).await;
    let args = [
        "--topic",
        "passes",
        "--create",
        "--partitions",
        "3",
        "--consumers",
        "2",
        "--records",
        "6000",
        "--batch-records",
        "50",
        "--consume-passes",
        "3",
    ];
    let (ok, report) = load(&broker, dir.path(), "passes", &args).await;
    assert!(ok, "{report}");
    assert_eq!(n(&report, "produce_records_acked"), 6_000);
    assert_eq!(n(&report, "consume_passes"), 3);
    assert_eq!(n(&report, "consume_records"), 18_000);
    assert!(report["consume_broker_cpu_s"].is_f64(), "{report}");

    // A second run on the same topic finds 12,000 records a pass, not the 6,000 it acked.
    let (ok, report) = load(&broker, dir.path(), "passes-again", &args).await;
    assert!(!ok, "{report}");
    assert_eq!(n(&report, "consume_records"), 36_000);
    let errors = report["errors"].to_string();
    assert!(
        errors.contains("6000 records acked, 36000 fetched in 3 passes"),
        "{errors}"
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_rate_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(&dir.path().join("data"), &[]).await;
    // 1,000 records at 2,000/s in batches of 10: 100 requests, the last due after 495 ms.
    let args = [
        "--topic",
        "paced",
        "--create",
        "--records",
        "1000",
        "--batch-records",
        "10",
        "--rate",
        "2000",
        "--phases",
        "produce",
    ];
    let (ok, report) = load(&broker, dir.path(), "paced", &args).await;
    assert!(ok, "{report}");
    assert_eq!(n(&report, "produce_records_acked"), 1000);
    let seconds = report["produce_seconds"].as_f64().unwrap();
    assert!((0.49..5.0).contains(&seconds), "{seconds} s");
    assert!(report.get("consume_records").is_none(), "{report}");
    broker.stop().await;
}

/// The e2e phase: producers at a fixed rate while consumers long-poll the same partitions
/// (the 700 records already there are not counted), every acknowledged record
/// matched to its fetch by offset and timed from due to fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_e2e_phase_times_every_record_from_due_to_fetched() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(&dir.path().join("data"), &[]).await;
    let topic = ["--topic", "e2e", "--create", "--partitions", "2"];
    let before = [&topic[..], &["--records", "700", "--phases", "produce"]].concat();
    let (ok, report) = load(&broker, dir.path(), "before", &before).await;
    assert!(ok, "{report}");
    let args = [
        &topic[..],
        &[
            "--producers",
            "2",
            "--consumers",
            "2",
            "--records",
            "1500",
            "--warmup-records",
            "300",
            "--batch-records",
            "1",
            "--rate",
            "3000",
            "--acks",
            "all",
            "--phases",
            "e2e",
        ],
    ]
    .concat();
    let (ok, report) = load(&broker, dir.path(), "e2e", &args).await;
    assert!(ok, "{report}");
    assert_eq!(report["errors"], serde_json::json!([]));
    assert_eq!(n(&report, "produce_records_acked"), 1500);
    assert_eq!(n(&report, "e2e_records"), 1500);
    let (p50, p99, max) = (
        n(&report, "e2e_p50_us"),
        n(&report, "e2e_p99_us"),
        n(&report, "e2e_max_us"),
    );
    assert!(0 < p50 && p50 <= p99 && p99 <= max, "{report}");
    assert!(report.get("consume_records").is_none(), "{report}");
    broker.stop().await;
}

/// On a three-broker skua cluster (scripts/cluster), a replicated topic's partitions are led
/// by different brokers: skua-load creates it with the replication factor and
/// min.insync.replicas asked for, sends each partition's requests to its leader and reads
/// each back from its leader, so every acks=all record is acked and fetched, and the CPU
/// it reports is that of all the brokers named.
#[test]
fn a_replicated_topic_is_written_and_read_through_each_partitions_leader() {
    let _one = common::cluster::ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let Some(cluster) = common::cluster::Cluster::start_kinds("1,2,3", &[]) else {
        return;
    };
    let pids: Vec<String> = (1..=3)
        .map(|i| {
            let pid = cluster.dir.path().join(format!("broker-{i}/pid"));
            std::fs::read_to_string(pid).unwrap().trim().to_string()
        })
        .collect();
    let json = cluster.dir.path().join("load.json");
    let output = Command::new(env!("CARGO_BIN_EXE_skua-load"))
        .args(["--bootstrap", &cluster.bootstrap[0]])
        .args(["--broker-pid", &pids.join(",")])
        .args(["--json", json.to_str().unwrap()])
        .args(["--topic", "replicated", "--create", "--partitions", "6"])
        .args(["--replication-factor", "3", "--min-insync-replicas", "2"])
        .args(["--producers", "2", "--consumers", "2", "--acks", "all"])
        .args(["--records", "12000", "--batch-records", "100"])
        .output()
        .expect("skua-load runs");
    let report = std::fs::read_to_string(&json).unwrap_or_default();
    assert!(
        output.status.success(),
        "{}{report}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(&report).expect("the report is JSON");
    assert_eq!(n(&report, "produce_records_acked"), 12_000);
    assert_eq!(n(&report, "consume_records"), 12_000);
    assert!(report["produce_broker_cpu_s"].is_f64(), "{report}");

    // What the cluster says of the topic: RF 3, min.insync.replicas=2, leaders on more
    // than one broker (else routing was not needed).
    let out = cluster.run("topics", &["--describe", "--topic", "replicated"]);
    let described = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(described.contains("ReplicationFactor: 3"), "{described}");
    assert!(described.contains("min.insync.replicas=2"), "{described}");
    let leaders: std::collections::BTreeSet<&str> = described
        .lines()
        .filter_map(|l| l.split("Leader: ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .collect();
    assert!(leaders.len() > 1, "{described}");
}

/// The commit phase: groups commit offsets as groups without members do, and what the
/// broker then holds is what the run committed last, per group and partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commit_phase_commits_every_groups_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let broker = TestBroker::start(&dir.path().join("data"), &[]).await;
    // One connection, one commit in flight: commit i (group i % 5, partition (i / 5) % 3,
    // offset i) lands in order, so the last of each group and partition is known.
    let args = [
        "--topic",
        "committed",
        "--create",
        "--partitions",
        "3",
        "--phases",
        "commit",
        "--groups",
        "5",
        "--commits",
        "300",
        "--connections",
        "1",
        "--in-flight",
        "1",
    ];
    let (ok, report) = load(&broker, dir.path(), "commits", &args).await;
    assert!(ok, "{report}");
    assert_eq!(report["errors"], serde_json::json!([]));
    assert_eq!(n(&report, "commit_count"), 300);
    assert_eq!(n(&report, "commit_groups"), 5);
    let (p50, p99) = (n(&report, "commit_p50_us"), n(&report, "commit_p99_us"));
    assert!(0 < p50 && p50 <= p99, "{report}");
    assert!(report["commit_broker_cpu_s"].is_f64(), "{report}");
    assert!(report.get("produce_records_acked").is_none(), "{report}");

    let mut client = broker.client().await;
    for g in 0..5i64 {
        let (error, offsets) = client
            .committed_offsets(&format!("committed-group-{g}"))
            .await;
        assert_eq!(error, 0);
        // Partition p's last commit is i = 5k + g with k the largest below 60 and k % 3 == p.
        let expected: Vec<i64> = (0..3).map(|p| 5 * (57 + p) + g).collect();
        assert_eq!(offsets, expected, "group {g}");
    }
    broker.stop().await;
}
