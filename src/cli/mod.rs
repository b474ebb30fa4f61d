//! The `clusterstack` command line.
//!
//! Each subcommand lives in its own file and is dispatched from [`run`].

mod build;
mod crds;
pub mod describe;
pub mod describe_tree;
pub mod diff;
mod install;
pub use install::MALLOC_ARENA_MAX;
/// The operator's ServiceAccount (and ClusterRole) name, as `install --export` writes it.
pub use install::NAME as OPERATOR_SERVICE_ACCOUNT;
pub use install::rbac as install_rbac;
mod install_hooks;
mod install_monitoring;
pub mod operator;
mod plan;
mod plan_rollout;
pub mod publish;
pub mod pull;
pub mod releases;
mod render;
pub mod sandbox;
pub mod source_args;
pub mod verify_args;
pub mod verify_bundle;

use clap::{Parser, Subcommand, ValueEnum};

/// A declarative cluster-stack release manager for Kubernetes Cluster API.
#[derive(Debug, Parser)]
#[command(name = "clusterstack", version, about, propagate_version = true)]
pub struct Cli {
    /// Log format: `text` for people, `json` for log collectors.
    #[arg(long, global = true, env = "CLUSTERSTACK_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// More log lines on stderr: `-v` our progress (info), `-vv` debug, `-vvv` everything.
    /// Interactive commands print only their result and warnings by default; `RUST_LOG`
    /// overrides this; the `operator` command always logs at info.
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

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
    /// Verify a Sigstore bundle against an artifact, offline (the conformance suite's protocol).
    VerifyBundle(verify_bundle::VerifyBundleArgs),
    /// Generate a key pair for `publish --sign --key` (ECDSA P-256, PEM).
    Keygen(publish::KeygenArgs),
    /// Show what applying a release would change in the cluster (dry-run server-side apply);
    /// exits 0 when nothing would change, 1 when something would, 2 on an error.
    Diff(diff::DiffArgs),
    /// Show one tree of a ClusterStack's state (releases, Clusters, addons, rollout), or of a Cluster's.
    Describe(describe::DescribeArgs),
    /// The main job on a real local control plane (built from pinned Go modules on first use):
    /// the operator on the bundled releases, the examples applied; runs until Ctrl-C.
    Sandbox(sandbox::SandboxArgs),
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
    #[error(transparent)]
    Sandbox(#[from] sandbox::SandboxError),
    #[error("could not write {path}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl Cli {
    /// Sets up `tracing`. The operator logs at `info` (JSON or text) for log collectors; every
    /// other command is interactive: only our warnings and errors, on stderr, without timestamps,
    /// coloured only on a terminal (and never with `NO_COLOR`), more with `-v`. `RUST_LOG`
    /// overrides both.
    pub fn init_logging(&self) {
        let operator = matches!(self.command, Command::Operator(_));
        let default = if operator { "info" } else { interactive_filter(self.verbose) };
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
        let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
        // A second initialisation (tests) is not an error worth reporting.
        let _ = match (self.log_format, operator) {
            (LogFormat::Json, _) => builder.json().try_init(),
            (LogFormat::Text, true) => builder.try_init(),
            (LogFormat::Text, false) => {
                builder.without_time().with_target(self.verbose >= 2).with_ansi(colour_on_stderr()).try_init()
            }
        };
    }
}

/// The log filter of an interactive command at a verbosity: our warnings only by default
/// (other crates' lines repeat what our error message says), our info with `-v`, debug with
/// `-vv`, everything with `-vvv`.
pub fn interactive_filter(verbose: u8) -> &'static str {
    match verbose {
        0 => "clusterstack=warn,off",
        1 => "clusterstack=info,warn",
        2 => "clusterstack=debug,info",
        _ => "trace",
    }
}

/// Whether stderr gets colours: a terminal, and `NO_COLOR` unset (https://no-color.org).
fn colour_on_stderr() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}

/// Runs one command; `Ok(true)` when the command found differences (`diff`: exit status 1).
pub async fn run(cli: Cli) -> Result<bool, CliError> {
    let result = match cli.command {
        Command::Diff(args) => return diff::run(args).await,
        Command::Describe(args) => describe::run(args).await,
        Command::Crds(args) => crds::run(args),
        Command::Build(args) => build::run(args),
        Command::Render(args) => render::run(args).await,
        Command::Plan(args) => plan::run(args).await,
        Command::Install(args) => install::run(args),
        Command::Releases(args) => Ok(releases::run(args).await?),
        Command::Pull(args) => Ok(pull::run(args).await?),
        Command::Publish(args) => Ok(publish::run(args).await?),
        Command::VerifyBundle(args) => Ok(verify_bundle::run(args)?),
        Command::Keygen(args) => Ok(publish::keygen(args)?),
        Command::Sandbox(args) => Ok(sandbox::run(args).await?),
        Command::Operator(args) => Ok(operator::run(*args).await?),
    };
    result.map(|()| false)
}
