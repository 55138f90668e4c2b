//! The `logbook` command line: `serve` runs the broker (and is what runs with no
//! subcommand, so `cargo run --release` starts a broker); the other subcommands are tools
//! that talk to a running broker over the Kafka protocol.

mod healthcheck;

use clap::{Parser, Subcommand};

use crate::config::Config;

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
}

impl Cli {
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

    /// The broker configuration to serve with, or `None` for a tool subcommand.
    pub fn into_command(self) -> Command {
        self.command
            .unwrap_or_else(|| Command::Serve(Box::new(self.serve)))
    }
}
