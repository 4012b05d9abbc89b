//! New logs: what a new partition directory holds, what a crash right after creation
//! leaves loadable, and creation on several threads.

use std::fs;
use std::path::{Path, PathBuf};

use uuid::Uuid;

use super::super::checkpoint::LEADER_EPOCH_CHECKPOINT;
use super::super::dir_lock::DirLock;
use super::super::partition_metadata::{
    read_partition_metadata, uuid_to_kafka_string, PARTITION_METADATA_FILE,
};
use super::super::test_util::batch_bytes;
use super::*;

fn config() -> LogConfig {
    LogConfig {
        max_index_size: 4096,
        // Test batches carry timestamps near 1970, which the wall clock would expire.
        producer_id_expiration_ms: i64::MAX,
        ..LogConfig::default()
    }
}

/// A manager over `dirs` with every partition found assigned, creating on `threads`
/// threads per dir.
fn start(dirs: &[PathBuf], threads: usize) -> LogManager {
    let locked = dirs
        .iter()
        .map(|d| {
            fs::create_dir_all(d).unwrap();
            (d.clone(), DirLock::acquire(d).unwrap())
        })
        .collect();
    LogManager::startup_parallel(
        locked,
        |_: &TopicPartition, _: Option<Uuid>| true,
        |_| config(),
        60_000,
        threads,
    )
    .unwrap()
}

fn partitions(topic: &str, n: i32) -> Vec<TopicPartition> {
    (0..n).map(|p| TopicPartition::new(topic, p)).collect()
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_new_partition_dir_holds_kafkas_files_and_nothing_else() {
    let root = tempfile::tempdir().unwrap();
    let lm = start(&[root.path().join("d")], 1);
    let id = Uuid::new_v4();
    let log = lm
        .get_or_create_log(&TopicPartition::new("orders", 7), id, config())
        .unwrap();
    assert_eq!(log.dir(), root.path().join("d").join("orders-7"));
    assert_eq!(
        names(log.dir()),
        [
            "00000000000000000000.index",
            "00000000000000000000.log",
            "00000000000000000000.timeindex",
            "leader-epoch-checkpoint",
            "partition.metadata",
        ]
    );
    assert_eq!(
        fs::read_to_string(log.dir().join(LEADER_EPOCH_CHECKPOINT)).unwrap(),
        "0\n0\n"
    );
    assert_eq!(
        fs::read_to_string(log.dir().join(PARTITION_METADATA_FILE)).unwrap(),
        format!("version: 0\ntopic_id: {}", uuid_to_kafka_string(id))
    );
    assert_eq!(
        fs::metadata(log.dir().join("00000000000000000000.log"))
            .unwrap()
            .len(),
        0
    );
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
}

/// Kafka's `assign` writes the checkpoint on the first append in an epoch (synced, as
/// Kafka's `LeaderEpochCheckpointFile.write` is), and not again for later appends in it.
#[test]
fn the_first_write_records_its_leader_epoch_in_the_checkpoint() {
    let root = tempfile::tempdir().unwrap();
    let lm = start(&[root.path().join("d")], 1);
    let log = lm
        .get_or_create_log(&TopicPartition::new("orders", 0), Uuid::new_v4(), config())
        .unwrap();
    log.append_as_leader(batch_bytes(&[b"a", b"b"], 1, None), 3, 0)
        .unwrap();
    let checkpoint = log.dir().join(LEADER_EPOCH_CHECKPOINT);
    assert_eq!(fs::read_to_string(&checkpoint).unwrap(), "0\n1\n3 0\n");
    log.append_as_leader(batch_bytes(&[b"c"], 2, None), 3, 0)
        .unwrap();
    log.append_as_leader(batch_bytes(&[b"d"], 3, None), 5, 0)
        .unwrap();
    assert_eq!(fs::read_to_string(&checkpoint).unwrap(), "0\n2\n3 0\n5 3\n");
}

/// What a crash right after creation can leave of a partition directory, none of it
/// synced: every state loads as an empty log, takes writes, and gets its topic id back
/// when the metadata assigns the partition again.
#[test]
fn a_crash_right_after_creation_leaves_a_dir_that_loads() {
    type Damage = fn(&Path);
    let damages: [(&str, Damage); 6] = [
        ("every file as written", |_| {}),
        ("every file empty", |dir| {
            for name in names(dir) {
                fs::write(dir.join(name), b"").unwrap();
            }
        }),
        ("metadata and checkpoint torn", |dir| {
            fs::write(dir.join(PARTITION_METADATA_FILE), b"version: 0\ntopic_i").unwrap();
            fs::write(dir.join(LEADER_EPOCH_CHECKPOINT), b"0\n").unwrap();
        }),
        ("indexes missing", |dir| {
            fs::remove_file(dir.join("00000000000000000000.index")).unwrap();
            fs::remove_file(dir.join("00000000000000000000.timeindex")).unwrap();
        }),
        ("only the directory", |dir| {
            for name in names(dir) {
                fs::remove_file(dir.join(name)).unwrap();
            }
        }),
        ("no directory", |dir| fs::remove_dir_all(dir).unwrap()),
    ];
    for (what, damage) in damages {
        let root = tempfile::tempdir().unwrap();
        let dirs = [root.path().join("d")];
        let id = Uuid::new_v4();
        let tp = TopicPartition::new("orders", 0);
        let lm = start(&dirs, 1);
        let dir = lm
            .get_or_create_log(&tp, id, config())
            .unwrap()
            .dir()
            .to_path_buf();
        // A crash: no shutdown, so no clean-shutdown marker and nothing flushed.
        drop(lm);
        damage(&dir);

        let lm = start(&dirs, 1);
        let log = lm.get_or_create_log(&tp, id, config()).unwrap();
        assert_eq!(log.dir(), dir, "{what}");
        assert_eq!(
            (log.log_start_offset(), log.log_end_offset()),
            (0, 0),
            "{what}"
        );
        assert_eq!(read_partition_metadata(&dir).unwrap(), Some(id), "{what}");
        assert_eq!(lm.topic_id_of(&tp), Some(id), "{what}");
        log.append_as_leader(batch_bytes(&[b"a"], 1, None), 0, 0)
            .unwrap();
        log.flush().unwrap();
        assert_eq!(log.log_end_offset(), 1, "{what}");
        lm.shutdown().unwrap();
        drop((log, lm));
        let lm = start(&dirs, 1);
        assert_eq!(lm.get_log(&tp).unwrap().log_end_offset(), 1, "{what}");
    }
}

/// One call makes many logs on several threads; each result is the log of the partition
/// in its place, and no reader of the table ever finds a log whose files are not all
/// made yet.
#[test]
fn many_logs_made_on_several_threads_are_hosted_only_once_complete() {
    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().join("d1"), root.path().join("d2")];
    let lm = start(&dirs, 2);
    let tps = partitions("wide", 400);
    let id = Uuid::new_v4();
    let done = std::sync::atomic::AtomicBool::new(false);
    let logs = std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                for tp in &tps {
                    if let Some(log) = lm.get_log(tp) {
                        assert!(log.dir().join(PARTITION_METADATA_FILE).exists());
                        assert!(log.dir().join("00000000000000000000.log").exists());
                    }
                }
            }
        });
        let logs = lm.get_or_create_logs(&tps, id, &config());
        done.store(true, std::sync::atomic::Ordering::Release);
        reader.join().unwrap();
        logs
    });
    assert_eq!(logs.len(), tps.len());
    let mut per_dir = [0, 0];
    for (tp, log) in tps.iter().zip(&logs) {
        let log = log.as_ref().unwrap();
        assert_eq!(log.topic_partition(), tp);
        assert_eq!(
            log.dir().file_name().unwrap().to_string_lossy(),
            tp.to_string()
        );
        assert_eq!(read_partition_metadata(log.dir()).unwrap(), Some(id));
        per_dir[usize::from(log.dir().parent() == Some(dirs[1].as_path()))] += 1;
    }
    assert_eq!(per_dir, [200, 200], "spread evenly over the log dirs");
    assert_eq!(lm.all_logs().len(), 400);
    // Asked again (with one new partition): the same logs, and the new one made.
    let mut again = tps.clone();
    again.push(TopicPartition::new("wide", 400));
    let second = lm.get_or_create_logs(&again, id, &config());
    for (first, second) in logs.iter().zip(&second) {
        assert!(Arc::ptr_eq(
            first.as_ref().unwrap(),
            second.as_ref().unwrap()
        ));
    }
    assert_eq!(second[400].as_ref().unwrap().log_end_offset(), 0);
    let other = lm.get_or_create_logs(&tps[..1], Uuid::new_v4(), &config());
    assert!(matches!(
        other[0],
        Err(LogError::InconsistentTopicId { .. })
    ));
}

/// A new log goes in the dir the metadata names for it (Kafka's `targetLogDirectoryId`)
/// when that is one of this broker's online dirs, however many logs it holds already;
/// otherwise (no dir named, a dir of another broker or an offline one of this broker)
/// in the dir hosting the fewest logs.
#[test]
fn a_new_log_goes_in_the_online_dir_the_metadata_names() {
    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().join("d1"), root.path().join("d2")];
    let lm = start(&dirs, 1);
    let (d1, d2, elsewhere) = (
        Uuid::from_u128(0xd1),
        Uuid::from_u128(0xd2),
        Uuid::from_u128(0xee),
    );
    lm.set_directory_ids(&[(dirs[0].clone(), d1), (dirs[1].clone(), d2)]);
    let id = Uuid::new_v4();
    let parent = |log: &Result<Arc<Log>, LogError>| {
        log.as_ref().unwrap().dir().parent().unwrap().to_path_buf()
    };
    // Three named for d2, one for nowhere known, one not named, one beyond the targets.
    let tps = partitions("placed", 6);
    let targets = [Some(d2), Some(d2), Some(d2), Some(elsewhere), None];
    let logs = lm.get_or_create_logs_in(&tps, &targets, id, &config());
    let placed: Vec<PathBuf> = logs.iter().map(parent).collect();
    assert_eq!(
        placed[..3],
        [dirs[1].clone(), dirs[1].clone(), dirs[1].clone()]
    );
    // The rest fill the emptier dir.
    assert_eq!(
        placed[3..],
        [dirs[0].clone(), dirs[0].clone(), dirs[0].clone()]
    );
    let d1_logs = |lm: &LogManager| {
        lm.all_logs()
            .iter()
            .filter(|l| l.dir().parent() == Some(dirs[0].as_path()))
            .count()
    };
    assert_eq!(d1_logs(&lm), 3);
    // A tie, which d1 would win unnamed: named, a log goes to d2.
    let more = [TopicPartition::new("placed", 6)];
    let logs = lm.get_or_create_logs_in(&more, &[Some(d2)], id, &config());
    assert_eq!(parent(&logs[0]), dirs[1]);
    // A hosted log stays where it is, whatever the metadata names.
    let logs = lm.get_or_create_logs_in(&tps[..1], &[Some(d1)], id, &config());
    assert_eq!(parent(&logs[0]), dirs[1]);
    assert_eq!(lm.placement_of(&tps[0]), Some(d2));
    // d2 offline: a log named for it goes to an online dir, and the replicas on d2 are
    // reported on no dir (the heartbeat reports d2 offline).
    lm.dirs[1].health.mark_offline("a test", &"failed");
    assert_eq!(lm.placement_of(&tps[0]), None);
    assert_eq!(lm.placement_of(&tps[3]), Some(d1));
    let last = [TopicPartition::new("placed", 7)];
    let logs = lm.get_or_create_logs_in(&last, &[Some(d2)], id, &config());
    assert_eq!(parent(&logs[0]), dirs[0]);
}

/// Every entry under `root`, recursively, as paths relative to it.
fn tree(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in fs::read_dir(&dir).unwrap().flatten() {
            let path = e.path();
            out.push(path.strip_prefix(root).unwrap().to_path_buf());
            if path.is_dir() {
                todo.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Topic names that are paths (`../outside/escaped`, an absolute path) or too long for a
/// directory make no directory anywhere, and leave the log dir online: before, the
/// first two made directories outside the log dir and the third took the only log dir
/// offline ("every log dir is offline: halting the broker").
#[test]
fn illegal_names_make_no_directory_and_leave_the_dir_online() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let lm = start(std::slice::from_ref(&dir), 1);
    let victim = root.path().join("victim-7");
    fs::create_dir(&victim).unwrap();
    fs::write(victim.join("not-kafkas.txt"), b"keep me").unwrap();
    let before = tree(root.path());
    let absolute = root.path().join("victim").display().to_string();
    for topic in [
        "../outside/escaped",
        absolute.as_str(),
        &"L".repeat(300),
        "..",
    ] {
        let tp = TopicPartition::new(topic, 7);
        let Err(e) = lm.get_or_create_log(&tp, Uuid::new_v4(), config()) else {
            panic!("a log for {topic}");
        };
        assert!(
            matches!(e, LogError::InvalidPartitionDir(_)),
            "{topic}: {e}"
        );
        assert_eq!(e.response_error().code(), 17, "INVALID_TOPIC_EXCEPTION");
    }
    assert_eq!(tree(root.path()), before, "nothing made, nothing moved");
    assert!(!lm.all_dirs_offline());
    assert!(lm
        .get_or_create_log(&TopicPartition::new("fine", 0), Uuid::new_v4(), config())
        .is_ok());
}

/// A legal topic of 249 characters whose partition index makes `topic-P` longer than a
/// file name: that partition fails with a storage error, the dir stays online and the
/// next log is made in it.
#[test]
fn a_directory_the_file_system_refuses_fails_its_partition_alone() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("data");
    let lm = start(std::slice::from_ref(&dir), 1);
    let tp = TopicPartition::new("x".repeat(249), 1_000_000);
    let Err(e) = lm.get_or_create_log(&tp, Uuid::new_v4(), config()) else {
        panic!("a log for {tp}");
    };
    assert!(matches!(e, LogError::KafkaStorage(_)), "{e}");
    assert_eq!(e.response_error().code(), 56, "KAFKA_STORAGE_ERROR");
    assert!(!lm.all_dirs_offline(), "the dir itself is healthy");
    assert!(lm
        .get_or_create_log(&TopicPartition::new("next", 0), Uuid::new_v4(), config())
        .is_ok());
    assert_eq!(
        tree(&dir)
            .iter()
            .filter(|p| p.starts_with(".skua-probe"))
            .count(),
        0
    );
}
