use std::process::ExitCode;

use clap::Parser;
use clusterstack::cli::{Cli, run};

#[tokio::main]
async fn main() -> ExitCode {
    clusterstack::install_crypto_provider();
    let cli = Cli::parse();
    cli.init_logging();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // One readable line per cause, outermost first.
            eprintln!("error: {err}");
            let mut source = std::error::Error::source(&err);
            while let Some(cause) = source {
                eprintln!("  caused by: {cause}");
                source = cause.source();
            }
            ExitCode::FAILURE
        }
    }
}
