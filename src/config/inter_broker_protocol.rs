//! `inter.broker.protocol.version` (Kafka's `MetadataVersion` in ZooKeeper mode): the
//! protocol a broker speaks to other brokers while a cluster is being upgraded. skua's
//! followers take from it the highest Fetch, OffsetForLeaderEpoch and ListOffsets versions
//! they send, as a Kafka 3.9 broker at that version does, and whether they truncate from a
//! Fetch response's diverging epoch (2.7-IV1 and later) or ask OffsetForLeaderEpoch first;
//! a controller the LeaderAndIsr, UpdateMetadata and StopReplica versions it sends.
//!
//! The values are Kafka 3.9's: a version (`2.6-IV0`), or a release (`2.6`, `2.6.1`,
//! `0.10.1`), which means the last version of that release. skua stores record format v2
//! only, so a version older than 0.11.0 (the first with it) is refused at startup.

use std::fmt;

/// One inter-broker protocol version, in Kafka's order (so `>=` compares them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MetadataVersion(usize);

/// Kafka 3.9's versions, oldest first: (release, version within it). A release's last
/// entry is what the release alone names, except 4.0, which Kafka 3.9 only knows in
/// development (its versions must be named whole).
const VERSIONS: &[(&str, &str)] = &[
    ("0.8.0", ""),
    ("0.8.1", ""),
    ("0.8.2", ""),
    ("0.9.0", ""),
    ("0.10.0", "IV0"),
    ("0.10.0", "IV1"),
    ("0.10.1", "IV0"),
    ("0.10.1", "IV1"),
    ("0.10.1", "IV2"),
    ("0.10.2", "IV0"),
    ("0.11.0", "IV0"),
    ("0.11.0", "IV1"),
    ("0.11.0", "IV2"),
    ("1.0", "IV0"),
    ("1.1", "IV0"),
    ("2.0", "IV0"),
    ("2.0", "IV1"),
    ("2.1", "IV0"),
    ("2.1", "IV1"),
    ("2.1", "IV2"),
    ("2.2", "IV0"),
    ("2.2", "IV1"),
    ("2.3", "IV0"),
    ("2.3", "IV1"),
    ("2.4", "IV0"),
    ("2.4", "IV1"),
    ("2.5", "IV0"),
    ("2.6", "IV0"),
    ("2.7", "IV0"),
    ("2.7", "IV1"),
    ("2.7", "IV2"),
    ("2.8", "IV0"),
    ("2.8", "IV1"),
    ("3.0", "IV0"),
    ("3.0", "IV1"),
    ("3.1", "IV0"),
    ("3.2", "IV0"),
    ("3.3", "IV0"),
    ("3.3", "IV1"),
    ("3.3", "IV2"),
    ("3.3", "IV3"),
    ("3.4", "IV0"),
    ("3.5", "IV0"),
    ("3.5", "IV1"),
    ("3.5", "IV2"),
    ("3.6", "IV0"),
    ("3.6", "IV1"),
    ("3.6", "IV2"),
    ("3.7", "IV0"),
    ("3.7", "IV1"),
    ("3.7", "IV2"),
    ("3.7", "IV3"),
    ("3.7", "IV4"),
    ("3.8", "IV0"),
    ("3.9", "IV0"),
    ("4.0", "IV0"),
    ("4.0", "IV1"),
];

/// The release Kafka 3.9 has only in development.
const UNRELEASED: &str = "4.0";

/// The oldest version skua runs at: the first with record format v2.
const OLDEST_SUPPORTED: &str = "0.11.0-IV0";

/// Why a value is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum VersionError {
    /// Not one of Kafka's versions (Kafka's own words for it).
    Unknown(String),
    /// One of Kafka's, older than skua's record format allows.
    TooOld(MetadataVersion),
}

impl fmt::Display for VersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VersionError::Unknown(v) => write!(f, "Version {v} is not a valid version"),
            VersionError::TooOld(v) => write!(
                f,
                "{v} is older than {OLDEST_SUPPORTED}: skua stores record format v2 only, \
                 which brokers speak from {OLDEST_SUPPORTED} on"
            ),
        }
    }
}

impl MetadataVersion {
    /// The newest version Kafka 3.9 runs in production (its default).
    pub const LATEST: MetadataVersion = MetadataVersion(54);

    /// Kafka's `fromVersionString`, then skua's oldest: `2.6`, `2.6-IV0`, `2.6.1` (only the
    /// first two numbers count, three from a `0.` release) and `0.10.1-IV2` are versions.
    pub fn parse(text: &str) -> Result<MetadataVersion, VersionError> {
        let version = Self::lookup(text).ok_or_else(|| VersionError::Unknown(text.into()))?;
        if version < Self::named(OLDEST_SUPPORTED) {
            return Err(VersionError::TooOld(version));
        }
        Ok(version)
    }

    fn lookup(text: &str) -> Option<MetadataVersion> {
        let segments: Vec<&str> = text.split('.').collect();
        let kept = if text.starts_with("0.") { 3 } else { 2 };
        let key = match kept >= segments.len() {
            true => text.to_string(),
            false => segments[..kept].join("."),
        };
        let exact = VERSIONS
            .iter()
            .position(|&(release, sub)| Self::full_name(release, sub) == key);
        let release = VERSIONS
            .iter()
            .rposition(|&(release, _)| release == key && release != UNRELEASED);
        exact.or(release).map(MetadataVersion)
    }

    /// A version this file names (its tests check every one exists).
    fn named(version: &str) -> MetadataVersion {
        Self::lookup(version).unwrap_or(MetadataVersion(0))
    }

    fn full_name(release: &str, sub: &str) -> String {
        match sub.is_empty() {
            true => release.to_string(),
            false => format!("{release}-{sub}"),
        }
    }

    fn at_least(self, version: &str) -> bool {
        self >= Self::named(version)
    }

    /// The newest of `thresholds` (version, value; newest first) this version has reached.
    fn highest(self, thresholds: &[(&str, i16)]) -> i16 {
        thresholds
            .iter()
            .find(|(v, _)| self.at_least(v))
            .map_or(0, |&(_, value)| value)
    }

    /// Whether a follower truncates from the diverging epoch of a Fetch response (KIP-320).
    pub fn is_truncation_on_fetch_supported(self) -> bool {
        self.at_least("2.7-IV1")
    }

    /// Whether a follower asks its leader OffsetForLeaderEpoch before it fetches (KIP-101);
    /// older ones truncate to their high watermark.
    pub fn is_offset_for_leader_epoch_supported(self) -> bool {
        self.at_least("0.11.0-IV2")
    }

    /// The Fetch version a follower sends (Kafka's `fetchRequestVersion`).
    pub fn fetch_request_version(self) -> i16 {
        self.highest(&[
            ("3.9-IV0", 17),
            ("3.7-IV4", 16),
            ("3.5-IV1", 15),
            ("3.5-IV0", 14),
            ("3.1-IV0", 13),
            ("2.7-IV1", 12),
            ("2.3-IV1", 11),
            ("2.1-IV2", 10),
            ("2.0-IV1", 8),
            ("1.1-IV0", 7),
            ("0.11.0-IV1", 5),
            ("0.11.0-IV0", 4),
            ("0.10.1-IV1", 3),
            ("0.10.0-IV0", 2),
            ("0.9.0", 1),
        ])
    }

    /// The OffsetForLeaderEpoch version a follower sends.
    pub fn offset_for_leader_epoch_request_version(self) -> i16 {
        self.highest(&[
            ("2.8-IV0", 4),
            ("2.3-IV1", 3),
            ("2.1-IV1", 2),
            ("2.0-IV0", 1),
        ])
    }

    /// The LeaderAndIsr version a controller sends (Kafka's `ControllerChannelManager`).
    pub fn leader_and_isr_request_version(self) -> i16 {
        self.highest(&[
            ("3.4-IV0", 7),
            ("3.2-IV0", 6),
            ("2.8-IV1", 5),
            ("2.4-IV1", 4),
            ("2.4-IV0", 3),
            ("2.2-IV0", 2),
            ("1.0-IV0", 1),
        ])
    }

    /// The UpdateMetadata version a controller sends. Versions 0–2 are older than skua's
    /// oldest inter-broker protocol, so never chosen.
    pub fn update_metadata_request_version(self) -> i16 {
        self.highest(&[
            ("3.4-IV0", 8),
            ("2.8-IV1", 7),
            ("2.4-IV1", 6),
            ("2.2-IV0", 5),
            ("1.0-IV0", 4),
            ("0.10.2-IV0", 3),
        ])
    }

    /// The StopReplica version a controller sends.
    pub fn stop_replica_request_version(self) -> i16 {
        self.highest(&[
            ("3.4-IV0", 4),
            ("2.6-IV0", 3),
            ("2.4-IV1", 2),
            ("2.2-IV0", 1),
        ])
    }

    /// The ListOffsets version a follower sends.
    pub fn list_offset_request_version(self) -> i16 {
        self.highest(&[
            ("3.9-IV0", 9),
            ("3.5-IV0", 8),
            ("3.0-IV1", 7),
            ("2.8-IV0", 6),
            ("2.2-IV1", 5),
            ("2.1-IV1", 4),
            ("2.0-IV1", 3),
            ("0.11.0-IV0", 2),
            ("0.10.1-IV2", 1),
        ])
    }
}

impl Default for MetadataVersion {
    fn default() -> Self {
        MetadataVersion::LATEST
    }
}

impl fmt::Display for MetadataVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (release, sub) = VERSIONS.get(self.0).copied().unwrap_or(("?", ""));
        f.write_str(&Self::full_name(release, sub))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> MetadataVersion {
        MetadataVersion::parse(text).unwrap()
    }

    #[test]
    fn every_version_named_here_exists() {
        for name in [
            OLDEST_SUPPORTED,
            "0.9.0",
            "0.10.0-IV0",
            "0.10.1-IV1",
            "0.10.1-IV2",
            "0.11.0-IV1",
            "0.11.0-IV2",
            "1.1-IV0",
            "2.0-IV0",
            "2.0-IV1",
            "2.1-IV1",
            "2.1-IV2",
            "1.0-IV0",
            "0.10.2-IV0",
            "2.2-IV0",
            "2.2-IV1",
            "2.3-IV1",
            "2.4-IV0",
            "2.4-IV1",
            "2.6-IV0",
            "2.7-IV1",
            "2.8-IV0",
            "2.8-IV1",
            "3.0-IV1",
            "3.1-IV0",
            "3.2-IV0",
            "3.4-IV0",
            "3.5-IV0",
            "3.5-IV1",
            "3.7-IV4",
            "3.9-IV0",
        ] {
            let found = MetadataVersion::lookup(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!(found.to_string(), name);
        }
        assert_eq!(MetadataVersion::LATEST.to_string(), "3.9-IV0");
    }

    #[test]
    fn parses_as_kafka_3_9() {
        assert_eq!(v("2.6").to_string(), "2.6-IV0");
        assert_eq!(v("2.6-IV0"), v("2.6"));
        assert_eq!(v("2.6.1"), v("2.6"));
        assert_eq!(v("2.7").to_string(), "2.7-IV2");
        assert_eq!(v("0.11.0").to_string(), "0.11.0-IV2");
        assert_eq!(v("0.11.0.3"), v("0.11.0"));
        assert_eq!(v("3.9"), MetadataVersion::LATEST);
        assert_eq!(v("4.0-IV1").to_string(), "4.0-IV1");
        for bad in ["", "4.0", "2.6-IV1", "banana", "3", "2.6-iv0", "5.0"] {
            assert_eq!(
                MetadataVersion::parse(bad),
                Err(VersionError::Unknown(bad.into())),
                "{bad}"
            );
        }
        for old in ["0.8.2", "0.8.2.1", "0.10.2", "0.10.1-IV0"] {
            assert!(
                matches!(MetadataVersion::parse(old), Err(VersionError::TooOld(_))),
                "{old}"
            );
        }
    }

    #[test]
    fn request_versions_are_kafkas() {
        // (version, Fetch, OffsetForLeaderEpoch, ListOffsets), from Kafka 3.9's MetadataVersion.
        for (name, fetch, epoch, list) in [
            ("0.11.0-IV0", 4, 0, 2),
            ("0.11.0-IV2", 5, 0, 2),
            ("1.1", 7, 0, 2),
            ("2.0-IV1", 8, 1, 3),
            ("2.1", 10, 2, 4),
            ("2.4", 11, 3, 5),
            ("2.6", 11, 3, 5),
            ("2.7-IV0", 11, 3, 5),
            ("2.7-IV1", 12, 3, 5),
            ("2.8", 12, 4, 6),
            ("3.0", 12, 4, 7),
            ("3.4", 13, 4, 7),
            ("3.5-IV0", 14, 4, 8),
            ("3.6", 15, 4, 8),
            ("3.8", 16, 4, 8),
            ("3.9", 17, 4, 9),
            ("4.0-IV1", 17, 4, 9),
        ] {
            let version = v(name);
            assert_eq!(version.fetch_request_version(), fetch, "{name}");
            assert_eq!(
                version.offset_for_leader_epoch_request_version(),
                epoch,
                "{name}"
            );
            assert_eq!(version.list_offset_request_version(), list, "{name}");
            assert_eq!(version.is_truncation_on_fetch_supported(), fetch >= 12);
        }
        assert!(!v("0.11.0-IV1").is_offset_for_leader_epoch_supported());
        assert!(v("0.11.0-IV2").is_offset_for_leader_epoch_supported());
    }

    #[test]
    fn controller_request_versions_are_kafkas() {
        // (version, LeaderAndIsr, UpdateMetadata, StopReplica), from Kafka 3.9's
        // ControllerChannelManager.
        for (name, leader_and_isr, update_metadata, stop_replica) in [
            ("0.11.0", 0, 3, 0),
            ("1.0", 1, 4, 0),
            ("2.1", 1, 4, 0),
            ("2.2-IV0", 2, 5, 1),
            ("2.3", 2, 5, 1),
            ("2.4-IV0", 3, 5, 1),
            ("2.4-IV1", 4, 6, 2),
            ("2.5", 4, 6, 2),
            ("2.6", 4, 6, 3),
            ("2.7", 4, 6, 3),
            ("2.8-IV0", 4, 6, 3),
            ("2.8-IV1", 5, 7, 3),
            ("3.1", 5, 7, 3),
            ("3.2", 6, 7, 3),
            ("3.3", 6, 7, 3),
            ("3.4", 7, 8, 4),
            ("3.9", 7, 8, 4),
        ] {
            let version = v(name);
            assert_eq!(
                version.leader_and_isr_request_version(),
                leader_and_isr,
                "{name}"
            );
            assert_eq!(
                version.update_metadata_request_version(),
                update_metadata,
                "{name}"
            );
            assert_eq!(
                version.stop_replica_request_version(),
                stop_replica,
                "{name}"
            );
        }
    }

    #[test]
    fn the_broker_config_refuses_what_kafka_or_skua_cannot_run_at() {
        let config = |value: &str| {
            crate::config::from_args(&[
                "--override".into(),
                format!("inter.broker.protocol.version={value}"),
            ])
        };
        let default = crate::config::from_args(&[]).unwrap();
        assert_eq!(
            default.replication.inter_broker_protocol_version,
            MetadataVersion::LATEST
        );
        let at_2_6 = config("2.6").unwrap();
        assert_eq!(
            at_2_6.replication.inter_broker_protocol_version.to_string(),
            "2.6-IV0"
        );
        let unknown = config("2.6-IV9").unwrap_err().to_string();
        assert!(
            unknown.contains("inter.broker.protocol.version")
                && unknown.contains("Version 2.6-IV9 is not a valid version"),
            "{unknown}"
        );
        let old = config("0.10.2").unwrap_err().to_string();
        assert!(old.contains("record format v2"), "{old}");
    }
}
