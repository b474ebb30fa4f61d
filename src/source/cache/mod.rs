//! The release cache: verified, extracted releases on disk.
//!
//! Layout (others build on it):
//!
//! ```text
//! <cache>/<source-key>/<tag>/            one complete release
//!     <assets as published>
//!     manifest.json                      digests, how verified, the source
//!     cluster-class/<p>-<n>-<maj>-<min>-cluster-class/{Chart.yaml,values.yaml,templates/}
//!     cluster-addon/...                  the extracted cluster-addon tarball
//! <cache>/.tmp/                          work in progress, emptied at start
//! ```
//!
//! A release is assembled in `.tmp/` on the same filesystem, verified,
//! extracted, given its manifest last, then renamed into place: a crash
//! leaves either nothing or a complete release. A cached release is
//! re-verified against its manifest (assets and extracted files) the first
//! time it is used after start, and discarded and fetched again on mismatch.

mod entries;
mod manifest;
mod prepare;
mod staging;
mod verify;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::release::{METADATA_FILE, MetadataError, ReleaseId, ReleaseMetadata};

use super::archive::{self, ArchiveError, ExtractLimits};
use super::{AssetInfo, ListedRelease, NoProgress, Progress, ReleaseSource, SHA256SUMS, SourceError, parse_sha256sums};

use crate::source::verify::policy::ReleasePolicy;
pub use entries::{CacheEntry, entries_under};
pub(crate) use manifest::hash_file;
pub use manifest::{CachedAsset, Manifest, SignatureRecord, Verification, VerifiedBy, load_manifest};
use manifest::{MANIFEST_FORMAT, extracted_digest, write_manifest};
pub use prepare::Prepare;
use staging::{Staging, only_chart_dir};
use verify::{check_policy, check_signatures, fetch_asset};

/// The manifest file of a cached release.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Where the cluster-class tarball is extracted, inside a release directory.
pub const CLUSTER_CLASS_DIR: &str = "cluster-class";
/// Where the cluster-addon tarball is extracted, inside a release directory.
pub const CLUSTER_ADDON_DIR: &str = "cluster-addon";
/// Work in progress, inside the cache directory.
pub const TMP_DIR: &str = ".tmp";
/// Small assets fetched when the release has them.
const OPTIONAL_ASSETS: &[&str] = &["clusteraddon.yaml", "cluster-addon-values.yaml", "node-images.yaml", "hashes.json"];

/// What a fetch accepts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FetchPolicy {
    /// Refuse a release for which some asset has no known digest.
    pub require_verified: bool,
}

/// A release ready to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedRelease {
    pub id: ReleaseId,
    /// `<cache>/<source-key>/<tag>`.
    pub dir: PathBuf,
    pub verification: Verification,
    /// The cached assets with their digests.
    pub assets: Vec<CachedAsset>,
    /// The source's name.
    pub source: String,
    /// Whether this fetch downloaded it (false: it was in the cache).
    pub downloaded: bool,
    manifest: Manifest,
}

impl FetchedRelease {
    /// The release's tag.
    pub fn tag(&self) -> &str {
        &self.manifest.tag
    }

    /// The parsed `metadata.yaml`, checked to belong to this release.
    pub fn metadata(&self) -> Result<ReleaseMetadata, CacheError> {
        let path = self.dir.join(METADATA_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| CacheError::io("cannot read", &path, e))?;
        let file = path.display().to_string();
        let metadata = ReleaseMetadata::parse(&file, &text)?;
        metadata.check_matches(&file, &self.id)?;
        Ok(metadata)
    }

    /// The cluster-class Helm chart: `<dir>/cluster-class/<p>-<n>-<maj>-<min>-cluster-class/`.
    pub fn cluster_class_chart_dir(&self) -> PathBuf {
        self.dir.join(&self.manifest.cluster_class_chart)
    }

    /// The extracted cluster-addon tarball, when the release has one.
    pub fn cluster_addon_dir(&self) -> Option<PathBuf> {
        self.manifest.cluster_addon_asset.as_ref().map(|_| self.dir.join(CLUSTER_ADDON_DIR))
    }

    /// The path of a cached asset (`clusteraddon.yaml`, `node-images.yaml`...), when the release has it.
    pub fn asset_path(&self, name: &str) -> Option<PathBuf> {
        self.assets.iter().any(|a| a.name == name).then(|| self.dir.join(name))
    }

    /// The sha256 of a cached asset.
    pub fn digest(&self, name: &str) -> Option<&str> {
        self.assets.iter().find(|a| a.name == name).map(|a| a.sha256.as_str())
    }

    /// The manifest as written.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }
}

/// Why a release could not be made available.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// Listing or downloading failed, or an asset does not match its digest or size.
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("release {release} of {source_name} has no asset {asset}")]
    MissingAsset { source_name: String, release: String, asset: String },
    #[error("release {release} of {source_name}: {asset} is malformed: {message}")]
    BadSha256Sums { source_name: String, release: String, asset: String, message: String },
    #[error(
        "release {release} of {source_name} is unverified (no digest for {assets}) and verified releases are required"
    )]
    Unverified { source_name: String, release: String, assets: String },
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error("release {release}: the cluster-class tarball {asset} holds no chart (expected {expected}/Chart.yaml)")]
    NoChart { release: String, asset: String, expected: String },
    /// [`Prepare`] failed (e.g. a chart dependency that cannot be resolved).
    #[error("release {release}: {message}")]
    Prepare { release: String, message: String },
    #[error("cached release {dir} is not intact: {message}")]
    Corrupt { dir: PathBuf, message: String },
    #[error("{context}: {path}")]
    Io {
        context: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} {name:?} cannot name a cache directory")]
    BadName { what: &'static str, name: String },
    #[error("background task failed: {0}")]
    Task(String),
    /// The release's signatures do not satisfy the policy: it was not extracted.
    #[error("release {release} of {source_name}: {failure}")]
    Signature { source_name: String, release: String, failure: crate::source::verify::Failure },
}

impl CacheError {
    fn io(context: &'static str, path: &Path, source: std::io::Error) -> Self {
        CacheError::Io { context, path: path.to_path_buf(), source }
    }
}

/// The cache directory. Cheap to share behind an `Arc`; one per process.
#[derive(Debug)]
pub struct ReleaseCache {
    root: PathBuf,
    limits: ExtractLimits,
    /// One async lock per `<source-key>/<tag>`: the same release is never
    /// fetched twice at once, different releases proceed in parallel.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Releases verified since this cache was opened.
    checked: Mutex<HashSet<String>>,
    /// Work on each release before it is cached.
    prepare: Option<Arc<dyn Prepare>>,
}

impl ReleaseCache {
    /// Opens (creating) the cache in `dir` and empties its `.tmp/`, which only
    /// an interrupted run can have left behind.
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self, CacheError> {
        Self::with_limits(dir, ExtractLimits::default())
    }

    /// Like [`new`](Self::new), with other extraction limits.
    pub fn with_limits(dir: impl Into<PathBuf>, limits: ExtractLimits) -> Result<Self, CacheError> {
        let root = dir.into();
        std::fs::create_dir_all(&root).map_err(|e| CacheError::io("cannot create the cache directory", &root, e))?;
        let tmp = root.join(TMP_DIR);
        if tmp.exists() {
            if std::fs::read_dir(&tmp).map(|mut d| d.next().is_some()).unwrap_or(true) {
                tracing::info!(dir = %tmp.display(), "removing leftovers of an interrupted run");
            }
            std::fs::remove_dir_all(&tmp).map_err(|e| CacheError::io("cannot clean", &tmp, e))?;
        }
        std::fs::create_dir_all(&tmp).map_err(|e| CacheError::io("cannot create", &tmp, e))?;
        Ok(Self { root, limits, locks: Mutex::default(), checked: Mutex::default(), prepare: None })
    }

    /// The same cache, running `prepare` on each release it downloads.
    pub fn with_prepare(mut self, prepare: Arc<dyn Prepare>) -> Self {
        self.prepare = Some(prepare);
        self
    }

    /// The cache directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the release `tag` of the source with `source_key` lives (or would).
    pub fn release_dir(&self, source_key: &str, tag: &str) -> PathBuf {
        self.root.join(source_key).join(tag)
    }

    /// Makes `release` of `source` available, verified and extracted.
    pub async fn fetch(
        &self,
        source: &impl ReleaseSource,
        release: &ListedRelease,
        policy: FetchPolicy,
    ) -> Result<FetchedRelease, CacheError> {
        self.fetch_with_progress(source, release, policy, &NoProgress).await
    }

    /// [`fetch`](Self::fetch), reporting download progress.
    pub async fn fetch_with_progress(
        &self,
        source: &impl ReleaseSource,
        release: &ListedRelease,
        policy: FetchPolicy,
        progress: &dyn Progress,
    ) -> Result<FetchedRelease, CacheError> {
        self.fetch_signed(source, release, policy, None, progress).await
    }

    /// [`fetch`](Self::fetch) with a signature policy: the release is downloaded, its signatures
    /// verified, and only then extracted. A cached copy verified under another policy (or none) is
    /// fetched and verified again.
    pub async fn fetch_signed(
        &self,
        source: &impl ReleaseSource,
        release: &ListedRelease,
        policy: FetchPolicy,
        signature: Option<&ReleasePolicy>,
        progress: &dyn Progress,
    ) -> Result<FetchedRelease, CacheError> {
        let key = source.cache_key();
        check_key(&key)?;
        check_component("tag", &release.tag)?;
        let lock_key = format!("{key}/{}", release.tag);
        let lock = self.lock_for(&lock_key);
        let _guard = lock.lock().await;

        let dir = self.release_dir(&key, &release.tag);
        if let Some(fetched) = self.use_cached(&lock_key, &dir, release, signature).await? {
            return check_policy(fetched, policy, &source.name());
        }
        let fetched = self.download(source, release, policy, signature, progress, &dir).await?;
        self.mark_checked(&lock_key, true);
        Ok(fetched)
    }

    /// Release `tag` (`id`) of `source` when the cache holds it intact (checked in full the
    /// first time, as [`fetch`](Self::fetch) checks it); `None` when it is not there, or was
    /// damaged and has been discarded. Needs no listing: a restarted operator opens what it
    /// verified before without asking the source.
    pub async fn open(
        &self,
        source: &impl ReleaseSource,
        id: &ReleaseId,
        tag: &str,
    ) -> Result<Option<FetchedRelease>, CacheError> {
        self.open_signed(source, id, tag, None).await
    }

    /// [`open`](Self::open), only when the cached copy was verified under `signature` (with a
    /// policy); otherwise it is discarded, to be fetched and verified again.
    pub async fn open_signed(
        &self,
        source: &impl ReleaseSource,
        id: &ReleaseId,
        tag: &str,
        signature: Option<&ReleasePolicy>,
    ) -> Result<Option<FetchedRelease>, CacheError> {
        let key = source.cache_key();
        check_key(&key)?;
        check_component("tag", tag)?;
        let lock_key = format!("{key}/{tag}");
        let lock = self.lock_for(&lock_key);
        let _guard = lock.lock().await;
        // The cache needs only the identity to open a release that is already there.
        let listed = ListedRelease { id: id.clone(), tag: tag.to_string(), prerelease: false, assets: Vec::new() };
        self.use_cached(&lock_key, &self.release_dir(&key, tag), &listed, signature).await
    }

    /// Every verified release in the cache: its source key, tag and size on disk.
    pub fn entries(&self) -> Vec<CacheEntry> {
        entries_under(&self.root)
    }

    /// Removes the releases of `source_key` whose tags are not in `keep`;
    /// returns the removed tags.
    pub async fn prune(&self, source_key: &str, keep: &[String]) -> Result<Vec<String>, CacheError> {
        check_key(source_key)?;
        let base = self.root.join(source_key);
        let entries = match std::fs::read_dir(&base) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(CacheError::io("cannot read", &base, e)),
        };
        let mut tags = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| CacheError::io("cannot read", &base, e))?;
            if !entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                continue;
            }
            if let Some(tag) = entry.file_name().to_str()
                && !keep.iter().any(|k| k == tag)
            {
                tags.push(tag.to_string());
            }
        }
        tags.sort();
        for tag in &tags {
            let lock_key = format!("{source_key}/{tag}");
            let lock = self.lock_for(&lock_key);
            let _guard = lock.lock().await;
            self.discard(&base.join(tag)).await?;
            self.mark_checked(&lock_key, false);
            tracing::info!(source_key, tag, "pruned cached release");
        }
        Ok(tags)
    }

    fn lock_for(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(key.to_string()).or_default().clone()
    }

    fn mark_checked(&self, key: &str, checked: bool) {
        let mut set = self.checked.lock().unwrap_or_else(|p| p.into_inner());
        if checked {
            set.insert(key.to_string());
        } else {
            set.remove(key);
        }
    }

    fn is_checked(&self, key: &str) -> bool {
        self.checked.lock().unwrap_or_else(|p| p.into_inner()).contains(key)
    }

    /// The cached release, if it is there and intact; a damaged one is discarded.
    async fn use_cached(
        &self,
        lock_key: &str,
        dir: &Path,
        release: &ListedRelease,
        signature: Option<&ReleasePolicy>,
    ) -> Result<Option<FetchedRelease>, CacheError> {
        if !dir.exists() {
            self.mark_checked(lock_key, false);
            return Ok(None);
        }
        let full_check = !self.is_checked(lock_key);
        let owned_dir = dir.to_path_buf();
        let checked = tokio::task::spawn_blocking(move || load_manifest(&owned_dir, full_check))
            .await
            .map_err(|e| CacheError::Task(e.to_string()))?;
        match checked {
            Ok(manifest)
                if signature.is_some_and(|p| manifest.signature.as_ref().is_none_or(|s| s.policy != p.fingerprint)) =>
            {
                tracing::info!(dir = %dir.display(), "cached release not verified under this signature policy; fetching again");
                self.discard(dir).await?;
                self.mark_checked(lock_key, false);
                Ok(None)
            }
            Ok(manifest) if manifest.tag == release.tag => {
                self.mark_checked(lock_key, true);
                Ok(Some(FetchedRelease {
                    id: release.id.clone(),
                    dir: dir.to_path_buf(),
                    verification: manifest.verification,
                    assets: manifest.assets.clone(),
                    source: manifest.source.clone(),
                    downloaded: false,
                    manifest,
                }))
            }
            Ok(manifest) => {
                tracing::warn!(dir = %dir.display(), tag = manifest.tag, "cached release has another tag; fetching again");
                self.discard(dir).await?;
                self.mark_checked(lock_key, false);
                Ok(None)
            }
            Err(err) => {
                tracing::warn!(dir = %dir.display(), %err, "cached release failed verification; fetching again");
                self.discard(dir).await?;
                self.mark_checked(lock_key, false);
                Ok(None)
            }
        }
    }

    /// Moves `dir` out of the cache (atomic), then deletes it off the async workers.
    async fn discard(&self, dir: &Path) -> Result<(), CacheError> {
        let trash = self.root.join(TMP_DIR).join(format!("discard-{:016x}", rand::random::<u64>()));
        let dir = dir.to_path_buf();
        tokio::task::spawn_blocking(move || {
            match std::fs::rename(&dir, &trash) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(CacheError::io("cannot remove cached release", &dir, e)),
            }
            std::fs::remove_dir_all(&trash).map_err(|e| CacheError::io("cannot delete", &trash, e))
        })
        .await
        .map_err(|e| CacheError::Task(e.to_string()))?
    }

    async fn download(
        &self,
        source: &impl ReleaseSource,
        release: &ListedRelease,
        policy: FetchPolicy,
        signature: Option<&ReleasePolicy>,
        progress: &dyn Progress,
        final_dir: &Path,
    ) -> Result<FetchedRelease, CacheError> {
        let source_name = source.name();
        let tag = release.tag.clone();
        let staging = Staging::create(self.root.join(TMP_DIR).join(format!("{tag}-{:016x}", rand::random::<u64>())))?;
        let missing = |asset: &str| CacheError::MissingAsset {
            source_name: source_name.clone(),
            release: tag.clone(),
            asset: asset.to_string(),
        };

        // SHA256SUMS first: it vouches for the others.
        let mut assets: Vec<CachedAsset> = Vec::new();
        let mut sums = BTreeMap::new();
        if let Some(asset) = release.asset(SHA256SUMS) {
            let cached = fetch_asset(source, release, asset, &staging.path, progress, &BTreeMap::new()).await?;
            let path = staging.path.join(SHA256SUMS);
            let text = std::fs::read_to_string(&path).map_err(|e| CacheError::io("cannot read", &path, e))?;
            sums = parse_sha256sums(&text).map_err(|message| CacheError::BadSha256Sums {
                source_name: source_name.clone(),
                release: tag.clone(),
                asset: SHA256SUMS.to_string(),
                message,
            })?;
            assets.push(cached);
        }

        let metadata_asset = release.asset(METADATA_FILE).ok_or_else(|| missing(METADATA_FILE))?;
        let metadata_cached = fetch_asset(source, release, metadata_asset, &staging.path, progress, &sums).await?;
        let metadata_path = staging.path.join(METADATA_FILE);
        let text =
            std::fs::read_to_string(&metadata_path).map_err(|e| CacheError::io("cannot read", &metadata_path, e))?;
        let file = format!("{tag}/{METADATA_FILE}");
        let metadata = ReleaseMetadata::parse(&file, &text)?;
        metadata.check_matches(&file, &release.id)?;
        assets.push(metadata_cached);

        let prefix = format!("{}-{}-{}", release.id.provider, release.id.name, release.id.kubernetes.dashed());
        let class_asset = [release.id.version.dotted(), release.id.version.dashed()]
            .iter()
            .find_map(|v| release.asset(&format!("{prefix}-cluster-class-{v}.tgz")))
            .ok_or_else(|| missing(&format!("{prefix}-cluster-class-{}.tgz", release.id.version.dotted())))?;
        let addon_version = &metadata.versions.components.cluster_addon;
        let addon_asset = [addon_version.dotted(), addon_version.dashed()]
            .iter()
            .find_map(|v| release.asset(&format!("{prefix}-cluster-addon-{v}.tgz")));
        if addon_asset.is_none() {
            tracing::warn!(release = tag, version = %addon_version, "release has no cluster-addon tarball");
        }

        let mut wanted: Vec<&AssetInfo> = vec![class_asset];
        wanted.extend(addon_asset);
        wanted.extend(OPTIONAL_ASSETS.iter().filter_map(|name| release.asset(name)));
        // The Sigstore bundles of what is fetched, when the release has them: small, and kept so
        // a cached release can be verified again.
        let bundles: Vec<&AssetInfo> = [SHA256SUMS, METADATA_FILE]
            .into_iter()
            .chain(wanted.iter().map(|a| a.name.as_str()))
            .filter_map(|name| release.asset(&format!("{name}{}", crate::source::verify::BUNDLE_SUFFIX)))
            .collect();
        for asset in wanted.into_iter().chain(bundles) {
            assets.push(fetch_asset(source, release, asset, &staging.path, progress, &sums).await?);
        }

        let unverified: Vec<&str> = assets
            .iter()
            // A bundle vouches for itself (it is verified against its artifact, when asked for).
            .filter(|a| a.name != SHA256SUMS && a.verified_by == VerifiedBy::None)
            .filter(|a| !crate::source::verify::policy::is_signature_asset(&a.name))
            .map(|a| a.name.as_str())
            .collect();
        let verification = if unverified.is_empty() { Verification::Verified } else { Verification::Unverified };
        if verification == Verification::Unverified {
            if policy.require_verified {
                return Err(CacheError::Unverified { source_name, release: tag, assets: unverified.join(", ") });
            }
            tracing::warn!(
                release = tag,
                source = source_name,
                assets = unverified.join(", "),
                "release is unverified: no digest for some assets"
            );
        }

        // Signatures before anything is extracted: a release that fails them is never unpacked.
        let signature = match signature {
            Some(p) => Some(check_signatures(source, release, p, &assets, &sums, &staging.path).await?),
            None => None,
        };

        // Extraction and hashing are blocking work.
        let limits = self.limits;
        let staging_path = staging.path.clone();
        let class_name = class_asset.name.clone();
        let addon_name = addon_asset.map(|a| a.name.clone());
        let chart_rel = format!("{CLUSTER_CLASS_DIR}/{prefix}-cluster-class");
        let release_tag = tag.clone();
        let (prepare, id) = (self.prepare.clone(), release.id.clone());
        let manifest = tokio::task::spawn_blocking(move || -> Result<Manifest, CacheError> {
            archive::extract_tgz(&staging_path.join(&class_name), &staging_path.join(CLUSTER_CLASS_DIR), &limits)?;
            if let Some(addon) = &addon_name {
                archive::extract_tgz(&staging_path.join(addon), &staging_path.join(CLUSTER_ADDON_DIR), &limits)?;
            }
            let chart_rel = if staging_path.join(&chart_rel).join("Chart.yaml").is_file() {
                chart_rel
            } else if staging_path.join(CLUSTER_CLASS_DIR).join("Chart.yaml").is_file() {
                CLUSTER_CLASS_DIR.to_string()
            } else if let Some(only) = only_chart_dir(&staging_path.join(CLUSTER_CLASS_DIR)) {
                // `helm package` names the top directory after the chart: take the one chart there.
                format!("{CLUSTER_CLASS_DIR}/{only}")
            } else {
                return Err(CacheError::NoChart { release: release_tag, asset: class_name, expected: chart_rel });
            };
            if let Some(prepare) = &prepare {
                let addons = addon_name.as_ref().map(|_| staging_path.join(CLUSTER_ADDON_DIR));
                prepare
                    .prepare(&id, &staging_path, &staging_path.join(&chart_rel), addons.as_deref())
                    .map_err(|message| CacheError::Prepare { release: release_tag.clone(), message })?;
            }
            let manifest = Manifest {
                format: MANIFEST_FORMAT,
                source: source_name,
                tag: release_tag,
                verification,
                assets,
                cluster_class_asset: class_name,
                cluster_class_chart: chart_rel,
                cluster_addon_asset: addon_name,
                extracted_sha256: extracted_digest(&staging_path)?,
                signature,
            };
            write_manifest(&staging_path, &manifest)?;
            Ok(manifest)
        })
        .await
        .map_err(|e| CacheError::Task(e.to_string()))??;

        if let Some(parent) = final_dir.parent() {
            std::fs::create_dir_all(parent).map_err(|e| CacheError::io("cannot create", parent, e))?;
        }
        std::fs::rename(&staging.path, final_dir)
            .map_err(|e| CacheError::io("cannot move the release into the cache", final_dir, e))?;
        staging.disarm();
        if let Some(parent) = final_dir.parent() {
            // Make the rename durable; a failure here only weakens crash safety.
            let _ = std::fs::File::open(parent).and_then(|d| d.sync_all());
        }
        tracing::info!(release = manifest.tag, source = manifest.source, %verification, dir = %final_dir.display(), "release cached");
        Ok(FetchedRelease {
            id: release.id.clone(),
            dir: final_dir.to_path_buf(),
            verification,
            assets: manifest.assets.clone(),
            source: manifest.source.clone(),
            downloaded: true,
            manifest,
        })
    }
}

/// A source key is `/`-separated safe components.
fn check_key(key: &str) -> Result<(), CacheError> {
    if key.is_empty() {
        return Err(CacheError::BadName { what: "source key", name: key.to_string() });
    }
    for part in key.split('/') {
        check_component("source key", part)
            .map_err(|_| CacheError::BadName { what: "source key", name: key.into() })?;
    }
    Ok(())
}

fn check_component(what: &'static str, name: &str) -> Result<(), CacheError> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.starts_with('.')
        && !name.contains(['/', '\\', '\0'])
        && name != MANIFEST_FILE
        && name != CLUSTER_CLASS_DIR
        && name != CLUSTER_ADDON_DIR;
    if ok { Ok(()) } else { Err(CacheError::BadName { what, name: name.to_string() }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_escape_the_cache_are_refused() {
        for bad in ["", ".", "..", "a/b", ".tmp", "manifest.json", "cluster-class"] {
            assert!(check_component("tag", bad).is_err(), "{bad:?}");
        }
        assert!(check_component("tag", "docker-ferrol-1-27-v2").is_ok());
        assert!(check_key("github/o/r").is_ok());
        assert!(check_key("github/../r").is_err());
        assert!(check_key("/abs").is_err());
    }
}
