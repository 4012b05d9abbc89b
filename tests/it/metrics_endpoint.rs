//! The metrics endpoint over HTTP (`metrics.listener`): a scrape after a produce, a
//! consume and an offset commit shows Kafka's names (as the JMX exporter with Strimzi's
//! rules makes them) moving by what was done; the endpoint answers only GET /metrics,
//! in the text format or OpenMetrics as asked.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kafka_protocol::messages::FindCoordinatorRequest;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{self, TestBroker};

/// One HTTP/1.1 exchange: (status line, headers lower-cased, body de-chunked).
pub async fn http_get(
    addr: SocketAddr,
    method: &str,
    path: &str,
    accept: Option<&str>,
) -> (String, BTreeMap<String, String>, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    let request = format!("{method} {path} HTTP/1.1\r\nHost: skua\r\n{accept}\r\n");
    s.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut raw))
        .await
        .expect("the response within 20 s")
        .unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().to_string();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = match headers.get("transfer-encoding").map(String::as_str) {
        Some("chunked") => dechunk(body),
        _ => body.to_string(),
    };
    (status, headers, body)
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").expect("a chunk size line");
        let size = usize::from_str_radix(size, 16).expect("a hex chunk size");
        if size == 0 {
            assert_eq!(rest, "\r\n", "the body ends after the last chunk");
            return out;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].strip_prefix("\r\n").expect("a chunk's CRLF");
    }
}

/// Every sample of a text exposition, by its name and labels as printed.
pub fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (key, value) = l.rsplit_once(' ').unwrap();
            let value = match value {
                "+Inf" => f64::INFINITY,
                v => v.parse().unwrap_or_else(|_| panic!("a number in {l}")),
            };
            (key.to_string(), value)
        })
        .collect()
}

pub async fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
    let (status, _, body) = http_get(addr, "GET", "/metrics", None).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    samples(&body)
}

fn get(m: &BTreeMap<String, f64>, key: &str) -> f64 {
    *m.get(key)
        .unwrap_or_else(|| panic!("{key} is scraped; got {:#?}", m.keys().collect::<Vec<_>>()))
}

#[tokio::test]
async fn a_scrape_shows_kafkas_names_moving_with_produce_consume_and_commit() {
    let dir = tempfile::tempdir().unwrap();
    let overrides = [
        ("metrics.listener", "http://127.0.0.1:0"),
        ("offsets.topic.num.partitions", "1"),
    ];
    let b = TestBroker::start(dir.path(), &overrides).await;
    let addr = b.metrics_addr.expect("the metrics endpoint is served");
    let before = scrape(addr).await;
    assert_eq!(
        get(&before, "kafka_server_brokertopicmetrics_messagesin_total"),
        0.0
    );

    let mut c = b.client().await;
    assert_eq!(c.create_topic("m", 1).await, 0);
    let values = ["one", "two", "three", "four", "five"];
    let first = common::batch(&values, None, Compression::None);
    let second = common::batch(&["six", "seven", "eight"], None, Compression::None);
    assert_eq!(c.produce("m", 0, first.clone(), 1).await.0, 0);
    assert_eq!(c.produce("m", 0, second.clone(), 1).await.0, 0);
    let fetched = c.fetch("m", 0, 0, 0, 1).await;
    let fetched_bytes = fetched.records.as_ref().map_or(0, |r| r.len()) as f64;
    assert!(fetched_bytes > 0.0);
    // FindCoordinator creates __consumer_offsets (one partition, so it is quick).
    let find = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![StrBytes::from_static_str("g")]);
    assert_eq!(c.send(&find, 4).await.coordinators[0].error_code, 0);
    assert_eq!(c.commit_offset("g", "m", 6, None).await, 0);

    // The response send and total times are marked once the response is written.
    let m = loop {
        let m = scrape(addr).await;
        if m.get("kafka_network_requestmetrics_totaltimems_count{request=\"FetchConsumer\"}")
            == Some(&1.0)
        {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let topic = |name: &str| {
        get(
            &m,
            &format!("kafka_server_brokertopicmetrics_{name}_total{{topic=\"m\"}}"),
        )
    };
    let payload: usize = [
        "one", "two", "three", "four", "five", "six", "seven", "eight",
    ]
    .iter()
    .map(|v| v.len())
    .sum();
    assert_eq!(topic("messagesin"), 8.0, "messages in = records");
    assert!(topic("bytesin") >= payload as f64, "bytes in >= payload");
    assert_eq!(topic("bytesin"), (first.len() + second.len()) as f64);
    assert_eq!(topic("bytesout"), fetched_bytes);
    assert_eq!(topic("totalproducerequests"), 2.0);
    assert_eq!(topic("totalfetchrequests"), 1.0);
    assert_eq!(topic("failedproducerequests"), 0.0);
    assert_eq!(topic("bytesrejected"), 0.0);
    // All topics: no topic label, and the offset commit's record counted too.
    let all_in = get(&m, "kafka_server_brokertopicmetrics_messagesin_total");
    assert!(all_in >= 9.0, "{all_in}");
    assert_eq!(
        get(
            &m,
            "kafka_server_brokertopicmetrics_replicationbytesin_total"
        ),
        0.0
    );

    let rm = |k: &str| get(&m, &format!("kafka_network_requestmetrics_{k}"));
    assert_eq!(rm("requests_total{request=\"Produce\",version=\"9\"}"), 2.0);
    assert_eq!(rm("errors_total{request=\"Produce\",error=\"NONE\"}"), 2.0);
    assert_eq!(rm("requests_total{request=\"Fetch\",version=\"12\"}"), 1.0);
    assert_eq!(
        rm("requests_total{request=\"FetchConsumer\",version=\"12\"}"),
        1.0
    );
    assert_eq!(rm("totaltimems_count{request=\"Produce\"}"), 2.0);
    let p99 = rm("totaltimems{request=\"Produce\",quantile=\"0.99\"}");
    assert!(p99 > 0.0 && p99 < 5_000.0, "{p99}");
    for stage in [
        "requestqueuetimems",
        "localtimems",
        "remotetimems",
        "throttletimems",
        "responsesendtimems",
    ] {
        assert_eq!(
            rm(&format!("{stage}_count{{request=\"Produce\"}}")),
            2.0,
            "{stage}"
        );
    }
    let micros = |k: &str| {
        get(
            &m,
            &format!("skua_network_requestmetrics_totaltime_microseconds{k}"),
        )
    };
    assert_eq!(micros("_count{request=\"Produce\"}"), 2.0);
    assert_eq!(micros("_bucket{request=\"Produce\",le=\"+Inf\"}"), 2.0);
    assert!(micros("_sum{request=\"Produce\"}") > 0.0);

    let replica = |k: &str| get(&m, &format!("kafka_server_replicamanager_{k}"));
    let partitions = replica("partitioncount");
    assert!(partitions >= 2.0, "m-0 and __consumer_offsets");
    assert_eq!(replica("leadercount"), partitions);
    assert_eq!(replica("underreplicatedpartitions"), 0.0);
    assert_eq!(replica("offlinereplicacount"), 0.0);
    let tp = "{topic=\"m\",partition=\"0\"}";
    assert_eq!(get(&m, &format!("kafka_log_log_logendoffset{tp}")), 8.0);
    assert_eq!(get(&m, &format!("kafka_log_log_logstartoffset{tp}")), 0.0);
    assert_eq!(get(&m, &format!("kafka_log_log_numlogsegments{tp}")), 1.0);
    assert_eq!(
        get(&m, &format!("kafka_log_log_size{tp}")),
        b.log("m").size_bytes() as f64
    );
    assert_eq!(
        get(&m, &format!("kafka_cluster_partition_underreplicated{tp}")),
        0.0
    );
    assert_eq!(
        get(&m, "kafka_log_logmanager_offlinelogdirectorycount"),
        0.0
    );

    let controller = |k: &str| get(&m, &format!("kafka_controller_kafkacontroller_{k}"));
    assert_eq!(controller("activecontrollercount"), 1.0);
    assert_eq!(controller("offlinepartitionscount"), 0.0);
    assert!(controller("globaltopiccount") >= 2.0);
    assert_eq!(controller("globalpartitioncount"), partitions);
    // The runtime's idle fraction, as Kafka's two idle gauges (0 to 1), and no fetcher lag
    // on a broker alone.
    for idle in [
        "kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
        "kafka_network_socketserver_networkprocessoravgidle_percent",
    ] {
        let v = get(&m, idle);
        assert!((0.0..=1.0).contains(&v), "{idle} {v}");
    }
    assert_eq!(
        get(
            &m,
            "kafka_server_replicafetchermanager_maxlag{clientId=\"Replica\"}"
        ),
        0.0
    );

    let listener = "{listener=\"PLAINTEXT\",networkProcessor=\"0\"}";
    assert_eq!(
        get(
            &m,
            &format!("kafka_server_socket_server_metrics_connection_count{listener}")
        ),
        1.0
    );

    let group = "{consumergroup=\"g\",topic=\"m\",partition=\"0\"}";
    assert_eq!(
        get(&m, &format!("kafka_consumergroup_current_offset{group}")),
        6.0
    );
    assert_eq!(get(&m, &format!("kafka_consumergroup_lag{group}")), 2.0);
    assert_eq!(
        get(
            &m,
            "kafka_consumergroup_lag_sum{consumergroup=\"g\",topic=\"m\"}"
        ),
        2.0
    );
    assert_eq!(
        get(&m, "kafka_consumergroup_members{consumergroup=\"g\"}"),
        0.0
    );
    // The group has committed offsets and no members: an empty classic group, as Kafka
    // keeps a simple consumer's.
    let groups = |k: &str| {
        get(
            &m,
            &format!("kafka_coordinator_group_groupmetadatamanager_{k}"),
        )
    };
    assert_eq!(groups("numgroups"), 1.0);
    assert_eq!(groups("numgroupsempty"), 1.0);
    assert_eq!(groups("numgroupsstable"), 0.0);
    assert_eq!(groups("numoffsets"), 1.0);
    let count = "kafka_server_group_coordinator_metrics_group_count";
    assert_eq!(get(&m, &format!("{count}{{protocol=\"classic\"}}")), 1.0);
    assert_eq!(get(&m, &format!("{count}{{protocol=\"consumer\"}}")), 0.0);

    assert!(get(&m, "process_resident_memory_bytes") > 0.0);
    assert!(get(&m, "process_open_fds") > 0.0);
    assert!(m.contains_key("process_cpu_seconds_total"));
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        get(&m, &format!("skua_build_info{{version=\"{version}\"}}")),
        1.0
    );

    drop(c);
    b.stop().await;
}

#[tokio::test]
async fn the_endpoint_answers_get_metrics_only_in_the_format_asked() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[("metrics.listener", "http://127.0.0.1:0")]).await;
    let addr = b.metrics_addr.unwrap();
    let (status, headers, body) = http_get(addr, "GET", "/metrics", None).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        headers["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert!(body.contains("# TYPE kafka_server_brokertopicmetrics_bytesin_total counter\n"));
    assert!(!body.contains("# EOF"));
    let accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    let (status, headers, body) = http_get(addr, "GET", "/metrics", Some(accept)).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(headers["content-type"].starts_with("application/openmetrics-text; version=1.0.0"));
    assert!(body.contains("# TYPE kafka_server_brokertopicmetrics_bytesin counter\n"));
    assert!(body.ends_with("# EOF\n"));
    assert!(http_get(addr, "GET", "/", None)
        .await
        .0
        .starts_with("HTTP/1.1 404"));
    assert!(http_get(addr, "POST", "/metrics", None)
        .await
        .0
        .starts_with("HTTP/1.1 405"));
    // A request head past 8 KiB is refused (400, or a reset when the close finds the
    // rest unread), not buffered: the connection ends at once.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(10_000));
    let _ = s.write_all(huge.as_bytes()).await;
    let mut out = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    assert!(read.is_ok(), "the connection is closed");
    let out = String::from_utf8_lossy(&out);
    assert!(out.is_empty() || out.starts_with("HTTP/1.1 400"), "{out}");
    b.stop().await;
}

/// A broker hosting many partitions answers a scrape promptly: 1,000 by default (the
/// test stays short); `SKUA_METRICS_SCRAPE_PARTITIONS=10000` is the measurement
/// docs/operations.md reports (creating them takes about 40 s in a debug build).
#[tokio::test]
async fn a_scrape_of_many_partitions_is_prompt() {
    let n: i32 = std::env::var("SKUA_METRICS_SCRAPE_PARTITIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[("metrics.listener", "http://127.0.0.1:0")]).await;
    let mut c = b.client().await;
    let per_topic = 1_000;
    for t in 0..n / per_topic {
        assert_eq!(c.create_topic(&format!("t{t}"), per_topic).await, 0);
    }
    let addr = b.metrics_addr.unwrap();
    let _ = http_get(addr, "GET", "/metrics", None).await;
    let started = Instant::now();
    let (_, _, body) = http_get(addr, "GET", "/metrics", None).await;
    let took = started.elapsed();
    let m = samples(&body);
    assert_eq!(
        get(&m, "kafka_server_replicamanager_partitioncount"),
        f64::from(n / per_topic * per_topic)
    );
    eprintln!(
        "scrape of {n} partitions: {} ms, {} bytes, {} samples",
        took.as_millis(),
        body.len(),
        m.len()
    );
    assert!(took < Duration::from_secs(2), "{took:?} in a debug build");
    drop(c);
    b.stop().await;
}
