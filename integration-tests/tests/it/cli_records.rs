//! `logbook produce` and `logbook consume` (issue 12, item 3) against the real broker,
//! checked with rdkafka on the other side: exact keys, values, headers, offsets and
//! timestamps, group commits, start positions, and exit codes.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use integration_tests::{free_port, Broker};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::{json, Value};

use crate::common::{
    assert_records, consume, create_topic, produce_all, produce_ok, producer, Record,
    CLIENT_TIMEOUT,
};

/// Longest one `logbook` run may take before the test kills it.
const RUN_TIMEOUT: Duration = Duration::from_secs(20);
/// 2026-01-01T00:00:00Z in milliseconds: a CreateTime with a readable RFC 3339 form.
const BASE_TS: i64 = 1_767_225_600_000;

/// What one `logbook` run printed and how it exited.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Panics with the output unless the run exited 0.
    fn ok(self, what: &str) -> Run {
        assert_eq!(
            self.code, 0,
            "{what}: exit {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }

    /// stdout's lines as JSON values.
    fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}")))
            .collect()
    }
}

/// Runs `logbook ARGS` with `stdin` as its standard input; kills it after `RUN_TIMEOUT`.
fn logbook(args: &[&str], stdin: &[u8]) -> Run {
    let mut child = Command::new(integration_tests::broker_binary())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn logbook");
    let mut input = child.stdin.take().expect("piped stdin");
    let data = stdin.to_vec();
    // A writer thread: a large input must not block on a full pipe while nobody reads.
    let writer = std::thread::spawn(move || {
        // The tool may exit (e.g. on an error) before reading everything.
        let _ = input.write_all(&data);
    });
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(RUN_TIMEOUT) {
        Ok(output) => output.expect("wait for logbook"),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("logbook {args:?} did not finish within {RUN_TIMEOUT:?}");
        }
    };
    writer.join().expect("stdin writer");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `["consume", topic, "-b", bootstrap, extra...]` run without input.
fn consume_cli(bootstrap: &str, topic: &str, extra: &[&str]) -> Run {
    let mut args = vec!["consume", topic, "-b", bootstrap];
    args.extend_from_slice(extra);
    logbook(&args, b"")
}

/// `["produce", topic, "-b", bootstrap, extra...]` run with `input`.
fn produce_cli(bootstrap: &str, topic: &str, extra: &[&str], input: &str) -> Run {
    let mut args = vec!["produce", topic, "-b", bootstrap];
    args.extend_from_slice(extra);
    logbook(&args, input.as_bytes())
}

/// Sorts JSON record lines by (partition, offset), after checking each partition's lines
/// came in offset order.
fn by_partition(mut lines: Vec<Value>) -> Vec<Value> {
    let mut last: BTreeMap<i64, i64> = BTreeMap::new();
    for line in &lines {
        let partition = line["partition"].as_i64().expect("partition");
        let offset = line["offset"].as_i64().expect("offset");
        if let Some(previous) = last.insert(partition, offset) {
            assert!(
                previous < offset,
                "partition {partition}: {offset} after {previous}"
            );
        }
    }
    lines.sort_by_key(|l| (l["partition"].as_i64(), l["offset"].as_i64()));
    lines
}

#[test]
fn produce_writes_keyed_lines_with_headers() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "cli-produce", 1, &[]);
    let input: String = (0..1000)
        .map(|i| format!("key-{i}:value-{i}:tail\n"))
        .collect();
    let run = produce_cli(
        &bootstrap,
        "cli-produce",
        &[
            "--key-separator",
            ":",
            "--header",
            "source=cli",
            "-H",
            "eq=a=b",
            "--json",
        ],
        &input,
    )
    .ok("produce");
    let summary: Value = serde_json::from_str(run.stdout.trim()).expect("one JSON summary");
    assert_eq!(
        summary,
        json!({"topic": "cli-produce", "records": 1000,
               "partitions": {"0": {"first_offset": 0, "last_offset": 999}}})
    );
    assert!(
        run.stderr.contains("produced 1000 records to cli-produce"),
        "{}",
        run.stderr
    );
    let headers = vec![
        ("source".to_owned(), Some(b"cli".to_vec())),
        ("eq".to_owned(), Some(b"a=b".to_vec())),
    ];
    let expected: Vec<Record> = (0..1000)
        .map(|i| Record {
            partition: 0,
            key: Some(format!("key-{i}").into_bytes()),
            value: Some(format!("value-{i}:tail").into_bytes()),
            headers: headers.clone(),
            timestamp: None,
        })
        .collect();
    let consumed = consume(&bootstrap, "cli-produce", 0, 0, 1000, &[]);
    assert_records(&consumed, &expected, 0);
}

#[test]
fn produce_compresses_and_targets_a_partition() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "cli-codecs", 2, &[]);
    let codecs = ["none", "gzip", "snappy", "lz4", "zstd"];
    for (i, codec) in codecs.iter().enumerate() {
        let first = 2 * i64::try_from(i).expect("small");
        let run = produce_cli(
            &bootstrap,
            "cli-codecs",
            &[
                "--partition",
                "1",
                "--compression",
                codec,
                "--acks",
                "1",
                "--json",
            ],
            &format!("{codec}-a\r\n{codec}-b\n"),
        )
        .ok(codec);
        let summary: Value = serde_json::from_str(run.stdout.trim()).expect("JSON summary");
        assert_eq!(
            summary["partitions"],
            json!({"1": {"first_offset": first, "last_offset": first + 1}}),
            "{codec}"
        );
    }
    let expected: Vec<Record> = codecs
        .iter()
        .flat_map(|c| [format!("{c}-a"), format!("{c}-b")])
        .map(|value| Record {
            partition: 1,
            key: None,
            value: Some(value.into_bytes()),
            headers: Vec::new(),
            timestamp: None,
        })
        .collect();
    let consumed = consume(&bootstrap, "cli-codecs", 1, 0, expected.len(), &[]);
    assert_records(&consumed, &expected, 0);
}

/// Keyed lines land where Kafka's default partitioner puts them: the same partitions
/// librdkafka's `murmur2_random` (the Java client's partitioner) chooses.
#[test]
fn produce_partitions_keys_like_kafka() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "cli-keys", 3, &[]);
    create_topic(&bootstrap, "rd-keys", 3, &[]);
    let keys: Vec<String> = (0..30).map(|i| format!("user-{i}")).collect();
    let input: String = keys.iter().map(|k| format!("{k}={k}\n")).collect();
    let run = produce_cli(
        &bootstrap,
        "cli-keys",
        &["--key-separator", "=", "--json"],
        &input,
    )
    .ok("produce keyed");
    let summary: Value = serde_json::from_str(run.stdout.trim()).expect("JSON summary");
    let mut ours: BTreeMap<String, i32> = BTreeMap::new();
    for (partition, range) in summary["partitions"].as_object().expect("partitions") {
        let partition: i32 = partition.parse().expect("partition number");
        let first = range["first_offset"].as_i64().expect("first");
        let last = range["last_offset"].as_i64().expect("last");
        assert_eq!(first, 0);
        let count = usize::try_from(last - first + 1).expect("count");
        for record in consume(&bootstrap, "cli-keys", partition, 0, count, &[]) {
            let key = String::from_utf8(record.key.expect("key")).expect("UTF-8 key");
            assert_eq!(record.value.as_deref(), Some(key.as_bytes()));
            ours.insert(key, partition);
        }
    }
    let records: Vec<Record> = keys
        .iter()
        .map(|k| Record::new(-1, k.clone(), k.clone()))
        .collect();
    let rd = producer(&bootstrap, &[("partitioner", "murmur2_random")]);
    let theirs: BTreeMap<String, i32> = produce_all(&rd, "rd-keys", &records)
        .into_iter()
        .map(|d| {
            let (partition, _) = d.result.expect("delivered");
            (keys[d.index].clone(), partition)
        })
        .collect();
    assert_eq!(ours.len(), keys.len(), "every key read back once");
    assert_eq!(ours, theirs);
    let used: std::collections::BTreeSet<i32> = ours.values().copied().collect();
    assert_eq!(used.len(), 3, "30 keys spread over all 3 partitions");
}

/// 5 records in partition 0 and 3 in partition 1, with timestamps, a null key and a header.
fn consume_fixture(bootstrap: &str, topic: &str) {
    create_topic(bootstrap, topic, 2, &[]);
    let mut records: Vec<Record> = (0..5)
        .map(|i| Record {
            timestamp: Some(BASE_TS + i),
            ..Record::new(0, format!("k{i}"), format!("v{i}"))
        })
        .collect();
    for i in 0..3 {
        records.push(Record {
            partition: 1,
            key: (i != 0).then(|| format!("q{i}").into_bytes()),
            value: Some(format!("w{i}").into_bytes()),
            headers: if i == 2 {
                vec![("h".to_owned(), Some(b"x".to_vec()))]
            } else {
                Vec::new()
            },
            timestamp: Some(BASE_TS + 100 + i),
        });
    }
    produce_ok(bootstrap, topic, &records, &[]);
}

#[test]
fn consume_prints_json_and_text() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    consume_fixture(&bootstrap, "cli-consume");

    let run = consume_cli(
        &bootstrap,
        "cli-consume",
        &["--from-beginning", "--count", "8", "--json"],
    )
    .ok("consume --json");
    let mut expected: Vec<Value> = (0..5)
        .map(|i| {
            json!({"topic": "cli-consume", "partition": 0, "offset": i, "timestamp": BASE_TS + i,
                   "key": format!("k{i}"), "value": format!("v{i}"), "headers": {}})
        })
        .collect();
    expected.push(json!({"topic": "cli-consume", "partition": 1, "offset": 0,
        "timestamp": BASE_TS + 100, "key": null, "value": "w0", "headers": {}}));
    expected.push(json!({"topic": "cli-consume", "partition": 1, "offset": 1,
        "timestamp": BASE_TS + 101, "key": "q1", "value": "w1", "headers": {}}));
    expected.push(json!({"topic": "cli-consume", "partition": 1, "offset": 2,
        "timestamp": BASE_TS + 102, "key": "q2", "value": "w2", "headers": {"h": "x"}}));
    assert_eq!(by_partition(run.json_lines()), expected);
    assert!(
        run.stderr.contains("consumed 8 records from cli-consume"),
        "{}",
        run.stderr
    );

    let run = consume_cli(
        &bootstrap,
        "cli-consume",
        &["--from-beginning", "--count", "8"],
    )
    .ok("consume text");
    let mut lines: Vec<&str> = run.stdout.lines().collect();
    lines.sort_unstable();
    let mut want: Vec<String> = (0..5)
        .map(|i| format!("0\t{i}\t{}\tk{i}\tv{i}", BASE_TS + i))
        .collect();
    want.push(format!("1\t0\t{}\tnull\tw0", BASE_TS + 100));
    want.push(format!("1\t1\t{}\tq1\tw1", BASE_TS + 101));
    want.push(format!("1\t2\t{}\tq2\tw2", BASE_TS + 102));
    assert_eq!(lines, want);

    let run = consume_cli(
        &bootstrap,
        "cli-consume",
        &[
            "--partition",
            "1",
            "--from-beginning",
            "--max-messages",
            "3",
            "--value-only",
        ],
    )
    .ok("consume --value-only");
    assert_eq!(run.stdout, "w0\nw1\nw2\n");
}

#[test]
fn consume_group_commits_and_resumes() {
    let broker = Broker::start_with(&["--group-initial-rebalance-delay-ms", "0"]);
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "cli-group", 1, &[]);
    let records: Vec<Record> = (0..30)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    produce_ok(&bootstrap, "cli-group", &records, &[]);
    let values =
        |range: std::ops::Range<i32>| -> String { range.map(|i| format!("v{i}\n")).collect() };
    let args = [
        "--group",
        "g",
        "--from-beginning",
        "--count",
        "10",
        "--value-only",
    ];

    let first = consume_cli(&bootstrap, "cli-group", &args).ok("first group run");
    assert_eq!(first.stdout, values(0..10));
    let second = consume_cli(&bootstrap, "cli-group", &args).ok("second group run");
    assert_eq!(second.stdout, values(10..20));
    assert_eq!(committed(&bootstrap, "g", "cli-group"), 20);

    // Without --from-beginning the commit still decides where the group resumes.
    let third = consume_cli(
        &bootstrap,
        "cli-group",
        &["-g", "g", "-n", "10", "--value-only"],
    )
    .ok("third group run");
    assert_eq!(third.stdout, values(20..30));
    assert_eq!(committed(&bootstrap, "g", "cli-group"), 30);

    // Without --group nothing is committed.
    consume_cli(&bootstrap, "cli-group", &["--from-beginning", "-n", "5"]).ok("no group");
    assert_eq!(committed(&bootstrap, "g", "cli-group"), 30);

    // A group with an active member refuses a standalone commit: reported, exit 1.
    let member = subscribed_member(&bootstrap, "busy", "cli-group");
    let refused = consume_cli(
        &bootstrap,
        "cli-group",
        &["-g", "busy", "--from-beginning", "-n", "1"],
    );
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("group busy") && refused.stderr.contains("UNKNOWN_MEMBER_ID"),
        "{}",
        refused.stderr
    );
    drop(member);
}

/// The offset `group` committed for `topic`/0, read by rdkafka.
fn committed(bootstrap: &str, group: &str, topic: &str) -> i64 {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .create()
        .expect("create consumer");
    let mut partitions = TopicPartitionList::new();
    partitions.add_partition(topic, 0);
    let committed = consumer
        .committed_offsets(partitions, CLIENT_TIMEOUT)
        .expect("committed offsets");
    match committed.find_partition(topic, 0).map(|p| p.offset()) {
        Some(Offset::Offset(offset)) => offset,
        other => panic!("no committed offset for {topic}/0 in {group}: {other:?}"),
    }
}

/// An rdkafka consumer subscribed to `topic` in `group`, polled until it has its partitions.
fn subscribed_member(bootstrap: &str, group: &str, topic: &str) -> BaseConsumer {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "300")
        .create()
        .expect("create group member");
    consumer.subscribe(&[topic]).expect("subscribe");
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    while consumer.assignment().expect("assignment").count() == 0 {
        assert!(
            Instant::now() < deadline,
            "the member never got its partitions"
        );
        let _ = consumer.poll(Duration::from_millis(50));
    }
    consumer
}

#[test]
fn consume_starts_at_offsets_and_timestamps() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "cli-start", 2, &[]);
    let records: Vec<Record> = (0..2)
        .flat_map(|p| {
            (0..10).map(move |i| Record {
                timestamp: Some(BASE_TS + i * 1000),
                ..Record::new(p, format!("k{i}"), format!("p{p}-{i}"))
            })
        })
        .collect();
    produce_ok(&bootstrap, "cli-start", &records, &[]);

    let run = consume_cli(
        &bootstrap,
        "cli-start",
        &["--offset", "7", "--partition", "0", "-n", "1", "--json"],
    )
    .ok("--offset");
    assert_eq!(
        run.json_lines(),
        vec![
            json!({"topic": "cli-start", "partition": 0, "offset": 7, "timestamp": BASE_TS + 7000,
                    "key": "k7", "value": "p0-7", "headers": {}})
        ]
    );

    let ts = (BASE_TS + 4500).to_string();
    let run = consume_cli(
        &bootstrap,
        "cli-start",
        &[
            "--from-timestamp",
            &ts,
            "-p",
            "1",
            "-n",
            "1",
            "--value-only",
        ],
    )
    .ok("--from-timestamp ms");
    assert_eq!(run.stdout, "p1-5\n");

    let run = consume_cli(
        &bootstrap,
        "cli-start",
        &[
            "--from-timestamp",
            "2026-01-01T00:00:03Z",
            "-p",
            "0",
            "-n",
            "2",
            "--value-only",
        ],
    )
    .ok("--from-timestamp RFC 3339");
    assert_eq!(run.stdout, "p0-3\np0-4\n");

    // --offset without --partition applies to every partition.
    let run = consume_cli(
        &bootstrap,
        "cli-start",
        &["--offset", "8", "-n", "4", "--json"],
    )
    .ok("--offset all");
    let got: Vec<(i64, i64)> = by_partition(run.json_lines())
        .iter()
        .map(|l| {
            (
                l["partition"].as_i64().expect("p"),
                l["offset"].as_i64().expect("o"),
            )
        })
        .collect();
    assert_eq!(got, vec![(0, 8), (0, 9), (1, 8), (1, 9)]);

    // After the last timestamp, and by default: the end, so nothing until the idle timeout.
    let late = (BASE_TS + 60_000).to_string();
    for extra in [&["--from-timestamp", late.as_str()][..], &[][..]] {
        let mut args = extra.to_vec();
        args.extend_from_slice(&["--timeout-ms", "500"]);
        let started = Instant::now();
        let run = consume_cli(&bootstrap, "cli-start", &args).ok("idle timeout");
        assert_eq!(run.stdout, "", "{args:?}");
        assert!(run.stderr.contains("consumed 0 records"), "{}", run.stderr);
        assert!(started.elapsed() >= Duration::from_millis(500));
    }
}

#[test]
fn missing_topics_and_bad_input_exit_1_unreachable_exits_3() {
    let broker = Broker::start();
    let bootstrap = broker.bootstrap();

    let run = produce_cli(&bootstrap, "no-such-topic", &[], "x\n");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("topic no-such-topic does not exist")
            && run.stderr.contains("UNKNOWN_TOPIC_OR_PARTITION"),
        "{}",
        run.stderr
    );
    let run = consume_cli(
        &bootstrap,
        "no-such-topic",
        &["--from-beginning", "-n", "1"],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("topic no-such-topic does not exist")
            && run.stderr.contains("UNKNOWN_TOPIC_OR_PARTITION"),
        "{}",
        run.stderr
    );

    create_topic(&bootstrap, "cli-bad", 1, &[]);
    let run = produce_cli(
        &bootstrap,
        "cli-bad",
        &["--key-separator", ":"],
        "a:1\nb2\n",
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("line 2"), "{}", run.stderr);
    let run = produce_cli(&bootstrap, "cli-bad", &["--partition", "3"], "x\n");
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("no partition 3"), "{}", run.stderr);
    let run = consume_cli(&bootstrap, "cli-bad", &["--partition", "3"]);
    assert_eq!(run.code, 1, "{}", run.stderr);

    let nobody = format!("127.0.0.1:{}", free_port());
    let run = produce_cli(&nobody, "cli-bad", &[], "x\n");
    assert_eq!(run.code, 3, "{}", run.stderr);
    let run = consume_cli(&nobody, "cli-bad", &["--from-beginning", "-n", "1"]);
    assert_eq!(run.code, 3, "{}", run.stderr);
}
