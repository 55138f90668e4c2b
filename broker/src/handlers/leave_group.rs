//! LeaveGroup (API key 13): members leave a group (v3+: several at once, static members by
//! `group.instance.id`), which starts a rebalance of the rest.

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::authorizer::{AclOperation, ResourceType};
use crate::errors;
use kafka_protocol::ResponseError;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// First version with the batched `members` form (KIP-345).
const BATCH_VERSION: i16 = 3;

/// Answers LeaveGroup.
#[must_use]
pub fn handle(ctx: &super::RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, &request.group_id) {
        return LeaveGroupResponse::default()
            .with_error_code(ResponseError::GroupAuthorizationFailed.code());
    }
    let members: Vec<(String, Option<String>)> = if version >= BATCH_VERSION {
        request
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.to_string(),
                    m.group_instance_id.as_ref().map(ToString::to_string),
                )
            })
            .collect()
    } else {
        vec![(request.member_id.to_string(), None)]
    };
    let group_id = request.group_id.0.as_str();
    match broker.groups.leave_group(group_id, &members) {
        Err(e) => LeaveGroupResponse::default().with_error_code(errors::group_error(&e).code()),
        Ok(results) if version < BATCH_VERSION => {
            // Before v3 the single member's error is the top-level error.
            let error = results.first().and_then(|r| r.err());
            LeaveGroupResponse::default().with_error_code(errors::group_code(error))
        }
        Ok(results) => LeaveGroupResponse::default().with_members(
            members
                .into_iter()
                .zip(results)
                .map(|((member_id, instance), result)| {
                    MemberResponse::default()
                        .with_member_id(StrBytes::from_string(member_id))
                        .with_group_instance_id(instance.map(StrBytes::from_string))
                        .with_error_code(errors::group_code(result.err()))
                })
                .collect(),
        ),
    }
}
