//! Loading test fixtures.

use std::path::{Path, PathBuf};

use kube::api::DynamicObject;

/// `tests/fixtures/<rel>`.
pub fn path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

/// Every document of a multi-document YAML fixture.
pub fn load_yaml(rel: &str) -> Vec<DynamicObject> {
    let text = std::fs::read_to_string(path(rel)).unwrap_or_else(|e| panic!("reading fixture {rel}: {e}"));
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("parsing fixture {rel}: {e}"))
}

/// The minimal Cluster API CRDs of `tests/fixtures/capi-crds/`, sorted by name.
pub fn capi_crds() -> Vec<DynamicObject> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(path("capi-crds"))
        .expect("tests/fixtures/capi-crds")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| load_yaml(&format!("capi-crds/{}", f.file_name().and_then(|n| n.to_str()).unwrap_or_default())))
        .collect()
}

/// A ConfigMap object.
pub fn config_map(name: &str, namespace: Option<&str>, data: &[(&str, &str)]) -> DynamicObject {
    let data: serde_json::Map<String, serde_json::Value> =
        data.iter().map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string()))).collect();
    let mut meta = serde_json::json!({"name": name});
    if let Some(ns) = namespace {
        meta["namespace"] = ns.into();
    }
    serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}))
        .expect("a ConfigMap")
}
