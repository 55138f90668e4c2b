//! ApiVersions (API key 18): the client learns which versions of each API we serve.
//! The list is derived from the handlers' `VERSIONS`; the unknown-version fallback (v0
//! layout with UNSUPPORTED_VERSION) is built by the connection from [`response`].

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};
use kafka_protocol::protocol::VersionRange;

/// Versions served.
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 4 };

/// The full table of served APIs, sorted by key.
#[must_use]
pub fn response(error_code: i16) -> ApiVersionsResponse {
    let api_keys = ApiKey::iter()
        .filter_map(|key| {
            super::supported(key).map(|range| {
                ApiVersion::default()
                    .with_api_key(key as i16)
                    .with_min_version(range.min)
                    .with_max_version(range.max)
            })
        })
        .collect();
    ApiVersionsResponse::default()
        .with_error_code(error_code)
        .with_api_keys(api_keys)
}

/// Answers a supported ApiVersions request.
#[must_use]
pub fn handle(_ctx: &super::RequestContext, _request: ApiVersionsRequest) -> ApiVersionsResponse {
    response(crate::errors::NONE)
}
