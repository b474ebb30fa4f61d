//! `clusterstack diff`: what applying a release would change in the cluster of the kubeconfig,
//! found by dry-run server-side applies (nothing is written).
//!
//! The release is rendered as the release controller renders it and handed to the apply engine's
//! diff step ([`crate::apply::Applier::diff`]), with the release's inventory
//! (`ClusterStackRelease.status.inventory`) as the previous apply, so objects the render dropped
//! show as "would be pruned". With `--addons --cluster NS/NAME` the release's addons are rendered
//! for that Cluster and compared inside its workload cluster, reached through the Cluster's
//! kubeconfig Secret as the addon controller reaches it, against the ClusterAddon's inventory.
//! Exit codes follow `kubectl diff`: 0 no differences, 1 differences, 2 an error.

use std::path::PathBuf;

use anstyle::{AnsiColor, Style};
use kube::Client;
use kube::api::{Api, DynamicObject};

use crate::api::{ClusterAddon, ClusterStackRelease};
use crate::apply::{Applier, ApplyOptions, DiffReport, ObjectDiff, ReleaseOwner};
use crate::controller::addon::{self, workload};
use crate::controller::runtime::clusters::ClusterKey;
use crate::render::{self, RenderContext};

use super::CliError;
use super::render::{Format, RenderArgs};
use super::source_args::SourceArgs;

/// Show what applying a release would change in the cluster (dry-run server-side apply).
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// A release tag (looked up in `--source`) or a release directory holding `metadata.yaml`
    /// and the tarballs, as `render` takes it.
    pub release: String,
    #[command(flatten)]
    pub source: SourceArgs,
    /// The cache directory for releases fetched by tag. Default:
    /// $XDG_CACHE_HOME/clusterstack, else ~/.cache/clusterstack.
    #[arg(long, env = "CLUSTERSTACK_CACHE")]
    pub cache: Option<PathBuf>,
    /// The namespace of the ClusterStackRelease (and the default namespace of its objects).
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Compare the release's addons for the Cluster of `--cluster` in its workload cluster.
    #[arg(long, requires = "cluster")]
    pub addons: bool,
    /// With `--addons`: the CAPI Cluster, as NAMESPACE/NAME.
    #[arg(long, requires = "addons")]
    pub cluster: Option<String>,
    /// The kubeconfig file. Default: $KUBECONFIG, else ~/.kube/config, else in-cluster.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
}

/// Runs the diff; `Ok(true)` when something would change.
pub async fn run(args: DiffArgs) -> Result<bool, CliError> {
    let render_args = RenderArgs {
        args: vec![args.release.clone()],
        source: args.source.clone(),
        verify: Default::default(),
        cache: args.cache.clone(),
        tag: None,
        namespace: args.namespace.clone(),
        addons: args.addons,
        cluster: None,
        hook: None,
        values: Vec::new(),
        kube_version: None,
        include_crds: false,
        api_versions: Vec::new(),
        skip_tests: false,
        output: Format::Yaml,
    };
    let charts = super::render::resolve(&render_args).await?;
    let client = client(args.kubeconfig.as_ref()).await?;
    let report = if args.addons {
        let cluster = args.cluster.as_deref().unwrap_or_default();
        let (ns, name) = cluster
            .split_once('/')
            .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
            .ok_or_else(|| CliError::Usage(format!("--cluster {cluster}: expected NAMESPACE/NAME")))?;
        let key = ClusterKey { namespace: ns.to_string(), name: name.to_string() };
        diff_addons(&client, &charts, &key).await?
    } else {
        // As the release controller renders the class: no Kubernetes version in the context.
        let ctx = RenderContext::new(&charts.id, &args.namespace);
        let objects = render::render_cluster_class(&charts.cluster_class, &ctx)
            .map_err(|e| CliError::Usage(charts.unmask(&e.to_string())))?;
        let tag = charts.id.tag();
        let releases: Api<ClusterStackRelease> = Api::namespaced(client.clone(), &args.namespace);
        let previous = inventory(releases.get_opt(&tag).await.map_err(kube_error)?.and_then(|r| r.status));
        let opts = ApplyOptions::new(ReleaseOwner::new(&tag, &args.namespace)).with_previous(previous);
        Applier::new(client).diff(&objects, &opts).await.map_err(|e| CliError::Usage(e.to_string()))?
    };
    anstream::print!("{}", format_report(&report));
    for entry in &report.entries {
        if let ObjectDiff::Failed { error } = &entry.diff {
            anstream::eprintln!("{}error{}: {}: {error}", RED.render(), RED.render_reset(), entry.key);
        }
    }
    for key in &report.prune_skipped {
        anstream::eprintln!("note: {key} is in the inventory but no longer carries the release labels: not pruned");
    }
    anstream::eprintln!("{}", summary(&report));
    if report.has_errors() {
        return Err(CliError::Usage("some objects could not be compared".into()));
    }
    Ok(report.has_differences())
}

fn inventory<S: HasInventory>(status: Option<S>) -> crate::apply::Inventory {
    status.map(HasInventory::inventory).unwrap_or_default()
}

/// The inventory of a status.
trait HasInventory {
    fn inventory(self) -> crate::apply::Inventory;
}

impl HasInventory for crate::api::ClusterStackReleaseStatus {
    fn inventory(self) -> crate::apply::Inventory {
        crate::controller::inventory::from_release_status(&self)
    }
}

impl HasInventory for crate::api::ClusterAddonStatus {
    fn inventory(self) -> crate::apply::Inventory {
        crate::controller::inventory::from_status(&self.resources)
    }
}

fn kube_error(e: kube::Error) -> CliError {
    CliError::Usage(format!("the cluster could not be read: {e}"))
}

/// A client for the kubeconfig of `--kubeconfig`, else the usual places (as kubectl).
pub(super) async fn client(kubeconfig: Option<&PathBuf>) -> Result<Client, CliError> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| CliError::Usage(format!("no usable Kubernetes configuration: {e}")))?,
    };
    Client::try_from(config).map_err(|e| CliError::Usage(format!("cannot build a Kubernetes client: {e}")))
}

/// The addons of the release rendered for one Cluster and compared in its workload cluster.
async fn diff_addons(
    management: &Client,
    charts: &super::render::Charts,
    cluster: &ClusterKey,
) -> Result<DiffReport, CliError> {
    let Some(bundle) = &charts.addons else {
        return Err(CliError::Usage(format!("the release {} has no addon bundle", charts.id)));
    };
    let discovery = crate::apply::DiscoveryCache::new(management.clone());
    let gvk = addon::render::preferred(&discovery, "cluster.x-k8s.io", "Cluster")
        .await
        .ok_or_else(|| CliError::Usage("the cluster serves no Cluster API Cluster kind".into()))?;
    let resolved = discovery
        .resolve(&gvk)
        .await
        .map_err(kube_error)?
        .ok_or_else(|| CliError::Usage("the cluster serves no Cluster API Cluster kind".into()))?;
    let objects =
        addon::read_cluster_objects(management, &discovery, &cluster.namespace, &resolved.resource, &cluster.name)
            .await
            .map_err(|e| CliError::Usage(e.to_string()))?
            .ok_or_else(|| CliError::Usage(format!("Cluster {cluster} not found")))?;
    let annotations: std::collections::BTreeMap<String, String> =
        serde_json::from_value(objects.cluster["metadata"]["annotations"].clone()).unwrap_or_default();
    // The platform values and the inventory come from the Cluster's ClusterAddon, when it has one.
    let addons: Api<ClusterAddon> = Api::namespaced(management.clone(), &cluster.namespace);
    let cluster_addon = addons.get_opt(&addon::cluster_addon_name(&cluster.name)).await.map_err(kube_error)?;
    let mut values = std::collections::BTreeMap::new();
    for r in cluster_addon.iter().flat_map(|a| a.spec.values_from.iter()) {
        let v = addon::render::read_values_ref(management, &cluster.namespace, r).await.map_err(CliError::Usage)?;
        render::merge_values(values.entry(r.addon.clone()).or_insert_with(|| serde_json::json!({})), v);
    }
    let mut ctx = RenderContext::new(&charts.id, &cluster.namespace)
        .with_cluster(objects)
        .with_addon_values(values)
        .with_release_values(charts.release_values.clone());
    if let Some(kube) = &charts.kube_version {
        ctx = ctx.with_kube_version(kube.as_str());
    }
    let rendered = addon::render::render_bundle(bundle, charts.stages.as_deref(), &ctx)
        .map_err(|e| CliError::Usage(charts.unmask(&e)))?;
    let all: Vec<DynamicObject> = rendered.charts.iter().flat_map(|c| c.objects.iter().cloned()).collect();

    let secret = workload::addon_kubeconfig_secret(&cluster.name, &annotations);
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(management.clone(), &cluster.namespace);
    let text = secrets
        .get_opt(&secret)
        .await
        .map_err(kube_error)?
        .and_then(|s| s.data)
        .and_then(|d| d.get(workload::KUBECONFIG_KEY).map(|b| String::from_utf8_lossy(&b.0).into_owned()))
        .ok_or_else(|| {
            CliError::Usage(format!(
                "the kubeconfig Secret {}/{secret} does not exist or has no key {:?}",
                cluster.namespace,
                workload::KUBECONFIG_KEY
            ))
        })?;
    let workload = workload::client_from_kubeconfig(&text).await.map_err(CliError::Usage)?;
    let previous = inventory(cluster_addon.and_then(|a| a.status));
    let opts = ApplyOptions::new(addon::addon_owner(cluster)).with_previous(previous);
    Applier::new(workload)
        .with_field_manager(workload::ADDON_FIELD_MANAGER)
        .diff(&all, &opts)
        .await
        .map_err(|e| CliError::Usage(e.to_string()))
}

const RED: Style = AnsiColor::Red.on_default();
const GREEN: Style = AnsiColor::Green.on_default();
const CYAN: Style = AnsiColor::Cyan.on_default();
const BOLD: Style = Style::new().bold();

/// The unified diffs of every object that would change, with ANSI colours (stripped by
/// `anstream` when the output is not a terminal or `NO_COLOR` is set).
pub fn format_report(report: &DiffReport) -> String {
    let mut out = String::new();
    for entry in &report.entries {
        let Some(unified) = entry.unified() else { continue };
        for line in unified.lines() {
            let style = if line.starts_with("+++") || line.starts_with("---") {
                BOLD
            } else if line.starts_with('+') {
                GREEN
            } else if line.starts_with('-') {
                RED
            } else if line.starts_with("@@") {
                CYAN
            } else {
                Style::new()
            };
            out.push_str(&format!("{}{line}{}\n", style.render(), style.render_reset()));
        }
    }
    out
}

/// One line: how many objects would change, and how.
pub fn summary(report: &DiffReport) -> String {
    let (unchanged, changed, created, pruned, failed) = report.counts();
    let mut parts = vec![format!("{changed} changed"), format!("{created} to create"), format!("{pruned} to prune")];
    parts.push(format!("{unchanged} unchanged"));
    if failed > 0 {
        parts.push(format!("{failed} failed"));
    }
    if report.has_differences() {
        format!("differences: {}", parts.join(", "))
    } else {
        format!("no differences ({})", parts.join(", "))
    }
}
