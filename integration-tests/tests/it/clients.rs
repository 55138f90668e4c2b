//! Transactions through the Go and JavaScript ecosystems' clients: `scripts/clients-txn-test`
//! runs franz-go (`integration-tests/franz-go/txn`) and kafkajs
//! (`integration-tests/kafkajs/txn.js`) against a broker from the suite's binary; each probe
//! checks exact record counts for read_committed and read_uncommitted, consume-transform-produce
//! offsets, and (franz-go) fencing. Needs Go and Node.js, as CI has them; the modules come from
//! the Go module proxy and the npm registry.

use crate::common::run_script;

#[test]
fn franz_go_and_kafkajs_transactions() {
    run_script(
        "clients-txn-test",
        &[],
        "clients-txn-test: 13 passed, 0 failed",
    );
}
