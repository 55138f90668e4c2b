use super::*;

fn acl(
    id: u128,
    rt: i8,
    name: &str,
    pt: i8,
    principal: &str,
    op: i8,
    perm: i8,
) -> AccessControlEntryRecord {
    AccessControlEntryRecord {
        id: Uuid::from_u128(id),
        binding: AclBinding {
            resource_type: rt,
            resource_name: name.to_string(),
            pattern_type: pt,
            principal: principal.to_string(),
            host: WILDCARD.to_string(),
            operation: op,
            permission_type: perm,
        },
    }
}

fn cache(acls: Vec<AccessControlEntryRecord>) -> AclCache {
    let mut cache = AclCache::default();
    for a in acls {
        cache.insert(a);
    }
    cache
}

use operation::{ALL, ALTER_CONFIGS, DESCRIBE, DESCRIBE_CONFIGS, READ, WRITE};
use pattern_type::{LITERAL, PREFIXED};
use permission::{ALLOW, DENY};
use resource_type::{GROUP, TOPIC};

fn allowed(cache: &AclCache, principal: &str, op: i8, name: &str) -> bool {
    cache
        .find_rule(principal, "10.0.0.1", op, TOPIC, name, false)
        .0
}

// Kafka's StandardAuthorizerData rules: literal, wildcard and prefixed ACLs apply; DENY
// wins; ALLOW of READ/WRITE implies DESCRIBE but DENY of READ does not deny DESCRIBE;
// ALLOW ALTER_CONFIGS implies DESCRIBE_CONFIGS; User:* matches every user.
#[test]
fn standard_authorizer_rules() {
    let c = cache(vec![
        acl(1, TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW),
        acl(2, TOPIC, "pay", PREFIXED, "User:bob", WRITE, ALLOW),
        acl(3, TOPIC, "payroll", LITERAL, "User:bob", WRITE, DENY),
        acl(4, TOPIC, "*", LITERAL, "User:*", ALTER_CONFIGS, ALLOW),
        acl(5, TOPIC, "secret", LITERAL, "User:alice", READ, DENY),
        acl(6, TOPIC, "secret", PREFIXED, "User:alice", ALL, ALLOW),
    ]);
    assert!(allowed(&c, "User:alice", READ, "orders"));
    assert!(allowed(&c, "User:alice", DESCRIBE, "orders"));
    assert!(!allowed(&c, "User:alice", WRITE, "orders"));
    assert!(!allowed(&c, "User:bob", READ, "orders"));
    assert!(allowed(&c, "User:bob", WRITE, "payments"));
    assert!(allowed(&c, "User:bob", WRITE, "pay"));
    assert!(!allowed(&c, "User:bob", WRITE, "payroll"));
    assert!(!allowed(&c, "User:bob", WRITE, "pa"));
    assert!(allowed(&c, "User:carol", DESCRIBE_CONFIGS, "anything"));
    assert!(!allowed(&c, "User:carol", DESCRIBE, "anything"));
    assert!(!allowed(&c, "User:alice", READ, "secret"));
    assert!(
        allowed(&c, "User:alice", DESCRIBE, "secret"),
        "DENY READ does not deny DESCRIBE"
    );
    assert!(allowed(&c, "User:alice", WRITE, "secrets"));
    // "orders-x" has no ACL but the wildcard one (ALTER_CONFIGS for everyone): a resource
    // with ACLs denies what none allows; allow_if_no_acl decides only without any.
    let (ok, rule) = c.find_rule("User:alice", "h", READ, GROUP, "g", true);
    assert!(ok);
    assert_eq!(rule, MatchingRule::NoAclOnResource);
    let (ok, rule) = c.find_rule("User:alice", "h", READ, TOPIC, "orders-x", true);
    assert!(!ok);
    assert_eq!(rule, MatchingRule::NoMatchingAcl);
}

#[test]
fn hosts_and_removal() {
    let mut a = acl(1, TOPIC, "t", LITERAL, "User:alice", READ, ALLOW);
    a.binding.host = "10.0.0.1".to_string();
    let mut c = cache(vec![a.clone()]);
    assert!(
        c.find_rule("User:alice", "10.0.0.1", READ, TOPIC, "t", false)
            .0
    );
    assert!(
        !c.find_rule("User:alice", "10.0.0.2", READ, TOPIC, "t", false)
            .0
    );
    assert!(c.contains(&a.binding));
    assert!(c.remove(&a.id));
    assert!(!c.remove(&a.id));
    assert!(c.is_empty());
    assert!(!c.contains(&a.binding));
    assert_eq!(
        c.find_rule("User:alice", "10.0.0.1", READ, TOPIC, "t", true)
            .1,
        MatchingRule::NoAclOnResource
    );
}

// Kafka's Authorizer.authorizeByResourceType: some allowed name not denied.
#[test]
fn allows_some_resource() {
    let c = cache(vec![
        acl(1, TOPIC, "a", LITERAL, "User:alice", WRITE, ALLOW),
        acl(2, TOPIC, "a", PREFIXED, "User:alice", WRITE, DENY),
        acl(3, TOPIC, "b", PREFIXED, "User:bob", WRITE, ALLOW),
        acl(4, TOPIC, "*", LITERAL, "User:carol", WRITE, DENY),
        acl(5, TOPIC, "c", LITERAL, "User:carol", WRITE, ALLOW),
    ]);
    assert!(!c.allows_some("User:alice", "h", WRITE, TOPIC));
    assert!(c.allows_some("User:bob", "h", WRITE, TOPIC));
    assert!(!c.allows_some("User:bob", "h", READ, TOPIC));
    assert!(!c.allows_some("User:carol", "h", WRITE, TOPIC));
    assert!(!c.allows_some("User:bob", "h", WRITE, GROUP));
}

// Kafka's ResourcePatternFilter: ANY compares names exactly; MATCH finds every pattern
// that applies to the name.
#[test]
fn filters() {
    let literal = acl(1, TOPIC, "foo", LITERAL, "User:a", READ, ALLOW).binding;
    let wildcard = acl(2, TOPIC, "*", LITERAL, "User:a", READ, ALLOW).binding;
    let prefixed = acl(3, TOPIC, "fo", PREFIXED, "User:a", READ, ALLOW).binding;
    let filter = |pt: i8, name: Option<&str>| AclBindingFilter {
        resource_type: resource_type::ANY,
        resource_name: name.map(str::to_string),
        pattern_type: pt,
        principal: None,
        host: None,
        operation: operation::ANY,
        permission_type: permission::ANY,
    };
    let m = filter(pattern_type::MATCH, Some("foo"));
    assert!(m.matches(&literal) && m.matches(&wildcard) && m.matches(&prefixed));
    let any = filter(pattern_type::ANY, Some("foo"));
    assert!(any.matches(&literal) && !any.matches(&wildcard) && !any.matches(&prefixed));
    let pre = filter(PREFIXED, None);
    assert!(!pre.matches(&literal) && pre.matches(&prefixed));
    let mut bad = filter(pattern_type::UNKNOWN, None);
    assert_eq!(bad.validate(), Err("Unknown patternFilter.".to_string()));
    bad.pattern_type = LITERAL;
    bad.operation = operation::UNKNOWN;
    assert_eq!(bad.validate(), Err("Unknown entryFilter.".to_string()));
}

#[test]
fn new_acl_checks() {
    let mut b = acl(1, TOPIC, "t", LITERAL, "User:a", READ, ALLOW).binding;
    assert_eq!(b.validate(), Ok(()));
    b.pattern_type = pattern_type::MATCH;
    assert_eq!(b.validate(), Err("Invalid patternType MATCH".to_string()));
    b.pattern_type = LITERAL;
    b.principal = "alice".to_string();
    assert!(b
        .validate()
        .is_err_and(|e| e.starts_with("Could not parse principal")));
    b.principal = "User:a".to_string();
    b.resource_name = String::new();
    assert_eq!(
        b.validate(),
        Err("Resource name should not be empty".to_string())
    );
    b.resource_name = "t".to_string();
    b.host = String::new();
    assert_eq!(
        b.validate(),
        Err("Host pattern cannot be null or empty".to_string())
    );
}
