//! ListTransactions filters (`kafka-transactions.sh list`): by state, by producer id, both
//! at once, and state names the broker does not know, over transactions that librdkafka
//! left in each state a transactional id can rest in.

use integration_tests::Broker;
use rdkafka::producer::Producer;

use super::txn_requests::{describe, list, list_at, list_older_than, Listed, Listing};
use super::{records, send_in_txn, transactional, SMALL_INTERNAL_TOPICS};
use crate::common::{create_topic, now_ms, CLIENT_TIMEOUT};

/// `(id, producer id, state)` rows as `list` sorts them.
fn rows(rows: &[(&str, i64, &str)]) -> Vec<Listed> {
    let mut out: Vec<Listed> = rows
        .iter()
        .map(|(id, pid, state)| ((*id).to_owned(), *pid, (*state).to_owned()))
        .collect();
    out.sort();
    out
}

fn listing(transactions: &[(&str, i64, &str)], unknown: &[&str]) -> Listing {
    Listing {
        transactions: rows(transactions),
        unknown_state_filters: unknown.iter().map(|s| (*s).to_owned()).collect(),
    }
}

#[test]
fn list_transactions_filters_by_state_and_producer_id() {
    // Proves: ListTransactions lists every transactional id with its producer id and state
    // (Ongoing, CompleteCommit, CompleteAbort, Empty); a state filter keeps the ids in one
    // of the named states, a producer id filter the ids with one of those producer ids, both
    // together only ids matching both; an unknown state name is reported back in
    // unknown_state_filters and, alone, matches nothing.
    let broker = Broker::start_with(SMALL_INTERNAL_TOPICS);
    let bootstrap = broker.bootstrap();
    let addr = broker.addr();
    create_topic(&bootstrap, "txn-list", 1, &[]);
    let before_ms = now_ms();
    let ongoing = transactional(&bootstrap, "txn-list-ongoing", "60000");
    ongoing.begin_transaction().expect("begin");
    send_in_txn(&ongoing, "txn-list", &records(0, "ongoing", 1));
    let committed = transactional(&bootstrap, "txn-list-committed", "60000");
    committed.begin_transaction().expect("begin");
    send_in_txn(&committed, "txn-list", &records(0, "committed", 1));
    committed
        .commit_transaction(CLIENT_TIMEOUT)
        .expect("commit");
    let aborted = transactional(&bootstrap, "txn-list-aborted", "60000");
    aborted.begin_transaction().expect("begin");
    send_in_txn(&aborted, "txn-list", &records(0, "aborted", 1));
    aborted.abort_transaction(CLIENT_TIMEOUT).expect("abort");
    let _empty = transactional(&bootstrap, "txn-list-empty", "60000");

    let pid = |id: &str| {
        let state = describe(addr, id);
        assert_eq!(state.error_code, 0, "describe {id}");
        state.producer_id.0
    };
    let (o, c, a, e) = (
        pid("txn-list-ongoing"),
        pid("txn-list-committed"),
        pid("txn-list-aborted"),
        pid("txn-list-empty"),
    );
    // A finished transaction keeps its start time, as Kafka's `prepareComplete` keeps
    // `txnStartTimestamp`; an id with no transaction yet has none (-1).
    let after_ms = now_ms();
    for id in ["txn-list-ongoing", "txn-list-committed", "txn-list-aborted"] {
        let start = describe(addr, id).transaction_start_time_ms;
        assert!(
            (before_ms..=after_ms).contains(&start),
            "{id}: start time {start} outside [{before_ms}, {after_ms}]"
        );
    }
    assert_eq!(
        describe(addr, "txn-list-empty").transaction_start_time_ms,
        -1,
        "an id without a transaction"
    );
    let all = [
        ("txn-list-ongoing", o, "Ongoing"),
        ("txn-list-committed", c, "CompleteCommit"),
        ("txn-list-aborted", a, "CompleteAbort"),
        ("txn-list-empty", e, "Empty"),
    ];
    assert_eq!(list(addr, &[], &[]), listing(&all, &[]), "no filter");
    assert_eq!(
        list(addr, &["Ongoing"], &[]),
        listing(&[all[0]], &[]),
        "state Ongoing"
    );
    assert_eq!(
        list(addr, &["CompleteCommit", "CompleteAbort"], &[]),
        listing(&[all[1], all[2]], &[]),
        "states CompleteCommit, CompleteAbort"
    );
    assert_eq!(
        list(addr, &[], &[c, e]),
        listing(&[all[1], all[3]], &[]),
        "producer ids of committed and empty"
    );
    assert_eq!(
        list(addr, &["Empty"], &[c, e]),
        listing(&[all[3]], &[]),
        "state Empty and producer ids of committed and empty"
    );
    assert_eq!(
        list(addr, &["Ongoing"], &[c]),
        listing(&[], &[]),
        "state Ongoing and the committed id's producer id"
    );
    assert_eq!(
        list(addr, &[], &[i64::MAX]),
        listing(&[], &[]),
        "a producer id nobody has"
    );
    assert_eq!(
        list(addr, &["Bogus", "Empty"], &[]),
        listing(&[all[3]], &["Bogus"]),
        "an unknown state beside a known one"
    );
    assert_eq!(
        list(addr, &["Bogus"], &[]),
        listing(&[], &["Bogus"]),
        "only an unknown state"
    );
    // The duration filter keeps, in any state, the ids whose last transaction started
    // longer ago than it, as Kafka's `listTransactionStates`; an id that never began one
    // has start time -1, so Kafka keeps it under any filter.
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        list_older_than(addr, 10),
        listing(&all, &[]),
        "every transaction started over 10 ms ago"
    );
    assert_eq!(
        list_older_than(addr, 3_600_000),
        listing(&[all[3]], &[]),
        "none started an hour ago; the id with no transaction stays"
    );
}

#[test]
fn list_transactions_filters_by_transactional_id_pattern() {
    // Proves: ListTransactions v2 keeps only the ids its transactional_id_pattern (a Java
    // regular expression) matches, together with the state filter; an empty or null
    // pattern filters nothing.
    let broker = Broker::start_with(SMALL_INTERNAL_TOPICS);
    let bootstrap = broker.bootstrap();
    let addr = broker.addr();
    create_topic(&bootstrap, "txn-pattern", 1, &[]);
    let ongoing = transactional(&bootstrap, "txn-pattern-ongoing", "60000");
    ongoing.begin_transaction().expect("begin");
    send_in_txn(&ongoing, "txn-pattern", &records(0, "ongoing", 1));
    let committed = transactional(&bootstrap, "txn-pattern-committed", "60000");
    committed.begin_transaction().expect("begin");
    send_in_txn(&committed, "txn-pattern", &records(0, "committed", 1));
    committed
        .commit_transaction(CLIENT_TIMEOUT)
        .expect("commit");
    let _other = transactional(&bootstrap, "other-app-empty", "60000");
    let pid = |id: &str| describe(addr, id).producer_id.0;
    let all = [
        ("txn-pattern-ongoing", pid("txn-pattern-ongoing"), "Ongoing"),
        (
            "txn-pattern-committed",
            pid("txn-pattern-committed"),
            "CompleteCommit",
        ),
        ("other-app-empty", pid("other-app-empty"), "Empty"),
    ];
    assert_eq!(
        list_at(addr, 2, &[], &[], Some("^txn-pattern-.*$")),
        listing(&all[..2], &[]),
        "ids of one application"
    );
    assert_eq!(
        list_at(addr, 2, &[], &[], Some("^txn-pattern-(ongoing|committed)$")),
        listing(&all[..2], &[]),
        "an alternation"
    );
    assert_eq!(
        list_at(addr, 2, &["Ongoing"], &[], Some("^txn-pattern-.*$")),
        listing(&all[..1], &[]),
        "pattern and state filter together"
    );
    assert_eq!(
        list_at(addr, 2, &[], &[], Some("^nothing-matches$")),
        listing(&[], &[]),
        "a pattern nothing matches"
    );
    assert_eq!(
        list_at(addr, 2, &[], &[], Some("")),
        listing(&all, &[]),
        "an empty pattern filters nothing"
    );
    assert_eq!(
        list_at(addr, 2, &[], &[], None),
        listing(&all, &[]),
        "a null pattern filters nothing"
    );
}
