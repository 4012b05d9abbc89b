//! SASL/OAUTHBEARER (RFC 7628) with Kafka's unsecured JWS validator
//! (`OAuthBearerUnsecuredValidatorCallbackHandler`), the one Kafka's docs use for tests:
//! the token is an unsigned JWS (`alg: none`, `header.claims.`); its principal claim
//! (`unsecuredValidatorPrincipalClaimName`, default `sub`) names the principal, `exp` must
//! not have passed and `iat` must not be in the future (within
//! `unsecuredValidatorAllowableClockSkewMs`), and its scope claim
//! (`unsecuredValidatorScopeClaimName`, default `scope`) must hold every scope of
//! `unsecuredValidatorRequiredScope`. A refused token gets Kafka's error challenge
//! (`{"status":"invalid_token"}`), the client answers `\x01`, and the exchange fails with
//! that challenge as the message.
//!
//! With `sasl.server.callback.handler.class` set to Kafka's
//! `OAuthBearerValidatorCallbackHandler`, tokens are signed JWTs checked against the
//! identity provider's JWKS instead (`jwks`), refused with the same challenge.

use std::collections::BTreeMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;

use super::jwks::JwksValidator;
use super::{SaslFailure, Step};

/// How a listener validates OAUTHBEARER tokens: Kafka's unsecured validator (the default
/// server callback handler) or its secured one against a JWKS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenValidator {
    Unsecured(UnsecuredValidatorOptions),
    Jwks(std::sync::Arc<JwksValidator>),
}

/// The longest client message read (Kafka bounds it by `sasl.server.max.receive.size`).
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// The JAAS options of the unsecured validator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsecuredValidatorOptions {
    pub principal_claim: String,
    pub scope_claim: String,
    pub required_scope: Vec<String>,
    pub allowable_clock_skew_ms: i64,
}

impl UnsecuredValidatorOptions {
    /// From the `OAuthBearerLoginModule`'s options.
    pub fn from_jaas_options(options: &BTreeMap<String, String>) -> Result<Self, String> {
        let get = |k: &str, default: &str| {
            options
                .get(k)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| default.to_string())
        };
        let skew = get("unsecuredValidatorAllowableClockSkewMs", "0");
        let allowable_clock_skew_ms =
            skew.parse::<i64>()
                .ok()
                .filter(|v| *v >= 0)
                .ok_or_else(|| {
                    format!("Invalid value for unsecuredValidatorAllowableClockSkewMs: {skew}")
                })?;
        Ok(UnsecuredValidatorOptions {
            principal_claim: get("unsecuredValidatorPrincipalClaimName", "sub"),
            scope_claim: get("unsecuredValidatorScopeClaimName", "scope"),
            required_scope: get("unsecuredValidatorRequiredScope", "")
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            allowable_clock_skew_ms,
        })
    }
}

enum State {
    Initial,
    /// A refused token's challenge was sent; the client's `\x01` ends the exchange.
    ErrorSent(String),
    Done,
}

pub struct OAuthBearerServer {
    validator: TokenValidator,
    state: State,
    /// When the token expires (ms since the epoch), once authenticated.
    expires_at_ms: Option<i64>,
}

/// Why a token is refused: Kafka's status and, for a missing scope, the scope required.
struct Refusal {
    status: &'static str,
    scope: Option<String>,
    detail: String,
}

impl Refusal {
    fn invalid(detail: impl Into<String>) -> Refusal {
        Refusal {
            status: "invalid_token",
            scope: None,
            detail: detail.into(),
        }
    }

    fn challenge(&self) -> String {
        let mut json = serde_json::json!({ "status": self.status });
        if let Some(scope) = &self.scope {
            json["scope"] = serde_json::Value::String(scope.clone());
        }
        json.to_string()
    }
}

impl OAuthBearerServer {
    pub fn new(validator: TokenValidator) -> Self {
        OAuthBearerServer {
            validator,
            state: State::Initial,
            expires_at_ms: None,
        }
    }

    /// When the session's token expires, once authenticated (KIP-368's session lifetime).
    pub fn expires_at_ms(&self) -> Option<i64> {
        self.expires_at_ms
    }

    /// Takes the client's next message at `now_ms`.
    pub fn step(&mut self, message: &[u8], now_ms: i64) -> Result<Step, SaslFailure> {
        let state = std::mem::replace(&mut self.state, State::Done);
        match state {
            State::Initial => {}
            State::ErrorSent(challenge) => {
                return Err(SaslFailure::new(
                    challenge,
                    "the client acknowledged the error challenge",
                ))
            }
            State::Done => {
                return Err(SaslFailure::new(
                    "Authentication failed: unexpected SASL message",
                    "an OAUTHBEARER message after the exchange ended",
                ))
            }
        }
        let malformed = |why: &str| {
            SaslFailure::new(
                "Authentication failed: Invalid OAUTHBEARER client first message",
                why.to_string(),
            )
        };
        if message.len() > MAX_MESSAGE_BYTES {
            return Err(malformed("an OAUTHBEARER message over 64 KiB"));
        }
        let text = std::str::from_utf8(message).map_err(|_| malformed("not UTF-8"))?;
        let (authzid, token) = parse_initial_response(text).map_err(|why| malformed(&why))?;
        match self.validate(&token, now_ms) {
            Ok((principal, expires_at_ms)) => {
                if authzid.is_some_and(|a| a != principal) {
                    return Err(SaslFailure::new(
                        "Authentication failed: Client requested an authorization id that is different from the token's principal name",
                        format!("{principal:?} asked for another authorization id"),
                    ));
                }
                self.expires_at_ms = Some(expires_at_ms);
                Ok(Step::Done {
                    principal,
                    final_message: Vec::new(),
                })
            }
            Err(refusal) => {
                tracing::debug!(detail = %refusal.detail, "OAUTHBEARER token refused");
                let challenge = refusal.challenge();
                self.state = State::ErrorSent(challenge.clone());
                Ok(Step::Challenge(challenge.into_bytes()))
            }
        }
    }

    /// (principal, expiry in ms) or why not.
    fn validate(&self, token: &str, now_ms: i64) -> Result<(String, i64), Refusal> {
        match &self.validator {
            TokenValidator::Unsecured(options) => validate_unsecured(options, token, now_ms),
            TokenValidator::Jwks(jwks) => jwks
                .validate(token, now_ms)
                .map(|t| (t.principal, t.expires_at_ms))
                .map_err(Refusal::invalid),
        }
    }
}

/// The unsecured validator: (principal, expiry in ms) or why not.
fn validate_unsecured(
    o: &UnsecuredValidatorOptions,
    token: &str,
    now_ms: i64,
) -> Result<(String, i64), Refusal> {
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 || !parts[2].is_empty() {
        return Err(Refusal::invalid(
                "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values and the third must be empty",
            ));
    }
    let object =
        |part: &str, what: &str| -> Result<serde_json::Map<String, serde_json::Value>, Refusal> {
            let bytes = B64URL
                .decode(part.trim_end_matches('='))
                .map_err(|_| Refusal::invalid(format!("the JWS {what} is not Base64URL")))?;
            match serde_json::from_slice(&bytes) {
                Ok(serde_json::Value::Object(map)) => Ok(map),
                _ => Err(Refusal::invalid(format!(
                    "the JWS {what} is not a JSON object"
                ))),
            }
        };
    let header = object(parts[0], "header")?;
    if header.get("alg").and_then(|a| a.as_str()) != Some("none") {
        return Err(Refusal::invalid("an unsecured JWS must have alg \"none\""));
    }
    let claims = object(parts[1], "claims")?;
    let principal = match claims.get(&o.principal_claim) {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => s.clone(),
        _ => {
            return Err(Refusal::invalid(format!(
                "No principal name in JWT claim: {}",
                o.principal_claim
            )))
        }
    };
    let seconds_ms = |name: &str| -> Result<Option<i64>, Refusal> {
        match claims.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|s| s.is_finite())
                .map(|s| Some((s * 1000.0) as i64))
                .ok_or_else(|| Refusal::invalid(format!("the {name} claim is not a number"))),
        }
    };
    let exp = seconds_ms("exp")?.ok_or_else(|| Refusal::invalid("Required claim missing: exp"))?;
    let iat = seconds_ms("iat")?;
    let skew = o.allowable_clock_skew_ms;
    if let Some(iat) = iat {
        if iat > now_ms.saturating_add(skew) {
            return Err(Refusal::invalid(format!(
                "The Issued At value ({iat} ms) must not be in the future"
            )));
        }
        if exp <= iat {
            return Err(Refusal::invalid(format!(
                "The Expiration Time time ({exp} ms) must be after the Issued At time ({iat} ms)"
            )));
        }
    }
    if now_ms >= exp.saturating_add(skew) {
        return Err(Refusal::invalid(format!(
            "The indicated time ({now_ms} ms) is beyond the Expiration Time ({exp} ms)"
        )));
    }
    if !o.required_scope.is_empty() {
        let scope: Vec<String> = match claims.get(&o.scope_claim) {
            Some(serde_json::Value::String(s)) => s
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
            Some(serde_json::Value::Array(a)) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        if let Some(missing) = o.required_scope.iter().find(|s| !scope.contains(s)) {
            return Err(Refusal {
                status: "insufficient_scope",
                scope: Some(o.required_scope.join(" ")),
                detail: format!("the token's scope lacks {missing:?}"),
            });
        }
    }
    Ok((principal, exp))
}

/// RFC 7628's client initial response: `n,[a=authzid],` then `\x01`-separated
/// `key=value` pairs with `auth=Bearer <token>`, ending `\x01\x01`.
fn parse_initial_response(text: &str) -> Result<(Option<String>, String), String> {
    let rest = text
        .strip_prefix("n,")
        .ok_or("the GS2 header must start with n,")?;
    let (authzid, rest) = rest.split_once(',').ok_or("no GS2 header end")?;
    let authzid = match authzid {
        "" => None,
        a => Some(a.strip_prefix("a=").ok_or("malformed authzid")?.to_string()),
    };
    let pairs = rest
        .strip_prefix('\u{1}')
        .and_then(|r| r.strip_suffix("\u{1}\u{1}"))
        .ok_or("the key-value pairs must be framed by \\x01 and end with \\x01\\x01")?;
    let mut token = None;
    for pair in pairs.split('\u{1}') {
        let (k, v) = pair.split_once('=').ok_or("a key-value pair without '='")?;
        if k.is_empty() || !k.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err("an extension name that is not letters".into());
        }
        if k == "auth" {
            let (scheme, t) = v.split_once(' ').ok_or("auth is not 'Bearer <token>'")?;
            if !scheme.eq_ignore_ascii_case("bearer") {
                return Err("Invalid scheme in OAuth token".into());
            }
            let t = t.trim_start_matches(' ');
            if t.is_empty()
                || !t
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            {
                return Err("the token has characters outside Base64URL and '.'".into());
            }
            token = Some(t.to_string());
        }
    }
    Ok((authzid, token.ok_or("no auth=Bearer token")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_MS: i64 = 1_800_000_000_000;

    fn jws(claims: serde_json::Value) -> String {
        format!(
            "{}.{}.",
            B64URL.encode(br#"{"alg":"none"}"#),
            B64URL.encode(claims.to_string())
        )
    }

    fn message(token: &str) -> Vec<u8> {
        format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}").into_bytes()
    }

    fn options(pairs: &[(&str, &str)]) -> UnsecuredValidatorOptions {
        let map = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        UnsecuredValidatorOptions::from_jaas_options(&map).unwrap()
    }

    fn unsecured(pairs: &[(&str, &str)]) -> TokenValidator {
        TokenValidator::Unsecured(options(pairs))
    }

    fn now_s() -> f64 {
        NOW_MS as f64 / 1000.0
    }

    #[test]
    fn a_valid_unsecured_token_names_its_principal() {
        let mut s = OAuthBearerServer::new(unsecured(&[]));
        let token = jws(
            serde_json::json!({"sub": "alice", "iat": now_s() - 10.0, "exp": now_s() + 3600.0}),
        );
        let done = s.step(&message(&token), NOW_MS).unwrap();
        assert_eq!(
            done,
            Step::Done {
                principal: "alice".into(),
                final_message: vec![]
            }
        );
        assert_eq!(s.expires_at_ms(), Some(NOW_MS + 3_600_000));
        // Another principal claim, with an extension beside the token.
        let mut s = OAuthBearerServer::new(unsecured(&[(
            "unsecuredValidatorPrincipalClaimName",
            "client_id",
        )]));
        let token = jws(serde_json::json!({"client_id": "svc", "exp": now_s() + 60.0}));
        let msg = format!("n,a=svc,\u{1}traceId=abc\u{1}auth=Bearer {token}\u{1}\u{1}");
        assert!(
            matches!(s.step(msg.as_bytes(), NOW_MS), Ok(Step::Done { principal, .. }) if principal == "svc")
        );
    }

    fn refused(opts: UnsecuredValidatorOptions, claims: serde_json::Value) -> String {
        let mut s = OAuthBearerServer::new(TokenValidator::Unsecured(opts));
        let Step::Challenge(challenge) = s.step(&message(&jws(claims)), NOW_MS).unwrap() else {
            panic!("accepted")
        };
        let challenge = String::from_utf8(challenge).unwrap();
        let err = s.step(b"\x01", NOW_MS).unwrap_err();
        assert_eq!(err.client, challenge);
        challenge
    }

    #[test]
    fn refused_tokens_get_kafkas_error_challenge() {
        let invalid = r#"{"status":"invalid_token"}"#;
        assert_eq!(
            refused(
                options(&[]),
                serde_json::json!({"sub": "a", "exp": now_s() - 1.0})
            ),
            invalid
        );
        assert_eq!(
            refused(options(&[]), serde_json::json!({"sub": "a"})),
            invalid
        );
        assert_eq!(
            refused(options(&[]), serde_json::json!({"exp": now_s() + 60.0})),
            invalid
        );
        assert_eq!(
            refused(
                options(&[]),
                serde_json::json!({"sub": "a", "iat": now_s() + 60.0, "exp": now_s() + 120.0})
            ),
            invalid
        );
        // Within the allowed skew, an expired token still passes.
        let mut s = OAuthBearerServer::new(unsecured(&[(
            "unsecuredValidatorAllowableClockSkewMs",
            "5000",
        )]));
        let token = jws(serde_json::json!({"sub": "a", "exp": now_s() - 1.0}));
        assert!(matches!(
            s.step(&message(&token), NOW_MS),
            Ok(Step::Done { .. })
        ));
        let scoped = options(&[("unsecuredValidatorRequiredScope", "write read")]);
        assert_eq!(
            refused(
                scoped.clone(),
                serde_json::json!({"sub": "a", "exp": now_s() + 60.0, "scope": "read"})
            ),
            r#"{"scope":"write read","status":"insufficient_scope"}"#
        );
        let mut s = OAuthBearerServer::new(TokenValidator::Unsecured(scoped));
        let token = jws(
            serde_json::json!({"sub": "a", "exp": now_s() + 60.0, "scope": ["read", "write", "x"]}),
        );
        assert!(matches!(
            s.step(&message(&token), NOW_MS),
            Ok(Step::Done { .. })
        ));
    }

    #[test]
    fn malformed_messages_fail() {
        let good = jws(serde_json::json!({"sub": "a", "exp": now_s() + 60.0}));
        let signed = format!("{good}c2ln");
        for bad in [
            b"y,,\x01auth=Bearer x\x01\x01".to_vec(),
            b"n,,auth=Bearer x\x01\x01".to_vec(),
            b"n,,\x01auth=Basic x\x01\x01".to_vec(),
            b"n,,\x01auth=Bearer a b\x01\x01".to_vec(),
            b"n,,\x01bad key=1\x01auth=Bearer x\x01\x01".to_vec(),
            b"n,,\x01\x01".to_vec(),
            vec![0xff; 10],
            vec![b'n'; MAX_MESSAGE_BYTES + 1],
        ] {
            let mut s = OAuthBearerServer::new(unsecured(&[]));
            assert!(
                s.step(&bad, NOW_MS).is_err(),
                "{:?}",
                String::from_utf8_lossy(&bad)
            );
        }
        // A token with a signature is not an unsecured JWS; nor is a non-JSON payload.
        assert!(matches!(
            OAuthBearerServer::new(unsecured(&[])).step(&message(&signed), NOW_MS),
            Ok(Step::Challenge(_))
        ));
        assert!(matches!(
            OAuthBearerServer::new(unsecured(&[])).step(&message("e30.bm90anNvbg."), NOW_MS),
            Ok(Step::Challenge(_))
        ));
        let mut o = BTreeMap::new();
        o.insert(
            "unsecuredValidatorAllowableClockSkewMs".to_string(),
            "-1".to_string(),
        );
        assert!(UnsecuredValidatorOptions::from_jaas_options(&o).is_err());
    }
}
