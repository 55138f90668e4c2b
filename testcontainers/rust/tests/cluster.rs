//! A three-node cluster (the Java module's LogbookClusterTest): a partition's leader is
//! killed (SIGKILL, no graceful hand-over), and nothing acknowledged with `acks=all` is lost.
//!
//! Needs Docker and the image; starts three brokers at once.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication, TopicResult};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use testcontainers_logbook::{LogbookCluster, LogbookContainer};

const TIMEOUT: Duration = Duration::from_secs(30);
/// How long one record may take to be acknowledged: across the leader's death, the
/// controller first has to notice it gone (its session times out) and elect another.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(60);

fn config(bootstrap: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    config
}

/// The node leading partition 0 of `topic`, as the brokers at `bootstrap` report it.
fn leader_of(bootstrap: &str, topic: &str) -> usize {
    let consumer: BaseConsumer = config(bootstrap).create().expect("metadata client");
    let metadata = consumer
        .fetch_metadata(Some(topic), TIMEOUT)
        .expect("metadata");
    let partition = &metadata.topics()[0].partitions()[0];
    assert_eq!(partition.id(), 0);
    usize::try_from(partition.leader()).expect("a leader")
}

/// Sends `v<i>` for each `i` of `range` to partition 0 of `topic`, one at a time (each
/// acknowledged before the next, as the Java test's `send().get()`); their offsets.
async fn produce(producer: &FutureProducer, topic: &str, range: std::ops::Range<i64>) -> Vec<i64> {
    let mut offsets = Vec::new();
    for i in range {
        let value = format!("v{i}");
        let delivery = producer
            .send(
                FutureRecord::to(topic)
                    .partition(0)
                    .key("k")
                    .payload(&value),
                DELIVERY_TIMEOUT,
            )
            .await
            .unwrap_or_else(|(e, _)| panic!("record v{i} not acknowledged: {e}"));
        assert_eq!(delivery.partition, 0);
        offsets.push(delivery.offset);
    }
    offsets
}

#[tokio::test]
async fn a_killed_leader_loses_nothing_acknowledged() {
    let cluster = LogbookCluster::start(3).await.expect("3 nodes start");
    let bootstrap = cluster.bootstrap_servers().await;
    assert_eq!(bootstrap.split(',').count(), 3, "{bootstrap}");
    assert_eq!(
        cluster.network_bootstrap_servers(),
        "logbook-1:9093,logbook-2:9093,logbook-3:9093"
    );
    for id in 1..=3 {
        assert_eq!(
            cluster.node(id).network_bootstrap_servers(),
            format!("logbook-{id}:9093")
        );
    }

    let admin: AdminClient<DefaultClientContext> = config(&bootstrap).create().expect("admin");
    let created = admin
        .create_topics(
            &[NewTopic::new("replicated", 1, TopicReplication::Fixed(3))
                .set("min.insync.replicas", "2")],
            &AdminOptions::new().operation_timeout(Some(TIMEOUT)),
        )
        .await
        .expect("CreateTopics");
    let expected: Vec<TopicResult> = vec![Ok("replicated".to_string())];
    assert_eq!(created, expected);
    drop(admin);

    let producer: FutureProducer = config(&bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("message.timeout.ms", "60000")
        .create()
        .expect("producer");
    assert_eq!(
        produce(&producer, "replicated", 0..100).await,
        (0..100).collect::<Vec<i64>>()
    );

    let leader = leader_of(&bootstrap, "replicated");
    assert!((1..=3).contains(&leader), "leader {leader}");
    let doomed = cluster.node(leader).bootstrap_servers();
    cluster.kill(leader).await.expect("leader killed");
    assert!(!cluster
        .node(leader)
        .is_running()
        .await
        .expect("container state"));
    let survivors = cluster.bootstrap_servers().await;
    let expected_survivors: Vec<String> = (1..=3)
        .filter(|&id| id != leader)
        .map(|id| cluster.node(id).bootstrap_servers())
        .collect();
    assert_eq!(survivors, expected_survivors.join(","));
    assert!(!survivors.split(',').any(|node| node == doomed));

    assert_eq!(
        produce(&producer, "replicated", 100..200).await,
        (100..200).collect::<Vec<i64>>(),
        "each record once, after the acknowledged 100"
    );
    drop(producer);
    let new_leader = leader_of(&survivors, "replicated");
    assert_ne!(
        new_leader, leader,
        "the partition moved off the killed node"
    );
    assert!((1..=3).contains(&new_leader), "new leader {new_leader}");

    // A consumer on the survivors reads exactly what was acknowledged, in order.
    let consumer: BaseConsumer = config(&survivors)
        .set("group.id", "survivors")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset("replicated", 0, Offset::Beginning)
        .expect("assignment");
    consumer.assign(&assignment).expect("assign");
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + TIMEOUT;
    while seen.len() < 200 && std::time::Instant::now() < deadline {
        if let Some(message) = consumer.poll(Duration::from_millis(200)) {
            let message = message.expect("no consumer error");
            let value = String::from_utf8_lossy(message.payload().unwrap_or_default()).into_owned();
            seen.push(format!("{}:{value}", message.offset()));
        }
    }
    let expected: Vec<String> = (0..200).map(|i| format!("{i}:v{i}")).collect();
    assert_eq!(seen, expected);
    assert_eq!(
        consumer
            .fetch_watermarks("replicated", 0, TIMEOUT)
            .expect("watermarks"),
        (0, 200)
    );
}

#[tokio::test]
async fn an_empty_cluster_is_refused() {
    let error = LogbookCluster::start(0)
        .await
        .expect_err("no cluster of 0 nodes");
    assert_eq!(
        error.to_string(),
        "other error: a Logbook cluster needs at least one node"
    );
}
