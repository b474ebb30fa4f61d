//! The external-operator plug-in: the Go operator's contract, so existing provider operators keep
//! working. With `ClusterStack.spec.providerRef` naming a `<Kind>Template` object, each release
//! gets an object of `<Kind>`:
//!
//! - named like the release (tag form), in the release's namespace;
//! - with the template's `spec.template.spec` as its `spec`;
//! - owned by the ClusterStackRelease (owner reference), labelled like applied objects;
//! - applied with server-side apply (field manager [`crate::apply::FIELD_MANAGER`]) on every pass,
//!   so a changed template or a hand edit is corrected.
//!
//! The gate is that object's `status.ready: true`, read again on every pass: when it turns false
//! the gate closes again and the release stops being ready.

use std::sync::OnceLock;
use std::time::Duration;

use futures::future::BoxFuture;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

use super::{Cleanup, NodeImageProvider, Progress, ProviderError, ReleaseContext, Report};
use crate::api::ObjectRef;
use crate::apply::{DiscoveryCache, FIELD_MANAGER, RELEASE_LABEL, RELEASE_NAMESPACE_LABEL, ReleaseOwner, Resolved};

/// The suffix a provider template's kind carries.
const TEMPLATE_SUFFIX: &str = "Template";

/// The external-operator plug-in.
pub struct ExternalOperator {
    /// Discovery, cached for the client of the first call (the operator has one client).
    discovery: OnceLock<DiscoveryCache>,
    /// When to look again while the provider object is not ready.
    pub recheck_after: Duration,
}

impl Default for ExternalOperator {
    fn default() -> Self {
        Self::new()
    }
}

/// The template and the provider object it stands for, from a `providerRef`.
struct Target {
    template: GroupVersionKind,
    template_name: String,
    template_namespace: String,
    object: GroupVersionKind,
}

fn parse_api_version(api_version: &str) -> (String, String) {
    match api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.to_string()),
    }
}

/// Reads a `providerRef` (pure); `Err` is a message for a permanent failure.
/// The kind of the provider objects made from a `providerRef` template (`<Kind>Template` →
/// `<Kind>`, same API version), for watching them; `None` when the reference is incomplete.
pub fn provider_object_kind(r: &ObjectRef) -> Option<GroupVersionKind> {
    target(r, "").ok().map(|t| t.object)
}

fn target(r: &ObjectRef, default_namespace: &str) -> Result<Target, String> {
    let field = |v: &Option<String>, name: &str| {
        v.clone().filter(|s| !s.is_empty()).ok_or_else(|| format!("ClusterStack spec.providerRef.{name} is required"))
    };
    let api_version = field(&r.api_version, "apiVersion")?;
    let kind = field(&r.kind, "kind")?;
    let name = field(&r.name, "name")?;
    let object_kind = kind
        .strip_suffix(TEMPLATE_SUFFIX)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| format!("ClusterStack spec.providerRef.kind {kind:?} must name a <Kind>{TEMPLATE_SUFFIX}"))?;
    let (group, version) = parse_api_version(&api_version);
    Ok(Target {
        template: GroupVersionKind::gvk(&group, &version, &kind),
        template_name: name,
        template_namespace: r.namespace.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| default_namespace.into()),
        object: GroupVersionKind::gvk(&group, &version, object_kind),
    })
}

fn api_for(client: &kube::Client, resolved: &Resolved, namespace: &str) -> Api<DynamicObject> {
    if resolved.namespaced {
        Api::namespaced_with(client.clone(), namespace, &resolved.resource)
    } else {
        Api::all_with(client.clone(), &resolved.resource)
    }
}

fn api_version_of(gvk: &GroupVersionKind) -> String {
    ApiResource::from_gvk(gvk).api_version
}

fn not_served(gvk: &GroupVersionKind) -> Report {
    Report::new(Progress::Failed {
        reason: format!(
            "kind {} ({}) is not served by the cluster: is the provider's operator installed?",
            gvk.kind,
            api_version_of(gvk)
        ),
        retryable: true,
    })
}

impl ExternalOperator {
    /// The plug-in, asking again every 30 s while a provider object is not ready.
    pub fn new() -> Self {
        Self { discovery: OnceLock::new(), recheck_after: Duration::from_secs(30) }
    }

    async fn resolve(&self, client: &kube::Client, gvk: &GroupVersionKind) -> Result<Option<Resolved>, ProviderError> {
        let discovery = self.discovery.get_or_init(|| DiscoveryCache::new(client.clone()));
        discovery.resolve(gvk).await.map_err(|source| ProviderError::Kube {
            action: format!("discovering kind {} ({})", gvk.kind, api_version_of(gvk)),
            source,
        })
    }

    async fn ensure_object(&self, ctx: &ReleaseContext) -> Result<Report, ProviderError> {
        let Some(provider_ref) = &ctx.provider_ref else {
            return Ok(Report::new(Progress::Failed {
                reason: "the external-operator plug-in needs ClusterStack spec.providerRef".into(),
                retryable: false,
            }));
        };
        let t = match target(provider_ref, &ctx.namespace) {
            Ok(t) => t,
            Err(reason) => return Ok(Report::new(Progress::Failed { reason, retryable: false })),
        };
        let Some(template_res) = self.resolve(&ctx.client, &t.template).await? else {
            return Ok(not_served(&t.template));
        };
        let template_desc = format!("{} {}/{}", t.template.kind, t.template_namespace, t.template_name);
        let template = api_for(&ctx.client, &template_res, &t.template_namespace)
            .get_opt(&t.template_name)
            .await
            .map_err(|source| ProviderError::Kube { action: format!("reading {template_desc}"), source })?;
        let Some(template) = template else {
            return Ok(Report::new(Progress::Failed {
                reason: format!("provider template {template_desc} not found"),
                retryable: true,
            }));
        };
        let spec = match template.data.pointer("/spec/template/spec") {
            Some(Value::Object(m)) => Value::Object(m.clone()),
            _ => json!({}),
        };
        let Some(object_res) = self.resolve(&ctx.client, &t.object).await? else {
            return Ok(not_served(&t.object));
        };
        let name = ctx.release.tag();
        let desc = format!("{} {}/{name}", t.object.kind, ctx.namespace);
        let mut metadata = json!({
            "name": name,
            "labels": {RELEASE_LABEL: name, RELEASE_NAMESPACE_LABEL: ctx.namespace},
        });
        if object_res.namespaced {
            metadata["namespace"] = json!(ctx.namespace);
        }
        if let Some(owner) = &ctx.owner {
            metadata["ownerReferences"] = json!([owner]);
        }
        let body = json!({
            "apiVersion": api_version_of(&t.object),
            "kind": t.object.kind,
            "metadata": metadata,
            "spec": spec,
        });
        let applied = api_for(&ctx.client, &object_res, &ctx.namespace)
            .patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body))
            .await
            .map_err(|source| ProviderError::Kube { action: format!("applying {desc}"), source })?;
        let ready = applied.data.pointer("/status/ready").and_then(Value::as_bool).unwrap_or(false);
        tracing::debug!(release = %ctx.key(), object = %desc, ready, "provider object applied");
        Ok(Report::new(if ready {
            Progress::Ready
        } else {
            Progress::InProgress {
                message: format!("waiting for {desc} to report status.ready"),
                recheck_after: self.recheck_after,
            }
        }))
    }

    async fn delete_object(&self, ctx: &ReleaseContext) -> Result<Cleanup, ProviderError> {
        let Some(provider_ref) = &ctx.provider_ref else { return Ok(Cleanup::Done) };
        let Ok(t) = target(provider_ref, &ctx.namespace) else { return Ok(Cleanup::Done) };
        // A kind no longer served has no objects left.
        let Some(object_res) = self.resolve(&ctx.client, &t.object).await? else { return Ok(Cleanup::Done) };
        let name = ctx.release.tag();
        let desc = format!("{} {}/{name}", t.object.kind, ctx.namespace);
        let api = api_for(&ctx.client, &object_res, &ctx.namespace);
        let kube_err = |action: &str, source| ProviderError::Kube { action: format!("{action} {desc}"), source };
        let Some(existing) = api.get_opt(&name).await.map_err(|e| kube_err("reading", e))? else {
            return Ok(Cleanup::Done);
        };
        // Never delete an object this release did not create.
        let owner = ReleaseOwner::new(name.clone(), ctx.namespace.clone());
        if !owner.owns(existing.metadata.labels.as_ref().unwrap_or(&Default::default())) {
            tracing::info!(release = %ctx.key(), object = %desc, "provider object not labelled as ours; left alone");
            return Ok(Cleanup::Done);
        }
        if existing.metadata.deletion_timestamp.is_none() {
            match api.delete(&name, &DeleteParams::background()).await {
                Ok(_) => tracing::info!(release = %ctx.key(), object = %desc, "deleting provider object"),
                Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Cleanup::Done),
                Err(e) => return Err(kube_err("deleting", e)),
            }
        }
        match api.get_opt(&name).await.map_err(|e| kube_err("reading", e))? {
            None => Ok(Cleanup::Done),
            Some(_) => Ok(Cleanup::InProgress {
                message: format!("waiting for {desc} to be deleted"),
                recheck_after: self.recheck_after,
            }),
        }
    }
}

impl NodeImageProvider for ExternalOperator {
    fn name(&self) -> &str {
        "external"
    }

    fn watched(&self) -> bool {
        true
    }

    fn ensure<'a>(&'a self, ctx: &'a ReleaseContext) -> BoxFuture<'a, Result<Report, ProviderError>> {
        Box::pin(self.ensure_object(ctx))
    }

    fn cleanup<'a>(&'a self, ctx: &'a ReleaseContext) -> BoxFuture<'a, Result<Cleanup, ProviderError>> {
        Box::pin(self.delete_object(ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(api_version: &str, kind: &str, name: &str, ns: Option<&str>) -> ObjectRef {
        ObjectRef {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
            name: Some(name.into()),
            namespace: ns.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn template_ref_to_object_kind() {
        let t =
            target(&r("infra.example.com/v1beta1", "DockerClusterStackReleaseTemplate", "tpl", None), "ns").unwrap();
        assert_eq!(t.object.kind, "DockerClusterStackRelease");
        assert_eq!((t.object.group.as_str(), t.object.version.as_str()), ("infra.example.com", "v1beta1"));
        assert_eq!((t.template_name.as_str(), t.template_namespace.as_str()), ("tpl", "ns"));
        let t = target(&r("v1", "FooTemplate", "tpl", Some("other")), "ns").unwrap();
        assert_eq!((t.object.group.as_str(), t.template_namespace.as_str()), ("", "other"));
    }

    #[test]
    fn bad_refs_are_named() {
        let e = target(&r("a/v1", "DockerClusterStackRelease", "x", None), "ns").err().unwrap();
        assert!(e.contains("must name a <Kind>Template"), "{e}");
        let e = target(&r("a/v1", "Template", "x", None), "ns").err().unwrap();
        assert!(e.contains("must name"), "{e}");
        let e = target(&ObjectRef { kind: Some("XTemplate".into()), ..Default::default() }, "ns").err().unwrap();
        assert_eq!(e, "ClusterStack spec.providerRef.apiVersion is required");
    }
}
