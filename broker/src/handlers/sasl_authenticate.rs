//! SaslAuthenticate (API key 36) where no SASL exchange is due: on a listener without
//! SASL, or after authentication. Kafka's `KafkaApis` answers ILLEGAL_SASL_STATE there;
//! the exchange itself is the connection's (`crate::sasl`).

use kafka_protocol::messages::{SaslAuthenticateRequest, SaslAuthenticateResponse};
use kafka_protocol::protocol::{StrBytes, VersionRange};
use kafka_protocol::ResponseError;

use super::RequestContext;

/// Versions served (Kafka 4.x serves 0-2).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 2 };

/// Answers a SaslAuthenticate that is out of place.
pub fn handle(
    _ctx: &RequestContext,
    _request: SaslAuthenticateRequest,
) -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "Unexpected SaslAuthenticate request: no SASL exchange is due on this connection",
        )))
}
