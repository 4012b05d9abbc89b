//! `listeners` / `advertised.listeners` entries: `NAME://host:port`.

use super::broker::ConfigError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    /// The listener name; with the default security map it is also the security protocol.
    pub name: String,
    /// Empty means every interface (bind) or, when advertised, `localhost`.
    pub host: String,
    pub port: u16,
}

impl Listener {
    pub fn parse_list(key: &str, value: &str) -> Result<Vec<Listener>, ConfigError> {
        let list: Vec<Listener> = value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| Listener::parse(key, s))
            .collect::<Result<_, _>>()?;
        if list.is_empty() {
            return Err(bad(key, "no listener given"));
        }
        Ok(list)
    }

    fn parse(key: &str, s: &str) -> Result<Listener, ConfigError> {
        let (name, rest) = s
            .split_once("://")
            .ok_or_else(|| bad(key, format!("{s:?} is not NAME://host:port")))?;
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| bad(key, format!("{s:?} has no port")))?;
        let port = port
            .parse::<u16>()
            .map_err(|_| bad(key, format!("{s:?} has an invalid port")))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let name = name.to_ascii_uppercase();
        if name != "PLAINTEXT" {
            return Err(bad(
                key,
                format!("listener {name} is not supported yet; only PLAINTEXT"),
            ));
        }
        Ok(Listener { name, host, port })
    }

    /// What Kafka advertises for a listener when `advertised.listeners` is unset.
    pub fn advertised_default(&self) -> Listener {
        let host = if self.host.is_empty() || self.host == "0.0.0.0" || self.host == "::" {
            "localhost".to_string()
        } else {
            self.host.clone()
        };
        Listener {
            host,
            ..self.clone()
        }
    }

    /// The socket address to bind.
    pub fn bind_addr(&self) -> String {
        if self.host.is_empty() {
            format!("0.0.0.0:{}", self.port)
        } else if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

fn bad(key: &str, why: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        why: why.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_advertises() {
        let l = Listener::parse_list("listeners", "PLAINTEXT://:9092").unwrap();
        assert_eq!(l[0].bind_addr(), "0.0.0.0:9092");
        assert_eq!(l[0].advertised_default().host, "localhost");
        let l = Listener::parse_list("listeners", "PLAINTEXT://127.0.0.1:19092").unwrap();
        assert_eq!(l[0].bind_addr(), "127.0.0.1:19092");
        assert!(Listener::parse_list("listeners", "PLAINTEXT://x").is_err());
        assert!(Listener::parse_list("listeners", "SSL://:9093").is_err());
    }
}
