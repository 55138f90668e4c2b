//! Multi-node scenarios of issue 11: each test starts three `logbook` processes. They live
//! in their own test binary, which cargo runs after (never beside) `it`, so three brokers
//! per test do not starve `it`'s timing-sensitive tests of the two cores; and they run one
//! at a time ([`serial`]) for the same reason.

#[path = "../it/common.rs"]
#[allow(dead_code)]
mod common;

#[path = "../it/wire.rs"]
#[allow(dead_code)]
mod wire;

mod acls;
mod chaos;
mod leadership;
mod listeners;
mod metadata;
mod reassignment;
mod replication;
mod roles;
mod security;

/// Held for a whole test: one cluster at a time.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
