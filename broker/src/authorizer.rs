//! The authorizer seam (Kafka's `org.apache.kafka.server.authorizer.Authorizer`): every
//! handler asks [`RequestContext::authorize`](crate::handlers::RequestContext::authorize)
//! before it acts on a topic, group, transactional id or the cluster, at exactly the
//! points and for exactly the operations Kafka's `KafkaApis` checks, and answers Kafka's
//! error code when the answer is no (TOPIC_AUTHORIZATION_FAILED for that topic's
//! partitions, GROUP_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
//! CLUSTER_AUTHORIZATION_FAILED). [`REQUIRED_CHECKS`] lists those operations per API, and a
//! test holds each handler to its line.
//!
//! The policy behind the seam is one [`Authorizer`] per broker: [`AllowEveryone`] without
//! `authorizer.class.name`, as in Kafka, whose [`Authorizer::allows_everything`] lets the
//! checks cost one call on the hot paths; or [`standard::StandardAuthorizer`], Kafka's
//! ACLs from the metadata log, when `authorizer.class.name` names Kafka's
//! `StandardAuthorizer`. The principal comes from the connection (TLS or SASL).

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use kafka_protocol::messages::ApiKey;

pub mod standard;

/// Who sent a request (Kafka's `KafkaPrincipal`): a type (`User` for every built-in
/// authentication) and a name. Displayed as Kafka writes it in ACLs: `User:alice`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KafkaPrincipal {
    /// The principal type; Kafka's built-in authenticators all produce `User`.
    pub principal_type: String,
    /// The name (the SASL user, the TLS certificate's mapped name, or `ANONYMOUS`).
    pub name: String,
}

impl KafkaPrincipal {
    /// The principal of an unauthenticated connection (Kafka's `KafkaPrincipal.ANONYMOUS`).
    #[must_use]
    pub fn anonymous() -> Self {
        Self::user("ANONYMOUS")
    }

    /// A principal of type `User`.
    #[must_use]
    pub fn user(name: &str) -> Self {
        Self {
            principal_type: "User".to_string(),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// The kinds of resource an ACL names (Kafka's `ResourceType`, with its wire codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceType {
    /// A topic, by name.
    Topic = 2,
    /// A consumer group, by group id.
    Group = 3,
    /// The cluster; its one resource is named [`CLUSTER_NAME`].
    Cluster = 4,
    /// A transactional id.
    TransactionalId = 5,
    /// A delegation token, by token id.
    DelegationToken = 6,
    /// A user principal (for the token APIs).
    User = 7,
}

/// The operations an ACL allows or denies (Kafka's `AclOperation`, with its wire codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AclOperation {
    /// Consume, commit offsets, join a group.
    Read = 3,
    /// Produce, and use a transactional id.
    Write = 4,
    /// Create topics.
    Create = 5,
    /// Delete topics, records, groups and their offsets.
    Delete = 6,
    /// Change partitions, ACLs, leaders and reassignments.
    Alter = 7,
    /// See that a resource exists and read its state.
    Describe = 8,
    /// What brokers do to each other: replica fetches, transaction markers.
    ClusterAction = 9,
    /// Read configs.
    DescribeConfigs = 10,
    /// Change configs.
    AlterConfigs = 11,
    /// Produce idempotently without a transactional id.
    IdempotentWrite = 12,
    /// Create delegation tokens for another user.
    CreateTokens = 13,
    /// Describe another user's delegation tokens.
    DescribeTokens = 14,
}

/// The operations a topic supports, as its authorized-operations field lists them (Kafka's
/// `AclEntry.supportedOperations(TOPIC)`).
pub const TOPIC_OPERATIONS: &[AclOperation] = &[
    AclOperation::Read,
    AclOperation::Write,
    AclOperation::Create,
    AclOperation::Delete,
    AclOperation::Alter,
    AclOperation::Describe,
    AclOperation::DescribeConfigs,
    AclOperation::AlterConfigs,
];

/// The operations the cluster supports, as its authorized-operations field lists them.
pub const CLUSTER_OPERATIONS: &[AclOperation] = &[
    AclOperation::Create,
    AclOperation::Alter,
    AclOperation::Describe,
    AclOperation::ClusterAction,
    AclOperation::DescribeConfigs,
    AclOperation::AlterConfigs,
    AclOperation::IdempotentWrite,
];

/// The operations a group supports, as DescribeGroups' authorized-operations lists them
/// (Kafka's `AclEntry.supportedOperations(GROUP)`: DESCRIBE_CONFIGS and ALTER_CONFIGS since
/// groups have configs, KIP-848).
pub const GROUP_OPERATIONS: &[AclOperation] = &[
    AclOperation::Read,
    AclOperation::Delete,
    AclOperation::Describe,
    AclOperation::DescribeConfigs,
    AclOperation::AlterConfigs,
];

/// The name of the cluster resource, as in every Kafka ACL on the cluster.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// One question put to the authorizer: may the request's principal do `operation` on
/// the resource `resource_type`/`name`?
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action<'a> {
    /// The operation.
    pub operation: AclOperation,
    /// The kind of resource.
    pub resource_type: ResourceType,
    /// The resource's name ([`CLUSTER_NAME`] for the cluster).
    pub name: &'a str,
    /// Log a denial at INFO (the request asked for this resource); otherwise at TRACE
    /// (the answer only decides what a response includes). Kafka's `logIfDenied`.
    pub log_if_denied: bool,
    /// Log an allowance at DEBUG (access is granted by it); otherwise at TRACE (the answer
    /// only reports what could be done). Kafka's `logIfAllowed`.
    pub log_if_allowed: bool,
}

/// What an authorizer knows of the request besides the actions (Kafka's
/// `AuthorizableRequestContext`).
#[derive(Clone, Copy, Debug)]
pub struct RequestIdentity<'a> {
    /// Who sent it.
    pub principal: &'a KafkaPrincipal,
    /// From where (ACLs may name hosts).
    pub client_address: SocketAddr,
    /// The listener it came in on.
    pub listener_name: &'a str,
    /// The API asked for.
    pub api_key: ApiKey,
}

/// The policy deciding every [`Action`]. Implementations must be cheap and must not
/// block: handlers call it on the request path, for every topic of a request.
pub trait Authorizer: Send + Sync {
    /// Whether the principal may take `action`.
    fn authorize(&self, request: &RequestIdentity<'_>, action: &Action<'_>) -> bool;

    /// Whether the principal may do `operation` on at least one resource of
    /// `resource_type` (Kafka's `authorizeByResourceType`): an idempotent producer without
    /// IDEMPOTENT_WRITE on the cluster may still get a producer id if it may write to some
    /// topic.
    fn authorize_by_resource_type(
        &self,
        request: &RequestIdentity<'_>,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool;

    /// True if [`Self::authorize`] says yes to everything, so callers may skip building
    /// actions. Only [`AllowEveryone`] should say so.
    fn allows_everything(&self) -> bool {
        false
    }
}

/// The authorizer of a broker without ACLs (no `authorizer.class.name`): everything is
/// allowed, as in Kafka.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllowEveryone;

impl Authorizer for AllowEveryone {
    fn authorize(&self, _request: &RequestIdentity<'_>, _action: &Action<'_>) -> bool {
        true
    }

    fn authorize_by_resource_type(
        &self,
        _request: &RequestIdentity<'_>,
        _operation: AclOperation,
        _resource_type: ResourceType,
    ) -> bool {
        true
    }

    fn allows_everything(&self) -> bool {
        true
    }
}

/// The authorizer as one request sees it: the broker's policy plus the request's
/// principal, address, listener and API. Owned (two `Arc`s), so the waiting half of a
/// handler (Fetch runs wholly in its future) can take it along.
#[derive(Clone)]
pub struct RequestAuthorizer {
    authorizer: Arc<dyn Authorizer>,
    principal: Arc<KafkaPrincipal>,
    client_address: SocketAddr,
    listener_name: crate::listeners::ListenerName,
    api_key: ApiKey,
}

impl RequestAuthorizer {
    /// The authorizer of one request.
    #[must_use]
    pub fn new(
        authorizer: Arc<dyn Authorizer>,
        principal: Arc<KafkaPrincipal>,
        client_address: SocketAddr,
        listener_name: crate::listeners::ListenerName,
        api_key: ApiKey,
    ) -> Self {
        Self {
            authorizer,
            principal,
            client_address,
            listener_name,
            api_key,
        }
    }

    /// Replaces the principal (the connection's, once authenticated).
    pub fn set_principal(&mut self, principal: Arc<KafkaPrincipal>) {
        self.principal = principal;
    }

    /// The request's principal.
    #[must_use]
    pub fn principal(&self) -> &KafkaPrincipal {
        &self.principal
    }

    /// Whether the request's principal may do `operation` on `resource_type`/`name`. The
    /// authorizer logs a denial at INFO, as Kafka's authorizer logger does.
    #[must_use]
    pub fn authorize(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        self.check(operation, resource_type, name, true, true)
    }

    /// [`Self::authorize`] on the cluster resource.
    #[must_use]
    pub fn authorize_cluster(&self, operation: AclOperation) -> bool {
        self.authorize(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// [`Self::authorize_cluster`] without logging a denial: for a cluster-wide permission
    /// that spares per-resource checks when present (Kafka's `logIfDenied = false`).
    #[must_use]
    pub fn authorize_cluster_quietly(&self, operation: AclOperation) -> bool {
        self.check(operation, ResourceType::Cluster, CLUSTER_NAME, false, true)
    }

    /// [`Self::authorize`] without logging a denial: for a permission that only decides
    /// what an answer includes (Kafka's `logIfDenied = false`).
    #[must_use]
    pub fn authorize_quietly(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        self.check(operation, resource_type, name, false, true)
    }

    /// The cluster's authorized operations as Metadata (v8-10) and DescribeCluster report
    /// them: none unless the principal may DESCRIBE the cluster (asked as Kafka asks it,
    /// logging a denial), else [`Self::authorized_operations`] of the cluster.
    #[must_use]
    pub fn cluster_authorized_operations(&self) -> i32 {
        if self.authorize_cluster(AclOperation::Describe) {
            self.authorized_operations(ResourceType::Cluster, CLUSTER_NAME, CLUSTER_OPERATIONS)
        } else {
            0
        }
    }

    /// The operations of `supported` (a bit per `AclOperation` code) the principal may do
    /// on the resource, as the authorized-operations fields of Metadata, DescribeCluster
    /// and DescribeGroups report them (Kafka's `AuthHelper.authorizedOperations`); all of
    /// them without an authorizer. Neither answer is logged above TRACE.
    #[must_use]
    pub fn authorized_operations(
        &self,
        resource_type: ResourceType,
        name: &str,
        supported: &[AclOperation],
    ) -> i32 {
        supported
            .iter()
            .filter(|op| {
                self.authorizer.allows_everything()
                    || self.check(**op, resource_type, name, false, false)
            })
            .fold(0, |bits, op| bits | (1 << (*op as i32)))
    }

    /// Whether the principal may do `operation` on some resource of `resource_type`.
    #[must_use]
    pub fn authorize_any(&self, operation: AclOperation, resource_type: ResourceType) -> bool {
        self.authorizer.allows_everything()
            || self.authorizer.authorize_by_resource_type(
                &self.identity(),
                operation,
                resource_type,
            )
    }

    fn identity(&self) -> RequestIdentity<'_> {
        RequestIdentity {
            principal: &self.principal,
            client_address: self.client_address,
            listener_name: self.listener_name.as_str(),
            api_key: self.api_key,
        }
    }

    fn check(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
        log_if_denied: bool,
        log_if_allowed: bool,
    ) -> bool {
        if self.authorizer.allows_everything() {
            return true;
        }
        let identity = self.identity();
        let action = Action {
            operation,
            resource_type,
            name,
            log_if_denied,
            log_if_allowed,
        };
        self.authorizer.authorize(&identity, &action)
    }
}

use AclOperation::{
    Alter, AlterConfigs, ClusterAction, Create, Delete, Describe, DescribeConfigs, IdempotentWrite,
    Read, Write,
};
use ResourceType::{Cluster, Group, Topic, TransactionalId};

/// Every operation Kafka's `KafkaApis` may check for an API served here, read from its
/// handlers: which of them a request needs depends on its content (a transactional
/// produce also needs WRITE on its transactional id; a follower's Fetch needs
/// CLUSTER_ACTION instead of READ on topics; CREATE on the cluster spares CREATE on each
/// topic). An API absent from this table checks nothing (ApiVersions, SaslHandshake and
/// SaslAuthenticate). DescribeCluster, and Metadata v8-10, ask DESCRIBE on the cluster
/// only to fill in the cluster's authorized operations (0 when denied).
pub static REQUIRED_CHECKS: &[(ApiKey, &[(ResourceType, AclOperation)])] = &[
    (ApiKey::Produce, &[(TransactionalId, Write), (Topic, Write)]),
    (ApiKey::Fetch, &[(Cluster, ClusterAction), (Topic, Read)]),
    (ApiKey::ListOffsets, &[(Topic, Describe)]),
    (
        ApiKey::Metadata,
        &[
            (Topic, Describe),
            (Cluster, Create),
            (Topic, Create),
            (Cluster, Describe),
        ],
    ),
    (ApiKey::OffsetCommit, &[(Group, Read), (Topic, Read)]),
    (ApiKey::OffsetFetch, &[(Group, Describe), (Topic, Describe)]),
    (
        ApiKey::FindCoordinator,
        &[(Group, Describe), (TransactionalId, Describe)],
    ),
    (ApiKey::JoinGroup, &[(Group, Read)]),
    (ApiKey::Heartbeat, &[(Group, Read)]),
    (ApiKey::LeaveGroup, &[(Group, Read)]),
    (ApiKey::SyncGroup, &[(Group, Read)]),
    (ApiKey::DescribeGroups, &[(Group, Describe)]),
    (
        ApiKey::ListGroups,
        &[(Cluster, Describe), (Group, Describe)],
    ),
    (
        ApiKey::CreateTopics,
        &[(Cluster, Create), (Topic, Create), (Topic, DescribeConfigs)],
    ),
    (ApiKey::DeleteTopics, &[(Topic, Describe), (Topic, Delete)]),
    (ApiKey::DeleteRecords, &[(Topic, Delete)]),
    (
        ApiKey::InitProducerId,
        &[
            (TransactionalId, Write),
            (Cluster, IdempotentWrite),
            (Topic, Write),
        ],
    ),
    (
        ApiKey::OffsetForLeaderEpoch,
        &[(Cluster, ClusterAction), (Topic, Describe)],
    ),
    (
        ApiKey::AddPartitionsToTxn,
        &[
            (Cluster, ClusterAction),
            (TransactionalId, Write),
            (Topic, Write),
        ],
    ),
    (
        ApiKey::AddOffsetsToTxn,
        &[(TransactionalId, Write), (Group, Read)],
    ),
    (ApiKey::EndTxn, &[(TransactionalId, Write)]),
    (
        ApiKey::WriteTxnMarkers,
        &[(Cluster, Alter), (Cluster, ClusterAction)],
    ),
    (
        ApiKey::TxnOffsetCommit,
        &[(TransactionalId, Write), (Group, Read), (Topic, Read)],
    ),
    (
        ApiKey::DescribeConfigs,
        &[
            (Cluster, DescribeConfigs),
            (Topic, DescribeConfigs),
            (Group, DescribeConfigs),
        ],
    ),
    (
        ApiKey::AlterConfigs,
        &[(Cluster, AlterConfigs), (Topic, AlterConfigs)],
    ),
    (
        ApiKey::IncrementalAlterConfigs,
        &[
            (Cluster, AlterConfigs),
            (Topic, AlterConfigs),
            (Group, AlterConfigs),
        ],
    ),
    (ApiKey::DescribeLogDirs, &[(Cluster, Describe)]),
    (ApiKey::CreatePartitions, &[(Topic, Alter)]),
    (ApiKey::DeleteGroups, &[(Group, Delete)]),
    (ApiKey::ElectLeaders, &[(Cluster, Alter)]),
    (ApiKey::OffsetDelete, &[(Group, Delete), (Topic, Read)]),
    (ApiKey::AlterPartitionReassignments, &[(Cluster, Alter)]),
    (ApiKey::ListPartitionReassignments, &[(Cluster, Describe)]),
    (ApiKey::DescribeQuorum, &[(Cluster, Describe)]),
    (ApiKey::DescribeCluster, &[(Cluster, Describe)]),
    (ApiKey::DescribeTopicPartitions, &[(Topic, Describe)]),
    (ApiKey::DescribeProducers, &[(Topic, Read)]),
    (
        ApiKey::DescribeTransactions,
        &[(TransactionalId, Describe), (Topic, Describe)],
    ),
    (ApiKey::ListTransactions, &[(TransactionalId, Describe)]),
    (ApiKey::DescribeUserScramCredentials, &[(Cluster, Describe)]),
    (ApiKey::AlterUserScramCredentials, &[(Cluster, Alter)]),
    (ApiKey::DescribeAcls, &[(Cluster, Describe)]),
    (ApiKey::CreateAcls, &[(Cluster, Alter)]),
    (ApiKey::DeleteAcls, &[(Cluster, Alter)]),
    (ApiKey::DescribeClientQuotas, &[(Cluster, DescribeConfigs)]),
    (ApiKey::AlterClientQuotas, &[(Cluster, AlterConfigs)]),
];

/// The operations [`REQUIRED_CHECKS`] lists for `api_key` (empty if none).
#[must_use]
pub fn required_checks(api_key: ApiKey) -> &'static [(ResourceType, AclOperation)] {
    REQUIRED_CHECKS
        .iter()
        .find(|(key, _)| *key == api_key)
        .map_or(&[], |(_, checks)| checks)
}
