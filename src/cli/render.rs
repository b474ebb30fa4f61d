//! `clusterstack render`: print the objects a release would apply.
//!
//! RELEASE is a tag (fetched through the source into the verified cache), a
//! release directory (`<dir>/<tag>/` with `metadata.yaml` and the tarballs,
//! extracted with the safe extractor into a temp dir), or an already
//! extracted chart directory.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use kube::api::DynamicObject;

use crate::package::build::{cluster_addon_asset, cluster_class_asset};
use crate::release::{METADATA_FILE, ReleaseId, ReleaseMetadata};
use crate::render::{self, CHART_FILE, ClusterObjects, RenderContext};
use crate::source::archive::{ExtractLimits, extract_tgz};
use crate::source::{FetchPolicy, ReleaseSource};

use super::CliError;
use super::source_args::{SourceArgs, SourceCliError};

/// Print the objects of a release in apply order, or of any Helm chart as `helm template` does.
#[derive(Debug, clap::Args)]
pub struct RenderArgs {
    /// `[NAME] RELEASE`. RELEASE is a release tag (looked up in `--source`), a release directory
    /// holding `metadata.yaml` and the tarballs, or a chart directory or `.tgz` (the
    /// cluster-class chart, with `--addons` the directory of addon charts or one addon chart, or
    /// any Helm chart). With NAME, or for a Helm chart that is not a cluster class, the chart is
    /// rendered as `helm template NAME CHART` renders it (NAME defaults to `release-name`, as in
    /// helm).
    #[arg(num_args = 1..=2, required = true, value_names = ["NAME", "RELEASE"])]
    pub args: Vec<String>,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub verify: super::verify_args::VerifyArgs,
    /// The cache directory for releases fetched by tag. Default:
    /// $XDG_CACHE_HOME/clusterstack, else ~/.cache/clusterstack.
    #[arg(long, env = "CLUSTERSTACK_CACHE")]
    pub cache: Option<PathBuf>,
    /// For an extracted chart directory: the release (tag or class name) to
    /// render as. Default for the cluster-class chart: from its `Chart.yaml`.
    #[arg(long)]
    pub tag: Option<String>,
    /// `.Release.Namespace` (`release.namespace` in Jinja templates).
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// Render the addons for the Cluster of `--cluster` instead of the cluster class.
    #[arg(long, requires = "cluster")]
    pub addons: bool,
    /// A YAML file with the CAPI `Cluster`, optionally followed by its control
    /// plane and infrastructure cluster objects as further documents.
    #[arg(long)]
    pub cluster: Option<PathBuf>,
    /// With `--addons`: the lifecycle hook whose stages are shown (stage headers go to stderr).
    #[arg(long, requires = "addons")]
    pub hook: Option<String>,
    /// For a Helm chart: a values file (repeatable; later files win), as `helm template -f`.
    /// With `--addons`: platform values for one addon, as `ADDON=FILE` (repeatable), merged
    /// last as `ClusterAddon.spec.valuesFrom` does.
    #[arg(short = 'f', long = "values")]
    pub values: Vec<String>,
    /// For a Helm chart: `.Capabilities.KubeVersion` (as `helm template --kube-version`); for a
    /// release, its `metadata.yaml` says it.
    #[arg(long)]
    pub kube_version: Option<String>,
    /// For a Helm chart: print the charts' `crds/` objects too (as `helm template --include-crds`).
    #[arg(long)]
    pub include_crds: bool,
    /// For a Helm chart: extra `.Capabilities.APIVersions` (repeatable), as `helm template -a`.
    #[arg(short = 'a', long = "api-versions")]
    pub api_versions: Vec<String>,
    /// For a Helm chart: leave out `helm test` hooks (as `helm template --skip-tests`).
    #[arg(long)]
    pub skip_tests: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
}

impl RenderArgs {
    /// RELEASE: the last positional argument.
    fn release(&self) -> &str {
        self.args.last().map(String::as_str).unwrap_or_default()
    }

    /// NAME, when given.
    fn name(&self) -> Option<&str> {
        match self.args.as_slice() {
            [name, _] => Some(name.as_str()),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Yaml,
    Json,
}

const STAGES_FILE: &str = crate::controller::addon::stages::CLUSTER_ADDON_FILE;

impl Charts {
    /// A message with the temporary extraction directory replaced by the release directory's
    /// assets, so an error names what the user has, never a temp dir.
    pub(super) fn unmask(&self, message: &str) -> String {
        match (&self._tmp, &self.release_dir) {
            (Some(tmp), Some(dir)) => {
                let tmp = tmp.path().display().to_string();
                message
                    .replace(&format!("{tmp}/cluster-class"), &format!("{}[cluster-class]", dir.display()))
                    .replace(&format!("{tmp}/cluster-addon"), &format!("{}[cluster-addon]", dir.display()))
                    .replace(&tmp, &dir.display().to_string())
            }
            _ => message.to_string(),
        }
    }
}

/// The chart directories to render and the release they belong to.
pub(super) struct Charts {
    pub(super) id: ReleaseId,
    pub(super) cluster_class: PathBuf,
    pub(super) addons: Option<PathBuf>,
    /// The release's `clusteraddon.yaml`, when it has one.
    pub(super) stages: Option<PathBuf>,
    /// The release's `cluster-addon-values.yaml` when it has one and no `clusteraddon.yaml` (the
    /// older layout: the values template of its one addon chart).
    pub(super) release_values: Option<PathBuf>,
    /// The release's Kubernetes version (`metadata.yaml`), for Helm addons.
    pub(super) kube_version: Option<String>,
    /// The release directory the charts were extracted from, for messages.
    release_dir: Option<PathBuf>,
    /// Keeps the extraction of a release directory alive while rendering.
    _tmp: Option<tempfile::TempDir>,
}

pub async fn run(args: RenderArgs) -> Result<(), CliError> {
    if let Some(chart) = plain_chart(&args)? {
        if args.output == Format::Yaml {
            return print_plain_chart(&chart, &args);
        }
        let rendered = render_plain_chart(&chart, &args)?;
        return print_rendered(&rendered.objects, &rendered.unaccepted, args.output);
    }
    if !args.addons && !args.values.is_empty() {
        return Err(CliError::Usage(
            "-f/--values: a release's cluster class takes no values; for addons use --addons -f ADDON=FILE".into(),
        ));
    }
    if args.include_crds || args.skip_tests || !args.api_versions.is_empty() {
        return Err(CliError::Usage(
            "--include-crds, --skip-tests and --api-versions are for a Helm chart rendered as helm template renders it; \
             a release's charts are rendered as the operator renders them"
                .into(),
        ));
    }
    let charts = resolve(&args).await?;
    // Documents helm prints but no API server accepts are printed too, with a warning.
    let mut ctx = RenderContext::new(&charts.id, &args.namespace).keeping_unaccepted();
    if let Some(kube) = args.kube_version.as_ref().or(charts.kube_version.as_ref()) {
        ctx = ctx.with_kube_version(kube.as_str());
    }
    if args.addons {
        let Some(cluster_file) = &args.cluster else {
            return Err(CliError::Usage("--addons needs --cluster FILE".into()));
        };
        let Some(addon_dir) = &charts.addons else {
            return Err(CliError::Usage(format!("the release {} has no addon bundle", charts.id)));
        };
        let mut values = std::collections::BTreeMap::new();
        for spec in &args.values {
            let (addon, file) =
                spec.split_once('=').ok_or_else(|| CliError::Usage(format!("--values {spec}: expected ADDON=FILE")))?;
            let text = std::fs::read_to_string(file).map_err(|e| CliError::Usage(format!("--values {file}: {e}")))?;
            let v = crate::controller::addon::render::parse_values_text(&text)
                .map_err(|e| CliError::Usage(format!("--values {file}: {e}")))?;
            values.insert(addon.to_string(), v);
        }
        let mut ctx = ctx
            .with_cluster(read_cluster(cluster_file)?)
            .with_addon_values(values)
            .with_release_values(charts.release_values.clone());
        if args.output == Format::Yaml {
            // Printed as helm prints them: each object's document, not the object written again.
            ctx = ctx.keeping_text();
        }
        let rendered = crate::controller::addon::render::render_bundle(addon_dir, charts.stages.as_deref(), &ctx)
            .map_err(|e| CliError::Usage(charts.unmask(&e)))?;
        if rendered.charts.is_empty() {
            return Err(CliError::Usage(format!(
                "{}: no addon charts to render (neither a chart nor a directory of charts)",
                args.release()
            )));
        }
        let hook = args.hook.as_deref().unwrap_or(crate::controller::addon::stages::AFTER_CONTROL_PLANE_INITIALIZED);
        let stages = rendered.stages(hook);
        if stages.is_empty() {
            return Err(CliError::Usage(format!("the hook {hook} has no stages in {}", args.release())));
        }
        let mut applied = Vec::new();
        for (i, stage) in stages.iter().enumerate() {
            let waits = [("pre", &stage.wait_for_pre_condition), ("post", &stage.wait_for_post_condition)]
                .iter()
                .filter_map(|(w, c)| c.as_ref().map(|c| format!(" wait-{w}: {}", c.conditions)))
                .collect::<String>();
            eprintln!("# {hook} stage {}: {} {}{waits}", i + 1, stage.action.as_str(), stage.name);
            if stage.action == crate::controller::addon::stages::Action::Apply
                && let Some(chart) = rendered.charts.iter().find(|c| c.name == stage.name)
            {
                applied.push(chart.clone());
            }
        }
        return print_addons(&applied, &charts, args.output, args.release());
    }
    let rendered = render::render_chart(&charts.cluster_class, &ctx)
        .map_err(|e| CliError::Usage(charts.unmask(&e.to_string())))?;
    let (objects, mut unaccepted) = (rendered.objects, rendered.unaccepted);
    if objects.is_empty() && unaccepted.is_empty() {
        return Err(CliError::Usage(format!("{} rendered no objects", args.release())));
    }
    for document in &mut unaccepted {
        document.file = charts.unmask(&document.file);
    }
    print_rendered(&objects, &unaccepted, args.output)
}

/// Prints the addons applied by the stages shown: with YAML each object's document as helm
/// prints it (`# Source:` and its text) in apply order (the project's Jinja bundles, which have
/// no helm text, as objects), with JSON the objects; then the documents no API server accepts,
/// each with a warning.
fn print_addons(
    applied: &[std::sync::Arc<render::RenderedChart>],
    charts: &Charts,
    format: Format,
    release: &str,
) -> Result<(), CliError> {
    let mut unaccepted: Vec<render::UnacceptedDocument> =
        applied.iter().flat_map(|c| c.unaccepted.iter().cloned()).collect();
    if applied.iter().all(|c| c.objects.is_empty()) && unaccepted.is_empty() {
        return Err(CliError::Usage(format!("{release} rendered no objects")));
    }
    for document in &mut unaccepted {
        document.file = charts.unmask(&document.file);
    }
    if format == Format::Json {
        let objects: Vec<DynamicObject> = applied.iter().flat_map(|c| c.objects.iter().cloned()).collect();
        return print_rendered(&objects, &unaccepted, format);
    }
    for document in &unaccepted {
        eprintln!(
            "warning: {document}: helm prints it, but no API server accepts it (the operator refuses the release)"
        );
    }
    let with_text = |c: &render::RenderedChart| c.texts.len() == c.objects.len() + c.unaccepted.len();
    let write_error = |source| CliError::Write { path: "standard output".into(), source };
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    let text = |out: &mut std::io::BufWriter<_>, t: &render::DocumentText| -> std::io::Result<()> {
        use std::io::Write as _;
        // The text as helm prints it, white space at its end included (a kept block scalar's).
        write!(out, "---\n# Source: {}\n", t.source)?;
        out.write_all(t.text.as_bytes())?;
        if t.text.ends_with('\n') { Ok(()) } else { out.write_all(b"\n") }
    };
    // The objects of every chart, then the documents no API server accepts, as before.
    for chart in applied {
        if with_text(chart) {
            chart.texts[..chart.objects.len()].iter().try_for_each(|t| text(&mut out, t)).map_err(write_error)?;
        } else {
            let printed = format_documents(&chart.objects, &[], Format::Yaml)?;
            std::io::Write::write_all(&mut out, printed.to_string().as_bytes()).map_err(write_error)?;
        }
    }
    for chart in applied {
        if with_text(chart) {
            chart.texts[chart.objects.len()..].iter().try_for_each(|t| text(&mut out, t)).map_err(write_error)?;
        } else {
            let extra: Vec<&serde_json::Value> = chart.unaccepted.iter().map(|d| &d.document).collect();
            let printed = format_documents(&[], &extra, Format::Yaml)?;
            std::io::Write::write_all(&mut out, printed.to_string().as_bytes()).map_err(write_error)?;
        }
    }
    std::io::Write::flush(&mut out).map_err(write_error)
}

/// Prints the objects, then the documents no API server accepts (as helm prints them, last),
/// each with a warning on stderr naming its template and position.
fn print_rendered(
    objects: &[DynamicObject],
    unaccepted: &[render::UnacceptedDocument],
    format: Format,
) -> Result<(), CliError> {
    for document in unaccepted {
        eprintln!(
            "warning: {document}: helm prints it, but no API server accepts it (the operator refuses the release)"
        );
    }
    let extra: Vec<&serde_json::Value> = unaccepted.iter().map(|d| &d.document).collect();
    print!("{}", format_documents(objects, &extra, format)?);
    Ok(())
}

/// The chart to render as `helm template` does, when RELEASE is one: with NAME, a `.tgz`, or a
/// Helm chart directory that is not a cluster class (nor `--addons`).
fn plain_chart(args: &RenderArgs) -> Result<Option<PathBuf>, CliError> {
    let path = Path::new(args.release());
    let is_chart = path.join(CHART_FILE).is_file() || (path.is_file() && args.release().ends_with(".tgz"));
    if args.name().is_some() {
        if args.addons {
            return Err(CliError::Usage(
                "NAME is for a Helm chart rendered as helm template does, not with --addons".into(),
            ));
        }
        if !is_chart {
            return Err(CliError::Usage(format!(
                "{}: not a chart directory (with Chart.yaml) or a chart .tgz",
                path.display()
            )));
        }
        return Ok(Some(path.to_path_buf()));
    }
    if args.addons || args.tag.is_some() || !is_chart {
        return Ok(None);
    }
    if path.is_file() {
        return Ok(Some(path.to_path_buf()));
    }
    let engine = render::chart_engine(path).map_err(|e| CliError::Usage(e.to_string()))?;
    let class = release_of_chart(path).is_ok();
    Ok((engine == render::Engine::Helm && !class).then(|| path.to_path_buf()))
}

/// What `helm template NAME CHART` is told by the same flags.
fn plain_options(args: &RenderArgs) -> Result<helm_render::HelmOptions, CliError> {
    let mut opts = helm_render::HelmOptions::new(args.name().unwrap_or(HELM_DEFAULT_NAME), args.namespace.as_str());
    opts.kube_version = args.kube_version.clone();
    opts.include_crds = args.include_crds;
    opts.api_versions = args.api_versions.clone();
    for file in &args.values {
        let text = std::fs::read_to_string(file).map_err(|e| CliError::Usage(format!("--values {file}: {e}")))?;
        let values =
            helm_render::values::parse_values(&text).map_err(|e| CliError::Usage(format!("--values {file}: {e}")))?;
        render::merge_values(&mut opts.values, values);
    }
    Ok(opts)
}

/// Prints a Helm chart as `helm template NAME CHART` prints it with the same flags: each
/// document's text in helm's order (objects are built only for `-o json`).
fn print_plain_chart(chart: &Path, args: &RenderArgs) -> Result<(), CliError> {
    let opts = plain_options(args)?;
    let text =
        render::template_helm_release(chart, &opts, args.skip_tests).map_err(|e| CliError::Usage(e.to_string()))?;
    if !text.rendered_anything {
        return Err(CliError::Usage(format!("{}: the chart rendered no objects", chart.display())));
    }
    for document in &text.unaccepted {
        eprintln!(
            "warning: {document}: helm prints it, but no API server accepts it (the operator refuses the release)"
        );
    }
    for duplicate in &text.duplicates {
        eprintln!("warning: {duplicate}: helm prints both (the operator refuses the release)");
    }
    let write_error = |source| CliError::Write { path: "standard output".into(), source };
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    text.write_to(&mut out).map_err(write_error)?;
    std::io::Write::flush(&mut out).map_err(write_error)
}

/// Renders a Helm chart as `helm template NAME CHART` does with the same flags, into objects.
fn render_plain_chart(chart: &Path, args: &RenderArgs) -> Result<render::RenderedChart, CliError> {
    let opts = plain_options(args)?;
    let rendered =
        render::render_helm_release(chart, &opts, args.skip_tests).map_err(|e| CliError::Usage(e.to_string()))?;
    if rendered.objects.is_empty() && rendered.unaccepted.is_empty() {
        return Err(CliError::Usage(format!("{}: the chart rendered no objects", chart.display())));
    }
    Ok(rendered)
}

/// The release name `helm template CHART` uses when given none.
const HELM_DEFAULT_NAME: &str = "release-name";

/// The charts of RELEASE (a tag through the source, a release directory, or a chart directory).
pub(super) async fn resolve(args: &RenderArgs) -> Result<Charts, CliError> {
    let path = Path::new(args.release());
    if path.join(METADATA_FILE).is_file() {
        return extract_release_dir(path);
    }
    if path.is_dir() {
        let id = match &args.tag {
            Some(tag) => ReleaseId::parse_any(tag).map_err(|e| CliError::Usage(e.to_string()))?,
            None if args.addons => {
                return Err(CliError::Usage(format!(
                    "{}: an extracted addon bundle does not name its release; pass --tag TAG",
                    path.display()
                )));
            }
            None => release_of_chart(path)?,
        };
        let stages = Some(path.join(STAGES_FILE)).filter(|p| p.is_file());
        return Ok(Charts {
            id,
            cluster_class: path.to_path_buf(),
            addons: Some(path.to_path_buf()),
            stages,
            release_values: None,
            kube_version: None,
            release_dir: None,
            _tmp: None,
        });
    }
    // A tag: through the source and the verified cache, as `pull` does.
    let source = args.source.open()?;
    let listing = source.list().await.map_err(SourceCliError::from)?;
    let release = listing.find(args.release()).ok_or_else(|| SourceCliError::NotFound {
        tag: args.release().to_string(),
        source_name: source.name(),
        hint: format!("not a directory either; {} releases listed", listing.releases.len()),
    })?;
    let cache = args
        .source
        .release_cache(args.cache.clone().unwrap_or_else(super::pull::default_cache_dir))
        .map_err(SourceCliError::from)?;
    let signature = args.verify.policy(None)?;
    let fetched = cache
        .fetch_signed(&source, release, FetchPolicy::default(), signature.as_ref(), &crate::source::NoProgress)
        .await
        .map_err(SourceCliError::from)?;
    let stages = fetched.asset_path(STAGES_FILE).filter(|p| p.is_file());
    Ok(Charts {
        id: fetched.id.clone(),
        cluster_class: fetched.cluster_class_chart_dir(),
        addons: fetched.cluster_addon_dir(),
        release_values: older_layout_values(stages.as_deref(), fetched.asset_path(render::CLUSTER_ADDON_VALUES_FILE)),
        stages,
        kube_version: fetched.metadata().ok().map(|m| m.versions.kubernetes.to_string()),
        release_dir: None,
        _tmp: None,
    })
}

/// The tag of a release directory: its name, or else read from its
/// cluster-class asset (`<p>-<n>-<maj>-<min>-cluster-class-<version>.tgz`).
fn release_dir_tag(dir: &Path) -> Option<ReleaseId> {
    let named = dir.canonicalize().ok().and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
    if let Some(id) = named.and_then(|n| ReleaseId::from_tag(&n).ok()) {
        return Some(id);
    }
    let mut found = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((prefix, version)) = name.strip_suffix(".tgz").and_then(|n| n.rsplit_once("-cluster-class-")) else {
            continue;
        };
        let id = ReleaseId::parse_any(&format!("{prefix}-{version}")).ok()?;
        if found.replace(id).is_some() {
            return None; // two class assets: ambiguous
        }
    }
    found
}

/// Extracts the tarballs of a release directory into a temp dir.
fn extract_release_dir(dir: &Path) -> Result<Charts, CliError> {
    let usage = |m: String| CliError::Usage(format!("{}: {m}", dir.display()));
    let id = release_dir_tag(dir)
        .ok_or_else(|| usage("neither the directory's name nor its cluster-class asset names the release".into()))?;
    let metadata_path = dir.join(METADATA_FILE);
    let text = std::fs::read_to_string(&metadata_path).map_err(|e| usage(e.to_string()))?;
    let file = metadata_path.display().to_string();
    let metadata = ReleaseMetadata::parse(&file, &text).map_err(|e| usage(e.to_string()))?;
    metadata.check_matches(&file, &id).map_err(|e| usage(e.to_string()))?;

    let tmp = tempfile::tempdir().map_err(|e| usage(format!("cannot create a temp directory: {e}")))?;
    let limits = ExtractLimits::default();
    let class_dir = tmp.path().join("cluster-class");
    extract_tgz(&dir.join(cluster_class_asset(&id)), &class_dir, &limits).map_err(|e| usage(e.to_string()))?;
    let addon_dir = tmp.path().join("cluster-addon");
    extract_tgz(&dir.join(cluster_addon_asset(&id, &metadata.versions.components.cluster_addon)), &addon_dir, &limits)
        .map_err(|e| usage(e.to_string()))?;
    // A Jinja bundle's top directory is `<stack>-cluster-class`; `helm package` (csctl) names it
    // after the chart: take the one chart there.
    let named = class_dir.join(format!("{}-cluster-class", id.stack_name()));
    let cluster_class = if named.join(CHART_FILE).is_file() {
        named
    } else {
        let charts: Vec<PathBuf> = std::fs::read_dir(&class_dir)
            .map_err(|e| usage(e.to_string()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join(CHART_FILE).is_file())
            .collect();
        match charts.as_slice() {
            [one] => one.clone(),
            _ => return Err(usage(format!("{} holds no single chart", cluster_class_asset(&id)))),
        }
    };
    let kube = metadata.versions.kubernetes.to_string();
    let stages = Some(dir.join(STAGES_FILE)).filter(|p| p.is_file());
    Ok(Charts {
        kube_version: Some(kube),
        release_dir: Some(dir.to_path_buf()),
        cluster_class,
        addons: Some(addon_dir),
        release_values: older_layout_values(stages.as_deref(), Some(dir.join(render::CLUSTER_ADDON_VALUES_FILE))),
        stages,
        id,
        _tmp: Some(tmp),
    })
}

/// The release's `cluster-addon-values.yaml`, when it is the values template of the addons: the
/// release has it and no `clusteraddon.yaml` (with one, each addon's `overwrite.yaml` is, as the
/// Go operator reads them).
fn older_layout_values(stages: Option<&Path>, values: Option<PathBuf>) -> Option<PathBuf> {
    match stages {
        Some(_) => None,
        None => values.filter(|p| p.is_file()),
    }
}

/// Formats objects, then `extra` documents, as a YAML stream or a JSON `List`.
fn format_documents(
    objects: &[DynamicObject],
    extra: &[&serde_json::Value],
    format: Format,
) -> Result<Printed, CliError> {
    match format {
        Format::Yaml => {
            // Each object prints alone, so large outputs (a chart's CRDs are megabytes) are
            // shared out over the cores and printed in order, never joined into one copy.
            let print = |run: &[DynamicObject]| -> Result<String, CliError> {
                let mut out = String::new();
                for object in run {
                    out.push_str("---\n");
                    out.push_str(&serde_saphyr::to_string(object).map_err(CliError::CrdYaml)?);
                }
                Ok(out)
            };
            // Documents helm prints but no API server accepts come last, as a part of their own.
            let mut tail = String::new();
            for document in extra {
                tail.push_str("---\n");
                tail.push_str(&serde_saphyr::to_string(document).map_err(CliError::CrdYaml)?);
            }
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
            if threads < 2 || objects.len() < 64 {
                return print(objects).map(|p| Printed(vec![p, tail]));
            }
            // Objects in apply order put the large CRDs first: small runs dealt out in turn keep
            // the threads about equally busy.
            let runs: Vec<&[DynamicObject]> = objects.chunks(objects.len().div_ceil(threads * 8)).collect();
            let mut parts: Vec<(usize, Result<String, CliError>)> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        let runs = &runs;
                        scope.spawn(move || {
                            (t..runs.len()).step_by(threads).map(|i| (i, print(runs[i]))).collect::<Vec<_>>()
                        })
                    })
                    .collect();
                handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
            });
            parts.sort_by_key(|p| p.0);
            let mut printed = parts.into_iter().map(|p| p.1).collect::<Result<Vec<_>, _>>()?;
            printed.push(tail);
            Ok(Printed(printed))
        }
        Format::Json => {
            let mut items: Vec<serde_json::Value> = objects
                .iter()
                .map(serde_json::to_value)
                .collect::<Result<_, _>>()
                .map_err(|e| CliError::Usage(e.to_string()))?;
            items.extend(extra.iter().map(|d| (*d).clone()));
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
            let mut out = serde_json::to_string_pretty(&list).map_err(|e| CliError::Usage(e.to_string()))?;
            out.push('\n');
            Ok(Printed(vec![out]))
        }
    }
}

/// Printed objects: the parts in order, written out one after the other.
pub struct Printed(Vec<String>);

impl std::fmt::Display for Printed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|part| f.write_str(part))
    }
}

/// The release a packaged cluster-class chart belongs to: its `Chart.yaml`
/// is named `<stack>-cluster-class` and carries the stack version.
fn release_of_chart(chart_dir: &Path) -> Result<ReleaseId, CliError> {
    let path = chart_dir.join(CHART_FILE);
    let usage = |m: String| CliError::Usage(format!("{}: {m}; pass --release TAG", path.display()));
    let bytes = std::fs::read(&path).map_err(|e| usage(e.to_string()))?;
    let (chart, _) = helm_render::chart_yaml::read(&bytes).map_err(usage)?;
    let version = chart.version.filter(|v| !v.is_empty()).ok_or_else(|| usage("no version".into()))?;
    let stack =
        chart.name.strip_suffix("-cluster-class").ok_or_else(|| usage("name does not end in -cluster-class".into()))?;
    ReleaseId::from_class_name(&format!("{stack}-{version}")).map_err(|e| usage(e.to_string()))
}

/// Reads the Cluster and, when present, its control plane and infrastructure
/// cluster (matched by the Cluster's `controlPlaneRef`/`infrastructureRef`).
pub fn read_cluster(path: &Path) -> Result<ClusterObjects, CliError> {
    let bad = |m: String| CliError::Usage(format!("{}: {m}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).map_err(|e| bad(e.to_string()))?;
    let kind = |d: &serde_json::Value| d["kind"].as_str().map(str::to_string);
    let cluster = docs
        .iter()
        .find(|d| kind(d).as_deref() == Some("Cluster"))
        .cloned()
        .ok_or_else(|| bad("no object of kind Cluster".into()))?;
    let referenced = |reference: &serde_json::Value| {
        docs.iter()
            .find(|d| {
                reference.is_object() && d["kind"] == reference["kind"] && d["metadata"]["name"] == reference["name"]
            })
            .cloned()
            .unwrap_or_else(|| serde_json::json!({}))
    };
    Ok(ClusterObjects {
        control_plane: referenced(&cluster["spec"]["controlPlaneRef"]),
        infra_cluster: referenced(&cluster["spec"]["infrastructureRef"]),
        cluster,
    })
}
