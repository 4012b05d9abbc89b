//! The one error handlers answer with: Kafka's error and a message (Kafka's `ApiError`).
//!
//! Each layer keeps its own typed error: `LogError` (storage), `ControllerError`
//! (metadata changes), and the coordinators' and replica layer's `ResponseError`s. They
//! become an `ApiError` through `From`, and the storage errors' Kafka codes are decided in
//! one place, `LogError::response_error`; nothing else turns an error into a number.

use kafka_protocol::error::ResponseError;

use crate::controller::ControllerError;
use crate::log::LogError;

/// A Kafka error with the message that goes with it in responses that carry one, and in
/// the broker's log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{error:?}: {}", self.message())]
pub struct ApiError {
    pub error: ResponseError,
    /// Why, when there is more to say than the error's own description.
    pub message: Option<String>,
}

impl ApiError {
    pub fn new(error: ResponseError, message: impl Into<String>) -> Self {
        ApiError {
            error,
            message: Some(message.into()),
        }
    }

    pub fn code(&self) -> i16 {
        self.error.code()
    }

    /// The message, or the error's name when there is none (as Kafka's
    /// `messageWithFallback` falls back to the error's own text).
    pub fn message(&self) -> String {
        self.message
            .clone()
            .unwrap_or_else(|| self.error.to_string())
    }
}

impl From<ResponseError> for ApiError {
    fn from(error: ResponseError) -> Self {
        ApiError {
            error,
            message: None,
        }
    }
}

impl From<LogError> for ApiError {
    fn from(e: LogError) -> Self {
        ApiError::from(&e)
    }
}

impl From<&LogError> for ApiError {
    fn from(e: &LogError) -> Self {
        ApiError::new(e.response_error(), e.to_string())
    }
}

impl From<ControllerError> for ApiError {
    fn from(e: ControllerError) -> Self {
        ApiError::new(e.error, e.message)
    }
}

impl From<ApiError> for ControllerError {
    fn from(e: ApiError) -> Self {
        let message = e.message();
        ControllerError::new(e.error, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_errors_carry_their_code_and_their_text() {
        let e = ApiError::from(LogError::OffsetOutOfRange {
            offset: 9,
            log_start: 0,
            log_end: 3,
        });
        assert_eq!(e.error, ResponseError::OffsetOutOfRange);
        assert_eq!(e.code(), 1);
        assert_eq!(e.message(), "offset 9 is out of range [0, 3]");
        let io = ApiError::from(LogError::KafkaStorage(std::io::Error::other("disk gone")));
        assert_eq!((io.code(), io.message()), (56, "disk gone".to_string()));
    }

    #[test]
    fn a_bare_error_falls_back_to_its_name() {
        let e = ApiError::from(ResponseError::NotCoordinator);
        assert_eq!(e.message, None);
        assert_eq!(e.message(), "NotCoordinator");
        let round = ControllerError::from(ApiError::from(ControllerError::unknown_topic("t")));
        assert_eq!(round.error, ResponseError::UnknownTopicOrPartition);
        assert_eq!(round.message, "Topic t does not exist");
    }
}
