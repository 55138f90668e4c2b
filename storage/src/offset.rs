//! `Offset`: a record's position in a partition's log.
//!
//! Offsets and leader epochs are both small integers that travel together (an epoch's
//! start offset, a fetch at an offset with an epoch); a newtype at the storage/replication
//! boundary keeps the compiler from letting one stand in for the other, or a byte
//! position or a count stand in for either. Inside the log's own arithmetic plain `i64`
//! stays (the on-disk formats are `i64` base offsets plus `i32` deltas); the wire keeps
//! `i64` too, so the broker converts where it builds a response.

use std::fmt;

/// A record offset (Kafka's `long offset`). Ordered; `Offset(n).next()` is `n + 1`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Offset(pub i64);

impl Offset {
    /// No bound: as a read's `max_offset`, everything up to the log end.
    pub const MAX: Offset = Offset(i64::MAX);

    /// The offset as the wire and the file formats carry it.
    #[must_use]
    pub const fn get(self) -> i64 {
        self.0
    }

    /// The offset after this one.
    #[must_use]
    pub const fn next(self) -> Offset {
        Offset(self.0 + 1)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<Offset> for i64 {
    fn from(offset: Offset) -> i64 {
        offset.0
    }
}

/// Lets the crate's own tests compare with literals (`assert_eq!(log.log_end_offset(), 5)`);
/// production code compares offsets with offsets.
#[cfg(test)]
impl PartialEq<i64> for Offset {
    fn eq(&self, other: &i64) -> bool {
        self.0 == *other
    }
}
