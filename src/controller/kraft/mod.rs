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
//!
//! `tests/it/kraft_controller.rs` runs them against an Apache Kafka 4.4 controller. The
//! broker does not start on them yet: `Broker::open` refuses `process.roles=broker`.

pub mod backend;
pub mod driver;
pub mod features;
pub mod follower;
pub mod lifecycle;
pub mod member;
pub mod publish;
