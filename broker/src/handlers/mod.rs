//! One file per Kafka API, named as Kafka names it, each declaring the versions it serves.
//! This file holds the one table of served APIs ([`APIS`]: key, versions, handler), from
//! which both the ApiVersions answer and the dispatch are derived, so we never advertise a
//! version no handler implements and adding an API is adding one entry.
//!
//! Every handler has the same shape, `handle(ctx: &RequestContext, request: XRequest)`,
//! and returns either its response (answered at once) or a [`ResponseFuture`]; the table's
//! entry says which. A handler runs in two phases. The synchronous part runs in request
//! order on the connection's reader (so two produce requests from one connection append in
//! the order they were sent); it returns a future for the waiting part (acks=all
//! durability, fetch long-polls), which the connection's writer awaits in order while later
//! requests proceed.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use logbook_protocol::FileRecords;

use crate::authorizer::{AclOperation, KafkaPrincipal, RequestAuthorizer, ResourceType};
use crate::broker::Broker;
use crate::listeners::ListenerName;

pub mod acls;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_client_quotas;
pub mod alter_configs;
pub mod alter_partition_reassignments;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod create_acls;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_acls;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_acls;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_configs;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod incremental_alter_configs;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl_authenticate;
pub mod sasl_handshake;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

/// What a handler knows about the request besides its body (Kafka's `RequestContext`):
/// who sent it, over which listener, at which version. Built by the connection for each
/// request and borrowed by the handler's synchronous part; a waiting part takes what it
/// needs (an `Arc` of the broker) by value.
pub struct RequestContext {
    /// Shared broker state.
    pub broker: Arc<Broker>,
    /// The client's socket address.
    pub client_address: SocketAddr,
    /// The broker's authorizer with this request's principal (`User:ANONYMOUS` until
    /// SASL/TLS exist).
    pub authorizer: RequestAuthorizer,
    /// The listener the connection came in on: answers name the brokers' addresses on it.
    pub listener_name: ListenerName,
    /// The request's API.
    pub api_key: ApiKey,
    /// The request's API version (the body was decoded at it; the response is encoded at it).
    pub api_version: i16,
    /// The request's correlation id.
    pub correlation_id: i32,
    /// The client id from the request header, if any.
    pub client_id: Option<StrBytes>,
    /// Set by a handler that wants the connection closed after this request (Kafka's
    /// `RequestChannel.CloseConnectionResponse`).
    close_connection: AtomicBool,
    /// Set by a handler whose request took its client over a quota: how long the
    /// connection reads no further request (KIP-219's muted channel).
    throttle_ms: std::sync::atomic::AtomicI32,
}

impl RequestContext {
    /// The cluster's metadata image as this broker has it (ACLs, SCRAM credentials, client
    /// quotas); empty on a broker without one.
    #[must_use]
    pub fn metadata_image(&self) -> logbook_metadata::MetadataImage {
        self.broker
            .topics
            .cluster()
            .map(|cluster| cluster.metadata.image())
            .unwrap_or_default()
    }

    /// A context for one request.
    #[must_use]
    pub fn new(
        broker: Arc<Broker>,
        client_address: SocketAddr,
        listener_name: ListenerName,
        api_key: ApiKey,
        api_version: i16,
        correlation_id: i32,
        client_id: Option<StrBytes>,
    ) -> Self {
        let authorizer = RequestAuthorizer::new(
            Arc::clone(&broker.authorizer),
            anonymous(),
            client_address,
            listener_name.clone(),
            api_key,
        );
        Self {
            broker,
            client_address,
            authorizer,
            listener_name,
            api_key,
            api_version,
            correlation_id,
            client_id,
            close_connection: AtomicBool::new(false),
            throttle_ms: std::sync::atomic::AtomicI32::new(0),
        }
    }

    /// The context as seen by `principal` (the connection's authenticated principal).
    #[must_use]
    pub fn with_principal(mut self, principal: Arc<KafkaPrincipal>) -> Self {
        self.authorizer.set_principal(principal);
        self
    }

    /// The client host as Kafka reports it to group members (`/127.0.0.1`).
    #[must_use]
    pub fn client_host(&self) -> String {
        format!("/{}", self.client_address.ip())
    }

    /// Asks the connection to close once the responses already owed are sent, and to read
    /// no further request (an acks=0 produce that failed: the client learns of the failure
    /// only this way, and refreshes its metadata).
    pub fn close_connection(&self) {
        self.close_connection.store(true, Ordering::Relaxed);
    }

    /// The quota of `manager`'s type that applies to this request's user and client id, if
    /// any quota is set (one look at the metadata image otherwise).
    #[must_use]
    pub fn quota(
        &self,
        manager: &crate::client_quota_manager::ClientQuotaManager,
    ) -> Option<crate::client_quota_manager::Applied> {
        let quotas = self.broker.topics.cluster()?.metadata.client_quotas()?;
        let client_id = self.client_id.as_ref().map_or("", |c| c.as_str());
        manager.applied(&quotas, &self.authorizer.principal().name, client_id)
    }

    /// Mutes the connection for `ms` after this request (a quota's throttle time): it
    /// reads no further request until then, as Kafka's throttled channel.
    pub fn throttle(&self, ms: i32) {
        self.throttle_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// How long the connection is muted after this request (0: not).
    #[must_use]
    pub fn throttle_ms(&self) -> i32 {
        self.throttle_ms.load(Ordering::Relaxed)
    }

    /// Whether the request's principal may do `operation` on `resource_type`/`name`: the
    /// one door to the broker's [`Authorizer`](crate::authorizer::Authorizer), asked at
    /// each point where Kafka's `KafkaApis` asks (see `authorizer::REQUIRED_CHECKS`).
    #[must_use]
    pub fn authorize(
        &self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        self.authorizer.authorize(operation, resource_type, name)
    }

    /// [`Self::authorize`] on the cluster resource.
    #[must_use]
    pub fn authorize_cluster(&self, operation: AclOperation) -> bool {
        self.authorizer.authorize_cluster(operation)
    }

    /// The refusal of a request that writes a transaction's group offsets (AddOffsetsToTxn,
    /// TxnOffsetCommit): WRITE on the transactional id is checked first, then READ on the
    /// group, as Kafka checks them.
    #[must_use]
    pub fn refuse_txn_group(
        &self,
        transactional_id: &str,
        group_id: &str,
    ) -> Option<kafka_protocol::ResponseError> {
        if !self.authorize(
            AclOperation::Write,
            ResourceType::TransactionalId,
            transactional_id,
        ) {
            Some(kafka_protocol::ResponseError::TransactionalIdAuthorizationFailed)
        } else if !self.authorize(AclOperation::Read, ResourceType::Group, group_id) {
            Some(kafka_protocol::ResponseError::GroupAuthorizationFailed)
        } else {
            None
        }
    }

    /// Whether a handler asked for the connection to close.
    #[must_use]
    pub fn closes_connection(&self) -> bool {
        self.close_connection.load(Ordering::Relaxed)
    }
}

/// The principal of an unauthenticated connection, shared.
pub(crate) fn anonymous() -> Arc<KafkaPrincipal> {
    static ANONYMOUS: std::sync::LazyLock<Arc<KafkaPrincipal>> =
        std::sync::LazyLock::new(|| Arc::new(KafkaPrincipal::anonymous()));
    Arc::clone(&ANONYMOUS)
}

/// A response body, with the record sets it sends straight from segment files (Fetch).
pub struct Response {
    /// The body; its file-backed record sets are stand-ins from `records`.
    pub body: ResponseKind,
    /// Record sets to send with `sendfile` (empty for every API but Fetch).
    pub records: FileRecords,
}

impl From<ResponseKind> for Response {
    fn from(body: ResponseKind) -> Self {
        Self {
            body,
            records: FileRecords::default(),
        }
    }
}

/// The waiting half of a request; `None` means "send no response" (produce with acks=0).
pub type ResponseFuture = Pin<Box<dyn Future<Output = Option<Response>> + Send>>;

/// A response that needs no waiting.
pub fn ready(response: ResponseKind) -> ResponseFuture {
    Box::pin(std::future::ready(Some(response.into())))
}

/// One served API: the single place that names its key, versions and handler.
pub struct Api {
    /// The API.
    pub key: ApiKey,
    /// The versions served, advertised by ApiVersions and checked before decoding.
    pub versions: VersionRange,
    /// Runs the handler's ordered part on a request body of this API.
    pub handle: fn(&RequestContext, RequestKind) -> ResponseFuture,
}

/// One [`Api`] entry. `now` handlers return their response; `later` ones return a
/// [`ResponseFuture`].
macro_rules! api {
    ($key:ident, $module:ident, now) => {
        Api {
            key: ApiKey::$key,
            versions: $module::VERSIONS,
            handle: |ctx, body| match body {
                RequestKind::$key(request) => {
                    ready(ResponseKind::$key($module::handle(ctx, request)))
                }
                other => mismatched(ctx, &other),
            },
        }
    };
    ($key:ident, $module:ident, later) => {
        Api {
            key: ApiKey::$key,
            versions: $module::VERSIONS,
            handle: |ctx, body| match body {
                RequestKind::$key(request) => $module::handle(ctx, request),
                other => mismatched(ctx, &other),
            },
        }
    };
}

/// Every API this broker serves. Adding an API is adding its file and one line here.
pub static APIS: &[Api] = &[
    api!(Produce, produce, later),
    api!(Fetch, fetch, later),
    api!(ListOffsets, list_offsets, now),
    api!(Metadata, metadata, now),
    api!(OffsetCommit, offset_commit, later),
    api!(OffsetFetch, offset_fetch, now),
    api!(FindCoordinator, find_coordinator, now),
    api!(JoinGroup, join_group, later),
    api!(Heartbeat, heartbeat, now),
    api!(LeaveGroup, leave_group, now),
    api!(SyncGroup, sync_group, later),
    api!(DescribeGroups, describe_groups, now),
    api!(ListGroups, list_groups, now),
    api!(ApiVersions, api_versions, now),
    api!(CreateTopics, create_topics, now),
    api!(DeleteTopics, delete_topics, now),
    api!(InitProducerId, init_producer_id, later),
    api!(AddPartitionsToTxn, add_partitions_to_txn, later),
    api!(AddOffsetsToTxn, add_offsets_to_txn, later),
    api!(EndTxn, end_txn, later),
    api!(TxnOffsetCommit, txn_offset_commit, later),
    api!(WriteTxnMarkers, write_txn_markers, later),
    api!(DescribeTransactions, describe_transactions, now),
    api!(ListTransactions, list_transactions, now),
    api!(DescribeConfigs, describe_configs, now),
    api!(DeleteGroups, delete_groups, later),
    api!(CreatePartitions, create_partitions, now),
    api!(OffsetDelete, offset_delete, later),
    api!(DeleteRecords, delete_records, later),
    api!(DescribeLogDirs, describe_log_dirs, now),
    api!(ElectLeaders, elect_leaders, now),
    api!(
        AlterPartitionReassignments,
        alter_partition_reassignments,
        now
    ),
    api!(
        ListPartitionReassignments,
        list_partition_reassignments,
        now
    ),
    api!(DescribeCluster, describe_cluster, now),
    api!(DescribeQuorum, describe_quorum, now),
    api!(DescribeTopicPartitions, describe_topic_partitions, now),
    api!(AlterConfigs, alter_configs, now),
    api!(IncrementalAlterConfigs, incremental_alter_configs, now),
    api!(DescribeProducers, describe_producers, now),
    api!(OffsetForLeaderEpoch, offset_for_leader_epoch, now),
    api!(SaslHandshake, sasl_handshake, now),
    api!(SaslAuthenticate, sasl_authenticate, now),
    api!(
        DescribeUserScramCredentials,
        describe_user_scram_credentials,
        now
    ),
    api!(AlterUserScramCredentials, alter_user_scram_credentials, now),
    api!(DescribeAcls, describe_acls, now),
    api!(CreateAcls, create_acls, now),
    api!(DeleteAcls, delete_acls, now),
    api!(DescribeClientQuotas, describe_client_quotas, now),
    api!(AlterClientQuotas, alter_client_quotas, now),
];

/// A body that does not belong to the context's API: `decode_request` decodes the body by
/// the header's key, so this is a bug; the request gets no answer.
fn mismatched(ctx: &RequestContext, body: &RequestKind) -> ResponseFuture {
    tracing::error!(api_key = ?ctx.api_key, request = ?std::mem::discriminant(body), "request body of another API");
    Box::pin(std::future::ready(None))
}

fn api(key: ApiKey) -> Option<&'static Api> {
    APIS.iter().find(|api| api.key == key)
}

/// The versions we serve of `api_key`, or `None` if we do not serve it.
#[must_use]
pub fn supported(api_key: ApiKey) -> Option<VersionRange> {
    api(api_key).map(|api| api.versions)
}

/// The finalized `transaction.version` from which transaction protocol v2 is served.
pub const TRANSACTION_VERSION_2: i16 = 2;

/// Last EndTxn / TxnOffsetCommit version of transaction protocol v1 (Kafka's
/// `LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2`); v5 of both belongs to protocol v2.
pub const LAST_VERSION_BEFORE_TRANSACTION_V2: i16 = 4;

/// The versions we serve of `api_key` when `transaction.version` is finalized at
/// `transaction_version`: below 2, EndTxn and TxnOffsetCommit stop at v4 (their v5 is
/// transaction protocol v2), so ApiVersions does not offer them and a request at v5 is
/// refused as an unsupported version.
#[must_use]
pub fn supported_at(api_key: ApiKey, transaction_version: i16) -> Option<VersionRange> {
    let range = supported(api_key)?;
    Some(match api_key {
        ApiKey::EndTxn | ApiKey::TxnOffsetCommit if transaction_version < TRANSACTION_VERSION_2 => {
            VersionRange {
                min: range.min,
                max: range.max.min(LAST_VERSION_BEFORE_TRANSACTION_V2),
            }
        }
        _ => range,
    })
}

/// Runs the ordered part of a request and returns the future of its response.
pub fn dispatch(ctx: &RequestContext, body: RequestKind) -> ResponseFuture {
    match api(ctx.api_key) {
        Some(api) => (api.handle)(ctx, body),
        None => mismatched(ctx, &body),
    }
}

#[cfg(test)]
mod tests;
