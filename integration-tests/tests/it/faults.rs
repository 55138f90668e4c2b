//! The fault injector (issue 27): `--fault-injection` serves `/faults` on the metrics
//! listener, driven here with `logbook fault …` as a user would, and librdkafka (the Rust
//! `rdkafka` crate) meets each fault the way it meets Kafka's real failure: retries,
//! metadata refreshes, idempotent dedup, rejoins, fencing. franz-go and the Java client
//! meet them in `scripts/fault-clients-test` ([`franz_go_and_java_clients_meet_injected_faults`]).

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use integration_tests::{broker_binary, free_ports, Broker};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::ClientContext;

use crate::common::{
    consume, create_topic, produce_all, producer, run_script, Record, CLIENT_TIMEOUT,
};

/// A broker with the fault injector on, and its admin URL.
pub struct FaultyBroker {
    pub broker: Broker,
    pub url: String,
}

impl FaultyBroker {
    pub fn start() -> Self {
        // Both ports at once: two `free_port()` calls may hand back the same port.
        let [metrics_port, port] = free_ports();
        let metrics = format!("127.0.0.1:{metrics_port}");
        let broker = Broker::start_on(
            port,
            &[
                "--metrics-listen",
                &metrics,
                "--fault-injection",
                "--group-initial-rebalance-delay-ms",
                "0",
            ],
            &[],
        );
        Self {
            broker,
            url: format!("http://{metrics}"),
        }
    }

    /// `logbook fault --url … args`: exit code and stdout (stderr appended).
    pub fn fault(&self, args: &[&str]) -> (i32, String) {
        fault_cli(&self.url, args)
    }

    /// `logbook fault … args`, which must succeed; its JSON answer.
    pub fn arm(&self, args: &[&str]) -> serde_json::Value {
        let (code, out) = self.fault(args);
        assert_eq!(code, 0, "logbook fault {args:?}: {out}");
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{out}: {e}"))
    }

    /// How often fault `id` acted, from `logbook fault list`.
    pub fn injected(&self, id: u64) -> u64 {
        let list = self.arm(&["list"]);
        list.as_array()
            .expect("a list")
            .iter()
            .find(|f| f["id"] == id)
            .and_then(|f| f["injected"].as_u64())
            .unwrap_or_else(|| panic!("fault {id} not listed: {list}"))
    }
}

fn fault_cli(url: &str, args: &[&str]) -> (i32, String) {
    let output = Command::new(broker_binary())
        .arg("fault")
        .arg("--url")
        .arg(url)
        .args(args)
        .output()
        .expect("run logbook fault");
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.code().unwrap_or(-1), text)
}

fn id_of(armed: &serde_json::Value) -> u64 {
    armed["id"].as_u64().expect("an id")
}

fn records(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect()
}

fn values(consumed: &[crate::common::Consumed]) -> Vec<(i64, String)> {
    consumed
        .iter()
        .map(|c| {
            (
                c.offset,
                String::from_utf8_lossy(c.value.as_deref().unwrap_or_default()).into_owned(),
            )
        })
        .collect()
}

fn expected(n: usize) -> Vec<(i64, String)> {
    (0..n).map(|i| (i as i64, format!("v{i}"))).collect()
}

#[test]
fn the_fault_api_is_off_without_the_flag_and_refuses_bad_specs() {
    // Proves: without --fault-injection, /faults answers 404 and `logbook fault` exits 1
    // saying how to turn it on; --fault-injection without --metrics-listen stops the
    // start; with the flag, an incomplete spec is refused (400, exit 1) with the reason,
    // and `clear` of an unknown id is refused.
    let [metrics_port, port, unused] = free_ports();
    let metrics = format!("127.0.0.1:{metrics_port}");
    let _plain = Broker::start_on(port, &["--metrics-listen", &metrics], &[]);
    let (code, out) = fault_cli(&format!("http://{metrics}"), &["list"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("fault injection is off"), "{out}");

    let status = Command::new(broker_binary())
        .args([
            "--fault-injection",
            "--listen",
            &format!("127.0.0.1:{unused}"),
        ])
        .arg("--data-dir")
        .arg(tempfile::tempdir().expect("dir").path())
        .output()
        .expect("run logbook");
    assert!(!status.status.success());
    assert!(
        String::from_utf8_lossy(&status.stderr)
            .contains("--fault-injection needs --metrics-listen"),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );

    let faulty = FaultyBroker::start();
    let (code, out) = faulty.fault(&["add", "--kind", "error", "--api", "Produce"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("an error fault needs error"), "{out}");
    let (code, out) = faulty.fault(&[
        "add",
        "--kind",
        "error",
        "--api",
        "DescribeAcls",
        "--error",
        "7",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("error faults are served for"), "{out}");
    let (code, out) = faulty.fault(&["clear", "99"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no fault 99"), "{out}");
    assert_eq!(faulty.arm(&["list"]), serde_json::json!([]));
}

#[test]
fn produce_errors_are_retried_and_a_timed_out_produce_is_deduplicated() {
    // Proves: NOT_LEADER_OR_FOLLOWER on partition 0 for 3 requests makes librdkafka's
    // idempotent producer refresh metadata and retry: all 10 records land once, at offsets
    // 0..9 in order, and the fault acted exactly 3 times. Then a Produce delayed 3 s past
    // the producer's 1 s request timeout: librdkafka resends the batch, the broker's
    // idempotent dedup answers the resend with the first write's offsets, and the topic
    // holds each record once (offsets 10..19). The metrics count both faults.
    let faulty = FaultyBroker::start();
    let bootstrap = faulty.broker.bootstrap();
    create_topic(&bootstrap, "faulted", 1, &[]);
    let armed = faulty.arm(&[
        "add",
        "--kind",
        "error",
        "--api",
        "Produce",
        "--topic",
        "faulted",
        "--partition",
        "0",
        "--error",
        "NOT_LEADER_OR_FOLLOWER",
        "--count",
        "3",
    ]);
    assert_eq!(armed["armed"], true, "{armed}");
    let p = producer(
        &bootstrap,
        &[("enable.idempotence", "true"), ("linger.ms", "0")],
    );
    let first: Vec<Record> = records(10);
    for (i, d) in produce_all(&p, "faulted", &first).iter().enumerate() {
        assert!(d.result.is_ok(), "record {i}: {:?}", d.result);
    }
    assert_eq!(faulty.injected(id_of(&armed)), 3);
    assert!(faulty.broker.wait_for_log(
        "fault injection: partition answered with an error",
        Duration::from_secs(5)
    ));
    let consumed = consume(&bootstrap, "faulted", 0, 0, 10, &[]);
    assert_eq!(values(&consumed), expected(10));

    faulty.arm(&["clear"]);
    let delayed = faulty.arm(&[
        "add",
        "--kind",
        "delay",
        "--api",
        "Produce",
        "--delay-ms",
        "3000",
        "--count",
        "1",
    ]);
    let slow = producer(
        &bootstrap,
        &[
            ("enable.idempotence", "true"),
            ("request.timeout.ms", "1000"),
            ("message.timeout.ms", "30000"),
            ("linger.ms", "50"),
        ],
    );
    let second: Vec<Record> = (10..20)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    let deliveries = produce_all(&slow, "faulted", &second);
    for d in &deliveries {
        assert!(d.result.is_ok(), "record {}: {:?}", d.index, d.result);
    }
    assert_eq!(faulty.injected(id_of(&delayed)), 1);
    let all = consume(&bootstrap, "faulted", 0, 0, 20, &[]);
    assert_eq!(values(&all), expected(20));
    let metrics = crate::metrics::scrape(&faulty.url.trim_start_matches("http://"));
    let error = crate::metrics::value(
        &metrics,
        "logbook_faults_injected_total",
        &[("kind", "error")],
    );
    let delay = crate::metrics::value(
        &metrics,
        "logbook_faults_injected_total",
        &[("kind", "delay")],
    );
    assert_eq!((error, delay), (Some(3.0), Some(1.0)));
}

#[test]
fn an_unavailable_partition_holds_producers_until_it_is_back() {
    // Proves: while partition_unavailable holds, Metadata answers the partition with
    // LEADER_NOT_AVAILABLE and no leader, and a produce is not acknowledged (librdkafka
    // keeps retrying); once the fault is cleared the same record lands at offset 0, once,
    // within its message timeout.
    let faulty = FaultyBroker::start();
    let bootstrap = faulty.broker.bootstrap();
    create_topic(&bootstrap, "moving", 1, &[]);
    let armed = faulty.arm(&[
        "add",
        "--kind",
        "partition_unavailable",
        "--topic",
        "moving",
    ]);

    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "60000")
        .create()
        .expect("producer");
    let metadata = p
        .client()
        .fetch_metadata(Some("moving"), CLIENT_TIMEOUT)
        .expect("metadata");
    let partition = &metadata.topics()[0].partitions()[0];
    assert_eq!(partition.leader(), -1);
    assert_eq!(
        partition.error().map(RDKafkaErrorCode::from),
        Some(RDKafkaErrorCode::LeaderNotAvailable)
    );

    p.send(BaseRecord::to("moving").key("k").payload("while gone"))
        .expect("queue");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(2) {
        p.poll(Duration::from_millis(100));
    }
    assert_eq!(
        p.in_flight_count(),
        1,
        "acknowledged while the partition had no leader"
    );
    assert!(faulty.broker.log().contains("fault injection: fault armed"));
    assert!(
        faulty.injected(id_of(&armed)) >= 1,
        "the leaderless Metadata answers are counted"
    );

    faulty.arm(&["clear", &id_of(&armed).to_string()]);
    p.flush(CLIENT_TIMEOUT)
        .expect("delivered once the leader is back");
    let consumed = consume(&bootstrap, "moving", 0, 0, 1, &[]);
    assert_eq!(values(&consumed), vec![(0, "while gone".to_string())]);
    assert!(faulty
        .broker
        .wait_for_log("fault injection: faults cleared", Duration::from_secs(5)));
}

/// Counts the assignments a consumer's rebalances hand it.
#[derive(Default, Clone)]
struct Rebalances(Arc<AtomicUsize>);

impl ClientContext for Rebalances {}

impl ConsumerContext for Rebalances {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if matches!(rebalance, Rebalance::Assign(_)) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn coordinator_errors_dropped_fetches_and_a_forced_rebalance_leave_a_group_consuming() {
    // Proves: COORDINATOR_NOT_AVAILABLE on the group's FindCoordinator (3 times) and on its
    // JoinGroup (2 times) delay librdkafka's group join but it joins; a Fetch connection
    // dropped twice is reconnected; a forced rebalance makes the member rejoin (a second
    // assignment). Throughout, the consumer reads the 20 records once, in order.
    let faulty = FaultyBroker::start();
    let bootstrap = faulty.broker.bootstrap();
    create_topic(&bootstrap, "grouped", 1, &[]);
    let p = producer(&bootstrap, &[]);
    for d in produce_all(&p, "grouped", &records(10)) {
        assert!(d.result.is_ok());
    }
    let find = faulty.arm(&[
        "add",
        "--kind",
        "error",
        "--api",
        "FindCoordinator",
        "--group",
        "g1",
        "--error",
        "COORDINATOR_NOT_AVAILABLE",
        "--count",
        "3",
    ]);
    let join = faulty.arm(&[
        "add",
        "--kind",
        "error",
        "--api",
        "JoinGroup",
        "--group",
        "g1",
        "--error",
        "COORDINATOR_NOT_AVAILABLE",
        "--count",
        "2",
    ]);
    let dropped = faulty.arm(&[
        "add",
        "--kind",
        "drop_connection",
        "--api",
        "Fetch",
        "--count",
        "2",
    ]);

    let context = Rebalances::default();
    let consumer: BaseConsumer<Rebalances> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "g1")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "10000")
        .set("heartbeat.interval.ms", "200")
        .create_with_context(context.clone())
        .expect("consumer");
    consumer.subscribe(&["grouped"]).expect("subscribe");
    let mut seen: Vec<(i64, String)> = Vec::new();
    let poll_until = |seen: &mut Vec<(i64, String)>, n: usize, what: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while seen.len() < n {
            assert!(Instant::now() < deadline, "{what}: read {seen:?}");
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => seen.push((
                    m.offset(),
                    String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
                )),
                Some(Err(KafkaError::MessageConsumption(_))) | None => {}
                Some(Err(e)) => panic!("{what}: {e}"),
            }
        }
    };
    poll_until(&mut seen, 10, "first 10");
    assert_eq!(faulty.injected(id_of(&find)), 3);
    assert_eq!(faulty.injected(id_of(&join)), 2);
    assert_eq!(faulty.injected(id_of(&dropped)), 2);
    assert_eq!(context.0.load(Ordering::SeqCst), 1);

    let forced = faulty.arm(&["rebalance", "--group", "g1"]);
    assert_eq!(forced["outcome"], "group g1 is rebalancing", "{forced}");
    for d in produce_all(&p, "grouped", &records(20)[10..]) {
        assert!(d.result.is_ok());
    }
    poll_until(&mut seen, 20, "after the forced rebalance");
    let deadline = Instant::now() + Duration::from_secs(15);
    while context.0.load(Ordering::SeqCst) < 2 {
        assert!(Instant::now() < deadline, "no second assignment");
        consumer.poll(Duration::from_millis(100));
    }
    assert_eq!(seen, expected(20));
    assert!(faulty.broker.wait_for_log(
        "fault injection: group forced to rebalance",
        Duration::from_secs(5)
    ));
    assert!(faulty
        .broker
        .log()
        .contains("fault injection: connection dropped"));
}

#[test]
fn a_fenced_transactional_producer_cannot_commit_and_its_records_stay_hidden() {
    // Proves: `logbook fault fence` bumps the transactional id's epoch while a librdkafka
    // transaction is open: the open transaction is aborted, the producer's commit fails as
    // fenced (fatal), a read_committed consumer sees none of its records, and the fence
    // reports the new epoch. A committed transaction before the fence stays visible.
    let faulty = FaultyBroker::start();
    let bootstrap = faulty.broker.bootstrap();
    create_topic(&bootstrap, "txn-out", 1, &[]);
    let p: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("transactional.id", "tx-fenced")
        .set("transaction.timeout.ms", "60000")
        .create()
        .expect("producer");
    p.init_transactions(CLIENT_TIMEOUT).expect("init");
    p.begin_transaction().expect("begin");
    p.send(BaseRecord::to("txn-out").key("a").payload("committed"))
        .expect("send");
    p.commit_transaction(CLIENT_TIMEOUT).expect("commit");

    p.begin_transaction().expect("begin");
    for i in 0..3 {
        p.send(
            BaseRecord::to("txn-out")
                .key("b")
                .payload(&format!("fenced-{i}")),
        )
        .expect("send");
    }
    p.flush(CLIENT_TIMEOUT).expect("flush");
    let fenced = faulty.arm(&["fence", "--transactional-id", "tx-fenced"]);
    let outcome = fenced["outcome"].as_str().expect("outcome");
    let epochs: Vec<i64> = outcome
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("number"))
        .collect();
    assert!(
        outcome.contains("is at epoch") && epochs.len() == 3 && epochs[1] > epochs[2],
        "{fenced}"
    );
    let commit = p.commit_transaction(CLIENT_TIMEOUT);
    let error = commit.expect_err("a fenced producer must not commit");
    let KafkaError::Transaction(e) = &error else {
        panic!("{error:?}")
    };
    assert!(e.is_fatal(), "{e:?}");
    assert!(
        matches!(
            e.code(),
            RDKafkaErrorCode::Fenced
                | RDKafkaErrorCode::ProducerFenced
                | RDKafkaErrorCode::InvalidProducerEpoch
        ),
        "{e:?}"
    );
    let consumed = consume(
        &bootstrap,
        "txn-out",
        0,
        0,
        1,
        &[("isolation.level", "read_committed")],
    );
    assert_eq!(values(&consumed), vec![(0, "committed".to_string())]);
    // The aborted transaction's records are there (offsets 2..4) but hidden: the next
    // committed-visible position is past the abort marker.
    let c = crate::common::consumer(&bootstrap, &[("isolation.level", "read_committed")]);
    let (_, high) = c
        .fetch_watermarks("txn-out", 0, CLIENT_TIMEOUT)
        .expect("watermarks");
    assert_eq!(
        high, 6,
        "commit marker, 3 records and the abort marker after offset 0"
    );
    assert!(faulty.broker.wait_for_log(
        "fault injection: transactional producer fenced",
        Duration::from_secs(5)
    ));
}

#[test]
fn franz_go_and_java_clients_meet_injected_faults() {
    // Proves (scripts/fault-clients-test): franz-go's and Java kafka-clients' own probes,
    // each against a broker of its own with --fault-injection, see every fault as they see
    // Kafka's real failure, with exact records and offsets.
    run_script(
        "fault-clients-test",
        &[],
        "fault-clients-test: 2 passed, 0 failed",
    );
}
