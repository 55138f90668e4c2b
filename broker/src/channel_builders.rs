//! The security of the connections a node opens to other nodes, and of its controller
//! listener (Kafka's `ChannelBuilders`): replica fetchers and transaction markers connect
//! to the inter-broker listener (`inter.broker.listener.name`), Raft and the broker's
//! heartbeats to the first of `controller.listener.names`, each secured as that listener's
//! protocol says, with that listener's own settings (`listener.name.<l>.ssl.truststore.*`,
//! its keystore for `ssl.client.auth`, the JAAS `username` / `password` of
//! `sasl.mechanism.inter.broker.protocol` / `sasl.mechanism.controller.protocol`).
//!
//! The controller listener speaks Kafka framing with private API keys, so its SASL
//! exchange is Kafka's (SaslHandshake, SaslAuthenticate) run by the same
//! [`Authenticator`] as the client listeners, before the first Raft or controller frame;
//! a connection that fails it is answered SASL_AUTHENTICATION_FAILED and closed.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use futures::future::BoxFuture;
use kafka_protocol::messages::ApiKey;
use logbook_client::security::ConnectionSecurity;
use logbook_controller::net::security::{ControllerAcceptor, ControllerStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::authorizer::{
    AclOperation, Action, Authorizer, KafkaPrincipal, RequestIdentity, ResourceType, CLUSTER_NAME,
};
use crate::connection::ListenerSecurity;
use crate::listeners::{ListenerName, Listeners, SecurityProtocol};
use crate::sasl::{Answer, Authenticator, Step};

/// How this node connects to listener `name` of another node, which speaks `protocol`;
/// a SASL login uses the mechanism named by `mechanism_setting`.
///
/// # Errors
/// The listener's TLS client settings or its login cannot be served (the message names
/// the setting).
pub fn outbound_security(
    name: &ListenerName,
    protocol: SecurityProtocol,
    settings: &BTreeMap<String, String>,
    mechanism_setting: &str,
) -> Result<ConnectionSecurity, String> {
    let in_listener = |e: String| format!("connecting to listener {name}: {e}");
    let tls = match protocol {
        SecurityProtocol::Ssl | SecurityProtocol::SaslSsl => {
            Some(crate::ssl::client_config(name, settings).map_err(in_listener)?)
        }
        SecurityProtocol::Plaintext | SecurityProtocol::SaslPlaintext => None,
    };
    let sasl = match protocol {
        SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl => {
            let jaas_file = crate::sasl::jaas_file_from_env();
            Some(
                crate::sasl::client_login(name, settings, mechanism_setting, jaas_file.as_deref())
                    .map_err(in_listener)?,
            )
        }
        SecurityProtocol::Plaintext | SecurityProtocol::Ssl => None,
    };
    Ok(ConnectionSecurity { tls, sasl })
}

/// How replica fetchers and transaction markers connect to other brokers.
///
/// # Errors
/// As [`outbound_security`].
pub fn inter_broker_security(
    listeners: &Listeners,
    settings: &BTreeMap<String, String>,
) -> Result<ConnectionSecurity, String> {
    let protocol = listeners
        .advertised(&listeners.inter_broker)
        .map_or(SecurityProtocol::Plaintext, |e| e.protocol);
    outbound_security(
        &listeners.inter_broker,
        protocol,
        settings,
        "sasl.mechanism.inter.broker.protocol",
    )
}

/// How Raft and the broker's controller calls connect to the quorum.
///
/// # Errors
/// As [`outbound_security`].
pub fn controller_security(
    listeners: &Listeners,
    settings: &BTreeMap<String, String>,
) -> Result<ConnectionSecurity, String> {
    let name = listeners
        .controller
        .first()
        .cloned()
        .unwrap_or_else(|| ListenerName::new("CONTROLLER"));
    outbound_security(
        &name,
        listeners.controller_protocol,
        settings,
        "sasl.mechanism.controller.protocol",
    )
}

/// The controller listener's TLS handshake and SASL exchange, and the authorization of
/// the principal they end with: with an authorizer (`authorizer.class.name`), a peer needs
/// CLUSTER_ACTION on the cluster, as Kafka's `ControllerApis` asks of every controller
/// request (so a super user, or a principal granted it; on PLAINTEXT that principal is
/// `User:ANONYMOUS`, as in Kafka). Checked once per connection, before its first frame.
pub struct ControllerListenerAcceptor {
    security: ListenerSecurity,
    authorizer: Option<Arc<dyn Authorizer>>,
    listener: ListenerName,
}

impl ControllerListenerAcceptor {
    /// An acceptor with the controller listener's `security` and `authorizer`; `None`
    /// when there is nothing to do (PLAINTEXT and everyone allowed).
    #[must_use]
    pub fn new(
        security: ListenerSecurity,
        authorizer: Option<Arc<dyn Authorizer>>,
        listener: ListenerName,
    ) -> Option<Arc<dyn ControllerAcceptor>> {
        if security.tls.is_none() && security.sasl.is_none() && authorizer.is_none() {
            return None;
        }
        Some(Arc::new(ControllerListenerAcceptor {
            security,
            authorizer,
            listener,
        }))
    }
}

impl ControllerAcceptor for ControllerListenerAcceptor {
    fn accept(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> BoxFuture<'static, Result<ControllerStream, String>> {
        let security = self.security.clone();
        let authorizer = self.authorizer.clone();
        let listener = self.listener.clone();
        Box::pin(async move {
            let (mut stream, mut principal): (ControllerStream, _) = match &security.tls {
                None => (Box::new(stream), crate::handlers::anonymous()),
                Some((acceptor, mapper)) => {
                    let tls = acceptor
                        .accept(stream)
                        .await
                        .map_err(|e| format!("TLS handshake: {e}"))?;
                    let principal =
                        crate::connection::certificate_principal(tls.get_ref().1, mapper, peer)
                            .ok_or("no principal for the client certificate")?;
                    (Box::new(tls), principal)
                }
            };
            if let Some(sasl) = security.sasl {
                principal = authenticate(&mut stream, Authenticator::new(sasl, peer)).await?;
            }
            if let Some(authorizer) = authorizer {
                let identity = RequestIdentity {
                    principal: &principal,
                    client_address: peer,
                    listener_name: listener.as_str(),
                    api_key: ApiKey::Vote,
                };
                let action = Action {
                    operation: AclOperation::ClusterAction,
                    resource_type: ResourceType::Cluster,
                    name: CLUSTER_NAME,
                    log_if_denied: true,
                    log_if_allowed: true,
                };
                if !authorizer.authorize(&identity, &action) {
                    return Err(format!(
                        "{principal} may not CLUSTER_ACTION on the cluster (needed on the controller listener)"
                    ));
                }
            }
            Ok(stream)
        })
    }
}

/// Runs the SASL exchange on `stream` until `auth` has authenticated it. Nothing but
/// SaslHandshake and SaslAuthenticate is served before that (a node's own client sends
/// nothing else), and a frame over `sasl.server.max.receive.size` closes the connection.
async fn authenticate(
    stream: &mut ControllerStream,
    mut auth: Authenticator,
) -> Result<Arc<KafkaPrincipal>, String> {
    let table = |key| crate::handlers::supported_at(key, 0);
    loop {
        let size = stream
            .read_u32()
            .await
            .map_err(|e| format!("SASL exchange: {e}"))?;
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        if size > auth.max_receive() {
            return Err(format!(
                "a {size}-byte frame before authentication (sasl.server.max.receive.size {})",
                auth.max_receive()
            ));
        }
        let mut frame = vec![0u8; size];
        stream
            .read_exact(&mut frame)
            .await
            .map_err(|e| format!("SASL exchange: {e}"))?;
        match auth.on_frame(&Bytes::from(frame), &table) {
            Step::Serve(_) => {
                return Err("a request before SASL authentication".to_string());
            }
            Step::Close => return Err("closed during the SASL exchange".to_string()),
            Step::Answer { answer, close } => {
                let mut out = BytesMut::new();
                match answer {
                    Answer::Token(token) => {
                        out.put_u32(u32::try_from(token.len()).unwrap_or(u32::MAX));
                        out.put_slice(&token);
                    }
                    Answer::Response {
                        api_key,
                        api_version,
                        correlation_id,
                        body,
                        delay,
                    } => {
                        if !delay.is_zero() {
                            tokio::time::sleep(delay).await;
                        }
                        logbook_protocol::encode_response(
                            &mut out,
                            api_key,
                            api_version,
                            correlation_id,
                            &body,
                        )?;
                    }
                }
                stream
                    .write_all(&out)
                    .await
                    .map_err(|e| format!("SASL exchange: {e}"))?;
                if close {
                    return Err("SASL authentication failed".to_string());
                }
                if let Some(principal) = auth.principal().filter(|_| auth.is_authenticated()) {
                    return Ok(principal);
                }
            }
        }
    }
}
