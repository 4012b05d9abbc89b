//! A client's request forwarded to a KRaft cluster's active controller as Kafka 4's
//! brokers forward it (`ForwardingManager.buildEnvelopeRequest`): an Envelope holding the
//! request (header and body, as the client sent them), the client's principal in
//! `DefaultKafkaPrincipalBuilder`'s serialization (a version-prefixed
//! `DefaultPrincipalData`), and the client's address. The controller answers with the
//! response (header and body) inside its EnvelopeResponse; it authorizes the request
//! against the principal, and the Envelope itself against this broker's (CLUSTER_ACTION).
//!
//! Pure: encoding and decoding only; `backend` sends it.

use std::net::IpAddr;

use bytes::{Bytes, BytesMut};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    ApiKey, DefaultPrincipalData, EnvelopeRequest, EnvelopeResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};

use crate::controller::ControllerError;

/// The client a forwarded request came from.
#[derive(Clone, Debug)]
pub struct Origin {
    pub principal_type: String,
    pub principal_name: String,
    pub address: IpAddr,
    pub correlation_id: i32,
    pub client_id: Option<StrBytes>,
}

/// `DefaultKafkaPrincipalBuilder.serialize`: the data's version (0), then
/// `DefaultPrincipalData` at that version. skua issues no delegation tokens.
pub fn principal_bytes(principal_type: &str, name: &str) -> Bytes {
    let data = DefaultPrincipalData::default()
        .with_type(StrBytes::from_string(principal_type.to_string()))
        .with_name(StrBytes::from_string(name.to_string()))
        .with_token_authenticated(false);
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&0i16.to_be_bytes());
    data.encode(&mut buf, 0)
        .expect("principal data always encodes");
    buf.freeze()
}

/// The Envelope of `request` at `version`, from `origin`.
pub fn wrap<R: Request>(
    origin: &Origin,
    request: &R,
    version: i16,
) -> Result<EnvelopeRequest, ControllerError> {
    let key = ApiKey::try_from(R::KEY).map_err(|_| invalid("an unknown api key"))?;
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(origin.correlation_id)
        .with_client_id(origin.client_id.clone());
    let mut data = BytesMut::new();
    header
        .encode(&mut data, key.request_header_version(version))
        .and_then(|_| request.encode(&mut data, version))
        .map_err(|e| invalid(&format!("the request does not encode: {e}")))?;
    let address = match origin.address {
        IpAddr::V4(a) => Bytes::copy_from_slice(&a.octets()),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(v4) => Bytes::copy_from_slice(&v4.octets()),
            None => Bytes::copy_from_slice(&a.octets()),
        },
    };
    Ok(EnvelopeRequest::default()
        .with_request_data(data.freeze())
        .with_request_principal(Some(principal_bytes(
            &origin.principal_type,
            &origin.principal_name,
        )))
        .with_client_host_address(address))
}

/// Why the controller's answer is not the forwarded request's response.
#[derive(Debug, PartialEq)]
pub enum Unwrapped {
    /// The Envelope itself failed (Kafka answers the client UNKNOWN_SERVER_ERROR, and
    /// closes its connection on UNSUPPORTED_VERSION).
    EnvelopeError(ResponseError),
    /// NOT_CONTROLLER: sent to a controller that is no longer active; worth another try.
    NotController,
    /// The answer is not a response to the request.
    Malformed(String),
}

/// The response inside the controller's EnvelopeResponse, for a request sent at
/// `version` with `correlation_id`.
pub fn unwrap<R: Request>(
    response: EnvelopeResponse,
    version: i16,
    correlation_id: i32,
) -> Result<R::Response, Unwrapped> {
    match ResponseError::try_from_code(response.error_code) {
        None => {}
        Some(ResponseError::NotController) => return Err(Unwrapped::NotController),
        Some(e) => return Err(Unwrapped::EnvelopeError(e)),
    }
    let Some(mut data) = response.response_data else {
        return Err(Unwrapped::Malformed(
            "an EnvelopeResponse without response data".into(),
        ));
    };
    let key =
        ApiKey::try_from(R::KEY).map_err(|_| Unwrapped::Malformed("an unknown api key".into()))?;
    let header = ResponseHeader::decode(&mut data, key.response_header_version(version))
        .map_err(|e| Unwrapped::Malformed(format!("the response header: {e}")))?;
    if header.correlation_id != correlation_id {
        return Err(Unwrapped::Malformed(format!(
            "the response's correlation id {} is not the request's {correlation_id}",
            header.correlation_id
        )));
    }
    R::Response::decode(&mut data, version)
        .map_err(|e| Unwrapped::Malformed(format!("the {key:?} response v{version}: {e}")))
}

fn invalid(why: &str) -> ControllerError {
    ControllerError::new(ResponseError::UnknownServerError, why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
    use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
    use kafka_protocol::messages::{
        AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    };

    fn origin() -> Origin {
        Origin {
            principal_type: "User".into(),
            principal_name: "alice".into(),
            address: "::ffff:10.1.2.3".parse().unwrap(),
            correlation_id: 77,
            client_id: Some(StrBytes::from_static_str("adminclient-1")),
        }
    }

    /// As Kafka's `DefaultKafkaPrincipalBuilder` writes User:alice: version 0, then
    /// compact strings (length + 1) and the flag, then no tagged fields.
    #[test]
    fn the_principal_is_kafkas_serialization() {
        let bytes = principal_bytes("User", "alice");
        let mut want = vec![0, 0, 5];
        want.extend_from_slice(b"User");
        want.push(6);
        want.extend_from_slice(b"alice");
        want.extend_from_slice(&[0, 0]);
        assert_eq!(&bytes[..], &want[..]);
    }

    /// The controller reads back what the client sent: the header (its correlation and
    /// client ids) and the body at its version, the salted password untouched.
    #[test]
    fn the_envelope_carries_the_clients_request_as_sent() {
        let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
            ScramCredentialUpsertion::default()
                .with_name(StrBytes::from_static_str("bob"))
                .with_mechanism(1)
                .with_iterations(8192)
                .with_salt(Bytes::from_static(b"salt"))
                .with_salted_password(Bytes::from_static(&[9; 32])),
        ]);
        let envelope = wrap(&origin(), &request, 0).unwrap();
        assert_eq!(&envelope.client_host_address[..], &[10, 1, 2, 3]);
        assert_eq!(
            envelope.request_principal,
            Some(principal_bytes("User", "alice"))
        );
        let mut data = envelope.request_data.clone();
        let header =
            kafka_protocol::protocol::decode_request_header_from_buffer(&mut data).unwrap();
        assert_eq!(
            header.request_api_key,
            ApiKey::AlterUserScramCredentials as i16
        );
        assert_eq!((header.request_api_version, header.correlation_id), (0, 77));
        assert_eq!(header.client_id.as_deref(), Some("adminclient-1"));
        let body = AlterUserScramCredentialsRequest::decode(&mut data, 0).unwrap();
        assert_eq!(body, request);
        assert!(data.is_empty());
    }

    fn answered(response: &AlterUserScramCredentialsResponse, correlation_id: i32) -> Bytes {
        let mut data = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(correlation_id)
            .encode(&mut data, 1)
            .unwrap();
        response.encode(&mut data, 0).unwrap();
        data.freeze()
    }

    #[test]
    fn the_controllers_response_is_unwrapped_and_its_envelope_errors_told_apart() {
        let response = AlterUserScramCredentialsResponse::default().with_results(vec![
            AlterUserScramCredentialsResult::default()
                .with_user(StrBytes::from_static_str("bob"))
                .with_error_code(ResponseError::UnacceptableCredential.code()),
        ]);
        let ok = EnvelopeResponse::default().with_response_data(Some(answered(&response, 77)));
        assert_eq!(
            unwrap::<AlterUserScramCredentialsRequest>(ok.clone(), 0, 77).unwrap(),
            response
        );
        assert!(matches!(
            unwrap::<AlterUserScramCredentialsRequest>(ok, 0, 78),
            Err(Unwrapped::Malformed(_))
        ));
        let failed = |e: ResponseError| {
            unwrap::<AlterUserScramCredentialsRequest>(
                EnvelopeResponse::default().with_error_code(e.code()),
                0,
                77,
            )
        };
        assert_eq!(
            failed(ResponseError::NotController),
            Err(Unwrapped::NotController)
        );
        assert_eq!(
            failed(ResponseError::ClusterAuthorizationFailed),
            Err(Unwrapped::EnvelopeError(
                ResponseError::ClusterAuthorizationFailed
            ))
        );
        let truncated = EnvelopeResponse::default()
            .with_response_data(Some(answered(&response, 77).slice(0..7)));
        assert!(matches!(
            unwrap::<AlterUserScramCredentialsRequest>(truncated, 0, 77),
            Err(Unwrapped::Malformed(_))
        ));
    }
}
