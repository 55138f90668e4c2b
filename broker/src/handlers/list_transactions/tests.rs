//! Transactional id patterns: whole-id matches as Java's `Pattern.matches`, and invalid or
//! Java-only syntax refused.

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
fn classes_groups_and_alternation_match_as_in_java() {
    assert!(matches("[ab]-\\d+", "a-12"));
    assert!(!matches("[ab]-\\d+", "c-12"));
    assert!(matches("(orders|payments)-tx-.*", "payments-tx-3"));
    assert!(!matches("orders|payments", "orders-1"));
    assert!(matches("tx-[0-9]{2}", "tx-42"));
    assert!(!matches("tx-[0-9]{2}", "tx-420"));
}

#[test]
fn invalid_or_java_only_syntax_is_refused() {
    for p in [
        "*a",
        "(a",
        "[a",
        "a\\",
        "(?=a)a",
        "(a)\\1",
        "a{99999}{99999}",
    ] {
        assert!(IdPattern::compile(p).is_none(), "{p}");
    }
}
