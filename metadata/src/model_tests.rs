//! Model test: random sequences of controller operations (registrations, fencing,
//! controlled shutdown, topic creation and deletion, AlterPartition, elections,
//! reassignments, configs, producer ids) turned into batches by a small controller built
//! on `placement::assign` and `PartitionChangeBuilder`, as the QuorumController will be.
//! After every batch it checks the properties the plan lists: apply is deterministic, a
//! snapshot replays to an equal image, epochs never decrease, elections stay inside the
//! ISR unless unclean, the last ISR member is never removed, and the delta names exactly
//! what changed.

use std::collections::BTreeSet;

use proptest::prelude::*;
use uuid::Uuid;

use crate::placement::{self, PlacementStart};
use crate::records::{
    BrokerId, BrokerRegistrationChangeRecord, ConfigRecord, ConfigResourceType, FeatureLevelRecord,
    LeaderRecoveryState, MetadataBatch, MetadataRecord, PartitionChangeRecord, PartitionRecord,
    ProducerIdsRecord, RegisterBrokerRecord, RemoveTopicRecord, TopicRecord,
    UnregisterBrokerRecord, NO_LEADER,
};
use crate::snapshot::MetadataSnapshot;
use crate::test_support::register;
use crate::{Election, Error, MetadataImage, PartitionChangeBuilder, TopicIdPartition};

const BROKERS: i32 = 5;

#[derive(Clone, Debug)]
enum Op {
    Register(BrokerId),
    Fence(BrokerId),
    Unfence(BrokerId),
    ControlledShutdown(BrokerId),
    Unregister(BrokerId),
    CreateTopic {
        name: u8,
        partitions: i32,
        rf: i16,
        start: usize,
    },
    DeleteTopic(usize),
    CreatePartitions {
        topic: usize,
        count: i32,
        start: usize,
    },
    AlterIsr {
        topic: usize,
        partition: usize,
        members: Vec<bool>,
    },
    Elect {
        topic: usize,
        partition: usize,
        election: Election,
    },
    Reassign {
        topic: usize,
        partition: usize,
        target: Vec<BrokerId>,
    },
    SetConfig {
        broker: Option<BrokerId>,
        topic: u8,
        key: u8,
        value: Option<u8>,
    },
    ProducerIds(BrokerId),
    Feature(i16),
    /// A partition change from an older partition epoch: must be rejected.
    Stale {
        topic: usize,
        partition: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let broker = 0..BROKERS;
    let election = prop_oneof![
        Just(Election::Online),
        Just(Election::Preferred),
        Just(Election::Unclean)
    ];
    prop_oneof![
        broker.clone().prop_map(Op::Register),
        broker.clone().prop_map(Op::Fence),
        broker.clone().prop_map(Op::Unfence),
        broker.clone().prop_map(Op::ControlledShutdown),
        broker.clone().prop_map(Op::Unregister),
        (0u8..4, 1i32..5, 1i16..4, 0usize..10).prop_map(|(name, partitions, rf, start)| {
            Op::CreateTopic {
                name,
                partitions,
                rf,
                start,
            }
        }),
        any::<usize>().prop_map(Op::DeleteTopic),
        (any::<usize>(), 1i32..3, 0usize..10).prop_map(|(topic, count, start)| {
            Op::CreatePartitions {
                topic,
                count,
                start,
            }
        }),
        (
            any::<usize>(),
            any::<usize>(),
            prop::collection::vec(any::<bool>(), 5)
        )
            .prop_map(|(topic, partition, members)| Op::AlterIsr {
                topic,
                partition,
                members
            }),
        (any::<usize>(), any::<usize>(), election).prop_map(|(topic, partition, election)| {
            Op::Elect {
                topic,
                partition,
                election,
            }
        }),
        (
            any::<usize>(),
            any::<usize>(),
            prop::collection::vec(broker.clone(), 1..4)
        )
            .prop_map(|(topic, partition, target)| Op::Reassign {
                topic,
                partition,
                target
            }),
        (
            prop::option::of(broker.clone()),
            0u8..3,
            0u8..3,
            prop::option::of(0u8..3)
        )
            .prop_map(|(broker, topic, key, value)| Op::SetConfig {
                broker,
                topic,
                key,
                value
            }),
        broker.prop_map(Op::ProducerIds),
        (0i16..3).prop_map(Op::Feature),
        (any::<usize>(), any::<usize>())
            .prop_map(|(topic, partition)| Op::Stale { topic, partition }),
    ]
}

/// A partition picked by two random indexes, if any topic has partitions.
fn pick(image: &MetadataImage, topic: usize, partition: usize) -> Option<(Uuid, i32)> {
    let topics: Vec<_> = image
        .topics()
        .filter(|t| !t.partitions.is_empty())
        .collect();
    let t = topics.get(topic % topics.len().max(1))?;
    let p = partition % t.partitions.len();
    Some((t.id, i32::try_from(p).ok()?))
}

fn change_broker(
    id: BrokerId,
    epoch: i64,
    fenced: Option<bool>,
    shutdown: Option<bool>,
) -> MetadataRecord {
    MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
        broker_id: id,
        broker_epoch: epoch,
        fenced,
        in_controlled_shutdown: shutdown,
    })
}

/// Partition changes taking broker `b` out of every ISR (and leadership), as fencing and
/// controlled shutdown do in Kafka's `generateLeaderAndIsrUpdates`.
fn remove_from_isrs(image: &MetadataImage, b: BrokerId) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for t in image.topics() {
        for (p, reg) in (0..).zip(&t.partitions) {
            if !reg.isr.contains(&b) && reg.leader != b {
                continue;
            }
            let target: Vec<BrokerId> = reg.isr.iter().copied().filter(|r| *r != b).collect();
            let change =
                PartitionChangeBuilder::new(reg, t.id, p, |r| r != b && image.is_active_broker(r))
                    .with_target_isr(target)
                    .build();
            records.extend(change.map(MetadataRecord::PartitionChange));
        }
    }
    records
}

/// The batch the controller writes for `op` on `image`, if the op applies.
fn controller(image: &MetadataImage, op: &Op) -> Option<Vec<MetadataRecord>> {
    let next_offset = image.offset() + 1;
    match op {
        Op::Register(b) => {
            if image.broker(*b).is_some_and(|r| !r.fenced) {
                return None;
            }
            let MetadataRecord::RegisterBroker(r) = register(*b, next_offset) else {
                unreachable!("register() builds a registration")
            };
            Some(vec![MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                fenced: true,
                ..r
            })])
        }
        Op::Fence(b) => {
            let r = image.broker(*b).filter(|r| !r.fenced)?;
            let mut records = vec![change_broker(*b, r.broker_epoch, Some(true), None)];
            records.extend(remove_from_isrs(image, *b));
            Some(records)
        }
        Op::ControlledShutdown(b) => {
            let r = image.broker(*b).filter(|r| r.is_active())?;
            let mut records = vec![change_broker(*b, r.broker_epoch, None, Some(true))];
            records.extend(remove_from_isrs(image, *b));
            Some(records)
        }
        Op::Unfence(b) => {
            let r = image.broker(*b).filter(|r| !r.is_active())?;
            let mut records = vec![change_broker(*b, r.broker_epoch, Some(false), Some(false))];
            for t in image.topics() {
                for (p, reg) in (0..).zip(&t.partitions) {
                    if reg.has_leader() {
                        continue;
                    }
                    let change = PartitionChangeBuilder::new(reg, t.id, p, |x| {
                        x == *b || image.is_active_broker(x)
                    })
                    .build();
                    records.extend(change.map(MetadataRecord::PartitionChange));
                }
            }
            Some(records)
        }
        Op::Unregister(b) => {
            let r = image.broker(*b).filter(|r| r.fenced)?;
            Some(vec![MetadataRecord::UnregisterBroker(
                UnregisterBrokerRecord {
                    broker_id: *b,
                    broker_epoch: r.broker_epoch,
                },
            )])
        }
        Op::CreateTopic {
            name,
            partitions,
            rf,
            start,
        } => {
            let name = format!("t{name}");
            if image.topic(&name).is_some() {
                return None;
            }
            let assignment = placement::assign(
                *partitions,
                *rf,
                &image.usable_brokers(),
                0,
                PlacementStart::fixed(*start),
            )
            .ok()?;
            let topic_id = Uuid::from_u128(u128::try_from(next_offset).ok()? + (1 << 64));
            let mut records = vec![MetadataRecord::Topic(TopicRecord { name, topic_id })];
            records.extend(new_partitions(topic_id, 0, assignment));
            Some(records)
        }
        Op::DeleteTopic(i) => {
            let topics: Vec<_> = image.topics().collect();
            let t = topics.get(i % topics.len().max(1))?;
            Some(vec![MetadataRecord::RemoveTopic(RemoveTopicRecord {
                topic_id: t.id,
            })])
        }
        Op::CreatePartitions {
            topic,
            count,
            start,
        } => {
            let (topic_id, _) = pick(image, *topic, 0)?;
            let t = image.topic_by_id(&topic_id)?;
            let rf = i16::try_from(t.partitions.first()?.replicas.len()).ok()?;
            let first = i32::try_from(t.partitions.len()).ok()?;
            let assignment = placement::assign(
                *count,
                rf,
                &image.usable_brokers(),
                first,
                PlacementStart::fixed(*start),
            )
            .ok()?;
            Some(new_partitions(topic_id, first, assignment).collect())
        }
        Op::AlterIsr {
            topic,
            partition,
            members,
        } => {
            let (topic_id, p) = pick(image, *topic, *partition)?;
            let reg = image.partition(&topic_id, p)?;
            if !reg.has_leader() || !image.is_active_broker(reg.leader) {
                return None;
            }
            // The leader reports the replicas in sync; new members must be eligible.
            let target: Vec<BrokerId> = reg
                .replicas
                .iter()
                .copied()
                .filter(|r| {
                    *r == reg.leader
                        || (members[usize::try_from(*r).unwrap_or(0) % members.len()]
                            && (reg.isr.contains(r) || image.is_active_broker(*r)))
                })
                .collect();
            let change =
                PartitionChangeBuilder::new(reg, topic_id, p, |x| image.is_active_broker(x))
                    .with_target_isr(target)
                    .build();
            Some(
                change
                    .map(MetadataRecord::PartitionChange)
                    .into_iter()
                    .collect(),
            )
        }
        Op::Elect {
            topic,
            partition,
            election,
        } => {
            let (topic_id, p) = pick(image, *topic, *partition)?;
            let reg = image.partition(&topic_id, p)?;
            let change =
                PartitionChangeBuilder::new(reg, topic_id, p, |x| image.is_active_broker(x))
                    .with_election(*election)
                    .build();
            Some(
                change
                    .map(MetadataRecord::PartitionChange)
                    .into_iter()
                    .collect(),
            )
        }
        Op::Reassign {
            topic,
            partition,
            target,
        } => {
            let (topic_id, p) = pick(image, *topic, *partition)?;
            let reg = image.partition(&topic_id, p)?;
            let mut target_replicas: Vec<BrokerId> = Vec::new();
            for b in target {
                if image.is_active_broker(*b) && !target_replicas.contains(b) {
                    target_replicas.push(*b);
                }
            }
            if reg.is_reassigning() || target_replicas.is_empty() || target_replicas == reg.replicas
            {
                return None;
            }
            let adding: Vec<BrokerId> = target_replicas
                .iter()
                .copied()
                .filter(|r| !reg.replicas.contains(r))
                .collect();
            let removing: Vec<BrokerId> = reg
                .replicas
                .iter()
                .copied()
                .filter(|r| !target_replicas.contains(r))
                .collect();
            let mut replicas = target_replicas;
            replicas.extend(&removing);
            let change =
                PartitionChangeBuilder::new(reg, topic_id, p, |x| image.is_active_broker(x))
                    .with_target_replicas(replicas)
                    .with_target_adding(adding)
                    .with_target_removing(removing)
                    .build();
            Some(
                change
                    .map(MetadataRecord::PartitionChange)
                    .into_iter()
                    .collect(),
            )
        }
        Op::SetConfig {
            broker,
            topic,
            key,
            value,
        } => {
            let (resource_type, resource_name) = match broker {
                Some(0) => (ConfigResourceType::Broker, String::new()),
                Some(b) => (ConfigResourceType::Broker, b.to_string()),
                None => (ConfigResourceType::Topic, format!("t{topic}")),
            };
            Some(vec![MetadataRecord::Config(ConfigRecord {
                resource_type,
                resource_name,
                name: format!("k{key}"),
                value: value.map(|v| v.to_string()),
            })])
        }
        Op::ProducerIds(b) => Some(vec![MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: *b,
            broker_epoch: image.broker(*b).map_or(-1, |r| r.broker_epoch),
            next_producer_id: image.next_producer_id() + 1000,
        })]),
        Op::Feature(level) => Some(vec![MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: "metadata.version".to_string(),
            level: *level,
        })]),
        Op::Stale { topic, partition } => {
            let (topic_id, p) = pick(image, *topic, *partition)?;
            let reg = image.partition(&topic_id, p)?;
            Some(vec![MetadataRecord::PartitionChange(
                PartitionChangeRecord {
                    topic_id,
                    partition_id: p,
                    partition_epoch: reg.partition_epoch + 1,
                    leader: Some(reg.leader),
                    ..PartitionChangeRecord::default()
                },
            )])
        }
    }
}

fn new_partitions(
    topic_id: Uuid,
    first: i32,
    assignment: Vec<Vec<BrokerId>>,
) -> impl Iterator<Item = MetadataRecord> {
    (first..)
        .zip(assignment)
        .map(move |(partition_id, replicas)| {
            MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition_id,
                isr: replicas.clone(),
                leader: replicas[0],
                replicas,
                removing_replicas: Vec::new(),
                adding_replicas: Vec::new(),
                leader_epoch: 0,
                partition_epoch: 0,
                leader_recovery_state: LeaderRecoveryState::Recovered,
                elr: Vec::new(),
                last_known_elr: Vec::new(),
            })
        })
}

/// Every property that must hold from `old` to `new` after `op`'s batch.
fn check_step(old: &MetadataImage, op: &Op, new: &MetadataImage, delta: &crate::MetadataDelta) {
    let unclean = matches!(
        op,
        Op::Elect {
            election: Election::Unclean,
            ..
        }
    );
    let alter_isr = matches!(op, Op::AlterIsr { .. });
    if matches!(op, Op::Stale { .. }) {
        assert!(
            matches!(
                delta.rejected,
                Some(crate::RejectedBatch {
                    error: Error::StalePartitionEpoch { .. },
                    ..
                })
            ),
            "stale change accepted: {delta:?}"
        );
        assert_eq!(new.to_records(), old.to_records());
        return;
    }
    assert_eq!(
        delta.rejected, None,
        "the controller wrote an invalid batch for {op:?}"
    );

    // Topics: the delta names exactly the created and deleted ones.
    let old_ids: BTreeSet<Uuid> = old.topics().map(|t| t.id).collect();
    let new_ids: BTreeSet<Uuid> = new.topics().map(|t| t.id).collect();
    assert_eq!(delta.topics_created, &new_ids - &old_ids);
    assert_eq!(
        delta
            .topics_deleted
            .keys()
            .copied()
            .collect::<BTreeSet<_>>(),
        &old_ids - &new_ids
    );
    // Brokers: every changed registration is named.
    for b in 0..BROKERS {
        if old.broker(b) != new.broker(b) {
            assert!(
                delta.brokers_changed.contains(&b),
                "broker {b} changed silently"
            );
        }
    }

    for t in new.topics() {
        for (p, reg) in (0..).zip(&t.partitions) {
            let tp = TopicIdPartition {
                topic_id: t.id,
                partition: p,
            };
            // Always: leader is -1 or an active ISR member; offline only if no ISR member
            // could lead; inactive brokers stay in the ISR only as its last member.
            assert!(!reg.isr.is_empty(), "{tp:?}: empty ISR");
            assert!(
                reg.leader == NO_LEADER
                    || (reg.isr.contains(&reg.leader) && new.is_active_broker(reg.leader)),
                "{tp:?}: leader {} not an active ISR member {:?}",
                reg.leader,
                reg.isr
            );
            if reg.leader == NO_LEADER {
                assert!(
                    !reg.isr.iter().any(|r| new.is_active_broker(*r)),
                    "{tp:?}: offline with an active ISR member {:?}",
                    reg.isr
                );
            }
            assert!(
                reg.isr.iter().all(|r| new.is_active_broker(*r))
                    || (reg.isr.len() == 1 && reg.leader == NO_LEADER),
                "{tp:?}: inactive broker in ISR {:?}",
                reg.isr
            );
            let Some(before) = old.partition(&t.id, p) else {
                assert!(
                    delta.partitions_created.contains(&tp),
                    "{tp:?} created silently"
                );
                continue;
            };
            // Epochs never decrease; a change bumps the partition epoch and is in the delta.
            assert!(
                before.leader_epoch <= reg.leader_epoch,
                "{tp:?}: leader epoch went back"
            );
            assert!(
                before.partition_epoch <= reg.partition_epoch,
                "{tp:?}: partition epoch went back"
            );
            if before == reg {
                assert!(!delta.partitions_changed.contains(&tp));
                continue;
            }
            assert!(
                delta.partitions_changed.contains(&tp),
                "{tp:?} changed silently"
            );
            assert_eq!(before.partition_epoch + 1, reg.partition_epoch);
            if before.leader != reg.leader {
                assert_eq!(
                    before.leader_epoch + 1,
                    reg.leader_epoch,
                    "{tp:?}: leader change without epoch bump"
                );
            }
            // Elections stay in the ISR unless unclean (AlterPartition may complete a
            // reassignment and elect from the ISR the leader just reported).
            if reg.leader != NO_LEADER
                && reg.leader != before.leader
                && !alter_isr
                && !before.isr.contains(&reg.leader)
            {
                assert!(
                    unclean,
                    "{tp:?}: clean election of {} outside ISR {:?}",
                    reg.leader, before.isr
                );
                assert_eq!(reg.isr, vec![reg.leader]);
                assert_eq!(reg.leader_recovery_state, LeaderRecoveryState::Recovering);
            }
            // The last ISR member is never removed, except by an unclean election or by a
            // completed reassignment (the leader reported the new replicas in sync).
            if let [last] = before.isr.as_slice() {
                let completed = alter_isr && before.is_reassigning() && !reg.is_reassigning();
                assert!(
                    unclean || completed || reg.isr.contains(last),
                    "{tp:?}: last ISR member {last} removed"
                );
            }
            // Replica removal bumps the leader epoch.
            if before.replicas.iter().any(|r| !reg.replicas.contains(r)) {
                assert!(
                    before.leader_epoch < reg.leader_epoch,
                    "{tp:?}: replica removed without epoch bump"
                );
            }
        }
    }
}

fn setup() -> MetadataImage {
    let records = (0..BROKERS).map(|b| register(b, 0)).collect();
    let (image, delta) = MetadataImage::empty().apply(0, &MetadataBatch(records));
    assert_eq!(delta.rejected, None);
    image
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_controller_operations(ops in prop::collection::vec(op(), 1..80)) {
        let mut image = setup();
        let mut log = vec![MetadataBatch((0..BROKERS).map(|b| register(b, 0)).collect())];
        for op in &ops {
            let Some(records) = controller(&image, op) else { continue };
            let batch = MetadataBatch(records);
            // The batch survives the encoding as it is.
            let decoded = MetadataBatch::decode(&batch.encode());
            prop_assert_eq!(decoded.as_ref(), Ok(&batch));
            let offset = image.offset() + 1;
            let (next, delta) = image.apply(offset, &batch);
            // Deterministic: the same batch on the same image gives the same result.
            let (again, delta_again) = image.apply(offset, &batch);
            prop_assert_eq!(&next, &again);
            prop_assert_eq!(&delta, &delta_again);
            check_step(&image, op, &next, &delta);
            // A snapshot replays to an equal image, also through its encoding.
            let snapshot = MetadataSnapshot::of(&next);
            let decoded = MetadataSnapshot::decode(&snapshot.encode()).expect("decode snapshot");
            prop_assert_eq!(&decoded.to_image().expect("replay snapshot"), &next);
            log.push(batch);
            image = next;
        }
        // Replaying the whole log from scratch gives the same image.
        let mut replayed = MetadataImage::empty();
        for (offset, batch) in (0..).zip(&log) {
            replayed = replayed.apply(offset, batch).0;
        }
        prop_assert_eq!(replayed, image);
    }
}
