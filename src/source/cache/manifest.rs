//! `manifest.json`: what a cached release holds and how it was verified, and the re-check of
//! a cached release against it (assets and extracted files, hashed again).

use std::io::{Read, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{CLUSTER_ADDON_DIR, CLUSTER_CLASS_DIR, CacheError, MANIFEST_FILE, check_component};

pub(super) const MANIFEST_FORMAT: u32 = 1;

/// Whether every asset of a release was checked against a known digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verification {
    /// Every asset matched a digest announced by the source or listed in `SHA256SUMS`.
    Verified,
    /// Some asset had no digest to check against (its size was still checked).
    Unverified,
}

impl std::fmt::Display for Verification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verification::Verified => "verified",
            Verification::Unverified => "unverified",
        })
    }
}

/// Against what an asset was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifiedBy {
    /// The digest the source announced (GitHub's `digest`, or a directory's `SHA256SUMS`).
    Digest,
    /// The release's `SHA256SUMS` asset.
    Sha256sums,
    /// Both.
    DigestAndSha256sums,
    /// Nothing but its size.
    None,
}

/// One asset as cached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CachedAsset {
    pub name: String,
    pub size: u64,
    /// Lowercase hex.
    pub sha256: String,
    pub verified_by: VerifiedBy,
}

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// The source's name, e.g. `github:owner/repo`.
    pub source: String,
    pub tag: String,
    pub verification: Verification,
    pub assets: Vec<CachedAsset>,
    /// The asset extracted into `cluster-class/`.
    pub cluster_class_asset: String,
    /// The chart directory, relative to the release directory.
    pub cluster_class_chart: String,
    /// The asset extracted into `cluster-addon/`, when the release has one.
    pub cluster_addon_asset: Option<String>,
    /// sha256 over the extracted files (paths and contents), to detect tampering.
    pub extracted_sha256: String,
    /// The signature policy the release was verified under, when one was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<SignatureRecord>,
}

/// A release's signatures, as verified before it was extracted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignatureRecord {
    /// The policy's fingerprint ([`crate::source::verify::policy::ReleasePolicy::fingerprint`]).
    pub policy: String,
    /// Who signed (the certificate's identity, or `key`).
    pub signer: String,
    /// The trusted root that vouched.
    pub root: String,
}

/// Reads a release's manifest; with `full`, also re-hashes every asset and
/// the extracted files against it.
pub fn load_manifest(dir: &Path, full: bool) -> Result<Manifest, CacheError> {
    let corrupt = |message: String| CacheError::Corrupt { dir: dir.to_path_buf(), message };
    let path = dir.join(MANIFEST_FILE);
    let bytes = std::fs::read(&path).map_err(|e| corrupt(format!("{MANIFEST_FILE} is unreadable: {e}")))?;
    let manifest: Manifest =
        serde_json::from_slice(&bytes).map_err(|e| corrupt(format!("{MANIFEST_FILE} is invalid: {e}")))?;
    if manifest.format != MANIFEST_FORMAT {
        return Err(corrupt(format!("{MANIFEST_FILE} has format {}, expected {MANIFEST_FORMAT}", manifest.format)));
    }
    // The chart path is joined onto the release directory: keep it inside.
    let chart_ok = manifest.cluster_class_chart == CLUSTER_CLASS_DIR
        || manifest
            .cluster_class_chart
            .strip_prefix(&format!("{CLUSTER_CLASS_DIR}/"))
            .is_some_and(|rest| check_component("chart directory", rest).is_ok());
    if !chart_ok {
        return Err(corrupt(format!(
            "{MANIFEST_FILE} names an invalid chart directory {:?}",
            manifest.cluster_class_chart
        )));
    }
    if !full {
        return Ok(manifest);
    }
    for asset in &manifest.assets {
        check_component("asset", &asset.name)?;
        let path = dir.join(&asset.name);
        let (size, sha256) =
            hash_file(&path).map_err(|e| corrupt(format!("asset {} is unreadable: {e}", asset.name)))?;
        if size != asset.size || sha256 != asset.sha256 {
            return Err(corrupt(format!(
                "asset {} changed: expected {} bytes sha256 {}, found {size} bytes sha256 {sha256}",
                asset.name, asset.size, asset.sha256
            )));
        }
    }
    let extracted = extracted_digest(dir)?;
    if extracted != manifest.extracted_sha256 {
        return Err(corrupt(format!(
            "extracted files changed: expected digest {}, found {extracted}",
            manifest.extracted_sha256
        )));
    }
    Ok(manifest)
}

pub(super) fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), CacheError> {
    let path = dir.join(MANIFEST_FILE);
    let json = serde_json::to_vec_pretty(manifest)
        .map_err(|e| CacheError::Corrupt { dir: dir.to_path_buf(), message: format!("cannot encode manifest: {e}") })?;
    let mut file = std::fs::File::create(&path).map_err(|e| CacheError::io("cannot write", &path, e))?;
    file.write_all(&json).and_then(|()| file.sync_all()).map_err(|e| CacheError::io("cannot write", &path, e))
}

/// Size and sha256 (hex) of a file, read in chunks.
pub(crate) fn hash_file(path: &Path) -> std::io::Result<(u64, String)> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((size, hex::encode(hasher.finalize())))
}

/// One digest over the extracted trees: every file's relative path and
/// sha256, in sorted order. Links (never created by extraction) count as
/// tampering.
pub(super) fn extracted_digest(release_dir: &Path) -> Result<String, CacheError> {
    let mut lines = Vec::new();
    for top in [CLUSTER_CLASS_DIR, CLUSTER_ADDON_DIR] {
        let root = release_dir.join(top);
        if root.exists() {
            walk(&root, top, &mut lines)?;
        }
    }
    lines.sort();
    let mut hasher = Sha256::new();
    for line in &lines {
        hasher.update(line.as_bytes());
        hasher.update(b"\n");
    }
    Ok(hex::encode(hasher.finalize()))
}

fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) -> Result<(), CacheError> {
    let corrupt = |message: String| CacheError::Corrupt { dir: dir.to_path_buf(), message };
    for entry in std::fs::read_dir(dir).map_err(|e| CacheError::io("cannot read", dir, e))? {
        let entry = entry.map_err(|e| CacheError::io("cannot read", dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let child_rel = format!("{rel}/{name}");
        let kind = entry.file_type().map_err(|e| CacheError::io("cannot read", &entry.path(), e))?;
        if kind.is_dir() {
            out.push(format!("d {child_rel}"));
            walk(&entry.path(), &child_rel, out)?;
        } else if kind.is_file() {
            let (_, sha) = hash_file(&entry.path()).map_err(|e| CacheError::io("cannot read", &entry.path(), e))?;
            out.push(format!("f {child_rel} {sha}"));
        } else {
            return Err(corrupt(format!("{child_rel} is not a regular file or directory")));
        }
    }
    Ok(())
}
