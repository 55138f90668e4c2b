//! Test harness shared by the integration tests.
