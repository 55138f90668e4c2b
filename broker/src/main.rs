//! The `logbook` binary: parse configuration, start the broker, stop cleanly on SIGTERM or
//! Ctrl-C.

use clap::Parser;
use logbook_broker::config::Config;

#[global_allocator]
static ALLOCATOR: logbook_broker::alloc::GuardedAllocator = logbook_broker::alloc::GuardedAllocator;

fn main() -> std::process::ExitCode {
    logbook_broker::alloc::tune_malloc();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // openraft logs every vote and membership step at info.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let mut config = Config::parse();
    let checked = config
        .apply_kafka_settings(std::env::vars())
        .and_then(|()| config.cluster().map(drop));
    if let Err(message) = checked {
        tracing::error!("{message}");
        eprintln!("logbook: {message}");
        return std::process::ExitCode::FAILURE;
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
