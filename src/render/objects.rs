//! Rendered output to objects: multi-document YAML parsing, validation and
//! duplicate detection (the apply order is `crate::apply::order`'s).

use std::collections::HashMap;
use std::fmt;

use kube::api::DynamicObject;

use super::{DocumentText, RenderError, RenderedChart};

/// What makes an object unique in a cluster: group, kind, namespace and name.
/// The version is left out on purpose: two versions of one kind are the same object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    /// The key of a rendered object (an object without `apiVersion`/`kind` gets empty parts).
    pub fn of(object: &DynamicObject) -> Self {
        let (api_version, kind) =
            object.types.as_ref().map(|t| (t.api_version.as_str(), t.kind.as_str())).unwrap_or(("", ""));
        Self {
            group: group_of(api_version).to_string(),
            kind: kind.to_string(),
            namespace: object.metadata.namespace.clone(),
            name: object.metadata.name.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() { "core" } else { &self.group };
        match &self.namespace {
            Some(ns) => write!(f, "{group}/{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{group}/{} {}", self.kind, self.name),
        }
    }
}

/// `apps/v1` → `apps`, `v1` → `` (the core group).
fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

/// Parses one template's output into objects, checking each has
/// `apiVersion`, `kind` and `metadata.name`. `file` names the template in errors.
pub(crate) fn parse_objects(file: &str, output: &str) -> Result<Vec<DynamicObject>, RenderError> {
    let mut docs: Vec<serde_json::Value> = Vec::new();
    for (first_line, chunk) in split_documents(output) {
        let parsed: Vec<serde_json::Value> = serde_saphyr::from_multiple(chunk).map_err(|e| RenderError::NotYaml {
            file: file.to_string(),
            message: format!("in the document starting at line {first_line}: {e}"),
        })?;
        docs.extend(parsed);
    }
    let mut objects = Vec::with_capacity(docs.len());
    for (index, doc) in docs.into_iter().enumerate() {
        // `from_multiple` skips empty documents, but a document of only `~` is null.
        if doc.is_null() {
            continue;
        }
        objects.push(check_object(file, index + 1, doc)?);
    }
    Ok(objects)
}

/// A document that `helm template` prints but no API server accepts (no `kind`, no name, a
/// label that is a number...): `clusterstack render` prints it as helm does, with a warning;
/// a release holding one is not applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct UnacceptedDocument {
    /// The template (on disk) that printed it.
    pub file: String,
    /// Its 1-based position among the template's documents.
    pub index: usize,
    /// What an API server would refuse.
    pub reason: String,
    /// The document as helm prints it (read as go-yaml reads it).
    pub document: serde_json::Value,
}

impl fmt::Display for UnacceptedDocument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} document {}: {}", self.file, self.index, self.reason)
    }
}

/// The message of [`RenderError::Unaccepted`]: every document, so one pass shows them all.
pub(crate) fn unaccepted_message(documents: &[UnacceptedDocument]) -> String {
    let list: Vec<String> = documents.iter().map(ToString::to_string).collect();
    format!("documents helm prints but no API server accepts: {}", list.join("; "))
}

/// One document of a Helm chart's output.
pub(crate) enum HelmDocument {
    Empty,
    Object(Box<DynamicObject>),
    Unaccepted(UnacceptedDocument),
}

/// One document of a Helm chart's output (already split where helm splits documents) as the
/// API server is given it by helm and the Go operator, from `read`, the document read by
/// [`helm_render::yaml_to_json`] (go-yaml v2 through sigs.k8s.io/yaml: YAML 1.1, `0755` is 493,
/// `on` is true; lenient indentation of quoted scalars). Reading is the costly step and needs
/// neither file nor index, so it may run on another thread. `index` is the document's 1-based
/// position in `file`. What helm itself refuses (not YAML, not a mapping, a `metadata` that is
/// not one) is an error, as in helm.
pub(crate) fn helm_document(
    file: &str,
    index: usize,
    read: Result<serde_json::Value, String>,
) -> Result<HelmDocument, RenderError> {
    let value = read
        .map_err(|e| RenderError::NotYaml { file: file.to_string(), message: format!("in document {index}: {e}") })?;
    if value.is_null() {
        return Ok(HelmDocument::Empty);
    }
    // helm reads each document's head (apiVersion, kind, metadata.name and annotations) and
    // fails where that read fails.
    let head_readable = value.as_object().is_some_and(|m| {
        m.get("metadata").is_none_or(|meta| meta.is_null() || meta.is_object())
            && m.get("metadata").and_then(|meta| meta.get("annotations")).is_none_or(|a| a.is_null() || a.is_object())
    });
    if !head_readable {
        return Err(RenderError::InvalidObject {
            file: file.to_string(),
            index,
            message: "is not a mapping with a metadata mapping, which helm needs to read its head".into(),
        });
    }
    if let Some(message) = helm_render::head_type_error(&value) {
        return Err(RenderError::InvalidObject { file: file.to_string(), index, message });
    }
    // Checked before the object is taken apart, so that a document no API server accepts is
    // kept whole without a copy of every document.
    if let Err(reason) = object_problem(&value) {
        return Ok(HelmDocument::Unaccepted(UnacceptedDocument {
            file: file.to_string(),
            index,
            reason,
            document: value,
        }));
    }
    check_object(file, index, value).map(|object| HelmDocument::Object(Box::new(object)))
}

/// What keeps an API server from accepting a document, as [`check_object`] finds it.
fn object_problem(doc: &serde_json::Value) -> Result<(), String> {
    let map = doc.as_object().ok_or("is not a mapping")?;
    let fields = [("apiVersion", map.get("apiVersion")), ("kind", map.get("kind"))];
    for (field, value) in fields.into_iter().chain([("metadata.name", map.get("metadata").and_then(|m| m.get("name")))])
    {
        match value {
            Some(serde_json::Value::String(s)) if !s.is_empty() => {}
            None | Some(serde_json::Value::Null | serde_json::Value::String(_)) => {
                return Err(format!("has no {field}"));
            }
            // helm reads a number or a boolean there as its text; the API server wants a string.
            Some(other) => return Err(format!("{field} is {other}, not a string")),
        }
    }
    match map.get("metadata") {
        Some(metadata) => {
            use serde::Deserialize as _;
            kube::api::ObjectMeta::deserialize(metadata).map(drop).map_err(|e| format!("metadata: {e}"))
        }
        None => Ok(()),
    }
}

/// Checks that a document is an object with `apiVersion`, `kind` and `metadata.name`.
fn check_object(file: &str, index: usize, doc: serde_json::Value) -> Result<DynamicObject, RenderError> {
    let invalid =
        |message: &str| RenderError::InvalidObject { file: file.to_string(), index, message: message.to_string() };
    let map = doc.as_object().ok_or_else(|| invalid("is not a mapping"))?;
    for field in ["apiVersion", "kind"] {
        match map.get(field) {
            Some(serde_json::Value::String(s)) if !s.is_empty() => {}
            _ => return Err(invalid(&format!("has no {field}"))),
        }
    }
    match map.get("metadata").and_then(|m| m.get("name")) {
        Some(serde_json::Value::String(s)) if !s.is_empty() => {}
        _ => return Err(invalid("has no metadata.name")),
    }
    into_dynamic_object(doc).map_err(|e| invalid(&e))
}

/// Splits a YAML stream before every `---` line at column 0. Such a line
/// always starts a document (YAML forbids it inside scalars), so this is
/// exact; parsing documents one by one is markedly faster than the whole
/// stream at once. Yields the 1-based first line of each chunk.
fn split_documents(output: &str) -> Vec<(usize, &str)> {
    let is_marker = |line: &str| {
        line.strip_prefix("---").is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r']))
    };
    let mut chunks = Vec::new();
    let (mut start, mut start_line, mut offset) = (0, 1, 0);
    for (i, line) in output.split_inclusive('\n').enumerate() {
        if offset > start && is_marker(line.trim_end_matches('\n')) {
            chunks.push((start_line, &output[start..offset]));
            (start, start_line) = (offset, i + 1);
        }
        offset += line.len();
    }
    if start < output.len() {
        chunks.push((start_line, &output[start..]));
    }
    chunks
}

/// Builds the object by hand: serde's derived `DynamicObject` deserialiser
/// buffers the whole document for its flattened fields, which doubled the
/// parsing time.
pub(crate) fn into_dynamic_object(doc: serde_json::Value) -> Result<DynamicObject, String> {
    let serde_json::Value::Object(mut map) = doc else { return Err("is not a mapping".into()) };
    let mut take_string = |field: &str| match map.remove(field) {
        Some(serde_json::Value::String(s)) => s,
        _ => String::new(),
    };
    let api_version = take_string("apiVersion");
    let kind = take_string("kind");
    let metadata = match map.remove("metadata") {
        Some(metadata) => serde_json::from_value(metadata).map_err(|e| format!("metadata: {e}"))?,
        None => Default::default(),
    };
    Ok(DynamicObject {
        types: Some(kube::api::TypeMeta { api_version, kind }),
        metadata,
        data: serde_json::Value::Object(map),
    })
}

/// Objects read as [`into_dynamic_object`] builds them, for the render worker's reply: serde's
/// derived `DynamicObject` reader buffers every object whole for its flattened fields first. A
/// number in place of an object is an object the worker streamed ahead of its reply, which the
/// reader of the reply holds ([`with_streamed`]).
pub(crate) fn deserialize_objects<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<DynamicObject>, D::Error> {
    struct Objects;
    impl<'de> serde::de::Visitor<'de> for Objects {
        type Value = Vec<DynamicObject>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of objects")
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            while let Some(value) = seq.next_element::<serde_json::Value>()? {
                let object = match value {
                    serde_json::Value::Number(n) => take_streamed(n.as_u64()),
                    value => into_dynamic_object(value),
                };
                out.push(object.map_err(serde::de::Error::custom)?);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Objects)
}

/// Objects streamed ahead of a reply by number, each read (or not) as it came.
pub(crate) type Streamed = HashMap<u64, Result<DynamicObject, String>>;

thread_local! {
    /// The streamed objects of the reply being read on this thread: serde's `deserialize_with`
    /// takes no state, and the reply is read on one thread in one call ([`with_streamed`]).
    static STREAMED: std::cell::RefCell<Option<Streamed>> = const { std::cell::RefCell::new(None) };
}

/// Runs `read` (which reads a reply) with `streamed` as the objects its numbers refer to; each
/// can be taken once.
pub(crate) fn with_streamed<T>(streamed: Streamed, read: impl FnOnce() -> T) -> T {
    STREAMED.with(|s| *s.borrow_mut() = Some(streamed));
    let out = read();
    STREAMED.with(|s| *s.borrow_mut() = None);
    out
}

/// A streamed object by its number: it must have been streamed, read, and not taken before.
fn take_streamed(number: Option<u64>) -> Result<DynamicObject, String> {
    let number = number.ok_or("an object's number is not a whole number")?;
    STREAMED.with(|s| match s.borrow_mut().as_mut().and_then(|objects| objects.remove(&number)) {
        Some(Ok(object)) => Ok(object),
        Some(Err(message)) => Err(format!("streamed object {number}: {message}")),
        None => Err(format!("streamed object {number} was never sent, or named twice")),
    })
}

/// Fails when two objects share group, kind, namespace and name; `sources`
/// names the template each object came from (same length as `objects`).
pub(crate) fn check_duplicates(objects: &[DynamicObject], sources: &[String]) -> Result<(), RenderError> {
    check_duplicates_of(objects.iter().zip(sources.iter().map(String::as_str)))
}

/// [`check_duplicates`] over objects with their sources, wherever the objects are.
pub(crate) fn check_duplicates_of<'a>(
    objects: impl IntoIterator<Item = (&'a DynamicObject, &'a str)>,
) -> Result<(), RenderError> {
    match duplicates_of(objects).into_iter().next() {
        Some(duplicate) => Err(duplicate),
        None => Ok(()),
    }
}

/// Every object that shares group, kind, namespace and name with an earlier one, as the error
/// [`check_duplicates`] gives for the first.
pub(crate) fn duplicates(objects: &[DynamicObject], sources: &[String]) -> Vec<RenderError> {
    duplicates_of(objects.iter().zip(sources.iter().map(String::as_str)))
}

fn duplicates_of<'a>(objects: impl IntoIterator<Item = (&'a DynamicObject, &'a str)>) -> Vec<RenderError> {
    let mut seen: HashMap<ObjectKey, &str> = HashMap::new();
    let mut found = Vec::new();
    for (object, source) in objects {
        let key = ObjectKey::of(object);
        if let Some(&first) = seen.get(&key) {
            found.push(RenderError::Duplicate {
                key: key.to_string(),
                first: first.to_string(),
                second: source.to_string(),
            });
            continue;
        }
        seen.insert(key, source);
    }
    found
}

/// A rendered document, read.
struct Read {
    order: helm_render::ManifestOrder,
    source: String,
    read: Result<serde_json::Value, String>,
    /// Its text, when kept.
    text: Option<String>,
    /// The number the sink gave the whole document, when sent ([`Form::Json`]; `read` is then
    /// its head).
    streamed: Option<u64>,
    size: usize,
}

/// Where the render worker sends each object whole as JSON as soon as it is read; the sink
/// answers with the number its reader will know the object by. A sink that can no longer send
/// remembers it and fails the render's reply itself (see `render::worker`).
#[derive(Clone)]
pub struct JsonSink(std::sync::Arc<dyn Fn(&serde_json::value::RawValue) -> u64 + Send + Sync>);

impl JsonSink {
    pub fn new(send: impl Fn(&serde_json::value::RawValue) -> u64 + Send + Sync + 'static) -> Self {
        Self(std::sync::Arc::new(send))
    }
}

impl fmt::Debug for JsonSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("JsonSink")
    }
}

impl PartialEq for JsonSink {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

/// What the render of a Helm chart keeps of each document.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Form<'a> {
    /// The whole object (applying in process).
    Objects,
    /// The object's head and the document's text as helm prints it (`clusterstack render`).
    Text,
    /// The object's head, the whole document sent as JSON to the sink (the render worker's
    /// reply): written on the thread that read the document, whose tree is then let go, so that
    /// a large chart's objects are never all held at once, neither as trees nor as JSON
    /// (kube-prometheus-stack's CRDs take about 12 MB as trees), and the worker's parent reads
    /// them while the rest of the chart renders.
    Json(&'a JsonSink),
}

/// The keys of a document that the checks, the order and the duplicate check read.
const HEAD_KEYS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// A document read whole, cut to its head and sent as JSON when it is a mapping (anything else
/// is kept as read: it is an error or a document no API server accepts).
fn read_json(text: &str, sink: &JsonSink) -> (Result<serde_json::Value, String>, Option<u64>) {
    match helm_render::yaml_to_json(text) {
        Ok(serde_json::Value::Object(mut map)) => {
            // Writing a value read from YAML cannot fail: its keys are strings, its numbers finite.
            let sent = serde_json::value::to_raw_value(&map).ok().map(|json| (sink.0)(&json));
            map.retain(|k, _| HEAD_KEYS.contains(&k.as_str()));
            (Ok(serde_json::Value::Object(map)), sent)
        }
        other => (other, None),
    }
}

/// A Helm chart rendered with `opts` (in `env`, which then says whether the render drew on
/// randomness) into its objects in apply order, and the size of the documents they were read
/// from; `skip_tests` leaves `helm test` hooks out. [`Form::Text`] keeps each document's text for
/// printing, and then builds only each object's head (what printing, ordering and the checks
/// need), as `helm template` does: every document is still read whole and checked.
/// [`Form::Json`] builds only the heads too and keeps each object whole as JSON.
///
/// Reading is most of a large chart's cost (kube-prometheus-stack's CRDs alone are 4.5 MB of
/// YAML) and each document stands alone: documents are read on other threads as soon as the
/// render gives them (the `crds/` files before any template runs), and the chart is let go as
/// soon as it has rendered.
pub(super) fn helm_objects(
    chart: helm_render::Chart,
    opts: &helm_render::HelmOptions,
    skip_tests: bool,
    form: Form,
    env: &mut helm_render::RenderEnv,
) -> Result<(RenderedChart, usize), RenderError> {
    // Each document is read as helm's release manifest gives it to the API server
    // (`---\n# Source: NAME\nDOCUMENT\n`): its text as `render_chart_each` gives it ends with that
    // line break, so a block scalar that ends a document keeps its final line break, and a kept
    // one (`|+`) its trailing blank lines. Printing needs only each document's head.
    let read_printed = |text: &str| match form {
        Form::Objects => (helm_render::yaml_to_json(text), None),
        Form::Text => (helm_render::yaml_head(text), None),
        Form::Json(sink) => read_json(text, sink),
    };
    let keep_text = form == Form::Text;
    let (name, chart_label) = (chart.metadata.name.clone(), chart.label.clone());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4);
    let (tx, rx) = std::sync::mpsc::channel::<(helm_render::ManifestOrder, helm_render::HelmManifest)>();
    let rx = std::sync::Mutex::new(rx);
    let (rendered, mut read) = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    // The lock is held only to take the next document.
                    while let Ok((order, m)) = { crate::util::lock(&rx).recv() } {
                        let test =
                            m.hook.as_deref().is_some_and(|h| h.split(',').any(|h| h.trim().starts_with("test")));
                        if skip_tests && test {
                            continue;
                        }
                        let (read, streamed) = read_printed(&m.content);
                        let size = m.content.len();
                        let text = keep_text.then_some(m.content);
                        out.push(Read { order, source: m.source, read, text, streamed, size });
                    }
                    out
                })
            })
            .collect();
        let rendered = helm_render::render_chart_each(&chart, opts, env, &mut |order, m| {
            // The readers only stop early by panicking, which `join` passes on.
            let _ = tx.send((order, m));
        });
        drop((tx, chart));
        let read: Vec<_> =
            readers.into_iter().flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect();
        (rendered, read)
    });
    rendered?;
    // Helm's order: messages name `document N` of a template, duplicates the first and second.
    read.sort_by(|a, b| a.order.cmp(&b.order));
    let bytes = read.iter().map(|r| r.size).sum::<usize>();
    let (mut objects, mut sources, mut unaccepted, mut texts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut unaccepted_texts = Vec::new();
    let mut streamed = Vec::new();
    // Documents per template, for `document N` in messages.
    let mut counts: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for Read { source, read, text, streamed: sent, .. } in read {
        let inner = source.split_once('/').map(|(_, rest)| rest).unwrap_or(&source);
        let label = format!("{chart_label}/{inner}");
        let count = counts.entry(label.clone()).or_default();
        *count += 1;
        let text = text.map(|text| DocumentText { source, text });
        match helm_document(&label, *count, read)? {
            HelmDocument::Empty => {}
            HelmDocument::Object(object) => {
                objects.push(*object);
                sources.push(label);
                texts.extend(text);
                streamed.extend(sent);
            }
            HelmDocument::Unaccepted(document) => {
                unaccepted.push(document);
                unaccepted_texts.extend(text);
            }
        }
    }
    check_duplicates(&objects, &sources)?;
    match form {
        Form::Text => {
            let mut pairs: Vec<(DynamicObject, DocumentText)> = objects.into_iter().zip(texts).collect();
            crate::apply::sort_for_apply_by(&mut pairs, |(object, _)| object);
            (objects, texts) = pairs.into_iter().unzip();
            texts.extend(unaccepted_texts);
        }
        Form::Json(_) => {
            // Every object was read from a mapping, which `read_json` sends.
            if streamed.len() != objects.len() {
                return Err(RenderError::Chart {
                    chart: chart_label,
                    message: "an object was read without its JSON (a bug)".into(),
                });
            }
            let mut pairs: Vec<_> = objects.into_iter().zip(streamed).collect();
            crate::apply::sort_for_apply_by(&mut pairs, |(object, _)| object);
            (objects, streamed) = pairs.into_iter().unzip();
        }
        Form::Objects => crate::apply::sort_for_apply(&mut objects),
    }
    Ok((RenderedChart { name, objects, unaccepted, texts, streamed }, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> DynamicObject {
        let mut v = serde_json::json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
        if let Some(ns) = ns {
            v["metadata"]["namespace"] = ns.into();
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn objects_need_api_version_kind_and_name() {
        let err = parse_objects("t.yaml", "apiVersion: v1\nmetadata: {name: x}\n").unwrap_err();
        assert!(err.to_string().contains("t.yaml") && err.to_string().contains("kind"), "{err}");
        let err = parse_objects("t.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n").unwrap_err();
        assert!(err.to_string().contains("metadata.name"), "{err}");
        let err = parse_objects("t.yaml", "kind: ConfigMap\nmetadata: {name: x}\n").unwrap_err();
        assert!(err.to_string().contains("apiVersion"), "{err}");
        let err = parse_objects("t.yaml", "- a\n- b\n").unwrap_err();
        assert!(err.to_string().contains("not a mapping"), "{err}");
    }

    #[test]
    fn documents_split_at_markers_only() {
        let out = "a: 1\n---\nb: |\n  ---\n  x\n--- # c\nc: 3\n----\n";
        let chunks = split_documents(out);
        assert_eq!(chunks, [(1, "a: 1\n"), (2, "---\nb: |\n  ---\n  x\n"), (6, "--- # c\nc: 3\n----\n")]);
        assert_eq!(chunks.iter().map(|c| c.1).collect::<String>(), out);
        let err = parse_objects("t.yaml", "---\napiVersion: v1\n---\nkind: [x\n").unwrap_err().to_string();
        assert!(err.contains("starting at line 3"), "{err}");
    }

    #[test]
    fn empty_documents_are_skipped() {
        let out = "---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n";
        let objects = parse_objects("t.yaml", out).unwrap();
        assert_eq!(objects.len(), 1);
        assert_eq!(objects[0].metadata.name.as_deref(), Some("x"));
    }

    #[test]
    fn same_name_in_different_kinds_or_groups_is_no_duplicate() {
        let objects = vec![
            obj("v1", "ConfigMap", Some("a"), "x"),
            obj("v1", "Secret", Some("a"), "x"),
            obj("v1", "ConfigMap", Some("b"), "x"),
            obj("example.com/v1", "ConfigMap", Some("a"), "x"),
        ];
        let sources = vec!["t".to_string(); 4];
        check_duplicates(&objects, &sources).unwrap();
        let objects =
            vec![obj("apps/v1", "Deployment", Some("a"), "x"), obj("apps/v1beta1", "Deployment", Some("a"), "x")];
        let sources = vec!["one.yaml".to_string(), "two.yaml".to_string()];
        let err = check_duplicates(&objects, &sources).unwrap_err().to_string();
        assert!(err.contains("one.yaml") && err.contains("two.yaml") && err.contains("apps/Deployment a/x"), "{err}");
    }
}
