//! Kafka's `StandardAuthorizer`: ACLs from the metadata log decide, `super.users` may do
//! anything, and `allow.everyone.if.no.acl.found` decides for a resource without any ACL.
//! Enabled by `authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`,
//! Kafka's own name, so a `server.properties` written for Kafka works unchanged.
//!
//! The ACLs are the broker's metadata image's ([`logbook_metadata::acls::AclCache`]), so
//! a CreateAcls committed by the controller applies on every broker as soon as its image
//! has it, and a decision costs a few hash lookups on an image read without a lock.
//! Every decision is logged under the target `kafka.authorizer.logger`, Kafka's
//! authorizer logger: a denial the request asked about at INFO, an allowed access at
//! DEBUG, the checks that only shape an answer (authorized operations, Metadata's
//! filtering) at TRACE.

use std::collections::HashSet;

use logbook_metadata::acls::{self, MatchingRule};

use super::{AclOperation, Action, Authorizer, RequestIdentity, ResourceType};
use crate::cluster::MetadataCache;

/// Kafka's class name of its ACL authorizer (KRaft), the one value that enables ACLs.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// The log target of authorization decisions (Kafka's `kafka.authorizer.logger`).
pub const AUDIT_TARGET: &str = "kafka.authorizer.logger";

/// The authorizer settings as configured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizerSettings {
    /// `authorizer.class.name` names the StandardAuthorizer.
    pub standard: bool,
    /// `super.users`: principals (`User:admin`) allowed everything.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found` (false by default, as in Kafka).
    pub allow_everyone_if_no_acl_found: bool,
}

/// Reads `authorizer.class.name`: true for Kafka's StandardAuthorizer, false for empty.
///
/// # Errors
/// Any other class, with what to use instead.
pub fn parse_class_name(value: &str) -> Result<bool, String> {
    match value.trim() {
        "" => Ok(false),
        STANDARD_AUTHORIZER => Ok(true),
        "kafka.security.authorizer.AclAuthorizer" => Err(format!(
            "AclAuthorizer kept its ACLs in ZooKeeper and is gone from Kafka 4; use {STANDARD_AUTHORIZER}"
        )),
        other => Err(format!(
            "authorizer class {other} is not available; use {STANDARD_AUTHORIZER}"
        )),
    }
}

/// `authorizer.class.name` as DescribeConfigs reports it.
#[must_use]
pub fn class_name(standard: bool) -> &'static str {
    if standard {
        STANDARD_AUTHORIZER
    } else {
        ""
    }
}

/// Reads `super.users`: principals separated by `;` (Kafka's syntax), each `Type:name`.
///
/// # Errors
/// A principal without a `:`.
pub fn parse_super_users(value: &str) -> Result<Vec<String>, String> {
    value
        .split(';')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            if p.split_once(':').is_some_and(|(t, _)| !t.is_empty()) {
                Ok(p.to_string())
            } else {
                Err(format!(
                    "super user '{p}' is not a principal of the form Type:name (e.g. User:admin)"
                ))
            }
        })
        .collect()
}

/// Kafka's StandardAuthorizer over this broker's metadata image.
pub struct StandardAuthorizer {
    metadata: MetadataCache,
    super_users: HashSet<String>,
    allow_if_no_acl: bool,
}

impl StandardAuthorizer {
    /// An authorizer deciding from `metadata`'s ACLs with `settings`.
    #[must_use]
    pub fn new(metadata: MetadataCache, settings: &AuthorizerSettings) -> Self {
        tracing::info!(
            super_users = %settings.super_users.join(","),
            allow_everyone_if_no_acl_found = settings.allow_everyone_if_no_acl_found,
            "StandardAuthorizer enabled"
        );
        Self {
            metadata,
            super_users: settings.super_users.iter().cloned().collect(),
            allow_if_no_acl: settings.allow_everyone_if_no_acl_found,
        }
    }

    fn decide(&self, request: &RequestIdentity<'_>, action: &Action<'_>) -> bool {
        let principal = request.principal.to_string();
        let host = request.client_address.ip().to_string();
        let (allowed, rule) = if self.super_users.contains(&principal) {
            (true, None)
        } else {
            let image = self.metadata.image();
            let (allowed, rule) = image.acls().find_rule(
                &principal,
                &host,
                action.operation as i8,
                action.resource_type as i8,
                action.name,
                self.allow_if_no_acl,
            );
            (allowed, Some(rule))
        };
        audit(
            request,
            action,
            &host,
            allowed,
            rule.as_ref(),
            self.allow_if_no_acl,
        );
        allowed
    }
}

impl Authorizer for StandardAuthorizer {
    fn authorize(&self, request: &RequestIdentity<'_>, action: &Action<'_>) -> bool {
        self.decide(request, action)
    }

    /// Kafka's `Authorizer.authorizeByResourceType`: first a resource named `hardcode`
    /// (so super users, and `allow.everyone.if.no.acl.found` without ACLs, pass), then
    /// whether some ALLOW for the principal is not undone by a DENY.
    fn authorize_by_resource_type(
        &self,
        request: &RequestIdentity<'_>,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool {
        let hardcode = Action {
            operation,
            resource_type,
            name: "hardcode",
            log_if_denied: false,
            log_if_allowed: true,
        };
        if self.decide(request, &hardcode) {
            return true;
        }
        let principal = request.principal.to_string();
        let host = request.client_address.ip().to_string();
        self.metadata.image().acls().allows_some(
            &principal,
            &host,
            operation as i8,
            resource_type as i8,
        )
    }
}

/// Logs one decision as Kafka's authorizer logger writes it.
fn audit(
    request: &RequestIdentity<'_>,
    action: &Action<'_>,
    host: &str,
    allowed: bool,
    rule: Option<&MatchingRule>,
    allow_if_no_acl: bool,
) {
    let log_if_allowed = action.log_if_allowed;
    let enabled = if allowed && log_if_allowed {
        tracing::enabled!(target: AUDIT_TARGET, tracing::Level::DEBUG)
    } else if !allowed && action.log_if_denied {
        tracing::enabled!(target: AUDIT_TARGET, tracing::Level::INFO)
    } else {
        tracing::enabled!(target: AUDIT_TARGET, tracing::Level::TRACE)
    };
    if !enabled {
        return;
    }
    let rule = match rule {
        None => "SuperUser".to_string(),
        Some(MatchingRule::Acl(acl)) => {
            let b = &acl.binding;
            format!(
                "MatchingAcl(acl=StandardAcl(resourceType={}, resourceName={}, patternType={}, principal={}, host={}, operation={}, permissionType={}))",
                acls::resource_type_name(b.resource_type),
                b.resource_name,
                acls::pattern_type_name(b.pattern_type),
                b.principal,
                b.host,
                acls::operation_name(b.operation),
                acls::permission_name(b.permission_type)
            )
        }
        Some(MatchingRule::NoAclOnResource) => format!(
            "DefaultRule(result={})",
            if allow_if_no_acl { "ALLOWED" } else { "DENIED" }
        ),
        Some(MatchingRule::NoMatchingAcl) => "DefaultRule(result=DENIED)".to_string(),
    };
    let message = format!(
        "Principal = {} is {} operation = {} from host = {} on resource = {}:LITERAL:{} for request = {:?} with resourceRefCount = 1 based on rule {}",
        request.principal,
        if allowed { "Allowed" } else { "Denied" },
        acls::operation_name(action.operation as i8),
        host,
        resource_type_title(action.resource_type),
        action.name,
        request.api_key,
        rule
    );
    if allowed && log_if_allowed {
        tracing::debug!(target: AUDIT_TARGET, "{message}");
    } else if !allowed && action.log_if_denied {
        tracing::info!(target: AUDIT_TARGET, "{message}");
    } else {
        tracing::trace!(target: AUDIT_TARGET, "{message}");
    }
}

/// How Kafka names a resource type in its audit lines (`SecurityUtils.resourceTypeName`).
fn resource_type_title(resource_type: ResourceType) -> &'static str {
    match resource_type {
        ResourceType::Topic => "Topic",
        ResourceType::Group => "Group",
        ResourceType::Cluster => "Cluster",
        ResourceType::TransactionalId => "TransactionalId",
        ResourceType::DelegationToken => "DelegationToken",
        ResourceType::User => "User",
    }
}
