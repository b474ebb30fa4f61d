//! `Chart.yaml`, read once for every reader of it (loading a chart to render it, choosing a
//! chart's template engine, naming, packing and publishing charts, vendoring dependencies), as
//! helm reads it: YAML 1.1, the first document, a repeated key's last value, the fields helm
//! holds as strings read as text ([`crate::yaml::read_chart_yaml`]). Loading a chart to render
//! it then does what helm's loader does after reading: `apiVersion` defaults to `v1`, the text
//! fields are sanitised and the metadata validated, with helm's messages.

use serde_json::Value;

use crate::load::Metadata;

/// Reads `Chart.yaml`: the fields the project uses and all of it as data (`.Chart`).
pub fn read(data: &[u8]) -> Result<(Metadata, Value), String> {
    let raw = crate::yaml::read_chart_yaml(&crate::lossy_text(data))?;
    // helm reads a null list entry as a nil pointer and its validation names it.
    for (list, what) in [("dependencies", "dependencies"), ("maintainers", "maintainers")] {
        if let Some(Value::Array(items)) = raw.get(list)
            && items.iter().any(Value::is_null)
        {
            return Err(format!("validation: {what} must not contain empty or null nodes"));
        }
    }
    let metadata = serde_json::from_value(raw.clone()).map_err(|e| e.to_string())?;
    Ok((metadata, raw))
}

/// helm's loader after `Chart.yaml` (and a v1 chart's `requirements.yaml`) are read: a missing
/// `apiVersion` is `v1` (Helm 2's charts had none).
pub(crate) fn default_api_version(metadata: &mut Metadata, raw: &mut Value) {
    if metadata.api_version.as_deref().unwrap_or_default().is_empty() {
        metadata.api_version = Some("v1".into());
        if let Some(map) = raw.as_object_mut() {
            map.insert("apiVersion".into(), Value::String("v1".into()));
        }
    }
}

/// helm's `Metadata.Validate`, which its loader runs on every chart it loads: the text fields
/// sanitised (white space made a space, what does not print dropped), then name, version, type,
/// maintainers and dependencies checked. The message is helm's.
pub(crate) fn validate(metadata: &mut Metadata, raw: &mut Value) -> Result<(), String> {
    if let Some(map) = raw.as_object_mut() {
        sanitize_fields(map, SANITIZED);
        for list in ["sources", "keywords"] {
            if let Some(Value::Array(items)) = map.get_mut(list) {
                items.iter_mut().for_each(sanitize);
            }
        }
        for (list, fields) in [("maintainers", MAINTAINER_SANITIZED), ("dependencies", DEPENDENCY_SANITIZED)] {
            if let Some(Value::Array(items)) = map.get_mut(list) {
                for item in items.iter_mut().filter_map(Value::as_object_mut) {
                    sanitize_fields(item, fields);
                    if let Some(Value::Array(tags)) = item.get_mut("tags") {
                        tags.iter_mut().for_each(sanitize);
                    }
                }
            }
        }
        *metadata = serde_json::from_value(raw.clone()).map_err(|e| e.to_string())?;
    }
    let invalid = |message: String| Err(format!("validation: {message}"));
    let name = metadata.name.as_str();
    if name.is_empty() {
        return invalid("chart.metadata.name is required".into());
    }
    if name == "." || name == ".." {
        return invalid(format!("chart.metadata.name {} is not allowed", quote(name)));
    }
    if name != go_base(name) {
        return invalid(format!("chart.metadata.name {} is invalid", quote(name)));
    }
    let version = metadata.version.as_deref().unwrap_or_default();
    if version.is_empty() {
        return invalid("chart.metadata.version is required".into());
    }
    if crate::sprig::semver::Version::parse(version).is_err() {
        return invalid(format!("chart.metadata.version {} is invalid", quote(version)));
    }
    if !matches!(metadata.chart_type.as_deref().unwrap_or_default(), "" | "application" | "library") {
        return invalid("chart.metadata.type must be application or library".into());
    }
    let mut seen = std::collections::HashSet::new();
    for dep in &metadata.dependencies {
        let alias = dep.alias.as_deref().unwrap_or_default();
        if !alias.is_empty() && !alias.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return invalid(format!("dependency {} has disallowed characters in the alias", quote(&dep.name)));
        }
        let key = if alias.is_empty() { dep.name.as_str() } else { alias };
        if !seen.insert(key) {
            return invalid(format!("more than one dependency with name or alias {}", quote(key)));
        }
    }
    Ok(())
}

/// The fields helm's validation sanitises (not `version`, `apiVersion`, `type`, annotations).
const SANITIZED: &[&str] = &["name", "description", "home", "icon", "condition", "tags", "appVersion", "kubeVersion"];
const MAINTAINER_SANITIZED: &[&str] = &["name", "email", "url"];
const DEPENDENCY_SANITIZED: &[&str] = &["name", "version", "repository", "condition"];

fn sanitize_fields(map: &mut serde_json::Map<String, Value>, fields: &[&str]) {
    for field in fields {
        if let Some(v) = map.get_mut(*field) {
            sanitize(v);
        }
    }
}

/// helm's `sanitizeString`: white space becomes a space, what Go does not print is dropped.
fn sanitize(v: &mut Value) {
    if let Value::String(s) = v
        && s.chars().any(|c| c != ' ' && (c.is_whitespace() || !gotmpl::fmt::is_print(c)))
    {
        *s = s
            .chars()
            .filter_map(|c| if c.is_whitespace() { Some(' ') } else { gotmpl::fmt::is_print(c).then_some(c) })
            .collect();
    }
}

fn quote(s: &str) -> String {
    crate::sprig::gofmt::quote(s)
}

/// Go's `filepath.Base` on Unix: the last element, trailing slashes dropped.
fn go_base(path: &str) -> &str {
    if path.is_empty() {
        return ".";
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/";
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(text: &str) -> Result<(Metadata, Value), String> {
        let (mut metadata, mut raw) = read(text.as_bytes())?;
        default_api_version(&mut metadata, &mut raw);
        validate(&mut metadata, &mut raw)?;
        Ok((metadata, raw))
    }

    /// helm v4.2.3's messages for these `Chart.yaml`s (`helm template` of a chart with each).
    #[test]
    fn invalid_metadata_fails_with_helms_message() {
        let cases = [
            ("apiVersion: v2\nversion: 1.0.0\n", "validation: chart.metadata.name is required"),
            ("apiVersion: v2\nname: a\n", "validation: chart.metadata.version is required"),
            ("apiVersion: v2\nname: a\nversion: one\n", "validation: chart.metadata.version \"one\" is invalid"),
            ("apiVersion: v2\nname: a/b\nversion: 1.0.0\n", "validation: chart.metadata.name \"a/b\" is invalid"),
            ("apiVersion: v2\nname: ..\nversion: 1.0.0\n", "validation: chart.metadata.name \"..\" is not allowed"),
            (
                "apiVersion: v2\nname: a\nversion: 1.0.0\ntype: x\n",
                "validation: chart.metadata.type must be application or library",
            ),
            (
                "apiVersion: v2\nname: a\nversion: 1.0.0\ndependencies:\n- name: b\n  alias: \"x y\"\n",
                "validation: dependency \"b\" has disallowed characters in the alias",
            ),
            (
                "apiVersion: v2\nname: a\nversion: 1.0.0\ndependencies:\n- name: b\n- name: c\n  alias: b\n",
                "validation: more than one dependency with name or alias \"b\"",
            ),
            (
                "apiVersion: v2\nname: a\nversion: 1.0.0\ndependencies:\n- ~\n",
                "validation: dependencies must not contain empty or null nodes",
            ),
            (
                "apiVersion: v2\nname: a\nversion: 1.0.0\nmaintainers:\n- ~\n",
                "validation: maintainers must not contain empty or null nodes",
            ),
        ];
        for (text, message) in cases {
            assert_eq!(loaded(text).expect_err(text), message, "{text}");
        }
    }

    /// `.Chart.Description`, `.Chart.Keywords`, `.Chart.AppVersion` and `.Chart.Annotations` as
    /// helm v4.2.3 printed them.
    #[test]
    fn text_fields_are_sanitised_and_api_version_defaults_to_v1() {
        let text = "name: san\nversion: 1.0.0\ndescription: |\n  two\n  lines\tand tab\nkeywords: [\"a\\u0007b\"]\nannotations:\n  a: ~\n  b: |\n    x\n    y\nappVersion: \"1\\n2\"\n";
        let (metadata, raw) = loaded(text).expect("loads");
        assert_eq!(metadata.api_version.as_deref(), Some("v1"));
        assert_eq!(raw["apiVersion"], "v1");
        assert_eq!(raw["description"], "two lines and tab ");
        assert_eq!(raw["keywords"], serde_json::json!(["ab"]));
        assert_eq!(raw["appVersion"], "1 2");
        assert_eq!(raw["annotations"], serde_json::json!({"a": "", "b": "x\ny\n"}));
        // Names are sanitised before they are checked and matched.
        let (metadata, _) = loaded("apiVersion: v2\nname: \"a\\u0007\"\nversion: 1.0.0\n").expect("loads");
        assert_eq!(metadata.name, "a");
    }

    #[test]
    fn go_base_is_filepath_base() {
        for (path, base) in [("a", "a"), ("a/b", "b"), ("a/", "a"), ("/", "/"), ("", "."), ("a\\b", "a\\b")] {
            assert_eq!(go_base(path), base, "{path:?}");
        }
    }
}
