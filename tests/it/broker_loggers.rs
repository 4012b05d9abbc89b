//! A broker's loggers over TCP, as `kafka-configs.sh --entity-type broker-loggers` drives
//! them: DescribeConfigs lists them with their levels (from config, then as changed), an
//! IncrementalAlterConfigs SET or DELETE changes what the broker writes to its log at
//! once, with Kafka's refusals; the log is JSON lines (`logging.format=json`).

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use serde_json::Value;

use common::configs::{incremental_alter as alter, APPEND, DELETE, SET};
use common::Client;

const BROKER_LOGGER: i8 = 8;
const DYNAMIC_BROKER_LOGGER_CONFIG: i8 = 6;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const BROKER_ID: &str = "7";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// The skua binary writing JSON log lines, each kept as it comes.
struct Process {
    child: Child,
    addr: SocketAddr,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Process {
    fn start(dir: &Path) -> Process {
        let mut child = Command::new(env!("CARGO_BIN_EXE_skua"))
            .args(["--override", "listeners=PLAINTEXT://127.0.0.1:0"])
            .args(["--override", &format!("log.dirs={}", dir.display())])
            .args(["--override", &format!("broker.id={BROKER_ID}")])
            .args(["--override", "logging.format=json"])
            .args(["--override", "logging.level.kafka.log.LogCleaner=warn"])
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("skua starts");
        let out = child.stdout.take().expect("piped stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let kept = lines.clone();
        let (found, bound) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
                if value["message"] == "skua started" {
                    let _ = found.send(value["fields"]["listeners"].to_string());
                }
                kept.lock().unwrap().push(value);
            }
        });
        let mut process = Process {
            child,
            addr: "127.0.0.1:0".parse().unwrap(),
            lines,
        };
        let listeners = bound
            .recv_timeout(Duration::from_secs(60))
            .expect("skua did not start");
        let port = listeners
            .split("127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split(']').next())
            .and_then(|p| p.parse::<u16>().ok())
            .unwrap_or_else(|| panic!("no port in {listeners}"));
        process.addr = format!("127.0.0.1:{port}").parse().unwrap();
        process
    }

    /// The lines logged so far that `matches`.
    fn logged(&self, matches: impl Fn(&Value) -> bool) -> Vec<Value> {
        let lines = self.lines.lock().unwrap();
        lines.iter().filter(|l| matches(l)).cloned().collect()
    }

    /// Waits (up to 10 s) for a line that `matches`.
    async fn wait_logged(&self, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(line) = self.logged(&matches).pop() {
                return line;
            }
            assert!(Instant::now() < deadline, "no such line was logged");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The broker's loggers (all, or those named) as (name, level), checking each entry's
/// shape as Kafka's `ConfigHelper` gives it.
async fn describe(c: &mut Client, name: &str, keys: Option<&[&str]>) -> Vec<(String, String)> {
    let req = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![
            describe_configs_request::DescribeConfigsResource::default()
                .with_resource_type(BROKER_LOGGER)
                .with_resource_name(s(name))
                .with_configuration_keys(keys.map(|k| k.iter().map(|k| s(k)).collect())),
        ]);
    let resp = c.send(&req, 4).await;
    let r = &resp.results[0];
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    r.configs
        .iter()
        .map(|e| {
            assert_eq!(e.config_source, DYNAMIC_BROKER_LOGGER_CONFIG, "{e:?}");
            assert!(
                !e.read_only && !e.is_sensitive && e.synonyms.is_empty(),
                "{e:?}"
            );
            let value = e.value.as_ref().expect("a level").to_string();
            (e.name.to_string(), value)
        })
        .collect()
}

fn level_of(described: &[(String, String)], name: &str) -> String {
    let found = described.iter().find(|(n, _)| n == name);
    found
        .unwrap_or_else(|| panic!("{name} not in {described:?}"))
        .1
        .clone()
}

/// A Metadata request from a client named `client_id`.
async fn metadata(addr: SocketAddr, client_id: &str) {
    let mut c = Client::connect(addr).await;
    c.set_client_id(client_id);
    c.send(&MetadataRequest::default().with_topics(Some(vec![])), 9)
        .await;
}

fn completed_by(client_id: &str) -> impl Fn(&Value) -> bool + '_ {
    move |l| l["message"] == "Completed request" && l["fields"]["client_id"] == client_id
}

#[tokio::test]
async fn a_logger_changed_over_tcp_is_described_and_changes_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Process::start(dir.path());
    let mut c = Client::connect(broker.addr).await;

    // Every logger at once: root, Kafka's names, skua's modules; the config's level.
    let all = describe(&mut c, BROKER_ID, None).await;
    assert_eq!(level_of(&all, "root"), "INFO");
    assert_eq!(level_of(&all, "kafka.request.logger"), "INFO");
    assert_eq!(level_of(&all, "kafka.server.ReplicaManager"), "INFO");
    assert_eq!(level_of(&all, "skua::replica"), "INFO");
    assert_eq!(level_of(&all, "kafka.log.LogCleaner"), "WARN");
    assert!(all.len() > 40, "{all:?}");

    // The request log is off: a request leaves no line.
    metadata(broker.addr, "before").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(broker.logged(completed_by("before")).is_empty());

    let (code, message) = alter(
        &mut c,
        BROKER_LOGGER,
        BROKER_ID,
        &[(SET, "kafka.request.logger", Some("DEBUG"))],
    )
    .await;
    assert_eq!((code, message), (0, None));
    let one = describe(&mut c, BROKER_ID, Some(&["kafka.request.logger"])).await;
    assert_eq!(one, vec![("kafka.request.logger".into(), "DEBUG".into())]);
    broker
        .wait_logged(|l| {
            l["level"] == "WARN"
                && l["message"] == "Updated the log level of kafka.request.logger to DEBUG"
        })
        .await;

    // Now each request is logged, under the module the Kafka name maps to.
    metadata(broker.addr, "during").await;
    let line = broker.wait_logged(completed_by("during")).await;
    assert_eq!(line["level"], "DEBUG");
    assert_eq!(line["logger"], "skua::network::request_log");
    assert_eq!(line["fields"]["api"], "Metadata");
    assert_eq!(line["fields"]["version"], 9);
    assert_eq!(line["fields"]["principal"], "User:ANONYMOUS");
    assert!(line["fields"]["local_ms"].as_f64().is_some(), "{line}");

    // Kafka's refusals, none of which changes anything.
    let refused = [
        ((SET, "kafka.request.logger", Some("debug")), INVALID_CONFIG,
         "Cannot set the log level of kafka.request.logger to debug as it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"),
        ((SET, "kafka.nope", Some("INFO")), INVALID_CONFIG, "Logger kafka.nope does not exist!"),
        ((DELETE, "root", None), INVALID_REQUEST, "Removing the log level of the root logger is not allowed"),
        ((APPEND, "root", Some("INFO")), INVALID_REQUEST, "APPEND operation is not allowed for the BROKER_LOGGER resource"),
    ];
    for (op, code, message) in refused {
        let got = alter(&mut c, BROKER_LOGGER, BROKER_ID, &[op]).await;
        assert_eq!(got, (code, Some(message.to_string())), "{op:?}");
    }
    let got = alter(&mut c, BROKER_LOGGER, "8", &[(SET, "root", Some("INFO"))]).await;
    assert_eq!(got.0, INVALID_REQUEST);
    // The legacy AlterConfigs does not take the resource, as in Kafka.
    let legacy = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(BROKER_LOGGER)
            .with_resource_name(s(BROKER_ID))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(s("root"))
                .with_value(Some(s("DEBUG")))]),
    ]);
    let resp = c.send(&legacy, 1).await;
    assert_eq!(resp.responses[0].error_code, INVALID_REQUEST);
    assert_eq!(
        resp.responses[0].error_message.as_deref(),
        Some("Unknown resource type 8")
    );
    // Describing another broker's loggers, or none, is refused.
    let req = DescribeConfigsRequest::default().with_resources(vec![
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(BROKER_LOGGER)
            .with_resource_name(s("")),
    ]);
    let resp = c.send(&req, 4).await;
    assert_eq!(resp.results[0].error_code, INVALID_REQUEST);
    assert_eq!(
        level_of(&describe(&mut c, BROKER_ID, None).await, "root"),
        "INFO"
    );

    // Unset: back to its ancestors' level, and the request log is off again.
    let got = alter(
        &mut c,
        BROKER_LOGGER,
        BROKER_ID,
        &[(DELETE, "kafka.request.logger", None)],
    )
    .await;
    assert_eq!(got, (0, None));
    let one = describe(&mut c, BROKER_ID, Some(&["kafka.request.logger"])).await;
    assert_eq!(one, vec![("kafka.request.logger".into(), "INFO".into())]);
    metadata(broker.addr, "after").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(broker.logged(completed_by("after")).is_empty());

    // A skua module path works the same: the whole network module at DEBUG logs the
    // request log's lines too.
    let got = alter(
        &mut c,
        BROKER_LOGGER,
        BROKER_ID,
        &[(SET, "skua::network", Some("DEBUG"))],
    )
    .await;
    assert_eq!(got, (0, None));
    let all = describe(&mut c, BROKER_ID, None).await;
    assert_eq!(level_of(&all, "skua::network"), "DEBUG");
    assert_eq!(level_of(&all, "kafka.request.logger"), "DEBUG");
    metadata(broker.addr, "module").await;
    broker.wait_logged(completed_by("module")).await;
}
