//! A ZooKeeper-mode cluster of real processes started by `scripts/cluster` (ZooKeeper 3.8
//! and three brokers on loopback, skua or Apache Kafka 3.9.1 each), stopped when dropped,
//! with the broker logs' tails printed when a test fails. Each test file adds the helpers
//! its scenarios need in its own `impl Cluster`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The session timeout every broker runs with: failover bounds are measured against it.
pub const SESSION_TIMEOUT_MS: u64 = 6000;

/// Clusters are heavy (up to three JVMs): one at a time.
pub static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub struct Cluster {
    pub dir: tempfile::TempDir,
    /// Every broker's address, broker 1 first.
    pub bootstrap: Vec<String>,
}

impl Cluster {
    /// `scripts/cluster start 3 --skua SKUA` with more options; `None` (with a message)
    /// only when java is not installed.
    pub fn start_kinds(skua: &str, extra: &[&str]) -> Option<Cluster> {
        Self::start_brokers(3, skua, extra)
    }

    /// `scripts/cluster start N --skua SKUA` with more options.
    pub fn start_brokers(n: usize, skua: &str, extra: &[&str]) -> Option<Cluster> {
        if Command::new("java").arg("-version").output().is_err() {
            eprintln!("SKIPPED: java is not installed, so scripts/cluster cannot start Kafka");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(script())
            .args(["start", &n.to_string(), "--skua", skua, "--dir"])
            .arg(dir.path())
            .args([
                "--override",
                &format!("zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}"),
            ])
            .args(extra)
            .env("SKUA_BIN", env!("CARGO_BIN_EXE_skua"))
            .output()
            .expect("scripts/cluster runs");
        let mut cluster = Cluster {
            dir,
            bootstrap: Vec::new(),
        };
        assert!(
            out.status.success(),
            "scripts/cluster start: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            cluster.log(1)
        );
        let bootstrap = String::from_utf8(out.stdout).unwrap();
        cluster.bootstrap = bootstrap.trim().split(',').map(str::to_string).collect();
        Some(cluster)
    }

    /// `scripts/cluster COMMAND DIR ARGS...`.
    pub fn run(&self, command: &str, args: &[&str]) -> Output {
        Command::new(script())
            .arg(command)
            .arg(self.dir.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("scripts/cluster runs")
    }

    /// `scripts/cluster kill|term|pause|resume|restart DIR BROKER`, which must succeed.
    pub fn signal(&self, command: &str, broker: usize) {
        let out = self.run(command, &[&broker.to_string()]);
        assert!(
            out.status.success(),
            "scripts/cluster {command} {broker}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn log(&self, broker: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("broker-{broker}/server.log")))
            .unwrap_or_default()
    }

    /// ZooKeeper's connect string, chroot included.
    pub fn zk_connect(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("zk-connect"))
            .unwrap()
            .trim()
            .to_string()
    }
}

/// Where tests' blocking ZooKeeper reads run.
pub fn rt() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Runtime::new().unwrap())
}

/// Blocking reads of the cluster's ZooKeeper state.
impl Cluster {
    pub fn zk_session(&self) -> skua::zk::session::ZkSession {
        let config =
            skua::zk::session::ZkConfig::new(&self.zk_connect(), Duration::from_secs(10), None)
                .unwrap();
        rt().block_on(skua::zk::session::ZkSession::connect(&config))
            .unwrap()
    }

    /// The partition's `state` znode.
    pub fn partition_state(
        &self,
        s: &skua::zk::session::ZkSession,
        topic: &str,
        partition: i32,
    ) -> Option<skua::zk::znodes::LeaderIsrAndControllerEpoch> {
        let path = skua::zk::znodes::paths::partition_state(topic, partition);
        let (data, _) = rt().block_on(s.get(&path)).unwrap()?;
        skua::zk::znodes::decode(&data).ok()
    }

    /// The controller's id, from `/controller`.
    pub fn zk_controller(&self, s: &skua::zk::session::ZkSession) -> i32 {
        let (data, _) = rt().block_on(s.get("/controller")).unwrap().unwrap();
        skua::zk::znodes::decode::<skua::zk::znodes::ControllerRegistration>(&data)
            .unwrap()
            .brokerid
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // A paused broker would not stop.
        for i in 1..=self.bootstrap.len() {
            let _ = self.run("resume", &[&i.to_string()]);
        }
        let _ = self.run("stop", &[]);
        if std::thread::panicking() {
            for i in 1..=self.bootstrap.len().max(1) {
                let log = self.log(i);
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                eprintln!("--- broker {i} log tail ---");
                for l in tail.into_iter().rev() {
                    eprintln!("{l}");
                }
            }
        }
    }
}

/// `scripts/cluster`.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/cluster")
}

/// Polls `f` every 300 ms until it returns Some, for at most `limit`.
pub fn eventually<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(300));
    }
}
