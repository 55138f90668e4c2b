//! `Partition`: one topic-partition hosted by this broker, owning its `Log`, high watermark
//! and the waiters on it.
//!
//! Thread-safety: the log sits behind a mutex taken only for short, bounded work (an append of
//! one request's batches, one read of at most a fetch's byte budget); it is never held across
//! an `.await`. Offsets visible to others are published through a `watch` channel, which wakes
//! both acks=all producers and long-polling fetches without any polling.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use logbook_storage::{AppendInfo, Log, LogConfig, ReadResult, SliceRead};
use parking_lot::Mutex;
use tokio::sync::watch;

use crate::flusher::{FlushPolicy, Flusher};
use crate::producer_state::{CachedBatch, ProducerStateManager, SequenceCheck};
use crate::Error;

/// What an append did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOutcome {
    /// The batches were written at these offsets.
    Appended(AppendInfo),
    /// The single batch was a retry of one already written; nothing was written.
    Duplicate(CachedBatch),
}

/// The log and the state that must change atomically with it.
struct LogState {
    log: Log,
    producers: ProducerStateManager,
}

/// A topic name and partition index, as Kafka names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    /// Topic name.
    pub topic: String,
    /// Partition index within the topic.
    pub partition: i32,
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// The offsets a fetch or ListOffsets answer reports, read together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartitionOffsets {
    /// First offset still in the log.
    pub log_start_offset: i64,
    /// One past the last offset visible to consumers (durable on a single node).
    pub high_watermark: i64,
    /// One past the last offset appended (possibly not yet durable).
    pub log_end_offset: i64,
}

/// One hosted partition. See the module docs for the locking rules.
pub struct Partition {
    topic_partition: TopicPartition,
    log: Mutex<Option<LogState>>,
    /// The high watermark; receivers wake on every advance.
    high_watermark: watch::Sender<i64>,
    /// Set when the partition has appends the flusher has not yet picked up.
    flush_queued: AtomicBool,
    flusher: Flusher,
    leader_epoch: i32,
    /// Lets the partition hand the flusher a reference to itself.
    self_weak: Weak<Partition>,
}

impl Partition {
    /// Opens (recovering if needed) the log of `topic_partition` in `dir`.
    ///
    /// # Errors
    /// Storage errors from opening or recovering the log.
    pub fn open(
        topic_partition: TopicPartition,
        dir: &std::path::Path,
        config: LogConfig,
        flusher: Flusher,
    ) -> Result<Arc<Self>, Error> {
        let log = Log::open(dir, config)?;
        // Everything recovery kept is on disk already, so it is all visible.
        let (high_watermark, _) = watch::channel(log.log_end_offset());
        Ok(Arc::new_cyclic(|self_weak| Partition {
            topic_partition,
            log: Mutex::new(Some(LogState {
                log,
                producers: ProducerStateManager::default(),
            })),
            high_watermark,
            flush_queued: AtomicBool::new(false),
            flusher,
            leader_epoch: 0,
            self_weak: self_weak.clone(),
        }))
    }

    /// The partition's name.
    #[must_use]
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.topic_partition
    }

    /// The current leader epoch (constant on a single node until leadership exists).
    #[must_use]
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch
    }

    fn with_log<T>(
        &self,
        f: impl FnOnce(&mut Log) -> Result<T, logbook_storage::Error>,
    ) -> Result<T, Error> {
        let mut guard = self.log.lock();
        let state = guard
            .as_mut()
            .ok_or_else(|| Error::Closed(self.topic_partition.clone()))?;
        Ok(f(&mut state.log)?)
    }

    /// Appends validated batches, assigning offsets in place, and schedules the fsync that
    /// will make them visible. Returns at once: use [`Partition::wait_durable`] for acks=all.
    ///
    /// # Errors
    /// Storage errors; the partition being closed.
    pub fn append(&self, batches: &[u8]) -> Result<AppendOutcome, Error> {
        let info = {
            let mut guard = self.log.lock();
            let state = guard
                .as_mut()
                .ok_or_else(|| Error::Closed(self.topic_partition.clone()))?;
            let headers: Vec<_> = logbook_storage::record_batch::iter_headers(batches)
                .map(|(_, h)| h)
                .collect();
            for header in &headers {
                match state.producers.check(header) {
                    SequenceCheck::Append => {}
                    SequenceCheck::Duplicate(cached) if headers.len() == 1 => {
                        return Ok(AppendOutcome::Duplicate(cached));
                    }
                    SequenceCheck::Duplicate(cached) => {
                        return Err(Error::OutOfOrderSequence {
                            producer_id: header.producer_id,
                            expected: cached.last_sequence.wrapping_add(1),
                            got: header.base_sequence,
                        });
                    }
                    SequenceCheck::OutOfOrder { expected, got } => {
                        return Err(Error::OutOfOrderSequence {
                            producer_id: header.producer_id,
                            expected,
                            got,
                        });
                    }
                    SequenceCheck::StaleEpoch { current, got } => {
                        return Err(Error::InvalidProducerEpoch {
                            producer_id: header.producer_id,
                            current,
                            got,
                        });
                    }
                }
            }
            let info = state.log.append(batches, self.leader_epoch)?;
            // `batches` keeps the client's offsets; producer state wants the assigned ones.
            let mut base = info.first_offset;
            for mut header in headers {
                header.base_offset = base;
                header.partition_leader_epoch = self.leader_epoch;
                base = header.last_offset() + 1;
                state.producers.update(&header);
            }
            info
        };
        match self.flusher.policy() {
            FlushPolicy::EveryWrite => self.schedule_flush(),
            FlushPolicy::Os => self.advance_high_watermark(info.log_end_offset),
        }
        Ok(AppendOutcome::Appended(info))
    }

    pub(crate) fn self_weak(&self) -> Weak<Partition> {
        self.self_weak.clone()
    }

    fn schedule_flush(&self) {
        if !self.flush_queued.swap(true, Ordering::AcqRel) {
            self.flusher.enqueue(self);
        }
    }

    /// Called by the flusher: makes everything appended so far durable, then publishes the
    /// new high watermark. The log lock is held only to capture file handles and to record
    /// the result, never during the fsync itself.
    pub(crate) fn flush(&self) {
        // Clear first: an append that races with this flush queues another one.
        self.flush_queued.store(false, Ordering::Release);
        let handle = {
            let mut guard = self.log.lock();
            let Some(state) = guard.as_mut() else { return };
            state.log.sync_handle()
        };
        match handle.sync() {
            Ok(durable) => {
                if let Some(state) = self.log.lock().as_mut() {
                    state.log.mark_durable(durable);
                }
                self.advance_high_watermark(durable);
            }
            Err(e) => {
                // An fsync failure means the page cache may not match the disk: Kafka halts
                // the log dir. We keep the high watermark where it is so nothing undurable is
                // exposed, and retry on the next append.
                tracing::error!(partition = %self.topic_partition, error = %e, "fsync failed; high watermark not advanced");
            }
        }
    }

    fn advance_high_watermark(&self, offset: i64) {
        self.high_watermark.send_if_modified(|hw| {
            if offset > *hw {
                *hw = offset;
                true
            } else {
                false
            }
        });
    }

    /// The high watermark: one past the last record consumers may read.
    #[must_use]
    pub fn high_watermark(&self) -> i64 {
        *self.high_watermark.borrow()
    }

    /// Log start, high watermark and log end, consistent with each other.
    ///
    /// # Errors
    /// The partition being closed.
    pub fn offsets(&self) -> Result<PartitionOffsets, Error> {
        let (log_start_offset, log_end_offset) =
            self.with_log(|log| Ok((log.log_start_offset(), log.log_end_offset())))?;
        let high_watermark = self.high_watermark().min(log_end_offset);
        assert!(
            log_start_offset <= log_end_offset,
            "log start {log_start_offset} > log end {log_end_offset}"
        );
        Ok(PartitionOffsets {
            log_start_offset,
            high_watermark: high_watermark.max(log_start_offset),
            log_end_offset,
        })
    }

    /// A receiver that wakes whenever the high watermark advances; subscribe *before* reading
    /// so no advance between the read and the wait is missed.
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.high_watermark.subscribe()
    }

    /// Waits until everything below `offset` is durable (the high watermark reached it).
    ///
    /// # Errors
    /// `Timeout` after `timeout`; `Closed` if the partition is deleted meanwhile.
    pub async fn wait_durable(&self, offset: i64, timeout: Duration) -> Result<(), Error> {
        let mut rx = self.high_watermark.subscribe();
        let wait = async move { rx.wait_for(|hw| *hw >= offset).await.map(|_| ()) };
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(Error::Closed(self.topic_partition.clone())),
            Err(_) => Err(Error::Timeout {
                topic_partition: self.topic_partition.clone(),
                offset,
            }),
        }
    }

    /// Reads whole batches from `offset`, never past the high watermark.
    ///
    /// # Errors
    /// `OffsetOutOfRange` from storage; I/O errors; the partition being closed.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<ReadResult, Error> {
        let high_watermark = self.high_watermark();
        self.with_log(|log| log.read(offset, max_bytes, high_watermark, min_one_batch))
    }

    /// Selects whole batches from `offset`, never past the high watermark, as file ranges
    /// to send without reading them (see `Log::read_slices`).
    ///
    /// # Errors
    /// `OffsetOutOfRange` from storage; I/O errors; the partition being closed.
    pub fn read_slices(
        &self,
        offset: i64,
        max_bytes: usize,
        min_one_batch: bool,
    ) -> Result<SliceRead, Error> {
        let high_watermark = self.high_watermark();
        self.with_log(|log| log.read_slices(offset, max_bytes, high_watermark, min_one_batch))
    }

    /// Runs `f` with the log locked, for rare operations (ListOffsets by timestamp, config
    /// changes). Keep `f` short: it blocks appends.
    ///
    /// # Errors
    /// Whatever `f` returns; the partition being closed.
    pub fn with_log_locked<T>(
        &self,
        f: impl FnOnce(&mut Log) -> Result<T, logbook_storage::Error>,
    ) -> Result<T, Error> {
        self.with_log(f)
    }

    /// Applies a new log configuration (topic config change).
    ///
    /// # Errors
    /// The partition being closed.
    pub fn set_config(&self, config: LogConfig) -> Result<(), Error> {
        self.with_log(|log| {
            log.set_config(config);
            Ok(())
        })
    }

    /// Flushes and closes the log, writing the clean-shutdown checkpoint.
    ///
    /// # Errors
    /// Storage errors while flushing.
    pub fn close(&self) -> Result<(), Error> {
        let state = self.log.lock().take();
        if let Some(state) = state {
            state.log.close()?;
        }
        Ok(())
    }

    /// Closes the log and removes its files (DeleteTopics).
    ///
    /// # Errors
    /// Storage errors while removing files.
    pub fn delete(&self) -> Result<(), Error> {
        let state = self.log.lock().take();
        if let Some(state) = state {
            state.log.delete()?;
        }
        Ok(())
    }
}
