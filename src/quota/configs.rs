//! The quota configs of users and client ids (Kafka's `QuotaConfig`), as the cluster
//! keeps them: the table of every entity's quotas, the checks AlterClientQuotas makes
//! before changing it (Kafka's `ClientQuotaControlManager`), and the filter
//! DescribeClientQuotas reads it with (Kafka's `ClientQuotasImage.describe`).

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::error::ResponseError;

use super::entity::{EntityName, QuotaEntity, CLIENT_ID, IP, USER};
use crate::controller::ControllerError;

pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
pub const REQUEST_PERCENTAGE: &str = "request_percentage";
pub const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";

/// One entity's quotas: quota key → value.
pub type EntityQuotas = BTreeMap<String, f64>;
/// Every entity's quotas.
pub type ClientQuotas = BTreeMap<QuotaEntity, EntityQuotas>;

/// What a quota bounds (Kafka's `ClientQuotaType`), one per quota key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuotaType {
    /// `producer_byte_rate`: bytes/s of produce requests.
    Produce,
    /// `consumer_byte_rate`: bytes/s of fetch responses.
    Fetch,
    /// `request_percentage`: request handler time, as a percentage of one thread.
    Request,
    /// `controller_mutation_rate`: partitions created or deleted per second.
    ControllerMutation,
}

impl QuotaType {
    pub const ALL: [QuotaType; 4] = [
        QuotaType::Produce,
        QuotaType::Fetch,
        QuotaType::Request,
        QuotaType::ControllerMutation,
    ];

    pub fn key(self) -> &'static str {
        match self {
            QuotaType::Produce => PRODUCER_BYTE_RATE,
            QuotaType::Fetch => CONSUMER_BYTE_RATE,
            QuotaType::Request => REQUEST_PERCENTAGE,
            QuotaType::ControllerMutation => CONTROLLER_MUTATION_RATE,
        }
    }

    /// The `type` of Kafka's quota metrics (`kafka.server:type=Produce,...`).
    pub fn resource(self) -> &'static str {
        match self {
            QuotaType::Produce => "Produce",
            QuotaType::Fetch => "Fetch",
            QuotaType::Request => "Request",
            QuotaType::ControllerMutation => "ControllerMutation",
        }
    }

    pub fn of_key(key: &str) -> Option<QuotaType> {
        QuotaType::ALL.into_iter().find(|t| t.key() == key)
    }

    /// Whether Kafka defines the key as a LONG (the byte rates) rather than a DOUBLE.
    fn integral(self) -> bool {
        matches!(self, QuotaType::Produce | QuotaType::Fetch)
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// One entity's requested changes: key → new value, or None to remove it.
#[derive(Clone, Debug, PartialEq)]
pub struct Alteration {
    pub entity: QuotaEntity,
    pub ops: BTreeMap<String, Option<f64>>,
}

fn invalid(message: impl Into<String>) -> ControllerError {
    ControllerError::new(ResponseError::InvalidRequest, message)
}

/// The entity an AlterClientQuotas entry names (its `(type, name)` pairs, null name for
/// the default), checked as Kafka's controller checks it.
pub fn parse_entity(
    components: &[(String, Option<String>)],
) -> Result<QuotaEntity, ControllerError> {
    if components.is_empty() {
        return Err(invalid("Invalid empty client quota entity"));
    }
    let mut entity = QuotaEntity {
        user: None,
        client_id: None,
    };
    let mut seen = BTreeSet::new();
    for (kind, name) in components {
        if !seen.insert(kind.as_str()) {
            return Err(invalid(format!(
                "Invalid client quota entity, duplicate entity entry {kind}"
            )));
        }
        let slot = match kind.as_str() {
            USER => &mut entity.user,
            CLIENT_ID => &mut entity.client_id,
            IP => {
                return Err(invalid(
                    "IP quotas (connection_creation_rate) are not enforced by skua",
                ))
            }
            other => {
                return Err(invalid(format!(
                    "Unhandled client quota entity type: {other}"
                )))
            }
        };
        if name.as_deref() == Some("") {
            return Err(invalid(format!("Empty {kind} not supported")));
        }
        *slot = Some(EntityName::from_nullable(name.as_deref()));
    }
    Ok(entity)
}

/// Checks one value set (Kafka's `validateQuotaKeyValue`): a known key, above zero, and
/// whole for the byte rates.
pub fn validate(key: &str, value: f64) -> Result<QuotaType, ControllerError> {
    let Some(kind) = QuotaType::of_key(key) else {
        return Err(invalid(format!("Invalid configuration key {key}")));
    };
    if value.is_nan() || value <= 0.0 {
        return Err(invalid(format!("Quota {key} must be greater than 0")));
    }
    if kind.integral() {
        if value > i64::MAX as f64 {
            return Err(invalid(format!(
                "Proposed value for {key} is too large for a LONG."
            )));
        }
        if (value % 1.0).abs() > 1e-6 {
            return Err(invalid(format!("{key} cannot be a fractional value.")));
        }
    }
    Ok(kind)
}

/// Checks every op of one entity; the quotas it would leave.
pub fn altered(
    current: Option<&BTreeMap<String, f64>>,
    ops: &BTreeMap<String, Option<f64>>,
) -> Result<BTreeMap<String, f64>, ControllerError> {
    let mut quotas = current.cloned().unwrap_or_default();
    for (key, value) in ops {
        match value {
            Some(v) => {
                validate(key, *v)?;
                quotas.insert(key.clone(), *v);
            }
            None => {
                quotas.remove(key);
            }
        }
    }
    Ok(quotas)
}

/// Reads a ZooKeeper entity config's quota keys (values kept as strings there); other
/// keys (a user's SCRAM credentials) and unreadable values are left out.
pub fn from_strings(configs: &BTreeMap<String, String>) -> BTreeMap<String, f64> {
    configs
        .iter()
        .filter(|(k, _)| QuotaType::of_key(k).is_some())
        .filter_map(|(k, v)| match v.trim().parse::<f64>() {
            Ok(n) => Some((k.clone(), n)),
            Err(_) => {
                tracing::warn!(key = %k, value = %v, "quota value not a number; ignored");
                None
            }
        })
        .collect()
}

/// A quota value as a ZooKeeper entity config holds it: a whole number for the byte
/// rates, Java's `Double.toString` for the others (`200.0`).
pub fn to_string(key: &str, value: f64) -> String {
    match QuotaType::of_key(key) {
        Some(t) if t.integral() => format!("{}", (value + 1e-6) as i64),
        _ if value.fract() == 0.0 && value.abs() < 1e7 => format!("{value:.1}"),
        _ => format!("{value}"),
    }
}

/// DescribeClientQuotas' match types.
pub const MATCH_TYPE_EXACT: i8 = 0;
pub const MATCH_TYPE_DEFAULT: i8 = 1;
pub const MATCH_TYPE_SPECIFIED: i8 = 2;

/// One filter component of DescribeClientQuotas.
#[derive(Clone, Debug)]
pub struct FilterComponent {
    pub entity_type: String,
    pub match_type: i8,
    pub match_name: Option<String>,
}

/// What a component asks of its entity type: a name, the default, or any.
enum Wanted {
    Exact(EntityName),
    Specified,
}

/// The entities matching `components` (Kafka's `ClientQuotasImage.describe`), or the
/// error the whole request is answered with.
pub fn describe(
    quotas: &ClientQuotas,
    components: &[FilterComponent],
    strict: bool,
) -> Result<Vec<(QuotaEntity, EntityQuotas)>, ControllerError> {
    let mut wanted: BTreeMap<&str, Wanted> = BTreeMap::new();
    for c in components {
        let kind = c.entity_type.as_str();
        if kind.is_empty() {
            return Err(invalid("Invalid empty entity type."));
        }
        if wanted.contains_key(kind) {
            return Err(invalid(format!(
                "Entity type {kind} cannot appear more than once in the filter."
            )));
        }
        if ![USER, CLIENT_ID, IP].contains(&kind) {
            return Err(ControllerError::new(
                ResponseError::UnsupportedVersion,
                format!("Unsupported entity type {kind}"),
            ));
        }
        let w =
            match (c.match_type, &c.match_name) {
                (MATCH_TYPE_EXACT, Some(n)) => Wanted::Exact(EntityName::Named(n.clone())),
                (MATCH_TYPE_EXACT, None) => {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                    ))
                }
                (MATCH_TYPE_DEFAULT, None) => Wanted::Exact(EntityName::Default),
                (MATCH_TYPE_DEFAULT, Some(_)) => {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                    ))
                }
                (MATCH_TYPE_SPECIFIED, None) => Wanted::Specified,
                (MATCH_TYPE_SPECIFIED, Some(_)) => return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )),
                (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
            };
        wanted.insert(kind, w);
    }
    if wanted.contains_key(IP) && (wanted.contains_key(USER) || wanted.contains_key(CLIENT_ID)) {
        return Err(invalid(
            "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.",
        ));
    }
    let matches = |entity: &QuotaEntity| {
        let sides = [(USER, &entity.user), (CLIENT_ID, &entity.client_id)];
        let present = sides.iter().filter(|(_, n)| n.is_some()).count();
        if strict && present != wanted.len() {
            return false;
        }
        wanted.iter().all(|(kind, w)| {
            let side = sides
                .iter()
                .find(|(k, _)| k == kind)
                .and_then(|(_, n)| n.as_ref());
            match (w, side) {
                (_, None) => false,
                (Wanted::Exact(name), Some(n)) => name == n,
                (Wanted::Specified, Some(_)) => true,
            }
        })
    };
    Ok(quotas
        .iter()
        .filter(|(e, q)| !q.is_empty() && matches(e))
        .map(|(e, q)| (e.clone(), q.clone()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(n: &str) -> EntityName {
        EntityName::Named(n.to_string())
    }

    fn comp(kind: &str, name: Option<&str>) -> (String, Option<String>) {
        (kind.to_string(), name.map(str::to_string))
    }

    #[test]
    fn entities_are_checked_as_kafka_does() {
        let e = parse_entity(&[comp(USER, Some("a")), comp(CLIENT_ID, None)]).unwrap();
        assert_eq!(
            e,
            QuotaEntity::user_client_id(named("a"), EntityName::Default)
        );
        let err = |c: &[(String, Option<String>)]| parse_entity(c).unwrap_err().message;
        assert_eq!(err(&[]), "Invalid empty client quota entity");
        assert_eq!(err(&[comp(USER, Some(""))]), "Empty user not supported");
        assert!(err(&[comp(USER, None), comp(USER, None)]).contains("duplicate"));
        assert!(err(&[comp("group", None)]).contains("Unhandled"));
        assert!(parse_entity(&[comp(IP, Some("1.2.3.4"))]).is_err());
    }

    #[test]
    fn values_are_checked_as_kafka_does() {
        assert_eq!(
            validate(PRODUCER_BYTE_RATE, 1024.0).unwrap(),
            QuotaType::Produce
        );
        assert_eq!(
            validate(REQUEST_PERCENTAGE, 12.5).unwrap(),
            QuotaType::Request
        );
        let err = |k, v| validate(k, v).unwrap_err().message;
        assert_eq!(err("bogus", 1.0), "Invalid configuration key bogus");
        assert_eq!(
            err(CONSUMER_BYTE_RATE, 0.0),
            "Quota consumer_byte_rate must be greater than 0"
        );
        assert_eq!(
            err(PRODUCER_BYTE_RATE, 1.5),
            "producer_byte_rate cannot be a fractional value."
        );
        let current = BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), 5.0)]);
        let ops = BTreeMap::from([
            (PRODUCER_BYTE_RATE.to_string(), None),
            (CONTROLLER_MUTATION_RATE.to_string(), Some(2.5)),
        ]);
        let after = altered(Some(&current), &ops).unwrap();
        assert_eq!(
            after,
            BTreeMap::from([(CONTROLLER_MUTATION_RATE.to_string(), 2.5)])
        );
    }

    #[test]
    fn zookeeper_strings_as_kafka_writes_them() {
        assert_eq!(to_string(PRODUCER_BYTE_RATE, 1024.0), "1024");
        assert_eq!(to_string(REQUEST_PERCENTAGE, 200.0), "200.0");
        assert_eq!(to_string(REQUEST_PERCENTAGE, 12.5), "12.5");
        let configs = BTreeMap::from([
            ("producer_byte_rate".to_string(), "1024".to_string()),
            ("SCRAM-SHA-256".to_string(), "salt=..".to_string()),
            ("consumer_byte_rate".to_string(), "x".to_string()),
        ]);
        assert_eq!(
            from_strings(&configs),
            BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), 1024.0)])
        );
    }

    fn table() -> ClientQuotas {
        let q = |v| BTreeMap::from([(PRODUCER_BYTE_RATE.to_string(), v)]);
        BTreeMap::from([
            (QuotaEntity::user(named("alice")), q(1.0)),
            (QuotaEntity::user(EntityName::Default), q(2.0)),
            (QuotaEntity::client_id(named("app")), q(3.0)),
            (
                QuotaEntity::user_client_id(named("alice"), named("app")),
                q(4.0),
            ),
        ])
    }

    fn filter(parts: &[(&str, i8, Option<&str>)], strict: bool) -> Vec<f64> {
        let components: Vec<FilterComponent> = parts
            .iter()
            .map(|(t, m, n)| FilterComponent {
                entity_type: t.to_string(),
                match_type: *m,
                match_name: n.map(str::to_string),
            })
            .collect();
        let mut found: Vec<f64> = describe(&table(), &components, strict)
            .unwrap()
            .into_iter()
            .map(|(_, q)| q[PRODUCER_BYTE_RATE])
            .collect();
        found.sort_by(f64::total_cmp);
        found
    }

    #[test]
    fn describe_filters_as_kafka_does() {
        assert_eq!(filter(&[], false), vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(filter(&[], true), Vec::<f64>::new());
        assert_eq!(
            filter(&[(USER, MATCH_TYPE_SPECIFIED, None)], true),
            vec![1.0, 2.0]
        );
        assert_eq!(
            filter(&[(USER, MATCH_TYPE_SPECIFIED, None)], false),
            vec![1.0, 2.0, 4.0]
        );
        assert_eq!(
            filter(&[(USER, MATCH_TYPE_DEFAULT, None)], false),
            vec![2.0]
        );
        assert_eq!(
            filter(&[(USER, MATCH_TYPE_EXACT, Some("alice"))], false),
            vec![1.0, 4.0]
        );
        assert_eq!(
            filter(
                &[
                    (USER, MATCH_TYPE_EXACT, Some("alice")),
                    (CLIENT_ID, MATCH_TYPE_SPECIFIED, None)
                ],
                true
            ),
            vec![4.0]
        );
        let bad = |c: FilterComponent| describe(&table(), &[c], false).unwrap_err().error;
        let c = |t: &str, m, n: Option<&str>| FilterComponent {
            entity_type: t.into(),
            match_type: m,
            match_name: n.map(str::to_string),
        };
        assert_eq!(bad(c("", 0, Some("a"))), ResponseError::InvalidRequest);
        assert_eq!(bad(c("group", 2, None)), ResponseError::UnsupportedVersion);
        assert_eq!(bad(c(USER, 0, None)), ResponseError::InvalidRequest);
        assert_eq!(bad(c(USER, 1, Some("a"))), ResponseError::InvalidRequest);
        assert_eq!(bad(c(USER, 7, None)), ResponseError::InvalidRequest);
    }
}
