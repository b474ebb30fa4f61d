//! What one namespace may make the operator do with the file system: a ClusterStack's
//! `spec.source.directory` is read only inside the roots the operator is configured to allow
//! (`--allowed-directory-roots`; none by default, so directory sources are off), never inside the
//! operator's own release cache (another team's downloads), and only as an absolute path,
//! resolved with its symlinks before the check. The threat model is `docs/security.md`.
//!
//! Pure but for `canonicalize`: the checks run on the resolved path, so `..`, symlinks and bind
//! spellings cannot walk out. The directory source then keeps every file it lists inside its own
//! resolved root (`source::dir`), so a symlink inside an allowed directory cannot escape either.

use std::path::{Path, PathBuf};

/// Why a ClusterStack may not read a directory. The messages never quote file contents, and say
/// the same for a path that does not exist as for one outside the roots (no probing of the
/// operator's file system through conditions).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectoryRefused {
    /// No root is configured.
    #[error(
        "spec.source.directory {path:?} is refused: this operator reads no directory sources (its --allowed-directory-roots is empty); use a github or oci source, or ask the operator's administrator to allow a root"
    )]
    Off { path: String },
    /// A relative path: relative to what the operator's working directory happens to be.
    #[error("spec.source.directory {path:?} is refused: the path must be absolute")]
    Relative { path: String },
    /// Not inside any allowed root once resolved, or not an accessible directory.
    #[error(
        "spec.source.directory {path:?} is refused: it is not an accessible directory inside the allowed roots ({roots})"
    )]
    Outside { path: String, roots: String },
    /// Inside the operator's release cache.
    #[error("spec.source.directory {path:?} is refused: it is inside the operator's release cache")]
    Cache { path: String },
}

/// The directory roots ClusterStacks may read, resolved once at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirectoryRoots {
    /// Resolved roots; empty: directory sources are off.
    roots: Vec<PathBuf>,
    /// The resolved release cache, never readable as a source.
    cache: Option<PathBuf>,
}

impl DirectoryRoots {
    /// The roots as configured (each resolved; a root that does not exist is skipped with a
    /// warning, as it could be created later by anyone able to write its parent) and the cache.
    pub fn new(roots: &[PathBuf], cache_dir: &Path) -> Self {
        let mut resolved = Vec::new();
        for root in roots.iter().filter(|r| !r.as_os_str().is_empty()) {
            if !root.is_absolute() {
                tracing::warn!(root = %root.display(), "ignoring a relative --allowed-directory-roots entry");
                continue;
            }
            match std::fs::canonicalize(root) {
                Ok(r) => resolved.push(r),
                Err(e) => {
                    tracing::warn!(root = %root.display(), error = %e, "ignoring an allowed directory root that cannot be resolved")
                }
            }
        }
        // The cache may not exist yet: resolve what exists of it, lexically otherwise.
        let cache =
            std::fs::canonicalize(cache_dir).ok().or_else(|| cache_dir.is_absolute().then(|| cache_dir.to_path_buf()));
        Self { roots: resolved, cache }
    }

    /// Whether any root is allowed.
    pub fn enabled(&self) -> bool {
        !self.roots.is_empty()
    }

    /// The resolved path of `path` when a ClusterStack may read it.
    pub fn confine(&self, path: &str) -> Result<PathBuf, DirectoryRefused> {
        let given = Path::new(path);
        if self.roots.is_empty() {
            return Err(DirectoryRefused::Off { path: path.to_string() });
        }
        if !given.is_absolute() {
            return Err(DirectoryRefused::Relative { path: path.to_string() });
        }
        let outside = || DirectoryRefused::Outside {
            path: path.to_string(),
            roots: self.roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", "),
        };
        let resolved = std::fs::canonicalize(given).map_err(|_| outside())?;
        if let Some(cache) = &self.cache
            && (resolved.starts_with(cache) || cache.starts_with(&resolved))
        {
            // Containing the cache counts too: its entries are other teams' releases.
            return Err(DirectoryRefused::Cache { path: path.to_string() });
        }
        if !resolved.is_dir() || !self.roots.iter().any(|r| resolved.starts_with(r)) {
            return Err(outside());
        }
        Ok(resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _tmp: tempfile::TempDir,
        allowed: PathBuf,
        other: PathBuf,
        cache: PathBuf,
        roots: DirectoryRoots,
    }

    /// `<tmp>/allowed/team-b`, `<tmp>/other` and `<tmp>/allowed/cache` (the cache inside an
    /// allowed root, the worst case), roots `[<tmp>/allowed]`.
    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let allowed = tmp.path().join("allowed");
        let other = tmp.path().join("other");
        let cache = allowed.join("cache");
        for d in [allowed.join("team-b"), other.clone(), cache.join("github/acme/stacks")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let roots = DirectoryRoots::new(std::slice::from_ref(&allowed), &cache);
        Fixture { allowed: allowed.canonicalize().unwrap(), other, cache, roots, _tmp: tmp }
    }

    #[test]
    fn no_roots_means_directory_sources_are_off() {
        let f = fixture();
        let off = DirectoryRoots::new(&[], &f.cache);
        assert!(!off.enabled());
        let e = off.confine(f.allowed.join("team-b").to_str().unwrap()).unwrap_err();
        assert!(matches!(e, DirectoryRefused::Off { .. }), "{e}");
        assert!(e.to_string().contains("--allowed-directory-roots is empty"), "{e}");
        // An empty entry (`--allowed-directory-roots ""`) allows nothing either.
        assert!(!DirectoryRoots::new(&[PathBuf::new()], &f.cache).enabled());
    }

    #[test]
    fn a_directory_inside_a_root_is_allowed_and_resolved() {
        let f = fixture();
        assert!(f.roots.enabled());
        let spelled = format!("{}/team-b/../team-b/", f.allowed.display());
        assert_eq!(f.roots.confine(&spelled).unwrap(), f.allowed.join("team-b"));
    }

    #[test]
    fn a_directory_outside_the_roots_is_refused() {
        let f = fixture();
        for path in
            [f.other.display().to_string(), "/etc".into(), format!("{}/team-b/../../other", f.allowed.display())]
        {
            let e = f.roots.confine(&path).unwrap_err();
            assert!(matches!(e, DirectoryRefused::Outside { .. }), "{path}: {e}");
        }
        // A missing path reads the same as one outside: no probing of the file system.
        let missing = f.roots.confine(&format!("{}/nope", f.allowed.display())).unwrap_err();
        let outside = f.roots.confine(f.other.to_str().unwrap()).unwrap_err();
        assert_eq!(missing.to_string().split(" is refused").nth(1), outside.to_string().split(" is refused").nth(1));
    }

    #[test]
    fn a_symlink_out_of_the_roots_is_refused() {
        let f = fixture();
        let link = f.allowed.join("team-b/escape");
        symlink(&f.other, &link).unwrap();
        let e = f.roots.confine(link.to_str().unwrap()).unwrap_err();
        assert!(matches!(e, DirectoryRefused::Outside { .. }), "{e}");
        // The other way round, a link into a root from outside resolves inside: allowed.
        let inward = f.other.join("in");
        symlink(f.allowed.join("team-b"), &inward).unwrap();
        assert_eq!(f.roots.confine(inward.to_str().unwrap()).unwrap(), f.allowed.join("team-b"));
    }

    #[test]
    fn relative_paths_are_refused() {
        let f = fixture();
        for path in ["releases", "./releases", "../allowed/team-b", ""] {
            let e = f.roots.confine(path).unwrap_err();
            assert!(matches!(e, DirectoryRefused::Relative { .. }), "{path:?}: {e}");
        }
    }

    #[test]
    fn the_cache_is_never_a_source_even_inside_a_root_or_through_a_link() {
        let f = fixture();
        let entry = f.cache.join("github/acme/stacks");
        for path in [entry.clone(), f.cache.clone(), f.allowed.clone()] {
            let e = f.roots.confine(path.to_str().unwrap()).unwrap_err();
            assert!(matches!(e, DirectoryRefused::Cache { .. }), "{}: {e}", path.display());
        }
        let link = f.allowed.join("team-b/cached");
        symlink(&entry, &link).unwrap();
        let e = f.roots.confine(link.to_str().unwrap()).unwrap_err();
        assert!(matches!(e, DirectoryRefused::Cache { .. }), "{e}");
    }

    #[test]
    fn relative_or_missing_roots_are_ignored() {
        let f = fixture();
        let roots = DirectoryRoots::new(&[PathBuf::from("allowed"), f.other.join("gone")], &f.cache);
        assert!(!roots.enabled());
    }
}
