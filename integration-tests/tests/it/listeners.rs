//! Several listeners, as Kafka configures them: each client is answered with the
//! addresses of the listener it connected on (Metadata, FindCoordinator,
//! DescribeCluster), and a client of either listener produces, consumes and commits.
//!
//! The set-up is Docker's classic one: host clients reach the broker as `localhost`,
//! containers by another name; here the second name is `127.0.0.1`, so both resolve.

use std::time::{Duration, Instant};

use integration_tests::{free_port, free_ports, Broker};
use kafka_protocol::messages::{
    DescribeClusterRequest, DescribeClusterResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, MetadataRequest, MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::{Message, TopicPartitionList};

use crate::common::{consumer, create_topic, produce_ok, Record};
use crate::wire::{connect, round_trip};

/// Brokers a Metadata v12 answer lists: (id, host, port).
fn metadata_brokers(addr: std::net::SocketAddr) -> Vec<(i32, String, i32)> {
    let mut stream = connect(addr);
    let response: MetadataResponse = round_trip(&mut stream, 12, 1, &MetadataRequest::default());
    response
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect()
}

/// The group coordinator FindCoordinator v4 names for `group`: (error, host, port).
fn coordinator(addr: std::net::SocketAddr, group: &str) -> (i16, String, i32) {
    let mut stream = connect(addr);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let request = FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![StrBytes::from_string(group.to_owned()).into()]);
        let response: FindCoordinatorResponse = round_trip(&mut stream, 4, 2, &request);
        let c = &response.coordinators[0];
        // The first lookup creates __consumer_offsets; the client retries meanwhile.
        if c.error_code == 15 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        return (c.error_code, c.host.to_string(), c.port);
    }
}

fn describe_cluster_brokers(addr: std::net::SocketAddr) -> Vec<(String, i32)> {
    let mut stream = connect(addr);
    let request = DescribeClusterRequest::default().with_endpoint_type(1);
    let response: DescribeClusterResponse = round_trip(&mut stream, 1, 3, &request);
    assert_eq!(response.error_code, 0);
    response
        .brokers
        .iter()
        .map(|b| (b.host.to_string(), b.port))
        .collect()
}

#[test]
fn each_listener_answers_with_its_own_advertised_address() {
    // Proves: with listeners PLAINTEXT (advertised localhost) and INTERNAL (advertised
    // 127.0.0.1, the inter-broker listener), Metadata, FindCoordinator and DescribeCluster
    // on each port name the broker at that listener's advertised address and no other;
    // records produced through one listener are consumed, and their offsets committed,
    // through the other, and the commit is read back through the first.
    let [outer, inner] = free_ports();
    let listeners = format!("listeners=PLAINTEXT://127.0.0.1:{outer},INTERNAL://127.0.0.1:{inner}");
    let advertised =
        format!("advertised.listeners=PLAINTEXT://localhost:{outer},INTERNAL://127.0.0.1:{inner}");
    let _broker = Broker::start_on(
        outer,
        &[
            "--node-id",
            "3",
            "--override",
            &listeners,
            "--override",
            &advertised,
            "--override",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "--override",
            "inter.broker.listener.name=INTERNAL",
        ],
        &[],
    );
    let outer_addr: std::net::SocketAddr = format!("127.0.0.1:{outer}").parse().expect("addr");
    let inner_addr: std::net::SocketAddr = format!("127.0.0.1:{inner}").parse().expect("addr");

    assert_eq!(
        metadata_brokers(outer_addr),
        [(3, "localhost".to_owned(), i32::from(outer))]
    );
    assert_eq!(
        metadata_brokers(inner_addr),
        [(3, "127.0.0.1".to_owned(), i32::from(inner))]
    );
    assert_eq!(
        coordinator(inner_addr, "listeners-group"),
        (0, "127.0.0.1".to_owned(), i32::from(inner))
    );
    assert_eq!(
        coordinator(outer_addr, "listeners-group"),
        (0, "localhost".to_owned(), i32::from(outer))
    );
    assert_eq!(
        describe_cluster_brokers(outer_addr),
        [("localhost".to_owned(), i32::from(outer))]
    );
    assert_eq!(
        describe_cluster_brokers(inner_addr),
        [("127.0.0.1".to_owned(), i32::from(inner))]
    );

    // librdkafka follows the advertised address of the listener it bootstrapped from.
    let outer_bootstrap = format!("localhost:{outer}");
    let inner_bootstrap = format!("127.0.0.1:{inner}");
    create_topic(&outer_bootstrap, "two-doors", 1, &[]);
    let records: Vec<Record> = (0..10)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    let acked = produce_ok(&outer_bootstrap, "two-doors", &records, &[]);
    assert_eq!(acked.last(), Some(&(0, 9)));

    let group = [("group.id", "listeners-group")];
    let inner_consumer = consumer(&inner_bootstrap, &group);
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset("two-doors", 0, rdkafka::Offset::Beginning)
        .expect("assignment");
    inner_consumer.assign(&assignment).expect("assign");
    let mut values = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while values.len() < 10 {
        assert!(Instant::now() < deadline, "consumed only {values:?}");
        if let Some(message) = inner_consumer.poll(Duration::from_millis(100)) {
            let message = message.expect("consume through INTERNAL");
            values.push(String::from_utf8_lossy(message.payload().expect("value")).into_owned());
        }
    }
    let expected: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    assert_eq!(values, expected);
    let mut commit = TopicPartitionList::new();
    commit
        .add_partition_offset("two-doors", 0, rdkafka::Offset::Offset(10))
        .expect("commit list");
    inner_consumer
        .commit(&commit, CommitMode::Sync)
        .expect("commit through INTERNAL");

    let outer_consumer = consumer(&outer_bootstrap, &group);
    let committed = outer_consumer
        .committed_offsets(commit, Duration::from_secs(10))
        .expect("committed offsets through PLAINTEXT");
    let offset = committed
        .find_partition("two-doors", 0)
        .expect("partition")
        .offset();
    assert_eq!(offset, rdkafka::Offset::Offset(10));
}

#[test]
fn listener_settings_that_break_kafkas_rules_stop_the_broker() {
    // Proves: an advertised listener that is not a listener, and a listener without a
    // security protocol, each stop the broker at start with Kafka's message.
    for (overrides, expected) in [
        (
            vec!["advertised.listeners=SSL://127.0.0.1:1".to_owned()],
            "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners",
        ),
        (
            vec!["listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0".to_owned()],
            "listener INTERNAL has no security protocol",
        ),
    ] {
        let mut args = vec!["--data-dir".to_owned(), "/nonexistent-never-used".to_owned()];
        for o in &overrides {
            args.push("--override".to_owned());
            args.push(o.clone());
        }
        let output = std::process::Command::new(integration_tests::broker_binary())
            .args(&args)
            .output()
            .expect("run the broker");
        assert!(!output.status.success(), "{overrides:?} started");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{overrides:?}: {stderr}");
    }
}

#[test]
fn testcontainers_kafka_environment_starts_a_broker_that_says_it_runs() {
    // Proves: the environment Testcontainers' KafkaContainer (Java, 1.21) sets for
    // apache/kafka (KafkaHelper.envVars: three listeners with a CONTROLLER one, combined
    // roles, a one-voter quorum on it, CLUSTER_ID, the internal topics' settings, an
    // unbounded log.flush.interval.messages) plus the KAFKA_ADVERTISED_LISTENERS its start
    // script exports, with the ports moved to free ones, starts the broker; it prints the
    // readiness lines the Java and Rust modules wait for, Metadata on the PLAINTEXT port
    // names the advertised address, and a client produces and consumes there.
    let [plain, broker_port, controller] = free_ports();
    let listeners = format!(
        "PLAINTEXT://0.0.0.0:{plain},BROKER://0.0.0.0:{broker_port},CONTROLLER://0.0.0.0:{controller}"
    );
    let advertised = format!("PLAINTEXT://127.0.0.1:{plain},BROKER://localhost:{broker_port}");
    let voters = format!("1@localhost:{controller}");
    let max = i64::MAX.to_string();
    let broker = Broker::start_on(
        plain,
        &[],
        &[
            ("CLUSTER_ID", "4L6g3nShT-eMCtK--X86sw"),
            ("KAFKA_LISTENERS", &listeners),
            (
                "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP",
                "BROKER:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            ),
            ("KAFKA_INTER_BROKER_LISTENER_NAME", "BROKER"),
            ("KAFKA_PROCESS_ROLES", "broker,controller"),
            ("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER"),
            ("KAFKA_NODE_ID", "1"),
            ("KAFKA_CONTROLLER_QUORUM_VOTERS", &voters),
            ("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1"),
            ("KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS", "1"),
            ("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1"),
            ("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1"),
            ("KAFKA_LOG_FLUSH_INTERVAL_MESSAGES", &max),
            ("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0"),
            ("KAFKA_ADVERTISED_LISTENERS", &advertised),
        ],
    );
    for line in [
        "Transitioning from RECOVERY to RUNNING",
        "Kafka Server started",
    ] {
        assert!(
            broker.wait_for_log(line, Duration::from_secs(5)),
            "no {line:?}\n{}",
            broker.log_tail()
        );
    }
    let addr: std::net::SocketAddr = format!("127.0.0.1:{plain}").parse().expect("addr");
    assert_eq!(
        metadata_brokers(addr),
        [(1, "127.0.0.1".to_owned(), i32::from(plain))]
    );
    crate::common::assert_round_trip(&broker.bootstrap(), "testcontainers");
}

#[test]
fn a_config_file_copied_in_after_start_sets_the_advertised_listener() {
    // Proves: with --config-wait-ms the broker waits for its --config file (as a
    // Testcontainers module copies it into a shell-less container once it knows the mapped
    // port), binds nothing meanwhile, then serves with the file's advertised.listeners:
    // Metadata names the advertised host and port. Without the file in time it stops with
    // the reason.
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("late.properties");
    let port = free_port();
    let late = path.clone();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let bound = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
        std::fs::write(
            &late,
            "advertised.listeners=PLAINTEXT://mapped.example:32771\n",
        )
        .expect("write the late config");
        bound
    });
    let broker = Broker::start_on(
        port,
        &[
            "--config",
            path.to_str().expect("path"),
            "--config-wait-ms",
            "20000",
        ],
        &[],
    );
    assert!(
        !writer.join().expect("writer"),
        "the port was bound before the config file came"
    );
    assert_eq!(
        metadata_brokers(broker.addr()),
        vec![(1, "mapped.example".to_string(), 32771)]
    );
    assert!(broker.log().contains("waiting for config file"));

    let missing = dir.path().join("never.properties");
    let output = std::process::Command::new(integration_tests::broker_binary())
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&missing)
        .args(["--config-wait-ms", "300"])
        .output()
        .expect("run logbook");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("did not appear within --config-wait-ms 300"),
        "{stderr}"
    );
}
