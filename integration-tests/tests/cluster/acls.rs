//! ACLs in a three-node cluster: kept in the metadata log, so an ACL created through one
//! node is listed and enforced by every node, and by a node after its restart.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{CreateAclsRequest, DescribeAclsRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use integration_tests::cluster::{wait_until, Cluster, ClusterSpec};

use crate::common::{produce_ok, Record};
use crate::replication::create_rf3_topic;
use crate::wire::{connect, record_batch, round_trip};

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;

/// How many ACLs DescribeAcls (any filter) lists at `addr`.
fn acl_count(addr: std::net::SocketAddr) -> usize {
    let mut stream = connect(addr);
    let response = round_trip(
        &mut stream,
        3,
        1,
        &DescribeAclsRequest::default()
            .with_resource_type_filter(1)
            .with_resource_name_filter(None)
            .with_pattern_type_filter(1)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(1)
            .with_permission_type(1),
    );
    assert_eq!(response.error_code, 0);
    response.resources.iter().map(|r| r.acls.len()).sum()
}

/// The code of a one-record Produce v9 to partition 0 of `topic` at `addr`.
fn produce_code(addr: std::net::SocketAddr, topic: &str) -> i16 {
    let mut stream = connect(addr);
    let batch = record_batch(&[(None, Some(Bytes::from_static(b"v")))], 1_700_000_000_000);
    let response = round_trip(
        &mut stream,
        9,
        1,
        &ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(5000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch))])]),
    );
    response.responses[0].partition_responses[0].error_code
}

#[test]
fn an_acl_made_on_one_node_holds_on_every_node_and_after_a_restart() {
    // Proves: with the StandardAuthorizer and allow.everyone.if.no.acl.found=true (so the
    // anonymous PLAINTEXT principal, replica fetches included, may do what no ACL names),
    // a DENY of WRITE on `secret` for User:ANONYMOUS created through node 1 is listed by
    // DescribeAcls on all three nodes and refuses a produce to `secret` on each with
    // TOPIC_AUTHORIZATION_FAILED, also on node 2 after it restarts; acks=all produces to
    // `open` (RF=3, so followers fetch under the same authorizer) keep working.
    let _serial = crate::serial();
    let mut spec = ClusterSpec::quorum(3);
    for setting in [
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=true",
    ] {
        spec.extra_args
            .extend(["--override".to_string(), setting.to_string()]);
    }
    let mut cluster = Cluster::start(&spec);
    create_rf3_topic(&cluster, "open", 1);
    create_rf3_topic(&cluster, "secret", 1);
    let acked = produce_ok(
        &cluster.bootstrap(),
        "open",
        &[Record::new(0, "k", "v0")],
        &[("acks", "all")],
    );
    assert_eq!(acked, [(0, 0)]);

    let deny = AclCreation::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_static_str("secret"))
        .with_resource_pattern_type(3)
        .with_principal(StrBytes::from_static_str("User:ANONYMOUS"))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(4)
        .with_permission_type(2);
    let mut stream = connect(cluster.node(1).addr());
    let created = round_trip(
        &mut stream,
        3,
        1,
        &CreateAclsRequest::default().with_creations(vec![deny]),
    );
    assert_eq!(
        created
            .results
            .iter()
            .map(|r| r.error_code)
            .collect::<Vec<_>>(),
        [0]
    );
    for node in cluster.nodes() {
        let addr = node.addr();
        let listed = wait_until(Duration::from_secs(10), || {
            (acl_count(addr) == 1 && produce_code(addr, "secret") == TOPIC_AUTHORIZATION_FAILED)
                .then_some(())
        });
        assert!(
            listed.is_some(),
            "node {} does not enforce the ACL\n{}",
            node.node_id(),
            cluster.log_tails()
        );
    }

    cluster.node_mut(2).restart();
    let addr = cluster.node(2).addr();
    let after = wait_until(Duration::from_secs(30), || {
        std::net::TcpStream::connect(addr).ok()?;
        (acl_count(addr) == 1).then_some(produce_code(addr, "secret"))
    });
    assert_eq!(
        after,
        Some(TOPIC_AUTHORIZATION_FAILED),
        "{}",
        cluster.log_tails()
    );
    let acked = produce_ok(
        &cluster.bootstrap(),
        "open",
        &[Record::new(0, "k", "v1")],
        &[("acks", "all")],
    );
    assert_eq!(acked, [(0, 1)]);
}
