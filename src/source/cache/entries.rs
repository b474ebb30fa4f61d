//! What the cache holds, as the garbage collector and `releases --cached` see it: every complete
//! release (one with a manifest) and its size on disk.

use std::path::Path;

use super::{MANIFEST_FILE, TMP_DIR};

/// One release in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheEntry {
    /// The source's cache key, e.g. `github/owner/repo`.
    pub source_key: String,
    pub tag: String,
    /// Bytes of its files.
    pub bytes: u64,
}

fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// Every verified release in the cache directory `root` (see [`ReleaseCache::entries`]).
pub fn entries_under(root: &Path) -> Vec<CacheEntry> {
    let mut out = Vec::new();
    collect_entries(root, root, &mut out);
    out.sort_by(|a, b| (&a.source_key, &a.tag).cmp(&(&b.source_key, &b.tag)));
    out
}

fn collect_entries(root: &Path, dir: &Path, out: &mut Vec<CacheEntry>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let path = e.path();
        if !e.file_type().is_ok_and(|t| t.is_dir()) || e.file_name() == TMP_DIR {
            continue;
        }
        if path.join(MANIFEST_FILE).is_file() {
            let (Some(tag), Some(parent)) = (e.file_name().to_str().map(str::to_owned), path.parent()) else {
                continue;
            };
            let Ok(rel) = parent.strip_prefix(root) else { continue };
            let source_key = rel.components().filter_map(|c| c.as_os_str().to_str()).collect::<Vec<_>>().join("/");
            out.push(CacheEntry { source_key, tag, bytes: dir_bytes(&path) });
        } else {
            collect_entries(root, &path, out);
        }
    }
}
