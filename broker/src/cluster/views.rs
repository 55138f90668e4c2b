//! What the handlers show of the metadata image: partitions (leader, epoch, replicas, ISR,
//! offline replicas) and the brokers clients may connect to (registered and unfenced,
//! with their PLAINTEXT endpoint), in one place so Metadata, DescribeTopicPartitions,
//! DescribeCluster and FindCoordinator agree.

use logbook_metadata::{BrokerRegistration, MetadataImage, NO_LEADER};
use uuid::Uuid;

/// One partition as clients see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionView {
    /// The leader's broker id, -1 without one.
    pub leader: i32,
    /// The leader epoch.
    pub leader_epoch: i32,
    /// Every replica, preferred first.
    pub replicas: Vec<i32>,
    /// The in-sync replicas.
    pub isr: Vec<i32>,
    /// Replicas on brokers that are fenced or not registered.
    pub offline_replicas: Vec<i32>,
}

/// A broker clients may connect to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerView {
    /// Its id.
    pub node_id: i32,
    /// Advertised host.
    pub host: String,
    /// Advertised port.
    pub port: i32,
    /// `broker.rack`.
    pub rack: Option<String>,
}

/// Partition `index` of topic `topic_id` in `image`.
#[must_use]
pub fn partition(image: &MetadataImage, topic_id: &Uuid, index: i32) -> Option<PartitionView> {
    let registration = image.partition(topic_id, index)?;
    let leader = if registration.leader == NO_LEADER {
        -1
    } else {
        registration.leader
    };
    Some(PartitionView {
        leader,
        leader_epoch: registration.leader_epoch,
        replicas: registration.replicas.clone(),
        isr: registration.isr.clone(),
        offline_replicas: image.offline_replicas(registration),
    })
}

/// `broker` as clients of `listener` reach it; `None` when it has no endpoint there.
fn view(broker: &BrokerRegistration, listener: &str) -> Option<BrokerView> {
    let endpoint = broker.endpoints.iter().find(|e| e.name == listener)?;
    Some(BrokerView {
        node_id: broker.broker_id,
        host: endpoint.host.clone(),
        port: i32::from(endpoint.port),
        rack: broker.rack.clone(),
    })
}

/// The registered, unfenced brokers with an endpoint on `listener`, by id (Kafka's
/// `getAliveBrokerNodes(listenerName)`: the others are left out).
#[must_use]
pub fn alive_brokers(image: &MetadataImage, listener: &str) -> Vec<BrokerView> {
    image
        .unfenced_brokers()
        .filter_map(|b| view(b, listener))
        .collect()
}

/// Broker `id` if it is registered, unfenced and has an endpoint on `listener`.
#[must_use]
pub fn alive_broker(image: &MetadataImage, id: i32, listener: &str) -> Option<BrokerView> {
    image
        .broker(id)
        .filter(|b| !b.fenced)
        .and_then(|b| view(b, listener))
}
