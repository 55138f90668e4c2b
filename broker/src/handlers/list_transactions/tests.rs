//! The transactional id pattern subset: whole-id matches as Java's `Pattern.matches`, and
//! syntax outside the subset refused.

use super::IdPattern;

fn matches(pattern: &str, id: &str) -> bool {
    IdPattern::compile(pattern)
        .unwrap_or_else(|| panic!("{pattern} compiles"))
        .matches(id)
}

#[test]
fn whole_id_matches() {
    assert!(matches("payments-.*", "payments-1"));
    assert!(matches("payments-.*", "payments-"));
    assert!(!matches("payments-.*", "old-payments-1"));
    assert!(!matches("payments", "payments-1"));
    assert!(matches("app\\.tx-.+", "app.tx-7"));
    assert!(!matches("app\\.tx-.+", "appXtx-7"));
    assert!(!matches("app\\.tx-.+", "app.tx-"));
    assert!(matches("a?b*c", "c"));
    assert!(matches("a?b*c", "abbbc"));
    assert!(!matches("a?b*c", "aabc"));
    assert!(matches(
        ".*.*.*x",
        &"y".repeat(10_000).chars().chain(['x']).collect::<String>()
    ));
    assert!(matches("", ""));
}

#[test]
fn other_syntax_is_refused() {
    for p in [
        "[ab]", "(a)", "a|b", "^a", "a$", "a{2}", "*a", "a**", "\\d", "a\\",
    ] {
        assert!(IdPattern::compile(p).is_none(), "{p}");
    }
}
