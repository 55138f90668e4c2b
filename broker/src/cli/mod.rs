//! The `logbook` command line: `serve` runs the broker (and is what runs with no
//! subcommand, so `cargo run --release` starts a broker); the other subcommands are tools
//! that talk to a running broker over the Kafka protocol, any Kafka-compatible one (as
//! Redpanda's `rpk` does).
//!
//! Tools print human tables by default and JSON with `--json`; they exit 0 on success,
//! 1 when the broker refused or the operation failed (a missing topic or group, a Kafka
//! error code), 2 on bad usage, 3 when no broker could be reached.

/// `println!` for the tools' output: a closed stdout (`logbook group list | head`) ends the
/// tool quietly with status 0, as Unix tools end, where `println!` would panic.
macro_rules! outln {
    () => {
        $crate::cli::output::write_line("")
    };
    ($($arg:tt)*) => {
        $crate::cli::output::write_line(&format!($($arg)*))
    };
}

pub mod client;
mod cluster;
mod consume;
mod group;
mod healthcheck;
mod output;
mod produce;
mod topic;

use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::config::Config;
use client::{CliError, KafkaClient};

pub use healthcheck::{run as healthcheck, HealthcheckArgs};

/// Everything `logbook` accepts: a subcommand, or the broker's own flags.
#[derive(Debug, Parser)]
#[command(
    name = "logbook",
    version,
    about = "A Kafka-protocol broker, and tools to run it",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to do; without one, `serve`.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The broker's flags when no subcommand is named.
    #[command(flatten)]
    pub serve: Config,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the broker (the default).
    Serve(Box<Config>),
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
}

impl Connection {
    /// A client for these brokers.
    ///
    /// # Errors
    /// A bootstrap address is malformed.
    pub fn client(&self) -> Result<KafkaClient, CliError> {
        KafkaClient::new(
            &self.bootstrap_server,
            Duration::from_millis(self.request_timeout_ms),
        )
    }
}

impl Cli {
    /// The subcommand to run: `serve` with the top-level flags when none was named.
    pub fn into_command(self) -> Command {
        self.command
            .unwrap_or_else(|| Command::Serve(Box::new(self.serve)))
    }

    /// `argv` parsed with every default removed: the matches hold exactly the flags and
    /// `LOGBOOK_*` variables that were given, which is what a `--config` file must not
    /// override ([`Config::layer_config_file`]). The matches are the `serve` subcommand's
    /// when it was named, else the top level's.
    ///
    /// # Errors
    /// `argv` does not parse (it parsed once already with the defaults, so it will not).
    pub fn given_args(
        argv: impl IntoIterator<Item = std::ffi::OsString>,
    ) -> Result<clap::ArgMatches, clap::Error> {
        use clap::CommandFactory;
        let no_default = |arg: clap::Arg| arg.default_value(None::<&str>);
        let command = Cli::command()
            .mut_args(no_default)
            .mut_subcommand("serve", |serve| serve.mut_args(no_default));
        let matches = command.try_get_matches_from(argv)?;
        Ok(match matches.subcommand_matches("serve") {
            Some(serve) => serve.clone(),
            None => matches,
        })
    }
}

/// Runs a tool subcommand to its end; returns the process exit status. (`serve` and
/// `healthcheck` are run by `main`.)
#[must_use]
pub fn run_tool(command: Command) -> u8 {
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
        match command {
            Command::Topic(args) => topic::run(args).await,
            Command::Group(args) => group::run(args).await,
            Command::Produce(args) => produce::run(args).await,
            Command::Consume(args) => consume::run(args).await,
            Command::Cluster(args) => cluster::run(args).await,
            Command::Serve(_) | Command::Healthcheck(_) => Ok(()),
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
