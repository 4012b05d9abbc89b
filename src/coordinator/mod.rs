//! Coordinators: state kept in internal topics and served by this broker for the
//! partitions of those topics it leads. `group/` owns consumer groups and committed
//! offsets (`__consumer_offsets`).

pub mod group;
pub mod partition_log;
pub mod runtime;
