//! logbook-protocol
