//! The `logbook` binary: parse the command line; run the broker (stopping cleanly on SIGTERM
//! or Ctrl-C) or one of the tools (`logbook-cli`).

use clap::Parser;
use logbook_broker::cli::{Cli, Command};
use logbook_broker::config::{Config, LogFormat};

#[global_allocator]
static ALLOCATOR: logbook_broker::alloc::GuardedAllocator = logbook_broker::alloc::GuardedAllocator;

fn main() -> std::process::ExitCode {
    logbook_broker::alloc::tune_malloc();
    let config = match Cli::parse().into_command() {
        Command::Serve(config) => *config,
        Command::Tool(tool) => return std::process::ExitCode::from(logbook_cli::run_tool(tool)),
        Command::Fault(args) => {
            return std::process::ExitCode::from(logbook_broker::fault_injector::cli::run(&args))
        }
    };
    let config = match serve_config(config) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("logbook: {message}");
            return std::process::ExitCode::FAILURE;
        }
    };
    init_logging(config.log_format);
    for setting in &config.ignored {
        tracing::warn!(
            setting,
            "ignored: a JVM broker's thread or socket buffer tuning, which Logbook does not have"
        );
    }
    for variable in &config.ignored_env {
        tracing::warn!(
            variable,
            "ignored: a KAFKA_* environment variable that names no broker config"
        );
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(logbook_broker::server::run(config));
    // Tasks still waiting on peers that are gone must not hold the exit: the logs are
    // closed by now.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "broker stopped with an error");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The broker's configuration, every source layered: defaults < `--config` file <
/// `LOGBOOK_*` < flags < `KAFKA_*` < `--override`; then checked as a whole.
fn serve_config(config: Config) -> Result<Config, String> {
    let given = Cli::given_args(std::env::args_os()).map_err(|e| e.to_string())?;
    let mut config = config.layer_config_file(&given)?;
    config.apply_kafka_settings(std::env::vars())?;
    config.cluster()?;
    Ok(config)
}

/// Logs to stderr, as text (coloured on a terminal) or as JSON lines; `RUST_LOG` filters,
/// and the filter can be rebuilt at run time (broker loggers, `logging_controller`).
fn init_logging(format: LogFormat) {
    use logbook_broker::logging_controller::{self, DEFAULT_DIRECTIVES};
    use tracing_subscriber::EnvFilter;
    let directives = std::env::var(EnvFilter::DEFAULT_ENV)
        .ok()
        .filter(|d| EnvFilter::try_new(d).is_ok())
        .unwrap_or_else(|| DEFAULT_DIRECTIVES.to_owned());
    let reload_with = |handle: Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>| {
        logging_controller::install(
            &directives,
            Box::new(move |d: &str| handle(EnvFilter::try_new(d).map_err(|e| e.to_string())?)),
        );
    };
    match format {
        LogFormat::Text => {
            let builder = tracing_subscriber::fmt()
                .with_env_filter(EnvFilter::new(&directives))
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            reload_with(Box::new(move |f| {
                handle.reload(f).map_err(|e| e.to_string())
            }));
        }
        LogFormat::Json => {
            let builder = tracing_subscriber::fmt()
                .json()
                .with_env_filter(EnvFilter::new(&directives))
                .with_writer(std::io::stderr)
                .with_filter_reloading();
            let handle = builder.reload_handle();
            builder.init();
            reload_with(Box::new(move |f| {
                handle.reload(f).map_err(|e| e.to_string())
            }));
        }
    }
}
