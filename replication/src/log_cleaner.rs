//! `LogCleaner`: the threads that compact `cleanup.policy=compact` partitions (Kafka's
//! `LogCleaner` + `LogCleanerManager`).
//!
//! Each thread owns a `Cleaner` (its fixed-size key → offset map: the dedupe buffer is
//! split between threads, as Kafka does) and loops: pick the filthiest compacted
//! partition no other thread is cleaning (highest dirty ratio among those due), run one
//! pass, and when none is due sleep `log.cleaner.backoff.ms`. A pass reads and writes
//! files on its own thread, never on a tokio worker, and takes the partition's log lock
//! only to capture the job and to swap each cleaned segment in; produce and fetch go on
//! meanwhile. Cleaning never passes the high watermark. A partition whose pass fails is
//! left alone until restart (Kafka's "uncleanable partitions"), with one warning.
//!
//! Thread-safety: the shared state is behind a mutex held only to pick or release a
//! partition, never during a pass.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use logbook_storage::cleaner::{self, CleanStats, Cleaner, CleanerConfig, CleaningJob};
use parking_lot::{Condvar, Mutex, RwLock};

use crate::{Partition, TopicPartition};
use logbook_common::now_ms;

/// The hosted partitions, shared with the `ReplicaManager`.
pub(crate) type Partitions = Arc<RwLock<HashMap<String, Vec<Arc<Partition>>>>>;

/// Cleaner settings: Kafka's `log.cleaner.*` broker configs.
#[derive(Clone, Copy, Debug)]
pub struct LogCleanerConfig {
    /// `log.cleaner.enable`.
    pub enable: bool,
    /// `log.cleaner.threads` (at least one when enabled).
    pub threads: usize,
    /// `log.cleaner.backoff.ms`: sleep when no partition is due.
    pub backoff_ms: u64,
    /// `log.cleaner.dedupe.buffer.size`: key → offset map memory, all threads together.
    pub dedupe_buffer_bytes: usize,
    /// `log.cleaner.io.max.bytes.per.second` per thread; `None` = unlimited.
    pub io_max_bytes_per_second: Option<u64>,
}

impl Default for LogCleanerConfig {
    fn default() -> Self {
        Self {
            enable: true,
            threads: 1,
            backoff_ms: 15_000,
            dedupe_buffer_bytes: 128 << 20,
            io_max_bytes_per_second: None,
        }
    }
}

/// What the cleaner remembers of a partition between passes.
#[derive(Clone, Copy, Debug, Default)]
struct Progress {
    /// The cleaner checkpoint (`None`: not read yet).
    cleaned_to: Option<i64>,
    /// When a kept tombstone's delete retention runs out.
    tombstone_due_ms: Option<i64>,
}

#[derive(Default)]
struct State {
    in_progress: HashSet<TopicPartition>,
    uncleanable: HashSet<TopicPartition>,
    progress: HashMap<TopicPartition, Progress>,
    passes: u64,
    shutdown: bool,
}

struct Shared {
    partitions: Partitions,
    config: LogCleanerConfig,
    state: Mutex<State>,
    wake: Condvar,
}

/// Handle to the cleaner threads; see the module docs.
pub struct LogCleaner {
    shared: Arc<Shared>,
}

impl LogCleaner {
    /// Starts `config.threads` cleaner threads over `partitions` (none when disabled).
    ///
    /// # Panics
    /// If the OS refuses to start a thread at startup.
    pub(crate) fn start(partitions: Partitions, config: LogCleanerConfig) -> Self {
        let shared = Arc::new(Shared {
            partitions,
            config,
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        });
        if config.enable {
            let threads = config.threads.max(1);
            for i in 0..threads {
                let shared = Arc::clone(&shared);
                let cleaner_config = CleanerConfig {
                    dedupe_buffer_bytes: config.dedupe_buffer_bytes / threads,
                    io_max_bytes_per_second: config.io_max_bytes_per_second,
                };
                std::thread::Builder::new()
                    .name(format!("logbook-cleaner-{i}"))
                    .spawn(move || run(&shared, cleaner_config))
                    .expect("starting a log cleaner thread at startup");
            }
        }
        Self { shared }
    }

    /// Passes completed since start (for tests and metrics).
    #[must_use]
    pub fn passes(&self) -> u64 {
        self.shared.state.lock().passes
    }

    /// Stops the threads after their current pass.
    pub fn shutdown(&self) {
        self.shared.state.lock().shutdown = true;
        self.shared.wake.notify_all();
    }
}

fn run(shared: &Shared, config: CleanerConfig) {
    // Allocated once per thread: the map is the cleaner's memory bound.
    let mut cleaner = Cleaner::new(config);
    let backoff = Duration::from_millis(shared.config.backoff_ms.max(1));
    loop {
        if shared.state.lock().shutdown {
            return;
        }
        match grab_filthiest(shared) {
            Some((partition, dir, job)) => {
                clean(shared, &mut cleaner, &partition, dir, &job);
                let mut state = shared.state.lock();
                state.in_progress.remove(partition.topic_partition());
                state.passes += 1;
            }
            None => {
                let mut state = shared.state.lock();
                if !state.shutdown {
                    shared.wake.wait_for(&mut state, backoff);
                }
            }
        }
    }
}

/// The compacted partition with the highest dirty ratio among those due, marked in
/// progress, with its directory and job.
fn grab_filthiest(shared: &Shared) -> Option<(Arc<Partition>, PathBuf, CleaningJob)> {
    let all: Vec<Arc<Partition>> = shared
        .partitions
        .read()
        .values()
        .flatten()
        .cloned()
        .collect();
    let now = now_ms();
    let mut best: Option<(Arc<Partition>, PathBuf, CleaningJob)> = None;
    for partition in all {
        let topic_partition = partition.topic_partition().clone();
        let progress = {
            let state = shared.state.lock();
            if state.in_progress.contains(&topic_partition)
                || state.uncleanable.contains(&topic_partition)
            {
                continue;
            }
            state
                .progress
                .get(&topic_partition)
                .copied()
                .unwrap_or_default()
        };
        let Ok(dir) = partition.with_log(|log| Ok(log.dir().to_path_buf())) else {
            continue;
        };
        let Some(cleaned_to) = cleaned_to(shared, topic_partition, progress.cleaned_to, &dir)
        else {
            continue;
        };
        let force = progress.tombstone_due_ms.is_some_and(|due| due <= now);
        let high_watermark = partition.high_watermark();
        let Ok(Some(job)) = partition.with_log(|log| {
            // Settles the transactions the high watermark passed first: on a replica
            // nobody reads from, nothing else would, and the first unstable offset that
            // bounds cleaning would stay at the first transaction forever.
            log.first_unstable_offset(high_watermark);
            Ok(log.cleaning_job(now, high_watermark, cleaned_to, force))
        }) else {
            continue;
        };
        if best
            .as_ref()
            .is_none_or(|(_, _, b)| job.dirty_ratio > b.dirty_ratio)
        {
            best = Some((partition, dir, job));
        }
    }
    let (partition, dir, job) = best?;
    let mut state = shared.state.lock();
    if !state
        .in_progress
        .insert(partition.topic_partition().clone())
    {
        return None;
    }
    Some((partition, dir, job))
}

/// Where a partition's clean section ends (Kafka's cleaner offset checkpoint): `known`
/// from an earlier pass, else read once from the partition's checkpoint file (-1 when it
/// has none) and remembered. `None` when the file cannot be read: the partition is then
/// marked uncleanable rather than cleaned from an offset that may be wrong.
fn cleaned_to(
    shared: &Shared,
    topic_partition: TopicPartition,
    known: Option<i64>,
    dir: &Path,
) -> Option<i64> {
    match known {
        Some(offset) => Some(offset),
        None => match cleaner::read_checkpoint(dir) {
            Ok(offset) => {
                let offset = offset.unwrap_or(-1);
                let mut state = shared.state.lock();
                state
                    .progress
                    .entry(topic_partition)
                    .or_default()
                    .cleaned_to = Some(offset);
                Some(offset)
            }
            Err(e) => {
                tracing::warn!(partition = %topic_partition, error = %e, "cannot read the cleaner checkpoint; not cleaning this partition");
                shared.state.lock().uncleanable.insert(topic_partition);
                None
            }
        },
    }
}

/// One pass over one partition: clean outside the lock, checkpoint, swap each group in.
fn clean(
    shared: &Shared,
    cleaner: &mut Cleaner,
    partition: &Partition,
    dir: PathBuf,
    job: &CleaningJob,
) {
    let topic_partition = partition.topic_partition().clone();
    let started = std::time::Instant::now();
    let result = match cleaner.clean(job, now_ms()) {
        Ok(result) => result,
        Err(e) => {
            tracing::warn!(partition = %topic_partition, error = %e, "log cleaning failed; not cleaning this partition until restart");
            shared.state.lock().uncleanable.insert(topic_partition);
            return;
        }
    };
    if let Err(e) = cleaner::write_checkpoint(&dir, result.cleaned_to) {
        tracing::warn!(partition = %topic_partition, error = %e, "cannot write the cleaner checkpoint; discarding the pass");
        for segment in result.segments {
            segment.discard();
        }
        shared.state.lock().uncleanable.insert(topic_partition);
        return;
    }
    let mut swapped = 0;
    let mut segments = result.segments.into_iter();
    for segment in segments.by_ref() {
        match partition.with_log(|log| log.replace_with_cleaned(segment)) {
            Ok(true) => swapped += 1,
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(partition = %topic_partition, error = %e, "swapping a cleaned segment failed");
                break;
            }
        }
    }
    for rest in segments {
        rest.discard();
    }
    let CleanStats {
        bytes_read,
        bytes_written,
        records_read,
        records_retained,
        segments_before,
        ..
    } = result.stats;
    tracing::info!(partition = %topic_partition, cleaned_to = result.cleaned_to, bytes_read, bytes_written, records_read, records_retained, segments_before, segments_after = swapped, elapsed_ms = started.elapsed().as_millis(), "cleaned log");
    let mut state = shared.state.lock();
    let progress = state.progress.entry(topic_partition).or_default();
    progress.cleaned_to = Some(result.cleaned_to);
    progress.tombstone_due_ms = result.stats.tombstone_due_ms;
}
