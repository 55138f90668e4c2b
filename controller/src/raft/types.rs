//! The types openraft is instantiated with: node ids are Kafka's `node.id`, a node is the
//! `host:port` of its `controller.quorum.voters` entry, and an entry is an opaque JSON
//! batch (next session: one `MetadataBatch`, applied atomically as KRaft's batches are).

use std::fmt;
use std::io::Cursor;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

openraft::declare_raft_types!(
    /// The controller quorum's openraft configuration.
    pub TypeConfig:
        D = Payload,
        R = (),
        NodeId = u64,
        Node = ControllerNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A voter's controller listener, as named in `controller.quorum.voters` (`id@host:port`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerNode {
    /// Host name or IP address the voter's controller listener is bound to.
    pub host: String,
    /// Port of the voter's controller listener.
    pub port: u16,
}

impl ControllerNode {
    /// A node at `host:port`.
    #[must_use]
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        Self {
            host: host.into(),
            port,
        }
    }

    /// The `host:port` string to dial or bind.
    #[must_use]
    pub fn address(&self) -> String {
        if self.host.contains(':') && !self.host.starts_with('[') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for ControllerNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.address())
    }
}

/// One Raft entry's application data: a JSON document the state machine decodes. Kept as
/// raw JSON text, so it is embedded in log frames and AppendEntries bodies as it is,
/// neither escaped nor re-parsed into a tree on the way.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Payload(Box<RawValue>);

impl Payload {
    /// Wraps a JSON document.
    ///
    /// # Errors
    /// The text is not one valid JSON value.
    pub fn from_json(json: String) -> Result<Self, serde_json::Error> {
        RawValue::from_string(json).map(Payload)
    }

    /// Serializes `value` to a payload.
    ///
    /// # Errors
    /// `value` cannot be serialized to JSON.
    pub fn encode<T: Serialize>(value: &T) -> Result<Self, serde_json::Error> {
        serde_json::value::to_raw_value(value).map(Payload)
    }

    /// The JSON text.
    #[must_use]
    pub fn json(&self) -> &str {
        self.0.get()
    }
}

impl PartialEq for Payload {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

impl Eq for Payload {}

impl fmt::Display for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.json())
    }
}
