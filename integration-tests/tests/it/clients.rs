//! Transactions through the Go and JavaScript ecosystems' clients: `scripts/clients-txn-test`
//! runs franz-go (`integration-tests/franz-go/txn`) and kafkajs
//! (`integration-tests/kafkajs/txn.js`) against a broker from the suite's binary; each probe
//! checks exact record counts for read_committed and read_uncommitted, consume-transform-produce
//! offsets, and (franz-go) fencing. Needs Go and Node.js, as CI has them; the modules come from
//! the Go module proxy and the npm registry.

use std::path::Path;
use std::process::Command;

use integration_tests::broker_binary;

#[test]
fn franz_go_and_kafkajs_transactions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let output = Command::new("bash")
        .arg(root.join("scripts/clients-txn-test"))
        .env("LOGBOOK_BIN", broker_binary())
        .output()
        .expect("run scripts/clients-txn-test");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("clients-txn-test: 13 passed, 0 failed"),
        "clients-txn-test failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}
