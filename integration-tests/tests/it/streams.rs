//! Kafka Streams (Apache's kafka-streams 4.1, from Maven Central) and kafka-clients 4.1's
//! transactional producer run on Logbook, through the scripts that also run them against a
//! reference Kafka:
//! - `scripts/streams-test <guarantee>` starts a broker from the suite's binary, produces a
//!   known input, runs a word count (repartition topic, state store with a compacted
//!   changelog) as its own JVM, SIGKILLs it mid-run, restarts it, and reads the output with
//!   read_committed. `at_least_once`: every word's final count is at least its number of
//!   occurrences (nothing lost; Kafka allows over-counting after a crash).
//!   `exactly_once_v2`: every word's committed counts are exactly 1, 2, …, n (no double
//!   counting across the crash; the aborted output is visible only to read_uncommitted).
//! - `scripts/txn-java-test` runs the Java transactions probe: commit/abort with exact
//!   records and end offsets, the LSO of an open transaction, sendOffsetsToTransaction in a
//!   group, fencing, the transaction timeout.
//!
//! Needs Java 17 and Maven, as CI has them; the scripts print each step and the
//! application's errors on failure.

use std::path::Path;
use std::process::Command;

use integration_tests::broker_binary;

/// Runs `scripts/<script> <args>` against the suite's broker binary and asserts its
/// summary line.
fn run_script(script: &str, args: &[&str], summary: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let output = Command::new("bash")
        .arg(root.join("scripts").join(script))
        .args(args)
        .env("LOGBOOK_BIN", broker_binary())
        .output()
        .unwrap_or_else(|e| panic!("run scripts/{script}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains(summary),
        "{script} {args:?} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}

#[test]
fn streams_word_count_at_least_once_survives_a_sigkill() {
    run_script(
        "streams-test",
        &["at_least_once"],
        "streams-test at_least_once: 1 passed, 0 failed",
    );
}

#[test]
fn streams_word_count_exactly_once_v2_counts_exactly_across_a_sigkill() {
    run_script(
        "streams-test",
        &["exactly_once_v2"],
        "streams-test exactly_once_v2: 1 passed, 0 failed",
    );
}

#[test]
fn java_transactional_producer_probe() {
    run_script("txn-java-test", &[], "txn-probe: 5 passed, 0 failed");
}
