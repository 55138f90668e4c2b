//! The Logbook broker: listeners, connections, one handler per Kafka API, topic metadata.
//!
//! Partition data is reached only through `logbook_replication`, so the high-watermark rules
//! cannot be bypassed; Kafka error codes are chosen only in `errors`.

pub mod alloc;
pub mod alter_partition_manager;
pub mod authorizer;
pub mod broker;
pub mod broker_config;
pub mod channel_builders;
pub mod cli;
pub mod client_quota_manager;
pub mod client_request_quota;
pub mod cluster;
pub mod config;
pub mod config_def;
pub mod connection;
pub mod connection_quotas;
/// The coordinators live in their own crate (`logbook-coordinator`); the broker names them
/// `crate::coordinator` as before.
pub use logbook_coordinator as coordinator;
pub mod coordinator_partition_writer;
pub mod errors;
pub mod fault_injector;
pub mod fetch_session;
pub mod handlers;
pub mod listeners;
pub mod logging_controller;
pub mod metrics;
pub mod partition_budget;
pub mod records;
pub mod sasl;
pub mod server;
pub mod ssl;
pub mod topic_config;
pub mod topics;
pub mod transport;
