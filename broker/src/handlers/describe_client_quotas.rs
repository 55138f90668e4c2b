//! DescribeClientQuotas (API key 48, KIP-546): the client quotas whose entity matches the
//! filter, from this broker's metadata image, with Kafka's `ClientQuotasImage.describe`
//! rules: each component is an entity type matched EXACT (a name), DEFAULT (the type's
//! default entity) or SPECIFIED (any entity having the type); `strict` also wants no
//! other type in the entity. What `kafka-configs.sh --describe --entity-type users|clients`
//! sends. Needs DESCRIBE_CONFIGS on the cluster.

use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;
use logbook_metadata::quotas::{QuotaEntity, CLIENT_ID, IP, USER};

use super::RequestContext;
use crate::authorizer::AclOperation;

/// Versions served (Kafka 4.x serves 0-1).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

const MATCH_TYPE_EXACT: i8 = 0;
const MATCH_TYPE_DEFAULT: i8 = 1;
const MATCH_TYPE_SPECIFIED: i8 = 2;

/// A filter: types matched by name (`None`: the default entity), types that must be
/// present.
struct Filter {
    exact: Vec<(String, Option<String>)>,
    typed: Vec<String>,
    strict: bool,
}

/// Answers a DescribeClientQuotas request.
pub fn handle(
    ctx: &RequestContext,
    request: DescribeClientQuotasRequest,
) -> DescribeClientQuotasResponse {
    let refused = |error: ResponseError, message: Option<String>| {
        DescribeClientQuotasResponse::default()
            .with_error_code(error.code())
            .with_error_message(message.map(StrBytes::from_string))
            .with_entries(None)
    };
    if !ctx.authorize_cluster(AclOperation::DescribeConfigs) {
        return refused(ResponseError::ClusterAuthorizationFailed, None);
    }
    let filter = match filter(&request) {
        Ok(filter) => filter,
        Err((error, message)) => return refused(error, Some(message)),
    };
    let image = ctx.metadata_image();
    let entries = image
        .client_quotas()
        .iter()
        .filter(|(entity, _)| matches(entity, &filter))
        .map(|(entity, quotas)| {
            EntryData::default()
                .with_entity(
                    entity
                        .iter()
                        .map(|(t, n)| {
                            EntityData::default()
                                .with_entity_type(StrBytes::from_string(t.clone()))
                                .with_entity_name(n.clone().map(StrBytes::from_string))
                        })
                        .collect(),
                )
                .with_values(
                    quotas
                        .iter()
                        .map(|(key, value)| {
                            ValueData::default()
                                .with_key(StrBytes::from_string(key.clone()))
                                .with_value(value.0)
                        })
                        .collect(),
                )
        })
        .collect();
    DescribeClientQuotasResponse::default()
        .with_error_message(None)
        .with_entries(Some(entries))
}

/// The request's filter, checked as Kafka checks it (its codes and messages).
fn filter(request: &DescribeClientQuotasRequest) -> Result<Filter, (ResponseError, String)> {
    let invalid = |m: String| (ResponseError::InvalidRequest, m);
    let mut f = Filter {
        exact: Vec::new(),
        typed: Vec::new(),
        strict: request.strict,
    };
    for component in &request.components {
        let t = component.entity_type.to_string();
        if t.is_empty() {
            return Err(invalid("Invalid empty entity type.".into()));
        }
        if f.exact.iter().any(|(e, _)| *e == t) || f.typed.contains(&t) {
            return Err(invalid(format!(
                "Entity type {t} cannot appear more than once in the filter."
            )));
        }
        if ![IP, USER, CLIENT_ID].contains(&t.as_str()) {
            return Err((
                ResponseError::UnsupportedVersion,
                format!("Unsupported entity type {t}"),
            ));
        }
        let name = component._match.as_ref().map(ToString::to_string);
        match component.match_type {
            MATCH_TYPE_EXACT => {
                let name = name.ok_or_else(|| {
                    invalid(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                    )
                })?;
                f.exact.push((t, Some(name)));
            }
            MATCH_TYPE_DEFAULT => {
                if name.is_some() {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                            .into(),
                    ));
                }
                f.exact.push((t, None));
            }
            MATCH_TYPE_SPECIFIED => {
                if name.is_some() {
                    return Err(invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.".into()));
                }
                f.typed.push(t);
            }
            other => return Err(invalid(format!("Unknown match type {other}"))),
        }
    }
    let has = |t: &str| f.exact.iter().any(|(e, _)| e == t) || f.typed.iter().any(|e| e == t);
    if has(IP) && (has(USER) || has(CLIENT_ID)) {
        return Err(invalid("Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.".into()));
    }
    Ok(f)
}

/// Kafka's `ClientQuotasImage.matches`.
fn matches(entity: &QuotaEntity, f: &Filter) -> bool {
    if f.strict && entity.len() != f.exact.len() + f.typed.len() {
        return false;
    }
    f.exact
        .iter()
        .all(|(t, name)| entity.get(t).is_some_and(|n| n == name))
        && f.typed.iter().all(|t| entity.contains_key(t))
}
