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
//!   group, fencing, the transaction timeout; with the broker's default `transaction.version`
//!   2 the client takes transaction protocol v2 (KIP-890 part 2: an epoch bump per EndTxn,
//!   no AddPartitionsToTxn / AddOffsetsToTxn), and with `--transaction-version=1` the v1
//!   flow; the probe checks which on the wire (the producer epoch after two transactions).
//!
//! Needs Java 17 and Maven, as CI has them; the scripts print each step and the
//! application's errors on failure.

use crate::common::{run_script, run_script_with};

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

// The broker's default finalizes transaction.version 2: the Java client uses transaction
// protocol v2 (the probe's `features` check, plus the epoch bumped by each EndTxn).
#[test]
fn java_transactional_producer_probe() {
    run_script_with(
        "txn-java-test",
        &[],
        &[("TXN_VERSION", "2")],
        "txn-probe: 6 passed, 0 failed",
    );
}

// With `--transaction-version=1` the broker finalizes level 1 and the same client falls back
// to the v1 flow (AddPartitionsToTxn, AddOffsetsToTxn, the epoch kept across EndTxn).
#[test]
fn java_transactional_producer_probe_transaction_version_1() {
    run_script_with(
        "txn-java-test",
        &[],
        &[
            ("TXN_VERSION", "1"),
            ("LOGBOOK_ARGS", "--transaction-version=1"),
        ],
        "txn-probe: 6 passed, 0 failed",
    );
}
