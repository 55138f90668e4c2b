//! AddOffsetsToTxn (API key 25): a transactional producer will commit a group's offsets in
//! its transaction (`sendOffsetsToTransaction`), so the group's `__consumer_offsets`
//! partition joins the transaction and gets its marker at EndTxn. Clients of transaction
//! protocol v2 do not send it (TxnOffsetCommit v5 adds the partition itself); Kafka still
//! serves it to them, as a v1-flow addition, and so does Logbook.

use std::sync::Arc;

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ResponseKind};
use kafka_protocol::protocol::VersionRange;

use crate::errors;
use crate::handlers::ResponseFuture;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

/// First version that knows PRODUCER_FENCED.
const PRODUCER_FENCED_VERSION: i16 = 2;

/// Adds the group's partition and answers once the change is durable.
pub fn handle(ctx: &super::RequestContext, request: AddOffsetsToTxnRequest) -> ResponseFuture {
    let transactions = Arc::clone(&ctx.broker.transactions);
    let fenced_as_epoch = ctx.api_version < PRODUCER_FENCED_VERSION;
    let refused = ctx.refuse_txn_group(&request.transactional_id, &request.group_id);
    if let Some(error) = refused {
        let response = AddOffsetsToTxnResponse::default().with_error_code(error.code());
        return super::ready(ResponseKind::AddOffsetsToTxn(response));
    }
    Box::pin(async move {
        let result = transactions
            .add_offsets(
                request.transactional_id.as_str(),
                request.producer_id.0,
                request.producer_epoch,
                request.group_id.as_str(),
                0,
            )
            .await;
        let code = result.err().map_or(errors::NONE, |e| {
            errors::txn_error(&e, fenced_as_epoch).code()
        });
        Some(
            ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))
                .into(),
        )
    })
}
