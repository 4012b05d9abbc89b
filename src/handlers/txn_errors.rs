//! Errors of the transaction APIs as each request version knows them.

use kafka_protocol::error::ResponseError;

/// PRODUCER_FENCED exists for clients from `since` on; older ones are told
/// INVALID_PRODUCER_EPOCH, as Kafka answers them.
pub fn for_version(e: ResponseError, version: i16, since: i16) -> ResponseError {
    match e {
        ResponseError::ProducerFenced if version < since => ResponseError::InvalidProducerEpoch,
        e => e,
    }
}
