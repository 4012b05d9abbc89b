//! Authorization. skua has no authorizer yet, so every operation is allowed; what a
//! client is told it may do is already Kafka's answer for that case.

pub mod operations;
