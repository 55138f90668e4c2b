//! ACLs as KRaft keeps them (Kafka's `org.apache.kafka.metadata.authorizer`): the
//! bindings CreateAcls stores ([`AclBinding`]), the filters DescribeAcls and DeleteAcls
//! match them with ([`AclBindingFilter`]), and the image's index of them ([`AclCache`])
//! with the StandardAuthorizer's decision ([`AclCache::find_rule`]).
//!
//! Codes are Kafka's wire codes (`ResourceType`, `PatternType`, `AclOperation`,
//! `AclPermissionType`), kept as `i8` so records, requests and this module agree without
//! translation. The decision lives here, next to the data, because Kafka's does
//! (`StandardAuthorizerData`) and because the index it walks is part of the image: every
//! broker reaches the same answer from the same committed ACLs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::records::AccessControlEntryRecord;

/// Kafka's `ResourceType` codes.
pub mod resource_type {
    /// Not a known type (never stored).
    pub const UNKNOWN: i8 = 0;
    /// Any type (filters only).
    pub const ANY: i8 = 1;
    /// A topic.
    pub const TOPIC: i8 = 2;
    /// A consumer group.
    pub const GROUP: i8 = 3;
    /// The cluster.
    pub const CLUSTER: i8 = 4;
    /// A transactional id.
    pub const TRANSACTIONAL_ID: i8 = 5;
    /// A delegation token.
    pub const DELEGATION_TOKEN: i8 = 6;
    /// A user.
    pub const USER: i8 = 7;
}

/// Kafka's `PatternType` codes.
pub mod pattern_type {
    /// Not a known type.
    pub const UNKNOWN: i8 = 0;
    /// Any pattern type, names compared exactly (filters only).
    pub const ANY: i8 = 1;
    /// Every pattern that would match the filter's name (filters only).
    pub const MATCH: i8 = 2;
    /// The name exactly, or `*` for every name.
    pub const LITERAL: i8 = 3;
    /// Every name starting with the pattern's name.
    pub const PREFIXED: i8 = 4;
}

/// Kafka's `AclOperation` codes.
pub mod operation {
    /// Not a known operation.
    pub const UNKNOWN: i8 = 0;
    /// Any operation (filters only).
    pub const ANY: i8 = 1;
    /// Every operation.
    pub const ALL: i8 = 2;
    /// READ.
    pub const READ: i8 = 3;
    /// WRITE.
    pub const WRITE: i8 = 4;
    /// CREATE.
    pub const CREATE: i8 = 5;
    /// DELETE.
    pub const DELETE: i8 = 6;
    /// ALTER.
    pub const ALTER: i8 = 7;
    /// DESCRIBE.
    pub const DESCRIBE: i8 = 8;
    /// CLUSTER_ACTION.
    pub const CLUSTER_ACTION: i8 = 9;
    /// DESCRIBE_CONFIGS.
    pub const DESCRIBE_CONFIGS: i8 = 10;
    /// ALTER_CONFIGS.
    pub const ALTER_CONFIGS: i8 = 11;
    /// IDEMPOTENT_WRITE.
    pub const IDEMPOTENT_WRITE: i8 = 12;
    /// CREATE_TOKENS.
    pub const CREATE_TOKENS: i8 = 13;
    /// DESCRIBE_TOKENS.
    pub const DESCRIBE_TOKENS: i8 = 14;
    /// TWO_PHASE_COMMIT (KIP-939).
    pub const TWO_PHASE_COMMIT: i8 = 15;
}

/// Kafka's `AclPermissionType` codes.
pub mod permission {
    /// Not a known permission.
    pub const UNKNOWN: i8 = 0;
    /// Any permission (filters only).
    pub const ANY: i8 = 1;
    /// DENY.
    pub const DENY: i8 = 2;
    /// ALLOW.
    pub const ALLOW: i8 = 3;
}

/// The resource name of a LITERAL pattern that matches every name, and the host or
/// principal name that matches every host or user.
pub const WILDCARD: &str = "*";

/// The principal every `User` matches (Kafka's `WILDCARD_KAFKA_PRINCIPAL`).
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// One ACL without its id (Kafka's `AclBinding`: a `ResourcePattern` and an
/// `AccessControlEntry`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    /// [`resource_type`] code.
    pub resource_type: i8,
    /// The resource's name, or the prefix, or `*`.
    pub resource_name: String,
    /// [`pattern_type`] code: LITERAL or PREFIXED.
    pub pattern_type: i8,
    /// `Type:name`, e.g. `User:alice` or `User:*`.
    pub principal: String,
    /// The client's IP address, or `*`.
    pub host: String,
    /// [`operation`] code.
    pub operation: i8,
    /// [`permission`] code: ALLOW or DENY.
    pub permission_type: i8,
}

impl AclBinding {
    /// Kafka's checks of a new ACL (`AclControlManager.validateNewAcl`, and the principal
    /// parse its `StandardAcl` needs): the message of an INVALID_REQUEST if it fails.
    ///
    /// # Errors
    /// Kafka's message for the first field that is not acceptable.
    pub fn validate(&self) -> Result<(), String> {
        if matches!(
            self.resource_type,
            resource_type::UNKNOWN | resource_type::ANY
        ) || !(resource_type::UNKNOWN..=resource_type::USER).contains(&self.resource_type)
        {
            return Err(format!(
                "Invalid resourceType {}",
                resource_type_name(self.resource_type)
            ));
        }
        if !matches!(
            self.pattern_type,
            pattern_type::LITERAL | pattern_type::PREFIXED
        ) {
            return Err(format!(
                "Invalid patternType {}",
                pattern_type_name(self.pattern_type)
            ));
        }
        if matches!(self.operation, operation::UNKNOWN | operation::ANY)
            || !(operation::UNKNOWN..=operation::TWO_PHASE_COMMIT).contains(&self.operation)
        {
            return Err(format!(
                "Invalid operation {}",
                operation_name(self.operation)
            ));
        }
        if !matches!(self.permission_type, permission::DENY | permission::ALLOW) {
            return Err(format!(
                "Invalid permissionType {}",
                permission_name(self.permission_type)
            ));
        }
        if self.resource_name.is_empty() {
            return Err("Resource name should not be empty".to_string());
        }
        if !self.principal.contains(':') {
            return Err(format!(
                "Could not parse principal from `{}` (no colon is present separating the principal type from name)",
                self.principal
            ));
        }
        // Kafka refuses an empty host ("*" is the wildcard); an ACL with one would match
        // no connection but still be listed and deleted by filters.
        if self.host.is_empty() {
            return Err("Host pattern cannot be null or empty".to_string());
        }
        Ok(())
    }
}

/// Which ACLs a DescribeAcls or DeleteAcls means (Kafka's `AclBindingFilter`). `None`
/// names match any value; ANY codes match any code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclBindingFilter {
    /// [`resource_type`] code, or ANY.
    pub resource_type: i8,
    /// The name, or `None` for any.
    pub resource_name: Option<String>,
    /// [`pattern_type`] code, or ANY or MATCH.
    pub pattern_type: i8,
    /// The principal, or `None` for any.
    pub principal: Option<String>,
    /// The host, or `None` for any.
    pub host: Option<String>,
    /// [`operation`] code, or ANY.
    pub operation: i8,
    /// [`permission`] code, or ANY.
    pub permission_type: i8,
}

impl AclBindingFilter {
    /// Kafka's refusal of a filter with an UNKNOWN (or out-of-range) element.
    ///
    /// # Errors
    /// `Unknown patternFilter.` or `Unknown entryFilter.`, as Kafka's controller says.
    pub fn validate(&self) -> Result<(), String> {
        let pattern_known = (resource_type::ANY..=resource_type::USER)
            .contains(&self.resource_type)
            && (pattern_type::ANY..=pattern_type::PREFIXED).contains(&self.pattern_type);
        if !pattern_known {
            return Err("Unknown patternFilter.".to_string());
        }
        let entry_known = (operation::ANY..=operation::TWO_PHASE_COMMIT).contains(&self.operation)
            && (permission::ANY..=permission::ALLOW).contains(&self.permission_type);
        if !entry_known {
            return Err("Unknown entryFilter.".to_string());
        }
        Ok(())
    }

    /// Whether `binding` is one this filter means (Kafka's `AclBindingFilter.matches`).
    #[must_use]
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.matches_pattern(binding) && self.matches_entry(binding)
    }

    fn matches_pattern(&self, binding: &AclBinding) -> bool {
        if self.resource_type != resource_type::ANY && self.resource_type != binding.resource_type {
            return false;
        }
        let any_pattern = matches!(self.pattern_type, pattern_type::ANY | pattern_type::MATCH);
        if !any_pattern && self.pattern_type != binding.pattern_type {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type == pattern_type::ANY || self.pattern_type == binding.pattern_type {
            return *name == binding.resource_name;
        }
        // MATCH: every stored pattern that would apply to a resource of this name.
        match binding.pattern_type {
            pattern_type::LITERAL => {
                *name == binding.resource_name || binding.resource_name == WILDCARD
            }
            pattern_type::PREFIXED => name.starts_with(&binding.resource_name),
            _ => false,
        }
    }

    fn matches_entry(&self, binding: &AclBinding) -> bool {
        self.principal
            .as_ref()
            .is_none_or(|p| *p == binding.principal)
            && self.host.as_ref().is_none_or(|h| *h == binding.host)
            && (self.operation == operation::ANY || self.operation == binding.operation)
            && (self.permission_type == permission::ANY
                || self.permission_type == binding.permission_type)
    }
}

/// Why an ACL search decided as it did (Kafka's `MatchingRule`), for the audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MatchingRule {
    /// This ACL matched: DENY wins over ALLOW.
    Acl(Arc<AccessControlEntryRecord>),
    /// No ACL is on the resource at all: `allow.everyone.if.no.acl.found` decides.
    NoAclOnResource,
    /// The resource has ACLs, but none for this principal, host and operation.
    NoMatchingAcl,
}

/// The ACLs of one resource type, indexed as a lookup for one resource name needs them.
#[derive(Clone, Debug, Default)]
struct TypeIndex {
    literal: HashMap<String, Vec<Arc<AccessControlEntryRecord>>>,
    prefixed: HashMap<String, Vec<Arc<AccessControlEntryRecord>>>,
}

/// Every ACL of the image, by id and indexed by resource (Kafka's `AclCache`). Cloned
/// (copy on write) only by a batch that changes ACLs.
#[derive(Clone, Debug, Default)]
pub struct AclCache {
    by_id: BTreeMap<Uuid, Arc<AccessControlEntryRecord>>,
    by_resource: HashMap<i8, TypeIndex>,
}

impl PartialEq for AclCache {
    fn eq(&self, other: &Self) -> bool {
        self.by_id == other.by_id
    }
}

impl Eq for AclCache {}

impl AclCache {
    /// How many ACLs there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// True without ACLs.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Every ACL, by id.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<AccessControlEntryRecord>> {
        self.by_id.values()
    }

    /// Whether an ACL with exactly this binding is stored.
    #[must_use]
    pub fn contains(&self, binding: &AclBinding) -> bool {
        self.by_resource
            .get(&binding.resource_type)
            .and_then(|index| {
                let names = if binding.pattern_type == pattern_type::PREFIXED {
                    &index.prefixed
                } else {
                    &index.literal
                };
                names.get(&binding.resource_name)
            })
            .is_some_and(|acls| acls.iter().any(|acl| acl.binding == *binding))
    }

    /// Whether an ACL has this id.
    #[must_use]
    pub fn contains_id(&self, id: &Uuid) -> bool {
        self.by_id.contains_key(id)
    }

    /// Stores `record`, replacing an ACL of the same id.
    pub(crate) fn insert(&mut self, record: AccessControlEntryRecord) {
        self.remove(&record.id);
        let record = Arc::new(record);
        let index = self
            .by_resource
            .entry(record.binding.resource_type)
            .or_default();
        let names = if record.binding.pattern_type == pattern_type::PREFIXED {
            &mut index.prefixed
        } else {
            &mut index.literal
        };
        names
            .entry(record.binding.resource_name.clone())
            .or_default()
            .push(Arc::clone(&record));
        self.by_id.insert(record.id, record);
    }

    /// Removes the ACL with id `id`; false if there was none.
    pub(crate) fn remove(&mut self, id: &Uuid) -> bool {
        let Some(record) = self.by_id.remove(id) else {
            return false;
        };
        let binding = &record.binding;
        if let Some(index) = self.by_resource.get_mut(&binding.resource_type) {
            let names = if binding.pattern_type == pattern_type::PREFIXED {
                &mut index.prefixed
            } else {
                &mut index.literal
            };
            if let Some(acls) = names.get_mut(&binding.resource_name) {
                acls.retain(|acl| acl.id != *id);
                if acls.is_empty() {
                    names.remove(&binding.resource_name);
                }
            }
        }
        true
    }

    /// The StandardAuthorizer's decision for `principal` (`Type:name`) at `host` doing
    /// `operation` on the resource `resource_type`/`name` (Kafka's
    /// `StandardAuthorizerData.findAclRule`): the ACLs that apply are the LITERAL ones on
    /// the name and on `*`, and the PREFIXED ones whose name starts the resource's; of
    /// those for the principal (or `User:*`) and the host (or `*`), a DENY decides, then an
    /// ALLOW. ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE, and ALLOW of
    /// ALTER_CONFIGS implies DESCRIBE_CONFIGS; DENY implies nothing. Returns whether the
    /// action is allowed, given `allow_if_no_acl` for a resource without any ACL.
    #[must_use]
    pub fn find_rule(
        &self,
        principal: &str,
        host: &str,
        operation: i8,
        resource_type: i8,
        name: &str,
        allow_if_no_acl: bool,
    ) -> (bool, MatchingRule) {
        let mut found_resource_acl = false;
        let mut allow: Option<&Arc<AccessControlEntryRecord>> = None;
        if let Some(index) = self.by_resource.get(&resource_type) {
            let literal = [name, WILDCARD]
                .into_iter()
                .take(if name == WILDCARD { 1 } else { 2 })
                .filter_map(|n| index.literal.get(n));
            let prefixed = name
                .char_indices()
                .map(|(i, c)| &name[..i + c.len_utf8()])
                .filter_map(|prefix| index.prefixed.get(prefix));
            for acl in literal.chain(prefixed).flatten() {
                found_resource_acl = true;
                match entry_result(acl, principal, host, operation) {
                    Some(true) => allow = Some(acl),
                    Some(false) => return (false, MatchingRule::Acl(Arc::clone(acl))),
                    None => {}
                }
            }
        }
        match allow {
            Some(acl) => (true, MatchingRule::Acl(Arc::clone(acl))),
            None if !found_resource_acl => (allow_if_no_acl, MatchingRule::NoAclOnResource),
            None => (false, MatchingRule::NoMatchingAcl),
        }
    }

    /// Whether `principal` at `host` may do `operation` on at least one resource of
    /// `resource_type` (Kafka's `Authorizer.authorizeByResourceType`, after its check of
    /// a resource named `hardcode`, which the caller makes): an ALLOW on some literal name
    /// that no DENY names exactly or by prefix, or on some prefix that no DENY prefix
    /// covers; a DENY on `*` refuses everything.
    #[must_use]
    pub fn allows_some(
        &self,
        principal: &str,
        host: &str,
        operation: i8,
        resource_type: i8,
    ) -> bool {
        let Some(index) = self.by_resource.get(&resource_type) else {
            return false;
        };
        let applies = |acl: &AccessControlEntryRecord| {
            let b = &acl.binding;
            (b.host == host || b.host == WILDCARD)
                && (b.principal == principal || b.principal == WILDCARD_PRINCIPAL)
                && (b.operation == operation || b.operation == operation::ALL)
        };
        let mut deny_literal = Vec::new();
        let mut deny_prefixed = Vec::new();
        let mut allow_literal = Vec::new();
        let mut allow_prefixed = Vec::new();
        for (prefixed, names) in [(false, &index.literal), (true, &index.prefixed)] {
            for (name, acls) in names {
                for acl in acls.iter().filter(|acl| applies(acl)) {
                    let deny = acl.binding.permission_type == permission::DENY;
                    match (deny, prefixed) {
                        (true, false) if name == WILDCARD => return false,
                        (true, false) => deny_literal.push(name.as_str()),
                        (true, true) => deny_prefixed.push(name.as_str()),
                        (false, false) if name == WILDCARD => return true,
                        (false, false) => allow_literal.push(name.as_str()),
                        (false, true) => allow_prefixed.push(name.as_str()),
                    }
                }
            }
        }
        let dominated = |allowed: &str| deny_prefixed.iter().any(|d| allowed.starts_with(d));
        allow_literal
            .iter()
            .any(|name| !deny_literal.contains(name) && !dominated(name))
            || allow_prefixed.iter().any(|name| !dominated(name))
    }
}

/// What `acl` says about `principal` at `host` doing `operation` on a resource it covers:
/// `Some(true)` allows, `Some(false)` denies, `None` does not apply (Kafka's
/// `StandardAuthorizerData.findResult`).
fn entry_result(
    acl: &AccessControlEntryRecord,
    principal: &str,
    host: &str,
    wanted: i8,
) -> Option<bool> {
    let b = &acl.binding;
    if b.principal != principal && b.principal != WILDCARD_PRINCIPAL {
        return None;
    }
    if b.host != WILDCARD && b.host != host {
        return None;
    }
    let allow = b.permission_type == permission::ALLOW;
    if b.operation != operation::ALL {
        let implied = allow
            && match wanted {
                operation::DESCRIBE => matches!(
                    b.operation,
                    operation::READ | operation::WRITE | operation::DELETE | operation::ALTER
                ),
                operation::DESCRIBE_CONFIGS => b.operation == operation::ALTER_CONFIGS,
                _ => false,
            };
        if b.operation != wanted && !implied {
            return None;
        }
    }
    Some(allow)
}

/// Kafka's name of a resource type code (as `kafka-acls.sh` and its messages print it).
#[must_use]
pub fn resource_type_name(code: i8) -> &'static str {
    match code {
        resource_type::ANY => "ANY",
        resource_type::TOPIC => "TOPIC",
        resource_type::GROUP => "GROUP",
        resource_type::CLUSTER => "CLUSTER",
        resource_type::TRANSACTIONAL_ID => "TRANSACTIONAL_ID",
        resource_type::DELEGATION_TOKEN => "DELEGATION_TOKEN",
        resource_type::USER => "USER",
        _ => "UNKNOWN",
    }
}

/// Kafka's name of a pattern type code.
#[must_use]
pub fn pattern_type_name(code: i8) -> &'static str {
    match code {
        pattern_type::ANY => "ANY",
        pattern_type::MATCH => "MATCH",
        pattern_type::LITERAL => "LITERAL",
        pattern_type::PREFIXED => "PREFIXED",
        _ => "UNKNOWN",
    }
}

/// Kafka's name of an operation code.
#[must_use]
pub fn operation_name(code: i8) -> &'static str {
    match code {
        operation::ANY => "ANY",
        operation::ALL => "ALL",
        operation::READ => "READ",
        operation::WRITE => "WRITE",
        operation::CREATE => "CREATE",
        operation::DELETE => "DELETE",
        operation::ALTER => "ALTER",
        operation::DESCRIBE => "DESCRIBE",
        operation::CLUSTER_ACTION => "CLUSTER_ACTION",
        operation::DESCRIBE_CONFIGS => "DESCRIBE_CONFIGS",
        operation::ALTER_CONFIGS => "ALTER_CONFIGS",
        operation::IDEMPOTENT_WRITE => "IDEMPOTENT_WRITE",
        operation::CREATE_TOKENS => "CREATE_TOKENS",
        operation::DESCRIBE_TOKENS => "DESCRIBE_TOKENS",
        operation::TWO_PHASE_COMMIT => "TWO_PHASE_COMMIT",
        _ => "UNKNOWN",
    }
}

/// Kafka's name of a permission code.
#[must_use]
pub fn permission_name(code: i8) -> &'static str {
    match code {
        permission::ANY => "ANY",
        permission::DENY => "DENY",
        permission::ALLOW => "ALLOW",
        _ => "UNKNOWN",
    }
}

#[cfg(test)]
mod tests;
