//! openraft's `RaftLogStorage` over [`LogFile`]: entries, the vote and the purge point,
//! each durable before openraft hears it is, and the committed log id as a hint.
//!
//! Every disk operation runs on a blocking thread (`spawn_blocking`), and an append calls
//! `LogFlushed::log_io_completed` only after its fsync: openraft counts this node toward a
//! quorum from that callback, so acknowledging earlier would let a commit rest on entries
//! a power loss can take away. The vote goes to `quorum-state` (KRaft's name) by
//! write-temp-fsync-rename; a vote that does not read back is an error, not a blank vote.
//! The committed log id is a hint, saved without fsync (see `save_committed`).
//! Cloning is cheap and shares the log (openraft's log reader is a clone).

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{Entry, LogId, OptionalSend, RaftLogReader, StorageError, StorageIOError, Vote};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::durable_file;
use super::log_file::LogFile;
use super::types::TypeConfig;

/// File holding the vote (term, voted-for, committed flag).
pub(crate) const VOTE_FILE: &str = "quorum-state";
/// File holding the last committed log id this node learned.
pub(crate) const COMMITTED_FILE: &str = "committed-log-id";
/// File holding the last purged log id: the log's start, moved by snapshots.
pub(crate) const PURGED_FILE: &str = "purged-log-id";

type NodeId = u64;

/// The controller log and its small state files, in one directory.
#[derive(Clone, Debug)]
pub struct LogStore {
    node_id: NodeId,
    /// Whether this node's own committed vote reads back uncommitted (see
    /// `resign_on_restart`); off for a quorum of one, which has no follower to diverge from.
    resign_on_restart: bool,
    dir: PathBuf,
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    log: LogFile,
    last_purged: Option<LogId<NodeId>>,
    /// Id of the last present entry, else `last_purged`.
    last_log_id: Option<LogId<NodeId>>,
}

impl LogStore {
    /// Opens node `node_id`'s log in `dir` (recovering a torn tail), rolling segments at
    /// `segment_bytes` and refusing entries over `entry_bytes_max`. `resign_on_restart`:
    /// whether a leader's own vote reads back uncommitted (true unless the quorum is this
    /// node alone).
    ///
    /// # Errors
    /// The directory cannot be read or created, or a state file is damaged.
    pub fn open(
        dir: &Path,
        node_id: NodeId,
        resign_on_restart: bool,
        segment_bytes: u64,
        entry_bytes_max: u32,
    ) -> io::Result<Self> {
        let mut log = LogFile::open(dir, segment_bytes, entry_bytes_max)?;
        let last_purged: Option<LogId<NodeId>> = read_json(dir, PURGED_FILE)?;
        if let Some(purged) = last_purged {
            log.purge(purged.index)?;
        }
        let last_log_id = match log.last_index() {
            Some(last) => Some(entry_at(&log, last)?.log_id),
            None => last_purged,
        };
        Ok(Self {
            node_id,
            resign_on_restart,
            dir: dir.to_path_buf(),
            inner: Arc::new(Mutex::new(Inner {
                log,
                last_purged,
                last_log_id,
            })),
        })
    }

    /// Runs `f` on the locked log on a blocking thread.
    async fn blocking<T, F>(&self, f: F) -> io::Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Path, &mut Inner) -> io::Result<T> + Send + 'static,
    {
        let dir = self.dir.clone();
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || f(&dir, &mut *lock(&inner)?))
            .await
            .map_err(io::Error::other)?
    }
}

fn lock(inner: &Mutex<Inner>) -> io::Result<MutexGuard<'_, Inner>> {
    inner
        .lock()
        .map_err(|_| io::Error::other("controller log lock poisoned by a panic"))
}

/// Decodes the entry at `index`.
fn entry_at(log: &LogFile, index: u64) -> io::Result<Entry<TypeConfig>> {
    let (_, body) = log
        .read(index, index + 1)?
        .pop()
        .ok_or_else(|| io::Error::other(format!("controller log entry {index} is missing")))?;
    serde_json::from_slice(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

fn read_json<T: DeserializeOwned>(dir: &Path, name: &str) -> io::Result<Option<T>> {
    match durable_file::read(dir, name)? {
        Some(body) => serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        None => Ok(None),
    }
}

fn write_json<T: Serialize>(dir: &Path, name: &str, value: &T) -> io::Result<()> {
    let body = serde_json::to_vec(value).map_err(io::Error::other)?;
    durable_file::write(dir, name, &body)
}

/// A restarted leader does not resume its term: its own committed vote reads back as a
/// plain vote, so it must win an election in a new term first (KRaft's restarted leader
/// also starts a new epoch).
///
/// Why: openraft 0.9 restores a node whose saved vote is its own committed one as leader
/// at once, in the same term. If its log then ends below entries a quorum holds (a torn
/// tail after a power loss: `append` here fsyncs before openraft replicates, but a disk
/// may still drop what it acknowledged), it would write different entries under the same
/// log ids (term, index), which followers take as ones they already have: diverged state
/// machines. The cost is one election per leader restart.
/// A plain vote still stops this node voting for anyone else in that term. A quorum of one
/// keeps its leadership: nobody else holds its lost tail.
fn resign_on_restart(vote: Vote<NodeId>, node_id: NodeId) -> Vote<NodeId> {
    if vote.committed && vote.leader_id.node_id == node_id {
        tracing::info!(
            term = vote.leader_id.term,
            "led the controller quorum before the restart; standing for election in a new term"
        );
        Vote::new(vote.leader_id.term, node_id)
    } else {
        vote
    }
}

/// The committed log id to re-apply up to on start: never past the log's end. A torn
/// tail (or a disk that lost what it acknowledged) can end the log below the committed id
/// saved earlier; the entries up to the end are still committed ones (openraft only marks
/// entries that match the leader's), and the leader sends the rest again. Without this,
/// openraft stops at start reading entries that are gone.
fn clamp_committed(
    committed: Option<LogId<NodeId>>,
    last: Option<LogId<NodeId>>,
) -> Option<LogId<NodeId>> {
    match (committed, last) {
        (Some(c), Some(l)) if l.index < c.index => {
            tracing::warn!(committed = %c, log_end = %l, "controller log ends below its committed id; re-applying to its end");
            Some(l)
        }
        (Some(c), None) => {
            tracing::warn!(committed = %c, "controller log is empty below its committed id");
            None
        }
        (committed, _) => committed,
    }
}

fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(s) => *s,
        Bound::Excluded(s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(e) => e.saturating_add(1),
        Bound::Excluded(e) => *e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let (start, end) = bounds(&range);
        self.blocking(move |_, inner| {
            inner
                .log
                .read(start, end)?
                .into_iter()
                .map(|(_, body)| {
                    serde_json::from_slice(&body)
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
                })
                .collect()
        })
        .await
        .map_err(|e| StorageIOError::read_logs(&e).into())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let inner = lock(&self.inner).map_err(|e| StorageIOError::read_logs(&e))?;
        Ok(LogState {
            last_purged_log_id: inner.last_purged,
            last_log_id: inner.last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let vote = *vote;
        self.blocking(move |dir, _| write_json(dir, VOTE_FILE, &vote))
            .await
            .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        let (node_id, resign) = (self.node_id, self.resign_on_restart);
        self.blocking(move |dir, _| {
            let vote: Option<Vote<NodeId>> = read_json(dir, VOTE_FILE)?;
            Ok(vote.map(|vote| {
                if resign {
                    resign_on_restart(vote, node_id)
                } else {
                    vote
                }
            }))
        })
        .await
        .map_err(|e| StorageIOError::read_vote(&e).into())
    }

    /// Saved without fsync: Raft needs no durable commit index (it is learned again from
    /// the leader); the file only lets a restarted node re-apply its log before it hears
    /// from one, and an fsync here would sit on every write's path.
    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        self.blocking(move |dir, _| {
            let body = serde_json::to_vec(&committed).map_err(io::Error::other)?;
            durable_file::write_unsynced(dir, COMMITTED_FILE, &body)
        })
        .await
        .map_err(|e| StorageIOError::write(&e).into())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        self.blocking(|dir, inner| {
            let committed = match read_json::<Option<LogId<NodeId>>>(dir, COMMITTED_FILE) {
                Ok(committed) => committed.flatten(),
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    tracing::warn!(error = %e, "ignoring a damaged committed-log-id (written without fsync)");
                    None
                }
                Err(e) => return Err(e),
            };
            Ok(clamp_committed(committed, inner.last_log_id))
        })
        .await
        .map_err(|e| StorageIOError::read(&e).into())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut last = None;
        let mut frames = Vec::new();
        for entry in entries {
            let body = serde_json::to_vec(&entry)
                .map_err(|e| StorageIOError::write_log_entry(entry.log_id, &e))?;
            frames.push((entry.log_id.index, body));
            last = Some(entry.log_id);
        }
        let result = self
            .blocking(move |_, inner| {
                inner.log.append(&frames)?;
                if last.is_some() {
                    inner.last_log_id = last;
                }
                Ok(())
            })
            .await;
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let err = StorageIOError::write_logs(&e).into();
                callback.log_io_completed(Err(e));
                Err(err)
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.blocking(move |_, inner| {
            inner.log.truncate(log_id.index)?;
            inner.last_log_id = match inner.log.last_index() {
                Some(last) => Some(entry_at(&inner.log, last)?.log_id),
                None => inner.last_purged,
            };
            Ok(())
        })
        .await
        .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        self.blocking(move |dir, inner| {
            // The purge point is durable before any segment goes: a crash in between
            // leaves entries that are hidden on reopen, never a log that starts too late.
            write_json(dir, PURGED_FILE, &Some(log_id))?;
            inner.last_purged = Some(log_id);
            inner.log.purge(log_id.index)?;
            if inner
                .last_log_id
                .is_none_or(|last| last.index < log_id.index)
            {
                inner.last_log_id = Some(log_id);
            }
            Ok(())
        })
        .await
        .map_err(|e| StorageIOError::write_logs(&e).into())
    }
}
