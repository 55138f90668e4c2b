//! Producer id blocks (Kafka's `ProducerIdControlManager`, KIP-730): each broker asks for
//! a block of ids and hands them to idempotent and transactional producers. The next free
//! id is in the log, so blocks never overlap, also across controller failovers.

use logbook_metadata::{BrokerId, MetadataRecord, ProducerIdsRecord};

use super::{QuorumController, QuorumError};

/// Ids per block (Kafka's `ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE`).
pub const PRODUCER_ID_BLOCK_SIZE: i32 = 1000;

/// A block handed to a broker: ids `first_producer_id .. first_producer_id + len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProducerIdsBlock {
    /// First id of the block.
    pub first_producer_id: i64,
    /// Ids in the block.
    pub len: i32,
}

impl QuorumController {
    /// AllocateProducerIds (API key 67): the next block, for broker `broker_id` at
    /// `broker_epoch`.
    ///
    /// # Errors
    /// `NotController`, `BrokerIdNotRegistered`, `StaleBrokerEpoch`, `Raft`.
    pub async fn allocate_producer_ids(
        &self,
        broker_id: BrokerId,
        broker_epoch: i64,
    ) -> Result<ProducerIdsBlock, QuorumError> {
        let _active = self.activate().await?;
        let (block, _) = self
            .run(|image| {
                let broker = image
                    .broker(broker_id)
                    .ok_or(QuorumError::BrokerIdNotRegistered { broker_id })?;
                if broker.broker_epoch != broker_epoch {
                    return Err(QuorumError::StaleBrokerEpoch {
                        broker_id,
                        epoch: broker_epoch,
                        current: broker.broker_epoch,
                    });
                }
                let first_producer_id = image.next_producer_id();
                let record = MetadataRecord::ProducerIds(ProducerIdsRecord {
                    broker_id,
                    broker_epoch,
                    next_producer_id: first_producer_id + i64::from(PRODUCER_ID_BLOCK_SIZE),
                });
                let block = ProducerIdsBlock {
                    first_producer_id,
                    len: PRODUCER_ID_BLOCK_SIZE,
                };
                Ok((vec![record], block))
            })
            .await?;
        Ok(block)
    }
}
