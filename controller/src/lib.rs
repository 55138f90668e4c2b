//! The controller quorum: a Raft log of cluster metadata, replicated among the nodes named
//! by `controller.quorum.voters`, as KRaft's `__cluster_metadata` log is.
//!
//! Its Raft layer (`raft/`, `net/`; openraft, ARCHITECTURE.md says why not raft-rs) treats
//! entries as opaque JSON batches applied by a [`StateMachine`] the caller brings, and knows
//! nothing of brokers, topics or the metadata records, so the metadata crate and the
//! QuorumController (`quorum/`, which applies the metadata records with `logbook-metadata`)
//! can change without touching consensus.

pub mod client; // ControllerClient: a broker's calls to the active controller, local or remote
pub mod config; // ControllerConfig, voter parsing, Raft timings and network limits
pub mod controller; // RaftController: start, write, leader watch, shutdown
pub mod controller_rpc; // broker-to-controller requests on the controller listener
pub mod error; // the crate's typed Error
pub mod metadata_fetch; // MetadataFetch: broker-only nodes pull committed batches from the active controller
pub mod metadata_state_machine; // the metadata image as the Raft state machine, and its publications
pub mod net; // the controller listener and the pooled peer connections
pub mod quorum; // QuorumController: the active controller's operations
pub mod raft; // TypeConfig, log storage, state machine adapter, snapshots

pub use client::{ControllerClient, ControllerClientConfig};
pub use config::{parse_voters, ControllerConfig, NetworkLimits, RaftTimings};
pub use controller::RaftController;
pub use error::Error;
pub use raft::state_machine::{StateMachine, StateMachineError};
pub use raft::types::{ControllerNode, Payload, TypeConfig};
