//! One file per Kafka API, named as Kafka names it, each declaring the versions it serves.
//! This file holds the single dispatch `match` and derives the ApiVersions table from the
//! handlers' `VERSIONS`, so we never advertise a version no handler implements.
//!
//! A handler runs in two phases. The synchronous part runs in request order on the
//! connection's reader (so two produce requests from one connection append in the order they
//! were sent); it returns a future for the waiting part (acks=all durability, fetch
//! long-polls), which the connection's writer awaits in order while later requests proceed.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseKind};
use kafka_protocol::protocol::VersionRange;
use logbook_protocol::FileRecords;

use crate::broker::Broker;

pub mod api_versions;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_topics;
pub mod describe_configs;
pub mod describe_groups;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod produce;
pub mod sync_group;

tokio::task_local! {
    /// The client's address for the request being dispatched, when the connection sets it
    /// (`CLIENT_ADDRESS.sync_scope(peer, || dispatch(..))`); group members report it as their host.
    pub static CLIENT_ADDRESS: std::net::SocketAddr;
}

/// The client host as Kafka reports it (`/127.0.0.1`), or "" when the connection did not
/// set [`CLIENT_ADDRESS`].
#[must_use]
pub fn client_host() -> String {
    CLIENT_ADDRESS
        .try_with(|address| format!("/{}", address.ip()))
        .unwrap_or_default()
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

/// The versions we serve of `api_key`, or `None` if we do not serve it.
#[must_use]
pub fn supported(api_key: ApiKey) -> Option<VersionRange> {
    match api_key {
        ApiKey::Produce => Some(produce::VERSIONS),
        ApiKey::Fetch => Some(fetch::VERSIONS),
        ApiKey::ListOffsets => Some(list_offsets::VERSIONS),
        ApiKey::Metadata => Some(metadata::VERSIONS),
        ApiKey::ApiVersions => Some(api_versions::VERSIONS),
        ApiKey::CreateTopics => Some(create_topics::VERSIONS),
        ApiKey::DeleteTopics => Some(delete_topics::VERSIONS),
        ApiKey::CreatePartitions => Some(create_partitions::VERSIONS),
        ApiKey::DescribeConfigs => Some(describe_configs::VERSIONS),
        ApiKey::InitProducerId => Some(init_producer_id::VERSIONS),
        ApiKey::FindCoordinator => Some(find_coordinator::VERSIONS),
        ApiKey::JoinGroup => Some(join_group::VERSIONS),
        ApiKey::SyncGroup => Some(sync_group::VERSIONS),
        ApiKey::Heartbeat => Some(heartbeat::VERSIONS),
        ApiKey::LeaveGroup => Some(leave_group::VERSIONS),
        ApiKey::OffsetCommit => Some(offset_commit::VERSIONS),
        ApiKey::OffsetFetch => Some(offset_fetch::VERSIONS),
        ApiKey::ListGroups => Some(list_groups::VERSIONS),
        ApiKey::DescribeGroups => Some(describe_groups::VERSIONS),
        ApiKey::DeleteGroups => Some(delete_groups::VERSIONS),
        ApiKey::OffsetDelete => Some(offset_delete::VERSIONS),
        _ => None,
    }
}

/// Runs the ordered part of a request and returns the future of its response.
pub fn dispatch(broker: &Arc<Broker>, header: &RequestHeader, body: RequestKind) -> ResponseFuture {
    let version = header.request_api_version;
    match body {
        RequestKind::ApiVersions(req) => {
            ready(ResponseKind::ApiVersions(api_versions::handle(&req)))
        }
        RequestKind::Metadata(req) => ready(ResponseKind::Metadata(metadata::handle(
            broker, req, version,
        ))),
        RequestKind::CreateTopics(req) => ready(ResponseKind::CreateTopics(create_topics::handle(
            broker, req, version,
        ))),
        RequestKind::DeleteTopics(req) => ready(ResponseKind::DeleteTopics(delete_topics::handle(
            broker, req, version,
        ))),
        RequestKind::Produce(req) => produce::handle(broker, req, version),
        RequestKind::Fetch(req) => fetch::handle(broker, req, version),
        RequestKind::ListOffsets(req) => ready(ResponseKind::ListOffsets(list_offsets::handle(
            broker, req, version,
        ))),
        RequestKind::CreatePartitions(req) => ready(ResponseKind::CreatePartitions(
            create_partitions::handle(broker, &req),
        )),
        RequestKind::DescribeConfigs(req) => ready(ResponseKind::DescribeConfigs(
            describe_configs::handle(broker, &req, version),
        )),
        RequestKind::InitProducerId(req) => ready(ResponseKind::InitProducerId(
            init_producer_id::handle(broker, &req),
        )),
        RequestKind::FindCoordinator(req) => ready(ResponseKind::FindCoordinator(
            find_coordinator::handle(broker, &req, version),
        )),
        RequestKind::JoinGroup(req) => join_group::handle(broker, header, req, version),
        RequestKind::SyncGroup(req) => sync_group::handle(broker, &req, version),
        RequestKind::Heartbeat(req) => {
            ready(ResponseKind::Heartbeat(heartbeat::handle(broker, &req)))
        }
        RequestKind::LeaveGroup(req) => ready(ResponseKind::LeaveGroup(leave_group::handle(
            broker, &req, version,
        ))),
        RequestKind::OffsetCommit(req) => offset_commit::handle(broker, &req, version),
        RequestKind::OffsetFetch(req) => ready(ResponseKind::OffsetFetch(offset_fetch::handle(
            broker, &req, version,
        ))),
        RequestKind::ListGroups(req) => ready(ResponseKind::ListGroups(list_groups::handle(
            broker, &req, version,
        ))),
        RequestKind::DescribeGroups(req) => ready(ResponseKind::DescribeGroups(
            describe_groups::handle(broker, &req, version),
        )),
        RequestKind::DeleteGroups(req) => ready(ResponseKind::DeleteGroups(delete_groups::handle(
            broker, &req,
        ))),
        RequestKind::OffsetDelete(req) => ready(ResponseKind::OffsetDelete(offset_delete::handle(
            broker, &req,
        ))),
        other => {
            // decode_request only lets through keys `supported` lists, so this is a bug.
            tracing::error!(request = ?std::mem::discriminant(&other), "request kind without a handler");
            Box::pin(std::future::ready(None))
        }
    }
}

#[cfg(test)]
mod tests;
