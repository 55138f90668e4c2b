//! `--metrics-listen` (issue 12): the endpoint serves Prometheus text that Prometheus's own
//! Python client parses, its counters move with real client traffic, consumer lag rises
//! while a group's consumer is stopped and falls to zero when it catches up, and
//! `/healthz` / `/readyz` answer as orchestrators expect.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use integration_tests::{free_ports, target_dir, Broker};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use crate::common::{consumer, create_topic, produce_all, producer, Record};

/// The Prometheus Python client whose parser checks the text.
const PROMETHEUS_CLIENT: &str = "prometheus-client==0.26.0";

/// One parsed sample: name, labels, value.
pub(crate) type Sample = (String, BTreeMap<String, String>, f64);

/// `GET path` on `addr`: status code and body.
fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to the metrics endpoint");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("read timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .expect("send the request");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .expect("read the response");
    let (head, body) = response.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status code");
    (status, body.to_string())
}

/// Makes `prometheus_client` importable (installed into the target dir once).
fn prometheus_pythonpath() -> PathBuf {
    let dir = target_dir().join("pydeps-prometheus");
    let importable = |dir: &PathBuf| {
        Command::new("python3")
            .args(["-c", "import prometheus_client.parser"])
            .env("PYTHONPATH", dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if importable(&dir) {
        return dir;
    }
    let mut last = String::new();
    for _ in 0..3 {
        let out = Command::new("python3")
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-input",
                "--target",
            ])
            .arg(&dir)
            .arg(PROMETHEUS_CLIENT)
            .output()
            .expect("run pip");
        if importable(&dir) {
            return dir;
        }
        last = String::from_utf8_lossy(&out.stderr).into_owned();
        std::thread::sleep(Duration::from_secs(2));
    }
    panic!("could not install {PROMETHEUS_CLIENT}: {last}");
}

/// Parses Prometheus text with the reference parser; panics on text it refuses.
fn parse(text: &str) -> Vec<Sample> {
    const SCRIPT: &str = "
import json, sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        print(json.dumps([s.name, s.labels, s.value]))
";
    let mut child = Command::new("python3")
        .args(["-c", SCRIPT])
        .env("PYTHONPATH", prometheus_pythonpath())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the parser");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("feed the parser");
    let out = child.wait_with_output().expect("parser output");
    assert!(
        out.status.success(),
        "the Prometheus parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a sample"))
        .collect()
}

/// The value of the sample `name` whose labels include `labels`; `None` if absent.
pub(crate) fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| {
            n == name
                && labels
                    .iter()
                    .all(|(k, v)| l.get(*k).is_some_and(|got| got == v))
        })
        .map(|(_, _, v)| *v)
}

pub(crate) fn scrape(addr: &str) -> Vec<Sample> {
    let (status, body) = http_get(addr, "/metrics");
    assert_eq!(status, 200, "{body}");
    parse(&body)
}

/// Scrapes until `check` holds (the group coordinator applies commits asynchronously to
/// the client's view), or panics with the last value seen.
fn scrape_until(addr: &str, what: &str, mut check: impl FnMut(&[Sample]) -> bool) -> Vec<Sample> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let samples = scrape(addr);
        if check(&samples) {
            return samples;
        }
        assert!(Instant::now() < deadline, "{what} never held");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn group_consumer(bootstrap: &str) -> BaseConsumer {
    let consumer = consumer(
        bootstrap,
        &[("group.id", "lagging"), ("auto.offset.reset", "earliest")],
    );
    consumer.subscribe(&["lagged"]).expect("subscribe");
    consumer
}

/// Polls until the consumer has read up to `until` (exclusive), then commits `until`.
fn consume_and_commit(consumer: &BaseConsumer, until: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut next = -1;
    while next < until {
        assert!(
            Instant::now() < deadline,
            "consumed only to {next} of {until}"
        );
        if let Some(message) = consumer.poll(Duration::from_millis(100)) {
            let message = message.expect("consume");
            next = next.max(rdkafka::Message::offset(&message) + 1);
        }
    }
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset("lagged", 0, Offset::Offset(until))
        .expect("offsets");
    consumer.commit(&offsets, CommitMode::Sync).expect("commit");
}

#[test]
fn metrics_follow_traffic_and_consumer_lag() {
    let [metrics_port, port] = free_ports();
    let metrics_addr = format!("127.0.0.1:{metrics_port}");
    let broker = Broker::start_on(
        port,
        &[
            "--metrics-listen",
            &metrics_addr,
            "--group-initial-rebalance-delay-ms",
            "0",
        ],
        &[],
    );
    let bootstrap = broker.bootstrap();
    assert_eq!(http_get(&metrics_addr, "/healthz").0, 200);
    assert_eq!(http_get(&metrics_addr, "/readyz").0, 200);
    assert_eq!(http_get(&metrics_addr, "/nowhere").0, 404);

    create_topic(&bootstrap, "lagged", 1, &[]);
    // Records a minute old, so the lag in seconds is unmistakable.
    let now_ms = i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock")
            .as_millis(),
    )
    .expect("millis");
    let batch = |from: usize, count: usize, age_ms: i64| -> Vec<Record> {
        (from..from + count)
            .map(|i| {
                let mut record = Record::new(0, format!("k{i}"), format!("value-{i:04}"));
                record.timestamp = Some(now_ms - age_ms);
                record
            })
            .collect()
    };
    let p = producer(&bootstrap, &[]);
    produce_all(&p, "lagged", &batch(0, 100, 60_000));

    let samples = scrape(&metrics_addr);
    let topic = [("topic", "lagged")];
    let partition = [("topic", "lagged"), ("partition", "0")];
    assert_eq!(
        value(&samples, "logbook_topic_records_in_total", &topic),
        Some(100.0)
    );
    assert!(value(&samples, "logbook_topic_bytes_in_total", &topic).is_some_and(|b| b > 1000.0));
    assert_eq!(
        value(&samples, "logbook_log_end_offset", &partition),
        Some(100.0)
    );
    assert_eq!(
        value(&samples, "logbook_high_watermark", &partition),
        Some(100.0)
    );
    assert_eq!(
        value(&samples, "logbook_log_start_offset", &partition),
        Some(0.0)
    );
    assert!(value(&samples, "logbook_log_size_bytes", &partition).is_some_and(|b| b > 1000.0));
    assert!(
        value(&samples, "logbook_requests_total", &[("api", "Produce")]).is_some_and(|n| n >= 1.0)
    );
    assert!(value(
        &samples,
        "logbook_requests_total",
        &[("api", "CreateTopics")]
    )
    .is_some_and(|n| n >= 1.0));
    assert!(value(
        &samples,
        "logbook_request_processing_seconds_count",
        &[("api", "Produce")]
    )
    .is_some_and(|n| n >= 1.0));
    assert!(value(
        &samples,
        "logbook_request_size_bytes_bucket",
        &[("api", "Produce"), ("le", "+Inf")]
    )
    .is_some_and(|n| n >= 1.0));
    assert!(value(&samples, "logbook_fsync_seconds_count", &[]).is_some_and(|n| n >= 1.0));
    assert!(value(&samples, "logbook_connections_accepted_total", &[]).is_some_and(|n| n >= 1.0));
    assert!(value(&samples, "logbook_connections_active", &[]).is_some_and(|n| n >= 1.0));
    assert_eq!(
        value(&samples, "logbook_under_replicated_partitions", &[]),
        Some(0.0)
    );
    assert_eq!(
        value(&samples, "logbook_under_min_isr_partitions", &[]),
        Some(0.0)
    );
    assert!(value(&samples, "process_resident_memory_bytes", &[]).is_some_and(|b| b > 1e6));
    assert!(value(&samples, "process_open_fds", &[]).is_some_and(|n| n > 5.0));
    // A broker this young may not have used a whole clock tick of CPU yet.
    assert!(value(&samples, "process_cpu_seconds_total", &[]).is_some_and(|s| s >= 0.0));
    let now_s = now_ms as f64 / 1000.0;
    assert!(
        value(&samples, "process_start_time_seconds", &[])
            .is_some_and(|s| (now_s - 600.0..now_s + 5.0).contains(&s)),
        "process_start_time_seconds is not this broker's start"
    );

    // A group consumes 40 records, commits and stops: 60 behind, a minute old.
    let first = group_consumer(&bootstrap);
    consume_and_commit(&first, 40);
    drop(first);
    let group = [
        ("group", "lagging"),
        ("topic", "lagged"),
        ("partition", "0"),
    ];
    let samples = scrape_until(&metrics_addr, "lag of 60", |s| {
        value(s, "logbook_consumer_group_lag", &group) == Some(60.0)
    });
    let seconds =
        value(&samples, "logbook_consumer_group_lag_seconds", &group).expect("lag seconds");
    assert!((59.0..600.0).contains(&seconds), "lag seconds {seconds}");
    assert!(value(&samples, "logbook_topic_records_out_total", &topic).is_some_and(|n| n >= 40.0));
    assert!(value(&samples, "logbook_topic_bytes_out_total", &topic).is_some_and(|b| b > 400.0));
    assert!(
        value(&samples, "logbook_consumer_groups", &[("state", "Empty")]).is_some_and(|n| n >= 1.0)
    );
    // librdkafka joins with an empty member id first: Kafka answers MEMBER_ID_REQUIRED.
    assert!(
        value(
            &samples,
            "logbook_request_errors_total",
            &[("api", "JoinGroup"), ("error", "MEMBER_ID_REQUIRED")]
        )
        .is_some_and(|n| n >= 1.0),
        "no JoinGroup error counted"
    );

    // While the consumer is stopped, more records: the lag rises.
    produce_all(&p, "lagged", &batch(100, 50, 0));
    scrape_until(&metrics_addr, "lag of 110", |s| {
        value(s, "logbook_consumer_group_lag", &group) == Some(110.0)
    });

    // It resumes and catches up: no lag, in records or in seconds.
    let second = group_consumer(&bootstrap);
    consume_and_commit(&second, 150);
    let samples = scrape_until(&metrics_addr, "lag of 0", |s| {
        value(s, "logbook_consumer_group_lag", &group) == Some(0.0)
    });
    assert_eq!(
        value(&samples, "logbook_consumer_group_lag_seconds", &group),
        Some(0.0)
    );
    assert!(
        value(&samples, "logbook_consumer_groups", &[("state", "Stable")])
            .is_some_and(|n| n >= 1.0)
    );
    assert!(value(&samples, "logbook_topic_records_out_total", &topic).is_some_and(|n| n >= 150.0));
    drop(second);
}
