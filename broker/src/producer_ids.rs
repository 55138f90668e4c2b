//! Producer id allocation for idempotent producers (InitProducerId without a transactional
//! id).
//!
//! Ids are handed out from blocks. On a broker of a cluster (and a single node on its own
//! quorum) each block comes from the controller (AllocateProducerIds, KIP-730), which
//! records the next free id in the metadata log; without a controller the end of the
//! current block is persisted (write temp, fsync, rename) *before* any id from it is given
//! out. Either way a restart never reissues an id.

use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

/// Ids reserved per durable write.
const BLOCK_SIZE: i64 = 1000;
const FILE_NAME: &str = "producer-id-block";

struct State {
    next: i64,
    block_end: i64,
}

/// Where blocks come from.
enum BlockSource {
    /// `producer-id-block` in the metadata dir.
    File(PathBuf),
    /// The controller.
    Controller(std::sync::Arc<crate::cluster::ClusterContext>),
}

/// Hands out unique producer ids across restarts.
pub struct ProducerIdManager {
    source: BlockSource,
    state: Mutex<State>,
}

impl ProducerIdManager {
    /// Loads the persisted block end from `metadata_dir`; ids continue from there.
    ///
    /// # Errors
    /// An unreadable file.
    pub fn open(metadata_dir: &Path) -> std::io::Result<Self> {
        let path = metadata_dir.join(FILE_NAME);
        let next = match std::fs::read_to_string(&path) {
            Ok(s) => s.trim().parse::<i64>().map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        Ok(ProducerIdManager {
            source: BlockSource::File(path),
            state: Mutex::new(State {
                next,
                block_end: next,
            }),
        })
    }

    /// Ids from blocks the controller of `cluster` hands out (the first is asked for at
    /// the first id).
    #[must_use]
    pub fn from_controller(cluster: std::sync::Arc<crate::cluster::ClusterContext>) -> Self {
        ProducerIdManager {
            source: BlockSource::Controller(cluster),
            state: Mutex::new(State {
                next: 0,
                block_end: 0,
            }),
        }
    }

    /// The next unused producer id.
    ///
    /// # Errors
    /// The block end could not be persisted, or the controller gave no block.
    pub fn next_id(&self) -> std::io::Result<i64> {
        let mut state = self.state.lock();
        if state.next >= state.block_end {
            match &self.source {
                BlockSource::File(path) => {
                    let end = state.block_end + BLOCK_SIZE;
                    let tmp = path.with_extension("tmp");
                    let mut f = std::fs::File::create(&tmp)?;
                    f.write_all(end.to_string().as_bytes())?;
                    f.sync_all()?;
                    std::fs::rename(&tmp, path)?;
                    if let Some(dir) = path.parent() {
                        std::fs::File::open(dir)?.sync_all()?;
                    }
                    state.block_end = end;
                }
                BlockSource::Controller(cluster) => {
                    let controller = cluster.controller().map_err(std::io::Error::other)?;
                    let block = cluster
                        .block_on(
                            controller
                                .allocate_producer_ids(cluster.node_id, cluster.broker_epoch()),
                        )
                        .ok_or_else(|| {
                            std::io::Error::new(
                                std::io::ErrorKind::TimedOut,
                                "the controller gave no producer id block in time",
                            )
                        })?
                        .map_err(std::io::Error::other)?;
                    state.next = block.first_producer_id;
                    state.block_end = block.first_producer_id + i64::from(block.len);
                }
            }
        }
        let id = state.next;
        state.next += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Ids are unique across a restart, even though the block was not used up.
    #[test]
    fn ids_survive_restart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = ProducerIdManager::open(dir.path()).expect("open");
        assert_eq!(first.next_id().expect("id"), 0);
        assert_eq!(first.next_id().expect("id"), 1);
        drop(first);
        let second = ProducerIdManager::open(dir.path()).expect("reopen");
        assert_eq!(second.next_id().expect("id"), BLOCK_SIZE);
    }
}
