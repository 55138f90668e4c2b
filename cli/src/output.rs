//! How the tools print: aligned columns for people (comfy-table, no borders, as `rpk`
//! prints), JSON for scripts.

use comfy_table::{presets, ContentArrangement, Table};

/// An aligned table with a header row; empty cells stay empty.
#[must_use]
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut table = Table::new();
    table
        .load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(headers.iter().copied());
    for row in rows {
        table.add_row(row.iter().map(String::as_str));
    }
    // comfy-table pads every line with a leading space under this preset.
    table
        .lines()
        .map(|line| {
            line.trim_end()
                .strip_prefix(' ')
                .unwrap_or(line.trim_end())
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Prints `value` as one line of JSON.
pub fn json(value: &serde_json::Value) {
    write_line(&value.to_string());
}

/// Writes `text` and a newline to stdout; exits with status 0 if stdout is closed.
pub fn write_line(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
        std::process::exit(0);
    }
}
