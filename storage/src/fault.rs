//! Fault injection for the log's writes and fsyncs, so durability under disk failures is
//! tested rather than hoped for (TigerBeetle's simulator and sled's crash tests do the
//! same).
//!
//! Every append write and every data fsync first asks `check` whether to fail. In a
//! normal build that is an inlined `Ok(())`. Built for storage's own tests, or with the
//! `fault-injection` feature (other crates' tests enable it through a dev-dependency), a
//! rule set with `fail` makes the next matching operations on files under a directory
//! fail with a chosen OS error (EIO, ENOSPC), exactly where the real call would; rules are
//! keyed by path prefix, so tests in parallel (each with its own temporary directory)
//! never see each other's faults. Until a rule is first set, `check` costs one relaxed
//! atomic load.

/// The operation about to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// The positional write of an append.
    Write,
    /// The fsync of a segment's data.
    Fsync,
}

/// Fails if a test asked for `op` on a file under `path` to fail.
#[cfg(not(any(test, feature = "fault-injection")))]
#[inline(always)]
pub(crate) fn check(_op: Op, _path: &std::path::Path) -> std::io::Result<()> {
    Ok(())
}

#[cfg(any(test, feature = "fault-injection"))]
pub(crate) use injected::check;
#[cfg(any(test, feature = "fault-injection"))]
pub use injected::fail;

#[cfg(any(test, feature = "fault-injection"))]
mod injected {
    use super::Op;
    use parking_lot::Mutex;
    use std::io;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Set once any rule was installed: until then `check` takes no lock.
    static ARMED: AtomicBool = AtomicBool::new(false);

    struct Rule {
        prefix: PathBuf,
        op: Op,
        errno: i32,
        /// How many more matching operations fail; `u32::MAX` for ever.
        remaining: u32,
    }

    static RULES: Mutex<Vec<Rule>> = Mutex::new(Vec::new());

    /// Makes the next `times` `op`s on files under `prefix` fail with `errno`
    /// (`libc::EIO`, `libc::ENOSPC`); `times == 0` removes the rules for `prefix`.
    pub fn fail(prefix: &Path, op: Op, errno: i32, times: u32) {
        ARMED.store(true, Ordering::Release);
        let mut rules = RULES.lock();
        rules.retain(|r| !(r.prefix == prefix && r.op == op));
        if times > 0 {
            rules.push(Rule {
                prefix: prefix.to_path_buf(),
                op,
                errno,
                remaining: times,
            });
        }
    }

    pub(crate) fn check(op: Op, path: &Path) -> io::Result<()> {
        if !ARMED.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut rules = RULES.lock();
        let Some(rule) = rules
            .iter_mut()
            .find(|r| r.op == op && path.starts_with(&r.prefix) && r.remaining > 0)
        else {
            return Ok(());
        };
        if rule.remaining != u32::MAX {
            rule.remaining -= 1;
        }
        Err(io::Error::from_raw_os_error(rule.errno))
    }
}
