//! logbook-storage
