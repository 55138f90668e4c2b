//! Kafka's JAAS syntax, read the way Java reads it, because it is what users copy from
//! Kafka's docs and compose files: the `sasl.jaas.config` value
//! (`org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="…";`)
//! and a JAAS file given by `-Djava.security.auth.login.config=FILE` in `KAFKA_OPTS`, with
//! its `KafkaServer { … };` sections. Values are bare words or double-quoted strings with
//! backslash escapes (Java's `StreamTokenizer`); `//` and `/* */` comments are skipped.

use std::collections::BTreeMap;

/// One login module entry: `class flag key=value … ;`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoginModule {
    /// The module's class name (`…PlainLoginModule`, `…ScramLoginModule`).
    pub class: String,
    /// Its control flag (`required`, `requisite`, `sufficient`, `optional`).
    pub flag: String,
    /// Its options in order of appearance; a later duplicate replaces an earlier one.
    pub options: BTreeMap<String, String>,
}

/// The entries of a `sasl.jaas.config` value.
///
/// # Errors
/// A message saying what is malformed and where (no entry, no flag, a missing `;`, an
/// unterminated string).
pub fn parse_config(text: &str) -> Result<Vec<LoginModule>, String> {
    let tokens = tokenize(text)?;
    let mut at = 0;
    let mut modules = Vec::new();
    while at < tokens.len() {
        modules.push(entry(&tokens, &mut at)?);
    }
    if modules.is_empty() {
        return Err("no login module in the JAAS configuration".to_string());
    }
    Ok(modules)
}

/// The sections of a JAAS file: name → entries.
///
/// # Errors
/// As [`parse_config`], plus a section without `{`, `}` or its closing `;`.
pub fn parse_file(text: &str) -> Result<BTreeMap<String, Vec<LoginModule>>, String> {
    let tokens = tokenize(text)?;
    let mut at = 0;
    let mut sections = BTreeMap::new();
    while at < tokens.len() {
        let name = word(&tokens, &mut at, "a section name")?;
        expect(&tokens, &mut at, &Token::Open, "'{' after the section name")?;
        let mut modules = Vec::new();
        while tokens.get(at) != Some(&Token::Close) {
            if at >= tokens.len() {
                return Err(format!("section {name} has no closing '}}'"));
            }
            modules.push(entry(&tokens, &mut at)?);
        }
        at += 1;
        expect(&tokens, &mut at, &Token::Semicolon, "';' after '}'")?;
        sections.insert(name, modules);
    }
    Ok(sections)
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
    Open,
    Close,
}

fn entry(tokens: &[Token], at: &mut usize) -> Result<LoginModule, String> {
    let class = word(tokens, at, "a login module class")?;
    let flag = word(tokens, at, "a control flag after the login module class")?;
    if !["required", "requisite", "sufficient", "optional"]
        .contains(&flag.to_ascii_lowercase().as_str())
    {
        return Err(format!(
            "login module {class}: control flag '{flag}' is not one of required, requisite, sufficient, optional"
        ));
    }
    let mut options = BTreeMap::new();
    loop {
        match tokens.get(*at) {
            Some(Token::Semicolon) => {
                *at += 1;
                break;
            }
            Some(Token::Word(key)) => {
                *at += 1;
                expect(tokens, at, &Token::Equals, "'=' after an option name")?;
                let value = match tokens.get(*at) {
                    Some(Token::Word(v) | Token::Quoted(v)) => v.clone(),
                    _ => return Err(format!("login module {class}: option {key} has no value")),
                };
                *at += 1;
                options.insert(key.clone(), value);
            }
            Some(other) => {
                return Err(format!(
                    "login module {class}: unexpected {other:?} among the options"
                ))
            }
            None => {
                return Err(format!(
                    "login module {class}: the entry does not end with ';'"
                ))
            }
        }
    }
    Ok(LoginModule {
        class,
        flag,
        options,
    })
}

fn word(tokens: &[Token], at: &mut usize, what: &str) -> Result<String, String> {
    match tokens.get(*at) {
        Some(Token::Word(w)) => {
            *at += 1;
            Ok(w.clone())
        }
        other => Err(format!("expected {what}, found {other:?}")),
    }
}

fn expect(tokens: &[Token], at: &mut usize, token: &Token, what: &str) -> Result<(), String> {
    if tokens.get(*at) == Some(token) {
        *at += 1;
        Ok(())
    } else {
        Err(format!("expected {what}, found {:?}", tokens.get(*at)))
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                loop {
                    match chars.next() {
                        Some('/') if last == '*' => break,
                        Some(c) => last = c,
                        None => return Err("unterminated /* comment".to_string()),
                    }
                }
            }
            '=' => tokens.push(Token::Equals),
            ';' => tokens.push(Token::Semicolon),
            '{' => tokens.push(Token::Open),
            '}' => tokens.push(Token::Close),
            '"' | '\'' => tokens.push(Token::Quoted(quoted(&mut chars, c)?)),
            c => {
                let mut w = String::from(c);
                while let Some(&n) = chars.peek() {
                    if n.is_whitespace() || "=;{}\"'".contains(n) {
                        break;
                    }
                    w.push(n);
                    chars.next();
                }
                tokens.push(Token::Word(w));
            }
        }
    }
    Ok(tokens)
}

/// A quoted string after its opening quote, with Java's escapes.
fn quoted(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    quote: char,
) -> Result<String, String> {
    let mut s = String::new();
    loop {
        match chars.next() {
            None => return Err("unterminated quoted string".to_string()),
            Some(c) if c == quote => return Ok(s),
            Some('\\') => match chars.next() {
                Some('n') => s.push('\n'),
                Some('t') => s.push('\t'),
                Some('r') => s.push('\r'),
                Some(c) => s.push(c),
                None => return Err("unterminated quoted string".to_string()),
            },
            Some(c) => s.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The line from Kafka's SASL/PLAIN docs, and a file with two sections and comments.
    #[test]
    fn kafka_docs_syntax() {
        let m = parse_config(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required
                username="admin" password="admin-secret"
                user_admin="admin-secret" user_alice="a\"lice;secret";"#,
        )
        .expect("parses");
        assert_eq!(m.len(), 1);
        assert_eq!(
            m[0].class,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(m[0].options["user_alice"], "a\"lice;secret");
        assert_eq!(m[0].options["username"], "admin");
        let f = parse_file(
            "// broker\nKafkaServer {\n org.apache.kafka.common.security.plain.PlainLoginModule required\n user_bob=\"b\";\n};\n/* client */ KafkaClient { x.Y optional; };",
        )
        .expect("file");
        assert_eq!(f["KafkaServer"][0].options["user_bob"], "b");
        assert!(f["KafkaClient"][0].options.is_empty());
        for bad in [
            "",
            "x.Plain required user_a=\"a\"",
            "x.Plain sometimes;",
            "x.Plain required user_a=;",
            "x.Plain required user_a=\"open;",
        ] {
            assert!(parse_config(bad).is_err(), "{bad}");
        }
    }
}
