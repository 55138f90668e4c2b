//! The wall clock as Kafka reads it (`Time.SYSTEM.milliseconds()`): milliseconds since the
//! Unix epoch as an `i64`, the type of every timestamp field on Kafka's wire and in its
//! records. Durations and deadlines use `Instant`, never this clock: it can jump.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch now; 0 for a clock set before 1970 (Kafka's
/// `System.currentTimeMillis()` would be negative there, which no field accepts).
#[must_use]
pub fn now_ms() -> i64 {
    unix_ms(SystemTime::now())
}

/// `at` as milliseconds since the Unix epoch, 0 before it and `i64::MAX` past year
/// 292 million.
#[must_use]
pub fn unix_ms(at: SystemTime) -> i64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The clock is in milliseconds, and a time before the epoch is clamped rather than
    /// panicking.
    #[test]
    fn unix_ms_counts_milliseconds_and_clamps_before_the_epoch() {
        assert_eq!(
            unix_ms(UNIX_EPOCH + Duration::from_micros(1_234_567)),
            1_234
        );
        assert_eq!(unix_ms(UNIX_EPOCH - Duration::from_secs(1)), 0);
        // 2020-01-01: the clock on any machine running this is past it.
        assert!(now_ms() > 1_577_836_800_000, "now_ms {}", now_ms());
    }
}
