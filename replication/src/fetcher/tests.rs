//! Tests of the fetcher against real `storage::Log`s: an in-process leader (`support`),
//! scenarios named after Kafka's cases (`scenarios`), and a proptest model of random
//! leader changes and truncations (`divergence_model`).

mod cluster;
mod divergence_model;
mod scenarios;
mod support;
