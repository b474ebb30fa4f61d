//! `clusterstack operator`: run the controllers against the cluster of the in-cluster config or
//! the kubeconfig (like kubectl), until SIGTERM or SIGINT.

use tokio_util::sync::CancellationToken;

use crate::controller::run::{RunError, RunOptions, run as run_operator};
use crate::controller::runtime::config::{DEFAULT_SOURCE, OperatorArgs};
use crate::controller::runtime::context::Settings;
use crate::controller::runtime::tenancy::DirectoryRoots;
use crate::provider::ProviderRegistry;
use crate::registry::RegistryConfig;
use crate::source::SourceSpec;
use crate::source::github::Token;
use crate::source::spec::github_config_from_env;

/// Why `clusterstack operator` stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("--default-source: {0}")]
    Source(#[from] crate::source::SpecError),
    #[error("no usable Kubernetes configuration (in-cluster or kubeconfig)")]
    Kube(#[source] kube::Error),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error("--verify-policy {path}: {message}")]
    VerifyPolicy { path: String, message: String },
}

/// The controllers' settings from the command line.
pub fn settings(args: &OperatorArgs) -> Result<Settings, OperatorError> {
    let default_source = default_source(args, |k| std::env::var(k).ok())?;
    let mut github = github_config_from_env(|k| std::env::var(k).ok());
    if let Some(token) = args.github_token.as_deref().filter(|t| !t.is_empty()) {
        github.token = Some(Token::new(token));
    }
    let mut settings = Settings::new(default_source, &args.cache_dir);
    settings.watch_namespace = args.watch_namespace.clone();
    settings.github = github;
    settings.poll_interval = args.poll_interval;
    settings.resync_interval = args.resync_interval;
    settings.concurrency = args.concurrency;
    settings.shard = args.shard.clone().filter(|s| !s.is_empty());
    settings.cache_grace = args.cache_grace;
    settings.directory_roots = DirectoryRoots::new(&args.allowed_directory_roots, &args.cache_dir);
    if let Some(path) = &args.verify_policy {
        let bad = |message: String| OperatorError::VerifyPolicy { path: path.display().to_string(), message };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        settings.verify_policy = Some(serde_saphyr::from_str(&text).map_err(|e| bad(e.to_string()))?);
    }
    if !settings.directory_roots.enabled() {
        tracing::info!("no --allowed-directory-roots: ClusterStacks with spec.source.directory are refused");
    }
    // The built-in node-image plug-ins (docker) and the `providerRef` contract.
    let registries =
        RegistryConfig { endpoints: args.registry_endpoints.clone().unwrap_or_default(), ..Default::default() };
    settings.providers = ProviderRegistry::with_builtins(registries);
    settings.gate.deadline = args.node_image_deadline;
    settings.addon_wait_deadline = args.addon_wait_deadline;
    settings.max_objects_per_release = args.max_objects_per_release as usize;
    settings.chart_dependencies.mirrors = args.helm_repo_mirror.clone();
    settings.chart_dependencies.registry.endpoints = args.registry_endpoints.clone().unwrap_or_default();
    let insecure = std::env::var(crate::source::oci::ENV_INSECURE_REGISTRIES).unwrap_or_default();
    settings.chart_dependencies.insecure_registries =
        insecure.split(',').map(str::trim).filter(|h| !h.is_empty()).map(String::from).collect();
    Ok(settings)
}

/// The source of stacks without `spec.source`: `--default-source`, else the Go
/// operator's environment (`GIT_ORG_NAME`, `GIT_REPOSITORY_NAME`, else `OCI_REGISTRY`, `OCI_REPOSITORY`) so its
/// Deployments switch without edits, else the Sovereign Cloud Stack repository.
fn default_source(args: &OperatorArgs, env: impl Fn(&str) -> Option<String>) -> Result<SourceSpec, OperatorError> {
    if let Some(spec) = &args.default_source {
        return Ok(SourceSpec::from_crd(spec)?);
    }
    match SourceSpec::default_from_env(env)? {
        spec @ (SourceSpec::GitHub { .. } | SourceSpec::Oci { .. }) => Ok(spec),
        // Without the Go variables the CLI default is the local `releases/`; an
        // operator in a cluster has no such directory, so it follows the public repository.
        SourceSpec::Dir { .. } => Ok(DEFAULT_SOURCE.parse()?),
    }
}

/// Runs the operator until SIGTERM or SIGINT.
pub async fn run(args: OperatorArgs) -> Result<(), OperatorError> {
    let settings = settings(&args)?;
    if !args.render_in_process {
        // The worker is this very binary (see render::worker).
        match std::env::current_exe() {
            Ok(exe) => {
                let mut sandbox = crate::render::worker::SandboxConfig::new(exe);
                sandbox.address_space = args.render_memory_mib.saturating_mul(1024 * 1024);
                sandbox.cpu_seconds = args.render_cpu_seconds;
                sandbox.wall = args.render_timeout;
                sandbox.parallel = usize::from(args.render_workers);
                crate::render::worker::enable(sandbox);
            }
            Err(e) => tracing::warn!(error = %e, "own binary not found: rendering in process"),
        }
    }
    let client = kube::Client::try_default().await.map_err(OperatorError::Kube)?;
    let options = RunOptions {
        metrics_addr: Some(args.metrics_addr),
        health_addr: Some(args.health_addr),
        leader_election_namespace: args.leader_elect.then(|| args.leader_election_namespace.clone()),
        hooks_addr: args.hooks_addr,
        hooks_cert_dir: Some(args.hooks_cert_dir.clone()),
        hooks_hold_deadline: Some(args.hooks_hold_deadline),
    };
    let shutdown = CancellationToken::new();
    let signal = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("signal received: shutting down");
        signal.cancel();
    });
    Ok(run_operator(client, settings, options, shutdown).await?)
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGTERM; only SIGINT stops the operator");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: OperatorArgs,
    }

    #[test]
    fn flags_become_settings() {
        let w = Wrapper::try_parse_from([
            "operator",
            "--default-source",
            "dir:/srv/releases",
            "--poll-interval",
            "30s",
            "--resync-interval",
            "2m",
            "--concurrency",
            "2",
            "--watch-namespace",
            "stacks",
            "--cache-dir",
            "/tmp/cs",
            "--github-token",
            "t0ken",
            "--node-image-deadline",
            "20m",
            "--registry-endpoints",
            "docker.io=http://127.0.0.1:5000",
        ])
        .unwrap();
        let s = settings(&w.args).unwrap();
        assert_eq!(s.default_source, SourceSpec::dir("/srv/releases"));
        assert_eq!(s.poll_interval, Duration::from_secs(30));
        assert_eq!(s.resync_interval, Duration::from_secs(120));
        assert_eq!(s.concurrency, 2);
        assert_eq!(s.watch_namespace.as_deref(), Some("stacks"));
        assert_eq!(s.cache_dir, std::path::PathBuf::from("/tmp/cs"));
        assert_eq!(s.github.token.as_ref().map(Token::expose), Some("t0ken"));
        assert!(s.providers.get("docker").is_some(), "the built-in docker plug-in gates releases");
        assert_eq!(s.gate.deadline, Duration::from_secs(20 * 60));
        assert!(Wrapper::try_parse_from(["operator", "--registry-endpoints", "docker.io"]).is_err());
    }

    #[test]
    fn the_go_operator_environment_picks_the_default_source() {
        let w = Wrapper::try_parse_from(["operator"]).unwrap();
        let go_env = |k: &str| match k {
            "GIT_ORG_NAME" => Some("my-org".to_string()),
            "GIT_REPOSITORY_NAME" => Some("my-stacks".to_string()),
            _ => None,
        };
        assert_eq!(default_source(&w.args, go_env).unwrap().to_string(), "github:my-org/my-stacks");
        assert_eq!(default_source(&w.args, |_| None).unwrap().to_string(), DEFAULT_SOURCE);
        let explicit = Wrapper::try_parse_from(["operator", "--default-source", "dir:/srv/r"]).unwrap();
        assert_eq!(default_source(&explicit.args, go_env).unwrap(), SourceSpec::dir("/srv/r"));
    }
}
