//! DeleteGroups (API key 42): remove empty groups and their committed offsets. Answered
//! once each deleted group's tombstones are committed, so a deletion the client saw
//! succeed does not come back after a crash (Kafka answers after its records commit too).

use std::time::Duration;

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, ResponseKind};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;

use crate::authorizer::{AclOperation, ResourceType};
use crate::coordinator::group::CommitResult;
use crate::errors;
use crate::handlers::offset_commit::committed_codes;
use crate::handlers::ResponseFuture;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// Answers DeleteGroups once the deletions are committed.
pub fn handle(ctx: &super::RequestContext, request: DeleteGroupsRequest) -> ResponseFuture {
    let broker = &ctx.broker;
    let mut results = Vec::with_capacity(request.groups_names.len());
    // (index into `results`, the append to wait for) of each group deleted here.
    let mut pending = Vec::new();
    for group_id in &request.groups_names {
        let code = if ctx.authorize(AclOperation::Delete, ResourceType::Group, group_id) {
            match broker.groups.delete_group(group_id.0.as_str()) {
                Ok(durable) => {
                    pending.push((results.len(), durable));
                    errors::NONE
                }
                Err(e) => errors::group_code(Some(e)),
            }
        } else {
            ResponseError::GroupAuthorizationFailed.code()
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(group_id.clone())
                .with_error_code(code),
        );
    }
    let timeout = Duration::from_millis(broker.groups.config().commit_timeout_ms);
    Box::pin(async move {
        for (index, durable) in pending {
            let result = CommitResult {
                errors: vec![None],
                durable,
            };
            if let Some(Some(code)) = committed_codes(result, timeout, "group deletion")
                .await
                .first()
            {
                results[index].error_code = code.code();
            }
        }
        Some(
            ResponseKind::DeleteGroups(DeleteGroupsResponse::default().with_results(results))
                .into(),
        )
    })
}
