//! The admin tools of `logbook`: `topic`, `group`, `produce`, `consume`, `cluster`, `user` and
//! `healthcheck`, which talk to a running broker over the Kafka protocol, any
//! Kafka-compatible one (as Redpanda's `rpk` does). The `logbook` binary offers them as
//! subcommands beside `serve`; this crate knows nothing of the broker, only of the protocol,
//! through `logbook-client`.
//!
//! Tools print human tables by default and JSON with `--json`; they exit 0 on success,
//! 1 when the broker refused or the operation failed (a missing topic or group, a Kafka
//! error code), 2 on bad usage, 3 when no broker could be reached.

/// `println!` for the tools' output: a closed stdout (`logbook group list | head`) ends the
/// tool quietly with status 0, as Unix tools end, where `println!` would panic.
macro_rules! outln {
    () => {
        $crate::output::write_line("")
    };
    ($($arg:tt)*) => {
        $crate::output::write_line(&format!($($arg)*))
    };
}

mod acl;
pub mod client;
mod cluster;
mod command_config;
mod consume;
mod group;
mod healthcheck;
mod output;
mod produce;
mod topic;
mod user;

use std::time::Duration;

use clap::Subcommand;

use client::{CliError, KafkaClient};

pub use healthcheck::{run as healthcheck, HealthcheckArgs};

/// The tool subcommands; `logbook`'s command line flattens them in beside `serve`.
#[derive(Debug, Subcommand)]
pub enum Tool {
    /// Exit 0 if the broker listening here answers ApiVersions, 1 otherwise: Docker's
    /// HEALTHCHECK, which must not need tools the image does not carry.
    Healthcheck(HealthcheckArgs),
    /// Create, list, describe, delete and change topics.
    Topic(topic::TopicArgs),
    /// List, describe and delete consumer groups, and reset their offsets.
    Group(group::GroupArgs),
    /// Write records from standard input or a file, one per line.
    Produce(produce::ProduceArgs),
    /// Read records and print them, as text or JSON lines.
    Consume(consume::ConsumeArgs),
    /// The cluster: its id, controller and brokers.
    Cluster(cluster::ClusterArgs),
    /// SCRAM users: list, add, delete (as kafka-configs.sh --entity-type users).
    User(user::UserArgs),
    /// ACLs: list, add, remove (as kafka-acls.sh).
    Acl(acl::AclArgs),
}

/// How the tools reach the cluster and print; every tool subcommand takes these.
#[derive(Clone, Debug, clap::Args)]
pub struct Connection {
    /// Brokers to bootstrap from, `HOST:PORT[,HOST:PORT…]`.
    #[arg(
        short = 'b',
        long = "bootstrap-server",
        env = "LOGBOOK_BOOTSTRAP_SERVER",
        default_value = "127.0.0.1:9092",
        global = true
    )]
    pub bootstrap_server: String,
    /// Print JSON instead of tables (one object, or one per line for streams).
    #[arg(long, global = true)]
    pub json: bool,
    /// Longest wait for any one answer from a broker, in milliseconds.
    #[arg(long, default_value_t = 10_000, global = true)]
    pub request_timeout_ms: u64,
    /// Client security settings in Kafka's client properties format (`security.protocol`,
    /// `sasl.mechanism`, `sasl.jaas.config`, `ssl.truststore.location`, …), as Kafka's
    /// tools take them.
    #[arg(long, global = true, value_name = "FILE")]
    pub command_config: Option<String>,
}

impl Connection {
    /// A client for these brokers.
    ///
    /// # Errors
    /// A bootstrap address is malformed, or the command config cannot be used.
    pub fn client(&self) -> Result<KafkaClient, CliError> {
        let security = match &self.command_config {
            Some(path) => command_config::security(&command_config::read_properties(path)?)?,
            None => logbook_client::security::ConnectionSecurity::default(),
        };
        KafkaClient::new(
            &self.bootstrap_server,
            Duration::from_millis(self.request_timeout_ms),
            security,
        )
    }
}

/// Runs a tool to its end and returns the process exit status; errors go to stderr.
/// `healthcheck` exits 1 whatever failed (Docker reads only zero or not); the other tools
/// exit as the crate docs say.
#[must_use]
pub fn run_tool(tool: Tool) -> u8 {
    if let Tool::Healthcheck(args) = &tool {
        return match healthcheck(args) {
            Ok(()) => 0,
            Err(message) => {
                eprintln!("logbook healthcheck: {message}");
                1
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("logbook: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let result = runtime.block_on(async {
        match tool {
            Tool::Topic(args) => topic::run(args).await,
            Tool::Group(args) => group::run(args).await,
            Tool::Produce(args) => produce::run(args).await,
            Tool::Consume(args) => consume::run(args).await,
            Tool::Cluster(args) => cluster::run(args).await,
            Tool::User(args) => user::run(args).await,
            Tool::Acl(args) => acl::run(args).await,
            // Answered above, on its own runtime.
            Tool::Healthcheck(_) => Ok(()),
        }
    });
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("logbook: {e}");
            e.exit_code()
        }
    }
}
