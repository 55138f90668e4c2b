//! The performance regression guard: `logbook-bench --quick --check` against the committed
//! baseline (`bench/baseline-quick.json`, medians of quick runs on this machine kind).
//!
//! A test binary of its own so that it runs alone (cargo runs test binaries one after
//! another), not beside the integration suite's parallel tests. It fails only on a gross
//! regression (the bench's `--check` rules: CPU per GB more than doubling, throughput
//! falling to a fifth, records lost), and a failing run is repeated once so a single
//! noisy run on a shared machine does not fail it.

use std::path::Path;
use std::process::Command;

use integration_tests::{broker_binary, target_dir};

#[test]
fn quick_bench_shows_no_gross_regression() {
    let broker = broker_binary();
    let bench = target_dir().join("release").join("logbook-bench");
    assert!(bench.is_file(), "{} missing after build", bench.display());
    let baseline = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/baseline-quick.json");
    // Each run's output is kept in <target>/bench-guard-run<N>.log (a passing test's
    // output is otherwise hidden), so a retried first run can be looked at.
    let run = |n: u32| {
        let output = Command::new(&bench)
            .arg("--quick")
            .arg("--broker-bin")
            .arg(broker)
            .arg("--check")
            .arg(&baseline)
            .output()
            .expect("run logbook-bench");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let log = target_dir().join(format!("bench-guard-run{n}.log"));
        let _ = std::fs::write(&log, format!("{stdout}\n{stderr}"));
        (output.status.code(), stdout, stderr)
    };
    let (code, stdout, stderr) = run(1);
    if code == Some(0) {
        return;
    }
    eprintln!("first quick bench run failed (exit {code:?}); repeating once\n{stdout}\n{stderr}");
    let (code, stdout, stderr) = run(2);
    assert_eq!(
        code,
        Some(0),
        "quick bench failed twice:\n{stdout}\n{stderr}"
    );
}
