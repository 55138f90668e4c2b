//! CreateAcls (API key 30): what `kafka-acls.sh --add` sends. Needs ALTER on the cluster;
//! each binding is checked as Kafka's `AclApis` and `AclControlManager` check it (the
//! CLUSTER resource is named `kafka-cluster`, names are not empty, LITERAL or PREFIXED
//! patterns, a known operation and ALLOW or DENY, a `Type:name` principal) and the
//! controller stores the new ones in the metadata log.

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use logbook_metadata::acls::{resource_type, AclBinding};

use super::acls::{self, Refusal};
use super::RequestContext;
use crate::authorizer::{AclOperation, CLUSTER_NAME};
use crate::errors;

/// Versions served (v0, deprecated by Kafka and unused by its clients since 2.0, is not encodable by kafka-protocol).
pub const VERSIONS: VersionRange = VersionRange { min: 1, max: 3 };

/// Answers a CreateAcls request.
pub fn handle(ctx: &RequestContext, request: CreateAclsRequest) -> CreateAclsResponse {
    let count = request.creations.len();
    let refuse_all = |(code, message): Refusal| {
        CreateAclsResponse::default().with_results(vec![result(Err((code, message))); count])
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
    let mut outcomes: Vec<Option<Result<(), Refusal>>> = Vec::with_capacity(count);
    let mut valid = Vec::new();
    for creation in &request.creations {
        let binding = AclBinding {
            resource_type: creation.resource_type,
            resource_name: creation.resource_name.to_string(),
            pattern_type: creation.resource_pattern_type,
            principal: creation.principal.to_string(),
            host: creation.host.to_string(),
            operation: creation.operation,
            permission_type: creation.permission_type,
        };
        let refused = if binding.resource_type == resource_type::CLUSTER
            && binding.resource_name != CLUSTER_NAME
        {
            Some(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            ))
        } else if binding.resource_name.is_empty() {
            Some("Invalid empty resource name".to_string())
        } else {
            binding.validate().err()
        };
        match refused {
            Some(message) => outcomes.push(Some(Err((ResponseError::InvalidRequest, message)))),
            None => {
                outcomes.push(None);
                valid.push(binding);
            }
        }
    }
    let mut committed = if valid.is_empty() {
        Vec::new()
    } else {
        match acls::commit(ctx, "CreateAcls", |client| async move {
            client.create_acls(valid).await
        }) {
            Ok(results) => results
                .into_iter()
                .map(|r| r.map_err(|e| (errors::quorum_error(&e), e.to_string())))
                .collect(),
            Err(refusal) => return refuse_all(refusal),
        }
    }
    .into_iter();
    let results = outcomes
        .into_iter()
        .map(|outcome| {
            result(outcome.unwrap_or_else(|| {
                committed
                    .next()
                    .unwrap_or_else(|| Err((ResponseError::UnknownServerError, String::new())))
            }))
        })
        .collect();
    CreateAclsResponse::default().with_results(results)
}

fn result(outcome: Result<(), Refusal>) -> AclCreationResult {
    match outcome {
        Ok(()) => AclCreationResult::default(),
        Err((code, message)) => AclCreationResult::default()
            .with_error_code(code.code())
            .with_error_message((!message.is_empty()).then(|| StrBytes::from_string(message))),
    }
}
