//! The client side of PLAIN and SCRAM, for the broker's own connections to other
//! brokers' SASL listeners (and skua's tests): the messages a Kafka client sends, and the
//! checks it makes of the server's (SCRAM's nonce, iterations and server signature).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ring::pbkdf2;
use subtle::ConstantTimeEq;

use super::scram::{random_nonce, ScramMechanism, MIN_ITERATIONS};

/// PLAIN's one message: no authorization id, the user, the password.
pub fn plain_message(username: &str, password: &str) -> Vec<u8> {
    format!("\0{username}\0{password}").into_bytes()
}

/// One SCRAM exchange, client side (RFC 5802 §3, no channel binding).
pub struct ScramClient {
    mechanism: ScramMechanism,
    password: String,
    client_first_bare: String,
    nonce: String,
    /// The server signature the final message must carry, once the proof is sent.
    expected_server_signature: Option<Vec<u8>>,
}

impl ScramClient {
    pub fn new(mechanism: ScramMechanism, username: &str, password: &str) -> ScramClient {
        let nonce = random_nonce();
        let user = username.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            mechanism,
            password: password.to_string(),
            client_first_bare: format!("n={user},r={nonce}"),
            nonce,
            expected_server_signature: None,
        }
    }

    /// client-first-message.
    pub fn first_message(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// client-final-message for the server's first message; refuses a server nonce that
    /// does not extend ours, or fewer iterations than SCRAM allows.
    pub fn final_message(&mut self, server_first: &[u8]) -> Result<Vec<u8>, String> {
        let text = std::str::from_utf8(server_first).map_err(|_| "server-first is not UTF-8")?;
        let field = |prefix: &str| {
            text.split(',')
                .find_map(|f| f.strip_prefix(prefix))
                .ok_or_else(|| format!("server-first has no {prefix} field"))
        };
        let nonce = field("r=")?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("the server's nonce does not extend the client's".into());
        }
        let salt = B64
            .decode(field("s=")?)
            .map_err(|_| "the server's salt is not base64")?;
        let iterations: u32 = field("i=")?
            .parse()
            .map_err(|_| "the server's iterations are not a number")?;
        if iterations < MIN_ITERATIONS {
            return Err(format!(
                "the server asks for {iterations} iterations, fewer than {MIN_ITERATIONS}"
            ));
        }
        let m = self.mechanism;
        let mut salted = vec![0u8; m.hash_len()];
        pbkdf2::derive(
            m.pbkdf2(),
            std::num::NonZeroU32::new(iterations).unwrap_or(std::num::NonZeroU32::MIN),
            &salt,
            self.password.as_bytes(),
            &mut salted,
        );
        let client_key = m.mac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare);
        let signature = m.mac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = m.mac(&salted, b"Server Key");
        self.expected_server_signature = Some(m.mac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Checks the server-final-message: the server proves it knows the credential.
    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let text = std::str::from_utf8(server_final).map_err(|_| "server-final is not UTF-8")?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(format!("the server refused the exchange: {e}"));
        }
        let signature = text
            .strip_prefix("v=")
            .and_then(|v| B64.decode(v).ok())
            .ok_or("server-final has no v= signature")?;
        let expected = self
            .expected_server_signature
            .as_ref()
            .ok_or("server-final before the client's proof")?;
        match bool::from(signature.ct_eq(expected)) {
            true => Ok(()),
            false => Err("the server's signature is wrong".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::scram::{ScramCredential, ScramServer};
    use crate::sasl::Step;

    #[test]
    fn the_client_authenticates_against_the_server_and_checks_it() {
        for m in [ScramMechanism::Sha256, ScramMechanism::Sha512] {
            let stored = ScramCredential::new(m, "pw,=", b"salty", 4096);
            let lookup = |u: &str| (u == "a,b=c").then(|| stored.clone());
            let mut client = ScramClient::new(m, "a,b=c", "pw,=");
            let mut server = ScramServer::new(m);
            let Ok(Step::Challenge(first)) = server.step(&client.first_message(), &lookup) else {
                panic!("no server-first");
            };
            let last = client.final_message(&first).unwrap();
            let Ok(Step::Done {
                principal,
                final_message,
            }) = server.step(&last, &lookup)
            else {
                panic!("not authenticated");
            };
            assert_eq!(principal, "a,b=c");
            client.verify_server_final(&final_message).unwrap();
            assert!(client.verify_server_final(b"v=AAAA").is_err());
        }
    }
}
