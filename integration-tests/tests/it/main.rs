//! Integration tests: each test starts its own `logbook` broker (own port, own
//! data directory) and drives it with real Kafka clients over loopback.
//! One binary with a module per area, so the suite links once.

mod common;
mod wire;

mod acls;
mod admin_apis;
mod admin_topics;
mod answers;
mod bad_input;
mod cli_admin;
mod cli_records;
mod clients;
mod cluster_harness;
mod compaction;
mod compression;
mod configs;
mod connect;
mod connections;
mod delete_records;
mod describe_configs;
mod disk_full;
mod durability;
mod faults;
mod fetch_sessions;
mod groups;
mod inter_broker;
mod internal_topics;
mod kafka_tools;
mod large_messages;
mod librdkafka_security;
mod list_offsets;
mod listeners;
mod metadata;
mod metrics;
mod migration;
mod min_insync_replicas;
mod offset_for_leader_epoch;
mod poison_batches;
mod produce_consume;
mod python_client;
mod quotas;
mod replica_fetch;
mod retention;
mod sasl;
mod streams;
mod testcontainers;
mod tls;
mod topic_limits;
mod transactions;
mod wire_fuzz;
