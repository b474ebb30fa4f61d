//! Preparing a fresh control plane for the operator, the same way for `clusterstack sandbox` and the
//! end-to-end tests: our CRDs and Cluster API's, the operator's own ServiceAccount with exactly the
//! RBAC `install --export` grants, a kubeconfig for it, and server-side apply of example objects.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;

use crate::apply::DiscoveryCache;
use crate::controlplane::{ControlPlane, ControlPlaneError};

/// The field manager of objects the sandbox and the tests' setup apply.
pub const SETUP_MANAGER: &str = "clusterstack-sandbox";
/// How long CRDs may take to be established.
const ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(120);

/// Why preparing the control plane failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    ControlPlane(#[from] ControlPlaneError),
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("{0}")]
    Invalid(String),
}

fn api(what: impl Into<String>) -> impl FnOnce(kube::Error) -> SetupError {
    let what = what.into();
    move |source| SetupError::Api { what, source }
}

/// Every document of a multi-document YAML file.
pub fn read_yaml(path: &Path) -> Result<Vec<Value>, SetupError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| SetupError::File { path: path.into(), reason: e.to_string() })?;
    parse_yaml(&text).map_err(|reason| SetupError::File { path: path.into(), reason })
}

/// Every non-empty document of a multi-document YAML text.
pub fn parse_yaml(text: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Cluster API's CRDs (every provider's, with the contract labels its kustomization adds) from
/// the built pins' config directory, sorted by file within a provider.
pub fn capi_crds(capi_config: &Path) -> Result<Vec<Value>, SetupError> {
    Ok(crate::controlplane::capi::crds(capi_config)?.into_iter().map(|(_, crd)| crd).collect())
}

/// Applies `objects` in order with server-side apply (field manager [`SETUP_MANAGER`], forced),
/// resolving each kind through discovery.
pub async fn apply(client: &Client, objects: &[Value]) -> Result<(), SetupError> {
    let discovery = DiscoveryCache::new(client.clone());
    let params = PatchParams::apply(SETUP_MANAGER).force();
    for obj in objects {
        let (api_version, kind) =
            (obj["apiVersion"].as_str().unwrap_or_default(), obj["kind"].as_str().unwrap_or_default());
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let what = format!("applying {api_version} {kind} {name}");
        let resolved =
            discovery.resolve(&gvk).await.map_err(api(what.clone()))?.ok_or_else(|| {
                SetupError::Invalid(format!("{what}: the server does not serve {api_version} {kind}"))
            })?;
        let dynamic: Api<DynamicObject> = if resolved.namespaced {
            let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
            Api::namespaced_with(client.clone(), ns, &resolved.resource)
        } else {
            Api::all_with(client.clone(), &resolved.resource)
        };
        dynamic.patch(name, &params, &Patch::Apply(obj)).await.map_err(api(what))?;
    }
    Ok(())
}

/// Applies CRDs and waits until every one is established.
pub async fn install_crds(client: &Client, crds: &[Value]) -> Result<(), SetupError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(SETUP_MANAGER).force();
    for crd in crds {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        api.patch(name, &params, &Patch::Apply(crd)).await.map_err(self::api(format!("applying CRD {name}")))?;
    }
    let start = Instant::now();
    for crd in crds {
        let name = crd["metadata"]["name"].as_str().unwrap_or_default();
        loop {
            let current = api.get(name).await.map_err(self::api(format!("reading CRD {name}")))?;
            let established = current
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Established" && c.status == "True"));
            if established {
                break;
            }
            if start.elapsed() > ESTABLISHED_TIMEOUT {
                return Err(SetupError::Invalid(format!(
                    "CRD {name} is not established after {ESTABLISHED_TIMEOUT:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Our CRDs as objects.
pub fn our_crds() -> Vec<Value> {
    crate::api::all_crds().iter().filter_map(|c| serde_json::to_value(c).ok()).collect()
}

/// The operator's namespace, ServiceAccount and RBAC exactly as `install --export` writes them,
/// applied; then a kubeconfig for that ServiceAccount (a TokenRequest token valid `valid_for`)
/// written to `kubeconfig`.
pub async fn install_operator_identity(
    cp: &ControlPlane,
    client: &Client,
    namespace: &str,
    valid_for: Duration,
    kubeconfig: &Path,
) -> Result<(), SetupError> {
    let objects = super::super::install_rbac(namespace).map_err(SetupError::Invalid)?;
    apply(client, &objects).await?;
    cp.service_account_kubeconfig(namespace, super::super::OPERATOR_SERVICE_ACCOUNT, valid_for, kubeconfig).await?;
    Ok(())
}

/// The user name of the operator's ServiceAccount in `namespace`.
pub fn operator_user(namespace: &str) -> String {
    format!("system:serviceaccount:{namespace}:{}", super::super::OPERATOR_SERVICE_ACCOUNT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_streams_skip_empty_documents() {
        let docs = parse_yaml("---\n# only a comment\n---\na: 1\n---\n").unwrap();
        assert_eq!(docs, vec![serde_json::json!({"a": 1})]);
    }
}
