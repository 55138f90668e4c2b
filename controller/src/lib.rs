//! The controller quorum: a Raft log of cluster metadata, replicated among the nodes named
//! by `controller.quorum.voters`, as KRaft's `__cluster_metadata` log is.
pub mod error; // the crate's typed Error
pub mod raft; // TypeConfig, log storage, state machine adapter, snapshots
