//! Loading a Helm chart from a directory or a `.tgz`, with its subcharts,
//! the way Helm's loader sorts files into metadata, values, templates and
//! other files. Hardened: paths stay inside the chart, links are refused,
//! sizes are bounded. From a directory, the files templates read through
//! `.Files` (and `crds/`) are read when first asked for ([`DataFile`]).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde::Deserialize;

use super::ignore::IgnoreRules;

/// Helm's bounds on a decompressed chart and on one file in it.
pub const MAX_CHART_BYTES: u64 = 100 * 1024 * 1024;
pub const MAX_FILE_BYTES: u64 = 5 * 1024 * 1024;

/// Why a chart could not be loaded.
#[derive(Debug, thiserror::Error)]
#[error("chart {chart}: {message}")]
pub struct LoadError {
    /// The chart (its path or archive name, and the subchart path inside).
    pub chart: String,
    pub message: String,
}

fn err(chart: &str, message: impl Into<String>) -> LoadError {
    LoadError { chart: chart.to_string(), message: message.into() }
}

/// A file of a chart: its `/`-separated path relative to the chart root.
#[derive(Debug, Clone)]
pub struct ChartFile {
    pub name: String,
    pub data: Arc<[u8]>,
}

/// A file of `.Files` (and `crds/`). From a directory it is read when a template or the CRD
/// printer first asks for it, then kept: real charts ship megabytes that no template reads
/// (argo-workflows: 10 MiB of `files/crds/full` beside the 1 MiB its defaults use), which helm
/// reads whole and we need not. It was opened once while loading, so a file helm could not read
/// fails the load as in helm; a read can still fail later only if the file changes meanwhile.
#[derive(Debug, Clone)]
pub struct DataFile {
    pub name: String,
    content: Content,
}

#[derive(Debug, Clone)]
enum Content {
    Loaded(Arc<[u8]>),
    OnDisk(Arc<OnDisk>),
}

#[derive(Debug)]
struct OnDisk {
    path: PathBuf,
    read: OnceLock<Result<Arc<[u8]>, String>>,
}

impl DataFile {
    /// A file whose bytes are already in memory.
    pub fn new(name: impl Into<String>, data: impl Into<Arc<[u8]>>) -> Self {
        Self { name: name.into(), content: Content::Loaded(data.into()) }
    }

    /// Its bytes, read on the first call; the error names the file.
    pub fn data(&self) -> Result<Arc<[u8]>, String> {
        match &self.content {
            Content::Loaded(data) => Ok(data.clone()),
            Content::OnDisk(disk) => disk
                .read
                .get_or_init(|| read_bounded(&disk.path).map(Arc::from))
                .clone()
                .map_err(|e| format!("{}: {e}", self.name)),
        }
    }

    /// Its bytes as [`Self::data`] gives them, but not kept when they were not read before: for
    /// a file a render reads once and lets go (the `crds/` files, 4.5 MB in kube-prometheus-stack).
    pub fn data_uncached(&self) -> Result<Arc<[u8]>, String> {
        match &self.content {
            Content::OnDisk(disk) if disk.read.get().is_none() => {
                read_bounded(&disk.path).map(Arc::from).map_err(|e| format!("{}: {e}", self.name))
            }
            _ => self.data(),
        }
    }
}

/// Opens a chart file without following a link in its last component: a file swapped for a
/// link after the walk refused links must not lead outside the chart.
fn open_file(path: &Path) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
    options.open(path)
}

/// Reads a file of at most [`MAX_FILE_BYTES`], whatever size it had when it was listed.
fn read_bounded(path: &Path) -> Result<Vec<u8>, String> {
    let file = open_file(path).map_err(|e| format!("cannot read: {e}"))?;
    // Room for the whole file at once: behind `take`, `read_to_end` knows no size and grows the
    // buffer by doubling (a fifth of reading a large chart's files went to copying so).
    let size = file.metadata().map_or(0, |m| m.len()).min(MAX_FILE_BYTES);
    let mut data = Vec::with_capacity(size as usize + 1);
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut data).map_err(|e| format!("cannot read: {e}"))?;
    if data.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("exceeds the limit of {MAX_FILE_BYTES} bytes"));
    }
    Ok(data)
}

/// A file as the loader lists it: in memory (archives, callers' lists) or on disk, read only
/// if the loader needs it ([`DataFile`]).
enum Raw {
    Bytes(Vec<u8>),
    Disk(PathBuf),
}

impl Raw {
    fn read(self, label: &str, name: &str) -> Result<Vec<u8>, LoadError> {
        match self {
            Raw::Bytes(data) => Ok(data),
            Raw::Disk(path) => read_bounded(&path).map_err(|m| err(label, format!("{name}: {m}"))),
        }
    }

    fn into_data_file(self, label: &str, name: String) -> Result<DataFile, LoadError> {
        match self {
            Raw::Bytes(data) => Ok(DataFile::new(name, data)),
            Raw::Disk(path) => {
                open_file(&path).map_err(|e| err(label, format!("cannot read {name}: {e}")))?;
                Ok(DataFile { name, content: Content::OnDisk(Arc::new(OnDisk { path, read: OnceLock::new() })) })
            }
        }
    }
}

/// A dependency as `Chart.yaml` declares it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Dependency {
    pub name: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub version: Option<String>,
    #[serde(default)]
    pub repository: Option<String>,
    #[serde(default)]
    pub condition: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub enabled: Option<bool>,
    #[serde(default, rename = "import-values")]
    pub import_values: Vec<serde_json::Value>,
    #[serde(default)]
    pub alias: Option<String>,
}

/// The fields of `Chart.yaml` the renderer needs; all of it stays in `raw`
/// for `.Chart`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    #[serde(default)]
    pub name: String,
    #[serde(default, deserialize_with = "lenient_string")]
    pub version: Option<String>,
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default, rename = "type")]
    pub chart_type: Option<String>,
    #[serde(default)]
    pub dependencies: Vec<Dependency>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    /// The Kubernetes versions the chart supports (a semver constraint).
    #[serde(default, deserialize_with = "lenient_string")]
    pub kube_version: Option<String>,
}

/// A YAML scalar read as a string: `version: 1.0` is the text "1.0".
fn lenient_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(match v {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some(s),
        Some(other) => Some(other.to_string()),
    })
}

/// A loaded chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Where it came from, for messages (`dir`, `x.tgz`, `parent/charts/sub`).
    pub label: String,
    pub metadata: Metadata,
    /// `Chart.yaml` as data, for `.Chart`.
    pub raw_metadata: serde_json::Value,
    /// `values.yaml` (an empty map when absent).
    pub values: serde_json::Value,
    /// `values.schema.json`, if any.
    pub schema: Option<Arc<[u8]>>,
    /// `templates/**`, sorted by name.
    pub templates: Vec<ChartFile>,
    /// Every other file (for `.Files`; `crds/` among them).
    pub files: Vec<DataFile>,
    /// The charts of `charts/`.
    pub dependencies: Vec<Chart>,
}

impl Chart {
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// The files under `crds/` (Helm's CRD objects), sorted.
    pub fn crd_files(&self) -> impl Iterator<Item = &DataFile> {
        self.files.iter().filter(|f| f.name.starts_with("crds/"))
    }
}

/// Loads a chart from a directory or a `.tgz` archive.
pub fn load(path: &Path) -> Result<Chart, LoadError> {
    let label = path.display().to_string();
    if path.is_dir() {
        let mut files = Vec::new();
        let mut total = 0u64;
        read_dir_files(path, path, &label, &mut files, &mut total)?;
        sort_files(&label, files)
    } else {
        let data = std::fs::read(path).map_err(|e| err(&label, format!("cannot read: {e}")))?;
        load_archive(&label, &data)
    }
}

fn read_dir_files(
    root: &Path,
    dir: &Path,
    label: &str,
    out: &mut Vec<(String, Raw)>,
    total: &mut u64,
) -> Result<(), LoadError> {
    let entries = std::fs::read_dir(dir).map_err(|e| err(label, format!("cannot read {}: {e}", dir.display())))?;
    let mut entries: Vec<_> = entries.collect::<Result<_, _>>().map_err(|e| err(label, format!("cannot read: {e}")))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().replace('\\', "/");
        let file_type = entry.file_type().map_err(|e| err(label, format!("cannot inspect {rel}: {e}")))?;
        if file_type.is_symlink() {
            return Err(err(label, format!("{rel} is a symbolic link; charts may not contain links")));
        }
        if file_type.is_dir() {
            read_dir_files(root, &path, label, out, total)?;
        } else if file_type.is_file() {
            let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
            check_size(label, &rel, size, total)?;
            out.push((rel, Raw::Disk(path)));
        }
    }
    Ok(())
}

fn check_size(label: &str, name: &str, size: u64, total: &mut u64) -> Result<(), LoadError> {
    if size > MAX_FILE_BYTES {
        return Err(err(label, format!("{name} is {size} bytes, more than the limit of {MAX_FILE_BYTES}")));
    }
    *total += size;
    if *total > MAX_CHART_BYTES {
        return Err(err(label, format!("the chart exceeds the limit of {MAX_CHART_BYTES} bytes decompressed")));
    }
    Ok(())
}

/// Loads a chart from the bytes of a `.tgz` (its entries under one top directory).
pub fn load_archive(label: &str, data: &[u8]) -> Result<Chart, LoadError> {
    let gz = flate2::read::GzDecoder::new(data);
    let mut archive = tar::Archive::new(gz);
    let mut files = Vec::new();
    let mut total = 0u64;
    let entries = archive.entries().map_err(|e| err(label, format!("not a gzipped tar archive: {e}")))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| err(label, format!("corrupt archive: {e}")))?;
        let kind = entry.header().entry_type();
        let raw_path = entry.path().map_err(|e| err(label, format!("bad path in archive: {e}")))?.into_owned();
        let name = raw_path.to_string_lossy().replace('\\', "/");
        if kind.is_dir() || kind.is_pax_global_extensions() || kind.is_pax_local_extensions() {
            continue;
        }
        if !kind.is_file() {
            return Err(err(label, format!("{name}: archive entries must be regular files")));
        }
        if name.starts_with('/') || name.split('/').any(|c| c == "..") {
            return Err(err(label, format!("{name}: path escapes the chart")));
        }
        // Helm strips the first path component: the chart's directory.
        let Some((_, rel)) = name.split_once('/') else { continue };
        if rel.is_empty() {
            continue;
        }
        let size = entry.header().size().unwrap_or(0);
        check_size(label, rel, size, &mut total)?;
        let mut buf = Vec::with_capacity(size as usize);
        entry
            .by_ref()
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut buf)
            .map_err(|e| err(label, format!("{rel}: cannot read: {e}")))?;
        if buf.len() as u64 > MAX_FILE_BYTES {
            return Err(err(label, format!("{rel} exceeds the limit of {MAX_FILE_BYTES} bytes")));
        }
        files.push((rel.to_string(), buf));
    }
    from_files(label, files)
}

/// How deep subcharts may nest (Helm sets no limit; real charts use two or three).
pub const MAX_SUBCHART_DEPTH: usize = 16;

/// Sorts a chart's files as Helm's loader does.
pub fn from_files(label: &str, files: Vec<(String, Vec<u8>)>) -> Result<Chart, LoadError> {
    sort_files(label, files.into_iter().map(|(name, data)| (name, Raw::Bytes(data))).collect())
}

fn sort_files(label: &str, mut files: Vec<(String, Raw)>) -> Result<Chart, LoadError> {
    // Every level is loaded, coalesced and rendered by recursion: a chart
    // vendoring itself 45 levels deep must be an error, not a stack overflow.
    if label.matches("/charts/").count() > MAX_SUBCHART_DEPTH {
        return Err(err(label, format!("subcharts nested deeper than {MAX_SUBCHART_DEPTH} levels")));
    }
    let ignore = match files.iter().position(|(n, _)| n == ".helmignore") {
        Some(i) => {
            let raw = std::mem::replace(&mut files[i].1, Raw::Bytes(Vec::new()));
            let data = raw.read(label, ".helmignore")?;
            let rules =
                IgnoreRules::parse(&crate::lossy_text(&data)).map_err(|m| err(label, format!(".helmignore: {m}")));
            files[i].1 = Raw::Bytes(data);
            rules?
        }
        None => IgnoreRules::default(),
    };
    let mut metadata: Option<(Metadata, serde_json::Value)> = None;
    let mut values = serde_json::Value::Object(Default::default());
    let mut schema = None;
    let mut templates = Vec::new();
    let mut other = Vec::new();
    let mut subcharts: BTreeMap<String, Vec<(String, Raw)>> = BTreeMap::new();
    let mut requirements = Vec::new();
    // Every file under a directory asks about that directory again: asked once per chart.
    let mut dirs = HashMap::new();
    for (name, raw) in files {
        if is_ignored(&ignore, &name, &mut dirs) {
            continue;
        }
        match name.as_str() {
            "Chart.yaml" => {
                let data = raw.read(label, &name)?;
                metadata = Some(crate::chart_yaml::read(&data).map_err(|e| err(label, format!("Chart.yaml: {e}")))?);
            }
            "values.yaml" => {
                let data = raw.read(label, &name)?;
                values = super::values::parse_values(&crate::lossy_text(&data))
                    .map_err(|m| err(label, format!("values.yaml: {m}")))?;
            }
            "values.schema.json" => schema = Some(Arc::from(raw.read(label, &name)?)),
            // helm reads `requirements.yaml` (Helm 2's dependency list) into the metadata, and
            // keeps both files in `.Files` for an apiVersion v1 chart.
            "requirements.yaml" | "requirements.lock" => {
                let data = raw.read(label, &name)?;
                requirements.push((name, data));
            }
            "Chart.lock" => {}
            n if n.starts_with("templates/") => {
                let data = Arc::from(raw.read(label, &name)?);
                templates.push(ChartFile { name, data });
            }
            n if n.starts_with("charts/") && !n.ends_with(".prov") => {
                let rest = &n["charts/".len()..];
                let (sub, inner) = rest.split_once('/').unwrap_or((rest, ""));
                subcharts.entry(sub.to_string()).or_default().push((inner.to_string(), raw));
            }
            _ => other.push(raw.into_data_file(label, name)?),
        }
    }
    let Some((mut metadata, mut raw_metadata)) = metadata else {
        return Err(err(label, "Chart.yaml file is missing"));
    };
    crate::chart_yaml::default_api_version(&mut metadata, &mut raw_metadata);
    for (name, data) in requirements {
        if name == "requirements.yaml" {
            let text = crate::lossy_text(&data);
            let read = super::yaml::read_chart_yaml(&text).map_err(|e| err(label, format!("{name}: {e}")))?;
            if let Some(deps) = read.get("dependencies").filter(|d| !d.is_null()) {
                metadata.dependencies =
                    serde_json::from_value(deps.clone()).map_err(|e| err(label, format!("{name}: {e}")))?;
                if let Some(meta) = raw_metadata.as_object_mut() {
                    meta.insert("dependencies".into(), deps.clone());
                }
            }
        }
        if metadata.api_version.as_deref() == Some("v1") {
            other.push(DataFile::new(name, data));
        }
    }
    crate::chart_yaml::validate(&mut metadata, &mut raw_metadata).map_err(|m| err(label, m))?;
    let mut dependencies = Vec::new();
    for (sub, entries) in subcharts {
        // helm passes over what in charts/ starts with `_` or `.`, unpacks a `.tgz`, and loads
        // anything else as a chart directory: a plain file (a README, a `.tar.gz`) is a chart
        // without a Chart.yaml, which fails.
        if sub.starts_with(['_', '.']) {
            continue;
        }
        let sub_label = format!("{label}/charts/{sub}");
        if sub.ends_with(".tgz") {
            if let Some((_, raw)) = entries.into_iter().find(|(inner, _)| inner.is_empty()) {
                dependencies.push(load_archive(&sub_label, &raw.read(label, &format!("charts/{sub}"))?)?);
            }
            continue;
        }
        let files: Vec<_> = entries.into_iter().filter(|(inner, _)| !inner.is_empty()).collect();
        if files.is_empty() {
            let parent = &metadata.name;
            return Err(err(label, format!("error unpacking subchart {sub} in {parent}: Chart.yaml file is missing")));
        }
        dependencies.push(sort_files(&sub_label, files)?);
    }
    templates.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Chart {
        label: label.to_string(),
        metadata,
        raw_metadata,
        values,
        schema,
        templates,
        files: other,
        dependencies,
    })
}

/// Whether a file or any directory above it is ignored; `dirs` remembers each directory's
/// answer (it or a directory above it is ignored) for the chart's other files.
fn is_ignored(rules: &IgnoreRules, name: &str, dirs: &mut HashMap<String, bool>) -> bool {
    let mut above = false;
    for (end, _) in name.match_indices('/') {
        let dir = &name[..end];
        above = match dirs.get(dir) {
            Some(known) => *known,
            None => {
                let ignored = above || rules.ignored(dir, true);
                dirs.insert(dir.to_string(), ignored);
                ignored
            }
        };
        if above {
            return true;
        }
    }
    rules.ignored(name, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Helm's walk: a file is left out when it or any directory above it is ignored.
    fn uncached(rules: &IgnoreRules, name: &str) -> bool {
        let parts: Vec<&str> = name.split('/').collect();
        (1..=parts.len()).any(|n| rules.ignored(&parts[..n].join("/"), n < parts.len()))
    }

    #[test]
    fn remembered_directories_answer_as_the_walk_does() {
        // Helm ignores whatever a negated pattern does not match: with and without one.
        for text in ["skip/\n*.bak\n/top.txt\nnested/deep/\n", "skip/\n*.bak\n!keep.bak\nnested/deep/\n"] {
            check(&IgnoreRules::parse(text).expect("rules"));
        }
        let rules = IgnoreRules::parse("skip/\n*.bak\n/top.txt\nnested/deep/\n").expect("rules");
        let mut dirs = HashMap::new();
        assert!(is_ignored(&rules, "templates/skip/b.yaml", &mut dirs));
        assert!(is_ignored(&rules, "nested/deep/c.yaml", &mut dirs));
        assert!(!is_ignored(&rules, "nested/shallow.yaml", &mut dirs));
    }

    fn check(rules: &IgnoreRules) {
        let names = [
            "skip/a.yaml",
            "templates/skip/b.yaml",
            "templates/x.bak",
            "templates/keep.bak",
            "top.txt",
            "templates/top.txt",
            "nested/deep/c.yaml",
            "nested/shallow.yaml",
            "nested/deep",
            "templates//double.yaml",
            "a/b/c/d/e.yaml",
        ];
        let mut dirs = HashMap::new();
        // Twice, so the second round answers from what the first remembered.
        for _ in 0..2 {
            for name in names {
                assert_eq!(is_ignored(rules, name, &mut dirs), uncached(rules, name), "{name}");
            }
        }
    }
}
