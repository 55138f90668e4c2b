//! Listeners as Kafka names them (`listeners`, `advertised.listeners`,
//! `listener.security.protocol.map`, `inter.broker.listener.name` /
//! `security.inter.broker.protocol`, `controller.listener.names`): Kafka's `EndPoint`,
//! `ListenerName` and `SecurityProtocol`, and the rules `KafkaConfig` checks them by.
//!
//! Why a model of its own: a broker answers every client with the addresses of the
//! listener the client connected on (Metadata, FindCoordinator, DescribeCluster), brokers
//! register every advertised listener, and replicas reach each other on the inter-broker
//! one. The Docker set-up this serves (containers reach the broker by service name, host
//! clients by `localhost`) is two listeners with different advertised hosts.
//!
//! The controller listener is not bound from here: a node with the controller role
//! listens for the quorum on its own `controller.quorum.voters` entry, so a `CONTROLLER`
//! entry of `listeners` (which Kafka configs always carry) is accepted and left to it.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

/// Kafka's `SecurityProtocol`, with its ids (the `security_protocol` of a registered
/// broker endpoint).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    /// No TLS, no authentication.
    Plaintext,
    /// TLS.
    Ssl,
    /// SASL over plain TCP.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's id of the protocol.
    #[must_use]
    pub fn id(self) -> i16 {
        match self {
            SecurityProtocol::Plaintext => 0,
            SecurityProtocol::Ssl => 1,
            SecurityProtocol::SaslPlaintext => 2,
            SecurityProtocol::SaslSsl => 3,
        }
    }

    /// Kafka's name of the protocol.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// The protocol named `name` (Kafka's names, any case).
    ///
    /// # Errors
    /// Not one of Kafka's four.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(SecurityProtocol::Plaintext),
            "SSL" => Ok(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Ok(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Ok(SecurityProtocol::SaslSsl),
            other => Err(format!(
                "unknown security protocol {other}: expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
            )),
        }
    }
}

/// A listener's name (Kafka's `ListenerName`): upper case, as Kafka normalises it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListenerName(Arc<str>);

impl ListenerName {
    /// `name`, normalised to upper case.
    #[must_use]
    pub fn new(name: &str) -> Self {
        ListenerName(Arc::from(name.trim().to_ascii_uppercase()))
    }

    /// The name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The prefix of this listener's own settings: `listener.name.<lower-case name>.`.
    #[must_use]
    pub fn config_prefix(&self) -> String {
        format!("listener.name.{}.", self.0.to_ascii_lowercase())
    }
}

/// A setting's name without Kafka's per-listener prefix `listener.name.<name>.` (the key
/// itself when it has none).
#[must_use]
pub fn without_listener_prefix(key: &str) -> &str {
    key.strip_prefix("listener.name.")
        .and_then(|rest| rest.split_once('.'))
        .map_or(key, |(_, setting)| setting)
}

impl fmt::Display for ListenerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One entry of `listeners` or `advertised.listeners` (Kafka's `EndPoint`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The listener's name.
    pub name: ListenerName,
    /// The host; empty: every interface (bound) or this machine's name (advertised).
    pub host: String,
    /// The port.
    pub port: u16,
    /// The listener's protocol, from `listener.security.protocol.map`.
    pub protocol: SecurityProtocol,
}

impl Endpoint {
    /// The address to bind: the host's IP (a name is resolved), every interface when empty.
    ///
    /// # Errors
    /// The host name cannot be resolved.
    pub fn bind_address(&self) -> Result<SocketAddr, String> {
        let host = if self.host.is_empty() {
            "0.0.0.0"
        } else {
            self.host.trim_matches(['[', ']'])
        };
        if let Ok(ip) = host.parse::<std::net::IpAddr>() {
            return Ok(SocketAddr::new(ip, self.port));
        }
        // A host name binds the address it resolves to, as Kafka's `InetSocketAddress`
        // does (IPv4 first, as the JVM prefers it).
        let resolved: Vec<SocketAddr> =
            std::net::ToSocketAddrs::to_socket_addrs(&(host, self.port))
                .map_err(|e| {
                    format!(
                        "listener {} binds {host}: cannot resolve it: {e}",
                        self.name
                    )
                })?
                .collect();
        resolved
            .iter()
            .find(|a| a.is_ipv4())
            .or_else(|| resolved.first())
            .copied()
            .ok_or_else(|| {
                format!(
                    "listener {} binds {host}: it resolves to no address",
                    self.name
                )
            })
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "{}://[{}]:{}", self.name, self.host, self.port)
        } else {
            write!(f, "{}://{}:{}", self.name, self.host, self.port)
        }
    }
}

/// Kafka's default `listener.security.protocol.map`: each protocol's own name.
pub const DEFAULT_PROTOCOL_MAP: &str =
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";

/// The listener settings as given (Kafka names), before they are checked together.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListenerSettings {
    /// `listeners`.
    pub listeners: Option<String>,
    /// `advertised.listeners`.
    pub advertised_listeners: Option<String>,
    /// `listener.security.protocol.map`.
    pub protocol_map: Option<String>,
    /// `inter.broker.listener.name`.
    pub inter_broker_listener_name: Option<String>,
    /// `security.inter.broker.protocol`.
    pub security_inter_broker_protocol: Option<String>,
    /// `controller.listener.names`.
    pub controller_listener_names: Option<String>,
}

/// The broker's listeners, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listeners {
    /// The client and inter-broker listeners to bind, in configured order.
    pub bound: Vec<Endpoint>,
    /// What each of them advertises, in the same order (controller listeners excluded).
    pub advertised: Vec<Endpoint>,
    /// The listener replicas fetch on.
    pub inter_broker: ListenerName,
    /// The controller listeners (bound by the quorum from `controller.quorum.voters`).
    pub controller: Vec<ListenerName>,
    /// The `listeners` entries of the controller listeners, with their protocols.
    pub controller_entries: Vec<Endpoint>,
    /// The security protocol of the first controller listener: what this node speaks to
    /// the quorum with (Kafka's `controller.listener.names` head), and what its own
    /// controller listener serves.
    pub controller_protocol: SecurityProtocol,
}

impl Listeners {
    /// One PLAINTEXT listener on `listen`, advertised as `advertised` (the `--listen` /
    /// `--advertised-listener` flags).
    #[must_use]
    pub fn single(listen: SocketAddr, advertised: (String, u16)) -> Self {
        let name = ListenerName::new("PLAINTEXT");
        Listeners {
            bound: vec![Endpoint {
                name: name.clone(),
                host: listen.ip().to_string(),
                port: listen.port(),
                protocol: SecurityProtocol::Plaintext,
            }],
            advertised: vec![Endpoint {
                name: name.clone(),
                host: advertised.0,
                port: advertised.1,
                protocol: SecurityProtocol::Plaintext,
            }],
            inter_broker: name,
            controller: vec![ListenerName::new("CONTROLLER")],
            controller_entries: Vec::new(),
            controller_protocol: SecurityProtocol::Plaintext,
        }
    }

    /// The endpoints this broker registers with the controller: every advertised
    /// listener, in order (Kafka's `BrokerRegistrationRequest.listeners`).
    #[must_use]
    pub fn registered_endpoints(&self) -> Vec<logbook_metadata::BrokerEndpoint> {
        self.advertised
            .iter()
            .map(|e| logbook_metadata::BrokerEndpoint {
                name: e.name.to_string(),
                host: e.host.clone(),
                port: e.port,
                security_protocol: e.protocol.id(),
            })
            .collect()
    }

    /// The advertised endpoint of listener `name`.
    #[must_use]
    pub fn advertised(&self, name: &ListenerName) -> Option<&Endpoint> {
        self.advertised.iter().find(|e| &e.name == name)
    }

    /// Checks Kafka's listener settings together, as `KafkaConfig` does.
    ///
    /// # Errors
    /// A message naming the setting and what is wrong; the broker must not start.
    pub fn resolve(settings: &ListenerSettings) -> Result<Self, String> {
        let map = protocol_map(
            settings
                .protocol_map
                .as_deref()
                .unwrap_or(DEFAULT_PROTOCOL_MAP),
        )?;
        let controller: Vec<ListenerName> = names(
            settings
                .controller_listener_names
                .as_deref()
                .unwrap_or("CONTROLLER"),
        );
        // Kafka: a controller listener missing from an explicit-less map is PLAINTEXT.
        let protocol_of = |name: &ListenerName| -> Result<SecurityProtocol, String> {
            match map.iter().find(|(n, _)| n == name) {
                Some((_, p)) => Ok(*p),
                None if settings.protocol_map.is_none() && controller.contains(name) => {
                    Ok(SecurityProtocol::Plaintext)
                }
                None => Err(format!(
                    "listener {name} has no security protocol: add {name}:<protocol> to listener.security.protocol.map"
                )),
            }
        };
        let all = endpoints(
            "listeners",
            settings.listeners.as_deref().unwrap_or("PLAINTEXT://:9092"),
            &protocol_of,
        )?;
        unique("listeners", &all, true)?;
        let (controller_entries, bound): (Vec<Endpoint>, Vec<Endpoint>) =
            all.into_iter().partition(|e| controller.contains(&e.name));
        let advertised = match settings.advertised_listeners.as_deref() {
            Some(value) => {
                let advertised = endpoints("advertised.listeners", value, &protocol_of)?;
                unique("advertised.listeners", &advertised, false)?;
                check_advertised(&advertised, &bound, &controller)?;
                advertised
            }
            None => bound.clone(),
        };
        let inter_broker = inter_broker(settings)?;
        // A node that binds no controller listener may leave it out of an explicit map:
        // it then speaks PLAINTEXT to the quorum.
        let controller_protocol = controller
            .first()
            .and_then(|name| protocol_of(name).ok())
            .unwrap_or(SecurityProtocol::Plaintext);
        let listeners = Listeners {
            bound,
            advertised,
            inter_broker,
            controller,
            controller_entries,
            controller_protocol,
        };
        listeners.check_inter_broker()?;
        Ok(listeners)
    }

    fn check_inter_broker(&self) -> Result<(), String> {
        if self.bound.is_empty() {
            return Ok(()); // A controller-only node.
        }
        if self.advertised.is_empty() {
            return Err("There must be at least one broker advertised listener. Perhaps all listeners appear in controller.listener.names?".into());
        }
        if self.advertised(&self.inter_broker).is_none() {
            return Err(format!(
                "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options based on currently configured listeners are {}",
                list(&self.advertised)
            ));
        }
        if self.controller.contains(&self.inter_broker) {
            return Err(format!(
                "inter.broker.listener.name {} must not be a controller listener",
                self.inter_broker
            ));
        }
        Ok(())
    }
}

/// `inter.broker.listener.name`, or the listener named after `security.inter.broker.protocol`
/// (default PLAINTEXT); Kafka refuses both together.
fn inter_broker(settings: &ListenerSettings) -> Result<ListenerName, String> {
    match (
        &settings.inter_broker_listener_name,
        &settings.security_inter_broker_protocol,
    ) {
        (Some(_), Some(_)) => Err(
            "only one of inter.broker.listener.name and security.inter.broker.protocol should be set"
                .into(),
        ),
        (Some(name), None) => Ok(ListenerName::new(name)),
        (None, Some(protocol)) => Ok(ListenerName::new(SecurityProtocol::parse(protocol)?.name())),
        (None, None) => Ok(ListenerName::new("PLAINTEXT")),
    }
}

/// This machine's host name (what Kafka advertises for a wildcard listener host): the
/// kernel's (in a container, the container's, which its network resolves); `localhost`
/// when it cannot be read.
#[must_use]
pub fn local_host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

fn names(value: &str) -> Vec<ListenerName> {
    value
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(ListenerName::new)
        .collect()
}

/// `NAME:PROTOCOL,...`.
fn protocol_map(value: &str) -> Result<Vec<(ListenerName, SecurityProtocol)>, String> {
    let mut map: Vec<(ListenerName, SecurityProtocol)> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, protocol) = entry.split_once(':').ok_or_else(|| {
            format!("listener.security.protocol.map entry {entry} is not NAME:PROTOCOL")
        })?;
        let name = ListenerName::new(name);
        if map.iter().any(|(n, _)| n == &name) {
            return Err(format!("listener.security.protocol.map names {name} twice"));
        }
        map.push((name, SecurityProtocol::parse(protocol)?));
    }
    Ok(map)
}

/// `NAME://host:port,...` (`[v6]` hosts allowed, an empty host kept empty).
fn endpoints(
    setting: &str,
    value: &str,
    protocol_of: &dyn Fn(&ListenerName) -> Result<SecurityProtocol, String>,
) -> Result<Vec<Endpoint>, String> {
    let mut out = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, address) = entry
            .split_once("://")
            .ok_or_else(|| format!("{setting} entry {entry} is not NAME://host:port"))?;
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| format!("{setting} entry {entry} has no port"))?;
        let port = port
            .parse::<u16>()
            .map_err(|_| format!("{setting} entry {entry} has no valid port"))?;
        let name = ListenerName::new(name);
        let protocol = protocol_of(&name)?;
        out.push(Endpoint {
            name,
            host: host.trim_matches(['[', ']']).to_string(),
            port,
            protocol,
        });
    }
    Ok(out)
}

/// Kafka: each listener name once; in `listeners`, each port once too, except that one
/// IPv4 and one IPv6 address may share a port.
fn unique(setting: &str, endpoints: &[Endpoint], ports: bool) -> Result<(), String> {
    for (i, e) in endpoints.iter().enumerate() {
        let earlier = &endpoints[..i];
        if earlier.iter().any(|o| o.name == e.name) {
            return Err(format!(
                "Each listener must have a different name, {setting}: {}",
                list_full(endpoints)
            ));
        }
        let sharing: Vec<&Endpoint> = earlier.iter().filter(|o| o.port == e.port).collect();
        let v4_and_v6 = |a: &Endpoint, b: &Endpoint| match (
            a.host.parse::<std::net::IpAddr>(),
            b.host.parse::<std::net::IpAddr>(),
        ) {
            (Ok(x), Ok(y)) => x.is_ipv4() != y.is_ipv4(),
            _ => false,
        };
        let allowed = match sharing[..] {
            [] => true,
            [other] => v4_and_v6(other, e),
            _ => false,
        };
        if ports && e.port != 0 && !allowed {
            return Err(format!(
                "Each listener must have a different port unless exactly one listener has an IPv4 address and the other IPv6 address, {setting}: {}",
                list_full(endpoints)
            ));
        }
    }
    Ok(())
}

fn list_full(endpoints: &[Endpoint]) -> String {
    endpoints
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Advertised listeners are bound ones, with a host clients can reach.
fn check_advertised(
    advertised: &[Endpoint],
    bound: &[Endpoint],
    controller: &[ListenerName],
) -> Result<(), String> {
    for e in advertised {
        if controller.contains(&e.name) {
            return Err(format!(
                "advertised.listeners must not contain the controller listener {}",
                e.name
            ));
        }
        if !bound.iter().any(|b| b.name == e.name) {
            return Err(format!(
                "advertised.listeners listener names must be equal to or a subset of the ones defined in listeners. Found {}. The valid options based on the current configuration are {}",
                e.name,
                list(bound)
            ));
        }
        if e.host == "0.0.0.0" {
            return Err(
                "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."
                    .into(),
            );
        }
    }
    Ok(())
}

fn list(endpoints: &[Endpoint]) -> String {
    endpoints
        .iter()
        .map(|e| e.name.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
