//! Kafka's rules for topic names.

/// Longest legal name: 249, so `<topic>-<partition>` fits a 255-byte file name.
pub const MAX_NAME_LENGTH: usize = 249;

/// Checks a topic name as Kafka's `Topic.validate` does; returns why it is illegal.
pub fn validate(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("Topic name is illegal, it can't be empty".into());
    }
    if name == "." || name == ".." {
        return Err("Topic name cannot be \".\" or \"..\"".into());
    }
    if name.len() > MAX_NAME_LENGTH {
        return Err(format!(
            "Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}"
        ));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(format!(
            "Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// Kafka refuses two topics whose names differ only by '.' versus '_', since their
/// metric names would collide.
pub fn collides(a: &str, b: &str) -> bool {
    a != b && a.replace('.', "_") == b.replace('.', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules() {
        assert!(validate("orders-v1.eu_west").is_ok());
        assert!(validate("").is_err());
        assert!(validate("..").is_err());
        assert!(validate("a b").is_err());
        assert!(validate("ü").is_err());
        assert!(validate(&"x".repeat(249)).is_ok());
        assert!(validate(&"x".repeat(250)).is_err());
        assert!(collides("a.b", "a_b"));
        assert!(!collides("a.b", "a.b"));
    }
}
