//! `--config FILE`: broker settings under Kafka's names, read from a file.
//!
//! Two formats, told apart by the file's extension:
//! - `.toml`: TOML. Tables nest the dotted name (`[log] retention.hours = 168` is
//!   `log.retention.hours`), values are strings, numbers or booleans (an array becomes a
//!   comma-separated list, as `controller.quorum.voters` takes it).
//! - anything else: Kafka's `server.properties`, i.e. Java's `Properties` text format, so an
//!   existing Kafka configuration can be used as it is. `#` and `!` start comments;
//!   `key=value`, `key: value` and `key value` all work; a line ending in `\` continues on
//!   the next; `\t`, `\n`, `\uXXXX` and `\`-escaped separators are understood.
//!
//! Each key goes through the same table as `--override` (`settings::apply`), so an unknown
//! key or a bad value is refused with the file, the key, the value and what is allowed.

use std::path::Path;

/// The `(key, value)` pairs of a config file, in file order.
///
/// # Errors
/// The file cannot be read or is not valid in its format; the message names the file.
pub fn read(path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
    let is_toml = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
    if is_toml {
        toml_entries(&text).map_err(|e| format!("config file {}: {e}", path.display()))
    } else {
        properties_entries(&text).map_err(|e| format!("config file {}: {e}", path.display()))
    }
}

/// TOML to dotted keys and string values.
fn toml_entries(text: &str) -> Result<Vec<(String, String)>, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
    let mut entries = Vec::new();
    flatten("", &table, &mut entries)?;
    Ok(entries)
}

fn flatten(
    prefix: &str,
    table: &toml::Table,
    entries: &mut Vec<(String, String)>,
) -> Result<(), String> {
    for (key, value) in table {
        let name = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            toml::Value::Table(inner) => flatten(&name, inner, entries)?,
            toml::Value::Array(items) => {
                let items: Result<Vec<String>, String> =
                    items.iter().map(|v| scalar(&name, v)).collect();
                entries.push((name, items?.join(",")));
            }
            other => {
                let text = scalar(&name, other)?;
                entries.push((name, text));
            }
        }
    }
    Ok(())
}

fn scalar(name: &str, value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        other => Err(format!(
            "{name}: a {} is not a setting value (use a string, number or boolean)",
            other.type_str()
        )),
    }
}

/// Java `Properties` text to `(key, value)` pairs.
fn properties_entries(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut entries = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((number, first)) = lines.next() {
        let first = first.trim_start();
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        // Join continuation lines: an odd number of trailing backslashes continues.
        let mut logical = first.to_string();
        while ends_with_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split_entry(&logical);
        let key = unescape(key).map_err(|e| format!("line {}: {e}", number + 1))?;
        let value = unescape(value).map_err(|e| format!("line {}: {e}", number + 1))?;
        entries.push((key, value));
    }
    Ok(entries)
}

fn ends_with_continuation(line: &str) -> bool {
    line.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// Splits at the first unescaped `=`, `:` or whitespace; the separator and the whitespace
/// around it are dropped.
fn split_entry(line: &str) -> (&str, &str) {
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => return (&line[..i], line[i + 1..].trim_start()),
            c if c.is_whitespace() => {
                let rest = line[i..].trim_start();
                let rest = rest.strip_prefix(['=', ':']).map_or(rest, str::trim_start);
                return (&line[..i], rest);
            }
            _ => {}
        }
    }
    (line, "")
}

fn unescape(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                    .and_then(char::from_u32)
                    .ok_or_else(|| format!("bad \\u escape '\\u{hex}'"))?;
                out.push(code);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(entries: &[(&str, &str)]) -> Vec<(String, String)> {
        entries
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    // What Kafka's own server.properties uses: comments, `=`, spaces around it, a
    // continued line, an escaped separator in a key, `:` and whitespace separators.
    #[test]
    fn properties_as_java_reads_them() {
        let text = "# a comment\n! another\n\nnode.id=1\n  log.dirs = /var/lib/logbook \n\
                    controller.quorum.voters=1@a:9093,\\\n    2@b:9093\nodd\\=key=x\n\
                    num.partitions: 3\nlog.retention.hours 168\nempty=\nunicode=caf\\u00e9\n";
        assert_eq!(
            properties_entries(text).expect("valid"),
            pairs(&[
                ("node.id", "1"),
                ("log.dirs", "/var/lib/logbook "),
                ("controller.quorum.voters", "1@a:9093,2@b:9093"),
                ("odd=key", "x"),
                ("num.partitions", "3"),
                ("log.retention.hours", "168"),
                ("empty", ""),
                ("unicode", "café"),
            ])
        );
        let e = properties_entries("a=\\u12\n").expect_err("short escape");
        assert!(e.contains("line 1"), "{e}");
    }

    // Tables nest the dotted names; arrays become lists.
    #[test]
    fn toml_keys_are_dotted_names() {
        let text =
            "\"node.id\" = 2\n[log]\n\"retention.hours\" = 24\n[log.cleaner]\nenable = false\n\
                    [controller.quorum]\nvoters = [\"1@a:9093\", \"2@b:9093\"]\n";
        let mut got = toml_entries(text).expect("valid");
        got.sort();
        assert_eq!(
            got,
            pairs(&[
                ("controller.quorum.voters", "1@a:9093,2@b:9093"),
                ("log.cleaner.enable", "false"),
                ("log.retention.hours", "24"),
                ("node.id", "2"),
            ])
        );
        assert!(toml_entries("x = 1979-05-27").is_err());
        assert!(toml_entries("x = ").is_err());
    }
}
