//! Kafka's own command-line tools against Logbook, from Maven Central (kafka-tools 4.1):
//! `scripts/txn-tools-test` runs `kafka-transactions.sh` (TransactionsCommand) on a
//! transaction left open by a SIGKILLed Java producer: list, describe and
//! describe-producers show it, read_committed is held at it, `abort` (WriteTxnMarkers,
//! KIP-664) ends it and releases the records behind it. The wider comparison of the tools'
//! output with a reference Kafka is `scripts/kafka-tools-test` (minutes; not in the suite).

use std::path::Path;
use std::process::Command;

use integration_tests::broker_binary;

#[test]
fn kafka_transactions_tool_finds_and_aborts_a_hanging_transaction() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let output = Command::new("bash")
        .arg(root.join("scripts/txn-tools-test"))
        .env("LOGBOOK_BIN", broker_binary())
        .output()
        .expect("run scripts/txn-tools-test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("txn-tools-test: 1 passed, 0 failed"),
        "txn-tools-test failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}
