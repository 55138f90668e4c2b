//! The wire fuzzer (`logbook-wire-fuzz`) against a real broker for a short, seeded run:
//! mutated and hostile frames of every API the broker advertises, at every version, over
//! concurrent connections. The broker must neither crash, hang nor panic, and must serve
//! clients normally afterwards. The long sweep is `scripts/wire-fuzz`; this keeps the fuzzer
//! itself working and its findings from coming back.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use integration_tests::{workspace_binary, Broker};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};

use crate::common::assert_round_trip;
use crate::wire::{self, connect};

/// Seconds of fuzzing: long enough to send every advertised (api, version) many times.
const FUZZ_SECONDS: &str = "20";

/// The fuzzer binary, built once per test process (`LOGBOOK_WIRE_FUZZ_BIN` overrides it).
fn fuzz_binary() -> &'static PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        if let Ok(path) = std::env::var("LOGBOOK_WIRE_FUZZ_BIN") {
            return PathBuf::from(path);
        }
        workspace_binary("logbook-wire-fuzz", "logbook-wire-fuzz")
    })
}

/// `key=value` of the fuzzer's SUMMARY line.
fn field<'a>(summary: &'a str, key: &str) -> &'a str {
    summary
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key}= in {summary}"))
}

// A seeded 20-second fuzz of every advertised API and version: zero crashes and hangs,
// frames of every API sent, no panic in the broker log, and a produce/consume round trip
// still works afterwards.
#[test]
fn broker_survives_wire_fuzzing() {
    let broker = Broker::start();
    let mut stream = connect(broker.addr());
    let response: ApiVersionsResponse =
        wire::round_trip(&mut stream, 3, 1, &ApiVersionsRequest::default());
    let advertised: Vec<i16> = response.api_keys.iter().map(|k| k.api_key).collect();
    drop(stream);
    assert!(advertised.len() >= 40, "advertised APIs: {advertised:?}");

    let out_dir = tempfile::tempdir().expect("a directory for saved frames");
    let output = Command::new(fuzz_binary())
        .args(["--bootstrap", &broker.bootstrap()])
        .args(["--pid", &broker.pid().to_string()])
        .args(["--duration", FUZZ_SECONDS, "--seed", "20261203"])
        .args(["--connections", "4", "--check-interval-ms", "1000"])
        .arg("--out-dir")
        .arg(out_dir.path())
        .output()
        .expect("run logbook-wire-fuzz");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report = format!(
        "fuzzer stdout:\n{stdout}\nfuzzer stderr (tail):\n{}",
        tail(&stderr)
    );
    assert!(
        output.status.success(),
        "fuzzer exited {}\n{report}",
        output.status
    );
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("SUMMARY "))
        .unwrap_or_else(|| panic!("no SUMMARY line\n{report}"));
    assert_eq!(field(summary, "crashes"), "0", "{report}");
    assert_eq!(field(summary, "hangs"), "0", "{report}");
    let frames: u64 = field(summary, "frames").parse().expect("a frame count");
    assert!(frames > 1000, "only {frames} frames sent\n{report}");
    let per_api: Vec<(i16, u64)> = field(summary, "apis")
        .split(',')
        .filter_map(|kv| {
            let (k, n) = kv.split_once(':')?;
            Some((k.parse().ok()?, n.parse().ok()?))
        })
        .collect();
    for key in &advertised {
        let sent = per_api
            .iter()
            .find(|(k, _)| k == key)
            .map_or(0, |(_, n)| *n);
        assert!(sent > 0, "no frames of advertised api {key}\n{report}");
    }
    assert!(
        stdout.contains("advertised versions never sent: []"),
        "some advertised versions were never sent\n{report}"
    );

    assert!(
        !broker.log().contains("panicked"),
        "the broker panicked under fuzzing\n{}",
        broker.log_tail()
    );
    assert_round_trip(&broker.bootstrap(), "after-wire-fuzz");
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
