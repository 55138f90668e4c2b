//! Broker lifecycle on the active controller (Kafka's `ClusterControlManager` with the
//! fencing half of `ReplicationControlManager`): registration, heartbeats, unfencing once
//! caught up, fencing when a session ends, and controlled shutdown.
//!
//! A fenced or shutting-down broker leaves every ISR it is in and loses its leaderships
//! (the partition's last ISR member stays, with no leader, until it returns); an unfenced
//! broker is elected where a partition it is in sync for has no leader, or, where the
//! topic allows unclean elections, where it is any replica of a leaderless partition.
//! A broker in controlled shutdown may stop once the other brokers applied its moves.

use std::time::Duration;

use logbook_metadata::{
    BrokerEndpoint, BrokerId, BrokerRegistrationChangeRecord, Election, MetadataImage,
    MetadataRecord, PartitionChangeBuilder, RegisterBrokerRecord, NO_LEADER,
};
use uuid::Uuid;

use super::{BrokerSession, QuorumController, QuorumError};

/// BrokerRegistration (API key 62), the fields the controller uses.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokerRegistrationRequest {
    /// The broker's node id.
    pub broker_id: BrokerId,
    /// Random id of this process run.
    pub incarnation_id: Uuid,
    /// Advertised listeners.
    pub endpoints: Vec<BrokerEndpoint>,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// The broker's partition budget.
    pub partitions_max: Option<u64>,
}

/// BrokerRegistration's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokerRegistrationReply {
    /// The new registration's epoch: sent with every heartbeat and replica fetch.
    pub broker_epoch: i64,
    /// Offset of the registration: the broker is caught up once its image reaches it.
    pub registration_offset: i64,
}

/// BrokerHeartbeat (API key 63).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokerHeartbeatRequest {
    /// The broker.
    pub broker_id: BrokerId,
    /// Its registration's epoch.
    pub broker_epoch: i64,
    /// Offset of the last metadata batch the broker applied.
    pub current_metadata_offset: i64,
    /// The broker asks to stay (or become) fenced.
    pub want_fence: bool,
    /// The broker is shutting down (controlled shutdown).
    pub want_shut_down: bool,
}

/// BrokerHeartbeat's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokerHeartbeatReply {
    /// The broker's metadata offset reached its registration.
    pub is_caught_up: bool,
    /// The broker is fenced.
    pub is_fenced: bool,
    /// The broker is in controlled shutdown.
    pub in_controlled_shutdown: bool,
    /// The broker leads nothing any more and may stop.
    pub should_shut_down: bool,
}

impl QuorumController {
    /// Registers a broker, fenced until its heartbeats show it caught up. A new
    /// incarnation while the previous one's session is live is refused; a re-registration
    /// takes the old incarnation out of every ISR (it may have lost its unflushed tail).
    ///
    /// # Errors
    /// `NotController`, `DuplicateBrokerRegistration`, `Raft`.
    pub async fn register_broker(
        &self,
        request: BrokerRegistrationRequest,
    ) -> Result<BrokerRegistrationReply, QuorumError> {
        let mut active = self.activate().await?;
        let now = self.clock.now();
        let live = active.sessions.is_live(request.broker_id, now);
        let (broker_epoch, offset) = self
            .run(|image| {
                if let Some(existing) = image.broker(request.broker_id) {
                    if existing.incarnation_id != request.incarnation_id && live {
                        return Err(QuorumError::DuplicateBrokerRegistration {
                            broker_id: request.broker_id,
                        });
                    }
                }
                let broker_epoch = image.offset() + 1;
                let mut records = vec![MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                    broker_id: request.broker_id,
                    incarnation_id: request.incarnation_id,
                    broker_epoch,
                    endpoints: request.endpoints.clone(),
                    rack: request.rack.clone(),
                    fenced: true,
                    in_controlled_shutdown: false,
                    partitions_max: request.partitions_max,
                })];
                records.extend(leave_isrs(image, request.broker_id));
                Ok((records, broker_epoch))
            })
            .await?;
        let timeout = Duration::from_millis(self.config.session_timeout_ms);
        active.sessions.register(
            request.broker_id,
            BrokerSession {
                broker_epoch,
                registration_offset: offset,
                deadline: now + timeout,
                heartbeat_connection: None,
                metadata_offset: -1,
                last_heartbeat: None,
                controlled_shutdown_offset: None,
            },
        );
        tracing::info!(
            broker_id = request.broker_id,
            broker_epoch,
            offset,
            "broker registered"
        );
        Ok(BrokerRegistrationReply {
            broker_epoch,
            registration_offset: offset,
        })
    }

    /// A broker's heartbeat: extends its session; unfences it once caught up (unless it
    /// wants to stay fenced); on `want_shut_down` moves its leaderships away and says
    /// when it may stop.
    ///
    /// # Errors
    /// `NotController`, `BrokerIdNotRegistered`, `StaleBrokerEpoch`, `Raft`.
    pub async fn broker_heartbeat(
        &self,
        request: BrokerHeartbeatRequest,
    ) -> Result<BrokerHeartbeatReply, QuorumError> {
        self.broker_heartbeat_over(request, None).await
    }

    /// [`QuorumController::broker_heartbeat`] as the controller listener serves it:
    /// `connection` is the id of the connection it came over, whose closing cuts the
    /// session short ([`QuorumController::heartbeat_connection_closed`]).
    pub(crate) async fn broker_heartbeat_over(
        &self,
        request: BrokerHeartbeatRequest,
        connection: Option<u64>,
    ) -> Result<BrokerHeartbeatReply, QuorumError> {
        let mut active = self.activate().await?;
        let id = request.broker_id;
        check_broker_epoch(&self.image(), id, request.broker_epoch)?;
        let timeout = Duration::from_millis(self.config.session_timeout_ms);
        let session = active.sessions.touch(
            id,
            (request.broker_epoch, request.current_metadata_offset),
            connection,
            self.clock.now(),
            timeout,
        );
        let is_caught_up = request.current_metadata_offset >= session.registration_offset;
        let ((), offset) = self
            .run(|image| Ok((heartbeat_records(image, &request, is_caught_up)?, ())))
            .await?;
        let image = self.image();
        let broker = check_broker_epoch(&image, id, request.broker_epoch)?;
        let leads = image
            .topics()
            .flat_map(|t| t.partitions.iter())
            .any(|p| p.leader == id);
        // Kafka's BrokerHeartbeatManager: a broker in controlled shutdown may stop only
        // once every other active broker reports a metadata offset at or past the batch
        // that moved its leaderships (`offset`: that batch, or the image when the moves
        // came in an earlier heartbeat). Stopping sooner closes the old leader while the
        // new ones do not know they lead yet, which clients see as a gap of
        // NOT_LEADER_OR_FOLLOWER in a rolling restart.
        let moves_applied = broker.in_controlled_shutdown && {
            let shutdown_offset = active.sessions.controlled_shutdown_offset(id, offset);
            active
                .sessions
                .lowest_active_offset(&image, id)
                .is_none_or(|lowest| lowest >= shutdown_offset)
        };
        let should_shut_down =
            request.want_shut_down && (broker.fenced || (moves_applied && !leads));
        if should_shut_down {
            // Logbook's choice (Kafka keeps the session to its timeout, so a quick restart
            // waits on DUPLICATE_BROKER_REGISTRATION): a broker told to stop stops
            // heartbeating, so its session ends now.
            active.sessions.end(id, self.clock.now());
        }
        Ok(BrokerHeartbeatReply {
            is_caught_up,
            is_fenced: broker.fenced,
            in_controlled_shutdown: broker.in_controlled_shutdown,
            should_shut_down,
        })
    }

    /// The controller connection `connection` closed: brokers whose last heartbeat came
    /// over it are fenced by the session check unless they heartbeat again within one
    /// `broker.heartbeat.interval.ms` (plan §3.1). Nothing happens on a controller that
    /// is not active (sessions live only on the active one).
    ///
    /// # Errors
    /// `NotController`, `Raft` (from becoming active).
    pub async fn heartbeat_connection_closed(&self, connection: u64) -> Result<(), QuorumError> {
        let mut active = self.activate().await?;
        let deadline = self.clock.now() + Duration::from_millis(self.config.heartbeat_interval_ms);
        let cut = active.sessions.connection_closed(connection, deadline);
        if !cut.is_empty() {
            tracing::info!(brokers = ?cut, connection, "heartbeat connection closed; sessions end in one heartbeat interval");
        }
        Ok(())
    }

    /// Fences every unfenced broker whose session ended: it leaves the ISRs and its
    /// partitions elect new leaders. Returns the brokers fenced now (not those that were
    /// fenced already, whose ended sessions are only forgotten). The periodic session
    /// check calls this; tests call it after moving the clock.
    ///
    /// # Errors
    /// `NotController`, `Raft`.
    pub async fn check_sessions(&self) -> Result<Vec<BrokerId>, QuorumError> {
        let mut active = self.activate().await?;
        let now = self.clock.now();
        let mut fenced = Vec::new();
        for id in active.sessions.expired(now) {
            let (was_unfenced, _) = self
                .run(|image| {
                    let Some(broker) = image.broker(id).filter(|b| !b.fenced) else {
                        return Ok((Vec::new(), false));
                    };
                    let mut records = vec![MetadataRecord::BrokerRegistrationChange(
                        BrokerRegistrationChangeRecord {
                            broker_id: id,
                            broker_epoch: broker.broker_epoch,
                            fenced: Some(true),
                            in_controlled_shutdown: None,
                        },
                    )];
                    records.extend(leave_isrs(image, id));
                    Ok((records, true))
                })
                .await?;
            active.sessions.remove(id);
            if was_unfenced {
                tracing::warn!(broker_id = id, "broker session timed out; fenced");
                fenced.push(id);
            }
        }
        Ok(fenced)
    }
}

impl QuorumController {
    /// Unclean elections for leaderless partitions of topics that allow them, with any
    /// alive replica (Kafka's periodic `maybeElectUncleanLeaders`): covers a topic whose
    /// `unclean.leader.election.enable` was turned on while its out-of-sync replicas
    /// were already back, which no fencing or unfencing would elect. Returns how many
    /// partitions got a leader.
    ///
    /// # Errors
    /// `NotController`, `Raft`.
    pub async fn elect_unclean_leaders(&self) -> Result<usize, QuorumError> {
        let _active = self.activate().await?;
        let (elected, _) = self
            .run(|image| {
                let mut records = Vec::new();
                for topic in image.topics() {
                    if !unclean_enabled(image, &topic.name) {
                        continue;
                    }
                    for (partition_id, partition) in (0..).zip(&topic.partitions) {
                        if partition.leader != NO_LEADER {
                            continue;
                        }
                        let change =
                            PartitionChangeBuilder::new(partition, topic.id, partition_id, |b| {
                                image.is_active_broker(b)
                            })
                            .with_election(Election::Unclean)
                            .build();
                        records.extend(change.map(MetadataRecord::PartitionChange));
                    }
                }
                let elected = records.len();
                Ok((records, elected))
            })
            .await?;
        if elected > 0 {
            tracing::error!(
                partitions = elected,
                "unclean leader election for leaderless partitions (records may be lost)"
            );
        }
        Ok(elected)
    }
}

/// The records a heartbeat's state change takes (Kafka's
/// `BrokerHeartbeatManager.calculateNextBrokerState` with the ISR and leader moves of
/// `ReplicationControlManager`): entering controlled shutdown or being fenced leaves
/// every ISR; a fenced broker that caught up is unfenced and leads where no one does.
fn heartbeat_records(
    image: &MetadataImage,
    request: &BrokerHeartbeatRequest,
    is_caught_up: bool,
) -> Result<Vec<MetadataRecord>, QuorumError> {
    let id = request.broker_id;
    let broker = check_broker_epoch(image, id, request.broker_epoch)?;
    let change = |fenced: Option<bool>, shutting_down: Option<bool>| {
        MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
            broker_id: id,
            broker_epoch: request.broker_epoch,
            fenced,
            in_controlled_shutdown: shutting_down,
        })
    };
    let mut records = Vec::new();
    if request.want_shut_down {
        if !broker.in_controlled_shutdown && !broker.fenced {
            records.push(change(None, Some(true)));
            records.extend(leave_isrs(image, id));
        }
    } else if request.want_fence {
        if !broker.fenced {
            records.push(change(Some(true), None));
            records.extend(leave_isrs(image, id));
        }
    } else if broker.fenced && is_caught_up {
        records.push(change(Some(false), None));
        records.extend(lead_where_leaderless(image, id));
    }
    Ok(records)
}

/// The registration of `id`, if `epoch` is its epoch.
fn check_broker_epoch(
    image: &MetadataImage,
    id: BrokerId,
    epoch: i64,
) -> Result<logbook_metadata::BrokerRegistration, QuorumError> {
    let broker = image
        .broker(id)
        .ok_or(QuorumError::BrokerIdNotRegistered { broker_id: id })?;
    if broker.broker_epoch != epoch {
        return Err(QuorumError::StaleBrokerEpoch {
            broker_id: id,
            epoch,
            current: broker.broker_epoch,
        });
    }
    Ok(broker.clone())
}

/// Whether unclean elections are allowed for `topic` (its override, else the cluster
/// default, else Kafka's default false).
pub(super) fn unclean_enabled(image: &MetadataImage, topic: &str) -> bool {
    const NAME: &str = "unclean.leader.election.enable";
    image
        .topic_configs(topic)
        .get(NAME)
        .or_else(|| image.cluster_default_configs().get(NAME))
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

/// Changes that take broker `id` out of every ISR and elect new leaders where it led
/// (Kafka's `generateLeaderAndIsrUpdates` with a broker to remove). The last ISR member
/// stays in the ISR with no leader.
pub(super) fn leave_isrs(image: &MetadataImage, id: BrokerId) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in image.topics() {
        let election = if unclean_enabled(image, &topic.name) {
            Election::Unclean
        } else {
            Election::Online
        };
        for (partition_id, partition) in (0..).zip(&topic.partitions) {
            if !partition.isr.contains(&id) && partition.leader != id {
                continue;
            }
            let target_isr: Vec<BrokerId> =
                partition.isr.iter().copied().filter(|r| *r != id).collect();
            let change = PartitionChangeBuilder::new(partition, topic.id, partition_id, |b| {
                b != id && image.is_active_broker(b)
            })
            .with_election(election)
            .with_target_isr(target_isr)
            .build();
            records.extend(change.map(MetadataRecord::PartitionChange));
        }
    }
    records
}

/// Elections for every partition without a leader now that broker `id` is unfenced
/// (Kafka's `handleBrokerUnfenced`): `id` counts as alive, and where the topic allows
/// unclean elections a replica outside the ISR may be chosen. So a leaderless partition
/// whose ISR members are all gone gets a leader when an out-of-sync replica comes back,
/// not only when another broker is fenced.
fn lead_where_leaderless(image: &MetadataImage, id: BrokerId) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in image.topics() {
        let election = if unclean_enabled(image, &topic.name) {
            Election::Unclean
        } else {
            Election::Online
        };
        for (partition_id, partition) in (0..).zip(&topic.partitions) {
            if partition.leader != NO_LEADER {
                continue;
            }
            let change = PartitionChangeBuilder::new(partition, topic.id, partition_id, |b| {
                b == id || image.is_active_broker(b)
            })
            .with_election(election)
            .build();
            records.extend(change.map(MetadataRecord::PartitionChange));
        }
    }
    records
}
