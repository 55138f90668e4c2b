//! `MetadataStateMachine`: the [`StateMachine`] that folds committed `MetadataBatch`es into
//! the `MetadataImage`, so every voter holds the same image, and hands each new image with
//! its delta to the broker in log order (plan §2.3).
//!
//! Two outlets, for two readers:
//! - a `watch` of the latest [`AppliedImage`], which the QuorumController reads (it only
//!   needs the newest image, and whether its own last batch was rejected);
//! - an optional bounded `mpsc` of [`MetadataPublication`]s for the broker's publisher,
//!   which must see every delta: `apply` awaits the send, so a slow publisher holds back
//!   the next entries instead of losing one. A publisher that went away (its receiver
//!   dropped) is logged once and no longer waited for.

use std::sync::{Arc, Mutex, PoisonError};

use logbook_metadata::snapshot::MetadataSnapshot;
use logbook_metadata::{MetadataBatch, MetadataDelta, MetadataImage, RejectedBatch};
use tokio::sync::{mpsc, watch};

use crate::metadata_fetch::{MetadataTail, METADATA_TAIL_BATCHES_MAX};

use crate::raft::state_machine::{StateMachine, StateMachineError};
use crate::raft::types::Payload;

/// One applied batch for the broker's publisher: the image after it and what changed.
/// `MetadataImage` is itself an `Arc` (cloning it is one increment).
#[derive(Clone, Debug)]
pub struct MetadataPublication {
    /// The image after the batch.
    pub image: MetadataImage,
    /// What the batch changed (or why it was rejected).
    pub delta: MetadataDelta,
}

/// The newest image, with the last rejected batch, for the QuorumController.
#[derive(Clone, Debug, Default)]
pub struct AppliedImage {
    /// The image after the last applied batch.
    pub image: MetadataImage,
    /// The last batch the image rejected (offset and reason): the active controller checks
    /// it after each write, since a rejected batch is a stale computation to redo.
    pub last_rejected: Option<(i64, RejectedBatch)>,
}

/// The metadata image as a Raft state machine. Applies only committed entries, in order.
pub struct MetadataStateMachine {
    applied: watch::Sender<AppliedImage>,
    publisher: Option<mpsc::Sender<MetadataPublication>>,
    /// A snapshot's image the publisher had no room for at install (install is not async);
    /// sent, awaited, before the next entry's.
    pending: Option<MetadataPublication>,
    /// The last committed batches, served to broker-only nodes (`metadata_fetch`).
    tail: Arc<Mutex<MetadataTail>>,
}

impl MetadataStateMachine {
    /// A state machine at the empty image, publishing to `publisher` (the broker's bounded
    /// queue; `None` when nothing subscribes, as in the controller's own tests).
    #[must_use]
    pub fn new(publisher: Option<mpsc::Sender<MetadataPublication>>) -> Self {
        let (applied, _) = watch::channel(AppliedImage::default());
        MetadataStateMachine {
            applied,
            publisher,
            pending: None,
            tail: Arc::new(Mutex::new(MetadataTail::new(METADATA_TAIL_BATCHES_MAX))),
        }
    }

    /// Keeps at most `max` committed batches for MetadataFetch (default
    /// `METADATA_TAIL_BATCHES_MAX`).
    #[must_use]
    pub fn with_tail_batches_max(self, max: usize) -> Self {
        *self.tail.lock().unwrap_or_else(PoisonError::into_inner) = MetadataTail::new(max);
        self
    }

    /// The tail of committed batches this state machine keeps (std mutex, never held
    /// across an await).
    #[must_use]
    pub fn tail(&self) -> Arc<Mutex<MetadataTail>> {
        Arc::clone(&self.tail)
    }

    /// A receiver of the newest applied image.
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<AppliedImage> {
        self.applied.subscribe()
    }

    async fn publish(&mut self, publication: MetadataPublication) {
        if let Some(publisher) = &self.publisher {
            if publisher.send(publication).await.is_err() {
                tracing::warn!("metadata publisher is gone; images are no longer published");
                self.publisher = None;
            }
        }
    }
}

impl StateMachine for MetadataStateMachine {
    async fn apply(&mut self, index: u64, payload: &Payload) -> Result<(), StateMachineError> {
        let batch = MetadataBatch::decode(payload.json().as_bytes())
            .map_err(|e| StateMachineError(format!("entry {index}: {e}")))?;
        let offset = i64::try_from(index)
            .map_err(|_| StateMachineError(format!("entry index {index} above i64::MAX")))?;
        if let Some(pending) = self.pending.take() {
            self.publish(pending).await;
        }
        let current = self.applied.borrow().image.clone();
        let (image, delta) = current.apply(offset, &batch);
        if let Some(rejected) = &delta.rejected {
            // Every voter rejects the same batch; for the active controller it is a stale
            // computation that it redoes, for the others one line in the log.
            tracing::info!(offset, record = rejected.record_index, error = %rejected.error, "metadata batch rejected");
        }
        let last_rejected = delta
            .rejected
            .clone()
            .map(|r| (offset, r))
            .or_else(|| self.applied.borrow().last_rejected.clone());
        // Into the tail before the watch moves: a fetch woken by the new image finds it.
        self.tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(offset, batch);
        self.applied.send_replace(AppliedImage {
            image: image.clone(),
            last_rejected,
        });
        self.publish(MetadataPublication { image, delta }).await;
        Ok(())
    }

    fn snapshot(&self) -> Result<Vec<u8>, StateMachineError> {
        Ok(MetadataSnapshot::of(&self.applied.borrow().image).encode())
    }

    fn install_snapshot(
        &mut self,
        _last_index: Option<u64>,
        snapshot: &[u8],
    ) -> Result<(), StateMachineError> {
        let image = MetadataSnapshot::decode(snapshot)
            .and_then(|s| s.to_image())
            .map_err(|e| StateMachineError(format!("metadata snapshot: {e}")))?;
        self.tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .reset(image.offset());
        self.applied.send_replace(AppliedImage {
            image: image.clone(),
            last_rejected: None,
        });
        // The publisher sees a snapshot as an image with an empty delta at its offset; the
        // broker compares it with what it holds (next session). Install is synchronous, so
        // a full queue keeps it pending for the next apply: later, never lost.
        if let Some(publisher) = &self.publisher {
            let delta = MetadataDelta {
                offset: image.offset(),
                ..MetadataDelta::default()
            };
            self.pending = publisher
                .try_send(MetadataPublication { image, delta })
                .err()
                .and_then(|e| match e {
                    mpsc::error::TrySendError::Full(p) => Some(p),
                    mpsc::error::TrySendError::Closed(_) => None,
                });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
