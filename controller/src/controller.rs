//! `RaftController`: one node of the controller quorum, started from its config and a
//! state machine, with a `write` that returns the committed index and a leader watch.
//!
//! Start order: open the log (recovering a torn tail), install the newest snapshot into
//! the state machine, start openraft, serve the controller listener, then `initialize`
//! with the full voter set. Every voter does the last step with the same set, which
//! openraft allows (the first membership entry is the same on each); a node that is
//! already initialized answers `NotAllowed`, which is expected on every restart.

use std::net::SocketAddr;
use std::sync::Arc;

use openraft::error::{ClientWriteError, InitializeError, RaftError};
use openraft::{Raft, RaftMetrics};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::ControllerConfig;
use crate::error::Error;
use crate::net::peer::{NetworkFactory, PeerPool};
use crate::net::server::{self, ControllerSlot};
use crate::raft::log_store::LogStore;
use crate::raft::state_machine::{StateMachine, StateMachineStore};
use crate::raft::types::{ControllerNode, Payload, TypeConfig};

/// Subdirectory of the log directory holding snapshots.
const SNAPSHOTS_DIR: &str = "snapshots";

/// Bytes an entry's JSON adds around its payload (log id and variant tag; about 100).
const ENTRY_ENVELOPE_BYTES_MAX: usize = 256;

/// A running controller quorum member.
pub struct RaftController {
    node_id: u64,
    entry_bytes_max: u32,
    raft: Raft<TypeConfig>,
    local_addr: Option<SocketAddr>,
    controller_slot: ControllerSlot,
    shutdown: CancellationToken,
    tasks: TaskTracker,
}

/// Dropping the handle without `shutdown` still stops the listener and peer tasks; the
/// Raft core then stops when its last handle goes.
impl Drop for RaftController {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl RaftController {
    /// Starts this voter, binding the address its own `controller.quorum.voters` entry
    /// names, unless it is the only voter: a quorum of one has no peer to listen for, so
    /// it opens no socket at all (single-node mode, plan §2.4).
    ///
    /// # Errors
    /// As [`RaftController::start_with_listener`], or the address cannot be bound.
    pub async fn start<S: StateMachine>(
        config: ControllerConfig,
        state_machine: S,
    ) -> Result<Self, Error> {
        let only_voter = config.voters.len() == 1;
        let listener = if only_voter {
            config.own_node()?;
            None
        } else {
            Some(TcpListener::bind(config.own_node()?.address()).await?)
        };
        Self::start_inner(config, listener, state_machine).await
    }

    /// Starts this voter on a listener bound already (tests bind port 0 first to learn
    /// the voters' addresses).
    ///
    /// # Errors
    /// `Config` for a node id outside the voters or invalid timings; `Io` if the log or
    /// its snapshot cannot be opened; `Shutdown` if openraft stops while starting.
    pub async fn start_with_listener<S: StateMachine>(
        config: ControllerConfig,
        listener: TcpListener,
        state_machine: S,
    ) -> Result<Self, Error> {
        Self::start_inner(config, Some(listener), state_machine).await
    }

    async fn start_inner<S: StateMachine>(
        config: ControllerConfig,
        listener: Option<TcpListener>,
        state_machine: S,
    ) -> Result<Self, Error> {
        config.own_node()?;
        let raft_config = Arc::new(config.openraft_config()?);
        let log_dir = config.log_dir();
        let log_store = open_log_store(&config).await?;
        let state_machine =
            StateMachineStore::open(&log_dir.join(SNAPSHOTS_DIR), state_machine).await?;
        let shutdown = CancellationToken::new();
        let tasks = TaskTracker::new();
        let pool = Arc::new(PeerPool::new(
            format!("controller-{}", config.node_id),
            config.limits.clone(),
            config.security.client.clone(),
            shutdown.clone(),
            tasks.clone(),
        ));
        let raft = Raft::new(
            config.node_id,
            raft_config,
            NetworkFactory::new(pool),
            log_store,
            state_machine,
        )
        .await
        .map_err(|e| Error::Shutdown {
            reason: e.to_string(),
        })?;
        let controller_slot = ControllerSlot::default();
        let local_addr = match listener {
            Some(listener) => {
                let local_addr = listener.local_addr()?;
                tasks.spawn(server::serve(
                    listener,
                    raft.clone(),
                    Arc::clone(&controller_slot),
                    config.limits.clone(),
                    config.security.acceptor.clone(),
                    shutdown.clone(),
                    tasks.clone(),
                ));
                Some(local_addr)
            }
            None => None,
        };
        tasks.spawn(log_leader_changes(
            config.node_id,
            raft.metrics(),
            shutdown.clone(),
        ));
        let controller = Self {
            node_id: config.node_id,
            entry_bytes_max: config.entry_bytes_max,
            raft,
            local_addr,
            controller_slot,
            shutdown,
            tasks,
        };
        controller.initialize_quorum(&config).await?;
        Ok(controller)
    }

    /// Initializes the quorum with the configured voters (openraft's `initialize`, as
    /// KRaft's bootstrap): a node whose log already holds a membership was initialized
    /// before, which is no error. On any other failure the controller is shut down before
    /// the error is returned, so no task outlives a failed start.
    async fn initialize_quorum(&self, config: &ControllerConfig) -> Result<(), Error> {
        match self.raft.initialize(config.voters.clone()).await {
            Ok(()) => {
                tracing::info!(node_id = config.node_id, voters = ?config.voters.keys().collect::<Vec<_>>(), "controller quorum initialized")
            }
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {
                tracing::debug!(
                    node_id = config.node_id,
                    "controller quorum was initialized before"
                );
            }
            Err(e) => {
                self.shutdown().await?;
                return Err(Error::Internal(format!(
                    "initializing the controller quorum: {e}"
                )));
            }
        }
        Ok(())
    }

    /// Appends `payload` through the leader and waits until it is committed and applied
    /// here; returns its index.
    ///
    /// # Errors
    /// `NotController` (with the leader, if known) when this node is not the leader;
    /// `EntryTooLarge` if the stored entry could exceed `entry_bytes_max`; `Shutdown` if
    /// the node stopped.
    pub async fn write(&self, payload: Payload) -> Result<u64, Error> {
        // Checked here, not in the log: an append that fails is a storage error, and
        // openraft stops the node on those.
        let bytes = payload.json().len() + ENTRY_ENVELOPE_BYTES_MAX;
        if bytes > self.entry_bytes_max as usize {
            return Err(Error::EntryTooLarge {
                bytes,
                max: self.entry_bytes_max,
            });
        }
        match self.raft.client_write(payload).await {
            Ok(response) => Ok(response.log_id.index),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward))) => {
                Err(Error::NotController {
                    leader_id: forward.leader_id,
                })
            }
            Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e))) => {
                Err(Error::Internal(e.to_string()))
            }
            Err(RaftError::Fatal(fatal)) => Err(Error::Shutdown {
                reason: fatal.to_string(),
            }),
        }
    }

    /// This node's id.
    #[must_use]
    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// The leader this node knows of now.
    #[must_use]
    pub fn leader(&self) -> Option<u64> {
        self.raft.metrics().borrow().current_leader
    }

    /// Waits until some node is known as leader (the broker's startup waits for this
    /// before it registers); returns its id, or `None` after `timeout`.
    ///
    /// # Errors
    /// `Shutdown` if the node stops while waiting.
    pub async fn wait_for_leader(
        &self,
        timeout: std::time::Duration,
    ) -> Result<Option<u64>, Error> {
        let mut metrics = self.raft.metrics();
        let waited =
            tokio::time::timeout(timeout, metrics.wait_for(|m| m.current_leader.is_some()))
                .await
                .map(|seen| seen.map(|m| m.current_leader));
        match waited {
            Err(_) => Ok(None),
            Ok(Ok(leader)) => Ok(leader),
            Ok(Err(_)) => Err(Error::Shutdown {
                reason: "metrics closed".to_string(),
            }),
        }
    }

    /// openraft's metrics (leader, term, last log, applied, snapshot), updated on change.
    #[must_use]
    pub fn metrics(&self) -> watch::Receiver<RaftMetrics<u64, ControllerNode>> {
        self.raft.metrics()
    }

    /// The openraft handle, for what this wrapper does not cover yet.
    #[must_use]
    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.raft
    }

    /// Lets the controller listener serve controller RPC with `controller` (once; later
    /// calls are ignored). Until then it answers those requests NOT_CONTROLLER.
    pub(crate) fn install_controller(
        &self,
        controller: std::sync::Weak<dyn server::ControllerRpc>,
    ) {
        let _ = self.controller_slot.set(controller);
    }

    /// The controller listener's address (`None`: the only voter, no listener).
    #[must_use]
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// Stops Raft, the listener, its connections and the peer tasks, and waits for them.
    ///
    /// # Errors
    /// `Internal` if the Raft core task panicked.
    pub async fn shutdown(&self) -> Result<(), Error> {
        let stopped = self.raft.shutdown().await;
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
        stopped.map_err(|e| Error::Internal(format!("controller Raft task: {e}")))
    }
}

/// Opens the Raft log in the configured directory, on a blocking thread (it reads and
/// may repair files). With more than one voter a leader's own vote reads back
/// uncommitted after a restart (`resign_on_restart`, see [`LogStore::open`]).
async fn open_log_store(config: &ControllerConfig) -> Result<LogStore, Error> {
    let open_dir = config.log_dir();
    let (node_id, segment_bytes, entry_bytes_max) =
        (config.node_id, config.segment_bytes, config.entry_bytes_max);
    let resign_on_restart = config.voters.len() > 1;
    tokio::task::spawn_blocking(move || {
        LogStore::open(
            &open_dir,
            node_id,
            resign_on_restart,
            segment_bytes,
            entry_bytes_max,
        )
    })
    .await
    .map_err(|e| Error::Internal(e.to_string()))?
    .map_err(Error::from)
}

/// Logs every change of the quorum's leader as this node sees it, one line each: which
/// node is the active controller is what an operator (and the failover bench) looks for.
async fn log_leader_changes(
    node_id: u64,
    mut metrics: watch::Receiver<RaftMetrics<u64, ControllerNode>>,
    shutdown: CancellationToken,
) {
    let mut last: Option<(Option<u64>, u64)> = None;
    loop {
        let now = {
            let m = metrics.borrow_and_update();
            (m.current_leader, m.current_term)
        };
        if last.map(|(leader, _)| leader) != Some(now.0) {
            let (leader, term) = now;
            match leader {
                Some(leader) => tracing::info!(
                    leader,
                    term,
                    active = leader == node_id,
                    "metadata quorum leader: node {leader}"
                ),
                None => tracing::info!(term, "metadata quorum has no leader"),
            }
        }
        last = Some(now);
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = metrics.changed() => if changed.is_err() { return },
        }
    }
}
