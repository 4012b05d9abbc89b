//! SASL on an outbound connection, before its first request: SaslHandshake v1 naming the
//! mechanism, then SaslAuthenticate v1 carrying each token, as Kafka's
//! `SaslClientAuthenticator` does toward a broker. PLAIN and SCRAM with the broker's own
//! credentials (its inter-broker listener's JAAS `username` and `password`).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{SaslAuthenticateRequest, SaslHandshakeRequest};
use kafka_protocol::protocol::{Request, StrBytes};
use tokio::io::{AsyncRead, AsyncWrite};

use super::codec;
use crate::sasl::client::{plain_message, ScramClient};
use crate::sasl::settings::{ClientCredentials, Mechanism};

/// Responses during authentication are small; anything larger is not one.
const MAX_AUTH_RESPONSE_BYTES: usize = 64 * 1024;

/// Authenticates the connection with `credentials` within `timeout`; why not otherwise
/// (the broker's error message, never the password).
pub async fn authenticate<R, W>(
    read: &mut R,
    write: &mut W,
    credentials: &ClientCredentials,
    client_id: Option<&str>,
    timeout: Duration,
) -> Result<(), String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let exchange = exchange(read, write, credentials, client_id);
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(format!("SASL authentication not done within {timeout:?}")),
    }
}

async fn exchange<R, W>(
    read: &mut R,
    write: &mut W,
    credentials: &ClientCredentials,
    client_id: Option<&str>,
) -> Result<(), String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut id = 0;
    let mechanism = credentials.mechanism.name();
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
    let answer = round_trip(read, write, &handshake, 1, &mut id, client_id).await?;
    if answer.error_code != 0 {
        return Err(format!(
            "SaslHandshake for {mechanism} answered error {} (the broker enables {:?})",
            answer.error_code,
            answer
                .mechanisms
                .iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
        ));
    }
    let user = &credentials.username;
    let password = &credentials.password.0;
    let mut authenticate = async |token: Vec<u8>| {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
        let answer = round_trip(read, write, &req, 1, &mut id, client_id).await?;
        match answer.error_code {
            0 => Ok(answer.auth_bytes),
            code => Err(format!(
                "SASL authentication as {user} failed with error {code}: {}",
                answer.error_message.as_deref().unwrap_or("")
            )),
        }
    };
    match credentials.mechanism {
        Mechanism::Plain => {
            authenticate(plain_message(user, password)).await?;
        }
        Mechanism::Scram(m) => {
            let mut client = ScramClient::new(m, user, password);
            let server_first = authenticate(client.first_message()).await?;
            let last = client.final_message(&server_first)?;
            let server_final = authenticate(last).await?;
            client.verify_server_final(&server_final)?;
        }
        Mechanism::OAuthBearer => {
            return Err("OAUTHBEARER is not offered for the broker's own connections".into())
        }
    }
    Ok(())
}

/// Sends `req` and reads its response (nothing else is in flight yet).
async fn round_trip<R, W, Q>(
    read: &mut R,
    write: &mut W,
    req: &Q,
    version: i16,
    id: &mut i32,
    client_id: Option<&str>,
) -> Result<Q::Response, String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
    Q: Request,
{
    *id += 1;
    let frame = codec::encode_request(req, version, *id, client_id).map_err(|e| e.to_string())?;
    codec::write_frame(write, &frame)
        .await
        .map_err(|e| format!("write: {e}"))?;
    let response = codec::read_frame(read, MAX_AUTH_RESPONSE_BYTES)
        .await
        .map_err(|e| format!("read: {e}"))?
        .ok_or("the broker closed the connection during SASL authentication")?;
    let (header, body) =
        codec::decode_response::<Q>(response, version).map_err(|e| e.to_string())?;
    if header.correlation_id != *id {
        return Err(format!(
            "response with correlation id {} to request {id}",
            header.correlation_id
        ));
    }
    Ok(body)
}
