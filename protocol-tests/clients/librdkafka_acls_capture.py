#!/usr/bin/env python3
"""confluent-kafka (librdkafka) creating, describing and deleting an ACL, for the capture:
CreateAcls, DescribeAcls and DeleteAcls at librdkafka's versions. The scratch broker has no
authorizer, so each answers SECURITY_DISABLED, as Kafka's does.

    librdkafka_acls_capture.py HOST:PORT
"""
import sys

from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, AdminClient, ResourcePatternType,
                                   ResourceType)

admin = AdminClient({"bootstrap.servers": sys.argv[1]})
binding = AclBinding(ResourceType.TOPIC, "acls-b", ResourcePatternType.PREFIXED, "User:capture",
                     "*", AclOperation.WRITE, AclPermissionType.ALLOW)
everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                              AclOperation.ANY, AclPermissionType.ANY)
for name, call in [("create", lambda: admin.create_acls([binding])[binding]),
                   ("describe", lambda: admin.describe_acls(everything)),
                   ("delete", lambda: admin.delete_acls([everything])[everything])]:
    try:
        print(name, call().result(timeout=15))
    except Exception as e:  # SECURITY_DISABLED without an authorizer
        print(name, "refused:", e)
