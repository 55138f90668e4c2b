//! A short chaos trial (`logbook-bench chaos`, bench/src/chaos.rs) in CI: one fresh
//! 3-node cluster, idempotent acks=all producers and a transactional read-process-write
//! job under random SIGKILL, SIGSTOP/SIGCONT and SIGTERM of any node for 45 s, then the
//! checker of every acknowledged record and committed transaction. The longer runs are
//! `scripts/chaos-trials`.

use std::process::Command;

use integration_tests::{broker_binary, workspace_binary};

// Proves, for one random fault schedule (its seed is printed), that nothing acknowledged
// is lost, duplicated, reordered or moved, that every input reaches the output exactly
// once through committed transactions and that no aborted or partial transaction is
// visible to read_committed; and that the nemesis really killed and stopped nodes.
#[test]
fn chaos_trial_loses_nothing_acknowledged_and_keeps_transactions_atomic() {
    let _serial = crate::serial();
    let broker = broker_binary();
    let bench = workspace_binary("logbook-bench", "logbook-bench");
    let json = tempfile::NamedTempFile::new().expect("temporary file");
    let output = Command::new(&bench)
        .args(["chaos", "--target", "logbook", "--trials", "1"])
        .args(["--duration", "45", "--gap-max-secs", "3"])
        .arg("--broker-bin")
        .arg(broker)
        .arg("--json-out")
        .arg(json.path())
        .output()
        .expect("run logbook-bench chaos");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let text = std::fs::read_to_string(json.path()).unwrap_or_default();
    let summary: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "no JSON summary ({e}); exit {:?}\n{stdout}\n{stderr}",
            output.status.code()
        )
    });
    let counts = summary["counts"]
        .as_object()
        .expect("counts in the summary");
    let nonzero: Vec<_> = counts
        .iter()
        .filter(|(_, v)| v.as_u64() != Some(0))
        .collect();
    assert!(
        nonzero.is_empty(),
        "nonzero counts {nonzero:?}\n{stdout}\n{stderr}"
    );
    assert!(
        summary["kills"].as_u64() >= Some(1) && summary["stops"].as_u64() >= Some(1),
        "the nemesis did not both kill and stop a node\n{stdout}\n{stderr}"
    );
    assert!(
        summary["acked"].as_u64() > Some(0) && summary["commits"].as_u64() > Some(0),
        "no load\n{stdout}"
    );
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
}
