//! Rendered output to objects: multi-document YAML parsing, validation and
//! duplicate detection (the apply order is `crate::apply::order`'s).

use std::collections::HashMap;
use std::fmt;

use kube::api::DynamicObject;

use super::RenderError;

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
fn into_dynamic_object(doc: serde_json::Value) -> Result<DynamicObject, String> {
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

/// Fails when two objects share group, kind, namespace and name; `sources`
/// names the template each object came from (same length as `objects`).
pub(crate) fn check_duplicates(objects: &[DynamicObject], sources: &[String]) -> Result<(), RenderError> {
    match duplicates(objects, sources).into_iter().next() {
        Some(duplicate) => Err(duplicate),
        None => Ok(()),
    }
}

/// Every object that shares group, kind, namespace and name with an earlier one, as the error
/// [`check_duplicates`] gives for the first.
pub(crate) fn duplicates(objects: &[DynamicObject], sources: &[String]) -> Vec<RenderError> {
    let mut seen: HashMap<ObjectKey, usize> = HashMap::with_capacity(objects.len());
    let mut found = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        let key = ObjectKey::of(object);
        if let Some(&first) = seen.get(&key) {
            found.push(RenderError::Duplicate {
                key: key.to_string(),
                first: sources[first].clone(),
                second: sources[i].clone(),
            });
            continue;
        }
        seen.insert(key, i);
    }
    found
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
