//! DescribeAcls (API key 29): what `kafka-acls.sh --list` sends. Needs DESCRIBE on the
//! cluster; answers the ACLs of this broker's metadata image that the filter matches
//! (Kafka's `AclBindingFilter`, MATCH included), grouped by resource pattern.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use logbook_metadata::acls::AclBindingFilter;

use super::acls;
use super::RequestContext;
use crate::authorizer::AclOperation;

/// Versions served (v0, deprecated by Kafka and unused by its clients since 2.0, is not encodable by kafka-protocol).
pub const VERSIONS: VersionRange = VersionRange { min: 1, max: 3 };

/// Answers a DescribeAcls request.
pub fn handle(ctx: &RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse {
    let refuse = |code: ResponseError, message: &str| {
        DescribeAclsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(StrBytes::from_string(message.to_string())))
    };
    if !ctx.authorize_cluster(AclOperation::Describe) {
        return refuse(
            ResponseError::ClusterAuthorizationFailed,
            acls::CLUSTER_AUTHORIZATION_FAILED,
        );
    }
    if !acls::enabled(ctx) {
        return refuse(
            ResponseError::SecurityDisabled,
            "No Authorizer is configured on the broker",
        );
    }
    let filter = AclBindingFilter {
        resource_type: request.resource_type_filter,
        resource_name: request.resource_name_filter.map(|n| n.to_string()),
        pattern_type: request.pattern_type_filter,
        principal: request.principal_filter.map(|p| p.to_string()),
        host: request.host_filter.map(|h| h.to_string()),
        operation: request.operation,
        permission_type: request.permission_type,
    };
    if let Err(message) = filter.validate() {
        return refuse(ResponseError::InvalidRequest, &message);
    }
    let image = ctx.metadata_image();
    let mut resources: BTreeMap<(i8, &str, i8), Vec<AclDescription>> = BTreeMap::new();
    for acl in image
        .acls()
        .iter()
        .filter(|acl| filter.matches(&acl.binding))
    {
        let b = &acl.binding;
        resources
            .entry((b.resource_type, b.resource_name.as_str(), b.pattern_type))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(StrBytes::from_string(b.principal.clone()))
                    .with_host(StrBytes::from_string(b.host.clone()))
                    .with_operation(b.operation)
                    .with_permission_type(b.permission_type),
            );
    }
    let resources = resources
        .into_iter()
        .map(|((resource_type, name, pattern_type), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(StrBytes::from_string(name.to_string()))
                .with_pattern_type(pattern_type)
                .with_acls(acls)
        })
        .collect();
    DescribeAclsResponse::default().with_resources(resources)
}
