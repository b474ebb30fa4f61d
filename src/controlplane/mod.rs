//! A real, local Kubernetes control plane: etcd, kube-apiserver and kube-controller-manager (its
//! garbage collector, namespace and ClusterRole aggregation controllers), built from their Go modules at pinned versions
//! (`hack/controlplane/`, see [`binaries`]) and started on 127.0.0.1 with free ports, generated
//! certificates and ServiceAccount keys, the way controller-runtime's envtest starts them.
//!
//! `clusterstack sandbox` runs the operator on one; the end-to-end tests run their scenarios on one
//! per test binary. Every process is stopped when the [`ControlPlane`] is stopped or dropped, and
//! dies with us if we are killed ([`process`]).

pub mod binaries;
pub mod capi;
pub mod kubeconfig;
pub mod netns;
pub mod pki;
pub mod process;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Api;
use kube::api::PostParams;

pub use binaries::Binaries;
use kubeconfig::Credentials;
use pki::{Pki, PkiFiles};
use process::Process;

/// How long each process may take to become ready (generous: two busy cores).
const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// Why the control plane could not be built, started or used.
#[derive(Debug, thiserror::Error)]
pub enum ControlPlaneError {
    #[error(
        "the control plane is not built in {dir} ({component} is missing): run hack/controlplane/build, or `clusterstack sandbox`, which builds it"
    )]
    NotBuilt { dir: PathBuf, component: String },
    #[error("building the control plane failed: {0}")]
    Build(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot generate certificates: {0}")]
    Certificates(String),
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("{name} did not start: {reason}\n--- last lines of {log} ---\n{tail}")]
    Start { name: String, reason: String, log: String, tail: String },
    #[error("{0}")]
    Api(String),
}

/// What to start, and how.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The state directory (data, certificates, logs, kubeconfigs); `None`: a temporary one,
    /// removed when the control plane stops.
    pub dir: Option<PathBuf>,
    /// Users whose requests kube-apiserver writes to its audit log (`audit.log` in the state
    /// directory, JSON lines, level Metadata): what they did and what they were answered.
    pub audit_users: Vec<String>,
    /// Start no kube-controller-manager (no garbage collection, namespaces never finish deleting).
    pub without_controller_manager: bool,
}

/// The state directory: ours to remove, or the caller's to keep.
#[derive(Debug)]
enum State {
    Temporary(tempfile::TempDir),
    Kept(PathBuf),
}

impl State {
    fn path(&self) -> &Path {
        match self {
            State::Temporary(t) => t.path(),
            State::Kept(p) => p,
        }
    }
}

/// A running control plane.
#[derive(Debug)]
pub struct ControlPlane {
    // Field order is drop order: processes stop before the state directory goes. Behind locks so
    // that a shared control plane can restart kube-apiserver.
    controller_manager: Mutex<Option<Process>>,
    apiserver: Mutex<Option<Process>>,
    etcd: Mutex<Option<Process>>,
    bins: Binaries,
    pki: Pki,
    files: PkiFiles,
    /// `https://127.0.0.1:<port>`.
    server: String,
    etcd_url: String,
    apiserver_args: Vec<String>,
    admin_kubeconfig: PathBuf,
    audit_log: Option<PathBuf>,
    state: State,
}

/// A free TCP port on 127.0.0.1 (free when asked; the program binding it follows at once).
fn free_port() -> Result<u16, ControlPlaneError> {
    let l = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| ControlPlaneError::Io { path: PathBuf::from("127.0.0.1:0"), source: e })?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| ControlPlaneError::Io { path: PathBuf::from("127.0.0.1:0"), source: e })
}

/// The lock of a process slot (a poisoned lock still holds the process).
fn lock(m: &Mutex<Option<Process>>) -> std::sync::MutexGuard<'_, Option<Process>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ControlPlaneError + '_ {
    move |source| ControlPlaneError::Io { path: path.to_path_buf(), source }
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver and (unless asked not to) kube-controller-manager, and waits
    /// until kube-apiserver is ready. `progress` hears each step.
    pub async fn start(
        bins: Binaries,
        options: Options,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Self, ControlPlaneError> {
        let state = match &options.dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).map_err(io(dir))?;
                State::Kept(dir.clone())
            }
            None => State::Temporary(
                tempfile::Builder::new()
                    .prefix("clusterstack-controlplane-")
                    .tempdir()
                    .map_err(io(&std::env::temp_dir()))?,
            ),
        };
        let dir = state.path().to_path_buf();
        let pki = Pki::generate()?;
        let pki_dir = dir.join("pki");
        std::fs::create_dir_all(&pki_dir).map_err(io(&pki_dir))?;
        let files = pki.write(&pki_dir)?;

        let (etcd_port, peer_port, api_port) = (free_port()?, free_port()?, free_port()?);
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let server = format!("https://127.0.0.1:{api_port}");
        let admin_kubeconfig = dir.join("admin.kubeconfig");
        kubeconfig::write(
            &admin_kubeconfig,
            &kubeconfig::kubeconfig(
                "clusterstack-sandbox",
                &server,
                &pki.serving_ca.cert,
                "admin",
                Credentials::Certificate(&pki.admin),
            ),
        )?;

        let audit_log = if options.audit_users.is_empty() {
            None
        } else {
            let policy = dir.join("audit-policy.yaml");
            let users: Vec<String> = options.audit_users.iter().map(|u| format!("{u:?}")).collect();
            let text = format!(
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived, ResponseStarted]\nrules:\n- level: Metadata\n  users: [{}]\n- level: None\n",
                users.join(", ")
            );
            std::fs::write(&policy, text).map_err(io(&policy))?;
            Some((policy, dir.join("audit.log")))
        };

        let mut apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--secure-port={api_port}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--tls-cert-file={}", files.apiserver_cert.display()),
            format!("--tls-private-key-file={}", files.apiserver_key.display()),
            format!("--client-ca-file={}", files.client_ca.display()),
            format!("--service-account-issuer={server}"),
            format!("--service-account-key-file={}", files.sa_public.display()),
            format!("--service-account-signing-key-file={}", files.sa_key.display()),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--allow-privileged=true".into(),
            "--authorization-mode=RBAC".into(),
            // Nothing creates a namespace's `default` ServiceAccount without that controller.
            "--disable-admission-plugins=ServiceAccount".into(),
            // As strict as the strictest clusters (OpenShift enables it): setting
            // blockOwnerDeletion needs `update` on the owner's finalizers.
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement".into(),
            format!("--cert-dir={}", pki_dir.display()),
            "--profiling=false".into(),
        ];
        if let Some((policy, log)) = &audit_log {
            apiserver_args.push(format!("--audit-policy-file={}", policy.display()));
            apiserver_args.push(format!("--audit-log-path={}", log.display()));
            apiserver_args.push("--audit-log-format=json".into());
            apiserver_args.push("--audit-log-mode=blocking".into());
        }

        let this = Self {
            controller_manager: Mutex::new(None),
            apiserver: Mutex::new(None),
            etcd: Mutex::new(None),
            bins,
            pki,
            files,
            server,
            etcd_url,
            apiserver_args,
            admin_kubeconfig,
            audit_log: audit_log.map(|(_, log)| log),
            state,
        };

        progress(&format!("starting etcd on 127.0.0.1:{etcd_port}"));
        let data = dir.join("etcd");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let etcd_args = vec![
            "--name=default".to_string(),
            format!("--data-dir={}", data.display()),
            format!("--listen-client-urls={}", this.etcd_url),
            format!("--advertise-client-urls={}", this.etcd_url),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster=default={peer}"),
            // Test data: durability is not worth an fsync per write on a shared disk.
            "--unsafe-no-fsync=true".into(),
            "--log-level=warn".into(),
        ];
        *lock(&this.etcd) = Some(this.spawn("etcd", &this.bins.etcd, &etcd_args)?);
        this.wait_for_etcd().await?;

        progress(&format!("starting kube-apiserver on {}", this.server));
        this.start_apiserver().await?;

        if !options.without_controller_manager {
            progress(
                "starting kube-controller-manager (garbage collector, namespace and ClusterRole aggregation controllers)",
            );
            let args = vec![
                format!("--kubeconfig={}", this.admin_kubeconfig.display()),
                "--leader-elect=false".into(),
                // Aggregated ClusterRoles (the operator's is one) are filled by a controller.
                "--controllers=garbage-collector-controller,namespace-controller,clusterrole-aggregation-controller"
                    .into(),
                "--bind-address=127.0.0.1".into(),
                // "If 0, don't serve HTTPS at all": it needs no port of its own.
                "--secure-port=0".into(),
            ];
            *lock(&this.controller_manager) =
                Some(this.spawn("kube-controller-manager", &this.bins.kube_controller_manager, &args)?);
        }
        Ok(this)
    }

    fn spawn(&self, name: &str, program: &Path, args: &[String]) -> Result<Process, ControlPlaneError> {
        let log = self.state.path().join(format!("{name}.log"));
        Process::start(name, program, args, &log, &[]).map_err(|e| ControlPlaneError::Start {
            name: name.into(),
            reason: e.to_string(),
            log: log.display().to_string(),
            tail: String::new(),
        })
    }

    async fn start_apiserver(&self) -> Result<(), ControlPlaneError> {
        *lock(&self.apiserver) = Some(self.spawn("kube-apiserver", &self.bins.kube_apiserver, &self.apiserver_args)?);
        self.wait_for_apiserver().await
    }

    /// An error if `process` has exited or `start` is past the deadline; `None` while it may
    /// still come up.
    fn still_starting(process: &Mutex<Option<Process>>, start: Instant, reason: &str) -> Option<ControlPlaneError> {
        let mut guard = lock(process);
        let Some(p) = guard.as_mut() else {
            return Some(ControlPlaneError::Api("the process is not started".into()));
        };
        if let Some(status) = p.exited() {
            return Some(Self::start_error(p, &format!("exited with {status}")));
        }
        (start.elapsed() > READY_TIMEOUT).then(|| Self::start_error(p, reason))
    }

    /// An error naming a process that did not come up, with its last log lines.
    fn start_error(p: &Process, reason: &str) -> ControlPlaneError {
        ControlPlaneError::Start {
            name: p.name().into(),
            reason: reason.into(),
            log: p.log().display().to_string(),
            tail: p.log_tail(30),
        }
    }

    async fn wait_for_etcd(&self) -> Result<(), ControlPlaneError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| ControlPlaneError::Api(e.to_string()))?;
        let url = format!("{}/health", self.etcd_url);
        let start = Instant::now();
        loop {
            if let Ok(r) = http.get(&url).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            if let Some(e) = Self::still_starting(&self.etcd, start, "not healthy in time") {
                return Err(e);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn wait_for_apiserver(&self) -> Result<(), ControlPlaneError> {
        let client = self.admin_client().await?;
        let start = Instant::now();
        loop {
            let request =
                http::Request::get("/readyz").body(Vec::new()).map_err(|e| ControlPlaneError::Api(e.to_string()))?;
            let last = match client.request_text(request).await {
                Ok(text) if text.trim() == "ok" => return Ok(()),
                Ok(text) => text,
                Err(e) => e.to_string(),
            };
            if let Some(e) = Self::still_starting(&self.apiserver, start, &format!("not ready in time: {last}")) {
                return Err(e);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// etcd's client URL.
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        self.state.path()
    }

    /// The programs it runs (kubectl among them).
    pub fn binaries(&self) -> &Binaries {
        &self.bins
    }

    /// The kubeconfig of `admin` (`system:masters`).
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// The audit log, when users are audited.
    pub fn audit_log(&self) -> Option<&Path> {
        self.audit_log.as_deref()
    }

    /// The serving CA (PEM) clients trust.
    pub fn ca_pem(&self) -> &str {
        &self.pki.serving_ca.cert
    }

    /// A client as `admin`.
    pub async fn admin_client(&self) -> Result<kube::Client, ControlPlaneError> {
        kubeconfig::client(&self.admin_kubeconfig).await
    }

    /// Writes a kubeconfig for `user` in `groups` (a client certificate) to `path`.
    pub fn user_kubeconfig(&self, user: &str, groups: &[&str], path: &Path) -> Result<(), ControlPlaneError> {
        let cert = self.pki.client_cert(user, groups)?;
        kubeconfig::write(
            path,
            &kubeconfig::kubeconfig(
                "clusterstack-sandbox",
                &self.server,
                self.ca_pem(),
                user,
                Credentials::Certificate(&cert),
            ),
        )
    }

    /// Writes a kubeconfig for the ServiceAccount `namespace/name` (which must exist) to `path`:
    /// a token from the TokenRequest API, valid `valid_for`, as a pod's projected token is.
    pub async fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
        valid_for: Duration,
        path: &Path,
    ) -> Result<(), ControlPlaneError> {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.admin_client().await?, namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                expiration_seconds: Some(i64::try_from(valid_for.as_secs()).unwrap_or(i64::MAX)),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .map_err(|e| ControlPlaneError::Api(format!("TokenRequest for {namespace}/{name}: {e}")))?;
        let token = answer.status.map(|s| s.token).ok_or_else(|| {
            ControlPlaneError::Api(format!("TokenRequest for {namespace}/{name}: no token in the answer"))
        })?;
        let user = format!("system:serviceaccount:{namespace}:{name}");
        kubeconfig::write(
            path,
            &kubeconfig::kubeconfig(
                "clusterstack-sandbox",
                &self.server,
                self.ca_pem(),
                &user,
                Credentials::Token(&token),
            ),
        )
    }

    /// Stops kube-apiserver (every watch ends) and starts it again on the same port and etcd.
    pub async fn restart_apiserver(&self) -> Result<(), ControlPlaneError> {
        let old = lock(&self.apiserver).take();
        if let Some(mut p) = old {
            p.stop(Duration::from_secs(30));
        }
        self.start_apiserver().await
    }

    /// Runs `etcdctl` against our etcd; its standard output.
    pub fn etcdctl(&self, args: &[&str]) -> Result<String, ControlPlaneError> {
        let out = std::process::Command::new(&self.bins.etcdctl)
            .arg(format!("--endpoints={}", self.etcd_url))
            .args(args)
            .output()
            .map_err(io(&self.bins.etcdctl))?;
        if !out.status.success() {
            return Err(ControlPlaneError::Api(format!(
                "etcdctl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Compacts etcd's history up to its current revision (what kube-apiserver does every five
    /// minutes): older resource versions are gone. Returns the revision.
    pub fn compact_etcd(&self) -> Result<i64, ControlPlaneError> {
        let status = self.etcdctl(&["endpoint", "status", "--write-out=json"])?;
        let parsed: serde_json::Value = serde_json::from_str(&status)
            .map_err(|e| ControlPlaneError::Api(format!("etcdctl endpoint status: {e}")))?;
        let revision = parsed[0]["Status"]["header"]["revision"]
            .as_i64()
            .ok_or_else(|| ControlPlaneError::Api(format!("etcdctl endpoint status: no revision in {status}")))?;
        self.etcdctl(&["compact", &revision.to_string(), "--physical"])?;
        Ok(revision)
    }

    /// The first process that has died, with its log: a control plane that lost a process is
    /// broken, and a test should say so instead of timing out.
    pub fn check(&self) -> Result<(), ControlPlaneError> {
        for process in [&self.etcd, &self.apiserver, &self.controller_manager] {
            if let Some(p) = lock(process).as_mut()
                && let Some(status) = p.exited()
            {
                return Err(Self::start_error(p, &format!("exited with {status}")));
            }
        }
        Ok(())
    }

    /// The log files of its processes.
    /// The name and process id of each running program (etcd, kube-apiserver,
    /// kube-controller-manager): benchmarks read their resident memory.
    pub fn pids(&self) -> Vec<(String, u32)> {
        [&self.etcd, &self.apiserver, &self.controller_manager]
            .into_iter()
            .filter_map(|p| lock(p).as_ref().map(|p| (p.name().to_string(), p.pid())))
            .collect()
    }

    pub fn logs(&self) -> Vec<PathBuf> {
        [&self.etcd, &self.apiserver, &self.controller_manager]
            .into_iter()
            .filter_map(|p| lock(p).as_ref().map(|p| p.log().to_path_buf()))
            .collect()
    }

    /// Stops every process in order (controller manager, API server, etcd) and removes a
    /// temporary state directory.
    pub fn stop(self) {
        for process in [&self.controller_manager, &self.apiserver, &self.etcd] {
            let taken = lock(process).take();
            if let Some(mut p) = taken {
                p.stop(Duration::from_secs(10));
            }
        }
    }
}

/// Another kube-apiserver on the same etcd under a key prefix of its own: a second, empty cluster
/// (no controller manager) for the addons of a workload Cluster. Stopped when dropped.
#[derive(Debug)]
pub struct ExtraApiServer {
    process: Process,
    server: String,
    kubeconfig: String,
    kubeconfig_path: PathBuf,
}

impl ExtraApiServer {
    /// `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// An admin kubeconfig of it (YAML).
    pub fn kubeconfig(&self) -> &str {
        &self.kubeconfig
    }

    /// Where its admin kubeconfig is written (in the control plane's state directory).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// Its log file.
    pub fn log(&self) -> &Path {
        self.process.log()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// SIGSTOP / SIGCONT: it stops answering (connections stay open), then answers again.
    pub fn pause(&self, paused: bool) {
        self.process.signal(if paused { libc::SIGSTOP } else { libc::SIGCONT });
    }
}

impl ControlPlane {
    /// Starts an [`ExtraApiServer`] named `name` (its etcd prefix `/clusterstack-<name>`, its log
    /// `kube-apiserver-<name>.log`) and waits until it is ready.
    pub async fn start_extra_apiserver(&self, name: &str) -> Result<ExtraApiServer, ControlPlaneError> {
        let port = free_port()?;
        let server = format!("https://127.0.0.1:{port}");
        let mut args: Vec<String> = self
            .apiserver_args
            .iter()
            .filter(|a| !a.starts_with("--audit-") && !a.starts_with("--secure-port="))
            .cloned()
            .collect();
        args.push(format!("--secure-port={port}"));
        args.push(format!("--etcd-prefix=/clusterstack-{name}"));
        let text = serde_json::to_string(&kubeconfig::kubeconfig(
            name,
            &server,
            &self.pki.serving_ca.cert,
            "admin",
            Credentials::Certificate(&self.pki.admin),
        ))
        .map_err(|e| ControlPlaneError::Kubeconfig(e.to_string()))?;
        let path = self.dir().join(format!("{name}.kubeconfig"));
        std::fs::write(&path, &text).map_err(io(&path))?;
        let process = self.spawn(&format!("kube-apiserver-{name}"), &self.bins.kube_apiserver, &args)?;
        let slot = Mutex::new(Some(process));
        let client = kubeconfig::client(&path).await?;
        let start = Instant::now();
        loop {
            let request =
                http::Request::get("/readyz").body(Vec::new()).map_err(|e| ControlPlaneError::Api(e.to_string()))?;
            let last = match client.request_text(request).await {
                Ok(text) if text.trim() == "ok" => break,
                Ok(text) => text,
                Err(e) => e.to_string(),
            };
            if let Some(e) = Self::still_starting(&slot, start, &format!("not ready in time: {last}")) {
                return Err(e);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let process = lock(&slot).take().ok_or_else(|| ControlPlaneError::Api("the process is gone".into()))?;
        Ok(ExtraApiServer { process, server, kubeconfig: text, kubeconfig_path: path })
    }
}

/// The PKI paths, for callers that start programs of their own against the control plane.
impl ControlPlane {
    pub fn pki_files(&self) -> &PkiFiles {
        &self.files
    }
}
