//! Test-only fault injection. A real-client test cannot stop the broker by a signal at a
//! point that lasts microseconds, such as between two transaction markers of one commit;
//! this lets it stop the process exactly there and prove recovery from that state.
//!
//! Disarmed unless the broker is started with the hidden flag
//! `--failpoint-abort-after-txn-markers N`; a production broker never sets it. When armed,
//! the process aborts (SIGABRT: no destructor, flush or fsync runs, as after a SIGKILL)
//! right after the N-th transaction marker since start was appended to its log, before
//! that marker's fsync.

use std::sync::atomic::{AtomicU64, Ordering};

/// The marker count that aborts the process; 0 means disarmed.
static ABORT_AFTER_TXN_MARKERS: AtomicU64 = AtomicU64::new(0);
/// Transaction markers appended since the process started (counted only when armed).
static TXN_MARKERS_APPENDED: AtomicU64 = AtomicU64::new(0);

/// Arms the failpoint: the process aborts after appending its `count`-th transaction
/// marker (0 disarms it). For tests only.
pub fn abort_after_txn_markers(count: u64) {
    ABORT_AFTER_TXN_MARKERS.store(count, Ordering::Relaxed);
}

/// Called after each transaction marker is appended (not yet durable).
pub(crate) fn txn_marker_appended() {
    let armed = ABORT_AFTER_TXN_MARKERS.load(Ordering::Relaxed);
    if armed == 0 {
        return;
    }
    let appended = TXN_MARKERS_APPENDED.fetch_add(1, Ordering::Relaxed) + 1;
    if appended == armed {
        eprintln!("failpoint: aborting after transaction marker {appended} was appended");
        std::process::abort();
    }
}
