//! Kafka's names of error codes, as its `Errors` enum (in Kafka's clients module) spells
//! them: the broker's metrics label errors with them, and the admin tools print them.

use kafka_protocol::ResponseError;

/// Kafka's name of an error code as its `Errors` enum spells it
/// (`NOT_LEADER_OR_FOLLOWER`), for metrics labels and the tools' messages; the number for a
/// code kafka-protocol does not know.
#[must_use]
pub fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None | Some(ResponseError::Unknown(_)) => code.to_string(),
        Some(error) => {
            // kafka-protocol's variant names are Kafka's in CamelCase.
            let camel = format!("{error:?}");
            let mut name = String::with_capacity(camel.len() + 8);
            for (i, c) in camel.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    name.push('_');
                }
                name.push(c.to_ascii_uppercase());
            }
            name
        }
    }
}
