//! Log compaction seen by real clients: a compacted topic ends with the latest value per
//! key at its original offset and without expired tombstones; an idempotent producer
//! keeps producing across a clean and a restart; a SIGKILL in the middle of a clean
//! leaves a complete log; `__consumer_offsets` shrinks and its offsets survive; a
//! transactional producer's aborted records leave the log, its committed ones are
//! compacted, and its markers go once their transactions have no data left.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use integration_tests::Broker;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

use crate::common::{
    consumer, create_topic, produce_all, produce_ok, producer, Record, TestProducer, CLIENT_TIMEOUT,
};

/// How long a test waits for the cleaner to get somewhere.
const CLEAN_TIMEOUT: Duration = Duration::from_secs(40);

/// (offset, key, value) of every record of `topic`/0 from the log start to the high
/// watermark, read with an assigned consumer.
fn read_all(bootstrap: &str, topic: &str) -> Vec<(i64, Vec<u8>, Option<Vec<u8>>)> {
    read_all_timed(bootstrap, topic)
        .into_iter()
        .map(|(offset, key, value, _)| (offset, key, value))
        .collect()
}

/// A record as a consumer sees it: offset, key, value (`None`: a tombstone), timestamp.
type TimedRecord = (i64, Vec<u8>, Option<Vec<u8>>, i64);

/// [`read_all`] with each record's timestamp as the consumer sees it.
fn read_all_timed(bootstrap: &str, topic: &str) -> Vec<TimedRecord> {
    let consumer = consumer(bootstrap, &[]);
    let (_, high) = consumer
        .fetch_watermarks(topic, 0, CLIENT_TIMEOUT)
        .expect("watermarks");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .expect("assignment");
    consumer.assign(&assignment).expect("assign");
    let mut out = Vec::new();
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    while out.last().is_none_or(|(offset, _, _, _)| offset + 1 < high) {
        assert!(
            Instant::now() < deadline,
            "read {} records of {topic} below {high}",
            out.len()
        );
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(e)) => panic!("consume {topic}: {e}"),
            Some(Ok(m)) => out.push((
                m.offset(),
                m.key().map(<[u8]>::to_vec).unwrap_or_default(),
                m.payload().map(<[u8]>::to_vec),
                m.timestamp().to_millis().unwrap_or(-1),
            )),
        }
    }
    out
}

/// Latest (offset, value) per key, from produced records and their acknowledged offsets.
fn latest_per_key(
    records: &[Record],
    offsets: &[(i32, i64)],
) -> BTreeMap<Vec<u8>, (i64, Option<Vec<u8>>)> {
    let mut latest = BTreeMap::new();
    for (record, (_, offset)) in records.iter().zip(offsets) {
        latest.insert(
            record.key.clone().expect("keyed"),
            (*offset, record.value.clone()),
        );
    }
    latest
}

/// Sum of the `.log` sizes in a partition directory.
fn log_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("list partition dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + CLEAN_TIMEOUT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn tombstone(key: &str) -> Record {
    Record {
        value: None,
        ..Record::new(0, key, "")
    }
}

/// The records of `rounds` updates of `keys` keys, values naming key and round.
fn updates(keys: usize, rounds: usize, pad: usize) -> Vec<Record> {
    (0..rounds)
        .flat_map(|r| {
            (0..keys).map(move |k| {
                Record::new(
                    0,
                    format!("key-{k:03}"),
                    format!("r{r}-k{k}-{}", "p".repeat(pad)),
                )
            })
        })
        .collect()
}

#[test]
fn compacted_topic_keeps_latest_value_per_key_and_drops_tombstones() {
    // Proves: on a compacted topic with small segments and 20 updates per key, the
    // cleaner leaves exactly the latest value of each live key at the offset it was
    // acknowledged at, and deleted keys (value and tombstone) are gone once
    // delete.retention.ms has passed; the log really shrank.
    let broker = Broker::start_with(&["--log-cleaner-backoff-ms", "100"]);
    let bootstrap = broker.bootstrap();
    create_topic(
        &bootstrap,
        "compacted",
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "2048"),
            ("delete.retention.ms", "1000"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    let mut records = updates(30, 20, 20);
    records.extend((0..5).map(|k| tombstone(&format!("key-{k:03}"))));
    // Unique keys after the updates push them all out of the (never cleaned) active segment.
    records.extend((0..60).map(|i| Record::new(0, format!("filler-{i:03}"), "f".repeat(40))));
    let offsets = produce_ok(
        &bootstrap,
        "compacted",
        &records,
        &[("linger.ms", "0"), ("batch.num.messages", "5")],
    );
    let mut expected: Vec<(i64, Vec<u8>, Option<Vec<u8>>)> = latest_per_key(&records, &offsets)
        .into_iter()
        .filter(|(_, (_, value))| value.is_some())
        .map(|(key, (offset, value))| (offset, key, value))
        .collect();
    expected.sort();
    assert_eq!(expected.len(), 25 + 60);
    let dir = broker.data_dir().join("compacted-0");
    let mut last = Vec::new();
    wait_until("compaction of every key and tombstone", || {
        last = read_all(&bootstrap, "compacted");
        last == expected
    });
    assert!(log_bytes(&dir) < 20_000, "log is {} bytes", log_bytes(&dir));
}

#[test]
fn tombstone_with_an_old_timestamp_stays_for_delete_retention_after_its_first_clean() {
    // Proves (KIP-534): a tombstone whose producer gave it a week-old timestamp is not
    // dropped by the pass that first compacts it (which removes its key's value), but
    // stays readable, with its original timestamp, until delete.retention.ms after that
    // pass; then it goes. A segment-time rule dropped both at once, so a consumer
    // rebuilding state missed the delete.
    let broker = Broker::start_with(&["--log-cleaner-backoff-ms", "100"]);
    let bootstrap = broker.bootstrap();
    let retention = Duration::from_secs(8);
    create_topic(
        &bootstrap,
        "old-tombstones",
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "2048"),
            ("delete.retention.ms", &retention.as_millis().to_string()),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    let week_ago = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
        - 7 * 86_400_000;
    let old = |record: Record| Record {
        timestamp: Some(week_ago),
        ..record
    };
    let mut records = vec![
        old(Record::new(0, "deleted", "value")),
        old(tombstone("deleted")),
    ];
    records.extend((0..60).map(|i| Record::new(0, format!("filler-{i:03}"), "f".repeat(40))));
    let offsets = produce_ok(
        &bootstrap,
        "old-tombstones",
        &records,
        &[("linger.ms", "0"), ("batch.num.messages", "5")],
    );
    let tombstone_offset = offsets[1].1;
    let mut last = Vec::new();
    wait_until("the value of the deleted key to be compacted away", || {
        last = read_all_timed(&bootstrap, "old-tombstones");
        last.first().is_some_and(|r| r.0 != offsets[0].1)
    });
    let cleaned_at = Instant::now();
    assert_eq!(
        last.first(),
        Some(&(tombstone_offset, b"deleted".to_vec(), None, week_ago)),
        "the tombstone must stay, with its timestamp, after the pass that removed its value"
    );
    wait_until("the tombstone to go after delete.retention.ms", || {
        last = read_all_timed(&bootstrap, "old-tombstones");
        last.first().is_some_and(|r| r.0 != tombstone_offset)
    });
    assert!(
        cleaned_at.elapsed() + Duration::from_secs(1) >= retention,
        "the tombstone went {:?} after the first clean",
        cleaned_at.elapsed()
    );
    assert_eq!(last.len(), 60);
    assert!(last.iter().all(|r| r.1.starts_with(b"filler-")));
}

#[test]
fn idempotent_producer_keeps_producing_across_a_clean_and_restart() {
    // Proves: the cleaner keeps each idempotent producer's last batch (and every batch's
    // producer fields), so a producer with enable.idempotence keeps producing after its
    // earlier batches were compacted, also after a broker restart that reloads producer
    // state from the compacted log: every record is acknowledged (no
    // OUT_OF_ORDER_SEQUENCE_NUMBER, no fatal idempotence error) and the log ends with
    // the latest value per key.
    let mut broker = Broker::start_with(&["--log-cleaner-backoff-ms", "100"]);
    let bootstrap = broker.bootstrap();
    create_topic(
        &bootstrap,
        "idem-compacted",
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "1024"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    let producer = producer(
        &bootstrap,
        &[
            ("enable.idempotence", "true"),
            ("acks", "all"),
            ("linger.ms", "0"),
            ("batch.num.messages", "5"),
            ("message.timeout.ms", "30000"),
        ],
    );
    let checkpoint = broker
        .data_dir()
        .join("idem-compacted-0/cleaner-offset-checkpoint");
    let mut all = Vec::new();
    let mut all_offsets = Vec::new();
    for round in 0..3 {
        let records: Vec<Record> = (0..150)
            .map(|i| Record::new(0, format!("key-{:02}", i % 10), format!("round{round}-{i}")))
            .collect();
        let deliveries = produce_all(&producer, "idem-compacted", &records);
        for d in &deliveries {
            let at = d
                .result
                .unwrap_or_else(|e| panic!("round {round}: record {} failed: {e:?}", d.index));
            all_offsets.push(at);
        }
        all.extend(records);
        if round == 0 {
            wait_until("a first clean", || checkpoint.exists());
        }
        if round == 1 {
            broker.restart();
        }
    }
    let offsets: Vec<i64> = all_offsets.iter().map(|(_, o)| *o).collect();
    assert!(
        offsets.windows(2).all(|w| w[0] < w[1]),
        "offsets not increasing"
    );
    let latest = latest_per_key(&all, &all_offsets);
    let read = read_all(&bootstrap, "idem-compacted");
    for (key, (offset, value)) in &latest {
        let newest = read
            .iter()
            .rev()
            .find(|(_, k, _)| k == key)
            .expect("key present");
        assert_eq!(
            (&newest.0, &newest.2),
            (offset, value),
            "key {}",
            String::from_utf8_lossy(key)
        );
    }
}

#[test]
fn sigkill_during_compaction_leaves_a_complete_log() {
    // Proves: killing the broker while the cleaner is writing a cleaned segment (slowed
    // by log.cleaner.io.max.bytes.per.second) leaves a log that opens, and in which
    // every key's latest value is readable at its acknowledged offset; the restart
    // discarded or completed the interrupted clean.
    let mut broker = Broker::start_with(&[
        "--log-cleaner-backoff-ms",
        "100",
        "--log-cleaner-io-max-bytes-per-second",
        "400000",
    ]);
    let bootstrap = broker.bootstrap();
    create_topic(
        &bootstrap,
        "killed-clean",
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "65536"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    let records = updates(50, 200, 80);
    let offsets = produce_ok(&bootstrap, "killed-clean", &records, &[("linger.ms", "5")]);
    let dir = broker.data_dir().join("killed-clean-0");
    wait_until("a cleaned segment being written", || {
        std::fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .any(|e| e.file_name().to_string_lossy().ends_with(".cleaned"))
            })
            .unwrap_or(false)
    });
    broker.kill();
    broker.restart();
    let log = broker.log();
    assert!(
        log.contains("deleting an unfinished cleaned segment")
            || log.contains("completed an interrupted compaction swap"),
        "restart did not see the interrupted clean"
    );
    let read = read_all(&bootstrap, "killed-clean");
    let read_offsets: Vec<i64> = read.iter().map(|r| r.0).collect();
    assert!(
        read_offsets.windows(2).all(|w| w[0] < w[1]),
        "offsets not increasing"
    );
    for (key, (offset, value)) in latest_per_key(&records, &offsets) {
        let newest = read
            .iter()
            .rev()
            .find(|(_, k, _)| *k == key)
            .expect("key present");
        assert_eq!(
            (newest.0, &newest.2),
            (offset, &value),
            "key {}",
            String::from_utf8_lossy(&key)
        );
    }
}

/// Commits `offset` for partitions 0..4 of `topic` as group `group` (no membership).
fn commit(consumer: &BaseConsumer, topic: &str, offset: i64) {
    let mut list = TopicPartitionList::new();
    for partition in 0..4 {
        list.add_partition_offset(
            topic,
            partition,
            Offset::Offset(offset + i64::from(partition)),
        )
        .expect("commit list");
    }
    consumer.commit(&list, CommitMode::Sync).expect("commit");
}

fn committed(bootstrap: &str, group: &str, topic: &str) -> Vec<Offset> {
    let consumer = consumer(bootstrap, &[("group.id", group)]);
    let mut list = TopicPartitionList::new();
    for partition in 0..4 {
        list.add_partition(topic, partition);
    }
    let committed = consumer
        .committed_offsets(list, CLIENT_TIMEOUT)
        .expect("committed offsets");
    committed
        .elements()
        .iter()
        .map(rdkafka::topic_partition_list::TopicPartitionListElem::offset)
        .collect()
}

#[test]
fn consumer_offsets_shrinks_after_compaction_and_offsets_survive_restart() {
    // Proves: `__consumer_offsets` is compacted: 400 commits of one group written with
    // the cleaner off, then a broker with the cleaner on shrinks the partition to a
    // fraction of its size, and the group's committed offsets are the last ones, also
    // after another restart (the coordinator loads the compacted log).
    let offsets_flags = [
        "--offsets-topic-num-partitions",
        "1",
        "--offsets-topic-segment-bytes",
        "4096",
    ];
    let mut off: Vec<&str> = offsets_flags.to_vec();
    off.extend(["--log-cleaner-enable", "false"]);
    let mut first = Broker::start_with(&off);
    let bootstrap = first.bootstrap();
    create_topic(&bootstrap, "tracked", 4, &[]);
    let committer = consumer(&bootstrap, &[("group.id", "shrink-g")]);
    for i in 0..400 {
        commit(&committer, "tracked", i);
    }
    drop(committer);
    let dir = first.data_dir().join("__consumer_offsets-0");
    let before = log_bytes(&dir);
    assert!(before > 40_000, "__consumer_offsets holds {before} bytes");
    first.terminate();
    let mut on: Vec<&str> = offsets_flags.to_vec();
    on.extend(["--log-cleaner-backoff-ms", "100"]);
    let mut second = Broker::start_in(first.data_dir(), &on);
    let bootstrap = second.bootstrap();
    wait_until("__consumer_offsets compaction", || {
        log_bytes(&dir) < before / 5
    });
    let expected: Vec<Offset> = (0..4).map(|p| Offset::Offset(399 + p)).collect();
    assert_eq!(committed(&bootstrap, "shrink-g", "tracked"), expected);
    second.restart();
    assert_eq!(
        committed(&second.bootstrap(), "shrink-g", "tracked"),
        expected
    );
    assert!(
        log_bytes(&dir) < before / 5,
        "{} bytes after restart",
        log_bytes(&dir)
    );
}

/// (offset, key, value) of every record of `topic`/0 a consumer with `isolation.level`
/// `isolation` reads from the log start until it reports the end of the partition (the
/// high watermark, or the last stable offset under read_committed).
fn read_isolated(
    bootstrap: &str,
    topic: &str,
    isolation: &str,
) -> Vec<(i64, Vec<u8>, Option<Vec<u8>>)> {
    let consumer = consumer(
        bootstrap,
        &[
            ("isolation.level", isolation),
            ("enable.partition.eof", "true"),
        ],
    );
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Beginning)
        .expect("assignment");
    consumer.assign(&assignment).expect("assign");
    let mut out = Vec::new();
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    loop {
        assert!(
            Instant::now() < deadline,
            "no end of {topic} after {} records",
            out.len()
        );
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(_))) => return out,
            Some(Err(e)) => panic!("consume {topic}: {e}"),
            Some(Ok(m)) => out.push((
                m.offset(),
                m.key().map(<[u8]>::to_vec).unwrap_or_default(),
                m.payload().map(<[u8]>::to_vec),
            )),
        }
    }
}

/// Base offsets of the control batches (transaction markers) in the partition's `.log`
/// files, read from the batch headers on disk (clients never see markers).
fn marker_offsets(dir: &Path) -> Vec<i64> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("list partition dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let bytes = std::fs::read(&file).unwrap_or_default();
        let mut at = 0;
        while at + 61 <= bytes.len() {
            let base = i64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
            let length = i32::from_be_bytes(bytes[at + 8..at + 12].try_into().expect("4 bytes"));
            let attributes =
                i16::from_be_bytes(bytes[at + 21..at + 23].try_into().expect("2 bytes"));
            if length < 49 {
                break;
            }
            if attributes & 0x20 != 0 {
                out.push(base);
            }
            at += 12 + usize::try_from(length).expect("positive");
        }
    }
    out
}

/// A transactional producer (`transactional.id` = `id`), initialised.
fn transactional_producer(bootstrap: &str, id: &str) -> TestProducer {
    let p = producer(
        bootstrap,
        &[
            ("transactional.id", id),
            ("enable.idempotence", "true"),
            ("linger.ms", "0"),
            ("batch.num.messages", "5"),
        ],
    );
    p.init_transactions(CLIENT_TIMEOUT)
        .expect("init_transactions");
    p
}

/// Runs one transaction of `records` on `topic`/0, committed or aborted; returns the
/// acknowledged offsets.
fn transaction(p: &TestProducer, topic: &str, records: &[Record], commit: bool) -> Vec<i64> {
    p.begin_transaction().expect("begin");
    let offsets = produce_all(p, topic, records)
        .into_iter()
        .map(|d| {
            d.result
                .unwrap_or_else(|e| panic!("record {}: {e:?}", d.index))
                .1
        })
        .collect();
    if commit {
        p.commit_transaction(CLIENT_TIMEOUT).expect("commit");
    } else {
        p.abort_transaction(CLIENT_TIMEOUT).expect("abort");
    }
    offsets
}

#[test]
fn transactional_compacted_topic_keeps_latest_committed_values_and_drops_aborted() {
    // Proves: on a compacted topic written by a transactional producer (committed and
    // aborted transactions over the same keys, aborted ones also with keys of their
    // own), the cleaner leaves exactly the latest committed value of each key at its
    // acknowledged offset, for read_committed and read_uncommitted consumers alike: the
    // aborted values are gone from the log, and an aborted value never hides an older
    // committed one. The markers of transactions left without data go after
    // delete.retention.ms; the two whose transactions still have records stay. The
    // producer commits again afterwards, also after a broker restart.
    let mut broker = Broker::start_with(&["--log-cleaner-backoff-ms", "100"]);
    let bootstrap = broker.bootstrap();
    let topic = "txn-compacted";
    create_topic(
        &bootstrap,
        topic,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", "1024"),
            ("delete.retention.ms", "1000"),
            ("min.cleanable.dirty.ratio", "0.01"),
        ],
    );
    let p = transactional_producer(&bootstrap, "txn-compacted-producer");
    let mut latest: BTreeMap<Vec<u8>, (i64, Vec<u8>)> = BTreeMap::new();
    let mut commit_ends = Vec::new();
    for round in 0..6 {
        let commit = round % 2 == 0;
        let mut records: Vec<Record> = (0..10)
            .map(|k| Record::new(0, format!("key-{k:02}"), format!("r{round}-k{k}-{commit}")))
            .collect();
        if !commit {
            // Keys only an aborted transaction ever wrote.
            records.extend((0..3).map(|i| Record::new(0, format!("ghost-{round}-{i}"), "ghost")));
        }
        let offsets = transaction(&p, topic, &records, commit);
        if commit {
            for (record, offset) in records.iter().zip(&offsets) {
                latest.insert(
                    record.key.clone().expect("keyed"),
                    (*offset, record.value.clone().expect("value")),
                );
            }
            commit_ends.push(*offsets.last().expect("offsets") + 1);
        }
    }
    // Unique committed keys push every round out of the (never cleaned) active segment.
    let filler: Vec<Record> = (0..60)
        .map(|i| Record::new(0, format!("filler-{i:02}"), "f".repeat(40)))
        .collect();
    let offsets = transaction(&p, topic, &filler, true);
    for (record, offset) in filler.iter().zip(&offsets) {
        latest.insert(
            record.key.clone().expect("keyed"),
            (*offset, record.value.clone().expect("value")),
        );
    }
    let filler_marker = offsets.last().expect("offsets") + 1;
    let mut expected: Vec<(i64, Vec<u8>, Option<Vec<u8>>)> = latest
        .into_iter()
        .map(|(key, (offset, value))| (offset, key, Some(value)))
        .collect();
    expected.sort();
    assert_eq!(expected.len(), 10 + 60);
    let dir = broker.data_dir().join(format!("{topic}-0"));
    assert_eq!(
        marker_offsets(&dir).len(),
        7,
        "a marker per transaction before cleaning"
    );

    let mut last = Vec::new();
    wait_until("compaction of the transactional topic", || {
        last = read_isolated(&bootstrap, topic, "read_uncommitted");
        last == expected
    });
    assert_eq!(read_isolated(&bootstrap, topic, "read_committed"), expected);
    // Round 4's records are the latest of their keys: its marker stays, as does the
    // filler's; the other five transactions have no record left, so their markers go
    // once delete.retention.ms has passed.
    let round4_marker = commit_ends[2];
    wait_until("markers of emptied transactions removed", || {
        marker_offsets(&dir) == vec![round4_marker, filler_marker]
    });
    assert_eq!(read_isolated(&bootstrap, topic, "read_committed"), expected);

    // The producer's state survived compaction: it commits again, before and after a
    // restart of the broker.
    let more = [Record::new(0, "key-00", "after-clean")];
    let at = transaction(&p, topic, &more, true)[0];
    broker.restart();
    assert_eq!(
        read_isolated(&bootstrap, topic, "read_uncommitted").len(),
        expected.len() + 1
    );
    let again = [Record::new(0, "key-01", "after-restart")];
    let at2 = transaction(&p, topic, &again, true)[0];
    assert!(at < at2, "offsets {at} then {at2}");
    let read = read_isolated(&bootstrap, topic, "read_committed");
    assert_eq!(
        read.iter()
            .rev()
            .take(2)
            .map(|(o, k, _)| (*o, k.clone()))
            .collect::<Vec<_>>(),
        vec![(at2, b"key-01".to_vec()), (at, b"key-00".to_vec())]
    );
}

/// The cleaned-to offset of the partition in `dir` (`cleaner-offset-checkpoint`), if any.
fn cleaned_to(dir: &Path) -> Option<i64> {
    std::fs::read_to_string(dir.join("cleaner-offset-checkpoint"))
        .ok()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[test]
fn consumer_offsets_reload_steps_over_an_emptied_batch_before_a_large_one() {
    // Proves (issue 23 item 7): the coordinator's reload of `__consumer_offsets` reads
    // past a batch compaction emptied (a transactional producer's last offset batch,
    // kept without records) when the next batch is larger than the 1 MiB replay read:
    // after a restart the groups committed after both still have their offsets.
    let flags = [
        "--log-cleaner-backoff-ms",
        "100",
        "--offsets-topic-num-partitions",
        "1",
        "--offsets-topic-segment-bytes",
        "4096",
        "--override",
        "transaction.state.log.num.partitions=1",
        // Every pass may clean: after the 1.2 MB batch is clean, the later commits are a
        // tiny dirty ratio, and a pass that ran before the overwrite would be the last.
        "--override",
        "log.cleaner.min.cleanable.ratio=0.0001",
    ];
    let mut broker = Broker::start_with(&flags);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "tracked", 1, &[]);
    create_topic(&bootstrap, "txn-out", 1, &[]);
    create_topic(&bootstrap, "wide", 300, &[]);
    let txn_group = consumer(&bootstrap, &[("group.id", "g-txn")]);
    let group_metadata = txn_group.group_metadata().expect("group metadata");
    let p = transactional_producer(&bootstrap, "emptied-offsets");
    let tracked = |offset: i64| {
        let mut list = TopicPartitionList::new();
        list.add_partition_offset("tracked", 0, Offset::Offset(offset))
            .expect("offset");
        list
    };
    p.begin_transaction().expect("begin");
    produce_all(&p, "txn-out", &[Record::new(0, "k", "v")]);
    // The transactional offset batch, then at once a plain commit of 300 partitions with
    // 4000 bytes of metadata each (one batch of about 1.2 MB).
    p.send_offsets_to_transaction(&tracked(5), &group_metadata, CLIENT_TIMEOUT)
        .expect("send offsets");
    let big = consumer(&bootstrap, &[("group.id", "g-big")]);
    let metadata = "m".repeat(4000);
    let mut wide = TopicPartitionList::new();
    for partition in 0..300 {
        wide.add_partition_offset(
            "wide",
            partition,
            Offset::Offset(1000 + i64::from(partition)),
        )
        .expect("offset");
        wide.find_partition("wide", partition)
            .expect("just added")
            .set_metadata(metadata.clone());
    }
    big.commit(&wide, CommitMode::Sync).expect("large commit");
    p.commit_transaction(CLIENT_TIMEOUT).expect("commit");
    // Overwrite the transactional offset: compaction empties its batch (kept, as the
    // producer's last), then roll segments with later commits.
    txn_group
        .commit(&tracked(6), CommitMode::Sync)
        .expect("plain commit");
    let (_, overwritten) = txn_group
        .fetch_watermarks("__consumer_offsets", 0, CLIENT_TIMEOUT)
        .expect("watermarks");
    let after = consumer(&bootstrap, &[("group.id", "g-after")]);
    for i in 0..60 {
        after.commit(&tracked(i), CommitMode::Sync).expect("commit");
    }
    let dir = broker.data_dir().join("__consumer_offsets-0");
    wait_until("__consumer_offsets cleaned past the overwrite", || {
        cleaned_to(&dir).is_some_and(|c| c >= overwritten)
    });
    drop((txn_group, big, after, p));
    broker.restart();
    let bootstrap = broker.bootstrap();
    let fetch = |group: &str, list: TopicPartitionList| {
        consumer(&bootstrap, &[("group.id", group)])
            .committed_offsets(list, CLIENT_TIMEOUT)
            .expect("committed offsets")
    };
    let mut one = TopicPartitionList::new();
    one.add_partition("tracked", 0);
    let got = fetch("g-txn", one.clone());
    assert_eq!(got.elements()[0].offset(), Offset::Offset(6), "g-txn");
    let got = fetch("g-after", one);
    assert_eq!(got.elements()[0].offset(), Offset::Offset(59), "g-after");
    let mut all = TopicPartitionList::new();
    for partition in 0..300 {
        all.add_partition("wide", partition);
    }
    let got = fetch("g-big", all);
    for element in got.elements() {
        assert_eq!(
            (element.offset(), element.metadata()),
            (
                Offset::Offset(1000 + i64::from(element.partition())),
                metadata.as_str()
            ),
            "g-big wide-{}",
            element.partition()
        );
    }
}
