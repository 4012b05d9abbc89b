//! SASL/PLAIN (RFC 4616) as Kafka's `PlainSaslServer` with its default callback handler:
//! one client message `[authzid] NUL authcid NUL password`, checked against the JAAS
//! option `user_<authcid>` of the listener's `PlainLoginModule`. The password comparison
//! takes the same time wherever the strings differ, and the client is told only
//! "Invalid username or password", never which was wrong.

use std::collections::BTreeMap;

use subtle::ConstantTimeEq;

use super::jaas::{self, JaasError};
use super::{SaslFailure, Step};

pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

/// The users a listener's PLAIN accepts: `user_<name>="<password>"` options.
#[derive(Clone, PartialEq, Eq)]
pub struct PlainUsers {
    users: BTreeMap<String, String>,
}

impl std::fmt::Debug for PlainUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PlainUsers({} users)", self.users.len())
    }
}

impl PlainUsers {
    /// From a broker's `sasl.jaas.config` for PLAIN.
    pub fn from_jaas(text: &str) -> Result<PlainUsers, JaasError> {
        let module = jaas::parse_single(text, PLAIN_LOGIN_MODULE)?;
        let users = module
            .options
            .into_iter()
            .filter_map(|(k, v)| k.strip_prefix("user_").map(|u| (u.to_string(), v)))
            .collect();
        Ok(PlainUsers { users })
    }

    /// Whether `password` is `user`'s. Compares in constant time against a password of
    /// the same length even when the user does not exist, so timing tells nothing.
    fn check(&self, user: &str, password: &str) -> bool {
        let (known, expected) = match self.users.get(user) {
            Some(p) => (true, p.as_bytes()),
            None => (false, password.as_bytes()),
        };
        let same_length = expected.len() == password.len();
        let equal: bool = if same_length {
            expected.ct_eq(password.as_bytes()).into()
        } else {
            // Spend the comparison anyway.
            let _ = expected.ct_eq(expected);
            false
        };
        known & equal
    }
}

/// The failure every wrong credential gets, whatever part of it was wrong.
fn invalid(detail: impl Into<String>) -> SaslFailure {
    SaslFailure::new(
        "Authentication failed: Invalid username or password",
        detail,
    )
}

/// Authenticates one PLAIN client message.
pub fn authenticate(users: &PlainUsers, message: &[u8]) -> Result<Step, SaslFailure> {
    let text = std::str::from_utf8(message)
        .map_err(|_| SaslFailure::new("Invalid SASL/PLAIN response", "not UTF-8"))?;
    let tokens: Vec<&str> = text.split('\u{0}').collect();
    if tokens.len() != 3 {
        return Err(SaslFailure::new(
            format!(
                "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
                tokens.len()
            ),
            "malformed PLAIN message",
        ));
    }
    let (authzid, username, password) = (tokens[0], tokens[1], tokens[2]);
    if username.is_empty() {
        return Err(SaslFailure::new(
            "Authentication failed: username not specified",
            "empty username",
        ));
    }
    if password.is_empty() {
        return Err(SaslFailure::new(
            "Authentication failed: password not specified",
            "empty password",
        ));
    }
    if !users.check(username, password) {
        return Err(invalid(format!(
            "PLAIN authentication of {username:?} failed"
        )));
    }
    if !authzid.is_empty() && authzid != username {
        return Err(SaslFailure::new(
            "Authentication failed: Client requested an authorization id that is different from username",
            format!("{username:?} asked for authorization id {authzid:?}"),
        ));
    }
    Ok(Step::Done {
        principal: username.to_string(),
        final_message: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users() -> PlainUsers {
        PlainUsers::from_jaas(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required
               username="admin" password="admin-secret"
               user_admin="admin-secret" user_alice="alice-secret";"#,
        )
        .unwrap()
    }

    #[test]
    fn a_configured_user_authenticates() {
        let done = authenticate(&users(), b"\0alice\0alice-secret").unwrap();
        assert_eq!(
            done,
            Step::Done {
                principal: "alice".into(),
                final_message: vec![]
            }
        );
        assert!(authenticate(&users(), b"alice\0alice\0alice-secret").is_ok());
    }

    #[test]
    fn wrong_credentials_never_say_which_part_was_wrong() {
        let u = users();
        let wrong_password = authenticate(&u, b"\0alice\0nope").unwrap_err();
        let no_such_user = authenticate(&u, b"\0mallory\0alice-secret").unwrap_err();
        let other_users_password = authenticate(&u, b"\0alice\0admin-secret").unwrap_err();
        for e in [&wrong_password, &no_such_user, &other_users_password] {
            assert_eq!(
                e.client,
                "Authentication failed: Invalid username or password"
            );
            assert!(!e.client.contains("alice") && !e.detail.contains("secret"));
        }
        // The broker's own `username`/`password` options are not a user.
        assert!(authenticate(&u, b"\0username\0admin").is_err());
    }

    #[test]
    fn malformed_messages_are_refused() {
        let u = users();
        assert!(authenticate(&u, b"alice\0alice-secret")
            .unwrap_err()
            .client
            .contains("expected 3 tokens, got 2"));
        assert!(authenticate(&u, b"\0\0pw")
            .unwrap_err()
            .client
            .contains("username not specified"));
        assert!(authenticate(&u, b"\0alice\0")
            .unwrap_err()
            .client
            .contains("password not specified"));
        assert!(authenticate(&u, b"bob\0alice\0alice-secret")
            .unwrap_err()
            .client
            .contains("authorization id"));
        assert!(authenticate(&u, &[0, 0xff, 0, 0x61]).is_err());
    }

    #[test]
    fn brute_force_never_authenticates() {
        let u = users();
        let mut guesses = 0;
        for len in 0..=13 {
            for fill in [b'a', b'z', b'0', b'-'] {
                let mut guess = b"\0alice\0".to_vec();
                guess.extend(std::iter::repeat_n(fill, len));
                assert!(authenticate(&u, &guess).is_err());
                guesses += 1;
            }
        }
        for prefix in 1.."alice-secret".len() {
            let mut guess = b"\0alice\0".to_vec();
            guess.extend_from_slice(&b"alice-secret"[..prefix]);
            assert!(authenticate(&u, &guess).is_err());
            guesses += 1;
        }
        assert!(guesses > 60);
    }
}
