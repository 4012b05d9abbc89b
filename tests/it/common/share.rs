//! Reading share-group answers in tests (ShareFetch, ShareAcknowledge), shared by the
//! share scenarios.

use kafka_protocol::messages::{ShareAcknowledgeResponse, ShareFetchResponse};

/// The one partition's acknowledgement error of a ShareAcknowledge response.
pub fn ack_error(r: &ShareAcknowledgeResponse) -> i16 {
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    r.responses[0].partitions[0].error_code
}

/// The acquired ranges (first, last, delivery count) of a ShareFetch response.
pub fn acquired(r: &ShareFetchResponse) -> Vec<(i64, i64, i16)> {
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .flat_map(|p| {
            assert_eq!(p.error_code, 0, "{:?}", p.error_message);
            p.acquired_records
                .iter()
                .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        })
        .collect()
}
