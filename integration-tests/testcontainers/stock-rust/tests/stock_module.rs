//! testcontainers-modules' `kafka::apache::Kafka`, written for apache/kafka-native, on the
//! Logbook image (`LOGBOOK_IMAGE`, default `logbook:kafka-compat`) with only `with_name` and
//! `with_tag`: the module's bash entrypoint, the start script it writes into /opt/kafka and
//! its wait for "Kafka Server started" work unchanged, and rdkafka produces 10 records at
//! offsets 0..9 and reads exactly them back in a group through the port it maps.

use std::time::Duration;

use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Message};
use testcontainers_modules::kafka::apache;
use testcontainers_modules::testcontainers::runners::AsyncRunner;
use testcontainers_modules::testcontainers::ImageExt;

#[tokio::test]
async fn the_stock_apache_kafka_module_runs_logbook() {
    let image = std::env::var("LOGBOOK_IMAGE").unwrap_or_else(|_| "logbook:kafka-compat".into());
    let (name, tag) = image.split_once(':').expect("LOGBOOK_IMAGE is name:tag");
    let node = apache::Kafka::default()
        .with_name(name)
        .with_tag(tag)
        .start()
        .await
        .expect("the container starts and says it runs");
    let port = node
        .get_host_port_ipv4(apache::KAFKA_PORT)
        .await
        .expect("the mapped port");
    let bootstrap = format!("127.0.0.1:{port}");

    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .create()
        .expect("producer");
    let mut offsets = Vec::new();
    for i in 0..10 {
        let value = format!("v{i}");
        let key = format!("k{i}");
        let delivery = producer
            .send(
                FutureRecord::to("orders")
                    .partition(0)
                    .key(&key)
                    .payload(&value),
                Duration::from_secs(30),
            )
            .await
            .expect("delivered");
        offsets.push(delivery.offset);
    }
    assert_eq!(offsets, (0..10).collect::<Vec<i64>>());

    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .set("group.id", "stock-rust-module")
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .expect("consumer");
    consumer.subscribe(&["orders"]).expect("subscribe");
    let mut values = Vec::new();
    while values.len() < 10 {
        let message = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .expect("a record within 30 s")
            .expect("no error");
        values.push(String::from_utf8_lossy(message.payload().unwrap_or_default()).to_string());
    }
    consumer
        .commit_consumer_state(CommitMode::Sync)
        .expect("commit");
    let expected: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    assert_eq!(values, expected);
}
