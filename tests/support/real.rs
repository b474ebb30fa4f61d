//! A real control plane for one test binary, as controller-runtime's envtest gives one: etcd,
//! kube-apiserver and kube-controller-manager (garbage collector, namespace and ClusterRole
//! aggregation controllers) built by `hack/controlplane/build` from pinned Go modules, started on
//! 127.0.0.1 by [`clusterstack::controlplane`], with our CRDs and Cluster API's installed, the
//! operator's ServiceAccount with exactly the RBAC `install --export` grants, and kube-apiserver's
//! audit log of what that ServiceAccount did.
//!
//! The operator runs as the real binary (`RealOperator`), under its ServiceAccount's token, so a
//! test can `kill -9` it. Scenarios run one after the other through [`run_scenarios`] (the test
//! binaries are `harness = false`): one operator at a time, each scenario in namespaces of its own,
//! and the control plane is stopped however the scenarios end.
//!
//! Without the built control plane a local run prints a loud SKIPPED line; under `CI=true` it
//! fails (`.ci/run` builds it).

use std::collections::BTreeSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clusterstack::cli::sandbox::setup;
use clusterstack::controlplane::capi::ClusterApi;
use clusterstack::controlplane::process::Process;
use clusterstack::controlplane::{Binaries, ControlPlane, Options};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::discovery::{ApiCapabilities, Discovery, Scope};
use kube::{Api, Client};
use serde_json::{Value, json};

/// The operator's namespace (as `install --export` defaults it).
pub const OPERATOR_NS: &str = "clusterstack-system";
/// How long waits for the real thing may take (two busy cores).
pub const WAIT: Duration = Duration::from_secs(90);

/// The built programs, or `None` after a loud SKIPPED line (a panic under `CI=true`).
pub fn binaries_or_skip(test: &str) -> Option<Binaries> {
    match Binaries::find(&Binaries::default_dir()) {
        Ok(b) => Some(b),
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{test}: {e} (CI=true: .ci/run builds it)");
            }
            eprintln!("\n*** SKIPPED {test}: {e} ***\n");
            None
        }
    }
}

/// A running control plane prepared for the operator.
pub struct RealCluster {
    /// Cluster API's managers, in the binaries that run them.
    pub capi: Option<ClusterApi>,
    pub cp: ControlPlane,
    /// The operator ServiceAccount's kubeconfig.
    pub operator_kubeconfig: PathBuf,
    /// The directory of the built `releases/` copies and scratch files.
    pub scratch: tempfile::TempDir,
}

impl RealCluster {
    /// Starts the control plane, installs our CRDs and Cluster API's, and creates the operator's
    /// identity (the audit log records what it does).
    pub async fn start(bins: Binaries) -> RealCluster {
        Self::start_with(bins, false).await
    }

    /// [`RealCluster::start`], and with `capi` Cluster API's managers on it (their CRDs then
    /// converted by them, their webhooks registered).
    pub async fn start_with(bins: Binaries, capi: bool) -> RealCluster {
        clusterstack::install_crypto_provider();
        let options = Options { audit_users: vec![setup::operator_user(OPERATOR_NS)], ..Default::default() };
        let cp = ControlPlane::start(bins, options, &mut |step| eprintln!("control plane: {step}"))
            .await
            .unwrap_or_else(|e| panic!("the control plane: {e}"));
        let client = cp.admin_client().await.expect("an admin client");
        let mut crds = setup::our_crds();
        crds.extend(setup::capi_crds(&cp.binaries().capi_config).expect("Cluster API's CRDs"));
        setup::install_crds(&client, &crds).await.unwrap_or_else(|e| panic!("installing the CRDs: {e}"));
        let operator_kubeconfig = cp.dir().join("operator.kubeconfig");
        setup::install_operator_identity(
            &cp,
            &client,
            OPERATOR_NS,
            Duration::from_secs(24 * 3600),
            &operator_kubeconfig,
        )
        .await
        .unwrap_or_else(|e| panic!("the operator's identity: {e}"));
        let capi = if capi {
            let managers = cp.binaries().capi.clone().expect("Cluster API's managers are built");
            let config = cp.binaries().capi_config.clone();
            Some(
                ClusterApi::start(&cp, &managers, &config, &mut |step| eprintln!("cluster api: {step}"))
                    .await
                    .unwrap_or_else(|e| panic!("Cluster API: {e}")),
            )
        } else {
            None
        };
        RealCluster { capi, cp, operator_kubeconfig, scratch: tempfile::tempdir().expect("a scratch directory") }
    }

    /// A client as `admin`.
    pub async fn admin(&self) -> Kube {
        Kube::new(self.cp.admin_client().await.expect("an admin client"))
    }

    /// Creates a namespace named `<prefix>-<random>`.
    pub async fn namespace(&self, prefix: &str) -> String {
        let name = format!("{prefix}-{:06x}", rand::random::<u32>() & 0xff_ffff);
        self.admin().await.apply(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})).await;
        name
    }

    /// Deletes a namespace and waits until it is gone (the namespace controller empties it; our
    /// finalizers need the operator), so the next scenario starts clean.
    pub async fn drop_namespace(&self, name: &str) {
        let k = self.admin().await;
        k.delete("v1", "Namespace", None, name).await;
        wait_until(&format!("namespace {name} gone"), WAIT, || async {
            k.get("v1", "Namespace", None, name).await.is_none().then_some(())
        })
        .await;
    }

    /// Runs the control plane's own kubectl as `admin`; panics unless it succeeds.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let out = std::process::Command::new(&self.cp.binaries().kubectl)
            .arg(format!("--kubeconfig={}", self.cp.admin_kubeconfig().display()))
            .args(args)
            .output()
            .expect("kubectl runs");
        assert!(out.status.success(), "kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Starts the operator binary under its ServiceAccount with `args` after the defaults
    /// (fast polls, ports on 127.0.0.1, a cache of its own unless `--cache-dir` is given).
    pub fn operator(&self, name: &str, args: &[String]) -> RealOperator {
        RealOperator::start(self, name, args)
    }

    /// The operator's audit events so far.
    pub fn audit(&self) -> Vec<AuditEvent> {
        let path = self.cp.audit_log().expect("the audit log is on");
        audit_events(path, &setup::operator_user(OPERATOR_NS))
    }
}

/// A running operator process.
pub struct RealOperator {
    process: Option<Process>,
    pub metrics_port: u16,
    pub health_port: u16,
    log: PathBuf,
    _cache: Option<tempfile::TempDir>,
}

/// The `clusterstack` binary: the one cargo built for this test, or (in an example, which cargo
/// tells nothing of it) the one beside the examples' directory.
pub fn operator_binary() -> PathBuf {
    if let Some(path) = option_env!("CARGO_BIN_EXE_clusterstack") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("this program's path");
    exe.parent().and_then(Path::parent).map(|d| d.join("clusterstack")).expect("the examples' directory has a parent")
}

/// Two distinct free ports: both listeners are held until both are known (one after the
/// other, the second bind may be given the port the first just released).
fn free_ports() -> (u16, u16) {
    let bind = || std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    let (a, b) = (bind(), bind());
    let port = |l: &std::net::TcpListener| l.local_addr().expect("a bound port").port();
    (port(&a), port(&b))
}

impl RealOperator {
    fn start(cluster: &RealCluster, name: &str, args: &[String]) -> RealOperator {
        let (metrics_port, health_port) = free_ports();
        let cache = (!args.iter().any(|a| a.starts_with("--cache-dir"))).then(|| tempfile::tempdir().expect("a cache"));
        let mut all = vec![
            "operator".to_string(),
            format!("--metrics-addr=127.0.0.1:{metrics_port}"),
            format!("--health-addr=127.0.0.1:{health_port}"),
            "--poll-interval=1s".into(),
        ];
        if let Some(c) = &cache {
            all.push(format!("--cache-dir={}", c.path().display()));
        }
        all.extend(args.iter().cloned());
        let log = cluster.scratch.path().join(format!("operator-{name}-{}.log", rand::random::<u32>()));
        let kubeconfig = cluster.operator_kubeconfig.display().to_string();
        // `CLUSTERSTACK_E2E_LOG=debug` to see more of the operator when a scenario fails.
        let filter = std::env::var("CLUSTERSTACK_E2E_LOG").unwrap_or_else(|_| "info".into());
        let process = Process::start(
            name,
            &operator_binary(),
            &all,
            &log,
            &[
                ("KUBECONFIG", kubeconfig.as_str()),
                ("POD_NAMESPACE", OPERATOR_NS),
                ("HOSTNAME", name),
                ("RUST_LOG", filter.as_str()),
                ("NO_COLOR", "1"),
            ],
        )
        .expect("the operator starts");
        RealOperator { process: Some(process), metrics_port, health_port, log, _cache: cache }
    }

    /// `kill -9`.
    pub fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.kill();
        }
    }

    /// SIGSTOP / SIGCONT: the process freezes (its connections stay open) and thaws.
    pub fn pause(&self, paused: bool) {
        if let Some(p) = &self.process {
            p.signal(if paused { libc::SIGSTOP } else { libc::SIGCONT });
        }
    }

    /// SIGTERM and wait.
    pub fn stop(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.stop(Duration::from_secs(30));
        }
    }

    /// Whether it has exited.
    pub fn exited(&mut self) -> bool {
        self.process.as_mut().is_none_or(|p| p.exited().is_some())
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `/metrics`.
    pub async fn metrics(&self) -> String {
        reqwest::get(format!("http://127.0.0.1:{}/metrics", self.metrics_port))
            .await
            .expect("/metrics answers")
            .text()
            .await
            .expect("/metrics text")
    }
}

impl Drop for RealOperator {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A kube client with JSON helpers that resolve kinds through discovery.
#[derive(Clone)]
pub struct Kube {
    pub client: Client,
    discovery: Arc<tokio::sync::Mutex<Option<Discovery>>>,
}

impl Kube {
    pub fn new(client: Client) -> Self {
        Self { client, discovery: Arc::new(tokio::sync::Mutex::new(None)) }
    }

    /// The resource of `api_version`/`kind`, refreshing discovery once when unknown.
    pub async fn resource(&self, api_version: &str, kind: &str) -> (ApiResource, bool) {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let mut d = self.discovery.lock().await;
        for fresh in [false, true] {
            if fresh || d.is_none() {
                *d = Some(Discovery::new(self.client.clone()).run_aggregated().await.expect("discovery"));
            }
            if let Some((r, caps)) = d.as_ref().and_then(|d| d.resolve_gvk(&gvk)) {
                let caps: ApiCapabilities = caps;
                return (r, caps.scope == Scope::Namespaced);
            }
        }
        panic!("the server does not serve {api_version} {kind}");
    }

    pub async fn api(&self, api_version: &str, kind: &str, ns: Option<&str>) -> Api<DynamicObject> {
        let (r, namespaced) = self.resource(api_version, kind).await;
        match (namespaced, ns) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &r),
            _ => Api::all_with(self.client.clone(), &r),
        }
    }

    fn target(obj: &Value) -> (String, String, Option<String>, String) {
        (
            obj["apiVersion"].as_str().unwrap_or_default().to_string(),
            obj["kind"].as_str().unwrap_or_default().to_string(),
            obj["metadata"]["namespace"].as_str().map(str::to_string),
            obj["metadata"]["name"].as_str().unwrap_or_default().to_string(),
        )
    }

    /// Server-side apply as `manager`, forced.
    pub async fn apply_as(&self, obj: &Value, manager: &str) -> Value {
        self.try_apply_as(obj, manager, true).await.unwrap_or_else(|e| panic!("applying {obj}: {e}"))
    }

    /// Server-side apply as `manager`.
    pub async fn try_apply_as(&self, obj: &Value, manager: &str, force: bool) -> Result<Value, kube::Error> {
        let (av, kind, ns, name) = Self::target(obj);
        let mut params = PatchParams::apply(manager);
        params.force = force;
        let api = self.api(&av, &kind, ns.as_deref()).await;
        api.patch(&name, &params, &Patch::Apply(obj)).await.map(|o| serde_json::to_value(o).unwrap_or_default())
    }

    /// Server-side apply as the test (`clusterstack-e2e`).
    pub async fn apply(&self, obj: &Value) -> Value {
        self.apply_as(obj, "clusterstack-e2e").await
    }

    /// Create.
    pub async fn create(&self, obj: &Value) -> Result<Value, kube::Error> {
        let (av, kind, ns, _) = Self::target(obj);
        let api = self.api(&av, &kind, ns.as_deref()).await;
        let dynamic: DynamicObject = serde_json::from_value(obj.clone()).expect("an object");
        api.create(&PostParams::default(), &dynamic).await.map(|o| serde_json::to_value(o).unwrap_or_default())
    }

    /// A JSON merge patch (field manager `clusterstack-e2e`).
    pub async fn merge(
        &self,
        av: &str,
        kind: &str,
        ns: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> Result<Value, kube::Error> {
        self.merge_into(av, kind, ns, name, patch, false).await
    }

    /// A JSON merge patch of the status subresource (what a controller of the object writes).
    pub async fn merge_status(
        &self,
        av: &str,
        kind: &str,
        ns: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> Result<Value, kube::Error> {
        self.merge_into(av, kind, ns, name, patch, true).await
    }

    async fn merge_into(
        &self,
        av: &str,
        kind: &str,
        ns: Option<&str>,
        name: &str,
        patch: &Value,
        status: bool,
    ) -> Result<Value, kube::Error> {
        let api = self.api(av, kind, ns).await;
        let params = PatchParams { field_manager: Some("clusterstack-e2e".into()), ..Default::default() };
        let answer = if status {
            api.patch_status(name, &params, &Patch::Merge(patch)).await
        } else {
            api.patch(name, &params, &Patch::Merge(patch)).await
        };
        answer.map(|o| serde_json::to_value(o).unwrap_or_default())
    }

    pub async fn get(&self, av: &str, kind: &str, ns: Option<&str>, name: &str) -> Option<Value> {
        let api = self.api(av, kind, ns).await;
        api.get_opt(name).await.expect("get").map(|o| serde_json::to_value(o).unwrap_or_default())
    }

    pub async fn list(&self, av: &str, kind: &str, ns: Option<&str>, labels: Option<&str>) -> Vec<Value> {
        let api = self.api(av, kind, ns).await;
        let mut lp = ListParams::default();
        if let Some(l) = labels {
            lp = lp.labels(l);
        }
        api.list(&lp)
            .await
            .expect("list")
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).unwrap_or_default())
            .collect()
    }

    pub async fn delete(&self, av: &str, kind: &str, ns: Option<&str>, name: &str) {
        let api = self.api(av, kind, ns).await;
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => panic!("deleting {kind} {name}: {e}"),
        }
    }
}

/// Polls `check` every 200 ms until it gives `Some`; panics with `what` after `limit`.
pub async fn wait_until<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out ({limit:?}) waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// One request of the audited user, as kube-apiserver's audit log says it was answered.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AuditEvent {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub code: i64,
    pub uri: String,
    /// The authorizer's decision (`allow`, `forbid`).
    pub decision: String,
    /// The answer's message (why a request was refused).
    pub message: String,
}

/// The events of `user` in an audit log (JSON lines).
pub fn audit_events(path: &Path, user: &str) -> Vec<AuditEvent> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["user"]["username"] == user && e["stage"] == "ResponseComplete")
        .map(|e| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
            AuditEvent {
                verb: s(&e["verb"]),
                group: s(&e["objectRef"]["apiGroup"]),
                resource: s(&e["objectRef"]["resource"]),
                subresource: s(&e["objectRef"]["subresource"]),
                namespace: s(&e["objectRef"]["namespace"]),
                name: s(&e["objectRef"]["name"]),
                code: e["responseStatus"]["code"].as_i64().unwrap_or_default(),
                uri: s(&e["requestURI"]),
                decision: s(&e["annotations"]["authorization.k8s.io/decision"]),
                message: s(&e["responseStatus"]["message"]),
            }
        })
        .collect()
}

/// `(group, resource[/subresource], verb)` of every rule in `roles` (Role and ClusterRole objects).
pub fn granted(roles: &[Value]) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for role in roles {
        for rule in role["rules"].as_array().into_iter().flatten() {
            for g in rule["apiGroups"].as_array().into_iter().flatten() {
                for r in rule["resources"].as_array().into_iter().flatten() {
                    for v in rule["verbs"].as_array().into_iter().flatten() {
                        out.insert((
                            g.as_str().unwrap_or_default().into(),
                            r.as_str().unwrap_or_default().into(),
                            v.as_str().unwrap_or_default().into(),
                        ));
                    }
                }
            }
        }
    }
    out
}

/// A scenario's body.
pub type ScenarioFn = fn(Arc<RealCluster>) -> Pin<Box<dyn Future<Output = ()> + Send>>;
/// A scenario: a name and its body.
pub type Scenario = (&'static str, ScenarioFn);
/// What runs after every scenario, with each one's name and whether it passed.
pub type Finally = fn(Arc<RealCluster>, Vec<(String, bool)>) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs a `harness = false` test binary's scenarios one after the other against one control
/// plane, like libtest: `cargo test NAME` filters, `--list` lists. A failing scenario prints its
/// panic and the control plane's log tails; the control plane is stopped at the end whatever
/// happened. `finally` runs after every selected scenario, with the results (name, passed).
/// Returns the process exit code.
/// A scenario as the runner takes it (the macro's type check).
pub fn scenario(f: ScenarioFn) -> ScenarioFn {
    f
}

/// `scenarios![a, b]`: the async fns `a` and `b` as named [`Scenario`]s.
#[allow(unused_macros)]
macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        [$((stringify!($name), $crate::support::real::scenario(|c| Box::pin($name(c)))) as $crate::support::real::Scenario),*]
    };
}
#[allow(unused_imports)]
pub(crate) use scenarios;

pub fn run_scenarios(
    binary: &str,
    scenarios: &[Scenario],
    timeout: Duration,
    finally: Option<Finally>,
) -> std::process::ExitCode {
    run(binary, scenarios, timeout, finally, false)
}

/// [`run_scenarios`] with Cluster API's managers running too. Call it first thing in `main`:
/// it moves the process into a network namespace of its own (loopback only) before any thread
/// starts, since Cluster API's servers listen on every interface.
pub fn run_capi_scenarios(binary: &str, scenarios: &[Scenario], timeout: Duration) -> std::process::ExitCode {
    if !std::env::args().any(|a| a == "--list")
        && let Err(e) = clusterstack::controlplane::netns::isolate()
    {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{binary}: cannot isolate the network: {e} (Cluster API's servers would listen on every interface)");
        }
        eprintln!(
            "\n*** {binary}: no network namespace ({e}): Cluster API's webhook and CAPD's servers listen on every interface of this machine ***\n"
        );
    }
    run(binary, scenarios, timeout, None, true)
}

fn run(
    binary: &str,
    scenarios: &[Scenario],
    timeout: Duration,
    finally: Option<Finally>,
    capi: bool,
) -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in scenarios {
            println!("{name}: test");
        }
        return std::process::ExitCode::SUCCESS;
    }
    // Flags of libtest we do not need are accepted and ignored; words filter.
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let exact = args.iter().any(|a| a == "--exact");
    let selected: Vec<&Scenario> = scenarios
        .iter()
        .filter(|(n, _)| {
            filters.is_empty() || filters.iter().any(|f| if exact { *n == f.as_str() } else { n.contains(f.as_str()) })
        })
        .collect();
    if selected.is_empty() {
        println!("\nrunning 0 tests\n\ntest result: ok. 0 passed; 0 failed\n");
        return std::process::ExitCode::SUCCESS;
    }
    let Some(bins) = binaries_or_skip(binary) else {
        return std::process::ExitCode::SUCCESS;
    };
    if capi && bins.capi.is_none() {
        let e = "Cluster API's managers are not built: run hack/controlplane/build --capi";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{binary}: {e} (CI=true: .ci/run builds them)");
        }
        eprintln!("\n*** SKIPPED {binary}: {e} ***\n");
        return std::process::ExitCode::SUCCESS;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let failed = runtime.block_on(async move {
        println!("\nrunning {} tests (one real control plane)", selected.len());
        let cluster = Arc::new(RealCluster::start_with(bins, capi).await);
        let mut results = Vec::new();
        for (name, body) in selected {
            let start = Instant::now();
            let started_at = std::time::SystemTime::now();
            let task = tokio::spawn(tokio::time::timeout(timeout, body(cluster.clone())));
            let outcome = match task.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(_)) => Err(format!("timed out after {timeout:?}")),
                Err(e) if e.is_panic() => {
                    let p = e.into_panic();
                    Err(p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default())
                }
                Err(e) => Err(e.to_string()),
            };
            match &outcome {
                Ok(()) => println!("test {name} ... ok ({:.1} s)", start.elapsed().as_secs_f64()),
                Err(message) => {
                    println!("test {name} ... FAILED ({:.1} s)\n{message}", start.elapsed().as_secs_f64());
                    print_logs(&cluster, started_at);
                }
            }
            results.push((name.to_string(), outcome.is_ok()));
        }
        if let Some(finally) = finally {
            let task = tokio::spawn(finally(cluster.clone(), results.clone()));
            if let Err(e) = task.await {
                let message = if e.is_panic() {
                    let p = e.into_panic();
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                } else {
                    e.to_string()
                };
                println!("test (after all) ... FAILED\n{message}");
                results.push(("(after all)".into(), false));
            }
        }
        let failed: Vec<&String> = results.iter().filter(|(_, ok)| !ok).map(|(n, _)| n).collect();
        let passed = results.len() - failed.len();
        println!(
            "\ntest result: {}. {passed} passed; {} failed{}\n",
            if failed.is_empty() { "ok" } else { "FAILED" },
            failed.len(),
            if failed.is_empty() { String::new() } else { format!(": {failed:?}") }
        );
        match Arc::try_unwrap(cluster) {
            Ok(c) => {
                if let Some(capi) = c.capi {
                    capi.stop();
                }
                c.cp.stop()
            }
            Err(_) => eprintln!("a scenario still holds the control plane; it stops with this process"),
        }
        !failed.is_empty()
    });
    if failed { std::process::ExitCode::FAILURE } else { std::process::ExitCode::SUCCESS }
}

/// The last lines of the operators' logs written since `since`, and of the control plane's
/// (without kube-apiserver's gRPC reconnection chatter), for a failed scenario.
fn print_logs(cluster: &RealCluster, since: std::time::SystemTime) {
    // What the cluster says about our objects, as a person would look.
    for what in ["clusterstacks", "clusterstackreleases"] {
        let out = std::process::Command::new(&cluster.cp.binaries().kubectl)
            .arg(format!("--kubeconfig={}", cluster.cp.admin_kubeconfig().display()))
            .args(["get", what, "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}:{range .status.conditions[*]} {.type}={.status} {.reason}: {.message};{end}{\"\\n\"}{end}"])
            .output();
        if let Ok(out) = out {
            println!(
                "--- kubectl get {what} -A ---\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let mut operators: Vec<PathBuf> = std::fs::read_dir(cluster.scratch.path())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("operator-"))
        .filter(|e| e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t >= since))
        .map(|e| e.path())
        .collect();
    operators.sort();
    let capi_logs = cluster.capi.as_ref().map(|c| c.logs()).unwrap_or_default();
    for log in operators.iter().chain(cluster.cp.logs().iter()).chain(capi_logs.iter()) {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> =
            text.lines().filter(|l| !l.contains("grpc: addrConn") && !l.contains("loopback range")).collect();
        // `CLUSTERSTACK_E2E_LOG_LINES=N` shows more of each log.
        let keep = std::env::var("CLUSTERSTACK_E2E_LOG_LINES").ok().and_then(|n| n.parse().ok()).unwrap_or(25);
        let tail = lines[lines.len().saturating_sub(keep)..].join("\n");
        println!("--- last lines of {} ---\n{tail}", log.display());
    }
}
