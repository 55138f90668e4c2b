//! The `logbook` command line: `serve` runs the broker (and is what runs with no
//! subcommand, so `cargo run --release` starts a broker); the other subcommands are the
//! admin tools of `logbook-cli`, which talk to a running broker over the Kafka protocol and
//! need nothing of this crate. Only what starts the broker is parsed here.

use clap::{Parser, Subcommand};

use crate::config::Config;

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

/// The subcommands: `serve`, then the tools.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the broker (the default).
    Serve(Box<Config>),
    /// Make a broker started with `--fault-injection` fail on cue: arm, list and clear
    /// faults (error codes, delays, dropped connections, unavailable partitions, forced
    /// rebalances, fenced producers).
    Fault(crate::fault_injector::cli::FaultArgs),
    /// A tool (`healthcheck`, `topic`, `group`, `produce`, `consume`, `cluster`), run by
    /// [`logbook_cli::run_tool`].
    #[command(flatten)]
    Tool(logbook_cli::Tool),
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
