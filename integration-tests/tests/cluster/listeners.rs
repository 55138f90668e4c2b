//! Three nodes with two listeners each: brokers replicate over the inter-broker listener
//! (INTERNAL), never the client one whose advertised address (127.0.0.2) leads nowhere,
//! and each listener's clients are told the addresses of that listener.

use integration_tests::cluster::{Cluster, ClusterSpec};
use kafka_protocol::messages::{MetadataRequest, MetadataResponse};

use crate::common::{produce_ok, Record};
use crate::replication::{acked_by_partition, create_rf3_topic};
use crate::wire::{connect, round_trip};

/// (id, host, port) of the brokers a Metadata v12 answer on `addr` lists, by id.
fn brokers_at(addr: std::net::SocketAddr) -> Vec<(i32, String, i32)> {
    let mut stream = connect(addr);
    let response: MetadataResponse = round_trip(&mut stream, 12, 1, &MetadataRequest::default());
    let mut brokers: Vec<_> = response
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string(), b.port))
        .collect();
    brokers.sort();
    brokers
}

#[test]
fn replicas_fetch_over_the_inter_broker_listener() {
    // Proves: with inter.broker.listener.name=INTERNAL and PLAINTEXT advertised where
    // nothing listens, an RF=3 topic gets a full ISR and acks=all records (which need
    // every follower to fetch) are acknowledged at offsets 0..n on each partition and read
    // back; Metadata on a node's PLAINTEXT port lists every broker at its 127.0.0.2
    // address, on its INTERNAL port at 127.0.0.1.
    let _serial = crate::serial();
    let spec = ClusterSpec {
        internal_listener: true,
        ..ClusterSpec::quorum(3)
    };
    let cluster = Cluster::start(&spec);
    create_rf3_topic(&cluster, "inside", 2);
    let records: Vec<Record> = (0..100)
        .map(|i| Record::new(i % 2, format!("k{i}"), format!("v{i}")))
        .collect();
    let producer = crate::common::producer(&cluster.bootstrap(), &[("acks", "all")]);
    let deliveries = crate::common::produce_all(&producer, "inside", &records);
    let acked = acked_by_partition(&records, &deliveries);
    for (partition, list) in &acked {
        let offsets: Vec<i64> = list.iter().map(|(o, _)| *o).collect();
        assert_eq!(
            offsets,
            (0..50).collect::<Vec<i64>>(),
            "partition {partition}"
        );
    }
    // Another node (its INTERNAL listener) appends after them.
    let other = cluster.nodes()[2].bootstrap();
    let again = produce_ok(
        &other,
        "inside",
        &[Record::new(0, "k", "last")],
        &[("acks", "all")],
    );
    assert_eq!(again, [(0, 50)]);

    let internal: Vec<(i32, String, i32)> = cluster
        .nodes()
        .iter()
        .map(|n| {
            (
                n.node_id(),
                "127.0.0.1".to_owned(),
                i32::from(n.addr().port()),
            )
        })
        .collect();
    let outer: Vec<(i32, String, i32)> = cluster
        .nodes()
        .iter()
        .map(|n| {
            let port = n.outer_addr().expect("a PLAINTEXT listener").port();
            (n.node_id(), "127.0.0.2".to_owned(), i32::from(port))
        })
        .collect();
    for node in cluster.nodes() {
        assert_eq!(brokers_at(node.addr()), internal, "node {}", node.node_id());
        let outer_addr = node.outer_addr().expect("outer");
        assert_eq!(brokers_at(outer_addr), outer, "node {}", node.node_id());
    }
}
