//! The cluster harness (`integration_tests::cluster`) and the cluster flags, proven before
//! Logbook can form a cluster: process management on N independent single-node brokers,
//! and the refusal of inconsistent cluster settings.

use std::process::{Command, Stdio};
use std::time::Duration;

use integration_tests::broker_binary;
use integration_tests::cluster::{leader_of, metadata, wait_until, Cluster, ClusterSpec};

use crate::common::{consume, produce_ok, Record};

const TIMEOUT: Duration = Duration::from_secs(20);

// Three independent nodes each serve with their own node id, port and data directory;
// SIGKILL stops one (its port refuses), restart brings it back on the same port with its
// data; SIGSTOP makes one answer nothing until SIGCONT; SIGTERM exits cleanly. Leader and
// broker look-ups go through a client's Metadata request.
#[test]
fn harness_manages_independent_nodes() {
    let mut cluster = Cluster::start(&ClusterSpec::independent(3));
    assert_eq!(cluster.voters(), "");
    for node in cluster.nodes() {
        let port = node.addr().port();
        assert!(port < 32_768, "port {port} is in the ephemeral range");
        let view = metadata(&node.bootstrap(), None, TIMEOUT).expect("metadata");
        assert_eq!(
            view.brokers,
            vec![(node.node_id(), "127.0.0.1".to_owned(), port)],
            "node {} answers for itself",
            node.node_id()
        );
    }
    let dirs: std::collections::BTreeSet<_> = cluster
        .nodes()
        .iter()
        .map(|n| n.data_dir().to_path_buf())
        .collect();
    assert_eq!(dirs.len(), 3, "each node has its own data directory");

    // Data written to node 2 survives its SIGKILL and restart on the same port.
    let bootstrap2 = cluster.node(2).bootstrap();
    let records: Vec<Record> = (0..5)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    let acked = produce_ok(&bootstrap2, "harness", &records, &[]);
    assert_eq!(acked, (0..5).map(|o| (0, o)).collect::<Vec<_>>());
    assert_eq!(leader_of(&bootstrap2, "harness", 0, TIMEOUT), Ok(2));
    let pid_before = cluster.node(2).pid().expect("running");
    cluster.node_mut(2).kill();
    assert!(!cluster.node_mut(2).is_running());
    assert!(
        std::net::TcpStream::connect(cluster.node(2).addr()).is_err(),
        "a killed node's port refuses connections"
    );
    cluster.node_mut(2).restart();
    assert_ne!(cluster.node(2).pid(), Some(pid_before), "a new process");
    assert_eq!(cluster.node(2).bootstrap(), bootstrap2, "the same port");
    let consumed = consume(&bootstrap2, "harness", 0, 0, 5, &[]);
    let values: Vec<Option<Vec<u8>>> = consumed.into_iter().map(|c| c.value).collect();
    assert_eq!(
        values,
        (0..5)
            .map(|i| Some(format!("v{i}").into_bytes()))
            .collect::<Vec<_>>()
    );

    // A paused node answers no Metadata; resumed, it does again.
    let bootstrap3 = cluster.node(3).bootstrap();
    cluster.node_mut(3).pause();
    assert!(cluster.node(3).is_paused());
    assert!(
        cluster.node_mut(3).is_running(),
        "a paused process is alive"
    );
    let e = metadata(&bootstrap3, None, Duration::from_secs(2)).expect_err("paused");
    assert!(e.contains(&bootstrap3), "{e}");
    cluster.node_mut(3).resume();
    let view = wait_until(TIMEOUT, || {
        metadata(&bootstrap3, None, Duration::from_secs(2)).ok()
    })
    .expect("a resumed node answers");
    assert_eq!(view.brokers.first().map(|b| b.0), Some(3));

    // SIGTERM: a clean exit, status 0.
    let status = cluster.node_mut(1).terminate();
    assert!(status.success(), "node 1 exited with {status}");
    assert!(!cluster.node_mut(1).is_running());
}

// A node id outside the voters is refused at start with a message naming the settings
// that disagree, also through Kafka's names in the environment; without voters the same
// node starts and serves. (Nodes with one role are `cluster::roles`.)
#[test]
fn inconsistent_cluster_config_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A node id outside the voters is a configuration error of its own, also through
    // Kafka's names in the environment.
    let output = Command::new(broker_binary())
        .args([
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            &dir.path().display().to_string(),
        ])
        .env("KAFKA_NODE_ID", "4")
        .env(
            "KAFKA_CONTROLLER_QUORUM_VOTERS",
            "1@127.0.0.1:19811,2@127.0.0.1:19821",
        )
        .stdin(Stdio::null())
        .output()
        .expect("run the broker");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("node.id 4 must be one of"), "{stderr}");

    // Without voters the same node starts and serves.
    let mut cluster = Cluster::start(&ClusterSpec::independent(1));
    assert!(cluster.node_mut(1).is_running());
}
