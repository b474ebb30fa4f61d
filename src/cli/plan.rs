//! `clusterstack plan`: the ClusterStack reconcile, offline.
//!
//! Reads ClusterStack manifests, lists their source, and runs the same keep-set
//! planner the operator runs (`controller::stack::keep::plan`), printing which
//! ClusterStackReleases would be kept, created or deleted and why. With
//! `--render` it also fetches each kept release into the verified cache and
//! lists the objects it would apply. ClusterStackRollouts in the file get their waves shown
//! (`plan_rollout`).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use clap::ValueEnum;
use kube::ResourceExt;
use kube::api::DynamicObject;
use serde::Serialize;

use crate::api::{ClusterStack, ClusterStackRelease};
use crate::controller::runtime::clusters::class_usages;
use crate::controller::stack::keep::{self, ExistingRelease, Plan};
use crate::release::{KubernetesMinor, ReleaseId};
use crate::render::{self, RenderContext};
use crate::source::github::GitHubClient;
use crate::source::spec::SourceSpec;
use crate::source::{self, AnySource, FetchPolicy, Listing, ReleaseCache, ReleaseSource};

use super::CliError;
use super::source_args::{SourceArgs, SourceCliError};

/// Show what the operator would do for some ClusterStacks, without a cluster.
#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// A YAML file with one or more ClusterStack objects; `-` reads standard input.
    #[arg(short = 'f', long = "filename")]
    pub file: PathBuf,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub verify: super::verify_args::VerifyArgs,
    /// A YAML file with the CAPI Clusters (any namespace); releases whose
    /// ClusterClass they use are kept.
    #[arg(long)]
    pub clusters: Option<PathBuf>,
    /// A YAML file with the ClusterStackReleases that exist now (e.g. from
    /// `kubectl get cskr -A -o yaml`), so deletions can be planned.
    #[arg(long)]
    pub existing: Option<PathBuf>,
    /// Also fetch every kept release into the cache and list the objects it would apply.
    #[arg(long)]
    pub render: bool,
    /// A YAML file with the ClusterAddons that exist now (`kubectl get clusteraddon -A -o yaml`):
    /// with `--clusters`, the plan says per Cluster whether its addons would be re-applied and why.
    #[arg(long, requires = "clusters")]
    pub cluster_addons: Option<PathBuf>,
    /// The cache directory for `--render`. Default: $XDG_CACHE_HOME/clusterstack, else ~/.cache/clusterstack.
    #[arg(long, env = "CLUSTERSTACK_CACHE")]
    pub cache: Option<PathBuf>,
    /// Output format: `text` for people, `yaml`/`json` for scripts (with `--render`, the full objects).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PlanFormat::Text)]
    pub output: PlanFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    Text,
    Yaml,
    Json,
}

/// The plan of one ClusterStack, as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StackReport {
    /// `namespace/name` of the ClusterStack.
    pub cluster_stack: String,
    pub source: String,
    /// `None` when the source could not be listed: then nothing is created or deleted.
    pub listed: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latest: Option<String>,
    pub releases: Vec<ReleaseReport>,
    pub warnings: Vec<String>,
}

/// One ClusterStackRelease of a plan.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseReport {
    pub name: String,
    pub action: Action,
    pub reasons: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub objects: Option<Vec<DynamicObject>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Published and wanted, does not exist yet.
    Create,
    /// Exists (or is in use) and stays.
    Keep,
    /// Exists and is no longer wanted.
    Delete,
}

pub async fn run(args: PlanArgs) -> Result<(), CliError> {
    let stacks: Vec<ClusterStack> = read_objects(&args.file, "ClusterStack")?;
    if stacks.is_empty() {
        return Err(CliError::Usage(format!("{}: no ClusterStack object found", args.file.display())));
    }
    // ClusterStackRollouts in the same file: their waves are shown too.
    let rollouts: Vec<crate::api::ClusterStackRollout> =
        if args.file == Path::new("-") { Vec::new() } else { read_objects(&args.file, "ClusterStackRollout")? };
    let clusters: Vec<crate::controller::runtime::clusters::CapiCluster> = match &args.clusters {
        Some(path) => read_objects(path, "Cluster")?,
        None => Vec::new(),
    };
    let usages = class_usages(&clusters);
    let existing: Vec<ClusterStackRelease> = match &args.existing {
        Some(path) => read_objects(path, "ClusterStackRelease")?,
        None => Vec::new(),
    };
    let github = GitHubClient::new(args.source.github_config()?).map_err(SourceCliError::from)?;
    let cache = if args.render {
        Some(
            args.source
                .release_cache(args.cache.clone().unwrap_or_else(super::pull::default_cache_dir))
                .map_err(SourceCliError::from)?,
        )
    } else {
        None
    };

    // One listing per distinct source, however many stacks use it.
    let mut listings: BTreeMap<String, (AnySource, Result<Listing, String>)> = BTreeMap::new();
    let mut reports = Vec::new();
    let mut listed_by_stack: BTreeMap<String, Vec<ReleaseId>> = BTreeMap::new();
    for stack in &stacks {
        let spec = source_for(&args.source, stack)?;
        let key = spec.to_string();
        if !listings.contains_key(&key) {
            let source =
                source::open_with(&spec, &github, &args.source.oci_options(&spec)).map_err(SourceCliError::from)?;
            let listing = source.list().await.map_err(|e| e.to_string());
            listings.insert(key.clone(), (source, listing));
        }
        let Some((source, listing)) = listings.get(&key) else { continue };
        let ids: Option<Vec<ReleaseId>> =
            listing.as_ref().ok().map(|l| l.releases.iter().map(|r| r.id.clone()).collect());
        if let Some(ids) = &ids {
            listed_by_stack
                .insert(format!("{}/{}", stack.namespace().unwrap_or_default(), stack.name_any()), ids.clone());
        }
        let existing = existing_of(stack, &existing);
        let plan = keep::plan(stack, ids.as_deref(), &existing, &usages);
        let mut report = report_of(stack, &key, listing, &plan);
        if let (Some(cache), Ok(listing)) = (&cache, listing) {
            let signature = args.verify.policy(stack.spec.verify.as_ref())?;
            render_kept(&mut report, stack, source, listing, cache, signature.as_ref()).await?;
        }
        reports.push(report);
    }

    let out = match args.output {
        PlanFormat::Text => text(&reports),
        PlanFormat::Yaml => serde_saphyr::to_string(&reports).map_err(CliError::CrdYaml)?,
        PlanFormat::Json => serde_json::to_string_pretty(&reports).map_err(|e| CliError::Usage(e.to_string()))? + "\n",
    };
    print!("{out}");
    if !rollouts.is_empty() && args.output == PlanFormat::Text {
        let (views, classes) = match &args.clusters {
            Some(path) => {
                let views = read_objects(path, "Cluster")?;
                let classes: Vec<serde_json::Value> = read_objects(path, "ClusterClass")?;
                let classes = classes
                    .into_iter()
                    .filter_map(|c| Some((c["metadata"]["name"].as_str()?.to_string(), c)))
                    .collect();
                (views, classes)
            }
            None => (Vec::new(), BTreeMap::new()),
        };
        print!(
            "\n{}",
            super::plan_rollout::rollout_plan(
                &rollouts,
                &stacks,
                &listed_by_stack,
                &existing,
                &views,
                &classes,
                jiff::Timestamp::now()
            )
        );
    }
    if args.clusters.is_some() && args.output == PlanFormat::Text {
        let addons: Vec<crate::api::ClusterAddon> = match &args.cluster_addons {
            Some(path) => read_objects(path, "ClusterAddon")?,
            None => Vec::new(),
        };
        print!("{}", addon_lines(&usages, &addons, &listings, cache.as_ref()).await);
    }
    // A plan made without the source's listing is not the operator's plan: say so in the exit code.
    match reports.iter().find_map(|r| r.source_error.as_ref().map(|e| (r, e))) {
        Some((report, error)) => Err(CliError::Usage(format!(
            "{}: the source {} could not be listed ({error}); nothing would be created or deleted",
            report.cluster_stack, report.source
        ))),
        None => Ok(()),
    }
}

/// The source of a stack: `--source` when given, else `spec.source`, else the default.
fn source_for(args: &SourceArgs, stack: &ClusterStack) -> Result<SourceSpec, CliError> {
    let spec = match (&args.source, &stack.spec.source) {
        (None, Some(crd)) => SourceSpec::from_crd(crd),
        _ => args.spec(),
    };
    Ok(spec.map_err(SourceCliError::from)?)
}

/// The existing releases that belong to `stack`: same namespace, and named as a release of its stack.
fn existing_of(stack: &ClusterStack, all: &[ClusterStackRelease]) -> Vec<ExistingRelease> {
    let kubernetes = stack.spec.kubernetes_version.parse::<KubernetesMinor>().ok();
    all.iter()
        .filter(|r| r.namespace() == stack.namespace())
        .filter(|r| {
            ReleaseId::from_tag(&r.name_any()).is_ok_and(|id| {
                id.provider == stack.spec.provider && id.name == stack.spec.name && Some(id.kubernetes) == kubernetes
            })
        })
        .map(|r| ExistingRelease { name: r.name_any(), ready: r.status.as_ref().is_some_and(|s| s.ready) })
        .collect()
}

fn report_of(stack: &ClusterStack, source: &str, listing: &Result<Listing, String>, plan: &Plan) -> StackReport {
    let created: Vec<String> = plan.create.iter().map(ReleaseId::tag).collect();
    let mut releases: Vec<ReleaseReport> = plan
        .keep
        .iter()
        .map(|(name, kept)| ReleaseReport {
            name: name.clone(),
            action: if created.contains(name) { Action::Create } else { Action::Keep },
            reasons: kept.reasons.iter().map(ToString::to_string).collect(),
            objects: None,
        })
        .collect();
    releases.extend(plan.delete.iter().map(|name| ReleaseReport {
        name: name.clone(),
        action: Action::Delete,
        reasons: vec!["not in the keep set".to_string()],
        objects: None,
    }));
    releases.sort_by(|a, b| a.name.cmp(&b.name));
    StackReport {
        cluster_stack: format!("{}/{}", stack.namespace().unwrap_or_default(), stack.name_any()),
        source: source.to_string(),
        listed: listing.as_ref().ok().map(|l| l.releases.len()),
        source_error: listing.as_ref().err().cloned(),
        latest: plan.latest.as_ref().map(ReleaseId::tag),
        releases,
        warnings: plan.warnings.iter().map(ToString::to_string).collect(),
    }
}

/// Fetches each created or kept release and renders its cluster class in the stack's namespace.
async fn render_kept(
    report: &mut StackReport,
    stack: &ClusterStack,
    source: &AnySource,
    listing: &Listing,
    cache: &ReleaseCache,
    signature: Option<&crate::source::verify::policy::ReleasePolicy>,
) -> Result<(), CliError> {
    let namespace = stack.namespace().unwrap_or_else(|| "default".to_string());
    for release in report.releases.iter_mut().filter(|r| r.action != Action::Delete) {
        // A release kept only because a Cluster uses it may no longer be published.
        let Some(listed) = listing.releases.iter().find(|l| l.tag == release.name) else { continue };
        let progress = crate::source::NoProgress;
        let fetched = cache
            .fetch_signed(source, listed, FetchPolicy::default(), signature, &progress)
            .await
            .map_err(SourceCliError::from)?;
        fetched.metadata().map_err(SourceCliError::from)?;
        let ctx = RenderContext::new(&fetched.id, &namespace);
        release.objects = Some(render::render_cluster_class(&fetched.cluster_class_chart_dir(), &ctx)?);
    }
    Ok(())
}

/// Per Cluster: would its addons be re-applied, and why.
async fn addon_lines(
    usages: &[crate::controller::runtime::clusters::ClassUsage],
    addons: &[crate::api::ClusterAddon],
    listings: &BTreeMap<String, (AnySource, Result<Listing, String>)>,
    cache: Option<&ReleaseCache>,
) -> String {
    use crate::controller::addon::cluster_addon_name;
    use crate::controller::addon::decide::addon_decision;
    let mut out = String::from("\nCluster addons:\n");
    for usage in usages {
        let tag = usage.class.tag();
        let name = cluster_addon_name(&usage.cluster.name);
        let status = addons
            .iter()
            .find(|a| a.name_any() == name && a.namespace().as_deref() == Some(usage.cluster.namespace.as_str()))
            .and_then(|a| a.status.as_ref());
        // The addon version of the class's release, when the cache may fetch it.
        let mut target = None;
        if let Some(cache) = cache {
            for (source, listing) in listings.values() {
                let Ok(listing) = listing else { continue };
                let Some(listed) = listing.releases.iter().find(|l| l.tag == tag) else { continue };
                if let Ok(fetched) = cache.fetch(source, listed, FetchPolicy::default()).await
                    && let Ok(metadata) = fetched.metadata()
                {
                    target = Some(metadata.versions.components.cluster_addon.dotted());
                    break;
                }
            }
        }
        let (again, why) = addon_decision(&tag, status, target.as_deref());
        out.push_str(&format!(
            "  {}: {} ({why})\n",
            usage.cluster,
            if again { "addons would be applied" } else { "nothing to apply" }
        ));
    }
    out
}

fn text(reports: &[StackReport]) -> String {
    let mut out = String::new();
    for report in reports {
        let listed = match (report.listed, &report.source_error) {
            (Some(n), _) => format!("{n} releases listed"),
            (None, Some(error)) => format!("NOT LISTED: {error}"),
            (None, None) => "not listed".to_string(),
        };
        out.push_str(&format!("ClusterStack {} (source {}: {listed})\n", report.cluster_stack, report.source));
        if report.releases.is_empty() {
            out.push_str("  no release matches\n");
        }
        for release in &report.releases {
            let action = match release.action {
                Action::Create => "create",
                Action::Keep => "keep",
                Action::Delete => "delete",
            };
            out.push_str(&format!("  {action:<7} {:<34} {}\n", release.name, release.reasons.join("; ")));
            for object in release.objects.iter().flatten() {
                let api_version = object.types.as_ref().map_or("", |t| t.api_version.as_str());
                let kind = object.types.as_ref().map_or("", |t| t.kind.as_str());
                let ns = object.namespace().map(|n| format!("{n}/")).unwrap_or_default();
                out.push_str(&format!("            {kind} {ns}{} ({api_version})\n", object.name_any()));
            }
        }
        for warning in &report.warnings {
            out.push_str(&format!("  warning: {warning}\n"));
        }
    }
    out
}

/// Reads the objects of `kind` from a multi-document YAML file (`-`: standard
/// input), also looking inside `List` objects as `kubectl get -o yaml` prints them.
fn read_objects<T: serde::de::DeserializeOwned>(path: &Path, kind: &str) -> Result<Vec<T>, CliError> {
    let bad = |m: String| CliError::Usage(format!("{}: {m}", path.display()));
    let text = if path == Path::new("-") {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map_err(|e| bad(e.to_string()))?;
        s
    } else {
        std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?
    };
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).map_err(|e| bad(e.to_string()))?;
    let mut values = Vec::new();
    for doc in docs {
        match doc["kind"].as_str() {
            Some("List") => values.extend(doc["items"].as_array().cloned().unwrap_or_default()),
            _ => values.push(doc),
        }
    }
    values
        .into_iter()
        .filter(|v| v["kind"].as_str() == Some(kind))
        .map(|v| {
            let name = v["metadata"]["name"].as_str().unwrap_or("<unnamed>").to_string();
            serde_json::from_value(v).map_err(|e| bad(format!("{kind} {name}: {e}")))
        })
        .collect()
}
