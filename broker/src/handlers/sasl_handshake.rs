//! SaslHandshake (API key 17) where no SASL exchange is due: on a listener without SASL,
//! or on an authenticated connection whose listener does not re-authenticate. Kafka's
//! `KafkaApis` answers ILLEGAL_SASL_STATE there; the exchange itself is the connection's
//! (`crate::sasl`), which sees these requests first on SASL listeners.

use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
use kafka_protocol::protocol::VersionRange;
use kafka_protocol::ResponseError;

use super::RequestContext;

/// Versions served (Kafka 4.x serves 0-1).
pub const VERSIONS: VersionRange = VersionRange { min: 0, max: 1 };

/// Answers a SaslHandshake that is out of place.
pub fn handle(_ctx: &RequestContext, _request: SaslHandshakeRequest) -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code())
}
