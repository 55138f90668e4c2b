//! openraft's side of the controller: the type configuration, the durable log of entries,
//! the state machine adapter with its snapshot files.

pub mod durable_file; // small CRC'd files replaced by write-temp-fsync-rename
pub mod log_file; // the framed, CRC'd segment files of `__cluster_metadata-0`
pub mod log_store; // openraft's RaftLogStorage over LogFile, fsync before acknowledging
pub mod snapshot_file; // one snapshot per file: meta and state, CRC'd, fsync'd
pub mod state_machine; // the StateMachine trait and openraft's RaftStateMachine over it
pub mod types; // TypeConfig, ControllerNode, Payload
