//! DescribeGroups (API key 15): state, protocol and members (client ids, hosts, metadata and
//! assignments) of groups.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

use crate::authorizer::{AclOperation, ResourceType};
use crate::coordinator::group::GroupError;
use crate::errors;
use kafka_protocol::ResponseError;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 6 };

/// First version that answers GROUP_ID_NOT_FOUND for an unknown group (KIP-1043); older
/// versions describe it as Dead with no error.
const NOT_FOUND_VERSION: i16 = 6;

/// Answers DescribeGroups.
#[must_use]
pub fn handle(
    ctx: &super::RequestContext,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    let groups = request
        .groups
        .iter()
        .map(|group_id| {
            let mut described = DescribedGroup::default().with_group_id(group_id.clone());
            if version >= 3 && request.include_authorized_operations {
                described.authorized_operations = ctx.authorizer.authorized_operations(
                    ResourceType::Group,
                    group_id.as_str(),
                    crate::authorizer::GROUP_OPERATIONS,
                );
            }
            if !ctx.authorize(AclOperation::Describe, ResourceType::Group, group_id) {
                return described
                    .with_error_code(ResponseError::GroupAuthorizationFailed.code())
                    .with_authorized_operations(i32::MIN);
            }
            match broker.groups.describe_group(group_id.0.as_str()) {
                Ok(d) => described
                    .with_group_state(StrBytes::from_static_str(d.state.name()))
                    .with_protocol_type(StrBytes::from_string(d.protocol_type))
                    .with_protocol_data(StrBytes::from_string(d.protocol))
                    .with_members(
                        d.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(StrBytes::from_string(m.member_id))
                                    .with_group_instance_id(if version >= 4 {
                                        m.group_instance_id.map(StrBytes::from_string)
                                    } else {
                                        None
                                    })
                                    .with_client_id(StrBytes::from_string(m.client_id))
                                    .with_client_host(StrBytes::from_string(m.client_host))
                                    .with_member_metadata(m.metadata)
                                    .with_member_assignment(m.assignment)
                            })
                            .collect(),
                    ),
                Err(GroupError::GroupIdNotFound) if version < NOT_FOUND_VERSION => {
                    described.with_group_state(StrBytes::from_static_str("Dead"))
                }
                Err(e) => {
                    let error = errors::group_error(&e);
                    let mut d = described.with_error_code(error.code());
                    if version >= NOT_FOUND_VERSION {
                        d.error_message = Some(StrBytes::from_string(format!(
                            "Group {} not found.",
                            group_id.0.as_str()
                        )));
                    }
                    if matches!(e, GroupError::GroupIdNotFound) {
                        // Kafka's `GroupMetadataManager.describeGroups` also names the
                        // state of a group it does not know: Dead.
                        d.group_state = StrBytes::from_static_str("Dead");
                    }
                    d
                }
            }
        })
        .collect();
    DescribeGroupsResponse::default().with_groups(groups)
}
