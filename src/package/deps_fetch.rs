//! Fetching dependency charts: from a Helm repository (`index.yaml`, then the archive it lists,
//! verified against the digest it publishes) or an OCI registry (the chart layer of the tag's
//! manifest, verified against its digest), through a content-addressed download cache.
//!
//! The build is synchronous; each fetch runs on a thread of its own with a small runtime, so it
//! works whether or not the caller is inside a tokio runtime.
//!
//! Offline: each verified download is also recorded under the repository, name and version it
//! answered (`refs/`), so a dependency pinned to an exact version (a `Chart.lock`, or an exact
//! version in `Chart.yaml`) that the cache holds is taken without asking the repository, and a
//! range falls back to the highest cached version that satisfies it when the repository cannot
//! be reached.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use helm_render::sprig::semver::{Constraints, Version};
use reqwest::header::ACCEPT;
use sha2::{Digest, Sha256};

use super::deps::{DependencyOptions, Wanted};
use crate::registry::{RegistryClient, Target};

/// The largest `index.yaml` read (big public repositories publish tens of MiB).
const MAX_INDEX_BYTES: usize = 128 << 20;
/// The largest chart archive read.
const MAX_CHART_BYTES: usize = 64 << 20;
/// The media type of a Helm chart's content layer in an OCI manifest.
const HELM_CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
/// How long one request may take.
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Fetches dependency charts with one set of options.
pub(crate) struct Fetcher {
    opts: DependencyOptions,
}

impl Fetcher {
    pub fn new(opts: &DependencyOptions) -> Result<Self, String> {
        // `build` is a library call too: a caller that did not install the TLS provider would
        // otherwise get a panic from the first client built.
        crate::install_crypto_provider();
        Ok(Self { opts: opts.clone() })
    }

    /// The archive of the highest version of `want` that satisfies `constraint`.
    pub fn fetch(&mut self, want: &Wanted, constraint: &Constraints) -> Result<Vec<u8>, String> {
        let cache = Cache::new(self.opts.cache_dir.as_deref());
        if exact_version(&want.version)
            && let Some(bytes) = cache.get_ref(&want.repository, &want.name, &want.version)
        {
            tracing::debug!(chart = want.name, version = want.version, "dependency chart from the cache, offline");
            return Ok(bytes);
        }
        match self.fetch_online(want, constraint) {
            Ok(bytes) => Ok(bytes),
            Err(e) => match cache.best_ref(&want.repository, &want.name, constraint) {
                Some((version, bytes)) => {
                    tracing::warn!(chart = want.name, %version, error = %e, "the repository cannot be reached; using the highest cached version that satisfies the dependency");
                    Ok(bytes)
                }
                None => Err(e),
            },
        }
    }

    fn fetch_online(&mut self, want: &Wanted, constraint: &Constraints) -> Result<Vec<u8>, String> {
        let opts = &self.opts;
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| format!("cannot start a runtime: {e}"))?;
                    rt.block_on(async {
                        if let Some(rest) = want.repository.strip_prefix("oci://") {
                            fetch_oci(opts, rest, want, constraint).await
                        } else if want.repository.starts_with("https://") || want.repository.starts_with("http://") {
                            fetch_http(opts, want, constraint).await
                        } else {
                            Err("unsupported repository: use https://, oci:// or file://".to_string())
                        }
                    })
                })
                .join()
                .unwrap_or_else(|_| Err("the download thread panicked".into()))
        })
    }
}

#[derive(serde::Deserialize)]
struct Index {
    #[serde(default)]
    entries: std::collections::BTreeMap<String, Vec<IndexEntry>>,
}

#[derive(serde::Deserialize)]
struct IndexEntry {
    #[serde(deserialize_with = "lenient_string")]
    version: String,
    #[serde(default)]
    urls: Vec<String>,
    #[serde(default)]
    digest: Option<String>,
}

/// `version: 1.0` is the text `1.0`, as Go reads it into a string.
fn lenient_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    use serde::Deserialize;
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    })
}

fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        // Chart archives as served (their digests are of these bytes), whatever decoders another
        // crate enables.
        .no_gzip()
        .no_deflate()
        .timeout(TIMEOUT)
        .user_agent(concat!("clusterstack/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

async fn get(http: &reqwest::Client, url: &str, max: usize) -> Result<Vec<u8>, String> {
    let resp = http.get(url).send().await.map_err(|e| format!("{url}: {}", crate::registry::error_chain(&e)))?;
    if !resp.status().is_success() {
        return Err(format!("{url}: status {}", resp.status().as_u16()));
    }
    read_bounded(resp, max).await.map_err(|m| format!("{url}: {m}"))
}

async fn read_bounded(mut resp: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| crate::registry::error_chain(&e))? {
        if out.len() + chunk.len() > max {
            return Err(format!("larger than the limit of {max} bytes"));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

async fn fetch_http(opts: &DependencyOptions, want: &Wanted, constraint: &Constraints) -> Result<Vec<u8>, String> {
    let http = http_client()?;
    let repo = opts.rewrite(want.repository.trim_end_matches('/'));
    if opts.https_only && repo.starts_with("http://") && repo == want.repository.trim_end_matches('/') {
        return Err("a plain http:// repository: use https://, or a --helm-repo-mirror rule".into());
    }
    let index_url = format!("{repo}/index.yaml");
    let text = get(&http, &index_url, MAX_INDEX_BYTES).await?;
    // The parser's message without the file's text: whatever the URL answered stays out of
    // conditions and logs.
    let index: Index = serde_saphyr::from_str(&String::from_utf8_lossy(&text))
        .map_err(|e| format!("{index_url}: not a chart index: {}", crate::release::yaml_error_without_content(&e)))?;
    let entries = index.entries.get(&want.name).ok_or_else(|| format!("{index_url} lists no chart {}", want.name))?;
    let best = entries
        .iter()
        .filter_map(|e| Version::parse(&e.version).ok().filter(|v| constraint.check(v)).map(|v| (v, e)))
        .max_by(|(a, _), (b, _)| a.compare(b))
        .map(|(_, e)| e)
        .ok_or_else(|| format!("{index_url} has no version of {} that satisfies {:?}", want.name, want.version))?;
    let first = best.urls.first().ok_or_else(|| format!("{index_url}: {} {} has no URL", want.name, best.version))?;
    let url = match reqwest::Url::parse(first) {
        Ok(absolute) => opts.rewrite(absolute.as_str()),
        Err(_) => reqwest::Url::parse(&format!("{repo}/"))
            .and_then(|base| base.join(first))
            .map_err(|e| format!("{index_url}: bad chart URL {first:?}: {e}"))?
            .to_string(),
    };
    let digest = best.digest.as_deref().map(|d| d.trim_start_matches("sha256:").to_ascii_lowercase());
    let cache = Cache::new(opts.cache_dir.as_deref());
    if let Some(bytes) = digest.as_deref().and_then(|d| cache.get(d)) {
        cache.put_ref(&want.repository, &want.name, &best.version, digest.as_deref().unwrap_or_default());
        return Ok(bytes);
    }
    let bytes = get(&http, &url, MAX_CHART_BYTES).await?;
    let got = hex::encode(Sha256::digest(&bytes));
    match digest {
        Some(want_digest) if want_digest != got => {
            Err(format!("{url}: digest mismatch: the index says sha256:{want_digest}, the download is sha256:{got}"))
        }
        Some(_) => {
            cache.put(&got, &bytes);
            cache.put_ref(&want.repository, &want.name, &best.version, &got);
            Ok(bytes)
        }
        // Without a published digest the download cannot be verified, so it is not cached either.
        None => Ok(bytes),
    }
}

#[derive(serde::Deserialize)]
struct Manifest {
    #[serde(default)]
    layers: Vec<Layer>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Layer {
    media_type: String,
    digest: String,
}

#[derive(serde::Deserialize)]
struct Tags {
    #[serde(default)]
    tags: Option<Vec<String>>,
}

async fn fetch_oci(
    opts: &DependencyOptions,
    rest: &str,
    want: &Wanted,
    constraint: &Constraints,
) -> Result<Vec<u8>, String> {
    let (host, path) = rest.trim_end_matches('/').split_once('/').unwrap_or((rest, ""));
    let repository = if path.is_empty() { want.name.clone() } else { format!("{path}/{}", want.name) };
    let base = match opts.registry.endpoints.get(host).or(opts.registry.override_url.as_ref()) {
        Some(url) => url.trim_end_matches('/').to_string(),
        None => {
            // A release names this registry: plain http (which a loopback host gets) only when
            // the operator's own settings name the host.
            if opts.https_only
                && crate::source::oci::is_loopback(host)
                && !opts.insecure_registries.iter().any(|h| h == host)
            {
                return Err(format!(
                    "a plain http:// registry ({host}): name it in CLUSTERSTACK_INSECURE_REGISTRIES (--insecure-registry)"
                ));
            }
            crate::source::oci::registry_base_url(host, &opts.insecure_registries)
        }
    };
    let client = Arc::new(RegistryClient::new(opts.registry.clone())?);
    let what = format!("oci://{host}/{repository}");
    let target = Target { what: &what, host, repository: &repository, push: false };
    // An exact version is the tag (helm writes `+` as `_` in tags); a range needs the tag list.
    let tag = match Version::parse(&want.version) {
        Ok(v) if v.original == want.version.trim_start_matches('v') || v.original == want.version => {
            want.version.replace('+', "_")
        }
        _ => {
            let url = format!("{base}/v2/{repository}/tags/list");
            let resp = client.send(&target, &url, |h| h.get(&url)).await.map_err(|e| e.to_string())?;
            if !resp.status().is_success() {
                return Err(format!("{url}: status {}", resp.status().as_u16()));
            }
            let tags: Tags = serde_json::from_slice(&read_bounded(resp, 16 << 20).await?)
                .map_err(|e| format!("{url}: not a tag list: {e}"))?;
            tags.tags
                .unwrap_or_default()
                .into_iter()
                .filter_map(|t| {
                    Version::parse(&t.replace('_', "+")).ok().filter(|v| constraint.check(v)).map(|v| (v, t))
                })
                .max_by(|(a, _), (b, _)| a.compare(b))
                .map(|(_, t)| t)
                .ok_or_else(|| format!("{what} has no tag that satisfies {:?}", want.version))?
        }
    };
    let url = format!("{base}/v2/{repository}/manifests/{tag}");
    let resp = client
        .send(&target, &url, |h| h.get(&url).header(ACCEPT, crate::source::oci::OCI_MANIFEST))
        .await
        .map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("{what}:{tag}: status {}", resp.status().as_u16()));
    }
    let manifest: Manifest = serde_json::from_slice(&read_bounded(resp, 4 << 20).await?)
        .map_err(|e| format!("{what}:{tag}: not an OCI manifest: {e}"))?;
    let layer = manifest
        .layers
        .iter()
        .find(|l| l.media_type == HELM_CHART_LAYER)
        .ok_or_else(|| format!("{what}:{tag} is not a Helm chart (no {HELM_CHART_LAYER} layer)"))?;
    let digest = layer
        .digest
        .strip_prefix("sha256:")
        .ok_or_else(|| format!("{what}:{tag}: unsupported layer digest {}", layer.digest))?
        .to_ascii_lowercase();
    let cache = Cache::new(opts.cache_dir.as_deref());
    let version = tag.replace('_', "+");
    if let Some(bytes) = cache.get(&digest) {
        cache.put_ref(&want.repository, &want.name, &version, &digest);
        return Ok(bytes);
    }
    let url = format!("{base}/v2/{repository}/blobs/{}", layer.digest);
    let resp = client.send(&target, &url, |h| h.get(&url)).await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("{url}: status {}", resp.status().as_u16()));
    }
    let bytes = read_bounded(resp, MAX_CHART_BYTES).await?;
    let got = hex::encode(Sha256::digest(&bytes));
    if got != digest {
        return Err(format!(
            "{what}:{tag}: digest mismatch: the manifest says sha256:{digest}, the blob is sha256:{got}"
        ));
    }
    cache.put(&got, &bytes);
    cache.put_ref(&want.repository, &want.name, &version, &got);
    Ok(bytes)
}

/// Whether a dependency's version names one version (`1.19.1`, `v1.2.3-rc.1+b`), not a range:
/// then the cache's record of it is used without asking the repository.
fn exact_version(version: &str) -> bool {
    let v = version.trim();
    let core = v.strip_prefix('v').unwrap_or(v).split(['-', '+']).next().unwrap_or_default();
    core.split('.').count() == 3
        && core.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && Version::parse(v).is_ok()
}

/// Chart archives by sha256: read back only when the content still hashes to its name, written
/// through a temp file renamed into place, so a crash or a concurrent build never leaves a
/// partial file under a valid name. A cache that cannot be written is only a slower build.
///
/// `refs/<sha256 of the repository URL>/<name>/<version>` holds the digest a verified download of
/// that chart had: how a pinned dependency is found offline. Only the archive is trusted, through
/// its digest; a ref naming a missing or damaged archive is no ref.
struct Cache {
    dir: Option<PathBuf>,
    refs: Option<PathBuf>,
}

impl Cache {
    fn new(dir: Option<&Path>) -> Self {
        Self { dir: dir.map(|d| d.join("sha256")), refs: dir.map(|d| d.join("refs")) }
    }

    /// The directory of `name`'s refs in `repository`, when both can name a directory.
    fn ref_dir(&self, repository: &str, name: &str) -> Option<PathBuf> {
        let safe = |s: &str| {
            !s.is_empty() && !s.starts_with('.') && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b))
        };
        let repo = hex::encode(Sha256::digest(repository.trim_end_matches('/').as_bytes()));
        safe(name).then(|| self.refs.as_ref().map(|r| r.join(repo).join(name))).flatten()
    }

    fn put_ref(&self, repository: &str, name: &str, version: &str, digest: &str) {
        let safe = !version.is_empty() && !version.starts_with('.') && !version.contains(['/', '\\', '\0']);
        let Some(dir) = self.ref_dir(repository, name).filter(|_| safe && self.dir.is_some()) else { return };
        let result = (|| -> std::io::Result<()> {
            std::fs::create_dir_all(&dir)?;
            let mut tmp = tempfile::NamedTempFile::new_in(&dir)?;
            std::io::Write::write_all(&mut tmp, digest.as_bytes())?;
            tmp.persist(dir.join(version)).map_err(|e| e.error)?;
            Ok(())
        })();
        if let Err(e) = result {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot record the dependency in the cache");
        }
    }

    /// The archive recorded for `name` `version` of `repository`, verified.
    fn get_ref(&self, repository: &str, name: &str, version: &str) -> Option<Vec<u8>> {
        let path = self.ref_dir(repository, name)?.join(version.trim());
        let digest = std::fs::read_to_string(path).ok()?;
        self.get(digest.trim())
    }

    /// The highest recorded version of `name` in `repository` that satisfies `constraint`, with
    /// its archive, verified.
    fn best_ref(&self, repository: &str, name: &str, constraint: &Constraints) -> Option<(String, Vec<u8>)> {
        let dir = self.ref_dir(repository, name)?;
        let mut versions: Vec<(Version, String)> = std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter_map(|v| Version::parse(&v).ok().filter(|p| constraint.check(p)).map(|p| (p, v)))
            .collect();
        versions.sort_by(|a, b| b.0.compare(&a.0));
        versions.into_iter().find_map(|(_, v)| self.get_ref(repository, name, &v).map(|bytes| (v, bytes)))
    }

    fn get(&self, digest: &str) -> Option<Vec<u8>> {
        let path = self.dir.as_ref()?.join(format!("{digest}.tgz"));
        let bytes = std::fs::read(&path).ok()?;
        if hex::encode(Sha256::digest(&bytes)) == digest {
            tracing::debug!(path = %path.display(), "dependency chart from the cache");
            return Some(bytes);
        }
        tracing::warn!(path = %path.display(), "a cached chart does not match its digest; fetching it again");
        let _ = std::fs::remove_file(&path);
        None
    }

    fn put(&self, digest: &str, bytes: &[u8]) {
        let Some(dir) = &self.dir else { return };
        let result = (|| -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
            std::io::Write::write_all(&mut tmp, bytes)?;
            tmp.as_file().sync_all()?;
            tmp.persist(dir.join(format!("{digest}.tgz"))).map_err(|e| e.error)?;
            Ok(())
        })();
        if let Err(e) = result {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot write the dependency cache");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A release's loopback registry or plain http:// repository is not reached unless the
    /// operator's settings name it (a mirror rule, an insecure registry).
    #[test]
    fn a_release_reaches_plain_http_only_through_the_operators_settings() {
        let opts = DependencyOptions { https_only: true, ..Default::default() };
        let any = Constraints::parse("*").unwrap();
        let want =
            |repository: &str| Wanted { name: "x".into(), version: "1.0.0".into(), repository: repository.into() };
        let mut fetcher = Fetcher::new(&opts).unwrap();
        let err = fetcher.fetch(&want("oci://127.0.0.1:1/charts"), &any).unwrap_err();
        assert!(
            err.contains("plain http:// registry (127.0.0.1:1)") && err.contains("CLUSTERSTACK_INSECURE_REGISTRIES"),
            "{err}"
        );
        let err = fetcher.fetch(&want("http://127.0.0.1:1/charts"), &any).unwrap_err();
        assert!(err.contains("plain http:// repository"), "{err}");
    }

    #[test]
    fn the_cache_returns_only_what_matches_its_digest() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::new(Some(dir.path()));
        let bytes = b"chart".to_vec();
        let digest = hex::encode(Sha256::digest(&bytes));
        assert_eq!(cache.get(&digest), None);
        cache.put(&digest, &bytes);
        assert_eq!(cache.get(&digest), Some(bytes));
        // A corrupted entry is dropped, not returned.
        std::fs::write(dir.path().join("sha256").join(format!("{digest}.tgz")), b"other").unwrap();
        assert_eq!(cache.get(&digest), None);
        assert!(!dir.path().join("sha256").join(format!("{digest}.tgz")).exists());
    }
}
