//! Releases in an OCI registry: `oci://HOST[:PORT]/REPOSITORY`.
//!
//! The releases are the repository's tags (foreign tags are skipped, as for GitHub). A release is
//! an ORAS-style artifact: an OCI image manifest whose layers are the release's files, each named
//! by its `org.opencontainers.image.title` annotation. Every layer's digest is known from the
//! manifest, so every OCI release is verified: [`OciSource::download`] hashes the blob while it
//! streams to disk and refuses (and deletes) what does not match.
//!
//! The tag list is read with the distribution API's pagination (`n`, and the `Link` header's next
//! page) and asked for conditionally (`If-None-Match`) where the registry sends an `ETag`; when
//! the list is unchanged the previous listing (with its manifests) is reused. Requests go through
//! the shared [`RegistryClient`] (anonymous, basic, bearer-token dance).

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LINK};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::{AssetInfo, AssetLocator, DownloadedAsset, ListedRelease, Listing, Progress, ReleaseSource, SourceError};
use crate::registry::{RegistryClient, RegistryError, Target};
use crate::release::ReleaseId;

mod publish;
mod signatures;

pub use publish::{ArtifactForm, FILE_MEDIA_TYPE, HELM_CHART_LAYER, HELM_CONFIG, publish, publish_as, publish_chart};
pub use signatures::{CosignSignatures, push_cosign_signatures};

/// The OCI image manifest media type (what ORAS pushes).
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The annotation naming a layer's file.
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";
/// The artifact type of Sovereign Cloud Stack's stack repository's build script (`oras push
/// --artifact-type application/vnd.clusterstack.release`): what `publish` writes by default.
pub const ARTIFACT_TYPE: &str = "application/vnd.clusterstack.release";
/// csctl's artifact type (`publish --artifact-type csctl`).
pub const CSCTL_ARTIFACT_TYPE: &str = "application/vnd.scs.cluster-stacks.v1";
/// The artifact type this project's `publish` wrote before it followed the stack repository.
/// Releases are read whatever their artifact type: every artifact whose layers name files is one.
pub const LEGACY_ARTIFACT_TYPE: &str = "application/vnd.clusterstack.release.v1";
/// The media type of the empty config blob (`{}`) ORAS uses for artifacts.
pub const EMPTY_CONFIG: &str = "application/vnd.oci.empty.v1+json";
/// How many tags one page asks for.
pub const DEFAULT_PAGE_SIZE: usize = 1000;
/// At most this many tag pages are followed (a registry whose pages loop is an error).
const MAX_PAGES: usize = 10_000;
/// Manifests fetched at the same time while listing.
const MANIFEST_CONCURRENCY: usize = 4;
/// How OCI sources are reached: credentials and insecure (plain `http://`) hosts.
#[derive(Debug, Clone, Default)]
pub struct OciOptions {
    /// Registry settings (credentials and access tokens per host, timeout).
    pub registry: crate::registry::RegistryConfig,
    /// Hosts reached over plain `http://` although they are not loopback.
    pub insecure: Vec<String>,
}

/// The Go operator's variables, honoured for compatibility.
pub const ENV_OCI_REGISTRY: &str = "OCI_REGISTRY";
/// See [`ENV_OCI_REGISTRY`].
pub const ENV_OCI_REPOSITORY: &str = "OCI_REPOSITORY";
/// See [`ENV_OCI_REGISTRY`].
pub const ENV_OCI_ACCESS_TOKEN: &str = "OCI_ACCESS_TOKEN";
/// See [`ENV_OCI_REGISTRY`].
pub const ENV_OCI_USERNAME: &str = "OCI_USERNAME";
/// See [`ENV_OCI_REGISTRY`].
pub const ENV_OCI_PASSWORD: &str = "OCI_PASSWORD";
/// Comma-separated hosts reached over plain `http://` (as `--insecure-registry`).
pub const ENV_INSECURE_REGISTRIES: &str = "CLUSTERSTACK_INSECURE_REGISTRIES";

impl OciOptions {
    /// Options from the environment: `OCI_USERNAME`/`OCI_PASSWORD` and `OCI_ACCESS_TOKEN` are the
    /// credentials of `host` (every OCI source's registry: a process talks to one registry with
    /// them, as the Go operator does), `CLUSTERSTACK_INSECURE_REGISTRIES` the insecure hosts.
    pub fn from_env(host: &str, env: impl Fn(&str) -> Option<String>) -> Self {
        let get = |k: &str| env(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let mut registry = crate::registry::RegistryConfig::default();
        if let (Some(username), Some(password)) = (get(ENV_OCI_USERNAME), get(ENV_OCI_PASSWORD)) {
            registry.credentials.insert(host.to_string(), crate::registry::Credentials { username, password });
        }
        if let Some(token) = get(ENV_OCI_ACCESS_TOKEN) {
            registry.access_tokens.insert(host.to_string(), token);
        }
        let insecure = get(ENV_INSECURE_REGISTRIES)
            .map(|v| v.split(',').map(|h| h.trim().to_string()).filter(|h| !h.is_empty()).collect())
            .unwrap_or_default();
        Self { registry, insecure }
    }
}

/// The largest manifest read (the distribution spec suggests registries accept 4 MiB).
const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// Whether `host` (with an optional port) is a loopback address, where plain `http://` is allowed.
pub fn is_loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => {
            host.rsplit_once(':').map_or(host, |(h, p)| if p.bytes().all(|b| b.is_ascii_digit()) { h } else { host })
        }
    };
    name == "localhost" || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The base URL of a registry: `http://` for loopback hosts and those listed as insecure,
/// `https://` otherwise.
pub fn registry_base_url(host: &str, insecure: &[String]) -> String {
    if is_loopback(host) || insecure.iter().any(|h| h == host) {
        format!("http://{host}")
    } else {
        format!("https://{host}")
    }
}

/// An OCI image manifest, as far as we read it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    #[serde(default)]
    pub schema_version: Option<u32>,
    #[serde(default)]
    pub media_type: Option<String>,
    #[serde(default)]
    pub artifact_type: Option<String>,
    #[serde(default)]
    pub config: Option<Descriptor>,
    #[serde(default)]
    pub layers: Vec<Descriptor>,
}

/// A content descriptor.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    pub media_type: String,
    pub digest: String,
    pub size: u64,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct TagPage {
    #[serde(default)]
    tags: Option<Vec<String>>,
}

/// The listing state kept between polls.
#[derive(Default)]
struct ListState {
    etag: Option<String>,
    listing: Option<Listing>,
}

struct Inner {
    client: Arc<RegistryClient>,
    host: String,
    repository: String,
    base_url: String,
    page_size: usize,
    state: Mutex<ListState>,
}

/// The releases of one repository of an OCI registry. Clones share the client and the listing
/// state (ETag and last listing).
#[derive(Clone)]
pub struct OciSource {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for OciSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OciSource").field("name", &self.name()).field("base_url", &self.inner.base_url).finish()
    }
}

impl OciSource {
    /// The repository `repository` of registry `host`, reached at `base_url` (see
    /// [`registry_base_url`]).
    pub fn new(client: Arc<RegistryClient>, host: &str, repository: &str, base_url: &str) -> Self {
        Self::with_page_size(client, host, repository, base_url, DEFAULT_PAGE_SIZE)
    }

    /// As [`new`](Self::new), asking for `page_size` tags per page.
    pub fn with_page_size(
        client: Arc<RegistryClient>,
        host: &str,
        repository: &str,
        base_url: &str,
        page_size: usize,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                client,
                host: host.to_string(),
                repository: repository.to_string(),
                base_url: base_url.trim_end_matches('/').to_string(),
                page_size: page_size.max(1),
                state: Mutex::default(),
            }),
        }
    }

    /// The registry host (with port).
    pub fn host(&self) -> &str {
        &self.inner.host
    }

    /// The repository.
    pub fn repository(&self) -> &str {
        &self.inner.repository
    }

    fn target<'a>(&'a self, what: &'a str) -> Target<'a> {
        Target { what, host: &self.inner.host, repository: &self.inner.repository, push: false }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/v2/{}/{path}", self.inner.base_url, self.inner.repository)
    }

    /// Every tag, following the pages; `None` when the registry says the list is unchanged.
    async fn tags(&self, source: &str) -> Result<Option<Vec<String>>, SourceError> {
        let etag = self.inner.state.lock().unwrap_or_else(|e| e.into_inner()).etag.clone();
        let mut url = self.url(&format!("tags/list?n={}", self.inner.page_size));
        let mut tags = Vec::new();
        let mut seen = HashSet::new();
        let mut first = true;
        let mut new_etag = None;
        loop {
            if !seen.insert(url.clone()) || seen.len() > MAX_PAGES {
                return Err(protocol(source, format!("the tag pages do not end (at {url})")));
            }
            let if_none_match = if first { etag.clone() } else { None };
            let resp = self
                .inner
                .client
                .send(&self.target(source), &url, |http| {
                    let req = http.get(&url).header(ACCEPT, "application/json");
                    match &if_none_match {
                        Some(e) => req.header(IF_NONE_MATCH, e),
                        None => req,
                    }
                })
                .await
                .map_err(|e| registry_error(source, e))?;
            let status = resp.status();
            if first && status == StatusCode::NOT_MODIFIED {
                return Ok(None);
            }
            if status == StatusCode::NOT_FOUND {
                // No such repository yet: no releases (what `oras repo tags` says too).
                tracing::debug!(source, "the repository does not exist");
                return Ok(Some(Vec::new()));
            }
            if !status.is_success() {
                return Err(unexpected_status(source, &url, status));
            }
            if first {
                new_etag = resp.headers().get(ETAG).and_then(|v| v.to_str().ok()).map(str::to_string);
            }
            let next = resp.headers().get(LINK).and_then(|v| v.to_str().ok()).and_then(next_link);
            let page: TagPage =
                resp.json().await.map_err(|e| protocol(source, format!("{url}: not a tag list: {e}")))?;
            tags.extend(page.tags.unwrap_or_default());
            first = false;
            match next {
                Some(next) => {
                    url = resolve(&self.inner.base_url, &next)
                        .ok_or_else(|| protocol(source, format!("bad next-page link {next:?}")))?;
                }
                None => break,
            }
        }
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner()).etag = new_etag;
        Ok(Some(tags))
    }

    /// The manifest a tag names, as a release (or why it is not one).
    async fn release(&self, source: &str, id: ReleaseId, tag: &str) -> Result<ListedRelease, SourceError> {
        let what = format!("{source}:{tag}");
        let url = self.url(&format!("manifests/{tag}"));
        let resp = self
            .inner
            .client
            .send(&self.target(&what), &url, |http| {
                http.get(&url).header(ACCEPT, format!("{OCI_MANIFEST}, {}", crate::registry::MANIFEST_ACCEPT))
            })
            .await
            .map_err(|e| registry_error(source, e))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(unexpected_status(&what, &url, status));
        }
        let content_type = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
        let body =
            read_bounded(resp, MAX_MANIFEST_BYTES).await.map_err(|m| protocol(&what, format!("manifest: {m}")))?;
        let assets = artifact_assets(&body, content_type.as_deref()).map_err(|m| protocol(&what, m))?;
        // Blobs are fetched by digest: the canonical tag names the release from here on.
        Ok(ListedRelease { tag: id.tag(), id, prerelease: false, assets })
    }
}

/// The files of an ORAS-style artifact manifest, or why the manifest is not one.
pub fn artifact_assets(body: &[u8], content_type: Option<&str>) -> Result<Vec<AssetInfo>, String> {
    let manifest: ImageManifest =
        serde_json::from_slice(body).map_err(|e| format!("the manifest is not an OCI image manifest: {e}"))?;
    let media_type = manifest.media_type.as_deref().or(content_type).unwrap_or_default();
    if media_type != OCI_MANIFEST {
        return Err(format!("not an artifact: the manifest's media type is {media_type:?}, expected {OCI_MANIFEST:?}"));
    }
    if manifest.schema_version != Some(2) {
        return Err("not an artifact: the manifest's schemaVersion is not 2".into());
    }
    let mut names = HashSet::new();
    let mut assets = Vec::new();
    for layer in &manifest.layers {
        let Some(name) = layer.annotations.get(TITLE_ANNOTATION) else {
            return Err(format!(
                "not an artifact: layer {} has no {TITLE_ANNOTATION} annotation (an image, not a release?)",
                layer.digest
            ));
        };
        if name.is_empty() || name.contains('/') || name.contains('\\') || name == "." || name == ".." {
            return Err(format!("layer {}: file name {name:?} is not a plain file name", layer.digest));
        }
        if !names.insert(name.clone()) {
            return Err(format!("two layers are named {name:?}"));
        }
        let sha256 = layer
            .digest
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
            .map(str::to_string);
        if sha256.is_none() {
            return Err(format!("layer {name}: unsupported digest {} (sha256 expected)", layer.digest));
        }
        assets.push(AssetInfo {
            name: name.clone(),
            size: layer.size,
            sha256,
            locator: AssetLocator::Oci { digest: layer.digest.clone() },
        });
    }
    if assets.is_empty() {
        return Err("not an artifact: the manifest has no layers".into());
    }
    Ok(assets)
}

impl ReleaseSource for OciSource {
    fn name(&self) -> String {
        format!("oci://{}/{}", self.inner.host, self.inner.repository)
    }

    fn cache_key(&self) -> String {
        format!("oci/{}/{}", self.inner.host, self.inner.repository)
    }

    async fn list(&self) -> Result<Listing, SourceError> {
        let source = self.name();
        let tags = match self.tags(&source).await? {
            Some(tags) => tags,
            None => {
                let known = self.inner.state.lock().unwrap_or_else(|e| e.into_inner()).listing.clone();
                if let Some(listing) = known {
                    tracing::debug!(source, "tag list unchanged");
                    return Ok(listing);
                }
                // An ETag without a listing (a failed listing in between): ask again without it.
                self.inner.state.lock().unwrap_or_else(|e| e.into_inner()).etag = None;
                self.tags(&source).await?.unwrap_or_default()
            }
        };
        let mut listing = Listing::default();
        let mut candidates = Vec::new();
        let mut unique = HashSet::new();
        let mut ids = HashSet::new();
        for tag in tags {
            if !unique.insert(tag.clone()) {
                continue;
            }
            // The stack repository's build script tags a non-stable release in the class (dot)
            // form (`openstack-scs-1-34-v0-ttl.1712345678`); it is listed under its tag (dash) form.
            match ReleaseId::parse_any(&tag) {
                Ok(id) if !ids.insert(id.clone()) => {
                    tracing::warn!(source, tag, release = %id, "the release is tagged twice (dash and dot form); using the first");
                    listing.skipped.push(tag);
                }
                Ok(id) => candidates.push((id, tag)),
                Err(_) => listing.skipped.push(tag),
            }
        }
        let results: Vec<_> = futures::stream::iter(candidates)
            .map(|(id, tag)| {
                let source = &source;
                async move {
                    let r = self.release(source, id, &tag).await;
                    (tag, r)
                }
            })
            .buffered(MANIFEST_CONCURRENCY)
            .collect()
            .await;
        for (tag, result) in results {
            match result {
                Ok(release) => listing.releases.push(release),
                Err(SourceError::Protocol { message, .. }) => {
                    // A tag named like a release that is not an artifact: skipped, loudly.
                    tracing::warn!(source, tag, message, "skipping a tag that is not a release artifact");
                    listing.skipped.push(tag);
                }
                Err(e) => return Err(e),
            }
        }
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner()).listing = Some(listing.clone());
        Ok(listing)
    }

    async fn download(
        &self,
        release: &ListedRelease,
        asset: &AssetInfo,
        dest: &Path,
        progress: &dyn Progress,
    ) -> Result<DownloadedAsset, SourceError> {
        let source = self.name();
        let AssetLocator::Oci { digest } = &asset.locator else {
            return Err(SourceError::Other(format!(
                "{source}: asset {} of {} is not an OCI blob ({:?})",
                asset.name, release.tag, asset.locator
            )));
        };
        let result = self.download_blob(&source, release, asset, digest, dest, progress).await;
        if result.is_err() {
            // Nothing half-written is kept.
            let _ = tokio::fs::remove_file(dest).await;
        }
        result
    }
}

impl OciSource {
    async fn download_blob(
        &self,
        source: &str,
        release: &ListedRelease,
        asset: &AssetInfo,
        digest: &str,
        dest: &Path,
        progress: &dyn Progress,
    ) -> Result<DownloadedAsset, SourceError> {
        let what = format!("{source}:{} blob {digest} ({})", release.tag, asset.name);
        let url = self.url(&format!("blobs/{digest}"));
        let resp = self
            .inner
            .client
            .send(&self.target(&what), &url, |http| http.get(&url))
            .await
            .map_err(|e| registry_error(&what, e))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(unexpected_status(&what, &url, status));
        }
        progress.start(&asset.name, Some(asset.size));
        let file = tokio::fs::File::create(dest).await.map_err(|e| SourceError::io("creating", dest, e))?;
        let mut file = tokio::io::BufWriter::with_capacity(256 << 10, file);
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let mut body = resp.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| SourceError::Unavailable {
                source_name: what.clone(),
                message: format!("reading {url}: {}", crate::registry::error_chain(&e)),
            })?;
            size += chunk.len() as u64;
            if size > asset.size {
                return Err(integrity(
                    release,
                    asset,
                    digest,
                    "size",
                    asset.size.to_string(),
                    format!("more than {}", asset.size),
                ));
            }
            hasher.update(&chunk);
            file.write_all(&chunk).await.map_err(|e| SourceError::io("writing", dest, e))?;
            progress.advance(chunk.len() as u64);
        }
        file.flush().await.map_err(|e| SourceError::io("writing", dest, e))?;
        file.get_ref().sync_all().await.map_err(|e| SourceError::io("syncing", dest, e))?;
        drop(file);
        if size != asset.size {
            return Err(integrity(release, asset, digest, "size", asset.size.to_string(), size.to_string()));
        }
        let sha256 = hex(&hasher.finalize());
        if Some(sha256.as_str()) != digest.strip_prefix("sha256:") {
            return Err(integrity(release, asset, digest, "digest", digest.to_string(), format!("sha256:{sha256}")));
        }
        progress.finish(&asset.name);
        Ok(DownloadedAsset { path: dest.to_path_buf(), size, sha256 })
    }
}

fn integrity(
    release: &ListedRelease,
    asset: &AssetInfo,
    digest: &str,
    what: &'static str,
    expected: String,
    actual: String,
) -> SourceError {
    SourceError::Integrity {
        release: release.tag.clone(),
        asset: format!("{} (blob {digest})", asset.name),
        what,
        expected,
        actual,
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn protocol(source: &str, message: String) -> SourceError {
    SourceError::Protocol { source_name: source.to_string(), message }
}

fn unexpected_status(what: &str, url: &str, status: StatusCode) -> SourceError {
    let message = match status {
        StatusCode::NOT_FOUND => format!("{url}: not found (status 404)"),
        s => format!("{url}: unexpected status {}", s.as_u16()),
    };
    if status.is_server_error() {
        SourceError::Unavailable { source_name: what.to_string(), message }
    } else {
        protocol(what, message)
    }
}

fn registry_error(what: &str, e: RegistryError) -> SourceError {
    match e {
        RegistryError::Unreachable { .. } => {
            SourceError::Unavailable { source_name: what.to_string(), message: e.to_string() }
        }
        e => SourceError::Protocol { source_name: what.to_string(), message: e.to_string() },
    }
}

/// Reads a body up to `max` bytes.
async fn read_bounded(resp: reqwest::Response, max: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut body = resp.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| crate::registry::error_chain(&e))?;
        if out.len() + chunk.len() > max {
            return Err(format!("larger than {max} bytes"));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The target of a `Link: <...>; rel="next"` header.
pub fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|part| {
        let (target, params) = part.trim().split_once(';')?;
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        params
            .split(';')
            .any(|p| {
                let p = p.trim().to_ascii_lowercase();
                p == "rel=\"next\"" || p == "rel=next"
            })
            .then(|| target.to_string())
    })
}

/// A link target resolved against the registry's base URL.
fn resolve(base: &str, target: &str) -> Option<String> {
    let base = reqwest::Url::parse(&format!("{base}/")).ok()?;
    base.join(target).ok().map(String::from)
}

#[cfg(test)]
mod tests;
