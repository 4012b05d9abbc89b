//! The checks every log dir passes before skua writes anything into it, as Kafka's
//! `MetaPropertiesEnsemble` does at startup: each dir exists and is locked (`.lock`), every
//! `meta.properties` present parses, all agree on `cluster.id` and on the node id (`node.id`
//! in version 1, `broker.id` in version 0), and agree with the configured ones; directory
//! ids are unique; Kafka's metadata log `__cluster_metadata-0` lives only in the metadata
//! log dir. Only when every dir passed are missing `meta.properties` (or missing
//! `directory.id`s) written.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use uuid::Uuid;

use super::dir_lock::DirLock;
use super::meta_properties::{new_kafka_uuid, MetaProperties};
use super::LogError;

/// Kafka's metadata log directory name.
pub const METADATA_LOG_DIR: &str = "__cluster_metadata-0";

/// A checked, locked directory.
pub struct CheckedDir {
    pub path: PathBuf,
    pub lock: DirLock,
    pub meta: Option<MetaProperties>,
    /// `meta` was completed in memory and is not yet on disk.
    unwritten: bool,
}

impl CheckedDir {
    /// The dir's `directory.id` (present once `ensure_meta_properties` ran).
    pub fn directory_id(&self) -> Option<Uuid> {
        self.meta.as_ref().and_then(|m| m.directory_id)
    }
}

/// Who this broker is according to its configuration.
pub struct Identity {
    /// `node.id` / `broker.id` when set explicitly.
    pub configured_node_id: Option<i32>,
    /// The node id used when neither the config nor any dir names one.
    pub default_node_id: i32,
    pub configured_cluster_id: Option<String>,
}

/// The log dirs (in `log.dirs` order) and the metadata log dir, all checked and locked.
pub struct LogDirs {
    pub log_dirs: Vec<CheckedDir>,
    /// `metadata.log.dir` when it is not one of the log dirs.
    pub separate_metadata_dir: Option<CheckedDir>,
    pub metadata_dir: PathBuf,
    pub node_id: i32,
    /// The cluster id the dirs (or the config) name; `None` for brand-new dirs.
    pub cluster_id: Option<String>,
}

fn refuse(path: &Path, why: String) -> LogError {
    LogError::corrupt_file(path, why)
}

impl LogDirs {
    /// Creates missing dirs, locks every dir and checks every `meta.properties`. Nothing
    /// but the directories themselves and their `.lock` files is written.
    pub fn check(
        log_dirs: &[PathBuf],
        metadata_log_dir: Option<&Path>,
        identity: &Identity,
    ) -> Result<LogDirs, LogError> {
        let metadata_dir = metadata_log_dir
            .map(Path::to_path_buf)
            .or_else(|| log_dirs.first().cloned())
            .ok_or_else(|| LogError::InvalidRecord("no log dirs".into()))?;
        let mut checked = Vec::new();
        for path in log_dirs {
            checked.push(open_dir(path)?);
        }
        let separate = if log_dirs.contains(&metadata_dir) {
            None
        } else {
            Some(open_dir(&metadata_dir)?)
        };
        let all = || checked.iter().chain(separate.iter());

        let mut cluster_id = identity.configured_cluster_id.clone();
        let mut node_id = identity.configured_node_id;
        let mut directory_ids = BTreeSet::new();
        for dir in all() {
            let meta_path = dir.path.join(super::meta_properties::META_PROPERTIES_FILE);
            if dir.path != metadata_dir && dir.path.join(METADATA_LOG_DIR).exists() {
                return Err(refuse(
                    &dir.path,
                    format!(
                        "holds a metadata log ({METADATA_LOG_DIR}) but the metadata log dir is {}; set metadata.log.dir to the dir that holds it",
                        metadata_dir.display()
                    ),
                ));
            }
            let Some(meta) = &dir.meta else {
                continue;
            };
            match &cluster_id {
                Some(id) if *id != meta.cluster_id => {
                    let whose = if identity.configured_cluster_id.is_some() {
                        "the configured cluster.id"
                    } else {
                        "another log dir's"
                    };
                    return Err(refuse(
                        &meta_path,
                        format!("cluster.id {} does not match {whose} {id}", meta.cluster_id),
                    ));
                }
                _ => cluster_id = Some(meta.cluster_id.clone()),
            }
            match node_id {
                Some(id) if id != meta.node_id => {
                    let (key, whose) = match (meta.version, identity.configured_node_id) {
                        (0, Some(_)) => ("broker.id", "the configured node id"),
                        (_, Some(_)) => ("node.id", "the configured node id"),
                        (0, None) => ("broker.id", "another log dir's node id"),
                        (_, None) => ("node.id", "another log dir's node id"),
                    };
                    return Err(refuse(
                        &meta_path,
                        format!("{key} {} does not match {whose} {id}", meta.node_id),
                    ));
                }
                _ => node_id = Some(meta.node_id),
            }
            if let Some(id) = meta.directory_id {
                if !directory_ids.insert(id) {
                    return Err(refuse(
                        &meta_path,
                        "directory.id duplicates another log dir's".into(),
                    ));
                }
            }
        }
        Ok(LogDirs {
            log_dirs: checked,
            separate_metadata_dir: separate,
            metadata_dir,
            node_id: node_id.unwrap_or(identity.default_node_id),
            cluster_id,
        })
    }

    /// Completes every dir's `meta.properties` in memory: `new_version` where there is none
    /// (1 for KRaft; 0 in ZooKeeper mode, the only version a Kafka 3.9 ZooKeeper-mode broker
    /// starts on, so the dir can go back to Kafka), a `directory.id` where one is missing
    /// (each file keeps its version). Nothing is written until `write_meta_properties`.
    /// Returns the log dirs' directory ids.
    pub fn assign_directory_ids(&mut self, cluster_id: &str, new_version: i32) -> Vec<Uuid> {
        let mut taken: BTreeSet<Uuid> = self.all().filter_map(CheckedDir::directory_id).collect();
        let node_id = self.node_id;
        for dir in self
            .log_dirs
            .iter_mut()
            .chain(self.separate_metadata_dir.iter_mut())
        {
            if dir.directory_id().is_some() {
                continue;
            }
            let id = loop {
                let id = new_kafka_uuid();
                if taken.insert(id) {
                    break id;
                }
            };
            let meta = match dir.meta.take() {
                Some(mut m) => {
                    m.directory_id = Some(id);
                    m
                }
                None => MetaProperties {
                    version: new_version,
                    node_id,
                    cluster_id: cluster_id.to_string(),
                    directory_id: Some(id),
                },
            };
            dir.meta = Some(meta);
            dir.unwritten = true;
        }
        self.log_dirs
            .iter()
            .filter_map(CheckedDir::directory_id)
            .collect()
    }

    /// Writes the `meta.properties` files `assign_directory_ids` completed.
    pub fn write_meta_properties(&mut self) -> Result<(), LogError> {
        for dir in self
            .log_dirs
            .iter_mut()
            .chain(self.separate_metadata_dir.iter_mut())
            .filter(|d| d.unwritten)
        {
            if let Some(meta) = &dir.meta {
                meta.write(&dir.path)?;
            }
            dir.unwritten = false;
        }
        Ok(())
    }

    /// Both steps at once.
    pub fn ensure_meta_properties(
        &mut self,
        cluster_id: &str,
        new_version: i32,
    ) -> Result<Vec<Uuid>, LogError> {
        let ids = self.assign_directory_ids(cluster_id, new_version);
        self.write_meta_properties()?;
        Ok(ids)
    }

    fn all(&self) -> impl Iterator<Item = &CheckedDir> {
        self.log_dirs
            .iter()
            .chain(self.separate_metadata_dir.iter())
    }

    /// The `meta.properties` version of the dirs that have one (0: ZooKeeper mode).
    pub fn versions(&self) -> BTreeSet<i32> {
        self.all()
            .filter_map(|d| d.meta.as_ref().map(|m| m.version))
            .collect()
    }
}

fn open_dir(path: &Path) -> Result<CheckedDir, LogError> {
    std::fs::create_dir_all(path)?;
    let lock = DirLock::acquire(path)?;
    let meta = MetaProperties::read(path)?;
    Ok(CheckedDir {
        path: path.to_path_buf(),
        lock,
        meta,
        unwritten: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(node: Option<i32>, cluster: Option<&str>) -> Identity {
        Identity {
            configured_node_id: node,
            default_node_id: 1,
            configured_cluster_id: cluster.map(str::to_string),
        }
    }

    fn write_meta(dir: &Path, text: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("meta.properties"), text).unwrap();
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn new_dirs_get_meta_properties_only_after_every_check() {
        let root = tempfile::tempdir().unwrap();
        let dirs = vec![root.path().join("a"), root.path().join("b")];
        let mut checked = LogDirs::check(&dirs, None, &identity(None, None)).unwrap();
        assert_eq!(checked.node_id, 1);
        assert_eq!(checked.cluster_id, None);
        assert_eq!(
            listing(&dirs[0]),
            vec![".lock"],
            "nothing written by the checks"
        );
        let ids = checked.ensure_meta_properties("c1", 1).unwrap();
        assert_eq!(ids.len(), 2);
        assert_ne!(ids[0], ids[1]);
        let meta = MetaProperties::read(&dirs[1]).unwrap().unwrap();
        assert_eq!(
            (meta.version, meta.node_id, meta.cluster_id.as_str()),
            (1, 1, "c1")
        );
    }

    #[test]
    fn adopts_the_dirs_identity_and_refuses_a_conflicting_one() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().join("kafka");
        write_meta(
            &d,
            "#\n#Mon Nov 30 18:01:46 UTC 2026\nnode.id=3\ndirectory.id=ADWL50JYHS6Ie6C6nQ0zeQ\nversion=1\ncluster.id=7y5rjCGVROW00v3Hp8aGJQ\n",
        );
        let before = std::fs::read(d.join("meta.properties")).unwrap();
        let checked =
            LogDirs::check(std::slice::from_ref(&d), None, &identity(None, None)).unwrap();
        assert_eq!(checked.node_id, 3);
        assert_eq!(
            checked.cluster_id.as_deref(),
            Some("7y5rjCGVROW00v3Hp8aGJQ")
        );
        drop(checked);

        let err = LogDirs::check(std::slice::from_ref(&d), None, &identity(Some(2), None))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("node.id 3") && err.contains("configured node id 2"),
            "{err}"
        );
        let err = LogDirs::check(
            std::slice::from_ref(&d),
            None,
            &identity(None, Some("other")),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(
            err.contains("7y5rjCGVROW00v3Hp8aGJQ") && err.contains("other"),
            "{err}"
        );
        assert_eq!(std::fs::read(d.join("meta.properties")).unwrap(), before);
        assert_eq!(listing(&d), vec![".lock", "meta.properties"]);
    }

    #[test]
    fn zookeeper_mode_files_keep_their_version() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().join("zk");
        write_meta(&d, "#\nversion=0\nbroker.id=5\ncluster.id=zkcluster\n");
        let mut checked =
            LogDirs::check(std::slice::from_ref(&d), None, &identity(None, None)).unwrap();
        assert_eq!(checked.node_id, 5);
        assert_eq!(checked.versions(), BTreeSet::from([0]));
        checked.ensure_meta_properties("zkcluster", 1).unwrap();
        let meta = MetaProperties::read(&d).unwrap().unwrap();
        assert_eq!((meta.version, meta.node_id), (0, 5));
        assert!(meta.directory_id.is_some());
    }

    #[test]
    fn an_empty_dir_in_zookeeper_mode_gets_a_version_0_file() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().join("empty");
        let mut checked =
            LogDirs::check(std::slice::from_ref(&d), None, &identity(Some(2), None)).unwrap();
        checked.ensure_meta_properties("zkcluster", 0).unwrap();
        let text = std::fs::read_to_string(d.join("meta.properties")).unwrap();
        assert!(
            text.contains("version=0\n") && text.contains("broker.id=2\n"),
            "{text}"
        );
        assert!(!text.contains("node.id"), "{text}");
    }

    #[test]
    fn dirs_must_agree_and_the_metadata_log_stays_in_its_dir() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        write_meta(&a, "version=1\nnode.id=1\ncluster.id=x\n");
        write_meta(&b, "version=1\nnode.id=1\ncluster.id=y\n");
        assert!(LogDirs::check(&[a.clone(), b.clone()], None, &identity(None, None)).is_err());
        write_meta(&b, "version=1\nnode.id=1\ncluster.id=x\n");
        std::fs::create_dir_all(b.join(METADATA_LOG_DIR)).unwrap();
        let err = LogDirs::check(&[a.clone(), b.clone()], None, &identity(None, None))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("metadata.log.dir"), "{err}");
        let checked = LogDirs::check(&[a.clone(), b.clone()], Some(&b), &identity(None, None));
        assert!(checked.is_ok());
    }

    #[test]
    fn a_locked_dir_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let d = root.path().join("d");
        let held = LogDirs::check(std::slice::from_ref(&d), None, &identity(None, None)).unwrap();
        assert!(LogDirs::check(std::slice::from_ref(&d), None, &identity(None, None)).is_err());
        drop(held);
    }
}
