//! logbook-replication
