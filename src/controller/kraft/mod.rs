//! skua as a broker of a KRaft cluster whose controllers are Apache Kafka's
//! (`process.roles=broker`). Three pure state machines (no sockets, no clock, no disk:
//! every scenario is a unit test):
//!
//! - `lifecycle`: registration and heartbeats (Kafka's `BrokerLifecycleManager`):
//!   fenced → caught up → unfenced, controlled shutdown, offline log dirs.
//! - `follower`: following `__cluster_metadata` from the quorum's leader with KRaft's
//!   Fetch and FetchSnapshot (Kafka's raft client as an observer), handing committed
//!   batches on.
//! - `publish`: committed batches and snapshots replayed into the metadata image, a
//!   metadata transaction's records only once it ends.
//!
//! and what runs them against a real quorum:
//!
//! - `driver`: one task running the three over the outbound client, publishing each
//!   image with its delta and the broker's state.
//! - `backend`: the `Controller` the handlers use: reads from the published image,
//!   metadata changes and ISR changes forwarded to the active controller.
//! - `features`: the feature levels the broker registers as supported.
//! - `member`: what `Broker::open` runs for `process.roles=broker`: the dirs checked as
//!   `kafka-storage.sh format` left them, the driver configured from `server.properties`,
//!   and Kafka's `BrokerServer` waits (caught up before the logs open, unfenced before
//!   clients are served, the controller's permission before a controlled shutdown ends).
//!
//! - `dirs`: the broker's replicas placed on its log dir in the metadata
//!   (AssignReplicasToDirs), so the controller may elect them after a new dir.
//! - `envelope`: a client's request wrapped for the active controller as Kafka 4's
//!   brokers wrap what they forward.
//!
//! What reaches the controller, and how. Kafka 4's brokers forward every admin request
//! the controller decides in an Envelope (`ForwardingManager`): the request as the client
//! sent it, with the client's principal and address, so the controller's authorizer
//! checks the client, not the broker (a super user the Envelope itself needs
//! CLUSTER_ACTION for). skua does the same for what it cannot decide itself and whose
//! authorization is the controller's: CreateAcls, DeleteAcls, AlterUserScramCredentials
//! (the client's salted password reaches the controller as sent; the broker never sees a
//! password), ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments and
//! DescribeQuorum (`router::KRAFT_BROKER_ROUTES`, `handlers::forwarded`; ApiVersions
//! advertises them narrowed to the active controller's versions once it knows them). Sent as the API
//! itself, from the broker (`backend`): the changes skua's handlers check first with the
//! same ACLs (the image's, when `authorizer.class.name` is set) and must then see in the
//! image before answering (CreateTopics, DeleteTopics, CreatePartitions,
//! IncrementalAlterConfigs, AlterConfigs, AlterClientQuotas), and the broker's own
//! requests (AlterPartition, AllocateProducerIds, AssignReplicasToDirs). DescribeAcls and
//! DescribeUserScramCredentials answer from the image, as Kafka's broker answers them from
//! its own (SECURITY_DISABLED without an authorizer configured on the broker).
//!
//! `tests/it/kraft_controller.rs` runs the pieces against an Apache Kafka 4.4 controller,
//! `tests/it/kraft_broker.rs` the skua binary as a broker of its cluster (alone, and beside
//! a Kafka 4.4 broker).

pub mod backend;
pub mod dirs;
pub mod driver;
pub mod envelope;
pub mod features;
pub mod follower;
pub mod lifecycle;
pub mod member;
pub mod publish;
