//! Replication scenarios of issue 11 on a real 3-node cluster (combined roles, one
//! process per node on 127.0.0.1): the cluster forms, RF=3 topics replicate, and what
//! acks=all acknowledged survives a SIGKILL of the leader, exactly once and at the same
//! offsets; with two of three nodes gone acks=all is never acknowledged while acks=1 on a
//! live leader works; group offsets survive the coordinator's death.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use integration_tests::cluster::{metadata, wait_until, Cluster, ClusterSpec, MetadataView};
use rdkafka::admin::{NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use crate::common::{
    admin, admin_options, block_on, consume, consumer, producer, send_all, wait_for_reports,
    Delivery, Record,
};

/// Generous: two cores, three brokers, and the test's own clients.
pub(crate) const SETTLE: Duration = Duration::from_secs(60);

/// Creates `name` with `partitions` partitions, replication factor 3 and
/// `min.insync.replicas=2`, and waits until every partition has a leader and a full ISR
/// on every node's Metadata.
pub(crate) fn create_rf3_topic(cluster: &Cluster, name: &str, partitions: i32) -> MetadataView {
    let admin = admin(&cluster.bootstrap());
    let topic =
        NewTopic::new(name, partitions, TopicReplication::Fixed(3)).set("min.insync.replicas", "2");
    let results = block_on(admin.create_topics([&topic], &admin_options())).expect("CreateTopics");
    assert_eq!(results.len(), 1);
    assert!(results[0].is_ok(), "create {name}: {:?}", results[0]);
    let mut last = String::new();
    for node in cluster.nodes() {
        let view = wait_until(SETTLE, || {
            let view = metadata(&node.bootstrap(), Some(name), Duration::from_secs(3)).ok()?;
            last = format!("{view:?}");
            let full = view.partitions.len() == usize::try_from(partitions).ok()?
                && view
                    .partitions
                    .iter()
                    .all(|p| p.leader >= 0 && p.replicas == [1, 2, 3] && p.isr == [1, 2, 3]);
            full.then_some(view)
        });
        assert!(
            view.is_some(),
            "node {} never showed {name} fully replicated; last: {last}\n{}",
            node.node_id(),
            cluster.log_tails()
        );
    }
    metadata(&cluster.bootstrap(), Some(name), Duration::from_secs(5)).expect("metadata")
}

/// The leader of `partition` as `bootstrap` sees it, once it is not `not` (and exists).
fn leader_other_than(bootstrap: &str, topic: &str, partition: i32, not: i32) -> Option<i32> {
    wait_until(SETTLE, || {
        let view = metadata(bootstrap, Some(topic), Duration::from_secs(3)).ok()?;
        view.partitions
            .iter()
            .find(|p| p.partition == partition)
            .map(|p| p.leader)
            .filter(|l| *l >= 0 && *l != not)
    })
}

/// `partition → [(offset, value)]` of `records` as their `deliveries` acknowledged them,
/// each list by offset; panics on a record that failed.
pub(crate) fn acked_by_partition(
    records: &[Record],
    deliveries: &[Delivery],
) -> BTreeMap<i32, Vec<(i64, Vec<u8>)>> {
    let mut acked: BTreeMap<i32, Vec<(i64, Vec<u8>)>> = BTreeMap::new();
    for d in deliveries {
        let (partition, offset) = d
            .result
            .unwrap_or_else(|e| panic!("record {}: {e:?}", d.index));
        let value = records[d.index].value.clone().expect("value");
        acked.entry(partition).or_default().push((offset, value));
    }
    for list in acked.values_mut() {
        list.sort();
    }
    acked
}

/// Reads `topic`'s partitions from offset 0 up to their current end, as
/// `partition → [(offset, value)]`.
fn read_all(bootstrap: &str, topic: &str, partitions: i32) -> BTreeMap<i32, Vec<(i64, Vec<u8>)>> {
    let reader = consumer(bootstrap, &[]);
    let mut out = BTreeMap::new();
    for partition in 0..partitions {
        // A new leader answers OFFSET_NOT_AVAILABLE until its high watermark caught up
        // (KIP-207): retriable, as clients treat it.
        let (_, high) = wait_until(SETTLE, || {
            reader
                .fetch_watermarks(topic, partition, Duration::from_secs(5))
                .ok()
        })
        .expect("watermarks");
        let count = usize::try_from(high).expect("non-negative end");
        let records = consume(bootstrap, topic, partition, 0, count, &[]);
        out.insert(
            partition,
            records
                .into_iter()
                .map(|c| (c.offset, c.value.unwrap_or_default()))
                .collect(),
        );
    }
    out
}

// Three combined nodes form one cluster: every node lists all three brokers, an RF=3
// topic gets a leader and a full ISR, acks=all records are readable from the leader, and
// after the leader's SIGKILL a new leader serves the same records at the same offsets and
// accepts new ones; the killed node comes back into the ISR.
#[test]
fn three_nodes_form_a_cluster_and_survive_a_leader_kill() {
    let _serial = crate::serial();
    let mut cluster = Cluster::start(&ClusterSpec::quorum(3));
    for node in cluster.nodes() {
        let view = wait_until(SETTLE, || {
            metadata(&node.bootstrap(), None, Duration::from_secs(3))
                .ok()
                .filter(|v| v.brokers.len() == 3)
        })
        .unwrap_or_else(|| panic!("node {} never listed 3 brokers", node.node_id()));
        let ids: Vec<i32> = view.brokers.iter().map(|b| b.0).collect();
        assert_eq!(ids, vec![1, 2, 3]);
    }
    let view = create_rf3_topic(&cluster, "replicated", 3);
    let leaders: BTreeSet<i32> = view.partitions.iter().map(|p| p.leader).collect();
    assert_eq!(
        leaders.len(),
        3,
        "leaders spread over the brokers: {view:?}"
    );

    let records: Vec<Record> = (0..30)
        .map(|i| Record::new(i % 3, format!("k{i}"), format!("v{i}")))
        .collect();
    let producer = producer(&cluster.bootstrap(), &[("enable.idempotence", "true")]);
    send_all(&producer, "replicated", &records);
    wait_for_reports(&producer, records.len(), SETTLE);
    let acked = acked_by_partition(&records, &producer.context().deliveries());
    assert_eq!(read_all(&cluster.bootstrap(), "replicated", 3), acked);

    let victim = view.partitions[0].leader;
    cluster.node_mut(victim).kill();
    let survivor = cluster
        .nodes()
        .iter()
        .find(|n| n.node_id() != victim)
        .expect("a survivor")
        .bootstrap();
    let new_leader = leader_other_than(&survivor, "replicated", 0, victim).unwrap_or_else(|| {
        panic!(
            "no new leader after killing {victim}\n{}",
            cluster.log_tails()
        )
    });
    assert_ne!(new_leader, victim);
    assert_eq!(
        read_all(&survivor, "replicated", 3),
        acked,
        "same records, same offsets"
    );

    let more: Vec<Record> = (30..36)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    let producer = crate::common::producer(&survivor, &[("enable.idempotence", "true")]);
    send_all(&producer, "replicated", &more);
    wait_for_reports(&producer, more.len(), SETTLE);
    let offsets: Vec<i64> = {
        let mut d = producer.context().deliveries();
        d.sort_by_key(|d| d.index);
        d.iter()
            .map(|d| d.result.expect("acked on the new leader").1)
            .collect()
    };
    assert_eq!(
        offsets,
        (10..16).collect::<Vec<i64>>(),
        "appended after the old records"
    );

    cluster.node_mut(victim).restart();
    let back = wait_until(SETTLE, || {
        let v = metadata(&survivor, Some("replicated"), Duration::from_secs(3)).ok()?;
        v.partitions.iter().all(|p| p.isr == [1, 2, 3]).then_some(v)
    });
    assert!(
        back.is_some(),
        "node {victim} never rejoined every ISR\n{}",
        cluster.log_tails()
    );
}

/// An idempotent acks=all producer on its own thread, sending 50 records at a time round
/// the partitions until stopped; joined, it waits for every delivery report.
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(Vec<Record>, Vec<Delivery>)>,
}

impl Load {
    pub(crate) fn start(bootstrap: String, topic: &'static str, partitions: i32) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let producer = producer(
                &bootstrap,
                &[
                    ("enable.idempotence", "true"),
                    ("message.timeout.ms", "90000"),
                ],
            );
            let mut sent: Vec<Record> = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                for _ in 0..50 {
                    let n = sent.len();
                    let partition = i32::try_from(n).expect("few records") % partitions;
                    let record = Record::new(partition, format!("k{n}"), format!("value-{n}"));
                    let mut base = BaseRecord::with_opaque_to(topic, Box::new(n))
                        .partition(partition)
                        .key(record.key.as_deref().unwrap_or_default())
                        .payload(record.value.as_deref().unwrap_or_default());
                    loop {
                        match producer.send(base) {
                            Ok(()) => break,
                            Err((e, returned))
                                if e.rdkafka_error_code() == Some(RDKafkaErrorCode::QueueFull) =>
                            {
                                base = returned;
                                producer.poll(Duration::from_millis(10));
                            }
                            Err((e, _)) => panic!("enqueue: {e}"),
                        }
                    }
                    sent.push(record);
                }
                producer.poll(Duration::from_millis(20));
            }
            wait_for_reports(&producer, sent.len(), Duration::from_secs(120));
            (sent, producer.context().deliveries())
        });
        Load { stop, thread }
    }

    /// Stops sending, waits for every report, and asserts each record was acknowledged.
    pub(crate) fn finish(self) -> (Vec<Record>, Vec<Delivery>) {
        self.stop.store(true, Ordering::Relaxed);
        let (sent, deliveries) = self.thread.join().expect("load thread");
        let failed: Vec<_> = deliveries.iter().filter(|d| d.result.is_err()).collect();
        assert!(
            failed.is_empty(),
            "{} of {} records failed: {:?}",
            failed.len(),
            sent.len(),
            &failed[..failed.len().min(5)]
        );
        assert_eq!(deliveries.len(), sent.len());
        (sent, deliveries)
    }
}

/// Waits until every partition of `topic` has a leader and the full ISR, as `bootstrap`
/// sees it.
fn wait_for_full_isr(cluster: &Cluster, bootstrap: &str, topic: &str) {
    let settled = wait_until(SETTLE, || {
        let v = metadata(bootstrap, Some(topic), Duration::from_secs(3)).ok()?;
        v.partitions
            .iter()
            .all(|p| p.isr == [1, 2, 3] && p.leader >= 0)
            .then_some(v)
    });
    assert!(
        settled.is_some(),
        "{topic}: the ISR never recovered\n{}",
        cluster.log_tails()
    );
}

/// Asserts that every acknowledged record is in `topic` at the offset its delivery report
/// gave, and that no value is in the log twice.
pub(crate) fn assert_exactly_once(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    sent: &[Record],
    deliveries: &[Delivery],
) {
    let log = read_all(bootstrap, topic, partitions);
    let mut at: BTreeMap<(i32, i64), Vec<u8>> = BTreeMap::new();
    let mut seen: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for (partition, records) in &log {
        for (offset, value) in records {
            at.insert((*partition, *offset), value.clone());
            *seen.entry(value.clone()).or_default() += 1;
        }
    }
    let duplicates: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        duplicates.is_empty(),
        "duplicated: {:?}",
        &duplicates[..duplicates.len().min(5)]
    );
    let mut lost = Vec::new();
    for d in deliveries {
        let (partition, offset) = d.result.expect("acked");
        let expected = sent[d.index].value.as_ref().expect("value");
        if at.get(&(partition, offset)) != Some(expected) {
            lost.push((
                d.index,
                partition,
                offset,
                at.get(&(partition, offset)).cloned(),
            ));
        }
    }
    assert!(
        lost.is_empty(),
        "{} acknowledged records are not where their reports said, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
}

// Kafka's central promise: under idempotent acks=all load with min.insync.replicas=2, a
// SIGKILL of a partition's leader loses no acknowledged record, duplicates none, and moves
// none to another offset.
#[test]
fn acked_records_survive_a_leader_sigkill_under_load_exactly_once() {
    let _serial = crate::serial();
    let mut cluster = Cluster::start(&ClusterSpec::quorum(3));
    let view = create_rf3_topic(&cluster, "load", 4);
    let victim = view.partitions[0].leader;
    let load = Load::start(cluster.bootstrap(), "load", 4);
    std::thread::sleep(Duration::from_secs(3));
    cluster.node_mut(victim).kill();
    std::thread::sleep(Duration::from_secs(8));
    let (sent, deliveries) = load.finish();
    cluster.node_mut(victim).restart();
    let survivor = cluster.node(victim % 3 + 1).bootstrap();
    wait_for_full_isr(&cluster, &survivor, "load");
    assert_exactly_once(&survivor, "load", 4, &sent, &deliveries);
}

// No split brain: a leader paused (SIGSTOP) for longer than the broker session timeout is
// fenced and replaced; resumed, it acknowledges nothing that the cluster then loses, and
// every acknowledged record is present exactly once at its offset.
#[test]
fn a_paused_leader_is_replaced_and_loses_nothing_acknowledged() {
    let _serial = crate::serial();
    let mut cluster = Cluster::start(&ClusterSpec::quorum(3));
    let view = create_rf3_topic(&cluster, "paused", 4);
    let victim = view.partitions[0].leader;
    let survivor = cluster.node(victim % 3 + 1).bootstrap();
    let load = Load::start(cluster.bootstrap(), "paused", 4);
    std::thread::sleep(Duration::from_secs(2));
    cluster.node_mut(victim).pause();
    let moved = leader_other_than(&survivor, "paused", 0, victim);
    assert!(
        moved.is_some(),
        "no new leader while {victim} was paused\n{}",
        cluster.log_tails()
    );
    std::thread::sleep(Duration::from_secs(2));
    cluster.node_mut(victim).resume();
    std::thread::sleep(Duration::from_secs(4));
    let (sent, deliveries) = load.finish();
    wait_for_full_isr(&cluster, &survivor, "paused");
    assert_exactly_once(&survivor, "paused", 4, &sent, &deliveries);
}

// A rolling restart (SIGTERM, controlled shutdown, restart, wait for the full ISR) of all
// three nodes under idempotent acks=all load loses and duplicates nothing; and when a
// node has exited, the other two already name live leaders for every partition (Kafka
// grants the shutdown only once the other brokers applied the leadership moves).
#[test]
fn rolling_restart_under_load_loses_nothing() {
    let _serial = crate::serial();
    let mut cluster = Cluster::start(&ClusterSpec::quorum(3));
    create_rf3_topic(&cluster, "rolling", 4);
    let load = Load::start(cluster.bootstrap(), "rolling", 4);
    for id in 1..=3 {
        std::thread::sleep(Duration::from_secs(2));
        let status = cluster.node_mut(id).terminate();
        assert!(status.success(), "node {id} exited with {status}");
        for other in (1..=3).filter(|o| *o != id) {
            let view = metadata(
                &cluster.node(other).bootstrap(),
                Some("rolling"),
                Duration::from_secs(3),
            )
            .expect("metadata from a live node");
            assert!(
                view.leaders.len() == 4 && view.leaders.iter().all(|(_, l)| *l >= 0 && *l != id),
                "node {other} right after node {id} stopped: {:?}\n{}",
                view.leaders,
                cluster.log_tails()
            );
        }
        cluster.node_mut(id).restart();
        let other = cluster.node(id % 3 + 1).bootstrap();
        wait_for_full_isr(&cluster, &other, "rolling");
    }
    let (sent, deliveries) = load.finish();
    assert_exactly_once(&cluster.bootstrap(), "rolling", 4, &sent, &deliveries);
}

// With two of three nodes killed, an acks=all produce to the survivor's partition is never
// acknowledged (NOT_ENOUGH_REPLICAS, or a timeout while the lost quorum keeps the ISR from
// shrinking, as on Kafka), while acks=1 to the same live leader is; both nodes back, the
// ISR recovers and acks=all works again.
#[test]
fn two_of_three_down_refuses_acks_all_and_serves_acks_one() {
    let _serial = crate::serial();
    let mut cluster = Cluster::start(&ClusterSpec::quorum(3));
    let view = create_rf3_topic(&cluster, "quorum-loss", 3);
    let survivor_id = view.partitions[0].leader;
    let survivor = cluster.node(survivor_id).bootstrap();
    let victims: Vec<i32> = (1..=3).filter(|id| *id != survivor_id).collect();
    for id in &victims {
        cluster.node_mut(*id).kill();
    }

    let all = producer(
        &survivor,
        &[("message.timeout.ms", "8000"), ("acks", "all")],
    );
    send_all(&all, "quorum-loss", &[Record::new(0, "k", "all")]);
    wait_for_reports(&all, 1, Duration::from_secs(30));
    let report = all.context().deliveries()[0].result;
    assert!(
        matches!(
            report,
            Err(RDKafkaErrorCode::NotEnoughReplicas
                | RDKafkaErrorCode::NotEnoughReplicasAfterAppend
                | RDKafkaErrorCode::MessageTimedOut
                | RDKafkaErrorCode::RequestTimedOut)
        ),
        "acks=all with two of three replicas dead: {report:?}"
    );

    let one = producer(&survivor, &[("acks", "1"), ("message.timeout.ms", "8000")]);
    send_all(&one, "quorum-loss", &[Record::new(0, "k", "one")]);
    wait_for_reports(&one, 1, Duration::from_secs(30));
    let report = one.context().deliveries()[0].result;
    assert!(report.is_ok(), "acks=1 on a live leader: {report:?}");

    for id in &victims {
        cluster.node_mut(*id).restart();
    }
    let back = wait_until(SETTLE, || {
        let v = metadata(&survivor, Some("quorum-loss"), Duration::from_secs(3)).ok()?;
        v.partitions
            .iter()
            .all(|p| p.isr == [1, 2, 3] && p.leader >= 0)
            .then_some(v)
    });
    assert!(
        back.is_some(),
        "ISR never recovered\n{}",
        cluster.log_tails()
    );
    let again = producer(&cluster.bootstrap(), &[("acks", "all")]);
    send_all(&again, "quorum-loss", &[Record::new(1, "k", "after")]);
    wait_for_reports(&again, 1, SETTLE);
    let report = again.context().deliveries()[0].result;
    assert!(report.is_ok(), "acks=all with the ISR back: {report:?}");
}

// A consumer group's committed offsets survive a SIGKILL of its coordinator's broker: the
// coordinator moves with the __consumer_offsets partition's leadership and the new one
// answers the offsets committed before.
#[test]
fn committed_offsets_survive_the_coordinators_death() {
    let _serial = crate::serial();
    let mut cluster = Cluster::start(&ClusterSpec::quorum(3));
    create_rf3_topic(&cluster, "grouped", 1);
    let records: Vec<Record> = (0..10)
        .map(|i| Record::new(0, format!("k{i}"), format!("v{i}")))
        .collect();
    let p = producer(&cluster.bootstrap(), &[]);
    send_all(&p, "grouped", &records);
    wait_for_reports(&p, records.len(), SETTLE);

    let group = |bootstrap: &str| -> BaseConsumer {
        consumer(
            bootstrap,
            &[
                ("group.id", "survivors"),
                ("enable.auto.commit", "false"),
                ("auto.offset.reset", "earliest"),
            ],
        )
    };
    let first = group(&cluster.bootstrap());
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("grouped", 0, Offset::Offset(7))
        .expect("offset");
    // The group's coordinator (and __consumer_offsets) may still be coming up: retry
    // while the client waits for it, as an application would.
    let mut last = String::new();
    let committed = wait_until(SETTLE, || match first.commit(&tpl, CommitMode::Sync) {
        Ok(()) => Some(()),
        Err(e) => {
            last = e.to_string();
            None
        }
    });
    assert!(
        committed.is_some(),
        "commit 7: {last}\n{}",
        cluster.log_tails()
    );
    let coordinator = {
        let mut asked = TopicPartitionList::new();
        asked.add_partition("grouped", 0);
        let committed = first
            .committed_offsets(asked, Duration::from_secs(20))
            .expect("committed offsets");
        assert_eq!(
            committed.find_partition("grouped", 0).map(|e| e.offset()),
            Some(Offset::Offset(7))
        );
        // The coordinator's id: the leader of the group's __consumer_offsets partition.
        let view = metadata(
            &cluster.bootstrap(),
            Some("__consumer_offsets"),
            Duration::from_secs(5),
        )
        .expect("metadata");
        let index = kafka_partition_for("survivors", view.partitions.len());
        view.partitions[index].leader
    };
    drop(first);
    cluster.node_mut(coordinator).kill();
    let survivor = cluster
        .nodes()
        .iter()
        .find(|n| n.node_id() != coordinator)
        .expect("a survivor")
        .bootstrap();
    let second = group(&survivor);
    // What the client last saw (an error, or the offset it got), for a failure's message.
    let mut seen = String::new();
    let committed = wait_until(SETTLE, || {
        let answer = second.committed_offsets(
            {
                let mut t = TopicPartitionList::new();
                t.add_partition("grouped", 0);
                t
            },
            Duration::from_secs(5),
        );
        seen = match &answer {
            Ok(c) => format!(
                "{:?}",
                c.find_partition("grouped", 0)
                    .map(|e| (e.offset(), e.error()))
            ),
            Err(e) => format!("error {e}"),
        };
        answer
            .ok()
            .and_then(|c| c.find_partition("grouped", 0).map(|e| e.offset()))
            .filter(|o| *o != Offset::Invalid)
    });
    assert_eq!(
        committed,
        Some(Offset::Offset(7)),
        "offsets after the coordinator's ({coordinator}) death, asked through {survivor}; the client last saw {seen}; \
         the brokers answer {}\n{}",
        coordinator_answers(&cluster, coordinator, "survivors", "grouped"),
        cluster.log_tails()
    );
    second.subscribe(&["grouped"]).expect("subscribe");
    let message = wait_until(SETTLE, || {
        second
            .poll(Duration::from_millis(500))
            .and_then(Result::ok)
            .map(|m| (m.offset(), m.payload().map(<[u8]>::to_vec)))
    });
    assert_eq!(message, Some((7, Some(b"v7".to_vec()))));
}

/// What each live broker answers to FindCoordinator for `group`, and what the coordinator
/// it names answers to OffsetFetch for `topic`-0 (raw requests, for a failure's message:
/// tells a broker-side answer from a client-side retry problem).
fn coordinator_answers(cluster: &Cluster, dead: i32, group: &str, topic: &str) -> String {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{
        FindCoordinatorRequest, FindCoordinatorResponse, GroupId, OffsetFetchRequest,
        OffsetFetchResponse, TopicName,
    };
    use kafka_protocol::protocol::StrBytes;
    let mut out = Vec::new();
    for node in cluster.nodes().iter().filter(|n| n.node_id() != dead) {
        let mut stream = crate::wire::connect(node.addr());
        let found: FindCoordinatorResponse = crate::wire::round_trip(
            &mut stream,
            3,
            1,
            &FindCoordinatorRequest::default().with_key(StrBytes::from_string(group.to_owned())),
        );
        let named = cluster
            .nodes()
            .iter()
            .find(|n| n.node_id() == found.node_id.0)
            .filter(|n| n.node_id() != dead);
        let fetched = named.map(|n| {
            let mut stream = crate::wire::connect(n.addr());
            let answer: OffsetFetchResponse = crate::wire::round_trip(
                &mut stream,
                5,
                2,
                &OffsetFetchRequest::default()
                    .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
                    .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                        .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                        .with_partition_indexes(vec![0])])),
            );
            let partition = answer
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .map(|p| (p.committed_offset, p.error_code));
            format!(
                "OffsetFetch error {} partition {partition:?}",
                answer.error_code
            )
        });
        out.push(format!(
            "node {}: FindCoordinator error {} node {}; {}",
            node.node_id(),
            found.error_code,
            found.node_id.0,
            fetched.unwrap_or_else(|| "no live coordinator named".to_owned())
        ));
    }
    out.join("; ")
}

/// Kafka's `partitionFor`: the group's `__consumer_offsets` partition
/// (`abs(String.hashCode) % partitions`, with Java's `Utils.abs`).
fn kafka_partition_for(group: &str, partitions: usize) -> usize {
    let mut hash: i32 = 0;
    for unit in group.encode_utf16() {
        hash = hash.wrapping_mul(31).wrapping_add(i32::from(unit));
    }
    let positive = if hash == i32::MIN { 0 } else { hash.abs() };
    usize::try_from(positive).expect("non-negative") % partitions.max(1)
}

// A node whose two peers were SIGKILLed has a controller quorum without a majority: its
// shutdown heartbeat is never answered and openraft retries the peers forever. SIGTERM
// still ends it with exit status 0 within the harness's shutdown timeout (it never exited
// before the shutdown steps were bounded).
#[test]
fn the_last_node_standing_stops_on_sigterm() {
    let _serial = crate::serial();
    let mut cluster = Cluster::start(&ClusterSpec::quorum(3));
    wait_until(SETTLE, || {
        (metadata(&cluster.bootstrap(), None, Duration::from_secs(3))
            .ok()?
            .brokers
            .len()
            == 3)
            .then_some(())
    })
    .unwrap_or_else(|| panic!("three brokers never registered\n{}", cluster.log_tails()));
    cluster.node_mut(1).kill();
    cluster.node_mut(2).kill();
    let status = cluster.node_mut(3).terminate();
    assert!(status.success(), "exit status {status}");
    assert!(
        cluster.node(3).log().contains("server: shutdown complete"),
        "no clean-shutdown line\n{}",
        cluster.log_tails()
    );
}
