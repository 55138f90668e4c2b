//! MetadataStateMachine driven through the `StateMachine` trait directly (no Raft): what
//! it applies, publishes, snapshots and installs.

use std::time::Duration;

use logbook_metadata::{
    ClusterIdRecord, MetadataBatch, MetadataRecord, ProducerIdsRecord, RegisterBrokerRecord,
};
use tokio::sync::mpsc;
use uuid::Uuid;

use super::*;

fn payload(records: Vec<MetadataRecord>) -> Payload {
    Payload::encode(&MetadataBatch(records)).expect("encode")
}

fn register(broker_id: i32, broker_epoch: i64) -> MetadataRecord {
    MetadataRecord::RegisterBroker(RegisterBrokerRecord {
        broker_id,
        incarnation_id: Uuid::from_u128(7),
        broker_epoch,
        endpoints: Vec::new(),
        rack: None,
        fenced: true,
        in_controlled_shutdown: false,
        partitions_max: None,
    })
}

fn producer_ids(next_producer_id: i64) -> MetadataRecord {
    MetadataRecord::ProducerIds(ProducerIdsRecord {
        broker_id: 1,
        broker_epoch: 1,
        next_producer_id,
    })
}

// Every applied batch is published in log order with its delta, and the publisher's
// bound holds the next apply back until it reads (nothing is dropped); a rejected batch
// is recorded at its offset for the controller.
#[tokio::test]
async fn publishes_in_log_order_and_waits_for_the_publisher() {
    let (tx, mut rx) = mpsc::channel(1);
    let mut sm = MetadataStateMachine::new(Some(tx));
    let applied = sm.subscribe();
    sm.apply(1, &payload(vec![register(1, 1)]))
        .await
        .expect("apply");
    // The queue is full: the next apply waits for the publisher.
    {
        let second_payload = payload(vec![producer_ids(1000)]);
        let second_apply = sm.apply(3, &second_payload);
        tokio::pin!(second_apply);
        let blocked = tokio::time::timeout(Duration::from_millis(100), &mut second_apply).await;
        assert!(blocked.is_err(), "apply did not wait for a full publisher");
        let first = rx.recv().await.expect("first");
        assert_eq!(first.delta.offset, 1);
        assert!(first.delta.brokers_changed.contains(&1));
        second_apply.await.expect("apply");
    }
    let second = rx.recv().await.expect("second");
    assert_eq!(second.delta.offset, 3);
    assert!(second.delta.producer_ids_changed);
    assert_eq!(applied.borrow().image.next_producer_id(), 1000);

    // A producer-id block that does not grow is rejected, and recorded at its offset.
    sm.apply(4, &payload(vec![producer_ids(10)]))
        .await
        .expect("apply");
    let rejected = rx.recv().await.expect("rejected");
    assert!(rejected.delta.rejected.is_some());
    let last = applied.borrow().clone();
    assert_eq!(last.image.offset(), 4);
    assert_eq!(last.image.next_producer_id(), 1000);
    assert_eq!(last.last_rejected.map(|(offset, _)| offset), Some(4));
}

// A snapshot installs into an image equal to the one it was taken from, and reaches the
// publisher; undecodable entries are an error, not a skipped batch.
#[tokio::test]
async fn snapshot_round_trips_and_bad_entries_fail() {
    let mut sm = MetadataStateMachine::new(None);
    sm.apply(
        1,
        &payload(vec![
            MetadataRecord::ClusterId(ClusterIdRecord {
                cluster_id: "AAAAAAAAAAAAAAAAAAAAAA".to_string(),
            }),
            register(1, 1),
        ]),
    )
    .await
    .expect("apply");
    sm.apply(2, &payload(vec![producer_ids(2000)]))
        .await
        .expect("apply");
    let bytes = sm.snapshot().expect("snapshot");

    let (tx, mut rx) = mpsc::channel(4);
    let mut other = MetadataStateMachine::new(Some(tx));
    other.install_snapshot(Some(2), &bytes).expect("install");
    assert_eq!(
        other.subscribe().borrow().image,
        sm.subscribe().borrow().image
    );
    let published = rx.recv().await.expect("published");
    assert_eq!(published.image.offset(), 2);

    let bad = Payload::from_json("{\"v\":1,\"records\":[{\"type\":\"NoSuchRecord\"}]}".to_string())
        .expect("json");
    assert!(other.apply(3, &bad).await.is_err());
    assert!(other.install_snapshot(Some(3), b"not json").is_err());
}
