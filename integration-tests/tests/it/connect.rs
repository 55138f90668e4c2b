//! Kafka Connect (Apache's connect-runtime, distributed mode, from Maven Central) runs on
//! Logbook: `scripts/connect-test` starts a broker from the suite's binary, lets Connect
//! create its compacted internal topics, moves a file through FileStreamSource → topic →
//! FileStreamSink, restarts the worker, appends lines, and compares the files exactly
//! (every line once, none lost) and Connect's committed offsets. Its `exactly_once` mode
//! runs the source with KIP-618 exactly-once support (transactions, zombie fencing) across a
//! worker SIGKILL and checks the read_committed topic against the file. Needs Java 17 and
//! Maven, as CI has them; the script prints each step and the Connect log's errors on failure.

use crate::common::run_script;

#[test]
fn connect_distributed_moves_a_file_exactly_once_across_a_worker_restart() {
    run_script("connect-test", &[], "connect-test: 1 passed, 0 failed");
}

#[test]
fn connect_exactly_once_source_survives_a_worker_sigkill() {
    // Proves: with exactly.once.source.support=enabled, a source task's records and offsets
    // are committed atomically and a SIGKILLed task's open transaction is aborted by the
    // fencing of its successor: read_committed holds every line exactly once.
    run_script(
        "connect-test",
        &["exactly_once"],
        "connect-test: 1 passed, 0 failed",
    );
}

#[test]
fn debezium_streams_postgres_changes_through_connect_across_a_worker_sigkill() {
    // Proves (scripts/debezium-test): Debezium's PostgreSQL connector (3.6.1.Final, pgoutput)
    // on Kafka Connect distributed, on Logbook: the 3-row snapshot (op r), then c, c, u, d and
    // the tombstone in order, each compared field by field; after the worker is SIGKILLed and
    // a row inserted, Debezium resumes from its offset on Logbook (no new snapshot) and the
    // new row arrives once, no event repeated.
    run_script("debezium-test", &[], "debezium-test: 15 passed, 0 failed");
}
