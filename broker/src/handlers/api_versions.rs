//! ApiVersions (API key 18): the client learns which versions of each API we serve, and
//! (v3+) which features the cluster supports and has finalized. The list is derived from the
//! handlers' `VERSIONS`; the unknown-version fallback (v0 layout with UNSUPPORTED_VERSION) is
//! built by the connection from [`unsupported_version`].
//!
//! The one feature advertised is `transaction.version` (supported 0–2, finalized at the
//! broker's `--transaction-version`, 2 by default as in Kafka 4.x): kafka-clients 4.x takes
//! transaction protocol v2 (KIP-890 part 2) from it. Kafka also lists `metadata.version`,
//! `kraft.version`, `group.version` (KIP-848), `eligible.leader.replicas.version`,
//! `share.version` and `streams.version`; they are left out because Logbook does not serve
//! what they announce (a client reading `group.version` 1 may pick the consumer group
//! protocol of KIP-848, which is not served), and a feature absent means "not supported".

use std::sync::OnceLock;

use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

/// Kafka's feature name of the transaction protocol (`TransactionVersion.FEATURE_NAME`).
pub const TRANSACTION_VERSION_FEATURE: &str = "transaction.version";

/// Highest `transaction.version` this broker implements.
pub const TRANSACTION_VERSION_MAX: i16 = 2;

/// The lowest Produce version advertised, below the lowest served (`produce::VERSIONS`):
/// Kafka 4.x still lists Produce from v0 (KAFKA-18659) although it serves v3 and up only.
///
/// Why: librdkafka before 2.10 compresses only when the broker's advertised Produce range
/// includes the versions it associates with each codec, starting from v0; given a range
/// starting at v3 it sent every batch uncompressed and still reported success (librdkafka
/// 2.6.0 and 2.0.2 against Logbook: gzip, lz4 and snappy all stored uncompressed).
/// Clients pick the highest common version, so none sends v0-2; a request that does is
/// refused like any other unserved version.
pub const PRODUCE_ADVERTISED_MIN_VERSION: i16 = 0;

/// The epoch of the finalized features. Kafka uses the metadata log offset of the last
/// feature change; clients keep the features of the highest epoch they have seen and ignore
/// -1. Here the level can change only across a restart, so the epoch is the start time in
/// milliseconds: a client that reconnects after a restart with another level sees a higher
/// epoch and takes the new level.
fn finalized_features_epoch() -> i64 {
    static EPOCH: OnceLock<i64> = OnceLock::new();
    *EPOCH.get_or_init(logbook_common::now_ms)
}

/// The full table of served APIs, sorted by key, and the features, for a broker whose
/// `transaction.version` is finalized at `transaction_version`.
#[must_use]
pub fn response(error_code: i16, transaction_version: i16) -> ApiVersionsResponse {
    let api_keys = ApiKey::iter()
        .filter_map(|key| {
            super::supported_at(key, transaction_version).map(|range| {
                let min = if key == ApiKey::Produce {
                    PRODUCE_ADVERTISED_MIN_VERSION
                } else {
                    range.min
                };
                ApiVersion::default()
                    .with_api_key(key as i16)
                    .with_min_version(min)
                    .with_max_version(range.max)
            })
        })
        .collect();
    let feature = StrBytes::from_static_str(TRANSACTION_VERSION_FEATURE);
    // Kafka lists a feature finalized at level 0 as not finalized at all.
    let finalized = if transaction_version > 0 {
        vec![FinalizedFeatureKey::default()
            .with_name(feature.clone())
            .with_min_version_level(transaction_version)
            .with_max_version_level(transaction_version)]
    } else {
        Vec::new()
    };
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(api_keys)
        .with_supported_features(vec![SupportedFeatureKey::default()
            .with_name(feature)
            .with_min_version(0)
            .with_max_version(TRANSACTION_VERSION_MAX)])
        .with_finalized_features_epoch(finalized_features_epoch())
        .with_finalized_features(finalized)
}

/// The answer to an ApiVersions request at a version we do not serve: UNSUPPORTED_VERSION
/// and, as Kafka's `ApiVersionsRequest.getErrorResponse`, only ApiVersions' own range, from
/// which the client picks the version to retry with.
#[must_use]
pub fn unsupported_version() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(kafka_protocol::ResponseError::UnsupportedVersion.code())
        .with_api_keys(vec![ApiVersion::default()
            .with_api_key(ApiKey::ApiVersions as i16)
            .with_min_version(VERSIONS.min)
            .with_max_version(VERSIONS.max)])
}

/// Answers a supported ApiVersions request.
#[must_use]
pub fn handle(ctx: &super::RequestContext, _request: ApiVersionsRequest) -> ApiVersionsResponse {
    response(crate::errors::NONE, ctx.broker.config.transaction_version)
}
