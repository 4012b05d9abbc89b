//! The `--add-scram` argument, in the syntax of Kafka's `kafka-storage.sh format
//! --add-scram`: `SCRAM-SHA-256=[name=alice,password=alice-secret]`, with an optional
//! `iterations=N` (4096 by default, as Kafka's tool; 4096 to 16384, Kafka's bounds) and
//! values optionally in double quotes (`password="a,b"`). Kafka's `salt` and
//! `saltedpassword` keys are refused: skua draws the salt itself.

use ring::rand::SecureRandom;

use super::scram::{ScramCredential, ScramMechanism};
use crate::controller::ScramChange;

/// Kafka's bounds on SCRAM iterations (`ScramMechanism.minIterations` and
/// `AlterUserScramCredentials`' maximum).
pub const MIN_ITERATIONS: u32 = 4096;
pub const MAX_ITERATIONS: u32 = 16384;
/// Bytes of salt drawn for each credential.
const SALT_BYTES: usize = 32;

/// What one `--add-scram` asks for (the password is kept only to derive the credential).
#[derive(Clone, PartialEq, Eq)]
pub struct ScramSpec {
    pub mechanism: ScramMechanism,
    pub name: String,
    password: String,
    pub iterations: u32,
}

impl std::fmt::Debug for ScramSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ScramSpec({} {} iterations {}, password hidden)",
            self.mechanism.name(),
            self.name,
            self.iterations
        )
    }
}

impl ScramSpec {
    /// Parses one argument; the error never holds the password.
    pub fn parse(spec: &str) -> Result<ScramSpec, String> {
        let (mechanism, rest) = spec
            .split_once('=')
            .ok_or("--add-scram takes MECHANISM=[name=NAME,password=PASSWORD]")?;
        let mechanism = ScramMechanism::from_name(mechanism.trim()).ok_or_else(|| {
            format!(
                "the add-scram mechanism {} is not supported (SCRAM-SHA-256 or SCRAM-SHA-512)",
                mechanism.trim()
            )
        })?;
        let body = rest
            .trim()
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
            .ok_or("--add-scram: the credential must be in [...]")?;
        let (mut name, mut password, mut iterations) = (None, None, None);
        for (key, value) in pairs(body)? {
            match key.as_str() {
                "name" => name = Some(value),
                "password" => password = Some(value),
                "iterations" => {
                    let n = value
                        .parse::<u32>()
                        .ok()
                        .filter(|n| (MIN_ITERATIONS..=MAX_ITERATIONS).contains(n))
                        .ok_or_else(|| {
                            format!("--add-scram: iterations must be a number from {MIN_ITERATIONS} to {MAX_ITERATIONS}")
                        })?;
                    iterations = Some(n);
                }
                "salt" | "saltedpassword" => {
                    return Err(format!(
                        "--add-scram: {key} is not taken (skua draws the salt; give the password)"
                    ))
                }
                other => return Err(format!("--add-scram: unknown key {other}")),
            }
        }
        let name = name
            .filter(|n| !n.is_empty())
            .ok_or("--add-scram: name is required")?;
        let password = password
            .filter(|p| !p.is_empty())
            .ok_or("--add-scram: password is required")?;
        Ok(ScramSpec {
            mechanism,
            name,
            password,
            iterations: iterations.unwrap_or(MIN_ITERATIONS),
        })
    }

    /// The change that writes this credential, with a salt drawn now.
    pub fn change(&self) -> Result<ScramChange, String> {
        let mut salt = [0u8; SALT_BYTES];
        ring::rand::SystemRandom::new()
            .fill(&mut salt)
            .map_err(|_| "no random bytes for the salt".to_string())?;
        Ok(ScramChange {
            user: self.name.clone(),
            mechanism: self.mechanism,
            credential: Some(ScramCredential::new(
                self.mechanism,
                &self.password,
                &salt,
                self.iterations,
            )),
        })
    }
}

/// `key=value` pairs split on commas outside double quotes; quotes are removed and `\"`
/// inside them is a quote.
fn pairs(body: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut chars = body.chars().peekable();
    loop {
        let key: String = chars.by_ref().take_while(|c| *c != '=').collect();
        let key = key.trim().to_string();
        if key.is_empty() {
            return Err("--add-scram: a key=value pair without a key".into());
        }
        while chars.peek() == Some(&' ') {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('\\') if chars.peek() == Some(&'"') => value.push(chars.next().unwrap()),
                    Some('"') => break,
                    Some(c) => value.push(c),
                    None => return Err(format!("--add-scram: the quoted {key} never ends")),
                }
            }
            while chars.peek().is_some_and(|c| *c != ',') {
                if !chars.next().is_some_and(char::is_whitespace) {
                    return Err(format!("--add-scram: text after the quoted {key}"));
                }
            }
        } else {
            while let Some(c) = chars.peek().copied().filter(|c| *c != ',') {
                value.push(c);
                chars.next();
            }
            value = value.trim().to_string();
        }
        out.push((key, value));
        match chars.next() {
            Some(',') => continue,
            None => return Ok(out),
            Some(_) => unreachable!("values end at a comma or the end"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_add_scram_syntax() {
        let s = ScramSpec::parse("SCRAM-SHA-512=[name=alice,password=alice-secret]").unwrap();
        assert_eq!(
            (s.mechanism, s.name.as_str(), s.iterations),
            (ScramMechanism::Sha512, "alice", 4096)
        );
        let s =
            ScramSpec::parse(r#"SCRAM-SHA-256=[name="bob", password="a,b\"c]", iterations=8192]"#)
                .unwrap();
        assert_eq!((s.name.as_str(), s.password.as_str()), ("bob", "a,b\"c]"));
        assert_eq!(s.iterations, 8192);
        let change = s.change().unwrap();
        let cred = change.credential.unwrap();
        assert_eq!(cred.iterations, 8192);
        assert_eq!(
            cred,
            ScramCredential::new(ScramMechanism::Sha256, "a,b\"c]", &cred.salt, 8192)
        );
        assert!(!format!("{s:?}").contains("a,b"));
    }

    #[test]
    fn what_it_refuses() {
        for (bad, why) in [
            ("SCRAM-SHA-1=[name=a,password=b]", "not supported"),
            ("SCRAM-SHA-512=name=a,password=b", "[...]"),
            ("SCRAM-SHA-512=[password=secret]", "name is required"),
            ("SCRAM-SHA-512=[name=a]", "password is required"),
            (
                "SCRAM-SHA-512=[name=a,password=secret,iterations=100]",
                "iterations",
            ),
            ("SCRAM-SHA-512=[name=a,password=secret,salt=abc]", "salt"),
            ("SCRAM-SHA-512=[name=a,pasword=secret]", "unknown key"),
            (r#"SCRAM-SHA-512=[name=a,password="secret]"#, "never ends"),
            ("SCRAM-SHA-512=[name=a,=secret]", "without a key"),
        ] {
            let e = ScramSpec::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
            assert!(!e.contains("secret"), "{bad}: {e}");
        }
    }
}
