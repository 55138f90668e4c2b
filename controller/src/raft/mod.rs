//! openraft's side of the controller: the type configuration, the durable log of entries,
//! the state machine adapter with its snapshot files.

pub mod durable_file; // small CRC'd files replaced by write-temp-fsync-rename
pub mod log_file; // the framed, CRC'd segment files of `__cluster_metadata-0`

pub mod types; // TypeConfig, ControllerNode, Payload
