//! logbook-storage: the on-disk partition log of Logbook.
//!
//! A partition is a directory of segments (`.log` + `.index` + `.timeindex`, named by
//! their 20-digit base offset, exactly Kafka's layout) plus a few small checkpoint files.
//! Record batches are stored byte-for-byte as they arrive on the wire (RecordBatch v2);
//! the log sees them only through [`RecordBatchHeader`]; only the produce door
//! ([`log_validator`]) walks records. The crate never
//! imports kafka-protocol and never returns Kafka error codes: the broker maps [`Error`]
//! to error codes at its one boundary.
//!
//! Entry point: [`Log`]. It is `Send + Sync` but not internally locked; the caller (a
//! `Partition`) wraps it in a mutex and uses [`SyncHandle`] to fsync outside that lock
//! (group commit).

mod checkpoint; // small durable files, write-temp-fsync-rename
pub mod cleaner; // log compaction: LogCleaner's Cleaner and its OffsetMap
pub mod compression; // gzip/snappy/lz4/zstd decompression of a batch's records
pub mod dir_lock; // DataDirLock: the data directory's .lock file
pub mod end_transaction_marker; // commit/abort control batches (EndTransactionMarker)
pub mod error;
pub mod fault; // fault injection for writes and fsyncs (tests and the `fault-injection` feature only)
mod index_file; // per-use descriptors for .index/.timeindex
pub mod leader_epoch_cache; // LeaderEpochFileCache (leader-epoch-checkpoint)
pub mod log; // Log
mod log_segment; // LogSegment
pub mod log_validator; // LogValidator: the produce door, walks every record
mod offset; // Offset, the newtype at the storage/replication boundary
mod offset_index; // OffsetIndex
pub mod producer_state; // ProducerStateManager and its snapshots
pub mod record; // the records of a batch, walked as byte slices
pub mod record_batch; // header view + validation + in-place rewrites
mod time_index; // TimeIndex
pub mod transaction_index; // TransactionIndex (.txnindex): aborted transactions per segment

#[cfg(test)]
mod test_util;

pub use end_transaction_marker::{EndTransactionMarker, TxnResult};
pub use error::Error;
pub use leader_epoch_cache::{EpochEntry, LeaderEpoch, LeaderEpochFileCache};
pub use log::{
    AppendInfo, AppendOutcome, CompactionConfig, FileSlice, Log, LogConfig, ReadResult,
    SegmentDeletion, SliceRead, SyncHandle, Synced, WritebackHandle,
};
pub use log_validator::{ValidatedBatch, ValidatedBatches, ValidationError};
pub use offset::Offset;
pub use producer_state::{ActiveProducer, BatchMetadata, ProducerSnapshot};
pub use record_batch::{BatchError, RecordBatchHeader};
pub use transaction_index::AbortedTxn;
