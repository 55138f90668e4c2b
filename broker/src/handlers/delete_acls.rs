//! DeleteAcls (API key 31): what `kafka-acls.sh --remove` sends. Needs ALTER on the
//! cluster; the controller removes every stored ACL each filter matches, in one batch,
//! and each filter's answer lists the ACLs it removed.

use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use logbook_metadata::acls::{AclBinding, AclBindingFilter};

use super::acls::{self, Refusal};
use super::RequestContext;
use crate::authorizer::AclOperation;
use crate::errors;

/// Versions served (v0, deprecated by Kafka and unused by its clients since 2.0, is not encodable by kafka-protocol).
pub const VERSIONS: VersionRange = VersionRange { min: 1, max: 3 };

/// Answers a DeleteAcls request.
pub fn handle(ctx: &RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse {
    let count = request.filters.len();
    let refuse_all = |(code, message): Refusal| {
        DeleteAclsResponse::default().with_filter_results(vec![result(Err((code, message))); count])
    };
    if !ctx.authorize_cluster(AclOperation::Alter) {
        return refuse_all((
            ResponseError::ClusterAuthorizationFailed,
            acls::CLUSTER_AUTHORIZATION_FAILED.to_string(),
        ));
    }
    if !acls::enabled(ctx) {
        return refuse_all((
            ResponseError::SecurityDisabled,
            acls::NO_AUTHORIZER.to_string(),
        ));
    }
    let filters: Vec<AclBindingFilter> = request
        .filters
        .iter()
        .map(|f| AclBindingFilter {
            resource_type: f.resource_type_filter,
            resource_name: f.resource_name_filter.as_ref().map(ToString::to_string),
            pattern_type: f.pattern_type_filter,
            principal: f.principal_filter.as_ref().map(ToString::to_string),
            host: f.host_filter.as_ref().map(ToString::to_string),
            operation: f.operation,
            permission_type: f.permission_type,
        })
        .collect();
    if filters.is_empty() {
        return DeleteAclsResponse::default();
    }
    let outcomes = match acls::commit(ctx, "DeleteAcls", |client| async move {
        client.delete_acls(filters).await
    }) {
        Ok(outcomes) => outcomes,
        Err(refusal) => return refuse_all(refusal),
    };
    let results = outcomes
        .into_iter()
        .map(|r| result(r.map_err(|e| (errors::quorum_error(&e), e.to_string()))))
        .collect();
    DeleteAclsResponse::default().with_filter_results(results)
}

fn result(outcome: Result<Vec<AclBinding>, Refusal>) -> DeleteAclsFilterResult {
    match outcome {
        Ok(deleted) => DeleteAclsFilterResult::default().with_matching_acls(
            deleted
                .into_iter()
                .map(|b| {
                    DeleteAclsMatchingAcl::default()
                        .with_resource_type(b.resource_type)
                        .with_resource_name(StrBytes::from_string(b.resource_name))
                        .with_pattern_type(b.pattern_type)
                        .with_principal(StrBytes::from_string(b.principal))
                        .with_host(StrBytes::from_string(b.host))
                        .with_operation(b.operation)
                        .with_permission_type(b.permission_type)
                })
                .collect(),
        ),
        Err((code, message)) => DeleteAclsFilterResult::default()
            .with_error_code(code.code())
            .with_error_message((!message.is_empty()).then(|| StrBytes::from_string(message))),
    }
}
