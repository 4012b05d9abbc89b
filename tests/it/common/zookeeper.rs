//! A real ZooKeeper 3.8 started by `scripts/zk` on its own loopback ports, stopped when
//! dropped. `start` is `None` (with a message) only when java is not installed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use skua::zk::session::ZkConfig;

pub struct ZooKeeper {
    dir: tempfile::TempDir,
    /// The connect string, without a chroot.
    pub connect: String,
}

impl ZooKeeper {
    pub fn start() -> Option<ZooKeeper> {
        ZooKeeper::start_ensemble(1)
    }

    /// An ensemble of `nodes` servers (node numbers 1..=nodes for `kill` and `restart`).
    pub fn start_ensemble(nodes: u32) -> Option<ZooKeeper> {
        if Command::new("java").arg("-version").output().is_err() {
            eprintln!("SKIPPED: java is not installed, so scripts/zk cannot start ZooKeeper");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(script())
            .args(["start", "--nodes", &nodes.to_string(), "--dir"])
            .arg(dir.path())
            .output()
            .expect("scripts/zk runs");
        assert!(
            out.status.success(),
            "scripts/zk start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let connect = String::from_utf8(out.stdout).unwrap().trim().to_string();
        Some(ZooKeeper { dir, connect })
    }

    /// SIGKILLs node `node` (1-based).
    pub fn kill(&self, node: u32) {
        self.run(&["kill", &node.to_string()]);
    }

    /// Starts node `node` again on its ports and data.
    pub fn restart(&self, node: u32) {
        self.run(&["restart", &node.to_string()]);
    }

    fn run(&self, args: &[&str]) {
        let (command, node) = (args[0], &args[1..]);
        let out = Command::new(script())
            .arg(command)
            .arg(self.dir.path())
            .args(node)
            .output()
            .expect("scripts/zk runs");
        assert!(
            out.status.success(),
            "scripts/zk {command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A session config for `chroot` ("" for none): 6 s session, 10 s to connect.
    pub fn config(&self, chroot: &str) -> ZkConfig {
        ZkConfig::new(
            &format!("{}{chroot}", self.connect),
            Duration::from_secs(6),
            Some(Duration::from_secs(10)),
        )
        .unwrap()
    }
}

impl Drop for ZooKeeper {
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("stop")
            .arg(self.dir.path())
            .output();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/zk")
}
