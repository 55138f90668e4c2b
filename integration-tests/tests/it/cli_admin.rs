//! The admin tools (issue 12): `logbook topic`, `logbook group` and `logbook cluster` run
//! as a user runs them, against the real broker; what they print (tables and JSON), what
//! they change (checked with rdkafka), and their exit statuses for a missing topic or
//! group, a refusal and an unreachable broker.

use std::process::Output;
use std::time::{Duration, Instant};

use integration_tests::{free_port, Broker};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{json, Value};

use crate::common::{consumer, create_topic, produce_all, producer, Record};

/// Runs `logbook ARGS…` against `bootstrap`.
fn logbook(bootstrap: &str, args: &[&str]) -> Output {
    std::process::Command::new(integration_tests::broker_binary())
        .args(args)
        .args(["-b", bootstrap])
        .output()
        .expect("run logbook")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs a tool that must succeed; returns its stdout.
fn ok(bootstrap: &str, args: &[&str]) -> String {
    let out = logbook(bootstrap, args);
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
    stdout(&out)
}

/// Runs a tool with `--json`; returns the parsed object.
fn ok_json(bootstrap: &str, args: &[&str]) -> Value {
    let mut with_json = args.to_vec();
    with_json.push("--json");
    serde_json::from_str(&ok(bootstrap, &with_json)).expect("JSON output")
}

/// Runs a tool that must fail with `code`; returns its stderr.
fn fails(bootstrap: &str, args: &[&str], code: i32) -> String {
    let out = logbook(bootstrap, args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "{args:?}: {}{}",
        stdout(&out),
        stderr(&out)
    );
    stderr(&out)
}

#[test]
fn topic_tool_creates_describes_changes_and_deletes() {
    let broker = Broker::start();
    let b = broker.bootstrap();
    assert_eq!(
        ok(
            &b,
            &[
                "topic",
                "create",
                "orders",
                "--partitions",
                "3",
                "-c",
                "cleanup.policy=compact"
            ]
        ),
        "Created topic orders.\n"
    );
    let err = fails(&b, &["topic", "create", "orders"], 1);
    assert!(
        err.contains("Topic 'orders' already exists.") && err.contains("TOPIC_ALREADY_EXISTS"),
        "{err}"
    );
    assert_eq!(
        ok(&b, &["topic", "list"]),
        "NAME    PARTITIONS  REPLICAS\norders  3           1\n"
    );
    let described = ok_json(&b, &["topic", "describe", "orders"]);
    assert_eq!(described["topic"], "orders");
    assert_eq!(described["partitions"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        described["partitions"][1],
        json!({"partition": 1, "leader": 1, "leader_epoch": 0, "replicas": [1], "isr": [1],
               "offline_replicas": [], "error": null})
    );
    assert_eq!(
        described["configs"]["cleanup.policy"],
        json!({"value": "compact", "source": "topic"})
    );
    let table = ok(&b, &["topic", "describe", "orders"]);
    assert!(
        table.contains("PARTITION  LEADER  EPOCH  REPLICAS  ISR  OFFLINE\n0          1       0      1         1\n")
            && table.contains("cleanup.policy  compact"),
        "{table}"
    );

    ok(
        &b,
        &[
            "topic",
            "alter-config",
            "orders",
            "--set",
            "retention.ms=3600000",
            "--delete",
            "cleanup.policy",
        ],
    );
    let described = ok_json(&b, &["topic", "describe", "orders"]);
    assert_eq!(
        described["configs"]["retention.ms"],
        json!({"value": "3600000", "source": "topic"})
    );
    assert_eq!(described["configs"]["cleanup.policy"]["source"], "default");
    let err = fails(
        &b,
        &[
            "topic",
            "alter-config",
            "orders",
            "--set",
            "cleanup.policy=shred",
        ],
        1,
    );
    assert!(err.contains("INVALID_CONFIG"), "{err}");

    assert_eq!(
        ok(&b, &["topic", "add-partitions", "orders", "--total", "5"]),
        "Topic orders now has 5 partitions.\n"
    );
    let err = fails(
        &b,
        &["topic", "add-partitions", "orders", "--total", "2"],
        1,
    );
    assert!(err.contains("INVALID_PARTITIONS"), "{err}");
    assert_eq!(
        ok_json(&b, &["topic", "list"]),
        json!([{"topic": "orders", "partitions": 5, "replication_factor": 1, "internal": false}])
    );

    assert_eq!(
        ok(&b, &["topic", "delete", "orders"]),
        "Deleted topic orders.\n"
    );
    for args in [
        &["topic", "describe", "orders"][..],
        &["topic", "delete", "orders"],
        &["topic", "alter-config", "orders", "--set", "retention.ms=1"],
    ] {
        let err = fails(&b, args, 1);
        assert!(
            err.contains("UNKNOWN_TOPIC_OR_PARTITION") && err.contains("orders"),
            "{args:?}: {err}"
        );
    }
    // Bad usage is clap's 2; nobody listening is 3.
    fails(&b, &["topic", "create"], 2);
    let nobody = format!("127.0.0.1:{}", free_port());
    let err = fails(&nobody, &["topic", "list"], 3);
    assert!(err.contains("no bootstrap server answered"), "{err}");
}

/// Commits `offset` for `group` on lagged-0 as a consumer with no group membership would.
fn commit(bootstrap: &str, group: &str, offset: i64) {
    let c = consumer(bootstrap, &[("group.id", group)]);
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset("lagged", 0, Offset::Offset(offset))
        .expect("offsets");
    c.commit(&offsets, CommitMode::Sync).expect("commit");
}

/// The offset `group` has committed on lagged-0, as rdkafka reads it.
fn committed(bootstrap: &str, group: &str) -> Offset {
    let c = consumer(bootstrap, &[("group.id", group)]);
    let mut wanted = TopicPartitionList::new();
    wanted.add_partition("lagged", 0);
    let got = c
        .committed_offsets(wanted, Duration::from_secs(10))
        .expect("committed offsets");
    got.find_partition("lagged", 0).expect("partition").offset()
}

#[test]
fn group_tool_lists_describes_resets_and_deletes() {
    let broker = Broker::start_with(&["--group-initial-rebalance-delay-ms", "0"]);
    let b = broker.bootstrap();
    create_topic(&b, "lagged", 1, &[]);
    let records: Vec<Record> = (0..100)
        .map(|i| {
            let mut r = Record::new(0, format!("k{i}"), format!("v{i}"));
            r.timestamp = Some(1_700_000_000_000 + i * 1000);
            r
        })
        .collect();
    produce_all(&producer(&b, &[]), "lagged", &records);
    commit(&b, "readers", 40);

    assert_eq!(
        ok_json(&b, &["group", "list"]),
        json!([{"group": "readers", "state": "Empty", "protocol_type": ""}])
    );
    let described = ok_json(&b, &["group", "describe", "readers"]);
    assert_eq!(described["state"], "Empty");
    assert_eq!(
        described["partitions"],
        json!([{"topic": "lagged", "partition": 0, "committed_offset": 40, "log_end_offset": 100,
                "lag": 60, "member_id": null, "client_id": null, "host": null}])
    );
    let table = ok(&b, &["group", "describe", "readers"]);
    assert!(
        table.contains("TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  CONSUMER-ID  HOST  CLIENT-ID\nlagged  0          40              100             60   -            -     -"),
        "{table}"
    );

    // A dry run changes nothing; --execute commits.
    let plan = ok_json(
        &b,
        &[
            "group",
            "reset-offsets",
            "readers",
            "--topic",
            "lagged",
            "--to-offset",
            "10",
        ],
    );
    assert_eq!(plan["executed"], false);
    assert_eq!(plan["partitions"][0]["new_offset"], 10);
    assert_eq!(committed(&b, "readers"), Offset::Offset(40));
    ok(
        &b,
        &[
            "group",
            "reset-offsets",
            "readers",
            "--topic",
            "lagged",
            "--to-offset",
            "10",
            "--execute",
        ],
    );
    assert_eq!(committed(&b, "readers"), Offset::Offset(10));
    ok(
        &b,
        &[
            "group",
            "reset-offsets",
            "readers",
            "--all-topics",
            "--shift-by",
            "-3",
            "--execute",
        ],
    );
    assert_eq!(committed(&b, "readers"), Offset::Offset(7));
    ok(
        &b,
        &[
            "group",
            "reset-offsets",
            "readers",
            "--topic",
            "lagged:0",
            "--to-latest",
            "--execute",
        ],
    );
    assert_eq!(committed(&b, "readers"), Offset::Offset(100));
    // Record i is stamped 1_700_000_000_000 + i seconds: the first at or after +25.5 s is 26.
    ok(
        &b,
        &[
            "group",
            "reset-offsets",
            "readers",
            "--topic",
            "lagged",
            "--to-datetime",
            "2023-11-14T22:13:45.500Z",
            "--execute",
        ],
    );
    assert_eq!(committed(&b, "readers"), Offset::Offset(26));
    ok(
        &b,
        &[
            "group",
            "reset-offsets",
            "readers",
            "--topic",
            "lagged",
            "--to-earliest",
            "--execute",
        ],
    );
    assert_eq!(committed(&b, "readers"), Offset::Offset(0));

    // A group with a live member is not reset, as Kafka's tool refuses.
    let member: BaseConsumer = consumer(
        &b,
        &[("group.id", "active"), ("auto.offset.reset", "earliest")],
    );
    member.subscribe(&["lagged"]).expect("subscribe");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ok(&b, &["group", "list"]).contains("Stable") {
        assert!(Instant::now() < deadline, "the group never became Stable");
        let _ = member.poll(Duration::from_millis(100));
    }
    let err = fails(
        &b,
        &[
            "group",
            "reset-offsets",
            "active",
            "--topic",
            "lagged",
            "--to-earliest",
            "--execute",
        ],
        1,
    );
    assert!(
        err.contains(
            "can only be reset if the group 'active' is inactive, but the current state is Stable"
        ),
        "{err}"
    );
    let described = ok_json(&b, &["group", "describe", "active"]);
    assert_eq!(described["members"], 1);
    assert!(
        described["partitions"][0]["member_id"].is_string(),
        "{described}"
    );
    let err = fails(&b, &["group", "delete", "active"], 1);
    assert!(err.contains("NON_EMPTY_GROUP"), "{err}");
    drop(member);

    assert_eq!(
        ok(&b, &["group", "delete", "readers"]),
        "Deleted group readers.\n"
    );
    let err = fails(&b, &["group", "describe", "readers"], 1);
    assert!(err.contains("readers"), "{err}");
    let err = fails(&b, &["group", "delete", "never-was"], 1);
    assert!(err.contains("GROUP_ID_NOT_FOUND"), "{err}");
    fails(&format!("127.0.0.1:{}", free_port()), &["group", "list"], 3);
}

#[test]
fn cluster_tool_names_the_cluster() {
    let broker = Broker::start();
    let b = broker.bootstrap();
    let info = ok_json(&b, &["cluster", "info"]);
    assert!(
        info["cluster_id"].as_str().is_some_and(|id| id.len() >= 16),
        "{info}"
    );
    assert_eq!(info["controller"], 1);
    assert_eq!(
        info["brokers"],
        json!([{"id": 1, "host": "127.0.0.1", "port": broker.addr().port(), "rack": null}])
    );
    let table = ok(&b, &["cluster", "info"]);
    assert!(
        table.contains(&format!("1   127.0.0.1  {}  -", broker.addr().port())),
        "{table}"
    );
    fails(
        &format!("127.0.0.1:{}", free_port()),
        &["cluster", "info"],
        3,
    );
}
