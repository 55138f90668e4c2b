//! `RpcProducerIdManager`: producer ids from blocks the controller allocates, as Kafka's
//! `RPCProducerIdManager` hands them out. In a cluster every broker gives out ids, so they
//! come from disjoint blocks the controller records (`ProducerIdsRecord`, AllocateProducerIds
//! 67); where a block comes from is behind [`ProducerIdBlocks`], which the broker's startup
//! implements over its controller handle.
//!
//! Ids are given out without waiting: once 90 % of the current block is used, the next block
//! is fetched in the background (one fetch at a time), and an id asked for while no block is
//! ready answers COORDINATOR_LOAD_IN_PROGRESS, which clients retry (Kafka does the same,
//! rather than block a request thread on the controller).
//!
//! Thread-safety: one `parking_lot::Mutex` over the blocks, held for arithmetic only.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use parking_lot::Mutex;

/// No producer id block has arrived from the controller yet; ask again shortly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no producer id block yet")]
pub struct NoBlockYet;

/// A contiguous range of producer ids this broker may give out: `[first, first + len)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerIdBlock {
    /// The first id of the block.
    pub first: i64,
    /// How many ids it holds (Kafka's controller hands out 1000).
    pub len: i32,
}

impl ProducerIdBlock {
    /// One past the last id.
    fn end(self) -> i64 {
        self.first.saturating_add(i64::from(self.len))
    }
}

/// Where producer-id blocks come from: the controller's AllocateProducerIds in a cluster.
pub trait ProducerIdBlocks: Send + Sync + 'static {
    /// A fresh block, never handed to any broker before (durable on the controller).
    ///
    /// # Errors
    /// The controller could not be reached or refused; the manager retries later.
    fn next_block(&self) -> BoxFuture<'_, Result<ProducerIdBlock, String>>;
}

/// How long a failed block fetch waits before the next request may start another
/// (Kafka's `RetryBackoffMs` in `RPCProducerIdManager`).
const FETCH_BACKOFF: Duration = Duration::from_millis(50);

/// Share of a block used before the next one is fetched (Kafka's 90 %).
const PREFETCH_PERCENT: i64 = 90;

/// The block ids are given out from, and the next id in it.
#[derive(Clone, Copy)]
struct Current {
    block: ProducerIdBlock,
    next: i64,
}

impl Current {
    fn end(self) -> i64 {
        self.block.end()
    }
}

struct Blocks {
    /// The block ids are given out from.
    current: Option<Current>,
    /// The block fetched ahead.
    next: Option<ProducerIdBlock>,
    /// A fetch is running.
    fetching: bool,
    /// No fetch starts before this instant (after a failed one).
    backoff_until: Option<tokio::time::Instant>,
}

/// Producer ids from controller blocks. See the module docs.
pub struct RpcProducerIdManager {
    source: Arc<dyn ProducerIdBlocks>,
    blocks: Mutex<Blocks>,
    self_weak: Weak<RpcProducerIdManager>,
}

impl RpcProducerIdManager {
    /// A manager with no block yet; the first id asked for starts the first fetch.
    #[must_use]
    pub fn new(source: Arc<dyn ProducerIdBlocks>) -> Arc<Self> {
        Self::with_first_block(source, None)
    }

    /// A manager giving out ids from `first` (a block fetched at startup, so the first
    /// InitProducerId does not have to be retried) before it fetches more from `source`.
    #[must_use]
    pub fn with_first_block(
        source: Arc<dyn ProducerIdBlocks>,
        first: Option<ProducerIdBlock>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|self_weak| RpcProducerIdManager {
            source,
            blocks: Mutex::new(Blocks {
                current: first
                    .filter(|b| 0 < b.len && 0 <= b.first)
                    .map(|block| Current {
                        block,
                        next: block.first,
                    }),
                next: None,
                fetching: false,
                backoff_until: None,
            }),
            self_weak: self_weak.clone(),
        })
    }

    /// A manager over an in-memory block counter, its first block ready: coordinators
    /// built by unit tests without a controller (this crate's and the broker's).
    #[doc(hidden)]
    #[must_use]
    pub fn for_tests() -> Arc<Self> {
        /// Successive blocks of 1000 from 0.
        struct Counter(std::sync::atomic::AtomicI64);
        impl ProducerIdBlocks for Counter {
            fn next_block(&self) -> BoxFuture<'_, Result<ProducerIdBlock, String>> {
                let first = self.0.fetch_add(1000, std::sync::atomic::Ordering::Relaxed);
                Box::pin(async move { Ok(ProducerIdBlock { first, len: 1000 }) })
            }
        }
        Self::with_first_block(
            Arc::new(Counter(std::sync::atomic::AtomicI64::new(1000))),
            Some(ProducerIdBlock {
                first: 0,
                len: 1000,
            }),
        )
    }

    /// The next unused producer id. Call from within the tokio runtime (a fetch may be
    /// spawned).
    ///
    /// # Errors
    /// [`NoBlockYet`] while no block is ready (retriable: the transaction coordinator
    /// answers COORDINATOR_LOAD_IN_PROGRESS, as Kafka's `RPCProducerIdManager` does).
    pub fn generate(&self) -> Result<i64, NoBlockYet> {
        let mut blocks = self.blocks.lock();
        if blocks.current.is_none_or(|c| c.end() <= c.next) {
            blocks.current = blocks.next.take().map(|block| Current {
                block,
                next: block.first,
            });
        }
        let id = blocks.current.as_mut().and_then(|c| {
            (c.next < c.block.end()).then(|| {
                c.next += 1;
                c.next - 1
            })
        });
        // Prefetch once 90 % of the current block is used (or when there is none).
        let wants_next = blocks.next.is_none()
            && blocks.current.is_none_or(|c| {
                let used = c.next - c.block.first;
                used * 100 >= i64::from(c.block.len) * PREFETCH_PERCENT
            });
        if wants_next {
            self.maybe_fetch(&mut blocks);
        }
        id.ok_or(NoBlockYet)
    }

    fn maybe_fetch(&self, blocks: &mut Blocks) {
        if blocks.fetching
            || blocks
                .backoff_until
                .is_some_and(|t| tokio::time::Instant::now() < t)
        {
            return;
        }
        let Some(manager) = self.self_weak.upgrade() else {
            return;
        };
        blocks.fetching = true;
        tokio::spawn(async move {
            let fetched = manager.source.next_block().await;
            let mut blocks = manager.blocks.lock();
            blocks.fetching = false;
            match fetched {
                Ok(block) if 0 < block.len && 0 <= block.first => {
                    blocks.next = Some(block);
                    blocks.backoff_until = None;
                }
                Ok(block) => {
                    tracing::error!(
                        ?block,
                        "the controller handed out an invalid producer id block"
                    );
                    blocks.backoff_until = Some(tokio::time::Instant::now() + FETCH_BACKOFF);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot fetch a producer id block");
                    blocks.backoff_until = Some(tokio::time::Instant::now() + FETCH_BACKOFF);
                }
            }
        });
    }
}

#[cfg(test)]
mod tests;
