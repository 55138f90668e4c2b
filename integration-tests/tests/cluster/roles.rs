//! Nodes with one role (`process.roles=controller` / `broker`), as KRaft clusters with
//! dedicated controllers run: three controller-only voters and three broker-only nodes.
//! The brokers learn the metadata log from the active controller (MetadataFetch), clients
//! see only the brokers, and the cluster keeps serving when the active controller or a
//! leading broker dies.

use std::collections::BTreeMap;
use std::time::Duration;

use integration_tests::cluster::{metadata, wait_until, Cluster, ClusterSpec, NodeRole};
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::producer::Producer;

use crate::common::{
    admin, admin_options, block_on, consume, producer, send_all, wait_for_reports, Record,
};
use crate::replication::SETTLE;

const BROKERS: [i32; 3] = [4, 5, 6];

/// Creates an RF=3 topic with `min.insync.replicas=2` through `bootstrap` and waits until
/// every broker shows each partition led, with replicas and ISR on the three brokers.
fn create_topic(cluster: &Cluster, name: &str, partitions: i32) {
    let admin = admin(&cluster.bootstrap());
    let topic =
        NewTopic::new(name, partitions, TopicReplication::Fixed(3)).set("min.insync.replicas", "2");
    let results = block_on(admin.create_topics([&topic], &admin_options())).expect("CreateTopics");
    assert!(results[0].is_ok(), "create {name}: {:?}", results[0]);
    for id in BROKERS {
        let node = cluster.node(id);
        let mut last = String::new();
        let shown = wait_until(SETTLE, || {
            let view = metadata(&node.bootstrap(), Some(name), Duration::from_secs(3)).ok()?;
            last = format!("{view:?}");
            let full = view.partitions.len() == usize::try_from(partitions).ok()?
                && view.partitions.iter().all(|p| {
                    let mut replicas = p.replicas.clone();
                    replicas.sort_unstable();
                    let mut isr = p.isr.clone();
                    isr.sort_unstable();
                    BROKERS.contains(&p.leader) && replicas == BROKERS && isr == BROKERS
                });
            full.then_some(())
        });
        assert!(
            shown.is_some(),
            "broker {id} never showed {name} on the three brokers; last: {last}\n{}",
            cluster.log_tails()
        );
    }
}

/// Produces `count` idempotent acks=all records round `partitions` partitions and returns
/// `partition → [(offset, value)]` as acknowledged.
fn produce(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    from: i32,
    count: i32,
) -> BTreeMap<i32, Vec<(i64, Vec<u8>)>> {
    let records: Vec<Record> = (from..from + count)
        .map(|i| Record::new(i % partitions, format!("k{i}"), format!("v{i}")))
        .collect();
    let producer = producer(bootstrap, &[("enable.idempotence", "true")]);
    send_all(&producer, topic, &records);
    wait_for_reports(&producer, records.len(), SETTLE);
    crate::replication::acked_by_partition(&records, &producer.context().deliveries())
}

/// Every record of `topic`'s partitions up to `expected`'s counts, read from `bootstrap`.
fn read(
    bootstrap: &str,
    topic: &str,
    expected: &BTreeMap<i32, Vec<(i64, Vec<u8>)>>,
) -> BTreeMap<i32, Vec<(i64, Vec<u8>)>> {
    expected
        .iter()
        .map(|(partition, list)| {
            let records = consume(bootstrap, topic, *partition, 0, list.len(), &[]);
            (
                *partition,
                records
                    .into_iter()
                    .map(|c| (c.offset, c.value.unwrap_or_default()))
                    .collect(),
            )
        })
        .collect()
}

/// DescribeQuorum v2 through broker `id`, as `kafka-metadata-quorum.sh describe` sends it:
/// (leader, high watermark, voters as (id, log end), observers as (id, log end), the
/// voters' endpoints as (id, host, port)).
type Quorum = (
    i32,
    i64,
    Vec<(i32, i64)>,
    Vec<(i32, i64)>,
    Vec<(i32, String, u16)>,
);

fn describe_quorum(cluster: &Cluster, id: i32) -> Quorum {
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    use kafka_protocol::messages::{DescribeQuorumRequest, DescribeQuorumResponse, TopicName};
    use kafka_protocol::protocol::StrBytes;

    let mut stream = crate::wire::connect(cluster.node(id).addr());
    let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let response: DescribeQuorumResponse = crate::wire::round_trip(&mut stream, 2, 7, &request);
    assert_eq!(response.error_code, 0, "top-level error: {response:?}");
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0, "{response:?}");
    let states = |list: &[kafka_protocol::messages::describe_quorum_response::ReplicaState]| {
        let mut v: Vec<(i32, i64)> = list
            .iter()
            .map(|r| (r.replica_id.0, r.log_end_offset))
            .collect();
        v.sort_unstable();
        v
    };
    let endpoints = response
        .nodes
        .iter()
        .flat_map(|n| {
            n.listeners
                .iter()
                .map(move |l| (n.node_id.0, l.host.to_string(), l.port))
        })
        .collect();
    (
        partition.leader_id.0,
        partition.high_watermark,
        states(&partition.current_voters),
        states(&partition.observers),
        endpoints,
    )
}

/// The controller whose log says it became active last.
fn active_controller(cluster: &Cluster) -> Option<i32> {
    cluster
        .nodes()
        .iter()
        .filter(|n| n.role() == NodeRole::Controller)
        .filter_map(|n| {
            let log = n.log();
            let at = log.rfind("active controller")?;
            let stamp = log[..at]
                .rfind('\n')
                .map_or(&log[..at], |nl| &log[nl + 1..at]);
            Some((stamp.get(..27)?.to_owned(), n.node_id()))
        })
        .max()
        .map(|(_, id)| id)
}

// Three controller-only voters and three broker-only nodes: clients see the three brokers
// only (a controller has no client listener); an RF=3 topic is placed on the brokers and
// replicates; the active controller's SIGKILL leaves the brokers serving and admin
// operations working through the new one; a leading broker's SIGKILL moves leadership
// with every acknowledged record at its offset; the broker restarts, loads the metadata
// from the controllers and rejoins the ISR; SIGTERM stops each kind of node cleanly.
#[test]
fn dedicated_controllers_and_brokers_form_a_cluster() {
    let _serial = crate::serial();
    let mut cluster = Cluster::start(&ClusterSpec::dedicated(3, 3));
    for id in 1..=3 {
        assert!(
            std::net::TcpStream::connect(cluster.node(id).addr()).is_err(),
            "controller {id} opened a client listener"
        );
    }
    for id in BROKERS {
        let view = wait_until(SETTLE, || {
            metadata(&cluster.node(id).bootstrap(), None, Duration::from_secs(3))
                .ok()
                .filter(|v| v.brokers.len() == 3)
        })
        .unwrap_or_else(|| {
            panic!(
                "broker {id} never listed 3 brokers\n{}",
                cluster.log_tails()
            )
        });
        let ids: Vec<i32> = view.brokers.iter().map(|b| b.0).collect();
        assert_eq!(ids, BROKERS, "broker {id} lists the brokers only");
    }

    // DescribeQuorum (kafka-metadata-quorum.sh) through a broker: the three controllers
    // vote, the active one leads, the brokers observe; every voter has the whole log once
    // the quorum is idle, and each broker reports an offset within it.
    let quorum = wait_until(SETTLE, || {
        let q = describe_quorum(&cluster, 4);
        let settled = q.2.iter().all(|(_, end)| *end == q.1)
            && q.3.iter().all(|(_, end)| *end > 0 && *end <= q.1);
        settled.then_some(q)
    })
    .unwrap_or_else(|| {
        panic!(
            "the quorum never settled: {:?}",
            describe_quorum(&cluster, 4)
        )
    });
    let (leader, high_watermark, voters, observers, endpoints) = quorum;
    assert!((1..=3).contains(&leader), "leader {leader}");
    assert_eq!(
        voters,
        vec![
            (1, high_watermark),
            (2, high_watermark),
            (3, high_watermark)
        ]
    );
    assert_eq!(observers.iter().map(|o| o.0).collect::<Vec<_>>(), BROKERS);
    let mut endpoints = endpoints;
    endpoints.sort();
    assert_eq!(
        endpoints,
        (1..=3)
            .map(|id| (
                id,
                "127.0.0.1".to_owned(),
                cluster.node(id).controller_port()
            ))
            .collect::<Vec<_>>()
    );

    create_topic(&cluster, "dedicated", 3);
    let acked = produce(&cluster.bootstrap(), "dedicated", 3, 0, 30);
    assert_eq!(acked.values().map(Vec::len).sum::<usize>(), 30);
    assert_eq!(read(&cluster.bootstrap(), "dedicated", &acked), acked);

    // The active controller dies: brokers keep serving, admin goes to the new one.
    let active = wait_until(SETTLE, || active_controller(&cluster)).expect("an active controller");
    cluster.node_mut(active).kill();
    create_topic(&cluster, "after-controller", 2);
    let new_active = wait_until(SETTLE, || {
        active_controller(&cluster).filter(|a| *a != active)
    })
    .expect("a new active controller");
    assert_ne!(new_active, active);
    let more = produce(&cluster.bootstrap(), "after-controller", 2, 0, 10);
    assert_eq!(read(&cluster.bootstrap(), "after-controller", &more), more);

    // A leading broker dies: the others take over with the same records at the same
    // offsets, and accept more.
    let view = metadata(
        &cluster.bootstrap(),
        Some("dedicated"),
        Duration::from_secs(5),
    )
    .expect("metadata");
    let victim = view.partitions[0].leader;
    assert!(BROKERS.contains(&victim), "{view:?}");
    cluster.node_mut(victim).kill();
    let survivor = cluster
        .node(*BROKERS.iter().find(|b| **b != victim).expect("a survivor"))
        .bootstrap();
    let moved = wait_until(SETTLE, || {
        let v = metadata(&survivor, Some("dedicated"), Duration::from_secs(3)).ok()?;
        v.partitions
            .iter()
            .all(|p| p.leader >= 0 && p.leader != victim)
            .then_some(())
    });
    assert!(
        moved.is_some(),
        "leadership never left {victim}\n{}",
        cluster.log_tails()
    );
    assert_eq!(
        read(&survivor, "dedicated", &acked),
        acked,
        "same records, same offsets"
    );
    let after = produce(&survivor, "dedicated", 3, 30, 6);
    for (partition, list) in &after {
        let first = list.first().expect("a record").0;
        let before = i64::try_from(acked[partition].len()).expect("few records");
        assert_eq!(
            first, before,
            "partition {partition} appends after the old records"
        );
    }

    // It restarts with its logs, learns the metadata from the controllers, catches up.
    cluster.node_mut(victim).restart();
    let back = wait_until(SETTLE, || {
        let v = metadata(&survivor, Some("dedicated"), Duration::from_secs(3)).ok()?;
        v.partitions
            .iter()
            .all(|p| {
                let mut isr = p.isr.clone();
                isr.sort_unstable();
                isr == BROKERS
            })
            .then_some(())
    });
    assert!(
        back.is_some(),
        "broker {victim} never rejoined every ISR\n{}",
        cluster.log_tails()
    );
    let mut all = acked.clone();
    for (partition, list) in after {
        all.entry(partition).or_default().extend(list);
    }
    assert_eq!(
        read(&cluster.node(victim).bootstrap(), "dedicated", &all),
        all,
        "the restarted broker serves every record"
    );

    for id in [victim, new_active] {
        let status = cluster.node_mut(id).terminate();
        assert!(status.success(), "node {id} exited with {status}");
        assert!(
            cluster.node(id).log().contains("shutdown complete"),
            "node {id} did not log a clean shutdown\n{}",
            cluster.node(id).log_tail()
        );
    }
}
