//! Load, unload and timer ownership of the coordinator runtime, with a shard that records
//! what its partition's replay saw, and tokio's paused clock for the timers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::{CoordinatorResult, CoordinatorRuntime, CoordinatorShard, RuntimeError, TopicSpec};
use crate::group::persistence;
use crate::partition_writer::{CoordinatorPartition, PartitionWriter};
use crate::test_host::TestHost;

/// What replay saw of its partition.
struct Seen {
    partition_index: i32,
    high_watermark: i64,
}

impl CoordinatorShard for Seen {
    fn replay(partition_index: i32, partition: &dyn CoordinatorPartition) -> Result<Self, String> {
        Ok(Seen {
            partition_index,
            high_watermark: partition.high_watermark(),
        })
    }
}

/// A shard whose replay always fails.
struct Unreadable;

impl CoordinatorShard for Unreadable {
    fn replay(_: i32, _: &dyn CoordinatorPartition) -> Result<Self, String> {
        Err("corrupt".to_string())
    }
}

/// A two-partition internal topic with three records in partition 0 only.
fn internal_topic(dir: &std::path::Path) -> (Arc<TestHost>, Vec<Arc<dyn CoordinatorPartition>>) {
    let host = TestHost::open(dir, logbook_replication::FlushPolicy::Os);
    host.create_topic("__runtime_test", 2);
    let records: Vec<(Bytes, Option<Bytes>)> = (0..3)
        .map(|i| (persistence::group_key(&format!("g{i}")), None))
        .collect();
    let batch = persistence::encode_batch(&records, 0).expect("encode");
    let partitions: Vec<Arc<dyn CoordinatorPartition>> = (0..2)
        .map(|i| host.partition("__runtime_test", i).expect("hosted"))
        .collect();
    partitions[0].append(&batch).expect("append");
    (host, partitions)
}

#[test]
fn load_replays_only_its_partition_and_unload_drops_it() {
    // Proves: a shard is NOT_COORDINATOR until loaded; loading partition 0 replays partition
    // 0 only (3 records) and partition 1 its own (none); unload drops the shard; a failed
    // replay leaves the shard unloaded with the reason.
    let dir = tempfile::tempdir().expect("tempdir");
    let (host, partitions) = internal_topic(dir.path());
    let runtime = CoordinatorRuntime::<Seen>::new(
        tokio_util::sync::CancellationToken::new(),
        host.host(),
        "__runtime_test",
    );
    assert_eq!(
        runtime.shard(0).err(),
        Some(RuntimeError::NotCoordinator(0))
    );
    runtime.load(0, partitions[0].as_ref()).expect("load 0");
    runtime.load(1, partitions[1].as_ref()).expect("load 1");
    let shard = runtime.shard(0).expect("shard 0");
    assert_eq!((shard.partition_index, shard.high_watermark), (0, 3));
    let shard = runtime.shard(1).expect("shard 1");
    assert_eq!((shard.partition_index, shard.high_watermark), (1, 0));
    assert_eq!(runtime.loaded_partitions(), vec![0, 1]);
    assert!(runtime.unload(0).is_some());
    assert_eq!(
        runtime.shard(0).err(),
        Some(RuntimeError::NotCoordinator(0))
    );
    assert_eq!(runtime.loaded_partitions(), vec![1]);

    let failing = CoordinatorRuntime::<Unreadable>::new(
        tokio_util::sync::CancellationToken::new(),
        host.host(),
        "__runtime_test",
    );
    assert_eq!(
        failing.load(0, partitions[0].as_ref()).err(),
        Some(RuntimeError::Load {
            partition_index: 0,
            reason: "corrupt".to_string()
        })
    );
    assert!(failing.shard(0).is_err());
}

#[tokio::test(start_paused = true)]
async fn timers_belong_to_their_load() {
    // Proves: a timer runs on its shard after its delay; unloading cancels the shard's
    // pending timers, and a reload does not revive them; scheduling on an unloaded shard is
    // NOT_COORDINATOR.
    let dir = tempfile::tempdir().expect("tempdir");
    let (host, partitions) = internal_topic(dir.path());
    let runtime = CoordinatorRuntime::<Seen>::new(
        tokio_util::sync::CancellationToken::new(),
        host.host(),
        "__runtime_test",
    );
    runtime.load(0, partitions[0].as_ref()).expect("load");
    let fired = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&fired);
    runtime
        .schedule(0, Duration::from_secs(1), move |shard| {
            assert_eq!(shard.high_watermark, 3);
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .expect("schedule");
    let counter = Arc::clone(&fired);
    runtime
        .schedule(0, Duration::from_secs(5), move |_| {
            counter.fetch_add(100, Ordering::SeqCst);
        })
        .expect("schedule");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(fired.load(Ordering::SeqCst), 1, "the 1 s timer fired");
    runtime.unload(0);
    runtime.load(0, partitions[0].as_ref()).expect("reload");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        fired.load(Ordering::SeqCst),
        1,
        "the 5 s timer died with its load"
    );
    assert_eq!(
        runtime.schedule(1, Duration::from_secs(1), |_| {}).err(),
        Some(RuntimeError::NotCoordinator(1))
    );
}

// A load begun (as the leadership hook does, before replaying in the background) answers
// LoadInProgress at once; an unload meanwhile makes its completion NotCoordinator, and a
// second load supersedes the first's ticket.
#[test]
fn begun_load_answers_load_in_progress_until_completed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (host, partitions) = internal_topic(dir.path());
    let p0 = partitions.first().expect("partition 0").as_ref();
    let runtime = CoordinatorRuntime::<Seen>::new(
        tokio_util::sync::CancellationToken::new(),
        host.host(),
        "__runtime_test",
    );
    let ticket = runtime.begin_load(0);
    assert_eq!(
        runtime.shard(0).err(),
        Some(RuntimeError::LoadInProgress(0))
    );
    assert!(runtime.is_hosted(0));
    runtime.unload(0);
    assert_eq!(
        runtime.complete_load(ticket, p0).err(),
        Some(RuntimeError::NotCoordinator(0))
    );
    assert_eq!(
        runtime.shard(0).err(),
        Some(RuntimeError::NotCoordinator(0))
    );
    let first = runtime.begin_load(0);
    let second = runtime.begin_load(0);
    assert_eq!(
        runtime.complete_load(first, p0).err(),
        Some(RuntimeError::NotCoordinator(0))
    );
    assert_eq!(
        runtime.shard(0).err(),
        Some(RuntimeError::LoadInProgress(0))
    );
    let shard = runtime.complete_load(second, p0).expect("loaded");
    assert_eq!(shard.partition_index, 0);
    assert_eq!(runtime.shard(0).map(|s| s.high_watermark).ok(), Some(3));
}

#[test]
fn ensure_topic_creates_once_loads_led_partitions_and_appends() {
    // Proves: the runtime creates its internal topic once, by the coordinator's spec, and
    // loads every partition this broker leads before answering; later calls neither create
    // nor load again; the write path appends to the shard's partition and says which offset
    // to wait for, and refuses a partition not hosted here.
    let dir = tempfile::tempdir().expect("tempdir");
    let host = TestHost::open(dir.path(), logbook_replication::FlushPolicy::Os);
    let runtime = CoordinatorRuntime::<Seen>::new(
        tokio_util::sync::CancellationToken::new(),
        host.host(),
        "__runtime_new",
    );
    assert_eq!(runtime.topic_partitions(), None);
    let specs = AtomicUsize::new(0);
    let loads = AtomicUsize::new(0);
    let spec = || {
        specs.fetch_add(1, Ordering::Relaxed);
        TopicSpec {
            partitions: 2,
            replication_factor: 1,
            configs: vec![("cleanup.policy", "compact".to_string())],
        }
    };
    let load = |index: i32| {
        loads.fetch_add(1, Ordering::Relaxed);
        let partition = runtime.partition(index).expect("hosted");
        runtime.load(index, partition.as_ref())
    };
    assert_eq!(runtime.ensure_topic(spec, load), Ok(2));
    assert_eq!(runtime.loaded_partitions(), vec![0, 1]);
    assert_eq!(runtime.ensure_topic(spec, load), Ok(2));
    assert_eq!(
        (specs.load(Ordering::Relaxed), loads.load(Ordering::Relaxed)),
        (1, 2)
    );
    assert_eq!(runtime.topic_partitions(), Some(2));

    let records: Vec<(Bytes, Option<Bytes>)> = (0..3)
        .map(|i| (persistence::group_key(&format!("g{i}")), None))
        .collect();
    let batch = persistence::encode_batch(&records, 0).expect("encode");
    let (partition, end_offset) = runtime.append(1, &batch).expect("append");
    assert_eq!(end_offset, 3);
    assert_eq!(partition.offsets().expect("offsets").log_end, 3);
    assert!(matches!(
        runtime.append(2, &batch),
        Err(crate::partition_writer::WriteError::NotLeader(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn periodic_timers_fire_until_their_load_ends() {
    // Proves: a periodic timer runs on its shard every period, again and again; unloading
    // stops it and a reload does not revive it; a runtime shutdown stops another; it
    // cannot be scheduled on a shard that is not loaded.
    let dir = tempfile::tempdir().expect("tempdir");
    let (host, partitions) = internal_topic(dir.path());
    let shutdown = tokio_util::sync::CancellationToken::new();
    let runtime = CoordinatorRuntime::<Seen>::new(shutdown.clone(), host.host(), "__runtime_test");
    runtime.load(0, partitions[0].as_ref()).expect("load 0");
    runtime.load(1, partitions[1].as_ref()).expect("load 1");
    let fired = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&fired);
    runtime
        .schedule_periodic(0, Duration::from_secs(1), move |shard| {
            assert_eq!(shard.partition_index, 0);
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .expect("schedule on 0");
    let on_one = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&on_one);
    runtime
        .schedule_periodic(1, Duration::from_secs(2), move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .expect("schedule on 1");

    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(fired.load(Ordering::SeqCst), 3, "fired at 1, 2 and 3 s");
    assert_eq!(on_one.load(Ordering::SeqCst), 1, "fired at 2 s");
    runtime.unload(0);
    runtime.load(0, partitions[0].as_ref()).expect("reload");
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(fired.load(Ordering::SeqCst), 3, "stopped at unload");
    assert_eq!(
        on_one.load(Ordering::SeqCst),
        6,
        "fired every 2 s up to 13.5 s"
    );
    shutdown.cancel();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(on_one.load(Ordering::SeqCst), 6, "stopped at shutdown");
    assert_eq!(
        runtime
            .schedule_periodic(2, Duration::from_secs(1), |_| {})
            .err(),
        Some(RuntimeError::NotCoordinator(2))
    );
}

#[test]
fn write_appends_the_records_and_hands_back_the_response() {
    // Proves: the write path encodes an operation's records as one batch, appends it to
    // the shard's partition and returns the response with the offset to wait for and the
    // records' offsets; no records append nothing; a partition not hosted here is refused
    // with the response dropped.
    let dir = tempfile::tempdir().expect("tempdir");
    let (host, _partitions) = internal_topic(dir.path());
    let runtime = CoordinatorRuntime::<Seen>::new(
        tokio_util::sync::CancellationToken::new(),
        host.host(),
        "__runtime_test",
    );
    let span = tracing::Span::none();
    let records: Vec<(Bytes, Option<Bytes>)> = (0..2)
        .map(|i| (persistence::group_key(&format!("w{i}")), None))
        .collect();
    let result = CoordinatorResult {
        records: records.clone(),
        response: "answer",
    };
    let written = runtime.write(0, None, result, &span).expect("write");
    assert_eq!(written.response, "answer");
    assert_eq!(written.records, records);
    assert_eq!(
        (written.base_offset(), written.end_offset()),
        (Some(3), Some(5))
    );
    let (partition, end_offset) = written.committable.expect("appended");
    assert_eq!(end_offset, 5);
    assert_eq!(partition.offsets().expect("offsets").log_end, 5);

    let empty = CoordinatorResult {
        records: Vec::new(),
        response: 7,
    };
    let written = runtime.write(0, None, empty, &span).expect("empty write");
    assert_eq!(written.response, 7);
    assert!(written.committable.is_none());
    assert_eq!(written.end_offset(), None);
    assert_eq!(
        partition.offsets().expect("offsets").log_end,
        5,
        "nothing appended"
    );

    let refused = CoordinatorResult {
        records,
        response: (),
    };
    assert!(matches!(
        runtime.write(2, None, refused, &span),
        Err(crate::partition_writer::WriteError::NotLeader(_))
    ));
}
