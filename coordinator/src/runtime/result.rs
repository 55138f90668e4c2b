//! The runtime's write path (Kafka's `CoordinatorResult` and `CoordinatorRuntime`'s write
//! operation): an operation hands back the records it wants in its partition together with
//! its response, and [`CoordinatorRuntime::write`] frames, stamps and appends them in one
//! place for every coordinator, so encoding, appending and the log lines of a failed write
//! are not repeated per coordinator.

use bytes::Bytes;
use logbook_common::now_ms;

use super::framing::encode_batch_as;
use super::{Committable, CoordinatorRuntime, CoordinatorShard};
use crate::partition_writer::WriteError;

/// What a coordinator operation produces: the records to append to its shard's partition,
/// in order, and the response to give once they are written (Kafka's `CoordinatorResult`).
/// No records: nothing to write, the response stands alone.
#[derive(Debug)]
pub struct CoordinatorResult<T> {
    /// The records as (key, value) pairs; a `None` value is a tombstone.
    pub records: Vec<(Bytes, Option<Bytes>)>,
    /// The operation's response.
    pub response: T,
}

/// A [`CoordinatorResult`] after [`CoordinatorRuntime::write`]: the response, the records
/// as appended (for the shard to replay, with the function its load uses), and what to
/// wait for before answering.
pub struct Written<T> {
    /// The operation's response.
    pub response: T,
    /// The records, in log order: record `i` is at offset `base_offset() + i`.
    pub records: Vec<(Bytes, Option<Bytes>)>,
    /// The partition and the offset the batch ends before (the one to wait for); `None`
    /// when there were no records and nothing was appended.
    pub committable: Option<Committable>,
}

impl<T> Written<T> {
    /// The offset the batch ends before (one past its last record), if one was appended.
    #[must_use]
    pub fn end_offset(&self) -> Option<i64> {
        self.committable.as_ref().map(|(_, end)| *end)
    }

    /// The offset of the first record, if a batch was appended: a coordinator's batch is
    /// one batch, so its records take consecutive offsets up to `end_offset()`.
    #[must_use]
    pub fn base_offset(&self) -> Option<i64> {
        let count = record_count(&self.records);
        self.end_offset().map(|end| end - count)
    }
}

impl<S: CoordinatorShard> CoordinatorRuntime<S> {
    /// The write path of every coordinator: encodes `result`'s records as one batch stamped
    /// with the current time (as `producer`'s transactional batch when set, as a
    /// TxnOffsetCommit is written), appends it to partition `index` through
    /// [`CoordinatorRuntime::append`], and hands the response back with the records and
    /// what to wait for. No records: nothing is appended and `committable` is `None`.
    ///
    /// A failure is logged here, inside `span`, which names what the write was for (the
    /// group, the transactional id), so every coordinator's failed writes read alike.
    ///
    /// # Errors
    /// `Encode` when the batch cannot be encoded (our own bug); the append's [`WriteError`].
    pub fn write<T>(
        &self,
        index: i32,
        producer: Option<(i64, i16)>,
        result: CoordinatorResult<T>,
        span: &tracing::Span,
    ) -> Result<Written<T>, WriteError> {
        let CoordinatorResult { records, response } = result;
        if records.is_empty() {
            return Ok(Written {
                response,
                records,
                committable: None,
            });
        }
        let batch = encode_batch_as(&records, now_ms(), producer).map_err(|e| {
            span.in_scope(|| tracing::error!(error = %e, "cannot encode a {} batch", self.topic));
            WriteError::Encode(e)
        })?;
        let committable = self.append(index, &batch).map_err(|e| {
            span.in_scope(|| match e {
                // A coordinator's batch is never a retry: the log matching it to an earlier
                // one means the log is not what the coordinator believes.
                WriteError::Duplicate(_) => {
                    tracing::error!(error = %e, "{} append seen as a duplicate", self.topic);
                }
                _ => tracing::warn!(error = %e, "{} append failed", self.topic),
            });
            e
        })?;
        let (_, end_offset) = &committable;
        let count = record_count(&records);
        debug_assert!(
            count <= *end_offset,
            "a batch of {count} records ends before offset {end_offset}"
        );
        Ok(Written {
            response,
            records,
            committable: Some(committable),
        })
    }
}

fn record_count(records: &[(Bytes, Option<Bytes>)]) -> i64 {
    i64::try_from(records.len()).expect("a record count fits in an i64")
}
