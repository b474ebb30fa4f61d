use std::process::ExitCode;

use clap::Parser;
use clusterstack::cli::{Cli, Command, run};

fn main() -> ExitCode {
    // A render worker (see `render::worker`) does one render and exits:
    // no runtime, no logging, no crypto provider.
    if std::env::args_os().nth(1).is_some_and(|a| a == clusterstack::render::worker::WORKER_ARG) {
        return clusterstack::render::worker::serve();
    }
    clusterstack::install_crypto_provider();
    let cli = Cli::parse();
    cli.init_logging();
    // `diff` exits as `kubectl diff`: 1 means "differences", so an error is 2.
    let error_code = if matches!(cli.command, Command::Diff(_)) { ExitCode::from(2) } else { ExitCode::FAILURE };
    // The operator's controllers run on every core. A command does one thing at a time (its
    // blocking work goes to tokio's blocking pool either way) and starts sooner without worker
    // threads to spawn: it is run per chart in scripts and CI.
    let runtime = match cli.command {
        Command::Operator(_) => tokio::runtime::Builder::new_multi_thread(),
        _ => tokio::runtime::Builder::new_current_thread(),
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return error_code;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(false) => ExitCode::SUCCESS,
        Ok(true) => ExitCode::from(1),
        Err(err) => {
            // One readable line per cause, outermost first.
            eprintln!("error: {err}");
            let mut source = std::error::Error::source(&err);
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            error_code
        }
    }
}
