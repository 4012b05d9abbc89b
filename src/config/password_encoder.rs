//! Kafka's `PasswordEncoder`: how a ZooKeeper-mode cluster keeps dynamic password configs
//! (`listener.name.<l>.plain.sasl.jaas.config`, `ssl.keystore.password`, …) in
//! `/config/brokers/<id>`: encrypted with a key derived from `password.encoder.secret`, as
//! `key:value` pairs joined by commas (Kafka's `EncryptingPasswordEncoder`):
//!
//! `keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,
//! keyLength:128,salt:<base64>,iterations:4096,encryptedPassword:<base64>,
//! passwordLength:<chars>,initializationVector:<base64>` (and `authenticationTagLength`
//! for AES/GCM).
//!
//! A Kafka 3.9 broker and skua configured with the same secret and cipher read each other's
//! values (checked against Kafka 3.9.1's own encoder both ways: its values are the fixtures
//! below, and it decoded skua's). Kafka reads a stored value's parameters by the cipher it
//! is configured with, not the one stored, so every broker of a cluster keeps the same
//! `password.encoder.cipher.algorithm`.
//! Supported: PBKDF2 with HMAC-SHA512 (Kafka's default) or HMAC-SHA1, AES-128/192/256 in
//! CBC with PKCS#5 padding (Kafka's default) or GCM with a 128-bit tag (192-bit keys CBC
//! only). The salt is 256 random bytes, as Kafka's.

use std::collections::BTreeMap;
use std::num::NonZeroU32;

use aes::cipher::{block_padding::Pkcs7, BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ring::rand::{SecureRandom, SystemRandom};

const CBC: &str = "AES/CBC/PKCS5Padding";
const GCM: &str = "AES/GCM/NoPadding";
const SHA512: &str = "PBKDF2WithHmacSHA512";
const SHA1: &str = "PBKDF2WithHmacSHA1";
/// Kafka's `EncryptingPasswordEncoder` salt: 256 random bytes.
const SALT_BYTES: usize = 256;
/// Bounds on what a stored value may ask for, so a corrupt znode cannot make the broker
/// spin (iterations) or allocate (salt, ciphertext) without limit.
const MAX_ITERATIONS: u32 = 10_000_000;
const MAX_FIELD_BYTES: usize = 64 * 1024;

/// `password.encoder.*`: the secret and how new values are encoded.
#[derive(Clone)]
pub struct PasswordEncoder {
    secret: String,
    key_factory_algorithm: String,
    cipher_algorithm: String,
    key_length: u32,
    iterations: u32,
}

impl std::fmt::Debug for PasswordEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasswordEncoder")
            .field("cipher_algorithm", &self.cipher_algorithm)
            .finish_non_exhaustive()
    }
}

impl PasswordEncoder {
    /// Kafka's settings: `password.encoder.keyfactory.algorithm` (None: HMAC-SHA512),
    /// `.cipher.algorithm`, `.key.length` (bits), `.iterations`.
    pub fn new(
        secret: &str,
        key_factory_algorithm: Option<&str>,
        cipher_algorithm: &str,
        key_length: u32,
        iterations: u32,
    ) -> Result<PasswordEncoder, String> {
        let key_factory_algorithm = key_factory_algorithm.unwrap_or(SHA512).to_string();
        check(
            &key_factory_algorithm,
            cipher_algorithm,
            key_length,
            iterations,
        )?;
        Ok(PasswordEncoder {
            secret: secret.to_string(),
            key_factory_algorithm,
            cipher_algorithm: cipher_algorithm.to_string(),
            key_length,
            iterations,
        })
    }

    /// `password` encoded as Kafka stores it.
    pub fn encode(&self, password: &str) -> String {
        let rng = SystemRandom::new();
        let mut salt = vec![0u8; SALT_BYTES];
        rng.fill(&mut salt).expect("the system's random source");
        let key = derive(
            &self.secret,
            &self.key_factory_algorithm,
            self.key_length,
            &salt,
            self.iterations,
        );
        let mut fields = vec![
            ("keyFactoryAlgorithm", self.key_factory_algorithm.clone()),
            ("cipherAlgorithm", self.cipher_algorithm.clone()),
            ("keyLength", self.key_length.to_string()),
            ("salt", B64.encode(&salt)),
            ("iterations", self.iterations.to_string()),
            (
                "passwordLength",
                password.encode_utf16().count().to_string(),
            ),
        ];
        let (iv, encrypted) = match self.cipher_algorithm.as_str() {
            GCM => {
                let mut nonce = [0u8; 12];
                rng.fill(&mut nonce).expect("the system's random source");
                fields.push(("authenticationTagLength", "128".into()));
                (nonce.to_vec(), gcm_seal(&key, &nonce, password.as_bytes()))
            }
            _ => {
                let mut iv = [0u8; 16];
                rng.fill(&mut iv).expect("the system's random source");
                (iv.to_vec(), cbc_encrypt(&key, &iv, password.as_bytes()))
            }
        };
        fields.push(("encryptedPassword", B64.encode(encrypted)));
        fields.push(("initializationVector", B64.encode(iv)));
        fields
            .into_iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The password in a value Kafka (or skua) encoded with this secret; the error says
    /// why not without quoting the value.
    pub fn decode(&self, encoded: &str) -> Result<String, String> {
        let params: BTreeMap<&str, &str> = encoded
            .split(',')
            .filter_map(|pair| pair.split_once(':'))
            .collect();
        let field = |name: &str| {
            params
                .get(name)
                .copied()
                .ok_or_else(|| format!("the encoded password has no {name}"))
        };
        let number = |name: &str| -> Result<u32, String> {
            field(name)?
                .parse()
                .map_err(|_| format!("the encoded password's {name} is not a number"))
        };
        let bytes = |name: &str| -> Result<Vec<u8>, String> {
            let text = field(name)?;
            if text.len() > MAX_FIELD_BYTES {
                return Err(format!("the encoded password's {name} is too long"));
            }
            B64.decode(text)
                .map_err(|_| format!("the encoded password's {name} is not base64"))
        };
        let key_factory = params.get("keyFactoryAlgorithm").copied().unwrap_or(SHA512);
        let cipher = field("cipherAlgorithm")?;
        let key_length = number("keyLength")?;
        let iterations = number("iterations")?;
        check(key_factory, cipher, key_length, iterations)?;
        let salt = bytes("salt")?;
        let iv = bytes("initializationVector")?;
        let encrypted = bytes("encryptedPassword")?;
        let key = derive(&self.secret, key_factory, key_length, &salt, iterations);
        let plain = match cipher {
            GCM => {
                if params.get("authenticationTagLength").copied() != Some("128") {
                    return Err("only 128-bit GCM authentication tags are read".into());
                }
                gcm_open(&key, &iv, encrypted)?
            }
            _ => cbc_decrypt(&key, &iv, &encrypted)?,
        };
        let password = String::from_utf8(plain)
            .map_err(|_| "Password could not be decoded (wrong password.encoder.secret?)")?;
        if password.encode_utf16().count() as u32 != number("passwordLength")? {
            return Err("Password could not be decoded, sanity check of length failed".into());
        }
        Ok(password)
    }
}

fn check(key_factory: &str, cipher: &str, key_length: u32, iterations: u32) -> Result<(), String> {
    if key_factory != SHA512 && key_factory != SHA1 {
        return Err(format!(
            "key factory {key_factory}: skua encodes passwords with {SHA512} or {SHA1}"
        ));
    }
    match (cipher, key_length) {
        (CBC, 128 | 192 | 256) | (GCM, 128 | 256) => {}
        _ => {
            return Err(format!(
                "cipher {cipher} with a {key_length}-bit key: skua encodes passwords with {CBC} (128, 192 or 256 bits) or {GCM} (128 or 256 bits)"
            ))
        }
    }
    if iterations == 0 || iterations > MAX_ITERATIONS {
        return Err(format!(
            "{iterations} iterations: between 1 and {MAX_ITERATIONS}"
        ));
    }
    Ok(())
}

/// The AES key: PBKDF2 of the secret (as UTF-8, as Java's PBEKeySpec gives it) over the salt.
fn derive(
    secret: &str,
    key_factory: &str,
    key_length: u32,
    salt: &[u8],
    iterations: u32,
) -> Vec<u8> {
    let algorithm = match key_factory {
        SHA1 => ring::pbkdf2::PBKDF2_HMAC_SHA1,
        _ => ring::pbkdf2::PBKDF2_HMAC_SHA512,
    };
    let mut key = vec![0u8; key_length as usize / 8];
    let iterations = NonZeroU32::new(iterations).expect("checked above");
    ring::pbkdf2::derive(algorithm, iterations, salt, secret.as_bytes(), &mut key);
    key
}

fn cbc_encrypt(key: &[u8], iv: &[u8], plain: &[u8]) -> Vec<u8> {
    let iv = iv.into();
    match key.len() {
        16 => cbc::Encryptor::<aes::Aes128>::new(key.into(), iv)
            .encrypt_padded_vec_mut::<Pkcs7>(plain),
        24 => cbc::Encryptor::<aes::Aes192>::new(key.into(), iv)
            .encrypt_padded_vec_mut::<Pkcs7>(plain),
        _ => cbc::Encryptor::<aes::Aes256>::new(key.into(), iv)
            .encrypt_padded_vec_mut::<Pkcs7>(plain),
    }
}

fn cbc_decrypt(key: &[u8], iv: &[u8], encrypted: &[u8]) -> Result<Vec<u8>, String> {
    if iv.len() != 16 {
        return Err("the encoded password's initializationVector is not 16 bytes".into());
    }
    let iv = iv.into();
    let plain = match key.len() {
        16 => cbc::Decryptor::<aes::Aes128>::new(key.into(), iv)
            .decrypt_padded_vec_mut::<Pkcs7>(encrypted),
        24 => cbc::Decryptor::<aes::Aes192>::new(key.into(), iv)
            .decrypt_padded_vec_mut::<Pkcs7>(encrypted),
        _ => cbc::Decryptor::<aes::Aes256>::new(key.into(), iv)
            .decrypt_padded_vec_mut::<Pkcs7>(encrypted),
    };
    plain.map_err(|_| "Password could not be decoded (wrong password.encoder.secret?)".into())
}

fn gcm_key(key: &[u8]) -> ring::aead::LessSafeKey {
    let algorithm = match key.len() {
        16 => &ring::aead::AES_128_GCM,
        _ => &ring::aead::AES_256_GCM,
    };
    ring::aead::LessSafeKey::new(
        ring::aead::UnboundKey::new(algorithm, key).expect("a key of the algorithm's length"),
    )
}

fn gcm_seal(key: &[u8], nonce: &[u8; 12], plain: &[u8]) -> Vec<u8> {
    let mut out = plain.to_vec();
    gcm_key(key)
        .seal_in_place_append_tag(
            ring::aead::Nonce::assume_unique_for_key(*nonce),
            ring::aead::Aad::empty(),
            &mut out,
        )
        .expect("sealing a password");
    out
}

fn gcm_open(key: &[u8], iv: &[u8], mut encrypted: Vec<u8>) -> Result<Vec<u8>, String> {
    let nonce = ring::aead::Nonce::try_assume_unique_for_key(iv)
        .map_err(|_| "the encoded password's initializationVector is not 12 bytes")?;
    let plain = gcm_key(key)
        .open_in_place(nonce, ring::aead::Aad::empty(), &mut encrypted)
        .map_err(|_| "Password could not be decoded (wrong password.encoder.secret?)")?;
    Ok(plain.to_vec())
}

/// Whether `key` (a broker key, or a listener's own copy of one) is a password config.
pub fn is_password_config(key: &str) -> bool {
    super::broker::key_def(key).is_some_and(|d| d.kind == super::defs::Kind::Password)
}

/// The encoder `password.encoder.*` configure, or None without `password.encoder.secret`.
pub fn from_config(config: &super::BrokerConfig) -> Result<Option<PasswordEncoder>, String> {
    with_secret(config, "password.encoder.secret")
}

/// The encoder of `password.encoder.old.secret` (the secret before a change, with the
/// same algorithms), or None when it is not set.
pub fn old_from_config(config: &super::BrokerConfig) -> Result<Option<PasswordEncoder>, String> {
    with_secret(config, "password.encoder.old.secret")
}

fn with_secret(
    config: &super::BrokerConfig,
    secret_key: &str,
) -> Result<Option<PasswordEncoder>, String> {
    let Some(secret) = config.get(secret_key).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let number = |key: &str, default: u32| -> Result<u32, String> {
        match config.get(key) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse()
                .map_err(|_| format!("{key}: {v:?} is not a number")),
        }
    };
    let factory = config.get("password.encoder.keyfactory.algorithm");
    let cipher = config
        .get("password.encoder.cipher.algorithm")
        .unwrap_or_else(|| CBC.to_string());
    PasswordEncoder::new(
        &secret,
        factory.as_deref().map(str::trim),
        cipher.trim(),
        number("password.encoder.key.length", 128)?,
        number("password.encoder.iterations", 4096)?,
    )
    .map(Some)
    .map_err(|why| format!("password.encoder.*: {why}"))
}

/// Dynamic broker configs as ZooKeeper stores them: password configs encoded (Kafka's
/// `toPersistentProps`): only a broker's own (`per_broker`), and only with an encoder.
pub fn to_persistent(
    configs: &BTreeMap<String, String>,
    encoder: Option<&PasswordEncoder>,
    per_broker: bool,
) -> Result<BTreeMap<String, String>, String> {
    configs
        .iter()
        .map(|(k, v)| match (is_password_config(k), encoder) {
            (false, _) => Ok((k.clone(), v.clone())),
            (true, _) if !per_broker => {
                Err("Password config can be defined only at broker level".to_string())
            }
            (true, Some(e)) => Ok((k.clone(), e.encode(v))),
            (true, None) => Err("Password encoder secret not configured".to_string()),
        })
        .collect()
}

/// A broker's stored configs after a change of `password.encoder.secret`, as Kafka's
/// `DynamicBrokerConfig.maybeReEncodePasswords` makes them at startup: each password
/// config the old secret decodes is encoded again with the new one; one it does not
/// decode is kept as it is (it may already be under the new secret: the old secret is
/// often left set across restarts). `None` when no config is a password config (nothing
/// to write back); otherwise the whole set, to be written back even if nothing changed,
/// as Kafka does. Err when a value needs encoding and no `password.encoder.secret` is set.
pub fn re_encode(
    stored: &BTreeMap<String, String>,
    old: &PasswordEncoder,
    new: Option<&PasswordEncoder>,
) -> Result<Option<BTreeMap<String, String>>, String> {
    if !stored.keys().any(|k| is_password_config(k)) {
        return Ok(None);
    }
    let mut out = stored.clone();
    for (k, v) in stored {
        if !is_password_config(k) {
            continue;
        }
        match old.decode(v) {
            Ok(plain) => {
                let new = new.ok_or("Password encoder secret not configured")?;
                out.insert(k.clone(), new.encode(&plain));
            }
            Err(_) => tracing::debug!(
                config = %k,
                "Dynamic password config {k} could not be decoded using old secret, new secret will be used."
            ),
        }
    }
    Ok(Some(out))
}

/// Dynamic broker configs as read from ZooKeeper, password configs decoded; one that
/// cannot be decoded is left out with Kafka's error line (`fromPersistentProps`).
pub fn from_persistent(
    configs: BTreeMap<String, String>,
    encoder: Option<&PasswordEncoder>,
) -> BTreeMap<String, String> {
    configs
        .into_iter()
        .filter_map(|(k, v)| {
            if !is_password_config(&k) {
                return Some((k, v));
            }
            let decoded = encoder
                .ok_or_else(|| "Password encoder secret not configured".to_string())
                .and_then(|e| e.decode(&v));
            match decoded {
                Ok(plain) => Some((k, plain)),
                Err(why) => {
                    tracing::error!(config = %k, "Dynamic password config {k} could not be decoded, ignoring: {why}");
                    None
                }
            }
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Encoded by Apache Kafka 3.9.1's `PasswordEncoder.encrypting(secret "encoder-secret",
    /// null, "AES/CBC/PKCS5Padding", 128, 4096)` from "alice-secret ü".
    pub(crate) const KAFKA_CBC: &str = "initializationVector:piDqy7+FeSOhWtV75I33jg==,keyLength:128,salt:Fj+PEEAArauNV+eI1mSZBAww66cdthY8iCxwLtLQjYGkJm+0RBMvy3E8AAJT0SmaRFE9+09j57SB7VbEFKfObOYgOZwywo/9fmxRx+XmyS6pAf4PQYHQhS2qZamwXKu4iWizKAT/6QdxKihqoakap2FxzwmI5UVNy29vXUoV/Xtsirb4cxq2UZyCjXlKrO+Dei3Hy+JIJWABTJ2JLtMQS5IKw7Kgfcki1YTu5AOITs12hwrWS5+YLMMgmzQylYEghRV714RkY54/ZvwGIQg+480s/vO6wmvvt0yo8iigdq/hTCQSDmJt4YBpaARp1PILtI/cKrow6V0DuPgy5FdeCA==,keyFactoryAlgorithm:PBKDF2WithHmacSHA512,cipherAlgorithm:AES/CBC/PKCS5Padding,iterations:4096,passwordLength:14,encryptedPassword:i3bXiICK19sqjgvDFy5ihQ==";
    /// The same secret, `PBKDF2WithHmacSHA1`, `AES/GCM/NoPadding`, 256 bits, 1024
    /// iterations, from "bob".
    const KAFKA_GCM: &str = "initializationVector:t5LJPItaq73PM71D,keyLength:256,salt:rgY3q/DcC5w9rjpTCHeN0axK1e9fi3HYEyV9fZwIsj0+k11tCGBA097EMSkSEoV/ruZEpDKpaMkGwuPvC0TsE/If+VIPRSxvPD/nqbjb7ax1GJw8OhoEzaLpLpqz8YLqTKLllfwim+nyRLDOKT201osJSWZwZXdrbwd2MkGANMZi9XkFyNhHVpCBN0FyPu5Rc55F8wpZjnpOFk8gFLyJDPn+QZr49WogFZlOBELhb/6kon2b/ngmnB25Zq1i9PIjOpaPAxojUnvZpNGG4hi1fwb6QhNsDbCd2T9MfarFAhqikfR41a+gWOaGVnfMTdWq4XP4fWZ4DoJmM3Gw/mDGSw==,keyFactoryAlgorithm:PBKDF2WithHmacSHA1,cipherAlgorithm:AES/GCM/NoPadding,authenticationTagLength:128,iterations:1024,passwordLength:3,encryptedPassword:xQ+C2ks+wgXq3Xkd8ghM3f7ANg==";

    fn kafka_default(secret: &str) -> PasswordEncoder {
        PasswordEncoder::new(secret, None, CBC, 128, 4096).unwrap()
    }

    #[test]
    fn values_kafka_encoded_are_read() {
        let e = kafka_default("encoder-secret");
        assert_eq!(e.decode(KAFKA_CBC).unwrap(), "alice-secret ü");
        assert_eq!(e.decode(KAFKA_GCM).unwrap(), "bob");
        // Another secret cannot read them, and says so without the value.
        let wrong = kafka_default("other-secret");
        assert!(wrong
            .decode(KAFKA_CBC)
            .unwrap_err()
            .contains("could not be decoded"));
        assert!(wrong
            .decode(KAFKA_GCM)
            .unwrap_err()
            .contains("could not be decoded"));
    }

    #[test]
    fn values_encoded_here_read_back_in_every_cipher() {
        for (cipher, bits, factory) in [
            (CBC, 128, None),
            (CBC, 256, Some(SHA1)),
            (CBC, 192, None),
            (GCM, 128, None),
            (GCM, 256, Some(SHA512)),
        ] {
            let e = PasswordEncoder::new("s3cret", factory, cipher, bits, 1024).unwrap();
            let encoded = e.encode("user_alice=\"x\" ü");
            assert!(!encoded.contains("user_alice"), "{encoded}");
            assert!(encoded.contains(&format!("cipherAlgorithm:{cipher}")));
            assert_eq!(e.decode(&encoded).unwrap(), "user_alice=\"x\" ü");
            // Each encoding has its own salt and IV.
            assert_ne!(e.encode("p"), e.encode("p"));
        }
    }

    #[test]
    fn damaged_and_unsupported_values_are_refused() {
        let e = kafka_default("encoder-secret");
        for damaged in [
            KAFKA_CBC.replace("passwordLength:14", "passwordLength:13"),
            KAFKA_CBC.replace("iterations:4096", "iterations:0"),
            KAFKA_CBC.replace("iterations:4096", "iterations:4000000000"),
            KAFKA_CBC.replace("AES/CBC/PKCS5Padding", "DES/CBC/PKCS5Padding"),
            KAFKA_CBC.replace(
                "initializationVector:piDqy7+FeSOhWtV75I33jg==",
                "initializationVector:AAAA",
            ),
            KAFKA_CBC.replace("encryptedPassword:", "encryptedPassword:!"),
            KAFKA_GCM.replace("authenticationTagLength:128", "authenticationTagLength:96"),
            "keyLength:128".to_string(),
            String::new(),
        ] {
            assert!(e.decode(&damaged).is_err(), "{damaged}");
        }
        assert!(PasswordEncoder::new("s", Some("PBKDF2WithHmacMD5"), CBC, 128, 1).is_err());
        assert!(PasswordEncoder::new("s", None, GCM, 192, 1).is_err());
    }

    #[test]
    fn values_under_the_old_secret_are_encoded_again_under_the_new_one() {
        let jaas = "listener.name.sasl.plain.sasl.jaas.config";
        let keystore = "listener.name.ssl.ssl.keystore.password";
        let old = kafka_default("encoder-secret");
        let new = kafka_default("rotated-secret");
        let already_new = new.encode("kept");
        // What a Kafka 3.9.1 broker stored under the old secret, one value already under
        // the new one (the old secret left set across a second restart), and a plain key.
        let stored: BTreeMap<String, String> = [
            (jaas.to_string(), KAFKA_CBC.to_string()),
            (keystore.to_string(), already_new.clone()),
            ("log.cleaner.threads".to_string(), "2".to_string()),
        ]
        .into();
        let out = re_encode(&stored, &old, Some(&new)).unwrap().unwrap();
        assert_eq!(new.decode(&out[jaas]).unwrap(), "alice-secret ü");
        assert!(
            old.decode(&out[jaas]).is_err(),
            "no longer under the old secret"
        );
        assert_eq!(out[keystore], already_new);
        assert_eq!(out["log.cleaner.threads"], "2");
        // GCM too, with the algorithms it was stored with.
        let gcm = PasswordEncoder::new("encoder-secret", Some(SHA1), GCM, 256, 1024).unwrap();
        let gcm_new = PasswordEncoder::new("rotated-secret", Some(SHA1), GCM, 256, 1024).unwrap();
        let stored_gcm: BTreeMap<String, String> =
            [(jaas.to_string(), KAFKA_GCM.to_string())].into();
        let out = re_encode(&stored_gcm, &gcm, Some(&gcm_new))
            .unwrap()
            .unwrap();
        assert_eq!(gcm_new.decode(&out[jaas]).unwrap(), "bob");
        // Nothing to do without password configs; no new secret to encode with: refused.
        let plain: BTreeMap<String, String> =
            [("log.cleaner.threads".to_string(), "2".to_string())].into();
        assert_eq!(re_encode(&plain, &old, Some(&new)).unwrap(), None);
        assert_eq!(
            re_encode(&stored, &old, None).unwrap_err(),
            "Password encoder secret not configured"
        );
    }

    #[test]
    fn only_password_configs_are_encoded_and_an_undecodable_one_is_left_out() {
        let jaas = "listener.name.sasl.plain.sasl.jaas.config";
        let configs: BTreeMap<String, String> = [
            (
                jaas.to_string(),
                "PlainLoginModule required user_alice=\"a\";".to_string(),
            ),
            ("log.cleaner.threads".to_string(), "2".to_string()),
        ]
        .into();
        assert_eq!(
            to_persistent(&configs, None, true).unwrap_err(),
            "Password encoder secret not configured"
        );
        let e = kafka_default("encoder-secret");
        assert_eq!(
            to_persistent(&configs, Some(&e), false).unwrap_err(),
            "Password config can be defined only at broker level"
        );
        let stored = to_persistent(&configs, Some(&e), true).unwrap();
        assert_eq!(stored["log.cleaner.threads"], "2");
        assert!(stored[jaas].starts_with("keyFactoryAlgorithm:"));
        assert_eq!(from_persistent(stored.clone(), Some(&e)), configs);
        let wrong = kafka_default("other");
        let read = from_persistent(stored, Some(&wrong));
        assert_eq!(read.len(), 1);
        assert!(!read.contains_key(jaas));
    }
}
