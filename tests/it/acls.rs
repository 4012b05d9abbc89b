//! ACLs over TCP with Kafka's StandardAuthorizer on a single node: CreateAcls,
//! DescribeAcls and DeleteAcls as `kafka-acls.sh` sends them, enforced on the next
//! request, kept in the metadata log across a restart; without an authorizer the ACL
//! APIs answer SECURITY_DISABLED; an unknown authorizer class stops startup.
//!
//! A plaintext client is `User:ANONYMOUS`; with `allow.everyone.if.no.acl.found` it may
//! manage ACLs until one names the cluster, and each ACL here narrows what it may do.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;

use crate::common::{self, Client, TestBroker};

const STANDARD: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_string())
}

/// (resource type, name, pattern type, principal, operation, permission) in Kafka's codes.
type Acl = (i8, &'static str, i8, &'static str, i8, i8);

const TOPIC: i8 = 2;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const DENY: i8 = 2;
const ALLOW: i8 = 3;
const READ: i8 = 3;
const WRITE: i8 = 4;
const DESCRIBE: i8 = 8;

async fn create(c: &mut Client, acls: &[Acl]) -> Vec<i16> {
    let creations = acls
        .iter()
        .map(|&(rt, name, pt, principal, op, perm)| {
            create_acls_request::AclCreation::default()
                .with_resource_type(rt)
                .with_resource_name(s(name))
                .with_resource_pattern_type(pt)
                .with_principal(s(principal))
                .with_host(s("*"))
                .with_operation(op)
                .with_permission_type(perm)
        })
        .collect();
    let resp = c
        .send(&CreateAclsRequest::default().with_creations(creations), 3)
        .await;
    resp.results.iter().map(|r| r.error_code).collect()
}

/// Every ACL, as (type, name, pattern, principal, operation, permission).
async fn describe_all(c: &mut Client) -> Vec<(i8, String, i8, String, i8, i8)> {
    let req = DescribeAclsRequest::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    let resp = c.send(&req, 3).await;
    assert_eq!(resp.error_code, 0, "{:?}", resp.error_message);
    let mut out = Vec::new();
    for r in resp.resources {
        for a in r.acls {
            out.push((
                r.resource_type,
                r.resource_name.to_string(),
                r.pattern_type,
                a.principal.to_string(),
                a.operation,
                a.permission_type,
            ));
        }
    }
    out.sort();
    out
}

async fn produce(c: &mut Client, topic: &str) -> i16 {
    let records = common::batch(&["v"], None, Compression::None);
    c.produce(topic, 0, records, 1).await.0
}

async fn all_topics(c: &mut Client) -> Vec<String> {
    let resp = c
        .send(&MetadataRequest::default().with_topics(None), 12)
        .await;
    let mut names: Vec<String> = resp
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn acls_are_created_enforced_kept_across_a_restart_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let overrides = [
        ("authorizer.class.name", STANDARD),
        ("allow.everyone.if.no.acl.found", "true"),
    ];
    let b = TestBroker::start(dir.path(), &overrides).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("orders", 1).await, 0);
    assert_eq!(c.create_topic("audit", 1).await, 0);
    assert_eq!(produce(&mut c, "orders").await, 0);

    // On the prefix `ord`: DENY WRITE and ALLOW READ; ALLOW WRITE to everyone on the
    // literal `orders`; another principal's DESCRIBE on `audit`.
    let created = create(
        &mut c,
        &[
            (TOPIC, "ord", PREFIXED, "User:ANONYMOUS", WRITE, DENY),
            (TOPIC, "ord", PREFIXED, "User:ANONYMOUS", READ, ALLOW),
            (TOPIC, "orders", LITERAL, "User:*", WRITE, ALLOW),
            (TOPIC, "audit", LITERAL, "User:auditor", DESCRIBE, ALLOW),
            // Refused as Kafka refuses it: a principal without a type.
            (TOPIC, "x", LITERAL, "nobody", WRITE, ALLOW),
        ],
    )
    .await;
    assert_eq!(
        created,
        vec![0, 0, 0, 0, ResponseError::InvalidRequest.code()],
        "the last has no principal type"
    );
    // The DENY wins over the ALLOW to everyone.
    let denied = ResponseError::TopicAuthorizationFailed.code();
    assert_eq!(produce(&mut c, "orders").await, denied);
    let fetched = c.fetch("orders", 0, 0, 0, 1).await;
    assert_eq!(fetched.error_code, 0, "READ is allowed");
    // `audit` has an ACL, not for this principal, so `allow.everyone.if.no.acl.found` no
    // longer applies to it: it is left out of the topics described (READ on `orders`
    // implies DESCRIBE).
    assert_eq!(all_topics(&mut c).await, vec!["orders".to_string()]);
    assert_eq!(produce(&mut c, "audit").await, denied);
    // A topic no ACL matches is open to everyone.
    assert_eq!(c.create_topic("free", 1).await, 0);
    assert_eq!(produce(&mut c, "free").await, 0);
    let acls = describe_all(&mut c).await;
    assert_eq!(
        acls,
        vec![
            (
                TOPIC,
                "audit".into(),
                LITERAL,
                "User:auditor".into(),
                DESCRIBE,
                ALLOW
            ),
            (
                TOPIC,
                "ord".into(),
                PREFIXED,
                "User:ANONYMOUS".into(),
                READ,
                ALLOW
            ),
            (
                TOPIC,
                "ord".into(),
                PREFIXED,
                "User:ANONYMOUS".into(),
                WRITE,
                DENY
            ),
            (
                TOPIC,
                "orders".into(),
                LITERAL,
                "User:*".into(),
                WRITE,
                ALLOW
            ),
        ]
    );
    // The same ACL again is a success that adds nothing (Kafka's controller).
    assert_eq!(
        create(
            &mut c,
            &[(TOPIC, "ord", PREFIXED, "User:ANONYMOUS", WRITE, DENY)]
        )
        .await,
        vec![0]
    );
    assert_eq!(describe_all(&mut c).await.len(), 4);
    drop(c);
    b.stop().await;

    // The ACLs are in the metadata log: in force again after a restart.
    let b = TestBroker::start(dir.path(), &overrides).await;
    let mut c = b.client().await;
    assert_eq!(describe_all(&mut c).await, acls);
    assert_eq!(produce(&mut c, "orders").await, denied);

    // DeleteAcls: a filter matching the DENY by principal; each filter names what it
    // deleted, a filter with an UNKNOWN code is refused.
    let filter = |principal: Option<&str>, permission: i8| {
        delete_acls_request::DeleteAclsFilter::default()
            .with_resource_type_filter(1)
            .with_resource_name_filter(None)
            .with_host_filter(None)
            .with_pattern_type_filter(1)
            .with_principal_filter(principal.map(s))
            .with_operation(1)
            .with_permission_type(permission)
    };
    let resp = c
        .send(
            &DeleteAclsRequest::default()
                .with_filters(vec![filter(Some("User:ANONYMOUS"), DENY), filter(None, 0)]),
            3,
        )
        .await;
    let first = &resp.filter_results[0];
    assert_eq!(first.error_code, 0);
    assert_eq!(first.matching_acls.len(), 1);
    assert_eq!(first.matching_acls[0].resource_name.as_str(), "ord");
    assert_eq!(first.matching_acls[0].pattern_type, PREFIXED);
    assert_eq!(
        resp.filter_results[1].error_code,
        ResponseError::InvalidRequest.code()
    );
    assert_eq!(produce(&mut c, "orders").await, 0);
    assert_eq!(describe_all(&mut c).await.len(), 3);
    drop(c);
    b.stop().await;
    let b = TestBroker::start(dir.path(), &overrides).await;
    let mut c = b.client().await;
    assert_eq!(describe_all(&mut c).await.len(), 3, "the deletion was kept");
    assert_eq!(produce(&mut c, "orders").await, 0);
    drop(c);
    b.stop().await;
}

#[tokio::test]
async fn without_an_authorizer_the_acl_apis_answer_security_disabled() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start(dir.path(), &[]).await;
    let mut c = b.client().await;
    let disabled = ResponseError::SecurityDisabled.code();
    assert_eq!(
        create(&mut c, &[(TOPIC, "t", LITERAL, "User:a", WRITE, ALLOW)]).await,
        vec![disabled]
    );
    let described = c
        .send(
            &DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1),
            1,
        )
        .await;
    assert_eq!(described.error_code, disabled);
    let deleted = c
        .send(
            &DeleteAclsRequest::default().with_filters(vec![
                delete_acls_request::DeleteAclsFilter::default()
                    .with_resource_type_filter(1)
                    .with_pattern_type_filter(1)
                    .with_operation(1)
                    .with_permission_type(1),
            ]),
            1,
        )
        .await;
    assert_eq!(deleted.filter_results[0].error_code, disabled);
    // The ACL APIs are advertised (kafka-acls.sh needs them), at v1–3 as Kafka 4.
    let versions = c.send(&ApiVersionsRequest::default(), 3).await;
    for key in [ApiKey::CreateAcls, ApiKey::DescribeAcls, ApiKey::DeleteAcls] {
        let v = versions
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .unwrap_or_else(|| panic!("{key:?} advertised"));
        assert_eq!((v.min_version, v.max_version), (1, 3), "{key:?}");
    }
    drop(c);
    b.stop().await;
}

/// A cluster ACL for another principal takes the cluster from everyone else: CreateAcls
/// (ALTER on the cluster) is then refused with CLUSTER_AUTHORIZATION_FAILED per creation,
/// and a principal with no ACL at all is denied where `allow.everyone.if.no.acl.found` is
/// off.
#[tokio::test]
async fn cluster_acls_guard_acl_management() {
    let dir = tempfile::tempdir().unwrap();
    let overrides = [
        ("authorizer.class.name", STANDARD),
        ("allow.everyone.if.no.acl.found", "true"),
    ];
    let b = TestBroker::start(dir.path(), &overrides).await;
    let mut c = b.client().await;
    const CLUSTER: i8 = 4;
    const ALTER: i8 = 7;
    assert_eq!(
        create(
            &mut c,
            &[(
                CLUSTER,
                "kafka-cluster",
                LITERAL,
                "User:admin",
                ALTER,
                ALLOW
            )]
        )
        .await,
        vec![0]
    );
    assert_eq!(
        create(
            &mut c,
            &[(TOPIC, "t", LITERAL, "User:ANONYMOUS", WRITE, ALLOW)]
        )
        .await,
        vec![ResponseError::ClusterAuthorizationFailed.code()]
    );
    drop(c);
    b.stop().await;

    // Without allow.everyone.if.no.acl.found, a topic with no ACL is denied.
    let b = TestBroker::start(dir.path(), &[("authorizer.class.name", STANDARD)]).await;
    let mut c = b.client().await;
    assert_eq!(
        c.create_topic("t", 1).await,
        ResponseError::TopicAuthorizationFailed.code()
    );
    assert!(all_topics(&mut c).await.is_empty());
    drop(c);
    b.stop().await;
}

#[tokio::test]
async fn an_unknown_authorizer_class_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let args: Vec<String> = [
        format!("log.dirs={}", dir.path().display()),
        "authorizer.class.name=com.example.Custom".to_string(),
    ]
    .into_iter()
    .flat_map(|o| ["--override".to_string(), o])
    .collect();
    let config = skua::config::from_args(&args).expect("config");
    let err = match skua::broker::Broker::open(config) {
        Ok(_) => panic!("started with an unknown authorizer"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("com.example.Custom") && err.contains(STANDARD),
        "{err}"
    );
    // AclAuthorizer keeps ACLs in ZooKeeper: a single node refuses it, naming why.
    let args: Vec<String> = [
        format!("log.dirs={}", dir.path().display()),
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer".to_string(),
    ]
    .into_iter()
    .flat_map(|o| ["--override".to_string(), o])
    .collect();
    let config = skua::config::from_args(&args).expect("config");
    let err = match skua::broker::Broker::open(config) {
        Ok(_) => panic!("AclAuthorizer started without ZooKeeper"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("zookeeper.connect"), "{err}");
}

/// A KIP-848 group is described only to a requester that may describe every topic its
/// members subscribe to: else Kafka's TOPIC_AUTHORIZATION_FAILED for the group, with no
/// members, so the group does not show the topic; a group on visible topics is described.
#[tokio::test]
async fn consumer_group_describe_hides_groups_on_topics_the_requester_may_not_describe() {
    let dir = tempfile::tempdir().unwrap();
    let overrides = [
        ("authorizer.class.name", STANDARD),
        ("allow.everyone.if.no.acl.found", "true"),
        ("offsets.topic.num.partitions", "1"),
    ];
    let b = TestBroker::start(dir.path(), &overrides).await;
    let mut c = b.client().await;
    assert_eq!(c.create_topic("visible", 1).await, 0);
    assert_eq!(c.create_topic("hidden", 1).await, 0);
    for (group, topic) in [("g-visible", "visible"), ("g-hidden", "hidden")] {
        let find = FindCoordinatorRequest::default().with_coordinator_keys(vec![s(group)]);
        assert_eq!(c.send(&find, 6).await.coordinators[0].error_code, 0);
        let join = ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_member_id(s(&format!("{group}-member")))
            .with_member_epoch(0)
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![TopicName(s(topic))]))
            .with_topic_partitions(Some(vec![]));
        let r = c.send(&join, 1).await;
        assert_eq!((r.error_code, r.member_epoch), (0, 1), "{group}");
    }
    assert_eq!(
        create(
            &mut c,
            &[(TOPIC, "hidden", LITERAL, "User:ANONYMOUS", DESCRIBE, DENY)]
        )
        .await,
        vec![0]
    );
    let describe = ConsumerGroupDescribeRequest::default()
        .with_group_ids(vec![GroupId(s("g-visible")), GroupId(s("g-hidden"))]);
    let groups = c.send(&describe, 1).await.groups;
    assert_eq!(groups.len(), 2);
    let visible = &groups[0];
    assert_eq!(
        (visible.group_id.as_str(), visible.error_code),
        ("g-visible", 0)
    );
    assert_eq!(visible.members.len(), 1);
    assert_eq!(
        visible.members[0].subscribed_topic_names[0].as_str(),
        "visible"
    );
    let hidden = &groups[1];
    assert_eq!(hidden.group_id.as_str(), "g-hidden");
    assert_eq!(
        hidden.error_code,
        ResponseError::TopicAuthorizationFailed.code()
    );
    assert!(hidden.members.is_empty());
    drop(c);
    b.stop().await;
}
