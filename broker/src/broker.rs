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
    /// The listeners this broker serves and what each advertises.
    pub listeners: crate::listeners::Listeners,
    /// Decides what each request's principal may do ([`crate::authorizer`]).
    pub authorizer: std::sync::Arc<dyn crate::authorizer::Authorizer>,
    /// Produce and fetch byte rates against the client quotas.
    pub quotas: crate::client_quota_manager::QuotaManagers,
    /// The fault injector, when the broker started with `--fault-injection` (never
    /// otherwise).
    pub faults: Option<std::sync::Arc<crate::fault_injector::FaultInjector>>,
}

impl Broker {
    /// This broker's node id.
    #[must_use]
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }

    /// This broker as clients of `listener` reach it (host and port it advertises there).
    #[must_use]
    pub fn this_broker(
        &self,
        listener: &crate::listeners::ListenerName,
    ) -> Option<crate::cluster::views::BrokerView> {
        let endpoint = self.listeners.advertised(listener)?;
        Some(crate::cluster::views::BrokerView {
            node_id: self.node_id(),
            host: endpoint.host.clone(),
            port: i32::from(endpoint.port),
            rack: None,
        })
    }
}
