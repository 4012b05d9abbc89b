//! What a share-partition operation refuses, and the Kafka error each becomes.

use kafka_protocol::error::ResponseError;

use crate::error::ApiError;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShareError {
    /// Records not acquired by the member, already changing, or not in the window
    /// (Kafka's `InvalidRecordStateException`).
    #[error("invalid record state: {0}")]
    InvalidRecordState(&'static str),
    /// A malformed acknowledgement (Kafka's `InvalidRequestException`).
    #[error("invalid request: {0}")]
    InvalidRequest(&'static str),
    /// The persisted state cannot be a share-partition's (Kafka's share-partition then
    /// fails to load).
    #[error("invalid persisted share-partition state: {0}")]
    InvalidPersistedState(String),
    /// `share.auto.offset.reset` `by_duration` found no record recent enough.
    #[error("offset for timestamp {0} not found")]
    OffsetNotAvailable(i64),
}

impl ShareError {
    pub fn response_error(&self) -> ResponseError {
        match self {
            ShareError::InvalidRecordState(_) => ResponseError::InvalidRecordState,
            ShareError::InvalidRequest(_) => ResponseError::InvalidRequest,
            ShareError::InvalidPersistedState(_) => ResponseError::UnknownServerError,
            ShareError::OffsetNotAvailable(_) => ResponseError::OffsetNotAvailable,
        }
    }
}

impl From<ShareError> for ApiError {
    fn from(e: ShareError) -> Self {
        ApiError::new(e.response_error(), e.to_string())
    }
}
