//! KRaft's typed section: `process.roles`, the controller quorum's endpoints, the
//! controller listener and the broker lifecycle's timings (Kafka's `KRaftConfigs`,
//! `QuorumConfig` and `BrokerLifecycleManager` keys), checked as Kafka's
//! `KafkaConfig.validateValues` checks them.
//!
//! What the roles mean to skua:
//! - none: ZooKeeper mode (`zookeeper.connect`) or skua's own single-node metadata log.
//! - `broker`: a broker of a KRaft cluster whose controllers are Apache Kafka's; the
//!   broker registers with them and follows their metadata log (`controller/kraft/`).
//! - `broker,controller`: what Kafka's single-node `server.properties` says. skua keeps
//!   its own single-node metadata log for it (the way a Kafka 4 dir moves to skua, see
//!   README), so it is accepted only while the quorum it names can be this node alone.
//! - `controller`: refused; skua implements no Raft.

use std::time::Duration;

use super::broker::{invalid, parse_num, ConfigError, Keys};
use super::listener::Listener;

/// What `process.roles` asks this process to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessRoles {
    /// Unset: ZooKeeper mode, or skua's single-node metadata log.
    None,
    /// `broker`: a broker beside Apache Kafka's controller quorum.
    Broker,
    /// `broker,controller`: Kafka's combined single node, served by skua's own
    /// single-node metadata log.
    Combined,
}

/// One endpoint of the controller quorum: a voter of `controller.quorum.voters`
/// (`id@host:port`, `id` set) or a `controller.quorum.bootstrap.servers` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumEndpoint {
    pub id: Option<i32>,
    pub host: String,
    pub port: u16,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KRaftConfig {
    pub process_roles: ProcessRoles,
    /// `controller.quorum.voters`: the static voters, by id.
    pub voters: Vec<QuorumEndpoint>,
    /// `controller.quorum.bootstrap.servers`: where a dynamic quorum is discovered.
    pub bootstrap_servers: Vec<QuorumEndpoint>,
    /// `controller.listener.names`, upper case; a broker uses the first.
    pub controller_listener_names: Vec<String>,
    /// The security protocol of the first controller listener (`process.roles=broker`).
    pub controller_security_protocol: Option<String>,
    /// `broker.heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    /// `broker.session.timeout.ms`: how long the controllers keep a silent broker's lease;
    /// also the longest backoff between failed attempts to reach them.
    pub session_timeout: Duration,
    /// `initial.broker.registration.timeout.ms`: how long a starting broker may take to
    /// register before it gives up.
    pub initial_registration_timeout: Duration,
    /// `controller.quorum.request.timeout.ms`: how long a Fetch to the quorum may take.
    pub quorum_request_timeout: Duration,
    /// `controller.quorum.retry.backoff.ms`: the pause before a failed Fetch is retried.
    pub quorum_retry_backoff: Duration,
    /// `controller.quorum.fetch.timeout.ms`: how long without a successful Fetch before
    /// the leader is looked for again.
    pub quorum_fetch_timeout: Duration,
}

/// The parts of the config the KRaft checks read besides their own keys.
pub(super) struct Context<'a> {
    pub node_id: Option<i32>,
    pub listeners: &'a [Listener],
    pub zookeeper_connect: Option<&'a str>,
}

/// A duration key in milliseconds, at least 1.
fn millis(keys: &Keys<'_>, key: &str) -> Result<Duration, ConfigError> {
    Ok(Duration::from_millis(keys.long(key)?.max(1) as u64))
}

fn list(keys: &Keys<'_>, key: &str) -> Vec<String> {
    keys.string(key)
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// `host:port` as Kafka's `Utils.getHost`/`getPort` read it (IPv6 hosts in brackets).
fn host_port(key: &str, entry: &str, form: &str) -> Result<(String, u16), ConfigError> {
    let bad = |what: &str| {
        invalid(
            key,
            format!("failed to parse host {what} from {entry:?}; each entry should be in the form {form}"),
        )
    };
    let (host, port) = entry.rsplit_once(':').ok_or_else(|| bad("port"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(bad("name"));
    }
    let port = port.parse::<u16>().map_err(|_| bad("port"))?;
    Ok((host.to_string(), port))
}

fn parse_voters(entries: &[String]) -> Result<Vec<QuorumEndpoint>, ConfigError> {
    const KEY: &str = "controller.quorum.voters";
    let mut voters: Vec<QuorumEndpoint> = Vec::new();
    for entry in entries {
        let (id, address) = entry.split_once('@').ok_or_else(|| {
            invalid(
                KEY,
                format!("{entry:?}: each entry should be in the form {{id}}@{{host}}:{{port}}"),
            )
        })?;
        let id: i32 = parse_num(KEY, id)?;
        let (host, port) = host_port(KEY, address, "{id}@{host}:{port}")?;
        if voters.iter().any(|v| v.id == Some(id)) {
            return Err(invalid(KEY, format!("voter {id} is listed twice")));
        }
        voters.push(QuorumEndpoint {
            id: Some(id),
            host,
            port,
        });
    }
    Ok(voters)
}

fn parse_bootstrap_servers(entries: &[String]) -> Result<Vec<QuorumEndpoint>, ConfigError> {
    entries
        .iter()
        .map(|e| {
            let (host, port) =
                host_port("controller.quorum.bootstrap.servers", e, "{host}:{port}")?;
            Ok(QuorumEndpoint {
                id: None,
                host,
                port,
            })
        })
        .collect()
}

fn parse_roles(keys: &Keys<'_>) -> Result<ProcessRoles, ConfigError> {
    const KEY: &str = "process.roles";
    let roles = list(keys, KEY);
    let (mut broker, mut controller) = (false, false);
    for role in &roles {
        let seen = match role.as_str() {
            "broker" => &mut broker,
            "controller" => &mut controller,
            other => {
                return Err(invalid(
                    KEY,
                    format!("unknown process role '{other}' (only 'broker' and 'controller' are allowed roles)"),
                ))
            }
        };
        if *seen {
            return Err(invalid(
                KEY,
                format!("duplicate role names found: {roles:?}"),
            ));
        }
        *seen = true;
    }
    match (broker, controller) {
        (false, false) => Ok(ProcessRoles::None),
        (true, false) => Ok(ProcessRoles::Broker),
        (true, true) => Ok(ProcessRoles::Combined),
        (false, true) => Err(invalid(
            KEY,
            "process.roles=controller: skua implements no Raft; use Apache Kafka's controllers and run skua with process.roles=broker",
        )),
    }
}

impl KRaftConfig {
    pub(super) fn build(keys: &Keys<'_>, cx: &Context<'_>) -> Result<Self, ConfigError> {
        let process_roles = parse_roles(keys)?;
        let voters = parse_voters(&list(keys, "controller.quorum.voters"))?;
        let bootstrap_servers =
            parse_bootstrap_servers(&list(keys, "controller.quorum.bootstrap.servers"))?;
        let controller_listener_names: Vec<String> = list(keys, "controller.listener.names")
            .into_iter()
            .map(|n| n.to_ascii_uppercase())
            .collect();
        let mut config = KRaftConfig {
            process_roles,
            voters,
            bootstrap_servers,
            controller_listener_names,
            controller_security_protocol: None,
            heartbeat_interval: millis(keys, "broker.heartbeat.interval.ms")?,
            session_timeout: millis(keys, "broker.session.timeout.ms")?,
            initial_registration_timeout: millis(keys, "initial.broker.registration.timeout.ms")?,
            quorum_request_timeout: millis(keys, "controller.quorum.request.timeout.ms")?,
            quorum_retry_backoff: millis(keys, "controller.quorum.retry.backoff.ms")?,
            quorum_fetch_timeout: millis(keys, "controller.quorum.fetch.timeout.ms")?,
        };
        match process_roles {
            ProcessRoles::None => {}
            ProcessRoles::Broker => config.check_broker(keys, cx)?,
            ProcessRoles::Combined => config.check_combined(cx)?,
        }
        Ok(config)
    }

    /// Kafka's checks for `process.roles=broker`, and the controller listener's protocol.
    fn check_broker(&mut self, keys: &Keys<'_>, cx: &Context<'_>) -> Result<(), ConfigError> {
        if cx.zookeeper_connect.is_some() {
            return Err(invalid(
                "zookeeper.connect",
                "must not be set with process.roles=broker: a KRaft broker's metadata comes from the controller quorum (ZooKeeper migration is not supported)",
            ));
        }
        let Some(node_id) = cx.node_id else {
            return Err(invalid(
                "node.id",
                "missing configuration `node.id` which is required when `process.roles` is defined (i.e. when running in KRaft mode)",
            ));
        };
        self.check_quorum_given()?;
        if let Some(ids) = Some(self.voter_ids()).filter(|ids| ids.contains(&node_id)) {
            return Err(invalid(
                "controller.quorum.voters",
                format!("if process.roles contains just the 'broker' role, the node id {node_id} must not be included in the set of voters {ids:?}"),
            ));
        }
        let Some(first) = self.controller_listener_names.first().cloned() else {
            return Err(invalid(
                "controller.listener.names",
                "must contain at least one value when running KRaft with just the broker role",
            ));
        };
        if let Some(l) = cx
            .listeners
            .iter()
            .find(|l| self.controller_listener_names.contains(&l.name))
        {
            return Err(invalid(
                "controller.listener.names",
                format!("must not contain a value appearing in the 'listeners' configuration when running KRaft with just the broker role ({} is a listener)", l.name),
            ));
        }
        let protocols = self.effective_protocol_map(keys)?;
        for name in &self.controller_listener_names {
            if !protocols.contains_key(name) {
                return Err(invalid(
                    "listener.security.protocol.map",
                    format!("controller listener with name {name} defined in controller.listener.names not found in listener.security.protocol.map (an explicit security mapping for each controller listener is required if listener.security.protocol.map is non-empty, or if there are security protocols other than PLAINTEXT in use)"),
                ));
            }
        }
        if self.controller_listener_names.len() > 1 {
            tracing::warn!(
                names = ?self.controller_listener_names,
                "controller.listener.names has multiple entries; only the first will be used since process.roles=broker"
            );
        }
        self.controller_security_protocol = protocols.get(&first).cloned();
        Ok(())
    }

    /// `broker,controller` is accepted as skua's single-node metadata log only while the
    /// quorum it names could be this node alone: static voters naming another node, or
    /// several bootstrap servers, mean a quorum skua would have to take part in.
    fn check_combined(&self, cx: &Context<'_>) -> Result<(), ConfigError> {
        self.check_quorum_given()?;
        let others: Vec<i32> = self
            .voter_ids()
            .into_iter()
            .filter(|id| Some(*id) != cx.node_id)
            .collect();
        if !others.is_empty() || self.bootstrap_servers.len() > 1 {
            return Err(invalid(
                "process.roles",
                format!("process.roles=broker,controller with a quorum of several controllers ({}): skua implements no Raft; use Apache Kafka's controllers and run skua with process.roles=broker", self.quorum_description()),
            ));
        }
        Ok(())
    }

    fn check_quorum_given(&self) -> Result<(), ConfigError> {
        if self.voters.is_empty() && self.bootstrap_servers.is_empty() {
            return Err(invalid(
                "controller.quorum.bootstrap.servers",
                "if using process.roles, either controller.quorum.bootstrap.servers must contain the set of bootstrap controllers or controller.quorum.voters must contain a parseable set of controllers",
            ));
        }
        Ok(())
    }

    /// `listener.security.protocol.map` as Kafka reads it in KRaft: when the key is not
    /// set and no listener or controller listener is named SSL or SASL_*, every controller
    /// listener name maps to PLAINTEXT.
    fn effective_protocol_map(
        &self,
        keys: &Keys<'_>,
    ) -> Result<std::collections::HashMap<String, String>, ConfigError> {
        let mut map = Listener::protocol_map(&keys.string("listener.security.protocol.map"))?;
        if !keys.is_set("listener.security.protocol.map") {
            let secured = |n: &str| matches!(n, "SSL" | "SASL_SSL" | "SASL_PLAINTEXT");
            let listener_names: Vec<String> = keys
                .string("listeners")
                .split(',')
                .filter_map(|l| {
                    l.split_once("://")
                        .map(|(n, _)| n.trim().to_ascii_uppercase())
                })
                .collect();
            let any_secured = self.controller_listener_names.iter().any(|n| secured(n))
                || listener_names.iter().any(|n| secured(n));
            if !any_secured {
                for name in &self.controller_listener_names {
                    map.entry(name.clone())
                        .or_insert_with(|| "PLAINTEXT".into());
                }
            }
        }
        Ok(map)
    }

    fn voter_ids(&self) -> Vec<i32> {
        self.voters.iter().filter_map(|v| v.id).collect()
    }

    fn quorum_description(&self) -> String {
        if self.voters.is_empty() {
            let servers: Vec<String> = self
                .bootstrap_servers
                .iter()
                .map(|e| format!("{}:{}", e.host, e.port))
                .collect();
            format!("controller.quorum.bootstrap.servers={}", servers.join(","))
        } else {
            let voters: Vec<String> = self
                .voters
                .iter()
                .map(|e| format!("{}@{}:{}", e.id.unwrap_or(-1), e.host, e.port))
                .collect();
            format!("controller.quorum.voters={}", voters.join(","))
        }
    }

    /// Where a broker first looks for the quorum: the static voters when they are
    /// configured (their ids known), else the bootstrap servers, as Kafka's raft client
    /// chooses. Empty unless `process.roles` is set.
    pub fn quorum_endpoints(&self) -> &[QuorumEndpoint] {
        if self.voters.is_empty() {
            &self.bootstrap_servers
        } else {
            &self.voters
        }
    }

    /// The controller listener a broker connects to the quorum over (the first of
    /// `controller.listener.names`).
    pub fn controller_listener(&self) -> Option<&str> {
        self.controller_listener_names.first().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::{ProcessRoles, QuorumEndpoint};
    use crate::config::BrokerConfig;

    fn config(pairs: &[(&str, &str)]) -> Result<BrokerConfig, String> {
        let props: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        BrokerConfig::from_properties(props).map_err(|e| e.to_string())
    }

    /// A broker of a KRaft cluster as Kafka 4's `config/broker.properties` sets one up.
    const BROKER: &[(&str, &str)] = &[
        ("process.roles", "broker"),
        ("node.id", "2"),
        ("controller.quorum.bootstrap.servers", "localhost:9093"),
        ("controller.listener.names", "CONTROLLER"),
        ("listeners", "PLAINTEXT://localhost:9092"),
        (
            "listener.security.protocol.map",
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        ),
    ];

    fn broker_with(changes: &[(&'static str, &'static str)]) -> Result<BrokerConfig, String> {
        let mut pairs: BTreeMap<&str, &str> = BROKER.iter().copied().collect();
        for (k, v) in changes {
            if v.is_empty() {
                pairs.remove(k);
            } else {
                pairs.insert(k, v);
            }
        }
        config(&pairs.into_iter().collect::<Vec<_>>())
    }

    #[test]
    fn kafkas_broker_properties_give_a_kraft_broker() {
        let c = broker_with(&[]).unwrap();
        let k = &c.kraft;
        assert_eq!(k.process_roles, ProcessRoles::Broker);
        assert_eq!(
            k.quorum_endpoints(),
            &[QuorumEndpoint {
                id: None,
                host: "localhost".into(),
                port: 9093
            }]
        );
        assert_eq!(k.controller_listener(), Some("CONTROLLER"));
        assert_eq!(k.controller_security_protocol.as_deref(), Some("PLAINTEXT"));
        assert_eq!(k.heartbeat_interval, Duration::from_millis(2000));
        assert_eq!(k.session_timeout, Duration::from_millis(9000));
        assert_eq!(
            k.initial_registration_timeout,
            Duration::from_millis(60_000)
        );
        assert_eq!(k.quorum_request_timeout, Duration::from_millis(2000));
        assert_eq!(k.quorum_retry_backoff, Duration::from_millis(20));
        assert_eq!(k.quorum_fetch_timeout, Duration::from_millis(2000));
        assert_eq!(c.broker_id, 2);
    }

    #[test]
    fn static_voters_are_the_quorum_when_given() {
        let c = broker_with(&[
            ("controller.quorum.voters", "1@c1.example:9093,3@[::1]:9094"),
            ("broker.heartbeat.interval.ms", "500"),
        ])
        .unwrap();
        let ends = c.kraft.quorum_endpoints();
        assert_eq!(ends.len(), 2);
        assert_eq!(ends[0].id, Some(1));
        assert_eq!(ends[0].host, "c1.example");
        assert_eq!(
            (ends[1].id, ends[1].host.as_str(), ends[1].port),
            (Some(3), "::1", 9094)
        );
        assert_eq!(c.kraft.heartbeat_interval, Duration::from_millis(500));
    }

    #[test]
    fn a_broker_is_checked_as_kafka_checks_it() {
        let refused = |changes: &[(&'static str, &'static str)], key: &str, why: &str| {
            let e = broker_with(changes).unwrap_err();
            assert!(e.contains(key) && e.contains(why), "{changes:?}: {e}");
        };
        refused(
            &[("node.id", "")],
            "node.id",
            "required when `process.roles`",
        );
        refused(
            &[("controller.quorum.bootstrap.servers", "")],
            "controller.quorum.bootstrap.servers",
            "must contain the set of bootstrap controllers",
        );
        refused(
            &[("controller.listener.names", "")],
            "controller.listener.names",
            "at least one value",
        );
        refused(
            &[(
                "listeners",
                "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
            )],
            "controller.listener.names",
            "must not contain a value appearing in the 'listeners'",
        );
        refused(
            &[("zookeeper.connect", "localhost:2181")],
            "zookeeper.connect",
            "must not be set",
        );
        refused(
            &[("controller.quorum.voters", "2@localhost:9093")],
            "controller.quorum.voters",
            "must not be included in the set of voters",
        );
        refused(
            &[("controller.quorum.voters", "localhost:9093")],
            "controller.quorum.voters",
            "{id}@{host}:{port}",
        );
        refused(
            &[("controller.quorum.voters", "x@localhost:9093")],
            "controller.quorum.voters",
            "not a number",
        );
        refused(
            &[("controller.quorum.bootstrap.servers", "localhost")],
            "controller.quorum.bootstrap.servers",
            "{host}:{port}",
        );
        refused(
            &[("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT")],
            "listener.security.protocol.map",
            "CONTROLLER defined in controller.listener.names not found",
        );
        refused(
            &[("process.roles", "broker,broker")],
            "process.roles",
            "duplicate",
        );
        refused(
            &[("process.roles", "observer")],
            "process.roles",
            "unknown process role",
        );
    }

    #[test]
    fn controller_listeners_default_to_plaintext_unless_security_is_in_use() {
        // No explicit map: Kafka maps the controller listener to PLAINTEXT.
        let c = broker_with(&[("listener.security.protocol.map", "")]).unwrap();
        assert_eq!(
            c.kraft.controller_security_protocol.as_deref(),
            Some("PLAINTEXT")
        );
        // An explicit map names the controller listener's protocol.
        let c = broker_with(&[(
            "listener.security.protocol.map",
            "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
        )])
        .unwrap();
        assert_eq!(
            c.kraft.controller_security_protocol.as_deref(),
            Some("SASL_PLAINTEXT")
        );
    }

    #[test]
    fn controller_roles_are_refused_with_the_reason() {
        let e = broker_with(&[("process.roles", "controller")]).unwrap_err();
        assert!(
            e.contains("skua implements no Raft; use Apache Kafka's controllers"),
            "{e}"
        );
        let e = config(&[
            ("process.roles", "broker,controller"),
            ("node.id", "1"),
            (
                "controller.quorum.voters",
                "1@localhost:9093,2@localhost:9095",
            ),
        ])
        .unwrap_err();
        assert!(
            e.contains("skua implements no Raft; use Apache Kafka's controllers"),
            "{e}"
        );
        let e = config(&[
            ("process.roles", "broker,controller"),
            ("node.id", "1"),
            (
                "controller.quorum.bootstrap.servers",
                "localhost:9093,localhost:9095",
            ),
        ])
        .unwrap_err();
        assert!(e.contains("skua implements no Raft"), "{e}");
    }

    #[test]
    fn kafkas_single_node_properties_keep_skuas_own_metadata_log() {
        // Kafka 4's config/server.properties, as README's move from Kafka starts skua.
        for quorum in [
            ("controller.quorum.bootstrap.servers", "localhost:9093"),
            ("controller.quorum.voters", "1@localhost:9093"),
        ] {
            let c = config(&[
                ("process.roles", "broker,controller"),
                ("node.id", "1"),
                quorum,
                ("controller.listener.names", "CONTROLLER"),
                ("listeners", "PLAINTEXT://:9092"),
                (
                    "listener.security.protocol.map",
                    "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                ),
            ])
            .unwrap();
            assert_eq!(c.kraft.process_roles, ProcessRoles::Combined);
        }
        // No roles: nothing KRaft is asked for, whatever else is set.
        let c = config(&[("controller.listener.names", "CONTROLLER")]).unwrap();
        assert_eq!(c.kraft.process_roles, ProcessRoles::None);
    }
}
