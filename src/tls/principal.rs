//! The principal of a TLS client, as Kafka's `DefaultKafkaPrincipalBuilder` builds it:
//! the distinguished name of the client's certificate, as Java's
//! `X500Principal.getName()` prints it (RFC 2253), through `ssl.principal.mapping.rules`;
//! `User:ANONYMOUS` when the client sent no certificate.
//!
//! Rules (Kafka's `SslPrincipalMapper`): a list of `RULE:pattern/replacement/[LU]` and
//! `DEFAULT`, separated by commas or newlines; the first rule whose pattern matches the
//! whole DN gives the name (the replacement with `$1`… for the pattern's groups, then
//! lower- or upper-cased with `L` / `U`); `DEFAULT` gives the DN itself. A DN no rule
//! matches has no principal, and the client is refused.

use regex::Regex;
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::x509::AttributeTypeAndValue;

/// One mapping rule.
#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        /// The pattern anchored at both ends: Java's `Matcher.matches`.
        whole: Regex,
        /// The pattern as written: Java's `replaceAll` replaces every match of it.
        pattern: Regex,
        /// The replacement in the regex crate's syntax (`${1}`).
        replacement: String,
        case: Case,
    },
}

#[derive(Debug, Clone, Copy)]
enum Case {
    Keep,
    Lower,
    Upper,
}

#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

impl PrincipalMapper {
    /// Parses `ssl.principal.mapping.rules`; the error says which rule is malformed.
    pub fn parse(rules: &str) -> Result<PrincipalMapper, String> {
        let mut out = Vec::new();
        for text in split_rules(rules)? {
            out.push(parse_rule(&text)?);
        }
        if out.is_empty() {
            out.push(Rule::Default);
        }
        Ok(PrincipalMapper { rules: out })
    }

    /// The principal name of `dn`, or why none: Kafka then fails the authentication.
    pub fn name_of(&self, dn: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Replace {
                    whole,
                    pattern,
                    replacement,
                    case,
                } => {
                    if !whole.is_match(dn) {
                        continue;
                    }
                    let name = pattern.replace_all(dn, replacement.as_str()).into_owned();
                    return Ok(match case {
                        Case::Keep => name,
                        Case::Lower => name.to_lowercase(),
                        Case::Upper => name.to_uppercase(),
                    });
                }
            }
        }
        Err(format!("No rules apply to {dn}"))
    }
}

/// Splits the rules at commas and newlines outside a rule's `pattern/replacement/` (a DN
/// pattern is full of commas), as Kafka's rule splitter does.
fn split_rules(text: &str) -> Result<Vec<String>, String> {
    let mut rules = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let len = if rest.starts_with("DEFAULT") {
            "DEFAULT".len()
        } else if let Some(body) = rest.strip_prefix("RULE:") {
            // pattern / replacement / [LU], each part with `\`-escapes.
            let mut slashes = 0;
            let mut end = None;
            let mut chars = body.char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '/' => {
                        slashes += 1;
                        if slashes == 2 {
                            end = Some(i + 1);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            let Some(mut end) = end else {
                return Err(format!("Invalid rule: {rest}"));
            };
            if body[end..].starts_with(['L', 'U']) {
                end += 1;
            }
            "RULE:".len() + end
        } else {
            return Err(format!("Invalid rule: {rest}"));
        };
        rules.push(rest[..len].to_string());
        rest = rest[len..].trim_start_matches([' ', '\t', '\r']);
        match rest.chars().next() {
            None => {}
            Some(',' | '\n') => rest = rest[1..].trim_start(),
            Some(_) => return Err(format!("Invalid rule: {rest}")),
        }
    }
    Ok(rules)
}

fn parse_rule(text: &str) -> Result<Rule, String> {
    if text == "DEFAULT" {
        return Ok(Rule::Default);
    }
    let invalid = || format!("Invalid rule: {text}");
    let body = text.strip_prefix("RULE:").ok_or_else(invalid)?;
    let (pattern, rest) = split_unescaped(body).ok_or_else(invalid)?;
    let (replacement, flag) = split_unescaped(rest).ok_or_else(invalid)?;
    let case = match flag {
        "" => Case::Keep,
        "L" => Case::Lower,
        "U" => Case::Upper,
        _ => return Err(invalid()),
    };
    let pattern_text = pattern.replace("\\/", "/");
    let compile = |p: &str| Regex::new(p).map_err(|e| format!("{}: {e}", invalid()));
    Ok(Rule::Replace {
        whole: compile(&format!("^(?:{pattern_text})$"))?,
        pattern: compile(&pattern_text)?,
        replacement: java_replacement(&replacement.replace("\\/", "/")),
        case,
    })
}

/// Splits at the first `/` not escaped by a backslash.
fn split_unescaped(s: &str) -> Option<(&str, &str)> {
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '/' if !escaped => return Some((&s[..i], &s[i + 1..])),
            _ => escaped = false,
        }
    }
    None
}

/// Java's replacement syntax (`$1`, `\$` for a literal dollar) in the regex crate's
/// (`${1}`, `$$`).
fn java_replacement(java: &str) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' => {
                let mut group = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    group.push(*d);
                    chars.next();
                }
                match group.is_empty() {
                    true => out.push_str("$$"),
                    false => out.push_str(&format!("${{{group}}}")),
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// The subject of a DER certificate as Java's `X500Principal.getName()` prints it: RDNs
/// last to first, `,` between them, `+` inside a multi-valued one, RFC 2253's keywords
/// (CN, L, ST, O, OU, C, STREET, DC, UID) and the dotted OID with `#` and the value's DER
/// in hex for any other attribute.
pub fn subject_dn(cert_der: &[u8]) -> Result<String, String> {
    let (_, cert) = X509Certificate::from_der(cert_der)
        .map_err(|e| format!("cannot parse the client certificate: {e}"))?;
    let rdns: Vec<String> = cert
        .subject()
        .iter()
        .map(|rdn| rdn.iter().map(attribute).collect::<Vec<_>>().join("+"))
        .collect();
    Ok(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

fn keyword(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

fn attribute(atv: &AttributeTypeAndValue<'_>) -> String {
    let oid = atv.attr_type().to_id_string();
    match (keyword(&oid), atv.as_str()) {
        (Some(k), Ok(value)) => format!("{k}={}", escape_rfc2253(value)),
        (k, _) => {
            let value = atv.attr_value();
            let mut der = Vec::new();
            let tag = value.tag().0;
            if tag < 31 {
                der.push(tag as u8);
                der.extend(der_length(value.data.len()));
            }
            der.extend_from_slice(value.data);
            let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
            format!("{}=#{hex}", k.map_or(oid.clone(), str::to_string))
        }
    }
}

fn der_length(len: usize) -> Vec<u8> {
    if len < 0x80 {
        return vec![len as u8];
    }
    let bytes: Vec<u8> = len
        .to_be_bytes()
        .into_iter()
        .skip_while(|b| *b == 0)
        .collect();
    let mut out = vec![0x80 | bytes.len() as u8];
    out.extend(bytes);
    out
}

/// RFC 2253 §2.4: `,+"\<>;` and `=` escaped, and `#` or a space at the start, a space at
/// the end.
fn escape_rfc2253(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';' | '=')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_matching_rule_names_the_principal() {
        let m = PrincipalMapper::parse(
            "RULE:^CN=([a-zA-Z0-9.-]*),OU=ServiceUsers.*$/$1/L, RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/, DEFAULT",
        )
        .unwrap();
        assert_eq!(
            m.name_of("CN=Kafka-Broker,OU=ServiceUsers,O=Acme,C=US")
                .unwrap(),
            "kafka-broker"
        );
        assert_eq!(
            m.name_of("CN=alice,OU=Eng,O=Acme,C=US").unwrap(),
            "alice@Eng"
        );
        assert_eq!(m.name_of("O=Acme,C=US").unwrap(), "O=Acme,C=US");
        let upper = PrincipalMapper::parse("RULE:^CN=(.*)$/$1/U").unwrap();
        assert_eq!(upper.name_of("CN=bob").unwrap(), "BOB");
        assert!(upper
            .name_of("OU=x")
            .unwrap_err()
            .contains("No rules apply"));
        // A rule over several lines, and an escaped slash in a pattern.
        let m = PrincipalMapper::parse("RULE:^CN=a\\/b$/ab/\nDEFAULT").unwrap();
        assert_eq!(m.name_of("CN=a/b").unwrap(), "ab");
        assert_eq!(
            PrincipalMapper::parse("").unwrap().name_of("CN=x").unwrap(),
            "CN=x"
        );
    }

    #[test]
    fn malformed_rules_are_refused() {
        for bad in [
            "RULE:^CN=(.*)$",
            "RULE:^CN=(.*)$/$1/X",
            "RULE:^CN=((.*)$/$1/",
            "NOT_A_RULE",
            "DEFAULT DEFAULT",
        ] {
            assert!(PrincipalMapper::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn java_replacements_translate() {
        assert_eq!(java_replacement("$1@$2"), "${1}@${2}");
        assert_eq!(java_replacement("\\$x$10"), "$$x${10}");
    }

    #[test]
    fn subject_prints_as_java_does() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        let mut dn = rcgen::DistinguishedName::new();
        dn.push(rcgen::DnType::CountryName, "US");
        dn.push(rcgen::DnType::OrganizationName, "Acme, Inc.");
        dn.push(rcgen::DnType::OrganizationalUnitName, "Eng");
        dn.push(rcgen::DnType::CommonName, "alice");
        params.distinguished_name = dn;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(
            subject_dn(cert.der()).unwrap(),
            "CN=alice,OU=Eng,O=Acme\\, Inc.,C=US"
        );
    }
}
