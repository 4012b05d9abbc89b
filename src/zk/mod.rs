//! ZooKeeper, as Kafka 3.9's ZooKeeper mode uses it: the znodes Kafka writes (`znodes`,
//! in Kafka's exact JSON, with the JVM key orders of `java_order`) and a session
//! (`session`) with the operations a broker and a controller need: ephemeral
//! registrations, reads with watches, multi-op writes fenced by a znode version, and
//! session expiry as a typed, terminal event. `memory` is an in-process ensemble a
//! session can be opened on instead of a server, for tests and the cluster simulation.
//!
//! ZooKeeper mode (`controller::zk`) builds on this module: it opens the broker's session
//! when `zookeeper.connect` is set.

pub mod java_order;
pub mod memory;
pub mod session;
pub mod znodes;
