//! EndTxn (API key 26): commit or abort the producer's transaction. The coordinator writes
//! PrepareCommit/PrepareAbort, the markers of every partition, then CompleteCommit /
//! CompleteAbort; the answer comes once all are durable, or, when the markers cannot be
//! written within the write timeout, once the Prepare record is (the outcome is decided
//! then, as Kafka answers; the completion goes on in the background).
//!
//! v5 is transaction protocol v2 (KIP-890 part 2), served when `transaction.version` is
//! finalized at 2 (else the connection refuses v5 as an unsupported version): every EndTxn
//! bumps the producer epoch, the markers carry the bumped epoch, and the response returns
//! the producer id and epoch the client uses for its next transaction (a new producer id at
//! epoch 0 when the epoch is exhausted). A retry of an EndTxn that completed (same outcome,
//! the epoch before the bump) is answered NONE with the current producer id and epoch.
//! v0–v4 (the v1 flow) keep the epoch and return no producer id.

use std::sync::Arc;

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId, ResponseKind};
use kafka_protocol::protocol::VersionRange;

use crate::authorizer::{AclOperation, ResourceType};
use crate::coordinator::transaction::metadata::{NO_PRODUCER_EPOCH, NO_PRODUCER_ID};
use crate::coordinator::transaction::TransactionResult;
use crate::errors;
use crate::handlers::ResponseFuture;
use kafka_protocol::ResponseError;

/// Versions served (v5 only with `transaction.version` 2, see `handlers::supported_at`).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// First version that knows PRODUCER_FENCED.
const PRODUCER_FENCED_VERSION: i16 = 2;

/// Ends the transaction; answers as the module docs say.
pub fn handle(ctx: &super::RequestContext, request: EndTxnRequest) -> ResponseFuture {
    let transactions = Arc::clone(&ctx.broker.transactions);
    let fenced_as_epoch = ctx.api_version < PRODUCER_FENCED_VERSION;
    // Kafka's `clientTransactionVersion`: TV_2 from v5 on, else TV_0.
    let client_transaction_version = if ctx.api_version > super::LAST_VERSION_BEFORE_TRANSACTION_V2
    {
        super::TRANSACTION_VERSION_2
    } else {
        0
    };
    if !ctx.authorize(
        AclOperation::Write,
        ResourceType::TransactionalId,
        &request.transactional_id,
    ) {
        let response = EndTxnResponse::default()
            .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code())
            .with_producer_id(ProducerId(NO_PRODUCER_ID))
            .with_producer_epoch(NO_PRODUCER_EPOCH);
        return super::ready(ResponseKind::EndTxn(response));
    }
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
                client_transaction_version,
            )
            .await;
        let (code, (producer_id, producer_epoch)) = match outcome {
            Ok(next) => (errors::NONE, next),
            Err(e) => (
                errors::txn_error(&e, fenced_as_epoch).code(),
                (NO_PRODUCER_ID, NO_PRODUCER_EPOCH),
            ),
        };
        Some(
            ResponseKind::EndTxn(
                EndTxnResponse::default()
                    .with_error_code(code)
                    .with_producer_id(ProducerId(producer_id))
                    .with_producer_epoch(producer_epoch),
            )
            .into(),
        )
    })
}
