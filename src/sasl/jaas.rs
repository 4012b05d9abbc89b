//! Kafka's `sasl.jaas.config` grammar (its `JaasConfig`, a `StreamTokenizer` over the
//! value):
//!
//! ```text
//! config  = module+
//! module  = class-name flag option* ";"
//! flag    = required | requisite | sufficient | optional      (any case)
//! option  = name "=" value
//! value   = word | "quoted" | 'quoted'      (backslash escapes inside quotes)
//! ```
//!
//! Words are letters, digits and `. - _ $`; `//` and `/* */` comments are skipped. A
//! value is a word or a quoted string; a bare number is refused, as Kafka refuses it. Every
//! error names the line and column it was found at, and never quotes a value (values are
//! passwords).

use std::collections::BTreeMap;

/// One login module of a JAAS config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginModule {
    pub class_name: String,
    pub flag: ControlFlag,
    pub options: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlFlag {
    Required,
    Requisite,
    Sufficient,
    Optional,
}

/// Why a JAAS config cannot be parsed, and where (1-based).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (line {line}, column {column})")]
pub struct JaasError {
    pub message: String,
    pub line: usize,
    pub column: usize,
}

/// The largest config parsed: a JAAS value with a few thousand users is a few hundred KiB.
pub const MAX_JAAS_BYTES: usize = 1024 * 1024;

/// Parses every login module of `text`.
pub fn parse(text: &str) -> Result<Vec<LoginModule>, JaasError> {
    if text.len() > MAX_JAAS_BYTES {
        return Err(JaasError {
            message: format!("JAAS config is longer than {MAX_JAAS_BYTES} bytes"),
            line: 1,
            column: 1,
        });
    }
    let mut t = Tokenizer::new(text);
    let mut modules = Vec::new();
    loop {
        let (token, at) = t.next()?;
        match token {
            Token::Eof => break,
            Token::Word(class_name) => modules.push(parse_module(&mut t, class_name)?),
            _ => return Err(at.error("Invalid JAAS config entry, missing login module name")),
        }
    }
    if modules.is_empty() {
        return Err(JaasError {
            message: "JAAS config property does not contain any login modules".into(),
            line: 1,
            column: 1,
        });
    }
    Ok(modules)
}

/// The single login module a broker's `sasl.jaas.config` must hold, of `class_name`.
pub fn parse_single(text: &str, class_name: &str) -> Result<LoginModule, JaasError> {
    let mut modules = parse(text)?;
    if modules.len() != 1 {
        return Err(JaasError {
            message: format!(
                "JAAS config property contains {} login modules, should be 1 module",
                modules.len()
            ),
            line: 1,
            column: 1,
        });
    }
    let module = modules.remove(0);
    if module.class_name != class_name {
        return Err(JaasError {
            message: format!(
                "JAAS config names login module {}, expected {class_name}",
                module.class_name
            ),
            line: 1,
            column: 1,
        });
    }
    Ok(module)
}

fn parse_module(t: &mut Tokenizer<'_>, class_name: String) -> Result<LoginModule, JaasError> {
    let (token, at) = t.next()?;
    let flag = match token {
        Token::Word(w) => match w.to_ascii_lowercase().as_str() {
            "required" => ControlFlag::Required,
            "requisite" => ControlFlag::Requisite,
            "sufficient" => ControlFlag::Sufficient,
            "optional" => ControlFlag::Optional,
            _ => {
                return Err(at.error(format!(
                    "Invalid login module control flag '{w}' in JAAS config"
                )))
            }
        },
        _ => return Err(at.error("Invalid login module control flag in JAAS config")),
    };
    let mut options = BTreeMap::new();
    loop {
        let (token, at) = t.next()?;
        let key = match token {
            Token::Semicolon => break,
            Token::Eof => return Err(at.error("JAAS config entry not terminated by semi-colon")),
            Token::Word(k) => k,
            _ => return Err(at.error("Invalid JAAS config entry: expected an option name")),
        };
        let (eq, at) = t.next()?;
        if eq != Token::Equals {
            return Err(at.error(format!(
                "Value not specified for key '{key}' in JAAS config"
            )));
        }
        let (value, at) = t.next()?;
        let value = match value {
            Token::Word(v) | Token::Quoted(v) => v,
            _ => {
                return Err(at.error(format!(
                    "Value not specified for key '{key}' in JAAS config"
                )))
            }
        };
        options.insert(key, value);
    }
    Ok(LoginModule {
        class_name,
        flag,
        options,
    })
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Number,
    Equals,
    Semicolon,
    Other(char),
    Eof,
}

#[derive(Clone, Copy)]
struct At {
    line: usize,
    column: usize,
}

impl At {
    fn error(self, message: impl Into<String>) -> JaasError {
        JaasError {
            message: message.into(),
            line: self.line,
            column: self.column,
        }
    }
}

struct Tokenizer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
    column: usize,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '-' | '_' | '$')
}

impl<'a> Tokenizer<'a> {
    fn new(text: &'a str) -> Self {
        Tokenizer {
            chars: text.chars().peekable(),
            line: 1,
            column: 1,
        }
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.next()?;
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn at(&self) -> At {
        At {
            line: self.line,
            column: self.column,
        }
    }

    /// Skips whitespace and comments; an unterminated `/*` is an error.
    fn skip(&mut self) -> Result<(), JaasError> {
        loop {
            match self.chars.peek() {
                Some(c) if c.is_whitespace() => {
                    self.bump();
                }
                Some('/') => {
                    let at = self.at();
                    let mut ahead = self.chars.clone();
                    ahead.next();
                    match ahead.next() {
                        Some('/') => while self.bump().is_some_and(|c| c != '\n') {},
                        Some('*') => {
                            self.bump();
                            self.bump();
                            let mut star = false;
                            loop {
                                match self.bump() {
                                    None => return Err(at.error("unterminated comment")),
                                    Some('/') if star => break,
                                    Some(c) => star = c == '*',
                                }
                            }
                        }
                        _ => return Ok(()),
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn next(&mut self) -> Result<(Token, At), JaasError> {
        self.skip()?;
        let at = self.at();
        let Some(&c) = self.chars.peek() else {
            return Ok((Token::Eof, at));
        };
        let token = match c {
            '=' => {
                self.bump();
                Token::Equals
            }
            ';' => {
                self.bump();
                Token::Semicolon
            }
            '"' | '\'' => Token::Quoted(self.quoted(c, at)?),
            c if c.is_ascii_digit() => {
                while self.chars.peek().is_some_and(|c| is_word_char(*c)) {
                    self.bump();
                }
                Token::Number
            }
            c if is_word_char(c) => {
                let mut word = String::new();
                while let Some(&c) = self.chars.peek().filter(|c| is_word_char(**c)) {
                    word.push(c);
                    self.bump();
                }
                Token::Word(word)
            }
            other => {
                self.bump();
                Token::Other(other)
            }
        };
        Ok((token, at))
    }

    /// A quoted string from its opening `quote`: Java's escapes (`\n`, `\t`, octal, and
    /// any other character standing for itself). It must close on its own line.
    fn quoted(&mut self, quote: char, at: At) -> Result<String, JaasError> {
        self.bump();
        let mut out = String::new();
        loop {
            let c = match self.bump() {
                None | Some('\n') => return Err(at.error("unterminated quoted string")),
                Some(c) => c,
            };
            if c == quote {
                return Ok(out);
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            let escaped = match self.bump() {
                None | Some('\n') => return Err(at.error("unterminated quoted string")),
                Some(e) => e,
            };
            out.push(match escaped {
                'a' => '\x07',
                'b' => '\x08',
                'f' => '\x0c',
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                'v' => '\x0b',
                d @ '0'..='7' => {
                    // Up to three octal digits, at most 0o377.
                    let mut value = d.to_digit(8).unwrap_or(0);
                    let max_digits = if d <= '3' { 2 } else { 1 };
                    for _ in 0..max_digits {
                        match self.chars.peek().and_then(|c| c.to_digit(8)) {
                            Some(v) => {
                                value = value * 8 + v;
                                self.bump();
                            }
                            None => break,
                        }
                    }
                    char::from_u32(value).unwrap_or('\u{fffd}')
                }
                other => other,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafkas_plain_config_parses() {
        let text = r#"org.apache.kafka.common.security.plain.PlainLoginModule required
            username="admin"
            password="admin-secret"   // the broker's own
            user_admin="admin-secret"
            /* a user with quotes */ user_alice='al"ice\'s \\ pass\n';"#;
        let m = parse_single(
            text,
            "org.apache.kafka.common.security.plain.PlainLoginModule",
        )
        .unwrap();
        assert_eq!(m.flag, ControlFlag::Required);
        assert_eq!(m.options["username"], "admin");
        assert_eq!(m.options["password"], "admin-secret");
        assert_eq!(m.options["user_admin"], "admin-secret");
        assert_eq!(m.options["user_alice"], "al\"ice's \\ pass\n");
        assert_eq!(m.options.len(), 4);
    }

    #[test]
    fn several_modules_and_flags() {
        let all = parse("a.B REQUIRED x=y; c.D optional; e.F Sufficient k=\"\\101\\60\";").unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[1].flag, ControlFlag::Optional);
        assert!(all[1].options.is_empty());
        assert_eq!(all[2].options["k"], "A0");
        assert!(parse_single("a.B required; c.D required;", "a.B")
            .unwrap_err()
            .message
            .contains("contains 2 login modules"));
    }

    #[test]
    fn errors_name_the_line_and_column_and_not_the_value() {
        let err = |text: &str| parse(text).unwrap_err();
        let e = err("m.M required\n  username=\"admin\"\n  password=");
        assert_eq!((e.line, e.column), (3, 12), "{e}");
        assert_eq!(
            e.message,
            "Value not specified for key 'password' in JAAS config"
        );
        let e = err("m.M mandatory;");
        assert_eq!((e.line, e.column), (1, 5));
        assert!(e.to_string().contains("'mandatory'"));
        let e = err("m.M required user=\"s3cret;\n");
        assert_eq!((e.line, e.column), (1, 19));
        assert!(!e.to_string().contains("s3cret"), "{e}");
        assert_eq!(
            err("m.M required a=b").message,
            "JAAS config entry not terminated by semi-colon"
        );
        assert_eq!(
            err("m.M required n=42;").message,
            "Value not specified for key 'n' in JAAS config"
        );
        assert!(err("   ")
            .message
            .contains("does not contain any login modules"));
        assert!(err("m.M required /* open")
            .message
            .contains("unterminated comment"));
        assert!(err("= m.M required;")
            .message
            .contains("missing login module name"));
    }
}
