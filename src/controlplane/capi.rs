//! The real Cluster API on the local control plane: its four managers (core with ClusterTopology
//! and RuntimeSDK on, the kubeadm bootstrap and control-plane providers, CAPD whose in-memory
//! backend provisions Machines without Docker), built from their modules by
//! `hack/controlplane/build --capi`, started the way Cluster API's own envtest starts them:
//!
//! - one CA and a serving certificate for `127.0.0.1`, shared by every manager's webhook server;
//! - each provider's webhook configurations renamed per provider (they all ship the same names)
//!   and pointed at `https://127.0.0.1:<its port>/<path>` with that CA, instead of a Service that
//!   cert-manager would serve;
//! - each provider's multi-version CRDs converted by its own manager at `/convert` (the
//!   kustomize patches `webhook_in_*.yaml` do this in a real install), and labelled with the
//!   contract versions its kustomization adds (the topology controller reads them);
//! - objects are created only after every manager's webhooks answer (they fail closed).
//!
//! Cluster API binds its webhook servers and CAPD its in-memory API servers on every interface
//! (no flag sets the host); the test binaries that run it isolate themselves in a network
//! namespace of their own first ([`super::netns`]), so "every interface" is loopback.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use super::binaries::CapiBinaries;
use super::pki::{self, CertKey};
use super::process::Process;
use super::{ControlPlane, ControlPlaneError, free_port};

/// The field manager of what is installed here.
const MANAGER: &str = "clusterstack-controlplane";
/// How long the managers may take to serve their webhooks (four Go programs on two busy cores).
const READY_TIMEOUT: Duration = Duration::from_secs(240);

/// The providers, in the order they are started; `name` is the config directory the build
/// collected (`<config>/<name>/crd`, `<config>/<name>/webhook`).
pub const PROVIDERS: [&str; 4] = ["core", "bootstrap-kubeadm", "controlplane-kubeadm", "docker"];

fn yaml_docs(path: &Path) -> Result<Vec<Value>, ControlPlaneError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ControlPlaneError::Io { path: path.to_path_buf(), source })?;
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
        .map_err(|e| ControlPlaneError::Api(format!("{}: not YAML: {e}", path.display())))?;
    Ok(docs.into_iter().filter(|d| d.is_object()).collect())
}

/// The labels a kustomization's `labels: [{pairs: {...}}]` puts on every resource.
fn kustomize_labels(path: &Path) -> Result<BTreeMap<String, String>, ControlPlaneError> {
    let mut labels = BTreeMap::new();
    if !path.is_file() {
        return Ok(labels);
    }
    for doc in yaml_docs(path)? {
        for entry in doc["labels"].as_array().into_iter().flatten() {
            for (k, v) in entry["pairs"].as_object().into_iter().flatten() {
                if let Some(v) = v.as_str() {
                    labels.insert(k.clone(), v.to_string());
                }
            }
        }
    }
    Ok(labels)
}

/// Every provider's CRDs, with the labels of its kustomization, as `(provider, CRD)`, sorted by
/// file within a provider.
pub fn crds(config: &Path) -> Result<Vec<(&'static str, Value)>, ControlPlaneError> {
    let mut out = Vec::new();
    for provider in PROVIDERS {
        let dir = config.join(provider).join("crd");
        let labels = kustomize_labels(&dir.join("kustomization.yaml"))?;
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map_err(|source| ControlPlaneError::Io { path: dir.clone(), source })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml") && !p.ends_with("kustomization.yaml"))
            .collect();
        files.sort();
        for file in files {
            for mut crd in yaml_docs(&file)? {
                if crd["kind"] != "CustomResourceDefinition" {
                    continue;
                }
                for (k, v) in &labels {
                    crd["metadata"]["labels"][k] = json!(v);
                }
                out.push((provider, crd));
            }
        }
    }
    Ok(out)
}

/// Makes `crd` converted by the webhook at `url` when it serves more than one version (a
/// single-version CRD needs no conversion, and the API server refuses a webhook that cannot
/// be called for it).
pub fn with_conversion(crd: &mut Value, url: &str, ca_bundle: &str) {
    let versions = crd["spec"]["versions"].as_array().map_or(0, Vec::len);
    if versions > 1 {
        crd["spec"]["conversion"] = json!({
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"url": url, "caBundle": ca_bundle},
                "conversionReviewVersions": ["v1", "v1beta1"],
            }
        });
    }
}

/// A provider's webhook configurations, renamed `capi-<provider>-<name>` and calling
/// `base_url` + each webhook's service path.
pub fn webhook_configurations(provider: &str, manifests: &[Value], base_url: &str, ca_bundle: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for doc in manifests {
        let kind = doc["kind"].as_str().unwrap_or_default();
        if kind != "MutatingWebhookConfiguration" && kind != "ValidatingWebhookConfiguration" {
            continue;
        }
        let mut config = doc.clone();
        let name = doc["metadata"]["name"].as_str().unwrap_or("webhook-configuration");
        config["metadata"] = json!({"name": format!("capi-{provider}-{name}")});
        for webhook in config["webhooks"].as_array_mut().into_iter().flatten() {
            let path = webhook["clientConfig"]["service"]["path"].as_str().unwrap_or("/").to_string();
            webhook["clientConfig"] = json!({"url": format!("{base_url}{path}"), "caBundle": ca_bundle});
        }
        out.push(config);
    }
    out
}

/// One running manager.
#[derive(Debug)]
struct Manager {
    process: Process,
    health_port: u16,
}

/// Cluster API's managers, running against a [`ControlPlane`].
#[derive(Debug)]
pub struct ClusterApi {
    managers: Mutex<Vec<Manager>>,
    dir: PathBuf,
}

/// The lock of the managers (a poisoned lock still holds them).
fn lock(m: &Mutex<Vec<Manager>>) -> std::sync::MutexGuard<'_, Vec<Manager>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ClusterApi {
    /// Installs every provider's CRDs (converted by its manager) and webhook configurations,
    /// starts the four managers as `admin` and waits until each is ready (its webhooks serve).
    pub async fn start(
        cp: &ControlPlane,
        bins: &CapiBinaries,
        config: &Path,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Self, ControlPlaneError> {
        let dir = cp.dir().join("capi");
        let cert_dir = dir.join("webhook-certs");
        std::fs::create_dir_all(&cert_dir)
            .map_err(|source| ControlPlaneError::Io { path: cert_dir.clone(), source })?;
        let (ca, serving): (CertKey, CertKey) =
            pki::serving_pair("clusterstack Cluster API webhook CA", &["127.0.0.1", "localhost"])?;
        pki::write(&cert_dir.join("tls.crt"), &serving.cert, false)?;
        pki::write(&cert_dir.join("tls.key"), &serving.key, true)?;
        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca.cert.as_bytes());

        let ports: Vec<(u16, u16)> =
            PROVIDERS.iter().map(|_| Ok((free_port()?, free_port()?))).collect::<Result<_, ControlPlaneError>>()?;
        let port_of =
            |provider: &str| PROVIDERS.iter().position(|p| *p == provider).map(|i| ports[i].0).unwrap_or_default();

        progress("installing Cluster API's CRDs (converted by its managers) and webhook configurations");
        let client = cp.admin_client().await?;
        let params = PatchParams::apply(MANAGER).force();
        let api_err = |what: String| move |e: kube::Error| ControlPlaneError::Api(format!("{what}: {e}"));
        let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
        let mut names = Vec::new();
        for (provider, mut crd) in crds(config)? {
            let url = format!("https://127.0.0.1:{}/convert", port_of(provider));
            with_conversion(&mut crd, &url, &ca_bundle);
            let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
            crd_api
                .patch(&name, &params, &Patch::Apply(&crd))
                .await
                .map_err(api_err(format!("applying CRD {name}")))?;
            names.push(name);
        }
        wait_established(&crd_api, &names).await?;
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        for provider in PROVIDERS {
            let manifests = yaml_docs(&config.join(provider).join("webhook/manifests.yaml"))?;
            let base = format!("https://127.0.0.1:{}", port_of(provider));
            for c in webhook_configurations(provider, &manifests, &base, &ca_bundle) {
                let name = c["metadata"]["name"].as_str().unwrap_or_default().to_string();
                let what = format!("applying {} {name}", c["kind"].as_str().unwrap_or_default());
                if c["kind"] == "MutatingWebhookConfiguration" {
                    mutating.patch(&name, &params, &Patch::Apply(&c)).await.map_err(api_err(what))?;
                } else {
                    validating.patch(&name, &params, &Patch::Apply(&c)).await.map_err(api_err(what))?;
                }
            }
        }

        let kubeconfig = cp.admin_kubeconfig().display().to_string();
        let this = Self { managers: Mutex::new(Vec::new()), dir: dir.clone() };
        for (i, provider) in PROVIDERS.iter().enumerate() {
            let (webhook_port, health_port) = ports[i];
            let (program, name) = match *provider {
                "core" => (&bins.core, "capi-controller-manager"),
                "bootstrap-kubeadm" => (&bins.kubeadm_bootstrap, "capi-kubeadm-bootstrap"),
                "controlplane-kubeadm" => (&bins.kubeadm_control_plane, "capi-kubeadm-control-plane"),
                _ => (&bins.docker, "capd"),
            };
            let mut args = vec![
                format!("--webhook-port={webhook_port}"),
                format!("--webhook-cert-dir={}", cert_dir.display()),
                format!("--health-addr=127.0.0.1:{health_port}"),
                // "0" turns the metrics/diagnostics server off: nothing here scrapes it.
                "--diagnostics-address=0".into(),
                "--leader-elect=false".into(),
            ];
            args.push(if *provider == "core" {
                "--feature-gates=ClusterTopology=true,RuntimeSDK=true".into()
            } else {
                "--feature-gates=ClusterTopology=true".into()
            });
            progress(&format!("starting {name} (webhooks on 127.0.0.1:{webhook_port})"));
            let log = dir.join(format!("{name}.log"));
            // POD_IP: CAPD's in-memory API servers advertise (and their certificates name) this.
            let env = [("KUBECONFIG", kubeconfig.as_str()), ("POD_IP", "127.0.0.1")];
            let process = Process::start(name, program, &args, &log, &env).map_err(|e| ControlPlaneError::Start {
                name: name.into(),
                reason: e.to_string(),
                log: log.display().to_string(),
                tail: String::new(),
            })?;
            lock(&this.managers).push(Manager { process, health_port });
        }
        this.wait_ready().await?;
        Ok(this)
    }

    async fn wait_ready(&self) -> Result<(), ControlPlaneError> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| ControlPlaneError::Api(e.to_string()))?;
        let ports: Vec<u16> = lock(&self.managers).iter().map(|m| m.health_port).collect();
        let start = Instant::now();
        for (i, port) in ports.into_iter().enumerate() {
            let url = format!("http://127.0.0.1:{port}/readyz");
            loop {
                if let Ok(r) = http.get(&url).send().await
                    && r.status().is_success()
                {
                    break;
                }
                {
                    let mut managers = lock(&self.managers);
                    let m = &mut managers[i];
                    if let Some(status) = m.process.exited() {
                        return Err(ControlPlane::start_error(&m.process, &format!("exited with {status}")));
                    }
                    if start.elapsed() > READY_TIMEOUT {
                        return Err(ControlPlane::start_error(&m.process, "its webhooks are not ready in time"));
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
        Ok(())
    }

    /// The first manager that has died, with its log.
    pub fn check(&self) -> Result<(), ControlPlaneError> {
        for m in lock(&self.managers).iter_mut() {
            if let Some(status) = m.process.exited() {
                return Err(ControlPlane::start_error(&m.process, &format!("exited with {status}")));
            }
        }
        Ok(())
    }

    /// The managers' log files.
    pub fn logs(&self) -> Vec<PathBuf> {
        lock(&self.managers).iter().map(|m| m.process.log().to_path_buf()).collect()
    }

    /// The name and process id of each manager.
    pub fn pids(&self) -> Vec<(String, u32)> {
        lock(&self.managers).iter().map(|m| (m.process.name().to_string(), m.process.pid())).collect()
    }

    /// Where its certificates and logs are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops the managers, the infrastructure provider first.
    pub fn stop(self) {
        let mut managers = std::mem::take(&mut *lock(&self.managers));
        while let Some(mut m) = managers.pop() {
            m.process.stop(Duration::from_secs(10));
        }
    }
}

async fn wait_established(api: &Api<CustomResourceDefinition>, names: &[String]) -> Result<(), ControlPlaneError> {
    let start = Instant::now();
    for name in names {
        loop {
            let crd = api.get(name).await.map_err(|e| ControlPlaneError::Api(format!("reading CRD {name}: {e}")))?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Established" && c.status == "True"));
            if established {
                break;
            }
            if start.elapsed() > Duration::from_secs(120) {
                return Err(ControlPlaneError::Api(format!("CRD {name} is not established after 120 s")));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_configurations_are_renamed_per_provider_and_call_the_local_port() {
        let manifests = vec![
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "validating-webhook-configuration"},
                "webhooks": [{"name": "validation.cluster.cluster.x-k8s.io",
                              "clientConfig": {"service": {"name": "webhook-service", "namespace": "system",
                                                           "path": "/validate-cluster"}}}]
            }),
            json!({"kind": "Service"}),
        ];
        let out = webhook_configurations("core", &manifests, "https://127.0.0.1:1234", "Q0E=");
        assert_eq!(out.len(), 1, "only webhook configurations");
        assert_eq!(out[0]["metadata"]["name"], "capi-core-validating-webhook-configuration");
        assert_eq!(
            out[0]["webhooks"][0]["clientConfig"],
            json!({"url": "https://127.0.0.1:1234/validate-cluster", "caBundle": "Q0E="})
        );
    }

    #[test]
    fn only_multi_version_crds_get_a_conversion_webhook() {
        let mut one = json!({"spec": {"versions": [{"name": "v1beta2"}]}});
        with_conversion(&mut one, "https://127.0.0.1:1/convert", "Q0E=");
        assert!(one["spec"].get("conversion").is_none());
        let mut two = json!({"spec": {"versions": [{"name": "v1beta1"}, {"name": "v1beta2"}]}});
        with_conversion(&mut two, "https://127.0.0.1:1/convert", "Q0E=");
        assert_eq!(two["spec"]["conversion"]["webhook"]["clientConfig"]["url"], "https://127.0.0.1:1/convert");
    }

    #[test]
    fn kustomization_labels_are_read_from_their_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kustomization.yaml");
        std::fs::write(
            &path,
            "labels:\n- pairs:\n    cluster.x-k8s.io/v1beta1: v1beta1\n    cluster.x-k8s.io/v1beta2: v1beta2\nresources: [a.yaml]\n",
        )
        .unwrap();
        let labels = kustomize_labels(&path).unwrap();
        assert_eq!(labels.get("cluster.x-k8s.io/v1beta2").map(String::as_str), Some("v1beta2"));
        assert_eq!(labels.len(), 2);
        assert!(kustomize_labels(&dir.path().join("absent.yaml")).unwrap().is_empty());
    }
}
