//! Controller RPC: what a broker asks of the active controller (registration, heartbeats,
//! topic admin, AlterPartition, elections, producer-id blocks), as one private api key on
//! the controller listener. The listener (`net::server`) knows only bytes and the
//! `ControllerRpc` trait; this module gives the QuorumController that trait, and the
//! `ControllerClient` sends these requests.
//!
//! The body is a JSON [`ControllerRequest`]; the answer is a JSON
//! `Result<ControllerReply, QuorumError>`, the QuorumController's own result. Both ends are
//! Logbook and no Kafka tool sends these broker-to-controller requests, so the
//! QuorumController's request and result types travel as they are instead of through
//! Kafka's BrokerRegistration / BrokerHeartbeat / AlterPartition / ... schemas, which
//! would be a translation on each end for every API (ARCHITECTURE.md says more). The
//! header's api version is bumped when a body changes incompatibly.

use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use logbook_metadata::{BrokerId, ConfigResource, Election};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::metadata_fetch::{MetadataFetchReply, MetadataFetchRequest};
use crate::net::frame::FrameError;
pub use crate::net::frame::{CONTROLLER_RPC_API_KEY, CONTROLLER_RPC_API_VERSION};
use crate::net::server::ControllerRpc;

use crate::quorum::{
    AlterConfigOp, AlterPartitionRequest, AlterPartitionResults, BrokerHeartbeatReply,
    BrokerHeartbeatRequest, BrokerRegistrationReply, BrokerRegistrationRequest, CreatableTopic,
    CreatedTopic, NewPartitions, ProducerIdsBlock, QuorumController, QuorumDescription,
    QuorumError, ReassignmentResults, ReassignmentTargets, ScramChange,
};

/// One QuorumController operation with its arguments (the methods' names and arguments).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ControllerRequest {
    /// `register_broker` (Kafka's BrokerRegistration, 62).
    RegisterBroker(BrokerRegistrationRequest),
    /// `broker_heartbeat` (BrokerHeartbeat, 63).
    BrokerHeartbeat(BrokerHeartbeatRequest),
    /// `create_topics` (CreateTopics, 19).
    CreateTopics {
        /// The topics.
        topics: Vec<CreatableTopic>,
        /// Validate only, write nothing.
        validate_only: bool,
    },
    /// `create_partitions` (CreatePartitions, 37).
    CreatePartitions {
        /// Each topic with its new partition count (and a manual assignment).
        topics: Vec<NewPartitions>,
    },
    /// `delete_topics` (DeleteTopics, 20).
    DeleteTopics {
        /// The topics.
        names: Vec<String>,
    },
    /// `incremental_alter_configs` (IncrementalAlterConfigs, 44).
    IncrementalAlterConfigs {
        /// Each resource's operations.
        resources: Vec<(ConfigResource, Vec<AlterConfigOp>)>,
    },
    /// `alter_partition` (AlterPartition, 56).
    AlterPartition(AlterPartitionRequest),
    /// `elect_leaders` (ElectLeaders, 43).
    ElectLeaders {
        /// PREFERRED or UNCLEAN.
        election: Election,
        /// The partitions; `None` for all.
        partitions: Option<Vec<(String, i32)>>,
    },
    /// `alter_partition_reassignments` (AlterPartitionReassignments, 45).
    AlterPartitionReassignments {
        /// Each partition's target replicas; `None` cancels.
        reassignments: ReassignmentTargets,
    },
    /// `allocate_producer_ids` (AllocateProducerIds, 67).
    AllocateProducerIds {
        /// The broker asking.
        broker_id: BrokerId,
        /// Its broker epoch.
        broker_epoch: i64,
    },
    /// `fetch_metadata`: a broker-only node's pull of the metadata log (KRaft brokers
    /// Fetch `__cluster_metadata` from the active controller; `metadata_fetch`).
    FetchMetadata(MetadataFetchRequest),
    /// `describe_quorum` (DescribeQuorum, 55).
    DescribeQuorum,
    /// `alter_user_scram_credentials` (AlterUserScramCredentials, 51).
    AlterUserScramCredentials {
        /// The changes, in request order.
        changes: Vec<ScramChange>,
    },
    /// `create_acls` (CreateAcls, 30).
    CreateAcls {
        /// The bindings, in request order.
        bindings: Vec<logbook_metadata::acls::AclBinding>,
    },
    /// `delete_acls` (DeleteAcls, 31).
    DeleteAcls {
        /// The filters, in request order.
        filters: Vec<logbook_metadata::acls::AclBindingFilter>,
    },
    /// `alter_client_quotas` (AlterClientQuotas, 49).
    AlterClientQuotas {
        /// The entities' changes, in request order.
        alterations: Vec<crate::quorum::QuotaAlteration>,
        /// Check only; write nothing.
        validate_only: bool,
    },
}

/// A QuorumController operation's value, one variant per [`ControllerRequest`] variant.
#[derive(Debug, Serialize, Deserialize)]
pub enum ControllerReply {
    /// Of `RegisterBroker`.
    RegisterBroker(BrokerRegistrationReply),
    /// Of `BrokerHeartbeat`.
    BrokerHeartbeat(BrokerHeartbeatReply),
    /// Of `CreateTopics`.
    CreateTopics(Vec<(String, Result<CreatedTopic, QuorumError>)>),
    /// Of `CreatePartitions`.
    CreatePartitions(Vec<(String, Result<(), QuorumError>)>),
    /// Of `DeleteTopics`.
    DeleteTopics(Vec<(String, Result<Uuid, QuorumError>)>),
    /// Of `IncrementalAlterConfigs`.
    IncrementalAlterConfigs(Vec<(ConfigResource, Result<(), QuorumError>)>),
    /// Of `AlterPartition`.
    AlterPartition(AlterPartitionResults),
    /// Of `ElectLeaders`.
    ElectLeaders(Vec<((String, i32), Result<BrokerId, QuorumError>)>),
    /// Of `AlterPartitionReassignments`.
    AlterPartitionReassignments(ReassignmentResults),
    /// Of `AllocateProducerIds`.
    AllocateProducerIds(ProducerIdsBlock),
    /// Of `FetchMetadata`.
    FetchMetadata(MetadataFetchReply),
    /// Of `DescribeQuorum`.
    DescribeQuorum(QuorumDescription),
    /// Of `AlterUserScramCredentials`: each change's result, in request order.
    AlterUserScramCredentials(Vec<Result<(), QuorumError>>),
    /// Of `CreateAcls`: each binding's result, in request order.
    CreateAcls(Vec<Result<(), QuorumError>>),
    /// Of `DeleteAcls`: each filter's removed bindings, in request order.
    DeleteAcls(Vec<Result<Vec<logbook_metadata::acls::AclBinding>, QuorumError>>),
    /// Of `AlterClientQuotas`: each alteration's result, in request order.
    AlterClientQuotas(Vec<Result<(), QuorumError>>),
}

/// The listener's answer: the operation's result, and the answering controller's applied
/// metadata offset after it (at least the offset the operation's batch was committed at),
/// so the broker can wait for its own image to get there before answering its client.
#[derive(Debug, Serialize, Deserialize)]
pub struct ControllerAnswer {
    /// The QuorumController's result.
    pub result: Result<ControllerReply, QuorumError>,
    /// The answering controller's applied metadata offset.
    pub metadata_offset: i64,
}

/// Runs `request` on `controller`. `connection` is the controller connection it came over
/// (`None`: in-process), so a heartbeat connection's closing can cut the session short.
pub(crate) async fn dispatch(
    controller: &QuorumController,
    request: ControllerRequest,
    connection: Option<u64>,
) -> Result<ControllerReply, QuorumError> {
    Ok(match request {
        ControllerRequest::RegisterBroker(r) => {
            ControllerReply::RegisterBroker(controller.register_broker(r).await?)
        }
        ControllerRequest::BrokerHeartbeat(r) => {
            ControllerReply::BrokerHeartbeat(controller.broker_heartbeat_over(r, connection).await?)
        }
        ControllerRequest::CreateTopics {
            topics,
            validate_only,
        } => ControllerReply::CreateTopics(controller.create_topics(topics, validate_only).await?),
        ControllerRequest::CreatePartitions { topics } => {
            ControllerReply::CreatePartitions(controller.create_partitions(topics).await?)
        }
        ControllerRequest::DeleteTopics { names } => {
            ControllerReply::DeleteTopics(controller.delete_topics(names).await?)
        }
        ControllerRequest::IncrementalAlterConfigs { resources } => {
            ControllerReply::IncrementalAlterConfigs(
                controller.incremental_alter_configs(resources).await?,
            )
        }
        ControllerRequest::AlterPartition(r) => {
            ControllerReply::AlterPartition(controller.alter_partition(r).await?)
        }
        ControllerRequest::ElectLeaders {
            election,
            partitions,
        } => ControllerReply::ElectLeaders(controller.elect_leaders(election, partitions).await?),
        ControllerRequest::AlterPartitionReassignments { reassignments } => {
            ControllerReply::AlterPartitionReassignments(
                controller
                    .alter_partition_reassignments(reassignments)
                    .await?,
            )
        }
        ControllerRequest::AllocateProducerIds {
            broker_id,
            broker_epoch,
        } => ControllerReply::AllocateProducerIds(
            controller
                .allocate_producer_ids(broker_id, broker_epoch)
                .await?,
        ),
        ControllerRequest::DescribeQuorum => {
            ControllerReply::DescribeQuorum(controller.describe_quorum().await?)
        }
        ControllerRequest::AlterUserScramCredentials { changes } => {
            ControllerReply::AlterUserScramCredentials(
                controller.alter_user_scram_credentials(changes).await?,
            )
        }
        ControllerRequest::CreateAcls { bindings } => {
            ControllerReply::CreateAcls(controller.create_acls(bindings).await?)
        }
        ControllerRequest::DeleteAcls { filters } => {
            ControllerReply::DeleteAcls(controller.delete_acls(filters).await?)
        }
        ControllerRequest::AlterClientQuotas {
            alterations,
            validate_only,
        } => ControllerReply::AlterClientQuotas(
            controller
                .alter_client_quotas(alterations, validate_only)
                .await?,
        ),
        ControllerRequest::FetchMetadata(r) => {
            ControllerReply::FetchMetadata(controller.fetch_metadata(r).await?)
        }
    })
}

/// The listener's side: decode, run within `timeout` (REQUEST_TIMED_OUT after it), encode.
impl ControllerRpc for QuorumController {
    fn call(
        &self,
        body: Bytes,
        connection: u64,
        timeout: Duration,
    ) -> BoxFuture<'_, Result<(Vec<u8>, bool), FrameError>> {
        Box::pin(async move {
            let request: ControllerRequest = serde_json::from_slice(&body)
                .map_err(|_| FrameError("body is not a controller request"))?;
            let heartbeat = matches!(request, ControllerRequest::BrokerHeartbeat(_));
            let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
            let result = tokio::time::timeout(timeout, dispatch(self, request, Some(connection)))
                .await
                .unwrap_or(Err(QuorumError::RequestTimedOut { timeout_ms }));
            let answer = ControllerAnswer {
                result,
                metadata_offset: self.image().offset(),
            };
            let answer = serde_json::to_vec(&answer)
                .map_err(|_| FrameError("controller answer does not serialize"))?;
            Ok((answer, heartbeat))
        })
    }

    fn connection_closed(&self, connection: u64) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            match self.heartbeat_connection_closed(connection).await {
                Ok(()) | Err(QuorumError::NotController { .. }) => {}
                Err(e) => {
                    tracing::warn!(error = %e, connection, "heartbeat connection closed; sessions not cut");
                }
            }
        })
    }
}

/// The wire form of the Raft layer's [`crate::Error`] inside a `QuorumError::Raft`: the
/// variants a caller acts on keep their fields, an I/O error travels as its message.
pub(crate) mod raft_error {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    enum Wire {
        NotController { leader_id: Option<u64> },
        EntryTooLarge { bytes: usize, max: u32 },
        Shutdown { reason: String },
        Config(String),
        Io(String),
        Internal(String),
    }

    pub(crate) fn serialize<S: Serializer>(
        error: &crate::Error,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let wire = match error {
            crate::Error::NotController { leader_id } => Wire::NotController {
                leader_id: *leader_id,
            },
            crate::Error::EntryTooLarge { bytes, max } => Wire::EntryTooLarge {
                bytes: *bytes,
                max: *max,
            },
            crate::Error::Shutdown { reason } => Wire::Shutdown {
                reason: reason.clone(),
            },
            crate::Error::Config(m) => Wire::Config(m.clone()),
            crate::Error::Io(e) => Wire::Io(e.to_string()),
            crate::Error::Internal(m) => Wire::Internal(m.clone()),
        };
        wire.serialize(serializer)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<crate::Error, D::Error> {
        Ok(match Wire::deserialize(deserializer)? {
            Wire::NotController { leader_id } => crate::Error::NotController { leader_id },
            Wire::EntryTooLarge { bytes, max } => crate::Error::EntryTooLarge { bytes, max },
            Wire::Shutdown { reason } => crate::Error::Shutdown { reason },
            Wire::Config(m) => crate::Error::Config(m),
            Wire::Io(m) => crate::Error::Io(std::io::Error::other(m)),
            Wire::Internal(m) => crate::Error::Internal(m),
        })
    }
}
