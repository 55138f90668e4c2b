//! Topics, partitions, configs and leaders on the active controller (Kafka's
//! `ReplicationControlManager` and `ConfigurationControlManager`): CreateTopics,
//! CreatePartitions, DeleteTopics, IncrementalAlterConfigs, AlterPartition, ElectLeaders.
//!
//! Names and config values are validated by the broker, which knows the configs' types;
//! the controller checks what only the image knows (existence, brokers, epochs). A request
//! for several topics writes one batch for all its valid topics, so what it creates is
//! all-or-nothing per request.

use logbook_metadata::placement::{self, PlacementStart};
use logbook_metadata::{
    BrokerId, ConfigRecord, ConfigResource, Election, LeaderRecoveryState, MetadataImage,
    MetadataRecord, PartitionChangeBuilder, PartitionRecord, PartitionRegistration,
    RemoveTopicRecord, TopicRecord, NO_LEADER,
};
use uuid::Uuid;

use super::{QuorumController, QuorumError};

/// One topic of a CreateTopics request.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CreatableTopic {
    /// Name (validated by the broker).
    pub name: String,
    /// Partitions; -1 for `num.partitions`.
    pub num_partitions: i32,
    /// Replication factor; -1 for `default.replication.factor`.
    pub replication_factor: i16,
    /// Lower the replication factor to the active brokers instead of failing (internal
    /// topics: `offsets.topic.replication.factor` 3 on a single node gives 1).
    pub cap_replication_factor: bool,
    /// Config overrides (validated by the broker).
    pub configs: Vec<(String, String)>,
    /// A manual assignment (`kafka-topics.sh --replica-assignment`): partition `i`'s
    /// replicas, preferred leader first. Empty: the controller places the replicas, and
    /// `num_partitions` / `replication_factor` apply.
    #[serde(default)]
    pub assignment: Vec<Vec<BrokerId>>,
}

/// Partitions to add to one topic (CreatePartitions).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NewPartitions {
    /// The topic.
    pub name: String,
    /// Its partition count after the operation.
    pub count: i32,
    /// A manual assignment: one replica list per new partition, preferred leader first.
    /// Empty: the controller places them.
    #[serde(default)]
    pub assignment: Vec<Vec<BrokerId>>,
}

/// A topic created.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CreatedTopic {
    /// Its id.
    pub topic_id: Uuid,
    /// Partitions.
    pub num_partitions: i32,
    /// Replication factor.
    pub replication_factor: i16,
}

/// One operation of IncrementalAlterConfigs on one config.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum AlterConfigOp {
    /// SET.
    Set(String, String),
    /// DELETE (back to the default).
    Delete(String),
    /// APPEND to a list value.
    Append(String, String),
    /// SUBTRACT from a list value.
    Subtract(String, String),
}

/// AlterPartition (API key 56), v3 shape.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartitionRequest {
    /// The leader sending it.
    pub broker_id: BrokerId,
    /// Its broker epoch.
    pub broker_epoch: i64,
    /// The partitions.
    pub partitions: Vec<AlterPartitionData>,
}

/// One partition of an AlterPartition.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AlterPartitionData {
    /// The topic.
    pub topic_id: Uuid,
    /// The partition.
    pub partition: i32,
    /// The leader's epoch.
    pub leader_epoch: i32,
    /// The ISR wanted, each with the broker epoch the leader saw in its fetches
    /// (`NewIsrWithEpochs`, KIP-903; -1 if unknown).
    pub new_isr_with_epochs: Vec<(BrokerId, i64)>,
    /// The leader's recovery state.
    pub leader_recovery_state: LeaderRecoveryState,
    /// The partition epoch the change was computed from.
    pub partition_epoch: i32,
}

/// Per-partition results: the registration after the change, or the error.
pub type AlterPartitionResults = Vec<(Uuid, i32, Result<PartitionRegistration, QuorumError>)>;

impl QuorumController {
    /// CreateTopics: places and creates each topic with its configs.
    ///
    /// # Errors
    /// `NotController`, `Raft` for the whole request; per topic `TopicAlreadyExists`,
    /// `InvalidReplicationFactor`, `InvalidPartitions`, `InvalidRequest` (named twice).
    pub async fn create_topics(
        &self,
        topics: Vec<CreatableTopic>,
        validate_only: bool,
    ) -> Result<Vec<(String, Result<CreatedTopic, QuorumError>)>, QuorumError> {
        let _active = self.activate().await?;
        let config = self.config.clone();
        let ids: Vec<Uuid> = topics.iter().map(|_| Uuid::new_v4()).collect();
        let (results, _) = self
            .run(|image| {
                let mut records = Vec::new();
                let mut results = Vec::new();
                let usable = image.usable_brokers();
                let mut created = 0;
                for (i, (topic, id)) in topics.iter().zip(&ids).enumerate() {
                    let result = if topics.iter().take(i).any(|t| t.name == topic.name) {
                        Err(QuorumError::InvalidRequest(format!(
                            "topic {} named twice",
                            topic.name
                        )))
                    } else if image.topic(&topic.name).is_some() {
                        Err(QuorumError::TopicAlreadyExists {
                            name: topic.name.clone(),
                        })
                    } else {
                        let placed = place_topic(image, &config, topic, &usable, created);
                        placed.map(|(assignment, isrs)| {
                            created += 1;
                            let partitions = i32::try_from(assignment.len()).unwrap_or(i32::MAX);
                            let rf = assignment
                                .first()
                                .map_or(0, |r| i16::try_from(r.len()).unwrap_or(i16::MAX));
                            records.extend(new_topic_records(
                                &topic.name,
                                *id,
                                &assignment,
                                &topic.configs,
                            ));
                            restrict_isrs(&mut records, &isrs);
                            CreatedTopic {
                                topic_id: *id,
                                num_partitions: partitions,
                                replication_factor: rf,
                            }
                        })
                    };
                    results.push((topic.name.clone(), result));
                }
                if validate_only {
                    records.clear();
                }
                Ok((records, results))
            })
            .await?;
        Ok(results)
    }

    /// CreatePartitions: grows each topic to `count` partitions, placed by the controller
    /// or, with a manual assignment (one replica list per new partition), as given.
    ///
    /// # Errors
    /// `NotController`, `Raft`; per topic `UnknownTopicOrPartition`, `InvalidPartitions`,
    /// `InvalidReplicationFactor`, `InvalidReplicaAssignment`.
    pub async fn create_partitions(
        &self,
        topics: Vec<NewPartitions>,
    ) -> Result<Vec<(String, Result<(), QuorumError>)>, QuorumError> {
        let _active = self.activate().await?;
        let (results, _) = self
            .run(|image| {
                let mut records = Vec::new();
                let mut results = Vec::new();
                for topic in &topics {
                    let result = grow_topic(image, topic).map(|r| records.extend(r));
                    results.push((topic.name.clone(), result));
                }
                Ok((records, results))
            })
            .await?;
        Ok(results)
    }

    /// DeleteTopics: removes each topic with its partitions and configs.
    ///
    /// # Errors
    /// `NotController`, `Raft`; per topic `UnknownTopicOrPartition`.
    pub async fn delete_topics(
        &self,
        names: Vec<String>,
    ) -> Result<Vec<(String, Result<Uuid, QuorumError>)>, QuorumError> {
        let _active = self.activate().await?;
        let (results, _) = self
            .run(|image| {
                let mut records = Vec::new();
                let mut results = Vec::new();
                for name in &names {
                    let result = match image.topic(name) {
                        Some(topic) if !records.iter().any(|r| {
                            matches!(r, MetadataRecord::RemoveTopic(t) if t.topic_id == topic.id)
                        }) => {
                            records.push(MetadataRecord::RemoveTopic(RemoveTopicRecord {
                                topic_id: topic.id,
                            }));
                            Ok(topic.id)
                        }
                        _ => Err(QuorumError::UnknownTopicOrPartition {
                            name: name.clone(),
                            partition: -1,
                        }),
                    };
                    results.push((name.clone(), result));
                }
                Ok((records, results))
            })
            .await?;
        Ok(results)
    }

    /// IncrementalAlterConfigs: applies each resource's operations (values validated by
    /// the broker).
    ///
    /// # Errors
    /// `NotController`, `Raft`; per resource `UnknownTopicOrPartition` for a topic that
    /// does not exist.
    pub async fn incremental_alter_configs(
        &self,
        resources: Vec<(ConfigResource, Vec<AlterConfigOp>)>,
    ) -> Result<Vec<(ConfigResource, Result<(), QuorumError>)>, QuorumError> {
        let _active = self.activate().await?;
        let (results, _) = self
            .run(|image| {
                let mut records = Vec::new();
                let mut results = Vec::new();
                for (resource, ops) in &resources {
                    let result = alter_configs(image, resource, ops).map(|r| records.extend(r));
                    results.push((resource.clone(), result));
                }
                Ok((records, results))
            })
            .await?;
        Ok(results)
    }

    /// AlterPartition: a leader's ISR change, validated as Kafka does (broker epoch,
    /// leadership, leader epoch, partition epoch, eligible replicas) and committed.
    ///
    /// # Errors
    /// `NotController`, `Raft`, `BrokerIdNotRegistered`/`StaleBrokerEpoch` for the
    /// request; per partition `UnknownTopicId`, `UnknownTopicOrPartition`,
    /// `NotLeaderOrFollower`, `FencedLeaderEpoch`, `InvalidUpdateVersion`,
    /// `IneligibleReplica`, `InvalidRequest`, `NewLeaderElected` (committed anyway).
    pub async fn alter_partition(
        &self,
        request: AlterPartitionRequest,
    ) -> Result<AlterPartitionResults, QuorumError> {
        let _active = self.activate().await?;
        let (outcomes, _) = self
            .run(|image| {
                let broker =
                    image
                        .broker(request.broker_id)
                        .ok_or(QuorumError::BrokerIdNotRegistered {
                            broker_id: request.broker_id,
                        })?;
                if broker.broker_epoch != request.broker_epoch {
                    return Err(QuorumError::StaleBrokerEpoch {
                        broker_id: request.broker_id,
                        epoch: request.broker_epoch,
                        current: broker.broker_epoch,
                    });
                }
                let mut records = Vec::new();
                let mut outcomes = Vec::new();
                for data in &request.partitions {
                    let outcome = alter_one(image, request.broker_id, data).map(|change| {
                        let leader = change.as_ref().and_then(|c| c.leader);
                        records.extend(change.map(MetadataRecord::PartitionChange));
                        leader
                    });
                    outcomes.push(outcome);
                }
                Ok((records, outcomes))
            })
            .await?;
        let image = self.image();
        let results = request
            .partitions
            .iter()
            .zip(outcomes)
            .map(|(data, outcome)| {
                let result = outcome.and_then(|leader| match leader {
                    Some(leader) if leader != request.broker_id => {
                        Err(QuorumError::NewLeaderElected { leader })
                    }
                    _ => image
                        .partition(&data.topic_id, data.partition)
                        .cloned()
                        .ok_or(QuorumError::UnknownTopicId {
                            topic_id: data.topic_id,
                        }),
                });
                (data.topic_id, data.partition, result)
            })
            .collect();
        Ok(results)
    }

    /// ElectLeaders: PREFERRED or UNCLEAN elections for `partitions` (topic name,
    /// partition), or for every partition when `None`.
    ///
    /// # Errors
    /// `NotController`, `Raft`; per partition `UnknownTopicOrPartition`,
    /// `ElectionNotNeeded`, `PreferredLeaderNotAvailable`, `EligibleLeadersNotAvailable`.
    pub async fn elect_leaders(
        &self,
        election: Election,
        partitions: Option<Vec<(String, i32)>>,
    ) -> Result<Vec<((String, i32), Result<BrokerId, QuorumError>)>, QuorumError> {
        let _active = self.activate().await?;
        let (results, _) = self
            .run(|image| {
                let wanted: Vec<(String, i32)> = partitions.clone().unwrap_or_else(|| {
                    image
                        .topics()
                        .flat_map(|t| (0..).zip(&t.partitions).map(|(p, _)| (t.name.clone(), p)))
                        .collect()
                });
                let mut records = Vec::new();
                let mut results = Vec::new();
                for (name, p) in wanted {
                    let result = elect_one(image, election, &name, p).map(|(change, leader)| {
                        records.extend(change.map(MetadataRecord::PartitionChange));
                        leader
                    });
                    results.push(((name, p), result));
                }
                Ok((records, results))
            })
            .await?;
        Ok(results)
    }
}

/// One reassignment's outcome per partition (AlterPartitionReassignments).
pub type ReassignmentResults = Vec<((String, i32), Result<(), QuorumError>)>;

/// AlterPartitionReassignments' targets: per `(topic, partition)` the replicas wanted, or
/// `None` to cancel.
pub type ReassignmentTargets = Vec<((String, i32), Option<Vec<BrokerId>>)>;

impl QuorumController {
    /// AlterPartitionReassignments (KIP-455): for each `(topic, partition)` a target
    /// replica list, or `None` to cancel the partition's reassignment. The partition's
    /// replicas become the target followed by the original replicas leaving, with the
    /// joining ones in `adding_replicas` and the leaving ones in `removing_replicas`; the
    /// leader brings the joining replicas into the ISR as they catch up, and the
    /// AlterPartition that completes the target ISR also drops the leaving replicas (the
    /// partition change builder's `complete_reassignment_if_needed`), electing a new leader
    /// if the old one left. A target that needs no new replica completes at once.
    ///
    /// # Errors
    /// `NotController`, `Raft`; per partition `UnknownTopicOrPartition`,
    /// `InvalidReplicaAssignment`, `NoReassignmentInProgress`.
    pub async fn alter_partition_reassignments(
        &self,
        reassignments: ReassignmentTargets,
    ) -> Result<ReassignmentResults, QuorumError> {
        let _active = self.activate().await?;
        let (results, _) = self
            .run(|image| {
                let mut records = Vec::new();
                let mut results = Vec::new();
                for ((name, p), target) in &reassignments {
                    let result = reassign_one(image, name, *p, target.as_deref())
                        .map(|change| records.extend(change.map(MetadataRecord::PartitionChange)));
                    results.push(((name.clone(), *p), result));
                }
                Ok((records, results))
            })
            .await?;
        Ok(results)
    }
}

/// The change reassigning `name`-`p` to `target` (`None`: cancelling), if any.
fn reassign_one(
    image: &MetadataImage,
    name: &str,
    p: i32,
    target: Option<&[BrokerId]>,
) -> Result<Option<logbook_metadata::PartitionChangeRecord>, QuorumError> {
    let unknown = || QuorumError::UnknownTopicOrPartition {
        name: name.to_string(),
        partition: p,
    };
    let topic = image.topic(name).ok_or_else(unknown)?;
    let partition = topic.partition(p).ok_or_else(unknown)?;
    // The replicas before any reassignment in progress.
    let original: Vec<BrokerId> = partition
        .replicas
        .iter()
        .copied()
        .filter(|r| !partition.adding_replicas.contains(r))
        .collect();
    let target: Vec<BrokerId> = match target {
        None if !partition.is_reassigning() => return Err(QuorumError::NoReassignmentInProgress),
        None => original.clone(),
        Some(target) => {
            validate_target_replicas(image, target)?;
            target.to_vec()
        }
    };
    let adding: Vec<BrokerId> = target
        .iter()
        .copied()
        .filter(|r| !original.contains(r))
        .collect();
    let removing: Vec<BrokerId> = original
        .iter()
        .copied()
        .filter(|r| !target.contains(r))
        .collect();
    let mut replicas = target.clone();
    replicas.extend(removing.iter().copied());
    // ISR members that are no replica any more (joiners of a cancelled reassignment) leave it.
    let mut isr: Vec<BrokerId> = partition
        .isr
        .iter()
        .copied()
        .filter(|r| replicas.contains(r))
        .collect();
    if isr.is_empty() {
        isr.clone_from(&partition.isr);
    }
    let change = PartitionChangeBuilder::new(partition, topic.id, p, |b| image.is_active_broker(b))
        .with_target_replicas(replicas)
        .with_target_isr(isr)
        .with_target_adding(adding)
        .with_target_removing(removing)
        .build();
    Ok(change)
}

/// Checks a reassignment's target replicas (Kafka's
/// `validateManualPartitionAssignment`): not empty, no broker twice, every broker
/// registered.
fn validate_target_replicas(image: &MetadataImage, target: &[BrokerId]) -> Result<(), QuorumError> {
    if target.is_empty() {
        return Err(QuorumError::InvalidReplicaAssignment(
            "the target replica list is empty".to_string(),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(dup) = target.iter().find(|b| !seen.insert(**b)) {
        return Err(QuorumError::InvalidReplicaAssignment(format!(
            "broker {dup} appears twice in the target replicas"
        )));
    }
    if let Some(unknown) = target.iter().find(|b| image.broker(**b).is_none()) {
        return Err(QuorumError::InvalidReplicaAssignment(format!(
            "broker {unknown} is not registered"
        )));
    }
    Ok(())
}

/// A new topic's replica assignment, and the ISR of each partition when it is not all
/// of its replicas (empty: every ISR is its replicas).
type Placed = (Vec<Vec<BrokerId>>, Vec<Vec<BrokerId>>);

/// Where a new topic's replicas go (the placement step of Kafka's
/// `ReplicationControlManager.createTopic`): a manual assignment as given (checked by
/// [`manual_assignment`], which also gives its ISRs), else placed over the usable brokers with the request's or
/// the default partition count and replication factor, capped at the usable brokers
/// when the request asks. `created` topics of this request come before it, so that
/// leaders of consecutive topics start on consecutive brokers.
fn place_topic(
    image: &MetadataImage,
    config: &super::QuorumConfig,
    topic: &CreatableTopic,
    usable: &[BrokerId],
    created: usize,
) -> Result<Placed, QuorumError> {
    let partitions = if topic.num_partitions == -1 {
        config.default_num_partitions
    } else {
        topic.num_partitions
    };
    let mut rf = if topic.replication_factor == -1 {
        config.default_replication_factor
    } else {
        topic.replication_factor
    };
    if topic.cap_replication_factor {
        let active = i16::try_from(usable.len()).unwrap_or(i16::MAX).max(1);
        rf = rf.min(active);
    }
    if topic.assignment.is_empty() {
        // Leaders of consecutive topics start on consecutive brokers.
        let start = PlacementStart::fixed(image.topics().count() + created);
        place(image, partitions, rf, usable, 0, start)
    } else {
        manual_assignment(image, &topic.assignment).map(|isrs| (topic.assignment.clone(), isrs))
    }
}

/// Places `partitions` new partitions on the active brokers `usable`, or, when the
/// replication factor needs more brokers than are active but no more than are registered,
/// as Kafka's `StripedReplicaPlacer` does: fenced brokers take the replicas the active
/// ones cannot, every partition is led by an active broker, and the fenced replicas start
/// outside the ISR and catch up when their broker returns (so one broker down does not
/// stop topic creation or partition growth). Returns the replica lists and, in the second
/// case, each partition's ISR (its active replicas, leader first); empty when all are in
/// sync.
fn place(
    image: &MetadataImage,
    partitions: i32,
    rf: i16,
    usable: &[BrokerId],
    first_partition_id: i32,
    start: PlacementStart,
) -> Result<Placed, QuorumError> {
    let registered: Vec<BrokerId> = image.brokers().map(|b| b.broker_id).collect();
    let needed = usize::try_from(rf).unwrap_or(0);
    if needed <= usable.len() || usable.is_empty() {
        // All active (or none: `assign` refuses, naming no usable broker).
        let assignment = placement::assign(partitions, rf, usable, first_partition_id, start)?;
        return Ok((assignment, Vec::new()));
    }
    if needed > registered.len() {
        return Err(QuorumError::InvalidReplicationFactor {
            replication_factor: rf,
            usable_brokers: registered.len(),
        });
    }
    let mut assignment = placement::assign(partitions, rf, &registered, first_partition_id, start)?;
    let active = |b: &BrokerId| usable.contains(b);
    let mut isrs = Vec::with_capacity(assignment.len());
    for (i, replicas) in assignment.iter_mut().enumerate() {
        if !replicas.iter().any(active) {
            // Only fenced brokers drawn: the last replica goes to an active broker
            // (one not in the list exists, as none of the list is active).
            let spare = usable[i % usable.len()];
            if let Some(last) = replicas.last_mut() {
                *last = spare;
            }
        }
        if let Some(lead) = replicas.iter().position(active) {
            replicas[..=lead].rotate_right(1);
        }
        isrs.push(replicas.iter().copied().filter(active).collect());
    }
    Ok((assignment, isrs))
}

/// The records of a new topic: the topic, its partitions (leader = first replica, all in
/// sync), its configs.
/// Checks a manual assignment as Kafka's controller does (`validateManualPartitionAssignment`):
/// every partition names the same number of replicas, at least one, none twice, each a
/// registered broker. Returns each partition's ISR, its replicas that are active
/// now (Kafka's rule too: a fenced or stopping broker starts outside the ISR, and the
/// first active replica leads); a partition with no active replica is refused with
/// INVALID_REPLICATION_FACTOR, as Kafka refuses it.
fn manual_assignment(
    image: &logbook_metadata::MetadataImage,
    assignment: &[Vec<BrokerId>],
) -> Result<Vec<Vec<BrokerId>>, QuorumError> {
    let invalid = |m: String| Err(QuorumError::InvalidReplicaAssignment(m));
    let factor = assignment.first().map_or(0, Vec::len);
    let mut isrs = Vec::with_capacity(assignment.len());
    for (partition, replicas) in assignment.iter().enumerate() {
        if replicas.is_empty() {
            return invalid(format!("partition {partition} has an empty replica list"));
        }
        if replicas.len() != factor {
            return invalid(format!(
                "partition {partition} has {} replicas, but the partitions before it have {factor}",
                replicas.len()
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(dup) = replicas.iter().find(|b| !seen.insert(**b)) {
            return invalid(format!(
                "partition {partition} names broker {dup} more than once"
            ));
        }
        if let Some(unknown) = replicas.iter().find(|b| image.broker(**b).is_none()) {
            return invalid(format!(
                "partition {partition} names broker {unknown}, but no such broker is registered"
            ));
        }
        let isr: Vec<BrokerId> = replicas
            .iter()
            .copied()
            .filter(|b| image.broker(*b).is_some_and(|r| r.is_active()))
            .collect();
        if isr.is_empty() {
            // Kafka answers INVALID_REPLICATION_FACTOR here, as its placer does when no
            // broker is usable.
            return Err(QuorumError::InvalidReplicationFactor {
                replication_factor: i16::try_from(factor).unwrap_or(i16::MAX),
                usable_brokers: 0,
            });
        }
        isrs.push(isr);
    }
    Ok(isrs)
}

/// Narrows the new partitions' ISRs to `isrs` (when given) and makes the first ISR member
/// the leader.
fn restrict_isrs(records: &mut [MetadataRecord], isrs: &[Vec<BrokerId>]) {
    if isrs.is_empty() {
        return;
    }
    let partitions = records.iter_mut().filter_map(|r| match r {
        MetadataRecord::Partition(p) => Some(p),
        _ => None,
    });
    for (record, isr) in partitions.zip(isrs) {
        record.leader = isr.first().copied().unwrap_or(NO_LEADER);
        record.isr = isr.clone();
    }
}

fn new_topic_records(
    name: &str,
    topic_id: Uuid,
    assignment: &[Vec<BrokerId>],
    configs: &[(String, String)],
) -> Vec<MetadataRecord> {
    let mut records = vec![MetadataRecord::Topic(TopicRecord {
        name: name.to_string(),
        topic_id,
    })];
    records.extend(partition_records(topic_id, 0, assignment));
    records.extend(configs.iter().map(|(config, value)| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: logbook_metadata::ConfigResourceType::Topic,
            resource_name: name.to_string(),
            name: config.clone(),
            value: Some(value.clone()),
        })
    }));
    records
}

fn partition_records(
    topic_id: Uuid,
    first_partition_id: i32,
    assignment: &[Vec<BrokerId>],
) -> impl Iterator<Item = MetadataRecord> + '_ {
    (first_partition_id..)
        .zip(assignment)
        .map(move |(partition_id, replicas)| {
            MetadataRecord::Partition(PartitionRecord {
                topic_id,
                partition_id,
                replicas: replicas.clone(),
                isr: replicas.clone(),
                removing_replicas: Vec::new(),
                adding_replicas: Vec::new(),
                leader: replicas.first().copied().unwrap_or(NO_LEADER),
                leader_epoch: 0,
                partition_epoch: 0,
                leader_recovery_state: LeaderRecoveryState::Recovered,
                elr: Vec::new(),
                last_known_elr: Vec::new(),
            })
        })
}

fn grow_topic(
    image: &MetadataImage,
    new: &NewPartitions,
) -> Result<Vec<MetadataRecord>, QuorumError> {
    let (name, count) = (new.name.as_str(), new.count);
    let topic = image
        .topic(name)
        .ok_or_else(|| QuorumError::UnknownTopicOrPartition {
            name: name.to_string(),
            partition: -1,
        })?;
    let current = i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX);
    if count <= current {
        return Err(QuorumError::InvalidPartitions {
            partitions: count,
            reason: format!("topic {name} has {current} partitions already"),
        });
    }
    let rf = topic
        .partitions
        .first()
        .map_or(1, |p| i16::try_from(p.replicas.len()).unwrap_or(i16::MAX));
    if new.assignment.is_empty() {
        let start = PlacementStart::fixed(image.topics().count());
        let (assignment, isrs) = place(
            image,
            count - current,
            rf,
            &image.usable_brokers(),
            current,
            start,
        )?;
        let mut records: Vec<MetadataRecord> =
            partition_records(topic.id, current, &assignment).collect();
        restrict_isrs(&mut records, &isrs);
        return Ok(records);
    }
    let adding = usize::try_from(count - current).unwrap_or(0);
    if new.assignment.len() != adding {
        return Err(QuorumError::InvalidReplicaAssignment(format!(
            "adding {adding} partition(s) to {name}, but the assignment names {}",
            new.assignment.len()
        )));
    }
    let wanted = usize::try_from(rf).unwrap_or(0);
    if let Some(other) = new.assignment.iter().find(|r| r.len() != wanted) {
        return Err(QuorumError::InvalidReplicaAssignment(format!(
            "a new partition has {} replicas, but the partitions of {name} have {wanted}",
            other.len()
        )));
    }
    let isrs = manual_assignment(image, &new.assignment)?;
    let mut records: Vec<MetadataRecord> =
        partition_records(topic.id, current, &new.assignment).collect();
    restrict_isrs(&mut records, &isrs);
    Ok(records)
}

fn alter_configs(
    image: &MetadataImage,
    resource: &ConfigResource,
    ops: &[AlterConfigOp],
) -> Result<Vec<MetadataRecord>, QuorumError> {
    if resource.resource_type == logbook_metadata::ConfigResourceType::Topic
        && image.topic(&resource.name).is_none()
    {
        return Err(QuorumError::UnknownTopicOrPartition {
            name: resource.name.clone(),
            partition: -1,
        });
    }
    let mut configs = image.configs(resource).clone();
    for op in ops {
        match op {
            AlterConfigOp::Set(name, value) => {
                configs.insert(name.clone(), value.clone());
            }
            AlterConfigOp::Delete(name) => {
                configs.remove(name);
            }
            AlterConfigOp::Append(name, value) => {
                let mut list: Vec<String> = list_value(configs.get(name));
                if !list.contains(value) {
                    list.push(value.clone());
                }
                configs.insert(name.clone(), list.join(","));
            }
            AlterConfigOp::Subtract(name, value) => {
                let list: Vec<String> = list_value(configs.get(name))
                    .into_iter()
                    .filter(|v| v != value)
                    .collect();
                configs.insert(name.clone(), list.join(","));
            }
        }
    }
    let before = image.configs(resource);
    let names: std::collections::BTreeSet<&String> = before.keys().chain(configs.keys()).collect();
    Ok(names
        .into_iter()
        .filter(|name| before.get(*name) != configs.get(*name))
        .map(|name| {
            MetadataRecord::Config(ConfigRecord {
                resource_type: resource.resource_type,
                resource_name: resource.name.clone(),
                name: name.clone(),
                value: configs.get(name).cloned(),
            })
        })
        .collect())
}

fn list_value(value: Option<&String>) -> Vec<String> {
    value
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Validates one partition of an AlterPartition (Kafka's order of checks) and builds its
/// change (`None`: nothing to change).
fn alter_one(
    image: &MetadataImage,
    broker_id: BrokerId,
    data: &AlterPartitionData,
) -> Result<Option<logbook_metadata::PartitionChangeRecord>, QuorumError> {
    let topic = image
        .topic_by_id(&data.topic_id)
        .ok_or(QuorumError::UnknownTopicId {
            topic_id: data.topic_id,
        })?;
    let partition =
        topic
            .partition(data.partition)
            .ok_or_else(|| QuorumError::UnknownTopicOrPartition {
                name: topic.name.clone(),
                partition: data.partition,
            })?;
    if partition.leader != broker_id {
        return Err(QuorumError::NotLeaderOrFollower { broker_id });
    }
    if data.leader_epoch != partition.leader_epoch {
        return Err(QuorumError::FencedLeaderEpoch {
            epoch: data.leader_epoch,
            current: partition.leader_epoch,
        });
    }
    if data.partition_epoch != partition.partition_epoch {
        return Err(QuorumError::InvalidUpdateVersion {
            epoch: data.partition_epoch,
            current: partition.partition_epoch,
        });
    }
    let new_isr: Vec<BrokerId> = data.new_isr_with_epochs.iter().map(|(b, _)| *b).collect();
    if data.leader_recovery_state == LeaderRecoveryState::Recovering && new_isr.len() > 1 {
        return Err(QuorumError::InvalidRequest(
            "a recovering leader must be alone in the ISR".to_string(),
        ));
    }
    if partition.leader_recovery_state == LeaderRecoveryState::Recovered
        && data.leader_recovery_state == LeaderRecoveryState::Recovering
    {
        return Err(QuorumError::InvalidRequest(
            "a recovered leader cannot go back to recovering".to_string(),
        ));
    }
    for (replica, epoch) in &data.new_isr_with_epochs {
        let eligible = partition.replicas.contains(replica)
            && image
                .broker(*replica)
                .is_some_and(|b| b.is_active() && (*epoch == -1 || *epoch == b.broker_epoch));
        if !eligible {
            return Err(QuorumError::IneligibleReplica { replica: *replica });
        }
    }
    Ok(
        PartitionChangeBuilder::new(partition, topic.id, data.partition, |b| {
            image.is_active_broker(b)
        })
        .with_target_isr(new_isr)
        .with_target_leader_recovery_state(data.leader_recovery_state)
        .build(),
    )
}

fn elect_one(
    image: &MetadataImage,
    election: Election,
    name: &str,
    p: i32,
) -> Result<(Option<logbook_metadata::PartitionChangeRecord>, BrokerId), QuorumError> {
    let unknown = || QuorumError::UnknownTopicOrPartition {
        name: name.to_string(),
        partition: p,
    };
    let topic = image.topic(name).ok_or_else(unknown)?;
    let partition = topic.partition(p).ok_or_else(unknown)?;
    // ElectLeaders UNCLEAN is an explicit request: Kafka runs it whatever the topic's
    // `unclean.leader.election.enable` says.
    match election {
        Election::Preferred if partition.leader == partition.preferred_replica() => {
            return Err(QuorumError::ElectionNotNeeded)
        }
        Election::Unclean | Election::Online if partition.has_leader() => {
            return Err(QuorumError::ElectionNotNeeded)
        }
        _ => {}
    }
    let change = PartitionChangeBuilder::new(partition, topic.id, p, |b| image.is_active_broker(b))
        .with_election(election)
        .build();
    let leader = change
        .as_ref()
        .and_then(|c| c.leader)
        .unwrap_or(partition.leader);
    match election {
        Election::Preferred if leader != partition.preferred_replica() => {
            Err(QuorumError::PreferredLeaderNotAvailable)
        }
        _ if leader == NO_LEADER => Err(QuorumError::EligibleLeadersNotAvailable),
        _ => Ok((change, leader)),
    }
}
