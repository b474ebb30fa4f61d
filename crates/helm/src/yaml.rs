//! Reading a chart's YAML files as Helm reads them: YAML 1.1 scalars (`yes`/`on`/`y` are
//! booleans, keys included, `010` is octal) through the engine's helm-compatible reader
//! (`crate::goyaml::yaml_to_value`), several documents in one values file coalesced, and
//! `Chart.yaml` scalars turned into text where Helm's chart metadata holds strings.

use serde_json::{Map, Value};

/// Reads a values file (`values.yaml`, a user's `-f` file) as Helm v4 does: every
/// document is read, a later document's keys win over an earlier one's (maps merged
/// deeply), empty documents count for nothing, and a document that is not a mapping is an
/// error.
pub fn read_values(text: &str) -> Result<Map<String, Value>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut out = Map::new();
    for (index, doc) in documents(text).into_iter().enumerate() {
        // What `yaml_to_value(doc)?.to_json()` gives (goyaml's tests hold them equal), through the
        // fast reader where it can: a chart's values are read before anything renders, and
        // kube-prometheus-stack's 180 KB take 5 ms through the general reader, 1 ms through it.
        let value = crate::goyaml::yaml_to_json(doc).map_err(|e| at_document(index, &e))?;
        match value {
            Value::Null => {}
            Value::Object(map) => merge_over(&mut out, map),
            other => {
                return Err(at_document(index, &format!("values must be a mapping, not {}", kind(&other))));
            }
        }
    }
    Ok(out)
}

fn at_document(index: usize, message: &str) -> String {
    if index == 0 { message.to_string() } else { format!("document {}: {message}", index + 1) }
}

/// Splits a YAML stream at its document markers (`---` at the start of a line). Mapping
/// documents cannot hold such a line in their content, which is always indented or quoted.
fn documents(text: &str) -> Vec<&str> {
    let mut docs = Vec::new();
    let mut start = 0;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        let is_marker = bare == "---"
            || bare.starts_with("--- ")
            || bare.starts_with("---\t")
            || bare == "..."
            || bare.starts_with("... ");
        if is_marker {
            docs.push(&text[start..offset]);
            // Content after `--- ` on the marker line belongs to the next document.
            start = if bare.starts_with("---") { offset + 3 } else { offset + line.len() };
        }
        offset += line.len();
    }
    docs.push(&text[start..]);
    // Before the first marker there is a document only if something is written there: a
    // stream that opens with `---` (after comments or directives, perhaps) starts its first
    // document at that marker, as go-yaml reads it.
    let written = |doc: &str| {
        doc.lines().any(|l| {
            let l = l.trim_start();
            !l.is_empty() && !l.starts_with('#') && !l.starts_with('%')
        })
    };
    if docs.len() > 1 && !written(docs[0]) {
        docs.remove(0);
    }
    docs
}

/// `src` over `dst`: maps merged key by key, anything else replaced.
fn merge_over(dst: &mut Map<String, Value>, src: Map<String, Value>) {
    for (key, value) in src {
        match (dst.get_mut(&key), value) {
            (Some(Value::Object(d)), Value::Object(s)) => merge_over(d, s),
            (_, value) => {
                dst.insert(key, value);
            }
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// The string fields of Helm's chart metadata (`Chart.yaml`).
const STRING_FIELDS: &[&str] = &[
    "name",
    "home",
    "version",
    "description",
    "icon",
    "apiVersion",
    "condition",
    "tags",
    "appVersion",
    "kubeVersion",
    "type",
];
const STRING_LIST_FIELDS: &[&str] = &["sources", "keywords"];
const DEPENDENCY_STRING_FIELDS: &[&str] = &["name", "version", "repository", "condition", "alias"];
const MAINTAINER_STRING_FIELDS: &[&str] = &["name", "email", "url"];

/// Reads `Chart.yaml` as Helm does: YAML 1.1, and a scalar where the metadata holds a
/// string becomes its text (`appVersion: 1.10` → `"1.1"`, `x: y` under `annotations` →
/// `"true"`), so such charts load as they do in Helm. Only the first document counts.
pub fn read_chart_yaml(text: &str) -> Result<Value, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let first = documents(text).into_iter().next().unwrap_or_default();
    let mut value = crate::goyaml::yaml_to_value(first)?.to_json();
    let Some(meta) = value.as_object_mut() else {
        return match value {
            Value::Null => Ok(Value::Object(Map::new())),
            other => Err(format!("Chart.yaml must be a mapping, not {}", kind(&other))),
        };
    };
    stringify_fields(meta, STRING_FIELDS);
    for field in STRING_LIST_FIELDS {
        if let Some(Value::Array(items)) = meta.get_mut(*field) {
            items.iter_mut().for_each(stringify);
        }
    }
    if let Some(Value::Object(annotations)) = meta.get_mut("annotations") {
        // A map of strings: a null value is the empty string.
        for v in annotations.values_mut() {
            if v.is_null() {
                *v = Value::String(String::new());
            }
            stringify(v);
        }
    }
    if let Some(Value::Array(deps)) = meta.get_mut("dependencies") {
        for dep in deps.iter_mut().filter_map(Value::as_object_mut) {
            stringify_fields(dep, DEPENDENCY_STRING_FIELDS);
            if let Some(Value::Array(tags)) = dep.get_mut("tags") {
                tags.iter_mut().for_each(stringify);
            }
        }
    }
    if let Some(Value::Array(people)) = meta.get_mut("maintainers") {
        for person in people.iter_mut().filter_map(Value::as_object_mut) {
            stringify_fields(person, MAINTAINER_STRING_FIELDS);
        }
    }
    Ok(value)
}

fn stringify_fields(map: &mut Map<String, Value>, fields: &[&str]) {
    for field in fields {
        if let Some(v) = map.get_mut(*field) {
            stringify(v);
        }
    }
}

/// A boolean or number becomes its JSON text; null, strings, lists and maps stay.
fn stringify(v: &mut Value) {
    match v {
        Value::Bool(_) | Value::Number(_) => *v = Value::String(v.to_string()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `helm template` printed `.Values | toJson` for these files.
    #[test]
    fn values_are_yaml_1_1_keys_included() {
        let text = "a: yes\nb: on\nc: y\nd: off\ne: 0x1F\nf: 010\ng: 1e3\nh: 1_000\nj: 2024-01-02\nl: \"yes\"\nn: 1.0\no: 0o17\n";
        let values = read_values(text).expect("reads");
        assert_eq!(
            Value::Object(values),
            json!({"a":true,"b":true,"c":true,"d":false,"e":31,"f":8,"false":1,"g":1000,"h":1000,"j":"2024-01-02","l":"yes","o":15})
        );
    }

    /// helm v4.2 loses a last line without its newline that is exactly 4,096 bytes long (its
    /// line reader; helm issue 32506, fixed in v4.3): we read it, as v4.3 and helm v3 do
    /// (docs/helm-versions.md).
    #[test]
    fn a_last_line_of_a_reader_buffer_s_length_is_read() {
        let text = format!("first: 1\nlast: {}", "x".repeat(4096 - 6));
        let values = read_values(&text).expect("reads");
        assert_eq!(values["last"].as_str().map(str::len), Some(4090));
    }

    #[test]
    fn later_documents_win_and_maps_merge() {
        let text = "a: 1\nb: {x: 1}\nl: [1]\n---\na: 2\nb: {y: 1}\nl: [2]\n---\n---\nc: 3\n";
        let values = read_values(text).expect("reads");
        assert_eq!(Value::Object(values), json!({"a": 2, "b": {"true": 1, "x": 1}, "c": 3, "l": [2]}));
        assert_eq!(read_values("# only a comment\n").expect("empty"), Map::new());
        assert_eq!(read_values("").expect("empty"), Map::new());
        let err = read_values("a: 1\n---\n- 1\n").expect_err("a list");
        assert!(err.contains("document 2") && err.contains("a list"), "{err}");
        assert!(read_values("a: [\n").is_err());
    }

    /// A stream opening with `---` (after comments or a directive) starts its first document
    /// there: `Chart.yaml` is that document, not an empty one before it (helm renders such
    /// charts; opentelemetry-ebpf-instrumentation's Chart.yaml opens so).
    #[test]
    fn a_stream_opening_with_a_marker_starts_its_first_document_there() {
        for prefix in ["---\n", "# the chart\n---\n", "%YAML 1.1\n--- # comment\n"] {
            let meta = read_chart_yaml(&format!("{prefix}apiVersion: v2\nname: c\nversion: 1.0.0\n")).expect("reads");
            assert_eq!(meta["name"], "c", "{prefix:?}");
        }
        // An explicitly empty first document is the one read.
        assert_eq!(read_chart_yaml("---\n---\nname: c\n").expect("reads"), json!({}));
        let err = read_values("---\n- 1\n").expect_err("a list");
        assert!(!err.contains("document 2"), "the first document is the first: {err}");
    }

    #[test]
    fn block_scalars_and_indented_markers_stay_in_their_document() {
        let text = "s: |\n  ---\n  x\nt: '---'\n";
        let values = read_values(text).expect("reads");
        assert_eq!(Value::Object(values), json!({"s": "---\nx\n", "t": "---"}));
    }

    #[test]
    fn chart_yaml_scalars_become_text_where_helm_holds_strings() {
        let text = "apiVersion: v2\nname: y\nversion: 1.0\nappVersion: 1.10\nannotations:\n  x: y\n  n: 5\nkeywords: [on, 3]\ndependencies:\n- name: sub\n  version: 1\n  alias: on\n  tags: [yes]\n  enabled: yes\n  import-values: [data]\nmaintainers:\n- name: 7\n";
        let meta = read_chart_yaml(text).expect("reads");
        assert_eq!(
            meta,
            json!({
                "apiVersion": "v2", "name": "true", "version": "1", "appVersion": "1.1",
                "annotations": {"x": "true", "false": "5"}, "keywords": ["true", "3"],
                "dependencies": [{"name": "sub", "version": "1", "alias": "true", "tags": ["true"],
                    "enabled": true, "import-values": ["data"]}],
                "maintainers": [{"name": "7"}]
            })
        );
        assert!(read_chart_yaml("- a\n").is_err());
        assert_eq!(read_chart_yaml("").expect("empty"), json!({}));
    }

    /// helm v4.2.3 renders a chart whose `Chart.yaml` repeats keys, with the last
    /// value (`.Chart.Description` was "second", `.Chart.Version` 0.2.0).
    #[test]
    fn chart_yaml_duplicate_keys_last_wins() {
        let text =
            "apiVersion: v2\nname: dup\nversion: 0.1.0\ndescription: first\ndescription: second\nversion: 0.2.0\n";
        let meta = read_chart_yaml(text).expect("reads");
        assert_eq!(meta, json!({"apiVersion": "v2", "name": "dup", "version": "0.2.0", "description": "second"}));
    }
}
