//! Java `.properties` files, as Kafka's `server.properties` is written.
//!
//! Supports what Kafka's own files use: `#`/`!` comments, `key=value`, `key:value` and
//! `key value` separators, backslash line continuations and the common escapes.

use std::collections::BTreeMap;

/// Parses properties text into an ordered map; a later duplicate key wins, as in Java.
pub fn parse(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut logical = String::new();
    for raw in text.lines() {
        let line = raw.trim_start();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        if ends_with_continuation(line) {
            logical.push_str(&line[..line.len() - 1]);
            continue;
        }
        logical.push_str(line);
        if let Some((k, v)) = split_pair(&logical) {
            out.insert(unescape(&k), unescape(&v));
        }
        logical.clear();
    }
    if !logical.is_empty() {
        if let Some((k, v)) = split_pair(&logical) {
            out.insert(unescape(&k), unescape(&v));
        }
    }
    out
}

/// A line continues when it ends in an odd number of backslashes.
fn ends_with_continuation(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// Splits at the first unescaped `=`, `:` or whitespace.
fn split_pair(line: &str) -> Option<(String, String)> {
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' | ' ' | '\t' => {
                let key = line[..i].to_string();
                let mut rest = line[i..].trim_start_matches([' ', '\t']);
                if c.is_whitespace() {
                    rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
                } else {
                    rest = &rest[1..];
                }
                return Some((key, rest.trim_start_matches([' ', '\t']).to_string()));
            }
            _ => {}
        }
    }
    if line.is_empty() {
        None
    } else {
        Some((line.to_string(), String::new()))
    }
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                if let Some(ch) = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    out.push(ch);
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kafka_style_file() {
        let text =
            "# comment\n! bang\nbroker.id=3\nlisteners = PLAINTEXT://:9092\nlog.dirs:/a,\\\n   /b\nkey value\nempty=\n";
        let p = parse(text);
        assert_eq!(p["broker.id"], "3");
        assert_eq!(p["listeners"], "PLAINTEXT://:9092");
        assert_eq!(p["log.dirs"], "/a,/b");
        assert_eq!(p["key"], "value");
        assert_eq!(p["empty"], "");
        assert_eq!(p.len(), 5);
    }

    #[test]
    fn escapes_and_later_duplicates() {
        let p = parse("a\\=b=c\\u0041\nx=1\nx=2\n");
        assert_eq!(p["a=b"], "cA");
        assert_eq!(p["x"], "2");
    }
}
