//! Retention as Kafka enforces it (`UnifiedLog.deleteOldSegments`): the active segment
//! counts, so an idle topic whose data expired loses all of it; small segments with a
//! short retention lose the oldest and keep the newest; `retention.bytes` holds on a
//! low-volume topic. ListOffsets earliest (rdkafka `fetch_watermarks`) shows the log start.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use integration_tests::Broker;
use rdkafka::consumer::Consumer;
use rdkafka::{Offset, TopicPartitionList};

use crate::common::{consume, consumer, create_topic, produce_ok, Record, CLIENT_TIMEOUT};

/// The retention check runs this often in these tests (Kafka's
/// `log.retention.check.interval.ms`, default 300000).
const CHECK_INTERVAL: &str = "200";

fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(since.as_millis()).expect("fits")
}

fn records(count: usize, tag: &str, timestamp: i64) -> Vec<Record> {
    (0..count)
        .map(|i| Record {
            timestamp: Some(timestamp),
            ..Record::new(0, format!("k{i}"), format!("{tag}-{i}"))
        })
        .collect()
}

/// (earliest, latest) of `topic`/0 by ListOffsets.
pub fn watermarks(bootstrap: &str, topic: &str) -> (i64, i64) {
    consumer(bootstrap, &[])
        .fetch_watermarks(topic, 0, CLIENT_TIMEOUT)
        .expect("fetch watermarks")
}

/// Polls ListOffsets until earliest is `want` or `timeout` passes; returns the last seen.
pub fn wait_for_earliest(bootstrap: &str, topic: &str, want: i64, timeout: Duration) -> (i64, i64) {
    wait_for_watermarks(bootstrap, topic, timeout, |(earliest, _)| earliest == want)
}

/// Polls ListOffsets until `done(earliest, latest)` or `timeout` passes; returns the last
/// seen.
pub fn wait_for_watermarks(
    bootstrap: &str,
    topic: &str,
    timeout: Duration,
    done: impl Fn((i64, i64)) -> bool,
) -> (i64, i64) {
    let deadline = Instant::now() + timeout;
    loop {
        let seen = watermarks(bootstrap, topic);
        if done(seen) || Instant::now() > deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Base offsets of the partition's segment files on disk, ascending.
pub fn segment_bases(data_dir: &Path, topic: &str) -> Vec<i64> {
    let dir = data_dir.join(format!("{topic}-0"));
    let mut bases: Vec<i64> = std::fs::read_dir(&dir)
        .expect("read partition dir")
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    bases.sort_unstable();
    bases
}

// An idle topic whose records are older than retention.ms loses them all: ListOffsets
// earliest moves to the log end (10), a consumer from the beginning gets nothing, and
// new records continue at offsets 10, 11, 12. Before, the active segment was never
// considered and earliest stayed 0 forever.
#[test]
fn idle_topic_loses_expired_data() {
    let broker = Broker::start_with(&["--log-retention-check-interval-ms", CHECK_INTERVAL]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "idle", 1, &[("retention.ms", "2000")]);
    let at = produce_ok(
        &bootstrap,
        "idle",
        &records(10, "old", now_ms() - 60_000),
        &[],
    );
    assert_eq!(at.last(), Some(&(0, 9)));
    let seen = wait_for_earliest(&bootstrap, "idle", 10, Duration::from_secs(15));
    assert_eq!(seen, (10, 10), "(earliest, latest) after retention");
    assert_eq!(segment_bases(broker.data_dir(), "idle"), vec![10]);

    // Nothing below the log start is served to a consumer starting at the beginning.
    let reader = consumer(&bootstrap, &[("auto.offset.reset", "earliest")]);
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset("idle", 0, Offset::Beginning)
        .expect("assignment");
    reader.assign(&assignment).expect("assign");
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        if let Some(message) = reader.poll(Duration::from_millis(100)) {
            panic!(
                "expected nothing, got {:?}",
                message.map(|m| rdkafka::Message::offset(&m))
            );
        }
    }

    // New records (timestamped an hour ahead so this test's retention keeps them).
    let fresh = records(3, "new", now_ms() + 3_600_000);
    let at = produce_ok(&bootstrap, "idle", &fresh, &[]);
    assert_eq!(at, vec![(0, 10), (0, 11), (0, 12)]);
    let got = consume(&bootstrap, "idle", 0, 10, 3, &[]);
    crate::common::assert_records(&got, &fresh, 10);
    assert_eq!(watermarks(&bootstrap, "idle"), (10, 13));
}

// With the default check interval (5 minutes) the first retention pass still runs 30 s
// after start, as Kafka's `log.initial.task.delay.ms`: expired records are gone within
// 45 s, not 5 minutes.
#[test]
fn the_first_retention_pass_runs_30_seconds_after_start() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    let started = Instant::now();
    create_topic(&bootstrap, "first-pass", 1, &[("retention.ms", "2000")]);
    let at = produce_ok(
        &bootstrap,
        "first-pass",
        &records(10, "old", now_ms() - 60_000),
        &[],
    );
    assert_eq!(at.last(), Some(&(0, 9)));
    let seen = wait_for_earliest(&bootstrap, "first-pass", 10, Duration::from_secs(45));
    assert_eq!(seen, (10, 10), "(earliest, latest) 45 s after start");
    assert!(
        started.elapsed() >= Duration::from_secs(25),
        "retention ran {:?} after start, before the 30 s delay",
        started.elapsed()
    );
}

// Small segments and a short retention: the segments holding only expired records go,
// the newest (holding the fresh records) stay, and every fresh record is still read at
// its offset. Earliest is exactly the base of the first segment kept.
#[test]
fn small_segments_lose_oldest_keep_newest() {
    let broker = Broker::start_with(&["--log-retention-check-interval-ms", CHECK_INTERVAL]);
    let bootstrap = broker.bootstrap();
    create_topic(
        &bootstrap,
        "rolling",
        1,
        &[("retention.ms", "2000"), ("segment.bytes", "1024")],
    );
    let old = records(40, "old", now_ms() - 60_000);
    let fresh = records(20, "new", now_ms() + 3_600_000);
    let producer = [("linger.ms", "0"), ("batch.num.messages", "1")];
    produce_ok(&bootstrap, "rolling", &old, &producer);
    produce_ok(&bootstrap, "rolling", &fresh, &producer);
    // Retention may run while producing; in the end the first segment kept is the one
    // holding offset 40, the first fresh record, and no older one is left.
    let holds_40 = |bases: &[i64]| {
        bases.first().is_some_and(|b| *b <= 40) && bases.get(1).is_some_and(|b| *b > 40)
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while !holds_40(&segment_bases(broker.data_dir(), "rolling")) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let bases = segment_bases(broker.data_dir(), "rolling");
    assert!(holds_40(&bases), "segments {bases:?}");
    assert!(bases.len() >= 2, "segments {bases:?}");
    assert!(bases[0] > 0, "the oldest segments went: {bases:?}");
    assert_eq!(watermarks(&bootstrap, "rolling"), (bases[0], 60));
    let got = consume(&bootstrap, "rolling", 0, 40, 20, &[]);
    crate::common::assert_records(&got, &fresh, 40);
}

// retention.bytes on a low-volume topic (one record per batch, small segments, records
// that never expire by time): the oldest segments go until what is left is within the
// limit plus one segment, and the newest record is still there.
#[test]
fn retention_bytes_on_low_volume_topic() {
    let broker = Broker::start_with(&["--log-retention-check-interval-ms", CHECK_INTERVAL]);
    let bootstrap = broker.bootstrap();
    create_topic(
        &bootstrap,
        "sized",
        1,
        &[("retention.bytes", "2048"), ("segment.bytes", "1024")],
    );
    let producer = [("linger.ms", "0"), ("batch.num.messages", "1")];
    let all = records(60, "v", now_ms());
    for record in &all {
        produce_ok(&bootstrap, "sized", std::slice::from_ref(record), &producer);
    }
    let dir = broker.data_dir().join("sized-0");
    let sizes = || -> Vec<(i64, u64)> {
        let mut sizes: Vec<(i64, u64)> = std::fs::read_dir(&dir)
            .expect("read dir")
            .filter_map(|e| {
                let e = e.ok()?;
                let name = e.file_name().to_string_lossy().into_owned();
                let base = name.strip_suffix(".log")?.parse().ok()?;
                Some((base, e.metadata().ok()?.len()))
            })
            .collect();
        sizes.sort_unstable();
        sizes
    };
    // Kafka's rule: the oldest segment goes while the log without it is still at or above
    // retention.bytes, so in the end the log is over the limit by less than its first
    // segment.
    let settled = |sizes: &[(i64, u64)]| {
        let total: u64 = sizes.iter().map(|(_, size)| size).sum();
        let first = sizes.first().map_or(0, |(_, size)| *size);
        total - first < 2048
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while !settled(&sizes()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let sizes = sizes();
    assert!(settled(&sizes), "segments (base, bytes) {sizes:?}");
    let (earliest, latest) = watermarks(&bootstrap, "sized");
    assert_eq!(latest, 60);
    assert_eq!(earliest, sizes[0].0);
    assert!(earliest > 0);
    let got = consume(
        &bootstrap,
        "sized",
        0,
        earliest,
        usize::try_from(60 - earliest).expect("small"),
        &[],
    );
    let skip = usize::try_from(earliest).expect("small");
    crate::common::assert_records(&got, &all[skip..], earliest);
}

#[test]
fn records_stamped_long_ago_expire_once_a_current_one_follows() {
    // Proves: 3 records stamped 30 days ago and then a current one, on a topic with the
    // default segment.ms and retention.ms (7 days): the current record rolls a new segment
    // (Kafka's segment.ms counts from the first batch's timestamp: 30 days past it), and
    // retention then deletes the old segment, so the earliest offset moves to 3 and the
    // current record stays. Before, the four shared one active segment whose largest
    // timestamp was current, and the old records never expired until a size roll.
    let broker = Broker::start_with(&["--log-retention-check-interval-ms", CHECK_INTERVAL]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "replayed", 1, &[]);
    let month_ago = now_ms() - 30 * 24 * 3_600_000;
    let at = produce_ok(
        &bootstrap,
        "replayed",
        &records(3, "old", month_ago),
        &[("linger.ms", "0")],
    );
    assert_eq!(at.last(), Some(&(0, 2)));
    let current = records(1, "current", now_ms());
    let at = produce_ok(&bootstrap, "replayed", &current, &[]);
    assert_eq!(at, vec![(0, 3)]);
    let seen = wait_for_earliest(&bootstrap, "replayed", 3, Duration::from_secs(15));
    assert_eq!(seen, (3, 4), "(earliest, latest) after retention");
    assert_eq!(segment_bases(broker.data_dir(), "replayed"), vec![3]);
    let got = consume(&bootstrap, "replayed", 0, 3, 1, &[]);
    crate::common::assert_records(&got, &current, 3);
}
