//! Rendering of release bundles with minijinja, pure and without I/O beyond
//! the bundle's own files.
//!
//! A chart directory holds `Chart.yaml` (name, version), `values.yaml`,
//! `templates/*.yaml` (each rendered) and `templates/_*.j2` (macros, importable,
//! never rendered on their own); an addon's chart may also hold
//! `overwrite.yaml`, a template rendered per workload cluster whose result is
//! merged over `values.yaml`. See `docs/release-format.md`.
//!
//! Rendering is strict: printing an undefined value fails with the file, the
//! line and the missing name; a template reaches only the files of its own
//! `templates/` directory; fuel and output size are limited. The output is
//! parsed as multi-document YAML into [`DynamicObject`]s, validated, checked
//! for duplicates and returned in apply order ([`crate::apply::sort_for_apply`]).

pub mod addons;
pub mod cache;
mod engine;
mod helm_text;
mod jinja;
mod objects;
pub mod worker;

use std::path::{Path, PathBuf};

use kube::api::DynamicObject;
use serde::Deserialize;

use crate::release::ReleaseId;

pub use helm_text::{HelmText, template_helm_release};
pub use objects::{ObjectKey, UnacceptedDocument};

/// The chart description file of a bundle directory.
pub const CHART_FILE: &str = "Chart.yaml";
/// The default values of a bundle directory.
pub const VALUES_FILE: &str = "values.yaml";
/// An addon's per-cluster values template, merged over `values.yaml`.
pub const OVERWRITE_FILE: &str = "overwrite.yaml";
/// The ecosystem's older per-cluster values template of a single addon
/// chart, next to the chart in the addon bundle.
pub const CLUSTER_ADDON_VALUES_FILE: &str = "cluster-addon-values.yaml";
/// The `Chart.yaml` annotation naming the template engine of a chart:
/// `jinja` for the project's own bundles; absent or `helm` for Helm charts.
pub const ENGINE_ANNOTATION: &str = "clusterstack.x-k8s.io/template-engine";
/// The Helm release name the Go operator renders addons under.
pub const ADDON_RELEASE_NAME: &str = "cluster-addon";
/// The namespace the Go operator renders addons into.
pub const ADDON_NAMESPACE: &str = "kube-system";
/// The directory of a bundle's templates.
pub const TEMPLATES_DIR: &str = "templates";

/// Limits that stop a runaway template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderLimits {
    /// minijinja fuel per template render (roughly one unit per instruction).
    pub fuel: u64,
    /// Largest output of one template, in bytes.
    pub max_output_bytes: usize,
}

impl Default for RenderLimits {
    fn default() -> Self {
        // Generous for real stacks (the sample uses a few thousand units),
        // small enough to stop an endless loop in well under a second.
        Self { fuel: 50_000_000, max_output_bytes: 16 * 1024 * 1024 }
    }
}

/// The CAPI objects an addon is rendered for, as plain maps.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, Deserialize)]
pub struct ClusterObjects {
    /// The `Cluster` (cluster.x-k8s.io).
    pub cluster: serde_json::Value,
    /// The object of the Cluster's `spec.controlPlaneRef`.
    pub control_plane: serde_json::Value,
    /// The object of the Cluster's `spec.infrastructureRef`.
    pub infra_cluster: serde_json::Value,
}

/// What templates see, besides the chart's own name and values.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderContext {
    /// `release.name`: the stack without version, e.g. `docker-ferrol-1-27`.
    pub release_name: String,
    /// `release.namespace`: where namespaced management-cluster objects go.
    pub namespace: String,
    /// `chart.version`: the dot-form stack version, e.g. `v3`.
    pub chart_version: String,
    /// `cluster`, `control_plane`, `infra_cluster` (addons only).
    pub cluster: Option<ClusterObjects>,
    /// The release's Kubernetes version (`metadata.yaml`), which Helm addon
    /// charts see as `.Capabilities.KubeVersion`.
    pub kube_version: Option<String>,
    pub limits: RenderLimits,
    /// Platform-team values per addon name, merged last (over `values.yaml` and `overwrite.yaml`).
    pub addon_values: std::collections::BTreeMap<String, serde_json::Value>,
    /// The release's `cluster-addon-values.yaml` (the older layout: one addon chart, no
    /// `clusteraddon.yaml`): the values template of every addon chart without an `overwrite.yaml`
    /// of its own, as the Go operator renders it.
    pub release_values: Option<PathBuf>,
    /// Keep documents of a Helm chart that helm prints but no API server accepts in
    /// [`RenderedChart::unaccepted`] (for `clusterstack render`, which prints them as helm does)
    /// instead of failing on them (what applying needs).
    pub keep_unaccepted: bool,
    /// Keep each document of a Helm chart as it rendered it in [`RenderedChart::texts`] (for
    /// `clusterstack render`, which prints them as helm does), building only the head of each
    /// object (`apiVersion`, `kind`, `metadata`); applying needs whole objects and no text.
    pub keep_text: bool,
    /// Send each object of a Helm chart whole as JSON to this sink as soon as it is read, keeping
    /// only its head in `objects` and the sink's number for it in [`RenderedChart::streamed`] (the
    /// render worker, which streams the objects to its parent while it renders).
    pub json_sink: Option<objects::JsonSink>,
}

impl RenderContext {
    /// The context of release `id` rendered into `namespace`.
    pub fn new(id: &ReleaseId, namespace: &str) -> Self {
        Self {
            release_name: id.stack_name(),
            namespace: namespace.to_string(),
            chart_version: id.version.dotted(),
            cluster: None,
            kube_version: None,
            limits: RenderLimits::default(),
            addon_values: Default::default(),
            release_values: None,
            keep_unaccepted: false,
            keep_text: false,
            json_sink: None,
        }
    }

    /// The same context keeping documents no API server accepts (see `keep_unaccepted`).
    pub fn keeping_unaccepted(mut self) -> Self {
        self.keep_unaccepted = true;
        self
    }

    /// The same context keeping each Helm document's text (see `keep_text`).
    pub fn keeping_text(mut self) -> Self {
        self.keep_text = true;
        self
    }

    /// The same context with the release's Kubernetes version.
    pub fn with_kube_version(mut self, version: impl Into<String>) -> Self {
        self.kube_version = Some(version.into());
        self
    }

    /// The same context for the addons of a workload cluster.
    pub fn with_cluster(mut self, cluster: ClusterObjects) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// The same context with platform-team values per addon.
    pub fn with_addon_values(mut self, values: std::collections::BTreeMap<String, serde_json::Value>) -> Self {
        self.addon_values = values;
        self
    }

    /// The same context with the release's `cluster-addon-values.yaml` (see `release_values`).
    pub fn with_release_values(mut self, file: Option<PathBuf>) -> Self {
        self.release_values = file;
        self
    }

    /// The same context with other limits.
    pub fn with_limits(mut self, limits: RenderLimits) -> Self {
        self.limits = limits;
        self
    }
}

/// Why a bundle could not be rendered. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("{context} {path}")]
    Io {
        context: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `Chart.yaml`, `values.yaml` or a rendered `overwrite.yaml` is not usable.
    #[error("{file}: {message}")]
    Bundle { file: String, message: String },
    /// A template failed: syntax, undefined value, failed filter, bad include.
    #[error("{file}:{line}: {message}")]
    Template { file: String, line: usize, message: String },
    #[error("{file}: stopped after using all its fuel ({fuel} units): an endless loop, or raise the fuel limit")]
    OutOfFuel { file: String, fuel: u64 },
    #[error("{file}: output exceeds the limit of {limit} bytes")]
    OutputTooLarge { file: String, limit: usize },
    #[error("{file}: the output is not valid YAML: {message}")]
    NotYaml { file: String, message: String },
    #[error("{file}: document {index}: {message}")]
    InvalidObject { file: String, index: usize, message: String },
    /// Documents helm prints (`helm template` succeeds) but no API server accepts: a release
    /// holding them is not applied.
    #[error("{}", objects::unaccepted_message(.0))]
    Unaccepted(Vec<UnacceptedDocument>),
    #[error("the object {key} is rendered twice: by {first} and by {second}")]
    Duplicate { key: String, first: String, second: String },
    /// A Helm chart could not be loaded or prepared (metadata, dependencies, values).
    #[error("chart {chart}: {message}")]
    Chart { chart: String, message: String },
    #[error("{0}: addons are rendered for a workload cluster, but no Cluster was given")]
    NoCluster(String),
    /// The render worker failed or ran out of a budget (see `worker`).
    #[error("release {release}: {message}")]
    Sandbox { release: String, message: String },
}

impl From<helm_render::HelmError> for RenderError {
    fn from(e: helm_render::HelmError) -> Self {
        match e {
            helm_render::HelmError::Chart { chart, message } => RenderError::Chart { chart, message },
            helm_render::HelmError::Template { file, line, message } => RenderError::Template { file, line, message },
        }
    }
}

impl RenderError {
    fn io(context: &'static str, path: &Path, source: std::io::Error) -> Self {
        RenderError::Io { context, path: path.to_path_buf(), source }
    }
}

/// A rendered chart: its name and its objects in apply order.
#[derive(Debug, Clone, Deserialize)]
pub struct RenderedChart {
    /// `name` of `Chart.yaml`; for addons the addon's name.
    pub name: String,
    #[serde(deserialize_with = "objects::deserialize_objects")]
    pub objects: Vec<DynamicObject>,
    /// Documents helm prints but no API server accepts (only with
    /// [`RenderContext::keep_unaccepted`] or from [`render_helm_release`]; else an error).
    pub unaccepted: Vec<UnacceptedDocument>,
    /// The documents of `objects` then of `unaccepted`, in their order, as helm prints them (Helm
    /// charts with [`RenderContext::keep_text`] only, whose `objects` then hold only their head;
    /// else empty).
    #[serde(default)]
    pub texts: Vec<DocumentText>,
    /// The number the [`RenderContext::json_sink`] gave each object of `objects` when it sent it
    /// whole, in their order (the render worker's; else empty): written in place of `objects`
    /// when the chart is serialised, so that the worker's reply reads back into the whole objects
    /// its parent has read meanwhile ([`objects::with_streamed`]).
    #[serde(skip)]
    pub streamed: Vec<u64>,
}

impl serde::Serialize for RenderedChart {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let texts = !self.texts.is_empty();
        let mut out = s.serialize_struct("RenderedChart", 3 + usize::from(texts))?;
        out.serialize_field("name", &self.name)?;
        if self.streamed.is_empty() {
            out.serialize_field("objects", &self.objects)?;
        } else {
            out.serialize_field("objects", &self.streamed)?;
        }
        out.serialize_field("unaccepted", &self.unaccepted)?;
        if texts {
            out.serialize_field("texts", &self.texts)?;
        }
        out.end()
    }
}

/// A rendered document's text and the template that wrote it, as `helm template` prints them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, Deserialize)]
pub struct DocumentText {
    /// Helm's name of the template: `chart/templates/x.yaml`, `chart/charts/sub/crds/y.yaml`.
    pub source: String,
    pub text: String,
}

/// A chart directory's `Chart.yaml`, read as helm reads it: the one reader of that file for
/// every path (`helm_render::chart_yaml`), so that no two of them disagree on a chart.
fn read_chart_file(chart_dir: &Path) -> Result<helm_render::load::Metadata, RenderError> {
    let file = chart_dir.join(CHART_FILE);
    let bytes = std::fs::read(&file).map_err(|e| RenderError::io("cannot read", &file, e))?;
    let (metadata, _) = helm_render::chart_yaml::read(&bytes)
        .map_err(|message| RenderError::Bundle { file: file.display().to_string(), message })?;
    Ok(metadata)
}

/// The template engine of a chart directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// Go templates with Sprig, as `helm template` renders them (the default).
    Helm,
    /// The project's minijinja bundles (`clusterstack.x-k8s.io/template-engine: jinja`).
    Jinja,
}

/// Which engine renders the chart in `chart_dir`, from its `Chart.yaml`.
pub fn chart_engine(chart_dir: &Path) -> Result<Engine, RenderError> {
    let chart_file = chart_dir.join(CHART_FILE);
    let chart = read_chart_file(chart_dir)?;
    match chart.annotations.get(ENGINE_ANNOTATION).map(String::as_str) {
        None | Some("helm") => Ok(Engine::Helm),
        Some("jinja") => Ok(Engine::Jinja),
        Some(other) => Err(RenderError::Bundle {
            file: chart_file.display().to_string(),
            message: format!("unknown {ENGINE_ANNOTATION} {other:?}: use \"helm\" or \"jinja\""),
        }),
    }
}

/// Renders a cluster-class chart (an extracted `<p>-<n>-<maj>-<min>-cluster-class/`
/// directory) into its objects, in apply order.
pub fn render_cluster_class(chart_dir: &Path, ctx: &RenderContext) -> Result<Vec<DynamicObject>, RenderError> {
    Ok(render_chart(chart_dir, ctx)?.objects)
}

/// Renders one addon chart (a directory of the addon bundle) for the
/// workload cluster in `ctx.cluster`, in apply order.
pub fn render_addon(addon_dir: &Path, ctx: &RenderContext) -> Result<RenderedChart, RenderError> {
    if ctx.cluster.is_none() {
        return Err(RenderError::NoCluster(addon_dir.display().to_string()));
    }
    render_chart(addon_dir, ctx)
}

/// The addon names of an extracted addon bundle: its subdirectories holding a
/// `Chart.yaml`, sorted.
pub fn addon_names(bundle_dir: &Path) -> Result<Vec<String>, RenderError> {
    let entries = std::fs::read_dir(bundle_dir).map_err(|e| RenderError::io("cannot read", bundle_dir, e))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| RenderError::io("cannot read", bundle_dir, e))?;
        let file_type = entry.file_type().map_err(|e| RenderError::io("cannot inspect", &entry.path(), e))?;
        // A symlinked chart directory counts as well (`is_dir` on the path follows links).
        if (file_type.is_dir() || file_type.is_symlink())
            && entry.path().is_dir()
            && entry.path().join(CHART_FILE).is_file()
        {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// Renders every addon of an extracted addon bundle (sorted by name) for the
/// workload cluster in `ctx.cluster`. Fails when two addons render the same object.
/// A directory that is itself a chart is rendered as the one addon.
pub fn render_addons(bundle_dir: &Path, ctx: &RenderContext) -> Result<Vec<RenderedChart>, RenderError> {
    let charts: Vec<RenderedChart> = addons::render_addons_reusing(bundle_dir, ctx, &|_, _| false)?
        .into_iter()
        .filter_map(|addon| match addon {
            addons::AddonRender::Rendered { chart, .. } => Some(chart),
            addons::AddonRender::Reused { .. } => None,
        })
        .collect();
    addons::check_addons(&charts)?;
    Ok(charts)
}

/// The platform values of the addon in `chart_dir`: by its directory's name (as
/// `clusteraddon.yaml` names addons), else by its chart's name.
fn platform_values<'a>(ctx: &'a RenderContext, chart_dir: &Path, chart_name: &str) -> Option<&'a serde_json::Value> {
    let dir_name = chart_dir.canonicalize().ok().and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
    dir_name.and_then(|d| ctx.addon_values.get(&d)).or_else(|| ctx.addon_values.get(chart_name))
}

/// Platform values for an addon the bundle does not have would be silently lost: refuse them.
/// An addon is named by its directory or its `Chart.yaml` `name` (see [`platform_values`]).
fn check_addon_value_names(bundle_dir: &Path, dirs: &[PathBuf], ctx: &RenderContext) -> Result<(), RenderError> {
    if ctx.addon_values.is_empty() {
        return Ok(());
    }
    let mut known: Vec<String> = Vec::new();
    for dir in dirs {
        let chart = read_chart_file(dir)?;
        let dir_name = dir.canonicalize().ok().and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
        let name = Some(chart.name).filter(|n| !n.is_empty());
        known.extend(dir_name.into_iter().chain(name).filter(|n| !known.contains(n)).collect::<Vec<_>>());
    }
    match ctx.addon_values.keys().find(|k| !known.contains(k)) {
        None => Ok(()),
        Some(unknown) => Err(RenderError::Bundle {
            file: bundle_dir.display().to_string(),
            message: format!(
                "values are given for the addon {unknown:?}, which the release does not have (its addons: {})",
                known.join(", ")
            ),
        }),
    }
}

/// Renders any chart directory with its engine: the addon form (with
/// `overwrite.yaml`) when `ctx.cluster` is set, the cluster-class form otherwise.
pub fn render_chart(chart_dir: &Path, ctx: &RenderContext) -> Result<RenderedChart, RenderError> {
    let chart = match chart_engine(chart_dir)? {
        Engine::Jinja => jinja::render_jinja_chart(chart_dir, ctx)?,
        Engine::Helm => render_helm_chart(chart_dir, ctx)?,
    };
    if !ctx.keep_unaccepted && !chart.unaccepted.is_empty() {
        return Err(RenderError::Unaccepted(chart.unaccepted));
    }
    Ok(chart)
}

/// A Helm chart, as the Go operator renders it: the cluster class as
/// `helm template <stack> <chart> --namespace <ns>`, an addon as `helm
/// template cluster-addon <chart> --namespace kube-system --include-crds
/// --kube-version <release's> -f <rendered overwrite.yaml>`. Hooks are kept
/// (as `helm template` prints them); `helm test` resources are not objects
/// to apply and are left out.
fn render_helm_chart(chart_dir: &Path, ctx: &RenderContext) -> Result<RenderedChart, RenderError> {
    let values = match &ctx.cluster {
        Some(_) => addon_values(chart_dir, ctx)?,
        None => serde_json::Value::Object(Default::default()),
    };
    Ok(render_helm_with(chart_dir, ctx, values, &mut helm_render::RenderEnv::default())?.0)
}

/// [`render_helm_chart`] with the user values given (an addon's from [`addon_values`]) and the
/// render's state, which says afterwards whether the render drew on randomness; with the size of
/// the rendered documents.
fn render_helm_with(
    chart_dir: &Path,
    ctx: &RenderContext,
    values: serde_json::Value,
    env: &mut helm_render::RenderEnv,
) -> Result<(RenderedChart, usize), RenderError> {
    let mut chart = helm_render::load_chart(chart_dir)?;
    chart.label = chart_dir.display().to_string();
    let mut opts = match &ctx.cluster {
        Some(_) => {
            let mut o = helm_render::HelmOptions::new(ADDON_RELEASE_NAME, ADDON_NAMESPACE);
            o.include_crds = true;
            o.kube_version = ctx.kube_version.clone();
            o
        }
        None => helm_render::HelmOptions::new(ctx.release_name.as_str(), ctx.namespace.as_str()),
    };
    opts.limits = gotmpl::ExecLimits {
        max_steps: ctx.limits.fuel,
        max_output_bytes: ctx.limits.max_output_bytes,
        ..gotmpl::ExecLimits::default()
    };
    opts.values = values;
    let form = match (ctx.keep_text, &ctx.json_sink) {
        (true, _) => objects::Form::Text,
        (false, Some(sink)) => objects::Form::Json(sink),
        (false, None) => objects::Form::Objects,
    };
    objects::helm_objects(chart, &opts, true, form, env)
}

/// The values an addon's Helm chart is rendered with for the Cluster of `ctx`: its values
/// template rendered, then the platform values over it.
fn addon_values(chart_dir: &Path, ctx: &RenderContext) -> Result<serde_json::Value, RenderError> {
    let mut values = serde_json::Value::Object(Default::default());
    let Some(cluster) = &ctx.cluster else { return Ok(values) };
    // The chart's own `overwrite.yaml`; else the release's `cluster-addon-values.yaml` (the
    // older layout: a release asset, beside the addon bundle, not in it); else, for a stack
    // source rendered in place, the `cluster-addon-values.yaml` beside its `cluster-addon/`.
    let overwrite = [
        Some(chart_dir.join(OVERWRITE_FILE)),
        ctx.release_values.clone(),
        Some(chart_dir.parent().unwrap_or(chart_dir).join(CLUSTER_ADDON_VALUES_FILE)),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.is_file());
    if let Some(file) = overwrite {
        values = render_values_template(&file.display().to_string(), &read_text(&file)?, cluster, &ctx.limits)?;
    }
    // Platform values (`valuesFrom`, `render --values`) come last, over the overwrite, as `-f`
    // files given after it would.
    if !ctx.addon_values.is_empty() {
        let chart = read_chart_file(chart_dir)?;
        if let Some(platform) = platform_values(ctx, chart_dir, &chart.name) {
            merge_values(&mut values, platform.clone());
        }
    }
    Ok(values)
}

/// Renders any Helm chart (a directory or a `.tgz`) as `helm template` does with `opts`,
/// into objects in apply order; `skip_tests` leaves `helm test` hooks out as `--skip-tests` does.
/// Documents helm prints but no API server accepts are in [`RenderedChart::unaccepted`].
pub fn render_helm_release(
    chart_path: &Path,
    opts: &helm_render::HelmOptions,
    skip_tests: bool,
) -> Result<RenderedChart, RenderError> {
    let mut chart = helm_render::load_chart(chart_path)?;
    chart.label = chart_path.display().to_string();
    let mut env = helm_render::RenderEnv::seeded(opts.seed);
    Ok(objects::helm_objects(chart, opts, skip_tests, objects::Form::Objects, &mut env)?.0)
}

/// Renders the ecosystem's addon values file (`overwrite.yaml`, `cluster-addon-values.yaml`)
/// for a workload cluster as the Go operator does: the whole file is a Go template (with Sprig)
/// over `.Cluster`, `.ControlPlane` and `.InfraCluster`, the full objects; its output is read as
/// YAML, and the text of its `values` key (`values: |`) is the values for the addon chart, read
/// as helm reads a `-f` file. An output without a `values` key is the values itself (the Go
/// operator's fallback); an empty one is no values. Unlike the Go operator, a `values` key that
/// holds anything but text is an error (Go would pass the whole file on, so the chart would see
/// its values under a key `values` and silently lose them).
pub fn render_values_template(
    file: &str,
    text: &str,
    cluster: &ClusterObjects,
    limits: &RenderLimits,
) -> Result<serde_json::Value, RenderError> {
    let bad = |message: String| RenderError::Bundle { file: file.to_string(), message };
    let funcs = helm_render::helm_func_map();
    let mut set = gotmpl::Templates::new();
    set.add(file, text, &funcs).map_err(|e| values_template_error(file, &e))?;
    let data = gotmpl::Value::map(std::collections::BTreeMap::from([
        ("Cluster".to_string(), gotmpl::Value::from_json(&cluster.cluster)),
        ("ControlPlane".to_string(), gotmpl::Value::from_json(&cluster.control_plane)),
        ("InfraCluster".to_string(), gotmpl::Value::from_json(&cluster.infra_cluster)),
    ]));
    let opts = gotmpl::ExecOptions {
        limits: gotmpl::ExecLimits {
            max_steps: limits.fuel,
            max_output_bytes: limits.max_output_bytes,
            ..gotmpl::ExecLimits::default()
        },
        ..gotmpl::ExecOptions::default()
    };
    let out = gotmpl::execute(&set, file, &data, &funcs, &opts).map_err(|e| values_template_error(file, &e))?;
    let doc = helm_render::yaml_to_value(&out)
        .map_err(|m| bad(format!("the rendered file is not valid YAML: {m}")))?
        .to_json();
    let values_text = match doc.get("values") {
        Some(serde_json::Value::String(t)) => t.as_str(),
        Some(serde_json::Value::Null) => return Ok(serde_json::Value::Object(Default::default())),
        Some(_) => return Err(bad("the key values must hold the values as text (values: |)".into())),
        None => out.as_str(),
    };
    helm_render::values::parse_values(values_text).map_err(|m| bad(format!("the rendered values are not valid: {m}")))
}

fn values_template_error(file: &str, e: &gotmpl::TemplateError) -> RenderError {
    let (_, line, detail) = e.innermost();
    RenderError::Template { file: file.to_string(), line, message: detail.to_string() }
}

/// The Cluster's `spec.topology.variables` as a map from name to value (templates see it as
/// `variables`).
pub fn topology_variables(cluster: &serde_json::Value) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    if let Some(vars) = cluster["spec"]["topology"]["variables"].as_array() {
        for v in vars {
            if let Some(name) = v["name"].as_str() {
                out.insert(name.to_string(), v["value"].clone());
            }
        }
    }
    serde_json::Value::Object(out)
}

fn read_text(path: &Path) -> Result<String, RenderError> {
    std::fs::read_to_string(path).map_err(|e| RenderError::io("cannot read", path, e))
}

/// Parses a values file; an empty file is an empty map.
fn parse_values(file: &str, text: &str) -> Result<serde_json::Value, RenderError> {
    let bad = |message: String| RenderError::Bundle { file: file.to_string(), message };
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(text).map_err(|e| bad(e.to_string()))?;
    match docs.len() {
        0 => Ok(serde_json::Value::Object(Default::default())),
        1 => match docs.into_iter().next() {
            Some(serde_json::Value::Null) | None => Ok(serde_json::Value::Object(Default::default())),
            Some(v @ serde_json::Value::Object(_)) => Ok(v),
            Some(_) => Err(bad("values must be a mapping".into())),
        },
        n => Err(bad(format!("values must be one YAML document, found {n}"))),
    }
}

/// Deep-merges `overlay` into `base` the way Helm merges values: maps merge
/// key by key, anything else (lists included) is replaced.
pub fn merge_values(base: &mut serde_json::Value, overlay: serde_json::Value) {
    match (base, overlay) {
        (serde_json::Value::Object(base), serde_json::Value::Object(overlay)) => {
            for (key, value) in overlay {
                match base.get_mut(&key) {
                    Some(existing) => merge_values(existing, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, overlay) => *base = overlay,
    }
}

#[cfg(test)]
mod tests;
