//! Kubeconfig files for the local control plane (CA, client certificate and key, or a bearer token,
//! all inline), and kube clients built from them.

use std::path::Path;

use base64::Engine;
use serde_json::{Value, json};

use super::ControlPlaneError;
use super::pki::CertKey;

/// How a kubeconfig's user authenticates.
#[derive(Debug, Clone)]
pub enum Credentials<'a> {
    /// A client certificate and its key.
    Certificate(&'a CertKey),
    /// A bearer token (a ServiceAccount's, from the TokenRequest API).
    Token(&'a str),
}

/// A kubeconfig for `server` (trusting `ca_pem`), user `user`, one context `name`.
pub fn kubeconfig(name: &str, server: &str, ca_pem: &str, user: &str, credentials: Credentials<'_>) -> Value {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let user_entry = match credentials {
        Credentials::Certificate(c) => json!({"client-certificate-data": b64(&c.cert), "client-key-data": b64(&c.key)}),
        Credentials::Token(t) => json!({"token": t}),
    };
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}],
        "users": [{"name": user, "user": user_entry}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": user}}],
        "current-context": name,
    })
}

/// Writes a kubeconfig (YAML, mode 0600: it holds a key or token).
pub fn write(path: &Path, config: &Value) -> Result<(), ControlPlaneError> {
    let text = serde_saphyr::to_string(config).map_err(|e| ControlPlaneError::Kubeconfig(e.to_string()))?;
    super::pki::write(path, &text, true)
}

/// A kube client from a kubeconfig file.
pub async fn client(path: &Path) -> Result<kube::Client, ControlPlaneError> {
    let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| ControlPlaneError::Kubeconfig(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| ControlPlaneError::Kubeconfig(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| ControlPlaneError::Kubeconfig(e.to_string()))
}
