//! `Broker`: the state every request handler reaches — configuration, the topic registry,
//! and this node's identity.

use crate::config::Config;
use crate::coordinator::{GroupCoordinator, TransactionCoordinator};
use crate::topics::Topics;

/// Shared broker state, one per process, behind an `Arc`.
pub struct Broker {
    /// The configuration the process started with.
    pub config: Config,
    /// Topic metadata.
    pub topics: std::sync::Arc<Topics>,
    /// The partitions this broker hosts: the only way to their logs.
    pub replicas: std::sync::Arc<logbook_replication::ReplicaManager>,
    /// Consumer groups and committed offsets.
    pub groups: std::sync::Arc<GroupCoordinator>,
    /// Transactional ids and their transactions.
    pub transactions: std::sync::Arc<TransactionCoordinator>,
    /// Incremental fetch sessions (KIP-227).
    pub fetch_sessions: crate::fetch_session::FetchSessionCache,
    /// Host advertised to clients.
    pub advertised_host: String,
    /// Port advertised to clients.
    pub advertised_port: i32,
    /// Decides what each request's principal may do ([`crate::authorizer`]).
    pub authorizer: std::sync::Arc<dyn crate::authorizer::Authorizer>,
}

impl Broker {
    /// This broker's node id.
    #[must_use]
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }
}
