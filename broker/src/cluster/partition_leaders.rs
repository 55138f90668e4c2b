//! The transaction coordinator's view of where partitions lead: the leader in this
//! broker's image and the endpoint it registered, so markers and KIP-890 checks reach the
//! broker the clients would.

use logbook_client::BrokerEndpoint;

use crate::coordinator::transaction::remote::PartitionLeaders;

use super::MetadataCache;

/// [`PartitionLeaders`] over the image of broker `node_id`.
pub struct ImageLeaders {
    metadata: MetadataCache,
    node_id: i32,
}

impl ImageLeaders {
    /// Leaders from `metadata`, as seen by broker `node_id`.
    #[must_use]
    pub fn new(metadata: MetadataCache, node_id: i32) -> Self {
        ImageLeaders { metadata, node_id }
    }
}

impl PartitionLeaders for ImageLeaders {
    fn leader(&self, topic: &str, partition: i32) -> Option<BrokerEndpoint> {
        let image = self.metadata.image();
        let leader = image.topic(topic)?.partition(partition)?.leader;
        let endpoint = image.broker(leader)?.endpoints.first()?.clone();
        Some(BrokerEndpoint {
            id: leader,
            host: endpoint.host,
            port: endpoint.port,
        })
    }

    fn local_broker_id(&self) -> i32 {
        self.node_id
    }
}
