//! ListTransactions (API key 66): the transactional ids this broker coordinates, filtered
//! by state, producer id, (v1+) how long the transaction has been open
//! (`kafka-transactions.sh list`, `find-hanging`) and (v2+) a transactional id pattern.
//!
//! The pattern is a Java regular expression in Kafka (`Pattern.matcher(id).matches()`, so it
//! must match the whole id). No regex crate is a dependency, so a subset is served: literal
//! characters, `.` (any character), `\` escaping the next character, and the quantifiers
//! `*`, `+`, `?` after a character or `.` — enough for `payments-.*` or `app\.tx-.+`. A pattern
//! using other syntax (classes `[..]`, groups, alternation, anchors, `{n}`) is answered
//! INVALID_REGULAR_EXPRESSION rather than matched wrongly. An empty pattern lists all.

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

/// One element of a compiled pattern: what character it accepts and how often.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Token {
    /// `None` is `.`: any character.
    accepts: Option<char>,
    /// `*` (or the repeated half of `+`): zero or more.
    repeated: bool,
    /// `?`: zero or one.
    optional: bool,
}

/// A compiled transactional id pattern (see the module docs for the subset served).
#[derive(Debug)]
pub struct IdPattern(Vec<Token>);

impl IdPattern {
    /// Compiles `pattern`; `None` when it uses syntax outside the subset.
    #[must_use]
    pub fn compile(pattern: &str) -> Option<Self> {
        let mut tokens: Vec<Token> = Vec::new();
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            let accepts = match c {
                '.' => None,
                '\\' => {
                    let escaped = chars.next()?;
                    if escaped.is_ascii_alphanumeric() {
                        // `\d`, `\w`, `\Q` … are classes or modes in Java.
                        return None;
                    }
                    Some(escaped)
                }
                '*' | '+' | '?' => {
                    let last = tokens.last_mut()?;
                    if last.repeated || last.optional {
                        return None;
                    }
                    match c {
                        '*' => last.repeated = true,
                        '?' => last.optional = true,
                        _ => {
                            let mut more = *last;
                            more.repeated = true;
                            tokens.push(more);
                        }
                    }
                    continue;
                }
                '[' | ']' | '(' | ')' | '{' | '}' | '|' | '^' | '$' => return None,
                other => Some(other),
            };
            tokens.push(Token {
                accepts,
                repeated: false,
                optional: false,
            });
        }
        Some(IdPattern(tokens))
    }

    /// Whether the whole of `id` matches (an NFA walk: linear in `id` times the pattern).
    #[must_use]
    pub fn matches(&self, id: &str) -> bool {
        let tokens = &self.0;
        let mut live = vec![false; tokens.len() + 1];
        live[0] = true;
        Self::close(tokens, &mut live);
        for c in id.chars() {
            let mut next = vec![false; tokens.len() + 1];
            for (i, token) in tokens.iter().enumerate() {
                if live[i] && token.accepts.is_none_or(|a| a == c) {
                    if token.repeated {
                        next[i] = true;
                    } else {
                        next[i + 1] = true;
                    }
                }
            }
            Self::close(tokens, &mut next);
            if !next.contains(&true) {
                return false;
            }
            live = next;
        }
        live[tokens.len()]
    }

    /// Adds the states reachable by skipping optional and repeated tokens.
    fn close(tokens: &[Token], live: &mut [bool]) {
        for (i, token) in tokens.iter().enumerate() {
            if live[i] && (token.repeated || token.optional) {
                live[i + 1] = true;
            }
        }
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
