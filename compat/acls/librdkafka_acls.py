"""librdkafka's ACL admin API (confluent-kafka-python) against skua's authorizer.

    librdkafka_acls.py CASE BOOTSTRAP DIR

DIR holds the acls suite's PEM files: ca.pem, admin.pem/.key (a super user) and
client.pem/.key (User:CN=compat-client,OU=clients,O=skua). CASE is one of:

  admin_api          CreateAcls, DescribeAcls with LITERAL, PREFIXED, MATCH and ANY
                     filters, DeleteAcls: every binding the broker returns is checked field
                     by field (resource type, name, pattern type, principal, host,
                     operation, permission) against what was created.
  denied_then_allowed
                     a librdkafka producer and consumer group as the client: refused with
                     TOPIC_AUTHORIZATION_FAILED / GROUP_AUTHORIZATION_FAILED, allowed once
                     the admin's create_acls lets them, and refused again once delete_acls
                     has removed those ACLs.
Exits non-zero with the reason on stderr when the broker's answers differ.
"""
import sys
import time
import uuid

import confluent_kafka as ck
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

case, bootstrap, d = sys.argv[1:4]
CLIENT = "User:CN=compat-client,OU=clients,O=skua"
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP


def conf(who):
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": f"{d}/ca.pem",
        "ssl.certificate.location": f"{d}/{who}.pem",
        "ssl.key.location": f"{d}/{who}.key",
    }


admin = AdminClient(conf("admin"))


def fields(b):
    """An ACL binding as the tuple of its seven fields, each compared by value."""
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)


def show(bs):
    return sorted(f"{b.restype.name}:{b.name}:{b.resource_pattern_type.name}:{b.principal}@{b.host}:"
                  f"{b.operation.name}:{b.permission_type.name}" for b in bs)


def expect(what, got, want):
    if sorted(map(fields, got), key=str) != sorted(map(fields, want), key=str):
        raise SystemExit(f"{what}: the broker returned {show(got)}, expected {show(want)}")
    print(f"{what}: {len(got)} bindings, each field as created")


def create(bindings):
    for b, f in admin.create_acls(bindings, request_timeout=15).items():
        if f.result(timeout=20) is not None:
            raise SystemExit(f"create_acls {b}: {f.result()}")


def describe(flt):
    return admin.describe_acls(flt, request_timeout=15).result(timeout=20)


def delete(filters):
    return {f: fut.result(timeout=20) for f, fut in admin.delete_acls(filters, request_timeout=15).items()}


def admin_api():
    prefix = f"compat-acl-py-{uuid.uuid4().hex[:8]}"
    topic, group = f"{prefix}-orders", f"{prefix}-group"
    stranger = f"User:stranger-{uuid.uuid4().hex[:8]}"
    read_topic = AclBinding(TOPIC, topic, LITERAL, CLIENT, "*", AclOperation.READ, ALLOW)
    deny_host = AclBinding(TOPIC, topic, LITERAL, stranger, "10.0.0.1", AclOperation.WRITE, DENY)
    write_prefix = AclBinding(TOPIC, prefix, PREFIXED, CLIENT, "*", AclOperation.WRITE, ALLOW)
    # A wildcard topic ACL for a principal no client uses: it matches every topic, so
    # the MATCH filter must return it, and nothing else is affected.
    wildcard = AclBinding(TOPIC, "*", LITERAL, stranger, "127.0.0.1", AclOperation.DESCRIBE, ALLOW)
    read_group = AclBinding(GROUP, group, LITERAL, CLIENT, "*", AclOperation.READ, ALLOW)
    alter_cluster = AclBinding(ResourceType.BROKER, "kafka-cluster", LITERAL, stranger, "*", AclOperation.ALTER_CONFIGS, DENY)
    every = [read_topic, deny_host, write_prefix, wildcard, read_group, alter_cluster]
    create(every)
    any_op = dict(operation=AclOperation.ANY, permission_type=AclPermissionType.ANY)
    try:
        # LITERAL: the bindings of exactly that name and pattern type.
        expect("LITERAL topic filter", describe(AclBindingFilter(TOPIC, topic, LITERAL, None, None, **any_op)),
               [read_topic, deny_host])
        expect("PREFIXED topic filter", describe(AclBindingFilter(TOPIC, prefix, PREFIXED, None, None, **any_op)),
               [write_prefix])
        # MATCH: every binding that applies to the topic (its literal, the prefixed one
        # over it, the wildcard).
        expect("MATCH topic filter", describe(AclBindingFilter(TOPIC, topic, ResourcePatternType.MATCH, None, None, **any_op)),
               [read_topic, deny_host, write_prefix, wildcard])
        # ANY with a name: that name under any pattern type (the wildcard is not named so).
        expect("ANY topic filter by name", describe(AclBindingFilter(TOPIC, prefix, ResourcePatternType.ANY, None, None, **any_op)),
               [write_prefix])
        # ANY resource, by principal, host, operation and permission.
        expect("ANY filter by principal", describe(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, stranger, None, **any_op)),
               [deny_host, wildcard, alter_cluster])
        expect("ANY filter by host and operation", describe(AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, stranger, "127.0.0.1", AclOperation.DESCRIBE, ALLOW)), [wildcard])
        expect("group filter", describe(AclBindingFilter(GROUP, group, LITERAL, CLIENT, None, **any_op)), [read_group])
        expect("cluster filter", describe(AclBindingFilter(ResourceType.BROKER, None, ResourcePatternType.ANY, stranger, None, **any_op)),
               [alter_cluster])
        # DeleteAcls: each filter's answer names what it removed, field by field.
        by_prefix = AclBindingFilter(TOPIC, prefix, PREFIXED, None, None, **any_op)
        deny_only = AclBindingFilter(TOPIC, topic, LITERAL, None, None, AclOperation.ANY, DENY)
        deleted = delete([by_prefix, deny_only])
        expect("DeleteAcls PREFIXED filter", deleted[by_prefix], [write_prefix])
        expect("DeleteAcls DENY filter", deleted[deny_only], [deny_host])
        expect("MATCH after DeleteAcls", describe(AclBindingFilter(TOPIC, topic, ResourcePatternType.MATCH, None, None, **any_op)),
               [read_topic, wildcard])
    finally:
        leftovers = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                      b.permission_type) for b in every]
        delete(leftovers)
    expect("ANY filter by principal after cleanup",
           describe(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, stranger, None, **any_op)), [])


def produce(topic, n):
    """Produces n records as the client; the delivery errors (none when allowed)."""
    errors = []
    p = ck.Producer({**conf("client"), "message.timeout.ms": 8000, "acks": "all"})
    for i in range(n):
        p.produce(topic, value=f"librdkafka acl value {i}".encode(), partition=0,
                  on_delivery=lambda err, _m: err and errors.append(err))
    p.flush(15)
    return errors


def consume(topic, group, n):
    """Consumes as the client in a group: (records, the first error the client reported)."""
    c = ck.Consumer({**conf("client"), "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = [], time.time() + 20
    try:
        while len(got) < n and time.time() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                return got, m.error()
            got.append(m.value().decode())
        if got:
            c.commit(asynchronous=False)
        return got, None
    finally:
        c.close()


def denied_then_allowed():
    topic, group = f"compat-acl-rd-{uuid.uuid4().hex[:8]}", f"compat-acl-rd-group-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=15)[topic].result(timeout=20)
    errors = produce(topic, 3)
    print("producer without ACLs:", errors[:1])
    if not errors or errors[0].code() != ck.KafkaError.TOPIC_AUTHORIZATION_FAILED:
        raise SystemExit(f"producer not refused with TOPIC_AUTHORIZATION_FAILED: {errors[:1]}")
    write = AclBinding(TOPIC, topic, LITERAL, CLIENT, "*", AclOperation.WRITE, ALLOW)
    create([write])
    errors = produce(topic, 10)
    if errors:
        raise SystemExit(f"producer refused with WRITE allowed: {errors[0]}")
    print("producer with WRITE: 10 records delivered")
    # READ on the topic, none on the group: the group's error.
    read = AclBinding(TOPIC, topic, LITERAL, CLIENT, "*", AclOperation.READ, ALLOW)
    create([read])
    got, err = consume(topic, group, 10)
    print("consumer without the group's ACL:", err)
    if err is None or err.code() != ck.KafkaError.GROUP_AUTHORIZATION_FAILED:
        raise SystemExit(f"consumer not refused with GROUP_AUTHORIZATION_FAILED: {err} ({len(got)} records)")
    read_group = AclBinding(GROUP, group, LITERAL, CLIENT, "*", AclOperation.READ, ALLOW)
    create([read_group])
    got, err = consume(topic, group, 10)
    want = [f"librdkafka acl value {i}" for i in range(10)]
    if err is not None or got != want:
        raise SystemExit(f"consumer with READ on topic and group: {err}, {len(got)} records {got[:2]}")
    print("consumer with READ on the topic and group: the 10 records")
    # The topic's ACLs removed: both refused again.
    deleted = delete([AclBindingFilter(TOPIC, topic, LITERAL, CLIENT, None, AclOperation.ANY, AclPermissionType.ANY)])
    expect("DeleteAcls of the topic's ACLs", list(deleted.values())[0], [write, read])
    errors = produce(topic, 1)
    if not errors or errors[0].code() != ck.KafkaError.TOPIC_AUTHORIZATION_FAILED:
        raise SystemExit(f"producer not refused again once WRITE was deleted: {errors[:1]}")
    got, err = consume(topic, f"{group}", 1)
    if err is None or err.code() != ck.KafkaError.TOPIC_AUTHORIZATION_FAILED:
        raise SystemExit(f"consumer not refused again once READ was deleted: {err} ({len(got)} records)")
    print("producer and consumer refused again with TOPIC_AUTHORIZATION_FAILED")
    delete([AclBindingFilter(GROUP, group, LITERAL, CLIENT, None, AclOperation.ANY, AclPermissionType.ANY)])


{"admin_api": admin_api, "denied_then_allowed": denied_then_allowed}[case]()
