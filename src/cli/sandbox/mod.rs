//! `clusterstack sandbox`: the main job on a real control plane, one command. Builds the pinned
//! control plane on first use (or finds it), starts it, installs our CRDs and Cluster API's, runs the
//! operator under its own ServiceAccount (the RBAC of `install --export`) on the bundled releases,
//! applies the examples, prints the releases once they are Ready and a kubeconfig to explore with,
//! then runs until Ctrl-C or SIGTERM and stops everything it started.

pub mod setup;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::controller::addon::workload::KUBECONFIG_SECRET_ANNOTATION;
use crate::controlplane::capi::ClusterApi;
use crate::controlplane::process::Process;
use crate::controlplane::{Binaries, ControlPlane, ExtraApiServer, Options};

use setup::SetupError;

/// The operator's namespace in the sandbox (as `install --export` defaults it).
const OPERATOR_NAMESPACE: &str = "clusterstack-system";
/// How long the sandbox waits for its releases.
const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// The examples it applies (compiled in, so the command works outside a checkout): the in-memory
/// sample, whose Clusters Cluster API provisions without Docker.
const EXAMPLE_STACK: &str = include_str!("../../../docs/examples/sandbox/clusterstack.yaml");
const EXAMPLE_CLUSTERS: &str = include_str!("../../../docs/examples/sandbox/clusters.yaml");

/// Arguments of `clusterstack sandbox`.
#[derive(Debug, clap::Args)]
pub struct SandboxArgs {
    /// Without Cluster API's controllers: only its CRDs are installed (Clusters are objects that
    /// nothing provisions).
    #[arg(long)]
    pub without_capi: bool,
    /// Also write the admin kubeconfig here.
    #[arg(long)]
    pub kubeconfig_out: Option<PathBuf>,
    /// Keep the sandbox's state (etcd data, certificates, logs, kubeconfigs) in this directory
    /// instead of a temporary one removed at the end.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The releases the operator serves (a directory of release directories); default: the
    /// bundled `releases/` of this checkout.
    #[arg(long)]
    pub releases: Option<PathBuf>,
    /// Where the control plane's programs are built and looked for; default:
    /// `$CLUSTERSTACK_CONTROLPLANE_DIR`, the checkout's `target/controlplane`, or `~/.cache/clusterstack/controlplane`.
    #[arg(long)]
    pub controlplane_dir: Option<PathBuf>,
}

/// Why the sandbox stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(transparent)]
    ControlPlane(#[from] crate::controlplane::ControlPlaneError),
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error("{0}")]
    Other(String),
}

/// One line of progress on stderr.
fn say(line: &str) {
    eprintln!("sandbox: {line}");
}

/// Runs the sandbox until Ctrl-C or SIGTERM.
pub async fn run(args: SandboxArgs) -> Result<(), SandboxError> {
    let started = Instant::now();
    let releases = match &args.releases {
        Some(r) => r.clone(),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("releases"),
    };
    let releases = std::fs::canonicalize(&releases)
        .map_err(|e| SandboxError::Other(format!("the releases directory {}: {e}", releases.display())))?;

    let bin_dir = args.controlplane_dir.clone().unwrap_or_else(Binaries::default_dir);
    let with_capi = !args.without_capi;
    let bins = match Binaries::find(&bin_dir) {
        Ok(b) if b.capi.is_some() || !with_capi => {
            say(&format!("control plane found in {}", bin_dir.display()));
            b
        }
        _ => {
            say(&format!(
                "building the control plane{} into {} (first run only: Go compiles them, some minutes)",
                if with_capi { " and Cluster API" } else { "" },
                bin_dir.display()
            ));
            let dir = bin_dir.clone();
            tokio::task::spawn_blocking(move || Binaries::build(&dir, with_capi))
                .await
                .map_err(|e| SandboxError::Other(format!("the build task failed: {e}")))??
        }
    };

    let options = Options { dir: args.dir.clone(), ..Default::default() };
    let cp = ControlPlane::start(bins, options, &mut |step| say(step)).await?;
    let result = serve(&cp, &args, &releases, started).await;
    say("stopping");
    let dir = cp.dir().to_path_buf();
    cp.stop();
    if args.dir.is_some() {
        say(&format!("state kept in {}", dir.display()));
    }
    result
}

/// Everything after the control plane is up; returns when asked to stop.
async fn serve(cp: &ControlPlane, args: &SandboxArgs, releases: &Path, started: Instant) -> Result<(), SandboxError> {
    let client = cp.admin_client().await?;
    say("installing the CRDs (clusterstack and Cluster API)");
    let mut crds = setup::our_crds();
    crds.extend(setup::capi_crds(&cp.binaries().capi_config)?);
    setup::install_crds(&client, &crds).await?;
    let capi = match (&cp.binaries().capi, args.without_capi) {
        (Some(managers), false) => {
            say(
                "starting Cluster API (its webhook and CAPD's servers listen on every interface: upstream has no flag for the host)",
            );
            let config = cp.binaries().capi_config.clone();
            Some(ClusterApi::start(cp, managers, &config, &mut |step| say(step)).await?)
        }
        _ => None,
    };
    let result = serve_operator(cp, args, releases, started, capi.is_some()).await;
    if let Some(capi) = capi {
        capi.stop();
    }
    result
}

/// The operator, its hooks (with Cluster API), the examples, the wait and the table.
async fn serve_operator(
    cp: &ControlPlane,
    args: &SandboxArgs,
    releases: &Path,
    started: Instant,
    with_capi: bool,
) -> Result<(), SandboxError> {
    let client = cp.admin_client().await?;

    say("creating the operator's ServiceAccount and RBAC (as install --export grants them)");
    let operator_kubeconfig = cp.dir().join("operator.kubeconfig");
    setup::install_operator_identity(
        cp,
        &client,
        OPERATOR_NAMESPACE,
        Duration::from_secs(30 * 24 * 3600),
        &operator_kubeconfig,
    )
    .await?;

    let health = free_port()?;
    let exe = std::env::current_exe().map_err(|e| SandboxError::Other(format!("cannot find this program: {e}")))?;
    let cache = cp.dir().join("cache");
    let mut operator_args = vec![
        "operator".to_string(),
        format!("--default-source=dir:{}", releases.display()),
        format!("--allowed-directory-roots={}", releases.display()),
        format!("--cache-dir={}", cache.display()),
        format!("--metrics-addr=127.0.0.1:{}", free_port()?),
        format!("--health-addr=127.0.0.1:{health}"),
        "--poll-interval=10s".into(),
    ];
    // With Cluster API: the Runtime SDK hooks on 127.0.0.1, registered by an ExtensionConfig.
    let hooks = if with_capi { Some(hooks_server(cp)?) } else { None };
    if let Some(h) = &hooks {
        operator_args.push(format!("--hooks-addr=127.0.0.1:{}", h.port));
        operator_args.push(format!("--hooks-cert-dir={}", h.cert_dir.display()));
    }
    let log = cp.dir().join("operator.log");
    say(&format!("starting the operator (log: {})", log.display()));
    let kubeconfig = operator_kubeconfig.display().to_string();
    let mut operator = Process::start("operator", &exe, &operator_args, &log, &[("KUBECONFIG", kubeconfig.as_str())])
        .map_err(|e| SandboxError::Other(format!("cannot start the operator: {e}")))?;

    say("applying docs/examples/sandbox (the ClusterStack and the Clusters)");
    let mut examples = examples(args.without_capi)?;
    for skipped in &examples.skipped {
        say(skipped);
    }
    // Each Cluster's addons go to a kube-apiserver of its own: CAPD's in-memory API servers
    // take no server-side apply (CAPI keeps its kubeconfig Secret for itself).
    let mut workloads = Vec::new();
    if let Some(h) = &hooks {
        setup::apply(&client, std::slice::from_ref(&h.extension_config)).await?;
        let (objects, started) = workload_clusters(cp, std::mem::take(&mut examples.objects)).await?;
        examples.objects = objects;
        workloads = started;
    }
    setup::apply(&client, &examples.objects).await?;

    say("waiting for the releases to be Ready");
    wait_ready(cp, &mut operator, &examples.objects).await?;
    if with_capi {
        say("waiting for Cluster API to provision the Clusters and for their ClusterAddons to be Ready");
        wait_clusters(cp, &mut operator, &examples.objects).await?;
    }
    let table = kubectl(cp, &["get", "clusterstackreleases", "-A"])?;
    println!("{table}");
    if let Ok(clusters) = kubectl(cp, &["get", "clusters.cluster.x-k8s.io", "-A"]) {
        println!("{clusters}");
    }
    if with_capi && let Ok(addons) = kubectl(cp, &["get", "clusteraddons", "-A"]) {
        println!("{addons}");
    }
    for (cluster, w) in &workloads {
        println!("workload cluster of {cluster}: kubectl --kubeconfig {} get all -A", w.kubeconfig_path().display());
    }
    if let Some(out) = &args.kubeconfig_out {
        std::fs::copy(cp.admin_kubeconfig(), out)
            .map_err(|e| SandboxError::Other(format!("writing {}: {e}", out.display())))?;
    }
    let kubeconfig = args.kubeconfig_out.as_deref().unwrap_or(cp.admin_kubeconfig());
    println!("kubeconfig: {}", kubeconfig.display());
    println!("  kubectl --kubeconfig {} get clusterstacks,clusterstackreleases -A", kubeconfig.display());
    say(&format!("ready in {:.1} s; Ctrl-C stops everything", started.elapsed().as_secs_f64()));

    let stopped = wait_for_signal_or_exit(&mut operator).await;
    operator.stop(Duration::from_secs(15));
    drop(workloads);
    stopped
}

/// The hook server's port, certificate directory and the ExtensionConfig registering it.
struct HookServer {
    port: u16,
    cert_dir: PathBuf,
    extension_config: Value,
}

fn hooks_server(cp: &ControlPlane) -> Result<HookServer, SandboxError> {
    use base64::Engine;
    let (ca, serving) = crate::controlplane::pki::serving_pair("clusterstack sandbox hooks CA", &["127.0.0.1"])?;
    let cert_dir = cp.dir().join("hooks-tls");
    std::fs::create_dir_all(&cert_dir)
        .map_err(|e| SandboxError::Other(format!("creating {}: {e}", cert_dir.display())))?;
    crate::controlplane::pki::write(&cert_dir.join("tls.crt"), &serving.cert, false)?;
    crate::controlplane::pki::write(&cert_dir.join("tls.key"), &serving.key, true)?;
    let port = free_port()?;
    let extension_config = serde_json::json!({
        "apiVersion": "runtime.cluster.x-k8s.io/v1alpha1", "kind": "ExtensionConfig",
        "metadata": {"name": "clusterstack"},
        "spec": {"clientConfig": {"url": format!("https://127.0.0.1:{port}"),
                                  "caBundle": base64::engine::general_purpose::STANDARD.encode(ca.cert)},
                 "namespaceSelector": {}}
    });
    Ok(HookServer { port, cert_dir, extension_config })
}

/// Starts a kube-apiserver per example Cluster, adds its kubeconfig Secret before the Cluster
/// and names it in the Cluster's annotation. Returns the objects and the servers (by Cluster).
async fn workload_clusters(
    cp: &ControlPlane,
    objects: Vec<Value>,
) -> Result<(Vec<Value>, Vec<(String, ExtraApiServer)>), SandboxError> {
    use base64::Engine;
    let mut out = Vec::new();
    let mut servers = Vec::new();
    for mut obj in objects {
        if obj["kind"] == "Cluster" {
            let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
            let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
            say(&format!("starting the workload cluster of {ns}/{name} (a kube-apiserver of its own)"));
            let server = cp.start_extra_apiserver(&format!("workload-{ns}-{name}")).await?;
            let secret = format!("{name}-addons-kubeconfig");
            out.push(serde_json::json!({
                "apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret, "namespace": ns},
                "data": {"value": base64::engine::general_purpose::STANDARD.encode(server.kubeconfig())}
            }));
            obj["metadata"]["annotations"][KUBECONFIG_SECRET_ANNOTATION] = serde_json::json!(secret);
            servers.push((format!("{ns}/{name}"), server));
        }
        out.push(obj);
    }
    Ok((out, servers))
}

/// Waits until Cluster API reports every example Cluster's control plane initialised and its
/// ClusterAddon is Ready, reporting progress.
async fn wait_clusters(cp: &ControlPlane, operator: &mut Process, examples: &[Value]) -> Result<(), SandboxError> {
    use kube::api::{Api, DynamicObject};
    use kube::discovery::ApiResource;
    let client = cp.admin_client().await?;
    let clusters = ApiResource {
        group: "cluster.x-k8s.io".into(),
        version: "v1beta2".into(),
        api_version: "cluster.x-k8s.io/v1beta2".into(),
        kind: "Cluster".into(),
        plural: "clusters".into(),
    };
    let wanted: Vec<(String, String)> = examples
        .iter()
        .filter(|o| o["kind"] == "Cluster")
        .map(|o| {
            (
                o["metadata"]["namespace"].as_str().unwrap_or("default").to_string(),
                o["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let start = Instant::now();
    let mut last = String::new();
    loop {
        let mut waiting = Vec::new();
        for (ns, name) in &wanted {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &clusters);
            let cluster = api
                .get_opt(name)
                .await
                .map_err(|e| SandboxError::Other(format!("reading Cluster {ns}/{name}: {e}")))?;
            let initialised = cluster.as_ref().is_some_and(|c| {
                c.data["status"]["initialization"]["controlPlaneInitialized"] == serde_json::json!(true)
            });
            if !initialised {
                waiting.push(format!("{ns}/{name}: control plane not initialised"));
                continue;
            }
            let addons: Api<crate::api::ClusterAddon> = Api::namespaced(client.clone(), ns);
            let addon = addons
                .get_opt(&crate::controller::addon::cluster_addon_name(name))
                .await
                .map_err(|e| SandboxError::Other(format!("reading the ClusterAddon of {ns}/{name}: {e}")))?;
            match addon.and_then(|a| a.status) {
                Some(s) if s.ready => {}
                Some(s) => waiting.push(format!(
                    "{ns}/{name}: ClusterAddon: {}",
                    s.conditions.iter().find(|c| c.type_ == "Ready").map_or("not ready", |c| c.message.as_str())
                )),
                None => waiting.push(format!("{ns}/{name}: no ClusterAddon yet")),
            }
        }
        if waiting.is_empty() {
            return Ok(());
        }
        let line = waiting.join("; ");
        if line != last {
            say(&format!("waiting: {line}"));
            last.clone_from(&line);
        }
        if let Some(status) = operator.exited() {
            return Err(SandboxError::Other(format!(
                "the operator exited with {status}; its last log lines:\n{}",
                operator.log_tail(20)
            )));
        }
        if start.elapsed() > READY_TIMEOUT {
            return Err(SandboxError::Other(format!(
                "the Clusters are not provisioned with their addons after {READY_TIMEOUT:?} ({line}); logs in {}",
                cp.dir().display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The example objects to apply, and what was left out and why.
struct Examples {
    objects: Vec<Value>,
    skipped: Vec<String>,
}

fn examples(without_capi: bool) -> Result<Examples, SandboxError> {
    let mut objects = Vec::new();
    let mut skipped = Vec::new();
    let parse =
        |name: &str, text: &str| setup::parse_yaml(text).map_err(|e| SandboxError::Other(format!("{name}: {e}")));
    let mut namespaces = std::collections::BTreeSet::new();
    let stack = parse("docs/examples/sandbox/clusterstack.yaml", EXAMPLE_STACK)?;
    let clusters = parse("docs/examples/sandbox/clusters.yaml", EXAMPLE_CLUSTERS)?;
    for obj in stack.into_iter().chain(clusters) {
        // Without Cluster API's conversion webhook the server stores every Cluster as v1beta2
        // with only its apiVersion changed, pruning what v1beta2 does not have (a v1beta1
        // topology's `class`): such a Cluster would silently lose its class.
        if without_capi && obj["apiVersion"] == "cluster.x-k8s.io/v1beta1" {
            skipped.push(format!(
                "left out {} {}/{}: a v1beta1 Cluster needs Cluster API's conversion webhook (run without --without-capi)",
                obj["kind"].as_str().unwrap_or_default(),
                obj["metadata"]["namespace"].as_str().unwrap_or_default(),
                obj["metadata"]["name"].as_str().unwrap_or_default()
            ));
            continue;
        }
        if let Some(ns) = obj["metadata"]["namespace"].as_str() {
            namespaces.insert(ns.to_string());
        }
        objects.push(obj);
    }
    let mut all: Vec<Value> = namespaces
        .into_iter()
        .map(|ns| serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .collect();
    all.extend(objects);
    Ok(Examples { objects: all, skipped })
}

/// Waits until every example ClusterStack is Ready (all its releases Ready), reporting progress.
async fn wait_ready(cp: &ControlPlane, operator: &mut Process, examples: &[Value]) -> Result<(), SandboxError> {
    use crate::api::ClusterStack;
    use kube::Api;
    let client = cp.admin_client().await?;
    let stacks: Vec<(String, String)> = examples
        .iter()
        .filter(|o| o["kind"] == "ClusterStack")
        .map(|o| {
            (
                o["metadata"]["namespace"].as_str().unwrap_or("default").to_string(),
                o["metadata"]["name"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let start = Instant::now();
    let mut last = String::new();
    loop {
        let mut ready = 0;
        let mut states = Vec::new();
        for (ns, name) in &stacks {
            let api: Api<ClusterStack> = Api::namespaced(client.clone(), ns);
            let stack = api
                .get_opt(name)
                .await
                .map_err(|e| SandboxError::Other(format!("reading ClusterStack {ns}/{name}: {e}")))?;
            let condition = stack
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready").cloned());
            match condition {
                Some(c) if c.status == "True" => ready += 1,
                Some(c) => states.push(format!("{ns}/{name}: {} {}", c.reason, c.message)),
                None => states.push(format!("{ns}/{name}: no status yet")),
            }
        }
        if ready == stacks.len() {
            return Ok(());
        }
        let line = states.join("; ");
        if line != last {
            say(&format!("waiting: {line}"));
            last.clone_from(&line);
        }
        if let Some(status) = operator.exited() {
            return Err(SandboxError::Other(format!(
                "the operator exited with {status}; its last log lines:\n{}",
                operator.log_tail(20)
            )));
        }
        if start.elapsed() > READY_TIMEOUT {
            return Err(SandboxError::Other(format!(
                "the releases are not Ready after {READY_TIMEOUT:?} ({line}); the operator's log: {}",
                operator.log().display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Runs the control plane's own kubectl as admin; its standard output.
fn kubectl(cp: &ControlPlane, args: &[&str]) -> Result<String, SandboxError> {
    let out = std::process::Command::new(&cp.binaries().kubectl)
        .arg(format!("--kubeconfig={}", cp.admin_kubeconfig().display()))
        .args(args)
        .output()
        .map_err(|e| SandboxError::Other(format!("kubectl: {e}")))?;
    if !out.status.success() {
        return Err(SandboxError::Other(format!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

/// Waits for Ctrl-C or SIGTERM (then `Ok`), or for the operator to exit (an error).
async fn wait_for_signal_or_exit(operator: &mut Process) -> Result<(), SandboxError> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term =
        signal(SignalKind::terminate()).map_err(|e| SandboxError::Other(format!("cannot watch SIGTERM: {e}")))?;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => return Ok(()),
            _ = term.recv() => return Ok(()),
            _ = tick.tick() => {
                if let Some(status) = operator.exited() {
                    return Err(SandboxError::Other(format!(
                        "the operator exited with {status}; its last log lines:\n{}",
                        operator.log_tail(20)
                    )));
                }
            }
        }
    }
}

fn free_port() -> Result<u16, SandboxError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| SandboxError::Other(format!("no free port on 127.0.0.1: {e}")))
}
