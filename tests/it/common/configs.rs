//! IncrementalAlterConfigs from a test client, with Kafka's resource types and operations.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::Client;

/// Config resource types (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs).
pub const TOPIC: i8 = 2;
pub const BROKER: i8 = 4;

/// IncrementalAlterConfigs operations.
pub const SET: i8 = 0;
pub const DELETE: i8 = 1;
pub const APPEND: i8 = 2;

/// IncrementalAlterConfigs v1 of one resource: (operation, key, value) each. Returns the
/// resource's error code and message.
pub async fn incremental_alter(
    c: &mut Client,
    resource_type: i8,
    name: &str,
    ops: &[(i8, &str, Option<&str>)],
) -> (i16, Option<String>) {
    let s = |v: &str| StrBytes::from_string(v.to_string());
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(name))
            .with_configs(
                ops.iter()
                    .map(|(op, k, v)| {
                        incremental_alter_configs_request::AlterableConfig::default()
                            .with_name(s(k))
                            .with_config_operation(*op)
                            .with_value(v.map(s))
                    })
                    .collect(),
            ),
    ]);
    let resp = c.send(&req, 1).await;
    let r = &resp.responses[0];
    (
        r.error_code,
        r.error_message.as_ref().map(|m| m.to_string()),
    )
}
