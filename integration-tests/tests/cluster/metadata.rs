//! A three-node quorum forms: every node registers, the controller unfences it, and every
//! node's Metadata shows the same three brokers and, for a topic created with
//! replication factor 3, every partition with three replicas, three in sync and a leader,
//! the leaders spread over the brokers. Data replication is not asserted here (the
//! follower fetcher is wired separately).

use std::time::Duration;

use integration_tests::cluster::{wait_until, Cluster, ClusterSpec};
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;

use crate::common::{admin_options, create_topics};

const TIMEOUT: Duration = Duration::from_secs(30);

/// (partition, leader, replicas sorted, isr sorted) of `topic` as `bootstrap` answers,
/// and the broker ids it lists.
type Shown = (Vec<i32>, Vec<(i32, i32, Vec<i32>, Vec<i32>)>);

fn shown(bootstrap: &str, topic: Option<&str>) -> Option<Shown> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("allow.auto.create.topics", "false")
        .create()
        .ok()?;
    let metadata = consumer
        .fetch_metadata(topic, Duration::from_secs(5))
        .ok()?;
    let mut brokers: Vec<i32> = metadata.brokers().iter().map(|b| b.id()).collect();
    brokers.sort_unstable();
    let mut partitions: Vec<(i32, i32, Vec<i32>, Vec<i32>)> = metadata
        .topics()
        .iter()
        .filter(|t| Some(t.name()) == topic && t.error().is_none())
        .flat_map(|t| {
            t.partitions().iter().map(|p| {
                let mut replicas = p.replicas().to_vec();
                replicas.sort_unstable();
                let mut isr = p.isr().to_vec();
                isr.sort_unstable();
                (p.id(), p.leader(), replicas, isr)
            })
        })
        .collect();
    partitions.sort();
    Some((brokers, partitions))
}

#[test]
fn three_voters_form_a_cluster_and_place_replicas() {
    let _serial = crate::serial();
    let cluster = Cluster::start(&ClusterSpec::quorum(3));
    for node in cluster.nodes() {
        let brokers = wait_until(TIMEOUT, || {
            shown(&node.bootstrap(), None).filter(|(b, _)| b.len() == 3)
        });
        assert_eq!(
            brokers.map(|(b, _)| b),
            Some(vec![1, 2, 3]),
            "node {} lists every broker\n{}",
            node.node_id(),
            cluster.log_tails()
        );
    }
    let topic = NewTopic::new("replicated", 3, TopicReplication::Fixed(3));
    let results = create_topics(&cluster.node(2).bootstrap(), &[topic], &admin_options());
    assert_eq!(
        results,
        vec![Ok("replicated".to_owned())],
        "{}",
        cluster.log_tails()
    );
    for node in cluster.nodes() {
        let seen = wait_until(TIMEOUT, || {
            shown(&node.bootstrap(), Some("replicated"))
                .filter(|(_, p)| p.len() == 3 && p.iter().all(|(_, leader, _, _)| *leader > 0))
        });
        let Some((brokers, partitions)) = seen else {
            panic!(
                "node {} never showed the topic led\n{}",
                node.node_id(),
                cluster.log_tails()
            );
        };
        assert_eq!(brokers, vec![1, 2, 3]);
        for (partition, leader, replicas, isr) in &partitions {
            assert_eq!(
                replicas,
                &vec![1, 2, 3],
                "partition {partition} on node {}",
                node.node_id()
            );
            assert_eq!(
                isr,
                &vec![1, 2, 3],
                "partition {partition} on node {}",
                node.node_id()
            );
            assert!(
                (1..=3).contains(leader),
                "partition {partition} leader {leader}"
            );
        }
        let mut leaders: Vec<i32> = partitions.iter().map(|(_, l, _, _)| *l).collect();
        leaders.sort_unstable();
        assert_eq!(
            leaders,
            vec![1, 2, 3],
            "one leader per broker on node {}",
            node.node_id()
        );
    }
    // RF above the live brokers: Kafka's INVALID_REPLICATION_FACTOR.
    let topic = NewTopic::new("too-many", 1, TopicReplication::Fixed(4));
    let results = create_topics(&cluster.node(1).bootstrap(), &[topic], &admin_options());
    assert!(
        matches!(&results[..], [Err((name, rdkafka::types::RDKafkaErrorCode::InvalidReplicationFactor))] if name == "too-many"),
        "{results:?}"
    );
}
