//! Kafka's own command-line tools against Logbook, from Maven Central (kafka-tools 4.1):
//! `scripts/txn-tools-test` runs `kafka-transactions.sh` (TransactionsCommand) on a
//! transaction left open by a SIGKILLed Java producer: list, describe and
//! describe-producers show it, read_committed is held at it, `abort` (WriteTxnMarkers,
//! KIP-664) ends it and releases the records behind it. The wider comparison of the tools'
//! output with a reference Kafka is `scripts/kafka-tools-test` (minutes; not in the suite).

use crate::common::run_script;

#[test]
fn kafka_transactions_tool_finds_and_aborts_a_hanging_transaction() {
    run_script("txn-tools-test", &[], "txn-tools-test: 1 passed, 0 failed");
}
