//! Releases in a local directory: `PATH/<tag>/<assets>`, or the Go
//! operator's layout `PATH/cluster-stacks/<tag>/<assets>`.
//!
//! Nothing is read outside the directory: a release directory or an asset that resolves
//! (through a symlink) out of it is skipped or refused, so a directory a tenant controls cannot
//! make the operator read `/etc/passwd` or another team's cached release (`docs/security.md`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::release::ReleaseId;

use super::{
    AssetInfo, AssetLocator, DownloadedAsset, ListedRelease, Listing, Progress, ReleaseSource, SHA256SUMS, SourceError,
    parse_sha256sums,
};

/// The subdirectory of the Go operator's local layout.
pub const GO_LAYOUT_DIR: &str = "cluster-stacks";

/// A directory of releases.
#[derive(Debug, Clone)]
pub struct DirSource {
    /// As the user gave it, for messages.
    given: PathBuf,
    /// Canonical, for the cache key.
    root: PathBuf,
}

impl DirSource {
    /// Opens the directory `path`; it must exist.
    pub fn new(path: impl Into<PathBuf>) -> Result<Self, SourceError> {
        let given = path.into();
        let root = std::fs::canonicalize(&given)
            .map_err(|e| SourceError::io("release directory is not accessible", &given, e))?;
        if !root.is_dir() {
            return Err(SourceError::Other(format!("release source {} is not a directory", given.display())));
        }
        Ok(Self { given, root })
    }

    /// The canonical path of the directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn list_blocking(&self) -> Result<Listing, SourceError> {
        let mut by_tag: BTreeMap<String, PathBuf> = BTreeMap::new();
        let mut skipped = Vec::new();
        let go_layout = self.root.join(GO_LAYOUT_DIR);
        // The top level wins when a tag is in both layouts.
        let mut roots = vec![self.root.clone()];
        if go_layout.is_dir() {
            roots.push(go_layout);
        }
        for (i, root) in roots.iter().enumerate() {
            let entries =
                std::fs::read_dir(root).map_err(|e| SourceError::io("cannot read release directory", root, e))?;
            for entry in entries {
                let entry = entry.map_err(|e| SourceError::io("cannot read release directory", root, e))?;
                let path = entry.path();
                if !path.is_dir() {
                    continue;
                }
                if !self.inside(&path) {
                    tracing::warn!(dir = %path.display(), "skipping a release directory that links out of the source directory");
                    skipped.push(entry.file_name().to_string_lossy().into_owned());
                    continue;
                }
                let Some(tag) = entry.file_name().to_str().map(str::to_string) else {
                    skipped.push(entry.file_name().to_string_lossy().into_owned());
                    continue;
                };
                if i == 0 && tag == GO_LAYOUT_DIR || tag.starts_with('.') {
                    continue;
                }
                if by_tag.contains_key(&tag) {
                    tracing::warn!(tag, dir = %path.display(), "release is in both directory layouts; using the top-level one");
                    continue;
                }
                by_tag.insert(tag, path);
            }
        }
        let mut releases: Vec<ListedRelease> = Vec::new();
        for (tag, dir) in by_tag {
            // The stack repository's build script names a non-stable release's directory in the
            // class (dot) form (`openstack-scs-1-34-v0-ttl.1712345678`): listed under its tag.
            match ReleaseId::parse_any(&tag) {
                Ok(id) if releases.iter().any(|r| r.id == id) => {
                    tracing::warn!(dir = %dir.display(), release = %id, "the release is in the directory twice (dash and dot form); using the first");
                    skipped.push(tag);
                }
                Ok(id) => releases.push(ListedRelease {
                    tag: id.tag(),
                    assets: self.list_assets(&dir)?,
                    id,
                    prerelease: false,
                }),
                Err(err) => {
                    tracing::debug!(tag, %err, "skipping a directory that is not a cluster-stack release");
                    skipped.push(tag);
                }
            }
        }
        skipped.sort();
        Ok(Listing { releases, skipped })
    }
}

impl DirSource {
    /// Whether `path` resolves (symlinks included) inside the source directory.
    fn inside(&self, path: &Path) -> bool {
        std::fs::canonicalize(path).is_ok_and(|p| p.starts_with(&self.root))
    }

    /// The regular files of one release directory, with digests from its `SHA256SUMS` when there
    /// is one. A file that links out of the source directory is listed (size 0, nothing of its
    /// target read) so that fetching the release fails naming it, instead of the release
    /// silently lacking a file.
    fn list_assets(&self, dir: &Path) -> Result<Vec<AssetInfo>, SourceError> {
        list_assets(dir, |p| self.inside(p))
    }
}

/// See [`DirSource::list_assets`]; `inside` tells a file inside the source directory.
fn list_assets(dir: &Path, inside: impl Fn(&Path) -> bool) -> Result<Vec<AssetInfo>, SourceError> {
    let mut assets = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| SourceError::io("cannot read release directory", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| SourceError::io("cannot read release directory", dir, e))?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_string) else { continue };
        if !inside(&path) {
            let link = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink());
            if link {
                assets.push(AssetInfo { name, size: 0, sha256: None, locator: AssetLocator::File(path) });
            }
            continue;
        }
        let meta = std::fs::metadata(&path).map_err(|e| SourceError::io("cannot read asset", &path, e))?;
        if !meta.is_file() {
            continue;
        }
        assets.push(AssetInfo { name, size: meta.len(), sha256: None, locator: AssetLocator::File(path) });
    }
    assets.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(sums) = assets.iter().find(|a| a.name == SHA256SUMS && inside(&dir.join(&a.name))) {
        let path = dir.join(&sums.name);
        let text = std::fs::read_to_string(&path).map_err(|e| SourceError::io("cannot read", &path, e))?;
        // A bad file spoils only its own release: the listing goes on without
        // its digests, and fetching that release fails on the same parse.
        match parse_sha256sums(&text) {
            Ok(sums) => {
                for asset in &mut assets {
                    asset.sha256 = sums.get(&asset.name).cloned();
                }
            }
            Err(message) => tracing::warn!(file = %path.display(), message, "ignoring a malformed SHA256SUMS"),
        }
    }
    Ok(assets)
}

impl ReleaseSource for DirSource {
    fn name(&self) -> String {
        format!("dir:{}", self.given.display())
    }

    fn cache_key(&self) -> String {
        // Short, stable, and the same however the path was spelled.
        let digest = Sha256::digest(self.root.as_os_str().as_encoded_bytes());
        format!("dir/{}", &hex::encode(digest)[..16])
    }

    async fn list(&self) -> Result<Listing, SourceError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.list_blocking())
            .await
            .map_err(|e| SourceError::Other(format!("listing {} failed: {e}", self.name())))?
    }

    async fn download(
        &self,
        release: &ListedRelease,
        asset: &AssetInfo,
        dest: &Path,
        progress: &dyn Progress,
    ) -> Result<DownloadedAsset, SourceError> {
        let AssetLocator::File(path) = &asset.locator else {
            return Err(SourceError::Other(format!(
                "{}: asset {} of {} is not a local file",
                self.name(),
                asset.name,
                release.tag
            )));
        };
        // Checked again at the read: the listing may be old, the link new.
        if !self.inside(path) {
            return Err(SourceError::Other(format!(
                "{}: asset {} of {} resolves outside the source directory; refused",
                self.name(),
                asset.name,
                release.tag
            )));
        }
        let mut input = tokio::fs::File::open(path).await.map_err(|e| SourceError::io("cannot open asset", path, e))?;
        let mut output =
            tokio::fs::File::create(dest).await.map_err(|e| SourceError::io("cannot create file", dest, e))?;
        progress.start(&asset.name, Some(asset.size));
        let mut hasher = Sha256::new();
        let mut size: u64 = 0;
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = input.read(&mut buf).await.map_err(|e| SourceError::io("cannot read asset", path, e))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            output.write_all(&buf[..n]).await.map_err(|e| SourceError::io("cannot write file", dest, e))?;
            size += n as u64;
            progress.advance(n as u64);
        }
        output.flush().await.map_err(|e| SourceError::io("cannot write file", dest, e))?;
        progress.finish(&asset.name);
        Ok(DownloadedAsset { path: dest.to_path_buf(), size, sha256: hex::encode(hasher.finalize()) })
    }
}
