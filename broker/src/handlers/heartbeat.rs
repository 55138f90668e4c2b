//! Heartbeat (API key 12): a group member proves it is alive between rebalances, and learns
//! of a rebalance (REBALANCE_IN_PROGRESS). Group state lives in `GroupCoordinator`.

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::authorizer::{AclOperation, ResourceType};
use crate::errors;
use kafka_protocol::ResponseError;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

/// Answers Heartbeat.
#[must_use]
pub fn handle(ctx: &super::RequestContext, request: HeartbeatRequest) -> HeartbeatResponse {
    let broker = &ctx.broker;
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, &request.group_id) {
        return HeartbeatResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let result = broker.groups.heartbeat(
        request.group_id.0.as_str(),
        request.member_id.as_str(),
        request.group_instance_id.as_ref().map(StrBytes::as_str),
        request.generation_id,
    );
    HeartbeatResponse::default().with_error_code(errors::group_code(result.err()))
}
