//! The `clusterstack` command line.
//!
//! Each subcommand lives in its own file and is dispatched from [`run`].

mod build;
mod crds;
mod install;
pub use install::MALLOC_ARENA_MAX;
mod install_hooks;
mod install_monitoring;
pub mod operator;
mod plan;
pub mod publish;
pub mod pull;
pub mod releases;
mod render;
pub mod source_args;

use clap::{Parser, Subcommand, ValueEnum};

/// A declarative cluster-stack release manager for Kubernetes Cluster API.
#[derive(Debug, Parser)]
#[command(name = "clusterstack", version, about, propagate_version = true)]
pub struct Cli {
    /// Log format: `text` for people, `json` for log collectors.
    #[arg(long, global = true, env = "CLUSTERSTACK_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the CustomResourceDefinitions, or write one file per CRD into a directory.
    Crds(crds::CrdsArgs),
    /// Package a stack source directory into a reproducible release.
    // `--version` is the version to build here, not the program's.
    #[command(disable_version_flag = true)]
    Build(build::BuildArgs),
    /// Print the objects of a release's chart in apply order.
    Render(render::RenderArgs),
    /// Show which ClusterStackReleases the operator would keep, create or delete, and why (offline).
    Plan(plan::PlanArgs),
    /// Print everything needed to run the operator in a cluster (`install --export | kubectl apply -f -`).
    Install(install::InstallArgs),
    /// List the cluster-stack releases of a source.
    Releases(releases::ReleasesArgs),
    /// Fetch one release into the cache, verified and extracted.
    Pull(pull::PullArgs),
    /// Push a built release directory to an OCI registry as an ORAS-style artifact.
    Publish(publish::PublishArgs),
    /// Run the controllers (in a cluster, or against the cluster of the kubeconfig).
    Operator(Box<crate::controller::runtime::config::OperatorArgs>),
}

/// Everything a command can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("could not serialise the CRDs to YAML")]
    CrdYaml(#[from] serde_saphyr::ser::Error),
    #[error(transparent)]
    Build(#[from] crate::package::build::BuildError),
    #[error(transparent)]
    Render(#[from] crate::render::RenderError),
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Source(#[from] source_args::SourceCliError),
    #[error(transparent)]
    Operator(#[from] operator::OperatorError),
    #[error("could not write {path}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl Cli {
    /// Sets up `tracing`; the filter comes from `RUST_LOG` (default `info`).
    pub fn init_logging(&self) {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
        let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
        // A second initialisation (tests) is not an error worth reporting.
        let _ = match self.log_format {
            LogFormat::Json => builder.json().try_init(),
            LogFormat::Text => builder.try_init(),
        };
    }
}

/// Runs one command.
pub async fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Crds(args) => crds::run(args),
        Command::Build(args) => build::run(args),
        Command::Render(args) => render::run(args).await,
        Command::Plan(args) => plan::run(args).await,
        Command::Install(args) => install::run(args),
        Command::Releases(args) => Ok(releases::run(args).await?),
        Command::Pull(args) => Ok(pull::run(args).await?),
        Command::Publish(args) => Ok(publish::run(args).await?),
        Command::Operator(args) => Ok(operator::run(*args).await?),
    }
}
