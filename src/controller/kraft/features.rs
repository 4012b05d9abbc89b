//! The feature levels a skua broker registers as supported (BrokerRegistration's
//! `Features`). Kafka's controllers refuse a broker whose ranges leave out a finalized
//! level, and never finalize a level some registered broker lacks, so each range is what
//! skua handles, no more:
//!
//! - `metadata.version` 7 (3.3-IV3, the oldest Kafka 4 accepts) to 33 (4.4-IV2): the
//!   metadata records those levels write are the ones `controller::records` reads
//!   (PartitionRecord and PartitionChangeRecord to v2, RegisterBrokerRecord to v4,
//!   BrokerRegistrationChangeRecord to v3; the Kafka 4.4 controller test replays such a
//!   log).
//! - `kraft.version` 0-1: a broker only observes the quorum; Fetch reaches it through
//!   `controller.quorum.bootstrap.servers` as well as static voters.
//! - `group.version` 0-1: KIP-848 groups (ConsumerGroupHeartbeat) are served.
//! - `eligible.leader.replicas.version` 0 only: the ELR fields of partition records are
//!   read, but DescribeTopicPartitions reports them empty and `ClearElrRecord` is not
//!   applied.
//! - `transaction.version` 0 only: KIP-890's second part (EndTxn v5, AddPartitionsToTxn
//!   v5 from clients) is not routed.
//! - `share.version` and `streams.version` are not listed (0 only): no KIP-1071 streams
//!   groups, and no share groups beside Kafka's quorum (skua's share coordinator does
//!   not yet speak the share-state RPCs to other brokers; its own controllers serve
//!   them). A Kafka 4.4 cluster formatted with its defaults finalizes
//!   `eligible.leader.replicas.version` 1, `transaction.version` 2, `share.version` 2 and
//!   `streams.version` 1, so a skua broker joins one formatted with them at 0
//!   (`kafka-storage.sh format --feature ...=0`) or downgraded (`kafka-features.sh
//!   downgrade`).

use super::lifecycle::SupportedFeature;

/// (name, min, max) of every feature skua registers.
pub const SUPPORTED: &[(&str, i16, i16)] = &[
    ("metadata.version", 7, 33),
    ("kraft.version", 0, 1),
    ("group.version", 0, 1),
    ("eligible.leader.replicas.version", 0, 0),
    ("transaction.version", 0, 0),
];

pub fn supported_features() -> Vec<SupportedFeature> {
    SUPPORTED
        .iter()
        .map(|&(name, min, max)| SupportedFeature {
            name: name.into(),
            min,
            max,
        })
        .collect()
}
