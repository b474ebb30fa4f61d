//! Helm charts rendered as `helm template` renders them, in process: the
//! chart and its subcharts loaded (`load`), dependencies enabled and values
//! coalesced (`values`), every template parsed into one Go template set and
//! executed with Helm's objects (`objects`), the output split into
//! manifests.
//!
//! Sandboxed like the Jinja engine: templates see only the chart's files,
//! no network (`lookup` is empty, as in `helm template`), no environment;
//! the engine limits work, output and nesting.

pub mod capabilities;
pub mod chart_yaml;
mod env;
mod errors;
pub mod goyaml;
pub mod helmfuncs;
pub mod ignore;
pub mod load;
pub mod objects;
mod printed;
pub mod schema;
pub mod sorter;
pub mod sprig;
pub mod values;
pub mod yaml;

use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

use gotmpl::{ExecLimits, ExecOptions, MissingKey, Templates, Value};

pub use load::{Chart, ChartFile, DataFile, LoadError};
pub use objects::DEFAULT_KUBE_VERSION;

pub use env::RenderEnv;
pub use goyaml::{value_to_yaml, yaml_head, yaml_to_json, yaml_to_value};
pub use helmfuncs::helm_func_map;

/// Why a chart did not render. The messages follow helm's: a template error names the file and
/// line the author has to look at.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HelmError {
    /// The chart could not be loaded or prepared (metadata, dependencies, values, schema).
    #[error("chart {chart}: {message}")]
    Chart { chart: String, message: String },
    /// A template failed: syntax, a failed `required`/`fail`, a limit, a bad call.
    #[error("{file}:{line}: {message}")]
    Template { file: String, line: usize, message: String },
}

/// How to render a chart: what `helm template NAME CHART --namespace NS
/// [--kube-version V] [--include-crds] -f values` is told.
#[derive(Debug, Clone)]
pub struct HelmOptions {
    pub release_name: String,
    pub namespace: String,
    /// `--kube-version`; [`DEFAULT_KUBE_VERSION`] when `None`.
    pub kube_version: Option<String>,
    /// User values, coalesced over the chart's.
    pub values: serde_json::Value,
    /// `--include-crds`: the charts' `crds/` files come first.
    pub include_crds: bool,
    pub is_upgrade: bool,
    /// `--api-versions`: extra entries of `.Capabilities.APIVersions`.
    pub api_versions: Vec<String>,
    /// Seeds the random functions (tests); `None` draws from the OS.
    pub seed: Option<u64>,
    pub limits: ExecLimits,
}

impl HelmOptions {
    pub fn new(release_name: impl Into<String>, namespace: impl Into<String>) -> Self {
        Self {
            release_name: release_name.into(),
            namespace: namespace.into(),
            kube_version: None,
            values: serde_json::Value::Object(Default::default()),
            include_crds: false,
            is_upgrade: false,
            api_versions: Vec::new(),
            seed: None,
            limits: ExecLimits::default(),
        }
    }
}

/// One rendered document, as `helm template` prints it after `# Source:`.
#[derive(Debug, Clone, PartialEq)]
pub struct HelmManifest {
    /// The template it came from, e.g. `mychart/templates/cm.yaml`.
    pub source: String,
    /// One YAML document, as helm prints it: with the white space helm keeps at its end, which
    /// a kept block scalar (`|+`) ending the document holds (see `printed`).
    pub content: String,
    /// The `helm.sh/hook` annotation, for hooks and tests.
    pub hook: Option<String>,
}

/// Loads a chart from a directory or a `.tgz`.
pub fn load_chart(path: &Path) -> Result<Chart, HelmError> {
    load::load(path).map_err(chart_error)
}

fn chart_error(e: LoadError) -> HelmError {
    HelmError::Chart { chart: e.chart, message: e.message }
}

/// A template of the whole set and the data it executes with.
struct Renderable {
    /// Helm's template name: `chart/templates/x.yaml`, `chart/charts/sub/templates/y.yaml`.
    name: String,
    text: Arc<[u8]>,
    /// `.Chart`, `.Values`, ... of the chart it belongs to (without `.Template`).
    data: Rc<BTreeMap<String, Value>>,
    base_path: String,
    /// Library charts' templates are parsed but not rendered.
    renders: bool,
}

/// Set by [`render_once_then_exit`].
static RENDER_ONCE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Declares this process one render long (the operator's render worker, which exits as soon as it
/// has written its reply): a render's syntax trees are then left for the process's end to free,
/// instead of being freed on a thread of their own that takes a core from the render's last
/// steps.
pub fn render_once_then_exit() {
    RENDER_ONCE.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// A file of a chart's `crds/` directory (or a subchart's), which `helm template
/// --include-crds` prints whole and unread.
#[derive(Debug, Clone)]
pub struct CrdFile {
    /// Helm's name of it: `chart/crds/x.yaml`, `chart/charts/sub/crds/y.yaml`.
    pub path: String,
    pub data: Arc<[u8]>,
}

/// Renders a chart into manifests, as `helm template` does.
pub fn render_chart(chart: &Chart, opts: &HelmOptions) -> Result<Vec<HelmManifest>, HelmError> {
    let mut manifests = Vec::new();
    render_chart_each(chart, opts, &mut RenderEnv::seeded(opts.seed), &mut |order, m| manifests.push((order, m)))?;
    // Stable: the documents of one file keep their order.
    manifests.sort_by(|a, b| a.0.cmp(&b.0));
    let crd_docs = manifests.iter().take_while(|(order, _)| !order.template).count();
    let mut manifests: Vec<HelmManifest> = manifests.into_iter().map(|(_, m)| m).collect();
    printed::trim_last_printed(&mut manifests, crd_docs);
    Ok(manifests)
}

/// Where a manifest stands in helm's order: the `crds/` files first, in their order, then the
/// templates by name; the documents of a file in their order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ManifestOrder {
    template: bool,
    crd: usize,
    name: String,
    document: usize,
}

/// [`render_chart`] in the render state `env` (which then tells whether the render drew on
/// randomness, [`RenderEnv::drew_randomness`]), handing each manifest to `sink` as soon as it is
/// known, with its place in helm's order: the `crds/` files' documents first (before any template
/// runs), then each template's as it renders, in the order templates render. A caller can so read
/// documents while the rest render; sorting by [`ManifestOrder`] gives [`render_chart`]'s list
/// but for the one document helm prints last before the hooks, which [`render_chart`] trims as
/// `helm template` prints it (helm install gives the API server each document untrimmed).
pub fn render_chart_each(
    chart: &Chart,
    opts: &HelmOptions,
    env: &mut RenderEnv,
    sink: &mut dyn FnMut(ManifestOrder, HelmManifest),
) -> Result<(), HelmError> {
    let sink = std::cell::RefCell::new(sink);
    // The first document (in helm's order) whose head helm cannot read, which fails the render.
    let mut unreadable: Option<(ManifestOrder, String)> = None;
    // Each file is let go once split into its documents, which the sink lets go once read.
    let mut crds_ready = |crds: Vec<CrdFile>| {
        for (crd, file) in crds.into_iter().enumerate() {
            for (document, doc) in printed::crd_documents(&crate::lossy_text(&file.data)).into_iter().enumerate() {
                let order = ManifestOrder { template: false, crd, name: String::new(), document };
                (sink.borrow_mut())(order, HelmManifest { source: file.path.clone(), content: doc, hook: None });
            }
        }
    };
    let mut rendered = |name: String, out: String| {
        for (document, doc) in manifest_parts(&out).into_iter().map(printed::document).enumerate() {
            let order = ManifestOrder { template: true, crd: 0, name: name.clone(), document };
            let head = if doc.contains("helm.sh/hook") { yaml_head(&doc).ok() } else { None };
            let hook = head.as_ref().and_then(hook_in_head);
            if hook.as_deref().is_some_and(|h| !known_hook(h)) {
                // helm reads the head before it drops the document: one it cannot read fails
                // the render all the same (the documents kept are read by the caller).
                if let Some(message) = head.as_ref().and_then(head_type_error)
                    && unreadable.as_ref().is_none_or(|(first, _)| order < *first)
                {
                    unreadable = Some((order, format!("YAML parse error on {name}: {message}")));
                }
                continue;
            }
            (sink.borrow_mut())(order, HelmManifest { source: name.clone(), content: doc, hook });
        }
    };
    render_templates_in(chart, opts, &mut rendered, env, &mut crds_ready)?;
    match unreadable {
        Some((_, message)) => Err(HelmError::Chart { chart: chart.label.clone(), message }),
        None => Ok(()),
    }
}

/// Whether helm's manifest sorter keeps a document with this `helm.sh/hook` annotation: it drops
/// one naming an event it does not know (Helm 2's `crd-install`, a typo), with only a log line.
pub fn known_hook(annotation: &str) -> bool {
    annotation.split(',').all(|e| KNOWN_HOOKS.contains(&e.trim().to_lowercase().as_str()))
}

/// A file's bytes as text, invalid UTF-8 replaced by U+FFFD.
/// The check comes first because `String::from_utf8_lossy` walks the bytes one by one while
/// `str::from_utf8` takes ASCII a word at a time: a tenth of the instructions on a large chart.
pub(crate) fn lossy_text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// Renders the chart's templates as helm's engine does and hands each output to `sink` as it
/// is rendered, with its template's name (`chart/templates/x.yaml`), `<no value>` removed; the
/// outputs helm's sorter skips (`NOTES.txt`, blank ones) are left out. Rendering is in helm's
/// parse order, not by name: helm sorts the outputs by name before it splits them. Returns the
/// `crds/` files of the charts left after dependency processing when `opts.include_crds`, in
/// helm's order.
pub fn render_templates(
    chart: &Chart,
    opts: &HelmOptions,
    sink: &mut dyn FnMut(String, String),
) -> Result<Vec<CrdFile>, HelmError> {
    let mut crds = Vec::new();
    render_templates_in(chart, opts, sink, &mut RenderEnv::seeded(opts.seed), &mut |files| crds = files)?;
    Ok(crds)
}

/// [`render_templates`] in `env`, giving the `crds/` files to `crds_ready` as soon as they are
/// known (before any template is parsed).
fn render_templates_in(
    chart: &Chart,
    opts: &HelmOptions,
    sink: &mut dyn FnMut(String, String),
    env: &mut RenderEnv,
    crds_ready: &mut dyn FnMut(Vec<CrdFile>),
) -> Result<(), HelmError> {
    let label = chart.label.clone();
    let bad = |message: String| HelmError::Chart { chart: label.clone(), message };
    let user = match &opts.values {
        serde_json::Value::Object(m) => m.clone(),
        serde_json::Value::Null => Default::default(),
        _ => return Err(bad("values must be a mapping".into())),
    };
    let mut chart = chart.clone();
    values::process_dependencies(&mut chart, &user).map_err(&bad)?;
    let coalesced = values::coalesce_values(&chart, &user).map_err(&bad)?;
    schema::validate_chart(&chart, &coalesced).map_err(&bad)?;
    let kube_version = opts.kube_version.as_deref().unwrap_or(DEFAULT_KUBE_VERSION);
    let kube = objects::KubeVersion::parse(kube_version).map_err(&bad)?;
    if let Some(constraint) = chart.metadata.kube_version.as_deref().filter(|c| !c.is_empty()) {
        kube.check_chart(constraint).map_err(&bad)?;
    }
    let caps = objects::Capabilities::new(kube, &opts.api_versions);
    let release = Value::map(BTreeMap::from([
        ("Name".to_string(), Value::str(opts.release_name.as_str())),
        ("Namespace".to_string(), Value::str(opts.namespace.as_str())),
        ("IsUpgrade".to_string(), Value::Bool(opts.is_upgrade)),
        ("IsInstall".to_string(), Value::Bool(!opts.is_upgrade)),
        ("Revision".to_string(), Value::Int(1)),
        ("Service".to_string(), Value::str("Helm")),
    ]));
    let top = Top { release, caps: Value::Object(Rc::new(caps)) };
    let root_values = Value::from_json(&serde_json::Value::Object(coalesced));
    let mut renderables = Vec::new();
    let mut typed = Vec::new();
    collect(&chart, &chart.metadata.name, true, &root_values, &top, &mut renderables, &mut typed);

    // Helm parses the deepest templates first, so a parent's `define`
    // replaces a subchart's of the same name.
    renderables.sort_by(|a, b| {
        let (da, db) = (a.name.matches('/').count(), b.name.matches('/').count());
        db.cmp(&da).then_with(|| b.name.cmp(&a.name))
    });
    // The `crds/` files go out before the templates are parsed (a large chart's parse is a
    // quarter of its render), so that a caller reading them on other threads starts at once. A
    // failure to collect them is reported after the parse, as before: a template that does not
    // parse is still the error a chart with both gets.
    let mut crds = Vec::new();
    let collected = if opts.include_crds { collect_crds(&chart, &chart.metadata.name, &mut crds) } else { Ok(()) };
    if collected.is_ok() && opts.include_crds {
        crds_ready(crds);
    }
    let funcs = helmfuncs::helm_func_map();
    let mut set = Templates::new();
    for r in &renderables {
        let text = crate::lossy_text(&r.text);
        set.add(&r.name, &text, &funcs).map_err(|e| template_error(&label, &e))?;
    }
    collected?;
    let exec = ExecOptions {
        missing_key: MissingKey::Zero,
        limits: opts.limits,
        map_methods: Some(objects::values_methods(typed)),
    };
    let mut total = 0usize;
    for r in &renderables {
        let base = r.name.rsplit('/').next().unwrap_or(&r.name);
        if base.starts_with('_') || !r.renders {
            continue;
        }
        let mut data = (*r.data).clone();
        data.insert(
            "Template".into(),
            Value::map(BTreeMap::from([
                ("Name".to_string(), Value::str(r.name.as_str())),
                ("BasePath".to_string(), Value::str(r.base_path.as_str())),
            ])),
        );
        let out = gotmpl::execute_with(&set, &r.name, &Value::map(data), &funcs, &exec, env)
            .map_err(|e| template_error(&label, &e))?;
        // The output limit is the chart's, not each template's: a hundred
        // templates of just under the limit are as costly as one over it.
        total += out.len();
        if total > opts.limits.max_output_bytes {
            return Err(HelmError::Template {
                file: r.name.clone(),
                line: 0,
                message: format!(
                    "output limit exceeded: the chart's templates wrote over {} bytes",
                    opts.limits.max_output_bytes
                ),
            });
        }
        if r.name.ends_with("NOTES.txt") || out.trim().is_empty() {
            continue;
        }
        // Helm's work-around: Go prints `<no value>` even with missingkey=zero.
        let out = if out.contains("<no value>") { out.replace("<no value>", "") } else { out };
        sink(r.name.clone(), out);
    }
    // Freeing a large chart's syntax trees is a tenth of its render (kube-prometheus-stack: 29 M
    // of 288 M instructions): done on the side, after the caller has its output.
    if RENDER_ONCE.load(std::sync::atomic::Ordering::Relaxed) {
        std::mem::forget(set);
    } else {
        let _ = std::thread::Builder::new().name("drop-templates".into()).spawn(move || drop(set));
    }
    Ok(())
}

/// What every chart's data shares.
struct Top {
    release: Value,
    caps: Value,
}

fn collect(
    chart: &Chart,
    full_path: &str,
    is_root: bool,
    values: &Value,
    top: &Top,
    out: &mut Vec<Renderable>,
    typed: &mut Vec<gotmpl::Map>,
) -> Value {
    // Each chart's `.Values` is Helm's `common.Values`, a map type with methods.
    if let Value::Map(m) = values {
        typed.push(m.clone());
    }
    let mut subcharts = BTreeMap::new();
    let mut data = BTreeMap::new();
    data.insert("Chart".to_string(), objects::chart_value(&enabled_metadata(chart), is_root));
    data.insert("Files".to_string(), Value::Object(Rc::new(objects::Files::new(Arc::new(chart.files.clone())))));
    data.insert("Release".to_string(), top.release.clone());
    data.insert("Capabilities".to_string(), top.caps.clone());
    data.insert("Values".to_string(), values.clone());
    for dep in &chart.dependencies {
        let sub_values = match values {
            Value::Map(m) => match m.borrow().get(dep.name()) {
                Some(v @ Value::Map(_)) => v.clone(),
                _ => Value::empty_map(),
            },
            _ => Value::empty_map(),
        };
        let sub_path = format!("{full_path}/charts/{}", dep.name());
        let sub = collect(dep, &sub_path, false, &sub_values, top, out, typed);
        subcharts.insert(dep.name().to_string(), sub);
    }
    data.insert("Subcharts".to_string(), Value::map(subcharts));
    let data = Rc::new(data);
    let library = chart.metadata.chart_type.as_deref() == Some("library");
    for t in &chart.templates {
        out.push(Renderable {
            name: format!("{full_path}/{}", t.name),
            text: t.data.clone(),
            data: data.clone(),
            base_path: format!("{full_path}/templates"),
            renders: !library,
        });
    }
    Value::map((*data).clone())
}

fn collect_crds(chart: &Chart, full_path: &str, out: &mut Vec<CrdFile>) -> Result<(), HelmError> {
    for f in chart.crd_files() {
        // Helm's `hasManifestExtension`: the extension in any case.
        let ext = f.name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
        if !["yaml", "yml", "json"].contains(&ext.as_str()) {
            continue;
        }
        let data = f.data_uncached().map_err(|message| HelmError::Chart { chart: chart.label.clone(), message })?;
        out.push(CrdFile { path: format!("{full_path}/{}", f.name), data });
    }
    for dep in &chart.dependencies {
        collect_crds(dep, &format!("{full_path}/charts/{}", dep.name()), out)?;
    }
    Ok(())
}

/// Helm's `releaseutil.SplitManifests`: the text trimmed, split where the regular expression
/// `(?:^|\s*\n)---\s*` matches (so `---` directly followed by a comment or text, as `{{- end -}}`
/// produces, separates documents too), each part trimmed, empty parts dropped.
pub fn split_manifests(text: &str) -> Vec<String> {
    manifest_parts(text).into_iter().map(|d| d.trim_end().to_string()).collect()
}

/// The documents of `text` exactly as helm's `SplitManifests` gives them and `helm template`
/// prints them: the parts left of white space, the last one keeping its trailing white space.
pub fn manifest_parts(text: &str) -> Vec<&str> {
    let text = text.trim_start();
    let mut parts = Vec::new();
    let mut last = 0;
    for (start, end) in separators(text) {
        parts.push(&text[last..start]);
        last = end;
    }
    parts.push(&text[last..]);
    parts.into_iter().filter(|d| !d.trim().is_empty()).map(str::trim_start).collect()
}

/// Where helm's separator `(?:^|\s*\n)---\s*` matches in `text`, as Go's leftmost-first,
/// non-overlapping search finds it (Go's `\s` is ASCII white space without `\v`). Matched by
/// hand: `---` at the very start, or preceded by a newline, taking the white space around it.
fn separators(text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let b = text.as_bytes();
    let space = |c: u8| matches!(c, b'\t' | b'\n' | b'\x0C' | b'\r' | b' ');
    let mut from = 0;
    std::iter::from_fn(move || {
        let mut search = from;
        loop {
            let dashes = search + text.get(search..)?.find("---")?;
            let start = if dashes == 0 {
                0
            } else if dashes > from && b[dashes - 1] == b'\n' {
                // The white space before, back to the previous match's end.
                let mut start = dashes - 1;
                while start > from && space(b[start - 1]) {
                    start -= 1;
                }
                start
            } else {
                search = dashes + 1;
                continue;
            };
            let mut end = dashes + 3;
            while end < b.len() && space(b[end]) {
                end += 1;
            }
            from = end;
            return Some((start, end));
        }
    })
}

/// The hook events helm knows (`test-success` is Helm 2's name of `test`).
const KNOWN_HOOKS: &[&str] = &[
    "pre-install",
    "post-install",
    "pre-delete",
    "post-delete",
    "pre-upgrade",
    "post-upgrade",
    "pre-rollback",
    "post-rollback",
    "test",
    "test-success",
];

/// The `helm.sh/hook` annotation of a document's head ([`yaml_head`]), as helm reads it into
/// a string: sigs.k8s.io/yaml gives a number or a boolean as its text and null as "" (the
/// annotation is there: a hook of no known event, which helm leaves out). No hook event is a
/// number, so only the presence of such a value counts, not its exact text.
pub fn hook_in_head(head: &serde_json::Value) -> Option<String> {
    match head.get("metadata")?.get("annotations")?.get("helm.sh/hook")? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => Some(String::new()),
        scalar @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_)) => Some(scalar.to_string()),
        // A sequence or mapping fails the whole render ([`head_type_error`]).
        _ => None,
    }
}

/// Where helm fails to read a document's head: helm decodes `apiVersion`, `kind`,
/// `metadata.name` and every `metadata.annotations` value into Go strings (its `SimpleHead`,
/// through sigs.k8s.io/yaml), which takes scalars as their text but not a sequence or a
/// mapping. The message is helm's, for the first such field in the order Go's decoder meets
/// them (the keys of the JSON it decodes are sorted).
pub fn head_type_error(head: &serde_json::Value) -> Option<String> {
    let shape = |v: &serde_json::Value| match v {
        serde_json::Value::Array(_) => Some("array"),
        serde_json::Value::Object(_) => Some("object"),
        _ => None,
    };
    let fail = |what: &str, field: &str| {
        format!(
            "error unmarshaling JSON: while decoding JSON: json: cannot unmarshal {what} into Go struct field {field} of type string"
        )
    };
    for (key, field) in [("apiVersion", "SimpleHead.apiVersion"), ("kind", "SimpleHead.kind")] {
        if let Some(what) = head.get(key).and_then(shape) {
            return Some(fail(what, field));
        }
    }
    let metadata = head.get("metadata")?;
    if let Some(annotations) = metadata.get("annotations").and_then(serde_json::Value::as_object) {
        let mut keys: Vec<&String> = annotations.keys().collect();
        keys.sort();
        for key in keys {
            if let Some(what) = annotations.get(key).and_then(shape) {
                return Some(fail(what, ".metadata.annotations"));
            }
        }
    }
    metadata.get("name").and_then(shape).map(|what| fail(what, ".metadata.name"))
}

fn template_error(label: &str, e: &gotmpl::TemplateError) -> HelmError {
    // The message is helm's own text; the file and line are those of the template helm names
    // first (the one being rendered, where a `required` in a helper is called), on disk.
    let inner = e.template.split_once('/').map(|(_, rest)| rest).unwrap_or(&e.template);
    let file = format!("{label}/{inner}");
    HelmError::Template { file, line: e.line, message: shorten(&errors::helm_message(e), 2048) }
}

/// Keeps a message readable in a condition: Go nests the text of every
/// including template, which a runaway recursion makes enormous.
fn shorten(message: &str, max: usize) -> String {
    if message.len() <= max {
        return message.to_string();
    }
    let mut head = max / 2;
    while !message.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = message.len() - max / 2;
    while !message.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{} [... {} bytes ...] {}", &message[..head], tail - head, &message[tail..])
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_budget;

/// Chart.yaml as `.Chart` shows it after dependency processing: only the enabled
/// dependencies (those `process_dependencies` kept, matched by alias or name).
fn enabled_metadata(chart: &Chart) -> serde_json::Value {
    let mut raw = chart.raw_metadata.clone();
    if let Some(serde_json::Value::Array(deps)) = raw.get_mut("dependencies") {
        let key = |alias: Option<&str>, name: &str| alias.filter(|a| !a.is_empty()).unwrap_or(name).to_string();
        let kept: Vec<String> = chart.metadata.dependencies.iter().map(|d| key(d.alias.as_deref(), &d.name)).collect();
        deps.retain(|d| {
            let name = d.get("name").and_then(serde_json::Value::as_str).unwrap_or_default();
            let alias = d.get("alias").and_then(serde_json::Value::as_str);
            kept.contains(&key(alias, name))
        });
    }
    raw
}
