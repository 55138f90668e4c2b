//! Group commit: a dedicated thread pool that fsyncs partitions with pending appends.
//!
//! An append only marks its partition dirty and returns; a flusher thread takes every dirty
//! partition, fsyncs it outside any lock and publishes the new durable offset. While one
//! fsync runs, further appends pile up and are all covered by the next one, so the number of
//! fsyncs per second is bounded by the disk, not by the request rate. Async tasks never block
//! on the disk. The queue holds each partition at most once, so it is bounded by the
//! partition count.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use parking_lot::{Condvar, Mutex};

/// When appended data is made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushPolicy {
    /// fsync after every write group; the high watermark follows the durable log end. The
    /// default: acks=all means on disk.
    EveryWrite,
    /// Leave flushing to the OS; the high watermark follows the log end at once. Faster,
    /// and a power loss may lose acknowledged writes (Kafka's default behaviour).
    Os,
}

/// What the flusher makes durable: a partition with appends not yet fsync'd. A trait, so
/// that the flusher does not name `Partition`, which owns a `Flusher` (the two files would
/// import each other).
pub(crate) trait Flush: Send + Sync {
    /// Starts writing appended data to the disk without waiting, ahead of [`Flush::flush`]
    /// (see `logbook_storage::WritebackHandle`); runs on a flusher thread.
    fn start_writeback(&self);
    /// Makes everything appended so far durable; runs on a flusher thread.
    fn flush(&self);
}

struct Queue {
    dirty: VecDeque<Queued>,
    shutdown: bool,
}

/// A partition waiting for a flusher thread.
struct Queued {
    partition: Weak<dyn Flush>,
    /// A thread has started its write-out ([`Flush::start_writeback`]) already.
    writeback_started: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    policy: FlushPolicy,
    /// The first log failure (a failed write or fsync) of any log this flusher serves
    /// (Kafka's `LogDirFailureChannel`: one data directory, so one failure fails it).
    log_dir_failure: tokio::sync::watch::Sender<Option<String>>,
}

/// Handle to the flusher threads; cheap to clone.
#[derive(Clone)]
pub struct Flusher {
    shared: Arc<Shared>,
}

impl Flusher {
    /// Starts `threads` flusher threads (at least one).
    ///
    /// # Panics
    /// If the OS refuses to start a thread at startup.
    #[must_use]
    pub fn start(policy: FlushPolicy, threads: usize) -> Self {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                dirty: VecDeque::new(),
                shutdown: false,
            }),
            wake: Condvar::new(),
            policy,
            log_dir_failure: tokio::sync::watch::Sender::new(None),
        });
        for i in 0..threads.max(1) {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("logbook-flush-{i}"))
                .spawn(move || run(&shared))
                .expect("starting a flusher thread at startup");
        }
        Flusher { shared }
    }

    /// Reports that a log under the data directory failed for good (`reason`): the first
    /// report is kept and published to [`Self::log_dir_failures`].
    pub(crate) fn report_log_dir_failure(&self, reason: String) {
        self.shared.log_dir_failure.send_if_modified(|failed| {
            let first = failed.is_none();
            if first {
                *failed = Some(reason);
            }
            first
        });
    }

    /// The data directory's failure, `None` while it is healthy: the broker watches it to
    /// leave the cluster when its log directory fails, as Kafka's `LogDirFailureHandler`
    /// halts a broker whose only log directory failed.
    #[must_use]
    pub fn log_dir_failures(&self) -> tokio::sync::watch::Receiver<Option<String>> {
        self.shared.log_dir_failure.subscribe()
    }

    /// The policy in force.
    #[must_use]
    pub fn policy(&self) -> FlushPolicy {
        self.shared.policy
    }

    /// Queues `dirty` for a flusher thread; the caller queues each partition at most once
    /// until its flush starts. A Weak, so a deleted partition's queued flush does not keep
    /// it alive.
    pub(crate) fn enqueue(&self, dirty: Weak<dyn Flush>) {
        let mut queue = self.shared.queue.lock();
        queue.dirty.push_back(Queued {
            partition: dirty,
            writeback_started: false,
        });
        drop(queue);
        self.shared.wake.notify_one();
    }

    /// Stops the threads after the queue drains.
    pub fn shutdown(&self) {
        self.shared.queue.lock().shutdown = true;
        self.shared.wake.notify_all();
    }
}

/// A flusher thread: takes the next queued partition and syncs it. Under `EveryWrite` it
/// first starts the write-out of every partition queued so far whose write-out has not
/// started, so their data is in flight together while the threads sync them one at a
/// time each.
fn run(shared: &Shared) {
    loop {
        let (next, head_start) = {
            let mut queue = shared.queue.lock();
            loop {
                if let Some(mut next) = queue.dirty.pop_front() {
                    let mut head_start = Vec::new();
                    if shared.policy == FlushPolicy::EveryWrite && !queue.dirty.is_empty() {
                        for queued in std::iter::once(&mut next).chain(queue.dirty.iter_mut()) {
                            if !queued.writeback_started {
                                queued.writeback_started = true;
                                head_start.push(Weak::clone(&queued.partition));
                            }
                        }
                    }
                    break (next.partition, head_start);
                }
                if queue.shutdown {
                    return;
                }
                shared.wake.wait(&mut queue);
            }
        };
        for partition in head_start.iter().filter_map(Weak::upgrade) {
            partition.start_writeback();
        }
        if let Some(partition) = next.upgrade() {
            partition.flush();
        }
    }
}
