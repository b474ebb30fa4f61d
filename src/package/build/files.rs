//! A release's files, reproducibly: collected from a directory (symlinks refused), fingerprinted,
//! its charts stamped with the release version, and packed as a `.tgz` whose bytes depend only
//! on the content (sorted entries, fixed mtime, owner and modes).

use std::collections::BTreeMap;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::{BuildError, io_err};
use crate::release::StackVersion;
use crate::render;

/// Every tar entry's modification time: fixed, so the bytes only depend on the content.
const FIXED_MTIME: u64 = 0;

/// Every file below `dir` by its `/`-separated relative path (sorted).
/// Symlinks are refused: they would make the content depend on the machine.
pub fn collect_files(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, BuildError> {
    fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, Vec<u8>>) -> Result<(), BuildError> {
        for entry in std::fs::read_dir(dir).map_err(io_err("cannot read", dir))? {
            let entry = entry.map_err(io_err("cannot read", dir))?;
            let path = entry.path();
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            let file_type = entry.file_type().map_err(io_err("cannot inspect", &path))?;
            if file_type.is_symlink() {
                return Err(BuildError::Symlink { path });
            } else if file_type.is_dir() {
                walk(&path, &format!("{name}/"), out)?;
            } else {
                out.insert(name, std::fs::read(&path).map_err(io_err("cannot read", &path))?);
            }
        }
        Ok(())
    }
    let mut out = BTreeMap::new();
    walk(dir, "", &mut out)?;
    Ok(out)
}

/// sha256 over the sorted (path, length, content) of every file.
pub(super) fn hash_files(files: &BTreeMap<String, Vec<u8>>) -> String {
    let mut hasher = Sha256::new();
    for (name, bytes) in files {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    hex::encode(hasher.finalize())
}

/// Writes `version` into the top-level `version:` line of every `Chart.yaml`
/// (keeping comments), so a packaged chart names the version it ships in.
pub(super) fn rewrite_charts(
    mut files: BTreeMap<String, Vec<u8>>,
    version: &StackVersion,
) -> BTreeMap<String, Vec<u8>> {
    for (name, bytes) in files.iter_mut() {
        if name != render::CHART_FILE && !name.ends_with(&format!("/{}", render::CHART_FILE)) {
            continue;
        }
        set_version_line(bytes, version);
    }
    files
}

/// Replaces the top-level `version:` line of one `Chart.yaml` (appends one when there is none),
/// keeping every other line, comments included.
pub(crate) fn set_version_line(bytes: &mut Vec<u8>, version: &StackVersion) {
    let text = String::from_utf8_lossy(bytes);
    let mut found = false;
    let mut out: Vec<String> = text
        .lines()
        .map(|line| {
            if line.starts_with("version:") {
                found = true;
                format!("version: {version}")
            } else {
                line.to_string()
            }
        })
        .collect();
    if !found {
        out.push(format!("version: {version}"));
    }
    *bytes = (out.join("\n") + "\n").into_bytes();
}

/// A reproducible `.tgz` of `files` under `prefix`: sorted entries with their
/// parent directories, fixed mtime, owner and modes, gzip header without
/// name or mtime.
pub fn tarball(files: &BTreeMap<String, Vec<u8>>, prefix: &str) -> std::io::Result<Vec<u8>> {
    let mut entries: BTreeMap<String, Option<&[u8]>> = BTreeMap::new();
    for (name, bytes) in files {
        let full = format!("{prefix}{name}");
        let mut parent = full.as_str();
        while let Some((dir, _)) = parent.rsplit_once('/') {
            entries.insert(format!("{dir}/"), None);
            parent = dir;
        }
        entries.insert(full, Some(bytes.as_slice()));
    }
    let gz = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::default());
    let mut builder = tar::Builder::new(gz);
    for (path, content) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_mtime(FIXED_MTIME);
        header.set_uid(0);
        header.set_gid(0);
        header.set_username("root")?;
        header.set_groupname("root")?;
        match content {
            Some(bytes) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_mode(0o644);
                header.set_size(bytes.len() as u64);
                builder.append_data(&mut header, &path, bytes)?;
            }
            None => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(0o755);
                header.set_size(0);
                builder.append_data(&mut header, &path, std::io::empty())?;
            }
        }
    }
    builder.into_inner()?.finish()
}
