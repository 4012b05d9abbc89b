//! skua started on a data dir Apache Kafka 4.4 wrote (tests/fixtures/kafka-4.4-kraft.md)
//! serves all of it: Kafka's topics with their ids, partitions and configs from Kafka's
//! metadata log, every record, the committed group offsets, and the idempotent producer's
//! state; and what skua adds goes into the same files, in Kafka's formats. A second dir
//! (tests/fixtures/kafka-4.4-security.md) brings Kafka's ACLs, client quotas and SCRAM
//! users, which skua lists, enforces and changes in the same metadata log.

use crate::common;

use std::path::Path;

use bytes::Bytes;
use common::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

/// Kafka's broker config for this dir had `offsets.topic.num.partitions=3`; a user moving
/// to skua starts it with the same server.properties.
const KAFKA_CONFIG: &[(&str, &str)] = &[("offsets.topic.num.partitions", "3")];

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn kafka_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kafka-4.4-kraft");
    copy_dir(&fixture, dir.path());
    dir
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// (producer id, producer epoch, last sequence) of the last batch in `records`.
fn last_producer(records: &Bytes) -> (i64, i16, i32) {
    let mut buf = records.clone();
    let sets = RecordBatchDecoder::decode_all(&mut buf).unwrap();
    let r = sets.last().unwrap().records.last().unwrap();
    (r.producer_id, r.producer_epoch, r.sequence)
}

async fn committed(c: &mut Client, group: &str) -> Vec<(String, i32, i64)> {
    let req = OffsetFetchRequest::default().with_groups(vec![
        offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(None),
    ]);
    let resp = c.send(&req, 8).await;
    assert_eq!(resp.groups[0].error_code, 0);
    let mut out: Vec<_> = resp.groups[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.name.to_string(), p.partition_index, p.committed_offset))
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn serves_a_kafka_4_4_data_dir_as_it_is() {
    let dir = kafka_dir();
    let meta_before = std::fs::read_to_string(dir.path().join("meta.properties")).unwrap();
    let b = TestBroker::start(dir.path(), KAFKA_CONFIG).await;
    assert_eq!(b.broker.controller.cluster_id(), "awONihrhQeyT27RNaPqDig");
    assert_eq!(b.broker.config().broker_id, 1);
    let mut c = b.client().await;

    // Topics, ids and configs from Kafka's metadata log.
    let req = MetadataRequest::default().with_topics(None);
    let md = c.send(&req, 12).await;
    assert_eq!(
        md.cluster_id.as_ref().map(|x| x.as_str()),
        Some("awONihrhQeyT27RNaPqDig")
    );
    let topic = |n: &str| {
        md.topics
            .iter()
            .find(|t| t.name.as_ref().map(|x| x.as_str()) == Some(n))
            .unwrap()
    };
    assert_eq!(topic("orders").partitions.len(), 3);
    assert_eq!(topic("compacted").partitions.len(), 2);
    assert_eq!(
        skua::log::uuid_to_kafka_string(topic("orders").topic_id),
        "beWQG3FXQiKY02bl60WmyA"
    );
    for p in &topic("orders").partitions {
        assert_eq!((p.error_code, p.leader_id.0, p.leader_epoch), (0, 1, 2));
    }
    let compacted = b.broker.controller.topic("compacted").unwrap();
    assert_eq!(compacted.configs["cleanup.policy"], "compact");

    // Every record.
    let mut orders = Vec::new();
    for p in 0..3 {
        let data = c.fetch("orders", p, 0, 0, 1).await;
        assert_eq!((data.error_code, data.high_watermark), (0, 10));
        orders.extend(
            values(data.records.as_ref().unwrap())
                .into_iter()
                .map(|(_, v)| v),
        );
    }
    orders.sort_by_key(|v| v[6..].parse::<u32>().unwrap());
    assert_eq!(
        orders,
        (0..30).map(|i| format!("order-{i}")).collect::<Vec<_>>()
    );
    let data = c.fetch("compacted", 1, 0, 0, 1).await;
    assert_eq!(
        values(data.records.as_ref().unwrap()),
        vec![
            (0, "v1".into()),
            (1, "v3".into()),
            (2, "v5".into()),
            (3, "v7".into()),
            (4, "v9".into())
        ]
    );

    // The committed offsets.
    assert_eq!(
        committed(&mut c, "fixture-group").await,
        vec![
            ("orders".into(), 0, 4),
            ("orders".into(), 1, 7),
            ("orders".into(), 2, 10)
        ]
    );

    // The producer that wrote to Kafka goes on where it stopped: its next sequence is
    // accepted, a gap is refused; a new producer gets an id past Kafka's block.
    let data = c.fetch("orders", 0, 0, 0, 1).await;
    let (pid, epoch, last_seq) = last_producer(data.records.as_ref().unwrap());
    assert_eq!(last_seq, 9);
    let next = batch(
        &["order-30"],
        Some((pid, epoch, last_seq + 1)),
        Compression::None,
    );
    assert_eq!(c.produce("orders", 0, next, -1).await, (0, 10));
    let gap = batch(
        &["order-99"],
        Some((pid, epoch, last_seq + 5)),
        Compression::None,
    );
    assert_eq!(
        c.produce("orders", 0, gap, -1).await.0,
        ResponseError::OutOfOrderSequenceNumber.code()
    );
    let init = c
        .send(
            &InitProducerIdRequest::default().with_transaction_timeout_ms(60_000),
            4,
        )
        .await;
    assert_eq!(init.error_code, 0);
    assert!(init.producer_id.0 >= 1000, "{:?}", init.producer_id);

    // Commits go on in Kafka's __consumer_offsets.
    let req = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("fixture-group")))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(s(""))
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(s("orders")))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(11),
                ]),
        ]);
    let resp = c.send(&req, 8).await;
    assert_eq!(resp.topics[0].partitions[0].error_code, 0);
    b.stop().await;

    // meta.properties is Kafka's, untouched; after a restart everything is still there.
    assert_eq!(
        std::fs::read_to_string(dir.path().join("meta.properties")).unwrap(),
        meta_before
    );
    let b = TestBroker::start(dir.path(), KAFKA_CONFIG).await;
    let mut c = b.client().await;
    assert_eq!(c.fetch("orders", 0, 0, 0, 1).await.high_watermark, 11);
    assert_eq!(
        committed(&mut c, "fixture-group").await,
        vec![
            ("orders".into(), 0, 11),
            ("orders".into(), 1, 7),
            ("orders".into(), 2, 10)
        ]
    );
    b.stop().await;
}

#[tokio::test]
async fn a_kafka_dir_with_another_identity_is_refused_before_anything_is_written() {
    let dir = kafka_dir();
    let listing = |d: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = listing(dir.path());
    let meta = std::fs::read(dir.path().join("meta.properties")).unwrap();
    for (key, value) in [("cluster.id", "another-cluster"), ("node.id", "2")] {
        let args = vec![
            "--override".to_string(),
            "listeners=PLAINTEXT://127.0.0.1:0".to_string(),
            "--override".to_string(),
            format!("log.dirs={}", dir.path().display()),
            "--override".to_string(),
            format!("{key}={value}"),
        ];
        let config = skua::config::from_args(&args).unwrap();
        let err = skua::broker::Broker::open(config)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(value), "{err}");
        let mut after = listing(dir.path());
        after.retain(|n| n != ".lock");
        assert_eq!(after, before, "nothing written into the dir");
        assert_eq!(
            std::fs::read(dir.path().join("meta.properties")).unwrap(),
            meta
        );
        assert!(dir.path().join(".kafka_cleanshutdown").exists());
    }
}

/// `process.roles=broker` (a broker beside Apache Kafka's controllers) never writes a
/// dir it cannot join: a dir `kafka-storage.sh format` did not format is refused with the
/// way to format it, and a formatted dir whose quorum cannot be reached is refused once
/// `initial.broker.registration.timeout.ms` passes, its meta.properties and partitions
/// untouched (skua's own single-node log would fork the cluster's metadata); an
/// authorizer, which a KRaft broker cannot run yet, is refused before anything starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kraft_broker_refuses_dirs_it_cannot_join_before_anything_is_written() {
    let listing = |d: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != ".lock")
            .collect();
        names.sort();
        names
    };
    let open_with = |dir: &Path, extra: &[&str]| {
        let mut args = Vec::new();
        for kv in extra {
            args.push("--override".to_string());
            args.push(kv.to_string());
        }
        for kv in [
            "listeners=PLAINTEXT://127.0.0.1:0".to_string(),
            format!("log.dirs={}", dir.display()),
            "process.roles=broker".to_string(),
            "node.id=1".to_string(),
            "controller.quorum.bootstrap.servers=127.0.0.1:1".to_string(),
            "controller.listener.names=CONTROLLER".to_string(),
            "initial.broker.registration.timeout.ms=1000".to_string(),
        ] {
            args.push("--override".to_string());
            args.push(kv);
        }
        let config = skua::config::from_args(&args).unwrap();
        skua::broker::Broker::open(config)
            .err()
            .expect("refused")
            .to_string()
    };
    let open = |dir: &Path| open_with(dir, &[]);

    let empty = tempfile::tempdir().unwrap();
    let err = open(empty.path());
    assert!(
        err.contains("has no meta.properties") && err.contains("kafka-storage.sh format"),
        "{err}"
    );
    assert!(listing(empty.path()).is_empty(), "nothing written");

    let dir = kafka_dir();
    let before = listing(dir.path());
    let meta = std::fs::read(dir.path().join("meta.properties")).unwrap();
    let started = std::time::Instant::now();
    let err = open(dir.path());
    assert!(
        err.contains("process.roles=broker")
            && err.contains("initial.broker.registration.timeout.ms"),
        "{err}"
    );
    // Kafka's StandardAuthorizer is accepted (it follows the controller's ACL records):
    // the broker goes on to register, and fails there as without it.
    let err = open_with(
        dir.path(),
        &["authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"],
    );
    assert!(
        err.contains("process.roles=broker")
            && err.contains("initial.broker.registration.timeout.ms"),
        "{err}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(listing(dir.path()), before, "nothing written into the dir");
    assert_eq!(
        std::fs::read(dir.path().join("meta.properties")).unwrap(),
        meta
    );
}

/// A data dir of skua before the metadata log (`skua-metadata.json`) is imported on the
/// first start: same cluster, same topic ids, every record, no strays.
#[tokio::test]
async fn an_older_skua_data_dir_is_imported() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("kept", 2).await, 0);
    let (err, _) = c
        .produce(
            "kept",
            1,
            batch(&["one", "two"], None, Compression::None),
            -1,
        )
        .await;
    assert_eq!(err, 0);
    let cluster = b.broker.controller.cluster_id();
    let id = b.broker.controller.topic("kept").unwrap().topic_id;
    b.stop().await;

    // What the older skua left: its JSON store and no metadata log.
    std::fs::remove_dir_all(dir.path().join("__cluster_metadata-0")).unwrap();
    let partition = |p: i32| {
        format!(r#"{{"partition":{p},"leader":1,"leader_epoch":0,"replicas":[1],"isr":[1]}}"#)
    };
    std::fs::write(
        dir.path().join("skua-metadata.json"),
        format!(
            r#"{{"version":1,"cluster_id":"{cluster}","producer_id_block_end":3000,"topics":[{{"name":"kept","topic_id":"{id}","partitions":[{},{}],"configs":{{"retention.ms":"1000000"}}}}]}}"#,
            partition(0),
            partition(1)
        ),
    )
    .unwrap();

    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    let kept = b.broker.controller.topic("kept").unwrap();
    assert_eq!((kept.topic_id, kept.partitions.len()), (id, 2));
    assert_eq!(kept.configs["retention.ms"], "1000000");
    let data = c.fetch("kept", 1, 0, 0, 1).await;
    assert_eq!(
        values(data.records.as_ref().unwrap()),
        vec![(0, "one".into()), (1, "two".into())]
    );
    let init = c
        .send(
            &InitProducerIdRequest::default().with_transaction_timeout_ms(60_000),
            4,
        )
        .await;
    assert!(init.producer_id.0 >= 3000, "{:?}", init.producer_id);
    let strays = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with("-stray")
        })
        .count();
    assert_eq!(strays, 0);
    b.stop().await;
}

/// `metadata.log.dir` of its own, as a Kafka node may have: the metadata log lives there,
/// the partitions in `log.dirs`, and both keep working across a restart.
#[tokio::test]
async fn a_metadata_log_dir_of_its_own() {
    let root = tempfile::tempdir().unwrap();
    let (data, meta) = (root.path().join("data"), root.path().join("meta"));
    let config = [("metadata.log.dir", meta.to_str().unwrap())];
    for round in 0..2 {
        let b = TestBroker::start(&data, &config).await;
        let mut c = b.client().await;
        if round == 0 {
            assert_eq!(c.create_topic("split", 1).await, 0);
            let (err, _) = c
                .produce("split", 0, batch(&["x"], None, Compression::None), -1)
                .await;
            assert_eq!(err, 0);
        }
        assert_eq!(c.fetch("split", 0, 0, 0, 1).await.high_watermark, 1);
        b.stop().await;
        assert!(meta.join("__cluster_metadata-0").is_dir());
        assert!(!data.join("__cluster_metadata-0").exists());
        assert!(meta.join("meta.properties").exists() && data.join("meta.properties").exists());
        assert!(data.join("split-0").is_dir());
    }
}

/// Kafka's ACLs, client quotas and SCRAM users (tests/fixtures/kafka-4.4-security.md:
/// AccessControlEntryRecords, ClientQuotaRecords and a UserScramCredentialRecord written
/// by Kafka 4.4's tools) are listed by skua as Kafka listed them and enforced; what skua
/// changes is in the same log after a restart (compat/migration hands it back to Kafka).
#[tokio::test]
async fn a_kafka_4_4_dirs_acls_quotas_and_scram_users_are_listed_and_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kafka-4.4-security");
    copy_dir(&fixture, dir.path());
    // Kafka's server.properties for the dir, but User:ANONYMOUS (the test client) is no
    // super user, so the ACLs bind it.
    let config = [
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        ("allow.everyone.if.no.acl.found", "true"),
        ("super.users", "User:admin"),
        ("offsets.topic.num.partitions", "3"),
    ];
    let b = TestBroker::start(dir.path(), &config).await;
    let mut c = b.client().await;
    let kafkas_acls = vec![
        "Topic alice-only LITERAL User:ANONYMOUS Read Deny".to_string(),
        "Topic alice-only LITERAL User:alice Read Allow".to_string(),
        "Topic deny- PREFIXED User:ANONYMOUS Write Deny".to_string(),
        "Topic deny- PREFIXED User:alice Write Allow".to_string(),
    ];
    assert_eq!(acls(&mut c).await, kafkas_acls);
    let kafkas_quotas = vec![
        "client-id=quota-client,user=ANONYMOUS consumer_byte_rate=80000".to_string(),
        "client-id=quota-client,user=ANONYMOUS producer_byte_rate=50000".to_string(),
        "client-id=quota-client,user=ANONYMOUS request_percentage=50".to_string(),
        "user=<default> consumer_byte_rate=4194304".to_string(),
    ];
    assert_eq!(quotas(&mut c).await, kafkas_quotas);
    let resp = c
        .send(
            &DescribeUserScramCredentialsRequest::default().with_users(None),
            0,
        )
        .await;
    assert_eq!(resp.error_code, 0);
    let users: Vec<_> = resp
        .results
        .iter()
        .map(|r| {
            let info = &r.credential_infos[0];
            (r.user.to_string(), info.mechanism, info.iterations)
        })
        .collect();
    assert_eq!(users, vec![("alice".to_string(), 1, 8192)]);
    // Kafka's salted keys are alice's password's.
    let sha256 = skua::sasl::scram::ScramMechanism::from_name("SCRAM-SHA-256").unwrap();
    let stored = b
        .broker
        .controller
        .scram_credential(sha256, "alice")
        .unwrap();
    let derived = skua::sasl::scram::ScramCredential::new(sha256, "alice-pw", &stored.salt, 8192);
    assert!(derived == stored, "alice-pw is alice's password");

    // Enforced: User:ANONYMOUS may neither write deny-x nor read alice-only.
    let denied = ResponseError::TopicAuthorizationFailed.code();
    let records = batch(&["v"], None, Compression::None);
    assert_eq!(c.produce("deny-x", 0, records.clone(), 1).await.0, denied);
    assert_eq!(c.fetch("alice-only", 0, 0, 0, 1).await.error_code, denied);
    assert_eq!(c.produce("alice-only", 0, records, 1).await.0, denied);

    // skua changes them: the deny on alice-only goes (the allow for alice stays, so
    // User:ANONYMOUS is still refused there), a quota value changes and one goes.
    let filter = delete_acls_request::DeleteAclsFilter::default()
        .with_resource_type_filter(2)
        .with_resource_name_filter(Some(s("alice-only")))
        .with_pattern_type_filter(3)
        .with_principal_filter(Some(s("User:ANONYMOUS")))
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let resp = c
        .send(&DeleteAclsRequest::default().with_filters(vec![filter]), 3)
        .await;
    assert_eq!(resp.filter_results[0].matching_acls.len(), 1);
    let entity = ["user", "client-id"].map(|t| {
        alter_client_quotas_request::EntityData::default()
            .with_entity_type(s(t))
            .with_entity_name(Some(s(if t == "user" {
                "ANONYMOUS"
            } else {
                "quota-client"
            })))
    });
    let ops = vec![
        alter_client_quotas_request::OpData::default()
            .with_key(s("producer_byte_rate"))
            .with_value(60000.0),
        alter_client_quotas_request::OpData::default()
            .with_key(s("consumer_byte_rate"))
            .with_remove(true),
    ];
    let req = AlterClientQuotasRequest::default().with_entries(vec![
        alter_client_quotas_request::EntryData::default()
            .with_entity(entity.to_vec())
            .with_ops(ops),
    ]);
    assert_eq!(c.send(&req, 1).await.entries[0].error_code, 0);
    drop(c);
    b.stop().await;

    let b = TestBroker::start(dir.path(), &config).await;
    let mut c = b.client().await;
    assert_eq!(acls(&mut c).await, kafkas_acls[1..].to_vec());
    assert_eq!(
        quotas(&mut c).await,
        vec![
            "client-id=quota-client,user=ANONYMOUS producer_byte_rate=60000".to_string(),
            "client-id=quota-client,user=ANONYMOUS request_percentage=50".to_string(),
            "user=<default> consumer_byte_rate=4194304".to_string(),
        ]
    );
    let records = batch(&["v"], None, Compression::None);
    assert_eq!(c.produce("deny-x", 0, records, 1).await.0, denied);
    assert_eq!(c.fetch("alice-only", 0, 0, 0, 1).await.error_code, denied);
    drop(c);
    b.stop().await;
}

/// Every ACL: "Type name PATTERN principal Operation Permission", sorted.
async fn acls(c: &mut Client) -> Vec<String> {
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_resource_name_filter(None)
        .with_pattern_type_filter(1)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1)
        .with_permission_type(1);
    let resp = c.send(&req, 3).await;
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
    let name = |codes: &[&'static str], i: i8| codes.get(i as usize).copied().unwrap_or("?");
    const TYPES: &[&str] = &["?", "?", "Topic", "Group", "Cluster"];
    const PATTERNS: &[&str] = &["?", "?", "?", "LITERAL", "PREFIXED"];
    const OPERATIONS: &[&str] = &["?", "?", "All", "Read", "Write", "Create", "Delete"];
    const PERMISSIONS: &[&str] = &["?", "?", "Deny", "Allow"];
    let mut out = Vec::new();
    for r in &resp.resources {
        for a in &r.acls {
            assert_eq!(a.host.as_str(), "*");
            out.push(format!(
                "{} {} {} {} {} {}",
                name(TYPES, r.resource_type),
                r.resource_name,
                name(PATTERNS, r.pattern_type),
                a.principal,
                name(OPERATIONS, a.operation),
                name(PERMISSIONS, a.permission_type)
            ));
        }
    }
    out.sort();
    out
}

/// Every client quota: "type=name,... key=value" (`<default>` for a default entity), sorted.
async fn quotas(c: &mut Client) -> Vec<String> {
    let resp = c.send(&DescribeClientQuotasRequest::default(), 1).await;
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
    let mut out = Vec::new();
    for e in resp.entries.unwrap_or_default() {
        let mut entity: Vec<String> = e
            .entity
            .iter()
            .map(|d| {
                let name = d.entity_name.as_ref().map(|n| n.to_string());
                format!(
                    "{}={}",
                    d.entity_type,
                    name.as_deref().unwrap_or("<default>")
                )
            })
            .collect();
        entity.sort();
        for v in e.values {
            out.push(format!("{} {}={}", entity.join(","), v.key, v.value));
        }
    }
    out.sort();
    out
}
