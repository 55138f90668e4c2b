//! Cluster settings as KRaft names them: `process.roles`, `controller.quorum.voters` and
//! `node.id`, parsed and checked together into a [`ClusterConfig`], so a node that would
//! join the wrong quorum (or none) refuses to start with a message saying why instead of
//! failing later in the Raft layer. No voters means the single node Logbook has always been.

use std::fmt;
use std::str::FromStr;

/// The roles of this node (`process.roles`): a broker serves clients, a controller is a
/// voter of the metadata quorum. Both together ("combined") is the default, as for small
/// KRaft clusters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessRoles {
    /// Serves Kafka clients on `--listen`.
    pub broker: bool,
    /// Votes in the controller quorum, listening on its own `controller.quorum.voters` entry.
    pub controller: bool,
}

impl ProcessRoles {
    /// `broker,controller`, the default.
    pub const COMBINED: ProcessRoles = ProcessRoles {
        broker: true,
        controller: true,
    };
}

impl Default for ProcessRoles {
    fn default() -> Self {
        ProcessRoles::COMBINED
    }
}

impl FromStr for ProcessRoles {
    type Err = String;

    /// Parses Kafka's list: `broker`, `controller` or both, comma-separated, each once.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let mut roles = ProcessRoles {
            broker: false,
            controller: false,
        };
        for role in value.split(',').map(str::trim) {
            let seen = match role {
                "broker" => std::mem::replace(&mut roles.broker, true),
                "controller" => std::mem::replace(&mut roles.controller, true),
                "" => return Err("process.roles needs at least one of broker, controller; empty entries are not allowed".into()),
                other => {
                    return Err(format!(
                        "unknown process role '{other}' (allowed: broker, controller)"
                    ))
                }
            };
            if seen {
                return Err(format!("duplicate role '{role}' in process.roles"));
            }
        }
        Ok(roles)
    }
}

impl fmt::Display for ProcessRoles {
    /// Kafka's spelling, broker first: `broker,controller`, `broker` or `controller`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.broker, self.controller) {
            (true, true) => f.write_str("broker,controller"),
            (true, false) => f.write_str("broker"),
            (false, true) => f.write_str("controller"),
            (false, false) => Ok(()),
        }
    }
}

/// One entry of `controller.quorum.voters`: `id@host:port`. The host is kept as written
/// (a name or an address; IPv6 in brackets) and resolved by whoever dials it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuorumVoter {
    /// The voter's `node.id`.
    pub node_id: i32,
    /// Host its controller listener is reached at, without brackets.
    pub host: String,
    /// Port of its controller listener.
    pub port: u16,
}

impl QuorumVoter {
    /// `host:port`, with brackets around an IPv6 host, for dialling or binding.
    #[must_use]
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for QuorumVoter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.node_id, self.address())
    }
}

impl FromStr for QuorumVoter {
    type Err = String;

    fn from_str(entry: &str) -> Result<Self, Self::Err> {
        let entry = entry.trim();
        let bad = |why: &str| format!("voter '{entry}' is not id@host:port: {why}");
        let (id, address) = entry.split_once('@').ok_or_else(|| bad("no '@'"))?;
        let node_id: i32 = id
            .trim()
            .parse()
            .map_err(|_| bad("the id is not an integer"))?;
        if node_id < 0 {
            return Err(bad("the id is negative"));
        }
        let (host, port) = address.rsplit_once(':').ok_or_else(|| bad("no ':port'"))?;
        let host = match host.strip_prefix('[') {
            Some(inner) => inner
                .strip_suffix(']')
                .ok_or_else(|| bad("unclosed '[' around an IPv6 host"))?,
            None if host.contains(':') => {
                return Err(bad("an IPv6 host must be written in brackets, [::1]:9093"))
            }
            None => host,
        };
        if host.is_empty()
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':' | '%'))
        {
            return Err(bad(
                "the host is empty or has characters a host name cannot",
            ));
        }
        // A voter's address is dialled by the other voters, so it must name one machine
        // (Kafka refuses 0.0.0.0 in controller.quorum.voters too).
        if host == "0.0.0.0" || host == "::" {
            return Err(bad(
                "the host is a wildcard address, which other voters cannot dial",
            ));
        }
        let port: u16 = port
            .trim()
            .parse()
            .map_err(|_| bad("the port is not a number from 1 to 65535"))?;
        if port == 0 {
            return Err(bad("the port is 0"));
        }
        Ok(QuorumVoter {
            node_id,
            host: host.to_string(),
            port,
        })
    }
}

/// `controller.quorum.voters`: the static voter set, in the order given. Empty (the
/// default) means no quorum: a single node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuorumVoters(pub Vec<QuorumVoter>);

impl FromStr for QuorumVoters {
    type Err = String;

    /// Parses `1@host:port,2@host:port,…`; duplicate ids are refused here, since the
    /// rest of the system may look a voter up by id.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let value = value.trim();
        if value.is_empty() {
            return Ok(QuorumVoters::default());
        }
        let mut voters: Vec<QuorumVoter> = Vec::new();
        for entry in value.split(',') {
            let voter: QuorumVoter = entry.parse()?;
            if let Some(first) = voters.iter().find(|v| v.node_id == voter.node_id) {
                return Err(format!(
                    "duplicate voter id {} in controller.quorum.voters ({first} and {voter})",
                    voter.node_id
                ));
            }
            voters.push(voter);
        }
        Ok(QuorumVoters(voters))
    }
}

impl fmt::Display for QuorumVoters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, voter) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{voter}")?;
        }
        Ok(())
    }
}

/// The checked cluster settings of this node.
///
/// Invariants (checked by [`ClusterConfig::new`], as Kafka's `KafkaConfig` checks them):
/// with voters, a node with the controller role is one of them and a broker-only node is
/// not; without voters the node has both roles (a single node needs a broker to serve and
/// a controller to own its metadata).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// This node's id (`node.id`).
    pub node_id: i32,
    /// What this node does.
    pub roles: ProcessRoles,
    /// The static quorum; empty on a single node.
    pub voters: Vec<QuorumVoter>,
    /// This node's own voter entry, where its controller listener binds: `Some` exactly
    /// when it has the controller role and voters are configured.
    pub controller_address: Option<QuorumVoter>,
}

impl ClusterConfig {
    /// Checks the three settings together.
    ///
    /// # Errors
    /// A message naming the settings and values that disagree.
    pub fn new(
        node_id: i32,
        roles: ProcessRoles,
        voters: QuorumVoters,
    ) -> Result<ClusterConfig, String> {
        let QuorumVoters(voters) = voters;
        if !roles.broker && !roles.controller {
            return Err("process.roles is empty: give broker, controller or both".into());
        }
        let listed = voters
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let own = voters.iter().find(|v| v.node_id == node_id).cloned();
        if voters.is_empty() {
            if roles != ProcessRoles::COMBINED {
                return Err(format!(
                    "process.roles={roles} needs controller.quorum.voters: without voters this node is a \
                     single node, which has both roles (process.roles=broker,controller)"
                ));
            }
        } else if roles.controller && own.is_none() {
            return Err(format!(
                "process.roles={roles} contains the controller role, so node.id {node_id} must be one of \
                 controller.quorum.voters={listed}"
            ));
        } else if !roles.controller && own.is_some() {
            return Err(format!(
                "process.roles=broker: node.id {node_id} must not be one of controller.quorum.voters={listed} \
                 (a voter needs the controller role)"
            ));
        }
        let controller_address = if roles.controller { own } else { None };
        Ok(ClusterConfig {
            node_id,
            roles,
            voters,
            controller_address,
        })
    }

    /// True with no quorum configured: the node runs alone, exactly as before clustering.
    #[must_use]
    pub fn is_single_node(&self) -> bool {
        self.voters.is_empty()
    }
}

#[cfg(test)]
mod tests;
