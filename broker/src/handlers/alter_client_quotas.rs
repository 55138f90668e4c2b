//! AlterClientQuotas (API key 49, KIP-546): sets or removes quota keys of user, client-id
//! and IP entities (`kafka-configs.sh --alter --add-config producer_byte_rate=1024
//! --entity-type users --entity-name alice`). The controller checks each entity and value
//! with Kafka's rules and messages (`QuorumController::alter_client_quotas`) and commits
//! the changes as one batch; the answer comes once this broker's image has them.
//! Needs ALTER_CONFIGS on the cluster.

use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use logbook_controller::quorum::QuotaAlteration;
use logbook_metadata::quotas::{self, QuotaValue};

use super::{acls, RequestContext};
use crate::authorizer::AclOperation;
use crate::errors;

/// Versions served (Kafka 4.x serves 0-1).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

/// Answers an AlterClientQuotas request.
pub fn handle(
    ctx: &RequestContext,
    request: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let alterations: Vec<QuotaAlteration> = request
        .entries
        .iter()
        .map(|entry| QuotaAlteration {
            entity: entry
                .entity
                .iter()
                .map(|e| quotas::EntityData {
                    entity_type: e.entity_type.to_string(),
                    entity_name: e.entity_name.as_ref().map(ToString::to_string),
                })
                .collect(),
            ops: entry
                .ops
                .iter()
                .map(|op| {
                    let value = (!op.remove).then_some(QuotaValue(op.value));
                    (op.key.to_string(), value)
                })
                .collect(),
        })
        .collect();
    let outcomes: Vec<Result<(), (ResponseError, String)>> =
        if ctx.authorize_cluster(AclOperation::AlterConfigs) {
            let validate_only = request.validate_only;
            let sent = alterations.clone();
            match acls::commit(ctx, "AlterClientQuotas", |client| async move {
                client.alter_client_quotas(sent, validate_only).await
            }) {
                Ok(results) => results
                    .into_iter()
                    .map(|r| r.map_err(|e| (errors::quorum_error(&e), errors::quorum_message(&e))))
                    .collect(),
                Err(refusal) => vec![Err(refusal); alterations.len()],
            }
        } else {
            vec![Err((ResponseError::ClusterAuthorizationFailed, String::new())); alterations.len()]
        };
    let entries = request
        .entries
        .iter()
        .zip(outcomes)
        .map(|(entry, outcome)| {
            let entity = entry
                .entity
                .iter()
                .map(|e| {
                    EntityData::default()
                        .with_entity_type(e.entity_type.clone())
                        .with_entity_name(e.entity_name.clone())
                })
                .collect();
            // kafka-protocol defaults a nullable string to "", Kafka sends null.
            let result = EntryData::default()
                .with_entity(entity)
                .with_error_message(None);
            match outcome {
                Ok(()) => result,
                Err((error, message)) => result.with_error_code(error.code()).with_error_message(
                    (!message.is_empty()).then(|| StrBytes::from_string(message)),
                ),
            }
        })
        .collect();
    AlterClientQuotasResponse::default().with_entries(entries)
}
