//! The Go objects Helm gives templates: `.Chart` (`*chart.Metadata`) and `.Files` with its
//! methods (`.Capabilities` is in `capabilities`), and the methods of `.Values`.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use base64::Engine as _;

use super::ignore::glob_match;
use super::load::DataFile;
use gotmpl::{FuncError, Object, Value};

pub use super::capabilities::{
    ApiVersions, Capabilities, DEFAULT_API_VERSIONS, DEFAULT_KUBE_VERSION, HELM_VERSION, HelmVersion, KubeVersion,
};

/// `.Chart`: as helm v4 gives it, a `map[string]interface{}` of `chart.Metadata`'s fields under
/// their Go names (zero values included; keys Chart.yaml has beyond the metadata left out) and
/// `IsRoot`. Being a map, it prints, ranges, indexes and answers `typeOf` as a map does, and a
/// key it lacks is empty, not an error.
pub fn chart_value(raw: &serde_json::Value, is_root: bool) -> Value {
    let mut data: BTreeMap<String, Value> =
        CHART_FIELDS.iter().filter_map(|name| Some((name.to_string(), chart_field(raw, name)?))).collect();
    data.insert("IsRoot".into(), Value::Bool(is_root));
    Value::map(data)
}

/// Field `name` of `chart.Metadata` from Chart.yaml (`raw`), or its zero value.
fn chart_field(raw: &serde_json::Value, name: &str) -> Option<Value> {
    let empty_list = || Value::list(Vec::new());
    let (key, zero) = match name {
        "Dependencies" => return Some(go_dependencies(raw.get("dependencies"))),
        "Maintainers" => return Some(go_maintainers(raw.get("maintainers"))),
        "Name" => ("name", Value::str("")),
        "Home" => ("home", Value::str("")),
        "Sources" => ("sources", empty_list()),
        "Version" => ("version", Value::str("")),
        "Description" => ("description", Value::str("")),
        "Keywords" => ("keywords", empty_list()),
        "Icon" => ("icon", Value::str("")),
        "APIVersion" => ("apiVersion", Value::str("")),
        "Condition" => ("condition", Value::str("")),
        "Tags" => ("tags", Value::str("")),
        "AppVersion" => ("appVersion", Value::str("")),
        "Deprecated" => ("deprecated", Value::Bool(false)),
        // helm's is a nil map when Chart.yaml has none: `toJson` writes null, where this
        // empty map writes `{}` (the engine has no nil map); reading and ranging agree.
        "Annotations" => ("annotations", Value::empty_map()),
        "KubeVersion" => ("kubeVersion", Value::str("")),
        "Type" => ("type", Value::str("")),
        _ => return None,
    };
    Some(match raw.get(key) {
        None | Some(serde_json::Value::Null) => zero,
        // Chart.yaml strings stay strings even when YAML reads a number.
        Some(serde_json::Value::Number(n)) if matches!(zero, Value::String(_)) => Value::str(n.to_string()),
        Some(v) => Value::from_json(v),
    })
}

/// The fields of Helm's `chart.Metadata`.
const CHART_FIELDS: &[&str] = &[
    "Name",
    "Home",
    "Sources",
    "Version",
    "Description",
    "Keywords",
    "Maintainers",
    "Icon",
    "APIVersion",
    "Condition",
    "Tags",
    "AppVersion",
    "Deprecated",
    "Annotations",
    "KubeVersion",
    "Dependencies",
    "Type",
];

/// Field `key` of a Chart.yaml entry as the Go string helm holds: a number is its text,
/// anything else absent is "".
fn go_text(entry: &serde_json::Value, key: &str) -> Value {
    match entry.get(key) {
        Some(serde_json::Value::String(s)) => Value::str(s.as_str()),
        Some(serde_json::Value::Number(n)) => Value::str(n.to_string()),
        _ => Value::str(""),
    }
}

/// `.Chart.Maintainers` as Helm's `*chart.Maintainer` values: `Name`, `Email`, `URL`.
fn go_maintainers(list: Option<&serde_json::Value>) -> Value {
    let Some(serde_json::Value::Array(list)) = list else { return Value::list(Vec::new()) };
    let items = list
        .iter()
        .map(|m| {
            Value::map(BTreeMap::from([
                ("Name".to_string(), go_text(m, "name")),
                ("Email".to_string(), go_text(m, "email")),
                ("URL".to_string(), go_text(m, "url")),
            ]))
        })
        .collect();
    Value::list(items)
}

/// `.Chart.Dependencies` as Helm's `*chart.Dependency` values after dependency processing
/// (the caller passes the enabled ones): Go field names, an alias as the name, string
/// `import-values` in their `{child: exports.X, parent: .}` form.
fn go_dependencies(deps: Option<&serde_json::Value>) -> Value {
    let Some(serde_json::Value::Array(deps)) = deps else { return Value::list(Vec::new()) };
    let items = deps
        .iter()
        .map(|d| {
            let alias = d.get("alias").and_then(serde_json::Value::as_str).unwrap_or_default();
            let name = if alias.is_empty() { go_text(d, "name") } else { Value::str(alias) };
            let tags = match d.get("tags") {
                Some(serde_json::Value::Array(t)) => Value::from_json(&serde_json::Value::Array(t.clone())),
                _ => Value::list(Vec::new()),
            };
            let imports = match d.get("import-values") {
                Some(serde_json::Value::Array(list)) => Value::list(
                    list.iter()
                        .map(|iv| match iv {
                            serde_json::Value::String(s) => Value::map(BTreeMap::from([
                                ("child".to_string(), Value::str(format!("exports.{s}"))),
                                ("parent".to_string(), Value::str(".")),
                            ])),
                            other => Value::from_json(other),
                        })
                        .collect(),
                ),
                _ => Value::list(Vec::new()),
            };
            Value::map(BTreeMap::from([
                ("Name".to_string(), name),
                ("Version".to_string(), go_text(d, "version")),
                ("Repository".to_string(), go_text(d, "repository")),
                ("Condition".to_string(), go_text(d, "condition")),
                ("Tags".to_string(), tags),
                ("Enabled".to_string(), Value::Bool(true)),
                ("ImportValues".to_string(), imports),
                ("Alias".to_string(), Value::str(alias)),
            ]))
        })
        .collect();
    Value::list(items)
}

/// `.Files`: the chart's other files, by path.
pub struct Files {
    files: Arc<Vec<DataFile>>,
    /// Indices into `files` this view holds (`Glob` narrows it).
    view: Vec<usize>,
}

impl Files {
    pub fn new(files: Arc<Vec<DataFile>>) -> Self {
        let view = (0..files.len()).collect();
        Self { files, view }
    }

    fn iter(&self) -> impl Iterator<Item = &DataFile> {
        self.view.iter().filter_map(|i| self.files.get(*i))
    }

    /// The bytes of file `name`; none (helm's nil) when the chart has no such file.
    fn get(&self, name: &str) -> Result<Option<Arc<[u8]>>, FuncError> {
        self.iter().find(|f| f.name == name).map(|f| f.data().map_err(FuncError::msg)).transpose()
    }

    fn text(&self, name: &str) -> Result<String, FuncError> {
        Ok(self.get(name)?.map(|data| String::from_utf8_lossy(&data).into_owned()).unwrap_or_default())
    }

    fn as_map(&self, encode: bool) -> Result<String, FuncError> {
        let mut entries: BTreeMap<String, String> = BTreeMap::new();
        for f in self.iter() {
            let base = f.name.rsplit('/').next().unwrap_or(&f.name).to_string();
            let data = f.data().map_err(FuncError::msg)?;
            let v = if encode {
                base64::engine::general_purpose::STANDARD.encode(&data)
            } else {
                String::from_utf8_lossy(&data).into_owned()
            };
            entries.insert(base, v);
        }
        if entries.is_empty() {
            return Ok(String::new());
        }
        let map = Value::map(entries.into_iter().map(|(k, v)| (k, Value::str(v))).collect());
        // Helm's toYaml: sigs.k8s.io/yaml, the trailing newline trimmed.
        Ok(crate::goyaml::value_to_yaml(&map).trim_end_matches('\n').to_string())
    }
}

impl Object for Files {
    fn type_name(&self) -> &str {
        "files.Files"
    }

    /// `AsConfig` and `AsSecrets` are answered by [`Object::call`], which may fail (a file that
    /// can no longer be read).
    fn field(&self, _name: &str) -> Option<Value> {
        None
    }

    fn call(&self, method: &str, args: &[Value]) -> Option<Result<Value, FuncError>> {
        let arg = |i: usize| -> Result<&str, FuncError> {
            match args.get(i) {
                Some(Value::String(s)) => Ok(s),
                Some(other) => {
                    Err(FuncError::msg(format!("wrong type for value; expected string; got {}", other.type_name())))
                }
                None => Err(FuncError::msg(format!("wrong number of args for {method}: want 1 got 0"))),
            }
        };
        Some(match method {
            "Get" => arg(0).and_then(|n| self.text(n)).map(Value::str),
            "GetBytes" => arg(0)
                .and_then(|n| self.get(n))
                .map(|data| Value::Bytes(data.map(|d| Rc::from(&d[..])).unwrap_or_else(|| Rc::from(&[][..])))),
            // One final newline is dropped. A file that is there but empty fails as it does in
            // helm v4.2 (it indexes the text's last byte; v4.3 returns no lines).
            "Lines" => arg(0).and_then(|n| match self.get(n)? {
                None => Ok(Value::list(Vec::new())),
                Some(data) if data.is_empty() => Err(FuncError::msg("runtime error: index out of range [-1]")),
                Some(data) => {
                    let text = String::from_utf8_lossy(&data);
                    Ok(Value::list(text.strip_suffix('\n').unwrap_or(&text).split('\n').map(Value::str).collect()))
                }
            }),
            "Glob" => arg(0).and_then(|pattern| {
                let mut view = Vec::new();
                for i in &self.view {
                    let Some(f) = self.files.get(*i) else { continue };
                    if glob_match(pattern, &f.name, true).map_err(FuncError::msg)? {
                        view.push(*i);
                    }
                }
                Ok(Value::Object(Rc::new(Files { files: self.files.clone(), view })))
            }),
            "AsConfig" | "AsSecrets" => self.as_map(method == "AsSecrets").map(Value::str),
            _ => return None,
        })
    }

    fn go_string(&self) -> String {
        let names: Vec<String> = self.iter().map(|f| f.name.clone()).collect();
        format!("map[{}]", names.join(" "))
    }

    /// `range`, `index` and `len` over `.Files` see every file's bytes. A file that can no
    /// longer be read (changed while rendering) cannot be told here: the view then has no
    /// elements, so the template fails ("can't iterate over ...") rather than miss a file.
    fn elements(&self) -> Option<Value> {
        let mut entries = BTreeMap::new();
        for f in self.iter() {
            entries.insert(f.name.clone(), Value::Bytes(Rc::from(&f.data().ok()?[..])));
        }
        Some(Value::map(entries))
    }
}

/// The methods of Helm's `common.Values` (`AsMap`, `YAML`, `Table`, `PathValue`) on the maps in
/// `typed` (each chart's `.Values`) and on what `Table` returns; other maps are plain
/// `map[string]interface{}`, without methods.
pub fn values_methods(typed: Vec<gotmpl::Map>) -> gotmpl::MapMethods {
    let typed = std::cell::RefCell::new(typed);
    gotmpl::MapMethods(Rc::new(move |map: &gotmpl::Map, method: &str, args: &[Value]| {
        if !matches!(method, "AsMap" | "YAML" | "Table" | "PathValue" | "Encode") {
            return None;
        }
        if !typed.borrow().iter().any(|t| Rc::ptr_eq(t, map)) {
            return None;
        }
        let arg = || -> Result<String, FuncError> {
            match args {
                [Value::String(s)] => Ok(s.to_string()),
                [other] => {
                    Err(FuncError::msg(format!("wrong type for value; expected string; got {}", other.type_name())))
                }
                _ => Err(FuncError::msg(format!("wrong number of args for {method}: want 1 got {}", args.len()))),
            }
        };
        let no_args = || {
            if args.is_empty() {
                Ok(())
            } else {
                Err(FuncError::msg(format!("wrong number of args for {method}: want 0 got {}", args.len())))
            }
        };
        Some(match method {
            "AsMap" => no_args().map(|()| Value::Map(map.clone())),
            "YAML" => no_args().map(|()| Value::str(crate::goyaml::value_to_yaml(&Value::Map(map.clone())))),
            "Table" => arg().and_then(|name| {
                let t = values_table(map, &name)?;
                typed.borrow_mut().push(t.clone());
                Ok(Value::Map(t))
            }),
            "PathValue" => arg().and_then(|path| values_path_value(map, &path)),
            _ => return None,
        })
    }))
}

/// `Values.Table`: the table at a dotted path, or `no table named "a.b"`.
fn values_table(map: &gotmpl::Map, name: &str) -> Result<gotmpl::Map, FuncError> {
    let mut table = map.clone();
    for part in name.split('.') {
        let next = match table.borrow().get(part) {
            Some(Value::Map(m)) => m.clone(),
            _ => return Err(FuncError::msg(format!("no table named {name:?}"))),
        };
        table = next;
    }
    Ok(table)
}

/// `Values.PathValue`: the value (not a table) at a dotted path.
fn values_path_value(map: &gotmpl::Map, path: &str) -> Result<Value, FuncError> {
    if path.is_empty() {
        return Err(FuncError::msg("YAML path cannot be empty"));
    }
    let (table, key) = match path.rsplit_once('.') {
        Some((head, key)) => {
            (values_table(map, head).map_err(|_| FuncError::msg(format!("{key:?} is not a value")))?, key)
        }
        None => (map.clone(), path),
    };
    match table.borrow().get(key) {
        Some(v) if !matches!(v, Value::Map(_)) => Ok(v.clone()),
        _ => Err(FuncError::msg(format!("{key:?} is not a value"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `{{ range .Chart.Dependencies }}{{ .Name }}:{{ .Alias }}:{{ .Version }}:{{ .Enabled }}:{{ .ImportValues }} {{ end }}`
    /// printed `frontend:frontend:0.1.0:true:[map[child:exports.data parent:.]] lib::0.1.0:true:[] ` in helm.
    #[test]
    fn chart_dependencies_have_go_names() {
        let chart = chart_value(
            &json!({"name": "p", "dependencies": [
                {"name": "web", "alias": "frontend", "version": "0.1.0", "import-values": ["data"]},
                {"name": "lib", "version": "0.1.0", "tags": ["t"]}
            ]}),
            true,
        );
        let Value::Map(chart) = chart else { panic!("a map") };
        let deps = chart.borrow().get("Dependencies").cloned().expect("field");
        let Value::List(items) = deps else { panic!("a list: {deps:?}") };
        let first = items[0].to_json();
        assert_eq!(
            first,
            json!({"Name": "frontend", "Alias": "frontend", "Version": "0.1.0", "Repository": "", "Condition": "",
                "Tags": [], "Enabled": true, "ImportValues": [{"child": "exports.data", "parent": "."}]})
        );
        assert_eq!(items[1].to_json()["Name"], json!("lib"));
        assert_eq!(items[1].to_json()["Tags"], json!(["t"]));
    }
}
