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

use crate::broker::Broker;

pub mod api_versions;
pub mod create_topics;
pub mod delete_topics;
pub mod fetch;
pub mod init_producer_id;
pub mod list_offsets;
pub mod metadata;
pub mod produce;

/// The waiting half of a request; `None` means "send no response" (produce with acks=0).
pub type ResponseFuture = Pin<Box<dyn Future<Output = Option<ResponseKind>> + Send>>;

/// A response that needs no waiting.
pub fn ready(response: ResponseKind) -> ResponseFuture {
    Box::pin(std::future::ready(Some(response)))
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
        ApiKey::InitProducerId => Some(init_producer_id::VERSIONS),
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
        RequestKind::InitProducerId(req) => ready(ResponseKind::InitProducerId(
            init_producer_id::handle(broker, &req),
        )),
        other => {
            // decode_request only lets through keys `supported` lists, so this is a bug.
            tracing::error!(request = ?std::mem::discriminant(&other), "request kind without a handler");
            Box::pin(std::future::ready(None))
        }
    }
}

#[cfg(test)]
mod tests;
