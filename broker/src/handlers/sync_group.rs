//! SyncGroup (API key 14): the leader hands in the assignments of a generation and every
//! member waits, parked in the coordinator, for its own.

use std::time::Duration;

use kafka_protocol::messages::{ResponseKind, SyncGroupRequest, SyncGroupResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::authorizer::{AclOperation, ResourceType};
use crate::coordinator::group::{GroupError, SyncResult};
use crate::errors;
use crate::handlers::ResponseFuture;
use kafka_protocol::ResponseError;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// First version whose ProtocolType and ProtocolName must be present.
const MANDATORY_PROTOCOL_VERSION: i16 = 5;

/// Upper bound on a parked SyncGroup; the coordinator answers well before (the pending-sync
/// timer is the group's rebalance timeout).
const SYNC_WAIT_MAX: Duration = Duration::from_secs(10 * 60);

/// Hands the request to the coordinator and returns the future of its answer.
pub fn handle(ctx: &super::RequestContext, request: SyncGroupRequest) -> ResponseFuture {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    // From v5 both fields are mandatory; Kafka refuses a request without them before it
    // reaches the group (`areMandatoryProtocolTypeAndNamePresent`).
    if version >= MANDATORY_PROTOCOL_VERSION
        && (request.protocol_type.is_none() || request.protocol_name.is_none())
    {
        let response = SyncGroupResponse::default()
            .with_error_code(ResponseError::InconsistentGroupProtocol.code());
        return super::ready(ResponseKind::SyncGroup(response));
    }
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, &request.group_id) {
        let response = SyncGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
        return super::ready(ResponseKind::SyncGroup(response));
    }
    let assignments = request
        .assignments
        .iter()
        .map(|a| (a.member_id.to_string(), a.assignment.clone()))
        .collect();
    let rx = broker.groups.sync_group(
        request.group_id.0.as_str(),
        request.generation_id,
        request.member_id.as_str(),
        request.group_instance_id.as_ref().map(StrBytes::as_str),
        request.protocol_type.as_ref().map(StrBytes::as_str),
        request.protocol_name.as_ref().map(StrBytes::as_str),
        assignments,
    );
    Box::pin(async move {
        let result = match tokio::time::timeout(SYNC_WAIT_MAX, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => SyncResult::error(GroupError::CoordinatorNotAvailable),
            Err(_) => SyncResult::error(GroupError::RebalanceInProgress),
        };
        let mut response = SyncGroupResponse::default()
            .with_error_code(errors::group_code(result.error))
            .with_assignment(result.assignment);
        if version >= 5 {
            response.protocol_type = result.protocol_type.map(StrBytes::from_string);
            response.protocol_name = result.protocol_name.map(StrBytes::from_string);
        }
        Some(ResponseKind::SyncGroup(response).into())
    })
}
