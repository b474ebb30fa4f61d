//! Settings of `clusterstack operator`, as flags and environment variables.
//!
//! Defined here, next to the controllers, so that `install --export` writes a
//! Deployment whose arguments this very parser accepts (a test checks it).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::api::ReleaseSourceSpec;
use crate::source::SourceSpec;

/// Default release repository: the cluster stacks of Sovereign Cloud Stack.
pub const DEFAULT_SOURCE: &str = "github:SovereignCloudStack/cluster-stacks";
/// Default cache directory inside the container (a PersistentVolumeClaim).
pub const DEFAULT_CACHE_DIR: &str = "/var/cache/clusterstack";
/// Default address of `/metrics`.
pub const DEFAULT_METRICS_ADDR: &str = "0.0.0.0:8080";
/// Default address of `/healthz` and `/readyz`.
pub const DEFAULT_HEALTH_ADDR: &str = "0.0.0.0:8081";

/// `clusterstack operator`: run the controllers.
#[derive(Debug, Clone, clap::Args)]
pub struct OperatorArgs {
    /// Watch only this namespace (ClusterStacks, ClusterStackReleases); all namespaces when unset.
    /// Clusters are always read in every namespace.
    #[arg(long, env = "CLUSTERSTACK_WATCH_NAMESPACE")]
    pub watch_namespace: Option<String>,

    /// The source of ClusterStacks without `spec.source`: `github:<owner>/<repo>` or `dir:<path>`.
    /// Unset: the Go operator's `GIT_ORG_NAME`/`GIT_REPOSITORY_NAME` when both are set, else
    /// `github:SovereignCloudStack/cluster-stacks`.
    #[arg(long, env = "CLUSTERSTACK_DEFAULT_SOURCE", value_parser = parse_source)]
    pub default_source: Option<ReleaseSourceSpec>,

    /// GitHub token for the default source (5,000 requests/hour instead of 60).
    #[arg(long, env = "CLUSTERSTACK_GITHUB_TOKEN", hide_env_values = true)]
    pub github_token: Option<String>,

    /// Directory of the verified release cache; keep it on a persistent volume.
    #[arg(long, env = "CLUSTERSTACK_CACHE_DIR", default_value = DEFAULT_CACHE_DIR)]
    pub cache_dir: PathBuf,

    /// Directories (comma-separated, absolute) under which a ClusterStack's
    /// `spec.source.directory` may point; empty (the default): directory sources are refused.
    /// Never the cache directory; paths are resolved (symlinks included) before the check.
    #[arg(long, env = "CLUSTERSTACK_ALLOWED_DIRECTORY_ROOTS", value_delimiter = ',')]
    pub allowed_directory_roots: Vec<PathBuf>,

    /// A signature policy (YAML, the shape of `ClusterStack.spec.verify`) for ClusterStacks that
    /// set none; its ConfigMap and Secret references are read in each stack's namespace. Without
    /// it, such stacks' releases are checked by digest only.
    #[arg(long, env = "CLUSTERSTACK_VERIFY_POLICY")]
    pub verify_policy: Option<PathBuf>,

    /// Poll interval of ClusterStacks without `spec.pollInterval`.
    #[arg(long, env = "CLUSTERSTACK_POLL_INTERVAL", default_value = crate::api::DEFAULT_POLL_INTERVAL, value_parser = humantime::parse_duration)]
    pub poll_interval: Duration,

    /// How often a ready release is re-applied to correct drift.
    #[arg(long, env = "CLUSTERSTACK_RESYNC_INTERVAL", default_value = "10m", value_parser = humantime::parse_duration)]
    pub resync_interval: Duration,

    /// Objects reconciled at the same time, per controller.
    #[arg(long, env = "CLUSTERSTACK_CONCURRENCY", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,

    /// Address of the Prometheus `/metrics` endpoint.
    #[arg(long, env = "CLUSTERSTACK_METRICS_ADDR", default_value = DEFAULT_METRICS_ADDR)]
    pub metrics_addr: SocketAddr,

    /// Address of the `/healthz` and `/readyz` probes.
    #[arg(long, env = "CLUSTERSTACK_HEALTH_ADDR", default_value = DEFAULT_HEALTH_ADDR)]
    pub health_addr: SocketAddr,

    /// Handle only ClusterStacks labelled `clusterstack.x-k8s.io/shard=<SHARD>` (and their
    /// releases); unset: those without the label. One Deployment per shard (`install --export --shards N`).
    #[arg(long, env = "CLUSTERSTACK_SHARD")]
    pub shard: Option<String>,

    /// How long a release no ClusterStackRelease references stays in the cache.
    #[arg(long, env = "CLUSTERSTACK_CACHE_GRACE", default_value = "1h", value_parser = humantime::parse_duration)]
    pub cache_grace: Duration,

    /// Run only while holding the Lease `clusterstack-operator` (`clusterstack-operator-<SHARD>`
    /// with `--shard`), for more than one replica.
    #[arg(long, env = "CLUSTERSTACK_LEADER_ELECT")]
    pub leader_elect: bool,

    /// Namespace of the leader-election Lease; the pod's own namespace in a cluster.
    #[arg(long, env = "POD_NAMESPACE", default_value = "clusterstack-system")]
    pub leader_election_namespace: String,

    /// How long a release may wait for its node images before its `NodeImagesReady`
    /// condition says `TimedOut`.
    #[arg(long, env = "CLUSTERSTACK_NODE_IMAGE_DEADLINE", default_value = "1h", value_parser = humantime::parse_duration)]
    pub node_image_deadline: Duration,

    /// Base URLs of container registries for the `docker` plug-in, as
    /// `HOST=URL[,HOST=URL...]` (e.g. `docker.io=https://mirror.example`); other hosts
    /// are reached at `https://HOST`.
    #[arg(long, env = "CLUSTERSTACK_REGISTRY_ENDPOINTS", value_parser = parse_registry_endpoints)]
    pub registry_endpoints: Option<std::collections::BTreeMap<String, String>>,

    /// How long an addon stage may wait for its `waitForPreCondition` /
    /// `waitForPostCondition` before it fails.
    #[arg(long, env = "CLUSTERSTACK_ADDON_WAIT_DEADLINE", default_value = "10m", value_parser = humantime::parse_duration)]
    pub addon_wait_deadline: Duration,

    /// Serve the CAPI Runtime SDK lifecycle hooks (HTTPS) on this address, e.g. `0.0.0.0:9443`.
    /// Off when unset: the addons then follow the Cluster watch and cannot hold an upgrade.
    #[arg(long, env = "CLUSTERSTACK_HOOKS_ADDR")]
    pub hooks_addr: Option<std::net::SocketAddr>,

    /// The directory holding the hook server's `tls.crt` and `tls.key` (a mounted Secret; read
    /// again when they change).
    #[arg(long, env = "CLUSTERSTACK_HOOKS_CERT_DIR", default_value = "/etc/clusterstack/hooks-tls")]
    pub hooks_cert_dir: std::path::PathBuf,

    /// How long `BeforeClusterUpgrade` may hold an upgrade for the addons before letting it
    /// through with a Warning event.
    #[arg(long, env = "CLUSTERSTACK_HOOKS_HOLD_DEADLINE", default_value = "30m", value_parser = humantime::parse_duration)]
    pub hooks_hold_deadline: Duration,

    /// Render releases in this process instead of a sandboxed render worker (debugging only:
    /// a hostile release can then take the operator down).
    #[arg(long, env = "CLUSTERSTACK_RENDER_IN_PROCESS")]
    pub render_in_process: bool,

    /// Address space of a render worker, MiB (`RLIMIT_AS`).
    #[arg(long, env = "CLUSTERSTACK_RENDER_MEMORY_MIB", default_value_t = 1024)]
    pub render_memory_mib: u64,

    /// CPU seconds of a render worker (`RLIMIT_CPU`).
    #[arg(long, env = "CLUSTERSTACK_RENDER_CPU_SECONDS", default_value_t = 30)]
    pub render_cpu_seconds: u64,

    /// Wall-clock time of a render worker before it is killed.
    #[arg(long, env = "CLUSTERSTACK_RENDER_TIMEOUT", default_value = "60s", value_parser = humantime::parse_duration)]
    pub render_timeout: Duration,

    /// Objects one release may apply: a release (or a Cluster's addons) rendering more is refused
    /// before anything is applied (`Ready=False`, reason `TooManyObjects`), so its status always
    /// fits.
    #[arg(long, env = "CLUSTERSTACK_MAX_OBJECTS_PER_RELEASE", default_value_t = 5000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_objects_per_release: u32,

    /// Fetch the Helm repository (or OCI registry path) ORIGINAL from MIRROR instead, as
    /// `ORIGINAL=MIRROR` (repeatable; the first matching rule wins), when resolving the
    /// dependencies of charts a release ships without their `charts/`. A release's plain
    /// `http://` repositories are refused unless a rule rewrites them.
    #[arg(long = "helm-repo-mirror", env = "CLUSTERSTACK_HELM_REPO_MIRRORS", value_delimiter = ',', value_parser = crate::package::deps::parse_mirror)]
    pub helm_repo_mirror: Vec<(String, String)>,

    /// Render workers running at once.
    #[arg(long, env = "CLUSTERSTACK_RENDER_WORKERS", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    pub render_workers: u16,
}

/// Why a source setting is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a release source: expected github:<owner>/<repo>, dir:<path> or oci://<host>/<repository>")]
pub struct BadSource {
    pub input: String,
}

/// Parses `HOST=URL[,HOST=URL...]`.
pub fn parse_registry_endpoints(s: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    crate::registry::RegistryConfig::parse_endpoints(s)
}

/// Parses a source string with the one grammar of sources ([`SourceSpec`]'s), as the CRD's
/// `spec.source` it stands in for.
pub fn parse_source(s: &str) -> Result<ReleaseSourceSpec, BadSource> {
    s.parse::<SourceSpec>().map(|spec| spec.to_crd()).map_err(|_| BadSource { input: s.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        args: OperatorArgs,
    }

    #[test]
    fn sources_parse() {
        let gh = parse_source("github:SovereignCloudStack/cluster-stacks").unwrap();
        assert_eq!(gh.github.unwrap().repository, "cluster-stacks");
        assert_eq!(parse_source("dir:/srv/releases").unwrap().directory.unwrap().path, "/srv/releases");
        let oci = parse_source("oci://registry.example:5000/stacks/docker").unwrap().oci.unwrap();
        assert_eq!(oci.repository, "registry.example:5000/stacks/docker");
        // The GitHub names the CRD accepts, no more: `..` never reaches a URL or a cache path.
        for bad in ["github:", "github:owner", "github:/repo", "github:a/b/c", "github:../x", "dir:", "s3://x", ""] {
            assert_eq!(parse_source(bad), Err(BadSource { input: bad.into() }), "{bad}");
        }
    }

    #[test]
    fn flags_parse_with_defaults() {
        let w = Wrap::try_parse_from(["x"]).unwrap();
        assert_eq!(w.args.poll_interval, Duration::from_secs(300));
        assert_eq!(w.args.cache_dir, PathBuf::from(DEFAULT_CACHE_DIR));
        assert!(!w.args.leader_elect);
        assert_eq!(
            w.args.max_objects_per_release as usize,
            crate::controller::runtime::context::DEFAULT_MAX_OBJECTS_PER_RELEASE
        );
        assert!(Wrap::try_parse_from(["x", "--max-objects-per-release", "0"]).is_err());
        let w = Wrap::try_parse_from(["x", "--poll-interval", "30s", "--concurrency", "8", "--leader-elect"]).unwrap();
        assert_eq!(w.args.poll_interval, Duration::from_secs(30));
        assert_eq!(w.args.concurrency, 8);
        assert!(w.args.leader_elect);
        assert!(Wrap::try_parse_from(["x", "--concurrency", "0"]).is_err());
        assert!(Wrap::try_parse_from(["x", "--default-source", "ftp:x"]).is_err());
    }
}
