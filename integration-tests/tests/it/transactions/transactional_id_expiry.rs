//! `transactional.id.expiration.ms`: the coordinator forgets a transactional id that has
//! had no transaction for that long (a tombstone in `__transaction_state`), so a later
//! InitProducerId for it starts afresh with a new producer id; an id in use stays.

use std::time::{Duration, Instant};

use integration_tests::Broker;
use rdkafka::producer::Producer;

use super::txn_requests::{describe, init_producer_id, list};
use super::{records, send_in_txn, transactional, SMALL_INTERNAL_TOPICS};
use crate::common::{create_topic, CLIENT_TIMEOUT};

/// Kafka's TRANSACTIONAL_ID_NOT_FOUND.
const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;

#[test]
fn idle_transactional_id_expires_and_gets_a_new_producer_id() {
    // Proves: with transactional.id.expiration.ms=3000, an id idle (CompleteCommit) for
    // 3 s disappears from DescribeTransactions (TRANSACTIONAL_ID_NOT_FOUND) and
    // ListTransactions, and InitProducerId for it then gets a new producer id at epoch 0;
    // an id committing a transaction every 300 ms meanwhile keeps its producer id and is
    // still listed.
    let broker = Broker::start_with(
        &[
            SMALL_INTERNAL_TOPICS,
            &[
                "--override",
                "transactional.id.expiration.ms=3000",
                "--override",
                "transaction.remove.expired.transaction.cleanup.interval.ms=200",
            ],
        ]
        .concat(),
    );
    let bootstrap = broker.bootstrap();
    let addr = broker.addr();
    create_topic(&bootstrap, "txn-expiry", 1, &[]);
    let idle_pid = {
        let idle = transactional(&bootstrap, "txn-expiry-idle", "60000");
        idle.begin_transaction().expect("begin");
        send_in_txn(&idle, "txn-expiry", &records(0, "idle", 1));
        idle.commit_transaction(CLIENT_TIMEOUT).expect("commit");
        let state = describe(addr, "txn-expiry-idle");
        assert_eq!(
            (state.error_code, state.transaction_state.as_str()),
            (0, "CompleteCommit")
        );
        state.producer_id.0
    };
    let busy = transactional(&bootstrap, "txn-expiry-busy", "60000");
    let busy_pid = describe(addr, "txn-expiry-busy").producer_id.0;
    let started = Instant::now();
    let mut transactions = 0;
    let expired_after = loop {
        busy.begin_transaction().expect("begin");
        send_in_txn(&busy, "txn-expiry", &records(0, "busy", 1));
        busy.commit_transaction(CLIENT_TIMEOUT).expect("commit");
        transactions += 1;
        if describe(addr, "txn-expiry-idle").error_code == TRANSACTIONAL_ID_NOT_FOUND {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the idle transactional id did not expire within 20 s"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert!(
        expired_after > Duration::from_secs(2),
        "expired after only {expired_after:?}"
    );
    assert!(transactions >= 5, "{transactions} busy transactions");
    let busy_state = describe(addr, "txn-expiry-busy");
    assert_eq!(
        (
            busy_state.error_code,
            busy_state.producer_id.0,
            busy_state.transaction_state.as_str()
        ),
        (0, busy_pid, "CompleteCommit"),
        "the busy id stays"
    );
    assert_eq!(
        list(addr, &[], &[]).transactions,
        vec![(
            "txn-expiry-busy".to_owned(),
            busy_pid,
            "CompleteCommit".to_owned()
        )],
        "only the busy id is listed"
    );
    let (code, new_pid, epoch) = init_producer_id(addr, "txn-expiry-idle");
    assert_eq!(code, 0, "InitProducerId after expiry");
    assert_ne!(new_pid, idle_pid, "a new producer id after expiry");
    assert_ne!(new_pid, busy_pid, "a new producer id after expiry");
    assert_eq!(epoch, 0, "a new producer id starts at epoch 0");
    let state = describe(addr, "txn-expiry-idle");
    assert_eq!(
        (
            state.error_code,
            state.producer_id.0,
            state.transaction_state.as_str()
        ),
        (0, new_pid, "Empty")
    );
}
