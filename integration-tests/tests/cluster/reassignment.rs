//! Partition reassignment (issue 11, item 3; KIP-455): AlterPartitionReassignments moves a
//! partition's replicas to other brokers: the new replica fetches the whole log, joins the
//! ISR, the old one leaves (its log deleted), leadership moves if the leader left, and every
//! record stays at its offset.

use std::time::Duration;

use integration_tests::cluster::{metadata, wait_until, Cluster, ClusterSpec, PartitionView};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{NewTopic, TopicReplication};

use crate::common::{
    admin, admin_options, assert_records, block_on, consume, produce_all, producer, Record,
};
use crate::replication::SETTLE;
use crate::wire::{connect, round_trip};

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

/// A connection to the first node that accepts one (some may be down).
fn connect_any(cluster: &Cluster) -> std::net::TcpStream {
    let addr = cluster
        .nodes()
        .iter()
        .map(|n| n.addr())
        .find(|addr| std::net::TcpStream::connect_timeout(addr, Duration::from_secs(1)).is_ok())
        .expect("a node that accepts connections");
    connect(addr)
}

/// AlterPartitionReassignments v0 for `topic`'s `(partition, target)` pairs (`None`
/// cancels); the error code of each partition, in order.
fn reassign(
    cluster: &Cluster,
    topic: &str,
    targets: &[(i32, Option<Vec<i32>>)],
) -> Vec<(i32, i16)> {
    let mut stream = connect_any(cluster);
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![ReassignableTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(
                targets
                    .iter()
                    .map(|(p, target)| {
                        ReassignablePartition::default()
                            .with_partition_index(*p)
                            .with_replicas(
                                target
                                    .as_ref()
                                    .map(|t| t.iter().copied().map(BrokerId).collect()),
                            )
                    })
                    .collect(),
            )]);
    let response: AlterPartitionReassignmentsResponse = round_trip(&mut stream, 0, 3, &request);
    assert_eq!(response.error_code, 0, "top-level error");
    response
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (p.partition_index, p.error_code))
        })
        .collect()
}

/// One ongoing reassignment: `(partition, replicas, adding, removing)`.
type Ongoing = (i32, Vec<i32>, Vec<i32>, Vec<i32>);

/// ListPartitionReassignments v0 for `topic`-0.
fn list_reassignments(cluster: &Cluster, topic: &str) -> Vec<Ongoing> {
    let mut stream = connect(cluster.nodes()[1].addr());
    let request = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(Some(vec![ListPartitionReassignmentsTopics::default()
            .with_name(topic_name(topic))
            .with_partition_indexes(vec![0])]));
    let response: ListPartitionReassignmentsResponse = round_trip(&mut stream, 0, 4, &request);
    assert_eq!(response.error_code, 0);
    let ids = |list: &[BrokerId]| list.iter().map(|b| b.0).collect::<Vec<i32>>();
    response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    p.partition_index,
                    ids(&p.replicas),
                    ids(&p.adding_replicas),
                    ids(&p.removing_replicas),
                )
            })
        })
        .collect()
}

fn partition_view(cluster: &Cluster, topic: &str) -> Option<PartitionView> {
    let view = metadata(&cluster.bootstrap(), Some(topic), Duration::from_secs(3)).ok()?;
    view.partitions.into_iter().find(|p| p.partition == 0)
}

/// Bytes of `.log` segment files under node `id`'s directory of `topic`-0.
fn segment_bytes(cluster: &Cluster, id: i32, topic: &str) -> u64 {
    let dir = cluster.node(id).data_dir().join(format!("{topic}-0"));
    std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

// A replication-factor-2 partition moves from [a, b] to [c, b]: its leader a leaves, c
// copies the log and joins the ISR, the reassignment completes (nothing listed), every
// record is where it was and new ones follow; a's copy is deleted. Bad targets are refused
// with Kafka's codes.
#[test]
fn reassignment_moves_a_replica_and_keeps_every_record() {
    let _serial = crate::serial();
    let cluster = Cluster::start(&ClusterSpec::quorum(3));
    let admin = admin(&cluster.bootstrap());
    let topic = NewTopic::new("moved", 1, TopicReplication::Fixed(2));
    let created = block_on(admin.create_topics([&topic], &admin_options())).expect("CreateTopics");
    assert!(created[0].is_ok(), "{created:?}");
    let before = wait_until(SETTLE, || {
        partition_view(&cluster, "moved").filter(|p| p.leader >= 0 && p.isr.len() == 2)
    })
    .unwrap_or_else(|| panic!("moved-0 never got a full ISR\n{}", cluster.log_tails()));
    let (a, b) = (before.assigned[0], before.assigned[1]);
    let c = (1..=3)
        .find(|id| *id != a && *id != b)
        .expect("a third broker");
    assert_eq!(before.leader, a);

    let p = producer(&cluster.bootstrap(), &[("acks", "all")]);
    let first: Vec<Record> = (0..100)
        .map(|i| Record::new(0, format!("k{i}"), format!("value {i}")))
        .collect();
    let reports = produce_all(&p, "moved", &first);
    assert!(reports.iter().all(|d| d.result.is_ok()), "{reports:?}");
    assert!(segment_bytes(&cluster, a, "moved") > 0);

    assert_eq!(
        reassign(
            &cluster,
            "moved",
            &[(0, Some(vec![c, b])), (7, Some(vec![c]))]
        ),
        vec![(0, 0), (7, 3)],
        "UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist"
    );
    let after = wait_until(SETTLE, || {
        partition_view(&cluster, "moved").filter(|p| {
            p.replicas == {
                let mut r = vec![b, c];
                r.sort_unstable();
                r
            } && p.isr == p.replicas
                && p.leader == c
        })
    });
    assert!(
        after.is_some(),
        "the reassignment never completed: {:?}\n{}",
        partition_view(&cluster, "moved"),
        cluster.log_tails()
    );
    assert_eq!(after.map(|p| p.assigned), Some(vec![c, b]));
    assert_eq!(
        list_reassignments(&cluster, "moved"),
        vec![],
        "still listed as ongoing"
    );
    assert_eq!(
        reassign(&cluster, "moved", &[(0, None)]),
        vec![(0, 85)],
        "NO_REASSIGNMENT_IN_PROGRESS when cancelling a finished one"
    );
    assert_eq!(
        reassign(&cluster, "moved", &[(0, Some(vec![b, b]))]),
        vec![(0, 39)],
        "INVALID_REPLICA_ASSIGNMENT for a repeated broker"
    );
    assert_eq!(
        reassign(&cluster, "moved", &[(0, Some(vec![b, 9]))]),
        vec![(0, 39)],
        "INVALID_REPLICA_ASSIGNMENT for an unknown broker"
    );

    let consumed = consume(&cluster.bootstrap(), "moved", 0, 0, 100, &[]);
    assert_records(&consumed, &first, 0);
    let second: Vec<Record> = (100..110)
        .map(|i| Record::new(0, format!("k{i}"), format!("value {i}")))
        .collect();
    let reports = produce_all(&p, "moved", &second);
    assert_eq!(
        reports.iter().map(|d| d.result).collect::<Vec<_>>(),
        (100..110).map(|o| Ok((0, o))).collect::<Vec<_>>()
    );
    let consumed = consume(&cluster.bootstrap(), "moved", 0, 100, 10, &[]);
    assert_records(&consumed, &second, 100);
    let deleted = wait_until(SETTLE, || {
        (segment_bytes(&cluster, a, "moved") == 0).then_some(())
    });
    assert!(
        deleted.is_some(),
        "the old replica's log is still on broker {a}"
    );
}

// A replication-factor-1 partition moved away from broker a and back keeps its records
// across a's restart: the restarted broker replays the metadata log, whose middle says a is
// no replica, and must not delete the log its final image names it the only replica of.
#[test]
fn a_replica_moved_away_and_back_keeps_its_log_across_a_restart() {
    let _serial = crate::serial();
    let mut cluster = Cluster::start(&ClusterSpec::quorum(3));
    let admin = admin(&cluster.bootstrap());
    let topic = NewTopic::new("back", 1, TopicReplication::Fixed(1));
    let created = block_on(admin.create_topics([&topic], &admin_options())).expect("CreateTopics");
    assert!(created[0].is_ok(), "{created:?}");
    let before = wait_until(SETTLE, || {
        partition_view(&cluster, "back").filter(|p| p.leader >= 0)
    })
    .unwrap_or_else(|| panic!("back-0 never got a leader\n{}", cluster.log_tails()));
    let a = before.assigned[0];
    let c = (1..=3).find(|id| *id != a).expect("another broker");
    let p = producer(&cluster.bootstrap(), &[("acks", "all")]);
    let records: Vec<Record> = (0..50)
        .map(|i| Record::new(0, format!("k{i}"), format!("kept {i}")))
        .collect();
    let reports = produce_all(&p, "back", &records);
    assert!(reports.iter().all(|d| d.result.is_ok()), "{reports:?}");
    drop(p);
    for target in [c, a] {
        assert_eq!(
            reassign(&cluster, "back", &[(0, Some(vec![target]))]),
            vec![(0, 0)]
        );
        let moved = wait_until(SETTLE, || {
            partition_view(&cluster, "back")
                .filter(|p| p.replicas == [target] && p.leader == target && p.isr == [target])
        });
        assert!(
            moved.is_some(),
            "back-0 never moved to {target}: {:?}\n{}",
            partition_view(&cluster, "back"),
            cluster.log_tails()
        );
    }
    let node = cluster.node_mut(a);
    node.terminate();
    node.restart();
    let led = wait_until(SETTLE, || {
        partition_view(&cluster, "back").filter(|p| p.leader == a)
    });
    assert!(
        led.is_some(),
        "broker {a} never led back-0 again\n{}",
        cluster.log_tails()
    );
    let consumed = consume(&cluster.bootstrap(), "back", 0, 0, 50, &[]);
    assert_records(&consumed, &records, 0);
}

// A broker that was down while its topic was deleted and a topic of the same name created
// elsewhere still has the old topic's directory (`stale-0`) when it comes back. Moved onto
// that broker, the new topic's replica must start from the new leader's log, not from the
// old records in that directory: the directory records the old topic id
// (`partition.metadata`), so it is deleted and created anew. Reading the partition from the
// returning broker gives exactly the new topic's records.
#[test]
fn a_returning_broker_drops_the_log_of_a_topic_deleted_while_it_was_down() {
    let _serial = crate::serial();
    let mut cluster = Cluster::start(&ClusterSpec::quorum(3));
    let admin = admin(&cluster.bootstrap());
    let topic = NewTopic::new("stale", 1, TopicReplication::Fixed(1));
    let created = block_on(admin.create_topics([&topic], &admin_options())).expect("CreateTopics");
    assert!(created[0].is_ok(), "{created:?}");
    let first = wait_until(SETTLE, || {
        partition_view(&cluster, "stale").filter(|p| p.leader >= 0)
    })
    .unwrap_or_else(|| panic!("stale-0 never got a leader\n{}", cluster.log_tails()));
    let a = first.assigned[0];
    let p = producer(&cluster.bootstrap(), &[("acks", "all")]);
    let old: Vec<Record> = (0..30)
        .map(|i| Record::new(0, format!("k{i}"), format!("old {i}")))
        .collect();
    // One batch each: a follower truncating the old log to the new leader's end keeps
    // whole batches, so old records would survive at offsets 0..9.
    for record in &old {
        let reports = produce_all(&p, "stale", std::slice::from_ref(record));
        assert!(reports.iter().all(|d| d.result.is_ok()), "{reports:?}");
    }
    drop(p);

    cluster.node_mut(a).kill();
    let others: Vec<i32> = (1..=3).filter(|id| *id != a).collect();
    let survivors = format!(
        "{},{}",
        cluster.node(others[0]).bootstrap(),
        cluster.node(others[1]).bootstrap()
    );
    // Fenced first, so the new topic is placed on the two others.
    let fenced = wait_until(SETTLE, || {
        let view = metadata(&survivors, None, Duration::from_secs(3)).ok()?;
        view.brokers.iter().all(|(id, _, _)| *id != a).then_some(())
    });
    assert!(
        fenced.is_some(),
        "broker {a} was never fenced\n{}",
        cluster.log_tails()
    );
    let admin = crate::common::admin(&survivors);
    let deleted =
        block_on(admin.delete_topics(&["stale"], &admin_options())).expect("DeleteTopics");
    assert_eq!(deleted, vec![Ok("stale".to_owned())]);
    let recreated = wait_until(SETTLE, || {
        let created = block_on(admin.create_topics([&topic], &admin_options())).ok()?;
        created[0].is_ok().then_some(())
    });
    assert!(
        recreated.is_some(),
        "stale was never created again\n{}",
        cluster.log_tails()
    );
    let second = wait_until(SETTLE, || {
        metadata(&survivors, Some("stale"), Duration::from_secs(3))
            .ok()?
            .partitions
            .into_iter()
            .find(|p| p.partition == 0 && p.leader >= 0)
    })
    .unwrap_or_else(|| {
        panic!(
            "the new stale-0 never got a leader\n{}",
            cluster.log_tails()
        )
    });
    assert_ne!(
        second.leader, a,
        "the new topic was placed on the dead broker"
    );
    let p = producer(&survivors, &[("acks", "all")]);
    let new: Vec<Record> = (0..10)
        .map(|i| Record::new(0, format!("k{i}"), format!("new {i}")))
        .collect();
    let reports = produce_all(&p, "stale", &new);
    assert!(reports.iter().all(|d| d.result.is_ok()), "{reports:?}");
    drop(p);

    cluster.node_mut(a).restart();
    let moved = wait_until(SETTLE, || {
        if reassign(&cluster, "stale", &[(0, Some(vec![a]))]) != vec![(0, 0)] {
            return None;
        }
        Some(())
    });
    assert!(moved.is_some(), "stale-0 could not be moved to broker {a}");
    let led = wait_until(SETTLE, || {
        partition_view(&cluster, "stale")
            .filter(|p| p.replicas == [a] && p.leader == a && p.isr == [a])
    });
    assert!(
        led.is_some(),
        "stale-0 never moved to broker {a}: {:?}\n{}",
        partition_view(&cluster, "stale"),
        cluster.log_tails()
    );
    let consumed = consume(&cluster.node(a).bootstrap(), "stale", 0, 0, 10, &[]);
    assert_records(&consumed, &new, 0);
    let p = producer(&cluster.bootstrap(), &[("acks", "all")]);
    let next = [Record::new(0, "k10", "new 10")];
    let reports = produce_all(&p, "stale", &next);
    assert_eq!(
        reports.iter().map(|d| d.result).collect::<Vec<_>>(),
        vec![Ok((0, 10))],
        "the next record follows the new topic's ten"
    );
}

// A replica dropped by a reassignment while its broker was down is emptied once that broker
// has replayed the metadata log and caught up (not during the replay, where an away-and-back
// history would wipe the only copy): the catch-up re-applies the image in force, which no
// longer names the broker.
#[test]
fn a_replica_dropped_while_its_broker_was_down_is_emptied_after_the_restart() {
    let _serial = crate::serial();
    let mut cluster = Cluster::start(&ClusterSpec::quorum(3));
    let admin = admin(&cluster.bootstrap());
    let topic = NewTopic::new("dropped", 1, TopicReplication::Fixed(2));
    let created = block_on(admin.create_topics([&topic], &admin_options())).expect("CreateTopics");
    assert!(created[0].is_ok(), "{created:?}");
    let before = wait_until(SETTLE, || {
        partition_view(&cluster, "dropped").filter(|p| p.leader >= 0 && p.isr.len() == 2)
    })
    .unwrap_or_else(|| panic!("dropped-0 never got its ISR\n{}", cluster.log_tails()));
    let (a, b) = (before.assigned[0], before.assigned[1]);
    let p = producer(&cluster.bootstrap(), &[("acks", "all")]);
    let records: Vec<Record> = (0..20)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    let reports = produce_all(&p, "dropped", &records);
    assert!(reports.iter().all(|d| d.result.is_ok()), "{reports:?}");
    drop(p);
    let copied = wait_until(SETTLE, || {
        (segment_bytes(&cluster, a, "dropped") > 0 && segment_bytes(&cluster, b, "dropped") > 0)
            .then_some(())
    });
    assert!(copied.is_some(), "the two replicas never held the records");

    cluster.node_mut(a).kill();
    let mut answers = Vec::new();
    let moved = wait_until(SETTLE, || {
        let answer = reassign(&cluster, "dropped", &[(0, Some(vec![b]))]);
        answers.push(answer.clone());
        if answer != vec![(0, 0)] {
            return None;
        }
        partition_view(&cluster, "dropped").filter(|p| p.replicas == [b] && p.leader == b)
    });
    assert!(
        moved.is_some(),
        "dropped-0 never moved to [{b}]: {:?}; answers {:?}",
        partition_view(&cluster, "dropped"),
        &answers[answers.len().saturating_sub(3)..],
    );
    assert!(
        segment_bytes(&cluster, a, "dropped") > 0,
        "the dead broker's copy changed while it was down"
    );
    cluster.node_mut(a).restart();
    let emptied = wait_until(SETTLE, || {
        (segment_bytes(&cluster, a, "dropped") == 0).then_some(())
    });
    assert!(
        emptied.is_some(),
        "broker {a} kept the dropped replica's {} bytes after its restart\n{}",
        segment_bytes(&cluster, a, "dropped"),
        cluster.log_tails()
    );
    assert_records(
        &consume(&cluster.bootstrap(), "dropped", 0, 0, 20, &[]),
        &records,
        0,
    );
}

// Issue 23 item 4: a partition reassigned back and forth between [1,2] and [3,2] (the
// leader leaves each time, and the old leader's AlterPartition may be refused with
// NEW_LEADER_ELECTED while it still has followers' fetches to answer) under an idempotent
// acks=all producer loses, duplicates and moves no acknowledged record. Kafka keeps the
// pending ISR after such a refusal; dropping back to the committed ISR let an old leader
// advance its high watermark past the new leader's log end.
#[test]
fn repeated_reassignments_under_acks_all_load_lose_nothing() {
    let _serial = crate::serial();
    let cluster = Cluster::start(&ClusterSpec::quorum(3));
    let admin = admin(&cluster.bootstrap());
    let topic = NewTopic::new("swing", 1, TopicReplication::Variable(&[&[1, 2]]))
        .set("min.insync.replicas", "2");
    let created = block_on(admin.create_topics([&topic], &admin_options())).expect("CreateTopics");
    assert!(created[0].is_ok(), "{created:?}");
    wait_until(SETTLE, || {
        partition_view(&cluster, "swing").filter(|p| p.leader == 1 && p.isr == [1, 2])
    })
    .unwrap_or_else(|| panic!("swing-0 never got a full ISR\n{}", cluster.log_tails()));
    let load = crate::replication::Load::start(cluster.bootstrap(), "swing", 1);
    for round in 0..6 {
        std::thread::sleep(Duration::from_millis(700));
        let target = if round % 2 == 0 {
            vec![3, 2]
        } else {
            vec![1, 2]
        };
        assert_eq!(
            reassign(&cluster, "swing", &[(0, Some(target.clone()))]),
            vec![(0, 0)],
            "round {round}"
        );
        let mut sorted = target.clone();
        sorted.sort_unstable();
        let done = wait_until(SETTLE, || {
            partition_view(&cluster, "swing")
                .filter(|p| p.replicas == sorted && p.isr == sorted && p.leader == target[0])
        });
        assert!(
            done.is_some(),
            "round {round}: the move to {target:?} never completed: {:?}\n{}",
            partition_view(&cluster, "swing"),
            cluster.log_tails()
        );
    }
    let (sent, deliveries) = load.finish();
    assert!(sent.len() > 500, "only {} records sent", sent.len());
    crate::replication::assert_exactly_once(&cluster.bootstrap(), "swing", 1, &sent, &deliveries);
}
