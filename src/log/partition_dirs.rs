//! The paths of partition directories: the only place the log layer turns a topic name
//! into a path.
//!
//! Topic names reach the log layer from clients, from ZooKeeper and from controllers,
//! none of which the log layer can trust: a name such as `../outside` or an absolute
//! path, joined as it came, would make or delete a directory outside the log dir, and a
//! name longer than a file name makes `mkdir` fail. So every partition directory the
//! log layer creates, renames or deletes is named here: a new partition's only after its
//! topic passes Kafka's `Topic.validate` rules and its index is not negative, and every
//! name as one plain component, so the path lies directly under its log dir.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use super::{LogError, TopicPartition};
use crate::controller::topic_name;

/// The directory of a new log of `tp` in `log_dir`; an error (nothing is made) when the
/// topic name is not a legal one or the partition index is negative.
pub(super) fn new_partition_dir(log_dir: &Path, tp: &TopicPartition) -> Result<PathBuf, LogError> {
    topic_name::validate(&tp.topic).map_err(LogError::InvalidPartitionDir)?;
    if tp.partition < 0 {
        return Err(LogError::InvalidPartitionDir(format!(
            "partition {} of topic {} has a negative index",
            tp.partition, tp.topic
        )));
    }
    child_dir(log_dir, &tp.to_string())
}

/// `log_dir/name`, when `name` is one plain path component: never a path elsewhere,
/// whatever `name` holds. How long a name may be is the file system's to say (a
/// directory it refuses fails its partition alone, see `new_logs`).
pub(super) fn child_dir(log_dir: &Path, name: &str) -> Result<PathBuf, LogError> {
    let one_component = {
        let mut components = Path::new(name).components();
        matches!(
            (components.next(), components.next()),
            (Some(Component::Normal(c)), None) if c == OsStr::new(name)
        )
    };
    if !one_component || name.contains('\0') {
        return Err(LogError::InvalidPartitionDir(format!(
            "{name:?} is not a directory name a log dir can hold"
        )));
    }
    let path = log_dir.join(name);
    debug_assert_eq!(path.parent(), Some(log_dir));
    Ok(path)
}

/// A sibling of the partition directory `dir` named `name` (a rename for deletion or to
/// set a stray aside): in the same log dir, or an error.
pub(super) fn sibling_dir(dir: &Path, name: &str) -> Result<(PathBuf, PathBuf), LogError> {
    let parent = dir.parent().ok_or_else(|| {
        LogError::InvalidPartitionDir(format!("{} has no log dir", dir.display()))
    })?;
    Ok((parent.to_path_buf(), child_dir(parent, name)?))
}

/// Whether `log_dir` itself still takes a new directory: made and removed at once. After
/// a partition directory could not be made, this tells a failing log dir (which goes
/// offline) from a failure of that one partition (which fails alone).
pub(super) fn log_dir_takes_new_dirs(log_dir: &Path) -> bool {
    let probe = log_dir.join(format!(".skua-probe-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir(&probe).is_ok() && std::fs::remove_dir(&probe).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_directly_under_the_log_dir() {
        let dir = Path::new("/data/kafka");
        let tp = |t: &str, p: i32| TopicPartition::new(t, p);
        assert_eq!(
            new_partition_dir(dir, &tp("orders", 3)).unwrap(),
            dir.join("orders-3")
        );
        for bad in [
            tp("../outside/escaped", 0),
            tp("/tmp/victim", 7),
            tp("..", 0),
            tp("", 0),
            tp(&"L".repeat(300), 0),
            tp("a/b", 0),
            tp("ok", -1),
        ] {
            let e = new_partition_dir(dir, &bad).unwrap_err();
            assert!(matches!(e, LogError::InvalidPartitionDir(_)), "{bad}: {e}");
        }
        for bad in ["", ".", "..", "a/b", "/abs", "../x", "x\0y"] {
            assert!(child_dir(dir, bad).is_err(), "{bad:?}");
        }
        let (parent, sibling) = sibling_dir(&dir.join("t-0"), "t-0.abc-delete").unwrap();
        assert_eq!(
            (parent.as_path(), sibling),
            (dir, dir.join("t-0.abc-delete"))
        );
        assert!(sibling_dir(&dir.join("t-0"), "../t-0.abc-delete").is_err());
    }

    #[test]
    fn a_working_log_dir_takes_new_dirs_and_keeps_none() {
        let root = tempfile::tempdir().unwrap();
        assert!(log_dir_takes_new_dirs(root.path()));
        assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 0);
        assert!(!log_dir_takes_new_dirs(&root.path().join("missing")));
    }
}
