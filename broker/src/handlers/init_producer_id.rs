//! InitProducerId (API key 22): gives an idempotent producer its producer id and epoch.
//! Transactional ids need the transaction coordinator, which is not built yet; such requests
//! get COORDINATOR_NOT_AVAILABLE, which transactional clients treat as retriable.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// Answers an InitProducerId request.
pub fn handle(
    ctx: &super::RequestContext,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let broker = &ctx.broker;
    let response = InitProducerIdResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    if request.transactional_id.is_some() {
        return response.with_error_code(ResponseError::CoordinatorNotAvailable.code());
    }
    // KIP-360: a known idempotent producer may ask to bump its epoch instead of a new id.
    if request.producer_id.0 >= 0
        && request.producer_epoch >= 0
        && request.producer_epoch < i16::MAX - 1
    {
        return response
            .with_producer_id(request.producer_id)
            .with_producer_epoch(request.producer_epoch + 1);
    }
    match tokio::task::block_in_place(|| broker.producer_ids.next_id()) {
        Ok(id) => response
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!(error = %e, "cannot persist the producer id block");
            response.with_error_code(ResponseError::KafkaStorageError.code())
        }
    }
}
