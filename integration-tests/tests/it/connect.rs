//! Kafka Connect (Apache's connect-runtime, distributed mode, from Maven Central) runs on
//! Logbook: `scripts/connect-test` starts a broker from the suite's binary, lets Connect
//! create its compacted internal topics, moves a file through FileStreamSource → topic →
//! FileStreamSink, restarts the worker, appends lines, and compares the files exactly
//! (every line once, none lost) and Connect's committed offsets. Needs Java 17 and Maven,
//! as CI has them; the script prints each step and the Connect log's errors on failure.

use std::path::Path;
use std::process::Command;

use integration_tests::broker_binary;

#[test]
fn connect_distributed_moves_a_file_exactly_once_across_a_worker_restart() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let output = Command::new("bash")
        .arg(root.join("scripts/connect-test"))
        .env("LOGBOOK_BIN", broker_binary())
        .output()
        .expect("run scripts/connect-test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("connect-test: 1 passed, 0 failed"),
        "connect-test failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}
