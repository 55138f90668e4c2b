//! logbook-common: the few helpers every other crate needs and none should copy (Kafka's
//! `server-common` and `clients` utilities): the wall clock in Kafka's unit, the
//! crash-safe replacement of a small file, the name of a partition, and Kafka's JAAS
//! syntax (read by the broker's SASL listeners and the tools' `--command-config`). It depends on
//! nothing, so every crate, the controller's Raft layer included, may use it without
//! changing the layering.

pub mod durable_file; // write-temp, fsync, rename, fsync the directory
pub mod jaas; // Kafka's JAAS syntax (sasl.jaas.config, JAAS files), for the broker and clients
pub mod time; // milliseconds since the Unix epoch, as Kafka stamps records and state
pub mod topic_partition; // a topic name and partition index

pub use durable_file::{replace, replace_unsynced, sync_dir, TMP_SUFFIX};
pub use time::now_ms;
pub use topic_partition::TopicPartition;
