//! Raw transaction requests over `wire` (librdkafka's admin client sends none of them):
//! DescribeTransactions and ListTransactions as `kafka-transactions.sh` sends them, and
//! InitProducerId to read the producer id a transactional id is given.

use std::net::SocketAddr;

use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::{
    DescribeTransactionsRequest, InitProducerIdRequest, ListTransactionsRequest, ProducerId,
};
use kafka_protocol::protocol::StrBytes;

use crate::wire::{connect, round_trip};

/// DescribeTransactions (v0) of one transactional id.
pub fn describe(addr: SocketAddr, transactional_id: &str) -> TransactionState {
    let request =
        DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![
                StrBytes::from_string(transactional_id.to_owned()).into()
            ]);
    let mut response = round_trip(&mut connect(addr), 0, 1, &request);
    assert_eq!(
        response.transaction_states.len(),
        1,
        "one state per id asked"
    );
    response.transaction_states.remove(0)
}

/// One transaction as ListTransactions reports it: `(transactional id, producer id, state)`.
pub type Listed = (String, i64, String);

/// What a ListTransactions answer held: the transactions (sorted by transactional id) and
/// the state filters the broker did not know.
#[derive(Debug, PartialEq, Eq)]
pub struct Listing {
    pub transactions: Vec<Listed>,
    pub unknown_state_filters: Vec<String>,
}

/// ListTransactions at `version` with these filters (`pattern` needs v2); asserts the
/// answer's error code is 0.
pub fn list_at(
    addr: SocketAddr,
    version: i16,
    states: &[&str],
    producer_ids: &[i64],
    pattern: Option<&str>,
) -> Listing {
    let request = ListTransactionsRequest::default()
        .with_state_filters(
            states
                .iter()
                .map(|s| StrBytes::from_string((*s).to_owned()))
                .collect(),
        )
        .with_producer_id_filters(producer_ids.iter().map(|p| ProducerId(*p)).collect())
        .with_duration_filter(-1)
        .with_transactional_id_pattern(pattern.map(|p| StrBytes::from_string(p.to_owned())));
    listing_of(addr, version, &request)
}

/// ListTransactions v1 of the transactions that started more than `duration_ms` ago.
pub fn list_older_than(addr: SocketAddr, duration_ms: i64) -> Listing {
    let request = ListTransactionsRequest::default().with_duration_filter(duration_ms);
    listing_of(addr, 1, &request)
}

/// Sends `request` at `version`; asserts the answer's error code is 0.
fn listing_of(addr: SocketAddr, version: i16, request: &ListTransactionsRequest) -> Listing {
    let response = round_trip(&mut connect(addr), version, 1, request);
    assert_eq!(response.error_code, 0, "ListTransactions error code");
    let mut transactions: Vec<Listed> = response
        .transaction_states
        .iter()
        .map(|t| {
            (
                t.transactional_id.to_string(),
                t.producer_id.0,
                t.transaction_state.to_string(),
            )
        })
        .collect();
    transactions.sort();
    Listing {
        transactions,
        unknown_state_filters: response
            .unknown_state_filters
            .iter()
            .map(ToString::to_string)
            .collect(),
    }
}

/// ListTransactions v1 (no pattern) with these filters.
pub fn list(addr: SocketAddr, states: &[&str], producer_ids: &[i64]) -> Listing {
    list_at(addr, 1, states, producer_ids, None)
}

/// InitProducerId (v3) for `transactional_id` with no producer of its own:
/// `(error code, producer id, producer epoch)`.
pub fn init_producer_id(addr: SocketAddr, transactional_id: &str) -> (i16, i64, i16) {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(
            StrBytes::from_string(transactional_id.to_owned()).into(),
        ))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let response = round_trip(&mut connect(addr), 3, 1, &request);
    (
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    )
}
