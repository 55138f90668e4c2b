//! The human tables, the flat metric map behind the JSON line, and `--check`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::Res;

/// One printed table.
pub struct Table {
    title: String,
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with a title (printed above it) and column headers.
    pub fn new(title: impl Into<String>, headers: &[&str]) -> Table {
        Table {
            title: title.into(),
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (as many cells as headers).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as aligned text; the first column is left-aligned, the rest right-aligned.
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(String::len).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        let line = |cells: &[String]| {
            let mut out = String::from("  ");
            for (i, cell) in cells.iter().enumerate() {
                let w = widths.get(i).copied().unwrap_or(0);
                if i == 0 {
                    let _ = write!(out, "{cell:<w$}");
                } else {
                    let _ = write!(out, "  {cell:>w$}");
                }
            }
            out.trim_end().to_owned()
        };
        let mut out = format!("{}\n{}\n", self.title, line(&self.headers));
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out
    }
}

/// Formats an optional figure with `decimals` digits, or "-".
pub fn fmt(value: Option<f64>, decimals: usize) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v:.decimals$}"),
        _ => "-".to_owned(),
    }
}

/// Formats a ratio as a percentage, or "-".
pub fn pct(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{:.0}%", v * 100.0),
        _ => "-".to_owned(),
    }
}

/// Everything a run produced: tables in order and the flat metric map.
#[derive(Default)]
pub struct Report {
    /// Rendered tables, in section order.
    pub tables: Vec<String>,
    /// `section.scenario.figure` → value; this is what the JSON line and `--check` use.
    pub metrics: BTreeMap<String, f64>,
}

impl Report {
    /// Records a metric if the value is known and finite.
    pub fn metric(&mut self, key: impl Into<String>, value: Option<f64>) {
        if let Some(v) = value.filter(|v| v.is_finite()) {
            self.metrics.insert(key.into(), v);
        }
    }

    /// Prints a table now and keeps it for the final summary.
    pub fn table(&mut self, table: &Table) {
        let text = table.render();
        println!("\n{text}");
        self.tables.push(text);
    }
}

/// How `--check` judges one metric against the baseline: only gross regressions fail.
enum Rule {
    /// Fails above `factor` × baseline + `slack`.
    AtMost { factor: f64, slack: f64 },
    /// Fails below baseline / `factor`.
    AtLeast { factor: f64 },
    /// Fails when above zero, whatever the baseline.
    Zero,
    /// Reported only.
    Info,
}

fn rule_for(key: &str) -> Rule {
    let last = key.rsplit('.').next().unwrap_or(key);
    if matches!(last, "errors" | "lost" | "missing" | "unserved" | "failed") {
        return Rule::Zero;
    }
    // Per-scenario figures, ceilings and the scale section's latencies swing too much on
    // a shared two-core machine to guard; the guarded figures are totals and medians.
    match key {
        "produce.total.broker_cpu_s_per_gb" => Rule::AtMost {
            factor: 2.0,
            slack: 0.2,
        },
        // The broker's CPU per GB over the same run's reference workload (see
        // `ceilings::reference_produce_cpu_s_per_gb`): the machine's state moves both, a
        // regression in the broker's code moves only the first. Judged on the first
        // scenario, acks=all over 8 partitions: in CI, right after the build, the later
        // scenarios of one broker (acks=1, one partition) cost 1.4-2.1 CPU-s/GB in two
        // runs of three and 0.6-0.7 in the third, while this one gave 0.86-0.92 in all
        // three (its ratio 1.43-1.54; 1.40-1.62 over nine runs here). The all-four
        // ratio is reported, not judged.
        "produce.acks_all.p8.broker_cpu_vs_reference" => Rule::AtMost {
            factor: 1.3,
            slack: 0.0,
        },
        // Warm reads, not cold + warm: a cold read's broker CPU is mostly the kernel
        // refilling the page cache after `drop_caches` (the broker's own text included),
        // and swung 0.5-2.1 CPU-s/GB over eight runs of one binary on one machine; the
        // warm figure is the fetch path's own cost (0.22-0.37 over the same runs).
        "consume.warm.broker_cpu_s_per_gb" => Rule::AtMost {
            factor: 2.0,
            slack: 0.1,
        },
        "produce.total.mb_s" | "consume.total.mb_s" => Rule::AtLeast { factor: 5.0 },
        "latency.acks_all.p99_ms" | "latency.acks_1.p99_ms" => Rule::AtMost {
            factor: 5.0,
            slack: 5.0,
        },
        // Issue 24: a doubling of the tail must fail. Quiet runs of one binary gave
        // acks=all p99.9 of 6.96-13.8 ms (the 13.8 with no disk stall), so one run is
        // not judged alone: the guard test checks the median of five when a run fails,
        // and a run whose disk stalled is excused (`excused_by_disk`).
        "latency.acks_all.p999_ms" | "latency.acks_1.p999_ms" => Rule::AtMost {
            factor: 2.0,
            slack: 2.0,
        },
        // The median is what a slower request path moves in every run; the tail also
        // moves with the disk (see `excused_by_disk`).
        "latency.acks_all.p50_ms" | "latency.acks_1.p50_ms" => Rule::AtMost {
            factor: 3.0,
            slack: 3.0,
        },
        "startup.empty.idle_rss_mib" | "recovery.idle_rss_mib" => Rule::AtMost {
            factor: 2.0,
            slack: 16.0,
        },
        "produce.peak_rss_mib"
        | "consume.peak_rss_mib"
        | "scale.peak_rss_mib"
        // Peak RSS swings up to 4x between identical quick runs (96-354 MiB).
        | "connections.open.rss_mib" => Rule::AtMost {
            factor: 3.0,
            slack: 128.0,
        },
        "startup.empty.accept_ms" | "recovery.accept_ms" => Rule::AtMost {
            factor: 5.0,
            slack: 1000.0,
        },
        _ => Rule::Info,
    }
}

/// A latency run's percentiles are not judged when the disk under it stalled for longer
/// than this (its `disk_stall_ms`, from `ceilings::DiskWitness`): one such stall moves a
/// 5 s run's p99 to about its own length, whatever the broker does.
const DISK_STALL_EXCUSE_MS: f64 = 40.0;

/// The witness's slowest fsync when it excuses `key` (a latency percentile of a run during
/// which the disk itself stalled).
fn excused_by_disk(key: &str, current: &BTreeMap<String, f64>) -> Option<f64> {
    let (scenario, figure) = key.rsplit_once('.')?;
    if !scenario.starts_with("latency.") || !figure.ends_with("_ms") {
        return None;
    }
    current
        .get(&format!("{scenario}.disk_stall_ms"))
        .copied()
        .filter(|stall| *stall > DISK_STALL_EXCUSE_MS)
}

/// Compares `current` with the baseline JSON file (a line this program printed);
/// prints one line per checked metric and returns whether everything passed.
pub fn check(current: &BTreeMap<String, f64>, baseline_path: &Path) -> Res<bool> {
    let text = std::fs::read_to_string(baseline_path)
        .map_err(|e| format!("read {}: {e}", baseline_path.display()))?;
    let baseline: serde_json::Value = serde_json::from_str(text.trim())?;
    let metrics = baseline
        .get("metrics")
        .and_then(serde_json::Value::as_object)
        .ok_or("baseline has no \"metrics\" object")?;
    let mut ok = true;
    println!(
        "\ncheck against {} (fails only on gross regressions)",
        baseline_path.display()
    );
    for (key, value) in current {
        // A baseline is one run's line, or a --summarize line (use its medians).
        let base = metrics.get(key).and_then(|v| {
            v.as_f64()
                .or_else(|| v.get("median").and_then(serde_json::Value::as_f64))
        });
        let (verdict, limit) = match (rule_for(key), base) {
            (Rule::Zero, _) => (*value <= 0.0, Some(0.0)),
            (Rule::AtMost { factor, slack }, Some(b)) => {
                let limit = b * factor + slack;
                (*value <= limit, Some(limit))
            }
            (Rule::AtLeast { factor }, Some(b)) => {
                let limit = b / factor;
                (*value >= limit, Some(limit))
            }
            _ => continue,
        };
        if let (false, Some(stall)) = (verdict, excused_by_disk(key, current)) {
            println!(
                "  skip {key}: {value:.3} (limit {}; not judged: the disk itself stalled {stall:.0} ms during the run)",
                fmt(limit, 3)
            );
            continue;
        }
        ok &= verdict;
        println!(
            "  {} {key}: {value:.3} (baseline {}, limit {})",
            if verdict { "ok  " } else { "FAIL" },
            fmt(base, 3),
            fmt(limit, 3)
        );
    }
    println!("check: {}", if ok { "passed" } else { "FAILED" });
    Ok(ok)
}

/// Prints min / median / max of every metric over the runs in `paths` (JSON lines as
/// `--json-out` writes them), then the same as one JSON line; returns the medians (what
/// `--summarize … --check` compares with the baseline, itself a summary of medians).
pub fn summarize(paths: &[std::path::PathBuf]) -> Res<BTreeMap<String, f64>> {
    let mut values: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut runs = Vec::new();
    for path in paths {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
        for line in text.lines().filter(|l| l.trim_start().starts_with('{')) {
            let run: serde_json::Value = serde_json::from_str(line)?;
            let metrics = run
                .get("metrics")
                .and_then(serde_json::Value::as_object)
                .ok_or_else(|| format!("{}: no \"metrics\" object", path.display()))?;
            for (key, value) in metrics {
                if let Some(v) = value.as_f64() {
                    values.entry(key.clone()).or_default().push(v);
                }
            }
            runs.push(
                run.get("date")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or("?")
                    .to_owned(),
            );
        }
    }
    let mut table = Table::new(
        format!("{} runs ({})", runs.len(), runs.join(", ")),
        &["metric", "n", "min", "median", "max"],
    );
    let mut summary = serde_json::Map::new();
    let mut medians = BTreeMap::new();
    for (key, mut v) in values {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let (min, max) = (v[0], v[n - 1]);
        table.row(vec![
            key.clone(),
            n.to_string(),
            fmt(Some(min), 3),
            fmt(Some(median), 3),
            fmt(Some(max), 3),
        ]);
        summary.insert(
            key.clone(),
            serde_json::json!({ "n": n, "min": min, "median": median, "max": max }),
        );
        medians.insert(key, median);
    }
    println!("{}", table.render());
    println!(
        "{}",
        serde_json::json!({ "bench": "logbook-bench", "summary_of": runs, "metrics": summary })
    );
    Ok(medians)
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_date(unix: u64) -> String {
    let days = i64::try_from(unix / 86_400).unwrap_or(0);
    let secs = unix % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        secs / 3600,
        secs % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_latency_figure_is_excused_only_by_a_disk_stall_of_its_own_run() {
        let current: BTreeMap<String, f64> = [
            ("latency.acks_1.p99_ms", 398.5),
            ("latency.acks_1.disk_stall_ms", 270.3),
            ("latency.acks_all.p99_ms", 96.0),
            ("latency.acks_all.disk_stall_ms", 6.1),
            ("produce.total.broker_cpu_s_per_gb", 9.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(
            excused_by_disk("latency.acks_1.p99_ms", &current),
            Some(270.3)
        );
        assert_eq!(
            excused_by_disk("latency.acks_1.p50_ms", &current),
            Some(270.3)
        );
        // A quiet disk excuses nothing: a slow broker fails.
        assert_eq!(excused_by_disk("latency.acks_all.p99_ms", &current), None);
        // Only latency percentiles are ever excused.
        assert_eq!(
            excused_by_disk("produce.total.broker_cpu_s_per_gb", &current),
            None
        );
        assert_eq!(excused_by_disk("latency.acks_1.lost", &current), None);
    }
}
