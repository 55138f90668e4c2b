//! `MetadataCache`: the newest metadata image this broker has applied (Kafka's
//! `KRaftMetadataCache`). The publisher replaces it after it has acted on each image
//! (logs created, leaderships applied), so a request that sees an image also finds the
//! partitions it names; handlers read it without locks.

use std::sync::Arc;
use std::time::Duration;

use logbook_metadata::MetadataImage;
use parking_lot::RwLock;
use tokio::sync::watch;

/// The applied image, shared by the publisher (writer) and every handler (readers).
#[derive(Clone)]
pub struct MetadataCache {
    image: Arc<watch::Sender<MetadataImage>>,
    /// The image being applied, staged before the partitions act on it: whether a
    /// broker is fenced must be known when the ISR change that removes it arrives, not
    /// after (see [`MetadataCache::stage`]).
    staged: Arc<RwLock<MetadataImage>>,
    /// Whether the applied image sets any client quota: the produce and fetch paths look
    /// here first, one relaxed load, and at the image only when it is set.
    quotas_set: Arc<std::sync::atomic::AtomicBool>,
}

impl Default for MetadataCache {
    fn default() -> Self {
        MetadataCache::new()
    }
}

impl MetadataCache {
    /// A cache at the empty image (offset -1).
    #[must_use]
    pub fn new() -> Self {
        let (image, _) = watch::channel(MetadataImage::empty());
        MetadataCache {
            image: Arc::new(image),
            staged: Arc::new(RwLock::new(MetadataImage::empty())),
            quotas_set: Arc::default(),
        }
    }

    /// Stages `image` before the publisher acts on it: its broker registrations count for
    /// ISR eligibility at once, so a leader whose ISR just lost a fenced broker stops
    /// waiting for that broker in the same step.
    pub(crate) fn stage(&self, image: &MetadataImage) {
        *self.staged.write() = image.clone();
    }

    /// The newest applied image.
    #[must_use]
    pub fn image(&self) -> MetadataImage {
        self.image.borrow().clone()
    }

    /// The client quotas of the newest image, or `None` when none is set: the produce and
    /// fetch paths ask on every request, so nothing is cloned when quotas are unused.
    #[must_use]
    pub fn client_quotas(&self) -> Option<Arc<logbook_metadata::quotas::ClientQuotas>> {
        if !self.quotas_set.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let image = self.image.borrow();
        let quotas = image.client_quotas();
        (!quotas.is_empty()).then(|| Arc::clone(quotas))
    }

    /// Installs `image` as the newest (the publisher, after acting on it).
    pub(crate) fn publish(&self, image: MetadataImage) {
        self.quotas_set.store(
            !image.client_quotas().is_empty(),
            std::sync::atomic::Ordering::Relaxed,
        );
        self.image.send_replace(image);
    }

    /// Waits until the applied image reaches `offset`; false after `timeout`.
    pub async fn wait_for_offset(&self, offset: i64, timeout: Duration) -> bool {
        self.wait_until(|image| image.offset() >= offset, timeout)
            .await
            .is_some()
    }

    /// Waits until `ready` holds for the applied image and returns that image; `None`
    /// after `timeout`.
    pub async fn wait_until(
        &self,
        mut ready: impl FnMut(&MetadataImage) -> bool,
        timeout: Duration,
    ) -> Option<MetadataImage> {
        let mut receiver = self.image.subscribe();
        let waited = tokio::time::timeout(timeout, receiver.wait_for(|image| ready(image))).await;
        match waited {
            Ok(Ok(image)) => Some(image.clone()),
            _ => None,
        }
    }
}

/// A broker counts in an ISR while the staged image has it registered, unfenced, not in
/// controlled shutdown, and in the registration it fetched with (Kafka's
/// `isReplicaIsrEligible`).
impl logbook_replication::IsrEligibility for MetadataCache {
    fn is_eligible(&self, broker_id: i32, broker_epoch: i64) -> bool {
        self.staged.read().broker(broker_id).is_some_and(|broker| {
            broker.is_active() && (broker_epoch < 0 || broker.broker_epoch == broker_epoch)
        })
    }
}

impl MetadataCache {
    /// Broker `broker_id`'s endpoint on listener `listener`, as it registered it.
    #[must_use]
    pub fn endpoint_on(&self, broker_id: i32, listener: &str) -> Option<(String, u16)> {
        let image = self.image();
        let broker = image.broker(broker_id)?;
        let endpoint = broker.endpoints.iter().find(|e| e.name == listener)?;
        Some((endpoint.host.clone(), endpoint.port))
    }
}

/// Where brokers reach each other: each registered broker's endpoint on the
/// inter-broker listener (`inter.broker.listener.name`), as Kafka's replica fetcher and
/// transaction marker channel look their peers up.
#[derive(Clone)]
pub struct InterBrokerEndpoints {
    metadata: MetadataCache,
    listener: crate::listeners::ListenerName,
}

impl InterBrokerEndpoints {
    /// Endpoints on `listener` from `metadata`'s image.
    #[must_use]
    pub fn new(metadata: MetadataCache, listener: crate::listeners::ListenerName) -> Self {
        InterBrokerEndpoints { metadata, listener }
    }

    /// The image these endpoints come from.
    #[must_use]
    pub fn metadata(&self) -> &MetadataCache {
        &self.metadata
    }
}

/// Followers find their leaders at the endpoint each registered on the inter-broker
/// listener; a leader without one is not fetched from (Kafka starts no fetcher for it).
impl logbook_replication::fetcher::BrokerEndpoints for InterBrokerEndpoints {
    fn endpoint(&self, broker_id: i32) -> Option<(String, u16)> {
        self.metadata.endpoint_on(broker_id, self.listener.as_str())
    }
}
