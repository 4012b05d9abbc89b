//! skua as a broker of a KRaft cluster whose controllers are Apache Kafka's
//! (`process.roles=broker`): the pieces that talk to the controller quorum, each pure (no
//! sockets, no clock, no disk) so that every scenario is a unit test; a driver that runs
//! them over the outbound client is what wires them into the broker.
//!
//! - `lifecycle`: registration and heartbeats (Kafka's `BrokerLifecycleManager`):
//!   fenced → unfenced once caught up, controlled shutdown, offline log dirs.
//! - `follower`: following `__cluster_metadata` from the quorum's leader with KRaft's
//!   Fetch and FetchSnapshot (Kafka's raft client as an observer), handing committed
//!   batches on.
//! - `driver`: one task running the three over the outbound client against a real
//!   quorum, publishing the image and the broker's state.
//! - `publish`: committed batches and snapshots replayed into the metadata image, a
//!   metadata transaction's records only once it ends.

pub mod backend;
pub mod driver;
pub mod follower;
pub mod lifecycle;
pub mod publish;
