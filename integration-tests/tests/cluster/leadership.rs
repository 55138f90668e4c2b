//! Preferred leaders (issue 11, item 3): after a failover the survivors lead what the dead
//! node led; once it is back in the ISR, ElectLeaders (`kafka-leader-election.sh`) or the
//! controller's own `auto.leader.rebalance.enable` round moves each partition's leadership
//! back to its preferred replica, the first of its assignment.

use std::time::Duration;

use integration_tests::cluster::{metadata, wait_until, Cluster, ClusterSpec, PartitionView};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::replication::{create_rf3_topic, SETTLE};
use crate::wire::{connect, round_trip};

/// ElectLeaders v2 (PREFERRED) to `cluster`'s first node for `partitions` (all with `None`),
/// as `(topic, [(partition, error code)])` in the answer's order.
fn elect_preferred(
    cluster: &Cluster,
    partitions: Option<Vec<(&str, Vec<i32>)>>,
) -> Vec<(String, Vec<(i32, i16)>)> {
    let mut stream = connect(cluster.nodes()[0].addr());
    let request = ElectLeadersRequest::default()
        .with_election_type(0)
        .with_timeout_ms(30_000)
        .with_topic_partitions(partitions.map(|list| {
            list.into_iter()
                .map(|(topic, ps)| {
                    TopicPartitions::default()
                        .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                        .with_partitions(ps)
                })
                .collect()
        }));
    let response: ElectLeadersResponse = round_trip(&mut stream, 2, 7, &request);
    assert_eq!(response.error_code, 0, "top-level error");
    response
        .replica_election_results
        .iter()
        .map(|r| {
            let results = r
                .partition_result
                .iter()
                .map(|p| (p.partition_id, p.error_code))
                .collect();
            (r.topic.to_string(), results)
        })
        .collect()
}

/// `partition` of `topic` as the cluster shows it once `ready` holds for it.
fn wait_for_partition(
    cluster: &Cluster,
    topic: &str,
    partition: i32,
    what: &str,
    mut ready: impl FnMut(&PartitionView) -> bool,
) -> PartitionView {
    let mut last = String::new();
    let found = wait_until(SETTLE, || {
        let view = metadata(&cluster.bootstrap(), Some(topic), Duration::from_secs(3)).ok()?;
        let p = view
            .partitions
            .iter()
            .find(|p| p.partition == partition)?
            .clone();
        last = format!("{p:?}");
        ready(&p).then_some(p)
    });
    found.unwrap_or_else(|| {
        panic!(
            "{topic}-{partition}: {what} never happened; last seen {last}\n{}",
            cluster.log_tails()
        )
    })
}

/// Kills the preferred leader of `topic`-0, waits for a survivor to lead it, restarts the
/// node and waits until it is back in the ISR; returns the preferred leader's id.
fn fail_over_and_return(cluster: &mut Cluster, topic: &str) -> i32 {
    let before = wait_for_partition(cluster, topic, 0, "a leader", |p| p.leader >= 0);
    let preferred = before.assigned[0];
    assert_eq!(
        before.leader, preferred,
        "a new topic is led by its preferred replicas"
    );
    cluster.node_mut(preferred).kill();
    wait_for_partition(cluster, topic, 0, "failover", |p| {
        p.leader >= 0 && p.leader != preferred
    });
    cluster.node_mut(preferred).restart();
    wait_for_partition(cluster, topic, 0, "the ISR filling again", |p| {
        p.isr == [1, 2, 3]
    });
    preferred
}

// ElectLeaders PREFERRED through the controller: with auto-rebalance off, a failed-over
// partition stays with the survivor until asked; the election moves it back (error 0),
// a second one is not needed (ELECTION_NOT_NEEDED, 84), an unknown partition is
// UNKNOWN_TOPIC_OR_PARTITION (3); with no partitions named, only the partitions that needed
// an election are listed.
#[test]
fn elect_leaders_moves_leadership_back_to_the_preferred_replica() {
    let _serial = crate::serial();
    let mut spec = ClusterSpec::quorum(3);
    spec.extra_args = vec!["--auto-leader-rebalance-enable".into(), "false".into()];
    let mut cluster = Cluster::start(&spec);
    create_rf3_topic(&cluster, "elect", 3);
    let preferred = fail_over_and_return(&mut cluster, "elect");
    std::thread::sleep(Duration::from_secs(2));
    let view = wait_for_partition(&cluster, "elect", 0, "metadata", |_| true);
    assert_ne!(
        view.leader, preferred,
        "moved back without an election: {view:?}"
    );

    assert_eq!(
        elect_preferred(
            &cluster,
            Some(vec![("elect", vec![0, 9]), ("nope", vec![0])])
        ),
        vec![
            ("elect".to_owned(), vec![(0, 0), (9, 3)]),
            ("nope".to_owned(), vec![(0, 3)]),
        ]
    );
    wait_for_partition(&cluster, "elect", 0, "the preferred leader back", |p| {
        p.leader == preferred
    });
    assert_eq!(
        elect_preferred(&cluster, Some(vec![("elect", vec![0])])),
        vec![("elect".to_owned(), vec![(0, 84)])]
    );
    // Every other partition the dead node led moves back too; then nothing is left to do.
    let all = elect_preferred(&cluster, None);
    for (topic, results) in &all {
        assert!(
            results.iter().all(|(_, code)| *code == 0),
            "{topic}: {results:?}"
        );
    }
    let again = elect_preferred(&cluster, None);
    assert!(
        again.iter().all(|(_, results)| results.is_empty()),
        "a second election found work: {again:?}"
    );
    let view =
        metadata(&cluster.bootstrap(), Some("elect"), Duration::from_secs(5)).expect("metadata");
    for p in &view.partitions {
        assert_eq!(p.leader, p.assigned[0], "{p:?}");
    }
}

// auto.leader.rebalance.enable (on by default): the active controller's periodic check
// moves the leadership back once the preferred replica is in the ISR again.
#[test]
fn auto_leader_rebalance_moves_leadership_back() {
    let _serial = crate::serial();
    let mut spec = ClusterSpec::quorum(3);
    spec.extra_args = vec![
        "--leader-imbalance-check-interval-seconds".into(),
        "2".into(),
    ];
    let mut cluster = Cluster::start(&spec);
    create_rf3_topic(&cluster, "rebalanced", 3);
    let preferred = fail_over_and_return(&mut cluster, "rebalanced");
    wait_for_partition(&cluster, "rebalanced", 0, "the automatic rebalance", |p| {
        p.leader == preferred
    });
}
