//! DeleteGroups (API key 42): remove empty groups and their committed offsets.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
use kafka_protocol::protocol::VersionRange;

use crate::authorizer::{AclOperation, ResourceType};
use crate::errors;
use kafka_protocol::ResponseError;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// Answers DeleteGroups.
#[must_use]
pub fn handle(ctx: &super::RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let broker = &ctx.broker;
    let results = request
        .groups_names
        .iter()
        .map(|group_id| {
            let code = if ctx.authorize(AclOperation::Delete, ResourceType::Group, group_id) {
                errors::group_code(broker.groups.delete_group(group_id.0.as_str()).err())
            } else {
                ResponseError::GroupAuthorizationFailed.code()
            };
            DeletableGroupResult::default()
                .with_group_id(group_id.clone())
                .with_error_code(code)
        })
        .collect();
    DeleteGroupsResponse::default().with_results(results)
}
