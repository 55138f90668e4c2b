//! ListTransactions (API key 66): the transactional ids this broker coordinates, filtered
//! by state, producer id and (v1+) how long the transaction has been open
//! (`kafka-transactions.sh list`, `find-hanging`).

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{ListTransactionsRequest, ListTransactionsResponse, ProducerId};
use kafka_protocol::protocol::{StrBytes, VersionRange};

/// Versions served (v2's `transactional_id_pattern` is not applied).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

/// Kafka's state names; a filter naming another is reported back as unknown.
const STATES: [&str; 8] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
];

/// Answers ListTransactions.
#[must_use]
pub fn handle(
    ctx: &super::RequestContext,
    request: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let (known, unknown): (Vec<&StrBytes>, Vec<&StrBytes>) = request
        .state_filters
        .iter()
        .partition(|s| STATES.contains(&s.as_str()));
    let mut response = ListTransactionsResponse::default()
        .with_unknown_state_filters(unknown.into_iter().cloned().collect());
    if !known.is_empty() || request.state_filters.is_empty() {
        let states: Vec<String> = known.iter().map(ToString::to_string).collect();
        let producer_ids: Vec<i64> = request.producer_id_filters.iter().map(|p| p.0).collect();
        let duration = if ctx.api_version >= 1 {
            request.duration_filter
        } else {
            -1
        };
        response.transaction_states = ctx
            .broker
            .transactions
            .list(&states, &producer_ids, duration)
            .into_iter()
            .map(|m| {
                TransactionState::default()
                    .with_transactional_id(StrBytes::from_string(m.transactional_id).into())
                    .with_producer_id(ProducerId(m.producer_id))
                    .with_transaction_state(StrBytes::from_static_str(m.state.name()))
            })
            .collect();
    }
    response
}
