//! Kafka Streams (Apache's kafka-streams 4.1, from Maven Central) runs on Logbook with
//! `processing.guarantee=at_least_once`: `scripts/streams-test` starts a broker from the
//! suite's binary, produces a known input, runs a word count (repartition topic, state store
//! with a compacted changelog) as its own JVM, SIGKILLs it mid-run, restarts it, and reads the
//! output with read_committed: every word's final count must be at least its number of
//! occurrences (nothing lost; at_least_once may over-count after a crash, as Kafka allows).
//! The exactly_once_v2 run of the same script needs transactions (issue 10). Needs Java 17 and
//! Maven, as CI has them; the script prints each step and the Streams log's errors on failure.

use std::path::Path;
use std::process::Command;

use integration_tests::broker_binary;

#[test]
fn streams_word_count_at_least_once_survives_a_sigkill() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let output = Command::new("bash")
        .arg(root.join("scripts/streams-test"))
        .arg("at_least_once")
        .env("LOGBOOK_BIN", broker_binary())
        .output()
        .expect("run scripts/streams-test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success()
            && stdout.contains("streams-test at_least_once: 1 passed, 0 failed"),
        "streams-test at_least_once failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}
