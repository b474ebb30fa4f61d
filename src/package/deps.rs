//! A Helm chart's dependencies, vendored into the release as `helm dependency build` does.
//!
//! `Chart.yaml`'s `dependencies` (or a v1 chart's `requirements.yaml`) name charts in Helm
//! repositories (`https://`: the repository's `index.yaml`), OCI registries (`oci://`) or local
//! directories (`file://`, relative to the chart). With a `Chart.lock` (`requirements.lock`) the
//! locked versions are taken, after checking that the lock's `digest` still matches the
//! dependencies (helm's `HashReq`), else the highest version that satisfies each constraint
//! (Masterminds semver, as helm reads them). Every chart is vendored as
//! `charts/<name>-<version>.tgz`; a chart already in `charts/` (directory or archive) whose name
//! and version satisfy the dependency is used as it is, offline. Downloads are verified against the
//! digest the repository publishes and kept in a content-addressed cache ([`super::deps_fetch`]).
//! Repository URLs can be rewritten (`--helm-repo-mirror ORIG=MIRROR`) for mirrors and tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use helm_render::load::{Dependency, Metadata};
use helm_render::sprig::semver::{Constraints, Version};
use sha2::{Digest, Sha256};

use super::build::BuildError;
use super::deps_fetch::Fetcher;

/// The download cache's directory inside a cache directory (`build --cache`, `pull`, the operator's).
pub const DOWNLOAD_CACHE_DIR: &str = "helm-charts";

/// How dependencies are fetched.
#[derive(Debug, Clone, Default)]
pub struct DependencyOptions {
    /// The download cache (content-addressed by sha256); `None`: no cache.
    pub cache_dir: Option<PathBuf>,
    /// Repository URL rewrites: a URL starting with the first part is fetched from the second
    /// part instead (the first matching rule wins).
    pub mirrors: Vec<(String, String)>,
    /// Registry settings (credentials, endpoints) for `oci://` dependencies.
    pub registry: crate::registry::RegistryConfig,
    /// Registry hosts reached over plain `http://` although they are not loopback.
    pub insecure_registries: Vec<String>,
    /// `file://` dependencies must stay inside this directory (the operator resolving a
    /// downloaded release's charts: a release names no file of the operator's); `None`: anywhere
    /// (`build` of the user's own source).
    pub file_root: Option<PathBuf>,
    /// Refuse repositories reached over plain `http://` unless a mirror rule rewrote them there
    /// (the operator: a release's `Chart.yaml` may name any URL, the mirror rules are the
    /// operator's own).
    pub https_only: bool,
}

/// Parses `ORIG=MIRROR` (a `--helm-repo-mirror` value).
pub fn parse_mirror(spec: &str) -> Result<(String, String), String> {
    let (from, to) = spec
        .split_once('=')
        .map(|(a, b)| (a.trim(), b.trim()))
        .filter(|(a, b)| !a.is_empty() && !b.is_empty())
        .ok_or_else(|| format!("mirror {spec:?} is not ORIGINAL_URL=MIRROR_URL"))?;
    reqwest::Url::parse(to).map_err(|e| format!("mirror {spec:?}: {to:?} is not a URL: {e}"))?;
    Ok((from.to_string(), to.to_string()))
}

impl DependencyOptions {
    /// `url` with the first matching mirror rule applied.
    pub fn rewrite(&self, url: &str) -> String {
        for (from, to) in &self.mirrors {
            let (f, t) = (from.trim_end_matches('/'), to.trim_end_matches('/'));
            if let Some(rest) = url.strip_prefix(f)
                && (rest.is_empty() || rest.starts_with('/'))
            {
                return format!("{t}{rest}");
            }
        }
        url.to_string()
    }
}

/// Why a dependency could not be vendored: names the chart, the dependency and its repository.
pub(crate) fn dep_error(chart: &str, dep: &str, repository: &str, message: impl Into<String>) -> BuildError {
    let repository = if repository.is_empty() { "no repository" } else { repository };
    BuildError::Config {
        file: format!("{chart}/Chart.yaml"),
        message: format!("dependency {dep} ({repository}): {}", message.into()),
    }
}

/// One chart to vendor: the name, the version constraint (exact when locked) and the repository.
#[derive(Debug, Clone)]
pub(crate) struct Wanted {
    pub name: String,
    pub version: String,
    pub repository: String,
}

/// Vendors the dependencies of the chart whose files are under `prefix` in `files` (`""` for
/// the top chart, `"cni/"` for a chart in a subdirectory). `source_dir` is the chart's directory
/// on disk (for `file://` paths) and `label` names it in errors.
pub fn vendor_chart(
    files: &mut BTreeMap<String, Vec<u8>>,
    prefix: &str,
    source_dir: &Path,
    label: &str,
    opts: &DependencyOptions,
) -> Result<usize, BuildError> {
    let (deps, lock_name) = declared(files, prefix, label)?;
    if deps.is_empty() {
        return Ok(0);
    }
    let lock = match files.get(&format!("{prefix}{lock_name}")) {
        Some(bytes) => Some(read_lock(bytes).map_err(|m| config(label, lock_name, m))?),
        None => None,
    };
    let wanted: Vec<Wanted> = match &lock {
        Some(lock) => {
            let sum = hash_req(&deps, &lock.dependencies);
            if sum != lock.digest {
                return Err(config(
                    label,
                    lock_name,
                    format!(
                        "out of sync with the dependencies of Chart.yaml (digest {} ≠ {sum}); run helm dependency update",
                        lock.digest
                    ),
                ));
            }
            lock.dependencies
                .iter()
                .map(|d| Wanted {
                    name: d.name.clone(),
                    version: d.version.clone().unwrap_or_default(),
                    repository: d.repository.clone().unwrap_or_default(),
                })
                .collect()
        }
        None => deps
            .iter()
            .map(|d| Wanted {
                name: d.name.clone(),
                version: d.version.clone().unwrap_or_default(),
                repository: d.repository.clone().unwrap_or_default(),
            })
            .collect(),
    };
    let mut fetcher: Option<Fetcher> = None;
    let mut vendored = 0;
    let mut done: Vec<(String, String)> = Vec::new();
    for want in wanted {
        let constraint = constraint_of(&want.version).map_err(|m| dep_error(label, &want.name, &want.repository, m))?;
        let present = charts_in(files, prefix);
        if present.iter().any(|c| c.name == want.name && constraint.check(&c.version)) {
            continue; // already vendored: offline
        }
        if done.iter().any(|(n, v)| *n == want.name && *v == want.version) {
            continue; // the same chart under two aliases
        }
        let bytes = if let Some(path) = want.repository.strip_prefix("file://") {
            let dir = source_dir.join(path);
            if let Some(root) = &opts.file_root {
                let inside = match (dir.canonicalize(), root.canonicalize()) {
                    (Ok(dir), Ok(root)) => dir.starts_with(root),
                    _ => false,
                };
                if !inside {
                    return Err(dep_error(label, &want.name, &want.repository, "a file:// path outside the release"));
                }
            }
            local_chart(&dir, &want, &constraint, label)?
        } else if want.repository.is_empty() {
            return Err(dep_error(label, &want.name, "", "not in charts/ and no repository to fetch it from"));
        } else if want.repository.starts_with('@') || want.repository.starts_with("alias:") {
            return Err(dep_error(
                label,
                &want.name,
                &want.repository,
                "named repositories need helm's repository list; write the repository's URL instead",
            ));
        } else {
            let fetcher = match &mut fetcher {
                Some(f) => f,
                None => {
                    fetcher.insert(Fetcher::new(opts).map_err(|m| dep_error(label, &want.name, &want.repository, m))?)
                }
            };
            fetcher.fetch(&want, &constraint).map_err(|m| dep_error(label, &want.name, &want.repository, m))?
        };
        let chart = helm_render::load::load_archive(&want.name, &bytes)
            .map_err(|e| dep_error(label, &want.name, &want.repository, format!("not a chart archive: {e}")))?;
        let version = chart.metadata.version.clone().unwrap_or_default();
        let parsed = Version::parse(&version)
            .map_err(|m| dep_error(label, &want.name, &want.repository, format!("version {version:?}: {m}")))?;
        if chart.metadata.name != want.name || !constraint.check(&parsed) {
            return Err(dep_error(
                label,
                &want.name,
                &want.repository,
                format!("got chart {} {version}, which is not {} {}", chart.metadata.name, want.name, want.version),
            ));
        }
        // A stale copy of the same chart would be a second subchart of that name: helm replaces
        // charts/ as a whole, so drop it.
        for stale in present.iter().filter(|c| c.name == want.name) {
            files.retain(|k, _| !(k == &stale.path || k.starts_with(&format!("{}/", stale.path))));
        }
        files.insert(format!("{prefix}charts/{}-{version}.tgz", want.name), bytes);
        done.push((want.name.clone(), want.version.clone()));
        vendored += 1;
    }
    Ok(vendored)
}

/// The dependencies the chart under `prefix` declares (`Chart.yaml`, or a v1 chart's
/// `requirements.yaml`) and the name of its lock file.
fn declared(
    files: &BTreeMap<String, Vec<u8>>,
    prefix: &str,
    label: &str,
) -> Result<(Vec<Dependency>, &'static str), BuildError> {
    let Some(chart_bytes) = files.get(&format!("{prefix}Chart.yaml")) else { return Ok((Vec::new(), "Chart.lock")) };
    let metadata = read_metadata(chart_bytes).map_err(|m| config(label, "Chart.yaml", m))?;
    if metadata.api_version.as_deref() == Some("v1") {
        let deps = match files.get(&format!("{prefix}requirements.yaml")) {
            Some(bytes) => read_metadata(bytes).map_err(|m| config(label, "requirements.yaml", m))?.dependencies,
            None => metadata.dependencies,
        };
        return Ok((deps, "requirements.lock"));
    }
    Ok((metadata.dependencies, "Chart.lock"))
}

/// The declared dependencies no chart in `charts/` is named after: what helm's
/// `CheckDependencies` finds missing (`helm template --dependency-update` then fetches them;
/// a present chart of another version is used as it is).
pub fn missing_dependencies(
    files: &BTreeMap<String, Vec<u8>>,
    prefix: &str,
    label: &str,
) -> Result<Vec<String>, BuildError> {
    let (deps, _) = declared(files, prefix, label)?;
    let present = charts_in(files, prefix);
    Ok(deps.into_iter().map(|d| d.name).filter(|name| !present.iter().any(|c| &c.name == name)).collect())
}

fn config(label: &str, file: &str, message: String) -> BuildError {
    BuildError::Config { file: format!("{label}/{file}"), message }
}

fn read_metadata(bytes: &[u8]) -> Result<Metadata, String> {
    helm_render::chart_yaml::read(bytes).map(|(metadata, _)| metadata)
}

/// `Chart.lock`: the resolved dependencies and the digest of what they were resolved from.
#[derive(Debug, serde::Deserialize)]
struct Lock {
    #[serde(default)]
    dependencies: Vec<Dependency>,
    #[serde(default)]
    digest: String,
}

fn read_lock(bytes: &[u8]) -> Result<Lock, String> {
    let raw = helm_render::yaml::read_chart_yaml(&String::from_utf8_lossy(bytes))?;
    serde_json::from_value(raw).map_err(|e| e.to_string())
}

/// A version constraint as helm reads it. An empty one does not parse: `helm dependency update`
/// and `build` refuse it, and `helm template` would not take the chart under the dependency's
/// alias (`helm_render::values`), so it is an error here too.
fn constraint_of(version: &str) -> Result<Constraints, String> {
    Constraints::parse(version).map_err(|m| format!("version constraint {version:?}: {m}"))
}

/// Helm's `resolver.HashReq`: sha256 of the JSON of `[dependencies, locked]`, as Go marshals
/// `[]*chart.Dependency` (field order, `omitempty`, HTML-safe escaping).
pub fn hash_req(req: &[Dependency], lock: &[Dependency]) -> String {
    fn dep(d: &Dependency) -> String {
        let s = |v: &str| serde_json::to_string(v).unwrap_or_default();
        let mut out = format!("{{\"name\":{}", s(&d.name));
        if let Some(v) = d.version.as_deref().filter(|v| !v.is_empty()) {
            out += &format!(",\"version\":{}", s(v));
        }
        out += &format!(",\"repository\":{}", s(d.repository.as_deref().unwrap_or_default()));
        if let Some(c) = d.condition.as_deref().filter(|c| !c.is_empty()) {
            out += &format!(",\"condition\":{}", s(c));
        }
        if !d.tags.is_empty() {
            out += &format!(",\"tags\":{}", serde_json::to_string(&d.tags).unwrap_or_default());
        }
        if d.enabled == Some(true) {
            out += ",\"enabled\":true";
        }
        if !d.import_values.is_empty() {
            out += &format!(",\"import-values\":{}", serde_json::to_string(&d.import_values).unwrap_or_default());
        }
        if let Some(a) = d.alias.as_deref().filter(|a| !a.is_empty()) {
            out += &format!(",\"alias\":{}", s(a));
        }
        out + "}"
    }
    let list = |l: &[Dependency]| {
        if l.is_empty() { "null".to_string() } else { format!("[{}]", l.iter().map(dep).collect::<Vec<_>>().join(",")) }
    };
    let json = format!("[{},{}]", list(req), list(lock));
    // Go's encoder escapes these in strings (the only place they can occur in JSON).
    let json = json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026");
    format!("sha256:{}", hex::encode(Sha256::digest(json.as_bytes())))
}

/// A chart found in `charts/`: its path (a `.tgz` or a directory) and identity.
struct Present {
    path: String,
    name: String,
    version: Version,
}

/// The charts already in `<prefix>charts/`.
fn charts_in(files: &BTreeMap<String, Vec<u8>>, prefix: &str) -> Vec<Present> {
    let dir = format!("{prefix}charts/");
    let mut out = Vec::new();
    for (path, bytes) in files.range(dir.clone()..).take_while(|(k, _)| k.starts_with(&dir)) {
        let rest = &path[dir.len()..];
        let metadata = if rest.ends_with(".tgz") && !rest.contains('/') {
            helm_render::load::load_archive(rest, bytes).ok().map(|c| (path.clone(), c.metadata))
        } else if let Some(sub) = rest.strip_suffix("/Chart.yaml").filter(|s| !s.contains('/')) {
            read_metadata(bytes).ok().map(|m| (format!("{dir}{sub}"), m))
        } else {
            None
        };
        if let Some((path, m)) = metadata
            && let Some(version) = m.version.as_deref().and_then(|v| Version::parse(v).ok())
        {
            out.push(Present { path, name: m.name, version });
        }
    }
    out
}

/// A `file://` dependency: the directory packed as `helm package` packs it.
fn local_chart(dir: &Path, want: &Wanted, constraint: &Constraints, label: &str) -> Result<Vec<u8>, BuildError> {
    let bad = |m: String| dep_error(label, &want.name, &want.repository, m);
    let files = super::build::collect_files(dir).map_err(|e| bad(e.to_string()))?;
    let metadata =
        read_metadata(files.get("Chart.yaml").ok_or_else(|| bad(format!("{} has no Chart.yaml", dir.display())))?)
            .map_err(|m| bad(format!("Chart.yaml: {m}")))?;
    let version = metadata.version.clone().unwrap_or_default();
    if metadata.name != want.name || !Version::parse(&version).is_ok_and(|v| constraint.check(&v)) {
        return Err(bad(format!("{} holds {} {version}", dir.display(), metadata.name)));
    }
    super::build::tarball(&files, &format!("{}/", metadata.name)).map_err(|e| bad(format!("cannot pack: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep(name: &str, version: &str, repository: &str) -> Dependency {
        Dependency {
            name: name.into(),
            version: Some(version.into()),
            repository: Some(repository.into()),
            ..Default::default()
        }
    }

    #[test]
    fn mirrors_rewrite_whole_path_prefixes() {
        let opts = DependencyOptions {
            mirrors: vec![parse_mirror("https://helm.cilium.io/=http://127.0.0.1:9/cilium").unwrap()],
            ..Default::default()
        };
        assert_eq!(opts.rewrite("https://helm.cilium.io/index.yaml"), "http://127.0.0.1:9/cilium/index.yaml");
        assert_eq!(opts.rewrite("https://helm.cilium.io"), "http://127.0.0.1:9/cilium");
        assert_eq!(opts.rewrite("https://helm.cilium.iox/index.yaml"), "https://helm.cilium.iox/index.yaml");
        assert!(parse_mirror("https://a").is_err());
        assert!(parse_mirror("https://a=not a url").is_err());
    }

    /// helm's resolver refuses a dependency without a version (`improper constraint: ""`).
    #[test]
    fn a_dependency_needs_a_version_range() {
        let err = constraint_of("").err().expect("refused");
        assert!(err.contains("improper constraint"), "{err}");
        assert!(constraint_of("^1.0.0").is_ok());
    }

    /// The digest `helm dependency update` (v4.2.3) wrote into the Chart.lock of a chart with
    /// these dependencies (a `file://` one and one with condition, tags and an alias).
    #[test]
    fn the_lock_digest_is_helms() {
        let mut b = dep("b", "^1.0.0", "file://../b");
        b.condition = Some("b.enabled".into());
        b.tags = vec!["x".into()];
        b.alias = Some("bee".into());
        let req = vec![dep("a", "0.1.0", "file://../a"), b];
        let lock = vec![dep("a", "0.1.0", "file://../a"), dep("b", "1.2.0", "file://../b")];
        assert_eq!(hash_req(&req, &lock), HELM_DIGEST);
    }
    const HELM_DIGEST: &str = "sha256:07231b0610d007ace5f1b573566c5fc8749cadc330cd3e94d7ccc529853ad0dd";
}
