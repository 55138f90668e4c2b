//! JoinGroup (API key 11): a member enters (or re-enters) a group's rebalance. The request
//! waits, parked in the coordinator, until the join phase ends; the leader's answer carries
//! every member's metadata. Group state lives in `GroupCoordinator`; this file translates.

use std::time::Duration;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse, ResponseKind};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::authorizer::{AclOperation, ResourceType};
use crate::coordinator::group::{GroupError, JoinRequest, JoinResult};
use crate::errors;
use crate::handlers::ResponseFuture;
use kafka_protocol::ResponseError;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 9 };

/// Slack beyond the rebalance timeout (and initial delay) before a parked join gives up.
const JOIN_WAIT_SLACK: Duration = Duration::from_secs(30);

fn response(result: JoinResult, version: i16) -> JoinGroupResponse {
    let nullable_allowed = version >= 7;
    let name = |s: Option<String>| match s {
        Some(s) => Some(StrBytes::from_string(s)),
        None if nullable_allowed => None,
        None => Some(StrBytes::default()),
    };
    let mut r = JoinGroupResponse::default()
        .with_error_code(errors::group_code(result.error))
        .with_generation_id(result.generation_id)
        .with_protocol_name(name(result.protocol_name))
        .with_leader(StrBytes::from_string(result.leader))
        .with_member_id(StrBytes::from_string(result.member_id))
        .with_members(
            result
                .members
                .into_iter()
                .map(|(member_id, instance, metadata)| {
                    JoinGroupResponseMember::default()
                        .with_member_id(StrBytes::from_string(member_id))
                        .with_group_instance_id(if version >= 5 {
                            instance.map(StrBytes::from_string)
                        } else {
                            None
                        })
                        .with_metadata(metadata)
                })
                .collect(),
        );
    if version >= 7 {
        r.protocol_type = result.protocol_type.map(StrBytes::from_string);
    }
    if version >= 9 {
        r.skip_assignment = result.skip_assignment;
    }
    r
}

/// Parks the join in the coordinator and returns the future of its answer.
pub fn handle(ctx: &super::RequestContext, request: JoinGroupRequest) -> ResponseFuture {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    if !ctx.authorize(AclOperation::Read, ResourceType::Group, &request.group_id) {
        // Kafka's error answer: no member id, generation -1.
        let mut refused = response(
            JoinResult::error("", GroupError::CoordinatorNotAvailable),
            version,
        );
        refused.error_code = ResponseError::GroupAuthorizationFailed.code();
        return super::ready(ResponseKind::JoinGroup(refused));
    }
    let rebalance_timeout_ms = if version >= 1 {
        request.rebalance_timeout_ms
    } else {
        request.session_timeout_ms
    };
    let join = JoinRequest {
        group_id: request.group_id.0.to_string(),
        member_id: request.member_id.to_string(),
        group_instance_id: request.group_instance_id.map(|s| s.to_string()),
        client_id: ctx
            .client_id
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        client_host: ctx.client_host(),
        rebalance_timeout_ms,
        session_timeout_ms: request.session_timeout_ms,
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .into_iter()
            .map(|p| (p.name.to_string(), p.metadata))
            .collect(),
        require_known_member_id: version >= 4,
        supports_skip_assignment: version >= 9,
    };
    let member_id = join.member_id.clone();
    let wait = Duration::from_millis(
        u64::try_from(rebalance_timeout_ms.max(0)).unwrap_or(0)
            + u64::try_from(broker.groups.config().initial_rebalance_delay_ms.max(0)).unwrap_or(0),
    ) + JOIN_WAIT_SLACK;
    let rx = broker.groups.join_group(join);
    Box::pin(async move {
        let result = match tokio::time::timeout(wait, rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => JoinResult::error(&member_id, GroupError::CoordinatorNotAvailable),
            Err(_) => JoinResult::error(&member_id, GroupError::RebalanceInProgress),
        };
        Some(ResponseKind::JoinGroup(response(result, version)).into())
    })
}
