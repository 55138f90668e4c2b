//! The controller's network: a listener on this voter's `controller.quorum.voters`
//! address, apart from the client listener, and one pooled connection per peer.
//!
//! Frames are Kafka's: a 4-byte length, then a request header v1 (api key, api version,
//! correlation id, client id) or a response header v0 (correlation id), then the body.
//! Raft's messages use private api keys with openraft's serde-JSON bodies; brokers'
//! requests to the active controller use one more private key, sent by the
//! `ControllerClient` and answered through the `server::ControllerRpc` trait
//! (`controller_rpc` implements it for the QuorumController), so this layer stays free of
//! the metadata model.

pub mod frame; // request/response headers and the private api keys
pub mod peer; // PeerPool: one connection per peer, reconnect with backoff; RaftNetwork
pub mod security; // TLS and SASL of the controller listener: client side, ControllerAcceptor
pub mod server; // the controller listener: decode, dispatch to Raft, answer
