//! Partition-level behaviour under disk failures (faults injected into storage): a
//! failed fsync takes the partition offline with its high watermark frozen where the
//! last good sync left it, while other partitions keep working.

use std::time::Duration;

use logbook_storage::fault::{self, Op};

use super::*;

fn batch() -> Vec<u8> {
    // One uncompressed record (value "x"), base offset 0, CRC computed below.
    let mut record = vec![0u8, 0, 0, 1, 2, b'x', 0];
    let mut body = vec![(record.len() as u8) << 1];
    body.append(&mut record);
    let mut out = Vec::new();
    out.extend(0i64.to_be_bytes());
    out.extend(0i32.to_be_bytes());
    out.extend(0i32.to_be_bytes());
    out.push(2);
    out.extend(0u32.to_be_bytes());
    out.extend(0i16.to_be_bytes());
    out.extend(0i32.to_be_bytes());
    out.extend(1_000i64.to_be_bytes());
    out.extend(1_000i64.to_be_bytes());
    out.extend((-1i64).to_be_bytes());
    out.extend((-1i16).to_be_bytes());
    out.extend((-1i32).to_be_bytes());
    out.extend(1i32.to_be_bytes());
    out.extend(body);
    let length = (out.len() - 12) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c(&out[21..]);
    out[17..21].copy_from_slice(&crc.to_be_bytes());
    out
}

/// CRC-32C (Castagnoli), bitwise: test data only.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn open(dir: &std::path::Path, name: &str, flusher: &Flusher) -> Arc<Partition> {
    Partition::open(
        TopicPartition {
            topic: name.to_string(),
            partition: 0,
        },
        &dir.join(format!("{name}-0")),
        LogConfig::default(),
        flusher.clone(),
    )
    .expect("open partition")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_fsync_takes_partition_offline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flusher = Flusher::start(FlushPolicy::EveryWrite, 1);
    let sick = open(dir.path(), "sick", &flusher);
    let healthy = open(dir.path(), "healthy", &flusher);
    let timeout = Duration::from_secs(5);
    let failures = flusher.log_dir_failures();

    sick.append(&batch()).expect("append");
    sick.wait_durable(Offset(1), timeout)
        .await
        .expect("first record durable");
    assert_eq!(sick.high_watermark(), Offset(1));

    fault::fail(&dir.path().join("sick-0"), Op::Fsync, libc::EIO, u32::MAX);
    sick.append(&batch()).expect("the write itself succeeds");
    // The sync fails: the waiter times out, the high watermark stays at 1.
    let waited = sick
        .wait_durable(Offset(2), Duration::from_millis(500))
        .await;
    assert!(matches!(waited, Err(Error::Timeout { .. })), "{waited:?}");
    assert_eq!(sick.high_watermark(), Offset(1));
    assert!(sick
        .offline_reason()
        .is_some_and(|r| r.contains("fsync failed")));
    // The data directory is reported failed, naming the partition (the broker of a
    // cluster halts on it so leadership moves away).
    let reported = failures.borrow().clone();
    assert!(
        reported
            .as_deref()
            .is_some_and(|r| r.starts_with("sick-0: fsync failed")),
        "{reported:?}"
    );
    // Even once the disk "recovers" nothing more is accepted or made visible.
    fault::fail(&dir.path().join("sick-0"), Op::Fsync, libc::EIO, 0);
    assert!(matches!(
        sick.append(&batch()),
        Err(Error::Storage(logbook_storage::Error::LogFailed { .. }))
    ));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(sick.high_watermark(), Offset(1));
    assert_eq!(sick.offsets().expect("offsets").high_watermark, Offset(1));

    // Another partition on the same flusher is unaffected.
    healthy.append(&batch()).expect("append");
    healthy
        .wait_durable(Offset(1), timeout)
        .await
        .expect("durable");
    healthy.append(&batch()).expect("append");
    healthy
        .wait_durable(Offset(2), timeout)
        .await
        .expect("durable");
    flusher.shutdown();
}

// The leader-epoch check a ReplicaManager applies: -1 passes, older is fenced, newer unknown.
#[test]
fn leader_epoch_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flusher = Flusher::start(FlushPolicy::EveryWrite, 1);
    let p = open(dir.path(), "epochs", &flusher);
    assert_eq!(p.leader_epoch(), LeaderEpoch(0));
    assert!(p.check_leader_epoch(-1).is_ok());
    assert!(p.check_leader_epoch(0).is_ok());
    assert!(matches!(
        p.check_leader_epoch(1),
        Err(Error::UnknownLeaderEpoch { .. })
    ));
    p.leader_epoch.store(3, Ordering::Release);
    assert!(matches!(
        p.check_leader_epoch(2),
        Err(Error::FencedLeaderEpoch { .. })
    ));
    flusher.shutdown();
}

// DeleteRecords and retention never pass the high watermark: -1 means the high
// watermark, an offset above it is OffsetOutOfRange, and an expired segment holding data
// above it stays; once the data is durable the expired active segment goes (rolled first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_start_moves_only_below_the_high_watermark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let flusher = Flusher::start(FlushPolicy::EveryWrite, 1);
    let p = open(dir.path(), "purge", &flusher);
    let timeout = Duration::from_secs(5);
    for _ in 0..3 {
        p.append(&batch()).expect("append");
    }
    p.wait_durable(Offset(3), timeout).await.expect("durable");
    assert_eq!(
        p.delete_records_before(Offset(1)).expect("delete"),
        Offset(1)
    );
    // Appended straight to the log: no sync is scheduled, so the high watermark stays 3.
    p.log
        .lock()
        .as_mut()
        .expect("open")
        .log
        .append(&batch(), 0)
        .expect("append");
    assert_eq!(p.high_watermark(), Offset(3));
    assert!(matches!(
        p.delete_records_before(Offset(4)),
        Err(Error::Storage(logbook_storage::Error::OffsetOutOfRange {
            requested: 4,
            ..
        }))
    ));
    assert_eq!(
        p.delete_records_before(DELETE_TO_HIGH_WATERMARK)
            .expect("to hw"),
        Offset(3)
    );
    p.set_config(LogConfig {
        retention_ms: 0,
        ..LogConfig::default()
    })
    .expect("config");
    let now = 1_000_000;
    assert_eq!(p.apply_retention(now).expect("retention"), 0);
    assert_eq!(p.offsets().expect("offsets").log_start_offset, Offset(3));
    p.append(&batch()).expect("append");
    p.wait_durable(Offset(5), timeout).await.expect("durable");
    assert_eq!(p.apply_retention(now).expect("retention"), 1);
    let offsets = p.offsets().expect("offsets");
    assert_eq!(
        (offsets.log_start_offset, offsets.log_end_offset),
        (Offset(5), Offset(5))
    );
    flusher.shutdown();
}

mod append_records;
mod replication;
mod transactions;
