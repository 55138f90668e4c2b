//! ListGroups (API key 16): every group this coordinator knows, including groups that only
//! hold offsets; filtered by state (v4+, case-insensitive) and type (v5+: all our groups are
//! "classic").

use crate::authorizer::{AclOperation, ResourceType};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 5 };

/// The group type of every group served here (KIP-848 "consumer" groups are not).
const CLASSIC: &str = "classic";

/// Answers ListGroups.
#[must_use]
pub fn handle(ctx: &super::RequestContext, request: ListGroupsRequest) -> ListGroupsResponse {
    let (broker, version) = (&ctx.broker, ctx.api_version);
    let types_match = request.types_filter.is_empty()
        || request
            .types_filter
            .iter()
            .any(|t| t.as_str().eq_ignore_ascii_case(CLASSIC));
    if !types_match {
        return ListGroupsResponse::default();
    }
    let states: Vec<String> = request
        .states_filter
        .iter()
        .map(ToString::to_string)
        .collect();
    // DESCRIBE on the cluster lists every group; without it, the groups the sender may
    // DESCRIBE.
    let all_groups = ctx
        .authorizer
        .authorize_cluster_quietly(AclOperation::Describe);
    let groups = broker
        .groups
        .list_groups(&states)
        .into_iter()
        .filter(|g| {
            all_groups || ctx.authorize(AclOperation::Describe, ResourceType::Group, &g.group_id)
        })
        .map(|g| {
            let mut listed = ListedGroup::default()
                .with_group_id(StrBytes::from_string(g.group_id).into())
                .with_protocol_type(StrBytes::from_string(g.protocol_type));
            if version >= 4 {
                listed.group_state = StrBytes::from_static_str(g.state.name());
            }
            if version >= 5 {
                listed.group_type = StrBytes::from_static_str(CLASSIC);
            }
            listed
        })
        .collect();
    ListGroupsResponse::default().with_groups(groups)
}
