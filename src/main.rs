use std::process::ExitCode;

use clap::Parser;
use clusterstack::cli::{Cli, Command, run};

fn main() -> ExitCode {
    // A render worker (see `render::worker`) does one render and exits:
    // no runtime, no logging, no crypto provider.
    if std::env::args_os().nth(1).is_some_and(|a| a == clusterstack::render::worker::WORKER_ARG) {
        return clusterstack::render::worker::serve();
    }
    operator_main()
}

#[tokio::main]
async fn operator_main() -> ExitCode {
    clusterstack::install_crypto_provider();
    let cli = Cli::parse();
    cli.init_logging();
    // `diff` exits as `kubectl diff`: 1 means "differences", so an error is 2.
    let error_code = if matches!(cli.command, Command::Diff(_)) { ExitCode::from(2) } else { ExitCode::FAILURE };
    match run(cli).await {
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
