//! ListTransactions (API key 66): the transactional ids this broker coordinates, filtered
//! by state, producer id, (v1+) how long the transaction has been open
//! (`kafka-transactions.sh list`, `find-hanging`) and (v2+) a transactional id pattern.
//!
//! The pattern is a Java regular expression in Kafka (`Pattern.matcher(id).matches()`, so it
//! must match the whole id). It is compiled with the `regex` crate, whose syntax is Java's for
//! what ids need (literals, `.`, classes, groups, alternation, quantifiers); Java-only
//! constructs (look-around, back-references) and patterns past
//! [`PATTERN_SIZE_MAX`] are answered INVALID_REGULAR_EXPRESSION. Matching is linear in the id,
//! whatever the pattern. An empty or null pattern lists all.

use crate::authorizer::{AclOperation, ResourceType};
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{ListTransactionsRequest, ListTransactionsResponse, ProducerId};
use kafka_protocol::protocol::{StrBytes, VersionRange};

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

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

/// Bound on a compiled pattern's size (the `regex` crate's `size_limit`), so a client's
/// pattern cannot make the broker build a huge automaton.
pub const PATTERN_SIZE_MAX: usize = 1 << 20;

/// A compiled transactional id pattern, anchored at both ends.
#[derive(Debug)]
pub struct IdPattern(regex::Regex);

impl IdPattern {
    /// Compiles `pattern`; `None` when it is not a valid pattern or too large.
    #[must_use]
    pub fn compile(pattern: &str) -> Option<Self> {
        regex::RegexBuilder::new(&format!("^(?:{pattern})$"))
            .size_limit(PATTERN_SIZE_MAX)
            .build()
            .ok()
            .map(IdPattern)
    }

    /// Whether the whole of `id` matches.
    #[must_use]
    pub fn matches(&self, id: &str) -> bool {
        self.0.is_match(id)
    }
}

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
    let pattern = match request.transactional_id_pattern.as_ref() {
        Some(p) if ctx.api_version >= 2 && !p.is_empty() => match IdPattern::compile(p) {
            Some(pattern) => Some(pattern),
            None => {
                return response
                    .with_error_code(crate::errors::INVALID_TRANSACTIONAL_ID_PATTERN.code());
            }
        },
        _ => None,
    };
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
            .filter(|m| {
                pattern
                    .as_ref()
                    .is_none_or(|p| p.matches(&m.transactional_id))
            })
            // Only the transactional ids the sender may DESCRIBE.
            .filter(|m| {
                ctx.authorize(
                    AclOperation::Describe,
                    ResourceType::TransactionalId,
                    &m.transactional_id,
                )
            })
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

#[cfg(test)]
mod tests;
