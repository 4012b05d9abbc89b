//! The partitions this broker hosts: their role, high watermark and long-poll wake-ups.

pub mod manager;
pub mod partition;

pub use manager::ReplicaManager;
pub use partition::Partition;
