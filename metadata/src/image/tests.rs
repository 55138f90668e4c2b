use std::collections::BTreeSet;

use super::*;
use crate::records::{
    ClusterIdRecord, ConfigRecord, FeatureLevelRecord, LeaderRecoveryState, MetadataBatch,
    MetadataRecord, PartitionChangeRecord, ProducerIdsRecord, RemoveTopicRecord,
    UnregisterBrokerRecord, NO_LEADER,
};
use crate::test_support::{apply_ok, fence, partition, register, topic, topic_id};
use crate::Error;

fn rejected(image: &MetadataImage, records: Vec<MetadataRecord>) -> (MetadataImage, Error) {
    let offset = image.offset() + 1;
    let (next, delta) = image.apply(offset, &MetadataBatch(records));
    let rejected = delta.rejected.clone().expect("batch should be rejected");
    // A rejected batch changes nothing but the offset, and the delta says only why.
    assert_eq!(next.offset(), offset);
    assert_eq!(next.to_records(), image.to_records());
    assert!(delta.is_empty(), "{delta:?}");
    (next, rejected.error)
}

fn three_brokers() -> MetadataImage {
    apply_ok(
        &MetadataImage::empty(),
        vec![register(1, 1), register(2, 1), register(3, 1)],
    )
}

fn config(
    resource_type: ConfigResourceType,
    name: &str,
    key: &str,
    value: Option<&str>,
) -> MetadataRecord {
    MetadataRecord::Config(ConfigRecord {
        resource_type,
        resource_name: name.to_string(),
        name: key.to_string(),
        value: value.map(str::to_string),
    })
}

// The empty image: offset -1, nothing registered, producer ids from 0.
#[test]
fn empty_image() {
    let image = MetadataImage::empty();
    assert_eq!(image.offset(), -1);
    assert_eq!(image.cluster_id(), None);
    assert_eq!(image.brokers().count(), 0);
    assert_eq!(image.topics().count(), 0);
    assert_eq!(image.next_producer_id(), 0);
    assert!(image.to_records().is_empty());
}

// Feature levels are set, changed, and removed by level 0.
#[test]
fn feature_level_record() {
    let level = |l| {
        MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: "metadata.version".to_string(),
            level: l,
        })
    };
    let (image, delta) = MetadataImage::empty().apply(0, &MetadataBatch(vec![level(20)]));
    assert_eq!(image.feature_level("metadata.version"), Some(20));
    assert_eq!(
        delta.features_changed,
        BTreeSet::from(["metadata.version".to_string()])
    );
    let (same, delta) = image.apply(1, &MetadataBatch(vec![level(20)]));
    assert!(delta.is_empty());
    let (removed, delta) = same.apply(2, &MetadataBatch(vec![level(0)]));
    assert_eq!(removed.feature_level("metadata.version"), None);
    assert_eq!(delta.features_changed.len(), 1);
}

// The cluster id is set once; the same id again is a no-op, another one is rejected.
#[test]
fn cluster_id_record() {
    let id = |s: &str| {
        MetadataRecord::ClusterId(ClusterIdRecord {
            cluster_id: s.to_string(),
        })
    };
    let (image, delta) = MetadataImage::empty().apply(0, &MetadataBatch(vec![id("a")]));
    assert_eq!(image.cluster_id(), Some("a"));
    assert!(delta.cluster_id_changed);
    let (image, delta) = image.apply(1, &MetadataBatch(vec![id("a")]));
    assert!(delta.is_empty() && delta.rejected.is_none());
    let (_, error) = rejected(&image, vec![id("b")]);
    assert_eq!(
        error,
        Error::ClusterIdMismatch {
            current: "a".to_string(),
            new: "b".to_string()
        }
    );
}

// Registration, fencing, controlled shutdown and unregistration, each guarded by the
// broker epoch; the queries the broker and placement use follow.
#[test]
fn broker_records() {
    let image = three_brokers();
    assert_eq!(image.usable_brokers(), vec![1, 2, 3]);
    let b2 = image.broker(2).expect("registered");
    assert_eq!((b2.broker_epoch, b2.fenced), (1, false));
    assert_eq!(b2.endpoints[0].port, 9094);

    let image = apply_ok(&image, vec![fence(2, 1, true)]);
    assert!(image.broker(2).expect("registered").fenced);
    assert_eq!(image.usable_brokers(), vec![1, 3]);
    assert_eq!(
        image
            .unfenced_brokers()
            .map(|b| b.broker_id)
            .collect::<Vec<_>>(),
        vec![1, 3]
    );
    assert!(!image.is_active_broker(2));

    let shutdown =
        MetadataRecord::BrokerRegistrationChange(crate::BrokerRegistrationChangeRecord {
            broker_id: 3,
            broker_epoch: 1,
            fenced: None,
            in_controlled_shutdown: Some(true),
        });
    let (image, delta) = image.apply(image.offset() + 1, &MetadataBatch(vec![shutdown]));
    assert_eq!(delta.brokers_changed, BTreeSet::from([3]));
    assert_eq!(image.usable_brokers(), vec![1]);
    // Shutting down is still unfenced: clients still see it.
    assert_eq!(image.unfenced_brokers().count(), 2);

    // A change for an older incarnation's epoch is refused.
    let (image, error) = rejected(&image, vec![fence(2, 0, false)]);
    assert_eq!(
        error,
        Error::StaleBrokerEpoch {
            broker_id: 2,
            epoch: 0,
            current: 1
        }
    );
    // Re-registration needs a greater epoch, and replaces the registration.
    let (image, error) = rejected(&image, vec![register(2, 1)]);
    assert!(matches!(
        error,
        Error::StaleBrokerEpoch { broker_id: 2, .. }
    ));
    let image = apply_ok(&image, vec![register(2, 9)]);
    let b2 = image.broker(2).expect("registered");
    assert_eq!((b2.broker_epoch, b2.fenced), (9, false));

    let unregister = |epoch| {
        MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
            broker_id: 2,
            broker_epoch: epoch,
        })
    };
    let (image, _) = rejected(&image, vec![unregister(1)]);
    let image = apply_ok(&image, vec![unregister(9)]);
    assert_eq!(image.broker(2), None);
    let (_, error) = rejected(&image, vec![fence(2, 9, true)]);
    assert_eq!(error, Error::UnknownBroker { broker_id: 2 });
}

// Topics by name and id; partitions created in order with valid registrations.
#[test]
fn topic_and_partition_records() {
    let image = three_brokers();
    let id = topic_id(1);
    let (image, delta) = image.apply(
        image.offset() + 1,
        &MetadataBatch(topic("orders", id, &[&[1, 2], &[2, 3]])),
    );
    assert_eq!(delta.rejected, None);
    assert_eq!(delta.topics_created, BTreeSet::from([id]));
    assert_eq!(
        delta.partitions_created,
        BTreeSet::from([
            TopicIdPartition {
                topic_id: id,
                partition: 0
            },
            TopicIdPartition {
                topic_id: id,
                partition: 1
            }
        ])
    );
    let t = image.topic("orders").expect("topic");
    assert_eq!(t.id, id);
    assert_eq!(
        image.topic_by_id(&id).map(|t| t.name.as_str()),
        Some("orders")
    );
    let p1 = image.partition(&id, 1).expect("partition");
    assert_eq!(
        (p1.leader, p1.isr.clone(), p1.leader_epoch),
        (2, vec![2, 3], 0)
    );
    assert_eq!(image.partition(&id, 2), None);
    assert_eq!(image.partition(&id, -1), None);

    // Duplicate name or id.
    let (image, error) = rejected(&image, topic("orders", topic_id(2), &[]));
    assert_eq!(
        error,
        Error::TopicAlreadyExists {
            name: "orders".to_string()
        }
    );
    let (image, error) = rejected(&image, topic("other", id, &[]));
    assert_eq!(error, Error::TopicIdAlreadyExists { topic_id: id });
    // Partition 3 before 2.
    let (image, error) = rejected(&image, vec![partition(id, 3, &[1])]);
    assert_eq!(
        error,
        Error::PartitionOutOfOrder {
            topic_id: id,
            partition_id: 3,
            next: 2
        }
    );
    // Unknown topic.
    let (image, error) = rejected(&image, vec![partition(topic_id(9), 0, &[1])]);
    assert_eq!(
        error,
        Error::UnknownTopicId {
            topic_id: topic_id(9)
        }
    );
    // Invalid registrations: leader outside the ISR, empty ISR, duplicate replicas.
    for (bad, reason) in [
        (
            crate::PartitionRecord {
                leader: 3,
                isr: vec![1],
                ..record(id, 2, &[1, 3])
            },
            "leader 3 not in ISR [1]",
        ),
        (
            crate::PartitionRecord {
                isr: vec![],
                leader: NO_LEADER,
                ..record(id, 2, &[1])
            },
            "empty ISR",
        ),
        (record(id, 2, &[1, 1]), "duplicate replicas [1, 1]"),
        (
            crate::PartitionRecord {
                isr: vec![1, 4],
                ..record(id, 2, &[1, 2])
            },
            "ISR member 4 is not a replica [1, 2]",
        ),
    ] {
        let (_, error) = rejected(&image, vec![MetadataRecord::Partition(bad)]);
        assert_eq!(
            error,
            Error::InvalidPartition {
                topic_id: id,
                partition_id: 2,
                reason: reason.to_string()
            }
        );
    }
    // CreatePartitions: the next index.
    let (image, delta) = image.apply(
        image.offset() + 1,
        &MetadataBatch(vec![partition(id, 2, &[3, 1])]),
    );
    assert_eq!(delta.partitions_created.len(), 1);
    assert_eq!(image.topic("orders").expect("topic").partitions.len(), 3);
}

fn record(id: uuid::Uuid, p: i32, replicas: &[i32]) -> crate::PartitionRecord {
    let MetadataRecord::Partition(r) = partition(id, p, replicas) else {
        unreachable!("partition() builds a PartitionRecord")
    };
    r
}

// Removing a topic drops it, its name, and its configs; the delta keeps its last image.
#[test]
fn remove_topic_record() {
    let id = topic_id(1);
    let mut records = topic("orders", id, &[&[1]]);
    records.push(config(
        ConfigResourceType::Topic,
        "orders",
        "retention.ms",
        Some("1000"),
    ));
    let image = apply_ok(&three_brokers(), records);
    assert_eq!(
        image
            .topic_configs("orders")
            .get("retention.ms")
            .map(String::as_str),
        Some("1000")
    );
    let (image, delta) = image.apply(
        image.offset() + 1,
        &MetadataBatch(vec![MetadataRecord::RemoveTopic(RemoveTopicRecord {
            topic_id: id,
        })]),
    );
    assert_eq!(image.topic("orders"), None);
    assert_eq!(image.topic_by_id(&id), None);
    assert!(image.topic_configs("orders").is_empty());
    assert_eq!(
        delta.topics_deleted.get(&id).map(|t| t.name.as_str()),
        Some("orders")
    );
    assert_eq!(
        delta.configs_changed,
        BTreeSet::from([ConfigResource::topic("orders")])
    );
    // The name is free again.
    let image = apply_ok(&image, topic("orders", topic_id(2), &[&[2]]));
    assert_eq!(image.topic("orders").map(|t| t.id), Some(topic_id(2)));
    let (_, error) = rejected(
        &image,
        vec![MetadataRecord::RemoveTopic(RemoveTopicRecord {
            topic_id: id,
        })],
    );
    assert_eq!(error, Error::UnknownTopicId { topic_id: id });
}

// A topic created and deleted in one batch shows in neither list of the delta.
#[test]
fn create_and_delete_in_one_batch() {
    let id = topic_id(1);
    let mut records = topic("t", id, &[&[1]]);
    records.push(MetadataRecord::RemoveTopic(RemoveTopicRecord {
        topic_id: id,
    }));
    let (image, delta) = three_brokers().apply(1, &MetadataBatch(records));
    assert_eq!(delta.rejected, None);
    assert!(delta.is_empty(), "{delta:?}");
    assert_eq!(image.topics().count(), 0);
}

// A partition change merges: a `Some` leader bumps the leader epoch (even the same
// leader), every change bumps the partition epoch, and a change from a stale partition
// epoch is rejected (compare-and-set).
#[test]
fn partition_change_record() {
    let id = topic_id(1);
    let image = apply_ok(&three_brokers(), topic("t", id, &[&[1, 2, 3]]));
    let tp = TopicIdPartition {
        topic_id: id,
        partition: 0,
    };
    let shrink = MetadataRecord::PartitionChange(PartitionChangeRecord {
        topic_id: id,
        partition_id: 0,
        partition_epoch: 0,
        isr: Some(vec![1, 2]),
        ..PartitionChangeRecord::default()
    });
    let (image, delta) = image.apply(image.offset() + 1, &MetadataBatch(vec![shrink.clone()]));
    assert_eq!(delta.partitions_changed, BTreeSet::from([tp]));
    let p = image.partition(&id, 0).expect("partition");
    assert_eq!(
        (p.isr.clone(), p.leader, p.leader_epoch, p.partition_epoch),
        (vec![1, 2], 1, 0, 1)
    );

    // The same change again was computed from epoch 0: stale now.
    let (image, error) = rejected(&image, vec![shrink]);
    assert_eq!(
        error,
        Error::StalePartitionEpoch {
            topic_id: id,
            partition_id: 0,
            expected: 0,
            current: 1
        }
    );
    let elect = MetadataRecord::PartitionChange(PartitionChangeRecord {
        topic_id: id,
        partition_id: 0,
        partition_epoch: 1,
        leader: Some(2),
        ..PartitionChangeRecord::default()
    });
    let image = apply_ok(&image, vec![elect]);
    let p = image.partition(&id, 0).expect("partition");
    assert_eq!((p.leader, p.leader_epoch, p.partition_epoch), (2, 1, 2));

    // A merge that breaks an invariant (leader outside the new ISR) is rejected.
    let bad = MetadataRecord::PartitionChange(PartitionChangeRecord {
        topic_id: id,
        partition_id: 0,
        partition_epoch: 2,
        isr: Some(vec![1]),
        ..PartitionChangeRecord::default()
    });
    let (image, error) = rejected(&image, vec![bad]);
    assert!(matches!(error, Error::InvalidPartition { .. }), "{error:?}");
    let recovering = MetadataRecord::PartitionChange(PartitionChangeRecord {
        topic_id: id,
        partition_id: 0,
        partition_epoch: 2,
        leader_recovery_state: Some(LeaderRecoveryState::Recovering),
        ..PartitionChangeRecord::default()
    });
    let image = apply_ok(&image, vec![recovering]);
    assert_eq!(
        image.partition(&id, 0).map(|p| p.leader_recovery_state),
        Some(LeaderRecoveryState::Recovering)
    );
    let (_, error) = rejected(
        &image,
        vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
            topic_id: id,
            partition_id: 1,
            partition_epoch: 0,
            ..PartitionChangeRecord::default()
        })],
    );
    assert_eq!(
        error,
        Error::UnknownPartition {
            topic_id: id,
            partition_id: 1
        }
    );
}

// Configs per topic, per broker and cluster default; `None` deletes; bad names refused.
#[test]
fn config_record() {
    let image = apply_ok(
        &three_brokers(),
        vec![
            config(ConfigResourceType::Topic, "t", "retention.ms", Some("5")),
            config(
                ConfigResourceType::Broker,
                "2",
                "log.cleaner.threads",
                Some("2"),
            ),
            config(
                ConfigResourceType::Broker,
                "",
                "log.retention.ms",
                Some("7"),
            ),
        ],
    );
    assert_eq!(
        image
            .topic_configs("t")
            .get("retention.ms")
            .map(String::as_str),
        Some("5")
    );
    assert_eq!(
        image
            .broker_configs(2)
            .get("log.cleaner.threads")
            .map(String::as_str),
        Some("2")
    );
    assert!(image.broker_configs(1).is_empty());
    assert_eq!(
        image
            .cluster_default_configs()
            .get("log.retention.ms")
            .map(String::as_str),
        Some("7")
    );

    let (image, delta) = image.apply(
        image.offset() + 1,
        &MetadataBatch(vec![
            config(ConfigResourceType::Topic, "t", "retention.ms", None),
            config(ConfigResourceType::Topic, "t", "never.set", None),
        ]),
    );
    assert!(image.topic_configs("t").is_empty());
    assert_eq!(
        delta.configs_changed,
        BTreeSet::from([ConfigResource::topic("t")])
    );
    assert_eq!(image.all_configs().count(), 2);

    let (image, error) = rejected(
        &image,
        vec![config(ConfigResourceType::Topic, "", "a", Some("b"))],
    );
    assert!(matches!(error, Error::InvalidConfigResource { .. }));
    let (_, error) = rejected(
        &image,
        vec![config(ConfigResourceType::Broker, "x1", "a", Some("b"))],
    );
    assert!(matches!(error, Error::InvalidConfigResource { .. }));
}

// Producer id blocks only move forward.
#[test]
fn producer_ids_record() {
    let block = |next| {
        MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: 1,
            broker_epoch: 1,
            next_producer_id: next,
        })
    };
    let image = apply_ok(&three_brokers(), vec![block(1000)]);
    assert_eq!(image.next_producer_id(), 1000);
    assert_eq!(image.producer_ids().map(|p| p.broker_id), Some(1));
    let (image, error) = rejected(&image, vec![block(1000)]);
    assert_eq!(
        error,
        Error::ProducerIdsNotIncreasing {
            next_producer_id: 1000,
            current: 1000
        }
    );
    let image = apply_ok(&image, vec![block(2000)]);
    assert_eq!(image.next_producer_id(), 2000);
}

// A batch is atomic: an invalid third record undoes the first two.
#[test]
fn invalid_record_rejects_the_whole_batch() {
    let image = three_brokers();
    let mut records = topic("t", topic_id(1), &[&[1]]);
    records.push(partition(topic_id(1), 5, &[1]));
    let (next, delta) = image.apply(7, &MetadataBatch(records));
    assert_eq!(next.offset(), 7);
    assert_eq!(next.topic("t"), None);
    assert_eq!(
        delta.rejected,
        Some(RejectedBatch {
            record_index: 2,
            error: Error::PartitionOutOfOrder {
                topic_id: topic_id(1),
                partition_id: 5,
                next: 1
            }
        })
    );
}

// Images are values: an old image is unchanged by applying to it, and clones are equal.
#[test]
fn images_are_immutable() {
    let before = three_brokers();
    let copy = before.clone();
    let after = apply_ok(&before, vec![fence(1, 1, true)]);
    assert_eq!(before, copy);
    assert!(!before.broker(1).expect("registered").fenced);
    assert!(after.broker(1).expect("registered").fenced);
}

// The log is applied in order: an offset that does not grow is a caller bug.
#[test]
#[should_panic(expected = "batch offset 0 not above the image's 0")]
fn offsets_must_grow() {
    let image = apply_ok(&MetadataImage::empty(), vec![register(1, 1)]);
    let _ = image.apply(0, &MetadataBatch(vec![]));
}

// Offline replicas are those on fenced or unregistered brokers; replica counts cover every
// assignment (for partition budgets).
#[test]
fn offline_replicas_and_replica_counts() {
    let id = topic_id(1);
    let image = apply_ok(&three_brokers(), topic("t", id, &[&[1, 2, 3], &[2, 3, 4]]));
    let image = apply_ok(&image, vec![fence(3, 1, true)]);
    let p0 = image.partition(&id, 0).expect("p0").clone();
    let p1 = image.partition(&id, 1).expect("p1").clone();
    assert_eq!(image.offline_replicas(&p0), vec![3]);
    assert_eq!(image.offline_replicas(&p1), vec![3, 4]);
    assert_eq!(
        image.replica_counts(),
        std::collections::BTreeMap::from([(1, 1), (2, 2), (3, 2), (4, 1)])
    );
}

// A SCRAM credential replaces the user's earlier one of the same mechanism, sits beside
// the other mechanism's, survives a snapshot, and is gone once removed.
#[test]
fn scram_credentials() {
    use crate::records::{RemoveUserScramCredentialRecord, UserScramCredentialRecord};
    let credential = |mechanism: i8, iterations: i32| {
        MetadataRecord::UserScramCredential(UserScramCredentialRecord {
            name: "alice".to_string(),
            mechanism,
            salt: vec![1, 2],
            stored_key: vec![3],
            server_key: vec![4],
            iterations,
        })
    };
    let image = apply_ok(&MetadataImage::empty(), vec![credential(1, 4096)]);
    let image = apply_ok(&image, vec![credential(1, 8192), credential(2, 4096)]);
    assert_eq!(
        image.scram_credential("alice", 1).map(|c| c.iterations),
        Some(8192)
    );
    assert_eq!(image.scram_credentials().count(), 2);
    let rebuilt =
        MetadataImage::from_records(image.offset(), image.to_records()).expect("snapshot");
    assert_eq!(
        rebuilt.scram_credential("alice", 2).map(|c| c.iterations),
        Some(4096)
    );
    let image = apply_ok(
        &image,
        vec![MetadataRecord::RemoveUserScramCredential(
            RemoveUserScramCredentialRecord {
                name: "alice".to_string(),
                mechanism: 1,
            },
        )],
    );
    assert!(image.scram_credential("alice", 1).is_none());
    assert!(image.scram_credential("bob", 2).is_none());
}

// An ACL record lands in the image's AclCache, survives a snapshot (JSON included), and
// its removal by id takes it out; a removal of an unknown id changes nothing.
#[test]
fn acls_in_the_image() {
    use crate::acls::{operation, pattern_type, permission, resource_type, AclBinding};
    use crate::records::{AccessControlEntryRecord, RemoveAccessControlEntryRecord};
    let record = AccessControlEntryRecord {
        id: uuid::Uuid::from_u128(7),
        binding: AclBinding {
            resource_type: resource_type::TOPIC,
            resource_name: "orders".to_string(),
            pattern_type: pattern_type::LITERAL,
            principal: "User:alice".to_string(),
            host: "*".to_string(),
            operation: operation::READ,
            permission_type: permission::ALLOW,
        },
    };
    let json =
        serde_json::to_string(&MetadataRecord::AccessControlEntry(record.clone())).expect("json");
    let back: MetadataRecord = serde_json::from_str(&json).expect("parse");
    assert_eq!(back, MetadataRecord::AccessControlEntry(record.clone()));
    let image = apply_ok(&MetadataImage::empty(), vec![back]);
    assert_eq!(image.acls().len(), 1);
    assert!(image.acls().contains(&record.binding));
    let rebuilt =
        MetadataImage::from_records(image.offset(), image.to_records()).expect("snapshot");
    assert_eq!(rebuilt.acls(), image.acls());
    let remove = |id: u128| {
        MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord {
            id: uuid::Uuid::from_u128(id),
        })
    };
    let (same, delta) = image.apply(image.offset() + 1, &crate::MetadataBatch(vec![remove(8)]));
    assert!(!delta.acls_changed);
    assert_eq!(same.acls().len(), 1);
    let image = apply_ok(&image, vec![remove(7)]);
    assert!(image.acls().is_empty());
}
