//! The signature policy a release is fetched under: its ClusterStack's `spec.verify`, else the
//! operator's `--verify-policy`, with the ConfigMaps and Secrets it names read from the stack's
//! namespace (read at each use, so a rotated key or trusted root takes effect on the next pass).

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;

use super::context::Context;
use crate::api::{ClusterStack, KeyRef, KeySource, VerifySpec};
use crate::source::verify::policy::{ReleasePolicy, Resolved};
use crate::source::verify::{Failure, FailureReason};

/// The key read from a ConfigMap or Secret holding the public key, when the reference names none.
pub const DEFAULT_KEY_KEY: &str = "cosign.pub";
/// The key read from a ConfigMap or Secret holding a trusted root, when the reference names none.
pub const DEFAULT_ROOT_KEY: &str = "trusted_root.json";

impl Context {
    /// The policy of `stack` (or the operator's default), resolved; `None` when there is none.
    pub async fn release_policy(
        &self,
        stack: Option<&ClusterStack>,
        namespace: &str,
    ) -> Result<Option<ReleasePolicy>, Failure> {
        let spec = match stack.and_then(|s| s.spec.verify.as_ref()).or(self.settings.verify_policy.as_ref()) {
            Some(spec) => spec,
            None => return Ok(None),
        };
        let resolved = self.resolve(spec, namespace).await?;
        ReleasePolicy::new(spec, &resolved).map(Some)
    }

    async fn resolve(&self, spec: &VerifySpec, namespace: &str) -> Result<Resolved, Failure> {
        let mut resolved = Resolved::default();
        if let Some(key) = &spec.key {
            let text = self
                .read(key, namespace, DEFAULT_KEY_KEY)
                .await
                .map_err(|m| Failure::new(FailureReason::WrongIdentity, m))?;
            resolved.key_pem = Some(text);
        }
        if let Some(root) = &spec.trusted_root
            && root.built_in.is_none()
        {
            let source = KeySource { config_map_ref: root.config_map_ref.clone(), secret_ref: root.secret_ref.clone() };
            let json = self
                .read(&source, namespace, DEFAULT_ROOT_KEY)
                .await
                .map_err(|m| Failure::new(FailureReason::UnknownRoot, m))?;
            resolved.trusted_root = Some((describe(&source, namespace, DEFAULT_ROOT_KEY), json));
        }
        Ok(resolved)
    }

    /// The text under a ConfigMap's or Secret's key.
    async fn read(&self, source: &KeySource, namespace: &str, default_key: &str) -> Result<String, String> {
        let what = describe(source, namespace, default_key);
        let key = |r: &KeyRef| r.key.clone().unwrap_or_else(|| default_key.to_string());
        let text = if let Some(r) = &source.config_map_ref {
            let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
            let found = api.get_opt(&r.name).await.map_err(|e| format!("cannot read {what}: {e}"))?;
            found.and_then(|c| c.data).and_then(|mut d| d.remove(&key(r)))
        } else if let Some(r) = &source.secret_ref {
            let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
            let found = api.get_opt(&r.name).await.map_err(|e| format!("cannot read {what}: {e}"))?;
            found.and_then(|s| s.data).and_then(|mut d| d.remove(&key(r))).and_then(|b| String::from_utf8(b.0).ok())
        } else {
            None
        };
        text.ok_or_else(|| format!("{what} does not exist"))
    }
}

fn describe(source: &KeySource, namespace: &str, default_key: &str) -> String {
    let key = |r: &KeyRef| r.key.clone().unwrap_or_else(|| default_key.to_string());
    match (&source.config_map_ref, &source.secret_ref) {
        (Some(r), _) => format!("ConfigMap {namespace}/{} key {}", r.name, key(r)),
        (_, Some(r)) => format!("Secret {namespace}/{} key {}", r.name, key(r)),
        _ => "nothing".into(),
    }
}
