//! `MetadataFollower`: the metadata log of a broker-only node (`process.roles=broker`).
//! A combined node's own Raft state machine feeds its publisher; a broker-only node has no
//! Raft node, so this task pulls the committed batches from the active controller
//! (MetadataFetch, `logbook_controller::metadata_fetch`), folds each into its image with
//! the same `MetadataImage::apply` the voters run, and hands the publisher the same
//! publications in the same order. A whole image (a snapshot, for a new broker or one
//! far behind) goes to the publisher as an image with an empty delta, which it applies
//! whole, exactly as after a snapshot install on a voter.
//!
//! The image lives in memory only: a restarted broker-only node starts from the active
//! controller's snapshot, as a KRaft broker without its local metadata log copy would, and
//! the publisher's whole-image catch-up then reconciles the partition directories on disk.
//! Until a controller answers, the broker has no image and does not register (a KRaft
//! broker cannot unfence without the quorum either).

use std::sync::Arc;
use std::time::Duration;

use logbook_controller::metadata_fetch::{MetadataFetchReply, MetadataFetchRequest};
use logbook_controller::metadata_state_machine::MetadataPublication;
use logbook_controller::quorum::QuorumError;
use logbook_controller::ControllerClient;
use logbook_metadata::{MetadataDelta, MetadataImage, BATCH_ENCODING_VERSION};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long the active controller may hold a fetch with nothing new (Kafka's brokers
/// fetch the metadata log with `replica.fetch.wait.max.ms`, 500 ms).
pub const METADATA_FETCH_WAIT_MS: u64 = 500;

/// The most batches one fetch brings.
pub const METADATA_FETCH_BATCHES_MAX: usize = 1000;

/// Pause after a failed fetch (no controller reachable, an election under way).
const RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// Pulls the metadata log into `publications` until `stop` (see the module docs).
pub struct MetadataFollower {
    client: Arc<ControllerClient>,
    publications: mpsc::Sender<MetadataPublication>,
    image: MetadataImage,
}

impl MetadataFollower {
    /// A follower over `client` (a client of its own: see
    /// `ControllerClient::fetch_metadata`), publishing to `publications`.
    #[must_use]
    pub fn new(
        client: Arc<ControllerClient>,
        publications: mpsc::Sender<MetadataPublication>,
    ) -> Self {
        MetadataFollower {
            client,
            publications,
            image: MetadataImage::empty(),
        }
    }

    /// Fetches and publishes until `stop` is cancelled or the publisher is gone.
    pub async fn run(mut self, stop: CancellationToken) {
        loop {
            let request = MetadataFetchRequest {
                after_offset: self.image.offset(),
                max_wait_ms: METADATA_FETCH_WAIT_MS,
                max_batches: METADATA_FETCH_BATCHES_MAX,
            };
            let reply = tokio::select! {
                () = stop.cancelled() => return,
                reply = self.client.fetch_metadata(request) => reply,
            };
            let published = match reply {
                Ok(reply) => self.apply(reply).await,
                Err(e) => {
                    log_failure(&e);
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(RETRY_BACKOFF) => {}
                    }
                    true
                }
            };
            if !published {
                tracing::debug!("metadata publisher is gone; the metadata follower stops");
                return;
            }
        }
    }

    /// Folds one answer into the image and publishes each step. False once the publisher
    /// is gone.
    async fn apply(&mut self, reply: MetadataFetchReply) -> bool {
        match reply {
            MetadataFetchReply::Batches(batches) => {
                for (offset, batch) in batches {
                    if offset <= self.image.offset() {
                        continue;
                    }
                    let (image, delta) = self.image.apply(offset, &batch);
                    if let Some(rejected) = &delta.rejected {
                        tracing::debug!(offset, error = %rejected.error, "metadata batch rejected (as on every voter)");
                    }
                    self.image = image.clone();
                    if self
                        .publications
                        .send(MetadataPublication { image, delta })
                        .await
                        .is_err()
                    {
                        return false;
                    }
                }
                true
            }
            MetadataFetchReply::Snapshot(snapshot) => {
                if snapshot.v > BATCH_ENCODING_VERSION {
                    tracing::error!(
                        version = snapshot.v,
                        supported = BATCH_ENCODING_VERSION,
                        "the controller sent a metadata snapshot of a newer encoding; upgrade this broker"
                    );
                    tokio::time::sleep(RETRY_BACKOFF).await;
                    return true;
                }
                if snapshot.offset <= self.image.offset() {
                    return true;
                }
                let image = match snapshot.to_image() {
                    Ok(image) => image,
                    Err(e) => {
                        tracing::error!(error = %e, offset = snapshot.offset, "the controller's metadata snapshot does not rebuild an image");
                        tokio::time::sleep(RETRY_BACKOFF).await;
                        return true;
                    }
                };
                tracing::info!(
                    offset = image.offset(),
                    "loaded the metadata image from the active controller"
                );
                self.image = image.clone();
                let delta = MetadataDelta {
                    offset: image.offset(),
                    ..MetadataDelta::default()
                };
                self.publications
                    .send(MetadataPublication { image, delta })
                    .await
                    .is_ok()
            }
        }
    }
}

fn log_failure(error: &QuorumError) {
    match error {
        QuorumError::RequestTimedOut { .. } | QuorumError::NotController { .. } => {
            tracing::debug!(error = %error, "metadata fetch failed; retrying");
        }
        other => tracing::warn!(error = %other, "metadata fetch failed; retrying"),
    }
}
