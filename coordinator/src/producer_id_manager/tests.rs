//! Producer ids from blocks: none before the first block arrives (retriable), the next block
//! fetched once 90 % of the current one is used, and ids continuing across blocks.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::{ProducerIdBlock, ProducerIdBlocks, RpcProducerIdManager};

/// Blocks of 10 ids from 1000 up, counting the fetches; the first `failures` fail.
struct Controller {
    next: AtomicI64,
    fetches: AtomicUsize,
    failures: AtomicUsize,
}

impl ProducerIdBlocks for Controller {
    fn next_block(&self) -> BoxFuture<'_, Result<ProducerIdBlock, String>> {
        Box::pin(async move {
            self.fetches.fetch_add(1, Ordering::SeqCst);
            if self
                .failures
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |f| f.checked_sub(1))
                .is_ok()
            {
                return Err("controller unavailable".to_string());
            }
            let first = self.next.fetch_add(10, Ordering::SeqCst);
            Ok(ProducerIdBlock { first, len: 10 })
        })
    }
}

fn controller(failures: usize) -> Arc<Controller> {
    Arc::new(Controller {
        next: AtomicI64::new(1000),
        fetches: AtomicUsize::new(0),
        failures: AtomicUsize::new(failures),
    })
}

/// Asks until an id comes (the fetch runs in the background).
async fn next_id(m: &RpcProducerIdManager) -> i64 {
    for _ in 0..200 {
        match m.generate() {
            Ok(id) => return id,
            Err(e) => assert_eq!(e, super::NoBlockYet),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("no producer id");
}

#[tokio::test]
async fn ids_come_from_blocks_with_prefetch_at_ninety_percent() {
    let c = controller(0);
    let m = RpcProducerIdManager::new(Arc::clone(&c) as Arc<dyn ProducerIdBlocks>);
    // No block yet: retriable, and the first fetch starts.
    assert_eq!(m.generate(), Err(super::NoBlockYet));
    let mut ids = vec![next_id(&m).await];
    for _ in 1..8 {
        ids.push(m.generate().expect("id"));
    }
    assert_eq!(ids, (1000..1008).collect::<Vec<_>>());
    assert_eq!(
        c.fetches.load(Ordering::SeqCst),
        1,
        "no prefetch below 90 %"
    );
    // The 9th of 10 ids reaches 90 %: the next block is fetched ahead.
    ids.push(m.generate().expect("id"));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(c.fetches.load(Ordering::SeqCst), 2, "prefetched at 90 %");
    // The rest of the block, then the prefetched one without a gap in service.
    for _ in 0..11 {
        ids.push(m.generate().expect("id without waiting"));
    }
    assert_eq!(ids, (1000..1020).collect::<Vec<_>>());
}

#[tokio::test]
async fn failed_fetch_is_retried() {
    let c = controller(2);
    let m = RpcProducerIdManager::new(Arc::clone(&c) as Arc<dyn ProducerIdBlocks>);
    assert_eq!(next_id(&m).await, 1000);
    assert_eq!(
        c.fetches.load(Ordering::SeqCst),
        3,
        "two failures, then a block"
    );
}
