//! What a pass reads and renders: the release from the cache, the Cluster's objects as templates
//! see them, the platform values of `spec.valuesFrom`, and the release's addons rendered.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

use crate::api::{AddonValuesRef, ClusterAddon};
use crate::apply::{Identity, ObjectKey};
use crate::controller::runtime::clusters::CapiCluster;
use crate::controller::runtime::context::Context;
use crate::render::cache::{ReleaseKey, RenderCache};
use crate::render::{ClusterObjects, RenderContext, RenderedChart, merge_values};
use crate::source::FetchPolicy;
use crate::source::cache::FetchedRelease;

use super::error::Error;
use super::stages::{self, ClusterAddonConfig, Stage};

/// A release's addons rendered for one Cluster, with its stages. A chart may be shared with
/// other Clusters' passes (`render::cache`).
pub struct RenderedRelease {
    pub charts: Vec<Arc<RenderedChart>>,
    pub config: Option<ClusterAddonConfig>,
}

impl RenderedRelease {
    /// The stages of `hook`: from `clusteraddon.yaml`, or every addon when the bundle has none
    /// (for the first hook; an upgrade without the file applies everything after its stages).
    pub fn stages(&self, hook: &str) -> Vec<Stage> {
        match &self.config {
            Some(c) => c.stages(hook).to_vec(),
            None if hook == stages::AFTER_CONTROL_PLANE_INITIALIZED || hook == stages::BEFORE_CLUSTER_UPGRADE => {
                stages::all_addons(&self.charts.iter().map(|c| c.name.clone()).collect::<Vec<_>>())
            }
            None => Vec::new(),
        }
    }

    /// The identities of every object rendered (namespaces as written), except those of
    /// `excluded` addons.
    pub(super) fn keys_except(&self, excluded: &BTreeSet<&str>) -> HashSet<Identity> {
        self.charts
            .iter()
            .filter(|c| !excluded.contains(c.name.as_str()))
            .flat_map(|c| c.objects.iter().map(|o| ObjectKey::of(o).identity()))
            .collect()
    }

    /// The object keys of one addon, for display.
    pub fn object_keys(&self, addon: &str) -> Vec<String> {
        self.charts
            .iter()
            .filter(|c| c.name == addon)
            .flat_map(|c| {
                c.objects.iter().map(|o| {
                    let key = ObjectKey::of(o);
                    format!(
                        "{} {}",
                        key.kind,
                        if key.namespace.is_empty() { key.name } else { format!("{}/{}", key.namespace, key.name) }
                    )
                })
            })
            .collect()
    }
}

/// Renders the addons of `release` for a Cluster, with platform values per addon; reads
/// `clusteraddon.yaml` when the release has it. Addons whose values `cache` holds a render of are
/// not rendered again.
pub async fn render_release(
    release: &FetchedRelease,
    class: &crate::release::ReleaseId,
    namespace: &str,
    objects: ClusterObjects,
    values: BTreeMap<String, Value>,
    cache: &RenderCache,
) -> Result<RenderedRelease, String> {
    let Some(bundle) = release.cluster_addon_dir() else {
        return Ok(RenderedRelease { charts: Vec::new(), config: None });
    };
    let config_path = release.asset_path(stages::CLUSTER_ADDON_FILE).filter(|p| p.exists());
    // The older layout (no `clusteraddon.yaml`): the release's `cluster-addon-values.yaml` is the
    // values template of its one addon chart, as the Go operator reads it.
    let release_values = match &config_path {
        Some(_) => None,
        None => release.asset_path(crate::render::CLUSTER_ADDON_VALUES_FILE).filter(|p| p.is_file()),
    };
    let mut ctx = RenderContext::new(class, namespace)
        .with_cluster(objects)
        .with_addon_values(values)
        .with_release_values(release_values);
    // Helm addon charts see the release's Kubernetes version, as `--kube-version` gives it.
    if let Ok(metadata) = release.metadata() {
        ctx = ctx.with_kube_version(metadata.versions.kubernetes.to_string());
    }
    // The charts and values templates are the release author's: rendered in the sandboxed
    // worker as a cluster class is (DESIGN §12); `clusteraddon.yaml` is parsed here, under the
    // YAML budgets and the CEL cost estimate.
    let digests: Vec<&str> = release.assets.iter().map(|a| a.sha256.as_str()).collect();
    let key = ReleaseKey::new(&bundle, &digests, &ctx);
    let charts = crate::render::worker::render_addons_isolated(&class.tag(), bundle, ctx, Some((cache, &key)))
        .await
        .map_err(|e| e.to_string())?;
    with_config(charts, config_path.as_deref())
}

/// The pure part of [`render_release`], also used by `clusterstack render --addons`.
pub fn render_bundle(
    bundle: &std::path::Path,
    config_path: Option<&std::path::Path>,
    ctx: &RenderContext,
) -> Result<RenderedRelease, String> {
    let charts = crate::render::render_addons(bundle, ctx).map_err(|e| e.to_string())?;
    with_config(charts.into_iter().map(Arc::new).collect(), config_path)
}

/// The rendered charts with the release's `clusteraddon.yaml`, when it has one.
fn with_config(
    charts: Vec<Arc<RenderedChart>>,
    config_path: Option<&std::path::Path>,
) -> Result<RenderedRelease, String> {
    let config = match config_path {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            let names: Vec<String> = charts.iter().map(|c| c.name.clone()).collect();
            Some(ClusterAddonConfig::parse(&text, &names).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    Ok(RenderedRelease { charts, config })
}

/// The Cluster, its control plane and its infrastructure cluster, as templates see them; `None`
/// when the Cluster is gone.
pub(super) async fn cluster_objects(ctx: &Context, cluster: &CapiCluster) -> Result<Option<ClusterObjects>, Error> {
    let ns = cluster.namespace().unwrap_or_default();
    read_cluster_objects(&ctx.client, ctx.applier.discovery(), &ns, &cluster.version.resource(), &cluster.name_any())
        .await
}

/// [`cluster_objects`] for any client (also `clusterstack diff --addons`): the Cluster through
/// `clusters` (its served version), its referenced objects through discovery.
pub async fn read_cluster_objects(
    client: &kube::Client,
    discovery: &crate::apply::DiscoveryCache,
    ns: &str,
    clusters: &kube::api::ApiResource,
    name: &str,
) -> Result<Option<ClusterObjects>, Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, clusters);
    let Some(full) = api.get_opt(name).await? else { return Ok(None) };
    let mut out = ClusterObjects { cluster: serde_json::to_value(full)?, ..Default::default() };
    for (field, slot) in [("controlPlaneRef", &mut out.control_plane), ("infrastructureRef", &mut out.infra_cluster)] {
        let r = &out.cluster["spec"][field];
        let (Some(kind), Some(name)) = (r["kind"].as_str(), r["name"].as_str()) else { continue };
        // v1beta1 refs carry apiVersion; v1beta2 refs carry apiGroup only.
        let gvk = match (r["apiVersion"].as_str(), r["apiGroup"].as_str()) {
            (Some(av), _) => match av.rsplit_once('/') {
                Some((g, v)) => Some(GroupVersionKind::gvk(g, v, kind)),
                None => Some(GroupVersionKind::gvk("", av, kind)),
            },
            (None, Some(group)) => preferred(discovery, group, kind).await,
            _ => None,
        };
        let Some(gvk) = gvk else { continue };
        let Ok(Some(resolved)) = discovery.resolve(&gvk).await else { continue };
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resolved.resource);
        if let Some(obj) = api.get_opt(name).await? {
            *slot = serde_json::to_value(obj)?;
        }
    }
    Ok(Some(out))
}

/// The served version of a CAPI kind, newest first (`v1beta2`, then `v1beta1`).
pub async fn preferred(discovery: &crate::apply::DiscoveryCache, group: &str, kind: &str) -> Option<GroupVersionKind> {
    for version in ["v1beta2", "v1beta1"] {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        if let Ok(Some(_)) = discovery.resolve(&gvk).await {
            return Some(gvk);
        }
    }
    None
}

/// The platform-team values of a ClusterAddon's `spec.valuesFrom`, per addon.
pub(super) async fn platform_values(
    ctx: &Context,
    addon: &ClusterAddon,
    namespace: &str,
) -> Result<BTreeMap<String, Value>, String> {
    let mut out = BTreeMap::new();
    for r in &addon.spec.values_from {
        let value = read_values_ref(&ctx.client, namespace, r).await?;
        merge_values(out.entry(r.addon.clone()).or_insert_with(|| json!({})), value);
    }
    Ok(out)
}

/// Reads one values reference: the YAML mapping under its key.
pub async fn read_values_ref(client: &kube::Client, namespace: &str, r: &AddonValuesRef) -> Result<Value, String> {
    let key = r.key.clone().unwrap_or_else(|| "values.yaml".into());
    let what = format!("{} {namespace}/{} key {key:?} (valuesFrom of addon {})", r.kind, r.name, r.addon);
    let text = match r.kind.as_str() {
        "ConfigMap" => {
            let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), namespace);
            let cm = api.get_opt(&r.name).await.map_err(|e| format!("cannot read {what}: {e}"))?;
            cm.and_then(|c| c.data).and_then(|d| d.get(&key).cloned())
        }
        "Secret" => {
            let api: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), namespace);
            let s = api.get_opt(&r.name).await.map_err(|e| format!("cannot read {what}: {e}"))?;
            s.and_then(|s| s.data).and_then(|d| d.get(&key).and_then(|b| String::from_utf8(b.0.clone()).ok()))
        }
        other => return Err(format!("{what}: kind must be ConfigMap or Secret, not {other:?}")),
    }
    .ok_or_else(|| format!("{what} does not exist"))?;
    parse_values_text(&text).map_err(|e| format!("{what}: {e}"))
}

/// Parses platform values: one YAML mapping (empty is `{}`).
pub fn parse_values_text(text: &str) -> Result<Value, String> {
    let v: Value = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
    match v {
        Value::Null => Ok(json!({})),
        v @ Value::Object(_) => Ok(v),
        _ => Err("values must be a mapping".into()),
    }
}

/// The release `tag` of the ClusterClass in `namespace`, from the cache (downloaded by the
/// ClusterStackRelease controller; fetched here only when the cache lacks it).
pub(super) async fn locate_release(ctx: &Context, namespace: &str, tag: &str) -> Result<FetchedRelease, String> {
    let releases: Api<crate::api::ClusterStackRelease> = Api::namespaced(ctx.client.clone(), namespace);
    let csr = releases.get_opt(tag).await.map_err(|e| e.to_string())?;
    let (source, stack) = match &csr {
        Some(r) => ctx.release_source(r).await.map_err(|e| e.to_string())?,
        None => (ctx.sources.open(&ctx.settings.default_source).map_err(|e| e.to_string())?, None),
    };
    // The stack's signature policy holds for its addons too: only a verified release is used.
    let policy =
        ctx.release_policy(stack.as_ref(), namespace).await.map_err(|f| format!("signature check failed: {f}"))?;
    let id = crate::release::ReleaseId::from_tag(tag).map_err(|e| e.to_string())?;
    let cache = &ctx.sources.cache;
    if let Some(cached) = cache.open_signed(&source, &id, tag, policy.as_ref()).await.map_err(|e| e.to_string())? {
        return Ok(cached);
    }
    let listing = ctx.sources.list(&source, Duration::from_secs(60)).await;
    let releases = listing.result.map_err(|e| format!("{e:?}"))?;
    let listed = releases.iter().find(|r| r.tag == tag).ok_or_else(|| "not found in its source".to_string())?;
    let progress = crate::source::NoProgress;
    cache
        .fetch_signed(&source, listed, FetchPolicy::default(), policy.as_ref(), &progress)
        .await
        .map_err(|e| e.to_string())
}
