//! Record builders shared by the unit tests and the model test.

use uuid::Uuid;

use crate::records::{
    BrokerEndpoint, BrokerId, BrokerRegistrationChangeRecord, LeaderRecoveryState, MetadataBatch,
    MetadataRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord,
};
use crate::MetadataImage;

/// A deterministic topic id from a small number.
pub fn topic_id(n: u128) -> Uuid {
    Uuid::from_u128(0x5eed_0000_0000_0000_0000_0000_0000_0000 + n)
}

/// An unfenced registration of broker `id` at `epoch`.
pub fn register(id: BrokerId, epoch: i64) -> MetadataRecord {
    MetadataRecord::RegisterBroker(RegisterBrokerRecord {
        broker_id: id,
        incarnation_id: Uuid::from_u128(u128::try_from(epoch).unwrap_or(0) << 32 | 7),
        broker_epoch: epoch,
        endpoints: vec![BrokerEndpoint {
            name: "PLAINTEXT".to_string(),
            host: "127.0.0.1".to_string(),
            port: u16::try_from(9092 + id).unwrap_or(9092),
            security_protocol: 0,
        }],
        rack: None,
        fenced: false,
        in_controlled_shutdown: false,
        partitions_max: None,
    })
}

/// A fencing change (`Some(true)` fences, `Some(false)` unfences).
pub fn fence(id: BrokerId, epoch: i64, fenced: bool) -> MetadataRecord {
    MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
        broker_id: id,
        broker_epoch: epoch,
        fenced: Some(fenced),
        in_controlled_shutdown: None,
    })
}

/// A new partition with `replicas`, all in sync, led by the first.
pub fn partition(topic: Uuid, partition_id: i32, replicas: &[BrokerId]) -> MetadataRecord {
    MetadataRecord::Partition(PartitionRecord {
        topic_id: topic,
        partition_id,
        replicas: replicas.to_vec(),
        isr: replicas.to_vec(),
        removing_replicas: Vec::new(),
        adding_replicas: Vec::new(),
        leader: replicas.first().copied().unwrap_or(-1),
        leader_epoch: 0,
        partition_epoch: 0,
        leader_recovery_state: LeaderRecoveryState::Recovered,
        elr: Vec::new(),
        last_known_elr: Vec::new(),
    })
}

/// A topic with one partition per replica list.
pub fn topic(name: &str, id: Uuid, assignment: &[&[BrokerId]]) -> Vec<MetadataRecord> {
    let mut records = vec![MetadataRecord::Topic(TopicRecord {
        name: name.to_string(),
        topic_id: id,
    })];
    for (p, replicas) in (0..).zip(assignment) {
        records.push(partition(id, p, replicas));
    }
    records
}

/// Applies `records` as one batch at the next offset, asserting it is accepted.
pub fn apply_ok(image: &MetadataImage, records: Vec<MetadataRecord>) -> MetadataImage {
    let (next, delta) = image.apply(image.offset() + 1, &MetadataBatch(records));
    assert_eq!(delta.rejected, None, "batch rejected");
    next
}
