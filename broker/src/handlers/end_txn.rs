//! EndTxn (API key 26): commit or abort the producer's transaction. The coordinator writes
//! PrepareCommit/PrepareAbort, the markers of every partition, then CompleteCommit /
//! CompleteAbort; the answer comes once all are durable. v5 (transaction protocol v2, which
//! returns a bumped epoch) is not served: ApiVersions does not advertise
//! `transaction.version` 2, so clients use the v1 flow.

use std::sync::Arc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId, ResponseKind};
use kafka_protocol::protocol::VersionRange;

use crate::coordinator::transaction::TransactionResult;
use crate::errors;
use crate::handlers::ResponseFuture;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

/// First version that knows PRODUCER_FENCED.
const PRODUCER_FENCED_VERSION: i16 = 2;

/// Ends the transaction and answers once its markers are durable.
pub fn handle(ctx: &super::RequestContext, request: EndTxnRequest) -> ResponseFuture {
    let transactions = Arc::clone(&ctx.broker.transactions);
    let fenced_as_epoch = ctx.api_version < PRODUCER_FENCED_VERSION;
    Box::pin(async move {
        let result = if request.committed {
            TransactionResult::Commit
        } else {
            TransactionResult::Abort
        };
        let outcome = transactions
            .end_transaction(
                request.transactional_id.as_str(),
                request.producer_id.0,
                request.producer_epoch,
                result,
            )
            .await;
        let code = outcome.err().map_or(errors::NONE, |e| {
            errors::txn_error(&e, fenced_as_epoch).code()
        });
        Some(
            ResponseKind::EndTxn(
                EndTxnResponse::default()
                    .with_error_code(code)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            )
            .into(),
        )
    })
}
