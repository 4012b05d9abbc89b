//! OAUTHBEARER's secured validator, as Kafka's `OAuthBearerValidatorCallbackHandler`
//! (`ValidatorAccessTokenValidator` over jose4j) checks a client's token: a signed JWT
//! whose key is in the identity provider's JWKS (`sasl.oauthbearer.jwks.endpoint.url`: a
//! `file:` URL, or an `https:`/`http:` endpoint kept fresh by `jwks_endpoint`).
//!
//! The checks, in jose4j's order: three non-empty dot-separated parts; a JOSE header whose
//! `alg` is an asymmetric signature algorithm (RS256/384/512, PS256/384/512, ES256/384,
//! EdDSA; `none` and the HMAC ones are refused: a JWKS is public, a secret in it is no
//! secret); a JWKS key that fits the header (its `kid` if the header names one, the key
//! type and curve the algorithm needs, `use` absent or `sig`, `alg` absent or the same)
//! and verifies the signature; then the claims: `exp` and `iat` required, `exp` not past
//! and `nbf` (if any) reached, both within `sasl.oauthbearer.clock.skew.seconds`; `exp`
//! not before `iat`; `iss` equal to `sasl.oauthbearer.expected.issuer` when that is set;
//! `aud` holding one of `sasl.oauthbearer.expected.audience` when that is set and, as
//! jose4j's default, absent when it is not; the scope claim
//! (`sasl.oauthbearer.scope.claim.name`, a string taken whole or an array of strings)
//! without empty scopes; the subject claim (`sasl.oauthbearer.sub.claim.name`) a
//! non-blank string, which is the principal's name (trimmed).
//!
//! A JWKS file is read at startup (a startup error if it cannot be) and again when its
//! modification time changes (looked at most once a second), so keys rotate without a
//! restart; a rewrite that does not parse keeps the keys in force, with a warning.
//! Kafka's failure challenge is the same for every reason (`{"status":"invalid_token"}`);
//! the reason goes to the broker's log only.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use base64::Engine;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use parking_lot::Mutex;

pub use super::jwks_endpoint::EndpointOptions;
use super::jwks_endpoint::RefreshingJwks;

/// Kafka's secured validator, by its current and its pre-3.4 class name.
pub const VALIDATOR_CALLBACK_HANDLERS: &[&str] = &[
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
];

/// The largest JWKS read: a provider publishes a handful of keys.
pub(super) const MAX_JWKS_BYTES: u64 = 1024 * 1024;
/// How often the JWKS file's modification time is looked at.
const RELOAD_CHECK: Duration = Duration::from_secs(1);

/// Where `sasl.oauthbearer.jwks.endpoint.url` points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JwksSource {
    /// The file a `file:` URL names.
    File(PathBuf),
    /// An `https:` or `http:` endpoint.
    Endpoint(EndpointOptions),
}

/// The `sasl.oauthbearer.*` keys the validator reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JwksOptions {
    pub source: JwksSource,
    /// `sasl.oauthbearer.expected.audience` (empty: a token must carry no `aud`).
    pub expected_audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`.
    pub expected_issuer: Option<String>,
    /// `sasl.oauthbearer.scope.claim.name` (`scope`).
    pub scope_claim: String,
    /// `sasl.oauthbearer.sub.claim.name` (`sub`).
    pub sub_claim: String,
    /// `sasl.oauthbearer.clock.skew.seconds` (30), in ms.
    pub clock_skew_ms: i64,
}

/// The file a `file:` URL names (`file:/p`, `file:///p`, `file://localhost/p`), with
/// `%XX` escapes decoded.
pub fn file_url_path(url: &str) -> Result<PathBuf, String> {
    let rest = url
        .strip_prefix("file:")
        .ok_or_else(|| format!("{url}: a JWKS is read from a file:, https: or http: URL"))?;
    let path = match rest.strip_prefix("//") {
        Some(authority_and_path) => {
            let slash = authority_and_path
                .find('/')
                .unwrap_or(authority_and_path.len());
            let (host, path) = authority_and_path.split_at(slash);
            if !(host.is_empty() || host.eq_ignore_ascii_case("localhost")) {
                return Err(format!("{url}: a file: URL names no other host"));
            }
            path
        }
        None => rest,
    };
    if !path.starts_with('/') {
        return Err(format!("{url}: a file: URL's path must be absolute"));
    }
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("{url}: a malformed %-escape"))?;
            decoded.push(hex);
            i += 3;
        } else {
            decoded.push(bytes[i]);
            i += 1;
        }
    }
    use std::os::unix::ffi::OsStringExt;
    Ok(PathBuf::from(std::ffi::OsString::from_vec(decoded)))
}

/// One JWKS key usable for signatures.
pub(super) struct VerificationKey {
    pub(super) kid: Option<String>,
    /// The key's own `alg`, if it names one.
    alg: Option<KeyAlgorithm>,
    kind: KeyKind,
    key: DecodingKey,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum KeyKind {
    Rsa,
    P256,
    P384,
    Ed25519,
}

impl KeyKind {
    /// The kind of key `alg` verifies with; `None` for what is refused.
    fn for_algorithm(alg: Algorithm) -> Option<KeyKind> {
        match alg {
            Algorithm::RS256
            | Algorithm::RS384
            | Algorithm::RS512
            | Algorithm::PS256
            | Algorithm::PS384
            | Algorithm::PS512 => Some(KeyKind::Rsa),
            Algorithm::ES256 => Some(KeyKind::P256),
            Algorithm::ES384 => Some(KeyKind::P384),
            Algorithm::EdDSA => Some(KeyKind::Ed25519),
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => None,
        }
    }
}

/// The signature keys of a JWKS document; keys of other kinds (encryption, symmetric,
/// P-521, unknown types) are skipped, as a key resolver would never pick them.
pub(super) fn parse_jwks(text: &str) -> Result<Vec<VerificationKey>, String> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("the JWKS is not JSON: {e}"))?;
    let keys = doc
        .get("keys")
        .and_then(|k| k.as_array())
        .ok_or("the JWKS has no \"keys\" array")?;
    let mut usable = Vec::new();
    for value in keys {
        let Ok(jwk) = serde_json::from_value::<Jwk>(value.clone()) else {
            continue;
        };
        if matches!(&jwk.common.public_key_use, Some(u) if *u != PublicKeyUse::Signature) {
            continue;
        }
        let kind = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => KeyKind::Rsa,
            AlgorithmParameters::EllipticCurve(p) => match p.curve {
                EllipticCurve::P256 => KeyKind::P256,
                EllipticCurve::P384 => KeyKind::P384,
                _ => continue,
            },
            AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
                KeyKind::Ed25519
            }
            _ => continue,
        };
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        usable.push(VerificationKey {
            kid: jwk.common.key_id.clone(),
            alg: jwk.common.key_algorithm,
            kind,
            key,
        });
    }
    Ok(usable)
}

fn read_jwks(path: &Path) -> Result<(Vec<VerificationKey>, Option<SystemTime>), String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if meta.len() > MAX_JWKS_BYTES {
        return Err(format!("{shown}: a JWKS over {MAX_JWKS_BYTES} bytes"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
    let keys = parse_jwks(&text).map_err(|e| format!("{shown}: {e}"))?;
    Ok((keys, meta.modified().ok()))
}

struct LoadedKeys {
    keys: Arc<Vec<VerificationKey>>,
    modified: Option<SystemTime>,
    checked: Instant,
}

/// The validator of one listener.
pub struct JwksValidator {
    options: JwksOptions,
    keys: Keys,
}

/// The keys, as their source gives them.
enum Keys {
    File(PathBuf, Mutex<LoadedKeys>),
    Endpoint(RefreshingJwks),
}

impl std::fmt::Debug for JwksValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwksValidator")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Two validators are the same when configured the same (the keys follow the file).
impl PartialEq for JwksValidator {
    fn eq(&self, other: &Self) -> bool {
        self.options == other.options
    }
}

impl Eq for JwksValidator {}

/// A token that passed: the principal's name and when the token expires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidToken {
    pub principal: String,
    pub expires_at_ms: i64,
    pub scope: Vec<String>,
}

impl JwksValidator {
    /// Reads the JWKS file, or fetches the endpoint's JWKS and starts refreshing it; an
    /// error says which file or URL and why.
    pub fn new(options: JwksOptions) -> Result<JwksValidator, String> {
        let keys = match &options.source {
            JwksSource::File(path) => {
                let (keys, modified) = read_jwks(path)?;
                if keys.is_empty() {
                    tracing::warn!(file = %path.display(), "the JWKS holds no signature key skua can use: every OAUTHBEARER token will be refused until it does");
                }
                let loaded = LoadedKeys {
                    keys: Arc::new(keys),
                    modified,
                    checked: Instant::now(),
                };
                Keys::File(path.clone(), Mutex::new(loaded))
            }
            JwksSource::Endpoint(endpoint) => {
                Keys::Endpoint(RefreshingJwks::start(endpoint.clone())?)
            }
        };
        Ok(JwksValidator { options, keys })
    }

    pub fn options(&self) -> &JwksOptions {
        &self.options
    }

    /// The keys in force: a file's re-read first if it changed since last looked at.
    fn keys(&self) -> Arc<Vec<VerificationKey>> {
        let (path, loaded) = match &self.keys {
            Keys::File(path, loaded) => (path, loaded),
            Keys::Endpoint(endpoint) => return endpoint.keys(),
        };
        let mut loaded = loaded.lock();
        if loaded.checked.elapsed() >= RELOAD_CHECK {
            loaded.checked = Instant::now();
            let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
            if modified != loaded.modified {
                match read_jwks(path) {
                    Ok((keys, modified)) => {
                        tracing::info!(file = %path.display(), keys = keys.len(), "JWKS reloaded");
                        loaded.keys = Arc::new(keys);
                        loaded.modified = modified;
                    }
                    Err(e) => {
                        tracing::warn!("JWKS not reloaded, the keys read before stay in force: {e}")
                    }
                }
            }
        }
        loaded.keys.clone()
    }

    /// Validates `token` at `now_ms`; the error is the reason, for the broker's log.
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<ValidToken, String> {
        let parts: Vec<&str> = token.split('.').collect();
        if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) {
            return Err(
                "Malformed JWT provided; expected three sections (header, payload, and signature)"
                    .into(),
            );
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| format!("the JOSE header is not one skua can verify: {e}"))?;
        let alg = header.alg;
        let kind = KeyKind::for_algorithm(alg).ok_or_else(|| {
            format!("the {alg:?} algorithm is not accepted (asymmetric signatures only)")
        })?;
        let keys = self.keys();
        let candidates: Vec<&VerificationKey> = keys
            .iter()
            .filter(|k| k.kind == kind)
            .filter(|k| header.kid.is_none() || k.kid == header.kid)
            .filter(|k| {
                k.alg
                    .is_none_or(|a| a.to_string().parse::<Algorithm>().ok() == Some(alg))
            })
            .collect();
        if candidates.is_empty() {
            if let (Keys::Endpoint(endpoint), Some(kid)) = (&self.keys, &header.kid) {
                endpoint.expedite(kid);
            }
            return Err(format!(
                "Unable to find a suitable verification key for JWS w/ header alg {alg:?}, kid {:?}",
                header.kid
            ));
        }
        let (message, signature) = token.rsplit_once('.').expect("three parts");
        // Same trust either way: every key of the JWKS is the provider's. Kinds and
        // curves are matched above, so the crate is never handed a key of another family.
        let verified = candidates.iter().any(|k| {
            jsonwebtoken::crypto::verify(signature, message.as_bytes(), &k.key, alg)
                .unwrap_or(false)
        });
        if !verified {
            return Err("JWS signature is invalid".into());
        }
        let claims = B64URL
            .decode(parts[1])
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| match v {
                serde_json::Value::Object(map) => Some(map),
                _ => None,
            })
            .ok_or("the JWT claims are not a JSON object")?;
        self.check_claims(&claims, now_ms)
    }

    fn check_claims(
        &self,
        claims: &serde_json::Map<String, serde_json::Value>,
        now_ms: i64,
    ) -> Result<ValidToken, String> {
        let o = &self.options;
        let exp = check_times(claims, now_ms, o.clock_skew_ms)?;
        if let Some(expected) = &o.expected_issuer {
            match claims.get("iss") {
                Some(serde_json::Value::String(iss)) if iss == expected => {}
                Some(serde_json::Value::String(iss)) => {
                    return Err(format!(
                    "Issuer (iss) claim value ({iss}) doesn't match expected value of {expected}"
                ))
                }
                _ => return Err("No Issuer (iss) claim present.".into()),
            }
        }
        check_audience(claims, &o.expected_audience)?;
        Ok(ValidToken {
            principal: subject(claims, &o.sub_claim)?,
            expires_at_ms: exp,
            scope: scopes(claims, &o.scope_claim)?,
        })
    }
}

/// jose4j's NumericDate claim `name` in ms (whole seconds: a fraction is dropped).
fn date_ms(
    claims: &serde_json::Map<String, serde_json::Value>,
    name: &str,
) -> Result<Option<i64>, String> {
    match claims.get(name) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_f64().filter(|f| f.is_finite()).map(|f| f as i64))
            .map(|s| Some(s.saturating_mul(1000)))
            .ok_or_else(|| format!("The value of the '{name}' claim is not the expected type")),
    }
}

/// `exp` and `iat` present, `exp` not past and `nbf` reached (within `skew`), `exp` not
/// before `iat`; the expiry in ms.
fn check_times(
    claims: &serde_json::Map<String, serde_json::Value>,
    now_ms: i64,
    skew: i64,
) -> Result<i64, String> {
    let exp = date_ms(claims, "exp")?.ok_or("No Expiration Time (exp) claim present.")?;
    let iat = date_ms(claims, "iat")?.ok_or("No Issued At (iat) claim present.")?;
    if now_ms >= exp.saturating_add(skew) {
        return Err(format!(
            "The JWT is no longer valid - the evaluation time {now_ms} ms is on or after the Expiration Time (exp={exp} ms) claim value (even when providing {skew} ms of leeway to account for clock skew)."
        ));
    }
    if let Some(nbf) = date_ms(claims, "nbf")? {
        if now_ms.saturating_add(skew) < nbf {
            return Err(format!(
                "The JWT is not yet valid as the evaluation time {now_ms} ms is before the Not Before (nbf={nbf} ms) claim time (even when providing {skew} ms of leeway to account for clock skew)."
            ));
        }
    }
    if exp < iat {
        return Err(format!(
            "The Expiration Time (exp={exp} ms) claim value cannot be before the Issued At (iat={iat} ms) claim value."
        ));
    }
    Ok(exp)
}

/// `aud` holds one of `expected`; with none expected, a token must carry no `aud`
/// (jose4j's default).
fn check_audience(
    claims: &serde_json::Map<String, serde_json::Value>,
    expected: &[String],
) -> Result<(), String> {
    let audiences: Option<Vec<&str>> = match claims.get("aud") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(a)) => Some(vec![a.as_str()]),
        Some(serde_json::Value::Array(list)) => Some(
            list.iter()
                .map(|v| v.as_str())
                .collect::<Option<Vec<&str>>>()
                .ok_or("The value of the 'aud' claim is not the expected type")?,
        ),
        Some(_) => return Err("The value of the 'aud' claim is not the expected type".into()),
    };
    match audiences {
        None if !expected.is_empty() => Err("No Audience (aud) claim present.".into()),
        Some(list) if !list.iter().any(|a| expected.iter().any(|e| e == a)) => {
            Err(if expected.is_empty() {
                format!("Audience (aud) claim {list:?} present in the JWT but no expected audience value(s) were provided (sasl.oauthbearer.expected.audience)")
            } else {
                format!("Audience (aud) claim {list:?} doesn't contain an acceptable identifier. Expected one of {expected:?} as an aud value.")
            })
        }
        _ => Ok(()),
    }
}

/// The scope claim: a string taken whole (as Kafka does: a space-separated string is one
/// scope) or an array of strings; no scope may be blank.
fn scopes(
    claims: &serde_json::Map<String, serde_json::Value>,
    claim: &str,
) -> Result<Vec<String>, String> {
    let scope: Vec<String> = match claims.get(claim) {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::String(s)) => vec![s.clone()],
        Some(serde_json::Value::Array(list)) => list
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect::<Option<Vec<String>>>()
            .ok_or_else(|| format!("the {claim} claim holds a value that is not a string"))?,
        Some(_) => Vec::new(),
    };
    scope
        .into_iter()
        .map(|s| match s.trim() {
            "" => Err(format!("Value for {claim} element cannot be empty")),
            t => Ok(t.to_string()),
        })
        .collect()
}

/// The subject claim: a non-blank string, trimmed, the principal's name.
fn subject(
    claims: &serde_json::Map<String, serde_json::Value>,
    claim: &str,
) -> Result<String, String> {
    match claims.get(claim) {
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Some(serde_json::Value::String(_)) | None | Some(serde_json::Value::Null) => {
            Err(format!("{claim} value must be non-null"))
        }
        Some(_) => Err(format!(
            "The value of the '{claim}' claim is not the expected type"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{self, KeyPair};

    /// A 2048-bit RSA key (PKCS#1 DER, base64) for signing test tokens; made with
    /// `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -outform DER`.
    pub const TEST_RSA_PKCS1: &str = include_str!("testdata/rsa-2048.pkcs1.b64");

    pub const NOW_MS: i64 = 1_800_000_000_000;

    /// Signing keys for tests, and the JWKS that publishes them.
    pub struct Signer {
        pub rsa: signature::RsaKeyPair,
        pub ec: signature::EcdsaKeyPair,
    }

    impl Signer {
        pub fn new() -> Signer {
            let der = base64::engine::general_purpose::STANDARD
                .decode(TEST_RSA_PKCS1.split_whitespace().collect::<String>())
                .unwrap();
            let rng = SystemRandom::new();
            let ec_pkcs8 = signature::EcdsaKeyPair::generate_pkcs8(
                &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                &rng,
            )
            .unwrap();
            Signer {
                rsa: signature::RsaKeyPair::from_der(&der).unwrap(),
                ec: signature::EcdsaKeyPair::from_pkcs8(
                    &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    ec_pkcs8.as_ref(),
                    &rng,
                )
                .unwrap(),
            }
        }

        /// The JWKS: the RSA key as `rsa-1`, the EC key as `ec-1`.
        pub fn jwks(&self) -> String {
            let public = ring::rsa::PublicKeyComponents::<Vec<u8>>::from(self.rsa.public());
            let unpadded = |b: &[u8]| {
                let zeros = b.iter().take_while(|x| **x == 0).count();
                B64URL.encode(&b[zeros..])
            };
            let (n, e) = (unpadded(&public.n), unpadded(&public.e));
            let point = self.ec.public_key().as_ref();
            let (x, y) = (B64URL.encode(&point[1..33]), B64URL.encode(&point[33..65]));
            serde_json::json!({"keys": [
                {"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256", "n": n, "e": e},
                {"kty": "EC", "kid": "ec-1", "crv": "P-256", "x": x, "y": y},
                {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
            ]})
            .to_string()
        }

        /// A compact JWS of `claims` signed with `alg` (RS256 or ES256) as `kid`.
        pub fn token(&self, alg: &str, kid: Option<&str>, claims: &serde_json::Value) -> String {
            let mut header = serde_json::json!({"alg": alg, "typ": "JWT"});
            if let Some(kid) = kid {
                header["kid"] = kid.into();
            }
            let message = format!(
                "{}.{}",
                B64URL.encode(header.to_string()),
                B64URL.encode(claims.to_string())
            );
            let rng = SystemRandom::new();
            let signature = match alg {
                "RS256" => {
                    let mut sig = vec![0; self.rsa.public().modulus_len()];
                    self.rsa
                        .sign(
                            &signature::RSA_PKCS1_SHA256,
                            &rng,
                            message.as_bytes(),
                            &mut sig,
                        )
                        .unwrap();
                    sig
                }
                "ES256" => self
                    .ec
                    .sign(&rng, message.as_bytes())
                    .unwrap()
                    .as_ref()
                    .to_vec(),
                other => panic!("{other}"),
            };
            format!("{message}.{}", B64URL.encode(signature))
        }
    }

    pub fn options(jwks_file: &Path) -> JwksOptions {
        JwksOptions {
            source: JwksSource::File(jwks_file.to_path_buf()),
            expected_audience: vec!["kafka".into()],
            expected_issuer: Some("https://idp.example".into()),
            scope_claim: "scope".into(),
            sub_claim: "sub".into(),
            clock_skew_ms: 30_000,
        }
    }

    fn claims(extra: serde_json::Value) -> serde_json::Value {
        let now = NOW_MS / 1000;
        let mut c = serde_json::json!({
            "sub": "alice", "iss": "https://idp.example", "aud": ["kafka", "other"],
            "iat": now - 10, "exp": now + 3600, "scope": "produce"
        });
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() {
                c.as_object_mut().unwrap().remove(k);
            } else {
                c[k] = v.clone();
            }
        }
        c
    }

    /// A JWKS provider over HTTPS on 127.0.0.1, with a certificate for `localhost` from a
    /// CA of its own: GET /jwks answers `body`, anything else 404; GETs are counted.
    struct Provider {
        port: u16,
        ca_pem: String,
        body: Arc<Mutex<String>>,
        gets: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Provider {
        fn start(body: String) -> Provider {
            use std::io::{Read, Write};
            use std::sync::atomic::Ordering;
            let ca_key = rcgen::KeyPair::generate().unwrap();
            let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            let ca = ca_params.self_signed(&ca_key).unwrap();
            let key = rcgen::KeyPair::generate().unwrap();
            let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
            let cert = params.signed_by(&key, &ca, &ca_key).unwrap();
            let config = Arc::new(
                rustls::ServerConfig::builder_with_provider(Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![cert.der().clone()],
                    rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
                )
                .unwrap(),
            );
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let body = Arc::new(Mutex::new(body));
            let gets = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let (served, counted) = (body.clone(), gets.clone());
            std::thread::spawn(move || {
                for tcp in listener.incoming() {
                    let Ok(tcp) = tcp else { return };
                    let conn = rustls::ServerConnection::new(config.clone()).unwrap();
                    let mut tls = rustls::StreamOwned::new(conn, tcp);
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    if !request.starts_with(b"GET ") {
                        continue;
                    }
                    counted.fetch_add(1, Ordering::SeqCst);
                    let (status, text) = match request.starts_with(b"GET /jwks ") {
                        true => ("200 OK", served.lock().clone()),
                        false => ("404 Not Found", String::new()),
                    };
                    let _ = write!(
                        tls,
                        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                        text.len()
                    );
                    tls.conn.send_close_notify();
                    let _ = tls.flush();
                }
            });
            Provider {
                port,
                ca_pem: cert_pem(&ca),
                body,
                gets,
            }
        }

        fn gets(&self) -> usize {
            self.gets.load(std::sync::atomic::Ordering::SeqCst)
        }

        fn options(&self, path: &str, refresh_ms: u64, trusted: bool) -> JwksOptions {
            use crate::tls::settings::{Secret, StoreSource, TruststoreSettings};
            let truststore = trusted.then(|| TruststoreSettings {
                store_type: "PEM".into(),
                source: StoreSource::Inline {
                    key: None,
                    certs: Secret(self.ca_pem.clone()),
                },
                password: None,
            });
            JwksOptions {
                source: JwksSource::Endpoint(EndpointOptions {
                    url: format!("https://localhost:{}{path}", self.port),
                    refresh: Duration::from_millis(refresh_ms),
                    retry_backoff: Duration::from_millis(10),
                    retry_backoff_max: Duration::from_millis(100),
                    truststore,
                }),
                ..options(Path::new("/unused"))
            }
        }
    }

    /// Makes a file validator look at its file's time on the next token.
    fn age_check(v: &JwksValidator) {
        let Keys::File(_, loaded) = &v.keys else {
            panic!("a file validator")
        };
        loaded.lock().checked -= RELOAD_CHECK;
    }

    fn cert_pem(cert: &rcgen::Certificate) -> String {
        cert.pem()
    }

    fn eventually(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "{what} within 10 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn an_https_jwks_is_verified_fetched_and_fetched_again_for_a_new_key_id() {
        let signer = Signer::new();
        let provider = Provider::start(signer.jwks());
        // The Mozilla roots do not know the provider's CA; a missing path is a 404: both
        // stop startup, naming the URL.
        let untrusted = JwksValidator::new(provider.options("/jwks", 3_600_000, false));
        let url = format!("https://localhost:{}/jwks", provider.port);
        assert!(untrusted.unwrap_err().starts_with(&url));
        let missing = JwksValidator::new(provider.options("/nope", 3_600_000, true)).unwrap_err();
        assert!(missing.contains("404"), "{missing}");

        let v = JwksValidator::new(provider.options("/jwks", 3_600_000, true)).unwrap();
        let rsa_1 = signer.token("RS256", Some("rsa-1"), &claims(serde_json::json!({})));
        assert_eq!(v.validate(&rsa_1, NOW_MS).unwrap().principal, "alice");

        // The provider rotates its key id: a token with the new one is refused at first
        // and fetched for at once; the old id is gone once fetched.
        *provider.body.lock() = signer.jwks().replace("rsa-1", "rsa-2");
        let rsa_2 = signer.token("RS256", Some("rsa-2"), &claims(serde_json::json!({})));
        let before = provider.gets();
        assert!(v.validate(&rsa_2, NOW_MS).is_err());
        eventually("the new key fetched", || v.validate(&rsa_2, NOW_MS).is_ok());
        // (That refusal looks for rsa-1 once too.)
        assert!(v.validate(&rsa_1, NOW_MS).is_err());
        eventually("rsa-1 looked for", || provider.gets() >= before + 2);

        // Tokens naming a key id no JWKS holds make one fetch a minute, not one each.
        std::thread::sleep(Duration::from_millis(100));
        let before_made_up = provider.gets();
        assert_eq!(before_made_up, before + 2);
        let made_up = signer.token("RS256", Some("made-up"), &claims(serde_json::json!({})));
        for _ in 0..20 {
            assert!(v.validate(&made_up, NOW_MS).is_err());
        }
        eventually("the made-up key id looked for", || {
            provider.gets() > before_made_up
        });
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(provider.gets(), before_made_up + 1);
        drop(v);

        // Refreshed on its interval; a dropped validator's thread stops.
        let fast = JwksValidator::new(provider.options("/jwks", 50, true)).unwrap();
        let start = provider.gets();
        eventually("three scheduled refreshes", || provider.gets() >= start + 3);
        drop(fast);
        std::thread::sleep(Duration::from_millis(200));
        let stopped = provider.gets();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(provider.gets(), stopped);
    }

    fn validator(signer: &Signer) -> (tempfile::TempDir, JwksValidator) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("jwks.json");
        std::fs::write(&file, signer.jwks()).unwrap();
        let v = JwksValidator::new(options(&file)).unwrap();
        (dir, v)
    }

    #[test]
    fn rs256_and_es256_tokens_from_the_jwks_pass() {
        let signer = Signer::new();
        let (_dir, v) = validator(&signer);
        for (alg, kid) in [
            ("RS256", Some("rsa-1")),
            ("ES256", Some("ec-1")),
            ("ES256", None),
        ] {
            let token = signer.token(alg, kid, &claims(serde_json::json!({})));
            let valid = v.validate(&token, NOW_MS).unwrap();
            assert_eq!(valid.principal, "alice");
            assert_eq!(valid.expires_at_ms, NOW_MS + 3_600_000);
            assert_eq!(valid.scope, vec!["produce".to_string()]);
        }
        // Another subject claim; a scope array; a single audience string.
        let mut o = v.options().clone();
        o.sub_claim = "client_id".into();
        let v2 = JwksValidator::new(o).unwrap();
        let token = signer.token(
            "RS256",
            Some("rsa-1"),
            &claims(serde_json::json!({"client_id": " svc ", "scope": ["a", "b"], "aud": "kafka"})),
        );
        let valid = v2.validate(&token, NOW_MS).unwrap();
        assert_eq!((valid.principal.as_str(), valid.scope.len()), ("svc", 2));
    }

    #[test]
    fn forged_expired_and_misaddressed_tokens_are_refused() {
        let signer = Signer::new();
        let (_dir, v) = validator(&signer);
        let refused = |token: &str| v.validate(token, NOW_MS).unwrap_err();
        let good = signer.token("RS256", Some("rsa-1"), &claims(serde_json::json!({})));
        // A changed payload under the original signature.
        let mut parts: Vec<&str> = good.split('.').collect();
        let forged = B64URL.encode(claims(serde_json::json!({"sub": "admin"})).to_string());
        parts[1] = &forged;
        assert!(refused(&parts.join(".")).contains("signature"));
        // The key named by kid must be the one that signed.
        let swapped = signer.token("RS256", Some("ec-1"), &claims(serde_json::json!({})));
        assert!(refused(&swapped).contains("suitable verification key"));
        let unknown = signer.token("RS256", Some("rsa-2"), &claims(serde_json::json!({})));
        assert!(refused(&unknown).contains("suitable verification key"));
        // alg none, and HMAC with the JWKS's symmetric key, are refused outright.
        let header = B64URL.encode(r#"{"alg":"none"}"#);
        let payload = B64URL.encode(claims(serde_json::json!({})).to_string());
        assert!(refused(&format!("{header}.{payload}.")).contains("three sections"));
        assert!(refused(&format!("{header}.{payload}.c2ln")).contains("header"));
        let hs = B64URL.encode(r#"{"alg":"HS256","kid":"hmac"}"#);
        assert!(refused(&format!("{hs}.{payload}.c2ln")).contains("not accepted"));
        // An ES256 header over an RSA key: no key of that kind, and no panic.
        let es_over_rsa = B64URL.encode(r#"{"alg":"ES256","kid":"rsa-1"}"#);
        assert!(refused(&format!("{es_over_rsa}.{payload}.c2ln")).contains("suitable"));
        let now = NOW_MS / 1000;
        for (extra, why) in [
            (
                serde_json::json!({"exp": now - 31, "iat": now - 100}),
                "no longer valid",
            ),
            (serde_json::json!({"exp": null}), "exp"),
            (serde_json::json!({"iat": null}), "iat"),
            (serde_json::json!({"nbf": now + 31}), "not yet valid"),
            (serde_json::json!({"iat": now + 7200}), "cannot be before"),
            (serde_json::json!({"iss": "https://other"}), "Issuer"),
            (serde_json::json!({"iss": null}), "Issuer"),
            (serde_json::json!({"aud": "else"}), "acceptable"),
            (serde_json::json!({"aud": null}), "Audience"),
            (serde_json::json!({"sub": "  "}), "sub"),
            (serde_json::json!({"sub": 7}), "sub"),
            (serde_json::json!({"scope": ["a", " "]}), "scope"),
        ] {
            let token = signer.token("ES256", Some("ec-1"), &claims(extra.clone()));
            let e = refused(&token);
            assert!(e.contains(why), "{extra}: {e}");
        }
        // Within the skew, an expired token and a future nbf pass.
        for extra in [
            serde_json::json!({"exp": now - 29, "iat": now - 100}),
            serde_json::json!({"nbf": now + 29}),
        ] {
            let token = signer.token("ES256", Some("ec-1"), &claims(extra));
            assert!(v.validate(&token, NOW_MS).is_ok());
        }
        // With no expected audience, a token that names one is refused (jose4j's default).
        let mut o = v.options().clone();
        o.expected_audience.clear();
        o.expected_issuer = None;
        let open = JwksValidator::new(o).unwrap();
        assert!(open
            .validate(&good, NOW_MS)
            .unwrap_err()
            .contains("no expected audience"));
        let no_aud = signer.token(
            "RS256",
            None,
            &claims(serde_json::json!({"aud": null, "iss": null})),
        );
        assert!(open.validate(&no_aud, NOW_MS).is_ok());
    }

    #[test]
    fn a_rewritten_jwks_is_picked_up_and_a_broken_one_ignored() {
        let signer = Signer::new();
        let (dir, v) = validator(&signer);
        let file = dir.path().join("jwks.json");
        let token = signer.token("ES256", Some("ec-1"), &claims(serde_json::json!({})));
        assert!(v.validate(&token, NOW_MS).is_ok());
        // Rotated: the EC key is gone.
        let rotated = signer.jwks().replace("\"ec-1\"", "\"ec-2\"");
        let since = std::fs::metadata(&file).unwrap().modified().unwrap();
        std::fs::write(&file, rotated).unwrap();
        let f = std::fs::File::options().write(true).open(&file).unwrap();
        f.set_modified(since + Duration::from_secs(5)).unwrap();
        age_check(&v);
        assert!(v.validate(&token, NOW_MS).is_err());
        // A broken rewrite keeps the keys in force.
        std::fs::write(&file, "{not json").unwrap();
        f.set_modified(since + Duration::from_secs(10)).unwrap();
        age_check(&v);
        let rotated_token = signer.token("ES256", Some("ec-2"), &claims(serde_json::json!({})));
        assert!(v.validate(&rotated_token, NOW_MS).is_ok());
    }

    #[test]
    fn file_urls() {
        assert_eq!(
            file_url_path("file:/etc/jwks.json").unwrap(),
            PathBuf::from("/etc/jwks.json")
        );
        assert_eq!(
            file_url_path("file:///a%20b/k.json").unwrap(),
            PathBuf::from("/a b/k.json")
        );
        assert_eq!(
            file_url_path("file://localhost/k").unwrap(),
            PathBuf::from("/k")
        );
        assert!(file_url_path("file://idp/k").is_err());
        assert!(file_url_path("file:rel/k").is_err());
        assert!(file_url_path("ftp://idp/jwks")
            .unwrap_err()
            .contains("file:, https: or http: URL"));
        let missing = JwksValidator::new(options(Path::new("/nonexistent/jwks.json")));
        assert!(missing.unwrap_err().contains("/nonexistent/jwks.json"));
    }
}
