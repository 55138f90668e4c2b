//! The transaction coordinator's view of where partitions lead: the leader in this
//! broker's image and the endpoint it registered, so markers and KIP-890 checks reach the
//! broker the clients would.

use logbook_client::BrokerEndpoint;

use crate::coordinator::transaction::remote::PartitionLeaders;

use super::metadata_cache::InterBrokerEndpoints;

/// [`PartitionLeaders`] over the image of broker `node_id`, at the leaders' inter-broker
/// endpoints.
pub struct ImageLeaders {
    endpoints: InterBrokerEndpoints,
    node_id: i32,
}

impl ImageLeaders {
    /// Leaders from `endpoints`' image, as seen by broker `node_id`.
    #[must_use]
    pub fn new(endpoints: InterBrokerEndpoints, node_id: i32) -> Self {
        ImageLeaders { endpoints, node_id }
    }
}

impl PartitionLeaders for ImageLeaders {
    fn leader(&self, topic: &str, partition: i32) -> Option<BrokerEndpoint> {
        let leader = {
            let image = self.endpoints.metadata().image();
            image.topic(topic)?.partition(partition)?.leader
        };
        let (host, port) =
            logbook_replication::fetcher::BrokerEndpoints::endpoint(&self.endpoints, leader)?;
        Some(BrokerEndpoint {
            id: leader,
            host,
            port,
        })
    }

    fn local_broker_id(&self) -> i32 {
        self.node_id
    }
}
