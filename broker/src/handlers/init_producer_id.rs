//! InitProducerId (API key 22): gives a producer its producer id and epoch. Idempotent
//! producers (no transactional id) get a fresh id from the durable `ProducerIdManager`
//! blocks (the controller's, through `RpcProducerIdManager`, once a cluster is wired),
//! also when they send their current id and epoch, as Kafka answers; a transactional id
//! goes to the `TransactionCoordinator` (one producer id per transactional id, a bumped
//! epoch per call, the previous producer fenced and its open transaction aborted).

use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, ResponseKind,
};
use kafka_protocol::protocol::VersionRange;

use crate::authorizer::{AclOperation, ResourceType};
use crate::errors;
use crate::handlers::{ready, ResponseFuture};
use kafka_protocol::ResponseError;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// First version that knows PRODUCER_FENCED (older ones get INVALID_PRODUCER_EPOCH).
const PRODUCER_FENCED_VERSION: i16 = 4;

/// Answers an InitProducerId request.
pub fn handle(ctx: &super::RequestContext, request: InitProducerIdRequest) -> ResponseFuture {
    let broker = &ctx.broker;
    let response = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    // The producer's own id and epoch (v3+), when it asks for a KIP-360 bump.
    let expected = (request.producer_id.0 >= 0 && request.producer_epoch >= 0)
        .then_some((request.producer_id.0, request.producer_epoch));
    let fenced_as_epoch = ctx.api_version < PRODUCER_FENCED_VERSION;
    // A transactional producer needs WRITE on its id; an idempotent one IDEMPOTENT_WRITE on
    // the cluster or WRITE on some topic.
    let refused = match &request.transactional_id {
        Some(id) if !ctx.authorize(AclOperation::Write, ResourceType::TransactionalId, id) => {
            Some(ResponseError::TransactionalIdAuthorizationFailed)
        }
        Some(_) => None,
        None if !ctx
            .authorizer
            .authorize_cluster_quietly(AclOperation::IdempotentWrite)
            && !ctx
                .authorizer
                .authorize_any(AclOperation::Write, ResourceType::Topic) =>
        {
            Some(ResponseError::ClusterAuthorizationFailed)
        }
        None => None,
    };
    if let Some(error) = refused {
        return super::ready(ResponseKind::InitProducerId(
            response.with_error_code(error.code()),
        ));
    }
    if let Some(transactional_id) = request.transactional_id {
        let transactions = std::sync::Arc::clone(&broker.transactions);
        return Box::pin(async move {
            let result = transactions
                .init_producer_id(
                    transactional_id.as_str(),
                    request.transaction_timeout_ms,
                    expected,
                )
                .await;
            let response = match result {
                Ok((id, epoch)) => response
                    .with_producer_id(ProducerId(id))
                    .with_producer_epoch(epoch),
                Err(e) => response.with_error_code(errors::txn_error(&e, fenced_as_epoch).code()),
            };
            Some(ResponseKind::InitProducerId(response).into())
        });
    }
    // Without a transactional id Kafka always hands out a new producer id at epoch 0, even
    // when the request carries the producer's current id and epoch (KIP-360's bump is for
    // transactional producers; `TransactionCoordinator.handleInitProducerId` "blindly
    // accepts" an idempotent one); this broker answered the same id with epoch + 1 before.
    let response = match broker.transactions.generate_producer_id() {
        Ok(id) => response
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => response.with_error_code(errors::txn_error(&e, fenced_as_epoch).code()),
    };
    ready(ResponseKind::InitProducerId(response))
}
