//! TLS and SASL on the controller listener, as `controller.listener.names` and
//! `listener.security.protocol.map` configure them.
//!
//! Outbound (Raft to the other voters, brokers to the active controller), a connection is
//! secured by logbook-client's `ConnectionSecurity` (the TLS handshake, then SaslHandshake
//! and SaslAuthenticate) before its first frame. Inbound, the listener hands each accepted
//! TCP connection to a [`ControllerAcceptor`]: the broker implements it with the same TLS
//! and SASL code its client listeners run, so this crate never sees a certificate or a
//! password, and an acceptor that refuses closes the connection before a single Raft or
//! controller frame is read.

use std::net::SocketAddr;
use std::sync::Arc;

use futures::future::BoxFuture;
use logbook_client::security::ConnectionSecurity;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A byte stream a controller connection runs on (TCP, or TLS around it).
pub trait ControllerIo: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> ControllerIo for T {}

/// An accepted connection after its listener's TLS and SASL.
pub type ControllerStream = Box<dyn ControllerIo>;

/// Secures the connections the controller listener accepts.
pub trait ControllerAcceptor: Send + Sync {
    /// Runs the listener's TLS handshake and SASL exchange on `stream` from `peer`;
    /// `Err` (with the reason, for the log) closes the connection. The caller bounds the
    /// time it may take.
    fn accept(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> BoxFuture<'static, Result<ControllerStream, String>>;
}

/// How a controller node secures its connections; PLAINTEXT both ways by default.
#[derive(Clone, Default)]
pub struct NetworkSecurity {
    /// How this node connects to the other voters (TLS trust, its SASL login).
    pub client: ConnectionSecurity,
    /// How its controller listener secures what it accepts; `None` is PLAINTEXT.
    pub acceptor: Option<Arc<dyn ControllerAcceptor>>,
}

impl std::fmt::Debug for NetworkSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetworkSecurity")
            .field("client", &self.client)
            .field("acceptor", &self.acceptor.is_some())
            .finish()
    }
}
