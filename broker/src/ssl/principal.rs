//! The principal of an mTLS connection (Kafka's `DefaultKafkaPrincipalBuilder` with
//! `SslPrincipalMapper`): the client certificate's subject, written as Java's
//! `X500Principal.getName()` writes it (RFC 2253: last RDN first, no spaces,
//! `CN=alice,OU=eng,O=Acme,C=US`), then mapped by `ssl.principal.mapping.rules`.
//!
//! Rules are Kafka's: `DEFAULT` (the name as it is) or `RULE:pattern/replacement/[LU]`,
//! tried in order; the first whose pattern matches the whole name gives the principal
//! name (`$1` … refer to its groups), lower- or upper-cased if asked. A name no rule
//! matches fails the connection, as in Kafka. Without a client certificate the principal
//! is `ANONYMOUS`.

use regex::Regex;
use x509_parser::oid_registry::Oid;

/// One rule of `ssl.principal.mapping.rules`.
#[derive(Debug)]
enum Rule {
    Default,
    Replace {
        pattern: Regex,
        /// The replacement, with `$N` written as `${N}` for the regex crate.
        replacement: String,
        case: Option<char>,
    },
}

/// The parsed `ssl.principal.mapping.rules`.
#[derive(Debug)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

impl Default for PrincipalMapper {
    fn default() -> Self {
        PrincipalMapper {
            rules: vec![Rule::Default],
        }
    }
}

impl PrincipalMapper {
    /// Parses Kafka's rule list (comma- or newline-separated).
    ///
    /// # Errors
    /// A rule that is neither `DEFAULT` nor `RULE:pattern/replacement/[LU]`, or whose
    /// pattern is not a regular expression.
    pub fn parse(rules: &str) -> Result<Self, String> {
        let mut parsed = Vec::new();
        let mut rest = rules.trim();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                parsed.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) = until_slash(after)
                    .ok_or_else(|| format!("rule '{rest}' has no '/' after its pattern"))?;
                let (replacement, after) = until_slash(after)
                    .ok_or_else(|| format!("rule '{rest}' has no '/' after its replacement"))?;
                let (case, after) = match after.chars().next() {
                    Some(c @ ('L' | 'U')) => (Some(c), &after[1..]),
                    _ => (None, after),
                };
                let pattern = Regex::new(&format!("^(?:{pattern})$"))
                    .map_err(|e| format!("rule pattern '{pattern}': {e}"))?;
                parsed.push(Rule::Replace {
                    pattern,
                    replacement: java_replacement(&replacement),
                    case,
                });
                rest = after;
            } else {
                return Err(format!(
                    "invalid rule '{rest}': expected DEFAULT or RULE:pattern/replacement/[LU]"
                ));
            }
            rest = rest.trim_start();
            rest = rest
                .strip_prefix(',')
                .or_else(|| rest.strip_prefix('\n'))
                .unwrap_or(rest)
                .trim_start();
        }
        if parsed.is_empty() {
            parsed.push(Rule::Default);
        }
        Ok(PrincipalMapper { rules: parsed })
    }

    /// The principal name of distinguished name `dn`.
    ///
    /// # Errors
    /// No rule applies (Kafka's `NoMatchingRule`).
    pub fn name(&self, dn: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Replace {
                    pattern,
                    replacement,
                    case,
                } => {
                    if pattern.is_match(dn) {
                        let name = pattern.replace(dn, replacement.as_str()).into_owned();
                        return Ok(match case {
                            Some('L') => name.to_lowercase(),
                            Some('U') => name.to_uppercase(),
                            _ => name,
                        });
                    }
                }
            }
        }
        Err(format!(
            "no ssl.principal.mapping.rules rule applies to {dn}"
        ))
    }
}

/// Text up to an unescaped `/` (a `\/` stays in the text as `/`), and what follows it.
fn until_slash(s: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '/' => return Some((out, &s[i + 1..])),
            '\\' => match chars.next() {
                Some((_, '/')) => out.push('/'),
                Some((_, n)) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push('\\'),
            },
            c => out.push(c),
        }
    }
    None
}

/// Java's `$1` replacement syntax for the regex crate, where `$1a` would name group `1a`.
fn java_replacement(replacement: &str) -> String {
    let mut out = String::new();
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push_str("${");
            while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                out.push(d);
                chars.next();
            }
            out.push('}');
        } else if c == '$' {
            out.push_str("$$");
        } else {
            out.push(c);
        }
    }
    out
}

/// The subject of DER certificate `der` as Java's `X500Principal.getName()` writes it.
///
/// # Errors
/// The certificate cannot be parsed.
pub fn subject_name(der: &[u8]) -> Result<String, String> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(der).map_err(|e| format!("client certificate: {e}"))?;
    let rdns: Vec<String> = cert
        .subject()
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|atv| attribute(atv.attr_type(), atv))
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    Ok(rdns.into_iter().rev().collect::<Vec<_>>().join(","))
}

/// `KEYWORD=value` for the attributes RFC 2253 names, `oid=#hex` (the value's DER) for
/// the others, as Java writes them.
fn attribute(oid: &Oid<'_>, atv: &x509_parser::x509::AttributeTypeAndValue<'_>) -> String {
    let keyword = match oid.to_id_string().as_str() {
        "2.5.4.3" => Some("CN"),
        "2.5.4.6" => Some("C"),
        "2.5.4.7" => Some("L"),
        "2.5.4.8" => Some("ST"),
        "2.5.4.9" => Some("STREET"),
        "2.5.4.10" => Some("O"),
        "2.5.4.11" => Some("OU"),
        "0.9.2342.19200300.100.1.25" => Some("DC"),
        "0.9.2342.19200300.100.1.1" => Some("UID"),
        _ => None,
    };
    match (keyword, atv.as_str()) {
        (Some(keyword), Ok(value)) => format!("{keyword}={}", escape(value)),
        _ => {
            use x509_parser::der_parser::asn1_rs::ToDer;
            let der = atv.attr_value().to_der_vec().unwrap_or_default();
            let hex: String = der.iter().map(|b| format!("{b:02x}")).collect();
            format!("{}=#{hex}", oid.to_id_string())
        }
    }
}

/// RFC 2253 escaping of an attribute value.
fn escape(value: &str) -> String {
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

    // The rules of Kafka's docs: the CN of certificates from one OU, lower-cased; DEFAULT
    // for the rest; a name no rule matches is an error.
    #[test]
    fn kafka_rules() {
        let m = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,\nRULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/,DEFAULT",
        )
        .expect("rules");
        assert_eq!(
            m.name("CN=Kafka-Broker,OU=ServiceUsers,O=Acme,C=US")
                .as_deref(),
            Ok("kafka-broker")
        );
        assert_eq!(
            m.name("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown")
                .as_deref(),
            Ok("adminUser@Admin")
        );
        assert_eq!(m.name("CN=other").as_deref(), Ok("CN=other"));
        let strict = PrincipalMapper::parse("RULE:^CN=([a-z]+)$/$1x/U").expect("rule");
        assert_eq!(strict.name("CN=bob").as_deref(), Ok("BOBX"));
        assert!(strict.name("CN=Bob,O=x").is_err());
        assert_eq!(
            PrincipalMapper::parse("DEFAULT")
                .expect("d")
                .name("CN=a,O=b")
                .as_deref(),
            Ok("CN=a,O=b")
        );
        assert!(PrincipalMapper::parse("RULE:abc").is_err());
        assert!(PrincipalMapper::parse("SOMETHING").is_err());
        assert_eq!(escape("a,b+c "), "a\\,b\\+c\\ ");
    }
}
