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
        Ok(Listener { name, host, port })
    }

    /// `listener.security.protocol.map` (`INTERNAL:SSL,EXTERNAL:PLAINTEXT`), names upper case.
    pub fn protocol_map(
        protocol_map: &str,
    ) -> Result<std::collections::HashMap<String, String>, ConfigError> {
        let mut protocols = std::collections::HashMap::new();
        for entry in protocol_map
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let (name, protocol) = entry.split_once(':').ok_or_else(|| {
                bad(
                    "listener.security.protocol.map",
                    format!("{entry:?} is not NAME:PROTOCOL"),
                )
            })?;
            protocols.insert(
                name.trim().to_ascii_uppercase(),
                protocol.trim().to_ascii_uppercase(),
            );
        }
        Ok(protocols)
    }

    /// Kafka's checks across the listener keys: names are unique, every advertised name is
    /// a bound listener, every name has a security protocol in
    /// `listener.security.protocol.map` (`INTERNAL:PLAINTEXT,EXTERNAL:SSL`), and the
    /// inter-broker listener is advertised.
    pub fn check_names(
        listeners: &[Listener],
        advertised: &[Listener],
        protocol_map: &str,
        inter_broker: Option<&str>,
    ) -> Result<(), ConfigError> {
        let protocols = Listener::protocol_map(protocol_map)?;
        for (i, l) in listeners.iter().enumerate() {
            if listeners[..i].iter().any(|o| o.name == l.name) {
                return Err(bad(
                    "listeners",
                    format!(
                        "each listener must have a different name, {} is repeated",
                        l.name
                    ),
                ));
            }
            match protocols.get(&l.name).map(String::as_str) {
                Some("PLAINTEXT" | "SSL" | "SASL_PLAINTEXT" | "SASL_SSL") => {}
                Some(other) => {
                    return Err(bad(
                        "listener.security.protocol.map",
                        format!(
                            "listener {} has unknown security protocol {other}; Kafka's are PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL",
                            l.name
                        ),
                    ))
                }
                None => {
                    return Err(bad(
                        "listener.security.protocol.map",
                        format!("no security protocol defined for listener {}", l.name),
                    ))
                }
            }
        }
        if let Some(a) = advertised
            .iter()
            .find(|a| !listeners.iter().any(|l| l.name == a.name))
        {
            return Err(bad(
                "advertised.listeners",
                format!(
                    "listener {} is advertised but not in listeners; advertised listener names must be a subset of the listeners' names",
                    a.name
                ),
            ));
        }
        if let Some(inter) = inter_broker {
            let inter = inter.trim().to_ascii_uppercase();
            if !advertised.iter().any(|a| a.name == inter) {
                return Err(bad(
                    "inter.broker.listener.name",
                    format!("{inter} must be a listener name defined in advertised.listeners"),
                ));
            }
        }
        Ok(())
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
    }

    #[test]
    fn named_listeners_map_to_plaintext() {
        let map = "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL";
        let bound =
            Listener::parse_list("listeners", "INTERNAL://:19092,EXTERNAL://:9092").unwrap();
        let advertised = Listener::parse_list(
            "advertised.listeners",
            "INTERNAL://b1:19092,EXTERNAL://localhost:9092",
        )
        .unwrap();
        assert!(Listener::check_names(&bound, &advertised, map, Some("internal")).is_ok());
        // An SSL listener is served.
        let ssl = Listener::parse_list("listeners", "SSL://:9093").unwrap();
        assert!(Listener::check_names(&ssl, &ssl, map, None).is_ok());
        // A SASL listener is served too.
        let sasl = Listener::parse_list("listeners", "SASL_SSL://:9093").unwrap();
        assert!(Listener::check_names(&sasl, &sasl, map, None).is_ok());
        // A name without a protocol, an advertised name that is not bound, a repeated
        // name and an inter-broker listener that is not advertised are refused.
        let refused = |listeners: &str, advertised: &str, inter: Option<&str>| {
            let l = Listener::parse_list("listeners", listeners).unwrap();
            let a = Listener::parse_list("advertised.listeners", advertised).unwrap();
            Listener::check_names(&l, &a, map, inter).is_err()
        };
        assert!(refused("CLIENT://:9092", "CLIENT://:9092", None));
        assert!(refused("INTERNAL://:1", "EXTERNAL://:1", None));
        assert!(refused(
            "INTERNAL://:1,INTERNAL://:2",
            "INTERNAL://:1",
            None
        ));
        assert!(refused(
            "INTERNAL://:1,EXTERNAL://:2",
            "EXTERNAL://:2",
            Some("INTERNAL")
        ));
    }
}
