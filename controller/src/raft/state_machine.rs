//! The [`StateMachine`] a controller brings (next session: the QuorumController with the
//! metadata image), and openraft's `RaftStateMachine` over it, which owns what openraft
//! needs besides: the last applied log id, the membership, and the snapshot files.
//!
//! Only committed entries reach [`StateMachine::apply`], once each, in log order (blank
//! leader entries and membership entries are kept here, so indexes may skip). On start
//! the newest snapshot is installed, and openraft then re-applies the committed entries
//! after it from the log.

use std::future::Future;
use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, StorageError, StorageIOError,
    StoredMembership,
};

use super::snapshot_file::{self, Meta};
use super::types::{ControllerNode, Payload, TypeConfig};

type NodeId = u64;

/// A failure of the state machine; openraft stops the node on it (applying committed
/// entries must be deterministic, so a failure here is a bug or a damaged snapshot).
#[derive(Debug, thiserror::Error)]
#[error("state machine: {0}")]
pub struct StateMachineError(pub String);

/// What the replicated log is applied to.
pub trait StateMachine: Send + Sync + 'static {
    /// Applies the committed entry at `index`. May wait (a bounded publish queue), which
    /// holds back later entries, never drops them.
    fn apply(
        &mut self,
        index: u64,
        payload: &Payload,
    ) -> impl Future<Output = Result<(), StateMachineError>> + Send;

    /// Serializes the whole state as of the last applied entry. Called between applies,
    /// so the bytes are consistent; written to disk off the apply path.
    ///
    /// # Errors
    /// The state cannot be serialized.
    fn snapshot(&self) -> Result<Vec<u8>, StateMachineError>;

    /// Replaces the whole state with a snapshot covering entries up to `last_index`.
    ///
    /// # Errors
    /// The snapshot does not decode.
    fn install_snapshot(
        &mut self,
        last_index: Option<u64>,
        snapshot: &[u8],
    ) -> Result<(), StateMachineError>;
}

/// openraft's state machine over a [`StateMachine`], with its snapshots in `dir`.
pub struct StateMachineStore<S> {
    state: S,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, ControllerNode>,
    dir: PathBuf,
    /// Serializes snapshot file writes, reads and deletions (builders run in their own task).
    files: Arc<Mutex<()>>,
}

impl<S: StateMachine> StateMachineStore<S> {
    /// Wraps `state`, first installing the newest snapshot in `dir` if there is one.
    ///
    /// # Errors
    /// The newest snapshot is unreadable or the state refuses it.
    pub async fn open(dir: &Path, mut state: S) -> io::Result<Self> {
        let files = Arc::new(Mutex::new(()));
        let latest = read_latest(dir.to_path_buf(), Arc::clone(&files)).await?;
        let (last_applied, membership) = match latest {
            Some((meta, data)) => {
                let last = meta.last_log_id;
                state
                    .install_snapshot(last.map(|id| id.index), &data)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                (last, meta.last_membership)
            }
            None => (None, StoredMembership::default()),
        };
        Ok(Self {
            state,
            last_applied,
            membership,
            dir: dir.to_path_buf(),
            files,
        })
    }

    /// The wrapped state machine (tests and the controller read it).
    pub fn state(&self) -> &S {
        &self.state
    }
}

async fn read_latest(dir: PathBuf, files: Arc<Mutex<()>>) -> io::Result<Option<(Meta, Vec<u8>)>> {
    tokio::task::spawn_blocking(move || {
        let _guard = files
            .lock()
            .map_err(|_| io::Error::other("snapshot lock poisoned"))?;
        snapshot_file::read_latest(&dir)
    })
    .await
    .map_err(io::Error::other)?
}

async fn write_snapshot(
    dir: PathBuf,
    files: Arc<Mutex<()>>,
    meta: Meta,
    data: Vec<u8>,
) -> io::Result<Vec<u8>> {
    tokio::task::spawn_blocking(move || {
        let _guard = files
            .lock()
            .map_err(|_| io::Error::other("snapshot lock poisoned"))?;
        snapshot_file::write(&dir, &meta, &data)?;
        Ok(data)
    })
    .await
    .map_err(io::Error::other)?
}

/// Builds one snapshot from state captured between applies.
pub struct SnapshotBuilder {
    data: Result<Vec<u8>, String>,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, ControllerNode>,
    dir: PathBuf,
    files: Arc<Mutex<()>>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let data = self
            .data
            .clone()
            .map_err(|e| StorageIOError::read_state_machine(&StateMachineError(e)))?;
        let snapshot_id = self.last_applied.map_or_else(
            || "none".to_string(),
            |id| format!("{}-{}", id.leader_id.term, id.index),
        );
        let meta = Meta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id,
        };
        let data = write_snapshot(
            self.dir.clone(),
            Arc::clone(&self.files),
            meta.clone(),
            data,
        )
        .await
        .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        tracing::info!(last_log_id = ?meta.last_log_id, bytes = data.len(), "controller snapshot built");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl<S: StateMachine> RaftStateMachine<TypeConfig> for StateMachineStore<S> {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<
        (
            Option<LogId<NodeId>>,
            StoredMembership<NodeId, ControllerNode>,
        ),
        StorageError<NodeId>,
    > {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = openraft::Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut responses = Vec::new();
        for entry in entries {
            match &entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(payload) => self
                    .state
                    .apply(entry.log_id.index, payload)
                    .await
                    .map_err(|e| StorageIOError::apply(entry.log_id, &e))?,
                EntryPayload::Membership(membership) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), membership.clone());
                }
            }
            self.last_applied = Some(entry.log_id);
            responses.push(());
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            data: self.state.snapshot().map_err(|e| e.0),
            last_applied: self.last_applied,
            membership: self.membership.clone(),
            dir: self.dir.clone(),
            files: Arc::clone(&self.files),
        }
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = write_snapshot(
            self.dir.clone(),
            Arc::clone(&self.files),
            meta.clone(),
            snapshot.into_inner(),
        )
        .await
        .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        self.state
            .install_snapshot(meta.last_log_id.map(|id| id.index), &data)
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        self.last_applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        tracing::info!(last_log_id = ?meta.last_log_id, bytes = data.len(), "controller snapshot installed");
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let latest = read_latest(self.dir.clone(), Arc::clone(&self.files))
            .await
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        Ok(latest.map(|(meta, data)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        }))
    }
}
