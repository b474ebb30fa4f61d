use std::process::ExitCode;

use clap::Parser;
use clusterstack::cli::{Cli, Command, run};

#[tokio::main]
async fn main() -> ExitCode {
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
