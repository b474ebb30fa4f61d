//! Builders for releases and archives (`support::releases`), used by the `source_*` tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use clusterstack::source::{
    AssetInfo, DirSource, DownloadedAsset, ListedRelease, Listing, Progress, ReleaseSource, SourceError,
};
use sha2::{Digest, Sha256};

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A gzip-compressed tar of regular files (directories implied by paths).
pub fn tgz(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, path, *data).unwrap();
    }
    gzip(&builder.into_inner().unwrap())
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// A raw tar entry, written without the `tar` crate's path checks so hostile
/// archives can be built.
pub struct RawEntry<'a> {
    pub name: &'a str,
    pub kind: tar::EntryType,
    pub link: Option<&'a str>,
    pub data: &'a [u8],
}

pub fn raw_tar(entries: &[RawEntry<'_>]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for e in entries {
        let mut header = tar::Header::new_old();
        {
            let old = header.as_old_mut();
            old.name[..e.name.len()].copy_from_slice(e.name.as_bytes());
            if let Some(link) = e.link {
                old.linkname[..link.len()].copy_from_slice(link.as_bytes());
            }
        }
        header.set_entry_type(e.kind);
        header.set_mode(0o644);
        header.set_size(e.data.len() as u64);
        header.set_cksum();
        builder.append(&header, e.data).unwrap();
    }
    gzip(&builder.into_inner().unwrap())
}

/// How to build a test release.
#[derive(Clone)]
pub struct ReleaseOpts {
    pub provider: &'static str,
    pub name: &'static str,
    pub k8s: (u32, u32),
    /// Dot form, e.g. `v2`.
    pub version: &'static str,
    /// Dot form of `clusterAddon` in metadata.yaml.
    pub addon_version: &'static str,
    pub sha256sums: bool,
    pub metadata: bool,
    pub class: bool,
    pub addon: bool,
    /// Content of the chart's values.yaml (to tell releases apart).
    pub values: String,
    /// The cluster-class chart's one template.
    pub class_template: String,
}

impl Default for ReleaseOpts {
    fn default() -> Self {
        Self {
            provider: "docker",
            name: "ferrol",
            k8s: (1, 27),
            version: "v2",
            addon_version: "v2",
            sha256sums: true,
            metadata: true,
            class: true,
            addon: true,
            values: "replicas: 1\n".into(),
            class_template: "kind: ClusterClass\n".into(),
        }
    }
}

impl ReleaseOpts {
    pub fn prefix(&self) -> String {
        format!("{}-{}-{}-{}", self.provider, self.name, self.k8s.0, self.k8s.1)
    }

    pub fn tag(&self) -> String {
        format!("{}-{}", self.prefix(), self.version.replace('.', "-"))
    }

    pub fn class_asset(&self) -> String {
        format!("{}-cluster-class-{}.tgz", self.prefix(), self.version)
    }

    pub fn addon_asset(&self) -> String {
        format!("{}-cluster-addon-{}.tgz", self.prefix(), self.addon_version)
    }
}

/// Writes a release into `parent/<tag>/` and returns that directory.
pub fn write_release(parent: &Path, opts: &ReleaseOpts) -> PathBuf {
    let dir = parent.join(opts.tag());
    std::fs::create_dir_all(&dir).unwrap();
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    if opts.metadata {
        let metadata = format!(
            "apiVersion: metadata.clusterstack.x-k8s.io/v1alpha1\nversions:\n  clusterStack: {}\n  kubernetes: v{}.{}.5\n  components:\n    clusterAddon: {}\n",
            opts.version, opts.k8s.0, opts.k8s.1, opts.addon_version
        );
        files.push(("metadata.yaml".into(), metadata.into_bytes()));
    }
    if opts.class {
        let top = format!("{}-cluster-class", opts.prefix());
        let chart = format!("apiVersion: v2\nname: {top}\nversion: {}\n", opts.version);
        files.push((
            opts.class_asset(),
            tgz(&[
                (&format!("{top}/Chart.yaml"), chart.as_bytes()),
                (&format!("{top}/values.yaml"), opts.values.as_bytes()),
                (&format!("{top}/templates/cluster-class.yaml"), opts.class_template.as_bytes()),
            ]),
        ));
    }
    if opts.addon {
        files.push((opts.addon_asset(), tgz(&[("cni/Chart.yaml", b"name: cni\n"), ("cni/values.yaml", b"a: 1\n")])));
    }
    files.push(("clusteraddon.yaml".into(), b"apiVersion: clusteraddonconfig.x-k8s.io/v1alpha1\n".to_vec()));
    files.push(("hashes.json".into(), b"{\"clusterStack\": \"abc\"}".to_vec()));
    files.push(("README.unknown".into(), b"ignored asset\n".to_vec()));
    let mut sums = String::new();
    for (name, data) in &files {
        std::fs::write(dir.join(name), data).unwrap();
        sums.push_str(&format!("{}  {name}\n", sha256_hex(data)));
    }
    if opts.sha256sums {
        std::fs::write(dir.join("SHA256SUMS"), sums).unwrap();
    }
    dir
}

/// A source wrapping a directory that counts downloads, tracks how many run
/// at once, sleeps in each, and can rewrite the listing.
#[derive(Debug)]
pub struct CountingSource {
    pub inner: DirSource,
    pub downloads: AtomicUsize,
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    pub delay: Duration,
    pub downloaded_names: Mutex<Vec<String>>,
}

impl CountingSource {
    pub fn new(dir: &Path, delay: Duration) -> Self {
        Self {
            inner: DirSource::new(dir).unwrap(),
            downloads: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            delay,
            downloaded_names: Mutex::new(Vec::new()),
        }
    }

    pub fn downloads(&self) -> usize {
        self.downloads.load(Ordering::SeqCst)
    }
}

impl ReleaseSource for CountingSource {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn cache_key(&self) -> String {
        self.inner.cache_key()
    }

    async fn list(&self) -> Result<Listing, SourceError> {
        self.inner.list().await
    }

    async fn download(
        &self,
        release: &ListedRelease,
        asset: &AssetInfo,
        dest: &Path,
        progress: &dyn Progress,
    ) -> Result<DownloadedAsset, SourceError> {
        self.downloads.fetch_add(1, Ordering::SeqCst);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        self.downloaded_names.lock().unwrap().push(format!("{}/{}", release.tag, asset.name));
        tokio::time::sleep(self.delay).await;
        let result = self.inner.download(release, asset, dest, progress).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

/// The listed release with `tag`.
pub async fn listed(source: &impl ReleaseSource, tag: &str) -> ListedRelease {
    let listing = source.list().await.unwrap();
    listing.releases.into_iter().find(|r| r.tag == tag).unwrap_or_else(|| panic!("{tag} not listed"))
}
