//! The real `helm` (v4) as an oracle for the differential tests (this crate's `tests/helm_*.rs`
//! and `sprig::difftest`, the operator's `tests/helm_corpus.rs` and `tests/operator_chart.rs`)
//! and the Helm benchmark, each including this file by path: finding it (the one finder),
//! running `helm template`, splitting and parsing its output into objects, normalising what Helm
//! makes random, and printing readable differences.
//!
//! `.ci/install-helm` installs the pinned helm into `target/tools/helm-<version>/helm`; `.ci/run`
//! exports its path as `CLUSTERSTACK_HELM`. Without helm, a local run prints a loud SKIPPED line;
//! with `CI=true` a missing helm fails the test.

// Each test binary and the benchmark use a different part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;

/// helm's output read independently of our go-yaml emulation (`libyaml-safer`).
#[path = "yaml_oracle.rs"]
pub mod oracle;

/// How to install the helm the tests use.
pub const INSTALL_HINT: &str = "install with `.ci/install-helm` (or set CLUSTERSTACK_HELM to a helm v4 binary)";

/// The helm binary: `$CLUSTERSTACK_HELM`, else the newest `target/tools/helm-*/helm`, else a
/// `helm` v4 on `PATH`. The one finder of every test against helm (the crates' too).
pub fn find_helm() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("CLUSTERSTACK_HELM").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    // The workspace's `target/`: above a member crate's manifest directory, too.
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().map(|d| d.join("target/tools")).find(|t| t.is_dir());
    let mut installed: Vec<PathBuf> = tools
        .and_then(|t| std::fs::read_dir(t).ok())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("helm-"))
        .map(|e| e.path().join("helm"))
        .filter(|p| p.is_file())
        .collect();
    installed.sort();
    if let Some(path) = installed.pop() {
        return Some(path);
    }
    let out = Command::new("helm").args(["version", "--template", "{{ .Version }}"]).output().ok()?;
    (out.status.success() && String::from_utf8_lossy(&out.stdout).starts_with("v4")).then(|| PathBuf::from("helm"))
}

/// The helm binary, or `None` after printing a loud SKIPPED line. Panics when `CI=true`.
pub fn require_helm(test: &str) -> Option<PathBuf> {
    match find_helm() {
        Some(path) => Some(path),
        None if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: helm not found and CI=true; {INSTALL_HINT}")
        }
        None => {
            eprintln!("\n*** SKIPPED: {test}: helm not found, {INSTALL_HINT} ***\n");
            None
        }
    }
}

/// Arguments of one `helm template` run.
#[derive(Debug, Clone)]
pub struct TemplateArgs {
    pub release: String,
    pub namespace: String,
    pub kube_version: Option<String>,
    pub include_crds: bool,
    pub values_files: Vec<PathBuf>,
}

impl TemplateArgs {
    pub fn new(release: &str, namespace: &str) -> Self {
        Self {
            release: release.to_string(),
            namespace: namespace.to_string(),
            kube_version: None,
            include_crds: false,
            values_files: Vec::new(),
        }
    }
}

/// `helm template RELEASE DIR --namespace NS [...]`: stdout, or stderr as the error.
pub fn helm_template(helm: &Path, chart: &Path, args: &TemplateArgs) -> Result<String, String> {
    let mut cmd = Command::new(helm);
    cmd.arg("template").arg(&args.release).arg(chart).arg("--namespace").arg(&args.namespace);
    if let Some(v) = &args.kube_version {
        cmd.arg("--kube-version").arg(v);
    }
    if args.include_crds {
        cmd.arg("--include-crds");
    }
    for f in &args.values_files {
        cmd.arg("-f").arg(f);
    }
    isolate(&mut cmd);
    let out = cmd.output().map_err(|e| format!("running {}: {e}", helm.display()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Keeps helm away from the user's configuration, caches and any cluster.
pub fn isolate(cmd: &mut Command) {
    let home = std::env::temp_dir().join("clusterstack-helm-home");
    cmd.env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env("KUBECONFIG", home.join("no-kubeconfig"))
        .env("TZ", "UTC")
        .env_remove("HELM_KUBECONTEXT")
        .env_remove("HELM_NAMESPACE");
}

/// One document of `helm template`'s output: its `# Source:` and its text.
#[derive(Debug, Clone)]
pub struct Doc {
    pub source: String,
    pub content: String,
}

/// Splits `helm template` output at its `---\n# Source: ...` headers.
pub fn split_helm_output(text: &str) -> Vec<Doc> {
    let mut docs = Vec::new();
    let mut current: Option<Doc> = None;
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        if line.trim_end() == "---"
            && let Some(next) = lines.peek()
            && let Some(source) = next.trim_end().strip_prefix("# Source: ")
        {
            docs.extend(current.take());
            current = Some(Doc { source: source.to_string(), content: String::new() });
            lines.next();
            continue;
        }
        match &mut current {
            Some(doc) => doc.content.push_str(line),
            None if line.trim().is_empty() => {}
            None => current = Some(Doc { source: String::new(), content: line.to_string() }),
        }
    }
    docs.extend(current);
    docs
}

/// The comparison key of an object: `apiVersion/kind/namespace/name`.
pub fn object_key(obj: &Json) -> String {
    let s = |p: &str| obj.pointer(p).and_then(Json::as_str).unwrap_or("").to_string();
    format!("{}/{}/{}/{}", s("/apiVersion"), s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
}

/// Parses documents into objects by key with the independent reader ([`oracle`]), as the API
/// server is given them; see [`parse_docs_with`].
pub fn parse_docs<'a>(docs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<BTreeMap<String, Json>, String> {
    parse_docs_with(docs, oracle::read_one)
}

/// Parses documents into objects by key with `read` (a document that is not a mapping is keyed
/// by its source and position). Two objects with one key get `#2`, `#3` suffixes.
pub fn parse_docs_with<'a>(
    docs: impl IntoIterator<Item = (&'a str, &'a str)>,
    read: impl Fn(&str) -> Result<Json, String>,
) -> Result<BTreeMap<String, Json>, String> {
    let mut objects = BTreeMap::new();
    // A CRD file is printed as it is: several documents under one `# Source:`.
    let docs =
        docs.into_iter().flat_map(|(source, content)| split_plain(content).into_iter().map(move |c| (source, c)));
    for (i, (source, content)) in docs.enumerate() {
        if content.trim().is_empty() {
            continue;
        }
        let value: Json =
            read(&content).map_err(|e| format!("YAML of {source} does not parse: {e}\n---\n{content}"))?;
        if value.is_null() {
            continue;
        }
        let mut key = if value.is_object() { object_key(&value) } else { format!("{source}#{i}") };
        let base = key.clone();
        let mut n = 1;
        while objects.contains_key(&key) {
            n += 1;
            key = format!("{base}#{n}");
        }
        objects.insert(key, value);
    }
    Ok(objects)
}

/// Splits a text at its `---` lines.
fn split_plain(content: &str) -> Vec<String> {
    let mut docs = vec![String::new()];
    for line in content.split_inclusive('\n') {
        if line.trim_end() == "---" {
            docs.push(String::new());
        } else if let Some(last) = docs.last_mut() {
            last.push_str(line);
        }
    }
    docs
}

/// Replaces what Helm makes random with a stable description of its shape:
/// PEM blocks (and base64 of PEM) by their type; strings under a key naming `random`, `uuid`,
/// `timestamp` or `now` by their length or format.
pub fn normalise(value: &mut Json) {
    normalise_at(value, "");
}

fn normalise_at(value: &mut Json, key: &str) {
    match value {
        Json::Object(map) => {
            for (k, v) in map.iter_mut() {
                normalise_at(v, k);
            }
        }
        Json::Array(items) => items.iter_mut().for_each(|v| normalise_at(v, key)),
        Json::String(s) => {
            if let Some(shape) = random_shape(s, key) {
                *s = shape;
            }
        }
        _ => {}
    }
}

fn random_shape(s: &str, key: &str) -> Option<String> {
    if let Some(kinds) = pem_kinds(s) {
        return Some(format!("<pem {kinds}>"));
    }
    use base64::Engine as _;
    if s.len() > 40
        && let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(s.trim())
        && let Some(kinds) = pem_kinds(&String::from_utf8_lossy(&bytes))
    {
        return Some(format!("<base64 pem {kinds}>"));
    }
    let key = key.to_ascii_lowercase();
    if key.contains("uuid") {
        let ok = s.len() == 36 && s.chars().enumerate().all(|(i, c)| matches!(i, 8 | 13 | 18 | 23) == (c == '-'));
        return Some(if ok { "<uuid>".into() } else { format!("<not a uuid: {s}>") });
    }
    if key.contains("random") {
        return Some(format!("<random of {} chars>", s.chars().count()));
    }
    if key.contains("timestamp") || key.contains("now") {
        return Some("<time>".into());
    }
    None
}

fn pem_kinds(s: &str) -> Option<String> {
    let kinds: Vec<&str> =
        s.lines().filter_map(|l| l.trim().strip_prefix("-----BEGIN ")?.strip_suffix("-----")).collect();
    (!kinds.is_empty()).then(|| kinds.join("+"))
}

/// A readable difference between helm's objects and ours, or `None` when they agree.
pub fn diff_objects(helm: &BTreeMap<String, Json>, ours: &BTreeMap<String, Json>) -> Option<String> {
    let mut out = String::new();
    for key in helm.keys().filter(|k| !ours.contains_key(*k)) {
        out.push_str(&format!("only in helm: {key}\n{}\n", to_yaml(&helm[key])));
    }
    for key in ours.keys().filter(|k| !helm.contains_key(*k)) {
        out.push_str(&format!("only in ours: {key}\n{}\n", to_yaml(&ours[key])));
    }
    for (key, h) in helm {
        if let Some(o) = ours.get(key)
            && h != o
        {
            out.push_str(&format!("differs: {key} (- helm, + ours)\n{}\n", line_diff(&to_yaml(h), &to_yaml(o))));
        }
    }
    (!out.is_empty()).then_some(out)
}

fn to_yaml(v: &Json) -> String {
    serde_saphyr::to_string(v).unwrap_or_else(|_| format!("{v:#}"))
}

/// A unified-style line diff (longest common subsequence; objects are small).
pub fn line_diff(a: &str, b: &str) -> String {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        }
    }
    out
}

/// Packs chart directory `dir` into `dest` as `helm package` would lay it out
/// (`<name>/...` inside a gzipped tar).
pub fn pack_chart(dir: &Path, name: &str, dest: &Path) -> std::io::Result<()> {
    let file = std::fs::File::create(dest)?;
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    tar.append_dir_all(name, dir)?;
    tar.into_inner()?.finish()?;
    Ok(())
}
